// The gateway's lifecycle: Create (state, limiter, audit log, metrics),
// Start (listeners and one Worker per thread), Reload, RefreshKeys, Stop and
// Wait. The request path itself is in worker.h and the files it names.
// clang-format off
#include <utility>  // before asio: awaitable.hpp in Boost 1.74 uses std::exchange
// clang-format on

#include "gantry/gateway/server.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "gantry/core/http_client.h"
#include "gantry/core/json.h"
#include "gantry/core/log.h"
#include "gantry/monitor/alert_sink.h"
#include "gantry/monitor/shipper.h"
#include "gantry/security/crypto.h"
#include "worker.h"

namespace gantry::gateway {

namespace internal {

Status Worker::Listen(const boost::asio::ip::tcp::endpoint& ep) {
  boost::system::error_code ec;
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(boost::asio::socket_base::reuse_address(true), ec);
  if (!ec) {
    int one = 1;
    if (setsockopt(acceptor_.native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) {
      return IoError("setsockopt(SO_REUSEPORT)", errno);
    }
  }
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(boost::asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Unavailable(fmt::format("cannot listen on {}:{}: {} (is another process using it?)",
                                   ep.address().to_string(), ep.port(), ec.message()));
  }
  return Status::Ok();
}

uint16_t Worker::BoundPort() const {
  boost::system::error_code ec;
  return acceptor_.local_endpoint(ec).port();
}

void Worker::Start() {
  limiter_ = shared_.limiter->Attach(io_);
  Refresh();
  boost::asio::co_spawn(io_, Accept(), boost::asio::detached);
  boost::asio::co_spawn(io_, Control(), boost::asio::detached);
  thread_ = std::thread([this] { io_.run(); });
}

boost::asio::awaitable<void> Worker::Control() {
  boost::asio::steady_timer timer(io_);
  bool drained = false;
  for (;;) {
    timer.expires_after(kControlPeriod);
    boost::system::error_code ec;
    co_await timer.async_wait(internal::Nothrow(ec));
    if (stop_requested_.load(std::memory_order_acquire)) {
      io_.stop();
      co_return;
    }
    if (!drained && drain_requested_.load(std::memory_order_acquire)) {
      drained = true;
      acceptor_.close(ec);
      for (Conn* c : conns_) {
        if (c->idle) c->sock.cancel(ec);
      }
    }
  }
}

void Worker::Join() {
  if (thread_.joinable()) thread_.join();
  limiter_.reset();
}

}  // namespace internal

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using internal::Clk;
using internal::Runtime;
using internal::Shared;
using internal::Worker;

Result<std::shared_ptr<const Runtime>> BuildRuntime(GatewayConfig config) {
  auto rt = std::make_shared<Runtime>();
  Result<security::Policy> policy = security::Policy::Create(config.roles);
  if (!policy.ok()) return policy.status();
  rt->policy = std::move(*policy);
  if (config.jwt) {
    ASSIGN_OR_RETURN(rt->jwt, security::JwtVerifier::Create(*config.jwt));
    // Fetch OpenID Connect keys now rather than on the first request; an
    // issuer that is down is no reason not to serve API keys (JWTs are
    // refused until the keys arrive, and fetching is retried).
    if (config.jwt->key_provider) {
      auto keys = config.jwt->key_provider->Current();
      if (!keys.ok()) log::warn("gateway: {}", keys.status().ToString());
    }
  }
  rt->config = std::move(config);
  return std::shared_ptr<const Runtime>(std::move(rt));
}

// The file's configuration with the backends added through the admin API
// appended (each to tier 0 of its pool). Added backends whose pool is gone, or
// whose name the file now uses, are dropped from *added (and logged).
GatewayConfig WithAdded(const GatewayConfig& base, std::vector<Shared::AddedBackend>* added) {
  GatewayConfig cfg = base;
  std::vector<Shared::AddedBackend> kept;
  for (Shared::AddedBackend& a : *added) {
    size_t pool = kNoBackend;
    for (size_t i = 0; i < cfg.pools.size(); ++i) {
      if (!cfg.pools[i].implicit && cfg.pools[i].name == a.pool) pool = i;
    }
    if (pool == kNoBackend || cfg.pools[pool].tiers.empty()) {
      log::warn(
          "gateway: backend '{}' (added through the admin API) is dropped: its pool '{}' "
          "is no longer configured",
          a.backend.name, a.pool);
      continue;
    }
    bool taken = false;
    for (const BackendConfig& b : cfg.backends) taken = taken || b.name == a.backend.name;
    for (const PoolConfig& p : cfg.pools) taken = taken || p.name == a.backend.name;
    if (taken) {
      log::warn(
          "gateway: backend '{}' (added through the admin API) is dropped: {} now defines "
          "a backend or pool of that name",
          a.backend.name, base.source);
      continue;
    }
    cfg.pools[pool].tiers[0].backends.push_back(cfg.backends.size());
    cfg.backends.push_back(a.backend);
    kept.push_back(std::move(a));
  }
  *added = std::move(kept);
  return cfg;
}

// Under shared.edit_mu: builds and publishes the runtime for `base` with
// `added`, then commits both.
Status ApplyPools(Shared& shared, GatewayConfig base, std::vector<Shared::AddedBackend> added) {
  GatewayConfig cfg = WithAdded(base, &added);
  ASSIGN_OR_RETURN(std::shared_ptr<const Runtime> rt, BuildRuntime(std::move(cfg)));
  // The balancer first: a request that picks a backend the runtime it holds
  // does not know yet re-reads the published one (Worker::PickConfig).
  shared.balancer->Configure(rt->config);
  shared.Publish(std::move(rt), nullptr);
  shared.base = std::move(base);
  shared.added = std::move(added);
  return Status::Ok();
}

Status InitMetrics(Shared& s) {
  auto& r = s.registry;
  internal::Metrics& m = s.m;
  ASSIGN_OR_RETURN(m.active_connections,
                   r.GetGauge("gantry_gateway_active_connections", "Open client connections"));
  ASSIGN_OR_RETURN(m.connections_total,
                   r.GetCounter("gantry_gateway_connections_total", "Client connections accepted"));
  ASSIGN_OR_RETURN(m.connections_rejected,
                   r.GetCounter("gantry_gateway_connections_rejected_total",
                                "Client connections refused at limits.max_connections"));
  ASSIGN_OR_RETURN(m.redis_up, r.GetGauge("gantry_gateway_redis_up",
                                          "1 when the shared limit store (Redis) answers"));
  ASSIGN_OR_RETURN(m.redis_configured, r.GetGauge("gantry_gateway_redis_configured",
                                                  "1 when limits are shared through Redis"));
  ASSIGN_OR_RETURN(m.redis_errors, r.GetCounter("gantry_gateway_redis_errors_total",
                                                "Redis commands that failed or timed out"));
  ASSIGN_OR_RETURN(m.audit_records, r.GetCounter("gantry_gateway_audit_records_total",
                                                 "Records appended to the audit log"));
  ASSIGN_OR_RETURN(m.audit_dropped,
                   r.GetCounter("gantry_gateway_audit_dropped_total",
                                "Audit records dropped because the queue was full"));
  ASSIGN_OR_RETURN(m.reloads_ok, r.GetCounter("gantry_gateway_config_reloads_total",
                                              "Configuration reloads", {{"result", "ok"}}));
  ASSIGN_OR_RETURN(m.reloads_failed, r.GetCounter("gantry_gateway_config_reloads_total",
                                                  "Configuration reloads", {{"result", "error"}}));
  ASSIGN_OR_RETURN(m.keys_loaded, r.GetGauge("gantry_gateway_api_keys", "API keys loaded"));
  ASSIGN_OR_RETURN(m.tls_handshake_errors,
                   r.GetCounter("gantry_gateway_tls_handshake_errors_total",
                                "Client connections that failed the TLS handshake"));
  return Status::Ok();
}

}  // namespace

struct Gateway::Impl {
  Shared shared;
  std::unique_ptr<asio::ssl::context> tls;
  std::vector<std::unique_ptr<Worker>> workers;
  uint16_t port = 0;
  std::string host;
  bool started = false;
  std::mutex stop_mu;
  bool stopped = false;
  std::thread stopper;
  // Scale from zero: POSTs the wake URLs of pools that hold requests.
  std::thread waker;
  std::mutex waker_mu;
  std::condition_variable waker_cv;
  bool waker_stop = false;  // guarded by waker_mu

  void RunWaker() {
    std::unique_lock<std::mutex> lock(waker_mu);
    while (!waker_stop) {
      waker_cv.wait_for(lock, std::chrono::milliseconds(50));
      if (waker_stop) break;
      lock.unlock();
      for (const Balancer::WakeCall& w : shared.balancer->DueWakes()) {
        http::Request req;
        req.method = "POST";
        req.url = w.url;
        req.headers = {{"Content-Type", "application/json"}};
        req.body =
            Json{{"pool", w.pool}, {"held", w.held}, {"fallback_served", w.fallback_served}}.dump();
        req.deadline = std::chrono::seconds(2);
        Result<http::Response> r = http::Send(req);
        if (!r.ok()) {
          log::warn(
              "gateway: pool '{}' holds {} requests ({} served by its fallback); waking it "
              "({}) failed: {}",
              w.pool, w.held, w.fallback_served, w.url, r.status().ToString());
        } else if (r->status >= 300) {
          log::warn(
              "gateway: pool '{}' holds {} requests ({} served by its fallback); waking it "
              "({}) answered HTTP {}",
              w.pool, w.held, w.fallback_served, w.url, r->status);
        }
      }
      lock.lock();
    }
  }
  void StopWaker() {
    {
      std::lock_guard<std::mutex> lock(waker_mu);
      waker_stop = true;
    }
    waker_cv.notify_all();
    if (waker.joinable()) waker.join();
  }
};

Gateway::Gateway(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Gateway::~Gateway() {
  Stop(0);
  Wait();
}

uint16_t Gateway::port() const { return impl_->port; }

std::string Gateway::url() const {
  std::string scheme = impl_->tls ? "https" : "http";
  std::string host =
      impl_->host.find(':') != std::string::npos ? "[" + impl_->host + "]" : impl_->host;
  return fmt::format("{}://{}:{}", scheme, host, impl_->port);
}

Result<std::unique_ptr<Gateway>> Gateway::Create(GatewayConfig config) {
  auto impl = std::make_unique<Impl>();
  Shared& sh = impl->shared;
  RETURN_IF_ERROR(InitMetrics(sh));
  sh.instance = security::HexEncode(security::RandomBytes(4));
  Result<std::unique_ptr<security::KeyStore>> ks = security::KeyStore::Open(config.state_path);
  if (!ks.ok()) return ks.status().WithContext(fmt::format("state file '{}'", config.state_path));
  sh.key_store = std::move(*ks);
  ASSIGN_OR_RETURN(std::shared_ptr<const security::KeyTable> keys, sh.key_store->Snapshot());
  sh.m.keys_loaded->Set(static_cast<double>(keys->size()));
  config.limiter.state_path = config.state_path;
  ASSIGN_OR_RETURN(sh.limiter, Limiter::Create(config.limiter, nullptr));
  if (config.azure_monitor_logs) {
    Result<std::unique_ptr<monitor::LogsShipper>> shipper =
        monitor::LogsShipper::Start(*config.azure_monitor_logs);
    if (!shipper.ok()) {
      return shipper.status().WithContext(fmt::format("{}: azure_monitor.logs", config.source));
    }
    sh.shipper = std::move(*shipper);
    if (config.audit.path.empty()) {
      log::warn("{}: azure_monitor.logs is set but audit is not: no audit records to ship",
                config.source);
    }
  }
  if (!config.audit.path.empty()) {
    security::AuditOptions ao;
    // Each line as written, chain and checkpoints included, to Log Analytics.
    if (sh.shipper)
      ao.on_written = monitor::AuditForwarder(sh.shipper, "gateway", config.audit.path);
    ao.path = config.audit.path;
    ao.checkpoint_every = config.audit.checkpoint_every;
    ao.checkpoint_interval_s = config.audit.checkpoint_interval_s;
    if (!config.audit.signing_key_path.empty()) {
      Result<std::string> pem = ReadFile(config.audit.signing_key_path);
      if (!pem.ok()) {
        return pem.status().WithContext(
            fmt::format("audit.signing_key '{}' (make one with: gantry audit keygen --out PREFIX)",
                        config.audit.signing_key_path));
      }
      ao.signing_key_pem = std::move(*pem);
    }
    Result<std::unique_ptr<security::AuditLog>> audit = security::AuditLog::Open(ao);
    if (!audit.ok()) return audit.status().WithContext(fmt::format("audit log '{}'", ao.path));
    sh.audit = std::move(*audit);
  }
  {
    Result<std::unique_ptr<AnomalyDetector>> det = AnomalyDetector::Create(
        config.anomaly, &sh.registry, SystemClock(),
        sh.shipper ? std::function<std::unique_ptr<alerting::Sink>()>([shipper = sh.shipper] {
          return monitor::NewAlertSink(shipper, "gateway");
        })
                   : nullptr);
    if (!det.ok()) return det.status().WithContext(fmt::format("{}: anomaly", config.source));
    sh.anomaly = std::move(*det);
  }
  sh.balancer = std::make_unique<Balancer>();
  sh.balancer->AttachMetrics(&sh.registry);
  sh.base = config;
  ASSIGN_OR_RETURN(std::shared_ptr<const Runtime> rt, BuildRuntime(std::move(config)));
  sh.balancer->Configure(rt->config);
  sh.Publish(std::move(rt), std::move(keys));
  // Gauges and counters that mirror state owned elsewhere are refreshed at
  // scrape time rather than on the request path.
  Shared* shp = &sh;
  auto last_redis_errors = std::make_shared<uint64_t>(0);
  auto last_audit = std::make_shared<std::pair<uint64_t, uint64_t>>(0, 0);
  sh.registry.AddCollectHook([shp, last_redis_errors, last_audit] {
    shp->m.redis_configured->Set(shp->limiter->redis_configured() ? 1 : 0);
    shp->m.redis_up->Set(shp->limiter->redis_up() ? 1 : 0);
    uint64_t e = shp->limiter->redis_errors();
    if (e > *last_redis_errors)
      shp->m.redis_errors->Inc(static_cast<double>(e - *last_redis_errors));
    *last_redis_errors = e;
    if (shp->audit) {
      uint64_t w = shp->audit->written(), d = shp->audit->dropped();
      if (w > last_audit->first)
        shp->m.audit_records->Inc(static_cast<double>(w - last_audit->first));
      if (d > last_audit->second)
        shp->m.audit_dropped->Inc(static_cast<double>(d - last_audit->second));
      *last_audit = {w, d};
    }
  });
  return std::unique_ptr<Gateway>(new Gateway(std::move(impl)));
}

Status Gateway::Start() {
  Impl& im = *impl_;
  const GatewayConfig& cfg = im.shared.runtime->config;
  boost::system::error_code ec;
  if (!cfg.tls.cert_path.empty()) {
    im.tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
    // TLS 1.2 and 1.3 only; OpenSSL's default cipher list otherwise.
    im.tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                            asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                            asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use,
                        ec);
    im.tls->use_certificate_chain_file(cfg.tls.cert_path, ec);
    if (ec) {
      return InvalidArgument(
          fmt::format("{}: tls.cert '{}': {}", cfg.source, cfg.tls.cert_path, ec.message()));
    }
    im.tls->use_private_key_file(cfg.tls.key_path, asio::ssl::context::pem, ec);
    if (ec) {
      return InvalidArgument(fmt::format("{}: tls.key '{}': {} (PEM private key matching the cert)",
                                         cfg.source, cfg.tls.key_path, ec.message()));
    }
  }
  asio::ip::address addr =
      asio::ip::make_address(cfg.listen_host == "localhost" ? "127.0.0.1" : cfg.listen_host, ec);
  if (ec) {
    return InvalidArgument(fmt::format("{}: listen address '{}' is not a numeric IP address",
                                       cfg.source, cfg.listen_host));
  }
  uint16_t port = cfg.listen_port;
  for (int i = 0; i < cfg.workers; ++i) {
    auto w = std::make_unique<Worker>(im.shared, i, im.tls.get());
    // With port 0 the first listener picks the port and the others join it
    // through SO_REUSEPORT.
    RETURN_IF_ERROR(w->Listen(tcp::endpoint(addr, port)));
    if (port == 0) port = w->BoundPort();
    im.workers.push_back(std::move(w));
  }
  im.port = port;
  im.host = addr.to_string();
  if (im.shared.anomaly) im.shared.anomaly->Start();
  for (auto& w : im.workers) w->Start();
  im.waker = std::thread([&im] { im.RunWaker(); });
  im.started = true;
  return Status::Ok();
}

Status Gateway::Reload(GatewayConfig config) {
  Impl& im = *impl_;
  std::shared_ptr<const Runtime> cur;
  {
    std::lock_guard<std::mutex> lock(im.shared.mu);
    cur = im.shared.runtime;
  }
  const GatewayConfig& old = cur->config;
  std::vector<std::string> fixed;
  if (config.listen_host != old.listen_host ||
      (config.listen_port != old.listen_port && config.listen_port != 0)) {
    fixed.push_back("listen");
  }
  if (config.workers != old.workers) fixed.push_back("workers");
  if (config.tls.cert_path != old.tls.cert_path || config.tls.key_path != old.tls.key_path) {
    fixed.push_back("tls");
  }
  if (config.state_path != old.state_path) fixed.push_back("state");
  bool redis_changed = config.limiter.redis.has_value() != old.limiter.redis.has_value() ||
                       (config.limiter.redis &&
                        (config.limiter.redis->host != old.limiter.redis->host ||
                         config.limiter.redis->port != old.limiter.redis->port ||
                         config.limiter.redis->prefix != old.limiter.redis->prefix ||
                         config.limiter.redis->fail_closed != old.limiter.redis->fail_closed ||
                         config.limiter.redis->timeout_s != old.limiter.redis->timeout_s ||
                         config.limiter.redis->password != old.limiter.redis->password));
  if (redis_changed) fixed.push_back("redis");
  if (config.audit.path != old.audit.path ||
      config.audit.signing_key_path != old.audit.signing_key_path) {
    fixed.push_back("audit");
  }
  {
    const auto& a = config.azure_monitor_logs;
    const auto& b = old.azure_monitor_logs;
    if (a.has_value() != b.has_value() ||
        (a && (a->logs.endpoint != b->logs.endpoint || a->logs.rule_id != b->logs.rule_id ||
               a->logs.stream != b->logs.stream || a->spool_dir != b->spool_dir))) {
      fixed.push_back("azure_monitor");
    }
  }
  if (!fixed.empty()) {
    im.shared.m.reloads_failed->Inc();
    return FailedPrecondition(
        fmt::format("{}: changing {} needs a restart; the running configuration is unchanged",
                    config.source, fmt::join(fixed, ", ")));
  }
  config.limiter.state_path = config.state_path;
  config.listen_port = old.listen_port;
  Status s = im.shared.limiter->Reconfigure(config.limiter);
  if (!s.ok()) {
    im.shared.m.reloads_failed->Inc();
    return s.WithContext(config.source);
  }
  if (im.shared.anomaly) {
    Status as = im.shared.anomaly->Reconfigure(config.anomaly);
    if (!as.ok()) {
      im.shared.m.reloads_failed->Inc();
      return as.WithContext(fmt::format("{}: anomaly", config.source));
    }
  }
  // Backends added through the admin API stay while their pool does.
  std::lock_guard<std::mutex> edit(im.shared.edit_mu);
  Status applied = ApplyPools(im.shared, std::move(config), im.shared.added);
  if (!applied.ok()) {
    im.shared.m.reloads_failed->Inc();
    return applied;
  }
  im.shared.m.reloads_ok->Inc();
  return Status::Ok();
}

Status Gateway::RefreshKeys() {
  Shared& sh = impl_->shared;
  ASSIGN_OR_RETURN(bool changed, sh.key_store->ChangedSinceSnapshot());
  if (!changed) return Status::Ok();
  ASSIGN_OR_RETURN(std::shared_ptr<const security::KeyTable> keys, sh.key_store->Snapshot());
  sh.m.keys_loaded->Set(static_cast<double>(keys->size()));
  sh.Publish(nullptr, std::move(keys));
  return Status::Ok();
}

void Gateway::Stop(int grace_ms) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.stop_mu);
  if (im.stopped) return;
  im.stopped = true;
  if (!im.started) return;
  im.shared.draining.store(true);
  for (auto& w : im.workers) w->Drain();
  im.stopper = std::thread([&im, grace_ms] {
    auto until = Clk::now() + std::chrono::milliseconds(grace_ms);
    while (Clk::now() < until) {
      bool idle = true;
      for (auto& w : im.workers) idle = idle && w->Idle();
      if (idle) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (auto& w : im.workers) w->Stop();
  });
}

void Gateway::Wait() {
  Impl& im = *impl_;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(im.stop_mu);
      if (im.stopped) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (im.stopper.joinable()) im.stopper.join();
  for (auto& w : im.workers) w->Join();
  im.StopWaker();
  im.workers.clear();
  if (im.shared.audit) {
    Status s = im.shared.audit->Close();
    if (!s.ok()) log::error("audit log: {}", s.ToString());
  }
  // Bounded: a dead endpoint must not hold shutdown; what is left stays in
  // the spool and goes at the next start.
  if (im.shared.shipper && !im.shared.shipper->Flush(std::chrono::seconds(5))) {
    log::warn("azure monitor: {} records left in the spool for the next start",
              im.shared.shipper->stats().pending);
  }
  Status f = im.shared.limiter->Flush();
  if (!f.ok()) log::error("quota usage: {}", f.ToString());
}

namespace internal {

namespace {

std::string PoolNames(const GatewayConfig& cfg) {
  std::string out;
  for (const PoolConfig& p : cfg.pools) {
    if (!p.implicit) out += (out.empty() ? "" : ", ") + p.name;
  }
  return out.empty() ? "none" : out;
}

const PoolConfig* FindNamedPool(const GatewayConfig& cfg, std::string_view name) {
  for (const PoolConfig& p : cfg.pools) {
    if (!p.implicit && p.name == name) return &p;
  }
  return nullptr;
}

}  // namespace

Status AddPoolBackend(Shared& shared, std::string_view pool, BackendConfig backend) {
  std::lock_guard<std::mutex> edit(shared.edit_mu);
  std::vector<Shared::AddedBackend> added = shared.added;
  GatewayConfig current = WithAdded(shared.base, &added);
  if (FindNamedPool(current, pool) == nullptr) {
    return NotFound(fmt::format("no pool '{}' (pools: {})", pool, PoolNames(current)));
  }
  for (const BackendConfig& b : current.backends) {
    if (b.name == backend.name) {
      return AlreadyExists(fmt::format(
          "a backend named '{}' exists already ({}); remove it first or pick another name",
          backend.name, b.host_header));
    }
  }
  for (const PoolConfig& p : current.pools) {
    if (p.name == backend.name) {
      return AlreadyExists(
          fmt::format("'{}' is the name of a pool; give the backend its own name", backend.name));
    }
  }
  backend.added_at_runtime = true;
  std::string desc = fmt::format("backend '{}' ({})", backend.name, backend.host_header);
  added.push_back(Shared::AddedBackend{std::string(pool), std::move(backend)});
  RETURN_IF_ERROR(ApplyPools(shared, shared.base, std::move(added)));
  log::info("gateway: {} added to pool '{}' by the admin API", desc, pool);
  return Status::Ok();
}

Status RemovePoolBackend(Shared& shared, std::string_view pool, std::string_view name, bool force) {
  std::lock_guard<std::mutex> edit(shared.edit_mu);
  std::vector<Shared::AddedBackend> added = shared.added;
  GatewayConfig current = WithAdded(shared.base, &added);
  const PoolConfig* p = FindNamedPool(current, pool);
  if (p == nullptr)
    return NotFound(fmt::format("no pool '{}' (pools: {})", pool, PoolNames(current)));
  auto it = std::find_if(added.begin(), added.end(), [&](const Shared::AddedBackend& a) {
    return a.pool == pool && a.backend.name == name;
  });
  if (it == added.end()) {
    bool in_pool = false;
    for (const TierConfig& t : p->tiers) {
      for (size_t b : t.backends) in_pool = in_pool || current.backends[b].name == name;
    }
    if (in_pool) {
      return FailedPrecondition(fmt::format(
          "backend '{}' of pool '{}' comes from {}; remove it there and reload (the admin API "
          "removes only backends it added)",
          name, pool, shared.base.source));
    }
    std::string names;
    for (const TierConfig& t : p->tiers) {
      for (size_t b : t.backends) names += (names.empty() ? "" : ", ") + current.backends[b].name;
    }
    return NotFound(fmt::format("pool '{}' has no backend '{}' (its backends: {})", pool, name,
                                names.empty() ? "none" : names));
  }
  Result<BackendStatus> st = shared.balancer->Backend(name);
  int64_t in_flight = st.ok() ? st->in_flight : 0;
  if (in_flight > 0 && !force) {
    return FailedPrecondition(fmt::format(
        "backend '{}' has {} requests in flight; drain it first (POST "
        "/admin/backends/{}/drain, then wait for in_flight 0) or remove it with ?force=true",
        name, in_flight, name));
  }
  added.erase(it);
  RETURN_IF_ERROR(ApplyPools(shared, shared.base, std::move(added)));
  log::info("gateway: backend '{}' removed from pool '{}' by the admin API{}", name, pool,
            in_flight > 0 ? fmt::format(" ({} requests in flight finish on it)", in_flight) : "");
  return Status::Ok();
}

}  // namespace internal

}  // namespace gantry::gateway
