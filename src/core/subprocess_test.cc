#include "gantry/core/subprocess.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "testing/fake_root.h"

namespace gantry {
namespace {

using ::gantry::testing::FakeRoot;

// ---- RunSubprocess ----

TEST(RunSubprocess, CapturesStdoutStderrAndExitCode) {
  auto r =
      RunSubprocess({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, std::chrono::seconds(10));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
}

TEST(RunSubprocess, ArgumentsAreArgvNotShell) {
  auto r = RunSubprocess({"printf", "%s|", "a b", "$HOME", "\"q\""}, std::chrono::seconds(10));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->out, "a b|$HOME|\"q\"|");
}

TEST(RunSubprocess, MissingProgramIsUnavailable) {
  auto r = RunSubprocess({"/nonexistent/scontrol", "show"}, std::chrono::seconds(10));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("/nonexistent/scontrol"), std::string::npos);
}

TEST(RunSubprocess, EmptyArgvIsInvalid) {
  EXPECT_EQ(RunSubprocess({}, std::chrono::seconds(1)).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(RunSubprocess, HungChildIsKilledAtTheDeadline) {
  auto r = RunSubprocess({"/bin/sh", "-c", "sleep 30"}, std::chrono::milliseconds(200));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("did not finish within 200 ms"), std::string::npos);
  EXPECT_NE(r.status().message().find("'/bin/sh -c \"sleep 30\"'"), std::string::npos)
      << r.status().message();
}

TEST(RunSubprocess, ChildThatClosesItsOutputAndHangsIsKilledToo) {
  auto r = RunSubprocess({"/bin/sh", "-c", "exec >/dev/null 2>&1; sleep 30"},
                         std::chrono::milliseconds(200));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
}

// ---- FindExecutable ----

TEST(FindExecutable, PathsAreCheckedNamesAreSearchedInPath) {
  FakeRoot root;
  const std::string tool = root.Write("/bin/gantry-test-tool", "#!/bin/sh\n", /*executable=*/true);
  const std::string plain = root.Write("/bin/gantry-test-plain", "not executable\n");
  EXPECT_EQ(FindExecutable(tool), tool);
  EXPECT_EQ(FindExecutable(plain), "");
  EXPECT_EQ(FindExecutable(root.path() + "/bin/missing"), "");
  EXPECT_EQ(FindExecutable(""), "");

  const char* old = std::getenv("PATH");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("PATH", ("/nonexistent-dir::" + root.path() + "/bin").c_str(), 1);
  EXPECT_EQ(FindExecutable("gantry-test-tool"), tool);
  EXPECT_EQ(FindExecutable("gantry-test-plain"), "");
  EXPECT_EQ(FindExecutable("gantry-no-such-tool-for-test"), "");
  if (old != nullptr) {
    ::setenv("PATH", saved.c_str(), 1);
  } else {
    ::unsetenv("PATH");
  }
}

// ---- JoinArgv ----

TEST(JoinArgv, QuotesArgumentsWithSpaces) {
  EXPECT_EQ(JoinArgv({"scontrol", "update", "Reason=gantry: x"}),
            "scontrol update \"Reason=gantry: x\"");
  EXPECT_EQ(JoinArgv({}), "");
}

}  // namespace
}  // namespace gantry
