// `gantry ckpt ls|show|verify|prune|plan|bench|export`: flag parsing and
// printing only; the work is in gantry::ckpt.
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "gantry/ckpt/bench.h"
#include "gantry/ckpt/manager.h"
#include "gantry/core/checkpoint_interval.h"
#include "gantry/core/json.h"
#include "gantry/core/table.h"
#include "gantry/core/units.h"

namespace gantry::cli {
namespace {

struct CkptFlags {
  CommonFlags common;
  std::string dir;  // <root>/<run>
  int64_t step = -1;
  std::string verify = "full";
  bool no_fallback = false;
  // prune
  int keep_last = 0;
  int64_t keep_every = 0;
  std::string keep_for;
  // plan
  std::string save_time;
  std::string mtbf;
  std::string state_size;
  double budget = 0.1;
  // export
  std::string out;
  std::vector<std::string> names;
  // bench
  std::string size = "1G";
  int tensors = 16;
  int iters = 3;
};

// Opens DIR (<root>/<run>); only prune may modify it.
Result<std::unique_ptr<ckpt::CheckpointManager>> OpenDir(const CkptFlags& f,
                                                         bool writable = false) {
  std::string dir = f.dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  size_t slash = dir.rfind('/');
  ckpt::Options o;
  o.root = slash == std::string::npos ? "." : (slash == 0 ? "/" : dir.substr(0, slash));
  o.run = slash == std::string::npos ? dir : dir.substr(slash + 1);
  ASSIGN_OR_RETURN(o.verify, ckpt::ParseVerifyMode(f.verify));
  o.fallback = !f.no_fallback;
  o.read_only = !writable;
  o.retention.keep_last = f.keep_last;
  o.retention.keep_every = f.keep_every;
  if (!f.keep_for.empty()) {
    ASSIGN_OR_RETURN(auto d, ParseDuration(f.keep_for));
    o.retention.keep_for = std::chrono::duration_cast<std::chrono::seconds>(d);
  }
  return ckpt::CheckpointManager::Open(std::move(o));
}

Result<int64_t> ResolveStep(ckpt::CheckpointManager& m, const CkptFlags& f) {
  if (f.step >= 0) return f.step;
  ASSIGN_OR_RETURN(ckpt::LatestResult latest, m.Latest());
  for (const std::string& s : latest.skipped) std::cerr << "gantry ckpt: skipped " << s << "\n";
  return latest.step;
}

int RunLs(const CkptFlags& f) {
  auto m = OpenDir(f);
  if (!m.ok()) return Fail("ckpt ls", m.status());
  auto list = (*m)->List();
  if (!list.ok()) return Fail("ckpt ls", list.status());
  if (f.common.json) {
    Json arr = Json::array();
    for (const auto& c : *list) {
      if (!c.error.empty()) {
        arr.push_back({{"step", c.step}, {"path", c.path}, {"error", c.error}});
        continue;
      }
      arr.push_back({{"step", c.step},
                     {"path", c.path},
                     {"bytes", c.bytes},
                     {"tensors", c.tensors},
                     {"world_size", c.world_size},
                     {"created", c.created}});
    }
    std::cout << arr.dump(2) << "\n";
    return kExitOk;
  }
  Table t({"step", "size", "tensors", "ranks", "created"});
  t.SetAlign(0, Table::Align::kRight);
  t.SetAlign(1, Table::Align::kRight);
  t.SetAlign(2, Table::Align::kRight);
  std::string errors;
  for (const auto& c : *list) {
    if (!c.error.empty()) {
      // An unreadable manifest is not an empty checkpoint: say so.
      t.AddRow({std::to_string(c.step), "?", "?", "?", "unreadable manifest"});
      errors += "step " + std::to_string(c.step) + ": " + c.error + "\n";
      continue;
    }
    t.AddRow({std::to_string(c.step), FormatSize(c.bytes), std::to_string(c.tensors),
              std::to_string(c.world_size), c.created});
  }
  std::cout << t.Render();
  if (!errors.empty()) std::cerr << errors << "run gantry ckpt verify for details\n";
  return kExitOk;
}

int RunShow(const CkptFlags& f) {
  auto m = OpenDir(f);
  if (!m.ok()) return Fail("ckpt show", m.status());
  auto step = ResolveStep(**m, f);
  if (!step.ok()) return Fail("ckpt show", step.status());
  auto manifest = ReadJsonFile((*m)->StepDir(*step) + "/manifest.json");
  if (!manifest.ok()) return Fail("ckpt show", manifest.status());
  if (f.common.json) {
    std::cout << manifest->dump(2) << "\n";
    return kExitOk;
  }
  const Json& j = *manifest;
  std::cout << "step " << j.value("step", 0) << " in " << (*m)->StepDir(*step) << "\n"
            << "created " << j.value("created", "") << " by " << j.value("creator", "") << "\n"
            << "format version " << j.value("format_version", 0) << ", " << j["shards"].size()
            << " shard(s), chunk " << FormatSize(j.value("chunk_bytes", 0)) << "\n"
            << "metadata " << j["metadata"].dump() << "\n";
  Table t({"tensor", "dtype", "shape", "shard", "size"});
  t.SetAlign(4, Table::Align::kRight);
  for (const Json& e : j["tensors"]) {
    t.AddRow({e["name"].get<std::string>(), e["dtype"].get<std::string>(), e["shape"].dump(),
              std::to_string(e["shard"].get<int>()), FormatSize(e["length"].get<uint64_t>())});
  }
  std::cout << t.Render();
  return kExitOk;
}

int RunVerify(const CkptFlags& f) {
  auto m = OpenDir(f);
  if (!m.ok()) return Fail("ckpt verify", m.status());
  auto mode = ckpt::ParseVerifyMode(f.verify);
  if (!mode.ok()) return Fail("ckpt verify", mode.status());
  std::vector<int64_t> steps;
  if (f.step >= 0) {
    steps.push_back(f.step);
  } else {
    auto list = (*m)->List();
    if (!list.ok()) return Fail("ckpt verify", list.status());
    for (const auto& c : *list) steps.push_back(c.step);
  }
  int rc = kExitOk;
  Json out = Json::array();
  for (int64_t step : steps) {
    auto r = (*m)->Verify(step, *mode);
    if (f.common.json) {
      out.push_back({{"step", step},
                     {"ok", r.ok()},
                     {"error", r.ok() ? "" : r.status().message()},
                     {"bytes_checked", r.ok() ? r->bytes_checked : 0}});
    } else if (r.ok()) {
      std::cout << "step " << step << ": ok (" << FormatSize(r->bytes_checked) << " in "
                << r->chunks_checked << " chunks checked, mode " << f.verify << ")\n";
    } else {
      std::cout << "step " << step << ": FAILED: " << r.status().message() << "\n";
    }
    if (!r.ok()) rc = kExitCheckFailed;
  }
  if (f.common.json) std::cout << out.dump(2) << "\n";
  return rc;
}

int RunPrune(const CkptFlags& f) {
  if (f.keep_last <= 0 && f.keep_every <= 0 && f.keep_for.empty()) {
    std::cerr << "gantry ckpt prune: give at least one of --keep-last, --keep-every, --keep-for\n";
    return kExitUsage;
  }
  auto m = OpenDir(f, /*writable=*/true);
  if (!m.ok()) return Fail("ckpt prune", m.status());
  auto deleted = (*m)->Prune();
  if (!deleted.ok()) return Fail("ckpt prune", deleted.status());
  if (f.common.json) {
    std::cout << Json{{"deleted", *deleted}}.dump(2) << "\n";
  } else {
    std::cout << "deleted " << deleted->size() << " checkpoint(s)";
    for (int64_t s : *deleted) std::cout << " " << s;
    std::cout << "\n";
  }
  return kExitOk;
}

int RunPlan(const CkptFlags& f) {
  auto c = ParseDuration(f.save_time);
  if (!c.ok()) return Fail("ckpt plan", c.status().WithContext("--save-time"));
  auto mtbf = ParseDuration(f.mtbf);
  if (!mtbf.ok()) return Fail("ckpt plan", mtbf.status().WithContext("--mtbf"));
  uint64_t bytes = 0;
  if (!f.state_size.empty()) {
    auto b = ParseSize(f.state_size);
    if (!b.ok()) return Fail("ckpt plan", b.status().WithContext("--state-size"));
    bytes = *b;
  }
  auto seconds = [](std::chrono::nanoseconds d) {
    return std::chrono::duration<double>(d).count();
  };
  auto p = PlanInterval(seconds(*c), seconds(*mtbf), bytes, f.budget);
  if (!p.ok()) return Fail("ckpt plan", p.status());
  auto fmt = [](double s) {
    return FormatDuration(std::chrono::nanoseconds(static_cast<int64_t>(s * 1e9)));
  };
  if (f.common.json) {
    Json j{{"save_s", seconds(*c)},
           {"mtbf_s", seconds(*mtbf)},
           {"young_s", p->young_s},
           {"daly_s", p->daly_s},
           {"overhead_fraction", p->overhead_fraction}};
    if (bytes > 0) j["needed_bytes_per_s"] = p->needed_bytes_per_s;
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "save time C = " << fmt(seconds(*c)) << ", MTBF M = " << fmt(seconds(*mtbf)) << "\n"
            << "Young interval sqrt(2CM): " << fmt(p->young_s) << "\n"
            << "Daly interval:            " << fmt(p->daly_s) << " (use this)\n"
            << "expected overhead at the Daly interval: "
            << std::round(p->overhead_fraction * 1000) / 10 << "% of wall time\n";
  if (bytes > 0) {
    std::cout << "to save " << FormatSize(bytes) << " within " << f.budget * 100
              << "% of that interval the storage must write "
              << FormatSize(static_cast<uint64_t>(p->needed_bytes_per_s)) << "/s\n";
  }
  return kExitOk;
}

int RunExport(const CkptFlags& f) {
  if (f.out.empty()) {
    std::cerr << "gantry ckpt export: give -o FILE.safetensors\n";
    return kExitUsage;
  }
  auto m = OpenDir(f);
  if (!m.ok()) return Fail("ckpt export", m.status());
  auto step = ResolveStep(**m, f);
  if (!step.ok()) return Fail("ckpt export", step.status());
  auto loaded = (*m)->Load(*step, f.names);
  if (!loaded.ok()) return Fail("ckpt export", loaded.status());
  std::vector<ckpt::TensorView> views;
  for (const ckpt::Tensor& t : loaded->tensors) {
    views.push_back({t.name, t.dtype, t.shape, t.data.data(), t.data.size()});
  }
  Status s = ckpt::WriteSafetensors(f.out, views);
  if (!s.ok()) return Fail("ckpt export", s);
  std::cout << "wrote step " << *step << " (" << views.size() << " tensors) to " << f.out << "\n";
  return kExitOk;
}

int RunBench(const CkptFlags& f) {
  auto size = ParseSize(f.size);
  if (!size.ok()) return Fail("ckpt bench", size.status().WithContext("--size"));
  ckpt::BenchOptions o;
  o.dir = f.dir;
  o.state_bytes = *size;
  o.tensors = f.tensors;
  o.iterations = f.iters;
  if (!f.common.json)
    std::cerr << "gantry ckpt bench: " << FormatSize(*size) << " in " << f.dir << "...\n";
  auto r = ckpt::RunBench(o);
  if (!r.ok()) return Fail("ckpt bench", r.status());
  if (f.common.json) {
    std::cout << r->ToJson().dump(2) << "\n";
  } else {
    std::cout << r->RenderText();
  }
  return kExitOk;
}

}  // namespace

void RegisterCkpt(CLI::App& app, Action* action) {
  auto flags = std::make_shared<CkptFlags>();
  CLI::App* ckpt = app.add_subcommand("ckpt",
                                      "Checkpoints: list, inspect, verify, prune, plan, "
                                      "benchmark and export (gantry ckpt --help)");
  ckpt->require_subcommand(1);
  auto add_dir = [&](CLI::App* c) {
    c->add_option("dir", flags->dir, "Run directory: <root>/<run>")->required();
    AddCommonFlags(c, &flags->common);
  };
  auto set = [&](CLI::App* c, int (*fn)(const CkptFlags&)) {
    c->callback([flags, action, fn] {
      *action = [flags, fn] {
        if (!ApplyCommonFlags(flags->common)) return kExitUsage;
        return fn(*flags);
      };
    });
  };

  CLI::App* ls = ckpt->add_subcommand("ls", "List committed checkpoints of a run");
  add_dir(ls);
  set(ls, RunLs);

  CLI::App* show = ckpt->add_subcommand("show", "Show one checkpoint's manifest (default: latest)");
  add_dir(show);
  show->add_option("--step", flags->step, "Step to show (default: the latest that verifies)");
  set(show, RunShow);

  CLI::App* verify =
      ckpt->add_subcommand("verify", "Verify checksums (exit 1 when any step is corrupt)");
  add_dir(verify);
  verify->add_option("--step", flags->step, "Step to verify (default: every committed step)");
  verify->add_option("--mode", flags->verify, "full, sample or none")->capture_default_str();
  set(verify, RunVerify);

  CLI::App* prune =
      ckpt->add_subcommand("prune", "Delete old checkpoints (the newest is always kept)");
  add_dir(prune);
  prune->add_option("--keep-last", flags->keep_last, "Keep the N newest steps");
  prune->add_option("--keep-every", flags->keep_every, "Keep steps divisible by K");
  prune->add_option("--keep-for", flags->keep_for, "Keep steps younger than this (e.g. 7d, 12h)");
  set(prune, RunPrune);

  CLI::App* plan = ckpt->add_subcommand("plan",
                                        "Optimal checkpoint interval (Young, Daly) from "
                                        "save time and MTBF");
  plan->add_option("--save-time", flags->save_time, "Measured save time C, e.g. 40s")->required();
  plan->add_option("--mtbf", flags->mtbf, "Mean time between failures or preemptions M, e.g. 24h")
      ->required();
  plan->add_option("--state-size", flags->state_size,
                   "Checkpoint size, e.g. 80G (adds needed bandwidth)");
  plan->add_option("--budget", flags->budget, "Fraction of the interval a save may take")
      ->capture_default_str();
  AddCommonFlags(plan, &flags->common);
  set(plan, RunPlan);

  CLI::App* bench =
      ckpt->add_subcommand("bench", "Measure save, async save and load in a directory");
  bench->add_option("dir", flags->dir, "Scratch directory on the disk to measure")->required();
  bench->add_option("--size", flags->size, "State size (fp32)")->capture_default_str();
  bench->add_option("--tensors", flags->tensors, "Number of tensors")->capture_default_str();
  bench->add_option("--iters", flags->iters, "Repetitions (best is reported)")
      ->capture_default_str();
  AddCommonFlags(bench, &flags->common);
  set(bench, RunBench);

  CLI::App* exp =
      ckpt->add_subcommand("export", "Write one checkpoint as a plain safetensors file");
  add_dir(exp);
  exp->add_option("--step", flags->step, "Step to export (default: the latest that verifies)");
  exp->add_option("-o,--out", flags->out, "Output .safetensors file")->required();
  exp->add_option("--names", flags->names, "Only these tensors")->delimiter(',');
  set(exp, RunExport);
}

}  // namespace gantry::cli
