// ARM expression parser and evaluator. Semantics follow the ARM template
// function reference: names are case-insensitive, object property access is
// case-insensitive, `equals` and `contains` on strings are case-sensitive,
// `startsWith`/`endsWith`/`indexOf`/`lastIndexOf` are not, `string(true)` is
// "True" (ARM runs on .NET). Strings are handled by code point, so substring
// and friends never split a UTF-8 sequence.
#include "arm_expr.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "gantry/assess/resource.h"
#include "gantry/core/text.h"

namespace gantry::assess::arm {

Json MakeUnknown(std::string_view text) {
  return Json::binary(std::vector<std::uint8_t>(text.begin(), text.end()), kUnknownSubtype);
}

bool IsUnknown(const Json& v) {
  return v.is_binary() && v.get_binary().has_subtype() &&
         v.get_binary().subtype() == kUnknownSubtype;
}

bool ContainsUnknown(const Json& v) {
  if (v.is_binary()) return true;
  if (v.is_array() || v.is_object()) {
    for (const Json& e : v) {
      if (ContainsUnknown(e)) return true;
    }
  }
  return false;
}

std::string UnknownText(const Json& v) {
  if (!v.is_binary()) return "";
  const auto& b = v.get_binary();
  return std::string(b.begin(), b.end());
}

bool IsExpression(std::string_view s) {
  return s.size() >= 2 && s.front() == '[' && s.back() == ']' && s[1] != '[';
}

std::string_view LiteralOf(std::string_view s) {
  if (s.size() >= 2 && s[0] == '[' && s[1] == '[') return s.substr(1);
  return s;
}

std::string_view TypeName(const Json& v) {
  switch (v.type()) {
    case Json::value_t::string:
      return "string";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "int";
    case Json::value_t::number_float:
      return "number";
    case Json::value_t::boolean:
      return "bool";
    case Json::value_t::array:
      return "array";
    case Json::value_t::object:
      return "object";
    case Json::value_t::null:
      return "null";
    default:
      return "unknown";
  }
}

Status Context::Charge(int64_t units) {
  budget -= units;
  if (budget < 0) {
    return ResourceExhausted(
        "the template builds more than 64 million values and bytes while it is expanded (an "
        "expression or copy loop that keeps growing a value); simplify it");
  }
  return Status::Ok();
}

namespace {

// Size of `v` in budget units, or -1 when it nests deeper than the limit.
int64_t DeepSize(const Json& v, int depth) {
  if (depth > kMaxJsonDepth) return -1;
  if (v.is_string()) return 1 + static_cast<int64_t>(v.get_ref<const std::string&>().size());
  if (!v.is_array() && !v.is_object()) return 1;
  int64_t n = 1;
  for (const Json& e : v) {
    int64_t s = DeepSize(e, depth + 1);
    if (s < 0) return -1;
    n += s;
  }
  return n;
}

}  // namespace

Status Context::ChargeDeep(const Json& v) {
  int64_t n = DeepSize(v, 0);
  if (n < 0) {
    return InvalidArgument(fmt::format(
        "an expression builds a value nested deeper than the limit of {} arrays/objects",
        kMaxJsonDepth));
  }
  return Charge(n);
}

// ---------------------------------------------------------------------------
// Parser

namespace {

class ExprParser {
 public:
  ExprParser(std::string_view text, int max_depth) : s_(text), max_depth_(max_depth) {}

  Result<std::unique_ptr<Node>> Run() {
    Skip();
    if (i_ == s_.size()) return Err("the expression is empty");
    ASSIGN_OR_RETURN(auto n, Parse(1));
    Skip();
    if (i_ != s_.size()) return Err("unexpected text after the expression");
    return n;
  }

 private:
  Status Err(std::string_view what) const {
    return InvalidArgument(fmt::format("expression '[{}]', column {}: {}", Clip(s_), i_ + 2, what));
  }
  static std::string Clip(std::string_view s) {
    if (s.size() <= 120) return std::string(s);
    return std::string(s.substr(0, 117)) + "...";
  }
  void Skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  static bool IdentStart(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$';
  }
  static bool IdentChar(char c) { return IdentStart(c) || (c >= '0' && c <= '9'); }

  Status CheckDepth(int depth) const {
    if (depth > max_depth_) {
      return InvalidArgument(fmt::format(
          "expression '[{}]' nests calls, indexes and property accesses deeper than the limit "
          "of {}; split it into variables",
          Clip(s_), max_depth_));
    }
    return Status::Ok();
  }

  Result<std::unique_ptr<Node>> Parse(int depth) {
    RETURN_IF_ERROR(CheckDepth(depth));
    Skip();
    if (i_ == s_.size()) return Err("unexpected end of the expression; expected a value");
    auto n = std::make_unique<Node>();
    char c = s_[i_];
    if (c == '\'') {
      ++i_;
      n->kind = Node::kString;
      while (true) {
        if (i_ == s_.size()) return Err("a string literal is not closed with '");
        if (s_[i_] == '\'') {
          if (i_ + 1 < s_.size() && s_[i_ + 1] == '\'') {
            n->text += '\'';
            i_ += 2;
            continue;
          }
          ++i_;
          break;
        }
        n->text += s_[i_++];
      }
    } else if ((c >= '0' && c <= '9') ||
               (c == '-' && i_ + 1 < s_.size() && s_[i_ + 1] >= '0' && s_[i_ + 1] <= '9')) {
      size_t start = i_;
      if (c == '-') ++i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      if (i_ < s_.size() && s_[i_] == '.') return Err("only integer literals are allowed");
      int64_t v;
      if (!ParseNumber(s_.substr(start, i_ - start), &v)) {
        return Err(fmt::format("integer '{}' is out of range", s_.substr(start, i_ - start)));
      }
      n->kind = Node::kInt;
      n->number = v;
    } else if (IdentStart(c)) {
      size_t start = i_;
      while (i_ < s_.size() && IdentChar(s_[i_])) ++i_;
      std::string name(s_.substr(start, i_ - start));
      // A user-defined function: namespace.member(
      size_t save = i_;
      if (i_ < s_.size() && s_[i_] == '.' && i_ + 1 < s_.size() && IdentStart(s_[i_ + 1])) {
        size_t j = i_ + 1;
        while (j < s_.size() && IdentChar(s_[j])) ++j;
        size_t k = j;
        while (k < s_.size() && s_[k] == ' ') ++k;
        if (k < s_.size() && s_[k] == '(') {
          name += '.';
          name += s_.substr(i_ + 1, j - i_ - 1);
          i_ = j;
        }
      }
      (void)save;
      Skip();
      if (i_ == s_.size() || s_[i_] != '(') {
        return Err(fmt::format("expected '(' after the function name '{}'", name));
      }
      ++i_;
      n->kind = Node::kCall;
      n->text = std::move(name);
      Skip();
      if (i_ < s_.size() && s_[i_] == ')') {
        ++i_;
      } else {
        while (true) {
          ASSIGN_OR_RETURN(auto arg, Parse(depth + 1));
          n->args.push_back(std::move(arg));
          Skip();
          if (i_ == s_.size()) return Err("a function call is not closed with ')'");
          if (s_[i_] == ',') {
            ++i_;
            continue;
          }
          if (s_[i_] == ')') {
            ++i_;
            break;
          }
          return Err("expected ',' or ')' in the arguments of a function call");
        }
      }
    } else {
      return Err(
          fmt::format("unexpected character '{}'; expected a function call, a "
                      "'string' or an integer",
                      c));
    }
    // Property accesses and indexes; each counts as a level of nesting so that
    // the tree (destroyed and evaluated recursively) stays shallow.
    int chain = depth;
    while (true) {
      Skip();
      if (i_ < s_.size() && s_[i_] == '.') {
        ++i_;
        Skip();
        size_t start = i_;
        while (i_ < s_.size() && (IdentChar(s_[i_]) || s_[i_] == '-')) ++i_;
        if (start == i_) return Err("expected a property name after '.'");
        RETURN_IF_ERROR(CheckDepth(++chain));
        auto m = std::make_unique<Node>();
        m->kind = Node::kMember;
        m->text = std::string(s_.substr(start, i_ - start));
        m->args.push_back(std::move(n));
        n = std::move(m);
      } else if (i_ < s_.size() && s_[i_] == '[') {
        ++i_;
        RETURN_IF_ERROR(CheckDepth(++chain));
        ASSIGN_OR_RETURN(auto idx, Parse(chain + 1));
        Skip();
        if (i_ == s_.size() || s_[i_] != ']') return Err("expected ']' after an index");
        ++i_;
        auto m = std::make_unique<Node>();
        m->kind = Node::kIndex;
        m->args.push_back(std::move(n));
        m->args.push_back(std::move(idx));
        n = std::move(m);
      } else {
        break;
      }
    }
    return n;
  }

  std::string_view s_;
  size_t i_ = 0;
  int max_depth_;
};

}  // namespace

Result<std::unique_ptr<Node>> ParseExpression(std::string_view text, int max_depth) {
  return ExprParser(text, max_depth).Run();
}

// ---------------------------------------------------------------------------
// Helpers for strings by code point

namespace {

bool IsAscii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

// Byte offsets of each code point start, plus s.size() at the end.
std::vector<size_t> CodePoints(std::string_view s) {
  std::vector<size_t> out;
  out.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) out.push_back(i);
  }
  out.push_back(s.size());
  return out;
}

size_t CharCount(std::string_view s) {
  if (IsAscii(s)) return s.size();
  return CodePoints(s).size() - 1;
}

// Code points [start, start+len) of s, clamped.
std::string Substr(std::string_view s, size_t start, size_t len) {
  if (IsAscii(s)) {
    if (start >= s.size()) return "";
    return std::string(s.substr(start, len));
  }
  std::vector<size_t> cp = CodePoints(s);
  size_t n = cp.size() - 1;
  if (start >= n) return "";
  size_t end = len > n - start ? n : start + len;
  return std::string(s.substr(cp[start], cp[end] - cp[start]));
}

// Code point index of a byte offset.
int64_t CharIndex(std::string_view s, size_t byte) {
  if (IsAscii(s)) return static_cast<int64_t>(byte);
  int64_t n = 0;
  for (size_t i = 0; i < byte && i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) ++n;
  }
  return n;
}

// Replaces invalid UTF-8 with U+FFFD so that no value can break a JSON dump.
std::string ValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const auto* u = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = u[i];
    size_t n = 0;
    if (c < 0x80) {
      n = 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
      n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 3;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 4;
    }
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (u[i + k] & 0xC0) == 0x80;
    if (ok && n == 3 && c == 0xE0 && u[i + 1] < 0xA0) ok = false;
    if (ok && n == 3 && c == 0xED && u[i + 1] >= 0xA0) ok = false;
    if (ok && n == 4 && c == 0xF0 && u[i + 1] < 0x90) ok = false;
    if (ok && n == 4 && c == 0xF4 && u[i + 1] >= 0x90) ok = false;
    if (ok) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

// Case-insensitive (ASCII) search; npos when absent.
size_t FindIgnoreCase(std::string_view hay, std::string_view needle, bool last) {
  std::string h = AsciiLower(hay), n = AsciiLower(needle);
  return last ? h.rfind(n) : h.find(n);
}

// ARM's text of a value inside concat/format/string: .NET spellings.
std::string ToText(const Json& v) {
  switch (v.type()) {
    case Json::value_t::string:
      return v.get_ref<const std::string&>();
    case Json::value_t::boolean:
      return v.get<bool>() ? "True" : "False";
    case Json::value_t::null:
      return "";
    case Json::value_t::number_integer:
      return std::to_string(v.get<int64_t>());
    case Json::value_t::number_unsigned:
      return std::to_string(v.get<uint64_t>());
    default:
      return v.dump(-1, ' ', false, Json::error_handler_t::replace);
  }
}

const Json* FindMember(const Json& obj, std::string_view key) {
  auto it = obj.find(key);
  if (it != obj.end()) return &*it;
  for (auto j = obj.begin(); j != obj.end(); ++j) {
    if (EqualsIgnoreCase(j.key(), key)) return &*j;
  }
  return nullptr;
}

uint64_t Fnv1a(std::string_view s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

uint64_t HashParts(const std::vector<std::string>& parts, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ULL ^ seed;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) h = Fnv1a("-", h);
    h = Fnv1a(parts[i], h);
  }
  return Mix(h);
}

}  // namespace

std::string UniqueString(const std::vector<std::string>& parts) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
  uint64_t h = HashParts(parts, 0);
  std::string out;
  for (int i = 0; i < 13; ++i) {
    out += kAlphabet[h >> 59];
    h <<= 5;
  }
  return out;
}

std::string GuidOf(const std::vector<std::string>& parts) {
  uint64_t a = HashParts(parts, 0x9e3779b97f4a7c15ULL), b = HashParts(parts, 0x7f4a7c159e3779b9ULL);
  a = (a & ~0xF000ULL) | 0x5000ULL;                  // version 5 nibble
  b = (b & ~(0xC000ULL << 48)) | (0x8000ULL << 48);  // RFC 4122 variant
  std::string h = fmt::format("{:016x}{:016x}", a, b);
  return fmt::format("{}-{}-{}-{}-{}", h.substr(0, 8), h.substr(8, 4), h.substr(12, 4),
                     h.substr(16, 4), h.substr(20, 12));
}

// ---------------------------------------------------------------------------
// Evaluator

namespace {

// A value that is either owned or a reference into stable storage
// (a variable, a parameter), so that `variables('big').x` copies nothing.
struct Val {
  Json own;
  const Json* ref = nullptr;
  const Json& get() const { return ref ? *ref : own; }
};

struct Fn;

class Evaluator {
 public:
  Evaluator(Context& ctx, std::string_view source) : ctx_(ctx), source_(source) {}

  Result<Val> Eval(const Node& n);

  // The owned value of v; copying out of a reference is charged.
  Result<Json> Take(Val&& v) {
    if (!v.ref) return std::move(v.own);
    if (v.ref->is_array() || v.ref->is_object()) RETURN_IF_ERROR(ctx_.ChargeDeep(*v.ref));
    return *v.ref;
  }

  Json Unknown() const { return MakeUnknown(source_); }
  Context& ctx() { return ctx_; }

 private:
  Result<Val> Call(const Node& n);

  Context& ctx_;
  std::string_view source_;
};

using Args = std::vector<Val>;
using Impl = Result<Json> (*)(Evaluator& ev, const std::string& name, Args& a);

struct Fn {
  int min_args;
  int max_args;  // -1: any
  Impl impl;
  // Keeps unknown arguments inside the result instead of returning unknown.
  bool passes_unknown = false;
};

Status ArgError(const std::string& name, size_t i, std::string_view want, const Json& got) {
  return InvalidArgument(
      fmt::format("{}(): argument {} must be {}, got {}", name, i + 1, want, TypeName(got)));
}

Result<std::string_view> StrArg(const std::string& name, const Args& a, size_t i) {
  const Json& v = a[i].get();
  if (!v.is_string()) return ArgError(name, i, "a string", v);
  return std::string_view(v.get_ref<const std::string&>());
}

Result<int64_t> IntArg(const std::string& name, const Args& a, size_t i) {
  const Json& v = a[i].get();
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(u);
  }
  return ArgError(name, i, "an integer", v);
}

Result<bool> BoolArg(const std::string& name, const Args& a, size_t i) {
  const Json& v = a[i].get();
  if (!v.is_boolean()) return ArgError(name, i, "a bool", v);
  return v.get<bool>();
}

Result<Json> Owned(Evaluator& ev, Args& a, size_t i) {
  Val v = std::move(a[i]);
  return ev.Take(std::move(v));
}

// --- strings and arrays ---

Result<Json> FnConcat(Evaluator& ev, const std::string& name, Args& a) {
  if (a.empty()) return Json("");
  if (a[0].get().is_array()) {
    Json out = Json::array();
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].get().is_null()) continue;
      if (!a[i].get().is_array()) return ArgError(name, i, "an array like the first", a[i].get());
      ASSIGN_OR_RETURN(Json arr, Owned(ev, a, i));
      RETURN_IF_ERROR(ev.ctx().Charge(static_cast<int64_t>(arr.size())));
      for (Json& e : arr) out.push_back(std::move(e));
    }
    return out;
  }
  std::string out;
  for (size_t i = 0; i < a.size(); ++i) {
    const Json& v = a[i].get();
    if (v.is_array() || v.is_object()) return ArgError(name, i, "a string, int or bool", v);
    out += ToText(v);
  }
  RETURN_IF_ERROR(ev.ctx().Charge(static_cast<int64_t>(out.size())));
  return Json(std::move(out));
}

// .NET composite formatting: {index[,alignment][:format]}, {{ and }}.
Result<std::string> FormatNumber(const Json& v, std::string_view spec, const std::string& name) {
  if (!v.is_number()) {
    return InvalidArgument(
        fmt::format("{}(): format '{}' applies to numbers, got {}", name, spec, TypeName(v)));
  }
  char kind = spec[0];
  std::string_view digits = spec.substr(1);
  int prec = -1;
  if (!digits.empty()) {
    if (!ParseNumber(digits, &prec) || prec < 0 || prec > 99) {
      return InvalidArgument(fmt::format("{}(): format '{}' is not supported", name, spec));
    }
  }
  double d = v.get<double>();
  int64_t i = v.is_number_float() ? static_cast<int64_t>(d) : v.get<int64_t>();
  switch (kind) {
    case 'D':
    case 'd': {
      if (v.is_number_float()) break;
      std::string s = std::to_string(i < 0 ? -i : i);
      if (prec > 0 && static_cast<int>(s.size()) < prec) s.insert(0, prec - s.size(), '0');
      return (i < 0 ? "-" : "") + s;
    }
    case 'X':
    case 'x': {
      if (v.is_number_float()) break;
      std::string s = kind == 'X' ? fmt::format("{:X}", static_cast<uint64_t>(i))
                                  : fmt::format("{:x}", static_cast<uint64_t>(i));
      if (prec > 0 && static_cast<int>(s.size()) < prec) s.insert(0, prec - s.size(), '0');
      return s;
    }
    case 'F':
    case 'f':
      return fmt::format("{:.{}f}", d, prec < 0 ? 2 : prec);
    case 'N':
    case 'n': {
      std::string s = fmt::format("{:.{}f}", std::fabs(d), prec < 0 ? 2 : prec);
      size_t dot = s.find('.');
      if (dot == std::string::npos) dot = s.size();
      for (int k = static_cast<int>(dot) - 3; k > 0; k -= 3) s.insert(k, ",");
      return (d < 0 ? "-" : "") + s;
    }
    default:
      break;
  }
  // Custom formats of zeros only ("000"): zero padding.
  if (std::all_of(spec.begin(), spec.end(), [](char c) { return c == '0'; }) &&
      !v.is_number_float()) {
    std::string s = std::to_string(i < 0 ? -i : i);
    if (s.size() < spec.size()) s.insert(0, spec.size() - s.size(), '0');
    return (i < 0 ? "-" : "") + s;
  }
  return InvalidArgument(fmt::format(
      "{}(): format '{}' is not supported; use D<n>, X<n>, N<n>, F<n> or zeros like '000'", name,
      spec));
}

Result<Json> FnFormat(Evaluator& ev, const std::string& name, Args& a) {
  ASSIGN_OR_RETURN(std::string_view f, StrArg(name, a, 0));
  std::string out;
  for (size_t i = 0; i < f.size(); ++i) {
    char c = f[i];
    if (c == '}') {
      if (i + 1 < f.size() && f[i + 1] == '}') ++i;
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = f.find('}', i);
    if (close == std::string_view::npos) {
      return InvalidArgument(fmt::format("{}(): '{{' without '}}' in the format string", name));
    }
    std::string_view item = f.substr(i + 1, close - i - 1);
    std::string_view spec;
    if (size_t colon = item.find(':'); colon != std::string_view::npos) {
      spec = item.substr(colon + 1);
      item = item.substr(0, colon);
    }
    int align = 0;
    if (size_t comma = item.find(','); comma != std::string_view::npos) {
      if (!ParseNumber(item.substr(comma + 1), &align) || align > 1000 || align < -1000) {
        return InvalidArgument(fmt::format("{}(): bad alignment in '{{{}}}'", name, item));
      }
      item = item.substr(0, comma);
    }
    size_t idx;
    if (!ParseNumber(item, &idx) || idx + 1 >= a.size()) {
      return InvalidArgument(
          fmt::format("{}(): '{{{}}}' does not name one of the {} value(s) after the format string",
                      name, item, a.size() - 1));
    }
    const Json& v = a[idx + 1].get();
    std::string text;
    if (spec.empty()) {
      if (v.is_array() || v.is_object()) {
        return InvalidArgument(
            fmt::format("{}(): value {} is an {}; format takes strings, ints "
                        "and bools",
                        name, idx, TypeName(v)));
      }
      text = ToText(v);
    } else {
      ASSIGN_OR_RETURN(text, FormatNumber(v, spec, name));
    }
    size_t width = static_cast<size_t>(align < 0 ? -align : align);
    if (text.size() < width) {
      if (align > 0) {
        text.insert(0, width - text.size(), ' ');
      } else {
        text.append(width - text.size(), ' ');
      }
    }
    out += text;
    i = close;
  }
  RETURN_IF_ERROR(ev.ctx().Charge(static_cast<int64_t>(out.size())));
  return Json(std::move(out));
}

Result<Json> FnToLower(Evaluator&, const std::string& name, Args& a) {
  ASSIGN_OR_RETURN(std::string_view s, StrArg(name, a, 0));
  return Json(AsciiLower(s));
}

Result<Json> FnToUpper(Evaluator&, const std::string& name, Args& a) {
  ASSIGN_OR_RETURN(std::string_view s, StrArg(name, a, 0));
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return Json(std::move(out));
}

Result<Json> FnTrim(Evaluator&, const std::string& name, Args& a) {
  ASSIGN_OR_RETURN(std::string_view s, StrArg(name, a, 0));
  return Json(std::string(TrimSpace(s)));
}

Result<Json> FnBase64(Evaluator& ev, const std::string& name, Args& a) {
  ASSIGN_OR_RETURN(std::string_view s, StrArg(name, a, 0));
  RETURN_IF_ERROR(ev.ctx().Charge(static_cast<int64_t>(s.size() * 4 / 3)));
  return Json(Base64Encode(s));
}

Result<Json> FnBase64ToString(Evaluator&, const std::string& name, Args& a) {
  ASSIGN_OR_RETURN(std::string_view s, StrArg(name, a, 0));
  Result<std::string> d = Base64Decode(s);
  if (!d.ok()) return InvalidArgument(fmt::format("{}(): {}", name, d.status().message()));
  return Json(ValidUtf8(*d));
}

Result<Json> FnJson(Evaluator& ev, const std::string& name, Args& a) {
  ASSIGN_OR_RETURN(std::string_view s, StrArg(name, a, 0));
  Result<SourceDoc> d = ParseSource(s, "json()");
  if (!d.ok()) return InvalidArgument(fmt::format("{}(): {}", name, d.status().message()));
  RETURN_IF_ERROR(ev.ctx().ChargeDeep(d->value));
  return std::move(d->value);
}

Result<Json> FnBase64ToJson(Evaluator& ev, const std::string& name, Args& a) {
  ASSIGN_OR_RETURN(Json s, FnBase64ToString(ev, name, a));
  Args inner;
  inner.push_back(Val{std::move(s), nullptr});
  return FnJson(ev, name, inner);
}

Result<Json> FnString(Evaluator& ev, const std::string&, Args& a) {
  std::string s = ToText(a[0].get());
  RETURN_IF_ERROR(ev.ctx().Charge(static_cast<int64_t>(s.size())));
  return Json(std::move(s));
}

Result<Json> FnInt(Evaluator&, const std::string& name, Args& a) {
  const Json& v = a[0].get();
  if (v.is_number_integer() || v.is_number_unsigned()) return v;
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (!std::isfinite(d) || std::fabs(d) > 9.2e18) {
      return InvalidArgument(fmt::format("{}(): {} does not fit in an integer", name, d));
    }
    return Json(static_cast<int64_t>(d));
  }
  if (v.is_string()) {
    int64_t i;
    if (ParseNumber(v.get_ref<const std::string&>(), &i)) return Json(i);
    return InvalidArgument(fmt::format("{}(): '{}' is not an integer", name,
                                       v.get_ref<const std::string&>().substr(0, 64)));
  }
  if (v.is_boolean()) return Json(v.get<bool>() ? 1 : 0);
  return ArgError(name, 0, "a string or a number", v);
}

Result<Json> FnFloat(Evaluator&, const std::string& name, Args& a) {
  const Json& v = a[0].get();
  if (v.is_number()) return Json(v.get<double>());
  if (v.is_string()) {
    double d;
    if (ParseNumber(v.get_ref<const std::string&>(), &d)) return Json(d);
    return InvalidArgument(fmt::format("{}(): '{}' is not a number", name,
                                       v.get_ref<const std::string&>().substr(0, 64)));
  }
  return ArgError(name, 0, "a string or a number", v);
}

Result<Json> FnBool(Evaluator&, const std::string& name, Args& a) {
  const Json& v = a[0].get();
  if (v.is_boolean()) return v;
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (EqualsIgnoreCase(s, "true")) return Json(true);
    if (EqualsIgnoreCase(s, "false")) return Json(false);
    return InvalidArgument(
        fmt::format("{}(): '{}' is neither 'true' nor 'false'", name, s.substr(0, 64)));
  }
  if (v.is_number_integer() || v.is_number_unsigned()) return Json(v.get<int64_t>() != 0);
  return ArgError(name, 0, "a string, int or bool", v);
}

Result<Json> FnLength(Evaluator&, const std::string& name, Args& a) {
  const Json& v = a[0].get();
  if (v.is_string()) return Json(static_cast<int64_t>(CharCount(v.get_ref<const std::string&>())));
  if (v.is_array() || v.is_object()) return Json(static_cast<int64_t>(v.size()));
  if (v.is_null()) return Json(0);
  return ArgError(name, 0, "a string, array or object", v);
}

Result<Json> FnEmpty(Evaluator&, const std::string&, Args& a) {
  const Json& v = a[0].get();
  if (v.is_null()) return Json(true);
  if (v.is_string()) return Json(v.get_ref<const std::string&>().empty());
  if (v.is_array() || v.is_object()) return Json(v.empty());
  return Json(false);
}

Result<Json> FnFirstLast(Evaluator& ev, const std::string& name, Args& a) {
  const bool last = EqualsIgnoreCase(name, "last");
  const Json& v = a[0].get();
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    size_t n = CharCount(s);
    if (n == 0) return Json("");
    return Json(Substr(s, last ? n - 1 : 0, 1));
  }
  if (v.is_array()) {
    if (v.empty()) return Json(nullptr);
    Val e{Json(), last ? &v.back() : &v.front()};
    return ev.Take(std::move(e));
  }
  if (v.is_null()) return Json(nullptr);
  return ArgError(name, 0, "a string or an array", v);
}

Result<Json> FnTakeSkip(Evaluator& ev, const std::string& name, Args& a) {
  const bool take = EqualsIgnoreCase(name, "take");
  ASSIGN_OR_RETURN(int64_t n, IntArg(name, a, 1));
  if (n < 0) n = 0;
  const Json& v = a[0].get();
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    size_t count = CharCount(s), k = std::min<size_t>(static_cast<size_t>(n), count);
    return Json(take ? Substr(s, 0, k) : Substr(s, k, count - k));
  }
  if (v.is_array()) {
    size_t k = std::min<size_t>(static_cast<size_t>(n), v.size());
    Json out = Json::array();
    size_t from = take ? 0 : k, to = take ? k : v.size();
    for (size_t i = from; i < to; ++i) {
      Val e{Json(), &v[i]};
      ASSIGN_OR_RETURN(Json c, ev.Take(std::move(e)));
      out.push_back(std::move(c));
    }
    RETURN_IF_ERROR(ev.ctx().Charge(static_cast<int64_t>(out.size())));
    return out;
  }
  return ArgError(name, 0, "a string or an array", v);
}

Result<Json> FnSplit(Evaluator& ev, const std::string& name, Args& a) {
  ASSIGN_OR_RETURN(std::string_view s, StrArg(name, a, 0));
  std::vector<std::string> delims;
  const Json& d = a[1].get();
  if (d.is_string()) {
    delims.push_back(d.get<std::string>());
  } else if (d.is_array()) {
    for (const Json& e : d) {
      if (!e.is_string()) return ArgError(name, 1, "a string or an array of strings", d);
      delims.push_back(e.get<std::string>());
    }
  } else {
    return ArgError(name, 1, "a string or an array of strings", d);
  }
  Json out = Json::array();
  size_t start = 0, i = 0;
  while (i <= s.size()) {
    size_t hit_len = 0;
    for (const std::string& dl : delims) {
      if (!dl.empty() && s.compare(i, dl.size(), dl) == 0 && i + dl.size() <= s.size()) {
        hit_len = dl.size();
        break;
      }
    }
    if (hit_len > 0) {
      out.push_back(std::string(s.substr(start, i - start)));
      i += hit_len;
      start = i;
    } else if (i == s.size()) {
      break;
    } else {
      ++i;
    }
  }
  out.push_back(std::string(s.substr(start)));
  RETURN_IF_ERROR(ev.ctx().Charge(static_cast<int64_t>(out.size() + s.size())));
  return out;
}

Result<Json> FnJoin(Evaluator& ev, const std::string& name, Args& a) {
  const Json& arr = a[0].get();
  if (!arr.is_array()) return ArgError(name, 0, "an array", arr);
  ASSIGN_OR_RETURN(std::string_view sep, StrArg(name, a, 1));
  std::string out;
  bool first = true;
  for (const Json& e : arr) {
    if (e.is_array() || e.is_object()) return ArgError(name, 0, "an array of strings", arr);
    if (!first) out += sep;
    first = false;
    out += ToText(e);
  }
  RETURN_IF_ERROR(ev.ctx().Charge(static_cast<int64_t>(out.size())));
  return Json(std::move(out));
}

Result<Json> FnReplace(Evaluator& ev, const std::string& name, Args& a) {
  ASSIGN_OR_RETURN(std::string_view s, StrArg(name, a, 0));
  ASSIGN_OR_RETURN(std::string_view from, StrArg(name, a, 1));
  ASSIGN_OR_RETURN(std::string_view to, StrArg(name, a, 2));
  if (from.empty()) {
    return InvalidArgument(fmt::format("{}(): the string to replace (argument 2) is empty", name));
  }
  std::string out;
  size_t i = 0;
  while (true) {
    size_t hit = s.find(from, i);
    if (hit == std::string_view::npos) break;
    out += s.substr(i, hit - i);
    out += to;
    i = hit + from.size();
    if (out.size() > (size_t{64} << 20)) break;  // the budget below refuses it
  }
  out += s.substr(std::min(i, s.size()));
  RETURN_IF_ERROR(ev.ctx().Charge(static_cast<int64_t>(out.size())));
  return Json(std::move(out));
}

Result<Json> FnSubstring(Evaluator&, const std::string& name, Args& a) {
  ASSIGN_OR_RETURN(std::string_view s, StrArg(name, a, 0));
  ASSIGN_OR_RETURN(int64_t start, IntArg(name, a, 1));
  const int64_t n = static_cast<int64_t>(CharCount(s));
  int64_t len = n - start;
  if (a.size() > 2) {
    ASSIGN_OR_RETURN(len, IntArg(name, a, 2));
  }
  if (start < 0 || start > n || len < 0 || len > n - start) {
    return InvalidArgument(
        fmt::format("{}(): start {} and length {} are outside the string of {} characters", name,
                    start, len, n));
  }
  return Json(Substr(s, static_cast<size_t>(start), static_cast<size_t>(len)));
}

Result<Json> FnStartsEnds(Evaluator&, const std::string& name, Args& a) {
  ASSIGN_OR_RETURN(std::string_view s, StrArg(name, a, 0));
  ASSIGN_OR_RETURN(std::string_view p, StrArg(name, a, 1));
  if (p.size() > s.size()) return Json(false);
  bool starts = EqualsIgnoreCase(name, "startsWith");
  return Json(EqualsIgnoreCase(starts ? s.substr(0, p.size()) : s.substr(s.size() - p.size()), p));
}

Result<Json> FnIndexOf(Evaluator&, const std::string& name, Args& a) {
  ASSIGN_OR_RETURN(std::string_view s, StrArg(name, a, 0));
  ASSIGN_OR_RETURN(std::string_view p, StrArg(name, a, 1));
  const bool last = EqualsIgnoreCase(name, "lastIndexOf");
  if (p.empty()) return Json(last ? static_cast<int64_t>(CharCount(s)) - 1 : 0);
  size_t hit = FindIgnoreCase(s, p, last);
  if (hit == std::string::npos) return Json(-1);
  return Json(CharIndex(s, hit));
}

Result<Json> FnPadLeft(Evaluator& ev, const std::string& name, Args& a) {
  const Json& v = a[0].get();
  if (v.is_array() || v.is_object() || v.is_null()) return ArgError(name, 0, "a string or int", v);
  std::string s = ToText(v);
  ASSIGN_OR_RETURN(int64_t total, IntArg(name, a, 1));
  std::string pad = " ";
  if (a.size() > 2) {
    ASSIGN_OR_RETURN(std::string_view p, StrArg(name, a, 2));
    if (CharCount(p) != 1) {
      return InvalidArgument(fmt::format("{}(): the padding must be one character", name));
    }
    pad = std::string(p);
  }
  if (total > 16384) {
    return InvalidArgument(fmt::format("{}(): total length {} is over 16384", name, total));
  }
  int64_t n = static_cast<int64_t>(CharCount(s));
  std::string out;
  for (int64_t i = n; i < total; ++i) out += pad;
  out += s;
  RETURN_IF_ERROR(ev.ctx().Charge(static_cast<int64_t>(out.size())));
  return Json(std::move(out));
}

// --- comparison and logic ---

bool DeepEquals(const Json& x, const Json& y) {
  if (x.is_number() && y.is_number()) {
    if (x.is_number_float() || y.is_number_float()) return x.get<double>() == y.get<double>();
    if (x.is_number_unsigned() && y.is_number_unsigned())
      return x.get<uint64_t>() == y.get<uint64_t>();
    if (x.is_number_unsigned())
      return x.get<uint64_t>() <= INT64_MAX && x.get<int64_t>() == y.get<int64_t>();
    if (y.is_number_unsigned())
      return y.get<uint64_t>() <= INT64_MAX && x.get<int64_t>() == y.get<int64_t>();
    return x.get<int64_t>() == y.get<int64_t>();
  }
  if (x.type() != y.type()) return false;
  if (x.is_array()) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      if (!DeepEquals(x[i], y[i])) return false;
    }
    return true;
  }
  if (x.is_object()) {
    if (x.size() != y.size()) return false;
    for (auto it = x.begin(); it != x.end(); ++it) {
      const Json* o = FindMember(y, it.key());
      if (!o || !DeepEquals(it.value(), *o)) return false;
    }
    return true;
  }
  return x == y;
}

Result<Json> FnEquals(Evaluator&, const std::string&, Args& a) {
  return Json(DeepEquals(a[0].get(), a[1].get()));
}

Result<Json> FnAndOr(Evaluator&, const std::string& name, Args& a) {
  const bool is_and = EqualsIgnoreCase(name, "and");
  bool acc = is_and;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSIGN_OR_RETURN(bool b, BoolArg(name, a, i));
    acc = is_and ? (acc && b) : (acc || b);
  }
  return Json(acc);
}

Result<Json> FnNot(Evaluator&, const std::string& name, Args& a) {
  ASSIGN_OR_RETURN(bool b, BoolArg(name, a, 0));
  return Json(!b);
}

Result<Json> FnCompare(Evaluator&, const std::string& name, Args& a) {
  const Json& x = a[0].get();
  const Json& y = a[1].get();
  int cmp;
  if (x.is_number() && y.is_number()) {
    double dx = x.get<double>(), dy = y.get<double>();
    if (!x.is_number_float() && !y.is_number_float() && !x.is_number_unsigned() &&
        !y.is_number_unsigned()) {
      int64_t ix = x.get<int64_t>(), iy = y.get<int64_t>();
      cmp = ix < iy ? -1 : (ix > iy ? 1 : 0);
    } else {
      cmp = dx < dy ? -1 : (dx > dy ? 1 : 0);
    }
  } else if (x.is_string() && y.is_string()) {
    int c = x.get_ref<const std::string&>().compare(y.get_ref<const std::string&>());
    cmp = c < 0 ? -1 : (c > 0 ? 1 : 0);
  } else {
    return InvalidArgument(fmt::format("{}(): compares two ints or two strings, got {} and {}",
                                       name, TypeName(x), TypeName(y)));
  }
  std::string n = AsciiLower(name);
  if (n == "greater") return Json(cmp > 0);
  if (n == "greaterorequals") return Json(cmp >= 0);
  if (n == "less") return Json(cmp < 0);
  return Json(cmp <= 0);
}

// --- numbers ---

Result<Json> FnArith(Evaluator&, const std::string& name, Args& a) {
  ASSIGN_OR_RETURN(int64_t x, IntArg(name, a, 0));
  ASSIGN_OR_RETURN(int64_t y, IntArg(name, a, 1));
  std::string n = AsciiLower(name);
  int64_t r = 0;
  bool overflow = false;
  if (n == "add") {
    overflow = __builtin_add_overflow(x, y, &r);
  } else if (n == "sub") {
    overflow = __builtin_sub_overflow(x, y, &r);
  } else if (n == "mul") {
    overflow = __builtin_mul_overflow(x, y, &r);
  } else {
    if (y == 0) return InvalidArgument(fmt::format("{}(): division by zero", name));
    if (x == INT64_MIN && y == -1) {
      overflow = true;
    } else {
      r = n == "div" ? x / y : x % y;
    }
  }
  if (overflow) return InvalidArgument(fmt::format("{}({}, {}): integer overflow", name, x, y));
  return Json(r);
}

Result<Json> FnMinMax(Evaluator&, const std::string& name, Args& a) {
  const bool is_min = EqualsIgnoreCase(name, "min");
  std::vector<const Json*> vals;
  if (a.size() == 1 && a[0].get().is_array()) {
    for (const Json& e : a[0].get()) vals.push_back(&e);
  } else {
    for (const Val& v : a) vals.push_back(&v.get());
  }
  if (vals.empty()) return InvalidArgument(fmt::format("{}(): no values", name));
  int64_t best = 0;
  for (size_t i = 0; i < vals.size(); ++i) {
    if (!vals[i]->is_number_integer()) {
      return InvalidArgument(fmt::format("{}(): takes integers, got {}", name, TypeName(*vals[i])));
    }
    int64_t v = vals[i]->get<int64_t>();
    if (i == 0 || (is_min ? v < best : v > best)) best = v;
  }
  return Json(best);
}

Result<Json> FnRange(Evaluator& ev, const std::string& name, Args& a) {
  ASSIGN_OR_RETURN(int64_t start, IntArg(name, a, 0));
  ASSIGN_OR_RETURN(int64_t count, IntArg(name, a, 1));
  // ARM's own bounds.
  if (count < 0 || count > 10000) {
    return InvalidArgument(fmt::format("{}(): count {} must be between 0 and 10000", name, count));
  }
  if (start > INT32_MAX || start + count > INT32_MAX || start < INT32_MIN) {
    return InvalidArgument(fmt::format("{}(): start + count must not exceed 2147483647", name));
  }
  RETURN_IF_ERROR(ev.ctx().Charge(count));
  Json out = Json::array();
  for (int64_t i = 0; i < count; ++i) out.push_back(start + i);
  return out;
}

// --- collections ---

void DeepMerge(Json& into, Json&& from) {
  for (auto it = from.begin(); it != from.end(); ++it) {
    Json* existing = nullptr;
    for (auto j = into.begin(); j != into.end(); ++j) {
      if (EqualsIgnoreCase(j.key(), it.key())) {
        existing = &*j;
        break;
      }
    }
    if (existing && existing->is_object() && it->is_object()) {
      DeepMerge(*existing, std::move(*it));
    } else if (existing) {
      *existing = std::move(*it);
    } else {
      into[it.key()] = std::move(*it);
    }
  }
}

Result<Json> FnUnion(Evaluator& ev, const std::string& name, Args& a) {
  const bool objects = a[0].get().is_object();
  Json out = objects ? Json::object() : Json::array();
  for (size_t i = 0; i < a.size(); ++i) {
    const Json& v = a[i].get();
    if (v.is_null()) continue;
    if (objects ? !v.is_object() : !v.is_array()) {
      return ArgError(name, i, objects ? "an object like the first" : "an array", v);
    }
    ASSIGN_OR_RETURN(Json owned, Owned(ev, a, i));
    if (objects) {
      // ARM merges nested objects recursively; arrays and other values are replaced.
      DeepMerge(out, std::move(owned));
    } else {
      for (Json& e : owned) {
        bool seen = false;
        for (const Json& o : out) {
          if (DeepEquals(o, e)) {
            seen = true;
            break;
          }
        }
        if (!seen) out.push_back(std::move(e));
      }
    }
    RETURN_IF_ERROR(ev.ctx().Charge(static_cast<int64_t>(out.size())));
  }
  return out;
}

Result<Json> FnIntersection(Evaluator& ev, const std::string& name, Args& a) {
  const Json& first = a[0].get();
  if (!first.is_object() && !first.is_array())
    return ArgError(name, 0, "an array or object", first);
  for (size_t i = 1; i < a.size(); ++i) {
    if (a[i].get().type() != first.type()) {
      return ArgError(name, i, first.is_object() ? "an object" : "an array", a[i].get());
    }
  }
  Json out = first.is_object() ? Json::object() : Json::array();
  if (first.is_object()) {
    for (auto it = first.begin(); it != first.end(); ++it) {
      bool all = true;
      for (size_t i = 1; i < a.size() && all; ++i) {
        const Json* o = FindMember(a[i].get(), it.key());
        all = o && DeepEquals(*o, it.value());
      }
      if (all) out[it.key()] = it.value();
    }
  } else {
    for (const Json& e : first) {
      bool all = true;
      for (size_t i = 1; i < a.size() && all; ++i) {
        bool found = false;
        for (const Json& o : a[i].get()) {
          if (DeepEquals(o, e)) {
            found = true;
            break;
          }
        }
        all = found;
      }
      bool dup = false;
      for (const Json& o : out) dup = dup || DeepEquals(o, e);
      if (all && !dup) out.push_back(e);
    }
  }
  RETURN_IF_ERROR(ev.ctx().ChargeDeep(out));
  return out;
}

Result<Json> FnContains(Evaluator&, const std::string& name, Args& a) {
  const Json& c = a[0].get();
  const Json& item = a[1].get();
  if (c.is_string()) {
    if (item.is_array() || item.is_object()) return ArgError(name, 1, "a string", item);
    return Json(c.get_ref<const std::string&>().find(ToText(item)) != std::string::npos);
  }
  if (c.is_array()) {
    for (const Json& e : c) {
      if (DeepEquals(e, item)) return Json(true);
    }
    return Json(false);
  }
  if (c.is_object()) {
    if (!item.is_string()) return ArgError(name, 1, "a string (a property name)", item);
    return Json(FindMember(c, item.get_ref<const std::string&>()) != nullptr);
  }
  return ArgError(name, 0, "a string, array or object", c);
}

Result<Json> FnCreateArray(Evaluator& ev, const std::string&, Args& a) {
  Json out = Json::array();
  for (size_t i = 0; i < a.size(); ++i) {
    ASSIGN_OR_RETURN(Json v, Owned(ev, a, i));
    out.push_back(std::move(v));
  }
  RETURN_IF_ERROR(ev.ctx().Charge(static_cast<int64_t>(out.size()) + 1));
  return out;
}

Result<Json> FnCreateObject(Evaluator& ev, const std::string& name, Args& a) {
  if (a.size() % 2 != 0) {
    return InvalidArgument(
        fmt::format("{}(): takes pairs of name and value, got {} argument(s)", name, a.size()));
  }
  Json out = Json::object();
  for (size_t i = 0; i < a.size(); i += 2) {
    ASSIGN_OR_RETURN(std::string_view k, StrArg(name, a, i));
    std::string key(k);
    ASSIGN_OR_RETURN(Json v, Owned(ev, a, i + 1));
    out[key] = std::move(v);
  }
  RETURN_IF_ERROR(ev.ctx().Charge(static_cast<int64_t>(out.size()) + 1));
  return out;
}

Result<Json> FnArray(Evaluator& ev, const std::string&, Args& a) {
  ASSIGN_OR_RETURN(Json v, Owned(ev, a, 0));
  if (v.is_array()) return v;
  Json out = Json::array();
  out.push_back(std::move(v));
  return out;
}

Result<Json> FnCoalesce(Evaluator& ev, const std::string&, Args& a) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].get().is_null()) return Owned(ev, a, i);
  }
  return Json(nullptr);
}

Result<Json> FnItems(Evaluator& ev, const std::string& name, Args& a) {
  const Json& o = a[0].get();
  if (!o.is_object()) return ArgError(name, 0, "an object", o);
  std::vector<std::pair<std::string, const Json*>> kv;
  for (auto it = o.begin(); it != o.end(); ++it) kv.emplace_back(it.key(), &it.value());
  std::stable_sort(kv.begin(), kv.end(), [](const auto& x, const auto& y) {
    return AsciiLower(x.first) < AsciiLower(y.first);
  });
  Json out = Json::array();
  for (auto& [k, v] : kv) out.push_back(Json{{"key", k}, {"value", *v}});
  RETURN_IF_ERROR(ev.ctx().ChargeDeep(out));
  return out;
}

Result<Json> FnObjectKeys(Evaluator&, const std::string& name, Args& a) {
  const Json& o = a[0].get();
  if (!o.is_object()) return ArgError(name, 0, "an object", o);
  Json out = Json::array();
  for (auto it = o.begin(); it != o.end(); ++it) out.push_back(it.key());
  return out;
}

// tryGet(object, key...) / tryGet(array, index): null when absent.
Result<Json> FnTryGet(Evaluator& ev, const std::string&, Args& a) {
  const Json* cur = &a[0].get();
  for (size_t i = 1; i < a.size(); ++i) {
    const Json& k = a[i].get();
    if (cur->is_object() && k.is_string()) {
      cur = FindMember(*cur, k.get_ref<const std::string&>());
    } else if (cur->is_array() && k.is_number_integer()) {
      int64_t idx = k.get<int64_t>();
      cur = idx >= 0 && static_cast<size_t>(idx) < cur->size() ? &(*cur)[idx] : nullptr;
    } else {
      cur = nullptr;
    }
    if (!cur) return Json(nullptr);
  }
  Val v{Json(), cur};
  return ev.Take(std::move(v));
}

Result<Json> FnUniqueString(Evaluator&, const std::string& name, Args& a) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSIGN_OR_RETURN(std::string_view s, StrArg(name, a, i));
    parts.emplace_back(s);
  }
  return Json(UniqueString(parts));
}

Result<Json> FnGuid(Evaluator&, const std::string& name, Args& a) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSIGN_OR_RETURN(std::string_view s, StrArg(name, a, i));
    parts.emplace_back(s);
  }
  return Json(GuidOf(parts));
}

Result<Json> FnUri(Evaluator&, const std::string& name, Args& a) {
  ASSIGN_OR_RETURN(std::string_view base, StrArg(name, a, 0));
  ASSIGN_OR_RETURN(std::string_view rel, StrArg(name, a, 1));
  if (!rel.empty() && rel.front() == '/') {
    size_t scheme = base.find("://");
    size_t host_end = scheme == std::string_view::npos ? 0 : base.find('/', scheme + 3);
    if (host_end == std::string_view::npos) host_end = base.size();
    return Json(std::string(base.substr(0, host_end)) + std::string(rel));
  }
  size_t slash = base.rfind('/');
  std::string_view head = slash == std::string_view::npos ? base : base.substr(0, slash + 1);
  return Json(std::string(head) + std::string(rel));
}

Result<Json> FnUriComponent(Evaluator&, const std::string& name, Args& a) {
  ASSIGN_OR_RETURN(std::string_view s, StrArg(name, a, 0));
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return Json(std::move(out));
}

// --- resource ids ---

// Splits a resource type "Ns/t1/t2" into segments; error when there is no '/'.
Result<std::vector<std::string>> TypeSegments(const std::string& name, std::string_view type) {
  std::vector<std::string> segs;
  size_t start = 0;
  while (true) {
    size_t slash = type.find('/', start);
    segs.emplace_back(
        type.substr(start, slash == std::string_view::npos ? type.npos : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  if (segs.size() < 2 || std::any_of(segs.begin(), segs.end(), [](auto& s) { return s.empty(); })) {
    return InvalidArgument(fmt::format(
        "{}(): '{}' is not a resource type like 'Microsoft.Storage/storageAccounts'", name, type));
  }
  return segs;
}

// "providers/Ns/t1/n1/t2/n2" from type segments and name arguments.
Result<std::string> ProviderPath(const std::string& name, Args& a, size_t type_arg) {
  ASSIGN_OR_RETURN(std::string_view type, StrArg(name, a, type_arg));
  ASSIGN_OR_RETURN(std::vector<std::string> segs, TypeSegments(name, type));
  std::vector<std::string> names;
  for (size_t i = type_arg + 1; i < a.size(); ++i) {
    ASSIGN_OR_RETURN(std::string_view n, StrArg(name, a, i));
    size_t start = 0;
    while (true) {
      size_t slash = n.find('/', start);
      names.emplace_back(n.substr(start, slash == std::string_view::npos ? n.npos : slash - start));
      if (slash == std::string_view::npos) break;
      start = slash + 1;
    }
  }
  if (names.size() != segs.size() - 1) {
    return InvalidArgument(fmt::format(
        "{}(): type '{}' needs {} name segment(s), got {}; give one name argument per type "
        "segment after the namespace",
        name, type, segs.size() - 1, names.size()));
  }
  std::string out = "providers/" + segs[0];
  for (size_t i = 1; i < segs.size(); ++i) out += "/" + segs[i] + "/" + names[i - 1];
  return out;
}

Result<Json> FnResourceId(Evaluator& ev, const std::string& name, Args& a) {
  const ArmOptions& o = ev.ctx().Options();
  // The type is the first argument with a '/'; before it come an optional
  // subscription id and resource group name.
  size_t type_arg = a.size();
  for (size_t i = 0; i < a.size(); ++i) {
    ASSIGN_OR_RETURN(std::string_view s, StrArg(name, a, i));
    if (s.find('/') != std::string_view::npos) {
      type_arg = i;
      break;
    }
  }
  if (type_arg == a.size() || type_arg > 2) {
    return InvalidArgument(
        fmt::format("{}(): no resource type among the arguments; call it as {}([subscriptionId], "
                    "[resourceGroupName], 'Namespace/type', 'name', ...)",
                    name, name));
  }
  std::string sub = o.subscription_id, rg = o.resource_group;
  if (type_arg == 2) {
    sub = a[0].get().get<std::string>();
    rg = a[1].get().get<std::string>();
  } else if (type_arg == 1) {
    rg = a[0].get().get<std::string>();
  }
  ASSIGN_OR_RETURN(std::string path, ProviderPath(name, a, type_arg));
  return Json(fmt::format("/subscriptions/{}/resourceGroups/{}/{}", sub, rg, path));
}

Result<Json> FnSubscriptionResourceId(Evaluator& ev, const std::string& name, Args& a) {
  std::string sub = ev.ctx().Options().subscription_id;
  size_t type_arg = 0;
  ASSIGN_OR_RETURN(std::string_view first, StrArg(name, a, 0));
  if (first.find('/') == std::string_view::npos) {
    sub = std::string(first);
    type_arg = 1;
  }
  if (type_arg >= a.size()) return InvalidArgument(fmt::format("{}(): no resource type", name));
  ASSIGN_OR_RETURN(std::string path, ProviderPath(name, a, type_arg));
  return Json(fmt::format("/subscriptions/{}/{}", sub, path));
}

Result<Json> FnTenantResourceId(Evaluator&, const std::string& name, Args& a) {
  ASSIGN_OR_RETURN(std::string path, ProviderPath(name, a, 0));
  return Json("/" + path);
}

Result<Json> FnExtensionResourceId(Evaluator&, const std::string& name, Args& a) {
  ASSIGN_OR_RETURN(std::string_view scope, StrArg(name, a, 0));
  ASSIGN_OR_RETURN(std::string path, ProviderPath(name, a, 1));
  std::string s(scope);
  while (!s.empty() && s.back() == '/') s.pop_back();
  return Json(s + "/" + path);
}

// --- deployment context ---

Json ResourceGroupObject(const ArmOptions& o) {
  return Json{{"id", fmt::format("/subscriptions/{}/resourceGroups/{}", o.subscription_id,
                                 o.resource_group)},
              {"name", o.resource_group},
              {"type", "Microsoft.Resources/resourceGroups"},
              {"location", o.location},
              {"managedBy", ""},
              {"tags", Json::object()},
              {"properties", {{"provisioningState", "Succeeded"}}}};
}

Result<Json> FnResourceGroup(Evaluator& ev, const std::string&, Args&) {
  return ResourceGroupObject(ev.ctx().Options());
}

Result<Json> FnSubscription(Evaluator& ev, const std::string&, Args&) {
  const ArmOptions& o = ev.ctx().Options();
  return Json{{"id", "/subscriptions/" + o.subscription_id},
              {"subscriptionId", o.subscription_id},
              {"tenantId", o.tenant_id},
              {"displayName", "PSRule Test Subscription"}};
}

Result<Json> FnTenant(Evaluator& ev, const std::string&, Args&) {
  const ArmOptions& o = ev.ctx().Options();
  return Json{{"countryCode", "US"},
              {"displayName", "PSRule"},
              {"id", "/tenants/" + o.tenant_id},
              {"tenantId", o.tenant_id}};
}

Result<Json> FnDeployment(Evaluator& ev, const std::string&, Args&) {
  const ArmOptions& o = ev.ctx().Options();
  return Json{{"name", o.deployment_name},
              {"location", o.location},
              {"properties",
               {{"templateHash", "0"},
                {"mode", "Incremental"},
                {"provisioningState", "Accepted"},
                {"template", {{"contentVersion", "1.0.0.0"}}},
                {"parameters", Json::object()}}}};
}

Result<Json> FnEnvironment(Evaluator&, const std::string&, Args&) {
  return Json{
      {"name", "AzureCloud"},
      {"gallery", "https://gallery.azure.com/"},
      {"graph", "https://graph.windows.net/"},
      {"portal", "https://portal.azure.com"},
      {"graphAudience", "https://graph.windows.net/"},
      {"activeDirectoryDataLake", "https://datalake.azure.net/"},
      {"batch", "https://batch.core.windows.net/"},
      {"media", "https://rest.media.azure.net"},
      {"sqlManagement", "https://management.core.windows.net:8443/"},
      {"resourceManager", "https://management.azure.com/"},
      {"authentication",
       {{"loginEndpoint", "https://login.microsoftonline.com/"},
        {"audiences", {"https://management.core.windows.net/", "https://management.azure.com/"}},
        {"tenant", "common"},
        {"identityProvider", "AAD"}}},
      {"suffixes",
       {{"acrLoginServer", ".azurecr.io"},
        {"azureDatalakeAnalyticsCatalogAndJob", "azuredatalakeanalytics.net"},
        {"azureDatalakeStoreFileSystem", "azuredatalakestore.net"},
        {"azureFrontDoorEndpointSuffix", "azurefd.net"},
        {"keyvaultDns", ".vault.azure.net"},
        {"sqlServerHostname", ".database.windows.net"},
        {"storage", "core.windows.net"}}}};
}

Result<Json> FnNull(Evaluator&, const std::string&, Args&) { return Json(nullptr); }
Result<Json> FnTrue(Evaluator&, const std::string&, Args&) { return Json(true); }
Result<Json> FnFalse(Evaluator&, const std::string&, Args&) { return Json(false); }

// Functions whose value exists only at deployment: the value is unknown.
Result<Json> FnUnknownValue(Evaluator& ev, const std::string&, Args&) { return ev.Unknown(); }

Result<Json> FnNonDeterministic(Evaluator& ev, const std::string& name, Args&) {
  if (!ev.ctx().AllowsNonDeterministic()) {
    return InvalidArgument(fmt::format(
        "{}() can only be used in a parameter's defaultValue (as in ARM); pass the value as a "
        "parameter",
        name));
  }
  return ev.Unknown();
}

const std::unordered_map<std::string, Fn>& Table() {
  static const auto* t = new std::unordered_map<std::string, Fn>{
      {"concat", {0, -1, FnConcat}},
      {"format", {1, -1, FnFormat}},
      {"tolower", {1, 1, FnToLower}},
      {"toupper", {1, 1, FnToUpper}},
      {"trim", {1, 1, FnTrim}},
      {"base64", {1, 1, FnBase64}},
      {"base64tostring", {1, 1, FnBase64ToString}},
      {"base64tojson", {1, 1, FnBase64ToJson}},
      {"json", {1, 1, FnJson}},
      {"string", {1, 1, FnString}},
      {"int", {1, 1, FnInt}},
      {"float", {1, 1, FnFloat}},
      {"bool", {1, 1, FnBool}},
      {"length", {1, 1, FnLength}},
      {"empty", {1, 1, FnEmpty}},
      {"first", {1, 1, FnFirstLast}},
      {"last", {1, 1, FnFirstLast}},
      {"take", {2, 2, FnTakeSkip}},
      {"skip", {2, 2, FnTakeSkip}},
      {"split", {2, 2, FnSplit}},
      {"join", {2, 2, FnJoin}},
      {"replace", {3, 3, FnReplace}},
      {"substring", {2, 3, FnSubstring}},
      {"startswith", {2, 2, FnStartsEnds}},
      {"endswith", {2, 2, FnStartsEnds}},
      {"indexof", {2, 2, FnIndexOf}},
      {"lastindexof", {2, 2, FnIndexOf}},
      {"padleft", {2, 3, FnPadLeft}},
      {"equals", {2, 2, FnEquals}},
      {"and", {2, -1, FnAndOr}},
      {"or", {2, -1, FnAndOr}},
      {"not", {1, 1, FnNot}},
      {"greater", {2, 2, FnCompare}},
      {"greaterorequals", {2, 2, FnCompare}},
      {"less", {2, 2, FnCompare}},
      {"lessorequals", {2, 2, FnCompare}},
      {"add", {2, 2, FnArith}},
      {"sub", {2, 2, FnArith}},
      {"mul", {2, 2, FnArith}},
      {"div", {2, 2, FnArith}},
      {"mod", {2, 2, FnArith}},
      {"min", {1, -1, FnMinMax}},
      {"max", {1, -1, FnMinMax}},
      {"range", {2, 2, FnRange}},
      {"union", {1, -1, FnUnion}},
      {"intersection", {2, -1, FnIntersection}},
      {"contains", {2, 2, FnContains}},
      {"createarray", {0, -1, FnCreateArray, true}},
      {"createobject", {0, -1, FnCreateObject, true}},
      {"array", {1, 1, FnArray, true}},
      {"coalesce", {1, -1, FnCoalesce}},
      {"items", {1, 1, FnItems}},
      {"objectkeys", {1, 1, FnObjectKeys}},
      {"tryget", {2, -1, FnTryGet}},
      {"uniquestring", {1, -1, FnUniqueString}},
      {"guid", {1, -1, FnGuid}},
      {"uri", {2, 2, FnUri}},
      {"uricomponent", {1, 1, FnUriComponent}},
      {"resourceid", {2, -1, FnResourceId}},
      {"subscriptionresourceid", {2, -1, FnSubscriptionResourceId}},
      {"tenantresourceid", {2, -1, FnTenantResourceId}},
      {"extensionresourceid", {3, -1, FnExtensionResourceId}},
      {"resourcegroup", {0, 0, FnResourceGroup}},
      {"subscription", {0, 0, FnSubscription}},
      {"tenant", {0, 0, FnTenant}},
      {"deployment", {0, 0, FnDeployment}},
      {"environment", {0, 0, FnEnvironment}},
      {"null", {0, 0, FnNull}},
      {"true", {0, 0, FnTrue}},
      {"false", {0, 0, FnFalse}},
      {"reference", {1, 3, FnUnknownValue, true}},
      {"pickzones", {3, 5, FnUnknownValue, true}},
      {"utcnow", {0, 1, FnNonDeterministic, true}},
      {"newguid", {0, 0, FnNonDeterministic, true}},
      {"datetimeadd", {2, 3, FnUnknownValue, true}},
  };
  return *t;
}

struct DepthGuard {
  explicit DepthGuard(Context& c) : ctx(c) { ++ctx.depth; }
  ~DepthGuard() { --ctx.depth; }
  Context& ctx;
};

Result<Val> Evaluator::Call(const Node& n) {
  const std::string lower = AsciiLower(n.text);
  // Forms that need the unevaluated arguments or the caller's state.
  if (lower == "if") {
    if (n.args.size() != 3) {
      return InvalidArgument(fmt::format("if(): takes 3 arguments, got {}", n.args.size()));
    }
    ASSIGN_OR_RETURN(Val cond, Eval(*n.args[0]));
    if (ContainsUnknown(cond.get())) return Val{Unknown(), nullptr};
    if (!cond.get().is_boolean()) {
      return InvalidArgument(
          fmt::format("if(): the condition must be a bool, got {}", TypeName(cond.get())));
    }
    // Only the branch taken is evaluated, as ARM does (so reference() in the
    // other branch is never looked at).
    return Eval(*n.args[cond.get().get<bool>() ? 1 : 2]);
  }
  if (lower == "parameters" || lower == "variables") {
    if (n.args.size() != 1) {
      return InvalidArgument(fmt::format("{}(): takes 1 argument, got {}", n.text, n.args.size()));
    }
    ASSIGN_OR_RETURN(Val name, Eval(*n.args[0]));
    if (!name.get().is_string()) {
      return InvalidArgument(
          fmt::format("{}(): the name must be a string, got {}", n.text, TypeName(name.get())));
    }
    const std::string& s = name.get().get_ref<const std::string&>();
    ASSIGN_OR_RETURN(const Json* v, lower == "parameters" ? ctx_.Parameter(s) : ctx_.Variable(s));
    return Val{Json(), v};
  }
  if (lower == "copyindex") {
    if (n.args.size() > 2) {
      return InvalidArgument(
          fmt::format("copyIndex(): takes at most 2 arguments, got {}", n.args.size()));
    }
    std::optional<std::string> loop;
    int64_t offset = 0;
    for (size_t i = 0; i < n.args.size(); ++i) {
      ASSIGN_OR_RETURN(Val v, Eval(*n.args[i]));
      if (v.get().is_string() && i == 0) {
        loop = v.get().get<std::string>();
      } else if (v.get().is_number_integer()) {
        offset = v.get().get<int64_t>();
      } else {
        return InvalidArgument(
            fmt::format("copyIndex(): arguments are a loop name and an integer offset, got {}",
                        TypeName(v.get())));
      }
    }
    ASSIGN_OR_RETURN(int64_t idx, ctx_.CopyIndex(loop));
    return Val{Json(idx + offset), nullptr};
  }
  const bool is_list = lower.size() > 4 && lower.compare(0, 4, "list") == 0;
  const Fn* fn = nullptr;
  if (!is_list && lower.find('.') == std::string::npos) {
    auto it = Table().find(lower);
    if (it == Table().end()) {
      std::vector<std::string> names = FunctionNames();
      std::optional<std::string> near = ClosestMatch(n.text, names, 3);
      return InvalidArgument(
          fmt::format("unknown function '{}'{}; see the ARM template function reference", n.text,
                      near ? fmt::format(" (did you mean '{}'?)", *near) : std::string()));
    }
    fn = &it->second;
    const int count = static_cast<int>(n.args.size());
    if (count < fn->min_args || (fn->max_args >= 0 && count > fn->max_args)) {
      std::string want = fn->max_args < 0 ? fmt::format("at least {}", fn->min_args)
                         : fn->min_args == fn->max_args
                             ? fmt::format("{}", fn->min_args)
                             : fmt::format("{} to {}", fn->min_args, fn->max_args);
      return InvalidArgument(
          fmt::format("{}(): takes {} argument(s), got {}", n.text, want, count));
    }
  }
  Args args;
  args.reserve(n.args.size());
  bool unknown = false;
  for (const auto& a : n.args) {
    ASSIGN_OR_RETURN(Val v, Eval(*a));
    if (!unknown && ContainsUnknown(v.get())) unknown = true;
    args.push_back(std::move(v));
  }
  if (is_list) return Val{Unknown(), nullptr};  // listKeys(), listSecrets(), ...
  if (!fn) {
    std::vector<Json> owned;
    for (Val& v : args) {
      ASSIGN_OR_RETURN(Json j, Take(std::move(v)));
      owned.push_back(std::move(j));
    }
    if (unknown) return Val{Unknown(), nullptr};
    ASSIGN_OR_RETURN(Json r, ctx_.CallUserFunction(n.text, std::move(owned)));
    return Val{std::move(r), nullptr};
  }
  if (unknown && !fn->passes_unknown) return Val{Unknown(), nullptr};
  ASSIGN_OR_RETURN(Json r, fn->impl(*this, n.text, args));
  RETURN_IF_ERROR(ctx_.Charge(1));
  return Val{std::move(r), nullptr};
}

Result<Val> Evaluator::Eval(const Node& n) {
  DepthGuard guard(ctx_);
  if (ctx_.depth > ctx_.max_depth + kMaxJsonDepth) {
    // Parsing bounds each expression; this bounds chains through variables.
    return InvalidArgument(
        fmt::format("expressions nest deeper than the limit of {} through variables and parameters",
                    ctx_.max_depth));
  }
  switch (n.kind) {
    case Node::kString:
      return Val{Json(n.text), nullptr};
    case Node::kInt:
      return Val{Json(n.number), nullptr};
    case Node::kCall:
      return Call(n);
    case Node::kMember: {
      ASSIGN_OR_RETURN(Val base, Eval(*n.args[0]));
      const Json& b = base.get();
      if (IsUnknown(b)) return Val{Unknown(), nullptr};
      if (!b.is_object()) {
        return InvalidArgument(fmt::format("cannot read property '{}' of {} (a value of type {})",
                                           n.text, b.is_null() ? "null" : "a non-object",
                                           TypeName(b)));
      }
      const Json* m = FindMember(b, n.text);
      if (!m) {
        std::vector<std::string> keys;
        for (auto it = b.begin(); it != b.end(); ++it) keys.push_back(it.key());
        std::optional<std::string> near = ClosestMatch(n.text, keys, 3);
        return InvalidArgument(
            fmt::format("the object has no property '{}'{}", n.text,
                        near ? fmt::format(" (did you mean '{}'?)", *near)
                             : fmt::format(" (it has: {})", Join(keys, ", ").substr(0, 200))));
      }
      if (base.ref) return Val{Json(), m};
      return Val{Json(std::move(*const_cast<Json*>(m))), nullptr};
    }
    case Node::kIndex: {
      ASSIGN_OR_RETURN(Val base, Eval(*n.args[0]));
      ASSIGN_OR_RETURN(Val idx, Eval(*n.args[1]));
      const Json& b = base.get();
      const Json& i = idx.get();
      if (IsUnknown(b) || IsUnknown(i)) return Val{Unknown(), nullptr};
      const Json* m = nullptr;
      if (b.is_array() && (i.is_number_integer() || i.is_number_unsigned())) {
        int64_t k = i.get<int64_t>();
        if (k < 0 || static_cast<size_t>(k) >= b.size()) {
          return InvalidArgument(
              fmt::format("index {} is outside the array of {} element(s)", k, b.size()));
        }
        m = &b[static_cast<size_t>(k)];
      } else if (b.is_object() && i.is_string()) {
        m = FindMember(b, i.get_ref<const std::string&>());
        if (!m) {
          return InvalidArgument(
              fmt::format("the object has no property '{}'", i.get_ref<const std::string&>()));
        }
      } else {
        return InvalidArgument(fmt::format("cannot index {} with {}", TypeName(b), TypeName(i)));
      }
      if (base.ref) return Val{Json(), m};
      return Val{Json(std::move(*const_cast<Json*>(m))), nullptr};
    }
  }
  return Internal("bad expression node");
}

}  // namespace

std::vector<std::string> FunctionNames() {
  static const std::vector<std::string> kCanonical = {"concat",
                                                      "format",
                                                      "toLower",
                                                      "toUpper",
                                                      "trim",
                                                      "base64",
                                                      "base64ToString",
                                                      "base64ToJson",
                                                      "json",
                                                      "string",
                                                      "int",
                                                      "float",
                                                      "bool",
                                                      "length",
                                                      "empty",
                                                      "first",
                                                      "last",
                                                      "take",
                                                      "skip",
                                                      "split",
                                                      "join",
                                                      "replace",
                                                      "substring",
                                                      "startsWith",
                                                      "endsWith",
                                                      "indexOf",
                                                      "lastIndexOf",
                                                      "padLeft",
                                                      "equals",
                                                      "and",
                                                      "or",
                                                      "not",
                                                      "greater",
                                                      "greaterOrEquals",
                                                      "less",
                                                      "lessOrEquals",
                                                      "add",
                                                      "sub",
                                                      "mul",
                                                      "div",
                                                      "mod",
                                                      "min",
                                                      "max",
                                                      "range",
                                                      "union",
                                                      "intersection",
                                                      "contains",
                                                      "createArray",
                                                      "createObject",
                                                      "array",
                                                      "coalesce",
                                                      "items",
                                                      "objectKeys",
                                                      "tryGet",
                                                      "uniqueString",
                                                      "guid",
                                                      "uri",
                                                      "uriComponent",
                                                      "resourceId",
                                                      "subscriptionResourceId",
                                                      "tenantResourceId",
                                                      "extensionResourceId",
                                                      "resourceGroup",
                                                      "subscription",
                                                      "tenant",
                                                      "deployment",
                                                      "environment",
                                                      "null",
                                                      "true",
                                                      "false",
                                                      "reference",
                                                      "pickZones",
                                                      "utcNow",
                                                      "newGuid",
                                                      "dateTimeAdd",
                                                      "if",
                                                      "parameters",
                                                      "variables",
                                                      "copyIndex",
                                                      "listKeys"};
  return kCanonical;
}

Result<Json> EvaluateExpression(std::string_view s, Context& ctx, ExprCache* cache) {
  std::string_view body = s.substr(1, s.size() - 2);
  const Node* root = nullptr;
  std::unique_ptr<Node> local;
  if (cache) {
    auto it = cache->find(std::string(body));
    if (it != cache->end()) {
      root = it->second.get();
    } else {
      ASSIGN_OR_RETURN(local, ParseExpression(body, ctx.max_depth));
      root = local.get();
      cache->emplace(std::string(body), std::move(local));
    }
  } else {
    ASSIGN_OR_RETURN(local, ParseExpression(body, ctx.max_depth));
    root = local.get();
  }
  Evaluator ev(ctx, s);
  ASSIGN_OR_RETURN(Val v, ev.Eval(*root));
  return ev.Take(std::move(v));
}

Result<Json> EvaluateString(std::string_view s, Context& ctx, ExprCache* cache) {
  if (IsExpression(s)) return EvaluateExpression(s, ctx, cache);
  return Json(std::string(LiteralOf(s)));
}

}  // namespace gantry::assess::arm
