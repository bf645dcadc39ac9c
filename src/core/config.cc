// YAML configuration (see gantry/core/config.h). yaml-cpp is used here and
// nowhere else: a loaded document is checked and copied once into an
// immutable tree of Nodes that remember where they were written, and every
// lookup, view, merge and override works on that tree. Trees are shared
// between configs (views, overlays), never changed after they are built.
#include "gantry/core/config.h"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <functional>
#include <set>
#include <sstream>

#include "gantry/core/json.h"
#include "gantry/core/text.h"
#include "gantry/core/units.h"

namespace gantry {
namespace {

// Configs are small and hand-written; these bounds only stop hostile input (deep
// nesting, aliases that refer to themselves) from exhausting the stack or the CPU.
constexpr int kMaxDepth = 64;
constexpr size_t kMaxNodes = 100'000;

using Origin = std::shared_ptr<const std::string>;

// Where a key or value was written: yaml-cpp's 0-based line and column, -1
// when unknown (a value from an override).
struct Mark {
  Origin origin;
  int line = -1;
  int column = -1;
};

std::string Where(const Mark& m) {
  if (m.line < 0) return *m.origin;
  return fmt::format("{}:{}:{}", *m.origin, m.line + 1, m.column + 1);
}

ConfigPosition PositionOf(const Mark& m) {
  ConfigPosition p;
  p.origin = *m.origin;
  if (m.line >= 0) {
    p.line = m.line + 1;
    p.column = m.column + 1;
  }
  return p;
}

struct Node;
using NodePtr = std::shared_ptr<const Node>;

struct Entry {
  std::string name;
  Mark key_mark;
  NodePtr value;  // never null: a YAML null is a Node of kind kNull
};

struct Node {
  enum class Kind { kNull, kScalar, kList, kMap };
  Kind kind = Kind::kNull;
  std::string scalar;
  std::vector<NodePtr> items;  // kList
  std::vector<Entry> entries;  // kMap, in file order, names unique
  Mark mark;
  bool flow = false;  // a map or list written inline ({a: 1}, [x, y])

  const Entry* Find(std::string_view name) const {
    for (const Entry& e : entries) {
      if (e.name == name) return &e;
    }
    return nullptr;
  }
  bool IsNull() const { return kind == Kind::kNull; }
};

std::string Describe(const Node& node) {
  switch (node.kind) {
    case Node::Kind::kScalar:
      return fmt::format("'{}'", node.scalar);
    case Node::Kind::kList:
      return "a list";
    case Node::Kind::kMap:
      return "a map";
    case Node::Kind::kNull:
      break;
  }
  return "nothing";
}

std::string DescribeYaml(const YAML::Node& node) {
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

// "a.b" + "c" -> "a.b.c"; either side may be empty.
std::string Dotted(std::string_view prefix, std::string_view key) {
  if (prefix.empty()) return std::string(key);
  if (key.empty()) return std::string(prefix);
  return fmt::format("{}.{}", prefix, key);
}

std::vector<std::string_view> SplitKey(std::string_view key) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (;;) {
    size_t dot = key.find('.', start);
    parts.push_back(key.substr(start, dot == key.npos ? key.npos : dot - start));
    if (dot == key.npos) return parts;
    start = dot + 1;
  }
}

std::string JoinParts(const std::vector<std::string_view>& parts, size_t n) {
  std::string out;
  for (size_t i = 0; i < n && i < parts.size(); ++i) {
    if (i > 0) out += '.';
    out += parts[i];
  }
  return out;
}

std::optional<size_t> ListIndex(std::string_view part) {
  size_t index = 0;
  auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
  if (part.empty() || ec != std::errc() || end != part.data() + part.size()) return std::nullopt;
  return index;
}

// Copies a yaml-cpp document into Nodes, checking the shape that lookups rely
// on: scalar keys, no duplicate keys (yaml-cpp keeps both and lookups would
// silently see only the first), bounded depth and size. Aliases are expanded
// (each use counts against the size bound).
class Converter {
 public:
  explicit Converter(Origin origin) : origin_(std::move(origin)) {}

  Mark MarkOf(const YAML::Mark& m) const {
    Mark out{origin_};
    if (!m.is_null()) {
      out.line = m.line;
      out.column = m.column;
    }
    return out;
  }

  Result<NodePtr> Convert(const YAML::Node& y, const std::string& path, int depth) {
    if (budget_ == 0) {
      return InvalidArgument(fmt::format(
          "{}: more than {} YAML nodes; is an alias expanding into itself?", *origin_, kMaxNodes));
    }
    --budget_;
    if (depth > kMaxDepth) {
      return InvalidArgument(fmt::format("{}: key '{}': nested deeper than {} levels",
                                         Where(MarkOf(y.Mark())), path, kMaxDepth));
    }
    auto node = std::make_shared<Node>();
    node->mark = MarkOf(y.Mark());
    if (y.IsScalar()) {
      node->kind = Node::Kind::kScalar;
      node->scalar = y.Scalar();
    } else if (y.IsSequence()) {
      node->kind = Node::Kind::kList;
      node->flow = y.Style() == YAML::EmitterStyle::Flow;
      size_t i = 0;
      for (const YAML::Node& item : y) {
        ASSIGN_OR_RETURN(NodePtr child, Convert(item, fmt::format("{}[{}]", path, i++), depth + 1));
        node->items.push_back(std::move(child));
      }
    } else if (y.IsMap()) {
      node->kind = Node::Kind::kMap;
      node->flow = y.Style() == YAML::EmitterStyle::Flow;
      std::set<std::string> seen;
      // Each entry is a value bound to `entry`; `it->first` would point into a
      // temporary proxy that dies at the end of the statement.
      for (const auto& entry : y) {
        const YAML::Node& key = entry.first;
        if (!key.IsScalar()) {
          return InvalidArgument(fmt::format("{}: key under '{}': expected a plain name, got {}",
                                             Where(MarkOf(key.Mark())), path, DescribeYaml(key)));
        }
        std::string full = Dotted(path, key.Scalar());
        if (!seen.insert(key.Scalar()).second) {
          return InvalidArgument(fmt::format("{}: key '{}': appears twice; keep one",
                                             Where(MarkOf(key.Mark())), full));
        }
        ASSIGN_OR_RETURN(NodePtr value, Convert(entry.second, full, depth + 1));
        node->entries.push_back(Entry{key.Scalar(), MarkOf(key.Mark()), std::move(value)});
      }
    }
    return NodePtr(std::move(node));
  }

 private:
  Origin origin_;
  size_t budget_ = kMaxNodes;
};

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

// Parses one YAML document into Nodes; with `require_map`, the top level must
// be a map (an empty document is an empty map).
Result<NodePtr> ParseDocument(std::string_view yaml, const Origin& origin, bool require_map) {
  Converter converter(origin);
  std::string text(yaml);
  YAML::Node doc;
  std::optional<YAML::Mark> second;
  // yaml-cpp reports syntax errors by throwing; nothing may escape this module.
  try {
    doc.reset(YAML::Load(text));
    second = SecondDocument(text);
  } catch (const YAML::ParserException& e) {
    // yaml-cpp often notices a mistake a little after it (an unclosed bracket
    // is reported where the text ends), hence "at or before".
    return InvalidArgument(
        fmt::format("{}: invalid YAML: {}; fix the YAML syntax error at or before this position",
                    Where(converter.MarkOf(e.mark)), e.msg));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(fmt::format("{}: invalid YAML: {}", *origin, e.what()));
  }
  if (second) {
    return InvalidArgument(fmt::format(
        "{}: a second YAML document (or stray text) starts here; put all settings in one",
        Where(converter.MarkOf(*second))));
  }
  if (require_map) {
    if (doc.IsNull()) {
      auto empty = std::make_shared<Node>();
      empty->kind = Node::Kind::kMap;
      empty->mark = converter.MarkOf(doc.Mark());
      return NodePtr(std::move(empty));
    }
    if (!doc.IsMap()) {
      return InvalidArgument(fmt::format("{}: expected a map of settings at the top level, got {}",
                                         Where(converter.MarkOf(doc.Mark())), DescribeYaml(doc)));
    }
  }
  return converter.Convert(doc, "", 0);
}

// A node found by a lookup, with the position of the map key that holds it.
struct Found {
  NodePtr node;  // null: absent; may be a YAML null
  std::optional<Mark> key_mark;

  // The value's position; the key's when the value is null or has none.
  const Mark* PositionMark() const {
    if (!node) return key_mark && key_mark->line >= 0 ? &*key_mark : nullptr;
    if ((node->IsNull() || node->mark.line < 0) && key_mark && key_mark->line >= 0) {
      return &*key_mark;
    }
    return &node->mark;
  }
};

std::string MergedOrigin(const std::string& base, std::string_view overlay) {
  if (base.empty()) return std::string(overlay);
  if (overlay.empty()) return base;
  return fmt::format("{} with {}", base, overlay);
}

NodePtr MergeNodes(const NodePtr& base, const NodePtr& overlay) {
  if (!overlay) return base;
  if (!base || base->kind != Node::Kind::kMap || overlay->kind != Node::Kind::kMap) {
    return overlay;
  }
  auto out = std::make_shared<Node>();
  out->kind = Node::Kind::kMap;
  out->mark = overlay->mark;
  out->flow = overlay->flow;  // {a: 1} in the overlay stays on one line in ToYaml
  for (const Entry& e : base->entries) {
    if (const Entry* o = overlay->Find(e.name)) {
      out->entries.push_back(Entry{e.name, o->key_mark, MergeNodes(e.value, o->value)});
    } else {
      out->entries.push_back(e);
    }
  }
  for (const Entry& o : overlay->entries) {
    if (base->Find(o.name) == nullptr) out->entries.push_back(o);
  }
  return out;
}

void Emit(YAML::Emitter& out, const Node* node) {
  if (node == nullptr || node->IsNull()) {
    out << YAML::Null;
    return;
  }
  switch (node->kind) {
    case Node::Kind::kScalar:
      out << node->scalar;
      return;
    case Node::Kind::kList:
      if (node->flow) out << YAML::Flow;
      out << YAML::BeginSeq;
      for (const NodePtr& item : node->items) Emit(out, item.get());
      out << YAML::EndSeq;
      return;
    case Node::Kind::kMap:
      if (node->flow) out << YAML::Flow;
      out << YAML::BeginMap;
      for (const Entry& e : node->entries) {
        out << YAML::Key << e.name << YAML::Value;
        Emit(out, e.value.get());
      }
      out << YAML::EndMap;
      return;
    case Node::Kind::kNull:
      return;
  }
}

}  // namespace

std::string ConfigPosition::ToString() const {
  if (line <= 0) return origin;
  return fmt::format("{}:{}:{}", origin, line, column);
}

struct Config::Impl {
  std::string origin;
  std::string prefix;                 // the full dotted key of `root`
  NodePtr root;                       // null: nothing there (a view of an absent key)
  std::optional<Mark> root_key_mark;  // the map key holding `root`, for views
  Origin origin_ptr;                  // `origin`, shared with nodes made from overrides

  std::string Full(std::string_view key) const { return Dotted(prefix, key); }

  Status TypeError(const Node& node, std::string_view full_key, std::string_view expected,
                   std::string_view why = {}) const {
    return InvalidArgument(fmt::format("{}: key '{}': expected {}, got {}{}", Where(node.mark),
                                       full_key, expected, Describe(node), why));
  }

  // The node at a dotted key relative to `root` ("" is `root` itself). Absent
  // (node null) when it, or a map on the way, is missing or null. A scalar on
  // the way is an error: "bench: 4" cannot hold "bench.ranks".
  Result<Found> Lookup(std::string_view key) const {
    Found found;
    found.node = root;
    found.key_mark = root_key_mark;
    if (!root || key.empty()) return found;
    std::vector<std::string_view> parts = SplitKey(key);
    for (size_t i = 0; i < parts.size(); ++i) {
      const NodePtr cur = found.node;
      if (cur->IsNull()) return Found{};
      std::string_view part = parts[i];
      if (cur->kind == Node::Kind::kList) {
        // A numeric part indexes a list: "routes.0.prefix".
        std::optional<size_t> index = ListIndex(part);
        if (!index) return TypeError(*cur, Full(JoinParts(parts, i)), "a map");
        if (*index >= cur->items.size()) return Found{};
        found.node = cur->items[*index];
        found.key_mark.reset();
      } else if (cur->kind == Node::Kind::kMap) {
        const Entry* e = cur->Find(part);
        if (e == nullptr) return Found{};
        found.node = e->value;
        found.key_mark = e->key_mark;
      } else {
        return TypeError(*cur, Full(JoinParts(parts, i)), "a map");
      }
    }
    return found;
  }

  // The node at `key`; null when absent or a YAML null.
  Result<NodePtr> Find(std::string_view key) const {
    ASSIGN_OR_RETURN(Found f, Lookup(key));
    if (!f.node || f.node->IsNull()) return NodePtr();
    return f.node;
  }

  // Looks up a scalar and converts it with `parse`, whose error message (empty
  // when the quoted value says it all) is appended to the type error.
  template <typename T>
  Result<T> Get(std::string_view key, T fallback, std::string_view expected,
                const std::function<Result<T>(const std::string&)>& parse) const {
    ASSIGN_OR_RETURN(NodePtr node, Find(key));
    if (!node) return fallback;
    if (node->kind != Node::Kind::kScalar) return TypeError(*node, Full(key), expected);
    Result<T> value = parse(node->scalar);
    if (value.ok()) return value;
    Status error = value.status();
    const std::string& why = error.message();
    return TypeError(*node, Full(key), expected, why.empty() ? "" : fmt::format(" ({})", why));
  }

  // A copy of `node` with `value` at parts[i...]; see Config::With.
  // `new_mark` is the position of maps made on the way; with `rekey`, also of
  // the key that gets the value (an override owns its key, With a tree not).
  Result<NodePtr> SetAt(const NodePtr& node, const std::vector<std::string_view>& parts, size_t i,
                        const NodePtr& value, const Mark& new_mark, std::string_view what,
                        bool rekey) const {
    if (i == parts.size()) return value;
    std::string_view part = parts[i];
    if (node && node->kind == Node::Kind::kList) {
      std::optional<size_t> index = ListIndex(part);
      size_t n = node->items.size();
      if (!index || *index >= n) {
        return InvalidArgument(fmt::format(
            "{}: key '{}': '{}' is a list of {} item{} ({}); {}", what,
            Full(JoinParts(parts, parts.size())), Full(JoinParts(parts, i)), n, n == 1 ? "" : "s",
            Where(node->mark),
            n == 0 ? "it has no item to set" : fmt::format("index it with 0 to {}", n - 1)));
      }
      auto copy = std::make_shared<Node>(*node);
      ASSIGN_OR_RETURN(copy->items[*index],
                       SetAt(node->items[*index], parts, i + 1, value, new_mark, what, rekey));
      return NodePtr(std::move(copy));
    }
    std::shared_ptr<Node> copy;
    if (node && node->kind == Node::Kind::kMap) {
      copy = std::make_shared<Node>(*node);
    } else {
      // Absent, null or a scalar: the new value wins, as in Merge.
      copy = std::make_shared<Node>();
      copy->kind = Node::Kind::kMap;
      copy->mark = new_mark;
    }
    for (Entry& e : copy->entries) {
      if (e.name == part) {
        ASSIGN_OR_RETURN(e.value, SetAt(e.value, parts, i + 1, value, new_mark, what, rekey));
        if (rekey && i + 1 == parts.size()) e.key_mark = new_mark;
        return NodePtr(std::move(copy));
      }
    }
    ASSIGN_OR_RETURN(NodePtr child, SetAt(nullptr, parts, i + 1, value, new_mark, what, rekey));
    copy->entries.push_back(Entry{std::string(part), new_mark, std::move(child)});
    return NodePtr(std::move(copy));
  }

  Result<std::vector<std::string_view>> CheckedParts(std::string_view key,
                                                     std::string_view what) const {
    std::vector<std::string_view> parts = SplitKey(key);
    for (std::string_view p : parts) {
      if (p.empty()) {
        return InvalidArgument(fmt::format(
            "{}: key '{}': a dotted key needs a name between dots, e.g. a.b.c", what, key));
      }
    }
    return parts;
  }

  std::shared_ptr<Impl> Derive(NodePtr new_root, std::string new_origin) const {
    auto impl = std::make_shared<Impl>(*this);
    impl->root = std::move(new_root);
    if (new_origin != origin) {
      impl->origin = std::move(new_origin);
      impl->origin_ptr = std::make_shared<const std::string>(impl->origin);
    }
    return impl;
  }
};

Config::Config(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
Config::Config(const Config&) = default;
Config& Config::operator=(const Config&) = default;
Config::Config(Config&&) noexcept = default;
Config& Config::operator=(Config&&) noexcept = default;
Config::~Config() = default;

Result<Config> Config::LoadFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return LoadString(text, path);
}

Result<Config> Config::LoadString(std::string_view yaml, std::string_view origin) {
  auto impl = std::make_shared<Impl>();
  impl->origin = std::string(origin);
  impl->origin_ptr = std::make_shared<const std::string>(impl->origin);
  ASSIGN_OR_RETURN(impl->root, ParseDocument(yaml, impl->origin_ptr, /*require_map=*/true));
  return Config(std::move(impl));
}

Result<Config> Config::LoadDocument(std::string_view yaml, std::string_view origin) {
  auto impl = std::make_shared<Impl>();
  impl->origin = std::string(origin);
  impl->origin_ptr = std::make_shared<const std::string>(impl->origin);
  ASSIGN_OR_RETURN(impl->root, ParseDocument(yaml, impl->origin_ptr, /*require_map=*/false));
  return Config(std::move(impl));
}

Config Config::Empty(std::string_view origin) {
  auto impl = std::make_shared<Impl>();
  impl->origin = std::string(origin);
  impl->origin_ptr = std::make_shared<const std::string>(impl->origin);
  auto root = std::make_shared<Node>();
  root->kind = Node::Kind::kMap;
  root->mark.origin = impl->origin_ptr;
  impl->root = std::move(root);
  return Config(std::move(impl));
}

const std::string& Config::origin() const { return impl_->origin; }
const std::string& Config::prefix() const { return impl_->prefix; }

bool Config::Has(std::string_view key) const {
  Result<NodePtr> node = impl_->Find(key);
  return node.ok() && *node != nullptr;
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
    if (!ParseNumber(s, &v)) return InvalidArgument("");
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
  ASSIGN_OR_RETURN(NodePtr node, impl_->Find(key));
  std::vector<std::string> out;
  if (!node) return out;
  if (node->kind != Node::Kind::kList) {
    return impl_->TypeError(*node, impl_->Full(key), "a list of strings");
  }
  for (const NodePtr& item : node->items) {
    if (item->kind != Node::Kind::kScalar) {
      return impl_->TypeError(*item, fmt::format("{}[{}]", impl_->Full(key), out.size()),
                              "a string");
    }
    out.push_back(item->scalar);
  }
  return out;
}

Result<size_t> Config::ListSize(std::string_view key) const {
  ASSIGN_OR_RETURN(NodePtr node, impl_->Find(key));
  if (!node) return size_t{0};
  if (node->kind != Node::Kind::kList) return impl_->TypeError(*node, impl_->Full(key), "a list");
  return node->items.size();
}

bool Config::IsScalar(std::string_view key) const {
  Result<NodePtr> node = impl_->Find(key);
  return node.ok() && *node != nullptr && (*node)->kind == Node::Kind::kScalar;
}

bool Config::IsMap(std::string_view key) const {
  Result<NodePtr> node = impl_->Find(key);
  return node.ok() && *node != nullptr && (*node)->kind == Node::Kind::kMap;
}

bool Config::IsList(std::string_view key) const {
  Result<NodePtr> node = impl_->Find(key);
  return node.ok() && *node != nullptr && (*node)->kind == Node::Kind::kList;
}

std::string Config::Locate(std::string_view key) const {
  return fmt::format("{}: key '{}'", Position(key).ToString(), impl_->Full(key));
}

ConfigPosition Config::Position(std::string_view key) const {
  Result<Found> found = impl_->Lookup(key);
  const Mark* mark = found.ok() ? found->PositionMark() : nullptr;
  if (mark == nullptr) return ConfigPosition{impl_->origin, 0, 0};
  return PositionOf(*mark);
}

Result<std::vector<std::string>> Config::Keys(std::string_view key) const {
  ASSIGN_OR_RETURN(NodePtr node, impl_->Find(key));
  std::vector<std::string> out;
  if (!node) return out;
  if (node->kind != Node::Kind::kMap) return impl_->TypeError(*node, impl_->Full(key), "a map");
  for (const Entry& e : node->entries) out.push_back(e.name);
  return out;
}

Result<std::vector<UnknownKey>> Config::UnknownKeys(std::string_view prefix,
                                                    const std::vector<std::string>& known) const {
  ASSIGN_OR_RETURN(NodePtr node, impl_->Find(prefix));
  std::vector<UnknownKey> out;
  if (!node) return out;
  if (node->kind != Node::Kind::kMap) return impl_->TypeError(*node, impl_->Full(prefix), "a map");
  for (const Entry& e : node->entries) {
    if (std::find(known.begin(), known.end(), e.name) != known.end()) continue;
    UnknownKey u;
    u.key = impl_->Full(Dotted(prefix, e.name));
    u.name = e.name;
    u.position = PositionOf(e.key_mark);
    // About a third of the name may be wrong and it is still a typo.
    u.suggestion = ClosestMatch(e.name, known, std::max<size_t>(1, (e.name.size() + 2) / 3));
    out.push_back(std::move(u));
  }
  return out;
}

Status Config::CheckKnownKeys(std::string_view prefix,
                              const std::vector<std::string>& known) const {
  ASSIGN_OR_RETURN(std::vector<UnknownKey> unknown, UnknownKeys(prefix, known));
  const std::string full_prefix = impl_->Full(prefix);
  std::string errors;
  for (const UnknownKey& u : unknown) {
    if (!errors.empty()) errors += "; ";
    errors += fmt::format("{}: unknown key '{}'", u.position.ToString(), u.key);
    if (u.suggestion) {
      errors += fmt::format(" (did you mean '{}'?)", Dotted(full_prefix, *u.suggestion));
    } else if (!known.empty()) {
      errors += fmt::format(" (known keys under '{}': {})",
                            full_prefix.empty() ? "<top level>" : full_prefix, Join(known, ", "));
    }
  }
  if (errors.empty()) return Status::Ok();
  return InvalidArgument(std::move(errors));
}

Result<Config> Config::Sub(std::string_view key) const {
  ASSIGN_OR_RETURN(Found found, impl_->Lookup(key));
  auto impl = std::make_shared<Impl>(*impl_);
  impl->prefix = impl_->Full(key);
  impl->root = found.node && !found.node->IsNull() ? found.node : nullptr;
  impl->root_key_mark = found.key_mark;
  return Config(std::move(impl));
}

Result<std::vector<Config>> Config::Items(std::string_view key) const {
  ASSIGN_OR_RETURN(NodePtr node, impl_->Find(key));
  std::vector<Config> out;
  if (!node) return out;
  if (node->kind != Node::Kind::kList) return impl_->TypeError(*node, impl_->Full(key), "a list");
  const std::string list_key = impl_->Full(key);
  for (size_t i = 0; i < node->items.size(); ++i) {
    auto impl = std::make_shared<Impl>(*impl_);
    impl->prefix = Dotted(list_key, std::to_string(i));
    impl->root = node->items[i]->IsNull() ? nullptr : node->items[i];
    impl->root_key_mark.reset();
    out.push_back(Config(std::move(impl)));
  }
  return out;
}

Config Config::Merge(const Config& overlay) const {
  return Config(impl_->Derive(MergeNodes(impl_->root, overlay.impl_->root),
                              MergedOrigin(impl_->origin, overlay.impl_->origin)));
}

Result<Config> Config::WithOverrides(const std::map<std::string, std::string>& values,
                                     std::string_view origin) const {
  auto origin_ptr = std::make_shared<const std::string>(origin);
  const Mark mark{origin_ptr};
  NodePtr root = impl_->root;
  for (const auto& [key, text] : values) {
    ASSIGN_OR_RETURN(std::vector<std::string_view> parts, impl_->CheckedParts(key, origin));
    auto scalar = std::make_shared<Node>();
    scalar->kind = Node::Kind::kScalar;
    scalar->scalar = text;
    scalar->mark = mark;
    ASSIGN_OR_RETURN(root, impl_->SetAt(root, parts, 0, scalar, mark, origin, /*rekey=*/true));
  }
  return Config(impl_->Derive(std::move(root), MergedOrigin(impl_->origin, origin)));
}

Result<Config> Config::With(std::string_view key, const Config& value) const {
  ASSIGN_OR_RETURN(std::vector<std::string_view> parts,
                   impl_->CheckedParts(key, value.impl_->origin));
  NodePtr v = value.impl_->root;
  if (!v) {
    auto null = std::make_shared<Node>();
    null->mark.origin = value.impl_->origin_ptr;
    v = std::move(null);
  }
  const Mark mark{value.impl_->origin_ptr};
  ASSIGN_OR_RETURN(NodePtr root,
                   impl_->SetAt(impl_->root, parts, 0, v, mark, value.origin(), /*rekey=*/false));
  return Config(impl_->Derive(std::move(root), impl_->origin));
}

Result<Config> Config::Without(std::string_view key) const {
  ASSIGN_OR_RETURN(std::vector<std::string_view> parts, impl_->CheckedParts(key, impl_->origin));
  // Rebuilds the path to the entry, sharing everything else.
  std::function<Result<NodePtr>(const NodePtr&, size_t)> remove = [&](const NodePtr& node,
                                                                      size_t i) -> Result<NodePtr> {
    if (!node || node->IsNull()) return node;
    std::string_view part = parts[i];
    const bool last = i + 1 == parts.size();
    if (node->kind == Node::Kind::kList && !last) {
      std::optional<size_t> index = ListIndex(part);
      if (!index) return impl_->TypeError(*node, impl_->Full(JoinParts(parts, i)), "a map");
      if (*index >= node->items.size()) return node;
      auto copy = std::make_shared<Node>(*node);
      ASSIGN_OR_RETURN(copy->items[*index], remove(node->items[*index], i + 1));
      return NodePtr(std::move(copy));
    }
    if (node->kind != Node::Kind::kMap) {
      return impl_->TypeError(*node, impl_->Full(JoinParts(parts, i)), "a map");
    }
    auto copy = std::make_shared<Node>(*node);
    for (auto it = copy->entries.begin(); it != copy->entries.end(); ++it) {
      if (it->name != part) continue;
      if (last) {
        copy->entries.erase(it);
      } else {
        ASSIGN_OR_RETURN(it->value, remove(it->value, i + 1));
      }
      return NodePtr(std::move(copy));
    }
    return node;
  };
  ASSIGN_OR_RETURN(NodePtr root, remove(impl_->root, 0));
  return Config(impl_->Derive(std::move(root), impl_->origin));
}

std::string Config::ToYaml() const {
  YAML::Emitter out;
  if (!impl_->root || impl_->root->IsNull()) {
    out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
  } else {
    Emit(out, impl_->root.get());
  }
  return std::string(out.c_str()) + "\n";
}

struct YamlWriter::Impl {
  YAML::Emitter out;
  int open = 0;  // maps and lists begun and not yet ended
};

YamlWriter::YamlWriter() : impl_(std::make_unique<Impl>()) {}
YamlWriter::~YamlWriter() = default;

YamlWriter& YamlWriter::BeginMap() {
  impl_->out << YAML::BeginMap;
  ++impl_->open;
  return *this;
}
YamlWriter& YamlWriter::EndMap() {
  impl_->out << YAML::EndMap;
  --impl_->open;
  return *this;
}
YamlWriter& YamlWriter::BeginList() {
  impl_->out << YAML::BeginSeq;
  ++impl_->open;
  return *this;
}
YamlWriter& YamlWriter::EndList() {
  impl_->out << YAML::EndSeq;
  --impl_->open;
  return *this;
}
YamlWriter& YamlWriter::Key(std::string_view key) {
  impl_->out << YAML::Key << std::string(key) << YAML::Value;
  return *this;
}
YamlWriter& YamlWriter::Value(std::string_view value) {
  impl_->out << std::string(value);
  return *this;
}
YamlWriter& YamlWriter::QuotedValue(std::string_view value) {
  impl_->out << YAML::DoubleQuoted << std::string(value);
  return *this;
}

Result<std::string> YamlWriter::Finish() const {
  if (!impl_->out.good()) {
    return Internal(fmt::format("writing YAML: {}", impl_->out.GetLastError()));
  }
  if (impl_->open != 0) {
    return Internal(fmt::format("writing YAML: {} map(s) or list(s) not ended", impl_->open));
  }
  return std::string(impl_->out.c_str());
}

}  // namespace gantry
