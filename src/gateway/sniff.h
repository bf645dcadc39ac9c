// Reading just enough of OpenAI-compatible and KServe v2 / Open Inference
// Protocol traffic for routing, limits and token accounting, without otherwise
// touching the bytes the gateway forwards.
//
// Nothing here throws: JSON is parsed with exceptions disabled and every
// function is safe on arbitrary input (fuzzed by sniff_fuzz.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry::gateway {

// What the gateway needs from an OpenAI request body (chat/completions,
// completions, embeddings).
struct OpenAiRequest {
  std::string model;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage as sent by the client
  int64_t max_tokens = 0;      // max_completion_tokens, else max_tokens; 0 = absent
  // Prompt-size estimate from text length: ceil(chars/4) over each text of
  // messages[].content (string or array of {type:"text",text}), prompt (string
  // or array of strings) and input (string or array of strings), plus
  // kMessageOverheadTokens per message. chars counts UTF-8 code points.
  double estimated_prompt_tokens = 0;
};

// Tokens added per chat message for role and framing in the estimate.
inline constexpr double kMessageOverheadTokens = 4;

// InvalidArgument with a message naming the field ("body is not a JSON object",
// "`model` must be a string", "`max_tokens` must be a non-negative integer",
// ...). `model` may be absent (embeddings clients always send it; the router
// decides what a missing model means): then model is "". Fields the gateway
// does not read are not validated.
//
// Runs on every request, so common bodies take a single-pass scanner (about
// 1 byte/ns) that validates the JSON as strictly as nlohmann does; anything
// unusual (errors, duplicate keys, escaped keys, exponents) falls back to the
// DOM-based reference below, which gives the same answer (fuzzed).
Result<OpenAiRequest> SniffOpenAiRequest(std::string_view body);

namespace internal {
// The DOM-based reference implementation of SniffOpenAiRequest (for the
// fallback, tests and the fuzzer's differential check).
Result<OpenAiRequest> SniffOpenAiRequestReference(std::string_view body);
// The fast path alone: nullopt when it cannot decide and the reference must run.
std::optional<OpenAiRequest> SniffOpenAiRequestFast(std::string_view body);
}  // namespace internal

// Returns the body with "stream_options":{"include_usage":true} set (other
// fields, including other stream_options members, untouched; key order may
// change). InvalidArgument if the body is not a JSON object or stream_options
// is present and not an object.
Result<std::string> InjectIncludeUsage(std::string_view body);

// For a fallback tier: returns the body with `model` replaced (when `model` is
// non-empty) and max_tokens / max_completion_tokens capped at `max_tokens`
// (when non-zero; max_tokens is added when neither is present). Other fields
// keep their order. InvalidArgument if the body is not a JSON object.
Result<std::string> RewriteForFallback(std::string_view body, std::string_view model,
                                       uint64_t max_tokens);

// "/v2/models/{name}[/...][?q]" with {name} replaced by `model`; other targets
// are returned unchanged.
std::string RewriteKserveModel(std::string_view target, std::string_view model);

struct Usage {
  bool present = false;
  int64_t prompt_tokens = 0, completion_tokens = 0, total_tokens = 0;
};

// Usage from a non-streaming response body ({"usage":{...}}). Absent, null or
// malformed usage -> present=false. Missing or non-integer members read as 0;
// total_tokens defaults to prompt + completion when absent.
Usage SniffUsage(std::string_view response_json);

namespace internal {
// The usage object's own text ({"prompt_tokens":..}) read without a DOM, as
// SniffUsage reads it with nlohmann; nullopt when only the reference can tell
// (invalid text, escaped keys, exponents, 19+ digit integers).
std::optional<Usage> UsageObjectFast(std::string_view usage_text);
// The nlohmann reference for the same text (present=false unless an object).
Usage UsageObjectReference(std::string_view usage_text);
}  // namespace internal

// Incremental Server-Sent-Events scanner over a (de-chunked) response body
// stream. Feed() takes bytes as they arrive, split anywhere; the output is the
// same whatever the split.
//
// Events are separated by a blank line ("\n\n", "\r\n\r\n" or mixed line
// endings). Lines starting with "data:" (optional single space) carry the
// payload; other lines (":" comments, "event:", "id:") pass through. The
// scanner records the usage from the event whose JSON carries a non-null
// "usage" object (the last one wins) and notices "data: [DONE]".
//
// When strip_usage_chunk is true (the client did not ask for usage but the
// gateway injected include_usage), the usage-only event ("choices": [] and a
// non-null "usage") is removed from the output. Null "usage" fields in other
// chunks are left alone. Everything else is forwarded byte-identical, in order.
class SseUsageScanner {
 public:
  explicit SseUsageScanner(bool strip_usage_chunk, size_t max_event_bytes = 1 << 20);

  // Appends forwardable bytes to *out. Never buffers more than one incomplete
  // event; an event longer than max_event_bytes is passed through unscanned
  // (no error, no stall): its bytes are forwarded as they arrive until its end.
  void Feed(std::string_view data, std::string* out);
  // End of stream: scans and flushes any partial (unterminated) event. It is
  // scanned for usage but never stripped (it was not a complete event).
  void Finish(std::string* out);

  const Usage& usage() const { return usage_; }
  bool saw_done() const { return saw_done_; }  // "data: [DONE]" seen
  // Number of events passed through unscanned because they were too large.
  size_t oversize_events() const { return oversize_events_; }

 private:
  void ScanEvent(std::string_view event, bool complete, std::string* out);

  bool strip_;
  size_t max_event_bytes_;
  std::string pending_;       // bytes of the current incomplete event
  bool passthrough_ = false;  // current event exceeded max_event_bytes
  // Line-ending state carried across Feed calls (for the blank-line detection
  // in pass-through mode): 0 = mid-line, 1 = just after "\n" (line start),
  // 2 = just after "\n\r".
  int nl_state_ = 1;
  Usage usage_;
  bool saw_done_ = false;
  size_t oversize_events_ = 0;
};

// A parsed KServe v2 model path.
struct KserveTarget {
  std::string model;
  std::string version;  // "" when the path has no /versions/{v}
  std::string verb;     // "infer", "ready", "metadata", "generate", "generate_stream"
};

// Parses "/v2/models/{name}[/versions/{v}][/infer|/ready|/generate|/generate_stream]"
// (query string already removed); no suffix means "metadata". Name/version:
// [A-Za-z0-9_.-]+, not "." or "..", no "..". NotFound for any other path
// (including /v2, /v2/health/*, a trailing slash, or an empty segment).
Result<KserveTarget> ParseKservePath(std::string_view path);

}  // namespace gantry::gateway
