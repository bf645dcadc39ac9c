// Role-based access control: roles are lists of (action glob, resource glob)
// permissions. Deny by default: an unknown role or no matching permission is denied.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::security {

struct Permission {
  std::string action;          // glob, e.g. "model:invoke", "admin", "*"
  std::string resource = "*";  // glob
};

struct Role {
  std::string name;
  std::vector<Permission> permissions;
};

// '*' matches any run of characters (including none), '?' exactly one; every
// other character matches itself. Iterative with single backtracking: O(n*m)
// worst case, no recursion.
bool GlobMatch(std::string_view pattern, std::string_view text);

class Policy {
 public:
  Policy() = default;  // no roles: denies everything
  // InvalidArgument for an empty role name, a duplicate role, or an empty action.
  static Result<Policy> Create(std::vector<Role> roles);

  bool HasRole(std::string_view role) const;
  // True when some permission of `role` matches both action and resource.
  bool Allowed(std::string_view role, std::string_view action, std::string_view resource) const;

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::vector<Permission>, Hash, std::equal_to<>> roles_;
};

}  // namespace gantry::security
