// ReadLiveResources: what `az resource show`, the ARM REST API and the Azure
// Machine Learning CLI (`az ml compute show`, `az ml workspace show`) print,
// as Resources in ARM shape.
//
// ARM objects are kept as they are. The ML CLI prints the SDK v2 entities
// (snake_case, its own enum spellings, seconds instead of ISO 8601
// durations); they are mapped onto the ARM properties the rules read, and
// what the CLI does not print (a compute's disableLocalAuth) is listed as
// unknown rather than left to look like a failing absent value.
#include <fmt/format.h>

#include <cctype>
#include <string>

#include "gantry/assess/inputs.h"
#include "gantry/core/text.h"
#include "tf_plan.h"

namespace gantry::assess {
namespace {

constexpr const char* kWorkspace = "Microsoft.MachineLearningServices/workspaces";
constexpr const char* kCompute = "Microsoft.MachineLearningServices/workspaces/computes";
constexpr size_t kMaxLiveResources = 100000;

const Json* Field(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

struct Reader {
  const SourceDoc& doc;
  std::vector<Resource> out;

  Status Bad(const std::string& pointer, const std::string& what) const {
    return InvalidArgument(
        fmt::format("{}: {}: {}", doc.path, pointer.empty() ? "/" : pointer, what));
  }

  // A string member, or "" when absent; a non-string is an error.
  Status Str(const Json& obj, const std::string& pointer, const char* key, std::string* out) {
    const Json* v = Field(obj, key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_string()) {
      return Bad(pointer + "/" + key,
                 fmt::format("'{}' must be a string, found {}", key, tf::Preview(*v)));
    }
    *out = v->get<std::string>();
    return Status::Ok();
  }

  Resource Start(const std::string& pointer) const {
    Resource r;
    r.origin = Origin::kLive;
    r.where = SourceLocation{doc.path, doc.LineOf(pointer), pointer};
    return r;
  }

  Status Element(const Json& v, const std::string& pointer);
  Status Arm(const Json& v, const std::string& pointer);
  Status MlCompute(const Json& v, const std::string& pointer, const std::string& compute_type);
  Status MlWorkspace(const Json& v, const std::string& pointer);
};

// The full ARM name and the scope of an id:
// ".../providers/Microsoft.MachineLearningServices/workspaces/ws/computes/c" -> "ws/c";
// ".../workspaces/ws/providers/Microsoft.Insights/diagnosticSettings/d" -> "d", scope ".../ws".
void SplitId(std::string_view id, std::string* name, std::string* scope) {
  std::string lower = AsciiLower(id);
  size_t at = lower.rfind("/providers/");
  if (at == std::string::npos) return;
  if (at > 0 && lower.find("/providers/") < at) *scope = std::string(id.substr(0, at));
  std::string_view rest = id.substr(at + 11);  // "<ns>/<type>/<name>[/<type>/<name>...]"
  std::vector<std::string> segs;
  size_t start = 0;
  while (start <= rest.size()) {
    size_t slash = rest.find('/', start);
    segs.emplace_back(
        rest.substr(start, slash == std::string_view::npos ? rest.npos : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  std::vector<std::string> names;
  for (size_t i = 2; i < segs.size(); i += 2) names.push_back(segs[i]);
  if (!names.empty()) *name = Join(names, "/");
}

bool LooksLikeMlWorkspace(const Json& v) {
  if (v.contains("properties")) return false;
  for (const char* k : {"hbi_workspace", "mlflow_tracking_uri", "discovery_url",
                        "public_network_access", "managed_network", "customer_managed_key"}) {
    if (v.contains(k)) return true;
  }
  return false;
}

// az ml compute types -> ARM computeType.
const char* ComputeTypeOf(std::string_view t) {
  static const std::pair<const char*, const char*> kTypes[] = {
      {"amlcompute", "AmlCompute"},
      {"computeinstance", "ComputeInstance"},
      {"kubernetes", "Kubernetes"},
      {"virtualmachine", "VirtualMachine"},
      {"aks", "AKS"},
      {"synapsespark", "SynapseSpark"},
      {"databricks", "Databricks"},
      {"hdinsight", "HDInsight"},
      {"datafactory", "DataFactory"},
      {"datalakeanalytics", "DataLakeAnalytics"}};
  for (const auto& [cli, arm] : kTypes) {
    if (EqualsIgnoreCase(t, cli)) return arm;
  }
  return nullptr;
}

// "system_assigned,user_assigned" -> "SystemAssigned,UserAssigned".
std::string CamelEnum(std::string_view s) {
  std::string out;
  bool up = true;
  for (char c : s) {
    if (c == '_' || c == ' ') {
      up = true;
    } else if (c == ',') {
      out += ',';
      up = true;
    } else {
      out += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
      up = false;
    }
  }
  return out;
}

Json MapIdentity(const Json& id) {
  Json out = Json::object();
  if (!id.is_object()) return out;
  if (const Json* t = Field(id, "type"); t && t->is_string()) {
    out["type"] = CamelEnum(t->get<std::string>());
  }
  if (const Json* p = Field(id, "principal_id"); p && p->is_string()) out["principalId"] = *p;
  if (const Json* p = Field(id, "tenant_id"); p && p->is_string()) out["tenantId"] = *p;
  if (const Json* u = Field(id, "user_assigned_identities")) {
    Json uai = Json::object();
    // The SDK prints a list of {resource_id, client_id, principal_id}; older CLIs a map.
    if (u->is_array()) {
      for (const Json& e : *u) {
        const Json* rid = e.is_object() ? Field(e, "resource_id") : nullptr;
        if (rid == nullptr || !rid->is_string()) continue;
        Json one = Json::object();
        if (const Json* c = Field(e, "client_id")) one["clientId"] = *c;
        if (const Json* p = Field(e, "principal_id")) one["principalId"] = *p;
        uai[rid->get<std::string>()] = std::move(one);
      }
    } else if (u->is_object()) {
      for (auto it = u->begin(); it != u->end(); ++it) uai[it.key()] = Json::object();
    }
    if (!uai.empty()) out["userAssignedIdentities"] = std::move(uai);
  }
  return out;
}

Status Reader::Element(const Json& v, const std::string& pointer) {
  if (!v.is_object()) {
    return Bad(pointer, fmt::format("expected a resource object, found {}", tf::Preview(v)));
  }
  if (out.size() >= kMaxLiveResources) {
    return Bad(pointer, fmt::format("more than {} resources in one file", kMaxLiveResources));
  }
  const Json* type = Field(v, "type");
  if (type != nullptr && !type->is_string()) {
    return Bad(pointer + "/type",
               fmt::format("'type' must be a string, found {}", tf::Preview(*type)));
  }
  if (type != nullptr) {
    const std::string& t = type->get_ref<const std::string&>();
    if (t.find('/') != std::string::npos) return Arm(v, pointer);
    if (const char* ct = ComputeTypeOf(t)) return MlCompute(v, pointer, ct);
  } else if (LooksLikeMlWorkspace(v)) {
    return MlWorkspace(v, pointer);
  }
  return Bad(pointer,
             type != nullptr
                 ? fmt::format("unknown resource type '{}': expected an ARM type "
                               "(\"Microsoft.MachineLearningServices/workspaces\") or an "
                               "`az ml compute show` type (amlcompute, computeinstance, ...)",
                               type->get<std::string>())
                 : std::string("not a resource: expected an ARM resource object with \"type\" "
                               "and \"id\" (`az resource show`), `az ml compute show` or "
                               "`az ml workspace show` output, an array of them, or an ARM "
                               "list page {\"value\": [...]}"));
}

Status Reader::Arm(const Json& v, const std::string& pointer) {
  Resource r = Start(pointer);
  RETURN_IF_ERROR(Str(v, pointer, "type", &r.type));
  RETURN_IF_ERROR(Str(v, pointer, "id", &r.id));
  RETURN_IF_ERROR(Str(v, pointer, "name", &r.name));
  RETURN_IF_ERROR(Str(v, pointer, "location", &r.location));
  if (r.id.empty() && r.name.empty()) {
    return Bad(pointer, fmt::format("a resource of type '{}' needs \"id\" or \"name\"", r.type));
  }
  // The REST API returns the last name segment only; the id has them all.
  if (!r.id.empty()) SplitId(r.id, &r.name, &r.scope);
  r.location = tf::NormalizeLocation(r.location);
  r.address = r.id.empty() ? r.type + "/" + r.name : r.id;
  r.body = v;
  if (r.IsType("Microsoft.Insights/autoscalesettings")) {
    const Json* target = r.Get("properties.targetResourceUri");
    if (target != nullptr && target->is_string()) r.scope = target->get<std::string>();
  }
  out.push_back(std::move(r));
  return Status::Ok();
}

// The fields every `az ml ... show` mapping shares: location, address and the
// ARM body's type, name, id, location, tags and identity.
void FillCommonFields(const Json& v, Resource* r) {
  r->location = tf::NormalizeLocation(r->location);
  r->address = r->id.empty() ? r->name : r->id;
  Json& b = r->body;
  b["type"] = r->type;
  b["name"] = r->name;
  if (!r->id.empty()) b["id"] = r->id;
  if (!r->location.empty()) b["location"] = r->location;
  if (const Json* t = Field(v, "tags"); t && t->is_object()) b["tags"] = *t;
  if (const Json* id = Field(v, "identity")) b["identity"] = MapIdentity(*id);
}

Status Reader::MlCompute(const Json& v, const std::string& pointer,
                         const std::string& compute_type) {
  Resource r = Start(pointer);
  std::string leaf;
  RETURN_IF_ERROR(Str(v, pointer, "name", &leaf));
  RETURN_IF_ERROR(Str(v, pointer, "id", &r.id));
  RETURN_IF_ERROR(Str(v, pointer, "location", &r.location));
  if (leaf.empty() && r.id.empty()) return Bad(pointer, "a compute needs \"name\" or \"id\"");
  r.type = kCompute;
  r.name = leaf;
  if (!r.id.empty()) SplitId(r.id, &r.name, &r.scope);
  r.scope.clear();
  if (r.name.find('/') == std::string::npos) {
    // Without the id the workspace is not named in the output.
    r.name = "(unknown workspace)/" + r.name;
    r.unknown.push_back("/name");
  }
  FillCommonFields(v, &r);
  Json& b = r.body;
  Json& p = b["properties"];
  p["computeType"] = compute_type;
  if (!r.location.empty()) p["computeLocation"] = r.location;
  if (const Json* d = Field(v, "description")) p["description"] = *d;
  if (const Json* s = Field(v, "provisioning_state")) p["provisioningState"] = *s;
  if (const Json* s = Field(v, "resource_id")) p["resourceId"] = *s;
  // The CLI does not print disableLocalAuth; the ARM GET does.
  r.unknown.push_back("/properties/disableLocalAuth");
  Json& pp = p["properties"];
  pp = Json::object();
  auto need = [&](const char* key, bool (Json::*is)() const noexcept, const char* what,
                  const Json** out) -> Status {
    *out = Field(v, key);
    if (*out != nullptr && !((**out).*is)()) {
      return Bad(pointer + "/" + key,
                 fmt::format("'{}' must be {}, found {}", key, what, tf::Preview(**out)));
    }
    return Status::Ok();
  };
  const Json* x = nullptr;
  RETURN_IF_ERROR(need("size", &Json::is_string, "a string", &x));
  if (x) pp["vmSize"] = *x;
  RETURN_IF_ERROR(need("enable_node_public_ip", &Json::is_boolean, "a boolean", &x));
  if (x) pp["enableNodePublicIp"] = *x;
  const Json* net = nullptr;
  RETURN_IF_ERROR(need("network_settings", &Json::is_object, "an object", &net));
  if (net) {
    const Json* subnet = Field(*net, "subnet");
    if (subnet && subnet->is_string() && !subnet->get<std::string>().empty()) {
      pp["subnet"]["id"] = *subnet;
    }
  }
  const Json* ssh = nullptr;
  RETURN_IF_ERROR(need("ssh_public_access_enabled", &Json::is_boolean, "a boolean", &ssh));
  if (compute_type == "AmlCompute") {
    RETURN_IF_ERROR(need("tier", &Json::is_string, "a string", &x));
    if (x) {
      std::string tier = AsciiLower(x->get<std::string>());
      pp["vmPriority"] =
          tier == "low_priority" || tier == "lowpriority" ? "LowPriority" : "Dedicated";
    }
    RETURN_IF_ERROR(need("min_instances", &Json::is_number_integer, "an integer", &x));
    if (x) pp["scaleSettings"]["minNodeCount"] = *x;
    RETURN_IF_ERROR(need("max_instances", &Json::is_number_integer, "an integer", &x));
    if (x) pp["scaleSettings"]["maxNodeCount"] = *x;
    RETURN_IF_ERROR(
        need("idle_time_before_scale_down", &Json::is_number, "a number of seconds", &x));
    if (x) {
      pp["scaleSettings"]["nodeIdleTimeBeforeScaleDown"] =
          fmt::format("PT{}S", static_cast<long long>(x->get<double>()));
    }
    // Absent: NotSpecified (closed with a VNet, open without), as in ARM.
    pp["remoteLoginPortPublicAccess"] =
        ssh == nullptr ? "NotSpecified" : (ssh->get<bool>() ? "Enabled" : "Disabled");
  } else if (compute_type == "ComputeInstance") {
    if (ssh) pp["sshSettings"]["sshPublicAccess"] = ssh->get<bool>() ? "Enabled" : "Disabled";
    RETURN_IF_ERROR(
        need("idle_time_before_shutdown", &Json::is_string, "an ISO 8601 duration", &x));
    if (x) {
      pp["idleTimeBeforeShutdown"] = *x;
    } else {
      RETURN_IF_ERROR(
          need("idle_time_before_shutdown_minutes", &Json::is_number_integer, "an integer", &x));
      if (x) pp["idleTimeBeforeShutdown"] = fmt::format("PT{}M", x->get<long long>());
    }
    const Json* sched = nullptr;
    RETURN_IF_ERROR(need("schedules", &Json::is_object, "an object", &sched));
    if (sched) {
      const Json* css = Field(*sched, "compute_start_stop");
      if (css && css->is_array()) {
        Json list = Json::array();
        for (const Json& s : *css) {
          if (!s.is_object()) continue;
          Json e = Json::object();
          if (const Json* a = Field(s, "action"); a && a->is_string()) {
            e["action"] = CamelEnum(AsciiLower(a->get<std::string>()));
          }
          if (const Json* st = Field(s, "state"); st && st->is_string()) {
            e["status"] = CamelEnum(AsciiLower(st->get<std::string>()));
          }
          if (const Json* t = Field(s, "trigger"); t && t->is_object()) {
            if (const Json* tt = Field(*t, "type"); tt && tt->is_string()) {
              e["triggerType"] = CamelEnum(AsciiLower(tt->get<std::string>()));
            }
            if (const Json* ex = Field(*t, "expression")) e["cron"]["expression"] = *ex;
            if (const Json* tz = Field(*t, "time_zone")) e["cron"]["timeZone"] = *tz;
            if (const Json* st = Field(*t, "start_time")) e["cron"]["startTime"] = *st;
          }
          list.push_back(std::move(e));
        }
        pp["schedules"]["computeStartStop"] = std::move(list);
      }
    }
    const Json* os = nullptr;
    RETURN_IF_ERROR(need("os_image_metadata", &Json::is_object, "an object", &os));
    if (os) {
      if (const Json* l = Field(*os, "is_latest_os_image_version")) {
        pp["osImageMetadata"]["isLatestOsImageVersion"] = *l;
      }
    }
    if (const Json* st = Field(v, "state")) pp["state"] = *st;
  }
  out.push_back(std::move(r));
  return Status::Ok();
}

Status Reader::MlWorkspace(const Json& v, const std::string& pointer) {
  Resource r = Start(pointer);
  RETURN_IF_ERROR(Str(v, pointer, "name", &r.name));
  RETURN_IF_ERROR(Str(v, pointer, "id", &r.id));
  RETURN_IF_ERROR(Str(v, pointer, "location", &r.location));
  if (r.name.empty() && r.id.empty()) return Bad(pointer, "a workspace needs \"name\" or \"id\"");
  r.type = kWorkspace;
  if (!r.id.empty()) SplitId(r.id, &r.name, &r.scope);
  r.scope.clear();
  FillCommonFields(v, &r);
  Json& b = r.body;
  Json& p = b["properties"];
  p = Json::object();
  auto copy = [&](const char* cli, const char* arm, bool (Json::*is)() const noexcept,
                  const char* what) -> Status {
    const Json* x = Field(v, cli);
    if (x == nullptr) return Status::Ok();
    if (!((*x).*is)()) {
      return Bad(pointer + "/" + cli,
                 fmt::format("'{}' must be {}, found {}", cli, what, tf::Preview(*x)));
    }
    p[arm] = *x;
    return Status::Ok();
  };
  RETURN_IF_ERROR(copy("display_name", "friendlyName", &Json::is_string, "a string"));
  RETURN_IF_ERROR(copy("description", "description", &Json::is_string, "a string"));
  RETURN_IF_ERROR(copy("hbi_workspace", "hbiWorkspace", &Json::is_boolean, "a boolean"));
  RETURN_IF_ERROR(
      copy("public_network_access", "publicNetworkAccess", &Json::is_string, "a string"));
  if (p.contains("publicNetworkAccess")) {
    p["publicNetworkAccess"] = CamelEnum(AsciiLower(p["publicNetworkAccess"].get<std::string>()));
  }
  RETURN_IF_ERROR(copy("primary_user_assigned_identity", "primaryUserAssignedIdentity",
                       &Json::is_string, "a string"));
  RETURN_IF_ERROR(copy("key_vault", "keyVault", &Json::is_string, "a string"));
  RETURN_IF_ERROR(copy("storage_account", "storageAccount", &Json::is_string, "a string"));
  RETURN_IF_ERROR(
      copy("application_insights", "applicationInsights", &Json::is_string, "a string"));
  RETURN_IF_ERROR(copy("container_registry", "containerRegistry", &Json::is_string, "a string"));
  RETURN_IF_ERROR(copy("image_build_compute", "imageBuildCompute", &Json::is_string, "a string"));
  RETURN_IF_ERROR(
      copy("enable_data_isolation", "enableDataIsolation", &Json::is_boolean, "a boolean"));
  if (const Json* cmk = Field(v, "customer_managed_key"); cmk && cmk->is_object()) {
    p["encryption"]["status"] = "Enabled";
    if (const Json* kv = Field(*cmk, "key_vault")) {
      p["encryption"]["keyVaultProperties"]["keyVaultArmId"] = *kv;
    }
    if (const Json* k = Field(*cmk, "key_uri")) {
      p["encryption"]["keyVaultProperties"]["keyIdentifier"] = *k;
    }
  }
  if (const Json* mn = Field(v, "managed_network"); mn && mn->is_object()) {
    if (const Json* im = Field(*mn, "isolation_mode"); im && im->is_string()) {
      p["managedNetwork"]["isolationMode"] = CamelEnum(AsciiLower(im->get<std::string>()));
    }
    if (const Json* rules = Field(*mn, "outbound_rules"); rules && rules->is_array()) {
      Json arm = Json::object();
      for (const Json& rule : *rules) {
        const Json* name = rule.is_object() ? Field(rule, "name") : nullptr;
        if (name == nullptr || !name->is_string()) continue;
        Json e = Json::object();
        if (const Json* t = Field(rule, "type"); t && t->is_string()) {
          std::string type = AsciiLower(t->get<std::string>());
          e["type"] = type == "fqdn" ? std::string("FQDN") : CamelEnum(type);
        }
        for (const char* k : {"category", "status", "destination"}) {
          if (const Json* x = Field(rule, k)) e[k] = *x;
        }
        arm[name->get<std::string>()] = std::move(e);
      }
      p["managedNetwork"]["outboundRules"] = std::move(arm);
    }
  }
  if (const Json* sc = Field(v, "serverless_compute"); sc && sc->is_object()) {
    if (const Json* s = Field(*sc, "custom_subnet")) {
      p["serverlessComputeSettings"]["serverlessComputeCustomSubnet"] = *s;
    }
    if (const Json* s = Field(*sc, "no_public_ip")) {
      p["serverlessComputeSettings"]["serverlessComputeNoPublicIP"] = *s;
    }
  }
  // The CLI prints neither v1LegacyMode nor allowPublicAccessWhenBehindVnet.
  r.unknown = {"/properties/allowPublicAccessWhenBehindVnet", "/properties/v1LegacyMode"};
  out.push_back(std::move(r));
  return Status::Ok();
}

}  // namespace

Result<std::vector<Resource>> ReadLiveResources(const SourceDoc& doc) {
  Reader rd{doc, {}};
  const Json& root = doc.value;
  if (root.is_array()) {
    for (size_t i = 0; i < root.size(); ++i) {
      RETURN_IF_ERROR(rd.Element(root[i], "/" + std::to_string(i)));
    }
  } else if (root.is_object() && !root.contains("type") && root.contains("value")) {
    // An ARM list page; nextLink names the next page, which the user fetches.
    const Json& value = root["value"];
    if (!value.is_array()) {
      return rd.Bad("/value", fmt::format("an ARM list page's \"value\" must be an array, found {}",
                                          tf::Preview(value)));
    }
    for (size_t i = 0; i < value.size(); ++i) {
      RETURN_IF_ERROR(rd.Element(value[i], "/value/" + std::to_string(i)));
    }
  } else if (root.is_object()) {
    RETURN_IF_ERROR(rd.Element(root, ""));
  } else {
    return rd.Bad("", fmt::format("expected a resource object, an array of them or an ARM list "
                                  "page, found {}",
                                  tf::Preview(root)));
  }
  return std::move(rd.out);
}

}  // namespace gantry::assess
