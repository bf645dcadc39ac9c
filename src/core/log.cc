#include "gantry/core/log.h"

#include <fmt/format.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <array>
#include <memory>
#include <mutex>
#include <string>

namespace gantry::log {
namespace {

struct LevelName {
  std::string_view name;
  spdlog::level::level_enum level;
};
constexpr std::array<LevelName, 6> kLevels = {{{"trace", spdlog::level::trace},
                                               {"debug", spdlog::level::debug},
                                               {"info", spdlog::level::info},
                                               {"warn", spdlog::level::warn},
                                               {"error", spdlog::level::err},
                                               {"off", spdlog::level::off}}};

// spdlog's %l prints "warning"; Gantry's messages and --log-level use "warn".
class ShortLevelFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    static constexpr std::array<std::string_view, 7> kNames = {"trace", "debug",    "info", "warn",
                                                               "error", "critical", "off"};
    std::string_view name = kNames[static_cast<size_t>(msg.level) % kNames.size()];
    dest.append(name.data(), name.data() + name.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<ShortLevelFlag>();
  }
};

std::mutex g_mu;
std::shared_ptr<spdlog::logger> g_logger;  // guarded by g_mu

void ApplyPattern(int rank) {
  std::string rank_prefix = rank >= 0 ? fmt::format("[rank {}] ", rank) : "";
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<ShortLevelFlag>('*').set_pattern("[gantry] " + rank_prefix + "[%^%*%$] %v");
  g_logger->set_formatter(std::move(formatter));
}

}  // namespace

void Init() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_logger) return;
  // The color sink only colors when stderr is a terminal, so redirected logs stay plain.
  g_logger = std::make_shared<spdlog::logger>(
      "gantry", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  g_logger->set_level(spdlog::level::info);
  spdlog::set_default_logger(g_logger);
  ApplyPattern(-1);
}

void SetRank(int rank) {
  Init();
  std::lock_guard<std::mutex> lock(g_mu);
  ApplyPattern(rank);
}

Status SetLevel(std::string_view level) {
  Init();
  for (const LevelName& l : kLevels) {
    if (l.name == level) {
      spdlog::set_level(l.level);
      return Status::Ok();
    }
  }
  return InvalidArgument(fmt::format(
      "unknown log level '{}'; use one of trace, debug, info, warn, error, off", level));
}

}  // namespace gantry::log
