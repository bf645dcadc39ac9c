// A raw TCP client for HTTP server tests: it sends exactly the bytes a test
// means (malformed, pipelined, partial) and reads back exactly what comes.
// Test support for src/core (http_server_test.cc, http_server_pool_test.cc).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace gantry::http::testing {

// A raw TCP client so tests can send exactly the bytes they mean (malformed,
// pipelined, partial) and see exactly what comes back.
class RawClient {
 public:
  explicit RawClient(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawClient() { ::close(fd_); }
  bool connected() const { return connected_; }

  void Send(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }

  // Reads one response (head + Content-Length body). "" when the server
  // closed first or nothing came within 10 s.
  std::string ReadResponse() {
    for (;;) {
      size_t head_end = buf_.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        size_t body_len = 0;
        size_t cl = buf_.find("Content-Length: ");
        if (cl != std::string::npos && cl < head_end) body_len = std::stoul(buf_.substr(cl + 16));
        size_t total = head_end + 4 + body_len;
        if (buf_.compare(0, 12, "HTTP/1.1 100") == 0) total = head_end + 4;
        if (buf_.size() >= total) {
          std::string out = buf_.substr(0, total);
          buf_.erase(0, total);
          return out;
        }
      }
      if (!ReadMore()) return "";
    }
  }

  // Everything until the server closes (or 10 s of silence).
  std::string ReadAll() {
    while (ReadMore()) {
    }
    return std::move(buf_);
  }

  // True when the server closed the connection (EOF) within 10 s.
  bool ClosedByServer() {
    while (ReadMore()) {
    }
    return eof_;
  }

 private:
  bool ReadMore() {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 10'000) <= 0) return false;
    char b[65536];
    ssize_t n = ::recv(fd_, b, sizeof b, 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buf_.append(b, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
  std::string buf_;
};

}  // namespace gantry::http::testing
