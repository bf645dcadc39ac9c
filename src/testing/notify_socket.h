// Test support: the receiving end of the systemd notify protocol. A datagram
// socket bound at `path`; pass the path as NOTIFY_SOCKET to the process under
// test and read what it tells systemd ("READY=1", "STOPPING=1", ...).
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace gantry::testing {

class NotifySocket {
 public:
  // Binds at `path` (a test failure when it cannot).
  explicit NotifySocket(std::string path);
  ~NotifySocket();
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  const std::string& path() const { return path_; }
  // The next message, or "<nothing>" when none arrives within `timeout`.
  std::string Next(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Every message already waiting, without blocking.
  std::vector<std::string> Drain();

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace gantry::testing
