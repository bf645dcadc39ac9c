#include "gantry/health/detect.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/fake_root.h"

namespace gantry::health {
namespace {

using ::gantry::testing::FakeRoot;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// /proc/cpuinfo in the x86 format: `n` processors, with physical/core ids when
// `ids` is set (package = cpu / per_package, core = (cpu % per_package) / 2).
std::string X86Cpuinfo(int n, bool ids, int per_package = 4) {
  std::string text;
  for (int cpu = 0; cpu < n; ++cpu) {
    text += "processor\t: " + std::to_string(cpu) +
            "\nvendor_id\t: GenuineIntel\n"
            "model name\t: Intel(R) Xeon(R) Platinum 8480C\n";
    if (ids) {
      text += "physical id\t: " + std::to_string(cpu / per_package) + "\n";
      text += "core id\t\t: " + std::to_string((cpu % per_package) / 2) + "\n";
    }
    text += "flags\t\t: fpu vme de pse\n\n";
  }
  return text;
}

TEST(ParseIdListTest, ExpandsRangesAndSingles) {
  auto ids = ParseIdList("0-3,8,10-11\n");
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(*ids, ElementsAre(0, 1, 2, 3, 8, 10, 11));
  ids = ParseIdList("");
  ASSERT_TRUE(ids.ok());
  EXPECT_TRUE(ids->empty());
  for (const char* bad : {"a", "3-1", "1-", "-1", "0,,1", "0-x"}) {
    auto r = ParseIdList(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr(bad));
  }
}

TEST(DetectCpuTest, TopologyFromSysfs) {
  FakeRoot root;
  // cpuinfo without ids: sysfs alone must give 2 sockets x 2 cores x 2 threads.
  root.Write("/proc/cpuinfo", X86Cpuinfo(8, /*ids=*/false));
  root.Write("/sys/devices/system/cpu/online", "0-7\n");
  for (int cpu = 0; cpu < 8; ++cpu) {
    std::string topo = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    root.Write(topo + "physical_package_id", std::to_string(cpu / 4) + "\n");
    root.Write(topo + "core_id", std::to_string((cpu % 4) / 2) + "\n");
  }
  auto cpu = DetectCpu(root.path());
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  EXPECT_EQ(cpu->model, "Intel(R) Xeon(R) Platinum 8480C");
  EXPECT_EQ(cpu->sockets, 2);
  EXPECT_EQ(cpu->cores, 4);
  EXPECT_EQ(cpu->threads, 8);
}

TEST(DetectCpuTest, OnlineListLimitsThreads) {
  FakeRoot root;
  root.Write("/proc/cpuinfo", X86Cpuinfo(4, /*ids=*/true));
  root.Write("/sys/devices/system/cpu/online", "0,2\n");
  for (int cpu : {0, 2}) {
    std::string topo = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    root.Write(topo + "physical_package_id", "0\n");
    root.Write(topo + "core_id", std::to_string(cpu) + "\n");
  }
  auto cpu = DetectCpu(root.path());
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(cpu->threads, 2);
  EXPECT_EQ(cpu->cores, 2);
  EXPECT_EQ(cpu->sockets, 1);
}

TEST(DetectCpuTest, FallsBackToCpuinfoIds) {
  FakeRoot root;
  root.Write("/proc/cpuinfo", X86Cpuinfo(8, /*ids=*/true, /*per_package=*/8));
  auto cpu = DetectCpu(root.path());
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  EXPECT_EQ(cpu->sockets, 1);
  EXPECT_EQ(cpu->cores, 4);
  EXPECT_EQ(cpu->threads, 8);
}

TEST(DetectCpuTest, ArmWithoutIdsIsOneCorePerThread) {
  FakeRoot root;
  std::string text;
  for (int cpu = 0; cpu < 4; ++cpu) {
    text += "processor\t: " + std::to_string(cpu) +
            "\nBogoMIPS\t: 108.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd08\n\n";
  }
  text += "Hardware\t: BCM2835\nModel\t\t: Raspberry Pi 4 Model B Rev 1.4\n";
  root.Write("/proc/cpuinfo", text);
  auto cpu = DetectCpu(root.path());
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(cpu->model, "Raspberry Pi 4 Model B Rev 1.4");
  EXPECT_EQ(cpu->sockets, 1);
  EXPECT_EQ(cpu->cores, 4);
  EXPECT_EQ(cpu->threads, 4);
}

TEST(DetectCpuTest, Errors) {
  FakeRoot root;
  auto missing = DetectCpu(root.path());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("/proc/cpuinfo"));
  root.Write("/proc/cpuinfo", "garbage\n");
  auto empty = DetectCpu(root.path());
  EXPECT_EQ(empty.status().code(), StatusCode::kDataLoss);
  root.Write("/proc/cpuinfo", "processor : 0\n");
  auto bare = DetectCpu(root.path());
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->model, "unknown");
}

TEST(DetectMemoryTest, ReadsTotalAndAvailable) {
  FakeRoot root;
  root.Write("/proc/meminfo",
             "MemTotal:       24684092 kB\nMemFree:        24231792 kB\n"
             "MemAvailable:   24332088 kB\nBuffers:           12345 kB\n");
  auto mem = DetectMemory(root.path());
  ASSERT_TRUE(mem.ok()) << mem.status().ToString();
  EXPECT_EQ(mem->total_bytes, 24684092ull * 1024);
  EXPECT_EQ(mem->available_bytes, 24332088ull * 1024);
  EXPECT_FALSE(mem->swap_total_bytes.has_value());
}

TEST(DetectMemoryTest, ReadsSwapTotal) {
  FakeRoot root;
  root.Write("/proc/meminfo", "MemTotal: 1000 kB\nSwapTotal:  2048 kB\nSwapFree: 0 kB\n");
  auto mem = DetectMemory(root.path());
  ASSERT_TRUE(mem.ok()) << mem.status().ToString();
  EXPECT_EQ(mem->swap_total_bytes, std::optional<uint64_t>(2048u * 1024));
  root.Write("/proc/meminfo", "MemTotal: 1000 kB\nSwapTotal: none kB\n");
  mem = DetectMemory(root.path());
  ASSERT_TRUE(mem.ok());
  EXPECT_FALSE(mem->swap_total_bytes.has_value());
}

TEST(DetectMemoryTest, OldKernelsUseMemFree) {
  FakeRoot root;
  root.Write("/proc/meminfo", "MemTotal: 1000 kB\nMemFree: 250 kB\n");
  auto mem = DetectMemory(root.path());
  ASSERT_TRUE(mem.ok());
  EXPECT_EQ(mem->available_bytes, 250u * 1024);
}

TEST(DetectMemoryTest, Errors) {
  FakeRoot root;
  EXPECT_EQ(DetectMemory(root.path()).status().code(), StatusCode::kNotFound);
  root.Write("/proc/meminfo", "MemTotal: lots kB\nMemFree: 1 kB\n");
  auto bad = DetectMemory(root.path());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(bad.status().message(), HasSubstr("MemTotal"));
}

TEST(DetectNumaTest, OnlineFileDirectoriesOrOne) {
  FakeRoot root;
  EXPECT_EQ(DetectNumaNodes(root.path()), 1);
  root.Mkdir("/sys/devices/system/node/node0");
  root.Mkdir("/sys/devices/system/node/node1");
  root.Mkdir("/sys/devices/system/node/power");
  EXPECT_EQ(DetectNumaNodes(root.path()), 2);
  root.Write("/sys/devices/system/node/online", "0-3\n");
  EXPECT_EQ(DetectNumaNodes(root.path()), 4);
}

TEST(DetectGpusTest, FromTheDriverProcFiles) {
  FakeRoot root;
  for (const char* bus : {"0000:9b:00.0", "0000:1a:00.0"}) {
    root.Write(std::string("/proc/driver/nvidia/gpus/") + bus + "/information",
               "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 154\nGPU UUID: \t GPU-1234\n"
               "Bus Location: \t " +
                   std::string(bus) + "\n");
  }
  root.Mkdir("/proc/driver/nvidia/gpus/0000:cc:00.0");  // no information file
  GpuInfo gpus = DetectGpus(root.path(), "");
  EXPECT_EQ(gpus.count, 3);
  EXPECT_THAT(gpus.models,
              ElementsAre("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", "unknown"));
  EXPECT_EQ(gpus.source, "/proc/driver/nvidia/gpus");
  EXPECT_EQ(gpus.error, "");
}

TEST(DetectGpusTest, NoGpusAndNoTool) {
  FakeRoot root;
  GpuInfo gpus = DetectGpus(root.path(), root.path() + "/usr/bin/nvidia-smi");
  EXPECT_EQ(gpus.count, 0);
  EXPECT_EQ(gpus.source, "none");
  EXPECT_EQ(gpus.error, "");
  EXPECT_EQ(DetectGpus(root.path(), "gantry-no-such-tool-for-test").source, "none");
}

TEST(DetectGpusTest, FromNvidiaSmi) {
  FakeRoot root;
  std::string tool = root.Write("/bin/nvidia-smi",
                                "#!/bin/sh\n[ \"$1\" = -L ] || exit 3\n"
                                "echo 'GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-aaaa)'\n"
                                "echo 'GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-bbbb)'\n",
                                /*executable=*/true);
  GpuInfo gpus = DetectGpus(root.path(), tool);
  EXPECT_EQ(gpus.count, 2);
  EXPECT_THAT(gpus.models, ElementsAre("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"));
  EXPECT_EQ(gpus.source, "nvidia-smi -L");
  EXPECT_EQ(gpus.error, "");
}

TEST(DetectGpusTest, FailingNvidiaSmiIsReported) {
  FakeRoot root;
  std::string tool = root.Write("/bin/nvidia-smi",
                                "#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't "
                                "communicate with the NVIDIA driver.\"\nexit 9\n",
                                /*executable=*/true);
  GpuInfo gpus = DetectGpus(root.path(), tool);
  EXPECT_EQ(gpus.count, 0);
  EXPECT_THAT(gpus.error, HasSubstr("exited with status 9"));
  EXPECT_THAT(gpus.error, HasSubstr("couldn't communicate with the NVIDIA driver"));
}

TEST(DetectGpusTest, HungNvidiaSmiIsKilled) {
  FakeRoot root;
  std::string tool =
      root.Write("/bin/nvidia-smi", "#!/bin/sh\nexec sleep 30\n", /*executable=*/true);
  GpuInfo gpus = DetectGpus(root.path(), tool, std::chrono::milliseconds(200));
  EXPECT_EQ(gpus.count, 0);
  EXPECT_THAT(gpus.error, HasSubstr("did not finish within 200 ms"));
}

TEST(DetectShmTest, SizeAndFreeSpace) {
  FakeRoot root;
  auto missing = DetectShm(root.path());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("/dev/shm"));
  root.Mkdir("/dev/shm");
  auto shm = DetectShm(root.path());
  ASSERT_TRUE(shm.ok()) << shm.status().ToString();
  EXPECT_EQ(shm->path, root.path() + "/dev/shm");
  EXPECT_GT(shm->size_bytes, 0u);
  EXPECT_LE(shm->free_bytes, shm->size_bytes);
}

}  // namespace
}  // namespace gantry::health
