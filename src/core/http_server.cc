// http::Server: one poll() loop thread owns the listener and every connection.
// Each connection is a small state machine (reading a head, reading a body,
// waiting for its handler, writing a response). Handlers run inline on the
// loop thread, or (ServerOptions::handler_threads) on a pool: the loop hands
// a complete request to a worker and goes on serving other connections; the
// worker posts the response back and wakes the loop through the pipe, and
// only the loop ever touches a connection.
#include "gantry/core/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "gantry/core/http_parser.h"

namespace gantry::http {
namespace {

using SteadyClock = std::chrono::steady_clock;

// At most this much of a refused streamed body is read and dropped.
constexpr uint64_t kMaxDiscardBytes = 64ull << 20;
// ReadSome returns to Process at least this often.
constexpr size_t kReadChunkBytes = 1u << 20;
// ServerOptions::handler_threads above this is refused (a typo, not a plan).
constexpr int kMaxHandlerThreads = 1024;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes `in`; with `plus_is_space` (query strings) '+' becomes ' '.
// Malformed escapes are kept literally: the path was already checked by the
// parser, and a query value is the handler's to validate.
std::string PercentDecode(std::string_view in, bool plus_is_space) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%' && i + 2 < in.size()) {
      int hi = HexValue(in[i + 1]);
      int lo = HexValue(in[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(plus_is_space && c == '+' ? ' ' : c);
  }
  return out;
}

std::string PeerString(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return "?";
}

struct ListenAddress {
  std::string host;  // "" = all interfaces
  std::string port;
};

Result<ListenAddress> ParseListen(std::string_view listen) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument("listen address '" + std::string(listen) + "': " + std::string(why) +
                           "; use HOST:PORT, :PORT or [IPV6]:PORT");
  };
  ListenAddress out;
  std::string_view port;
  if (!listen.empty() && listen[0] == '[') {
    size_t close = listen.find(']');
    if (close == std::string_view::npos) return bad("missing ']'");
    out.host = std::string(listen.substr(1, close - 1));
    if (close + 1 >= listen.size() || listen[close + 1] != ':') return bad("missing ':PORT'");
    port = listen.substr(close + 2);
    if (out.host.empty()) return bad("empty IPv6 address");
  } else {
    size_t colon = listen.rfind(':');
    if (colon == std::string_view::npos) return bad("missing ':PORT'");
    out.host = std::string(listen.substr(0, colon));
    if (out.host.find(':') != std::string::npos) return bad("IPv6 addresses need brackets");
    port = listen.substr(colon + 1);
  }
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return bad("the port must be a number 0-65535");
  }
  if (std::stoul(std::string(port)) > 65535) return bad("the port must be a number 0-65535");
  out.port = std::string(port);
  return out;
}

}  // namespace

const std::string* ServerRequest::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (IEquals(k, name)) return &v;
  }
  return nullptr;
}

std::string ServerRequest::QueryParam(std::string_view name) const {
  std::string_view q = query;
  while (!q.empty()) {
    size_t amp = q.find('&');
    std::string_view pair = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    size_t eq = pair.find('=');
    std::string key = PercentDecode(pair.substr(0, eq), true);
    if (key == name) {
      return eq == std::string_view::npos ? std::string()
                                          : PercentDecode(pair.substr(eq + 1), true);
    }
  }
  return "";
}

struct Server::Impl {
  struct Conn {
    uint64_t id = 0;  // names the connection to a handler running on the pool
    int fd = -1;
    std::string peer;
    std::string in;          // received, not yet consumed
    size_t scanned = 0;      // ScanHead progress
    size_t head_end = 0;     // > 0 once a complete head is in `in`
    uint64_t body_len = 0;   // Content-Length of the current request
    bool keep_alive = true;  // of the current request
    bool http10 = false;
    ServerRequest request;
    // Streaming route: the body goes to `sink` as it arrives (not kept in `in`).
    bool streaming = false;
    std::shared_ptr<BodySink> sink;
    uint64_t body_streamed = 0;
    // After an opener refused a body: bytes of it still to read and drop
    // before closing, so the close does not reset the connection under a
    // client that is still sending (it would lose the answer).
    uint64_t discard = 0;
    // A complete request is with a pool worker: nothing more is read or
    // parsed, and no timeout applies, until its response comes back.
    bool handling = false;
    bool request_started = false;  // bytes of a request have arrived
    SteadyClock::time_point request_start;
    SteadyClock::time_point last_activity;
    // Output: head then body, written with writev so bodies are not copied.
    std::string out_head;
    std::string out_body;
    size_t out_off = 0;  // bytes of head+body already sent
    bool close_after_write = false;
    bool peer_closed = false;
    // A body sent from a file (ServerResponse::body_file) after out_body,
    // with sendfile: the file is never read into memory.
    int out_file = -1;
    uint64_t out_file_size = 0;
    uint64_t out_file_off = 0;
    ~Conn() { CloseOutFile(); }
    void CloseOutFile() {
      if (out_file >= 0) ::close(out_file);
      out_file = -1;
      out_file_size = out_file_off = 0;
    }
    bool Writing() const {
      return out_off < out_head.size() + out_body.size() ||
             (out_file >= 0 && out_file_off < out_file_size);
    }
  };

  struct RouteEntry {
    std::string prefix;
    Handler handler;
    BodyOpener opener;  // empty: bodies are buffered
  };
  std::vector<RouteEntry> routes;
  ServerOptions options;
  // The handler pool (empty: handlers run on the loop thread). A Job is a
  // complete request; a Done its response, for the loop to send unless the
  // connection is gone by then.
  struct Job {
    uint64_t conn_id = 0;
    ServerRequest request;
    const RouteEntry* route = nullptr;
    bool keep_alive = false, http10 = false, head_only = false;
  };
  struct Done {
    uint64_t conn_id = 0;
    ServerResponse response;
    bool keep_alive = false, http10 = false, head_only = false;
  };
  std::vector<std::thread> workers;
  std::mutex pool_mu;
  std::condition_variable pool_cv;
  std::deque<Job> jobs;    // guarded by pool_mu
  std::vector<Done> done;  // guarded by pool_mu
  bool pool_stop = false;  // guarded by pool_mu
  uint64_t next_conn_id = 1;
  int listen_fd = -1;
  int wake[2] = {-1, -1};
  std::thread thread;
  std::atomic<uint16_t> port{0};
  std::atomic<bool> stopping{false};
  bool started = false;
  std::vector<std::unique_ptr<Conn>> conns;

  ~Impl() { Stop(); }

  Status Bind() {
    ASSIGN_OR_RETURN(ListenAddress addr, ParseListen(options.listen));
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* res = nullptr;
    // For "all interfaces" prefer the IPv6 wildcard (dual-stack), then IPv4.
    int rc = ::getaddrinfo(addr.host.empty() ? nullptr : addr.host.c_str(), addr.port.c_str(),
                           &hints, &res);
    if (rc != 0) {
      return InvalidArgument("listen address '" + options.listen + "': " + ::gai_strerror(rc));
    }
    std::vector<addrinfo*> candidates;
    for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
      if (ai->ai_family == AF_INET6 || ai->ai_family == AF_INET) candidates.push_back(ai);
    }
    std::stable_sort(candidates.begin(), candidates.end(), [](addrinfo* a, addrinfo* b) {
      return a->ai_family == AF_INET6 && b->ai_family != AF_INET6;
    });
    int last_err = EADDRNOTAVAIL;
    for (addrinfo* ai : candidates) {
      int fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd < 0) {
        last_err = errno;
        continue;
      }
      int one = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (ai->ai_family == AF_INET6 && addr.host.empty()) {
        int zero = 0;
        ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
      }
      if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
        port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
        listen_fd = fd;
        break;
      }
      last_err = errno;
      ::close(fd);
    }
    ::freeaddrinfo(res);
    if (listen_fd < 0) {
      return Unavailable("cannot listen on " + options.listen + ": " + std::strerror(last_err) +
                         "; pick another address or port");
    }
    return Status::Ok();
  }

  void Stop() {
    if (!started) return;
    started = false;
    stopping = true;
    char b = 'x';
    (void)!::write(wake[1], &b, 1);
    if (thread.joinable()) thread.join();
    // Handlers already running finish (their responses are dropped with the
    // connections); requests still queued are never started.
    {
      std::lock_guard lock(pool_mu);
      pool_stop = true;
    }
    pool_cv.notify_all();
    for (std::thread& w : workers) w.join();
    workers.clear();
    jobs.clear();
    for (Done& d : done) Discard(d.response);
    done.clear();
    pool_stop = false;
    for (auto& c : conns) ::close(c->fd);
    conns.clear();
    ::close(listen_fd);
    ::close(wake[0]);
    ::close(wake[1]);
    listen_fd = wake[0] = wake[1] = -1;
  }

  const RouteEntry* Route(std::string_view path) const {
    const RouteEntry* best = nullptr;
    size_t best_len = 0;
    for (const auto& entry : routes) {
      const std::string& prefix = entry.prefix;
      if (path.substr(0, prefix.size()) != prefix) continue;
      // "/metrics" matches "/metrics" and "/metrics/x" but not "/metricsx".
      bool boundary =
          path.size() == prefix.size() || prefix.back() == '/' || path[prefix.size()] == '/';
      if (!boundary) continue;
      if (best == nullptr || prefix.size() > best_len) {
        best = &entry;
        best_len = prefix.size();
      }
    }
    return best;
  }

  // Queues a response. `head_only` (HEAD requests) keeps Content-Length but
  // sends no body.
  void Respond(Conn* c, ServerResponse&& resp, bool keep_alive, bool http10, bool head_only) {
    c->CloseOutFile();
    uint64_t body_size = resp.body.size();
    if (!resp.body_file.empty()) {
      int fd = ::open(resp.body_file.c_str(), O_RDONLY | O_CLOEXEC);
      int open_errno = errno;
      // An open descriptor keeps the data of an unlinked file readable.
      if (resp.body_file_temporary) ::unlink(resp.body_file.c_str());
      struct stat st {};
      if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int err = fd < 0 ? open_errno : errno;
        if (err == 0) err = EINVAL;  // not a regular file
        if (fd >= 0) ::close(fd);
        ServerResponse failed;
        failed.status = 500;
        failed.body =
            "cannot read the response body '" + resp.body_file + "': " + std::strerror(err) + "\n";
        resp = std::move(failed);
        body_size = resp.body.size();
      } else {
        resp.body.clear();
        body_size = static_cast<uint64_t>(st.st_size);
        if (head_only) {
          ::close(fd);
        } else {
          c->out_file = fd;
          c->out_file_size = body_size;
        }
      }
    }
    std::string& h = c->out_head;
    h.clear();
    h.append("HTTP/1.1 ").append(std::to_string(resp.status)).append(" ");
    h.append(ReasonPhrase(resp.status)).append("\r\n");
    h.append("Content-Type: ").append(resp.content_type).append("\r\n");
    h.append("Content-Length: ").append(std::to_string(body_size)).append("\r\n");
    for (const auto& [k, v] : resp.headers) {
      // A handler must not be able to split the response.
      if (k.find_first_of("\r\n:") != std::string::npos ||
          v.find_first_of("\r\n") != std::string::npos) {
        continue;
      }
      h.append(k).append(": ").append(v).append("\r\n");
    }
    if (!keep_alive) {
      h.append("Connection: close\r\n");
    } else if (http10) {
      h.append("Connection: keep-alive\r\n");
    }
    h.append("\r\n");
    if (head_only) {
      c->out_body.clear();
    } else {
      c->out_body = std::move(resp.body);
    }
    c->out_off = 0;
    c->close_after_write = !keep_alive;
  }

  // A response that will never be sent: its temporary body file is removed.
  static void Discard(const ServerResponse& resp) {
    if (resp.body_file_temporary && !resp.body_file.empty()) ::unlink(resp.body_file.c_str());
  }

  // Runs the route's handler (404 without one); an exception is a 500.
  static ServerResponse RunHandler(const RouteEntry* route, const ServerRequest& r) {
    ServerResponse resp;
    if (route == nullptr) {
      resp.status = 404;
      resp.content_type = "application/json";
      resp.body = nlohmann::json{{"error", "no handler for " + r.path}}.dump() + "\n";
      return resp;
    }
    try {
      route->handler(r, &resp);
    } catch (const std::exception& e) {
      resp = ServerResponse();
      resp.status = 500;
      resp.body = std::string("internal error: ") + e.what() + "\n";
    } catch (...) {
      resp = ServerResponse();
      resp.status = 500;
      resp.body = "internal error\n";
    }
    return resp;
  }

  // Sends the answer to the connection's current request and gets ready for
  // the next one.
  void Complete(Conn* c, ServerResponse resp, bool keep_alive, bool http10, bool head_only) {
    c->last_activity = SteadyClock::now();
    Respond(c, std::move(resp), keep_alive, http10, head_only);
    ResetRequestState(c);
    Flush(c);
  }

  // A pool worker: runs queued requests until Stop.
  void Work() {
    for (;;) {
      Job job;
      {
        std::unique_lock lock(pool_mu);
        pool_cv.wait(lock, [&] { return pool_stop || !jobs.empty(); });
        if (pool_stop) return;
        job = std::move(jobs.front());
        jobs.pop_front();
      }
      ServerResponse resp = RunHandler(job.route, job.request);
      // Released before the answer is sent, as inline (e.g. a spooled upload
      // is removed now).
      job.request = ServerRequest();
      {
        std::lock_guard lock(pool_mu);
        done.push_back({job.conn_id, std::move(resp), job.keep_alive, job.http10, job.head_only});
      }
      char b = 'd';
      (void)!::write(wake[1], &b, 1);  // a full pipe already holds a wake-up
    }
  }

  // Sends the responses the pool finished (on the loop thread).
  void FinishHandled() {
    std::vector<Done> finished;
    {
      std::lock_guard lock(pool_mu);
      finished.swap(done);
    }
    for (Done& d : finished) {
      Conn* c = nullptr;
      for (auto& conn : conns) {
        if (conn->id == d.conn_id) c = conn.get();
      }
      if (c == nullptr || !c->handling) {
        Discard(d.response);  // the client went away meanwhile
        continue;
      }
      c->handling = false;
      Complete(c, std::move(d.response), d.keep_alive, d.http10, d.head_only);
      Process(c);  // requests the client pipelined meanwhile
    }
  }

  void RespondError(Conn* c, int status, std::string_view message) {
    ServerResponse resp;
    resp.status = status;
    resp.body = std::string(message) + "\n";
    Respond(c, std::move(resp), /*keep_alive=*/false, false, false);
    // Whatever else the client sent is not parsed.
    c->in.clear();
  }

  void ResetRequestState(Conn* c) {
    // A streamed body was already taken out of `in` as it arrived.
    c->in.erase(0, c->head_end + (c->streaming ? 0 : c->body_len));
    c->streaming = false;
    c->sink.reset();
    c->body_streamed = 0;
    c->scanned = 0;
    c->head_end = 0;
    c->body_len = 0;
    c->request_started = !c->in.empty();
    c->request_start = SteadyClock::now();
  }

  // Parses and dispatches as many buffered requests as possible, one at a
  // time: the next is looked at only once the previous response is sent.
  void Process(Conn* c) {
    while (!c->handling && !c->Writing() && !c->close_after_write && !c->in.empty()) {
      if (c->head_end == 0) {
        size_t end = 0;
        HeadScan scan = ScanHead(c->in, &c->scanned, options.max_header_bytes, &end);
        if (scan == HeadScan::kIncomplete) return;
        if (scan == HeadScan::kTooLarge) {
          RespondError(
              c, 431,
              "request head larger than " + std::to_string(options.max_header_bytes) + " bytes");
          return;
        }
        if (scan == HeadScan::kBareLf) {
          RespondError(c, 400, "bare LF in request head; lines must end with CRLF");
          return;
        }
        auto head = ParseRequestHead(std::string_view(c->in).substr(0, end));
        if (!head.ok()) {
          Status st = head.status();  // status() returns a copy: keep it alive
          const std::string& msg = st.message();
          RespondError(c, msg.find("unsupported HTTP version") != std::string::npos ? 505 : 400,
                       msg);
          return;
        }
        if (head->framing == BodyFraming::kChunked) {
          RespondError(c, 411, "chunked request bodies are not accepted; send Content-Length");
          return;
        }
        ServerRequest& r = c->request;
        r.method.assign(head->method);
        r.target.assign(head->target);
        r.path = PercentDecode(head->path, false);
        r.query.assign(head->query);
        r.headers.clear();
        for (const auto& hv : head->headers) r.headers.emplace_back(hv.name, hv.value);
        r.peer = c->peer;
        r.body.clear();
        r.body_sink.reset();
        uint64_t declared = head->framing == BodyFraming::kContentLength ? head->content_length : 0;
        const RouteEntry* route = declared > 0 ? Route(r.path) : nullptr;
        if (route != nullptr && route->opener) {
          ServerResponse reject;
          reject.status = 0;
          std::shared_ptr<BodySink> sink;
          try {
            sink = route->opener(r, declared, &reject);
          } catch (const std::exception& e) {
            reject = ServerResponse();
            reject.status = 500;
            reject.body = std::string("internal error: ") + e.what() + "\n";
          } catch (...) {
            reject = ServerResponse();
            reject.status = 500;
            reject.body = "internal error\n";
          }
          if (reject.status != 0) {
            // Answer now and close; the body is not processed. A client
            // that waits for 100-continue sends none; from others drop what
            // arrives (bounded) so they can read the answer.
            Respond(c, std::move(reject), /*keep_alive=*/false, false, false);
            uint64_t drop = head->expect_continue ? 0 : std::min(declared, kMaxDiscardBytes);
            size_t here = static_cast<size_t>(std::min<uint64_t>(drop, c->in.size() - end));
            c->discard = drop - here;
            c->in.clear();
            return;
          }
          if (sink) {
            c->streaming = true;
            c->sink = std::move(sink);
            c->body_streamed = 0;
          }
        }
        if (!c->streaming && head->content_length > options.max_body_bytes) {
          RespondError(c, 413,
                       "request body of " + std::to_string(head->content_length) +
                           " bytes is larger than the limit of " +
                           std::to_string(options.max_body_bytes));
          return;
        }
        c->head_end = end;
        c->body_len = declared;
        c->keep_alive = head->keep_alive;
        c->http10 = head->minor_version == 0;
        if (head->expect_continue && c->in.size() < c->head_end + c->body_len) {
          static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
          // Best effort and tiny: the socket buffer of a fresh exchange has room.
          (void)!::send(c->fd, kContinue.data(), kContinue.size(), MSG_NOSIGNAL);
        }
      }
      ServerRequest& r = c->request;
      if (c->streaming) {
        // Hand over what arrived and drop it from the buffer.
        uint64_t want = c->body_len - c->body_streamed;
        size_t n = static_cast<size_t>(
            std::min<uint64_t>(want, c->in.size() > c->head_end ? c->in.size() - c->head_end : 0));
        if (n > 0) {
          c->sink->Write(std::string_view(c->in).substr(c->head_end, n));
          c->in.erase(c->head_end, n);
          c->body_streamed += n;
        }
        if (c->body_streamed < c->body_len) return;  // body incomplete
        r.body_sink = c->sink;
      } else {
        if (c->in.size() < c->head_end + c->body_len) return;  // body incomplete
        r.body.assign(c->in, c->head_end, c->body_len);
      }
      bool keep_alive = c->keep_alive && !stopping;
      bool http10 = c->http10;
      bool head_only = r.method == "HEAD";
      const RouteEntry* route = Route(r.path);
      if (!workers.empty()) {
        // The request moves to the job (so does the sink: the worker
        // releases it); the connection waits for the response.
        c->handling = true;
        c->sink.reset();
        Job job{c->id, std::move(r), route, keep_alive, http10, head_only};
        {
          std::lock_guard lock(pool_mu);
          jobs.push_back(std::move(job));
        }
        pool_cv.notify_one();
        return;
      }
      ServerResponse resp = RunHandler(route, r);
      r.body_sink.reset();  // e.g. removes a spooled upload now
      Complete(c, std::move(resp), keep_alive, http10, head_only);
    }
  }

  // Drops the connection without sending anything more.
  static void Abort(Conn* c) {
    c->out_off = c->out_head.size() + c->out_body.size();
    c->CloseOutFile();
    c->peer_closed = true;
    c->in.clear();
  }

  // Writes what the socket takes now. Returns false when the connection broke.
  bool Flush(Conn* c) {
    while (c->Writing()) {
      if (c->out_off >= c->out_head.size() + c->out_body.size()) {
        // Head and in-memory body are out: the file body, a MiB at a time.
        off_t off = static_cast<off_t>(c->out_file_off);
        size_t want = static_cast<size_t>(
            std::min<uint64_t>(c->out_file_size - c->out_file_off, kReadChunkBytes));
        ssize_t sent = ::sendfile(c->fd, c->out_file, &off, want);
        if (sent < 0 && errno == EINTR) continue;
        if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
        if (sent <= 0) {
          // An error, or the file shrank under us: the declared length can
          // no longer be met, so the client must see the connection end.
          Abort(c);
          return false;
        }
        c->out_file_off = static_cast<uint64_t>(off);
        c->last_activity = SteadyClock::now();
        if (c->out_file_off >= c->out_file_size) c->CloseOutFile();
        continue;
      }
      iovec iov[2];
      int n = 0;
      size_t off = c->out_off;
      if (off < c->out_head.size()) {
        iov[n++] = {c->out_head.data() + off, c->out_head.size() - off};
        off = 0;
      } else {
        off -= c->out_head.size();
      }
      if (off < c->out_body.size()) iov[n++] = {c->out_body.data() + off, c->out_body.size() - off};
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = n;
      ssize_t sent = ::sendmsg(c->fd, &msg, MSG_NOSIGNAL);
      if (sent < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
        Abort(c);
        return false;
      }
      c->out_off += static_cast<size_t>(sent);
      c->last_activity = SteadyClock::now();
    }
    return true;
  }

  // Reads what is available. Returns false on EOF or error.
  bool ReadSome(Conn* c) {
    char buf[16384];
    for (;;) {
      ssize_t n = ::recv(c->fd, buf, sizeof buf, 0);
      if (n > 0) {
        if (!c->request_started) {
          c->request_started = true;
          c->request_start = SteadyClock::now();
        }
        c->in.append(buf, static_cast<size_t>(n));
        c->last_activity = SteadyClock::now();
        if (static_cast<size_t>(n) < sizeof buf) return true;
        // Bound what one client can make us buffer before we parse.
        if (c->in.size() > options.max_header_bytes + options.max_body_bytes + sizeof buf) {
          return true;
        }
        // Let Process see the head (and hand a streamed body to its sink)
        // every MiB, so a streamed upload is never buffered whole.
        if (c->in.size() >= kReadChunkBytes) return true;
        continue;
      }
      if (n == 0) return false;
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
  }

  void Accept() {
    for (;;) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or a transient error such as EMFILE: retry next round
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      if (static_cast<int>(conns.size()) >= options.max_connections) {
        static constexpr std::string_view kBusy =
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
            "Content-Length: 28\r\nConnection: close\r\n\r\ntoo many connections, retry\n";
        (void)!::send(fd, kBusy.data(), kBusy.size(), MSG_NOSIGNAL);
        ::close(fd);
        continue;
      }
      auto c = std::make_unique<Conn>();
      c->id = next_conn_id++;
      c->fd = fd;
      c->peer = PeerString(ss);
      c->last_activity = SteadyClock::now();
      conns.push_back(std::move(c));
    }
  }

  void Loop() {
    std::vector<pollfd> fds;
    while (!stopping) {
      fds.clear();
      fds.push_back({wake[0], POLLIN, 0});
      fds.push_back({listen_fd, POLLIN, 0});
      auto now = SteadyClock::now();
      auto next_deadline = now + std::chrono::seconds(10);
      for (auto& c : conns) {
        if (c->handling) {
          // Not read while its handler runs (the client may not pipeline
          // without bound); errors and hang-ups are still reported.
          fds.push_back({c->fd, 0, 0});
          continue;
        }
        short ev = c->Writing() ? POLLOUT : POLLIN;
        fds.push_back({c->fd, ev, 0});
        auto deadline = c->Writing() || c->streaming ? c->last_activity + options.read_timeout
                        : c->request_started         ? c->request_start + options.read_timeout
                                                     : c->last_activity + options.idle_timeout;
        next_deadline = std::min(next_deadline, deadline);
      }
      auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_deadline - now);
      int timeout = static_cast<int>(std::clamp<int64_t>(wait.count() + 1, 0, 10000));
      int rc = ::poll(fds.data(), fds.size(), timeout);
      if (rc < 0 && errno != EINTR) break;
      if (stopping) break;
      if (fds[0].revents & POLLIN) {
        char drain[64];
        while (::read(wake[0], drain, sizeof drain) > 0) {
        }
      }
      if (fds[1].revents & POLLIN) Accept();
      // Before the per-connection pass: it indexes conns, which this only
      // reads (a connection it answers is then flushed or parsed there too).
      if (!workers.empty()) FinishHandled();
      now = SteadyClock::now();
      // fds[2 + i] belongs to conns[i] (accepted connections were appended after).
      for (size_t i = 0; i + 2 < fds.size(); ++i) {
        Conn* c = conns[i].get();
        short re = fds[i + 2].revents;
        if (re & (POLLERR | POLLNVAL)) {
          Abort(c);
          continue;
        }
        if (c->Writing()) {
          if (re & (POLLOUT | POLLHUP)) Flush(c);
        } else if (re & (POLLIN | POLLHUP)) {
          if (!ReadSome(c)) c->peer_closed = true;
          if (c->discard > 0) {
            uint64_t n = std::min<uint64_t>(c->discard, c->in.size());
            c->discard -= n;
            c->in.clear();
          }
          Process(c);
        }
        if (!c->Writing() && !c->close_after_write && !c->in.empty()) Process(c);
      }
      // Timeouts and closes.
      now = SteadyClock::now();
      for (auto& c : conns) {
        if (c->handling) continue;  // a handler may take long; the client waits
        if (c->peer_closed && !c->Writing()) continue;
        if (c->discard > 0 && !c->Writing() && now - c->last_activity > options.read_timeout) {
          c->peer_closed = true;  // a refused body that stopped coming: just close
          continue;
        }
        if (c->Writing()) {
          if (now - c->last_activity > options.read_timeout) Abort(c.get());
        } else if (c->request_started) {
          // A streamed upload may take long; it must only keep moving.
          auto since = c->streaming ? c->last_activity : c->request_start;
          if (now - since > options.read_timeout && !c->close_after_write) {
            RespondError(c.get(), 408,
                         "request not received within " +
                             std::to_string(options.read_timeout.count()) + " ms");
            Flush(c.get());
          }
        } else if (!c->close_after_write && now - c->last_activity > options.idle_timeout) {
          c->peer_closed = true;
        }
      }
      std::erase_if(conns, [](const std::unique_ptr<Conn>& c) {
        bool done = (c->peer_closed || (c->close_after_write && c->discard == 0)) && !c->Writing();
        if (done) ::close(c->fd);
        return done;
      });
    }
  }
};

Server::Server() : impl_(std::make_unique<Impl>()) {}
Server::~Server() { Stop(); }

void Server::Handle(std::string prefix, Handler handler) {
  if (prefix.empty()) prefix = "/";
  impl_->routes.push_back({std::move(prefix), std::move(handler), nullptr});
}

void Server::HandleStreaming(std::string prefix, BodyOpener opener, Handler handler) {
  if (prefix.empty()) prefix = "/";
  impl_->routes.push_back({std::move(prefix), std::move(handler), std::move(opener)});
}

Status Server::Start(const ServerOptions& options) {
  if (impl_->started) return FailedPrecondition("http server already started; call Stop() first");
  impl_->options = options;
  if (options.max_connections < 1) {
    return InvalidArgument("max_connections " + std::to_string(options.max_connections) +
                           " must be at least 1");
  }
  if (options.handler_threads < 0 || options.handler_threads > kMaxHandlerThreads) {
    return InvalidArgument("handler_threads " + std::to_string(options.handler_threads) +
                           " must be 0 (handlers on the loop thread) to " +
                           std::to_string(kMaxHandlerThreads));
  }
  RETURN_IF_ERROR(impl_->Bind());
  if (::pipe2(impl_->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    int err = errno;
    ::close(impl_->listen_fd);
    impl_->listen_fd = -1;
    return IoError("http server wake pipe", err);
  }
  impl_->stopping = false;
  impl_->started = true;
  for (int i = 0; i < options.handler_threads; ++i) {
    impl_->workers.emplace_back([impl = impl_.get()] { impl->Work(); });
  }
  impl_->thread = std::thread([impl = impl_.get()] { impl->Loop(); });
  return Status::Ok();
}

void Server::Stop() { impl_->Stop(); }

uint16_t Server::port() const { return impl_->port; }

}  // namespace gantry::http
