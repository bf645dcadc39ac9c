#include "testing/notify_socket.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gantry::testing {

NotifySocket::NotifySocket(std::string path) : path_(std::move(path)) {
  fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (fd_ < 0 || path_.size() >= sizeof(addr.sun_path)) {
    ADD_FAILURE() << "cannot make a notify socket at " << path_;
    return;
  }
  std::memcpy(addr.sun_path, path_.data(), path_.size());
  ::unlink(path_.c_str());
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ADD_FAILURE() << "bind " << path_ << ": " << std::strerror(errno);
  }
}

NotifySocket::~NotifySocket() {
  if (fd_ >= 0) ::close(fd_);
  ::unlink(path_.c_str());
}

std::string NotifySocket::Next(std::chrono::milliseconds timeout) {
  pollfd p{fd_, POLLIN, 0};
  if (fd_ < 0 || ::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return "<nothing>";
  char buf[512];
  ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("<nothing>");
}

std::vector<std::string> NotifySocket::Drain() {
  std::vector<std::string> out;
  char buf[512];
  for (;;) {
    ssize_t n = fd_ < 0 ? -1 : ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (n <= 0) break;
    out.emplace_back(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace gantry::testing
