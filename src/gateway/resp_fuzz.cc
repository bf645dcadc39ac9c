// libFuzzer target for the RESP reply reader (redis.h RespReader), which
// reads whatever the Redis server (or anything that answers on its port)
// sends. The input is fed in chunks whose sizes come from its first byte:
// the replies must not depend on how the bytes were split, an error must be
// DataLoss, and every reply read back from its own encoding is the same
// reply. Nothing crashes, and no announced size makes the reader allocate
// more than the input justifies (RespReader::kMaxElements).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "redis.h"

namespace {

using gantry::gateway::RedisReply;
using gantry::gateway::RespReader;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

bool Same(const RedisReply& a, const RedisReply& b) {
  if (a.type != b.type || a.str != b.str || a.integer != b.integer ||
      a.elements.size() != b.elements.size()) {
    return false;
  }
  for (size_t i = 0; i < a.elements.size(); ++i) {
    if (!Same(a.elements[i], b.elements[i])) return false;
  }
  return true;
}

// RESP2 encoding of a reply (what a server would send for it).
void Encode(const RedisReply& r, std::string* out) {
  switch (r.type) {
    case RedisReply::Type::kNil:
      *out += "$-1\r\n";
      break;
    case RedisReply::Type::kString:
      *out += "$" + std::to_string(r.str.size()) + "\r\n" + r.str + "\r\n";
      break;
    case RedisReply::Type::kStatus:
      *out += "+" + r.str + "\r\n";
      break;
    case RedisReply::Type::kError:
      *out += "-" + r.str + "\r\n";
      break;
    case RedisReply::Type::kInteger:
      *out += ":" + std::to_string(r.integer) + "\r\n";
      break;
    case RedisReply::Type::kArray:
      *out += "*" + std::to_string(r.elements.size()) + "\r\n";
      for (const RedisReply& e : r.elements) Encode(e, out);
      break;
  }
}

// Reads all replies of `chunks`; false when the reader failed.
bool ReadAll(const std::vector<std::string_view>& chunks, std::vector<RedisReply>* replies) {
  RespReader reader;
  for (std::string_view chunk : chunks) {
    gantry::Status fed = reader.Feed(chunk);
    if (!fed.ok()) {
      Check(fed.code() == gantry::StatusCode::kDataLoss);
      return false;
    }
    for (;;) {
      gantry::Result<std::optional<RedisReply>> r = reader.Next();
      if (!r.ok()) {
        Check(r.status().code() == gantry::StatusCode::kDataLoss);
        // A failed reader stays failed.
        Check(!reader.Feed("+OK\r\n").ok());
        return false;
      }
      if (!r->has_value()) break;
      (void)(*r)->ToString();
      replies->push_back(std::move(**r));
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t step = 1 + data[0] % 16;
  std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);

  std::vector<RedisReply> whole;
  bool whole_ok = ReadAll({bytes}, &whole);

  std::vector<std::string_view> chunks;
  for (size_t at = 0; at < bytes.size(); at += step) chunks.push_back(bytes.substr(at, step));
  std::vector<RedisReply> split;
  bool split_ok = ReadAll(chunks, &split);
  Check(whole_ok == split_ok);
  Check(whole.size() == split.size());
  for (size_t i = 0; i < whole.size(); ++i) Check(Same(whole[i], split[i]));

  std::string encoded;
  for (const RedisReply& r : whole) Encode(r, &encoded);
  std::vector<RedisReply> again;
  Check(ReadAll({encoded}, &again));
  Check(again.size() == whole.size());
  for (size_t i = 0; i < whole.size(); ++i) Check(Same(whole[i], again[i]));
  return 0;
}
