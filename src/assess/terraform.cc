// ReadTerraformPlan: `terraform show -json` output -> Resources in ARM shape.
//
// The plan is read in three passes: index every planned resource instance
// (planned_values, child modules included) together with its change and its
// configuration block; settle each resource's name and id (its address when
// the id is known only after apply) so that references resolve to the same
// strings everywhere; then map each managed, not-deleted resource.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "gantry/assess/inputs.h"
#include "gantry/core/text.h"
#include "tf_plan.h"

namespace gantry::assess {
namespace tf {
namespace {

// More resources than any real plan holds; past this the input is hostile or
// should be split, and holding it would only exhaust memory.
constexpr size_t kMaxPlanResources = 100000;
// Module nesting and var/output chains deeper than this are not real configurations.
constexpr int kMaxModuleDepth = 64;
constexpr int kMaxReferenceHops = 32;

std::string EscapeToken(std::string_view s) {
  std::string out;
  AppendPointerToken(s, &out);
  return out;
}

std::string_view KindOf(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return "a number";
    default:
      return "a binary value";
  }
}

// The instance key as Terraform writes it in addresses: 0 or "a".
std::string RenderIndex(const Json& index) {
  if (index.is_number_integer() || index.is_number_unsigned()) return index.dump();
  if (index.is_string()) return "\"" + index.get<std::string>() + "\"";
  return "";
}

// "module.a[0].module.b[\"x\"]" -> {"a", "b"}; the configuration has no instance keys.
std::vector<std::string> ModulePathOf(std::string_view address) {
  std::vector<std::string> path;
  size_t i = 0;
  while (i < address.size()) {
    if (address.compare(i, 7, "module.") != 0) break;
    i += 7;
    size_t start = i;
    while (i < address.size() && address[i] != '.' && address[i] != '[') ++i;
    path.emplace_back(address.substr(start, i - start));
    if (i < address.size() && address[i] == '[') {
      bool quoted = false;
      for (++i; i < address.size(); ++i) {
        if (address[i] == '\\' && quoted) {
          ++i;
        } else if (address[i] == '"') {
          quoted = !quoted;
        } else if (address[i] == ']' && !quoted) {
          ++i;
          break;
        }
      }
    }
    if (i < address.size() && address[i] == '.') ++i;
  }
  return path;
}

// The parent module instance of "module.a[0].module.b": "module.a[0]".
std::string ParentInstance(std::string_view instance) {
  // The last ".module." not inside an instance key.
  size_t cut = std::string_view::npos;
  bool quoted = false;
  for (size_t i = 0; i + 8 <= instance.size(); ++i) {
    char c = instance[i];
    if (c == '"' && (i == 0 || instance[i - 1] != '\\')) quoted = !quoted;
    if (!quoted && instance.compare(i, 8, ".module.") == 0) cut = i;
  }
  return cut == std::string_view::npos ? std::string() : std::string(instance.substr(0, cut));
}

std::string JoinPath(const std::vector<std::string>& path) { return Join(path, "."); }

// The node at a dotted Terraform path ("a.0.b") under `root`, or nullptr.
const Json* Walk(const Json* root, std::string_view dotted) {
  const Json* cur = root;
  size_t start = 0;
  while (cur != nullptr) {
    size_t dot = dotted.find('.', start);
    std::string_view seg =
        dotted.substr(start, dot == std::string_view::npos ? dotted.npos : dot - start);
    if (cur->is_object()) {
      auto it = cur->find(seg);
      cur = it == cur->end() ? nullptr : &*it;
    } else if (cur->is_array()) {
      size_t idx = 0;
      if (seg.empty() || !ParseNumber(seg, &idx) || idx >= cur->size()) return nullptr;
      cur = &(*cur)[idx];
    } else {
      return nullptr;
    }
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return cur;
}

}  // namespace

std::string PointerOfDotted(std::string_view dotted) {
  std::string out;
  size_t start = 0;
  while (start <= dotted.size()) {
    size_t dot = dotted.find('.', start);
    out += '/';
    out += EscapeToken(
        dotted.substr(start, dot == std::string_view::npos ? dotted.npos : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return out;
}

std::string NormalizeLocation(std::string_view location) {
  std::string out;
  out.reserve(location.size());
  for (char c : location) {
    if (c != ' ') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

std::string Preview(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

// ------------------------------------------------------------------ Plan --

Status Plan::Build() {
  const Json& root = doc_.value;
  if (!root.is_object()) {
    return InvalidArgument(fmt::format(
        "{}: a Terraform plan is a JSON object (`terraform show -json plan.out`), found {}",
        doc_.path, KindOf(root)));
  }
  // A plan has planned_values; `terraform show -json` of a state has values
  // of the same shape, which describe what is deployed.
  const char* section = "planned_values";
  auto pv = root.find("planned_values");
  if (pv == root.end()) {
    section = "values";
    pv = root.find("values");
  }
  if (pv == root.end() || pv->is_null()) {
    return InvalidArgument(fmt::format(
        "{}: no planned_values: this is not the JSON of a Terraform plan; write it with "
        "`terraform plan -out plan.out && terraform show -json plan.out > plan.json`",
        doc_.path));
  }
  std::string pointer = std::string("/") + section;
  if (!pv->is_object()) {
    return InvalidArgument(
        fmt::format("{}: {}: expected an object, found {}", doc_.path, pointer, KindOf(*pv)));
  }
  auto rm = pv->find("root_module");
  if (rm != pv->end() && !rm->is_null()) {
    RETURN_IF_ERROR(WalkModule(*rm, pointer + "/root_module", 0));
  }
  RETURN_IF_ERROR(IndexChanges());
  auto cfg = root.find("configuration");
  if (cfg != root.end() && cfg->is_object()) {
    auto crm = cfg->find("root_module");
    if (crm != cfg->end() && crm->is_object()) {
      RETURN_IF_ERROR(IndexConfig(*crm, "/configuration/root_module", {}, 0));
    }
  }
  for (Planned& p : resources_) {
    auto it = config_resources_.find(JoinPath(p.module_path) + "|" + p.type + "." + p.label);
    if (it != config_resources_.end() && p.mode == "managed") p.config = it->second;
  }
  DetectProvider();
  for (Planned& p : resources_) SettleIdentity(&p);
  return Status::Ok();
}

Status Plan::WalkModule(const Json& mod, const std::string& pointer, int depth) {
  const std::string& file = doc_.path;
  if (depth > kMaxModuleDepth) {
    return InvalidArgument(fmt::format("{}: {}: modules nested deeper than {}; not a real plan",
                                       file, pointer, kMaxModuleDepth));
  }
  if (!mod.is_object()) {
    return InvalidArgument(
        fmt::format("{}: {}: expected a module object, found {}", file, pointer, KindOf(mod)));
  }
  std::string module_address;
  if (depth > 0) {
    auto a = mod.find("address");
    if (a == mod.end() || !a->is_string()) {
      return InvalidArgument(fmt::format(
          "{}: {}/address: a child module needs its address (\"module.<name>\")", file, pointer));
    }
    module_address = a->get<std::string>();
    module_instances_.push_back(module_address);
  }
  std::vector<std::string> module_path = ModulePathOf(module_address);

  auto rs = mod.find("resources");
  if (rs != mod.end() && !rs->is_null()) {
    if (!rs->is_array()) {
      return InvalidArgument(
          fmt::format("{}: {}/resources: expected an array, found {}", file, pointer, KindOf(*rs)));
    }
    for (size_t i = 0; i < rs->size(); ++i) {
      const Json& r = (*rs)[i];
      std::string rp = fmt::format("{}/resources/{}", pointer, i);
      if (!r.is_object()) {
        return InvalidArgument(
            fmt::format("{}: {}: expected a resource object, found {}", file, rp, KindOf(r)));
      }
      if (resources_.size() >= kMaxPlanResources) {
        return InvalidArgument(
            fmt::format("{}: {}: more than {} resources in one plan; split the configuration", file,
                        rp, kMaxPlanResources));
      }
      Planned p;
      p.pointer = rp;
      p.module_address = module_address;
      p.module_path = module_path;
      auto str = [&](const char* key, std::string* out, bool required) -> Status {
        auto it = r.find(key);
        if (it == r.end() || it->is_null()) {
          if (!required) return Status::Ok();
          return InvalidArgument(
              fmt::format("{}: {}/{}: a planned resource needs \"{}\"", file, rp, key, key));
        }
        if (!it->is_string()) {
          return InvalidArgument(
              fmt::format("{}: {}/{}: expected a string, found {}", file, rp, key, KindOf(*it)));
        }
        *out = it->get<std::string>();
        return Status::Ok();
      };
      RETURN_IF_ERROR(str("type", &p.type, true));
      RETURN_IF_ERROR(str("name", &p.label, true));
      RETURN_IF_ERROR(str("mode", &p.mode, false));
      RETURN_IF_ERROR(str("address", &p.address, false));
      if (p.mode.empty()) p.mode = "managed";
      auto idx = r.find("index");
      if (idx != r.end()) p.index = RenderIndex(*idx);
      if (p.address.empty()) {
        p.address = (module_address.empty() ? "" : module_address + ".") +
                    (p.mode == "data" ? "data." : "") + p.type + "." + p.label +
                    (p.index.empty() ? "" : "[" + p.index + "]");
      }
      static const Json kEmpty = Json::object();
      auto v = r.find("values");
      if (v == r.end() || v->is_null()) {
        p.values = &kEmpty;
      } else if (!v->is_object()) {
        return InvalidArgument(
            fmt::format("{}: {}/values: expected an object, found {}", file, rp, KindOf(*v)));
      } else {
        p.values = &*v;
      }
      if (by_address_.count(p.address) != 0) {
        return InvalidArgument(
            fmt::format("{}: {}: resource address '{}' appears twice", file, rp, p.address));
      }
      by_address_.emplace(p.address, resources_.size());
      std::string base =
          module_address + "|" + (p.mode == "data" ? "data." : "") + p.type + "." + p.label;
      by_base_[base].push_back(resources_.size());
      resources_.push_back(std::move(p));
    }
  }
  auto cm = mod.find("child_modules");
  if (cm != mod.end() && !cm->is_null()) {
    if (!cm->is_array()) {
      return InvalidArgument(fmt::format("{}: {}/child_modules: expected an array, found {}", file,
                                         pointer, KindOf(*cm)));
    }
    for (size_t i = 0; i < cm->size(); ++i) {
      RETURN_IF_ERROR(
          WalkModule((*cm)[i], fmt::format("{}/child_modules/{}", pointer, i), depth + 1));
    }
  }
  return Status::Ok();
}

Status Plan::IndexChanges() {
  const std::string& file = doc_.path;
  auto rc = doc_.value.find("resource_changes");
  if (rc == doc_.value.end() || rc->is_null()) return Status::Ok();
  if (!rc->is_array()) {
    return InvalidArgument(
        fmt::format("{}: /resource_changes: expected an array, found {}", file, KindOf(*rc)));
  }
  for (size_t i = 0; i < rc->size(); ++i) {
    const Json& c = (*rc)[i];
    std::string cp = fmt::format("/resource_changes/{}", i);
    if (!c.is_object()) {
      return InvalidArgument(
          fmt::format("{}: {}: expected a change object, found {}", file, cp, KindOf(c)));
    }
    auto a = c.find("address");
    if (a == c.end() || !a->is_string()) {
      return InvalidArgument(
          fmt::format("{}: {}/address: a resource change needs its address", file, cp));
    }
    auto it = by_address_.find(a->get<std::string>());
    // Resources the plan deletes are not in planned_values; nothing to attach to.
    if (it == by_address_.end()) continue;
    Planned& p = resources_[it->second];
    auto ch = c.find("change");
    if (ch == c.end() || ch->is_null()) continue;
    if (!ch->is_object()) {
      return InvalidArgument(
          fmt::format("{}: {}/change: expected an object, found {}", file, cp, KindOf(*ch)));
    }
    auto actions = ch->find("actions");
    if (actions != ch->end() && !actions->is_null()) {
      if (!actions->is_array()) {
        return InvalidArgument(fmt::format("{}: {}/change/actions: expected an array, found {}",
                                           file, cp, KindOf(*actions)));
      }
      p.deleted = actions->size() == 1 && (*actions)[0].is_string() &&
                  (*actions)[0].get<std::string>() == "delete";
    }
    auto au = ch->find("after_unknown");
    if (au != ch->end() && (au->is_object() || au->is_boolean())) p.after_unknown = &*au;
  }
  return Status::Ok();
}

Status Plan::IndexConfig(const Json& mod, const std::string& pointer, std::vector<std::string> path,
                         int depth) {
  if (depth > kMaxModuleDepth) {
    return InvalidArgument(fmt::format("{}: {}: module calls nested deeper than {}", doc_.path,
                                       pointer, kMaxModuleDepth));
  }
  std::string key = JoinPath(path);
  config_modules_[key] = &mod;
  auto rs = mod.find("resources");
  if (rs != mod.end() && rs->is_array()) {
    for (const Json& r : *rs) {
      if (!r.is_object()) continue;
      auto a = r.find("address");
      if (a == r.end() || !a->is_string()) continue;
      config_resources_[key + "|" + a->get<std::string>()] = &r;
    }
  }
  auto calls = mod.find("module_calls");
  if (calls != mod.end() && calls->is_object()) {
    for (auto it = calls->begin(); it != calls->end(); ++it) {
      if (!it->is_object()) continue;
      std::vector<std::string> child = path;
      child.push_back(it.key());
      config_calls_[JoinPath(child)] = &*it;
      auto m = it->find("module");
      if (m != it->end() && m->is_object()) {
        RETURN_IF_ERROR(IndexConfig(
            *m, pointer + "/module_calls/" + EscapeToken(it.key()) + "/module", child, depth + 1));
      }
    }
  }
  return Status::Ok();
}

void Plan::DetectProvider() {
  // configuration.provider_config.<key>{name: "azurerm", version_constraint: "~> 3.0"}.
  // A constraint that pins a major ("~> 3.0", "= 4.1.0", "3.116.0", ">= 3.0, < 4.0")
  // says which provider made the plan; ">= 3.0" alone does not (it takes the newest).
  auto cfg = doc_.value.find("configuration");
  if (cfg == doc_.value.end() || !cfg->is_object()) return;
  auto pc = cfg->find("provider_config");
  if (pc == cfg->end() || !pc->is_object()) return;
  for (const Json& prov : *pc) {
    if (!prov.is_object()) continue;
    auto name = prov.find("name");
    if (name == prov.end() || !name->is_string() || name->get<std::string>() != "azurerm") continue;
    auto vc = prov.find("version_constraint");
    if (vc == prov.end() || !vc->is_string()) continue;
    std::string c = vc->get<std::string>();
    int pinned = 0, upper = 0;
    size_t i = 0;
    while (i < c.size()) {
      while (i < c.size() && (c[i] == ' ' || c[i] == ',')) ++i;
      size_t op_start = i;
      while (i < c.size() && std::string_view("~>=<!").find(c[i]) != std::string_view::npos) ++i;
      std::string op = c.substr(op_start, i - op_start);
      while (i < c.size() && c[i] == ' ') ++i;
      size_t num_start = i;
      while (i < c.size() && std::isdigit(static_cast<unsigned char>(c[i]))) ++i;
      int major = 0;
      if (i == num_start ||
          !ParseNumber(std::string_view(c).substr(num_start, i - num_start), &major)) {
        while (i < c.size() && c[i] != ',') ++i;
        continue;
      }
      // "< 4.0" caps at 3; "<= 3.5" at 3.
      bool minor_zero = c.compare(i, 2, ".0") == 0 || i == c.size() || c[i] == ',';
      while (i < c.size() && c[i] != ',') ++i;
      if (op.empty() || op == "=" || op == "~>") {
        pinned = major;
      } else if (op == "<") {
        upper = minor_zero ? major - 1 : major;
      } else if (op == "<=") {
        upper = major;
      }
    }
    provider_major_ = pinned != 0 ? pinned : upper;
    return;
  }
}

void Plan::SettleIdentity(Planned* p) const {
  const Json& v = *p->values;
  auto unknown = [&](const char* key) {
    const Json* au = p->after_unknown;
    if (au == nullptr) return false;
    if (au->is_boolean()) return au->get<bool>();
    auto it = au->find(key);
    return it != au->end() && it->is_boolean() && it->get<bool>();
  };
  auto name = v.find("name");
  if (name != v.end() && name->is_string() && !name->get<std::string>().empty()) {
    p->name = name->get<std::string>();
  } else {
    p->name = p->label;
    p->name_unknown = unknown("name");
  }
  auto id = v.find("id");
  if (id != v.end() && id->is_string() && !id->get<std::string>().empty()) {
    p->id = id->get<std::string>();
  } else {
    p->id = p->address;
    p->id_unknown = true;
  }
  auto loc = v.find("location");
  if (loc != v.end() && loc->is_string()) p->location = NormalizeLocation(loc->get<std::string>());
}

std::vector<const Planned*> Plan::Referenced(const Planned& from, std::string_view expr_path,
                                             bool all) const {
  std::vector<const Planned*> out;
  if (from.config == nullptr) return out;
  auto ex = from.config->find("expressions");
  if (ex == from.config->end()) return out;
  const Json* node = Walk(&*ex, expr_path);
  if (node == nullptr || !node->is_object()) return out;
  auto refs = node->find("references");
  if (refs == node->end()) return out;
  Resolve(*refs, ModuleCtx{from.module_address, from.module_path}, from, all, 0, &out);
  return out;
}

void Plan::Resolve(const Json& refs, const ModuleCtx& ctx, const Planned& from, bool all, int depth,
                   std::vector<const Planned*>* out) const {
  if (!refs.is_array() || depth > kMaxReferenceHops) return;
  auto add = [&](const Planned* p) {
    if (std::find(out->begin(), out->end(), p) == out->end()) out->push_back(p);
  };
  for (const Json& rj : refs) {
    if (!rj.is_string()) continue;
    std::string_view r = rj.get_ref<const std::string&>();
    auto starts = [&](std::string_view prefix) { return r.substr(0, prefix.size()) == prefix; };
    if (starts("var.")) {
      // A module input: follow the caller's expression for it, one module up.
      if (ctx.path.empty()) continue;
      std::string var(r.substr(4));
      var = var.substr(0, var.find_first_of(".["));
      auto call = config_calls_.find(JoinPath(ctx.path));
      if (call == config_calls_.end()) continue;
      const Json* expr = Walk(call->second, "expressions." + var);
      if (expr == nullptr || !expr->is_object() || !expr->contains("references")) continue;
      ModuleCtx parent{ParentInstance(ctx.instance),
                       std::vector<std::string>(ctx.path.begin(), ctx.path.end() - 1)};
      Resolve((*expr)["references"], parent, from, all, depth + 1, out);
      continue;
    }
    if (starts("module.")) {
      // A module output: follow the output's expression inside that module.
      std::string_view rest = r.substr(7);
      size_t dot = rest.find_first_of(".[");
      if (dot == std::string_view::npos) continue;
      std::string mod(rest.substr(0, dot));
      std::string_view after = rest.substr(dot);
      if (after.front() == '[') {
        size_t close = after.find(']');
        if (close == std::string_view::npos) continue;
        after = after.substr(close + 1);
      }
      if (after.empty() || after.front() != '.') continue;
      std::string output(after.substr(1));
      output = output.substr(0, output.find_first_of(".["));
      std::vector<std::string> child_path = ctx.path;
      child_path.push_back(mod);
      auto cm = config_modules_.find(JoinPath(child_path));
      if (cm == config_modules_.end()) continue;
      const Json* expr = Walk(cm->second, "outputs." + output + ".expression");
      if (expr == nullptr || !expr->is_object() || !expr->contains("references")) continue;
      std::string inst = (ctx.instance.empty() ? "" : ctx.instance + ".") + "module." + mod;
      if (std::find(module_instances_.begin(), module_instances_.end(), inst) ==
          module_instances_.end()) {
        for (const std::string& m : module_instances_) {
          if (m.compare(0, inst.size() + 1, inst + "[") == 0) {
            inst = m;
            break;
          }
        }
      }
      Resolve((*expr)["references"], ModuleCtx{inst, child_path}, from, all, depth + 1, out);
      continue;
    }
    // Data sources, locals, count/each and the like name no planned managed resource.
    if (starts("data.") || starts("local.") || starts("count.") || starts("each.") ||
        starts("path.") || starts("self.") || starts("terraform.")) {
      continue;
    }
    size_t dot = r.find('.');
    if (dot == std::string_view::npos) continue;
    size_t end = r.find_first_of(".[", dot + 1);
    std::string base(r.substr(0, end));
    std::string index;
    if (end != std::string_view::npos && r[end] == '[') {
      size_t close = r.find(']', end);
      if (close == std::string_view::npos) continue;
      index = std::string(r.substr(end + 1, close - end - 1));
    }
    auto it = by_base_.find(ctx.instance + "|" + base);
    if (it == by_base_.end() || it->second.empty()) continue;
    const std::vector<size_t>& inst = it->second;
    if (!index.empty()) {
      for (size_t i : inst) {
        if (resources_[i].index == index) add(&resources_[i]);
      }
    } else if (all) {
      for (size_t i : inst) add(&resources_[i]);
    } else {
      const Planned* pick = &resources_[inst.front()];
      if (!from.index.empty()) {
        for (size_t i : inst) {
          if (resources_[i].index == from.index) pick = &resources_[i];
        }
      }
      add(pick);
    }
  }
}

// ---------------------------------------------------------------- Mapper --

const Json* Mapper::Value(std::string_view tf) const {
  const Json* v = Walk(p_.values, tf);
  return v == nullptr || v->is_null() ? nullptr : v;
}

const Json* Mapper::UnknownNode(std::string_view tf) const {
  // Walk after_unknown; a `true` on the way marks everything below it.
  const Json* cur = p_.after_unknown;
  if (cur == nullptr) return nullptr;
  size_t start = 0;
  while (true) {
    if (cur->is_boolean()) return cur;
    size_t dot = tf.find('.', start);
    std::string_view seg = tf.substr(start, dot == std::string_view::npos ? tf.npos : dot - start);
    if (cur->is_object()) {
      auto it = cur->find(seg);
      if (it == cur->end()) return nullptr;
      cur = &*it;
    } else if (cur->is_array()) {
      size_t idx = 0;
      if (!ParseNumber(seg, &idx) || idx >= cur->size()) return nullptr;
      cur = &(*cur)[idx];
    } else {
      return nullptr;
    }
    if (dot == std::string_view::npos) return cur;
    start = dot + 1;
  }
}

bool Mapper::Unknown(std::string_view tf) const {
  const Json* n = UnknownNode(tf);
  if (n == nullptr || !n->is_boolean() || !n->get<bool>()) return false;
  // Terraform marks every Optional+Computed attribute the configuration leaves
  // out as known after apply; the provider sends nothing for it and the
  // service applies its default, so for the rules it is absent, not unknown.
  if (p_.config != nullptr) {
    auto ex = p_.config->find("expressions");
    if (ex != p_.config->end() && ex->is_object()) {
      size_t dot = tf.find('.');
      std::string_view top = tf.substr(0, dot);
      if (ex->find(top) == ex->end()) return false;
      const Json* e = Walk(&*ex, tf);
      // Inside a configured block the attribute itself must be configured too.
      if (e == nullptr && dot != std::string_view::npos) {
        const Json* parent = Walk(&*ex, tf.substr(0, tf.rfind('.')));
        if (parent != nullptr && parent->is_object()) return false;
      }
    }
  }
  return true;
}

std::string Mapper::Either(std::string_view prefix,
                           std::initializer_list<std::string_view> names) const {
  for (std::string_view n : names) {
    std::string path = std::string(prefix) + std::string(n);
    if (Value(path) != nullptr || Unknown(path)) return path;
  }
  return std::string(prefix) + std::string(*names.begin());
}

void Mapper::Set(std::string_view arm, Json value) {
  try {
    out_.body[Json::json_pointer(std::string(arm))] = std::move(value);
  } catch (const std::exception& e) {
    // Only a mapping bug can get here (a pointer through a scalar we wrote).
    if (status_.ok()) {
      status_ = Internal(fmt::format("{}: {}: cannot write {} into the ARM body: {}",
                                     plan_.doc().path, p_.address, arm, e.what()));
    }
  }
}

void Mapper::MarkUnknown(std::string_view arm) {
  std::string a(arm);
  if (std::find(out_.unknown.begin(), out_.unknown.end(), a) == out_.unknown.end()) {
    out_.unknown.push_back(std::move(a));
  }
}

void Mapper::Error(std::string_view tf, std::string_view expected, const Json& got) {
  if (!status_.ok()) return;
  status_ = InvalidArgument(fmt::format("{}: {}/values{}: '{}' of {} must be {}, found {} {}",
                                        plan_.doc().path, p_.pointer, PointerOfDotted(tf), tf,
                                        p_.address, expected, KindOf(got), Preview(got)));
}

std::optional<bool> Mapper::Bool(std::string_view tf) {
  if (Unknown(tf)) return std::nullopt;
  const Json* v = Value(tf);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) {
    Error(tf, "a boolean", *v);
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<std::string> Mapper::String(std::string_view tf) {
  if (Unknown(tf)) return std::nullopt;
  const Json* v = Value(tf);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) {
    Error(tf, "a string", *v);
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::optional<double> Mapper::Number(std::string_view tf) {
  if (Unknown(tf)) return std::nullopt;
  const Json* v = Value(tf);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) {
    Error(tf, "a number", *v);
    return std::nullopt;
  }
  return v->get<double>();
}

size_t Mapper::Blocks(std::string_view tf) {
  const Json* v = Value(tf);
  if (v == nullptr) return 0;
  if (!v->is_array()) {
    Error(tf, "a list of blocks", *v);
    return 0;
  }
  return v->size();
}

void Mapper::CopyString(std::string_view tf, std::string_view arm,
                        std::optional<std::string_view> dflt) {
  if (Unknown(tf)) return MarkUnknown(arm);
  std::optional<std::string> s = String(tf);
  if (s) {
    Set(arm, *s);
  } else if (dflt && Value(tf) == nullptr) {
    Set(arm, std::string(*dflt));
  }
}

void Mapper::CopyBool(std::string_view tf, std::string_view arm, std::optional<bool> dflt,
                      bool invert) {
  if (Unknown(tf)) return MarkUnknown(arm);
  std::optional<bool> b = Bool(tf);
  if (!b && Value(tf) == nullptr) b = dflt;
  if (b) Set(arm, invert ? !*b : *b);
}

void Mapper::CopyBoolEnum(std::string_view tf, std::string_view arm, std::optional<bool> dflt,
                          std::string_view yes, std::string_view no) {
  if (Unknown(tf)) return MarkUnknown(arm);
  std::optional<bool> b = Bool(tf);
  if (!b && Value(tf) == nullptr) b = dflt;
  if (b) Set(arm, std::string(*b ? yes : no));
}

void Mapper::CopyNumber(std::string_view tf, std::string_view arm, std::optional<double> dflt,
                        bool as_string) {
  if (Unknown(tf)) return MarkUnknown(arm);
  const Json* v = Value(tf);
  Json n;
  if (v != nullptr) {
    if (!v->is_number()) return Error(tf, "a number", *v);
    n = *v;
  } else if (dflt) {
    n = *dflt == static_cast<double>(static_cast<int64_t>(*dflt))
            ? Json(static_cast<int64_t>(*dflt))
            : Json(*dflt);
  } else {
    return;
  }
  // ARM writes autoscale capacities as strings.
  Set(arm, as_string ? Json(n.dump()) : n);
}

void Mapper::CopyStringList(std::string_view tf, std::string_view arm) {
  if (Unknown(tf)) return MarkUnknown(arm);
  const Json* v = Value(tf);
  if (v == nullptr) return;
  if (!v->is_array()) return Error(tf, "a list of strings", *v);
  for (const Json& e : *v) {
    if (!e.is_string()) return Error(tf, "a list of strings", *v);
  }
  Set(arm, *v);
}

void Mapper::CopyRaw(std::string_view tf, std::string_view arm) {
  if (Unknown(tf)) return MarkUnknown(arm);
  const Json* v = Value(tf);
  if (v != nullptr) Set(arm, *v);
}

std::vector<std::string> Mapper::Ids(std::string_view tf, bool all, bool* unknown) {
  *unknown = false;
  std::vector<std::string> ids;
  if (!Unknown(tf)) {
    const Json* v = Value(tf);
    if (v == nullptr) return ids;
    if (v->is_string()) {
      if (!v->get<std::string>().empty()) ids.push_back(v->get<std::string>());
      return ids;
    }
    if (v->is_array()) {
      bool any_unknown = false;
      for (size_t i = 0; i < v->size(); ++i) {
        const Json& e = (*v)[i];
        if (e.is_string()) {
          ids.push_back(e.get<std::string>());
        } else if (e.is_null()) {
          any_unknown = true;
        } else {
          Error(tf, "a list of resource ids", *v);
          return {};
        }
      }
      if (!any_unknown) return ids;
      ids.clear();
    } else {
      Error(tf, "a resource id (string)", *v);
      return ids;
    }
  }
  // Known only after apply: the configuration says which resource it comes
  // from, and that resource's id (its address, when unknown) is what other
  // resources of this plan are keyed by.
  for (const Planned* t : plan_.Referenced(p_, tf, all)) ids.push_back(t->id);
  if (ids.empty()) *unknown = true;
  return ids;
}

void Mapper::CopyId(std::string_view tf, std::string_view arm) {
  bool unknown = false;
  std::vector<std::string> ids = Ids(tf, false, &unknown);
  if (unknown) return MarkUnknown(arm);
  if (!ids.empty()) Set(arm, ids.front());
}

void Mapper::CopyIdList(std::string_view tf, std::string_view arm) {
  bool unknown = false;
  std::vector<std::string> ids = Ids(tf, true, &unknown);
  if (unknown) return MarkUnknown(arm);
  if (ids.empty()) return;
  Json list = Json::array();
  for (std::string& id : ids) list.push_back(Json{{"id", std::move(id)}});
  Set(arm, std::move(list));
}

void Mapper::CopyIdentity(std::string_view tf) {
  std::string block(tf);
  if (Unknown(block)) return MarkUnknown("/identity");
  if (Blocks(block) == 0) return;
  std::optional<std::string> type = String(block + ".0.type");
  if (type) {
    // azurerm writes "SystemAssigned, UserAssigned"; ARM has no space.
    std::string t;
    for (char c : *type) {
      if (c != ' ') t += c;
    }
    Set("/identity/type", t);
  } else if (Unknown(block + ".0.type")) {
    MarkUnknown("/identity/type");
  }
  bool unknown = false;
  std::vector<std::string> ids = Ids(block + ".0.identity_ids", true, &unknown);
  if (unknown) {
    MarkUnknown("/identity/userAssignedIdentities");
  } else if (!ids.empty()) {
    Json uai = Json::object();
    for (const std::string& id : ids) uai[id] = Json::object();
    Set("/identity/userAssignedIdentities", std::move(uai));
  }
}

void Mapper::CopyTags() {
  if (Unknown("tags")) return MarkUnknown("/tags");
  const Json* v = Value("tags");
  if (v == nullptr) return;
  if (!v->is_object()) return Error("tags", "a map of strings", *v);
  Set("/tags", *v);
}

}  // namespace tf

Result<std::vector<Resource>> ReadTerraformPlan(const SourceDoc& plan) {
  tf::Plan index(plan);
  RETURN_IF_ERROR(index.Build());
  std::vector<Resource> out;
  out.reserve(index.resources().size());
  for (const tf::Planned& p : index.resources()) {
    if (p.mode != "managed" || p.deleted) continue;
    Resource r;
    r.address = p.address;
    r.id = p.id;
    r.location = p.location;
    r.origin = Origin::kTerraform;
    r.where = SourceLocation{plan.path, plan.LineOf(p.pointer), p.pointer};
    tf::Mapper m(index, p, &r);
    if (!tf::MapAzurerm(m)) {
      // Not a type Gantry maps: keep the attributes so a rule can still look.
      r.type = "terraform:" + p.type;
      r.name = p.name;
      r.body = Json::object();
      r.body["type"] = r.type;
      r.body["name"] = r.name;
      r.body["properties"] = *p.values;
      if (p.after_unknown != nullptr) {
        // Every `true` leaf of after_unknown, under /properties.
        std::vector<std::pair<const Json*, std::string>> stack{{p.after_unknown, "/properties"}};
        while (!stack.empty()) {
          auto [node, ptr] = stack.back();
          stack.pop_back();
          if (node->is_boolean()) {
            if (node->get<bool>()) r.unknown.push_back(ptr);
          } else if (node->is_object()) {
            for (auto it = node->begin(); it != node->end(); ++it) {
              stack.emplace_back(&*it, ptr + "/" + tf::EscapeToken(it.key()));
            }
          } else if (node->is_array()) {
            for (size_t i = 0; i < node->size(); ++i) {
              stack.emplace_back(&(*node)[i], ptr + "/" + std::to_string(i));
            }
          }
        }
        std::sort(r.unknown.begin(), r.unknown.end());
      }
    }
    RETURN_IF_ERROR(m.status());
    if (r.location.empty()) {
      const Json* loc = r.Get("location");
      if (loc != nullptr && loc->is_string())
        r.location = tf::NormalizeLocation(loc->get<std::string>());
    }
    if (!r.location.empty()) r.body["location"] = r.location;
    if (p.name_unknown) m.MarkUnknown("/name");
    if (!p.id_unknown) r.body["id"] = p.id;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace gantry::assess
