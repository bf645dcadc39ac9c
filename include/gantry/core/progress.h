// Progress reporting for long work. On a TTY it redraws one line on stderr
// ("[=====>    ] 12/40 all_reduce 64 MiB  3.2 s"); when stderr is not a TTY it
// prints nothing (logs carry the story); in --json mode it is always silent.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "gantry/core/clock.h"

namespace gantry {

// Not thread-safe: one thread owns a Progress. `out` and `clock` must outlive it.
class Progress {
 public:
  struct Options {
    bool enabled = true;     // false in --json mode
    FILE* out = stderr;      // where the bar goes
    bool force_tty = false;  // tests: draw even when `out` is not a TTY
    const Clock* clock = nullptr;  // nullptr = the system clock
  };
  Progress(std::string_view title, uint64_t total, Options options);
  ~Progress();  // finishes the line if still drawn

  // Sets the absolute amount done and an optional short label; redraws at most
  // every 100 ms (the first update draws at once). No effect after Finish().
  void Update(uint64_t done, std::string_view label = {});
  // Clears the bar line so ordinary output can follow.
  void Finish();

  // True while a bar line is on screen (drawn and not yet finished).
  bool drawing() const { return drawing_; }

 private:
  void Draw();
  std::string title_;
  uint64_t total_;
  uint64_t done_ = 0;
  std::string label_;
  Options options_;
  bool active_;  // enabled and drawing to a terminal (or forced)
  bool drawing_ = false;
  bool finished_ = false;
  std::chrono::nanoseconds start_{};
  std::chrono::nanoseconds last_draw_{};
};

}  // namespace gantry
