// The collective benchmark engine: nccl-tests semantics on any Communicator.
//
// One descriptor per collective (bytes moved, data init, expected values,
// bandwidth factor, run) and one engine that owns warm-up, timing, checking and
// reporting. The CLI (`gantry bench`, `all_reduce_perf`), `gantry doctor` and
// the health module's bandwidth check all call RunBenchmark().
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/comm/communicator.h"
#include "gantry/comm/launch.h"
#include "gantry/comm/types.h"
#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry::bench {

enum class Collective {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAllToAll,
  kSendRecv,
  kGather,
  kScatter,
};

// "all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
// "alltoall", "sendrecv", "gather", "scatter" (nccl-tests binary names without _perf).
std::string_view CollectiveName(Collective c);
Result<Collective> ParseCollective(std::string_view name);
std::span<const Collective> AllCollectives();
// nccl-tests' busbw factor for n ranks: 2(n-1)/n all_reduce; (n-1)/n all_gather,
// reduce_scatter, alltoall, gather, scatter; 1 broadcast, reduce, sendrecv.
double BusBandwidthFactor(Collective c, int nranks);
// True for collectives that take a reduction op (all_reduce, reduce_scatter, reduce).
bool TakesReduceOp(Collective c);
// True for rooted collectives (broadcast, reduce, gather, scatter).
bool TakesRoot(Collective c);

// Options with nccl-tests' meanings and defaults (flag in brackets).
struct BenchOptions {
  uint64_t min_bytes = 32ull << 20;  // -b
  uint64_t max_bytes = 32ull << 20;  // -e
  uint64_t step_bytes = 1ull << 20;  // -i
  uint64_t step_factor = 1;          // -f (wins over -i when > 1)
  int iters = 20;                    // -n
  int warmup_iters = 1;              // -w
  int check_iters = 1;               // -c (0 = no check, "N/A" in #wrong)
  int run_cycles = 1;                // -N (0 = forever)
  int average = 1;                   // -a: 0 rank 0, 1 avg, 2 min, 3 max
  int blocking = 0;                  // -z: 1 Synchronize + Barrier after every op,
                                     // 2 Synchronize only, 3 both but the barrier untimed
  int root = 0;                      // -r (-1 = every root in turn)
  bool timestamps = false;           // -S
  bool report_cputime = false;       // -C: time the launches only, before Synchronize()
  std::vector<comm::DataType> types{comm::DataType::kFloat};  // -d
  std::vector<comm::ReduceOp> ops{comm::ReduceOp::kSum};      // -o
  std::string json_path;             // -J: nccl-tests JSON v3 (rank 0 writes)
  std::string csv_path;              // --csv
  std::vector<std::string> args;     // argv, recorded in JSON "args"
  std::string program = "all_reduce_perf";  // for the header/footer lines
};

// One measurement of one placement (out-of-place or in-place).
struct Measurement {
  double time_us = 0;
  double algbw_gbs = 0;  // decimal GB/s
  double busbw_gbs = 0;
  int64_t wrong = -1;    // wrong elements summed over ranks; -1 = not checked (N/A)
};

struct Row {
  uint64_t size_bytes = 0;  // max(send, recv) bytes per rank
  uint64_t count = 0;       // elements per rank
  comm::DataType type = comm::DataType::kFloat;
  std::optional<comm::ReduceOp> op;  // nullopt prints "none"
  int root = -1;                     // -1 for unrooted collectives
  Measurement out_of_place;
  Measurement in_place;
  std::string timestamp;  // "%Y-%m-%d %H:%M:%S" when -S
};

struct Report {
  std::string collective;  // "all_reduce"
  std::string backend;     // communicator backend
  int nranks = 0;
  BenchOptions options;    // what ran (JSON "config" and "args")
  std::string start_time;  // local time, "%Y-%m-%d %H:%M:%S"
  std::string end_time;
  std::vector<std::string> devices;  // one "# Using devices" line per rank
  std::vector<Row> rows;
  int64_t out_of_bounds = 0;  // checks (per rank) with any wrong element
  double avg_busbw_gbs = 0;   // mean over every row x placement (nccl-tests)
  double peak_busbw_gbs = 0;  // max over every row x placement
  bool wrong_results() const { return out_of_bounds > 0; }
  Json ToJson() const;                     // nccl-tests v3 keys (no environment)
  static Result<Report> FromJson(const Json& j);
};

// Checks options that do not depend on the communicator: sizes (non-zero,
// -b <= -e, a sweep that advances), counts (-n >= 1, -w/-c/-N >= 0), -a 0..3,
// -z 0..3, -r >= -1, non-empty -d/-o lists, -J ending in ".json". `nranks` > 0
// also checks that -r names a rank of a rooted collective. InvalidArgument names
// the flag and value.
Status ValidateOptions(const BenchOptions& options, Collective collective, int nranks = 0);

// Runs the sweep on one rank. Every rank of `comm` calls it with the same
// options. Rank 0 prints the nccl-tests text (header, table, footer) to
// `text_out` when it is not null, writes -J / --csv files, and returns the full
// report; other ranks return their view (rows without cross-rank reductions are
// still filled). Bad options (see ValidateOptions) are InvalidArgument before
// anything runs. Like nccl-tests, -e is lowered to what memory (MemAvailable,
// and /dev/shm for shared-memory backends) holds, with a "# Reducing maxBytes"
// line; ResourceExhausted when even -b does not fit.
Result<Report> RunBenchmark(comm::Communicator& comm, Collective collective,
                            const BenchOptions& options, std::FILE* text_out);

// Convenience for library callers (doctor, health): starts ranks with
// comm::RunRanks, runs the benchmark quietly and returns rank 0's report in
// this process.
Result<Report> RunBenchmarkLocal(const comm::LaunchOptions& launch, Collective collective,
                                 const BenchOptions& options);

}  // namespace gantry::bench
