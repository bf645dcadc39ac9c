// Test plugins of plugin_test.cc. libgantry_test_plugin_ok.so returns a table;
// libgantry_test_plugin_broken.so has the same entry but needs
// libgantry_test_plugin_dep.so, which the loader cannot find (see CMakeLists.txt).
#include "gantry/core/plugin.h"

#ifdef GANTRY_TEST_PLUGIN_BROKEN
extern "C" int gantry_test_plugin_dep_value();
#endif

namespace {

int g_value = 0;

}  // namespace

GANTRY_PLUGIN_ENTRY gantry_plugin_test_v1() {
#ifdef GANTRY_TEST_PLUGIN_BROKEN
  g_value = gantry_test_plugin_dep_value();
#else
  g_value = 42;
#endif
  return &g_value;
}
