// ParseSweep on the header's example and on bad blocks, PlanTrials (grid
// order and cap, seeded random draws pinned to known values) and ParamText.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "gantry/jobs/sweep.h"

namespace gantry::jobs {
namespace {

using ::testing::HasSubstr;

Result<SweepSpec> Parse(const std::string& yaml) {
  Result<Config> cfg = Config::LoadString(yaml, "wf.yaml");
  if (!cfg.ok()) return cfg.status();
  Result<Config> view = cfg->Sub("sweep");
  if (!view.ok()) return view.status();
  return ParseSweep(*view);
}

// The error message of parsing `yaml`, "" when it parses.
std::string Error(const std::string& yaml) {
  Result<SweepSpec> s = Parse(yaml);
  return s.ok() ? "" : s.status().message();
}

constexpr char kExample[] = R"(sweep:
  search_space:
    lr:    {type: loguniform, min_value: 1.0e-4, max_value: 1.0e-1}
    batch: {type: choice, values: [16, 32, 64]}
  sampling_algorithm: {type: random, seed: 7}
  objective: {primary_metric: accuracy, goal: maximize}
  early_termination: {type: bandit, slack_factor: 0.1, evaluation_interval: 1,
                      delay_evaluation: 5}
  limits: {max_total_trials: 20, max_concurrent_trials: 4, timeout: 2h,
           trial_timeout: 30m}
  checkpoint: kill
  register: {name: mnist, path: model, registry: /srv/registry}
)";

TEST(SweepSpaceTest, ParsesTheHeaderExample) {
  Result<SweepSpec> s = Parse(kExample);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->space.size(), 2u);
  EXPECT_EQ(s->space[0].name, "lr");
  EXPECT_EQ(s->space[0].kind, ParamDomain::Kind::kLogUniform);
  EXPECT_DOUBLE_EQ(s->space[0].min_value, 1e-4);
  EXPECT_DOUBLE_EQ(s->space[0].max_value, 0.1);
  EXPECT_EQ(s->space[1].kind, ParamDomain::Kind::kChoice);
  EXPECT_EQ(s->space[1].values, (std::vector<Json>{16, 32, 64}));
  EXPECT_EQ(s->sampling, SweepSpec::Sampling::kRandom);
  EXPECT_EQ(s->seed, 7u);
  EXPECT_EQ(s->primary_metric, "accuracy");
  EXPECT_EQ(s->goal, Goal::kMaximize);
  EXPECT_EQ(s->policy.kind, PolicyKind::kBandit);
  EXPECT_EQ(s->policy.slack_factor, 0.1);
  EXPECT_FALSE(s->policy.slack_amount.has_value());
  EXPECT_EQ(s->policy.delay_evaluation, 5);
  EXPECT_EQ(s->max_total_trials, 20);
  EXPECT_EQ(s->max_concurrent_trials, 4);
  EXPECT_EQ(s->timeout, std::chrono::hours(2));
  EXPECT_EQ(s->trial_timeout, std::chrono::minutes(30));
  EXPECT_FALSE(s->pause_on_prune);
  ASSERT_TRUE(s->register_best.has_value());
  EXPECT_EQ(s->register_best->registry, "/srv/registry");
}

TEST(SweepSpaceTest, DefaultsAndOtherPolicies) {
  Result<SweepSpec> s = Parse(R"(sweep:
  search_space: {opt: {type: choice, values: [adam, sgd, 0.5]}, n: {type: randint, upper: 3}}
  objective: {primary_metric: loss, goal: minimize}
  early_termination: {type: asha, grace_period: 2, reduction_factor: 3, max_t: 50}
  checkpoint: pause
)");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->space[0].values, (std::vector<Json>{"adam", "sgd", 0.5}));
  EXPECT_EQ(s->space[1].upper, 3);
  EXPECT_EQ(s->sampling, SweepSpec::Sampling::kRandom);
  EXPECT_EQ(s->seed, 0u);
  EXPECT_EQ(s->goal, Goal::kMinimize);
  EXPECT_EQ(s->policy.grace_period, 2);
  EXPECT_EQ(s->policy.reduction_factor, 3);
  EXPECT_EQ(s->policy.max_t, 50);
  EXPECT_TRUE(s->pause_on_prune);
  EXPECT_EQ(s->max_total_trials, 1000);
  EXPECT_EQ(s->max_concurrent_trials, 0);
  EXPECT_EQ(s->timeout, std::chrono::seconds(5'184'000));

  s = Parse(R"(sweep:
  search_space: {x: {type: uniform, min_value: -1, max_value: 1}}
  objective: {primary_metric: acc, goal: maximize}
  early_termination: {type: optuna_percentile, percentile: 25, n_warmup_steps: 3}
)");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->policy.kind, PolicyKind::kOptunaPercentile);
  EXPECT_EQ(s->policy.percentile, 25);
  EXPECT_EQ(s->policy.n_warmup_steps, 3);
  EXPECT_EQ(s->policy.n_startup_trials, 5);
}

// A minimal valid block with `extra` lines added under sweep:.
std::string With(const std::string& extra,
                 const std::string& space = "{x: {type: choice, values: [1, 2]}}") {
  return "sweep:\n  search_space: " + space +
         "\n  objective: {primary_metric: acc, goal: maximize}\n" + extra;
}

TEST(SweepSpaceTest, ErrorsNameThePlaceAndTheKey) {
  EXPECT_THAT(Error(With("  limts: {max_total_trials: 3}\n")),
              HasSubstr("wf.yaml:4:3: unknown key 'sweep.limts' (did you mean 'sweep.limits'?)"));
  EXPECT_THAT(Error(With("", "{lr: {type: uniform, min_value: 0, max_valeu: 1}}")),
              HasSubstr("'sweep.search_space.lr.max_valeu' (did you mean"));
  EXPECT_THAT(Error(With("", "{lr: {type: unifrom, min_value: 0, max_value: 1}}")),
              HasSubstr("unknown parameter type 'unifrom' (did you mean 'uniform'?)"));
  EXPECT_THAT(Error(With("  sampling_algorithm: grid\n",
                         "{a: {type: choice, values: [1]}, lr: {type: uniform, min_value: 0, "
                         "max_value: 1}}")),
              HasSubstr("wf.yaml:2:54: key 'sweep.search_space.lr': grid sampling takes only "
                        "choice parameters and 'lr' is not one"));
  EXPECT_THAT(Error(With("  early_termination: {type: bandit, slack_factor: 0.1, slack_amount: "
                         "0.2}\n")),
              HasSubstr("gives both slack_factor and slack_amount"));
  EXPECT_THAT(Error(With("  early_termination: {type: bandit}\n")),
              HasSubstr("needs slack_factor (a ratio) or slack_amount"));
  EXPECT_THAT(Error(With("  early_termination: {type: median_stopping, slack_factor: 0.1}\n")),
              HasSubstr("unknown key 'sweep.early_termination.slack_factor'"));
  EXPECT_THAT(Error(With("  early_termination: {type: bandid, slack_factor: 0.1}\n")),
              HasSubstr("(did you mean 'bandit'?)"));
  EXPECT_THAT(Error(With("  early_termination: {type: truncation_selection}\n")),
              HasSubstr("wf.yaml:4:22: key 'sweep.early_termination': 'truncation_percentage' is "
                        "required (1..99)"));
  EXPECT_THAT(Error(With("  early_termination: {type: truncation_selection, "
                         "truncation_percentage: 100}\n")),
              HasSubstr("100 is out of range; use 1..99"));
  EXPECT_THAT(Error(With("  early_termination: {type: bandit, slack_factor: 0.1}\n"
                         "  checkpoint: pause\n")),
              HasSubstr("wf.yaml:5:15: key 'sweep.checkpoint': pause needs early_termination "
                        "type asha"));
  EXPECT_THAT(Error(With("  checkpoint: pause\n")), HasSubstr("pause needs"));
  EXPECT_THAT(Error(With("  limits: {max_total_trials: 0}\n")),
              HasSubstr("0 is out of range; use 1..100000"));
  EXPECT_THAT(Error(With("  limits: {max_total_trials: 100001}\n")), HasSubstr("out of range"));
  EXPECT_THAT(Error(With("  limits: {max_concurrent_trials: 0}\n")), HasSubstr("at least 1"));
  EXPECT_THAT(Error(With("  limits: {timeout: soon}\n")), HasSubstr("sweep.limits.timeout"));
  EXPECT_THAT(Error(With("", "{lr: {type: loguniform, min_value: 0, max_value: 1}}")),
              HasSubstr("must be > 0: loguniform takes the values themselves"));
  EXPECT_THAT(Error(With("", "{lr: {type: uniform, min_value: 1, max_value: 1}}")),
              HasSubstr("must be greater than min_value"));
  EXPECT_THAT(Error(With("", "{lr: {type: quniform, min_value: 0, max_value: 1, q: 0}}")),
              HasSubstr("sweep.search_space.lr.q': 0 must be > 0"));
  EXPECT_THAT(Error(With("", "{n: {type: randint, upper: 0}}")), HasSubstr("out of range"));
  EXPECT_THAT(Error(With("", "{n: {type: choice, values: []}}")), HasSubstr("is empty"));
  EXPECT_THAT(Error(With("", "{n: {type: choice, values: [[1]]}}")),
              HasSubstr("'sweep.search_space.n.values.0': must be a number or a string"));
  EXPECT_THAT(Error(With("", "{}")), HasSubstr("search_space': is empty"));
  EXPECT_THAT(Error("sweep:\n  search_space: {x: {type: choice, values: [1]}}\n"),
              HasSubstr("wf.yaml:2:3: key 'sweep': 'objective' is required"));
  EXPECT_THAT(Error(With("  sampling_algorithm: bayesian\n")),
              HasSubstr("bayesian sampling is not supported"));
  EXPECT_THAT(Error(With("  register: {name: m, path: out}\n")),
              HasSubstr("key 'sweep.register': 'registry' is required"));
}

TEST(SweepSpaceTest, GridIsLexicographicAndCapped) {
  SweepSpec spec;
  spec.sampling = SweepSpec::Sampling::kGrid;
  spec.space = {{"a", ParamDomain::Kind::kChoice, {1, 2}},
                {"b", ParamDomain::Kind::kChoice, {"x", "y", "z"}}};
  Result<std::vector<ParamValues>> plan = PlanTrials(spec);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::vector<std::string> got;
  for (const ParamValues& t : *plan) got.push_back(ParamText(t[0].second) + ParamText(t[1].second));
  EXPECT_EQ(got, (std::vector<std::string>{"1x", "1y", "1z", "2x", "2y", "2z"}));
  spec.max_total_trials = 4;
  plan = PlanTrials(spec);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->size(), 4u);
  EXPECT_EQ((*plan)[3][0].second, 2);
  EXPECT_EQ((*plan)[3][1].second, "x");
  spec.space.push_back({"lr", ParamDomain::Kind::kUniform, {}, 0, 1});
  plan = PlanTrials(spec);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("'lr'"));
}

TEST(SweepSpaceTest, RandomIsSeededAndPinned) {
  Result<SweepSpec> s = Parse(R"(sweep:
  search_space:
    lr: {type: loguniform, min_value: 1.0e-4, max_value: 1.0e-1}
    x: {type: uniform, min_value: -1, max_value: 1}
    q: {type: quniform, min_value: 0, max_value: 1, q: 0.1}
    b: {type: quniform, min_value: 16, max_value: 128, q: 16}
    n: {type: randint, upper: 10}
    c: {type: choice, values: [a, b, c]}
  sampling_algorithm: {type: random, seed: 42}
  objective: {primary_metric: acc, goal: maximize}
  limits: {max_total_trials: 200}
)");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Result<std::vector<ParamValues>> a = PlanTrials(*s);
  Result<std::vector<ParamValues>> b = PlanTrials(*s);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), 200u);
  EXPECT_EQ(*a, *b);
  std::set<std::string> choices;
  for (const ParamValues& t : *a) {
    double lr = t[0].second.get<double>();
    EXPECT_TRUE(lr >= 1e-4 && lr <= 0.1) << lr;
    double x = t[1].second.get<double>();
    EXPECT_TRUE(x >= -1 && x < 1) << x;
    // q = 0.1 keeps one decimal: 0.30000000000000004 is written 0.3.
    std::string q = ParamText(t[2].second);
    EXPECT_LE(q.size(), 3u) << q;
    EXPECT_TRUE(t[3].second.is_number_integer());
    EXPECT_EQ(t[3].second.get<int64_t>() % 16, 0);
    int64_t n = t[4].second.get<int64_t>();
    EXPECT_TRUE(n >= 0 && n < 10) << n;
    choices.insert(t[5].second.get<std::string>());
  }
  EXPECT_EQ(choices.size(), 3u);
  // Pinned: the first draws of seed 42, checked against an independent
  // MT19937-64 in Python (top 53 bits / 2^53 for [0, 1), rejection for
  // integers). A change here changes every resumed sweep's trials.
  std::string first;
  for (const auto& [name, v] : (*a)[0]) {
    if (!first.empty()) first += ' ';
    first += ParamText(v);
  }
  EXPECT_EQ(first, "0.018427507594783905 0.27806278770939485 0.8 32 1 c");
  s->seed = 43;
  Result<std::vector<ParamValues>> c = PlanTrials(*s);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(*a, *c);
}

TEST(SweepSpaceTest, ParamText) {
  EXPECT_EQ(ParamText(Json(32)), "32");
  EXPECT_EQ(ParamText(Json(-7)), "-7");
  EXPECT_EQ(ParamText(Json(32.0)), "32");
  EXPECT_EQ(ParamText(Json(0.001)), "0.001");
  EXPECT_EQ(ParamText(Json(1e-5)), "1e-05");
  EXPECT_EQ(ParamText(Json(0.1 + 0.2)), "0.30000000000000004");
  EXPECT_EQ(ParamText(Json("adam")), "adam");
  EXPECT_EQ(ParamText(Json(true)), "true");
}

}  // namespace
}  // namespace gantry::jobs
