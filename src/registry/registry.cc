// Registry: register, resolve, aliases, sign, verify, export (see registry.h).
#include "gantry/registry/registry.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <set>

#include "gantry/ckpt/manager.h"
#include "gantry/core/config.h"
#include "gantry/monitor/shipper.h"
#include "gantry/security/crypto.h"

namespace gantry::registry {

namespace fs = std::filesystem;

namespace {
constexpr std::string_view kRequireSignatures = "require_signatures";

std::string ShardedKey(std::string_view kind, std::string_view hex) {
  return std::string(kind) + "/sha256/" + std::string(hex.substr(0, 2)) + "/" + std::string(hex);
}

Result<int64_t> ParseVersionNumber(std::string_view text, std::string_view ref) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v <= 0) {
    return InvalidArgument("'" + std::string(ref) + "': version '" + std::string(text) +
                           "' is not a positive integer");
  }
  return v;
}

// Streams an object through SHA-256 in 8 MiB ranged reads (models do not fit
// in memory). Returns the hex digest.
Result<std::string> HashObject(storage::ObjectStore& store, const std::string& key, uint64_t size) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  std::vector<std::byte> buf(std::min<uint64_t>(size, 8u << 20));
  for (uint64_t off = 0; off < size;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - off));
    Status s = store.GetRange(key, off, std::span<std::byte>(buf.data(), n));
    if (!s.ok()) {
      EVP_MD_CTX_free(ctx);
      return s;
    }
    EVP_DigestUpdate(ctx, buf.data(), n);
    off += n;
  }
  unsigned char md[32];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  return security::HexEncode(std::string_view(reinterpret_cast<char*>(md), 32));
}

}  // namespace

std::string BlobKey(std::string_view hex) { return ShardedKey("blobs", hex); }
std::string ManifestKey(std::string_view hex) { return ShardedKey("manifests", hex); }

bool IsPostgresUri(std::string_view db) {
  return db.rfind("postgresql://", 0) == 0 || db.rfind("postgres://", 0) == 0;
}

Result<std::unique_ptr<MetadataStore>> OpenMetadataStore(const std::string& db) {
  if (IsPostgresUri(db)) return OpenPostgresMetadataStore(db);
  return OpenSqliteMetadataStore(db);
}

Result<std::unique_ptr<Registry>> OpenRegistry(const OpenOptions& o) {
  if (o.db.empty()) {
    return InvalidArgument(
        "no registry database: pass --db PATH.sqlite or --db postgresql://user@host/dbname, or set "
        "GANTRY_REGISTRY_DB");
  }
  ASSIGN_OR_RETURN(auto meta, OpenMetadataStore(o.db));
  std::string url = o.artifacts;
  ASSIGN_OR_RETURN(std::string saved, meta->GetSetting("artifacts_url"));
  ASSIGN_OR_RETURN(std::string saved_container, meta->GetSetting("artifacts_container"));
  if (url.empty()) {
    url = saved;
  } else if (saved.empty() && !url.starts_with("DefaultEndpointsProtocol") &&
             url.find("AccountKey=") == std::string::npos) {
    // Never store a connection string (it holds a secret).
    RETURN_IF_ERROR(meta->SetSetting("artifacts_url", url));
    if (!o.container.empty()) RETURN_IF_ERROR(meta->SetSetting("artifacts_container", o.container));
  }
  if (url.empty()) {
    return InvalidArgument(
        "no artifact store: pass --artifacts URL (file:///dir or "
        "az://account/container) the first time");
  }
  storage::StoreOptions so;
  so.container = o.container.empty() ? saved_container : o.container;
  so.prefix = o.prefix;
  ASSIGN_OR_RETURN(auto store, storage::OpenObjectStore(url, so));
  auto reg = std::make_unique<Registry>(std::move(meta), std::move(store));
  if (o.audit_log.empty() && !o.azure_monitor_config.empty()) {
    return InvalidArgument("--azure-monitor " + o.azure_monitor_config +
                           " ships the audit log, but no --audit-log is given");
  }
  if (!o.audit_log.empty()) {
    security::AuditOptions ao;
    ao.path = o.audit_log;
    if (!o.azure_monitor_config.empty()) {
      ASSIGN_OR_RETURN(Config mc, Config::LoadFile(o.azure_monitor_config));
      ASSIGN_OR_RETURN(std::optional<monitor::LogsShipperOptions> mo,
                       monitor::ParseAzureMonitorLogs(
                           mc, "azure_monitor",
                           std::filesystem::path(o.azure_monitor_config).parent_path().string()));
      if (!mo) {
        return InvalidArgument(o.azure_monitor_config + ": no azure_monitor.logs block");
      }
      Result<std::unique_ptr<monitor::LogsShipper>> shipper = monitor::LogsShipper::Start(*mo);
      if (!shipper.ok()) {
        return shipper.status().WithContext(o.azure_monitor_config + ": azure_monitor.logs");
      }
      // The forwarder owns the shipper, and the log owns the forwarder: the
      // shipper stops (spooling what is queued) after the log's last write.
      ao.on_written = monitor::AuditForwarder(
          std::shared_ptr<monitor::LogsShipper>(std::move(*shipper)), "registry", ao.path);
    }
    ASSIGN_OR_RETURN(std::unique_ptr<security::AuditLog> log, security::AuditLog::Open(ao));
    reg->SetAudit(std::move(log), o.actor);
  }
  return reg;
}

Registry::Registry(std::unique_ptr<MetadataStore> meta,
                   std::unique_ptr<storage::ObjectStore> artifacts, const Clock* clock)
    : meta_(std::move(meta)),
      artifacts_(std::move(artifacts)),
      clock_(clock ? clock : &SystemClock()) {}

Registry::Registry(std::shared_ptr<MetadataStore> meta,
                   std::shared_ptr<storage::ObjectStore> artifacts, const Clock* clock,
                   std::shared_ptr<security::AuditLog> owned_audit, security::AuditLog* audit,
                   std::string actor)
    : meta_(std::move(meta)),
      artifacts_(std::move(artifacts)),
      clock_(clock),
      owned_audit_(std::move(owned_audit)),
      audit_(audit),
      actor_(std::move(actor)) {}

void Registry::SetAudit(std::unique_ptr<security::AuditLog> log, std::string actor) {
  owned_audit_ = std::move(log);
  audit_ = owned_audit_.get();
  actor_ = std::move(actor);
}

Registry Registry::ForCaller(security::AuditLog* log, std::string actor) const {
  // The owned log travels along so that the handle stays valid on its own.
  return Registry(meta_, artifacts_, clock_, owned_audit_, log, std::move(actor));
}

int64_t Registry::Now() const {
  return std::chrono::duration_cast<std::chrono::seconds>(clock_->WallNow().time_since_epoch())
      .count();
}

Status Registry::Audit(Json record) {
  if (audit_ == nullptr) return Status::Ok();
  Json r = Json::object();
  r["time"] = Now();
  r["type"] = "registry";
  for (auto it = record.begin(); it != record.end(); ++it) r[it.key()] = it.value();
  r["actor"] = actor_;
  r["artifacts"] = artifacts_->url();
  audit_->Append(r.dump());
  return audit_->Flush().WithContext("writing the registry audit record");
}

Result<ModelVersion> Registry::Register(const RegisterRequest& req) {
  RETURN_IF_ERROR(ValidateModelName(req.name));
  for (const auto& [k, v] : req.tags) RETURN_IF_ERROR(ValidateTag(k, v));
  if (req.description.size() > 5000) return InvalidArgument("description is over 5000 bytes");
  ASSIGN_OR_RETURN(Manifest m, HashPath(req.path, req.name));
  std::string statement = StatementJson(m);
  std::string manifest_sha = security::Sha256Hex(statement);

  // Artifacts first, manifest second, metadata row last: the version is
  // invisible until every byte it names is stored.
  for (const auto& f : m.files) {
    std::string key = BlobKey(f.sha256);
    auto st = artifacts_->Stat(key);
    if (st.ok() && st->size == f.size) continue;  // content-addressed: already there
    std::string local =
        fs::is_directory(req.path) ? (fs::path(req.path) / f.path).string() : req.path;
    // Symlinks were checked to stay inside the model directory by HashPath.
    std::error_code ec;
    if (fs::is_symlink(fs::symlink_status(local, ec))) local = fs::canonical(local, ec).string();
    // Re-hash what we upload: a file changed between hashing and upload must
    // not be stored under the old digest.
    ASSIGN_OR_RETURN(Manifest again, HashPath(local, f.path.substr(f.path.rfind('/') + 1)));
    if (again.files.size() != 1 || again.files[0].sha256 != f.sha256) {
      return FailedPrecondition("file " + local + " changed while it was being registered; retry");
    }
    RETURN_IF_ERROR(artifacts_->PutFile(key, local).WithContext("uploading " + f.path));
  }
  {
    std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(statement.data()),
                                     statement.size());
    storage::PutOptions po;
    po.content_type = "application/json";
    RETURN_IF_ERROR(artifacts_->Put(ManifestKey(manifest_sha), bytes, po)
                        .WithContext("uploading the manifest"));
  }
  ModelVersion v;
  v.model = req.name;
  v.description = req.description;
  v.manifest_sha256 = manifest_sha;
  v.subject_sha256 = SubjectDigest(m.files);
  v.files = m.files;
  for (const auto& f : m.files) v.total_bytes += f.size;
  v.lineage = req.lineage;
  if (!v.lineage.metrics.is_object())
    return InvalidArgument("lineage metrics must be a JSON object");
  v.tags = req.tags;
  if (v.lineage.source.empty())
    v.lineage.source = fs::absolute(req.path).lexically_normal().string();
  int64_t now = Now();
  RETURN_IF_ERROR(meta_->EnsureModel(req.name, "", now));
  ASSIGN_OR_RETURN(int64_t n, meta_->InsertVersion(v, now));
  RETURN_IF_ERROR(Audit({{"action", "register"},
                         {"model", req.name},
                         {"version", n},
                         {"manifest_sha256", manifest_sha},
                         {"source", v.lineage.source}}));
  return meta_->GetVersion(req.name, n);
}

Result<RegisterRequest> ReadCheckpointStep(RegisterRequest req, const CheckpointSource& src) {
  if (storage::IsRemoteUrl(src.root)) {
    return Unimplemented("--from-ckpt " + src.root +
                         " is remote; register from a local checkpoint root (download the step "
                         "first with `gantry ckpt export`)");
  }
  ckpt::Options o;
  o.root = src.root;
  o.run = src.run;
  o.read_only = true;
  ASSIGN_OR_RETURN(auto mgr, ckpt::CheckpointManager::Open(o));
  ckpt::CheckpointInfo info;
  ASSIGN_OR_RETURN(auto list, mgr->List());
  if (src.step) {
    auto it = std::find_if(list.begin(), list.end(),
                           [&](const ckpt::CheckpointInfo& i) { return i.step == *src.step; });
    if (it == list.end()) {
      return NotFound("run '" + src.run + "' under " + src.root + " has no committed step " +
                      std::to_string(*src.step) + "; see `gantry ckpt ls`");
    }
    ASSIGN_OR_RETURN(auto report, mgr->Verify(*src.step, ckpt::VerifyMode::kFull));
    (void)report;
    info = *it;
  } else {
    ASSIGN_OR_RETURN(auto latest, mgr->Latest());
    auto it = std::find_if(list.begin(), list.end(),
                           [&](const ckpt::CheckpointInfo& i) { return i.step == latest.step; });
    if (it == list.end()) return NotFound("latest checkpoint step vanished while reading it");
    info = *it;
  }
  if (!info.error.empty()) {
    return DataLoss("checkpoint step " + std::to_string(info.step) + ": " + info.error);
  }
  req.path = info.path;
  req.lineage.source = "ckpt:" + info.path;
  if (req.lineage.run_id.empty()) req.lineage.run_id = src.run;
  if (info.metadata.is_object()) {
    auto it = info.metadata.find("metrics");
    if (it != info.metadata.end() && it->is_object() && req.lineage.metrics.empty()) {
      req.lineage.metrics = *it;
    }
  }
  req.tags.emplace("ckpt.step", std::to_string(info.step));
  return req;
}

Result<ModelVersion> Registry::RegisterCheckpoint(RegisterRequest req,
                                                  const CheckpointSource& src) {
  ASSIGN_OR_RETURN(RegisterRequest resolved, ReadCheckpointStep(std::move(req), src));
  return Register(resolved);
}

Result<ModelVersion> Registry::Resolve(std::string_view ref) {
  std::string_view r = ref;
  if (r.starts_with("models:/")) r.remove_prefix(8);
  if (size_t at = r.find('@'); at != std::string_view::npos) {
    std::string_view name = r.substr(0, at), alias = r.substr(at + 1);
    RETURN_IF_ERROR(ValidateModelName(name));
    RETURN_IF_ERROR(ValidateAlias(alias));
    ASSIGN_OR_RETURN(int64_t v, meta_->ResolveAlias(name, alias));
    return meta_->GetVersion(name, v);
  }
  std::string_view name = r, ver;
  if (size_t slash = r.find('/'); slash != std::string_view::npos) {
    name = r.substr(0, slash);
    ver = r.substr(slash + 1);
  }
  RETURN_IF_ERROR(ValidateModelName(name));
  if (ver.empty() || ver == "latest") {
    ASSIGN_OR_RETURN(auto m, meta_->GetModel(name));
    if (m.latest_version == 0) return NotFound("model '" + std::string(name) + "' has no versions");
    return meta_->GetVersion(name, m.latest_version);
  }
  ASSIGN_OR_RETURN(int64_t v, ParseVersionNumber(ver, ref));
  return meta_->GetVersion(name, v);
}

Status Registry::SetAlias(std::string_view name, std::string_view alias, int64_t version,
                          std::optional<int64_t> expected) {
  RETURN_IF_ERROR(ValidateModelName(name));
  RETURN_IF_ERROR(ValidateAlias(alias));
  auto before = meta_->ResolveAlias(name, alias);
  RETURN_IF_ERROR(meta_->SetAlias(name, alias, version, expected, Now()));
  return Audit({{"action", "alias_set"},
                {"model", name},
                {"alias", alias},
                {"version", version},
                {"previous", before.ok() ? *before : 0}});
}

Status Registry::DeleteAlias(std::string_view name, std::string_view alias,
                             std::optional<int64_t> expected) {
  RETURN_IF_ERROR(ValidateModelName(name));
  RETURN_IF_ERROR(ValidateAlias(alias));
  auto before = meta_->ResolveAlias(name, alias);
  RETURN_IF_ERROR(meta_->DeleteAlias(name, alias, expected, Now()));
  return Audit({{"action", "alias_rm"},
                {"model", name},
                {"alias", alias},
                {"previous", before.ok() ? *before : 0}});
}

Result<std::string> Registry::LoadManifestText(const ModelVersion& v) {
  auto st = artifacts_->Stat(ManifestKey(v.manifest_sha256));
  if (st.ok() && st->size > kMaxManifestBytes) {
    return InvalidArgument("manifest of " + v.model + "/" + std::to_string(v.version) +
                           " is over the size limit");
  }
  ASSIGN_OR_RETURN(std::string text, artifacts_->Get(ManifestKey(v.manifest_sha256)));
  if (security::Sha256Hex(text) != v.manifest_sha256) {
    return DataLoss("manifest of " + v.model + "/" + std::to_string(v.version) + " in " +
                    artifacts_->url() + " does not match its recorded digest " + v.manifest_sha256 +
                    " (the artifact store was modified)");
  }
  ASSIGN_OR_RETURN(Manifest m, ParseStatement(text));
  Manifest recorded;
  recorded.files = v.files;
  RETURN_IF_ERROR(
      CompareManifests(m, recorded, "metadata of " + v.model + "/" + std::to_string(v.version)));
  return text;
}

Result<std::vector<security::DsseVerifier>> Registry::TrustedVerifiers() {
  ASSIGN_OR_RETURN(auto keys, meta_->TrustedKeys());
  std::vector<security::DsseVerifier> out;
  for (const auto& k : keys) {
    auto v = security::DsseVerifier::FromPublicPem(k.public_pem);
    if (!v.ok()) return v.status().WithContext("trusted key " + k.keyid);
    out.push_back(*std::move(v));
  }
  return out;
}

Result<bool> Registry::SignaturesRequired() {
  ASSIGN_OR_RETURN(std::string v, meta_->GetSetting(kRequireSignatures));
  return v == "true";
}

Status Registry::SetSignaturesRequired(bool on) {
  RETURN_IF_ERROR(meta_->SetSetting(kRequireSignatures, on ? "true" : "false"));
  return Audit({{"action", "policy"}, {"require_signatures", on}});
}

Result<TrustedKey> Registry::TrustKey(std::string_view public_pem, std::string_view comment) {
  ASSIGN_OR_RETURN(auto v, security::DsseVerifier::FromPublicPem(public_pem));
  TrustedKey k{v.KeyId(), std::string(security::KeyAlgorithmName(v.algorithm())), v.PublicKeyPem(),
               std::string(comment)};
  RETURN_IF_ERROR(meta_->AddTrustedKey(k, Now()));
  RETURN_IF_ERROR(Audit({{"action", "trust_key"}, {"keyid", k.keyid}, {"algorithm", k.algorithm}}));
  return k;
}

Status Registry::UntrustKey(std::string_view keyid) {
  RETURN_IF_ERROR(meta_->RemoveTrustedKey(keyid));
  return Audit({{"action", "untrust_key"}, {"keyid", keyid}});
}

Result<std::string> Registry::Sign(std::string_view ref, const security::DsseSigner& signer) {
  ASSIGN_OR_RETURN(ModelVersion v, Resolve(ref));
  ASSIGN_OR_RETURN(std::string text, LoadManifestText(v));
  ASSIGN_OR_RETURN(auto env, security::SignDsse(kInTotoPayloadType, text, signer));
  std::string bundle = BundleJson(env, signer.KeyId()).dump(2);
  RETURN_IF_ERROR(meta_->AddSignature(v.model, v.version, signer.KeyId(), bundle, Now()));
  RETURN_IF_ERROR(Audit({{"action", "sign"},
                         {"model", v.model},
                         {"version", v.version},
                         {"keyid", signer.KeyId()},
                         {"manifest_sha256", v.manifest_sha256}}));
  return signer.KeyId();
}

Result<VerifyReport> CheckSignatureBundles(std::string_view label,
                                           const std::map<std::string, std::string>& sigs,
                                           std::string_view manifest_text,
                                           const std::vector<security::DsseVerifier>& trusted,
                                           bool require, std::string_view required_by) {
  VerifyReport rep;
  std::string name(label);
  if (sigs.empty()) {
    if (require) {
      return PermissionDenied(name + " is not signed and " + std::string(required_by) +
                              "; sign it with `gantry registry sign " + name + " --key KEY.pem`");
    }
    return rep;
  }
  std::vector<std::string> problems;
  for (const auto& [keyid, bundle] : sigs) {
    auto env = ParseBundle(bundle);
    if (!env.ok()) {
      problems.push_back("signature " + keyid + ": " + env.status().message());
      continue;
    }
    if (env->payload_type != kInTotoPayloadType) {
      problems.push_back("signature " + keyid + ": payloadType is " + env->payload_type);
      continue;
    }
    auto ok = security::VerifyDsse(*env, trusted);
    if (!ok.ok()) {
      problems.push_back("signature " + keyid + ": " + ok.status().message());
      continue;
    }
    // The signature must cover exactly this version's manifest.
    if (env->payload != manifest_text) {
      auto signed_m = ParseStatement(env->payload);
      auto actual = ParseStatement(manifest_text);
      Status diff = signed_m.ok() && actual.ok()
                        ? CompareManifests(*signed_m, *actual, "signed manifest vs stored")
                        : DataLoss("signed payload is not this version's manifest");
      problems.push_back(
          "signature " + keyid + ": " +
          (diff.ok() ? std::string("payload differs from the stored manifest") : diff.message()));
      continue;
    }
    rep.verified_keyids.push_back(*ok);
  }
  rep.signed_by_trusted = !rep.verified_keyids.empty();
  if (!rep.signed_by_trusted && require) {
    std::string msg = name + " has no valid signature by a trusted key: ";
    for (size_t i = 0; i < problems.size(); ++i) msg += (i ? "; " : "") + problems[i];
    return PermissionDenied(msg);
  }
  if (!rep.signed_by_trusted && !problems.empty() && !trusted.empty()) {
    // A bad signature is never silently ignored, policy or not.
    std::string msg = name + ": ";
    for (size_t i = 0; i < problems.size(); ++i) msg += (i ? "; " : "") + problems[i];
    return PermissionDenied(msg);
  }
  return rep;
}

Result<VerifyReport> Registry::CheckSignatures(const ModelVersion& v,
                                               const std::string& manifest_text, bool require) {
  ASSIGN_OR_RETURN(bool policy, SignaturesRequired());
  ASSIGN_OR_RETURN(auto sigs, meta_->Signatures(v.model, v.version));
  std::vector<security::DsseVerifier> trusted;
  if (!sigs.empty()) {
    ASSIGN_OR_RETURN(trusted, TrustedVerifiers());
  }
  ASSIGN_OR_RETURN(
      VerifyReport rep,
      CheckSignatureBundles(v.model + "/" + std::to_string(v.version), sigs, manifest_text, trusted,
                            require || policy,
                            policy ? "the registry requires signatures"
                                   : "a signature was required (--require-signature)"));
  rep.model = v.model;
  rep.version = v.version;
  rep.files = v.files.size();
  rep.bytes = v.total_bytes;
  return rep;
}

Result<std::string> Registry::AddSignatureBundle(std::string_view ref, std::string_view bundle) {
  ASSIGN_OR_RETURN(ModelVersion v, Resolve(ref));
  ASSIGN_OR_RETURN(std::string text, LoadManifestText(v));
  std::string label = v.model + "/" + std::to_string(v.version);
  ASSIGN_OR_RETURN(auto env, ParseBundle(bundle));
  if (env.payload_type != kInTotoPayloadType) {
    return InvalidArgument("signature payloadType '" + env.payload_type + "' is not " +
                           std::string(kInTotoPayloadType));
  }
  if (env.signatures.empty() || env.signatures[0].keyid.empty()) {
    return InvalidArgument("signature bundle for " + label + " has no signature with a keyid");
  }
  if (env.payload != text) {
    return InvalidArgument("signature payload is not the stored manifest of " + label +
                           " (sha256 " + v.manifest_sha256 +
                           "); sign the manifest the server serves for this version");
  }
  std::string keyid = env.signatures[0].keyid;
  ASSIGN_OR_RETURN(auto trusted, TrustedVerifiers());
  bool by_trusted =
      std::any_of(trusted.begin(), trusted.end(),
                  [&](const security::DsseVerifier& t) { return t.KeyId() == keyid; });
  if (by_trusted) {
    // A signature claiming a trusted key must verify now rather than be
    // stored and refused at every later download.
    auto ok = security::VerifyDsse(env, trusted);
    if (!ok.ok()) {
      return InvalidArgument("signature of " + label + " by trusted key " + keyid +
                             " does not verify: " + ok.status().message());
    }
  }
  RETURN_IF_ERROR(meta_->AddSignature(v.model, v.version, keyid, bundle, Now()));
  RETURN_IF_ERROR(Audit({{"action", "sign"},
                         {"model", v.model},
                         {"version", v.version},
                         {"keyid", keyid},
                         {"trusted", by_trusted},
                         {"manifest_sha256", v.manifest_sha256}}));
  return keyid;
}

void Registry::CollectGarbage(const std::vector<ModelVersion>& gone, DeleteReport* rep) {
  std::set<std::string> blobs, manifests;
  for (const auto& v : gone) {
    manifests.insert(v.manifest_sha256);
    for (const auto& f : v.files) blobs.insert(f.sha256);
  }
  // A digest still listed by any remaining version (of any model) stays.
  auto sweep = [&](const std::set<std::string>& digests, bool blob, size_t* removed) {
    for (const auto& sha : digests) {
      auto used = meta_->DigestReferenced(sha);
      if (!used.ok()) {
        rep->gc_errors.push_back(sha + ": " + used.status().message());
        continue;
      }
      if (*used) continue;
      Status s = artifacts_->Delete(blob ? BlobKey(sha) : ManifestKey(sha));
      if (s.ok()) {
        ++*removed;
      } else if (s.code() != StatusCode::kNotFound) {
        rep->gc_errors.push_back(std::string(blob ? "blob " : "manifest ") + sha + ": " +
                                 s.message());
      }
    }
  };
  sweep(blobs, true, &rep->blobs_removed);
  sweep(manifests, false, &rep->manifests_removed);
}

Result<DeleteReport> Registry::DeleteVersion(std::string_view name, int64_t version) {
  RETURN_IF_ERROR(ValidateModelName(name));
  if (version < 1) {
    return InvalidArgument("version " + std::to_string(version) + " of '" + std::string(name) +
                           "' is not a positive integer");
  }
  ASSIGN_OR_RETURN(ModelVersion v, meta_->DeleteVersion(name, version, Now()));
  DeleteReport rep;
  rep.model = v.model;
  rep.versions = {v.version};
  rep.aliases_removed = v.aliases;
  CollectGarbage({v}, &rep);
  RETURN_IF_ERROR(Audit({{"action", "delete_version"},
                         {"model", v.model},
                         {"version", v.version},
                         {"manifest_sha256", v.manifest_sha256},
                         {"aliases_removed", rep.aliases_removed},
                         {"blobs_removed", rep.blobs_removed}}));
  return rep;
}

Result<DeleteReport> Registry::DeleteModel(std::string_view name) {
  RETURN_IF_ERROR(ValidateModelName(name));
  ASSIGN_OR_RETURN(std::vector<ModelVersion> gone, meta_->DeleteModel(name));
  DeleteReport rep;
  rep.model = std::string(name);
  for (const auto& v : gone) {
    rep.versions.push_back(v.version);
    for (const auto& a : v.aliases) rep.aliases_removed.push_back(a);
  }
  CollectGarbage(gone, &rep);
  RETURN_IF_ERROR(Audit({{"action", "delete_model"},
                         {"model", name},
                         {"versions", rep.versions},
                         {"aliases_removed", rep.aliases_removed},
                         {"blobs_removed", rep.blobs_removed}}));
  return rep;
}

Result<VerifyReport> Registry::Verify(std::string_view ref, bool require_signature) {
  ASSIGN_OR_RETURN(ModelVersion v, Resolve(ref));
  ASSIGN_OR_RETURN(std::string text, LoadManifestText(v));
  ASSIGN_OR_RETURN(VerifyReport rep, CheckSignatures(v, text, require_signature));
  for (const auto& f : v.files) {
    std::string key = BlobKey(f.sha256);
    auto st = artifacts_->Stat(key);
    if (!st.ok()) {
      return st.status().WithContext("file " + f.path + " of " + v.model + "/" +
                                     std::to_string(v.version));
    }
    std::string got = "(size " + std::to_string(st->size) + " != " + std::to_string(f.size) + ")";
    if (st->size == f.size) {
      ASSIGN_OR_RETURN(got, HashObject(*artifacts_, key, f.size));
    }
    if (got != f.sha256) {
      return DataLoss("file " + f.path + " of " + v.model + "/" + std::to_string(v.version) +
                      " is corrupt in " + artifacts_->url() + ": sha256 " + got + ", expected " +
                      f.sha256);
    }
  }
  return rep;
}

Result<VerifyReport> Registry::Export(std::string_view ref, const std::string& dest,
                                      const ExportOptions& options) {
  ASSIGN_OR_RETURN(ModelVersion v, Resolve(ref));
  ASSIGN_OR_RETURN(std::string text, LoadManifestText(v));
  ASSIGN_OR_RETURN(VerifyReport rep, CheckSignatures(v, text, options.require_signature));
  std::error_code ec;
  fs::path target = fs::absolute(dest).lexically_normal();
  if (fs::exists(fs::symlink_status(target, ec)) && !options.overwrite) {
    return AlreadyExists("destination " + target.string() +
                         " exists; pass --overwrite or choose "
                         "a new directory");
  }
  fs::create_directories(target.parent_path(), ec);
  std::string tmp = target.string() + ".tmp-XXXXXX";
  if (::mkdtemp(tmp.data()) == nullptr) return IoError("mkdtemp " + tmp, errno);
  auto cleanup = [&] { fs::remove_all(tmp, ec); };
  for (const auto& f : v.files) {
    RETURN_IF_ERROR(ValidateFilePath(f.path));  // defence in depth: metadata could be edited
    fs::path out = fs::path(tmp) / f.path;
    fs::create_directories(out.parent_path(), ec);
    Status s = artifacts_->GetFile(BlobKey(f.sha256), out.string());
    if (!s.ok()) {
      cleanup();
      return s.WithContext("downloading " + f.path);
    }
    auto h = HashPath(out.string(), out.filename().string());
    if (!h.ok() || h->files.size() != 1 || h->files[0].sha256 != f.sha256) {
      cleanup();
      return DataLoss("file " + f.path + " of " + v.model + "/" + std::to_string(v.version) +
                      " is corrupt in " + artifacts_->url() + ": sha256 " +
                      (h.ok() && !h->files.empty() ? h->files[0].sha256 : std::string("?")) +
                      ", expected " + f.sha256 + "; nothing was written to " + target.string());
    }
  }
  if (options.write_signature && !rep.verified_keyids.empty()) {
    ASSIGN_OR_RETURN(auto sigs, meta_->Signatures(v.model, v.version));
    Status s = WriteFileAtomic((fs::path(tmp) / kSignatureFile).string(),
                               sigs.at(rep.verified_keyids.front()));
    if (!s.ok()) {
      cleanup();
      return s;
    }
  }
  if (options.overwrite && fs::exists(target, ec)) fs::remove_all(target, ec);
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    int err = errno;
    cleanup();
    return IoError("renaming " + tmp + " to " + target.string(), err);
  }
  return rep;
}

}  // namespace gantry::registry
