// Health profiles: loading, `extends` chains and overlays, built-in lookup.
//
// Each source text (a built-in or a user's file) is loaded on its own as a
// gantry::Config and checked, so syntax errors and wrong types name that file
// and line. The chain is then laid together with Config::Merge into the
// profile's Config, which the checks read their parameters from; every value
// in it still names the file and line it was written at.
#include "gantry/health/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "gantry/core/json.h"
#include "gantry/core/text.h"

namespace gantry::health {
namespace internal {
extern const std::vector<std::pair<std::string_view, std::string_view>> kBuiltinProfiles;
}  // namespace internal

namespace {

constexpr size_t kMaxExtendsDepth = 16;

std::string BuiltinOrigin(std::string_view stem) {
  return fmt::format("data/health/{}.yaml", stem);
}

bool ValidCheckId(std::string_view id) {
  if (id.empty()) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// One source text, validated on its own.
struct Layer {
  std::shared_ptr<const Config> config;
  std::string name, extends;
};

Result<Layer> LoadLayer(std::string_view text, std::string_view origin) {
  Layer layer;
  ASSIGN_OR_RETURN(Config cfg, Config::LoadString(text, origin));
  layer.config = std::make_shared<const Config>(std::move(cfg));
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
    if (!c.IsMap("checks")) {
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
  return layer;
}

// What a layer says about the check at `key`: off (false), on with the
// parameters it already has or defaults (true, or nothing), or parameters.
enum class CheckSetting { kOff, kOn, kParameters };

CheckSetting SettingOf(const Config& layer, const std::string& key) {
  if (!layer.Has(key)) return CheckSetting::kOn;  // "memory:" with nothing after it
  if (!layer.IsScalar(key)) return CheckSetting::kParameters;
  // LoadLayer let through only true/false spellings here.
  return layer.GetBool(key, true).value_or(true) ? CheckSetting::kOn : CheckSetting::kOff;
}

// `layer` laid over `merged` with Config::Merge: name, description and
// vm_sizes replace (vm_sizes as a whole list); a check's parameters merge key
// by key (maps merge, scalars and lists replace); `false` removes a check;
// `true` or nothing enables it, keeping the parameters it has (an empty map
// when it is new); new checks follow in the layer's order.
Result<Config> Apply(const Config& merged, const Config& layer) {
  ASSIGN_OR_RETURN(Config overlay, layer.Without("extends"));
  // "checks:" with nothing under it changes no check (a null would clear them all).
  if (!layer.Has("checks")) {
    ASSIGN_OR_RETURN(overlay, overlay.Without("checks"));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> have, merged.Keys("checks"));
  ASSIGN_OR_RETURN(std::vector<std::string> ids, layer.Keys("checks"));
  std::vector<std::string> off;
  for (const std::string& id : ids) {
    const std::string key = "checks." + id;
    switch (SettingOf(layer, key)) {
      case CheckSetting::kOff:
        off.push_back(key);
        break;
      case CheckSetting::kOn:
        if (std::find(have.begin(), have.end(), id) != have.end()) {
          ASSIGN_OR_RETURN(overlay, overlay.Without(key));
        } else {
          ASSIGN_OR_RETURN(overlay, overlay.With(key, Config::Empty(layer.origin())));
        }
        break;
      case CheckSetting::kParameters:
        break;
    }
  }
  Config out = merged.Merge(overlay);
  for (const std::string& key : off) {
    ASSIGN_OR_RETURN(out, out.Without(key));
  }
  return out;
}

}  // namespace

// Loads, resolves and merges layers (base first) into a Profile; a friend of
// Profile so that it fills the private fields.
struct ProfileBuilder {
  static Result<Profile> Make(const std::vector<Layer>& layers) {
    Config merged = Config::Empty("");
    for (const Layer& l : layers) {
      ASSIGN_OR_RETURN(merged, Apply(merged, *l.config));
    }
    Profile p;
    ASSIGN_OR_RETURN(p.name_, merged.GetString("name", ""));
    ASSIGN_OR_RETURN(p.description_, merged.GetString("description", ""));
    ASSIGN_OR_RETURN(p.vm_sizes_, merged.GetStringList("vm_sizes"));
    ASSIGN_OR_RETURN(p.check_ids_, merged.Keys("checks"));
    p.yaml_ = merged.ToYaml();
    p.config_ = std::make_shared<Config>(std::move(merged));
    for (const Layer& l : layers) p.layers_.push_back(l.config);
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
                                           Join(Profile::BuiltinNames(), ", ")));
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
    auto add = [&](const Profile& p, bool skip_seen) {
      for (const std::shared_ptr<const Config>& l : p.layers_) {
        if (skip_seen && seen.count(l->origin()) != 0) continue;
        seen.insert(l->origin());
        layers.push_back(Layer{l, "", ""});
      }
    };
    add(base, false);
    // Layers the base already has (an overlay that extends generic, over a
    // profile that extends generic too) are not applied twice: that would
    // undo the base's own settings.
    add(overlay, true);
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
                              Join(BuiltinNames(), ", ")));
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
  const std::string want = AsciiLower(vm_size);
  if (!want.empty()) {
    for (const std::string& name : BuiltinNames()) {
      ASSIGN_OR_RETURN(Profile p, Builtin(name));
      for (const std::string& s : p.vm_sizes()) {
        if (AsciiLower(s) == want) {
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
