// `gantry agent [--config F] [--listen HOST:PORT]`, `gantry agent check`,
// `gantry agent rules export --prometheus`, `gantry agent idle cancel`:
// flags, then the agent library.
#include <signal.h>

#include <fstream>
#include <iostream>
#include <memory>

#include "cli.h"
#include "gantry/agent/agent.h"
#include "gantry/agent/rules.h"
#include "gantry/core/json.h"
#include "gantry/core/log.h"

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

int Fail(const Status& s, int code = kExitUsage) {
  std::cerr << "gantry agent: " << s.message() << "\n";
  return code;
}

Result<agent::AgentConfig> Load(const AgentFlags& f) {
  ASSIGN_OR_RETURN(agent::AgentConfig cfg, agent::LoadAgentConfig(f.config));
  if (!f.listen.empty()) cfg.listen = f.listen;
  return cfg;
}

int RunAgent(const AgentFlags& f) {
  Result<agent::AgentConfig> cfg = Load(f);
  if (!cfg.ok()) return Fail(cfg.status());
  // Signals are taken by this thread; block them before any thread starts.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Result<std::unique_ptr<agent::Agent>> a = agent::Agent::Create(*cfg);
  if (!a.ok()) return Fail(a.status());
  Status s = (*a)->Start();
  if (!s.ok()) return Fail(s);
  std::cout << "gantry agent listening on " << cfg->listen << " (port " << (*a)->port() << ")"
            << std::endl;
  for (;;) {
    int sig = sigwaitinfo(&set, nullptr);
    if (sig == SIGTERM || sig == SIGINT) {
      log::warn("agent: {} received, stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
      break;
    }
    if (sig == SIGHUP) log::warn("agent: SIGHUP ignored; restart the agent to apply a new config");
  }
  (*a)->Stop();
  return kExitOk;
}

int RunCheck(const AgentFlags& f) {
  Result<agent::AgentConfig> cfg = Load(f);
  if (!cfg.ok()) return Fail(cfg.status());
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
    return Fail(InvalidArgument("say which format: gantry agent rules export --prometheus"));
  }
  std::vector<agent::Rule> rules;
  if (!f.rules.empty()) {
    Result<std::vector<agent::Rule>> r = agent::LoadRulesFile(f.rules);
    if (!r.ok()) return Fail(r.status());
    rules = std::move(*r);
  } else if (!f.config.empty()) {
    Result<agent::AgentConfig> cfg = Load(f);
    if (!cfg.ok()) return Fail(cfg.status());
    rules = cfg->rules;
  } else {
    return Fail(InvalidArgument("pass --config agent.yaml or --rules rules.yaml"));
  }
  std::vector<std::string> skipped;
  Result<std::string> yaml = agent::ExportPrometheusRules(rules, &skipped);
  if (!yaml.ok()) return Fail(yaml.status());
  for (const std::string& s : skipped) std::cerr << "gantry agent: skipped " << s << "\n";
  if (f.out.empty() || f.out == "-") {
    std::cout << *yaml;
  } else {
    std::ofstream out(f.out);
    out << *yaml;
    if (!out.flush()) return Fail(IoError("writing " + f.out, errno), kExitCheckFailed);
  }
  return kExitOk;
}

int RunIdleCancel(const AgentFlags& f) {
  Result<agent::AgentConfig> cfg = Load(f);
  if (!cfg.ok()) return Fail(cfg.status());
  const std::string& path = cfg->idle.cancel_file;
  std::ofstream out(path);
  if (!out) {
    return Fail(IoError("creating the idle cancel file " + path, errno), kExitCheckFailed);
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
