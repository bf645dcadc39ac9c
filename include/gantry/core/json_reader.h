// Typed reads of a JSON document (a request body, a server's answer) whose
// errors name where the document came from, the field's path and what was
// expected, the way core::Config does for YAML:
//
//   ASSIGN_OR_RETURN(JsonReader body, JsonReader::Parse(req.body, "POST /api/x body"));
//   ASSIGN_OR_RETURN(std::string name, body.GetString("name"));          // required
//   ASSIGN_OR_RETURN(int64_t limit, body.GetInt("limit", 100));          // optional
//   ASSIGN_OR_RETURN(std::vector<JsonReader> tags, body.GetArray("tags"));
//   for (const JsonReader& t : tags) ASSIGN_OR_RETURN(std::string k, t.GetString("key"));
//
// fails with messages such as
//   "POST /api/x body: missing field 'name' (expected a string)"
//   "POST /api/x body: field 'tags[2].key': expected a string, got 5"
//   "POST /api/x body: field 'limit': expected an integer, got 'two'".
// Paths are dotted keys with [i] for array elements ("lineage.metrics",
// "files[0].size"); the root is "the document". Fields that are absent and
// fields that are JSON null are the same: missing (a required getter fails, an
// optional one returns its fallback). Getters never throw.
//
// A reader is a cheap view (copyable); readers got from it (GetObject,
// GetArray) share the document. Errors carry the code given at construction:
// InvalidArgument (the default) for input a caller sent, DataLoss for an
// answer a client received.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry {

class JsonReader {
 public:
  // Reads `value`, which is not copied: it must outlive this reader and every
  // reader got from it. `origin` names the document in messages.
  JsonReader(const Json& value, std::string origin, StatusCode code = StatusCode::kInvalidArgument);
  // Parses `text` (the reader owns the document). A syntax error is `code`
  // with origin, line and column. The document may be any JSON value; check
  // it with ExpectObject() when an object is required (the getters also fail
  // on a non-object, naming it).
  static Result<JsonReader> Parse(std::string_view text, std::string origin,
                                  StatusCode code = StatusCode::kInvalidArgument);

  const Json& value() const { return *value_; }
  // "" for the root, else e.g. "files[0]".
  const std::string& path() const { return path_; }
  const std::string& origin() const { return *origin_; }

  // OK when the value is an object, else "<origin>: <where>: expected an
  // object, got ...".
  Status ExpectObject() const;
  // True when the value is an object with `key` present and not null.
  bool Has(std::string_view key) const;
  // The field, or nullptr when absent or null (or this is not an object): for
  // types the getters do not cover, checked by the caller with Error().
  const Json* Find(std::string_view key) const;

  // Required: missing, or of another type, is an error.
  Result<std::string> GetString(std::string_view key) const;
  // Integers only (1.5, "2" and true are refused); int64 range.
  Result<int64_t> GetInt(std::string_view key) const;
  // Non-negative integers only; uint64 range.
  Result<uint64_t> GetUint(std::string_view key) const;
  // Any number.
  Result<double> GetDouble(std::string_view key) const;
  Result<bool> GetBool(std::string_view key) const;
  // Optional: `fallback` when missing; of another type is an error.
  Result<std::string> GetString(std::string_view key, std::string fallback) const;
  Result<int64_t> GetInt(std::string_view key, int64_t fallback) const;
  Result<uint64_t> GetUint(std::string_view key, uint64_t fallback) const;
  Result<double> GetDouble(std::string_view key, double fallback) const;
  Result<bool> GetBool(std::string_view key, bool fallback) const;

  // A nested object: required, or (optional) an empty object when missing.
  Result<JsonReader> GetObject(std::string_view key) const;
  Result<JsonReader> GetOptionalObject(std::string_view key) const;
  // An array's elements as readers (paths "key[i]"): required, or (optional)
  // empty when missing.
  Result<std::vector<JsonReader>> GetArray(std::string_view key) const;
  Result<std::vector<JsonReader>> GetOptionalArray(std::string_view key) const;
  // An array of strings / an object whose values are strings; empty when
  // missing. Any other element or value is an error naming it.
  Result<std::vector<std::string>> GetStringArray(std::string_view key) const;
  Result<std::map<std::string, std::string>> GetStringMap(std::string_view key) const;

  // "<origin>: field '<path of key>': expected <expected>, got <the value>"
  // (or "missing field ..." when the field is missing), with this reader's
  // code: for checks beyond the type (a range, a format).
  Status Error(std::string_view key, std::string_view expected) const;
  // The path of `key` under this reader ("files[0].path").
  std::string Path(std::string_view key) const;

 private:
  JsonReader(std::shared_ptr<const Json> root, const Json* value,
             std::shared_ptr<std::string> origin, std::string path, StatusCode code);
  JsonReader Child(const Json& value, std::string path) const;
  // A scalar field: required when `fallback` is null.
  template <typename T>
  Result<T> Scalar(std::string_view key, std::string_view expected,
                   bool (*convert)(const Json&, T*), const T* fallback) const;
  // The field when present and not null; an error when required and missing.
  Result<const Json*> Field(std::string_view key, std::string_view expected, bool required) const;
  Status TypeError(const std::string& path, const Json& got, std::string_view expected) const;

  std::shared_ptr<const Json> root_;  // owner of the document (empty when borrowed)
  const Json* value_;
  std::shared_ptr<std::string> origin_;
  std::string path_;
  StatusCode code_;
};

}  // namespace gantry
