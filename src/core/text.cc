#include "gantry/core/text.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <string>

namespace gantry {

namespace {

int MonthIndex(std::string_view m) {
  static constexpr std::string_view kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (int i = 0; i < 12; ++i) {
    if (kMonths[i] == m) return i;
  }
  return -1;
}

// Reads 1..max_digits decimal digits at *pos.
bool ReadNumber(std::string_view s, size_t* pos, size_t min_digits, size_t max_digits, int* out) {
  size_t start = *pos;
  int v = 0;
  while (*pos < s.size() && *pos - start < max_digits &&
         std::isdigit(static_cast<unsigned char>(s[*pos]))) {
    v = v * 10 + (s[*pos] - '0');
    ++*pos;
  }
  if (*pos - start < min_digits) return false;
  *out = v;
  return true;
}

// Not std::tolower: that follows the C locale, and these helpers promise ASCII.
char LowerChar(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool Expect(std::string_view s, size_t* pos, char c) {
  if (*pos >= s.size() || s[*pos] != c) return false;
  ++*pos;
  return true;
}

}  // namespace

std::string EscapeMarkup(std::string_view s, bool attribute) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      case '\t':
        out += attribute ? "&#9;" : "\t";
        break;
      case '\n':
        out += attribute ? "&#10;" : "\n";
        break;
      default:
        out += (static_cast<unsigned char>(c) < 0x20) ? '?' : c;
    }
  }
  return out;
}

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string Join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += separator;
    out += parts[i];
  }
  return out;
}

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = LowerChar(c);
  return out;
}

std::string AsciiUpper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

std::string Plural(int64_t n, std::string_view one, std::string_view many) {
  std::string out = std::to_string(n);
  out += ' ';
  out += n == 1 ? one : many;
  return out;
}

std::string GroupThousands(int64_t n) {
  const std::string digits =
      std::to_string(n < 0 ? -static_cast<uint64_t>(n) : static_cast<uint64_t>(n));
  std::string out = n < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](char x, char y) { return LowerChar(x) == LowerChar(y); });
}

size_t EditDistance(std::string_view a, std::string_view b) {
  // Three rows suffice: a transposition looks two rows back.
  std::vector<size_t> prev2(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);
      }
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::optional<std::string> ClosestMatch(std::string_view word,
                                        const std::vector<std::string>& candidates,
                                        size_t max_distance) {
  const std::string* best = nullptr;
  size_t best_distance = 0;
  for (const std::string& c : candidates) {
    size_t d = EditDistance(word, c);
    if (d <= max_distance && (best == nullptr || d < best_distance)) {
      best = &c;
      best_distance = d;
    }
  }
  if (best == nullptr) return std::nullopt;
  return *best;
}

std::string FormatUtc(std::chrono::system_clock::time_point t, const char* format) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[128];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

Result<std::chrono::system_clock::time_point> ParseRfc1123Date(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument("'" + std::string(text) + "' is not an RFC 1123 date (" +
                           std::string(why) + "); expected e.g. 'Mon, 19 Sep 2016 18:29:47 GMT'");
  };
  std::string_view s = text;
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  size_t pos = 0;
  // Optional "Mon, ".
  if (size_t comma = s.find(','); comma != std::string_view::npos) {
    if (comma != 3) return bad("the weekday must be three letters before ','");
    pos = comma + 1;
    if (!Expect(s, &pos, ' ')) return bad("no space after the weekday");
  }
  int day = 0, year = 0, hour = 0, minute = 0, second = 0;
  if (!ReadNumber(s, &pos, 1, 2, &day)) return bad("no day of month");
  if (!Expect(s, &pos, ' ')) return bad("no space after the day");
  if (pos + 3 > s.size()) return bad("no month");
  int month = MonthIndex(s.substr(pos, 3));
  if (month < 0) return bad("unknown month '" + std::string(s.substr(pos, 3)) + "'");
  pos += 3;
  if (!Expect(s, &pos, ' ')) return bad("no space after the month");
  if (!ReadNumber(s, &pos, 4, 4, &year)) return bad("the year must have four digits");
  if (!Expect(s, &pos, ' ')) return bad("no space after the year");
  if (!ReadNumber(s, &pos, 2, 2, &hour) || !Expect(s, &pos, ':') ||
      !ReadNumber(s, &pos, 2, 2, &minute) || !Expect(s, &pos, ':') ||
      !ReadNumber(s, &pos, 2, 2, &second)) {
    return bad("the time must be HH:MM:SS");
  }
  if (!Expect(s, &pos, ' ')) return bad("no time zone");
  std::string_view zone = s.substr(pos);
  if (zone != "GMT" && zone != "UTC" && zone != "+0000" && zone != "Z") {
    return bad("the time zone must be GMT");
  }
  static constexpr int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  int month_days = month == 1 && !leap ? 28 : kDays[month];
  if (day < 1 || day > month_days || hour > 23 || minute > 59 || second > 60 || year < 1970) {
    return bad("a field is out of range");
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  time_t t = ::timegm(&tm);
  // system_clock counts nanoseconds in 64 bits (until 2262): a later date
  // would overflow in from_time_t, so it is rejected, not wrapped.
  constexpr auto kMaxSeconds = std::chrono::duration_cast<std::chrono::seconds>(
      std::chrono::system_clock::time_point::max().time_since_epoch());
  if (t > kMaxSeconds.count()) return bad("the year is too far in the future");
  return std::chrono::system_clock::from_time_t(t);
}

std::string Base64Encode(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  auto at = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(bytes[k])); };
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = at(i) << 16 | at(i + 1) << 8 | at(i + 2);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (size_t rest = bytes.size() - i; rest > 0) {
    uint32_t v = at(i) << 16 | (rest == 2 ? at(i + 1) << 8 : 0);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

Result<std::string> Base64Decode(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) {
    return InvalidArgument("not valid base64: impossible length " + std::to_string(text.size()));
  }
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    int v = value(text[i]);
    if (v < 0) {
      return InvalidArgument("not valid base64: unexpected character at offset " +
                             std::to_string(i));
    }
    acc = acc << 6 | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  // Leftover bits must be zero: a signature or key has one spelling only.
  if (bits > 0 && (acc & ((1u << bits) - 1)) != 0) {
    return InvalidArgument("not valid base64: non-zero trailing bits");
  }
  return out;
}

}  // namespace gantry
