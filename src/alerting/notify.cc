#include "gantry/alerting/notify.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <deque>
#include <mutex>
#include <thread>

#include "gantry/core/http_client.h"
#include "gantry/core/log.h"
#include "gantry/core/subprocess.h"

extern char** environ;

namespace gantry::alerting {
namespace {

constexpr size_t kMaxCommandOutput = size_t{64} << 10;

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

// Labels and annotations as a JSON object (sorted, as std::map keeps them).
Json MapJson(const std::map<std::string, std::string>& m) {
  Json j = Json::object();
  for (const auto& [k, v] : m) j[k] = v;
  return j;
}

// The pairs that every map in `maps` has with the same value.
std::map<std::string, std::string> CommonPairs(
    const std::vector<const std::map<std::string, std::string>*>& maps) {
  std::map<std::string, std::string> common;
  if (maps.empty()) return common;
  common = *maps.front();
  for (size_t i = 1; i < maps.size(); ++i) {
    for (auto it = common.begin(); it != common.end();) {
      auto f = maps[i]->find(it->first);
      if (f == maps[i]->end() || f->second != it->second) {
        it = common.erase(it);
      } else {
        ++it;
      }
    }
  }
  return common;
}

// Alertmanager's group key for the root route: "{}:{a=\"x\",b=\"y\"}".
std::string GroupKey(const std::map<std::string, std::string>& group_labels) {
  std::string key = "{}:{";
  bool first = true;
  for (const auto& [k, v] : group_labels) {
    if (!first) key += ',';
    first = false;
    key += k + "=" + Json(v).dump();
  }
  return key + "}";
}

Json WebhookAlertJson(const Alert& a, int64_t now_ms) {
  Json j = Json::object();
  j["status"] = a.firing ? "firing" : "resolved";
  j["labels"] = MapJson(a.labels);
  j["annotations"] = MapJson(a.annotations);
  j["startsAt"] = FormatRfc3339(a.starts_at_ms != 0 ? a.starts_at_ms : now_ms);
  j["endsAt"] = FormatRfc3339(a.ends_at_ms != 0 || a.firing ? a.ends_at_ms : now_ms);
  j["generatorURL"] = a.generator_url;
  j["fingerprint"] = Fingerprint(a.labels);
  return j;
}

bool Retryable(const Status& s) {
  switch (s.code()) {
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kDataLoss:
    case StatusCode::kIoError:
      return true;
    default:
      return false;
  }
}

// POSTs `body` with retries on transport errors, 5xx and 429. OK on a 2xx.
Status PostJson(const SinkConfig& cfg, const std::string& url, const std::string& body) {
  http::Request req;
  req.method = "POST";
  req.url = url;
  req.headers = cfg.headers;
  req.headers.emplace_back("Content-Type", "application/json");
  req.deadline = cfg.timeout;
  req.body = body;
  std::chrono::milliseconds backoff = cfg.retry_backoff;
  Status last;
  int attempts = 0;
  for (int attempt = 0; attempt <= cfg.retries; ++attempt) {
    ++attempts;
    if (attempt > 0) {
      std::this_thread::sleep_for(backoff);
      backoff *= 2;
    }
    Result<http::Response> resp = http::Send(req);
    if (!resp.ok()) {
      last = resp.status();
      if (!Retryable(last)) break;
      continue;
    }
    if (resp->status >= 200 && resp->status < 300) return Status::Ok();
    std::string snippet = resp->body.substr(0, 200);
    last = Unavailable(fmt::format("POST {} answered {} {}{}{}", url, resp->status, resp->reason,
                                   snippet.empty() ? "" : ": ", snippet));
    if (resp->status < 500 && resp->status != 429) {
      // A 4xx other than 429 will not get better by asking again.
      last = InvalidArgument(last.message());
      break;
    }
  }
  return last.WithContext(fmt::format("sink {} gave up after {} attempt(s)", cfg.name, attempts));
}

std::vector<Alert> Deliverable(const SinkConfig& cfg, const std::vector<Alert>& alerts) {
  if (cfg.send_resolved) return alerts;
  std::vector<Alert> out;
  for (const Alert& a : alerts) {
    if (a.firing) out.push_back(a);
  }
  return out;
}

class WebhookSink : public Sink {
 public:
  WebhookSink(SinkConfig cfg, WebhookMeta meta) : cfg_(std::move(cfg)), meta_(std::move(meta)) {
    meta_.max_alerts = cfg_.max_alerts;
  }
  const std::string& name() const override { return cfg_.name; }
  Status Send(const std::vector<Alert>& alerts, int64_t now_ms) override {
    std::vector<Alert> todo = Deliverable(cfg_, alerts);
    if (todo.empty()) return Status::Ok();
    Status first_error;
    for (const Json& payload : WebhookPayloads(todo, meta_, now_ms)) {
      Status s = PostJson(cfg_, cfg_.url, payload.dump());
      if (!s.ok() && first_error.ok()) first_error = s;
    }
    return first_error;
  }

 private:
  SinkConfig cfg_;
  WebhookMeta meta_;
};

class AlertmanagerSink : public Sink {
 public:
  explicit AlertmanagerSink(SinkConfig cfg) : cfg_(std::move(cfg)) {
    std::string base = cfg_.url;
    while (!base.empty() && base.back() == '/') base.pop_back();
    url_ = base + "/api/v2/alerts";
  }
  const std::string& name() const override { return cfg_.name; }
  Status Send(const std::vector<Alert>& alerts, int64_t now_ms) override {
    // Remember what fires, so that Resend can keep it alive in Alertmanager.
    if (active_.empty()) last_resend_ms_ = now_ms;  // this post is the first round
    for (const Alert& a : alerts) {
      std::string fp = Fingerprint(a.labels);
      if (a.firing) {
        active_[fp] = a;
      } else {
        active_.erase(fp);
      }
    }
    std::vector<Alert> todo = Deliverable(cfg_, alerts);
    if (todo.empty()) return Status::Ok();
    return Post(todo, now_ms);
  }
  std::chrono::milliseconds resend_interval() const override { return cfg_.resend_interval; }
  Status Resend(int64_t now_ms) override {
    if (active_.empty() || cfg_.resend_interval.count() <= 0 ||
        now_ms - last_resend_ms_ < cfg_.resend_interval.count()) {
      return Status::Ok();
    }
    last_resend_ms_ = now_ms;
    std::vector<Alert> all;
    for (const auto& [fp, a] : active_) all.push_back(a);
    return Post(all, now_ms);
  }

 private:
  Status Post(const std::vector<Alert>& alerts, int64_t now_ms) {
    int64_t ends = cfg_.resend_interval.count() > 0 ? now_ms + 4 * cfg_.resend_interval.count() : 0;
    return PostJson(cfg_, url_, AlertmanagerApiPayload(alerts, now_ms, ends).dump());
  }

  SinkConfig cfg_;
  std::string url_;
  std::map<std::string, Alert> active_;  // by fingerprint
  int64_t last_resend_ms_ = 0;
};

std::string LabelText(const std::map<std::string, std::string>& labels) {
  std::string s = "{";
  for (const auto& [k, v] : labels) {
    if (k == "alertname") continue;
    if (s.size() > 1) s += ',';
    s += k + "=" + Json(v).dump();
  }
  return s + "}";
}

class LogSink : public Sink {
 public:
  explicit LogSink(SinkConfig cfg) : cfg_(std::move(cfg)) {}
  const std::string& name() const override { return cfg_.name; }
  Status Send(const std::vector<Alert>& alerts, int64_t /*now_ms*/) override {
    for (const Alert& a : Deliverable(cfg_, alerts)) {
      auto name = a.labels.find("alertname");
      auto summary = a.annotations.find("summary");
      std::string line =
          fmt::format("alert {} {}{} value={:g}{}{}", a.firing ? "firing" : "resolved",
                      name != a.labels.end() ? name->second : "(no alertname)", LabelText(a.labels),
                      a.value, summary != a.annotations.end() ? ": " : "",
                      summary != a.annotations.end() ? summary->second : "");
      if (a.firing) {
        log::warn("{}", line);
      } else {
        log::info("{}", line);
      }
    }
    return Status::Ok();
  }

 private:
  SinkConfig cfg_;
};

// "summary" -> "SUMMARY", "gpu-id" -> "GPU_ID": an environment-safe suffix.
std::string EnvSuffix(const std::string& name) {
  std::string s;
  for (char c : name) {
    s += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::toupper(c)) : '_';
  }
  return s;
}

class CommandSink : public Sink {
 public:
  CommandSink(SinkConfig cfg, WebhookMeta meta) : cfg_(std::move(cfg)), meta_(std::move(meta)) {
    meta_.max_alerts = 0;
  }
  const std::string& name() const override { return cfg_.name; }
  // One run per alert, so that the environment describes exactly one alert;
  // stdin carries the same alert as a webhook payload (scripts written for
  // Alertmanager webhooks can parse it).
  Status Send(const std::vector<Alert>& alerts, int64_t now_ms) override {
    Status first_error;
    for (const Alert& a : Deliverable(cfg_, alerts)) {
      Status s = RunOne(a, now_ms);
      if (!s.ok()) {
        if (first_error.ok()) first_error = s;
      }
    }
    return first_error;
  }

 private:
  Status RunOne(const Alert& a, int64_t now_ms) {
    std::vector<Json> payloads = WebhookPayloads({a}, meta_, now_ms);
    std::string fp = Fingerprint(a.labels);
    auto label = [&](const char* k) {
      auto it = a.labels.find(k);
      return it != a.labels.end() ? it->second : std::string();
    };
    std::vector<std::pair<std::string, std::string>> env = {
        {"GANTRY_ALERT_NAME", label("alertname")},
        {"GANTRY_ALERT_STATUS", a.firing ? "firing" : "resolved"},
        {"GANTRY_ALERT_VALUE", fmt::format("{:g}", a.value)},
        {"GANTRY_ALERT_FINGERPRINT", fp},
        {"GANTRY_ALERT_STARTS_AT", FormatRfc3339(a.starts_at_ms != 0 ? a.starts_at_ms : now_ms)},
        {"GANTRY_ALERT_ENDS_AT",
         FormatRfc3339(a.ends_at_ms != 0 || a.firing ? a.ends_at_ms : now_ms)},
        {"GANTRY_ALERT_GENERATOR_URL", a.generator_url},
    };
    for (const auto& [k, v] : a.labels) env.emplace_back("GANTRY_ALERT_LABEL_" + EnvSuffix(k), v);
    for (const auto& [k, v] : a.annotations) {
      env.emplace_back("GANTRY_ALERT_ANNOTATION_" + EnvSuffix(k), v);
    }
    std::string cmdline = JoinArgv(cfg_.command);
    Result<CommandResult> r =
        RunCommand(cfg_.command, payloads.front().dump() + "\n", env, cfg_.timeout);
    if (!r.ok()) return r.status().WithContext("sink " + cfg_.name);
    std::string out = r->output;
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    if (out.size() > 500) out = "..." + out.substr(out.size() - 500);
    if (r->timed_out) {
      return DeadlineExceeded(
          fmt::format("sink {}: '{}' for alert {} ({}) did not finish within "
                      "{} ms and was killed{}{}",
                      cfg_.name, cmdline, label("alertname"), fp, cfg_.timeout.count(),
                      out.empty() ? "" : "; output: ", out));
    }
    if (r->exit_code != 0) {
      return Unavailable(fmt::format("sink {}: '{}' for alert {} ({}) exited with status {}{}{}",
                                     cfg_.name, cmdline, label("alertname"), fp, r->exit_code,
                                     out.empty() ? "" : "; output: ", out));
    }
    log::info("sink {}: '{}' for alert {} ({}) exited with status 0", cfg_.name, cmdline,
              label("alertname"), fp);
    return Status::Ok();
  }

  SinkConfig cfg_;
  WebhookMeta meta_;
};

const char* SinkTypeName(SinkType t) {
  switch (t) {
    case SinkType::kWebhook:
      return "webhook";
    case SinkType::kAlertmanager:
      return "alertmanager";
    case SinkType::kLog:
      return "log";
    case SinkType::kCommand:
      return "command";
  }
  return "?";
}

Status ValidateSink(const SinkConfig& s) {
  if (s.type == SinkType::kWebhook || s.type == SinkType::kAlertmanager) {
    if (s.url.empty()) {
      return InvalidArgument(fmt::format("sink {} ({}) needs a url", s.name, SinkTypeName(s.type)));
    }
    Result<http::Url> u = http::ParseUrl(s.url);
    if (!u.ok()) {
      return InvalidArgument(fmt::format(
          "sink {}: {} (plain http to a numeric address such as http://127.0.0.1:5001/hook; put a "
          "local proxy in front of https endpoints)",
          s.name, u.status().message()));
    }
    if (s.retries < 0) {
      return InvalidArgument(
          fmt::format("sink {}: retries must be >= 0, got {}", s.name, s.retries));
    }
  }
  if (s.type == SinkType::kCommand && (s.command.empty() || s.command[0].empty())) {
    return InvalidArgument(
        fmt::format("sink {} (command) needs a command: [program, args...]", s.name));
  }
  if (s.timeout.count() <= 0) {
    return InvalidArgument(fmt::format("sink {}: timeout must be positive", s.name));
  }
  return Status::Ok();
}

}  // namespace

std::string Fingerprint(const std::map<std::string, std::string>& labels) {
  uint64_t h = 14695981039346656037ull;
  auto add = [&](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
  };
  const char sep[1] = {static_cast<char>(0xff)};
  for (const auto& [k, v] : labels) {
    add(k);
    add(std::string_view(sep, 1));
    add(v);
    add(std::string_view(sep, 1));
  }
  return fmt::format("{:016x}", h);
}

std::string FormatRfc3339(int64_t unix_ms) {
  if (unix_ms == 0) return "0001-01-01T00:00:00Z";
  int64_t secs = unix_ms / 1000;
  int64_t ms = unix_ms % 1000;
  if (ms < 0) {
    ms += 1000;
    secs -= 1;
  }
  time_t t = static_cast<time_t>(secs);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

std::vector<Json> WebhookPayloads(const std::vector<Alert>& alerts, const WebhookMeta& meta,
                                  int64_t now_ms) {
  // Groups in first-seen order.
  std::vector<std::pair<std::map<std::string, std::string>, std::vector<const Alert*>>> groups;
  for (const Alert& a : alerts) {
    std::map<std::string, std::string> key;
    for (const std::string& l : meta.group_by) {
      auto it = a.labels.find(l);
      if (it != a.labels.end()) key[l] = it->second;
    }
    auto g =
        std::find_if(groups.begin(), groups.end(), [&](const auto& e) { return e.first == key; });
    if (g == groups.end()) {
      groups.emplace_back(std::move(key), std::vector<const Alert*>{&a});
    } else {
      g->second.push_back(&a);
    }
  }
  std::vector<Json> out;
  for (const auto& [group_labels, members] : groups) {
    bool firing =
        std::any_of(members.begin(), members.end(), [](const Alert* a) { return a->firing; });
    std::vector<const std::map<std::string, std::string>*> labels, annotations;
    for (const Alert* a : members) {
      labels.push_back(&a->labels);
      annotations.push_back(&a->annotations);
    }
    size_t keep = members.size();
    if (meta.max_alerts > 0) keep = std::min(keep, static_cast<size_t>(meta.max_alerts));
    Json list = Json::array();
    for (size_t i = 0; i < keep; ++i) list.push_back(WebhookAlertJson(*members[i], now_ms));
    Json p = Json::object();
    p["receiver"] = meta.receiver;
    p["status"] = firing ? "firing" : "resolved";
    p["alerts"] = std::move(list);
    p["groupLabels"] = MapJson(group_labels);
    p["commonLabels"] = MapJson(CommonPairs(labels));
    p["commonAnnotations"] = MapJson(CommonPairs(annotations));
    p["externalURL"] = meta.external_url;
    p["version"] = "4";
    p["groupKey"] = GroupKey(group_labels);
    p["truncatedAlerts"] = members.size() - keep;
    out.push_back(std::move(p));
  }
  return out;
}

Json AlertmanagerApiPayload(const std::vector<Alert>& alerts, int64_t now_ms,
                            int64_t firing_ends_at_ms) {
  Json arr = Json::array();
  for (const Alert& a : alerts) {
    Json j = Json::object();
    j["labels"] = MapJson(a.labels);
    j["annotations"] = MapJson(a.annotations);
    j["startsAt"] = FormatRfc3339(a.starts_at_ms != 0 ? a.starts_at_ms : now_ms);
    // A past endsAt is how a client tells Alertmanager an alert resolved; a
    // firing alert without one is kept until resolve_timeout passes.
    if (a.ends_at_ms != 0) {
      j["endsAt"] = FormatRfc3339(a.ends_at_ms);
    } else if (!a.firing) {
      j["endsAt"] = FormatRfc3339(now_ms);
    } else if (firing_ends_at_ms != 0) {
      j["endsAt"] = FormatRfc3339(firing_ends_at_ms);
    }
    j["generatorURL"] = a.generator_url;
    arr.push_back(std::move(j));
  }
  return arr;
}

Result<NotifyConfig> ParseNotifyConfig(const Config& config, std::string_view key) {
  NotifyConfig nc;
  nc.meta.external_url = "http://" + HostName() + ":9500";
  nc.meta.group_by = {"alertname"};
  const std::string k(key);
  if (!config.Has(k)) return nc;
  RETURN_IF_ERROR(config.CheckKnownKeys(
      k, {"receiver", "external_url", "group_by", "sinks", "queue_capacity"}));
  ASSIGN_OR_RETURN(nc.meta.receiver, config.GetString(k + ".receiver", nc.meta.receiver));
  ASSIGN_OR_RETURN(nc.meta.external_url,
                   config.GetString(k + ".external_url", nc.meta.external_url));
  if (config.Has(k + ".group_by")) {
    ASSIGN_OR_RETURN(nc.meta.group_by, config.GetStringList(k + ".group_by"));
  }
  ASSIGN_OR_RETURN(int64_t cap, config.GetInt(k + ".queue_capacity", 256));
  if (cap < 1) {
    return InvalidArgument(config.Locate(k + ".queue_capacity") + ": must be at least 1, got " +
                           std::to_string(cap));
  }
  nc.queue_capacity = static_cast<size_t>(cap);
  ASSIGN_OR_RETURN(size_t n, config.ListSize(k + ".sinks"));
  for (size_t i = 0; i < n; ++i) {
    const std::string sk = fmt::format("{}.sinks.{}", k, i);
    SinkConfig s;
    ASSIGN_OR_RETURN(std::string type, config.GetString(sk + ".type", ""));
    if (type == "webhook") {
      s.type = SinkType::kWebhook;
    } else if (type == "alertmanager") {
      s.type = SinkType::kAlertmanager;
    } else if (type == "log") {
      s.type = SinkType::kLog;
    } else if (type == "command") {
      s.type = SinkType::kCommand;
    } else {
      return InvalidArgument(
          fmt::format("{}: {} sink type; use one of webhook, alertmanager, log, command",
                      config.Locate(config.Has(sk + ".type") ? sk + ".type" : sk),
                      type.empty() ? "missing" : "unknown '" + type + "'"));
    }
    std::vector<std::string> known = {"type", "name", "send_resolved"};
    if (s.type == SinkType::kWebhook || s.type == SinkType::kAlertmanager) {
      known.insert(known.end(), {"url", "headers", "timeout", "retries", "retry_backoff"});
      known.push_back(s.type == SinkType::kWebhook ? "max_alerts" : "resend_interval");
    } else if (s.type == SinkType::kCommand) {
      known.insert(known.end(), {"command", "timeout"});
    }
    RETURN_IF_ERROR(config.CheckKnownKeys(sk, known));
    ASSIGN_OR_RETURN(s.name, config.GetString(sk + ".name", fmt::format("{}[{}]", type, i)));
    ASSIGN_OR_RETURN(s.send_resolved, config.GetBool(sk + ".send_resolved", true));
    ASSIGN_OR_RETURN(s.url, config.GetString(sk + ".url", ""));
    ASSIGN_OR_RETURN(std::vector<std::string> hkeys, config.Keys(sk + ".headers"));
    for (const std::string& h : hkeys) {
      ASSIGN_OR_RETURN(std::string v, config.GetString(sk + ".headers." + h, ""));
      s.headers.emplace_back(h, v);
    }
    ASSIGN_OR_RETURN(std::chrono::nanoseconds timeout,
                     config.GetDuration(sk + ".timeout", s.type == SinkType::kCommand
                                                             ? std::chrono::seconds(30)
                                                             : std::chrono::seconds(5)));
    s.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
    ASSIGN_OR_RETURN(int64_t retries, config.GetInt(sk + ".retries", 2));
    if (retries < 0 || retries > 10) {
      return InvalidArgument(fmt::format("{}: retries must be between 0 and 10, got {}",
                                         config.Locate(sk + ".retries"), retries));
    }
    s.retries = static_cast<int>(retries);
    ASSIGN_OR_RETURN(std::chrono::nanoseconds backoff,
                     config.GetDuration(sk + ".retry_backoff", std::chrono::milliseconds(500)));
    s.retry_backoff = std::chrono::duration_cast<std::chrono::milliseconds>(backoff);
    ASSIGN_OR_RETURN(int64_t max_alerts, config.GetInt(sk + ".max_alerts", 0));
    if (max_alerts < 0) {
      return InvalidArgument(fmt::format("{}: max_alerts must be >= 0 (0 = all), got {}",
                                         config.Locate(sk + ".max_alerts"), max_alerts));
    }
    s.max_alerts = static_cast<int>(max_alerts);
    ASSIGN_OR_RETURN(std::chrono::nanoseconds resend,
                     config.GetDuration(sk + ".resend_interval", std::chrono::minutes(1)));
    s.resend_interval = std::chrono::duration_cast<std::chrono::milliseconds>(resend);
    if (s.type == SinkType::kCommand) {
      if (config.IsScalar(sk + ".command")) {
        return InvalidArgument(config.Locate(sk + ".command") +
                               ": expected a list [program, args...] (no shell); for a shell "
                               "pipeline use [sh, -c, '...']");
      }
      ASSIGN_OR_RETURN(s.command, config.GetStringList(sk + ".command"));
    }
    Status valid = ValidateSink(s);
    if (!valid.ok()) return InvalidArgument(config.Locate(sk) + ": " + valid.message());
    nc.sinks.push_back(std::move(s));
  }
  return nc;
}

Result<std::unique_ptr<Sink>> MakeSink(const SinkConfig& sink, const WebhookMeta& meta) {
  SinkConfig s = sink;
  if (s.name.empty()) s.name = SinkTypeName(s.type);
  RETURN_IF_ERROR(ValidateSink(s));
  switch (s.type) {
    case SinkType::kWebhook:
      return std::unique_ptr<Sink>(new WebhookSink(std::move(s), meta));
    case SinkType::kAlertmanager:
      return std::unique_ptr<Sink>(new AlertmanagerSink(std::move(s)));
    case SinkType::kLog:
      return std::unique_ptr<Sink>(new LogSink(std::move(s)));
    case SinkType::kCommand:
      return std::unique_ptr<Sink>(new CommandSink(std::move(s), meta));
  }
  return Internal("MakeSink: unknown sink type");
}

Result<CommandResult> RunCommand(const std::vector<std::string>& argv, std::string_view stdin_text,
                                 const std::vector<std::pair<std::string, std::string>>& env,
                                 std::chrono::milliseconds timeout) {
  if (argv.empty() || argv[0].empty()) return InvalidArgument("RunCommand: empty argv");
  // stdin is a socket so that writing to a child that never reads it gives
  // EPIPE through MSG_NOSIGNAL instead of a SIGPIPE for the whole agent.
  int in_fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in_fds) != 0) {
    return IoError("socketpair", errno);
  }
  int out_fds[2];
  if (::pipe2(out_fds, O_CLOEXEC) != 0) {
    int e = errno;
    ::close(in_fds[0]);
    ::close(in_fds[1]);
    return IoError("pipe2", e);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_fds[1], 0);
  posix_spawn_file_actions_adddup2(&actions, out_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, out_fds[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group (a timeout kills what it started too), an empty
  // signal mask and default SIGPIPE whatever the agent set for itself.
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t empty, defaults;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attr, &empty);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &defaults);

  std::vector<std::string> argv_storage = argv;
  std::vector<char*> cargv;
  for (auto& a : argv_storage) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    std::string_view name = entry.substr(0, entry.find('='));
    bool overridden =
        std::any_of(env.begin(), env.end(), [&](const auto& kv) { return kv.first == name; });
    if (!overridden) env_storage.emplace_back(entry);
  }
  for (const auto& [k, v] : env) env_storage.push_back(k + "=" + v);
  std::vector<char*> cenv;
  for (auto& e : env_storage) cenv.push_back(e.data());
  cenv.push_back(nullptr);

  pid_t pid = 0;
  int rc =
      ::posix_spawnp(&pid, argv_storage[0].c_str(), &actions, &attr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(in_fds[1]);
  ::close(out_fds[1]);
  if (rc != 0) {
    ::close(in_fds[0]);
    ::close(out_fds[0]);
    return Unavailable("cannot run '" + argv[0] + "': " + std::strerror(rc));
  }
  ::fcntl(in_fds[0], F_SETFL, O_NONBLOCK);

  CommandResult res;
  const auto until = std::chrono::steady_clock::now() + timeout;
  size_t written = 0;
  int in_fd = in_fds[0];
  int out_fd = out_fds[0];
  if (stdin_text.empty()) {
    ::close(in_fd);
    in_fd = -1;
  }
  bool exited = false;
  int wstatus = 0;
  char buf[8192];
  while (true) {
    auto left =
        std::chrono::ceil<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      res.timed_out = true;
      break;
    }
    if (!exited) {
      pid_t w = ::waitpid(pid, &wstatus, WNOHANG);
      if (w == pid) exited = true;
    }
    if (out_fd < 0 && exited) break;
    pollfd fds[2];
    int nfds = 0;
    if (out_fd >= 0) fds[nfds++] = {out_fd, POLLIN, 0};
    if (in_fd >= 0) fds[nfds++] = {in_fd, POLLOUT, 0};
    // Short polls: the child may exit while something it started keeps the
    // output pipe open; the exit is what ends the run.
    int wait_ms = static_cast<int>(std::min<int64_t>(left.count(), exited ? 0 : 20));
    int n = nfds > 0 ? ::poll(fds, nfds, wait_ms) : (::usleep(wait_ms * 1000), 0);
    if (n < 0 && errno != EINTR) break;
    bool drained = true;
    for (int i = 0; i < nfds && n > 0; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == out_fd) {
        ssize_t got = ::read(out_fd, buf, sizeof buf);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (got <= 0) {
          ::close(out_fd);
          out_fd = -1;
          continue;
        }
        drained = false;
        if (res.output.size() < kMaxCommandOutput) {
          res.output.append(
              buf, std::min(static_cast<size_t>(got), kMaxCommandOutput - res.output.size()));
        }
      } else if (fds[i].fd == in_fd) {
        ssize_t sent =
            ::send(in_fd, stdin_text.data() + written, stdin_text.size() - written, MSG_NOSIGNAL);
        if (sent < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (sent > 0) written += static_cast<size_t>(sent);
        if (sent < 0 || written == stdin_text.size()) {
          ::close(in_fd);  // EOF for the child (or it stopped reading)
          in_fd = -1;
        }
      }
    }
    if (exited && (n <= 0 || drained)) break;
  }
  if (in_fd >= 0) ::close(in_fd);
  if (out_fd >= 0) ::close(out_fd);
  if (res.timed_out) {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
  }
  if (!exited) {
    while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
  }
  res.exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  return res;
}

// ---------------------------------------------------------------- Notifier

struct Notifier::State {
  const Clock* clock;
  std::vector<std::unique_ptr<Sink>> sinks;
  size_t capacity;
  std::mutex mu;
  std::condition_variable cv;       // work arrived or stop
  std::condition_variable idle_cv;  // queue drained
  std::deque<std::vector<Alert>> queue;
  bool busy = false;
  bool stop = false;
  Stats stats;
  std::thread thread;

  // How often the loop wakes for Resend: the shortest resend interval, at
  // most a second so that a due resend is never late by much; 0 = never.
  std::chrono::milliseconds wake{0};

  int64_t WallMs() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               clock->WallNow().time_since_epoch())
        .count();
  }

  void Loop() {
    std::unique_lock<std::mutex> lock(mu);
    while (true) {
      auto ready = [&] { return stop || !queue.empty(); };
      bool work = true;
      if (wake.count() > 0) {
        work = cv.wait_for(lock, wake, ready);
      } else {
        cv.wait(lock, ready);
      }
      if (stop) break;
      busy = true;
      std::vector<Alert> batch;
      if (work) {
        batch = std::move(queue.front());
        queue.pop_front();
      }
      lock.unlock();
      const int64_t now_ms = WallMs();
      uint64_t ok = 0, bad = 0;
      for (const auto& sink : sinks) {
        if (work) {
          Status s = sink->Send(batch, now_ms);
          if (s.ok()) {
            ++ok;
          } else {
            ++bad;
            log::warn("notify: {}", s.message());
          }
        }
        // Also under steady traffic: the sink decides whether a resend is due.
        if (sink->resend_interval().count() > 0) {
          Status s = sink->Resend(now_ms);
          if (!s.ok()) log::warn("notify: resending: {}", s.message());
        }
      }
      lock.lock();
      if (work) {
        stats.sent += ok;
        stats.failed += bad;
      }
      busy = false;
      if (queue.empty()) idle_cv.notify_all();
    }
    busy = false;
    idle_cv.notify_all();
  }
};

Result<std::unique_ptr<Notifier>> Notifier::Create(const NotifyConfig& config, const Clock& clock,
                                                   std::vector<std::unique_ptr<Sink>> extra) {
  std::vector<std::unique_ptr<Sink>> sinks;
  for (const SinkConfig& s : config.sinks) {
    ASSIGN_OR_RETURN(std::unique_ptr<Sink> sink, MakeSink(s, config.meta));
    sinks.push_back(std::move(sink));
  }
  for (auto& sink : extra) sinks.push_back(std::move(sink));
  return std::make_unique<Notifier>(std::move(sinks), config.queue_capacity, clock);
}

Notifier::Notifier(std::vector<std::unique_ptr<Sink>> sinks, size_t queue_capacity,
                   const Clock& clock)
    : state_(std::make_unique<State>()) {
  state_->clock = &clock;
  state_->sinks = std::move(sinks);
  state_->capacity = std::max<size_t>(1, queue_capacity);
  for (const auto& sink : state_->sinks) {
    std::chrono::milliseconds r = sink->resend_interval();
    if (r.count() <= 0) continue;
    r = std::min<std::chrono::milliseconds>(r, std::chrono::seconds(1));
    if (state_->wake.count() == 0 || r < state_->wake) state_->wake = r;
  }
  State* st = state_.get();
  state_->thread = std::thread([st] { st->Loop(); });
}

Notifier::~Notifier() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
  }
  state_->cv.notify_all();
  state_->thread.join();
}

void Notifier::Notify(std::vector<Alert> alerts) {
  if (alerts.empty()) return;
  bool dropped = false;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->stop) return;
    ++state_->stats.batches;
    if (state_->queue.size() >= state_->capacity) {
      state_->queue.pop_front();
      ++state_->stats.dropped;
      dropped = true;
    }
    state_->queue.push_back(std::move(alerts));
  }
  state_->cv.notify_one();
  if (dropped) {
    log::warn("notify: queue full ({} batches): dropped the oldest batch; are the sinks reachable?",
              state_->capacity);
  }
}

bool Notifier::Flush(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(state_->mu);
  return state_->idle_cv.wait_for(
      lock, timeout, [&] { return state_->stop || (state_->queue.empty() && !state_->busy); });
}

Notifier::Stats Notifier::stats() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->stats;
}

size_t Notifier::sink_count() const { return state_->sinks.size(); }

}  // namespace gantry::alerting
