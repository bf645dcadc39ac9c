#include "gantry/agent/dashboard.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <utime.h>

#include <filesystem>
#include <fstream>

namespace gantry::agent {
namespace {

namespace fs = std::filesystem;

// A History holding fixed series, so the API can be checked without SQLite.
class FakeHistory : public History {
 public:
  std::vector<SeriesPoints> data;
  int64_t last_from = 0, last_to = 0;

  Status Append(int64_t, const std::vector<Signal>&) override { return Status::Ok(); }
  Result<std::vector<SeriesPoints>> Query(std::string_view name, const metrics::Labels&,
                                          int64_t from_ms, int64_t to_ms) override {
    last_from = from_ms;
    last_to = to_ms;
    std::vector<SeriesPoints> out;
    for (const SeriesPoints& s : data) {
      if (s.name != name) continue;
      SeriesPoints c{s.name, s.labels, {}};
      for (const Point& p : s.points) {
        if (p.time_ms >= from_ms && p.time_ms <= to_ms) c.points.push_back(p);
      }
      out.push_back(std::move(c));
    }
    return out;
  }
  Result<std::vector<std::string>> Names() override {
    std::vector<std::string> n;
    for (const SeriesPoints& s : data) n.push_back(s.name);
    return n;
  }
  Status Compact(int64_t) override { return Status::Ok(); }
  const HistoryOptions& options() const override { return opts_; }

 private:
  HistoryOptions opts_;
};

// Calls the handler the server would pick (longest matching prefix).
class Routes {
 public:
  explicit Routes(DashboardSources src) : routes_(DashboardRoutes(std::move(src))) {}
  http::ServerResponse Get(const std::string& target, const std::string& method = "GET") {
    http::ServerRequest req;
    req.method = method;
    req.target = target;
    auto q = target.find('?');
    req.path = target.substr(0, q);
    if (q != std::string::npos) req.query = target.substr(q + 1);
    const http::Handler* best = nullptr;
    size_t best_len = 0;
    for (const auto& [prefix, h] : routes_) {
      if (req.path.starts_with(prefix) && prefix.size() >= best_len) {
        best = &h;
        best_len = prefix.size();
      }
    }
    http::ServerResponse resp;
    if (best == nullptr) {
      resp.status = 404;
      return resp;
    }
    (*best)(req, &resp);
    return resp;
  }
  Json GetJson(const std::string& target, int want_status = 200) {
    http::ServerResponse r = Get(target);
    EXPECT_EQ(r.status, want_status) << target << ": " << r.body;
    EXPECT_EQ(r.content_type, "application/json") << target;
    auto j = ParseJson(r.body, target);
    EXPECT_TRUE(j.ok()) << r.body;
    return j.ok() ? *j : Json();
  }

 private:
  std::vector<std::pair<std::string, http::Handler>> routes_;
};

constexpr int64_t kNowMs = 1'800'000'000'000;

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("gantry_dashboard_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    src_.clock = &clock_;
    src_.hostname = "node<1>";
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  void SetMtime(const fs::path& p, int64_t unix_s) {
    struct utimbuf t {
      time_t(unix_s), time_t(unix_s)
    };
    ASSERT_EQ(::utime(p.c_str(), &t), 0) << p;
  }

  FakeClock clock_{std::chrono::seconds(1000),
                   std::chrono::system_clock::time_point(std::chrono::milliseconds(kNowMs))};
  DashboardSources src_;
  fs::path dir_;
};

TEST_F(DashboardTest, IndexAndStaticAssetsAreServedWithTypes) {
  Routes r(src_);
  http::ServerResponse index = r.Get("/");
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.content_type, "text/html; charset=utf-8");
  EXPECT_NE(index.body.find("/static/app.js"), std::string::npos);
  EXPECT_NE(index.body.find("panel-cpu"), std::string::npos);
  bool csp = false;
  for (const auto& [k, v] : index.headers) csp |= k == "Content-Security-Policy";
  EXPECT_TRUE(csp);
  EXPECT_EQ(r.Get("/index.html").status, 200);

  http::ServerResponse js = r.Get("/static/app.js");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8");
  EXPECT_NE(js.body.find("/api/v1/summary"), std::string::npos);
  http::ServerResponse css = r.Get("/static/style.css");
  EXPECT_EQ(css.status, 200);
  EXPECT_EQ(css.content_type, "text/css; charset=utf-8");
  // The page must not load anything from elsewhere (no CDN).
  for (const std::string& body : {index.body, js.body, css.body}) {
    EXPECT_EQ(body.find("http://"), std::string::npos);
    EXPECT_EQ(body.find("https://"), std::string::npos);
  }
  EXPECT_EQ(r.Get("/", "HEAD").status, 200);
}

TEST_F(DashboardTest, UnknownStaticPathsAndTraversalAre404) {
  Write(dir_ / "secret.txt", "top secret");
  Routes r(src_);
  for (const std::string& p : std::vector<std::string>{
           "/static/nope.js", "/static/", "/static/index.html", "/static/../../etc/passwd",
           "/static/..%2f..%2fetc%2fpasswd", "/static/./app.js", "/static//app.js",
           "/static/app.js/", "/static/sub/app.js", "/etc/passwd", "/../etc/passwd",
           "/static/" + (dir_ / "secret.txt").string(), "/api/v1/summaryx", "/api/v1/nope",
           "/api/v1/"}) {
    http::ServerResponse resp = r.Get(p);
    EXPECT_EQ(resp.status, 404) << p;
    EXPECT_EQ(resp.body.find("top secret"), std::string::npos) << p;
    EXPECT_EQ(resp.body.find("root:"), std::string::npos) << p;
    auto j = ParseJson(resp.body, p);
    ASSERT_TRUE(j.ok()) << p << ": " << resp.body;
    EXPECT_TRUE(j->contains("error")) << p;
  }
}

TEST_F(DashboardTest, OnlyGetAndHeadAreAllowed) {
  Routes r(src_);
  for (const char* p : {"/", "/static/app.js", "/api/v1/summary", "/api/v1/alerts"}) {
    http::ServerResponse resp = r.Get(p, "POST");
    EXPECT_EQ(resp.status, 405) << p;
  }
}

TEST_F(DashboardTest, SummaryReportsLatestSignals) {
  src_.latest = [] {
    return LatestSignals{kNowMs - 1000,
                         {{"cpu_utilization", {}, 37.5},
                          {"gpu_utilization", {{"gpu", "0"}}, 98},
                          {"load1", {}, std::nan("")}}};
  };
  src_.poll_seconds = 5;
  Routes r(src_);
  Json j = r.GetJson("/api/v1/summary");
  EXPECT_EQ(j["time_ms"], kNowMs - 1000);
  EXPECT_EQ(j["now_ms"], kNowMs);
  EXPECT_EQ(j["hostname"], "node<1>");
  EXPECT_EQ(j["poll_seconds"], 5);
  EXPECT_EQ(j["history"], false);
  ASSERT_EQ(j["signals"].size(), 3u);
  EXPECT_EQ(j["signals"][0]["name"], "cpu_utilization");
  EXPECT_EQ(j["signals"][0]["value"], 37.5);
  EXPECT_EQ(j["signals"][1]["labels"]["gpu"], "0");
  EXPECT_TRUE(j["signals"][2]["value"].is_null());  // NaN is not JSON
}

TEST_F(DashboardTest, SummaryWithoutSourceSaysNoData) {
  Routes r(src_);
  Json j = r.GetJson("/api/v1/summary");
  EXPECT_EQ(j["time_ms"], 0);
  EXPECT_TRUE(j["signals"].empty());
}

TEST_F(DashboardTest, SeriesComesFromHistoryForTheWindow) {
  FakeHistory h;
  SeriesPoints cpu{"cpu_utilization", {}, {}};
  for (int i = 0; i < 120; ++i) cpu.points.push_back({kNowMs - 7200'000 + i * 60'000, double(i)});
  h.data.push_back(cpu);
  h.data.push_back({"gpu_utilization", {{"gpu", "0"}}, {{kNowMs - 10'000, 50}}});
  h.data.push_back({"gpu_utilization", {{"gpu", "1"}}, {{kNowMs - 10'000, 70}}});
  src_.history = &h;
  Routes r(src_);

  Json j = r.GetJson("/api/v1/series?name=cpu_utilization&since=15m");
  EXPECT_EQ(j["name"], "cpu_utilization");
  EXPECT_EQ(j["from_ms"], kNowMs - 15 * 60'000);
  EXPECT_EQ(j["to_ms"], kNowMs);
  EXPECT_EQ(h.last_from, kNowMs - 15 * 60'000);
  ASSERT_EQ(j["series"].size(), 1u);
  EXPECT_EQ(j["series"][0]["key"], "cpu_utilization");
  // Points at -15m .. -1m: minutes 105..119 of the fake data.
  ASSERT_EQ(j["series"][0]["points"].size(), 15u);
  EXPECT_EQ(j["series"][0]["points"][0][0], kNowMs - 15 * 60'000);
  EXPECT_EQ(j["series"][0]["points"][14][1], 119.0);

  // Default window is one hour; absolute Unix ms works too.
  r.GetJson("/api/v1/series?name=cpu_utilization");
  EXPECT_EQ(h.last_from, kNowMs - 3600'000);
  r.GetJson("/api/v1/series?name=cpu_utilization&since=" + std::to_string(kNowMs - 5000));
  EXPECT_EQ(h.last_from, kNowMs - 5000);

  Json gpu = r.GetJson("/api/v1/series?name=gpu_utilization&since=1h");
  ASSERT_EQ(gpu["series"].size(), 2u);
  EXPECT_EQ(gpu["series"][1]["labels"]["gpu"], "1");
  EXPECT_EQ(gpu["series"][1]["key"], "gpu_utilization{gpu=\"1\"}");

  Json none = r.GetJson("/api/v1/series?name=nothing&since=1h");
  EXPECT_TRUE(none["series"].empty());
}

TEST_F(DashboardTest, SeriesIsDownsampledToMaxPoints) {
  FakeHistory h;
  SeriesPoints cpu{"cpu_utilization", {}, {}};
  // 2 h of 15 s samples alternating 0 and 100: the averages must be 50.
  for (int i = 0; i < 480; ++i)
    cpu.points.push_back({kNowMs - 7200'000 + i * 15'000, i % 2 ? 100.0 : 0.0});
  h.data.push_back(cpu);
  src_.history = &h;
  Routes r(src_);
  Json j = r.GetJson("/api/v1/series?name=cpu_utilization&since=2h&max_points=60");
  const Json& pts = j["series"][0]["points"];
  ASSERT_LE(pts.size(), 60u);
  ASSERT_GE(pts.size(), 55u);
  for (const Json& p : pts) EXPECT_NEAR(p[1].get<double>(), 50.0, 1e-9);
  for (size_t i = 1; i < pts.size(); ++i) EXPECT_LT(pts[i - 1][0], pts[i][0]);
}

TEST_F(DashboardTest, SeriesErrors) {
  FakeHistory h;
  h.data.push_back({"cpu_utilization", {}, {}});
  Routes no_history(src_);
  no_history.GetJson("/api/v1/series?name=cpu_utilization", 503);
  src_.history = &h;
  Routes r(src_);
  Json missing = r.GetJson("/api/v1/series", 400);
  EXPECT_NE(missing["error"].get<std::string>().find("cpu_utilization"), std::string::npos);
  Json bad = r.GetJson("/api/v1/series?name=cpu_utilization&since=yesterday", 400);
  EXPECT_NE(bad["error"].get<std::string>().find("yesterday"), std::string::npos);
  r.GetJson("/api/v1/series?name=cpu_utilization&max_points=0", 400);
  r.GetJson("/api/v1/series?name=cpu_utilization&max_points=999999", 400);
}

TEST_F(DashboardTest, AlertsComeFromTheProvider) {
  Routes none(src_);
  EXPECT_EQ(none.GetJson("/api/v1/alerts")["alerts"], Json::array());
  src_.firing_alerts = [] {
    return Json::array({{{"labels", {{"alertname", "GpuHot"}, {"severity", "critical"}}},
                         {"annotations", {{"summary", "GPU 0 at 91 C"}}},
                         {"starts_at_ms", kNowMs - 60'000}}});
  };
  Routes r(src_);
  Json j = r.GetJson("/api/v1/alerts");
  ASSERT_EQ(j["alerts"].size(), 1u);
  EXPECT_EQ(j["alerts"][0]["labels"]["alertname"], "GpuHot");
}

TEST_F(DashboardTest, HealthIsUnknownWithoutAReport) {
  Routes unset(src_);
  EXPECT_EQ(unset.GetJson("/api/v1/health")["status"], "unknown");
  src_.health_json_path = (dir_ / "health.json").string();
  Routes r(src_);
  Json j = r.GetJson("/api/v1/health");
  EXPECT_EQ(j["status"], "unknown");
  EXPECT_NE(j["reason"].get<std::string>().find("health.json"), std::string::npos);
  Write(dir_ / "health.json", "{not json");
  EXPECT_EQ(r.GetJson("/api/v1/health")["status"], "unknown");
  Write(dir_ / "health.json", "[1,2]");
  EXPECT_EQ(r.GetJson("/api/v1/health")["status"], "unknown");
}

TEST_F(DashboardTest, HealthReadsGantryHealthJson) {
  src_.health_json_path = (dir_ / "health.json").string();
  Write(dir_ / "health.json", R"({"report":"gantry.health","version":1,"profile":"nd-h100-v5",
    "hostname":"n1","timestamp":"2027-01-15T08:00:00Z","overall":"fail","results":[
    {"name":"gpu_count","outcome":"pass","message":"8 GPUs"},
    {"name":"gpu_xid","outcome":"fail","message":"XID 79 on GPU 3"}]})");
  SetMtime(dir_ / "health.json", kNowMs / 1000 - 120);
  Routes r(src_);
  Json j = r.GetJson("/api/v1/health");
  EXPECT_EQ(j["status"], "fail");
  EXPECT_EQ(j["profile"], "nd-h100-v5");
  EXPECT_EQ(j["age_s"], 120);
  ASSERT_EQ(j["checks"].size(), 2u);
  EXPECT_EQ(j["checks"][1]["name"], "gpu_xid");
  EXPECT_EQ(j["checks"][1]["outcome"], "fail");
  EXPECT_EQ(j["checks"][1]["message"], "XID 79 on GPU 3");
}

TEST_F(DashboardTest, CheckpointsListsCommittedStepsNewestFirst) {
  fs::path root = dir_ / "ckpt";
  auto step = [&](const std::string& run, const std::string& dir, bool committed, int64_t t) {
    fs::create_directories(root / run / dir);
    if (committed) {
      Write(root / run / dir / "COMMITTED", "sha256 00\n");
      SetMtime(root / run / dir / "COMMITTED", t);
    }
  };
  step("llama", "step-0000000100", true, 1000);
  step("llama", "step-0000000200", true, 2000);
  step("llama", "step-0000000300", false, 0);         // being written or crashed
  step("llama", ".tmp-step-0000000400", true, 4000);  // not renamed yet
  step("bert", "step-0000000007", true, 3000);
  step("bert", "notes", true, 5000);
  Write(root / "stray-file", "x");
  src_.checkpoint_roots = {root.string(), (dir_ / "missing").string()};
  src_.max_checkpoints = 2;
  Routes r(src_);
  Json j = r.GetJson("/api/v1/checkpoints");
  ASSERT_EQ(j["checkpoints"].size(), 2u) << j.dump();
  EXPECT_EQ(j["checkpoints"][0]["run"], "bert");
  EXPECT_EQ(j["checkpoints"][0]["step"], 7);
  EXPECT_EQ(j["checkpoints"][0]["committed_unix_s"], 3000);
  EXPECT_EQ(j["checkpoints"][1]["run"], "llama");
  EXPECT_EQ(j["checkpoints"][1]["step"], 200);
  ASSERT_EQ(j["errors"].size(), 1u);
  EXPECT_NE(j["errors"][0].get<std::string>().find("missing"), std::string::npos);
  EXPECT_EQ(j["roots"].size(), 2u);

  std::vector<std::string> errors;
  auto all = ListCommittedCheckpoints({root.string()}, 100, &errors);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_TRUE(errors.empty());
}

TEST_F(DashboardTest, CheckpointListingIsCachedBriefly) {
  fs::path root = dir_ / "ckpt";
  Write(root / "run" / "step-0000000001" / "COMMITTED", "x");
  src_.checkpoint_roots = {root.string()};
  Routes r(src_);
  EXPECT_EQ(r.GetJson("/api/v1/checkpoints")["checkpoints"].size(), 1u);
  Write(root / "run" / "step-0000000002" / "COMMITTED", "x");
  EXPECT_EQ(r.GetJson("/api/v1/checkpoints")["checkpoints"].size(), 1u);
  clock_.Advance(std::chrono::seconds(11));
  EXPECT_EQ(r.GetJson("/api/v1/checkpoints")["checkpoints"].size(), 2u);
}

}  // namespace
}  // namespace gantry::agent
