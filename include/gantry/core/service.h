// One way to run a long-lived component (the gateway, the agent, the registry
// server, the autoscale controller) as a process: stop signals, reload,
// drain, readiness and the systemd notify protocol, written once.
//
//   int main() {
//     ServiceRunner runner({.watch = {"gateway.yaml"}, .grace = 10s});  // first:
//     // it blocks SIGTERM/SIGINT/SIGHUP, and every thread started after it inherits
//     // the mask, so only the runner sees them.
//     ASSIGN_OR_RETURN(std::unique_ptr<MyService> svc, MyService::Create(...));
//     return runner.Run(*svc).ok() ? 0 : 1;  // returns after SIGTERM and the drain
//   }
//
// Run() calls, all on the calling thread:
//   Start()                 once; an error is returned as is (nothing is left running).
//   ReadyMessage()          printed on stdout as one flushed line, then "READY=1" is
//                           sent to systemd when NOTIFY_SOCKET is set (Type=notify).
//   Reload()                on SIGHUP, and when a watched file changes (mtime, size or
//                           inode: an edit in place or a rename over it). An error keeps
//                           the running configuration and is logged; the process lives.
//   Tick()                  every `tick` (e.g. re-reading keys another process edited).
//                           WATCHDOG=1 is sent to systemd with it when WATCHDOG_USEC is set.
//   Stop(grace)             once, on SIGTERM or SIGINT (or RequestStop()): stop taking
//                           new work, let work in flight finish for up to `grace`, stop.
//                           "STOPPING=1" is sent to systemd first.
#pragma once

#include <signal.h>

#include <atomic>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"

namespace gantry {

class Service {
 public:
  virtual ~Service() = default;

  // Short name for logs ("gateway").
  virtual std::string_view name() const = 0;
  // Starts serving and returns once ready (listening). On error nothing of the
  // service is left running.
  virtual Status Start() = 0;
  // The readiness line, e.g. "gantry gateway listening on http://127.0.0.1:8080".
  // Called after a successful Start().
  virtual std::string ReadyMessage() const = 0;
  // Applies the configuration again (re-reading its files). On error the running
  // configuration stays. `why` is "SIGHUP" or "<file> changed", for logs. The
  // default answers Unimplemented: the service must be restarted to change.
  virtual Status Reload(std::string_view why);
  // Periodic work on the runner's thread. The default does nothing.
  virtual void Tick() {}
  // Stops taking new work, waits up to `grace` for work in flight, then stops
  // and returns. Called once, after a successful Start().
  virtual void Stop(std::chrono::milliseconds grace) = 0;
};

struct ServiceOptions {
  // Files whose change triggers Reload(), checked every tick. A file that is
  // missing for a while (an editor replacing it) triggers nothing until it is
  // back with new contents.
  std::vector<std::string> watch;
  std::chrono::milliseconds tick{1000};
  // How long Stop() lets work in flight finish.
  std::chrono::milliseconds grace{10000};
};

class ServiceRunner {
 public:
  // Blocks SIGTERM, SIGINT and SIGHUP in the calling thread and ignores SIGPIPE
  // (a peer closing a socket must not kill a server). Construct it before any
  // thread starts: threads inherit the mask, so the signals reach only Run().
  explicit ServiceRunner(ServiceOptions options);
  // Restores the calling thread's signal mask.
  ~ServiceRunner();
  ServiceRunner(const ServiceRunner&) = delete;
  ServiceRunner& operator=(const ServiceRunner&) = delete;

  // Starts `service`, serves until a stop signal or RequestStop(), then stops it
  // with the grace period. Returns Start()'s error, or OK after a stop. IoError
  // when the signal file descriptor cannot be made. Call once.
  Status Run(Service& service);

  // Thread-safe and async-signal-safe: Run() stops as on SIGTERM, or reloads as
  // on SIGHUP. Calls made before Run() starts take effect once it has started.
  void RequestStop();
  void RequestReload();

  // Number of Reload() calls made so far (tests).
  int reloads() const { return reloads_.load(); }

 private:
  ServiceOptions options_;
  sigset_t old_mask_;  // the calling thread's mask before the constructor
  int wake_fd_ = -1;   // eventfd: RequestStop/RequestReload
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> reload_requested_{false};
  std::atomic<int> reloads_{0};
};

// Sends one sd_notify(3) message ("READY=1", "STATUS=...") to the socket named
// by NOTIFY_SOCKET (a path, or "@name" for an abstract socket). Does nothing
// when the variable is unset; errors are only logged: a service must not fail
// because systemd does not listen.
void NotifySystemd(std::string_view message);

}  // namespace gantry
