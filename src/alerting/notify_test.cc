#include "gantry/alerting/notify.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "gantry/core/http_server.h"
#include "gantry/core/log.h"
#include "testing/fake_root.h"
#include "testing/http_test_server.h"

namespace gantry::alerting {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A real HTTP listener on 127.0.0.1 that records every request and answers
// with scripted statuses (the last one repeats).
class RecordingListener {
 public:
  explicit RecordingListener(std::vector<int> statuses = {200}) : statuses_(std::move(statuses)) {
    server_.Handle("/", [this](const http::ServerRequest& req, http::ServerResponse* resp) {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(req);
      size_t i = std::min(requests_.size() - 1, statuses_.size() - 1);
      resp->status = statuses_[i];
      resp->body = resp->status < 300 ? "" : "scripted failure";
      cv_.notify_all();
    });
    Status s = server_.Start({.listen = "127.0.0.1:0"});
    if (!s.ok()) ADD_FAILURE() << s.ToString();
  }
  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(server_.port()) + path;
  }
  std::vector<http::ServerRequest> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  bool WaitFor(size_t n, milliseconds timeout = seconds(10)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return requests_.size() >= n; });
  }

 private:
  http::Server server_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> statuses_;
  std::vector<http::ServerRequest> requests_;
};

Alert CpuAlert(const std::string& instance, bool firing = true) {
  Alert a;
  a.labels = {{"alertname", "HighCpu"}, {"instance", instance}, {"severity", "warning"}};
  a.annotations = {{"summary", "CPU above 80% on " + instance}, {"runbook", "rb"}};
  a.firing = firing;
  a.starts_at_ms = 1'800'000'000'250;
  a.ends_at_ms = firing ? 0 : 1'800'000'060'000;
  a.generator_url = "http://10.0.0.4:9500/#alerts";
  a.value = 93.5;
  return a;
}

Json Parse(const std::string& body) {
  Result<Json> j = ParseJson(body, "body");
  EXPECT_TRUE(j.ok()) << j.status().ToString();
  return j.ok() ? *j : Json();
}

std::vector<std::string> Keys(const Json& j) {
  std::vector<std::string> k;
  for (auto it = j.begin(); it != j.end(); ++it) k.push_back(it.key());
  return k;
}

TEST(Fingerprint, IsFnv1aOverSortedLabelsAsSixteenHexDigits) {
  // The empty set is FNV-1a's offset basis.
  EXPECT_EQ(Fingerprint({}), "cbf29ce484222325");
  std::string fp = Fingerprint({{"alertname", "HighCpu"}, {"instance", "a"}});
  EXPECT_EQ(fp.size(), 16u);
  EXPECT_EQ(fp.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(fp, Fingerprint({{"instance", "a"}, {"alertname", "HighCpu"}}));
  EXPECT_NE(fp, Fingerprint({{"alertname", "HighCpu"}, {"instance", "b"}}));
  // The separator keeps "ab"+"c" apart from "a"+"bc".
  EXPECT_NE(Fingerprint({{"ab", "c"}}), Fingerprint({{"a", "bc"}}));
}

TEST(FormatRfc3339, MillisecondsUtcAndGoZeroTime) {
  EXPECT_EQ(FormatRfc3339(1'800'000'000'250), "2027-01-15T08:00:00.250Z");
  EXPECT_EQ(FormatRfc3339(1'800'000'000'000), "2027-01-15T08:00:00.000Z");
  EXPECT_EQ(FormatRfc3339(0), "0001-01-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(-1), "1969-12-31T23:59:59.999Z");
}

TEST(WebhookPayloads, AlertmanagerV4ShapeFieldByField) {
  WebhookMeta meta{
      .receiver = "ops", .external_url = "http://10.0.0.4:9500", .group_by = {"alertname"}};
  std::vector<Json> p =
      WebhookPayloads({CpuAlert("a"), CpuAlert("b", false)}, meta, 1'900'000'000'000);
  ASSERT_EQ(p.size(), 1u);
  const Json& j = p[0];
  EXPECT_THAT(Keys(j), ElementsAre("receiver", "status", "alerts", "groupLabels", "commonLabels",
                                   "commonAnnotations", "externalURL", "version", "groupKey",
                                   "truncatedAlerts"));
  EXPECT_EQ(j["version"], "4");
  EXPECT_EQ(j["receiver"], "ops");
  EXPECT_EQ(j["status"], "firing");  // one of the two still fires
  EXPECT_EQ(j["externalURL"], "http://10.0.0.4:9500");
  EXPECT_EQ(j["groupKey"], "{}:{alertname=\"HighCpu\"}");
  EXPECT_EQ(j["truncatedAlerts"], 0);
  EXPECT_EQ(j["groupLabels"], Json({{"alertname", "HighCpu"}}));
  EXPECT_EQ(j["commonLabels"], Json({{"alertname", "HighCpu"}, {"severity", "warning"}}));
  EXPECT_EQ(j["commonAnnotations"], Json({{"runbook", "rb"}}));
  ASSERT_EQ(j["alerts"].size(), 2u);
  const Json& a0 = j["alerts"][0];
  EXPECT_THAT(Keys(a0), ElementsAre("status", "labels", "annotations", "startsAt", "endsAt",
                                    "generatorURL", "fingerprint"));
  EXPECT_EQ(a0["status"], "firing");
  EXPECT_EQ(a0["labels"]["instance"], "a");
  EXPECT_EQ(a0["annotations"]["summary"], "CPU above 80% on a");
  EXPECT_EQ(a0["startsAt"], "2027-01-15T08:00:00.250Z");
  EXPECT_EQ(a0["endsAt"], "0001-01-01T00:00:00Z");
  EXPECT_EQ(a0["generatorURL"], "http://10.0.0.4:9500/#alerts");
  EXPECT_EQ(a0["fingerprint"], Fingerprint(CpuAlert("a").labels));
  const Json& a1 = j["alerts"][1];
  EXPECT_EQ(a1["status"], "resolved");
  EXPECT_EQ(a1["endsAt"], "2027-01-15T08:01:00.000Z");
}

TEST(WebhookPayloads, GroupsByLabelsTruncatesAndFillsMissingTimes) {
  Alert mem = CpuAlert("a", false);
  mem.labels["alertname"] = "LowMemory";
  mem.starts_at_ms = 0;
  mem.ends_at_ms = 0;
  WebhookMeta meta;
  meta.group_by = {"alertname"};
  meta.max_alerts = 1;
  std::vector<Json> p =
      WebhookPayloads({CpuAlert("a"), mem, CpuAlert("b")}, meta, 1'800'000'000'000);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0]["groupLabels"]["alertname"], "HighCpu");
  EXPECT_EQ(p[0]["alerts"].size(), 1u);
  EXPECT_EQ(p[0]["truncatedAlerts"], 1);
  EXPECT_EQ(p[1]["groupLabels"]["alertname"], "LowMemory");
  EXPECT_EQ(p[1]["status"], "resolved");
  EXPECT_EQ(p[1]["alerts"][0]["startsAt"], "2027-01-15T08:00:00.000Z");
  EXPECT_EQ(p[1]["alerts"][0]["endsAt"], "2027-01-15T08:00:00.000Z");
  // No group_by: everything is one group with empty group labels.
  p = WebhookPayloads({CpuAlert("a"), mem}, WebhookMeta{}, 1);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0]["groupKey"], "{}:{}");
  EXPECT_EQ(p[0]["groupLabels"], Json::object());
}

TEST(AlertmanagerApiPayload, PostableAlertsArray) {
  Json j = AlertmanagerApiPayload({CpuAlert("a"), CpuAlert("b", false)}, 1);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u);
  EXPECT_THAT(Keys(j[0]), ElementsAre("labels", "annotations", "startsAt", "generatorURL"));
  EXPECT_EQ(j[0]["labels"]["alertname"], "HighCpu");
  EXPECT_EQ(j[0]["startsAt"], "2027-01-15T08:00:00.250Z");
  EXPECT_EQ(j[1]["endsAt"], "2027-01-15T08:01:00.000Z");
}

SinkConfig WebhookConfig(const std::string& url) {
  SinkConfig s;
  s.type = SinkType::kWebhook;
  s.name = "hook";
  s.url = url;
  s.retries = 2;
  s.retry_backoff = milliseconds(10);
  s.timeout = seconds(5);
  return s;
}

TEST(WebhookSink, PostsV4JsonToARealListener) {
  RecordingListener listener;
  SinkConfig cfg = WebhookConfig(listener.Url("/hook"));
  cfg.headers = {{"Authorization", "Bearer t0k"}};
  WebhookMeta meta{
      .receiver = "gantry", .external_url = "http://x:9500", .group_by = {"alertname"}};
  auto sink = MakeSink(cfg, meta);
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  ASSERT_TRUE((*sink)->Send({CpuAlert("a")}, 1).ok());
  auto reqs = listener.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(reqs[0].path, "/hook");
  ASSERT_NE(reqs[0].Header("Content-Type"), nullptr);
  EXPECT_EQ(*reqs[0].Header("Content-Type"), "application/json");
  ASSERT_NE(reqs[0].Header("Authorization"), nullptr);
  EXPECT_EQ(*reqs[0].Header("Authorization"), "Bearer t0k");
  Json j = Parse(reqs[0].body);
  EXPECT_EQ(j["version"], "4");
  EXPECT_EQ(j["status"], "firing");
  EXPECT_EQ(j["receiver"], "gantry");
  EXPECT_EQ(j["externalURL"], "http://x:9500");
  EXPECT_EQ(j["groupKey"], "{}:{alertname=\"HighCpu\"}");
  ASSERT_EQ(j["alerts"].size(), 1u);
  EXPECT_EQ(j["alerts"][0]["fingerprint"], Fingerprint(CpuAlert("a").labels));
  EXPECT_EQ(j["alerts"][0]["labels"]["instance"], "a");
}

TEST(WebhookSink, RetriesServerErrorsThenSucceeds) {
  RecordingListener listener({503, 500, 200});
  auto sink = MakeSink(WebhookConfig(listener.Url("/h")), {});
  ASSERT_TRUE(sink.ok());
  Status s = (*sink)->Send({CpuAlert("a")}, 1);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(listener.requests().size(), 3u);
}

TEST(WebhookSink, GivesUpAfterRetriesAndDoesNotRetryClientErrors) {
  RecordingListener failing({500});
  auto sink = MakeSink(WebhookConfig(failing.Url("/h")), {});
  ASSERT_TRUE(sink.ok());
  Status s = (*sink)->Send({CpuAlert("a")}, 1);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("3 attempt"));
  EXPECT_THAT(s.message(), HasSubstr("500"));
  EXPECT_EQ(failing.requests().size(), 3u);

  RecordingListener rejecting({400});
  sink = MakeSink(WebhookConfig(rejecting.Url("/h")), {});
  s = (*sink)->Send({CpuAlert("a")}, 1);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("400"));
  EXPECT_THAT(s.message(), HasSubstr("after 1 attempt"));
  EXPECT_EQ(rejecting.requests().size(), 1u);

  std::string url = "http://127.0.0.1:" + std::to_string(testing::ClosedLoopbackPort()) + "/h";
  sink = MakeSink(WebhookConfig(url), {});
  s = (*sink)->Send({CpuAlert("a")}, 1);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("hook"));
}

TEST(WebhookSink, SendResolvedFalseSkipsResolvedAlerts) {
  RecordingListener listener;
  SinkConfig cfg = WebhookConfig(listener.Url("/h"));
  cfg.send_resolved = false;
  auto sink = MakeSink(cfg, {});
  ASSERT_TRUE((*sink)->Send({CpuAlert("a", false)}, 1).ok());
  EXPECT_EQ(listener.requests().size(), 0u);
  ASSERT_TRUE((*sink)->Send({CpuAlert("a", false), CpuAlert("b")}, 1).ok());
  ASSERT_EQ(listener.requests().size(), 1u);
  EXPECT_EQ(Parse(listener.requests()[0].body)["alerts"].size(), 1u);
}

TEST(AlertmanagerSink, PostsArrayToApiV2Alerts) {
  RecordingListener listener;
  SinkConfig cfg = WebhookConfig(listener.Url("/"));
  cfg.type = SinkType::kAlertmanager;
  auto sink = MakeSink(cfg, {});
  ASSERT_TRUE(sink.ok());
  ASSERT_TRUE((*sink)->Send({CpuAlert("a")}, 1).ok());
  auto reqs = listener.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].path, "/api/v2/alerts");
  Json j = Parse(reqs[0].body);
  ASSERT_TRUE(j.is_array());
  EXPECT_EQ(j[0]["labels"]["instance"], "a");
}

TEST(AlertmanagerSink, FiringAlertsCarryEndsAtFourResendIntervalsAhead) {
  RecordingListener listener;
  SinkConfig cfg = WebhookConfig(listener.Url(""));
  cfg.type = SinkType::kAlertmanager;
  cfg.resend_interval = seconds(60);
  auto sink = MakeSink(cfg, {});
  ASSERT_TRUE((*sink)->Send({CpuAlert("a")}, 1'800'000'000'000).ok());
  Json j = Parse(listener.requests()[0].body);
  EXPECT_EQ(j[0]["endsAt"], "2027-01-15T08:04:00.000Z");
  // Not due yet, then due: every firing alert again.
  EXPECT_TRUE((*sink)->Resend(1'800'000'030'000).ok());
  EXPECT_EQ(listener.requests().size(), 1u);
  ASSERT_TRUE((*sink)->Send({CpuAlert("b")}, 1'800'000'040'000).ok());
  EXPECT_TRUE((*sink)->Resend(1'800'000'060'000).ok());
  ASSERT_EQ(listener.requests().size(), 3u);
  EXPECT_EQ(Parse(listener.requests()[2].body).size(), 2u);
  // Resolved alerts are no longer repeated.
  ASSERT_TRUE((*sink)->Send({CpuAlert("a", false), CpuAlert("b", false)}, 1'800'000'070'000).ok());
  EXPECT_TRUE((*sink)->Resend(1'800'000'500'000).ok());
  EXPECT_EQ(listener.requests().size(), 4u);
}

// The last sink of a Notifier, so that it sees every round of the loop after
// the sinks before it: once it got Resend(T), every other sink was given
// Resend(T) in that round and has finished it (posts are synchronous).
class RoundWatch : public Sink {
 public:
  const std::string& name() const override { return name_; }
  Status Send(const std::vector<Alert>&, int64_t) override { return Status::Ok(); }
  std::chrono::milliseconds resend_interval() const override { return milliseconds(50); }
  Status Resend(int64_t now_ms) override {
    std::lock_guard<std::mutex> lock(mu_);
    last_ = now_ms;
    cv_.notify_all();
    return Status::Ok();
  }
  // Waits for a round at wall time `now_ms` or later.
  bool WaitRound(int64_t now_ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, seconds(10), [&] { return last_ >= now_ms; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t last_ = 0;
  std::string name_ = "round-watch";
};

TEST(Notifier, RepostsFiringAlertsToAlertmanagerUntilResolved) {
  RecordingListener listener;
  SinkConfig cfg = WebhookConfig(listener.Url(""));
  cfg.type = SinkType::kAlertmanager;
  cfg.resend_interval = milliseconds(50);
  NotifyConfig nc;
  nc.sinks = {cfg};
  FakeClock clock;  // wall time 1'800'000'000 s = 2027-01-15T08:00:00Z
  auto watch = std::make_unique<RoundWatch>();
  RoundWatch* w = watch.get();
  std::vector<std::unique_ptr<Sink>> extra;
  extra.push_back(std::move(watch));
  auto n = Notifier::Create(nc, clock, std::move(extra));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  auto wall_ms = [&] {
    return std::chrono::duration_cast<milliseconds>(clock.WallNow().time_since_epoch()).count();
  };
  (*n)->Notify({CpuAlert("a")});
  ASSERT_TRUE((*n)->Flush(seconds(10)));
  ASSERT_EQ(listener.requests().size(), 1u);
  EXPECT_EQ(Parse(listener.requests()[0].body)[0]["endsAt"], "2027-01-15T08:00:00.200Z");
  // Rounds at the same time post nothing more; each resend interval on the
  // clock, one more post of the firing alert with a later endsAt.
  ASSERT_TRUE(w->WaitRound(wall_ms()));
  EXPECT_EQ(listener.requests().size(), 1u);
  clock.Advance(milliseconds(50));
  ASSERT_TRUE(w->WaitRound(wall_ms())) << "no round of the notifier's loop";
  ASSERT_EQ(listener.requests().size(), 2u);
  EXPECT_EQ(Parse(listener.requests()[1].body)[0]["endsAt"], "2027-01-15T08:00:00.250Z");
  clock.Advance(milliseconds(50));
  ASSERT_TRUE(w->WaitRound(wall_ms()));
  ASSERT_EQ(listener.requests().size(), 3u);

  (*n)->Notify({CpuAlert("a", false)});
  ASSERT_TRUE((*n)->Flush(seconds(10)));
  ASSERT_EQ(listener.requests().size(), 4u);
  Json last = Parse(listener.requests().back().body);
  EXPECT_EQ(last[0]["endsAt"], "2027-01-15T08:01:00.000Z");
  // Resolved: a round many resend intervals later (which posted above while
  // the alert fired) posts nothing.
  clock.Advance(seconds(10));
  ASSERT_TRUE(w->WaitRound(wall_ms())) << "no round of the notifier's loop";
  EXPECT_EQ(listener.requests().size(), 4u);
}

TEST(RunCommand, FeedsStdinSetsEnvAndReportsExit) {
  auto r = RunCommand({"sh", "-c", "cat; echo \"$FOO\"; exit 3"}, "in-text\n", {{"FOO", "bar"}},
                      seconds(10));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->output, "in-text\nbar\n");
}

TEST(RunCommand, ChildThatIgnoresStdinDoesNotKillUs) {
  // 4 MiB into a child that never reads: EPIPE, not SIGPIPE.
  auto r = RunCommand({"true"}, std::string(4 << 20, 'x'), {}, seconds(10));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0);
}

TEST(RunCommand, TimeoutKillsTheProcessGroup) {
  testing::FakeRoot dir;
  std::string marker = dir.path() + "/late";
  auto r = RunCommand({"sh", "-c", "sleep 30; touch " + marker}, "", {}, milliseconds(300));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST(RunCommand, MissingProgramIsUnavailable) {
  auto r = RunCommand({"/nonexistent/gantry-hook"}, "", {}, seconds(1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("/nonexistent/gantry-hook"));
}

TEST(CommandSink, RunsOncePerAlertWithJsonOnStdinAndEnv) {
  testing::FakeRoot dir;
  std::string script = dir.Write("/hook.sh",
                                 "#!/bin/sh\n"
                                 "n=$(ls \"$OUT_DIR\" | wc -l)\n"
                                 "cat > \"$OUT_DIR/stdin.$n\"\n"
                                 "env | grep ^GANTRY_ALERT_ | sort > \"$OUT_DIR/env.$n\"\n",
                                 true);
  ::setenv("OUT_DIR", (dir.path() + "/out").c_str(), 1);
  dir.Mkdir("/out");
  SinkConfig cfg;
  cfg.type = SinkType::kCommand;
  cfg.name = "pager";
  cfg.command = {script};
  cfg.timeout = seconds(10);
  WebhookMeta meta;
  meta.group_by = {"alertname"};
  auto sink = MakeSink(cfg, meta);
  ASSERT_TRUE(sink.ok());
  Status s = (*sink)->Send({CpuAlert("a"), CpuAlert("b", false)}, 1);
  ASSERT_TRUE(s.ok()) << s.ToString();
  Json in0 = Parse(*ReadFile(dir.path() + "/out/stdin.0"));
  EXPECT_EQ(in0["version"], "4");
  ASSERT_EQ(in0["alerts"].size(), 1u);
  EXPECT_EQ(in0["alerts"][0]["labels"]["instance"], "a");
  std::string env0 = *ReadFile(dir.path() + "/out/env.0");
  EXPECT_THAT(env0, HasSubstr("GANTRY_ALERT_NAME=HighCpu\n"));
  EXPECT_THAT(env0, HasSubstr("GANTRY_ALERT_STATUS=firing\n"));
  EXPECT_THAT(env0, HasSubstr("GANTRY_ALERT_VALUE=93.5\n"));
  EXPECT_THAT(env0, HasSubstr("GANTRY_ALERT_LABEL_INSTANCE=a\n"));
  EXPECT_THAT(env0, HasSubstr("GANTRY_ALERT_ANNOTATION_SUMMARY=CPU above 80% on a\n"));
  EXPECT_THAT(env0, HasSubstr("GANTRY_ALERT_FINGERPRINT=" + Fingerprint(CpuAlert("a").labels)));
  std::string env1 = *ReadFile(dir.path() + "/out/env.2");  // stdin.0 env.0 stdin.1 ... counted
  EXPECT_THAT(env1, HasSubstr("GANTRY_ALERT_STATUS=resolved\n"));
  ::unsetenv("OUT_DIR");
}

TEST(CommandSink, NonZeroExitAndTimeoutAreErrorsNamingTheCommand) {
  SinkConfig cfg;
  cfg.type = SinkType::kCommand;
  cfg.name = "pager";
  cfg.command = {"sh", "-c", "echo boom; exit 7"};
  auto sink = MakeSink(cfg, {});
  Status s = (*sink)->Send({CpuAlert("a")}, 1);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("pager"));
  EXPECT_THAT(s.message(), HasSubstr("exited with status 7"));
  EXPECT_THAT(s.message(), HasSubstr("boom"));
  cfg.command = {"sleep", "30"};
  cfg.timeout = milliseconds(200);
  sink = MakeSink(cfg, {});
  s = (*sink)->Send({CpuAlert("a")}, 1);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("sleep 30"));
}

TEST(LogSink, LogsOneLinePerAlertWithStateNameLabelsAndSummary) {
  SinkConfig cfg;
  cfg.type = SinkType::kLog;
  auto sink = MakeSink(cfg, {});
  ASSERT_TRUE(sink.ok());
  ASSERT_TRUE(log::SetLevel("info").ok());
  ::testing::internal::CaptureStderr();
  Status s = (*sink)->Send({CpuAlert("a"), CpuAlert("b", false)}, 1);
  std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(s.ok()) << s.ToString();
  // Firing at warn, resolved at info, each with its labels, value and summary.
  EXPECT_THAT(err, ::testing::HasSubstr("[warn] alert firing HighCpu"));
  EXPECT_THAT(err, ::testing::HasSubstr("instance=\"a\""));
  EXPECT_THAT(err, ::testing::HasSubstr("value=93.5: CPU above 80% on a"));
  EXPECT_THAT(err, ::testing::HasSubstr("[info] alert resolved HighCpu"));
  EXPECT_THAT(err, ::testing::HasSubstr("CPU above 80% on b"));
}

// A sink that blocks until released and records what it got.
class GateSink : public Sink {
 public:
  const std::string& name() const override { return name_; }
  Status Send(const std::vector<Alert>& alerts, int64_t) override {
    std::unique_lock<std::mutex> lock(mu);
    ++entered;
    cv.notify_all();
    cv.wait(lock, [&] { return open; });
    received.push_back(alerts.size());
    return fail ? Unavailable("gate says no") : Status::Ok();
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
  // Waits until Send has been called `n` times (the thread is inside it).
  bool WaitEntered(int n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), [&] { return entered >= n; });
  }
  std::mutex mu;
  std::condition_variable cv;
  int entered = 0;
  bool open = false;
  bool fail = false;
  std::vector<size_t> received;
  std::string name_ = "gate";
};

TEST(Notifier, NotifyNeverBlocksOnASlowSinkAndFlushDelivers) {
  auto gate = std::make_unique<GateSink>();
  GateSink* g = gate.get();
  std::vector<std::unique_ptr<Sink>> sinks;
  sinks.push_back(std::move(gate));
  FakeClock clock;
  Notifier n(std::move(sinks), 16, clock);
  n.Notify({CpuAlert("a")});  // the thread takes it and blocks in the sink
  n.Notify({CpuAlert("a"), CpuAlert("b")});
  n.Notify({});  // ignored
  EXPECT_FALSE(n.Flush(milliseconds(50)));
  g->Open();
  EXPECT_TRUE(n.Flush(seconds(10)));
  EXPECT_THAT(g->received, ElementsAre(1u, 2u));
  Notifier::Stats st = n.stats();
  EXPECT_EQ(st.batches, 2u);
  EXPECT_EQ(st.sent, 2u);
  EXPECT_EQ(st.failed, 0u);
  EXPECT_EQ(st.dropped, 0u);
}

TEST(Notifier, FullQueueDropsOldestAndFailuresAreCounted) {
  auto gate = std::make_unique<GateSink>();
  GateSink* g = gate.get();
  g->fail = true;
  std::vector<std::unique_ptr<Sink>> sinks;
  sinks.push_back(std::move(gate));
  Notifier n(std::move(sinks), 2);
  n.Notify({CpuAlert("a")});
  // The thread holds batch 1 inside the sink, so the queue is empty.
  ASSERT_TRUE(g->WaitEntered(1));
  std::vector<Alert> three(3, CpuAlert("c"));
  n.Notify(std::vector<Alert>(2, CpuAlert("b")));
  n.Notify(three);
  n.Notify(std::vector<Alert>(4, CpuAlert("d")));  // drops the 2-alert batch
  g->Open();
  ASSERT_TRUE(n.Flush(seconds(10)));
  EXPECT_THAT(g->received, ElementsAre(1u, 3u, 4u));
  Notifier::Stats st = n.stats();
  EXPECT_EQ(st.dropped, 1u);
  EXPECT_EQ(st.failed, 3u);
  EXPECT_EQ(st.sent, 0u);
}

TEST(Notifier, CreateFromConfigFansOutToEverySink) {
  RecordingListener hook, am;
  auto cfg = Config::LoadString(
      "notify:\n"
      "  receiver: lab\n"
      "  sinks:\n"
      "    - {type: webhook, url: '" +
          hook.Url("/hook") +
          "'}\n"
          "    - {type: alertmanager, url: '" +
          am.Url("") +
          "'}\n"
          "    - {type: log}\n",
      "agent.yaml");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  auto nc = ParseNotifyConfig(*cfg);
  ASSERT_TRUE(nc.ok()) << nc.status().ToString();
  auto n = Notifier::Create(*nc);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ((*n)->sink_count(), 3u);
  (*n)->Notify({CpuAlert("a")});
  ASSERT_TRUE((*n)->Flush(seconds(20)));
  ASSERT_EQ(hook.requests().size(), 1u);
  EXPECT_EQ(Parse(hook.requests()[0].body)["receiver"], "lab");
  ASSERT_EQ(am.requests().size(), 1u);
  EXPECT_EQ(am.requests()[0].path, "/api/v2/alerts");
  EXPECT_EQ((*n)->stats().sent, 3u);
}

Result<NotifyConfig> ParseText(const std::string& yaml) {
  auto cfg = Config::LoadString(yaml, "agent.yaml");
  if (!cfg.ok()) return cfg.status();
  return ParseNotifyConfig(*cfg);
}

TEST(ParseNotifyConfig, FullExample) {
  auto nc = ParseText(
      "notify:\n"
      "  receiver: ops\n"
      "  external_url: http://10.0.0.4:9500\n"
      "  group_by: [alertname, instance]\n"
      "  queue_capacity: 8\n"
      "  sinks:\n"
      "    - type: webhook\n"
      "      name: team\n"
      "      url: http://127.0.0.1:5001/hook\n"
      "      timeout: 2s\n"
      "      retries: 4\n"
      "      retry_backoff: 100ms\n"
      "      send_resolved: false\n"
      "      max_alerts: 10\n"
      "      headers: {Authorization: Bearer x}\n"
      "    - type: alertmanager\n"
      "      url: http://127.0.0.1:9093\n"
      "      resend_interval: 30s\n"
      "    - type: log\n"
      "    - type: command\n"
      "      command: [/usr/local/bin/page, --team, ml]\n"
      "      timeout: 10s\n");
  ASSERT_TRUE(nc.ok()) << nc.status().ToString();
  EXPECT_EQ(nc->meta.receiver, "ops");
  EXPECT_EQ(nc->meta.external_url, "http://10.0.0.4:9500");
  EXPECT_THAT(nc->meta.group_by, ElementsAre("alertname", "instance"));
  EXPECT_EQ(nc->queue_capacity, 8u);
  ASSERT_EQ(nc->sinks.size(), 4u);
  const SinkConfig& w = nc->sinks[0];
  EXPECT_EQ(w.type, SinkType::kWebhook);
  EXPECT_EQ(w.name, "team");
  EXPECT_EQ(w.timeout, seconds(2));
  EXPECT_EQ(w.retries, 4);
  EXPECT_EQ(w.retry_backoff, milliseconds(100));
  EXPECT_FALSE(w.send_resolved);
  EXPECT_EQ(w.max_alerts, 10);
  ASSERT_EQ(w.headers.size(), 1u);
  EXPECT_EQ(w.headers[0].second, "Bearer x");
  EXPECT_EQ(nc->sinks[1].type, SinkType::kAlertmanager);
  EXPECT_EQ(nc->sinks[1].name, "alertmanager[1]");
  EXPECT_EQ(nc->sinks[1].resend_interval, seconds(30));
  EXPECT_EQ(nc->sinks[2].type, SinkType::kLog);
  EXPECT_EQ(nc->sinks[3].type, SinkType::kCommand);
  EXPECT_THAT(nc->sinks[3].command, ElementsAre("/usr/local/bin/page", "--team", "ml"));
  EXPECT_EQ(nc->sinks[3].timeout, seconds(10));
}

TEST(ParseNotifyConfig, AbsentSectionHasNoSinks) {
  auto nc = ParseText("listen: ':9500'\n");
  ASSERT_TRUE(nc.ok());
  EXPECT_TRUE(nc->sinks.empty());
  EXPECT_THAT(nc->meta.external_url, HasSubstr(":9500"));
  EXPECT_THAT(nc->meta.group_by, ElementsAre("alertname"));
}

void ExpectError(const std::string& yaml, const std::vector<std::string>& parts) {
  auto nc = ParseText(yaml);
  ASSERT_FALSE(nc.ok()) << yaml;
  EXPECT_EQ(nc.status().code(), StatusCode::kInvalidArgument);
  for (const auto& p : parts) EXPECT_THAT(nc.status().message(), HasSubstr(p)) << yaml;
  std::cout << "  error: " << nc.status().message() << "\n";
}

TEST(ParseNotifyConfig, ErrorsNameTheKey) {
  ExpectError("notify:\n  sinks:\n    - type: pager\n",
              {"agent.yaml:3", "notify.sinks.0.type", "unknown 'pager'", "webhook, alertmanager"});
  ExpectError("notify:\n  sinks:\n    - url: http://127.0.0.1/\n", {"notify.sinks.0", "missing"});
  ExpectError("notify:\n  sinks:\n    - type: webhook\n", {"notify.sinks.0", "needs a url"});
  ExpectError("notify:\n  sinks:\n    - {type: webhook, url: 'https://hooks.example.com/x'}\n",
              {"notify.sinks.0", "https", "proxy"});
  ExpectError("notify:\n  sinks:\n    - {type: webhook, url: 'http://127.0.0.1/', retries: -1}\n",
              {"notify.sinks.0.retries", "-1"});
  ExpectError("notify:\n  sinks:\n    - {type: webhook, url: 'http://127.0.0.1/', tmeout: 1s}\n",
              {"tmeout", "timeout"});
  ExpectError("notify:\n  sinks:\n    - {type: log, url: 'http://127.0.0.1/'}\n", {"url"});
  ExpectError("notify:\n  sinks:\n    - {type: command, command: 'notify-send hi'}\n",
              {"notify.sinks.0.command", "list"});
  ExpectError("notify:\n  sinks:\n    - {type: command}\n", {"needs a command"});
  ExpectError("notify:\n  recevier: x\n", {"recevier", "receiver"});
  ExpectError(
      "notify:\n  sinks:\n    - {type: webhook, url: 'http://127.0.0.1/', resend_interval: 1m}\n",
      {"notify.sinks.0.resend_interval"});
  ExpectError("notify:\n  sinks:\n    - {type: webhook, url: 'http://127.0.0.1/', timeout: soon}\n",
              {"notify.sinks.0.timeout"});
}

}  // namespace
}  // namespace gantry::alerting
