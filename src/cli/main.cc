// The `gantry` binary. Dispatch only: nccl-tests names (argv[0] = *_perf) and
// `gantry bench` go to the bench front end, everything else through CLI11.
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>

#include "cli.h"
#include "gantry/config.h"
#include "gantry/core/log.h"

namespace gantry::cli {

namespace {

std::string FeatureLine() {
  std::string f;
  auto add = [&](const char* name, bool on) {
    f += name;
    f += on ? "=on " : "=off ";
  };
  add("shm", true);
  add("mpi", GANTRY_HAVE_MPI);
  add("cuda", GANTRY_HAVE_CUDA);
  add("nccl", GANTRY_HAVE_NCCL);
  add("python", GANTRY_HAVE_PYTHON);
  add("numa", GANTRY_HAVE_NUMA);
  if (!f.empty()) f.pop_back();
  return f;
}

int Main(int argc, char** argv) {
  std::string_view self = argv[0];
  if (auto slash = self.rfind('/'); slash != std::string_view::npos) self.remove_prefix(slash + 1);
  constexpr std::string_view kPerfSuffix = "_perf";
  if (self.size() > kPerfSuffix.size() && self.ends_with(kPerfSuffix)) {
    std::string_view op = self.substr(0, self.size() - kPerfSuffix.size());
    if (IsPerfCollective(op)) return PerfMain(op, argc, argv);
  }
  if (argc >= 2 && std::strcmp(argv[1], "bench") == 0) return BenchMain(argc - 1, argv + 1);

  CLI::App app{
      "Gantry: well-architected AI workloads on GPU and CPU Linux machines.\n"
      "Exit codes: 0 ok, 1 check failed, 2 usage/config error, 7 wrong collective results.",
      "gantry"};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "Print the version and the features compiled in");
  Action action;
  RegisterDoctor(app, &action);
  RegisterCkpt(app, &action);
  RegisterGateway(app, &action);
  RegisterAudit(app, &action);
  RegisterAdvise(app, &action);
  RegisterHealth(app, &action);
  RegisterTune(app, &action);
  RegisterDrift(app, &action);
  RegisterAssess(app, &action);
  RegisterJobs(app, &action);
  RegisterAutoscale(app, &action);
  RegisterRegistry(app, &action);
  RegisterAgent(app, &action);
  RegisterReport(app, &action);
  RegisterBackup(app, &action);
  RegisterStorage(app, &action);
  // `bench` is parsed by BenchMain above; it is listed here so that `gantry --help`
  // shows it.
  app.add_subcommand("bench",
                     "Collective benchmarks, nccl-tests compatible: gantry bench all_reduce "
                     "-b 8 -e 256M -f 2 --ranks 2 (see gantry bench --help)");
  OneValuePerFlag(&app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  if (version) {
    std::cout << "gantry " << GANTRY_VERSION << " (" << FeatureLine() << ")\n";
    return kExitOk;
  }
  if (action) return action();
  std::cout << app.help();
  return kExitUsage;
}

}  // namespace
}  // namespace gantry::cli

int main(int argc, char** argv) { return gantry::cli::Main(argc, argv); }
