#include "gantry/core/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <memory>
#include <string>

namespace gantry {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "ok");
  EXPECT_EQ(s, Status::Ok());
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = InvalidArgument("-b 64M is larger than -e 8M");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "-b 64M is larger than -e 8M");
  EXPECT_EQ(s.ToString(), "invalid_argument: -b 64M is larger than -e 8M");
}

TEST(StatusTest, OkCodeWithMessageIsStillOk) {
  Status s(StatusCode::kOk, "ignored");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.message(), "");
}

TEST(StatusTest, FactoriesUseTheirCodes) {
  EXPECT_EQ(NotFound("x").code(), StatusCode::kNotFound);
  EXPECT_EQ(AlreadyExists("x").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(FailedPrecondition("x").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(ResourceExhausted("x").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(Unavailable("x").code(), StatusCode::kUnavailable);
  EXPECT_EQ(DeadlineExceeded("x").code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(PermissionDenied("x").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(DataLoss("x").code(), StatusCode::kDataLoss);
  EXPECT_EQ(Unimplemented("x").code(), StatusCode::kUnimplemented);
  EXPECT_EQ(Internal("x").code(), StatusCode::kInternal);
}

TEST(StatusTest, CodeNamesAreStable) {
  EXPECT_EQ(StatusCodeName(StatusCode::kOk), "ok");
  EXPECT_EQ(StatusCodeName(StatusCode::kInvalidArgument), "invalid_argument");
  EXPECT_EQ(StatusCodeName(StatusCode::kFailedPrecondition), "failed_precondition");
  EXPECT_EQ(StatusCodeName(StatusCode::kIoError), "io_error");
  EXPECT_EQ(StatusCodeName(static_cast<StatusCode>(999)), "unknown");
}

TEST(StatusTest, IoErrorAppendsStrerror) {
  Status s = IoError("open '/nope'", ENOENT);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_EQ(s.message(), "open '/nope': No such file or directory");
}

TEST(StatusTest, WithContextPrependsOutermostFirst) {
  Status inner = InvalidArgument("key 'bench.ranks': expected an integer");
  Status outer = inner.WithContext("line 4").WithContext("loading gantry.yaml");
  EXPECT_EQ(outer.message(), "loading gantry.yaml: line 4: key 'bench.ranks': expected an integer");
  EXPECT_EQ(outer.code(), StatusCode::kInvalidArgument);
  // The lvalue overload leaves the original alone.
  EXPECT_EQ(inner.message(), "key 'bench.ranks': expected an integer");
}

TEST(StatusTest, WithContextKeepsOkAndIgnoresEmptyContext) {
  EXPECT_TRUE(Status::Ok().WithContext("anything").ok());
  EXPECT_EQ(NotFound("x").WithContext("").message(), "x");
}

TEST(StatusTest, CopyIsDeepAndEqualityComparesCodeAndMessage) {
  Status a = DataLoss("checksum mismatch");
  Status b = a;
  b = std::move(b).WithContext("shard 3");
  EXPECT_EQ(a.message(), "checksum mismatch");
  EXPECT_NE(a, b);
  Status c;
  c = a;
  EXPECT_EQ(a, c);
  const Status& alias = c;
  c = alias;  // self-assignment keeps the value
  EXPECT_EQ(a, c);
  EXPECT_NE(DataLoss("m"), Internal("m"));
}

TEST(ResultTest, HoldsValueOrError) {
  Result<int> good = 42;
  ASSERT_TRUE(good.ok());
  EXPECT_TRUE(good.status().ok());
  EXPECT_EQ(*good, 42);
  EXPECT_EQ(good.value_or(7), 42);

  Result<int> bad = NotFound("no such device");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(bad.value_or(7), 7);
}

TEST(ResultTest, MovesOutMoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(5);
  std::unique_ptr<int> p = std::move(r).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 5);
}

TEST(ResultTest, ArrowReachesMembers) {
  Result<std::string> r = std::string("abc");
  EXPECT_EQ(r->size(), 3u);
}

Status FailIf(bool fail) { return fail ? Unavailable("peer 3 did not answer") : Status::Ok(); }

Status Chain(bool fail, int* reached) {
  RETURN_IF_ERROR(FailIf(fail));
  *reached = 1;
  return Status::Ok();
}

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Result<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(MacrosTest, ReturnIfErrorStopsAtFirstError) {
  int reached = 0;
  EXPECT_TRUE(Chain(false, &reached).ok());
  EXPECT_EQ(reached, 1);
  reached = 0;
  Status s = Chain(true, &reached);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(reached, 0);
}

TEST(MacrosTest, AssignOrReturnPropagatesTheInnerError) {
  ASSERT_TRUE(Quarter(8).ok());
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> r = Quarter(6);  // 6 -> 3 -> odd
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "odd: 3");
}

}  // namespace
}  // namespace gantry
