// Spot eviction (internal to src/ckpt): CheckpointManager::OnEviction runs a
// Scheduled Events watcher (gantry/core/scheduled_events.h) and hands the
// events that take this VM's local disks (Preempt, Terminate, Redeploy) to
// the user's callback, so training can make an emergency checkpoint before
// NotBefore.
//
// Threads: EvictionWatch's Start and Stop are for the thread that uses the
// manager; the handler runs on the watcher's polling thread. No lock is
// expected of callers and none is held while the callback runs.
#pragma once

#include <functional>
#include <memory>
#include <string_view>

#include "gantry/ckpt/manager.h"
#include "gantry/core/scheduled_events.h"
#include "gantry/core/status.h"

namespace gantry::ckpt::internal {

// What the watcher does with each new event: events that keep the local
// disks (Freeze, Reboot, unknown types) are logged and otherwise ignored;
// the others are logged, passed to `fn` and then, when `acknowledge` is set,
// acknowledged with it (its error is logged, never thrown).
class EvictionHandler {
 public:
  using AckFn = std::function<Status(std::string_view event_id)>;
  EvictionHandler(EvictionCallback fn, AckFn acknowledge)
      : fn_(std::move(fn)), acknowledge_(std::move(acknowledge)) {}

  void operator()(const ScheduledEvent& e) const;

 private:
  EvictionCallback fn_;
  AckFn acknowledge_;  // empty: do not acknowledge
};

class EvictionWatch {
 public:
  EvictionWatch() = default;
  EvictionWatch(const EvictionWatch&) = delete;
  EvictionWatch& operator=(const EvictionWatch&) = delete;
  ~EvictionWatch() { Stop(); }

  // Replaces a running watcher with one polling `options` and calling an
  // EvictionHandler around `fn` (acknowledging with StartRequests when
  // `acknowledge`). InvalidArgument for an empty `fn`.
  Status Start(EvictionCallback fn, ScheduledEventsOptions options, bool acknowledge);
  // Stops and joins the watcher; no-op without one.
  void Stop();

 private:
  std::unique_ptr<ScheduledEventsWatcher> watcher_;
};

}  // namespace gantry::ckpt::internal
