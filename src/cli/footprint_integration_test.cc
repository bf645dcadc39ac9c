// Every gantry command loads only what it uses (docs/architecture.md, "Optional
// libraries are loaded on first use"): the CUDA runtime, cuBLAS, NCCL and MPI
// are dlopened by the commands that need them, so `gantry --version` has no
// NEEDED entry for them and a serving `gantry agent` or `gantry gateway run`
// never maps them. The libraries are looked for in /proc/<pid>/maps while the
// service answers, and in `readelf -d` of the binary.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "testing/child_process.h"
#include "testing/gantry_cli.h"
#include "testing/temp_dir.h"

namespace gantry::testing {
namespace {

// The vendor libraries no command may load unless it uses them, as a path
// component or a readelf "[soname]", followed by '.' or '_' (libmpi.so.40).
const std::regex kOptional(
    R"([/\[](libcudart|libcublasLt|libcublas|libnccl|libmpi|libopen-pal|libopen-rte|libpmix)[._])");

// The lines of `text` (maps or readelf output) that name an optional library.
std::vector<std::string> OptionalLibraries(const std::string& text) {
  std::vector<std::string> found;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (std::regex_search(line, kOptional)) found.push_back(line);
  }
  return found;
}

std::string ReadMaps(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Footprint, TheMatcherFindsMappedAndNeededLibraries) {
  // The test must be able to fail: the matcher sees what a linked binary shows.
  EXPECT_THAT(
      OptionalLibraries("7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libmpi.so.40.30.4\n"),
      ::testing::SizeIs(1));
  EXPECT_THAT(OptionalLibraries(" 0x0000000000000001 (NEEDED) Shared library: [libcudart.so.13]\n"),
              ::testing::SizeIs(1));
  EXPECT_THAT(
      OptionalLibraries("7f00-7f01 r-xp 0 08:01 1 /usr/local/cuda/lib64/libcublasLt.so.13\n"),
      ::testing::SizeIs(1));
  EXPECT_THAT(OptionalLibraries("7f00-7f01 r-xp 0 08:01 1 /usr/lib/libc.so.6\n"),
              ::testing::IsEmpty());
}

TEST(Footprint, VersionRunsWithoutNeedingOptionalLibraries) {
  CliRun version = RunGantry({"--version"});
  EXPECT_EQ(version.rc, 0) << version.err;
  EXPECT_THAT(version.out, ::testing::HasSubstr("gantry"));

  const std::string readelf = FindTool("readelf");
  ASSERT_FALSE(readelf.empty()) << "readelf not found: install binutils";
  CliRun dyn = RunShell(readelf + " -d " + GantryBinary());
  ASSERT_EQ(dyn.rc, 0) << dyn.err;
  ASSERT_THAT(dyn.out, ::testing::HasSubstr("(NEEDED)"));
  EXPECT_THAT(OptionalLibraries(dyn.out), ::testing::IsEmpty()) << dyn.out;
}

// Waits for `ready` on stdout, then checks the process's mappings.
void ExpectServesWithoutOptionalLibraries(GantryProcess& p, const std::string& ready) {
  Result<std::vector<std::string>> line = p.WaitForLine(ready);
  ASSERT_TRUE(line.ok()) << line.status().message() << "\n" << p.Err();
  const std::string maps = ReadMaps(p.pid());
  ASSERT_THAT(maps, ::testing::HasSubstr("libc.so"));  // the maps were read
  EXPECT_THAT(OptionalLibraries(maps), ::testing::IsEmpty());
}

TEST(Footprint, AgentServesWithoutOptionalLibraries) {
  TempDir dir("gantry-footprint");
  const std::string config =
      dir.Write("agent.yaml", "listen: 127.0.0.1:" + std::to_string(FreePort()) +
                                  "\ncollection:\n  interval: 1s\n"
                                  "history:\n  path: " +
                                  dir.Path("history.db") + "\n");
  GantryProcess agent;
  ASSERT_TRUE(agent.Start({"agent", "--config", config}).ok());
  ExpectServesWithoutOptionalLibraries(agent, R"(gantry agent listening on )");
}

TEST(Footprint, GatewayServesWithoutOptionalLibraries) {
  TempDir dir("gantry-footprint");
  const std::string config =
      dir.Write("gateway.yaml", "listen: 127.0.0.1:" + std::to_string(FreePort()) +
                                    "\nworkers: 1\n"
                                    "backends:\n  - {name: llm, url: http://127.0.0.1:9}\n"
                                    "routes:\n  - {prefix: /v1/, protocol: openai, backend: llm, "
                                    "auth: none}\n"
                                    "state: " +
                                    dir.Path("gateway.db") + "\n");
  GantryProcess gateway;
  ASSERT_TRUE(gateway.Start({"gateway", "run", "--config", config}).ok());
  ExpectServesWithoutOptionalLibraries(gateway, R"(gantry gateway listening on )");
}

}  // namespace
}  // namespace gantry::testing
