// `gantry registry ...`: flags and printing over registry::Client, each verb
// written once. --server URL (or GANTRY_REGISTRY_SERVER) talks to `gantry
// registry serve` (RemoteClient); otherwise the stores are opened here
// (LocalClient). See docs/registry.md.
//
// Store selection: --db PATH (SQLite or postgresql:// metadata; env
// GANTRY_REGISTRY_DB) and --artifacts URL (file:///dir, /dir,
// az://account/container[/prefix] or a connection string with --container;
// env GANTRY_REGISTRY_ARTIFACTS). The artifacts URL is remembered in the
// database on first use, so later commands need only --db.
//
// Exit codes: cli.h's one map (Fail): 0 ok; 1 the check or the work failed
// (corrupt bytes, a server that did not answer); 2 usage, a name that does
// not exist, a refusal (signature, role, conflict).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <cstdlib>
#include <ctime>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli.h"
#include "gantry/core/json.h"
#include "gantry/core/service.h"
#include "gantry/registry/client.h"
#include "gantry/registry/registry.h"
#include "gantry/registry/remote_client.h"
#include "gantry/registry/service.h"

namespace gantry::cli {
namespace {

struct RegistryFlags {
  CommonFlags common;
  std::string db, artifacts, container, prefix, audit_log, azure_monitor;
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
  std::string jwt_oidc_issuer, jwt_oidc_discovery_url;
  std::vector<std::string> jwt_tenants, jwt_role_map;
  int64_t max_upload_mb = 256;
  std::string spool_dir;
  // search
  std::string q_name, q_tag, q_alias, q_run, q_dataset, q_source, q_commit, q_parent;
  int limit = 100;
};

std::string Env(const std::string& flag, const char* name) {
  if (!flag.empty()) return flag;
  const char* v = std::getenv(name);
  return v ? v : "";
}

Result<std::unique_ptr<registry::Registry>> OpenLocal(const RegistryFlags& f) {
  const char* user = std::getenv("USER");
  return registry::OpenRegistry(
      {.db = Env(f.db, "GANTRY_REGISTRY_DB"),
       .artifacts = Env(f.artifacts, "GANTRY_REGISTRY_ARTIFACTS"),
       .container = f.container,
       .prefix = f.prefix,
       .audit_log = Env(f.audit_log, "GANTRY_REGISTRY_AUDIT_LOG"),
       .actor = user ? user : "unknown",
       .azure_monitor_config = Env(f.azure_monitor, "GANTRY_REGISTRY_AZURE_MONITOR")});
}

// Public key PEM files as DSSE verifiers.
Result<std::vector<security::DsseVerifier>> LoadKeys(const std::vector<std::string>& files) {
  std::vector<security::DsseVerifier> out;
  for (const auto& p : files) {
    ASSIGN_OR_RETURN(std::string pem, ReadFile(p));
    auto v = security::DsseVerifier::FromPublicPem(pem);
    if (!v.ok()) return v.status().WithContext(p);
    out.push_back(*std::move(v));
  }
  return out;
}

// The registry a command works on. `server` is empty for the local stores.
struct Target {
  std::unique_ptr<registry::Client> client;
  std::string server;
  std::string On() const { return server.empty() ? "" : " on " + server; }
};

// --server URL (or GANTRY_REGISTRY_SERVER) picks the server, with the
// credential (an API key or a JWT) from --api-key or GANTRY_API_KEY. Its
// trust anchors (`trust`: for download and verify) are --pubkey files plus
// GANTRY_REGISTRY_TRUSTED_KEYS (PEM files separated by ':'); the server's
// trusted-key list is never used to verify what the server sends. A local
// registry uses its own trusted keys.
Result<Target> Connect(const RegistryFlags& f, bool trust = false) {
  Target t;
  t.server = Env(f.server, "GANTRY_REGISTRY_SERVER");
  while (t.server.ends_with("/")) t.server.pop_back();
  if (t.server.empty()) {
    ASSIGN_OR_RETURN(auto reg, OpenLocal(f));
    t.client = std::make_unique<registry::LocalClient>(std::move(reg));
    return t;
  }
  registry::RemoteOptions o{.server = t.server, .credential = Env(f.api_key, "GANTRY_API_KEY")};
  if (trust) {
    std::vector<std::string> files = f.pubkeys;
    const std::string env = Env("", "GANTRY_REGISTRY_TRUSTED_KEYS");
    std::string_view rest = env;
    while (!rest.empty()) {
      size_t colon = rest.find(':');
      if (colon != 0) files.emplace_back(rest.substr(0, colon));
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    }
    ASSIGN_OR_RETURN(o.trusted, LoadKeys(files));
  }
  t.client = std::make_unique<registry::RemoteClient>(std::move(o));
  return t;
}

// Runs `body` against the target of `f`; errors become Fail(command, ...).
template <typename Body>
int WithTarget(const RegistryFlags& f, std::string_view command, Body body, bool trust = false) {
  Result<Target> t = Connect(f, trust);
  if (!t.ok()) return Fail(command, t.status());
  Status s = body(*t);
  return s.ok() ? kExitOk : Fail(command, s);
}

void PrintJson(const Json& j) { std::cout << j.dump(2) << "\n"; }

Json JsonList(std::string_view key, const auto& items) {
  Json list = Json::array();
  for (const auto& i : items) list.push_back(registry::ToJson(i));
  return Json{{key, list}};
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
  if (!v.aliases.empty())
    std::cout << "  aliases: " << fmt::format("{}", fmt::join(v.aliases, " ")) << "\n";
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

void PrintModel(const registry::RegisteredModel& m) {
  std::cout << m.name << "  created " << Time(m.created_unix) << ", updated "
            << Time(m.updated_unix) << "\n";
  if (!m.description.empty()) std::cout << "  description: " << m.description << "\n";
  std::cout << "  latest version: " << m.latest_version << "\n";
  for (const auto& [a, v] : m.aliases) std::cout << "  alias " << a << " -> " << v << "\n";
  for (const auto& [k, v] : m.tags) std::cout << "  tag " << k << "=" << v << "\n";
}

std::string Signed(const registry::VerifyReport& r) {
  return r.signed_by_trusted ? "signed by trusted key " + r.verified_keyids[0]
                             : std::string("no trusted signature");
}

Result<std::pair<std::string, std::string>> SplitKv(const std::string& kv, std::string_view what) {
  size_t eq = kv.find('=');
  if (eq == std::string::npos || eq == 0) {
    return InvalidArgument(std::string(what) + " '" + kv + "' must be KEY=VALUE");
  }
  return std::make_pair(kv.substr(0, eq), kv.substr(eq + 1));
}

Result<registry::RegisterRequest> RegisterRequestOf(const RegistryFlags& f) {
  registry::RegisterRequest req;
  req.name = f.name;
  req.path = f.path;
  req.description = f.description;
  req.lineage.run_id = f.run_id;
  req.lineage.code_commit = f.commit;
  req.lineage.parent = f.parent;
  req.lineage.dataset_digests = f.datasets;
  for (const auto& kv : f.tags) {
    ASSIGN_OR_RETURN(auto p, SplitKv(kv, "--tag"));
    req.tags[p.first] = p.second;
  }
  for (const auto& kv : f.metrics) {
    ASSIGN_OR_RETURN(auto p, SplitKv(kv, "--metric"));
    char* end = nullptr;
    double d = std::strtod(p.second.c_str(), &end);
    bool number = end && *end == '\0' && !p.second.empty();
    req.lineage.metrics[p.first] = number ? Json(d) : Json(p.second);
  }
  if (f.from_ckpt.empty() && f.path.empty()) {
    return InvalidArgument("pass a model PATH (directory or file) or --from-ckpt ROOT");
  }
  if (!f.from_ckpt.empty() && !f.path.empty()) {
    return InvalidArgument("pass either PATH or --from-ckpt, not both");
  }
  // --run is easily taken for the training run: silently dropping it would
  // register a version without the lineage the user asked for.
  if (f.from_ckpt.empty() && (!f.run.empty() || !f.step.empty())) {
    return InvalidArgument(fmt::format(
        "{} names the checkpoint run of --from-ckpt; registering PATH '{}', use --run-id for "
        "the training run's id",
        !f.run.empty() ? "--run" : "--step", f.path));
  }
  return req;
}

// --from-ckpt reads the checkpoint here (the same code either way), then
// registers its step directory in the local store or through the server.
Result<registry::CheckpointSource> CheckpointOf(const RegistryFlags& f) {
  registry::CheckpointSource src{f.from_ckpt, f.run.empty() ? "default" : f.run, std::nullopt};
  if (!f.step.empty() && f.step != "latest") {
    char* end = nullptr;
    long long s = std::strtoll(f.step.c_str(), &end, 10);
    if (!end || *end != '\0' || s < 0) {
      return InvalidArgument("--step '" + f.step + "' must be a number or latest");
    }
    src.step = s;
  }
  return src;
}

int DoRegister(const RegistryFlags& f) {
  auto req = RegisterRequestOf(f);
  if (!req.ok()) return Fail("registry register", req.status());
  auto src = CheckpointOf(f);
  if (!src.ok()) return Fail("registry register", src.status());
  return WithTarget(f, "registry register", [&](Target& t) -> Status {
    ASSIGN_OR_RETURN(registry::ModelVersion v, f.from_ckpt.empty()
                                                   ? t.client->Register(*req)
                                                   : t.client->RegisterCheckpoint(*req, *src));
    if (f.common.json) {
      PrintJson(registry::ToJson(v));
    } else {
      std::cout << "registered " << v.model << "/" << v.version << t.On() << " (" << v.files.size()
                << " files, " << v.total_bytes << " bytes, manifest "
                << v.manifest_sha256.substr(0, 16) << ")\n";
    }
    return Status::Ok();
  });
}

int DoList(const RegistryFlags& f) {
  return WithTarget(f, "registry list", [&](Target& t) -> Status {
    ASSIGN_OR_RETURN(auto models, t.client->ListModels());
    if (f.common.json) {
      PrintJson(JsonList("registered_models", models));
      return Status::Ok();
    }
    for (const auto& m : models) {
      std::string aliases;
      for (const auto& [a, v] : m.aliases)
        aliases += (aliases.empty() ? "" : " ") + a + "->" + std::to_string(v);
      std::cout << fmt::format(
          "{:<32} latest {:<5} {}\n", m.name,
          m.latest_version == 0 ? std::string("-") : std::to_string(m.latest_version), aliases);
    }
    return Status::Ok();
  });
}

// "name" shows the model; "name/3" or "name@alias" a version.
int DoShow(const RegistryFlags& f) {
  return WithTarget(f, "registry show", [&](Target& t) -> Status {
    if (f.ref.find('/') == std::string::npos && f.ref.find('@') == std::string::npos) {
      ASSIGN_OR_RETURN(registry::RegisteredModel m, t.client->GetModel(f.ref));
      f.common.json ? PrintJson(registry::ToJson(m)) : PrintModel(m);
      return Status::Ok();
    }
    ASSIGN_OR_RETURN(registry::ModelVersion v, t.client->Resolve(f.ref));
    f.common.json ? PrintJson(registry::ToJson(v)) : PrintVersion(v);
    return Status::Ok();
  });
}

int DoVersions(const RegistryFlags& f) {
  return WithTarget(f, "registry versions", [&](Target& t) -> Status {
    ASSIGN_OR_RETURN(auto versions, t.client->ListVersions(f.name));
    if (f.common.json) {
      PrintJson(JsonList("model_versions", versions));
      return Status::Ok();
    }
    for (const auto& v : versions) {
      std::string aliases = fmt::format("{}", fmt::join(v.aliases, ","));
      std::cout << fmt::format("{:>5}  {}  {:>12}  {}  {}{}\n", v.version, Time(v.created_unix),
                               v.total_bytes, v.manifest_sha256.substr(0, 16),
                               v.signer_keyids.empty() ? "unsigned" : "signed",
                               aliases.empty() ? "" : "  [" + aliases + "]");
    }
    return Status::Ok();
  });
}

std::optional<int64_t> Expect(const RegistryFlags& f) {
  return f.expect >= 0 ? std::optional<int64_t>(f.expect) : std::nullopt;
}

int DoAliasSet(const RegistryFlags& f) {
  return WithTarget(f, "registry alias set", [&](Target& t) -> Status {
    RETURN_IF_ERROR(t.client->SetAlias(f.name, f.alias, f.version, Expect(f)));
    if (f.common.json) {
      std::cout << Json{{"name", f.name},
                        {"alias", f.alias},
                        {"version", std::to_string(f.version)}}
                       .dump()
                << "\n";
    } else {
      std::cout << f.name << "@" << f.alias << " -> " << f.version << "\n";
    }
    return Status::Ok();
  });
}

int DoAliasRm(const RegistryFlags& f) {
  return WithTarget(f, "registry alias rm", [&](Target& t) -> Status {
    RETURN_IF_ERROR(t.client->DeleteAlias(f.name, f.alias, Expect(f)));
    if (!f.common.json) std::cout << "removed " << f.name << "@" << f.alias << "\n";
    return Status::Ok();
  });
}

int DoDownload(const RegistryFlags& f) {
  if (!f.pubkeys.empty() && Env(f.server, "GANTRY_REGISTRY_SERVER").empty()) {
    return Fail("registry download",
                InvalidArgument("--pubkey is for --server; a local registry uses its trusted keys "
                                "(`gantry registry trust add`)"));
  }
  registry::ExportOptions o;
  o.require_signature = f.require_signature;
  o.overwrite = f.overwrite;
  o.write_signature = !f.no_sig_file;
  return WithTarget(
      f, "registry download",
      [&](Target& t) -> Status {
        ASSIGN_OR_RETURN(registry::VerifyReport r, t.client->Download(f.ref, f.dest, o));
        if (f.common.json) {
          PrintJson(registry::ToJson(r));
        } else {
          std::cout << "downloaded " << r.model << "/" << r.version << " to " << f.dest << " ("
                    << r.files << " files, " << r.bytes << " bytes verified; " << Signed(r)
                    << ")\n";
        }
        return Status::Ok();
      },
      /*trust=*/true);
}

Result<security::DsseSigner> LoadSigner(const std::string& path) {
  ASSIGN_OR_RETURN(std::string pem, ReadFile(path));
  auto signer = security::DsseSigner::FromPrivatePem(pem);
  if (!signer.ok()) return signer.status().WithContext(path);
  return signer;
}

int DoSign(const RegistryFlags& f) {
  auto signer = LoadSigner(f.key);
  if (!signer.ok()) return Fail("registry sign", signer.status());
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
  if (f.ref.empty())
    return Fail("registry sign", InvalidArgument("pass a version REF or --dir DIR"));
  // Remotely the private key stays here: the client signs the manifest it
  // fetched (checked against its recorded digest and file list).
  return WithTarget(f, "registry sign", [&](Target& t) -> Status {
    ASSIGN_OR_RETURN(std::string keyid, t.client->Sign(f.ref, *signer));
    if (f.common.json) {
      std::cout << Json{{"ref", f.ref}, {"keyid", keyid}}.dump() << "\n";
    } else {
      std::cout << "signed " << f.ref << t.On() << " with key " << keyid << "\n";
    }
    return Status::Ok();
  });
}

// A local directory against its model.sig: --pubkey files, else the trusted
// keys of the registry named by --db.
int VerifyDir(const RegistryFlags& f) {
  auto trusted = LoadKeys(f.pubkeys);
  if (!trusted.ok()) return Fail("registry verify", trusted.status());
  if (trusted->empty() && !Env(f.db, "GANTRY_REGISTRY_DB").empty()) {
    auto reg = OpenLocal(f);
    if (!reg.ok()) return Fail("registry verify", reg.status());
    trusted = (*reg)->TrustedVerifiers();
    if (!trusted.ok()) return Fail("registry verify", trusted.status());
  }
  std::string sig = f.sig.empty() ? f.dir + "/" + std::string(registry::kSignatureFile) : f.sig;
  auto bundle = ReadFile(sig);
  if (!bundle.ok()) return Fail("registry verify", bundle.status());
  auto who = registry::VerifyDirectory(f.dir, *bundle, *trusted);
  if (!who.ok()) return Fail("registry verify", who.status());
  std::cout << "OK: " << f.dir << " matches " << sig << ", signed by trusted key " << *who << "\n";
  return kExitOk;
}

int DoVerify(const RegistryFlags& f) {
  if (!f.dir.empty()) return VerifyDir(f);
  if (f.ref.empty())
    return Fail("registry verify", InvalidArgument("pass a version REF or --dir DIR"));
  return WithTarget(
      f, "registry verify",
      [&](Target& t) -> Status {
        ASSIGN_OR_RETURN(registry::VerifyReport r, t.client->Verify(f.ref, f.require_signature));
        if (f.common.json) {
          PrintJson(registry::ToJson(r));
        } else {
          std::cout << "OK: " << r.model << "/" << r.version << ": " << r.files << " files, "
                    << r.bytes << " bytes match the manifest; " << Signed(r) << "\n";
        }
        return Status::Ok();
      },
      /*trust=*/true);
}

int DoSearch(const RegistryFlags& f) {
  registry::SearchQuery q{.name_like = f.q_name,
                          .alias = f.q_alias,
                          .run_id = f.q_run,
                          .dataset_digest = f.q_dataset,
                          .source_like = f.q_source,
                          .code_commit = f.q_commit,
                          .parent = f.q_parent,
                          .limit = f.limit};
  if (!f.q_tag.empty()) {
    size_t eq = f.q_tag.find('=');
    q.tag_key = f.q_tag.substr(0, eq);
    if (eq != std::string::npos) q.tag_value = f.q_tag.substr(eq + 1);
  }
  return WithTarget(f, "registry search", [&](Target& t) -> Status {
    ASSIGN_OR_RETURN(auto versions, t.client->Search(q));
    if (f.common.json) {
      PrintJson(JsonList("model_versions", versions));
      return Status::Ok();
    }
    for (const auto& v : versions) {
      std::cout << fmt::format("{}/{}  run={} source={}\n", v.model, v.version, v.lineage.run_id,
                               v.lineage.source);
    }
    return Status::Ok();
  });
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
  return WithTarget(f, "registry trust add", [&](Target& t) -> Status {
    auto k = t.client->TrustKey(*pem, f.comment);
    if (!k.ok()) return k.status().WithContext(f.pubkey_file);
    std::cout << "trusted key " << k->keyid << " (" << k->algorithm << ")" << t.On() << "\n";
    return Status::Ok();
  });
}

int DoTrustLs(const RegistryFlags& f) {
  return WithTarget(f, "registry trust ls", [&](Target& t) -> Status {
    ASSIGN_OR_RETURN(auto keys, t.client->TrustedKeys());
    if (f.common.json) {
      Json j = Json::array();
      for (const auto& k : keys)
        j.push_back({{"keyid", k.keyid}, {"algorithm", k.algorithm}, {"comment", k.comment}});
      PrintJson(j);
      return Status::Ok();
    }
    for (const auto& k : keys)
      std::cout << k.keyid << "  " << k.algorithm << "  " << k.comment << "\n";
    return Status::Ok();
  });
}

int DoTrustRm(const RegistryFlags& f) {
  return WithTarget(f, "registry trust rm", [&](Target& t) -> Status {
    RETURN_IF_ERROR(t.client->UntrustKey(f.keyid));
    std::cout << "removed trusted key " << f.keyid << t.On() << "\n";
    return Status::Ok();
  });
}

int DoPolicy(const RegistryFlags& f) {
  const std::string& want = f.require_signatures;
  if (!want.empty() && want != "on" && want != "off") {
    return Fail("registry policy", InvalidArgument("--require-signatures takes on or off"));
  }
  return WithTarget(f, "registry policy", [&](Target& t) -> Status {
    if (!want.empty()) RETURN_IF_ERROR(t.client->SetSignaturesRequired(want == "on"));
    ASSIGN_OR_RETURN(bool on, t.client->SignaturesRequired());
    std::cout << "require_signatures: " << (on ? "on" : "off") << "\n";
    return Status::Ok();
  });
}

// delete NAME/VERSION (one version) or delete NAME --model (the model and
// every version). Alias refs are refused: a delete names its number.
int DoDelete(const RegistryFlags& f) {
  std::string r = f.ref;
  if (r.starts_with("models:/")) r.erase(0, 8);
  auto usage = [&](std::string msg) { return Fail("registry delete", InvalidArgument(msg)); };
  if (r.find('@') != std::string::npos) {
    return usage("'" + f.ref +
                 "' is an alias; delete names a version number (NAME/VERSION) or a model (NAME "
                 "--model)");
  }
  size_t slash = r.find('/');
  std::string name = r.substr(0, slash);
  int64_t version = 0;
  if (slash != std::string::npos) {
    if (f.delete_model) return usage("--model deletes a whole model: pass NAME, not " + r);
    std::string vs = r.substr(slash + 1);
    char* end = nullptr;
    long long v = std::strtoll(vs.c_str(), &end, 10);
    if (vs.empty() || !end || *end != '\0' || v < 1) {
      return usage("version '" + vs + "' must be a positive integer");
    }
    version = v;
  } else if (!f.delete_model) {
    return usage(
        "pass NAME/VERSION to delete one version, or NAME --model to delete the model and all its "
        "versions");
  }
  return WithTarget(f, "registry delete", [&](Target& t) -> Status {
    ASSIGN_OR_RETURN(registry::DeleteReport rep, version > 0
                                                     ? t.client->DeleteVersion(name, version)
                                                     : t.client->DeleteModel(name));
    if (f.common.json) {
      PrintJson(registry::ToJson(rep));
      return Status::Ok();
    }
    std::string versions = fmt::format("{}", fmt::join(rep.versions, ","));
    std::string aliases = fmt::format("{}", fmt::join(rep.aliases_removed, ","));
    std::cout << "deleted " << name << (version > 0 ? "/" + std::to_string(version) : "")
              << " (versions " << (versions.empty() ? "none" : versions) << "; "
              << rep.blobs_removed << " unreferenced files removed"
              << (aliases.empty() ? "" : "; aliases removed: " + aliases) << ")\n";
    for (const auto& e : rep.gc_errors) {
      std::cerr << "gantry registry delete: warning: left in the artifact store: " << e << "\n";
    }
    return Status::Ok();
  });
}

// Until SIGTERM/SIGINT. The runner comes first: the threads started after it
// (the audit writer, the server) inherit its signal mask.
int DoServe(const RegistryFlags& f) {
  if (f.max_upload_mb < 1 || f.max_upload_mb > (int64_t{1} << 22)) {
    return Fail("registry serve", InvalidArgument("--max-upload-mb must be 1..4194304"));
  }
  ServiceRunner runner({});
  registry::RegistryServiceOptions o{.listen = f.listen,
                                     .keys_db = f.keys_db,
                                     .jwt_secret_file = f.jwt_secret_file,
                                     .jwt_public_key_file = f.jwt_public_key,
                                     .jwt_issuer = f.jwt_issuer,
                                     .jwt_audience = f.jwt_audience,
                                     .jwt_oidc_issuer = f.jwt_oidc_issuer,
                                     .jwt_oidc_discovery_url = f.jwt_oidc_discovery_url,
                                     .jwt_tenants = f.jwt_tenants,
                                     .jwt_role_map = f.jwt_role_map,
                                     .max_blob_bytes = static_cast<uint64_t>(f.max_upload_mb) << 20,
                                     .spool_dir = f.spool_dir};
  // Refused before the stores are opened.
  if (Status s = registry::ValidateServiceOptions(o); !s.ok()) return Fail("registry serve", s);
  auto reg = OpenLocal(f);
  if (!reg.ok()) return Fail("registry serve", reg.status());
  auto svc = registry::RegistryService::Create(*std::move(reg), o);
  if (!svc.ok()) return Fail("registry serve", svc.status());
  Status s = runner.Run(**svc);
  return s.ok() ? kExitOk : Fail("registry serve", s);
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
      "Exit codes: 0 ok, 1 a check or the work failed (corrupt bytes, an unreachable server), 2 "
      "usage, a name that does not exist, or a refusal. See docs/registry.md.");
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
    c->add_option("--azure-monitor", flags->azure_monitor,
                  "A YAML file with an azure_monitor.logs block: ship the audit log to Log "
                  "Analytics too (or GANTRY_REGISTRY_AZURE_MONITOR; docs/azure-monitor.md)");
  };
  // Commands that can talk to `gantry registry serve` instead of the stores.
  auto remote = [flags](CLI::App* c) {
    c->add_option("--server", flags->server,
                  "Registry server http://HOST:PORT (or GANTRY_REGISTRY_SERVER; plain http only)");
    c->add_option("--api-key", flags->api_key,
                  "API key or JWT for --server (or GANTRY_API_KEY); prefer the environment");
  };
  // A verb: its subcommand with the store flags, --server unless it only
  // works on local files, and the action it runs.
  auto verb = [flags, action, common, remote](CLI::App* parent, const char* name, const char* help,
                                              int (*fn)(const RegistryFlags&),
                                              bool over_server = true) {
    CLI::App* c = parent->add_subcommand(name, help);
    common(c);
    if (over_server) remote(c);
    c->callback([flags, action, fn] {
      *action = [flags, fn] {
        if (!ApplyCommonFlags(flags->common)) return kExitUsage;
        return fn(*flags);
      };
    });
    return c;
  };

  CLI::App* r = verb(reg, "register",
                     "Register a new version from a directory, a file or a checkpoint", DoRegister);
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

  verb(reg, "list", "List registered models", DoList);

  CLI::App* sh = verb(reg, "show", "Show a model (NAME) or a version (NAME/V, NAME@ALIAS)", DoShow);
  sh->add_option("ref", flags->ref, "NAME, NAME/VERSION or NAME@ALIAS")->required();

  CLI::App* vs = verb(reg, "versions", "List the versions of a model", DoVersions);
  vs->add_option("name", flags->name, "Model name")->required();

  CLI::App* al =
      reg->add_subcommand("alias", "Move or remove aliases (atomic, optional compare-and-set)");
  al->require_subcommand(1);
  CLI::App* as = verb(al, "set", "Point ALIAS at VERSION", DoAliasSet);
  as->add_option("name", flags->name, "Model name")->required();
  as->add_option("alias", flags->alias, "Alias (production, staging, ...)")->required();
  as->add_option("version", flags->version, "Version number")->required();
  as->add_option("--expect", flags->expect,
                 "Only if the alias points at this version now (0: unset)");
  CLI::App* ar = verb(al, "rm", "Remove ALIAS", DoAliasRm);
  ar->add_option("name", flags->name, "Model name")->required();
  ar->add_option("alias", flags->alias, "Alias")->required();
  ar->add_option("--expect", flags->expect, "Only if the alias points at this version now");

  CLI::App* dl =
      verb(reg, "download", "Export a version to a directory, verifying every byte", DoDownload);
  dl->add_option("ref", flags->ref, "NAME, NAME/VERSION or NAME@ALIAS")->required();
  dl->add_option("dest", flags->dest, "Destination directory (must not exist)")->required();
  dl->add_flag("--require-signature", flags->require_signature,
               "Refuse without a trusted signature");
  dl->add_flag("--overwrite", flags->overwrite, "Replace an existing destination");
  dl->add_flag("--no-signature-file", flags->no_sig_file, "Do not write model.sig");
  dl->add_option("--pubkey", flags->pubkeys,
                 "With --server: trusted public key PEM to check signatures against (repeatable; "
                 "also GANTRY_REGISTRY_TRUSTED_KEYS=a.pub:b.pub)");

  CLI::App* de = verb(
      reg, "delete",
      "Delete a version (NAME/VERSION) or a model (NAME --model); needs admin remotely", DoDelete);
  de->add_option("ref", flags->ref, "NAME/VERSION, or NAME with --model")->required();
  de->add_flag("--model", flags->delete_model, "Delete the registered model and all its versions");

  CLI::App* sg =
      verb(reg, "sign", "Sign a version's manifest (or a local --dir) with a private key", DoSign);
  sg->add_option("ref", flags->ref, "NAME/VERSION or NAME@ALIAS");
  sg->add_option("--key", flags->key, "Private key PEM (Ed25519 or ECDSA P-256)")->required();
  sg->add_option("--dir", flags->dir, "Sign a local model directory instead (writes model.sig)");
  sg->add_option("--sig", flags->sig, "Signature file for --dir (default DIR/model.sig)");

  CLI::App* vf = verb(reg, "verify",
                      "Verify a version (stored bytes, manifest, signatures) or a --dir", DoVerify);
  vf->add_option("ref", flags->ref, "NAME/VERSION or NAME@ALIAS");
  vf->add_flag("--require-signature", flags->require_signature, "Fail without a trusted signature");
  vf->add_option("--dir", flags->dir, "Verify a local model directory against its model.sig");
  vf->add_option("--sig", flags->sig, "Signature file for --dir (default DIR/model.sig)");
  vf->add_option("--pubkey", flags->pubkeys,
                 "Trusted public key PEM for --dir or --server (repeatable; also "
                 "GANTRY_REGISTRY_TRUSTED_KEYS with --server)");

  CLI::App* se = verb(reg, "search", "Search versions by name, tag, alias and lineage", DoSearch);
  se->add_option("--name", flags->q_name, "Substring of the model name");
  se->add_option("--tag", flags->q_tag, "KEY or KEY=VALUE");
  se->add_option("--alias", flags->q_alias, "Alias");
  se->add_option("--run-id", flags->q_run, "Training run id");
  se->add_option("--dataset", flags->q_dataset, "Dataset digest");
  se->add_option("--source", flags->q_source, "Substring of the source (checkpoint path)");
  se->add_option("--commit", flags->q_commit, "Code commit");
  se->add_option("--parent", flags->q_parent, "Parent NAME/VERSION");
  se->add_option("--limit", flags->limit, "At most this many (1..1000)")->capture_default_str();

  CLI::App* kg = verb(reg, "keygen", "Create a signing key pair (PREFIX.key, PREFIX.pub)", DoKeygen,
                      /*over_server=*/false);
  kg->add_option("--alg", flags->alg, "ed25519 or ecdsa-p256")->capture_default_str();
  kg->add_option("--out", flags->out, "Output prefix")->required();

  CLI::App* tr = reg->add_subcommand("trust", "Manage the registry's trusted public keys");
  tr->require_subcommand(1);
  CLI::App* ta = verb(tr, "add", "Trust a public key PEM", DoTrustAdd);
  ta->add_option("pubkey", flags->pubkey_file, "Public key PEM file")->required();
  ta->add_option("--comment", flags->comment, "Who owns the key");
  verb(tr, "ls", "List trusted keys", DoTrustLs);
  CLI::App* tm = verb(tr, "rm", "Stop trusting a key", DoTrustRm);
  tm->add_option("keyid", flags->keyid, "Key id")->required();

  CLI::App* sv =
      verb(reg, "serve",
           "Serve the registry's HTTP API (MLflow-shaped, authenticated; until SIGINT/SIGTERM)",
           DoServe, /*over_server=*/false);
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
  sv->add_option("--jwt-oidc-issuer", flags->jwt_oidc_issuer,
                 "Accept JWTs from this OpenID Connect issuer (e.g. "
                 "https://login.microsoftonline.com/TENANT/v2.0); keys from its JWKS");
  sv->add_option("--jwt-oidc-discovery-url", flags->jwt_oidc_discovery_url,
                 "The issuer's discovery document (default: ISSUER/.well-known/"
                 "openid-configuration)");
  sv->add_option("--jwt-tenant", flags->jwt_tenants,
                 "Allowed Entra tenant id ('tid'); repeatable; required for common/organizations");
  sv->add_option("--jwt-role-map", flags->jwt_role_map,
                 "ROLE=VALUE: tokens whose 'roles'/'scp'/'role' claim holds VALUE get ROLE "
                 "(reader|writer|admin); repeatable");
  sv->add_option("--max-upload-mb", flags->max_upload_mb,
                 "Largest file upload; larger ones get 413 before any byte is read")
      ->capture_default_str();
  sv->add_option("--spool-dir", flags->spool_dir,
                 "Directory for uploads in flight (streamed there while hashed; default $TMPDIR)");

  CLI::App* po = verb(reg, "policy", "Show or set the registry policy", DoPolicy);
  po->add_option("--require-signatures", flags->require_signatures,
                 "on: downloads and verify refuse versions without a trusted signature");
}

}  // namespace gantry::cli
