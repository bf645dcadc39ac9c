// Test-only: a tool run as a child for a test's duration (prometheus, a
// contract server, a model server), a free loopback port, and finding a
// Debian-installed tool. The child's stdout and stderr go to a log file; the
// destructor stops it (SIGTERM to its process group, SIGKILL after 10 s).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gantry/core/subprocess.h"

namespace gantry::testing {

// The first of /usr/bin, /usr/local/bin, /bin that holds an executable `name`, or "".
inline std::string FindTool(const std::string& name) {
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/bin", "/usr/sbin"}) {
    std::string p = std::string(dir) + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

// A port nobody listens on now (the kernel's pick for 127.0.0.1:0).
inline uint16_t FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  uint16_t port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

// A 127.0.0.1 port held for the object's lifetime by a socket that is bound
// with SO_REUSEADDR and never listens. A server that sets SO_REUSEADDR itself
// (redis-server, nginx, Go's net.Listen: prometheus) can still listen on it,
// while no other process can take the port: not between picking it and the
// server's bind (the race of FreePort()), nor while the server is down
// between a kill and a restart.
class ReservedPort {
 public:
  ReservedPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port_ = ntohs(a.sin_port);
    }
  }
  ~ReservedPort() {
    if (fd_ >= 0) ::close(fd_);
  }
  ReservedPort(const ReservedPort&) = delete;
  ReservedPort& operator=(const ReservedPort&) = delete;
  uint16_t port() const { return port_; }  // 0 when nothing could be bound

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

// True once something accepts TCP connections on 127.0.0.1:port.
inline bool Listening(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& argv, std::string log_path)
      : log_path_(std::move(log_path)) {
    auto c = SpawnInGroup(argv.at(0), argv);
    if (!c.ok()) return;
    pid_ = c->pid;
    // Copy both pipes into the log on threads of their own so the child
    // never blocks on a full pipe.
    for (int fd : {c->out, c->err}) {
      pumps_.emplace_back([fd, path = log_path_] {
        std::ofstream log(path, std::ios::app);
        char buf[4096];
        ssize_t n;
        while ((n = ::read(fd, buf, sizeof buf)) > 0) log.write(buf, n).flush();
        ::close(fd);
      });
    }
  }
  ~ChildProcess() { Stop(); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  // Waits for the exit; its status (128 + signal), or -1 after `timeout`.
  int Wait(std::chrono::milliseconds timeout) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (pid_ > 0) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        JoinPumps();
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (std::chrono::steady_clock::now() > end) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

  void Stop() {
    if (pid_ > 0) {
      ::kill(-pid_, SIGTERM);
      if (Wait(std::chrono::seconds(10)) == -1 && pid_ > 0) {
        ::kill(-pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
      }
    }
    JoinPumps();
  }

  // What the child wrote so far.
  std::string Log() const {
    std::ifstream in(log_path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  void JoinPumps() {
    for (std::thread& t : pumps_) {
      if (t.joinable()) t.join();
    }
    pumps_.clear();
  }

  std::string log_path_;
  pid_t pid_ = -1;
  std::vector<std::thread> pumps_;
};

}  // namespace gantry::testing
