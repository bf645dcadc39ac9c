// A small asynchronous Redis client on Boost.Asio C++20 coroutines.
//
// One TCP connection per event loop. Commands are pipelined: each call appends its
// RESP encoding to an output buffer that is written in batches, and replies are
// matched to callers in FIFO order. hiredis is used only as the RESP codec
// (redisFormatCommandArgv / redisReader); nothing blocks the event loop.
//
// Every command has a deadline (RedisOptions::timeout_s, from the call to the reply).
// The connection reconnects in the background with exponential backoff (50 ms
// doubling to 1 s). While it is down and waiting to retry, commands fail at once
// with Unavailable instead of attempting a connection per request. A connection on
// which a reply is overdue and nothing has been read for `timeout_s` is considered
// stalled: it is closed, its pending commands fail, and it reconnects.
//
// Use a RedisConnection only on the thread running its io_context.
#pragma once

// clang-format off
#include <utility>  // before asio: awaitable.hpp in Boost 1.74 uses std::exchange
// clang-format on

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/gateway/limits.h"

struct redisReader;  // hiredis

namespace gantry::gateway {

struct RedisReply {
  enum class Type { kNil, kString, kStatus, kInteger, kArray, kError };
  Type type = Type::kNil;
  std::string str;      // kString, kStatus, kError (the error text, e.g. "NOSCRIPT ...")
  int64_t integer = 0;  // kInteger
  std::vector<RedisReply> elements;  // kArray

  bool is_error() const { return type == Type::kError; }
  // The reply as a human-readable string (for logs and tests).
  std::string ToString() const;
};

// The reply side of RESP (the Redis protocol), as RedisConnection reads it:
// bytes in as they arrive, whole replies out, in order. hiredis's redisReader
// does the decoding. An array reply may announce at most kMaxElements
// elements: hiredis allocates the element table as soon as it reads the
// header, so a larger count from a broken or hostile server is refused
// instead of allocating gigabytes.
class RespReader {
 public:
  static constexpr int64_t kMaxElements = int64_t{1} << 20;

  RespReader();
  ~RespReader();
  RespReader(const RespReader&) = delete;
  RespReader& operator=(const RespReader&) = delete;

  // Appends bytes read from the server. DataLoss when the reader already
  // failed; it stays failed (the connection must be dropped).
  Status Feed(std::string_view bytes);
  // The next complete reply, or nullopt while more bytes are needed.
  // DataLoss for a protocol error (also an oversized array).
  Result<std::optional<RedisReply>> Next();

 private:
  redisReader* reader_;
};

class RedisConnection {
 public:
  // Starts connecting in the background at once.
  RedisConnection(boost::asio::io_context& io, RedisOptions options);
  ~RedisConnection();  // closes the socket; pending commands complete with Unavailable
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends one command (e.g. {"SET", "k", "v"}) and waits for its reply.
  // Errors: Unavailable (not connected, connection lost), DeadlineExceeded (no reply
  // within timeout_s). A Redis error reply is a successful Result of type kError.
  boost::asio::awaitable<Result<RedisReply>> Command(std::vector<std::string> args);

  // Queues a command whose reply is discarded. Returns false (and sends nothing)
  // when not connected.
  bool Send(const std::vector<std::string>& args);

  bool connected() const;
  // True when Command() would queue (connected, or a connection attempt in progress)
  // rather than fail at once (waiting to retry after a failure).
  bool accepting() const;
  uint64_t errors() const;  // failed or timed-out commands plus failed connection attempts

  // Called on the io thread when the connection comes up (true) or goes down (false).
  void set_state_callback(std::function<void(bool up)> cb);

  // Stops reconnecting and closes the connection.
  void Close();

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace gantry::gateway
