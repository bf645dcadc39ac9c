// The dependency of libgantry_test_plugin_broken.so, kept out of every search path.
extern "C" __attribute__((visibility("default"))) int gantry_test_plugin_dep_value() { return 7; }
