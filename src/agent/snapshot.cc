#include "gantry/agent/snapshot.h"

#include <algorithm>

namespace gantry::agent {

const Family* Snapshot::Find(std::string_view name) const {
  auto it = std::lower_bound(families.begin(), families.end(), name,
                             [](const Family& f, std::string_view n) { return f.name < n; });
  if (it == families.end() || it->name != name) return nullptr;
  return &*it;
}

std::string SeriesKey(std::string_view name, const metrics::Labels& labels) {
  std::string key(name);
  if (labels.empty()) return key;
  key += '{';
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) key += ',';
    key += labels[i].first;
    key += "=\"";
    // Same escaping as the exposition format, so a key reads like a selector.
    for (char c : labels[i].second) {
      if (c == '\\' || c == '"') key += '\\';
      if (c == '\n') {
        key += "\\n";
        continue;
      }
      key += c;
    }
    key += '"';
  }
  key += '}';
  return key;
}

}  // namespace gantry::agent
