// The `vmss` actuator: an Azure VM scale set over ARM REST (api-version
// 2024-07-01 by default).
//
//   Read       GET  .../virtualMachineScaleSets/{n}                    sku.capacity, ETag
//              GET  .../virtualMachineScaleSets/{n}/virtualMachines
//                   ?$expand=instanceView                              instances, nextLink pages
//   ScaleOut   PATCH .../virtualMachineScaleSets/{n}  {"sku":{"capacity":N}}  If-Match: <ETag>
//   ScaleIn    POST  .../virtualMachineScaleSets/{n}/delete[&forceDeletion=true]
//                    {"instanceIds":[...]}
//
// Long-running answers (201/202, or 200 with Azure-AsyncOperation) are polled
// until they finish, as Microsoft's SDKs do: the Azure-AsyncOperation URL
// (body "status": InProgress -> Succeeded | Failed | Canceled) or else the
// Location URL (202 while running). Throttling (429) and 503 are retried after
// Retry-After, a bounded number of times, on the injected Clock.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gantry/autoscale/actuator.h"
#include "gantry/core/https_client.h"
#include "gantry/core/json.h"
#include "gantry/core/log.h"
#include "gantry/core/text.h"
#include "gantry/security/azure_credential.h"

namespace gantry::autoscale {
namespace {

using namespace std::chrono_literals;

// 429/503 are retried this many times before the caller is told to hold.
constexpr int kMaxThrottleRetries = 4;
// One Retry-After is honoured up to this; a longer one is handed to the
// controller (ResourceExhausted naming it) instead of blocking its thread.
constexpr std::chrono::seconds kMaxRetryAfter = 60s;
constexpr std::chrono::seconds kDefaultRetryAfter = 5s;
// Between polls of an operation that gave no Retry-After.
constexpr std::chrono::seconds kDefaultPollInterval = 10s;

std::string TrimSlash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

// "2024-05-01T10:20:30.1234567+00:00" / "...Z" (ARM's timeCreated) as a time
// point; nullopt when it does not parse.
std::optional<std::chrono::system_clock::time_point> ParseIsoTime(const std::string& s) {
  std::tm tm{};
  int consumed = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  time_t t = timegm(&tm);
  std::string_view rest = std::string_view(s).substr(static_cast<size_t>(consumed));
  if (!rest.empty() && rest.front() == '.') {
    rest.remove_prefix(1);
    while (!rest.empty() && rest.front() >= '0' && rest.front() <= '9') rest.remove_prefix(1);
  }
  int sign = 0, oh = 0, om = 0;
  if (rest.size() >= 6 && (rest[0] == '+' || rest[0] == '-') &&
      std::sscanf(std::string(rest.substr(1)).c_str(), "%2d:%2d", &oh, &om) == 2) {
    sign = rest[0] == '+' ? 1 : -1;
  }
  t -= sign * (oh * 3600 + om * 60);
  return std::chrono::system_clock::from_time_t(t);
}

// ARM's error body {"error":{"code":"...","message":"..."}} as
// `code: "message"`, else the first 300 bytes of the body.
std::string ArmError(const std::string& body) {
  Result<Json> j = ParseJson(body, "ARM error");
  if (j.ok() && j->is_object()) {
    const Json* e = j->contains("error") && (*j)["error"].is_object() ? &(*j)["error"] : &*j;
    std::string code =
        e->contains("code") && (*e)["code"].is_string() ? (*e)["code"].get<std::string>() : "";
    std::string message = e->contains("message") && (*e)["message"].is_string()
                              ? (*e)["message"].get<std::string>()
                              : "";
    if (!code.empty() || !message.empty()) return code + ": \"" + message + "\"";
  }
  std::string s = body.substr(0, 300);
  return s.empty() ? "(no body)" : s;
}

// Retry-After in seconds or as an HTTP date.
std::optional<std::chrono::seconds> RetryAfter(const http::Response& r, const Clock& clock) {
  const std::string* v = r.FindHeader("Retry-After");
  if (v == nullptr || v->empty()) return std::nullopt;
  int64_t secs = 0;
  if (ParseNumber(std::string_view(*v), &secs))
    return std::chrono::seconds(std::max<int64_t>(0, secs));
  Result<std::chrono::system_clock::time_point> at = ParseRfc1123Date(*v);
  if (!at.ok()) return std::nullopt;
  auto d = std::chrono::duration_cast<std::chrono::seconds>(*at - clock.WallNow());
  return std::max(d, std::chrono::seconds(0));
}

bool Busy(const std::string& provisioning_state) {
  static const std::set<std::string> kBusy = {"Creating",     "Updating",  "Deleting",
                                              "Migrating",    "Starting",  "Stopping",
                                              "Deallocating", "Reimaging", "Resizing"};
  return kBusy.contains(provisioning_state);
}

class VmssActuator : public Actuator {
 public:
  VmssActuator(VmssConfig c, const Clock& clock, std::unique_ptr<security::TokenSource> tokens)
      : c_(std::move(c)), clock_(clock), tokens_(std::move(tokens)) {
    c_.endpoint = TrimSlash(c_.endpoint);
    base_ = c_.endpoint + "/subscriptions/" + http::PercentEncode(c_.subscription) +
            "/resourceGroups/" + http::PercentEncode(c_.resource_group) +
            "/providers/Microsoft.Compute/virtualMachineScaleSets/" + http::PercentEncode(c_.name);
    what_ = "scale set " + c_.name + " (resource group " + c_.resource_group + ", subscription " +
            c_.subscription + ")";
  }

  std::string_view kind() const override { return "vmss"; }
  bool CanChooseVictims() const override { return true; }

  Result<Capacity> Read() override {
    ASSIGN_OR_RETURN(Json vmss, GetScaleSet());
    Capacity cap;
    cap.target = vmss.contains("sku") && vmss["sku"].contains("capacity") &&
                         vmss["sku"]["capacity"].is_number_integer()
                     ? vmss["sku"]["capacity"].get<int64_t>()
                     : 0;
    std::string state = ProvisioningState(vmss);
    cap.busy = Busy(state);

    std::string url = base_ + "/virtualMachines?%24expand=instanceView&api-version=" +
                      http::PercentEncode(c_.api_version);
    std::set<std::string> seen_pages;
    while (!url.empty()) {
      if (!seen_pages.insert(url).second) {
        return DataLoss("listing the instances of " + what_ + ": nextLink " + url +
                        " was already read (a loop in paging)");
      }
      ASSIGN_OR_RETURN(http::Response resp, Exchange("GET", url, "", {}, "listing instances"));
      if (resp.status != 200) return HttpError(resp, "listing the instances of " + what_);
      ASSIGN_OR_RETURN(Json page, ParseJson(resp.body, "instance list of " + what_));
      if (page.contains("value") && page["value"].is_array()) {
        for (const Json& vm : page["value"]) cap.instances.push_back(ToInstance(vm));
      }
      url.clear();
      if (page.contains("nextLink") && page["nextLink"].is_string()) {
        url = page["nextLink"].get<std::string>();
        RETURN_IF_ERROR(SameOrigin(url, "nextLink"));
      }
    }
    last_instances_.clear();
    for (const Instance& i : cap.instances) {
      if (i.ready) ++cap.ready;
      if (i.state == "Creating" || i.state == "Deleting" || i.state == "Updating") cap.busy = true;
      last_instances_[i.id] = i.protected_from_scale_in;
    }
    return cap;
  }

  Status ScaleOut(int64_t desired) override {
    if (desired < 0) return InvalidArgument("scale out " + what_ + ": negative capacity");
    if (etag_.empty()) RETURN_IF_ERROR(GetScaleSet().status());
    std::string body = Json{{"sku", {{"capacity", desired}}}}.dump();
    std::string url = base_ + "?api-version=" + http::PercentEncode(c_.api_version);
    for (int attempt = 0;; ++attempt) {
      std::vector<http::Header> extra;
      if (!etag_.empty()) extra.emplace_back("If-Match", etag_);
      ASSIGN_OR_RETURN(http::Response resp,
                       Exchange("PATCH", url, body, extra, "setting the capacity"));
      if (resp.status == 412 && attempt == 0) {
        // Someone else changed the scale set since our Read: take the new
        // ETag and try once more (the count is absolute, so this is safe).
        log::info("autoscale: {} changed since it was read (ETag {}); reading it again", what_,
                  etag_);
        RETURN_IF_ERROR(GetScaleSet().status());
        continue;
      }
      if (resp.status == 412) {
        return FailedPrecondition("scale out " + what_ + " to " + std::to_string(desired) +
                                  ": the scale set changed again while scaling (If-Match " + etag_ +
                                  " refused twice: HTTP 412 " + ArmError(resp.body) +
                                  "); another actor is changing it; the next interval retries");
      }
      if (resp.status != 200 && resp.status != 201 && resp.status != 202) {
        return HttpError(resp, "scale out " + what_ + " to " + std::to_string(desired));
      }
      etag_.clear();  // the PATCH changed it
      return WaitForOperation(resp, "scale out " + what_ + " to " + std::to_string(desired));
    }
  }

  Status ScaleIn(int64_t desired, const std::vector<std::string>& victims) override {
    (void)desired;  // the new count is the old one minus the victims
    if (victims.empty()) {
      return InvalidArgument("scale in " + what_ +
                             ": no instance ids given (the vmss actuator "
                             "deletes chosen instances)");
    }
    for (const std::string& id : victims) {
      auto it = last_instances_.find(id);
      if (it != last_instances_.end() && it->second) {
        return FailedPrecondition("scale in " + what_ + ": instance " + id +
                                  " is protected from scale-in (protectionPolicy."
                                  "protectFromScaleIn); choose another or lift the protection");
      }
    }
    std::string url = base_ + "/delete?api-version=" + http::PercentEncode(c_.api_version);
    if (c_.force_deletion) url += "&forceDeletion=true";
    std::string body = Json{{"instanceIds", victims}}.dump();
    std::string what = "scale in " + what_ + " (delete instances " + Join(victims, ", ") + ")";
    ASSIGN_OR_RETURN(http::Response resp, Exchange("POST", url, body, {}, "deleting instances"));
    if (resp.status != 200 && resp.status != 202 && resp.status != 204) {
      return HttpError(resp, what);
    }
    etag_.clear();
    return WaitForOperation(resp, what);
  }

 private:
  std::string ProvisioningState(const Json& j) const {
    if (j.contains("properties") && j["properties"].is_object() &&
        j["properties"].contains("provisioningState") &&
        j["properties"]["provisioningState"].is_string()) {
      return j["properties"]["provisioningState"].get<std::string>();
    }
    return "";
  }

  Instance ToInstance(const Json& vm) const {
    Instance i;
    if (vm.contains("instanceId") && vm["instanceId"].is_string()) {
      i.id = vm["instanceId"].get<std::string>();
    }
    const Json empty = Json::object();
    const Json& p =
        vm.contains("properties") && vm["properties"].is_object() ? vm["properties"] : empty;
    if (p.contains("osProfile") && p["osProfile"].contains("computerName") &&
        p["osProfile"]["computerName"].is_string()) {
      i.name = p["osProfile"]["computerName"].get<std::string>();
    }
    if (p.contains("protectionPolicy") && p["protectionPolicy"].contains("protectFromScaleIn") &&
        p["protectionPolicy"]["protectFromScaleIn"].is_boolean()) {
      i.protected_from_scale_in = p["protectionPolicy"]["protectFromScaleIn"].get<bool>();
    }
    std::string provisioning = ProvisioningState(vm);
    std::string power;  // "running", "deallocated", ... from "PowerState/running"
    if (p.contains("instanceView") && p["instanceView"].contains("statuses") &&
        p["instanceView"]["statuses"].is_array()) {
      for (const Json& s : p["instanceView"]["statuses"]) {
        if (s.contains("code") && s["code"].is_string()) {
          std::string code = s["code"].get<std::string>();
          if (code.starts_with("PowerState/")) power = code.substr(11);
        }
      }
    }
    if (p.contains("timeCreated") && p["timeCreated"].is_string()) {
      if (auto t = ParseIsoTime(p["timeCreated"].get<std::string>())) i.created = *t;
    }
    i.ready = provisioning == "Succeeded" && power == "running";
    if (provisioning != "Succeeded" && !provisioning.empty()) {
      i.state = provisioning;
    } else if (!power.empty()) {
      i.state = AsciiUpper(power.substr(0, 1)) + power.substr(1);
    } else {
      i.state = provisioning;
    }
    if (i.name.empty()) i.name = vm.value("name", std::string());
    return i;
  }

  // GET the scale set; remembers its ETag for the next PATCH.
  Result<Json> GetScaleSet() {
    std::string url = base_ + "?api-version=" + http::PercentEncode(c_.api_version);
    ASSIGN_OR_RETURN(http::Response resp, Exchange("GET", url, "", {}, "reading"));
    if (resp.status != 200) return HttpError(resp, "reading " + what_);
    ASSIGN_OR_RETURN(Json j, ParseJson(resp.body, "scale set " + c_.name));
    if (!j.is_object()) return DataLoss("reading " + what_ + ": the answer is not a JSON object");
    const std::string* etag = resp.FindHeader("ETag");
    if (etag != nullptr) {
      etag_ = *etag;
    } else if (j.contains("etag") && j["etag"].is_string()) {
      etag_ = j["etag"].get<std::string>();
    } else {
      etag_.clear();
    }
    return j;
  }

  // Refuses to send the token anywhere but the configured endpoint.
  Status SameOrigin(const std::string& url, std::string_view what) const {
    if (url == c_.endpoint || url.starts_with(c_.endpoint + "/") ||
        url.starts_with(c_.endpoint + "?")) {
      return Status();
    }
    return DataLoss(std::string(what) + " of " + what_ + " points to " + url + ", outside " +
                    c_.endpoint + "; not followed (the bearer token would go there)");
  }

  // One exchange with a fresh token; 429 and 503 retried after Retry-After.
  Result<http::Response> Exchange(const std::string& method, const std::string& url,
                                  const std::string& body, const std::vector<http::Header>& extra,
                                  std::string_view doing) {
    for (int retry = 0;; ++retry) {
      Result<std::string> token = tokens_->Token();
      if (!token.ok()) {
        return Status(token.status().code(),
                      std::string(doing) + " " + what_ + ": " + token.status().message());
      }
      http::Request req;
      req.method = method;
      req.url = url;
      req.deadline = c_.timeout;
      req.headers = {{"Authorization", "Bearer " + *token}, {"Accept", "application/json"}};
      if (!body.empty() || method == "POST" || method == "PATCH") {
        req.headers.emplace_back("Content-Type", "application/json");
        req.body = body;
      }
      for (const http::Header& h : extra) req.headers.push_back(h);
      ASSIGN_OR_RETURN(http::Response resp, http::SendTls(req, {}));
      if (resp.status != 429 && resp.status != 503) return resp;
      std::chrono::seconds wait = RetryAfter(resp, clock_).value_or(kDefaultRetryAfter);
      if (retry >= kMaxThrottleRetries || wait > kMaxRetryAfter) {
        return ResourceExhausted(std::string(doing) + " " + what_ + ": ARM answered HTTP " +
                                 std::to_string(resp.status) + " " + ArmError(resp.body) +
                                 " after " + std::to_string(retry + 1) + " attempts; retry after " +
                                 std::to_string(wait.count()) + " s");
      }
      log::info("autoscale: {} {}: HTTP {}, retrying in {} s", doing, what_, resp.status,
                wait.count());
      clock_.SleepFor(wait);
    }
  }

  Status HttpError(const http::Response& resp, const std::string& what) const {
    std::string msg = what + ": HTTP " + std::to_string(resp.status) + " " + ArmError(resp.body);
    if (resp.status == 401 || resp.status == 403) {
      return PermissionDenied(msg + "; " + tokens_->Describe() +
                              " needs a role on the scale set such as Virtual Machine "
                              "Contributor");
    }
    if (resp.status == 404) return NotFound(msg + "; check subscription, resource group and name");
    if (resp.status == 409) return FailedPrecondition(msg + " (another operation is running)");
    if (resp.status >= 500) return Unavailable(msg);
    return FailedPrecondition(msg);
  }

  // Polls a long-running operation started by `started` until it finishes.
  Status WaitForOperation(const http::Response& started, const std::string& what) {
    const std::string* async = started.FindHeader("Azure-AsyncOperation");
    const std::string* location = started.FindHeader("Location");
    if (async == nullptr && (started.status != 202 || location == nullptr)) {
      return Status();  // done (200 without an operation, 204)
    }
    std::string url = async != nullptr ? *async : *location;
    RETURN_IF_ERROR(SameOrigin(url, async != nullptr ? "Azure-AsyncOperation" : "Location"));
    std::chrono::nanoseconds deadline = clock_.Now() + c_.operation_timeout;
    std::chrono::seconds wait =
        std::max(RetryAfter(started, clock_).value_or(kDefaultPollInterval), 1s);
    for (;;) {
      if (clock_.Now() + wait > deadline) {
        return DeadlineExceeded(what + ": not finished after " +
                                std::to_string(c_.operation_timeout.count() / 1000) +
                                " s (operation " + url + "); the next read shows where it stands");
      }
      clock_.SleepFor(wait);
      ASSIGN_OR_RETURN(http::Response poll, Exchange("GET", url, "", {}, "polling"));
      // At least a second between polls, whatever Retry-After says, so a
      // "Retry-After: 0" cannot turn polling into a loop against ARM's limits.
      wait = std::max(RetryAfter(poll, clock_).value_or(kDefaultPollInterval),
                      std::chrono::seconds(1));
      if (async != nullptr) {
        if (poll.status != 200) return HttpError(poll, what + " (polling " + url + ")");
        ASSIGN_OR_RETURN(Json op, ParseJson(poll.body, "operation " + url));
        std::string status = op.is_object() && op.contains("status") && op["status"].is_string()
                                 ? op["status"].get<std::string>()
                                 : "";
        if (status == "Succeeded") return Status();
        if (status == "Failed" || status == "Canceled") {
          return Unavailable(what + ": the operation " +
                             (status == "Failed" ? "failed" : "was canceled") + ": " +
                             ArmError(poll.body));
        }
        continue;  // InProgress (or anything else non-terminal)
      }
      if (poll.status == 202) continue;
      if (poll.status == 200 || poll.status == 201 || poll.status == 204) return Status();
      return HttpError(poll, what + " (polling " + url + ")");
    }
  }

  VmssConfig c_;
  const Clock& clock_;
  std::unique_ptr<security::TokenSource> tokens_;
  std::string base_, what_;
  std::string etag_;                            // from the last GET of the scale set
  std::map<std::string, bool> last_instances_;  // id -> protected, from the last Read
};

}  // namespace

Result<std::unique_ptr<Actuator>> NewVmssActuator(const VmssConfig& config, const Clock& clock) {
  if (config.subscription.empty() || config.resource_group.empty() || config.name.empty()) {
    return InvalidArgument("vmss actuator: subscription, resource_group and name are required");
  }
  if (!config.endpoint.starts_with("https://") && !config.endpoint.starts_with("http://")) {
    return InvalidArgument("vmss actuator: endpoint '" + config.endpoint +
                           "' must be an https:// URL");
  }
  if (config.timeout.count() <= 0 || config.operation_timeout.count() <= 0) {
    return InvalidArgument("vmss actuator: timeout and operation_timeout must be positive");
  }
  security::AzureCredentialOptions o = config.credential;
  // The token's audience is ARM itself (sovereign clouds have their own).
  o.resource = config.endpoint.starts_with("https://") ? TrimSlash(config.endpoint)
                                                       : "https://management.azure.com";
  o.timeout = config.timeout;
  ASSIGN_OR_RETURN(std::unique_ptr<security::TokenSource> tokens,
                   security::NewAzureTokenSource(o, clock));
  return std::unique_ptr<Actuator>(new VmssActuator(config, clock, std::move(tokens)));
}

}  // namespace gantry::autoscale
