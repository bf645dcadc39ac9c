// Azure bearer tokens: IMDS managed identity, service principal client
// credentials (Entra ID v2 endpoint), or an environment variable.
#include "gantry/security/azure_credential.h"

#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>

#include "gantry/core/https_client.h"
#include "gantry/core/json.h"

namespace gantry::security {
namespace {

using namespace std::chrono_literals;

// Refreshed this long before the issuer's expiry, so that a token handed out
// stays good through a slow ARM operation.
constexpr std::chrono::seconds kRefreshMargin = 5min;

std::string TrimSlash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

// A number that the issuer may send as a JSON number or a string (IMDS sends
// "3599", Entra ID 3599).
std::optional<int64_t> Seconds(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_number()) return static_cast<int64_t>(it->get<double>());
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && end != nullptr && *end == '\0') return v;
  }
  return std::nullopt;
}

// "invalid_client: AADSTS7000215: Invalid client secret provided..." from an
// OAuth error body, or its first 300 bytes.
std::string ErrorText(const std::string& body) {
  Result<Json> j = ParseJson(body, "token error");
  if (j.ok() && j->is_object()) {
    std::string out;
    if (auto e = j->find("error"); e != j->end() && e->is_string()) out = e->get<std::string>();
    if (auto d = j->find("error_description"); d != j->end() && d->is_string()) {
      std::string desc = d->get<std::string>();
      // Entra ID appends trace ids and timestamps on new lines; the first is the reason.
      if (size_t nl = desc.find_first_of("\r\n"); nl != std::string::npos) desc.resize(nl);
      out += (out.empty() ? "" : ": ") + desc;
    }
    if (!out.empty()) return out;
  }
  std::string s = body.substr(0, 300);
  return s.empty() ? "(empty body)" : s;
}

class EnvTokenSource : public TokenSource {
 public:
  explicit EnvTokenSource(std::string var) : var_(std::move(var)) {}
  Result<std::string> Token() override {
    const char* v = std::getenv(var_.c_str());
    if (v == nullptr || *v == '\0') {
      return FailedPrecondition("Azure token: environment variable " + var_ +
                                " is not set; set it to a bearer token (az account "
                                "get-access-token --query accessToken -o tsv)");
    }
    return std::string(v);
  }
  std::string Describe() const override { return "token from $" + var_; }

 private:
  std::string var_;
};

// IMDS and Entra ID: fetch, cache, refresh before expiry.
class FetchingTokenSource : public TokenSource {
 public:
  FetchingTokenSource(AzureCredentialOptions o, const Clock& clock)
      : o_(std::move(o)), clock_(clock) {}

  Result<std::string> Token() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!token_.empty() && clock_.Now() < refresh_at_) return token_;
    ASSIGN_OR_RETURN(http::Request req, BuildRequest());
    std::string where = Describe() + " at " + Endpoint();
    Result<http::Response> resp = http::SendTls(req, {});
    if (!resp.ok()) {
      return Status(resp.status().code(),
                    "Azure token for " + where + ": " + resp.status().message());
    }
    if (resp->status != 200) {
      std::string msg = "Azure token for " + where + ": HTTP " + std::to_string(resp->status) +
                        ": " + ErrorText(resp->body);
      // IMDS answers 410 and 503 while the VM's identity is still being set up.
      if (resp->status == 429 || resp->status == 410 || resp->status >= 500) {
        return Unavailable(msg + " (transient; retried next time)");
      }
      return PermissionDenied(msg + Hint());
    }
    Result<Json> j = ParseJson(resp->body, "token response of " + Endpoint());
    if (!j.ok() || !j->is_object() || !j->contains("access_token") ||
        !(*j)["access_token"].is_string()) {
      return DataLoss("Azure token for " + where +
                      ": the answer has no access_token string (not a token endpoint?)");
    }
    token_ = (*j)["access_token"].get<std::string>();
    std::chrono::nanoseconds now = clock_.Now();
    if (std::optional<int64_t> in = Seconds(*j, "expires_in")) {
      refresh_at_ = now + std::chrono::seconds(*in) - kRefreshMargin;
    } else if (std::optional<int64_t> on = Seconds(*j, "expires_on")) {
      auto wall =
          std::chrono::duration_cast<std::chrono::seconds>(clock_.WallNow().time_since_epoch())
              .count();
      refresh_at_ = now + std::chrono::seconds(*on - wall) - kRefreshMargin;
    } else {
      refresh_at_ = now;  // no lifetime given: not cached
    }
    return token_;
  }

  std::string Describe() const override {
    if (o_.kind == AzureIdentity::kManagedIdentity) {
      return o_.client_id.empty() ? "managed identity (system-assigned)"
                                  : "managed identity (client_id " + o_.client_id + ")";
    }
    return "service principal " + o_.client_id + " in tenant " + o_.tenant_id;
  }

 private:
  std::string Endpoint() const {
    if (o_.kind == AzureIdentity::kManagedIdentity) {
      return TrimSlash(o_.imds_endpoint) + "/metadata/identity/oauth2/token";
    }
    return TrimSlash(o_.authority) + "/" + http::PercentEncode(o_.tenant_id) + "/oauth2/v2.0/token";
  }

  std::string Hint() const {
    if (o_.kind == AzureIdentity::kManagedIdentity) {
      return "; check that the VM has this identity assigned and that it has a role on the "
             "resource";
    }
    return "; check the client id, tenant and the secret in $" + o_.client_secret_env;
  }

  Result<http::Request> BuildRequest() const {
    http::Request req;
    req.deadline = o_.timeout;
    req.max_body_bytes = 1 << 20;
    if (o_.kind == AzureIdentity::kManagedIdentity) {
      req.url = Endpoint() + "?api-version=2018-02-01&resource=" + http::PercentEncode(o_.resource);
      if (!o_.client_id.empty()) req.url += "&client_id=" + http::PercentEncode(o_.client_id);
      req.headers = {{"Metadata", "true"}};
      return req;
    }
    const char* secret = std::getenv(o_.client_secret_env.c_str());
    if (secret == nullptr || *secret == '\0') {
      return FailedPrecondition("Azure token for " + Describe() + ": environment variable " +
                                o_.client_secret_env + " (the client secret) is not set");
    }
    req.method = "POST";
    req.url = Endpoint();
    req.headers = {{"Content-Type", "application/x-www-form-urlencoded"}};
    req.body = "grant_type=client_credentials&client_id=" + http::PercentEncode(o_.client_id) +
               "&client_secret=" + http::PercentEncode(secret) +
               "&scope=" + http::PercentEncode(TrimSlash(o_.resource) + "/.default");
    return req;
  }

  const AzureCredentialOptions o_;
  const Clock& clock_;
  std::mutex mu_;
  std::string token_;
  std::chrono::nanoseconds refresh_at_{0};
};

}  // namespace

Result<std::unique_ptr<TokenSource>> NewAzureTokenSource(const AzureCredentialOptions& options,
                                                         const Clock& clock) {
  switch (options.kind) {
    case AzureIdentity::kEnvironmentToken:
      if (options.token_env.empty()) {
        return InvalidArgument(
            "Azure credential: token_env (the variable holding the token) "
            "is empty");
      }
      return std::unique_ptr<TokenSource>(new EnvTokenSource(options.token_env));
    case AzureIdentity::kServicePrincipal:
      if (options.client_id.empty() || options.tenant_id.empty() ||
          options.client_secret_env.empty()) {
        return InvalidArgument(
            "Azure credential: a service principal needs client_id, tenant_id and "
            "client_secret_env (the variable holding the secret)");
      }
      break;
    case AzureIdentity::kManagedIdentity:
      break;
  }
  if (options.resource.empty()) {
    return InvalidArgument(
        "Azure credential: the resource (e.g. https://management.azure.com) "
        "is empty");
  }
  if (options.timeout.count() <= 0) {
    return InvalidArgument("Azure credential: the token request timeout must be positive");
  }
  return std::unique_ptr<TokenSource>(new FetchingTokenSource(options, clock));
}

}  // namespace gantry::security
