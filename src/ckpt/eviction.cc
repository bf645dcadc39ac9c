// EvictionWatch: the Scheduled Events watcher behind OnEviction (see eviction.h).
#include "eviction.h"

#include "gantry/core/log.h"

namespace gantry::ckpt::internal {

void EvictionHandler::operator()(const ScheduledEvent& e) const {
  if (!e.loses_local_disk()) {
    log::info("scheduled event {} ({}) keeps the local disks; no emergency checkpoint", e.event_id,
              e.event_type);
    return;
  }
  log::warn("scheduled event {}: {} of {} not before '{}'; calling the eviction handler",
            e.event_id, e.event_type, fmt::join(e.resources, ","), e.not_before_text);
  fn_(e);
  if (acknowledge_) {
    Status s = acknowledge_(e.event_id);
    if (!s.ok()) log::warn("acknowledging scheduled event {}: {}", e.event_id, s.message());
  }
}

Status EvictionWatch::Start(EvictionCallback fn, ScheduledEventsOptions options, bool acknowledge) {
  if (!fn) return InvalidArgument("the eviction callback is empty");
  Stop();
  watcher_ = std::make_unique<ScheduledEventsWatcher>(options);
  // Acknowledging goes through its own watcher object: the callback may
  // stop (and so destroy) the polling one.
  EvictionHandler::AckFn ack;
  if (acknowledge) {
    auto acker = std::make_shared<ScheduledEventsWatcher>(options);
    ack = [acker](std::string_view id) { return acker->Acknowledge(id); };
  }
  return watcher_->Start(EvictionHandler(std::move(fn), std::move(ack)));
}

void EvictionWatch::Stop() {
  if (watcher_) watcher_->Stop();
  watcher_.reset();
}

}  // namespace gantry::ckpt::internal
