// The VM catalog `gantry advise` chooses from: Azure sizes, their accelerators
// and their prices, read from an editable YAML file. Gantry ships one
// (data/advise/azure.yaml, compiled into the binary as the default); users
// point to their own with --catalog and overlay prices with --prices.
//
//   ASSIGN_OR_RETURN(Catalog cat, Catalog::Default());
//   RETURN_IF_ERROR(cat.MergePriceSheet("prices.csv"));
//   const VmSize* nd = cat.FindSize("standard_nd96isr_h100_v5");  // case-insensitive
//   const Accelerator* gpu = cat.AcceleratorOf(*nd);
//
// Every number a row does not know is std::nullopt ("unknown" in the file):
// Gantry never invents a price or a peak. Loading refuses negative numbers,
// missing required fields, unknown keys, duplicate names and sizes that name
// an accelerator the file does not define, with "file:line:col: key ..." errors.
//
// File format (version 1):
//
//   version: 1
//   currency: USD                     # prices are per VM and hour, Linux
//   accelerators:
//     - name: H100-SXM-80GB            # unique; sizes refer to it
//       memory_gib: 80                 # required, > 0
//       hbm_tbps: 3.35                 # memory bandwidth, TB/s (or unknown)
//       peak_tflops: {bf16: 989.4, fp16: 989.4, fp32: 66.9, fp8: 1978.9}  # dense; each may be unknown/absent
//       default_mfu: 0.40              # required, in (0, 1]: used when no measurement is given
//       source: "NVIDIA H100 datasheet" # required: where the numbers come from
//   sizes:
//     - name: Standard_ND96isr_H100_v5 # unique (case-insensitive)
//       series: ND H100 v5             # required
//       kind: gpu                      # gpu | cpu
//       cpu_class: compute             # cpu sizes only: compute | general | memory
//       released: 2023                 # year the series became available (newest first)
//       accelerator: H100-SXM-80GB     # gpu sizes only
//       gpus: 8                        # gpu sizes: > 0 (NV A10 v5 partitions are their own accelerators with gpus: 1)
//       vcpus: 96                      # required, >= 1
//       ram_gib: 1900                  # required, > 0
//       local_nvme_gib: 28672          # 0 = none
//       nvlink: "NVLink 4.0"           # "" or absent = none
//       infiniband_gbps: 3200          # per VM; 0 or absent = no InfiniBand (no RDMA)
//       prices:                        # region -> price per VM hour; absent region = unknown
//         eastus: {payg: 98.32, spot: unknown, reserved_1y: unknown, reserved_3y: unknown,
//                  savings_1y: unknown, savings_3y: unknown}
//       source: "azure-compute-docs ...; price: skypilot-catalog v6 eastus"   # required
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::advise {

// Number formats an accelerator's peak is quoted for.
enum class NumberFormat { kFp32, kBf16, kFp16, kFp8 };
std::string_view NumberFormatName(NumberFormat f);  // "fp32", "bf16", "fp16", "fp8"

struct Accelerator {
  std::string name;
  double memory_gib = 0;
  std::optional<double> hbm_tbps;
  std::optional<double> bf16_tflops;
  std::optional<double> fp16_tflops;
  std::optional<double> fp32_tflops;
  std::optional<double> fp8_tflops;
  double default_mfu = 0;
  std::string source;

  // Dense peak for `format`, nullopt when unknown.
  std::optional<double> PeakTflops(NumberFormat format) const;
};

// Prices of one size in one region, USD per VM hour; nullopt = unknown.
struct Price {
  std::optional<double> payg;
  std::optional<double> spot;
  std::optional<double> reserved_1y;  // effective hourly rate of a 1-year reservation
  std::optional<double> reserved_3y;
  std::optional<double> savings_1y;   // hourly rate under a 1-year savings plan
  std::optional<double> savings_3y;
};

enum class SizeKind { kGpu, kCpu };
enum class CpuClass { kNone, kCompute, kGeneral, kMemory };  // kNone for GPU sizes
std::string_view CpuClassName(CpuClass c);                    // "", "compute", "general", "memory"

struct VmSize {
  std::string name;    // as written in the file, e.g. "Standard_ND96isr_H100_v5"
  std::string series;  // "ND H100 v5"
  SizeKind kind = SizeKind::kCpu;
  CpuClass cpu_class = CpuClass::kNone;
  int released = 0;           // year; 0 = unknown
  std::string accelerator;    // Accelerator::name for GPU sizes, "" for CPU sizes
  double gpus = 0;            // 0 for CPU sizes; fractional for partitioned GPUs
  int vcpus = 0;
  double ram_gib = 0;
  double local_nvme_gib = 0;
  std::string nvlink;         // "" = none
  double infiniband_gbps = 0; // per VM; 0 = none
  std::map<std::string, Price> prices;  // region (lower case) -> price
  std::string source;

  bool rdma() const { return infiniband_gbps > 0; }
  // "ND" for ND-series sizes (Standard_ND…), "NC", "NV", or the CPU family
  // letter(s) ("F", "D", "E", "M"): the part of the name after "Standard_" up to
  // the first digit, upper-cased.
  std::string Family() const;
  // The price in `region` (case-insensitive), or an all-unknown Price.
  Price PriceIn(std::string_view region) const;
};

class Catalog {
 public:
  // The catalog compiled into Gantry (data/advise/azure.yaml at build time).
  static Result<Catalog> Default();
  static Result<Catalog> LoadFile(const std::string& path);
  // `origin` names the text in messages.
  static Result<Catalog> LoadString(std::string_view yaml, std::string_view origin);

  // Overlays prices from a CSV price sheet with the header
  //   size,region,payg,spot,reserved_1y,reserved_3y,savings_1y,savings_3y
  // (columns after `region` may be omitted from the header; empty cells and
  // "unknown" leave the catalog's value). A size the catalog does not have, a
  // negative or non-numeric price, or a malformed line is an error naming
  // "file:line". Returns the number of rows applied.
  Result<int> MergePriceSheet(const std::string& path);
  Result<int> MergePriceSheetString(std::string_view csv, std::string_view origin);

  const std::vector<VmSize>& sizes() const { return sizes_; }
  const std::vector<Accelerator>& accelerators() const { return accelerators_; }
  const std::string& currency() const { return currency_; }
  const std::string& origin() const { return origin_; }

  // Case-insensitive; with or without the "Standard_" prefix. nullptr if absent.
  const VmSize* FindSize(std::string_view name) const;
  // nullptr for CPU sizes.
  const Accelerator* AcceleratorOf(const VmSize& size) const;
  // Regions that have at least one price, sorted.
  std::vector<std::string> Regions() const;

 private:
  std::vector<VmSize> sizes_;
  std::vector<Accelerator> accelerators_;
  std::string currency_ = "USD";
  std::string origin_;
};

// The YAML text of the compiled-in catalog (for `gantry advise catalog --dump`).
std::string_view DefaultCatalogText();

}  // namespace gantry::advise
