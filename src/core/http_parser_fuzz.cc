// libFuzzer target: the HTTP/1.1 head scanner, request and response parsers
// and the chunked decoder see attacker-controlled bytes on every connection.
// Invariants checked besides "no crash": a parsed request's views lie inside
// the input, and decoding the same chunked input in pieces gives the same
// payload as decoding it at once.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gantry/core/http_parser.h"

using namespace gantry::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t scanned = 0, end = 0;
  HeadScan scan = ScanHead(in, &scanned, 16384, &end);
  if (scan == HeadScan::kComplete) {
    std::string_view head = in.substr(0, end);
    auto req = ParseRequestHead(head);
    if (req.ok()) {
      for (const HeaderView& h : req->headers) {
        if (h.name.data() < head.data() || h.name.data() + h.name.size() > head.data() + head.size()) {
          __builtin_trap();
        }
      }
      if (req->framing == BodyFraming::kChunked && req->content_length != 0) __builtin_trap();
    }
    (void)ParseResponseHead(head, "GET");
  }
  // Chunked body: whole vs. split at a data-derived point.
  std::string whole, split;
  ChunkedDecoder a(1 << 20), b(1 << 20);
  size_t used_a = 0;
  bool ok_a = a.Feed(in, &whole, &used_a).ok();
  size_t cut = size == 0 ? 0 : data[0] % (size + 1);
  size_t used1 = 0, used2 = 0;
  bool ok_b = b.Feed(in.substr(0, cut), &split, &used1).ok();
  if (ok_b && used1 == cut && !b.done()) ok_b = b.Feed(in.substr(cut), &split, &used2).ok();
  if (ok_a && ok_b && a.done() && b.done() && whole != split) __builtin_trap();
  return 0;
}
