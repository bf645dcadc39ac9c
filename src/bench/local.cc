// RunBenchmarkLocal: ranks may be forked children, so rank 0 hands its report
// to the caller through a private temporary directory.
#include <stdlib.h>

#include <cerrno>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include "gantry/bench/collectives.h"
#include "gantry/core/json.h"

namespace gantry::bench {
namespace {

constexpr int kExitFailed = 1;
constexpr int kExitWrongResults = 7;

// "<code>\n<message>" so the caller gets the rank's Status back intact.
std::string EncodeStatus(const Status& s) {
  return std::to_string(static_cast<int>(s.code())) + "\n" + s.message();
}

Status DecodeStatus(const std::string& text) {
  size_t nl = text.find('\n');
  int code = std::atoi(text.substr(0, nl).c_str());
  std::string message = nl == std::string::npos ? text : text.substr(nl + 1);
  if (code <= 0 || code > static_cast<int>(StatusCode::kIoError))
    code = static_cast<int>(StatusCode::kInternal);
  return Status(static_cast<StatusCode>(code), message);
}

}  // namespace

Result<Report> RunBenchmarkLocal(const comm::LaunchOptions& launch, Collective collective,
                                 const BenchOptions& options) {
  RETURN_IF_ERROR(ValidateOptions(options, collective));
  std::error_code ec;
  std::string tmpl = (std::filesystem::temp_directory_path(ec) / "gantry-bench-XXXXXX").string();
  if (ec || mkdtemp(tmpl.data()) == nullptr) {
    return IoError("creating a temporary directory for the benchmark report", errno);
  }
  const std::filesystem::path dir = tmpl;
  struct Cleanup {
    std::filesystem::path dir;
    ~Cleanup() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } cleanup{dir};

  Result<int> exit_code = comm::RunRanks(launch, [&](comm::Communicator& comm) {
    const std::string base = (dir / ("rank" + std::to_string(comm.rank()))).string();
    Result<Report> report = RunBenchmark(comm, collective, options, nullptr);
    if (!report.ok()) {
      (void)WriteFileAtomic(base + ".err", EncodeStatus(report.status()));
      return kExitFailed;
    }
    if (comm.rank() == 0) {
      Status s = WriteFileAtomic(base + ".json", report->ToJson().dump());
      if (!s.ok()) return kExitFailed;
    }
    return report->wrong_results() ? kExitWrongResults : 0;
  });
  if (!exit_code.ok()) return exit_code.status();

  Result<std::string> text = ReadFile((dir / "rank0.json").string());
  if (text.ok()) {
    ASSIGN_OR_RETURN(Json j, ParseJson(*text, "benchmark report"));
    return Report::FromJson(j);
  }
  // No report: return the error of the lowest rank that wrote one.
  std::optional<std::pair<int, std::filesystem::path>> first_error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();  // "rank<N>.err"
    if (!name.ends_with(".err")) continue;
    int rank = std::atoi(name.c_str() + 4);
    if (!first_error || rank < first_error->first) first_error.emplace(rank, entry.path());
  }
  if (first_error) {
    ASSIGN_OR_RETURN(std::string encoded, ReadFile(first_error->second.string()));
    return DecodeStatus(encoded);
  }
  if (*exit_code == 0) {
    return FailedPrecondition(
        "no benchmark report in this process: rank 0 holds it (under an MPI "
        "launcher, read the result on rank 0)");
  }
  return Internal("benchmark ranks exited with code " + std::to_string(*exit_code) +
                  " and left no report (a rank crashed?)");
}

}  // namespace gantry::bench
