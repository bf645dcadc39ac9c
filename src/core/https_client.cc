// HTTP(S) over libcurl: one easy handle per call, so no state is shared.
#include "gantry/core/https_client.h"

#include <curl/curl.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>

#include "gantry/config.h"

namespace gantry::http {
namespace {

void GlobalInit() {
  // curl_global_init is not thread-safe before 7.84 and must run once.
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Exchange {
  const Request* request = nullptr;
  Response* response = nullptr;
  CURL* curl = nullptr;
  bool too_large = false;
  Status sink_error;  // OK unless body_sink refused a piece
  bool sink_failed = false;
  FILE* body_file = nullptr;
  uint64_t file_size = 0, file_sent = 0;
  bool file_shrank = false;
  int file_errno = 0;
};

std::string_view Trim(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() &&
         (v.back() == '\r' || v.back() == '\n' || v.back() == ' ' || v.back() == '\t')) {
    v.remove_suffix(1);
  }
  return v;
}

size_t OnHeader(char* buf, size_t size, size_t n, void* ud) {
  auto* x = static_cast<Exchange*>(ud);
  std::string_view line(buf, size * n);
  if (line.starts_with("HTTP/")) {
    // A new response (after a 100 Continue, say): forget the interim one.
    x->response->headers.clear();
    x->response->reason.clear();
    std::string_view rest = Trim(line);
    size_t sp = rest.find(' ');
    if (sp != std::string_view::npos) {
      size_t sp2 = rest.find(' ', sp + 1);
      if (sp2 != std::string_view::npos) x->response->reason = std::string(rest.substr(sp2 + 1));
    }
    return size * n;
  }
  size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    x->response->headers.emplace_back(std::string(line.substr(0, colon)),
                                      std::string(Trim(line.substr(colon + 1))));
  }
  return size * n;
}

size_t OnWrite(char* buf, size_t size, size_t n, void* ud) {
  auto* x = static_cast<Exchange*>(ud);
  size_t bytes = size * n;
  long code = 0;
  curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &code);
  if (x->request->body_sink && code >= 200 && code < 300) {
    Status s = x->request->body_sink(std::string_view(buf, bytes));
    if (!s.ok()) {
      x->sink_error = std::move(s);
      x->sink_failed = true;
      return 0;
    }
    return bytes;
  }
  if (x->response->body.size() + bytes > x->request->max_body_bytes) {
    x->too_large = true;
    return 0;
  }
  x->response->body.append(buf, bytes);
  return bytes;
}

size_t OnRead(char* buf, size_t size, size_t n, void* ud) {
  auto* x = static_cast<Exchange*>(ud);
  size_t want = size * n;
  uint64_t left = x->file_size - x->file_sent;
  if (left == 0) return 0;
  if (want > left) want = static_cast<size_t>(left);
  size_t got = std::fread(buf, 1, want, x->body_file);
  if (got == 0) {
    // Fewer bytes than the Content-Length we announced: the file shrank.
    if (std::ferror(x->body_file)) x->file_errno = errno;
    x->file_shrank = true;
    return CURL_READFUNC_ABORT;
  }
  x->file_sent += got;
  return got;
}

bool HasCrLf(std::string_view s) { return s.find_first_of("\r\n") != std::string_view::npos; }

curl_blob Blob(const std::string& pem) {
  return curl_blob{const_cast<char*>(pem.data()), pem.size(), CURL_BLOB_COPY};
}

std::string Millis(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

}  // namespace

Result<Response> SendTls(const Request& request, const TlsOptions& tls) {
  const std::string& url = request.url;
  if (!url.starts_with("http://") && !url.starts_with("https://")) {
    return InvalidArgument("URL '" + url + "': expected http://host... or https://host...");
  }
  if (request.deadline.count() <= 0) {
    return InvalidArgument("request to " + url + ": the deadline must be positive, got " +
                           Millis(request.deadline));
  }
  if (!request.body.empty() && !request.body_file.empty()) {
    return InvalidArgument("request to " + url + ": set body or body_file, not both");
  }
  if (HasCrLf(request.method) || request.method.empty()) {
    return InvalidArgument("request to " + url + ": bad method '" + request.method + "'");
  }
  for (const auto& [name, value] : request.headers) {
    if (name.empty() || HasCrLf(name) || HasCrLf(value) || name.find(':') != std::string::npos) {
      return InvalidArgument("request to " + url + ": header '" + name +
                             "' has an empty name, a colon or a line break");
    }
  }
  GlobalInit();

  Response response;
  Exchange x;
  x.request = &request;
  x.response = &response;
  if (!request.body_file.empty()) {
    x.body_file = std::fopen(request.body_file.c_str(), "rbe");
    if (x.body_file == nullptr) {
      int err = errno;
      if (err == ENOENT) return NotFound("body file " + request.body_file + " does not exist");
      return IoError("opening body file " + request.body_file, err);
    }
    struct stat st {};
    if (::fstat(fileno(x.body_file), &st) != 0) {
      int err = errno;
      std::fclose(x.body_file);
      return IoError("reading body file " + request.body_file, err);
    }
    x.file_size = static_cast<uint64_t>(st.st_size);
  }

  CURL* h = curl_easy_init();
  if (h == nullptr) {
    if (x.body_file) std::fclose(x.body_file);
    return Internal("request to " + url + ": curl_easy_init failed");
  }
  x.curl = h;
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = nullptr;
  bool has_user_agent = false;
  for (const auto& [name, value] : request.headers) {
    if (strcasecmp(name.c_str(), "User-Agent") == 0) has_user_agent = true;
    // "Name;" is curl's way to send a header with an empty value.
    std::string line = value.empty() ? name + ";" : name + ": " + value;
    headers = curl_slist_append(headers, line.c_str());
  }
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
  if (!has_user_agent) headers = curl_slist_append(headers, "User-Agent: gantry/" GANTRY_VERSION);

  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for resolver timeouts (threads)
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(request.deadline.count()));
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, OnWrite);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, nullptr);

  const std::string& m = request.method;
  if (x.body_file != nullptr) {
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, OnRead);
    curl_easy_setopt(h, CURLOPT_READDATA, &x);
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(x.file_size));
    if (m != "PUT") curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, m.c_str());
  } else if (m == "GET" && request.body.empty()) {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  } else if (m == "HEAD") {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (m == "DELETE" && request.body.empty()) {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE");
  } else {
    // POST, PUT, PATCH, ... with a string body (possibly empty: Content-Length: 0).
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    if (m != "POST") curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, m.c_str());
  }

  curl_blob ca{}, cert{}, key{};
  if (tls.insecure_skip_verify) {
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
  } else if (!tls.ca_pem.empty()) {
    ca = Blob(tls.ca_pem);
    curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &ca);
  } else if (!tls.ca_file.empty()) {
    curl_easy_setopt(h, CURLOPT_CAINFO, tls.ca_file.c_str());
  }
  if (!tls.client_cert_pem.empty()) {
    cert = Blob(tls.client_cert_pem);
    curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
  } else if (!tls.client_cert_file.empty()) {
    curl_easy_setopt(h, CURLOPT_SSLCERT, tls.client_cert_file.c_str());
  }
  if (!tls.client_key_pem.empty()) {
    key = Blob(tls.client_key_pem);
    curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &key);
    curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
  } else if (!tls.client_key_file.empty()) {
    curl_easy_setopt(h, CURLOPT_SSLKEY, tls.client_key_file.c_str());
  }

  CURLcode rc = curl_easy_perform(h);
  long code = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(h);
  curl_slist_free_all(headers);
  if (x.body_file) std::fclose(x.body_file);

  std::string detail = errbuf[0] != 0 ? std::string(errbuf) : curl_easy_strerror(rc);
  std::string ca_used = tls.insecure_skip_verify ? "verification off"
                        : !tls.ca_pem.empty()    ? "the given CA certificate"
                        : !tls.ca_file.empty()   ? "CA file " + tls.ca_file
                                                 : "the system CA store";
  switch (rc) {
    case CURLE_OK:
      break;
    case CURLE_WRITE_ERROR:
      if (x.sink_failed) {
        return Status(x.sink_error.code(), x.sink_error.message() + " (response of " + url + ")");
      }
      if (x.too_large) {
        return ResourceExhausted("response of " + url + ": body over " +
                                 std::to_string(request.max_body_bytes) + " bytes");
      }
      return IoError("response of " + url, EIO);
    case CURLE_ABORTED_BY_CALLBACK:
    case CURLE_READ_ERROR:
      if (x.file_errno != 0) return IoError("reading body file " + request.body_file, x.file_errno);
      return DataLoss("request to " + url + ": body file " + request.body_file +
                      " shrank while it was sent");
    case CURLE_OPERATION_TIMEDOUT:
      return DeadlineExceeded("no complete answer from " + url + " within " +
                              Millis(request.deadline) + " (" + detail + ")");
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
      return InvalidArgument("URL '" + url + "': " + detail);
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
      return FailedPrecondition("TLS to " + url + ": the server's certificate is not trusted by " +
                                ca_used + " (" + detail + ")");
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
      return FailedPrecondition("TLS to " + url + ": the client certificate or key is unusable (" +
                                detail + ")");
    case CURLE_FILE_COULDNT_READ_FILE:
      return NotFound("request to " + url + ": " + detail);
    default:
      return Unavailable("request to " + url + " failed: " + detail);
  }
  response.status = static_cast<int>(code);
  return response;
}

}  // namespace gantry::http
