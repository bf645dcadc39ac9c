// Test support: a throwaway PostgreSQL server for integration tests.
//
// PostgresServer::Start() runs initdb (trust auth, superuser "gantry") into a
// fresh /tmp/gantry-pg-XXXXXX directory and starts `postgres` listening only
// on a Unix socket in that directory (no TCP port, so parallel test processes
// never collide), waits until it accepts connections, and stops it with
// SIGQUIT (immediate shutdown) and removes the directory in the destructor.
//
// initdb and postgres refuse to run as root, and CI runs as root: when the
// process is root the directory is chowned to `nobody` and the server tools
// run as nobody:nogroup (setgid/setuid in the forked child, with a
// parent-death signal so a crashed test does not leave a server behind). The
// client side (libpq over the socket, trust auth) still runs as root.
//
// The server binaries come from $GANTRY_PG_BIN, else /usr/lib/postgresql/15/bin,
// else the newest /usr/lib/postgresql/<N>/bin. When they are missing Start()
// fails naming the tool and the Debian package (tests must not skip silently).
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::registry::testing {

class PostgresServer {
 public:
  static Result<std::unique_ptr<PostgresServer>> Start() {
    namespace fs = std::filesystem;
    std::string bin = FindBin();
    for (const char* tool : {"initdb", "postgres"}) {
      if (bin.empty() || ::access((bin + "/" + tool).c_str(), X_OK) != 0) {
        return FailedPrecondition(
            std::string("PostgreSQL server tool '") + tool + "' not found (looked in " +
            (bin.empty() ? std::string("$GANTRY_PG_BIN, /usr/lib/postgresql/*/bin") : bin) +
            "); install the Debian package postgresql (scripts/install-deps.sh) or set "
            "GANTRY_PG_BIN");
      }
    }
    char tmpl[] = "/tmp/gantry-pg-XXXXXX";
    if (!::mkdtemp(tmpl)) return IoError("creating a temp dir for PostgreSQL", errno);
    std::unique_ptr<PostgresServer> s(new PostgresServer(tmpl));
    uid_t uid = ::geteuid();
    gid_t gid = ::getegid();
    if (uid == 0) {
      // The server must not run as root: hand the directory to nobody.
      struct passwd* pw = ::getpwnam("nobody");
      if (!pw)
        return FailedPrecondition(
            "running as root and there is no user 'nobody' to run "
            "the PostgreSQL test server as; create one");
      uid = pw->pw_uid;
      gid = pw->pw_gid;
      if (::chown(tmpl, uid, gid) != 0) return IoError(std::string("chown ") + tmpl, errno);
    }
    ::chmod(tmpl, 0700);
    s->run_uid_ = uid;
    s->run_gid_ = gid;
    const std::string data = s->dir_ + "/data";
    const std::string log = s->dir_ + "/server.log";
    int rc = s->RunAndWait({bin + "/initdb", "-D", data, "--auth=trust", "-U", "gantry", "-E",
                            "UTF8", "--locale=C", "--no-sync", "--no-instructions"},
                           log);
    if (rc != 0) {
      return Internal("initdb " + data + " failed (exit " + std::to_string(rc) + "):\n" +
                      Tail(log));
    }
    s->pid_ = s->Spawn({bin + "/postgres",
                        "-D",
                        data,
                        "-k",
                        s->dir_,
                        "-p",
                        "5432",
                        "-c",
                        "listen_addresses=",
                        "-c",
                        "fsync=off",
                        "-c",
                        "synchronous_commit=off",
                        "-c",
                        "full_page_writes=off",
                        "-c",
                        "max_connections=60",
                        "-c",
                        "shared_buffers=16MB",
                        "-c",
                        "dynamic_shared_memory_type=mmap"},
                       log);
    if (s->pid_ <= 0) return Internal("could not start " + bin + "/postgres");
    // Wait until it accepts connections (or dies).
    const std::string probe = s->Uri("postgres");
    for (int i = 0; i < 1200; ++i) {
      int status = 0;
      if (::waitpid(s->pid_, &status, WNOHANG) == s->pid_) {
        s->pid_ = -1;
        return Internal(bin + "/postgres exited during start-up:\n" + Tail(log));
      }
      if (PQping(probe.c_str()) == PQPING_OK) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return DeadlineExceeded(bin + "/postgres did not accept connections within 120 s:\n" +
                            Tail(log));
  }

  ~PostgresServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGQUIT);  // immediate shutdown: the data is thrown away anyway
      int status = 0;
      bool gone = false;
      for (int i = 0; i < 200 && !gone; ++i) {
        gone = ::waitpid(pid_, &status, WNOHANG) == pid_;
        if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (!gone) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
      }
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // libpq URI for `dbname` on this server (Unix socket, user gantry).
  std::string Uri(const std::string& dbname, const std::string& password = "") const {
    return "postgresql://gantry" + (password.empty() ? std::string() : ":" + password) + "@/" +
           dbname + "?host=" + dir_ + "&port=5432";
  }

  // Creates an empty database and returns its URI.
  Result<std::string> CreateDatabase(const std::string& dbname) {
    RETURN_IF_ERROR(Sql("postgres", "CREATE DATABASE " + dbname).status());
    return Uri(dbname);
  }

  // Runs `sql` (no parameters) on `dbname`; returns the first cell of the
  // first row ("" when there is none).
  Result<std::string> Sql(const std::string& dbname, const std::string& sql) {
    PGconn* c = PQconnectdb(Uri(dbname).c_str());
    if (PQstatus(c) != CONNECTION_OK) {
      std::string msg = PQerrorMessage(c);
      PQfinish(c);
      return Unavailable("connecting to the test server (" + dbname + "): " + msg);
    }
    PGresult* r = PQexec(c, sql.c_str());
    ExecStatusType st = PQresultStatus(r);
    std::string msg = PQresultErrorMessage(r);
    std::string cell = PQntuples(r) > 0 && PQnfields(r) > 0 ? PQgetvalue(r, 0, 0) : "";
    PQclear(r);
    PQfinish(c);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return Internal(sql + ": " + msg);
    return cell;
  }

  const std::string& dir() const { return dir_; }

 private:
  explicit PostgresServer(std::string dir) : dir_(std::move(dir)) {}

  static std::string FindBin() {
    namespace fs = std::filesystem;
    if (const char* e = std::getenv("GANTRY_PG_BIN"); e && *e) return e;
    if (fs::exists("/usr/lib/postgresql/15/bin/postgres")) return "/usr/lib/postgresql/15/bin";
    std::string best;
    int best_v = -1;
    std::error_code ec;
    for (const auto& d : fs::directory_iterator("/usr/lib/postgresql", ec)) {
      int v = std::atoi(d.path().filename().c_str());
      if (v > best_v && fs::exists(d.path() / "bin" / "postgres")) {
        best_v = v;
        best = (d.path() / "bin").string();
      }
    }
    return best;
  }

  static std::string Tail(const std::string& path) {
    std::ifstream in(path);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    return text.size() > 4000 ? text.substr(text.size() - 4000) : text;
  }

  // Forks and execs argv as run_uid_/run_gid_ with stdout/stderr appended to
  // `log` and the working directory dir_. Returns the child's pid.
  pid_t Spawn(const std::vector<std::string>& argv, const std::string& log) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid != 0) return pid;
    // Child: only async-signal-safe calls from here on.
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    if (::geteuid() == 0) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(run_gid_) != 0 || ::setuid(run_uid_) != 0) {
        ::_exit(126);
      }
    }
    // After setuid (which clears it): stop with the test process.
    ::prctl(PR_SET_PDEATHSIG, SIGQUIT);
    if (::getppid() != parent) ::_exit(125);
    if (::chdir(dir_.c_str()) != 0) ::_exit(124);
    ::execv(args[0], args.data());
    ::_exit(127);
  }

  int RunAndWait(const std::vector<std::string>& argv, const std::string& log) {
    pid_t pid = Spawn(argv, log);
    if (pid <= 0) return -1;
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  std::string dir_;
  pid_t pid_ = -1;
  uid_t run_uid_ = 0;
  gid_t run_gid_ = 0;
};

}  // namespace gantry::registry::testing
