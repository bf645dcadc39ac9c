// YAML configuration with errors that name the file, line and key at fault.
// This is the one way Gantry reads (and writes) YAML: no other module uses
// yaml-cpp, and no yaml-cpp type appears in a public header.
//
//   ASSIGN_OR_RETURN(Config cfg, Config::LoadFile("gantry.yaml"));
//   ASSIGN_OR_RETURN(int64_t ranks, cfg.GetInt("bench.ranks", 2));
//   ASSIGN_OR_RETURN(uint64_t max, cfg.GetSize("bench.max_bytes", 256 << 20));
//
// Keys are dotted paths into nested maps; a numeric part indexes a list
// ("routes.0.prefix"). A missing key returns the default; a present key with
// the wrong type is an error such as
//   "gantry.yaml:4:10: key 'bench.ranks': expected an integer, got 'two'".
//
// Views and lists: Sub("alerts") is a Config of that sub-tree and Items("rules")
// one Config per list item. Keys read through a view are relative to it, but
// messages always name the full dotted key from the top of the file
// ("rules.yaml:9:16: key 'rules.3.window': ...").
//
// Overlays: Merge(overlay) lays one config over another and
// WithOverrides({{"bench.ranks", "8"}}, "--set") lays values given as text
// (flags) over a config. Every value keeps the file and line it came from, so
// an error about a value of the overlay names the overlay's file and line, and
// one about a value set by an override names the override ("--set: key
// 'bench.ranks': ..."). Config objects are immutable and cheap to copy (the
// tree is shared); views and overlays never change the config they come from.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"

namespace gantry {

// Where a key or value was written.
struct ConfigPosition {
  std::string origin;  // a file name, "<inline>", or an override's origin such as "--set"
  int line = 0;        // 1-based; 0 when unknown (a value from an override, an absent key)
  int column = 0;      // 1-based; 0 when unknown

  // "file:line:col", or the origin alone when the line is unknown.
  std::string ToString() const;
};

// A key present in a map but not among the expected names (see UnknownKeys).
struct UnknownKey {
  std::string key;                        // the full dotted key, "bench.rnaks"
  std::string name;                       // its last part, "rnaks"
  ConfigPosition position;                // where the key is written
  std::optional<std::string> suggestion;  // a known name within a typo of `name`
};

class Config {
 public:
  // Errors: NotFound for a missing file; InvalidArgument "file:line:col: ..." for
  // YAML syntax errors or a top level that is not a map. Also refused, naming
  // the place: duplicate keys in a map, keys that are not plain names, a second
  // document, nesting deeper than 64 levels and more than 100,000 nodes
  // (aliases expanding into themselves).
  static Result<Config> LoadFile(const std::string& path);
  // `origin` names the text in messages (e.g. "<inline>").
  static Result<Config> LoadString(std::string_view yaml, std::string_view origin);
  // As LoadString, but the document may be any YAML value: a list, a scalar or
  // nothing as well as a map. For formats whose top level may be a list (alert
  // rules); read it with the key "" (Items(""), IsScalar(""), ...).
  static Result<Config> LoadDocument(std::string_view yaml, std::string_view origin);
  // An empty map named `origin`: the base to lay overrides over when there is
  // no file.
  static Config Empty(std::string_view origin);

  Config(const Config&);
  Config& operator=(const Config&);
  Config(Config&&) noexcept;
  Config& operator=(Config&&) noexcept;
  ~Config();

  // ---- Reading. The key "" is this config's (or view's) own value.

  // True when `key` holds a value (a null such as "key:" holds none).
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
  // Number of items of the list at `key` (0 when absent).
  Result<size_t> ListSize(std::string_view key) const;
  // True when `key` holds a scalar (string, number, bool), a map, a list.
  bool IsScalar(std::string_view key) const;
  bool IsMap(std::string_view key) const;
  bool IsList(std::string_view key) const;
  // "file:line:col: key 'k'" for messages about a value that parsed but is
  // wrong in context (an unknown backend name, a duplicate route). The
  // position is the value's, or the key's when the value is null; an absent
  // key gives "origin: key 'k'".
  std::string Locate(std::string_view key) const;
  // Where the value at `key` is written (the key's position when the value is
  // null); for an absent key, origin() with line 0.
  ConfigPosition Position(std::string_view key) const;
  // Keys of the map at `key` in file order, null-valued ones included; empty
  // when absent; error if it is not a map.
  Result<std::vector<std::string>> Keys(std::string_view key) const;
  // Keys present in the map at `prefix` that are not in `known`, each with a
  // suggestion when one of `known` is a typo away. Error if `prefix` holds
  // something other than a map.
  Result<std::vector<UnknownKey>> UnknownKeys(std::string_view prefix,
                                              const std::vector<std::string>& known) const;
  // UnknownKeys as one error: "gantry.yaml:3:3: unknown key 'bench.rnaks'
  // (did you mean 'bench.ranks'?)", or the known names when none is close;
  // several unknown keys are joined with "; ".
  Status CheckKnownKeys(std::string_view prefix, const std::vector<std::string>& known) const;

  // ---- Views

  // The value at `key` as a Config of its own (same origin). An absent or
  // null key gives an empty view: Has("") is false and every getter returns
  // its fallback. Error: a scalar on the way ("bench: 4" holds no
  // "bench.ranks"), or a list on the way indexed by something not a number.
  Result<Config> Sub(std::string_view key) const;
  // One view per item of the list at `key` (keys "key.0", "key.1", ...);
  // empty when absent. Error: `key` holds something other than a list.
  Result<std::vector<Config>> Items(std::string_view key) const;
  // The full dotted key of this view ("" for a whole file).
  const std::string& prefix() const;

  // ---- Overlays. Each returns a new Config; this one is unchanged. Its
  // origin() is "BASE with OVERLAY" (OVERLAY alone when BASE's is empty).

  // `overlay` laid over this config, key by key:
  //   - where both hold a map, the maps merge recursively: keys of this
  //     config keep their order, keys only the overlay has follow in the
  //     overlay's order;
  //   - otherwise the overlay's value replaces this one: lists are replaced
  //     whole, never concatenated, and a scalar may replace a map or a list;
  //     a null in the overlay ("key:") clears the value, so getters return
  //     their fallback (the key stays, in Keys()).
  // Values keep their own positions, so messages about a value of the
  // overlay name the overlay's file and line.
  Config Merge(const Config& overlay) const;
  // `values` (dotted key -> text) laid over this config, as from command-line
  // flags. Each value becomes one scalar that the getters read as they would
  // the same text in a file ("8" is an integer, "yes" a bool, "64M" a size);
  // it is never parsed as YAML ("[a]" is a string, "null" the word null).
  // Messages about it name `origin` ("--set: key 'bench.ranks': expected an
  // integer, got 'eight'"). As in Merge, an override replaces whatever the
  // key held, and maps are created on the way (new keys follow the existing
  // ones, in `values`' order); a numeric part indexes an existing list item
  // ("routes.0.prefix"). InvalidArgument naming `origin`
  // and the key for an empty key or part ("a..b") and for a list on the way
  // indexed by something other than the number of one of its items.
  Result<Config> WithOverrides(const std::map<std::string, std::string>& values,
                               std::string_view origin) const;
  // This config with `key` set to `value` (its whole tree, positions kept),
  // maps created on the way. Errors as WithOverrides.
  Result<Config> With(std::string_view key, const Config& value) const;
  // This config without the map entry `key` (unchanged when absent). Error: a
  // scalar on the way, a list on the way indexed by something not a number,
  // or `key` naming a list item (removing one would renumber the others).
  Result<Config> Without(std::string_view key) const;

  // ---- Writing

  // This config (or view) as YAML text ending in a newline, in key order:
  // maps and lists written inline ({a: 1}, [x, y]) in their file stay inline,
  // scalars are quoted only where YAML needs it, an empty view is "{}".
  std::string ToYaml() const;

  const std::string& origin() const;

 private:
  struct Impl;
  explicit Config(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

// Writes YAML for generated files (e.g. Prometheus rules). Calls nest like the
// document:
//
//   YamlWriter w;
//   w.BeginMap().Key("groups").BeginList().BeginMap();
//   w.Key("name").Value("gantry-agent");
//   w.EndMap().EndList().EndMap();
//   ASSIGN_OR_RETURN(std::string text, w.Finish());
//
// Block style; scalars are quoted only where YAML needs it.
class YamlWriter {
 public:
  YamlWriter();
  ~YamlWriter();
  YamlWriter(const YamlWriter&) = delete;
  YamlWriter& operator=(const YamlWriter&) = delete;

  YamlWriter& BeginMap();
  YamlWriter& EndMap();
  YamlWriter& BeginList();
  YamlWriter& EndList();
  // A map key; the next call writes its value.
  YamlWriter& Key(std::string_view key);
  YamlWriter& Value(std::string_view value);
  // A value always written in double quotes (text with templates, "{{ $value }}").
  YamlWriter& QuotedValue(std::string_view value);
  // The text written so far (no trailing newline). Internal error naming the
  // mistake for calls that do not nest (a value without a key, an unclosed map).
  Result<std::string> Finish() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gantry
