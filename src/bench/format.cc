#include "format.h"

#include <charconv>
#include <cstdarg>
#include <cstdio>
#include <ctime>

#include "gantry/comm/types.h"
#include "gantry/config.h"

namespace gantry::bench::internal {
namespace {

// printf into a std::string. The layout is defined by nccl-tests' printf
// formats, so we keep printf here rather than translating every format.
[[gnu::format(printf, 1, 2)]] std::string Sprintf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string out(n > 0 ? n : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, format, args);
  va_end(args);
  return out;
}

std::string OpName(const Row& row) {
  return row.op ? std::string(comm::ReduceOpName(*row.op)) : std::string("none");
}

std::string Shortest(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::string("nan");
}

std::string CsvField(std::string_view s) {
  if (s.find_first_of(",\"\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

std::string FormatFloat(double value, int width) {
  for (const char* format : {"%*.2f", "%*.1f", "%*.0f"}) {
    std::string s = Sprintf(format, width, value);
    if (static_cast<int>(s.size()) <= width) return s;
  }
  return Sprintf(width >= 7 ? "%*.1e" : "%*.0e", width, value);
}

std::string DeviceLine(int rank, int pid, std::string_view host, int device,
                       std::string_view description) {
  std::string desc(description);
  if (!desc.starts_with("[")) desc = "[host] " + desc;
  return Sprintf("#  Rank %2d Group %2d Pid %6d on %10s device %2d %s", rank, 0, pid,
                 std::string(host).c_str(), device, desc.c_str());
}

std::string PreambleText(const Report& report) {
  const BenchOptions& o = report.options;
  std::string s =
      Sprintf("# gantry version %s backend %s nranks %d (nccl-tests 2.19 output format)\n",
              GANTRY_VERSION, report.backend.c_str(), report.nranks);
  s += Sprintf("# Collective test starting: %s\n", o.program.c_str());
  const bool factor = o.step_factor > 1;
  s += Sprintf(
      "# nThread %d nGpus %d minBytes %llu maxBytes %llu step: %llu(%s) warmup iters: %d iters: %d "
      "agg iters: %d validation: %d graph: %d unalign: %d\n",
      1, 1, static_cast<unsigned long long>(o.min_bytes),
      static_cast<unsigned long long>(o.max_bytes),
      static_cast<unsigned long long>(factor ? o.step_factor : o.step_bytes),
      factor ? "factor" : "bytes", o.warmup_iters, o.iters, 1, o.check_iters, 0, 0);
  switch (o.blocking) {
    case 1:
      s += "# Blocking Enabled: wait and barrier after each inner iteration (-m) \n";
      break;
    case 2:
      s += "# Blocking Enabled: wait after each inner iteration (-m), no barrier \n";
      break;
    case 3:
      s += "# Blocking Enabled: wait and barrier after each outer iteration (-n); "
           "time excludes barrier \n";
      break;
    default:
      break;
  }
  s += "#\n# Using devices\n";
  for (const std::string& line : report.devices) s += line + "\n";
  return s;
}

std::string ReducedMaxText(uint64_t max_bytes) {
  return Sprintf("#\n# Reducing maxBytes to %llu due to memory limitation\n",
                 static_cast<unsigned long long>(max_bytes));
}

std::string TableHeaderText(const BenchOptions& o) {
  const char* ts_label = o.timestamps ? "timestamp" : "";
  const int ts_pad = o.timestamps ? 19 : 0;
  const char* ts_format = o.timestamps ? "%Y-%m-%d %H:%M:%S" : "";
  const char* time = o.report_cputime ? "cputime" : "time";
  std::string s = "#\n";
  s += Sprintf(
      "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
      "\n",
      "", "", "", "", "");
  s += Sprintf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size",
               "count", "type", "redop", "root", time, "algbw", "busbw", "#wrong", time, "algbw",
               "busbw", "#wrong", ts_pad, ts_label);
  s += Sprintf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)",
               "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
               "", ts_pad, ts_format);
  return s;
}

std::string RowText(const Row& row) {
  std::string root = Sprintf("%6i", row.root);
  std::string s =
      Sprintf("%12lli  %12lli  %8s  %6s  %6s", static_cast<long long>(row.size_bytes),
              static_cast<long long>(row.count), std::string(comm::DataTypeName(row.type)).c_str(),
              OpName(row).c_str(), root.c_str());
  for (const Measurement* m : {&row.out_of_place, &row.in_place}) {
    std::string time = FormatFloat(m->time_us, 7);
    std::string alg = FormatFloat(m->algbw_gbs, 6);
    std::string bus = FormatFloat(m->busbw_gbs, 6);
    if (m->wrong >= 0) {
      s += Sprintf("  %7s  %6s  %6s  %6g", time.c_str(), alg.c_str(), bus.c_str(),
                   static_cast<double>(m->wrong));
    } else {
      s += Sprintf("  %7s  %6s  %6s    N/A", time.c_str(), alg.c_str(), bus.c_str());
    }
  }
  if (!row.timestamp.empty()) s += Sprintf("%21s", row.timestamp.c_str());
  return s + "\n";
}

std::string FooterText(const Report& report) {
  std::string s =
      Sprintf("# %-20s : %lld %s\n", "Out of bounds values",
              static_cast<long long>(report.out_of_bounds), report.out_of_bounds ? "FAILED" : "OK");
  s += Sprintf("# %-20s : %g %s\n", "Avg bus bandwidth", report.avg_busbw_gbs, "");
  s += Sprintf("# %-20s : %g %s\n", "Peak bus bandwidth", report.peak_busbw_gbs, "");
  s += "#\n";
  s += Sprintf("# Collective test concluded: %s\n", report.options.program.c_str());
  s += "#\n\n";
  return s;
}

std::string CsvText(const Report& report) {
  std::string s =
      "collective,backend,nranks,size,count,type,redop,root,placement,time_us,algbw_gbs,busbw_gbs,"
      "wrong,timestamp\n";
  for (const Row& row : report.rows) {
    for (auto [placement, m] :
         {std::pair{"out_of_place", &row.out_of_place}, std::pair{"in_place", &row.in_place}}) {
      s += CsvField(report.collective) + "," + CsvField(report.backend) + "," +
           std::to_string(report.nranks) + "," + std::to_string(row.size_bytes) + "," +
           std::to_string(row.count) + "," + std::string(comm::DataTypeName(row.type)) + "," +
           OpName(row) + "," + std::to_string(row.root) + "," + placement + "," +
           Shortest(m->time_us) + "," + Shortest(m->algbw_gbs) + "," + Shortest(m->busbw_gbs) +
           "," + (m->wrong >= 0 ? std::to_string(m->wrong) : std::string()) + "," +
           CsvField(row.timestamp) + "\n";
    }
  }
  return s;
}

std::string NowString() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

}  // namespace gantry::bench::internal
