#include "gantry/jobs/workflow.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gantry::jobs {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Result<Workflow> Parse(std::string_view yaml) { return ParseWorkflow(yaml, "/w/flow.yaml"); }

std::string Error(std::string_view yaml) {
  Result<Workflow> wf = Parse(yaml);
  EXPECT_FALSE(wf.ok()) << yaml;
  return wf.ok() ? "" : wf.status().message();
}

TEST(Workflow, ParsesStepsDefaultsAndOrder) {
  Result<Workflow> wf = Parse(R"(
name: demo
defaults:
  timeout: 1h
  retries: {limit: 2, backoff: 5s, factor: 3, max_backoff: 1m, exit_codes: [1, 137]}
  resources: {cpus: 2, memory: 4G}
  env: {A: "1"}
steps:
  evaluate:
    needs: [train]
    run: [python3, eval.py]
  prepare:
    run: [python3, prep.py, --out, data]
    outputs: [data/train.npy]
    inputs: raw/*.csv
    workdir: sub
  train:
    needs: [prepare]
    shell: "python3 train.py | tee log"
    env: {B: "2"}
    retries: 0
    resources: {gpus: 1, time: 2h, partition: gpu, slurm_args: [--exclusive]}
)");
  ASSERT_TRUE(wf.ok()) << wf.status().message();
  EXPECT_EQ(wf->name, "demo");
  EXPECT_EQ(wf->path, "/w/flow.yaml");
  EXPECT_EQ(wf->dir, "/w");
  EXPECT_EQ(wf->digest.size(), 64u);
  // Topological; among ready steps the file's order.
  EXPECT_THAT(wf->order, ElementsAre("prepare", "train", "evaluate"));
  const Step& prep = wf->steps.at("prepare");
  EXPECT_THAT(prep.argv, ElementsAre("python3", "prep.py", "--out", "data"));
  EXPECT_EQ(prep.workdir, "/w/sub");
  EXPECT_THAT(prep.inputs, ElementsAre("raw/*.csv"));
  EXPECT_EQ(prep.timeout, std::chrono::hours(1));
  EXPECT_EQ(prep.retries.limit, 2);
  EXPECT_EQ(prep.retries.backoff, std::chrono::seconds(5));
  EXPECT_THAT(prep.retries.exit_codes, ElementsAre(1, 137));
  EXPECT_EQ(prep.resources.cpus, 2);
  EXPECT_EQ(prep.resources.memory_bytes, 4ull << 30);
  EXPECT_EQ(prep.env.at("A"), "1");
  const Step& train = wf->steps.at("train");
  EXPECT_EQ(train.shell, "python3 train.py | tee log");
  EXPECT_TRUE(train.argv.empty());
  EXPECT_EQ(train.workdir, "/w");
  EXPECT_EQ(train.env.at("A"), "1");
  EXPECT_EQ(train.env.at("B"), "2");
  EXPECT_EQ(train.retries.limit, 0);
  EXPECT_EQ(train.resources.gpus, 1);
  EXPECT_EQ(train.resources.cpus, 2);  // from defaults
  EXPECT_EQ(train.resources.time, std::chrono::hours(2));
  EXPECT_EQ(train.resources.partition, "gpu");
  EXPECT_THAT(train.resources.slurm_args, ElementsAre("--exclusive"));
  EXPECT_EQ(train.on_failure, FailureMode::kStop);
}

TEST(Workflow, NameDefaultsToTheFileName) {
  Result<Workflow> wf = ParseWorkflow("steps: {a: {run: [true]}}", "/x/pipeline.yml");
  ASSERT_TRUE(wf.ok()) << wf.status().message();
  EXPECT_EQ(wf->name, "pipeline");
}

TEST(Workflow, RetryBackoffGrowsAndIsCapped) {
  RetryPolicy p;
  p.backoff = std::chrono::seconds(2);
  p.factor = 3;
  p.max_backoff = std::chrono::seconds(10);
  EXPECT_EQ(p.Delay(1), std::chrono::seconds(2));
  EXPECT_EQ(p.Delay(2), std::chrono::seconds(6));
  EXPECT_EQ(p.Delay(3), std::chrono::seconds(10));
  EXPECT_TRUE(p.Retries(1));
  EXPECT_FALSE(p.Retries(0));
  p.exit_codes = {75};
  EXPECT_TRUE(p.Retries(75));
  EXPECT_FALSE(p.Retries(1));
}

TEST(Workflow, UnknownKeysGetDidYouMeanWithTheLine) {
  std::string e = Error("steps:\n  a:\n    run: [true]\n    neds: [b]\n");
  EXPECT_THAT(e, HasSubstr("/w/flow.yaml:4"));
  EXPECT_THAT(e, HasSubstr("did you mean 'steps.a.needs'"));
  EXPECT_THAT(Error("step: {}\n"), HasSubstr("did you mean 'steps'"));
  EXPECT_THAT(Error("steps: {a: {run: [true], resources: {gpu: 1}}}"),
              HasSubstr("did you mean 'steps.a.resources.gpus'"));
}

TEST(Workflow, CyclesNameTheStepsOnThem) {
  std::string e = Error(R"(
steps:
  a: {run: [true], needs: [c]}
  b: {run: [true], needs: [a]}
  c: {run: [true], needs: [b]}
  d: {run: [true]}
)");
  EXPECT_THAT(e, HasSubstr("cycle"));
  EXPECT_THAT(e, HasSubstr("a -> c -> b -> a"));
  EXPECT_THAT(Error("steps: {a: {run: [true], needs: [a]}}"), HasSubstr("needs itself"));
}

TEST(Workflow, UnknownNeedsAreNamed) {
  std::string e =
      Error("steps:\n  prepare: {run: [true]}\n  train: {run: [true], needs: [prepar]}\n");
  EXPECT_THAT(e, HasSubstr("step 'train' needs 'prepar', which is not a step"));
  EXPECT_THAT(e, HasSubstr("did you mean 'prepare'"));
  EXPECT_THAT(e, HasSubstr("/w/flow.yaml:3"));
}

TEST(Workflow, CommandsAreChecked) {
  EXPECT_THAT(Error("steps: {a: {needs: []}}"), HasSubstr("has no command"));
  EXPECT_THAT(Error("steps: {a: {run: [true], shell: x}}"), HasSubstr("both run: and shell:"));
  EXPECT_THAT(Error("steps: {a: {run: python3 train.py}}"), HasSubstr("use `shell:`"));
  EXPECT_THAT(Error("steps: {a: {run: []}}"), HasSubstr("empty command"));
  EXPECT_THAT(Error("steps: {a: {shell: '  '}}"), HasSubstr("empty command"));
  EXPECT_THAT(Error("steps: {}"), HasSubstr("no steps"));
  EXPECT_THAT(Error("name: demo"), HasSubstr("steps"));
  EXPECT_THAT(Error("steps: {'a b': {run: [true]}}"), HasSubstr("step name 'a b'"));
}

TEST(Workflow, ValuesAreChecked) {
  EXPECT_THAT(Error("steps: {a: {run: [true], timeout: soon}}"), HasSubstr("timeout"));
  EXPECT_THAT(Error("steps: {a: {run: [true], resources: {cpus: 0}}}"), HasSubstr("CPUs"));
  EXPECT_THAT(Error("steps: {a: {run: [true], resources: {gpus: -1}}}"), HasSubstr("GPUs"));
  EXPECT_THAT(Error("steps: {a: {run: [true], retries: {exit_codes: [0]}}}"),
              HasSubstr("exit code 1..255"));
  EXPECT_THAT(Error("steps: {a: {run: [true], retries: -1}}"), HasSubstr("0..100"));
  EXPECT_THAT(Error("steps: {a: {run: [true], env: [A]}}"), HasSubstr("NAME: value"));
  EXPECT_THAT(Error("steps: {a: {run: [true]\n"), HasSubstr("/w/flow.yaml"));  // YAML syntax
}

TEST(Workflow, FailureHandlers) {
  Result<Workflow> wf = Parse(R"(
on_failure: continue
steps:
  a: {run: [false], on_failure: cleanup}
  b: {run: [true]}
  cleanup: {run: [echo, cleaning], handler: true}
)");
  ASSERT_TRUE(wf.ok()) << wf.status().message();
  EXPECT_EQ(wf->steps.at("a").on_failure, FailureMode::kHandler);
  EXPECT_EQ(wf->steps.at("a").on_failure_handler, "cleanup");
  EXPECT_EQ(wf->steps.at("b").on_failure, FailureMode::kContinue);
  EXPECT_THAT(wf->order, ElementsAre("a", "b"));  // handlers are not part of the DAG
  EXPECT_THAT(Error("steps: {a: {run: [false], on_failure: nope}}"),
              HasSubstr("neither stop, continue nor a step with `handler: true`"));
  EXPECT_THAT(Error("steps: {a: {run: [false], on_failure: b}, b: {run: [true]}}"),
              HasSubstr("handler: true"));
  EXPECT_THAT(Error("steps: {a: {run: [true]}, h: {run: [true], handler: true, needs: [a]}}"),
              HasSubstr("cannot have needs"));
  EXPECT_THAT(Error("steps: {a: {run: [true], needs: [h]}, h: {run: [true], handler: true}}"),
              HasSubstr("a handler step"));
}

TEST(Workflow, DependentsAreTransitive) {
  Result<Workflow> wf = Parse(R"(
steps:
  a: {run: [true]}
  b: {run: [true], needs: [a]}
  c: {run: [true], needs: [b]}
  d: {run: [true]}
  e: {run: [true], needs: [d, c]}
)");
  ASSERT_TRUE(wf.ok()) << wf.status().message();
  EXPECT_THAT(Dependents(*wf, "a"), ElementsAre("b", "c", "e"));
  EXPECT_THAT(Dependents(*wf, "d"), ElementsAre("e"));
  EXPECT_TRUE(Dependents(*wf, "e").empty());
}

TEST(Workflow, MissingFileIsNotFound) {
  Result<Workflow> wf = LoadWorkflow("/nonexistent/workflow.yaml");
  ASSERT_FALSE(wf.ok());
  EXPECT_EQ(wf.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(wf.status().message(), HasSubstr("/nonexistent/workflow.yaml"));
}

}  // namespace
}  // namespace gantry::jobs
