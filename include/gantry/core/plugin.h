// Optional libraries loaded on first use. The `gantry` binary links none of
// the big vendor libraries (CUDA runtime, cuBLAS, NCCL, MPI): the code that
// needs them either dlopens the vendor library itself and binds the few C
// functions it calls (OpenLibrary), or lives in a Gantry plugin, a shared
// module built from Gantry's own sources that links the vendor libraries
// normally and exports one extern "C" entry point (LoadPlugin). Either way a
// command that does not use a feature never maps its libraries, and one that
// does gets a Status naming the library and the feature when it is missing.
//
// Plugins are looked up in, in order:
//   1. $GANTRY_PLUGIN_DIR when it is set (and then only there);
//   2. <folder of the binary or library holding this loader>/../lib/gantry,
//      i.e. build/<preset>/lib/gantry for build/<preset>/bin/gantry and
//      <prefix>/lib/gantry for an installed <prefix>/bin/gantry;
//   3. that folder itself (a plugin that loads another plugin);
//   4. the install folder configured at build time (<prefix>/lib/gantry).
//
// Both loaders are thread-safe, load each library once and cache the result,
// success or failure, for the life of the process (nothing is ever unloaded).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::plugin {

// A vendor library opened by name through the dynamic loader's search path.
struct LibrarySpec {
  // Sonames to try in order, e.g. {"libcudart.so.12", "libcudart.so"}.
  std::vector<std::string> sonames;
  // What needs it, for the message: "bench gemm --device cuda".
  std::string feature;
  // The library in words: "CUDA runtime".
  std::string what;
  // What to do about it: "install the CUDA toolkit (libcudart12) or use --device cpu".
  std::string install;
};

// dlopens the first soname that loads (RTLD_NOW | RTLD_LOCAL). On failure:
// FailedPrecondition "<feature> needs <soname> (<what>): <dlerror>; <install>".
Result<void*> OpenLibrary(const LibrarySpec& spec);

// Binds `symbol` of `library` (from OpenLibrary) into *fn. FailedPrecondition
// naming the symbol and the library when it is absent.
Status BindSymbol(void* library, const LibrarySpec& spec, const char* symbol, void** fn);

template <typename Fn>
Status Bind(void* library, const LibrarySpec& spec, const char* symbol, Fn** fn) {
  void* p = nullptr;
  Status s = BindSymbol(library, spec, symbol, &p);
  *fn = reinterpret_cast<Fn*>(p);
  return s;
}

// A Gantry plugin: `file` in the plugin folders, whose extern "C" function
// `entry` (no arguments) returns a pointer to the plugin's table of functions.
struct PluginSpec {
  std::string file;       // "libgantry_plugin_mpi.so"
  std::string entry;      // "gantry_plugin_mpi_v1"
  std::string feature;    // "the mpi backend"
  std::string libraries;  // the vendor libraries the plugin links, in words
  std::string install;    // what to do when they are missing
  // RTLD_GLOBAL instead of RTLD_LOCAL, for vendor libraries whose own
  // components (Open MPI's MCA modules) resolve symbols of the library.
  bool global = false;
};

// Finds, dlopens (RTLD_NOW) and enters the plugin once; returns what the entry
// returned. FailedPrecondition when the file is in none of the folders (naming
// them and GANTRY_PLUGIN_DIR), when it cannot be loaded (with the dlerror text,
// which names the missing vendor library), or when it lacks the entry point.
Result<const void*> LoadPlugin(const PluginSpec& spec);

// As LoadPlugin, searching only `dirs` (tests). Not cached.
Result<const void*> LoadPluginFrom(const PluginSpec& spec, const std::vector<std::string>& dirs);

// The folders LoadPlugin searches, in order (see the top of this file).
std::vector<std::string> PluginSearchDirs();

}  // namespace gantry::plugin

// Marks a plugin's entry point, the one symbol its version script exports.
#define GANTRY_PLUGIN_ENTRY extern "C" __attribute__((visibility("default"))) const void*
