#include "sniff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "gantry/core/text.h"

namespace gantry::gateway {
namespace {

using Json = nlohmann::json;

// nlohmann parses iteratively but dump() recurses once per nesting level, so a
// body of a few MiB of "[[[[..." would overflow the stack when re-serialized.
// No real request nests anywhere near this deep.
constexpr int kMaxDumpDepth = 256;

// Nesting depth of JSON text, ignoring brackets inside strings. Stops counting
// once `limit` is exceeded.
int JsonDepth(std::string_view s, int limit) {
  int depth = 0, max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > limit) return max_depth;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

// UTF-8 code points (continuation bytes 10xxxxxx do not start one).
size_t CodePoints(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

double TextTokens(std::string_view s) { return static_cast<double>((CodePoints(s) + 3) / 4); }

// A non-negative integer that fits int64; 0 when absent or null.
Status ReadTokenLimit(const Json& j, const char* key, int64_t* out, bool* present) {
  *present = false;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (it->is_number_unsigned()) {
    uint64_t v = it->get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return InvalidArgument(fmt::format("`{}` is too large ({}); send at most {}", key, v,
                                         std::numeric_limits<int64_t>::max()));
    }
    *out = static_cast<int64_t>(v);
    *present = true;
    return Status::Ok();
  }
  if (it->is_number_integer()) {  // signed and not unsigned: negative
    return InvalidArgument(
        fmt::format("`{}` must be a non-negative integer, got {}", key, it->get<int64_t>()));
  }
  return InvalidArgument(
      fmt::format("`{}` must be a non-negative integer, got a {}", key, it->type_name()));
}

// prompt (completions) and input (embeddings): a string, an array of strings,
// an array of token ids, or an array of token-id arrays. Token ids count 1 each.
Status EstimatePromptField(const Json& j, const char* key, double* tokens) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  auto bad = [&] {
    return InvalidArgument(fmt::format(
        "`{}` must be a string, an array of strings, or an array of token ids or token-id arrays",
        key));
  };
  if (it->is_string()) {
    *tokens += TextTokens(it->get_ref<const std::string&>());
    return Status::Ok();
  }
  if (!it->is_array()) return bad();
  for (const Json& e : *it) {
    if (e.is_string()) {
      *tokens += TextTokens(e.get_ref<const std::string&>());
    } else if (e.is_number_integer()) {
      *tokens += 1;
    } else if (e.is_array()) {
      for (const Json& t : e) {
        if (!t.is_number_integer()) return bad();
        *tokens += 1;
      }
    } else {
      return bad();
    }
  }
  return Status::Ok();
}

Status EstimateMessages(const Json& j, double* tokens) {
  auto it = j.find("messages");
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_array()) {
    return InvalidArgument(
        fmt::format("`messages` must be an array of objects, got a {}", it->type_name()));
  }
  size_t i = 0;
  for (const Json& m : *it) {
    if (!m.is_object()) {
      return InvalidArgument(
          fmt::format("`messages[{}]` must be an object, got a {}", i, m.type_name()));
    }
    *tokens += kMessageOverheadTokens;
    auto c = m.find("content");
    if (c != m.end() && !c->is_null()) {
      if (c->is_string()) {
        *tokens += TextTokens(c->get_ref<const std::string&>());
      } else if (c->is_array()) {
        size_t k = 0;
        for (const Json& part : *c) {
          if (!part.is_object()) {
            return InvalidArgument(fmt::format(
                "`messages[{}].content[{}]` must be an object, got a {}", i, k, part.type_name()));
          }
          // Only text parts count; images and audio have no text length to go by.
          auto type = part.find("type");
          auto text = part.find("text");
          if (type != part.end() && type->is_string() && *type == "text" && text != part.end() &&
              text->is_string()) {
            *tokens += TextTokens(text->get_ref<const std::string&>());
          }
          ++k;
        }
      } else {
        return InvalidArgument(fmt::format(
            "`messages[{}].content` must be a string or an array of content parts, got a {}", i,
            c->type_name()));
      }
    }
    ++i;
  }
  return Status::Ok();
}

int64_t UsageField(const Json& u, const char* key, bool* found) {
  auto it = u.find(key);
  *found = false;
  if (it == u.end()) return 0;
  if (it->is_number_unsigned()) {
    uint64_t v = it->get<uint64_t>();
    *found = true;
    return v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
               ? std::numeric_limits<int64_t>::max()
               : static_cast<int64_t>(v);
  }
  return 0;  // negative, fractional or not a number: not a token count
}

// Fills *usage from a response object's "usage" member when it is an object.
bool UsageFromObject(const Json& obj, Usage* usage) {
  auto it = obj.find("usage");
  if (it == obj.end() || !it->is_object()) return false;
  Usage u;
  u.present = true;
  bool found_prompt = false, found_completion = false, found_total = false;
  u.prompt_tokens = UsageField(*it, "prompt_tokens", &found_prompt);
  u.completion_tokens = UsageField(*it, "completion_tokens", &found_completion);
  u.total_tokens = UsageField(*it, "total_tokens", &found_total);
  if (!found_total) {
    // Saturating: both are <= INT64_MAX, so the sum fits in uint64.
    uint64_t sum =
        static_cast<uint64_t>(u.prompt_tokens) + static_cast<uint64_t>(u.completion_tokens);
    u.total_tokens = sum > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                         ? std::numeric_limits<int64_t>::max()
                         : static_cast<int64_t>(sum);
  }
  *usage = u;
  return true;
}

// Cheap pre-filter for a streaming chunk: could it carry a non-null "usage"?
// With include_usage every chunk has `"usage":null`, and parsing each one would
// cost more than the rest of the proxying. False positives only cost a parse.
// A key spelled with \u escapes cannot be ruled out textually, so any "\u"
// also means "parse".
bool MayCarryUsage(std::string_view p) {
  if (p.find("\\u") != std::string_view::npos) return true;
  size_t pos = 0;
  while ((pos = p.find("\"usage\"", pos)) != std::string_view::npos) {
    size_t i = pos + 7;
    while (i < p.size() && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n')) ++i;
    if (i < p.size() && p[i] == ':') {
      ++i;
      while (i < p.size() && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n')) ++i;
      if (p.substr(i, 4) != "null") return true;
    }
    pos += 7;
  }
  return false;
}

bool ValidKserveSegment(std::string_view s) {
  if (s.empty() || s == "." || s.find("..") != std::string_view::npos) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

// ---- Fast path for SniffOpenAiRequest ---------------------------------------------
//
// A single pass over the body that validates it as JSON exactly as strictly as
// nlohmann does (UTF-8 per RFC 3629, escapes and surrogate pairs, number
// grammar, no control characters in strings, nothing after the value) while
// picking out the few fields the gateway needs, without building a DOM. It
// gives up (returns false / nullopt) on anything it does not need to handle
// fast: any error, duplicate or escaped keys of interest, numbers with an
// exponent or over 300 characters (nlohmann rejects values that overflow a
// double), a leading BOM. The reference then decides, so answers never differ.
namespace {

class FastScanner {
 public:
  explicit FastScanner(std::string_view s) : p_(s.data()), end_(s.data() + s.size()) {}

  struct Str {
    std::string_view raw;  // between the quotes, escapes not decoded
    bool escaped = false;
    size_t code_points = 0;
  };
  struct Num {
    bool integer = false;  // no fraction or exponent
    bool negative = false;
    std::string_view digits;
  };

  void Ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  bool AtEnd() const { return p_ == end_; }
  char Peek() const { return p_ < end_ ? *p_ : '\0'; }
  bool Eat(char c) {
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }

  static int Hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  bool Hex4(int* v) {
    if (end_ - p_ < 4) return false;
    int r = 0;
    for (int i = 0; i < 4; ++i) {
      int h = Hex(p_[i]);
      if (h < 0) return false;
      r = r * 16 + h;
    }
    p_ += 4;
    *v = r;
    return true;
  }

  // p_ at the opening quote.
  bool String(Str* out) {
    ++p_;
    const char* start = p_;
    size_t cps = 0;
    bool escaped = false;
    while (true) {
      if (end_ - p_ >= 8) {
        const size_t plain = JsonPlainPrefix8(p_);
        p_ += plain;
        cps += plain;  // one code point per ASCII byte
        if (plain == 8) continue;
      }
      if (p_ >= end_) return false;
      unsigned char c = static_cast<unsigned char>(*p_);
      if (c == '"') break;
      if (c < 0x20) return false;
      if (c < 0x80) {
        ++p_;
        if (c == '\\') {
          escaped = true;
          if (p_ >= end_) return false;
          char e = *p_++;
          if (e == 'u') {
            int u;
            if (!Hex4(&u)) return false;
            if (u >= 0xDC00 && u <= 0xDFFF) return false;  // lone low surrogate
            if (u >= 0xD800 && u <= 0xDBFF) {
              int lo;
              if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
              p_ += 2;
              if (!Hex4(&lo) || lo < 0xDC00 || lo > 0xDFFF) return false;
            }
          } else if (!(e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' ||
                       e == 'r' || e == 't')) {
            return false;
          }
        }
        ++cps;
        continue;
      }
      // Multi-byte UTF-8 (RFC 3629 table 3-7: no overlongs, surrogates or > U+10FFFF).
      int n;
      unsigned char lo = 0x80, hi = 0xBF;
      if (c >= 0xC2 && c <= 0xDF) {
        n = 1;
      } else if (c >= 0xE0 && c <= 0xEF) {
        n = 2;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
      } else if (c >= 0xF0 && c <= 0xF4) {
        n = 3;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
      } else {
        return false;
      }
      if (end_ - p_ <= n) return false;
      for (int i = 1; i <= n; ++i) {
        unsigned char b = static_cast<unsigned char>(p_[i]);
        if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xBF)) return false;
      }
      p_ += n + 1;
      ++cps;
    }
    out->raw = std::string_view(start, p_ - start);
    out->escaped = escaped;
    out->code_points = cps;
    ++p_;  // closing quote
    return true;
  }

  bool Number(Num* out) {
    const char* start = p_;
    out->negative = Eat('-');
    const char* digits = p_;
    if (Eat('0')) {
    } else if (p_ < end_ && *p_ >= '1' && *p_ <= '9') {
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    } else {
      return false;
    }
    out->digits = std::string_view(digits, p_ - digits);
    out->integer = true;
    if (Eat('.')) {
      out->integer = false;
      if (!(p_ < end_ && *p_ >= '0' && *p_ <= '9')) return false;
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) return false;  // overflow rules: leave to nlohmann
    return p_ - start <= 300;
  }

  bool Literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word) {
      return false;
    }
    p_ += word.size();
    return true;
  }

  // Validates and skips any value; iterative so depth cannot overflow the stack.
  bool SkipValue() {
    std::string stack;  // '{' or '[' per open container
    while (true) {
      Ws();
      // A value.
      char c = Peek();
      if (c == '{' || c == '[') {
        ++p_;
        Ws();
        if (Eat(c == '{' ? '}' : ']')) {
          // empty container: a complete value, fall through to "after value"
        } else {
          stack.push_back(c);
          if (c == '{' && !Key()) return false;
          continue;
        }
      } else if (!Scalar()) {
        return false;
      }
      // After a value: close containers or move to the next element.
      while (true) {
        if (stack.empty()) return true;
        Ws();
        if (Eat(',')) {
          if (stack.back() == '{' && !Key()) return false;
          break;
        }
        if (!Eat(stack.back() == '{' ? '}' : ']')) return false;
        stack.pop_back();
      }
    }
  }

  // `"key" :` inside an object; p_ before the key (whitespace allowed).
  bool Key(Str* key = nullptr) {
    Ws();
    if (Peek() != '"') return false;
    Str s;
    if (!String(&s)) return false;
    if (key != nullptr) *key = s;
    Ws();
    return Eat(':');
  }

  bool Scalar() {
    switch (Peek()) {
      case '"': {
        Str s;
        return String(&s);
      }
      case 't':
        return Literal("true");
      case 'f':
        return Literal("false");
      case 'n':
        return Literal("null");
      default: {
        Num n;
        return Number(&n);
      }
    }
  }

  // Iterates an object's members: calls f(key) with p_ at the value (after
  // whitespace); f must consume the value. p_ at '{'.
  template <typename F>
  bool Object(F&& f) {
    if (!Eat('{')) return false;
    Ws();
    if (Eat('}')) return true;
    while (true) {
      Str key;
      if (!Key(&key)) return false;
      Ws();
      if (!f(key)) return false;
      Ws();
      if (Eat('}')) return true;
      if (!Eat(',')) return false;
    }
  }

  // Same for arrays: f() with p_ at each element.
  template <typename F>
  bool Array(F&& f) {
    if (!Eat('[')) return false;
    Ws();
    if (Eat(']')) return true;
    while (true) {
      Ws();
      if (!f()) return false;
      Ws();
      if (Eat(']')) return true;
      if (!Eat(',')) return false;
    }
  }

 private:
  const char* p_;
  const char* end_;
};

double CeilQuarter(size_t cps) { return static_cast<double>((cps + 3) / 4); }

// A non-negative integer < 10^18 (anything else: let the reference decide).
bool SmallUint(const FastScanner::Num& n, int64_t* v) {
  if (!n.integer || n.negative || n.digits.size() > 18) return false;
  int64_t r = 0;
  for (char c : n.digits) r = r * 10 + (c - '0');
  *v = r;
  return true;
}

// A string value: its estimate (code points / 4, rounded up) is added.
bool FastTextTokens(FastScanner& sc, double* tokens) {
  FastScanner::Str s;
  if (!sc.String(&s)) return false;
  *tokens += CeilQuarter(s.code_points);
  return true;
}

// A token id (an integer) counts as one token.
bool FastTokenId(FastScanner& sc, double* tokens) {
  FastScanner::Num n;
  if (!sc.Number(&n) || !n.integer || n.digits.size() > 18) return false;
  *tokens += 1;
  return true;
}

// prompt / input. p_ at the value.
bool FastPromptField(FastScanner& sc, double* tokens) {
  char c = sc.Peek();
  if (c == 'n') return sc.Literal("null");
  if (c == '"') return FastTextTokens(sc, tokens);
  if (c != '[') return false;
  return sc.Array([&] {
    char e = sc.Peek();
    if (e == '"') return FastTextTokens(sc, tokens);
    if (e == '[') return sc.Array([&] { return FastTokenId(sc, tokens); });
    return FastTokenId(sc, tokens);
  });
}

bool FastMessages(FastScanner& sc, double* tokens) {
  using Str = FastScanner::Str;
  if (sc.Peek() == 'n') return sc.Literal("null");
  if (sc.Peek() != '[') return false;
  return sc.Array([&] {
    if (sc.Peek() != '{') return false;
    *tokens += kMessageOverheadTokens;
    bool seen_content = false;
    return sc.Object([&](const Str& key) {
      if (key.escaped) return false;
      if (key.raw != "content") return sc.SkipValue();
      if (seen_content) return false;
      seen_content = true;
      char c = sc.Peek();
      if (c == 'n') return sc.Literal("null");
      if (c == '"') return FastTextTokens(sc, tokens);
      if (c != '[') return false;
      return sc.Array([&] {
        if (sc.Peek() != '{') return false;
        bool seen_type = false, seen_text = false, is_text = false;
        size_t text_cps = 0;
        bool ok = sc.Object([&](const Str& k) {
          if (k.escaped) return false;
          if (k.raw == "type" || k.raw == "text") {
            bool& seen = k.raw == "type" ? seen_type : seen_text;
            if (seen || sc.Peek() != '"') return false;  // duplicates, non-strings: reference
            seen = true;
            Str v;
            if (!sc.String(&v) || (k.raw == "type" && v.escaped)) return false;
            if (k.raw == "type") {
              is_text = v.raw == "text";
            } else {
              text_cps = v.code_points;
            }
            return true;
          }
          return sc.SkipValue();
        });
        if (ok && is_text && seen_text) *tokens += CeilQuarter(text_cps);
        return ok;
      });
    });
  });
}

}  // namespace

namespace internal {

std::optional<OpenAiRequest> SniffOpenAiRequestFast(std::string_view body) {
  using Str = FastScanner::Str;
  using Num = FastScanner::Num;
  FastScanner sc(body);
  sc.Ws();
  if (sc.Peek() != '{') return std::nullopt;
  OpenAiRequest r;
  double tokens = 0;
  unsigned seen = 0;
  // Each key of interest may appear once; a repeat goes to the reference (last one wins there).
  auto once = [&](unsigned bit) {
    if (seen & bit) return false;
    seen |= bit;
    return true;
  };
  int64_t max_tokens = 0, max_completion_tokens = 0;
  bool has_max_completion = false;
  // Any other top-level key may appear once too: the reference refuses every
  // repeat, and the two must agree (found by fuzz_gateway_sniff). Past
  // kMaxOtherKeys the reference decides, so this stays linear-ish.
  constexpr size_t kMaxOtherKeys = 32;
  std::string_view others[kMaxOtherKeys];
  size_t n_others = 0;
  bool ok = sc.Object([&](const Str& key) {
    if (key.escaped) return false;  // might spell a key of interest
    std::string_view k = key.raw;
    char c = sc.Peek();
    if (k == "model") {
      if (!once(1)) return false;
      if (c == 'n') return sc.Literal("null");
      Str v;
      if (c != '"' || !sc.String(&v) || v.escaped) return false;
      r.model.assign(v.raw);
      return true;
    }
    if (k == "stream") {
      if (!once(2)) return false;
      if (c == 'n') return sc.Literal("null");
      if (c == 't') return r.stream = true, sc.Literal("true");
      if (c == 'f') return sc.Literal("false");
      return false;
    }
    if (k == "stream_options") {
      if (!once(4)) return false;
      if (c == 'n') return sc.Literal("null");
      if (c != '{') return false;
      bool seen_iu = false;
      return sc.Object([&](const Str& k2) {
        if (k2.escaped) return false;
        if (k2.raw != "include_usage") return sc.SkipValue();
        if (seen_iu) return false;
        seen_iu = true;
        char v = sc.Peek();
        if (v == 'n') return sc.Literal("null");
        if (v == 't') return r.include_usage = true, sc.Literal("true");
        if (v == 'f') return sc.Literal("false");
        return false;
      });
    }
    if (k == "max_tokens" || k == "max_completion_tokens") {
      bool completion = k == "max_completion_tokens";
      if (!once(completion ? 8 : 16)) return false;
      if (c == 'n') return sc.Literal("null");
      Num n;
      if (!sc.Number(&n)) return false;
      if (completion) has_max_completion = true;
      return SmallUint(n, completion ? &max_completion_tokens : &max_tokens);
    }
    if (k == "messages") return once(32) && FastMessages(sc, &tokens);
    if (k == "prompt") return once(64) && FastPromptField(sc, &tokens);
    if (k == "input") return once(128) && FastPromptField(sc, &tokens);
    if (n_others == kMaxOtherKeys) return false;
    for (size_t i = 0; i < n_others; ++i) {
      if (others[i] == k) return false;
    }
    others[n_others++] = k;
    return sc.SkipValue();
  });
  if (!ok) return std::nullopt;
  sc.Ws();
  if (!sc.AtEnd()) return std::nullopt;
  r.max_tokens = has_max_completion ? max_completion_tokens : max_tokens;
  r.estimated_prompt_tokens = tokens;
  return r;
}

}  // namespace internal

Result<OpenAiRequest> SniffOpenAiRequest(std::string_view body) {
  if (auto fast = internal::SniffOpenAiRequestFast(body)) return *std::move(fast);
  return internal::SniffOpenAiRequestReference(body);
}

namespace internal {

Result<OpenAiRequest> SniffOpenAiRequestReference(std::string_view body) {
  // A repeated top-level key is refused: parsers disagree on which copy wins,
  // and a gateway that checks one `model` while the backend serves another
  // would be an access-control bypass.
  std::vector<std::string> top_keys;
  std::string duplicate;
  Json::parser_callback_t cb = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      const std::string& k = parsed.get_ref<const std::string&>();
      if (std::find(top_keys.begin(), top_keys.end(), k) != top_keys.end()) {
        if (duplicate.empty()) duplicate = k;
      } else {
        top_keys.push_back(k);
      }
    }
    return true;
  };
  Json j = Json::parse(body.begin(), body.end(), cb, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("body is not valid JSON; send a JSON object");
  if (!duplicate.empty()) {
    return InvalidArgument(fmt::format("key `{}` appears twice in the body", duplicate));
  }
  if (!j.is_object()) {
    return InvalidArgument(fmt::format("body is not a JSON object (got a {})", j.type_name()));
  }
  OpenAiRequest r;
  if (auto it = j.find("model"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) {
      return InvalidArgument(fmt::format("`model` must be a string, got a {}", it->type_name()));
    }
    r.model = it->get_ref<const std::string&>();
  }
  if (auto it = j.find("stream"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return InvalidArgument(fmt::format("`stream` must be a boolean, got a {}", it->type_name()));
    }
    r.stream = it->get<bool>();
  }
  if (auto it = j.find("stream_options"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) {
      return InvalidArgument(
          fmt::format("`stream_options` must be an object, got a {}", it->type_name()));
    }
    if (auto iu = it->find("include_usage"); iu != it->end() && !iu->is_null()) {
      if (!iu->is_boolean()) {
        return InvalidArgument(fmt::format(
            "`stream_options.include_usage` must be a boolean, got a {}", iu->type_name()));
      }
      r.include_usage = iu->get<bool>();
    }
  }
  bool present = false;
  RETURN_IF_ERROR(ReadTokenLimit(j, "max_completion_tokens", &r.max_tokens, &present));
  if (!present) {
    int64_t legacy = 0;
    RETURN_IF_ERROR(ReadTokenLimit(j, "max_tokens", &legacy, &present));
    r.max_tokens = legacy;
  } else {
    // Still validate the deprecated field so a bad value is not silently ignored.
    int64_t ignored = 0;
    RETURN_IF_ERROR(ReadTokenLimit(j, "max_tokens", &ignored, &present));
  }
  double tokens = 0;
  RETURN_IF_ERROR(EstimateMessages(j, &tokens));
  RETURN_IF_ERROR(EstimatePromptField(j, "prompt", &tokens));
  RETURN_IF_ERROR(EstimatePromptField(j, "input", &tokens));
  r.estimated_prompt_tokens = tokens;
  return r;
}

}  // namespace internal

namespace {

// Fast check for InjectIncludeUsage: true when `body` is a valid JSON object
// without a top-level "stream_options" key (so textual insertion is right);
// false when unsure.
bool FastObjectWithoutStreamOptions(std::string_view body, bool* empty) {
  FastScanner sc(body);
  sc.Ws();
  if (sc.Peek() != '{') return false;
  bool has_stream_options = false;
  *empty = true;
  bool ok = sc.Object([&](const FastScanner::Str& key) {
    *empty = false;
    if (key.escaped) return false;  // might spell stream_options
    if (key.raw == "stream_options") has_stream_options = true;
    return sc.SkipValue();
  });
  sc.Ws();
  return ok && sc.AtEnd() && !has_stream_options;
}

std::string InsertIncludeUsage(std::string_view body, bool empty) {
  // Insert the member right after the opening brace, so every other byte
  // (number spelling, key order, whitespace) is unchanged. Only whitespace (and
  // a UTF-8 BOM, which the parser skips) can precede the brace.
  size_t brace = body.find('{');
  std::string out;
  out.reserve(body.size() + 48);
  out.append(body.substr(0, brace + 1));
  out.append("\"stream_options\":{\"include_usage\":true}");
  if (!empty) out.push_back(',');
  out.append(body.substr(brace + 1));
  return out;
}

}  // namespace

Result<std::string> InjectIncludeUsage(std::string_view body) {
  if (bool empty; FastObjectWithoutStreamOptions(body, &empty)) {
    return InsertIncludeUsage(body, empty);
  }
  Json j = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("body is not valid JSON; send a JSON object");
  if (!j.is_object()) {
    return InvalidArgument(fmt::format("body is not a JSON object (got a {})", j.type_name()));
  }
  auto it = j.find("stream_options");
  if (it == j.end()) return InsertIncludeUsage(body, j.empty());
  if (!it->is_null() && !it->is_object()) {
    return InvalidArgument(
        fmt::format("`stream_options` must be an object, got a {}", it->type_name()));
  }
  if (JsonDepth(body, kMaxDumpDepth) > kMaxDumpDepth) {
    return InvalidArgument(
        fmt::format("body nests deeper than {} levels; flatten it", kMaxDumpDepth));
  }
  // Re-parse keeping key order so the re-serialized body stays recognizable.
  nlohmann::ordered_json o =
      nlohmann::ordered_json::parse(body.begin(), body.end(), nullptr, false);
  o["stream_options"]["include_usage"] = true;  // null becomes an object
  return o.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

Result<std::string> RewriteForFallback(std::string_view body, std::string_view model,
                                       uint64_t max_tokens) {
  if (JsonDepth(body, kMaxDumpDepth) > kMaxDumpDepth) {
    return InvalidArgument(
        fmt::format("body nests deeper than {} levels; flatten it", kMaxDumpDepth));
  }
  nlohmann::ordered_json o =
      nlohmann::ordered_json::parse(body.begin(), body.end(), nullptr, false);
  if (o.is_discarded()) return InvalidArgument("body is not valid JSON; send a JSON object");
  if (!o.is_object()) {
    return InvalidArgument(fmt::format("body is not a JSON object (got a {})", o.type_name()));
  }
  if (!model.empty()) o["model"] = std::string(model);
  if (max_tokens > 0) {
    // Newer OpenAI clients send max_completion_tokens, older ones max_tokens;
    // cap whichever is there, and set max_tokens when neither is.
    bool capped = false;
    for (const char* key : {"max_tokens", "max_completion_tokens"}) {
      auto it = o.find(key);
      if (it == o.end() || it->is_null()) continue;
      capped = true;
      if (!it->is_number() || !(it->get<double>() <= static_cast<double>(max_tokens))) {
        *it = max_tokens;
      }
    }
    if (!capped) o["max_tokens"] = max_tokens;
  }
  return o.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string RewriteKserveModel(std::string_view target, std::string_view model) {
  constexpr std::string_view kPrefix = "/v2/models/";
  if (!target.starts_with(kPrefix)) return std::string(target);
  size_t end = target.find_first_of("/?", kPrefix.size());
  if (end == std::string_view::npos) end = target.size();
  std::string out(kPrefix);
  out += model;
  out += target.substr(end);
  return out;
}

namespace {

// Finds the value of the top-level "usage" member in one pass over the text
// (strings and nesting tracked, nothing allocated) so that only that small
// object is parsed; a whole completion can be kilobytes of text. Returns false
// when the text is not shaped as expected (the caller then parses it all).
// The index of the quote that closes the string whose text starts at `i`
// (just past its opening quote), or npos. memchr finds each candidate quote;
// it closes the string when an even number of backslashes precede it.
size_t StringEnd(std::string_view d, size_t i) {
  const size_t start = i;
  while (i < d.size()) {
    const void* q = std::memchr(d.data() + i, '"', d.size() - i);
    if (q == nullptr) return std::string_view::npos;
    const size_t at = static_cast<const char*>(q) - d.data();
    size_t k = at;
    while (k > start && d[k - 1] == '\\') --k;
    if ((at - k) % 2 == 0) return at;
    i = at + 1;
  }
  return std::string_view::npos;
}

bool FindTopLevelUsage(std::string_view d, std::string_view* value) {
  int depth = 0;
  size_t i = 0;
  const size_t n = d.size();
  while (i < n && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r')) ++i;
  if (i >= n || d[i] != '{') return false;
  for (; i < n; ++i) {
    char c = d[i];
    if (c == '"') {
      size_t start = ++i;
      i = StringEnd(d, start);
      if (i == std::string_view::npos) return false;
      // Raw text "usage" has no escapes; an escaped spelling is left to the
      // caller's \\u check and full parse.
      if (depth == 1 && d.substr(start, i - start) == "usage") {
        size_t j = i + 1;
        while (j < n && (d[j] == ' ' || d[j] == '\t' || d[j] == '\n' || d[j] == '\r')) ++j;
        if (j < n && d[j] == ':') {
          ++j;
          while (j < n && (d[j] == ' ' || d[j] == '\t' || d[j] == '\n' || d[j] == '\r')) ++j;
          if (j >= n || d[j] != '{') return false;  // null or odd: let the full parse decide
          // The object's end: nesting with strings skipped.
          int inner = 0;
          size_t k = j;
          for (; k < n; ++k) {
            if (d[k] == '"') {
              k = StringEnd(d, k + 1);
              if (k == std::string_view::npos) return false;
            } else if (d[k] == '{') {
              ++inner;
            } else if (d[k] == '}') {
              if (--inner == 0) break;
            }
          }
          if (k >= n) return false;
          if (!value->empty()) return false;  // a second "usage": let the full parse decide
          *value = d.substr(j, k - j + 1);
          i = k;  // go on: the whole document must still be well nested
          continue;
        }
      }
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) {
        // Only whitespace may follow the top-level object.
        for (++i; i < n; ++i) {
          if (d[i] != ' ' && d[i] != '\t' && d[i] != '\n' && d[i] != '\r') return false;
        }
        return !value->empty();
      }
      if (depth < 0) return false;
    }
  }
  return false;
}

}  // namespace

namespace internal {

// Reads as UsageFromObject reads nlohmann's DOM of the text: the last of
// duplicate members wins, only non-negative integers count.
std::optional<Usage> UsageObjectFast(std::string_view text) {
  FastScanner sc(text);
  Usage u;
  u.present = true;
  bool found_total = false;
  bool ok = sc.Object([&](const FastScanner::Str& key) {
    if (key.escaped) return false;
    int64_t* field = key.raw == "prompt_tokens"       ? &u.prompt_tokens
                     : key.raw == "completion_tokens" ? &u.completion_tokens
                     : key.raw == "total_tokens"      ? &u.total_tokens
                                                      : nullptr;
    if (field == nullptr) return sc.SkipValue();
    if (field == &u.total_tokens) found_total = true;
    *field = 0;
    char c = sc.Peek();
    if (c != '-' && (c < '0' || c > '9')) {
      if (field == &u.total_tokens) found_total = false;
      return sc.SkipValue();
    }
    FastScanner::Num n;
    if (!sc.Number(&n)) return false;
    if (!n.integer || n.negative) {
      // Negatives (even -0) and fractions are not token counts to nlohmann.
      if (field == &u.total_tokens) found_total = false;
      return true;
    }
    return SmallUint(n, field);
  });
  sc.Ws();
  if (!ok || !sc.AtEnd()) return std::nullopt;
  if (!found_total) {
    // Both are < 10^18, so the sum cannot overflow.
    u.total_tokens = u.prompt_tokens + u.completion_tokens;
  }
  return u;
}

Usage UsageObjectReference(std::string_view text) {
  Usage u;
  Json usage = Json::parse(text.begin(), text.end(), nullptr, false);
  if (usage.is_discarded() || !usage.is_object()) return u;
  Json wrapper = Json::object();
  wrapper["usage"] = std::move(usage);
  UsageFromObject(wrapper, &u);
  return u;
}

}  // namespace internal

Usage SniffUsage(std::string_view response_json) {
  Usage u;
  std::string_view usage_text;
  if (FindTopLevelUsage(response_json, &usage_text) &&
      response_json.find("\\u") == std::string_view::npos) {
    if (std::optional<Usage> fast = internal::UsageObjectFast(usage_text)) return *fast;
    u = internal::UsageObjectReference(usage_text);
    if (u.present) return u;
  }
  Json j = Json::parse(response_json.begin(), response_json.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return u;
  UsageFromObject(j, &u);
  return u;
}

// ---- SseUsageScanner ---------------------------------------------------------

SseUsageScanner::SseUsageScanner(bool strip_usage_chunk, size_t max_event_bytes)
    : strip_(strip_usage_chunk), max_event_bytes_(max_event_bytes) {}

namespace {

enum LineState : int { kMidLine = 0, kLineStart = 1, kLineCr = 2 };

// Returns the index just past the blank line that ends the current event, or
// npos if `d` from `i` on does not contain it; *state carries the line state
// across calls so any split of the stream finds the same boundaries. A line is
// blank when it is empty or a lone "\r" (CRLF endings); lone-CR line endings
// are not supported (no OpenAI-compatible server sends them).
size_t FindEventEnd(std::string_view d, size_t i, int* state) {
  const size_t n = d.size();
  while (i < n) {
    if (*state == kMidLine) {
      const void* nl = std::memchr(d.data() + i, '\n', n - i);
      if (nl == nullptr) return std::string_view::npos;
      i = static_cast<const char*>(nl) - d.data() + 1;
      *state = kLineStart;
      continue;
    }
    char c = d[i++];
    if (c == '\n') {
      *state = kLineStart;
      return i;
    }
    *state = (*state == kLineStart && c == '\r') ? kLineCr : kMidLine;
  }
  return std::string_view::npos;
}

}  // namespace

void SseUsageScanner::Feed(std::string_view data, std::string* out) {
  size_t i = 0;
  while (i < data.size()) {
    size_t end = FindEventEnd(data, i, &nl_state_);
    if (passthrough_) {
      // Inside an oversize event: forward as it arrives, up to its end.
      size_t stop = end == std::string_view::npos ? data.size() : end;
      out->append(data.substr(i, stop - i));
      if (end == std::string_view::npos) return;
      passthrough_ = false;
      i = end;
      continue;
    }
    if (end == std::string_view::npos) {
      std::string_view rest = data.substr(i);
      if (pending_.size() + rest.size() > max_event_bytes_) {
        // Too big to scan: forward what we have and the rest of this event unscanned.
        out->append(pending_);
        out->append(rest);
        pending_.clear();
        passthrough_ = true;
        ++oversize_events_;
      } else {
        pending_.append(rest);
      }
      return;
    }
    std::string_view tail = data.substr(i, end - i);
    i = end;
    if (pending_.size() + tail.size() > max_event_bytes_) {
      // Same rule as above when the whole event arrives at once, so the
      // output does not depend on how the stream was split.
      out->append(pending_);
      out->append(tail);
      pending_.clear();
      ++oversize_events_;
      continue;
    }
    if (pending_.empty()) {
      ScanEvent(tail, /*complete=*/true, out);
    } else {
      pending_.append(tail);
      ScanEvent(pending_, /*complete=*/true, out);
      pending_.clear();
    }
  }
}

void SseUsageScanner::Finish(std::string* out) {
  if (!passthrough_ && !pending_.empty()) ScanEvent(pending_, /*complete=*/false, out);
  pending_.clear();
  passthrough_ = false;
  nl_state_ = kLineStart;
}

void SseUsageScanner::ScanEvent(std::string_view event, bool complete, std::string* out) {
  // Collect the data lines; several are joined with "\n" (SSE rules).
  std::string_view single;
  std::string joined;
  int data_lines = 0;
  size_t pos = 0;
  while (pos < event.size()) {
    size_t nl = event.find('\n', pos);
    std::string_view line =
        event.substr(pos, nl == std::string_view::npos ? event.size() - pos : nl - pos);
    pos = nl == std::string_view::npos ? event.size() : nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.substr(0, 5) != "data:") continue;
    line.remove_prefix(5);
    if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (data_lines == 0) {
      single = line;
    } else {
      if (data_lines == 1) joined.assign(single);
      joined.push_back('\n');
      joined.append(line);
    }
    ++data_lines;
  }
  if (data_lines == 0) {
    out->append(event);
    return;
  }
  std::string_view payload = data_lines == 1 ? single : std::string_view(joined);
  if (payload == "[DONE]") {
    saw_done_ = true;
    out->append(event);
    return;
  }
  if (!MayCarryUsage(payload)) {
    out->append(event);
    return;
  }
  Json j = Json::parse(payload.begin(), payload.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !UsageFromObject(j, &usage_)) {
    out->append(event);
    return;
  }
  if (strip_ && complete) {
    auto choices = j.find("choices");
    if (choices != j.end() && choices->is_array() && choices->empty()) return;  // usage-only chunk
  }
  out->append(event);
}

// ---- KServe ------------------------------------------------------------------

Result<KserveTarget> ParseKservePath(std::string_view path) {
  auto not_found = [&] {
    return NotFound(fmt::format(
        "'{}' is not a KServe v2 model path; use /v2/models/NAME[/versions/V][/infer|/ready|"
        "/generate|/generate_stream]",
        path.substr(0, 200)));
  };
  constexpr std::string_view kPrefix = "/v2/models/";
  if (path.substr(0, kPrefix.size()) != kPrefix) return not_found();
  std::string_view rest = path.substr(kPrefix.size());
  std::string_view seg[5];
  size_t n = 0;
  while (true) {
    if (n == 5) return not_found();
    size_t slash = rest.find('/');
    seg[n++] = rest.substr(0, slash);
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  KserveTarget t;
  size_t verb_at = 1;
  if (!ValidKserveSegment(seg[0])) return not_found();
  t.model = std::string(seg[0]);
  if (n >= 3 && seg[1] == "versions") {
    if (!ValidKserveSegment(seg[2])) return not_found();
    t.version = std::string(seg[2]);
    verb_at = 3;
  }
  if (n == verb_at) {
    t.verb = "metadata";
  } else if (n == verb_at + 1 &&
             (seg[verb_at] == "infer" || seg[verb_at] == "ready" || seg[verb_at] == "generate" ||
              seg[verb_at] == "generate_stream")) {
    t.verb = std::string(seg[verb_at]);
  } else {
    return not_found();
  }
  return t;
}

}  // namespace gantry::gateway
