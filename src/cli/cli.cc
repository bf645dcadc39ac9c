// The pieces every command shares: common flags and the one exit-code map.
#include "cli.h"

#include <iostream>

#include "gantry/core/log.h"

namespace gantry::cli {

void AddCommonFlags(CLI::App* cmd, CommonFlags* flags) {
  cmd->add_flag("--json", flags->json, "Machine-readable JSON on stdout instead of tables");
  cmd->add_option("--log-level", flags->log_level,
                  "trace, debug, info, warn, error or off (logs go to stderr)")
      ->capture_default_str();
}

bool ApplyCommonFlags(const CommonFlags& flags) {
  log::Init();
  Status s = log::SetLevel(flags.log_level);
  if (!s.ok()) {
    std::cerr << "gantry: " << s.message() << "\n";
    return false;
  }
  return true;
}

int ExitCode(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
      return kExitOk;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kPermissionDenied:
    case StatusCode::kResourceExhausted:
    case StatusCode::kUnimplemented:
      return kExitUsage;
    default:
      return kExitCheckFailed;
  }
}

int Fail(std::string_view command, const Status& s) {
  std::cerr << "gantry " << command << ": " << s.message() << "\n";
  return ExitCode(s);
}

void OneValuePerFlag(CLI::App* app) {
  for (CLI::Option* o : app->get_options()) {
    if (!o->get_positional() &&
        o->get_items_expected_max() >= CLI::detail::expected_max_vector_size / 16) {
      o->allow_extra_args(false);
    }
  }
  for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; })) OneValuePerFlag(sub);
}

}  // namespace gantry::cli
