#include <fmt/format.h>

#include "gantry/agent/service.h"

namespace gantry::agent {

Result<std::unique_ptr<AgentService>> AgentService::Create(AgentConfig config) {
  std::string listen = config.listen;
  ASSIGN_OR_RETURN(std::unique_ptr<Agent> a, Agent::Create(config));
  return std::unique_ptr<AgentService>(new AgentService(std::move(listen), std::move(a)));
}

std::string AgentService::ReadyMessage() const {
  return fmt::format("gantry agent listening on {} (port {})", listen_, agent_->port());
}

}  // namespace gantry::agent
