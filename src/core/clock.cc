#include "gantry/core/clock.h"

#include <thread>

namespace gantry {
namespace {

class RealClock final : public Clock {
 public:
  std::chrono::nanoseconds Now() const override {
    return std::chrono::steady_clock::now().time_since_epoch();
  }
  std::chrono::system_clock::time_point WallNow() const override {
    return std::chrono::system_clock::now();
  }
  void SleepFor(std::chrono::nanoseconds d) const override { std::this_thread::sleep_for(d); }
};

}  // namespace

const Clock& SystemClock() {
  static const RealClock clock;
  return clock;
}

FakeClock::FakeClock(std::chrono::nanoseconds start,
                     std::chrono::system_clock::time_point wall_start)
    : now_(start), wall_(wall_start) {}

std::chrono::nanoseconds FakeClock::Now() const {
  std::lock_guard<std::mutex> lock(mu_);
  return now_;
}

std::chrono::system_clock::time_point FakeClock::WallNow() const {
  std::lock_guard<std::mutex> lock(mu_);
  return wall_;
}

void FakeClock::SleepFor(std::chrono::nanoseconds d) const {
  std::lock_guard<std::mutex> lock(mu_);
  // A negative sleep returns at once on a real clock; time must not go backwards.
  if (d <= std::chrono::nanoseconds::zero()) return;
  now_ += d;
  wall_ += std::chrono::duration_cast<std::chrono::system_clock::duration>(d);
}

void FakeClock::Advance(std::chrono::nanoseconds d) { SleepFor(d); }

}  // namespace gantry
