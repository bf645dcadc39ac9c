#include "format.h"

#include <openssl/sha.h>
#include <xxhash.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

namespace gantry::ckpt::internal {

std::string StepName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step-%010" PRId64, step);
  return buf;
}

bool ParseStepName(std::string_view name, int64_t* step) {
  if (!name.starts_with(kStepPrefix) || name.size() != kStepPrefix.size() + 10) return false;
  int64_t v = 0;
  for (char c : name.substr(kStepPrefix.size())) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *step = v;
  return true;
}

std::string ShardName(int rank, int world_size) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "shard-%05d-of-%05d.safetensors", rank, world_size);
  return buf;
}

bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t extra;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      extra = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      extra = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (text.size() - i <= extra) return false;
    for (size_t k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Overlong forms, UTF-16 surrogates and values past U+10FFFF are invalid.
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += extra + 1;
  }
  return true;
}

bool ShapeBytes(const std::vector<int64_t>& shape, DType dtype, uint64_t* bytes) {
  uint64_t n = DTypeSize(dtype);
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return false;
  }
  *bytes = n;
  return true;
}

Status ValidateTensors(std::span<const TensorView> tensors) {
  std::set<std::string_view> seen;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorView& t = tensors[i];
    if (t.name.empty())
      return InvalidArgument("a tensor has an empty name; every tensor needs one");
    if (!IsValidUtf8(t.name)) {
      return InvalidArgument("tensor " + std::to_string(i) +
                             " has a name that is not valid UTF-8; use UTF-8 names");
    }
    if (t.name == "__metadata__") {
      return InvalidArgument("tensor name '__metadata__' is reserved by safetensors; rename it");
    }
    if (!seen.insert(t.name).second) {
      return InvalidArgument("tensor name '" + t.name + "' appears twice; names must be unique");
    }
    for (int64_t d : t.shape) {
      if (d < 0) return InvalidArgument("tensor '" + t.name + "' has a negative dimension");
    }
    uint64_t want = 0;
    if (!ShapeBytes(t.shape, t.dtype, &want)) {
      return InvalidArgument("tensor '" + t.name + "': shape times dtype size " +
                             std::string(DTypeName(t.dtype)) + " overflows 64 bits");
    }
    if (want != t.bytes) {
      return InvalidArgument("tensor '" + t.name + "': shape and dtype " +
                             std::string(DTypeName(t.dtype)) + " need " + std::to_string(want) +
                             " bytes but " + std::to_string(t.bytes) + " were given");
    }
    if (t.bytes > 0 && t.data == nullptr) {
      return InvalidArgument("tensor '" + t.name + "' has no data pointer");
    }
  }
  return Status::Ok();
}

Json ManifestToJson(const Manifest& m) {
  Json j;
  j["format"] = "gantry-ckpt";
  j["format_version"] = m.format_version;
  j["step"] = m.step;
  j["created"] = m.created;
  j["created_unix_s"] = m.created_unix_s;
  j["creator"] = m.creator;
  j["world_size"] = m.world_size;
  j["checksum"] = "xxh3-64";
  j["chunk_bytes"] = m.chunk_bytes;
  j["metadata"] = m.metadata;
  Json shards = Json::array();
  for (const ShardEntry& s : m.shards) {
    shards.push_back({{"file", s.file}, {"rank", s.rank}, {"bytes", s.bytes}});
  }
  j["shards"] = std::move(shards);
  Json tensors = Json::array();
  for (const TensorEntry& t : m.tensors) {
    Json chunks = Json::array();
    for (uint64_t c : t.chunks) chunks.push_back(HexU64(c));
    tensors.push_back({{"name", t.name},
                       {"dtype", DTypeName(t.dtype)},
                       {"shape", t.shape},
                       {"shard", t.shard},
                       {"offset", t.offset},
                       {"length", t.length},
                       {"chunks", std::move(chunks)}});
  }
  j["tensors"] = std::move(tensors);
  return j;
}

namespace {

// Manifests and safetensors headers are untrusted. nlohmann's get<integer>()
// converts a float or an out-of-range value with a plain cast (undefined
// behaviour for 1e300, silent wrap for -1 into uint64_t), so every integer
// goes through here; the throw is caught by the parser's try block and
// becomes a DataLoss naming the file.
template <typename T>
T GetInt(const Json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (std::in_range<T>(u)) return static_cast<T>(u);
  } else if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (std::in_range<T>(i)) return static_cast<T>(i);
  } else {
    throw std::invalid_argument("expected an integer, got " + v.dump());
  }
  throw std::out_of_range("integer " + v.dump() + " is out of range");
}

template <typename T>
std::vector<T> GetInts(const Json& v) {
  if (!v.is_array()) throw std::invalid_argument("expected an array of integers, got " + v.dump());
  std::vector<T> out;
  out.reserve(v.size());
  for (const Json& x : v) out.push_back(GetInt<T>(x));
  return out;
}

Status ParseTensors(const Json& arr, const std::string& origin, std::vector<TensorEntry>* out) {
  if (!arr.is_array()) return DataLoss(origin + ": 'tensors' is not an array");
  for (const Json& t : arr) {
    TensorEntry e;
    e.name = t.at("name").get<std::string>();
    ASSIGN_OR_RETURN(e.dtype, ParseDType(t.at("dtype").get<std::string>()));
    e.shape = GetInts<int64_t>(t.at("shape"));
    e.shard = GetInt<int>(t.at("shard"));
    e.offset = GetInt<uint64_t>(t.at("offset"));
    e.length = GetInt<uint64_t>(t.at("length"));
    for (const Json& c : t.at("chunks")) {
      e.chunks.push_back(std::stoull(c.get<std::string>(), nullptr, 16));
    }
    out->push_back(std::move(e));
  }
  return Status::Ok();
}

}  // namespace

Result<Manifest> ManifestFromJson(const Json& j, const std::string& origin) {
  Manifest m;
  try {
    if (j.value("format", "") != "gantry-ckpt") {
      return DataLoss(origin +
                      " is not a gantry checkpoint manifest (no \"format\": \"gantry-ckpt\")");
    }
    m.format_version = GetInt<int>(j.at("format_version"));
    if (m.format_version > kFormatVersion) {
      return FailedPrecondition(origin + " has format version " + std::to_string(m.format_version) +
                                " but this gantry reads up to " + std::to_string(kFormatVersion) +
                                "; upgrade gantry");
    }
    m.step = GetInt<int64_t>(j.at("step"));
    m.created = j.at("created").get<std::string>();
    m.created_unix_s = GetInt<int64_t>(j.at("created_unix_s"));
    m.creator = j.at("creator").get<std::string>();
    m.world_size = GetInt<int>(j.at("world_size"));
    m.chunk_bytes = GetInt<uint64_t>(j.at("chunk_bytes"));
    if (m.chunk_bytes == 0 || m.chunk_bytes > kMaxChunkBytes) {
      return DataLoss(origin + ": chunk_bytes " + std::to_string(m.chunk_bytes) +
                      " is outside [1, " + std::to_string(kMaxChunkBytes) +
                      "]; the manifest is corrupt");
    }
    m.metadata = j.at("metadata");
    for (const Json& s : j.at("shards")) {
      m.shards.push_back({s.at("file").get<std::string>(), GetInt<int>(s.at("rank")),
                          GetInt<uint64_t>(s.at("bytes"))});
    }
    Status st = ParseTensors(j.at("tensors"), origin, &m.tensors);
    if (!st.ok()) return DataLoss(origin + ": " + st.message());
  } catch (const std::exception& e) {
    return DataLoss(origin + ": malformed manifest: " + e.what());
  }
  for (const TensorEntry& t : m.tensors) {
    if (t.shard < 0 || t.shard >= static_cast<int>(m.shards.size())) {
      return DataLoss(origin + ": tensor '" + t.name + "' names shard " + std::to_string(t.shard) +
                      " which is not listed");
    }
    const uint64_t shard_bytes = m.shards[t.shard].bytes;
    if (t.offset > shard_bytes || t.length > shard_bytes - t.offset) {
      return DataLoss(origin + ": tensor '" + t.name + "' claims bytes [" +
                      std::to_string(t.offset) + ", +" + std::to_string(t.length) +
                      ") outside its shard of " + std::to_string(shard_bytes) + " bytes");
    }
    uint64_t shape_bytes = 0;
    if (!ShapeBytes(t.shape, t.dtype, &shape_bytes) || shape_bytes != t.length) {
      return DataLoss(origin + ": tensor '" + t.name + "' has " + std::to_string(t.length) +
                      " bytes, which does not match its shape and dtype " +
                      std::string(DTypeName(t.dtype)));
    }
    // Written without `length + chunk_bytes - 1`, which can wrap.
    uint64_t want_chunks = t.length / m.chunk_bytes + (t.length % m.chunk_bytes != 0);
    if (t.chunks.size() != want_chunks) {
      return DataLoss(origin + ": tensor '" + t.name + "' has " + std::to_string(t.chunks.size()) +
                      " chunk checksums, expected " + std::to_string(want_chunks));
    }
  }
  return m;
}

Json RankPartToJson(const ShardEntry& shard, const std::vector<TensorEntry>& tensors) {
  Manifest m;
  m.shards.push_back(shard);
  m.tensors = tensors;
  Json full = ManifestToJson(m);
  return Json{{"shard", full["shards"][0]}, {"tensors", full["tensors"]}};
}

Status RankPartFromJson(const Json& j, const std::string& origin, ShardEntry* shard,
                        std::vector<TensorEntry>* tensors) {
  try {
    const Json& s = j.at("shard");
    *shard = {s.at("file").get<std::string>(), GetInt<int>(s.at("rank")),
              GetInt<uint64_t>(s.at("bytes"))};
    Status st = ParseTensors(j.at("tensors"), origin, tensors);
    if (!st.ok()) return DataLoss(origin + ": " + st.message());
  } catch (const std::exception& e) {
    return DataLoss(origin + ": malformed rank record: " + e.what());
  }
  return Status::Ok();
}

std::string SafetensorsPrefix(std::span<const TensorView> tensors, size_t align,
                              const Json& metadata) {
  // Plain (not ordered) JSON would sort keys; order does not matter to
  // readers, but keeping the save order makes the file easy to inspect.
  Json h = Json::object();
  if (metadata.is_object() && !metadata.empty()) {
    Json meta = Json::object();
    for (auto it = metadata.begin(); it != metadata.end(); ++it) {
      meta[it.key()] = it->is_string() ? it->get<std::string>() : it->dump();
    }
    h["__metadata__"] = std::move(meta);
  }
  uint64_t off = 0;
  for (const TensorView& t : tensors) {
    h[t.name] = {
        {"dtype", DTypeName(t.dtype)}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes}}};
    off += t.bytes;
  }
  std::string json = h.dump();
  size_t total = 8 + json.size();
  size_t padded = (total + align - 1) / align * align;
  json.append(padded - total, ' ');
  uint64_t n = json.size();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += json;
  return out;
}

Result<std::vector<SafetensorsEntry>> ReadSafetensorsHeader(storage::ReadableFile& f,
                                                            const std::string& path,
                                                            uint64_t* data_start) {
  unsigned char len_bytes[8];
  RETURN_IF_ERROR(storage::ReadExact(f, 0, len_bytes, 8, path));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  if (n > kMaxHeaderBytes) {
    return DataLoss(path + ": safetensors header claims " + std::to_string(n) +
                    " bytes (limit 100 MB); the file is corrupt or not safetensors");
  }
  std::string header(n, '\0');
  RETURN_IF_ERROR(storage::ReadExact(f, 8, header.data(), n, path));
  auto parsed = ParseJson(header, path);
  if (!parsed.ok() || !parsed->is_object()) {
    return DataLoss(path + ": safetensors header is not a JSON object");
  }
  ASSIGN_OR_RETURN(uint64_t size, f.Size());
  *data_start = 8 + n;
  std::vector<SafetensorsEntry> out;
  try {
    for (auto it = parsed->begin(); it != parsed->end(); ++it) {
      if (it.key() == "__metadata__") continue;
      SafetensorsEntry e;
      e.name = it.key();
      ASSIGN_OR_RETURN(e.dtype, ParseDType(it->at("dtype").get<std::string>()));
      e.shape = GetInts<int64_t>(it->at("shape"));
      auto offs = GetInts<uint64_t>(it->at("data_offsets"));
      // Compared as `end > size - data_start`: `data_start + end` can wrap.
      if (offs.size() != 2 || offs[0] > offs[1] || size < *data_start ||
          offs[1] > size - *data_start) {
        return DataLoss(path + ": tensor '" + e.name + "' has data_offsets outside the file");
      }
      uint64_t want = 0;
      if (!ShapeBytes(e.shape, e.dtype, &want) || want != offs[1] - offs[0]) {
        return DataLoss(
            path + ": tensor '" + e.name + "' spans " + std::to_string(offs[1] - offs[0]) +
            " bytes, which does not match its shape and dtype " + std::string(DTypeName(e.dtype)));
      }
      e.begin = offs[0];
      e.end = offs[1];
      out.push_back(std::move(e));
    }
  } catch (const std::exception& e) {
    return DataLoss(path + ": malformed safetensors header: " + e.what());
  }
  return out;
}

uint64_t Xxh3(const void* data, size_t bytes) { return XXH3_64bits(data, bytes); }

std::vector<uint64_t> ChunkChecksums(const void* data, size_t bytes, size_t chunk_bytes) {
  std::vector<uint64_t> out;
  const char* p = static_cast<const char*>(data);
  for (size_t off = 0; off < bytes; off += chunk_bytes) {
    out.push_back(Xxh3(p + off, std::min(chunk_bytes, bytes - off)));
  }
  return out;
}

std::string HexU64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, v);
  return buf;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  std::string out;
  char buf[3];
  for (unsigned char c : digest) {
    std::snprintf(buf, sizeof(buf), "%02x", c);
    out += buf;
  }
  return out;
}

std::string IsoTime(int64_t unix_s) {
  std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int64_t NowUnix(const Clock& clock) {
  return std::chrono::duration_cast<std::chrono::seconds>(clock.WallNow().time_since_epoch())
      .count();
}

}  // namespace gantry::ckpt::internal
