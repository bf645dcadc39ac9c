// `gantry agent` as a Service for the ServiceRunner (core/service.h). The agent
// does not reload: SIGHUP is logged as ignored (restart it to apply a new
// agent.yaml; its history is on disk and survives the restart).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "gantry/agent/agent.h"
#include "gantry/core/service.h"

namespace gantry::agent {

class AgentService final : public Service {
 public:
  // Creates the agent (not started); errors as Agent::Create.
  static Result<std::unique_ptr<AgentService>> Create(AgentConfig config);

  std::string_view name() const override { return "agent"; }
  Status Start() override { return agent_->Start(); }
  // "gantry agent listening on :9500 (port 9500)"
  std::string ReadyMessage() const override;
  // Stops both loops; the grace is Agent::Stop's own notification flush.
  void Stop(std::chrono::milliseconds) override { agent_->Stop(); }

  Agent& agent() { return *agent_; }

 private:
  AgentService(std::string listen, std::unique_ptr<Agent> a)
      : listen_(std::move(listen)), agent_(std::move(a)) {}
  std::string listen_;
  std::unique_ptr<Agent> agent_;
};

}  // namespace gantry::agent
