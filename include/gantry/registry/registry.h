// Model registry: registered models with immutable, content-addressed
// versions, aliases that move atomically, tags, lineage and signed manifests
// compatible with OpenSSF model signing (sigstore/model-transparency, v1.0
// predicate, "files" serialization, sha256).
//
// Storage split:
//   - metadata (models, versions, aliases, tags, lineage, signatures, trusted
//     keys, policy) in a MetadataStore: SQLite in WAL mode by default. The SQL
//     is plain (TEXT/INTEGER columns, no SQLite-only functions, upserts as
//     INSERT ... ON CONFLICT which PostgreSQL also has), so a PostgreSQL
//     implementation of the same interface is a driver swap (BIGINT for
//     INTEGER, $n placeholders, SERIALIZABLE or SELECT ... FOR UPDATE for the
//     version counter); OpenPostgresMetadataStore (postgres_store.cc) is that
//     driver, selected by OpenMetadataStore for postgresql:// URIs.
//   - artifacts in a storage::ObjectStore, content-addressed:
//     "blobs/sha256/<2 hex>/<64 hex>" for every file and
//     "manifests/sha256/<2 hex>/<64 hex>" for each version's manifest (the
//     in-toto statement text). Identical files are stored once; a delete
//     removes an object only when no remaining version references it.
//
// Register: hash every file (refusing traversal, escaping symlinks, special
// files), upload the blobs that are missing, upload the manifest, and only
// then insert the version row (one transaction that also allocates the
// version number): a crash or error before that leaves no visible version
// (orphan blobs are harmless and reused by the next attempt).
//
// Verify-before-use: Export re-hashes every byte it downloads against the
// manifest, checks the manifest digest recorded in the metadata, and, under
// the "signatures required" policy (or when asked), checks a DSSE signature by
// a trusted key over a statement whose resources equal the manifest exactly.
// Files land in a temporary sibling directory renamed into place at the end.
//
// Thread-safety: a Registry may be used from several threads; the SQLite
// connection is serialized internally. Several processes may share one
// SQLite file (WAL, busy timeout); alias moves are compare-and-set in one
// transaction. A PostgreSQL store is one connection (also serialized) and is
// safe to share between processes and machines (row locks, see
// postgres_store.cc).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/clock.h"
#include "gantry/core/json.h"
#include "gantry/core/status.h"
#include "gantry/security/audit.h"
#include "gantry/security/dsse.h"
#include "gantry/storage/object_store.h"

namespace gantry::registry {

inline constexpr std::string_view kStatementType = "https://in-toto.io/Statement/v1";
inline constexpr std::string_view kPredicateType = "https://model_signing/signature/v1.0";
inline constexpr std::string_view kInTotoPayloadType = "application/vnd.in-toto+json";
inline constexpr std::string_view kBundleMediaType =
    "application/vnd.dev.sigstore.bundle.v0.3+json";
inline constexpr std::string_view kSignatureFile = "model.sig";

// Limits that keep hostile input bounded.
inline constexpr size_t kMaxManifestBytes = 64u << 20;
inline constexpr size_t kMaxFiles = 100000;

// ---- names and paths ----
// Model names: 1..128 of [A-Za-z0-9._-], starting alphanumeric, no "..".
Status ValidateModelName(std::string_view name);
// Aliases: 1..64 of [A-Za-z0-9_-], starting with a letter; "latest" and
// "v<digits>" are reserved (they would shadow version references).
Status ValidateAlias(std::string_view alias);
// Tag keys: 1..250 of [A-Za-z0-9._/-]; values up to 5000 bytes.
Status ValidateTag(std::string_view key, std::string_view value);
// Manifest file paths: relative '/'-separated, no empty/"."/".." segments,
// no backslash, NUL or control characters, at most 1024 bytes.
Status ValidateFilePath(std::string_view path);

// ---- manifests (model-signing "files" method) ----
struct FileEntry {
  std::string path;    // relative, '/'-separated
  std::string sha256;  // 64 lowercase hex
  uint64_t size = 0;
};

// Files sorted by path; the subject digest is SHA-256 over the raw 32-byte
// digests concatenated in that order (as model_signing computes it).
struct Manifest {
  std::string name;  // subject name (the model name)
  std::vector<FileEntry> files;
  bool allow_symlinks = false;
  std::vector<std::string> ignore_paths;
};

std::string SubjectDigest(const std::vector<FileEntry>& sorted_files);
// The in-toto Statement v1 with the model-signing v1.0 predicate. Keys are
// sorted and the text compact so the same manifest always gives the same
// bytes (its SHA-256 is the manifest digest). Sizes are not part of the
// published format and are kept only in the metadata store.
std::string StatementJson(const Manifest& m);
// Parses and validates a statement: types, every path, hex digests, no
// duplicates, the subject digest recomputed. InvalidArgument / DataLoss name
// the field at fault. Sizes come back as 0.
Result<Manifest> ParseStatement(std::string_view text);

// Hashes a model directory (or a single regular file, listed under its base
// name). Follows symlinks only when they resolve inside `path`; skips
// "model.sig" and ".git*" at the top level. InvalidArgument for a symlink
// that escapes, a special file, a bad name, or more than kMaxFiles files.
Result<Manifest> HashPath(const std::string& path, const std::string& subject_name);

// Compares a manifest with what a signature covers (or a directory with a
// manifest): "missing file X", "extra file X", "X: digest ... != ...".
// DataLoss listing the first few differences.
Status CompareManifests(const Manifest& expected, const Manifest& actual, std::string_view what);

// The sigstore bundle v0.3 JSON model_signing writes as model.sig for
// key-based signing: {mediaType, verificationMaterial:{publicKey:{hint}},
// dsseEnvelope:{...}}.
Json BundleJson(const security::DsseEnvelope& env, std::string_view key_hint);
Result<security::DsseEnvelope> ParseBundle(std::string_view text);

// Signs a local model directory the way `model_signing sign key` does and
// returns the bundle text; VerifyDirectory checks a directory against one.
Result<std::string> SignDirectory(const std::string& dir, const security::DsseSigner& signer);
// Returns the trusted key id that verified. PermissionDenied for signature
// problems, DataLoss for content differences (tampered/missing/extra files).
Result<std::string> VerifyDirectory(const std::string& dir, std::string_view bundle_text,
                                    const std::vector<security::DsseVerifier>& trusted);

// ---- data model ----
struct Lineage {
  std::string source;  // e.g. "ckpt:/nvme/ckpt/run1/step-0000000100" or a directory
  std::string run_id;
  std::string code_commit;
  std::vector<std::string> dataset_digests;
  std::string parent;  // "name/version" of the version this one derives from
  Json metrics = Json::object();
};

struct ModelVersion {
  std::string model;
  int64_t version = 0;
  std::string description;
  int64_t created_unix = 0;
  std::string manifest_sha256;  // SHA-256 of the statement text (the manifest object key)
  std::string subject_sha256;   // the statement's subject digest
  uint64_t total_bytes = 0;
  std::vector<FileEntry> files;
  Lineage lineage;
  std::map<std::string, std::string> tags;
  std::vector<std::string> aliases;
  std::vector<std::string> signer_keyids;
};

struct RegisteredModel {
  std::string name;
  std::string description;
  int64_t created_unix = 0;
  int64_t updated_unix = 0;
  int64_t latest_version = 0;  // 0: none yet
  std::map<std::string, std::string> tags;
  std::map<std::string, int64_t> aliases;
};

struct TrustedKey {
  std::string keyid;
  std::string algorithm;
  std::string public_pem;
  std::string comment;
};

// Lineage and tag filters; every set field must match.
struct SearchQuery {
  std::string name_like{};  // substring of the model name
  std::string tag_key{};    // version or model tag key (with tag_value when set)
  std::string tag_value{};
  std::string alias{};  // versions carrying this alias
  std::string run_id{};
  std::string dataset_digest{};
  std::string source_like{};  // substring of lineage.source
  std::string code_commit{};
  std::string parent{};
  int limit = 100;  // 1..1000; anything else means 100
};

// The MLflow-shaped JSON of the HTTP API and of `--json` (versions and
// counters as strings where MLflow has them, times in milliseconds).
Json ToJson(const ModelVersion& v);
Json ToJson(const RegisteredModel& m);

// ---- metadata store ----
class MetadataStore {
 public:
  virtual ~MetadataStore() = default;
  // Creates the model when missing (description kept when it exists).
  virtual Status EnsureModel(std::string_view name, std::string_view description, int64_t now) = 0;
  virtual Result<RegisteredModel> GetModel(std::string_view name) = 0;
  virtual Result<std::vector<RegisteredModel>> ListModels() = 0;
  // Allocates the next version number and inserts the version, its files and
  // tags in one transaction; returns the number.
  virtual Result<int64_t> InsertVersion(const ModelVersion& v, int64_t now) = 0;
  virtual Result<ModelVersion> GetVersion(std::string_view name, int64_t version) = 0;
  virtual Result<std::vector<ModelVersion>> ListVersions(std::string_view name) = 0;
  // Compare-and-set: when `expected` is set the alias must currently point at
  // it (0 = must not exist), else FailedPrecondition naming the current target.
  virtual Status SetAlias(std::string_view name, std::string_view alias, int64_t version,
                          std::optional<int64_t> expected, int64_t now) = 0;
  virtual Status DeleteAlias(std::string_view name, std::string_view alias,
                             std::optional<int64_t> expected, int64_t now) = 0;
  virtual Result<int64_t> ResolveAlias(std::string_view name, std::string_view alias) = 0;
  // version 0: a model tag. Empty value with erase=true deletes.
  virtual Status SetTag(std::string_view name, int64_t version, std::string_view key,
                        std::string_view value, bool erase, int64_t now) = 0;
  virtual Status SetDescription(std::string_view name, int64_t version, std::string_view text,
                                int64_t now) = 0;
  virtual Status AddSignature(std::string_view name, int64_t version, std::string_view keyid,
                              std::string_view bundle, int64_t now) = 0;
  // keyid -> bundle text.
  virtual Result<std::map<std::string, std::string>> Signatures(std::string_view name,
                                                                int64_t version) = 0;
  virtual Status AddTrustedKey(const TrustedKey& key, int64_t now) = 0;
  virtual Status RemoveTrustedKey(std::string_view keyid) = 0;
  virtual Result<std::vector<TrustedKey>> TrustedKeys() = 0;
  virtual Result<std::string> GetSetting(std::string_view key) = 0;  // "" when unset
  virtual Status SetSetting(std::string_view key, std::string_view value) = 0;
  virtual Result<std::vector<ModelVersion>> Search(const SearchQuery& q) = 0;
  // Deletes one version (version >= 1) with its files, datasets, tags,
  // signatures and the aliases pointing at it, in one transaction, and
  // returns it as it was (aliases included). The version counter is not
  // decremented: a deleted number is never handed out again. NotFound when
  // the version does not exist.
  virtual Result<ModelVersion> DeleteVersion(std::string_view name, int64_t version,
                                             int64_t now) = 0;
  // Deletes a registered model with every version, tag and alias (one
  // transaction) and returns the deleted versions. The model's version
  // counter is remembered, so a model re-created under the same name
  // continues numbering after the deleted versions. NotFound when missing.
  virtual Result<std::vector<ModelVersion>> DeleteModel(std::string_view name) = 0;
  // True when any version's files or manifest still use this SHA-256 (the
  // garbage-collection check after a delete).
  virtual Result<bool> DigestReferenced(std::string_view sha256) = 0;
};

// Opens (creating) a SQLite metadata database in WAL mode with a busy
// timeout. IoError / DataLoss name the path.
Result<std::unique_ptr<MetadataStore>> OpenSqliteMetadataStore(const std::string& path);
// Connects to a PostgreSQL database given as a libpq connection URI
// ("postgresql://user@host:5432/dbname", "postgres://...", or with
// "?host=/socket/dir") and creates the (versioned) schema on first use. The
// database must exist. Alias moves and version numbers are safe across
// processes and machines (row locks). Errors name the database (never the
// password): Unavailable when it cannot be reached.
Result<std::unique_ptr<MetadataStore>> OpenPostgresMetadataStore(const std::string& uri);
// `--db` values: "postgresql://..." or "postgres://..." open PostgreSQL,
// anything else is a SQLite file path.
bool IsPostgresUri(std::string_view db);
Result<std::unique_ptr<MetadataStore>> OpenMetadataStore(const std::string& db);

// ---- registry ----
struct RegisterRequest {
  std::string name;
  std::string path;  // a directory or one file (e.g. model.safetensors)
  std::string description;
  Lineage lineage;
  std::map<std::string, std::string> tags;
};

// Where a checkpoint step comes from (register --from-ckpt).
struct CheckpointSource {
  std::string root;  // local checkpoint root
  std::string run;
  std::optional<int64_t> step;  // nullopt = the latest step that verifies
};

// Reads a checkpoint step for `register --from-ckpt`, local or through a
// server (RemoteClient::RegisterCheckpoint): the committed step `src.step`
// (verified in full first) or the latest step that verifies. Returns `req`
// with path = the step directory, lineage.source = "ckpt:<step dir>",
// lineage.run_id = src.run when empty, lineage.metrics = the step's metadata
// "metrics" when empty, and the tag ckpt.step. Errors: Unimplemented for a
// remote root (az://...), NotFound for a run or step that does not exist,
// DataLoss for a step that does not verify.
Result<RegisterRequest> ReadCheckpointStep(RegisterRequest req, const CheckpointSource& src);

struct ExportOptions {
  // Refuse unless a trusted signature covers the manifest (also forced on by
  // the registry policy "require_signatures").
  bool require_signature = false;
  bool write_signature = true;  // write model.sig (the bundle) beside the files when signed
  bool overwrite = false;       // replace an existing destination directory
};

struct VerifyReport {
  std::string model;
  int64_t version = 0;
  size_t files = 0;
  uint64_t bytes = 0;
  std::vector<std::string> verified_keyids;  // trusted keys whose signatures verified
  bool signed_by_trusted = false;
};

// {name, version, files, bytes, signed_by_trusted, verified_keyids}
Json ToJson(const VerifyReport& r);

// Checks signature bundles (keyid -> bundle text, as stored per version)
// over `manifest_text` (the exact statement bytes) against `trusted`. Each
// bundle must parse, carry the in-toto payloadType, verify under a trusted
// key, and sign exactly `manifest_text`. `label` ("name/3") names the version
// in messages. With `require`, no valid trusted signature is PermissionDenied
// ("... is not signed and <required_by>" / "... has no valid signature by a
// trusted key: <reasons>"); without it an invalid signature is still refused
// when trusted keys are configured (a bad signature is never ignored).
// Used by Registry (server-side trust) and RemoteClient (client-side trust).
Result<VerifyReport> CheckSignatureBundles(std::string_view label,
                                           const std::map<std::string, std::string>& bundles,
                                           std::string_view manifest_text,
                                           const std::vector<security::DsseVerifier>& trusted,
                                           bool require, std::string_view required_by);

// What a delete removed.
struct DeleteReport {
  std::string model;
  std::vector<int64_t> versions;             // deleted version numbers
  std::vector<std::string> aliases_removed;  // aliases that pointed at them
  size_t blobs_removed = 0;                  // file objects no other version uses
  size_t manifests_removed = 0;
  std::vector<std::string> gc_errors;  // objects that could not be removed (left as orphans)
};

// {name, versions, aliases_removed, blobs_removed, manifests_removed, gc_errors}
Json ToJson(const DeleteReport& r);

class Registry {
 public:
  // `clock` (null: the system clock) must outlive the registry.
  Registry(std::unique_ptr<MetadataStore> meta, std::unique_ptr<storage::ObjectStore> artifacts,
           const Clock* clock = nullptr);
  Registry(Registry&&) = default;
  Registry& operator=(Registry&&) = default;

  MetadataStore& meta() { return *meta_; }
  // Every change (register, alias set/rm, sign, trust, policy, delete) is appended to
  // `log` as {"time","type":"registry","action",...,"actor"} and flushed
  // before the call returns; a failed flush is returned as the call's error
  // (the change itself is already committed). `log` must outlive the
  // registry; null turns auditing off.
  void SetAudit(security::AuditLog* log, std::string actor) {
    owned_audit_.reset();
    audit_ = log;
    actor_ = std::move(actor);
  }
  // The same, the registry keeping `log` (and handles made by ForCaller
  // sharing it).
  void SetAudit(std::unique_ptr<security::AuditLog> log, std::string actor);
  security::AuditLog* audit_log() const { return audit_; }
  // A handle on the same stores and clock whose changes are audited to `log`
  // (null: not audited) as made by `actor`: a server acting for many callers
  // at once takes one per request instead of changing this registry's actor.
  // The handle shares the stores; this registry may go first.
  Registry ForCaller(security::AuditLog* log, std::string actor) const;
  storage::ObjectStore& artifacts() { return *artifacts_; }

  Result<ModelVersion> Register(const RegisterRequest& req);
  Result<ModelVersion> RegisterCheckpoint(RegisterRequest req, const CheckpointSource& src);

  // "name/3", "name@alias", "name" (latest), "models:/name/3", "models:/name@alias".
  Result<ModelVersion> Resolve(std::string_view ref);

  Status SetAlias(std::string_view name, std::string_view alias, int64_t version,
                  std::optional<int64_t> expected = std::nullopt);
  Status DeleteAlias(std::string_view name, std::string_view alias,
                     std::optional<int64_t> expected = std::nullopt);

  // Signs the stored manifest of `ref` (after re-checking its digest) and
  // records the bundle. Returns the key id.
  Result<std::string> Sign(std::string_view ref, const security::DsseSigner& signer);
  // Records a signature bundle made elsewhere (`sign --server`: the client
  // signs the manifest it fetched). The bundle must be a DSSE envelope over
  // exactly the stored manifest of `ref` with the in-toto payloadType; when
  // its key id is a trusted key it must also verify now. InvalidArgument
  // otherwise, naming what differs. Audited like Sign. Returns the key id.
  Result<std::string> AddSignatureBundle(std::string_view ref, std::string_view bundle);
  // Deletes one version (its aliases are removed) or a whole model, then
  // removes the stored blobs and manifests that no remaining version
  // references (content shared with another version stays). Version numbers
  // are never reused. Audited as "delete_version" / "delete_model".
  // Objects that fail to delete are reported in gc_errors (harmless orphans),
  // not as an error: the metadata change is already committed.
  Result<DeleteReport> DeleteVersion(std::string_view name, int64_t version);
  Result<DeleteReport> DeleteModel(std::string_view name);
  // Verifies the manifest digest, every stored blob, and the signatures.
  // With require_signature (or the policy), no trusted signature is
  // PermissionDenied.
  Result<VerifyReport> Verify(std::string_view ref, bool require_signature = false);
  // Downloads into `dest` verifying every byte (see file comment).
  Result<VerifyReport> Export(std::string_view ref, const std::string& dest,
                              const ExportOptions& options = {});

  Result<std::vector<security::DsseVerifier>> TrustedVerifiers();
  Result<bool> SignaturesRequired();
  Status SetSignaturesRequired(bool on);
  Result<TrustedKey> TrustKey(std::string_view public_pem, std::string_view comment);
  Status UntrustKey(std::string_view keyid);

 private:
  int64_t Now() const;
  Status Audit(Json record);
  Result<std::string> LoadManifestText(const ModelVersion& v);
  Result<VerifyReport> CheckSignatures(const ModelVersion& v, const std::string& manifest_text,
                                       bool require);
  void CollectGarbage(const std::vector<ModelVersion>& gone, DeleteReport* rep);

  Registry(std::shared_ptr<MetadataStore> meta, std::shared_ptr<storage::ObjectStore> artifacts,
           const Clock* clock, std::shared_ptr<security::AuditLog> owned_audit,
           security::AuditLog* audit, std::string actor);

  std::shared_ptr<MetadataStore> meta_;
  std::shared_ptr<storage::ObjectStore> artifacts_;
  const Clock* clock_;
  std::shared_ptr<security::AuditLog> owned_audit_;  // set by the owning SetAudit
  security::AuditLog* audit_ = nullptr;
  std::string actor_;
};

// Where a registry's stores are: what `--db`, `--artifacts`, `--container`
// and `--audit-log` name.
struct OpenOptions {
  std::string db{};  // a SQLite file path or a postgresql:// URI (required)
  // The artifact store URL (file:///dir, /dir, az://account/container[/prefix],
  // or a connection string with `container`). Empty: the URL remembered in
  // the database. The first URL given is remembered there, unless it is a
  // connection string (it holds a secret); so is `container`.
  std::string artifacts{};
  std::string container{};
  std::string prefix{};
  std::string audit_log{};  // append every change to this audit log (empty: none)
  std::string actor{};      // the actor audit records name (e.g. $USER)
  // A YAML file with an `azure_monitor: {logs: ...}` block (monitor/shipper.h):
  // every line of the audit log is also shipped to Log Analytics. Needs audit_log.
  std::string azure_monitor_config{};
};

// Opens the metadata store, the artifact store and the audit log.
// InvalidArgument when `db` is empty or no artifact store is known yet;
// otherwise the stores' errors.
Result<std::unique_ptr<Registry>> OpenRegistry(const OpenOptions& options);

// Object keys.
std::string BlobKey(std::string_view sha256_hex);
std::string ManifestKey(std::string_view sha256_hex);

}  // namespace gantry::registry
