// ParseAzureMonitorMetrics: the `azure_monitor.metrics` block, its defaults
// and its errors (each naming file:line:col and the full key).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gantry/monitor/custom_metrics.h"
#include "gantry/monitor/shipper.h"

namespace gantry::monitor {
namespace {

using ::testing::HasSubstr;

Result<std::optional<AzureMonitorMetricsConfig>> Parse(std::string_view yaml) {
  ASSIGN_OR_RETURN(Config c, Config::LoadString(yaml, "m.yaml"));
  return ParseAzureMonitorMetrics(c);
}

std::string Error(std::string_view yaml) {
  auto r = Parse(yaml);
  EXPECT_FALSE(r.ok()) << yaml;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().message();
  return std::string(r.status().message());
}

constexpr char kGood[] = R"(azure_monitor:
  metrics:
    endpoint: https://westeurope.monitoring.azure.com
    resource_id: /subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm
    namespace: team/churn
    timeout: 3s
    max_attempts: 2
    credential: {type: environment_token, token_env: MY_TOKEN}
)";

TEST(AzureMonitorMetricsConfig, ReadsEveryField) {
  auto r = Parse(kGood);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->has_value());
  const AzureMonitorMetricsConfig& c = **r;
  EXPECT_EQ(c.options.endpoint, "https://westeurope.monitoring.azure.com");
  EXPECT_EQ(c.options.resource_id,
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm");
  EXPECT_EQ(c.namespace_, "team/churn");
  EXPECT_EQ(c.options.timeout, std::chrono::milliseconds(3000));
  EXPECT_EQ(c.options.max_attempts, 2);
  EXPECT_EQ(c.credential.kind, security::AzureIdentity::kEnvironmentToken);
  EXPECT_EQ(c.credential.token_env, "MY_TOKEN");
  EXPECT_EQ(c.credential.resource, kCustomMetricsResource);
}

TEST(AzureMonitorMetricsConfig, DefaultsAndAbsentBlocks) {
  auto r = Parse(
      "azure_monitor:\n  metrics:\n    endpoint: https://eastus.monitoring.azure.com\n"
      "    resource_id: /subscriptions/s/x\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->namespace_, "gantry/drift");
  EXPECT_EQ((*r)->options.timeout, std::chrono::milliseconds(10'000));
  EXPECT_EQ((*r)->credential.kind, security::AzureIdentity::kDefaultChain);
  EXPECT_EQ((*r)->credential.resource, kCustomMetricsResource);

  auto none = Parse("other: 1\n");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto logs_only = Parse("azure_monitor:\n  logs: {endpoint: https://x}\n");
  ASSERT_TRUE(logs_only.ok()) << logs_only.status().message();
  EXPECT_FALSE(logs_only->has_value());
  // Loopback test servers may be plain http.
  auto local = Parse(
      "azure_monitor:\n  metrics:\n    endpoint: http://127.0.0.1:8080\n"
      "    resource_id: /subscriptions/s/x\n");
  ASSERT_TRUE(local.ok()) << local.status().message();
}

TEST(AzureMonitorMetricsConfig, OneFileHoldsLogsAndMetrics) {
  constexpr char kBoth[] = R"(azure_monitor:
  logs:
    endpoint: https://dce.westeurope-1.ingest.monitor.azure.com
    rule_id: dcr-00112233445566778899aabbccddeeff
    stream: Custom-GantryAudit_CL
    spool_dir: /tmp/spool
    credential: {token_env: T}
  metrics:
    endpoint: https://westeurope.monitoring.azure.com
    resource_id: /subscriptions/s/x
)";
  auto c = Config::LoadString(kBoth, "both.yaml");
  ASSERT_TRUE(c.ok());
  auto m = ParseAzureMonitorMetrics(*c);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_TRUE(m->has_value());
  auto l = ParseAzureMonitorLogs(*c);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_TRUE(l->has_value());
}

TEST(AzureMonitorMetricsConfig, ErrorsNameFileLineAndKey) {
  const std::string head = "azure_monitor:\n  metrics:\n";
  const std::string rid = "    resource_id: /subscriptions/s/x\n";
  const std::string ep = "    endpoint: https://westeurope.monitoring.azure.com\n";

  std::string e = Error(head + rid);
  EXPECT_THAT(e, HasSubstr("key 'azure_monitor.metrics.endpoint'"));
  EXPECT_THAT(e, HasSubstr("is required"));
  EXPECT_THAT(e, HasSubstr("m.yaml"));

  e = Error(head + "    endpoint: ftp://westeurope.monitoring.azure.com\n" + rid);
  EXPECT_THAT(e, HasSubstr("m.yaml:3:15: key 'azure_monitor.metrics.endpoint'"));
  EXPECT_THAT(e, HasSubstr("not an https:// URL"));
  e = Error(head + "    endpoint: http://westeurope.monitoring.azure.com\n" + rid);
  EXPECT_THAT(e, HasSubstr("plain http:// only to 127.0.0.1"));

  e = Error(head + ep);
  EXPECT_THAT(e, HasSubstr("key 'azure_monitor.metrics.resource_id'"));
  EXPECT_THAT(e, HasSubstr("is required"));
  e = Error(head + ep + "    resource_id: resourceGroups/rg\n");
  EXPECT_THAT(e, HasSubstr("m.yaml:4:18: key 'azure_monitor.metrics.resource_id'"));
  EXPECT_THAT(e, HasSubstr("does not start with /subscriptions/"));

  e = Error(head + ep + rid + "    namespce: x\n");
  EXPECT_THAT(e, HasSubstr("m.yaml:5:5"));
  EXPECT_THAT(e, HasSubstr("did you mean 'azure_monitor.metrics.namespace'"));
  e = Error("azure_monitor:\n  metric: {}\n");
  EXPECT_THAT(e, HasSubstr("did you mean 'azure_monitor.metrics'"));

  e = Error(head + ep + rid + "    namespace: ''\n");
  EXPECT_THAT(e, HasSubstr("key 'azure_monitor.metrics.namespace'"));
  e = Error(head + ep + rid + "    timeout: 0s\n");
  EXPECT_THAT(e, HasSubstr("m.yaml:5:14: key 'azure_monitor.metrics.timeout': must be positive"));
  e = Error(head + ep + rid + "    max_attempts: 0\n");
  EXPECT_THAT(e, HasSubstr("key 'azure_monitor.metrics.max_attempts': 0 is out of range"));

  e = Error(head + ep + rid + "    credential: {type: magic}\n");
  EXPECT_THAT(e, HasSubstr("azure_monitor.metrics.credential.type"));
  EXPECT_THAT(e, HasSubstr("magic"));
  e = Error(head + ep + rid + "    credential: {type: environment_token}\n");
  EXPECT_THAT(e, HasSubstr("token_env"));
}

}  // namespace
}  // namespace gantry::monitor
