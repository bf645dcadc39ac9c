// ExpandArmTemplate: turns a deploymentTemplate into the Resources it would
// deploy, in PSRule's stub deployment context (ArmOptions).
//
// Choices worth knowing (see also arm_expr.cc for the expression language):
// - Parameters and variables are all evaluated, used or not, as ARM validates
//   them all; a reference between them is resolved on demand, and a cycle is
//   an error naming the chain.
// - A resource whose `condition` is false is left out together with its
//   nested child resources (ARM would fail deploying children of a parent
//   that is not there). A condition ARM can only decide at deployment
//   (reference()) keeps the resource: assessing it is the safe side.
// - `existing: true` resources (languageVersion 2.0) are not deployed and not
//   returned; their ids still resolve when another resource names them as
//   `scope`.
// - A nested deployment with an inline template is expanded in its inner or
//   outer expression scope. One with `templateLink` cannot be followed
//   offline (PSRule cannot either): the deployment resource is returned with
//   "/properties/template" in Resource::unknown, so that a caller can report
//   that part of the deployment as not assessed instead of passing it.
// - Extension resources (diagnostic settings, locks) get Resource::scope, the
//   id of the resource they apply to, from their `scope` property, from the
//   legacy "<parent type>/providers/<type>" form, or from being nested under
//   a resource of another namespace.
#include <fmt/format.h>

#include <unordered_map>

#include "arm_expr.h"
#include "gantry/assess/inputs.h"
#include "gantry/core/text.h"

namespace gantry::assess {
namespace {

using arm::IsExpression;

// A JSON pointer built only when an error needs it.
struct PathSeg {
  const PathSeg* up = nullptr;
  std::string_view raw;  // the root: an already escaped pointer
  std::string_view key;
  size_t index = 0;
  int kind = 0;  // 0 root, 1 key, 2 index
};

std::string Escaped(std::string_view key) {
  std::string s;
  AppendPointerToken(key, &s);
  return s;
}

void Render(const PathSeg* p, std::string* out) {
  if (!p) return;
  Render(p->up, out);
  if (p->kind == 0) {
    *out += p->raw;
  } else if (p->kind == 1) {
    *out += '/';
    AppendPointerToken(p->key, out);
  } else {
    *out += '/';
    *out += std::to_string(p->index);
  }
}

std::string Pointer(const PathSeg& p) {
  std::string s;
  Render(&p, &s);
  return s;
}

struct Slot {
  std::string name;           // as declared
  const Json* def = nullptr;  // parameter declaration / variable value / copy entry
  std::string ptr;            // pointer of the declaration
  enum State { kPending, kBusy, kDone } state = kPending;
  Json value;
  const Json* given = nullptr;  // a value from the parameter file or nested deployment
  bool given_unknown = false;   // a Key Vault reference
  bool is_copy = false;         // an entry of the variables' `copy` array
};

struct Scope {
  std::string base;  // pointer of the template object in the file
  ArmOptions opts;
  std::unordered_map<std::string, Slot> params, vars;  // by lower-case name
  std::vector<std::string> param_order, var_order;
  std::unordered_map<std::string, const Json*> functions;  // "ns.name", lower case
  std::unordered_map<std::string, std::string> symbolic_ids;
  bool subscription_level = false;
  Json given_store;         // the parameter values, owned
  std::string given_where;  // named in messages about them
};

struct Loop {
  std::string name;  // lower case
  int64_t index;
  bool resource;
};

std::string NormalizeLocation(std::string_view loc) {
  std::string out;
  for (char c : loc) {
    if (c != ' ') out += c;
  }
  return AsciiLower(out);
}

std::vector<std::string> SplitSlash(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t slash = s.find('/', start);
    out.emplace_back(s.substr(start, slash == std::string_view::npos ? s.npos : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return out;
}

bool IsPropertyCopy(const Json& v) {
  if (!v.is_array() || v.empty()) return false;
  for (const Json& e : v) {
    if (!e.is_object() || !e.contains("name") || !e.contains("count") || !e.contains("input")) {
      return false;
    }
  }
  return true;
}

const Json* Member(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it != obj.end()) return &*it;
  for (auto j = obj.begin(); j != obj.end(); ++j) {
    if (EqualsIgnoreCase(j.key(), key)) return &*j;
  }
  return nullptr;
}

class Expander : public arm::Context {
 public:
  Expander(const SourceDoc& doc, const ArmOptions& options) : doc_(doc), options_(options) {
    max_depth = options.max_expression_depth;
  }

  Result<std::vector<Resource>> Run() {
    if (!doc_.value.is_object()) {
      return InvalidArgument(fmt::format("{}: a template is a JSON object, got {}", doc_.path,
                                         arm::TypeName(doc_.value)));
    }
    Scope root;
    const Json* values = &options_.parameters;
    // Accept a whole parameter file as well as its "parameters" object.
    if (values->is_object() && values->contains("$schema")) {
      const Json* p = Member(*values, "parameters");
      values = p ? p : &kEmptyObject();
    }
    RETURN_IF_ERROR(SetUpScope(
        root, doc_.value, "", options_, values,
        options_.parameters_file.empty() ? "the parameter values" : options_.parameters_file));
    RETURN_IF_ERROR(ExpandTemplateResources(root, doc_.value, "", ""));
    return std::move(out_);
  }

  // --- arm::Context ---

  Result<const Json*> Parameter(std::string_view name) override {
    Scope& s = *scope_;
    auto it = s.params.find(AsciiLower(name));
    if (it == s.params.end()) return Undeclared("parameter", name, s.param_order, "parameters");
    return ResolveParam(s, it->second);
  }

  Result<const Json*> Variable(std::string_view name) override {
    Scope& s = *scope_;
    auto it = s.vars.find(AsciiLower(name));
    if (it == s.vars.end()) return Undeclared("variable", name, s.var_order, "variables");
    return ResolveVar(s, it->second);
  }

  Result<int64_t> CopyIndex(std::optional<std::string_view> loop) override {
    if (loops_.empty()) {
      return InvalidArgument(
          "copyIndex() is used outside a copy loop; use it only in a resource, property or "
          "variable with `copy`");
    }
    if (loop) {
      std::string l = AsciiLower(*loop);
      for (auto it = loops_.rbegin(); it != loops_.rend(); ++it) {
        if (it->name == l) return it->index;
      }
      std::vector<std::string> names;
      for (const Loop& x : loops_) names.push_back(x.name);
      return InvalidArgument(
          fmt::format("copyIndex('{}'): no copy loop of that name is active "
                      "here (active: {})",
                      *loop, Join(names, ", ")));
    }
    // Without a name ARM means the resource loop.
    for (auto it = loops_.rbegin(); it != loops_.rend(); ++it) {
      if (it->resource) return it->index;
    }
    return loops_.back().index;
  }

  Result<Json> CallUserFunction(std::string_view name, std::vector<Json> args) override {
    auto it = scope_->functions.find(AsciiLower(name));
    if (it == scope_->functions.end()) {
      std::vector<std::string> names;
      for (const auto& [n, d] : scope_->functions) names.push_back(n);
      std::optional<std::string> near = ClosestMatch(AsciiLower(name), names, 3);
      return InvalidArgument(
          fmt::format("unknown function '{}'{}; declare it under \"functions\"", name,
                      near ? fmt::format(" (did you mean '{}'?)", *near) : std::string()));
    }
    const Json& def = *it->second;
    const Json* params = Member(def, "parameters");
    const Json* output = Member(def, "output");
    const Json* value = output ? Member(*output, "value") : nullptr;
    if (!value) return InvalidArgument(fmt::format("function '{}' has no output.value", name));
    size_t want = params && params->is_array() ? params->size() : 0;
    if (args.size() != want) {
      return InvalidArgument(
          fmt::format("{}(): takes {} argument(s), got {}", name, want, args.size()));
    }
    // A function sees only its own parameters.
    Scope fs;
    fs.opts = scope_->opts;
    fs.base = scope_->base;
    fs.functions = scope_->functions;
    for (size_t i = 0; i < want; ++i) {
      const Json* pn = Member((*params)[i], "name");
      if (!pn || !pn->is_string()) {
        return InvalidArgument(fmt::format("function '{}': parameter {} has no name", name, i + 1));
      }
      Slot slot;
      slot.name = pn->get<std::string>();
      slot.state = Slot::kDone;
      slot.value = std::move(args[i]);
      fs.param_order.push_back(slot.name);
      fs.params.emplace(AsciiLower(slot.name), std::move(slot));
    }
    StateSaver save(*this, &fs, {}, false);
    Json out;
    PathSeg root{nullptr, fs.base};
    PathSeg seg{&root, {}, {}, 0, 1};
    seg.key = "functions";
    RETURN_IF_ERROR(EvalValue(*value, seg, &out));
    return out;
  }

  const ArmOptions& Options() const override { return scope_->opts; }
  bool AllowsNonDeterministic() const override { return nondet_; }

 private:
  static const Json& kEmptyObject() {
    static const Json* e = new Json(Json::object());
    return *e;
  }

  // Switches the evaluation state for a nested evaluation and back.
  struct StateSaver {
    StateSaver(Expander& e, Scope* s, std::vector<Loop> loops, bool nondet)
        : ex(e), scope(e.scope_), saved_loops(std::move(e.loops_)), nondet(e.nondet_) {
      ex.scope_ = s;
      ex.loops_ = std::move(loops);
      ex.nondet_ = nondet;
    }
    ~StateSaver() {
      ex.scope_ = scope;
      ex.loops_ = std::move(saved_loops);
      ex.nondet_ = nondet;
    }
    Expander& ex;
    Scope* scope;
    std::vector<Loop> saved_loops;
    bool nondet;
  };

  Status Undeclared(std::string_view what, std::string_view name,
                    const std::vector<std::string>& declared, std::string_view section) {
    std::optional<std::string> near = ClosestMatch(name, declared, 3);
    return InvalidArgument(fmt::format(
        "{} '{}' is not declared{}; declare it under \"{}\" or fix the name", what, name,
        near ? fmt::format(" (did you mean '{}'?)", *near) : std::string(), section));
  }

  // Prefixes the file and pointer once: the innermost location wins.
  Status Locate(const Status& s, std::string_view pointer) {
    if (located_) return s;
    located_ = true;
    return Status(s.code(), fmt::format("{}: {}: {}", doc_.path, pointer.empty() ? "/" : pointer,
                                        s.message()));
  }
  Status LocateIn(const Status& s, std::string_view where) {
    if (located_) return s;
    located_ = true;
    return Status(s.code(), fmt::format("{}: {}", where, s.message()));
  }

  Status EvalValue(const Json& v, const PathSeg& path, Json* out) {
    if (v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      if (!IsExpression(s)) {
        *out = std::string(arm::LiteralOf(s));
        return Status::Ok();
      }
      Result<Json> r = arm::EvaluateExpression(s, *this, &cache_);
      if (!r.ok()) return Locate(r.status(), Pointer(path));
      *out = std::move(r).value();
      return Status::Ok();
    }
    if (v.is_array()) {
      *out = Json::array();
      auto& arr = out->get_ref<Json::array_t&>();
      arr.reserve(v.size());
      for (size_t i = 0; i < v.size(); ++i) {
        PathSeg seg{&path, {}, {}, i, 2};
        arr.emplace_back();
        RETURN_IF_ERROR(EvalValue(v[i], seg, &arr.back()));
      }
      RETURN_IF_ERROR(ChargeAt(static_cast<int64_t>(v.size()), path));
      return Status::Ok();
    }
    if (v.is_object()) {
      *out = Json::object();
      for (auto it = v.begin(); it != v.end(); ++it) {
        PathSeg seg{&path, {}, it.key(), 0, 1};
        if (EqualsIgnoreCase(it.key(), "copy") && IsPropertyCopy(it.value())) {
          RETURN_IF_ERROR(PropertyCopy(it.value(), seg, out));
          continue;
        }
        Json item;
        RETURN_IF_ERROR(EvalValue(it.value(), seg, &item));
        (*out)[it.key()] = std::move(item);
      }
      RETURN_IF_ERROR(ChargeAt(static_cast<int64_t>(v.size()), path));
      return Status::Ok();
    }
    *out = v;
    return Status::Ok();
  }

  Status ChargeAt(int64_t units, const PathSeg& path) {
    Status s = Charge(units);
    if (!s.ok()) return Locate(s, Pointer(path));
    return s;
  }

  Result<int64_t> EvalCount(const Json& count, const PathSeg& path) {
    Json c;
    RETURN_IF_ERROR(EvalValue(count, path, &c));
    if (arm::ContainsUnknown(c)) {
      return Locate(InvalidArgument("a copy count must be known before deployment; it cannot "
                                    "come from reference() or list*()"),
                    Pointer(path));
    }
    if (!c.is_number_integer() && !c.is_number_unsigned()) {
      return Locate(
          InvalidArgument(fmt::format("a copy count must be an integer, got {}", arm::TypeName(c))),
          Pointer(path));
    }
    int64_t n =
        c.is_number_unsigned() && c.get<uint64_t>() > INT64_MAX ? INT64_MAX : c.get<int64_t>();
    if (n < 0 || n > options_.max_copy_count) {
      return Locate(InvalidArgument(fmt::format("copy count {} is outside 0..{} (ARM's limit)", n,
                                                options_.max_copy_count)),
                    Pointer(path));
    }
    return n;
  }

  // properties: {"copy": [{"name": "dataDisks", "count": 2, "input": {...}}]}
  Status PropertyCopy(const Json& specs, const PathSeg& path, Json* out) {
    for (size_t i = 0; i < specs.size(); ++i) {
      const Json& spec = specs[i];
      PathSeg at{&path, {}, {}, i, 2};
      const Json& name = spec["name"];
      if (!name.is_string() || name.get_ref<const std::string&>().empty()) {
        return Locate(InvalidArgument("a property copy needs a \"name\" string"), Pointer(at));
      }
      PathSeg count_at{&at, {}, "count", 0, 1};
      ASSIGN_OR_RETURN(int64_t n, EvalCount(spec["count"], count_at));
      PathSeg input_at{&at, {}, "input", 0, 1};
      Json arr = Json::array();
      for (int64_t k = 0; k < n; ++k) {
        loops_.push_back({AsciiLower(name.get_ref<const std::string&>()), k, false});
        Json item;
        Status st = EvalValue(spec["input"], input_at, &item);
        loops_.pop_back();
        RETURN_IF_ERROR(st);
        arr.push_back(std::move(item));
      }
      (*out)[name.get<std::string>()] = std::move(arr);
    }
    return Status::Ok();
  }

  Status CheckParamValue(const Slot& slot, const Json& v, std::string_view where) {
    auto fail = [&](std::string msg) { return LocateIn(InvalidArgument(std::move(msg)), where); };
    const Json* type = Member(*slot.def, "type");
    if (type && type->is_string()) {
      std::string t = AsciiLower(type->get<std::string>());
      bool ok = true;
      if (t == "string" || t == "securestring") {
        ok = v.is_string();
      } else if (t == "int") {
        ok = v.is_number_integer() || v.is_number_unsigned();
      } else if (t == "bool") {
        ok = v.is_boolean();
      } else if (t == "object" || t == "secureobject") {
        ok = v.is_object();
      } else if (t == "array") {
        ok = v.is_array();
      }
      if (!ok && !(v.is_null() && Member(*slot.def, "nullable") &&
                   *Member(*slot.def, "nullable") == true)) {
        return fail(fmt::format("parameter '{}' is declared as {} but its value is {}", slot.name,
                                type->get<std::string>(), arm::TypeName(v)));
      }
    }
    if (const Json* allowed = Member(*slot.def, "allowedValues"); allowed && allowed->is_array()) {
      auto in_allowed = [&](const Json& x) {
        for (const Json& a : *allowed) {
          if (a == x) return true;
          if (a.is_string() && x.is_string() &&
              EqualsIgnoreCase(a.get_ref<const std::string&>(), x.get_ref<const std::string&>())) {
            return true;
          }
        }
        return false;
      };
      bool ok = v.is_array() ? std::all_of(v.begin(), v.end(), in_allowed) : in_allowed(v);
      if (!ok) {
        std::string list = allowed->dump(-1, ' ', false, Json::error_handler_t::replace);
        return fail(
            fmt::format("parameter '{}': value {} is not one of the allowedValues {}", slot.name,
                        v.dump(-1, ' ', false, Json::error_handler_t::replace).substr(0, 200),
                        list.substr(0, 400)));
      }
    }
    auto num = [&](const char* key) -> std::optional<int64_t> {
      const Json* m = Member(*slot.def, key);
      if (m && m->is_number_integer()) return m->get<int64_t>();
      return std::nullopt;
    };
    if (v.is_number_integer()) {
      int64_t x = v.get<int64_t>();
      if (auto mn = num("minValue"); mn && x < *mn) {
        return fail(fmt::format("parameter '{}': {} is below minValue {}", slot.name, x, *mn));
      }
      if (auto mx = num("maxValue"); mx && x > *mx) {
        return fail(fmt::format("parameter '{}': {} is above maxValue {}", slot.name, x, *mx));
      }
    }
    if (v.is_string() || v.is_array()) {
      int64_t len = static_cast<int64_t>(v.size());
      if (v.is_string()) len = static_cast<int64_t>(v.get_ref<const std::string&>().size());
      if (auto mn = num("minLength"); mn && len < *mn) {
        return fail(
            fmt::format("parameter '{}': length {} is below minLength {}", slot.name, len, *mn));
      }
      if (auto mx = num("maxLength"); mx && len > *mx) {
        return fail(
            fmt::format("parameter '{}': length {} is above maxLength {}", slot.name, len, *mx));
      }
    }
    return Status::Ok();
  }

  Result<const Json*> ResolveParam(Scope& s, Slot& slot) {
    if (slot.state == Slot::kDone) return &slot.value;
    if (slot.state == Slot::kBusy) return Cycle("parameter", slot.name);
    slot.state = Slot::kBusy;
    chain_.push_back(slot.name);
    Status st = FillParam(s, slot);
    chain_.pop_back();
    if (!st.ok()) {
      slot.state = Slot::kPending;
      return st;
    }
    slot.state = Slot::kDone;
    return &slot.value;
  }

  Status FillParam(Scope& s, Slot& slot) {
    if (slot.given_unknown) {
      slot.value = arm::MakeUnknown(fmt::format("[parameters('{}')]", slot.name));
      return Status::Ok();
    }
    if (slot.given) {
      slot.value = *slot.given;
      return CheckParamValue(slot, slot.value, s.given_where);
    }
    if (const Json* d = Member(*slot.def, "defaultValue")) {
      PathSeg root{nullptr, slot.ptr};
      PathSeg seg{&root, {}, "defaultValue", 0, 1};
      {
        // utcNow() and newGuid() are allowed here, and only here.
        StateSaver save(*this, &s, {}, true);
        RETURN_IF_ERROR(EvalValue(*d, seg, &slot.value));
      }
      if (arm::ContainsUnknown(slot.value)) return Status::Ok();
      return CheckParamValue(slot, slot.value, fmt::format("{}: {}", doc_.path, slot.ptr));
    }
    if (const Json* n = Member(*slot.def, "nullable"); n && *n == true) {
      slot.value = nullptr;
      return Status::Ok();
    }
    return Locate(
        InvalidArgument(fmt::format("parameter '{}' has no value: give it in the parameter file "
                                    "(\"{}\": {{\"value\": ...}}) or add a defaultValue",
                                    slot.name, slot.name)),
        slot.ptr);
  }

  Status Cycle(std::string_view what, const std::string& name) {
    std::vector<std::string> loop;
    bool on = false;
    for (const std::string& c : chain_) {
      if (EqualsIgnoreCase(c, name)) on = true;
      if (on) loop.push_back(c);
    }
    loop.push_back(name);
    return InvalidArgument(fmt::format("{} '{}' refers to itself through {}; break the cycle", what,
                                       name, Join(loop, " -> ")));
  }

  Result<const Json*> ResolveVar(Scope& s, Slot& slot) {
    if (slot.state == Slot::kDone) return &slot.value;
    if (slot.state == Slot::kBusy) return Cycle("variable", slot.name);
    slot.state = Slot::kBusy;
    chain_.push_back(slot.name);
    Status st;
    {
      StateSaver save(*this, &s, {}, false);
      PathSeg root{nullptr, slot.ptr};
      if (slot.is_copy) {
        PathSeg count_at{&root, {}, "count", 0, 1};
        PathSeg input_at{&root, {}, "input", 0, 1};
        Result<int64_t> n = EvalCount((*slot.def)["count"], count_at);
        st = n.status();
        Json arr = Json::array();
        for (int64_t k = 0; st.ok() && k < *n; ++k) {
          loops_.push_back({AsciiLower(slot.name), k, false});
          Json item;
          st = EvalValue((*slot.def)["input"], input_at, &item);
          loops_.pop_back();
          arr.push_back(std::move(item));
        }
        slot.value = std::move(arr);
      } else {
        st = EvalValue(*slot.def, root, &slot.value);
      }
    }
    if (st.ok()) st = ChargeDeep(slot.value);
    chain_.pop_back();
    if (!st.ok()) {
      slot.state = Slot::kPending;
      return Locate(st, slot.ptr);
    }
    slot.state = Slot::kDone;
    return &slot.value;
  }

  Status SetUpScope(Scope& sc, const Json& tmpl, const std::string& base, const ArmOptions& opts,
                    const Json* values, const std::string& values_where) {
    sc.base = base;
    sc.opts = opts;
    if (const Json* schema = Member(tmpl, "$schema"); schema && schema->is_string()) {
      sc.subscription_level = schema->get_ref<const std::string&>().find(
                                  "subscriptionDeploymentTemplate") != std::string::npos;
    }
    if (const Json* params = Member(tmpl, "parameters")) {
      if (!params->is_object()) {
        return Locate(InvalidArgument("\"parameters\" must be an object"), base + "/parameters");
      }
      for (auto it = params->begin(); it != params->end(); ++it) {
        std::string ptr = base + "/parameters/" + Escaped(it.key());
        if (!it->is_object()) {
          return Locate(InvalidArgument(fmt::format("parameter '{}' must be declared as an object "
                                                    "with a \"type\"",
                                                    it.key())),
                        ptr);
        }
        Slot slot;
        slot.name = it.key();
        slot.def = &*it;
        slot.ptr = std::move(ptr);
        sc.param_order.push_back(it.key());
        sc.params.emplace(AsciiLower(it.key()), std::move(slot));
      }
    }
    if (values && !values->is_null()) {
      if (!values->is_object()) {
        return LocateIn(InvalidArgument("the parameter values must be an object of "
                                        "{\"name\": {\"value\": ...}}"),
                        values_where);
      }
      sc.given_store = *values;
      sc.given_where = values_where;
      for (auto it = sc.given_store.begin(); it != sc.given_store.end(); ++it) {
        auto slot = sc.params.find(AsciiLower(it.key()));
        if (slot == sc.params.end()) {
          std::optional<std::string> near = ClosestMatch(it.key(), sc.param_order, 3);
          return LocateIn(
              InvalidArgument(fmt::format(
                  "parameter '{}' has a value but {} does not declare it{}; remove it or fix the "
                  "name",
                  it.key(), base.empty() ? doc_.path : doc_.path + " " + base,
                  near ? fmt::format(" (did you mean '{}'?)", *near) : std::string())),
              values_where);
        }
        const Json* v = Member(*it, "value");
        const Json* ref = Member(*it, "reference");
        if (arm::IsUnknown(*it)) {
          slot->second.given_unknown = true;
        } else if (v) {
          slot->second.given = v;
          slot->second.given_unknown = arm::ContainsUnknown(*v) && arm::IsUnknown(*v);
        } else if (ref) {
          slot->second.given_unknown = true;  // a Key Vault secret
        } else {
          return LocateIn(
              InvalidArgument(fmt::format("parameter '{}' must be given as {{\"value\": ...}} or "
                                          "{{\"reference\": {{...}}}}",
                                          it.key())),
              values_where);
        }
      }
    }
    if (const Json* vars = Member(tmpl, "variables")) {
      if (!vars->is_object()) {
        return Locate(InvalidArgument("\"variables\" must be an object"), base + "/variables");
      }
      for (auto it = vars->begin(); it != vars->end(); ++it) {
        if (EqualsIgnoreCase(it.key(), "copy") && it->is_array()) {
          for (size_t i = 0; i < it->size(); ++i) {
            const Json& e = (*it)[i];
            std::string ptr = base + "/variables/" + Escaped(it.key()) + "/" + std::to_string(i);
            const Json* n = Member(e, "name");
            if (!n || !n->is_string() || !e.contains("count") || !e.contains("input")) {
              return Locate(InvalidArgument("a variable copy needs \"name\", \"count\" and "
                                            "\"input\""),
                            ptr);
            }
            Slot slot;
            slot.name = n->get<std::string>();
            slot.def = &e;
            slot.ptr = std::move(ptr);
            slot.is_copy = true;
            sc.var_order.push_back(slot.name);
            sc.vars.emplace(AsciiLower(slot.name), std::move(slot));
          }
          continue;
        }
        Slot slot;
        slot.name = it.key();
        slot.def = &*it;
        slot.ptr = base + "/variables/" + Escaped(it.key());
        sc.var_order.push_back(it.key());
        sc.vars.emplace(AsciiLower(it.key()), std::move(slot));
      }
    }
    if (const Json* fns = Member(tmpl, "functions"); fns && fns->is_array()) {
      for (const Json& ns : *fns) {
        const Json* nsn = Member(ns, "namespace");
        const Json* members = Member(ns, "members");
        if (!nsn || !nsn->is_string() || !members || !members->is_object()) continue;
        for (auto it = members->begin(); it != members->end(); ++it) {
          sc.functions[AsciiLower(nsn->get<std::string>() + "." + it.key())] = &*it;
        }
      }
    }
    // ARM validates every parameter and variable, used or not.
    for (const std::string& p : sc.param_order) {
      auto r = ResolveParam(sc, sc.params.at(AsciiLower(p)));
      RETURN_IF_ERROR(r.status());
    }
    for (const std::string& v : sc.var_order) {
      auto r = ResolveVar(sc, sc.vars.at(AsciiLower(v)));
      RETURN_IF_ERROR(r.status());
    }
    return Status::Ok();
  }

  Status ExpandTemplateResources(Scope& sc, const Json& tmpl, const std::string& base,
                                 const std::string& addr_prefix) {
    const Json* res = Member(tmpl, "resources");
    if (!res || res->is_null()) return Status::Ok();
    return ExpandResources(sc, *res, base + "/resources", addr_prefix, nullptr);
  }

  struct Parent {
    std::string type, name, id;
  };

  Status ExpandResources(Scope& sc, const Json& res, const std::string& ptr,
                         const std::string& addr_prefix, const Parent* parent) {
    if (res.is_array()) {
      for (size_t i = 0; i < res.size(); ++i) {
        RETURN_IF_ERROR(ExpandResource(sc, res[i], ptr + "/" + std::to_string(i),
                                       fmt::format("{}resources[{}]", addr_prefix, i), parent, ""));
      }
      return Status::Ok();
    }
    if (res.is_object()) {  // languageVersion 2.0: symbolic names
      for (auto it = res.begin(); it != res.end(); ++it) {
        RETURN_IF_ERROR(ExpandResource(sc, *it, ptr + "/" + Escaped(it.key()),
                                       addr_prefix + it.key(), parent, it.key()));
      }
      return Status::Ok();
    }
    return Locate(InvalidArgument("\"resources\" must be an array, or an object of symbolic "
                                  "names (languageVersion 2.0)"),
                  ptr);
  }

  Status ExpandResource(Scope& sc, const Json& r, const std::string& ptr,
                        const std::string& address, const Parent* parent,
                        const std::string& symbolic) {
    if (!r.is_object()) {
      return Locate(
          InvalidArgument(fmt::format("a resource must be an object, got {}", arm::TypeName(r))),
          ptr);
    }
    StateSaver save(*this, &sc, loops_, false);
    const Json* copy = Member(r, "copy");
    if (!copy) return EmitOne(sc, r, ptr, address, parent, symbolic);
    PathSeg root{nullptr, ptr};
    PathSeg copy_at{&root, {}, "copy", 0, 1};
    const Json* name = Member(*copy, "name");
    const Json* count = Member(*copy, "count");
    if (!copy->is_object() || !name || !name->is_string() || !count) {
      return Locate(InvalidArgument("a resource copy needs {\"name\": ..., \"count\": ...}"),
                    Pointer(copy_at));
    }
    PathSeg count_at{&copy_at, {}, "count", 0, 1};
    ASSIGN_OR_RETURN(int64_t n, EvalCount(*count, count_at));
    for (int64_t i = 0; i < n; ++i) {
      loops_.push_back({AsciiLower(name->get<std::string>()), i, true});
      Status st = EmitOne(sc, r, ptr, fmt::format("{}[{}]", address, i), parent, symbolic);
      loops_.pop_back();
      RETURN_IF_ERROR(st);
    }
    return Status::Ok();
  }

  Result<std::string> EvalString(const Json& r, std::string_view key, const PathSeg& root,
                                 bool required) {
    const Json* v = Member(r, key);
    PathSeg at{&root, {}, key, 0, 1};
    if (!v) {
      if (!required) return std::string();
      return Locate(InvalidArgument(fmt::format("the resource has no \"{}\"", key)), Pointer(root));
    }
    Json out;
    RETURN_IF_ERROR(EvalValue(*v, at, &out));
    if (arm::IsUnknown(out)) return arm::UnknownText(out);
    if (!out.is_string()) {
      return Locate(
          InvalidArgument(fmt::format("\"{}\" must be a string, got {}", key, arm::TypeName(out))),
          Pointer(at));
    }
    return out.get<std::string>();
  }

  // "/subscriptions/s/resourceGroups/g/providers/Ns/t1/n1/t2/n2" for the
  // scope's context, or under `scope` for extension resources.
  Result<std::string> IdOf(const Scope& sc, const std::string& type, const std::string& name,
                           const std::string& scope, const std::string& where) {
    std::vector<std::string> ts = SplitSlash(type), ns = SplitSlash(name);
    if (ts.size() < 2) {
      return Locate(InvalidArgument(fmt::format("type '{}' is not a resource type like "
                                                "'Microsoft.Storage/storageAccounts'",
                                                type)),
                    where + "/type");
    }
    if (ns.size() != ts.size() - 1) {
      return Locate(
          InvalidArgument(fmt::format(
              "name '{}' has {} segment(s) but type '{}' needs {}; a child resource's name is "
              "'<parent name>/<child name>'",
              name, ns.size(), type, ts.size() - 1)),
          where + "/name");
    }
    std::string path = "providers/" + ts[0];
    for (size_t i = 1; i < ts.size(); ++i) path += "/" + ts[i] + "/" + ns[i - 1];
    if (!scope.empty()) return scope + "/" + path;
    if (sc.subscription_level)
      return fmt::format("/subscriptions/{}/{}", sc.opts.subscription_id, path);
    return fmt::format("/subscriptions/{}/resourceGroups/{}/{}", sc.opts.subscription_id,
                       sc.opts.resource_group, path);
  }

  // A `scope` value: an id, a symbolic name, or "Ns/type/name" relative to
  // the resource group.
  std::string ScopeId(const Scope& sc, const std::string& s) {
    if (s.empty() || s[0] == '/') return s;
    if (auto it = sc.symbolic_ids.find(s); it != sc.symbolic_ids.end()) return it->second;
    std::vector<std::string> parts = SplitSlash(s);
    if (parts.size() >= 3 && parts.size() % 2 == 1) {
      return fmt::format("/subscriptions/{}/resourceGroups/{}/providers/{}",
                         sc.opts.subscription_id, sc.opts.resource_group, s);
    }
    return s;
  }

  Status EmitOne(Scope& sc, const Json& r, const std::string& ptr, const std::string& address,
                 const Parent* parent, const std::string& symbolic) {
    PathSeg root{nullptr, ptr};
    ASSIGN_OR_RETURN(std::string type, EvalString(r, "type", root, true));
    ASSIGN_OR_RETURN(std::string name, EvalString(r, "name", root, true));
    std::string scope;
    if (parent) {
      std::vector<std::string> pt = SplitSlash(parent->type);
      if (type.find('/') == std::string::npos || AsciiLower(type).rfind("providers/", 0) == 0) {
        type = parent->type + "/" + type;  // short child type ("subnets")
      } else if (!EqualsIgnoreCase(SplitSlash(type)[0], pt[0])) {
        scope = parent->id;  // another namespace nested here: an extension resource
      }
      if (scope.empty() && AsciiLower(type).find("/providers/") == std::string::npos &&
          SplitSlash(name).size() < SplitSlash(type).size() - 1) {
        name = parent->name + "/" + name;
      } else if (AsciiLower(type).find("/providers/") != std::string::npos &&
                 SplitSlash(name).size() < SplitSlash(parent->name).size() + 2) {
        name = parent->name + "/" + name;
      }
    }
    // Legacy extension form: "Ns/t/providers/diagnosticSettings" named
    // "parent/Microsoft.Insights/diag".
    if (size_t p = AsciiLower(type).find("/providers/"); p != std::string::npos) {
      std::vector<std::string> ts = SplitSlash(type.substr(0, p));
      std::vector<std::string> ext = SplitSlash(type.substr(p + 11));
      std::vector<std::string> ns = SplitSlash(name);
      const size_t parent_names = ts.size() - 1;
      if (ts.size() < 2 || ext.empty() || ns.size() != parent_names + 1 + ext.size()) {
        return Locate(InvalidArgument(fmt::format(
                          "extension resource '{}' of type '{}': the name must be '<parent "
                          "name>/<namespace>/<name>'",
                          name, type)),
                      ptr + "/name");
      }
      std::vector<std::string> parent_name(ns.begin(), ns.begin() + parent_names);
      ASSIGN_OR_RETURN(scope, IdOf(sc, type.substr(0, p), Join(parent_name, "/"), "", ptr));
      type = ns[parent_names] + "/" + Join(ext, "/");
      name = Join(std::vector<std::string>(ns.begin() + parent_names + 1, ns.end()), "/");
    }
    if (Member(r, "scope")) {
      ASSIGN_OR_RETURN(std::string s, EvalString(r, "scope", root, false));
      scope = ScopeId(sc, s);
    }
    ASSIGN_OR_RETURN(std::string id, IdOf(sc, type, name, scope, ptr));
    Parent self{type, name, id};

    if (const Json* ex = Member(r, "existing"); ex && *ex == true) {
      if (!symbolic.empty()) sc.symbolic_ids[symbolic] = id;
      return Status::Ok();
    }
    if (const Json* cond = Member(r, "condition")) {
      PathSeg at{&root, {}, "condition", 0, 1};
      Json c;
      RETURN_IF_ERROR(EvalValue(*cond, at, &c));
      if (c.is_string() && (EqualsIgnoreCase(c.get<std::string>(), "true") ||
                            EqualsIgnoreCase(c.get<std::string>(), "false"))) {
        c = EqualsIgnoreCase(c.get<std::string>(), "true");
      }
      if (!c.is_boolean() && !arm::ContainsUnknown(c)) {
        return Locate(
            InvalidArgument(fmt::format("\"condition\" must be a bool, got {}", arm::TypeName(c))),
            Pointer(at));
      }
      if (c.is_boolean() && !c.get<bool>()) return Status::Ok();
    }

    const bool is_deployment = EqualsIgnoreCase(type, "Microsoft.Resources/deployments");
    Json body = Json::object();
    for (auto it = r.begin(); it != r.end(); ++it) {
      static constexpr std::string_view kSkip[] = {"copy",      "condition", "dependsOn",
                                                   "resources", "comments",  "existing",
                                                   "scope",     "metadata"};
      bool skip = false;
      for (std::string_view k : kSkip) skip = skip || EqualsIgnoreCase(it.key(), k);
      if (skip) continue;
      PathSeg at{&root, {}, it.key(), 0, 1};
      Json v;
      if (is_deployment && EqualsIgnoreCase(it.key(), "properties") && it->is_object()) {
        // The inline template is expanded below in its own scope, not here.
        v = Json::object();
        for (auto p = it->begin(); p != it->end(); ++p) {
          if (EqualsIgnoreCase(p.key(), "template")) continue;
          PathSeg pat{&at, {}, p.key(), 0, 1};
          Json pv;
          RETURN_IF_ERROR(EvalValue(*p, pat, &pv));
          v[p.key()] = std::move(pv);
        }
      } else {
        RETURN_IF_ERROR(EvalValue(*it, at, &v));
      }
      body[it.key()] = std::move(v);
    }
    body["type"] = type;
    body["name"] = name;
    body["id"] = id;
    {
      Status st = ChargeDeep(body);
      if (!st.ok()) return Locate(st, ptr);
    }

    // Read before the unknown markers in the body become text: a nested
    // deployment's parameters pass them on.
    const Json* props = Member(r, "properties");
    const Json* inline_tmpl = is_deployment && props ? Member(*props, "template") : nullptr;
    Json nested_values;
    std::string mode = "outer";
    bool linked = false;
    ArmOptions nested_opts = sc.opts;
    if (inline_tmpl) {
      const Json& bp = body["properties"];
      if (const Json* v = Member(bp, "parameters")) nested_values = *v;
      if (const Json* eo = Member(bp, "expressionEvaluationOptions")) {
        if (const Json* m = Member(*eo, "scope"); m && m->is_string()) {
          mode = AsciiLower(m->get<std::string>());
        }
      }
      if (const Json* rg = Member(body, "resourceGroup"); rg && rg->is_string()) {
        nested_opts.resource_group = rg->get<std::string>();
      }
      if (const Json* sub = Member(body, "subscriptionId"); sub && sub->is_string()) {
        nested_opts.subscription_id = sub->get<std::string>();
      }
      nested_opts.deployment_name = name;
    } else if (is_deployment && props && Member(*props, "templateLink")) {
      linked = true;
    }
    Resource res;
    res.type = type;
    res.name = name;
    res.id = id;
    res.address = address;
    res.scope = scope;
    if (const Json* loc = Member(body, "location"); loc && loc->is_string()) {
      res.location = NormalizeLocation(loc->get_ref<const std::string&>());
    }
    std::string p;
    FinalizeUnknown(body, &p, &res.unknown);
    if (!res.location.empty() && res.IsUnknown("location")) res.location.clear();
    res.body = std::move(body);
    res.where.file = doc_.path;
    res.where.line = doc_.LineOf(ptr);
    res.where.pointer = ptr;
    res.origin = Origin::kArm;
    if (!symbolic.empty()) sc.symbolic_ids[symbolic] = id;
    if (linked) res.unknown.push_back("/properties/template");

    RETURN_IF_ERROR(Push(std::move(res), ptr));

    if (inline_tmpl) {
      const std::string tptr = ptr + "/properties/template";
      const std::string prefix = address + ".properties.template.";
      if (!inline_tmpl->is_object()) {
        return Locate(InvalidArgument("properties.template must be an object"), tptr);
      }
      if (mode == "inner") {
        Scope inner;
        RETURN_IF_ERROR(SetUpScope(inner, *inline_tmpl, tptr, nested_opts, &nested_values,
                                   fmt::format("{}: {}/properties/parameters", doc_.path, ptr)));
        RETURN_IF_ERROR(ExpandTemplateResources(inner, *inline_tmpl, tptr, prefix));
      } else {
        // Outer scope: the parent's parameters and variables.
        RETURN_IF_ERROR(ExpandTemplateResources(sc, *inline_tmpl, tptr, prefix));
      }
    }
    if (const Json* children = Member(r, "resources")) {
      RETURN_IF_ERROR(ExpandResources(sc, *children, ptr + "/resources", address + ".", &self));
    }
    return Status::Ok();
  }

  Status Push(Resource&& r, const std::string& ptr) {
    if (out_.size() >= options_.max_resources) {
      return Locate(ResourceExhausted(fmt::format(
                        "the template expands to more than {} resources (after copy loops and "
                        "nested deployments), the limit",
                        options_.max_resources)),
                    ptr);
    }
    out_.push_back(std::move(r));
    return Status::Ok();
  }

  // Replaces unknown markers with their expression text and lists where they are.
  void FinalizeUnknown(Json& v, std::string* ptr, std::vector<std::string>* out) {
    if (arm::IsUnknown(v)) {
      out->push_back(*ptr);
      v = arm::UnknownText(v);
      return;
    }
    if (v.is_binary()) {  // cannot happen from JSON text; keep output dumpable
      v = nullptr;
      return;
    }
    const size_t n = ptr->size();
    if (v.is_array()) {
      for (size_t i = 0; i < v.size(); ++i) {
        *ptr += '/';
        *ptr += std::to_string(i);
        FinalizeUnknown(v[i], ptr, out);
        ptr->resize(n);
      }
    } else if (v.is_object()) {
      for (auto it = v.begin(); it != v.end(); ++it) {
        *ptr += '/';
        AppendPointerToken(it.key(), ptr);
        FinalizeUnknown(it.value(), ptr, out);
        ptr->resize(n);
      }
    }
  }

  const SourceDoc& doc_;
  const ArmOptions& options_;
  std::vector<Resource> out_;
  arm::ExprCache cache_;
  Scope* scope_ = nullptr;
  std::vector<Loop> loops_;
  bool nondet_ = false;
  bool located_ = false;
  std::vector<std::string> chain_;
};

}  // namespace

Result<std::vector<Resource>> ExpandArmTemplate(const SourceDoc& tmpl, const ArmOptions& options) {
  Expander ex(tmpl, options);
  return ex.Run();
}

}  // namespace gantry::assess
