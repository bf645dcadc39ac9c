// Private to the Terraform reader (terraform.cc, terraform_map.cc): the index
// of a `terraform show -json` document and the helper that maps one planned
// azurerm resource onto ARM shape.
//
// Paths: a Terraform attribute path is dotted with block indexes as numbers
// ("scale_settings.0.min_node_count"), the way nested blocks appear in the
// plan JSON (every block is a list). ARM paths are JSON pointers into the
// Resource body ("/properties/properties/scaleSettings/minNodeCount").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gantry/assess/resource.h"
#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry::assess::tf {

// One resource instance of planned_values (or of a state's values).
struct Planned {
  const Json* values = nullptr;          // its attributes; never null
  const Json* after_unknown = nullptr;   // resource_changes[].change.after_unknown, or null
  const Json* config = nullptr;          // its configuration resource (expressions), or null
  std::string address;                   // "module.ml.azurerm_machine_learning_workspace.ws"
  std::string module_address;            // module instance: "", "module.ml", "module.ml[0]"
  std::vector<std::string> module_path;  // configuration path of that module: {"ml"}
  std::string mode;                      // "managed" or "data"
  std::string type;                      // "azurerm_machine_learning_workspace"
  std::string label;                     // the resource's name in the configuration: "ws"
  std::string index;                     // "" or the instance key as written: 0, "a"
  std::string pointer;                   // JSON pointer of the resource object in the file
  bool deleted = false;                  // resource_changes says ["delete"]

  // Identity as rules see it, settled before any resource is mapped so that
  // references between resources resolve to the same strings.
  std::string name;  // the ARM name; the label when the name is unknown
  bool name_unknown = false;
  std::string id;  // the ARM id; the address when it is unknown
  bool id_unknown = false;
  std::string location;  // normalised; "" when absent or unknown
};

// The index of one plan document.
class Plan {
 public:
  explicit Plan(const SourceDoc& doc) : doc_(doc) {}

  // Walks planned_values (or values), resource_changes and configuration;
  // InvalidArgument names the file and JSON pointer of anything malformed.
  Status Build();

  const std::vector<Planned>& resources() const { return resources_; }
  const SourceDoc& doc() const { return doc_; }
  // The azurerm major version the plan was made with, from the provider's
  // version constraint in the configuration; 0 when the plan does not say.
  int provider_major() const { return provider_major_; }

  // The resources of the plan that the configuration expression at `expr_path`
  // (a Terraform attribute path) of `from` refers to, following module inputs
  // (var.*) and module outputs (module.<m>.<out>). `all`: every instance of a
  // reference without an index (list attributes such as network_interface_ids);
  // otherwise the instance with `from`'s own index, else the first.
  std::vector<const Planned*> Referenced(const Planned& from, std::string_view expr_path,
                                         bool all) const;

 private:
  struct ModuleCtx {
    std::string instance;           // "module.ml[0]"
    std::vector<std::string> path;  // {"ml"}
  };
  Status WalkModule(const Json& mod, const std::string& pointer, int depth);
  Status IndexChanges();
  Status IndexConfig(const Json& mod, const std::string& pointer, std::vector<std::string> path,
                     int depth);
  void DetectProvider();
  void Resolve(const Json& refs, const ModuleCtx& ctx, const Planned& from, bool all, int depth,
               std::vector<const Planned*>* out) const;
  void SettleIdentity(Planned* p) const;

  const SourceDoc& doc_;
  std::vector<Planned> resources_;
  std::unordered_map<std::string, size_t> by_address_;
  // "<module instance>|<type>.<label>" -> instances in plan order
  std::unordered_map<std::string, std::vector<size_t>> by_base_;
  // configuration: "<path joined by '.'>|<type>.<label>" -> resource; path -> module; path -> call
  std::unordered_map<std::string, const Json*> config_resources_;
  std::unordered_map<std::string, const Json*> config_modules_;
  std::unordered_map<std::string, const Json*> config_calls_;
  std::vector<std::string> module_instances_;
  int provider_major_ = 0;
};

// Maps one planned resource of a Terraform type onto ARM shape.
class Mapper {
 public:
  Mapper(const Plan& plan, const Planned& p, Resource* out) : plan_(plan), p_(p), out_(*out) {}

  const Planned& planned() const { return p_; }
  const Plan& plan() const { return plan_; }
  Resource& out() { return out_; }

  // The attribute at `tf`, or nullptr when absent or null.
  const Json* Value(std::string_view tf) const;
  // True when after_unknown marks `tf` or an ancestor of it as known only after apply.
  bool Unknown(std::string_view tf) const;
  // The first of `names` that is present or unknown (renamed attributes:
  // enable_accelerated_networking / accelerated_networking_enabled); else names[0].
  std::string Either(std::string_view prefix, std::initializer_list<std::string_view> names) const;

  void Set(std::string_view arm, Json value);
  void MarkUnknown(std::string_view arm);

  // Typed reads: nullopt when absent, null or unknown; a wrong type records an
  // error naming the attribute and the file.
  std::optional<bool> Bool(std::string_view tf);
  std::optional<std::string> String(std::string_view tf);
  std::optional<double> Number(std::string_view tf);
  // The number of blocks at `tf` (0 when absent); records an error if not a list.
  size_t Blocks(std::string_view tf);

  // Copy helpers: when `tf` is unknown the ARM pointer is marked unknown; when
  // absent the default (if any) is written, as the provider would send it.
  void CopyString(std::string_view tf, std::string_view arm,
                  std::optional<std::string_view> dflt = std::nullopt);
  void CopyBool(std::string_view tf, std::string_view arm, std::optional<bool> dflt = std::nullopt,
                bool invert = false);
  // true -> `yes`, false -> `no` ("Enabled"/"Disabled").
  void CopyBoolEnum(std::string_view tf, std::string_view arm, std::optional<bool> dflt,
                    std::string_view yes = "Enabled", std::string_view no = "Disabled");
  void CopyNumber(std::string_view tf, std::string_view arm,
                  std::optional<double> dflt = std::nullopt, bool as_string = false);
  void CopyStringList(std::string_view tf, std::string_view arm);
  void CopyRaw(std::string_view tf, std::string_view arm);
  // An attribute holding a resource id: the known string, else the id of the
  // plan resource the configuration refers to, else marked unknown.
  void CopyId(std::string_view tf, std::string_view arm);
  // A list of ids written as [{"id": ...}, ...] at `arm`.
  void CopyIdList(std::string_view tf, std::string_view arm);
  // identity { type, identity_ids } -> identity { type, userAssignedIdentities }.
  void CopyIdentity(std::string_view tf = "identity");
  void CopyTags();

  // The resolved ids of an id attribute (known value or references); `unknown`
  // is set when the value is unknown and no reference resolves.
  std::vector<std::string> Ids(std::string_view tf, bool all, bool* unknown);

  Status status() const { return status_; }

 private:
  void Error(std::string_view tf, std::string_view expected, const Json& got);
  const Json* UnknownNode(std::string_view tf) const;

  const Plan& plan_;
  const Planned& p_;
  Resource& out_;
  Status status_;
};

// Fills `out` (type, name, body, unknown, scope) for azurerm types Gantry maps;
// returns false (leaving `out` alone) for other types.
bool MapAzurerm(Mapper& m);

// "/a/b" for dotted "a.b" with RFC 6901 escapes.
std::string PointerOfDotted(std::string_view dotted);
// "West Europe" -> "westeurope", as azurerm and ARM normalise locations.
std::string NormalizeLocation(std::string_view location);
// A short rendering of a JSON value for messages (at most ~60 characters).
std::string Preview(const Json& v);

}  // namespace gantry::assess::tf
