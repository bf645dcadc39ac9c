// `gantry advise [recommend]|commit|catalog`: flag parsing and printing only;
// the work is in gantry::advise.
#include <fmt/format.h>

#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "cli.h"
#include "gantry/advise/advise.h"
#include "gantry/core/json.h"
#include "gantry/core/table.h"

namespace gantry::cli {
namespace {

struct AdviseFlags {
  CommonFlags common;
  std::string catalog;
  std::string prices;
  double reserved_1y = -1, reserved_3y = -1, savings_1y = -1, savings_3y = -1;
  // recommend
  std::string workload;
  std::string mfu_from;
  bool markdown = false;
  int top = 5;
  // Workload flags given (advise::WorkloadFlags names -> text), laid over the file.
  std::map<std::string, std::string> set;
  // commit
  std::string size;
  std::string region = "eastus";
  int nodes = 1;
  double utilization = 1.0;
  // catalog
  bool dump = false;
};

Result<advise::Catalog> LoadCatalog(const AdviseFlags& f) {
  Result<advise::Catalog> cat =
      f.catalog.empty() ? advise::Catalog::Default() : advise::Catalog::LoadFile(f.catalog);
  if (!cat.ok()) return cat.status();
  if (!f.prices.empty()) {
    Result<int> n = cat->MergePriceSheet(f.prices);
    if (!n.ok()) return n.status();
  }
  return cat;
}

Result<advise::Discounts> DiscountsFrom(const AdviseFlags& f) {
  advise::Discounts d;
  if (f.reserved_1y >= 0) d.reserved_1y = f.reserved_1y;
  if (f.reserved_3y >= 0) d.reserved_3y = f.reserved_3y;
  if (f.savings_1y >= 0) d.savings_1y = f.savings_1y;
  if (f.savings_3y >= 0) d.savings_3y = f.savings_3y;
  RETURN_IF_ERROR(advise::ValidateDiscounts(d));
  return d;
}

int RunRecommend(const AdviseFlags& f) {
  if (f.workload.empty() && f.set.find("stage") == f.set.end()) {
    std::cerr << "gantry advise: give --workload workload.yaml or at least --stage, --params and "
                 "the stage's numbers (see gantry advise --help and docs/advise.md)\n";
    return kExitUsage;
  }
  if (f.top < 1) {
    std::cerr << "gantry advise: --top " << f.top << " must be >= 1\n";
    return kExitUsage;
  }
  Result<advise::Workload> w = advise::LoadWorkload(f.workload, f.set);
  if (!w.ok()) return Fail("advise", w.status());
  if (!f.mfu_from.empty()) {
    if (f.set.count("mfu")) {
      std::cerr << "gantry advise: give --mfu or --mfu-from, not both\n";
      return kExitUsage;
    }
    Result<Json> report = ReadJsonFile(f.mfu_from);
    if (!report.ok()) return Fail("advise", report.status());
    Status s = advise::TakeMfuFromReport(*report, f.mfu_from, &*w);
    if (!s.ok()) return Fail("advise", s);
  }
  Result<advise::Catalog> cat = LoadCatalog(f);
  if (!cat.ok()) return Fail("advise", cat.status());
  Result<advise::Discounts> d = DiscountsFrom(f);
  if (!d.ok()) return Fail("advise", d.status());
  advise::AdviseOptions options;
  options.discounts = *d;
  Result<advise::Advice> advice = advise::Recommend(*w, *cat, options);
  if (!advice.ok()) return Fail("advise", advice.status());
  if (f.common.json) {
    std::cout << advice->ToJson().dump(2) << "\n";
  } else if (f.markdown) {
    std::cout << advise::RenderAdviceMarkdown(*advice, f.top);
  } else {
    std::cout << advise::RenderAdviceText(*advice, f.top);
  }
  return advice->ranked.empty() ? kExitCheckFailed : kExitOk;
}

int RunCommit(const AdviseFlags& f) {
  Result<advise::Catalog> cat = LoadCatalog(f);
  if (!cat.ok()) return Fail("advise commit", cat.status());
  Result<advise::Discounts> d = DiscountsFrom(f);
  if (!d.ok()) return Fail("advise commit", d.status());
  Result<advise::CommitAdvice> c =
      advise::AdviseCommit(*cat, f.size, f.region, f.nodes, f.utilization, *d);
  if (!c.ok()) return Fail("advise commit", c.status());
  if (f.common.json) {
    std::cout << c->ToJson().dump(2) << "\n";
  } else {
    std::cout << c->RenderText();
  }
  return kExitOk;
}

std::string Num(std::optional<double> v, const char* fmt_spec = "{:g}") {
  return v ? fmt::format(fmt::runtime(fmt_spec), *v) : "unknown";
}

int RunCatalog(const AdviseFlags& f) {
  if (f.dump) {
    if (!f.catalog.empty() || !f.prices.empty()) {
      std::cerr << "gantry advise catalog: --dump prints the built-in catalog; it takes no "
                   "--catalog or --prices\n";
      return kExitUsage;
    }
    std::cout << advise::DefaultCatalogText();
    return kExitOk;
  }
  Result<advise::Catalog> cat = LoadCatalog(f);
  if (!cat.ok()) return Fail("advise catalog", cat.status());
  if (f.common.json) {
    Json sizes = Json::array();
    for (const advise::VmSize& s : cat->sizes()) {
      const advise::Accelerator* a = cat->AcceleratorOf(s);
      advise::Price p = s.PriceIn(f.region);
      sizes.push_back({{"name", s.name},
                       {"series", s.series},
                       {"kind", s.kind == advise::SizeKind::kGpu ? "gpu" : "cpu"},
                       {"gpus", s.gpus},
                       {"accelerator", a ? Json(a->name) : Json(nullptr)},
                       {"vcpus", s.vcpus},
                       {"ram_gib", s.ram_gib},
                       {"infiniband_gbps", s.infiniband_gbps},
                       {"payg", p.payg ? Json(*p.payg) : Json(nullptr)},
                       {"spot", p.spot ? Json(*p.spot) : Json(nullptr)},
                       {"source", s.source}});
    }
    std::cout << Json{{"version", 1},
                      {"catalog", cat->origin()},
                      {"region", f.region},
                      {"sizes", sizes}}
                     .dump(2)
              << "\n";
    return kExitOk;
  }
  Table t({"size", "GPUs", "accelerator", "GPU GiB", "bf16 TFLOPS", "vCPU", "RAM GiB", "IB Gb/s",
           "PAYG $/h", "spot $/h"});
  for (size_t c = 1; c < 10; ++c) {
    if (c != 2) t.SetAlign(c, Table::Align::kRight);
  }
  for (const advise::VmSize& s : cat->sizes()) {
    const advise::Accelerator* a = cat->AcceleratorOf(s);
    advise::Price p = s.PriceIn(f.region);
    t.AddRow({s.name, a ? fmt::format("{:g}", s.gpus) : "-", a ? a->name : "-",
              a ? fmt::format("{:g}", a->memory_gib) : "-",
              a ? Num(a->PeakTflops(advise::NumberFormat::kBf16)) : "-", std::to_string(s.vcpus),
              fmt::format("{:g}", s.ram_gib),
              s.infiniband_gbps > 0 ? fmt::format("{:g}", s.infiniband_gbps) : "-",
              Num(p.payg, "{:.3f}"), Num(p.spot, "{:.3f}")});
  }
  std::cout << t.Render()
            << fmt::format("\ncatalog: {}; prices for {} ({} per VM hour)\n", cat->origin(),
                           f.region, cat->currency());
  return kExitOk;
}

void AddCatalogFlags(CLI::App* c, AdviseFlags* f) {
  c->add_option("--catalog", f->catalog,
                "Catalog YAML to use instead of the built-in one (format: docs/advise.md)");
  c->add_option("--prices", f->prices,
                "CSV price sheet laid over the catalog: size,region,payg,spot,reserved_1y,...");
}

void AddDiscountFlags(CLI::App* c, AdviseFlags* f) {
  c->add_option("--discount-reserved-1y", f->reserved_1y,
                "Discount off PAYG of a 1-year reservation where the catalog has no rate "
                "(default 0.35)");
  c->add_option("--discount-reserved-3y", f->reserved_3y, "Same, 3-year reservation (0.55)");
  c->add_option("--discount-savings-1y", f->savings_1y, "Same, 1-year savings plan (0.25)");
  c->add_option("--discount-savings-3y", f->savings_3y, "Same, 3-year savings plan (0.45)");
}

}  // namespace

void RegisterAdvise(CLI::App& app, Action* action) {
  auto flags = std::make_shared<AdviseFlags>();
  CLI::App* cmd = app.add_subcommand(
      "advise",
      "Pick the VM size: memory fit, time and cost under PAYG, reservations, savings plans and "
      "spot, with the rules applied. `gantry advise --workload w.yaml`; also `advise commit` and "
      "`advise catalog`. Exit 0 when a size fits, 1 when none does, 2 for usage errors.");
  cmd->require_subcommand(0, 1);
  AddCommonFlags(cmd, &flags->common);
  AddCatalogFlags(cmd, flags.get());
  AddDiscountFlags(cmd, flags.get());
  cmd->add_option("--workload", flags->workload, "Workload YAML (format: docs/advise.md)");
  cmd->add_flag("--markdown", flags->markdown, "A short Markdown report instead of the table");
  cmd->add_option(
      "--mfu-from", flags->mfu_from,
      "Take the MFU from a `gantry bench gemm --json` or `gantry doctor --json` report "
      "of a GPU node (applies to that GPU model; optimistic: a GEMM is an upper bound)");
  cmd->add_option("--top", flags->top, "Candidates to show and explain")->capture_default_str();
  for (const advise::WorkloadFlag& o : advise::WorkloadFlags()) {
    std::string name(o.name);
    cmd->add_option_function<std::string>(
           "--" + name, [flags, name](const std::string& v) { flags->set[name] = v; },
           std::string(o.help))
        ->group("Workload (override --workload fields)");
  }
  cmd->callback([cmd, flags, action] {
    if (!cmd->get_subcommands().empty()) return;
    *action = [flags] {
      if (!ApplyCommonFlags(flags->common)) return kExitUsage;
      return RunRecommend(*flags);
    };
  });

  CLI::App* commit = cmd->add_subcommand(
      "commit",
      "When a reservation or savings plan beats PAYG for one size: rates, monthly cost at your "
      "utilisation and the break-even utilisation");
  AddCommonFlags(commit, &flags->common);
  AddCatalogFlags(commit, flags.get());
  AddDiscountFlags(commit, flags.get());
  commit->add_option("--size", flags->size, "VM size, e.g. Standard_ND96isr_H100_v5")->required();
  commit->add_option("--region", flags->region, "Region for prices")->capture_default_str();
  commit->add_option("--nodes", flags->nodes, "Number of VMs")->capture_default_str();
  commit
      ->add_option("--utilization", flags->utilization,
                   "Share of the month the VMs are needed, (0, 1]")
      ->capture_default_str();
  commit->callback([flags, action] {
    *action = [flags] {
      if (!ApplyCommonFlags(flags->common)) return kExitUsage;
      return RunCommit(*flags);
    };
  });

  CLI::App* catalog = cmd->add_subcommand("catalog", "List the sizes of the catalog with prices");
  AddCommonFlags(catalog, &flags->common);
  AddCatalogFlags(catalog, flags.get());
  catalog->add_option("--region", flags->region, "Region for prices")->capture_default_str();
  catalog->add_flag("--dump", flags->dump, "Print the built-in catalog's YAML (to edit a copy)");
  catalog->callback([flags, action] {
    *action = [flags] {
      if (!ApplyCommonFlags(flags->common)) return kExitUsage;
      return RunCatalog(*flags);
    };
  });
}

}  // namespace gantry::cli
