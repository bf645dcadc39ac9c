// nccl-tests' text layout (src/util.cu of nccl-tests 2.19), reproduced byte for
// byte so that scripts written for nccl-tests parse `gantry bench` output, plus
// the CSV export (internal to src/bench). Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "gantry/bench/collectives.h"

namespace gantry::bench::internal {

// The first of "%*.2f", "%*.1f", "%*.0f" that fits in `width` characters, else
// "%*.1e" (width >= 7) or "%*.0e" (nccl-tests' getFloatStr).
std::string FormatFloat(double value, int width);

// "#  Rank %2d Group %2d Pid %6d on %10s device %2d [<bus>] <name>" (no newline).
// A description that does not start with "[" (CPU ranks) gets "[host] ".
std::string DeviceLine(int rank, int pid, std::string_view host, int device,
                       std::string_view description);

// From the version line through the "# Using devices" block.
std::string PreambleText(const Report& report);
// "#\n# Reducing maxBytes to N due to memory limitation\n".
std::string ReducedMaxText(uint64_t max_bytes);
// "#" and the three column-header lines (with the timestamp column for -S).
std::string TableHeaderText(const BenchOptions& options);
// One result line, with '\n'. Measurement::wrong < 0 prints "N/A".
std::string RowText(const Row& row);
// "# Out of bounds values", "# Avg bus bandwidth", "# Peak bus bandwidth" and the
// closing lines.
std::string FooterText(const Report& report);

// "collective,backend,nranks,size,count,type,redop,root,placement,time_us,
// algbw_gbs,busbw_gbs,wrong,timestamp" and one line per row and placement
// ("out_of_place", "in_place"); wrong is empty when not checked.
std::string CsvText(const Report& report);

// "%Y-%m-%d %H:%M:%S" in local time, as nccl-tests' -S and JSON timestamps.
std::string NowString();

}  // namespace gantry::bench::internal
