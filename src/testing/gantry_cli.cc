#include "testing/gantry_cli.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

namespace gantry::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string MakeDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "gantry-cli-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::perror("mkdtemp");
    std::abort();
  }
  return tmpl;
}

int Decode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// fork + exec with stdin from /dev/null and stdout/stderr to files. Only
// async-signal-safe calls after fork: everything the child needs is built first.
pid_t Spawn(std::vector<std::string> argv_s, const Env& env, const std::string& out,
            const std::string& err, const std::string& in_path = "/dev/null") {
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view kv(*e);
    bool replaced = false;
    for (const auto& [k, v] : env) replaced = replaced || kv.starts_with(k + "=");
    if (!replaced) env_s.emplace_back(kv);
  }
  for (const auto& [k, v] : env) env_s.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (std::string& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);

  pid_t pid = ::fork();
  if (pid == 0) {
    int in = ::open(in_path.c_str(), O_RDONLY);
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || o < 0 || e < 0) ::_exit(126);
    ::dup2(in, 0);
    ::dup2(o, 1);
    ::dup2(e, 2);
    // A test runner may block signals (e.g. a ServiceRunner in the same test);
    // the child starts with none blocked, as from a shell.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  return pid;
}

// waitpid with a bound; SIGKILL when it passes.
int WaitBounded(pid_t pid, std::chrono::seconds timeout) {
  auto until = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return Decode(status);
    if (r < 0) return -1;
    if (std::chrono::steady_clock::now() >= until) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return Decode(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::vector<std::string> WithGantry(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {GantryBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// Runs argv to completion; stdin is `input` (none when empty).
CliRun RunArgv(std::vector<std::string> argv, const Env& env, std::chrono::seconds timeout,
               std::string_view input = {}) {
  std::string dir = MakeDir();
  CliRun r;
  std::string in_path = "/dev/null";
  if (!input.empty()) {
    in_path = dir + "/in";
    std::ofstream(in_path, std::ios::binary) << input;
  }
  pid_t pid = Spawn(std::move(argv), env, dir + "/out", dir + "/err", in_path);
  if (pid < 0) {
    r.err = std::string("fork: ") + std::strerror(errno);
    return r;
  }
  r.rc = WaitBounded(pid, timeout);
  r.out = ReadAll(dir + "/out");
  r.err = ReadAll(dir + "/err");
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return r;
}

}  // namespace

std::string GantryBinary() { return std::string(GANTRY_BINARY_DIR) + "/bin/gantry"; }

Json CliRun::json() const {
  Result<Json> j = ParseJson(out, "gantry stdout");
  if (!j.ok()) {
    ADD_FAILURE() << "stdout is not JSON: " << j.status().message() << "\nstdout: " << out
                  << "\nstderr: " << err;
    return Json();
  }
  return *j;
}

CliRun RunGantry(const std::vector<std::string>& args, const Env& env,
                 std::chrono::seconds timeout) {
  return RunArgv(WithGantry(args), env, timeout);
}

CliRun RunShell(const std::string& command_line, const Env& env, std::chrono::seconds timeout) {
  return RunArgv({"/bin/sh", "-c", command_line}, env, timeout);
}

CliRun RunGantryShell(const std::string& args_line, const Env& env, std::chrono::seconds timeout) {
  return RunShell("'" + GantryBinary() + "' " + args_line, env, timeout);
}

CliRun RunWithInput(const std::vector<std::string>& argv, std::string_view input,
                    std::chrono::seconds timeout) {
  return RunArgv(argv, {}, timeout, input);
}

GantryProcess::GantryProcess() : dir_(MakeDir()) {}

GantryProcess::~GantryProcess() {
  if (pid_ > 0 && status_ < 0) {
    ::kill(pid_, SIGKILL);
    int st;
    ::waitpid(pid_, &st, 0);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

Status GantryProcess::Start(const std::vector<std::string>& args, const Env& env) {
  if (pid_ > 0) return FailedPrecondition("GantryProcess::Start called twice");
  pid_ = Spawn(WithGantry(args), env, dir_ + "/out", dir_ + "/err");
  if (pid_ < 0) return IoError("fork", errno);
  return Status::Ok();
}

bool GantryProcess::Running() {
  if (pid_ <= 0 || status_ >= 0) return false;
  int st = 0;
  if (::waitpid(pid_, &st, WNOHANG) == pid_) {
    status_ = Decode(st);
    return false;
  }
  return true;
}

Result<std::vector<std::string>> GantryProcess::WaitFor(const std::string& file,
                                                        const std::string& regex,
                                                        std::chrono::seconds timeout) {
  std::regex rx(regex);
  auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    bool running = Running();  // before reading: a final line is not missed
    std::istringstream lines(ReadAll(file));
    std::string line;
    while (std::getline(lines, line)) {
      std::smatch m;
      if (std::regex_search(line, m, rx)) {
        std::vector<std::string> groups;
        for (const auto& g : m) groups.push_back(g.str());
        return groups;
      }
    }
    if (!running) {
      return Unavailable("gantry exited (" + std::to_string(status_) + ") before printing /" +
                         regex + "/\nstdout: " + Out() + "\nstderr: " + Err());
    }
    if (std::chrono::steady_clock::now() >= until) {
      return DeadlineExceeded("no line matching /" + regex + "/ within " +
                              std::to_string(timeout.count()) + " s\nstdout: " + Out() +
                              "\nstderr: " + Err());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Result<std::vector<std::string>> GantryProcess::WaitForLine(const std::string& regex,
                                                            std::chrono::seconds timeout) {
  return WaitFor(dir_ + "/out", regex, timeout);
}

Result<std::vector<std::string>> GantryProcess::WaitForErrLine(const std::string& regex,
                                                               std::chrono::seconds timeout) {
  return WaitFor(dir_ + "/err", regex, timeout);
}

void GantryProcess::Signal(int sig) {
  if (pid_ > 0 && status_ < 0) ::kill(pid_, sig);
}

int GantryProcess::Wait(std::chrono::seconds timeout) {
  if (pid_ <= 0) return -1;
  if (status_ < 0) status_ = WaitBounded(pid_, timeout);
  return status_;
}

std::string GantryProcess::Out() const { return ReadAll(dir_ + "/out"); }
std::string GantryProcess::Err() const { return ReadAll(dir_ + "/err"); }

}  // namespace gantry::testing
