// `gantry registry ...`: a thin CLI over registry::Registry (flag parsing and
// printing only). See docs/registry.md.
//
// Store selection: --db PATH (SQLite metadata; env GANTRY_REGISTRY_DB) and
// --artifacts URL (file:///dir, /dir, az://account/container[/prefix] or a
// connection string with --container; env GANTRY_REGISTRY_ARTIFACTS). The
// artifacts URL is remembered in the database on first use, so later
// commands need only --db.
//
// Exit codes: 0 ok; 1 the operation failed (not found, verification or
// signature refused, conflict); 2 usage or configuration error.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/stat.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "cli.h"
#include "gantry/core/json.h"
#include "gantry/core/table.h"
#include "gantry/registry/http_api.h"
#include "gantry/registry/registry.h"

namespace gantry::cli {
namespace {

struct RegistryFlags {
  CommonFlags common;
  std::string db, artifacts, container, prefix, audit_log;
  // register
  std::string name, path, description, from_ckpt, run, step, run_id, commit, parent;
  std::vector<std::string> tags, datasets, metrics;
  // refs and others
  std::string ref, alias, dest, key, dir, sig, pubkey_file, comment, keyid, alg = "ed25519", out;
  std::vector<std::string> pubkeys;
  int64_t version = 0;
  int64_t expect = -1;
  bool require_signature = false, overwrite = false, no_sig_file = false, delete_model = false;
  std::string require_signatures;  // policy: on|off
  std::string listen = "127.0.0.1:5000";
  // remote client (--server) and serve's access control
  std::string server, api_key, keys_db, jwt_secret_file, jwt_public_key, jwt_issuer, jwt_audience;
  int64_t max_upload_mb = 256;
  std::string spool_dir;
  // search
  std::string q_name, q_tag, q_alias, q_run, q_dataset, q_source, q_commit, q_parent;
  int limit = 100;
};


// The audit log lives for the whole process (the registry only borrows it);
// its destructor writes the final checkpoint.
std::unique_ptr<security::AuditLog>& AuditSlot() {
  static std::unique_ptr<security::AuditLog> log;
  return log;
}

Result<std::unique_ptr<registry::Registry>> Open(const RegistryFlags& f) {
  std::string db = f.db;
  if (db.empty() && std::getenv("GANTRY_REGISTRY_DB")) db = std::getenv("GANTRY_REGISTRY_DB");
  if (db.empty()) {
    return InvalidArgument(
        "no registry database: pass --db PATH.sqlite or --db postgresql://user@host/dbname, or set "
        "GANTRY_REGISTRY_DB");
  }
  ASSIGN_OR_RETURN(auto meta, registry::OpenMetadataStore(db));
  std::string url = f.artifacts;
  if (url.empty() && std::getenv("GANTRY_REGISTRY_ARTIFACTS")) {
    url = std::getenv("GANTRY_REGISTRY_ARTIFACTS");
  }
  ASSIGN_OR_RETURN(std::string saved, meta->GetSetting("artifacts_url"));
  ASSIGN_OR_RETURN(std::string saved_container, meta->GetSetting("artifacts_container"));
  if (url.empty()) {
    url = saved;
  } else if (saved.empty() && !url.starts_with("DefaultEndpointsProtocol") &&
             url.find("AccountKey=") == std::string::npos) {
    // Never store a connection string (it holds a secret).
    RETURN_IF_ERROR(meta->SetSetting("artifacts_url", url));
    if (!f.container.empty()) RETURN_IF_ERROR(meta->SetSetting("artifacts_container", f.container));
  }
  if (url.empty()) {
    return InvalidArgument(
        "no artifact store: pass --artifacts URL (file:///dir or "
        "az://account/container) the first time");
  }
  storage::StoreOptions o;
  o.container = f.container.empty() ? saved_container : f.container;
  o.prefix = f.prefix;
  ASSIGN_OR_RETURN(auto store, storage::OpenObjectStore(url, o));
  auto reg = std::make_unique<registry::Registry>(std::move(meta), std::move(store));
  std::string audit = f.audit_log;
  if (audit.empty() && std::getenv("GANTRY_REGISTRY_AUDIT_LOG")) {
    audit = std::getenv("GANTRY_REGISTRY_AUDIT_LOG");
  }
  if (!audit.empty()) {
    security::AuditOptions ao;
    ao.path = audit;
    ASSIGN_OR_RETURN(AuditSlot(), security::AuditLog::Open(ao));
    const char* user = std::getenv("USER");
    reg->SetAudit(AuditSlot().get(), user ? user : "unknown");
  }
  return reg;
}

Result<std::pair<std::string, std::string>> SplitKv(const std::string& kv, std::string_view what) {
  size_t eq = kv.find('=');
  if (eq == std::string::npos || eq == 0) {
    return InvalidArgument(std::string(what) + " '" + kv + "' must be KEY=VALUE");
  }
  return std::make_pair(kv.substr(0, eq), kv.substr(eq + 1));
}

std::string Time(int64_t unix) {
  std::time_t t = static_cast<std::time_t>(unix);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

void PrintVersion(const registry::ModelVersion& v) {
  std::cout << v.model << "/" << v.version << "  created " << Time(v.created_unix) << "\n";
  if (!v.description.empty()) std::cout << "  description: " << v.description << "\n";
  std::cout << "  manifest sha256: " << v.manifest_sha256 << "\n";
  std::cout << "  files: " << v.files.size() << " (" << v.total_bytes << " bytes)\n";
  if (!v.aliases.empty()) {
    std::cout << "  aliases:";
    for (const auto& a : v.aliases) std::cout << " " << a;
    std::cout << "\n";
  }
  for (const auto& [k, val] : v.tags) std::cout << "  tag " << k << "=" << val << "\n";
  const auto& l = v.lineage;
  if (!l.source.empty()) std::cout << "  source: " << l.source << "\n";
  if (!l.run_id.empty()) std::cout << "  run id: " << l.run_id << "\n";
  if (!l.code_commit.empty()) std::cout << "  code commit: " << l.code_commit << "\n";
  if (!l.parent.empty()) std::cout << "  parent: " << l.parent << "\n";
  for (const auto& d : l.dataset_digests) std::cout << "  dataset: " << d << "\n";
  if (!l.metrics.empty()) std::cout << "  metrics: " << l.metrics.dump() << "\n";
  std::cout << "  signatures: "
            << (v.signer_keyids.empty() ? std::string("none")
                                        : fmt::format("{}", fmt::join(v.signer_keyids, ", ")))
            << "\n";
}

// --server URL (or GANTRY_REGISTRY_SERVER): talk to `gantry registry serve`
// instead of opening the stores. The credential (an API key or a JWT) comes
// from --api-key or GANTRY_API_KEY and is sent as "Authorization: Bearer".
std::optional<registry::RemoteRegistry> Remote(const RegistryFlags& f) {
  std::string server = f.server;
  if (server.empty() && std::getenv("GANTRY_REGISTRY_SERVER")) {
    server = std::getenv("GANTRY_REGISTRY_SERVER");
  }
  if (server.empty()) return std::nullopt;
  while (server.ends_with("/")) server.pop_back();
  registry::RemoteOptions o;
  o.server = server;
  o.credential = f.api_key;
  if (o.credential.empty() && std::getenv("GANTRY_API_KEY")) {
    o.credential = std::getenv("GANTRY_API_KEY");
  }
  return registry::RemoteRegistry(o);
}

std::string Enc(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

int DoRegister(const RegistryFlags& f) {
  auto remote = Remote(f);
  Result<std::unique_ptr<registry::Registry>> reg = InvalidArgument("unused");
  if (!remote) {
    reg = Open(f);
    if (!reg.ok()) return Fail("registry register", reg.status());
  }
  registry::RegisterRequest req;
  req.name = f.name;
  req.path = f.path;
  req.description = f.description;
  req.lineage.run_id = f.run_id;
  req.lineage.code_commit = f.commit;
  req.lineage.parent = f.parent;
  req.lineage.dataset_digests = f.datasets;
  for (const auto& kv : f.tags) {
    auto p = SplitKv(kv, "--tag");
    if (!p.ok()) return Fail("registry register", p.status());
    req.tags[p->first] = p->second;
  }
  for (const auto& kv : f.metrics) {
    auto p = SplitKv(kv, "--metric");
    if (!p.ok()) return Fail("registry register", p.status());
    char* end = nullptr;
    double d = std::strtod(p->second.c_str(), &end);
    if (end && *end == '\0' && !p->second.empty()) {
      req.lineage.metrics[p->first] = d;
    } else {
      req.lineage.metrics[p->first] = p->second;
    }
  }
  // --from-ckpt reads the checkpoint locally (the same code either way), then
  // registers its step directory in the local store or through the server.
  registry::CheckpointSource src;
  if (!f.from_ckpt.empty()) {
    if (!f.path.empty()) {
      return Fail("registry register", InvalidArgument("pass either PATH or --from-ckpt, not both"));
    }
    src.root = f.from_ckpt;
    src.run = f.run.empty() ? "default" : f.run;
    if (!f.step.empty() && f.step != "latest") {
      char* end = nullptr;
      long long s = std::strtoll(f.step.c_str(), &end, 10);
      if (!end || *end != '\0' || s < 0) {
        return Fail("registry register",
                    InvalidArgument("--step '" + f.step + "' must be a number or latest"));
      }
      src.step = s;
    }
  } else if (f.path.empty()) {
    return Fail("registry register",
                InvalidArgument("pass a model PATH (directory or file) or --from-ckpt ROOT"));
  }
  if (remote) {
    auto j = f.from_ckpt.empty() ? remote->Register(req) : remote->RegisterCheckpoint(req, src);
    if (!j.ok()) return Fail("registry register", j.status());
    if (f.common.json) {
      std::cout << j->dump(2) << "\n";
    } else {
      std::cout << "registered " << j->value("name", "") << "/" << j->value("version", "") << " on "
                << f.server << " (" << (*j)["files"].size() << " files, "
                << j->value("total_bytes", uint64_t{0}) << " bytes, manifest "
                << j->value("manifest_sha256", "").substr(0, 16) << ")\n";
    }
    return kExitOk;
  }
  Result<registry::ModelVersion> v =
      f.from_ckpt.empty() ? (*reg)->Register(req) : (*reg)->RegisterCheckpoint(req, src);
  if (!v.ok()) return Fail("registry register", v.status());
  if (f.common.json) {
    std::cout << registry::ToJson(*v).dump(2) << "\n";
  } else {
    std::cout << "registered " << v->model << "/" << v->version << " (" << v->files.size()
              << " files, " << v->total_bytes << " bytes, manifest "
              << v->manifest_sha256.substr(0, 16) << ")\n";
  }
  return kExitOk;
}

int DoList(const RegistryFlags& f) {
  if (auto remote = Remote(f)) {
    auto j = remote->Call("GET", "registered-models/search?max_results=1000");
    if (!j.ok()) return Fail("registry list", j.status());
    if (f.common.json) {
      std::cout << j->dump(2) << "\n";
      return kExitOk;
    }
    for (const auto& m : (*j)["registered_models"]) {
      std::string aliases;
      for (const auto& a : m["aliases"])
        aliases +=
            (aliases.empty() ? "" : " ") + a.value("alias", "") + "->" + a.value("version", "");
      std::string latest = m.value("latest_version", "");
      std::cout << fmt::format("{:<32} latest {:<5} {}\n", m.value("name", ""),
                               latest.empty() ? std::string("-") : latest, aliases);
    }
    return kExitOk;
  }
  auto reg = Open(f);
  if (!reg.ok()) return Fail("registry list", reg.status());
  auto models = (*reg)->meta().ListModels();
  if (!models.ok()) return Fail("registry list", models.status());
  if (f.common.json) {
    Json j = Json::array();
    for (const auto& m : *models) j.push_back(registry::ToJson(m));
    std::cout << Json{{"registered_models", j}}.dump(2) << "\n";
    return kExitOk;
  }
  for (const auto& m : *models) {
    std::string aliases;
    for (const auto& [a, v] : m.aliases)
      aliases += (aliases.empty() ? "" : " ") + a + "->" + std::to_string(v);
    std::cout << fmt::format(
        "{:<32} latest {:<5} {}\n", m.name,
        m.latest_version == 0 ? std::string("-") : std::to_string(m.latest_version), aliases);
  }
  return kExitOk;
}

int DoShow(const RegistryFlags& f) {
  if (auto remote = Remote(f)) {
    std::string ep;
    std::string r = f.ref;
    if (r.starts_with("models:/")) r.erase(0, 8);
    if (size_t at = r.find('@'); at != std::string::npos) {
      ep = "registered-models/alias?name=" + Enc(r.substr(0, at)) +
           "&alias=" + Enc(r.substr(at + 1));
    } else if (size_t sl = r.find('/'); sl != std::string::npos) {
      ep = "model-versions/get?name=" + Enc(r.substr(0, sl)) + "&version=" + Enc(r.substr(sl + 1));
    } else {
      ep = "registered-models/get?name=" + Enc(r);
    }
    auto j = remote->Call("GET", ep);
    if (!j.ok()) return Fail("registry show", j.status());
    std::cout
        << (j->contains("model_version") ? (*j)["model_version"] : (*j)["registered_model"]).dump(2)
        << "\n";
    return kExitOk;
  }
  auto reg = Open(f);
  if (!reg.ok()) return Fail("registry show", reg.status());
  // "name" shows the model; "name/3" or "name@alias" a version.
  if (f.ref.find('/') == std::string::npos && f.ref.find('@') == std::string::npos) {
    auto m = (*reg)->meta().GetModel(f.ref);
    if (!m.ok()) return Fail("registry show", m.status());
    if (f.common.json) {
      std::cout << registry::ToJson(*m).dump(2) << "\n";
      return kExitOk;
    }
    std::cout << m->name << "  created " << Time(m->created_unix) << ", updated "
              << Time(m->updated_unix) << "\n";
    if (!m->description.empty()) std::cout << "  description: " << m->description << "\n";
    std::cout << "  latest version: " << m->latest_version << "\n";
    for (const auto& [a, v] : m->aliases) std::cout << "  alias " << a << " -> " << v << "\n";
    for (const auto& [k, v] : m->tags) std::cout << "  tag " << k << "=" << v << "\n";
    return kExitOk;
  }
  auto v = (*reg)->Resolve(f.ref);
  if (!v.ok()) return Fail("registry show", v.status());
  if (f.common.json) {
    std::cout << registry::ToJson(*v).dump(2) << "\n";
  } else {
    PrintVersion(*v);
  }
  return kExitOk;
}

int DoVersions(const RegistryFlags& f) {
  if (auto remote = Remote(f)) {
    auto j = remote->Call("GET", "model-versions/search?name=" + Enc(f.name));
    if (!j.ok()) return Fail("registry versions", j.status());
    if (f.common.json) {
      std::cout << j->dump(2) << "\n";
      return kExitOk;
    }
    for (const auto& v : (*j)["model_versions"]) {
      std::string aliases;
      for (const auto& a : v["aliases"])
        aliases += (aliases.empty() ? "" : ",") + a.get<std::string>();
      std::cout << fmt::format("{:>5}  {}  {:>12}  {}  {}{}\n", v.value("version", ""),
                               Time(v.value("creation_timestamp", int64_t{0}) / 1000),
                               v.value("total_bytes", uint64_t{0}),
                               v.value("manifest_sha256", "").substr(0, 16),
                               v["signatures"].empty() ? "unsigned" : "signed",
                               aliases.empty() ? "" : "  [" + aliases + "]");
    }
    return kExitOk;
  }
  auto reg = Open(f);
  if (!reg.ok()) return Fail("registry versions", reg.status());
  auto vs = (*reg)->meta().ListVersions(f.name);
  if (!vs.ok()) return Fail("registry versions", vs.status());
  if (f.common.json) {
    Json j = Json::array();
    for (const auto& v : *vs) j.push_back(registry::ToJson(v));
    std::cout << Json{{"model_versions", j}}.dump(2) << "\n";
    return kExitOk;
  }
  for (const auto& v : *vs) {
    std::string aliases;
    for (const auto& a : v.aliases) aliases += (aliases.empty() ? "" : ",") + a;
    std::cout << fmt::format("{:>5}  {}  {:>12}  {}  {}{}\n", v.version, Time(v.created_unix),
                             v.total_bytes, v.manifest_sha256.substr(0, 16),
                             v.signer_keyids.empty() ? "unsigned" : "signed",
                             aliases.empty() ? "" : "  [" + aliases + "]");
  }
  return kExitOk;
}

std::optional<int64_t> Expect(const RegistryFlags& f) {
  return f.expect >= 0 ? std::optional<int64_t>(f.expect) : std::nullopt;
}

int DoAliasSet(const RegistryFlags& f) {
  Status s;
  if (auto remote = Remote(f)) {
    Json body = {{"name", f.name}, {"alias", f.alias}, {"version", std::to_string(f.version)}};
    if (Expect(f)) body["expected_version"] = std::to_string(*Expect(f));
    s = remote->Call("POST", "registered-models/alias", body).status();
  } else {
    auto reg = Open(f);
    if (!reg.ok()) return Fail("registry alias set", reg.status());
    s = (*reg)->SetAlias(f.name, f.alias, f.version, Expect(f));
  }
  if (!s.ok()) return Fail("registry alias set", s);
  if (f.common.json) {
    std::cout
        << Json{{"name", f.name}, {"alias", f.alias}, {"version", std::to_string(f.version)}}.dump()
        << "\n";
  } else {
    std::cout << f.name << "@" << f.alias << " -> " << f.version << "\n";
  }
  return kExitOk;
}

int DoAliasRm(const RegistryFlags& f) {
  Status s;
  if (auto remote = Remote(f)) {
    std::string ep = "registered-models/alias?name=" + Enc(f.name) + "&alias=" + Enc(f.alias);
    if (Expect(f)) ep += "&expected_version=" + std::to_string(*Expect(f));
    s = remote->Call("DELETE", ep).status();
  } else {
    auto reg = Open(f);
    if (!reg.ok()) return Fail("registry alias rm", reg.status());
    s = (*reg)->DeleteAlias(f.name, f.alias, Expect(f));
  }
  if (!s.ok()) return Fail("registry alias rm", s);
  if (!f.common.json) std::cout << "removed " << f.name << "@" << f.alias << "\n";
  return kExitOk;
}

Json ReportJson(const registry::VerifyReport& r) {
  return Json{{"name", r.model},
              {"version", std::to_string(r.version)},
              {"files", r.files},
              {"bytes", r.bytes},
              {"signed_by_trusted", r.signed_by_trusted},
              {"verified_keyids", r.verified_keyids}};
}

// The client's own trust anchors for --server: --pubkey files plus
// GANTRY_REGISTRY_TRUSTED_KEYS (PEM files separated by ':'). The server's
// trusted-key list is never used to verify what the server sends.
Result<std::vector<security::DsseVerifier>> ClientTrustedKeys(const RegistryFlags& f) {
  std::vector<std::string> files = f.pubkeys;
  if (const char* env = std::getenv("GANTRY_REGISTRY_TRUSTED_KEYS")) {
    std::string_view rest = env;
    while (!rest.empty()) {
      size_t colon = rest.find(':');
      std::string one(rest.substr(0, colon));
      if (!one.empty()) files.push_back(one);
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    }
  }
  std::vector<security::DsseVerifier> out;
  for (const auto& p : files) {
    ASSIGN_OR_RETURN(std::string pem, ReadFile(p));
    auto v = security::DsseVerifier::FromPublicPem(pem);
    if (!v.ok()) return v.status().WithContext(p);
    out.push_back(*std::move(v));
  }
  return out;
}

void PrintReport(const RegistryFlags& f, const registry::VerifyReport& r, std::string_view what) {
  if (f.common.json) {
    std::cout << ReportJson(r).dump(2) << "\n";
    return;
  }
  std::cout << what << r.model << "/" << r.version
            << (f.dest.empty() ? std::string() : " to " + f.dest) << " (" << r.files << " files, "
            << r.bytes << " bytes verified; "
            << (r.signed_by_trusted ? "signed by trusted key " + r.verified_keyids[0]
                                    : std::string("no trusted signature"))
            << ")\n";
}

int DoDownload(const RegistryFlags& f) {
  Result<registry::VerifyReport> r = InvalidArgument("unused");
  if (auto remote = Remote(f)) {
    auto trusted = ClientTrustedKeys(f);
    if (!trusted.ok()) return Fail("registry download", trusted.status());
    registry::RemoteDownloadOptions o;
    o.overwrite = f.overwrite;
    o.require_signature = f.require_signature;
    o.write_signature = !f.no_sig_file;
    o.trusted = &*trusted;
    r = remote->Download(f.ref, f.dest, o);
  } else {
    if (!f.pubkeys.empty()) {
      return Fail("registry download", InvalidArgument("--pubkey is for --server; a local registry uses "
                                              "its trusted keys (`gantry registry trust add`)"));
    }
    auto reg = Open(f);
    if (!reg.ok()) return Fail("registry download", reg.status());
    registry::ExportOptions o;
    o.require_signature = f.require_signature;
    o.overwrite = f.overwrite;
    o.write_signature = !f.no_sig_file;
    r = (*reg)->Export(f.ref, f.dest, o);
  }
  if (!r.ok()) return Fail("registry download", r.status());
  PrintReport(f, *r, "downloaded ");
  return kExitOk;
}

int DoSign(const RegistryFlags& f) {
  auto pem = ReadFile(f.key);
  if (!pem.ok()) return Fail("registry sign", pem.status());
  auto signer = security::DsseSigner::FromPrivatePem(*pem);
  if (!signer.ok()) return Fail("registry sign", signer.status().WithContext(f.key));
  if (!f.dir.empty()) {
    // Sign a local directory (model_signing compatible), writing model.sig.
    auto bundle = registry::SignDirectory(f.dir, *signer);
    if (!bundle.ok()) return Fail("registry sign", bundle.status());
    std::string out = f.sig.empty() ? f.dir + "/" + std::string(registry::kSignatureFile) : f.sig;
    Status s = WriteFileAtomic(out, *bundle);
    if (!s.ok()) return Fail("registry sign", s);
    std::cout << "signed " << f.dir << " with key " << signer->KeyId() << " -> " << out << "\n";
    return kExitOk;
  }
  if (f.ref.empty()) return Fail("registry sign", InvalidArgument("pass a version REF or --dir DIR"));
  Result<std::string> keyid = InvalidArgument("unused");
  if (auto remote = Remote(f)) {
    // The private key stays here: sign the manifest fetched from the server
    // (checked against its recorded digest and file list), upload the bundle.
    keyid = remote->Sign(f.ref, *signer);
    if (!keyid.ok()) return Fail("registry sign", keyid.status());
    if (f.common.json) {
      std::cout << Json{{"ref", f.ref}, {"keyid", *keyid}}.dump() << "\n";
    } else {
      std::cout << "signed " << f.ref << " on " << f.server << " with key " << *keyid << "\n";
    }
    return kExitOk;
  }
  auto reg = Open(f);
  if (!reg.ok()) return Fail("registry sign", reg.status());
  keyid = (*reg)->Sign(f.ref, *signer);
  if (!keyid.ok()) return Fail("registry sign", keyid.status());
  if (f.common.json) {
    std::cout << Json{{"ref", f.ref}, {"keyid", *keyid}}.dump() << "\n";
  } else {
    std::cout << "signed " << f.ref << " with key " << *keyid << "\n";
  }
  return kExitOk;
}

int DoVerify(const RegistryFlags& f) {
  if (!f.dir.empty()) {
    std::vector<security::DsseVerifier> trusted;
    for (const auto& p : f.pubkeys) {
      auto pem = ReadFile(p);
      if (!pem.ok()) return Fail("registry verify", pem.status());
      auto v = security::DsseVerifier::FromPublicPem(*pem);
      if (!v.ok()) return Fail("registry verify", v.status().WithContext(p));
      trusted.push_back(*std::move(v));
    }
    if (trusted.empty() && (!f.db.empty() || std::getenv("GANTRY_REGISTRY_DB"))) {
      auto reg = Open(f);
      if (!reg.ok()) return Fail("registry verify", reg.status());
      auto t = (*reg)->TrustedVerifiers();
      if (!t.ok()) return Fail("registry verify", t.status());
      trusted = *std::move(t);
    }
    std::string sig = f.sig.empty() ? f.dir + "/" + std::string(registry::kSignatureFile) : f.sig;
    auto bundle = ReadFile(sig);
    if (!bundle.ok()) return Fail("registry verify", bundle.status());
    auto who = registry::VerifyDirectory(f.dir, *bundle, trusted);
    if (!who.ok()) return Fail("registry verify", who.status());
    std::cout << "OK: " << f.dir << " matches " << sig << ", signed by trusted key " << *who
              << "\n";
    return kExitOk;
  }
  if (f.ref.empty()) return Fail("registry verify", InvalidArgument("pass a version REF or --dir DIR"));
  if (auto remote = Remote(f)) {
    // Everything a download checks, against this client's keys, writing nothing.
    auto trusted = ClientTrustedKeys(f);
    if (!trusted.ok()) return Fail("registry verify", trusted.status());
    registry::RemoteDownloadOptions o;
    o.require_signature = f.require_signature;
    o.trusted = &*trusted;
    auto r = remote->Download(f.ref, "", o);
    if (!r.ok()) return Fail("registry verify", r.status());
    PrintReport(f, *r, "OK: ");
    return kExitOk;
  }
  auto reg = Open(f);
  if (!reg.ok()) return Fail("registry verify", reg.status());
  auto r = (*reg)->Verify(f.ref, f.require_signature);
  if (!r.ok()) return Fail("registry verify", r.status());
  if (f.common.json) {
    std::cout << ReportJson(*r).dump(2) << "\n";
  } else {
    std::cout << "OK: " << r->model << "/" << r->version << ": " << r->files << " files, "
              << r->bytes << " bytes match the manifest; "
              << (r->signed_by_trusted ? "signed by trusted key " + r->verified_keyids[0]
                                       : std::string("no trusted signature"))
              << "\n";
  }
  return kExitOk;
}

int DoSearch(const RegistryFlags& f) {
  if (auto remote = Remote(f)) {
    std::string ep = "model-versions/search?max_results=" + std::to_string(f.limit);
    auto add = [&](const char* key, const std::string& v) {
      if (!v.empty()) ep += std::string("&") + key + "=" + Enc(v);
    };
    add("name_like", f.q_name);
    add("tag", f.q_tag);
    add("alias", f.q_alias);
    add("run_id", f.q_run);
    add("dataset", f.q_dataset);
    add("source", f.q_source);
    add("commit", f.q_commit);
    add("parent", f.q_parent);
    auto j = remote->Call("GET", ep);
    if (!j.ok()) return Fail("registry search", j.status());
    if (f.common.json) {
      std::cout << j->dump(2) << "\n";
      return kExitOk;
    }
    for (const auto& v : (*j)["model_versions"]) {
      const Json& l = v.contains("lineage") ? v["lineage"] : Json::object();
      std::cout << fmt::format("{}/{}  run={} source={}\n", v.value("name", ""),
                               v.value("version", ""), l.value("run_id", ""),
                               l.value("source", ""));
    }
    return kExitOk;
  }
  auto reg = Open(f);
  if (!reg.ok()) return Fail("registry search", reg.status());
  registry::SearchQuery q;
  q.name_like = f.q_name;
  if (!f.q_tag.empty()) {
    size_t eq = f.q_tag.find('=');
    q.tag_key = f.q_tag.substr(0, eq);
    if (eq != std::string::npos) q.tag_value = f.q_tag.substr(eq + 1);
  }
  q.alias = f.q_alias;
  q.run_id = f.q_run;
  q.dataset_digest = f.q_dataset;
  q.source_like = f.q_source;
  q.code_commit = f.q_commit;
  q.parent = f.q_parent;
  q.limit = f.limit;
  auto vs = (*reg)->meta().Search(q);
  if (!vs.ok()) return Fail("registry search", vs.status());
  if (f.common.json) {
    Json j = Json::array();
    for (const auto& v : *vs) j.push_back(registry::ToJson(v));
    std::cout << Json{{"model_versions", j}}.dump(2) << "\n";
    return kExitOk;
  }
  for (const auto& v : *vs) {
    std::cout << fmt::format("{}/{}  run={} source={}\n", v.model, v.version, v.lineage.run_id,
                             v.lineage.source);
  }
  return kExitOk;
}

int DoKeygen(const RegistryFlags& f) {
  auto alg = security::ParseKeyAlgorithm(f.alg);
  if (!alg.ok()) return Fail("registry keygen", alg.status());
  auto kp = security::GenerateSigningKey(*alg);
  if (!kp.ok()) return Fail("registry keygen", kp.status());
  Status s = WriteFileAtomic(f.out + ".key", kp->private_pem);
  if (s.ok()) s = WriteFileAtomic(f.out + ".pub", kp->public_pem);
  if (!s.ok()) return Fail("registry keygen", s);
  ::chmod((f.out + ".key").c_str(), 0600);
  auto v = security::DsseVerifier::FromPublicPem(kp->public_pem);
  std::cout << "wrote " << f.out << ".key and " << f.out << ".pub (" << f.alg << ", key id "
            << v->KeyId() << ")\n";
  return kExitOk;
}

int DoTrustAdd(const RegistryFlags& f) {
  auto pem = ReadFile(f.pubkey_file);
  if (!pem.ok()) return Fail("registry trust add", pem.status());
  if (auto remote = Remote(f)) {
    auto j = remote->CallGantry("POST", "trusted-keys",
                                Json{{"public_pem", *pem}, {"comment", f.comment}});
    if (!j.ok()) return Fail("registry trust add", j.status().WithContext(f.pubkey_file));
    std::cout << "trusted key " << j->value("keyid", "") << " (" << j->value("algorithm", "")
              << ") on " << f.server << "\n";
    return kExitOk;
  }
  auto reg = Open(f);
  if (!reg.ok()) return Fail("registry trust add", reg.status());
  auto k = (*reg)->TrustKey(*pem, f.comment);
  if (!k.ok()) return Fail("registry trust add", k.status().WithContext(f.pubkey_file));
  std::cout << "trusted key " << k->keyid << " (" << k->algorithm << ")\n";
  return kExitOk;
}

int DoTrustLs(const RegistryFlags& f) {
  if (auto remote = Remote(f)) {
    auto j = remote->CallGantry("GET", "trusted-keys");
    if (!j.ok()) return Fail("registry trust ls", j.status());
    Json keys = j->value("trusted_keys", Json::array());
    if (f.common.json) {
      for (auto& k : keys) k.erase("public_pem");
      std::cout << keys.dump(2) << "\n";
      return kExitOk;
    }
    for (const auto& k : keys) {
      std::cout << k.value("keyid", "") << "  " << k.value("algorithm", "") << "  "
                << k.value("comment", "") << "\n";
    }
    return kExitOk;
  }
  auto reg = Open(f);
  if (!reg.ok()) return Fail("registry trust ls", reg.status());
  auto keys = (*reg)->meta().TrustedKeys();
  if (!keys.ok()) return Fail("registry trust ls", keys.status());
  if (f.common.json) {
    Json j = Json::array();
    for (const auto& k : *keys)
      j.push_back({{"keyid", k.keyid}, {"algorithm", k.algorithm}, {"comment", k.comment}});
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  for (const auto& k : *keys)
    std::cout << k.keyid << "  " << k.algorithm << "  " << k.comment << "\n";
  return kExitOk;
}

int DoTrustRm(const RegistryFlags& f) {
  Status s;
  if (auto remote = Remote(f)) {
    s = remote->CallGantry("DELETE", "trusted-keys?keyid=" + Enc(f.keyid)).status();
    if (!s.ok()) return Fail("registry trust rm", s);
    std::cout << "removed trusted key " << f.keyid << " on " << f.server << "\n";
    return kExitOk;
  }
  auto reg = Open(f);
  if (!reg.ok()) return Fail("registry trust rm", reg.status());
  s = (*reg)->UntrustKey(f.keyid);
  if (!s.ok()) return Fail("registry trust rm", s);
  std::cout << "removed trusted key " << f.keyid << "\n";
  return kExitOk;
}

int DoPolicy(const RegistryFlags& f) {
  if (!f.require_signatures.empty() && f.require_signatures != "on" &&
      f.require_signatures != "off") {
    return Fail("registry policy", InvalidArgument("--require-signatures takes on or off"));
  }
  if (auto remote = Remote(f)) {
    Result<Json> j =
        f.require_signatures.empty()
            ? remote->CallGantry("GET", "policy")
            : remote->CallGantry("POST", "policy",
                                 Json{{"require_signatures", f.require_signatures == "on"}});
    if (!j.ok()) return Fail("registry policy", j.status());
    std::cout << "require_signatures: " << (j->value("require_signatures", false) ? "on" : "off")
              << "\n";
    return kExitOk;
  }
  auto reg = Open(f);
  if (!reg.ok()) return Fail("registry policy", reg.status());
  if (!f.require_signatures.empty()) {
    Status s = (*reg)->SetSignaturesRequired(f.require_signatures == "on");
    if (!s.ok()) return Fail("registry policy", s);
  }
  auto on = (*reg)->SignaturesRequired();
  if (!on.ok()) return Fail("registry policy", on.status());
  std::cout << "require_signatures: " << (*on ? "on" : "off") << "\n";
  return kExitOk;
}

// delete NAME/VERSION (one version) or delete NAME --model (the model and
// every version). Aliases refs are refused: a delete names its number.
int DoDelete(const RegistryFlags& f) {
  std::string r = f.ref;
  if (r.starts_with("models:/")) r.erase(0, 8);
  if (r.find('@') != std::string::npos) {
    return Fail("registry delete", InvalidArgument("'" + f.ref +
                                          "' is an alias; delete names a version number "
                                          "(NAME/VERSION) or a model (NAME --model)"));
  }
  size_t slash = r.find('/');
  std::string name = r.substr(0, slash);
  int64_t version = 0;
  if (slash != std::string::npos) {
    if (f.delete_model) {
      return Fail("registry delete", InvalidArgument("--model deletes a whole model: pass NAME, not " + r));
    }
    std::string vs = r.substr(slash + 1);
    char* end = nullptr;
    long long v = std::strtoll(vs.c_str(), &end, 10);
    if (vs.empty() || !end || *end != '\0' || v < 1) {
      return Fail("registry delete", InvalidArgument("version '" + vs + "' must be a positive integer"));
    }
    version = v;
  } else if (!f.delete_model) {
    return Fail("registry delete", InvalidArgument("pass NAME/VERSION to delete one version, or NAME "
                                          "--model to delete the model and all its versions"));
  }
  Json out;
  if (auto remote = Remote(f)) {
    std::string ep = version > 0 ? "model-versions/delete?name=" + Enc(name) +
                                       "&version=" + std::to_string(version)
                                 : "registered-models/delete?name=" + Enc(name);
    auto j = remote->Call("DELETE", ep);
    if (!j.ok()) return Fail("registry delete", j.status());
    out = j->value("deleted", Json::object());
  } else {
    auto reg = Open(f);
    if (!reg.ok()) return Fail("registry delete", reg.status());
    auto rep = version > 0 ? (*reg)->DeleteVersion(name, version) : (*reg)->DeleteModel(name);
    if (!rep.ok()) return Fail("registry delete", rep.status());
    Json versions = Json::array();
    for (int64_t v : rep->versions) versions.push_back(std::to_string(v));
    out = {{"name", rep->model},
           {"versions", versions},
           {"aliases_removed", rep->aliases_removed},
           {"blobs_removed", rep->blobs_removed},
           {"manifests_removed", rep->manifests_removed},
           {"gc_errors", rep->gc_errors}};
  }
  if (f.common.json) {
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  std::string vlist;
  for (const auto& v : out.value("versions", Json::array()))
    vlist += (vlist.empty() ? "" : ",") + v.get<std::string>();
  std::cout << "deleted " << name << (version > 0 ? "/" + std::to_string(version) : std::string())
            << " (versions " << (vlist.empty() ? "none" : vlist) << "; "
            << out.value("blobs_removed", 0) << " unreferenced files removed";
  std::string aliases;
  for (const auto& a : out.value("aliases_removed", Json::array()))
    aliases += (aliases.empty() ? "" : ",") + a.get<std::string>();
  if (!aliases.empty()) std::cout << "; aliases removed: " << aliases;
  std::cout << ")\n";
  for (const auto& e : out.value("gc_errors", Json::array())) {
    std::cerr << "gantry registry delete: warning: left in the artifact store: "
              << e.get<std::string>() << "\n";
  }
  return kExitOk;
}

int DoServe(const RegistryFlags& f) {
  // Deny by default: without a credential source every request would be 401,
  // so refuse to start instead of serving a useless (or misconfigured) API.
  if (f.keys_db.empty() && f.jwt_secret_file.empty() && f.jwt_public_key.empty()) {
    return Fail(
        "serve",
        InvalidArgument(
            "no credentials configured: pass --keys-db PATH (API "
            "keys: `gantry gateway keys create --state PATH --name N --role reader|writer|admin`) "
            "and/or --jwt-secret-file / --jwt-public-key"));
  }
  if (f.max_upload_mb < 1 || f.max_upload_mb > (int64_t{1} << 22)) {
    return Fail("registry serve", InvalidArgument("--max-upload-mb must be 1..4194304"));
  }
  registry::HttpApiOptions api;
  // Blob uploads stream to a spool file (never held in memory), bounded here.
  api.max_blob_bytes = static_cast<uint64_t>(f.max_upload_mb) << 20;
  api.spool_dir = f.spool_dir;
  std::unique_ptr<security::KeyStore> keys;
  if (!f.keys_db.empty()) {
    auto ks = security::KeyStore::Open(f.keys_db);
    if (!ks.ok()) return Fail("registry serve", ks.status());
    keys = *std::move(ks);
    auto snap = keys->Snapshot();
    if (!snap.ok()) return Fail("registry serve", snap.status());
    api.keys = *snap;
    api.key_store = keys.get();
  }
  std::unique_ptr<security::JwtVerifier> jwt;
  if (!f.jwt_secret_file.empty() || !f.jwt_public_key.empty()) {
    security::JwtOptions jo;
    jo.issuer = f.jwt_issuer;
    if (!f.jwt_audience.empty()) jo.audiences.push_back(f.jwt_audience);
    std::string alg;
    if (!f.jwt_secret_file.empty()) {
      auto secret = ReadFile(f.jwt_secret_file);
      if (!secret.ok()) return Fail("registry serve", secret.status());
      while (!secret->empty() && (secret->back() == '\n' || secret->back() == '\r')) {
        secret->pop_back();
      }
      jo.keys.push_back({.alg = "HS256", .kid = "", .secret = *secret, .public_pem = ""});
    }
    if (!f.jwt_public_key.empty()) {
      auto pem = ReadFile(f.jwt_public_key);
      if (!pem.ok()) return Fail("registry serve", pem.status());
      // The algorithm follows the key type (RSA: RS256, P-256: ES256).
      security::JwtOptions probe;
      probe.keys.push_back({.alg = "RS256", .kid = "", .secret = "", .public_pem = *pem});
      alg = security::JwtVerifier::Create(probe).ok() ? "RS256" : "ES256";
      jo.keys.push_back({.alg = alg, .kid = "", .secret = "", .public_pem = *pem});
    }
    auto v = security::JwtVerifier::Create(jo);
    if (!v.ok()) return Fail("registry serve", v.status());
    jwt = *std::move(v);
    api.jwt = jwt.get();
  }
  auto reg = Open(f);
  if (!reg.ok()) return Fail("registry serve", reg.status());
  api.audit = AuditSlot().get();
  // Block the stop signals before the server thread starts so only sigwait sees them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  http::Server server;
  registry::AddHttpRoutes(**reg, api, server);
  http::ServerOptions o;
  o.listen = f.listen;
  // Only JSON bodies (at most a signature bundle) are buffered.
  o.max_body_bytes = registry::kMaxBufferedBodyBytes;
  // A request must arrive within this; a streamed blob upload only has to
  // keep moving (the limit then counts from the last bytes received).
  o.read_timeout = std::chrono::seconds(600);
  Status s = server.Start(o);
  if (!s.ok()) return Fail("registry serve", s);
  std::cout << "serving the registry (MLflow-shaped /api/2.0/mlflow/..., blobs under "
               "/api/2.0/gantry/; "
            << (keys ? "API keys" : "") << (keys && jwt ? " + " : "") << (jwt ? "JWT" : "")
            << ", deny by default) on port " << server.port() << std::endl;
  int sig = 0;
  sigwait(&set, &sig);
  server.Stop();
  return kExitOk;
}

}  // namespace

void RegisterRegistry(CLI::App& app, Action* action) {
  auto flags = std::make_shared<RegistryFlags>();
  CLI::App* reg = app.add_subcommand(
      "registry",
      "Model registry: versions, aliases, lineage, signed manifests (gantry registry --help)");
  reg->require_subcommand(1);
  reg->footer(
      "Stores: --db PATH.sqlite (or GANTRY_REGISTRY_DB) and, the first time, --artifacts URL\n"
      "(file:///dir or az://account/container; or GANTRY_REGISTRY_ARTIFACTS).\n"
      "References: NAME (latest), NAME/VERSION, NAME@ALIAS, models:/NAME/VERSION, "
      "models:/NAME@ALIAS.\n"
      "Exit codes: 0 ok, 1 the operation failed or was refused, 2 usage error. See "
      "docs/registry.md.");
  auto common = [flags](CLI::App* c) {
    AddCommonFlags(c, &flags->common);
    c->add_option(
        "--db", flags->db,
        "Registry metadata database: a SQLite file path, or a PostgreSQL URI "
        "postgresql://user[:pw]@host[:port]/dbname (the database must exist; the schema is "
        "created on first use)");
    c->add_option("--artifacts", flags->artifacts,
                  "Artifact store URL (remembered in the database)");
    c->add_option("--container", flags->container,
                  "Container, with a connection string in --artifacts");
    c->add_option(
        "--audit-log", flags->audit_log,
        "Append every change to this hash-chained audit log (or GANTRY_REGISTRY_AUDIT_LOG; "
        "check with `gantry audit verify`)");
  };
  // Commands that can talk to `gantry registry serve` instead of the stores.
  auto remote = [flags](CLI::App* c) {
    c->add_option("--server", flags->server,
                  "Registry server http://HOST:PORT (or GANTRY_REGISTRY_SERVER; plain http only)");
    c->add_option("--api-key", flags->api_key,
                  "API key or JWT for --server (or GANTRY_API_KEY); prefer the environment");
  };
  auto set = [flags, action](CLI::App* c, int (*fn)(const RegistryFlags&)) {
    c->callback([flags, action, fn] {
      *action = [flags, fn] {
        if (!ApplyCommonFlags(flags->common)) return kExitUsage;
        return fn(*flags);
      };
    });
  };

  CLI::App* r = reg->add_subcommand(
      "register", "Register a new version from a directory, a file or a checkpoint");
  common(r);
  remote(r);
  r->add_option("name", flags->name, "Model name")->required();
  r->add_option("path", flags->path, "Model directory or single file (e.g. model.safetensors)");
  r->add_option("--from-ckpt", flags->from_ckpt, "Checkpoint root to register a step from");
  r->add_option("--run", flags->run, "Checkpoint run (with --from-ckpt)");
  r->add_option("--step", flags->step,
                "Checkpoint step or 'latest' (default latest that verifies)");
  r->add_option("--description", flags->description, "Version description");
  r->add_option("--tag", flags->tags, "KEY=VALUE (repeatable)");
  r->add_option("--run-id", flags->run_id, "Training run id (lineage)");
  r->add_option("--commit", flags->commit, "Code commit (lineage)");
  r->add_option("--dataset", flags->datasets, "Dataset digest (lineage, repeatable)");
  r->add_option("--parent", flags->parent, "Parent version NAME/VERSION (lineage)");
  r->add_option("--metric", flags->metrics, "NAME=VALUE (lineage, repeatable)");
  set(r, DoRegister);

  CLI::App* l = reg->add_subcommand("list", "List registered models");
  common(l);
  remote(l);
  set(l, DoList);

  CLI::App* sh =
      reg->add_subcommand("show", "Show a model (NAME) or a version (NAME/V, NAME@ALIAS)");
  common(sh);
  remote(sh);
  sh->add_option("ref", flags->ref, "NAME, NAME/VERSION or NAME@ALIAS")->required();
  set(sh, DoShow);

  CLI::App* vs = reg->add_subcommand("versions", "List the versions of a model");
  common(vs);
  remote(vs);
  vs->add_option("name", flags->name, "Model name")->required();
  set(vs, DoVersions);

  CLI::App* al =
      reg->add_subcommand("alias", "Move or remove aliases (atomic, optional compare-and-set)");
  al->require_subcommand(1);
  CLI::App* as = al->add_subcommand("set", "Point ALIAS at VERSION");
  common(as);
  remote(as);
  as->add_option("name", flags->name, "Model name")->required();
  as->add_option("alias", flags->alias, "Alias (production, staging, ...)")->required();
  as->add_option("version", flags->version, "Version number")->required();
  as->add_option("--expect", flags->expect,
                 "Only if the alias points at this version now (0: unset)");
  set(as, DoAliasSet);
  CLI::App* ar = al->add_subcommand("rm", "Remove ALIAS");
  common(ar);
  remote(ar);
  ar->add_option("name", flags->name, "Model name")->required();
  ar->add_option("alias", flags->alias, "Alias")->required();
  ar->add_option("--expect", flags->expect, "Only if the alias points at this version now");
  set(ar, DoAliasRm);

  CLI::App* dl =
      reg->add_subcommand("download", "Export a version to a directory, verifying every byte");
  common(dl);
  remote(dl);
  dl->add_option("ref", flags->ref, "NAME, NAME/VERSION or NAME@ALIAS")->required();
  dl->add_option("dest", flags->dest, "Destination directory (must not exist)")->required();
  dl->add_flag("--require-signature", flags->require_signature,
               "Refuse without a trusted signature");
  dl->add_flag("--overwrite", flags->overwrite, "Replace an existing destination");
  dl->add_flag("--no-signature-file", flags->no_sig_file, "Do not write model.sig");
  dl->add_option("--pubkey", flags->pubkeys,
                 "With --server: trusted public key PEM to check signatures against (repeatable; "
                 "also GANTRY_REGISTRY_TRUSTED_KEYS=a.pub:b.pub)");
  set(dl, DoDownload);

  CLI::App* de = reg->add_subcommand(
      "delete", "Delete a version (NAME/VERSION) or a model (NAME --model); needs admin remotely");
  common(de);
  remote(de);
  de->add_option("ref", flags->ref, "NAME/VERSION, or NAME with --model")->required();
  de->add_flag("--model", flags->delete_model, "Delete the registered model and all its versions");
  set(de, DoDelete);

  CLI::App* sg = reg->add_subcommand(
      "sign", "Sign a version's manifest (or a local --dir) with a private key");
  common(sg);
  sg->add_option("ref", flags->ref, "NAME/VERSION or NAME@ALIAS");
  sg->add_option("--key", flags->key, "Private key PEM (Ed25519 or ECDSA P-256)")->required();
  sg->add_option("--dir", flags->dir, "Sign a local model directory instead (writes model.sig)");
  sg->add_option("--sig", flags->sig, "Signature file for --dir (default DIR/model.sig)");
  remote(sg);
  set(sg, DoSign);

  CLI::App* vf = reg->add_subcommand(
      "verify", "Verify a version (stored bytes, manifest, signatures) or a --dir");
  common(vf);
  vf->add_option("ref", flags->ref, "NAME/VERSION or NAME@ALIAS");
  vf->add_flag("--require-signature", flags->require_signature, "Fail without a trusted signature");
  vf->add_option("--dir", flags->dir, "Verify a local model directory against its model.sig");
  vf->add_option("--sig", flags->sig, "Signature file for --dir (default DIR/model.sig)");
  vf->add_option("--pubkey", flags->pubkeys,
                 "Trusted public key PEM for --dir or --server (repeatable; also "
                 "GANTRY_REGISTRY_TRUSTED_KEYS with --server)");
  remote(vf);
  set(vf, DoVerify);

  CLI::App* se = reg->add_subcommand("search", "Search versions by name, tag, alias and lineage");
  common(se);
  se->add_option("--name", flags->q_name, "Substring of the model name");
  se->add_option("--tag", flags->q_tag, "KEY or KEY=VALUE");
  se->add_option("--alias", flags->q_alias, "Alias");
  se->add_option("--run-id", flags->q_run, "Training run id");
  se->add_option("--dataset", flags->q_dataset, "Dataset digest");
  se->add_option("--source", flags->q_source, "Substring of the source (checkpoint path)");
  se->add_option("--commit", flags->q_commit, "Code commit");
  se->add_option("--parent", flags->q_parent, "Parent NAME/VERSION");
  se->add_option("--limit", flags->limit, "At most this many (1..1000)")->capture_default_str();
  remote(se);
  set(se, DoSearch);

  CLI::App* kg =
      reg->add_subcommand("keygen", "Create a signing key pair (PREFIX.key, PREFIX.pub)");
  common(kg);
  kg->add_option("--alg", flags->alg, "ed25519 or ecdsa-p256")->capture_default_str();
  kg->add_option("--out", flags->out, "Output prefix")->required();
  set(kg, DoKeygen);

  CLI::App* tr = reg->add_subcommand("trust", "Manage the registry's trusted public keys");
  tr->require_subcommand(1);
  CLI::App* ta = tr->add_subcommand("add", "Trust a public key PEM");
  common(ta);
  ta->add_option("pubkey", flags->pubkey_file, "Public key PEM file")->required();
  ta->add_option("--comment", flags->comment, "Who owns the key");
  remote(ta);
  set(ta, DoTrustAdd);
  CLI::App* tl = tr->add_subcommand("ls", "List trusted keys");
  common(tl);
  remote(tl);
  set(tl, DoTrustLs);
  CLI::App* tm = tr->add_subcommand("rm", "Stop trusting a key");
  common(tm);
  tm->add_option("keyid", flags->keyid, "Key id")->required();
  remote(tm);
  set(tm, DoTrustRm);

  CLI::App* sv = reg->add_subcommand(
      "serve",
      "Serve the registry's HTTP API (MLflow-shaped, authenticated; until SIGINT/SIGTERM)");
  common(sv);
  sv->add_option("--listen", flags->listen, "HOST:PORT")->capture_default_str();
  sv->add_option(
      "--keys-db", flags->keys_db,
      "API key database (`gantry gateway keys create --state PATH`); role reader|writer|admin");
  sv->add_option("--jwt-secret-file", flags->jwt_secret_file,
                 "Accept HS256 JWTs signed with this secret (>= 32 bytes); role claim 'role'");
  sv->add_option("--jwt-public-key", flags->jwt_public_key,
                 "Accept RS256 / ES256 JWTs verified with this public key PEM");
  sv->add_option("--jwt-issuer", flags->jwt_issuer, "Required JWT 'iss'");
  sv->add_option("--jwt-audience", flags->jwt_audience, "Required JWT 'aud'");
  sv->add_option("--max-upload-mb", flags->max_upload_mb,
                 "Largest file upload; larger ones get 413 before any byte is read")
      ->capture_default_str();
  sv->add_option("--spool-dir", flags->spool_dir,
                 "Directory for uploads in flight (streamed there while hashed; default $TMPDIR)");
  set(sv, DoServe);

  CLI::App* po = reg->add_subcommand("policy", "Show or set the registry policy");
  common(po);
  po->add_option("--require-signatures", flags->require_signatures,
                 "on: downloads and verify refuse versions without a trusted signature");
  remote(po);
  set(po, DoPolicy);
}

}  // namespace gantry::cli
