// Repository config, keys, chunk naming and chunk/manifest sealing
// (see include/gantry/backup/repository.h).
#include "gantry/backup/repository.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/wait.h>
#include <zstd.h>

#include <array>
#include <cstdio>
#include <cstring>

#include "gantry/core/log.h"
#include "json_integer.h"

namespace gantry::backup {
namespace {

using internal::Integer;

constexpr uint8_t kFlagZstd = 1;
constexpr uint8_t kFlagEncrypted = 2;
constexpr size_t kNonceBytes = 12;
constexpr size_t kTagBytes = 16;
// Decompressed objects larger than this are refused (a corrupt or hostile
// frame header must not make us allocate without bound).
constexpr uint64_t kMaxPlainBytes = 1ull << 31;

std::string Hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = d[p[i] >> 4];
    s[2 * i + 1] = d[p[i] & 15];
  }
  return s;
}

Result<std::string> Unhex(std::string_view hex, std::string_view what) {
  if (hex.size() % 2 != 0) return InvalidArgument(std::string(what) + " is not hex");
  std::string out(hex.size() / 2, '\0');
  auto val = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = val(hex[2 * i]), lo = val(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return InvalidArgument(std::string(what) + " is not hex");
    out[i] = static_cast<char>(hi * 16 + lo);
  }
  return out;
}

std::array<uint8_t, 32> Sha256(std::string_view data) {
  std::array<uint8_t, 32> out{};
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr);
  return out;
}

std::array<uint8_t, 32> HmacSha256(std::string_view key, std::string_view data) {
  std::array<uint8_t, 32> out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out.data(), &len);
  return out;
}

std::string RandomHex(size_t bytes) {
  std::string b(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(b.data()), static_cast<int>(bytes)) != 1) {
    // Weak randomness would silently break nonce uniqueness: stop instead.
    std::abort();
  }
  return Hex(reinterpret_cast<const uint8_t*>(b.data()), b.size());
}

std::string StripNewline(std::string s) {
  if (!s.empty() && s.back() == '\n') s.pop_back();
  if (!s.empty() && s.back() == '\r') s.pop_back();
  return s;
}

}  // namespace

struct Repository::Keys {
  std::string enc;    // AES-256-GCM key
  std::string id;     // chunk naming HMAC key
  std::string check;  // key check value HMAC key
  ~Keys() {
    OPENSSL_cleanse(enc.data(), enc.size());
    OPENSSL_cleanse(id.data(), id.size());
    OPENSSL_cleanse(check.data(), check.size());
  }
};

namespace {

Result<std::unique_ptr<Repository::Keys>> DeriveKeys(const RepoConfig& c, std::string_view key,
                                                     std::string_view origin);

}  // namespace

std::string KeySource::Describe() const {
  if (!file.empty()) return "key file " + file;
  if (!command.empty()) return "key command '" + command + "'";
  return "no key";
}

Result<std::string> LoadKey(const KeySource& source) {
  if (!source.file.empty() && !source.command.empty()) {
    return InvalidArgument("give either --encrypt-key-file or --encrypt-key-command, not both");
  }
  std::string key;
  if (!source.file.empty()) {
    ASSIGN_OR_RETURN(key, ReadFile(source.file));
    key = StripNewline(std::move(key));
    if (key.empty()) return InvalidArgument("key file " + source.file + " is empty");
  } else if (!source.command.empty()) {
    FILE* p = popen(source.command.c_str(), "r");
    if (p == nullptr) return IoError("running key command '" + source.command + "'", errno);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) key.append(buf, n);
    int st = pclose(p);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      OPENSSL_cleanse(key.data(), key.size());
      return FailedPrecondition("key command '" + source.command + "' failed (exit status " +
                                std::to_string(WIFEXITED(st) ? WEXITSTATUS(st) : -1) +
                                "); it must print the key on stdout and exit 0");
    }
    key = StripNewline(std::move(key));
    if (key.empty()) {
      return FailedPrecondition("key command '" + source.command + "' printed nothing");
    }
  } else {
    return InvalidArgument("no key source given");
  }
  return key;
}

Json RepoConfig::ToJson() const {
  Json j{{"format", "gantry-backup"},
         {"version", version},
         {"id", id},
         {"chunker",
          {{"algorithm", "gear-fastcdc"},
           {"min_bytes", chunker.min_bytes},
           {"avg_bytes", chunker.avg_bytes},
           {"max_bytes", chunker.max_bytes},
           {"seed", Hex(reinterpret_cast<const uint8_t*>(&chunker.seed), 8)}}},
         {"compression", {{"algorithm", "zstd"}, {"level", zstd_level}}}};
  if (encrypted) {
    j["encryption"] = {{"algorithm", "aes-256-gcm"},
                       {"kdf", "pbkdf2-hmac-sha256"},
                       {"iterations", kdf_iterations},
                       {"salt", salt_hex},
                       {"key_check", key_check_hex}};
  } else {
    j["encryption"] = nullptr;
  }
  return j;
}

Result<RepoConfig> RepoConfig::FromJson(const Json& j, std::string_view origin) {
  std::string o(origin);
  auto bad = [&](std::string_view what) {
    return InvalidArgument(o + ": " + std::string(what) +
                           "; the repository config is corrupt or not a gantry backup repository");
  };
  try {
    if (!j.is_object() || j.value("format", "") != "gantry-backup") {
      return bad("missing \"format\": \"gantry-backup\"");
    }
    RepoConfig c;
    c.version = Integer<int>(j.at("version"));
    if (c.version != kRepoFormatVersion) {
      return InvalidArgument(o + ": repository format version " + std::to_string(c.version) +
                             " is not supported (this gantry reads version " +
                             std::to_string(kRepoFormatVersion) + "); upgrade gantry");
    }
    c.id = j.at("id").get<std::string>();
    const Json& ch = j.at("chunker");
    c.chunker.min_bytes = Integer<size_t>(ch.at("min_bytes"));
    c.chunker.avg_bytes = Integer<size_t>(ch.at("avg_bytes"));
    c.chunker.max_bytes = Integer<size_t>(ch.at("max_bytes"));
    ASSIGN_OR_RETURN(std::string seed, Unhex(ch.at("seed").get<std::string>(), "chunker.seed"));
    if (seed.size() != 8) return bad("chunker.seed must be 16 hex digits");
    std::memcpy(&c.chunker.seed, seed.data(), 8);
    Status s = ValidateChunkerParams(c.chunker);
    if (!s.ok()) return s.WithContext(o);
    c.zstd_level = Integer<int>(j.at("compression").at("level"));
    const Json& e = j.at("encryption");
    c.encrypted = !e.is_null();
    if (c.encrypted) {
      if (e.at("algorithm").get<std::string>() != "aes-256-gcm" ||
          e.at("kdf").get<std::string>() != "pbkdf2-hmac-sha256") {
        return bad("unsupported encryption algorithm or kdf");
      }
      c.kdf_iterations = Integer<int>(e.at("iterations"));
      c.salt_hex = e.at("salt").get<std::string>();
      c.key_check_hex = e.at("key_check").get<std::string>();
      if (c.kdf_iterations < 1 || c.salt_hex.size() != 32 || c.key_check_hex.size() != 64) {
        return bad("encryption parameters are malformed");
      }
    }
    return c;
  } catch (const Json::exception& ex) {
    return bad(std::string("missing or mistyped field (") + ex.what() + ")");
  }
}

namespace {

Result<std::unique_ptr<Repository::Keys>> DeriveKeys(const RepoConfig& c, std::string_view key,
                                                     std::string_view origin) {
  ASSIGN_OR_RETURN(std::string salt, Unhex(c.salt_hex, "encryption.salt"));
  std::array<uint8_t, 32> master{};
  if (PKCS5_PBKDF2_HMAC(key.data(), static_cast<int>(key.size()),
                        reinterpret_cast<const unsigned char*>(salt.data()),
                        static_cast<int>(salt.size()), c.kdf_iterations, EVP_sha256(),
                        master.size(), master.data()) != 1) {
    return Internal("PBKDF2 failed");
  }
  std::string_view m(reinterpret_cast<const char*>(master.data()), master.size());
  auto sub = [&](std::string_view label) {
    auto k = HmacSha256(m, std::string("gantry-backup/v1/") + std::string(label));
    return std::string(reinterpret_cast<const char*>(k.data()), k.size());
  };
  auto keys = std::make_unique<Repository::Keys>();
  keys->enc = sub("encrypt");
  keys->id = sub("chunk-id");
  keys->check = sub("key-check");
  OPENSSL_cleanse(master.data(), master.size());
  if (!c.key_check_hex.empty()) {
    auto kcv = HmacSha256(keys->check, "gantry-backup key check");
    std::string got = Hex(kcv.data(), kcv.size());
    if (got.size() != c.key_check_hex.size() ||
        CRYPTO_memcmp(got.data(), c.key_check_hex.data(), got.size()) != 0) {
      return PermissionDenied("wrong encryption key: " + std::string(origin) +
                              " does not match the key this repository was created with");
    }
  }
  return keys;
}

}  // namespace

Repository::Repository(storage::ObjectStore& store, RepoConfig config, std::unique_ptr<Keys> keys)
    : store_(store), config_(std::move(config)), keys_(std::move(keys)) {}

Repository::~Repository() = default;

Result<std::unique_ptr<Repository>> Repository::Open(storage::ObjectStore& store,
                                                     std::optional<std::string> key,
                                                     std::string key_origin) {
  auto text = store.Get(kConfigKey);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) {
      return NotFound("no gantry backup repository at " + store.url() +
                      " (config.json is missing); create one with gantry backup create --repo " +
                      store.url());
    }
    return text.status().WithContext("reading " + store.url() + "/config.json");
  }
  std::string origin = store.url() + "/config.json";
  ASSIGN_OR_RETURN(Json j, ParseJson(*text, origin));
  ASSIGN_OR_RETURN(RepoConfig c, RepoConfig::FromJson(j, origin));
  std::unique_ptr<Keys> keys;
  if (c.encrypted) {
    if (!key || key->empty()) {
      return FailedPrecondition("repository " + store.url() +
                                " is encrypted; pass --encrypt-key-file or --encrypt-key-command");
    }
    ASSIGN_OR_RETURN(keys, DeriveKeys(c, *key, key_origin));
  } else if (key && !key->empty()) {
    return FailedPrecondition("repository " + store.url() +
                              " is not encrypted, but a key was given (" + key_origin +
                              "); drop the key flag or use a new repository");
  }
  return std::unique_ptr<Repository>(new Repository(store, std::move(c), std::move(keys)));
}

Result<std::unique_ptr<Repository>> Repository::OpenOrInit(storage::ObjectStore& store,
                                                           std::optional<std::string> key,
                                                           std::string key_origin,
                                                           const ChunkerParams& params) {
  auto existing = Open(store, key, key_origin);
  if (existing.ok() || existing.status().code() != StatusCode::kNotFound) return existing;
  RETURN_IF_ERROR(ValidateChunkerParams(params));
  RepoConfig c;
  c.id = RandomHex(16);
  c.chunker = params;
  if (key && !key->empty()) {
    c.encrypted = true;
    c.salt_hex = RandomHex(16);
    ASSIGN_OR_RETURN(auto keys, DeriveKeys(c, *key, key_origin));
    auto kcv = HmacSha256(keys->check, "gantry-backup key check");
    c.key_check_hex = Hex(kcv.data(), kcv.size());
  }
  std::string text = c.ToJson().dump(2) + "\n";
  storage::PutOptions po;
  po.if_none_match = true;
  po.content_type = "application/json";
  Status s = store.Put(kConfigKey,
                       std::span(reinterpret_cast<const std::byte*>(text.data()), text.size()), po);
  if (!s.ok() && s.code() != StatusCode::kAlreadyExists) {
    return s.WithContext("creating repository " + store.url());
  }
  if (s.ok()) log::info("created backup repository {} (encrypted: {})", store.url(), c.encrypted);
  return Open(store, std::move(key), std::move(key_origin));
}

ChunkId Repository::IdOf(std::string_view plaintext) const {
  auto h = keys_ ? HmacSha256(keys_->id, plaintext) : Sha256(plaintext);
  return Hex(h.data(), h.size());
}

std::string Repository::ChunkKey(std::string_view id) {
  std::string k(kChunkPrefix);
  k.append(id.substr(0, 2));
  k += '/';
  k.append(id);
  return k;
}

std::string Repository::IdFromChunkKey(std::string_view key) {
  if (!key.starts_with(kChunkPrefix)) return {};
  key.remove_prefix(kChunkPrefix.size());
  if (key.size() != 3 + 64 || key[2] != '/' || key.substr(0, 2) != key.substr(3, 2)) return {};
  for (char c : key.substr(3)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return {};
  }
  return std::string(key.substr(3));
}

Result<std::string> Repository::Seal(std::string_view aad, std::string_view plaintext,
                                     bool allow_compress) const {
  uint8_t flags = 0;
  std::string body;
  if (allow_compress && plaintext.size() >= 64) {
    body.resize(ZSTD_compressBound(plaintext.size()));
    size_t n = ZSTD_compress(body.data(), body.size(), plaintext.data(), plaintext.size(),
                             config_.zstd_level);
    // Keep the compressed form only when it saves at least ~3%: decompressing
    // for nothing costs CPU on every restore.
    if (!ZSTD_isError(n) && n * 100 < plaintext.size() * 97) {
      body.resize(n);
      flags |= kFlagZstd;
    } else {
      body.assign(plaintext);
    }
  } else {
    body.assign(plaintext);
  }
  if (!keys_) {
    std::string out;
    out.reserve(1 + body.size());
    out += static_cast<char>(flags);
    out += body;
    return out;
  }
  flags |= kFlagEncrypted;
  std::string out(1 + kNonceBytes + body.size() + kTagBytes, '\0');
  out[0] = static_cast<char>(flags);
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  if (RAND_bytes(o + 1, kNonceBytes) != 1) std::abort();
  std::string ad(1, static_cast<char>(flags));
  ad += aad;
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int len = 0;
  bool ok =
      ctx != nullptr &&
      EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr,
                         reinterpret_cast<const unsigned char*>(keys_->enc.data()), o + 1) == 1 &&
      EVP_EncryptUpdate(ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(ad.data()),
                        static_cast<int>(ad.size())) == 1 &&
      EVP_EncryptUpdate(ctx, o + 1 + kNonceBytes, &len,
                        reinterpret_cast<const unsigned char*>(body.data()),
                        static_cast<int>(body.size())) == 1 &&
      EVP_EncryptFinal_ex(ctx, o + 1 + kNonceBytes + len, &len) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, kTagBytes,
                          o + 1 + kNonceBytes + body.size()) == 1;
  EVP_CIPHER_CTX_free(ctx);
  if (!ok) return Internal("AES-256-GCM encryption failed");
  return out;
}

Result<std::string> Repository::Unseal(std::string_view aad, std::string_view object,
                                       std::string_view what) const {
  std::string w(what);
  if (object.empty()) return DataLoss(w + " is empty; the object is corrupt");
  uint8_t flags = static_cast<uint8_t>(object[0]);
  if ((flags & ~(kFlagZstd | kFlagEncrypted)) != 0) {
    return DataLoss(w + " has unknown flags " + std::to_string(flags) + "; the object is corrupt");
  }
  bool enc = (flags & kFlagEncrypted) != 0;
  if (enc != (keys_ != nullptr)) {
    return DataLoss(w +
                    (enc ? " is encrypted but the repository is not"
                         : " is not encrypted but the repository is") +
                    "; the object was tampered with or written by another tool");
  }
  std::string body;
  if (enc) {
    if (object.size() < 1 + kNonceBytes + kTagBytes) {
      return DataLoss(w + " is too short for an encrypted object; the object is corrupt");
    }
    size_t n = object.size() - 1 - kNonceBytes - kTagBytes;
    const auto* in = reinterpret_cast<const unsigned char*>(object.data());
    body.resize(n);
    std::string ad(1, static_cast<char>(flags));
    ad += aad;
    std::array<unsigned char, kTagBytes> tag;
    std::memcpy(tag.data(), in + 1 + kNonceBytes + n, kTagBytes);
    EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
    int len = 0;
    bool ok =
        ctx != nullptr &&
        EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr,
                           reinterpret_cast<const unsigned char*>(keys_->enc.data()),
                           in + 1) == 1 &&
        EVP_DecryptUpdate(ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(ad.data()),
                          static_cast<int>(ad.size())) == 1 &&
        EVP_DecryptUpdate(ctx, reinterpret_cast<unsigned char*>(body.data()), &len,
                          in + 1 + kNonceBytes, static_cast<int>(n)) == 1 &&
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, kTagBytes, tag.data()) == 1 &&
        EVP_DecryptFinal_ex(ctx, reinterpret_cast<unsigned char*>(body.data()) + len, &len) == 1;
    EVP_CIPHER_CTX_free(ctx);
    if (!ok) {
      return DataLoss(w +
                      " failed authentication (AES-GCM tag mismatch): the object was "
                      "modified or corrupted");
    }
  } else {
    body.assign(object.substr(1));
  }
  if ((flags & kFlagZstd) == 0) return body;
  unsigned long long size = ZSTD_getFrameContentSize(body.data(), body.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size > kMaxPlainBytes) {
    return DataLoss(w + " has a corrupt zstd frame header");
  }
  std::string plain(size, '\0');
  size_t got = ZSTD_decompress(plain.data(), plain.size(), body.data(), body.size());
  if (ZSTD_isError(got) || got != size) {
    return DataLoss(w + " failed to decompress (" +
                    std::string(ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short output") +
                    "); the object is corrupt");
  }
  return plain;
}

Result<std::string> Repository::EncodeChunk(std::string_view id, std::string_view plaintext) const {
  return Seal(id, plaintext, /*allow_compress=*/true);
}

Result<std::string> Repository::DecodeChunk(std::string_view id, std::string_view object) const {
  std::string what = "chunk " + std::string(id) + " in " + url();
  ASSIGN_OR_RETURN(std::string plain, Unseal(id, object, what));
  if (IdOf(plain) != id) {
    return DataLoss(what + " does not match its hash: the chunk is corrupt");
  }
  return plain;
}

Result<std::string> Repository::EncodeManifest(std::string_view key, const Json& manifest) const {
  if (!keys_) return manifest.dump(1) + "\n";
  return Seal(key, manifest.dump(), /*allow_compress=*/true);
}

Result<Json> Repository::DecodeManifest(std::string_view key, std::string_view object) const {
  std::string origin = url() + "/" + std::string(key);
  if (!keys_) return ParseJson(object, origin);
  ASSIGN_OR_RETURN(std::string plain, Unseal(key, object, "manifest " + origin));
  return ParseJson(plain, origin);
}

Result<std::vector<storage::ObjectInfo>> ListPrefix(storage::ObjectStore& store,
                                                    std::string_view prefix) {
  std::vector<storage::ObjectInfo> all;
  std::string next;
  do {
    auto page = store.List(prefix, next);
    if (!page.ok()) {
      return page.status().WithContext("listing " + store.url() + "/" + std::string(prefix));
    }
    for (auto& o : page->objects) all.push_back(std::move(o));
    next = std::move(page->next);
  } while (!next.empty());
  return all;
}

}  // namespace gantry::backup
