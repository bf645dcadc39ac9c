// Health profiles: loading, `extends` chains and overlays, built-in lookup.
//
// Each source text (a built-in or a user's file) is first loaded on its own as
// a gantry::Config, so syntax errors and wrong types name that file and line.
// The chain is then merged with yaml-cpp into one YAML text, which is loaded
// again as the profile's Config: the checks read their parameters from that.
#include "gantry/health/profile.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "gantry/core/json.h"

namespace gantry::health {
namespace internal {
extern const std::vector<std::pair<std::string_view, std::string_view>> kBuiltinProfiles;
}  // namespace internal

namespace {

constexpr size_t kMaxExtendsDepth = 16;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string BuiltinOrigin(std::string_view stem) {
  return fmt::format("data/health/{}.yaml", stem);
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool ValidCheckId(std::string_view id) {
  if (id.empty()) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// One source text, validated on its own.
struct Layer {
  std::string origin;
  std::string text;
  std::shared_ptr<Config> config;
  YAML::Node root;
  std::string name, extends;
};

Result<Layer> LoadLayer(std::string_view text, std::string_view origin) {
  Layer layer;
  layer.origin = std::string(origin);
  layer.text = std::string(text);
  ASSIGN_OR_RETURN(Config cfg, Config::LoadString(text, origin));
  layer.config = std::make_shared<Config>(std::move(cfg));
  const Config& c = *layer.config;
  RETURN_IF_ERROR(c.CheckKnownKeys("", {"name", "description", "vm_sizes", "extends", "checks"}));
  ASSIGN_OR_RETURN(layer.name, c.GetString("name", ""));
  if (layer.name.empty()) {
    return InvalidArgument(fmt::format(
        "{}: the profile has no 'name'; add one at the top level (name: my_profile)", origin));
  }
  if (!c.IsScalar("name")) return InvalidArgument(c.Locate("name") + ": expected a string");
  ASSIGN_OR_RETURN(std::string description, c.GetString("description", ""));
  (void)description;
  if (c.Has("vm_sizes")) {
    ASSIGN_OR_RETURN(auto sizes, c.GetStringList("vm_sizes"));
    (void)sizes;
  }
  ASSIGN_OR_RETURN(layer.extends, c.GetString("extends", ""));
  if (c.Has("checks")) {
    if (c.IsScalar("checks") || !c.Keys("checks").ok()) {
      return InvalidArgument(
          fmt::format("{}: expected a map of check ids to parameters (cpu: {{sockets: 2}}), a list "
                      "or false",
                      c.Locate("checks")));
    }
    ASSIGN_OR_RETURN(std::vector<std::string> ids, c.Keys("checks"));
    for (const std::string& id : ids) {
      const std::string key = "checks." + id;
      if (!ValidCheckId(id)) {
        return InvalidArgument(fmt::format(
            "{}: '{}' is not a check id (lower-case letters, digits and _)", c.Locate(key), id));
      }
      if (c.IsScalar(key)) {
        Result<bool> on = c.GetBool(key, true);
        if (!on.ok()) {
          return InvalidArgument(fmt::format(
              "{}: a check's value is a map of parameters, a list (filesystems, services), "
              "true or false",
              c.Locate(key)));
        }
      }
    }
  }
  // yaml-cpp throws; the text already parsed above, but nothing may escape.
  try {
    layer.root = YAML::Load(layer.text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(fmt::format("{}: invalid YAML: {}", origin, e.what()));
  }
  if (!layer.root.IsMap()) layer.root = YAML::Node(YAML::NodeType::Map);
  return layer;
}

// Maps merge key by key; anything else replaces.
YAML::Node MergeValue(const YAML::Node& base, const YAML::Node& overlay) {
  if (!base.IsMap() || !overlay.IsMap()) return YAML::Clone(overlay);
  YAML::Node out(YAML::NodeType::Map);
  out.SetStyle(overlay.Style());  // {a: 1} stays on one line in --show-profile
  std::set<std::string> done;
  for (const auto& entry : base) {
    const std::string key = entry.first.Scalar();
    YAML::Node o = overlay[key];
    out[key] = o.IsDefined() ? MergeValue(entry.second, o) : YAML::Clone(entry.second);
    done.insert(key);
  }
  for (const auto& entry : overlay) {
    const std::string key = entry.first.Scalar();
    if (done.count(key) == 0) out[key] = YAML::Clone(entry.second);
  }
  return out;
}

struct Merged {
  std::string name, description;
  YAML::Node vm_sizes;
  std::vector<std::pair<std::string, YAML::Node>> checks;  // enabled, in order
};

bool IsFalse(const YAML::Node& n) {
  if (!n.IsScalar()) return false;
  std::string v = Lower(n.Scalar());
  return v == "false" || v == "no" || v == "off";
}
bool IsTrue(const YAML::Node& n) {
  if (n.IsNull()) return true;
  if (!n.IsScalar()) return false;
  std::string v = Lower(n.Scalar());
  return v == "true" || v == "yes" || v == "on";
}

void Apply(Merged* m, const YAML::Node& root) {
  if (root["name"]) m->name = root["name"].Scalar();
  if (root["description"]) m->description = root["description"].Scalar();
  if (root["vm_sizes"]) m->vm_sizes = YAML::Clone(root["vm_sizes"]);
  YAML::Node checks = root["checks"];
  if (!checks || !checks.IsMap()) return;
  for (const auto& entry : checks) {
    const std::string id = entry.first.Scalar();
    auto it = std::find_if(m->checks.begin(), m->checks.end(),
                           [&](const auto& c) { return c.first == id; });
    const YAML::Node& value = entry.second;
    if (IsFalse(value)) {
      if (it != m->checks.end()) m->checks.erase(it);
    } else if (IsTrue(value)) {
      if (it == m->checks.end()) m->checks.emplace_back(id, YAML::Node(YAML::NodeType::Map));
    } else if (it == m->checks.end()) {
      m->checks.emplace_back(id, YAML::Clone(value));
    } else {
      it->second = MergeValue(it->second, value);
    }
  }
}

}  // namespace

// Loads, resolves and merges layers (base first) into a Profile; a friend of
// Profile so that it fills the private fields.
struct ProfileBuilder {
  static Result<Profile> Make(const std::vector<Layer>& layers) {
    Merged m;
    for (const Layer& l : layers) Apply(&m, l.root);
    YAML::Emitter out;
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << m.name;
    if (!m.description.empty()) out << YAML::Key << "description" << YAML::Value << m.description;
    out << YAML::Key << "vm_sizes" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    std::vector<std::string> sizes;
    if (m.vm_sizes && m.vm_sizes.IsSequence()) {
      for (const auto& s : m.vm_sizes) {
        sizes.push_back(s.Scalar());
        out << s.Scalar();
      }
    }
    out << YAML::EndSeq;
    out << YAML::Key << "checks" << YAML::Value << YAML::BeginMap;
    std::vector<std::string> ids;
    for (const auto& [id, params] : m.checks) {
      out << YAML::Key << id << YAML::Value << params;
      ids.push_back(id);
    }
    out << YAML::EndMap << YAML::EndMap;
    if (!out.good()) {
      return Internal(
          fmt::format("profile '{}': emitting the merged YAML: {}", m.name, out.GetLastError()));
    }
    Profile p;
    p.yaml_ = std::string(out.c_str()) + "\n";
    ASSIGN_OR_RETURN(Config merged,
                     Config::LoadString(p.yaml_, fmt::format("<merged profile {}>", m.name)));
    p.config_ = std::make_shared<Config>(std::move(merged));
    p.name_ = m.name;
    p.description_ = m.description;
    p.vm_sizes_ = std::move(sizes);
    p.check_ids_ = std::move(ids);
    for (const Layer& l : layers) {
      p.layers_.push_back(l.config);
      p.sources_.emplace_back(l.origin, l.text);
    }
    return p;
  }

  static Result<std::vector<Layer>> Resolve(Layer top, std::vector<std::string>* chain) {
    chain->push_back(top.name);
    std::vector<Layer> out;
    if (!top.extends.empty()) {
      if (std::find(chain->begin(), chain->end(), top.extends) != chain->end() ||
          chain->size() > kMaxExtendsDepth) {
        std::string path;
        for (const auto& n : *chain) path += n + " -> ";
        return InvalidArgument(
            fmt::format("{}: 'extends: {}' makes a cycle ({}{}); a profile cannot extend itself",
                        top.config->Locate("extends"), top.extends, path, top.extends));
      }
      auto it = std::find_if(internal::kBuiltinProfiles.begin(), internal::kBuiltinProfiles.end(),
                             [&](const auto& e) { return e.first == top.extends; });
      if (it == internal::kBuiltinProfiles.end()) {
        return InvalidArgument(fmt::format("{}: 'extends: {}' is not a built-in profile ({})",
                                           top.config->Locate("extends"), top.extends,
                                           JoinNames(Profile::BuiltinNames())));
      }
      ASSIGN_OR_RETURN(Layer base, LoadLayer(it->second, BuiltinOrigin(it->first)));
      ASSIGN_OR_RETURN(out, Resolve(std::move(base), chain));
    }
    out.push_back(std::move(top));
    return out;
  }

  static Result<Profile> FromText(std::string_view yaml, std::string_view origin) {
    ASSIGN_OR_RETURN(Layer top, LoadLayer(yaml, origin));
    std::vector<std::string> chain;
    ASSIGN_OR_RETURN(std::vector<Layer> layers, Resolve(std::move(top), &chain));
    return Make(layers);
  }

  static Result<Profile> Extend(const Profile& base, const Profile& overlay) {
    std::vector<Layer> layers;
    std::set<std::string> seen;
    auto add = [&](const Profile& p, bool skip_seen) -> Status {
      for (const auto& [origin, text] : p.sources_) {
        if (skip_seen && seen.count(origin) != 0) continue;
        seen.insert(origin);
        ASSIGN_OR_RETURN(Layer l, LoadLayer(text, origin));
        layers.push_back(std::move(l));
      }
      return Status();
    };
    RETURN_IF_ERROR(add(base, false));
    // Layers the base already has (an overlay that extends generic, over a
    // profile that extends generic too) are not applied twice: that would
    // undo the base's own settings.
    RETURN_IF_ERROR(add(overlay, true));
    return Make(layers);
  }
};

Result<Profile> Profile::Builtin(std::string_view name) {
  for (const auto& [stem, text] : internal::kBuiltinProfiles) {
    if (stem != name) continue;
    ASSIGN_OR_RETURN(Profile p, ProfileBuilder::FromText(text, BuiltinOrigin(stem)));
    if (p.name() != stem) {
      return Internal(
          fmt::format("{}: name '{}' differs from the file name", BuiltinOrigin(stem), p.name()));
    }
    return p;
  }
  return NotFound(fmt::format("no built-in health profile '{}'; built-in profiles: {}", name,
                              JoinNames(BuiltinNames())));
}

std::vector<std::string> Profile::BuiltinNames() {
  std::vector<std::string> names;
  for (const auto& entry : internal::kBuiltinProfiles) names.emplace_back(entry.first);
  std::sort(names.begin(), names.end());
  return names;
}

Result<Profile> Profile::LoadFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return LoadString(text, path);
}

Result<Profile> Profile::LoadString(std::string_view yaml, std::string_view origin) {
  return ProfileBuilder::FromText(yaml, origin);
}

Result<Profile> Profile::ForVmSize(std::string_view vm_size, bool* known) {
  const std::string want = Lower(vm_size);
  if (!want.empty()) {
    for (const std::string& name : BuiltinNames()) {
      ASSIGN_OR_RETURN(Profile p, Builtin(name));
      for (const std::string& s : p.vm_sizes()) {
        if (Lower(s) == want) {
          if (known != nullptr) *known = true;
          return p;
        }
      }
    }
  }
  if (known != nullptr) *known = false;
  return Builtin("generic");
}

Result<Profile> Profile::Extend(const Profile& overlay) const {
  return ProfileBuilder::Extend(*this, overlay);
}

}  // namespace gantry::health
