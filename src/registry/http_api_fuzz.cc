// libFuzzer target for the registry's HTTP handlers (http_api.h
// HandleHttpRequest, the route table and every handler behind it), called as
// the server calls them, against a SQLite registry and a file:// artifact
// store in a temporary folder holding one model ("bert", version 1, alias
// "champion"). The state carries over between inputs, as a server's does.
// Input: byte 0 picks the credential (admin, writer or reader API key, an
// invalid one, none), then "METHOD target\n" and the JSON body. Every answer
// has a status the API documents and, unless it is a blob or manifest
// download, a JSON body; nothing crashes or throws.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "gantry/core/json.h"
#include "gantry/registry/http_api.h"
#include "gantry/registry/registry.h"
#include "gantry/security/key_store.h"
#include "gantry/storage/object_store.h"

namespace {

namespace fs = std::filesystem;
namespace reg = gantry::registry;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

struct Fixture {
  fs::path root;
  std::unique_ptr<reg::Registry> registry;
  std::map<std::string, std::string> keys;  // role -> secret
  reg::HttpApiOptions options;
};

Fixture* g_fixture = nullptr;

void RemoveFixture() {
  if (g_fixture != nullptr) {
    g_fixture->registry.reset();
    std::error_code ec;
    fs::remove_all(g_fixture->root, ec);
  }
}

Fixture& Get() {
  if (g_fixture != nullptr) return *g_fixture;
  auto f = std::make_unique<Fixture>();
  char t[] = "/tmp/gantry-fuzz-registry-XXXXXX";
  Check(::mkdtemp(t) != nullptr);
  f->root = t;
  fs::create_directories(f->root / "m");
  fs::create_directories(f->root / "spool");
  std::ofstream(f->root / "m/w.bin") << "weights";
  auto meta = reg::OpenSqliteMetadataStore((f->root / "r.sqlite").string());
  Check(meta.ok());
  auto store = gantry::storage::OpenObjectStore("file://" + (f->root / "a").string());
  Check(store.ok());
  f->registry = std::make_unique<reg::Registry>(*std::move(meta), *std::move(store));
  reg::RegisterRequest req;
  req.name = "bert";
  req.path = (f->root / "m").string();
  req.lineage.run_id = "run-1";
  Check(f->registry->Register(req).ok());
  Check(f->registry->SetAlias("bert", "champion", 1).ok());
  auto ks = gantry::security::KeyStore::Open(":memory:");
  Check(ks.ok());
  for (const char* role : {"reader", "writer", "admin"}) {
    auto k = (*ks)->Create(std::string("k-") + role, role, 0, 1);
    Check(k.ok());
    f->keys[role] = k->second;
  }
  auto snap = (*ks)->Snapshot();
  Check(snap.ok());
  f->options.keys = *snap;
  f->options.spool_dir = (f->root / "spool").string();
  f->options.max_blob_bytes = 1 << 20;
  g_fixture = f.release();
  std::atexit(RemoveFixture);
  return *g_fixture;
}

bool Documented(int status) {
  switch (status) {
    case 200:
    case 201:
    case 400:
    case 401:
    case 403:
    case 404:
    case 405:
    case 409:
    case 412:
    case 413:
      return true;
    default:
      return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Fixture& f = Get();
  const uint8_t cred = data[0] % 5;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t nl = text.find('\n');
  std::string_view line = text.substr(0, nl);
  size_t sp = line.find(' ');
  if (sp == std::string_view::npos) return 0;

  gantry::http::ServerRequest req;
  req.method = std::string(line.substr(0, sp));
  req.target = std::string(line.substr(sp + 1));
  size_t q = req.target.find('?');
  req.path = req.target.substr(0, q);
  req.query = q == std::string::npos ? "" : req.target.substr(q + 1);
  req.body = std::string(nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1));
  req.peer = "127.0.0.1:40000";
  static const char* const kRoles[] = {"admin", "writer", "reader"};
  if (cred < 3) req.headers.push_back({"Authorization", "Bearer " + f.keys[kRoles[cred]]});
  if (cred == 3) req.headers.push_back({"X-API-Key", "gk_not-a-key"});

  gantry::http::ServerResponse resp;
  reg::HandleHttpRequest(*f.registry, f.options, req, &resp);
  Check(Documented(resp.status));
  if (cred >= 3) Check(resp.status == 401 || resp.status == 404 || resp.status == 405);
  if (resp.body_file.empty() && resp.content_type.starts_with("application/json")) {
    gantry::Result<gantry::Json> j = gantry::ParseJson(resp.body, "registry answer");
    Check(j.ok() && j->is_object());
    if (resp.status >= 400) Check(j->contains("error_code"));
  }
  if (resp.body_file_temporary) ::unlink(resp.body_file.c_str());
  return 0;
}
