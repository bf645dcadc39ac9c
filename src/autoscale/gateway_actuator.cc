// The gateway actuator: backends of one gateway pool, each a local process
// started by the `start` command on a free port, added to the pool through
// the admin API once it listens (and taking traffic once the pool's health
// check passes), and removed by draining, removing it from the pool and
// stopping its process group.
//
// What it owns is named: backends called <prefix><port> in the pool, and
// <state_dir>/<name>.pid (the process group's leader) and <name>.log. Read()
// rebuilds everything from the gateway and those files, so a restarted
// controller adopts the backends its predecessor started.
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "gantry/autoscale/actuator.h"
#include "gantry/core/json.h"
#include "gantry/core/log.h"
#include "gantry/core/subprocess.h"
#include "gantry/gateway/admin_client.h"

namespace gantry::autoscale {
namespace {

namespace fs = std::filesystem;
using Clk = std::chrono::steady_clock;

constexpr const char* kHost = "127.0.0.1";

// Whether nothing listens on (and nothing holds) 127.0.0.1:port: it can be
// bound. The port is released again at once; the backend binds it next.
bool PortFree(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

// Whether something accepts TCP connections on 127.0.0.1:port (within 200 ms).
bool Listens(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    ok = true;
  } else if (errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof(err);
    ok = ::poll(&p, 1, 200) == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
         err == 0;
  }
  ::close(fd);
  return ok;
}

// Whether `pid` still runs: reaps it when it is our child and has exited (a
// zombie would answer kill(pid, 0) forever).
bool Alive(pid_t pid) {
  if (pid <= 0) return false;
  int st = 0;
  pid_t r = ::waitpid(pid, &st, WNOHANG);
  if (r == pid) return false;                    // exited just now; reaped
  if (r == 0) return true;                       // our child, running
  return ::kill(pid, 0) == 0 || errno == EPERM;  // not our child (adopted)
}

std::string Replace(std::string s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

class GatewayActuator : public Actuator {
 public:
  GatewayActuator(GatewayActuatorConfig cfg, gateway::AdminClient admin)
      : cfg_(std::move(cfg)), admin_(std::move(admin)) {}

  std::string_view kind() const override { return "gateway"; }
  bool CanChooseVictims() const override { return true; }

  Result<Capacity> Read() override {
    ASSIGN_OR_RETURN(std::vector<Owned> owned, List());
    Capacity c;
    for (const Owned& o : owned) {
      Instance in;
      in.id = o.name;
      in.name = o.address;
      in.ready = o.in_gateway && o.healthy && !o.draining;
      in.state = !o.in_gateway ? "Starting"
                 : o.draining  ? "Draining"
                 : o.healthy   ? "Running"
                               : "Unhealthy";
      in.created = o.created;
      if (in.ready) ++c.ready;
      c.instances.push_back(std::move(in));
    }
    c.target = static_cast<int64_t>(owned.size());
    return c;
  }

  Status ScaleOut(int64_t desired) override {
    ASSIGN_OR_RETURN(std::vector<Owned> owned, List());
    std::set<int> used;
    for (const Owned& o : owned) used.insert(o.port);
    int64_t n = static_cast<int64_t>(owned.size());
    // Start them all, then wait for each: model servers load in parallel.
    std::vector<Started> started;
    Status first_error = Status::Ok();
    for (; n < desired; ++n) {
      Result<Started> s = Start(&used);
      if (!s.ok()) {
        first_error = s.status();
        break;
      }
      started.push_back(*s);
    }
    for (const Started& s : started) {
      Status st = Join(s);
      if (!st.ok() && first_error.ok()) first_error = st;
    }
    return first_error;
  }

  Status ScaleIn(int64_t /*desired*/, const std::vector<std::string>& victims) override {
    ASSIGN_OR_RETURN(std::vector<Owned> owned, List());
    std::map<std::string, Owned> by_name;
    for (Owned& o : owned) by_name[o.name] = o;
    for (const std::string& v : victims) {
      auto it = by_name.find(v);
      if (it == by_name.end()) {
        return NotFound(fmt::format(
            "gateway actuator: '{}' is not a backend of pool '{}' that this actuator started "
            "(backends named {}<port>)",
            v, cfg_.pool, Prefix()));
      }
    }
    for (const std::string& v : victims) {
      const Owned& o = by_name[v];
      if (o.in_gateway) {
        // New requests go elsewhere; those in flight finish before the
        // process is stopped. A drain that does not finish leaves the
        // backend drained (it takes nothing new) and fails this scale-in.
        Result<Json> drained = admin_.DrainAndWait(v, cfg_.drain_timeout, nullptr);
        if (!drained.ok()) return drained.status().WithContext("gateway actuator: scale in");
        Result<Json> removed = admin_.RemoveBackend(cfg_.pool, v, false);
        if (!removed.ok() && removed.status().code() != StatusCode::kNotFound) {
          return removed.status().WithContext("gateway actuator: scale in");
        }
      }
      Stop(o);
      log::info("gateway actuator: backend '{}' ({}) of pool '{}' stopped", v, o.address,
                cfg_.pool);
    }
    return Status::Ok();
  }

 private:
  // A backend this actuator owns: in the pool, or with a pid file only (a
  // scale-out that a controller restart interrupted before AddBackend).
  struct Owned {
    std::string name;
    std::string address;
    int port = 0;
    bool in_gateway = false;
    bool healthy = false;
    bool draining = false;
    pid_t pid = -1;
    std::chrono::system_clock::time_point created{};
  };
  struct Started {
    std::string name;
    int port = 0;
    pid_t pid = -1;
    Clk::time_point since;
  };

  std::string Prefix() const {
    return cfg_.backend_prefix.empty() ? cfg_.pool + "-" : cfg_.backend_prefix;
  }
  std::string PidPath(const std::string& name) const {
    return (fs::path(cfg_.state_dir) / (name + ".pid")).string();
  }
  std::string LogPath(const std::string& name) const {
    return (fs::path(cfg_.state_dir) / (name + ".log")).string();
  }
  // The port a name of ours carries, or 0.
  int PortOf(std::string_view name) const {
    std::string prefix = Prefix();
    if (!name.starts_with(prefix)) return 0;
    std::string_view rest = name.substr(prefix.size());
    int port = 0;
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), port);
    if (ec != std::errc() || end != rest.data() + rest.size() || port <= 0 || port > 65535) {
      return 0;
    }
    return port;
  }
  pid_t ReadPid(const std::string& name) const {
    Result<std::string> text = ReadFile(PidPath(name));
    if (!text.ok()) return -1;
    pid_t pid = -1;
    std::string_view t = *text;
    while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.remove_suffix(1);
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), pid);
    return ec == std::errc() && end == t.data() + t.size() ? pid : -1;
  }
  std::chrono::system_clock::time_point Created(const std::string& name) const {
    struct stat st {};
    if (::stat(PidPath(name).c_str(), &st) != 0) return {};
    return std::chrono::system_clock::from_time_t(st.st_mtime);
  }

  // Ours, from the gateway's pool and the pid files.
  Result<std::vector<Owned>> List() {
    ASSIGN_OR_RETURN(Json pools, admin_.Pools());
    const Json* pool = nullptr;
    if (pools.contains("pools") && pools["pools"].is_array()) {
      for (const Json& p : pools["pools"]) {
        if (p.is_object() && p.value("name", "") == cfg_.pool) pool = &p;
      }
    }
    if (pool == nullptr) {
      return NotFound(fmt::format("gateway actuator: the gateway at {} has no pool '{}'",
                                  admin_.url(), cfg_.pool));
    }
    ASSIGN_OR_RETURN(Json backends, admin_.Backends());
    std::map<std::string, const Json*> state;
    if (backends.contains("backends") && backends["backends"].is_array()) {
      for (const Json& b : backends["backends"]) {
        if (b.is_object()) state[b.value("name", "")] = &b;
      }
    }
    std::vector<Owned> out;
    std::set<std::string> seen;
    const Json names = pool->contains("backends") ? (*pool)["backends"] : Json::array();
    for (const Json& n : names) {
      if (!n.is_string()) continue;
      std::string name = n.get<std::string>();
      int port = PortOf(name);
      if (port == 0) continue;  // someone else's backend
      Owned o;
      o.name = name;
      o.port = port;
      o.address = fmt::format("{}:{}", kHost, port);
      o.in_gateway = true;
      auto st = state.find(name);
      if (st != state.end()) {
        o.address = st->second->value("address", o.address);
        o.healthy = st->second->value("healthy", false) && !st->second->value("ejected", false);
        o.draining = st->second->value("draining", false);
      }
      o.pid = ReadPid(name);
      o.created = Created(name);
      seen.insert(name);
      if (o.pid > 0 && !Alive(o.pid)) {
        // Its process died (crashed, OOM-killed, killed): the gateway only
        // sees an unhealthy backend, which would count as capacity forever.
        // Take it out of the pool so that the controller starts a new one.
        Result<Json> removed = admin_.RemoveBackend(cfg_.pool, name, /*force=*/true);
        if (removed.ok() || removed.status().code() == StatusCode::kNotFound) {
          log::warn(
              "gateway actuator: backend '{}' of pool '{}' (pid {}) exited; removed it "
              "from the pool so that it is replaced; its log: {}",
              name, cfg_.pool, o.pid, LogPath(name));
          std::error_code ec;
          fs::remove(PidPath(name), ec);
          continue;
        }
        log::warn(
            "gateway actuator: backend '{}' (pid {}) exited, but removing it from pool "
            "'{}' failed: {}",
            name, o.pid, cfg_.pool, removed.status().ToString());
      }
      out.push_back(std::move(o));
    }
    // Processes started but never added (a controller that stopped between
    // the start and AddBackend): still running ones count as starting, so
    // that a scale-in can stop them; pid files of dead ones are removed.
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(cfg_.state_dir, ec)) {
      if (entry.path().extension() != ".pid") continue;
      std::string name = entry.path().stem().string();
      int port = PortOf(name);
      if (port == 0 || seen.count(name) != 0) continue;
      pid_t pid = ReadPid(name);
      if (!Alive(pid)) {
        fs::remove(entry.path(), ec);
        continue;
      }
      Owned o;
      o.name = name;
      o.port = port;
      o.address = fmt::format("{}:{}", kHost, port);
      o.pid = pid;
      o.created = Created(name);
      out.push_back(std::move(o));
    }
    return out;
  }

  // Starts one backend on a free port of [port_min, port_max].
  Result<Started> Start(std::set<int>* used) {
    int port = 0;
    for (int p = cfg_.port_min; p <= cfg_.port_max; ++p) {
      if (used->count(p) == 0 && PortFree(p)) {
        port = p;
        break;
      }
    }
    if (port == 0) {
      return ResourceExhausted(fmt::format(
          "gateway actuator: no free port in {}-{} (port_min, port_max) for another backend of "
          "pool '{}'",
          cfg_.port_min, cfg_.port_max, cfg_.pool));
    }
    used->insert(port);
    std::string name = Prefix() + std::to_string(port);
    std::vector<std::string> argv;
    for (const std::string& a : cfg_.start) {
      argv.push_back(Replace(Replace(a, "{port}", std::to_string(port)), "{name}", name));
    }
    // The shell only redirects stdout and stderr to the log (appending) and
    // then becomes the backend (exec), so the pid file names the backend
    // itself, the leader of its own process group; nothing in it reads the
    // pipes SpawnInGroup made, which are closed here.
    std::vector<std::string> sh = {"/bin/sh", "-c", "exec \"$@\" >>\"$0\" 2>&1", LogPath(name)};
    sh.insert(sh.end(), argv.begin(), argv.end());
    SpawnOptions options;
    options.default_signals = true;
    Result<SpawnedChild> child = SpawnInGroup("/bin/sh", sh, options);
    if (!child.ok()) {
      return child.status().WithContext(
          fmt::format("gateway actuator: starting {} ({})", name, JoinArgv(argv)));
    }
    ::close(child->out);
    ::close(child->err);
    Status w = WriteFileAtomic(PidPath(name), fmt::format("{}\n", child->pid));
    if (!w.ok()) {
      ::kill(-child->pid, SIGKILL);
      Alive(child->pid);
      return w.WithContext("gateway actuator: pid file");
    }
    log::info("gateway actuator: started backend '{}' of pool '{}' (pid {}): {}; log {}", name,
              cfg_.pool, child->pid, JoinArgv(argv), LogPath(name));
    return Started{name, port, child->pid, Clk::now()};
  }

  // Waits for a started backend to listen, adds it to the pool, then waits
  // for the pool to count it healthy, all within ready_timeout.
  Status Join(const Started& s) {
    const auto until = s.since + cfg_.ready_timeout;
    while (!Listens(s.port)) {
      if (!Alive(s.pid)) {
        std::error_code ec;
        fs::remove(PidPath(s.name), ec);
        return Unavailable(
            fmt::format("gateway actuator: backend '{}' exited before it listened on {}:{}; see {}",
                        s.name, kHost, s.port, LogPath(s.name)));
      }
      if (Clk::now() >= until) {
        Owned o;
        o.name = s.name;
        o.pid = s.pid;
        Stop(o);
        return DeadlineExceeded(fmt::format(
            "gateway actuator: backend '{}' did not listen on {}:{} within {} ms (ready_timeout); "
            "stopped it; see {}",
            s.name, kHost, s.port, cfg_.ready_timeout.count(), LogPath(s.name)));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::string address = fmt::format("{}:{}", kHost, s.port);
    Result<Json> added = admin_.AddBackend(cfg_.pool, s.name, address);
    if (!added.ok()) {
      Owned o;
      o.name = s.name;
      o.pid = s.pid;
      Stop(o);
      return added.status().WithContext(
          fmt::format("gateway actuator: adding backend '{}' to pool '{}'", s.name, cfg_.pool));
    }
    // In a pool with health checks it takes traffic once one passes.
    for (;;) {
      Result<Json> b = admin_.Backend(s.name);
      if (b.ok() && b->value("healthy", false)) break;
      if (Clk::now() >= until) {
        return DeadlineExceeded(fmt::format(
            "gateway actuator: backend '{}' listens but has not passed pool '{}''s health check "
            "within {} ms (ready_timeout); it stays in the pool; see {}",
            s.name, cfg_.pool, cfg_.ready_timeout.count(), LogPath(s.name)));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    log::info("gateway actuator: backend '{}' of pool '{}' is up at {}", s.name, cfg_.pool,
              address);
    return Status::Ok();
  }

  // SIGTERM to the process group, SIGKILL after stop_grace; removes the pid file.
  void Stop(const Owned& o) {
    pid_t pid = o.pid > 0 ? o.pid : ReadPid(o.name);
    if (pid > 0 && Alive(pid)) {
      ::kill(-pid, SIGTERM);
      const auto until = Clk::now() + cfg_.stop_grace;
      while (Alive(pid) && Clk::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      // Whatever of the group is left (the backend, or children it started).
      ::kill(-pid, SIGKILL);
      for (int i = 0; i < 100 && Alive(pid); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    std::error_code ec;
    fs::remove(PidPath(o.name), ec);
  }

  GatewayActuatorConfig cfg_;
  gateway::AdminClient admin_;
};

}  // namespace

// Waits use the steady clock: they bound real processes and HTTP calls, which a
// fake clock cannot speed up.
Result<std::unique_ptr<Actuator>> NewGatewayActuator(const GatewayActuatorConfig& config,
                                                     const Clock& /*clock*/) {
  if (config.url.empty()) {
    return InvalidArgument(
        "gateway actuator: `url` (the gateway, e.g. http://127.0.0.1:8080) is required");
  }
  if (config.pool.empty()) return InvalidArgument("gateway actuator: `pool` is required");
  if (config.start.empty()) {
    return InvalidArgument(
        "gateway actuator: `start` (the backend's argv, with \"{port}\") is required");
  }
  if (config.port_min < 1 || config.port_max > 65535 || config.port_min > config.port_max) {
    return InvalidArgument(fmt::format(
        "gateway actuator: `port_min`-`port_max` must be a range within 1-65535, got {}-{}",
        config.port_min, config.port_max));
  }
  if (config.state_dir.empty()) {
    return InvalidArgument(
        "gateway actuator: `state_dir` (where pid files and logs of started backends go) is "
        "required");
  }
  std::error_code ec;
  fs::create_directories(config.state_dir, ec);
  if (ec) {
    return Unavailable(fmt::format("gateway actuator: cannot create state_dir '{}': {}",
                                   config.state_dir, ec.message()));
  }
  const char* key =
      config.admin_key_env.empty() ? nullptr : std::getenv(config.admin_key_env.c_str());
  if (key == nullptr || *key == '\0') {
    return InvalidArgument(fmt::format(
        "gateway actuator: the environment variable {} (admin_key_env) must hold a gateway key "
        "whose role has action 'admin'",
        config.admin_key_env.empty() ? "(none named)" : config.admin_key_env));
  }
  Result<gateway::AdminClient> admin = gateway::AdminClient::Create(config.url, key);
  if (!admin.ok()) return admin.status().WithContext("gateway actuator");
  return std::unique_ptr<Actuator>(std::make_unique<GatewayActuator>(config, std::move(*admin)));
}

}  // namespace gantry::autoscale
