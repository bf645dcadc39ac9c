// `gantry backup create|list|restore|verify|prune`: flag parsing and printing
// only; the work is in gantry::backup.
#include <unistd.h>

#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "gantry/backup/backup.h"
#include "gantry/core/json.h"
#include "gantry/core/progress.h"
#include "gantry/core/table.h"
#include "gantry/core/units.h"
#include "gantry/storage/object_store.h"

namespace gantry::cli {
namespace {

struct BackupFlags {
  CommonFlags common;
  std::string repo;
  std::string key_file;
  std::string key_command;
  int parallel = 4;
  // create
  std::vector<std::string> dirs;
  std::string name;
  std::vector<std::string> tags;
  std::vector<std::string> excludes;
  // restore / verify
  std::string id;
  std::string to;
  std::vector<std::string> includes;
  bool all = false;
  bool read_data = false;
  // prune
  int keep_last = 0, keep_daily = 0, keep_weekly = 0, keep_monthly = 0;
  bool dry_run = false;
  std::string gc_grace = "1h";
};

// Usage and configuration problems exit 2; data and I/O problems exit 1.

struct Opened {
  std::unique_ptr<storage::ObjectStore> store;
  std::unique_ptr<backup::Repository> repo;
};

Result<Opened> OpenRepo(const BackupFlags& f, bool init) {
  if (f.repo.empty()) {
    return InvalidArgument("give --repo URL (file:///dir, /dir or az://account/container/prefix)");
  }
  std::string url = f.repo;
  // A relative directory is a local repository relative to the working directory.
  if (url.find("://") == std::string::npos && url.find('=') == std::string::npos &&
      url.front() != '/') {
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd) != nullptr) url = std::string(cwd) + "/" + url;
  }
  Opened o;
  ASSIGN_OR_RETURN(o.store, storage::OpenObjectStore(url));
  backup::KeySource ks{f.key_file, f.key_command};
  std::optional<std::string> key;
  if (!ks.empty()) {
    ASSIGN_OR_RETURN(std::string k, backup::LoadKey(ks));
    key = std::move(k);
  }
  if (init) {
    ASSIGN_OR_RETURN(o.repo,
                     backup::Repository::OpenOrInit(*o.store, std::move(key), ks.Describe()));
  } else {
    ASSIGN_OR_RETURN(o.repo, backup::Repository::Open(*o.store, std::move(key), ks.Describe()));
  }
  return o;
}

// A progress bar on stderr when it is a terminal and not in --json mode. The
// total is known only once the library has scanned, so the bar starts then.
class Bar {
 public:
  Bar(const BackupFlags& f, std::string_view title) : title_(title), enabled_(!f.common.json) {}
  backup::ProgressFn Fn() {
    return [this](uint64_t done, uint64_t total, std::string_view label) {
      if (!bar_ || total != total_) {
        if (bar_) bar_->Finish();
        Progress::Options o;
        o.enabled = enabled_;
        bar_ = std::make_unique<Progress>(title_, total, o);
        total_ = total;
      }
      bar_->Update(done, label);
    };
  }
  void Finish() {
    if (bar_) bar_->Finish();
  }

 private:
  std::string title_;
  bool enabled_;
  uint64_t total_ = 0;
  std::unique_ptr<Progress> bar_;
};

std::unique_ptr<Bar> MakeBar(const BackupFlags& f, std::string_view title) {
  return std::make_unique<Bar>(f, title);
}

Json Summary(const backup::Manifest& m) {
  Json tags = Json::object();
  for (const auto& [k, v] : m.tags) tags[k] = v;
  return Json{{"id", m.id},
              {"key", m.key},
              {"name", m.name},
              {"time", m.time},
              {"hostname", m.hostname},
              {"tags", tags},
              {"sources", m.sources},
              {"stats",
               {{"files", m.stats.files},
                {"dirs", m.stats.dirs},
                {"symlinks", m.stats.symlinks},
                {"skipped", m.stats.skipped},
                {"bytes", m.stats.bytes},
                {"chunks", m.stats.chunks},
                {"new_chunks", m.stats.new_chunks},
                {"uploaded_bytes", m.stats.uploaded_bytes}}}};
}

std::string TagText(const std::map<std::string, std::string>& tags) {
  std::string s;
  for (const auto& [k, v] : tags) s += (s.empty() ? "" : ",") + k + "=" + v;
  return s;
}

int RunCreate(const BackupFlags& f) {
  backup::CreateOptions o;
  o.sources = f.dirs;
  o.name = f.name;
  o.excludes = f.excludes;
  o.parallelism = f.parallel;
  for (const std::string& t : f.tags) {
    size_t eq = t.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Fail("backup create", InvalidArgument("--tag '" + t + "' is not KEY=VALUE"));
    }
    o.tags[t.substr(0, eq)] = t.substr(eq + 1);
  }
  auto opened = OpenRepo(f, /*init=*/true);
  if (!opened.ok()) return Fail("backup create", opened.status());
  auto bar = MakeBar(f, "backup");
  o.progress = bar->Fn();
  auto m = backup::CreateBackup(*opened->repo, o);
  bar->Finish();
  if (!m.ok()) return Fail("backup create", m.status());
  if (f.common.json) {
    std::cout << Summary(*m).dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "backup " << m->id << " of " << m->name << " saved to " << opened->repo->url()
            << "\n  " << m->stats.files << " files, " << m->stats.dirs << " directories, "
            << m->stats.symlinks << " symlinks, " << FormatSize(m->stats.bytes) << " in "
            << m->stats.chunks << " chunks\n  " << m->stats.new_chunks << " new chunks, "
            << FormatSize(m->stats.uploaded_bytes) << " uploaded"
            << (opened->repo->encrypted() ? " (encrypted)" : "") << "\n";
  if (m->stats.skipped > 0) {
    std::cout << "  " << m->stats.skipped << " special files skipped (sockets, fifos, devices)\n";
  }
  return kExitOk;
}

int RunList(const BackupFlags& f) {
  auto opened = OpenRepo(f, false);
  if (!opened.ok()) return Fail("backup list", opened.status());
  auto list = backup::ListBackups(*opened->repo);
  if (!list.ok()) return Fail("backup list", list.status());
  int rc = kExitOk;
  if (f.common.json) {
    Json arr = Json::array();
    for (const auto& l : *list) {
      if (!l.error.empty()) {
        arr.push_back({{"key", l.key}, {"error", l.error}});
        rc = kExitCheckFailed;
      } else if (f.name.empty() || l.manifest.name == f.name) {
        arr.push_back(Summary(l.manifest));
      }
    }
    std::cout << arr.dump(2) << "\n";
    return rc;
  }
  Table t({"id", "time", "name", "files", "size", "host", "tags"});
  t.SetAlign(3, Table::Align::kRight);
  t.SetAlign(4, Table::Align::kRight);
  std::string errors;
  for (const auto& l : *list) {
    if (!l.error.empty()) {
      t.AddRow({"?", "?", "?", "?", "?", "", "unreadable: " + l.key});
      errors += l.error + "\n";
      rc = kExitCheckFailed;
      continue;
    }
    const auto& m = l.manifest;
    if (!f.name.empty() && m.name != f.name) continue;
    t.AddRow({m.id, m.time, m.name, std::to_string(m.stats.files), FormatSize(m.stats.bytes),
              m.hostname, TagText(m.tags)});
  }
  std::cout << t.Render();
  if (!errors.empty()) std::cerr << errors << "run gantry backup verify for details\n";
  return rc;
}

int RunRestore(const BackupFlags& f) {
  auto opened = OpenRepo(f, false);
  if (!opened.ok()) return Fail("backup restore", opened.status());
  auto m = backup::FindBackup(*opened->repo, f.id, f.name);
  if (!m.ok()) return Fail("backup restore", m.status());
  backup::RestoreOptions o;
  o.target = f.to;
  o.includes = f.includes;
  o.parallelism = f.parallel;
  auto bar = MakeBar(f, "restore");
  o.progress = bar->Fn();
  auto r = backup::Restore(*opened->repo, *m, o);
  bar->Finish();
  if (!r.ok()) return Fail("backup restore", r.status());
  if (f.common.json) {
    std::cout << Json{{"id", m->id},       {"key", m->key},   {"target", f.to},
                      {"files", r->files}, {"dirs", r->dirs}, {"symlinks", r->symlinks},
                      {"bytes", r->bytes}}
                     .dump(2)
              << "\n";
    return kExitOk;
  }
  std::cout << "restored backup " << m->id << " (" << m->time << ") to " << f.to << ": " << r->files
            << " files, " << r->dirs << " directories, " << r->symlinks << " symlinks, "
            << FormatSize(r->bytes) << ", every chunk verified\n";
  return kExitOk;
}

int RunVerify(const BackupFlags& f) {
  if (f.all == !f.id.empty()) {
    return Fail("backup verify", InvalidArgument("give a backup ID (or 'latest') or --all"));
  }
  auto opened = OpenRepo(f, false);
  if (!opened.ok()) return Fail("backup verify", opened.status());
  std::vector<std::string> keys;
  if (!f.all) {
    auto m = backup::FindBackup(*opened->repo, f.id, f.name);
    if (!m.ok() && m.status().code() != StatusCode::kDataLoss)
      return Fail("backup verify", m.status());
    if (!m.ok()) {
      std::cerr << "gantry backup verify: " << m.status().message() << "\n";
      return kExitCheckFailed;
    }
    keys.push_back(m->key);
  }
  backup::VerifyOptions o;
  o.read_data = f.read_data;
  o.parallelism = f.parallel;
  auto bar = MakeBar(f, "verify");
  o.progress = bar->Fn();
  auto reports = backup::Verify(*opened->repo, keys, o);
  bar->Finish();
  if (!reports.ok()) return Fail("backup verify", reports.status());
  int rc = kExitOk;
  Json arr = Json::array();
  for (const auto& r : *reports) {
    if (!r.ok()) rc = kExitCheckFailed;
    if (f.common.json) {
      arr.push_back({{"key", r.key},
                     {"id", r.id},
                     {"ok", r.ok()},
                     {"chunks", r.chunks},
                     {"chunks_read", r.chunks_read},
                     {"bytes_read", r.bytes_read},
                     {"problems", r.problems}});
      continue;
    }
    std::string who = r.id.empty() ? r.key : r.id;
    if (r.ok()) {
      std::cout << who << ": ok (" << r.chunks << " chunks present";
      if (f.read_data)
        std::cout << ", " << r.chunks_read << " read and checked, " << FormatSize(r.bytes_read);
      std::cout << ")\n";
    } else {
      std::cout << who << ": FAILED (" << r.problems.size() << " problems)\n";
      for (const auto& p : r.problems) std::cout << "  " << p << "\n";
    }
  }
  if (f.common.json) std::cout << arr.dump(2) << "\n";
  if (!f.common.json && reports->empty())
    std::cout << "no backups in " << opened->repo->url() << "\n";
  return rc;
}

int RunPrune(const BackupFlags& f) {
  backup::PruneOptions o;
  o.policy = {f.keep_last, f.keep_daily, f.keep_weekly, f.keep_monthly};
  if (f.keep_last < 0 || f.keep_daily < 0 || f.keep_weekly < 0 || f.keep_monthly < 0) {
    return Fail("backup prune", InvalidArgument("--keep-* values must be >= 0"));
  }
  o.dry_run = f.dry_run;
  auto grace = ParseDuration(f.gc_grace);
  if (!grace.ok()) return Fail("backup prune", grace.status().WithContext("--gc-grace"));
  o.gc_grace = std::chrono::duration_cast<std::chrono::seconds>(*grace);
  auto opened = OpenRepo(f, false);
  if (!opened.ok()) return Fail("backup prune", opened.status());
  auto r = backup::Prune(*opened->repo, o);
  if (!r.ok()) return Fail("backup prune", r.status());
  size_t removed = 0;
  for (const auto& d : r->decisions) removed += d.keep ? 0 : 1;
  if (f.common.json) {
    Json backups = Json::array();
    for (const auto& d : r->decisions) {
      backups.push_back({{"key", d.key}, {"keep", d.keep}, {"reasons", d.reasons}});
    }
    std::cout << Json{{"dry_run", f.dry_run},
                      {"backups", backups},
                      {"removed", removed},
                      {"chunks_total", r->chunks_total},
                      {"chunks_referenced", r->chunks_referenced},
                      {"chunks_deleted", r->chunks_deleted},
                      {"bytes_deleted", r->bytes_deleted},
                      {"chunks_kept_recent", r->chunks_kept_recent}}
                     .dump(2)
              << "\n";
    return kExitOk;
  }
  Table t({"backup", "action", "reasons"});
  for (const auto& d : r->decisions) {
    std::string reasons;
    for (const auto& x : d.reasons) reasons += (reasons.empty() ? "" : ",") + x;
    t.AddRow({d.key, d.keep ? "keep" : (f.dry_run ? "would remove" : "remove"), reasons});
  }
  std::cout << t.Render();
  std::cout << (f.dry_run ? "dry run: would remove " : "removed ") << removed << " backup(s); "
            << (f.dry_run ? "would delete " : "deleted ") << r->chunks_deleted
            << " unreferenced chunk(s) (" << FormatSize(r->bytes_deleted) << "); "
            << r->chunks_referenced << " chunk(s) in use";
  if (r->chunks_kept_recent > 0) {
    std::cout << "; kept " << r->chunks_kept_recent
              << " unreferenced chunk(s) younger than --gc-grace " << f.gc_grace;
  }
  std::cout << "\n";
  return kExitOk;
}

}  // namespace

void RegisterBackup(CLI::App& app, Action* action) {
  auto flags = std::make_shared<BackupFlags>();
  CLI::App* b = app.add_subcommand(
      "backup",
      "Deduplicated, compressed, optionally encrypted backups of directories to a local "
      "directory or Azure Blob (gantry backup --help)");
  b->require_subcommand(1);
  auto common = [&](CLI::App* c) {
    c->add_option("--repo", flags->repo,
                  "Repository: file:///dir, /dir or az://account/container[/prefix]")
        ->envname("GANTRY_BACKUP_REPO")
        ->required();
    c->add_option("--encrypt-key-file", flags->key_file,
                  "Key for an encrypted repository: the file's contents")
        ->envname("GANTRY_BACKUP_KEY_FILE");
    c->add_option("--encrypt-key-command", flags->key_command,
                  "Key for an encrypted repository: this command's stdout (sh -c)");
    c->add_option("--parallel", flags->parallel, "Chunks in flight at once")->capture_default_str();
    AddCommonFlags(c, &flags->common);
  };
  auto set = [&](CLI::App* c, int (*fn)(const BackupFlags&)) {
    c->callback([flags, action, fn] {
      *action = [flags, fn] {
        if (!ApplyCommonFlags(flags->common)) return kExitUsage;
        return fn(*flags);
      };
    });
  };

  CLI::App* create = b->add_subcommand(
      "create",
      "Back up directories (creates the repository on first use; encrypted when a key "
      "is given)");
  common(create);
  create->add_option("dirs", flags->dirs, "Directories to back up (each stored under its name)")
      ->required();
  create->add_option("--name", flags->name, "Name of the backup set (default: the dir names)");
  create->add_option("--tag", flags->tags, "KEY=VALUE label (repeatable)");
  create->add_option("--exclude", flags->excludes,
                     "Glob to leave out (repeatable): a base name ('*.tmp') or a path "
                     "inside the backup ('models/cache')");
  set(create, RunCreate);

  CLI::App* list = b->add_subcommand("list", "List backups, oldest first");
  common(list);
  list->add_option("--name", flags->name, "Only backups of this name");
  set(list, RunList);

  CLI::App* restore =
      b->add_subcommand("restore", "Restore a backup to a directory, verifying every chunk");
  common(restore);
  restore->add_option("id", flags->id, "Backup ID (a unique prefix) or 'latest'")->required();
  restore->add_option("--to", flags->to, "Target directory (created when missing)")->required();
  restore->add_option("--include", flags->includes,
                      "Only paths matching this glob (repeatable; a directory brings its subtree)");
  restore->add_option("--name", flags->name, "With 'latest': the newest backup of this name");
  set(restore, RunRestore);

  CLI::App* verify =
      b->add_subcommand("verify", "Check manifests and chunk presence (exit 1 on any problem)");
  common(verify);
  verify->add_option("id", flags->id, "Backup ID (a unique prefix) or 'latest'");
  verify->add_flag("--all", flags->all, "Every backup");
  verify->add_flag("--read-data", flags->read_data,
                   "Download and check every chunk (hash, and the AES-GCM tag when encrypted)");
  verify->add_option("--name", flags->name, "With 'latest': the newest backup of this name");
  set(verify, RunVerify);

  CLI::App* prune = b->add_subcommand(
      "prune", "Apply retention rules (per backup name), then delete unreferenced chunks");
  common(prune);
  prune->add_option("--keep-last", flags->keep_last, "Keep the N newest backups");
  prune->add_option("--keep-daily", flags->keep_daily,
                    "Keep the newest backup of each of the last N days with backups (UTC)");
  prune->add_option("--keep-weekly", flags->keep_weekly, "Same per ISO week");
  prune->add_option("--keep-monthly", flags->keep_monthly, "Same per calendar month");
  prune->add_flag("--dry-run", flags->dry_run, "Show what would be removed; change nothing");
  prune
      ->add_option("--gc-grace", flags->gc_grace,
                   "Keep unreferenced chunks younger than this (a backup running at the same "
                   "time may need them)")
      ->capture_default_str();
  set(prune, RunPrune);
}

}  // namespace gantry::cli
