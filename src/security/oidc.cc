#include "gantry/security/oidc.h"

#include <arpa/inet.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "gantry/core/log.h"
#include "gantry/security/crypto.h"
#include "openssl_util.h"

namespace gantry::security {

namespace {

using Json = nlohmann::json;
using internal::PkeyPtr;
using std::chrono::nanoseconds;

// After a failed first fetch (no keys at all), requests wait this long before
// trying again, so an issuer outage does not turn into one fetch per request.
constexpr nanoseconds kNoKeysRetry = std::chrono::seconds(5);

struct BnDeleter {
  void operator()(BIGNUM* p) const { BN_free(p); }
};
using BnPtr = std::unique_ptr<BIGNUM, BnDeleter>;

// JWK members are unpadded base64url (RFC 7517); some issuers pad anyway.
Result<std::string> DecodeMember(const Json& jwk, const char* name) {
  auto it = jwk.find(name);
  if (it == jwk.end() || !it->is_string() || it->get_ref<const std::string&>().empty()) {
    return InvalidArgument(std::string("missing \"") + name + "\"");
  }
  std::string_view text = it->get_ref<const std::string&>();
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  Result<std::string> bytes = Base64UrlDecode(text);
  if (!bytes.ok() || bytes->empty()) {
    return InvalidArgument(std::string("\"") + name + "\" is not base64url");
  }
  return bytes;
}

Result<std::string> PkeyFromParams(const char* type, OSSL_PARAM_BLD* bld) {
  OSSL_PARAM* params = OSSL_PARAM_BLD_to_param(bld);
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr);
  EVP_PKEY* raw = nullptr;
  bool ok = params && ctx && EVP_PKEY_fromdata_init(ctx) == 1 &&
            EVP_PKEY_fromdata(ctx, &raw, EVP_PKEY_PUBLIC_KEY, params) == 1;
  EVP_PKEY_CTX_free(ctx);
  OSSL_PARAM_free(params);
  PkeyPtr key(raw);
  if (!ok || !key) {
    ERR_clear_error();
    return InvalidArgument("not a valid public key");
  }
  return internal::PublicKeyToPem(key.get());
}

Result<std::string> RsaPem(const Json& jwk) {
  ASSIGN_OR_RETURN(std::string n, DecodeMember(jwk, "n"));
  ASSIGN_OR_RETURN(std::string e, DecodeMember(jwk, "e"));
  BnPtr bn_n(BN_bin2bn(reinterpret_cast<const unsigned char*>(n.data()), static_cast<int>(n.size()),
                       nullptr));
  BnPtr bn_e(BN_bin2bn(reinterpret_cast<const unsigned char*>(e.data()), static_cast<int>(e.size()),
                       nullptr));
  OSSL_PARAM_BLD* bld = OSSL_PARAM_BLD_new();
  bool ok = bn_n && bn_e && bld && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn_n.get()) &&
            OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, bn_e.get());
  Result<std::string> pem = ok ? PkeyFromParams("RSA", bld) : InvalidArgument("bad n/e");
  OSSL_PARAM_BLD_free(bld);
  return pem;
}

Result<std::string> EcPem(const Json& jwk) {
  ASSIGN_OR_RETURN(std::string x, DecodeMember(jwk, "x"));
  ASSIGN_OR_RETURN(std::string y, DecodeMember(jwk, "y"));
  if (x.size() != 32 || y.size() != 32) {
    return InvalidArgument("P-256 \"x\" and \"y\" must be 32 bytes each");
  }
  std::string point = "\x04" + x + y;  // SEC 1 uncompressed point
  OSSL_PARAM_BLD* bld = OSSL_PARAM_BLD_new();
  bool ok =
      bld && OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) &&
      OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size());
  Result<std::string> pem = ok ? PkeyFromParams("EC", bld) : InvalidArgument("bad x/y");
  OSSL_PARAM_BLD_free(bld);
  return pem;
}

std::string StringMember(const Json& j, const char* name) {
  auto it = j.find(name);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

Result<OidcDiscovery> ParseDiscovery(std::string_view json, std::string_view where) {
  Json doc = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return InvalidArgument(std::string(where) +
                           ": the OpenID Connect discovery document is not a JSON object");
  }
  OidcDiscovery d;
  d.issuer = StringMember(doc, "issuer");
  d.jwks_uri = StringMember(doc, "jwks_uri");
  if (d.issuer.empty() || d.jwks_uri.empty()) {
    return InvalidArgument(std::string(where) +
                           ": the discovery document needs string \"issuer\" and \"jwks_uri\" "
                           "(is this the issuer's /.well-known/openid-configuration?)");
  }
  return d;
}

Result<std::vector<JwtKey>> ParseJwks(std::string_view json, std::string_view where,
                                      std::vector<std::string>* skipped) {
  Json doc = Json::parse(json, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return InvalidArgument(std::string(where) + ": the JWKS is not a JSON object");
  }
  auto keys = doc.find("keys");
  if (keys == doc.end() || !keys->is_array()) {
    return InvalidArgument(std::string(where) + ": the JWKS has no \"keys\" array");
  }
  std::vector<JwtKey> out;
  auto skip = [&](size_t i, const std::string& kid, const std::string& why) {
    if (skipped) {
      skipped->push_back(std::string(where) + ": key " + std::to_string(i) + " (kid '" + kid +
                         "') skipped: " + why);
    }
  };
  for (size_t i = 0; i < keys->size(); ++i) {
    const Json& jwk = (*keys)[i];
    if (!jwk.is_object()) {
      return InvalidArgument(std::string(where) + ": JWKS key " + std::to_string(i) +
                             " is not an object");
    }
    std::string kid = StringMember(jwk, "kid");
    std::string kty = StringMember(jwk, "kty");
    std::string use = StringMember(jwk, "use");
    std::string alg = StringMember(jwk, "alg");
    if (!use.empty() && use != "sig") {
      skip(i, kid, "use '" + use + "' is not for signatures");
      continue;
    }
    JwtKey key;
    key.kid = kid;
    Result<std::string> pem = InvalidArgument("");
    if (kty == "RSA") {
      key.alg = "RS256";
      pem = RsaPem(jwk);
    } else if (kty == "EC") {
      std::string crv = StringMember(jwk, "crv");
      if (crv != "P-256") {
        skip(i, kid, "curve '" + crv + "' is not P-256");
        continue;
      }
      key.alg = "ES256";
      pem = EcPem(jwk);
    } else {
      skip(i, kid, "kty '" + kty + "' is not RSA or EC");
      continue;
    }
    if (!alg.empty() && alg != key.alg) {
      skip(i, kid, "alg '" + alg + "' is not " + key.alg);
      continue;
    }
    if (!pem.ok()) {
      skip(i, kid, pem.status().message());
      continue;
    }
    key.public_pem = std::move(pem).value();
    // The same checks the verifier applies (RSA >= 2048 bits, P-256).
    Result<std::shared_ptr<const JwtKeySet>> probe = JwtKeySet::Create({key});
    if (!probe.ok()) {
      skip(i, kid, probe.status().message());
      continue;
    }
    out.push_back(std::move(key));
  }
  return out;
}

Result<nlohmann::json> PublicKeyToJwk(std::string_view public_pem, std::string_view kid) {
  ASSIGN_OR_RETURN(PkeyPtr key, internal::ReadPublicKeyPem(public_pem));
  Json jwk = {{"kid", std::string(kid)}, {"use", "sig"}};
  auto bn = [&](const char* name, int pad) -> Result<std::string> {
    BIGNUM* raw = nullptr;
    if (EVP_PKEY_get_bn_param(key.get(), name, &raw) != 1) {
      ERR_clear_error();
      return InvalidArgument(std::string("the key has no ") + name);
    }
    BnPtr b(raw);
    std::string bytes(pad > 0 ? static_cast<size_t>(pad) : static_cast<size_t>(BN_num_bytes(raw)),
                      '\0');
    BN_bn2binpad(raw, reinterpret_cast<unsigned char*>(bytes.data()),
                 static_cast<int>(bytes.size()));
    return Base64UrlEncode(bytes);
  };
  switch (EVP_PKEY_get_id(key.get())) {
    case EVP_PKEY_RSA: {
      jwk["kty"] = "RSA";
      jwk["alg"] = "RS256";
      ASSIGN_OR_RETURN(std::string n, bn(OSSL_PKEY_PARAM_RSA_N, 0));
      ASSIGN_OR_RETURN(std::string e, bn(OSSL_PKEY_PARAM_RSA_E, 0));
      jwk["n"] = n;
      jwk["e"] = e;
      return jwk;
    }
    case EVP_PKEY_EC: {
      jwk["kty"] = "EC";
      jwk["alg"] = "ES256";
      jwk["crv"] = "P-256";
      ASSIGN_OR_RETURN(std::string x, bn(OSSL_PKEY_PARAM_EC_PUB_X, 32));
      ASSIGN_OR_RETURN(std::string y, bn(OSSL_PKEY_PARAM_EC_PUB_Y, 32));
      jwk["x"] = x;
      jwk["y"] = y;
      return jwk;
    }
    default:
      return InvalidArgument(std::string("a JWK needs an RSA or EC key, not ") +
                             internal::KeyTypeName(key.get()));
  }
}

std::vector<std::string> EntraIssuerAliases(std::string_view issuer) {
  constexpr std::string_view kV2 = "https://login.microsoftonline.com/";
  constexpr std::string_view kV2End = "/v2.0";
  constexpr std::string_view kV1 = "https://sts.windows.net/";
  std::vector<std::string> out{std::string(issuer)};
  auto tenant_ok = [](std::string_view t) {
    return !t.empty() && t.find('/') == std::string_view::npos;
  };
  if (StartsWith(issuer, kV2) && issuer.size() > kV2.size() + kV2End.size() &&
      issuer.substr(issuer.size() - kV2End.size()) == kV2End) {
    std::string_view t = issuer.substr(kV2.size(), issuer.size() - kV2.size() - kV2End.size());
    if (tenant_ok(t)) out.push_back(std::string(kV1) + std::string(t) + "/");
  } else if (StartsWith(issuer, kV1) && issuer.size() > kV1.size() + 1 && issuer.back() == '/') {
    std::string_view t = issuer.substr(kV1.size(), issuer.size() - kV1.size() - 1);
    if (tenant_ok(t)) out.push_back(std::string(kV2) + std::string(t) + std::string(kV2End));
  }
  return out;
}

Status CheckOidcUrl(std::string_view url, std::string_view what) {
  auto host_of = [&](size_t scheme_len) {
    std::string_view rest = url.substr(scheme_len);
    size_t end = rest.find_first_of(":/?#");
    return rest.substr(0, end);
  };
  if (StartsWith(url, "https://") && !host_of(8).empty()) return Status::Ok();
  if (StartsWith(url, "http://")) {
    std::string host(host_of(7));
    in_addr a{};
    if (inet_pton(AF_INET, host.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127) {
      return Status::Ok();
    }
  }
  return InvalidArgument(std::string(what) + ": '" + std::string(url) +
                         "' must be an https:// URL (plain http is allowed only to 127.0.0.0/8, "
                         "for local test issuers)");
}

struct OidcKeySet::Impl {
  OidcOptions o;
  const Clock* clock = nullptr;
  std::string discovery_url;

  mutable std::mutex mu;
  std::condition_variable fetched_cv;  // a fetch finished
  std::condition_variable stop_cv;
  std::shared_ptr<const JwtKeySnapshot> current;
  std::string fingerprint;  // of `current`, to tell whether a fetch changed anything
  bool fetching = false;
  uint64_t fetch_seq = 0;  // fetches finished
  Status last_status;
  std::optional<nanoseconds> last_attempt, last_kid_refresh;
  nanoseconds next_due{0};
  Stats stats;
  bool stop = false;
  std::once_flag start_once;
  std::thread thread;

  struct Fetched {
    std::shared_ptr<const JwtKeySet> keys;
    std::vector<std::string> issuers;
    std::string fingerprint;
  };

  Result<std::string> Get(const std::string& url) const {
    http::Request req;
    req.url = url;
    req.headers = {{"Accept", "application/json"}};
    req.deadline = o.fetch_deadline;
    req.max_body_bytes = o.max_document_bytes;
    ASSIGN_OR_RETURN(http::Response resp, http::SendTls(req, o.tls));
    if (resp.status != 200) {
      return Unavailable("GET " + url + ": HTTP " + std::to_string(resp.status) +
                         " (expected 200)");
    }
    return std::move(resp.body);
  }

  // Network only; no lock held.
  Result<Fetched> FetchOnce() const {
    ASSIGN_OR_RETURN(std::string body, Get(discovery_url));
    ASSIGN_OR_RETURN(OidcDiscovery d, ParseDiscovery(body, discovery_url));
    // OpenID Connect Discovery 1.0, 4.3: the document must name the issuer
    // we asked about. Entra's multi-tenant documents name a template instead.
    if (!o.issuer.empty() && d.issuer != o.issuer &&
        d.issuer.find("{tenantid}") == std::string::npos) {
      return FailedPrecondition(discovery_url + ": the document's issuer is '" + d.issuer +
                                "', not the configured '" + o.issuer + "'; fix oidc.issuer");
    }
    RETURN_IF_ERROR(CheckOidcUrl(d.jwks_uri, "jwks_uri of " + discovery_url));
    ASSIGN_OR_RETURN(std::string jwks, Get(d.jwks_uri));
    std::vector<std::string> skipped;
    ASSIGN_OR_RETURN(std::vector<JwtKey> keys, ParseJwks(jwks, d.jwks_uri, &skipped));
    for (const std::string& s : skipped) log::info("oidc: {}", s);
    if (keys.empty()) {
      return FailedPrecondition(d.jwks_uri + ": no usable signing key (RSA or EC P-256)");
    }
    Fetched f;
    ASSIGN_OR_RETURN(f.keys, JwtKeySet::Create(keys));
    f.issuers = EntraIssuerAliases(d.issuer);
    for (const std::string& i : f.issuers) f.fingerprint += i + "\n";
    for (const JwtKey& k : keys) f.fingerprint += k.alg + " " + k.kid + "\n" + k.public_pem;
    return f;
  }

  // Called and returns with `l` held. Joins a fetch in flight instead of
  // starting a second one.
  Status SharedFetch(std::unique_lock<std::mutex>& l) {
    if (fetching) {
      uint64_t seq = fetch_seq;
      fetched_cv.wait(l, [&] { return fetch_seq != seq; });
      return last_status;
    }
    fetching = true;
    ++stats.fetches;
    last_attempt = clock->Now();
    l.unlock();
    Result<Fetched> f = FetchOnce();
    l.lock();
    nanoseconds now = clock->Now();
    if (f.ok()) {
      if (f->fingerprint != fingerprint) {
        auto snap = std::make_shared<JwtKeySnapshot>();
        snap->keys = f->keys;
        snap->issuers = f->issuers;
        snap->generation = ++stats.generation;
        stats.keys = f->keys->size();
        log::info("oidc: {} signing key(s) from {} (generation {})", stats.keys, discovery_url,
                  snap->generation);
        current = std::move(snap);
        fingerprint = std::move(f->fingerprint);
      }
      next_due = now + o.refresh;
    } else {
      ++stats.failures;
      // Never sooner than kNoKeysRetry, even with unknown_kid_refresh 0s.
      next_due = now + std::max<nanoseconds>(
                           kNoKeysRetry, std::min<nanoseconds>(o.refresh, o.unknown_kid_refresh));
      log::warn("oidc: refreshing signing keys failed ({}); {}", f.status().ToString(),
                current ? "keeping the keys we have" : "no keys yet, tokens are refused");
    }
    last_status = f.status();
    fetching = false;
    ++fetch_seq;
    fetched_cv.notify_all();
    return last_status;
  }

  void Run() {
    std::unique_lock<std::mutex> l(mu);
    while (!stop) {
      nanoseconds now = clock->Now();
      if (now >= next_due) {
        // A failure is logged and keeps the keys; the schedule retries.
        (void)SharedFetch(l);
        continue;
      }
      // Real time, capped so that a changed clock is noticed within a minute.
      auto wait = std::min<nanoseconds>(next_due - now, std::chrono::minutes(1));
      stop_cv.wait_for(l, wait, [&] { return stop; });
    }
  }

  void StartThread() {
    if (!o.background_refresh) return;
    std::call_once(start_once, [this] { thread = std::thread([this] { Run(); }); });
  }

  Result<std::shared_ptr<const JwtKeySnapshot>> CurrentOrError(const Status& s) const {
    if (current) return current;
    return Unavailable("no OpenID Connect signing keys from " + discovery_url +
                       " yet: " + (s.ok() ? std::string("not fetched") : s.ToString()));
  }
};

OidcKeySet::OidcKeySet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

OidcKeySet::~OidcKeySet() {
  {
    std::lock_guard<std::mutex> l(impl_->mu);
    impl_->stop = true;
  }
  impl_->stop_cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

Result<std::shared_ptr<OidcKeySet>> OidcKeySet::Create(OidcOptions options) {
  auto impl = std::make_unique<Impl>();
  if (options.issuer.empty() && options.discovery_url.empty()) {
    return InvalidArgument("OpenID Connect needs an issuer or a discovery_url");
  }
  if (!options.issuer.empty()) RETURN_IF_ERROR(CheckOidcUrl(options.issuer, "oidc.issuer"));
  if (!options.discovery_url.empty()) {
    RETURN_IF_ERROR(CheckOidcUrl(options.discovery_url, "oidc.discovery_url"));
    impl->discovery_url = options.discovery_url;
  } else {
    std::string base = options.issuer;
    while (!base.empty() && base.back() == '/') base.pop_back();
    impl->discovery_url = base + "/.well-known/openid-configuration";
  }
  if (options.refresh < std::chrono::seconds(1) ||
      options.unknown_kid_refresh < std::chrono::seconds(0)) {
    return InvalidArgument(
        "oidc: refresh must be at least 1s and unknown_kid_refresh not negative");
  }
  if (options.fetch_deadline <= std::chrono::milliseconds(0)) {
    return InvalidArgument("oidc: the fetch deadline must be positive");
  }
  impl->clock = options.clock ? options.clock : &SystemClock();
  impl->o = std::move(options);
  return std::shared_ptr<OidcKeySet>(new OidcKeySet(std::move(impl)));
}

Result<std::shared_ptr<const JwtKeySnapshot>> OidcKeySet::Current() {
  impl_->StartThread();
  std::unique_lock<std::mutex> l(impl_->mu);
  if (impl_->current) return impl_->current;
  if (!impl_->fetching && impl_->last_attempt &&
      impl_->clock->Now() - *impl_->last_attempt < kNoKeysRetry) {
    return impl_->CurrentOrError(impl_->last_status);
  }
  Status s = impl_->SharedFetch(l);
  return impl_->CurrentOrError(s);
}

Result<std::shared_ptr<const JwtKeySnapshot>> OidcKeySet::RefreshForKid(std::string_view kid) {
  std::unique_lock<std::mutex> l(impl_->mu);
  // Another request may have fetched the new keys meanwhile.
  auto has = [&] { return impl_->current && impl_->current->keys->HasKid(kid); };
  if (has()) return impl_->current;
  if (impl_->fetching) {
    // Share the fetch in flight; it may have started before the issuer
    // published this kid, so fall through to a fetch of our own if not.
    (void)impl_->SharedFetch(l);
    if (has()) return impl_->current;
  }
  nanoseconds now = impl_->clock->Now();
  if (impl_->last_kid_refresh &&
      now - *impl_->last_kid_refresh < nanoseconds(impl_->o.unknown_kid_refresh)) {
    return impl_->CurrentOrError(impl_->last_status);
  }
  impl_->last_kid_refresh = now;
  Status s = impl_->SharedFetch(l);
  return impl_->CurrentOrError(s);
}

Status OidcKeySet::Refresh() {
  std::unique_lock<std::mutex> l(impl_->mu);
  return impl_->SharedFetch(l);
}

void OidcKeySet::RefreshIfDue() {
  std::unique_lock<std::mutex> l(impl_->mu);
  if (impl_->clock->Now() >= impl_->next_due) (void)impl_->SharedFetch(l);
}

OidcKeySet::Stats OidcKeySet::stats() const {
  std::lock_guard<std::mutex> l(impl_->mu);
  return impl_->stats;
}

}  // namespace gantry::security
