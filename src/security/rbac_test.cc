#include "gantry/security/rbac.h"

#include <gtest/gtest.h>

namespace gantry::security {
namespace {

TEST(GlobMatchTest, Basics) {
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_TRUE(GlobMatch("*", "anything"));
  EXPECT_TRUE(GlobMatch("", ""));
  EXPECT_FALSE(GlobMatch("", "a"));
  EXPECT_TRUE(GlobMatch("tiny-*", "tiny-"));
  EXPECT_TRUE(GlobMatch("tiny-*", "tiny-llama"));
  EXPECT_FALSE(GlobMatch("tiny-*", "tin"));
  EXPECT_FALSE(GlobMatch("tiny-*", "big-tiny-llama"));
  EXPECT_TRUE(GlobMatch("*-llama", "tiny-llama"));
  EXPECT_TRUE(GlobMatch("model:?nvoke", "model:invoke"));
  EXPECT_FALSE(GlobMatch("model:?nvoke", "model:nvoke"));
  EXPECT_TRUE(GlobMatch("a*b*c", "aXXbYYc"));
  EXPECT_TRUE(GlobMatch("a*b*c", "abc"));
  EXPECT_FALSE(GlobMatch("a*b*c", "aXXbYY"));
  EXPECT_TRUE(GlobMatch("a*a*a", "aaaa"));
  EXPECT_TRUE(GlobMatch("**", "x"));
  EXPECT_TRUE(GlobMatch("a?", "ab"));
  EXPECT_FALSE(GlobMatch("a?", "a"));
  EXPECT_FALSE(GlobMatch("abc", "ABC"));  // case-sensitive
}

TEST(GlobMatchTest, PathologicalPatternStaysFast) {
  // Exponential for naive recursive matchers; this must finish at once.
  std::string text(2000, 'a');
  std::string pattern;
  for (int i = 0; i < 50; ++i) pattern += "a*";
  pattern += "b";
  EXPECT_FALSE(GlobMatch(pattern, text));
  EXPECT_TRUE(GlobMatch(pattern.substr(0, pattern.size() - 1), text));
}

Result<Policy> Sample() {
  return Policy::Create({
      {"user", {{"model:invoke", "tiny-*"}}},
      {"admin", {{"*", "*"}}},
      {"reader", {{"usage:read"}}},
      {"nobody", {}},
  });
}

TEST(PolicyTest, DenyByDefault) {
  auto p = Sample();
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->Allowed("user", "model:invoke", "tiny-llama"));
  EXPECT_FALSE(p->Allowed("user", "model:invoke", "big-llama"));
  EXPECT_FALSE(p->Allowed("user", "admin", "*"));
  EXPECT_FALSE(p->Allowed("user", "usage:read", "x"));
  EXPECT_TRUE(p->Allowed("admin", "admin", "keys"));
  EXPECT_TRUE(p->Allowed("admin", "model:invoke", "anything"));
  EXPECT_TRUE(p->Allowed("reader", "usage:read", "key-123"));  // resource defaults to "*"
  EXPECT_FALSE(p->Allowed("reader", "model:invoke", "tiny-llama"));
  EXPECT_FALSE(p->Allowed("nobody", "model:invoke", "tiny-llama"));
  EXPECT_FALSE(p->Allowed("ghost", "model:invoke", "tiny-llama"));
  EXPECT_FALSE(p->Allowed("", "model:invoke", "tiny-llama"));
  EXPECT_TRUE(p->HasRole("nobody"));
  EXPECT_FALSE(p->HasRole("ghost"));
  Policy empty;
  EXPECT_FALSE(empty.Allowed("admin", "admin", "*"));
}

TEST(PolicyTest, RoleNamesAreNotGlobs) {
  auto p = Policy::Create({{"adm*", {{"*", "*"}}}});
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->Allowed("admin", "admin", "x"));
  EXPECT_TRUE(p->Allowed("adm*", "admin", "x"));
}

TEST(PolicyTest, CreateRejects) {
  EXPECT_EQ(Policy::Create({{"", {{"*", "*"}}}}).status().code(), StatusCode::kInvalidArgument);
  auto dup = Policy::Create({{"a", {}}, {"a", {}}});
  EXPECT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("'a'"), std::string::npos);
  auto empty_action = Policy::Create({{"a", {{"", "*"}}}});
  EXPECT_FALSE(empty_action.ok());
  EXPECT_NE(empty_action.status().message().find("empty action"), std::string::npos);
  EXPECT_TRUE(Policy::Create({}).ok());
}

}  // namespace
}  // namespace gantry::security
