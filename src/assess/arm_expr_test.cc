#include "arm_expr.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "gantry/core/text.h"

namespace gantry::assess::arm {
namespace {

using ::testing::HasSubstr;

class FakeContext : public Context {
 public:
  FakeContext() {
    params_ = Json::parse(R"({"name": "ml", "count": 3, "location": "westeurope",
      "tags": {"env": "prod", "Owner": "me"}, "list": [1, 2, 3], "empty": "", "flag": true})");
  }
  Result<const Json*> Parameter(std::string_view name) override {
    for (auto it = params_.begin(); it != params_.end(); ++it) {
      if (EqualsIgnoreCase(it.key(), name)) return &*it;
    }
    return InvalidArgument(fmt::format("parameter '{}' is not declared", name));
  }
  Result<const Json*> Variable(std::string_view name) override {
    if (name == "big") return &big_;
    return InvalidArgument(fmt::format("variable '{}' is not declared", name));
  }
  Result<int64_t> CopyIndex(std::optional<std::string_view> loop) override {
    if (loop && *loop != "disks") return InvalidArgument("no such loop");
    return index_;
  }
  Result<Json> CallUserFunction(std::string_view name, std::vector<Json> args) override {
    if (name == "ns.double" && args.size() == 1) return Json(args[0].get<int64_t>() * 2);
    return InvalidArgument(fmt::format("unknown function '{}'", name));
  }
  const ArmOptions& Options() const override { return opts_; }
  bool AllowsNonDeterministic() const override { return nondet_; }

  Json params_;
  Json big_ = Json::array();
  ArmOptions opts_;
  int64_t index_ = 2;
  bool nondet_ = false;
};

Json Eval(std::string_view expr, FakeContext* ctx = nullptr) {
  FakeContext local;
  FakeContext& c = ctx ? *ctx : local;
  Result<Json> r = EvaluateString(expr, c, nullptr);
  EXPECT_TRUE(r.ok()) << expr << ": " << r.status().ToString();
  return r.ok() ? *r : Json("<error>");
}

Status EvalError(std::string_view expr, FakeContext* ctx = nullptr) {
  FakeContext local;
  Result<Json> r = EvaluateString(expr, ctx ? *ctx : local, nullptr);
  EXPECT_FALSE(r.ok()) << expr << " gave " << (r.ok() ? r->dump() : "");
  return r.status();
}

struct Case {
  const char* expr;
  const char* want;  // JSON
};

TEST(ArmExprTest, Functions) {
  const Case cases[] = {
      {"plain", R"("plain")"},
      {"[[notAnExpression]", R"("[notAnExpression]")"},
      {"['it''s']", R"("it's")"},
      {"[-12]", "-12"},
      {"[concat('a', 'b', 1, true())]", R"("ab1True")"},
      {"[concat(createArray(1), createArray(2, 3))]", "[1,2,3]"},
      {"[format('{0}-{1:D3}-{2:X}-{0,5}|{0,-4}|{{x}}', 'ab', 7, 255)]",
       R"("ab-007-FF-   ab|ab  |{x}")"},
      {"[format('{0:N2} {0:F1} {1:000}', json('1234.5'), 7)]", R"("1,234.50 1234.5 007")"},
      {"[toLower('AbC')]", R"("abc")"},
      {"[toUpper('AbC')]", R"("ABC")"},
      {"[trim('  x  ')]", R"("x")"},
      {"[base64('hello')]", R"("aGVsbG8=")"},
      {"[base64ToString('aGVsbG8=')]", R"("hello")"},
      {"[json('{\"a\": [1, {\"b\": null}]}').a[1]]", R"({"b":null})"},
      {"[json('null')]", "null"},
      {"[string(true())]", R"("True")"},
      {"[string(createObject('a', 1))]", R"("{\"a\":1}")"},
      {"[string(12)]", R"("12")"},
      {"[int('42')]", "42"},
      {"[bool('TRUE')]", "true"},
      {"[bool(0)]", "false"},
      {"[float('2.5')]", "2.5"},
      {"[length('héllo')]", "5"},
      {"[length(parameters('list'))]", "3"},
      {"[length(parameters('tags'))]", "2"},
      {"[empty(parameters('empty'))]", "true"},
      {"[empty(createArray())]", "true"},
      {"[empty(null())]", "true"},
      {"[empty('x')]", "false"},
      {"[first(parameters('list'))]", "1"},
      {"[last('abc')]", R"("c")"},
      {"[first(createArray())]", "null"},
      {"[take('héllo', 2)]", R"("hé")"},
      {"[skip(parameters('list'), 1)]", "[2,3]"},
      {"[take(parameters('list'), 10)]", "[1,2,3]"},
      {"[split('a,b;c', createArray(',', ';'))]", R"(["a","b","c"])"},
      {"[split('a//b', '/')]", R"(["a","","b"])"},
      {"[join(createArray('a', 'b'), '-')]", R"("a-b")"},
      {"[replace('a-b-c', '-', '')]", R"("abc")"},
      {"[substring('abcdef', 2, 3)]", R"("cde")"},
      {"[substring('abcdef', 4)]", R"("ef")"},
      {"[startsWith('Microsoft.Storage', 'microsoft.')]", "true"},
      {"[endsWith('abc', 'BC')]", "true"},
      {"[indexOf('abcABC', 'C')]", "2"},
      {"[lastIndexOf('abcABC', 'c')]", "5"},
      {"[indexOf('abc', 'z')]", "-1"},
      {"[padLeft(7, 3, '0')]", R"("007")"},
      {"[padLeft('abc', 2)]", R"("abc")"},
      {"[equals('a', 'A')]", "false"},
      {"[equals(createObject('a', 1), json('{\"A\": 1}'))]", "true"},
      {"[equals(1, 1)]", "true"},
      {"[and(true(), not(false()), or(false(), true()))]", "true"},
      {"[greater(2, 1)]", "true"},
      {"[greaterOrEquals('a', 'b')]", "false"},
      {"[less(1, 2)]", "true"},
      {"[lessOrEquals(2, 2)]", "true"},
      {"[add(1, mul(2, 3))]", "7"},
      {"[sub(1, 5)]", "-4"},
      {"[div(7, 2)]", "3"},
      {"[mod(7, 2)]", "1"},
      {"[min(3, 1, 2)]", "1"},
      {"[max(parameters('list'))]", "3"},
      {"[range(5, 3)]", "[5,6,7]"},
      {"[union(createObject('a', createObject('x', 1)), createObject('a', createObject('y', 2)))]",
       R"({"a":{"x":1,"y":2}})"},
      {"[union(createArray(1, 2), createArray(2, 3))]", "[1,2,3]"},
      {"[intersection(createArray(1, 2, 3), createArray(2, 3, 4))]", "[2,3]"},
      {"[intersection(createObject('a', 1, 'b', 2), createObject('a', 1, 'b', 3))]", R"({"a":1})"},
      {"[contains('abc', 'b')]", "true"},
      {"[contains('abc', 'B')]", "false"},
      {"[contains(parameters('tags'), 'owner')]", "true"},
      {"[contains(parameters('list'), 2)]", "true"},
      {"[createObject('k', parameters('list'))]", R"({"k":[1,2,3]})"},
      {"[array('x')]", R"(["x"])"},
      {"[coalesce(null(), null(), 'z')]", R"("z")"},
      {"[items(createObject('b', 2, 'a', 1))]", R"([{"key":"a","value":1},{"key":"b","value":2}])"},
      {"[objectKeys(parameters('tags'))]", R"(["env","Owner"])"},
      {"[tryGet(parameters('tags'), 'missing')]", "null"},
      {"[tryGet(parameters('tags'), 'env')]", R"("prod")"},
      {"[parameters('tags').owner]", R"("me")"},
      {"[parameters('TAGS')['env']]", R"("prod")"},
      {"[parameters('list')[add(0, 1)]]", "2"},
      {"[if(parameters('flag'), 'yes', 'no')]", R"("yes")"},
      {"[if(false(), parameters('nope'), 'lazy')]", R"("lazy")"},
      {"[copyIndex()]", "2"},
      {"[copyIndex(1)]", "3"},
      {"[copyIndex('disks', 10)]", "12"},
      {"[resourceId('Microsoft.Network/virtualNetworks/subnets', 'vnet', 'sn')]",
       R"("/subscriptions/ffffffff-ffff-ffff-ffff-ffffffffffff/resourceGroups/ps-rule-test-rg/providers/Microsoft.Network/virtualNetworks/vnet/subnets/sn")"},
      {"[resourceId('other-rg', 'Microsoft.Storage/storageAccounts', 'st')]",
       R"("/subscriptions/ffffffff-ffff-ffff-ffff-ffffffffffff/resourceGroups/other-rg/providers/Microsoft.Storage/storageAccounts/st")"},
      {"[resourceId('sub1', 'rg1', 'Microsoft.Storage/storageAccounts', 'st')]",
       R"("/subscriptions/sub1/resourceGroups/rg1/providers/Microsoft.Storage/storageAccounts/st")"},
      {"[resourceId('Microsoft.MachineLearningServices/workspaces/computes', 'ws/cpu')]",
       R"("/subscriptions/ffffffff-ffff-ffff-ffff-ffffffffffff/resourceGroups/ps-rule-test-rg/providers/Microsoft.MachineLearningServices/workspaces/ws/computes/cpu")"},
      {"[subscriptionResourceId('Microsoft.Authorization/roleDefinitions', 'abc')]",
       R"("/subscriptions/ffffffff-ffff-ffff-ffff-ffffffffffff/providers/Microsoft.Authorization/roleDefinitions/abc")"},
      {"[tenantResourceId('Microsoft.Management/managementGroups', 'mg')]",
       R"("/providers/Microsoft.Management/managementGroups/mg")"},
      {"[extensionResourceId('/subscriptions/s/resourceGroups/g/providers/A.B/c/d', "
       "'Microsoft.Insights/diagnosticSettings', 'diag')]",
       R"("/subscriptions/s/resourceGroups/g/providers/A.B/c/d/providers/Microsoft.Insights/diagnosticSettings/diag")"},
      {"[resourceGroup().location]", R"("eastus")"},
      {"[resourceGroup().name]", R"("ps-rule-test-rg")"},
      {"[resourceGroup().id]",
       R"("/subscriptions/ffffffff-ffff-ffff-ffff-ffffffffffff/resourceGroups/ps-rule-test-rg")"},
      {"[subscription().subscriptionId]", R"("ffffffff-ffff-ffff-ffff-ffffffffffff")"},
      {"[subscription().tenantId]", R"("ffffffff-ffff-ffff-ffff-ffffffffffff")"},
      {"[tenant().tenantId]", R"("ffffffff-ffff-ffff-ffff-ffffffffffff")"},
      {"[deployment().name]", R"("ps-rule-test-deployment")"},
      {"[environment().name]", R"("AzureCloud")"},
      {"[environment().suffixes.storage]", R"("core.windows.net")"},
      {"[null()]", "null"},
      {"[ns.double(21)]", "42"},
      {"[uri('https://a.example/x/y', 'z')]", R"("https://a.example/x/z")"},
      {"[uriComponent('a b/c')]", R"("a%20b%2Fc")"},
      {"[ concat( 'a' , 'b' ) ]", R"("ab")"},
      {"[CONCAT('a')]", R"("a")"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Eval(c.expr), Json::parse(c.want)) << c.expr;
  }
}

TEST(ArmExprTest, UniqueStringAndGuidAreDeterministicHashes) {
  Json u1 = Eval("[uniqueString(resourceGroup().id)]");
  Json u2 = Eval("[uniqueString(resourceGroup().id)]");
  Json u3 = Eval("[uniqueString(resourceGroup().id, 'x')]");
  ASSERT_TRUE(u1.is_string());
  EXPECT_EQ(u1, u2);
  EXPECT_NE(u1, u3);
  EXPECT_TRUE(std::regex_match(u1.get<std::string>(), std::regex("[a-z2-7]{13}")))
      << u1.get<std::string>();
  // Joining must not make ('a-b') equal to ('a', 'b')... it does in Azure
  // too (the parts are joined with '-'), so only distinct texts are checked.
  EXPECT_NE(UniqueString({"ab"}), UniqueString({"a", "b"}));
  Json g = Eval("[guid('a', 'b')]");
  EXPECT_TRUE(std::regex_match(
      g.get<std::string>(),
      std::regex("[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")))
      << g.get<std::string>();
  EXPECT_EQ(g, Eval("[guid('a', 'b')]"));
  EXPECT_NE(g, Eval("[guid('a', 'c')]"));
}

TEST(ArmExprTest, UnknownValuesPropagate) {
  Json r = Eval("[reference('st').primaryEndpoints.blob]");
  EXPECT_TRUE(IsUnknown(r));
  EXPECT_EQ(UnknownText(r), "[reference('st').primaryEndpoints.blob]");
  EXPECT_TRUE(IsUnknown(Eval("[concat('x', listKeys('st', '2023-01-01').keys[0].value)]")));
  EXPECT_TRUE(IsUnknown(Eval("[equals(reference('x').a, 'b')]")));
  EXPECT_TRUE(IsUnknown(Eval("[if(reference('x').a, 'b', 'c')]")));
  // Containers keep the unknown inside.
  Json o = Eval("[createObject('known', 1, 'later', reference('x'))]");
  ASSERT_TRUE(o.is_object());
  EXPECT_EQ(o["known"], 1);
  EXPECT_TRUE(IsUnknown(o["later"]));
  EXPECT_TRUE(ContainsUnknown(o));
  // Only the taken branch is evaluated.
  EXPECT_EQ(Eval("[if(true(), 'x', reference('y'))]"), "x");
}

TEST(ArmExprTest, NonDeterministicFunctionsOnlyInDefaults) {
  EXPECT_THAT(EvalError("[utcNow()]").message(), HasSubstr("only be used in a parameter's"));
  EXPECT_THAT(EvalError("[newGuid()]").message(), HasSubstr("defaultValue"));
  FakeContext c;
  c.nondet_ = true;
  EXPECT_TRUE(IsUnknown(Eval("[utcNow('yyyy')]", &c)));
  EXPECT_TRUE(IsUnknown(Eval("[newGuid()]", &c)));
}

struct ErrCase {
  const char* expr;
  const char* message;
};

TEST(ArmExprTest, ErrorsSayWhatIsWrong) {
  const ErrCase cases[] = {
      {"[fooBar(1)]", "unknown function 'fooBar'"},
      {"[concatt('a')]", "did you mean 'concat'?"},
      {"[parameters('nope')]", "parameter 'nope' is not declared"},
      {"[concat('a']", "not closed with ')'"},
      {"['abc]", "string literal is not closed"},
      {"[concat('a') x]", "unexpected text after the expression"},
      {"[]", "the expression is empty"},
      {"[1.5]", "only integer literals"},
      {"[99999999999999999999]", "out of range"},
      {"[concat]", "expected '(' after the function name 'concat'"},
      {"[#]", "unexpected character '#'"},
      {"[toLower(1)]", "toLower(): argument 1 must be a string, got int"},
      {"[not(1)]", "must be a bool"},
      {"[if(true(), 1)]", "if(): takes 3 arguments"},
      {"[if('x', 1, 2)]", "condition must be a bool"},
      {"[length(1)]", "must be a string, array or object"},
      {"[div(1, 0)]", "division by zero"},
      {"[mod(1, 0)]", "division by zero"},
      {"[add(9223372036854775807, 1)]", "integer overflow"},
      {"[mul(9223372036854775807, 2)]", "integer overflow"},
      {"[substring('abc', 2, 5)]", "outside the string of 3 characters"},
      {"[substring('abc', -1)]", "outside the string"},
      {"[replace('abc', '', 'x')]", "is empty"},
      {"[range(0, 10001)]", "between 0 and 10000"},
      {"[base64ToString('!!')]", "base64ToString()"},
      {"[json('{')]", "json()"},
      {"[int('x')]", "'x' is not an integer"},
      {"[bool('maybe')]", "neither 'true' nor 'false'"},
      {"[format('{1}', 'a')]", "does not name one of the 1 value(s)"},
      {"[format('{0:Q}', 1)]", "format 'Q' is not supported"},
      {"[format('{0', 1)]", "without '}'"},
      {"[resourceId('st', 'x')]", "no resource type"},
      {"[resourceId('st')]", "takes at least 2 argument(s), got 1"},
      {"[resourceId('Microsoft.Storage/storageAccounts', 'a', 'b')]",
       "needs 1 name segment(s), got 2"},
      {"[resourceId('Microsoft.Network/virtualNetworks/subnets', 'vnet')]", "needs 2"},
      {"[parameters('tags').missing]", "no property 'missing'"},
      {"[parameters('tags').evn]", "did you mean 'env'?"},
      {"[parameters('list')[3]]", "index 3 is outside the array of 3"},
      {"[parameters('name').x]", "cannot read property 'x'"},
      {"[parameters('list')['a']]", "cannot index array with string"},
      {"[copyIndex('other')]", "no such loop"},
      {"[createObject('a')]", "pairs of name and value"},
      {"[padLeft('a', 100000)]", "over 16384"},
      {"[greater('a', 1)]", "two ints or two strings"},
      {"[concat(createArray(1), 'a')]", "must be an array like the first"},
      {"[equals(1)]", "takes 2 argument(s), got 1"},
      {"[union(createObject('a', 1), createArray())]", "object like the first"},
  };
  for (const ErrCase& c : cases) {
    Status s = EvalError(c.expr);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.expr;
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << c.expr;
  }
}

TEST(ArmExprTest, HostileExpressionsEndInErrors) {
  // Deep nesting of calls: refused by the parser, not recursed into.
  std::string deep = "[";
  for (int i = 0; i < 100000; ++i) deep += "concat(";
  deep += "'a'";
  for (int i = 0; i < 100000; ++i) deep += ")";
  deep += "]";
  EXPECT_THAT(EvalError(deep).message(), HasSubstr("deeper than the limit of 64"));
  // Long property chains count as nesting too.
  std::string chain = "[parameters('tags')";
  for (int i = 0; i < 100000; ++i) chain += ".a";
  chain += "]";
  EXPECT_THAT(EvalError(chain).message(), HasSubstr("deeper than the limit"));
  std::string idx = "[parameters('list')";
  for (int i = 0; i < 100000; ++i) idx += "[0]";
  idx += "]";
  EXPECT_THAT(EvalError(idx).message(), HasSubstr("deeper than the limit"));
  // json() of deep text is refused by the source reader's limit.
  std::string j = "[json('" + std::string(1000, '[') + std::string(1000, ']') + "')]";
  EXPECT_THAT(EvalError(j).message(), HasSubstr("limit of 256"));
  // Doubling a value through the work budget.
  FakeContext c;
  c.budget = 1 << 20;
  c.big_ = Json::array();
  for (int i = 0; i < 100000; ++i) c.big_.push_back(i);
  std::string dbl = "[concat(variables('big')";
  for (int i = 0; i < 30; ++i) dbl += ", variables('big')";
  dbl += ")]";
  Status s = EvalError(dbl, &c);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
}

TEST(ArmExprTest, StringsAreHandledByCodePoint) {
  EXPECT_EQ(Eval("[substring('日本語テキスト', 2, 2)]"), "語テ");
  EXPECT_EQ(Eval("[first('日本')]"), "日");
  EXPECT_EQ(Eval("[indexOf('日本語', '語')]"), 2);
  // Decoded bytes that are not UTF-8 are replaced, so a later dump cannot throw.
  Json s = Eval("[base64ToString('/w==')]");
  EXPECT_EQ(s, "\xEF\xBF\xBD");
  EXPECT_NO_THROW(s.dump());
}

TEST(ArmExprTest, IsExpressionAndLiteral) {
  EXPECT_TRUE(IsExpression("[a()]"));
  EXPECT_FALSE(IsExpression("[[a()]"));
  EXPECT_FALSE(IsExpression("[a()"));
  EXPECT_FALSE(IsExpression("x[a()]"));
  EXPECT_FALSE(IsExpression("[]x"));
  EXPECT_EQ(LiteralOf("[[a]"), "[a]");
  EXPECT_EQ(LiteralOf("a"), "a");
}

}  // namespace
}  // namespace gantry::assess::arm
