#include "gantry/autoscale/config.h"

#include <gtest/gtest.h>

#include "gantry/core/config.h"

namespace gantry::autoscale {
namespace {

Result<AutoscaleConfig> Parse(const std::string& yaml) {
  ASSIGN_OR_RETURN(Config c, Config::LoadString(yaml, "autoscale.yaml"));
  return ParseAutoscaleConfig(c);
}

std::string Error(const std::string& yaml) {
  Result<AutoscaleConfig> r = Parse(yaml);
  EXPECT_FALSE(r.ok()) << yaml;
  return r.ok() ? "" : r.status().message();
}

constexpr const char* kFull = R"(
listen: 127.0.0.1:9310
state_dir: /tmp/as
targets:
  - name: llm
    min: 0
    max: 8
    interval: 10s
    metrics:
      - name: queue
        gateway: {url: "http://127.0.0.1:8080", pool: llm}
        target: 4
        activation: 0.5
      - name: busy
        prometheus: {url: "http://127.0.0.1:9090", query: 'avg(DCGM_FI_DEV_GPU_UTIL)', ignore_null_values: false}
        type: utilization
        target: 70
      - name: jobs
        command: [/bin/echo, "3"]
    behavior:
      scale_up: {stabilization: 0s, policies: [{type: pods, value: 2, period: 30s}]}
      scale_down: {stabilization: 120s, select: min, tolerance: 0.2}
    cooldown: 600s
    fallback: {failure_threshold: 3, replicas: 2}
    schedules:
      - {name: office, days: mon-fri, from: "08:00", to: "20:00", utc_offset: "+01:00", min: 2}
    floor_metric: jobs
    scale_in:
      drain: {gateway: "http://127.0.0.1:8080", timeout: 30s}
      victim_check: [/bin/true, "{instance}"]
    actuator:
      vmss:
        subscription: sub
        resource_group: rg
        name: pool
        credential: {type: service_principal, tenant_id: t, client_id: c, client_secret_env: SECRET}
  - name: batch
    max: 10
    mode: rules
    metrics:
      - name: cpu
        agent: {url: "http://10.0.0.4:9100", signal: cpu_utilization}
    profiles:
      - name: default
        min: 1
        max: 10
        default: 2
        rules:
          - {metric: cpu, aggregation: Average, window: 5m, operator: GreaterThan, threshold: 70, direction: Increase, type: ChangeCount, value: 2, cooldown: 5m}
          - {metric: cpu, operator: "<", threshold: 30, direction: Decrease, value: 1, cooldown: 10m}
      - name: night
        min: 0
        max: 2
        default: 0
        recurrence: {days: [sat, sun], from: "00:00", to: "24:00"}
    actuator:
      kubernetes: {kind: StatefulSet, namespace: ml, name: batch, in_cluster: true}
slurm:
  nodes: "cloud-[1-4]"
  resume_command: [/usr/local/bin/start, "{node}"]
  suspend_command: [/usr/local/bin/stop, "{node}"]
  resume_timeout: 90s
)";

TEST(AutoscaleConfig, ParsesEveryPart) {
  Result<AutoscaleConfig> r = Parse(kFull);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->targets.size(), 2u);
  const TargetConfig& llm = r->targets[0];
  EXPECT_EQ(llm.interval, std::chrono::seconds(10));
  EXPECT_EQ(llm.decision.min, 0);
  EXPECT_EQ(llm.decision.max, 8);
  ASSERT_EQ(llm.metrics.size(), 3u);
  EXPECT_EQ(llm.metrics[0].kind, MetricSourceConfig::Kind::kGateway);
  EXPECT_EQ(llm.metrics[0].signal, "in_flight_and_pending");
  EXPECT_FALSE(llm.metrics[1].ignore_null_values);
  // The command metric has no target: it is the floor, not a scaling metric.
  ASSERT_EQ(llm.decision.hpa.metrics.size(), 2u);
  EXPECT_DOUBLE_EQ(llm.decision.hpa.metrics[0].activation, 0.5);
  EXPECT_EQ(llm.decision.hpa.metrics[1].type, TargetType::kUtilization);
  EXPECT_EQ(llm.decision.floor_metric, "jobs");
  ASSERT_EQ(llm.decision.hpa.up.policies.size(), 1u);
  EXPECT_EQ(llm.decision.hpa.up.policies[0].period, std::chrono::seconds(30));
  EXPECT_EQ(llm.decision.hpa.down.stabilization, std::chrono::seconds(120));
  EXPECT_EQ(llm.decision.hpa.down.select, SelectPolicy::kMin);
  // Unset parts keep the HPA's defaults.
  EXPECT_EQ(llm.decision.hpa.down.policies.size(), DefaultScaleDown().policies.size());
  EXPECT_EQ(llm.decision.hpa.cooldown, std::chrono::seconds(600));
  EXPECT_EQ(llm.decision.hpa.fallback.replicas, 2);
  ASSERT_EQ(llm.decision.schedules.size(), 1u);
  EXPECT_EQ(llm.decision.schedules[0].window.days, 0x3e);  // Monday .. Friday
  EXPECT_EQ(llm.decision.schedules[0].window.from_minute, 8 * 60);
  EXPECT_EQ(llm.decision.schedules[0].window.utc_offset_minutes, 60);
  EXPECT_EQ(llm.scale_in.drain_timeout, std::chrono::seconds(30));
  EXPECT_EQ(llm.actuator.kind, ActuatorConfig::Kind::kVmss);
  EXPECT_EQ(llm.actuator.vmss.credential.client_secret_env, "SECRET");
  EXPECT_EQ(llm.actuator.vmss.credential.kind, security::AzureIdentity::kServicePrincipal);

  const TargetConfig& batch = r->targets[1];
  EXPECT_EQ(batch.decision.mode, Mode::kRules);
  ASSERT_EQ(batch.decision.profiles.size(), 2u);
  ASSERT_EQ(batch.decision.profiles[0].rules.size(), 2u);
  EXPECT_EQ(batch.decision.profiles[0].rules[1].op, Op::kLessThan);
  EXPECT_EQ(batch.decision.profiles[0].rules[1].direction, Direction::kDecrease);
  EXPECT_EQ(batch.decision.profiles[0].rules[1].cooldown, std::chrono::minutes(10));
  ASSERT_TRUE(batch.decision.profiles[1].recurrence.has_value());
  EXPECT_EQ(batch.decision.profiles[1].recurrence->days, 0x41);
  EXPECT_EQ(batch.actuator.kind, ActuatorConfig::Kind::kKubernetes);
  EXPECT_EQ(batch.actuator.kubernetes.kind, "StatefulSet");

  ASSERT_TRUE(r->slurm.has_value());
  EXPECT_FALSE(r->slurm->use_vmss);
  EXPECT_EQ(r->slurm->resume_timeout, std::chrono::seconds(90));
}

TEST(AutoscaleConfig, GatewayActuatorDefaults) {
  Result<AutoscaleConfig> r = Parse(R"(
state_dir: /var/tmp/as
targets:
  - name: m
    max: 2
    metrics: [{name: q, gateway: {url: "http://127.0.0.1:1", pool: p, signal: held}, target: 1}]
    actuator:
      gateway: {url: "http://127.0.0.1:1", pool: p, start: [python3, s.py, "{port}"], ports: 30000-30010}
)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const GatewayActuatorConfig& g = r->targets[0].actuator.gateway;
  EXPECT_EQ(g.backend_prefix, "m-");
  EXPECT_EQ(g.port_min, 30000);
  EXPECT_EQ(g.port_max, 30010);
  EXPECT_EQ(g.state_dir, "/var/tmp/as/m");
}

TEST(AutoscaleConfig, ErrorsNameTheKeyAndLine) {
  const std::string head = "targets:\n  - name: a\n";
  const std::string metric = "    metrics: [{name: q, command: [/bin/echo, '1'], target: 1}]\n";
  const std::string act = "    actuator: {command: {read: [/bin/echo, '1'], scale: [/bin/true]}}\n";
  struct Case {
    std::string yaml;
    std::string want;
  } cases[] = {
      {head + "    min: 3\n    max: 2\n" + metric + act,
       "autoscale.yaml:4:10: key 'targets.0.max': 2 is below min 3"},
      {head + metric + act, "key 'targets.0.max': is required"},
      {head + "    max: 2\n    mxa: 3\n" + metric + act,
       "unknown key 'targets.0.mxa' (did you mean 'targets.0.max'?)"},
      {head + "    max: 2\n" + metric, "key 'targets.0.actuator': is required"},
      {head + "    max: 2\n    metrics: [{name: q, target: 1}]\n" + act,
       "needs exactly one of prometheus, gateway, agent or command (found 0)"},
      {head +
           "    max: 2\n    metrics: [{name: q, gateway: {url: 'http://x:1', pool: p, signal: "
           "depth}, target: 1}]\n" +
           act,
       "unknown gateway signal 'depth'"},
      {head + "    max: 2\n    metrics: [{name: q, command: [/bin/echo], target: 0}]\n" + act,
       "key 'targets.0.metrics.0.target': expected a number > 0"},
      {head + "    max: 2\n" + metric + "    floor_metric: nope\n" + act, "no metric named 'nope'"},
      {head + "    max: 2\n" + metric +
           "    behavior: {scale_up: {policies: [{type: pods, value: 1, period: 1h}]}}\n" + act,
       "expected 1 s .. 1800 s"},
      {head + "    max: 2\n" + metric + "    schedules: [{days: funday, min: 1}]\n" + act,
       "unknown day 'funday'"},
      {head + "    max: 2\n" + metric + "    schedules: [{from: '8am', min: 1}]\n" + act,
       "expected a time of day HH:MM"},
      {head + "    max: 2\n" + metric + "    schedules: [{from: '08:00'}]\n" + act,
       "key 'targets.0.schedules.0.min': is required"},
      {head + "    max: 2\n" + metric + "    actuator: {command: {read: [/bin/echo]}, vmss: {}}\n",
       "expected exactly one of vmss, kubernetes, gateway or command"},
      {head + "    max: 2\n" + metric + "    actuator: {command: {read: /bin/echo, scale: [x]}}\n",
       "expected a command as a list of arguments"},
      {head + "    max: 2\n" + metric +
           "    actuator: {vmss: {subscription: s, resource_group: r, name: n, credential: "
           "{type: service_principal, tenant_id: t}}}\n",
       "type service_principal needs client_id"},
      {head + "    max: 2\n" + metric + "    actuator: {kubernetes: {name: x}}\n",
       "expected exactly one of kubeconfig: FILE or in_cluster: true"},
      {head + "    max: 2\n    mode: rules\n" + metric + act, "remove target"},
      {head + "    max: 2\n    mode: rules\n    metrics: [{name: q, command: [/bin/echo]}]\n" + act,
       "mode: rules needs at least one profile"},
      {head +
           "    max: 2\n    mode: rules\n    metrics: [{name: q, command: [/bin/echo]}]\n"
           "    profiles: [{name: p, max: 2, rules: [{metric: x, operator: '>', threshold: 1, "
           "direction: Increase}]}]\n" +
           act,
       "no metric named 'x' in this target's metrics"},
      {head +
           "    max: 2\n    mode: rules\n    metrics: [{name: q, command: [/bin/echo]}]\n"
           "    profiles: [{name: p, max: 2, rules: [{metric: q, operator: '~', threshold: 1, "
           "direction: Increase}]}]\n" +
           act,
       "unknown operator '~'"},
      {head +
           "    max: 2\n    mode: rules\n    metrics: [{name: q, command: [/bin/echo]}]\n"
           "    profiles: [{name: p, max: 2, rules: [{metric: q, operator: '>', threshold: 1, "
           "direction: Increase, cooldown: 10s}]}]\n" +
           act,
       "expected 1 min .. 1 week"},
      {head +
           "    max: 2\n    mode: rules\n    metrics: [{name: q, command: [/bin/echo]}]\n"
           "    profiles: [{name: p, max: 2, recurrence: {days: mon}}]\n" +
           act,
       "expected exactly one default profile"},
      {head + "    max: 2\n" + metric + act + "  - name: a\n    max: 1\n" + metric + act,
       "a second target named 'a'"},
      {"listen: x\n", "nothing to scale"},
      {"slurm: {nodes: 'n[1-2]', resume_command: [/bin/true]}\n",
       "key 'slurm.suspend_command': expected a command"},
  };
  for (const Case& c : cases) {
    std::string e = Error(c.yaml);
    EXPECT_NE(e.find(c.want), std::string::npos)
        << "want: " << c.want << "\ngot: " << e << "\nyaml:\n"
        << c.yaml;
  }
}

}  // namespace
}  // namespace gantry::autoscale
