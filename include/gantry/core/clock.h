// Time behind an interface so that tests control it. Production code takes a
// `const Clock&` (default: SystemClock()); tests pass a FakeClock.
#pragma once

#include <chrono>
#include <mutex>

namespace gantry {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time since an arbitrary epoch; never goes backwards.
  virtual std::chrono::nanoseconds Now() const = 0;
  // Wall-clock time (for timestamps in reports).
  virtual std::chrono::system_clock::time_point WallNow() const = 0;
  // Blocks for `d` (a FakeClock advances itself instead).
  virtual void SleepFor(std::chrono::nanoseconds d) const = 0;
};

// The process-wide real clock (steady_clock / system_clock).
const Clock& SystemClock();

// A clock that moves only when told to. Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(std::chrono::nanoseconds start = std::chrono::seconds(1000),
                     std::chrono::system_clock::time_point wall_start =
                         std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000)));
  std::chrono::nanoseconds Now() const override;
  std::chrono::system_clock::time_point WallNow() const override;
  // Advances both clocks by `d` instead of sleeping. A non-positive `d` does
  // nothing (time never goes backwards).
  void SleepFor(std::chrono::nanoseconds d) const override;
  void Advance(std::chrono::nanoseconds d);

 private:
  mutable std::mutex mu_;
  mutable std::chrono::nanoseconds now_;
  mutable std::chrono::system_clock::time_point wall_;
};

}  // namespace gantry
