#include "gantry/core/http_status.h"

namespace gantry::http {

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
      return 409;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnimplemented:
      return 501;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

StatusCode StatusCodeForHttp(int http_status) {
  switch (http_status) {
    case 401:
    case 403:
      return StatusCode::kPermissionDenied;
    case 404:
      return StatusCode::kNotFound;
    case 409:
    case 412:
      return StatusCode::kFailedPrecondition;
    case 413:
    case 429:
      return StatusCode::kResourceExhausted;
    case 501:
      return StatusCode::kUnimplemented;
    case 504:
      return StatusCode::kDeadlineExceeded;
    default:
      return http_status < 500 ? StatusCode::kInvalidArgument : StatusCode::kUnavailable;
  }
}

}  // namespace gantry::http
