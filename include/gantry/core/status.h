// Status and Result<T>: how every Gantry module reports failure across its
// boundary. No exceptions cross a module boundary and none are thrown on hot
// paths.
//
// A Status is cheap when OK (a null pointer) and carries a code plus a message
// when not. Messages name the thing at fault (a file, a key, a line, a value)
// and say what to do, e.g.
//   InvalidArgument("-b 64M is larger than -e 8M; pass -b <= -e")
// Callers add context as the error travels up with Status::WithContext(), so a
// top-level message reads outermost-first:
//   "loading gantry.yaml: line 4, key 'bench.ranks': expected an integer, got 'two'".
#pragma once

#include <cassert>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace gantry {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,    // bad user input: flags, config, file contents
  kNotFound,           // a file, key, device or endpoint that does not exist
  kAlreadyExists,
  kFailedPrecondition, // the system is not in a state where this can run
  kResourceExhausted,  // memory, disk, shared memory, quotas
  kUnavailable,        // transient: a peer, a service or an endpoint did not answer
  kDeadlineExceeded,
  kPermissionDenied,
  kDataLoss,           // corruption or wrong results
  kUnimplemented,
  kInternal,           // a bug in Gantry
  kIoError,            // an OS call failed; the message carries errno text
};

// Returns the stable lower-case name of a code, e.g. "invalid_argument".
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() noexcept = default;  // OK
  Status(StatusCode code, std::string message);

  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status Ok() { return Status(); }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  // The message without the code prefix; empty when OK.
  const std::string& message() const;
  // "ok" or "<code name>: <message>".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>". OK stays OK.
  Status WithContext(std::string_view context) const&;
  Status WithContext(std::string_view context) &&;

  bool operator==(const Status& other) const {
    return code() == other.code() && message() == other.message();
  }

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<Rep> rep_;
};

// Factories, one per code.
Status InvalidArgument(std::string message);
Status NotFound(std::string message);
Status AlreadyExists(std::string message);
Status FailedPrecondition(std::string message);
Status ResourceExhausted(std::string message);
Status Unavailable(std::string message);
Status DeadlineExceeded(std::string message);
Status PermissionDenied(std::string message);
Status DataLoss(std::string message);
Status Unimplemented(std::string message);
Status Internal(std::string message);
// An OS call failed: "<what>: <strerror(err)>".
Status IoError(std::string_view what, int err);

// Result<T> holds either a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  // Implicit so that `return value;` and `return InvalidArgument(...);` both work.
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok() && "Result constructed from an OK Status");
    if (std::get<Status>(v_).ok()) v_ = Status(StatusCode::kInternal, "Result built from OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  // OK when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  // Precondition: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  T value_or(T fallback) const& { return ok() ? value() : std::move(fallback); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace gantry

#define GANTRY_STATUS_CONCAT_INNER_(a, b) a##b
#define GANTRY_STATUS_CONCAT_(a, b) GANTRY_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::gantry::Status gantry_status_ = (expr);          \
    if (!gantry_status_.ok()) return gantry_status_;   \
  } while (0)

// Evaluates `rexpr` (a Result<T>); on error returns its Status, else moves the
// value into `lhs` (which may be a declaration: ASSIGN_OR_RETURN(auto x, F())).
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  ASSIGN_OR_RETURN_IMPL_(GANTRY_STATUS_CONCAT_(gantry_result_, __LINE__), lhs, rexpr)
#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                           \
  if (!tmp.ok()) return tmp.status();           \
  lhs = std::move(tmp).value()
