// Test support: a fresh directory that the destructor removes with everything
// in it (read-only directories inside it included: they are made writable
// first, as a restore of read-only trees leaves them).
//
//   gantry::testing::TempDir dir("gantry-backup-test");
//   std::ofstream(dir.Path("a.txt")) << "x";
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace gantry::testing {

class TempDir {
 public:
  // Creates <$TMPDIR or /tmp>/<prefix>-XXXXXX; aborts the test binary when it
  // cannot (nothing useful can run without it).
  explicit TempDir(std::string_view prefix = "gantry-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + name.
  std::string Path(std::string_view name) const;
  std::filesystem::path operator/(std::string_view name) const {
    return std::filesystem::path(path_) / name;
  }
  // Writes `text` to path()/name (creating nothing above it); returns that path.
  std::string Write(std::string_view name, std::string_view text) const;
  // The contents of path()/name, or of `name` itself when it is absolute;
  // "" when it cannot be read.
  std::string Read(std::string_view name) const;

 private:
  std::string path_;
};

}  // namespace gantry::testing
