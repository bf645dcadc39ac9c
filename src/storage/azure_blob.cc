// Azure Blob Storage over libcurl: SharedKey, SAS or Entra ID bearer tokens,
// Put Blob / Put Block / Put Block List, ranged Get Blob, Get Blob Properties,
// List Blobs, Delete.
//
// Design notes (the why):
// - Curl easy handles live in a per-store pool and are reset, not destroyed,
//   between requests, so TCP (and TLS) connections are reused across requests
//   and threads; that is most of the throughput on many-block transfers.
// - Every request is retried on 5xx, 429, 408, timeouts and connection
//   errors, with exponential backoff and full jitter, honouring Retry-After.
//   The request is re-signed on every attempt (x-ms-date changes); with Entra
//   ID every attempt asks the token source again, which caches, so a long
//   transfer picks up the refreshed token instead of failing at expiry.
// - Large uploads stage blocks whose ids carry a random upload id, so two
//   writers of the same key never overwrite each other's staged blocks; only
//   Put Block List makes the blob visible.
// - A conditional create that was retried after a lost response may find its
//   own blob; each Put tags the blob with x-ms-meta-gantryputid so that such
//   a 409/412 is recognised as our success rather than AlreadyExists.
// - Credentials never appear in messages or logs: messages name the store URL
//   (az://account/container/prefix) and the credential's source only.
#include "azure_blob.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "gantry/core/log.h"
#include "gantry/core/text.h"

namespace gantry::storage::internal {

constexpr std::string_view kApiVersion = "2021-12-02";

// ---------------------------------------------------------------------------
// Encoding helpers

std::string UrlEncode(std::string_view s, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() * 3 / 2);
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

namespace {

std::span<const std::byte> Bytes(std::string_view s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

std::string Md5Base64(std::span<const std::byte> data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_md5(), nullptr);
  return Base64Encode(std::as_bytes(std::span<const unsigned char>(md, len)));
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string RandomHex(size_t n) {
  thread_local std::mt19937_64 rng{
      std::random_device{}() ^
      static_cast<uint64_t>(std::hash<std::thread::id>{}(std::this_thread::get_id()))};
  static const char* hex = "0123456789abcdef";
  std::string s(n, '0');
  for (auto& c : s) c = hex[rng() & 15];
  return s;
}

std::string RequestId() {
  std::string h = RandomHex(32);
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-4" + h.substr(13, 3) + "-a" + h.substr(17, 3) +
         "-" + h.substr(20, 12);
}

std::string HttpDateNow() {
  time_t t = ::time(nullptr);
  struct tm tm;
  ::gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return buf;
}

}  // namespace

int64_t ParseHttpDate(std::string_view s) {
  Result<std::chrono::system_clock::time_point> t = ParseRfc1123Date(s);
  return t.ok() ? static_cast<int64_t>(std::chrono::system_clock::to_time_t(*t)) : 0;
}

// ---------------------------------------------------------------------------
// Signing

std::string SharedKeyStringToSign(const SignInput& in) {
  std::string s;
  auto line = [&](std::string_view v) {
    s += v;
    s += '\n';
  };
  line(in.verb);
  line(in.content_encoding);
  line(in.content_language);
  line(in.content_length == "0" ? "" : in.content_length);
  line(in.content_md5);
  line(in.content_type);
  line(in.date);
  line(in.if_modified_since);
  line(in.if_match);
  line(in.if_none_match);
  line(in.if_unmodified_since);
  line(in.range);
  std::vector<std::pair<std::string, std::string>> hs;
  for (const auto& [k, v] : in.ms_headers) {
    std::string lk = Lower(k);
    if (lk.starts_with("x-ms-")) hs.emplace_back(lk, v);
  }
  std::sort(hs.begin(), hs.end());
  for (const auto& [k, v] : hs) {
    s += k;
    s += ':';
    s += v;
    s += '\n';
  }
  s += '/';
  s += in.account;
  s += in.path;
  // Query parameters: lower-cased names, sorted; repeated names join their
  // values with ','.
  std::map<std::string, std::vector<std::string>> q;
  for (const auto& [k, v] : in.query) q[Lower(k)].push_back(v);
  for (auto& [k, vs] : q) {
    std::sort(vs.begin(), vs.end());
    s += '\n';
    s += k;
    s += ':';
    for (size_t i = 0; i < vs.size(); ++i) {
      if (i) s += ',';
      s += vs[i];
    }
  }
  return s;
}

Result<std::string> HmacSha256Base64(std::string_view base64_key, std::string_view text) {
  Result<std::string> key = Base64Decode(base64_key);
  if (!key.ok()) return InvalidArgument("the storage account key is not valid base64");
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key->data(), static_cast<int>(key->size()),
           reinterpret_cast<const unsigned char*>(text.data()), text.size(), md, &len) == nullptr) {
    return Internal("HMAC-SHA256 failed");
  }
  return Base64Encode(std::as_bytes(std::span<const unsigned char>(md, len)));
}

Result<std::string> MakeServiceSas(std::string_view account, std::string_view base64_key,
                                   const SasParams& p) {
  std::string resource = p.blob.empty() ? "c" : "b";
  std::string canonical = "/blob/" + std::string(account) + "/" + p.container;
  if (!p.blob.empty()) canonical += "/" + p.blob;
  // The field order for signed version 2020-12-06 and later; empty fields
  // stay as empty lines.
  const std::string fields[] = {p.permissions, p.start,         p.expiry,    canonical,
                                "" /*si*/,     "" /*sip*/,      p.protocol,  p.version,
                                resource,      "" /*snapshot*/, "" /*ses*/,  "" /*rscc*/,
                                "" /*rscd*/,   "" /*rsce*/,     "" /*rscl*/, "" /*rsct*/};
  std::string to_sign;
  for (size_t i = 0; i < std::size(fields); ++i) {
    if (i) to_sign += '\n';
    to_sign += fields[i];
  }
  ASSIGN_OR_RETURN(std::string sig, HmacSha256Base64(base64_key, to_sign));
  std::string q = "sv=" + UrlEncode(p.version);
  if (!p.start.empty()) q += "&st=" + UrlEncode(p.start);
  q += "&se=" + UrlEncode(p.expiry);
  q += "&sr=" + resource;
  q += "&sp=" + UrlEncode(p.permissions);
  if (!p.protocol.empty()) q += "&spr=" + UrlEncode(p.protocol);
  q += "&sig=" + UrlEncode(sig);
  return q;
}

// ---------------------------------------------------------------------------
// List Blobs XML

namespace {

std::string XmlUnescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    size_t semi = s.find(';', i);
    if (semi == std::string_view::npos) {
      out += s[i];
      continue;
    }
    std::string_view ent = s.substr(i + 1, semi - i - 1);
    if (ent == "amp") {
      out += '&';
    } else if (ent == "lt") {
      out += '<';
    } else if (ent == "gt") {
      out += '>';
    } else if (ent == "quot") {
      out += '"';
    } else if (ent == "apos") {
      out += '\'';
    } else if (ent.size() > 1 && ent[0] == '#') {
      unsigned long cp = ent[1] == 'x' || ent[1] == 'X'
                             ? std::strtoul(std::string(ent.substr(2)).c_str(), nullptr, 16)
                             : std::strtoul(std::string(ent.substr(1)).c_str(), nullptr, 10);
      // UTF-8 encode.
      if (cp < 0x80) {
        out += static_cast<char>(cp);
      } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      }
    } else {
      out += s.substr(i, semi - i + 1);
      i = semi;
      continue;
    }
    i = semi;
  }
  return out;
}

// Finds <tag ...>content</tag> (or <tag/>) in xml[from, to). Returns the raw
// content and sets *end past the element; nullopt when absent.
std::optional<std::string_view> Element(std::string_view xml, std::string_view tag, size_t from,
                                        size_t to, size_t* end) {
  std::string open = "<" + std::string(tag);
  size_t pos = from;
  while (true) {
    pos = xml.find(open, pos);
    if (pos == std::string_view::npos || pos >= to) return std::nullopt;
    size_t after = pos + open.size();
    if (after < xml.size() && (xml[after] == '>' || xml[after] == ' ' || xml[after] == '/' ||
                               xml[after] == '\t' || xml[after] == '\n' || xml[after] == '\r')) {
      break;
    }
    pos = after;
  }
  size_t gt = xml.find('>', pos);
  if (gt == std::string_view::npos || gt >= to) return std::nullopt;
  if (xml[gt - 1] == '/') {  // <tag/>
    if (end) *end = gt + 1;
    return xml.substr(gt + 1, 0);  // empty, but pointing into `xml` (callers subtract pointers)
  }
  std::string close = "</" + std::string(tag) + ">";
  size_t c = xml.find(close, gt + 1);
  if (c == std::string_view::npos || c > to) return std::nullopt;
  if (end) *end = c + close.size();
  return xml.substr(gt + 1, c - gt - 1);
}

}  // namespace

Result<ParsedList> ParseListBlobsXml(std::string_view xml) {
  if (xml.find("<EnumerationResults") == std::string_view::npos) {
    return DataLoss("List Blobs response is not an EnumerationResults document");
  }
  ParsedList out;
  size_t pos = 0;
  size_t blobs_end = xml.size();
  size_t end = 0;
  while (auto blob = Element(xml, "Blob", pos, blobs_end, &end)) {
    size_t start = static_cast<size_t>(blob->data() - xml.data());
    size_t stop = start + blob->size();
    ObjectInfo info;
    auto name = Element(xml, "Name", start, stop, nullptr);
    if (!name) return DataLoss("List Blobs response has a <Blob> without <Name>");
    info.key = XmlUnescape(*name);
    if (auto len = Element(xml, "Content-Length", start, stop, nullptr)) {
      info.size = std::strtoull(std::string(*len).c_str(), nullptr, 10);
    }
    if (auto etag = Element(xml, "Etag", start, stop, nullptr)) info.etag = XmlUnescape(*etag);
    if (auto lm = Element(xml, "Last-Modified", start, stop, nullptr)) {
      info.modified_unix = ParseHttpDate(*lm);
    }
    out.objects.push_back(std::move(info));
    pos = end;
  }
  if (auto next = Element(xml, "NextMarker", 0, xml.size(), nullptr)) {
    out.next_marker = XmlUnescape(*next);
  }
  return out;
}

// ---------------------------------------------------------------------------
// HTTP over libcurl

namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

class HandlePool {
 public:
  ~HandlePool() {
    for (CURL* h : free_) curl_easy_cleanup(h);
  }
  CURL* Get() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        CURL* h = free_.back();
        free_.pop_back();
        return h;
      }
    }
    return curl_easy_init();
  }
  void Put(CURL* h) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(h);
  }

 private:
  std::mutex mu_;
  std::vector<CURL*> free_;
};

// Where a successful response body goes. Reset() starts a new attempt.
class Sink {
 public:
  virtual ~Sink() = default;
  virtual void Reset() = 0;
  virtual bool Write(const char* data, size_t n) = 0;  // false aborts the transfer
};

class StringSink : public Sink {
 public:
  explicit StringSink(std::string* out) : out_(out) {}
  void Reset() override { out_->clear(); }
  bool Write(const char* d, size_t n) override {
    out_->append(d, n);
    return true;
  }

 private:
  std::string* out_;
};

class SpanSink : public Sink {
 public:
  explicit SpanSink(std::span<std::byte> out) : out_(out) {}
  void Reset() override { n_ = 0; }
  bool Write(const char* d, size_t n) override {
    if (n > out_.size() - n_) return false;  // more than asked: the server ignored the range
    std::memcpy(out_.data() + n_, d, n);
    n_ += n;
    return true;
  }
  size_t written() const { return n_; }

 private:
  std::span<std::byte> out_;
  size_t n_ = 0;
};

class FileSink : public Sink {
 public:
  FileSink(int fd, uint64_t offset, uint64_t max) : fd_(fd), offset_(offset), max_(max) {}
  void Reset() override { n_ = 0; }
  bool Write(const char* d, size_t n) override {
    if (n > max_ - n_) return false;
    while (n > 0) {
      ssize_t w = ::pwrite(fd_, d, n, static_cast<off_t>(offset_ + n_));
      if (w < 0) {
        if (errno == EINTR) continue;
        error_ = errno;
        return false;
      }
      d += w;
      n -= static_cast<size_t>(w);
      n_ += static_cast<uint64_t>(w);
    }
    return true;
  }
  uint64_t written() const { return n_; }
  int error() const { return error_; }

 private:
  int fd_;
  uint64_t offset_, max_, n_ = 0;
  int error_ = 0;
};

struct Request {
  std::string op;      // "Put Blob", for messages
  std::string method;  // GET PUT HEAD DELETE
  std::string blob;    // full blob name; empty for container operations
  std::vector<std::pair<std::string, std::string>> query;
  std::string content_md5, content_type, if_match, if_none_match;
  std::vector<std::pair<std::string, std::string>> ms;  // extra x-ms-* headers
  std::span<const std::byte> body;
  Sink* sink = nullptr;  // 2xx body; nullptr discards
};

Request Req(std::string op, std::string method, std::string blob) {
  Request r;
  r.op = std::move(op);
  r.method = std::move(method);
  r.blob = std::move(blob);
  return r;
}

struct Response {
  long status = 0;
  int attempts = 1;  // how many exchanges it took
  // An earlier attempt may have been applied by the service although its
  // answer never arrived (a reset or timeout after the request was sent).
  bool earlier_may_have_applied = false;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string error_body;                      // non-2xx bodies (capped)
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
  std::string ErrorCode() const {
    std::string c = Header("x-ms-error-code");
    if (c.empty()) {
      if (auto e = Element(error_body, "Code", 0, error_body.size(), nullptr)) c = std::string(*e);
    }
    return c;
  }
};

struct Transfer {
  Response* resp;
  Sink* sink;
  CURL* curl;
  std::span<const std::byte> body;
  size_t body_pos = 0;
  bool sink_failed = false;
};

size_t OnHeader(char* buf, size_t size, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  std::string_view line(buf, size * n);
  if (line.starts_with("HTTP/")) {
    t->resp->headers.clear();  // a new response (e.g. after 100 Continue)
    return size * n;
  }
  size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string name = Lower(line.substr(0, colon));
    std::string_view v = line.substr(colon + 1);
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' '))
      v.remove_suffix(1);
    t->resp->headers[name] = std::string(v);
  }
  return size * n;
}

size_t OnWrite(char* buf, size_t size, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  size_t bytes = size * n;
  long code = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
  if (code >= 200 && code < 300) {
    if (t->sink && !t->sink->Write(buf, bytes)) {
      t->sink_failed = true;
      return 0;
    }
  } else if (t->resp->error_body.size() < (64u << 10)) {
    t->resp->error_body.append(buf, std::min(bytes, (64u << 10) - t->resp->error_body.size()));
  }
  return bytes;
}

size_t OnRead(char* buf, size_t size, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  size_t k = std::min(size * n, t->body.size() - t->body_pos);
  std::memcpy(buf, t->body.data() + t->body_pos, k);
  t->body_pos += k;
  return k;
}

int OnSeek(void* ud, curl_off_t offset, int origin) {
  auto* t = static_cast<Transfer*>(ud);
  if (origin != SEEK_SET || offset < 0 || static_cast<size_t>(offset) > t->body.size()) {
    return CURL_SEEKFUNC_CANTSEEK;
  }
  t->body_pos = static_cast<size_t>(offset);
  return CURL_SEEKFUNC_OK;
}

bool RetryableStatus(long s) { return s == 408 || s == 429 || (s >= 500 && s <= 599); }

}  // namespace

std::optional<std::chrono::milliseconds> ParseRetryAfter(const std::string& v) {
  if (v.empty()) return std::nullopt;
  if (std::all_of(v.begin(), v.end(),
                  [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    return std::chrono::milliseconds(std::stoll(v.substr(0, 9)) * 1000);
  }
  int64_t at = ParseHttpDate(v);
  if (at == 0) return std::nullopt;
  int64_t d = at - static_cast<int64_t>(::time(nullptr));
  return std::chrono::milliseconds(std::max<int64_t>(0, d) * 1000);
}

std::chrono::milliseconds BackoffDelay(const RetryPolicy& rp, int attempt,
                                       std::optional<std::chrono::milliseconds> retry_after,
                                       uint64_t random) {
  // Full jitter: uniform in [0, min(max_backoff, initial * 2^(attempt-1))].
  int64_t cap = std::min<int64_t>(rp.max_backoff.count(), rp.initial_backoff.count()
                                                              << std::clamp(attempt - 1, 0, 20));
  std::chrono::milliseconds wait(cap > 0 ? static_cast<int64_t>(random % (cap + 1)) : 0);
  // The server's Retry-After is a floor (bounded so a bad header cannot stall us for long).
  if (retry_after) wait = std::min(std::max(wait, *retry_after), std::chrono::milliseconds(60000));
  return wait;
}

namespace {

// ---------------------------------------------------------------------------
// The store

class AzureBlobStore : public ObjectStore {
 public:
  explicit AzureBlobStore(AzureConfig c) : c_(std::move(c)) {
    GlobalInit();
    url_ = "az://" + c_.account + "/" + c_.container + (c_.prefix.empty() ? "" : "/" + c_.prefix);
    // The URI path of the endpoint ("" for *.blob.core.windows.net,
    // "/devstoreaccount1" for Azurite) is part of the signed resource.
    size_t scheme = c_.endpoint.find("://");
    size_t slash = c_.endpoint.find('/', scheme == std::string::npos ? 0 : scheme + 3);
    endpoint_path_ = slash == std::string::npos ? "" : c_.endpoint.substr(slash);
    if (c_.options.block_bytes < 1024) c_.options.block_bytes = 1024;
    if (c_.options.block_bytes > (4000ull << 20)) c_.options.block_bytes = 4000ull << 20;
    if (c_.options.parallelism < 1) c_.options.parallelism = 1;
    if (c_.options.retry.max_attempts < 1) c_.options.retry.max_attempts = 1;
  }

  std::string url() const override { return url_; }

  Status Put(std::string_view key, std::span<const std::byte> data,
             const PutOptions& options) override {
    RETURN_IF_ERROR(CheckKey(key));
    if (data.size() <= c_.options.block_bytes) return PutBlob(key, data, options);
    RETURN_IF_ERROR(PrecheckCreate(key, options));
    size_t next = 0;
    int index = 0;
    auto source = [&](std::vector<std::byte>&, std::span<const std::byte>* view,
                      int* idx) -> Result<bool> {
      if (next >= data.size()) return false;
      size_t n = std::min(c_.options.block_bytes, data.size() - next);
      *view = data.subspan(next, n);
      *idx = index++;
      next += n;
      return true;
    };
    size_t blocks = (data.size() + c_.options.block_bytes - 1) / c_.options.block_bytes;
    return UploadBlocks(key, options, source, blocks, /*buffered=*/false);
  }

  Status PutFile(std::string_view key, const std::string& path,
                 const PutOptions& options) override {
    RETURN_IF_ERROR(CheckKey(key));
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT)
        return NotFound("uploading " + path + " to " + Where(key) + ": no such file");
      return IoError("opening " + path, errno);
    }
    struct FdCloser {
      int fd;
      ~FdCloser() { ::close(fd); }
    } closer{fd};
    struct stat st;
    if (::fstat(fd, &st) != 0) return IoError("stat " + path, errno);
    uint64_t size = static_cast<uint64_t>(st.st_size);
    auto read_at = [&](std::vector<std::byte>& buf, uint64_t off, size_t n) -> Status {
      buf.resize(n);
      size_t done = 0;
      while (done < n) {
        ssize_t r = ::pread(fd, buf.data() + done, n - done, static_cast<off_t>(off + done));
        if (r < 0) {
          if (errno == EINTR) continue;
          return IoError("reading " + path, errno);
        }
        if (r == 0) return DataLoss(path + " shrank while it was being uploaded");
        done += static_cast<size_t>(r);
      }
      return Status::Ok();
    };
    if (size <= c_.options.block_bytes) {
      std::vector<std::byte> buf;
      RETURN_IF_ERROR(read_at(buf, 0, static_cast<size_t>(size)));
      return PutBlob(key, buf, options);
    }
    RETURN_IF_ERROR(PrecheckCreate(key, options));
    uint64_t next = 0;
    int index = 0;
    // Called under the upload lock; reads into the worker's own buffer. The
    // pread itself is quick next to the network, so serialising it is fine.
    auto source = [&](std::vector<std::byte>& buf, std::span<const std::byte>* view,
                      int* idx) -> Result<bool> {
      if (next >= size) return false;
      size_t n = static_cast<size_t>(std::min<uint64_t>(c_.options.block_bytes, size - next));
      RETURN_IF_ERROR(read_at(buf, next, n));
      *view = std::span<const std::byte>(buf.data(), n);
      *idx = index++;
      next += n;
      return true;
    };
    size_t blocks =
        static_cast<size_t>((size + c_.options.block_bytes - 1) / c_.options.block_bytes);
    return UploadBlocks(key, options, source, blocks, /*buffered=*/true);
  }

  Status PutStream(std::string_view key, const ReadFn& read, const PutOptions& options) override {
    RETURN_IF_ERROR(CheckKey(key));
    const size_t bs = c_.options.block_bytes;
    bool eof = false;
    auto fill = [&](std::vector<std::byte>& buf) -> Result<size_t> {
      buf.resize(bs);
      size_t n = 0;
      while (n < bs && !eof) {
        Result<size_t> r = read(std::span<std::byte>(buf.data() + n, bs - n));
        if (!r.ok()) return r.status().WithContext("uploading " + Where(key));
        if (*r > bs - n)
          return Internal("PutStream: the read callback returned more bytes than asked");
        if (*r == 0) eof = true;
        n += *r;
      }
      return n;
    };
    std::vector<std::byte> first;
    ASSIGN_OR_RETURN(size_t n0, fill(first));
    if (eof) return PutBlob(key, std::span<const std::byte>(first.data(), n0), options);
    RETURN_IF_ERROR(PrecheckCreate(key, options));
    bool first_pending = true;
    int index = 0;
    auto source = [&](std::vector<std::byte>& buf, std::span<const std::byte>* view,
                      int* idx) -> Result<bool> {
      size_t n;
      if (first_pending) {
        first_pending = false;
        buf.swap(first);
        n = n0;
      } else {
        if (eof) return false;
        ASSIGN_OR_RETURN(n, fill(buf));
        if (n == 0) return false;
      }
      *view = std::span<const std::byte>(buf.data(), n);
      *idx = index++;
      return true;
    };
    return UploadBlocks(key, options, source, 0, /*buffered=*/true);
  }

  Result<std::string> Get(std::string_view key) override {
    RETURN_IF_ERROR(CheckKey(key));
    std::string out;
    StringSink sink(&out);
    Request r = Req("Get Blob", "GET", Blob(key));
    r.sink = &sink;
    ASSIGN_OR_RETURN(Response resp, Execute(r));
    if (resp.status != 200) return MapError(r, resp, key);
    std::string len = resp.Header("content-length");
    if (!len.empty() && std::strtoull(len.c_str(), nullptr, 10) != out.size()) {
      return DataLoss("object " + Where(key) + ": got " + std::to_string(out.size()) +
                      " bytes, Content-Length said " + len);
    }
    std::string md5 = resp.Header("content-md5");
    if (!md5.empty() && Md5Base64(Bytes(out)) != md5) {
      return DataLoss("object " + Where(key) + ": the content does not match its Content-MD5");
    }
    return out;
  }

  Status GetRange(std::string_view key, uint64_t offset, std::span<std::byte> out) override {
    RETURN_IF_ERROR(CheckKey(key));
    if (out.empty()) return Stat(key).status();
    SpanSink sink(out);
    Request r = Req("Get Blob", "GET", Blob(key));
    r.ms.emplace_back("x-ms-range", "bytes=" + std::to_string(offset) + "-" +
                                        std::to_string(offset + out.size() - 1));
    r.sink = &sink;
    ASSIGN_OR_RETURN(Response resp, Execute(r));
    if (resp.status == 416) {
      return DataLoss("object " + Where(key) + " is shorter than offset " + std::to_string(offset) +
                      " + " + std::to_string(out.size()) + " bytes");
    }
    if (resp.status != 206 && resp.status != 200) return MapError(r, resp, key);
    if (sink.written() != out.size()) {
      return DataLoss("object " + Where(key) + ": read " + std::to_string(sink.written()) + " of " +
                      std::to_string(out.size()) + " bytes at offset " + std::to_string(offset) +
                      " (the object is shorter)");
    }
    return Status::Ok();
  }

  Status GetFile(std::string_view key, const std::string& path) override {
    RETURN_IF_ERROR(CheckKey(key));
    ASSIGN_OR_RETURN(ObjectInfo info, Stat(key));
    std::string tmp = path + ".tmp-" + RandomHex(12);
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return IoError("creating " + tmp, errno);
    Status s = DownloadInto(key, info, fd, tmp);
    if (::close(fd) != 0 && s.ok()) s = IoError("closing " + tmp, errno);
    if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
      s = IoError("renaming " + tmp + " to " + path, errno);
    if (!s.ok()) ::unlink(tmp.c_str());
    return s;
  }

  Result<ObjectInfo> Stat(std::string_view key) override {
    RETURN_IF_ERROR(CheckKey(key));
    Request r = Req("Get Blob Properties", "HEAD", Blob(key));
    ASSIGN_OR_RETURN(Response resp, Execute(r));
    if (resp.status != 200) return MapError(r, resp, key);
    ObjectInfo info;
    info.key = std::string(key);
    info.size = std::strtoull(resp.Header("content-length").c_str(), nullptr, 10);
    info.etag = resp.Header("etag");
    info.modified_unix = ParseHttpDate(resp.Header("last-modified"));
    return info;
  }

  Result<ListPage> List(std::string_view prefix, std::string_view next, int max_results) override {
    if (prefix.find('\0') != std::string_view::npos || prefix.starts_with("/")) {
      return InvalidArgument("list prefix '" + std::string(prefix) + "' in " + url_ +
                             " must be relative (no leading '/', no NUL)");
    }
    std::string full_prefix =
        c_.prefix.empty() ? std::string(prefix) : c_.prefix + "/" + std::string(prefix);
    std::string body;
    StringSink sink(&body);
    Request r = Req("List Blobs", "GET", "");
    r.query = {{"restype", "container"}, {"comp", "list"}};
    if (!full_prefix.empty()) r.query.emplace_back("prefix", full_prefix);
    if (!next.empty()) r.query.emplace_back("marker", std::string(next));
    if (max_results > 0)
      r.query.emplace_back("maxresults", std::to_string(std::min(max_results, 5000)));
    r.sink = &sink;
    ASSIGN_OR_RETURN(Response resp, Execute(r));
    if (resp.status == 404 && resp.ErrorCode() == "ContainerNotFound") return ListPage{};
    if (resp.status != 200) return MapError(r, resp, prefix);
    auto parsed = ParseListBlobsXml(body);
    if (!parsed.ok()) return parsed.status().WithContext("listing " + url_);
    ListPage page;
    size_t strip = c_.prefix.empty() ? 0 : c_.prefix.size() + 1;
    for (auto& o : parsed->objects) {
      if (o.key.size() < strip) continue;
      o.key = o.key.substr(strip);
      page.objects.push_back(std::move(o));
    }
    std::sort(page.objects.begin(), page.objects.end(),
              [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
    page.next = parsed->next_marker;
    return page;
  }

  Status Delete(std::string_view key) override {
    RETURN_IF_ERROR(CheckKey(key));
    Request r = Req("Delete Blob", "DELETE", Blob(key));
    ASSIGN_OR_RETURN(Response resp, Execute(r));
    if (resp.status == 202 || resp.status == 200) return Status::Ok();
    // A retried Delete whose first attempt went through (answer lost) sees 404.
    if (resp.status == 404 && resp.earlier_may_have_applied &&
        resp.ErrorCode() != "ContainerNotFound") {
      return Status::Ok();
    }
    return MapError(r, resp, key);
  }

 private:
  std::string Where(std::string_view key) const { return "'" + std::string(key) + "' in " + url_; }
  std::string Blob(std::string_view key) const {
    return c_.prefix.empty() ? std::string(key) : c_.prefix + "/" + std::string(key);
  }
  Status CheckKey(std::string_view key) const { return ValidateKey(key).WithContext(url_); }

  Status MapError(const Request& r, const Response& resp, std::string_view key) const {
    std::string code = resp.ErrorCode();
    std::string what = r.op + " " + (key.empty() ? url_ : Where(key)) + ": HTTP " +
                       std::to_string(resp.status) + (code.empty() ? "" : " (" + code + ")");
    std::string rid = resp.Header("x-ms-request-id");
    if (!rid.empty()) what += ", request id " + rid;
    switch (resp.status) {
      case 404:
        if (code == "ContainerNotFound") {
          return NotFound(what + ": container '" + c_.container + "' does not exist");
        }
        return NotFound("object " + Where(key) + " does not exist");
      case 409:
      case 412:
        if (!r.if_none_match.empty())
          return AlreadyExists("object " + Where(key) + " already exists");
        if (!r.if_match.empty()) {
          return FailedPrecondition(what + ": the object changed while it was being read; retry");
        }
        return FailedPrecondition(what);
      case 401:
      case 403:
        if (c_.token_source) {
          // The service's own reason says whether the token was refused
          // (audience, issuer, expiry) or the identity lacks a role.
          std::string reason;
          if (auto d = Element(resp.error_body, "AuthenticationErrorDetail", 0,
                               resp.error_body.size(), nullptr)) {
            reason = XmlUnescape(*d);  // "Lifetime validation failed. The token is expired."
          } else if (auto m =
                         Element(resp.error_body, "Message", 0, resp.error_body.size(), nullptr)) {
            reason = std::string(*m);
            if (size_t nl = reason.find_first_of("\r\n"); nl != std::string::npos)
              reason.resize(nl);
          }
          bool role = code.starts_with("Authorization");  // AuthorizationPermissionMismatch
          std::string msg = what + (reason.empty() ? "" : " \"" + reason + "\"") + " using the " +
                            c_.credential_source + "; ";
          if (!role) {
            msg += "the token was refused: it must be for " + std::string(kStorageResource) +
                   ", issued by the account's tenant and not expired (check the clock); ";
          }
          return PermissionDenied(msg +
                                  "the identity needs the 'Storage Blob Data Contributor' role "
                                  "(writes) or 'Storage Blob Data Reader' (reads only) on the "
                                  "storage account or container '" +
                                  c_.container + "' (role assignments take minutes to apply)");
        }
        return PermissionDenied(what + " using the " + c_.credential_source +
                                "; check the key or the SAS token (permissions, expiry) and the "
                                "clock");
      case 400:
        return InvalidArgument(what);
      default:
        return Internal(what + ": unexpected response");
    }
  }

  // One HTTP exchange with retries. Returns the last response for any status
  // that is not retryable; Unavailable after the attempts are exhausted.
  Result<Response> Execute(Request& r) {
    const RetryPolicy& rp = c_.options.retry;
    std::string request_id = RequestId();
    std::string last;
    bool may_have_applied = false;
    thread_local std::mt19937_64 rng{std::random_device{}()};
    for (int attempt = 1;; ++attempt) {
      Response resp;
      std::optional<std::chrono::milliseconds> retry_after;
      std::string bearer;
      CURLcode rc = CURLE_OK;
      bool token_failed = false;
      if (c_.token_source) {
        Result<std::string> token = c_.token_source->Token();
        if (!token.ok()) {
          StatusCode code = token.status().code();
          // Only an endpoint that could not answer is worth another try.
          if (code != StatusCode::kUnavailable && code != StatusCode::kDeadlineExceeded &&
              code != StatusCode::kResourceExhausted) {
            return token.status().WithContext(
                r.op + " " + (r.blob.empty() ? url_ : Where(BlobKey(r.blob))) +
                ": getting an Entra ID token for " + kStorageResource);
          }
          token_failed = true;
          last = token.status().message();
        } else {
          bearer = std::move(*token);
        }
      }
      if (!token_failed) rc = Perform(r, request_id, bearer, &resp);
      resp.attempts = attempt;
      resp.earlier_may_have_applied = may_have_applied;
      if (rc != CURLE_OK && rc != CURLE_COULDNT_CONNECT && rc != CURLE_COULDNT_RESOLVE_HOST) {
        may_have_applied = true;
      }
      if (token_failed) {
        // `last` says why; retried below.
      } else if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE) {
        // Not transient: the same certificate will not become trusted on retry.
        return FailedPrecondition(
            r.op + " " + url_ + ": TLS to " + c_.endpoint + " failed (" + curl_easy_strerror(rc) +
            "); the server's certificate is not trusted by " +
            (c_.ca_file.empty() ? std::string("the system store") : "the CA file " + c_.ca_file) +
            "; set StoreOptions::ca_file or GANTRY_CA_FILE to the CA that issued it");
      } else if (rc == CURLE_OK) {
        if (!RetryableStatus(resp.status)) return resp;
        std::string code = resp.ErrorCode();
        last = "HTTP " + std::to_string(resp.status) + (code.empty() ? "" : " (" + code + ")");
        retry_after = ParseRetryAfter(resp.Header("retry-after"));
      } else if (rc == CURLE_WRITE_ERROR) {
        // The sink refused the data (more bytes than asked, or a local write failed).
        return DataLoss(r.op + " " + Where(BlobKey(r.blob)) +
                        ": the response body did not fit the request " +
                        "(server ignored the range, or writing the local file failed)");
      } else {
        last = curl_easy_strerror(rc);
      }
      if (attempt >= rp.max_attempts) {
        return Unavailable(
            r.op + " " + (r.blob.empty() ? url_ : Where(BlobKey(r.blob))) + ": gave up after " +
            std::to_string(attempt) + " attempts; last: " + last +
            (token_failed ? "; without an account key or SAS the store uses Entra ID: off "
                            "Azure set AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN or "
                            "AZURE_STORAGE_CONNECTION_STRING, or another credential"
                          : ""));
      }
      std::chrono::milliseconds wait = BackoffDelay(rp, attempt, retry_after, rng());
      log::debug("storage: {} {} failed ({}), attempt {}/{}, retrying in {} ms", r.op, url_, last,
                 attempt, rp.max_attempts, wait.count());
      std::this_thread::sleep_for(wait);
    }
  }

  std::string BlobKey(const std::string& blob) const {
    size_t strip = c_.prefix.empty() ? 0 : c_.prefix.size() + 1;
    return blob.size() >= strip ? blob.substr(strip) : blob;
  }

  CURLcode Perform(Request& r, const std::string& request_id, const std::string& bearer,
                   Response* resp) {
    std::string path = endpoint_path_ + "/" + c_.container;
    if (!r.blob.empty()) path += "/" + UrlEncode(r.blob, /*keep_slash=*/true);
    std::string query;
    for (const auto& [k, v] : r.query) {
      query += query.empty() ? "?" : "&";
      query += UrlEncode(k) + "=" + UrlEncode(v);
    }
    const bool shared_key = !c_.account_key.empty();
    if (!c_.sas_token.empty() && !shared_key) {
      query += query.empty() ? "?" : "&";
      query += c_.sas_token;
    }
    size_t host_end = c_.endpoint.size() - endpoint_path_.size();
    std::string full = c_.endpoint.substr(0, host_end) + path + query;

    bool has_body = r.method == "PUT";
    std::vector<std::pair<std::string, std::string>> ms = r.ms;
    ms.emplace_back("x-ms-date", HttpDateNow());
    ms.emplace_back("x-ms-version", std::string(kApiVersion));
    ms.emplace_back("x-ms-client-request-id", request_id);

    curl_slist* headers = nullptr;
    auto add = [&](const std::string& name, const std::string& value) {
      headers = curl_slist_append(headers, (name + ": " + value).c_str());
    };
    for (const auto& [k, v] : ms) add(k, v);
    if (!r.content_md5.empty()) add("Content-MD5", r.content_md5);
    if (!r.content_type.empty()) add("Content-Type", r.content_type);
    if (!r.if_match.empty()) add("If-Match", r.if_match);
    if (!r.if_none_match.empty()) add("If-None-Match", r.if_none_match);
    headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
    if (!bearer.empty()) {
      add("Authorization", "Bearer " + bearer);
    } else if (shared_key) {
      SignInput in;
      in.verb = r.method;
      in.content_length = has_body ? std::to_string(r.body.size()) : "";
      in.content_md5 = r.content_md5;
      in.content_type = r.content_type;
      in.if_match = r.if_match;
      in.if_none_match = r.if_none_match;
      in.ms_headers = ms;
      in.account = c_.account;
      in.path = path;
      in.query = r.query;
      Result<std::string> sig = HmacSha256Base64(c_.account_key, SharedKeyStringToSign(in));
      if (!sig.ok()) {
        curl_slist_free_all(headers);
        resp->status = 0;
        return CURLE_LOGIN_DENIED;
      }
      add("Authorization", "SharedKey " + c_.account + ":" + *sig);
    }

    CURL* h = pool_.Get();
    curl_easy_reset(h);
    Transfer t{resp, r.sink, h, r.body};
    if (r.sink) r.sink->Reset();
    curl_easy_setopt(h, CURLOPT_URL, full.c_str());
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 1L << 20);
    curl_easy_setopt(h, CURLOPT_UPLOAD_BUFFERSIZE, 2L << 20);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, OnWrite);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
    long timeout = static_cast<long>(c_.options.retry.request_timeout.count());
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, std::min(timeout, 10000L));
    if (!c_.ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, c_.ca_file.c_str());
    if (r.method == "PUT") {
      curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(h, CURLOPT_READFUNCTION, OnRead);
      curl_easy_setopt(h, CURLOPT_READDATA, &t);
      curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, OnSeek);
      curl_easy_setopt(h, CURLOPT_SEEKDATA, &t);
      curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
    } else if (r.method == "HEAD") {
      curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (r.method == "DELETE") {
      curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE");
    }
    CURLcode rc = curl_easy_perform(h);
    if (rc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->status);
    if (rc == CURLE_WRITE_ERROR && !t.sink_failed) rc = CURLE_RECV_ERROR;
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
    curl_slist_free_all(headers);
    pool_.Put(h);
    return rc;
  }

  // Runs a write request; creates the container and retries once when it is missing.
  Result<Response> ExecuteWrite(Request& r) {
    ASSIGN_OR_RETURN(Response resp, Execute(r));
    if (resp.status == 404 && resp.ErrorCode() == "ContainerNotFound" &&
        c_.options.create_container) {
      RETURN_IF_ERROR(CreateContainer());
      ASSIGN_OR_RETURN(resp, Execute(r));
    }
    return resp;
  }

  Status CreateContainer() {
    // Serialised, so that a writer that waited here finds the container made
    // by the one before it (several blocks can hit ContainerNotFound at once).
    std::lock_guard<std::mutex> lock(container_mu_);
    Request r = Req("Create Container", "PUT", "");
    r.query = {{"restype", "container"}};
    ASSIGN_OR_RETURN(Response resp, Execute(r));
    if (resp.status == 201 || resp.status == 409) return Status::Ok();  // 409: someone else made it
    return MapError(r, resp, "");
  }

  // After a retried conditional create failed with 409/412: was it our own
  // earlier attempt that succeeded?
  bool OwnsBlob(std::string_view key, const std::string& put_id) {
    Request r = Req("Get Blob Properties", "HEAD", Blob(key));
    Result<Response> resp = Execute(r);
    return resp.ok() && resp->status == 200 && resp->Header("x-ms-meta-gantryputid") == put_id;
  }

  Status PutBlob(std::string_view key, std::span<const std::byte> data, const PutOptions& o) {
    std::string put_id = RandomHex(16);
    Request r = Req("Put Blob", "PUT", Blob(key));
    r.ms = {{"x-ms-blob-type", "BlockBlob"}, {"x-ms-meta-gantryputid", put_id}};
    r.content_type = o.content_type.empty() ? "application/octet-stream" : o.content_type;
    if (c_.options.content_md5) r.content_md5 = Md5Base64(data);
    if (o.if_none_match) r.if_none_match = "*";
    r.body = data;
    ASSIGN_OR_RETURN(Response resp, ExecuteWrite(r));
    if (resp.status == 201) return Status::Ok();
    if ((resp.status == 409 || resp.status == 412) && o.if_none_match && OwnsBlob(key, put_id)) {
      return Status::Ok();
    }
    if (resp.status == 400 && resp.ErrorCode() == "Md5Mismatch") {
      return DataLoss("Put Blob " + Where(key) + ": the service saw a different MD5 than was sent");
    }
    return MapError(r, resp, key);
  }

  // With if_none_match, fail fast instead of uploading blocks that cannot commit.
  Status PrecheckCreate(std::string_view key, const PutOptions& o) {
    if (!o.if_none_match) return Status::Ok();
    Result<ObjectInfo> st = Stat(key);
    if (st.ok()) return AlreadyExists("object " + Where(key) + " already exists");
    if (st.status().code() == StatusCode::kNotFound) return Status::Ok();
    return st.status();
  }

  using BlockSource =
      std::function<Result<bool>(std::vector<std::byte>&, std::span<const std::byte>*, int*)>;

  // Stages blocks from `source` (called under a lock) with `parallelism`
  // workers, then commits them with Put Block List. Nothing is visible under
  // the key unless the commit succeeds.
  Status UploadBlocks(std::string_view key, const PutOptions& o, const BlockSource& source,
                      size_t known_blocks, bool buffered) {
    (void)buffered;
    const std::string upload_id = RandomHex(16);
    const std::string blob = Blob(key);
    std::mutex mu;
    Status first_error;
    std::atomic<bool> failed{false};
    std::vector<std::string> ids;
    auto worker = [&] {
      std::vector<std::byte> buf;
      for (;;) {
        std::span<const std::byte> view;
        int index = -1;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (failed) return;
          Result<bool> more = source(buf, &view, &index);
          if (!more.ok()) {
            first_error = more.status();
            failed = true;
            return;
          }
          if (!*more) return;
          if (index >= 50000) {
            first_error = InvalidArgument("uploading " + Where(key) +
                                          ": more than 50000 blocks; raise block_bytes");
            failed = true;
            return;
          }
          if (ids.size() <= static_cast<size_t>(index)) ids.resize(index + 1);
        }
        char idbuf[64];
        std::snprintf(idbuf, sizeof idbuf, "%s-%06d", upload_id.c_str(), index);
        std::string id = Base64Encode(Bytes(idbuf));
        Request r = Req("Put Block", "PUT", blob);
        r.query = {{"comp", "block"}, {"blockid", id}};
        if (c_.options.content_md5) r.content_md5 = Md5Base64(view);
        r.body = view;
        Result<Response> resp = Execute(r);
        if (resp.ok() && resp->status == 404 && resp->ErrorCode() == "ContainerNotFound" &&
            c_.options.create_container) {
          Status cs = CreateContainer();
          if (cs.ok()) {
            resp = Execute(r);
          } else {
            resp = cs;
          }
        }
        Status s = resp.status();
        if (s.ok() && resp->status != 201) {
          s = resp->status == 400 && resp->ErrorCode() == "Md5Mismatch"
                  ? DataLoss("Put Block " + Where(key) +
                             ": the service saw a different MD5 than was sent")
                  : MapError(r, *resp, key);
        }
        std::lock_guard<std::mutex> lock(mu);
        if (!s.ok()) {
          if (!failed) first_error = s;
          failed = true;
          return;
        }
        ids[index] = id;
      }
    };
    int workers = c_.options.parallelism;
    if (known_blocks > 0) workers = static_cast<int>(std::min<size_t>(workers, known_blocks));
    std::vector<std::thread> threads;
    for (int i = 1; i < workers; ++i) threads.emplace_back(worker);
    worker();
    for (auto& t : threads) t.join();
    if (failed) return first_error;  // staged blocks expire unreferenced

    std::string xml = "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>";
    for (const auto& id : ids) xml += "<Latest>" + id + "</Latest>";
    xml += "</BlockList>";
    std::string put_id = RandomHex(16);
    Request r = Req("Put Block List", "PUT", blob);
    r.query = {{"comp", "blocklist"}};
    r.ms = {{"x-ms-blob-content-type",
             o.content_type.empty() ? "application/octet-stream" : o.content_type},
            {"x-ms-meta-gantryputid", put_id}};
    r.content_type = "application/xml";
    r.content_md5 = Md5Base64(Bytes(xml));
    if (o.if_none_match) r.if_none_match = "*";
    r.body = Bytes(xml);
    ASSIGN_OR_RETURN(Response resp, Execute(r));
    if (resp.status == 201) return Status::Ok();
    if ((resp.status == 409 || resp.status == 412) && o.if_none_match && OwnsBlob(key, put_id)) {
      return Status::Ok();
    }
    return MapError(r, resp, key);
  }

  Status DownloadInto(std::string_view key, const ObjectInfo& info, int fd,
                      const std::string& tmp) {
    const uint64_t size = info.size;
    if (size == 0) return Status::Ok();
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
      if (errno == ENOSPC || errno == EFBIG) return ResourceExhausted("no space for " + tmp);
    }
    const uint64_t bs = c_.options.block_bytes;
    const uint64_t ranges = (size + bs - 1) / bs;
    std::atomic<uint64_t> next{0};
    std::atomic<bool> failed{false};
    std::mutex mu;
    Status first_error;
    auto worker = [&] {
      for (;;) {
        if (failed) return;
        uint64_t i = next.fetch_add(1);
        if (i >= ranges) return;
        uint64_t off = i * bs;
        uint64_t n = std::min(bs, size - off);
        FileSink sink(fd, off, n);
        Request r = Req("Get Blob", "GET", Blob(key));
        r.ms.emplace_back("x-ms-range",
                          "bytes=" + std::to_string(off) + "-" + std::to_string(off + n - 1));
        // Every range must come from the same version of the object.
        if (!info.etag.empty()) r.if_match = info.etag;
        r.sink = &sink;
        Result<Response> resp = Execute(r);
        Status s = resp.status();
        if (s.ok() && resp->status != 206 && resp->status != 200) s = MapError(r, *resp, key);
        if (s.ok() && sink.error() != 0) s = IoError("writing " + tmp, sink.error());
        if (s.ok() && sink.written() != n) {
          s = DataLoss("object " + Where(key) + ": range at " + std::to_string(off) + " returned " +
                       std::to_string(sink.written()) + " of " + std::to_string(n) + " bytes");
        }
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          if (!failed) first_error = s;
          failed = true;
          return;
        }
      }
    };
    int workers = static_cast<int>(std::min<uint64_t>(c_.options.parallelism, ranges));
    std::vector<std::thread> threads;
    for (int i = 1; i < workers; ++i) threads.emplace_back(worker);
    worker();
    for (auto& t : threads) t.join();
    return failed ? first_error : Status::Ok();
  }

  AzureConfig c_;
  std::string url_;
  std::string endpoint_path_;
  HandlePool pool_;
  std::mutex container_mu_;
};

}  // namespace

Result<std::unique_ptr<ObjectStore>> NewAzureBlobStore(AzureConfig config) {
  if (config.account.empty() || config.container.empty()) {
    return InvalidArgument("Azure store needs an account and a container");
  }
  // Container names: 3-63 of [a-z0-9-], starting with a letter or digit, no
  // "--" ($root and $web are the special ones). Checked here so the error
  // names the container instead of a 400 from the first request.
  const std::string& c = config.container;
  bool valid = c == "$root" || c == "$web";
  if (!valid && c.size() >= 3 && c.size() <= 63 && c.front() != '-' && c.back() != '-' &&
      c.find("--") == std::string::npos) {
    valid = std::all_of(c.begin(), c.end(), [](char ch) {
      return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-';
    });
  }
  if (!valid) {
    return InvalidArgument("container name '" + c +
                           "' is not valid for Azure Blob: use 3-63 lower-case letters, digits "
                           "and single hyphens, starting and ending with a letter or digit");
  }
  if (!config.ca_file.empty() && ::access(config.ca_file.c_str(), R_OK) != 0) {
    return NotFound("the CA file " + config.ca_file +
                    " (StoreOptions::ca_file, GANTRY_CA_FILE or SSL_CERT_FILE) cannot be read: " +
                    std::strerror(errno));
  }
  if (!config.account_key.empty()) {
    if (!Base64Decode(config.account_key).ok()) {
      return InvalidArgument("the storage account key from the " + config.credential_source +
                             " is not valid base64");
    }
  }
  return std::unique_ptr<ObjectStore>(new AzureBlobStore(std::move(config)));
}

}  // namespace gantry::storage::internal
