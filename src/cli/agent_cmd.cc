// `gantry agent [--config F] [--listen HOST:PORT]`, `gantry agent check`,
// `gantry agent rules export --prometheus`, `gantry agent idle cancel`:
// flags, then the agent library.
#include <fstream>
#include <iostream>
#include <memory>

#include "cli.h"
#include "gantry/agent/agent.h"
#include "gantry/agent/rules.h"
#include "gantry/agent/service.h"
#include "gantry/core/json.h"
#include "gantry/core/log.h"
#include "gantry/core/service.h"

namespace gantry::cli {
namespace {

struct AgentFlags {
  CommonFlags common;
  std::string config;
  std::string listen;
  std::string rules;
  std::string out;
  bool prometheus = false;
};

Result<agent::AgentConfig> Load(const AgentFlags& f) {
  ASSIGN_OR_RETURN(agent::AgentConfig cfg, agent::LoadAgentConfig(f.config));
  if (!f.listen.empty()) cfg.listen = f.listen;
  return cfg;
}

int RunAgent(const AgentFlags& f) {
  Result<agent::AgentConfig> cfg = Load(f);
  if (!cfg.ok()) return Fail("agent", cfg.status());
  ServiceRunner runner({});  // before Create: no agent thread may take the signals
  Result<std::unique_ptr<agent::AgentService>> svc = agent::AgentService::Create(std::move(*cfg));
  if (!svc.ok()) return Fail("agent", svc.status());
  Status s = runner.Run(**svc);
  return s.ok() ? kExitOk : Fail("agent", s);
}

int RunCheck(const AgentFlags& f) {
  Result<agent::AgentConfig> cfg = Load(f);
  if (!cfg.ok()) return Fail("agent", cfg.status());
  if (f.common.json) {
    std::cout << Json{{"config", f.config},
                      {"listen", cfg->listen},
                      {"interval_ms", cfg->interval.count()},
                      {"rules", cfg->rules.size()},
                      {"idle", cfg->idle.enabled},
                      {"ok", true}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << (f.config.empty() ? "<defaults>" : f.config) << ": ok (listen " << cfg->listen
              << ", " << cfg->rules.size() << " rule(s), idle "
              << (cfg->idle.enabled ? "on" : "off") << ")\n";
  }
  return kExitOk;
}

int RunRulesExport(const AgentFlags& f) {
  if (!f.prometheus) {
    return Fail("agent",
                InvalidArgument("say which format: gantry agent rules export --prometheus"));
  }
  std::vector<agent::Rule> rules;
  if (!f.rules.empty()) {
    Result<std::vector<agent::Rule>> r = agent::LoadRulesFile(f.rules);
    if (!r.ok()) return Fail("agent", r.status());
    rules = std::move(*r);
  } else if (!f.config.empty()) {
    Result<agent::AgentConfig> cfg = Load(f);
    if (!cfg.ok()) return Fail("agent", cfg.status());
    rules = cfg->rules;
  } else {
    return Fail("agent", InvalidArgument("pass --config agent.yaml or --rules rules.yaml"));
  }
  std::vector<std::string> skipped;
  Result<std::string> yaml = agent::ExportPrometheusRules(rules, &skipped);
  if (!yaml.ok()) return Fail("agent", yaml.status());
  for (const std::string& s : skipped) std::cerr << "gantry agent: skipped " << s << "\n";
  if (f.out.empty() || f.out == "-") {
    std::cout << *yaml;
  } else {
    std::ofstream out(f.out);
    out << *yaml;
    if (!out.flush()) return Fail("agent", IoError("writing " + f.out, errno));
  }
  return kExitOk;
}

int RunIdleCancel(const AgentFlags& f) {
  Result<agent::AgentConfig> cfg = Load(f);
  if (!cfg.ok()) return Fail("agent", cfg.status());
  const std::string& path = cfg->idle.cancel_file;
  std::ofstream out(path);
  if (!out) {
    return Fail("agent", IoError("creating the idle cancel file " + path, errno));
  }
  std::cout << "idle shutdown cancelled (the agent picks up " << path << " at its next tick)\n";
  return kExitOk;
}

}  // namespace

void RegisterAgent(CLI::App& app, Action* action) {
  auto flags = std::make_shared<AgentFlags>();
  CLI::App* ag = app.add_subcommand(
      "agent",
      "Node agent: /metrics with node_exporter and dcgm-exporter names, history, alert rules, "
      "idle shutdown and a dashboard (gantry agent --help; docs/agent.md)");
  ag->require_subcommand(0, 1);
  ag->add_option("--config,-c", flags->config, "agent.yaml (default: built-in defaults)");
  ag->add_option("--listen", flags->listen, "HOST:PORT, :PORT or [IPV6]:PORT (default :9500)");
  AddCommonFlags(ag, &flags->common);
  ag->callback([ag, flags, action] {
    if (!ag->get_subcommands().empty()) return;  // a subcommand set the action
    *action = [flags] {
      if (!ApplyCommonFlags(flags->common)) return kExitUsage;
      return RunAgent(*flags);
    };
  });
  auto set = [&](CLI::App* c, int (*fn)(const AgentFlags&)) {
    c->callback([flags, action, fn] {
      *action = [flags, fn] {
        if (!ApplyCommonFlags(flags->common)) return kExitUsage;
        return fn(*flags);
      };
    });
  };

  CLI::App* check = ag->add_subcommand("check", "Validate the config (exit 2 with the reason)");
  check->add_option("--config,-c", flags->config, "agent.yaml");
  AddCommonFlags(check, &flags->common);
  set(check, RunCheck);

  CLI::App* rules = ag->add_subcommand("rules", "Alert rules");
  rules->require_subcommand(1);
  CLI::App* exp = rules->add_subcommand(
      "export",
      "Write equivalent Prometheus alerting rules (static rules; dynamic ones are "
      "listed as skipped on stderr)");
  exp->add_flag("--prometheus", flags->prometheus, "Prometheus rule-file YAML")->required();
  exp->add_option("--config,-c", flags->config, "agent.yaml (its alerts section)");
  exp->add_option("--rules", flags->rules, "a rules file instead of --config");
  exp->add_option("--out,-o", flags->out, "write here instead of stdout");
  AddCommonFlags(exp, &flags->common);
  set(exp, RunRulesExport);

  CLI::App* idle = ag->add_subcommand("idle", "Idle shutdown");
  idle->require_subcommand(1);
  CLI::App* cancel =
      idle->add_subcommand("cancel", "Cancel a pending idle action (creates idle.cancel_file)");
  cancel->add_option("--config,-c", flags->config, "agent.yaml");
  AddCommonFlags(cancel, &flags->common);
  set(cancel, RunIdleCancel);
}

}  // namespace gantry::cli
