// Test-only: a scripted HTTP server on 127.0.0.1 for the HTTP client and IMDS
// tests. It serves exactly one connection on a port the kernel picks, writes a
// scripted reply in pieces (so the client sees split reads), and can then hold
// the connection open (to exercise deadlines). The destructor
// always stops the thread promptly, whatever the client did.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace gantry::testing {

class ScriptedHttpServer {
 public:
  struct Script {
    // Written in order, each with its own send() and a short pause between,
    // then the connection is closed.
    std::vector<std::string> pieces;
    // After the pieces, keep the connection open without sending anything until
    // the client hangs up (or 30 s pass) instead of closing it.
    bool hold_open = false;
  };

  explicit ScriptedHttpServer(Script script) : script_(std::move(script)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    if (listen_fd_ < 0 ||
        ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listen_fd_, 4) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        ::pipe2(stop_, O_CLOEXEC) != 0) {
      throw std::runtime_error("test server setup failed");
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }

  ~ScriptedHttpServer() {
    char b = 'x';
    (void)!::write(stop_[1], &b, 1);
    thread_.join();
    ::close(listen_fd_);
    ::close(stop_[0]);
    ::close(stop_[1]);
  }

  ScriptedHttpServer(const ScriptedHttpServer&) = delete;
  ScriptedHttpServer& operator=(const ScriptedHttpServer&) = delete;

  uint16_t port() const { return port_; }
  std::string Url(const std::string& target) const {
    return "http://127.0.0.1:" + std::to_string(port_) + target;
  }
  // The request head the server received ("" if none yet).
  std::string request() const {
    std::lock_guard<std::mutex> lock(mu_);
    return request_;
  }

 private:
  // Waits for `fd` to be readable; false when stopped or after 30 s.
  bool WaitReadable(int fd) {
    pollfd p[2] = {{fd, POLLIN, 0}, {stop_[0], POLLIN, 0}};
    int rc = ::poll(p, 2, 30'000);
    return rc > 0 && (p[1].revents & POLLIN) == 0;
  }

  void Serve() {
    if (!WaitReadable(listen_fd_)) return;
    int conn = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) return;
    std::string head;
    char buf[4096];
    while (head.find("\r\n\r\n") == std::string::npos && WaitReadable(conn)) {
      ssize_t n = ::recv(conn, buf, sizeof buf, 0);
      if (n <= 0) break;
      head.append(buf, static_cast<size_t>(n));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      request_ = head;
    }
    for (const std::string& piece : script_.pieces) {
      if (::send(conn, piece.data(), piece.size(), MSG_NOSIGNAL) < 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (script_.hold_open) {
      while (WaitReadable(conn) && ::recv(conn, buf, sizeof buf, 0) > 0) {
      }
    }
    ::close(conn);
  }

  Script script_;
  int listen_fd_ = -1;
  int stop_[2] = {-1, -1};
  uint16_t port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::string request_;
};

// A port on 127.0.0.1 that nothing listens on (bound, then released).
inline uint16_t ClosedLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace gantry::testing
