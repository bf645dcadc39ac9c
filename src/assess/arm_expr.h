// The ARM template expression language ("[concat('a', parameters('b'))]"):
// a parser to a small tree and an evaluator over Json values. Private to
// src/assess: arm_template.cc drives it and supplies parameters, variables and
// copy loops through Context.
//
// Values whose content ARM knows only at deployment (reference(), list*(),
// utcNow(), newGuid(), Key Vault parameter references) are "unknown": a Json
// binary value with subtype kUnknownSubtype, which JSON text can never
// produce. Functions given an unknown argument return unknown (createArray,
// createObject, array, coalesce and if keep the unknown inside their result),
// so an unknown travels to the resource property that holds it and the
// template layer lists that property in Resource::unknown.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gantry/assess/inputs.h"
#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry::assess::arm {

inline constexpr std::uint64_t kUnknownSubtype = 0x55;

// An unknown value; `text` (the expression that made it) is kept for output.
Json MakeUnknown(std::string_view text);
bool IsUnknown(const Json& v);
bool ContainsUnknown(const Json& v);
// The text an unknown was made from.
std::string UnknownText(const Json& v);

// True when `s` is an expression: "[...]" but not "[[...".
bool IsExpression(std::string_view s);
// The literal a non-expression string stands for ("[[x]" -> "[x]").
std::string_view LiteralOf(std::string_view s);

struct Node {
  enum Kind { kString, kInt, kCall, kMember, kIndex } kind = kString;
  std::string text;  // the string literal, function name (as written) or member name
  int64_t number = 0;
  // kCall: the arguments; kMember: {base}; kIndex: {base, index}.
  std::vector<std::unique_ptr<Node>> args;
};

// Parses the text between the brackets of an expression. Errors
// (InvalidArgument) give the column in the string and what was expected.
Result<std::unique_ptr<Node>> ParseExpression(std::string_view text, int max_depth);

// What the evaluator asks of its caller. Also holds the limits every
// evaluation in one expansion shares.
class Context {
 public:
  virtual ~Context() = default;
  // Stable pointers to the evaluated value (it outlives the evaluation).
  virtual Result<const Json*> Parameter(std::string_view name) = 0;
  virtual Result<const Json*> Variable(std::string_view name) = 0;
  // copyIndex(): the index in the innermost loop, or in the loop named `loop`.
  virtual Result<int64_t> CopyIndex(std::optional<std::string_view> loop) = 0;
  // A user-defined function "namespace.name".
  virtual Result<Json> CallUserFunction(std::string_view name, std::vector<Json> args) = 0;
  virtual const ArmOptions& Options() const = 0;
  // utcNow() and newGuid(): only while evaluating a parameter's defaultValue.
  virtual bool AllowsNonDeterministic() const = 0;

  // Nesting of calls plus references through variables and parameters.
  int depth = 0;
  int max_depth = 64;
  // Work left: one unit per value or byte built; exhausting it is
  // ResourceExhausted (an expression that doubles a value every step).
  int64_t budget = int64_t{1} << 26;

  Status Charge(int64_t units);
  // Fails when `v` nests deeper than kMaxJsonDepth; else charges its size.
  Status ChargeDeep(const Json& v);
};

// Evaluates the expression string `s` (IsExpression(s) true) and returns its
// value. `cache` (may be null) keeps parsed trees by text across calls.
using ExprCache = std::unordered_map<std::string, std::unique_ptr<Node>>;
Result<Json> EvaluateExpression(std::string_view s, Context& ctx, ExprCache* cache);

// "[...]" evaluated, "[[..." unescaped, anything else returned as is.
Result<Json> EvaluateString(std::string_view s, Context& ctx, ExprCache* cache);

// Deterministic stand-ins for Azure's hashes (not byte-identical to Azure's):
// 13 lower-case base32 characters, and a version-5-style GUID string.
std::string UniqueString(const std::vector<std::string>& parts);
std::string GuidOf(const std::vector<std::string>& parts);

// ARM type name of a value for messages: "string", "int", "bool", "array",
// "object", "null", "number", "unknown".
std::string_view TypeName(const Json& v);

// All function names the evaluator knows (for did-you-mean and tests).
std::vector<std::string> FunctionNames();

}  // namespace gantry::assess::arm
