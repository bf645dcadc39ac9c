#include "gantry/jobs/prereq.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "gantry/core/clock.h"
#include "gantry/core/subprocess.h"
#include "gantry/core/text.h"
#include "gantry/core/units.h"
#include "gantry/health/check.h"
#include "gantry/health/nvml.h"
#include "gantry/health/profile.h"
#include "gantry/registry/registry.h"
#include "gantry/security/dsse.h"
#include "pyversion.h"

namespace gantry::jobs {
namespace fs = std::filesystem;

// ---------------------------------------------------------------- parsing

bool Prerequisites::empty() const {
  return !health && python.empty() && executables.empty() && disk.empty() &&
         gpu_memory_free_bytes == 0 && datasets.empty() && !signature && !packages &&
         registries.empty();
}

namespace {

const std::vector<std::string> kKeys = {
    "health",     "python",    "executables", "disk",       "gpu_memory_free",
    "datasets",   "signature", "packages",    "registries", "python_interpreter",
    "python_path"};

Status At(const Config& view, std::string_view key, std::string_view what) {
  return InvalidArgument(view.Locate(key) + ": " + std::string(what));
}

bool IsIdentifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s.front()))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// "torch", "google.protobuf": dotted Python identifiers.
bool IsModuleName(std::string_view s) {
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    if (!IsIdentifier(s.substr(start, dot - start))) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

Result<std::vector<std::string>> NonEmptyStrings(const Config& view, std::string_view key) {
  ASSIGN_OR_RETURN(std::vector<std::string> list, view.GetStringList(key));
  for (size_t i = 0; i < list.size(); ++i) {
    if (TrimSpace(list[i]).empty()) {
      return At(view, std::string(key) + "." + std::to_string(i), "empty entry");
    }
  }
  return list;
}

Status ParseHealth(const Config& view, Prerequisites* p) {
  if (!view.Has("health")) return Status::Ok();
  if (view.IsScalar("health")) {
    // `health: true|false`, or `health: PROFILE`.
    if (Result<bool> on = view.GetBool("health", false); on.ok()) {
      if (*on) p->health = HealthPrereq{};
      return Status::Ok();
    }
    ASSIGN_OR_RETURN(std::string profile, view.GetString("health", ""));
    p->health = HealthPrereq{.profile = profile, .checks = {}};
    return Status::Ok();
  }
  if (!view.IsMap("health")) {
    return At(view, "health", "expected a map {profile, checks}, a profile name or true");
  }
  RETURN_IF_ERROR(view.CheckKnownKeys("health", {"profile", "checks"}));
  HealthPrereq h;
  ASSIGN_OR_RETURN(h.profile, view.GetString("health.profile", "auto"));
  if (TrimSpace(h.profile).empty()) return At(view, "health.profile", "empty profile name");
  ASSIGN_OR_RETURN(h.checks, NonEmptyStrings(view, "health.checks"));
  p->health = std::move(h);
  return Status::Ok();
}

Status ParsePython(const Config& view, Prerequisites* p) {
  ASSIGN_OR_RETURN(p->python, NonEmptyStrings(view, "python"));
  for (size_t i = 0; i < p->python.size(); ++i) {
    const std::string key = "python." + std::to_string(i);
    Result<Requirement> r = ParseRequirement(p->python[i]);
    if (!r.ok()) return At(view, key, r.status().message());
    if (!IsModuleName(r->name)) {
      return At(view, key,
                "'" + r->name +
                    "' is not a Python module name: write the name you import (yaml, sklearn), "
                    "not the distribution's (pyyaml, scikit-learn)");
    }
    if (!r->extras.empty()) return At(view, key, "extras ([...]) have no meaning for a module");
  }
  return Status::Ok();
}

Status ParseDisk(const Config& view, Prerequisites* p) {
  if (view.Has("disk") && !view.IsList("disk")) {
    return At(view, "disk", "expected a list of {path, free}");
  }
  ASSIGN_OR_RETURN(std::vector<Config> items, view.Items("disk"));
  for (const Config& item : items) {
    if (!item.IsMap("")) return At(item, "", "expected {path, free}");
    RETURN_IF_ERROR(item.CheckKnownKeys("", {"path", "free"}));
    DiskPrereq d;
    ASSIGN_OR_RETURN(d.path, item.GetString("path", ""));
    if (d.path.empty()) return At(item, "", "'path' is required");
    if (!item.Has("free")) return At(item, "", "'free' is required (a size such as 100G)");
    ASSIGN_OR_RETURN(d.min_free_bytes, item.GetSize("free", 0));
    p->disk.push_back(std::move(d));
  }
  return Status::Ok();
}

Status ParseDatasets(const Config& view, Prerequisites* p) {
  if (view.Has("datasets") && !view.IsList("datasets")) {
    return At(view, "datasets", "expected a list of {path, min_size, sha256}");
  }
  ASSIGN_OR_RETURN(std::vector<Config> items, view.Items("datasets"));
  for (const Config& item : items) {
    if (!item.IsMap("")) return At(item, "", "expected {path, min_size, sha256}");
    RETURN_IF_ERROR(item.CheckKnownKeys("", {"path", "min_size", "sha256"}));
    DatasetPrereq d;
    ASSIGN_OR_RETURN(d.path, item.GetString("path", ""));
    if (d.path.empty()) return At(item, "", "'path' is required");
    ASSIGN_OR_RETURN(d.min_bytes, item.GetSize("min_size", 0));
    ASSIGN_OR_RETURN(std::string digest, item.GetString("sha256", ""));
    digest = AsciiLower(TrimSpace(digest));
    if (!digest.empty() && (digest.size() != 64 ||
                            digest.find_first_not_of("0123456789abcdef") != std::string::npos)) {
      return At(item, "sha256", "expected 64 hex digits (sha256sum's output)");
    }
    d.sha256 = std::move(digest);
    p->datasets.push_back(std::move(d));
  }
  return Status::Ok();
}

Status ParseSignature(const Config& view, Prerequisites* p) {
  if (!view.Has("signature")) return Status::Ok();
  if (!view.IsMap("signature"))
    return At(view, "signature", "expected {dir, bundle, trusted_keys}");
  RETURN_IF_ERROR(view.CheckKnownKeys("signature", {"dir", "bundle", "trusted_keys"}));
  SignaturePrereq s;
  ASSIGN_OR_RETURN(s.dir, view.GetString("signature.dir", ""));
  if (s.dir.empty()) return At(view, "signature", "'dir' (the code directory) is required");
  ASSIGN_OR_RETURN(s.bundle, view.GetString("signature.bundle", ""));
  if (s.bundle.empty()) s.bundle = s.dir + "/" + std::string(registry::kSignatureFile);
  ASSIGN_OR_RETURN(s.trusted_keys, NonEmptyStrings(view, "signature.trusted_keys"));
  if (s.trusted_keys.empty()) {
    return At(view, "signature",
              "'trusted_keys' is required: the public key PEM files whose signatures count");
  }
  p->signature = std::move(s);
  return Status::Ok();
}

Status ParsePackages(const Config& view, Prerequisites* p) {
  if (!view.Has("packages")) return Status::Ok();
  if (!view.IsList("packages")) {
    return At(view, "packages", "expected a list of allowed packages (\"torch>=2.1\", numpy)");
  }
  ASSIGN_OR_RETURN(std::vector<std::string> list, NonEmptyStrings(view, "packages"));
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string key = "packages." + std::to_string(i);
    Result<Requirement> r = ParseRequirement(list[i]);
    if (!r.ok()) return At(view, key, r.status().message());
    if (!r->extras.empty()) return At(view, key, "extras ([...]) have no meaning in an allowlist");
    auto [it, fresh] = seen.emplace(NormalizePackageName(r->name), i);
    if (!fresh) {
      return At(view, key,
                "'" + r->name + "' is already listed at " +
                    view.Position("packages." + std::to_string(it->second)).ToString() +
                    ": join the specifiers with a comma in one entry");
    }
  }
  p->packages = std::move(list);
  return Status::Ok();
}

Status ParseRegistries(const Config& view, Prerequisites* p) {
  ASSIGN_OR_RETURN(p->registries, NonEmptyStrings(view, "registries"));
  for (size_t i = 0; i < p->registries.size(); ++i) {
    std::string& r = p->registries[i];
    r = std::string(TrimSpace(r));
    if (r.find("://") != std::string::npos) {
      return At(view, "registries." + std::to_string(i),
                "write the registry as host[:port][/path], without a scheme");
    }
    while (!r.empty() && r.back() == '/') r.pop_back();
    if (r.empty() || r.front() == '/' || r.find("//") != std::string::npos ||
        r.find_first_of(" \t@") != std::string::npos) {
      return At(view, "registries." + std::to_string(i), "malformed registry '" + r + "'");
    }
  }
  return Status::Ok();
}

Status ParseInterpreter(const Config& view, Prerequisites* p) {
  if (view.Has("python_interpreter")) {
    ASSIGN_OR_RETURN(p->python_interpreter, view.GetString("python_interpreter", ""));
    if (TrimSpace(p->python_interpreter).empty()) {
      return At(view, "python_interpreter", "empty interpreter path");
    }
    p->python_interpreter_given = true;
  }
  if (view.Has("python_path")) {
    if (!view.IsList("python_path"))
      return At(view, "python_path", "expected a list of directories");
    ASSIGN_OR_RETURN(p->python_path, NonEmptyStrings(view, "python_path"));
  }
  return Status::Ok();
}

}  // namespace

Result<Prerequisites> ParsePrerequisites(const Config& view) {
  Prerequisites p;
  if (!view.Has("")) return p;
  if (!view.IsMap("")) {
    return At(view, "", "expected a map of prerequisites (health, python, executables, ...)");
  }
  RETURN_IF_ERROR(view.CheckKnownKeys("", kKeys));
  RETURN_IF_ERROR(ParseHealth(view, &p));
  RETURN_IF_ERROR(ParsePython(view, &p));
  ASSIGN_OR_RETURN(p.executables, NonEmptyStrings(view, "executables"));
  RETURN_IF_ERROR(ParseDisk(view, &p));
  ASSIGN_OR_RETURN(p.gpu_memory_free_bytes, view.GetSize("gpu_memory_free", 0));
  RETURN_IF_ERROR(ParseDatasets(view, &p));
  RETURN_IF_ERROR(ParseSignature(view, &p));
  RETURN_IF_ERROR(ParsePackages(view, &p));
  RETURN_IF_ERROR(ParseRegistries(view, &p));
  RETURN_IF_ERROR(ParseInterpreter(view, &p));
  return p;
}

Prerequisites MergePrerequisites(const Prerequisites& workflow, const Prerequisites& step) {
  Prerequisites m = workflow;
  auto append = [](auto* to, const auto& from) { to->insert(to->end(), from.begin(), from.end()); };
  if (step.health) m.health = step.health;
  append(&m.python, step.python);
  append(&m.executables, step.executables);
  append(&m.disk, step.disk);
  m.gpu_memory_free_bytes = std::max(workflow.gpu_memory_free_bytes, step.gpu_memory_free_bytes);
  append(&m.datasets, step.datasets);
  if (step.signature) m.signature = step.signature;
  if (step.packages) m.packages = step.packages;
  append(&m.registries, step.registries);
  if (step.python_interpreter_given) {
    m.python_interpreter = step.python_interpreter;
    m.python_interpreter_given = true;
  }
  if (step.python_path) m.python_path = step.python_path;
  return m;
}

std::string FailureSummary(const std::vector<PrereqResult>& results) {
  std::vector<std::string> parts;
  for (const PrereqResult& r : results) {
    if (!r.ok) parts.push_back(r.check + ": " + r.message);
  }
  return Join(parts, "; ");
}

Json ToJson(const std::vector<PrereqResult>& results) {
  Json out = Json::array();
  for (const PrereqResult& r : results) {
    Json j = {{"check", r.check}, {"ok", r.ok}, {"message", r.message}};
    if (!r.details.empty()) j["details"] = r.details;
    out.push_back(std::move(j));
  }
  return out;
}

// ---------------------------------------------------------------- checking

namespace {

// `path` as the step sees it: relative paths are under the workdir.
std::string Resolve(const PrereqContext& ctx, const std::string& path) {
  if (path.empty() || path.front() == '/' || ctx.workdir.empty()) return path;
  std::string out = (fs::path(ctx.workdir) / path).lexically_normal().string();
  if (out.size() > 1 && out.back() == '/') out.pop_back();  // "." gives "dir/"
  return out;
}

PrereqResult Ok(std::string check, std::string message) {
  return {std::move(check), true, std::move(message), {}};
}
PrereqResult Fail(std::string check, std::string message) {
  return {std::move(check), false, std::move(message), {}};
}

// The docker reference rules: the first component names a registry when it
// has a '.' or ':' or is "localhost"; otherwise the image is on Docker Hub,
// where one-component names live under library/.
struct ImageRef {
  std::string registry;    // lower case: "docker.io", "myacr.azurecr.io", "localhost:5000"
  std::string repository;  // "library/ubuntu", "team/train"
};

std::string CanonicalRegistry(std::string host) {
  host = AsciiLower(host);
  if (host == "index.docker.io" || host == "registry-1.docker.io") return "docker.io";
  return host;
}

Result<ImageRef> ParseImage(std::string_view image) {
  std::string_view name = TrimSpace(image);
  name = name.substr(0, name.find('@'));  // digest
  if (size_t colon = name.rfind(':');
      colon != std::string_view::npos && name.find('/', colon) == std::string_view::npos) {
    // A ':' after the last '/' starts the tag; one before it is a port.
    name = name.substr(0, colon);
  }
  if (name.empty() || name.front() == '/' || name.back() == '/' ||
      name.find("//") != std::string_view::npos) {
    return InvalidArgument("malformed image reference '" + std::string(image) + "'");
  }
  ImageRef ref;
  size_t slash = name.find('/');
  std::string_view first = name.substr(0, slash);
  if (slash != std::string_view::npos &&
      (first.find_first_of(".:") != std::string_view::npos || first == "localhost")) {
    ref.registry = CanonicalRegistry(std::string(first));
    ref.repository = std::string(name.substr(slash + 1));
  } else {
    ref.registry = "docker.io";
    ref.repository = std::string(name);
  }
  if (ref.registry == "docker.io" && ref.repository.find('/') == std::string::npos) {
    ref.repository = "library/" + ref.repository;
  }
  return ref;
}

// An approved entry is a registry ("mcr.microsoft.com") or a registry with a
// repository prefix ("myacr.azurecr.io/team"), matched on whole components.
bool Approved(const ImageRef& ref, std::string_view entry) {
  size_t slash = entry.find('/');
  std::string host = CanonicalRegistry(std::string(entry.substr(0, slash)));
  if (host != ref.registry) return false;
  if (slash == std::string_view::npos) return true;
  std::string prefix(entry.substr(slash + 1));
  return ref.repository == prefix || ref.repository.starts_with(prefix + "/");
}

PrereqResult CheckRegistry(const std::vector<std::string>& approved, const std::string& image) {
  const std::string check = "registry " + image;
  Result<ImageRef> ref = ParseImage(image);
  if (!ref.ok()) return Fail(check, ref.status().message());
  for (const std::string& entry : approved) {
    if (Approved(*ref, entry)) {
      return Ok(check,
                "from " + ref->registry + "/" + ref->repository + ", approved by '" + entry + "'");
    }
  }
  return Fail(check, "image registry " + ref->registry + " (repository " + ref->repository +
                         ") is not approved (approved: " + Join(approved, ", ") +
                         "); use an image from an approved registry or add it to "
                         "requires.registries");
}

PrereqResult CheckExecutable(const PrereqContext& ctx, const std::string& name) {
  const std::string check = "executable " + name;
  const bool is_path = name.find('/') != std::string::npos;
  const std::string found = FindExecutable(is_path ? Resolve(ctx, name) : name);
  if (!found.empty()) return Ok(check, "found at " + found);
  if (is_path) return Fail(check, Resolve(ctx, name) + " is not an executable file");
  const char* path = std::getenv("PATH");
  return Fail(check, "not found in $PATH (" +
                         std::string(path != nullptr ? path : "/usr/bin:/bin") +
                         "); install it or add its directory to PATH");
}

PrereqResult CheckDisk(const PrereqContext& ctx, const DiskPrereq& d) {
  const std::string check = "disk " + d.path;
  const std::string path = Resolve(ctx, d.path);
  // A step may write to a directory it creates: measure where it will be.
  fs::path at = path;
  std::error_code ec;
  while (!fs::exists(at, ec) && at.has_parent_path() && at != at.parent_path()) {
    at = at.parent_path();
  }
  struct statvfs sv {};
  if (::statvfs(at.c_str(), &sv) != 0) {
    return Fail(check, IoError("statvfs " + at.string(), errno).message());
  }
  const uint64_t free = static_cast<uint64_t>(sv.f_bavail) * sv.f_frsize;
  std::string where = path;
  if (at.string() != path) where += " (measured at " + at.string() + ", which exists)";
  std::string msg =
      where + ": " + FormatSize(free) + " free, needs " + FormatSize(d.min_free_bytes);
  if (free >= d.min_free_bytes) return Ok(check, msg);
  return Fail(check, msg + "; free some space or use another path");
}

Result<uint64_t> DatasetSize(const fs::path& path, bool* is_dir) {
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return NotFound(path.string() + " does not exist");
  *is_dir = fs::is_directory(st);
  if (!*is_dir) {
    uint64_t size = fs::file_size(path, ec);
    if (ec) return IoError("stat " + path.string(), ec.value());
    return size;
  }
  uint64_t total = 0;
  fs::recursive_directory_iterator it(path, fs::directory_options::none, ec), end;
  if (ec) return IoError("listing " + path.string(), ec.value());
  for (; it != end; it.increment(ec)) {
    if (ec) return IoError("listing " + path.string(), ec.value());
    if (it->is_regular_file(ec)) total += it->file_size(ec);
    if (ec) return IoError("stat " + it->path().string(), ec.value());
  }
  return total;
}

}  // namespace

// ---------------------------------------------------------------- caches

namespace {

// NVML handles by library path, loaded on first use (never for a step that
// needs no GPU figure), failures included so a node without a driver is
// not probed again for every step.
class NvmlCache {
 public:
  Result<std::shared_ptr<health::Nvml>> Get(const std::string& library) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = libs_.find(library);
    if (it == libs_.end()) {
      Result<std::unique_ptr<health::Nvml>> loaded = health::Nvml::Load(library);
      Result<std::shared_ptr<health::Nvml>> entry = loaded.status();
      if (loaded.ok()) entry = std::shared_ptr<health::Nvml>(std::move(*loaded));
      it = libs_.emplace(library, std::move(entry)).first;
    }
    return it->second;
  }

 private:
  std::mutex mu_;
  std::map<std::string, Result<std::shared_ptr<health::Nvml>>> libs_;
};

// SHA-256 of dataset files by identity and modification, so a dataset that
// several steps require is read once, and again after a step rewrote it.
class DigestCache {
 public:
  Result<std::string> Sha256(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return IoError("stat " + path, errno);
    Key key{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
            static_cast<uint64_t>(st.st_size),
            static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = digests_.find(key); it != digests_.end()) return it->second;
    }
    // Hashed outside the lock: a large file takes a while and other steps'
    // checks need not wait. Symlinks are resolved first (HashPath hashes a
    // regular file only).
    std::error_code ec;
    fs::path real = fs::canonical(path, ec);
    if (ec) return IoError("resolving " + path, ec.value());
    ASSIGN_OR_RETURN(registry::Manifest m, registry::HashPath(real.string(), "dataset"));
    if (m.files.size() != 1) return Internal("hashing " + path + " gave no single file");
    std::lock_guard<std::mutex> lock(mu_);
    digests_[key] = m.files[0].sha256;
    return m.files[0].sha256;
  }

 private:
  using Key = std::tuple<uint64_t, uint64_t, uint64_t, int64_t>;
  std::mutex mu_;
  std::map<Key, std::string> digests_;
};

}  // namespace

// ---------------------------------------------------------------- the checker

struct PrereqChecker::Cache {
  std::mutex mu;         // health results and the VM answer
  std::mutex health_mu;  // one health run at a time (they measure the node)
  std::map<std::string, PrereqResult> health;
  std::optional<Result<ImdsInfo>> vm;
  NvmlCache nvml;
  DigestCache digests;
};

PrereqChecker::PrereqChecker() : PrereqChecker(PrereqOptions{}) {}
PrereqChecker::PrereqChecker(PrereqOptions options)
    : options_(options), cache_(std::make_unique<Cache>()) {}
PrereqChecker::~PrereqChecker() = default;

namespace {

std::vector<PrereqResult> CheckGpuMemory(uint64_t min_free, const PrereqContext& ctx,
                                         const Result<std::shared_ptr<health::Nvml>>& nvml) {
  std::vector<PrereqResult> out;
  if (!nvml.ok()) {
    out.push_back(Fail("gpu_memory_free", "NVML is not available (" + nvml.status().message() +
                                              "): cannot measure GPU memory"));
    return out;
  }
  for (int gpu : ctx.gpus) {
    const std::string check = "gpu_memory_free GPU " + std::to_string(gpu);
    Result<health::GpuMemory> mem = (*nvml)->MemoryInfo(gpu);
    if (!mem.ok()) {
      out.push_back(Fail(check, mem.status().message()));
      continue;
    }
    std::string msg = FormatSize(mem->free) + " free of " + FormatSize(mem->total) + ", needs " +
                      FormatSize(min_free);
    if (mem->free >= min_free) {
      out.push_back(Ok(check, msg));
    } else {
      out.push_back(Fail(check, msg + "; other processes hold GPU memory (nvidia-smi lists them)"));
    }
  }
  return out;
}

PrereqResult CheckDataset(const PrereqContext& ctx, const DatasetPrereq& d, DigestCache* digests) {
  const std::string check = "dataset " + d.path;
  const std::string path = Resolve(ctx, d.path);
  bool is_dir = false;
  Result<uint64_t> size = DatasetSize(path, &is_dir);
  if (!size.ok()) {
    std::string msg = size.status().message();
    if (path != d.path) msg += " (relative to the workdir " + ctx.workdir + ")";
    return Fail(check, msg + "; run the step that prepares it first");
  }
  std::string msg = path + ": " + FormatSize(*size) + (is_dir ? " in the directory" : "");
  if (d.min_bytes > 0) msg += ", needs at least " + FormatSize(d.min_bytes);
  if (*size < d.min_bytes) return Fail(check, msg + "; it is incomplete or the wrong one");
  if (!d.sha256.empty()) {
    if (is_dir) {
      return Fail(check, msg +
                             "; sha256 is given but this is a directory (a digest covers one "
                             "file: list the file)");
    }
    Result<std::string> got = digests->Sha256(path);
    if (!got.ok()) return Fail(check, got.status().message());
    if (*got != d.sha256) {
      return Fail(check, msg + "; sha256 " + *got + " is not the expected " + d.sha256 +
                             ": the file changed or is incomplete");
    }
    msg += ", sha256 matches";
  }
  return Ok(check, msg);
}

PrereqResult CheckSignature(const PrereqContext& ctx, const SignaturePrereq& s) {
  const std::string check = "signature " + s.dir;
  const std::string dir = Resolve(ctx, s.dir);
  const std::string bundle_path = Resolve(ctx, s.bundle);
  Result<std::string> bundle = ReadFile(bundle_path);
  if (!bundle.ok()) {
    return Fail(check, "cannot read the signature bundle: " + bundle.status().message() +
                           " (sign the directory with `gantry registry sign --dir " + s.dir + "`)");
  }
  std::vector<security::DsseVerifier> trusted;
  std::map<std::string, std::string> key_files;  // key id -> file, for the message
  for (const std::string& key : s.trusted_keys) {
    const std::string key_path = Resolve(ctx, key);
    Result<std::string> pem = ReadFile(key_path);
    if (!pem.ok()) return Fail(check, "trusted key: " + pem.status().message());
    Result<security::DsseVerifier> v = security::DsseVerifier::FromPublicPem(*pem);
    if (!v.ok()) return Fail(check, "trusted key " + key_path + ": " + v.status().message());
    key_files.emplace(v->KeyId(), key);
    trusted.push_back(std::move(*v));
  }
  Result<std::string> id = registry::VerifyDirectory(dir, *bundle, trusted);
  if (!id.ok()) {
    std::string msg =
        dir + " does not verify against " + bundle_path + ": " + id.status().message();
    if (id.status().code() == StatusCode::kDataLoss) {
      msg += " (the code differs from what was signed: re-sign it after a reviewed change)";
    }
    return Fail(check, msg);
  }
  return Ok(check, dir + " verified: signed by trusted key " + *id + " (" + key_files[*id] + ")");
}

// The allowlist's first few offenders in the message, all of them in details.
constexpr size_t kListedViolations = 5;

PrereqResult CheckPackages(const std::vector<std::string>& allowlist, const PythonProbe& probe) {
  std::vector<Requirement> allowed;
  for (const std::string& entry : allowlist) {
    Result<Requirement> r = ParseRequirement(entry);
    if (!r.ok()) return Fail("packages", "allowlist entry " + r.status().message());
    allowed.push_back(std::move(*r));
  }
  std::vector<std::string> bad = AllowlistViolations(allowed, probe.distributions);
  const std::string env = "Python " + probe.python_version + " at " + probe.executable;
  const int64_t total = static_cast<int64_t>(probe.distributions.size());
  if (bad.empty()) {
    return Ok("packages", "all " +
                              Plural(total, "installed distribution", "installed distributions") +
                              " of " + env + " are in the allowlist");
  }
  std::vector<std::string> shown(bad.begin(),
                                 bad.begin() + std::min(bad.size(), kListedViolations));
  std::string msg = std::to_string(bad.size()) + " of " +
                    Plural(total, "installed distribution", "installed distributions") + " of " +
                    env + " are outside the allowlist: " + Join(shown, "; ");
  if (bad.size() > shown.size())
    msg += "; and " + std::to_string(bad.size() - shown.size()) + " more";
  msg += " (uninstall them or extend requires.packages)";
  PrereqResult r = Fail("packages", msg);
  r.details = std::move(bad);
  return r;
}

PrereqResult CheckModule(const std::string& spec, const ModuleProbe& m, const std::string& exe) {
  const std::string check = "python " + spec;
  Result<Requirement> req = ParseRequirement(spec);
  if (!req.ok()) return Fail(check, req.status().message());
  if (!m.found) return Fail(check, "cannot import " + m.name + " with " + exe + ": " + m.error);
  const std::string where = m.file.empty() ? std::string("built in") : m.file;
  if (m.version.empty()) {
    if (req->specifiers.empty()) return Ok(check, m.name + " imports (" + where + ", no version)");
    return Fail(check, m.name + " imports (" + where +
                           ") but has no version (no distribution metadata, no __version__) to "
                           "compare with " +
                           req->specifiers.ToString());
  }
  const std::string found = m.version + " (" + m.version_source + ", " + where + ")";
  if (req->specifiers.empty()) return Ok(check, m.name + " " + found);
  if (req->specifiers.ContainsText(m.version)) {
    return Ok(check, m.name + " " + found + " satisfies " + req->specifiers.ToString());
  }
  return Fail(check, m.version + " does not satisfy " + req->specifiers.ToString() + " (" +
                         m.version_source + ", " + where + ")");
}

std::vector<PrereqResult> CheckPython(const Prerequisites& p, const PrereqContext& ctx,
                                      const PrereqOptions& options) {
  PythonProbeRequest req;
  req.interpreter = p.python_interpreter.find('/') != std::string::npos
                        ? Resolve(ctx, p.python_interpreter)
                        : p.python_interpreter;
  if (p.python_path) {
    req.path.emplace();
    for (const std::string& dir : *p.python_path) req.path->push_back(Resolve(ctx, dir));
  }
  req.workdir = ctx.workdir;
  for (const std::string& spec : p.python) {
    Result<Requirement> r = ParseRequirement(spec);
    req.modules.push_back(r.ok() ? r->name : spec);
  }
  req.distributions = p.packages.has_value();
  req.timeout = options.python_timeout;
  Result<PythonProbe> probe = RunPythonProbe(req);
  std::vector<PrereqResult> out;
  if (!probe.ok()) {
    for (const std::string& spec : p.python)
      out.push_back(Fail("python " + spec, probe.status().message()));
    if (p.packages) out.push_back(Fail("packages", probe.status().message()));
    return out;
  }
  for (size_t i = 0; i < p.python.size(); ++i) {
    out.push_back(CheckModule(p.python[i], probe->modules[i], probe->executable));
  }
  if (p.packages) out.push_back(CheckPackages(*p.packages, *probe));
  return out;
}

std::string OutcomeCounts(const health::HealthReport& r) {
  std::map<std::string_view, int> counts;
  for (const health::CheckResult& c : r.results) ++counts[health::OutcomeName(c.outcome)];
  std::vector<std::string> parts;
  for (std::string_view name : {"pass", "warn", "skip", "fail", "error"}) {
    if (counts[name] > 0) parts.push_back(std::to_string(counts[name]) + " " + std::string(name));
  }
  return Plural(static_cast<int64_t>(r.results.size()), "check", "checks") + ": " +
         Join(parts, ", ");
}

bool IsGpuCheck(const std::string& id) { return id.starts_with("gpu_"); }

// What one health prerequisite needs from the checker.
struct HealthRun {
  const HealthPrereq& want;
  const PrereqContext& ctx;
  const PrereqOptions& options;
  std::function<std::optional<ImdsInfo>(std::string* note)> vm;  // sets *note off Azure
  std::function<health::Nvml*()> nvml;                           // nullptr: no driver
};

Result<health::Profile> ResolveProfile(const HealthRun& run, std::optional<ImdsInfo>* vm,
                                       std::string* note) {
  const std::string& name = run.want.profile;
  if (name == "auto") {
    *vm = run.vm(note);
    bool known = false;
    ASSIGN_OR_RETURN(health::Profile p,
                     health::Profile::ForVmSize(*vm ? (*vm)->vm_size : "", &known));
    if (*vm && !known) *note = "VM size " + (*vm)->vm_size + " has no profile; used generic";
    return p;
  }
  for (const std::string& builtin : health::Profile::BuiltinNames()) {
    if (builtin == name) return health::Profile::Builtin(name);
  }
  const std::string path = Resolve(run.ctx, name);
  if (::access(path.c_str(), F_OK) == 0) return health::Profile::LoadFile(path);
  return NotFound("profile '" + name + "' is neither a built-in profile (" +
                  Join(health::Profile::BuiltinNames(), ", ") + ") nor a file");
}

PrereqResult RunHealthPrereq(const HealthRun& run, const std::string& check) {
  std::optional<ImdsInfo> vm;
  std::string note;
  Result<health::Profile> profile = ResolveProfile(run, &vm, &note);
  if (!profile.ok()) return Fail(check, profile.status().message());
  Result<std::vector<std::unique_ptr<health::Check>>> checks = health::BuildChecks(*profile);
  if (!checks.ok()) return Fail(check, checks.status().message());
  const std::vector<std::string>& ids = profile->check_ids();
  for (const std::string& id : run.want.checks) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) {
      return Fail(check, "check '" + id + "' is not in profile " + profile->name() +
                             " (its checks: " + Join(ids, ", ") + "); name a profile that has it");
    }
  }
  const std::vector<std::string>& to_run = run.want.checks.empty() ? ids : run.want.checks;
  health::Context hctx;
  hctx.profile = &*profile;
  hctx.clock = &SystemClock();
  hctx.vm = vm;
  // NVML only for GPU checks: a CPU profile never touches the driver.
  if (std::any_of(to_run.begin(), to_run.end(), IsGpuCheck)) hctx.nvml = run.nvml();
  health::RunOptions ro;
  ro.only = run.want.checks;
  ro.watchdog = run.options.health_watchdog;
  Result<health::HealthReport> report = health::RunHealth(*checks, hctx, ro);
  if (!report.ok()) return Fail(check, report.status().message());
  std::string msg = "profile " + profile->name() + ": " +
                    std::string(health::OutcomeName(report->overall)) + " (" +
                    OutcomeCounts(*report) + ")";
  if (!note.empty()) msg += "; " + note;
  const health::CheckResult* problem = report->FirstProblem();
  if (problem == nullptr) return Ok(check, msg);
  PrereqResult r = Fail(check, msg + "; first problem: " + problem->name + ": " + problem->message +
                                   " (`gantry health` shows them all)");
  for (const health::CheckResult& c : report->results) {
    if (c.outcome == health::Outcome::kFail || c.outcome == health::Outcome::kError) {
      r.details.push_back(c.name + ": " + c.message);
    }
  }
  return r;
}

}  // namespace

std::vector<PrereqResult> PrereqChecker::Check(const Prerequisites& p, const PrereqContext& ctx) {
  std::vector<PrereqResult> out;
  if (p.health) out.push_back(CheckHealth(*p.health, ctx));
  // One interpreter run answers both python and packages; the packages
  // result (the last one) keeps its place after signature.
  std::optional<PrereqResult> packages;
  if (!p.python.empty() || p.packages) {
    std::vector<PrereqResult> py = CheckPython(p, ctx, options_);
    if (p.packages && !py.empty()) {
      packages = std::move(py.back());
      py.pop_back();
    }
    for (PrereqResult& r : py) out.push_back(std::move(r));
  }
  for (const std::string& e : p.executables) out.push_back(CheckExecutable(ctx, e));
  for (const DiskPrereq& d : p.disk) out.push_back(CheckDisk(ctx, d));
  if (p.gpu_memory_free_bytes > 0) {
    if (ctx.gpus.empty()) {
      out.push_back(Ok("gpu_memory_free", "no GPUs given to the step: nothing to check"));
    } else {
      for (PrereqResult& r :
           CheckGpuMemory(p.gpu_memory_free_bytes, ctx, cache_->nvml.Get(ctx.nvml_library))) {
        out.push_back(std::move(r));
      }
    }
  }
  for (const DatasetPrereq& d : p.datasets) out.push_back(CheckDataset(ctx, d, &cache_->digests));
  if (p.signature) out.push_back(CheckSignature(ctx, *p.signature));
  if (packages) out.push_back(std::move(*packages));
  if (!ctx.image.empty() && !p.registries.empty()) {
    out.push_back(CheckRegistry(p.registries, ctx.image));
  }
  return out;
}

PrereqResult PrereqChecker::CheckHealth(const HealthPrereq& h, const PrereqContext& ctx) {
  std::string check = "health " + h.profile;
  if (!h.checks.empty()) check += " [" + Join(h.checks, ",") + "]";
  // A relative profile file depends on the workdir, the GPU checks on the library.
  const std::string key =
      h.profile + "\n" + Join(h.checks, ",") + "\n" + ctx.workdir + "\n" + ctx.nvml_library;
  std::lock_guard<std::mutex> health_lock(cache_->health_mu);
  {
    std::lock_guard<std::mutex> lock(cache_->mu);
    if (auto it = cache_->health.find(key); it != cache_->health.end()) {
      PrereqResult r = it->second;
      r.message += " (cached: the node's health is checked once per run)";
      return r;
    }
  }
  auto vm = [this](std::string* note) -> std::optional<ImdsInfo> {
    std::lock_guard<std::mutex> lock(cache_->mu);
    if (!cache_->vm) {
      cache_->vm = options_.imds != nullptr ? options_.imds->Fetch() : AzureImds().Fetch();
    }
    if (cache_->vm->ok()) return **cache_->vm;
    *note = "no VM size from Azure IMDS (" + cache_->vm->status().message() + "); used generic";
    return std::nullopt;
  };
  auto nvml = [this, &ctx]() -> health::Nvml* {
    Result<std::shared_ptr<health::Nvml>> n = cache_->nvml.Get(ctx.nvml_library);
    return n.ok() ? n->get() : nullptr;
  };
  PrereqResult r = RunHealthPrereq(HealthRun{h, ctx, options_, vm, nvml}, check);
  std::lock_guard<std::mutex> lock(cache_->mu);
  cache_->health.emplace(key, r);
  return r;
}

}  // namespace gantry::jobs
