#include "gantry/core/log.h"
#include "gantry/gateway/service.h"

namespace gantry::gateway {

Result<std::unique_ptr<GatewayService>> GatewayService::Create(std::string config_path) {
  if (config_path.empty()) return InvalidArgument("--config is required");
  ASSIGN_OR_RETURN(GatewayConfig cfg, LoadGatewayConfig(config_path));
  ASSIGN_OR_RETURN(std::unique_ptr<Gateway> gw, Gateway::Create(std::move(cfg)));
  return std::unique_ptr<GatewayService>(new GatewayService(std::move(config_path), std::move(gw)));
}

Status GatewayService::Start() {
  RETURN_IF_ERROR(gateway_->Start());
  log::info("gateway: listening on {}", gateway_->url());
  return Status::Ok();
}

std::string GatewayService::ReadyMessage() const {
  return "gantry gateway listening on " + gateway_->url();
}

Status GatewayService::Reload(std::string_view) {
  ASSIGN_OR_RETURN(GatewayConfig next, LoadGatewayConfig(path_));
  return gateway_->Reload(std::move(next));
}

void GatewayService::Tick() {
  // Keys created or revoked by `gantry gateway keys` on the same state file.
  Status k = gateway_->RefreshKeys();
  if (!k.ok()) log::error("gateway: cannot refresh API keys: {}", k.message());
}

void GatewayService::Stop(std::chrono::milliseconds grace) {
  gateway_->Stop(static_cast<int>(grace.count()));
  gateway_->Wait();
}

}  // namespace gantry::gateway
