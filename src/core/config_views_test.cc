// Config views (Sub, Items), overlays (Merge, WithOverrides, With, Without),
// positions, ToYaml and YamlWriter.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gantry/core/config.h"

namespace gantry {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

Config Load(std::string_view yaml, std::string_view origin) {
  Result<Config> c = Config::LoadString(yaml, origin);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return Config::Empty(origin);
  return std::move(c).value();
}

template <typename T>
std::string ErrorOf(const Result<T>& r) {
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

std::string ErrorOf(const Status& s) {
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  return s.message();
}

template <typename T>
T Must(Result<T> r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

constexpr const char* kGateway = R"(listen: ":8080"
routes:
  - prefix: /v1
    backend: a
    timeout: 30s
  - prefix: /v2
    backend: b
    limits: {rps: 5}
pools:
  a:
    hosts: [h1, h2]
)";

TEST(ConfigSubTest, ReadsRelativeKeysAndNamesFullKeysInErrors) {
  Config c = Load("bench:\n  ranks: two\n  inner:\n    n: 4\n", "g.yaml");
  Config bench = Must(c.Sub("bench"));
  EXPECT_EQ(bench.prefix(), "bench");
  EXPECT_EQ(bench.origin(), "g.yaml");
  EXPECT_EQ(ErrorOf(bench.GetInt("ranks", 0)),
            "g.yaml:2:10: key 'bench.ranks': expected an integer, got 'two'");
  Config inner = Must(bench.Sub("inner"));
  EXPECT_EQ(inner.prefix(), "bench.inner");
  EXPECT_EQ(*inner.GetInt("n", 0), 4);
  EXPECT_EQ(inner.Locate("n"), "g.yaml:4:8: key 'bench.inner.n'");
  EXPECT_THAT(*bench.Keys(""), ElementsAre("ranks", "inner"));
  EXPECT_TRUE(bench.Has(""));
  EXPECT_TRUE(bench.IsMap(""));
  EXPECT_FALSE(bench.IsList(""));
  EXPECT_TRUE(bench.IsScalar("ranks"));
  EXPECT_FALSE(bench.IsMap("ranks"));
  EXPECT_FALSE(bench.IsMap("absent"));
  // A scalar on the way is an error naming the full key.
  EXPECT_EQ(ErrorOf(bench.Sub("ranks.x")),
            "g.yaml:2:10: key 'bench.ranks': expected a map, got 'two'");
}

TEST(ConfigSubTest, AbsentKeyGivesAnEmptyView) {
  Config c = Load("a: 1\nb:\n", "g.yaml");
  for (std::string_view key : {"missing", "b", "missing.deeper"}) {
    Config v = Must(c.Sub(key));
    EXPECT_FALSE(v.Has("")) << key;
    EXPECT_EQ(*v.GetInt("x", 7), 7) << key;
    EXPECT_THAT(*v.Keys(""), IsEmpty()) << key;
    EXPECT_THAT(*v.Items(""), IsEmpty()) << key;
    EXPECT_TRUE(v.CheckKnownKeys("", {"x"}).ok()) << key;
    EXPECT_EQ(v.ToYaml(), "{}\n");
  }
  EXPECT_EQ(Must(c.Sub("missing")).Locate("x"), "g.yaml: key 'missing.x'");
  // A null value has no line of its own; its key has.
  EXPECT_EQ(c.Locate("b"), "g.yaml:2:1: key 'b'");
  EXPECT_EQ(Must(c.Sub("b")).Position("").line, 2);
}

TEST(ConfigSubTest, DidYouMeanThroughAView) {
  Config c = Load("bench:\n  rnaks: 4\n  colour: red\n", "g.yaml");
  Config bench = Must(c.Sub("bench"));
  EXPECT_EQ(ErrorOf(bench.CheckKnownKeys("", {"ranks", "iters"})),
            "g.yaml:2:3: unknown key 'bench.rnaks' (did you mean 'bench.ranks'?); g.yaml:3:3: "
            "unknown key 'bench.colour' (known keys under 'bench': ranks, iters)");
  Result<std::vector<UnknownKey>> unknown = bench.UnknownKeys("", {"ranks", "iters"});
  ASSERT_TRUE(unknown.ok());
  ASSERT_EQ(unknown->size(), 2u);
  EXPECT_EQ((*unknown)[0].key, "bench.rnaks");
  EXPECT_EQ((*unknown)[0].name, "rnaks");
  EXPECT_EQ((*unknown)[0].position.ToString(), "g.yaml:2:3");
  EXPECT_EQ((*unknown)[0].suggestion, "ranks");
  EXPECT_EQ((*unknown)[1].suggestion, std::nullopt);
  EXPECT_THAT(ErrorOf(c.UnknownKeys("bench.rnaks", {})),
              HasSubstr("key 'bench.rnaks': expected a map, got '4'"));
}

TEST(ConfigItemsTest, OneViewPerItemWithIndexedKeys) {
  Config c = Load(kGateway, "gw.yaml");
  EXPECT_TRUE(c.IsList("routes"));
  std::vector<Config> routes = Must(c.Items("routes"));
  ASSERT_EQ(routes.size(), 2u);
  EXPECT_EQ(routes[0].prefix(), "routes.0");
  EXPECT_EQ(*routes[0].GetString("prefix", ""), "/v1");
  EXPECT_EQ(*routes[0].GetDuration("timeout", 0s), 30s);
  EXPECT_EQ(*routes[1].GetInt("limits.rps", 0), 5);
  EXPECT_EQ(routes[1].Position("").ToString(), "gw.yaml:6:5");
  EXPECT_EQ(ErrorOf(routes[1].GetDuration("backend", 0s)),
            "gw.yaml:7:14: key 'routes.1.backend': expected a duration such as 30s or 250ms, got "
            "'b' (expected a number with a unit ns, us, ms, s, m, h or d (e.g. 30s))");
  EXPECT_EQ(ErrorOf(routes[1].CheckKnownKeys("", {"prefix", "backend", "limit"})),
            "gw.yaml:8:5: unknown key 'routes.1.limits' (did you mean 'routes.1.limit'?)");
  EXPECT_THAT(*c.Items("absent"), IsEmpty());
  EXPECT_EQ(ErrorOf(c.Items("pools")), "gw.yaml:10:3: key 'pools': expected a list, got a map");
  // Items of a view, and a list at the top of a document.
  std::vector<Config> hosts = Must(Must(c.Sub("pools.a")).Items("hosts"));
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[1].prefix(), "pools.a.hosts.1");
  EXPECT_EQ(*hosts[1].GetString("", ""), "h2");
}

TEST(ConfigItemsTest, LoadDocumentAcceptsAnyTopLevel) {
  Config list = Must(Config::LoadDocument("- {name: a}\n- {name: b}\n", "rules.yaml"));
  std::vector<Config> items = Must(list.Items(""));
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[1].prefix(), "1");
  EXPECT_EQ(items[1].Locate("name"), "rules.yaml:2:10: key '1.name'");
  Config scalar = Must(Config::LoadDocument("just text\n", "x.yaml"));
  EXPECT_TRUE(scalar.IsScalar(""));
  EXPECT_EQ(*scalar.GetString("", ""), "just text");
  Config empty = Must(Config::LoadDocument("", "x.yaml"));
  EXPECT_FALSE(empty.Has(""));
  EXPECT_THAT(*empty.Items(""), IsEmpty());
  // The document checks still apply.
  EXPECT_THAT(ErrorOf(Config::LoadDocument("- {a: 1, a: 2}\n", "x.yaml")),
              HasSubstr("x.yaml:1:10: key '[0].a': appears twice"));
  EXPECT_THAT(ErrorOf(Config::LoadDocument("- [1, 2\n", "x.yaml")), HasSubstr("YAML syntax error"));
}

TEST(ConfigMergeTest, OverlayWinsKeyByKeyMapsMergeListsReplace) {
  Config base = Load(R"(name: base
bench:
  ranks: 4
  ops: [all_reduce, broadcast]
  inner: {a: 1, b: 2}
keep: 1
)",
                     "base.yaml");
  Config overlay = Load(R"(bench:
  ops: [gather]
  inner: {b: 3, c: 4}
  iters: 9
name: overlay
extra: {x: 1}
)",
                        "site.yaml");
  Config m = base.Merge(overlay);
  EXPECT_EQ(m.origin(), "base.yaml with site.yaml");
  EXPECT_EQ(*m.GetString("name", ""), "overlay");
  EXPECT_EQ(*m.GetInt("bench.ranks", 0), 4);
  EXPECT_THAT(*m.GetStringList("bench.ops"), ElementsAre("gather"));  // replaced, not appended
  EXPECT_EQ(*m.GetInt("bench.inner.a", 0), 1);
  EXPECT_EQ(*m.GetInt("bench.inner.b", 0), 3);
  EXPECT_EQ(*m.GetInt("bench.inner.c", 0), 4);
  EXPECT_EQ(*m.GetInt("keep", 0), 1);
  // The base's keys keep their order; the overlay's new keys follow in its order.
  EXPECT_THAT(*m.Keys(""), ElementsAre("name", "bench", "keep", "extra"));
  EXPECT_THAT(*m.Keys("bench"), ElementsAre("ranks", "ops", "inner", "iters"));
  EXPECT_THAT(*m.Keys("bench.inner"), ElementsAre("a", "b", "c"));
  // Neither input changed.
  EXPECT_THAT(*base.GetStringList("bench.ops"), ElementsAre("all_reduce", "broadcast"));
  EXPECT_FALSE(base.Has("extra"));
  EXPECT_FALSE(overlay.Has("keep"));
}

TEST(ConfigMergeTest, ErrorsNameTheFileAndLineEachValueCameFrom) {
  Config base = Load("bench:\n  ranks: four\n  iters: 3\n", "base.yaml");
  Config overlay = Load("# site settings\nbench:\n  iters: many\n  rnaks: 2\n", "site.yaml");
  Config m = base.Merge(overlay);
  EXPECT_EQ(ErrorOf(m.GetInt("bench.ranks", 0)),
            "base.yaml:2:10: key 'bench.ranks': expected an integer, got 'four'");
  EXPECT_EQ(ErrorOf(m.GetInt("bench.iters", 0)),
            "site.yaml:3:10: key 'bench.iters': expected an integer, got 'many'");
  EXPECT_EQ(ErrorOf(m.CheckKnownKeys("bench", {"ranks", "iters"})),
            "site.yaml:4:3: unknown key 'bench.rnaks' (did you mean 'bench.ranks'?)");
  EXPECT_EQ(m.Locate("bench.iters"), "site.yaml:3:10: key 'bench.iters'");
}

TEST(ConfigMergeTest, NullClearsAndTypesMayChange) {
  Config base = Load("a: {x: 1}\nb: [1, 2]\nc: 3\nd: {y: 2}\nf: {z: 1}\n", "base.yaml");
  Config overlay = Load("a:\nb: {k: v}\nc: [4]\nd: plain\ne:\nf: {z: }\n", "o.yaml");
  Config m = base.Merge(overlay);
  EXPECT_FALSE(m.Has("a"));  // null: the value is cleared
  EXPECT_EQ(*m.GetInt("a.x", 7), 7);
  EXPECT_EQ(*m.GetInt("f.z", 7), 7);
  EXPECT_EQ(m.Locate("a"), "o.yaml:1:1: key 'a'");
  EXPECT_EQ(*m.GetString("b.k", ""), "v");               // a map replaces a list
  EXPECT_THAT(*m.GetStringList("c"), ElementsAre("4"));  // a list replaces a scalar
  EXPECT_EQ(*m.GetString("d", ""), "plain");             // a scalar replaces a map
  EXPECT_THAT(*m.Keys(""), ElementsAre("a", "b", "c", "d", "f", "e"));
  EXPECT_FALSE(m.Has("e"));
  // Merging views: a check's parameters laid over the base's.
  Config sub = Must(base.Sub("d")).Merge(Must(overlay.Sub("a")));
  EXPECT_EQ(*sub.GetInt("y", 0), 2);
}

TEST(ConfigOverridesTest, ValuesAreTypedLikeScalarsInAFile) {
  Config file = Load("bench:\n  ranks: 4\n  name: nightly\n", "gantry.yaml");
  Config c = Must(file.WithOverrides({{"bench.ranks", "8"},
                                      {"bench.check", "yes"},
                                      {"bench.max", "64M"},
                                      {"bench.wait", "250ms"},
                                      {"bench.ratio", "0.5"},
                                      {"bench.ops", "[a, b]"},
                                      {"new.deep.key", "null"}},
                                     "--set"));
  EXPECT_EQ(c.origin(), "gantry.yaml with --set");
  EXPECT_EQ(*c.GetInt("bench.ranks", 0), 8);
  EXPECT_TRUE(*c.GetBool("bench.check", false));
  EXPECT_EQ(*c.GetSize("bench.max", 0), 64u << 20);
  EXPECT_EQ(*c.GetDuration("bench.wait", 0s), 250ms);
  EXPECT_DOUBLE_EQ(*c.GetDouble("bench.ratio", 0), 0.5);
  EXPECT_EQ(*c.GetString("bench.name", ""), "nightly");  // untouched
  EXPECT_EQ(*c.GetString("bench.ops", ""), "[a, b]");    // text, not YAML
  EXPECT_EQ(*c.GetString("new.deep.key", ""), "null");
  // New keys follow the file's, in the map's (sorted) order.
  EXPECT_THAT(*c.Keys("bench"),
              ElementsAre("ranks", "name", "check", "max", "ops", "ratio", "wait"));
  EXPECT_EQ(*file.GetInt("bench.ranks", 0), 4);  // the file's config is unchanged
}

TEST(ConfigOverridesTest, TypeErrorsNameTheOverride) {
  Config file = Load("bench:\n  ranks: 4\n", "gantry.yaml");
  Config c = Must(file.WithOverrides({{"bench.ranks", "eight"}, {"bench.wait", "5 sec"}}, "--set"));
  EXPECT_EQ(ErrorOf(c.GetInt("bench.ranks", 0)),
            "--set: key 'bench.ranks': expected an integer, got 'eight'");
  EXPECT_EQ(ErrorOf(c.GetDuration("bench.wait", 0s)),
            "--set: key 'bench.wait': expected a duration such as 30s or 250ms, got '5 sec' "
            "(unknown unit 'sec'; use ns, us, ms, s, m, h or d)");
  EXPECT_EQ(c.Locate("bench.ranks"), "--set: key 'bench.ranks'");
  EXPECT_EQ(ErrorOf(c.CheckKnownKeys("bench", {"ranks", "wiat"})),
            "--set: unknown key 'bench.wait' (did you mean 'bench.wiat'?)");
  // Over no file at all.
  Config flags = Must(Config::Empty("").WithOverrides({{"stage", "training"}}, "flags"));
  EXPECT_EQ(flags.origin(), "flags");
  EXPECT_EQ(*flags.GetString("stage", ""), "training");
}

TEST(ConfigOverridesTest, ReplaceWhatTheKeyHeldAndIndexLists) {
  Config file = Load(kGateway, "gw.yaml");
  Config c = Must(file.WithOverrides({{"routes.1.backend", "c"},
                                      {"listen", "x"},
                                      {"pools.a", "gone"},
                                      {"routes.0.timeout.x", "1"}},
                                     "--set"));
  EXPECT_EQ(*c.GetString("routes.1.backend", ""), "c");
  EXPECT_EQ(*c.GetString("routes.1.prefix", ""), "/v2");  // the item's other keys stay
  EXPECT_EQ(*c.ListSize("routes"), 2u);
  EXPECT_EQ(*c.GetString("pools.a", ""), "gone");          // a scalar replaces a map
  EXPECT_EQ(*c.GetString("routes.0.timeout.x", ""), "1");  // a map replaces a scalar
  EXPECT_EQ(ErrorOf(file.WithOverrides({{"routes.2.backend", "c"}}, "--set")),
            "--set: key 'routes.2.backend': 'routes' is a list of 2 items (gw.yaml:3:3); index it "
            "with 0 to 1");
  EXPECT_THAT(ErrorOf(file.WithOverrides({{"routes.first", "c"}}, "--set")),
              HasSubstr("'routes' is a list of 2 items"));
  for (const char* bad : {"", "a..b", ".a", "a."}) {
    EXPECT_THAT(ErrorOf(file.WithOverrides({{bad, "1"}}, "--set")),
                HasSubstr("a dotted key needs a name between dots"))
        << bad;
  }
  // Through a view: keys are relative, messages full.
  Config route = Must(Must(file.Sub("routes.0")).WithOverrides({{"timeout", "soon"}}, "--set"));
  EXPECT_EQ(ErrorOf(route.GetDuration("timeout", 0s)).substr(0, 41),
            "--set: key 'routes.0.timeout': expected a");
}

TEST(ConfigWithTest, SetsAndRemovesWholeSubTrees) {
  Config base = Load("checks:\n  cpu: {sockets: 2}\n  swap: {max: 0}\n", "generic.yaml");
  Config site = Load("checks:\n  nvme: {count: 8}\n", "site.yaml");
  Config with = Must(base.With("checks.nvme", Must(site.Sub("checks.nvme"))));
  EXPECT_THAT(*with.Keys("checks"), ElementsAre("cpu", "swap", "nvme"));
  EXPECT_EQ(with.Locate("checks.nvme.count"), "site.yaml:2:17: key 'checks.nvme.count'");
  Config replaced = Must(with.With("checks.cpu", Config::Empty("x")));
  EXPECT_THAT(*replaced.Keys("checks.cpu"), IsEmpty());
  EXPECT_THAT(*replaced.Keys("checks"), ElementsAre("cpu", "swap", "nvme"));  // order kept

  Config without = Must(with.Without("checks.swap"));
  EXPECT_THAT(*without.Keys("checks"), ElementsAre("cpu", "nvme"));
  EXPECT_THAT(*with.Keys("checks"), ElementsAre("cpu", "swap", "nvme"));  // unchanged
  EXPECT_THAT(*Must(with.Without("checks.absent")).Keys("checks"),
              ElementsAre("cpu", "swap", "nvme"));
  EXPECT_THAT(*Must(with.Without("nothing.here")).Keys(""), ElementsAre("checks"));
  EXPECT_THAT(ErrorOf(with.Without("checks.cpu.sockets.x")),
              HasSubstr("key 'checks.cpu.sockets': expected a map, got '2'"));
  Config list = Load("l: [{a: 1, b: 2}]\n", "l.yaml");
  EXPECT_THAT(*Must(list.Without("l.0.a")).Keys("l.0"), ElementsAre("b"));
  EXPECT_THAT(ErrorOf(list.Without("l.0")), HasSubstr("key 'l': expected a map, got a list"));
}

TEST(ConfigToYamlTest, WritesTheTreeBackInOrderKeepingInlineStyle) {
  Config c = Load(
      "name: x\nsizes: [A, B]\nchecks:\n  cpu: {sockets: 2}\n  fs:\n    - path: /\n"
      "      rw: true\n  note: \"a: b\"\n",
      "p.yaml");
  const std::string yaml = c.ToYaml();
  EXPECT_EQ(yaml,
            "name: x\nsizes: [A, B]\nchecks:\n  cpu: {sockets: 2}\n  fs:\n    - path: /\n"
            "      rw: true\n  note: \"a: b\"\n");
  Config again = Must(Config::LoadString(yaml, "again.yaml"));
  EXPECT_EQ(*again.GetString("checks.note", ""), "a: b");
  EXPECT_EQ(Must(c.Sub("checks.cpu")).ToYaml(), "{sockets: 2}\n");
  Config merged = c.Merge(Load("checks:\n  cpu: {cores: 8}\n", "o.yaml"));
  EXPECT_THAT(merged.ToYaml(), HasSubstr("  cpu: {sockets: 2, cores: 8}\n"));
}

TEST(YamlWriterTest, WritesNestedBlocksAndQuotes) {
  YamlWriter w;
  w.BeginMap().Key("groups").BeginList().BeginMap();
  w.Key("name").Value("gantry-agent");
  w.Key("rules").BeginList().BeginMap();
  w.Key("alert").Value("A").Key("expr").Value("up == 0");
  w.Key("annotations").BeginMap().Key("summary").QuotedValue("{{ $value }} down").EndMap();
  w.EndMap().EndList().EndMap().EndList().EndMap();
  Result<std::string> text = w.Finish();
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text,
            "groups:\n  - name: gantry-agent\n    rules:\n      - alert: A\n        expr: up == 0\n"
            "        annotations:\n          summary: \"{{ $value }} down\"");
  Config back = Must(Config::LoadString(*text, "out.yaml"));
  EXPECT_EQ(*back.GetString("groups.0.rules.0.annotations.summary", ""), "{{ $value }} down");

  YamlWriter open;
  open.BeginMap().Key("a").BeginList();
  EXPECT_EQ(open.Finish().status().code(), StatusCode::kInternal);
}

TEST(ConfigCopyTest, CopiesShareTheTreeAndStayIndependent) {
  Config a = Load("x: 1\n", "a.yaml");
  Config b = a;
  Config c = Must(b.WithOverrides({{"x", "2"}}, "--set"));
  b = c;
  EXPECT_EQ(*a.GetInt("x", 0), 1);
  EXPECT_EQ(*b.GetInt("x", 0), 2);
  EXPECT_EQ(a.origin(), "a.yaml");
}

}  // namespace
}  // namespace gantry
