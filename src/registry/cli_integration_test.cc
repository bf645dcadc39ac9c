// `gantry registry` end to end through the real binary: register, list, show,
// versions, alias, download, verify, search, trust and delete on local stores
// and through `--server` against a real `gantry registry serve` on a free
// loopback port. Checks exit codes (0 ok; 1 a failed check such as corrupt
// bytes or an unreachable server; 2 usage errors, names that do not exist and
// refusals), and that `--json` prints the same document locally and remotely.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "gantry/core/json.h"
#include "gantry/security/key_store.h"

extern char** environ;

namespace gantry::registry {
namespace {

namespace fs = std::filesystem;

const std::string kGantry = std::string(GANTRY_BINARY_DIR) + "/bin/gantry";
// The readiness line `serve` prints once it listens (scripts wait for it).
constexpr std::string_view kReady =
    "serving the registry (MLflow-shaped /api/2.0/mlflow/..., blobs under /api/2.0/gantry/; API "
    "keys, deny by default) on port ";

struct CliRun {
  int rc = -1;
  std::string out, err;
  Json json() const {
    Json j = Json::parse(out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << out;
    return j;
  }
};

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Every key path of a document ("model_versions[].lineage.run_id"): its shape.
void Shape(const Json& j, const std::string& at, std::set<std::string>* out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      out->insert(at + "." + it.key());
      Shape(*it, at + "." + it.key(), out);
    }
  } else if (j.is_array()) {
    for (const Json& e : j) Shape(e, at + "[]", out);
  }
}
std::set<std::string> Shape(const Json& j) {
  std::set<std::string> out;
  Shape(j, "", &out);
  return out;
}

class RegistryCli : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kGantry)) << kGantry << " is missing; build the gantry target first";
    char t[] = "/tmp/gantry-registry-cli-XXXXXX";
    ASSERT_NE(::mkdtemp(t), nullptr);
    tmp_ = t;
    fs::create_directories(tmp_ / "model/sub");
    std::ofstream(tmp_ / "model/weights.bin", std::ios::binary) << std::string(300000, 'w');
    std::ofstream(tmp_ / "model/config.json") << R"({"layers": 2})";
    std::ofstream(tmp_ / "model/sub/tok.txt") << "hello";
    auto ks = security::KeyStore::Open(P("keys.sqlite"));
    ASSERT_TRUE(ks.ok()) << ks.status().ToString();
    for (const char* role : {"reader", "writer", "admin"}) {
      auto k = (*ks)->Create(std::string("cli-") + role, role, 0, 1);
      ASSERT_TRUE(k.ok());
      keys_[role] = k->second;
    }
  }
  void TearDown() override {
    StopServer();
    fs::remove_all(tmp_);
  }

  std::string P(const std::string& name) const { return (tmp_ / name).string(); }

  // `gantry registry ARGS` with a clean registry environment plus `env`.
  CliRun Gantry(const std::string& args, const std::string& env = "") {
    std::string cmd =
        "env -u GANTRY_REGISTRY_DB -u GANTRY_REGISTRY_ARTIFACTS -u GANTRY_REGISTRY_SERVER "
        "-u GANTRY_API_KEY -u GANTRY_REGISTRY_TRUSTED_KEYS -u GANTRY_REGISTRY_AUDIT_LOG " +
        env + " " + kGantry + " registry " + args + " 2>" + P("stderr.txt");
    CliRun r;
    FILE* f = popen(cmd.c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) r.out.append(buf, n);
    int status = pclose(f);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.err = Slurp(P("stderr.txt"));
    return r;
  }
  // The same through the server with `role`'s key (in the environment, as
  // the docs advise).
  CliRun Remote(const std::string& args, const std::string& role = "admin") {
    return Gantry(args + " --server " + server_, "GANTRY_API_KEY=" + keys_[role]);
  }

  // Starts `gantry registry serve` on a free port and waits for its readiness line.
  void StartServer() {
    std::vector<std::string> args = {kGantry,          "registry",    "serve",
                                     "--db",           P("r.sqlite"), "--keys-db",
                                     P("keys.sqlite"), "--listen",    "127.0.0.1:0"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, P("serve.out").c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_addopen(&fa, 2, P("serve.err").c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    ASSERT_EQ(posix_spawn(&server_pid_, kGantry.c_str(), &fa, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    std::string line;
    for (int i = 0; i < 200 && line.find('\n') == std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      line = Slurp(P("serve.out"));
    }
    ASSERT_EQ(line.rfind(kReady, 0), 0u) << line << Slurp(P("serve.err"));
    server_ = "http://127.0.0.1:" + std::to_string(std::stoi(line.substr(kReady.size())));
  }
  // SIGTERM; the server exits 0.
  int StopServer() {
    if (server_pid_ <= 0) return -1;
    ::kill(server_pid_, SIGTERM);
    int status = 0;
    ::waitpid(server_pid_, &status, 0);
    server_pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // The stored blob of `file` in version REF of the local artifact store.
  fs::path BlobOf(const std::string& ref, const std::string& file) {
    Json v = Gantry("show --json --db " + P("r.sqlite") + " " + ref).json();
    for (const Json& f : v["files"]) {
      if (f["path"] == file) {
        std::string sha = f["sha256"];
        return tmp_ / "art" / "blobs" / "sha256" / sha.substr(0, 2) / sha;
      }
    }
    return {};
  }

  fs::path tmp_;
  std::map<std::string, std::string> keys_;
  pid_t server_pid_ = -1;
  std::string server_;
};

TEST_F(RegistryCli, LocalVerbsExitCodesAndJson) {
  const std::string db = "--db " + P("r.sqlite");
  CliRun reg = Gantry("register --json " + db + " --artifacts file://" + P("art") + " llama " +
                      P("model") + " --tag team=ml --run-id run-7");
  ASSERT_EQ(reg.rc, 0) << reg.err;
  Json v1 = reg.json();
  EXPECT_EQ(v1["name"], "llama");
  EXPECT_EQ(v1["version"], "1");
  EXPECT_EQ(v1["files"].size(), 3u);
  EXPECT_EQ(v1["tags"]["team"], "ml");
  EXPECT_EQ(v1["lineage"]["run_id"], "run-7");
  // --run is --from-ckpt's checkpoint run: with a PATH it is refused, never dropped.
  CliRun wrong_flag = Gantry("register " + db + " llama " + P("model") + " --run run-7");
  EXPECT_EQ(wrong_flag.rc, 2);
  EXPECT_NE(wrong_flag.err.find("use --run-id"), std::string::npos) << wrong_flag.err;
  CliRun text = Gantry("register " + db + " llama " + P("model"));
  ASSERT_EQ(text.rc, 0) << text.err;
  EXPECT_EQ(text.out.rfind("registered llama/2 (3 files, 300018 bytes, manifest ", 0), 0u)
      << text.out;

  EXPECT_EQ(Gantry("list --json " + db).json()["registered_models"][0]["latest_version"], "2");
  EXPECT_NE(Gantry("list " + db).out.find("llama"), std::string::npos);
  EXPECT_EQ(Gantry("show --json " + db + " llama").json()["latest_version"], "2");
  EXPECT_EQ(Gantry("show --json " + db + " llama/1").json(), v1);
  CliRun shown = Gantry("show " + db + " llama/1");
  EXPECT_NE(shown.out.find("manifest sha256: " + v1["manifest_sha256"].get<std::string>()),
            std::string::npos)
      << shown.out;
  EXPECT_EQ(Gantry("versions --json " + db + " llama").json()["model_versions"].size(), 2u);
  ASSERT_EQ(Gantry("alias set " + db + " llama prod 1 --expect 0").rc, 0);
  EXPECT_EQ(Gantry("show --json " + db + " llama@prod").json()["version"], "1");
  CliRun moved = Gantry("alias set " + db + " llama prod 2 --expect 0");  // lost the CAS
  EXPECT_EQ(moved.rc, 2);
  EXPECT_NE(moved.err.find("points at version 1"), std::string::npos) << moved.err;
  auto search = Gantry("search --json " + db + " --run-id run-7").json();
  ASSERT_EQ(search["model_versions"].size(), 1u);
  EXPECT_EQ(search["model_versions"][0]["version"], "1");

  CliRun dl = Gantry("download " + db + " llama@prod " + P("out"));
  ASSERT_EQ(dl.rc, 0) << dl.err;
  EXPECT_EQ(Slurp(tmp_ / "out/sub/tok.txt"), "hello");
  EXPECT_EQ(Gantry("download " + db + " llama@prod " + P("out")).rc, 2);  // exists
  CliRun ver = Gantry("verify --json " + db + " llama/1");
  ASSERT_EQ(ver.rc, 0) << ver.err;
  EXPECT_EQ(ver.json()["files"], 3);
  EXPECT_EQ(Gantry("verify " + db + " llama/1 --require-signature").rc, 2);  // refused: unsigned

  // Usage, names that do not exist, and refusals: 2, with the reason.
  CliRun nope = Gantry("show " + db + " nope");
  EXPECT_EQ(nope.rc, 2);
  EXPECT_NE(nope.err.find("gantry registry show: no registered model named 'nope'"),
            std::string::npos)
      << nope.err;
  EXPECT_EQ(Gantry("show " + db + " llama/9").rc, 2);
  EXPECT_EQ(Gantry("register " + db + " 'bad name' " + P("model")).rc, 2);
  EXPECT_EQ(Gantry("register " + db + " llama").rc, 2);  // no PATH
  EXPECT_EQ(Gantry("show " + db).rc, 2);                 // no REF
  EXPECT_EQ(Gantry("delete " + db + " llama@prod").rc, 2);
  EXPECT_EQ(Gantry("delete " + db + " llama/9").rc, 2);
  EXPECT_EQ(Gantry("list").rc, 2);  // no --db
  CliRun pubkey = Gantry("download " + db + " llama/1 " + P("o2") + " --pubkey x.pub");
  EXPECT_EQ(pubkey.rc, 2);
  EXPECT_NE(pubkey.err.find("--pubkey is for --server"), std::string::npos) << pubkey.err;

  // Corrupt bytes in the store: verify and download fail the check (1).
  fs::path blob = BlobOf("llama/1", "sub/tok.txt");
  ASSERT_TRUE(fs::exists(blob)) << blob;
  std::ofstream(blob, std::ios::binary) << "HELLO";
  CliRun bad = Gantry("verify " + db + " llama/1");
  EXPECT_EQ(bad.rc, 1) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("corrupt"), std::string::npos) << bad.err;
  EXPECT_EQ(Gantry("download " + db + " llama/1 " + P("o3")).rc, 1);
  EXPECT_FALSE(fs::exists(tmp_ / "o3"));

  CliRun del = Gantry("delete --json " + db + " llama --model");
  ASSERT_EQ(del.rc, 0) << del.err;
  EXPECT_EQ(del.json()["versions"], Json::array({"1", "2"}));
  EXPECT_EQ(del.json()["aliases_removed"], Json::array({"prod"}));
}

TEST_F(RegistryCli, RemoteVerbsMatchLocalOnesAndExitTheSame) {
  const std::string db = "--db " + P("r.sqlite");
  ASSERT_EQ(Gantry("register " + db + " --artifacts file://" + P("art") + " seed " + P("model")).rc,
            0);
  ASSERT_NO_FATAL_FAILURE(StartServer());

  // register: the same document either way (another version of it).
  CliRun local = Gantry("register --json " + db + " llama " + P("model") + " --run-id run-1");
  CliRun remote = Remote("register --json llama " + P("model") + " --run-id run-2", "writer");
  ASSERT_EQ(local.rc, 0) << local.err;
  ASSERT_EQ(remote.rc, 0) << remote.err;
  EXPECT_EQ(remote.json()["version"], "2");
  EXPECT_EQ(Shape(remote.json()), Shape(local.json()));
  EXPECT_EQ(remote.json()["lineage"]["run_id"], "run-2");
  CliRun text = Remote("register llama " + P("model"), "writer");
  EXPECT_EQ(text.out.rfind("registered llama/3 on " + server_ + " (3 files", 0), 0u) << text.out;

  // Reads print the same document locally and remotely (the same registry).
  for (const std::string& args :
       {std::string("list --json"), std::string("show --json llama"),
        std::string("show --json llama/2"), std::string("versions --json llama"),
        std::string("search --json --run-id run-2"), std::string("verify --json llama/1"),
        std::string("trust ls --json"), std::string("show llama/2"), std::string("versions llama"),
        std::string("policy")}) {
    CliRun l = Gantry(args + " " + db);
    CliRun r = Remote(args, "reader");
    ASSERT_EQ(l.rc, 0) << args << ": " << l.err;
    ASSERT_EQ(r.rc, 0) << args << ": " << r.err;
    EXPECT_EQ(r.out, l.out) << args;
  }
  ASSERT_EQ(Remote("alias set llama prod 2 --expect 0", "writer").rc, 0);
  EXPECT_EQ(Gantry("show --json " + db + " llama@prod").json()["version"], "2");
  EXPECT_EQ(Remote("alias set llama prod 3 --expect 0", "writer").rc, 2);  // lost the CAS
  CliRun dl = Remote("download llama@prod " + P("out"), "reader");
  ASSERT_EQ(dl.rc, 0) << dl.err;
  EXPECT_EQ(Slurp(tmp_ / "out/weights.bin"), std::string(300000, 'w'));
  EXPECT_EQ(Remote("download llama@prod " + P("out"), "reader").rc, 2);  // exists

  // Exit codes as locally: not found and refusals 2, corrupt bytes 1.
  EXPECT_EQ(Remote("show nope", "reader").rc, 2);
  EXPECT_EQ(Remote("show llama/9", "reader").rc, 2);
  EXPECT_EQ(Remote("delete llama/9").rc, 2);
  EXPECT_EQ(Remote("verify llama/1 --require-signature", "reader").rc, 2);
  CliRun role = Remote("alias set llama prod 1", "reader");
  EXPECT_EQ(role.rc, 2);
  EXPECT_NE(role.err.find("HTTP 403"), std::string::npos) << role.err;
  CliRun anon = Gantry("list --server " + server_);
  EXPECT_EQ(anon.rc, 2);
  EXPECT_NE(anon.err.find("HTTP 401"), std::string::npos) << anon.err;
  EXPECT_EQ(Remote("delete llama/1", "writer").rc, 2);  // needs admin
  fs::path blob = BlobOf("llama/1", "sub/tok.txt");
  std::ofstream(blob, std::ios::binary) << "HELLO";
  CliRun bad = Remote("verify llama/1", "reader");
  EXPECT_EQ(bad.rc, 1) << bad.err;
  EXPECT_NE(bad.err.find("was modified"), std::string::npos) << bad.err;
  EXPECT_EQ(Remote("download llama/1 " + P("o2"), "reader").rc, 1);
  EXPECT_FALSE(fs::exists(tmp_ / "o2"));

  // delete: the same document shape as locally.
  CliRun rdel = Remote("delete --json llama/3");
  ASSERT_EQ(rdel.rc, 0) << rdel.err;
  CliRun ldel = Gantry("delete --json " + db + " llama/2");
  ASSERT_EQ(ldel.rc, 0) << ldel.err;
  EXPECT_EQ(Shape(rdel.json()), Shape(ldel.json()));
  EXPECT_EQ(rdel.json()["versions"], Json::array({"3"}));

  // SIGTERM stops the server cleanly; afterwards it does not answer (1).
  EXPECT_EQ(StopServer(), 0) << Slurp(P("serve.err"));
  EXPECT_EQ(Remote("list", "reader").rc, 1);
}

TEST_F(RegistryCli, ServeRefusesToStartWithoutCredentials) {
  CliRun r = Gantry("serve --db " + P("r.sqlite") + " --listen 127.0.0.1:0");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("no credentials configured"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp_ / "r.sqlite"));  // refused before opening the stores
  EXPECT_EQ(Gantry("serve --db " + P("r.sqlite") + " --keys-db k --max-upload-mb 0").rc, 2);
}

}  // namespace
}  // namespace gantry::registry
