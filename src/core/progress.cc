#include "gantry/core/progress.h"

#include <unistd.h>

#include <algorithm>

#include "gantry/core/units.h"

namespace gantry {
namespace {

constexpr std::chrono::milliseconds kRedrawInterval(100);
constexpr size_t kBarWidth = 20;
// Erases from the cursor to the end of the line, so a shorter redraw leaves no tail.
constexpr const char* kClearToEol = "\x1b[K";

}  // namespace

Progress::Progress(std::string_view title, uint64_t total, Options options)
    : title_(title), total_(total), options_(options) {
  if (options_.clock == nullptr) options_.clock = &SystemClock();
  active_ = options_.enabled && options_.out != nullptr &&
            (options_.force_tty || ::isatty(::fileno(options_.out)) == 1);
  start_ = options_.clock->Now();
}

Progress::~Progress() { Finish(); }

void Progress::Update(uint64_t done, std::string_view label) {
  if (finished_) return;
  done_ = done;
  label_ = label;
  if (!active_) return;
  std::chrono::nanoseconds now = options_.clock->Now();
  if (drawing_ && now - last_draw_ < kRedrawInterval) return;
  last_draw_ = now;
  Draw();
}

void Progress::Draw() {
  double fraction = total_ == 0 ? 0.0 : std::min(1.0, static_cast<double>(done_) / total_);
  size_t filled = static_cast<size_t>(fraction * kBarWidth);
  std::string bar(filled, '=');
  if (filled < kBarWidth) bar += '>';
  bar.resize(kBarWidth, ' ');
  std::string line = "\r[" + bar + "] " + std::to_string(done_) + "/" + std::to_string(total_);
  if (!title_.empty()) line += " " + title_;
  if (!label_.empty()) line += " " + label_;
  line += "  " + FormatDuration(options_.clock->Now() - start_);
  line += kClearToEol;
  std::fputs(line.c_str(), options_.out);
  std::fflush(options_.out);
  drawing_ = true;
}

void Progress::Finish() {
  if (finished_) return;
  finished_ = true;
  if (!drawing_) return;
  std::fprintf(options_.out, "\r%s", kClearToEol);
  std::fflush(options_.out);
  drawing_ = false;
}

}  // namespace gantry
