// libFuzzer target for the checkpoint readers that take untrusted bytes: a
// shard's safetensors header and a step's manifest.json. Both must answer any
// input with a Status, never a crash, a hang or a huge allocation.
//
// The first input byte picks the reader; the rest is the file's content.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "format.h"
#include "gantry/core/json.h"
#include "gantry/storage/filesystem.h"

namespace {

// A read-only file over the fuzzer's bytes.
class MemoryFile : public gantry::storage::ReadableFile {
 public:
  explicit MemoryFile(std::string_view bytes) : bytes_(bytes) {}
  gantry::Result<size_t> ReadAt(uint64_t offset, void* dst, size_t n) override {
    if (offset >= bytes_.size()) return size_t{0};
    n = std::min<uint64_t>(n, bytes_.size() - offset);
    std::memcpy(dst, bytes_.data() + offset, n);
    return n;
  }
  gantry::Result<uint64_t> Size() override { return uint64_t{bytes_.size()}; }

 private:
  std::string_view bytes_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    MemoryFile file(body);
    uint64_t data_start = 0;
    auto entries = gantry::ckpt::internal::ReadSafetensorsHeader(file, "fuzz.safetensors",
                                                                 &data_start);
    if (entries.ok()) {
      for (const auto& e : *entries) {
        // The reader's contract: every entry lies inside the file.
        if (e.end < e.begin || e.end > body.size() || data_start > body.size() - e.end) {
          __builtin_trap();
        }
      }
    }
  } else {
    auto json = gantry::ParseJson(body, "manifest.json");
    if (json.ok()) (void)gantry::ckpt::internal::ManifestFromJson(*json, "manifest.json");
  }
  return 0;
}
