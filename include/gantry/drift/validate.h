// `gantry drift validate`: periodic revalidation of a deployed model. Sends
// the feature columns of a labelled table through a model endpoint, reads the
// predictions and computes the model quality metrics (stats.h), then compares
// them with thresholds.
//
//   ASSIGN_OR_RETURN(Schema schema, Schema::LoadFile("schema.yaml"));   // needs a target column
//   ASSIGN_OR_RETURN(Table data, ReadTable("labelled.csv", schema));
//   ValidateOptions o{.endpoint = "http://127.0.0.1:8080/v2/models/churn/infer",
//                     .protocol = Protocol::kKServe, .min_accuracy = 0.9};
//   ASSIGN_OR_RETURN(ValidateResult r, Validate(data, o));
//   return r.passed ? 0 : 1;
//
// Protocols (docs/drift.md has the full contracts):
// - KServe v2 (Open Inference Protocol): POST <endpoint> where the endpoint is
//   the full ".../v2/models/<name>/infer" URL (or a base URL plus `model`).
//   Default tensor layout: one FP64 input "input-0" of shape [batch, features]
//   with the numerical features in schema order (what sklearn/xgboost
//   servers expect); `per_column_tensors` sends one input per feature named
//   after the column (FP64 [batch] or BYTES [batch] for categorical
//   features). The first output is the prediction: shape [batch] or
//   [batch, 1] holds labels or values; [batch, C>1] holds class
//   probabilities (prediction = argmax, class i is the label "i", the score
//   for ROC-AUC is column 1 when C == 2).
// - OpenAI-compatible: POST <endpoint> (a /v1/chat/completions URL) once per
//   row with {"model", "messages": [system instruction, user = the row's
//   features as a JSON object], "temperature": 0}; the prediction is
//   choices[0].message.content, trimmed (a number for regression).
// Rows with a null feature or label are skipped (counted in `skipped`).
// Plain HTTP only (the core client has no TLS): reach TLS endpoints through
// the gateway or a local proxy.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "gantry/core/json.h"
#include "gantry/core/status.h"
#include "gantry/drift/drift.h"

namespace gantry::drift {

enum class Protocol { kKServe, kOpenAI };
Result<Protocol> ParseProtocol(std::string_view text);  // "kserve" | "openai"

struct ValidateOptions {
  std::string endpoint;
  Protocol protocol = Protocol::kKServe;
  std::string model;  // KServe: appended as /v2/models/<model>/infer to a base URL; OpenAI: "model"
  int batch = 64;     // rows per KServe request (OpenAI: one row per request)
  bool per_column_tensors = false;
  std::string api_key;                       // sent as "Authorization: Bearer <key>" when set
  std::chrono::milliseconds timeout{30000};  // per request
  std::optional<double> min_accuracy;        // classification: accuracy
  std::optional<double> min_f1;              // classification: macro F1
  std::optional<double> max_rmse;            // regression
};

struct ValidateResult {
  uint64_t rows = 0, sent = 0, skipped = 0, requests = 0;
  std::string task;  // "classification" | "regression"
  std::optional<ClassificationQuality> classification;
  std::optional<RegressionQuality> regression;
  bool passed = true;
  std::vector<std::string> failures;  // "accuracy 0.81 < 0.90"
  double seconds = 0;
  Json ToJson() const;  // keys: report ("gantry.drift.validate"), version, rows, sent, skipped,
                        // task, quality, thresholds passed, failures
  std::string Render() const;
};

// Errors: InvalidArgument for a table without a target column, no features,
// a threshold that does not fit the task or bad options; Unavailable /
// DeadlineExceeded from the endpoint; DataLoss for a response that does not
// follow the protocol (naming the request's first row and what was wrong).
Result<ValidateResult> Validate(const Table& labelled, const ValidateOptions& options);

}  // namespace gantry::drift
