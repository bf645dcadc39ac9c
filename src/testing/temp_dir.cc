#include "testing/temp_dir.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gantry/core/json.h"

namespace gantry::testing {

TempDir::TempDir(std::string_view prefix) {
  std::string tmpl =
      (std::filesystem::temp_directory_path() / std::string(prefix)).string() + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::perror(("mkdtemp " + tmpl).c_str());
    std::abort();
  }
  path_ = tmpl;
}

TempDir::~TempDir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(path_, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory() && !it->is_symlink()) ::chmod(it->path().c_str(), 0755);
  }
  fs::remove_all(path_, ec);
}

std::string TempDir::Write(std::string_view name, std::string_view text) const {
  std::string p = Path(name);
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

std::string TempDir::Read(std::string_view name) const {
  std::string p = !name.empty() && name[0] == '/' ? std::string(name) : Path(name);
  return ReadFile(p).value_or("");
}

std::string TempDir::Path(std::string_view name) const { return path_ + "/" + std::string(name); }

}  // namespace gantry::testing
