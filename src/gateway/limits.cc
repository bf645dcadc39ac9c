// Rate limits and quotas; see include/gantry/gateway/limits.h.
#include "gantry/gateway/limits.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "gantry/core/log.h"
#include "gantry/security/crypto.h"
#include "gantry/security/rbac.h"
#include "quota_store.h"
#include "redis.h"

namespace gantry::gateway {
namespace {

namespace asio = boost::asio;

enum class Scope { kKey, kRole, kModel, kGlobal };

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return buf;
}

std::string Hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// A token bucket derived from a rule: request buckets cost 1 per request, TPM buckets
// cost the (estimated) LLM tokens.
struct BucketRule {
  Scope scope;
  std::string match;
  bool tokens = false;
  double capacity = 0;
  double rate = 0;   // tokens per second
  std::string id;    // hash of the identity (kind, scope, match, numbers)
  std::string name;  // readable, for Admission::rule
};

struct QuotaLimit {
  Scope scope;
  std::string match;
  int64_t calls_day, calls_month, tokens_day, tokens_month;
  std::string scope_match;  // "key=*"
  // Readable ids per limit, built once (Admit is hot).
  std::string calls_day_name, calls_month_name, tokens_day_name, tokens_month_name;
};

struct Rules {
  std::vector<BucketRule> buckets;
  std::vector<QuotaLimit> quotas;
  std::unordered_map<std::string, const BucketRule*> by_id;
};

Result<Scope> ParseScope(const std::string& s, const std::string& where) {
  if (s == "key") return Scope::kKey;
  if (s == "role") return Scope::kRole;
  if (s == "model") return Scope::kModel;
  if (s == "global") return Scope::kGlobal;
  return InvalidArgument(where + ".scope: unknown scope '" + s +
                         "'; use one of key, role, model, global");
}

std::string ScopeMatch(const std::string& scope, const std::string& match) {
  return scope == "global" ? std::string("global") : scope + "=" + match;
}

Status CheckNumber(double v, const std::string& where, bool allow_zero) {
  if (!std::isfinite(v) || v < 0 || (!allow_zero && v == 0)) {
    return InvalidArgument(where + ": must be " + (allow_zero ? ">= 0" : "> 0") + ", got " +
                           Num(v));
  }
  return Status::Ok();
}

Result<std::shared_ptr<const Rules>> Compile(const LimiterConfig& c) {
  auto rules = std::make_shared<Rules>();
  for (size_t i = 0; i < c.rate_limits.size(); ++i) {
    const auto& r = c.rate_limits[i];
    const std::string where = "rate_limits[" + std::to_string(i) + "]";
    ASSIGN_OR_RETURN(Scope scope, ParseScope(r.scope, where));
    if (r.match.empty()) return InvalidArgument(where + ".match: empty; use \"*\" for all");
    RETURN_IF_ERROR(CheckNumber(r.requests, where + ".requests", true));
    RETURN_IF_ERROR(CheckNumber(r.per_s, where + ".per", false));
    RETURN_IF_ERROR(CheckNumber(r.burst, where + ".burst", true));
    RETURN_IF_ERROR(CheckNumber(r.tokens_per_minute, where + ".tokens_per_minute", true));
    if (r.requests == 0 && r.tokens_per_minute == 0) {
      return InvalidArgument(where + ": sets neither requests nor tokens_per_minute; set one");
    }
    if (r.requests == 0 && r.burst != 0) {
      return InvalidArgument(where + ".burst: set without requests; add requests or drop burst");
    }
    const std::string sm = ScopeMatch(r.scope, r.match);
    if (r.requests > 0) {
      BucketRule b;
      b.scope = scope;
      b.match = r.match;
      b.capacity = r.burst > 0 ? r.burst : r.requests;
      if (b.capacity < 1) {
        return InvalidArgument(where + ".burst: bucket capacity " + Num(b.capacity) +
                               " admits no request; burst (or requests) must be >= 1");
      }
      b.rate = r.requests / r.per_s;
      b.id = Hex64(Fnv1a("R|" + r.scope + "|" + r.match + "|" + Num(r.requests) + "|" +
                         Num(r.per_s) + "|" + Num(b.capacity)));
      b.name = sm + " requests " + Num(r.requests) + "/" + Num(r.per_s) + "s";
      if (r.burst > 0) b.name += " burst " + Num(r.burst);
      rules->buckets.push_back(std::move(b));
    }
    if (r.tokens_per_minute > 0) {
      BucketRule b;
      b.scope = scope;
      b.match = r.match;
      b.tokens = true;
      b.capacity = r.tokens_per_minute;
      b.rate = r.tokens_per_minute / 60.0;
      b.id = Hex64(Fnv1a("T|" + r.scope + "|" + r.match + "|" + Num(r.tokens_per_minute)));
      b.name = sm + " tokens_per_minute " + Num(r.tokens_per_minute);
      rules->buckets.push_back(std::move(b));
    }
  }
  for (size_t i = 0; i < c.quotas.size(); ++i) {
    const auto& q = c.quotas[i];
    const std::string where = "quotas[" + std::to_string(i) + "]";
    ASSIGN_OR_RETURN(Scope scope, ParseScope(q.scope, where));
    if (q.match.empty()) return InvalidArgument(where + ".match: empty; use \"*\" for all");
    const std::pair<const char*, int64_t> fields[] = {{"calls_per_day", q.calls_per_day},
                                                      {"calls_per_month", q.calls_per_month},
                                                      {"tokens_per_day", q.tokens_per_day},
                                                      {"tokens_per_month", q.tokens_per_month}};
    bool any = false;
    for (const auto& [name, v] : fields) {
      if (v < 0) {
        return InvalidArgument(where + "." + name + ": must be >= 0, got " + std::to_string(v));
      }
      any = any || v > 0;
    }
    if (!any) {
      return InvalidArgument(where +
                             ": sets no limit; set calls_per_day, calls_per_month, "
                             "tokens_per_day or tokens_per_month");
    }
    QuotaLimit ql;
    ql.scope = scope;
    ql.match = q.match;
    ql.calls_day = q.calls_per_day;
    ql.calls_month = q.calls_per_month;
    ql.tokens_day = q.tokens_per_day;
    ql.tokens_month = q.tokens_per_month;
    ql.scope_match = ScopeMatch(q.scope, q.match);
    ql.calls_day_name = ql.scope_match + " calls_per_day " + std::to_string(q.calls_per_day);
    ql.calls_month_name = ql.scope_match + " calls_per_month " + std::to_string(q.calls_per_month);
    ql.tokens_day_name = ql.scope_match + " tokens_per_day " + std::to_string(q.tokens_per_day);
    ql.tokens_month_name =
        ql.scope_match + " tokens_per_month " + std::to_string(q.tokens_per_month);
    rules->quotas.push_back(std::move(ql));
  }
  if (c.redis) {
    const auto& r = *c.redis;
    if (r.host.empty()) return InvalidArgument("redis.address: empty host");
    if (r.port <= 0 || r.port > 65535) {
      return InvalidArgument("redis.address: port " + std::to_string(r.port) +
                             " is out of range 1-65535");
    }
    if (!(r.timeout_s > 0) || !std::isfinite(r.timeout_s)) {
      return InvalidArgument("redis.timeout: must be > 0, got " + Num(r.timeout_s));
    }
  }
  for (const auto& b : rules->buckets) rules->by_id.emplace(b.id, &b);
  return std::shared_ptr<const Rules>(std::move(rules));
}

// --- UTC calendar windows --------------------------------------------------------------

struct Windows {
  std::string day, month;   // "2026-11-30", "2026-11"
  int64_t day_end_s = 0;    // unix seconds of the next 00:00 UTC
  int64_t month_end_s = 0;  // unix seconds of the next month's first day
  int64_t now_s = 0;
  double now_frac_s = 0;  // unix seconds, fractional
};

Windows ComputeWindows(std::chrono::system_clock::time_point wall) {
  using namespace std::chrono;
  Windows w;
  const auto secs = duration_cast<duration<double>>(wall.time_since_epoch()).count();
  w.now_frac_s = secs;
  w.now_s = static_cast<int64_t>(std::floor(secs));
  const sys_days today = floor<days>(wall);
  const year_month_day ymd{today};
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04d-%02u-%02u", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()));
  w.day = buf;
  std::snprintf(buf, sizeof(buf), "%04d-%02u", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()));
  w.month = buf;
  w.day_end_s = duration_cast<seconds>((today + days(1)).time_since_epoch()).count();
  const year_month next = year_month{ymd.year(), ymd.month()} + months(1);
  w.month_end_s = duration_cast<seconds>(sys_days{next / 1}.time_since_epoch()).count();
  return w;
}

// Calendar arithmetic and formatting once per second per thread, not per request.
// The result is this thread's cached copy: valid until its next call.
const Windows& WindowsAt(std::chrono::system_clock::time_point wall) {
  using namespace std::chrono;
  thread_local Windows cached;
  thread_local bool valid = false;
  const int64_t s = duration_cast<seconds>(wall.time_since_epoch()).count();
  if (!valid || cached.now_s != s || wall.time_since_epoch() < seconds(0)) {
    cached = ComputeWindows(wall);
    valid = true;
  }
  cached.now_frac_s = duration_cast<duration<double>>(wall.time_since_epoch()).count();
  return cached;
}

double CeilRetry(double s) {
  if (!std::isfinite(s) || s > 1e9) return 1e9;
  return std::max(1.0, std::ceil(s - 1e-9));
}

// --- Per-request plan ------------------------------------------------------------------

constexpr size_t kShards = 64;

struct PlannedBucket {
  const BucketRule* rule;
  std::string key;  // "<rule id>|<subject>"
  size_t shard;     // LimiterState::shards index of `key`
};

const std::string kNoRule;

struct Bucket;      // below
struct UsageCount;  // below

// One usage counter (calls or tokens of a subject in a period) and its strictest limit.
struct PlannedCounter {
  std::string subject;
  std::string period;
  bool tokens = false;
  int64_t limit = 0;  // 0 = tracked only
  int64_t window_end_s = 0;
  const std::string* rule;  // readable id of the strictest rule
};

}  // namespace

// What one subject (key, role, model) is charged against under one rules
// snapshot on one UTC day. It does not depend on the request otherwise, so
// each loop builds it once and reuses it (the strings and lookups here were
// most of the limiter's cost per request); Admission::settle keeps it for
// Settle().
struct LimiterPlan {
  std::shared_ptr<const Rules> rules;  // owns what `rule` pointers point into
  std::vector<PlannedBucket> buckets;
  std::vector<PlannedCounter> counters;
  std::string day;          // the UTC day it was built for ("" = no counters)
  bool limited = false;     // some bucket or counter has a limit
  bool token_work = false;  // some token bucket or token counter (Settle corrects it)

  // Where buckets[i] and counters[j] live in LimiterState, remembered across
  // requests (a map lookup each was most of a decision). An entry is used
  // while the epoch it was taken at is current; the epochs change when
  // entries are erased (PruneBuckets per shard, Flush for usage). Each is read
  // and written only under the lock of what it points into (the bucket's
  // shard mutex, usage_mu), so a plan stays race-free whoever uses it.
  mutable std::vector<Bucket*> bucket_at;
  mutable std::vector<uint64_t> bucket_epoch;
  mutable std::vector<UsageCount*> usage_at;
  mutable uint64_t usage_epoch = 0;
};

namespace {

// One request's view of its plan: the plan plus what this request costs.
struct Plan {
  std::shared_ptr<const LimiterPlan> shape;
  double estimate = 0;  // >= 0
  int64_t tok = 0;      // the estimate rounded, for token counters
  double now_frac_s = 0;

  const std::vector<PlannedBucket>& buckets() const { return shape->buckets; }
  const std::vector<PlannedCounter>& counters() const { return shape->counters; }
  double Cost(const PlannedBucket& b) const { return b.rule->tokens ? estimate : 1.0; }
  int64_t Cost(const PlannedCounter& c) const { return c.tokens ? tok : 1; }
};

std::string_view SubjectValue(Scope s, const Subject& subj) {
  switch (s) {
    case Scope::kKey:
      return subj.key_id;
    case Scope::kRole:
      return subj.role;
    case Scope::kModel:
      return subj.model;
    case Scope::kGlobal:
      return "global";
  }
  return {};
}

std::string SubjectName(Scope s, std::string_view v) {
  switch (s) {
    case Scope::kKey:
      return "key:" + std::string(v);
    case Scope::kRole:
      return "role:" + std::string(v);
    case Scope::kModel:
      return "model:" + std::string(v);
    case Scope::kGlobal:
      return "global";
  }
  return {};
}

bool Applies(Scope scope, const std::string& match, const Subject& subj) {
  if (scope == Scope::kGlobal) return true;
  std::string_view v = SubjectValue(scope, subj);
  if (v.empty()) return false;
  return match == "*" || security::GlobMatch(match, v);
}

// `rule` points into the Rules snapshot, which the plan holds.
void AddCounter(LimiterPlan& p, const std::string& subject, const std::string& period, bool tokens,
                int64_t limit, int64_t end, const std::string* rule) {
  for (auto& c : p.counters) {
    if (c.subject == subject && c.period == period && c.tokens == tokens) {
      if (limit > 0 && (c.limit == 0 || limit < c.limit)) {
        c.limit = limit;
        c.rule = rule;
      }
      return;
    }
  }
  p.counters.push_back(PlannedCounter{subject, period, tokens, limit, end, rule});
}

std::shared_ptr<const LimiterPlan> MakePlan(std::shared_ptr<const Rules> rules_ptr,
                                            const Subject& subj, const Windows& win) {
  auto p = std::make_shared<LimiterPlan>();
  const Rules& rules = *rules_ptr;
  p->rules = std::move(rules_ptr);
  for (const auto& b : rules.buckets) {
    if (!Applies(b.scope, b.match, subj)) continue;
    std::string key = b.id + "|" + SubjectName(b.scope, SubjectValue(b.scope, subj));
    bool dup = false;
    for (const auto& e : p->buckets) dup = dup || e.key == key;
    if (dup) continue;  // identical rules listed twice must not charge twice
    const size_t shard = std::hash<std::string>{}(key) % kShards;
    p->buckets.push_back(PlannedBucket{&b, std::move(key), shard});
    p->limited = true;
    p->token_work = p->token_work || b.tokens;
  }
  p->bucket_at.assign(p->buckets.size(), nullptr);
  p->bucket_epoch.assign(p->buckets.size(), 0);
  const bool key_present = !subj.key_id.empty();
  bool need_windows = key_present;
  for (const auto& q : rules.quotas) need_windows = need_windows || Applies(q.scope, q.match, subj);
  if (!need_windows) return p;
  p->day = win.day;
  for (const auto& q : rules.quotas) {
    if (!Applies(q.scope, q.match, subj)) continue;
    const std::string subject = SubjectName(q.scope, SubjectValue(q.scope, subj));
    AddCounter(*p, subject, win.day, false, q.calls_day, win.day_end_s, &q.calls_day_name);
    AddCounter(*p, subject, win.month, false, q.calls_month, win.month_end_s, &q.calls_month_name);
    AddCounter(*p, subject, win.day, true, q.tokens_day, win.day_end_s, &q.tokens_day_name);
    AddCounter(*p, subject, win.month, true, q.tokens_month, win.month_end_s, &q.tokens_month_name);
  }
  // Usage of API keys is always recorded (for /admin/usage), with or without a quota.
  if (key_present) {
    const std::string subject = "key:" + std::string(subj.key_id);
    AddCounter(*p, subject, win.day, false, 0, win.day_end_s, &kNoRule);
    AddCounter(*p, subject, win.month, false, 0, win.month_end_s, &kNoRule);
    AddCounter(*p, subject, win.day, true, 0, win.day_end_s, &kNoRule);
    AddCounter(*p, subject, win.month, true, 0, win.month_end_s, &kNoRule);
  }
  for (const auto& c : p->counters) {
    p->limited = p->limited || c.limit > 0;
    p->token_work = p->token_work || c.tokens;
  }
  p->usage_at.assign(p->counters.size(), nullptr);
  return p;
}

bool BucketDenies(double tokens, double cost, double cap) {
  const double need = std::min(cost, cap);
  return tokens < need || tokens <= 0;
}

bool CounterDenies(int64_t used, int64_t cost, int64_t limit) {
  if (limit <= 0) return false;
  const int64_t need = std::min(cost, limit);
  return used + need > limit || (cost == 0 && used >= limit);
}

// Which header state to report: the request bucket with the least remaining.
void UpdateHeaders(Admission& a, const BucketRule& r, double tokens) {
  if (r.tokens) return;
  const double remaining = std::floor(std::max(0.0, tokens));
  if (a.has_rate_headers && remaining >= a.remaining) return;
  a.has_rate_headers = true;
  a.limit = r.capacity;
  a.remaining = remaining;
  a.reset_s = std::max(0.0, std::ceil((r.capacity - tokens) / r.rate - 1e-9));
}

Admission DenyBucket(const BucketRule& r, double tokens, double cost) {
  Admission a;
  a.allowed = false;
  a.status = 429;
  a.reason = r.tokens ? "rate_limit_tokens" : "rate_limit_requests";
  a.rule = r.name;
  const double need = std::max(std::min(cost, r.capacity), 1e-9);
  a.retry_after_s = CeilRetry((need - tokens) / r.rate);
  // A 429 describes the bucket that refused it, request or token bucket alike.
  a.has_rate_headers = true;
  a.limit = r.capacity;
  a.remaining = std::floor(std::max(0.0, tokens));
  a.reset_s = std::max(0.0, std::ceil((r.capacity - tokens) / r.rate - 1e-9));
  return a;
}

Admission DenyCounter(const PlannedCounter& c, double now_frac_s) {
  Admission a;
  a.allowed = false;
  a.status = 403;
  a.reason = c.tokens ? "quota_tokens" : "quota_calls";
  a.rule = *c.rule;
  a.retry_after_s = CeilRetry(static_cast<double>(c.window_end_s) - now_frac_s);
  return a;
}

// Lua: checks then charges every bucket and quota counter of one request atomically.
// KEYS: nb bucket hashes {t, ts}, then nq counters. ARGV: nb, nq, then per bucket
// (capacity, rate per s, cost), then per counter (limit or 0, cost, expire-at unix s,
// seed). A missing counter starts from `seed`, this gateway's last known value, so that
// a restarted (empty) Redis does not reset quotas.
// Returns {1, 0, tokens after per bucket..., value after per counter...} or
// {0, index of the denying key, its tokens/value} (a denying counter adds every
// counter's value, for the local mirror). Numbers travel as strings because
// Redis truncates Lua numbers to integers.
// Shared by both scripts. Idle expiry: the time to refill completely (then the
// bucket is as good as absent), capped at ~10 years and formatted as an
// integer (huge values would print as 1e+20, which PEXPIRE rejects).
#define GANTRY_LUA_TTL_MS                                   \
  "local function ttl_ms(cap, x, rate)\n"                   \
  "  local t = math.ceil((cap - x) / rate * 1000) + 1000\n" \
  "  if t > 315360000000 then t = 315360000000 end\n"       \
  "  return string.format('%d', t)\n"                       \
  "end\n"

constexpr const char* kAdmitScript = GANTRY_LUA_TTL_MS R"lua(
local nb = tonumber(ARGV[1])
local nq = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tok = {}
for i = 1, nb do
  local a = 2 + (i - 1) * 3
  local cap = tonumber(ARGV[a + 1])
  local rate = tonumber(ARGV[a + 2])
  local cost = tonumber(ARGV[a + 3])
  local v = redis.call('HMGET', KEYS[i], 't', 'ts')
  local x = cap
  if v[1] then
    local el = now - (tonumber(v[2]) or now)
    if el < 0 then el = 0 end
    x = math.min(cap, tonumber(v[1]) + el * rate / 1000)
  end
  tok[i] = x
  local need = cost
  if need > cap then need = cap end
  if x < need or x <= 0 then return {0, i, string.format('%.17g', x)} end
end
local used = {}
local deny = 0
local qa = 2 + nb * 3
for j = 1, nq do
  local a = qa + (j - 1) * 4
  local limit = tonumber(ARGV[a + 1])
  local cost = tonumber(ARGV[a + 2])
  local g = redis.call('GET', KEYS[nb + j])
  local u = 0
  if g then
    u = tonumber(g)
  else
    local seed = tonumber(ARGV[a + 4])
    if seed > 0 then
      redis.call('SET', KEYS[nb + j], string.format('%d', seed))
      redis.call('EXPIREAT', KEYS[nb + j], tonumber(ARGV[a + 3]))
      u = seed
    end
  end
  used[j] = u
  if limit > 0 and deny == 0 then
    local need = cost
    if need > limit then need = limit end
    if u + need > limit or (cost == 0 and u >= limit) then deny = j end
  end
end
if deny > 0 then
  local out = {0, nb + deny, string.format('%.17g', used[deny])}
  for j = 1, nq do out[#out + 1] = string.format('%.17g', used[j]) end
  return out
end
local out = {1, 0}
for i = 1, nb do
  local a = 2 + (i - 1) * 3
  local cap = tonumber(ARGV[a + 1])
  local rate = tonumber(ARGV[a + 2])
  local x = tok[i] - tonumber(ARGV[a + 3])
  redis.call('HSET', KEYS[i], 't', string.format('%.17g', x), 'ts', string.format('%d', now))
  redis.call('PEXPIRE', KEYS[i], ttl_ms(cap, x, rate))
  out[#out + 1] = string.format('%.17g', x)
end
for j = 1, nq do
  local a = qa + (j - 1) * 4
  local cost = tonumber(ARGV[a + 2])
  local u = used[j]
  if cost ~= 0 then
    u = redis.call('INCRBY', KEYS[nb + j], cost)
    if u == cost then redis.call('EXPIREAT', KEYS[nb + j], tonumber(ARGV[a + 3])) end
  end
  out[#out + 1] = string.format('%.17g', u)
end
return out
)lua";

// Lua: charges a token correction. KEYS: nb TPM buckets then counters. ARGV: nb, delta
// (float, for buckets), idelta (integer, for counters), then per bucket (capacity, rate).
constexpr const char* kSettleScript = GANTRY_LUA_TTL_MS R"lua(
local nb = tonumber(ARGV[1])
local delta = tonumber(ARGV[2])
local idelta = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 1, nb do
  local cap = tonumber(ARGV[4 + (i - 1) * 2])
  local rate = tonumber(ARGV[5 + (i - 1) * 2])
  local v = redis.call('HMGET', KEYS[i], 't', 'ts')
  local x = cap
  if v[1] then
    local el = now - (tonumber(v[2]) or now)
    if el < 0 then el = 0 end
    x = math.min(cap, tonumber(v[1]) + el * rate / 1000)
  end
  x = x - delta
  redis.call('HSET', KEYS[i], 't', string.format('%.17g', x), 'ts', string.format('%d', now))
  redis.call('PEXPIRE', KEYS[i], ttl_ms(cap, x, rate))
end
for j = nb + 1, #KEYS do
  if idelta ~= 0 and redis.call('EXISTS', KEYS[j]) == 1 then
    redis.call('INCRBY', KEYS[j], idelta)
  end
end
return 1
)lua";

// SHA1 of a script, as Redis names it (EVALSHA).
std::string Sha1Hex(std::string_view s);

}  // namespace
}  // namespace gantry::gateway

#include <openssl/sha.h>

namespace gantry::gateway {
namespace {

// Redis names a loaded script by the SHA-1 of its text (EVALSHA).
std::string Sha1Hex(std::string_view s) {
  unsigned char md[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(s.data()), s.size(), md);
  return security::HexEncode(std::string_view(reinterpret_cast<const char*>(md), sizeof(md)));
}

struct Bucket {
  double tokens = 0;
  std::chrono::nanoseconds last{0};
  double capacity = 0;
  double rate = 0;

  void Refill(std::chrono::nanoseconds now) {
    if (now > last) {
      tokens =
          std::min(capacity, tokens + std::chrono::duration<double>(now - last).count() * rate);
      last = now;
    }
  }
};

struct UsageCount {
  int64_t calls = 0;
  int64_t tokens = 0;
  bool dirty = false;
};

// Orders (subject, period) keys and finds them by string_view pairs, so the
// hot path looks counters up without building key strings.
struct UsageLess {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    const std::string_view a1 = a.first, b1 = b.first;
    if (a1 != b1) return a1 < b1;
    return std::string_view(a.second) < std::string_view(b.second);
  }
};
using UsageKey = std::pair<std::string_view, std::string_view>;

// Locks the shards named in a bit mask in index order (no deadlock between
// requests) and unlocks them when it goes.
template <typename Shards>
class ShardLocks {
 public:
  ShardLocks(Shards& shards, uint64_t mask) : shards_(shards), mask_(mask) {
    for (uint64_t m = mask_; m != 0; m &= m - 1) shards_[std::countr_zero(m)].mu.lock();
  }
  ~ShardLocks() {
    for (uint64_t m = mask_; m != 0; m &= m - 1) shards_[std::countr_zero(m)].mu.unlock();
  }
  ShardLocks(const ShardLocks&) = delete;
  ShardLocks& operator=(const ShardLocks&) = delete;

 private:
  Shards& shards_;
  uint64_t mask_;
};
static_assert(kShards <= 64, "ShardLocks keeps one bit per shard");

}  // namespace

struct LimiterState {
  LimiterConfig config;  // as created (redis, state_path)
  const Clock* clock = nullptr;

  mutable std::mutex rules_mu;
  std::shared_ptr<const Rules> rules;
  // Bumped (under rules_mu) whenever `rules` is replaced, so that a loop can
  // tell its snapshot is current without taking the lock per request.
  std::atomic<uint64_t> rules_generation{0};

  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, Bucket> buckets;
    uint64_t epoch = 0;  // bumped when buckets are erased (LimiterPlan::bucket_at)
  };
  std::array<Shard, kShards> shards;

  mutable std::mutex usage_mu;
  std::map<std::pair<std::string, std::string>, UsageCount, UsageLess> usage;  // (subject, period)
  uint64_t usage_epoch = 0;  // bumped when usage entries are erased (LimiterPlan::usage_at)

  // plan.buckets[i]'s bucket, or nullptr when it does not exist. Its shard's
  // mutex held.
  Bucket* FindBucket(const LimiterPlan& plan, size_t i) {
    Shard& sh = shards[plan.buckets[i].shard];
    if (plan.bucket_at[i] != nullptr && plan.bucket_epoch[i] == sh.epoch) {
      return plan.bucket_at[i];
    }
    auto it = sh.buckets.find(plan.buckets[i].key);
    if (it == sh.buckets.end()) return nullptr;
    plan.bucket_at[i] = &it->second;
    plan.bucket_epoch[i] = sh.epoch;
    return &it->second;
  }
  // The same, created when absent.
  Bucket& BucketAt(const LimiterPlan& plan, size_t i) {
    if (Bucket* b = FindBucket(plan, i)) return *b;
    Shard& sh = shards[plan.buckets[i].shard];
    Bucket& b = sh.buckets.try_emplace(plan.buckets[i].key).first->second;
    plan.bucket_at[i] = &b;
    plan.bucket_epoch[i] = sh.epoch;
    return b;
  }
  // plan.counters[j]'s counter, or nullptr when it does not exist. usage_mu held.
  UsageCount* FindUsage(const LimiterPlan& plan, size_t j) {
    if (plan.usage_epoch != usage_epoch) {
      std::fill(plan.usage_at.begin(), plan.usage_at.end(), nullptr);
      plan.usage_epoch = usage_epoch;
    }
    if (plan.usage_at[j] == nullptr) {
      const PlannedCounter& c = plan.counters[j];
      auto it = usage.find(UsageKey{c.subject, c.period});
      if (it != usage.end()) plan.usage_at[j] = &it->second;
    }
    return plan.usage_at[j];
  }

  // The counter of (subject, period), created at zero when absent. usage_mu held.
  UsageCount& UsageAt(std::string_view subject, std::string_view period) {
    auto it = usage.find(UsageKey{subject, period});
    if (it == usage.end()) {
      it = usage.emplace(std::pair<std::string, std::string>(subject, period), UsageCount{}).first;
    }
    return it->second;
  }

  std::unique_ptr<QuotaStore> store;
  std::mutex flush_mu;  // one flush at a time

  std::atomic<int> redis_up_count{0};
  std::atomic<uint64_t> redis_errors{0};
  std::mutex redis_log_mu;
  bool redis_logged_up = false;
  bool redis_logged_once = false;
  std::atomic<bool> fallback_logged{false};
  std::string admit_sha, settle_sha;

  std::thread flusher;
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stop = false;

  std::shared_ptr<const Rules> Snapshot() const {
    std::lock_guard lock(rules_mu);
    return rules;
  }

  // Local all-or-nothing decision (no Redis).
  Admission DecideLocal(const Plan& plan);
  // Applies counter values read back from Redis to the local mirror.
  void MirrorCounters(const Plan& plan, const std::vector<double>& values);
  void SettleLocal(const Admission& a, double delta);
  Status Flush();
  void PruneBuckets();
  void OnRedisState(bool up);
};

Admission LimiterState::DecideLocal(const Plan& plan) {
  const auto now = clock->Now();
  const auto& buckets = plan.buckets();
  uint64_t mask = 0;
  for (const PlannedBucket& pb : buckets) mask |= uint64_t{1} << pb.shard;
  // Reused per thread: no allocation per request.
  thread_local std::vector<Bucket*> bs;
  bs.assign(buckets.size(), nullptr);
  std::optional<Admission> deny;
  Admission a;
  {
    ShardLocks locks(shards, mask);
    for (size_t i = 0; i < buckets.size(); ++i) {
      const PlannedBucket& pb = buckets[i];
      Bucket& b = BucketAt(*plan.shape, i);
      if (b.capacity != pb.rule->capacity || b.rate != pb.rule->rate) {
        // New (capacity 0), or a rule that changed its numbers.
        b = Bucket{pb.rule->capacity, now, pb.rule->capacity, pb.rule->rate};
      }
      b.Refill(now);
      bs[i] = &b;
      if (BucketDenies(b.tokens, plan.Cost(pb), b.capacity)) {
        Admission d = DenyBucket(*pb.rule, b.tokens, plan.Cost(pb));
        if (!deny || d.retry_after_s > deny->retry_after_s) deny = std::move(d);
      }
    }
    {
      std::lock_guard ulock(usage_mu);
      // One lookup per counter that exists (the charge below reuses it); a
      // missing one is created only when the request is admitted.
      thread_local std::vector<UsageCount*> us;
      us.clear();
      for (size_t j = 0; j < plan.counters().size(); ++j) {
        const PlannedCounter& c = plan.counters()[j];
        UsageCount* u = FindUsage(*plan.shape, j);
        us.push_back(u);
        const int64_t used = u == nullptr ? 0 : (c.tokens ? u->tokens : u->calls);
        if (CounterDenies(used, plan.Cost(c), c.limit)) {
          Admission d = DenyCounter(c, plan.now_frac_s);
          // A quota denial says more (and lasts longer) than a rate denial.
          if (!deny || deny->status != 403 || d.retry_after_s > deny->retry_after_s)
            deny = std::move(d);
        }
      }
      if (deny) {
        a = std::move(*deny);
      } else {
        for (size_t i = 0; i < bs.size(); ++i) bs[i]->tokens -= plan.Cost(buckets[i]);
        const auto& counters = plan.counters();
        for (size_t j = 0; j < counters.size(); ++j) {
          UsageCount& u =
              us[j] != nullptr ? *us[j] : UsageAt(counters[j].subject, counters[j].period);
          plan.shape->usage_at[j] = &u;  // same epoch: nothing was erased meanwhile
          (counters[j].tokens ? u.tokens : u.calls) += plan.Cost(counters[j]);
          u.dirty = true;
        }
        a.estimated_tokens = plan.estimate;
        if (plan.shape->token_work) a.settle = plan.shape;
      }
    }
    // Header state read under the shard locks, as the charge was.
    for (size_t i = 0; i < bs.size(); ++i) UpdateHeaders(a, *buckets[i].rule, bs[i]->tokens);
  }
  return a;
}

void LimiterState::MirrorCounters(const Plan& plan, const std::vector<double>& values) {
  std::lock_guard lock(usage_mu);
  const auto& counters = plan.counters();
  for (size_t j = 0; j < counters.size() && j < values.size(); ++j) {
    const auto& c = counters[j];
    UsageCount& u = UsageAt(c.subject, c.period);
    (c.tokens ? u.tokens : u.calls) = std::llround(values[j]);
    u.dirty = true;
  }
}

void LimiterState::SettleLocal(const Admission& a, double delta) {
  const LimiterPlan& plan = *a.settle;
  if (!a.via_redis) {
    const auto now = clock->Now();
    for (size_t i = 0; i < plan.buckets.size(); ++i) {
      const PlannedBucket& pb = plan.buckets[i];
      if (!pb.rule->tokens) continue;
      std::lock_guard lock(shards[pb.shard].mu);
      Bucket* b = FindBucket(plan, i);
      if (b == nullptr) continue;  // pruned while full: nothing to correct against
      b->Refill(now);
      b->tokens -= delta;
    }
  }
  const int64_t idelta = std::llround(delta);
  if (idelta == 0) return;
  std::lock_guard lock(usage_mu);
  for (size_t j = 0; j < plan.counters.size(); ++j) {
    if (!plan.counters[j].tokens) continue;
    UsageCount* u = FindUsage(plan, j);
    if (u == nullptr) continue;
    u->tokens = std::max<int64_t>(0, u->tokens + idelta);
    u->dirty = true;
  }
}

Status LimiterState::Flush() {
  std::lock_guard flock(flush_mu);
  std::vector<UsageRow> rows;
  {
    std::lock_guard lock(usage_mu);
    const Windows w = WindowsAt(clock->WallNow());
    for (auto it = usage.begin(); it != usage.end();) {
      if (it->second.dirty) {
        rows.push_back(
            UsageRow{it->first.first, it->first.second, it->second.calls, it->second.tokens});
        it->second.dirty = false;
      }
      // Past windows are only needed on disk.
      const bool current = it->first.second == w.day || it->first.second == w.month;
      if (!current && (store || !it->second.dirty)) {
        if (store) ++usage_epoch;  // LimiterPlan::usage_at may point at it
        it = store ? usage.erase(it) : std::next(it);
      } else {
        ++it;
      }
    }
  }
  if (!store || rows.empty()) return Status::Ok();
  Status s = store->Save(rows);
  if (!s.ok()) {
    // Keep the rows dirty so that the next flush retries them.
    std::lock_guard lock(usage_mu);
    for (const auto& r : rows) {
      auto it = usage.find(UsageKey{r.subject, r.period});
      if (it != usage.end())
        it->second.dirty = true;
      else
        UsageAt(r.subject, r.period) = UsageCount{r.calls, r.tokens, true};
    }
  }
  return s;
}

void LimiterState::PruneBuckets() {
  // A full bucket carries no state: dropping it is the same as keeping it.
  const auto now = clock->Now();
  for (auto& s : shards) {
    std::lock_guard lock(s.mu);
    for (auto it = s.buckets.begin(); it != s.buckets.end();) {
      it->second.Refill(now);
      if (it->second.tokens >= it->second.capacity) {
        ++s.epoch;  // LimiterPlan::bucket_at may point at it
        it = s.buckets.erase(it);
      } else {
        ++it;
      }
    }
  }
}

void LimiterState::OnRedisState(bool up) {
  const int n = up ? ++redis_up_count : --redis_up_count;
  std::lock_guard lock(redis_log_mu);
  const bool agg = n > 0;
  if (redis_logged_once && agg == redis_logged_up) return;
  if (!redis_logged_once && !agg) return;  // still starting up
  redis_logged_once = true;
  fallback_logged = true;  // transitions are logged here from now on
  redis_logged_up = agg;
  const auto& r = *config.redis;
  if (agg) {
    log::info("limiter: redis {}:{} is up; limits are shared again", r.host, r.port);
  } else {
    log::warn("limiter: redis {}:{} is unreachable; {}", r.host, r.port,
              r.fail_closed ? "limited requests get 503 until it is back (failure_mode: closed)"
                            : "deciding with local limits until it is back (failure_mode: open)");
  }
}

// --- Limiter ---------------------------------------------------------------------------

Limiter::Limiter(std::shared_ptr<LimiterState> state) : state_(std::move(state)) {}

Status Limiter::Validate(const LimiterConfig& config) { return Compile(config).status(); }

Result<std::unique_ptr<Limiter>> Limiter::Create(LimiterConfig config, Clock* clock) {
  ASSIGN_OR_RETURN(auto rules, Compile(config));
  auto st = std::make_shared<LimiterState>();
  st->clock = clock ? clock : &SystemClock();
  st->rules = std::move(rules);
  st->admit_sha = Sha1Hex(kAdmitScript);
  st->settle_sha = Sha1Hex(kSettleScript);
  if (!config.state_path.empty() && config.state_path != ":memory:") {
    ASSIGN_OR_RETURN(st->store, QuotaStore::Open(config.state_path));
    ASSIGN_OR_RETURN(auto rows, st->store->Query(""));
    const Windows w = WindowsAt(st->clock->WallNow());
    for (auto& r : rows) {
      if (r.period != w.day && r.period != w.month) continue;
      st->UsageAt(r.subject, r.period) = UsageCount{r.calls, r.tokens, false};
    }
  }
  st->config = std::move(config);
  st->config.rate_limits.clear();
  st->config.quotas.clear();
  // Background flush every second; bucket pruning every 10 s. Holds a raw pointer: the
  // Limiter joins the thread before the state can go away.
  LimiterState* raw = st.get();
  st->flusher = std::thread([raw] {
    int ticks = 0;
    std::unique_lock lock(raw->stop_mu);
    while (!raw->stop) {
      raw->stop_cv.wait_for(lock, std::chrono::seconds(1));
      if (raw->stop) break;
      lock.unlock();
      Status s = raw->Flush();
      if (!s.ok()) log::warn("limiter: {}", s.ToString());
      if (++ticks % 10 == 0) raw->PruneBuckets();
      lock.lock();
    }
  });
  return std::unique_ptr<Limiter>(new Limiter(std::move(st)));
}

Limiter::~Limiter() {
  {
    std::lock_guard lock(state_->stop_mu);
    state_->stop = true;
  }
  state_->stop_cv.notify_all();
  if (state_->flusher.joinable()) state_->flusher.join();
  Status s = state_->Flush();
  if (!s.ok()) log::warn("limiter: final flush: {}", s.ToString());
}

Status Limiter::Reconfigure(LimiterConfig config) {
  ASSIGN_OR_RETURN(auto rules, Compile(config));
  const auto& old = state_->config;
  if (config.state_path != old.state_path || config.redis.has_value() != old.redis.has_value() ||
      (config.redis &&
       (config.redis->host != old.redis->host || config.redis->port != old.redis->port ||
        config.redis->prefix != old.redis->prefix))) {
    log::warn("limiter: changes to state or redis need a restart; applying the new rules only");
  }
  std::lock_guard lock(state_->rules_mu);
  state_->rules = std::move(rules);
  state_->rules_generation.fetch_add(1, std::memory_order_release);
  return Status::Ok();
}

Result<std::vector<UsageRow>> Limiter::Usage(std::string_view subject_filter) const {
  std::map<std::pair<std::string, std::string>, UsageRow> merged;
  if (state_->store) {
    ASSIGN_OR_RETURN(auto rows, state_->store->Query(subject_filter));
    for (auto& r : rows) merged[{r.subject, r.period}] = std::move(r);
  }
  {
    std::lock_guard lock(state_->usage_mu);
    for (const auto& [k, u] : state_->usage) {
      if (k.first.compare(0, subject_filter.size(), subject_filter) != 0) continue;
      merged[k] = UsageRow{k.first, k.second, u.calls, u.tokens};
    }
  }
  std::vector<UsageRow> out;
  out.reserve(merged.size());
  for (auto& [k, r] : merged) out.push_back(std::move(r));
  return out;
}

Status Limiter::Flush() { return state_->Flush(); }

bool Limiter::redis_configured() const { return state_->config.redis.has_value(); }
bool Limiter::redis_up() const { return state_->redis_up_count.load() > 0; }
uint64_t Limiter::redis_errors() const { return state_->redis_errors.load(); }

// --- LimiterLoop -----------------------------------------------------------------------

struct LimiterLoop::Impl {
  std::shared_ptr<LimiterState> st;
  asio::io_context& io;
  std::shared_ptr<RedisConnection> conn;
  std::shared_ptr<bool> conn_up = std::make_shared<bool>(false);
  // Plans by subject, for this loop's thread only (no lock). An entry is used
  // while the rules snapshot and the UTC day it was built for are current.
  std::unordered_map<std::string, std::shared_ptr<const LimiterPlan>> plan_cache;
  std::string cache_key;
  std::shared_ptr<const Rules> cached_rules;  // the snapshot the cached plans were built for
  uint64_t cached_generation = 0;             // LimiterState::rules_generation it was read at
  static constexpr size_t kPlanCacheMax = 4096;
  static constexpr size_t kPlanCacheMaxKey = 512;  // bytes of (key id, role, model)

  Plan PlanFor(const Subject& subject, double estimate);

  Impl(std::shared_ptr<LimiterState> s, asio::io_context& i) : st(std::move(s)), io(i) {}
  ~Impl() {
    if (conn) {
      conn->set_state_callback(nullptr);
      if (*conn_up) --st->redis_up_count;  // detaching is not an outage: no log
      conn->Close();
    }
  }

  static asio::awaitable<Result<RedisReply>> Eval(std::shared_ptr<RedisConnection> conn,
                                                  const std::string& sha, const char* script,
                                                  std::vector<std::string> args) {
    std::vector<std::string> cmd;
    cmd.reserve(args.size() + 1);
    cmd.push_back("EVALSHA");
    cmd.push_back(sha);
    for (auto& a : args) cmd.push_back(std::move(a));
    auto r = co_await conn->Command(cmd);
    if (r.ok() && r->is_error() && r->str.rfind("NOSCRIPT", 0) == 0) {
      // The server lost its script cache (restart, SCRIPT FLUSH): EVAL loads it again.
      cmd[0] = "EVAL";
      cmd[1] = script;
      r = co_await conn->Command(std::move(cmd));
    }
    co_return r;
  }

  std::string BucketKey(const std::string& local_key) const {
    // local key "<id>|<subject>" -> "<prefix>rl:<id>:<subject>"
    const auto bar = local_key.find('|');
    return st->config.redis->prefix + "rl:" + local_key.substr(0, bar) + ":" +
           local_key.substr(bar + 1);
  }
  std::string CounterKey(const std::string& subject, const std::string& period, bool tokens) const {
    return st->config.redis->prefix + "q:" + subject + ":" + period + (tokens ? ":t" : ":c");
  }

  asio::awaitable<Admission> AdmitRedis(const Plan& plan) {
    std::vector<std::string> args;
    const auto& buckets = plan.buckets();
    const auto& counters = plan.counters();
    const size_t nb = buckets.size(), nq = counters.size();
    args.reserve(1 + 2 + nb * 4 + nq * 5);
    args.push_back(std::to_string(nb + nq));
    for (const auto& b : buckets) args.push_back(BucketKey(b.key));
    for (const auto& c : counters) args.push_back(CounterKey(c.subject, c.period, c.tokens));
    args.push_back(std::to_string(nb));
    args.push_back(std::to_string(nq));
    for (const auto& b : buckets) {
      args.push_back(Num(b.rule->capacity));
      args.push_back(Num(b.rule->rate));
      args.push_back(Num(plan.Cost(b)));
    }
    {
      std::lock_guard lock(st->usage_mu);
      for (const auto& c : counters) {
        args.push_back(std::to_string(c.limit));
        args.push_back(std::to_string(plan.Cost(c)));
        // Keep the counter a day past its window so late Settle() calls still find it.
        args.push_back(std::to_string(c.window_end_s + 86400));
        auto it = st->usage.find(UsageKey{c.subject, c.period});
        args.push_back(std::to_string(
            it == st->usage.end() ? 0 : (c.tokens ? it->second.tokens : it->second.calls)));
      }
    }
    auto r = co_await Eval(conn, st->admit_sha, kAdmitScript, std::move(args));
    if (!r.ok() || r->type != RedisReply::Type::kArray || r->elements.size() < 2) {
      if (r.ok()) {
        log::debug("limiter: unexpected redis reply to the admit script: {}", r->ToString());
      }
      co_return DecideFallback(plan);
    }
    const auto& e = r->elements;
    const bool allowed = e[0].integer == 1;
    if (!allowed) {
      const size_t i = static_cast<size_t>(e[1].integer);  // 1-based
      const double v = e.size() > 2 ? std::strtod(e[2].str.c_str(), nullptr) : 0;
      Admission a;
      if (i >= 1 && i <= nb) {
        const auto& pb = buckets[i - 1];
        a = DenyBucket(*pb.rule, v, plan.Cost(pb));
        UpdateHeaders(a, *pb.rule, v);
      } else if (i > nb && i <= nb + nq) {
        a = DenyCounter(counters[i - nb - 1], plan.now_frac_s);
        if (e.size() == 3 + nq) {
          std::vector<double> values(nq);
          for (size_t j = 0; j < nq; ++j) values[j] = std::strtod(e[3 + j].str.c_str(), nullptr);
          st->MirrorCounters(plan, values);
        }
      } else {
        co_return DecideFallback(plan);
      }
      co_return a;
    }
    if (e.size() != 2 + nb + nq) co_return DecideFallback(plan);
    Admission a;
    a.via_redis = true;
    a.estimated_tokens = plan.estimate;
    if (plan.shape->token_work) a.settle = plan.shape;
    for (size_t i = 0; i < nb; ++i) {
      const double tokens = std::strtod(e[2 + i].str.c_str(), nullptr);
      UpdateHeaders(a, *buckets[i].rule, tokens);
    }
    std::vector<double> values(nq);
    for (size_t j = 0; j < nq; ++j) values[j] = std::strtod(e[2 + nb + j].str.c_str(), nullptr);
    st->MirrorCounters(plan, values);
    co_return a;
  }

  Admission DecideFallback(const Plan& plan) {
    ++st->redis_errors;
    if (!st->fallback_logged.exchange(true)) {
      // Redis may never have come up (no up/down transition to log).
      log::warn("limiter: redis {}:{} unavailable; {}", st->config.redis->host,
                st->config.redis->port,
                st->config.redis->fail_closed ? "answering 503 (failure_mode: closed)"
                                              : "deciding with local limits (failure_mode: open)");
    }
    if (st->config.redis->fail_closed) {
      Admission a;
      a.allowed = false;
      a.status = 503;
      a.reason = "limiter_unavailable";
      a.rule = "redis " + st->config.redis->host + ":" + std::to_string(st->config.redis->port);
      a.retry_after_s = 1;
      return a;
    }
    Admission a = st->DecideLocal(plan);
    a.degraded = true;
    return a;
  }

  // Static: it may outlive the LimiterLoop, so it owns what it uses.
  static asio::awaitable<void> SettleRedis(std::shared_ptr<LimiterState> st,
                                           std::shared_ptr<RedisConnection> conn,
                                           std::vector<std::string> args) {
    auto r = co_await Eval(conn, st->settle_sha, kSettleScript, std::move(args));
    if (!r.ok() || r->is_error()) ++st->redis_errors;
  }
};

LimiterLoop::LimiterLoop(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LimiterLoop::~LimiterLoop() = default;

std::unique_ptr<LimiterLoop> Limiter::Attach(asio::io_context& io) {
  auto impl = std::make_unique<LimiterLoop::Impl>(state_, io);
  if (state_->config.redis) {
    impl->conn = std::make_shared<RedisConnection>(io, *state_->config.redis);
    RedisConnection* conn = impl->conn.get();
    std::shared_ptr<LimiterState> st = state_;
    std::shared_ptr<bool> up = impl->conn_up;
    conn->set_state_callback([st, up, conn](bool is_up) {
      if (is_up) {
        // Loaded ahead of the first request on this connection (replies are FIFO).
        conn->Send({"SCRIPT", "LOAD", kAdmitScript});
        conn->Send({"SCRIPT", "LOAD", kSettleScript});
      }
      if (*up == is_up) return;
      *up = is_up;
      st->OnRedisState(is_up);
    });
  }
  return std::unique_ptr<LimiterLoop>(new LimiterLoop(std::move(impl)));
}

Plan LimiterLoop::Impl::PlanFor(const Subject& subject, double estimate) {
  // The rules snapshot is re-read only after a Reconfigure (no lock and no
  // reference count per request). A reload replaces every plan: drop them all
  // rather than keep old rule sets alive until each subject comes back.
  const uint64_t generation = st->rules_generation.load(std::memory_order_acquire);
  if (!cached_rules || generation != cached_generation) {
    std::shared_ptr<const Rules> rules = st->Snapshot();
    cached_generation = generation;
    if (rules != cached_rules) {
      plan_cache.clear();
      cached_rules = std::move(rules);
    }
  }
  const auto wall = st->clock->WallNow();
  const Windows& win = WindowsAt(wall);
  Plan plan;
  plan.estimate = std::max(0.0, estimate);
  plan.tok = std::llround(plan.estimate);
  plan.now_frac_s = win.now_frac_s;
  // The cache key: the three subject fields, each after its length (a model
  // name comes from the client and may hold any character).
  cache_key.clear();
  for (std::string_view part : {subject.key_id, subject.role, subject.model}) {
    const uint32_t n = static_cast<uint32_t>(part.size());
    cache_key.append(reinterpret_cast<const char*>(&n), sizeof(n));
    cache_key.append(part);
  }
  auto it = plan_cache.find(cache_key);
  if (it != plan_cache.end() && (it->second->day.empty() || it->second->day == win.day)) {
    plan.shape = it->second;
    return plan;
  }
  plan.shape = MakePlan(cached_rules, subject, win);
  // Bounded in entries and in size: the model name comes from the client
  // (up to the body limit), so long subjects are planned per request instead.
  if (cache_key.size() > kPlanCacheMaxKey) return plan;
  if (plan_cache.size() >= kPlanCacheMax && it == plan_cache.end()) plan_cache.clear();
  plan_cache.insert_or_assign(cache_key, plan.shape);
  return plan;
}

std::optional<Admission> LimiterLoop::TryAdmitNow(Subject subject, double estimated_tokens) {
  if (impl_->conn) return std::nullopt;  // Redis mode: decided by Admit()
  Plan plan = impl_->PlanFor(subject, estimated_tokens);
  if (plan.buckets().empty() && plan.counters().empty()) return Admission{};
  return impl_->st->DecideLocal(plan);
}

asio::awaitable<Admission> LimiterLoop::Admit(Subject subject, double estimated_tokens) {
  LimiterState& st = *impl_->st;
  Plan plan = impl_->PlanFor(subject, estimated_tokens);
  if (plan.buckets().empty() && plan.counters().empty()) co_return Admission{};
  if (!impl_->conn || !plan.shape->limited) {
    // Usage-only bookkeeping needs no shared decision.
    co_return st.DecideLocal(plan);
  }
  // Down and waiting to reconnect: decide now instead of paying the deadline. (While a
  // connection attempt is in progress the command queues, bounded by timeout_s.)
  if (!impl_->conn->accepting()) co_return impl_->DecideFallback(plan);
  co_return co_await impl_->AdmitRedis(plan);
}

void LimiterLoop::Settle(const Admission& admission, double actual_tokens) {
  if (!admission.allowed || !admission.settle) return;
  const double delta = actual_tokens - admission.estimated_tokens;
  if (delta == 0) return;
  LimiterState& st = *impl_->st;
  st.SettleLocal(admission, delta);
  if (!admission.via_redis || !impl_->conn || !impl_->conn->connected()) return;
  const LimiterPlan& plan = *admission.settle;
  // The current rules decide capacity and rate (a reload may have changed them).
  auto rules = st.Snapshot();
  std::vector<std::string> keys, bargs;
  for (const PlannedBucket& b : plan.buckets) {
    if (!b.rule->tokens) continue;
    auto it = rules->by_id.find(b.rule->id);
    if (it == rules->by_id.end()) continue;  // rule removed by a reload
    keys.push_back(impl_->BucketKey(b.key));
    bargs.push_back(Num(it->second->capacity));
    bargs.push_back(Num(it->second->rate));
  }
  const size_t nb = keys.size();
  for (const PlannedCounter& c : plan.counters) {
    if (c.tokens) keys.push_back(impl_->CounterKey(c.subject, c.period, true));
  }
  if (keys.empty()) return;
  std::vector<std::string> args;
  args.push_back(std::to_string(keys.size()));
  for (auto& k : keys) args.push_back(std::move(k));
  args.push_back(std::to_string(nb));
  args.push_back(Num(delta));
  args.push_back(std::to_string(std::llround(delta)));
  for (auto& a : bargs) args.push_back(std::move(a));
  asio::co_spawn(impl_->io, Impl::SettleRedis(impl_->st, impl_->conn, std::move(args)),
                 asio::detached);
}

}  // namespace gantry::gateway
