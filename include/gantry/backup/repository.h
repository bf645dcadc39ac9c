// A `gantry backup` repository inside an object store:
//
//   config.json                      format version, chunker parameters, encryption
//                                    (written once, by a conditional create)
//   chunks/ab/<64 hex>               file chunks, named by SHA-256 of the plaintext
//                                    (HMAC-SHA256 with a key-derived secret when
//                                    encrypted, so names leak nothing)
//   backups/<YYYYMMDDTHHMMSS.uuuuuuZ>-<id>.json  one manifest per backup (UTC, microseconds),
//                                    written last
//   locks/<create|prune>-<id>.json   held by a running create or prune (src/backup/lock.h)
//
// Chunk objects: one flags byte (bit 0 zstd, bit 1 encrypted) then the payload;
// encrypted payloads are nonce(12) || AES-256-GCM ciphertext || tag(16) with the
// flags byte and the chunk name as associated data, so a chunk cannot be swapped
// for another one undetected. Encrypted repositories also seal their manifests
// the same way (paths and names are private too); plain ones store readable JSON.
//
// Keys: the user's key material (a file or a command's stdout, trailing newline
// dropped) goes through PBKDF2-HMAC-SHA256 with the repository's salt, then
// HKDF into separate encryption, chunk-naming and key-check keys. Only the salt,
// the iteration count and a key check value are stored - never the key - so a
// wrong key is reported as such before any data is touched.
//
// Thread-safety: a Repository is immutable after Open; every method may be
// called from many threads at once (the store must allow that too).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/backup/chunker.h"
#include "gantry/core/json.h"
#include "gantry/core/status.h"
#include "gantry/storage/object_store.h"

namespace gantry::backup {

inline constexpr int kRepoFormatVersion = 1;
inline constexpr std::string_view kConfigKey = "config.json";
inline constexpr std::string_view kChunkPrefix = "chunks/";
inline constexpr std::string_view kBackupPrefix = "backups/";

// Where the encryption key comes from; at most one of the two is set.
struct KeySource {
  std::string file;     // read whole; one trailing "\n" or "\r\n" is dropped
  std::string command;  // run with /bin/sh -c; its stdout, trailing newline dropped
  bool empty() const { return file.empty() && command.empty(); }
  // "key file F" / "key command 'C'" for messages (never the key itself).
  std::string Describe() const;
};

// The key material. NotFound/IoError naming the file; FailedPrecondition naming
// the command when it fails or prints nothing; InvalidArgument for an empty key
// or when both sources are set.
Result<std::string> LoadKey(const KeySource& source);

struct RepoConfig {
  int version = kRepoFormatVersion;
  std::string id;  // random, hex
  ChunkerParams chunker;
  int zstd_level = 3;
  bool encrypted = false;
  // Encryption parameters (when encrypted).
  std::string salt_hex;
  int kdf_iterations = 200000;
  std::string key_check_hex;

  Json ToJson() const;
  // InvalidArgument naming `origin` and the field for a malformed config or an
  // unsupported version.
  static Result<RepoConfig> FromJson(const Json& j, std::string_view origin);
};

// A chunk's name: 64 lowercase hex characters.
using ChunkId = std::string;

class Repository {
 public:
  // Opens an existing repository. NotFound when `store` has no config.json
  // ("run gantry backup create first"); FailedPrecondition when it is encrypted
  // and `key` is empty, or not encrypted and a key is given; PermissionDenied
  // when the key does not match (the message names `key_origin`).
  static Result<std::unique_ptr<Repository>> Open(storage::ObjectStore& store,
                                                  std::optional<std::string> key,
                                                  std::string key_origin = "the key");
  // Opens the repository, creating it first when the store has none (encrypted
  // when `key` is set, with `params` for the chunker). Concurrent creators race
  // on a conditional create; the loser opens the winner's config.
  static Result<std::unique_ptr<Repository>> OpenOrInit(storage::ObjectStore& store,
                                                        std::optional<std::string> key,
                                                        std::string key_origin = "the key",
                                                        const ChunkerParams& params = {});

  ~Repository();

  storage::ObjectStore& store() const { return store_; }
  const RepoConfig& config() const { return config_; }
  std::string url() const { return store_.url(); }
  bool encrypted() const { return config_.encrypted; }

  // The chunk name of `plaintext` (SHA-256, or HMAC-SHA256 when encrypted).
  ChunkId IdOf(std::string_view plaintext) const;
  static std::string ChunkKey(std::string_view id);  // "chunks/ab/<id>"
  // The id from "chunks/ab/<id>"; empty when `key` is not a chunk key.
  static std::string IdFromChunkKey(std::string_view key);

  // Object bytes for a chunk: compressed when that saves >= 3%, then sealed.
  Result<std::string> EncodeChunk(std::string_view id, std::string_view plaintext) const;
  // Reverses EncodeChunk and checks that the plaintext hashes to `id`.
  // DataLoss naming the chunk for a bad tag, bad framing or wrong hash.
  Result<std::string> DecodeChunk(std::string_view id, std::string_view object) const;

  // Manifest objects: plain JSON text, or sealed (zstd + AES-GCM) when encrypted.
  Result<std::string> EncodeManifest(std::string_view key, const Json& manifest) const;
  Result<Json> DecodeManifest(std::string_view key, std::string_view object) const;

  // Derived key material (opaque; defined in repository.cc).
  struct Keys;

 private:
  Repository(storage::ObjectStore& store, RepoConfig config, std::unique_ptr<Keys> keys);
  Result<std::string> Seal(std::string_view aad, std::string_view plaintext,
                           bool allow_compress) const;
  Result<std::string> Unseal(std::string_view aad, std::string_view object,
                             std::string_view what) const;

  storage::ObjectStore& store_;
  RepoConfig config_;
  std::unique_ptr<Keys> keys_;
};

// Every object under `prefix`, following continuation tokens (errors name the
// store URL and the prefix).
Result<std::vector<storage::ObjectInfo>> ListPrefix(storage::ObjectStore& store,
                                                    std::string_view prefix);

}  // namespace gantry::backup
