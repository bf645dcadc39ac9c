#include "gantry/health/detect.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <set>
#include <utility>

#include "gantry/core/json.h"
#include "gantry/core/subprocess.h"
#include "gantry/core/text.h"

namespace gantry::health {
namespace {

namespace fs = std::filesystem;

// Splits "key<TAB>: value" lines (the /proc/cpuinfo and /proc/meminfo format).
std::pair<std::string_view, std::string_view> KeyValue(std::string_view line) {
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return {TrimSpace(line), {}};
  return {TrimSpace(line.substr(0, colon)), TrimSpace(line.substr(colon + 1))};
}

template <typename F>
void ForEachLine(std::string_view text, F&& f) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    f(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

Result<int> ReadIntFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  int v = 0;
  if (!ParseNumber(text, &v)) return DataLoss(path + ": expected an integer, got '" + text + "'");
  return v;
}

struct CpuinfoEntry {
  int package = -1;
  int core = -1;
};

// "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)" -> "NVIDIA H100 80GB HBM3".
std::vector<std::string> ParseNvidiaSmiList(std::string_view text) {
  std::vector<std::string> models;
  ForEachLine(text, [&](std::string_view line) {
    if (line.substr(0, 4) != "GPU ") return;
    size_t colon = line.find(": ");
    if (colon == std::string_view::npos) return;
    std::string_view model = line.substr(colon + 2);
    model = TrimSpace(model.substr(0, model.rfind(" (UUID:")));
    models.emplace_back(model.empty() ? "unknown" : model);
  });
  return models;
}

std::string FirstLine(std::string_view text) {
  text = TrimSpace(text);
  return std::string(text.substr(0, text.find('\n')));
}

}  // namespace

std::string RootPath(const std::string& root, std::string_view path) {
  std::string r = root;
  while (!r.empty() && r.back() == '/') r.pop_back();
  if (path.empty() || path.front() != '/') r += '/';
  return r + std::string(path);
}

Result<std::vector<int>> ParseIdList(std::string_view text) {
  std::vector<int> ids;
  std::string_view rest = TrimSpace(text);
  auto bad = [&] {
    return InvalidArgument("bad CPU/node list '" + std::string(TrimSpace(text)) + "'");
  };
  if (rest.empty()) return ids;
  while (true) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    size_t dash = item.find('-');
    int lo = 0;
    int hi = 0;
    if (dash == std::string_view::npos) {
      if (!ParseNumber(item, &lo)) return bad();
      hi = lo;
    } else if (!ParseNumber(item.substr(0, dash), &lo) ||
               !ParseNumber(item.substr(dash + 1), &hi) || lo < 0 || hi < lo || hi - lo > 1 << 20) {
      return bad();
    }
    if (lo < 0) return bad();
    for (int i = lo; i <= hi; ++i) ids.push_back(i);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return ids;
}

Result<CpuInfo> DetectCpu(const std::string& root) {
  const std::string cpuinfo_path = RootPath(root, "/proc/cpuinfo");
  ASSIGN_OR_RETURN(std::string text, ReadFile(cpuinfo_path));
  std::vector<CpuinfoEntry> entries;
  std::string model_name;
  std::string arm_model;
  ForEachLine(text, [&](std::string_view line) {
    auto [key, value] = KeyValue(line);
    if (key == "processor") {
      entries.emplace_back();
    } else if (key == "model name" && model_name.empty()) {
      model_name = value;
    } else if (key == "Model" && arm_model.empty()) {
      arm_model = value;
    } else if (key == "physical id" && !entries.empty()) {
      ParseNumber(value, &entries.back().package);
    } else if (key == "core id" && !entries.empty()) {
      ParseNumber(value, &entries.back().core);
    }
  });
  if (entries.empty()) return DataLoss(cpuinfo_path + ": no 'processor' entries");

  CpuInfo info;
  info.model = !model_name.empty() ? model_name : !arm_model.empty() ? arm_model : "unknown";

  const std::string cpu_dir = RootPath(root, "/sys/devices/system/cpu");
  std::vector<int> online;
  if (auto text_online = ReadFile(cpu_dir + "/online"); text_online.ok()) {
    if (auto ids = ParseIdList(*text_online); ids.ok()) online = *ids;
  }
  info.threads =
      online.empty() ? static_cast<int>(entries.size()) : static_cast<int>(online.size());

  // Topology from sysfs, which also covers machines whose /proc/cpuinfo has no
  // "physical id" (most Arm servers).
  std::set<int> packages;
  std::set<std::pair<int, int>> cores;
  bool sysfs_ok = !online.empty();
  for (int cpu : online) {
    std::string topo = cpu_dir + "/cpu" + std::to_string(cpu) + "/topology/";
    auto pkg = ReadIntFile(topo + "physical_package_id");
    auto core = ReadIntFile(topo + "core_id");
    if (!pkg.ok() || !core.ok()) {
      sysfs_ok = false;
      break;
    }
    packages.insert(*pkg);
    cores.insert({*pkg, *core});
  }
  if (!sysfs_ok) {
    packages.clear();
    cores.clear();
    bool complete = std::all_of(entries.begin(), entries.end(), [](const CpuinfoEntry& e) {
      return e.package >= 0 && e.core >= 0;
    });
    if (complete) {
      for (const auto& e : entries) {
        packages.insert(e.package);
        cores.insert({e.package, e.core});
      }
    }
  }
  info.sockets = packages.empty() ? 1 : static_cast<int>(packages.size());
  info.cores = cores.empty() ? info.threads : static_cast<int>(cores.size());
  return info;
}

Result<MemoryInfo> DetectMemory(const std::string& root) {
  const std::string path = RootPath(root, "/proc/meminfo");
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  uint64_t total = 0, available = 0, free = 0, swap = 0;
  bool have_total = false, have_available = false, have_free = false, have_swap = false;
  ForEachLine(text, [&](std::string_view line) {
    auto [key, value] = KeyValue(line);
    std::string_view number = value.substr(0, value.find(' '));
    uint64_t kib = 0;
    if (!ParseNumber(number, &kib)) return;
    if (key == "MemTotal") {
      total = kib;
      have_total = true;
    } else if (key == "MemAvailable") {
      available = kib;
      have_available = true;
    } else if (key == "MemFree") {
      free = kib;
      have_free = true;
    } else if (key == "SwapTotal") {
      swap = kib;
      have_swap = true;
    }
  });
  if (!have_total) return DataLoss(path + ": no valid 'MemTotal' line");
  MemoryInfo info;
  info.total_bytes = total * 1024;
  info.available_bytes = (have_available ? available : have_free ? free : 0) * 1024;
  if (have_swap) info.swap_total_bytes = swap * 1024;
  return info;
}

int DetectNumaNodes(const std::string& root) {
  const std::string node_dir = RootPath(root, "/sys/devices/system/node");
  if (auto text = ReadFile(node_dir + "/online"); text.ok()) {
    if (auto ids = ParseIdList(*text); ids.ok() && !ids->empty())
      return static_cast<int>(ids->size());
  }
  int nodes = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(node_dir, ec)) {
    std::string name = entry.path().filename().string();
    int id = 0;
    if (name.size() > 4 && name.compare(0, 4, "node") == 0 && ParseNumber(name.substr(4), &id))
      ++nodes;
  }
  return nodes > 0 ? nodes : 1;
}

GpuInfo DetectGpus(const std::string& root, const std::string& nvidia_smi,
                   std::chrono::milliseconds deadline) {
  GpuInfo info;
  info.source = "none";
  const std::string gpus_dir = RootPath(root, "/proc/driver/nvidia/gpus");
  std::vector<std::string> bus_ids;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(gpus_dir, ec)) {
    if (entry.is_directory(ec)) bus_ids.push_back(entry.path().filename().string());
  }
  std::sort(bus_ids.begin(), bus_ids.end());
  for (const std::string& bus : bus_ids) {
    std::string model = "unknown";
    if (auto text = ReadFile(gpus_dir + "/" + bus + "/information"); text.ok()) {
      ForEachLine(*text, [&](std::string_view line) {
        auto [key, value] = KeyValue(line);
        if (key == "Model" && !value.empty()) model = value;
      });
    }
    info.models.push_back(model);
  }
  if (!info.models.empty()) {
    info.count = static_cast<int>(info.models.size());
    info.source = "/proc/driver/nvidia/gpus";
    return info;
  }

  if (nvidia_smi.empty()) return info;
  std::string program = FindExecutable(nvidia_smi);
  if (program.empty()) return info;
  auto run = RunSubprocess({program, "-L"}, deadline);
  if (!run.ok()) {
    info.error = run.status().message();
    return info;
  }
  if (run->exit_code != 0) {
    // nvidia-smi explains a failure on stdout; stderr is the fallback.
    info.error = "'" + program + " -L' exited with status " + std::to_string(run->exit_code) +
                 ": " + FirstLine(run->out + run->err);
    return info;
  }
  info.models = ParseNvidiaSmiList(run->out);
  info.count = static_cast<int>(info.models.size());
  info.source = "nvidia-smi -L";
  return info;
}

Result<ShmInfo> DetectShm(const std::string& root) {
  ShmInfo info;
  info.path = RootPath(root, "/dev/shm");
  struct statvfs st {};
  if (::statvfs(info.path.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT) {
      return NotFound(info.path + " does not exist; shared-memory collectives need a tmpfs there");
    }
    return IoError("statvfs " + info.path, err);
  }
  info.size_bytes = static_cast<uint64_t>(st.f_blocks) * st.f_frsize;
  info.free_bytes = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  return info;
}

}  // namespace gantry::health
