// What the registry's HTTP server (http_routes.cc) and its client
// (remote_client.cc) agree on: the paths, the error codes of error answers,
// and reading the JSON shapes of registry.h's ToJson back into typed values.
// Internal to src/registry.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "gantry/core/json_reader.h"
#include "gantry/core/status.h"
#include "gantry/registry/registry.h"

namespace gantry::registry::wire {

inline constexpr std::string_view kMlflow = "/api/2.0/mlflow/";
inline constexpr std::string_view kGantry = "/api/2.0/gantry/";
inline constexpr std::string_view kBlobs = "/api/2.0/gantry/blobs/sha256/";
inline constexpr std::string_view kManifests = "/api/2.0/gantry/manifests/sha256/";

// MLflow's error_code for a Status code ("RESOURCE_DOES_NOT_EXIST", ...;
// "INTERNAL_ERROR" for codes MLflow has no name for).
std::string_view ErrorCodeFor(StatusCode code);
// The Status code of an error answer: the code error_code names when the HTTP
// status is the one http::HttpStatusFor gives it (so AlreadyExists and
// FailedPrecondition, both 409, stay apart), else http::StatusCodeForHttp.
StatusCode StatusCodeFor(int http_status, std::string_view error_code);

bool IsHex64(std::string_view s);

// A version number in a request body: MLflow sends strings ("3"); integers
// are accepted too. Missing: nullopt, or an error when `required`. Below
// `min`: InvalidArgument naming the field.
Result<std::optional<int64_t>> ReadVersion(const JsonReader& body, std::string_view key,
                                           bool required, int64_t min = 1);

// The inverses of ToJson (registry.h); errors name the field (the reader's
// origin and code: DataLoss for a server's answer).
Result<ModelVersion> ModelVersionFromJson(const JsonReader& j);
Result<RegisteredModel> RegisteredModelFromJson(const JsonReader& j);
Result<DeleteReport> DeleteReportFromJson(const JsonReader& j);

// {keyid, algorithm, public_pem, comment}, as the trusted-keys endpoints send it.
Json TrustedKeyJson(const TrustedKey& k);
Result<TrustedKey> TrustedKeyFromJson(const JsonReader& j);

}  // namespace gantry::registry::wire
