// Helpers shared by the rule tables (rule_util.h).
#include <fmt/format.h>

#include <cmath>

#include "gantry/core/text.h"
#include "rule_util.h"

namespace gantry::assess::rule {

Prop Read(const Resource& r, std::string_view path) {
  Prop p;
  p.path = std::string(path);
  if (r.IsUnknown(path)) {
    p.unknown = true;
    return p;
  }
  p.value = r.Get(path);
  return p;
}

std::optional<bool> AsBool(const Json* v) {
  if (v == nullptr) return std::nullopt;
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_string()) {
    const std::string& s = v->get_ref<const std::string&>();
    if (EqualsIgnoreCase(s, "true")) return true;
    if (EqualsIgnoreCase(s, "false")) return false;
  }
  return std::nullopt;
}

std::optional<double> AsNumber(const Json* v) {
  if (v == nullptr) return std::nullopt;
  if (v->is_number()) return v->get<double>();
  if (v->is_string()) {
    double d = 0;
    if (ParseNumber(v->get_ref<const std::string&>(), &d)) return d;
  }
  return std::nullopt;
}

std::optional<std::string> AsString(const Json* v) {
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return v->get<std::string>();
}

bool StringIs(const Json* v, std::string_view want) {
  return v != nullptr && v->is_string() && EqualsIgnoreCase(v->get_ref<const std::string&>(), want);
}

bool HasValue(const Json* v) {
  if (v == nullptr) return false;
  if (v->is_string()) return !TrimSpace(v->get_ref<const std::string&>()).empty();
  if (v->is_array() || v->is_object()) return !v->empty();
  return true;
}

std::string Show(const Prop& p) {
  if (p.unknown) return "not known before deployment";
  if (p.value == nullptr) return "absent";
  const Json& v = *p.value;
  if (v.is_string()) return fmt::format("'{}'", v.get_ref<const std::string&>());
  if (v.is_array()) return fmt::format("[{} item{}]", v.size(), v.size() == 1 ? "" : "s");
  if (v.is_object()) return fmt::format("{{{} key{}}}", v.size(), v.size() == 1 ? "" : "s");
  return v.dump();
}

Verdict UnknownProp(const Prop& p) {
  return Verdict::Unknown(
      fmt::format("{} is not known before deployment; assess the deployed resource", p.path),
      p.path);
}

Verdict RequireString(const Resource& r, std::string_view path, std::string_view want,
                      bool absent_passes, std::string_view fix) {
  Prop p = Read(r, path);
  if (p.unknown) return UnknownProp(p);
  if (p.absent() ? absent_passes : StringIs(p.value, want)) return Verdict::Pass();
  return Verdict::Fail(fmt::format("{} is {}; {}", p.path, Show(p), fix), p.path);
}

Verdict RequireBool(const Resource& r, std::string_view path, bool want,
                    std::optional<bool> absent_means, std::string_view fix) {
  Prop p = Read(r, path);
  if (p.unknown) return UnknownProp(p);
  if (p.absent()) {
    if (absent_means == want) return Verdict::Pass();
    std::string dflt = absent_means ? fmt::format(" (the default is {})", *absent_means) : "";
    return Verdict::Fail(fmt::format("{} is absent{}; {}", p.path, dflt, fix), p.path);
  }
  std::optional<bool> b = AsBool(p.value);
  if (b == want) return Verdict::Pass();
  return Verdict::Fail(fmt::format("{} is {}; {}", p.path, Show(p), fix), p.path);
}

Verdict RequirePresent(const Resource& r, std::string_view path, std::string_view fix) {
  Prop p = Read(r, path);
  if (p.unknown) return UnknownProp(p);
  if (HasValue(p.value)) return Verdict::Pass();
  return Verdict::Fail(fmt::format("{} is {}; {}", p.path, p.absent() ? "absent" : "empty", fix),
                       p.path);
}

std::string LastSegment(std::string_view ref) {
  while (!ref.empty() && ref.back() == '/') ref.remove_suffix(1);
  size_t cut = ref.find_last_of("/:");
  return std::string(cut == std::string_view::npos ? ref : ref.substr(cut + 1));
}

std::string FirstSegment(std::string_view name) {
  size_t slash = name.find('/');
  return std::string(slash == std::string_view::npos ? name : name.substr(0, slash));
}

namespace {

// "Microsoft.X/a/b" + "n1/n2" -> "microsoft.x/a/n1/b/n2": the tail of the resource's id.
std::string IdTail(const Resource& r) {
  auto split = [](std::string_view s) {
    std::vector<std::string_view> out;
    size_t start = 0;
    while (start <= s.size()) {
      size_t slash = s.find('/', start);
      out.push_back(s.substr(start, slash == s.npos ? s.npos : slash - start));
      if (slash == s.npos) break;
      start = slash + 1;
    }
    return out;
  };
  std::vector<std::string_view> t = split(r.type), n = split(r.name);
  std::string out;
  for (size_t i = 0; i < t.size(); ++i) {
    if (i > 0) out.push_back('/');
    out.append(t[i]);
    if (i > 0 && i - 1 < n.size()) {
      out.push_back('/');
      out.append(n[i - 1]);
    }
  }
  return AsciiLower(out);
}

}  // namespace

bool RefersTo(const Resource& target, std::string_view ref) {
  if (ref.empty()) return false;
  if (!target.id.empty() && EqualsIgnoreCase(ref, target.id)) return true;
  std::string lower = AsciiLower(ref);
  std::string tail = IdTail(target);
  if (lower.size() > tail.size() &&
      lower.compare(lower.size() - tail.size(), tail.size(), tail) == 0 &&
      lower[lower.size() - tail.size() - 1] == '/') {
    return true;
  }
  if (lower == tail) return true;
  if (EqualsIgnoreCase(ref, target.type + "/" + target.name)) return true;
  // A bare name ("ws1") or "azureml:name".
  return ref.find('/') == std::string_view::npos &&
         EqualsIgnoreCase(LastSegment(ref), LastSegment(target.name));
}

const Resource* Resolve(const RuleContext& ctx, std::string_view ref, std::string_view arm_type) {
  if (ref.empty()) return nullptr;
  const Resource* r = ctx.Find(ref);
  if (r != nullptr && r->IsType(arm_type)) return r;
  std::string last = LastSegment(ref);
  for (const Resource* c : ctx.OfType(arm_type)) {
    if (EqualsIgnoreCase(LastSegment(c->name), last)) return c;
  }
  return nullptr;
}

const Resource* ParentWorkspace(const RuleContext& ctx, const Resource& child) {
  std::string ws = FirstSegment(child.name);
  if (ws.empty() || ws == child.name) return nullptr;
  return ctx.Find(std::string(kWorkspace) + "/" + ws);
}

std::string ComputeType(const Resource& compute) {
  std::optional<std::string> s = AsString(compute.Get("properties.computeType"));
  return s ? *s : "";
}

std::string TagLower(const Resource& r, std::string_view name) {
  const std::string* v = r.Tag(name);
  return v ? AsciiLower(TrimSpace(*v)) : "";
}

bool TagIsTrue(const Resource& r, std::string_view name) {
  std::string v = TagLower(r, name);
  return v == "true" || v == "yes" || v == "1";
}

std::optional<double> ParseIsoDuration(std::string_view s) {
  s = TrimSpace(s);
  if (s.size() < 3 || (s[0] != 'P' && s[0] != 'p')) return std::nullopt;
  double total = 0;
  bool in_time = false, any = false, time_part = false;
  size_t i = 1;
  while (i < s.size()) {
    char c = s[i];
    if (c == 'T' || c == 't') {
      if (in_time) return std::nullopt;
      in_time = true;
      ++i;
      continue;
    }
    size_t start = i;
    while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == ',')) ++i;
    if (i == start || i >= s.size()) return std::nullopt;
    std::string num(s.substr(start, i - start));
    for (char& ch : num) {
      if (ch == ',') ch = '.';
    }
    double v = 0;
    if (!ParseNumber(num, &v) || v < 0) return std::nullopt;
    char unit = static_cast<char>(s[i] & ~0x20);  // upper case
    ++i;
    double scale = 0;
    if (!in_time && unit == 'W') {
      scale = 7 * 86400;
    } else if (!in_time && unit == 'D') {
      scale = 86400;
    } else if (in_time && unit == 'H') {
      scale = 3600;
    } else if (in_time && unit == 'M') {
      scale = 60;
    } else if (in_time && unit == 'S') {
      scale = 1;
    } else {
      return std::nullopt;  // Y and M (months) have no fixed length
    }
    total += v * scale;
    any = true;
    time_part = in_time;
  }
  // "P1DT" (a designator with nothing after it) is malformed.
  if (!any || (in_time && !time_part)) return std::nullopt;
  return total;
}

std::string Usd(double amount) {
  double rounded = std::round(amount * 100) / 100;
  std::string digits = fmt::format("{:.2f}", std::fabs(rounded));
  size_t dot = digits.find('.');
  std::string whole = digits.substr(0, dot), out;
  for (size_t i = 0; i < whole.size(); ++i) {
    if (i > 0 && (whole.size() - i) % 3 == 0) out += ',';
    out += whole[i];
  }
  return fmt::format("{}${}{}", rounded < 0 ? "-" : "", out, digits.substr(dot));
}

PriceQuote Quote(const RuleContext& ctx, const Resource& r, std::string_view size) {
  PriceQuote q;
  q.size = std::string(size);
  std::string region;
  for (char c : (r.location.empty() ? ctx.default_region() : r.location)) {
    if (c != ' ') region += c;
  }
  q.region = AsciiLower(region);
  if (ctx.catalog() == nullptr) {
    q.missing = "no price catalog was given";
  } else if (size.empty()) {
    q.missing = "the VM size is not known";
  } else if ((q.vm = ctx.catalog()->FindSize(size)) == nullptr) {
    q.missing = fmt::format("{} is not in the price catalog", size);
  } else {
    q.price = q.vm->PriceIn(q.region);
  }
  return q;
}

std::string NoAmount(const PriceQuote& q, std::string_view which_price) {
  if (!q.missing.empty()) return "no amount: " + q.missing;
  return fmt::format("no amount: the catalog has no {} price for {} in {}", which_price, q.vm->name,
                     q.region);
}

}  // namespace gantry::assess::rule
