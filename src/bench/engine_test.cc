// The engine against a reference communicator whose ranks are threads
// (bench_test_util.h): every collective, type, op and root must check clean,
// and injected faults must be caught.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "bench_test_util.h"
#include "gantry/bench/collectives.h"
#include "gantry/core/json.h"

namespace gantry::bench {
namespace {

using testing::Fault;

BenchOptions SmallSweep() {
  BenchOptions o;
  o.min_bytes = 8;
  o.max_bytes = 4096;
  o.step_factor = 8;  // 8, 64, 512, 4096
  o.iters = 1;
  o.warmup_iters = 1;
  o.check_iters = 1;
  o.root = -1;
  o.types.assign(comm::AllDataTypes().begin(), comm::AllDataTypes().end());
  o.ops.assign(comm::AllReduceOps().begin(), comm::AllReduceOps().end());
  return o;
}

struct Outcome {
  std::vector<Result<Report>> reports;  // by rank
  std::string text;                     // rank 0's output
};

Outcome RunSweep(int n, Collective c, const BenchOptions& o, Fault fault = Fault::kNone) {
  Outcome out;
  for (int r = 0; r < n; ++r) out.reports.emplace_back(Internal("not run"));
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* text = open_memstream(&buf, &len);
  std::mutex mu;
  testing::RunThreads(n, fault, [&](comm::Communicator& comm) {
    Result<Report> r = RunBenchmark(comm, c, o, comm.rank() == 0 ? text : nullptr);
    std::lock_guard<std::mutex> lock(mu);
    out.reports[comm.rank()] = std::move(r);
  });
  std::fclose(text);
  out.text.assign(buf, len);
  std::free(buf);
  return out;
}

size_t ExpectedRows(Collective c, const BenchOptions& o, int n, size_t sizes) {
  size_t ops = TakesReduceOp(c) ? o.ops.size() : 1;
  size_t roots = TakesRoot(c) ? (o.root == -1 ? n : 1) : 1;
  return o.types.size() * ops * roots * sizes * std::max(o.run_cycles, 1);
}

TEST(BenchEngine, EveryCollectiveTypeOpAndRootChecksClean) {
  const BenchOptions o = SmallSweep();
  for (Collective c : AllCollectives()) {
    for (int n : {1, 2, 3, 4}) {
      Outcome out = RunSweep(n, c, o);
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(out.reports[r].ok())
            << CollectiveName(c) << " rank " << r << ": " << out.reports[r].status().ToString();
      }
      const Report& report = *out.reports[0];
      SCOPED_TRACE(std::string(CollectiveName(c)) + " n=" + std::to_string(n));
      EXPECT_EQ(report.rows.size(), ExpectedRows(c, o, n, 4));
      EXPECT_EQ(report.out_of_bounds, 0);
      EXPECT_FALSE(report.wrong_results());
      for (const Row& row : report.rows) {
        ASSERT_EQ(row.out_of_place.wrong, 0)
            << row.size_bytes << " " << comm::DataTypeName(row.type);
        ASSERT_EQ(row.in_place.wrong, 0) << row.size_bytes << " " << comm::DataTypeName(row.type);
        EXPECT_EQ(row.op.has_value(), TakesReduceOp(c));
        EXPECT_EQ(row.root >= 0, TakesRoot(c));
      }
      // Every rank agrees on the measurements (times are reduced across ranks).
      for (int r = 1; r < n; ++r) {
        ASSERT_EQ(out.reports[r]->rows.size(), report.rows.size());
        EXPECT_EQ(out.reports[r]->rows.back().in_place.time_us,
                  report.rows.back().in_place.time_us);
        EXPECT_EQ(out.reports[r]->out_of_bounds, 0);
      }
    }
  }
}

TEST(BenchEngine, DamagedResultsAreCounted) {
  BenchOptions o = SmallSweep();
  o.types = {comm::DataType::kFloat, comm::DataType::kInt8};
  o.ops = {comm::ReduceOp::kSum, comm::ReduceOp::kAvg};
  for (Fault fault : {Fault::kFlipFirstOnRank0, Fault::kDamageLastElement}) {
    for (Collective c : AllCollectives()) {
      Outcome out = RunSweep(3, c, o, fault);
      ASSERT_TRUE(out.reports[0].ok()) << out.reports[0].status().ToString();
      const Report& report = *out.reports[0];
      SCOPED_TRACE(CollectiveName(c));
      EXPECT_TRUE(report.wrong_results());
      EXPECT_GT(report.out_of_bounds, 0);
      int64_t wrong_rows = 0;
      for (const Row& row : report.rows) {
        // Rows too small to hold an element per rank have nothing to damage.
        if (row.count == 0) continue;
        if (fault == Fault::kDamageLastElement) {
          EXPECT_GT(row.out_of_place.wrong, 0) << row.size_bytes;
          EXPECT_GT(row.in_place.wrong, 0) << row.size_bytes;
        }
        wrong_rows += row.out_of_place.wrong > 0;
      }
      EXPECT_GT(wrong_rows, 0);
      EXPECT_NE(out.text.find("FAILED"), std::string::npos);
    }
  }
}

TEST(BenchEngine, NonRootRanksMustLeaveTheirBufferAlone) {
  BenchOptions o = SmallSweep();
  o.types = {comm::DataType::kUint8};
  o.ops = {comm::ReduceOp::kMax};
  for (Collective c : {Collective::kReduce, Collective::kGather}) {
    Outcome out = RunSweep(3, c, o, Fault::kNonRootWrites);
    ASSERT_TRUE(out.reports[0].ok());
    EXPECT_TRUE(out.reports[0]->wrong_results()) << CollectiveName(c);
  }
  // The same fault is harmless where every rank receives.
  Outcome out = RunSweep(3, Collective::kBroadcast, o, Fault::kNonRootWrites);
  ASSERT_TRUE(out.reports[0].ok());
  EXPECT_FALSE(out.reports[0]->wrong_results());
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(BenchEngine, PrintsTheNcclTestsLayoutOnRankZero) {
  BenchOptions o;
  o.min_bytes = 8;
  o.max_bytes = 1024;
  o.step_factor = 2;
  o.iters = 2;
  o.check_iters = 0;
  o.timestamps = true;
  Outcome out = RunSweep(2, Collective::kAllReduce, o);
  ASSERT_TRUE(out.reports[0].ok());
  std::vector<std::string> lines = Lines(out.text);
  ASSERT_GE(lines.size(), 20u);
  EXPECT_EQ(lines[0].rfind("# gantry version ", 0), 0u);
  EXPECT_EQ(lines[1], "# Collective test starting: all_reduce_perf");
  EXPECT_EQ(lines[2],
            "# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 1 iters: 2 "
            "agg iters: 1 validation: 0 graph: 0 unalign: 0");
  EXPECT_EQ(lines[3], "#");
  EXPECT_EQ(lines[4], "# Using devices");
  EXPECT_NE(lines[5].find("device  0 [host] test thread 0"), std::string::npos) << lines[5];
  EXPECT_NE(lines[6].find("device  1 [host] test thread 1"), std::string::npos) << lines[6];
  EXPECT_EQ(lines[7], "#");
  int rows = 0;
  for (const std::string& line : lines) {
    if (!line.empty() && line[0] != '#') {
      ++rows;
      EXPECT_NE(line.find("    N/A"), std::string::npos) << line;
      EXPECT_EQ(line.size(), 52u + 2 * 32 + 21)
          << "N/A is one column narrower than %6g in nccl-tests";
    }
  }
  EXPECT_EQ(rows, 8);  // 8 .. 1024 by 2
  const size_t end = lines.size();
  EXPECT_EQ(lines[end - 7], "# Out of bounds values : 0 OK");
  EXPECT_EQ(lines[end - 6].rfind("# Avg bus bandwidth    : ", 0), 0u);
  EXPECT_EQ(lines[end - 5].rfind("# Peak bus bandwidth   : ", 0), 0u);
  EXPECT_EQ(lines[end - 4], "#");
  EXPECT_EQ(lines[end - 3], "# Collective test concluded: all_reduce_perf");
  EXPECT_EQ(lines[end - 2], "#");
  EXPECT_EQ(lines[end - 1], "") << "nccl-tests ends with an empty line";
}

TEST(BenchEngine, ClampsTheLargestSizeToMemory) {
  BenchOptions o;
  o.min_bytes = 8;
  o.max_bytes = 1ull << 50;
  o.step_factor = 1ull << 40;
  o.warmup_iters = 0;  // warm-up would visit every power of two up to the limit
  o.iters = 1;
  Outcome out = RunSweep(1, Collective::kAllReduce, o);
  ASSERT_TRUE(out.reports[0].ok()) << out.reports[0].status().ToString();
  EXPECT_NE(out.text.find("#\n# Reducing maxBytes to "), std::string::npos);
  EXPECT_NE(out.text.find("maxBytes 1125899906842624 "), std::string::npos)
      << "the parameter line shows -e as given, like nccl-tests";
  EXPECT_EQ(out.reports[0]->rows.size(), 1u);

  o.min_bytes = o.max_bytes;
  out = RunSweep(1, Collective::kAllReduce, o);
  ASSERT_FALSE(out.reports[0].ok());
  EXPECT_EQ(out.reports[0].status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(out.reports[0].status().message().find("-b 1125899906842624"), std::string::npos);
}

TEST(BenchEngine, WritesJsonAndCsvFromRankZero) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("gantry-bench-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  BenchOptions o;
  o.min_bytes = 64;
  o.max_bytes = 256;
  o.step_factor = 2;
  o.iters = 1;
  o.json_path = (dir / "out.json").string();
  o.csv_path = (dir / "out.csv").string();
  Outcome first = RunSweep(2, Collective::kAllGather, o);
  ASSERT_TRUE(first.reports[0].ok()) << first.reports[0].status().ToString();
  Outcome second = RunSweep(2, Collective::kAllGather, o);
  ASSERT_TRUE(second.reports[0].ok());
  EXPECT_EQ(first.text.rfind("# Writing JSON output to " + o.json_path + "\n", 0), 0u);
  EXPECT_EQ(second.text.rfind("# Writing JSON output to " + o.json_path + ".0\n", 0), 0u)
      << "an existing file is never overwritten";

  Result<Json> j = ReadJsonFile(o.json_path + ".0");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)["version"], 3);
  EXPECT_EQ((*j)["results"].size(), 3u);
  EXPECT_EQ((*j)["results"][2]["size"], 256u);
  EXPECT_EQ((*j)["results"][2]["redop"], "none");
  Result<Report> back = Report::FromJson(*j);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->rows.size(), 3u);

  Result<std::string> csv = ReadFile(o.csv_path);
  ASSERT_TRUE(csv.ok());
  EXPECT_EQ(Lines(*csv).size(), 1u + 3 * 2);
  std::filesystem::remove_all(dir);
}

TEST(BenchEngine, RejectsBadOptionsBeforeRunning) {
  BenchOptions o;
  o.min_bytes = 1024;
  o.max_bytes = 8;
  Outcome out = RunSweep(2, Collective::kAllReduce, o);
  ASSERT_FALSE(out.reports[0].ok());
  EXPECT_EQ(out.reports[0].status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(out.text.empty());

  o = BenchOptions();
  o.root = 2;
  out = RunSweep(2, Collective::kBroadcast, o);
  ASSERT_FALSE(out.reports[1].ok());
  EXPECT_EQ(out.reports[1].status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gantry::bench
