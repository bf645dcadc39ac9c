// Manifests: JSON form, structural checks, listing and lookup; retention rules.
#include <fnmatch.h>
#include <time.h>

#include <algorithm>
#include <unordered_set>

#include "gantry/backup/backup.h"
#include "json_integer.h"

namespace gantry::backup {
namespace {

using internal::Integer;

std::string_view TypeName(EntryType t) {
  switch (t) {
    case EntryType::kDir:
      return "dir";
    case EntryType::kSymlink:
      return "symlink";
    default:
      return "file";
  }
}

bool IsHexId(std::string_view s, size_t len) {
  if (s.size() != len) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string_view Parent(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
}

std::string_view BaseName(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

Status CheckSafePath(std::string_view path) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument("unsafe path '" + std::string(path) + "' (" + std::string(why) +
                           "): refusing to restore outside the target");
  };
  if (path.empty()) return bad("empty");
  if (path.front() == '/') return bad("absolute");
  if (path.find('\0') != std::string_view::npos) return bad("contains NUL");
  size_t start = 0;
  while (true) {
    size_t end = path.find('/', start);
    std::string_view seg = path.substr(start, end == std::string_view::npos ? end : end - start);
    if (seg.empty()) return bad("empty segment");
    if (seg == "." || seg == "..") return bad("'" + std::string(seg) + "' segment");
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return Status::Ok();
}

bool MatchesAny(const std::vector<std::string>& globs, std::string_view path) {
  std::string p(path);
  std::string base(BaseName(path));
  for (const std::string& g : globs) {
    if (g.find('/') == std::string::npos) {
      if (fnmatch(g.c_str(), base.c_str(), 0) == 0) return true;
    } else {
      std::string gg = g;
      while (gg.size() > 1 && gg.back() == '/') gg.pop_back();
      if (!gg.empty() && gg.front() == '/') gg.erase(0, 1);
      if (fnmatch(gg.c_str(), p.c_str(), 0) == 0) return true;
    }
  }
  return false;
}

Json Manifest::ToJson() const {
  Json entries_json = Json::array();
  for (const Entry& e : entries) {
    Json j{
        {"path", e.path}, {"type", TypeName(e.type)}, {"mode", e.mode}, {"mtime_ns", e.mtime_ns}};
    if (e.type == EntryType::kFile) {
      j["size"] = e.size;
      Json chunks = Json::array();
      for (const ChunkRef& c : e.chunks) chunks.push_back(Json::array({c.id, c.size}));
      j["chunks"] = std::move(chunks);
    } else if (e.type == EntryType::kSymlink) {
      j["target"] = e.target;
    }
    entries_json.push_back(std::move(j));
  }
  Json tags_json = Json::object();
  for (const auto& [k, v] : tags) tags_json[k] = v;
  return Json{{"format", "gantry-backup-manifest"},
              {"version", kManifestFormatVersion},
              {"id", id},
              {"name", name},
              {"time", time},
              {"time_unix", time_unix},
              {"hostname", hostname},
              {"tags", std::move(tags_json)},
              {"sources", sources},
              {"stats",
               {{"files", stats.files},
                {"dirs", stats.dirs},
                {"symlinks", stats.symlinks},
                {"skipped", stats.skipped},
                {"bytes", stats.bytes},
                {"chunks", stats.chunks},
                {"new_chunks", stats.new_chunks},
                {"uploaded_bytes", stats.uploaded_bytes}}},
              {"entries", std::move(entries_json)}};
}

Result<Manifest> Manifest::FromJson(const Json& j, std::string_view origin) {
  std::string o(origin);
  auto corrupt = [&](const std::string& why) {
    return DataLoss("manifest " + o + " is corrupt: " + why);
  };
  try {
    if (!j.is_object() || j.value("format", "") != "gantry-backup-manifest") {
      return corrupt("missing \"format\": \"gantry-backup-manifest\"");
    }
    int version = Integer<int>(j.at("version"));
    if (version != kManifestFormatVersion) {
      return InvalidArgument("manifest " + o + " has format version " + std::to_string(version) +
                             "; this gantry reads version " +
                             std::to_string(kManifestFormatVersion) + ", upgrade gantry");
    }
    Manifest m;
    m.id = j.at("id").get<std::string>();
    if (!IsHexId(m.id, 16)) return corrupt("id '" + m.id + "' is not 16 hex characters");
    m.name = j.at("name").get<std::string>();
    m.time = j.at("time").get<std::string>();
    m.time_unix = Integer<int64_t>(j.at("time_unix"));
    m.hostname = j.value("hostname", "");
    for (const auto& [k, v] : j.at("tags").items()) m.tags[k] = v.get<std::string>();
    m.sources = j.at("sources").get<std::vector<std::string>>();
    const Json& s = j.at("stats");
    auto count = [&](const char* k) {
      return s.contains(k) ? Integer<uint64_t>(s.at(k)) : s.value(k, 0ull);
    };
    m.stats.files = count("files");
    m.stats.dirs = count("dirs");
    m.stats.symlinks = count("symlinks");
    m.stats.skipped = count("skipped");
    m.stats.bytes = count("bytes");
    m.stats.chunks = count("chunks");
    m.stats.new_chunks = count("new_chunks");
    m.stats.uploaded_bytes = count("uploaded_bytes");
    const Json& entries = j.at("entries");
    if (!entries.is_array()) return corrupt("\"entries\" is not an array");
    std::unordered_set<std::string> dirs, seen;
    m.entries.reserve(entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {
      const Json& ej = entries[i];
      Entry e;
      e.path = ej.at("path").get<std::string>();
      std::string where = "entry " + std::to_string(i) + " ('" + e.path + "')";
      Status safe = CheckSafePath(e.path);
      if (!safe.ok()) return corrupt(where + ": " + safe.message());
      if (!seen.insert(e.path).second) return corrupt(where + ": duplicate path");
      std::string_view parent = Parent(e.path);
      if (!parent.empty() && !dirs.count(std::string(parent))) {
        return corrupt(where + ": its parent is not a directory listed before it");
      }
      std::string type = ej.at("type").get<std::string>();
      e.mode = Integer<uint32_t>(ej.at("mode")) & 07777;
      e.mtime_ns = Integer<int64_t>(ej.at("mtime_ns"));
      if (type == "dir") {
        e.type = EntryType::kDir;
        dirs.insert(e.path);
      } else if (type == "symlink") {
        e.type = EntryType::kSymlink;
        e.target = ej.at("target").get<std::string>();
        if (e.target.empty() || e.target.find('\0') != std::string::npos) {
          return corrupt(where + ": bad symlink target");
        }
      } else if (type == "file") {
        e.type = EntryType::kFile;
        e.size = Integer<uint64_t>(ej.at("size"));
        uint64_t sum = 0;
        for (const Json& c : ej.at("chunks")) {
          if (!c.is_array() || c.size() != 2) return corrupt(where + ": malformed chunk reference");
          ChunkRef r{c[0].get<std::string>(), Integer<uint64_t>(c[1])};
          if (!IsHexId(r.id, 64)) return corrupt(where + ": chunk id '" + r.id + "' is not 64 hex");
          if (r.size == 0 || r.size > (1ull << 31)) {
            return corrupt(where + ": chunk " + r.id + " has impossible size " +
                           std::to_string(r.size));
          }
          sum += r.size;
          e.chunks.push_back(std::move(r));
        }
        if (sum != e.size) {
          return corrupt(where + ": chunk sizes add up to " + std::to_string(sum) +
                         " bytes, not the file size " + std::to_string(e.size));
        }
      } else {
        return corrupt(where + ": unknown type '" + type + "'");
      }
      m.entries.push_back(std::move(e));
    }
    return m;
  } catch (const Json::exception& ex) {
    return corrupt(std::string("missing or mistyped field (") + ex.what() + ")");
  }
}

Result<Manifest> LoadManifest(Repository& repo, std::string_view key) {
  auto object = repo.store().Get(key);
  if (!object.ok()) {
    return object.status().WithContext("reading manifest " + repo.url() + "/" + std::string(key));
  }
  auto j = repo.DecodeManifest(key, *object);
  if (!j.ok()) {
    // Unparseable JSON is corruption, not a usage error.
    if (j.status().code() == StatusCode::kInvalidArgument) {
      return DataLoss("manifest " + repo.url() + "/" + std::string(key) +
                      " is corrupt: " + j.status().message());
    }
    return j.status();
  }
  ASSIGN_OR_RETURN(Manifest m, Manifest::FromJson(*j, repo.url() + "/" + std::string(key)));
  m.key = std::string(key);
  return m;
}

Result<std::vector<Listing>> ListBackups(Repository& repo) {
  ASSIGN_OR_RETURN(auto objects, ListPrefix(repo.store(), kBackupPrefix));
  std::vector<Listing> out;
  for (const auto& o : objects) {
    if (!o.key.ends_with(".json")) continue;
    Listing l;
    l.key = o.key;
    auto m = LoadManifest(repo, o.key);
    if (m.ok()) {
      l.manifest = std::move(*m);
    } else {
      l.error = m.status().message();
      l.error_code = m.status().code();
    }
    out.push_back(std::move(l));
  }
  // Keys start with the UTC time, so key order is time order.
  std::sort(out.begin(), out.end(),
            [](const Listing& a, const Listing& b) { return a.key < b.key; });
  return out;
}

Result<Manifest> FindBackup(Repository& repo, std::string_view id_or_latest,
                            std::string_view name) {
  ASSIGN_OR_RETURN(auto objects, ListPrefix(repo.store(), kBackupPrefix));
  std::vector<std::string> keys;
  for (const auto& o : objects) {
    if (o.key.ends_with(".json")) keys.push_back(o.key);
  }
  std::sort(keys.begin(), keys.end());
  if (id_or_latest == "latest") {
    for (auto it = keys.rbegin(); it != keys.rend(); ++it) {
      if (name.empty()) return LoadManifest(repo, *it);
      auto m = LoadManifest(repo, *it);
      if (!m.ok()) return m.status();
      if (m->name == name) return m;
    }
    return NotFound("no backups" +
                    (name.empty() ? std::string() : " named '" + std::string(name) + "'") + " in " +
                    repo.url());
  }
  if (id_or_latest.size() < 4) {
    return InvalidArgument("backup id '" + std::string(id_or_latest) +
                           "' is too short; give at least 4 characters or 'latest'");
  }
  std::vector<std::string> hits;
  for (const std::string& k : keys) {
    // backups/<time>-<id>.json
    size_t dash = k.rfind('-');
    if (dash == std::string::npos) continue;
    std::string_view id = std::string_view(k).substr(dash + 1);
    id.remove_suffix(5);
    if (id.starts_with(id_or_latest)) hits.push_back(k);
  }
  if (hits.empty()) {
    return NotFound("no backup with id '" + std::string(id_or_latest) + "' in " + repo.url() +
                    "; see gantry backup list");
  }
  if (hits.size() > 1) {
    return InvalidArgument("backup id '" + std::string(id_or_latest) + "' is ambiguous (" +
                           std::to_string(hits.size()) + " backups); give more characters");
  }
  return LoadManifest(repo, hits[0]);
}

std::vector<RetentionDecision> ApplyRetention(const std::vector<RetentionInput>& backups,
                                              const RetentionPolicy& policy) {
  std::vector<RetentionDecision> out(backups.size());
  std::map<std::string, std::vector<size_t>> groups;
  for (size_t i = 0; i < backups.size(); ++i) {
    out[i].key = backups[i].key;
    groups[backups[i].name].push_back(i);
  }
  auto bucket = [](int64_t t, const char* fmt) {
    time_t tt = static_cast<time_t>(t);
    struct tm tm {};
    gmtime_r(&tt, &tm);
    char buf[32];
    strftime(buf, sizeof buf, fmt, &tm);
    return std::string(buf);
  };
  struct Rule {
    int left;
    const char* fmt;  // nullptr: every backup is its own bucket (keep-last)
    const char* reason;
    std::string last;
  };
  for (auto& [name, idx] : groups) {
    std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
      if (backups[a].time_unix != backups[b].time_unix) {
        return backups[a].time_unix > backups[b].time_unix;
      }
      return backups[a].key > backups[b].key;
    });
    Rule rules[] = {{policy.keep_last, nullptr, "last", {}},
                    {policy.keep_daily, "%Y-%m-%d", "daily", {}},
                    {policy.keep_weekly, "%G-W%V", "weekly", {}},
                    {policy.keep_monthly, "%Y-%m", "monthly", {}}};
    for (size_t i : idx) {
      for (Rule& r : rules) {
        if (r.left <= 0) continue;
        if (r.fmt == nullptr) {
          --r.left;
          out[i].keep = true;
          out[i].reasons.push_back(r.reason);
          continue;
        }
        std::string b = bucket(backups[i].time_unix, r.fmt);
        if (b == r.last) continue;  // a newer backup already holds this period
        r.last = b;
        --r.left;
        out[i].keep = true;
        out[i].reasons.push_back(r.reason);
      }
    }
  }
  return out;
}

}  // namespace gantry::backup
