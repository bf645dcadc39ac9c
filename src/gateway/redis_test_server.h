// Test-only: a redis-server child process on a held 127.0.0.1 port with its own
// temp dir and no persistence, for the Redis client and limiter integration
// tests. Kill() with SIGSTOP/SIGCONT freezes and thaws it; the destructor
// always kills it and removes the dir.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "testing/child_process.h"

namespace gantry::gateway::testing {

class TestRedisServer {
 public:
  // `requirepass`, when set, makes the server demand AUTH with it.
  explicit TestRedisServer(std::string requirepass = "") : requirepass_(std::move(requirepass)) {
    dir_ = std::filesystem::temp_directory_path() /
           ("gantry_redis_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    std::filesystem::create_directories(dir_);
    port_ = reserved_.port();
  }
  ~TestRedisServer() {
    Stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }

  // Starts redis-server on port() and waits until it listens there. port()
  // is held (ReservedPort) for the server's lifetime, so no other process can
  // take it, not even between a Kill and a restart. Ready means our
  // redis-server logged that it accepts connections, not merely that
  // something accepts them on that port; a server that exits instead is a
  // failure, reported with its log.
  bool Start() {
    std::error_code ec;
    std::uintmax_t log_from = std::filesystem::file_size(log_path(), ec);
    if (ec) log_from = 0;
    pid_ = ::fork();
    if (pid_ == 0) {
      if (::chdir(dir_.c_str()) != 0) ::_exit(126);
      const std::string port = std::to_string(port_);
      const std::string log = log_path().string();
      std::vector<const char*> argv = {"redis-server", "--port",    port.c_str(), "--bind",
                                       "127.0.0.1",    "--save",    "",           "--appendonly",
                                       "no",           "--logfile", log.c_str()};
      if (!requirepass_.empty()) {
        argv.push_back("--requirepass");
        argv.push_back(requirepass_.c_str());
      }
      argv.push_back(nullptr);
      ::execvp("redis-server", const_cast<char* const*>(argv.data()));
      ::_exit(127);
    }
    if (pid_ < 0) return false;
    // Up to 30 s: redis-server starts in milliseconds, but not always on a
    // loaded machine.
    for (int i = 0; i < 3000; ++i) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        std::fprintf(stderr, "redis-server on port %d exited (status %d); its log:\n%s\n", port_,
                     st, ReadLog(log_from).c_str());
        return false;
      }
      if (ReadLog(log_from).find("Ready to accept connections") != std::string::npos &&
          CanConnect()) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::fprintf(stderr, "redis-server on port %d not ready within 30 s; its log:\n%s\n", port_,
                 ReadLog(log_from).c_str());
    Stop();
    return false;
  }
  void Kill(int sig = SIGKILL) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    if (sig == SIGKILL || sig == SIGTERM) {
      int st;
      ::waitpid(pid_, &st, 0);
      pid_ = -1;
    }
  }
  void Stop() { Kill(SIGKILL); }

 private:
  std::filesystem::path log_path() const { return dir_ / "redis.log"; }
  std::string ReadLog(std::uintmax_t from) const {
    std::ifstream in(log_path(), std::ios::binary);
    if (!in) return "";
    in.seekg(static_cast<std::streamoff>(from));
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  bool CanConnect() const {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port_));
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    ::close(fd);
    return ok;
  }
  std::string requirepass_;
  static inline int counter_ = 0;
  std::filesystem::path dir_;
  gantry::testing::ReservedPort reserved_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace gantry::gateway::testing
