// The Slurm backend against a real single-node Slurm (munged + slurmctld +
// slurmd, started by tests/jobs_slurm/start_cluster.py on free 127.0.0.1
// ports; AccountingStorageType=accounting_storage/none, so sacct refuses and
// Poll must live on squeue and the exit files). One cluster per test binary
// process. Needs root and the Debian packages munge, slurmctld, slurmd and
// slurm-client; without them every test fails naming what is missing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gantry/core/subprocess.h"
#include "gantry/jobs/backend.h"
#include "testing/temp_dir.h"

extern char** environ;

namespace gantry::jobs {
namespace {

using namespace std::chrono_literals;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// start_cluster.py as a child: its stdin is our pipe (closing it stops the
// cluster, also when this process dies), its first stdout line says READY
// <slurm.conf> or ERROR <why>.
class Cluster {
 public:
  // "" on success, else why the cluster did not start.
  std::string Start() {
    const std::string script =
        std::string(GANTRY_SOURCE_DIR) + "/tests/jobs_slurm/start_cluster.py";
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return "pipe failed";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    std::vector<std::string> args = {"/usr/bin/python3", script};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int rc = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    stdin_ = in[1];
    if (rc != 0) {
      close(out[0]);
      pid_ = -1;
      return "cannot start /usr/bin/python3 " + script + ": " + std::strerror(rc);
    }
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + 240s;
    while (line.find('\n') == std::string::npos) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{out[0], POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buf[4096];
      ssize_t n = read(out[0], buf, sizeof buf);
      if (n <= 0) break;
      line.append(buf, n);
    }
    close(out[0]);
    line = line.substr(0, line.find('\n'));
    if (line.rfind("READY ", 0) == 0) {
      conf_ = line.substr(6);
      return "";
    }
    return "the test Slurm cluster did not start: " + (line.empty() ? "(no answer)" : line);
  }

  void Stop() {
    if (stdin_ >= 0) close(stdin_);
    stdin_ = -1;
    if (pid_ > 0) {
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    pid_ = -1;
  }

  const std::string& conf() const { return conf_; }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  std::string conf_;
};

class SlurmBackendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new Cluster;
    error_ = new std::string(cluster_->Start());
    if (error_->empty()) {
      setenv("SLURM_CONF", cluster_->conf().c_str(), 1);
      unsetenv("SLURMD_NODENAME");
    }
  }
  static void TearDownTestSuite() {
    cluster_->Stop();
    delete cluster_;
    delete error_;
  }

  void SetUp() override { ASSERT_TRUE(error_->empty()) << *error_; }

  static SlurmOptions Options() {
    SlurmOptions o;
    o.poll_min = 200ms;
    o.poll_max = 1s;
    o.since = std::chrono::system_clock::now() - std::chrono::hours(24);
    return o;
  }

  Launch MakeLaunch(const std::string& key, std::vector<std::string> argv) {
    Launch l;
    l.key = key;
    l.run_id = "itest";
    l.argv = std::move(argv);
    l.workdir = dir_.path();
    l.log_path = dir_.Path(key + ".log");
    l.exit_path = dir_.Path(key + ".exit");
    return l;
  }

  // Polls until `done` holds for the job (a hang guard, not a timing check:
  // a slow machine only takes longer).
  template <typename Pred>
  Observed PollUntil(Backend& b, const std::string& id, Pred done) {
    const auto deadline = std::chrono::steady_clock::now() + 180s;
    Observed last;
    while (std::chrono::steady_clock::now() < deadline) {
      auto r = b.Poll({id});
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (r.ok()) {
        last = r->at(id);
        if (done(last)) return last;
      }
      b.Wait(1s);
    }
    ADD_FAILURE() << "job " << id << " did not get there; last state "
                  << static_cast<int>(last.state) << " (" << last.reason << ")";
    return last;
  }

  static bool Ended(const Observed& o) {
    return o.state != JobState::kQueued && o.state != JobState::kRunning &&
           o.state != JobState::kPreempted;
  }

  static std::string ScontrolShowJob(const std::string& id) {
    auto r = RunSubprocess({"scontrol", "show", "job", "-o", id.substr(6)}, 30s);
    return r.ok() ? r->out : r.status().ToString();
  }

  static Cluster* cluster_;
  static std::string* error_;
  gantry::testing::TempDir dir_{"gantry-slurm-itest"};
};

Cluster* SlurmBackendTest::cluster_ = nullptr;
std::string* SlurmBackendTest::error_ = nullptr;

TEST_F(SlurmBackendTest, StepSucceedsWithItsLogAndExitFile) {
  auto b = MakeSlurmBackend(Options());
  EXPECT_TRUE(b->Adopts());
  Launch l = MakeLaunch("prepare", {"/bin/sh", "-c", "echo \"hello from $GANTRY_STEP\"; pwd"});
  l.env = {{"GANTRY_STEP", "prepare it's"}};
  // A '%' in the log path must not become a Slurm pattern (%j: the job id).
  l.log_path = dir_.Path("prepare 100%j.log");
  auto id = b->Submit(l);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(id->rfind("slurm:", 0), 0u) << *id;
  Observed o = PollUntil(*b, *id, Ended);
  EXPECT_EQ(o.state, JobState::kSucceeded) << o.reason;
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(ReadAll(l.log_path), "hello from prepare it's\n" + dir_.path() + "\n");
  EXPECT_EQ(ReadAll(l.exit_path), "0\n");
}

TEST_F(SlurmBackendTest, FailingStepReportsExitCode3) {
  auto b = MakeSlurmBackend(Options());
  Launch l = MakeLaunch("fail", {"/bin/sh", "-c", "echo failing >&2; exit 3"});
  auto id = b->Submit(l);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  Observed o = PollUntil(*b, *id, Ended);
  EXPECT_EQ(o.state, JobState::kFailed) << o.reason;
  EXPECT_EQ(o.exit_code, 3);
  EXPECT_EQ(ReadAll(l.exit_path), "3\n");
  EXPECT_EQ(ReadAll(l.log_path), "failing\n");

  // Without an exit file the code comes from Slurm's own record (squeue's
  // exit_code here, since this cluster has no accounting).
  Launch bare = MakeLaunch("fail-bare", {"/bin/sh", "-c", "exit 4"});
  bare.exit_path.clear();
  id = b->Submit(bare);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  o = PollUntil(*b, *id, Ended);
  EXPECT_EQ(o.state, JobState::kFailed) << o.reason;
  EXPECT_EQ(o.exit_code, 4);
  EXPECT_EQ(o.reason, "NonZeroExitCode");
}

TEST_F(SlurmBackendTest, CancelStopsARunningJob) {
  auto b = MakeSlurmBackend(Options());
  Launch l = MakeLaunch("sleeper", {"sleep", "300"});
  auto id = b->Submit(l);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  Observed o = PollUntil(*b, *id, [](const Observed& o) { return o.state != JobState::kQueued; });
  ASSERT_EQ(o.state, JobState::kRunning) << o.reason;
  ASSERT_TRUE(b->Cancel(*id, 30s).ok());
  o = PollUntil(*b, *id, Ended);
  EXPECT_EQ(o.state, JobState::kCancelled) << o.reason;
  // sleep died of the SIGTERM; the script outlived it and recorded that.
  EXPECT_EQ(o.exit_code, 143);
  EXPECT_EQ(ReadAll(l.exit_path), "143\n");
}

TEST_F(SlurmBackendTest, CancelKillsAJobThatIgnoresSigterm) {
  auto b = MakeSlurmBackend(Options());
  // The step ignores SIGTERM (and so does the sleep it runs); only the plain
  // scancel after the grace ends it.
  Launch l = MakeLaunch("stubborn", {"/bin/sh", "-c", "trap '' TERM; echo up; sleep 300"});
  auto id = b->Submit(l);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  PollUntil(*b, *id, [&](const Observed&) { return ReadAll(l.log_path) == "up\n"; });
  ASSERT_TRUE(b->Cancel(*id, 1s).ok());
  Observed o = PollUntil(*b, *id, Ended);
  EXPECT_EQ(o.state, JobState::kCancelled) << o.reason;
}

TEST_F(SlurmBackendTest, CancelOfAPendingJob) {
  auto b = MakeSlurmBackend(Options());
  Launch l = MakeLaunch("held", {"true"});
  l.resources.slurm_args = {"--hold"};  // stays PENDING (JobHeldUser)
  auto id = b->Submit(l);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto first = b->Poll({*id});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->at(*id).state, JobState::kQueued);
  EXPECT_EQ(first->at(*id).reason, "JobHeldUser");
  // A pending job cannot be signalled; Cancel falls back to a plain scancel.
  ASSERT_TRUE(b->Cancel(*id, 10s).ok());
  Observed o = PollUntil(*b, *id, Ended);
  EXPECT_EQ(o.state, JobState::kCancelled) << o.reason;
}

TEST_F(SlurmBackendTest, TimeLimitIsTimedOutWithExitCode124) {
  auto b = MakeSlurmBackend(Options());
  Launch l = MakeLaunch("slow", {"sleep", "300"});
  l.timeout = 1s;  // -> --time=1, Slurm's smallest limit: one minute
  auto id = b->Submit(l);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  Observed o = PollUntil(*b, *id, Ended);
  EXPECT_EQ(o.state, JobState::kTimedOut) << o.reason;
  EXPECT_EQ(o.exit_code, 124);
  // Slurm's SIGTERM at the limit killed sleep; the script recorded that.
  EXPECT_EQ(ReadAll(l.exit_path), "143\n");
}

TEST_F(SlurmBackendTest, ANewBackendFollowsAJobItDidNotSubmit) {
  Launch l = MakeLaunch("adopted", {"/bin/sh", "-c", "sleep 2; exit 5"});
  std::string id;
  {
    auto first = MakeSlurmBackend(Options());
    auto r = first->Submit(l);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    id = *r;
  }  // the client "restarts": nothing of the first backend is left
  auto second = MakeSlurmBackend(Options());
  Observed o = PollUntil(*second, id, Ended);
  EXPECT_EQ(o.state, JobState::kFailed) << o.reason;
  EXPECT_EQ(o.exit_code, 5);  // from squeue: this backend does not know the exit file

  auto third = MakeSlurmBackend(Options());
  third->Reattach(id, l);
  auto r = third->Poll({id});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->at(id).state, JobState::kFailed);
  EXPECT_EQ(r->at(id).exit_code, 5);
}

TEST_F(SlurmBackendTest, AJobSlurmForgotIsReadFromItsExitFileOrLost) {
  // Job 999999 is unknown to this cluster, as a finished job is once it is
  // past MinJobAge on a cluster without accounting.
  const std::string gone = "slurm:999999";
  Launch l = MakeLaunch("forgotten", {"true"});
  std::ofstream(l.exit_path) << "0\n";
  auto b = MakeSlurmBackend(Options());
  b->Reattach(gone, l);
  auto r = b->Poll({gone});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->at(gone).state, JobState::kSucceeded) << r->at(gone).reason;
  EXPECT_EQ(r->at(gone).exit_code, 0);

  // Without an exit file: queued for lost_after (sbatch may be ahead of the
  // lists), then lost.
  SlurmOptions o = Options();
  o.lost_after = 1h;
  auto patient = MakeSlurmBackend(o);
  r = patient->Poll({gone, "local:1:2"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->at(gone).state, JobState::kQueued);
  EXPECT_EQ(r->at("local:1:2").state, JobState::kLost);
  o.lost_after = 0ms;
  auto impatient = MakeSlurmBackend(o);
  r = impatient->Poll({gone});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->at(gone).state, JobState::kLost);
  EXPECT_NE(r->at(gone).reason.find("999999"), std::string::npos) << r->at(gone).reason;
}

TEST_F(SlurmBackendTest, ResourcesBecomeSbatchFlags) {
  auto b = MakeSlurmBackend(Options());
  Launch l = MakeLaunch("resources", {"true"});
  l.resources.cpus = 1;
  l.resources.memory_bytes = 1024 * 1024;        // the test node declares 1 MB (RealMemory default)
  l.resources.time = std::chrono::seconds(250);  // 4 min 10 s -> 5 minutes
  l.resources.partition = "test";
  l.resources.slurm_args = {"--nice=10"};
  auto id = b->Submit(l);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  const std::string job = ScontrolShowJob(*id);
  EXPECT_NE(job.find("JobName=gantry-itest "), std::string::npos) << job;
  EXPECT_NE(job.find("Comment=resources "), std::string::npos) << job;
  EXPECT_NE(job.find("TimeLimit=00:05:00 "), std::string::npos) << job;
  EXPECT_NE(job.find("Partition=test "), std::string::npos) << job;
  EXPECT_NE(job.find("MinMemoryNode=1M "), std::string::npos) << job;
  EXPECT_NE(job.find("Nice=10 "), std::string::npos) << job;
  EXPECT_NE(job.find("Requeue=1 "), std::string::npos) << job;
  EXPECT_EQ(PollUntil(*b, *id, Ended).state, JobState::kSucceeded);

  // What sbatch refuses comes back as Unavailable with sbatch's own words.
  l.resources.partition = "no-such-partition";
  auto bad = b->Submit(l);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(bad.status().message().find("Invalid partition name specified"), std::string::npos)
      << bad.status().message();
}

TEST_F(SlurmBackendTest, AControllerThatIsGoneIsAnErrorNotAFailedJob) {
  // The cluster's slurm.conf with the controller on a port nobody listens on.
  std::string conf = ReadAll(cluster_->conf());
  const std::string key = "SlurmctldPort=";
  size_t at = conf.find(key);
  ASSERT_NE(at, std::string::npos) << conf;
  conf.replace(at + key.size(), conf.find('\n', at) - at - key.size(), "1");
  const std::string dead = dir_.Write("dead.conf", conf);
  setenv("SLURM_CONF", dead.c_str(), 1);
  SlurmOptions o = Options();
  auto b = MakeSlurmBackend(o);
  auto id = b->Submit(MakeLaunch("unreachable", {"true"}));
  auto polled = b->Poll({"slurm:1"});
  setenv("SLURM_CONF", cluster_->conf().c_str(), 1);

  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(id.status().message().find("Unable to contact slurm controller"), std::string::npos)
      << id.status().message();
  EXPECT_NE(id.status().message().find("after 4 tries"), std::string::npos)
      << id.status().message();
  // Poll fails as a whole (the runner retries next cycle); no job is
  // reported failed or lost.
  ASSERT_FALSE(polled.ok());
  EXPECT_EQ(polled.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(polled.status().message().find("squeue"), std::string::npos)
      << polled.status().message();
}

}  // namespace
}  // namespace gantry::jobs
