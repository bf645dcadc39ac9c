// One attempt of a request against one backend: the upstream head, the
// exchange (upstream.h), the response head to the client, the body streamed
// through (de-chunked and re-chunked, SSE usage chunks removed), usage read
// from the response, and the upstream connection back to the pool.
#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "worker.h"

namespace gantry::gateway::internal {

namespace asio = boost::asio;
using asio::awaitable;
using boost::system::error_code;
// String literals as string_views: `s += "..."sv` appends without a strlen.
using namespace std::string_view_literals;

namespace {
constexpr size_t kMaxSniffedResponse = 4 << 20;  // usage is read from bodies up to this size
constexpr size_t kMaxModelLabels = 256;          // bound on distinct `model` label values
}  // namespace

namespace {

// The 8 bytes at `p` as a little-endian word.
uint64_t Word(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

// `x` with 'A'..'Z' folded to lower case in each byte, exactly (no other
// byte changes, non-ASCII included).
uint64_t FoldUpper(uint64_t x) {
  constexpr uint64_t k01 = 0x0101010101010101ULL, k7f = 0x7f7f7f7f7f7f7f7fULL;
  constexpr uint64_t k80 = 0x8080808080808080ULL;
  const uint64_t low7 = x & k7f;
  // Bit 7 of a byte: ASCII and 'A' <= b <= 'Z' (no carry crosses bytes: each
  // low-7-bit value plus at most 0x3f stays under 0x100).
  const uint64_t upper = (low7 + (0x80 - 'A') * k01) & ~(low7 + (0x7f - 'Z') * k01) & ~x & k80;
  return x | (upper >> 2);
}

// http::IEquals(s, lower) for a `lower` with no byte in 'A'..'Z', a word at a
// time (the last word overlaps the one before it; names under 8 bytes go
// byte by byte).
bool EqualsLower(std::string_view s, std::string_view lower) {
  const size_t n = s.size();
  if (n != lower.size()) return false;
  if (n < 8) {
    for (size_t i = 0; i < n; ++i) {
      char c = s[i];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
      if (c != lower[i]) return false;
    }
    return true;
  }
  for (size_t i = 0; i + 8 < n; i += 8) {
    if (FoldUpper(Word(s.data() + i)) != Word(lower.data() + i)) return false;
  }
  return FoldUpper(Word(s.data() + n - 8)) == Word(lower.data() + n - 8);
}

}  // namespace

HeaderName ClassifyHeader(std::string_view n) {
  using H = HeaderName;
  auto is = [n](std::string_view lower) { return EqualsLower(n, lower); };
  // By length first: one comparison for most names, none for most others.
  switch (n.size()) {
    case 2:
      return is("te") ? H::kHopByHop : H::kOther;
    case 4:
      return is("host") ? H::kHost : H::kOther;
    case 6:
      return is("expect") ? H::kExpect : H::kOther;
    case 7:
      return is("trailer") || is("upgrade") ? H::kHopByHop : H::kOther;
    case 9:
      return is("x-api-key") ? H::kApiKey : H::kOther;
    case 10:
      return is("connection") || is("keep-alive") ? H::kHopByHop : H::kOther;
    case 12:
      return is("x-request-id") ? H::kRequestId : H::kOther;
    case 13:
      return is("authorization") ? H::kAuthorization : H::kOther;
    case 14:
      return is("content-length") ? H::kContentLength : H::kOther;
    case 15:
      return is("x-forwarded-for") ? H::kForwardedFor : H::kOther;
    case 16:
      return is("proxy-connection")   ? H::kHopByHop
             : is("x-forwarded-host") ? H::kForwardedHost
                                      : H::kOther;
    case 17:
      return is("transfer-encoding")   ? H::kHopByHop
             : is("x-forwarded-proto") ? H::kForwardedProto
                                       : H::kOther;
    case 18:
      return is("proxy-authenticate") ? H::kHopByHop : H::kOther;
    case 19:
      return is("proxy-authorization") ? H::kHopByHop : H::kOther;
    default:
      return H::kOther;
  }
}

bool IsHopByHop(std::string_view name, HeaderName kind, std::string_view connection) {
  if (kind == HeaderName::kHopByHop) return true;
  if (connection.empty() || http::IEquals(connection, "keep-alive")) return false;
  return http::IsHopByHop(name, connection);
}

void Worker::BuildUpstreamHead(Request& r, const Attempt& a, size_t body_size) {
  const http::RequestHead& req = r.head;
  const GatewayConfig& cfg = r.rt->config;
  std::string& h = r.conn.up_head;
  h.clear();
  h += req.method;
  h += ' ';
  h += a.target;
  h += " HTTP/1.1\r\nHost: "sv;
  h += a.backend->host_header;
  h += "\r\n"sv;
  std::string_view connection;
  if (const http::HeaderView* cv = req.Find("connection")) connection = cv->value;
  std::string_view forwarded_for, original_host;
  for (const http::HeaderView& hv : req.headers) {
    const HeaderName kind = ClassifyHeader(hv.name);
    if (IsHopByHop(hv.name, kind, connection)) continue;
    switch (kind) {
      case HeaderName::kHost:
        original_host = hv.value;
        continue;
      case HeaderName::kContentLength:
      case HeaderName::kExpect:
      case HeaderName::kRequestId:
      case HeaderName::kForwardedProto:
      case HeaderName::kForwardedHost:
        continue;  // the gateway sets these
      case HeaderName::kForwardedFor:
        forwarded_for = hv.value;
        continue;
      case HeaderName::kAuthorization:
      case HeaderName::kApiKey:
        if (!cfg.forward_credentials) continue;
        break;
      case HeaderName::kOther:
      case HeaderName::kHopByHop:
        break;
    }
    AppendHeader(hv.name, hv.value, &h);
  }
  AppendHeader("x-request-id", r.log.request_id, &h);
  h += "X-Forwarded-For: "sv;
  if (!forwarded_for.empty()) {
    h += forwarded_for;
    h += ", "sv;
  }
  h += r.conn.client_addr;
  h += "\r\nX-Forwarded-Proto: "sv;
  h += cfg.tls.cert_path.empty() ? "http"sv : "https"sv;
  if (!original_host.empty()) {
    h += "\r\nX-Forwarded-Host: "sv;
    h += original_host;
  }
  if (body_size > 0 || req.method == "POST" || req.method == "PUT" || req.method == "PATCH") {
    h += "\r\nContent-Length: "sv;
    AppendInt(static_cast<int64_t>(body_size), &h);
  }
  h += "\r\n\r\n"sv;
}

void Worker::UpstreamFailed(Request& r, Attempt& a, const UpstreamExchange& x) {
  const BackendConfig& backend = *a.backend;
  a.outcome = OutcomeOf(x);
  switch (x.error) {
    case UpstreamError::kNone:
      return;
    case UpstreamError::kBadAddress:
      r.answer = ErrorResponse(
          502, "bad_gateway",
          fmt::format("backend '{}' has an invalid address '{}'", backend.name, backend.host));
      return;
    case UpstreamError::kConnect:
    case UpstreamError::kConnectTimeout: {
      bool timeout = x.error == UpstreamError::kConnectTimeout;
      CounterFor("gantry_gateway_upstream_errors_total", "Failed exchanges with backends",
                 {{"backend", backend.name}, {"kind", timeout ? "connect_timeout" : "connect"}})
          ->Inc();
      r.answer =
          ErrorResponse(timeout ? 504 : 502, timeout ? "upstream_timeout" : "bad_gateway",
                        fmt::format("cannot connect to backend '{}' ({}): {}", backend.name,
                                    backend.host_header, timeout ? "timed out" : x.ec.message()));
      r.log.reason = timeout ? "upstream_connect_timeout" : "upstream_connect_failed";
      return;
    }
    case UpstreamError::kReset:
    case UpstreamError::kTimeout: {
      bool timeout = x.error == UpstreamError::kTimeout;
      CounterFor("gantry_gateway_upstream_errors_total", "Failed exchanges with backends",
                 {{"backend", backend.name}, {"kind", timeout ? "timeout" : "reset"}})
          ->Inc();
      r.log.reason = timeout ? "upstream_timeout" : "upstream_reset";
      r.answer =
          ErrorResponse(timeout ? 504 : 502, timeout ? "upstream_timeout" : "bad_gateway",
                        fmt::format("backend '{}' {}", backend.name,
                                    timeout ? "did not answer in time" : "closed the connection"));
      return;
    }
    case UpstreamError::kMalformedHead:
      r.log.reason = "upstream_bad_response";
      r.answer =
          ErrorResponse(502, "bad_gateway",
                        fmt::format("backend '{}' sent a malformed response head", backend.name));
      return;
    case UpstreamError::kBadHead:
      r.log.reason = "upstream_bad_response";
      r.answer = ErrorResponse(502, "bad_gateway",
                               fmt::format("backend '{}': {}", backend.name, x.parse.message()));
      return;
  }
}

void Worker::CountTokens(const RequestLog& log) {
  auto tc = token_counters_.find(log.model);
  if (tc == token_counters_.end()) {
    // Model names come from clients: bound the label values.
    std::string model_label = token_counters_.size() >= kMaxModelLabels ? "other" : log.model;
    tc = token_counters_.find(model_label);
    if (tc == token_counters_.end()) {
      tc = token_counters_
               .emplace(
                   model_label,
                   std::make_pair(
                       CounterFor("gantry_gateway_tokens_total", "LLM tokens reported by backends",
                                  {{"model", model_label}, {"kind", "prompt"}}),
                       CounterFor("gantry_gateway_tokens_total", "LLM tokens reported by backends",
                                  {{"model", model_label}, {"kind", "completion"}})))
               .first;
    }
  }
  if (tc->second.first) tc->second.first->Inc(static_cast<double>(log.prompt_tokens));
  if (tc->second.second) tc->second.second->Inc(static_cast<double>(log.completion_tokens));
}

Worker::ClientFraming Worker::BuildResponseHead(Request& r, const Attempt& a,
                                                const http::ResponseHead& rh) {
  const http::RequestHead& req = r.head;
  const Call& call = r.call;
  const RequestLog& log = r.log;
  std::string& out = r.conn.resp_head;
  bool client11 = req.minor_version == 1;
  bool rewrite = call.openai_stream;  // SSE bytes may change (usage chunk removed)
  out.clear();
  out += "HTTP/1.1 "sv;
  AppendInt(rh.status, &out);
  out += ' ';
  out += rh.reason.empty() ? http::ReasonPhrase(rh.status) : rh.reason;
  out += "\r\n"sv;
  std::string_view connection;
  if (const http::HeaderView* cv = rh.Find("connection")) connection = cv->value;
  for (const http::HeaderView& hv : rh.headers) {
    const HeaderName kind = ClassifyHeader(hv.name);
    if (IsHopByHop(hv.name, kind, connection) || kind == HeaderName::kContentLength ||
        kind == HeaderName::kRequestId) {
      continue;
    }
    AppendHeader(hv.name, hv.value, &out);
  }
  AppendHeader("x-request-id", log.request_id, &out);
  if (!a.degraded.empty()) AppendHeader("X-Gantry-Degraded", a.degraded, &out);
  const Admission* adm = call.limited ? &call.adm : nullptr;
  if (adm != nullptr && adm->has_rate_headers) {
    out += "RateLimit-Limit: "sv;
    AppendInt(static_cast<int64_t>(adm->limit), &out);
    out += "\r\nRateLimit-Remaining: "sv;
    AppendInt(static_cast<int64_t>(adm->remaining), &out);
    out += "\r\nRateLimit-Reset: "sv;
    AppendInt(static_cast<int64_t>(std::ceil(adm->reset_s)), &out);
    out += "\r\n"sv;
  }
  ClientFraming f;
  f.close = !req.keep_alive || shared_.draining.load();
  if (rh.framing == http::BodyFraming::kContentLength && !rewrite) {
    out += "Content-Length: "sv;
    AppendInt(static_cast<int64_t>(rh.content_length), &out);
    out += "\r\n"sv;
  } else if (rh.framing == http::BodyFraming::kNone) {
    // HEAD and 304 answers describe a body that is not sent: keep the
    // backend's (validated) length. Other bodiless answers say 0.
    const http::HeaderView* cl = rh.Find("content-length");
    if (cl != nullptr && (req.method == "HEAD" || rh.status == 304)) {
      fmt::format_to(std::back_inserter(out), "Content-Length: {}\r\n", cl->value);
    } else if (rh.status >= 200 && rh.status != 204 && rh.status != 304 && req.method != "HEAD") {
      out += "Content-Length: 0\r\n"sv;
    }
  } else if (client11) {
    out += "Transfer-Encoding: chunked\r\n"sv;
    f.chunked = true;
  } else {
    f.close = true;  // HTTP/1.0 client: the body ends when we close
  }
  if (f.close) {
    out += "Connection: close\r\n"sv;
  } else if (req.minor_version == 0) {
    out += "Connection: keep-alive\r\n"sv;
  }
  out += "\r\n"sv;
  return f;
}

awaitable<bool> Worker::Proxy(Request& r, Attempt& a) {
  Conn& c = r.conn;
  const http::RequestHead& req = r.head;
  const ServerLimits& limits = r.rt->config.limits;
  const Call& call = r.call;
  RequestLog& log = r.log;
  const BackendConfig& backend = *a.backend;
  const std::string& body = *a.body;
  BuildUpstreamHead(r, a, body.size());
  Clk::time_point up_start = Clk::now();

  UpstreamExchange x(io_.get_executor());
  x.backend = &backend;
  x.method = req.method;
  x.idempotent = IdempotentMethod(req.method);
  x.head = c.up_head;
  x.body = body;
  x.connect_timeout = limits.upstream_connect_timeout;
  x.timeout = a.timeout;
  x.in = &c.up_in;
  x.head_text = &c.up_resp_text;
  x.response = &c.up_resp_head;
  co_await upstream_.Send(x, c.deadline);
  error_code ec;
  if (x.error != UpstreamError::kNone) {
    UpstreamFailed(r, a, x);
    co_return false;
  }
  boost::asio::ip::tcp::socket& up = x.sock;
  log.upstream_s = Seconds(Clk::now() - up_start);
  const http::ResponseHead& rh = *x.response;
  a.outcome = OutcomeOf(x);
  if (a.hold_5xx && rh.status >= 500) {
    // The caller retries on another backend; this answer is dropped, and so
    // is the connection (its body is not read).
    up.close(ec);
    log.reason = fmt::format("upstream_status_{}", rh.status);
    r.answer = ErrorResponse(rh.status, "upstream_error",
                             fmt::format("backend '{}' answered {} and no other attempt was "
                                         "possible",
                                         backend.name, rh.status));
    co_return false;
  }

  // Response head to the client.
  const ClientFraming framing = BuildResponseHead(r, a, rh);
  const bool chunked_out = framing.chunked;
  const bool client_close = framing.close;
  std::string& out = c.resp_head;
  log.status = rh.status;

  // Body.
  bool sniff = (call.sniff_usage || call.want_outputs) && rh.status < 300;
  std::optional<SseUsageScanner> sse;
  if (call.openai_stream && sniff) sse.emplace(call.strip_usage);
  std::string& sniffed = c.sniffed;
  sniffed.clear();
  http::ChunkedDecoder dec(UINT64_MAX);
  uint64_t remaining = rh.framing == http::BodyFraming::kContentLength ? rh.content_length : 0;
  bool up_done = rh.framing == http::BodyFraming::kNone;
  bool up_ok = true;
  std::string& decoded = c.decoded;
  std::string& scanned_out = c.scanned_out;
  std::string& frame = c.frame;
  r.headers_sent = true;
  bool client_ok = true;
  // The head goes out with the first body bytes when they are already here
  // (one packet, one wakeup of the client); alone and at once otherwise, so
  // that a stream's head is not held back waiting for its first event.
  bool head_pending = true;
  if (up_done || c.up_in.empty()) {
    c.deadline.Set(limits.send_timeout);
    asio::const_buffer head_buf(out.data(), out.size());
    co_await c.Write(head_buf, ec);
    log.bytes_out += out.size();
    client_ok = !ec;
    head_pending = false;
  }

  while (client_ok && !up_done) {
    if (c.up_in.empty()) {
      size_t avail = 0;
      char* p = c.up_in.Prepare(kReadChunk, &avail);
      c.deadline.Watch(&up);
      c.deadline.Set(a.timeout);
      asio::mutable_buffer mb(p, avail);
      size_t n = co_await up.async_read_some(mb, Nothrow(ec));
      c.deadline.Watch(nullptr);
      if (ec) {
        if (rh.framing == http::BodyFraming::kUntilClose && ec == asio::error::eof) {
          up_done = true;
        } else {
          up_ok = false;
          log.reason = c.deadline.timed_out() ? "upstream_timeout" : "upstream_reset";
          a.outcome = c.deadline.timed_out() ? Outcome::kTimeout : Outcome::kReset;
          break;
        }
      } else {
        c.up_in.Commit(n);
      }
    }
    // Payload bytes available now, per upstream framing.
    decoded.clear();
    std::string_view payload;
    if (rh.framing == http::BodyFraming::kContentLength) {
      size_t take = static_cast<size_t>(std::min<uint64_t>(remaining, c.up_in.size()));
      payload = c.up_in.view().substr(0, take);
      remaining -= take;
      if (remaining == 0) up_done = true;
    } else if (rh.framing == http::BodyFraming::kChunked) {
      size_t used = 0;
      Status s = dec.Feed(c.up_in.view(), &decoded, &used);
      c.up_in.Consume(used);
      if (!s.ok()) {
        up_ok = false;
        log.reason = "upstream_bad_chunking";
        a.outcome = Outcome::kReset;
        break;
      }
      if (dec.done()) up_done = true;
      payload = decoded;
    } else {
      payload = c.up_in.view();
    }
    if (sniff && !sse && sniffed.size() + payload.size() <= kMaxSniffedResponse) {
      sniffed.append(payload);
    }
    std::string_view send = payload;
    if (sse) {
      scanned_out.clear();
      sse->Feed(payload, &scanned_out);
      if (up_done) sse->Finish(&scanned_out);
      send = scanned_out;
    }
    frame.clear();
    if (chunked_out) {
      http::AppendChunk(send, &frame);
      if (up_done) frame += http::kLastChunk;
    }
    std::string_view wire = chunked_out ? std::string_view(frame) : send;
    if (!wire.empty() || head_pending) {
      c.deadline.Set(limits.send_timeout);
      std::array<asio::const_buffer, 2> bufs{
          asio::const_buffer(out.data(), head_pending ? out.size() : 0),
          asio::const_buffer(wire.data(), wire.size())};
      co_await c.Write(bufs, ec);
      log.bytes_out += wire.size() + (head_pending ? out.size() : 0);
      head_pending = false;
      if (ec) client_ok = false;
    }
    if (rh.framing == http::BodyFraming::kContentLength) {
      c.up_in.Consume(payload.size());
    } else if (rh.framing == http::BodyFraming::kUntilClose) {
      c.up_in.Consume(payload.size());
    }
  }
  if (sse) {
    const Usage& u = sse->usage();
    if (u.present) {
      log.prompt_tokens = u.prompt_tokens;
      log.completion_tokens = u.completion_tokens;
    }
  } else if (sniff && !sniffed.empty()) {
    Usage u = SniffUsage(sniffed);
    if (u.present) {
      log.prompt_tokens = u.prompt_tokens;
      log.completion_tokens = u.completion_tokens;
    }
  }
  if (log.prompt_tokens + log.completion_tokens > 0 && !log.model.empty()) CountTokens(log);
  if (!up_ok) {
    CounterFor("gantry_gateway_upstream_errors_total", "Failed exchanges with backends",
               {{"backend", backend.name}, {"kind", "body"}})
        ->Inc();
  }
  // Reuse the upstream connection only after a complete, well-framed response
  // with nothing extra behind it.
  upstream_.Release(x, up_ok && up_done && client_ok && rh.keep_alive && c.up_in.empty(),
                    CoarseNow());
  auto hist = upstream_seconds_.find(backend.name);
  if (hist == upstream_seconds_.end()) {
    hist = upstream_seconds_
               .emplace(backend.name,
                        HistogramFor("gantry_gateway_upstream_duration_seconds",
                                     "Time from sending a request upstream to its response head",
                                     {{"backend", backend.name}}))
               .first;
  }
  if (hist->second != nullptr) hist->second->Observe(log.upstream_s);
  // A response cut short cannot be completed: close the client connection so
  // it sees the truncation.
  const bool keep = up_ok && client_ok && !client_close;
  co_return keep;
}

}  // namespace gantry::gateway::internal
