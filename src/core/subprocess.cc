#include "gantry/core/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>

extern char** environ;

namespace gantry {
namespace {

constexpr size_t kMaxStdout = size_t{1} << 20;
constexpr size_t kMaxStderr = size_t{64} << 10;

}  // namespace

std::string JoinArgv(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) s += ' ';
    s += a.find(' ') != std::string::npos ? "\"" + a + "\"" : a;
  }
  return s;
}

std::string FindExecutable(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/bin:/bin";
  while (true) {
    size_t colon = dirs.find(':');
    std::string dir(dirs.substr(0, colon));
    if (!dir.empty()) {
      std::string candidate = dir + "/" + name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    if (colon == std::string_view::npos) return "";
    dirs.remove_prefix(colon + 1);
  }
}

Result<SpawnedChild> SpawnInGroup(const std::string& program, const std::vector<std::string>& argv,
                                  const SpawnOptions& options) {
  if (argv.empty()) return InvalidArgument("SpawnInGroup: empty argv");
  int out_fds[2], err_fds[2];
  if (::pipe2(out_fds, O_CLOEXEC) != 0) return IoError("pipe2", errno);
  if (::pipe2(err_fds, O_CLOEXEC) != 0) {
    int e = errno;
    ::close(out_fds[0]);
    ::close(out_fds[1]);
    return IoError("pipe2", e);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_fds[1], 2);
  if (!options.workdir.empty()) {
    posix_spawn_file_actions_addchdir_np(&actions, options.workdir.c_str());
  }
  // Its own process group, so a timeout kills anything it started too.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  short flags = POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK;
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attr, &empty);
  if (options.default_signals) {
    // Only ignored signals survive exec (handlers are reset by it), so only
    // those are reset: one sigaction each in the child, not 64 per spawn.
    sigset_t ignored;
    sigemptyset(&ignored);
    for (int sig = 1; sig < NSIG; ++sig) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) {
        sigaddset(&ignored, sig);
      }
    }
    posix_spawnattr_setsigdefault(&attr, &ignored);
    flags |= POSIX_SPAWN_SETSIGDEF;
  }
  posix_spawnattr_setflags(&attr, flags);
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<std::string> storage = argv;
  std::vector<char*> cargv;
  for (auto& a : storage) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<char*> cenv;
  if (options.env) {
    for (const std::string& e : *options.env) cenv.push_back(const_cast<char*>(e.c_str()));
    cenv.push_back(nullptr);
  }
  char** envp = options.env ? cenv.data() : environ;
  pid_t pid = 0;
  // posix_spawnp: glibc reports a failed exec (not found, not executable, a
  // bad workdir) as the return value, so "cannot run" is an error here, not
  // an exit code.
  int rc = program.find('/') != std::string::npos
               ? ::posix_spawn(&pid, program.c_str(), &actions, &attr, cargv.data(), envp)
               : ::posix_spawnp(&pid, program.c_str(), &actions, &attr, cargv.data(), envp);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out_fds[1]);
  ::close(err_fds[1]);
  if (rc != 0) {
    ::close(out_fds[0]);
    ::close(err_fds[0]);
    return Unavailable("cannot run '" + program + "'" +
                       (options.workdir.empty() ? "" : " in " + options.workdir) + ": " +
                       std::strerror(rc));
  }
  return SpawnedChild{pid, out_fds[0], err_fds[0]};
}

Result<SubprocessResult> RunSubprocess(const std::vector<std::string>& argv,
                                       std::chrono::milliseconds timeout) {
  if (argv.empty() || argv[0].empty()) return InvalidArgument("RunSubprocess: empty argv");
  ASSIGN_OR_RETURN(SpawnedChild child, SpawnInGroup(argv[0], argv));
  const pid_t pid = child.pid;

  SubprocessResult res;
  const auto until = std::chrono::steady_clock::now() + timeout;
  auto left_ms = [&] {
    return std::chrono::ceil<std::chrono::milliseconds>(until - std::chrono::steady_clock::now())
        .count();
  };
  bool timed_out = false;
  pollfd fds[2] = {{child.out, POLLIN, 0}, {child.err, POLLIN, 0}};
  std::string* sinks[2] = {&res.out, &res.err};
  const size_t caps[2] = {kMaxStdout, kMaxStderr};
  int open_fds = 2;
  char buf[8192];
  while (open_fds > 0) {
    long left = left_ms();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    int n = ::poll(fds, 2, static_cast<int>(left));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      if (sinks[i]->size() < caps[i]) {
        sinks[i]->append(buf, std::min(static_cast<size_t>(got), caps[i] - sinks[i]->size()));
      }
    }
  }
  for (auto& p : fds) {
    if (p.fd >= 0) ::close(p.fd);
  }
  // The pipes can close before the child exits (it may close its stdout and
  // hang): the wait has the same deadline.
  int wstatus = 0;
  while (!timed_out) {
    pid_t w = ::waitpid(pid, &wstatus, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    if (left_ms() <= 0) {
      timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (timed_out) {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    return Unavailable("'" + JoinArgv(argv) + "' did not finish within " +
                       std::to_string(timeout.count()) + " ms and was killed");
  }
  res.exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  return res;
}

}  // namespace gantry
