// Test-only: a temporary directory that stands for "/" in tests of code that
// reads /proc, /sys, /dev and /etc below a root directory (host detection, the
// health checks, the doctor, the GEMM peak table). Tests write the files they
// need; the destructor removes everything. Standard library only, so tests of
// any module can include it.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace gantry::testing {

class FakeRoot {
 public:
  FakeRoot() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gantry-root-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~FakeRoot() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  FakeRoot(const FakeRoot&) = delete;
  FakeRoot& operator=(const FakeRoot&) = delete;

  const std::string& path() const { return path_; }

  // Writes `text` to <root>/<rel> (rel starts with '/'), creating directories.
  std::string Write(const std::string& rel, const std::string& text,
                    bool executable = false) const {
    std::filesystem::path p = path_ + rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
    if (executable) ::chmod(p.c_str(), 0755);
    return p.string();
  }
  void Mkdir(const std::string& rel) const { std::filesystem::create_directories(path_ + rel); }

 private:
  std::string path_;
};

}  // namespace gantry::testing
