// Rate limits and quotas for the inference gateway.
//
// Rate limits are token buckets (capacity = burst, or `requests` when burst is 0;
// refill = requests / per_s), plus LLM token-per-minute buckets (capacity =
// tokens_per_minute, refilled over 60 s). Quotas are fixed UTC calendar windows
// (day, month) counting calls and LLM tokens, as APIM `quota-by-key`.
//
// Every rule whose scope has a value in the Subject and whose glob matches that value
// applies; counters are kept per (rule, subject value). Admission is all-or-nothing:
// all matching rules are checked first and only then charged, so a denied request
// consumes nothing.
//
// Without Redis, buckets live in this process (shared by all event loops). With
// Redis, one Lua script checks and charges every bucket and quota of a request
// atomically on the Redis server (using its TIME), so several gateways share limits
// exactly. When Redis is unreachable or slower than `timeout_s`, the limiter either
// decides locally (fail-open, Admission::degraded) or answers 503 (fail-closed).
//
// Quota usage is also counted in memory and persisted to SQLite (`state_path`,
// table `gateway_quota_usage`) so that Usage() and restarts see it. Usage is recorded
// for every API key (subject "key:<id>", with or without a quota) and for every other
// subject a quota rule matches. In Redis mode the shared counters are mirrored locally
// after each decision, and a counter missing in Redis (restarted empty) is re-seeded
// from the local value.
#pragma once

// clang-format off
#include <utility>  // before asio: awaitable.hpp in Boost 1.74 uses std::exchange
// clang-format on

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/clock.h"
#include "gantry/core/status.h"

namespace gantry::gateway {

struct RateLimitRule {
  std::string scope;        // "key" | "role" | "model" | "global"
  std::string match = "*";  // glob ('*', '?') on the subject value of `scope`
  double requests = 0;      // requests per `per_s` (0 = no request limit in this rule)
  double per_s = 60;
  double burst = 0;              // bucket capacity; 0 => equals `requests`
  double tokens_per_minute = 0;  // LLM tokens per minute (0 = none)
};

struct QuotaRule {
  std::string scope;
  std::string match = "*";
  // 0 = none. UTC calendar windows: a day starts at 00:00 UTC, a month on day 1.
  int64_t calls_per_day = 0, calls_per_month = 0, tokens_per_day = 0, tokens_per_month = 0;
};

struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  double timeout_s = 0.02;   // per command, from queueing to reply
  bool fail_closed = false;  // Redis down: false = decide locally (degraded), true = 503
  std::string prefix = "gantry:";
  // Sent with AUTH as the first command of every connection when non-empty
  // (redis-server requirepass / ACL default user).
  std::string password;
};

struct LimiterConfig {
  std::vector<RateLimitRule> rate_limits;
  std::vector<QuotaRule> quotas;
  std::optional<RedisOptions> redis;
  std::string state_path;  // SQLite file for quota usage ("" or ":memory:" = not persisted)
};

// Who is asking. An empty field is absent: rules of that scope do not apply.
// "global" rules always apply.
struct Subject {
  std::string_view key_id;
  std::string_view role;
  std::string_view model;
};

struct LimiterPlan;  // internal to the limiter

struct Admission {
  bool allowed = true;
  int status = 200;          // when !allowed: 429 (rate), 403 (quota), 503 (limiter unavailable)
  std::string reason;        // "rate_limit_requests", "rate_limit_tokens", "quota_calls",
                             // "quota_tokens", "limiter_unavailable"
  std::string rule;          // readable id of the deciding rule, e.g. "key=gk1 requests 100/60s"
  double retry_after_s = 0;  // >= 1 and integral when !allowed (for the Retry-After header)
  // The most restrictive request rule (least remaining), for RateLimit-* headers.
  bool has_rate_headers = false;
  double limit = 0, remaining = 0, reset_s = 0;
  bool degraded = false;  // decided locally because Redis was unreachable (fail-open)
  // Opaque bookkeeping for Settle(): the TPM buckets and token quotas this request
  // touched (null when none) and the estimate charged to them.
  std::shared_ptr<const LimiterPlan> settle;
  double estimated_tokens = 0;
  bool via_redis = false;  // charged in Redis (Settle corrects there too)
};

// One row of quota usage. subject: "key:<id>", "role:<name>", "model:<name>", "global";
// period: "2026-11-30" (day) or "2026-11" (month).
struct UsageRow {
  std::string subject;
  std::string period;
  int64_t calls = 0;
  int64_t tokens = 0;
};

class LimiterLoop;
struct LimiterState;  // internal

// One per gateway process; thread-safe.
class Limiter {
 public:
  // Validates the rules (errors name the rule index and field) and loads quota usage
  // from `state_path`. `clock` must outlive the Limiter; nullptr = the system clock.
  static Result<std::unique_ptr<Limiter>> Create(LimiterConfig config, Clock* clock);
  ~Limiter();  // flushes quota usage
  Limiter(const Limiter&) = delete;
  Limiter& operator=(const Limiter&) = delete;

  // A per event-loop handle that owns that loop's Redis connection (if configured).
  // Use it only on `io`'s thread. Destroy it before `io`, and only when no Admit() is
  // suspended in it (e.g. after io.stop(), before running `io` again). The Limiter may
  // go first; its state lives until the last LimiterLoop is gone.
  std::unique_ptr<LimiterLoop> Attach(boost::asio::io_context& io);

  // Replaces the rules (hot reload). Buckets of rules whose identity (scope, match,
  // numbers) is unchanged keep their state; quota usage is per subject and period, so it
  // always survives. The Redis endpoint and state_path are fixed at Create: changes to
  // them are logged and ignored (a restart applies them). Invalid rules: InvalidArgument,
  // and the old rules stay.
  Status Reconfigure(LimiterConfig config);

  // Quota usage rows whose subject starts with `subject_filter` ("" = all), sorted by
  // subject then period.
  Result<std::vector<UsageRow>> Usage(std::string_view subject_filter) const;

  // Persists quota counters to SQLite now (also done every second by a background
  // thread and at destruction). OK without a state file.
  Status Flush();

  bool redis_configured() const;
  bool redis_up() const;
  uint64_t redis_errors() const;

  // Validates a config without building a limiter (for `gantry gateway check`).
  static Status Validate(const LimiterConfig& config);

 private:
  explicit Limiter(std::shared_ptr<LimiterState> state);
  std::shared_ptr<LimiterState> state_;
};

class LimiterLoop {
 public:
  ~LimiterLoop();
  LimiterLoop(const LimiterLoop&) = delete;
  LimiterLoop& operator=(const LimiterLoop&) = delete;

  // Checks every matching rule. A request counts 1 against request buckets and call
  // quotas; `estimated_tokens` is charged to TPM buckets and token quotas up front
  // (APIM llm-token-limit with estimate-prompt-tokens). Denied requests consume nothing.
  // The strings viewed by `subject` must stay alive until the returned awaitable completes
  // (co_await it directly).
  boost::asio::awaitable<Admission> Admit(Subject subject, double estimated_tokens);
  // The same decision without a coroutine when it needs no Redis round trip
  // (no Redis configured); nullopt means "call Admit()". Saves the request
  // path a coroutine frame per request in local mode.
  std::optional<Admission> TryAdmitNow(Subject subject, double estimated_tokens);

  // After the response: charges (actual_tokens - admission.estimated_tokens) to the
  // token buckets and quotas touched by Admit (negative = refund). Buckets may go
  // negative: later requests wait until refilled (as APIM). Fire-and-forget; never
  // blocks the loop. A denied admission is ignored.
  void Settle(const Admission& admission, double actual_tokens);

 private:
  friend class Limiter;
  struct Impl;
  explicit LimiterLoop(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gantry::gateway
