// The gateway actuator against a real gateway (in-process) and real model
// server processes (tests/autoscale/model_server.py): a pool that scales from
// zero holds requests, its wake URL starts a backend through the actuator,
// the held requests are served exactly once, a flood beyond the bound gets
// 503s, and scale-in drains, removes and stops the process. A second actuator
// (a restarted controller) adopts what the first started.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gantry/autoscale/actuator.h"
#include "gantry/core/clock.h"
#include "gantry/core/http_client.h"
#include "gantry/core/http_server.h"
#include "gantry/gateway/admin_client.h"
#include "gantry/gateway/config.h"
#include "gantry/gateway/server.h"
#include "gantry/security/key_store.h"
#include "testing/http_test_server.h"
#include "testing/temp_dir.h"

namespace gantry::autoscale {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;

constexpr const char* kKeyEnv = "GANTRY_TEST_GATEWAY_ACTUATOR_KEY";

class GatewayActuatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ks = security::KeyStore::Open(dir_.Path("state.db"));
    ASSERT_TRUE(ks.ok()) << ks.status().ToString();
    auto admin = (*ks)->Create("autoscaler", "admin", 0, std::time(nullptr));
    ASSERT_TRUE(admin.ok());
    admin_key_ = admin->second;
    ::setenv(kKeyEnv, admin_key_.c_str(), 1);

    // The wake URL: what `gantry autoscale` serves at /wake/<target>; here it
    // scales out by one, once, on a thread of its own (the gateway's call
    // must not wait for a model to load).
    wake_server_.Handle("/wake/llm",
                        [this](const http::ServerRequest& req, http::ServerResponse* resp) {
                          ++wakes_;
                          if (req.method == "POST" && !scaling_.exchange(true)) {
                            std::lock_guard<std::mutex> lock(mu_);
                            scaler_ = std::thread([this] { scale_out_ = actuator_->ScaleOut(1); });
                          }
                          resp->status = 202;
                          resp->body = "{}";
                        });
    ASSERT_TRUE(wake_server_.Start({.listen = "127.0.0.1:0", .handler_threads = 2}).ok());
  }

  void TearDown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (scaler_.joinable()) scaler_.join();
    }
    // Whatever a failed test left running.
    if (actuator_) {
      auto c = actuator_->Read();
      if (c.ok() && !c->instances.empty()) {
        std::vector<std::string> ids;
        for (const Instance& i : c->instances) ids.push_back(i.id);
        (void)actuator_->ScaleIn(0, ids);
      }
    }
    wake_server_.Stop();
    gw_.reset();
    ::unsetenv(kKeyEnv);
  }

  void Start(uint32_t hold, double startup_delay_s) {
    std::string yaml =
        "listen: 127.0.0.1:0\nworkers: 2\nstate: state.db\n"
        "pools:\n"
        "  - name: llm\n"
        "    backends: []\n"
        "    health_check: {path: /healthz, interval: 200ms, timeout: 500ms}\n"
        "    scale_from_zero: {hold: " +
        std::to_string(hold) + ", hold_timeout: 60s, retry_after: 5s, wake: 'http://127.0.0.1:" +
        std::to_string(wake_server_.port()) +
        "/wake/llm'}\n"
        "routes:\n"
        "  - {prefix: /v1/, pool: llm, auth: none}\n"
        "roles:\n  admin:\n    - {action: '*'}\n";
    auto cfg = gateway::LoadGatewayConfig(dir_.Write("gateway.yaml", yaml));
    ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
    auto gw = gateway::Gateway::Create(std::move(*cfg));
    ASSERT_TRUE(gw.ok()) << gw.status().ToString();
    gw_ = std::move(*gw);
    ASSERT_TRUE(gw_->Start().ok());

    actuator_config_.url = gw_->url();
    actuator_config_.admin_key_env = kKeyEnv;
    actuator_config_.pool = "llm";
    actuator_config_.start = {
        "/usr/bin/python3", std::string(GANTRY_SOURCE_DIR) + "/tests/autoscale/model_server.py",
        "--port",           "{port}",
        "--name",           "{name}",
        "--startup-delay",  std::to_string(startup_delay_s)};
    int base = gantry::testing::ClosedLoopbackPort();
    actuator_config_.port_min = base;
    actuator_config_.port_max = std::min(65535, base + 20);
    actuator_config_.ready_timeout = std::chrono::seconds(60);
    actuator_config_.drain_timeout = std::chrono::seconds(30);
    actuator_config_.stop_grace = std::chrono::seconds(5);
    actuator_config_.state_dir = dir_.Path("backends");
    auto a = NewGatewayActuator(actuator_config_, SystemClock());
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    actuator_ = std::move(*a);
  }

  struct Outcome {
    int status = 0;
    std::string retry_after;
    json body;
  };
  // POSTs {"id": id} to the pool's route.
  Outcome Infer(const std::string& id) {
    http::Request r;
    r.method = "POST";
    r.url = gw_->url() + "/v1/infer";
    r.headers = {{"Content-Type", "application/json"}};
    r.body = json{{"id", id}, {"inputs", {1, 2, 3}}}.dump();
    r.deadline = std::chrono::seconds(90);
    Outcome o;
    auto resp = http::Send(r);
    if (!resp.ok()) return o;
    o.status = resp->status;
    if (const std::string* h = resp->FindHeader("Retry-After")) o.retry_after = *h;
    o.body = json::parse(resp->body, nullptr, false);
    return o;
  }

  // Sends n requests at once; waits for all of them.
  std::vector<Outcome> Flood(const std::string& prefix, int n) {
    std::vector<Outcome> out(n);
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] { out[i] = Infer(prefix + std::to_string(i)); });
    }
    for (auto& t : threads) t.join();
    return out;
  }

  // The model server's own count of the requests it served, by id.
  json Stats(const std::string& address) {
    http::Request req;
    req.url = "http://" + address + "/stats";
    req.deadline = std::chrono::seconds(5);
    auto r = http::Get(req);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? json::parse(r->body, nullptr, false) : json();
  }

  Status JoinScaler() {
    std::lock_guard<std::mutex> lock(mu_);
    if (scaler_.joinable()) scaler_.join();
    return scale_out_;
  }

  gantry::testing::TempDir dir_{"gantry-gw-actuator"};
  http::Server wake_server_;
  std::unique_ptr<gateway::Gateway> gw_;
  GatewayActuatorConfig actuator_config_;
  std::unique_ptr<Actuator> actuator_;
  std::string admin_key_;
  std::atomic<int> wakes_{0};
  std::atomic<bool> scaling_{false};
  std::mutex mu_;
  std::thread scaler_;
  Status scale_out_ = Status::Ok();
};

TEST_F(GatewayActuatorTest, HeldRequestsAreServedExactlyOnceByABackendStartedOnWake) {
  Start(/*hold=*/32, /*startup_delay_s=*/0.3);
  auto before = actuator_->Read();
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_EQ(before->target, 0);
  EXPECT_TRUE(before->instances.empty());

  constexpr int kN = 12;
  std::vector<Outcome> out = Flood("held-", kN);
  Status scaled = JoinScaler();
  ASSERT_TRUE(scaled.ok()) << scaled.ToString();
  EXPECT_GE(wakes_.load(), 1);

  auto cap = actuator_->Read();
  ASSERT_TRUE(cap.ok()) << cap.status().ToString();
  EXPECT_EQ(cap->target, 1);
  EXPECT_EQ(cap->ready, 1);
  ASSERT_EQ(cap->instances.size(), 1u);
  const Instance& inst = cap->instances[0];
  EXPECT_EQ(inst.id, "llm-" + inst.name.substr(inst.name.rfind(':') + 1));
  EXPECT_TRUE(inst.ready);
  EXPECT_TRUE(fs::exists(dir_.Path("backends/" + inst.id + ".pid")));
  EXPECT_TRUE(fs::exists(dir_.Path("backends/" + inst.id + ".log")));

  json stats = Stats(inst.name);
  EXPECT_EQ(stats["total"], kN) << stats.dump();
  for (int i = 0; i < kN; ++i) {
    std::string id = "held-" + std::to_string(i);
    EXPECT_EQ(out[i].status, 200) << id << " " << out[i].body.dump();
    EXPECT_EQ(out[i].body.value("id", ""), id);
    EXPECT_EQ(stats["ids"].value(id, 0), 1) << id;
  }

  // Scale in: drained, removed from the pool, the process stopped.
  int pid = std::stoi(dir_.Read("backends/" + inst.id + ".pid"));
  Status in = actuator_->ScaleIn(0, {inst.id});
  ASSERT_TRUE(in.ok()) << in.ToString();
  auto admin = gateway::AdminClient::Create(gw_->url(), admin_key_);
  ASSERT_TRUE(admin.ok());
  auto pools = admin->Pools();
  ASSERT_TRUE(pools.ok());
  EXPECT_EQ((*pools)["pools"][0]["backends"], json::array());
  EXPECT_FALSE(fs::exists(dir_.Path("backends/" + inst.id + ".pid")));
  EXPECT_NE(::kill(pid, 0), 0);  // gone (reaped by the actuator)
  auto after = actuator_->Read();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->target, 0);
}

// A backend whose process dies (crash, OOM kill) must stop counting as
// capacity, or the controller never replaces it: found by the tour, where the
// primary was SIGKILLed and the pool stayed on its fallback for good.
TEST_F(GatewayActuatorTest, ABackendWhoseProcessDiedIsRemovedAndReplaced) {
  Start(/*hold=*/8, /*startup_delay_s=*/0.2);
  ASSERT_TRUE(actuator_->ScaleOut(1).ok());
  auto cap = actuator_->Read();
  ASSERT_TRUE(cap.ok()) << cap.status().ToString();
  ASSERT_EQ(cap->instances.size(), 1u);
  const std::string dead = cap->instances[0].id;
  int pid = std::stoi(dir_.Read("backends/" + dead + ".pid"));
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  for (int i = 0; i < 200 && ::kill(pid, 0) == 0; ++i) {
    // A zombie until the actuator reaps it: Read() must not count it either.
    auto c = actuator_->Read();
    ASSERT_TRUE(c.ok());
    if (c->target == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto after = actuator_->Read();
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->target, 0);
  EXPECT_TRUE(after->instances.empty());
  EXPECT_FALSE(fs::exists(dir_.Path("backends/" + dead + ".pid")));
  auto admin = gateway::AdminClient::Create(gw_->url(), admin_key_);
  ASSERT_TRUE(admin.ok());
  auto pools = admin->Pools();
  ASSERT_TRUE(pools.ok());
  EXPECT_EQ((*pools)["pools"][0]["backends"], json::array());  // out of the pool

  // The controller's next scale-out starts a new one, which serves.
  ASSERT_TRUE(actuator_->ScaleOut(1).ok());
  auto again = actuator_->Read();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->target, 1);
  EXPECT_EQ(again->ready, 1);
  EXPECT_EQ(Infer("after-crash").status, 200);
}

TEST_F(GatewayActuatorTest, FloodBeyondTheBoundGets503sAndNothingIsLostOrDuplicated) {
  // A backend that takes a while to load keeps the first requests held.
  Start(/*hold=*/4, /*startup_delay_s=*/1.5);
  constexpr int kN = 24;
  std::vector<Outcome> out = Flood("flood-", kN);
  Status scaled = JoinScaler();
  ASSERT_TRUE(scaled.ok()) << scaled.ToString();

  auto cap = actuator_->Read();
  ASSERT_TRUE(cap.ok()) << cap.status().ToString();
  ASSERT_EQ(cap->instances.size(), 1u);
  json stats = Stats(cap->instances[0].name);
  int ok = 0, shed = 0;
  for (int i = 0; i < kN; ++i) {
    std::string id = "flood-" + std::to_string(i);
    if (out[i].status == 200) {
      ++ok;
      EXPECT_EQ(out[i].body.value("id", ""), id);
      EXPECT_EQ(stats["ids"].value(id, 0), 1) << id;  // served once
    } else {
      ++shed;
      EXPECT_EQ(out[i].status, 503) << id << " " << out[i].body.dump();
      EXPECT_EQ(out[i].retry_after, "5") << id;
      EXPECT_TRUE(out[i].body.contains("error")) << out[i].body.dump();
      EXPECT_EQ(stats["ids"].value(id, 0), 0) << id;  // never reached the backend
    }
  }
  EXPECT_GE(ok, 4);  // at least the held ones
  EXPECT_GT(shed, 0);
  EXPECT_EQ(ok + shed, kN);
  EXPECT_EQ(stats["total"], ok);

  // A restarted controller (a new actuator) adopts the running backend from
  // the gateway and its pid file, and can scale it in.
  auto again = NewGatewayActuator(actuator_config_, SystemClock());
  ASSERT_TRUE(again.ok());
  auto adopted = (*again)->Read();
  ASSERT_TRUE(adopted.ok()) << adopted.status().ToString();
  EXPECT_EQ(adopted->target, 1);
  EXPECT_EQ(adopted->ready, 1);
  ASSERT_EQ(adopted->instances.size(), 1u);
  EXPECT_EQ(adopted->instances[0].id, cap->instances[0].id);
  Status in = (*again)->ScaleIn(0, {adopted->instances[0].id});
  ASSERT_TRUE(in.ok()) << in.ToString();
  auto after = actuator_->Read();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->target, 0);
  // Stopped: nothing listens there any more.
  http::Request probe;
  probe.url = "http://" + cap->instances[0].name + "/healthz";
  probe.deadline = std::chrono::seconds(2);
  EXPECT_FALSE(http::Send(probe).ok());
}

TEST_F(GatewayActuatorTest, ConfigErrorsNameTheField) {
  GatewayActuatorConfig c;
  c.url = "http://127.0.0.1:1";
  c.pool = "llm";
  c.start = {"/bin/true"};
  c.state_dir = dir_.Path("s");
  c.admin_key_env = "GANTRY_TEST_NO_SUCH_VARIABLE";
  auto r = NewGatewayActuator(c, SystemClock());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("GANTRY_TEST_NO_SUCH_VARIABLE"), std::string::npos);
  c.admin_key_env = kKeyEnv;
  c.start.clear();
  r = NewGatewayActuator(c, SystemClock());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("`start`"), std::string::npos);
  c.start = {"/bin/true"};
  c.port_min = 30000;
  c.port_max = 20000;
  r = NewGatewayActuator(c, SystemClock());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("port_min"), std::string::npos);
}

}  // namespace
}  // namespace gantry::autoscale
