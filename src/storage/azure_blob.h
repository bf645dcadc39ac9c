// Internal to gantry_storage: the two ObjectStore implementations behind
// OpenObjectStore, the key rules they share, and the Azure signing functions
// (exposed here so that unit tests can check them against known answers).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/core/text.h"
#include "gantry/storage/object_store.h"

namespace gantry::storage::internal {

// The key rules of object_store.h: InvalidArgument naming the key when it is
// empty, starts with '/', has an empty, "." or ".." segment, or a NUL.
Status ValidateKey(std::string_view key);

// A local directory store rooted at `root` (absolute). Creates `root` when
// `options.create_container` is set.
Result<std::unique_ptr<ObjectStore>> NewLocalObjectStore(const std::string& root,
                                                         const StoreOptions& options);

// Everything the Blob client needs, resolved from a URL, a connection string,
// StoreOptions and the environment.
struct AzureConfig {
  std::string account;
  std::string container;
  std::string prefix;       // "" or "a/b" (no leading or trailing '/')
  std::string endpoint;     // "https://acct.blob.core.windows.net" or
                            // "http://127.0.0.1:10000/devstoreaccount1"
  std::string account_key;  // base64 SharedKey, or empty
  std::string sas_token;    // without a leading '?', or empty
  // Where the credential came from, for messages ("AZURE_STORAGE_KEY"); never the value.
  std::string credential_source;
  // Entra ID: set (and account_key/sas_token empty) when requests carry a bearer token.
  std::shared_ptr<security::TokenSource> token_source;
  std::string ca_file;  // resolved from StoreOptions::ca_file and the environment
  StoreOptions options;
};

// Chooses the credential for `c` (keys/SAS already filled from the URL, the
// connection string, the environment and StoreOptions): keeps a key or SAS,
// or builds the Entra ID token source (see object_store.h). `what` names the
// store in messages. Also resolves the CA file.
Status ResolveAuth(const StoreOptions& options, std::string_view what, AzureConfig* c);

// Parses "Key=Value;..." (keys case-insensitive; values may contain '=').
// UseDevelopmentStorage=true expands to Azurite's well-known account.
// InvalidArgument (without echoing secrets) when malformed or without an account.
Result<AzureConfig> ParseConnectionString(std::string_view conn);

Result<std::unique_ptr<ObjectStore>> NewAzureBlobStore(AzureConfig config);

// --- Signing (SharedKey and service SAS), exposed for tests ----------------

struct SignInput {
  std::string verb;  // "PUT"
  // Standard headers in StringToSign order; empty when absent.
  std::string content_encoding, content_language, content_length, content_md5, content_type, date,
      if_modified_since, if_match, if_none_match, if_unmodified_since, range;
  std::vector<std::pair<std::string, std::string>> ms_headers;  // x-ms-* (any case)
  std::string account;
  std::string path;  // URI path as sent, e.g. "/devstoreaccount1/c/b"
  std::vector<std::pair<std::string, std::string>> query;  // decoded name/value
};

// The SharedKey StringToSign (Content-Length "0" is written as "").
std::string SharedKeyStringToSign(const SignInput& in);
// Base64(HMAC-SHA256(Base64Decode(key), text)); InvalidArgument when the key is not base64.
Result<std::string> HmacSha256Base64(std::string_view base64_key, std::string_view text);

struct SasParams {
  std::string permissions;             // sp, e.g. "racwdl"
  std::string start;                   // st, ISO 8601 "2026-11-30T00:00:00Z" (may be empty)
  std::string expiry;                  // se
  std::string version = "2021-12-02";  // sv (>= 2020-12-06 layout)
  std::string protocol;                // spr, e.g. "https,http" (may be empty)
  std::string container;
  std::string blob;  // empty: a container SAS (sr=c), else sr=b
};
// A service SAS query string "sp=..&st=..&se=..&spr=..&sv=..&sr=..&sig=.."
// (values URL-encoded), signed with the account key.
Result<std::string> MakeServiceSas(std::string_view account, std::string_view base64_key,
                                   const SasParams& params);

// Percent-encodes everything except unreserved characters (and '/' when `keep_slash`).
std::string UrlEncode(std::string_view s, bool keep_slash = false);
// Base64 over raw bytes; the codec itself is core's (gantry/core/text.h).
inline std::string Base64Encode(std::span<const std::byte> data) {
  return gantry::Base64Encode(
      std::string_view(reinterpret_cast<const char*>(data.data()), data.size()));
}
using gantry::Base64Decode;

// --- List Blobs XML (tolerant, only the elements we use) -------------------

struct ParsedList {
  std::vector<ObjectInfo> objects;  // keys as in the XML (full blob names)
  std::string next_marker;
};
Result<ParsedList> ParseListBlobsXml(std::string_view xml);

// "Mon, 30 Nov 2026 06:42:02 GMT" -> seconds since the epoch (0 when unparsable).
int64_t ParseHttpDate(std::string_view s);

// --- Retries ---------------------------------------------------------------

// A Retry-After value (seconds or an HTTP date) as a wait; nullopt when absent or unparsable.
std::optional<std::chrono::milliseconds> ParseRetryAfter(const std::string& value);
// The wait before retry number `attempt` (1 = after the first failure): full
// jitter over min(max_backoff, initial_backoff * 2^(attempt-1)) using
// `random`, raised to Retry-After when given (at most 60 s).
std::chrono::milliseconds BackoffDelay(const RetryPolicy& policy, int attempt,
                                       std::optional<std::chrono::milliseconds> retry_after,
                                       uint64_t random);

}  // namespace gantry::storage::internal
