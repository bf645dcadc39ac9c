// The gateway process: listeners, worker event loops, reload and shutdown.
//
//   ASSIGN_OR_RETURN(GatewayConfig cfg, LoadGatewayConfig("gateway.yaml"));
//   ASSIGN_OR_RETURN(std::unique_ptr<Gateway> gw, Gateway::Create(std::move(cfg)));
//   RETURN_IF_ERROR(gw->Start());          // binds; gw->port() is now known
//   gw->Wait();                            // until Stop() (SIGTERM in the CLI)
//
// Each worker thread runs one Boost.Asio io_context with its own SO_REUSEPORT
// listener, its own upstream connection pools and its own Redis connection, so
// the request path takes no lock shared between workers except the metrics'
// atomics and the audit queue.
//
// Thread-safety: Start, Reload, RefreshKeys, Stop and Wait may be called from
// threads other than the workers'; Stop is safe from any thread at any time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gantry/core/status.h"
#include "gantry/gateway/config.h"

namespace gantry::gateway {

class Gateway {
 public:
  // Opens the state database, the limiter and the audit log. Errors name the
  // file at fault.
  static Result<std::unique_ptr<Gateway>> Create(GatewayConfig config);
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // Binds the listeners and starts the workers. The port is known afterwards
  // (useful with port 0).
  Status Start();
  uint16_t port() const;
  std::string url() const;  // "http://127.0.0.1:PORT"

  // Applies a new configuration to new requests without dropping connections.
  // The listen address, worker count, TLS, state file, Redis endpoint and audit
  // settings need a restart: a change to them is refused (FailedPrecondition)
  // and the old configuration stays.
  //
  // Thread-safety: may be called from any thread while the workers serve
  // (the CLI calls it from its signal loop), but not concurrently with
  // itself, Start() or the destructor. It builds the new configuration aside
  // and publishes it with one pointer swap under a mutex; each worker picks it
  // up at its next accepted connection or request. A request already being
  // served finishes under the configuration it started with, which stays
  // alive until then. Limiter rules, anomaly settings and backend pools are
  // reconfigured in their own (internally locked) objects first; when one of
  // them refuses, the configuration is not published, but the objects
  // reconfigured before it keep their new settings.
  Status Reload(GatewayConfig config);

  // Stops accepting, lets in-flight requests finish for up to `grace_ms`, then
  // stops the workers. Safe to call from any thread, more than once.
  void Stop(int grace_ms = 10'000);
  // Blocks until the workers have stopped.
  void Wait();

  // Picks up keys changed by another process (e.g. `gantry gateway keys` on
  // the same state file). Called every second by Run in the CLI.
  Status RefreshKeys();

  struct Impl;

 private:
  explicit Gateway(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gantry::gateway
