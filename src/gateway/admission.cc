// Serve: a request whose head passed Gate and whose body is read goes through
// the admin API, or through its phases in order: what is called (model,
// stream), access control, target, limits and quotas, then the choice of a
// backend with retries elsewhere while that is safe; then anomaly records and
// the limiter's settlement.
#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "gantry/core/log.h"
#include "gantry/security/rbac.h"
#include "health_check.h"
#include "worker.h"

namespace gantry::gateway::internal {

namespace asio = boost::asio;
using asio::awaitable;

LocalResponse Worker::Admin(Request& r) {
  LocalResponse resp;
  try {
    resp = HandleAdmin(shared_, *r.rt, r.gate.who, r.head, r.body);
  } catch (const std::exception& e) {
    // The admin API validates its input; an exception here is a bug, and
    // must not take the connection (and its slot) with it.
    log::error("gateway: admin API {} {}: {}", r.head.method, r.head.path, e.what());
    resp = ErrorResponse(500, "internal", "internal error in the admin API");
  }
  if (resp.status >= 400) {
    r.log.decision = "deny";
    r.log.reason = resp.status == 403 ? "forbidden" : "admin_error";
  }
  return resp;
}

bool Worker::IdentifyCall(Request& r) {
  const http::RequestHead& req = r.head;
  const RouteConfig* route = r.gate.route;
  Call& call = r.call;
  RequestLog& log = r.log;
  std::string_view path = req.path;
  if (route->protocol == Protocol::kOpenAi && req.method == "POST") {
    Result<OpenAiRequest> o = SniffOpenAiRequest(r.body);
    if (!o.ok()) {
      log.decision = "deny";
      log.reason = "bad_request";
      r.answer = ErrorResponse(400, "invalid_request", o.status().message());
      return false;
    }
    if (o->model.empty()) {
      // Without a model there is nothing to authorize against; backends that
      // would pick a default model must not be reachable that way.
      log.decision = "deny";
      log.reason = "bad_request";
      r.answer = ErrorResponse(400, "invalid_request", "`model` is required (a non-empty string)");
      return false;
    }
    call.model = o->model;
    call.estimated_tokens = o->estimated_prompt_tokens;
    call.openai_stream = o->stream;
    call.sniff_usage = true;
    if (o->stream && !o->include_usage) {
      // Ask the backend for the usage chunk and hide it from the client, who
      // did not ask for it.
      Result<std::string> injected = InjectIncludeUsage(r.body);
      if (injected.ok()) {
        r.body = std::move(*injected);
        call.strip_usage = true;
      }
    }
  } else if (route->protocol == Protocol::kOpenAi) {
    // Only listing models names none; GET /v1/models/{id} names one; other
    // methods have no model to authorize and are not part of the protocol.
    std::string_view rest = path;
    size_t models_at = rest.rfind("/models");
    if (req.method == "GET" && models_at != std::string_view::npos &&
        models_at + 7 == rest.size()) {
      // model stays empty: any valid credential may list
    } else if (req.method == "GET" && models_at != std::string_view::npos &&
               rest.substr(models_at + 7).starts_with("/") &&
               rest.substr(models_at + 8).find('/') == std::string_view::npos &&
               models_at + 8 < rest.size()) {
      call.model = std::string(rest.substr(models_at + 8));
    } else {
      log.decision = "deny";
      log.reason = "bad_request";
      r.answer = ErrorResponse(
          405, "method_not_allowed",
          fmt::format("{} {} is not an OpenAI-compatible call the gateway can authorize "
                      "(POST with a JSON body naming `model`, or GET .../models[/id])",
                      req.method, path));
      return false;
    }
  } else if (route->protocol == Protocol::kKserve) {
    Result<KserveTarget> t = ParseKservePath(path);
    if (t.ok()) {
      call.model = t->model;
      call.kserve = std::move(*t);
    } else if (!(path == "/v2" || path == "/v2/" || path == "/v2/health/live" ||
                 path == "/v2/health/ready" || path == "/v2/repository/index")) {
      // Everything else must name its model in the one form the gateway
      // parses; anything it cannot read cannot be authorized.
      log.decision = "deny";
      log.reason = "no_route";
      r.answer = ErrorResponse(
          404, "not_found",
          fmt::format("{} is not a KServe v2 path (/v2/models/{{name}}[/versions/{{v}}]/infer, "
                      "/v2/health/ready, ...)",
                      path));
      return false;
    }
  }
  log.model = call.model;
  return true;
}

bool Worker::Authorize(Request& r) {
  const RouteConfig* route = r.gate.route;
  if (!route->auth_required) return true;
  const Identity& who = r.gate.who;
  const security::Policy& policy = r.rt->policy;
  const std::string& model = r.call.model;
  std::string_view action = route->protocol == Protocol::kHttp ? "route:invoke" : "model:invoke";
  std::string_view resource =
      route->protocol == Protocol::kHttp ? std::string_view(route->name) : std::string_view(model);
  // Requests that name no model (KServe health, GET /v1/models) need only an
  // authenticated caller with some permission on this kind of route.
  for (const std::string& role : who.roles) {
    if (route->protocol != Protocol::kHttp && model.empty()
            ? policy.Allowed(role, action, "*") || policy.HasRole(role)
            : policy.Allowed(role, action, resource)) {
      r.call.role = role;
      r.log.role = role;
      return true;
    }
  }
  r.log.decision = "deny";
  r.log.reason = "forbidden";
  r.answer =
      ErrorResponse(403, "forbidden",
                    fmt::format("role '{}' may not {} '{}'",
                                who.roles.empty() ? "" : who.roles.front(), action, resource));
  return false;
}

void Worker::SelectTarget(Request& r) {
  const RouteConfig* route = r.gate.route;
  r.call.target = route->target;
  if (r.call.model.empty()) return;
  for (const ModelRoute& m : route->models) {
    if (security::GlobMatch(m.match, r.call.model)) {
      r.call.target = m.target;
      return;
    }
  }
}

bool Worker::Admitted(Request& r) {
  const Admission& adm = r.call.adm;
  if (adm.allowed) return true;
  r.log.decision = "deny";
  r.log.reason = adm.reason;
  r.answer = ErrorResponse(adm.status,
                           adm.status == 429   ? "rate_limited"
                           : adm.status == 403 ? "quota_exceeded"
                                               : "limiter_unavailable",
                           fmt::format("{} ({})", adm.reason, adm.rule));
  std::vector<std::pair<std::string, std::string>>& h = r.answer.headers;
  h.emplace_back("Retry-After",
                 fmt::format("{}", static_cast<int64_t>(std::ceil(adm.retry_after_s))));
  if (adm.has_rate_headers) {
    h.emplace_back("RateLimit-Limit", fmt::format("{}", static_cast<int64_t>(adm.limit)));
    h.emplace_back("RateLimit-Remaining", fmt::format("{}", static_cast<int64_t>(adm.remaining)));
    h.emplace_back("RateLimit-Reset",
                   fmt::format("{}", static_cast<int64_t>(std::ceil(adm.reset_s))));
  }
  CounterFor("gantry_gateway_rejections_total", "Requests refused by limits and quotas",
             {{"reason", adm.reason}})
      ->Inc();
  return false;
}

const GatewayConfig* Worker::PickConfig(Request& r, const Pick& pick) {
  auto same = [&](const GatewayConfig& cfg) {
    if (pick.pool >= cfg.pools.size() || cfg.pools[pick.pool].name != pick.pool_name) return false;
    if (pick.backend == kNoBackend) return true;
    if (pick.backend >= cfg.backends.size()) return false;
    const BackendConfig& b = cfg.backends[pick.backend];
    if (b.name != pick.backend_name) return false;
    if (pick.state == nullptr) return true;
    // The address too ("host:port", as the Balancer keys its state): a
    // backend removed and added again under its name at another address is
    // another backend. Compared in place: this runs for every request.
    std::string_view addr = pick.state->address;
    char port[8];
    auto end = std::to_chars(port, port + sizeof(port), b.port).ptr;
    std::string_view p(port, static_cast<size_t>(end - port));
    return addr.size() == b.host.size() + 1 + p.size() && addr.starts_with(b.host) &&
           addr[b.host.size()] == ':' && addr.ends_with(p);
  };
  if (same(r.rt->config)) return &r.rt->config;
  if (r.pick_rt && same(r.pick_rt->config)) return &r.pick_rt->config;
  {
    std::lock_guard<std::mutex> lock(shared_.mu);
    r.pick_rt = shared_.runtime;
  }
  if (same(r.pick_rt->config)) return &r.pick_rt->config;
  return nullptr;
}

bool Worker::PrepareAttempt(Request& r, const GatewayConfig& cfg, const Pick& pick, Attempt& a,
                            std::string& rewritten, std::string& rewritten_target) {
  const RouteConfig* route = r.gate.route;
  const http::RequestHead& req = r.head;
  const BackendConfig& backend = cfg.backends[pick.backend];
  r.log.backend = backend.name;
  a.backend = &backend;
  a.body = &r.body;
  a.target = req.target;
  a.timeout = route->timeout.count() > 0 ? route->timeout : r.rt->config.limits.upstream_timeout;
  if (!pick.degraded) return true;
  const PoolConfig& pool = cfg.pools[pick.pool];
  a.degraded = pick.reason;
  if (r.call.openai_stream && !route->degraded.allow_stream) {
    r.log.decision = "deny";
    r.log.reason = "degraded_no_stream";
    r.answer = ErrorResponse(
        503, "service_unavailable",
        fmt::format("streaming is off while '{}' is degraded ({}); retry later or send "
                    "\"stream\": false",
                    pool.name, pick.reason));
    r.answer.headers.emplace_back("Retry-After", fmt::format("{}", pool.shed_retry_after_s));
    r.answer.headers.emplace_back("X-Gantry-Degraded", std::string(pick.reason));
    return false;
  }
  if (route->protocol == Protocol::kOpenAi && req.method == "POST" &&
      (!pick.model_rewrite.empty() || route->degraded.max_tokens > 0)) {
    Result<std::string> rw =
        RewriteForFallback(r.body, pick.model_rewrite, route->degraded.max_tokens);
    if (rw.ok()) {
      rewritten = std::move(*rw);
      a.body = &rewritten;
    }
  } else if (r.call.kserve && !pick.model_rewrite.empty()) {
    rewritten_target = RewriteKserveModel(req.target, pick.model_rewrite);
    a.target = rewritten_target;
  }
  return true;
}

void Worker::RecordOutput(Request& r, const GatewayConfig& cfg, const Pick& pick) {
  const RequestLog& log = r.log;
  OutputRecord rec;
  rec.model = r.call.model;
  if (pick.rollout != kNoBackend && pick.backend != kNoBackend) {
    rec.version = cfg.pools[pick.pool].name;
  } else if (r.call.kserve) {
    rec.version = r.call.kserve->version;
  }
  rec.latency_s = Seconds(Clk::now() - r.start);
  int status = r.headers_sent ? log.status : r.answer.status;
  rec.error = status >= 500 || status == 0 || log.reason == "upstream_reset" ||
              log.reason == "upstream_timeout";
  rec.response_bytes = log.bytes_out;
  rec.completion_tokens =
      log.prompt_tokens + log.completion_tokens > 0 ? log.completion_tokens : -1;
  std::vector<TensorStats> outputs;
  const std::string& sniffed = r.conn.sniffed;
  if (r.call.want_outputs && r.headers_sent && log.status < 300 && !sniffed.empty()) {
    Result<std::vector<TensorStats>> s = KserveOutputStats(sniffed);
    if (s.ok()) {
      outputs = std::move(*s);
      rec.outputs = &outputs;
    }
  }
  shared_.anomaly->Record(rec);
}

void Worker::Settle(Request& r) {
  const RequestLog& log = r.log;
  double actual = r.call.adm.estimated_tokens;
  if (log.prompt_tokens + log.completion_tokens > 0) {
    actual = static_cast<double>(log.prompt_tokens + log.completion_tokens);
  } else if (log.status >= 400 || log.status == 0) {
    actual = 0;  // nothing was generated: refund the estimate
  }
  limiter_->Settle(r.call.adm, actual);
}

awaitable<bool> Worker::Serve(Request& r) {
  const Runtime* rt = r.rt;
  const GatewayConfig& cfg = rt->config;
  const http::RequestHead& req = r.head;
  r.close = !req.keep_alive || shared_.draining.load();
  if (r.gate.admin) {
    r.answer = Admin(r);
    co_return co_await WriteLocal(r, r.answer, r.close);
  }
  const RouteConfig* route = r.gate.route;
  Call& call = r.call;
  if (!IdentifyCall(r) || !Authorize(r)) co_return co_await WriteLocal(r, r.answer, r.close);
  SelectTarget(r);

  // Limits and quotas. Admit also records per-key usage for /admin/usage, so
  // it runs for every identified caller even without rules.
  call.limited =
      !cfg.limiter.rate_limits.empty() || !cfg.limiter.quotas.empty() || !r.gate.who.key_id.empty();
  if (call.limited) {
    Subject subject{r.gate.who.key_id, call.role, call.model};
    if (std::optional<Admission> now = limiter_->TryAdmitNow(subject, call.estimated_tokens)) {
      call.adm = std::move(*now);
    } else {
      call.adm = co_await limiter_->Admit(subject, call.estimated_tokens);
    }
    if (!Admitted(r)) co_return co_await WriteLocal(r, r.answer, r.close);
  }

  // Choose a backend, send, and retry elsewhere while that is safe.
  Balancer& bal = *shared_.balancer;
  std::string_view sticky_value;
  if (call.target.kind == Target::Kind::kRollout) {
    const RolloutConfig& ro = cfg.rollouts[call.target.index];
    if (ro.sticky == RolloutConfig::Sticky::kHeader) {
      if (const http::HeaderView* h = req.Find(ro.sticky_header)) sticky_value = h->value;
    }
  }
  // Methods that may be repeated, per RFC 9110; a route can declare more.
  call.repeatable = route->idempotent || IdempotentMethod(req.method);
  call.want_outputs = call.kserve && call.kserve->verb == "infer" && cfg.anomaly.enabled;
  bool keep = false;
  std::vector<size_t> tried;
  std::string rewritten, rewritten_target;
  std::optional<Balancer::InFlight> pending, retry_guard;
  Clk::time_point pending_until{};
  uint32_t retries = 0;
  // Scale from zero: this request's place in its pool's queue while it waits
  // for a backend; a request is held at most once.
  std::optional<Balancer::Held> held;
  bool hold_done = false;
  Clk::time_point held_until{};
  int config_misses = 0;
  Pick pick;
  const GatewayConfig* pcfg = &cfg;  // the configuration pick's indexes are into
  for (;;) {
    PickContext ctx{r.gate.who.key_id, sticky_value, tried.empty() ? nullptr : &tried};
    pick = bal.Choose(call.target, ctx);
    pcfg = PickConfig(r, pick);
    if (pcfg == nullptr) {
      // A reload or an admin change is being published this moment: the
      // balancer and the published configuration disagree briefly.
      if (++config_misses <= 20) {
        co_await Sleep(std::chrono::milliseconds(1));
        continue;
      }
      pcfg = &cfg;
      pick = Pick{};
      r.log.reason = "config_changed";
      r.answer = ErrorResponse(
          503, "service_unavailable",
          "the gateway's configuration changed while this request was routed; retry it");
      r.answer.headers.emplace_back("Retry-After", "1");
      break;
    }
    const PoolConfig& pool = pcfg->pools[pick.pool];
    const ScaleFromZeroConfig& sfz = pool.scale_from_zero;
    if (sfz.enabled && !hold_done && tried.empty()) {
      // Nothing can serve (no backend configured, or none up), or others are
      // held already and go first: wait in the pool's queue.
      bool none = pick.backend == kNoBackend && pick.shed_reason == "no_backend_available";
      if (!held && (none || bal.Holding(pick))) {
        held = bal.TryHold(pick);
        if (!held) {
          hold_done = true;
          r.log.decision = "error";
          r.log.reason = "shed:hold_overflow";
          r.answer = ErrorResponse(
              503, "service_unavailable",
              fmt::format("pool '{}' is starting a backend and holds {} requests already (its "
                          "scale_from_zero.hold); retry later",
                          pool.name, sfz.hold));
          r.answer.headers.emplace_back("Retry-After", fmt::format("{}", sfz.retry_after_s));
          break;
        }
        held_until = CoarseNow() + sfz.hold_timeout;
        r.conn.deadline.Set(sfz.hold_timeout + std::chrono::seconds(1));
      }
      if (held) {
        if (pick.backend == kNoBackend || !bal.FirstInLine(*held)) {
          if (CoarseNow() >= held_until) {
            held->End(HoldOutcome::kTimeout);
            held.reset();
            hold_done = true;
            r.log.decision = "error";
            r.log.reason = "shed:hold_timeout";
            r.answer = ErrorResponse(
                503, "service_unavailable",
                fmt::format("no backend of pool '{}' became available within {} ms (its "
                            "scale_from_zero.hold_timeout); retry later",
                            pool.name, sfz.hold_timeout.count()));
            r.answer.headers.emplace_back("Retry-After", fmt::format("{}", sfz.retry_after_s));
            break;
          }
          co_await Sleep(std::chrono::milliseconds(5));
          continue;
        }
        // A backend is available and everyone held before this request has
        // gone: this one goes now.
        held->End(HoldOutcome::kReleased);
        held.reset();
        hold_done = true;
      }
    }
    if (pick.backend == kNoBackend) {
      // Every backend saturated: wait for a slot when the pool allows it.
      if (pool.max_pending > 0 && tried.empty()) {
        if (!pending) {
          pending = bal.TryBeginPending(pick.pool);
          pending_until = CoarseNow() + pool.pending_timeout;
        }
        if (pending && CoarseNow() < pending_until) {
          co_await Sleep(std::chrono::milliseconds(5));
          continue;
        }
      }
      if (!tried.empty() && r.answer.status != 0) break;  // report the last backend's failure
      r.log.decision = "error";
      r.log.reason = fmt::format("shed:{}", pick.shed_reason);
      r.answer = ErrorResponse(
          503, "service_unavailable",
          fmt::format("no backend of pool '{}' can take the request now ({}); retry later",
                      pool.name, pick.shed_reason));
      r.answer.headers.emplace_back("Retry-After", fmt::format("{}", pick.retry_after_s));
      break;
    }
    pending.reset();
    Attempt a;
    if (!PrepareAttempt(r, *pcfg, pick, a, rewritten, rewritten_target)) break;
    bool last = retries >= pool.retry.attempts;
    a.hold_5xx = !last && call.repeatable;
    Balancer::InFlight in_flight = bal.Begin(pick);
    r.answer = LocalResponse{};
    r.answer.status = 0;
    keep = co_await Proxy(r, a);
    in_flight.Release();
    bal.Report(pick, a.outcome);
    if (r.headers_sent || r.answer.status == 0 || last) break;
    // Nothing reached the client yet: retry where that is safe.
    bool safe = a.outcome == Outcome::kConnectFailure || call.repeatable;
    if (!safe) break;
    std::optional<Balancer::InFlight> budget = bal.TryBeginRetry(pick);
    if (!budget) break;
    retry_guard = std::move(budget);
    tried.push_back(pick.backend);
    ++retries;
    std::chrono::milliseconds wait = bal.Backoff(pick.pool, retries);
    if (wait.count() > 0) co_await Sleep(wait);
  }
  retry_guard.reset();
  if (cfg.anomaly.enabled && !call.model.empty() && shared_.anomaly) RecordOutput(r, *pcfg, pick);
  if (call.limited) Settle(r);
  if (!r.headers_sent && r.answer.status != 0) {
    if (r.log.decision == "allow") r.log.decision = "error";
    co_return co_await WriteLocal(r, r.answer, true);
  }
  co_return keep && !r.close;
}

}  // namespace gantry::gateway::internal
