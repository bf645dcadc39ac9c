#include "gantry/core/config.h"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <functional>
#include <optional>
#include <set>
#include <sstream>

#include "gantry/core/json.h"
#include "gantry/core/units.h"

namespace gantry {
namespace {

// Configs are small and hand-written; these bounds only stop hostile input (deep
// nesting, aliases that refer to themselves) from exhausting the stack or the CPU.
constexpr int kMaxDepth = 64;
constexpr size_t kMaxNodes = 100'000;

std::string Where(const std::string& origin, const YAML::Mark& mark) {
  if (mark.is_null()) return origin;
  return fmt::format("{}:{}:{}", origin, mark.line + 1, mark.column + 1);
}

std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return fmt::format("'{}'", node.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    default:
      return "nothing";
  }
}

std::string Join(std::string_view prefix, std::string_view name) {
  return prefix.empty() ? std::string(name) : fmt::format("{}.{}", prefix, name);
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

// Optimal string alignment distance: Levenshtein plus adjacent transpositions,
// so the common typo "rnaks" is one edit from "ranks".
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// Checks the shape that lookups rely on: scalar keys, no duplicate keys (yaml-cpp
// keeps both and lookups would silently see only the first), bounded size.
Status Validate(const std::string& origin, const YAML::Node& node, const std::string& path,
                int depth, size_t* budget) {
  if (*budget == 0) {
    return InvalidArgument(fmt::format(
        "{}: more than {} YAML nodes; is an alias expanding into itself?", origin, kMaxNodes));
  }
  --*budget;
  if (depth > kMaxDepth) {
    return InvalidArgument(fmt::format("{}: key '{}': nested deeper than {} levels",
                                       Where(origin, node.Mark()), path, kMaxDepth));
  }
  if (node.IsSequence()) {
    size_t i = 0;
    for (const YAML::Node& item : node) {
      RETURN_IF_ERROR(Validate(origin, item, fmt::format("{}[{}]", path, i++), depth + 1, budget));
    }
  } else if (node.IsMap()) {
    std::set<std::string> seen;
    // Each entry is a value bound to `entry`; `it->first` would point into a
    // temporary proxy that dies at the end of the statement.
    for (const auto& entry : node) {
      const YAML::Node& key = entry.first;
      if (!key.IsScalar()) {
        return InvalidArgument(fmt::format("{}: key under '{}': expected a plain name, got {}",
                                           Where(origin, key.Mark()), path, Describe(key)));
      }
      std::string full = Join(path, key.Scalar());
      if (!seen.insert(key.Scalar()).second) {
        return InvalidArgument(
            fmt::format("{}: key '{}': appears twice; keep one", Where(origin, key.Mark()), full));
      }
      RETURN_IF_ERROR(Validate(origin, entry.second, full, depth + 1, budget));
    }
  }
  return Status::Ok();
}

// ParseSize and ParseDuration messages read "invalid size '<text>': <reason>"; the
// config message already quotes the value, so only the reason is kept.
template <typename T>
Result<T> ReasonOnly(Result<T> r, std::string_view kind, const std::string& text) {
  if (r.ok()) return r;
  std::string prefix = fmt::format("invalid {} '{}': ", kind, text);
  std::string msg = r.status().message();
  if (msg.starts_with(prefix)) msg.erase(0, prefix.size());
  return InvalidArgument(std::move(msg));
}

// Drives yaml-cpp's parser without building nodes, to find where a second
// document starts.
class DocumentStarts final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { last = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

  YAML::Mark last = YAML::Mark::null_mark();
};

// YAML::Load reads only the first document. YAML::LoadAll cannot be used: in
// yaml-cpp 0.7 it loops forever, allocating, on input like " ," (upstream issue
// jbeder/yaml-cpp#1040, fixed in PR #1319). Asking the parser for at most two
// documents terminates and also catches such stray text.
std::optional<YAML::Mark> SecondDocument(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts starts;
  if (!parser.HandleNextDocument(starts) || !parser.HandleNextDocument(starts)) {
    return std::nullopt;
  }
  return starts.last;
}

}  // namespace

struct Config::Impl {
  std::string origin;
  YAML::Node root;  // always a map

  std::string At(const YAML::Node& node) const { return Where(origin, node.Mark()); }

  Status TypeError(const YAML::Node& node, std::string_view key, std::string_view expected,
                   std::string_view why = {}) const {
    return InvalidArgument(fmt::format("{}: key '{}': expected {}, got {}{}", At(node), key,
                                       expected, Describe(node), why));
  }

  // The node at a dotted key ("" is the top level); nullopt when it (or a map on
  // the way) is absent or null. A non-map on the way is an error: "bench: 4"
  // cannot hold "bench.ranks".
  // Nodes are rebound with reset(), never operator=: yaml-cpp's assignment copies
  // into the node it refers to and would rewrite the tree.
  Result<std::optional<YAML::Node>> Find(std::string_view key) const {
    YAML::Node cur(root);
    if (key.empty()) return std::optional<YAML::Node>(cur);
    size_t start = 0;
    for (;;) {
      size_t dot = key.find('.', start);
      std::string_view part = key.substr(start, dot == key.npos ? key.npos : dot - start);
      std::optional<YAML::Node> next;
      if (cur.IsSequence()) {
        // A numeric part indexes a list: "routes.0.prefix".
        size_t index = 0;
        auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
        if (ec != std::errc() || end != part.data() + part.size()) {
          return TypeError(cur, key.substr(0, start - 1), "a map");
        }
        if (index >= cur.size()) return std::optional<YAML::Node>();
        next.emplace(cur[index]);
      } else {
        if (!cur.IsMap()) return TypeError(cur, key.substr(0, start - 1), "a map");
        for (const auto& entry : cur) {
          if (entry.first.Scalar() == part) {
            next.emplace(entry.second);
            break;
          }
        }
      }
      if (!next || next->IsNull()) return std::optional<YAML::Node>();
      cur.reset(*next);
      if (dot == key.npos) return std::optional<YAML::Node>(cur);
      start = dot + 1;
    }
  }

  // Looks up a scalar and converts it with `parse`, whose error message (empty
  // when the quoted value says it all) is appended to the type error.
  template <typename T>
  Result<T> Get(std::string_view key, T fallback, std::string_view expected,
                const std::function<Result<T>(const std::string&)>& parse) const {
    ASSIGN_OR_RETURN(std::optional<YAML::Node> node, Find(key));
    if (!node) return fallback;
    if (!node->IsScalar()) return TypeError(*node, key, expected);
    Result<T> value = parse(node->Scalar());
    if (value.ok()) return value;
    Status error = value.status();
    const std::string& why = error.message();
    return TypeError(*node, key, expected, why.empty() ? "" : fmt::format(" ({})", why));
  }
};

Config::Config(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Config::Config(Config&&) noexcept = default;
Config& Config::operator=(Config&&) noexcept = default;
Config::~Config() = default;

Result<Config> Config::LoadFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return LoadString(text, path);
}

Result<Config> Config::LoadString(std::string_view yaml, std::string_view origin) {
  auto impl = std::make_unique<Impl>();
  impl->origin = std::string(origin);
  std::string text(yaml);
  YAML::Node doc;
  std::optional<YAML::Mark> second;
  // yaml-cpp reports syntax errors by throwing; nothing may escape this module.
  try {
    doc.reset(YAML::Load(text));
    second = SecondDocument(text);
  } catch (const YAML::ParserException& e) {
    return InvalidArgument(fmt::format("{}: invalid YAML: {}", Where(impl->origin, e.mark), e.msg));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(fmt::format("{}: invalid YAML: {}", origin, e.what()));
  }
  if (second) {
    return InvalidArgument(fmt::format(
        "{}: a second YAML document (or stray text) starts here; put all settings in one",
        Where(impl->origin, *second)));
  }
  impl->root.reset(doc.IsNull() ? YAML::Node(YAML::NodeType::Map) : doc);
  if (!impl->root.IsMap()) {
    return InvalidArgument(fmt::format("{}: expected a map of settings at the top level, got {}",
                                       impl->At(impl->root), Describe(impl->root)));
  }
  size_t budget = kMaxNodes;
  RETURN_IF_ERROR(Validate(impl->origin, impl->root, "", 0, &budget));
  return Config(std::move(impl));
}

const std::string& Config::origin() const { return impl_->origin; }

bool Config::Has(std::string_view key) const {
  Result<std::optional<YAML::Node>> node = impl_->Find(key);
  return node.ok() && node->has_value();
}

Result<std::string> Config::GetString(std::string_view key, std::string fallback) const {
  return impl_->Get<std::string>(key, std::move(fallback), "a string",
                                 [](const std::string& s) -> Result<std::string> { return s; });
}

Result<int64_t> Config::GetInt(std::string_view key, int64_t fallback) const {
  return impl_->Get<int64_t>(key, fallback, "an integer",
                             [](const std::string& s) -> Result<int64_t> {
                               Result<int64_t> v = ParseInt("", s);
                               return v.ok() ? v : InvalidArgument("");  // "got 'x'" says it
                             });
}

Result<double> Config::GetDouble(std::string_view key, double fallback) const {
  return impl_->Get<double>(key, fallback, "a number", [](const std::string& s) -> Result<double> {
    double v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) {
      return InvalidArgument("");
    }
    return v;
  });
}

Result<bool> Config::GetBool(std::string_view key, bool fallback) const {
  return impl_->Get<bool>(key, fallback, "true or false", [](const std::string& s) -> Result<bool> {
    for (std::string_view t : {"true", "yes", "on"}) {
      if (EqualsIgnoreCase(s, t)) return true;
    }
    for (std::string_view f : {"false", "no", "off"}) {
      if (EqualsIgnoreCase(s, f)) return false;
    }
    return InvalidArgument("");
  });
}

Result<uint64_t> Config::GetSize(std::string_view key, uint64_t fallback) const {
  return impl_->Get<uint64_t>(
      key, fallback, "a size such as 64M or 1048576",
      [](const std::string& s) -> Result<uint64_t> { return ReasonOnly(ParseSize(s), "size", s); });
}

Result<std::chrono::nanoseconds> Config::GetDuration(std::string_view key,
                                                     std::chrono::nanoseconds fallback) const {
  return impl_->Get<std::chrono::nanoseconds>(
      key, fallback, "a duration such as 30s or 250ms",
      [](const std::string& s) -> Result<std::chrono::nanoseconds> {
        return ReasonOnly(ParseDuration(s), "duration", s);
      });
}

Result<std::vector<std::string>> Config::GetStringList(std::string_view key) const {
  ASSIGN_OR_RETURN(std::optional<YAML::Node> node, impl_->Find(key));
  std::vector<std::string> out;
  if (!node) return out;
  if (!node->IsSequence()) return impl_->TypeError(*node, key, "a list of strings");
  for (const YAML::Node& item : *node) {
    if (!item.IsScalar()) {
      return impl_->TypeError(item, fmt::format("{}[{}]", key, out.size()), "a string");
    }
    out.push_back(item.Scalar());
  }
  return out;
}

Result<size_t> Config::ListSize(std::string_view key) const {
  ASSIGN_OR_RETURN(std::optional<YAML::Node> node, impl_->Find(key));
  if (!node) return size_t{0};
  if (!node->IsSequence()) return impl_->TypeError(*node, key, "a list");
  return node->size();
}

bool Config::IsScalar(std::string_view key) const {
  Result<std::optional<YAML::Node>> node = impl_->Find(key);
  return node.ok() && node->has_value() && (*node)->IsScalar();
}

std::string Config::Locate(std::string_view key) const {
  Result<std::optional<YAML::Node>> node = impl_->Find(key);
  if (!node.ok() || !node->has_value()) return fmt::format("{}: key '{}'", impl_->origin, key);
  return fmt::format("{}: key '{}'", impl_->At(**node), key);
}

Result<std::vector<std::string>> Config::Keys(std::string_view key) const {
  ASSIGN_OR_RETURN(std::optional<YAML::Node> node, impl_->Find(key));
  std::vector<std::string> out;
  if (!node) return out;
  if (!node->IsMap()) return impl_->TypeError(*node, key, "a map");
  for (const auto& entry : *node) out.push_back(entry.first.Scalar());
  return out;
}

Status Config::CheckKnownKeys(std::string_view prefix,
                              const std::vector<std::string>& known) const {
  ASSIGN_OR_RETURN(std::optional<YAML::Node> node, impl_->Find(prefix));
  if (!node) return Status::Ok();
  if (!node->IsMap()) return impl_->TypeError(*node, prefix, "a map");
  std::string errors;
  for (const auto& entry : *node) {
    const std::string& name = entry.first.Scalar();
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    const std::string* best = nullptr;
    size_t best_distance = std::max<size_t>(1, (name.size() + 2) / 3) + 1;
    for (const std::string& k : known) {
      size_t d = EditDistance(name, k);
      if (d < best_distance) {
        best = &k;
        best_distance = d;
      }
    }
    if (!errors.empty()) errors += "; ";
    errors += fmt::format("{}: unknown key '{}'", impl_->At(entry.first), Join(prefix, name));
    if (best) {
      errors += fmt::format(" (did you mean '{}'?)", Join(prefix, *best));
    } else if (!known.empty()) {
      errors += fmt::format(" (known keys under '{}': {})", prefix.empty() ? "<top level>" : prefix,
                            fmt::join(known, ", "));
    }
  }
  if (errors.empty()) return Status::Ok();
  return InvalidArgument(std::move(errors));
}

}  // namespace gantry
