// Azure Scheduled Events: parser and polling watcher (see
// gantry/core/scheduled_events.h).
#include "gantry/core/scheduled_events.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <mutex>
#include <set>
#include <thread>

#include "gantry/core/http_client.h"
#include "gantry/core/log.h"

namespace gantry {
namespace {

constexpr const char* kEndpointEnv = "GANTRY_IMDS_ENDPOINT";
// Stop() waits at most about this long for a sleeping watcher.
constexpr std::chrono::milliseconds kSleepSlice{50};

std::string DefaultEndpoint() {
  const char* env = std::getenv(kEndpointEnv);
  return env != nullptr && *env != '\0' ? std::string(env)
                                        : std::string(ScheduledEventsWatcher::kDefaultEndpoint);
}

ScheduledEventType TypeFromName(std::string_view name) {
  if (name == "Preempt") return ScheduledEventType::kPreempt;
  if (name == "Terminate") return ScheduledEventType::kTerminate;
  if (name == "Reboot") return ScheduledEventType::kReboot;
  if (name == "Redeploy") return ScheduledEventType::kRedeploy;
  if (name == "Freeze") return ScheduledEventType::kFreeze;
  return ScheduledEventType::kUnknown;
}

// Reads event.<key> as a string into *out: absent or null leaves "".
Status ReadString(const Json& event, const char* key, const std::string& where, std::string* out) {
  auto it = event.find(key);
  if (it == event.end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) {
    return DataLoss(where + ": " + key + " is a " + it->type_name() + ", expected a string");
  }
  *out = it->get<std::string>();
  return Status::Ok();
}

}  // namespace

std::string_view ScheduledEventTypeName(ScheduledEventType type) {
  switch (type) {
    case ScheduledEventType::kPreempt:
      return "Preempt";
    case ScheduledEventType::kTerminate:
      return "Terminate";
    case ScheduledEventType::kReboot:
      return "Reboot";
    case ScheduledEventType::kRedeploy:
      return "Redeploy";
    case ScheduledEventType::kFreeze:
      return "Freeze";
    case ScheduledEventType::kUnknown:
      break;
  }
  return "Unknown";
}

Json ScheduledEvent::ToJson() const {
  Json j;
  j["EventId"] = event_id;
  j["EventType"] = event_type;
  j["ResourceType"] = resource_type;
  j["Resources"] = resources;
  j["EventStatus"] = event_status;
  j["NotBefore"] = not_before_text;
  j["Description"] = description;
  j["EventSource"] = event_source;
  j["DurationInSeconds"] = duration_s;
  return j;
}

Result<ScheduledEventsDocument> ParseScheduledEvents(std::string_view text,
                                                     std::string_view origin) {
  const std::string o(origin);
  auto doc = ParseJson(text, origin);
  // A document that does not parse is a damaged response, not bad user input.
  if (!doc.ok()) return DataLoss(doc.status().message());
  if (!doc->is_object()) {
    return DataLoss(o + ": the scheduled events document is a " + std::string(doc->type_name()) +
                    ", expected an object");
  }
  ScheduledEventsDocument out;
  auto inc = doc->find("DocumentIncarnation");
  if (inc == doc->end() || !inc->is_number_integer()) {
    return DataLoss(o + ": DocumentIncarnation is missing or not an integer");
  }
  out.incarnation = inc->get<int64_t>();
  auto events = doc->find("Events");
  if (events == doc->end() || !events->is_array()) {
    return DataLoss(o + ": Events is missing or not an array");
  }
  for (size_t i = 0; i < events->size(); ++i) {
    const Json& e = (*events)[i];
    std::string where = o + ": Events[" + std::to_string(i) + "]";
    if (!e.is_object()) {
      return DataLoss(where + " is a " + std::string(e.type_name()) + ", expected an object");
    }
    ScheduledEvent ev;
    RETURN_IF_ERROR(ReadString(e, "EventId", where, &ev.event_id));
    if (ev.event_id.empty()) return DataLoss(where + " has no EventId");
    where += " (EventId " + ev.event_id + ")";
    RETURN_IF_ERROR(ReadString(e, "EventType", where, &ev.event_type));
    if (ev.event_type.empty()) return DataLoss(where + " has no EventType");
    ev.type = TypeFromName(ev.event_type);
    RETURN_IF_ERROR(ReadString(e, "ResourceType", where, &ev.resource_type));
    RETURN_IF_ERROR(ReadString(e, "EventStatus", where, &ev.event_status));
    RETURN_IF_ERROR(ReadString(e, "NotBefore", where, &ev.not_before_text));
    RETURN_IF_ERROR(ReadString(e, "Description", where, &ev.description));
    RETURN_IF_ERROR(ReadString(e, "EventSource", where, &ev.event_source));
    if (auto r = e.find("Resources"); r != e.end() && !r->is_null()) {
      if (!r->is_array()) {
        return DataLoss(where + ": Resources is a " + std::string(r->type_name()) +
                        ", expected an array of names");
      }
      for (const Json& name : *r) {
        if (!name.is_string()) return DataLoss(where + ": Resources holds a non-string");
        ev.resources.push_back(name.get<std::string>());
      }
    }
    if (auto d = e.find("DurationInSeconds"); d != e.end() && !d->is_null()) {
      if (!d->is_number_integer()) {
        return DataLoss(where + ": DurationInSeconds is a " + std::string(d->type_name()) +
                        ", expected an integer");
      }
      ev.duration_s = d->get<int64_t>();
    }
    // NotBefore is blank once the event has started.
    bool blank = std::all_of(ev.not_before_text.begin(), ev.not_before_text.end(),
                             [](char c) { return c == ' '; });
    if (!blank) {
      auto t = ParseRfc1123Date(ev.not_before_text);
      if (!t.ok()) return DataLoss(where + ": NotBefore " + t.status().message());
      ev.not_before = *t;
    }
    out.events.push_back(std::move(ev));
  }
  return out;
}

// ---------------------------------------------------------------- watcher

struct ScheduledEventsWatcher::State {
  ScheduledEventsOptions options;
  std::string url;
  const Clock* clock = nullptr;

  mutable std::mutex mu;  // guards the fields below
  std::set<std::string> seen;
  Status last_error;
  std::string last_logged;  // the last error message logged (default on_error)
  uint64_t polls = 0;
  int64_t incarnation = -1;

  std::thread thread;
  std::atomic<bool> stop{false};
  std::atomic<bool> running{false};
};

ScheduledEventsWatcher::ScheduledEventsWatcher(ScheduledEventsOptions options)
    : state_(std::make_shared<State>()) {
  std::string endpoint = options.endpoint.empty() ? DefaultEndpoint() : options.endpoint;
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  state_->url = endpoint + std::string(kPath);
  state_->clock = options.clock ? options.clock : &SystemClock();
  state_->options = std::move(options);
}

ScheduledEventsWatcher::~ScheduledEventsWatcher() { Stop(); }

const std::string& ScheduledEventsWatcher::url() const { return state_->url; }

namespace {

Result<ScheduledEventsDocument> FetchDocument(const ScheduledEventsWatcher::State& st) {
  const std::string& url = st.url;
  http::Request req;
  req.url = url;
  req.headers = {{"Metadata", "true"}};
  req.deadline = st.options.deadline;
  req.max_body_bytes = 1ull << 20;  // a document lists a handful of events
  auto resp = http::Get(req);
  if (!resp.ok()) {
    Status s = resp.status();
    if (s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded) {
      return Status(s.code(), s.message() + " (Scheduled Events answer only on Azure VMs; set " +
                                  kEndpointEnv + " or the endpoint option to use another one)");
    }
    if (s.code() == StatusCode::kInvalidArgument) {
      return InvalidArgument(s.message() + " (check the scheduled events endpoint)");
    }
    return s;
  }
  if (resp->status != 200) {
    std::string body = resp->body.substr(0, 200);
    return Unavailable("GET " + url + ": HTTP " + std::to_string(resp->status) + " " +
                       resp->reason + (body.empty() ? "" : ": " + body));
  }
  return ParseScheduledEvents(resp->body, "scheduled events from " + url);
}

Result<std::vector<ScheduledEvent>> Poll(ScheduledEventsWatcher::State& st,
                                         const ScheduledEventsWatcher::Callback& callback) {
  auto doc = FetchDocument(st);
  std::vector<ScheduledEvent> fresh;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    ++st.polls;
    st.last_error = doc.status();
    if (!doc.ok()) return doc.status();
    st.incarnation = doc->incarnation;
    for (ScheduledEvent& e : doc->events) {
      if (st.seen.insert(e.event_id).second) fresh.push_back(std::move(e));
    }
  }
  // Outside the lock: a callback may call the accessors or Acknowledge.
  if (callback) {
    for (const ScheduledEvent& e : fresh) callback(e);
  }
  return fresh;
}

}  // namespace

Result<ScheduledEventsDocument> ScheduledEventsWatcher::Fetch() const {
  return FetchDocument(*state_);
}

Result<std::vector<ScheduledEvent>> ScheduledEventsWatcher::PollOnce(const Callback& callback) {
  return Poll(*state_, callback);
}

Status ScheduledEventsWatcher::Start(Callback callback) {
  State& st = *state_;
  if (st.thread.joinable()) {
    return FailedPrecondition("the scheduled events watcher for " + st.url + " is already running");
  }
  if (st.options.interval.count() <= 0) {
    return InvalidArgument("scheduled events poll interval " +
                           std::to_string(st.options.interval.count()) + " ms must be positive");
  }
  st.stop = false;
  st.running = true;
  // The thread shares the state (not `this`): after Stop() from inside a
  // callback detaches it, it may outlive the watcher object.
  st.thread = std::thread([state = state_, callback = std::move(callback)] {
    State& s = *state;
    while (!s.stop.load()) {
      const auto start = s.clock->Now();
      Status err;
      try {
        auto r = Poll(s, callback);
        err = r.status();
      } catch (const std::exception& e) {
        // The callback is user code; its exception must not end the process.
        err = Internal("scheduled events callback threw: " + std::string(e.what()));
      } catch (...) {
        err = Internal("scheduled events callback threw a non-standard exception");
      }
      if (!err.ok()) {
        if (s.options.on_error) {
          s.options.on_error(err);
        } else {
          std::lock_guard<std::mutex> lock(s.mu);
          if (err.message() != s.last_logged) {
            log::warn("scheduled events: {}", err.message());
            s.last_logged = err.message();
          }
        }
      }
      const auto due = start + s.options.interval;
      while (!s.stop.load()) {
        auto left = due - s.clock->Now();
        if (left <= std::chrono::nanoseconds(0)) break;
        s.clock->SleepFor(std::min<std::chrono::nanoseconds>(left, kSleepSlice));
      }
    }
    s.running = false;
  });
  return Status::Ok();
}

void ScheduledEventsWatcher::Stop() {
  State& st = *state_;
  st.stop = true;
  if (st.thread.joinable()) {
    if (st.thread.get_id() == std::this_thread::get_id()) {
      // Stop() from inside a callback: the thread ends after the callback returns.
      st.thread.detach();
    } else {
      st.thread.join();
    }
  }
}

bool ScheduledEventsWatcher::running() const { return state_->running.load(); }

Status ScheduledEventsWatcher::Acknowledge(std::string_view event_id) const {
  const std::string& url = state_->url;
  if (event_id.empty()) return InvalidArgument("cannot acknowledge an empty EventId");
  Json body;
  body["StartRequests"] = Json::array({Json{{"EventId", std::string(event_id)}}});
  http::Request req;
  req.method = "POST";
  req.url = url;
  req.headers = {{"Metadata", "true"}, {"Content-Type", "application/json"}};
  req.deadline = state_->options.deadline;
  req.body = body.dump();
  ASSIGN_OR_RETURN(http::Response resp, http::Send(req));
  if (resp.status != 200) {
    std::string text = resp.body.substr(0, 200);
    return Unavailable("POST " + url + " (acknowledging event " + std::string(event_id) +
                       "): HTTP " + std::to_string(resp.status) + " " + resp.reason +
                       (text.empty() ? "" : ": " + text));
  }
  return Status::Ok();
}

Status ScheduledEventsWatcher::last_error() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->last_error;
}

uint64_t ScheduledEventsWatcher::polls() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->polls;
}

int64_t ScheduledEventsWatcher::incarnation() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->incarnation;
}

}  // namespace gantry
