// DriftReport renderers: JSON (stable keys), a terminal table and one
// self-contained HTML page (inline CSS and SVG, no scripts, no external
// resources; every string from the data is escaped).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gantry/core/table.h"
#include "gantry/core/text.h"
#include "gantry/drift/drift.h"
#include "names.h"
#include "quality.h"

namespace gantry::drift {
namespace {

Json Number(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

std::string Fixed(double v, int digits = 4) {
  if (std::isnan(v)) return "-";
  if (v != 0 && std::fabs(v) < 1e-4) return fmt::format("{:.2e}", v);
  return fmt::format("{:.{}f}", v, digits);
}

std::string Percent(double share) { return fmt::format("{:.1f}%", 100.0 * share); }

// HTML text and attribute values (core/text.h).
std::string Escape(std::string_view s) { return EscapeMarkup(s); }

std::string_view KindText(ColumnKind k) { return k == ColumnKind::kNumerical ? "num" : "cat"; }

// Short label for a bin edge on an axis.
std::string EdgeLabel(double v) {
  if (std::fabs(v) >= 1e5 || (v != 0 && std::fabs(v) < 1e-2)) return fmt::format("{:.3g}", v);
  return fmt::format("{:.2f}", v);
}

constexpr size_t kMaxBarsShown = 40;

// Reference and current shares as overlaid bars: reference filled blue,
// current orange, both translucent so the overlap reads as a third colour.
std::string Svg(const ColumnDrift& c) {
  std::vector<double> r = c.reference_shares, q = c.current_shares;
  size_t n = std::max(r.size(), q.size());
  r.resize(n, 0.0);
  q.resize(n, 0.0);
  size_t hidden = 0;
  if (n > kMaxBarsShown) {
    hidden = n - kMaxBarsShown;
    n = kMaxBarsShown;
  }
  const double w = 560, h = 160, left = 40, bottom = 30, top = 10;
  double peak = 0;
  for (size_t i = 0; i < n; ++i) peak = std::max({peak, r[i], q[i]});
  if (peak <= 0) peak = 1;
  std::string s = fmt::format(
      "<svg class=\"hist\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "viewBox=\"0 0 {:.0f} {:.0f}\" role=\"img\" aria-label=\"{}\">",
      w + left, h + bottom + top, w + left, h + bottom + top, Escape("histogram of " + c.column));
  s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" class=\"axis\"/>", left,
                   top + h, left + w);
  s += fmt::format("<text x=\"2\" y=\"{:.0f}\" class=\"lbl\">{:.0f}%</text>", top + 8, 100 * peak);
  if (n == 0) {
    s += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\" class=\"lbl\">no data</text>", left + 10,
                     top + h / 2);
  }
  const double bw = n ? w / n : w;
  for (size_t i = 0; i < n; ++i) {
    double x = left + i * bw;
    double rh = h * r[i] / peak, qh = h * q[i] / peak;
    s += fmt::format(
        "<rect class=\"ref\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\"/>", x + 1,
        top + h - rh, std::max(bw - 2, 0.5), rh);
    s += fmt::format(
        "<rect class=\"cur\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\"/>", x + 1,
        top + h - qh, std::max(bw - 2, 0.5), qh);
    if (!c.categories.empty() && i < c.categories.size() && (n <= 12 || i % (n / 12 + 1) == 0)) {
      std::string name =
          c.categories[i].size() > 12 ? c.categories[i].substr(0, 11) + "…" : c.categories[i];
      s += fmt::format("<text x=\"{:.2f}\" y=\"{:.0f}\" class=\"lbl\">{}</text>", x + 2,
                       top + h + 14, Escape(name));
    }
  }
  if (c.categories.empty() && c.edges.size() >= 2) {
    s += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\" class=\"lbl\">{}</text>", left, top + h + 14,
                     Escape(EdgeLabel(c.edges.front())));
    s += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\" class=\"lbl\" text-anchor=\"end\">{}</text>",
                     left + w, top + h + 14, Escape(EdgeLabel(c.edges.back())));
  }
  if (hidden > 0) {
    s += fmt::format(
        "<text x=\"{:.0f}\" y=\"{:.0f}\" class=\"lbl\" text-anchor=\"end\">+{} more "
        "categories not drawn</text>",
        left + w, top + h + 27, hidden);
  }
  s += "</svg>";
  return s;
}

constexpr std::string_view kCss = R"css(
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:1000px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em}
.banner{padding:1em 1.2em;border-radius:6px;margin:1em 0;font-size:1.05em}
.banner.drift{background:#fde2e1;border:1px solid #e0605a}
.banner.ok{background:#e1f5e4;border:1px solid #4caf62}
table{border-collapse:collapse;width:100%;font-size:.9em}
th,td{border-bottom:1px solid #ddd;padding:.35em .5em;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.drifted td{background:#fff3f2}
.yes{color:#b3261e;font-weight:600}.no{color:#1e7b34}
.col{border:1px solid #e4e4e4;border-radius:6px;padding:.6em 1em;margin:1em 0}
.hist .ref{fill:#3b78c4;fill-opacity:.55}.hist .cur{fill:#f08a24;fill-opacity:.55}
.hist .axis{stroke:#888}.hist .lbl{font-size:10px;fill:#555}
.key span{display:inline-block;width:.9em;height:.9em;margin:0 .3em 0 1em;vertical-align:middle}
.key .r{background:#3b78c4;opacity:.55}.key .c{background:#f08a24;opacity:.55}
.meta{color:#666;font-size:.85em}
)css";

}  // namespace

Json DriftReport::ToJson() const {
  Json j;
  j["report"] = "gantry.drift";
  j["version"] = 1;
  j["reference_rows"] = reference_rows;
  j["current_rows"] = current_rows;
  j["dataset_drift"] = dataset_drift;
  j["drifted_share"] = drifted_share;
  j["drift_share"] = drift_share;
  Json cols = Json::array();
  for (const ColumnDrift& c : columns) {
    Json o;
    o["column"] = c.column;
    o["role"] = c.role == Role::kPrediction ? "prediction" : "feature";
    o["type"] = c.kind == ColumnKind::kNumerical ? "numerical" : "categorical";
    o["test"] = StatTestName(c.test);
    o["statistic"] = Number(c.statistic);
    o["p_value"] = c.p_value < 0 ? Json(nullptr) : Number(c.p_value);
    o["threshold"] = c.threshold;
    o["drifted"] = c.drifted;
    o["exact"] = c.exact;
    o["null_rate"] = c.null_rate;
    o["type_error_rate"] = c.type_error_rate;
    o["out_of_range_rate"] = c.out_of_range_rate;
    if (!c.note.empty()) o["note"] = c.note;
    Json hist;
    if (c.kind == ColumnKind::kNumerical) {
      Json edges = Json::array();
      for (double e : c.edges) edges.push_back(Number(e));
      hist["edges"] = std::move(edges);
    } else {
      hist["categories"] = c.categories;
    }
    hist["reference"] = c.reference_shares;
    hist["current"] = c.current_shares;
    o["histogram"] = std::move(hist);
    cols.push_back(std::move(o));
  }
  j["columns"] = std::move(cols);
  Json q = Json::object();
  if (classification || regression) {
    q["task"] = classification ? "classification" : "regression";
    q.update(internal::QualityMetricsJson(classification, regression));
  }
  j["quality"] = q.empty() ? Json(nullptr) : std::move(q);
  j["seconds"] = seconds;
  return j;
}

std::string DriftReport::RenderTable() const {
  gantry::Table t({"column", "type", "test", "statistic", "p-value", "threshold", "drifted",
                   "null %", "out-of-range %"});
  for (size_t i : {3, 4, 5, 7, 8}) t.SetAlign(i, gantry::Table::Align::kRight);
  for (const ColumnDrift& c : columns) {
    std::string name =
        c.column + (c.role == Role::kPrediction ? " (prediction)" : "") + (c.exact ? "" : " ~");
    t.AddRow({name, std::string(KindText(c.kind)), std::string(StatTestName(c.test)),
              Fixed(c.statistic), c.p_value < 0 ? "-" : Fixed(c.p_value), Fixed(c.threshold, 3),
              c.note.empty() ? (c.drifted ? "YES" : "no") : "n/a", Percent(c.null_rate),
              Percent(c.out_of_range_rate)});
  }
  std::string out = t.Render();
  out += fmt::format(
      "\nDataset drift: {} ({:.0f}% of feature columns drifted, rule >= {:.0f}%); reference {} "
      "rows, current {} rows.\n",
      dataset_drift ? "YES" : "no", 100 * drifted_share, 100 * drift_share, reference_rows,
      current_rows);
  for (const ColumnDrift& c : columns) {
    if (!c.note.empty()) out += fmt::format("  {}: not tested: {}\n", c.column, c.note);
  }
  bool approx = std::any_of(columns.begin(), columns.end(), [](const auto& c) { return !c.exact; });
  if (approx) out += "  ~ the reference was stored as a quantile sketch: results are approximate\n";
  if (classification) {
    const auto& c = *classification;
    out += fmt::format(
        "Model quality (classification): accuracy {:.4f}, F1 macro {:.4f}, F1 "
        "weighted {:.4f}, precision macro {:.4f}, recall macro {:.4f}{}\n",
        c.accuracy, c.f1_macro, c.f1_weighted, c.precision_macro, c.recall_macro,
        c.roc_auc < 0 ? "" : fmt::format(", ROC-AUC {:.4f}", c.roc_auc));
  } else if (regression) {
    const auto& r = *regression;
    out +=
        fmt::format("Model quality (regression): MAE {:.4g}, MSE {:.4g}, RMSE {:.4g}, R² {:.4f}\n",
                    r.mae, r.mse, r.rmse, r.r2);
  }
  return out;
}

std::string DriftReport::RenderHtml() const {
  int drifted = 0, features = 0;
  for (const ColumnDrift& c : columns) {
    if (c.role != Role::kFeature) continue;
    ++features;
    drifted += c.drifted;
  }
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += "<title>Gantry drift report</title>\n<style>";
  h += kCss;
  h += "</style>\n</head>\n<body>\n<h1>Gantry drift report</h1>\n";
  h += fmt::format(
      "<div class=\"banner {}\"><strong>Dataset drift: {}</strong> &mdash; {} of {} feature "
      "columns "
      "drifted ({}; the rule is &ge; {}). Reference {} rows, current {} "
      "rows.</div>\n",
      dataset_drift ? "drift" : "ok", dataset_drift ? "detected" : "not detected", drifted,
      features, Escape(Percent(drifted_share)), Escape(Percent(drift_share)), reference_rows,
      current_rows);
  if (classification || regression) {
    h += "<h2>Model quality</h2>\n<table>\n<tr><th>metric</th><th>value</th></tr>\n";
    auto row = [&](std::string_view name, double v) {
      h += fmt::format("<tr><td>{}</td><td class=\"n\">{}</td></tr>\n", Escape(name),
                       Escape(Fixed(v)));
    };
    if (classification) {
      const auto& c = *classification;
      row("accuracy", c.accuracy);
      row("precision (macro)", c.precision_macro);
      row("recall (macro)", c.recall_macro);
      row("F1 (macro)", c.f1_macro);
      row("F1 (weighted)", c.f1_weighted);
      if (c.roc_auc >= 0) row("ROC-AUC", c.roc_auc);
    } else {
      const auto& r = *regression;
      row("MAE", r.mae);
      row("MSE", r.mse);
      row("RMSE", r.rmse);
      row("R²", r.r2);
    }
    h += "</table>\n";
  }
  h += "<h2>Columns</h2>\n<table>\n<tr><th>column</th><th>type</th><th>test</th><th>statistic</th>"
       "<th>p-value</th><th>threshold</th><th>drifted</th><th>null %</th><th>type errors %</th>"
       "<th>out of range %</th></tr>\n";
  for (const ColumnDrift& c : columns) {
    h += fmt::format(
        "<tr{}><td><a href=\"#col-{}\">{}</a></td><td>{}</td><td>{}</td><td class=\"n\">{}</td>"
        "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"{}\">{}</td><td class=\"n\">{}"
        "</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
        c.drifted ? " class=\"drifted\"" : "", &c - columns.data(),
        Escape(c.column) + (c.role == Role::kPrediction ? " (prediction)" : ""), KindText(c.kind),
        Escape(StatTestName(c.test)), Escape(Fixed(c.statistic)),
        c.p_value < 0 ? "-" : Escape(Fixed(c.p_value)), Escape(Fixed(c.threshold, 3)),
        c.drifted ? "yes" : "no", c.note.empty() ? (c.drifted ? "yes" : "no") : "n/a",
        Escape(Percent(c.null_rate)), Escape(Percent(c.type_error_rate)),
        Escape(Percent(c.out_of_range_rate)));
  }
  h += "</table>\n<h2>Distributions</h2>\n<p class=\"key\"><span class=\"r\"></span>reference"
       "<span class=\"c\"></span>current</p>\n";
  for (const ColumnDrift& c : columns) {
    h +=
        fmt::format("<div class=\"col\" id=\"col-{}\">\n<h3>{} <span class=\"{}\">{}</span></h3>\n",
                    &c - columns.data(), Escape(c.column), c.drifted ? "yes" : "no",
                    c.drifted ? "drifted" : "no drift");
    h += fmt::format("<p class=\"meta\">{} &middot; {} = {}{}{}</p>\n",
                     c.kind == ColumnKind::kNumerical ? "numerical" : "categorical",
                     Escape(StatTestName(c.test)), Escape(Fixed(c.statistic)),
                     c.p_value < 0 ? "" : Escape(fmt::format(", p = {}", Fixed(c.p_value))),
                     c.note.empty() ? "" : Escape(" (not tested: " + c.note + ")"));
    h += Svg(c);
    h += "\n</div>\n";
  }
  h += fmt::format("<p class=\"meta\">Made by gantry drift in {:.3f} s.</p>\n</body>\n</html>\n",
                   seconds);
  return h;
}

}  // namespace gantry::drift
