#include "gantry/core/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <string>

#include "gantry/config.h"
#include "gantry/core/http_parser.h"

namespace gantry::http {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr size_t kMaxHeadBytes = size_t{64} << 10;
constexpr size_t kMaxChunkLineBytes = 1024;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Parses a decimal number made of digits only (no sign, no spaces).
bool ParseDecimal(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

bool ParseHex(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 15) return false;  // 15 hex digits keep the value below 2^60
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return false;
    }
    v = v * 16 + static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

std::string Millis(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

// Incremental HTTP/1.1 response parser: Consume() takes bytes as they arrive,
// OnEof() says the peer closed. Incremental because a server may split a
// response anywhere, and a deadline must be able to stop a partial one.
class ResponseParser {
 public:
  explicit ResponseParser(uint64_t max_body) : max_body_(max_body) {}

  Status Consume(std::string_view data) {
    buf_.append(data);
    Status s = Parse();
    buf_.erase(0, pos_);
    pos_ = 0;
    return s;
  }

  Status OnEof() {
    switch (mode_) {
      case Mode::kDone:
        return Status::Ok();
      case Mode::kUntilClose:
        mode_ = Mode::kDone;
        return Status::Ok();
      case Mode::kHead:
        return DataLoss(buf_.empty() ? "the server closed the connection without a response"
                                     : "the server closed the connection inside the response "
                                       "headers");
      case Mode::kLength:
        return DataLoss("the server closed the connection after " +
                        std::to_string(resp_.body.size()) + " of " +
                        std::to_string(resp_.body.size() + remaining_) + " body bytes");
      default:
        return DataLoss("the server closed the connection inside the chunked body (after " +
                        std::to_string(resp_.body.size()) + " bytes)");
    }
  }

  bool done() const { return mode_ == Mode::kDone; }
  Response Take() { return std::move(resp_); }

 private:
  enum class Mode {
    kHead,
    kLength,
    kUntilClose,
    kChunkSize,
    kChunkData,
    kChunkDataEnd,
    kTrailers,
    kDone
  };

  std::string_view Avail() const { return std::string_view(buf_).substr(pos_); }

  Status AppendBody(std::string_view data) {
    if (resp_.body.size() + data.size() > max_body_) {
      return ResourceExhausted("the response body is larger than the " + std::to_string(max_body_) +
                               "-byte limit");
    }
    resp_.body.append(data);
    return Status::Ok();
  }

  Status Parse() {
    while (true) {
      std::string_view avail = Avail();
      switch (mode_) {
        case Mode::kHead: {
          size_t end = avail.find("\r\n\r\n");
          if (end == std::string_view::npos) {
            if (avail.size() > kMaxHeadBytes) {
              return ResourceExhausted("the response headers are larger than 64 KiB");
            }
            return Status::Ok();
          }
          RETURN_IF_ERROR(ParseHead(avail.substr(0, end)));
          pos_ += end + 4;
          break;
        }
        case Mode::kLength: {
          size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, avail.size()));
          RETURN_IF_ERROR(AppendBody(avail.substr(0, n)));
          pos_ += n;
          remaining_ -= n;
          if (remaining_ > 0) return Status::Ok();
          mode_ = Mode::kDone;
          break;
        }
        case Mode::kUntilClose:
          RETURN_IF_ERROR(AppendBody(avail));
          pos_ += avail.size();
          return Status::Ok();
        case Mode::kChunkSize: {
          size_t eol = avail.find("\r\n");
          if (eol == std::string_view::npos) {
            if (avail.size() > kMaxChunkLineBytes) return DataLoss("a chunk-size line is too long");
            return Status::Ok();
          }
          std::string_view line = avail.substr(0, eol);
          line = Trim(line.substr(0, line.find(';')));  // drop chunk extensions
          uint64_t size = 0;
          if (!ParseHex(line, &size)) {
            return DataLoss("bad chunk size '" +
                            std::string(avail.substr(0, std::min<size_t>(eol, 40))) +
                            "' in the chunked body");
          }
          if (resp_.body.size() + size > max_body_) {
            return ResourceExhausted("the response body is larger than the " +
                                     std::to_string(max_body_) + "-byte limit");
          }
          pos_ += eol + 2;
          remaining_ = size;
          mode_ = size == 0 ? Mode::kTrailers : Mode::kChunkData;
          break;
        }
        case Mode::kChunkData: {
          size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, avail.size()));
          RETURN_IF_ERROR(AppendBody(avail.substr(0, n)));
          pos_ += n;
          remaining_ -= n;
          if (remaining_ > 0) return Status::Ok();
          mode_ = Mode::kChunkDataEnd;
          break;
        }
        case Mode::kChunkDataEnd:
          if (avail.size() < 2) return Status::Ok();
          if (avail.substr(0, 2) != "\r\n") return DataLoss("a chunk is not followed by CRLF");
          pos_ += 2;
          mode_ = Mode::kChunkSize;
          break;
        case Mode::kTrailers: {
          size_t eol = avail.find("\r\n");
          if (eol == std::string_view::npos) {
            if (avail.size() > kMaxHeadBytes) return DataLoss("the chunked trailers are too long");
            return Status::Ok();
          }
          pos_ += eol + 2;
          if (eol == 0) mode_ = Mode::kDone;  // the empty line ends the message
          break;
        }
        case Mode::kDone:
          return Status::Ok();  // bytes after the message are ignored
      }
    }
  }

  Status ParseHead(std::string_view head) {
    Response fresh;
    size_t eol = head.find("\r\n");
    std::string_view status_line = head.substr(0, eol);
    // "HTTP/1.x SP 3DIGIT [SP reason]"
    if (status_line.size() < 12 || status_line.substr(0, 7) != "HTTP/1." ||
        !std::isdigit(static_cast<unsigned char>(status_line[7])) || status_line[8] != ' ' ||
        !std::isdigit(static_cast<unsigned char>(status_line[9])) ||
        !std::isdigit(static_cast<unsigned char>(status_line[10])) ||
        !std::isdigit(static_cast<unsigned char>(status_line[11])) ||
        (status_line.size() > 12 && status_line[12] != ' ')) {
      return DataLoss("malformed status line '" + std::string(status_line.substr(0, 80)) +
                      "' (expected 'HTTP/1.1 <3-digit code> <reason>')");
    }
    fresh.status =
        (status_line[9] - '0') * 100 + (status_line[10] - '0') * 10 + (status_line[11] - '0');
    if (status_line.size() > 13) fresh.reason = std::string(status_line.substr(13));

    std::string_view rest =
        eol == std::string_view::npos ? std::string_view() : head.substr(eol + 2);
    while (!rest.empty()) {
      size_t next = rest.find("\r\n");
      std::string_view line = rest.substr(0, next);
      rest = next == std::string_view::npos ? std::string_view() : rest.substr(next + 2);
      size_t colon = line.find(':');
      if (line.empty() || line.front() == ' ' || line.front() == '\t' || colon == 0 ||
          colon == std::string_view::npos ||
          line.substr(0, colon).find_first_of(" \t") != std::string_view::npos) {
        return DataLoss("malformed header line '" + std::string(line.substr(0, 80)) + "'");
      }
      fresh.headers.emplace_back(std::string(line.substr(0, colon)),
                                 std::string(Trim(line.substr(colon + 1))));
    }

    // An interim 1xx response is followed by the real one.
    if (fresh.status >= 100 && fresh.status < 200) return Status::Ok();
    resp_ = std::move(fresh);

    if (resp_.status == 204 || resp_.status == 304) {
      mode_ = Mode::kDone;
      return Status::Ok();
    }
    if (const std::string* te = resp_.FindHeader("Transfer-Encoding")) {
      std::string_view codings = *te;
      size_t comma = codings.rfind(',');
      std::string_view last =
          Trim(comma == std::string_view::npos ? codings : codings.substr(comma + 1));
      if (!IEquals(last, "chunked")) {
        return DataLoss("unsupported Transfer-Encoding '" + *te + "' (only chunked is understood)");
      }
      mode_ = Mode::kChunkSize;
      return Status::Ok();
    }
    bool have_length = false;
    for (const auto& [name, value] : resp_.headers) {
      if (!IEquals(name, "Content-Length")) continue;
      uint64_t n = 0;
      if (!ParseDecimal(value, &n)) return DataLoss("bad Content-Length '" + value + "'");
      if (have_length && n != remaining_) return DataLoss("conflicting Content-Length headers");
      have_length = true;
      remaining_ = n;
    }
    if (have_length) {
      if (remaining_ > max_body_) {
        return ResourceExhausted("Content-Length " + std::to_string(remaining_) +
                                 " is larger than the " + std::to_string(max_body_) +
                                 "-byte limit");
      }
      mode_ = remaining_ == 0 ? Mode::kDone : Mode::kLength;
    } else {
      mode_ = Mode::kUntilClose;
    }
    return Status::Ok();
  }

  uint64_t max_body_;
  std::string buf_;
  size_t pos_ = 0;
  Mode mode_ = Mode::kHead;
  uint64_t remaining_ = 0;
  Response resp_;
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

bool IsUnavailableErrno(int err) {
  return err == ECONNREFUSED || err == ENETUNREACH || err == EHOSTUNREACH || err == ECONNRESET ||
         err == ETIMEDOUT || err == EPIPE || err == ECONNABORTED || err == ENETDOWN;
}

Status SocketError(std::string_view what, const std::string& where, int err) {
  if (IsUnavailableErrno(err)) {
    return Unavailable(std::string(what) + " " + where + ": " + std::strerror(err));
  }
  return IoError(std::string(what) + " " + where, err);
}

// Waits until `fd` is ready for `events` or the deadline passes.
Status WaitFor(int fd, short events, SteadyClock::time_point deadline, std::string_view phase,
               std::chrono::milliseconds budget) {
  while (true) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (left.count() <= 0) {
      return DeadlineExceeded("no answer within " + Millis(budget) + " (" + std::string(phase) +
                              ")");
    }
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
    if (rc > 0) return Status::Ok();
    if (rc < 0 && errno != EINTR) return IoError("poll", errno);
  }
}

std::string HostPort(const Url& url) {
  std::string host = url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
  return url.port == 80 ? host : host + ":" + std::to_string(url.port);
}

Status ValidateHeaderPart(std::string_view s, std::string_view what) {
  if (s.find_first_of("\r\n") != std::string_view::npos) {
    return InvalidArgument("request header " + std::string(what) + " '" + std::string(s) +
                           "' contains CR or LF");
  }
  return Status::Ok();
}

Result<Response> DoGet(const Request& request, const Url& url) {
  if (request.deadline.count() <= 0) {
    return InvalidArgument("the deadline must be positive (got " + Millis(request.deadline) + ")");
  }
  if (request.method.empty() || request.method.find_first_of(" \t\r\n") != std::string::npos) {
    return InvalidArgument("bad request method '" + request.method + "'");
  }
  std::string wire = request.method + " " + url.target + " HTTP/1.1\r\nHost: " + HostPort(url) +
                     "\r\nUser-Agent: gantry/" GANTRY_VERSION
                     "\r\nAccept: */*\r\nConnection: close\r\n";
  for (const auto& [name, value] : request.headers) {
    if (name.empty() || name.find_first_of(" \t:") != std::string::npos) {
      return InvalidArgument("bad request header name '" + name + "'");
    }
    RETURN_IF_ERROR(ValidateHeaderPart(name, "name"));
    RETURN_IF_ERROR(ValidateHeaderPart(value, "value"));
    wire.append(name).append(": ").append(value).append("\r\n");
  }
  if (!request.body.empty() || request.method == "POST" || request.method == "PUT") {
    wire += "Content-Length: " + std::to_string(request.body.size()) + "\r\n";
  }
  wire += "\r\n";
  wire += request.body;

  const auto deadline = SteadyClock::now() + request.deadline;
  const std::string where = HostPort(url);

  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  int family = AF_INET;
  std::string numeric = url.host == "localhost" ? "127.0.0.1" : url.host;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (::inet_pton(AF_INET, numeric.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(url.port);
    addr_len = sizeof(sockaddr_in);
  } else if (::inet_pton(AF_INET6, numeric.c_str(), &v6->sin6_addr) == 1) {
    family = AF_INET6;
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(url.port);
    addr_len = sizeof(sockaddr_in6);
  } else {
    return InvalidArgument("host '" + url.host + "' is not a numeric address");
  }

  Fd sock(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (sock.get() < 0) return IoError("socket", errno);

  // Non-blocking connect so that an address that drops SYNs (169.254.169.254
  // off Azure) costs the deadline, not the kernel's minutes-long retry.
  if (::connect(sock.get(), reinterpret_cast<sockaddr*>(&addr), addr_len) != 0) {
    if (errno != EINPROGRESS) return SocketError("connecting to", where, errno);
    RETURN_IF_ERROR(
        WaitFor(sock.get(), POLLOUT, deadline, "connecting to " + where, request.deadline));
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(sock.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
      return IoError("getsockopt(SO_ERROR)", errno);
    }
    if (err != 0) return SocketError("connecting to", where, err);
  }

  std::string_view out = wire;
  while (!out.empty()) {
    RETURN_IF_ERROR(
        WaitFor(sock.get(), POLLOUT, deadline, "sending the request", request.deadline));
    ssize_t n = ::send(sock.get(), out.data(), out.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      return SocketError("sending to", where, errno);
    }
    out.remove_prefix(static_cast<size_t>(n));
  }

  ResponseParser parser(request.max_body_bytes);
  char chunk[16 * 1024];
  while (!parser.done()) {
    RETURN_IF_ERROR(
        WaitFor(sock.get(), POLLIN, deadline, "waiting for the response", request.deadline));
    ssize_t n = ::recv(sock.get(), chunk, sizeof chunk, 0);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      return SocketError("reading from", where, errno);
    }
    if (n == 0) {
      RETURN_IF_ERROR(parser.OnEof());
      break;
    }
    RETURN_IF_ERROR(parser.Consume(std::string_view(chunk, static_cast<size_t>(n))));
  }
  return parser.Take();
}

}  // namespace

const std::string* Response::FindHeader(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (IEquals(key, name)) return &value;
  }
  return nullptr;
}

Result<Url> ParseUrl(std::string_view text) {
  const std::string quoted = "URL '" + std::string(text) + "'";
  constexpr std::string_view kScheme = "http://";
  if (text.size() < kScheme.size() || !IEquals(text.substr(0, kScheme.size()), kScheme)) {
    if (text.size() >= 8 && IEquals(text.substr(0, 8), "https://")) {
      return InvalidArgument(quoted + ": https is not supported; use an http:// URL");
    }
    return InvalidArgument(quoted + ": expected http://host[:port][/path]");
  }
  std::string_view rest = text.substr(kScheme.size());
  if (rest.find('#') != std::string_view::npos)
    return InvalidArgument(quoted + ": fragments are not allowed");
  size_t path_at = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, path_at);
  Url url;
  url.target = path_at == std::string_view::npos ? "/" : std::string(rest.substr(path_at));
  if (url.target.front() == '?') url.target.insert(0, "/");
  if (authority.find('@') != std::string_view::npos) {
    return InvalidArgument(quoted + ": user information in URLs is not supported");
  }

  std::string_view host = authority;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos)
      return InvalidArgument(quoted + ": unterminated '[' in the host");
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return InvalidArgument(quoted + ": unexpected text after ']'");
      port = after.substr(1);
      if (port.empty()) return InvalidArgument(quoted + ": empty port");
    }
  } else if (size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    if (port.empty()) return InvalidArgument(quoted + ": empty port");
  }
  if (host.empty()) return InvalidArgument(quoted + ": missing host");
  if (!port.empty()) {
    uint64_t p = 0;
    if (!ParseDecimal(port, &p) || p == 0 || p > 65535) {
      return InvalidArgument(quoted + ": bad port '" + std::string(port) + "' (expected 1-65535)");
    }
    url.port = static_cast<uint16_t>(p);
  }
  url.host = std::string(host);
  in6_addr scratch;
  if (url.host != "localhost" && ::inet_pton(AF_INET, url.host.c_str(), &scratch) != 1 &&
      ::inet_pton(AF_INET6, url.host.c_str(), &scratch) != 1) {
    return InvalidArgument(quoted + ": host '" + url.host +
                           "' is not a numeric IP address (host names are not resolved, so that "
                           "the deadline covers the whole request)");
  }
  return url;
}

Result<Response> Get(const Request& request) {
  Request get = request;
  get.method = "GET";
  get.body.clear();
  return Send(get);
}

Result<Response> Send(const Request& request) {
  const std::string context = request.method + " " + request.url;
  auto url = ParseUrl(request.url);
  if (!url.ok()) return url.status();
  auto resp = DoGet(request, *url);
  if (!resp.ok()) return resp.status().WithContext(context);
  return resp;
}

}  // namespace gantry::http
