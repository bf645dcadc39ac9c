// libFuzzer target for the readers of untrusted client and backend bytes in
// sniff.cc. Besides "must not crash", it checks invariants that the gateway
// relies on:
//  - the fast paths of SniffOpenAiRequest and of the usage reader agree with
//    the DOM-based references;
//  - InjectIncludeUsage of a body that sniffs OK sniffs the same, with include_usage;
//  - SseUsageScanner output and findings do not depend on how the stream is split;
//  - without strip mode the scanner forwards its input byte-identical;
//  - ParseKservePath only returns names made of [A-Za-z0-9_.-] without "..".
// Run: build/fuzz/bin/fuzz_gateway_sniff -max_total_time=60
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "sniff.h"

namespace {

using gantry::gateway::SseUsageScanner;
using gantry::gateway::Usage;

void Check(bool cond) {
  if (!cond) std::abort();
}

bool SameUsage(const Usage& a, const Usage& b) {
  return a.present == b.present && a.prompt_tokens == b.prompt_tokens &&
         a.completion_tokens == b.completion_tokens && a.total_tokens == b.total_tokens;
}

bool ValidName(const std::string& s) {
  if (s.empty() || s.find("..") != std::string::npos) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.' || c == '-')) {
      return false;
    }
  }
  return true;
}

struct Scan {
  std::string out;
  Usage usage;
  bool done = false;
  size_t oversize = 0;
};

// Feeds `in` in pieces whose lengths come from `splits` (cycled; 0 -> 1 byte).
Scan RunScanner(std::string_view in, bool strip, size_t max_event, std::string_view splits) {
  SseUsageScanner s(strip, max_event);
  Scan r;
  size_t pos = 0, k = 0;
  while (pos < in.size()) {
    size_t n = in.size() - pos;
    if (!splits.empty()) {
      n = std::min<size_t>(n, 1 + static_cast<unsigned char>(splits[k++ % splits.size()]) % 64);
    }
    s.Feed(in.substr(pos, n), &r.out);
    pos += n;
  }
  s.Finish(&r.out);
  r.usage = s.usage();
  r.done = s.saw_done();
  r.oversize = s.oversize_events();
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);

  auto req = gantry::gateway::SniffOpenAiRequest(in);
  // The fast path, when it answers, agrees with the DOM-based reference.
  auto ref = gantry::gateway::internal::SniffOpenAiRequestReference(in);
  Check(req.ok() == ref.ok());
  if (auto fast = gantry::gateway::internal::SniffOpenAiRequestFast(in)) {
    Check(ref.ok());
    Check(fast->model == ref->model && fast->stream == ref->stream &&
          fast->include_usage == ref->include_usage && fast->max_tokens == ref->max_tokens &&
          fast->estimated_prompt_tokens == ref->estimated_prompt_tokens);
  }
  auto injected = gantry::gateway::InjectIncludeUsage(in);
  if (injected.ok()) {
    // Whatever path it took, the result is the input object plus include_usage.
    nlohmann::json before = nlohmann::json::parse(in, nullptr, false);
    nlohmann::json after = nlohmann::json::parse(*injected, nullptr, false);
    Check(before.is_object() && after.is_object());
    if (!before.contains("stream_options") || before["stream_options"].is_null()) {
      before["stream_options"] = nlohmann::json::object();
    }
    Check(before["stream_options"].is_object());
    before["stream_options"]["include_usage"] = true;
    Check(before == after);
  }
  if (req.ok() && injected.ok()) {
    auto again = gantry::gateway::SniffOpenAiRequest(*injected);
    Check(again.ok());
    Check(again->include_usage);
    Check(again->model == req->model && again->stream == req->stream &&
          again->max_tokens == req->max_tokens &&
          again->estimated_prompt_tokens == req->estimated_prompt_tokens);
  }

  (void)gantry::gateway::SniffUsage(in);
  // The DOM-less reader of a usage object agrees with nlohmann where it answers.
  if (auto fast = gantry::gateway::internal::UsageObjectFast(in)) {
    Check(SameUsage(*fast, gantry::gateway::internal::UsageObjectReference(in)));
  }

  auto kserve = gantry::gateway::ParseKservePath(in);
  if (kserve.ok()) {
    Check(ValidName(kserve->model));
    Check(kserve->version.empty() || ValidName(kserve->version));
  }

  // SSE: the first byte picks strip mode and the event size limit, the next
  // few give the split lengths; the whole input is the stream.
  if (size >= 1) {
    bool strip = data[0] & 1;
    size_t max_event = (data[0] & 2) ? 1 + (data[0] >> 2) * 8 : (1 << 20);
    std::string_view splits = in.substr(1, std::min<size_t>(16, size - 1));
    Scan one = RunScanner(in, strip, max_event, {});
    Scan split = RunScanner(in, strip, max_event, splits);
    Scan bytes = RunScanner(in, strip, max_event, std::string_view("\0", 1));
    for (const Scan* s : {&split, &bytes}) {
      Check(s->out == one.out);
      Check(SameUsage(s->usage, one.usage));
      Check(s->done == one.done && s->oversize == one.oversize);
    }
    if (!strip) Check(one.out == in);
    Check(one.out.size() <= in.size());
  }
  return 0;
}
