// Pools changed at run time, in-process: the admin API's /admin/pools routes
// (add, list, remove), removal while requests are in flight, the per-pool
// metrics, reloads that keep added backends, and scale from zero (held
// requests released to a backend added later, the bound, the timeout, the
// wake call).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gantry/core/http_client.h"
#include "gantry/core/http_server.h"
#include "gantry/gateway/admin_client.h"
#include "gantry/gateway/config.h"
#include "gantry/gateway/server.h"
#include "gantry/security/key_store.h"
#include "testing/http_test_server.h"

namespace gantry::gateway {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;

// A model server stand-in: counts requests by their X-Test-Id, answers
// /health, and holds requests to .../slow until Open().
class TestBackend {
 public:
  TestBackend() {
    server_.Handle("/", [this](const http::ServerRequest& req, http::ServerResponse* resp) {
      if (req.path == "/health") {
        resp->body = "ok";
        return;
      }
      const std::string* h = req.Header("x-test-id");
      std::string id = h != nullptr ? *h : "";
      {
        std::unique_lock<std::mutex> lock(mu_);
        ++counts_[id];
        ++total_;
        cv_.notify_all();
        if (req.path.ends_with("/slow")) cv_.wait(lock, [this] { return open_; });
      }
      resp->content_type = "application/json";
      resp->body = json{{"id", id}, {"path", req.path}, {"body", req.body}}.dump();
    });
    Status s = server_.Start({.listen = "127.0.0.1:0", .handler_threads = 64});
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  ~TestBackend() {
    Open();
    server_.Stop();
  }
  uint16_t port() const { return server_.port(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port()); }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  // Waits until `n` requests (not health checks) have arrived.
  bool WaitTotal(int n, milliseconds timeout = milliseconds(10'000)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return total_ >= n; });
  }
  int total() {
    std::lock_guard<std::mutex> lock(mu_);
    return total_;
  }
  std::map<std::string, int> counts() {
    std::lock_guard<std::mutex> lock(mu_);
    return counts_;
  }

 private:
  http::Server server_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int total_ = 0;
  std::map<std::string, int> counts_;
};

class PoolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("gantry-gw-pools-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto ks = security::KeyStore::Open((dir_ / "state.db").string());
    ASSERT_TRUE(ks.ok()) << ks.status().ToString();
    auto admin = (*ks)->Create("ops", "admin", 0, std::time(nullptr));
    ASSERT_TRUE(admin.ok());
    admin_key_ = admin->second;
  }
  void TearDown() override {
    gw_.reset();
    fs::remove_all(dir_);
  }

  // `fixed` is in pool llm; pool cold starts empty and scales from zero.
  std::string Yaml(const std::string& cold_extra, const std::string& wake = "") {
    std::string sfz = "{hold: " + std::to_string(hold_) + ", hold_timeout: " + hold_timeout_ +
                      ", retry_after: 7s" + (wake.empty() ? "" : ", wake: '" + wake + "'") + "}";
    return "listen: 127.0.0.1:0\nworkers: 2\nstate: state.db\n"
           "backends:\n  - {name: fixed, url: 'http://" +
           fixed_.address() +
           "'}\n"
           "pools:\n"
           "  - {name: llm, backends: [fixed]}\n"
           "  - name: cold\n"
           "    backends: []\n"
           "    scale_from_zero: " +
           sfz + "\n" + cold_extra +
           "routes:\n"
           "  - {prefix: /llm/, pool: llm, auth: none}\n"
           "  - {prefix: /cold/, pool: cold, auth: none}\n"
           "roles:\n  admin:\n    - {action: '*'}\n";
  }

  void Start(const std::string& cold_extra = "", const std::string& wake = "") {
    std::string path = (dir_ / "gateway.yaml").string();
    std::ofstream(path) << Yaml(cold_extra, wake);
    auto cfg = LoadGatewayConfig(path);
    ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
    auto gw = Gateway::Create(std::move(*cfg));
    ASSERT_TRUE(gw.ok()) << gw.status().ToString();
    gw_ = std::move(*gw);
    ASSERT_TRUE(gw_->Start().ok());
    auto admin = AdminClient::Create(gw_->url(), admin_key_);
    ASSERT_TRUE(admin.ok());
    admin_.emplace(std::move(*admin));
  }

  Result<http::Response> Call(const std::string& method, const std::string& path,
                              const std::string& id = "", const std::string& body = "",
                              milliseconds deadline = milliseconds(30'000)) {
    http::Request r;
    r.method = method;
    r.url = gw_->url() + path;
    if (!id.empty()) r.headers.push_back({"X-Test-Id", id});
    r.headers.push_back({"Authorization", "Bearer " + admin_key_});
    r.body = body;
    r.deadline = deadline;
    return http::Send(r);
  }

  json Pool(const std::string& name) {
    auto pools = admin_->Pools();
    EXPECT_TRUE(pools.ok()) << pools.status().ToString();
    if (!pools.ok()) return json();
    for (const auto& p : (*pools)["pools"]) {
      if (p["name"] == name) return json::parse(p.dump());
    }
    return json();
  }

  // Polls the pool's state until `pred` holds.
  template <typename Pred>
  bool WaitPool(const std::string& name, Pred pred, milliseconds timeout = milliseconds(10'000)) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      if (pred(Pool(name))) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return false;
  }

  std::string Metrics() {
    auto r = Call("GET", "/metrics");
    return r.ok() ? r->body : "";
  }

  fs::path dir_;
  TestBackend fixed_;
  uint32_t hold_ = 8;
  std::string hold_timeout_ = "20s";
  std::unique_ptr<Gateway> gw_;
  std::optional<AdminClient> admin_;
  std::string admin_key_;
};

TEST_F(PoolsTest, AdminAddsListsAndRemovesBackends) {
  Start();
  json llm = Pool("llm");
  EXPECT_EQ(llm["backends"], json::array({"fixed"}));
  EXPECT_EQ(llm["up"], 1);
  EXPECT_TRUE(llm["scale_from_zero"].is_null());
  json cold = Pool("cold");
  EXPECT_EQ(cold["backends"], json::array());
  EXPECT_EQ(cold["scale_from_zero"]["hold"], 8);
  EXPECT_EQ(cold["scale_from_zero"]["retry_after_s"], 7);

  TestBackend extra;
  auto added = admin_->AddBackend("llm", "extra", extra.address());
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_EQ((*added)["name"], "extra");
  EXPECT_EQ((*added)["pool"], "llm");
  EXPECT_EQ(Pool("llm")["backends"], json::array({"fixed", "extra"}));
  EXPECT_EQ(Pool("llm")["added"], json::array({"extra"}));

  // Both take traffic (round robin is not promised: least request over 40).
  for (int i = 0; i < 40; ++i) {
    auto r = Call("GET", "/llm/x", "r" + std::to_string(i));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200);
  }
  EXPECT_GT(extra.total(), 0);
  EXPECT_GT(fixed_.total(), 0);
  EXPECT_EQ(extra.total() + fixed_.total(), 40);

  // Conflicts and bad input name what is wrong.
  auto again = admin_->AddBackend("cold", "extra", extra.address());
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition) << again.status().ToString();
  EXPECT_NE(again.status().message().find("exists already"), std::string::npos);
  EXPECT_EQ(admin_->AddBackend("llm", "fixed", extra.address()).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(admin_->AddBackend("nopool", "x", extra.address()).status().code(),
            StatusCode::kNotFound);
  auto bad = Call("POST", "/admin/pools/llm/backends", "", R"({"address":"127.0.0.1:1"})");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("`name`"), std::string::npos) << bad->body;
  bad =
      Call("POST", "/admin/pools/llm/backends", "", R"({"name":"y","address":"host.example:80"})");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("`address`"), std::string::npos) << bad->body;
  bad = Call("POST", "/admin/pools/llm/backends", "", R"({"name":"y","address":"127.0.0.1:0"})");
  EXPECT_EQ(bad->status, 400);
  bad = Call("POST", "/admin/pools/llm/backends", "",
             R"({"name":"y","address":"127.0.0.1:9","weight":0})");
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("`weight`"), std::string::npos) << bad->body;
  bad = Call("POST", "/admin/pools/llm/backends", "", R"({"name":"a/b","address":"127.0.0.1:9"})");
  EXPECT_EQ(bad->status, 400);
  bad = Call("POST", "/admin/pools/llm/backends", "",
             R"({"name":"y","address":"127.0.0.1:9","x":1})");
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("'x'"), std::string::npos) << bad->body;
  EXPECT_EQ(Call("GET", "/admin/pools/llm/backends")->status, 405);

  // Removal: only what the admin API added.
  auto from_file = admin_->RemoveBackend("llm", "fixed", false);
  EXPECT_EQ(from_file.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(from_file.status().message().find("gateway.yaml"), std::string::npos);
  EXPECT_EQ(admin_->RemoveBackend("llm", "nosuch", false).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(admin_->RemoveBackend("cold", "extra", false).status().code(), StatusCode::kNotFound);
  auto removed = admin_->RemoveBackend("llm", "extra", false);
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(Pool("llm")["backends"], json::array({"fixed"}));
  int before = extra.total();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(Call("GET", "/llm/y")->status, 200);
  EXPECT_EQ(extra.total(), before);
  // The name is free again.
  EXPECT_TRUE(admin_->AddBackend("llm", "extra", extra.address()).ok());
}

TEST_F(PoolsTest, ForcedRemovalUnderLoadLetsRequestsInFlightFinish) {
  Start();
  TestBackend slow;
  ASSERT_TRUE(admin_->AddBackend("cold", "slow", slow.address()).ok());
  constexpr int kN = 12;
  std::vector<std::thread> clients;
  std::atomic<int> ok{0}, other{0};
  for (int i = 0; i < kN; ++i) {
    clients.emplace_back([&, i] {
      auto r =
          Call("POST", "/cold/slow", "s" + std::to_string(i), "{\"n\":" + std::to_string(i) + "}");
      (r.ok() && r->status == 200 ? ok : other)++;
    });
  }
  ASSERT_TRUE(slow.WaitTotal(kN));
  auto b = admin_->Backend("slow");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)["in_flight"], kN);
  // Refused while requests are in flight, unless forced.
  auto refused = admin_->RemoveBackend("cold", "slow", false);
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("in flight"), std::string::npos);
  ASSERT_TRUE(admin_->RemoveBackend("cold", "slow", true).ok());
  EXPECT_EQ(Pool("cold")["backends"], json::array());
  // Churn the configuration while they are still in flight.
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(admin_->AddBackend("llm", "churn", slow.address()).ok());
    ASSERT_TRUE(admin_->RemoveBackend("llm", "churn", true).ok());
  }
  slow.Open();
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), kN);
  EXPECT_EQ(other.load(), 0);
  auto counts = slow.counts();
  for (int i = 0; i < kN; ++i) EXPECT_EQ(counts["s" + std::to_string(i)], 1) << i;
  EXPECT_EQ(Pool("cold")["in_flight"], 0);
}

TEST_F(PoolsTest, HeldRequestsGoToABackendAddedLaterAndTheWakeUrlIsCalled) {
  gantry::testing::ScriptedHttpServer waker(
      {.pieces = {"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"}});
  Start("", waker.Url("/wake/cold"));
  constexpr int kN = 6;
  std::vector<std::thread> clients;
  std::vector<int> status(kN, 0);
  std::vector<std::string> bodies(kN);
  for (int i = 0; i < kN; ++i) {
    clients.emplace_back([&, i] {
      auto r = Call("POST", "/cold/v1/chat", "h" + std::to_string(i),
                    "{\"i\":" + std::to_string(i) + "}");
      if (r.ok()) {
        status[i] = r->status;
        bodies[i] = r->body;
      }
    });
  }
  ASSERT_TRUE(WaitPool("cold", [](const json& p) { return p["held"] == kN; }));
  // The wake URL was POSTed while they wait.
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (waker.request().empty() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_NE(waker.request().find("POST /wake/cold HTTP/1.1"), std::string::npos) << waker.request();
  std::string m = Metrics();
  EXPECT_NE(m.find("gantry_gateway_pool_held{pool=\"cold\"} 6"), std::string::npos) << m;
  EXPECT_NE(m.find("gantry_gateway_pool_backends_up{pool=\"cold\"} 0"), std::string::npos);

  TestBackend late;
  ASSERT_TRUE(admin_->AddBackend("cold", "late", late.address()).ok());
  for (auto& t : clients) t.join();
  auto counts = late.counts();
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(status[i], 200) << bodies[i];
    EXPECT_EQ(counts["h" + std::to_string(i)], 1) << i;
    EXPECT_NE(bodies[i].find("{\\\"i\\\":" + std::to_string(i) + "}"), std::string::npos)
        << bodies[i];
  }
  EXPECT_EQ(late.total(), kN);
  m = Metrics();
  EXPECT_NE(m.find("gantry_gateway_held_total{outcome=\"released\",pool=\"cold\"} 6"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("gantry_gateway_pool_held{pool=\"cold\"} 0"), std::string::npos);
  EXPECT_NE(m.find("gantry_gateway_pool_backends_up{pool=\"cold\"} 1"), std::string::npos);
  EXPECT_NE(m.find("gantry_gateway_pool_in_flight{pool=\"cold\"} 0"), std::string::npos);
  EXPECT_NE(m.find("gantry_gateway_pool_pending{pool=\"cold\"} 0"), std::string::npos);
}

TEST_F(PoolsTest, FloodBeyondTheHoldBoundGets503WithRetryAfter) {
  hold_ = 3;
  Start();
  constexpr int kN = 10;
  std::vector<std::thread> clients;
  std::vector<int> status(kN, 0);
  std::vector<std::string> retry_after(kN), bodies(kN);
  std::atomic<int> refused{0};
  for (int i = 0; i < kN; ++i) {
    clients.emplace_back([&, i] {
      auto r = Call("POST", "/cold/x", "f" + std::to_string(i), "{}");
      if (!r.ok()) return;
      status[i] = r->status;
      bodies[i] = r->body;
      if (const std::string* h = r->FindHeader("Retry-After")) retry_after[i] = *h;
      if (r->status == 503) ++refused;
    });
  }
  // The 7 over the bound are refused at once; 3 wait.
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (refused.load() < kN - 3 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_TRUE(WaitPool("cold", [](const json& p) { return p["held"] == 3; }));
  TestBackend late;
  ASSERT_TRUE(admin_->AddBackend("cold", "late", late.address()).ok());
  for (auto& t : clients) t.join();
  int ok = 0, shed = 0;
  auto counts = late.counts();
  for (int i = 0; i < kN; ++i) {
    std::string id = "f" + std::to_string(i);
    if (status[i] == 200) {
      ++ok;
      EXPECT_EQ(counts[id], 1) << id;
    } else {
      ++shed;
      EXPECT_EQ(status[i], 503);
      EXPECT_EQ(retry_after[i], "7");
      EXPECT_EQ(counts.count(id), 0u) << id;  // never reached a backend
      json j = json::parse(bodies[i], nullptr, false);
      ASSERT_TRUE(j.is_object()) << bodies[i];
      EXPECT_NE(j["error"]["message"].get<std::string>().find("scale_from_zero.hold"),
                std::string::npos);
    }
  }
  EXPECT_EQ(ok, 3);
  EXPECT_EQ(shed, kN - 3);
  EXPECT_EQ(late.total(), 3);
  EXPECT_NE(Metrics().find("gantry_gateway_held_total{outcome=\"overflow\",pool=\"cold\"} 7"),
            std::string::npos);
}

TEST_F(PoolsTest, HoldTimeoutIs503WithRetryAfter) {
  hold_timeout_ = "300ms";
  Start();
  auto r = Call("POST", "/cold/x", "t", "{}");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 503);
  ASSERT_NE(r->FindHeader("Retry-After"), nullptr);
  EXPECT_EQ(*r->FindHeader("Retry-After"), "7");
  EXPECT_NE(r->body.find("hold_timeout"), std::string::npos) << r->body;
  EXPECT_EQ(Pool("cold")["held"], 0);
  EXPECT_NE(Metrics().find("gantry_gateway_held_total{outcome=\"timeout\",pool=\"cold\"} 1"),
            std::string::npos);
}

TEST_F(PoolsTest, AddedBackendsSurviveReloadWhileTheirPoolExists) {
  Start();
  TestBackend extra;
  ASSERT_TRUE(admin_->AddBackend("cold", "extra", extra.address()).ok());
  std::string path = (dir_ / "gateway.yaml").string();
  auto cfg = LoadGatewayConfig(path);
  ASSERT_TRUE(cfg.ok());
  ASSERT_TRUE(gw_->Reload(std::move(*cfg)).ok());
  EXPECT_EQ(Pool("cold")["backends"], json::array({"extra"}));
  EXPECT_EQ(Call("GET", "/cold/after-reload", "a")->status, 200);
  EXPECT_EQ(extra.counts()["a"], 1);

  // A reload without the pool drops it.
  std::string yaml = Yaml("");
  std::string cut = yaml.substr(0, yaml.find("  - name: cold")) + "routes:\n" +
                    "  - {prefix: /llm/, pool: llm, auth: none}\n" +
                    "roles:\n  admin:\n    - {action: '*'}\n";
  std::ofstream(path) << cut;
  cfg = LoadGatewayConfig(path);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  ASSERT_TRUE(gw_->Reload(std::move(*cfg)).ok());
  EXPECT_TRUE(Pool("cold").is_null());
  std::ofstream(path) << Yaml("");
  cfg = LoadGatewayConfig(path);
  ASSERT_TRUE(cfg.ok());
  ASSERT_TRUE(gw_->Reload(std::move(*cfg)).ok());
  EXPECT_EQ(Pool("cold")["backends"], json::array());
}

TEST_F(PoolsTest, HealthCheckedPoolSendsNothingBeforeTheFirstCheckPasses) {
  Start("    health_check: {path: /health, interval: 100ms, timeout: 200ms}\n");
  uint16_t closed = gantry::testing::ClosedLoopbackPort();
  ASSERT_TRUE(admin_->AddBackend("cold", "down", "127.0.0.1:" + std::to_string(closed)).ok());
  auto b = admin_->Backend("down");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)["healthy"], false);
  EXPECT_EQ(Pool("cold")["up"], 0);
  // Held meanwhile, then served by the first backend that passes a check.
  std::thread client([&] {
    auto r = Call("POST", "/cold/x", "hc", "{}");
    EXPECT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().ToString());
  });
  ASSERT_TRUE(WaitPool("cold", [](const json& p) { return p["held"] == 1; }));
  TestBackend good;
  ASSERT_TRUE(admin_->AddBackend("cold", "good", good.address()).ok());
  client.join();
  EXPECT_EQ(good.counts()["hc"], 1);
  EXPECT_TRUE(WaitPool("cold", [](const json& p) { return p["up"] == 1; }));
}

}  // namespace
}  // namespace gantry::gateway
