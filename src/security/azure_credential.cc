// Azure bearer tokens: the default credential chain (environment service
// principal, workload identity, managed identity, Azure CLI) and each of its
// links on its own, plus a token from an environment variable.
#include "gantry/security/azure_credential.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gantry/core/https_client.h"
#include "gantry/core/json.h"
#include "gantry/core/subprocess.h"
#include "gantry/security/crypto.h"
#include "openssl_util.h"

namespace gantry::security {
namespace {

using namespace std::chrono_literals;
using Nanos = std::chrono::nanoseconds;
using Millis = std::chrono::milliseconds;

// Refreshed this long before the issuer's expiry, so that a token handed out
// stays good through a slow ARM operation or a large upload.
constexpr std::chrono::seconds kRefreshMargin = 5min;
// After a failed refresh with a still-valid token cached, the next try waits
// this long, so that callers asking often do not each pay the retries.
constexpr std::chrono::seconds kRetryRefreshAfter = 30s;
constexpr Millis kFirstBackoff = 500ms;
constexpr Millis kMaxBackoff = 8s;
// A client assertion is good for this long (Entra ID accepts up to 10 minutes
// of lifetime and only uses it once).
constexpr std::chrono::seconds kAssertionLifetime = 10min;
constexpr const char* kJwtBearer = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

std::string TrimSlash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

std::string Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

// `text` with every occurrence of `secret` replaced: a server may echo what
// it was sent, and its words end up in our messages.
std::string Redact(std::string text, std::string_view secret) {
  if (secret.size() < 4) return text;
  for (size_t p = text.find(secret); p != std::string::npos; p = text.find(secret, p + 3)) {
    text.replace(p, secret.size(), "***");
  }
  return text;
}

int64_t UnixNow(const Clock& clock) {
  return std::chrono::duration_cast<std::chrono::seconds>(clock.WallNow().time_since_epoch())
      .count();
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

// A token and when it expires on the source's monotonic clock (none: the
// issuer did not say, and it is not cached).
struct Fetched {
  std::string token;
  std::optional<Nanos> expires_at;
};

// Fetches on demand, caches, refreshes before expiry with jitter, and falls
// back to the cached token while it is valid when a refresh fails.
class CachingSource : public TokenSource {
 public:
  CachingSource(const Clock& clock, Millis jitter)
      : clock_(clock), jitter_(jitter), rng_(std::random_device{}()) {}

  Result<std::string> Token() final {
    std::lock_guard<std::mutex> lock(mu_);
    Nanos now = clock_.Now();
    if (!token_.empty() && now < refresh_at_) return token_;
    Result<Fetched> f = Fetch();
    now = clock_.Now();
    if (!f.ok()) {
      if (!token_.empty() && expires_at_ && now < *expires_at_) {
        refresh_at_ = std::min<Nanos>(now + kRetryRefreshAfter, *expires_at_);
        return token_;
      }
      token_.clear();
      return f.status();
    }
    token_ = std::move(f->token);
    expires_at_ = f->expires_at;
    refresh_at_ = expires_at_ ? *expires_at_ - kRefreshMargin - Jitter() : now;
    return token_;
  }

 protected:
  // One fetch (with its retries); called with the cache's lock held.
  virtual Result<Fetched> Fetch() = 0;
  const Clock& clock_;

 private:
  // Uniform in [0, jitter): never a full minute, so that a token refreshes
  // strictly later than 6 minutes before expiry with the default.
  Nanos Jitter() {
    auto range = std::chrono::duration_cast<Nanos>(jitter_).count();
    if (range <= 0) return Nanos(0);
    return Nanos(std::uniform_int_distribution<int64_t>(0, range - 1)(rng_));
  }

  const Millis jitter_;
  std::mutex mu_;
  std::mt19937_64 rng_;
  std::string token_;
  std::optional<Nanos> expires_at_;
  Nanos refresh_at_{0};
};

struct RetryPolicy {
  int max_retries = 4;
  Millis budget{30'000};
  Millis timeout{10'000};
};

bool Transient(int status) { return status == 429 || status == 410 || status >= 500; }

// Sends `req`, retrying while the endpoint answers 429, 410 or 5xx: waits
// Retry-After (seconds) when given, else 500 ms doubling to 8 s; stops after
// max_retries or when the next wait would exceed the budget. Transport errors
// are not retried: an endpoint that is not there stays not there, and each
// try would cost a whole deadline. `attempts` counts the requests sent.
Result<http::Response> SendWithRetries(const http::Request& req, const RetryPolicy& policy,
                                       const Clock& clock, int* attempts) {
  Millis waited{0};
  Millis backoff = kFirstBackoff;
  for (*attempts = 1;; ++*attempts) {
    Result<http::Response> resp = http::SendTls(req, {});
    if (!resp.ok() || !Transient(resp->status) || *attempts > policy.max_retries) return resp;
    Millis wait = backoff;
    if (const std::string* ra = resp->FindHeader("Retry-After")) {
      char* end = nullptr;
      long long s = std::strtoll(ra->c_str(), &end, 10);
      if (!ra->empty() && end != nullptr && *end == '\0' && s >= 0) wait = std::chrono::seconds(s);
    }
    if (waited + wait > policy.budget) return resp;
    clock.SleepFor(wait);
    waited += wait;
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

// The token in a 200 answer: access_token and expires_in, else expires_on
// (unix seconds).
Result<Fetched> ParseToken(const std::string& body, const std::string& where, const Clock& clock) {
  Result<Json> j = ParseJson(body, "token response");
  if (!j.ok() || !j->is_object() || !j->contains("access_token") ||
      !(*j)["access_token"].is_string() ||
      (*j)["access_token"].get_ref<const std::string&>().empty()) {
    return DataLoss("Azure token for " + where +
                    ": the answer has no access_token string (not a token endpoint?)");
  }
  Fetched f{.token = (*j)["access_token"].get<std::string>()};
  Nanos now = clock.Now();
  if (std::optional<int64_t> in = Seconds(*j, "expires_in")) {
    f.expires_at = now + std::chrono::seconds(*in);
  } else if (std::optional<int64_t> on = Seconds(*j, "expires_on")) {
    f.expires_at = now + std::chrono::seconds(*on - UnixNow(clock));
  }
  return f;
}

// Turns what a token endpoint answered into a token or an error naming
// `where`; `secret` (whatever was sent that must not be shown) is redacted.
Result<Fetched> Interpret(const Result<http::Response>& resp, int attempts,
                          const std::string& where, const std::string& hint,
                          std::string_view secret, const Clock& clock) {
  if (!resp.ok()) {
    return Status(
        resp.status().code(),
        Redact("Azure token for " + where + ": " + std::string(resp.status().message()), secret));
  }
  if (resp->status != 200) {
    std::string msg = "Azure token for " + where + ": HTTP " + std::to_string(resp->status) + ": " +
                      Redact(ErrorText(resp->body), secret);
    if (Transient(resp->status)) {
      return Unavailable(msg + " (transient; " + std::to_string(attempts) +
                         (attempts == 1 ? " attempt)" : " attempts)"));
    }
    return PermissionDenied(msg + hint);
  }
  return ParseToken(resp->body, where, clock);
}

// ---------------------------------------------------------------------------
// A token from an environment variable.

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

// ---------------------------------------------------------------------------
// Entra ID client credentials: a secret, a certificate, or a federated token.

struct X509Deleter {
  void operator()(X509* p) const { X509_free(p); }
};

// The signed JWT that proves possession of the certificate's key (the
// "client assertion" of RFC 7523, as Entra ID wants it).
Result<std::string> CertificateAssertion(const std::string& path, const std::string& client_id,
                                         const std::string& audience, const Clock& clock) {
  Result<std::string> pem = ReadFile(path);
  if (!pem.ok()) {
    return FailedPrecondition("the client certificate " + std::string(pem.status().message()));
  }
  internal::BioPtr bio(BIO_new_mem_buf(pem->data(), static_cast<int>(pem->size())));
  std::unique_ptr<X509, X509Deleter> cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (!cert) {
    return InvalidArgument("the client certificate " + path +
                           " holds no PEM certificate (-----BEGIN CERTIFICATE-----); it must "
                           "hold the certificate and its private key");
  }
  Result<internal::PkeyPtr> key = internal::ReadPrivateKeyPem(*pem);
  if (!key.ok()) {
    return InvalidArgument("the client certificate " + path +
                           " holds no unencrypted private key (encrypted keys are not supported)");
  }
  if (EVP_PKEY_base_id(key->get()) != EVP_PKEY_RSA) {
    return InvalidArgument("the client certificate " + path + " has a " +
                           internal::KeyTypeName(key->get()) +
                           " key; Entra ID client assertions need RSA (RS256)");
  }
  if (X509_check_private_key(cert.get(), key->get()) != 1) {
    ERR_clear_error();
    return InvalidArgument("the client certificate " + path +
                           ": the private key does not belong to the certificate");
  }
  int der_len = i2d_X509(cert.get(), nullptr);
  if (der_len <= 0) return Internal("encoding the client certificate failed");
  std::string der(static_cast<size_t>(der_len), '\0');
  auto* p = reinterpret_cast<unsigned char*>(der.data());
  i2d_X509(cert.get(), &p);
  unsigned char sha1[EVP_MAX_MD_SIZE];
  unsigned int sha1_len = 0;
  if (EVP_Digest(der.data(), der.size(), sha1, &sha1_len, EVP_sha1(), nullptr) != 1) {
    return Internal("hashing the client certificate failed: " + internal::OpenSslError());
  }
  Json header = {
      {"alg", "RS256"},
      {"typ", "JWT"},
      {"x5t", Base64UrlEncode(std::string_view(reinterpret_cast<char*>(sha1), sha1_len))}};
  int64_t now = UnixNow(clock);
  Json claims = {{"aud", audience},
                 {"iss", client_id},
                 {"sub", client_id},
                 {"jti", HexEncode(RandomBytes(16))},
                 {"iat", now},
                 {"nbf", now},
                 {"exp", now + kAssertionLifetime.count()}};
  std::string input = Base64UrlEncode(header.dump()) + "." + Base64UrlEncode(claims.dump());
  internal::MdCtxPtr ctx(EVP_MD_CTX_new());
  size_t sig_len = 0;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key->get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &sig_len,
                     reinterpret_cast<const unsigned char*>(input.data()), input.size()) != 1) {
    return Internal("signing the client assertion failed: " + internal::OpenSslError());
  }
  std::string sig(sig_len, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &sig_len,
                     reinterpret_cast<const unsigned char*>(input.data()), input.size()) != 1) {
    return Internal("signing the client assertion failed: " + internal::OpenSslError());
  }
  sig.resize(sig_len);
  return input + "." + Base64UrlEncode(sig);
}

enum class Proof { kSecret, kCertificate, kFederatedToken };

struct EntraConfig {
  Proof proof = Proof::kSecret;
  std::string client_id, tenant_id, authority, resource;
  std::string secret_env;        // kSecret
  std::string certificate_path;  // kCertificate
  std::string token_file;        // kFederatedToken
  RetryPolicy retry;
};

class EntraSource : public CachingSource {
 public:
  EntraSource(EntraConfig c, const Clock& clock, Millis jitter)
      : CachingSource(clock, jitter), c_(std::move(c)) {}

  std::string Describe() const override {
    switch (c_.proof) {
      case Proof::kSecret:
        return "service principal " + c_.client_id + " in tenant " + c_.tenant_id;
      case Proof::kCertificate:
        return "service principal " + c_.client_id + " in tenant " + c_.tenant_id +
               " (certificate " + c_.certificate_path + ")";
      case Proof::kFederatedToken:
        return "workload identity " + c_.client_id + " in tenant " + c_.tenant_id +
               " (token file " + c_.token_file + ")";
    }
    return "service principal";
  }

 protected:
  Result<Fetched> Fetch() override {
    std::string url =
        TrimSlash(c_.authority) + "/" + http::PercentEncode(c_.tenant_id) + "/oauth2/v2.0/token";
    std::string where = Describe() + " at " + url;
    std::string proof;  // never shown
    std::string body =
        "grant_type=client_credentials&client_id=" + http::PercentEncode(c_.client_id);
    std::string hint;
    switch (c_.proof) {
      case Proof::kSecret: {
        proof = Env(c_.secret_env.c_str());
        if (proof.empty()) {
          return FailedPrecondition("Azure token for " + Describe() + ": environment variable " +
                                    c_.secret_env + " (the client secret) is not set");
        }
        body += "&client_secret=" + http::PercentEncode(proof);
        hint = "; check the client id, tenant and the secret in $" + c_.secret_env;
        break;
      }
      case Proof::kCertificate: {
        Result<std::string> a =
            CertificateAssertion(c_.certificate_path, c_.client_id, url, clock_);
        if (!a.ok()) {
          return Status(a.status().code(),
                        "Azure token for " + Describe() + ": " + std::string(a.status().message()));
        }
        proof = std::move(*a);
        body += "&client_assertion_type=" + http::PercentEncode(kJwtBearer) +
                "&client_assertion=" + http::PercentEncode(proof);
        hint = "; check the client id, tenant and that the certificate is registered on the app";
        break;
      }
      case Proof::kFederatedToken: {
        // Re-read every time: the kubelet (or the CI system) rotates the file.
        Result<std::string> t = ReadFile(c_.token_file);
        if (!t.ok() || Trim(*t).empty()) {
          return FailedPrecondition(
              "Azure token for " + Describe() + ": the federated token file " +
              (t.ok() ? c_.token_file + " is empty" : std::string(t.status().message())) +
              " (is the workload identity webhook set up for this pod?)");
        }
        proof = Trim(*t);
        body += "&client_assertion_type=" + http::PercentEncode(kJwtBearer) +
                "&client_assertion=" + http::PercentEncode(proof);
        hint = "; check the federated credential on the app (issuer, subject) and the client id";
        break;
      }
    }
    body += "&scope=" + http::PercentEncode(TrimSlash(c_.resource) + "/.default");
    http::Request req{.method = "POST",
                      .url = url,
                      .headers = {{"Content-Type", "application/x-www-form-urlencoded"}},
                      .deadline = c_.retry.timeout,
                      .max_body_bytes = 1 << 20,
                      .body = std::move(body)};
    int attempts = 0;
    Result<http::Response> resp = SendWithRetries(req, c_.retry, clock_, &attempts);
    return Interpret(resp, attempts, where, hint, proof, clock_);
  }

 private:
  const EntraConfig c_;
};

// ---------------------------------------------------------------------------
// Managed identity: IMDS, or the App Service / Container Apps endpoint.

struct ManagedConfig {
  std::string imds_endpoint, resource, client_id, object_id, msi_res_id;
  // Set (both) for App Service / Container Apps / Functions.
  std::string identity_endpoint, identity_header;
  bool probe = false;  // the chain: check that IMDS answers at all first
  Millis probe_timeout{1'000};
  RetryPolicy retry;
};

class ManagedIdentitySource : public CachingSource {
 public:
  ManagedIdentitySource(ManagedConfig c, const Clock& clock, Millis jitter)
      : CachingSource(clock, jitter), c_(std::move(c)) {}

  std::string Describe() const override {
    std::string which = !c_.client_id.empty()    ? "client_id " + c_.client_id
                        : !c_.object_id.empty()  ? "object_id " + c_.object_id
                        : !c_.msi_res_id.empty() ? "msi_res_id " + c_.msi_res_id
                                                 : "system-assigned";
    return "managed identity (" + which + ")" + (AppService() ? " via $IDENTITY_ENDPOINT" : "");
  }

 protected:
  Result<Fetched> Fetch() override {
    http::Request req{.deadline = c_.retry.timeout, .max_body_bytes = 1 << 20};
    std::string endpoint;
    if (AppService()) {
      endpoint = c_.identity_endpoint;
      req.url = endpoint + "?api-version=2019-08-01&resource=" + http::PercentEncode(c_.resource);
      if (!c_.client_id.empty()) {
        req.url += "&client_id=" + http::PercentEncode(c_.client_id);
      } else if (!c_.object_id.empty()) {
        req.url += "&principal_id=" + http::PercentEncode(c_.object_id);
      } else if (!c_.msi_res_id.empty()) {
        req.url += "&mi_res_id=" + http::PercentEncode(c_.msi_res_id);
      }
      req.headers = {{"X-IDENTITY-HEADER", c_.identity_header}};
    } else {
      endpoint = TrimSlash(c_.imds_endpoint) + "/metadata/identity/oauth2/token";
      req.url = endpoint + "?api-version=2018-02-01&resource=" + http::PercentEncode(c_.resource);
      if (!c_.client_id.empty()) {
        req.url += "&client_id=" + http::PercentEncode(c_.client_id);
      } else if (!c_.object_id.empty()) {
        req.url += "&object_id=" + http::PercentEncode(c_.object_id);
      } else if (!c_.msi_res_id.empty()) {
        req.url += "&msi_res_id=" + http::PercentEncode(c_.msi_res_id);
      }
      if (c_.probe && !probed_) RETURN_IF_ERROR(Probe(req.url, endpoint));
      req.headers = {{"Metadata", "true"}};
    }
    std::string where = Describe() + " at " + endpoint;
    std::string hint =
        "; check that this machine has this identity assigned and that it has a role on "
        "the resource";
    int attempts = 0;
    Result<http::Response> resp = SendWithRetries(req, c_.retry, clock_, &attempts);
    return Interpret(resp, attempts, where, hint, c_.identity_header, clock_);
  }

 private:
  bool AppService() const { return !c_.identity_endpoint.empty() && !c_.identity_header.empty(); }

  // A request without the Metadata header, which IMDS refuses (400) at once
  // without fetching anything: whether IMDS is there at all, found out
  // within probe_timeout, so that the chain moves on quickly off Azure. The
  // token request itself then gets the full timeout (IMDS can take seconds).
  Status Probe(const std::string& url, const std::string& endpoint) {
    http::Request probe{.url = url, .deadline = c_.probe_timeout, .max_body_bytes = 64 << 10};
    Result<http::Response> r = http::SendTls(probe, {});
    if (!r.ok()) {
      std::string why =
          r.status().code() == StatusCode::kDeadlineExceeded
              ? "did not answer within " + std::to_string(c_.probe_timeout.count()) + " ms"
              : "is not reachable (" + std::string(r.status().message()) + ")";
      return Unavailable("IMDS at " + endpoint + " " + why + " (not an Azure VM?)");
    }
    probed_ = true;
    return Status();
  }

  const ManagedConfig c_;
  bool probed_ = false;  // guarded by the cache's lock (Fetch runs under it)
};

// ---------------------------------------------------------------------------
// Azure CLI.

// expiresOn as az prints it: "2026-12-02 18:05:01.000000", local time.
std::optional<int64_t> ParseLocalTime(const std::string& s) {
  std::tm tm{};
  int y, mo, d, h, mi, sec;
  if (std::sscanf(s.c_str(), "%d-%d-%d %d:%d:%d", &y, &mo, &d, &h, &mi, &sec) != 6) {
    return std::nullopt;
  }
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  tm.tm_isdst = -1;
  std::time_t t = std::mktime(&tm);
  if (t == static_cast<std::time_t>(-1)) return std::nullopt;
  return static_cast<int64_t>(t);
}

class AzureCliSource : public CachingSource {
 public:
  AzureCliSource(std::string resource, std::string tenant, Millis timeout, const Clock& clock,
                 Millis jitter)
      : CachingSource(clock, jitter),
        resource_(std::move(resource)),
        tenant_(std::move(tenant)),
        timeout_(timeout) {}

  std::string Describe() const override {
    return "Azure CLI (az account get-access-token" +
           (tenant_.empty() ? std::string() : " --tenant " + tenant_) + ")";
  }

 protected:
  Result<Fetched> Fetch() override {
    std::string az = FindExecutable("az");
    if (az.empty()) {
      return FailedPrecondition(
          "Azure token from the Azure CLI: az is not on PATH; install it and run az login, or "
          "choose another credential type");
    }
    std::vector<std::string> argv = {az,     "account",    "get-access-token", "--output",
                                     "json", "--resource", resource_};
    if (!tenant_.empty()) {
      argv.push_back("--tenant");
      argv.push_back(tenant_);
    }
    Result<SubprocessResult> r = RunSubprocess(argv, timeout_);
    if (!r.ok()) {
      return Status(r.status().code(),
                    "Azure token from the Azure CLI: " + std::string(r.status().message()));
    }
    if (r->exit_code != 0) {
      // az says what is wrong on stderr ("ERROR: Please run 'az login' ...");
      // the first non-empty line, bounded. It never holds a token.
      std::string line;
      for (size_t b = 0; b < r->err.size() && line.empty();) {
        size_t e = r->err.find('\n', b);
        if (e == std::string::npos) e = r->err.size();
        line = Trim(std::string_view(r->err).substr(b, e - b));
        b = e + 1;
      }
      if (line.starts_with("ERROR: ")) line.erase(0, 7);
      if (line.size() > 300) line.resize(300);
      return PermissionDenied("Azure token from the Azure CLI: `" + JoinArgv(argv) +
                              "` exited with " + std::to_string(r->exit_code) + ": " +
                              (line.empty() ? "(no message)" : line) +
                              "; run az login (with --tenant for another tenant)");
    }
    Result<Json> j = ParseJson(r->out, "az account get-access-token");
    if (!j.ok() || !j->is_object() || !j->contains("accessToken") ||
        !(*j)["accessToken"].is_string()) {
      return DataLoss("Azure token from the Azure CLI: `" + JoinArgv(argv) +
                      "` printed no JSON object with an accessToken (an old az?)");
    }
    Fetched f{.token = (*j)["accessToken"].get<std::string>()};
    std::optional<int64_t> on = Seconds(*j, "expires_on");
    if (!on) {
      if (auto it = j->find("expiresOn"); it != j->end() && it->is_string()) {
        on = ParseLocalTime(it->get<std::string>());
      }
    }
    if (on) f.expires_at = clock_.Now() + std::chrono::seconds(*on - UnixNow(clock_));
    return f;
  }

 private:
  const std::string resource_, tenant_;
  const Millis timeout_;
};

// ---------------------------------------------------------------------------
// The default chain.

// A link is either not set up (why, e.g. "AZURE_FEDERATED_TOKEN_FILE is
// unset") or a source to ask.
struct Link {
  std::string name;
  std::function<std::unique_ptr<TokenSource>(std::string* skipped)> make;
};

std::string Unset(const std::vector<const char*>& names) {
  std::string out;
  for (const char* n : names) {
    if (!Env(n).empty()) continue;
    out += (out.empty() ? "" : ", ") + std::string(n);
  }
  return out;
}

std::string AuthorityFromEnv(const AzureCredentialOptions& o) {
  std::string host = Env("AZURE_AUTHORITY_HOST");
  return host.empty() ? o.authority : host;
}

RetryPolicy Retry(const AzureCredentialOptions& o) {
  return {.max_retries = o.max_retries, .budget = o.retry_budget, .timeout = o.timeout};
}

std::unique_ptr<TokenSource> WorkloadIdentity(const AzureCredentialOptions& o, const Clock& clock,
                                              std::string* missing) {
  EntraConfig c{.proof = Proof::kFederatedToken,
                .client_id = o.client_id.empty() ? Env("AZURE_CLIENT_ID") : o.client_id,
                .tenant_id = o.tenant_id.empty() ? Env("AZURE_TENANT_ID") : o.tenant_id,
                .authority = AuthorityFromEnv(o),
                .resource = o.resource,
                .token_file = o.federated_token_file.empty() ? Env("AZURE_FEDERATED_TOKEN_FILE")
                                                             : o.federated_token_file,
                .retry = Retry(o)};
  std::vector<std::string> unset;
  if (c.token_file.empty()) unset.push_back("AZURE_FEDERATED_TOKEN_FILE");
  if (c.client_id.empty()) unset.push_back("AZURE_CLIENT_ID");
  if (c.tenant_id.empty()) unset.push_back("AZURE_TENANT_ID");
  if (!unset.empty()) {
    missing->clear();
    for (const std::string& u : unset) *missing += (missing->empty() ? "" : ", ") + u;
    return nullptr;
  }
  return std::make_unique<EntraSource>(std::move(c), clock, o.refresh_jitter);
}

ManagedConfig Managed(const AzureCredentialOptions& o) {
  return {.imds_endpoint = o.imds_endpoint,
          .resource = o.resource,
          .client_id = o.client_id,
          .object_id = o.object_id,
          .msi_res_id = o.msi_res_id,
          .identity_endpoint = Env("IDENTITY_ENDPOINT"),
          .identity_header = Env("IDENTITY_HEADER"),
          .probe_timeout = o.imds_probe_timeout,
          .retry = Retry(o)};
}

std::vector<Link> ChainLinks(const AzureCredentialOptions& o, const Clock& clock) {
  std::vector<Link> links;
  links.push_back(
      {"environment", [&o, &clock](std::string* skipped) -> std::unique_ptr<TokenSource> {
         std::string unset = Unset({"AZURE_TENANT_ID", "AZURE_CLIENT_ID"});
         bool secret = !Env("AZURE_CLIENT_SECRET").empty();
         bool cert = !Env("AZURE_CLIENT_CERTIFICATE_PATH").empty();
         if (!secret && !cert) {
           unset += (unset.empty() ? "" : ", ") +
                    std::string("AZURE_CLIENT_SECRET and AZURE_CLIENT_CERTIFICATE_PATH");
         }
         if (!unset.empty()) {
           *skipped = unset + " unset";
           return nullptr;
         }
         EntraConfig c{.proof = secret ? Proof::kSecret : Proof::kCertificate,
                       .client_id = Env("AZURE_CLIENT_ID"),
                       .tenant_id = Env("AZURE_TENANT_ID"),
                       .authority = AuthorityFromEnv(o),
                       .resource = o.resource,
                       .secret_env = "AZURE_CLIENT_SECRET",
                       .certificate_path = Env("AZURE_CLIENT_CERTIFICATE_PATH"),
                       .retry = Retry(o)};
         return std::make_unique<EntraSource>(std::move(c), clock, o.refresh_jitter);
       }});
  links.push_back(
      {"workload identity", [&o, &clock](std::string* skipped) -> std::unique_ptr<TokenSource> {
         // Only a token file makes this link set up; AZURE_CLIENT_ID
         // alone belongs to a user-assigned managed identity too.
         if (o.federated_token_file.empty() && Env("AZURE_FEDERATED_TOKEN_FILE").empty()) {
           *skipped = "AZURE_FEDERATED_TOKEN_FILE unset";
           return nullptr;
         }
         std::string missing;
         std::unique_ptr<TokenSource> s = WorkloadIdentity(o, clock, &missing);
         if (!s) *skipped = missing + " unset";
         return s;
       }});
  links.push_back({"managed identity", [&o, &clock](std::string*) -> std::unique_ptr<TokenSource> {
                     ManagedConfig c = Managed(o);
                     if (c.client_id.empty() && c.object_id.empty() && c.msi_res_id.empty()) {
                       c.client_id = Env("AZURE_CLIENT_ID");  // as the Azure SDKs do
                     }
                     c.probe = true;
                     return std::make_unique<ManagedIdentitySource>(std::move(c), clock,
                                                                    o.refresh_jitter);
                   }});
  links.push_back({"Azure CLI", [&o, &clock](std::string* skipped) -> std::unique_ptr<TokenSource> {
                     if (FindExecutable("az").empty()) {
                       *skipped = "az is not on PATH";
                       return nullptr;
                     }
                     return std::make_unique<AzureCliSource>(o.resource, o.tenant_id, o.timeout,
                                                             clock, o.refresh_jitter);
                   }});
  return links;
}

class ChainSource : public TokenSource {
 public:
  ChainSource(AzureCredentialOptions o, const Clock& clock) : o_(std::move(o)), clock_(clock) {}

  Result<std::string> Token() override {
    std::lock_guard<std::mutex> lock(mu_);
    // The first link that gave a token is kept, cache and all: asking the
    // others again would cost a probe each time, and a token from a different
    // identity mid-run would be a surprise.
    if (chosen_) return chosen_->Token();
    std::string report;
    bool refused = false, transient = false;
    for (const Link& link : ChainLinks(o_, clock_)) {
      std::string skipped;
      std::unique_ptr<TokenSource> source = link.make(&skipped);
      report += (report.empty() ? "" : "; ") + link.name + ": ";
      if (!source) {
        report += "skipped (" + skipped + ")";
        continue;
      }
      Result<std::string> t = source->Token();
      if (t.ok()) {
        std::lock_guard<std::mutex> d(describe_mu_);
        chosen_ = std::move(source);
        chosen_name_ = chosen_->Describe();
        return t;
      }
      report += std::string(t.status().message());
      refused = refused || t.status().code() == StatusCode::kPermissionDenied;
      transient = transient || t.status().code() == StatusCode::kUnavailable ||
                  t.status().code() == StatusCode::kDeadlineExceeded ||
                  t.status().code() == StatusCode::kResourceExhausted;
    }
    std::string msg = "no Azure credential of the default chain gave a token for " + o_.resource +
                      ": " + report +
                      ". Set AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET (or "
                      "AZURE_CLIENT_CERTIFICATE_PATH), run on Azure with a managed identity, or "
                      "run az login; or choose a credential type explicitly";
    if (refused) return PermissionDenied(msg);
    if (transient) return Unavailable(msg);
    return FailedPrecondition(msg);
  }

  std::string Describe() const override {
    std::lock_guard<std::mutex> d(describe_mu_);
    if (chosen_name_.empty()) {
      return "default Azure credential chain (environment, workload identity, managed identity, "
             "Azure CLI)";
    }
    return "default Azure credential chain: " + chosen_name_;
  }

 private:
  const AzureCredentialOptions o_;
  const Clock& clock_;
  std::mutex mu_;
  std::unique_ptr<TokenSource> chosen_;
  mutable std::mutex describe_mu_;
  std::string chosen_name_;
};

Status CheckOneUserAssigned(const AzureCredentialOptions& o) {
  int n = (o.client_id.empty() ? 0 : 1) + (o.object_id.empty() ? 0 : 1) +
          (o.msi_res_id.empty() ? 0 : 1);
  if (n > 1) {
    return InvalidArgument(
        "Azure credential: a managed identity is chosen by one of client_id, object_id and "
        "msi_res_id; " +
        std::to_string(n) + " are set");
  }
  return Status();
}

}  // namespace

std::string_view AzureIdentityName(AzureIdentity kind) {
  switch (kind) {
    case AzureIdentity::kDefaultChain:
      return "default";
    case AzureIdentity::kManagedIdentity:
      return "managed_identity";
    case AzureIdentity::kServicePrincipal:
      return "service_principal";
    case AzureIdentity::kWorkloadIdentity:
      return "workload_identity";
    case AzureIdentity::kAzureCli:
      return "azure_cli";
    case AzureIdentity::kEnvironmentToken:
      return "environment_token";
  }
  return "unknown";
}

Result<std::unique_ptr<TokenSource>> NewAzureTokenSource(const AzureCredentialOptions& options,
                                                         const Clock& clock) {
  const AzureCredentialOptions& o = options;
  if (o.kind == AzureIdentity::kEnvironmentToken) {
    if (o.token_env.empty()) {
      return InvalidArgument(
          "Azure credential: token_env (the variable holding the token) "
          "is empty");
    }
    return std::unique_ptr<TokenSource>(new EnvTokenSource(o.token_env));
  }
  if (o.resource.empty()) {
    return InvalidArgument(
        "Azure credential: the resource (e.g. https://management.azure.com) "
        "is empty");
  }
  if (o.timeout.count() <= 0 || o.imds_probe_timeout.count() <= 0) {
    return InvalidArgument(
        "Azure credential: the token request and IMDS probe timeouts must be positive");
  }
  if (o.max_retries < 0 || o.retry_budget.count() < 0 || o.refresh_jitter.count() < 0) {
    return InvalidArgument(
        "Azure credential: max_retries, retry_budget and refresh_jitter must not be negative");
  }
  switch (o.kind) {
    case AzureIdentity::kEnvironmentToken:
      break;  // handled above
    case AzureIdentity::kServicePrincipal: {
      if (o.client_id.empty() || o.tenant_id.empty() ||
          (o.client_secret_env.empty() && o.certificate_path.empty())) {
        return InvalidArgument(
            "Azure credential: a service principal needs client_id, tenant_id and "
            "client_secret_env (the variable holding the secret) or certificate_path (a PEM "
            "with the certificate and its private key)");
      }
      EntraConfig c{.proof = o.certificate_path.empty() ? Proof::kSecret : Proof::kCertificate,
                    .client_id = o.client_id,
                    .tenant_id = o.tenant_id,
                    .authority = o.authority,
                    .resource = o.resource,
                    .secret_env = o.client_secret_env,
                    .certificate_path = o.certificate_path,
                    .retry = Retry(o)};
      return std::unique_ptr<TokenSource>(new EntraSource(std::move(c), clock, o.refresh_jitter));
    }
    case AzureIdentity::kWorkloadIdentity: {
      std::string missing;
      std::unique_ptr<TokenSource> s = WorkloadIdentity(o, clock, &missing);
      if (!s) {
        return InvalidArgument("Azure credential: workload identity needs " + missing +
                               " (or federated_token_file, client_id and tenant_id)");
      }
      return s;
    }
    case AzureIdentity::kManagedIdentity:
      RETURN_IF_ERROR(CheckOneUserAssigned(o));
      return std::unique_ptr<TokenSource>(
          new ManagedIdentitySource(Managed(o), clock, o.refresh_jitter));
    case AzureIdentity::kAzureCli:
      return std::unique_ptr<TokenSource>(
          new AzureCliSource(o.resource, o.tenant_id, o.timeout, clock, o.refresh_jitter));
    case AzureIdentity::kDefaultChain:
      RETURN_IF_ERROR(CheckOneUserAssigned(o));
      return std::unique_ptr<TokenSource>(new ChainSource(o, clock));
  }
  return InvalidArgument("Azure credential: unknown kind");
}

Result<AzureCredentialOptions> ParseAzureCredential(const Config& config, std::string_view key) {
  AzureCredentialOptions o;
  std::string k(key);
  if (!config.Has(k)) return o;
  if (!config.IsMap(k)) {
    return InvalidArgument(config.Locate(k) +
                           ": expected a map such as {type: managed_identity, client_id: ...}");
  }
  RETURN_IF_ERROR(config.CheckKnownKeys(
      k, {"type", "client_id", "tenant_id", "client_secret_env", "certificate_path", "token_env",
          "federated_token_file", "object_id", "msi_res_id", "imds_endpoint", "authority",
          "timeout"}));
  auto f = [&k](const char* name) { return k.empty() ? std::string(name) : k + "." + name; };
  ASSIGN_OR_RETURN(std::string type, config.GetString(f("type"), "default"));
  static constexpr AzureIdentity kKinds[] = {
      AzureIdentity::kDefaultChain,     AzureIdentity::kManagedIdentity,
      AzureIdentity::kServicePrincipal, AzureIdentity::kWorkloadIdentity,
      AzureIdentity::kAzureCli,         AzureIdentity::kEnvironmentToken};
  bool known = false;
  std::string names;
  for (AzureIdentity kind : kKinds) {
    names += (names.empty() ? "" : ", ") + std::string(AzureIdentityName(kind));
    if (type == AzureIdentityName(kind)) {
      o.kind = kind;
      known = true;
    }
  }
  if (!known) {
    return InvalidArgument(config.Locate(f("type")) + ": unknown credential type '" + type +
                           "'; expected one of " + names);
  }
  struct Field {
    const char* name;
    std::string* out;
  };
  for (const Field& field :
       {Field{"client_id", &o.client_id}, Field{"tenant_id", &o.tenant_id},
        Field{"client_secret_env", &o.client_secret_env},
        Field{"certificate_path", &o.certificate_path}, Field{"token_env", &o.token_env},
        Field{"federated_token_file", &o.federated_token_file}, Field{"object_id", &o.object_id},
        Field{"msi_res_id", &o.msi_res_id}, Field{"imds_endpoint", &o.imds_endpoint},
        Field{"authority", &o.authority}}) {
    ASSIGN_OR_RETURN(*field.out, config.GetString(f(field.name), *field.out));
  }
  ASSIGN_OR_RETURN(Nanos timeout, config.GetDuration(f("timeout"), o.timeout));
  if (timeout < 1ms) {
    return InvalidArgument(config.Locate(f("timeout")) + ": the timeout must be at least 1ms");
  }
  o.timeout = std::chrono::duration_cast<Millis>(timeout);
  auto need = [&](bool ok, const std::string& what) -> Status {
    if (ok) return Status();
    return InvalidArgument(config.Locate(f("type")) + ": type " + type + " needs " + what);
  };
  switch (o.kind) {
    case AzureIdentity::kServicePrincipal:
      RETURN_IF_ERROR(need(!o.client_id.empty(), "client_id (the app id)"));
      RETURN_IF_ERROR(need(!o.tenant_id.empty(), "tenant_id"));
      RETURN_IF_ERROR(need(!o.client_secret_env.empty() || !o.certificate_path.empty(),
                           "client_secret_env (the variable holding the secret) or "
                           "certificate_path"));
      if (!o.client_secret_env.empty() && !o.certificate_path.empty()) {
        return InvalidArgument(config.Locate(f("certificate_path")) +
                               ": set client_secret_env or certificate_path, not both");
      }
      break;
    case AzureIdentity::kEnvironmentToken:
      RETURN_IF_ERROR(need(!o.token_env.empty(), "token_env (the variable holding the token)"));
      break;
    case AzureIdentity::kManagedIdentity:
    case AzureIdentity::kDefaultChain:
      if (Status s = CheckOneUserAssigned(o); !s.ok()) {
        return InvalidArgument(config.Locate(k) + ": " + std::string(s.message()));
      }
      break;
    case AzureIdentity::kWorkloadIdentity:
    case AzureIdentity::kAzureCli:
      break;
  }
  return o;
}

}  // namespace gantry::security
