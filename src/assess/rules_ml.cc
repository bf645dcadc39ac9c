// Rules over Machine Learning workspaces and online deployments (GANTRY-ML-*).
// docs/assess.md (Rules) explains each decision, in particular where Gantry and
// PSRule, Checkov or Azure Policy read the same property differently.
#include <fmt/format.h>

#include "gantry/core/text.h"
#include "rule_util.h"

namespace gantry::assess::rule {
namespace {

// --- sensitivity and environment, read from tags ------------------------------

// Tag names that carry a data classification, and the values that mean the
// workspace holds sensitive data (compared lower-case, separators ignored).
constexpr std::string_view kClassificationTags[] = {"data-classification", "dataClassification",
                                                    "data_classification", "classification"};

std::string Squash(std::string_view s) {
  std::string out;
  for (char c : AsciiLower(s)) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) out += c;
  }
  return out;
}

// The classification tag that marks `ws` sensitive ("tags.data-classification is
// 'Confidential'"), or "" when none does.
std::string SensitiveTag(const Resource& ws) {
  for (std::string_view name : kClassificationTags) {
    const std::string* v = ws.Tag(name);
    if (v == nullptr) continue;
    std::string s = Squash(*v);
    if (s == "confidential" || s == "highlyconfidential" || s == "restricted" ||
        s == "highlyrestricted" || s == "secret") {
      return fmt::format("tags.{} is '{}'", name, *v);
    }
  }
  return "";
}

// Why `ws` holds sensitive data ("" when nothing says so): a classification tag
// or properties.hbiWorkspace true.
std::string SensitiveBecause(const Resource& ws) {
  std::string tag = SensitiveTag(ws);
  if (!tag.empty()) return tag;
  if (AsBool(ws.Get("properties.hbiWorkspace")) == true) return "properties.hbiWorkspace is true";
  return "";
}

enum EnvBits { kEnvNone = 0, kEnvProd = 1, kEnvResearch = 2 };

// Classifies tags.environment / tags.env: each word of the value counts, so
// "prod-research" says both (and is itself a finding).
int EnvironmentOf(const Resource& r, std::string* shown) {
  for (std::string_view name : {"environment", "env"}) {
    const std::string* v = r.Tag(name);
    if (v == nullptr) continue;
    int bits = kEnvNone;
    std::string word;
    std::string lower = AsciiLower(*v) + " ";
    for (char c : lower) {
      if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
        word += c;
        continue;
      }
      if (word == "prod" || word == "production" || word == "prd" || word == "live") {
        bits |= kEnvProd;
      } else if (word == "research" || word == "dev" || word == "development" ||
                 word == "experiment" || word == "experimental" || word == "exp" ||
                 word == "sandbox" || word == "lab" || word == "poc") {
        bits |= kEnvResearch;
      }
      word.clear();
    }
    if (shown) *shown = fmt::format("tags.{} is '{}'", name, *v);
    return bits;
  }
  return kEnvNone;
}

std::string_view EnvName(int bits) {
  return bits == kEnvProd ? "production" : bits == kEnvResearch ? "research" : "both";
}

// --- predicates --------------------------------------------------------------

Verdict PublicAccess(const Resource& ws, const RuleContext&) {
  Prop pna = Read(ws, "properties.publicNetworkAccess");
  Prop behind = Read(ws, "properties.allowPublicAccessWhenBehindVnet");
  if (pna.unknown) return UnknownProp(pna);
  if (behind.unknown) return UnknownProp(behind);
  if (!StringIs(pna.value, "Disabled")) {
    std::string why = pna.absent() ? " (the service then allows public access)" : "";
    return Verdict::Fail(fmt::format("{} is {}{}; set it to 'Disabled' and reach the workspace "
                                     "through a private endpoint",
                                     pna.path, Show(pna), why),
                         pna.path);
  }
  if (AsBool(behind.value) == true) {
    return Verdict::Fail(fmt::format("{} is true, which reopens public access behind the VNet; "
                                     "remove it or set it to false",
                                     behind.path),
                         behind.path);
  }
  return Verdict::Pass();
}

bool GroupIdsAllowWorkspace(const Json* groups) {
  if (groups == nullptr || !groups->is_array() || groups->empty()) return true;
  for (const Json& g : *groups) {
    if (StringIs(&g, "amlworkspace")) return true;
  }
  return false;
}

Verdict PrivateEndpoint(const Resource& ws, const RuleContext& ctx) {
  Prop conns = Read(ws, "properties.privateEndpointConnections");
  if (conns.unknown) return UnknownProp(conns);
  std::vector<std::string> states;
  auto approved = [&states](const Json& c) {
    const Json* st = nullptr;
    if (c.is_object()) {
      auto p = c.find("properties");
      if (p != c.end() && p->is_object()) {
        auto s = p->find("privateLinkServiceConnectionState");
        if (s != p->end() && s->is_object()) {
          auto v = s->find("status");
          if (v != s->end()) st = &*v;
        }
      }
    }
    if (StringIs(st, "Approved")) return true;
    states.push_back(st && st->is_string() ? st->get<std::string>() : "no status");
    return false;
  };
  if (conns.value && conns.value->is_array()) {
    for (const Json& c : *conns.value) {
      if (approved(c)) return Verdict::Pass();
    }
  }
  for (const Resource* c : ctx.ChildrenOf(
           ws, "Microsoft.MachineLearningServices/workspaces/privateEndpointConnections")) {
    if (approved(c->body)) return Verdict::Pass();
  }
  // A template deploys the endpoint instead; an automatic connection
  // (privateLinkServiceConnections) is approved on creation when the deployer
  // may approve it, a manual one waits for the workspace owner.
  bool manual = false;
  for (const Resource* pe : ctx.OfType(kPrivateEndpoint)) {
    for (std::string_view list :
         {"privateLinkServiceConnections", "manualPrivateLinkServiceConnections"}) {
      const Json* arr = pe->Get(fmt::format("properties.{}", list));
      if (arr == nullptr || !arr->is_array()) continue;
      for (const Json& c : *arr) {
        if (!c.is_object() || !c.contains("properties") || !c["properties"].is_object()) continue;
        const Json& p = c["properties"];
        std::optional<std::string> target =
            AsString(p.contains("privateLinkServiceId") ? &p["privateLinkServiceId"] : nullptr);
        if (!target || !RefersTo(ws, *target)) continue;
        if (!GroupIdsAllowWorkspace(p.contains("groupIds") ? &p["groupIds"] : nullptr)) continue;
        if (list == "manualPrivateLinkServiceConnections") {
          manual = true;
        } else {
          return Verdict::Pass();
        }
      }
    }
  }
  if (manual) {
    return Verdict::Unknown(
        "the private endpoint to this workspace is a manual connection, approved only after "
        "deployment; assess the deployed workspace's properties.privateEndpointConnections",
        "properties.privateEndpointConnections");
  }
  std::string seen = states.empty() ? "no private endpoint connection"
                                    : "connections with status " + Join(states, ", ");
  return Verdict::Fail(
      fmt::format(
          "{} has {} and the input deploys no Microsoft.Network/privateEndpoints with "
          "groupId 'amlworkspace' for it; add a private endpoint and approve its connection",
          conns.path, seen),
      conns.path);
}

Verdict UserAssignedIdentity(const Resource& ws, const RuleContext&) {
  Prop type = Read(ws, "identity.type");
  Prop ids = Read(ws, "identity.userAssignedIdentities");
  Prop primary = Read(ws, "properties.primaryUserAssignedIdentity");
  for (const Prop* p : {&type, &ids, &primary}) {
    if (p->unknown) return UnknownProp(*p);
  }
  std::optional<std::string> t = AsString(type.value);
  if (!t || AsciiLower(*t).find("userassigned") == std::string::npos) {
    return Verdict::Fail(fmt::format("{} is {}; set it to 'UserAssigned' with the identity in "
                                     "identity.userAssignedIdentities",
                                     type.path, Show(type)),
                         type.path);
  }
  if (!HasValue(ids.value)) {
    return Verdict::Fail(
        fmt::format("{} is {}; list the user-assigned identity's resource id", ids.path, Show(ids)),
        ids.path);
  }
  if (!HasValue(primary.value)) {
    return Verdict::Fail(fmt::format("{} is {}; set it to the resource id of the user-assigned "
                                     "identity the workspace should use",
                                     primary.path, Show(primary)),
                         primary.path);
  }
  return Verdict::Pass();
}

// Shared by the CMK rules: "" when CMK is on with a key, else what is missing.
std::string CmkGap(const Resource& ws, bool* unknown) {
  Prop status = Read(ws, "properties.encryption.status");
  Prop key = Read(ws, "properties.encryption.keyVaultProperties.keyIdentifier");
  Prop vault = Read(ws, "properties.encryption.keyVaultProperties.keyVaultArmId");
  if (status.unknown || key.unknown || vault.unknown) {
    *unknown = true;
    return "";
  }
  if (!StringIs(status.value, "Enabled")) {
    return fmt::format(
        "{} is {}; set it to 'Enabled' with keyVaultProperties.keyVaultArmId and "
        ".keyIdentifier naming your key",
        status.path, Show(status));
  }
  if (!HasValue(key.value)) return fmt::format("{} is {}; name the key", key.path, Show(key));
  if (!HasValue(vault.value)) {
    return fmt::format("{} is {}; name the Key Vault", vault.path, Show(vault));
  }
  return "";
}

Verdict CustomerManagedKey(const Resource& ws, const RuleContext&) {
  // Policy ba769a63 leaves out kind 'project': a Foundry project uses its hub's encryption.
  if (StringIs(ws.Get("kind"), "project")) return Verdict::NotApplicable();
  bool unknown = false;
  std::string gap = CmkGap(ws, &unknown);
  if (unknown)
    return Verdict::Unknown("properties.encryption is not known before deployment",
                            "properties.encryption");
  if (gap.empty()) return Verdict::Pass();
  return Verdict::Fail(gap, "properties.encryption");
}

Verdict SensitiveData(const Resource& ws, const RuleContext&) {
  Prop hbi = Read(ws, "properties.hbiWorkspace");
  if (hbi.unknown) return UnknownProp(hbi);
  std::string because = SensitiveBecause(ws);
  if (because.empty()) return Verdict::NotApplicable();
  std::vector<std::string> gaps;
  if (AsBool(hbi.value) != true) {
    gaps.push_back(fmt::format("{} is {}; set it to true", hbi.path, Show(hbi)));
  }
  bool unknown = false;
  std::string cmk = CmkGap(ws, &unknown);
  if (unknown)
    return Verdict::Unknown("properties.encryption is not known before deployment",
                            "properties.encryption");
  if (!cmk.empty()) gaps.push_back(cmk);
  if (gaps.empty()) return Verdict::Pass();
  return Verdict::Fail(fmt::format("{} (sensitive data), but {}", because, Join(gaps, "; and ")),
                       AsBool(hbi.value) != true ? hbi.path : "properties.encryption");
}

Verdict SensitiveStorage(const Resource& ws, const RuleContext& ctx) {
  if (ws.IsUnknown("properties.hbiWorkspace"))
    return UnknownProp(Read(ws, "properties.hbiWorkspace"));
  std::string because = SensitiveBecause(ws);
  if (because.empty()) return Verdict::NotApplicable();
  Prop sa = Read(ws, "properties.storageAccount");
  if (sa.unknown) return UnknownProp(sa);
  std::optional<std::string> ref = AsString(sa.value);
  if (!ref || ref->empty()) {
    return Verdict::Unknown(
        fmt::format("{} is {}; cannot find the workspace's storage account", sa.path, Show(sa)),
        sa.path);
  }
  const Resource* st = Resolve(ctx, *ref, kStorage);
  if (st == nullptr) {
    return Verdict::Unknown(fmt::format("the storage account '{}' is not in the input; include it "
                                        "to check its properties.publicNetworkAccess",
                                        *ref),
                            sa.path);
  }
  Prop pna = Read(*st, "properties.publicNetworkAccess");
  if (pna.unknown) return UnknownProp(pna);
  if (StringIs(pna.value, "Disabled")) return Verdict::Pass();
  return Verdict::Fail(fmt::format("{} (sensitive data), but its storage account '{}' has "
                                   "properties.publicNetworkAccess {}; set it to 'Disabled'",
                                   because, st->name, Show(pna)),
                       sa.path);
}

Verdict ManagedNetworkMode(const Resource& ws, const RuleContext&) {
  Prop mode = Read(ws, "properties.managedNetwork.isolationMode");
  if (mode.unknown) return UnknownProp(mode);
  if (StringIs(mode.value, "AllowOnlyApprovedOutbound")) return Verdict::Pass();
  std::string why = mode.absent() ? " (the default is 'Disabled': no managed network)" : "";
  return Verdict::Fail(fmt::format("{} is {}{}; set it to 'AllowOnlyApprovedOutbound' and add "
                                   "outbound rules for what jobs must reach",
                                   mode.path, Show(mode), why),
                       mode.path);
}

Verdict OutboundPrivateEndpointRule(const Resource& ws, const RuleContext& ctx) {
  Prop mode = Read(ws, "properties.managedNetwork.isolationMode");
  if (mode.unknown) return UnknownProp(mode);
  if (!StringIs(mode.value, "AllowOnlyApprovedOutbound") &&
      !StringIs(mode.value, "AllowInternetOutbound")) {
    return Verdict::NotApplicable();  // no managed network: GANTRY-ML-007 reports it
  }
  Prop rules = Read(ws, "properties.managedNetwork.outboundRules");
  if (rules.unknown) return UnknownProp(rules);
  auto is_pe = [](const Json& r) {
    if (!r.is_object()) return false;
    auto t = r.find("type");
    if (t == r.end()) {
      auto p = r.find("properties");
      if (p == r.end() || !p->is_object()) return false;
      t = p->find("type");
      if (t == p->end()) return false;
    }
    return StringIs(&*t, "PrivateEndpoint");
  };
  if (rules.value && (rules.value->is_object() || rules.value->is_array())) {
    for (const Json& r : *rules.value) {
      if (is_pe(r)) return Verdict::Pass();
    }
  }
  for (const Resource* r :
       ctx.ChildrenOf(ws, "Microsoft.MachineLearningServices/workspaces/outboundRules")) {
    if (is_pe(r->body)) return Verdict::Pass();
  }
  return Verdict::Fail(fmt::format("{} has no rule of type 'PrivateEndpoint'; reach the storage, "
                                   "Key Vault and registries jobs use through private endpoint "
                                   "outbound rules",
                                   rules.path),
                       rules.path);
}

Verdict V1LegacyMode(const Resource& ws, const RuleContext&) {
  return RequireBool(ws, "properties.v1LegacyMode", false, false,
                     "set it to false (or remove it) so that the v2 API stays inside the "
                     "workspace's network isolation");
}

constexpr int kRequiredRetentionDays = 365;  // Policy afe0c3be's default

Verdict DiagnosticSettings(const Resource& ws, const RuleContext& ctx) {
  std::vector<const Resource*> settings = ctx.ScopedTo(ws, kDiagnostics);
  if (settings.empty()) {
    if (ws.origin == Origin::kLive) {
      // A live workspace document never carries its diagnostic settings.
      return Verdict::Unknown(
          "diagnostic settings are separate resources; add the output of `az monitor "
          "diagnostic-settings list --resource <workspace id>` to the input",
          "");
    }
    return Verdict::Fail(
        "no Microsoft.Insights/diagnosticSettings is scoped to this workspace; add one with an "
        "enabled log (categoryGroup 'allLogs') sent to a Log Analytics workspace",
        "");
  }
  std::vector<std::string> why;
  for (const Resource* d : settings) {
    Prop logs = Read(*d, "properties.logs");
    if (logs.unknown) return UnknownProp(logs);
    bool dest = false;
    for (std::string_view k :
         {"properties.workspaceId", "properties.storageAccountId",
          "properties.eventHubAuthorizationRuleId", "properties.marketplacePartnerId"}) {
      if (d->IsUnknown(k) || HasValue(d->Get(k))) dest = true;
    }
    if (!dest) {
      why.push_back(
          fmt::format("'{}' has no destination (properties.workspaceId, storageAccountId or "
                      "eventHubAuthorizationRuleId)",
                      d->name));
      continue;
    }
    bool enabled_log = false, short_retention = false;
    if (logs.value && logs.value->is_array()) {
      for (const Json& l : *logs.value) {
        if (!l.is_object()) continue;
        auto en = l.find("enabled");
        if (en == l.end() || AsBool(&*en) != true) continue;
        bool named = (l.contains("category") && HasValue(&l["category"])) ||
                     (l.contains("categoryGroup") && HasValue(&l["categoryGroup"]));
        if (!named) continue;
        // A retention policy only limits storage-account destinations; 0 days keeps
        // logs forever. Without one, retention is the destination's.
        auto rp = l.find("retentionPolicy");
        if (rp != l.end() && rp->is_object() && rp->contains("enabled") &&
            AsBool(&(*rp)["enabled"]) == true) {
          std::optional<double> days = AsNumber(rp->contains("days") ? &(*rp)["days"] : nullptr);
          if (days && *days != 0 && *days < kRequiredRetentionDays) {
            short_retention = true;
            continue;
          }
        }
        enabled_log = true;
      }
    }
    if (enabled_log) return Verdict::Pass();
    why.push_back(
        short_retention
            ? fmt::format(
                  "'{}' keeps logs fewer than {} days (properties.logs[].retentionPolicy.days)",
                  d->name, kRequiredRetentionDays)
            : fmt::format("'{}' has no enabled log in properties.logs", d->name));
  }
  return Verdict::Fail(fmt::format("diagnostic setting {}; enable a log category or categoryGroup "
                                   "'allLogs' kept at least {} days (or 0 = forever)",
                                   Join(why, ", "), kRequiredRetentionDays),
                       "properties.logs");
}

Verdict SeparateEnvironments(const Resource& ws, const RuleContext& ctx) {
  std::string ws_shown;
  int ws_env = EnvironmentOf(ws, &ws_shown);
  if (ws_env == (kEnvProd | kEnvResearch)) {
    return Verdict::Fail(fmt::format("{}, which names both research and production; use one "
                                     "workspace per environment and tag each with one",
                                     ws_shown),
                         "tags.environment");
  }
  int seen = kEnvNone;
  std::vector<std::string> prod, research;
  for (const Resource* c : ctx.ChildrenOf(ws, kCompute)) {
    int e = EnvironmentOf(*c, nullptr);
    seen |= e;
    if (e & kEnvProd) prod.push_back(c->name);
    if (e & kEnvResearch) research.push_back(c->name);
  }
  if (ws_env != kEnvNone && (seen & ~ws_env) != 0) {
    const std::vector<std::string>& other = ws_env == kEnvProd ? research : prod;
    return Verdict::Fail(fmt::format("{} ({}) but compute {} is tagged for {}; move it to a "
                                     "workspace of its own environment",
                                     ws_shown, EnvName(ws_env), Join(other, ", "),
                                     EnvName(ws_env == kEnvProd ? kEnvResearch : kEnvProd)),
                         "tags.environment");
  }
  if (ws_env == kEnvNone && seen == (kEnvProd | kEnvResearch)) {
    return Verdict::Fail(fmt::format("tags.environment is absent on the workspace and it holds "
                                     "production computes ({}) and research computes ({}); split "
                                     "them into two workspaces",
                                     Join(prod, ", "), Join(research, ", ")),
                         "tags.environment");
  }
  if (ws_env == kEnvNone && seen == kEnvNone) {
    return Verdict::Unknown(
        "tags.environment is absent on the workspace and its computes; tag the workspace "
        "environment=production or environment=research",
        "tags.environment");
  }
  return Verdict::Pass();
}

constexpr int kMinOnlineInstances = 3;

Verdict OnlineInstances(const Resource& dep, const RuleContext& ctx) {
  // Research and development deployments may run on one instance.
  int env = EnvironmentOf(dep, nullptr);
  if (env == kEnvNone) {
    if (const Resource* ws = ParentWorkspace(ctx, dep)) env = EnvironmentOf(*ws, nullptr);
  }
  if (env == kEnvResearch) return Verdict::NotApplicable();
  Prop type = Read(dep, "properties.scaleSettings.scaleType");
  if (type.unknown) return UnknownProp(type);
  bool autoscale = StringIs(type.value, "TargetUtilization");
  Prop count = Read(dep, autoscale ? "properties.scaleSettings.minInstances" : "sku.capacity");
  if (count.unknown) return UnknownProp(count);
  double n = 1;  // both default to one instance
  if (!count.absent()) {
    std::optional<double> v = AsNumber(count.value);
    if (!v) {
      return Verdict::Fail(fmt::format("{} is {}, not a number; set it to {} or more", count.path,
                                       Show(count), kMinOnlineInstances),
                           count.path);
    }
    n = *v;
  }
  if (n >= kMinOnlineInstances) return Verdict::Pass();
  return Verdict::Fail(fmt::format("{} is {}{}; set it to {} or more so that one instance (or "
                                   "zone) lost, or an upgrade in progress, leaves capacity serving",
                                   count.path, count.absent() ? "absent" : Show(count),
                                   count.absent() ? " (one instance)" : "", kMinOnlineInstances),
                       count.path);
}

}  // namespace

std::vector<Rule> MlRules() {
  const std::vector<std::string> ws = {std::string(kWorkspace)};
  return {
      {
          .id = "GANTRY-ML-001",
          .title = "Disable public network access to Machine Learning workspaces",
          .pillar = Pillar::kSecurity,
          .severity = Severity::kHigh,
          .types = ws,
          .condition = "properties.publicNetworkAccess is 'Disabled' (case-insensitive) and "
                       "properties.allowPublicAccessWhenBehindVnet is absent or false. An absent "
                       "publicNetworkAccess fails.",
          .rationale = "Azure ML security baseline NS-2 (MCSB: secure cloud services with network "
                       "controls) and Defender for Cloud's AML recommendation to disable public "
                       "network access (Medium): the workspace API should be reachable only "
                       "through a private endpoint. The property has no default in the 2024-10-01 "
                       "spec and the service treats an absent value as public, so absence fails "
                       "as in Azure Policy 438c38d2 and Checkov CKV_AZURE_144 (CKV2_AZURE_49 "
                       "passes it).",
          .fix_arm =
              R"({"properties": {"publicNetworkAccess": "Disabled", "allowPublicAccessWhenBehindVnet": false}})",
          .fix_terraform = "public_network_access_enabled = false",
          .references = {"PSRule Azure.ML.PublicAccess", "Checkov CKV_AZURE_144",
                         "Checkov CKV2_AZURE_49", "Policy 438c38d2", "Policy a10ee784"},
          .help_uri =
              "https://learn.microsoft.com/azure/machine-learning/how-to-configure-private-link",
          .check = PublicAccess,
      },
      {
          .id = "GANTRY-ML-002",
          .title = "Reach workspaces through an approved private endpoint",
          .pillar = Pillar::kSecurity,
          .severity = Severity::kMedium,
          .types = ws,
          .condition = "properties.privateEndpointConnections[] (or a workspaces/"
                       "privateEndpointConnections child) has a connection whose "
                       "properties.privateLinkServiceConnectionState.status is 'Approved', or the "
                       "input deploys a Microsoft.Network/privateEndpoints whose "
                       "privateLinkServiceConnections[].properties.privateLinkServiceId is this "
                       "workspace (groupIds absent or containing 'amlworkspace'). A manual "
                       "connection only is unknown.",
          .rationale = "Azure ML security baseline NS-2 and the MCSB initiative (Policy 45e05259, "
                       "Audit): private link keeps workspace traffic on the Microsoft backbone. "
                       "The connections list is read-only, so in a template the private endpoint "
                       "resource is the evidence; an automatic connection is approved when it is "
                       "created.",
          .fix_arm =
              R"({"type": "Microsoft.Network/privateEndpoints", "properties": {"subnet": {"id": "<subnet id>"}, "privateLinkServiceConnections": [{"name": "aml", "properties": {"privateLinkServiceId": "[resourceId('Microsoft.MachineLearningServices/workspaces', '<workspace>')]", "groupIds": ["amlworkspace"]}}]}})",
          .fix_terraform = R"(resource "azurerm_private_endpoint" "aml" {
  subnet_id = azurerm_subnet.pe.id
  private_service_connection {
    name                           = "aml"
    private_connection_resource_id = azurerm_machine_learning_workspace.ws.id
    subresource_names              = ["amlworkspace"]
    is_manual_connection           = false
  }
})",
          .references = {"Policy 45e05259", "Policy 7838fd83", "Policy ee40564d"},
          .help_uri =
              "https://learn.microsoft.com/azure/machine-learning/how-to-configure-private-link",
          .check = PrivateEndpoint,
      },
      {
          .id = "GANTRY-ML-003",
          .title = "Give workspaces a user-assigned managed identity",
          .pillar = Pillar::kSecurity,
          .severity = Severity::kMedium,
          .types = ws,
          .condition = "identity.type contains 'UserAssigned' ('UserAssigned' or "
                       "'SystemAssigned,UserAssigned'), identity.userAssignedIdentities is a "
                       "non-empty object and properties.primaryUserAssignedIdentity is non-empty.",
          .rationale = "Azure ML security baseline IM-3 (use managed identities): a user-assigned "
                       "identity outlives the workspace and can be granted access to storage, Key "
                       "Vault and registries before the workspace exists. PSRule requires "
                       "identity.type to equal 'UserAssigned'; Gantry also accepts "
                       "'SystemAssigned,UserAssigned' because the primary user-assigned identity "
                       "is then the one the workspace uses.",
          .fix_arm =
              R"({"identity": {"type": "UserAssigned", "userAssignedIdentities": {"<identity id>": {}}}, "properties": {"primaryUserAssignedIdentity": "<identity id>"}})",
          .fix_terraform = R"(identity {
  type         = "UserAssigned"
  identity_ids = [azurerm_user_assigned_identity.ws.id]
}
primary_user_assigned_identity = azurerm_user_assigned_identity.ws.id)",
          .references = {"PSRule Azure.ML.UserManagedIdentity", "Policy 5f0c7d88"},
          .help_uri = "https://learn.microsoft.com/azure/machine-learning/"
                      "how-to-identity-based-service-authentication",
          .check = UserAssignedIdentity,
      },
      {
          .id = "GANTRY-ML-004",
          .title = "Encrypt workspaces with a customer-managed key",
          .pillar = Pillar::kSecurity,
          .severity = Severity::kLow,
          .types = ws,
          .condition = "properties.encryption.status is 'Enabled' and "
                       "properties.encryption.keyVaultProperties.keyIdentifier and .keyVaultArmId "
                       "are non-empty. Workspaces of kind 'project' are not applicable.",
          .rationale = "Azure ML security baseline DP-5 (use customer-managed keys when required) "
                       "and Azure Policy ba769a63 / 7f40cee6. The MCSB initiative ships the CMK "
                       "policy with its effect Disabled, i.e. opt-in, hence low severity here; "
                       "GANTRY-ML-005 makes it high where the data is sensitive.",
          .fix_arm =
              R"({"properties": {"encryption": {"status": "Enabled", "keyVaultProperties": {"keyVaultArmId": "<key vault id>", "keyIdentifier": "https://<vault>.vault.azure.net/keys/<key>/<version>"}}}})",
          .fix_terraform = R"(encryption {
  key_vault_id              = azurerm_key_vault.kv.id
  key_id                    = azurerm_key_vault_key.ws.id
  user_assigned_identity_id = azurerm_user_assigned_identity.ws.id
})",
          .references = {"Policy ba769a63", "Policy 7f40cee6"},
          .help_uri =
              "https://learn.microsoft.com/azure/machine-learning/concept-customer-managed-keys",
          .check = CustomerManagedKey,
      },
      {
          .id = "GANTRY-ML-005",
          .title = "Use high-business-impact mode and a customer-managed key for sensitive data",
          .pillar = Pillar::kSecurity,
          .severity = Severity::kHigh,
          .types = ws,
          .condition = "Applies when a tag data-classification (or dataClassification, "
                       "data_classification, classification) is confidential, "
                       "highly-confidential, restricted, highly-restricted or secret "
                       "(case-insensitive, separators ignored), or properties.hbiWorkspace is "
                       "true. Passes when properties.hbiWorkspace is true and customer-managed-key "
                       "encryption is on as in GANTRY-ML-004.",
          .rationale = "Azure ML data encryption docs: hbiWorkspace reduces the diagnostic data "
                       "Microsoft collects and encrypts the local scratch disk of compute; "
                       "together with a customer-managed key it is what the security baseline "
                       "(DP-5) asks for data you classify as sensitive. The tag is how the owner "
                       "says so in the template.",
          .fix_arm =
              R"({"properties": {"hbiWorkspace": true, "encryption": {"status": "Enabled", "keyVaultProperties": {"keyVaultArmId": "<key vault id>", "keyIdentifier": "<key url>"}}}})",
          .fix_terraform = R"(high_business_impact = true
encryption {
  key_vault_id = azurerm_key_vault.kv.id
  key_id       = azurerm_key_vault_key.ws.id
})",
          .references = {"Policy ba769a63", "Checkov CKV2_AZURE_50"},
          .help_uri = "https://learn.microsoft.com/azure/machine-learning/concept-data-encryption",
          .check = SensitiveData,
      },
      {
          .id = "GANTRY-ML-006",
          .title = "Keep the storage account of a sensitive workspace off the public network",
          .pillar = Pillar::kSecurity,
          .severity = Severity::kHigh,
          .types = ws,
          .condition = "Applies to sensitive workspaces (as GANTRY-ML-005). The storage account "
                       "named by properties.storageAccount has properties.publicNetworkAccess "
                       "'Disabled'. A storage account not in the input is unknown.",
          .rationale = "Checkov CKV2_AZURE_50: a high-business-impact workspace's default storage "
                       "holds its data and must not be reachable from the internet (Azure ML "
                       "security baseline NS-2). Gantry applies it also when the classification "
                       "tag says the data is sensitive.",
          .fix_arm =
              R"({"type": "Microsoft.Storage/storageAccounts", "properties": {"publicNetworkAccess": "Disabled"}})",
          .fix_terraform =
              "public_network_access_enabled = false  # on the azurerm_storage_account",
          .references = {"Checkov CKV2_AZURE_50"},
          .help_uri =
              "https://learn.microsoft.com/azure/machine-learning/how-to-secure-workspace-vnet",
          .check = SensitiveStorage,
      },
      {
          .id = "GANTRY-ML-007",
          .title = "Isolate workspaces in a managed network that allows only approved outbound",
          .pillar = Pillar::kSecurity,
          .severity = Severity::kMedium,
          .types = ws,
          .condition = "properties.managedNetwork.isolationMode is 'AllowOnlyApprovedOutbound'. "
                       "'AllowInternetOutbound', 'Disabled' and absent (the default, Disabled) "
                       "fail.",
          .rationale = "WAF AI workload networking guidance and the Azure ML managed network docs: "
                       "approved-only outbound stops exfiltration from jobs and compute. Azure "
                       "Policy 6ddb1705 has the same title but its isolationMode parameter "
                       "defaults to 'Disabled'; Gantry checks for the value the title asks for.",
          .fix_arm =
              R"({"properties": {"managedNetwork": {"isolationMode": "AllowOnlyApprovedOutbound"}}})",
          .fix_terraform = R"(managed_network {
  isolation_mode = "AllowOnlyApprovedOutbound"
})",
          .references = {"Policy 6ddb1705"},
          .help_uri = "https://learn.microsoft.com/azure/machine-learning/how-to-managed-network",
          .check = ManagedNetworkMode,
      },
      {
          .id = "GANTRY-ML-008",
          .title = "Reach dependencies from the managed network through private endpoint rules",
          .pillar = Pillar::kSecurity,
          .severity = Severity::kLow,
          .types = ws,
          .condition = "Applies when properties.managedNetwork.isolationMode is "
                       "'AllowInternetOutbound' or 'AllowOnlyApprovedOutbound'. "
                       "properties.managedNetwork.outboundRules (object or array), or a "
                       "workspaces/outboundRules child, has a rule of type 'PrivateEndpoint'.",
          .rationale = "Checkov CKV_AZURE_243 and the managed network docs: private endpoint "
                       "outbound rules keep traffic to storage, Key Vault and registries off the "
                       "internet. Checkov also fails workspaces with no managed network; Gantry "
                       "leaves those to GANTRY-ML-007 so that one gap is reported once.",
          .fix_arm =
              R"({"properties": {"managedNetwork": {"isolationMode": "AllowOnlyApprovedOutbound", "outboundRules": {"data": {"type": "PrivateEndpoint", "destination": {"serviceResourceId": "<storage id>", "subresourceTarget": "blob"}}}}}})",
          .fix_terraform =
              R"(resource "azurerm_machine_learning_workspace_network_outbound_rule_private_endpoint" "data" {
  name                = "data"
  workspace_id        = azurerm_machine_learning_workspace.ws.id
  service_resource_id = azurerm_storage_account.data.id
  sub_resource_target = "blob"
})",
          .references = {"Checkov CKV_AZURE_243"},
          .help_uri = "https://learn.microsoft.com/azure/machine-learning/how-to-managed-network",
          .check = OutboundPrivateEndpointRule,
      },
      {
          .id = "GANTRY-ML-009",
          .title = "Keep v1 legacy mode off on workspaces",
          .pillar = Pillar::kSecurity,
          .severity = Severity::kMedium,
          .types = ws,
          .condition = "properties.v1LegacyMode is absent (default false) or false.",
          .rationale = "Azure ML network isolation docs (v2 API platform): with v1LegacyMode off, "
                       "workspace operations through the v2 API stay behind the workspace's "
                       "private link; turning it on keeps the older v1 behaviour for v1 SDK "
                       "users. Azure Policy e413671a audits the opposite (v1LegacyMode not true) "
                       "for backward compatibility; Gantry follows the isolation guidance.",
          .fix_arm = R"({"properties": {"v1LegacyMode": false}})",
          .fix_terraform = "v1_legacy_mode_enabled = false",
          .references = {"Policy e413671a"},
          .help_uri = "https://learn.microsoft.com/azure/machine-learning/"
                      "how-to-configure-network-isolation-with-v2",
          .check = V1LegacyMode,
      },
      {
          .id = "GANTRY-ML-010",
          .title = "Send workspace resource logs to a diagnostic setting",
          .pillar = Pillar::kOperationalExcellence,
          .severity = Severity::kMedium,
          .types = ws,
          .condition = "A Microsoft.Insights/diagnosticSettings scoped to the workspace has a "
                       "destination (workspaceId, storageAccountId, eventHubAuthorizationRuleId or "
                       "marketplacePartnerId) and a properties.logs[] entry with enabled true and "
                       "a category or categoryGroup, whose retentionPolicy is absent, disabled, 0 "
                       "days or at least 365 days. None in a live input is unknown.",
          .rationale = "Azure ML security baseline LT-3 (enable logging) and Defender for Cloud's "
                       "AML recommendation that resource logs be enabled (Medium); Azure Policy "
                       "afe0c3be with its requiredRetentionDays default of 365. Compute cluster "
                       "events and job events are the first thing an operator needs when "
                       "training stalls.",
          .fix_arm =
              R"({"type": "Microsoft.Insights/diagnosticSettings", "scope": "[resourceId('Microsoft.MachineLearningServices/workspaces', '<workspace>')]", "properties": {"workspaceId": "<log analytics id>", "logs": [{"categoryGroup": "allLogs", "enabled": true}]}})",
          .fix_terraform = R"(resource "azurerm_monitor_diagnostic_setting" "ws" {
  target_resource_id         = azurerm_machine_learning_workspace.ws.id
  log_analytics_workspace_id = azurerm_log_analytics_workspace.logs.id
  enabled_log {
    category_group = "allLogs"
  }
})",
          .references = {"Policy afe0c3be", "Policy f59276f0"},
          .help_uri =
              "https://learn.microsoft.com/azure/machine-learning/monitor-azure-machine-learning",
          .check = DiagnosticSettings,
      },
      {
          .id = "GANTRY-ML-011",
          .title = "Use separate workspaces for research and production",
          .pillar = Pillar::kOperationalExcellence,
          .severity = Severity::kMedium,
          .types = ws,
          .condition = "The environment comes from tags.environment or tags.env (words prod, "
                       "production, prd, live = production; research, dev, development, "
                       "experiment, experimental, exp, sandbox, lab, poc = research). Fails when "
                       "the workspace's tag names both, when a compute of the workspace is tagged "
                       "for the other environment, or when an untagged workspace has computes of "
                       "both. Unknown when neither the workspace nor its computes say.",
          .rationale = "WAF AI workload operations guidance and the Cloud Adoption Framework's AI "
                       "resource organization: production models, data and identities are kept "
                       "apart from experimentation so that research access never reaches "
                       "production data and production quotas are not spent on experiments.",
          .fix_arm = R"({"tags": {"environment": "production"}})",
          .fix_terraform = R"(tags = { environment = "production" })",
          .references = {},
          .help_uri = "https://learn.microsoft.com/azure/cloud-adoption-framework/ready/"
                      "azure-best-practices/ai-machine-learning-resource-organization",
          .check = SeparateEnvironments,
      },
      {
          .id = "GANTRY-ML-012",
          .title = "Run production online deployments on at least three instances",
          .pillar = Pillar::kReliability,
          .severity = Severity::kMedium,
          .types = {std::string(kOnlineDeployment)},
          .condition = "sku.capacity is at least 3 (absent = 1); with "
                       "properties.scaleSettings.scaleType 'TargetUtilization', "
                       "properties.scaleSettings.minInstances is at least 3 (absent = 1). "
                       "Deployments tagged (or whose workspace is tagged) for research are not "
                       "applicable.",
          .rationale = "WAF Azure Machine Learning service guide (reliability): online deployments "
                       "need more than one instance to survive a node or zone failure and the "
                       "service's rolling upgrades. The deployment has no zones property; the "
                       "instance count is the only lever, and three lets instances spread over "
                       "three zones (Gantry's threshold).",
          .fix_arm = R"({"sku": {"name": "Default", "capacity": 3}})",
          .fix_terraform = "",
          .references = {},
          .help_uri = "https://learn.microsoft.com/azure/well-architected/service-guides/"
                      "azure-machine-learning",
          .check = OnlineInstances,
      },
  };
}

}  // namespace gantry::assess::rule
