// DetectKind and LoadInputs: from the paths a user gives `gantry assess` to
// Resources, whatever each file is.
#include "gantry/assess/inputs.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>

#include "gantry/core/text.h"

namespace gantry::assess {
namespace {

namespace fs = std::filesystem;

struct Input {
  std::string path;
  bool from_directory = false;
  SourceDoc doc;
  InputKind kind = InputKind::kLive;
  bool used = false;  // parameter files: applied to a template
};

bool EndsWithIgnoreCase(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && EqualsIgnoreCase(s.substr(s.size() - suffix.size()), suffix);
}

// Directories that hold tool state or dependencies, never inputs: .terraform
// (modules.json), .git, .vscode, node_modules.
bool SkipDirectory(const fs::path& p) {
  std::string name = p.filename().string();
  return (!name.empty() && name[0] == '.') || name == "node_modules";
}

Status Expand(const std::string& path, std::vector<Input>* out) {
  if (path == "-") {
    out->push_back(Input{path, false, {}, InputKind::kLive, false});
    return Status::Ok();
  }
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    return NotFound(fmt::format("{}: no such file or directory", path));
  }
  if (!fs::is_directory(st)) {
    out->push_back(Input{path, false, {}, InputKind::kLive, false});
    return Status::Ok();
  }
  std::vector<std::string> found;
  fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec);
  if (ec)
    return InvalidArgument(fmt::format("{}: cannot list the directory: {}", path, ec.message()));
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) {
      return InvalidArgument(fmt::format("{}: cannot list the directory: {}", path, ec.message()));
    }
    const fs::directory_entry& e = *it;
    std::error_code tec;
    if (e.is_directory(tec)) {
      if (SkipDirectory(e.path())) it.disable_recursion_pending();
      continue;
    }
    if (e.is_regular_file(tec) && EndsWithIgnoreCase(e.path().string(), ".json")) {
      found.push_back(e.path().string());
    }
  }
  std::sort(found.begin(), found.end());
  for (std::string& f : found)
    out->push_back(Input{std::move(f), true, {}, InputKind::kLive, false});
  return Status::Ok();
}

// "infra/main.json" -> "infra/main.parameters.json".
std::string ParametersNameFor(const std::string& tmpl) {
  std::string stem = tmpl;
  if (EndsWithIgnoreCase(stem, ".json")) stem.resize(stem.size() - 5);
  return stem + ".parameters.json";
}

bool SamePath(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::equivalent(a, b, ec)) return true;
  return fs::path(a).lexically_normal() == fs::path(b).lexically_normal();
}

// Looks like something other than an input: a JSON object with none of the
// members any resource document has (bicepconfig.json, package.json, ...).
bool NotAnInput(const SourceDoc& doc) {
  const Json& v = doc.value;
  if (!v.is_object()) return !v.is_array();
  for (const char* k : {"type", "id", "value", "name"}) {
    if (v.contains(k)) return false;
  }
  return true;
}

// Merges the "parameters" of parameter files, later files winning.
Status MergeParameters(const Input& in, Json* into) {
  auto p = in.doc.value.find("parameters");
  if (p == in.doc.value.end() || !p->is_object()) {
    return InvalidArgument(
        fmt::format("{}: /parameters: a parameter file needs a \"parameters\" object ({{\"name\": "
                    "{{\"value\": ...}}}})",
                    in.path));
  }
  for (auto it = p->begin(); it != p->end(); ++it) (*into)[it.key()] = *it;
  return Status::Ok();
}

}  // namespace

InputKind DetectKind(const SourceDoc& doc) {
  const Json& v = doc.value;
  if (!v.is_object()) return InputKind::kLive;
  auto schema = v.find("$schema");
  if (schema != v.end() && schema->is_string()) {
    std::string s = AsciiLower(schema->get<std::string>());
    // deploymentTemplate.json#, subscriptionDeploymentTemplate.json#, ...
    if (s.find("deploymenttemplate.json") != std::string::npos) return InputKind::kArmTemplate;
    if (s.find("deploymentparameters.json") != std::string::npos) return InputKind::kArmParameters;
  }
  if (v.contains("terraform_version")) return InputKind::kTerraformPlan;
  if (schema == v.end() && v.contains("contentVersion")) {
    if (v.contains("resources")) return InputKind::kArmTemplate;
    if (v.contains("parameters")) return InputKind::kArmParameters;
  }
  return InputKind::kLive;
}

Result<LoadedInputs> LoadInputs(const std::vector<std::string>& paths, const LoadOptions& options) {
  std::vector<Input> inputs;
  for (const std::string& p : paths) RETURN_IF_ERROR(Expand(p, &inputs));
  for (Input& in : inputs) {
    ASSIGN_OR_RETURN(in.doc, ReadSourceFile(in.path));
    in.kind = DetectKind(in.doc);
  }
  std::vector<Input> explicit_params;
  for (const std::string& p : options.parameter_files) {
    Input in{p, false, {}, InputKind::kArmParameters, false};
    ASSIGN_OR_RETURN(in.doc, ReadSourceFile(p));
    if (DetectKind(in.doc) != InputKind::kArmParameters) {
      return InvalidArgument(
          fmt::format("{}: not an ARM parameter file (expected \"$schema\" ending in "
                      "deploymentParameters.json# and a \"parameters\" object)",
                      p));
    }
    explicit_params.push_back(std::move(in));
  }
  size_t templates = 0;
  for (const Input& in : inputs) templates += in.kind == InputKind::kArmTemplate ? 1 : 0;
  if (!explicit_params.empty() && templates == 0) {
    return InvalidArgument(
        fmt::format("{}: a parameter file was given but no ARM template is among the inputs",
                    explicit_params.front().path));
  }

  LoadedInputs out;
  for (Input& in : inputs) {
    out.files.push_back(in.path);
    switch (in.kind) {
      case InputKind::kArmTemplate: {
        ArmOptions arm = options.arm;
        Json params = Json::object();
        std::vector<std::string> used;
        auto apply = [&](Input& p) -> Status {
          RETURN_IF_ERROR(MergeParameters(p, &params));
          p.used = true;
          used.push_back(p.path);
          return Status::Ok();
        };
        // Which parameter files apply, first match wins: those given with
        // --parameters (all of them when this is the only template, else those
        // named after it); a parameter file given as an input path next to a
        // single template; "<name>.parameters.json" among the inputs; the same
        // file beside the template on disk.
        for (Input& p : explicit_params) {
          if (templates == 1 || SamePath(p.path, ParametersNameFor(in.path))) {
            RETURN_IF_ERROR(apply(p));
          }
        }
        if (used.empty() && templates == 1) {
          for (Input& p : inputs) {
            if (p.kind == InputKind::kArmParameters && !p.from_directory) RETURN_IF_ERROR(apply(p));
          }
        }
        const std::string beside = ParametersNameFor(in.path);
        if (used.empty()) {
          for (Input& p : inputs) {
            if (p.kind == InputKind::kArmParameters && SamePath(p.path, beside)) {
              RETURN_IF_ERROR(apply(p));
            }
          }
        }
        std::error_code ec;
        if (used.empty() && in.path != "-" && fs::is_regular_file(beside, ec)) {
          Input p{beside, false, {}, InputKind::kArmParameters, false};
          ASSIGN_OR_RETURN(p.doc, ReadSourceFile(beside));
          if (DetectKind(p.doc) == InputKind::kArmParameters) {
            RETURN_IF_ERROR(apply(p));
            out.files.push_back(beside);
          }
        }
        arm.parameters = std::move(params);
        arm.parameters_file = Join(used, ", ");
        ASSIGN_OR_RETURN(std::vector<Resource> rs, ExpandArmTemplate(in.doc, arm));
        for (Resource& r : rs) out.resources.push_back(std::move(r));
        break;
      }
      case InputKind::kTerraformPlan: {
        ASSIGN_OR_RETURN(std::vector<Resource> rs, ReadTerraformPlan(in.doc));
        for (Resource& r : rs) out.resources.push_back(std::move(r));
        break;
      }
      case InputKind::kLive: {
        Result<std::vector<Resource>> rs = ReadLiveResources(in.doc);
        if (!rs.ok()) {
          // A directory holds other JSON too; only files given by name must be inputs.
          if (in.from_directory && NotAnInput(in.doc)) {
            out.skipped.push_back(in.path);
            break;
          }
          return rs.status();
        }
        for (Resource& r : *rs) out.resources.push_back(std::move(r));
        break;
      }
      case InputKind::kArmParameters:
        break;  // applied to their templates above; unused ones are checked below
    }
  }
  for (const Input& p : explicit_params) {
    if (!p.used) {
      return InvalidArgument(fmt::format(
          "{}: {} templates are given and none is named after this parameter file; name it "
          "<template>.parameters.json beside its template, or assess that template alone",
          p.path, templates));
    }
  }
  for (const Input& p : inputs) {
    if (p.kind != InputKind::kArmParameters || p.used) continue;
    if (!p.from_directory) {
      return InvalidArgument(
          fmt::format("{}: a parameter file, but no template among the inputs is named after it "
                      "(<template>.parameters.json); pass it with the template",
                      p.path));
    }
    out.skipped.push_back(p.path);
  }
  return out;
}

}  // namespace gantry::assess
