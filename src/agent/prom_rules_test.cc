// ExportPrometheusRules: the PromQL of each signal, and promtool's verdict on
// the output (`promtool check rules`, and `promtool test rules` evaluating
// the exported example rules on node_exporter/dcgm-exporter shaped series).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gantry/agent/rules.h"
#include "testing/gantry_cli.h"
#include "testing/temp_dir.h"

namespace gantry::agent {
namespace {

namespace fs = std::filesystem;

std::string Promtool() {
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string dir = p.substr(start, end - start);
    if (!dir.empty() && access((dir + "/promtool").c_str(), X_OK) == 0) return dir + "/promtool";
    start = end + 1;
  }
  return "";
}

struct ShellResult {
  int code = -1;
  std::string output;
};

ShellResult RunShell(const std::string& cmd) {
  gantry::testing::CliRun r = gantry::testing::RunShell(cmd);
  return {r.rc, r.out + r.err};
}

using gantry::testing::TempDir;

std::vector<Rule> MustParse(const std::string& yaml) {
  auto r = ParseRules(yaml, "test.yaml");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<Rule>{};
}

std::string ExprOf(const std::string& rule_yaml) {
  auto rules = MustParse(rule_yaml);
  if (rules.empty()) return "";
  auto e = PromQLForRule(rules[0]);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? *e : "";
}

TEST(AlertPromQL, PerSignalAndAggregation) {
  EXPECT_EQ(ExprOf("- {name: A, signal: cpu_utilization, aggregation: avg, window: 5m, "
                   "condition: '> 80'}"),
            "100 * (1 - sum without (cpu, mode) (rate(node_cpu_seconds_total{mode=~\"idle|iowait|"
            "steal\"}[5m])) / sum without (cpu, mode) (rate(node_cpu_seconds_total[5m])))");
  EXPECT_EQ(ExprOf("- {name: A, signal: 'network_receive_bytes_per_second{device=\"eth0\"}', "
                   "condition: '> 1'}"),
            "irate(node_network_receive_bytes_total{device!=\"lo\",device=\"eth0\"}[5m])");
  EXPECT_EQ(ExprOf("- {name: A, signal: disk_write_bytes_per_second, aggregation: max, "
                   "window: 10m, condition: '> 1'}"),
            "max_over_time((rate(node_disk_written_bytes_total[1m]))[10m:])");
  EXPECT_EQ(ExprOf("- {name: A, signal: 'gpu_temperature_celsius{gpu!=\"3\"}', aggregation: p95, "
                   "window: 2m, condition: '> 1'}"),
            "quantile_over_time(0.95, DCGM_FI_DEV_GPU_TEMP{gpu!=\"3\"}[2m])");
  EXPECT_EQ(ExprOf("- {name: A, signal: memory_used_percent, aggregation: min, window: 5m, "
                   "condition: '> 90'}"),
            "min_over_time((100 * (1 - node_memory_MemAvailable_bytes / "
            "node_memory_MemTotal_bytes))[5m:])");
  EXPECT_EQ(ExprOf("- {name: A, signal: filesystem_used_percent, condition: '> 90'}"),
            "100 * (1 - node_filesystem_avail_bytes / (node_filesystem_size_bytes > 0))");
  EXPECT_EQ(ExprOf("- {name: A, signal: gpu_memory_used_percent, condition: '> 90'}"),
            "100 * DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)");
  EXPECT_EQ(ExprOf("- {name: A, signal: load1, aggregation: avg, window: 15m, condition: '> 9'}"),
            "avg_over_time(node_load1[15m])");
}

TEST(AlertPromExport, DynamicRulesAreSkippedWithAReason) {
  auto rules = MustParse(R"(
- {name: Load, signal: load1, condition: '> 4', for: 90s, labels: {severity: warning}}
- name: Net
  signal: network_receive_bytes_per_second
  condition: {dynamic: {}}
)");
  std::vector<std::string> skipped;
  auto text = ExportPrometheusRules(rules, &skipped);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].rfind("Net: dynamic thresholds", 0), 0u) << skipped[0];
  EXPECT_NE(text->find("# skipped Net: dynamic"), std::string::npos) << *text;
  EXPECT_NE(text->find("alert: Load"), std::string::npos) << *text;
  EXPECT_NE(text->find("expr: node_load1 > 4"), std::string::npos) << *text;
  EXPECT_NE(text->find("for: 90s"), std::string::npos) << *text;
  EXPECT_EQ(text->find("alert: Net"), std::string::npos) << *text;
}

// Every signal and aggregation, checked by promtool.
TEST(AlertPromExport, PromtoolAcceptsEverySignalAndAggregation) {
  const std::string promtool = Promtool();
  ASSERT_FALSE(promtool.empty())
      << "promtool not found in PATH; install Debian's prometheus package (apt-get install "
         "prometheus) to run this test";
  const char* signals[] = {"cpu_utilization",
                           "load1",
                           "memory_used_percent",
                           "swap_used_percent",
                           "network_receive_bytes_per_second",
                           "network_transmit_bytes_per_second",
                           "disk_read_bytes_per_second",
                           "disk_write_bytes_per_second",
                           "'filesystem_used_percent{mountpoint!=\"/boot\"}'",
                           "gpu_utilization",
                           "'gpu_memory_used_percent{gpu=\"0\"}'",
                           "gpu_power_watts",
                           "gpu_temperature_celsius",
                           "gpu_xid_errors"};
  const char* aggs[] = {"last", "avg", "min", "max", "p95"};
  std::string yaml = "rules:\n";
  int n = 0;
  for (const char* s : signals) {
    for (const char* a : aggs) {
      yaml += "  - {name: R" + std::to_string(n++) + ", signal: " + s + ", aggregation: " + a +
              ", window: 5m, condition: '>= 1.5', for: 1m, labels: {severity: page}, "
              "annotations: {summary: 'v={{ $value }} on {{ $labels.instance }}'}}\n";
    }
  }
  auto rules = MustParse(yaml);
  ASSERT_EQ(rules.size(), std::size(signals) * std::size(aggs));
  auto text = ExportPrometheusRules(rules);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  TempDir dir;
  std::string path = dir.Write("all.rules.yml", *text);
  ShellResult r = RunShell(promtool + " check rules " + path);
  EXPECT_EQ(r.code, 0) << r.output << "\n" << *text;
  EXPECT_NE(r.output.find("SUCCESS: " + std::to_string(rules.size()) + " rules found"),
            std::string::npos)
      << r.output;

  // The check is real: a broken expression is rejected.
  std::string broken = *text;
  size_t at = broken.find("expr: ");
  ASSERT_NE(at, std::string::npos);
  broken.insert(at + 6, "sum by (");
  ShellResult bad = RunShell(promtool + " check rules " + dir.Write("broken.rules.yml", broken));
  EXPECT_NE(bad.code, 0) << bad.output;
}

// The exported example rules fire in Prometheus on exporter-shaped series as
// they do in the agent: promtool evaluates them with `test rules`.
TEST(AlertPromExport, ExampleRulesFireInPromtool) {
  const std::string promtool = Promtool();
  ASSERT_FALSE(promtool.empty())
      << "promtool not found in PATH; install Debian's prometheus package (apt-get install "
         "prometheus) to run this test";
  auto rules = LoadRulesFile(std::string(GANTRY_SOURCE_DIR) + "/examples/agent/rules.yaml");
  ASSERT_TRUE(rules.ok()) << rules.status().ToString();
  std::vector<std::string> skipped;
  auto text = ExportPrometheusRules(*rules, &skipped);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].rfind("NetworkReceiveAnomaly:", 0), 0u);

  TempDir dir;
  dir.Write("agent.rules.yml", *text);
  // One node: CPU 90% busy (user 54 s + idle 6 s per minute), /data 95% full
  // (/boot/efi too, but excluded by the rule), GPU 1 with XID 79, GPU 0 cool.
  const std::string test = R"(rule_files:
  - agent.rules.yml
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'node_cpu_seconds_total{cpu="0",mode="user",instance="n1",job="node"}'
        values: '0+54x40'
      - series: 'node_cpu_seconds_total{cpu="0",mode="idle",instance="n1",job="node"}'
        values: '0+6x40'
      - series: 'node_filesystem_size_bytes{device="/dev/md0",fstype="xfs",mountpoint="/data",instance="n1",job="node"}'
        values: '100x40'
      - series: 'node_filesystem_avail_bytes{device="/dev/md0",fstype="xfs",mountpoint="/data",instance="n1",job="node"}'
        values: '5x40'
      - series: 'node_filesystem_size_bytes{device="/dev/sda1",fstype="vfat",mountpoint="/boot/efi",instance="n1",job="node"}'
        values: '100x40'
      - series: 'node_filesystem_avail_bytes{device="/dev/sda1",fstype="vfat",mountpoint="/boot/efi",instance="n1",job="node"}'
        values: '1x40'
      - series: 'node_memory_MemTotal_bytes{instance="n1",job="node"}'
        values: '1000x40'
      - series: 'node_memory_MemAvailable_bytes{instance="n1",job="node"}'
        values: '500x40'
      - series: 'DCGM_FI_DEV_XID_ERRORS{gpu="1",instance="n1",job="dcgm"}'
        values: '0x9 79x30'
      - series: 'DCGM_FI_DEV_GPU_TEMP{gpu="0",instance="n1",job="dcgm"}'
        values: '60x40'
    alert_rule_test:
      - eval_time: 30m
        alertname: HostHighCpu
        exp_alerts:
          - exp_labels: {severity: warning, instance: n1, job: node}
            exp_annotations:
              summary: "CPU busy on n1"
              description: "CPU has averaged 90% over 5 minutes for 10 minutes."
      - eval_time: 30m
        alertname: HostDiskFull
        exp_alerts:
          - exp_labels: {severity: critical, instance: n1, job: node, device: /dev/md0, fstype: xfs, mountpoint: /data}
            exp_annotations:
              summary: "Filesystem /data is 95% full"
              description: "Less than 10% free on /data; checkpoints will start failing."
      - eval_time: 5m
        alertname: GpuXidError
        exp_alerts: []
      - eval_time: 12m
        alertname: GpuXidError
        exp_alerts:
          - exp_labels: {severity: critical, gpu: "1", instance: n1, job: dcgm}
            exp_annotations:
              summary: "XID 79 on GPU 1"
              description: "The driver reported XID 79; run `gantry health` and drain the node if it repeats."
      - eval_time: 30m
        alertname: HostMemoryPressure
        exp_alerts: []
      - eval_time: 30m
        alertname: GpuTemperatureHigh
        exp_alerts: []
)";
  std::string test_path = dir.Write("agent.test.yml", test);
  ShellResult r = RunShell(promtool + " test rules " + test_path);
  EXPECT_EQ(r.code, 0) << r.output << "\n" << *text;
}

}  // namespace
}  // namespace gantry::agent
