// Reference profiles: computed once from the reference table, saved as one
// file, loaded by `gantry drift compare` without re-reading the reference.
//
// File layout (version 1, little-endian):
//   8 bytes   magic "GDPROF1\n"
//   8 bytes   uint64 length H of the JSON header
//   H bytes   JSON header (columns, counts, dictionaries, array lengths)
//   N*8 bytes float64 arrays: each numerical column's sorted values, in column order
//   8 bytes   uint64 checksum of everything before it
// Loading checks the magic, the version, every size against the file length
// and the checksum, so a truncated or altered file is a DataLoss error naming
// the file, never a crash or silently wrong numbers.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <thread>

#include "gantry/core/json.h"
#include "gantry/drift/drift.h"
#include "names.h"

#include "stats_internal.h"

namespace gantry::drift {
namespace {

static_assert(std::endian::native == std::endian::little, "profile files are little-endian");

constexpr char kMagic[8] = {'G', 'D', 'P', 'R', 'O', 'F', '1', '\n'};
constexpr int kVersion = 1;

// A fast 64-bit checksum (8 bytes per step, multiply-xorshift mixing); it
// detects corruption, it is not a cryptographic signature.
uint64_t Checksum(std::string_view data) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ data.size();
  size_t i = 0;
  for (; i + 8 <= data.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, data.data() + i, 8);
    h = (h ^ w) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  for (; i < data.size(); ++i) {
    h = (h ^ static_cast<unsigned char>(data[i])) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
  }
  return h;
}

std::string_view KindName(ColumnKind k) {
  return k == ColumnKind::kNumerical ? "numerical" : "categorical";
}
std::string_view RoleName(Role r) {
  switch (r) {
    case Role::kFeature:
      return "feature";
    case Role::kTarget:
      return "target";
    case Role::kPrediction:
      return "prediction";
    case Role::kScore:
      return "score";
    case Role::kIgnore:
      return "ignore";
  }
  return "feature";
}
std::optional<Role> RoleFromName(std::string_view s) {
  for (Role r : {Role::kFeature, Role::kTarget, Role::kPrediction, Role::kScore, Role::kIgnore}) {
    if (RoleName(r) == s) return r;
  }
  return std::nullopt;
}

Profile::ColumnProfile BuildColumn(const Column& col, uint64_t rows, const ProfileOptions& o) {
  Profile::ColumnProfile cp;
  cp.spec = col.spec;
  cp.rows = rows;
  cp.nulls = col.nulls;
  if (col.spec.kind == ColumnKind::kNumerical) {
    std::vector<double> v;
    v.reserve(col.numbers.size());
    for (double x : col.numbers) {
      if (!std::isnan(x)) v.push_back(x);
    }
    cp.nulls = rows - v.size();
    internal::SortDoubles(v);  // radix sort (stats_ks.cc)
    auto& n = cp.numerical;
    if (!v.empty()) {
      n.min = v.front();
      n.max = v.back();
      // np.mean/np.std (ddof = 0) in numpy's order, so the normed Wasserstein
      // of a comparison equals scipy's / Evidently's bit for bit.
      internal::MeanStdOf(v, &n.mean, &n.std);
      cp.n_unique = 1;
      for (size_t i = 1; i < v.size(); ++i) cp.n_unique += v[i] != v[i - 1];
    }
    if (v.size() > o.max_exact_rows && o.sketch_points >= 2) {
      // Quantile sketch: evenly spaced order statistics including min and max.
      std::vector<double> s(o.sketch_points);
      for (int i = 0; i < o.sketch_points; ++i) {
        size_t idx = static_cast<size_t>(
            std::llround(static_cast<double>(i) * (v.size() - 1) / (o.sketch_points - 1)));
        s[i] = v[idx];
      }
      n.sorted = std::move(s);
      n.exact = false;
    } else {
      n.sorted = std::move(v);
    }
  } else {
    auto& c = cp.categorical;
    c.dictionary = col.dictionary;
    c.counts.assign(col.dictionary.size(), 0);
    uint64_t nulls = 0;
    for (int32_t code : col.codes) {
      if (code < 0 || static_cast<size_t>(code) >= c.counts.size())
        ++nulls;
      else
        ++c.counts[code];
    }
    cp.nulls = nulls;
    for (uint64_t k : c.counts) cp.n_unique += k > 0;
  }
  return cp;
}

}  // namespace

uint64_t Profile::rows() const {
  auto it = header_.find("rows");
  return it != header_.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
}

Result<Profile> Profile::Build(const Table& reference, const ProfileOptions& options) {
  if (reference.rows == 0) {
    return InvalidArgument("reference: the table has no rows; a profile needs reference data");
  }
  Profile p;
  p.columns_.resize(reference.columns.size());
  // Sorting dominates; one thread per column (bounded by the cores).
  const size_t n = reference.columns.size();
  const size_t threads = std::min<size_t>(n, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < n;) {
      p.columns_[i] = BuildColumn(reference.columns[i], reference.rows, options);
    }
  };
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();

  p.task_ = reference.task;
  p.drift_share_ = reference.drift_share;
  p.header_ = Json::object();
  p.header_["format"] = "gantry.drift.profile";
  p.header_["version"] = kVersion;
  p.header_["rows"] = reference.rows;
  p.header_["drift_share"] = p.drift_share_;
  p.header_["task"] = p.task_;
  Json cols = Json::array();
  for (const ColumnProfile& c : p.columns_) {
    Json j;
    j["name"] = c.spec.name;
    j["kind"] = KindName(c.spec.kind);
    j["role"] = RoleName(c.spec.role);
    j["test"] = c.spec.test ? Json(StatTestName(*c.spec.test)) : Json(nullptr);
    j["threshold"] = c.spec.threshold ? Json(*c.spec.threshold) : Json(nullptr);
    j["binning"] = BinningName(c.spec.binning);
    j["bins"] = c.spec.bins;
    j["rows"] = c.rows;
    j["nulls"] = c.nulls;
    j["n_unique"] = c.n_unique;
    if (c.spec.kind == ColumnKind::kNumerical) {
      j["min"] = c.numerical.min;
      j["max"] = c.numerical.max;
      j["mean"] = c.numerical.mean;
      j["std"] = c.numerical.std;
      j["exact"] = c.numerical.exact;
      j["values"] = c.numerical.sorted.size();
    } else {
      j["dictionary"] = c.categorical.dictionary;
      j["counts"] = c.categorical.counts;
    }
    cols.push_back(std::move(j));
  }
  p.header_["columns"] = std::move(cols);
  return p;
}

Status Profile::Save(const std::string& path) const {
  std::string out(kMagic, 8);
  std::string header = header_.dump();
  uint64_t h = header.size();
  out.append(reinterpret_cast<const char*>(&h), 8);
  out += header;
  for (const ColumnProfile& c : columns_) {
    if (c.spec.kind != ColumnKind::kNumerical) continue;
    out.append(reinterpret_cast<const char*>(c.numerical.sorted.data()),
               c.numerical.sorted.size() * sizeof(double));
  }
  uint64_t sum = Checksum(out);
  out.append(reinterpret_cast<const char*>(&sum), 8);
  Status s = WriteFileAtomic(path, out);
  if (!s.ok()) return s.WithContext("saving the profile");
  return Status::Ok();
}

Result<Profile> Profile::Load(const std::string& path) {
  ASSIGN_OR_RETURN(std::string data, ReadFile(path));
  auto corrupt = [&](std::string_view what) {
    return DataLoss(
        fmt::format("{}: not a valid gantry drift profile ({}); rebuild it with "
                    "`gantry drift profile`",
                    path, what));
  };
  if (data.size() < 24 || std::memcmp(data.data(), kMagic, 6) != 0) {
    return corrupt("bad magic or too short");
  }
  if (data[6] != kMagic[6]) {
    return DataLoss(
        fmt::format("{}: profile format '{}' is not supported by this gantry (it "
                    "reads version {}); rebuild the profile",
                    path, data[6], kVersion));
  }
  uint64_t stored;
  std::memcpy(&stored, data.data() + data.size() - 8, 8);
  std::string_view body(data.data(), data.size() - 8);
  if (Checksum(body) != stored)
    return corrupt("checksum mismatch: the file is truncated or altered");
  uint64_t hlen;
  std::memcpy(&hlen, data.data() + 8, 8);
  if (hlen > body.size() - 16) return corrupt("header length beyond the end of the file");
  Json header = Json::parse(body.substr(16, hlen), nullptr, false);
  if (header.is_discarded() || !header.is_object()) return corrupt("header is not JSON");
  Profile p;
  size_t offset = 16 + hlen;
  try {
    if (header.value("format", "") != "gantry.drift.profile") return corrupt("wrong format name");
    int version = header.at("version").get<int>();
    if (version != kVersion) {
      return DataLoss(
          fmt::format("{}: profile version {} is not supported (this gantry reads "
                      "version {}); rebuild the profile",
                      path, version, kVersion));
    }
    p.drift_share_ = header.at("drift_share").get<double>();
    p.task_ = header.at("task").get<std::string>();
    const uint64_t rows = header.at("rows").get<uint64_t>();
    for (const Json& j : header.at("columns")) {
      ColumnProfile c;
      c.spec.name = j.at("name").get<std::string>();
      std::string kind = j.at("kind").get<std::string>();
      if (kind != "numerical" && kind != "categorical") return corrupt("unknown column kind");
      c.spec.kind = kind == "numerical" ? ColumnKind::kNumerical : ColumnKind::kCategorical;
      auto role = RoleFromName(j.at("role").get<std::string>());
      if (!role) return corrupt("unknown role");
      c.spec.role = *role;
      if (!j.at("test").is_null()) {
        auto t = internal::TestFromName(j.at("test").get<std::string>());
        if (!t) return corrupt("unknown test name");
        c.spec.test = *t;
      }
      if (!j.at("threshold").is_null()) c.spec.threshold = j.at("threshold").get<double>();
      auto b = internal::BinningFromName(j.at("binning").get<std::string>());
      if (!b) return corrupt("unknown binning");
      c.spec.binning = *b;
      c.spec.bins = j.at("bins").get<int>();
      c.rows = j.at("rows").get<uint64_t>();
      c.nulls = j.at("nulls").get<uint64_t>();
      c.n_unique = j.at("n_unique").get<uint64_t>();
      if (c.rows != rows || c.nulls > rows) return corrupt("inconsistent row counts");
      if (c.spec.kind == ColumnKind::kNumerical) {
        auto& n = c.numerical;
        n.min = j.at("min").get<double>();
        n.max = j.at("max").get<double>();
        n.mean = j.at("mean").get<double>();
        n.std = j.at("std").get<double>();
        n.exact = j.at("exact").get<bool>();
        uint64_t values = j.at("values").get<uint64_t>();
        if (values > (body.size() - offset) / 8) return corrupt("value array beyond the end");
        if (n.exact && values != rows - c.nulls) return corrupt("value count does not match rows");
        n.sorted.resize(values);
        std::memcpy(n.sorted.data(), body.data() + offset, values * 8);
        offset += values * 8;
        if (!std::is_sorted(n.sorted.begin(), n.sorted.end())) return corrupt("values not sorted");
      } else {
        auto& cat = c.categorical;
        cat.dictionary = j.at("dictionary").get<std::vector<std::string>>();
        cat.counts = j.at("counts").get<std::vector<uint64_t>>();
        if (cat.counts.size() != cat.dictionary.size())
          return corrupt("dictionary/count sizes differ");
        uint64_t total = 0;
        for (uint64_t k : cat.counts) total += k;
        if (total + c.nulls != rows) return corrupt("category counts do not add up to rows");
      }
      p.columns_.push_back(std::move(c));
    }
  } catch (const Json::exception& e) {
    return corrupt(fmt::format("header field missing or of the wrong type: {}", e.what()));
  }
  if (offset != body.size()) return corrupt("trailing bytes after the value arrays");
  p.header_ = std::move(header);
  return p;
}

}  // namespace gantry::drift
