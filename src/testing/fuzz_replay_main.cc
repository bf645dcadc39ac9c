// A main() for libFuzzer entry points built without libFuzzer: replays saved
// inputs through LLVMFuzzerTestOneInput, once each, so that the corpus and the
// crash regressions of every fuzz target run in `make test` with any compiler
// (gcc, no -fsanitize=fuzzer). gantry_add_fuzzer (cmake/GantryTesting.cmake)
// links it into <target>_replay and registers the ctest.
//
//   fuzz_units_replay fuzz/corpus/fuzz_units --optional fuzz/regressions/fuzz_units
//
// Every argument is a file or a directory (its regular files, recursively, in
// sorted order; names starting with '.' are skipped). A path that does not
// exist is an error unless it follows --optional. Fails when no input at all
// was found, so a target whose corpus went missing does not pass by replaying
// nothing. A crash or a failed invariant (the targets trap) ends the process
// with a signal; the last "replay:" line names the input.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

namespace fs = std::filesystem;

bool Hidden(const fs::path& p) { return p.filename().string().starts_with("."); }

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<fs::path> inputs;
  bool optional = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--optional") {
      optional = true;
      continue;
    }
    fs::path p(arg);
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<fs::path> found;
      for (auto it = fs::recursive_directory_iterator(p, ec); !ec && it != fs::end(it);
           it.increment(ec)) {
        if (Hidden(it->path())) {
          if (it->is_directory()) it.disable_recursion_pending();
          continue;
        }
        if (it->is_regular_file()) found.push_back(it->path());
      }
      if (ec) {
        std::fprintf(stderr, "replay: cannot list %s: %s\n", argv[i], ec.message().c_str());
        return 2;
      }
      std::sort(found.begin(), found.end());
      inputs.insert(inputs.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(p, ec)) {
      inputs.push_back(p);
    } else if (!optional) {
      std::fprintf(stderr, "replay: %s: no such file or directory\n", argv[i]);
      return 2;
    }
    optional = false;
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no inputs (an empty or missing corpus)\n");
    return 2;
  }
  size_t bytes = 0;
  for (const fs::path& p : inputs) {
    std::ifstream in(p, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "replay: cannot read %s\n", p.c_str());
      return 2;
    }
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", p.c_str(), data.size());
    // A copy in its own allocation, as libFuzzer passes it (never null, even
    // when empty), so that ASan sees a read past the end.
    std::unique_ptr<uint8_t[]> copy(new uint8_t[data.size()]);
    std::copy(data.begin(), data.end(), copy.get());
    LLVMFuzzerTestOneInput(copy.get(), data.size());
    bytes += data.size();
  }
  std::printf("replayed %zu inputs (%zu bytes)\n", inputs.size(), bytes);
  return 0;
}
