#include "format.h"

#include <gtest/gtest.h>

#include <string>

#include "gantry/bench/collectives.h"
#include "gantry/config.h"

namespace gantry::bench::internal {
namespace {

using comm::DataType;
using comm::ReduceOp;

TEST(BenchFormat, FloatTakesTheFirstFormatThatFits) {
  EXPECT_EQ(FormatFloat(12.9, 7), "  12.90");
  EXPECT_EQ(FormatFloat(0.0, 6), "  0.00");
  EXPECT_EQ(FormatFloat(0.004, 6), "  0.00");
  EXPECT_EQ(FormatFloat(999.994, 6), "999.99");
  EXPECT_EQ(FormatFloat(1234.5, 6), "1234.5");   // %.2f would need 7
  EXPECT_EQ(FormatFloat(99999.4, 6), " 99999");  // %.1f would need 7
  EXPECT_EQ(FormatFloat(123456.0, 6), "123456");
  EXPECT_EQ(FormatFloat(1234567.0, 6), " 1e+06");  // width 6: %.0e
  EXPECT_EQ(FormatFloat(9999.994, 7), "9999.99");
  EXPECT_EQ(FormatFloat(12345.67, 7), "12345.7");
  EXPECT_EQ(FormatFloat(1234567.0, 7), "1234567");
  EXPECT_EQ(FormatFloat(12345678.0, 7), "1.2e+07");  // width 7: %.1e
}

TEST(BenchFormat, DeviceLines) {
  EXPECT_EQ(
      DeviceLine(0, 4242, "node0", 0, "[0000:18:00] NVIDIA H100 80GB HBM3"),
      "#  Rank  0 Group  0 Pid   4242 on      node0 device  0 [0000:18:00] NVIDIA H100 80GB HBM3");
  EXPECT_EQ(DeviceLine(12, 7, "a-long-hostname", 3, "cpu 0-1 numa 0"),
            "#  Rank 12 Group  0 Pid      7 on a-long-hostname device  3 [host] cpu 0-1 numa 0");
}

Row SampleRow() {
  Row row;
  row.size_bytes = 8;
  row.count = 2;
  row.type = DataType::kFloat;
  row.op = ReduceOp::kSum;
  row.root = -1;
  row.out_of_place = {12.90, 0.00062, 0.00062, 0};
  row.in_place = {12.87, 0.00062, 0.00062, 0};
  return row;
}

// The rows below are laid out exactly as nccl-tests 2.19 prints them.
TEST(BenchFormat, RowMatchesNcclTests) {
  EXPECT_EQ(RowText(SampleRow()),
            "           8             2     float     sum      -1    12.90    0.00    0.00       0"
            "    12.87    0.00    0.00       0\n");

  Row big;
  big.size_bytes = 8589934592;
  big.count = 2147483648;
  big.type = DataType::kBfloat16;
  big.root = 3;
  big.out_of_place = {123456.7, 69.58, 1234.5, 1234567};
  big.in_place = {12345678.9, 0.7, 130.25, 12};
  EXPECT_EQ(
      RowText(big),
      "  8589934592    2147483648  bfloat16    none       3   123457   69.58  1234.5  1.23457e+06"
      "  1.2e+07    0.70  130.25      12\n");

  Row unchecked = SampleRow();
  unchecked.out_of_place.wrong = -1;
  unchecked.in_place.wrong = -1;
  unchecked.timestamp = "2026-07-09 12:34:56";
  EXPECT_EQ(RowText(unchecked),
            "           8             2     float     sum      -1    12.90    0.00    0.00    N/A"
            "    12.87    0.00    0.00    N/A  2026-07-09 12:34:56\n");
}

TEST(BenchFormat, TableHeaderMatchesNcclTests) {
  BenchOptions o;
  EXPECT_EQ(TableHeaderText(o),
            "#\n"
            "#                                                              out-of-place           "
            "            in-place          \n"
            "#       size         count      type   redop    root     time   algbw   busbw  #wrong "
            "    time   algbw   busbw  #wrong \n"
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)         "
            "    (us)  (GB/s)  (GB/s)         \n");
  o.timestamps = true;
  o.report_cputime = true;
  EXPECT_EQ(TableHeaderText(o),
            "#\n"
            "#                                                              out-of-place           "
            "            in-place          \n"
            "#       size         count      type   redop    root  cputime   algbw   busbw  #wrong "
            " cputime   algbw   busbw  #wrong           timestamp\n"
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)         "
            "    (us)  (GB/s)  (GB/s)           %Y-%m-%d %H:%M:%S\n");
}

Report SampleReport() {
  Report r;
  r.collective = "all_reduce";
  r.backend = "shm";
  r.nranks = 2;
  r.options.min_bytes = 8;
  r.options.max_bytes = 134217728;
  r.options.step_factor = 2;
  r.options.program = "all_reduce_perf";
  r.options.args = {"all_reduce_perf", "-b", "8", "-e", "128M", "-f", "2"};
  r.options.types = {DataType::kFloat, DataType::kHalf};
  r.options.ops = {ReduceOp::kSum, ReduceOp::kAvg};
  r.devices = {DeviceLine(0, 10, "node0", 0, "cpu 0 numa 0"),
               DeviceLine(1, 11, "node0", 1, "[0000:18:00] NVIDIA H100 80GB HBM3")};
  r.rows = {SampleRow()};
  Row second = SampleRow();
  second.op.reset();
  second.root = 1;
  second.in_place.wrong = -1;
  second.timestamp = "2026-01-02 03:04:05";
  r.rows.push_back(second);
  r.start_time = "2026-01-02 03:04:00";
  r.end_time = "2026-01-02 03:04:09";
  r.out_of_bounds = 0;
  r.avg_busbw_gbs = 106.555;
  r.peak_busbw_gbs = 200.5;
  return r;
}

TEST(BenchFormat, PreambleAndFooterMatchNcclTests) {
  Report r = SampleReport();
  std::string pre = PreambleText(r);
  EXPECT_EQ(
      pre,
      "# gantry version " GANTRY_VERSION
      " backend shm nranks 2 (nccl-tests 2.19 output format)\n"
      "# Collective test starting: all_reduce_perf\n"
      "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 1 iters: "
      "20 agg iters: 1 validation: 1 graph: 0 unalign: 0\n"
      "#\n"
      "# Using devices\n"
      "#  Rank  0 Group  0 Pid     10 on      node0 device  0 [host] cpu 0 numa 0\n"
      "#  Rank  1 Group  0 Pid     11 on      node0 device  1 [0000:18:00] NVIDIA H100 80GB "
      "HBM3\n");
  r.options.blocking = 1;
  r.options.step_factor = 1;
  r.options.step_bytes = 1048576;
  EXPECT_NE(PreambleText(r).find("step: 1048576(bytes)"), std::string::npos);
  EXPECT_NE(PreambleText(r).find(
                "\n# Blocking Enabled: wait and barrier after each inner iteration (-m) \n#\n"),
            std::string::npos);
  EXPECT_EQ(ReducedMaxText(1000), "#\n# Reducing maxBytes to 1000 due to memory limitation\n");

  EXPECT_EQ(FooterText(r),
            "# Out of bounds values : 0 OK\n"
            "# Avg bus bandwidth    : 106.555 \n"
            "# Peak bus bandwidth   : 200.5 \n"
            "#\n"
            "# Collective test concluded: all_reduce_perf\n"
            "#\n"
            "\n");
  r.out_of_bounds = 3;
  EXPECT_EQ(FooterText(r).substr(0, 35), "# Out of bounds values : 3 FAILED\n#");
}

TEST(BenchFormat, CsvHasOneLinePerRowAndPlacement) {
  EXPECT_EQ(
      CsvText(SampleReport()),
      "collective,backend,nranks,size,count,type,redop,root,placement,time_us,algbw_gbs,"
      "busbw_gbs,wrong,timestamp\n"
      "all_reduce,shm,2,8,2,float,sum,-1,out_of_place,12.9,0.00062,0.00062,0,\n"
      "all_reduce,shm,2,8,2,float,sum,-1,in_place,12.87,0.00062,0.00062,0,\n"
      "all_reduce,shm,2,8,2,float,none,1,out_of_place,12.9,0.00062,0.00062,0,2026-01-02 03:04:05\n"
      "all_reduce,shm,2,8,2,float,none,1,in_place,12.87,0.00062,0.00062,,2026-01-02 03:04:05\n");
}

TEST(BenchFormat, JsonHasNcclTestsKeysAndRoundTrips) {
  Report r = SampleReport();
  Json j = r.ToJson();
  EXPECT_EQ(j["version"], 3);
  EXPECT_TRUE(j["env"].is_array() && j["env"].empty());
  for (const char* key : {"start_time", "args", "nccl_version", "config", "results",
                          "out_of_bounds", "average_bus_bandwidth", "errors", "end_time"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  const Json& config = j["config"];
  for (const char* key : {"nthreads", "ngpus", "minimum_bytes", "maximum_bytes", "step_factor",
                          "warmup_iters", "iterations", "aggregated_iterations", "validation",
                          "graph", "blocking_collectives", "parallel_init", "devices"}) {
    EXPECT_TRUE(config.contains(key)) << key;
  }
  EXPECT_FALSE(config.contains("step_bytes")) << "nccl-tests writes one of the two";
  EXPECT_EQ(config["devices"][1]["device_hex"], "0000:18:00");
  EXPECT_EQ(config["devices"][1]["device_info"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(config["devices"][0]["hostname"], "node0");
  EXPECT_EQ(config["devices"][0]["pid"], 10);
  const Json& row = j["results"][0];
  EXPECT_EQ(row["root"], "    -1");  // nccl-tests formats the root with %6i
  EXPECT_EQ(row["redop"], "sum");
  EXPECT_EQ(j["results"][1]["redop"], "none");
  EXPECT_TRUE(j["results"][1]["in_place"]["nwrong"].is_null());
  EXPECT_EQ(row["out_of_place"]["time"], 12.9);
  EXPECT_EQ(j["out_of_bounds"]["okay"], "true");
  EXPECT_EQ(j["average_bus_bandwidth"]["okay"], "unchecked");

  Result<Report> back = Report::FromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ToJson(), j);
  EXPECT_EQ(back->devices, r.devices);
  EXPECT_EQ(back->rows.size(), 2u);
  EXPECT_EQ(back->rows[1].timestamp, r.rows[1].timestamp);
  EXPECT_EQ(back->rows[1].in_place.wrong, -1);
  EXPECT_EQ(back->options.types, r.options.types);
  EXPECT_EQ(back->peak_busbw_gbs, 200.5);

  Json broken = j;
  broken.erase("results");
  EXPECT_FALSE(Report::FromJson(broken).ok());
  broken = j;
  broken["version"] = 1;
  EXPECT_FALSE(Report::FromJson(broken).ok());
}

}  // namespace
}  // namespace gantry::bench::internal
