// Test support: a fresh directory that the destructor removes with everything
// in it.
//
//   gantry::testing::TempDir dir("gantry-backup-test");
//   std::ofstream(dir.Path("a.txt")) << "x";
#pragma once

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

 private:
  std::string path_;
};

}  // namespace gantry::testing
