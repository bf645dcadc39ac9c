// libFuzzer target for the readers of untrusted drift inputs: schema YAML,
// CSV and JSON Lines tables (then a profile and a comparison of the table
// with itself, so accepted odd values go through the statistics), and saved
// profile files. The first byte picks the reader. Every input must end in a
// Status, never a crash, a hang or undefined behaviour.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "gantry/drift/drift.h"

using namespace gantry;
using namespace gantry::drift;

namespace {

const Schema& FixedSchema() {
  static const Schema* schema = [] {
    Result<Schema> s = Schema::LoadString(
        "columns:\n  x: numerical\n  y: numerical\n  c: categorical\n"
        "  label: {type: categorical, role: target}\n"
        "  pred: {type: categorical, role: prediction}\n",
        "fuzz-schema.yaml");
    if (!s.ok()) __builtin_trap();
    return new Schema(std::move(*s));
  }();
  return *schema;
}

void ProfileAndCompare(const Table& t) {
  ProfileOptions po;
  po.max_exact_rows = 64;  // exercise the sketch path too
  po.sketch_points = 16;
  Result<Profile> p = Profile::Build(t, po);
  if (!p.ok()) return;
  CompareOptions co;
  co.threads = 1;
  Result<DriftReport> r = Compare(*p, t, co);
  if (r.ok()) (void)r->RenderHtml();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      (void)Schema::LoadString(text, "fuzz.yaml");
      break;
    case 1: {
      Result<Table> t = ReadTableString(text, "csv", FixedSchema(), "fuzz.csv");
      if (t.ok()) ProfileAndCompare(*t);
      break;
    }
    case 2: {
      Result<Table> t = ReadTableString(text, "jsonl", FixedSchema(), "fuzz.jsonl");
      if (t.ok()) ProfileAndCompare(*t);
      break;
    }
    default: {
      // Profile::Load reads a file: write the bytes to a private temp file.
      static const std::string path = "/tmp/gantry-fuzz-profile-" + std::to_string(::getpid());
      FILE* f = std::fopen(path.c_str(), "wb");
      if (f == nullptr) return 0;
      std::fwrite(text.data(), 1, text.size(), f);
      std::fclose(f);
      (void)Profile::Load(path);
      break;
    }
  }
  return 0;
}
