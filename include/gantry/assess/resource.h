// The resource model every part of `gantry assess` shares: one Azure resource
// in ARM shape, whatever it was read from (an ARM/Bicep template after
// expansion, a Terraform plan, or a live `az resource show` document).
//
// Readers turn their input into Resources; rules read only Resources, so a rule
// is written once against ARM property paths and holds for all three inputs.
// Terraform attributes are mapped onto the ARM paths with the provider's
// defaults applied (an absent `local_auth_enabled` becomes
// `properties.disableLocalAuth: false`), and values Terraform knows only after
// apply are listed in `unknown` instead of being guessed.
//
//   ASSIGN_OR_RETURN(SourceDoc doc, ReadSourceFile("main.json"));
//   ASSIGN_OR_RETURN(std::vector<Resource> rs, ExpandArmTemplate(doc, ArmOptions{}));
//   const Json* pna = rs[0].Get("properties.publicNetworkAccess");
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry::assess {

// A JSON input file with the line of every object and array in it, so that
// findings can point at the resource in the file (SARIF regions, table output).
struct SourceDoc {
  std::string path;  // as given by the user; "stdin" for standard input
  Json value;
  // JSON pointer (RFC 6901, "" = the root, "/resources/3") -> 1-based line of
  // the '{' or '[' that starts that object or array. Scalars are not listed.
  std::unordered_map<std::string, int> lines;

  // The line of `pointer`, or of its nearest listed ancestor; 1 when none is.
  int LineOf(std::string_view pointer) const;
};

// Appends `token` to `pointer` as one RFC 6901 reference token, without the
// leading '/' ("a/b~c" -> "a~1b~0c").
void AppendPointerToken(std::string_view token, std::string* pointer);

// Limits that keep hostile input from exhausting the process.
inline constexpr size_t kMaxInputBytes = 256ull << 20;  // one file
inline constexpr int kMaxJsonDepth = 256;               // nesting of arrays/objects

// Parses JSON text. Errors (DataLoss for malformed text, InvalidArgument for
// text over the limits) name `path`, the line and column.
Result<SourceDoc> ParseSource(std::string_view text, std::string path);
// Reads and parses a file ("-" reads standard input). NotFound/IoError name it.
Result<SourceDoc> ReadSourceFile(const std::string& path);

// Where a resource came from.
enum class Origin { kArm, kTerraform, kLive, kNode };
std::string_view OriginName(Origin o);  // "arm", "terraform", "live", "node"

struct SourceLocation {
  std::string file;     // SourceDoc::path; "" for the node
  int line = 0;         // 1-based; 0 when unknown
  std::string pointer;  // JSON pointer of the resource object in `file`
};

struct Resource {
  // The full ARM type as written, e.g. "Microsoft.MachineLearningServices/workspaces/computes".
  // ARM types are case-insensitive: compare with IsType().
  std::string type;
  // The full ARM name, segments joined by '/', e.g. "ws1/gpu-cluster".
  std::string name;
  // The resource id when it can be known
  // ("/subscriptions/<sub>/resourceGroups/<rg>/providers/<type segments>/<name segments>");
  // templates use PSRule's stub subscription and resource group (ArmOptions).
  std::string id;
  // How the user names the resource in the input: "resources[2]" or the symbolic name
  // for ARM, the Terraform address ("module.ml.azurerm_machine_learning_workspace.ws"),
  // or the id for live resources. Suppression globs match this and `name`.
  std::string address;
  std::string location;  // lower-case region ("eastus"); "" when unknown
  // The ARM resource object: type, name, location, tags, sku, kind, identity,
  // zones, properties, ... exactly as the ARM REST API would return it.
  Json body = Json::object();
  // JSON pointers into `body` (e.g. "/properties/publicNetworkAccess") whose
  // value is not known before deployment (Terraform "known after apply", ARM
  // `reference()` results, Key Vault parameter references).
  std::vector<std::string> unknown;
  // For extension resources (Microsoft.Insights/diagnosticSettings, autoscale
  // settings' target, locks): the id or full name of the resource they apply to.
  std::string scope;
  SourceLocation where;
  Origin origin = Origin::kArm;

  // Case-insensitive comparison of `type` with an ARM type.
  bool IsType(std::string_view arm_type) const;
  // The value at a dotted path ("properties.scaleSettings.minNodeCount";
  // "zones" for arrays), or nullptr when absent or null.
  const Json* Get(std::string_view dotted_path) const;
  // True when the dotted path, or an ancestor of it, is listed in `unknown`.
  bool IsUnknown(std::string_view dotted_path) const;
  // The tag value (tags are case-insensitive by name), or nullptr.
  const std::string* Tag(std::string_view name) const;
};

}  // namespace gantry::assess
