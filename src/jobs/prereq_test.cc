// Step prerequisites: parsing and merging, and every check against real
// things on this machine (files, statvfs, $PATH, signatures made here, the
// Debian interpreter with a controlled sys.path, the fake NVML library).
#include "gantry/jobs/prereq.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gantry/health/nvml.h"
#include "gantry/registry/registry.h"
#include "gantry/security/dsse.h"
#include "testing/fake_nvml_scenario.h"
#include "testing/temp_dir.h"

namespace gantry::jobs {
namespace {

namespace fs = std::filesystem;
using gantry::testing::TempDir;

Result<Prerequisites> Parse(std::string_view yaml) {
  Result<Config> cfg = Config::LoadString(yaml, "wf.yaml");
  if (!cfg.ok()) return cfg.status();
  ASSIGN_OR_RETURN(Config view, cfg->Sub("requires"));
  return ParsePrerequisites(view);
}

Prerequisites MustParse(std::string_view yaml) {
  Result<Prerequisites> p = Parse(yaml);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : Prerequisites{};
}

std::string ParseError(std::string_view yaml) {
  Result<Prerequisites> p = Parse(yaml);
  EXPECT_FALSE(p.ok()) << yaml;
  return p.ok() ? std::string() : p.status().message();
}

bool Contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// ---------------------------------------------------------------- parsing

TEST(ParsePrerequisitesTest, ReadsEveryKey) {
  Prerequisites p = MustParse(R"(
requires:
  health: {profile: auto, checks: [filesystems, gpu_count]}
  python: ["torch>=2.1", numpy]
  executables: [nvidia-smi, python3]
  disk: [{path: /mnt/data, free: 100G}]
  gpu_memory_free: 40G
  datasets: [{path: data/train.bin, min_size: 1G, sha256: "AB12000000000000000000000000000000000000000000000000000000000000"}]
  signature: {dir: src, trusted_keys: [keys/ci.pub]}
  packages: ["torch>=2.1,<3", numpy, "pyyaml==6.*"]
  registries: [mcr.microsoft.com, myacr.azurecr.io/team/]
  python_interpreter: .venv/bin/python
  python_path: [site]
)");
  ASSERT_TRUE(p.health.has_value());
  EXPECT_EQ(p.health->profile, "auto");
  EXPECT_EQ(p.health->checks, (std::vector<std::string>{"filesystems", "gpu_count"}));
  EXPECT_EQ(p.python, (std::vector<std::string>{"torch>=2.1", "numpy"}));
  EXPECT_EQ(p.executables, (std::vector<std::string>{"nvidia-smi", "python3"}));
  ASSERT_EQ(p.disk.size(), 1u);
  EXPECT_EQ(p.disk[0].path, "/mnt/data");
  EXPECT_EQ(p.disk[0].min_free_bytes, 100ull << 30);
  EXPECT_EQ(p.gpu_memory_free_bytes, 40ull << 30);
  ASSERT_EQ(p.datasets.size(), 1u);
  EXPECT_EQ(p.datasets[0].path, "data/train.bin");  // kept relative
  EXPECT_EQ(p.datasets[0].min_bytes, 1ull << 30);
  EXPECT_EQ(p.datasets[0].sha256, "ab12" + std::string(60, '0'));  // lower-cased
  ASSERT_TRUE(p.signature.has_value());
  EXPECT_EQ(p.signature->dir, "src");
  EXPECT_EQ(p.signature->bundle, "src/model.sig");  // the default
  EXPECT_EQ(p.signature->trusted_keys, (std::vector<std::string>{"keys/ci.pub"}));
  ASSERT_TRUE(p.packages.has_value());
  EXPECT_EQ(p.packages->size(), 3u);
  EXPECT_EQ(p.registries, (std::vector<std::string>{"mcr.microsoft.com", "myacr.azurecr.io/team"}));
  EXPECT_EQ(p.python_interpreter, ".venv/bin/python");
  EXPECT_TRUE(p.python_interpreter_given);
  EXPECT_EQ(p.python_path, (std::vector<std::string>{"site"}));
  EXPECT_FALSE(p.empty());
}

TEST(ParsePrerequisitesTest, AbsentOrEmptyMeansNothingToCheck) {
  Prerequisites none = MustParse("name: x\n");
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.python_interpreter, "/usr/bin/python3");
  EXPECT_FALSE(none.python_interpreter_given);
  EXPECT_FALSE(none.packages.has_value());
  EXPECT_TRUE(MustParse("requires: {}\n").empty());
  EXPECT_TRUE(MustParse("requires:\n").empty());
  // An empty allowlist is a check (nothing may be installed), not its absence.
  Prerequisites empty_list = MustParse("requires: {packages: []}\n");
  ASSERT_TRUE(empty_list.packages.has_value());
  EXPECT_TRUE(empty_list.packages->empty());
  EXPECT_FALSE(empty_list.empty());
}

TEST(ParsePrerequisitesTest, HealthShortForms) {
  EXPECT_EQ(MustParse("requires: {health: true}\n").health->profile, "auto");
  EXPECT_FALSE(MustParse("requires: {health: false}\n").health.has_value());
  EXPECT_EQ(MustParse("requires: {health: generic}\n").health->profile, "generic");
  EXPECT_EQ(MustParse("requires: {health: {checks: [cpu]}}\n").health->profile, "auto");
}

TEST(ParsePrerequisitesTest, ErrorsNameThePlaceAndTheKey) {
  EXPECT_EQ(ParseError("requires:\n  pyhton: [torch]\n"),
            "wf.yaml:2:3: unknown key 'requires.pyhton' (did you mean 'requires.python'?)");
  std::string e = ParseError("requires:\n  python: [numpy, \"torch=>2.1\"]\n");
  EXPECT_TRUE(Contains(e, "wf.yaml:2:19: key 'requires.python.1'")) << e;
  EXPECT_TRUE(Contains(e, "starts with ==")) << e;
  e = ParseError("requires:\n  disk: [{path: /x, free: lots}]\n");
  EXPECT_TRUE(Contains(e, "wf.yaml:2:27")) << e;
  EXPECT_TRUE(Contains(e, "requires.disk.0.free")) << e;
  e = ParseError("requires:\n  disk: [{path: /x}]\n");
  EXPECT_TRUE(Contains(e, "'free' is required")) << e;
  e = ParseError("requires:\n  disk: [{path: /x, fre: 1G}]\n");
  EXPECT_TRUE(Contains(e, "did you mean 'requires.disk.0.free'")) << e;
  e = ParseError("requires:\n  python: [\"scikit-learn>=1\"]\n");
  EXPECT_TRUE(Contains(e, "requires.python.0")) << e;
  EXPECT_TRUE(Contains(e, "not a Python module name")) << e;
  e = ParseError("requires:\n  packages: [torch, numpy, \"Torch>=2\"]\n");
  EXPECT_TRUE(Contains(e, "requires.packages.2")) << e;
  EXPECT_TRUE(Contains(e, "already listed at wf.yaml:2:14")) << e;
  e = ParseError("requires:\n  packages: [\"torch>=2.1;python_version<'3'\"]\n");
  EXPECT_TRUE(Contains(e, "markers")) << e;
  e = ParseError("requires:\n  packages: [\"numpy==1.*.2\"]\n");
  EXPECT_TRUE(Contains(e, "not a PEP 440 version")) << e;
  e = ParseError("requires:\n  registries: [\"https://mcr.microsoft.com\"]\n");
  EXPECT_TRUE(Contains(e, "requires.registries.0")) << e;
  EXPECT_TRUE(Contains(e, "without a scheme")) << e;
  e = ParseError("requires:\n  datasets: [{path: d, sha256: abc}]\n");
  EXPECT_TRUE(Contains(e, "requires.datasets.0.sha256")) << e;
  EXPECT_TRUE(Contains(e, "64 hex digits")) << e;
  e = ParseError("requires:\n  signature: {dir: src}\n");
  EXPECT_TRUE(Contains(e, "'trusted_keys' is required")) << e;
  e = ParseError("requires:\n  signature: {dir: src, keys: [a.pub]}\n");
  EXPECT_TRUE(Contains(e, "unknown key 'requires.signature.keys'")) << e;
  e = ParseError("requires:\n  health: {profile: auto, check: [cpu]}\n");
  EXPECT_TRUE(Contains(e, "did you mean 'requires.health.checks'")) << e;
  e = ParseError("requires:\n  gpu_memory_free: plenty\n");
  EXPECT_TRUE(Contains(e, "requires.gpu_memory_free")) << e;
  e = ParseError("requires: [python]\n");
  EXPECT_TRUE(Contains(e, "expected a map of prerequisites")) << e;
  e = ParseError("requires:\n  python_interpreter: \"\"\n");
  EXPECT_TRUE(Contains(e, "empty interpreter path")) << e;
}

TEST(MergePrerequisitesTest, ConcatenatesListsAndLetsTheStepReplaceTheRest) {
  Prerequisites wf = MustParse(R"(
requires:
  health: generic
  python: [numpy]
  executables: [sh]
  disk: [{path: /a, free: 1G}]
  gpu_memory_free: 10G
  datasets: [{path: d1}]
  signature: {dir: src, trusted_keys: [k.pub]}
  packages: [numpy]
  registries: [mcr.microsoft.com]
  python_interpreter: /opt/venv/bin/python
)");
  Prerequisites step = MustParse(R"(
requires:
  python: ["torch>=2"]
  executables: [nvidia-smi]
  disk: [{path: /b, free: 2G}]
  gpu_memory_free: 5G
  datasets: [{path: d2}]
  packages: [torch, numpy]
  registries: [nvcr.io]
  python_interpreter: /usr/bin/python3
)");
  Prerequisites m = MergePrerequisites(wf, step);
  EXPECT_EQ(m.health->profile, "generic");  // the step has none: the workflow's
  EXPECT_EQ(m.python, (std::vector<std::string>{"numpy", "torch>=2"}));
  EXPECT_EQ(m.executables, (std::vector<std::string>{"sh", "nvidia-smi"}));
  ASSERT_EQ(m.disk.size(), 2u);
  EXPECT_EQ(m.disk[1].path, "/b");
  EXPECT_EQ(m.gpu_memory_free_bytes, 10ull << 30);  // both must hold
  ASSERT_EQ(m.datasets.size(), 2u);
  EXPECT_EQ(m.signature->dir, "src");
  EXPECT_EQ(*m.packages, (std::vector<std::string>{"torch", "numpy"}));  // replaced
  EXPECT_EQ(m.registries, (std::vector<std::string>{"mcr.microsoft.com", "nvcr.io"}));
  // Written explicitly by the step, so it wins although it is the default.
  EXPECT_EQ(m.python_interpreter, "/usr/bin/python3");

  Prerequisites only_wf = MergePrerequisites(wf, Prerequisites{});
  EXPECT_EQ(only_wf.python_interpreter, "/opt/venv/bin/python");
  EXPECT_EQ(*only_wf.packages, (std::vector<std::string>{"numpy"}));
  Prerequisites other = MustParse("requires: {health: {profile: p.yaml, checks: [cpu]}}\n");
  EXPECT_EQ(MergePrerequisites(wf, other).health->profile, "p.yaml");
}

TEST(PrereqResultsTest, SummaryAndJson) {
  std::vector<PrereqResult> rs = {
      {"executable sh", true, "found at /usr/bin/sh", {}},
      {"python torch>=2.1", false, "1.13.1 does not satisfy >=2.1", {}},
      {"packages", false, "1 of 3 ...", {"foo 1.0: not in the allowlist"}},
  };
  EXPECT_EQ(FailureSummary(rs),
            "python torch>=2.1: 1.13.1 does not satisfy >=2.1; packages: 1 of 3 ...");
  EXPECT_EQ(FailureSummary({rs[0]}), "");
  Json j = ToJson(rs);
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["check"], "executable sh");
  EXPECT_EQ(j[0]["ok"], true);
  EXPECT_FALSE(j[0].contains("details"));
  EXPECT_EQ(j[2]["details"][0], "foo 1.0: not in the allowlist");
}

// ---------------------------------------------------------------- checks

ImdsInfo VmOfSize(std::string size) {
  ImdsInfo vm;
  vm.vm_size = std::move(size);
  return vm;
}

class PrereqCheckTest : public ::testing::Test {
 protected:
  std::vector<PrereqResult> Run(const Prerequisites& p) {
    PrereqContext ctx;
    ctx.workdir = dir_.path();
    ctx.image = image_;
    ctx.gpus = gpus_;
    ctx.nvml_library = health::testing::FakeNvmlPath();
    return checker_.Check(p, ctx);
  }
  PrereqResult RunOne(const Prerequisites& p) {
    std::vector<PrereqResult> rs = Run(p);
    EXPECT_EQ(rs.size(), 1u);
    return rs.empty() ? PrereqResult{} : rs[0];
  }

  TempDir dir_{"gantry-prereq-test"};
  std::string image_;
  std::vector<int> gpus_;
  PrereqChecker checker_;
};

TEST_F(PrereqCheckTest, EmptyPrerequisitesGiveNoResults) {
  EXPECT_TRUE(Run(Prerequisites{}).empty());
}

TEST_F(PrereqCheckTest, Executables) {
  dir_.Write("run.sh", "#!/bin/sh\n");
  ::chmod(dir_.Path("run.sh").c_str(), 0755);
  dir_.Write("data.txt", "x");
  Prerequisites p;
  p.executables = {"sh", "gantry-no-such-tool", "./run.sh", "./data.txt"};
  std::vector<PrereqResult> rs = Run(p);
  ASSERT_EQ(rs.size(), 4u);
  EXPECT_TRUE(rs[0].ok);
  EXPECT_TRUE(Contains(rs[0].message, "found at /")) << rs[0].message;
  EXPECT_FALSE(rs[1].ok);
  EXPECT_TRUE(Contains(rs[1].message, "not found in $PATH")) << rs[1].message;
  EXPECT_TRUE(rs[2].ok) << rs[2].message;
  EXPECT_EQ(rs[2].message, "found at " + dir_.Path("run.sh"));
  EXPECT_FALSE(rs[3].ok);
  EXPECT_EQ(rs[3].message, dir_.Path("data.txt") + " is not an executable file");
}

TEST_F(PrereqCheckTest, DiskFreeSpace) {
  Prerequisites p;
  p.disk = {{".", 1}, {"out/not/yet", 1}, {".", 1ull << 62}};
  std::vector<PrereqResult> rs = Run(p);
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_TRUE(rs[0].ok) << rs[0].message;
  EXPECT_TRUE(Contains(rs[0].message, dir_.path() + ": ")) << rs[0].message;
  EXPECT_TRUE(Contains(rs[0].message, " free, needs 1 B")) << rs[0].message;
  EXPECT_TRUE(rs[1].ok) << rs[1].message;
  EXPECT_TRUE(Contains(rs[1].message, "(measured at " + dir_.path() + ", which exists)"))
      << rs[1].message;
  EXPECT_FALSE(rs[2].ok);
  EXPECT_TRUE(Contains(rs[2].message, "needs 4 EiB; free some space")) << rs[2].message;
}

// sha256sum of "hello\n".
constexpr char kHelloSha[] = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";

TEST_F(PrereqCheckTest, DatasetSizeAndDigest) {
  dir_.Write("train.bin", "hello\n");
  fs::create_directories(dir_ / "shards/a");
  dir_.Write("shards/one", std::string(1000, 'x'));
  dir_.Write("shards/a/two", std::string(24, 'y'));
  Prerequisites p;
  p.datasets = {
      {"train.bin", 6, kHelloSha}, {"train.bin", 7, ""}, {"train.bin", 0, std::string(64, '0')},
      {"shards", 1024, ""},        {"shards", 1025, ""}, {"shards", 0, kHelloSha},
      {"missing.bin", 0, ""}};
  std::vector<PrereqResult> rs = Run(p);
  ASSERT_EQ(rs.size(), 7u);
  EXPECT_TRUE(rs[0].ok) << rs[0].message;
  EXPECT_EQ(rs[0].message, dir_.Path("train.bin") + ": 6 B, needs at least 6 B, sha256 matches");
  EXPECT_FALSE(rs[1].ok);
  EXPECT_TRUE(Contains(rs[1].message, "6 B, needs at least 7 B")) << rs[1].message;
  EXPECT_FALSE(rs[2].ok);
  EXPECT_TRUE(Contains(rs[2].message, std::string("sha256 ") + kHelloSha + " is not the expected"))
      << rs[2].message;
  EXPECT_TRUE(rs[3].ok) << rs[3].message;
  EXPECT_TRUE(Contains(rs[3].message, "1 KiB in the directory")) << rs[3].message;
  EXPECT_FALSE(rs[4].ok);
  EXPECT_FALSE(rs[5].ok);
  EXPECT_TRUE(Contains(rs[5].message, "is a directory")) << rs[5].message;
  EXPECT_FALSE(rs[6].ok);
  EXPECT_TRUE(Contains(rs[6].message, "does not exist")) << rs[6].message;
  EXPECT_TRUE(Contains(rs[6].message, "relative to the workdir " + dir_.path())) << rs[6].message;
}

TEST_F(PrereqCheckTest, DatasetDigestIsComputedAgainAfterTheFileChanges) {
  const std::string path = dir_.Write("train.bin", "hello\n");
  Prerequisites p;
  p.datasets = {{"train.bin", 0, kHelloSha}};
  EXPECT_TRUE(RunOne(p).ok);
  // Same size, new content and a different modification time: a step
  // rewrote it. The checker must not answer from its cache.
  dir_.Write("train.bin", "HELLO\n");
  struct timespec times[2] = {{1'000'000, 0}, {1'000'000, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  PrereqResult r = RunOne(p);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(Contains(r.message, "is not the expected")) << r.message;
}

TEST_F(PrereqCheckTest, SignatureOfTheCodeDirectory) {
  fs::create_directories(dir_ / "src/pkg");
  dir_.Write("src/train.py", "print('train')\n");
  dir_.Write("src/pkg/util.py", "X = 1\n");
  Result<security::KeyPairPem> key = security::GenerateSigningKey(security::KeyAlgorithm::kEd25519);
  Result<security::KeyPairPem> other =
      security::GenerateSigningKey(security::KeyAlgorithm::kEcdsaP256);
  ASSERT_TRUE(key.ok() && other.ok());
  dir_.Write("ci.pub", key->public_pem);
  dir_.Write("other.pub", other->public_pem);
  dir_.Write("bad.pub", "not a key\n");
  Result<security::DsseSigner> signer = security::DsseSigner::FromPrivatePem(key->private_pem);
  ASSERT_TRUE(signer.ok());
  Result<std::string> bundle = registry::SignDirectory(dir_.Path("src"), *signer);
  ASSERT_TRUE(bundle.ok()) << bundle.status().ToString();
  dir_.Write("src/model.sig", *bundle);

  Prerequisites p;
  p.signature = SignaturePrereq{"src", "src/model.sig", {"other.pub", "ci.pub"}};
  PrereqResult r = RunOne(p);
  EXPECT_EQ(r.check, "signature src");
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_TRUE(Contains(r.message, "signed by trusted key " + signer->KeyId() + " (ci.pub)"))
      << r.message;

  p.signature->trusted_keys = {"other.pub"};
  r = RunOne(p);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(Contains(r.message, "does not verify")) << r.message;

  p.signature->trusted_keys = {"bad.pub"};
  r = RunOne(p);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(Contains(r.message, "trusted key " + dir_.Path("bad.pub"))) << r.message;

  p.signature->trusted_keys = {"ci.pub"};
  p.signature->bundle = "nowhere.sig";
  r = RunOne(p);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(Contains(r.message, "cannot read the signature bundle")) << r.message;

  p.signature->bundle = "src/model.sig";
  dir_.Write("src/pkg/util.py", "X = 2\n");  // tampered after signing
  r = RunOne(p);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(Contains(r.message, "pkg/util.py")) << r.message;
  EXPECT_TRUE(Contains(r.message, "differs from what was signed")) << r.message;
}

TEST_F(PrereqCheckTest, ImageRegistries) {
  struct Case {
    std::string image;
    std::vector<std::string> approved;
    bool ok;
    std::string in_message;
  };
  const std::vector<Case> cases = {
      {"ubuntu:22.04", {"docker.io"}, true, "docker.io/library/ubuntu"},
      {"ubuntu", {"mcr.microsoft.com"}, false, "registry docker.io (repository library/ubuntu)"},
      {"pytorch/pytorch:2.1.0", {"docker.io/pytorch"}, true, "docker.io/pytorch/pytorch"},
      {"index.docker.io/library/ubuntu", {"docker.io/library"}, true, "approved by"},
      {"mcr.microsoft.com/azureml/base:latest", {"mcr.microsoft.com"}, true, "approved by"},
      {"MCR.Microsoft.com/azureml/base", {"mcr.microsoft.com"}, true, "approved by"},
      {"myacr.azurecr.io/team/train:1", {"myacr.azurecr.io/team"}, true, "approved by"},
      {"myacr.azurecr.io/teamx/train:1", {"myacr.azurecr.io/team"}, false, "myacr.azurecr.io"},
      {"myacr.azurecr.io.evil.com/team/train", {"myacr.azurecr.io"}, false, "evil"},
      {"localhost:5000/train@sha256:abcd", {"localhost:5000"}, true, "localhost:5000/train"},
      {"localhost/train", {"localhost:5000"}, false, "registry localhost "},
      {"nvcr.io/nvidia/pytorch:24.01-py3",
       {"mcr.microsoft.com", "myacr.azurecr.io"},
       false,
       "not approved (approved: mcr.microsoft.com, myacr.azurecr.io)"},
      {"registry:5000/x", {"registry:5000"}, true, "approved by"},
      {"/bad", {"docker.io"}, false, "malformed image reference"},
  };
  for (const Case& c : cases) {
    image_ = c.image;
    Prerequisites p;
    p.registries = c.approved;
    PrereqResult r = RunOne(p);
    EXPECT_EQ(r.check, "registry " + c.image);
    EXPECT_EQ(r.ok, c.ok) << c.image << ": " << r.message;
    EXPECT_TRUE(Contains(r.message, c.in_message)) << c.image << ": " << r.message;
  }
  // No approved list: not checked. No image: nothing to check.
  image_ = "ubuntu";
  EXPECT_TRUE(Run(Prerequisites{}).empty());
  image_.clear();
  Prerequisites p;
  p.registries = {"mcr.microsoft.com"};
  EXPECT_TRUE(Run(p).empty());
}

TEST_F(PrereqCheckTest, GpuMemoryFreeThroughNvml) {
  health::testing::FakeNvmlEnv env;
  nlohmann::json s = health::testing::HealthyNode(4);
  s["gpus"][2]["memory_info"] = {{"total", 85520809984ull}, {"used", 60ull << 30}};
  env.Write(s);
  gpus_ = {0, 2, 7};
  Prerequisites p;
  p.gpu_memory_free_bytes = 40ull << 30;
  std::vector<PrereqResult> rs = Run(p);
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_EQ(rs[0].check, "gpu_memory_free GPU 0");
  EXPECT_TRUE(rs[0].ok) << rs[0].message;
  EXPECT_EQ(rs[0].message, "79.6 GiB free of 79.6 GiB, needs 40 GiB");
  EXPECT_FALSE(rs[1].ok);
  EXPECT_TRUE(Contains(rs[1].message, "19.6 GiB free of 79.6 GiB, needs 40 GiB")) << rs[1].message;
  EXPECT_FALSE(rs[2].ok);  // no GPU 7 on this node
  EXPECT_TRUE(Contains(rs[2].message, "GPU 7")) << rs[2].message;
}

TEST_F(PrereqCheckTest, GpuMemoryFreeWithoutGpusOrWithoutNvml) {
  Prerequisites p;
  p.gpu_memory_free_bytes = 1;
  PrereqResult r = RunOne(p);  // the step has no GPUs
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.message, "no GPUs given to the step: nothing to check");

  gpus_ = {0};
  PrereqContext ctx;
  ctx.gpus = {0};
  ctx.nvml_library = dir_.Path("libnvidia-ml-missing.so.1");
  std::vector<PrereqResult> rs = PrereqChecker().Check(p, ctx);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_FALSE(rs[0].ok);
  EXPECT_TRUE(Contains(rs[0].message, "NVML is not available")) << rs[0].message;
}

TEST_F(PrereqCheckTest, NvmlIsNotLoadedUnlessAPrerequisiteNeedsIt) {
  health::testing::FakeNvmlEnv env;
  env.Write(health::testing::HealthyNode(2));
  gpus_ = {0, 1};
  dir_.Write("data", "x");
  Prerequisites p;
  p.executables = {"sh"};
  p.disk = {{".", 1}};
  p.datasets = {{"data", 1, ""}};
  for (const PrereqResult& r : Run(p)) EXPECT_TRUE(r.ok) << r.check << ": " << r.message;
  EXPECT_TRUE(env.Calls().empty()) << env.Calls().size() << " NVML calls";
  p.gpu_memory_free_bytes = 1;
  Run(p);
  ASSERT_FALSE(env.Calls().empty());
  EXPECT_EQ(env.Calls()[0].value("call", ""), "nvmlInit_v2");
}

// ---------------------------------------------------------------- health

TEST_F(PrereqCheckTest, HealthWithAProfileFileRelativeToTheWorkdir) {
  fs::create_directories(dir_ / "scratch");
  dir_.Write("ok.yaml", "name: prereq-ok\nchecks:\n  filesystems:\n    - {path: " +
                            dir_.Path("scratch") + ", min_free: 1}\n");
  dir_.Write("bad.yaml", "name: prereq-bad\nchecks:\n  cpu: {}\n  filesystems:\n    - {path: " +
                             dir_.Path("gone") + "}\n");
  Prerequisites p;
  p.health = HealthPrereq{"ok.yaml", {}};
  PrereqResult r = RunOne(p);
  EXPECT_EQ(r.check, "health ok.yaml");
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_TRUE(Contains(r.message, "profile prereq-ok: pass (1 check: 1 pass)")) << r.message;

  p.health = HealthPrereq{"bad.yaml", {}};
  r = RunOne(p);
  EXPECT_FALSE(r.ok) << r.message;
  EXPECT_TRUE(Contains(r.message, "first problem: filesystems: ")) << r.message;
  ASSERT_EQ(r.details.size(), 1u);
  EXPECT_TRUE(r.details[0].starts_with("filesystems: ")) << r.details[0];

  // Only the named checks run.
  p.health = HealthPrereq{"bad.yaml", {"cpu"}};
  r = RunOne(p);
  EXPECT_EQ(r.check, "health bad.yaml [cpu]");
  EXPECT_TRUE(r.ok) << r.message;

  p.health = HealthPrereq{"bad.yaml", {"gpu_count"}};
  r = RunOne(p);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(Contains(r.message, "check 'gpu_count' is not in profile prereq-bad")) << r.message;

  p.health = HealthPrereq{"no-such-profile", {}};
  r = RunOne(p);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(Contains(r.message, "neither a built-in profile (")) << r.message;
}

TEST_F(PrereqCheckTest, HealthVerdictIsCachedPerProfileAndChecks) {
  dir_.Write("ok.yaml",
             "name: prereq-ok\nchecks:\n  filesystems:\n    - {path: " + dir_.path() + "}\n");
  Prerequisites p;
  p.health = HealthPrereq{"ok.yaml", {}};
  PrereqResult first = RunOne(p);
  ASSERT_TRUE(first.ok) << first.message;
  // The profile file is gone, yet the second step gets the first verdict.
  fs::remove(dir_ / "ok.yaml");
  PrereqResult second = RunOne(p);
  EXPECT_TRUE(second.ok) << second.message;
  EXPECT_EQ(second.message, first.message + " (cached: the node's health is checked once per run)");
  // Other checks of the same profile are another key: it really runs (and
  // finds no file now).
  p.health->checks = {"filesystems"};
  EXPECT_FALSE(RunOne(p).ok);
}

TEST_F(PrereqCheckTest, HealthAutoUsesTheVmSizeAndNvmlForGpuChecks) {
  health::testing::FakeNvmlEnv env;
  env.Write(health::testing::HealthyNode(8));
  FakeImds imds(VmOfSize("Standard_ND96isr_H100_v5"));
  PrereqContext ctx;
  ctx.workdir = dir_.path();
  ctx.nvml_library = health::testing::FakeNvmlPath();
  Prerequisites p;
  p.health = HealthPrereq{"auto", {"gpu_count"}};
  std::vector<PrereqResult> rs;
  {
    PrereqChecker checker(PrereqOptions{.imds = &imds});
    rs = checker.Check(p, ctx);
    ASSERT_EQ(rs.size(), 1u);
    EXPECT_TRUE(rs[0].ok) << rs[0].message;
    EXPECT_TRUE(Contains(rs[0].message, "profile nd96isr_h100_v5: pass")) << rs[0].message;
  }  // its NVML handle is shut down: the fake reads the next scenario

  // A node that lost a GPU, seen by a fresh checker.
  env.Write(health::testing::HealthyNode(7));
  rs = PrereqChecker(PrereqOptions{.imds = &imds}).Check(p, ctx);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_FALSE(rs[0].ok);
  EXPECT_TRUE(Contains(rs[0].message, "first problem: gpu_count: ")) << rs[0].message;
}

TEST_F(PrereqCheckTest, HealthAutoOffAzureUsesGenericAndSaysSo) {
  FakeImds imds(Unavailable("http://169.254.169.254: no answer (not an Azure VM?)"));
  PrereqChecker checker(PrereqOptions{.imds = &imds});
  PrereqContext ctx;
  ctx.workdir = dir_.path();
  Prerequisites p;
  p.health = HealthPrereq{"auto", {"cpu"}};
  std::vector<PrereqResult> rs = checker.Check(p, ctx);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_TRUE(rs[0].ok) << rs[0].message;
  EXPECT_TRUE(Contains(rs[0].message, "profile generic: pass")) << rs[0].message;
  EXPECT_TRUE(Contains(rs[0].message, "no VM size from Azure IMDS")) << rs[0].message;

  FakeImds unknown(VmOfSize("Standard_D2s_v5"));
  rs = PrereqChecker(PrereqOptions{.imds = &unknown}).Check(p, ctx);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_TRUE(Contains(rs[0].message, "VM size Standard_D2s_v5 has no profile; used generic"))
      << rs[0].message;
}

// ---------------------------------------------------------------- Python

// A Python environment made of a directory: modules and *.dist-info
// metadata, seen through python_path (the interpreter runs isolated, so
// nothing installed on this machine shows up).
class PythonPrereqTest : public PrereqCheckTest {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists("/usr/bin/python3")) << "no /usr/bin/python3 (Debian python3)";
    fs::create_directories(dir_ / "site");
  }
  void Distribution(const std::string& name, const std::string& version,
                    const std::string& top_level = "") {
    const std::string info = "site/" + name + "-" + version + ".dist-info";
    fs::create_directories(dir_ / info);
    dir_.Write(info + "/METADATA",
               "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n");
    if (!top_level.empty()) dir_.Write(info + "/top_level.txt", top_level + "\n");
  }
  void Module(const std::string& name, const std::string& code) {
    fs::create_directories(dir_ / ("site/" + name));
    dir_.Write("site/" + name + "/__init__.py", code);
  }
  Prerequisites Env() {
    Prerequisites p;
    p.python_path = std::vector<std::string>{"site"};
    return p;
  }
};

TEST_F(PythonPrereqTest, ModulesAndTheirVersions) {
  Distribution("Gantry_Fake", "2.1.0rc1", "gantryfake");
  Module("gantryfake", "");
  Module("onlyver", "__version__ = '1.13.1+dfsg'\n");
  Module("noisy", "print('hello from noisy')\nimport os\nos.write(1, b'raw fd 1\\n')\n");
  Module("broken", "raise RuntimeError('boom at import')\n");
  Prerequisites p = Env();
  p.python = {"gantryfake>=2.1", "gantryfake>=2.0", "onlyver~=1.13.0", "onlyver>=2",
              "noisy",           "broken",          "not_installed",   "json"};
  std::vector<PrereqResult> rs = Run(p);
  ASSERT_EQ(rs.size(), 8u);
  EXPECT_FALSE(rs[0].ok);
  EXPECT_TRUE(
      rs[0].message.starts_with("2.1.0rc1 does not satisfy >=2.1 (distribution "
                                "Gantry_Fake, " +
                                dir_.Path("site/gantryfake/__init__.py") + ")"))
      << rs[0].message;
  EXPECT_TRUE(FailureSummary({rs[0]}).starts_with(
      "python gantryfake>=2.1: 2.1.0rc1 does not satisfy >=2.1 ("));
  EXPECT_TRUE(rs[1].ok) << rs[1].message;
  EXPECT_TRUE(Contains(rs[1].message, "gantryfake 2.1.0rc1 (distribution Gantry_Fake"))
      << rs[1].message;
  EXPECT_TRUE(rs[2].ok) << rs[2].message;
  EXPECT_TRUE(Contains(rs[2].message, "1.13.1+dfsg (__version__")) << rs[2].message;
  EXPECT_FALSE(rs[3].ok);
  EXPECT_TRUE(rs[4].ok) << rs[4].message;  // its prints do not spoil the report
  EXPECT_TRUE(Contains(rs[4].message, "no version")) << rs[4].message;
  EXPECT_FALSE(rs[5].ok);
  EXPECT_TRUE(Contains(rs[5].message, "RuntimeError: boom at import")) << rs[5].message;
  EXPECT_FALSE(rs[6].ok);
  EXPECT_TRUE(Contains(rs[6].message, "ModuleNotFoundError")) << rs[6].message;
  EXPECT_TRUE(rs[7].ok) << rs[7].message;  // the standard library is still there
}

TEST_F(PythonPrereqTest, ModulesInTheWorkdirImport) {
  dir_.Write("localmod.py", "__version__ = '0.3'\n");
  Prerequisites p;  // the interpreter's own environment, run in the workdir
  p.python = {"localmod==0.3"};
  PrereqResult r = RunOne(p);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST_F(PythonPrereqTest, PackagesAllowlist) {
  Distribution("alpha", "1.0");
  Distribution("Beta_Pkg", "2.3");
  Distribution("gamma", "0.1");
  Distribution("delta", "1.0-ubuntu1");
  Prerequisites p = Env();
  p.packages = std::vector<std::string>{"alpha>=1", "beta.pkg==2.*", "gamma", "delta"};
  PrereqResult r = RunOne(p);
  EXPECT_EQ(r.check, "packages");
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_TRUE(Contains(r.message, "all 4 installed distributions of Python 3.")) << r.message;

  p.packages = std::vector<std::string>{"alpha>=1.1", "beta-pkg~=2.3", "delta>=1"};
  r = RunOne(p);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(Contains(r.message, "3 of 4 installed distributions")) << r.message;
  std::vector<std::string> details = r.details;
  std::sort(details.begin(), details.end());
  EXPECT_EQ(details, (std::vector<std::string>{
                         "alpha 1.0: does not satisfy alpha>=1.1",
                         "delta 1.0-ubuntu1: does not satisfy delta>=1 (not a PEP 440 version)",
                         "gamma 0.1: not in the allowlist",
                     }));
}

TEST_F(PythonPrereqTest, OneProbeServesModulesAndPackages) {
  Distribution("alpha", "1.0", "alpha");
  Module("alpha", "");
  Prerequisites p = Env();
  p.python = {"alpha==1.0"};
  p.packages = std::vector<std::string>{"alpha"};
  p.executables = {"sh"};
  std::vector<PrereqResult> rs = Run(p);
  ASSERT_EQ(rs.size(), 3u);
  // In the documented order: python, executables, ..., packages.
  EXPECT_EQ(rs[0].check, "python alpha==1.0");
  EXPECT_EQ(rs[1].check, "executable sh");
  EXPECT_EQ(rs[2].check, "packages");
  for (const PrereqResult& r : rs) EXPECT_TRUE(r.ok) << r.check << ": " << r.message;
}

TEST_F(PythonPrereqTest, AMissingInterpreterFailsEachCheckAndSaysWhy) {
  Prerequisites p = Env();
  p.python_interpreter = "/nonexistent/bin/python3";
  p.python = {"numpy", "torch>=2"};
  p.packages = std::vector<std::string>{};
  std::vector<PrereqResult> rs = Run(p);
  ASSERT_EQ(rs.size(), 3u);
  for (const PrereqResult& r : rs) {
    EXPECT_FALSE(r.ok);
    EXPECT_TRUE(Contains(r.message, "Python interpreter /nonexistent/bin/python3")) << r.message;
  }
}

TEST_F(PythonPrereqTest, AHangingImportIsStoppedByTheTimeout) {
  Module("sleepy", "import time\ntime.sleep(60)\n");
  PrereqChecker checker(PrereqOptions{.python_timeout = std::chrono::milliseconds(500)});
  PrereqContext ctx;
  ctx.workdir = dir_.path();
  Prerequisites p = Env();
  p.python = {"sleepy"};
  std::vector<PrereqResult> rs = checker.Check(p, ctx);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_FALSE(rs[0].ok);
  EXPECT_TRUE(Contains(rs[0].message, "killed")) << rs[0].message;
}

}  // namespace
}  // namespace gantry::jobs
