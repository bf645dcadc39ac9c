// The node's facts for `gantry assess --node` (contract and how each fact is
// read: include/gantry/assess/node.h). Every reader here answers "known: value"
// or "unknown"; nothing unreadable becomes a pass.
#include "gantry/assess/node.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "gantry/agent/agent.h"
#include "gantry/core/clock.h"
#include "gantry/core/config.h"
#include "gantry/core/subprocess.h"
#include "gantry/core/text.h"
#include "gantry/health/check.h"
#include "gantry/health/nvml.h"
#include "gantry/health/profile.h"

namespace gantry::assess {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxListedUpdates = 50;

std::string Under(const std::string& root, std::string_view path) {
  if (root.empty() || root == "/") return std::string(path);
  std::string r = root;
  while (r.size() > 1 && r.back() == '/') r.pop_back();
  return r + std::string(path);
}

std::optional<std::string> ReadSmall(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string s;
  std::getline(in, s);
  return std::string(TrimSpace(s));
}

std::string DriverOf(const fs::path& iface) {
  std::error_code ec;
  fs::path target = fs::read_symlink(iface / "device" / "driver", ec);
  return ec ? "" : target.filename().string();
}

// Facts are collected into `props` (a JSON object) and their pointers into
// `unknown` when they cannot be read.
struct Facts {
  Json props = Json::object();
  std::vector<std::string> unknown;

  void Set(const std::string& dotted, Json v) {
    Json* cur = &props;
    size_t start = 0;
    while (true) {
      size_t dot = dotted.find('.', start);
      std::string seg = dotted.substr(start, dot == std::string::npos ? dotted.npos : dot - start);
      if (dot == std::string::npos) {
        (*cur)[seg] = std::move(v);
        return;
      }
      cur = &(*cur)[seg];
      start = dot + 1;
    }
  }
  void Unknown(const std::string& dotted) {
    std::string p = "/properties/" + dotted;
    std::replace(p.begin(), p.end(), '.', '/');
    unknown.push_back(std::move(p));
  }
};

void GatherNetwork(const std::string& root, Facts* f) {
  const fs::path net = Under(root, "/sys/class/net");
  std::error_code ec;
  if (!fs::is_directory(net, ec)) {
    f->Unknown("network.acceleratedNetworking");
    return;
  }
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(net, ec)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  bool any_netvsc = false, accelerated = false;
  for (const std::string& n : names) {
    if (DriverOf(net / n) == "hv_netvsc") any_netvsc = true;
  }
  for (const std::string& n : names) {
    const std::string driver = DriverOf(net / n);
    if (driver != "mlx4_core" && driver != "mlx5_core") continue;
    // InfiniBand ports (ib0, type 32) use mlx5_core as well; the VF is Ethernet (type 1).
    std::optional<std::string> type = ReadSmall((net / n / "type").string());
    if (type && *type != "1") continue;
    fs::path master = fs::read_symlink(net / n / "master", ec);
    if (ec) continue;
    if (DriverOf(net / master.filename()) == "hv_netvsc") {
      accelerated = true;
      f->Set("network.acceleratedNetworkingVf", n);
      break;
    }
  }
  if (!any_netvsc) {
    // Not a Hyper-V synthetic NIC: the question is Azure's, and this is not an Azure VM.
    f->Unknown("network.acceleratedNetworking");
    return;
  }
  f->Set("network.acceleratedNetworking", accelerated);
}

void GatherUpdates(const std::string& root, int timeout_s, Facts* f) {
  const std::string apt = Under(root, "/usr/bin/apt-get");
  if (::access(apt.c_str(), X_OK) != 0) {
    f->Unknown("os.pendingSecurityUpdates");
    return;
  }
  Result<SubprocessResult> r =
      RunSubprocess({apt, "-s", "-q", "dist-upgrade"}, std::chrono::seconds(timeout_s));
  if (!r.ok() || r->exit_code != 0) {
    f->Unknown("os.pendingSecurityUpdates");
    f->Set("os.updatesError",
           r.ok() ? fmt::format("apt-get -s dist-upgrade exited {}: {}", r->exit_code,
                                std::string(TrimSpace(r->err.substr(0, 200))))
                  : r.status().message());
    return;
  }
  // "Inst libssl3 [3.0.2-0ubuntu1.10] (3.0.2-0ubuntu1.12 Ubuntu:22.04/jammy-security [amd64])"
  int count = 0;
  Json names = Json::array();
  size_t start = 0;
  const std::string& out = r->out;
  while (start < out.size()) {
    size_t nl = out.find('\n', start);
    std::string_view line(out.data() + start, (nl == std::string::npos ? out.size() : nl) - start);
    start = nl == std::string::npos ? out.size() : nl + 1;
    if (!line.starts_with("Inst ")) continue;
    size_t paren = line.find('(');
    if (paren == std::string_view::npos) continue;
    if (AsciiLower(line.substr(paren)).find("-security") == std::string::npos) continue;
    ++count;
    std::string_view rest = line.substr(5);
    std::string_view pkg = rest.substr(0, rest.find(' '));
    if (names.size() < kMaxListedUpdates) names.push_back(std::string(pkg));
  }
  f->Set("os.pendingSecurityUpdates", count);
  f->Set("os.securityUpdates", names);
}

int CountNvidiaPci(const std::string& root, bool* readable) {
  const fs::path dir = Under(root, "/sys/bus/pci/devices");
  std::error_code ec;
  *readable = fs::is_directory(dir, ec);
  int n = 0;
  if (!*readable) return 0;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::optional<std::string> vendor = ReadSmall((e.path() / "vendor").string());
    std::optional<std::string> cls = ReadSmall((e.path() / "class").string());
    // Display controllers: VGA (0x0300xx) and 3D (0x0302xx, the data-center GPUs).
    if (vendor && AsciiLower(*vendor) == "0x10de" && cls && cls->rfind("0x03", 0) == 0) ++n;
  }
  return n;
}

void GatherGpus(const std::string& root, health::Nvml* nvml, const std::string& nvml_error,
                int pci_gpus, bool pci_readable, Facts* f) {
  if (!pci_readable && nvml == nullptr) {
    f->Unknown("gpu.count");
    f->Unknown("gpu.driverVersion");
    f->Unknown("gpu.persistenceMode");
    return;
  }
  if (nvml == nullptr) {
    f->Set("gpu.count", pci_gpus);
    if (pci_gpus > 0) {
      f->Set("gpu.driverLoaded", false);
      f->Set("gpu.error", nvml_error);
      f->Unknown("gpu.driverVersion");
      f->Unknown("gpu.persistenceMode");
    }
    return;
  }
  (void)root;
  Result<int> count = nvml->DeviceCount();
  if (!count.ok()) {
    f->Set("gpu.count", pci_gpus);
    f->Set("gpu.error", count.status().message());
    f->Unknown("gpu.driverVersion");
    f->Unknown("gpu.persistenceMode");
    return;
  }
  f->Set("gpu.count", *count);
  f->Set("gpu.driverLoaded", true);
  Result<std::string> driver = nvml->DriverVersion();
  if (driver.ok()) {
    f->Set("gpu.driverVersion", *driver);
  } else {
    f->Unknown("gpu.driverVersion");
  }
  bool all_on = true, known = true;
  Json off = Json::array();
  for (int i = 0; i < *count; ++i) {
    Result<bool> p = nvml->PersistenceMode(i);
    if (!p.ok()) {
      known = false;
      break;
    }
    if (!*p) {
      all_on = false;
      off.push_back(i);
    }
  }
  if (known && *count > 0) {
    f->Set("gpu.persistenceMode", all_on);
    f->Set("gpu.persistenceOff", off);
  } else if (!known) {
    f->Unknown("gpu.persistenceMode");
  }
}

std::string ConfigPath(const std::string& root, const std::string& given,
                       std::string_view default_path) {
  return given.empty() ? Under(root, default_path) : given;
}

bool Exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

void GatherConfigs(const NodeOptions& o, Facts* f) {
  const std::string agent = ConfigPath(o.root_dir, o.agent_config, "/etc/gantry/agent.yaml");
  bool agent_has_ckpt_roots = false;
  if (!Exists(agent)) {
    f->Set("agent.configured", false);
    f->Set("agent.idleShutdown", false);
  } else {
    Result<agent::AgentConfig> cfg = agent::LoadAgentConfig(agent);
    if (!cfg.ok()) {
      f->Set("agent.configured", false);
      f->Set("agent.error", cfg.status().message());
      f->Unknown("agent.idleShutdown");
    } else {
      f->Set("agent.configured", true);
      f->Set("agent.idleShutdown", cfg->idle.enabled && !cfg->idle.action.empty());
      if (cfg->idle.enabled) f->Set("agent.idleFor", cfg->idle.idle_for.count());
      agent_has_ckpt_roots = !cfg->checkpoint_roots.empty();
    }
  }
  auto yaml_present = [&](const std::string& path, const std::string& key, bool extra) {
    if (!Exists(path)) {
      f->Set(key + ".configured", extra);
      return;
    }
    Result<Config> c = Config::LoadFile(path);
    if (c.ok() && !c->IsMap("")) c = InvalidArgument(path + ": expected a YAML map");
    if (!c.ok()) {
      f->Set(key + ".configured", extra);
      f->Set(key + ".error", c.status().message());
      return;
    }
    f->Set(key + ".configured", true);
  };
  yaml_present(ConfigPath(o.root_dir, o.ckpt_config, "/etc/gantry/ckpt.yaml"), "ckpt",
               agent_has_ckpt_roots);
  yaml_present(ConfigPath(o.root_dir, o.backup_config, "/etc/gantry/backup.yaml"), "backup", false);
}

bool HasAccountKey(std::string_view value) {
  std::string l = AsciiLower(value);
  return l.find("accountkey=") != std::string::npos &&
         l.find("usedevelopmentstorage=true") == std::string::npos;
}

// One "NAME=value" (or "export NAME=value", quotes allowed) naming a key.
std::optional<std::string> KeyVariable(std::string_view entry) {
  std::string_view e = TrimSpace(entry);
  if (e.starts_with("export ")) e = TrimSpace(e.substr(7));
  size_t eq = e.find('=');
  if (eq == std::string_view::npos) return std::nullopt;
  std::string name(TrimSpace(e.substr(0, eq)));
  std::string_view value = TrimSpace(e.substr(eq + 1));
  if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'')) {
    value = value.substr(1, value.size() - 2);
  }
  if (value.empty()) return std::nullopt;
  if (name == "AZURE_STORAGE_KEY") return name;
  if (name == "AZURE_STORAGE_CONNECTION_STRING" && HasAccountKey(value)) return name;
  return std::nullopt;
}

void GatherStorage(const NodeOptions& o, Facts* f) {
  Json keys = Json::array();
  for (const std::string& k : FindStorageAccountKeys(o)) keys.push_back(k);
  f->Set("storage.accountKeys", keys);
}

void GatherHealth(const NodeOptions& o, const std::optional<ImdsInfo>& vm, health::Nvml* nvml,
                  Facts* f) {
  bool known = true;
  Result<health::Profile> profile = health::Profile::ForVmSize(vm ? vm->vm_size : "", &known);
  if (!profile.ok()) {
    f->Unknown("health.verdict");
    return;
  }
  Result<std::vector<std::unique_ptr<health::Check>>> checks = health::BuildChecks(*profile);
  if (!checks.ok()) {
    f->Unknown("health.verdict");
    return;
  }
  health::Context ctx;
  ctx.root_dir = o.root_dir;
  ctx.profile = &*profile;
  ctx.nvml = nvml;
  ctx.clock = &SystemClock();
  ctx.vm = vm;
  health::RunOptions run;
  run.watchdog = std::chrono::seconds(30);
  // The bandwidth probes take seconds and load the machine; an assessment
  // only reads.
  for (const auto& c : *checks) {
    const std::string id = c->name();
    if (id == "memory_bandwidth" || id == "collective" || id == "gemm" || id == "disk_bandwidth" ||
        id == "gpu_bandwidth") {
      run.skip.push_back(id);
    }
  }
  Result<health::HealthReport> report = health::RunHealth(*checks, ctx, run);
  if (!report.ok()) {
    f->Unknown("health.verdict");
    return;
  }
  Json failed = Json::array();
  std::string verdict = "pass";
  for (const health::CheckResult& r : report->results) {
    if (r.outcome == health::Outcome::kFail || r.outcome == health::Outcome::kError) {
      failed.push_back(r.name);
      verdict = "fail";
    } else if (r.outcome == health::Outcome::kWarn && verdict == "pass") {
      verdict = "warn";
    }
  }
  f->Set("health.verdict", verdict);
  f->Set("health.failed", failed);
  f->Set("health.profile", report->profile);
}

std::string Hostname(const std::string& root) {
  if (!root.empty() && root != "/") {
    if (auto h = ReadSmall(Under(root, "/etc/hostname")); h && !h->empty()) return *h;
  }
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

}  // namespace

std::vector<std::string> FindStorageAccountKeys(const NodeOptions& o) {
  std::vector<std::string> found;
  std::vector<std::string> env;
  if (o.environment) {
    env = *o.environment;
  } else {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  }
  for (const std::string& e : env) {
    if (auto name = KeyVariable(e)) found.push_back("$" + *name);
  }
  std::sort(found.begin(), found.end());
  {
    std::ifstream in(Under(o.root_dir, "/etc/environment"));
    std::string line;
    while (std::getline(in, line)) {
      if (auto name = KeyVariable(line)) found.push_back("/etc/environment: " + *name);
    }
  }
  // The Gantry configs are YAML; a line scan finds "key: value" at any depth
  // without loading them (a config that does not load is still a leaked key).
  struct Cfg {
    std::string given;
    std::string_view default_path;
  };
  for (const Cfg& c :
       {Cfg{o.agent_config, "/etc/gantry/agent.yaml"}, Cfg{o.ckpt_config, "/etc/gantry/ckpt.yaml"},
        Cfg{o.backup_config, "/etc/gantry/backup.yaml"}}) {
    const std::string path = ConfigPath(o.root_dir, c.given, c.default_path);
    const std::string shown = c.given.empty() ? std::string(c.default_path) : c.given;
    std::ifstream in(path);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      std::string_view l = TrimSpace(line);
      if (l.starts_with("#")) continue;
      if (l.starts_with("- ")) l = TrimSpace(l.substr(2));
      size_t colon = l.find(':');
      std::string key(colon == std::string_view::npos ? "" : TrimSpace(l.substr(0, colon)));
      std::string_view value = colon == std::string_view::npos ? l : TrimSpace(l.substr(colon + 1));
      // Only a plain YAML key is named: a colon inside a value ("https://") must
      // never echo the text before it, which may hold the key.
      if (!std::all_of(key.begin(), key.end(), [](char ch) {
            return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' ||
                   ch == '.';
          })) {
        key.clear();
        value = l;
      }
      std::string lkey = AsciiLower(key);
      bool named = (lkey == "account_key" || lkey == "accountkey" || lkey == "storage_key" ||
                    lkey == "azure_storage_key") &&
                   !value.empty();
      if (named || HasAccountKey(value)) {
        found.push_back(fmt::format("{}:{} {}", shown, n, key.empty() ? "(a value)" : key));
      }
    }
  }
  return found;
}

Result<Resource> GatherNode(const NodeOptions& options, const Imds& imds) {
  if (options.apt_timeout_s < 1) {
    return InvalidArgument(fmt::format("apt_timeout_s: {} is not a positive number of seconds",
                                       options.apt_timeout_s));
  }
  Facts f;
  Result<ImdsInfo> vm = imds.Fetch();
  std::optional<ImdsInfo> vm_info;
  if (vm.ok()) {
    vm_info = *vm;
    f.Set("vm.size", vm->vm_size);
    f.Set("vm.priority", vm->priority);
    f.Set("vm.evictionPolicy", vm->eviction_policy);
    f.Set("vm.zone", vm->zone);
    if (vm->network_known) {
      f.Set("network.publicIpAddresses", vm->public_ips);
    } else {
      f.Unknown("network.publicIpAddresses");
    }
  } else {
    f.Set("vm.error", vm.status().message());
    for (const char* k :
         {"vm.size", "vm.priority", "vm.evictionPolicy", "vm.zone", "network.publicIpAddresses"}) {
      f.Unknown(k);
    }
  }

  GatherNetwork(options.root_dir, &f);
  GatherUpdates(options.root_dir, options.apt_timeout_s, &f);
  {
    std::error_code ec;
    const bool reboot = fs::exists(Under(options.root_dir, "/var/run/reboot-required"), ec) ||
                        fs::exists(Under(options.root_dir, "/run/reboot-required"), ec);
    f.Set("os.rebootRequired", reboot);
  }

  // NVML only where there is an NVIDIA device to ask about.
  bool pci_readable = false;
  const int pci_gpus = CountNvidiaPci(options.root_dir, &pci_readable);
  std::unique_ptr<health::Nvml> nvml;
  std::string nvml_error;
  if (pci_gpus > 0) {
    Result<std::unique_ptr<health::Nvml>> loaded = health::Nvml::Load(options.nvml_library);
    if (loaded.ok()) {
      nvml = std::move(*loaded);
    } else {
      nvml_error = loaded.status().message();
    }
  }
  GatherGpus(options.root_dir, nvml.get(), nvml_error, pci_gpus, pci_readable, &f);
  GatherConfigs(options, &f);
  GatherStorage(options, &f);
  if (options.run_health) {
    GatherHealth(options, vm_info, nvml.get(), &f);
  } else {
    f.Unknown("health.verdict");
  }

  Resource r;
  r.type = std::string(kNodeType);
  r.name = Hostname(options.root_dir);
  r.address = r.name;
  r.origin = Origin::kNode;
  r.location = vm.ok() ? AsciiLower(vm->location) : "";
  r.body = {{"type", r.type}, {"name", r.name}, {"location", r.location}, {"properties", f.props}};
  r.unknown = std::move(f.unknown);
  return r;
}

}  // namespace gantry::assess
