// Slurm hostlist expressions, as slurm.conf and the power saving programs'
// argument write them (`scontrol show hostnames` / `scontrol show hostlist`).
//
// Grammar accepted by ExpandHostlist:
//   list    := entry { sep entry }        sep: ',' or whitespace outside brackets;
//                                         empty entries ("a,,b", a trailing ',') are ignored
//   entry   := { name-chars | bracket }+  name-chars: [A-Za-z0-9._-]
//   bracket := '[' item { ',' item } ']'
//   item    := digits [ '-' digits ]      lo <= hi; at most 18 digits
// An entry with several brackets is their cartesian product, the leftmost
// varying slowest ("rack[1-2]-n[01-02]" -> rack1-n01, rack1-n02, rack2-n01,
// rack2-n02). A range is zero-padded to the width of its low bound as written
// ("[08-10]" -> 08 09 10, "[8-10]" -> 8 9 10). Positions in messages are
// 1-based character offsets into the expression.
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/autoscale/slurm_power.h"
#include "gantry/core/text.h"

namespace gantry::autoscale {
namespace {

// More hosts than any Slurm cluster has in one program call; an expression
// that expands past it is a typo ("n[1-1000000]"), not a request.
constexpr int64_t kMaxHosts = 65536;
constexpr size_t kMaxDigits = 18;  // fits int64_t

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsSeparator(char c) { return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string Describe(char c) {
  if (c >= 0x21 && c < 0x7f) return std::string("'") + c + "'";
  static const char kHex[] = "0123456789abcdef";
  const auto u = static_cast<unsigned char>(c);
  return std::string("byte 0x") + kHex[u >> 4] + kHex[u & 15];
}

std::string Pad(int64_t v, size_t width) {
  std::string s = std::to_string(v);
  if (s.size() < width) s.insert(0, width - s.size(), '0');
  return s;
}

struct Range {
  int64_t lo = 0, hi = 0;
  size_t width = 0;
};

// One part of an entry: a literal, or (ranges non-empty) a bracket.
struct Part {
  std::string literal;
  std::vector<Range> ranges;
  int64_t count = 1;  // values of the bracket
};

class Parser {
 public:
  explicit Parser(std::string_view expr) : expr_(expr) {}

  Result<std::vector<std::string>> Run() {
    std::vector<std::string> hosts;
    while (true) {
      while (pos_ < expr_.size() && IsSeparator(expr_[pos_])) ++pos_;
      if (pos_ >= expr_.size()) break;
      const size_t start = pos_;
      std::vector<Part> parts;
      RETURN_IF_ERROR(ParseEntry(&parts));
      RETURN_IF_ERROR(Emit(parts, start, &hosts));
    }
    return hosts;
  }

 private:
  Status Error(size_t pos, std::string_view what) const {
    return InvalidArgument("hostlist \"" + std::string(expr_) + "\": " + std::string(what) +
                           " at position " + std::to_string(pos + 1));
  }

  Status ParseEntry(std::vector<Part>* parts) {
    while (pos_ < expr_.size() && !IsSeparator(expr_[pos_])) {
      const char c = expr_[pos_];
      if (c == '[') {
        Part part;
        RETURN_IF_ERROR(ParseBracket(&part));
        parts->push_back(std::move(part));
      } else if (c == ']') {
        return Error(pos_, "']' without '['");
      } else if (IsNameChar(c)) {
        if (parts->empty() || !parts->back().ranges.empty()) parts->emplace_back();
        parts->back().literal += c;
        ++pos_;
      } else {
        return Error(pos_, "unexpected " + Describe(c) +
                               " (host names are letters, digits, '.', '_' and '-')");
      }
    }
    return Status::Ok();
  }

  Status ParseNumber(int64_t* value, size_t* width) {
    const size_t start = pos_;
    while (pos_ < expr_.size() && IsDigit(expr_[pos_])) ++pos_;
    if (pos_ == start) {
      if (pos_ >= expr_.size()) return Error(pos_, "a number expected, the expression ended");
      return Error(pos_, "a number expected, not " + Describe(expr_[pos_]));
    }
    if (pos_ - start > kMaxDigits) {
      return Error(start, "a number longer than " + std::to_string(kMaxDigits) + " digits");
    }
    int64_t v = 0;
    for (size_t i = start; i < pos_; ++i) v = v * 10 + (expr_[i] - '0');
    *value = v;
    *width = pos_ - start;
    return Status::Ok();
  }

  Status ParseBracket(Part* part) {
    const size_t open = pos_++;
    part->count = 0;
    while (true) {
      if (pos_ >= expr_.size()) return Error(open, "'[' not closed");
      const size_t item = pos_;
      Range r;
      RETURN_IF_ERROR(ParseNumber(&r.lo, &r.width));
      r.hi = r.lo;
      if (pos_ < expr_.size() && expr_[pos_] == '-') {
        ++pos_;
        size_t hi_width = 0;
        RETURN_IF_ERROR(ParseNumber(&r.hi, &hi_width));
        if (r.hi < r.lo) {
          return Error(item,
                       "range " + std::string(expr_.substr(item, pos_ - item)) + " runs backwards");
        }
      }
      // Both terms are at most kMaxHosts when added, so nothing overflows.
      if (r.hi - r.lo >= kMaxHosts || part->count + (r.hi - r.lo + 1) > kMaxHosts) {
        return TooMany(open);
      }
      part->count += r.hi - r.lo + 1;
      part->ranges.push_back(r);
      if (pos_ >= expr_.size()) return Error(open, "'[' not closed");
      const char c = expr_[pos_];
      if (c == ']') {
        ++pos_;
        return Status::Ok();
      }
      if (c != ',') {
        return Error(pos_, "expected ',' or ']' in brackets, not " + Describe(c));
      }
      ++pos_;
    }
  }

  Status TooMany(size_t pos) const {
    return Error(pos, "expands to more than " + std::to_string(kMaxHosts) +
                          " hosts (the limit of one expression)");
  }

  // The cartesian product of the parts, leftmost slowest.
  Status Emit(const std::vector<Part>& parts, size_t start, std::vector<std::string>* hosts) {
    int64_t count = 1;
    for (const Part& p : parts) {
      // count and p.count are both <= kMaxHosts, so the product fits.
      count *= p.count;
      if (count + static_cast<int64_t>(hosts->size()) > kMaxHosts) return TooMany(start);
    }
    // One odometer digit per bracket: (range index, value).
    std::vector<std::pair<size_t, int64_t>> at(parts.size());
    for (size_t i = 0; i < parts.size(); ++i) {
      if (!parts[i].ranges.empty()) at[i] = {0, parts[i].ranges[0].lo};
    }
    for (int64_t k = 0; k < count; ++k) {
      std::string host;
      for (size_t i = 0; i < parts.size(); ++i) {
        const Part& p = parts[i];
        host += p.ranges.empty() ? p.literal : Pad(at[i].second, p.ranges[at[i].first].width);
      }
      hosts->push_back(std::move(host));
      for (size_t i = parts.size(); i-- > 0;) {
        const Part& p = parts[i];
        if (p.ranges.empty()) continue;
        auto& [ri, v] = at[i];
        if (v < p.ranges[ri].hi) {
          ++v;
          break;
        }
        ri = ri + 1 < p.ranges.size() ? ri + 1 : 0;
        v = p.ranges[ri].lo;
        if (ri != 0) break;  // no carry into the next bracket
      }
    }
    return Status::Ok();
  }

  std::string_view expr_;
  size_t pos_ = 0;
};

}  // namespace

Result<std::vector<std::string>> ExpandHostlist(std::string_view expr) {
  return Parser(expr).Run();
}

// Slurm's own compression: only the last run of digits of each name varies
// ("rack1-n01", "rack1-n02" -> "rack1-n[01-02]"), prefixes in the order they
// first appear, numbers sorted, duplicates dropped. A name is kept as written
// (and left out of ranges) when its digits could not be re-expanded to it.
std::string CompressHostlist(const std::vector<std::string>& hosts) {
  struct Num {
    int64_t value;
    std::string text;
  };
  std::map<std::string, std::vector<Num>> numbers;   // prefix -> its numbers
  std::set<std::string> plain;                       // names without a usable number
  std::vector<std::pair<bool, std::string>> layout;  // (a prefix group?, key), first appearance
  for (const std::string& h : hosts) {
    size_t d = h.size();
    while (d > 0 && IsDigit(h[d - 1])) --d;
    const size_t digits = h.size() - d;
    if (digits == 0 || digits > kMaxDigits) {
      if (plain.insert(h).second) layout.emplace_back(false, h);
      continue;
    }
    const std::string prefix = h.substr(0, d);
    int64_t v = 0;
    for (size_t i = d; i < h.size(); ++i) v = v * 10 + (h[i] - '0');
    auto [it, inserted] = numbers.try_emplace(prefix);
    if (inserted) layout.emplace_back(true, prefix);
    it->second.push_back({v, h.substr(d)});
  }
  std::vector<std::string> out;
  for (const auto& [is_group, key] : layout) {
    if (!is_group) {
      out.push_back(key);
      continue;
    }
    std::vector<Num>& nums = numbers[key];
    std::sort(nums.begin(), nums.end(), [](const Num& a, const Num& b) {
      return a.value != b.value ? a.value < b.value : a.text.size() < b.text.size();
    });
    nums.erase(std::unique(nums.begin(), nums.end(),
                           [](const Num& a, const Num& b) { return a.text == b.text; }),
               nums.end());
    if (nums.size() == 1) {
      out.push_back(key + nums[0].text);
      continue;
    }
    // Runs: the low bound is written as is and fixes the width; a next number
    // joins when it is one more and written at that width.
    std::string items;
    for (size_t i = 0; i < nums.size();) {
      const size_t width = nums[i].text.size();
      size_t j = i;
      while (j + 1 < nums.size() && nums[j + 1].value == nums[j].value + 1 &&
             nums[j + 1].text == Pad(nums[j + 1].value, width)) {
        ++j;
      }
      if (!items.empty()) items += ',';
      items += nums[i].text;
      if (j > i) items += "-" + nums[j].text;
      i = j + 1;
    }
    out.push_back(key + "[" + items + "]");
  }
  return Join(out, ",");
}

}  // namespace gantry::autoscale
