#include "gantry/core/http_status.h"

#include <gtest/gtest.h>

namespace gantry::http {
namespace {

TEST(HttpStatusTest, ServerCodes) {
  EXPECT_EQ(HttpStatusFor(StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(StatusCode::kPermissionDenied), 403);
  EXPECT_EQ(HttpStatusFor(StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusFor(StatusCode::kAlreadyExists), 409);
  EXPECT_EQ(HttpStatusFor(StatusCode::kFailedPrecondition), 409);
  EXPECT_EQ(HttpStatusFor(StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusFor(StatusCode::kUnimplemented), 501);
  EXPECT_EQ(HttpStatusFor(StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusFor(StatusCode::kDeadlineExceeded), 504);
  EXPECT_EQ(HttpStatusFor(StatusCode::kDataLoss), 500);
  EXPECT_EQ(HttpStatusFor(StatusCode::kInternal), 500);
  EXPECT_EQ(HttpStatusFor(StatusCode::kIoError), 500);
}

TEST(HttpStatusTest, ClientCodes) {
  EXPECT_EQ(StatusCodeForHttp(400), StatusCode::kInvalidArgument);
  EXPECT_EQ(StatusCodeForHttp(422), StatusCode::kInvalidArgument);
  EXPECT_EQ(StatusCodeForHttp(401), StatusCode::kPermissionDenied);
  EXPECT_EQ(StatusCodeForHttp(403), StatusCode::kPermissionDenied);
  EXPECT_EQ(StatusCodeForHttp(404), StatusCode::kNotFound);
  EXPECT_EQ(StatusCodeForHttp(409), StatusCode::kFailedPrecondition);
  EXPECT_EQ(StatusCodeForHttp(412), StatusCode::kFailedPrecondition);
  EXPECT_EQ(StatusCodeForHttp(413), StatusCode::kResourceExhausted);
  EXPECT_EQ(StatusCodeForHttp(429), StatusCode::kResourceExhausted);
  EXPECT_EQ(StatusCodeForHttp(500), StatusCode::kUnavailable);
  EXPECT_EQ(StatusCodeForHttp(501), StatusCode::kUnimplemented);
  EXPECT_EQ(StatusCodeForHttp(502), StatusCode::kUnavailable);
  EXPECT_EQ(StatusCodeForHttp(503), StatusCode::kUnavailable);
  EXPECT_EQ(StatusCodeForHttp(504), StatusCode::kDeadlineExceeded);
}

// A server error travels to a client as the same code wherever the HTTP status
// can carry it.
TEST(HttpStatusTest, RoundTrip) {
  for (StatusCode c :
       {StatusCode::kInvalidArgument, StatusCode::kPermissionDenied, StatusCode::kNotFound,
        StatusCode::kFailedPrecondition, StatusCode::kResourceExhausted, StatusCode::kUnimplemented,
        StatusCode::kUnavailable, StatusCode::kDeadlineExceeded}) {
    EXPECT_EQ(StatusCodeForHttp(HttpStatusFor(c)), c) << StatusCodeName(c);
  }
}

}  // namespace
}  // namespace gantry::http
