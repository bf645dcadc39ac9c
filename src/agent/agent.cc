// The agent service: config, collection loop, /metrics from a cached
// snapshot, /healthz, and the composition of rules, notifications, idle
// detection and the dashboard.
#include "gantry/agent/agent.h"

#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "gantry/core/config.h"
#include "gantry/core/http_parser.h"
#include "gantry/core/http_server.h"
#include "gantry/core/log.h"
#include "gantry/monitor/alert_sink.h"

namespace gantry::agent {
namespace {

std::chrono::milliseconds Ms(std::chrono::nanoseconds d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d);
}

int64_t WallMs(const Clock& clock) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock.WallNow().time_since_epoch())
      .count();
}

std::string Hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

// `key`: a map of node_exporter collector names to booleans (--collector.NAME
// / --no-collector.NAME).
Result<std::vector<std::pair<std::string, bool>>> ParseCollectorSwitches(const Config& cfg,
                                                                         const std::string& key) {
  std::vector<std::pair<std::string, bool>> out;
  if (!cfg.Has(key)) return out;
  if (!cfg.IsMap(key)) {
    return InvalidArgument(cfg.Locate(key) +
                           ": must be a map of node_exporter collector names to true/false, "
                           "e.g. {textfile: true, netclass: false}");
  }
  ASSIGN_OR_RETURN(std::vector<std::string> names, cfg.Keys(key));
  for (const std::string& name : names) {
    std::string k = key + "." + name;
    if (FindNodeExporterCollector(name) == nullptr) {
      std::string known;
      for (const NodeCollectorInfo& c : NodeExporterCollectors()) {
        known.append(known.empty() ? "" : ", ").append(c.name);
      }
      return InvalidArgument(cfg.Locate(k) + ": '" + name +
                             "' is not a node_exporter collector; use one of " + known);
    }
    ASSIGN_OR_RETURN(bool on, cfg.GetBool(k, true));
    out.emplace_back(name, on);
  }
  return out;
}

}  // namespace

std::string DefaultHistoryPath() {
  if (::geteuid() == 0) return "/var/lib/gantry/agent/history.db";
  const char* state = std::getenv("XDG_STATE_HOME");
  if (state != nullptr && *state != '\0') return std::string(state) + "/gantry/agent/history.db";
  const char* home = std::getenv("HOME");
  std::string base = home != nullptr && *home != '\0' ? home : "/tmp";
  return base + "/.local/state/gantry/agent/history.db";
}

Result<AgentConfig> ParseAgentConfig(std::string_view yaml_text, std::string_view origin) {
  AgentConfig c;
  c.origin = std::string(origin);
  ASSIGN_OR_RETURN(Config cfg, Config::LoadString(yaml_text, origin));
  RETURN_IF_ERROR(cfg.CheckKnownKeys("", {"listen", "hostname", "collection", "history", "alerts",
                                          "notify", "idle", "dashboard", "azure_monitor"}));
  RETURN_IF_ERROR(cfg.CheckKnownKeys(
      "collection",
      {"interval", "cache", "root", "gpu", "nvml_library", "collectors", "textfile_directory"}));
  RETURN_IF_ERROR(cfg.CheckKnownKeys("history", {"path", "resolution", "retention"}));
  RETURN_IF_ERROR(cfg.CheckKnownKeys("alerts", {"rules", "rules_file"}));
  RETURN_IF_ERROR(cfg.CheckKnownKeys(
      "dashboard", {"enabled", "health_json", "checkpoint_roots", "poll_seconds"}));

  ASSIGN_OR_RETURN(c.listen, cfg.GetString("listen", c.listen));
  ASSIGN_OR_RETURN(c.hostname, cfg.GetString("hostname", ""));
  ASSIGN_OR_RETURN(auto interval, cfg.GetDuration("collection.interval", c.interval));
  c.interval = Ms(interval);
  if (c.interval.count() <= 0) {
    return InvalidArgument(cfg.Locate("collection.interval") +
                           ": the collection interval must be positive, e.g. 15s");
  }
  ASSIGN_OR_RETURN(auto cache, cfg.GetDuration("collection.cache", c.interval));
  c.cache = Ms(cache);
  if (c.cache.count() < 0) {
    return InvalidArgument(cfg.Locate("collection.cache") + ": must be 0 or positive");
  }
  ASSIGN_OR_RETURN(c.root, cfg.GetString("collection.root", c.root));
  ASSIGN_OR_RETURN(c.gpu, cfg.GetBool("collection.gpu", c.gpu));
  ASSIGN_OR_RETURN(c.nvml_library, cfg.GetString("collection.nvml_library", ""));
  ASSIGN_OR_RETURN(c.collectors, ParseCollectorSwitches(cfg, "collection.collectors"));
  ASSIGN_OR_RETURN(c.textfile_directory, cfg.GetString("collection.textfile_directory", ""));
  ASSIGN_OR_RETURN(c.history_path, cfg.GetString("history.path", ""));
  ASSIGN_OR_RETURN(auto resolution, cfg.GetDuration("history.resolution", c.history.resolution));
  ASSIGN_OR_RETURN(auto retention, cfg.GetDuration("history.retention", c.history.retention));
  c.history.resolution = std::chrono::duration_cast<std::chrono::seconds>(resolution);
  c.history.retention = std::chrono::duration_cast<std::chrono::seconds>(retention);
  if (c.history.resolution.count() <= 0) {
    return InvalidArgument(cfg.Locate("history.resolution") +
                           ": the history resolution must be at least 1s");
  }
  if (c.history.retention < c.history.resolution) {
    return InvalidArgument(cfg.Locate("history.retention") +
                           ": the retention must be at least the resolution");
  }

  ASSIGN_OR_RETURN(c.rules, ParseRulesAt(cfg, "alerts.rules"));
  ASSIGN_OR_RETURN(std::string rules_file, cfg.GetString("alerts.rules_file", ""));
  if (!rules_file.empty()) {
    auto more = LoadRulesFile(rules_file);
    if (!more.ok()) return more.status().WithContext(cfg.Locate("alerts.rules_file"));
    for (Rule& r : *more) {
      for (const Rule& existing : c.rules) {
        if (existing.name == r.name) {
          return InvalidArgument(r.origin + ": rule '" + r.name + "' is also defined at " +
                                 existing.origin + "; rule names must be unique");
        }
      }
      c.rules.push_back(std::move(r));
    }
  }
  ASSIGN_OR_RETURN(c.notify, ParseNotifyConfig(cfg, "notify"));
  ASSIGN_OR_RETURN(c.idle, ParseIdleConfig(cfg, "idle"));
  ASSIGN_OR_RETURN(c.azure_monitor_logs,
                   monitor::ParseAzureMonitorLogs(
                       cfg, "azure_monitor", std::filesystem::path(origin).parent_path().string()));

  ASSIGN_OR_RETURN(c.dashboard, cfg.GetBool("dashboard.enabled", true));
  ASSIGN_OR_RETURN(c.health_json, cfg.GetString("dashboard.health_json", ""));
  ASSIGN_OR_RETURN(c.checkpoint_roots, cfg.GetStringList("dashboard.checkpoint_roots"));
  ASSIGN_OR_RETURN(int64_t poll, cfg.GetInt("dashboard.poll_seconds", c.poll_seconds));
  if (poll < 1 || poll > 3600) {
    return InvalidArgument(cfg.Locate("dashboard.poll_seconds") + ": must be 1..3600");
  }
  c.poll_seconds = static_cast<int>(poll);
  return c;
}

Result<AgentConfig> LoadAgentConfig(const std::string& path) {
  if (path.empty()) return AgentConfig{};
  std::ifstream in(path);
  if (!in) return NotFound("agent config " + path + " cannot be read; check the --config path");
  std::stringstream text;
  text << in.rdbuf();
  return ParseAgentConfig(text.str(), path);
}

struct Agent::Impl {
  AgentConfig config;
  const Clock* clock;
  std::string hostname;

  std::unique_ptr<Collector> node;
  std::unique_ptr<Collector> gpu;
  std::unique_ptr<History> history;
  // Declared before the notifier, whose Azure Monitor sink appends to it, so
  // that it is destroyed after it (and flushes what the sink appended).
  std::shared_ptr<monitor::LogsShipper> shipper;
  std::unique_ptr<Notifier> notifier;
  std::unique_ptr<Evaluator> evaluator;
  std::unique_ptr<IdleDetector> idle;
  http::Server server;

  // Guards the collectors, the current snapshot and the rendered texts.
  std::mutex collect_mu;
  Snapshot current;
  Snapshot previous;  // at the previous tick (for rates)
  bool has_previous = false;
  bool has_current = false;
  uint64_t generation = 0;  // bumps with every collection
  std::string text[2];      // rendered per format
  uint64_t text_generation[2] = {0, 0};

  mutable std::mutex latest_mu;
  LatestSignals latest;
  Stats stats;

  std::mutex loop_mu;
  std::condition_variable loop_cv;
  bool stopping = false;
  bool running = false;
  std::thread loop;

  // Collects into `current` (collect_mu held).
  void CollectLocked() {
    SnapshotWriter w(&current, WallMs(*clock));
    node->Collect(&w);
    if (gpu) gpu->Collect(&w);
    w.Finish();
    has_current = true;
    ++generation;
    ++stats.collections;
  }

  // The body for a scrape (collect_mu held by the caller).
  const std::string& RenderLocked(ExpositionFormat format) {
    int64_t age = WallMs(*clock) - current.time_ms;
    if (!has_current || age >= config.cache.count() || age < 0) CollectLocked();
    int i = format == ExpositionFormat::kOpenMetrics ? 1 : 0;
    if (text_generation[i] != generation) {
      RenderExposition(current, format, &text[i]);
      text_generation[i] = generation;
    }
    return text[i];
  }

  void Tick() {
    std::vector<Signal> signals;
    int64_t now_ms = 0;
    {
      std::lock_guard<std::mutex> lock(collect_mu);
      CollectLocked();
      now_ms = current.time_ms;
      signals = DeriveSignals(has_previous ? &previous : nullptr, current);
      previous = current;  // element-wise assignment: reuses the strings' storage
      has_previous = true;
      ++stats.ticks;
    }
    if (history) {
      Status st = history->Append(now_ms, signals);
      if (!st.ok()) log::warn("agent: history: {}", st.ToString());
    }
    if (evaluator) {
      std::vector<AlertTransition> transitions = evaluator->Evaluate(now_ms);
      std::vector<Alert> alerts = NotifiableAlerts(transitions);
      if (!alerts.empty() && notifier) notifier->Notify(std::move(alerts));
    }
    if (idle) idle->Update(clock->Now(), signals);
    std::lock_guard<std::mutex> lock(latest_mu);
    latest.time_ms = now_ms;
    latest.signals = std::move(signals);
  }

  void Loop() {
    std::unique_lock<std::mutex> lock(loop_mu);
    while (!stopping) {
      lock.unlock();
      Tick();
      lock.lock();
      // Real time: the loop is the agent's heartbeat; tests call Tick().
      loop_cv.wait_for(lock, config.interval, [&] { return stopping; });
    }
  }
};

Agent::Agent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Agent::~Agent() { Stop(); }

Result<std::unique_ptr<Agent>> Agent::Create(const AgentConfig& config, const Clock& clock) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->clock = &clock;
  impl->hostname = config.hostname.empty() ? Hostname() : config.hostname;

  NodeCollectorOptions node_options;
  node_options.root = config.root;
  node_options.collectors = config.collectors;
  node_options.textfile_directory = config.textfile_directory;
  impl->node = NewNodeCollector(node_options);
  if (config.gpu) {
    GpuCollectorOptions gpu_options;
    gpu_options.nvml_library = config.nvml_library;
    gpu_options.hostname = impl->hostname;
    auto gpu = NewGpuCollector(gpu_options);
    if (gpu.ok()) {
      impl->gpu = std::move(*gpu);
    } else {
      log::info("agent: no GPU metrics: {}", gpu.status().message());
    }
  }

  std::string path = config.history_path.empty() ? DefaultHistoryPath() : config.history_path;
  if (path != ":memory:") {
    std::error_code ec;
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec) {
      return Unavailable("cannot create the history directory " + parent.string() + ": " +
                         ec.message() + "; set history.path in the agent config");
    }
  }
  auto history = History::Open(path, config.history);
  if (!history.ok()) {
    return history.status().WithContext("opening the agent history (history.path)");
  }
  impl->history = std::move(*history);

  std::vector<std::unique_ptr<Sink>> extra_sinks;
  if (config.azure_monitor_logs) {
    Result<std::unique_ptr<monitor::LogsShipper>> shipper =
        monitor::LogsShipper::Start(*config.azure_monitor_logs);
    if (!shipper.ok()) {
      return shipper.status().WithContext(config.origin + ": azure_monitor.logs");
    }
    impl->shipper = std::move(*shipper);
    extra_sinks.push_back(monitor::NewAlertSink(impl->shipper, "agent"));
  }
  auto notifier = Notifier::Create(config.notify, clock, std::move(extra_sinks));
  if (!notifier.ok()) return notifier.status().WithContext("notify");
  impl->notifier = std::move(*notifier);

  if (!config.rules.empty()) {
    Evaluator::Options eo;
    eo.external_labels = {{"instance", impl->hostname}};
    size_t colon = config.listen.rfind(':');
    std::string port = colon == std::string::npos ? ":9500" : config.listen.substr(colon);
    eo.generator_url = "http://" + impl->hostname + port + "/#alerts";
    impl->evaluator = std::make_unique<Evaluator>(config.rules, impl->history.get(), eo);
  }
  if (config.idle.enabled) {
    SystemProbeOptions po;
    po.root = config.root;
    po.hostname = impl->hostname;
    auto idle = IdleDetector::Create(config.idle, MakeSystemActivityProbe(config.idle, po),
                                     impl->notifier.get(), clock);
    if (!idle.ok()) return idle.status().WithContext("idle");
    impl->idle = std::move(*idle);
  }

  Impl* im = impl.get();
  im->server.Handle("/metrics", [im](const http::ServerRequest& req, http::ServerResponse* resp) {
    if (req.method != "GET" && req.method != "HEAD") {
      resp->status = 405;
      resp->headers.emplace_back("Allow", "GET, HEAD");
      resp->body = "use GET /metrics\n";
      return;
    }
    // Repeated Accept headers are one comma-separated list (RFC 9110 5.3).
    std::string accept;
    for (const auto& [name, value] : req.headers) {
      if (http::IEquals(name, "Accept")) accept.append(accept.empty() ? "" : ",").append(value);
    }
    ExpositionFormat format = NegotiateFormat(&accept);
    std::lock_guard<std::mutex> lock(im->collect_mu);
    ++im->stats.scrapes;
    resp->content_type = std::string(ContentType(format));
    resp->body = im->RenderLocked(format);
  });
  im->server.Handle("/healthz", [im](const http::ServerRequest&, http::ServerResponse* resp) {
    LatestSignals latest;
    {
      std::lock_guard<std::mutex> lock(im->latest_mu);
      latest.time_ms = im->latest.time_ms;
    }
    resp->content_type = "application/json";
    resp->body = Json{{"status", "ok"},
                      {"hostname", im->hostname},
                      {"last_collection_ms", latest.time_ms},
                      {"gpu_metrics", im->gpu != nullptr}}
                     .dump() +
                 "\n";
  });
  if (config.dashboard) {
    DashboardSources src;
    src.latest = [im] {
      std::lock_guard<std::mutex> lock(im->latest_mu);
      return im->latest;
    };
    src.history = im->history.get();
    if (im->evaluator) {
      src.firing_alerts = [im] { return im->evaluator->FiringJson(); };
    }
    src.health_json_path = config.health_json;
    src.checkpoint_roots = config.checkpoint_roots;
    src.hostname = im->hostname;
    src.poll_seconds = config.poll_seconds;
    src.clock = &clock;
    RegisterDashboard(im->server, std::move(src));
  }
  return std::unique_ptr<Agent>(new Agent(std::move(impl)));
}

Status Agent::Start() {
  Impl& m = *impl_;
  if (m.running) return FailedPrecondition("the agent is already running");
  http::ServerOptions so;
  so.listen = m.config.listen;
  RETURN_IF_ERROR(m.server.Start(so));
  m.stopping = false;
  m.running = true;
  m.loop = std::thread([&m] { m.Loop(); });
  log::info("agent: listening on {} (port {}), collecting every {} ms", m.config.listen,
            m.server.port(), m.config.interval.count());
  return Status::Ok();
}

void Agent::Stop() {
  Impl& m = *impl_;
  if (m.running) {
    {
      std::lock_guard<std::mutex> lock(m.loop_mu);
      m.stopping = true;
    }
    m.loop_cv.notify_all();
    if (m.loop.joinable()) m.loop.join();
    m.server.Stop();
  }
  // Also for an agent driven by Tick() alone: alerts already raised are
  // delivered before the sinks go away.
  if (m.notifier) m.notifier->Flush(std::chrono::seconds(5));
  // Alerts the notifier just handed over reach Log Analytics, or the spool
  // (sent after a restart) when the service does not answer in time.
  if (m.shipper && !m.shipper->Flush(std::chrono::seconds(5))) {
    log::warn(
        "agent: Azure Monitor has not accepted every alert yet ({} pending in the spool; "
        "sent on the next start)",
        m.shipper->stats().pending);
  }
  m.running = false;
}

uint16_t Agent::port() const { return impl_->server.port(); }

void Agent::Tick() { impl_->Tick(); }

std::string Agent::RenderMetrics(ExpositionFormat format) {
  std::lock_guard<std::mutex> lock(impl_->collect_mu);
  return impl_->RenderLocked(format);
}

LatestSignals Agent::Latest() const {
  std::lock_guard<std::mutex> lock(impl_->latest_mu);
  return impl_->latest;
}

History* Agent::history() const { return impl_->history.get(); }
const AgentConfig& Agent::config() const { return impl_->config; }
bool Agent::has_gpu_metrics() const { return impl_->gpu != nullptr; }

IdleStatus Agent::idle_status() const { return impl_->idle ? impl_->idle->status() : IdleStatus{}; }

Agent::Stats Agent::stats() const {
  std::lock_guard<std::mutex> lock(impl_->collect_mu);
  return impl_->stats;
}

}  // namespace gantry::agent
