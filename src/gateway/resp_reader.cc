// The RESP reply reader of the Redis client (redis.h). Apart from redis.cc's
// coroutines so that the fuzz target (fuzz_gateway_resp) can instrument it.
#include <hiredis/hiredis.h>

#include <cstdint>
#include <optional>
#include <string>

#include "redis.h"

namespace gantry::gateway {
namespace {

RedisReply Convert(const redisReply* r) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = RedisReply::Type::kError;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      out.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(Convert(r->element[i]));
      break;
    default:
      out.type = RedisReply::Type::kNil;
  }
  return out;
}

// The default hiredis createArray, and one that refuses oversized counts
// (returning null makes hiredis fail the read with "Out of memory").
using CreateArrayFn = decltype(redisReplyObjectFunctions::createArray);

CreateArrayFn DefaultCreateArray() {
  static const CreateArrayFn fn = [] {
    redisReader* r = redisReaderCreate();
    CreateArrayFn f = r != nullptr ? r->fn->createArray : nullptr;
    if (r != nullptr) redisReaderFree(r);
    return f;
  }();
  return fn;
}

template <typename N>
void* BoundedCreateArray(const redisReadTask* task, N elements) {
  if (static_cast<int64_t>(elements) > RespReader::kMaxElements) return nullptr;
  return DefaultCreateArray()(task, elements);
}

redisReplyObjectFunctions* BoundedFunctions() {
  static redisReplyObjectFunctions fns = [] {
    redisReplyObjectFunctions f{};
    redisReader* r = redisReaderCreate();
    if (r != nullptr) {
      f = *r->fn;
      redisReaderFree(r);
    }
    f.createArray = &BoundedCreateArray;
    return f;
  }();
  return &fns;
}

}  // namespace

RespReader::RespReader() : reader_(redisReaderCreateWithFunctions(BoundedFunctions())) {}

RespReader::~RespReader() {
  if (reader_) redisReaderFree(reader_);
}

Status RespReader::Feed(std::string_view bytes) {
  if (reader_ == nullptr) return DataLoss("redis reply reader: out of memory");
  if (redisReaderFeed(reader_, bytes.data(), bytes.size()) != REDIS_OK) {
    return DataLoss(std::string("bad reply from redis: ") + reader_->errstr);
  }
  return Status::Ok();
}

Result<std::optional<RedisReply>> RespReader::Next() {
  if (reader_ == nullptr) return DataLoss("redis reply reader: out of memory");
  void* raw = nullptr;
  if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
    return DataLoss(std::string("bad reply from redis: ") + reader_->errstr);
  }
  if (raw == nullptr) return std::optional<RedisReply>();
  auto* r = static_cast<redisReply*>(raw);
  std::optional<RedisReply> out(Convert(r));
  freeReplyObject(r);
  return out;
}

std::string RedisReply::ToString() const {
  switch (type) {
    case Type::kNil:
      return "(nil)";
    case Type::kString:
      return "\"" + str + "\"";
    case Type::kStatus:
      return str;
    case Type::kError:
      return "(error) " + str;
    case Type::kInteger:
      return "(integer) " + std::to_string(integer);
    case Type::kArray: {
      std::string s = "[";
      for (size_t i = 0; i < elements.size(); ++i) {
        if (i) s += ", ";
        s += elements[i].ToString();
      }
      return s + "]";
    }
  }
  return "?";
}

}  // namespace gantry::gateway
