#include "json_check.h"

#include <cstdint>
#include <vector>

#include "gantry/core/text.h"

namespace gantry::security::internal {

namespace {

bool IsWs(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Checker {
 public:
  explicit Checker(std::string_view s) : s_(s) {}

  ObjectCheck Run() {
    SkipWs();
    if (!Peek('{')) return ObjectCheck::kInvalid;
    enum State { kObjStart, kKey, kArrStart, kValue, kAfterValue };
    State st = kObjStart;
    ++i_;
    stack_.push_back('{');
    for (;;) {
      switch (st) {
        case kObjStart:
          SkipWs();
          if (Peek('}')) {
            ++i_;
            stack_.pop_back();
            st = kAfterValue;
          } else {
            st = kKey;
          }
          break;
        case kKey: {
          SkipWs();
          if (!Peek('"')) return ObjectCheck::kInvalid;
          size_t start = i_ + 1;
          bool escaped = false;
          if (!String(&escaped)) return ObjectCheck::kInvalid;
          if (stack_.size() == 1) {
            std::string_view key = s_.substr(start, i_ - 1 - start);
            if (escaped) slow_ = true;
            if (key == "seq" || key == "prev" || key == "hash") return ObjectCheck::kInvalid;
          }
          SkipWs();
          if (!Peek(':')) return ObjectCheck::kInvalid;
          ++i_;
          st = kValue;
          break;
        }
        case kArrStart:
          SkipWs();
          if (Peek(']')) {
            ++i_;
            stack_.pop_back();
            st = kAfterValue;
          } else {
            st = kValue;
          }
          break;
        case kValue:
          SkipWs();
          if (i_ >= s_.size()) return ObjectCheck::kInvalid;
          switch (s_[i_]) {
            case '{':
              ++i_;
              stack_.push_back('{');
              st = kObjStart;
              break;
            case '[':
              ++i_;
              stack_.push_back('[');
              st = kArrStart;
              break;
            case '"': {
              bool escaped;
              if (!String(&escaped)) return ObjectCheck::kInvalid;
              st = kAfterValue;
              break;
            }
            case 't':
              if (!Literal("true")) return ObjectCheck::kInvalid;
              st = kAfterValue;
              break;
            case 'f':
              if (!Literal("false")) return ObjectCheck::kInvalid;
              st = kAfterValue;
              break;
            case 'n':
              if (!Literal("null")) return ObjectCheck::kInvalid;
              st = kAfterValue;
              break;
            default:
              if (!Number()) return ObjectCheck::kInvalid;
              st = kAfterValue;
              break;
          }
          break;
        case kAfterValue:
          SkipWs();
          if (stack_.empty()) {
            if (i_ != s_.size()) return ObjectCheck::kInvalid;
            return slow_ ? ObjectCheck::kSlowPath : ObjectCheck::kValid;
          }
          if (i_ >= s_.size()) return ObjectCheck::kInvalid;
          if (s_[i_] == ',') {
            ++i_;
            st = stack_.back() == '{' ? kKey : kValue;
          } else if (s_[i_] == (stack_.back() == '{' ? '}' : ']')) {
            ++i_;
            stack_.pop_back();
          } else {
            return ObjectCheck::kInvalid;
          }
          break;
      }
    }
  }

 private:
  bool Peek(char c) const { return i_ < s_.size() && s_[i_] == c; }
  void SkipWs() {
    while (i_ < s_.size() && IsWs(s_[i_])) ++i_;
  }
  bool Literal(std::string_view lit) {
    if (s_.substr(i_, lit.size()) != lit) return false;
    i_ += lit.size();
    return true;
  }
  bool Digits() {
    size_t start = i_;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    return i_ > start;
  }
  bool Number() {
    if (Peek('-')) ++i_;
    if (Peek('0')) {
      ++i_;
    } else if (i_ < s_.size() && s_[i_] >= '1' && s_[i_] <= '9') {
      Digits();
    } else {
      return false;
    }
    if (Peek('.')) {
      ++i_;
      if (!Digits()) return false;
    }
    if (Peek('e') || Peek('E')) {
      ++i_;
      if (Peek('+') || Peek('-')) ++i_;
      if (!Digits()) return false;
    }
    return true;
  }
  // Reads 4 hex digits at i_ (after "\u").
  bool Hex4(uint32_t* out) {
    if (i_ + 4 > s_.size()) return false;
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      int h = Hex(s_[i_ + k]);
      if (h < 0) return false;
      v = (v << 4) | static_cast<uint32_t>(h);
    }
    i_ += 4;
    *out = v;
    return true;
  }
  bool Cont(uint8_t lo = 0x80, uint8_t hi = 0xBF) {
    if (i_ >= s_.size()) return false;
    auto c = static_cast<uint8_t>(s_[i_]);
    if (c < lo || c > hi) return false;
    ++i_;
    return true;
  }
  // At the opening quote; leaves i_ after the closing quote.
  bool String(bool* escaped) {
    *escaped = false;
    ++i_;
    while (i_ < s_.size()) {
      if (i_ + 8 <= s_.size()) {
        const size_t plain = JsonPlainPrefix8(s_.data() + i_);
        i_ += plain;
        if (plain == 8) continue;
      }
      auto c = static_cast<uint8_t>(s_[i_]);
      if (c == '"') {
        ++i_;
        return true;
      }
      if (c < 0x20) return false;
      if (c == '\\') {
        *escaped = true;
        ++i_;
        if (i_ >= s_.size()) return false;
        char e = s_[i_++];
        switch (e) {
          case '"':
          case '\\':
          case '/':
          case 'b':
          case 'f':
          case 'n':
          case 'r':
          case 't':
            break;
          case 'u': {
            uint32_t cp;
            if (!Hex4(&cp)) return false;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return false;  // lone low surrogate
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              if (s_.substr(i_, 2) != "\\u") return false;
              i_ += 2;
              uint32_t lo;
              if (!Hex4(&lo) || lo < 0xDC00 || lo > 0xDFFF) return false;
            }
            break;
          }
          default:
            return false;
        }
        continue;
      }
      if (c < 0x80) {
        ++i_;
        continue;
      }
      // Well-formed UTF-8 (Unicode table 3-7): no overlongs, surrogates or > U+10FFFF.
      ++i_;
      bool ok;
      if (c >= 0xC2 && c <= 0xDF) {
        ok = Cont();
      } else if (c == 0xE0) {
        ok = Cont(0xA0, 0xBF) && Cont();
      } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
        ok = Cont() && Cont();
      } else if (c == 0xED) {
        ok = Cont(0x80, 0x9F) && Cont();
      } else if (c == 0xF0) {
        ok = Cont(0x90, 0xBF) && Cont() && Cont();
      } else if (c >= 0xF1 && c <= 0xF3) {
        ok = Cont() && Cont() && Cont();
      } else if (c == 0xF4) {
        ok = Cont(0x80, 0x8F) && Cont() && Cont();
      } else {
        ok = false;
      }
      if (!ok) return false;
    }
    return false;  // unterminated
  }

  std::string_view s_;
  size_t i_ = 0;
  bool slow_ = false;
  std::vector<char> stack_;
};

}  // namespace

ObjectCheck CheckAuditObject(std::string_view text) { return Checker(text).Run(); }

}  // namespace gantry::security::internal
