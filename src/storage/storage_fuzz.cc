// libFuzzer target for the object-store parsers that see untrusted text: store
// URLs and connection strings (user input), object keys, List Blobs XML, and
// the HTTP dates / Retry-After values in service responses. Every input either
// parses or fails with the documented status code; nothing crashes, hangs or
// touches the network or the filesystem.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "azure_blob.h"
#include "gantry/storage/object_store.h"

namespace {

namespace si = gantry::storage::internal;
using gantry::StatusCode;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// The ValidateKey contract, restated independently.
bool KeyLooksValid(std::string_view key) {
  if (key.empty() || key.front() == '/' || key.find('\0') != std::string_view::npos) return false;
  size_t start = 0;
  while (true) {
    size_t end = key.find('/', start);
    std::string_view seg =
        key.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (seg.empty() || seg == "." || seg == "..") return false;
    if (end == std::string_view::npos) return true;
    start = end + 1;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // OpenObjectStore consults these; without them an az:// URL gets an Entra
  // ID store whose token is only fetched on a request, which is never sent.
  for (const char* name :
       {"AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN",
        "AZURE_STORAGE_BLOB_ENDPOINT", "GANTRY_STORAGE_AUTH", "GANTRY_CA_FILE", "SSL_CERT_FILE"}) {
    ::unsetenv(name);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);

  gantry::Status key = si::ValidateKey(text);
  Check(key.ok() == KeyLooksValid(text));
  if (!key.ok()) Check(key.code() == StatusCode::kInvalidArgument);

  auto conn = si::ParseConnectionString(text);
  if (conn.ok()) {
    Check(!conn->account.empty());
    Check(conn->endpoint.empty() || conn->endpoint.back() != '/');
    Check(conn->sas_token.empty() || conn->sas_token.front() != '?');
  } else {
    Check(conn.status().code() == StatusCode::kInvalidArgument);
  }

  // Local paths would create directories; everything else is parsed only
  // (no credentials in the environment, no container in the options).
  if (!text.starts_with("file://") && !text.starts_with("/")) {
    (void)gantry::storage::IsRemoteUrl(text);
    // Without a key or SAS a remote store uses Entra ID; opening one fetches
    // nothing, so a store that opens is fine too.
    auto store = gantry::storage::OpenObjectStore(text);
    Check(store.ok() || store.status().code() == StatusCode::kInvalidArgument ||
          store.status().code() == StatusCode::kFailedPrecondition);
  }

  auto list = si::ParseListBlobsXml(text);
  if (!list.ok()) Check(list.status().code() == StatusCode::kDataLoss);

  (void)si::ParseHttpDate(text);
  if (auto wait = si::ParseRetryAfter(text)) Check(wait->count() >= 0);

  auto raw = si::Base64Decode(text);
  if (raw.ok()) {
    std::string again = si::Base64Encode(std::as_bytes(std::span(raw->data(), raw->size())));
    auto back = si::Base64Decode(again);
    Check(back.ok() && *back == *raw);
  }
  (void)si::UrlEncode(text, size % 2 == 0);
  return 0;
}
