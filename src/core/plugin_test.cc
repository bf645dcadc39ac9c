#include "gantry/core/plugin.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "testing/temp_dir.h"

namespace gantry::plugin {
namespace {

const std::string kFixtures = std::string(GANTRY_BINARY_DIR) + "/lib/test_plugins";

PluginSpec TestSpec(std::string file) {
  return PluginSpec{std::move(file), "gantry_plugin_test_v1", "the test feature",
                    "the test vendor library", "install the test vendor library"};
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(PluginTest, LoadsAPluginAndCallsItsEntry) {
  auto table = LoadPluginFrom(TestSpec("libgantry_test_plugin_ok.so"), {kFixtures});
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  EXPECT_EQ(*static_cast<const int*>(*table), 42);
}

TEST(PluginTest, MissingPluginNamesTheFileTheFeatureAndTheFolders) {
  testing::TempDir empty("plugin-test");
  auto table = LoadPluginFrom(TestSpec("libgantry_test_plugin_ok.so"), {empty.path()});
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().code(), StatusCode::kFailedPrecondition);
  const std::string m = table.status().message();
  EXPECT_TRUE(Contains(m, "the test feature")) << m;
  EXPECT_TRUE(Contains(m, "libgantry_test_plugin_ok.so")) << m;
  EXPECT_TRUE(Contains(m, "the test vendor library")) << m;
  EXPECT_TRUE(Contains(m, empty.path())) << m;
  EXPECT_TRUE(Contains(m, "GANTRY_PLUGIN_DIR")) << m;
}

TEST(PluginTest, MissingDependencyCarriesTheDlerror) {
  auto table = LoadPluginFrom(TestSpec("libgantry_test_plugin_broken.so"), {kFixtures});
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().code(), StatusCode::kFailedPrecondition);
  const std::string m = table.status().message();
  EXPECT_TRUE(Contains(m, "the test feature needs the test vendor library")) << m;
  // dlerror names the library that could not be found.
  EXPECT_TRUE(Contains(m, "libgantry_test_plugin_dep.so: cannot open shared object file")) << m;
  EXPECT_TRUE(Contains(m, "install the test vendor library")) << m;
}

TEST(PluginTest, MissingEntryPointSaysSo) {
  PluginSpec spec = TestSpec("libgantry_test_plugin_ok.so");
  spec.entry = "gantry_plugin_other_v9";
  auto table = LoadPluginFrom(spec, {kFixtures});
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(table.status().message(), "no gantry_plugin_other_v9"))
      << table.status().message();
}

TEST(PluginTest, EnvironmentOverridesTheSearchFolders) {
  ::setenv("GANTRY_PLUGIN_DIR", kFixtures.c_str(), 1);
  const std::vector<std::string> dirs = PluginSearchDirs();
  auto table = LoadPlugin(TestSpec("libgantry_test_plugin_ok.so"));
  ::unsetenv("GANTRY_PLUGIN_DIR");
  EXPECT_EQ(dirs, std::vector<std::string>{kFixtures});
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  EXPECT_EQ(*static_cast<const int*>(*table), 42);
  // Cached: found again without the override.
  auto again = LoadPlugin(TestSpec("libgantry_test_plugin_ok.so"));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *table);
}

TEST(PluginTest, SearchesNextToTheBinaryThenTheInstallFolder) {
  ::unsetenv("GANTRY_PLUGIN_DIR");
  const std::vector<std::string> dirs = PluginSearchDirs();
  ASSERT_EQ(dirs.size(), 3u);
  // This test binary is <build>/bin/core_plugin_test.
  EXPECT_TRUE(Contains(dirs[0], "/bin/../lib/gantry")) << dirs[0];
  EXPECT_TRUE(Contains(dirs[1], "/bin")) << dirs[1];
  EXPECT_TRUE(Contains(dirs[2], "/lib/gantry")) << dirs[2];
}

TEST(PluginTest, MissingLibraryNamesTheSonameTheFeatureAndWhatToDo) {
  LibrarySpec spec{{"libgantry_no_such_library.so.9", "libgantry_no_such_library.so"},
                   "bench frobnicate --device cuda",
                   "Frobnicator",
                   "install libfrob9 or use --device cpu"};
  auto lib = OpenLibrary(spec);
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(lib.status().message(),
            "bench frobnicate --device cuda needs libgantry_no_such_library.so.9 (Frobnicator): "
            "libgantry_no_such_library.so.9: cannot open shared object file: No such file or "
            "directory; install libfrob9 or use --device cpu");
}

TEST(PluginTest, OpensALibraryAndBindsItsSymbols) {
  const std::string path = kFixtures + "/deps/libgantry_test_plugin_dep.so";
  LibrarySpec spec{{path}, "the test feature", "the test dependency", "rebuild"};
  auto lib = OpenLibrary(spec);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  int (*value)() = nullptr;
  ASSERT_TRUE(Bind(*lib, spec, "gantry_test_plugin_dep_value", &value).ok());
  EXPECT_EQ(value(), 7);
  Status missing = Bind(*lib, spec, "gantry_no_such_symbol", &value);
  EXPECT_EQ(missing.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(missing.message(), "gantry_no_such_symbol")) << missing.message();
  EXPECT_TRUE(Contains(missing.message(), path)) << missing.message();
}

}  // namespace
}  // namespace gantry::plugin
