// Azure Scheduled Events: the IMDS document that announces maintenance and
// Spot evictions (Preempt: about 30 s notice, best effort), a parser for it,
// and a watcher that polls it and reports every event once.
//
//   ScheduledEventsWatcher watcher;  // GANTRY_IMDS_ENDPOINT or http://169.254.169.254
//   RETURN_IF_ERROR(watcher.Start([&](const ScheduledEvent& e) {
//     if (e.type == ScheduledEventType::kPreempt) EmergencyCheckpoint(e.not_before);
//   }));
//   ...
//   watcher.Stop();
//
// Request: GET <endpoint>/metadata/scheduledevents?api-version=2020-07-01 with
// "Metadata: true" (the service answers 400 without it), once per interval
// (default 1 s, as Azure recommends). Acknowledge() POSTs
// {"StartRequests":[{"EventId":"..."}]} to the same URL, which lets the
// platform start the event early (for every VM in its Resources).
//
// Thread-safety: Fetch, Acknowledge and the accessors may be called from any
// thread; Start/Stop/PollOnce from one thread at a time. Callbacks run on the
// watcher's thread (Start) or the caller's (PollOnce), one at a time; a slow
// callback delays the next poll, so long work belongs on another thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/clock.h"
#include "gantry/core/json.h"
#include "gantry/core/status.h"
#include "gantry/core/text.h"

namespace gantry {

enum class ScheduledEventType { kPreempt, kTerminate, kReboot, kRedeploy, kFreeze, kUnknown };

// "Preempt", ... ("Unknown" for kUnknown).
std::string_view ScheduledEventTypeName(ScheduledEventType type);

struct ScheduledEvent {
  std::string event_id;    // EventId (a GUID)
  std::string event_type;  // EventType as received (also for types this version does not know)
  ScheduledEventType type = ScheduledEventType::kUnknown;
  std::string resource_type;           // ResourceType, e.g. "VirtualMachine"
  std::vector<std::string> resources;  // Resources: the VM names affected
  std::string event_status;            // EventStatus: "Scheduled" or "Started"
  std::string not_before_text;         // NotBefore as received ("" once started)
  // NotBefore parsed (RFC 1123, "Mon, 19 Sep 2016 18:29:47 GMT"); empty when blank.
  std::optional<std::chrono::system_clock::time_point> not_before;
  std::string description;   // Description
  std::string event_source;  // EventSource: "Platform" or "User"
  int64_t duration_s = -1;   // DurationInSeconds: -1 unknown, 0 no impact

  // Events after which this VM's local (ephemeral) disks are gone: Preempt
  // (Spot eviction), Terminate and Redeploy (moved to another host).
  bool loses_local_disk() const {
    return type == ScheduledEventType::kPreempt || type == ScheduledEventType::kTerminate ||
           type == ScheduledEventType::kRedeploy;
  }
  // The document's field names and values (NotBefore as received).
  Json ToJson() const;
};

struct ScheduledEventsDocument {
  int64_t incarnation = 0;  // DocumentIncarnation: increments whenever the list changes
  std::vector<ScheduledEvent> events;
};

// ParseRfc1123Date (NotBefore) lives in gantry/core/text.h.

// Parses a scheduledevents document. `origin` (a URL or file name) starts
// every message. DataLoss for text that is not JSON, a missing or non-integer
// DocumentIncarnation, a missing or non-array Events, an event that is not an
// object or lacks a non-empty EventId or EventType, a field of the wrong type,
// or a NotBefore that is neither blank nor an RFC 1123 date (the message
// names the event and the value). An EventType this version does not know
// is kept (type kUnknown), not an error.
Result<ScheduledEventsDocument> ParseScheduledEvents(std::string_view text,
                                                     std::string_view origin);

struct ScheduledEventsOptions {
  // Base URL ("http://127.0.0.1:8080"); empty: GANTRY_IMDS_ENDPOINT when set
  // and not empty, else http://169.254.169.254.
  std::string endpoint;
  std::chrono::milliseconds interval{1000};  // between the starts of two polls
  std::chrono::milliseconds deadline{2000};  // one HTTP exchange
  const Clock* clock = nullptr;              // default: SystemClock()
  // Called (on the watcher thread) when a poll fails, with the error; the
  // watcher keeps polling. Default: a warning in the log, once per distinct
  // message (an unreachable endpoint would otherwise log every second).
  std::function<void(const Status&)> on_error;
};

class ScheduledEventsWatcher {
 public:
  static constexpr std::string_view kDefaultEndpoint = "http://169.254.169.254";
  static constexpr std::string_view kPath = "/metadata/scheduledevents?api-version=2020-07-01";

  using Callback = std::function<void(const ScheduledEvent&)>;

  explicit ScheduledEventsWatcher(ScheduledEventsOptions options = {});
  ~ScheduledEventsWatcher();  // Stop()
  ScheduledEventsWatcher(const ScheduledEventsWatcher&) = delete;
  ScheduledEventsWatcher& operator=(const ScheduledEventsWatcher&) = delete;

  // The document URL (endpoint + kPath).
  const std::string& url() const;

  // One GET and parse. Errors name the URL: Unavailable/DeadlineExceeded when
  // the endpoint does not answer (not an Azure VM, or IMDS blocked),
  // Unavailable for an HTTP status other than 200 (with the body's start),
  // DataLoss for a malformed document, InvalidArgument for a bad endpoint.
  Result<ScheduledEventsDocument> Fetch() const;

  // Fetches once and calls `callback` for every event whose EventId was not
  // reported before (by this watcher), in document order; returns those events.
  Result<std::vector<ScheduledEvent>> PollOnce(const Callback& callback);

  // Starts a thread that calls PollOnce every interval until Stop().
  // FailedPrecondition when already started. Errors of single polls go to
  // options.on_error and last_error(); they do not stop the watcher.
  Status Start(Callback callback);
  // Stops and joins the thread (promptly: within about 50 ms plus an HTTP
  // exchange in flight). Idempotent.
  void Stop();
  bool running() const;

  // POSTs {"StartRequests":[{"EventId":"<id>"}]}. InvalidArgument for an
  // empty id; Unavailable naming the URL, the id and the HTTP status for an
  // answer other than 200 (400: malformed request or unknown id).
  Status Acknowledge(std::string_view event_id) const;

  // The error of the most recent poll (Ok after a successful one), the number
  // of polls done and the DocumentIncarnation last seen (-1 before any).
  Status last_error() const;
  uint64_t polls() const;
  int64_t incarnation() const;

  struct State;  // internal (shared with the polling thread)

 private:
  std::shared_ptr<State> state_;
};

}  // namespace gantry
