// Test support: a small HTTP/1.1 proxy on 127.0.0.1 in front of a local
// server (Azurite) that injects faults into chosen requests: an HTTP status
// (503 with Retry-After, 429, ...), a delay before forwarding, a TCP reset
// after N bytes of the request body have gone upstream (a connection lost
// mid-upload), or a reset after the server has answered (a lost response).
//
//   FaultProxy proxy;
//   ASSERT_TRUE(proxy.Start(azurite.port()).ok());
//   FaultRule r;
//   r.match = "comp=block";  // Put Block requests
//   r.skip = 2;              // let two through,
//   r.times = 3;             // then answer three with
//   r.status = 503;          // 503 and Retry-After: 1
//   r.retry_after_s = 1;
//   proxy.AddRule(r);
//   ... point the client at proxy.endpoint("devstoreaccount1") ...
//
// Rules are checked in the order added; each counts the requests whose
// request line ("PUT /acct/c/b?comp=block HTTP/1.1") contains `match`, lets
// `skip` of them through and then fires on the next `times` (-1: forever).
// Every request is forwarded on its own upstream connection and the client
// connection is closed after the response ("Connection: close"), which keeps
// the proxy free of response framing. Requests must carry Content-Length
// (no chunked uploads), as the Blob client's do. Thread-safe.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::storage::testing {

struct FaultRule {
  // kDropResponse forwards the whole request, lets the server answer, and
  // resets the client instead of relaying the answer (a lost response).
  enum class Action { kStatus, kDelay, kReset, kDropResponse };
  std::string match;  // substring of the request line; empty matches every request
  int skip = 0;       // matching requests let through before the rule fires
  int times = 1;      // matching requests it then fires on; -1 = all later ones
  Action action = Action::kStatus;
  int status = 503;                    // kStatus
  int retry_after_s = -1;              // kStatus: a Retry-After header when >= 0
  std::chrono::milliseconds delay{0};  // kDelay: wait this long, then forward
  size_t reset_after_bytes = 0;        // kReset: body bytes forwarded before the reset
};

class FaultProxy {
 public:
  FaultProxy() = default;
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;
  ~FaultProxy() { Stop(); }

  // Listens on a free 127.0.0.1 port and forwards to 127.0.0.1:upstream_port.
  Status Start(uint16_t upstream_port) {
    upstream_port_ = upstream_port;
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) return IoError("fault proxy socket", errno);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listen_fd_, 128) != 0) {
      return IoError("fault proxy bind/listen on 127.0.0.1", errno);
    }
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    stop_ = false;
    accept_thread_ = std::thread([this] { AcceptLoop(); });
    return Status::Ok();
  }

  void Stop() {
    if (listen_fd_ < 0) return;
    stop_ = true;
    if (accept_thread_.joinable()) accept_thread_.join();
    ::close(listen_fd_);
    listen_fd_ = -1;
    std::vector<std::thread> conns;
    {
      std::lock_guard<std::mutex> lock(mu_);
      conns.swap(conns_);
    }
    for (auto& t : conns) t.join();
  }

  // Points the proxy at another upstream port (e.g. a restarted server).
  void SetUpstream(uint16_t port) { upstream_port_ = port; }
  void AddRule(FaultRule rule) {
    std::lock_guard<std::mutex> lock(mu_);
    rules_.push_back({std::move(rule), 0});
  }
  void ClearRules() {
    std::lock_guard<std::mutex> lock(mu_);
    rules_.clear();
  }

  uint16_t port() const { return port_; }
  // "http://127.0.0.1:PORT/<account>" for path-style (Azurite) clients.
  std::string endpoint(std::string_view account) const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/" + std::string(account);
  }
  int requests() const { return requests_.load(); }
  int faults() const { return faults_.load(); }
  // Requests seen whose request line contains `match`.
  int requests_matching(std::string_view match) const {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const auto& l : lines_) n += l.find(match) != std::string::npos;
    return n;
  }

 private:
  struct RuleState {
    FaultRule rule;
    int seen;
  };

  void AcceptLoop() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::lock_guard<std::mutex> lock(mu_);
      conns_.emplace_back([this, fd] {
        Serve(fd);
        ::close(fd);
      });
    }
  }

  // Reads up to `n` bytes, waiting while the proxy runs; 0 on EOF/error/stop.
  size_t ReadSome(int fd, char* buf, size_t n) {
    while (!stop_) {
      pollfd p{fd, POLLIN, 0};
      int r = ::poll(&p, 1, 50);
      if (r < 0 && errno != EINTR) return 0;
      if (r <= 0) continue;
      ssize_t k = ::recv(fd, buf, n, 0);
      if (k < 0 && errno == EINTR) continue;
      return k > 0 ? static_cast<size_t>(k) : 0;
    }
    return 0;
  }

  static bool WriteAll(int fd, const char* d, size_t n) {
    while (n > 0) {
      ssize_t k = ::send(fd, d, n, MSG_NOSIGNAL);
      if (k < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      d += k;
      n -= static_cast<size_t>(k);
    }
    return true;
  }

  static void Reset(int fd) {
    linger l{1, 0};  // close() sends RST instead of FIN
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  }

  static std::string Lower(std::string_view s) {
    std::string o(s);
    for (auto& c : o) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return o;
  }

  void Serve(int client) {
    // Request head.
    std::string buf;
    size_t head_end;
    char tmp[64 << 10];
    while ((head_end = buf.find("\r\n\r\n")) == std::string::npos) {
      size_t k = ReadSome(client, tmp, sizeof tmp);
      if (k == 0) return;
      buf.append(tmp, k);
      if (buf.size() > (1 << 20)) return;
    }
    std::string head = buf.substr(0, head_end + 2);  // keeps the last header's CRLF
    std::string body_start = buf.substr(head_end + 4);
    std::string line = head.substr(0, head.find("\r\n"));
    size_t content_length = 0;
    std::string rewritten = line + "\r\n";
    size_t pos = head.find("\r\n") + 2;
    while (pos < head.size()) {
      size_t e = head.find("\r\n", pos);
      std::string h = head.substr(pos, e - pos);
      pos = e + 2;
      std::string lh = Lower(h);
      if (lh.starts_with("content-length:"))
        content_length = std::strtoull(h.c_str() + 15, nullptr, 10);
      if (lh.starts_with("connection:") || lh.starts_with("keep-alive:")) continue;
      rewritten += h + "\r\n";
    }
    rewritten += "Connection: close\r\n\r\n";
    ++requests_;

    // Pick a rule.
    FaultRule fire;
    bool fired = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.push_back(line);
      for (auto& rs : rules_) {
        if (!rs.rule.match.empty() && line.find(rs.rule.match) == std::string::npos) continue;
        int n = rs.seen++;
        if (!fired && n >= rs.rule.skip &&
            (rs.rule.times < 0 || n < rs.rule.skip + rs.rule.times)) {
          fire = rs.rule;
          fired = true;
        }
      }
    }
    if (fired) ++faults_;
    size_t body_have = body_start.size();
    auto drain_body = [&] {
      while (body_have < content_length) {
        size_t k = ReadSome(client, tmp, std::min(sizeof tmp, content_length - body_have));
        if (k == 0) return false;
        body_have += k;
      }
      return true;
    };
    if (fired && fire.action == FaultRule::Action::kStatus) {
      if (!drain_body()) return;
      std::string resp = "HTTP/1.1 " + std::to_string(fire.status) + " Injected Fault\r\n";
      if (fire.retry_after_s >= 0)
        resp += "Retry-After: " + std::to_string(fire.retry_after_s) + "\r\n";
      resp += "x-ms-error-code: InjectedFault\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      WriteAll(client, resp.data(), resp.size());
      return;
    }
    if (fired && fire.action == FaultRule::Action::kDelay) {
      auto until = std::chrono::steady_clock::now() + fire.delay;
      while (!stop_ && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }

    int up = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (up < 0) return;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(upstream_port_.load());
    if (::connect(up, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      // Upstream down: the client sees its connection reset.
      Reset(client);
      ::close(up);
      return;
    }
    bool reset = fired && fire.action == FaultRule::Action::kReset;
    size_t limit = reset ? std::min(fire.reset_after_bytes, content_length) : content_length;
    bool ok = WriteAll(up, rewritten.data(), rewritten.size());
    size_t sent = std::min(body_start.size(), limit);
    ok = ok && WriteAll(up, body_start.data(), sent);
    while (ok && sent < limit) {
      size_t k = ReadSome(client, tmp, std::min(sizeof tmp, limit - sent));
      if (k == 0) {
        ok = false;
        break;
      }
      ok = WriteAll(up, tmp, k);
      sent += k;
    }
    if (reset || !ok) {
      Reset(client);
      Reset(up);
      ::close(up);
      return;
    }
    // Relay the response until the upstream closes (it was asked to).
    bool drop = fired && fire.action == FaultRule::Action::kDropResponse;
    if (drop) {
      while (ReadSome(up, tmp, sizeof tmp) > 0) {
      }
      Reset(client);
      ::close(up);
      return;
    }
    for (;;) {
      size_t k = ReadSome(up, tmp, sizeof tmp);
      if (k == 0) break;
      if (!WriteAll(client, tmp, k)) break;
    }
    ::close(up);
  }

  std::atomic<bool> stop_{false};
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<uint16_t> upstream_port_{0};
  std::atomic<int> requests_{0}, faults_{0};
  std::thread accept_thread_;
  mutable std::mutex mu_;
  std::vector<RuleState> rules_;
  std::vector<std::string> lines_;
  std::vector<std::thread> conns_;
};

}  // namespace gantry::storage::testing
