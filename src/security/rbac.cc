#include "gantry/security/rbac.h"

namespace gantry::security {

bool GlobMatch(std::string_view pattern, std::string_view text) {
  // Classic two-pointer matcher: on mismatch, retry from just after the most
  // recent '*' with that star swallowing one more character. Only the latest
  // star matters, so this is O(|pattern| * |text|) with no recursion.
  size_t p = 0, t = 0;
  size_t star = std::string_view::npos, star_t = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_t = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++star_t;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

Result<Policy> Policy::Create(std::vector<Role> roles) {
  Policy policy;
  for (Role& role : roles) {
    if (role.name.empty()) return InvalidArgument("a role has an empty name; name every role");
    for (size_t i = 0; i < role.permissions.size(); ++i) {
      if (role.permissions[i].action.empty()) {
        return InvalidArgument("role '" + role.name + "' permission " + std::to_string(i + 1) +
                               " has an empty action; use e.g. \"model:invoke\" or \"*\"");
      }
      // An empty resource would only ever match an empty resource, which is
      // never what is meant: treat it as the default "*".
      if (role.permissions[i].resource.empty()) role.permissions[i].resource = "*";
    }
    std::string name = role.name;
    if (!policy.roles_.emplace(std::move(name), std::move(role.permissions)).second) {
      return InvalidArgument("role '" + role.name + "' is defined twice; merge its permissions");
    }
  }
  return policy;
}

bool Policy::HasRole(std::string_view role) const { return roles_.find(role) != roles_.end(); }

bool Policy::Allowed(std::string_view role, std::string_view action,
                     std::string_view resource) const {
  auto it = roles_.find(role);
  if (it == roles_.end()) return false;
  for (const Permission& p : it->second) {
    if (GlobMatch(p.action, action) && GlobMatch(p.resource, resource)) return true;
  }
  return false;
}

}  // namespace gantry::security
