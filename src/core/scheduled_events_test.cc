#include "gantry/core/scheduled_events.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "testing/http_test_server.h"

namespace gantry {
namespace {

using ::gantry::testing::ClosedLoopbackPort;
using ::testing::HasSubstr;

// A mock IMDS: answers any number of connections (one request each) on
// 127.0.0.1 from the current document; POSTs are recorded and answered with
// `post_status`. Requests without "Metadata: true" get 400 like Azure's.
class MockImds {
 public:
  MockImds() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("mock IMDS setup failed");
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~MockImds() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void SetDocument(std::string doc, int status = 200) {
    std::lock_guard<std::mutex> lock(mu_);
    doc_ = std::move(doc);
    status_ = status;
  }
  void SetPostStatus(int status) {
    std::lock_guard<std::mutex> lock(mu_);
    post_status_ = status;
  }
  std::vector<std::string> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  std::vector<std::string> post_bodies() const {
    std::lock_guard<std::mutex> lock(mu_);
    return post_bodies_;
  }
  int gets() const {
    std::lock_guard<std::mutex> lock(mu_);
    return gets_;
  }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      Handle(c);
      ::close(c);
    }
  }
  void Handle(int c) {
    std::string data;
    char buf[4096];
    size_t head_end = std::string::npos;
    size_t need = 0;
    while (true) {
      pollfd p{c, POLLIN, 0};
      if (::poll(&p, 1, 2000) <= 0) return;
      ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) return;
      data.append(buf, static_cast<size_t>(n));
      if (head_end == std::string::npos) {
        head_end = data.find("\r\n\r\n");
        if (head_end == std::string::npos) continue;
        std::string lower = data.substr(0, head_end);
        for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        size_t cl = lower.find("content-length:");
        need = cl == std::string::npos ? 0 : std::stoul(lower.substr(cl + 15));
      }
      if (data.size() >= head_end + 4 + need) break;
    }
    std::string head = data.substr(0, head_end);
    std::string body = data.substr(head_end + 4, need);
    int status;
    std::string reply;
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(head);
      bool post = head.rfind("POST ", 0) == 0;
      if (head.find("\r\nMetadata: true") == std::string::npos) {
        status = 400;
        reply = R"({"error":"Bad request. Required metadata header not specified"})";
      } else if (post) {
        post_bodies_.push_back(body);
        status = post_status_;
      } else {
        ++gets_;
        status = status_;
        reply = doc_;
      }
    }
    std::string resp = "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: " +
                       "application/json\r\nContent-Length: " + std::to_string(reply.size()) +
                       "\r\nConnection: close\r\n\r\n" + reply;
    (void)!::send(c, resp.data(), resp.size(), MSG_NOSIGNAL);
  }

  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  std::string doc_ = R"({"DocumentIncarnation":0,"Events":[]})";
  int status_ = 200;
  int post_status_ = 200;
  int gets_ = 0;
  std::vector<std::string> requests_;
  std::vector<std::string> post_bodies_;
};

// Shaped like the documented example (values made up).
constexpr std::string_view kPreemptDoc = R"json({
  "DocumentIncarnation": 3,
  "Events": [{
    "EventId": "602d9444-d2cd-49c7-8624-8643e7171297",
    "EventType": "Preempt",
    "ResourceType": "VirtualMachine",
    "Resources": ["gpu-node-07"],
    "EventStatus": "Scheduled",
    "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT",
    "Description": "Virtual machine is being evicted.",
    "EventSource": "Platform",
    "DurationInSeconds": -1
  }]
})json";

std::string TwoEventDoc() {
  return R"json({"DocumentIncarnation": 4, "Events": [
    {"EventId": "602d9444-d2cd-49c7-8624-8643e7171297", "EventType": "Preempt",
     "ResourceType": "VirtualMachine", "Resources": ["gpu-node-07"], "EventStatus": "Started",
     "NotBefore": "", "Description": "", "EventSource": "Platform", "DurationInSeconds": -1},
    {"EventId": "b2c1", "EventType": "Freeze", "ResourceType": "VirtualMachine",
     "Resources": ["gpu-node-07", "gpu-node-08"], "EventStatus": "Scheduled",
     "NotBefore": "Tue, 20 Sep 2016 01:02:03 GMT", "Description": "Host update",
     "EventSource": "Platform", "DurationInSeconds": 9}]})json";
}

ScheduledEventsOptions At(std::string endpoint,
                          std::chrono::milliseconds interval = std::chrono::milliseconds(1000),
                          const Clock* clock = nullptr) {
  ScheduledEventsOptions o;
  o.endpoint = std::move(endpoint);
  o.interval = interval;
  o.clock = clock;
  return o;
}

TEST(ScheduledEventsParse, FullDocument) {
  auto doc = ParseScheduledEvents(kPreemptDoc, "test");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_EQ(doc->incarnation, 3);
  ASSERT_EQ(doc->events.size(), 1u);
  const ScheduledEvent& e = doc->events[0];
  EXPECT_EQ(e.event_id, "602d9444-d2cd-49c7-8624-8643e7171297");
  EXPECT_EQ(e.type, ScheduledEventType::kPreempt);
  EXPECT_TRUE(e.loses_local_disk());
  EXPECT_EQ(e.resource_type, "VirtualMachine");
  EXPECT_EQ(e.resources, std::vector<std::string>{"gpu-node-07"});
  EXPECT_EQ(e.event_status, "Scheduled");
  EXPECT_EQ(e.description, "Virtual machine is being evicted.");
  EXPECT_EQ(e.event_source, "Platform");
  EXPECT_EQ(e.duration_s, -1);
  ASSERT_TRUE(e.not_before.has_value());
  EXPECT_EQ(std::chrono::system_clock::to_time_t(*e.not_before), 1474309787);
  EXPECT_EQ(e.ToJson()["NotBefore"], "Mon, 19 Sep 2016 18:29:47 GMT");
}

TEST(ScheduledEventsParse, BlankNotBeforeAndEveryType) {
  auto doc = ParseScheduledEvents(TwoEventDoc(), "test");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  ASSERT_EQ(doc->events.size(), 2u);
  EXPECT_FALSE(doc->events[0].not_before.has_value());
  EXPECT_EQ(doc->events[1].type, ScheduledEventType::kFreeze);
  EXPECT_FALSE(doc->events[1].loses_local_disk());
  EXPECT_EQ(doc->events[1].duration_s, 9);
  EXPECT_EQ(doc->events[1].resources.size(), 2u);
  for (const char* name : {"Preempt", "Terminate", "Reboot", "Redeploy", "Freeze"}) {
    std::string text = std::string(R"({"DocumentIncarnation":1,"Events":[{"EventId":"a",)") +
                       R"("EventType":")" + name + R"("}]})";
    auto d = ParseScheduledEvents(text, "t");
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(ScheduledEventTypeName(d->events[0].type), name);
  }
  // A type this version does not know is kept, not refused.
  auto d = ParseScheduledEvents(
      R"({"DocumentIncarnation":1,"Events":[{"EventId":"a","EventType":"Hibernate"}]})", "t");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->events[0].type, ScheduledEventType::kUnknown);
  EXPECT_EQ(d->events[0].event_type, "Hibernate");
}

TEST(ScheduledEventsParse, EmptyListIsFine) {
  auto doc = ParseScheduledEvents(R"({"DocumentIncarnation":0,"Events":[]})", "t");
  ASSERT_TRUE(doc.ok());
  EXPECT_TRUE(doc->events.empty());
}

TEST(ScheduledEventsParse, MalformedDocumentsAreClearErrors) {
  struct Case {
    std::string text;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"", "origin"},
      {"{not json", "origin"},
      {"[]", "expected an object"},
      {R"({"Events":[]})", "DocumentIncarnation"},
      {R"({"DocumentIncarnation":"3","Events":[]})", "DocumentIncarnation"},
      {R"({"DocumentIncarnation":1})", "Events is missing"},
      {R"({"DocumentIncarnation":1,"Events":{}})", "Events is missing or not an array"},
      {R"({"DocumentIncarnation":1,"Events":[7]})", "Events[0] is a number"},
      {R"({"DocumentIncarnation":1,"Events":[{"EventType":"Preempt"}]})", "has no EventId"},
      {R"({"DocumentIncarnation":1,"Events":[{"EventId":"x"}]})", "EventId x) has no EventType"},
      {R"({"DocumentIncarnation":1,"Events":[{"EventId":5,"EventType":"Preempt"}]})",
       "EventId is a number"},
      {R"({"DocumentIncarnation":1,"Events":[{"EventId":"x","EventType":"Preempt",)"
       R"("Resources":"vm1"}]})",
       "Resources is a string"},
      {R"({"DocumentIncarnation":1,"Events":[{"EventId":"x","EventType":"Preempt",)"
       R"("Resources":[1]}]})",
       "non-string"},
      {R"({"DocumentIncarnation":1,"Events":[{"EventId":"x","EventType":"Preempt",)"
       R"("DurationInSeconds":"30"}]})",
       "DurationInSeconds is a string"},
      {R"({"DocumentIncarnation":1,"Events":[{"EventId":"x","EventType":"Preempt",)"
       R"("NotBefore":"tomorrow"}]})",
       "NotBefore 'tomorrow' is not an RFC 1123 date"},
      {R"({"DocumentIncarnation":1,"Events":[{"EventId":"x","EventType":"Preempt",)"
       R"("NotBefore":"Mon, 31 Sep 2016 18:29:47 GMT"}]})",
       "out of range"},
  };
  for (const Case& c : cases) {
    auto doc = ParseScheduledEvents(c.text, "origin");
    ASSERT_FALSE(doc.ok()) << c.text;
    EXPECT_EQ(doc.status().code(), StatusCode::kDataLoss) << c.text;
    EXPECT_THAT(doc.status().message(), HasSubstr(c.want)) << c.text;
    EXPECT_THAT(doc.status().message(), HasSubstr("origin")) << c.text;
  }
}

TEST(Rfc1123, ParsesAndRejects) {
  auto t = ParseRfc1123Date("19 Sep 2016 18:29:47 GMT");  // weekday optional
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(std::chrono::system_clock::to_time_t(*t), 1474309787);
  t = ParseRfc1123Date("Thu, 29 Feb 2024 00:00:00 GMT");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(std::chrono::system_clock::to_time_t(*t), 1709164800);
  for (const char* bad : {"Mon, 19 Sept 2016 18:29:47 GMT", "Mon, 19 Sep 16 18:29:47 GMT",
                          "Mon, 19 Sep 2016 18:29 GMT", "Mon, 19 Sep 2016 18:29:47 PST",
                          "Thu, 29 Feb 2023 00:00:00 GMT", "Mon, 19 Sep 2016 24:00:00 GMT",
                          "Monday, 19 Sep 2016 18:29:47 GMT", "Mon, 19 Sep 2016 18:29:47"}) {
    auto r = ParseRfc1123Date(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr(bad));
  }
}

// Found by fuzz_scheduled_events: a year past 2262 overflowed the
// nanosecond time_point (undefined behaviour) instead of being rejected.
TEST(Rfc1123, RejectsYearsBeyondTheClock) {
  auto last = ParseRfc1123Date("Fri, 31 Dec 2261 23:59:59 GMT");
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  EXPECT_EQ(std::chrono::system_clock::to_time_t(*last), 9214646399);
  for (const char* far : {"29 Feb 2424 00:00:60 UTC", "Fri, 31 Dec 9999 23:59:59 GMT"}) {
    auto r = ParseRfc1123Date(far);
    ASSERT_FALSE(r.ok()) << far;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("too far in the future"));
  }
  auto doc = ParseScheduledEvents(
      R"({"DocumentIncarnation":1,"Events":[{"EventId":"E","EventType":"Reboot",)"
      R"("NotBefore":"Mon, 1 Jan 3000 00:00:00 GMT"}]})",
      "origin");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.status().code(), StatusCode::kDataLoss);
}

TEST(ScheduledEventsWatcher, PollReportsEachEventOnce) {
  MockImds imds;
  ScheduledEventsWatcher watcher(At(imds.endpoint() + "/"));
  EXPECT_EQ(watcher.url(), imds.endpoint() + "/metadata/scheduledevents?api-version=2020-07-01");
  EXPECT_EQ(watcher.incarnation(), -1);
  std::vector<std::string> seen;
  auto cb = [&](const ScheduledEvent& e) { seen.push_back(e.event_id); };

  auto none = watcher.PollOnce(cb);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());

  imds.SetDocument(std::string(kPreemptDoc));
  auto first = watcher.PollOnce(cb);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->size(), 1u);
  EXPECT_EQ((*first)[0].type, ScheduledEventType::kPreempt);
  EXPECT_EQ(watcher.incarnation(), 3);
  auto again = watcher.PollOnce(cb);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());

  imds.SetDocument(TwoEventDoc());
  auto second = watcher.PollOnce(cb);
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->size(), 1u);
  EXPECT_EQ((*second)[0].event_id, "b2c1");
  EXPECT_EQ(seen, (std::vector<std::string>{"602d9444-d2cd-49c7-8624-8643e7171297", "b2c1"}));
  EXPECT_EQ(watcher.polls(), 4u);

  auto reqs = imds.requests();
  ASSERT_FALSE(reqs.empty());
  EXPECT_THAT(reqs[0], HasSubstr("GET /metadata/scheduledevents?api-version=2020-07-01 "));
  EXPECT_THAT(reqs[0], HasSubstr("\r\nMetadata: true"));
}

TEST(ScheduledEventsWatcher, MalformedAndFailingAnswersAreErrorsNotCrashes) {
  MockImds imds;
  ScheduledEventsWatcher watcher(At(imds.endpoint()));
  imds.SetDocument(R"({"DocumentIncarnation":1,"Events":[{"EventType":"Preempt"}]})");
  auto r = watcher.PollOnce(nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr(watcher.url()));
  EXPECT_EQ(watcher.last_error().code(), StatusCode::kDataLoss);

  imds.SetDocument("{\"truncated", 200);
  EXPECT_EQ(watcher.PollOnce(nullptr).status().code(), StatusCode::kDataLoss);

  imds.SetDocument(R"({"error":"busy"})", 503);
  r = watcher.PollOnce(nullptr);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("HTTP 503"));

  // Recovers on the next good answer.
  imds.SetDocument(std::string(kPreemptDoc));
  r = watcher.PollOnce(nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->size(), 1u);
  EXPECT_TRUE(watcher.last_error().ok());
}

TEST(ScheduledEventsWatcher, UnreachableEndpointSaysWhy) {
  ScheduledEventsWatcher watcher(At("http://127.0.0.1:" + std::to_string(ClosedLoopbackPort())));
  auto r = watcher.Fetch();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("only on Azure VMs"));
  ScheduledEventsWatcher bad(At("https://169.254.169.254"));
  EXPECT_EQ(bad.Fetch().status().code(), StatusCode::kInvalidArgument);
}

TEST(ScheduledEventsWatcher, EnvironmentSetsTheDefaultEndpoint) {
  ::setenv("GANTRY_IMDS_ENDPOINT", "http://127.0.0.1:1", 1);
  ScheduledEventsWatcher watcher;
  ::unsetenv("GANTRY_IMDS_ENDPOINT");
  EXPECT_EQ(watcher.url(), "http://127.0.0.1:1/metadata/scheduledevents?api-version=2020-07-01");
  ScheduledEventsWatcher azure;
  EXPECT_EQ(azure.url(), "http://169.254.169.254/metadata/scheduledevents?api-version=2020-07-01");
}

TEST(ScheduledEventsWatcher, AcknowledgePostsStartRequests) {
  MockImds imds;
  ScheduledEventsWatcher watcher(At(imds.endpoint()));
  ASSERT_TRUE(watcher.Acknowledge("602d9444").ok());
  auto bodies = imds.post_bodies();
  ASSERT_EQ(bodies.size(), 1u);
  EXPECT_EQ(bodies[0], R"({"StartRequests":[{"EventId":"602d9444"}]})");
  auto reqs = imds.requests();
  EXPECT_THAT(reqs.back(), HasSubstr("POST /metadata/scheduledevents?api-version=2020-07-01 "));

  imds.SetPostStatus(400);
  Status s = watcher.Acknowledge("nope");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("nope"));
  EXPECT_THAT(s.message(), HasSubstr("HTTP 400"));
  EXPECT_EQ(watcher.Acknowledge("").code(), StatusCode::kInvalidArgument);
}

// Waits up to 20 s for `done` (the watcher polls every few ms).
template <typename F>
bool Eventually(F done) {
  for (int i = 0; i < 2000 && !done(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return done();
}

TEST(ScheduledEventsWatcher, BackgroundThreadReportsOnceAndStops) {
  MockImds imds;
  std::mutex mu;
  std::vector<ScheduledEvent> seen;
  std::vector<std::string> errors;
  ScheduledEventsOptions options = At(imds.endpoint(), std::chrono::milliseconds(5));
  options.on_error = [&](const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    errors.push_back(s.message());
  };
  ScheduledEventsWatcher watcher(options);
  ASSERT_TRUE(watcher
                  .Start([&](const ScheduledEvent& e) {
                    std::lock_guard<std::mutex> lock(mu);
                    seen.push_back(e);
                  })
                  .ok());
  EXPECT_EQ(watcher.Start(nullptr).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(watcher.running());
  imds.SetDocument(std::string(kPreemptDoc));
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return !seen.empty();
  }));
  // Several more polls of the same document report nothing new.
  int gets = imds.gets();
  ASSERT_TRUE(Eventually([&] { return imds.gets() >= gets + 3; }));
  imds.SetDocument("not json");
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return !errors.empty();
  }));
  imds.SetDocument(TwoEventDoc());
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return seen.size() >= 2;
  }));
  watcher.Stop();
  EXPECT_FALSE(watcher.running());
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].type, ScheduledEventType::kPreempt);
  EXPECT_EQ(seen[1].event_id, "b2c1");
  EXPECT_THAT(errors[0], HasSubstr("scheduled events from"));
}

TEST(ScheduledEventsWatcher, PollsOnTheInjectedClock) {
  MockImds imds;
  FakeClock clock;
  ScheduledEventsWatcher watcher(At(imds.endpoint(), std::chrono::seconds(1), &clock));
  const auto start = clock.Now();
  ASSERT_TRUE(watcher.Start(nullptr).ok());
  ASSERT_TRUE(Eventually([&] { return watcher.polls() >= 3; }));
  watcher.Stop();
  // The fake clock moved by a whole interval between polls instead of sleeping.
  EXPECT_GE(clock.Now() - start, std::chrono::seconds(watcher.polls() - 1));
}

TEST(ScheduledEventsWatcher, StopFromInsideTheCallback) {
  MockImds imds;
  imds.SetDocument(std::string(kPreemptDoc));
  auto watcher =
      std::make_unique<ScheduledEventsWatcher>(At(imds.endpoint(), std::chrono::milliseconds(5)));
  std::atomic<bool> called{false};
  ScheduledEventsWatcher* w = watcher.get();
  ASSERT_TRUE(w->Start([&](const ScheduledEvent&) {
                 w->Stop();
                 called = true;
               }).ok());
  ASSERT_TRUE(Eventually([&] { return called.load(); }));
  watcher.reset();  // the detached thread holds the state, not the object
  ASSERT_TRUE(Eventually([&] { return imds.gets() >= 1; }));
}

}  // namespace
}  // namespace gantry
