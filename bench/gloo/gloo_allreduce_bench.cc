// gloo_allreduce_bench: the Gloo anchor for bench/collectives.sh.
//
// Forks --ranks processes on this machine. They meet through a
// gloo::rendezvous::FileStore in a fresh temporary directory and talk over
// Gloo's TCP transport on 127.0.0.1, which is how Gloo (and PyTorch's gloo
// backend) runs on one CPU node. Each size of the sweep runs a float sum
// allreduce with the chosen algorithm: warm-up iterations, a barrier, then
// timed iterations. The per-rank mean time is averaged over ranks and turned
// into nccl-tests bandwidths (algbw = bytes / time in decimal GB/s, busbw =
// algbw * 2(n-1)/n), so the numbers sit beside `gantry bench all_reduce`.
//
// Every size is also checked once, before timing, with inputs whose float sum
// is exact; a wrong element makes the exit code 7 (as nccl-tests).
//
// Gloo reports errors by throwing; this standalone harness catches them at the
// top of each rank and exits 1 with the message.
#include <getopt.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_one.h>
#include <gloo/config.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/units.h"

namespace {

constexpr int kExitWrongResults = 7;

struct Options {
  int ranks = 2;
  std::string algorithm = "ring_chunked";
  uint64_t min_bytes = 8;
  uint64_t max_bytes = 256ull << 20;
  uint64_t factor = 2;
  int iters = 20;
  int warmup = 1;
  bool json = false;
};

void Usage(std::FILE* out) {
  std::fprintf(
      out,
      "usage: gloo_allreduce_bench [--ranks N] [--algorithm ring_chunked|halving_doubling]\n"
      "                            [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [--json]\n"
      "Float sum allreduce over Gloo's TCP transport on 127.0.0.1 with N forked processes.\n"
      "Sizes are bytes per rank (K/M/G binary suffixes), doubling by default from 8 B to 256 MiB.\n"
      "Prints one row per size (bytes, time_us, algbw, busbw in GB/s as nccl-tests defines them),\n"
      "or a JSON object with --json. Exit code 7 when a result element is wrong.\n");
}

// Parses argv; returns false (after printing why) on a bad flag.
bool ParseOptions(int argc, char** argv, Options* o) {
  enum { kRanks = 1000, kAlgorithm, kJson, kHelp };
  static const option kLong[] = {{"ranks", required_argument, nullptr, kRanks},
                                 {"algorithm", required_argument, nullptr, kAlgorithm},
                                 {"minbytes", required_argument, nullptr, 'b'},
                                 {"maxbytes", required_argument, nullptr, 'e'},
                                 {"stepfactor", required_argument, nullptr, 'f'},
                                 {"iters", required_argument, nullptr, 'n'},
                                 {"warmup_iters", required_argument, nullptr, 'w'},
                                 {"json", no_argument, nullptr, kJson},
                                 {"help", no_argument, nullptr, kHelp},
                                 {nullptr, 0, nullptr, 0}};
  auto size_arg = [](const char* flag, const char* text, uint64_t* out) {
    auto r = gantry::ParseSize(text);
    if (!r.ok()) {
      std::fprintf(stderr, "gloo_allreduce_bench: %s: %s\n", flag, r.status().message().c_str());
      return false;
    }
    *out = *r;
    return true;
  };
  auto int_arg = [](const char* flag, const char* text, int min, int* out) {
    auto r = gantry::ParseInt(flag, text);
    if (!r.ok() || *r < min || *r > INT_MAX) {
      std::fprintf(stderr, "gloo_allreduce_bench: %s '%s': expected an integer >= %d\n", flag, text,
                   min);
      return false;
    }
    *out = static_cast<int>(*r);
    return true;
  };
  int c;
  while ((c = getopt_long(argc, argv, "b:e:f:n:w:h", kLong, nullptr)) != -1) {
    int factor = 0;
    switch (c) {
      case kRanks:
        if (!int_arg("--ranks", optarg, 1, &o->ranks)) return false;
        break;
      case kAlgorithm:
        o->algorithm = optarg;
        if (o->algorithm != "ring_chunked" && o->algorithm != "halving_doubling") {
          std::fprintf(
              stderr,
              "gloo_allreduce_bench: --algorithm '%s': use ring_chunked or halving_doubling\n",
              optarg);
          return false;
        }
        break;
      case 'b':
        if (!size_arg("-b", optarg, &o->min_bytes)) return false;
        break;
      case 'e':
        if (!size_arg("-e", optarg, &o->max_bytes)) return false;
        break;
      case 'f':
        if (!int_arg("-f", optarg, 2, &factor)) return false;
        o->factor = static_cast<uint64_t>(factor);
        break;
      case 'n':
        if (!int_arg("-n", optarg, 1, &o->iters)) return false;
        break;
      case 'w':
        if (!int_arg("-w", optarg, 0, &o->warmup)) return false;
        break;
      case kJson:
        o->json = true;
        break;
      case kHelp:
      case 'h':
        Usage(stdout);
        std::exit(0);
      default:
        Usage(stderr);
        return false;
    }
  }
  if (optind != argc) {
    std::fprintf(stderr, "gloo_allreduce_bench: unexpected argument '%s'\n", argv[optind]);
    return false;
  }
  if (o->min_bytes < sizeof(float) || o->min_bytes > o->max_bytes) {
    std::fprintf(stderr, "gloo_allreduce_bench: need 4 <= -b <= -e (got -b %llu -e %llu)\n",
                 static_cast<unsigned long long>(o->min_bytes),
                 static_cast<unsigned long long>(o->max_bytes));
    return false;
  }
  if (o->max_bytes / sizeof(float) > static_cast<uint64_t>(INT_MAX)) {
    std::fprintf(stderr, "gloo_allreduce_bench: -e %llu is above Gloo's int element count\n",
                 static_cast<unsigned long long>(o->max_bytes));
    return false;
  }
  return true;
}

struct SizeResult {
  uint64_t bytes;
  double time_us;
  double algbw;
  double busbw;
  int64_t wrong;
};

// One allreduce object per buffer size: Gloo algorithms bind their buffers and
// pairs at construction, and construction is not part of the timed loop.
std::unique_ptr<gloo::Algorithm> MakeAllreduce(const std::string& algorithm,
                                               const std::shared_ptr<gloo::Context>& ctx,
                                               float* data, int count) {
  std::vector<float*> ptrs{data};
  if (algorithm == "halving_doubling") {
    return std::make_unique<gloo::AllreduceHalvingDoubling<float>>(ctx, ptrs, count);
  }
  return std::make_unique<gloo::AllreduceRingChunked<float>>(ctx, ptrs, count);
}

// Sum over ranks of one double (for the time and the wrong-element count).
double SumOverRanks(const std::shared_ptr<gloo::Context>& ctx, double value) {
  std::vector<double*> ptrs{&value};
  gloo::AllreduceRing<double>(ctx, ptrs, 1).run();
  return value;
}

int RunRank(const Options& o, int rank, const std::string& store_dir) {
  gloo::transport::tcp::attr attr("127.0.0.1");
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore file_store(store_dir);
  gloo::rendezvous::PrefixStore store("gantry", file_store);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, o.ranks);
  ctx->connectFullMesh(store, device);
  std::shared_ptr<gloo::Context> context = ctx;
  gloo::BarrierAllToOne barrier(context);

  std::vector<float> data(o.max_bytes / sizeof(float));
  std::vector<SizeResult> results;
  const int n = o.ranks;
  const double bus_factor = n > 1 ? 2.0 * (n - 1) / n : 0.0;
  int64_t total_wrong = 0;
  for (uint64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.factor) {
    const int count = static_cast<int>(bytes / sizeof(float));
    auto allreduce = MakeAllreduce(o.algorithm, context, data.data(), count);

    // Check: element i of rank r is r + (i % 13); small integers, so the float
    // sum is exact in any order: sum_r r + n * (i % 13).
    for (int i = 0; i < count; ++i) data[i] = static_cast<float>(rank + i % 13);
    allreduce->run();
    int64_t wrong = 0;
    const double rank_sum = 0.5 * n * (n - 1);
    for (int i = 0; i < count; ++i) {
      if (data[i] != static_cast<float>(rank_sum + n * (i % 13))) ++wrong;
    }
    wrong = static_cast<int64_t>(SumOverRanks(context, static_cast<double>(wrong)));
    total_wrong += wrong;

    // Timed data starts at 1 and doubles per iteration; it may reach inf,
    // which costs the same to add on x86 (no denormals are ever produced).
    for (int i = 0; i < count; ++i) data[i] = 1.0f;
    for (int i = 0; i < o.warmup; ++i) allreduce->run();
    barrier.run();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iters; ++i) allreduce->run();
    double sec =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / o.iters;
    sec = SumOverRanks(context, sec) / n;
    double algbw = static_cast<double>(bytes) / 1e9 / sec;
    results.push_back({bytes, sec * 1e6, algbw, algbw * bus_factor, wrong});
    if (o.factor < 2 || bytes > o.max_bytes / o.factor) break;
  }

  if (rank == 0) {
    if (o.json) {
      std::printf(
          "{\"tool\": \"gloo\", \"gloo_version\": \"%d.%d.%d\", \"collective\": \"all_reduce\",\n",
          GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH);
      std::printf(" \"algorithm\": \"%s\", \"transport\": \"tcp 127.0.0.1\", \"nranks\": %d,\n",
                  o.algorithm.c_str(), n);
      std::printf(
          " \"type\": \"float\", \"redop\": \"sum\", \"iterations\": %d, \"warmup_iters\": %d,\n",
          o.iters, o.warmup);
      std::printf(" \"results\": [\n");
      for (size_t i = 0; i < results.size(); ++i) {
        const auto& r = results[i];
        std::printf(
            "  {\"size\": %llu, \"count\": %llu, \"time\": %.3f, \"alg_bw\": %.6f, "
            "\"bus_bw\": %.6f, \"nwrong\": %lld}%s\n",
            static_cast<unsigned long long>(r.bytes),
            static_cast<unsigned long long>(r.bytes / sizeof(float)), r.time_us, r.algbw, r.busbw,
            static_cast<long long>(r.wrong), i + 1 < results.size() ? "," : "");
      }
      std::printf(" ],\n \"wrong_elements\": %lld}\n", static_cast<long long>(total_wrong));
    } else {
      std::printf(
          "# gloo %d.%d.%d allreduce_%s, float sum, %d ranks, tcp 127.0.0.1, iters %d warmup %d\n",
          GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH, o.algorithm.c_str(), n,
          o.iters, o.warmup);
      std::printf("#%11s  %12s  %8s  %8s  %7s\n", "size(B)", "time(us)", "algbw", "busbw",
                  "#wrong");
      for (const auto& r : results) {
        std::printf("%12llu  %12.2f  %8.3f  %8.3f  %7lld\n",
                    static_cast<unsigned long long>(r.bytes), r.time_us, r.algbw, r.busbw,
                    static_cast<long long>(r.wrong));
      }
      std::printf("# wrong elements: %lld\n", static_cast<long long>(total_wrong));
    }
    std::fflush(stdout);
  }
  return total_wrong == 0 ? 0 : kExitWrongResults;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseOptions(argc, argv, &o)) return 2;

  char tmpl[] = "/tmp/gantry-gloo-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    std::perror("gloo_allreduce_bench: mkdtemp /tmp/gantry-gloo-XXXXXX");
    return 1;
  }
  const std::string store_dir = tmpl;

  // Fork every rank before any Gloo object exists (Gloo starts threads).
  std::vector<pid_t> children;
  for (int r = 0; r < o.ranks; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      std::perror("gloo_allreduce_bench: fork");
      break;
    }
    if (pid == 0) {
      int rc = 1;
      try {
        rc = RunRank(o, r, store_dir);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "gloo_allreduce_bench: rank %d: %s\n", r, e.what());
      }
      std::fflush(nullptr);
      _exit(rc);
    }
    children.push_back(pid);
  }
  int exit_code = static_cast<int>(children.size()) == o.ranks ? 0 : 1;
  for (pid_t pid : children) {
    int status = 0;
    if (waitpid(pid, &status, 0) < 0) {
      exit_code = 1;
      continue;
    }
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    if (code > exit_code) exit_code = code;
  }
  std::error_code ec;
  std::filesystem::remove_all(store_dir, ec);
  return exit_code;
}
