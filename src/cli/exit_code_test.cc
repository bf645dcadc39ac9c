// The one Status -> exit code map (README.md "Command-line conventions"): every
// code has its documented exit, and Fail() prints "gantry <command>: <message>".
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli.h"

namespace gantry::cli {
namespace {

TEST(ExitCodeTest, EveryStatusCodeHasItsDocumentedExit) {
  EXPECT_EQ(ExitCode(Status::Ok()), kExitOk);
  // Change the invocation, a named thing, the credentials or the machine: 2.
  for (StatusCode c :
       {StatusCode::kInvalidArgument, StatusCode::kNotFound, StatusCode::kAlreadyExists,
        StatusCode::kFailedPrecondition, StatusCode::kPermissionDenied,
        StatusCode::kResourceExhausted, StatusCode::kUnimplemented}) {
    EXPECT_EQ(ExitCode(Status(c, "x")), kExitUsage) << StatusCodeName(c);
  }
  // The work failed: 1.
  for (StatusCode c :
       {StatusCode::kDataLoss, StatusCode::kUnavailable, StatusCode::kDeadlineExceeded,
        StatusCode::kIoError, StatusCode::kInternal}) {
    EXPECT_EQ(ExitCode(Status(c, "x")), kExitCheckFailed) << StatusCodeName(c);
  }
  // Only collectives say 7; no Status maps to it.
  for (int c = 0; c <= static_cast<int>(StatusCode::kIoError); ++c) {
    EXPECT_NE(ExitCode(Status(static_cast<StatusCode>(c), "x")), kExitWrongResults) << c;
  }
}

TEST(ExitCodeTest, FailPrintsTheCommandAndMessage) {
  ::testing::internal::CaptureStderr();
  int rc = Fail("registry show", NotFound("no model 'llama'"));
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, kExitUsage);
  EXPECT_EQ(err, "gantry registry show: no model 'llama'\n");
}

}  // namespace
}  // namespace gantry::cli
