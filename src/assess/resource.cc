#include "gantry/assess/resource.h"

#include <fmt/format.h>

#include "gantry/core/text.h"

namespace gantry::assess {

std::string_view OriginName(Origin o) {
  switch (o) {
    case Origin::kArm:
      return "arm";
    case Origin::kTerraform:
      return "terraform";
    case Origin::kLive:
      return "live";
    case Origin::kNode:
      return "node";
  }
  return "arm";
}

void AppendPointerToken(std::string_view token, std::string* pointer) {
  for (char c : token) {
    if (c == '~') {
      *pointer += "~0";
    } else if (c == '/') {
      *pointer += "~1";
    } else {
      *pointer += c;
    }
  }
}

int SourceDoc::LineOf(std::string_view pointer) const {
  std::string p(pointer);
  while (true) {
    auto it = lines.find(p);
    if (it != lines.end()) return it->second;
    if (p.empty()) return 1;
    size_t slash = p.rfind('/');
    p.resize(slash == std::string::npos ? 0 : slash);
  }
}

namespace {

// "properties.scaleSettings.minNodeCount" -> "/properties/scaleSettings/minNodeCount".
std::string PointerOf(std::string_view dotted) {
  std::string out;
  size_t start = 0;
  while (start <= dotted.size()) {
    size_t dot = dotted.find('.', start);
    std::string_view seg =
        dotted.substr(start, dot == std::string_view::npos ? dotted.npos : dot - start);
    out += '/';
    AppendPointerToken(seg, &out);
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return out;
}

}  // namespace

bool Resource::IsType(std::string_view arm_type) const { return EqualsIgnoreCase(type, arm_type); }

const Json* Resource::Get(std::string_view dotted_path) const {
  const Json* cur = &body;
  size_t start = 0;
  while (true) {
    size_t dot = dotted_path.find('.', start);
    std::string_view seg =
        dotted_path.substr(start, dot == std::string_view::npos ? dotted_path.npos : dot - start);
    if (!cur->is_object()) return nullptr;
    // ARM property names are case-insensitive; an exact match is the common case.
    auto it = cur->find(seg);
    if (it == cur->end()) {
      it = cur->end();
      for (auto j = cur->begin(); j != cur->end(); ++j) {
        if (EqualsIgnoreCase(j.key(), seg)) {
          it = j;
          break;
        }
      }
      if (it == cur->end()) return nullptr;
    }
    cur = &*it;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return cur->is_null() ? nullptr : cur;
}

bool Resource::IsUnknown(std::string_view dotted_path) const {
  std::string p = PointerOf(dotted_path);
  for (const std::string& u : unknown) {
    // `u` is p or an ancestor of p.
    if (p.size() >= u.size() && p.compare(0, u.size(), u) == 0 &&
        (p.size() == u.size() || p[u.size()] == '/')) {
      return true;
    }
  }
  return false;
}

const std::string* Resource::Tag(std::string_view name) const {
  auto tags = body.find("tags");
  if (tags == body.end() || !tags->is_object()) return nullptr;
  for (auto it = tags->begin(); it != tags->end(); ++it) {
    if (EqualsIgnoreCase(it.key(), name)) return it->get_ptr<const std::string*>();
  }
  return nullptr;
}

}  // namespace gantry::assess
