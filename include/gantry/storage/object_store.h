// Object storage: one interface over a local directory and Azure Blob Storage,
// used by checkpoint tiering, `gantry backup` and the model registry.
//
// Keys are '/'-separated relative names ("run1/step-0000000010/manifest.json");
// an empty key, a leading '/', "." / ".." segments, "//" and NUL are refused
// (InvalidArgument naming the key). Every key is relative to the store's
// prefix (the path of a file:// URL, the prefix after the container of an
// az:// URL).
//
// URLs accepted by OpenObjectStore:
//   file:///abs/dir                          a local directory (created on demand)
//   /abs/dir                                 the same
//   az://account/container[/prefix]          Azure Blob, https://account.blob.core.windows.net;
//                                            credentials from StoreOptions or the environment
//   az://container[/prefix]?conn=ENV         (not supported; use a connection string:)
//   "DefaultEndpointsProtocol=...;AccountName=...;AccountKey=...;BlobEndpoint=...;" with
//   StoreOptions::container/prefix, and "UseDevelopmentStorage=true" (Azurite's well-known
//   account devstoreaccount1 on http://127.0.0.1:10000).
// Environment (az:// URLs): AZURE_STORAGE_CONNECTION_STRING, else AZURE_STORAGE_KEY
// (SharedKey) or AZURE_STORAGE_SAS_TOKEN (SAS); AZURE_STORAGE_BLOB_ENDPOINT overrides the
// endpoint (e.g. http://127.0.0.1:10000/devstoreaccount1 for Azurite).
//
// Authentication (Blob): an account key (SharedKey) or a SAS token when one is configured,
// otherwise an Entra ID bearer token ("Authorization: Bearer ...") for the resource
// https://storage.azure.com from StoreOptions::credential (security::NewAzureTokenSource:
// a managed identity, a service principal, ...). StoreOptions::auth or
// GANTRY_STORAGE_AUTH=entra-id forces bearer tokens even when a key or SAS is in the
// environment; auth=kKeyOrSas (GANTRY_STORAGE_AUTH=key) never falls back to them. Bearer
// tokens are only sent over https (FailedPrecondition for an http:// endpoint). The
// identity needs a data-plane role on the account or container: Storage Blob Data
// Contributor to write, Storage Blob Data Reader to read. HTTPS endpoints are verified
// against StoreOptions::ca_file, else $GANTRY_CA_FILE, else $SSL_CERT_FILE, else the
// system store.
//
// Atomicity: a Put is all-or-nothing for readers. Locally it writes a hidden
// temporary file, fsyncs and renames; on Blob the blocks are staged and only
// Put Block List makes the blob visible. A failed or interrupted Put never
// leaves a partial object under the key. `if_none_match` makes a Put a
// conditional create (AlreadyExists when the key exists) - the primitive for
// commit markers written last.
//
// Errors: NotFound for a missing key, AlreadyExists for a failed conditional
// create, PermissionDenied for 401/403 (the message says which credential was
// used, never its value), Unavailable after retries are exhausted on
// 5xx/429/timeouts/resets (the message has the last status and the number of
// attempts), DataLoss when a checksum does not match. Messages name the store
// URL (without credentials) and the key.
//
// Thread-safety: every method may be called from many threads at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/security/azure_credential.h"

namespace gantry::storage {

class FileSystem;

struct ObjectInfo {
  std::string key;  // relative to the store's prefix
  uint64_t size = 0;
  std::string etag;           // opaque; changes whenever the object is replaced
  int64_t modified_unix = 0;  // last modification, seconds since the epoch
};

struct ListPage {
  std::vector<ObjectInfo> objects;  // sorted by key
  std::string next;                 // continuation token; empty on the last page
};

struct PutOptions {
  bool if_none_match = false;  // conditional create: AlreadyExists when the key exists
  std::string content_type = "application/octet-stream";
};

// Retry policy for remote stores: exponential backoff with full jitter,
// honouring Retry-After (seconds or HTTP date) when the server sends it.
struct RetryPolicy {
  int max_attempts = 6;  // including the first
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{10000};
  std::chrono::milliseconds request_timeout{60000};  // one HTTP exchange (transfer stalls count)
};

// How a Blob store authenticates (see the file comment).
enum class BlobAuth {
  kAuto,      // account key or SAS when configured, else an Entra ID bearer token
  kEntraId,   // always a bearer token, ignoring keys and SAS tokens in the environment
  kKeyOrSas,  // never a bearer token: FailedPrecondition when there is no key or SAS
};

// The audience of Blob bearer tokens.
inline constexpr const char* kStorageResource = "https://storage.azure.com";

// The default identity (security::AzureCredentialOptions' default kind) asking
// for kStorageResource.
inline security::AzureCredentialOptions StorageCredential() {
  security::AzureCredentialOptions o;
  o.resource = kStorageResource;
  return o;
}

struct StoreOptions {
  // For connection-string URLs: the container and an optional key prefix.
  std::string container;
  std::string prefix;
  // Credentials that override the environment (never logged).
  std::string account_key;  // base64 SharedKey
  std::string sas_token;    // "sv=...&sig=..." with or without a leading '?'
  std::string endpoint;     // e.g. "http://127.0.0.1:10000/devstoreaccount1"
  // Entra ID. `auth` is overridden by $GANTRY_STORAGE_AUTH (auto | entra-id | key) only
  // while it is kAuto. Tokens come from `token_source` when set (shared with the caller),
  // else from a source built from `credential`, whose resource must be the storage
  // audience (an empty resource means kStorageResource). Account keys are local auth:
  // `gantry doctor` flags them; prefer a managed identity with a Storage Blob Data role.
  BlobAuth auth = BlobAuth::kAuto;
  security::AzureCredentialOptions credential = StorageCredential();
  std::shared_ptr<security::TokenSource> token_source;
  // PEM bundle that https endpoints are verified against (e.g. Azurite's test
  // certificate); empty: $GANTRY_CA_FILE, else $SSL_CERT_FILE, else the system store.
  std::string ca_file;
  // Large objects go up as blocks of this size, `parallelism` at a time, and
  // come down as ranged reads of this size, `parallelism` at a time.
  size_t block_bytes = 8u << 20;
  int parallelism = 8;
  RetryPolicy retry;
  // Creates the container (or directory) on first use when missing.
  bool create_container = true;
  // file:// stores: the filesystem the directory lives on (default: this
  // machine's); tests pass a fault-injecting or power-loss one. Must
  // outlive the store.
  FileSystem* fs = nullptr;
  // Blob: send Content-MD5 with every Put Blob / Put Block so that the service
  // verifies each block it stores (DataLoss on a mismatch). Costs an MD5 of
  // the data on both ends; turn off only where the transport is trusted.
  bool content_md5 = true;
};

// Streams bytes for PutStream: fills `buf` and returns how many bytes it
// wrote, 0 at the end; an error aborts the Put (nothing becomes visible).
using ReadFn = std::function<Result<size_t>(std::span<std::byte> buf)>;

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  // The store's URL without credentials, for messages ("az://acct/ckpts/run1").
  virtual std::string url() const = 0;

  virtual Status Put(std::string_view key, std::span<const std::byte> data,
                     const PutOptions& options = {}) = 0;
  // Uploads a local file; large files in parallel blocks read with pread.
  virtual Status PutFile(std::string_view key, const std::string& path,
                         const PutOptions& options = {}) = 0;
  // Uploads a stream of unknown length (blocks are sent as they fill).
  virtual Status PutStream(std::string_view key, const ReadFn& read,
                           const PutOptions& options = {}) = 0;

  virtual Result<std::string> Get(std::string_view key) = 0;
  // Reads exactly `out.size()` bytes at `offset`; DataLoss naming the key when
  // the object is shorter.
  virtual Status GetRange(std::string_view key, uint64_t offset, std::span<std::byte> out) = 0;
  // Downloads to a local file (written to "<path>.tmp-*" and renamed), large
  // objects as parallel ranged reads.
  virtual Status GetFile(std::string_view key, const std::string& path) = 0;

  virtual Result<ObjectInfo> Stat(std::string_view key) = 0;
  // One page of objects whose key starts with `prefix` (relative to the
  // store's prefix), at most `max_results` (0 = the backend's default),
  // continuing after `next` from the previous page.
  virtual Result<ListPage> List(std::string_view prefix, std::string_view next = {},
                                int max_results = 0) = 0;
  // Deleting a missing key is NotFound.
  virtual Status Delete(std::string_view key) = 0;
};

// Every object under `prefix`, following continuation tokens.
Result<std::vector<ObjectInfo>> ListAll(ObjectStore& store, std::string_view prefix);

// Opens a store for `url` (see the file comment). InvalidArgument naming the
// URL for an unknown scheme or a malformed URL / connection string;
// FailedPrecondition when a bearer token would go to an http:// endpoint, or with
// auth = kKeyOrSas when there is no key or SAS ("set AZURE_STORAGE_KEY,
// AZURE_STORAGE_SAS_TOKEN or AZURE_STORAGE_CONNECTION_STRING"); InvalidArgument for a
// bad GANTRY_STORAGE_AUTH or credential. No token is fetched until the first request.
Result<std::unique_ptr<ObjectStore>> OpenObjectStore(std::string_view url,
                                                     const StoreOptions& options = {});

// True for "az://..." and connection strings (remote stores).
bool IsRemoteUrl(std::string_view url);

}  // namespace gantry::storage
