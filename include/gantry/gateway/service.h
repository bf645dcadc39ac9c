// `gantry gateway run` as a Service for the ServiceRunner (core/service.h):
//
//   ServiceRunner runner({.watch = {path}, .grace = 10s});
//   ASSIGN_OR_RETURN(std::unique_ptr<GatewayService> svc, GatewayService::Create(path));
//   RETURN_IF_ERROR(runner.Run(*svc));
//
// Reload() re-reads the file and applies it with Gateway::Reload (a broken file,
// or a change that needs a restart, is refused and the running configuration
// stays); Tick() picks up API keys edited by another process; Stop() drains.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "gantry/core/service.h"
#include "gantry/gateway/server.h"

namespace gantry::gateway {

class GatewayService final : public Service {
 public:
  // Loads and validates `config_path` and creates the gateway (not started).
  // Errors name the file, line and key at fault.
  static Result<std::unique_ptr<GatewayService>> Create(std::string config_path);

  std::string_view name() const override { return "gateway"; }
  Status Start() override;
  // "gantry gateway listening on http://127.0.0.1:8080"
  std::string ReadyMessage() const override;
  Status Reload(std::string_view why) override;
  void Tick() override;
  void Stop(std::chrono::milliseconds grace) override;

  Gateway& gateway() { return *gateway_; }

 private:
  GatewayService(std::string path, std::unique_ptr<Gateway> gw)
      : path_(std::move(path)), gateway_(std::move(gw)) {}
  std::string path_;
  std::unique_ptr<Gateway> gateway_;
};

}  // namespace gantry::gateway
