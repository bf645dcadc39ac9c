#include "gantry/core/http_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <functional>
#include <string>

#include "gantry/config.h"
#include "gantry/core/http_parser.h"

namespace gantry::http {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr size_t kMaxHeadBytes = size_t{64} << 10;
// A file request body is read and sent in pieces of this size.
constexpr size_t kFilePiece = size_t{64} << 10;
std::string Millis(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

// Incremental HTTP/1.1 response reader on the strict parser of
// gantry/core/http_parser.h: Consume() takes bytes as they arrive, OnEof()
// says the peer closed. Incremental because a server may split a response
// anywhere, and a deadline must be able to stop a partial one. With a sink,
// a 2xx body is passed on as it is decoded instead of being kept.
class ResponseParser {
 public:
  using Sink = std::function<Status(std::string_view)>;
  ResponseParser(uint64_t max_body, const Sink* sink)
      : max_body_(max_body), sink_(sink), chunks_(max_body) {}

  Status Consume(std::string_view data) {
    buf_.append(data);
    return Parse();
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
        return DataLoss("the server closed the connection after " + std::to_string(body_bytes_) +
                        " of " + std::to_string(body_bytes_ + remaining_) + " body bytes");
      case Mode::kChunked:
        break;
    }
    return DataLoss("the server closed the connection inside the chunked body (after " +
                    std::to_string(body_bytes_) + " bytes)");
  }

  bool done() const { return mode_ == Mode::kDone; }
  // True once the head of the final (non-1xx) response has arrived.
  bool answered() const { return mode_ != Mode::kHead; }
  Response Take() { return std::move(resp_); }

 private:
  enum class Mode { kHead, kLength, kUntilClose, kChunked, kDone };

  Status AppendBody(std::string_view data) {
    if (data.empty()) return Status::Ok();
    body_bytes_ += data.size();
    if (streaming_) return (*sink_)(data);
    if (resp_.body.size() + data.size() > max_body_) {
      return ResourceExhausted("the response body is larger than the " + std::to_string(max_body_) +
                               "-byte limit");
    }
    resp_.body.append(data);
    return Status::Ok();
  }

  Status Parse() {
    while (true) {
      switch (mode_) {
        case Mode::kHead: {
          size_t end = 0;
          HeadScan scan = ScanHead(buf_, &scanned_, kMaxHeadBytes, &end);
          if (scan == HeadScan::kIncomplete) return Status::Ok();
          if (scan == HeadScan::kTooLarge) {
            return ResourceExhausted("the response headers are larger than 64 KiB");
          }
          if (scan == HeadScan::kBareLf) return DataLoss("malformed header line: bare LF");
          RETURN_IF_ERROR(StartBody(std::string_view(buf_).substr(0, end)));
          buf_.erase(0, end);
          scanned_ = 0;
          break;
        }
        case Mode::kLength: {
          size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, buf_.size()));
          RETURN_IF_ERROR(AppendBody(std::string_view(buf_).substr(0, n)));
          buf_.erase(0, n);
          remaining_ -= n;
          if (remaining_ > 0) return Status::Ok();
          mode_ = Mode::kDone;
          break;
        }
        case Mode::kUntilClose:
          RETURN_IF_ERROR(AppendBody(buf_));
          buf_.clear();
          return Status::Ok();
        case Mode::kChunked: {
          size_t used = 0;
          // Decoded into a scratch piece (at most what arrived) when
          // streaming, so the sink sees it before more is read.
          std::string piece;
          std::string* out = streaming_ ? &piece : &resp_.body;
          size_t before = out->size();
          Status s = chunks_.Feed(buf_, out, &used);
          buf_.erase(0, used);
          body_bytes_ += out->size() - before;
          if (streaming_ && !piece.empty()) RETURN_IF_ERROR((*sink_)(piece));
          if (!s.ok()) {
            if (s.code() == StatusCode::kResourceExhausted) {
              return ResourceExhausted("the response body is larger than the " +
                                       std::to_string(max_body_) + "-byte limit");
            }
            return DataLoss(s.message() + " in the chunked body");
          }
          if (!chunks_.done()) return Status::Ok();
          mode_ = Mode::kDone;
          break;
        }
        case Mode::kDone:
          return Status::Ok();  // bytes after the message are ignored
      }
    }
  }

  // Parses one head; an interim 1xx response leaves the reader waiting for
  // the real one.
  Status StartBody(std::string_view head) {
    Result<ResponseHead> h = ParseResponseHead(head, "GET");
    if (!h.ok()) return DataLoss(h.status().message());
    if (h->status < 200) return Status::Ok();
    Response fresh;
    fresh.status = h->status;
    fresh.reason = std::string(h->reason);
    for (const HeaderView& hv : h->headers) {
      fresh.headers.emplace_back(std::string(hv.name), std::string(hv.value));
    }
    resp_ = std::move(fresh);
    // Only a success body goes to the sink: an error body is kept (bounded)
    // so the caller can read the server's message.
    streaming_ = sink_ != nullptr && *sink_ && h->status >= 200 && h->status < 300;
    if (streaming_) chunks_ = ChunkedDecoder();
    switch (h->framing) {
      case BodyFraming::kNone:
        mode_ = Mode::kDone;
        break;
      case BodyFraming::kContentLength:
        if (!streaming_ && h->content_length > max_body_) {
          return ResourceExhausted("Content-Length " + std::to_string(h->content_length) +
                                   " is larger than the " + std::to_string(max_body_) +
                                   "-byte limit");
        }
        remaining_ = h->content_length;
        mode_ = Mode::kLength;
        break;
      case BodyFraming::kChunked:
        mode_ = Mode::kChunked;
        break;
      case BodyFraming::kUntilClose:
        mode_ = Mode::kUntilClose;
        break;
    }
    return Status::Ok();
  }

  uint64_t max_body_;
  const Sink* sink_;
  bool streaming_ = false;
  uint64_t body_bytes_ = 0;
  std::string buf_;
  size_t scanned_ = 0;
  Mode mode_ = Mode::kHead;
  uint64_t remaining_ = 0;
  ChunkedDecoder chunks_;
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
  void reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

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
               std::chrono::milliseconds budget, short* revents = nullptr) {
  while (true) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (left.count() <= 0) {
      return DeadlineExceeded("no answer within " + Millis(budget) + " (" + std::string(phase) +
                              ")");
    }
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
    if (rc > 0) {
      if (revents != nullptr) *revents = p.revents;
      return Status::Ok();
    }
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
  // A file body is opened (and sized) before connecting, so a missing file
  // costs no network round trip.
  Fd file(-1);
  uint64_t file_size = 0;
  if (!request.body_file.empty()) {
    if (!request.body.empty()) {
      return InvalidArgument("set either body or body_file (" + request.body_file + "), not both");
    }
    file.reset(::open(request.body_file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (file.get() < 0) {
      if (errno == ENOENT) {
        return NotFound("request body file " + request.body_file + " does not exist");
      }
      return IoError("opening request body file " + request.body_file, errno);
    }
    struct stat st {};
    if (::fstat(file.get(), &st) != 0) {
      return IoError("reading the size of request body file " + request.body_file, errno);
    }
    if (!S_ISREG(st.st_mode)) {
      return InvalidArgument("request body file " + request.body_file + " is not a regular file");
    }
    file_size = static_cast<uint64_t>(st.st_size);
  }
  if (!request.body.empty() || file.get() >= 0 || request.method == "POST" ||
      request.method == "PUT") {
    uint64_t length = file.get() >= 0 ? file_size : request.body.size();
    wire += "Content-Length: " + std::to_string(length) + "\r\n";
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

  ResponseParser parser(request.max_body_bytes, &request.body_sink);
  char chunk[16 * 1024];
  bool eof = false;
  auto receive = [&]() -> Status {
    ssize_t n = ::recv(sock.get(), chunk, sizeof chunk, 0);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Status::Ok();
      return SocketError("reading from", where, errno);
    }
    if (n == 0) {
      eof = true;
      return parser.OnEof();
    }
    return parser.Consume(std::string_view(chunk, static_cast<size_t>(n)));
  };

  // The head (with a string body) goes first, then the file in pieces. A
  // final response that arrives while sending (a server refusing from the
  // head: 401, 413) ends the sending: it is read instead of pushing the rest
  // of a large body at a server that no longer wants it.
  std::string pending = std::move(wire);
  size_t sent = 0;
  uint64_t file_left = file_size;
  while (!parser.answered() && !eof) {
    if (sent == pending.size()) {
      if (file_left == 0) break;
      pending.resize(static_cast<size_t>(std::min<uint64_t>(kFilePiece, file_left)));
      size_t got = 0;
      while (got < pending.size()) {
        ssize_t n = ::read(file.get(), pending.data() + got, pending.size() - got);
        if (n < 0) {
          if (errno == EINTR) continue;
          return IoError("reading request body file " + request.body_file, errno);
        }
        if (n == 0) {
          return DataLoss("request body file " + request.body_file +
                          " shrank while it was being sent (" +
                          std::to_string(file_size - file_left + got) + " of " +
                          std::to_string(file_size) + " bytes)");
        }
        got += static_cast<size_t>(n);
      }
      file_left -= pending.size();
      sent = 0;
    }
    short revents = 0;
    RETURN_IF_ERROR(WaitFor(sock.get(), POLLOUT | POLLIN, deadline, "sending the request",
                            request.deadline, &revents));
    if ((revents & (POLLIN | POLLHUP)) != 0) {
      RETURN_IF_ERROR(receive());
      continue;
    }
    ssize_t n = ::send(sock.get(), pending.data() + sent, pending.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      return SocketError("sending to", where, errno);
    }
    sent += static_cast<size_t>(n);
  }

  while (!parser.done() && !eof) {
    RETURN_IF_ERROR(
        WaitFor(sock.get(), POLLIN, deadline, "waiting for the response", request.deadline));
    RETURN_IF_ERROR(receive());
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
    unsigned p = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc() || end != port.data() + port.size() || p == 0 || p > 65535) {
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
  get.body_file.clear();
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

std::string PercentEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace gantry::http
