// `gantry autoscale run|check|status|slurm-resume|slurm-suspend|slurm-resume-fail`.
#include <fmt/format.h>

#include <cstdlib>
#include <iostream>

#include "cli.h"
#include "gantry/autoscale/config.h"
#include "gantry/autoscale/controller.h"
#include "gantry/autoscale/slurm_power.h"
#include "gantry/core/http_client.h"
#include "gantry/core/service.h"
#include "gantry/core/table.h"
#include "gantry/core/text.h"
#include "gantry/core/units.h"

namespace gantry::cli {
namespace {

struct AutoscaleFlags {
  CommonFlags common;
  std::string config = "autoscale.yaml";
  bool dry_run = false;
  int grace_ms = 10000;
  std::string url;
  std::string hostlist;
};

int Run(const AutoscaleFlags& f) {
  ServiceRunner runner({.watch = {f.config}, .grace = std::chrono::milliseconds(f.grace_ms)});
  Result<std::unique_ptr<Service>> svc =
      autoscale::NewAutoscaleService(f.config, {.dry_run = f.dry_run});
  if (!svc.ok()) return Fail("autoscale run", svc.status());
  Status s = runner.Run(**svc);
  return s.ok() ? kExitOk : Fail("autoscale run", s);
}

std::string Minutes(int m) { return fmt::format("{:02}:{:02}", m / 60, m % 60); }

std::string Metrics(const autoscale::TargetConfig& t) {
  std::vector<std::string> out;
  for (const autoscale::MetricSourceConfig& m : t.metrics) {
    std::string what;
    switch (m.kind) {
      case autoscale::MetricSourceConfig::Kind::kPrometheus:
        what = "prometheus";
        break;
      case autoscale::MetricSourceConfig::Kind::kGateway:
        what = "gateway " + m.signal;
        break;
      case autoscale::MetricSourceConfig::Kind::kAgent:
        what = "agent " + m.signal;
        break;
      case autoscale::MetricSourceConfig::Kind::kCommand:
        what = "command";
        break;
    }
    std::string target;
    for (const autoscale::MetricTarget& mt : t.decision.hpa.metrics) {
      if (mt.name == m.name) target = fmt::format(" target {}", mt.target);
    }
    out.push_back(fmt::format("{} ({}{})", m.name, what, target));
  }
  return Join(out, ", ");
}

int Check(const AutoscaleFlags& f) {
  Result<autoscale::AutoscaleConfig> cfg = autoscale::LoadAutoscaleConfig(f.config);
  if (!cfg.ok()) return Fail("autoscale check", cfg.status());
  static const char* kActuators[] = {"vmss", "kubernetes", "gateway", "command"};
  if (f.common.json) {
    Json targets = Json::array();
    for (const autoscale::TargetConfig& t : cfg->targets) {
      Json metrics = Json::array();
      for (const auto& m : t.metrics) metrics.push_back(m.name);
      targets.push_back({{"name", t.name},
                         {"min", t.decision.min},
                         {"max", t.decision.max},
                         {"mode", t.decision.mode == autoscale::Mode::kHpa ? "hpa" : "rules"},
                         {"interval_ms", t.interval.count()},
                         {"metrics", metrics},
                         {"actuator", kActuators[static_cast<int>(t.actuator.kind)]}});
    }
    std::cout << Json{{"config", f.config},
                      {"ok", true},
                      {"targets", targets},
                      {"slurm", cfg->slurm.has_value()}}
                     .dump(2)
              << "\n";
    return kExitOk;
  }
  Table t({"target", "min", "max", "mode", "every", "metrics", "actuator", "schedules"});
  for (const autoscale::TargetConfig& tc : cfg->targets) {
    std::vector<std::string> sched;
    for (const autoscale::Schedule& s : tc.decision.schedules) {
      sched.push_back(fmt::format("{} {}-{} min {}", s.name, Minutes(s.window.from_minute),
                                  Minutes(s.window.to_minute), s.min));
    }
    t.AddRow({tc.name, std::to_string(tc.decision.min), std::to_string(tc.decision.max),
              tc.decision.mode == autoscale::Mode::kHpa ? "hpa" : "rules",
              FormatDuration(tc.interval), Metrics(tc),
              kActuators[static_cast<int>(tc.actuator.kind)], Join(sched, "; ")});
  }
  std::cout << f.config << ": ok, "
            << Plural(static_cast<int64_t>(cfg->targets.size()), "target", "targets")
            << (cfg->slurm ? ", Slurm power saving for " + cfg->slurm->nodes : "") << "\n";
  if (t.rows() > 0) std::cout << t.Render();
  return kExitOk;
}

int StatusCmd(const AutoscaleFlags& f) {
  std::string url = f.url;
  if (url.empty()) {
    Result<autoscale::AutoscaleConfig> cfg = autoscale::LoadAutoscaleConfig(f.config);
    if (!cfg.ok()) return Fail("autoscale status", cfg.status());
    if (cfg->listen.empty()) {
      return Fail("autoscale status",
                  InvalidArgument(fmt::format("{} has no listen: address; pass --url", f.config)));
    }
    std::string listen = cfg->listen;
    if (listen.starts_with(":") || listen.starts_with("0.0.0.0:")) {
      listen = "127.0.0.1:" + listen.substr(listen.rfind(':') + 1);
    }
    url = "http://" + listen;
  }
  Result<http::Response> resp =
      http::Get({.url = url + "/status", .deadline = std::chrono::seconds(10)});
  if (!resp.ok()) return Fail("autoscale status", resp.status());
  if (resp->status != 200) {
    return Fail("autoscale status",
                Unavailable(fmt::format("{}/status: HTTP {}: {}", url, resp->status, resp->body)));
  }
  Json doc = Json::parse(resp->body, nullptr, false);
  if (!doc.is_object()) {
    return Fail("autoscale status", DataLoss(url + "/status: the answer is not JSON"));
  }
  if (f.common.json) {
    std::cout << doc.dump(2) << "\n";
    return kExitOk;
  }
  Table t({"target", "current", "ready", "desired", "min", "max", "reason", "explanation"});
  for (size_t c = 1; c <= 5; ++c) t.SetAlign(c, Table::Align::kRight);
  for (const Json& tj : doc.value("targets", Json::array())) {
    const Json cap = tj.value("capacity", Json::object());
    const Json last = tj.value("last_decision", Json::object());
    auto num = [](const Json& j, const char* k) {
      return j.contains(k) && j[k].is_number() ? std::to_string(j[k].get<int64_t>()) : "-";
    };
    t.AddRow({tj.value("name", ""), num(cap, "current"), num(cap, "ready"), num(tj, "desired"),
              num(tj, "min"), num(tj, "max"), last.value("reason", "-"),
              last.value("explanation", "")});
  }
  if (doc.value("dry_run", false)) std::cout << "dry run: decisions are not applied\n";
  std::cout << t.Render();
  return kExitOk;
}

int Power(const AutoscaleFlags& f, autoscale::PowerAction action, std::string_view verb) {
  std::string command = "autoscale " + std::string(verb);
  std::string path = f.config;
  if (path == "autoscale.yaml") {
    const char* env = std::getenv("GANTRY_AUTOSCALE_CONFIG");
    path = env != nullptr && *env != '\0' ? env : "/etc/gantry/autoscale.yaml";
  }
  Result<autoscale::AutoscaleConfig> cfg = autoscale::LoadAutoscaleConfig(path);
  if (!cfg.ok()) return Fail(command, cfg.status());
  if (!cfg->slurm) {
    return Fail(command, InvalidArgument(fmt::format(
                             "{} has no slurm: section (nodes and vmss or commands)", path)));
  }
  Result<autoscale::PowerResult> r =
      autoscale::RunPowerAction(*cfg->slurm, action, f.hostlist, SystemClock());
  if (!r.ok()) return Fail(command, r.status());
  if (f.common.json) {
    std::cout << Json{{"acted", r->acted}, {"skipped", r->skipped}}.dump() << "\n";
  } else {
    std::cout << verb << ": " << (r->acted.empty() ? "-" : autoscale::CompressHostlist(r->acted))
              << (r->skipped.empty()
                      ? ""
                      : " (already so: " + autoscale::CompressHostlist(r->skipped) + ")")
              << "\n";
  }
  return kExitOk;
}

}  // namespace

void RegisterAutoscale(CLI::App& app, Action* action) {
  auto flags = std::make_shared<AutoscaleFlags>();
  CLI::App* as = app.add_subcommand(
      "autoscale",
      "Capacity that follows load, down to zero and back: VM scale sets, Kubernetes, gateway "
      "pools, Slurm power saving (gantry autoscale --help)");
  as->require_subcommand(1);
  auto set = [&](CLI::App* c, std::function<int(const AutoscaleFlags&)> fn) {
    AddCommonFlags(c, &flags->common);
    c->callback([flags, action, fn] {
      *action = [flags, fn] {
        if (!ApplyCommonFlags(flags->common)) return kExitUsage;
        return fn(*flags);
      };
    });
  };
  auto config = [&](CLI::App* c) {
    c->add_option("--config,-c", flags->config, "The autoscale file")->capture_default_str();
  };
  CLI::App* run = as->add_subcommand(
      "run", "Keep every target sized (a service: SIGHUP or an edit reloads, SIGTERM stops)");
  config(run);
  run->add_flag("--dry-run", flags->dry_run, "Decide and explain, change nothing");
  run->add_option("--grace-ms", flags->grace_ms, "How long a stop waits for an action in flight")
      ->capture_default_str();
  set(run, Run);
  CLI::App* check = as->add_subcommand("check", "Validate the file and print its targets");
  config(check);
  set(check, Check);
  CLI::App* status = as->add_subcommand(
      "status", "Each target's count, decision and why, from a running controller");
  config(status);
  status->add_option("--url", flags->url, "The controller (default: the file's listen address)");
  set(status, StatusCmd);
  struct Verb {
    const char* name;
    autoscale::PowerAction action;
    const char* help;
  };
  for (Verb v : {Verb{"slurm-resume", autoscale::PowerAction::kResume,
                      "Slurm ResumeProgram: start the nodes of HOSTLIST"},
                 Verb{"slurm-suspend", autoscale::PowerAction::kSuspend,
                      "Slurm SuspendProgram: stop the nodes of HOSTLIST"},
                 Verb{"slurm-resume-fail", autoscale::PowerAction::kResumeFail,
                      "Slurm ResumeFailProgram: remove nodes that did not come up"}}) {
    CLI::App* c = as->add_subcommand(v.name, v.help);
    // Slurm runs the program with the hostlist as its only argument, from
    // slurmctld's directory: the file comes from the environment or /etc.
    c->add_option("--config,-c", flags->config,
                  "The autoscale file (default: $GANTRY_AUTOSCALE_CONFIG, else "
                  "/etc/gantry/autoscale.yaml)");
    c->add_option("hostlist", flags->hostlist, "Slurm hostlist expression, e.g. gpu-[1-3]")
        ->required();
    autoscale::PowerAction a = v.action;
    std::string verb = v.name;
    set(c, [a, verb](const AutoscaleFlags& f) { return Power(f, a, verb); });
  }
}

}  // namespace gantry::cli
