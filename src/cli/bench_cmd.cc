// `gantry bench <collective>` and the nccl-tests entry points (`all_reduce_perf`
// ...): nccl-tests' flags, parsed with getopt_long exactly as nccl-tests does,
// so every spelling that works there (-b8, --minbytes 8, -e 1G) works here.
// Flags nccl-tests has for GPUs we do not drive the same way are accepted at
// their defaults and rejected, with a pointer to what to use, otherwise.
#include <getopt.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "cli.h"
#include "gantry/bench/collectives.h"
#include "gantry/bench/gemm.h"
#include "gantry/bench/memory.h"
#include "gantry/comm/launch.h"
#include "gantry/comm/types.h"
#include "gantry/core/json.h"
#include "gantry/core/log.h"
#include "gantry/core/table.h"
#include "gantry/core/units.h"

namespace gantry::cli {
namespace {

using bench::BenchOptions;
using bench::Collective;

// Long-only options.
enum LongOnly : int {
  kCsv = 256,
  kRanks,
  kBackend,
  kJson,
  kLogLevel,
  kNoPin,
};

// A leading ':' makes getopt report a missing value as ':' rather than '?'.
constexpr char kShortOptions[] = ":t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:u:I:K:";

const option kLongOptions[] = {
    {"nthreads", required_argument, nullptr, 't'},
    {"ngpus", required_argument, nullptr, 'g'},
    {"minbytes", required_argument, nullptr, 'b'},
    {"maxbytes", required_argument, nullptr, 'e'},
    {"stepbytes", required_argument, nullptr, 'i'},
    {"stepfactor", required_argument, nullptr, 'f'},
    {"iters", required_argument, nullptr, 'n'},
    {"agg_iters", required_argument, nullptr, 'm'},
    {"warmup_iters", required_argument, nullptr, 'w'},
    {"run_cycles", required_argument, nullptr, 'N'},
    {"parallel_init", required_argument, nullptr, 'p'},
    {"check", required_argument, nullptr, 'c'},
    {"op", required_argument, nullptr, 'o'},
    {"datatype", required_argument, nullptr, 'd'},
    {"root", required_argument, nullptr, 'r'},
    {"blocking", required_argument, nullptr, 'z'},
    {"stream_null", required_argument, nullptr, 'y'},
    {"timeout", required_argument, nullptr, 'T'},
    {"cudagraph", required_argument, nullptr, 'G'},
    {"report_cputime", required_argument, nullptr, 'C'},
    {"report_timestamps", required_argument, nullptr, 'S'},
    {"output_file", required_argument, nullptr, 'J'},
    {"average", required_argument, nullptr, 'a'},
    {"local_register", required_argument, nullptr, 'R'},
    {"cta_policy", required_argument, nullptr, 'x'},
    {"device_implementation", required_argument, nullptr, 'D'},
    {"device_cta_count", required_argument, nullptr, 'V'},
    {"memory", required_argument, nullptr, 'M'},
    {"unalign", required_argument, nullptr, 'u'},
    {"per_iter_timing", required_argument, nullptr, 'I'},
    {"per_iter_skip", required_argument, nullptr, 'K'},
    {"help", no_argument, nullptr, 'h'},
    {"csv", required_argument, nullptr, kCsv},
    {"ranks", required_argument, nullptr, kRanks},
    {"backend", required_argument, nullptr, kBackend},
    {"json", no_argument, nullptr, kJson},
    {"log-level", required_argument, nullptr, kLogLevel},
    {"no-pin", no_argument, nullptr, kNoPin},
    {nullptr, 0, nullptr, 0},
};

void PrintUsage(std::FILE* out, std::string_view program) {
  std::string collectives;
  for (Collective c : bench::AllCollectives()) {
    collectives += (collectives.empty() ? "" : ", ") + std::string(bench::CollectiveName(c));
  }
  std::fprintf(
      out,
      "USAGE: %.*s [flags]\n"
      "Collectives (gantry bench <name>, or <name>_perf): %s\n"
      "Memory bandwidth of this machine: gantry bench memcpy [-b SIZE] [--json]\n"
      "Matrix-multiply TFLOPS and MFU: gantry bench gemm [--type T] [--device D] [--size N]\n"
      "                                 (see gantry bench gemm --help)\n"
      "nccl-tests flags (sizes take K/M/G, binary):\n"
      "  -b,--minbytes <size>           smallest size (default 32M)\n"
      "  -e,--maxbytes <size>           largest size (default 32M)\n"
      "  -i,--stepbytes <size>          size increment (default 1M)\n"
      "  -f,--stepfactor <n>            size multiplier, wins over -i when > 1 (default 1)\n"
      "  -n,--iters <n>                 timed iterations per size (default 20)\n"
      "  -w,--warmup_iters <n>          warm-up iterations per size (default 1)\n"
      "  -c,--check <n>                 correctness checks per size, 0 prints N/A (default 1)\n"
      "  -o,--op <sum|prod|max|min|avg|all>  reduction (default sum)\n"
      "  -d,--datatype <type|all>       int8 uint8 int32 uint32 int64 uint64 half float double\n"
      "                                 bfloat16 (default float)\n"
      "  -r,--root <rank|-1|all>        root of rooted collectives, -1 = every rank (default 0)\n"
      "  -a,--average <0|1|2|3>         time across ranks: rank 0, mean, min, max (default 1)\n"
      "  -N,--run_cycles <n>            repeat the sweep, 0 = forever (default 1)\n"
      "  -z,--blocking <0|1|2|3>        1 sync+barrier per op, 2 sync only, 3 barrier untimed\n"
      "                                 (default 0)\n"
      "  -C,--report_cputime <0|1>      report launch (CPU) time (default 0)\n"
      "  -S,--report_timestamps <0|1>   add a timestamp to every row (default 0)\n"
      "  -J,--output_file <file.json>   nccl-tests JSON (v3; \"env\" left empty)\n"
      "Accepted at their defaults only (ranks are processes here):\n"
      "  -t,--nthreads 1  -g,--ngpus 1  -m,--agg_iters 1  -p,--parallel_init 0|1\n"
      "  -G,--cudagraph 0  -T,--timeout 0  -R,--local_register 0  -y,--stream_null 0\n"
      "  -M,--memory 0  -u,--unalign 0  -I,--per_iter_timing 0  -K,--per_iter_skip 0\n"
      "  -x,--cta_policy (unset)  -D,--device_implementation 0  -V,--device_cta_count 16\n"
      "Gantry flags:\n"
      "  --ranks <n>                    local ranks to start (default: one per core, max 8)\n"
      "  --backend <auto|shm|mpi|nccl>  communicator (default auto)\n"
      "  --csv <file>                   one CSV line per size and placement\n"
      "  --json                         the report as JSON on stdout instead of the table\n"
      "  --log-level <level>            trace, debug, info, warn, error, off (default warn)\n"
      "  --no-pin                       do not pin ranks to cores\n"
      "  -h,--help                      this text\n"
      "Exit codes: 0 ok, 1 failure, 2 usage error, 7 wrong results.\n",
      static_cast<int>(program.size()), program.data(), collectives.c_str());
}

struct BenchCommand {
  BenchOptions options;
  comm::LaunchOptions launch;
  bool json = false;
  std::string log_level = "warn";
  std::vector<std::string> positionals;
  bool help = false;
  bool min_bytes_given = false;  // memcpy: -b sets its buffer size
};

// "-g 2" style message prefix: the flag as the user is most likely to know it.
std::string FlagName(int c) {
  if (c < 256) return std::string("-") + static_cast<char>(c);
  for (const option& o : kLongOptions) {
    if (o.name != nullptr && o.val == c) return std::string("--") + o.name;
  }
  return "?";
}

Result<int> IntFlag(int c, const char* text, int64_t min, int64_t max) {
  ASSIGN_OR_RETURN(int64_t v, ParseInt(FlagName(c), text));
  if (v < min || v > max) {
    return InvalidArgument(FlagName(c) + " " + text + ": must be between " + std::to_string(min) +
                           " and " + std::to_string(max));
  }
  return static_cast<int>(v);
}

// Flags whose nccl-tests meaning we cannot honour beyond one value.
Status OnlyValue(int c, const char* text, int64_t allowed, std::string_view instead) {
  ASSIGN_OR_RETURN(int64_t v, ParseInt(FlagName(c), text));
  if (v == allowed) return Status::Ok();
  return InvalidArgument(FlagName(c) + " " + text + ": not supported; " + std::string(instead));
}

Result<uint64_t> SizeFlag(int c, const char* text) {
  Result<uint64_t> v = ParseSize(text);
  if (!v.ok()) return InvalidArgument(FlagName(c) + ": " + v.status().message());
  return *v;
}

// Stores a parsed value, or passes its error on.
template <typename T, typename U>
Status Set(T& dst, Result<U> parsed) {
  if (!parsed.ok()) return parsed.status();
  dst = *parsed;
  return Status::Ok();
}

Status ApplyFlag(int c, const char* arg, BenchCommand& cmd) {
  BenchOptions& o = cmd.options;
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  switch (c) {
    case 'b':
      cmd.min_bytes_given = true;
      return Set(o.min_bytes, SizeFlag(c, arg));
    case 'e':
      return Set(o.max_bytes, SizeFlag(c, arg));
    case 'i':
      return Set(o.step_bytes, SizeFlag(c, arg));
    case 'f':
      return Set(o.step_factor, IntFlag(c, arg, 0, kIntMax));
    case 'n':
      return Set(o.iters, IntFlag(c, arg, 1, kIntMax));
    case 'w':
      return Set(o.warmup_iters, IntFlag(c, arg, 0, kIntMax));
    case 'c':
      return Set(o.check_iters, IntFlag(c, arg, 0, kIntMax));
    case 'N':
      return Set(o.run_cycles, IntFlag(c, arg, 0, kIntMax));
    case 'a':
      return Set(o.average, IntFlag(c, arg, 0, 3));
    case 'z':
      return Set(o.blocking, IntFlag(c, arg, 0, 3));
    case 'r':
      if (std::strcmp(arg, "all") == 0) {
        o.root = -1;
        return Status::Ok();
      }
      return Set(o.root, IntFlag(c, arg, -1, kIntMax));
    case 'o':
      if (std::strcmp(arg, "all") == 0) {
        o.ops.assign(comm::AllReduceOps().begin(), comm::AllReduceOps().end());
        return Status::Ok();
      }
      if (std::strcmp(arg, "mulsum") == 0) {
        return InvalidArgument(
            "-o mulsum: pre-multiplied sums are not supported; use sum, prod, "
            "max, min, avg or all");
      }
      {
        Result<comm::ReduceOp> op = comm::ParseReduceOp(arg);
        if (!op.ok()) return InvalidArgument("-o: " + op.status().message());
        o.ops = {*op};
      }
      return Status::Ok();
    case 'd':
      if (std::strcmp(arg, "all") == 0) {
        o.types.assign(comm::AllDataTypes().begin(), comm::AllDataTypes().end());
        return Status::Ok();
      }
      {
        Result<comm::DataType> type = comm::ParseDataType(arg);
        if (!type.ok()) return InvalidArgument("-d: " + type.status().message());
        o.types = {*type};
      }
      return Status::Ok();
    case 'J':
      o.json_path = arg;
      return Status::Ok();
    case 'S':
      return Set(o.timestamps, IntFlag(c, arg, 0, 1));
    case 'C':
      return Set(o.report_cputime, IntFlag(c, arg, 0, 1));
    case 'p':
      // Ranks always start in parallel here; both values are fine.
      return IntFlag(c, arg, 0, 1).status();
    case 't':
      return OnlyValue(c, arg, 1, "ranks are processes here; use --ranks N (or mpirun -np N)");
    case 'g':
      return OnlyValue(c, arg, 1, "one device per rank here; use --ranks N (or mpirun -np N)");
    case 'm':
      return OnlyValue(c, arg, 1, "aggregated (grouped) launches are not implemented; use -n");
    case 'G':
      return OnlyValue(c, arg, 0, "CUDA graph capture is not implemented");
    case 'T':
      return OnlyValue(c, arg, 0, "a collective timeout is not implemented");
    case 'R':
      return OnlyValue(c, arg, 0, "buffer registration is not implemented");
    case 'y':
      return OnlyValue(c, arg, 0, "the communicator owns its stream");
    case 'M':
      return OnlyValue(c, arg, 0, "the GPU memory report is not implemented");
    case 'u':
      return OnlyValue(c, arg, 0, "unaligned buffers are not implemented");
    case 'I':
      return OnlyValue(c, arg, 0, "per-iteration timing is not implemented");
    case 'K':
      return OnlyValue(c, arg, 0, "per-iteration timing (-I) is not implemented");
    case 'x':
      return InvalidArgument(std::string("-x ") + arg +
                             ": not supported; NCCL CTA policies are not set");
    case 'D':
      return OnlyValue(c, arg, 0, "device-API kernels are not implemented");
    case 'V':
      return IntFlag(c, arg, 1, 128).status();
    case kCsv:
      o.csv_path = arg;
      return Status::Ok();
    case kRanks:
      return Set(cmd.launch.ranks, IntFlag(c, arg, 1, 4096));
    case kBackend: {
      Result<comm::Backend> b = comm::ParseBackend(arg);
      if (!b.ok()) return InvalidArgument("--backend: " + b.status().message());
      cmd.launch.backend = *b;
      return Status::Ok();
    }
    case kJson:
      cmd.json = true;
      return Status::Ok();
    case kLogLevel:
      cmd.log_level = arg;
      return Status::Ok();
    case kNoPin:
      cmd.launch.pin = false;
      return Status::Ok();
    case 'h':
      cmd.help = true;
      return Status::Ok();
    default:
      return Internal("unhandled flag");
  }
}

Result<BenchCommand> Parse(int argc, char** argv) {
  BenchCommand cmd;
  cmd.options.args.assign(argv, argv + argc);
  optind = 0;  // full re-initialisation of getopt's state (GNU)
  opterr = 0;  // we print our own messages
  for (;;) {
    int c = getopt_long(argc, argv, kShortOptions, kLongOptions, nullptr);
    if (c == -1) break;
    if (c == '?' || c == ':') {
      std::string flag = optopt > 0 && optopt < 256 ? std::string("-") + static_cast<char>(optopt)
                                                    : std::string(argv[optind - 1]);
      if (c == ':') {
        return InvalidArgument(flag + ": missing value (see --help)");
      }
      return InvalidArgument("unknown flag '" + flag + "' (see --help)");
    }
    RETURN_IF_ERROR(ApplyFlag(c, optarg, cmd));
  }
  for (int i = optind; i < argc; ++i) cmd.positionals.emplace_back(argv[i]);
  return cmd;
}

int UsageError(const std::string& message) {
  std::fprintf(stderr, "gantry bench: %s\n", message.c_str());
  return kExitUsage;
}

// Runs the sweep on every rank; rank 0 prints.
int RunCollective(Collective collective, BenchCommand& cmd) {
  if (Status s = log::SetLevel(cmd.log_level); !s.ok()) {
    return UsageError("--log-level: " + s.message());
  }
  cmd.options.program = std::string(bench::CollectiveName(collective)) + "_perf";
  const int known_ranks = comm::UnderMpiLauncher() ? 0 : cmd.launch.ranks;
  if (Status s = bench::ValidateOptions(cmd.options, collective, known_ranks); !s.ok()) {
    return UsageError(s.message());
  }
  std::fflush(stdout);  // forked ranks must not inherit unwritten output
  Result<int> code = comm::RunRanks(cmd.launch, [&](comm::Communicator& comm) {
    Result<bench::Report> report =
        bench::RunBenchmark(comm, collective, cmd.options, cmd.json ? nullptr : stdout);
    if (!report.ok()) {
      const Status& s = report.status();
      if (comm.rank() == 0) {
        std::fprintf(stderr, "gantry bench: %s\n", s.message().c_str());
      } else {
        log::warn("gantry bench: {}", s.message());
      }
      return ExitCode(s);
    }
    if (cmd.json && comm.rank() == 0) {
      std::fputs((report->ToJson().dump(2) + "\n").c_str(), stdout);
      std::fflush(stdout);
    }
    return report->wrong_results() ? kExitWrongResults : kExitOk;
  });
  if (!code.ok()) return UsageError(code.status().message());
  return *code;
}

int MemcpyMain(BenchCommand& cmd) {
  if (cmd.positionals.size() > 1) return UsageError("memcpy takes no more arguments");
  // Only -b (buffer size) and --json mean something here.
  Result<bench::MemcpyResult> r = cmd.min_bytes_given
                                      ? bench::MeasureMemcpyBandwidth(cmd.options.min_bytes)
                                      : bench::MeasureMemcpyBandwidth();
  if (!r.ok()) {
    return Fail("bench memcpy", r.status());
  }
  if (cmd.json) {
    Json j = {{"bytes", r->bytes},
              {"iterations", r->iterations},
              {"seconds", r->seconds},
              {"bandwidth_gbs", r->bandwidth_gbs}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::printf("memcpy %s: %.2f GB/s (best of %d copies, %.3f ms each)\n",
                FormatSize(r->bytes).c_str(), r->bandwidth_gbs, r->iterations, r->seconds * 1e3);
  }
  return kExitOk;
}

// `gantry bench gemm`: its own small flag set, parsed here rather than by the
// nccl-tests getopt table (whose -m, -n and -k mean other things).
void PrintGemmUsage(std::FILE* out) {
  std::fprintf(
      out,
      "USAGE: gantry bench gemm [flags]\n"
      "Times C = A x B with the vendor BLAS and reports TFLOPS and MFU (the fraction of the\n"
      "device's peak), checking 64 sampled outputs against a long-double reference.\n"
      "  --type <fp32|fp64|bf16|fp16>   element type (default fp32; bf16/fp16 accumulate in fp32)\n"
      "  --device <cpu|cuda>            default: cuda when built with CUDA and a GPU is visible,\n"
      "                                 else cpu (OpenBLAS)\n"
      "  --size <n>                     m = n = k = n (default: cpu 2048, shrunk to fit a quarter\n"
      "                                 of available memory; cuda 8192)\n"
      "  -m <m> -n <n> -k <k>           a rectangular GEMM (all three together)\n"
      "  --iters <n>                    timed GEMMs (default: as many as fit in --seconds)\n"
      "  --seconds <duration>           minimum timed duration when --iters is not given\n"
      "                                 (default 1s; \"500ms\", \"2\")\n"
      "  --warmup <n>                   untimed GEMMs first (default 1)\n"
      "  --threads <n>                  cpu: OpenBLAS threads (default: OpenBLAS' own choice)\n"
      "  --json                         the result as JSON on stdout instead of the table\n"
      "  -h,--help                      this text\n"
      "Exit codes: 0 ok, 1 wrong results or a device failure, 2 usage or configuration error.\n");
}

struct GemmCommand {
  bench::GemmOptions options;
  bool device_given = false;
  bool json = false;
  bool help = false;
};

Result<GemmCommand> ParseGemm(int argc, char** argv) {
  GemmCommand cmd;
  int64_t size = 0;
  bool size_given = false, mnk_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    std::string value;
    bool has_value = false;
    if (flag.rfind("--", 0) == 0) {
      if (auto eq = flag.find('='); eq != std::string::npos) {
        value = flag.substr(eq + 1);
        flag = flag.substr(0, eq);
        has_value = true;
      }
    } else if (flag.size() > 2 && flag[0] == '-' && flag[1] != '-') {
      value = flag.substr(2);  // -m64
      flag = flag.substr(0, 2);
      has_value = true;
    }
    auto take = [&]() -> Result<std::string> {
      if (has_value) return value;
      if (i + 1 >= argc) return InvalidArgument(flag + ": missing value (see --help)");
      return std::string(argv[++i]);
    };
    auto take_int = [&](int64_t min, int64_t max) -> Result<int64_t> {
      ASSIGN_OR_RETURN(std::string text, take());
      ASSIGN_OR_RETURN(int64_t v, ParseInt(flag, text));
      if (v < min || v > max) {
        return InvalidArgument(flag + " " + text + ": must be between " + std::to_string(min) +
                               " and " + std::to_string(max));
      }
      return v;
    };
    constexpr int64_t kIntMax = std::numeric_limits<int>::max();
    bench::GemmOptions& o = cmd.options;
    if (flag == "-h" || flag == "--help") {
      cmd.help = true;
    } else if (flag == "--json") {
      if (has_value) return InvalidArgument("--json takes no value");
      cmd.json = true;
    } else if (flag == "--type") {
      ASSIGN_OR_RETURN(std::string text, take());
      Result<bench::GemmType> t = bench::ParseGemmType(text);
      if (!t.ok()) return InvalidArgument("--type: " + t.status().message());
      o.type = *t;
    } else if (flag == "--device") {
      ASSIGN_OR_RETURN(std::string text, take());
      Result<bench::GemmDevice> d = bench::ParseGemmDevice(text);
      if (!d.ok()) return InvalidArgument("--device: " + d.status().message());
      o.device = *d;
      cmd.device_given = true;
    } else if (flag == "--size") {
      ASSIGN_OR_RETURN(size, take_int(1, kIntMax));
      size_given = true;
    } else if (flag == "-m") {
      ASSIGN_OR_RETURN(o.m, take_int(1, kIntMax));
      mnk_given = true;
    } else if (flag == "-n") {
      ASSIGN_OR_RETURN(o.n, take_int(1, kIntMax));
      mnk_given = true;
    } else if (flag == "-k") {
      ASSIGN_OR_RETURN(o.k, take_int(1, kIntMax));
      mnk_given = true;
    } else if (flag == "--iters") {
      ASSIGN_OR_RETURN(int64_t v, take_int(1, kIntMax));
      o.iters = static_cast<int>(v);
    } else if (flag == "--warmup") {
      ASSIGN_OR_RETURN(int64_t v, take_int(0, kIntMax));
      o.warmup = static_cast<int>(v);
    } else if (flag == "--threads") {
      ASSIGN_OR_RETURN(int64_t v, take_int(1, 4096));
      o.threads = static_cast<int>(v);
    } else if (flag == "--seconds") {
      ASSIGN_OR_RETURN(std::string text, take());
      Result<std::chrono::nanoseconds> d = ParseDuration(text);
      if (!d.ok()) return InvalidArgument("--seconds: " + d.status().message());
      if (d->count() <= 0) return InvalidArgument("--seconds " + text + ": must be positive");
      o.min_seconds = std::chrono::duration<double>(*d).count();
    } else if (flag.size() > 1 && flag[0] == '-') {
      return InvalidArgument("unknown flag '" + flag + "' for gemm (see gantry bench gemm --help)");
    } else {
      return InvalidArgument("gemm takes no arguments; unexpected '" + flag + "'");
    }
  }
  if (size_given && mnk_given) return InvalidArgument("give either --size or -m/-n/-k, not both");
  if (mnk_given && (cmd.options.m == 0 || cmd.options.n == 0 || cmd.options.k == 0)) {
    return InvalidArgument("-m, -n and -k go together; give all three (or --size)");
  }
  if (size_given) cmd.options.m = cmd.options.n = cmd.options.k = size;
  return cmd;
}

std::string FormatTflops(double tflops) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), tflops >= 100 ? "%.0f" : "%.3g", tflops);
  return buf;
}

int GemmMain(int argc, char** argv) {
  Result<GemmCommand> cmd = ParseGemm(argc, argv);
  if (!cmd.ok()) {
    std::fprintf(stderr, "gantry bench gemm: %s\n", cmd.status().message().c_str());
    return kExitUsage;
  }
  if (cmd->help) {
    PrintGemmUsage(stdout);
    return kExitOk;
  }
  bench::GemmOptions& o = cmd->options;
  if (!cmd->device_given) {
    // --threads only means something on the CPU, so it picks the CPU.
    o.device = o.threads == 0 && bench::CudaGemmAvailable() ? bench::GemmDevice::kCuda
                                                            : bench::GemmDevice::kCpu;
  }
  const bool progress = !cmd->json && ::isatty(STDERR_FILENO);
  if (progress) {
    const std::string dims =
        o.m == 0 ? "default size"
                 : std::to_string(o.m) + "x" + std::to_string(o.n) + "x" + std::to_string(o.k);
    std::fprintf(stderr, "gantry bench gemm: timing %s %s on %s ...",
                 std::string(bench::GemmTypeName(o.type)).c_str(), dims.c_str(),
                 std::string(bench::GemmDeviceName(o.device)).c_str());
    std::fflush(stderr);
  }
  Result<bench::GemmResult> r = bench::MeasureGemm(o);
  if (progress) std::fputs("\r\033[K", stderr);
  if (!r.ok()) {
    const Status& s = r.status();
    std::string_view message = s.message();
    if (message.starts_with("gemm: ")) message.remove_prefix(6);  // we say "gemm" already
    std::fprintf(stderr, "gantry bench gemm: %.*s\n", static_cast<int>(message.size()),
                 message.data());
    return ExitCode(s);
  }
  char err[64];
  std::snprintf(err, sizeof(err), "err %.2g %s %.2g", r->max_rel_error, r->verified ? "<=" : ">",
                r->tolerance);
  if (cmd->json) {
    std::cout << bench::GemmResultJson(*r).dump(2) << "\n";
  } else {
    std::printf("%s: %s\n", r->device_name.c_str(), r->backend.c_str());
    Table t({"device", "type", "m x n x k", "time/GEMM", "TFLOPS", "peak", "MFU", "check"});
    for (size_t c = 3; c <= 6; ++c) t.SetAlign(c, Table::Align::kRight);
    char mfu[32] = "-";
    if (r->mfu) std::snprintf(mfu, sizeof(mfu), "%.1f%%", *r->mfu * 100);
    const auto per_iter = std::chrono::nanoseconds(std::llround(r->seconds_per_iter * 1e9));
    t.AddRow({std::string(bench::GemmDeviceName(r->device)),
              std::string(bench::GemmTypeName(r->type)),
              std::to_string(r->m) + " x " + std::to_string(r->n) + " x " + std::to_string(r->k),
              FormatDuration(per_iter), FormatTflops(r->tflops),
              r->peak_tflops ? FormatTflops(*r->peak_tflops) : "-", mfu,
              std::string(r->verified ? "ok (" : "WRONG (") + err + ")"});
    std::cout << t.Render();
    std::printf("%d timed GEMMs after %d warm-up; peak: %s\n", r->iters, o.warmup,
                r->peak_source.c_str());
  }
  if (!r->verified) {
    std::fprintf(stderr,
                 "gantry bench gemm: wrong results: sampled max relative error %.3g exceeds the "
                 "%s tolerance %.3g\n",
                 r->max_rel_error, std::string(bench::GemmTypeName(r->type)).c_str(), r->tolerance);
    return kExitCheckFailed;
  }
  return kExitOk;
}
}  // namespace

bool IsPerfCollective(std::string_view collective) {
  for (Collective c : bench::AllCollectives()) {
    if (bench::CollectiveName(c) == collective) return true;
  }
  return false;
}

int BenchMain(int argc, char** argv) {
  setlinebuf(stdout);
  // gemm has its own flags; nccl-tests' getopt table must not see them.
  if (argc >= 2 && std::strcmp(argv[1], "gemm") == 0) return GemmMain(argc - 1, argv + 1);
  Result<BenchCommand> cmd = Parse(argc, argv);
  if (!cmd.ok()) return UsageError(cmd.status().message());
  if (cmd->help) {
    PrintUsage(stdout, "gantry bench <collective>");
    return kExitOk;
  }
  if (cmd->positionals.empty()) {
    PrintUsage(stderr, "gantry bench <collective>");
    return kExitUsage;
  }
  if (cmd->positionals[0] == "memcpy") return MemcpyMain(*cmd);
  if (cmd->positionals.size() > 1) {
    return UsageError("one collective at a time; unexpected '" + cmd->positionals[1] + "'");
  }
  Result<Collective> collective = bench::ParseCollective(cmd->positionals[0]);
  if (!collective.ok()) return UsageError(collective.status().message());
  return RunCollective(*collective, *cmd);
}

int PerfMain(std::string_view collective, int argc, char** argv) {
  setlinebuf(stdout);
  std::string program = std::string(collective) + "_perf";
  Result<BenchCommand> cmd = Parse(argc, argv);
  if (!cmd.ok()) return UsageError(cmd.status().message());
  if (cmd->help) {
    PrintUsage(stdout, program);
    return kExitOk;
  }
  if (!cmd->positionals.empty()) {
    return UsageError(program + " takes no arguments; unexpected '" + cmd->positionals[0] + "'");
  }
  Result<Collective> parsed = bench::ParseCollective(collective);
  if (!parsed.ok()) return UsageError(parsed.status().message());
  return RunCollective(*parsed, *cmd);
}

}  // namespace gantry::cli
