// A real Alertmanager (Debian prometheus-alertmanager) between Gantry and a
// webhook listener: Gantry's "alertmanager" sink posts to its API, and the
// webhook it then emits is compared field by field with what Gantry's own
// "webhook" sink builds for the same alert, so that anything that consumes
// Alertmanager webhooks can consume Gantry's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <thread>

#include "gantry/alerting/notify.h"
#include "gantry/core/http_client.h"
#include "gantry/core/http_server.h"
#include "gantry/core/subprocess.h"
#include "testing/fake_root.h"
#include "testing/http_test_server.h"

extern char** environ;

namespace gantry::alerting {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

class Listener {
 public:
  Listener() {
    server_.Handle("/", [this](const http::ServerRequest& req, http::ServerResponse* resp) {
      std::lock_guard<std::mutex> lock(mu_);
      bodies_.push_back(req.body);
      resp->status = 200;
      cv_.notify_all();
    });
    Status s = server_.Start({.listen = "127.0.0.1:0"});
    if (!s.ok()) ADD_FAILURE() << s.ToString();
  }
  uint16_t port() const { return server_.port(); }
  // The n-th body (0-based), waiting up to 60 s; "" if it never came.
  std::string Body(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, seconds(60), [&] { return bodies_.size() > n; });
    return bodies_.size() > n ? bodies_[n] : "";
  }

 private:
  http::Server server_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> bodies_;
};

// Runs prometheus-alertmanager on a free loopback port until destroyed.
class Alertmanager {
 public:
  Alertmanager(const std::string& dir, uint16_t webhook_port) {
    binary_ = FindExecutable("prometheus-alertmanager");
    if (binary_.empty()) binary_ = FindExecutable("alertmanager");
    if (binary_.empty()) {
      ADD_FAILURE() << "prometheus-alertmanager not found in $PATH: install the Debian package "
                       "prometheus-alertmanager (scripts/install-deps.sh does)";
      return;
    }
    std::ofstream(dir + "/alertmanager.yml") << "route:\n"
                                                "  receiver: hook\n"
                                                "  group_by: [alertname]\n"
                                                "  group_wait: 100ms\n"
                                                "  group_interval: 1s\n"
                                                "  repeat_interval: 1h\n"
                                                "receivers:\n"
                                                "  - name: hook\n"
                                                "    webhook_configs:\n"
                                                "      - url: http://127.0.0.1:"
                                             << webhook_port << "/hook\n"
                                             << "        send_resolved: true\n";
    port_ = testing::ClosedLoopbackPort();
    std::vector<std::string> args = {binary_,
                                     "--config.file=" + dir + "/alertmanager.yml",
                                     "--storage.path=" + dir + "/data",
                                     "--web.listen-address=127.0.0.1:" + std::to_string(port_),
                                     "--web.external-url=http://127.0.0.1:" + std::to_string(port_),
                                     "--cluster.listen-address=",
                                     "--log.level=warn"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (::posix_spawn(&pid_, binary_.c_str(), nullptr, nullptr, argv.data(), environ) != 0) {
      ADD_FAILURE() << "cannot start " << binary_;
      pid_ = -1;
      return;
    }
    for (int i = 0; i < 300; ++i) {
      http::Request req;
      req.url = Url("/-/ready");
      Result<http::Response> r = http::Get(req);
      if (r.ok() && r->status == 200) {
        ready_ = true;
        return;
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    ADD_FAILURE() << binary_ << " did not become ready on port " << port_ << " within 30 s";
  }
  ~Alertmanager() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int st = 0;
      for (int i = 0; i < 100; ++i) {
        if (::waitpid(pid_, &st, WNOHANG) == pid_) return;
        std::this_thread::sleep_for(milliseconds(50));
      }
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &st, 0);
    }
  }
  bool ready() const { return ready_; }
  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

 private:
  std::string binary_;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  bool ready_ = false;
};

std::vector<std::string> SortedKeys(const Json& j) {
  std::vector<std::string> k;
  for (auto it = j.begin(); it != j.end(); ++it) k.push_back(it.key());
  std::sort(k.begin(), k.end());
  return k;
}

int64_t NowMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TEST(AlertmanagerIntegration, ApiSinkAndWebhookShapeMatchRealAlertmanager) {
  testing::FakeRoot dir;
  Listener listener;
  Alertmanager am(dir.path(), listener.port());
  ASSERT_TRUE(am.ready());

  Alert alert;
  alert.labels = {{"alertname", "GantryHighCpu"}, {"instance", "node-7"}, {"severity", "warning"}};
  alert.annotations = {{"summary", "CPU above 80%"}, {"description", "p95 93%"}};
  alert.starts_at_ms = NowMs() - 60'000;
  alert.generator_url = "http://127.0.0.1:9500/#alerts";

  SinkConfig sc;
  sc.type = SinkType::kAlertmanager;
  sc.name = "am";
  sc.url = am.Url("/");
  auto sink = MakeSink(sc, {});
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  Status s = (*sink)->Send({alert}, NowMs());
  ASSERT_TRUE(s.ok()) << s.ToString();

  // Alertmanager's own view: same fingerprint.
  http::Request get;
  get.url = am.Url("/api/v2/alerts");
  auto listed = http::Get(get);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  auto lj = ParseJson(listed->body, "alerts");
  ASSERT_TRUE(lj.ok());
  ASSERT_EQ(lj->size(), 1u) << listed->body;
  EXPECT_EQ((*lj)[0]["fingerprint"], Fingerprint(alert.labels));

  // The webhook Alertmanager emits vs the one Gantry builds.
  std::string body = listener.Body(0);
  ASSERT_FALSE(body.empty()) << "no webhook from Alertmanager within 60 s";
  auto theirs_r = ParseJson(body, "webhook");
  ASSERT_TRUE(theirs_r.ok());
  const Json& theirs = *theirs_r;
  WebhookMeta meta;
  meta.receiver = "hook";
  meta.external_url = am.Url("");
  meta.group_by = {"alertname"};
  std::vector<Json> ours = WebhookPayloads({alert}, meta, NowMs());
  ASSERT_EQ(ours.size(), 1u);
  EXPECT_EQ(SortedKeys(ours[0]), SortedKeys(theirs)) << body;
  for (const char* k : {"version", "status", "receiver", "groupLabels", "commonLabels",
                        "commonAnnotations", "externalURL", "groupKey", "truncatedAlerts"}) {
    EXPECT_EQ(ours[0][k], theirs[k]) << k << " in " << body;
  }
  ASSERT_EQ(theirs["alerts"].size(), 1u);
  const Json& ta = theirs["alerts"][0];
  const Json& oa = ours[0]["alerts"][0];
  EXPECT_EQ(SortedKeys(oa), SortedKeys(ta)) << body;
  for (const char* k : {"status", "labels", "annotations", "generatorURL", "fingerprint"}) {
    EXPECT_EQ(oa[k], ta[k]) << k << " in " << body;
  }
  // Times: same instant (Alertmanager may print fewer fraction digits).
  EXPECT_EQ(ta["startsAt"].get<std::string>().substr(0, 19),
            oa["startsAt"].get<std::string>().substr(0, 19));

  // Resolving through the API gives a "resolved" webhook with the same fingerprint.
  alert.firing = false;
  alert.ends_at_ms = NowMs() - 1000;
  s = (*sink)->Send({alert}, NowMs());
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::string resolved_body = listener.Body(1);
  ASSERT_FALSE(resolved_body.empty()) << "no resolved webhook from Alertmanager within 60 s";
  auto rj = ParseJson(resolved_body, "webhook");
  ASSERT_TRUE(rj.ok());
  EXPECT_EQ((*rj)["status"], "resolved") << resolved_body;
  EXPECT_EQ((*rj)["alerts"][0]["fingerprint"], Fingerprint(alert.labels));
  std::vector<Json> ours_resolved = WebhookPayloads({alert}, meta, NowMs());
  EXPECT_EQ(ours_resolved[0]["status"], "resolved");
  EXPECT_EQ((*rj)["alerts"][0]["endsAt"].get<std::string>().substr(0, 19),
            ours_resolved[0]["alerts"][0]["endsAt"].get<std::string>().substr(0, 19));
}

TEST(AlertmanagerIntegration, BadAlertIsAClientErrorWithoutRetries) {
  testing::FakeRoot dir;
  Listener listener;
  Alertmanager am(dir.path(), listener.port());
  ASSERT_TRUE(am.ready());
  SinkConfig sc;
  sc.type = SinkType::kAlertmanager;
  sc.name = "am";
  sc.url = am.Url("");
  sc.retry_backoff = seconds(5);  // a retry would make this test slow, not wrong
  auto sink = MakeSink(sc, {});
  Alert bad;  // no labels: Alertmanager rejects it with 400
  Status s = (*sink)->Send({bad}, NowMs());
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("400"));
  EXPECT_THAT(s.message(), HasSubstr("/api/v2/alerts"));
}

}  // namespace
}  // namespace gantry::alerting
