// HTTP and HTTPS over libcurl, for the cloud APIs Gantry talks to (Azure
// Resource Manager, Entra ID, Kubernetes API servers): host names resolved,
// TLS verified against the system store or a given CA, client certificates.
// Same Request/Response types and one hard deadline as http_client.h, whose
// plain-TCP client stays the one for link-local metadata services (IMDS), where
// nothing is resolved and no TLS library is wanted.
//
//   http::Request req{.method = "GET",
//                     .url =
//                     "https://management.azure.com/subscriptions/...?api-version=2024-07-01",
//                     .headers = {{"Authorization", "Bearer " + token}},
//                     .deadline = std::chrono::seconds(30)};
//   ASSIGN_OR_RETURN(http::Response resp, http::SendTls(req, {}));
//
// Thread-safety: no state is kept between calls (one curl handle per call);
// any number of threads may call at once.
#pragma once

#include <string>

#include "gantry/core/http_client.h"
#include "gantry/core/status.h"

namespace gantry::http {

struct TlsOptions {
  // The server's certificate is verified against, in this order of
  // preference: ca_pem (PEM text, e.g. a kubeconfig's
  // certificate-authority-data decoded), ca_file (a PEM bundle), or the
  // system store. Host names are checked against the certificate.
  std::string ca_pem;
  std::string ca_file;
  // A client certificate and its key (mutual TLS, kubeconfig users), as PEM
  // text or as files; text wins when both are set.
  std::string client_cert_pem, client_key_pem;
  std::string client_cert_file, client_key_file;
  // Skips verifying the server (kubeconfig insecure-skip-tls-verify, tests).
  bool insecure_skip_verify = false;
};

// Sends `request` (method, url, headers, body or body_file, body_sink,
// deadline, max_body_bytes, all as in http::Send) to an http:// or https://
// URL; host names are resolved (within the deadline). No redirects are
// followed; any HTTP status is a successful exchange. Extra request headers
// are sent as given; User-Agent is gantry/<version> unless one is given, and
// curl adds no Expect: 100-continue.
// Errors (all messages name the URL, never header values):
//   InvalidArgument   a URL that is not http(s)://host..., bad header, non-positive
//                     deadline, both body and body_file set
//   NotFound/IoError  body_file or a TLS file cannot be read (naming the file)
//   Unavailable       host not resolved, connection refused or reset, TLS handshake failed
//   FailedPrecondition the server's certificate was not trusted (names the CA
//                     used) or the client certificate/key were refused
//   DeadlineExceeded  the deadline passed before the response was complete
//   ResourceExhausted a body over max_body_bytes
//   (any code)        the error body_sink returned
Result<Response> SendTls(const Request& request, const TlsOptions& tls);

}  // namespace gantry::http
