#include "gantry/core/service.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <optional>

#include "gantry/core/log.h"

namespace gantry {
namespace {

using Clock = std::chrono::steady_clock;

sigset_t ServiceSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

// What identifies a file's contents cheaply: an edit changes the mtime (and
// usually the size); an editor or `mv` replacing it changes the inode.
struct FileStamp {
  int64_t mtime_ns = 0;
  int64_t size = 0;
  uint64_t inode = 0;
  bool operator==(const FileStamp&) const = default;
};

std::optional<FileStamp> Stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileStamp{static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
                   static_cast<int64_t>(st.st_size), static_cast<uint64_t>(st.st_ino)};
}

// The systemd watchdog interval, when this process is the one it watches.
std::optional<std::chrono::microseconds> WatchdogInterval() {
  const char* usec = std::getenv("WATCHDOG_USEC");
  if (usec == nullptr) return std::nullopt;
  if (const char* pid = std::getenv("WATCHDOG_PID")) {
    if (std::strtoll(pid, nullptr, 10) != static_cast<long long>(::getpid())) return std::nullopt;
  }
  long long v = std::strtoll(usec, nullptr, 10);
  if (v <= 0) return std::nullopt;
  return std::chrono::microseconds(v);
}

}  // namespace

Status Service::Reload(std::string_view) {
  return Unimplemented(
      fmt::format("{} does not reload its configuration; restart it to apply", name()));
}

void NotifySystemd(std::string_view message) {
  const char* where = std::getenv("NOTIFY_SOCKET");
  if (where == nullptr || where[0] == '\0') return;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  size_t len = std::strlen(where);
  if (len >= sizeof(addr.sun_path)) {
    log::warn("NOTIFY_SOCKET is longer than a socket path ({} bytes); not notifying systemd", len);
    return;
  }
  std::memcpy(addr.sun_path, where, len);
  if (where[0] == '@') addr.sun_path[0] = '\0';  // abstract namespace
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    log::warn("cannot notify systemd: socket: {}", std::strerror(errno));
    return;
  }
  socklen_t alen = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len);
  if (::sendto(fd, message.data(), message.size(), MSG_NOSIGNAL,
               reinterpret_cast<const sockaddr*>(&addr), alen) < 0) {
    log::warn("cannot notify systemd at {}: {}", where, std::strerror(errno));
  }
  ::close(fd);
}

ServiceRunner::ServiceRunner(ServiceOptions options) : options_(std::move(options)) {
  if (options_.tick <= std::chrono::milliseconds(0))
    options_.tick = std::chrono::milliseconds(1000);
  sigset_t set = ServiceSignals();
  pthread_sigmask(SIG_BLOCK, &set, &old_mask_);
  ::signal(SIGPIPE, SIG_IGN);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

ServiceRunner::~ServiceRunner() {
  if (wake_fd_ >= 0) ::close(wake_fd_);
  // A stop signal that arrived after Run() returned (a second SIGTERM) is taken
  // here: unblocked, its default action would kill a process that is already
  // exiting cleanly.
  sigset_t set = ServiceSignals();
  timespec zero{0, 0};
  while (sigtimedwait(&set, nullptr, &zero) > 0) {
  }
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

void ServiceRunner::RequestStop() {
  stop_requested_.store(true);
  uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof(one));
}

void ServiceRunner::RequestReload() {
  reload_requested_.store(true);
  uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof(one));
}

Status ServiceRunner::Run(Service& service) {
  if (wake_fd_ < 0) return IoError("creating the service runner's eventfd", errno);
  sigset_t set = ServiceSignals();
  // The signals are blocked, so they stay pending until read here; a signal
  // sent before Run() (even before Start() returns) is not lost.
  int sig_fd = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sig_fd < 0) return IoError("creating the service runner's signalfd", errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{sig_fd};

  const std::string name(service.name());
  RETURN_IF_ERROR(service.Start());
  std::cout << service.ReadyMessage() << std::endl;
  log::info("{}: ready", name);
  NotifySystemd("READY=1");

  std::vector<std::optional<FileStamp>> stamps;
  for (const std::string& f : options_.watch) stamps.push_back(Stamp(f));
  std::optional<std::chrono::microseconds> watchdog = WatchdogInterval();
  std::chrono::milliseconds tick = options_.tick;
  if (watchdog) {
    // systemd wants a ping well within the interval; twice per interval at least.
    auto half = std::chrono::duration_cast<std::chrono::milliseconds>(*watchdog / 2);
    if (half.count() > 0 && half < tick) tick = half;
  }

  auto reload = [&](const std::string& why) {
    for (size_t i = 0; i < options_.watch.size(); ++i) stamps[i] = Stamp(options_.watch[i]);
    // Type=notify-reload services must say when the reload began (systemd 253+).
    timespec mono{};
    clock_gettime(CLOCK_MONOTONIC, &mono);
    NotifySystemd(fmt::format("RELOADING=1\nMONOTONIC_USEC={}",
                              static_cast<int64_t>(mono.tv_sec) * 1'000'000 + mono.tv_nsec / 1000));
    reloads_.fetch_add(1);
    Status r = service.Reload(why);
    if (r.ok()) {
      log::warn("{}: configuration reloaded ({})", name, why);
    } else if (r.code() == StatusCode::kUnimplemented) {
      log::warn("{}: {} ignored: {}", name, why, r.message());
    } else {
      log::error("{}: reload ({}) refused, keeping the running configuration: {}", name, why,
                 r.message());
    }
    NotifySystemd("READY=1");
  };

  Clock::time_point next_tick = Clock::now() + tick;
  std::string stop_reason;
  while (stop_reason.empty()) {
    if (stop_requested_.load()) {
      stop_reason = "stop requested";
      break;
    }
    if (reload_requested_.exchange(false)) reload("reload requested");
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_tick - Clock::now());
    pollfd fds[2] = {{sig_fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    int n = ::poll(fds, 2, static_cast<int>(std::max<int64_t>(0, wait.count())));
    if (n < 0 && errno != EINTR) {
      log::error("{}: poll on the signal descriptor failed: {}; stopping", name,
                 std::strerror(errno));
      break;
    }
    if (n > 0 && (fds[1].revents & POLLIN)) {
      uint64_t count;
      (void)!::read(wake_fd_, &count, sizeof(count));
    }
    if (n > 0 && (fds[0].revents & POLLIN)) {
      signalfd_siginfo info{};
      while (::read(sig_fd, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
        if (info.ssi_signo == SIGTERM || info.ssi_signo == SIGINT) {
          stop_reason = info.ssi_signo == SIGTERM ? "SIGTERM received" : "SIGINT received";
          break;
        }
        if (info.ssi_signo == SIGHUP) reload("SIGHUP");
      }
      continue;
    }
    if (Clock::now() < next_tick) continue;
    next_tick = Clock::now() + tick;
    service.Tick();
    if (watchdog) NotifySystemd("WATCHDOG=1");
    for (size_t i = 0; i < options_.watch.size(); ++i) {
      std::optional<FileStamp> now = Stamp(options_.watch[i]);
      if (now && now != stamps[i]) {
        reload(options_.watch[i] + " changed");
        break;  // reload() re-stamped every file
      }
    }
  }
  if (stop_reason.empty()) stop_reason = "stop requested";
  log::warn("{}: {}, draining for up to {} ms", name, stop_reason, options_.grace.count());
  NotifySystemd("STOPPING=1");
  service.Stop(options_.grace);
  return Status::Ok();
}

}  // namespace gantry
