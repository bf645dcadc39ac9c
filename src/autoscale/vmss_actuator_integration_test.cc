// The vmss actuator against an ARM contract server (tests/autoscale/
// arm_contract_server.js), and its requests compared with those Microsoft's
// @azure/arm-compute SDK sends for the same operations (arm_sdk_ops.js).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "gantry/autoscale/actuator.h"
#include "node_contract_server.h"
#include "testing/temp_dir.h"

namespace gantry::autoscale {
namespace {

using namespace std::chrono_literals;
using testing::Essence;
using testing::NodeServer;
using testing::OfOp;
using testing::ReadRecords;

constexpr char kToken[] = "arm-test-token";
// @azure/arm-compute 24.1.0 pins this api-version; Gantry is configured to match.
constexpr char kSdkApiVersion[] = "2026-03-01";

class VmssActuatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string missing = testing::NodeMissing("@azure/arm-compute");
    ASSERT_TRUE(missing.empty()) << missing;  // install-deps.sh runs npm ci: never skip
    ::setenv("GANTRY_TEST_ARM_TOKEN", kToken, 1);
  }

  // A server with `extra` flags, recording to <dir>/<name>.jsonl.
  std::unique_ptr<NodeServer> Serve(const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args = {"--record", dir_.Path(name + ".jsonl"), "--token", kToken};
    args.insert(args.end(), extra.begin(), extra.end());
    auto s = std::make_unique<NodeServer>("arm_contract_server.js", args);
    EXPECT_TRUE(s->ok()) << s->error();
    return s;
  }
  std::vector<Json> Records(const std::string& name) {
    return ReadRecords(dir_.Path(name + ".jsonl"));
  }

  VmssConfig Config(const NodeServer& server) {
    VmssConfig c;
    c.subscription = "sub-1";
    c.resource_group = "rg-1";
    c.name = "pool";
    c.endpoint = server.url();
    c.api_version = kSdkApiVersion;
    c.timeout = 5s;
    c.operation_timeout = 120s;
    c.credential.kind = security::AzureIdentity::kEnvironmentToken;
    c.credential.token_env = "GANTRY_TEST_ARM_TOKEN";
    return c;
  }

  std::unique_ptr<Actuator> New(const VmssConfig& c) {
    Result<std::unique_ptr<Actuator>> a = NewVmssActuator(c, clock_);
    EXPECT_TRUE(a.ok()) << a.status().message();
    return a.ok() ? std::move(*a) : nullptr;
  }

  ::gantry::testing::TempDir dir_{"gantry-vmss-test"};
  FakeClock clock_;
};

TEST_F(VmssActuatorTest, ReadsScalesOutAndDeletesChosenInstances) {
  auto server = Serve("gantry", {"--capacity", "3", "--page-size", "2", "--protected", "2"});
  ASSERT_TRUE(server->ok());
  auto vmss = New(Config(*server));
  ASSERT_NE(vmss, nullptr);
  EXPECT_EQ(vmss->kind(), "vmss");
  EXPECT_TRUE(vmss->CanChooseVictims());

  Result<Capacity> cap = vmss->Read();
  ASSERT_TRUE(cap.ok()) << cap.status().message();
  EXPECT_EQ(cap->target, 3);
  EXPECT_EQ(cap->ready, 3);
  EXPECT_FALSE(cap->busy);
  ASSERT_EQ(cap->instances.size(), 3u) << "both pages read";
  EXPECT_EQ(cap->instances[0].id, "0");
  EXPECT_EQ(cap->instances[0].name, "pool000000");
  EXPECT_EQ(cap->instances[0].state, "Running");
  EXPECT_TRUE(cap->instances[0].ready);
  EXPECT_FALSE(cap->instances[0].protected_from_scale_in);
  EXPECT_TRUE(cap->instances[2].protected_from_scale_in);
  EXPECT_LT(cap->instances[0].created, cap->instances[1].created);
  EXPECT_EQ(cap->instances[1].created - cap->instances[0].created, 60s);

  ASSERT_TRUE(vmss->ScaleOut(5).ok());
  cap = vmss->Read();
  ASSERT_TRUE(cap.ok()) << cap.status().message();
  EXPECT_EQ(cap->target, 5);
  EXPECT_EQ(cap->ready, 5) << "the operation was polled to Succeeded";

  Status in = vmss->ScaleIn(3, {"0", "3"});
  ASSERT_TRUE(in.ok()) << in.message();
  cap = vmss->Read();
  ASSERT_TRUE(cap.ok());
  EXPECT_EQ(cap->target, 3);
  std::vector<std::string> ids;
  for (const Instance& i : cap->instances) ids.push_back(i.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"1", "2", "4"}));

  // A protected instance is refused before anything is sent.
  size_t before = OfOp(Records("gantry"), "delete_instances").size();
  Status prot = vmss->ScaleIn(2, {"2"});
  EXPECT_EQ(prot.code(), StatusCode::kFailedPrecondition) << prot.message();
  EXPECT_NE(prot.message().find("protectFromScaleIn"), std::string::npos);
  EXPECT_EQ(OfOp(Records("gantry"), "delete_instances").size(), before);
}

TEST_F(VmssActuatorTest, SendsWhatMicrosoftsSdkSends) {
  auto ours = Serve("gantry", {"--capacity", "3", "--page-size", "2"});
  auto theirs = Serve("sdk", {"--capacity", "3", "--page-size", "2"});
  ASSERT_TRUE(ours->ok() && theirs->ok());

  auto vmss = New(Config(*ours));
  ASSERT_NE(vmss, nullptr);
  ASSERT_TRUE(vmss->Read().ok());
  ASSERT_TRUE(vmss->ScaleOut(5).ok());
  ASSERT_TRUE(vmss->Read().ok());
  ASSERT_TRUE(vmss->ScaleIn(3, {"0", "3"}).ok());

  Result<SubprocessResult> sdk = RunSubprocess(
      {testing::NodeBinary(), testing::SourceDir() + "/tests/autoscale/arm_sdk_ops.js",
       "--endpoint", theirs->url(), "--subscription", "sub-1", "--resource-group", "rg-1", "--name",
       "pool", "--token", kToken, "--capacity", "5", "--delete", "0,3"},
      60s);
  ASSERT_TRUE(sdk.ok()) << sdk.status().message();
  ASSERT_EQ(sdk->exit_code, 0) << sdk->err;

  std::vector<Json> g = Records("gantry"), s = Records("sdk");
  const std::vector<std::string> headers = {"authorization", "content-type", "if-match"};
  for (const char* op : {"get_vmss", "list_vms", "update_vmss", "delete_instances"}) {
    std::vector<Json> go = OfOp(g, op), so = OfOp(s, op);
    ASSERT_FALSE(go.empty()) << "Gantry sent no " << op;
    ASSERT_FALSE(so.empty()) << "the SDK sent no " << op;
    EXPECT_EQ(Essence(go[0], headers).dump(2), Essence(so[0], headers).dump(2)) << op;
  }
  // The second page: both followed nextLink as given.
  ASSERT_GE(OfOp(g, "list_vms").size(), 2u);
  ASSERT_GE(OfOp(s, "list_vms").size(), 2u);
  EXPECT_EQ(Essence(OfOp(g, "list_vms")[1], headers).dump(),
            Essence(OfOp(s, "list_vms")[1], headers).dump());
  // Both waited on the operations (Azure-AsyncOperation) before going on.
  EXPECT_GE(OfOp(g, "poll_operation").size(), 2u);
  EXPECT_GE(OfOp(s, "poll_operation").size(), 2u);
  // The PATCH carried the ETag the GET returned.
  EXPECT_EQ(OfOp(g, "update_vmss")[0]["headers"]["if-match"], "\"1\"");
}

TEST_F(VmssActuatorTest, ThrottlingIsWaitedOutOnTheClockThenReported) {
  auto server = Serve("gantry", {"--throttle", "2", "--retry-after", "7"});
  ASSERT_TRUE(server->ok());
  auto vmss = New(Config(*server));
  auto start = clock_.Now();
  Result<Capacity> cap = vmss->Read();
  ASSERT_TRUE(cap.ok()) << cap.status().message();
  EXPECT_EQ(clock_.Now() - start, 14s) << "two Retry-After: 7 waits";

  auto stuck = Serve("stuck", {"--throttle", "100", "--retry-after", "7"});
  auto vmss2 = New(Config(*stuck));
  Result<Capacity> fail = vmss2->Read();
  ASSERT_FALSE(fail.ok());
  EXPECT_EQ(fail.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(fail.status().message().find("retry after 7 s"), std::string::npos)
      << fail.status().message();
  EXPECT_NE(fail.status().message().find("TooManyRequests"), std::string::npos);
  EXPECT_EQ(Records("stuck").size(), 5u) << "one try and four retries";
}

TEST_F(VmssActuatorTest, AChangedETagIsReadAgainOnce) {
  auto server = Serve("gantry", {"--conflict"});
  ASSERT_TRUE(server->ok());
  auto vmss = New(Config(*server));
  ASSERT_TRUE(vmss->Read().ok());
  Status out = vmss->ScaleOut(4);
  ASSERT_TRUE(out.ok()) << out.message();
  std::vector<Json> r = Records("gantry");
  std::vector<Json> patches = OfOp(r, "update_vmss");
  ASSERT_EQ(patches.size(), 2u);
  EXPECT_EQ(patches[0]["headers"]["if-match"], "\"1\"");
  EXPECT_EQ(patches[1]["headers"]["if-match"], "\"2\"") << "the ETag read again after 412";
  EXPECT_EQ(OfOp(r, "get_vmss").size(), 2u);
}

TEST_F(VmssActuatorTest, RefusedTokenIsPermissionDeniedNamingTheIdentity) {
  auto server = Serve("gantry", {});
  ASSERT_TRUE(server->ok());
  ::setenv("GANTRY_TEST_ARM_WRONG", "not-the-token", 1);
  VmssConfig c = Config(*server);
  c.credential.kind = security::AzureIdentity::kEnvironmentToken;
  c.credential.token_env = "GANTRY_TEST_ARM_WRONG";
  auto vmss = New(c);
  Result<Capacity> cap = vmss->Read();
  ASSERT_FALSE(cap.ok());
  EXPECT_EQ(cap.status().code(), StatusCode::kPermissionDenied);
  std::string m = cap.status().message();
  EXPECT_NE(m.find("$GANTRY_TEST_ARM_WRONG"), std::string::npos) << m;
  EXPECT_NE(m.find("AuthenticationFailed: \"Authentication failed."), std::string::npos) << m;
  EXPECT_NE(m.find("pool"), std::string::npos) << m;
}

TEST_F(VmssActuatorTest, AFailedOrEndlessOperationIsAnError) {
  auto failing = Serve("failing", {"--fail-delete"});
  ASSERT_TRUE(failing->ok());
  auto vmss = New(Config(*failing));
  ASSERT_TRUE(vmss->Read().ok());
  Status in = vmss->ScaleIn(2, {"1"});
  ASSERT_FALSE(in.ok());
  EXPECT_NE(in.message().find("OperationNotAllowed"), std::string::npos) << in.message();

  auto endless = Serve("endless", {"--polls", "100000"});
  VmssConfig c = Config(*endless);
  c.operation_timeout = 60s;
  auto slow = New(c);
  auto start = clock_.Now();
  Status out = slow->ScaleOut(4);
  EXPECT_EQ(out.code(), StatusCode::kDeadlineExceeded) << out.message();
  EXPECT_LE(clock_.Now() - start, 60s);
}

TEST_F(VmssActuatorTest, AnUpdatingScaleSetIsBusyAndForceDeletionIsAsked) {
  auto server = Serve("gantry", {"--state", "Updating", "--polls", "0"});
  ASSERT_TRUE(server->ok());
  VmssConfig c = Config(*server);
  c.force_deletion = true;
  auto vmss = New(c);
  Result<Capacity> cap = vmss->Read();
  ASSERT_TRUE(cap.ok()) << cap.status().message();
  EXPECT_TRUE(cap->busy);
  ASSERT_TRUE(vmss->ScaleIn(2, {"1"}).ok());
  std::vector<Json> del = OfOp(Records("gantry"), "delete_instances");
  ASSERT_EQ(del.size(), 1u);
  EXPECT_EQ(del[0]["query"]["forceDeletion"], "true");
  EXPECT_EQ(del[0]["body"].dump(), R"({"instanceIds":["1"]})");
  cap = vmss->Read();
  ASSERT_TRUE(cap.ok());
  EXPECT_FALSE(cap->busy);
  EXPECT_EQ(cap->target, 2);
}

TEST(VmssActuatorConfigTest, CredentialIsCheckedBeforeAnythingIsFetched) {
  FakeClock clock;
  VmssConfig c{.subscription = "s", .resource_group = "r", .name = "n"};
  EXPECT_TRUE(NewVmssActuator(c, clock).ok());  // the chain, nothing fetched yet
  c.credential.kind = security::AzureIdentity::kServicePrincipal;
  c.credential.tenant_id = "t";  // no client id, no secret variable
  EXPECT_EQ(NewVmssActuator(c, clock).status().code(), StatusCode::kInvalidArgument);
  c.credential.kind = security::AzureIdentity::kEnvironmentToken;  // without token_env
  EXPECT_EQ(NewVmssActuator(c, clock).status().code(), StatusCode::kInvalidArgument);
  c.credential.token_env = "X";
  EXPECT_TRUE(NewVmssActuator(c, clock).ok());
}

}  // namespace
}  // namespace gantry::autoscale
