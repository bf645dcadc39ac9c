// YAML configuration with errors that name the file, line and key at fault.
//
//   ASSIGN_OR_RETURN(Config cfg, Config::LoadFile("gantry.yaml"));
//   ASSIGN_OR_RETURN(int64_t ranks, cfg.GetInt("bench.ranks", 2));
//   ASSIGN_OR_RETURN(uint64_t max, cfg.GetSize("bench.max_bytes", 256 << 20));
//
// Keys are dotted paths into nested maps. A missing key returns the default; a
// present key with the wrong type is an error such as
//   "gantry.yaml:4:10: key 'bench.ranks': expected an integer, got 'two'".
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"

namespace gantry {

class Config {
 public:
  // Errors: NotFound for a missing file; InvalidArgument "file:line:col: ..." for
  // YAML syntax errors or a top level that is not a map.
  static Result<Config> LoadFile(const std::string& path);
  // `origin` names the text in messages (e.g. "<inline>").
  static Result<Config> LoadString(std::string_view yaml, std::string_view origin);

  Config(Config&&) noexcept;
  Config& operator=(Config&&) noexcept;
  ~Config();

  bool Has(std::string_view key) const;
  Result<std::string> GetString(std::string_view key, std::string fallback) const;
  Result<int64_t> GetInt(std::string_view key, int64_t fallback) const;
  Result<double> GetDouble(std::string_view key, double fallback) const;
  Result<bool> GetBool(std::string_view key, bool fallback) const;
  // Values like "64M" or 1048576 (see ParseSize).
  Result<uint64_t> GetSize(std::string_view key, uint64_t fallback) const;
  // Values like "30s" (see ParseDuration).
  Result<std::chrono::nanoseconds> GetDuration(std::string_view key,
                                               std::chrono::nanoseconds fallback) const;
  Result<std::vector<std::string>> GetStringList(std::string_view key) const;
  // Number of items of the list at `key` (0 when absent). A numeric part of a
  // key indexes a list: "routes.0.prefix".
  Result<size_t> ListSize(std::string_view key) const;
  // True when `key` holds a scalar (string, number, bool).
  bool IsScalar(std::string_view key) const;
  // "file:line:col: key 'k'" for messages about a value that parsed but is
  // wrong in context (an unknown backend name, a duplicate route).
  std::string Locate(std::string_view key) const;
  // Keys of the map at `key` ("" for the top level); error if it is not a map.
  Result<std::vector<std::string>> Keys(std::string_view key) const;
  // Keys present in the file under `prefix` that are not in `known`: for
  // "unknown key 'bench.rnaks' at gantry.yaml:3 (did you mean 'bench.ranks'?)".
  Status CheckKnownKeys(std::string_view prefix, const std::vector<std::string>& known) const;

  const std::string& origin() const;

 private:
  struct Impl;
  explicit Config(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gantry
