// OneValuePerFlag (cli.h): a repeatable flag takes one value per occurrence and
// never swallows the positionals after it. The tour found `gantry backup create
// --tag tour=1 DIR...` refused with "dirs is required".
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cli.h"

namespace gantry::cli {
namespace {

std::vector<std::string> Results(CLI::App* cmd, const std::string& name) {
  return cmd->get_option(name)->results();
}

void Parse(CLI::App& app, std::vector<std::string> args) {
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  app.parse(args);
}

TEST(OneValuePerFlag, RepeatableFlagsLeaveThePositionalsAlone) {
  CLI::App app{"t", "gantry"};
  Action action;
  RegisterBackup(app, &action);
  OneValuePerFlag(&app);
  CLI::App* create = app.get_subcommand("backup")->get_subcommand("create");
  ASSERT_NO_THROW(Parse(app, {"backup", "create", "--repo", "/r", "--tag", "run=1", "--exclude",
                              "*.tmp", "--tag", "team=ml", "/data/models", "/data/ckpt"}));
  EXPECT_EQ(Results(create, "--tag"), (std::vector<std::string>{"run=1", "team=ml"}));
  EXPECT_EQ(Results(create, "--exclude"), (std::vector<std::string>{"*.tmp"}));
  EXPECT_EQ(Results(create, "dirs"), (std::vector<std::string>{"/data/models", "/data/ckpt"}));
}

TEST(OneValuePerFlag, WithoutItTheTagTookTheDirectories) {
  // The CLI11 default this guards against, so the test above cannot pass by
  // accident: the tag swallows every directory but the last one a required
  // positional needs, or all of them when another flag follows.
  CLI::App app{"t", "gantry"};
  Action action;
  RegisterBackup(app, &action);
  CLI::App* create = app.get_subcommand("backup")->get_subcommand("create");
  ASSERT_NO_THROW(Parse(
      app, {"backup", "create", "--repo", "/r", "--tag", "run=1", "/data/models", "/data/ckpt"}));
  EXPECT_EQ(Results(create, "--tag"), (std::vector<std::string>{"run=1", "/data/models"}));
  EXPECT_EQ(Results(create, "dirs"), (std::vector<std::string>{"/data/ckpt"}));
  CLI::App again{"t", "gantry"};
  RegisterBackup(again, &action);
  EXPECT_THROW(Parse(again, {"backup", "create", "--repo", "/r", "--tag", "run=1", "/data/models",
                             "/data/ckpt", "--json"}),
               CLI::ParseError);
}

}  // namespace
}  // namespace gantry::cli
