#include "gantry/core/plugin.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>

#ifndef GANTRY_PLUGIN_INSTALL_DIR
#define GANTRY_PLUGIN_INSTALL_DIR "/usr/local/lib/gantry"
#endif

namespace gantry::plugin {
namespace {

std::mutex g_mu;
// Keyed by soname list or plugin file; guarded by g_mu. Results are kept for
// the life of the process, like the libraries.
std::map<std::string, Result<void*>>& Libraries() {
  static auto* m = new std::map<std::string, Result<void*>>;
  return *m;
}
std::map<std::string, Result<const void*>>& Plugins() {
  static auto* m = new std::map<std::string, Result<const void*>>;
  return *m;
}

std::string LastDlerror() {
  const char* e = ::dlerror();
  return e != nullptr ? e : "unknown dynamic loader error";
}

std::string Dirname(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// The absolute path of the executable or shared object this function is in.
std::string ThisObjectPath() {
  Dl_info info{};
  link_map* map = nullptr;
  if (dladdr1(reinterpret_cast<void*>(&ThisObjectPath), &info, reinterpret_cast<void**>(&map),
              RTLD_DL_LINKMAP) != 0 &&
      map != nullptr && map->l_name != nullptr && map->l_name[0] == '/') {
    char resolved[PATH_MAX];
    if (realpath(map->l_name, resolved) != nullptr) return resolved;
    return map->l_name;
  }
  // The main program's link map has no name: ask the kernel.
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return "";
  exe[n] = '\0';
  return exe;
}

bool IsFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string Join(const std::vector<std::string>& dirs) {
  std::string out;
  for (const std::string& d : dirs) {
    if (!out.empty()) out += ", ";
    out += d;
  }
  return out;
}

}  // namespace

Result<void*> OpenLibrary(const LibrarySpec& spec) {
  std::string key;
  for (const std::string& s : spec.sonames) key += s + ";";
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = Libraries().find(key);
  if (it != Libraries().end()) return it->second;
  Result<void*> result = [&]() -> Result<void*> {
    std::string first_error;
    for (const std::string& soname : spec.sonames) {
      void* lib = ::dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib != nullptr) return lib;
      if (first_error.empty()) first_error = LastDlerror();
    }
    const std::string name = spec.sonames.empty() ? std::string("?") : spec.sonames.front();
    return FailedPrecondition(spec.feature + " needs " + name + " (" + spec.what +
                              "): " + first_error + "; " + spec.install);
  }();
  Libraries().emplace(key, result);
  return result;
}

Status BindSymbol(void* library, const LibrarySpec& spec, const char* symbol, void** fn) {
  ::dlerror();
  *fn = ::dlsym(library, symbol);
  if (*fn != nullptr) return Status::Ok();
  const std::string name = spec.sonames.empty() ? std::string("?") : spec.sonames.front();
  return FailedPrecondition(spec.feature + " needs " + symbol + " from " + name + " (" + spec.what +
                            "), which the library loaded lacks: " + LastDlerror() + "; " +
                            spec.install);
}

std::vector<std::string> PluginSearchDirs() {
  const char* env = std::getenv("GANTRY_PLUGIN_DIR");
  if (env != nullptr && *env != '\0') return {env};
  std::vector<std::string> dirs;
  const std::string self = ThisObjectPath();
  if (!self.empty()) {
    const std::string dir = Dirname(self);
    dirs.push_back(dir + "/../lib/gantry");
    dirs.push_back(dir);
  }
  dirs.push_back(GANTRY_PLUGIN_INSTALL_DIR);
  return dirs;
}

Result<const void*> LoadPluginFrom(const PluginSpec& spec, const std::vector<std::string>& dirs) {
  std::string path;
  for (const std::string& dir : dirs) {
    if (IsFile(dir + "/" + spec.file)) {
      path = dir + "/" + spec.file;
      break;
    }
  }
  if (path.empty()) {
    return FailedPrecondition(spec.feature + " needs the Gantry plugin " + spec.file + " (" +
                              spec.libraries + "), which is in none of " + Join(dirs) +
                              "; reinstall gantry with its lib/gantry folder, or set "
                              "GANTRY_PLUGIN_DIR to the folder that holds it");
  }
  void* lib = ::dlopen(path.c_str(), RTLD_NOW | (spec.global ? RTLD_GLOBAL : RTLD_LOCAL));
  if (lib == nullptr) {
    return FailedPrecondition(spec.feature + " needs " + spec.libraries + ": cannot load " + path +
                              ": " + LastDlerror() + "; " + spec.install);
  }
  ::dlerror();
  auto* entry = reinterpret_cast<const void* (*)()>(::dlsym(lib, spec.entry.c_str()));
  if (entry == nullptr) {
    return FailedPrecondition(path + " is not a " + spec.feature + " plugin of this gantry: no " +
                              spec.entry + " (" + LastDlerror() +
                              "); reinstall gantry so that its plugins match the binary");
  }
  const void* table = entry();
  if (table == nullptr) {
    return FailedPrecondition(path + ": " + spec.entry +
                              " returned nothing; reinstall gantry so that its plugins match");
  }
  return table;
}

Result<const void*> LoadPlugin(const PluginSpec& spec) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = Plugins().find(spec.file);
  if (it != Plugins().end()) return it->second;
  Result<const void*> result = LoadPluginFrom(spec, PluginSearchDirs());
  Plugins().emplace(spec.file, result);
  return result;
}

}  // namespace gantry::plugin
