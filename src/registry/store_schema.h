// What the SQLite and PostgreSQL metadata stores share: one schema (BIGINT
// has integer affinity in SQLite, so the same text serves both) and the
// names both use for per-version rows and remembered version counters.
// Internal to src/registry.
#pragma once

#include <string>
#include <string_view>

namespace gantry::registry::store {

inline constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS models (
  name TEXT PRIMARY KEY, description TEXT NOT NULL, created BIGINT NOT NULL,
  updated BIGINT NOT NULL, next_version BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS versions (
  model TEXT NOT NULL, version BIGINT NOT NULL, description TEXT NOT NULL,
  created BIGINT NOT NULL, manifest_sha256 TEXT NOT NULL, subject_sha256 TEXT NOT NULL,
  total_bytes BIGINT NOT NULL, source TEXT NOT NULL, run_id TEXT NOT NULL,
  code_commit TEXT NOT NULL, parent TEXT NOT NULL, metrics TEXT NOT NULL,
  PRIMARY KEY (model, version));
CREATE TABLE IF NOT EXISTS version_files (
  model TEXT NOT NULL, version BIGINT NOT NULL, path TEXT NOT NULL, sha256 TEXT NOT NULL,
  size BIGINT NOT NULL, PRIMARY KEY (model, version, path));
CREATE TABLE IF NOT EXISTS version_datasets (
  model TEXT NOT NULL, version BIGINT NOT NULL, digest TEXT NOT NULL,
  PRIMARY KEY (model, version, digest));
CREATE TABLE IF NOT EXISTS tags (
  model TEXT NOT NULL, version BIGINT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
  PRIMARY KEY (model, version, key));
CREATE TABLE IF NOT EXISTS aliases (
  model TEXT NOT NULL, alias TEXT NOT NULL, version BIGINT NOT NULL,
  PRIMARY KEY (model, alias));
CREATE TABLE IF NOT EXISTS signatures (
  model TEXT NOT NULL, version BIGINT NOT NULL, keyid TEXT NOT NULL, bundle TEXT NOT NULL,
  created BIGINT NOT NULL, PRIMARY KEY (model, version, keyid));
CREATE TABLE IF NOT EXISTS trusted_keys (
  keyid TEXT PRIMARY KEY, algorithm TEXT NOT NULL, public_pem TEXT NOT NULL,
  comment TEXT NOT NULL, created BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS versions_run ON versions (run_id);
CREATE INDEX IF NOT EXISTS datasets_digest ON version_datasets (digest);
CREATE INDEX IF NOT EXISTS files_sha256 ON version_files (sha256);
CREATE INDEX IF NOT EXISTS versions_manifest ON versions (manifest_sha256);
)sql";

// settings key remembering a deleted model's version counter, so a model
// re-created under that name never hands out a deleted number again (see
// MetadataStore::DeleteModel).
inline std::string NextVersionKey(std::string_view name) {
  return "model_next_version:" + std::string(name);
}

// Per-version rows, children first (the versions row last).
inline constexpr const char* kVersionTables[] = {"version_files", "version_datasets", "tags",
                                                 "aliases",       "signatures",       "versions"};

}  // namespace gantry::registry::store
