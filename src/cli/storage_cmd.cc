// `gantry storage put|get|ls|stat|rm`: a thin CLI over storage::ObjectStore
// (file:// directories and Azure Blob). Flag parsing and printing only.
//
// Object URLs: az://account/container/key/of/object, file:///dir/file or
// /dir/file. With --store URL (a store URL or a connection string, plus
// --container for connection strings) the positional argument is a key
// relative to that store instead.
//
// Exit codes: cli::ExitCode (0 ok; 1 the store failed: unavailable, I/O,
// corruption; 2 usage, a missing or existing object, a refused credential).
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "cli.h"
#include "gantry/core/json.h"
#include "gantry/core/table.h"
#include "gantry/core/units.h"
#include "gantry/storage/object_store.h"

namespace gantry::cli {
namespace {

struct StorageFlags {
  CommonFlags common;
  std::string store, container, prefix;
  std::string block_size = "8M";
  int parallelism = 8;
  int retries = 6;
  bool if_none_match = false;
  bool no_md5 = false;
  std::string content_type = "application/octet-stream";
  std::string src, dst, url;
  std::vector<std::string> urls;
};

struct Target {
  std::unique_ptr<storage::ObjectStore> store;
  std::string key;  // a key, or a list prefix
};

// Splits an object URL into a store and a key; for `ls`, a directory path
// names the store itself.
Result<Target> Resolve(const StorageFlags& f, const std::string& url, bool for_list) {
  storage::StoreOptions o;
  ASSIGN_OR_RETURN(uint64_t bs, ParseSize(f.block_size));
  if (bs < 1024 || bs > (4000ull << 20)) {
    return InvalidArgument("--block-size " + f.block_size + " must be between 1K and 4000M");
  }
  if (f.parallelism < 1 || f.parallelism > 256) {
    return InvalidArgument("--parallelism " + std::to_string(f.parallelism) + " must be 1..256");
  }
  if (f.retries < 1) return InvalidArgument("--retries must be at least 1");
  o.block_bytes = static_cast<size_t>(bs);
  o.parallelism = f.parallelism;
  o.retry.max_attempts = f.retries;
  o.content_md5 = !f.no_md5;
  o.container = f.container;
  o.prefix = f.prefix;
  std::string store_url, key;
  if (!f.store.empty()) {
    store_url = f.store;
    key = url;
  } else if (url.starts_with("az://")) {
    // az://account/container/key...
    size_t a = url.find('/', 5);
    size_t c = a == std::string::npos ? std::string::npos : url.find('/', a + 1);
    if (a == std::string::npos) {
      return InvalidArgument("'" + url + "': expected az://account/container/key");
    }
    store_url = c == std::string::npos ? url : url.substr(0, c);
    key = c == std::string::npos ? "" : url.substr(c + 1);
  } else if (url.starts_with("file://") || url.starts_with("/")) {
    std::string path = url.starts_with("file://") ? url.substr(7) : url;
    struct stat st;
    if (for_list && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      store_url = path;
    } else {
      size_t slash = path.rfind('/');
      store_url = slash == 0 ? "/" : path.substr(0, slash);
      key = path.substr(slash + 1);
    }
  } else if (storage::IsRemoteUrl(url)) {
    return InvalidArgument("a connection string goes in --store (with --container), not here");
  } else {
    return InvalidArgument("'" + url +
                           "': expected az://account/container/key, file:///dir/file or /dir/file "
                           "(or pass --store URL and a key)");
  }
  if (!for_list && key.empty()) return InvalidArgument("'" + url + "' names no object key");
  ASSIGN_OR_RETURN(auto store, storage::OpenObjectStore(store_url, o));
  return Target{std::move(store), key};
}

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void PrintTransfer(const StorageFlags& f, std::string_view verb, const std::string& from,
                   const std::string& to, uint64_t bytes, double secs) {
  double mbps = secs > 0 ? bytes / secs / 1e6 : 0;
  if (f.common.json) {
    Json j = {{"op", verb},     {"from", from},    {"to", to},
              {"bytes", bytes}, {"seconds", secs}, {"mb_per_s", mbps}};
    std::cout << j.dump() << "\n";
  } else {
    std::cout << fmt::format("{} {} -> {}: {} in {:.2f} s ({:.1f} MB/s)\n", verb, from, to,
                             FormatSize(bytes), secs, mbps);
  }
}

int RunPut(const StorageFlags& f) {
  auto t = Resolve(f, f.dst, false);
  if (!t.ok()) return Fail("storage put", t.status());
  storage::PutOptions po;
  po.if_none_match = f.if_none_match;
  po.content_type = f.content_type;
  auto start = std::chrono::steady_clock::now();
  uint64_t bytes = 0;
  Status s;
  if (f.src == "-") {
    storage::ReadFn read = [&](std::span<std::byte> buf) -> Result<size_t> {
      for (;;) {
        ssize_t n = ::read(STDIN_FILENO, buf.data(), buf.size());
        if (n >= 0) {
          bytes += static_cast<uint64_t>(n);
          return static_cast<size_t>(n);
        }
        if (errno != EINTR) return IoError("reading stdin", errno);
      }
    };
    s = t->store->PutStream(t->key, read, po);
  } else {
    struct stat st;
    if (::stat(f.src.c_str(), &st) != 0)
      return Fail("storage put", NotFound(f.src + ": no such file"));
    bytes = static_cast<uint64_t>(st.st_size);
    s = t->store->PutFile(t->key, f.src, po);
  }
  if (!s.ok()) return Fail("storage put", s);
  PrintTransfer(f, "put", f.src, t->store->url() + "/" + t->key, bytes, Seconds(start));
  return kExitOk;
}

int RunGet(const StorageFlags& f) {
  auto t = Resolve(f, f.src, false);
  if (!t.ok()) return Fail("storage get", t.status());
  auto start = std::chrono::steady_clock::now();
  uint64_t bytes = 0;
  if (f.dst == "-") {
    auto data = t->store->Get(t->key);
    if (!data.ok()) return Fail("storage get", data.status());
    std::fwrite(data->data(), 1, data->size(), stdout);
    std::fflush(stdout);
    return kExitOk;  // stdout carries the data: no summary
  }
  Status s = t->store->GetFile(t->key, f.dst);
  if (!s.ok()) return Fail("storage get", s);
  struct stat st;
  if (::stat(f.dst.c_str(), &st) == 0) bytes = static_cast<uint64_t>(st.st_size);
  PrintTransfer(f, "get", t->store->url() + "/" + t->key, f.dst, bytes, Seconds(start));
  return kExitOk;
}

std::string FormatTime(int64_t unix) {
  if (unix <= 0) return "-";
  time_t t = static_cast<time_t>(unix);
  struct tm tm;
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Json InfoJson(const storage::ObjectInfo& o) {
  return Json{{"key", o.key},
              {"size", o.size},
              {"etag", o.etag},
              {"modified", FormatTime(o.modified_unix)},
              {"modified_unix", o.modified_unix}};
}

int RunLs(const StorageFlags& f) {
  auto t = Resolve(f, f.url, true);
  if (!t.ok()) return Fail("storage ls", t.status());
  auto all = storage::ListAll(*t->store, t->key);
  if (!all.ok()) return Fail("storage ls", all.status());
  if (f.common.json) {
    Json arr = Json::array();
    for (const auto& o : *all) arr.push_back(InfoJson(o));
    std::cout << Json{{"store", t->store->url()}, {"prefix", t->key}, {"objects", arr}}.dump(2)
              << "\n";
    return kExitOk;
  }
  Table table({"key", "size", "modified"});
  table.SetAlign(1, Table::Align::kRight);
  uint64_t total = 0;
  for (const auto& o : *all) {
    table.AddRow({o.key, FormatSize(o.size), FormatTime(o.modified_unix)});
    total += o.size;
  }
  std::cout << table.Render();
  std::cout << fmt::format("{} objects, {} in {}\n", all->size(), FormatSize(total),
                           t->store->url());
  return kExitOk;
}

int RunStat(const StorageFlags& f) {
  auto t = Resolve(f, f.url, false);
  if (!t.ok()) return Fail("storage stat", t.status());
  auto info = t->store->Stat(t->key);
  if (!info.ok()) return Fail("storage stat", info.status());
  if (f.common.json) {
    std::cout << InfoJson(*info).dump(2) << "\n";
  } else {
    std::cout << fmt::format("key       {}\nsize      {} ({} bytes)\netag      {}\nmodified  {}\n",
                             info->key, FormatSize(info->size), info->size, info->etag,
                             FormatTime(info->modified_unix));
  }
  return kExitOk;
}

int RunRm(const StorageFlags& f) {
  int rc = kExitOk;
  Json done = Json::array();
  for (const auto& url : f.urls) {
    auto t = Resolve(f, url, false);
    if (!t.ok()) return Fail("storage rm", t.status());
    Status s = t->store->Delete(t->key);
    if (!s.ok()) {
      rc = std::max(rc, Fail("storage rm", s));
      continue;
    }
    done.push_back(url);
    if (!f.common.json) std::cout << "deleted " << url << "\n";
  }
  if (f.common.json) std::cout << Json{{"deleted", done}}.dump() << "\n";
  return rc;
}

}  // namespace

void RegisterStorage(CLI::App& app, Action* action) {
  auto flags = std::make_shared<StorageFlags>();
  CLI::App* storage =
      app.add_subcommand("storage",
                         "Object storage (file:// directories, Azure Blob): put, get, ls, stat, rm "
                         "(gantry storage --help)");
  storage->require_subcommand(1);
  storage->footer(
      "Object URLs: az://account/container/key, file:///dir/file or /dir/file.\n"
      "Credentials for az://: AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_KEY or\n"
      "AZURE_STORAGE_SAS_TOKEN; without them, Entra ID tokens from the VM's managed identity\n"
      "(role Storage Blob Data Contributor/Reader; GANTRY_STORAGE_AUTH=entra-id|key forces\n"
      "or forbids it). AZURE_STORAGE_BLOB_ENDPOINT overrides the endpoint (e.g.\n"
      "http://127.0.0.1:10000/devstoreaccount1 for Azurite); GANTRY_CA_FILE adds a CA for\n"
      "https endpoints. See docs/storage.md.\n"
      "Exit codes: 0 ok, 1 the operation failed, 2 usage or configuration error.");
  auto common = [&](CLI::App* c) {
    AddCommonFlags(c, &flags->common);
    c->add_option("--store", flags->store,
                  "Store URL or connection string; positional arguments are then keys in it");
    c->add_option("--container", flags->container,
                  "Container, with a connection string in --store");
    c->add_option("--prefix", flags->prefix, "Key prefix inside the container (with --store)");
    c->add_option("--retries", flags->retries, "Attempts per request (Blob), including the first")
        ->capture_default_str();
  };
  auto transfer = [&](CLI::App* c) {
    c->add_option("--block-size", flags->block_size,
                  "Block size for uploads and ranged downloads (e.g. 4M, 16M)")
        ->capture_default_str();
    c->add_option("-p,--parallelism", flags->parallelism, "Blocks in flight at once")
        ->capture_default_str();
    c->add_flag("--no-md5", flags->no_md5,
                "Blob uploads: do not send Content-MD5 per block (the service then cannot verify "
                "what it stored; saves an MD5 pass on both ends)");
  };
  auto set = [&](CLI::App* c, int (*fn)(const StorageFlags&)) {
    c->callback([flags, action, fn] {
      *action = [flags, fn] {
        if (!ApplyCommonFlags(flags->common)) return kExitUsage;
        return fn(*flags);
      };
    });
  };

  CLI::App* put =
      storage->add_subcommand("put", "Upload a file (or '-' for stdin) to an object URL");
  put->add_option("file", flags->src, "Local file, or - for stdin")->required();
  put->add_option("url", flags->dst, "Object URL (or key with --store)")->required();
  put->add_flag("--if-none-match", flags->if_none_match,
                "Conditional create: fail (exit 1) when the object exists");
  put->add_option("--content-type", flags->content_type, "Content-Type stored with the object")
      ->capture_default_str();
  common(put);
  transfer(put);
  set(put, RunPut);

  CLI::App* get = storage->add_subcommand(
      "get", "Download an object to a file (written to FILE.tmp-* and renamed), or - for stdout");
  get->add_option("url", flags->src, "Object URL (or key with --store)")->required();
  get->add_option("file", flags->dst, "Local file, or - for stdout")->required();
  common(get);
  transfer(get);
  set(get, RunGet);

  CLI::App* ls = storage->add_subcommand("ls", "List objects under a URL prefix (sorted by key)");
  ls->add_option("url", flags->url, "Store URL with an optional key prefix")->required();
  common(ls);
  set(ls, RunLs);

  CLI::App* st = storage->add_subcommand("stat", "Size, etag and modification time of an object");
  st->add_option("url", flags->url, "Object URL (or key with --store)")->required();
  common(st);
  set(st, RunStat);

  CLI::App* rm = storage->add_subcommand(
      "rm", "Delete objects (exit 2 when one does not exist; the others are deleted)");
  rm->add_option("urls", flags->urls, "Object URLs (or keys with --store)")->required();
  common(rm);
  set(rm, RunRm);
}

}  // namespace gantry::cli
