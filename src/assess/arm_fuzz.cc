// libFuzzer target for the JSON source reader and the ARM template expander:
// the input is parsed with ParseSource and, when it is JSON, expanded as a
// template (its expressions, parameters, variables, copy loops and nested
// deployments are all reachable from the text). Every input must end in a
// Status, never a crash, a hang or undefined behaviour.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gantry/assess/inputs.h"
#include "gantry/assess/resource.h"

using namespace gantry;
using namespace gantry::assess;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Result<SourceDoc> doc = ParseSource(text, "fuzz.json");
  if (!doc.ok()) return 0;
  ArmOptions options;
  // Small bounds keep each run short; the limits themselves are what is tested.
  options.max_copy_count = 50;
  options.max_resources = 500;
  Result<std::vector<Resource>> rs = ExpandArmTemplate(*doc, options);
  if (rs.ok()) {
    for (const Resource& r : *rs) {
      (void)r.body.dump();  // every value must be dumpable (valid UTF-8, no markers left)
      (void)r.IsUnknown("properties");
    }
  }
  return 0;
}
