// Private: a fast validator for the audit log's record texts (not installed).
#pragma once

#include <string_view>

namespace gantry::security::internal {

enum class ObjectCheck {
  kValid,  // exactly one JSON object (RFC 8259, well-formed UTF-8) without reserved top-level names
  kInvalid,   // not JSON, not an object, or a top-level name is "seq", "prev" or "hash"
  kSlowPath,  // valid, but a top-level name uses escapes: decode it with a full parser to decide
};

// Validates without allocating (beyond a nesting stack) and without
// recursion. Accepts exactly what nlohmann::json accepts for an object text.
ObjectCheck CheckAuditObject(std::string_view text);

}  // namespace gantry::security::internal
