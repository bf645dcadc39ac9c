#include "testing/temp_dir.h"

#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

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
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::Path(std::string_view name) const { return path_ + "/" + std::string(name); }

}  // namespace gantry::testing
