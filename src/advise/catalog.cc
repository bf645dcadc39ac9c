#include "gantry/advise/catalog.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <iterator>
#include <map>
#include <set>
#include <utility>

#include "gantry/core/config.h"
#include "gantry/core/json.h"
#include "gantry/core/text.h"

namespace gantry::advise {
namespace internal {
// Generated from data/advise/azure.yaml by src/advise/CMakeLists.txt.
extern const std::string_view kDefaultCatalogYaml;
}  // namespace internal

namespace {

constexpr std::string_view kStandardPrefix = "Standard_";
constexpr std::string_view kBuiltinOrigin = "<built-in catalog data/advise/azure.yaml>";

const std::vector<std::string> kTopKeys = {"version", "currency", "accelerators", "sizes"};
const std::vector<std::string> kAcceleratorKeys = {"name",        "memory_gib",  "hbm_tbps",
                                                   "peak_tflops", "default_mfu", "source"};
const std::vector<std::string> kPeakKeys = {"bf16", "fp16", "fp32", "fp8"};
const std::vector<std::string> kSizeKeys = {
    "name",  "series",  "kind",           "cpu_class", "released",        "accelerator", "gpus",
    "vcpus", "ram_gib", "local_nvme_gib", "nvlink",    "infiniband_gbps", "prices",      "source"};
// Price columns, in the order of struct Price and of the CSV header.
const std::vector<std::string> kPriceKeys = {"payg",        "spot",       "reserved_1y",
                                             "reserved_3y", "savings_1y", "savings_3y"};

// "Standard_ND96isr_H100_v5" -> "ND96isr_H100_v5"; names without the prefix stay.
std::string_view StripStandard(std::string_view name) {
  if (name.size() >= kStandardPrefix.size() &&
      EqualsIgnoreCase(name.substr(0, kStandardPrefix.size()), kStandardPrefix)) {
    name.remove_prefix(kStandardPrefix.size());
  }
  return name;
}

std::string Key(std::string_view prefix, std::string_view name) {
  return fmt::format("{}.{}", prefix, name);
}

// Reads one catalog file through gantry::Config, so every message carries
// "file:line:col: key '...'".
class Reader {
 public:
  explicit Reader(const Config& cfg) : cfg_(cfg) {}

  // The lower bound a number must respect.
  enum class Bound { kNonNegative, kPositive };

  bool Has(const std::string& key) const { return cfg_.Has(key); }

  // Absent, null or "unknown" -> nullopt; otherwise a finite number within `bound`.
  Result<std::optional<double>> OptionalNumber(const std::string& key, Bound bound) const {
    if (!cfg_.Has(key)) return std::optional<double>();
    if (cfg_.IsScalar(key)) {
      ASSIGN_OR_RETURN(std::string text, cfg_.GetString(key, ""));
      if (EqualsIgnoreCase(TrimSpace(text), "unknown")) return std::optional<double>();
      if (double v = 0; !ParseNumber(text, &v)) {
        return InvalidArgument(
            fmt::format("{}: expected a number or 'unknown', got '{}'", cfg_.Locate(key), text));
      }
    }
    ASSIGN_OR_RETURN(double v, cfg_.GetDouble(key, 0));
    RETURN_IF_ERROR(CheckBound(key, v, bound, /*unknown_ok=*/true));
    return std::optional<double>(v);
  }

  // Must be present and a number ("unknown" is refused).
  Result<double> RequiredNumber(const std::string& item, std::string_view field,
                                std::string_view what, Bound bound) const {
    std::string key = Key(item, field);
    RETURN_IF_ERROR(Require(item, field, what));
    if (cfg_.IsScalar(key)) {
      ASSIGN_OR_RETURN(std::string text, cfg_.GetString(key, ""));
      if (EqualsIgnoreCase(TrimSpace(text), "unknown")) {
        return InvalidArgument(
            fmt::format("{}: is required for {} and cannot be 'unknown'", cfg_.Locate(key), what));
      }
    }
    ASSIGN_OR_RETURN(double v, cfg_.GetDouble(key, 0));
    RETURN_IF_ERROR(CheckBound(key, v, bound, /*unknown_ok=*/false));
    return v;
  }

  Result<std::string> RequiredString(const std::string& item, std::string_view field,
                                     std::string_view what) const {
    std::string key = Key(item, field);
    RETURN_IF_ERROR(Require(item, field, what));
    if (!cfg_.IsScalar(key)) {
      return InvalidArgument(fmt::format("{}: expected text, not a list or map", cfg_.Locate(key)));
    }
    ASSIGN_OR_RETURN(std::string s, cfg_.GetString(key, ""));
    if (TrimSpace(s).empty()) {
      return InvalidArgument(fmt::format("{}: must not be empty", cfg_.Locate(key)));
    }
    return std::string(TrimSpace(s));
  }

  Result<std::string> OptionalString(const std::string& key) const {
    if (!cfg_.Has(key)) return std::string();
    if (!cfg_.IsScalar(key)) {
      return InvalidArgument(fmt::format("{}: expected text, not a list or map", cfg_.Locate(key)));
    }
    ASSIGN_OR_RETURN(std::string s, cfg_.GetString(key, ""));
    return std::string(TrimSpace(s));
  }

  Status Require(const std::string& item, std::string_view field, std::string_view what) const {
    if (cfg_.Has(Key(item, field))) return Status::Ok();
    return InvalidArgument(fmt::format("{}: missing required key '{}' for {}; add it",
                                       cfg_.Locate(item), field, what));
  }

  // Refuses a key that must not be there (e.g. `accelerator` on a CPU size).
  Status Forbid(const std::string& item, std::string_view field, std::string_view why) const {
    std::string key = Key(item, field);
    if (!cfg_.Has(key)) return Status::Ok();
    return InvalidArgument(fmt::format("{}: {}; remove it", cfg_.Locate(key), why));
  }

  std::string Locate(const std::string& key) const { return cfg_.Locate(key); }
  const Config& config() const { return cfg_; }

 private:
  Status CheckBound(const std::string& key, double v, Bound bound, bool unknown_ok) const {
    std::string_view hint = unknown_ok ? " (write 'unknown' if it is not known)" : "";
    if (bound == Bound::kPositive && !(v > 0)) {
      return InvalidArgument(
          fmt::format("{}: must be greater than 0, got {}{}", cfg_.Locate(key), v, hint));
    }
    if (bound == Bound::kNonNegative && v < 0) {
      return InvalidArgument(
          fmt::format("{}: must not be negative, got {}{}", cfg_.Locate(key), v, hint));
    }
    return Status::Ok();
  }

  const Config& cfg_;
};

using Bound = Reader::Bound;

Result<Accelerator> ReadAccelerator(const Reader& r, const std::string& item) {
  const Config& cfg = r.config();
  RETURN_IF_ERROR(cfg.Keys(item).status());  // must be a map
  RETURN_IF_ERROR(cfg.CheckKnownKeys(item, kAcceleratorKeys));
  Accelerator a;
  ASSIGN_OR_RETURN(a.name, r.RequiredString(item, "name", "an accelerator"));
  std::string what = fmt::format("accelerator '{}'", a.name);
  ASSIGN_OR_RETURN(a.memory_gib, r.RequiredNumber(item, "memory_gib", what, Bound::kPositive));
  ASSIGN_OR_RETURN(a.hbm_tbps, r.OptionalNumber(Key(item, "hbm_tbps"), Bound::kPositive));
  std::string peaks = Key(item, "peak_tflops");
  if (r.Has(peaks)) {
    RETURN_IF_ERROR(cfg.Keys(peaks).status());
    RETURN_IF_ERROR(cfg.CheckKnownKeys(peaks, kPeakKeys));
    // A zero peak would make every time estimate infinite: refuse it like a
    // negative one and let the file say "unknown" instead.
    ASSIGN_OR_RETURN(a.bf16_tflops, r.OptionalNumber(Key(peaks, "bf16"), Bound::kPositive));
    ASSIGN_OR_RETURN(a.fp16_tflops, r.OptionalNumber(Key(peaks, "fp16"), Bound::kPositive));
    ASSIGN_OR_RETURN(a.fp32_tflops, r.OptionalNumber(Key(peaks, "fp32"), Bound::kPositive));
    ASSIGN_OR_RETURN(a.fp8_tflops, r.OptionalNumber(Key(peaks, "fp8"), Bound::kPositive));
  }
  ASSIGN_OR_RETURN(a.default_mfu, r.RequiredNumber(item, "default_mfu", what, Bound::kPositive));
  if (a.default_mfu > 1) {
    return InvalidArgument(
        fmt::format("{}: must be in (0, 1], got {}; MFU is a fraction of the peak (0.40 = 40%)",
                    r.Locate(Key(item, "default_mfu")), a.default_mfu));
  }
  ASSIGN_OR_RETURN(a.source, r.RequiredString(item, "source", what));
  return a;
}

Result<Price> ReadPrice(const Reader& r, const std::string& key) {
  RETURN_IF_ERROR(r.config().Keys(key).status());
  RETURN_IF_ERROR(r.config().CheckKnownKeys(key, kPriceKeys));
  Price p;
  std::optional<double>* fields[] = {&p.payg,        &p.spot,       &p.reserved_1y,
                                     &p.reserved_3y, &p.savings_1y, &p.savings_3y};
  for (size_t i = 0; i < kPriceKeys.size(); ++i) {
    ASSIGN_OR_RETURN(*fields[i], r.OptionalNumber(Key(key, kPriceKeys[i]), Bound::kNonNegative));
  }
  return p;
}

// Everything about one size except the cross-references to accelerators and
// other sizes, which the caller checks.
Result<VmSize> ReadSize(const Reader& r, const std::string& item) {
  const Config& cfg = r.config();
  RETURN_IF_ERROR(cfg.Keys(item).status());
  RETURN_IF_ERROR(cfg.CheckKnownKeys(item, kSizeKeys));
  VmSize s;
  ASSIGN_OR_RETURN(s.name, r.RequiredString(item, "name", "a size"));
  std::string what = fmt::format("size '{}'", s.name);
  ASSIGN_OR_RETURN(s.series, r.RequiredString(item, "series", what));

  ASSIGN_OR_RETURN(std::string kind, r.RequiredString(item, "kind", what));
  if (EqualsIgnoreCase(kind, "gpu")) {
    s.kind = SizeKind::kGpu;
  } else if (EqualsIgnoreCase(kind, "cpu")) {
    s.kind = SizeKind::kCpu;
  } else {
    return InvalidArgument(fmt::format("{}: kind must be 'gpu' or 'cpu', got '{}'",
                                       r.Locate(Key(item, "kind")), kind));
  }

  if (s.kind == SizeKind::kGpu) {
    RETURN_IF_ERROR(r.Forbid(item, "cpu_class", "cpu_class is for cpu sizes only"));
    ASSIGN_OR_RETURN(s.accelerator, r.RequiredString(item, "accelerator", what));
    ASSIGN_OR_RETURN(s.gpus, r.RequiredNumber(item, "gpus", what, Bound::kPositive));
  } else {
    RETURN_IF_ERROR(r.Forbid(item, "accelerator",
                             "a cpu size has no accelerator (use kind: gpu for a GPU size)"));
    ASSIGN_OR_RETURN(std::optional<double> gpus,
                     r.OptionalNumber(Key(item, "gpus"), Bound::kNonNegative));
    if (gpus.value_or(0) != 0) {
      return InvalidArgument(fmt::format("{}: a cpu size has no GPUs; remove it or use kind: gpu",
                                         r.Locate(Key(item, "gpus"))));
    }
    ASSIGN_OR_RETURN(std::string cls, r.RequiredString(item, "cpu_class", what));
    if (EqualsIgnoreCase(cls, "compute")) {
      s.cpu_class = CpuClass::kCompute;
    } else if (EqualsIgnoreCase(cls, "general")) {
      s.cpu_class = CpuClass::kGeneral;
    } else if (EqualsIgnoreCase(cls, "memory")) {
      s.cpu_class = CpuClass::kMemory;
    } else {
      return InvalidArgument(
          fmt::format("{}: cpu_class must be 'compute', 'general' or 'memory', got '{}'",
                      r.Locate(Key(item, "cpu_class")), cls));
    }
  }

  ASSIGN_OR_RETURN(std::optional<double> released,
                   r.OptionalNumber(Key(item, "released"), Bound::kNonNegative));
  if (released) {
    if (*released != std::floor(*released) || *released < 1990 || *released > 2100) {
      return InvalidArgument(fmt::format("{}: expected a year such as 2023 or 'unknown', got {}",
                                         r.Locate(Key(item, "released")), *released));
    }
    s.released = static_cast<int>(*released);
  }

  ASSIGN_OR_RETURN(double vcpus, r.RequiredNumber(item, "vcpus", what, Bound::kPositive));
  if (vcpus != std::floor(vcpus) || vcpus > 1e6) {
    return InvalidArgument(fmt::format("{}: expected a whole number of vCPUs, got {}",
                                       r.Locate(Key(item, "vcpus")), vcpus));
  }
  s.vcpus = static_cast<int>(vcpus);
  ASSIGN_OR_RETURN(s.ram_gib, r.RequiredNumber(item, "ram_gib", what, Bound::kPositive));
  ASSIGN_OR_RETURN(std::optional<double> nvme,
                   r.OptionalNumber(Key(item, "local_nvme_gib"), Bound::kNonNegative));
  s.local_nvme_gib = nvme.value_or(0);
  ASSIGN_OR_RETURN(s.nvlink, r.OptionalString(Key(item, "nvlink")));
  ASSIGN_OR_RETURN(std::optional<double> ib,
                   r.OptionalNumber(Key(item, "infiniband_gbps"), Bound::kNonNegative));
  s.infiniband_gbps = ib.value_or(0);

  std::string prices = Key(item, "prices");
  if (r.Has(prices)) {
    ASSIGN_OR_RETURN(std::vector<std::string> regions, cfg.Keys(prices));
    for (const std::string& region : regions) {
      std::string key = Key(prices, region);
      std::string lower = AsciiLower(TrimSpace(region));
      // Config keys are dotted paths, so a dot would make the region unreadable.
      if (lower.empty() || region.find('.') != std::string::npos) {
        return InvalidArgument(
            fmt::format("{}: '{}' is not a region name; use Azure's names such as 'eastus'",
                        r.Locate(prices), region));
      }
      if (s.prices.count(lower)) {
        return InvalidArgument(fmt::format(
            "{}: region '{}' is listed twice (region names are case-insensitive); keep one",
            r.Locate(key), region));
      }
      ASSIGN_OR_RETURN(Price p, ReadPrice(r, key));
      s.prices.emplace(lower, p);
    }
  }
  ASSIGN_OR_RETURN(s.source, r.RequiredString(item, "source", what));
  return s;
}

}  // namespace

std::string_view NumberFormatName(NumberFormat f) {
  switch (f) {
    case NumberFormat::kFp32:
      return "fp32";
    case NumberFormat::kBf16:
      return "bf16";
    case NumberFormat::kFp16:
      return "fp16";
    case NumberFormat::kFp8:
      return "fp8";
  }
  return "unknown";
}

std::string_view CpuClassName(CpuClass c) {
  switch (c) {
    case CpuClass::kNone:
      return "";
    case CpuClass::kCompute:
      return "compute";
    case CpuClass::kGeneral:
      return "general";
    case CpuClass::kMemory:
      return "memory";
  }
  return "";
}

std::optional<double> Accelerator::PeakTflops(NumberFormat format) const {
  switch (format) {
    case NumberFormat::kFp32:
      return fp32_tflops;
    case NumberFormat::kBf16:
      return bf16_tflops;
    case NumberFormat::kFp16:
      return fp16_tflops;
    case NumberFormat::kFp8:
      return fp8_tflops;
  }
  return std::nullopt;
}

std::string VmSize::Family() const {
  std::string_view rest = StripStandard(name);
  std::string out;
  for (char c : rest) {
    if (std::isdigit(static_cast<unsigned char>(c))) break;
    out.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  }
  return out;
}

Price VmSize::PriceIn(std::string_view region) const {
  auto it = prices.find(AsciiLower(TrimSpace(region)));
  return it == prices.end() ? Price{} : it->second;
}

Result<Catalog> Catalog::Default() {
  // Parsed once: the text is fixed at build time and a Catalog is cheap to copy.
  static const Result<Catalog> cached = []() -> Result<Catalog> {
    Result<Catalog> cat = LoadString(internal::kDefaultCatalogYaml, kBuiltinOrigin);
    if (cat.ok()) return cat;
    return Internal(fmt::format(
        "the built-in catalog does not load, a bug in this build of Gantry (pass --catalog "
        "to use a file instead): {}",
        cat.status().message()));
  }();
  return cached;
}

std::string_view DefaultCatalogText() { return internal::kDefaultCatalogYaml; }

Result<Catalog> Catalog::LoadFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return LoadString(text, path);
}

Result<Catalog> Catalog::LoadString(std::string_view yaml, std::string_view origin) {
  ASSIGN_OR_RETURN(Config cfg, Config::LoadString(yaml, origin));
  Reader r(cfg);
  RETURN_IF_ERROR(cfg.CheckKnownKeys("", kTopKeys));

  if (!cfg.Has("version")) {
    return InvalidArgument(fmt::format(
        "{}: missing required key 'version'; add 'version: 1' at the top level", origin));
  }
  ASSIGN_OR_RETURN(int64_t version, cfg.GetInt("version", 0));
  if (version != 1) {
    return InvalidArgument(
        fmt::format("{}: catalog format version {} is not supported; this Gantry reads version 1",
                    cfg.Locate("version"), version));
  }

  Catalog cat;
  cat.origin_ = std::string(origin);
  ASSIGN_OR_RETURN(std::string currency, r.OptionalString("currency"));
  if (!currency.empty()) cat.currency_ = currency;

  ASSIGN_OR_RETURN(size_t n_acc, cfg.ListSize("accelerators"));
  for (size_t i = 0; i < n_acc; ++i) {
    std::string item = fmt::format("accelerators.{}", i);
    ASSIGN_OR_RETURN(Accelerator a, ReadAccelerator(r, item));
    for (size_t j = 0; j < cat.accelerators_.size(); ++j) {
      if (EqualsIgnoreCase(cat.accelerators_[j].name, a.name)) {
        return InvalidArgument(fmt::format(
            "{}: accelerator '{}' is defined twice (first at {}); names are case-insensitive, "
            "keep one",
            r.Locate(Key(item, "name")), a.name, r.Locate(fmt::format("accelerators.{}.name", j))));
      }
    }
    cat.accelerators_.push_back(std::move(a));
  }

  ASSIGN_OR_RETURN(size_t n_sizes, cfg.ListSize("sizes"));
  if (n_sizes == 0) {
    return InvalidArgument(fmt::format(
        "{}: the catalog lists no sizes; add a 'sizes:' list (see data/advise/azure.yaml)",
        origin));
  }
  for (size_t i = 0; i < n_sizes; ++i) {
    std::string item = fmt::format("sizes.{}", i);
    ASSIGN_OR_RETURN(VmSize s, ReadSize(r, item));
    for (size_t j = 0; j < cat.sizes_.size(); ++j) {
      if (EqualsIgnoreCase(StripStandard(cat.sizes_[j].name), StripStandard(s.name))) {
        return InvalidArgument(fmt::format(
            "{}: size '{}' is listed twice (first at {}); size names are case-insensitive and "
            "the 'Standard_' prefix is optional, keep one",
            r.Locate(Key(item, "name")), s.name, r.Locate(fmt::format("sizes.{}.name", j))));
      }
    }
    if (s.kind == SizeKind::kGpu) {
      // Refer to the accelerator by its canonical spelling so AcceleratorOf()
      // can match exactly.
      const Accelerator* found = nullptr;
      for (const Accelerator& a : cat.accelerators_) {
        if (EqualsIgnoreCase(a.name, s.accelerator)) found = &a;
      }
      if (found == nullptr) {
        std::vector<std::string> names;
        for (const Accelerator& a : cat.accelerators_) names.push_back(a.name);
        return InvalidArgument(
            fmt::format("{}: accelerator '{}' is not defined in this catalog; define it under "
                        "'accelerators:' or use one of: {}",
                        r.Locate(Key(item, "accelerator")), s.accelerator,
                        names.empty() ? std::string("(none defined)")
                                      : fmt::format("{}", fmt::join(names, ", "))));
      }
      s.accelerator = found->name;
    }
    cat.sizes_.push_back(std::move(s));
  }
  return cat;
}

Result<int> Catalog::MergePriceSheet(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return MergePriceSheetString(text, path);
}

Result<int> Catalog::MergePriceSheetString(std::string_view csv, std::string_view origin) {
  struct Update {
    size_t size_index;
    std::string region;
    std::optional<double> values[6];  // in kPriceKeys order; nullopt = leave as is
  };
  const std::string header_hint = fmt::format("size,region,{}", fmt::join(kPriceKeys, ","));

  auto split = [](std::string_view line) {
    std::vector<std::string> cells;
    size_t start = 0;
    for (;;) {
      size_t comma = line.find(',', start);
      std::string_view cell = TrimSpace(line.substr(
          start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
      // Spreadsheets quote some cells; names and prices never contain commas.
      if (cell.size() >= 2 && cell.front() == '"' && cell.back() == '"') {
        cell = TrimSpace(cell.substr(1, cell.size() - 2));
      }
      cells.emplace_back(cell);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    return cells;
  };

  std::vector<int> columns;  // kPriceKeys index of each column after `region`
  bool have_header = false;
  std::vector<Update> updates;
  std::map<std::pair<size_t, std::string>, size_t> seen;  // (size, region) -> line
  size_t line_no = 0;
  size_t pos = 0;
  while (pos <= csv.size()) {
    size_t nl = csv.find('\n', pos);
    std::string_view line =
        csv.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? csv.size() + 1 : nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    // A UTF-8 byte order mark (Excel writes one) is not part of the first cell.
    if (line_no == 1 && line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);
    if (TrimSpace(line).empty() || TrimSpace(line).starts_with("#")) continue;
    std::vector<std::string> cells = split(line);
    std::string where = fmt::format("{}:{}", origin, line_no);

    if (!have_header) {
      if (cells.size() < 2 || !EqualsIgnoreCase(cells[0], "size") ||
          !EqualsIgnoreCase(cells[1], "region")) {
        return InvalidArgument(fmt::format(
            "{}: expected the header row '{}' (columns after 'region' may be left out), got "
            "'{}'",
            where, header_hint, TrimSpace(line)));
      }
      for (size_t c = 2; c < cells.size(); ++c) {
        std::string name = AsciiLower(cells[c]);
        auto it = std::find(kPriceKeys.begin(), kPriceKeys.end(), name);
        if (it == kPriceKeys.end()) {
          return InvalidArgument(fmt::format("{}: unknown column '{}'; price columns are: {}",
                                             where, cells[c], fmt::join(kPriceKeys, ", ")));
        }
        int index = static_cast<int>(it - kPriceKeys.begin());
        if (std::find(columns.begin(), columns.end(), index) != columns.end()) {
          return InvalidArgument(
              fmt::format("{}: column '{}' appears twice; keep one", where, cells[c]));
        }
        columns.push_back(index);
      }
      have_header = true;
      continue;
    }

    if (cells.size() != columns.size() + 2) {
      return InvalidArgument(fmt::format(
          "{}: {} cells, but the header has {} columns; write one cell per column (leave a "
          "cell empty for 'no change')",
          where, cells.size(), columns.size() + 2));
    }
    const VmSize* size = FindSize(cells[0]);
    if (size == nullptr) {
      std::string hint;
      size_t best = 4;  // suggest only close names
      for (const VmSize& s : sizes_) {
        size_t d =
            EditDistance(AsciiLower(StripStandard(cells[0])), AsciiLower(StripStandard(s.name)));
        if (d < best) {
          best = d;
          hint = fmt::format(" (did you mean '{}'?)", s.name);
        }
      }
      return InvalidArgument(
          fmt::format("{}: size '{}' is not in the catalog {}{}; fix the name or add the size to a "
                      "--catalog file",
                      where, cells[0], origin_, hint));
    }
    std::string region = AsciiLower(cells[1]);
    if (region.empty() || std::any_of(region.begin(), region.end(), [](char c) {
          return std::isspace(static_cast<unsigned char>(c));
        })) {
      return InvalidArgument(fmt::format(
          "{}: '{}' is not a region name; use Azure's names such as 'eastus'", where, cells[1]));
    }
    Update u;
    u.size_index = static_cast<size_t>(size - sizes_.data());
    u.region = region;
    for (size_t c = 0; c < columns.size(); ++c) {
      const std::string& cell = cells[c + 2];
      if (cell.empty() || EqualsIgnoreCase(cell, "unknown")) continue;
      double v = 0;
      if (!ParseNumber(cell, &v) || v < 0) {
        return InvalidArgument(fmt::format(
            "{}: column '{}': '{}' is not a price; write a non-negative number of {} per VM "
            "hour, 'unknown' or nothing",
            where, kPriceKeys[columns[c]], cell, currency_));
      }
      u.values[columns[c]] = v;
    }
    auto [it, inserted] = seen.emplace(std::make_pair(u.size_index, region), line_no);
    if (!inserted) {
      return InvalidArgument(
          fmt::format("{}: size '{}' in region '{}' was already given at line "
                      "{}; keep one row per size and region",
                      where, cells[0], region, it->second));
    }
    updates.push_back(std::move(u));
  }
  if (!have_header) {
    return InvalidArgument(
        fmt::format("{}: the price sheet is empty; its first line must be the header '{}'", origin,
                    header_hint));
  }

  // Applied only once every line has parsed, so a bad sheet changes nothing.
  int applied = 0;
  for (const Update& u : updates) {
    // A row of empty cells changes nothing and must not add an all-unknown region.
    if (std::none_of(std::begin(u.values), std::end(u.values),
                     [](const std::optional<double>& v) { return v.has_value(); })) {
      continue;
    }
    Price& p = sizes_[u.size_index].prices[u.region];
    std::optional<double>* fields[] = {&p.payg,        &p.spot,       &p.reserved_1y,
                                       &p.reserved_3y, &p.savings_1y, &p.savings_3y};
    for (size_t k = 0; k < kPriceKeys.size(); ++k) {
      if (u.values[k]) *fields[k] = u.values[k];
    }
    ++applied;
  }
  return applied;
}

const VmSize* Catalog::FindSize(std::string_view name) const {
  std::string_view want = StripStandard(TrimSpace(name));
  if (want.empty()) return nullptr;
  for (const VmSize& s : sizes_) {
    if (EqualsIgnoreCase(StripStandard(s.name), want)) return &s;
  }
  return nullptr;
}

const Accelerator* Catalog::AcceleratorOf(const VmSize& size) const {
  if (size.kind != SizeKind::kGpu) return nullptr;
  for (const Accelerator& a : accelerators_) {
    if (a.name == size.accelerator) return &a;
  }
  return nullptr;
}

std::vector<std::string> Catalog::Regions() const {
  std::set<std::string> out;
  for (const VmSize& s : sizes_) {
    for (const auto& [region, p] : s.prices) {
      if (p.payg || p.spot || p.reserved_1y || p.reserved_3y || p.savings_1y || p.savings_3y) {
        out.insert(region);
      }
    }
  }
  return {out.begin(), out.end()};
}

}  // namespace gantry::advise
