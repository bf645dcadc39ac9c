// OpenObjectStore: URL and connection-string parsing, key rules, ListAll.
#include "gantry/storage/object_store.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

#include "azure_blob.h"
#include "gantry/core/clock.h"

namespace gantry::storage {
namespace internal {

Status ValidateKey(std::string_view key) {
  auto bad = [&](std::string_view why) {
    std::string shown(key);
    std::replace(shown.begin(), shown.end(), '\0', '?');
    return InvalidArgument("object key '" + shown + "' " + std::string(why) +
                           "; keys are '/'-separated relative names like \"run1/step-10/a.bin\"");
  };
  if (key.empty()) return bad("is empty");
  if (key.find('\0') != std::string_view::npos) return bad("contains a NUL byte");
  if (key.front() == '/') return bad("starts with '/'");
  size_t start = 0;
  while (start <= key.size()) {
    size_t end = key.find('/', start);
    if (end == std::string_view::npos) end = key.size();
    std::string_view seg = key.substr(start, end - start);
    if (seg.empty()) return bad("has an empty segment ('//' or a trailing '/')");
    if (seg == "." || seg == "..") return bad("has a '.' or '..' segment");
    start = end + 1;
  }
  return Status::Ok();
}

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

std::string StripSlashes(std::string_view s) {
  while (!s.empty() && s.front() == '/') s.remove_prefix(1);
  while (!s.empty() && s.back() == '/') s.remove_suffix(1);
  return std::string(s);
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

constexpr std::string_view kDevAccount = "devstoreaccount1";
constexpr std::string_view kDevKey =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

bool LooksLikeConnectionString(std::string_view url) {
  std::string l = Lower(url.substr(0, 64));
  for (std::string_view k : {"usedevelopmentstorage=", "defaultendpointsprotocol=", "accountname=",
                             "blobendpoint=", "accountkey=", "sharedaccesssignature="}) {
    if (l.find(k) != std::string::npos) return true;
  }
  return false;
}

// Applies StoreOptions credential overrides (they win over everything else).
void ApplyOptionOverrides(const StoreOptions& o, AzureConfig* c) {
  if (!o.endpoint.empty()) c->endpoint = o.endpoint;
  if (!o.account_key.empty()) {
    c->account_key = o.account_key;
    c->sas_token.clear();
    c->credential_source = "account key from StoreOptions";
  } else if (!o.sas_token.empty()) {
    c->sas_token = o.sas_token;
    c->account_key.clear();
    c->credential_source = "SAS token from StoreOptions";
  }
  while (!c->sas_token.empty() && c->sas_token.front() == '?') c->sas_token.erase(0, 1);
  while (!c->endpoint.empty() && c->endpoint.back() == '/') c->endpoint.pop_back();
}

}  // namespace

Result<AzureConfig> ParseConnectionString(std::string_view conn) {
  AzureConfig c;
  std::string protocol = "https", suffix = "core.windows.net";
  bool dev = false;
  size_t pos = 0;
  while (pos < conn.size()) {
    size_t end = conn.find(';', pos);
    if (end == std::string_view::npos) end = conn.size();
    std::string_view part = conn.substr(pos, end - pos);
    pos = end + 1;
    if (Trim(part).empty()) continue;
    size_t eq = part.find('=');
    if (eq == std::string_view::npos) {
      // Never echo the part: it may be (a piece of) a key.
      return InvalidArgument(
          "connection string: a part without '=' (expected Key=Value;Key=Value;...)");
    }
    std::string k = Lower(Trim(part.substr(0, eq)));
    std::string v = Trim(part.substr(eq + 1));
    if (k == "usedevelopmentstorage") {
      dev = Lower(v) == "true";
    } else if (k == "defaultendpointsprotocol") {
      protocol = Lower(v);
    } else if (k == "accountname") {
      c.account = v;
    } else if (k == "accountkey") {
      c.account_key = v;
    } else if (k == "blobendpoint") {
      c.endpoint = v;
    } else if (k == "endpointsuffix") {
      suffix = v;
    } else if (k == "sharedaccesssignature") {
      c.sas_token = v;
    }  // Other services' endpoints (Queue, Table, File) are ignored.
  }
  if (dev) {
    if (c.account.empty()) c.account = kDevAccount;
    if (c.account_key.empty() && c.sas_token.empty()) c.account_key = kDevKey;
    if (c.endpoint.empty()) c.endpoint = "http://127.0.0.1:10000/" + c.account;
  }
  if (c.account.empty() && !c.endpoint.empty()) {
    // BlobEndpoint=https://acct.blob.core.windows.net or http://host:port/acct.
    std::string_view e = c.endpoint;
    size_t scheme = e.find("://");
    std::string_view rest = scheme == std::string_view::npos ? e : e.substr(scheme + 3);
    size_t slash = rest.find('/');
    std::string_view host = rest.substr(0, slash);
    if (slash != std::string_view::npos && slash + 1 < rest.size()) {
      c.account = StripSlashes(rest.substr(slash + 1));
    } else if (size_t dot = host.find('.'); dot != std::string_view::npos) {
      c.account = std::string(host.substr(0, dot));
    }
  }
  if (c.account.empty()) {
    return InvalidArgument(
        "connection string has no AccountName (and no BlobEndpoint naming one); expected "
        "\"DefaultEndpointsProtocol=https;AccountName=...;AccountKey=...;\" or "
        "\"UseDevelopmentStorage=true\"");
  }
  if (c.endpoint.empty()) c.endpoint = protocol + "://" + c.account + ".blob." + suffix;
  while (!c.endpoint.empty() && c.endpoint.back() == '/') c.endpoint.pop_back();
  while (!c.sas_token.empty() && c.sas_token.front() == '?') c.sas_token.erase(0, 1);
  if (!c.account_key.empty()) {
    c.credential_source = "AccountKey from the connection string";
  } else if (!c.sas_token.empty()) {
    c.credential_source = "SharedAccessSignature from the connection string";
  }
  return c;
}

Status ResolveAuth(const StoreOptions& o, std::string_view what, AzureConfig* c) {
  if (c->ca_file.empty()) c->ca_file = o.ca_file;
  if (c->ca_file.empty()) c->ca_file = Env("GANTRY_CA_FILE");
  if (c->ca_file.empty()) c->ca_file = Env("SSL_CERT_FILE");
  BlobAuth auth = o.auth;
  std::string auth_source = "StoreOptions::auth";
  if (auth == BlobAuth::kAuto) {
    std::string e = Lower(Trim(Env("GANTRY_STORAGE_AUTH")));
    auth_source = "GANTRY_STORAGE_AUTH";
    if (e == "entra-id" || e == "entra" || e == "bearer") {
      auth = BlobAuth::kEntraId;
    } else if (e == "key" || e == "sas") {
      auth = BlobAuth::kKeyOrSas;
    } else if (!e.empty() && e != "auto") {
      return InvalidArgument("GANTRY_STORAGE_AUTH='" + e +
                             "' is not one of auto, entra-id or key (for " + std::string(what) +
                             ")");
    }
  }
  bool has_key_or_sas = !c->account_key.empty() || !c->sas_token.empty();
  if (auth == BlobAuth::kKeyOrSas || (auth == BlobAuth::kAuto && has_key_or_sas)) {
    if (!has_key_or_sas) {
      return FailedPrecondition(std::string(what) + " has no account key or SAS token and " +
                                auth_source +
                                " rules out Entra ID: set AZURE_STORAGE_KEY, "
                                "AZURE_STORAGE_SAS_TOKEN or AZURE_STORAGE_CONNECTION_STRING, or "
                                "use a managed identity (auth=auto or entra-id)");
    }
    return Status::Ok();
  }
  // Entra ID: keys and SAS tokens are dropped so that nothing else is ever sent.
  c->account_key.clear();
  c->sas_token.clear();
  if (Lower(c->endpoint).starts_with("http://")) {
    return FailedPrecondition(std::string(what) + ": Entra ID bearer tokens are only sent over " +
                              "https, and the endpoint " + c->endpoint +
                              " is http; use an https endpoint (Azurite: --oauth basic with "
                              "--cert/--key) or an account key / SAS token");
  }
  if (o.token_source) {
    c->token_source = o.token_source;
  } else {
    security::AzureCredentialOptions cred = o.credential;
    if (cred.resource.empty()) cred.resource = kStorageResource;
    auto source = security::NewAzureTokenSource(cred, SystemClock());
    if (!source.ok()) return source.status().WithContext(std::string(what));
    c->token_source = std::move(*source);
  }
  c->credential_source = "Entra ID token from " + c->token_source->Describe();
  return Status::Ok();
}

}  // namespace internal

using internal::AzureConfig;

Result<std::vector<ObjectInfo>> ListAll(ObjectStore& store, std::string_view prefix) {
  std::vector<ObjectInfo> all;
  std::string next;
  for (;;) {
    ASSIGN_OR_RETURN(ListPage page, store.List(prefix, next));
    for (auto& o : page.objects) all.push_back(std::move(o));
    if (page.next.empty()) break;
    if (page.next == next) {
      return Internal("listing " + store.url() + ": the continuation token did not advance");
    }
    next = std::move(page.next);
  }
  std::sort(all.begin(), all.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  return all;
}

bool IsRemoteUrl(std::string_view url) {
  return url.starts_with("az://") || internal::LooksLikeConnectionString(url);
}

Result<std::unique_ptr<ObjectStore>> OpenObjectStore(std::string_view url,
                                                     const StoreOptions& options) {
  std::string u(url);
  if (u.starts_with("file://")) {
    std::string path = u.substr(7);
    if (path.empty() || path.front() != '/') {
      return InvalidArgument("store URL '" + u +
                             "': file:// URLs need an absolute path (file:///abs/dir)");
    }
    return internal::NewLocalObjectStore(path, options);
  }
  if (!u.empty() && u.front() == '/') return internal::NewLocalObjectStore(u, options);

  if (u.starts_with("az://")) {
    std::string rest = u.substr(5);
    if (rest.find('?') != std::string::npos) {
      return InvalidArgument("store URL '" + u.substr(0, u.find('?')) +
                             "?...': query parameters are not supported in az:// URLs; pass a "
                             "connection string or set AZURE_STORAGE_CONNECTION_STRING");
    }
    size_t s1 = rest.find('/');
    if (s1 == std::string::npos || s1 == 0) {
      return InvalidArgument("store URL '" + u + "': expected az://account/container[/prefix]");
    }
    AzureConfig c;
    c.account = rest.substr(0, s1);
    std::string after = rest.substr(s1 + 1);
    size_t s2 = after.find('/');
    c.container = after.substr(0, s2);
    if (s2 != std::string::npos) c.prefix = internal::StripSlashes(after.substr(s2 + 1));
    if (c.container.empty()) {
      return InvalidArgument("store URL '" + u + "': the container name is empty");
    }
    if (c.prefix.empty()) c.prefix = internal::StripSlashes(options.prefix);
    if (std::string conn = internal::Env("AZURE_STORAGE_CONNECTION_STRING"); !conn.empty()) {
      auto parsed = internal::ParseConnectionString(conn);
      if (!parsed.ok()) return parsed.status().WithContext("AZURE_STORAGE_CONNECTION_STRING");
      if (parsed->account != c.account) {
        return InvalidArgument("store URL '" + u + "' names account '" + c.account +
                               "' but AZURE_STORAGE_CONNECTION_STRING is for account '" +
                               parsed->account + "'; make them agree");
      }
      c.endpoint = parsed->endpoint;
      c.account_key = parsed->account_key;
      c.sas_token = parsed->sas_token;
      c.credential_source = "AZURE_STORAGE_CONNECTION_STRING";
    } else if (std::string key = internal::Env("AZURE_STORAGE_KEY"); !key.empty()) {
      c.account_key = key;
      c.credential_source = "AZURE_STORAGE_KEY";
    } else if (std::string sas = internal::Env("AZURE_STORAGE_SAS_TOKEN"); !sas.empty()) {
      c.sas_token = sas;
      c.credential_source = "AZURE_STORAGE_SAS_TOKEN";
    }
    if (std::string ep = internal::Env("AZURE_STORAGE_BLOB_ENDPOINT"); !ep.empty()) {
      c.endpoint = ep;
    }
    if (c.endpoint.empty()) c.endpoint = "https://" + c.account + ".blob.core.windows.net";
    c.options = options;
    internal::ApplyOptionOverrides(options, &c);
    RETURN_IF_ERROR(internal::ResolveAuth(options, "store URL '" + u + "'", &c));
    return internal::NewAzureBlobStore(std::move(c));
  }

  if (internal::LooksLikeConnectionString(u)) {
    ASSIGN_OR_RETURN(AzureConfig c, internal::ParseConnectionString(u));
    c.container = internal::StripSlashes(options.container);
    c.prefix = internal::StripSlashes(options.prefix);
    if (c.container.empty() || c.container.find('/') != std::string::npos) {
      return InvalidArgument("connection string for account '" + c.account +
                             "': StoreOptions::container must name one container (got '" +
                             options.container + "')");
    }
    c.options = options;
    internal::ApplyOptionOverrides(options, &c);
    RETURN_IF_ERROR(
        internal::ResolveAuth(options, "connection string for account '" + c.account + "'", &c));
    return internal::NewAzureBlobStore(std::move(c));
  }

  std::string shown = u.substr(0, u.find_first_of("?;"));
  return InvalidArgument("store URL '" + shown +
                         "': unknown scheme; use file:///abs/dir, /abs/dir, "
                         "az://account/container[/prefix] or an Azure connection string");
}

}  // namespace gantry::storage
