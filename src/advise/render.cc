// Text, Markdown and JSON forms of advice (see include/gantry/advise/advise.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "format.h"
#include "gantry/advise/advise.h"
#include "gantry/core/table.h"
#include "gantry/core/text.h"

namespace gantry::advise {
namespace {

// "$1,234", "$123", "$12.34"; "-" for unknown.
std::string Money(std::optional<double> usd) {
  if (!usd) return "-";
  double v = *usd;
  if (v < 100) return fmt::format("${:.2f}", v);
  return "$" + GroupThousands(static_cast<int64_t>(std::nearbyint(v)));  // ties to even, as {:.0f}
}

std::string Hours(std::optional<double> h) { return h ? internal::FormatHours(*h) : "-"; }

std::string Gib(double bytes) { return internal::GibNumber(bytes); }

std::string Ms(double s) {
  return s * 1000 >= 100 ? fmt::format("{:.0f}", s * 1000) : fmt::format("{:.1f}", s * 1000);
}

std::optional<double> Opt(const CostLine* l, bool month) {
  if (!l) return std::nullopt;
  return month ? l->month_usd : l->run_usd;
}

std::string Layout(const Candidate& c, const Workload& w) {
  if (c.size->kind == SizeKind::kCpu) return fmt::format("{} x {} vCPU", c.nodes, c.size->vcpus);
  if (w.stage == Stage::kTraining) {
    return fmt::format("{} x {:g} GPU", c.nodes, c.size->gpus);
  }
  return fmt::format("{} x {:g} GPU, TP {} x {}", c.nodes, c.size->gpus, c.tensor_parallel,
                     c.replicas_per_node);
}

std::string MemoryCell(const Candidate& c) {
  return fmt::format("{} / {}", Gib(c.memory_needed), Gib(c.memory_usable));
}

struct Rows {
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;
};

Rows BuildRows(const Advice& a, int top) {
  const Workload& w = a.workload;
  Rows r;
  if (w.stage == Stage::kTraining) {
    r.head = {"#",        "size",     "VMs x GPUs", "GiB need/usable", "ZeRO", "time",
              "PAYG run", "spot run", "spot?"};
  } else {
    r.head = {"#",         "size",     "VMs x GPUs, TP x replicas", "GiB need/usable",
              "TTFT ms",   "ms/token", "req/s per replica",         "PAYG month",
              "spot month"};
  }
  int n = 0;
  for (const Candidate& c : a.ranked) {
    if (++n > top) break;
    std::vector<std::string> row = {std::to_string(n), c.size->name, Layout(c, w), MemoryCell(c)};
    if (w.stage == Stage::kTraining) {
      row.push_back(c.size->kind == SizeKind::kGpu ? std::to_string(c.zero_stage) : "-");
      row.push_back(Hours(c.hours));
      row.push_back(Money(Opt(c.Cost(PricingModel::kPayg), false)));
      row.push_back(Money(Opt(c.Cost(PricingModel::kSpot), false)));
      row.push_back(c.spot_advisable ? "yes" : "no");
    } else {
      row.push_back(c.perf ? Ms(c.perf->first_token_s) : "-");
      row.push_back(c.perf ? Ms(c.perf->per_token_s) : "-");
      row.push_back(c.perf ? fmt::format("{:.2f}", c.perf->requests_per_s) : "-");
      row.push_back(Money(Opt(c.Cost(PricingModel::kPayg), true)));
      row.push_back(Money(Opt(c.Cost(PricingModel::kSpot), true)));
    }
    r.rows.push_back(std::move(row));
  }
  return r;
}

std::string TextTable(const Rows& r) {
  Table t(r.head);
  t.SetAlign(0, Table::Align::kRight);
  for (size_t col = 3; col < r.head.size(); ++col) t.SetAlign(col, Table::Align::kRight);
  for (const auto& row : r.rows) t.AddRow(row);
  return t.Render();
}

std::string MarkdownTable(const Rows& r) {
  auto line = [](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (const std::string& c : cells) out += " " + c + " |";
    return out + "\n";
  };
  std::string out = line(r.head) + "|";
  for (size_t i = 0; i < r.head.size(); ++i) out += i < 3 ? "---|" : "---:|";
  out += "\n";
  for (const auto& row : r.rows) out += line(row);
  return out;
}

std::string Explain(const Candidate& c, const Workload& w, int rank, std::string_view bullet) {
  std::string out = fmt::format("{}. {} ({}{}{})\n", rank, c.size->name, c.size->series,
                                c.accelerator ? ", " + c.accelerator->name : "",
                                c.size->released ? fmt::format(", {}", c.size->released) : "");
  auto line = [&](const std::string& text) { out += fmt::format("   {} {}\n", bullet, text); };
  if (w.stage == Stage::kTraining && c.training_memory) {
    const TrainingMemory& m = *c.training_memory;
    line(
        fmt::format("fits: {} GiB per {} (weights {}, gradients {}, optimizer {}, activations "
                    "{}) of {} GiB usable",
                    Gib(m.total), c.size->kind == SizeKind::kGpu ? "GPU" : "VM", Gib(m.weights),
                    Gib(m.gradients), Gib(m.optimizer), Gib(m.activations), Gib(c.memory_usable)));
    if (c.hours) {
      line(fmt::format("time: {} on {} VM(s) = {:g} GPUs at {:.0f}% MFU of {:.1f} TFLOPS {}",
                       Hours(c.hours), c.nodes, c.nodes * c.size->gpus, 100 * c.mfu, c.peak_tflops,
                       PrecisionName(w.precision)));
    }
  }
  if (w.stage == Stage::kInference && c.inference_memory) {
    const InferenceMemory& m = *c.inference_memory;
    line(
        fmt::format("fits: {} GiB in all (weights {}, KV cache {} for {} x {} tokens, overhead "
                    "{}) = {} GiB per GPU at tensor parallel {}, of {} GiB usable",
                    Gib(m.total), Gib(m.weights), Gib(m.kv_cache), w.batch,
                    w.context > 0 ? w.context : w.prompt_tokens + w.output_tokens, Gib(m.overhead),
                    Gib(c.memory_needed), c.tensor_parallel, Gib(c.memory_usable)));
    if (c.perf) {
      line(
          fmt::format("speed: first token {} ms, {} ms per output token, {:.0f} tokens/s and "
                      "{:.2f} requests/s per replica (batch {}); {} replica(s) per VM",
                      Ms(c.perf->first_token_s), Ms(c.perf->per_token_s), c.perf->tokens_per_s,
                      c.perf->requests_per_s, w.batch, c.replicas_per_node));
    }
  }
  std::string costs;
  for (const CostLine& l : c.costs) {
    if (!l.rate_per_hour) continue;
    if (!costs.empty()) costs += ", ";
    costs += fmt::format(
        "{} {}/h{}", PricingModelName(l.model), Money(l.rate_per_hour),
        l.rate_from_catalog || l.model == PricingModel::kPayg || l.model == PricingModel::kSpot
            ? ""
            : "*");
  }
  if (!costs.empty()) {
    line(fmt::format("cost{}: ", c.nodes > 1 ? fmt::format(" of {} VMs", c.nodes) : "") + costs +
         (costs.find('*') != std::string::npos
              ? " (* default discount off PAYG; see docs/advise.md)"
              : ""));
  }
  if (!c.spot_reason.empty()) line(c.spot_reason);
  for (const std::string& n : c.notes) line(n);
  return out;
}

Json CostJson(const CostLine& l) {
  Json j;
  j["model"] = PricingModelName(l.model);
  j["rate_per_hour"] = l.rate_per_hour ? Json(*l.rate_per_hour) : Json(nullptr);
  j["rate_from_catalog"] = l.rate_from_catalog;
  j["run_usd"] = l.run_usd ? Json(*l.run_usd) : Json(nullptr);
  j["month_usd"] = l.month_usd ? Json(*l.month_usd) : Json(nullptr);
  return j;
}

Json CandidateJson(const Candidate& c) {
  Json j;
  j["size"] = c.size->name;
  j["series"] = c.size->series;
  j["accelerator"] = c.accelerator ? Json(c.accelerator->name) : Json(nullptr);
  j["feasible"] = c.feasible;
  j["tier"] = c.tier;
  j["nodes"] = c.nodes;
  j["gpus_per_node"] = c.gpus_per_node;
  j["memory_needed_bytes"] = c.memory_needed;
  j["memory_usable_bytes"] = c.memory_usable;
  if (c.training_memory) {
    const TrainingMemory& m = *c.training_memory;
    j["zero_stage"] = c.zero_stage;
    j["training_memory"] = {{"weights", m.weights},
                            {"gradients", m.gradients},
                            {"optimizer", m.optimizer},
                            {"activations", m.activations},
                            {"total", m.total}};
  }
  if (c.inference_memory) {
    const InferenceMemory& m = *c.inference_memory;
    j["tensor_parallel"] = c.tensor_parallel;
    j["replicas_per_node"] = c.replicas_per_node;
    j["inference_memory"] = {{"weights", m.weights},
                             {"kv_cache", m.kv_cache},
                             {"kv_per_token", m.kv_per_token},
                             {"overhead", m.overhead},
                             {"total", m.total}};
  }
  j["hours"] = c.hours ? Json(*c.hours) : Json(nullptr);
  j["mfu"] = c.mfu;
  j["peak_tflops"] = c.peak_tflops;
  if (c.perf) {
    j["perf"] = {{"prefill_s", c.perf->prefill_s},
                 {"per_token_s", c.perf->per_token_s},
                 {"request_s", c.perf->request_s},
                 {"tokens_per_s", c.perf->tokens_per_s},
                 {"requests_per_s", c.perf->requests_per_s}};
  }
  Json costs = Json::array();
  for (const CostLine& l : c.costs) costs.push_back(CostJson(l));
  j["costs"] = costs;
  if (c.spot) {
    j["spot"] = {{"mtbf_s", c.spot->mtbf_s},
                 {"checkpoint_interval_s", c.spot->interval_s},
                 {"overhead_fraction", c.spot->overhead_fraction}};
  }
  j["spot_advisable"] = c.spot_advisable;
  j["spot_reason"] = c.spot_reason;
  j["rank_value"] = c.rank_value ? Json(*c.rank_value) : Json(nullptr);
  j["reasons_out"] = c.reasons_out;
  j["notes"] = c.notes;
  return j;
}

// Rejections with the same reason (a rule, usually) on one line, in catalog
// order of their first size: (reason, "size, size, ...").
std::vector<std::pair<std::string, std::string>> GroupRejected(const Advice& a) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Candidate& c : a.rejected) {
    std::string reason = c.reasons_out.empty() ? "-" : c.reasons_out.front();
    auto it =
        std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == reason; });
    if (it == out.end()) {
      out.emplace_back(reason, c.size->name);
    } else {
      it->second += ", " + c.size->name;
    }
  }
  return out;
}

}  // namespace

Json Advice::ToJson() const {
  Json j;
  j["version"] = 1;
  j["catalog"] = catalog_origin;
  j["currency"] = currency;
  const Workload& w = workload;
  j["workload"] = {{"name", w.name},
                   {"stage", StageName(w.stage)},
                   {"kind", ModelKindName(w.kind)},
                   {"params", w.model.params},
                   {"precision", PrecisionName(w.precision)},
                   {"region", w.region},
                   {"objective", ObjectiveName(w.objective)}};
  j["rules"] = rules;
  Json ranked_j = Json::array();
  for (const Candidate& c : ranked) ranked_j.push_back(CandidateJson(c));
  j["ranked"] = ranked_j;
  Json rejected_j = Json::array();
  for (const Candidate& c : rejected) rejected_j.push_back(CandidateJson(c));
  j["rejected"] = rejected_j;
  return j;
}

std::string RenderAdviceText(const Advice& a, int top) {
  const Workload& w = a.workload;
  std::string out = fmt::format(
      "workload: {}{} of a {} model, {:g}B parameters in {}; region {}, ranked by {}\n",
      w.name.empty() ? "" : w.name + ": ", StageName(w.stage), ModelKindName(w.kind),
      w.model.params / 1e9, PrecisionName(w.precision), w.region, ObjectiveName(w.objective));
  out += "rules:\n";
  for (const std::string& r : a.rules) out += "  - " + r + "\n";
  if (a.ranked.empty()) {
    out += "\nno size fits this workload; why each was ruled out:\n";
  } else {
    out += "\n" + TextTable(BuildRows(a, top)) + "\n";
    int n = 0;
    for (const Candidate& c : a.ranked) {
      if (++n > top) break;
      out += Explain(c, w, n, "-");
    }
    if (a.ranked.size() > static_cast<size_t>(top)) {
      out += fmt::format("({} more feasible sizes; --top N shows more)\n", a.ranked.size() - top);
    }
    out += "\nruled out:\n";
  }
  for (const auto& [reason, names] : GroupRejected(a)) {
    out += fmt::format("  {}: {}\n", names, reason);
  }
  out +=
      fmt::format("\ncatalog: {} (prices {} per VM hour, list prices; `gantry advise catalog`)\n",
                  a.catalog_origin, a.currency);
  return out;
}

std::string RenderAdviceMarkdown(const Advice& a, int top) {
  const Workload& w = a.workload;
  std::string out = fmt::format("# Advice: {}\n\n", w.name.empty() ? "workload" : w.name);
  out += fmt::format("{} of a {:g}B-parameter {} model in {}, region {}, ranked by {}.\n\n",
                     StageName(w.stage), w.model.params / 1e9, ModelKindName(w.kind),
                     PrecisionName(w.precision), w.region, ObjectiveName(w.objective));
  out += "## Rules applied\n\n";
  for (const std::string& r : a.rules) out += "- " + r + "\n";
  out += "\n## Ranked sizes\n\n";
  if (a.ranked.empty()) {
    out += "No size fits this workload.\n";
  } else {
    out += MarkdownTable(BuildRows(a, top));
    out += "\n## Why\n\n";
    int n = 0;
    for (const Candidate& c : a.ranked) {
      if (++n > top) break;
      out += Explain(c, w, n, "-");
    }
  }
  if (!a.rejected.empty()) {
    out += "\n## Ruled out\n\n";
    for (const auto& [reason, names] : GroupRejected(a)) {
      out += fmt::format("- {}: {}\n", names, reason);
    }
  }
  out +=
      fmt::format("\nCatalog: {} ({} per VM hour, list prices).\n", a.catalog_origin, a.currency);
  return out;
}

Json CommitAdvice::ToJson() const {
  Json j;
  j["version"] = 1;
  j["size"] = size->name;
  j["region"] = region;
  j["nodes"] = nodes;
  j["utilization"] = utilization;
  Json lines_j = Json::array();
  for (const CommitLine& l : lines) {
    lines_j.push_back(
        {{"model", PricingModelName(l.model)},
         {"rate_per_hour", l.rate_per_hour ? Json(*l.rate_per_hour) : Json(nullptr)},
         {"rate_from_catalog", l.rate_from_catalog},
         {"month_usd", l.month_usd ? Json(*l.month_usd) : Json(nullptr)},
         {"break_even_utilization", l.break_even ? Json(*l.break_even) : Json(nullptr)}});
  }
  j["lines"] = lines_j;
  j["cheapest"] = cheapest ? Json(PricingModelName(*cheapest)) : Json(nullptr);
  return j;
}

std::string CommitAdvice::RenderText() const {
  std::string out = fmt::format(
      "{} x {} in {}, needed {:.0f}% of the month ({:.0f} of {:.0f} h)\n\n", nodes, size->name,
      region, utilization * 100, utilization * kHoursPerMonth, kHoursPerMonth);
  Table t({"pricing", "rate/h", "month at this use", "break-even use", "verdict"});
  for (size_t c = 1; c < 4; ++c) t.SetAlign(c, Table::Align::kRight);
  bool derived = false;
  for (const CommitLine& l : lines) {
    std::string rate = Money(l.rate_per_hour);
    const bool metered = l.model == PricingModel::kPayg || l.model == PricingModel::kSpot;
    if (l.rate_per_hour && !l.rate_from_catalog && !metered) {
      rate += "*";
      derived = true;
    }
    std::string verdict;
    if (l.model == PricingModel::kSpot) {
      verdict = l.rate_per_hour ? "interruptible work only" : "price unknown";
    } else if (cheapest && *cheapest == l.model) {
      verdict = "cheapest";
    } else if (l.break_even && utilization < *l.break_even) {
      verdict = "PAYG is cheaper at this use";
    }
    t.AddRow({std::string(PricingModelName(l.model)), rate, Money(l.month_usd),
              l.break_even ? fmt::format("{:.0f}%", *l.break_even * 100) : "-", verdict});
  }
  out += t.Render();
  out +=
      "\nA commitment bills every hour; it beats PAYG when the VMs are needed more than its "
      "break-even share of the month.\n";
  if (derived) {
    out +=
        "* no rate in the catalog: a default discount off PAYG (docs/advise.md; override with "
        "--prices or --discount-*)\n";
  }
  return out;
}

}  // namespace gantry::advise
