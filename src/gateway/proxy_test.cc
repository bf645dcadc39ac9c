// The proxy's header classification (one switch on the name's length instead
// of a walk of comparisons) decides exactly what http::IsHopByHop and
// case-insensitive comparisons with each special name decide.
#include <gtest/gtest.h>

#include <cctype>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "worker.h"

namespace gantry::gateway::internal {
namespace {

using H = HeaderName;

const std::vector<std::pair<std::string, H>>& Special() {
  static const std::vector<std::pair<std::string, H>> names = {
      {"connection", H::kHopByHop},
      {"keep-alive", H::kHopByHop},
      {"proxy-connection", H::kHopByHop},
      {"te", H::kHopByHop},
      {"trailer", H::kHopByHop},
      {"upgrade", H::kHopByHop},
      {"transfer-encoding", H::kHopByHop},
      {"proxy-authorization", H::kHopByHop},
      {"proxy-authenticate", H::kHopByHop},
      {"host", H::kHost},
      {"content-length", H::kContentLength},
      {"expect", H::kExpect},
      {"x-request-id", H::kRequestId},
      {"x-forwarded-for", H::kForwardedFor},
      {"x-forwarded-proto", H::kForwardedProto},
      {"x-forwarded-host", H::kForwardedHost},
      {"authorization", H::kAuthorization},
      {"x-api-key", H::kApiKey},
  };
  return names;
}

// The classification by comparing with every special name.
H Reference(std::string_view name) {
  for (const auto& [n, kind] : Special()) {
    if (http::IEquals(name, n)) return kind;
  }
  return H::kOther;
}

std::vector<std::string> Corpus() {
  std::vector<std::string> out = {"", "x", "Content-Type", "Accept", "Date", "Server", "hostx",
                                  "hos", "tee", "t", "x-api-keys", "X-Request-ID ",
                                  // names that Connection values below list
                                  "close", "Close", "x-foo", "X-Foo"};
  std::mt19937 rng(11);
  for (const auto& [n, kind] : Special()) {
    std::string upper = n, mixed = n;
    for (size_t i = 0; i < n.size(); ++i) {
      upper[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(n[i])));
      if (i % 2 == 0) mixed[i] = upper[i];
    }
    out.insert(out.end(), {n, upper, mixed, n + "x", n.substr(1), n.substr(0, n.size() - 1)});
    for (size_t i = 0; i < n.size(); ++i) {  // one character off, at every position
      std::string off = n;
      off[i] = off[i] == 'z' ? 'a' : static_cast<char>(off[i] + 1);
      out.push_back(off);
      // Bytes next to the letter ranges, and non-ASCII bytes whose low 7 bits
      // are letters: none of them may fold onto a letter.
      for (char edge : {'@', '[', '`', '{', '\r', '\x0d', '\xc1', '\xe1', '\xda', '\xfa'}) {
        off = n;
        off[i] = edge;
        out.push_back(off);
      }
    }
  }
  const std::string alphabet = "abcdefghijklmnopqrstuvwxyz-";
  for (int i = 0; i < 3000; ++i) {
    std::string s(rng() % 22, 'a');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    out.push_back(s);
  }
  return out;
}

TEST(ProxyHeaders, ClassificationMatchesNameByNameComparison) {
  for (const std::string& name : Corpus()) {
    EXPECT_EQ(ClassifyHeader(name), Reference(name)) << "'" << name << "'";
  }
}

TEST(ProxyHeaders, HopByHopMatchesTheCoreRuleForEveryConnectionValue) {
  const std::vector<std::string> connections = {"",
                                                "keep-alive",
                                                "Keep-Alive",
                                                "close",
                                                "keep-alive, x-foo",
                                                "x-foo",
                                                " keep-alive",
                                                "keep-alive ",
                                                "te, upgrade",
                                                "host",
                                                "Authorization",
                                                "x-request-id",
                                                "content-length",
                                                "x-api-key, keep-alive"};
  for (const std::string& name : Corpus()) {
    const H kind = ClassifyHeader(name);
    for (const std::string& connection : connections) {
      EXPECT_EQ(IsHopByHop(name, kind, connection), http::IsHopByHop(name, connection))
          << "'" << name << "' with Connection: '" << connection << "'";
    }
  }
}

}  // namespace
}  // namespace gantry::gateway::internal
