#include "gantry/core/json_reader.h"

#include <fmt/format.h>

#include <limits>

namespace gantry {
namespace {

// Strings are quoted and cut (a message should not carry a whole bundle),
// containers named by kind.
std::string Describe(const Json& v) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    constexpr size_t kMax = 40;
    return "'" + (s.size() > kMax ? s.substr(0, kMax) + "..." : s) + "'";
  }
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  return v.dump();
}

std::string Where(const std::string& path) {
  return path.empty() ? std::string("the document") : "field '" + path + "'";
}

}  // namespace

JsonReader::JsonReader(const Json& value, std::string origin, StatusCode code)
    : value_(&value),
      origin_(std::make_shared<std::string>(std::move(origin))),
      code_(code == StatusCode::kOk ? StatusCode::kInvalidArgument : code) {}

JsonReader::JsonReader(std::shared_ptr<const Json> root, const Json* value,
                       std::shared_ptr<std::string> origin, std::string path, StatusCode code)
    : root_(std::move(root)),
      value_(value),
      origin_(std::move(origin)),
      path_(std::move(path)),
      code_(code) {}

Result<JsonReader> JsonReader::Parse(std::string_view text, std::string origin, StatusCode code) {
  if (code == StatusCode::kOk) code = StatusCode::kInvalidArgument;
  Result<Json> parsed = ParseJson(text, origin);
  if (!parsed.ok()) return Status(code, parsed.status().message());
  auto root = std::make_shared<const Json>(*std::move(parsed));
  const Json* value = root.get();
  return JsonReader(std::move(root), value, std::make_shared<std::string>(std::move(origin)), "",
                    code);
}

JsonReader JsonReader::Child(const Json& value, std::string path) const {
  return JsonReader(root_, &value, origin_, std::move(path), code_);
}

std::string JsonReader::Path(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

Status JsonReader::TypeError(const std::string& path, const Json& got,
                             std::string_view expected) const {
  return Status(code_, fmt::format("{}: {}: expected {}, got {}", *origin_, Where(path), expected,
                                   Describe(got)));
}

Status JsonReader::ExpectObject() const {
  if (value_->is_object()) return Status::Ok();
  return TypeError(path_, *value_, "an object");
}

bool JsonReader::Has(std::string_view key) const { return Find(key) != nullptr; }

const Json* JsonReader::Find(std::string_view key) const {
  if (!value_->is_object()) return nullptr;
  auto it = value_->find(key);
  if (it == value_->end() || it->is_null()) return nullptr;
  return &*it;
}

Result<const Json*> JsonReader::Field(std::string_view key, std::string_view expected,
                                      bool required) const {
  RETURN_IF_ERROR(ExpectObject());
  const Json* f = Find(key);
  if (f == nullptr && required) {
    return Status(
        code_, fmt::format("{}: missing field '{}' (expected {})", *origin_, Path(key), expected));
  }
  return f;
}

Status JsonReader::Error(std::string_view key, std::string_view expected) const {
  const Json* f = Find(key);
  if (f == nullptr) {
    return Status(
        code_, fmt::format("{}: missing field '{}' (expected {})", *origin_, Path(key), expected));
  }
  return TypeError(Path(key), *f, expected);
}

namespace {

bool ToString(const Json& j, std::string* out) {
  if (!j.is_string()) return false;
  *out = j.get<std::string>();
  return true;
}

bool ToInt(const Json& j, int64_t* out) {
  if (j.is_number_unsigned()) {
    uint64_t u = j.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    *out = static_cast<int64_t>(u);
    return true;
  }
  if (!j.is_number_integer()) return false;
  *out = j.get<int64_t>();
  return true;
}

bool ToUint(const Json& j, uint64_t* out) {
  if (!j.is_number_unsigned()) return false;
  *out = j.get<uint64_t>();
  return true;
}

bool ToDouble(const Json& j, double* out) {
  if (!j.is_number()) return false;
  *out = j.get<double>();
  return true;
}

bool ToBool(const Json& j, bool* out) {
  if (!j.is_boolean()) return false;
  *out = j.get<bool>();
  return true;
}

constexpr std::string_view kString = "a string";
constexpr std::string_view kInt = "an integer";
constexpr std::string_view kUint = "a non-negative integer";
constexpr std::string_view kDouble = "a number";
constexpr std::string_view kBool = "true or false";

}  // namespace

template <typename T>
Result<T> JsonReader::Scalar(std::string_view key, std::string_view expected,
                             bool (*convert)(const Json&, T*), const T* fallback) const {
  ASSIGN_OR_RETURN(const Json* f, Field(key, expected, fallback == nullptr));
  if (f == nullptr) return *fallback;
  T out{};
  if (!convert(*f, &out)) return TypeError(Path(key), *f, expected);
  return out;
}

Result<std::string> JsonReader::GetString(std::string_view key) const {
  return Scalar<std::string>(key, kString, ToString, nullptr);
}
Result<int64_t> JsonReader::GetInt(std::string_view key) const {
  return Scalar<int64_t>(key, kInt, ToInt, nullptr);
}
Result<uint64_t> JsonReader::GetUint(std::string_view key) const {
  return Scalar<uint64_t>(key, kUint, ToUint, nullptr);
}
Result<double> JsonReader::GetDouble(std::string_view key) const {
  return Scalar<double>(key, kDouble, ToDouble, nullptr);
}
Result<bool> JsonReader::GetBool(std::string_view key) const {
  return Scalar<bool>(key, kBool, ToBool, nullptr);
}
Result<std::string> JsonReader::GetString(std::string_view key, std::string fallback) const {
  return Scalar<std::string>(key, kString, ToString, &fallback);
}
Result<int64_t> JsonReader::GetInt(std::string_view key, int64_t fallback) const {
  return Scalar<int64_t>(key, kInt, ToInt, &fallback);
}
Result<uint64_t> JsonReader::GetUint(std::string_view key, uint64_t fallback) const {
  return Scalar<uint64_t>(key, kUint, ToUint, &fallback);
}
Result<double> JsonReader::GetDouble(std::string_view key, double fallback) const {
  return Scalar<double>(key, kDouble, ToDouble, &fallback);
}
Result<bool> JsonReader::GetBool(std::string_view key, bool fallback) const {
  return Scalar<bool>(key, kBool, ToBool, &fallback);
}

Result<JsonReader> JsonReader::GetObject(std::string_view key) const {
  ASSIGN_OR_RETURN(const Json* f, Field(key, "an object", true));
  if (!f->is_object()) return TypeError(Path(key), *f, "an object");
  return Child(*f, Path(key));
}

Result<JsonReader> JsonReader::GetOptionalObject(std::string_view key) const {
  static const Json kEmpty = Json::object();
  ASSIGN_OR_RETURN(const Json* f, Field(key, "an object", false));
  if (f == nullptr) return Child(kEmpty, Path(key));
  if (!f->is_object()) return TypeError(Path(key), *f, "an object");
  return Child(*f, Path(key));
}

Result<std::vector<JsonReader>> JsonReader::GetArray(std::string_view key) const {
  ASSIGN_OR_RETURN(const Json* f, Field(key, "an array", true));
  if (!f->is_array()) return TypeError(Path(key), *f, "an array");
  std::vector<JsonReader> out;
  out.reserve(f->size());
  std::string base = Path(key);
  for (size_t i = 0; i < f->size(); ++i) {
    out.push_back(Child((*f)[i], base + "[" + std::to_string(i) + "]"));
  }
  return out;
}

Result<std::vector<JsonReader>> JsonReader::GetOptionalArray(std::string_view key) const {
  ASSIGN_OR_RETURN(const Json* f, Field(key, "an array", false));
  if (f == nullptr) return std::vector<JsonReader>();
  return GetArray(key);
}

Result<std::vector<std::string>> JsonReader::GetStringArray(std::string_view key) const {
  ASSIGN_OR_RETURN(std::vector<JsonReader> items, GetOptionalArray(key));
  std::vector<std::string> out;
  out.reserve(items.size());
  for (const JsonReader& item : items) {
    if (!item.value().is_string()) return TypeError(item.path(), item.value(), "a string");
    out.push_back(item.value().get<std::string>());
  }
  return out;
}

Result<std::map<std::string, std::string>> JsonReader::GetStringMap(std::string_view key) const {
  ASSIGN_OR_RETURN(JsonReader obj, GetOptionalObject(key));
  std::map<std::string, std::string> out;
  for (auto it = obj.value().begin(); it != obj.value().end(); ++it) {
    if (!it->is_string()) return TypeError(obj.Path(it.key()), *it, "a string");
    out[it.key()] = it->get<std::string>();
  }
  return out;
}

}  // namespace gantry
