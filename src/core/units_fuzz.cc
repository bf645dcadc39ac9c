// libFuzzer target for units.h: parsing must never crash, overflow or accept
// out-of-range values, and what FormatSize prints must parse back.
#include <cstdint>
#include <cstring>
#include <string>

#include "gantry/core/units.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gantry;
  std::string_view text(reinterpret_cast<const char*>(data), size);

  if (Result<uint64_t> bytes = ParseSize(text); bytes.ok()) {
    Check(*bytes <= uint64_t{1} << 63);
    Result<uint64_t> back = ParseSize(FormatSize(*bytes));
    Check(back.ok());
    // FormatSize keeps 3 significant digits: at most 0.5% off, plus rounding.
    double v = static_cast<double>(*bytes);
    Check(std::abs(static_cast<double>(*back) - v) <= v * 0.005 + 1);
  } else {
    Check(bytes.status().code() == StatusCode::kInvalidArgument);
  }

  if (Result<std::chrono::nanoseconds> d = ParseDuration(text); d.ok()) {
    Check(d->count() >= 0);
    Check(!FormatDuration(*d).empty());
  }

  if (Result<int64_t> n = ParseInt("fuzz", text); n.ok()) {
    std::string_view digits = text.starts_with('+') ? text.substr(1) : text;
    Check(std::to_string(*n) == digits || digits.starts_with('0') || digits.starts_with("-0"));
  }

  // Formatting any raw value must not crash either.
  if (size >= 8) {
    uint64_t raw;
    std::memcpy(&raw, data, sizeof(raw));
    Check(!FormatSize(raw).empty());
    Check(!FormatDuration(std::chrono::nanoseconds(static_cast<int64_t>(raw))).empty());
  }
  return 0;
}
