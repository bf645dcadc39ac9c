// libFuzzer target for the readers of user files in `gantry advise`: catalog
// YAML, CSV price sheets and workload YAML (then a full recommendation on the
// built-in catalog, so odd but accepted numbers go through the arithmetic).
// The first byte picks the reader. Every input must end in a Status, never a
// crash, a hang or undefined behaviour.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gantry/advise/advise.h"
#include "gantry/advise/catalog.h"
#include "gantry/core/config.h"

using namespace gantry;
using namespace gantry::advise;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  static const Catalog* builtin = [] {
    Result<Catalog> c = Catalog::Default();
    return c.ok() ? new Catalog(std::move(*c)) : nullptr;
  }();
  if (builtin == nullptr) __builtin_trap();  // the shipped catalog must load
  switch (data[0] % 3) {
    case 0: {
      Result<Catalog> c = Catalog::LoadString(text, "fuzz.yaml");
      if (c.ok()) {
        for (const VmSize& s : c->sizes()) {
          (void)c->AcceleratorOf(s);
          (void)s.Family();
        }
      }
      break;
    }
    case 1: {
      Catalog copy = *builtin;
      (void)copy.MergePriceSheetString(text, "fuzz.csv");
      break;
    }
    default: {
      Result<Config> cfg = Config::LoadString(text, "fuzz.yaml");
      if (!cfg.ok()) break;
      Result<Workload> w = ParseWorkload(*cfg);
      if (!w.ok()) break;
      w->max_nodes = std::min(w->max_nodes, 8);  // keep one input fast
      Result<Advice> a = Recommend(*w, *builtin, AdviseOptions{});
      if (a.ok()) (void)RenderAdviceText(*a, 3);
      break;
    }
  }
  return 0;
}
