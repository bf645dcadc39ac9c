// The command actuator: for anything the others do not cover (a cloud CLI, a
// cluster API). `read` prints the count; `scale` is run with the count wanted.
#include <fmt/format.h>

#include "gantry/autoscale/actuator.h"
#include "gantry/core/subprocess.h"
#include "gantry/core/text.h"

namespace gantry::autoscale {
namespace {

std::vector<std::string> Substitute(std::vector<std::string> argv, int64_t desired,
                                    const std::vector<std::string>& victims) {
  for (std::string& a : argv) {
    for (auto [key, value] :
         {std::pair<std::string_view, std::string>{"{desired}", std::to_string(desired)},
          {"{victims}", Join(victims, ",")}}) {
      for (size_t at = a.find(key); at != std::string::npos; at = a.find(key, at + value.size())) {
        a.replace(at, key.size(), value);
      }
    }
  }
  return argv;
}

class CommandActuator : public Actuator {
 public:
  explicit CommandActuator(CommandActuatorConfig c) : c_(std::move(c)) {}
  std::string_view kind() const override { return "command"; }
  bool CanChooseVictims() const override { return false; }

  Result<Capacity> Read() override {
    ASSIGN_OR_RETURN(SubprocessResult r, RunSubprocess(c_.read, c_.timeout));
    if (r.exit_code != 0) {
      return Unavailable(fmt::format("actuator command {}: exit {}: {}", c_.read[0], r.exit_code,
                                     TrimSpace(r.err.substr(0, 300))));
    }
    std::string_view out = TrimSpace(r.out);
    std::string_view first = out.substr(0, out.find_first_of(" \t\r\n"));
    int64_t n = 0;
    if (!ParseNumber(first, &n) || n < 0) {
      return Unavailable(
          fmt::format("actuator command {}: printed '{}'; it must print the current count first",
                      c_.read[0], first.substr(0, 60)));
    }
    // An optional second number is the ready count ("3 2": 3 asked for, 2 up).
    Capacity cap{.target = n, .ready = n};
    std::string_view rest = TrimSpace(out.substr(first.size()));
    int64_t ready = 0;
    if (!rest.empty() && ParseNumber(rest.substr(0, rest.find_first_of(" \t\r\n")), &ready)) {
      cap.ready = ready;
    }
    return cap;
  }

  Status ScaleOut(int64_t desired) override { return Run(desired, {}); }
  Status ScaleIn(int64_t desired, const std::vector<std::string>& victims) override {
    return Run(desired, victims);
  }

 private:
  Status Run(int64_t desired, const std::vector<std::string>& victims) {
    std::vector<std::string> argv = Substitute(c_.scale, desired, victims);
    ASSIGN_OR_RETURN(SubprocessResult r, RunSubprocess(argv, c_.timeout));
    if (r.exit_code != 0) {
      return Unavailable(fmt::format("actuator command {} (desired {}): exit {}: {}", argv[0],
                                     desired, r.exit_code, TrimSpace(r.err.substr(0, 300))));
    }
    return Status::Ok();
  }

  CommandActuatorConfig c_;
};

}  // namespace

Result<std::unique_ptr<Actuator>> NewCommandActuator(const CommandActuatorConfig& config) {
  if (config.read.empty() || config.scale.empty()) {
    return InvalidArgument("the command actuator needs read: [...] and scale: [...]");
  }
  return std::unique_ptr<Actuator>(new CommandActuator(config));
}

}  // namespace gantry::autoscale
