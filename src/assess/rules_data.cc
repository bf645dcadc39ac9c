// Rules over the data services around a workspace: storage accounts
// (GANTRY-STORAGE-*), Key Vault (GANTRY-KV-*) and container registries
// (GANTRY-ACR-*).
#include <fmt/format.h>

#include "rule_util.h"

namespace gantry::assess::rule {
namespace {

Verdict BlobPublicAccess(const Resource& s, const RuleContext&) {
  // Explicit false, as PSRule asks: the default changed with the API version
  // (true before 2023-01-01), so an absent value means different things.
  return RequireBool(s, "properties.allowBlobPublicAccess", false, std::nullopt,
                     "set it to false so that no container can be made anonymous");
}

Verdict MinTls(const Resource& s, const RuleContext&) {
  Prop tls = Read(s, "properties.minimumTlsVersion");
  if (tls.unknown) return UnknownProp(tls);
  if (StringIs(tls.value, "TLS1_2") || StringIs(tls.value, "TLS1_3")) return Verdict::Pass();
  std::string why = tls.absent() ? " (older API versions default to TLS1_0)" : "";
  return Verdict::Fail(fmt::format("{} is {}{}; set it to 'TLS1_2'", tls.path, Show(tls), why),
                       tls.path);
}

Verdict HttpsOnly(const Resource& s, const RuleContext&) {
  Prop https = Read(s, "properties.supportsHttpsTrafficOnly");
  if (https.unknown) return UnknownProp(https);
  if (https.absent()) {
    // true by default from API version 2019-04-01 (as PSRule reads it).
    std::optional<std::string> api =
        AsString(s.body.contains("apiVersion") ? &s.body["apiVersion"] : nullptr);
    if (!api || *api >= "2019-04-01") return Verdict::Pass();
    return Verdict::Fail(fmt::format("{} is absent and apiVersion {} defaults it to false; set it "
                                     "to true",
                                     https.path, *api),
                         https.path);
  }
  if (AsBool(https.value) == true) return Verdict::Pass();
  return Verdict::Fail(fmt::format("{} is {}; set it to true", https.path, Show(https)),
                       https.path);
}

Verdict PurgeProtection(const Resource& kv, const RuleContext&) {
  return RequireBool(kv, "properties.enablePurgeProtection", true, false,
                     "set it to true so that deleted keys (the workspace's CMK) cannot be purged "
                     "before the retention period ends; it cannot be turned off again");
}

Verdict SoftDelete(const Resource& kv, const RuleContext&) {
  // Absent means true: the service turns soft delete on for new vaults and it
  // cannot be turned off once on.
  return RequireBool(kv, "properties.enableSoftDelete", true, true, "remove it or set it to true");
}

Verdict AdminUser(const Resource& acr, const RuleContext&) {
  return RequireBool(acr, "properties.adminUserEnabled", false, false,
                     "set it to false and pull with the workspace's managed identity (AcrPull)");
}

}  // namespace

std::vector<Rule> DataRules() {
  const std::vector<std::string> storage = {std::string(kStorage)};
  const std::vector<std::string> kv = {std::string(kKeyVault)};
  return {
      {
          .id = "GANTRY-STORAGE-001",
          .title = "Disallow anonymous blob access on storage accounts",
          .pillar = Pillar::kSecurity,
          .severity = Severity::kHigh,
          .types = storage,
          .condition = "properties.allowBlobPublicAccess is false. Absent fails (its default "
                       "depends on the API version).",
          .rationale = "azure-docs (prevent anonymous read access) and PSRule "
                       "Azure.Storage.BlobPublicAccess: training data and models in a workspace's "
                       "storage must never be readable without credentials.",
          .fix_arm = R"({"properties": {"allowBlobPublicAccess": false}})",
          .fix_terraform = "allow_nested_items_to_be_public = false",
          .references = {"PSRule Azure.Storage.BlobPublicAccess"},
          .help_uri =
              "https://learn.microsoft.com/azure/storage/blobs/anonymous-read-access-prevent",
          .check = BlobPublicAccess,
      },
      {
          .id = "GANTRY-STORAGE-002",
          .title = "Require TLS 1.2 or later on storage accounts",
          .pillar = Pillar::kSecurity,
          .severity = Severity::kHigh,
          .types = storage,
          .condition = "properties.minimumTlsVersion is 'TLS1_2' or 'TLS1_3'. Absent fails.",
          .rationale =
              "MCSB DP-3 (encrypt data in transit) and PSRule Azure.Storage.MinTLS: TLS 1.0 "
              "and 1.1 have known weaknesses.",
          .fix_arm = R"({"properties": {"minimumTlsVersion": "TLS1_2"}})",
          .fix_terraform = R"(min_tls_version = "TLS1_2")",
          .references = {"PSRule Azure.Storage.MinTLS", "Checkov CKV_AZURE_44"},
          .help_uri = "https://learn.microsoft.com/azure/storage/common/"
                      "transport-layer-security-configure-minimum-version",
          .check = MinTls,
      },
      {
          .id = "GANTRY-STORAGE-003",
          .title = "Accept only HTTPS on storage accounts",
          .pillar = Pillar::kSecurity,
          .severity = Severity::kMedium,
          .types = storage,
          .condition = "properties.supportsHttpsTrafficOnly is true, or absent with apiVersion "
                       "absent or at least 2019-04-01 (default true).",
          .rationale = "MCSB DP-3 and PSRule Azure.Storage.SecureTransfer: plain HTTP exposes "
                       "data and SAS tokens on the wire.",
          .fix_arm = R"({"properties": {"supportsHttpsTrafficOnly": true}})",
          .fix_terraform = "https_traffic_only_enabled = true  # 3.x: enable_https_traffic_only",
          .references = {"PSRule Azure.Storage.SecureTransfer", "Checkov CKV_AZURE_3"},
          .help_uri =
              "https://learn.microsoft.com/azure/storage/common/storage-require-secure-transfer",
          .check = HttpsOnly,
      },
      {
          .id = "GANTRY-KV-001",
          .title = "Turn on purge protection for Key Vaults",
          .pillar = Pillar::kReliability,
          .severity = Severity::kMedium,
          .types = kv,
          .condition = "properties.enablePurgeProtection is true.",
          .rationale = "azure-docs Key Vault soft delete and purge protection, and PSRule "
                       "Azure.KeyVault.PurgeProtect: a purged customer-managed key makes the "
                       "workspace's data unreadable for good; Azure ML requires purge protection "
                       "on the vault of its CMK.",
          .fix_arm = R"({"properties": {"enablePurgeProtection": true}})",
          .fix_terraform = "purge_protection_enabled = true",
          .references = {"PSRule Azure.KeyVault.PurgeProtect", "Checkov CKV_AZURE_110",
                         "Checkov CKV_AZURE_42"},
          .help_uri = "https://learn.microsoft.com/azure/key-vault/general/soft-delete-overview",
          .check = PurgeProtection,
      },
      {
          .id = "GANTRY-KV-002",
          .title = "Keep soft delete on for Key Vaults",
          .pillar = Pillar::kReliability,
          .severity = Severity::kMedium,
          .types = kv,
          .condition = "properties.enableSoftDelete is true or absent (the service default is "
                       "true).",
          .rationale = "azure-docs Key Vault soft delete and PSRule Azure.KeyVault.SoftDelete: a "
                       "deleted vault or key can be recovered during the retention period. PSRule "
                       "requires an explicit true; Gantry passes an absent value because the "
                       "service turns soft delete on when it is not set.",
          .fix_arm =
              R"({"properties": {"enableSoftDelete": true, "softDeleteRetentionInDays": 90}})",
          .fix_terraform =
              "soft_delete_retention_days = 90  # soft delete is always on in azurerm 3+",
          .references = {"PSRule Azure.KeyVault.SoftDelete", "Checkov CKV_AZURE_42"},
          .help_uri = "https://learn.microsoft.com/azure/key-vault/general/soft-delete-overview",
          .check = SoftDelete,
      },
      {
          .id = "GANTRY-ACR-001",
          .title = "Disable the admin user of container registries",
          .pillar = Pillar::kSecurity,
          .severity = Severity::kHigh,
          .types = {std::string(kRegistry)},
          .condition = "properties.adminUserEnabled is absent (default false) or false.",
          .rationale = "Azure ML security baseline IM-1 / azure-docs registry authentication and "
                       "PSRule Azure.ACR.AdminUser: the admin account is one shared password with "
                       "push rights; the workspace and its computes pull with managed identities.",
          .fix_arm = R"({"properties": {"adminUserEnabled": false}})",
          .fix_terraform = "admin_enabled = false",
          .references = {"PSRule Azure.ACR.AdminUser", "Checkov CKV_AZURE_137"},
          .help_uri = "https://learn.microsoft.com/azure/container-registry/"
                      "container-registry-authentication",
          .check = AdminUser,
      },
  };
}

}  // namespace gantry::assess::rule
