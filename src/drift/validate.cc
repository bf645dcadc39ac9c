// `gantry drift validate`: labelled rows through a KServe v2 or
// OpenAI-compatible endpoint, quality metrics against thresholds. The
// contracts are in validate.h and docs/drift.md.
#include "gantry/drift/validate.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <map>

#include "gantry/core/http_client.h"
#include "quality.h"

namespace gantry::drift {
namespace {

// A prediction as text: numbers formatted like CellText so that 1, 1.0 and
// "1" are the same class.
std::optional<std::string> JsonText(const Json& v) {
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    size_t b = s.find_first_not_of(" \t\r\n");
    return b == std::string::npos ? std::string() : s.substr(b);
  }
  if (v.is_boolean()) return v.get<bool>() ? "1" : "0";
  if (v.is_number()) return fmt::format("{}", v.get<double>());
  return std::nullopt;
}

struct Batch {
  std::vector<size_t> rows;  // table row indices
};

Result<http::Response> Post(const ValidateOptions& o, const std::string& url, const Json& body) {
  http::Request req;
  req.method = "POST";
  req.url = url;
  req.headers = {{"Content-Type", "application/json"}};
  if (!o.api_key.empty()) req.headers.push_back({"Authorization", "Bearer " + o.api_key});
  req.deadline = o.timeout;
  req.body = body.dump();
  req.max_body_bytes = 256ull << 20;
  ASSIGN_OR_RETURN(http::Response resp, http::Send(req));
  if (resp.status != 200) {
    std::string snippet = resp.body.substr(0, 300);
    Status s = resp.status == 401 || resp.status == 403
                   ? PermissionDenied(fmt::format("{}: HTTP {} {}: {}; check --api-key", url,
                                                  resp.status, resp.reason, snippet))
                   : Unavailable(
                         fmt::format("{}: HTTP {} {}: {}", url, resp.status, resp.reason, snippet));
    return s;
  }
  return resp;
}

// Sends one KServe v2 request; fills predictions (text) and scores (NaN when
// the model returns labels).
Status KServeBatch(const ValidateOptions& o, const std::string& url,
                   const std::vector<const Column*>& features, const Batch& b,
                   std::vector<std::optional<std::string>>* pred, std::vector<double>* score) {
  Json inputs = Json::array();
  const size_t n = b.rows.size();
  if (!o.per_column_tensors) {
    Json data = Json::array();
    for (size_t r : b.rows) {
      for (const Column* c : features) data.push_back(c->numbers[r]);
    }
    inputs.push_back({{"name", "input-0"},
                      {"shape", {n, features.size()}},
                      {"datatype", "FP64"},
                      {"data", std::move(data)}});
  } else {
    for (const Column* c : features) {
      Json data = Json::array();
      for (size_t r : b.rows) {
        if (c->spec.kind == ColumnKind::kNumerical)
          data.push_back(c->numbers[r]);
        else
          data.push_back(c->dictionary[c->codes[r]]);
      }
      inputs.push_back({{"name", c->spec.name},
                        {"shape", {n}},
                        {"datatype", c->spec.kind == ColumnKind::kNumerical ? "FP64" : "BYTES"},
                        {"data", std::move(data)}});
    }
  }
  Json body = {{"inputs", std::move(inputs)}};
  ASSIGN_OR_RETURN(http::Response resp, Post(o, url, body));
  const size_t first_line = b.rows.front() + 2;  // +1 header, +1 one-based (CSV)
  auto bad = [&](std::string_view what) {
    return DataLoss(
        fmt::format("{}: the response to the batch starting at data row {} (line {}) "
                    "is not a KServe v2 inference response: {}",
                    url, b.rows.front() + 1, first_line, what));
  };
  Json j = Json::parse(resp.body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  auto outs = j.find("outputs");
  if (outs == j.end() || !outs->is_array() || outs->empty()) return bad("no \"outputs\" array");
  const Json& out = (*outs)[0];
  if (!out.is_object() || !out.contains("data") || !out["data"].is_array()) {
    return bad("outputs[0] has no \"data\" array");
  }
  const Json& data = out["data"];
  size_t cols = 1;
  if (out.contains("shape") && out["shape"].is_array() && out["shape"].size() == 2 &&
      out["shape"][1].is_number_unsigned()) {
    cols = out["shape"][1].get<size_t>();
  }
  if (cols == 0 || data.size() != n * cols) {
    return bad(fmt::format("outputs[0] holds {} values for {} rows", data.size(), n));
  }
  for (size_t i = 0; i < n; ++i) {
    size_t r = b.rows[i];
    if (cols == 1) {
      (*pred)[r] = JsonText(data[i]);
      if (!(*pred)[r]) return bad(fmt::format("value {} is not a number or string", i));
      continue;
    }
    size_t best = 0;
    for (size_t k = 0; k < cols; ++k) {
      if (!data[i * cols + k].is_number()) return bad("class probabilities are not numbers");
      if (data[i * cols + k].get<double>() > data[i * cols + best].get<double>()) best = k;
    }
    (*pred)[r] = std::to_string(best);
    if (cols == 2) (*score)[r] = data[i * cols + 1].get<double>();
  }
  return Status::Ok();
}

Status OpenAIRow(const ValidateOptions& o, const std::vector<const Column*>& features, size_t r,
                 const std::string& task, std::vector<std::optional<std::string>>* pred) {
  Json row = Json::object();
  for (const Column* c : features) {
    if (c->spec.kind == ColumnKind::kNumerical)
      row[c->spec.name] = c->numbers[r];
    else
      row[c->spec.name] = c->dictionary[c->codes[r]];
  }
  Json body = {
      {"model", o.model},
      {"messages",
       {{{"role", "system"},
         {"content", task == "regression"
                         ? "Predict the target value for the record. Reply with the number only."
                         : "Predict the class label for the record. Reply with the label only."}},
        {{"role", "user"}, {"content", row.dump()}}}},
      {"temperature", 0}};
  ASSIGN_OR_RETURN(http::Response resp, Post(o, o.endpoint, body));
  Json j = Json::parse(resp.body, nullptr, false);
  const Json* content = nullptr;
  if (!j.is_discarded() && j.is_object() && j.contains("choices") && j["choices"].is_array() &&
      !j["choices"].empty() && j["choices"][0].is_object()) {
    const Json& ch = j["choices"][0];
    if (ch.contains("message") && ch["message"].is_object() && ch["message"].contains("content")) {
      content = &ch["message"]["content"];
    } else if (ch.contains("text")) {
      content = &ch["text"];  // completions-style
    }
  }
  if (content == nullptr || !content->is_string()) {
    return DataLoss(
        fmt::format("{}: the response for data row {} has no "
                    "choices[0].message.content string",
                    o.endpoint, r + 1));
  }
  (*pred)[r] = JsonText(*content);
  return Status::Ok();
}

}  // namespace

Result<Protocol> ParseProtocol(std::string_view text) {
  if (text == "kserve" || text == "v2") return Protocol::kKServe;
  if (text == "openai") return Protocol::kOpenAI;
  return InvalidArgument(fmt::format("unknown protocol '{}'; use kserve or openai", text));
}

Result<ValidateResult> Validate(const Table& labelled, const ValidateOptions& o) {
  auto start = std::chrono::steady_clock::now();
  const Column* target = nullptr;
  std::vector<const Column*> features;
  for (const Column& c : labelled.columns) {
    if (c.spec.role == Role::kTarget) target = &c;
    if (c.spec.role == Role::kFeature) features.push_back(&c);
  }
  if (target == nullptr) {
    return InvalidArgument(
        "the labelled data has no target: mark the label column in the schema (e.g. label: "
        "{type: categorical, role: target}) and make sure the data has that column");
  }
  if (features.empty()) return InvalidArgument("the schema has no feature columns to send");
  if (o.batch < 1) return InvalidArgument(fmt::format("--batch must be >= 1, got {}", o.batch));
  ValidateResult res;
  res.task = !labelled.task.empty()                          ? labelled.task
             : target->spec.kind == ColumnKind::kCategorical ? "classification"
                                                             : "regression";
  if (res.task == "regression" && (o.min_accuracy || o.min_f1)) {
    return InvalidArgument(
        "--min-accuracy and --min-f1 apply to classification; the task is "
        "regression (use --max-rmse)");
  }
  if (res.task == "classification" && o.max_rmse) {
    return InvalidArgument(
        "--max-rmse applies to regression; the task is classification (use "
        "--min-accuracy or --min-f1)");
  }
  if (res.task == "regression" && target->spec.kind != ColumnKind::kNumerical) {
    return InvalidArgument(
        fmt::format("regression needs a numerical target; '{}' is categorical", target->spec.name));
  }
  if (o.protocol == Protocol::kKServe && !o.per_column_tensors) {
    for (const Column* c : features) {
      if (c->spec.kind != ColumnKind::kNumerical) {
        return InvalidArgument(fmt::format(
            "feature '{}' is categorical and cannot go into the FP64 [batch, features] tensor; "
            "use --per-column-tensors (BYTES inputs) or give it role: ignore",
            c->spec.name));
      }
    }
  }
  std::string url = o.endpoint;
  if (o.protocol == Protocol::kKServe && url.find("/v2/models/") == std::string::npos) {
    if (o.model.empty()) {
      return InvalidArgument(
          fmt::format("{}: not a .../v2/models/<name>/infer URL; give the full "
                      "URL or --model <name>",
                      url));
    }
    while (!url.empty() && url.back() == '/') url.pop_back();
    url += "/v2/models/" + o.model + "/infer";
  }
  RETURN_IF_ERROR(http::ParseUrl(url).status());

  res.rows = labelled.rows;
  std::vector<size_t> usable;
  for (size_t r = 0; r < labelled.rows; ++r) {
    bool ok = internal::CellText(*target, r).has_value();
    for (const Column* c : features) {
      if (!ok) break;
      ok = c->spec.kind == ColumnKind::kNumerical ? !std::isnan(c->numbers[r]) : c->codes[r] >= 0;
    }
    if (ok)
      usable.push_back(r);
    else
      ++res.skipped;
  }
  if (usable.empty()) return InvalidArgument("no row has all features and the label non-null");
  std::vector<std::optional<std::string>> pred(labelled.rows);
  std::vector<double> score(labelled.rows, std::nan(""));
  if (o.protocol == Protocol::kKServe) {
    for (size_t i = 0; i < usable.size(); i += o.batch) {
      Batch b;
      b.rows.assign(usable.begin() + i, usable.begin() + std::min(usable.size(), i + o.batch));
      RETURN_IF_ERROR(KServeBatch(o, url, features, b, &pred, &score));
      ++res.requests;
    }
  } else {
    for (size_t r : usable) {
      RETURN_IF_ERROR(OpenAIRow(o, features, r, res.task, &pred));
      ++res.requests;
    }
  }
  res.sent = usable.size();

  if (res.task == "regression") {
    std::vector<double> y, p;
    for (size_t r : usable) {
      double v;
      const std::string& t = *pred[r];
      char* end = nullptr;
      v = std::strtod(t.c_str(), &end);
      if (t.empty() || end != t.c_str() + t.size()) {
        return DataLoss(fmt::format("{}: prediction for data row {} is not a number: '{}'", url,
                                    r + 1, t.substr(0, 80)));
      }
      y.push_back(target->numbers[r]);
      p.push_back(v);
    }
    ASSIGN_OR_RETURN(res.regression, Regression(y, p));
    if (o.max_rmse && !(res.regression->rmse <= *o.max_rmse)) {
      res.failures.push_back(
          fmt::format("RMSE {:.4g} > {:.4g}", res.regression->rmse, *o.max_rmse));
    }
  } else {
    std::map<std::string, int32_t> classes;
    for (size_t r : usable) {
      classes.emplace(*internal::CellText(*target, r), 0);
      classes.emplace(*pred[r], 0);
    }
    int32_t k = 0;
    for (auto& [name, code] : classes) code = k++;
    std::vector<int32_t> y, p;
    std::vector<double> s;
    bool scores = k == 2;
    for (size_t r : usable) scores = scores && !std::isnan(score[r]);
    for (size_t r : usable) {
      y.push_back(classes[*internal::CellText(*target, r)]);
      p.push_back(classes[*pred[r]]);
      if (scores) s.push_back(score[r]);
    }
    ASSIGN_OR_RETURN(res.classification, Classification(y, p, k, s));
    if (o.min_accuracy && !(res.classification->accuracy >= *o.min_accuracy)) {
      res.failures.push_back(
          fmt::format("accuracy {:.4f} < {:.4f}", res.classification->accuracy, *o.min_accuracy));
    }
    if (o.min_f1 && !(res.classification->f1_macro >= *o.min_f1)) {
      res.failures.push_back(
          fmt::format("F1 (macro) {:.4f} < {:.4f}", res.classification->f1_macro, *o.min_f1));
    }
  }
  res.passed = res.failures.empty();
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return res;
}

Json ValidateResult::ToJson() const {
  Json j;
  j["report"] = "gantry.drift.validate";
  j["version"] = 1;
  j["rows"] = rows;
  j["sent"] = sent;
  j["skipped"] = skipped;
  j["requests"] = requests;
  j["task"] = task;
  Json q = internal::QualityMetricsJson(classification, regression);
  j["quality"] = std::move(q);
  j["passed"] = passed;
  j["failures"] = failures;
  j["seconds"] = seconds;
  return j;
}

std::string ValidateResult::Render() const {
  std::string out = fmt::format(
      "Validated {} of {} rows ({} skipped for nulls) in {} requests, "
      "{:.2f} s.\n",
      sent, rows, skipped, requests, seconds);
  if (classification) {
    const auto& c = *classification;
    out += fmt::format(
        "  accuracy {:.4f}  F1 macro {:.4f}  F1 weighted {:.4f}  precision macro "
        "{:.4f}  recall macro {:.4f}{}\n",
        c.accuracy, c.f1_macro, c.f1_weighted, c.precision_macro, c.recall_macro,
        c.roc_auc < 0 ? "" : fmt::format("  ROC-AUC {:.4f}", c.roc_auc));
  }
  if (regression) {
    const auto& r = *regression;
    out += fmt::format("  MAE {:.4g}  MSE {:.4g}  RMSE {:.4g}  R² {:.4f}\n", r.mae, r.mse, r.rmse,
                       r.r2);
  }
  if (passed) {
    out += "PASS\n";
  } else {
    for (const std::string& f : failures) out += "FAIL: " + f + "\n";
  }
  return out;
}

}  // namespace gantry::drift
