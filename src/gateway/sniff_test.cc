#include "sniff.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "internal.h"

namespace gantry::gateway {
namespace {

using nlohmann::json;

// ---- SniffOpenAiRequest --------------------------------------------------------

struct SniffCase {
  std::string name;
  std::string body;
  bool ok;
  std::string error;  // substring of the message when !ok
  std::string model = "";
  bool stream = false;
  bool include_usage = false;
  int64_t max_tokens = 0;
  double tokens = 0;
};

// The fast path either declines or gives exactly the reference's answer.
void ExpectFastAgrees(const std::string& body) {
  auto fast = internal::SniffOpenAiRequestFast(body);
  auto ref = internal::SniffOpenAiRequestReference(body);
  if (!fast) return;
  ASSERT_TRUE(ref.ok()) << "fast path accepted what the reference rejects: "
                        << ref.status().ToString();
  EXPECT_EQ(fast->model, ref->model);
  EXPECT_EQ(fast->stream, ref->stream);
  EXPECT_EQ(fast->include_usage, ref->include_usage);
  EXPECT_EQ(fast->max_tokens, ref->max_tokens);
  EXPECT_EQ(fast->estimated_prompt_tokens, ref->estimated_prompt_tokens);
}

TEST(SniffOpenAiRequestTest, Table) {
  const std::string deep(100000, '[');
  std::vector<SniffCase> cases = {
      {"chat", R"({"model":"tiny-1","messages":[{"role":"user","content":"abcdefgh"}]})", true, "",
       "tiny-1", false, false, 0, 4 + 2},
      {"chat rounding up", R"({"model":"m","messages":[{"role":"user","content":"abcde"}]})", true,
       "", "m", false, false, 0, 4 + 2},
      {"empty content", R"({"model":"m","messages":[{"role":"user","content":""}]})", true, "", "m",
       false, false, 0, 4},
      {"null content (tool call)",
       R"({"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[]}]})", true,
       "", "m", false, false, 0, 4},
      {"utf8 counts code points",
       R"({"model":"m","messages":[{"role":"user","content":"héllo wörld"}]})", true, "", "m",
       false, false, 0, 4 + 3},
      {"content parts",
       R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"abcd"},{"type":"image_url","image_url":{"url":"data:xxxxxxxxxxxxxxxx"}},{"type":"text","text":"abcdefghi"}]}]})",
       true, "", "m", false, false, 0, 4 + 1 + 3},
      {"two messages",
       R"({"model":"m","messages":[{"role":"system","content":"abcd"},{"role":"user","content":"abcd"}]})",
       true, "", "m", false, false, 0, 2 * (4 + 1)},
      {"stream with usage",
       R"({"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[]})", true,
       "", "m", true, true, 0, 0},
      {"stream without options", R"({"model":"m","stream":true})", true, "", "m", true, false, 0,
       0},
      {"nulls are absent",
       R"({"model":null,"stream":null,"stream_options":null,"max_tokens":null,"messages":null,"prompt":null})",
       true, "", "", false, false, 0, 0},
      {"include_usage false", R"({"stream":true,"stream_options":{"include_usage":false}})", true,
       "", "", true, false, 0, 0},
      {"max_tokens", R"({"model":"m","max_tokens":256})", true, "", "m", false, false, 256, 0},
      {"max_completion_tokens wins",
       R"({"model":"m","max_tokens":256,"max_completion_tokens":100})", true, "", "m", false, false,
       100, 0},
      {"max_tokens zero", R"({"max_tokens":0})", true, "", "", false, false, 0, 0},
      {"max int64", R"({"max_tokens":9223372036854775807})", true, "", "", false, false, INT64_MAX,
       0},
      {"prompt string", R"({"model":"m","prompt":"abcdefgh"})", true, "", "m", false, false, 0, 2},
      {"prompt array", R"({"model":"m","prompt":["abcd","abcdefgh"]})", true, "", "m", false, false,
       0, 3},
      {"prompt token ids", R"({"model":"m","prompt":[1,2,3]})", true, "", "m", false, false, 0, 3},
      {"prompt token arrays", R"({"model":"m","prompt":[[1,2],[3]]})", true, "", "m", false, false,
       0, 3},
      {"embeddings input", R"({"model":"e","input":"abcdefghijkl"})", true, "", "e", false, false,
       0, 3},
      {"embeddings input array", R"({"model":"e","input":["ab","cd"]})", true, "", "e", false,
       false, 0, 2},
      {"unknown fields ignored", R"({"model":"m","temperature":"hot","tools":[[[[]]]]})", true, "",
       "m", false, false, 0, 0},
      {"leading whitespace", " \n\t{\"model\":\"m\"} \n", true, "", "m", false, false, 0, 0},
      // Errors.
      {"empty body", "", false, "body is not valid JSON"},
      {"truncated", R"({"model":"m")", false, "body is not valid JSON"},
      {"trailing garbage", R"({"model":"m"} x)", false, "body is not valid JSON"},
      {"invalid utf8", "{\"model\":\"\xff\"}", false, "body is not valid JSON"},
      {"array body", R"([{"model":"m"}])", false, "body is not a JSON object"},
      {"string body", R"("model")", false, "body is not a JSON object"},
      {"model number", R"({"model":42})", false, "`model` must be a string"},
      {"model object", R"({"model":{"name":"m"}})", false, "`model` must be a string"},
      {"stream string", R"({"stream":"true"})", false, "`stream` must be a boolean"},
      {"stream number", R"({"stream":1})", false, "`stream` must be a boolean"},
      {"stream_options array", R"({"stream_options":[]})", false,
       "`stream_options` must be an object"},
      {"include_usage string", R"({"stream_options":{"include_usage":"yes"}})", false,
       "`stream_options.include_usage` must be a boolean"},
      {"max_tokens negative", R"({"max_tokens":-1})", false, "`max_tokens` must be a non-negative"},
      {"max_tokens float", R"({"max_tokens":1.5})", false,
       "`max_tokens` must be a non-negative integer"},
      {"max_tokens string", R"({"max_tokens":"100"})", false,
       "`max_tokens` must be a non-negative"},
      {"max_tokens too large", R"({"max_tokens":9223372036854775808})", false,
       "`max_tokens` is too large"},
      {"max_tokens huge", R"({"max_tokens":123456789012345678901234567890})", false,
       "`max_tokens` must be a non-negative integer"},
      {"max_tokens 1e400", R"({"max_tokens":1e400})", false, ""},
      {"max_completion_tokens bad", R"({"max_completion_tokens":true})", false,
       "`max_completion_tokens` must be a non-negative"},
      {"bad max_tokens next to good max_completion_tokens",
       R"({"max_completion_tokens":5,"max_tokens":-5})", false, "`max_tokens`"},
      {"messages object", R"({"messages":{"role":"user"}})", false, "`messages` must be an array"},
      {"message string", R"({"messages":["hi"]})", false, "`messages[0]` must be an object"},
      {"second message bad", R"({"messages":[{"content":"a"},[]]})", false,
       "`messages[1]` must be an object"},
      {"content number", R"({"messages":[{"content":5}]})", false,
       "`messages[0].content` must be a string or an array"},
      {"content part string", R"({"messages":[{"content":["hi"]}]})", false,
       "`messages[0].content[0]` must be an object"},
      {"nested arrays in content", R"({"messages":[{"content":[[[["x"]]]]}]})", false,
       "`messages[0].content[0]` must be an object"},
      {"prompt number", R"({"prompt":5})", false, "`prompt` must be a string"},
      {"prompt nested too deep", R"({"prompt":[[["a"]]]})", false, "`prompt` must be a string"},
      {"prompt float tokens", R"({"prompt":[[1.5]]})", false, "`prompt` must be a string"},
      {"input object", R"({"input":{}})", false, "`input` must be a string"},
      {"deeply nested body", deep, false, "body is not valid JSON"},
      {"deeply nested field", "{\"x\":" + std::string(10000, '[') + std::string(10000, ']') + "}",
       true, "", "", false, false, 0, 0},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = SniffOpenAiRequest(c.body);
    ASSERT_EQ(r.ok(), c.ok) << r.status().ToString();
    ExpectFastAgrees(c.body);
    if (!c.ok) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(r.status().message().find(c.error), std::string::npos) << r.status().message();
      continue;
    }
    EXPECT_EQ(r->model, c.model);
    EXPECT_EQ(r->stream, c.stream);
    EXPECT_EQ(r->include_usage, c.include_usage);
    EXPECT_EQ(r->max_tokens, c.max_tokens);
    EXPECT_DOUBLE_EQ(r->estimated_prompt_tokens, c.tokens);
  }
}

TEST(SniffOpenAiRequestTest, FastPathTakesCommonBodiesAndAgrees) {
  const std::vector<std::string> common = {
      R"({"model":"tiny-1","messages":[{"role":"system","content":"Be brief.\nNo lists."},{"role":"user","content":"caf\u00e9 \ud83d\ude00 é"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":64,"temperature":0.7,"top_p":1,"stop":["\n\n"],"user":"u1"})",
      R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a\tb"},{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}}]}],"max_completion_tokens":10,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}]})",
      R"({"model":"m","prompt":["abc",[1,2,-3],7],"input":null,"logit_bias":{"50256":-100},"n":1,"echo":false})",
      " {\"model\" : \"m\" , \"input\" : [ \"x\" , \"yy\" ] } \n",
  };
  for (const auto& body : common) {
    SCOPED_TRACE(body);
    auto fast = internal::SniffOpenAiRequestFast(body);
    ASSERT_TRUE(fast.has_value());
    ExpectFastAgrees(body);
  }
  // Cases the fast path leaves to the reference (which still answers correctly).
  const std::vector<std::string> declined = {
      R"({"model":"a","model":"b"})",         // duplicate key: the reference refuses it
      R"({"mod\u0065l":"b"})",                // escaped key
      R"({"model":"m","temperature":1e-3})",  // exponent
      "\xEF\xBB\xBF{\"model\":\"m\"}",        // BOM
      R"({"model":"m","max_tokens":-1})",     // an error: the reference words the message
  };
  for (const auto& body : declined) {
    SCOPED_TRACE(body);
    EXPECT_FALSE(internal::SniffOpenAiRequestFast(body).has_value());
  }
  // Parsers disagree on which duplicate wins: refuse rather than guess.
  auto dup = SniffOpenAiRequest(R"({"model":"a","model":"b"})");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("`model` appears twice"), std::string::npos);
  EXPECT_FALSE(SniffOpenAiRequest(R"({"model":"a","mod\u0065l":"b"})").ok());
  EXPECT_TRUE(SniffOpenAiRequest(R"({"model":"a","messages":[{"role":"x","role":"y"}]})").ok());
  auto esc = SniffOpenAiRequest(R"({"mod\u0065l":"b"})");
  ASSERT_TRUE(esc.ok());
  EXPECT_EQ(esc->model, "b");
}

// `base` with 1-3 random single-byte deletions, insertions or replacements
// drawn from `alphabet`: inputs for the fast-path-versus-reference tests.
std::string Mutated(const std::string& base, const std::string& alphabet, std::mt19937& rng) {
  std::string s = base;
  int edits = 1 + rng() % 3;
  for (int e = 0; e < edits; ++e) {
    size_t pos = rng() % (s.size() + 1);
    switch (rng() % 3) {
      case 0:
        if (pos < s.size()) s.erase(pos, 1);
        break;
      case 1:
        s.insert(pos, 1, alphabet[rng() % alphabet.size()]);
        break;
      default:
        if (pos < s.size()) s[pos] = alphabet[rng() % alphabet.size()];
        break;
    }
  }
  return s;
}

// Random mutations of a realistic body: the fast path never disagrees.
TEST(SniffOpenAiRequestTest, FastPathAgreesUnderMutation) {
  const std::string base =
      R"({"model":"tiny-1","messages":[{"role":"user","content":[{"type":"text","text":"h\u00e9 €"}]},{"role":"assistant","content":null}],"stream":false,"stream_options":{"include_usage":false},"max_tokens":5,"prompt":[[1,2]],"x":[{},[],0.5,-0,true]})";
  const std::string alphabet = "{}[]\",:.-0123456789eE+\\u tfnrlsaex\xc3\xa9\xed\xa0\x80\x01";
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 20000; ++trial) {
    std::string body = Mutated(base, alphabet, rng);
    auto fast = internal::SniffOpenAiRequestFast(body);
    if (!fast) continue;
    auto ref = internal::SniffOpenAiRequestReference(body);
    ASSERT_TRUE(ref.ok()) << body;
    ASSERT_EQ(fast->model, ref->model) << body;
    ASSERT_EQ(fast->stream, ref->stream) << body;
    ASSERT_EQ(fast->include_usage, ref->include_usage) << body;
    ASSERT_EQ(fast->max_tokens, ref->max_tokens) << body;
    ASSERT_EQ(fast->estimated_prompt_tokens, ref->estimated_prompt_tokens) << body;
  }
}

TEST(SniffOpenAiRequestTest, EstimateScalesWithLength) {
  json body = {
      {"model", "m"},
      {"messages", json::array({{{"role", "user"}, {"content", std::string(4000, 'a')}}})}};
  auto r = SniffOpenAiRequest(body.dump());
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->estimated_prompt_tokens, 1000 + kMessageOverheadTokens);
}

// ---- InjectIncludeUsage --------------------------------------------------------

TEST(InjectIncludeUsageTest, AddsStreamOptionsAndKeepsEverythingElse) {
  const std::vector<std::string> bodies = {
      R"({"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],"temperature":0.70})",
      R"({})",
      " { \"model\" : \"m\" , \"n\": 1e2 } ",
      R"({"stream_options":null,"model":"m"})",
      R"({"stream_options":{},"model":"m"})",
      R"({"stream_options":{"include_usage":false,"continuous_usage_stats":true},"model":"m"})",
      R"({"stream_options":{"include_usage":true}})",
      R"({"stream\u005foptions":{"x":1},"model":"m"})",  // escaped key: same member
      R"({"a":{"stream_options":5},"b":1e5})",           // nested key, exponent
      "\xEF\xBB\xBF {\"model\":\"m\"}",                  // BOM
  };
  for (const auto& b : bodies) {
    SCOPED_TRACE(b);
    auto out = InjectIncludeUsage(b);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    json before = json::parse(b);
    json after = json::parse(*out, nullptr, false);
    ASSERT_FALSE(after.is_discarded()) << *out;
    EXPECT_EQ(after["stream_options"]["include_usage"], true);
    // Everything else is unchanged, including other stream_options members.
    json expected = before;
    if (!expected.contains("stream_options") || expected["stream_options"].is_null()) {
      expected["stream_options"] = json::object();
    }
    expected["stream_options"]["include_usage"] = true;
    EXPECT_EQ(after, expected) << *out;
    // The sniffer sees the injected flag.
    auto s = SniffOpenAiRequest(*out);
    ASSERT_TRUE(s.ok());
    EXPECT_TRUE(s->include_usage);
  }
}

TEST(InjectIncludeUsageTest, AbsentStreamOptionsKeepsBytes) {
  auto out = InjectIncludeUsage(R"({"model":"m","temperature":0.70,"n":1e2})");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out,
            R"({"stream_options":{"include_usage":true},"model":"m","temperature":0.70,"n":1e2})");
  auto empty = InjectIncludeUsage("  {  }");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, R"(  {"stream_options":{"include_usage":true}  })");
}

TEST(InjectIncludeUsageTest, PresentStreamOptionsKeepsKeyOrder) {
  auto out = InjectIncludeUsage(R"({"z":1,"stream_options":{"x":2},"a":3})");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, R"({"z":1,"stream_options":{"x":2,"include_usage":true},"a":3})");
}

TEST(InjectIncludeUsageTest, Errors) {
  struct Case {
    std::string body, error;
  };
  std::vector<Case> cases = {
      {"", "not valid JSON"},
      {"[1]", "not a JSON object"},
      {R"({"stream_options":true})", "`stream_options` must be an object"},
      {R"({"stream_options":{},"x":)" + std::string(5000, '[') + std::string(5000, ']') + "}",
       "nests deeper"},
  };
  for (const auto& c : cases) {
    auto out = InjectIncludeUsage(c.body);
    ASSERT_FALSE(out.ok()) << c.body.substr(0, 50);
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find(c.error), std::string::npos) << out.status().message();
  }
  // Deep nesting is fine when the body is not re-serialized.
  std::string deep = R"({"x":)" + std::string(5000, '[') + std::string(5000, ']') + "}";
  EXPECT_TRUE(InjectIncludeUsage(deep).ok());
}

// ---- SniffUsage ------------------------------------------------------------------

TEST(SniffUsageTest, Table) {
  struct Case {
    std::string body;
    bool present;
    int64_t p = 0, c = 0, t = 0;
  };
  std::vector<Case> cases = {
      {R"({"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":2}}})",
       true, 10, 5, 15},
      {R"({"usage":{"prompt_tokens":7}})", true, 7, 0, 7},  // embeddings: no completion
      {R"({"usage":{"prompt_tokens":7,"total_tokens":9}})", true, 7, 0, 9},
      {R"({"usage":{}})", true, 0, 0, 0},
      {R"({"usage":{"prompt_tokens":-3,"completion_tokens":1.5,"total_tokens":"9"}})", true, 0, 0,
       0},
      {R"({"usage":{"prompt_tokens":99999999999999999999}})", true, 0, 0, 0},  // parses as float
      {R"({"usage":{"prompt_tokens":18446744073709551615,"completion_tokens":18446744073709551615}})",
       true, INT64_MAX, INT64_MAX, INT64_MAX},
      {R"({"usage":null})", false},
      {R"({"usage":[1,2]})", false},
      {R"({"choices":[]})", false},
      {R"([{"usage":{"prompt_tokens":1}}])", false},
      {R"({"usage":{"prompt_tokens":1})", false},  // truncated
      {"", false},
      {"data: {}", false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    Usage u = SniffUsage(c.body);
    EXPECT_EQ(u.present, c.present);
    EXPECT_EQ(u.prompt_tokens, c.p);
    EXPECT_EQ(u.completion_tokens, c.c);
    EXPECT_EQ(u.total_tokens, c.t);
  }
}

// ---- SseUsageScanner -------------------------------------------------------------

std::string Chunk(const std::string& content) {
  return "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
         "\"delta\":{\"content\":\"" +
         content + "\"},\"finish_reason\":null}],\"usage\":null}\n\n";
}
const std::string kUsageChunk =
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[],"
    "\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3,\"total_tokens\":15}}\n\n";
const std::string kDone = "data: [DONE]\n\n";

std::string Stream() {
  return ": keep-alive comment\n\n" + Chunk("Hel") + Chunk("lo") + "event: ping\nid: 7\n\n" +
         Chunk("!") + kUsageChunk + kDone;
}

struct ScanResult {
  std::string out;
  Usage usage;
  bool done;
  size_t oversize;
};

ScanResult ScanWithSplits(const std::string& in, bool strip, const std::vector<size_t>& cuts,
                          size_t max_event = 1 << 20) {
  SseUsageScanner s(strip, max_event);
  ScanResult r;
  size_t pos = 0;
  for (size_t cut : cuts) {
    cut = std::min(cut, in.size());
    if (cut < pos) continue;
    s.Feed(std::string_view(in).substr(pos, cut - pos), &r.out);
    pos = cut;
  }
  s.Feed(std::string_view(in).substr(pos), &r.out);
  s.Finish(&r.out);
  r.usage = s.usage();
  r.done = s.saw_done();
  r.oversize = s.oversize_events();
  return r;
}

ScanResult OneShot(const std::string& in, bool strip, size_t max_event = 1 << 20) {
  return ScanWithSplits(in, strip, {}, max_event);
}

ScanResult ByteByByte(const std::string& in, bool strip, size_t max_event = 1 << 20) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < in.size(); ++i) cuts.push_back(i);
  return ScanWithSplits(in, strip, cuts, max_event);
}

void ExpectSame(const ScanResult& a, const ScanResult& b) {
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.usage.present, b.usage.present);
  EXPECT_EQ(a.usage.prompt_tokens, b.usage.prompt_tokens);
  EXPECT_EQ(a.usage.completion_tokens, b.usage.completion_tokens);
  EXPECT_EQ(a.usage.total_tokens, b.usage.total_tokens);
  EXPECT_EQ(a.done, b.done);
  EXPECT_EQ(a.oversize, b.oversize);
}

TEST(SseUsageScannerTest, PassThroughRecordsUsage) {
  ScanResult r = OneShot(Stream(), /*strip=*/false);
  EXPECT_EQ(r.out, Stream());
  EXPECT_TRUE(r.usage.present);
  EXPECT_EQ(r.usage.prompt_tokens, 12);
  EXPECT_EQ(r.usage.completion_tokens, 3);
  EXPECT_EQ(r.usage.total_tokens, 15);
  EXPECT_TRUE(r.done);
}

TEST(SseUsageScannerTest, StripRemovesOnlyTheUsageChunk) {
  ScanResult r = OneShot(Stream(), /*strip=*/true);
  std::string expected = Stream();
  expected.erase(expected.find(kUsageChunk), kUsageChunk.size());
  EXPECT_EQ(r.out, expected);
  EXPECT_TRUE(r.usage.present);
  EXPECT_EQ(r.usage.total_tokens, 15);
  EXPECT_TRUE(r.done);
}

TEST(SseUsageScannerTest, NoUsageNoDone) {
  std::string in = Chunk("a") + Chunk("b");  // interrupted stream
  ScanResult r = OneShot(in, true);
  EXPECT_EQ(r.out, in);
  EXPECT_FALSE(r.usage.present);
  EXPECT_FALSE(r.done);
}

TEST(SseUsageScannerTest, CrLfAndNoSpaceAfterColon) {
  std::string usage =
      "data:{\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,"
      "\"total_tokens\":3}}\r\n\r\n";
  std::string in =
      "data:{\"choices\":[{\"delta\":{}}],\"usage\":null}\r\n\r\n" + usage + "data:[DONE]\r\n\r\n";
  ScanResult r = OneShot(in, true);
  EXPECT_EQ(r.out, "data:{\"choices\":[{\"delta\":{}}],\"usage\":null}\r\n\r\ndata:[DONE]\r\n\r\n");
  EXPECT_EQ(r.usage.total_tokens, 3);
  EXPECT_TRUE(r.done);
  ExpectSame(r, ByteByByte(in, true));
}

TEST(SseUsageScannerTest, UsageInContentChunkIsNotStripped) {
  // Some servers (vLLM continuous_usage_stats) put usage on content chunks: keep them.
  std::string in =
      "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}],\"usage\":{\"prompt_tokens\":4,"
      "\"completion_tokens\":1,\"total_tokens\":5}}\n\n" +
      kDone;
  ScanResult r = OneShot(in, true);
  EXPECT_EQ(r.out, in);
  EXPECT_EQ(r.usage.total_tokens, 5);
}

TEST(SseUsageScannerTest, ContentMentioningUsageIsNotMistaken) {
  std::string in = Chunk("the \\\"usage\\\": {} field") + kDone;
  ScanResult r = OneShot(in, true);
  EXPECT_EQ(r.out, in);
  EXPECT_FALSE(r.usage.present);
}

TEST(SseUsageScannerTest, MultiLineData) {
  std::string in =
      "data: {\"choices\":[],\n"
      "data: \"usage\":{\"prompt_tokens\":2,\"completion_tokens\":2}}\n\n";
  ScanResult r = OneShot(in, true);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.usage.total_tokens, 4);
}

TEST(SseUsageScannerTest, PartialEventAtEndIsFlushedNotStripped) {
  std::string partial =
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n";
  ScanResult r = OneShot(Chunk("a") + partial, true);
  EXPECT_EQ(r.out, Chunk("a") + partial);
  EXPECT_EQ(r.usage.total_tokens, 2);
  ScanResult cut = OneShot(Chunk("a") + "data: {\"cho", true);
  EXPECT_EQ(cut.out, Chunk("a") + "data: {\"cho");
}

TEST(SseUsageScannerTest, SplitsGiveIdenticalOutput) {
  const std::vector<std::string> inputs = {
      Stream(),
      "\n\n\r\n" + Stream() + "\n",
      "data: [DONE]",
      "data: {\"choices\":[],\"usage\":{}}\r\n\n" + kUsageChunk,
      "\r\r\n\n\r\n\r\ndata:x\r\n\r",
      Chunk(std::string(300, 'x')) + kUsageChunk + Chunk("y") + kDone,
  };
  std::mt19937 rng(42);
  for (const auto& in : inputs) {
    for (bool strip : {false, true}) {
      SCOPED_TRACE(in.substr(0, 40) + (strip ? " strip" : ""));
      ScanResult one = OneShot(in, strip);
      ExpectSame(one, ByteByByte(in, strip));
      for (int trial = 0; trial < 200; ++trial) {
        std::vector<size_t> cuts;
        size_t pos = 0;
        while (pos < in.size()) {
          pos += 1 + rng() % 40;
          cuts.push_back(pos);
        }
        ExpectSame(one, ScanWithSplits(in, strip, cuts));
      }
    }
  }
}

TEST(SseUsageScannerTest, OversizeEventsPassThroughUnscanned) {
  std::string big_usage = "data: {\"choices\":[],\"pad\":\"" + std::string(500, 'p') +
                          "\",\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":9}}\n\n";
  std::string in = Chunk("a") + big_usage + kUsageChunk + kDone;
  const size_t max_event = 200;
  ScanResult one = OneShot(in, true, max_event);
  // The oversize usage chunk is forwarded untouched and not read; the normal one is stripped.
  EXPECT_EQ(one.out, Chunk("a") + big_usage + kDone);
  EXPECT_EQ(one.usage.total_tokens, 15);
  EXPECT_EQ(one.oversize, 1u);
  EXPECT_TRUE(one.done);
  ExpectSame(one, ByteByByte(in, true, max_event));
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<size_t> cuts;
    size_t pos = 0;
    while (pos < in.size()) {
      pos += 1 + rng() % 250;
      cuts.push_back(pos);
    }
    ExpectSame(one, ScanWithSplits(in, true, cuts, max_event));
  }
  // Event length exactly at the limit is still scanned.
  ScanResult exact = OneShot(kUsageChunk, true, kUsageChunk.size());
  EXPECT_EQ(exact.out, "");
  EXPECT_EQ(exact.oversize, 0u);
  ScanResult over = OneShot(kUsageChunk, true, kUsageChunk.size() - 1);
  EXPECT_EQ(over.out, kUsageChunk);
  EXPECT_EQ(over.oversize, 1u);
  EXPECT_FALSE(over.usage.present);
}

TEST(SseUsageScannerTest, NeverBuffersMoreThanTheLimit) {
  // An endless event without a blank line: output keeps flowing once past the limit.
  SseUsageScanner s(true, 100);
  std::string out;
  std::string piece(30, 'x');
  s.Feed("data: ", &out);
  size_t fed = 6;
  for (int i = 0; i < 100; ++i) {
    s.Feed(piece, &out);
    fed += piece.size();
    EXPECT_GE(out.size() + 100, fed);  // at most 100 bytes held back
  }
  s.Finish(&out);
  EXPECT_EQ(out.size(), fed);
}

// ---- ParseKservePath -------------------------------------------------------------

TEST(ParseKservePathTest, Table) {
  struct Case {
    std::string path;
    bool ok;
    std::string model = "", version = "", verb = "";
  };
  std::vector<Case> cases = {
      {"/v2/models/resnet/infer", true, "resnet", "", "infer"},
      {"/v2/models/resnet/versions/2/infer", true, "resnet", "2", "infer"},
      {"/v2/models/resnet/ready", true, "resnet", "", "ready"},
      {"/v2/models/resnet/versions/v1.0/ready", true, "resnet", "v1.0", "ready"},
      {"/v2/models/resnet", true, "resnet", "", "metadata"},
      {"/v2/models/resnet/versions/3", true, "resnet", "3", "metadata"},
      {"/v2/models/llama-3.1_8B/generate", true, "llama-3.1_8B", "", "generate"},
      {"/v2/models/llama/versions/1/generate_stream", true, "llama", "1", "generate_stream"},
      {"/v2/models/infer", true, "infer", "", "metadata"},        // a model named "infer"
      {"/v2/models/versions", true, "versions", "", "metadata"},  // a model named "versions"
      {"/v2/models/versions/infer", true, "versions", "", "infer"},
      {"/v2/models/versions/versions/versions/ready", true, "versions", "versions", "ready"},
      {"/v2", false},
      {"/v2/", false},
      {"/v2/health/ready", false},
      {"/v2/models", false},
      {"/v2/models/", false},
      {"/v2/models/resnet/", false},
      {"/v2/models/resnet/infer/", false},
      {"/v2/models//infer", false},
      // Ambiguous but grammatical: version "infer", metadata verb.
      {"/v2/models/resnet/versions/infer", true, "resnet", "infer", "metadata"},
      {"/v2/models/resnet/versions/", false},
      {"/v2/models/resnet/versions/1/", false},
      {"/v2/models/resnet/stats", false},
      {"/v2/models/resnet/infer/extra", false},
      {"/v2/models/resnet/versions/1/infer/extra", false},
      {"/v2/models/../secret/infer", false},
      {"/v2/models/a..b/infer", false},
      {"/v2/models/./infer", false},
      {"/v2/models/resnet/versions/../infer", false},
      {"/v2/models/res%2Fnet/infer", false},
      {"/v2/models/res net/infer", false},
      {"/v2/models/résnet/infer", false},
      {"/v2/models/resnet/infer?x=1", false},
      {"/v1/models/resnet/infer", false},
      {"v2/models/resnet/infer", false},
      {"", false},
      {std::string("/v2/models/res\0net", 18), false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.path);
    auto r = ParseKservePath(c.path);
    ASSERT_EQ(r.ok(), c.ok) << (r.ok() ? r->model + " " + r->verb : r.status().ToString());
    if (!c.ok) {
      EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
      continue;
    }
    EXPECT_EQ(r->model, c.model);
    EXPECT_EQ(r->version, c.version);
    EXPECT_EQ(r->verb, c.verb);
  }
}

}  // namespace
}  // namespace gantry::gateway

namespace gantry::gateway {
namespace {

// The single-pass locator must agree with a full parse on where "usage" is.
// The scanner that reads the usage object without a DOM must agree with the
// nlohmann reference wherever it answers, over mutations of typical objects.
TEST(SniffUsageTest, FastPathMatchesReference) {
  const std::vector<std::string> bases = {
      R"({"prompt_tokens":12,"completion_tokens":30,"total_tokens":42})",
      R"({ "prompt_tokens" : 7 , "total_tokens":-1, "x":[1,{"y":"z"}], "completion_tokens":0.5 })",
      R"({"prompt_tokens":1,"prompt_tokens":2,"total_tokens":"3","completion_tokens_details":{"reasoning_tokens":4}})",
  };
  const std::string alphabet = "{}[]\",:-0123456789.eE tnul\\x\xc3\xa9";
  std::mt19937 rng(99);
  int answered = 0;
  for (const std::string& base : bases) {
    {
      auto fast = internal::UsageObjectFast(base);
      ASSERT_TRUE(fast.has_value()) << base;
    }
    for (int trial = 0; trial < 20000; ++trial) {
      std::string text = Mutated(base, alphabet, rng);
      auto fast = internal::UsageObjectFast(text);
      if (!fast) continue;
      ++answered;
      Usage ref = internal::UsageObjectReference(text);
      ASSERT_TRUE(ref.present) << text;
      ASSERT_EQ(fast->prompt_tokens, ref.prompt_tokens) << text;
      ASSERT_EQ(fast->completion_tokens, ref.completion_tokens) << text;
      ASSERT_EQ(fast->total_tokens, ref.total_tokens) << text;
    }
  }
  EXPECT_GT(answered, 1000);  // the fast path must actually be exercised
}

TEST(SniffUsageTest, OnlyTheTopLevelMemberCounts) {
  auto u = SniffUsage(
      R"({"choices":[{"usage":{"prompt_tokens":9}}],"usage":{"prompt_tokens":1,"completion_tokens":2}})");
  ASSERT_TRUE(u.present);
  EXPECT_EQ(u.prompt_tokens, 1);
  EXPECT_EQ(u.total_tokens, 3);
  EXPECT_FALSE(
      SniffUsage(R"({"choices":[{"message":{"content":"\"usage\":{\"prompt_tokens\":99}"}}]})")
          .present);
  EXPECT_FALSE(SniffUsage(R"({"usage":{"prompt_tokens":1}} trailing)").present);
  EXPECT_FALSE(SniffUsage(R"({"usage":null})").present);
  // Duplicates and escaped keys go through the full parse (last one wins there).
  EXPECT_EQ(
      SniffUsage(R"({"usage":{"prompt_tokens":1},"usage":{"prompt_tokens":4}})").prompt_tokens, 4);
  EXPECT_EQ(SniffUsage(R"({"us\u0061ge":{"prompt_tokens":6}})").prompt_tokens, 6);
  EXPECT_EQ(SniffUsage(" {\"id\":\"x\",\"usage\" : {\"total_tokens\":12} }\n").total_tokens, 12);
}

}  // namespace
}  // namespace gantry::gateway

namespace gantry::gateway {
namespace {

// Audit records and error bodies escape strings with AppendJsonEscaped: every
// ASCII byte must come back unchanged through a JSON parser, and UTF-8 text
// must pass through as is.
TEST(AppendJsonEscapedTest, RoundTripsEveryAsciiByteAndUtf8) {
  std::string all;
  for (int c = 1; c < 0x80; ++c) all += static_cast<char>(c);
  all += std::string("\0tail", 5);
  all += "caf\xc3\xa9 \xe2\x82\xac";
  for (const std::string& in : {all, std::string(), std::string("plain"), std::string("\"\\")}) {
    std::string out = "\"";
    internal::AppendJsonEscaped(in, &out);
    out += '"';
    json j = json::parse(out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << out;
    EXPECT_EQ(j.get<std::string>(), in);
  }
  std::string out;
  internal::AppendJsonEscaped(std::string("a\x01\"b", 4), &out);
  EXPECT_EQ(out, "a\\u0001\\\"b");
}

}  // namespace
}  // namespace gantry::gateway
