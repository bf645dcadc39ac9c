// ParseSource: a JSON reader that remembers where every object and array
// starts, so findings can point at a line of the user's file.
//
// nlohmann's parser reports no positions to its callbacks, so this is a small
// recursive-descent parser of its own that builds the Json in place. Its
// recursion is bounded by kMaxJsonDepth, checked as each container opens, so
// hostile nesting ends in an error long before the stack is at risk.
//
// Beyond RFC 8259 it accepts what Azure's own template parser accepts and
// users therefore write: a UTF-8 byte order mark, and `//` and `/* */`
// comments (ARM templates allow them; `az deployment` strips them).
// Duplicate keys keep the last value, as nlohmann and Newtonsoft do.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <unordered_set>

#include "gantry/assess/resource.h"
#include "gantry/core/text.h"

namespace gantry::assess {
namespace {

class Parser {
 public:
  Parser(std::string_view text, const std::string& path, SourceDoc* doc)
      : begin_(text.data()),
        p_(text.data()),
        end_(text.data() + text.size()),
        path_(path),
        doc_(doc) {
    line_start_ = begin_;
  }

  Status Run() {
    if (end_ - p_ >= 3 && static_cast<unsigned char>(p_[0]) == 0xEF &&
        static_cast<unsigned char>(p_[1]) == 0xBB && static_cast<unsigned char>(p_[2]) == 0xBF) {
      p_ += 3;
      line_start_ = p_;
    }
    RETURN_IF_ERROR(SkipSpace());
    if (p_ == end_) return Fail("the file is empty; expected a JSON value");
    RETURN_IF_ERROR(ParseValue(&doc_->value, 0));
    RETURN_IF_ERROR(SkipSpace());
    if (p_ != end_) return Fail("unexpected text after the JSON value");
    return Status::Ok();
  }

 private:
  Status Fail(std::string_view what) const {
    return DataLoss(fmt::format("{}:{}:{}: invalid JSON: {}", path_, line_, Column(), what));
  }
  int Column() const { return static_cast<int>(p_ - line_start_) + 1; }

  Status SkipSpace() {
    while (p_ < end_) {
      char c = *p_;
      if (c == ' ' || c == '\t' || c == '\r') {
        ++p_;
      } else if (c == '\n') {
        ++p_;
        ++line_;
        line_start_ = p_;
      } else if (c == '/' && p_ + 1 < end_ && p_[1] == '/') {
        while (p_ < end_ && *p_ != '\n') ++p_;
      } else if (c == '/' && p_ + 1 < end_ && p_[1] == '*') {
        const char* open = p_;
        const int open_line = line_;
        const char* open_start = line_start_;
        p_ += 2;
        while (true) {
          if (p_ + 1 >= end_) {
            p_ = open;
            line_ = open_line;
            line_start_ = open_start;
            return Fail("a /* comment is not closed with */");
          }
          if (p_[0] == '*' && p_[1] == '/') {
            p_ += 2;
            break;
          }
          if (*p_ == '\n') {
            ++line_;
            line_start_ = p_ + 1;
          }
          ++p_;
        }
      } else {
        break;
      }
    }
    return Status::Ok();
  }

  // Appends `key` to the current pointer with RFC 6901 escapes.
  void PushKey(std::string_view key) {
    pointer_ += '/';
    AppendPointerToken(key, &pointer_);
  }

  Status ParseValue(Json* out, int depth) {
    if (p_ == end_) return Fail("unexpected end of input; expected a value");
    switch (*p_) {
      case '{':
        return ParseObject(out, depth + 1);
      case '[':
        return ParseArray(out, depth + 1);
      case '"': {
        std::string s;
        RETURN_IF_ERROR(ParseString(&s));
        *out = std::move(s);
        return Status::Ok();
      }
      case 't':
        return ParseWord("true", Json(true), out);
      case 'f':
        return ParseWord("false", Json(false), out);
      case 'n':
        return ParseWord("null", Json(nullptr), out);
      default:
        if (*p_ == '-' || (*p_ >= '0' && *p_ <= '9')) return ParseNumber(out);
        return Fail(fmt::format("unexpected character '{}'; expected a value", Printable(*p_)));
    }
  }

  static std::string Printable(char c) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      return fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    }
    return std::string(1, c);
  }

  Status CheckDepth(int depth) const {
    if (depth > kMaxJsonDepth) {
      return InvalidArgument(fmt::format(
          "{}:{}:{}: JSON nested deeper than the limit of {} arrays/objects; no template or plan "
          "needs that much, check the file",
          path_, line_, Column(), kMaxJsonDepth));
    }
    return Status::Ok();
  }

  Status ParseObject(Json* out, int depth) {
    RETURN_IF_ERROR(CheckDepth(depth));
    doc_->lines.emplace(pointer_, line_);
    *out = Json::object();
    auto& obj = out->get_ref<Json::object_t&>();
    // ordered_map looks keys up linearly; large objects (symbolic-name
    // resource maps) check duplicates through a hash set instead.
    std::unordered_set<std::string> seen;
    ++p_;
    RETURN_IF_ERROR(SkipSpace());
    if (p_ < end_ && *p_ == '}') {
      ++p_;
      return Status::Ok();
    }
    const size_t saved = pointer_.size();
    while (true) {
      RETURN_IF_ERROR(SkipSpace());
      if (p_ == end_ || *p_ != '"') {
        return Fail(p_ == end_ ? "unexpected end of input inside an object"
                               : "expected a member name in double quotes");
      }
      std::string key;
      RETURN_IF_ERROR(ParseString(&key));
      RETURN_IF_ERROR(SkipSpace());
      if (p_ == end_ || *p_ != ':') return Fail(fmt::format("expected ':' after \"{}\"", key));
      ++p_;
      RETURN_IF_ERROR(SkipSpace());
      PushKey(key);
      Json* slot = nullptr;
      bool dup = false;
      if (obj.size() < 16) {
        for (auto& kv : obj) {
          if (kv.first == key) {
            slot = &kv.second;
            dup = true;
            break;
          }
        }
        if (!dup && obj.size() == 15) {
          for (auto& kv : obj) seen.insert(kv.first);
          seen.insert(key);
        }
      } else if (!seen.insert(key).second) {
        for (auto& kv : obj) {
          if (kv.first == key) {
            slot = &kv.second;
            break;
          }
        }
        dup = true;
      }
      if (!dup) {
        // Skip ordered_map's linear duplicate search: done above.
        static_cast<std::vector<std::pair<const std::string, Json>>&>(obj).emplace_back(
            std::move(key), Json());
        slot = &obj.back().second;
      } else {
        *slot = Json();
      }
      RETURN_IF_ERROR(ParseValue(slot, depth));
      pointer_.resize(saved);
      RETURN_IF_ERROR(SkipSpace());
      if (p_ == end_) return Fail("unexpected end of input inside an object; expected '}'");
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ == '}') {
        ++p_;
        return Status::Ok();
      }
      return Fail("expected ',' or '}' after an object member");
    }
  }

  Status ParseArray(Json* out, int depth) {
    RETURN_IF_ERROR(CheckDepth(depth));
    doc_->lines.emplace(pointer_, line_);
    *out = Json::array();
    auto& arr = out->get_ref<Json::array_t&>();
    ++p_;
    RETURN_IF_ERROR(SkipSpace());
    if (p_ < end_ && *p_ == ']') {
      ++p_;
      return Status::Ok();
    }
    const size_t saved = pointer_.size();
    while (true) {
      RETURN_IF_ERROR(SkipSpace());
      pointer_ += '/';
      pointer_ += std::to_string(arr.size());
      arr.emplace_back();
      RETURN_IF_ERROR(ParseValue(&arr.back(), depth));
      pointer_.resize(saved);
      RETURN_IF_ERROR(SkipSpace());
      if (p_ == end_) return Fail("unexpected end of input inside an array; expected ']'");
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ == ']') {
        ++p_;
        return Status::Ok();
      }
      return Fail("expected ',' or ']' after an array element");
    }
  }

  Status ParseWord(std::string_view word, Json value, Json* out) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word) {
      return Fail(fmt::format("unexpected word; expected '{}' or a quoted string", word));
    }
    p_ += word.size();
    *out = std::move(value);
    return Status::Ok();
  }

  Status ParseNumber(Json* out) {
    const char* start = p_;
    bool is_float = false;
    if (*p_ == '-') ++p_;
    if (p_ == end_ || *p_ < '0' || *p_ > '9') return Fail("expected a digit after '-'");
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (p_ < end_ && *p_ == '.') {
      is_float = true;
      ++p_;
      if (p_ == end_ || *p_ < '0' || *p_ > '9') return Fail("expected a digit after '.'");
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      is_float = true;
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || *p_ < '0' || *p_ > '9') return Fail("expected a digit in the exponent");
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (!is_float) {
      int64_t i;
      auto [e, ec] = std::from_chars(start, p_, i);
      if (ec == std::errc() && e == p_) {
        *out = i;
        return Status::Ok();
      }
      uint64_t u;
      auto [e2, ec2] = std::from_chars(start, p_, u);
      if (ec2 == std::errc() && e2 == p_) {
        *out = u;
        return Status::Ok();
      }
    }
    double d;
    auto [e, ec] = std::from_chars(start, p_, d);
    if (ec != std::errc() || e != p_ || !std::isfinite(d)) {
      const char* bad = p_;
      p_ = start;
      Status s = Fail(fmt::format("number '{}' is out of range", std::string_view(start, bad)));
      p_ = bad;
      return s;
    }
    *out = d;
    return Status::Ok();
  }

  static void AppendUtf8(uint32_t cp, std::string* s) {
    if (cp < 0x80) {
      *s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *s += static_cast<char>(0xC0 | (cp >> 6));
      *s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *s += static_cast<char>(0xE0 | (cp >> 12));
      *s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *s += static_cast<char>(0xF0 | (cp >> 18));
      *s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      *s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  bool Hex4(uint32_t* out) {
    if (end_ - p_ < 4) return false;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = p_[i];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return false;
      }
    }
    p_ += 4;
    *out = v;
    return true;
  }

  // Length of the valid UTF-8 sequence at p_ (lead byte >= 0x80), 0 when invalid.
  size_t Utf8Length() const {
    const auto* u = reinterpret_cast<const unsigned char*>(p_);
    const size_t left = static_cast<size_t>(end_ - p_);
    auto cont = [&](size_t i) { return i < left && (u[i] & 0xC0) == 0x80; };
    if (u[0] >= 0xC2 && u[0] <= 0xDF) return cont(1) ? 2 : 0;
    if (u[0] >= 0xE0 && u[0] <= 0xEF) {
      if (!cont(1) || !cont(2)) return 0;
      if (u[0] == 0xE0 && u[1] < 0xA0) return 0;   // overlong
      if (u[0] == 0xED && u[1] >= 0xA0) return 0;  // surrogate
      return 3;
    }
    if (u[0] >= 0xF0 && u[0] <= 0xF4) {
      if (!cont(1) || !cont(2) || !cont(3)) return 0;
      if (u[0] == 0xF0 && u[1] < 0x90) return 0;   // overlong
      if (u[0] == 0xF4 && u[1] >= 0x90) return 0;  // above U+10FFFF
      return 4;
    }
    return 0;
  }

  Status ParseString(std::string* out) {
    ++p_;  // opening quote
    while (true) {
      // Plain runs are found eight bytes at a time and appended in one go.
      const char* run = p_;
      while (end_ - p_ >= 8) {
        size_t n = JsonPlainPrefix8(p_);
        p_ += n;
        if (n < 8) break;
      }
      out->append(run, static_cast<size_t>(p_ - run));
      if (p_ == end_) return Fail("a string is not closed with '\"'");
      const unsigned char c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return Status::Ok();
      }
      if (c == '\\') {
        ++p_;
        if (p_ == end_) return Fail("a string is not closed with '\"'");
        char e = *p_++;
        switch (e) {
          case '"':
            *out += '"';
            break;
          case '\\':
            *out += '\\';
            break;
          case '/':
            *out += '/';
            break;
          case 'b':
            *out += '\b';
            break;
          case 'f':
            *out += '\f';
            break;
          case 'n':
            *out += '\n';
            break;
          case 'r':
            *out += '\r';
            break;
          case 't':
            *out += '\t';
            break;
          case 'u': {
            uint32_t cp;
            if (!Hex4(&cp)) return Fail("\\u must be followed by four hex digits");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              uint32_t lo;
              if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') {
                return Fail("a high surrogate \\u escape must be followed by a low surrogate");
              }
              p_ += 2;
              if (!Hex4(&lo) || lo < 0xDC00 || lo > 0xDFFF) {
                return Fail("a high surrogate \\u escape must be followed by a low surrogate");
              }
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
              return Fail("a low surrogate \\u escape without a high surrogate before it");
            }
            AppendUtf8(cp, out);
            break;
          }
          default:
            --p_;
            return Fail(fmt::format("invalid escape '\\{}' in a string", Printable(e)));
        }
        continue;
      }
      if (c < 0x20) {
        return Fail(c == '\n' ? "a string is not closed before the end of the line"
                              : "a control character inside a string must be escaped");
      }
      if (c >= 0x80) {
        size_t n = Utf8Length();
        if (n == 0) return Fail("invalid UTF-8 in a string; save the file as UTF-8");
        out->append(p_, n);
        p_ += n;
        continue;
      }
      *out += static_cast<char>(c);
      ++p_;
    }
  }

  const char* begin_;
  const char* p_;
  const char* end_;
  const char* line_start_;
  int line_ = 1;
  const std::string& path_;
  SourceDoc* doc_;
  std::string pointer_;
};

}  // namespace

Result<SourceDoc> ParseSource(std::string_view text, std::string path) {
  if (text.size() > kMaxInputBytes) {
    return InvalidArgument(fmt::format("{}: {} bytes is over the input limit of {} MiB", path,
                                       text.size(), kMaxInputBytes >> 20));
  }
  SourceDoc doc;
  doc.path = std::move(path);
  Parser parser(text, doc.path, &doc);
  RETURN_IF_ERROR(parser.Run());
  return doc;
}

Result<SourceDoc> ReadSourceFile(const std::string& path) {
  std::string text;
  if (path == "-") {
    char buf[1 << 16];
    while (true) {
      size_t n = std::fread(buf, 1, sizeof buf, stdin);
      text.append(buf, n);
      if (text.size() > kMaxInputBytes) {
        return InvalidArgument(
            fmt::format("stdin: more than the input limit of {} MiB", kMaxInputBytes >> 20));
      }
      if (n < sizeof buf) {
        if (std::ferror(stdin)) return IoError("reading stdin", errno);
        break;
      }
    }
    return ParseSource(text, "stdin");
  }
  // Refuse an oversized regular file before reading it into memory.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
      static_cast<uint64_t>(st.st_size) > kMaxInputBytes) {
    return InvalidArgument(fmt::format("{}: {} bytes is over the input limit of {} MiB", path,
                                       st.st_size, kMaxInputBytes >> 20));
  }
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return InvalidArgument(fmt::format("{}: is a directory; give a JSON file", path));
  }
  ASSIGN_OR_RETURN(text, ReadFile(path));
  return ParseSource(text, path);
}

}  // namespace gantry::assess
