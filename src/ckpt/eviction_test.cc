// The eviction handler on its own: which Scheduled Events reach the user's
// callback, and that acknowledging comes after it. (The watcher polling a
// mock IMDS end to end is in tier_integration_test.cc.)
#include "eviction.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gantry::ckpt::internal {
namespace {

ScheduledEvent Event(ScheduledEventType type, std::string id) {
  ScheduledEvent e;
  e.event_id = std::move(id);
  e.type = type;
  e.event_type = std::string(ScheduledEventTypeName(type));
  e.resources = {"vm-1"};
  return e;
}

// Records the callback and acknowledgement calls in order.
struct Recorder {
  std::vector<std::string> calls;
  Status ack_status;
  EvictionHandler Handler(bool acknowledge) {
    EvictionHandler::AckFn ack;
    if (acknowledge) {
      ack = [this](std::string_view id) {
        calls.push_back("ack " + std::string(id));
        return ack_status;
      };
    }
    return EvictionHandler([this](const ScheduledEvent& e) { calls.push_back("fn " + e.event_id); },
                           ack);
  }
};

TEST(EvictionHandlerTest, EventsThatTakeTheLocalDisksReachTheCallbackThenTheAck) {
  for (ScheduledEventType t : {ScheduledEventType::kPreempt, ScheduledEventType::kTerminate,
                               ScheduledEventType::kRedeploy}) {
    Recorder rec;
    rec.Handler(/*acknowledge=*/true)(Event(t, "id-1"));
    EXPECT_EQ(rec.calls, (std::vector<std::string>{"fn id-1", "ack id-1"}))
        << ScheduledEventTypeName(t);
  }
}

TEST(EvictionHandlerTest, EventsThatKeepTheDisksAreIgnored) {
  for (ScheduledEventType t :
       {ScheduledEventType::kFreeze, ScheduledEventType::kReboot, ScheduledEventType::kUnknown}) {
    Recorder rec;
    rec.Handler(/*acknowledge=*/true)(Event(t, "id-2"));
    EXPECT_TRUE(rec.calls.empty()) << ScheduledEventTypeName(t);
  }
}

TEST(EvictionHandlerTest, WithoutAcknowledgeOnlyTheCallbackRuns) {
  Recorder rec;
  rec.Handler(/*acknowledge=*/false)(Event(ScheduledEventType::kPreempt, "id-3"));
  EXPECT_EQ(rec.calls, std::vector<std::string>{"fn id-3"});
}

TEST(EvictionHandlerTest, AFailedAcknowledgementIsOnlyLogged) {
  Recorder rec;
  rec.ack_status = Unavailable("IMDS answered 400");
  EvictionHandler h = rec.Handler(/*acknowledge=*/true);
  h(Event(ScheduledEventType::kPreempt, "id-4"));
  h(Event(ScheduledEventType::kTerminate, "id-5"));
  EXPECT_EQ(rec.calls, (std::vector<std::string>{"fn id-4", "ack id-4", "fn id-5", "ack id-5"}));
}

TEST(EvictionWatchTest, RefusesAnEmptyCallbackAndStopsWithoutAWatcher) {
  EvictionWatch watch;
  watch.Stop();  // nothing started: a no-op
  Status s = watch.Start(EvictionCallback(), ScheduledEventsOptions(), false);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "the eviction callback is empty");
}

}  // namespace
}  // namespace gantry::ckpt::internal
