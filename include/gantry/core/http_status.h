// The one mapping between Status codes and HTTP status codes, used by every
// server that answers an error (registry API, gateway admin API) and every client
// that turns an error answer back into a Status (registry remote client, gateway
// admin client), so a NotFound on the server is a NotFound in the CLI.
#pragma once

#include "gantry/core/status.h"

namespace gantry::http {

// InvalidArgument 400, PermissionDenied 403, NotFound 404, AlreadyExists and
// FailedPrecondition 409 (conflicts, e.g. a compare-and-set miss), ResourceExhausted
// 429, Unimplemented 501, Unavailable 503, DeadlineExceeded 504, everything else 500.
// Precondition: code != kOk.
int HttpStatusFor(StatusCode code);

// The inverse for answers of another server: 400 (and other 4xx not listed)
// InvalidArgument, 401/403 PermissionDenied, 404 NotFound, 409/412
// FailedPrecondition, 413/429 ResourceExhausted, 501 Unimplemented, 504
// DeadlineExceeded, other 5xx Unavailable. Precondition: http_status >= 400.
StatusCode StatusCodeForHttp(int http_status);

}  // namespace gantry::http
