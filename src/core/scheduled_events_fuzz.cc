// libFuzzer target for scheduled_events.h: a scheduledevents document (an IMDS
// response, or a file in tests) either parses or is DataLoss; an RFC 1123 date
// either parses or is InvalidArgument. No exception escapes, nothing crashes.
#include <cstdint>
#include <string>
#include <string_view>

#include "gantry/core/scheduled_events.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);

  auto doc = gantry::ParseScheduledEvents(text, "fuzz.json");
  if (doc.ok()) {
    for (const gantry::ScheduledEvent& e : doc->events) {
      Check(!e.event_id.empty() && !e.event_type.empty());
      (void)e.ToJson().dump();
      (void)e.loses_local_disk();
      (void)gantry::ScheduledEventTypeName(e.type);
    }
  } else {
    Check(doc.status().code() == gantry::StatusCode::kDataLoss);
  }

  auto date = gantry::ParseRfc1123Date(text);
  if (date.ok()) {
    // Years are four digits and from 1970, so the time is never before the epoch.
    Check(date->time_since_epoch().count() >= 0);
  } else {
    Check(date.status().code() == gantry::StatusCode::kInvalidArgument);
  }
  return 0;
}
