// examples/autoscale/scale-to-zero as its README runs it: the example's own
// gateway.yaml, autoscale.yaml and model_server.py, with only the ports and the
// state directory moved to free ones. A request to an empty pool is held, wakes
// the target, and is answered by the backend gantry autoscale starts for it.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "gantry/core/http_client.h"
#include "testing/child_process.h"
#include "testing/gantry_cli.h"
#include "testing/temp_dir.h"

namespace gantry::cli {
namespace {

namespace fs = std::filesystem;
using gantry::testing::GantryProcess;
using gantry::testing::RunGantry;
using gantry::testing::TempDir;

const std::string kExample = std::string(GANTRY_SOURCE_DIR) + "/examples/autoscale/scale-to-zero";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Replaces every `from` in `text`; fails the test when there is none (the
// example changed and this test would silently test something else).
std::string ReplaceAll(std::string text, const std::string& from, const std::string& to) {
  size_t n = 0;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
    ++n;
  }
  EXPECT_GT(n, 0u) << "'" << from << "' is no longer in the example";
  return text;
}

class ScaleToZeroExample : public ::testing::Test {
 protected:
  void SetUp() override {
    gw_port_ = std::to_string(gantry::testing::FreePort());
    as_port_ = std::to_string(gantry::testing::FreePort());
    int base = gantry::testing::FreePort();
    if (base > 65000) base = 40000 + base % 20000;
    std::string ports = std::to_string(base) + "-" + std::to_string(base + 20);

    std::string gw = ReadFile(kExample + "/gateway.yaml");
    gw = ReplaceAll(gw, "127.0.0.1:8080", "127.0.0.1:" + gw_port_);
    gw = ReplaceAll(gw, "127.0.0.1:9310", "127.0.0.1:" + as_port_);
    std::ofstream(dir_.path() + "/gateway.yaml") << gw;

    std::string as = ReadFile(kExample + "/autoscale.yaml");
    as = ReplaceAll(as, "127.0.0.1:8080", "127.0.0.1:" + gw_port_);
    as = ReplaceAll(as, "127.0.0.1:9310", "127.0.0.1:" + as_port_);
    as = ReplaceAll(as, "20000-20099", ports);
    as = ReplaceAll(as, "state_dir: state", "state_dir: " + dir_.path() + "/state");
    as = ReplaceAll(as, " model_server.py,", " " + kExample + "/model_server.py,");
    std::ofstream(dir_.path() + "/autoscale.yaml") << as;
  }

  void TearDown() override {
    // The backends the autoscaler started outlive it (they are the pool's
    // instances): stop them through their pid files.
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(dir_.path() + "/state", ec)) {
      if (e.path().extension() != ".pid") continue;
      pid_t pid = std::atoi(ReadFile(e.path().string()).c_str());
      if (pid > 0) ::kill(-pid, SIGKILL);
    }
  }

  std::string gw_port_, as_port_;
  TempDir dir_;
};

TEST_F(ScaleToZeroExample, TheConfigsAreValid) {
  auto gw = RunGantry({"gateway", "check", "--config", dir_.path() + "/gateway.yaml"});
  EXPECT_EQ(gw.rc, 0) << gw.out << gw.err;
  auto as = RunGantry({"autoscale", "check", "--config", dir_.path() + "/autoscale.yaml"});
  EXPECT_EQ(as.rc, 0) << as.out << as.err;
  EXPECT_NE(as.out.find("llm"), std::string::npos) << as.out;
}

TEST_F(ScaleToZeroExample, TheFirstRequestWakesTheModelAndIsAnswered) {
  // The README's steps: an admin key for the autoscaler, the gateway, the autoscaler.
  auto key = RunGantry({"gateway", "keys", "create", "--config", dir_.path() + "/gateway.yaml",
                        "--name", "autoscaler", "--role", "admin", "--json"});
  ASSERT_EQ(key.rc, 0) << key.err;
  std::string admin_key = key.json()["key"].get<std::string>();
  ASSERT_FALSE(admin_key.empty()) << key.out;

  GantryProcess gateway;
  ASSERT_TRUE(gateway.Start({"gateway", "run", "--config", dir_.path() + "/gateway.yaml"}).ok());
  auto gw_up = gateway.WaitForLine("listening on");
  ASSERT_TRUE(gw_up.ok()) << gw_up.status().ToString();

  GantryProcess autoscale;
  ASSERT_TRUE(autoscale
                  .Start({"autoscale", "run", "--config", dir_.path() + "/autoscale.yaml",
                          "--log-level", "info"},
                         {{"GANTRY_ADMIN_KEY", admin_key}})
                  .ok());
  auto as_up = autoscale.WaitForLine(R"(status on http://127\.0\.0\.1:(\d+)/status)");
  ASSERT_TRUE(as_up.ok()) << as_up.status().ToString();

  // Idle: zero backends, nothing started.
  auto idle = RunGantry({"autoscale", "status", "--url", "http://127.0.0.1:" + as_port_, "--json"});
  ASSERT_EQ(idle.rc, 0) << idle.err;
  EXPECT_EQ(idle.json()["targets"][0]["capacity"]["current"], 0) << idle.out;

  // The first request: held by the gateway, answered once the backend loaded.
  http::Request req;
  req.method = "POST";
  req.url = "http://127.0.0.1:" + gw_port_ + "/v1/chat/completions";
  req.headers = {{"Content-Type", "application/json"}};
  req.body = R"({"model": "example", "messages": [{"role": "user", "content": "hello there"}]})";
  req.deadline = std::chrono::seconds(110);
  auto resp = http::Send(req);
  ASSERT_TRUE(resp.ok()) << resp.status().ToString() << "\ngateway:\n"
                         << gateway.Err() << "\nautoscale:\n"
                         << autoscale.Err();
  ASSERT_EQ(resp->status, 200) << resp->body << "\nautoscale:\n" << autoscale.Err();
  Json body = Json::parse(resp->body, nullptr, false);
  EXPECT_EQ(body["choices"][0]["message"]["content"], "echo: hello there") << resp->body;
  std::string served_by = body.value("served_by", "");
  EXPECT_TRUE(served_by.starts_with("llm-")) << resp->body;  // <pool>-<port>

  // The autoscaler counts the backend it started.
  gantry::testing::CliRun st;
  for (int i = 0; i < 200; ++i) {
    st = RunGantry({"autoscale", "status", "--url", "http://127.0.0.1:" + as_port_, "--json"});
    ASSERT_EQ(st.rc, 0) << st.err;
    if (st.json()["targets"][0]["capacity"]["current"] == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(st.json()["targets"][0]["capacity"]["current"], 1) << st.out;
  auto woke = autoscale.WaitForErrLine(R"(autoscale llm: 0 -> 1)");
  EXPECT_TRUE(woke.ok()) << woke.status().ToString();

  autoscale.Signal(SIGTERM);
  EXPECT_EQ(autoscale.Wait(), 0) << autoscale.Err();
  gateway.Signal(SIGTERM);
  EXPECT_EQ(gateway.Wait(), 0) << gateway.Err();
}

}  // namespace
}  // namespace gantry::cli
