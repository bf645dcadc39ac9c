#include "gantry/core/http_parser.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace gantry::http {
namespace {

constexpr size_t kMaxChunkLine = 4096;  // size + extensions
constexpr size_t kMaxTrailerBytes = 16384;

// RFC 9110 token characters (header names, methods).
constexpr std::array<bool, 256> MakeTokenTable() {
  std::array<bool, 256> t{};
  for (int c = '0'; c <= '9'; ++c) t[c] = true;
  for (int c = 'a'; c <= 'z'; ++c) t[c] = true;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = true;
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) t[static_cast<unsigned char>(c)] = true;
  return t;
}
constexpr std::array<bool, 256> kToken = MakeTokenTable();

bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!kToken[static_cast<unsigned char>(c)]) return false;
  }
  return true;
}

// Field values may hold visible ASCII, obs-text (0x80-0xFF), space and tab.
// Eight bytes at a time: every header value of every request passes here.
bool IsFieldValue(std::string_view s) {
  constexpr uint64_t k01 = 0x0101010101010101ULL, k7f = 0x7f * k01, k80 = 0x80 * k01;
  // Per-byte tests without carries between bytes: a byte's low 7 bits plus a
  // constant below 0x80 stay below 0x100.
  auto equal = [&](uint64_t v, uint64_t byte) {  // bit 7 of each byte that equals `byte`
    const uint64_t x = v ^ (byte * k01);
    return ~(((x & k7f) + k7f) | x) & k80;
  };
  const char* p = s.data();
  size_t n = s.size();
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    const uint64_t at_least_space = (((v & k7f) + 0x60 * k01) | v) & k80;  // >= 0x20
    const uint64_t bad = ((~at_least_space & k80) & ~equal(v, '\t')) | equal(v, 0x7f);
    if (bad != 0) return false;
  }
  for (; n > 0; ++p, --n) {
    auto c = static_cast<unsigned char>(*p);
    if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
  }
  return true;
}

// Request targets: visible ASCII only (no spaces, no controls, no obs-text).
bool IsTargetChars(std::string_view s) {
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c <= 0x20 || c >= 0x7f) return false;
  }
  return true;
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool ParseDigits(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 18) return false;  // 18 digits cannot overflow
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

bool ParseVersion(std::string_view s, int* minor) {
  if (s.size() != 8 || s.substr(0, 7) != "HTTP/1.") return false;
  if (s[7] != '0' && s[7] != '1') return false;
  *minor = s[7] - '0';
  return true;
}

// True when the comma-separated list `value` contains `token` (case-insensitive).
bool ListHas(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    size_t comma = value.find(',');
    std::string_view item = TrimOws(value.substr(0, comma));
    if (IEquals(item, token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

// Splits the header block (lines after the start line, each ending in CRLF,
// the last one empty) into views. Shared by requests and responses.
Status ParseHeaderLines(std::string_view block, std::vector<HeaderView>* out, StatusCode code) {
  out->reserve(16);  // typical heads fit: one allocation instead of five
  while (!block.empty()) {
    size_t eol = block.find("\r\n");
    if (eol == std::string_view::npos) return Status(code, "malformed header line: no CRLF");
    std::string_view line = block.substr(0, eol);
    block.remove_prefix(eol + 2);
    if (line.empty()) break;  // the blank line that ends the head
    if (line.front() == ' ' || line.front() == '\t') {
      return Status(code, "malformed header line: obsolete line folding");
    }
    // The name is the run of token characters; it must end at the colon.
    size_t colon = 0;
    while (colon < line.size() && kToken[static_cast<unsigned char>(line[colon])]) ++colon;
    if (colon == line.size() || line[colon] != ':' || colon == 0) {
      if (line.find(':', colon) == std::string_view::npos) {
        return Status(code, "malformed header line: no ':'");
      }
      // Covers "Name : value" (space before the colon), which some servers
      // accept and others do not: the classic smuggling ambiguity.
      return Status(code, "malformed header line: invalid name");
    }
    std::string_view name = line.substr(0, colon);
    std::string_view value = TrimOws(line.substr(colon + 1));
    if (!IsFieldValue(value))
      return Status(code, "malformed header line: control character in the value");
    out->push_back(HeaderView{name, value});
  }
  return Status::Ok();
}

struct Framing {
  BodyFraming framing = BodyFraming::kNone;
  uint64_t content_length = 0;
  bool close = false;       // Connection: close
  bool keep_alive = false;  // Connection: keep-alive
};

Status DecideFraming(const std::vector<HeaderView>& headers, StatusCode code, bool is_request,
                     int minor, Framing* f) {
  const HeaderView* cl = nullptr;
  const HeaderView* te = nullptr;
  for (const HeaderView& h : headers) {
    if (IEquals(h.name, "content-length")) {
      if (cl) return Status(code, "conflicting Content-Length headers (a repeated one is refused)");
      cl = &h;
    } else if (IEquals(h.name, "transfer-encoding")) {
      if (te) return Status(code, "repeated Transfer-Encoding");
      te = &h;
    } else if (IEquals(h.name, "connection")) {
      if (ListHas(h.value, "close")) f->close = true;
      if (ListHas(h.value, "keep-alive")) f->keep_alive = true;
    }
  }
  if (te) {
    if (cl) return Status(code, "Transfer-Encoding together with Content-Length");
    if (is_request && minor == 0) return Status(code, "Transfer-Encoding in an HTTP/1.0 request");
    if (!IEquals(te->value, "chunked")) {
      // Anything else ("gzip, chunked", "xchunked", "chunked, identity") is
      // refused rather than guessed at.
      return Status(code, "unsupported Transfer-Encoding (only 'chunked' is accepted)");
    }
    f->framing = BodyFraming::kChunked;
    return Status::Ok();
  }
  if (cl) {
    if (!ParseDigits(cl->value, &f->content_length)) return Status(code, "bad Content-Length");
    f->framing = f->content_length == 0 ? BodyFraming::kNone : BodyFraming::kContentLength;
  }
  return Status::Ok();
}

}  // namespace

Status CheckCanonicalPath(std::string_view path) {
  // Routing and access control compare the path as sent; a backend that
  // resolves dot segments, merges slashes or decodes %2F/%2E would see a
  // different path than the one that was authorized. Such paths are refused.
  for (size_t i = 0; i < path.size(); ++i) {
    char c = path[i];
    if (c == '\\') return InvalidArgument("backslash in request path");
    if (c == '%') {
      auto hex = [](char h) {
        return (h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F');
      };
      if (i + 2 >= path.size() || !hex(path[i + 1]) || !hex(path[i + 2])) {
        return InvalidArgument("invalid percent-encoding in request path");
      }
      char a = path[i + 1], b = static_cast<char>(path[i + 2] | 0x20);
      if ((a == '2' && (b == 'e' || b == 'f')) || (a == '5' && b == 'c') ||
          (a == '0' && b == '0')) {
        return InvalidArgument("encoded '.', '/', '\\' or NUL in request path");
      }
    }
  }
  size_t start = 1;  // path[0] is '/'
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    std::string_view seg = path.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (seg.empty() && slash != std::string_view::npos) {
      return InvalidArgument("empty segment ('//') in request path");
    }
    if (seg == "." || seg == "..") return InvalidArgument("dot segment in request path");
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return Status::Ok();
}

const HeaderView* RequestHead::Find(std::string_view name) const {
  for (const HeaderView& h : headers) {
    if (IEquals(h.name, name)) return &h;
  }
  return nullptr;
}

const HeaderView* ResponseHead::Find(std::string_view name) const {
  for (const HeaderView& h : headers) {
    if (IEquals(h.name, name)) return &h;
  }
  return nullptr;
}

HeadScan ScanHead(std::string_view buf, size_t* scanned, size_t max_head, size_t* head_end) {
  size_t i = *scanned;
  size_t limit = std::min(buf.size(), max_head);
  while (i < limit) {
    const void* p = std::memchr(buf.data() + i, '\n', limit - i);
    if (p == nullptr) {
      i = limit;
      break;
    }
    size_t lf = static_cast<size_t>(static_cast<const char*>(p) - buf.data());
    if (lf == 0 || buf[lf - 1] != '\r') {
      *scanned = lf;
      return HeadScan::kBareLf;
    }
    // A head ends at CRLFCRLF, or is a lone CRLF... which is a leading empty
    // line only when nothing but empty lines came before.
    if (lf >= 3 && buf[lf - 2] == '\n' && buf[lf - 3] == '\r') {
      // Leading empty lines: every line so far was empty. Only a few are
      // tolerated (checked up to 16 bytes), which keeps a flood of CRLFs from
      // costing quadratic time; more of them fail as a malformed request line.
      bool only_empty = lf < 18;
      for (size_t k = 0; only_empty && k + 1 < lf; k += 2) {
        if (buf[k] != '\r' || buf[k + 1] != '\n') {
          only_empty = false;
          break;
        }
      }
      if (!only_empty) {
        *head_end = lf + 1;
        *scanned = lf + 1;
        return HeadScan::kComplete;
      }
    }
    i = lf + 1;
  }
  *scanned = i;
  if (buf.size() >= max_head) return HeadScan::kTooLarge;
  return HeadScan::kIncomplete;
}

Status ParseRequestHead(std::string_view head, RequestHead* out) {
  // Reset first: on any error *out holds nothing of an earlier request.
  std::vector<HeaderView> headers = std::move(out->headers);
  headers.clear();
  *out = RequestHead{};
  out->headers = std::move(headers);
  RequestHead& req = *out;
  // Leading empty lines are tolerated (RFC 9112 2.2).
  while (head.size() >= 2 && head[0] == '\r' && head[1] == '\n') head.remove_prefix(2);
  size_t eol = head.find("\r\n");
  if (eol == std::string_view::npos) return InvalidArgument("request line without CRLF");
  std::string_view line = head.substr(0, eol);
  size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return InvalidArgument("malformed request line");
  size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return InvalidArgument("malformed request line");
  }
  req.method = line.substr(0, sp1);
  req.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (!IsToken(req.method)) return InvalidArgument("invalid method");
  if (!ParseVersion(line.substr(sp2 + 1), &req.minor_version)) {
    return InvalidArgument("unsupported HTTP version (HTTP/1.0 and HTTP/1.1 only)");
  }
  if (req.target.empty() || req.target.front() != '/' || !IsTargetChars(req.target)) {
    return InvalidArgument("request target must be an origin-form path such as /v1/models");
  }
  size_t q = req.target.find('?');
  req.path = req.target.substr(0, q);
  if (q != std::string_view::npos) req.query = req.target.substr(q + 1);
  if (req.target.find('#') != std::string_view::npos) {
    return InvalidArgument("fragment in request target");
  }
  RETURN_IF_ERROR(CheckCanonicalPath(req.path));

  RETURN_IF_ERROR(
      ParseHeaderLines(head.substr(eol + 2), &req.headers, StatusCode::kInvalidArgument));
  Framing f;
  RETURN_IF_ERROR(
      DecideFraming(req.headers, StatusCode::kInvalidArgument, true, req.minor_version, &f));
  req.framing = f.framing;
  req.content_length = f.content_length;
  req.keep_alive = req.minor_version == 1 ? !f.close : (f.keep_alive && !f.close);
  int hosts = 0;
  for (const HeaderView& h : req.headers) {
    if (IEquals(h.name, "host")) ++hosts;
    if (IEquals(h.name, "expect")) {
      if (!IEquals(h.value, "100-continue")) return InvalidArgument("unsupported Expect value");
      req.expect_continue = true;
    }
  }
  if (hosts > 1) return InvalidArgument("repeated Host header");
  if (req.minor_version == 1 && hosts == 0) return InvalidArgument("missing Host header");
  return Status::Ok();
}

Result<RequestHead> ParseRequestHead(std::string_view head) {
  RequestHead req;
  RETURN_IF_ERROR(ParseRequestHead(head, &req));
  return req;
}

Status ParseResponseHead(std::string_view head, std::string_view request_method,
                         ResponseHead* out) {
  // Reset first: on any error *out holds nothing of an earlier response.
  std::vector<HeaderView> headers = std::move(out->headers);
  headers.clear();
  *out = ResponseHead{};
  out->headers = std::move(headers);
  ResponseHead& resp = *out;
  size_t eol = head.find("\r\n");
  if (eol == std::string_view::npos) return DataLoss("malformed status line: no CRLF");
  std::string_view line = head.substr(0, eol);
  if (line.size() < 12 || !ParseVersion(line.substr(0, 8), &resp.minor_version) || line[8] != ' ') {
    return DataLoss("malformed status line '" + std::string(line.substr(0, 80)) +
                    "' (expected 'HTTP/1.1 <3-digit code> <reason>')");
  }
  std::string_view code = line.substr(9, 3);
  uint64_t status = 0;
  if (!ParseDigits(code, &status) || status < 100 || status > 599) {
    return DataLoss("malformed status line: status code out of range");
  }
  if (line.size() > 12 && line[12] != ' ')
    return DataLoss("malformed status line: no space after the code");
  resp.status = static_cast<int>(status);
  resp.reason = line.size() > 13 ? line.substr(13) : std::string_view();
  if (!IsFieldValue(resp.reason))
    return DataLoss("malformed status line: control character in the reason");
  RETURN_IF_ERROR(ParseHeaderLines(head.substr(eol + 2), &resp.headers, StatusCode::kDataLoss));
  Framing f;
  RETURN_IF_ERROR(
      DecideFraming(resp.headers, StatusCode::kDataLoss, false, resp.minor_version, &f));
  bool no_body = IEquals(request_method, "HEAD") || resp.status < 200 || resp.status == 204 ||
                 resp.status == 304;
  if (no_body) {
    resp.framing = BodyFraming::kNone;
  } else if (f.framing == BodyFraming::kNone && resp.Find("content-length") == nullptr) {
    resp.framing = BodyFraming::kUntilClose;
  } else {
    resp.framing = f.framing;
    resp.content_length = f.content_length;
  }
  resp.keep_alive = resp.framing != BodyFraming::kUntilClose &&
                    (resp.minor_version == 1 ? !f.close : (f.keep_alive && !f.close));
  return Status::Ok();
}

Result<ResponseHead> ParseResponseHead(std::string_view head, std::string_view request_method) {
  ResponseHead resp;
  RETURN_IF_ERROR(ParseResponseHead(head, request_method, &resp));
  return resp;
}

Status ChunkedDecoder::Feed(std::string_view in, std::string* out, size_t* used) {
  size_t pos = 0;
  while (pos < in.size() && state_ != State::kDone) {
    switch (state_) {
      case State::kSize:
      case State::kTrailer: {
        size_t lf = in.find('\n', pos);
        size_t take = (lf == std::string_view::npos ? in.size() : lf + 1) - pos;
        size_t cap = state_ == State::kSize ? kMaxChunkLine : kMaxTrailerBytes - trailer_bytes_;
        if (line_.size() + take > cap) {
          *used = pos;
          return InvalidArgument(state_ == State::kSize ? "chunk size line too long"
                                                        : "chunked trailers too long");
        }
        line_.append(in.substr(pos, take));
        pos += take;
        if (lf == std::string_view::npos) break;
        if (line_.size() < 2 || line_[line_.size() - 2] != '\r') {
          *used = pos;
          return InvalidArgument("bare LF in chunked framing");
        }
        std::string_view l(line_.data(), line_.size() - 2);
        if (state_ == State::kTrailer) {
          trailer_bytes_ += line_.size();
          // Trailers are dropped (a proxy may not know how to merge them);
          // the empty line ends the message.
          if (l.empty()) state_ = State::kDone;
          line_.clear();
          break;
        }
        std::string_view size_text = l.substr(0, l.find(';'));
        uint64_t size = 0;
        if (size_text.empty() || size_text.size() > 15) {
          *used = pos;
          return InvalidArgument("bad chunk size");
        }
        for (char c : size_text) {
          int d;
          if (c >= '0' && c <= '9') {
            d = c - '0';
          } else if (c >= 'a' && c <= 'f') {
            d = c - 'a' + 10;
          } else if (c >= 'A' && c <= 'F') {
            d = c - 'A' + 10;
          } else {
            *used = pos;
            return InvalidArgument("bad chunk size");
          }
          size = size * 16 + static_cast<uint64_t>(d);
        }
        line_.clear();
        if (size == 0) {
          state_ = State::kTrailer;
        } else {
          if (size > max_body_ - decoded_) {
            *used = pos;
            return ResourceExhausted("chunked body larger than the limit");
          }
          remaining_ = size;
          state_ = State::kData;
        }
        break;
      }
      case State::kData: {
        size_t take = static_cast<size_t>(std::min<uint64_t>(remaining_, in.size() - pos));
        out->append(in.substr(pos, take));
        pos += take;
        remaining_ -= take;
        decoded_ += take;
        if (remaining_ == 0) state_ = State::kDataCrlf;
        break;
      }
      case State::kDataCrlf: {
        // Exactly CRLF after the data; anything else is a framing error.
        line_.push_back(in[pos++]);
        if (line_.size() == 2) {
          if (line_ != "\r\n") {
            *used = pos;
            return InvalidArgument("chunk data not followed by CRLF");
          }
          line_.clear();
          state_ = State::kSize;
        } else if (line_[0] != '\r') {
          *used = pos;
          return InvalidArgument("chunk data not followed by CRLF");
        }
        break;
      }
      case State::kDone:
        break;
    }
  }
  *used = pos;
  return Status::Ok();
}

void AppendChunk(std::string_view data, std::string* out) {
  if (data.empty()) return;
  char hex[20];
  int n = 0;
  size_t v = data.size();
  char tmp[20];
  do {
    tmp[n++] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v != 0);
  for (int i = 0; i < n; ++i) hex[i] = tmp[n - 1 - i];
  out->append(hex, static_cast<size_t>(n));
  out->append("\r\n");
  out->append(data);
  out->append("\r\n");
}

bool IsHopByHop(std::string_view name, std::string_view connection_value) {
  static constexpr std::string_view kHop[] = {
      "connection",        "keep-alive",          "proxy-connection",  "te", "trailer", "upgrade",
      "transfer-encoding", "proxy-authorization", "proxy-authenticate"};
  for (std::string_view h : kHop) {
    if (IEquals(name, h)) return true;
  }
  return !connection_value.empty() && ListHas(connection_value, name);
}

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 304:
      return "Not Modified";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 417:
      return "Expectation Failed";
    case 422:
      return "Unprocessable Content";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

}  // namespace gantry::http
