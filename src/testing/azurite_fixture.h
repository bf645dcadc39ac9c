// Test support: runs Azurite's Blob service (node_modules/.bin/azurite-blob
// from the repository, see package.json) on a free 127.0.0.1 port with a
// temporary --location, for integration tests of anything that talks Blob.
//
//   gantry::storage::testing::AzuriteFixture azurite;
//   gantry::Status s = azurite.Start();
//   ASSERT_TRUE(s.ok()) << s.ToString();
//   StoreOptions o; o.container = "ckpts";
//   auto store = OpenObjectStore(azurite.connection_string(), o);
//
// Start() fails (FailedPrecondition naming the tool and what to run) when
// azurite-blob or node is missing, and Unavailable with the tail of Azurite's
// log when it does not report "listens on" within 30 s. The destructor stops
// the process (SIGTERM, then SIGKILL) and removes the temporary directory.
// Restart() starts again on the same port and --location (data survives a
// graceful Stop(); Kill() is a crash). Not thread-safe: drive it from one thread.
//
// With AzuriteOptions::oauth_https, Azurite serves HTTPS with a self-signed
// certificate for 127.0.0.1 (made with the `openssl` CLI into the temporary
// directory on the first Start(); ca_file() is the PEM to trust) and accepts
// bearer tokens (--oauth basic). Azurite's basic OAuth decodes the JWT without
// checking its signature and refuses it (403 AuthenticationFailed, with an
// AuthenticationErrorDetail) unless it has iat, nbf <= now <= exp, an iss that
// starts with https://sts.windows.net/ (or another cloud's STS) and an aud of
// https://storage.azure.com (or https://<account>.blob.core.windows.net).
// SharedKey keeps working alongside.
//
//   AzuriteFixture azurite({.oauth_https = true});
//   ASSERT_TRUE(azurite.Start().ok());
//   o.ca_file = azurite.ca_file();  // endpoint() is https://127.0.0.1:PORT/devstoreaccount1
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gantry/core/status.h"

#ifndef GANTRY_SOURCE_DIR
#error "azurite_fixture.h needs the GANTRY_SOURCE_DIR compile definition (set by gantry_add_test)"
#endif

namespace gantry::storage::testing {

struct AzuriteOptions {
  bool oauth_https = false;  // HTTPS with a test certificate and --oauth basic (see above)
};

class AzuriteFixture {
 public:
  static constexpr const char* kAccount = "devstoreaccount1";
  static constexpr const char* kKey =
      "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

  AzuriteFixture() = default;
  explicit AzuriteFixture(AzuriteOptions options) : options_(options) {}
  AzuriteFixture(const AzuriteFixture&) = delete;
  AzuriteFixture& operator=(const AzuriteFixture&) = delete;
  ~AzuriteFixture() {
    Stop();
    if (!dir_.empty()) std::system(("rm -rf '" + dir_ + "'").c_str());
  }

  // The azurite-blob executable this fixture runs.
  static std::string ToolPath() {
    return std::string(GANTRY_SOURCE_DIR) + "/node_modules/.bin/azurite-blob";
  }

  // Starts Azurite on `port` (0: a free port chosen by Azurite). Idempotent
  // while running.
  Status Start(uint16_t port = 0) {
    if (pid_ > 0) return Status::Ok();
    std::string tool = ToolPath();
    if (::access(tool.c_str(), X_OK) != 0) {
      return FailedPrecondition("Azurite is missing: " + tool +
                                " not found; run `npm ci` in " GANTRY_SOURCE_DIR
                                " (package.json pins azurite)");
    }
    if (::access("/usr/bin/node", X_OK) != 0 &&
        std::system("command -v node >/dev/null 2>&1") != 0) {
      return FailedPrecondition("node is missing: azurite-blob needs Node.js on PATH");
    }
    if (dir_.empty()) {
      std::string t = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
                      "/gantry-azurite-XXXXXX";
      if (::mkdtemp(t.data()) == nullptr) return IoError("mkdtemp " + t, errno);
      dir_ = t;
      ::mkdir((dir_ + "/data").c_str(), 0755);
    }
    if (options_.oauth_https) {
      Status cert = MakeCertificate();
      if (!cert.ok()) return cert;
    }
    std::string log = dir_ + "/azurite.log";
    std::string port_arg = std::to_string(port);
    std::string location = dir_ + "/data";
    std::vector<std::string> args = {tool,
                                     "--blobHost",
                                     "127.0.0.1",
                                     "--blobPort",
                                     port_arg,
                                     "--location",
                                     location,
                                     "--silent",
                                     "--skipApiVersionCheck",
                                     "--loose",
                                     "--disableTelemetry"};
    if (options_.oauth_https) {
      for (const std::string& a :
           {std::string("--oauth"), std::string("basic"), std::string("--cert"), cert_file(),
            std::string("--key"), key_file()}) {
        args.push_back(a);
      }
    }
    ::unlink(log.c_str());  // so that an earlier run's "listens on" is never read
    pid_t pid = ::fork();
    if (pid < 0) return IoError("fork for azurite-blob", errno);
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed test
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(tool.c_str(), argv.data());
      ::_exit(127);
    }
    pid_ = pid;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      std::string text = ReadLog();
      const std::string kMark =
          options_.oauth_https ? "listens on https://127.0.0.1:" : "listens on http://127.0.0.1:";
      if (size_t at = text.find(kMark); at != std::string::npos) {
        port_ = static_cast<uint16_t>(std::atoi(text.c_str() + at + kMark.size()));
        if (port_ != 0) return Status::Ok();
      }
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return Unavailable("azurite-blob (" + tool + ") exited before listening; its log:\n" +
                           Tail(text));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::string text = ReadLog();
    Kill();
    return Unavailable("azurite-blob (" + tool +
                       ") did not report \"listens on\" within 30 s; log:\n" + Tail(text));
  }

  // Starts again on the same port and location (after Stop() or Kill()).
  Status Restart() {
    Stop();
    return Start(port_);
  }

  // Graceful stop: SIGTERM, then SIGKILL after 5 s.
  void Stop() { Signal(SIGTERM, std::chrono::seconds(5)); }
  // A crash: SIGKILL now.
  void Kill() { Signal(SIGKILL, std::chrono::seconds(5)); }

  bool running() const { return pid_ > 0; }
  uint16_t port() const { return port_; }
  const std::string& location() const { return dir_; }
  std::string account() const { return kAccount; }
  std::string key() const { return kKey; }
  // "http://127.0.0.1:PORT/devstoreaccount1" (path-style, as Azurite wants);
  // https:// with oauth_https.
  std::string endpoint() const {
    return std::string(options_.oauth_https ? "https" : "http") +
           "://127.0.0.1:" + std::to_string(port_) + "/" + kAccount;
  }
  std::string connection_string() const {
    return std::string("DefaultEndpointsProtocol=") + (options_.oauth_https ? "https" : "http") +
           ";AccountName=" + kAccount + ";AccountKey=" + kKey + ";BlobEndpoint=" + endpoint() + ";";
  }
  // oauth_https: the self-signed certificate (its own CA: trust this file) and its key.
  std::string ca_file() const { return cert_file(); }
  std::string cert_file() const { return dir_ + "/tls/cert.pem"; }
  std::string key_file() const { return dir_ + "/tls/key.pem"; }
  bool oauth_https() const { return options_.oauth_https; }

 private:
  // A self-signed RSA certificate for 127.0.0.1 (SAN IP:127.0.0.1, so that
  // host name verification passes), valid for two days; made once per fixture.
  Status MakeCertificate() {
    if (::access(cert_file().c_str(), R_OK) == 0) return Status::Ok();
    if (std::system("command -v openssl >/dev/null 2>&1") != 0) {
      return FailedPrecondition(
          "openssl is missing: the HTTPS Azurite fixture makes its test certificate with the "
          "openssl CLI (apt-get install openssl)");
    }
    ::mkdir((dir_ + "/tls").c_str(), 0700);
    std::string log = dir_ + "/tls/openssl.log";
    std::string cmd =
        "openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 2 -subj "
        "/CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout '" +
        key_file() + "' -out '" + cert_file() + "' >'" + log + "' 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      std::ifstream in(log);
      std::stringstream ss;
      ss << in.rdbuf();
      return Internal("making the Azurite test certificate failed: " + cmd + "\n" + ss.str());
    }
    return Status::Ok();
  }

  std::string ReadLog() const {
    std::ifstream in(dir_ + "/azurite.log");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  static std::string Tail(const std::string& s) {
    return s.size() > 2000 ? s.substr(s.size() - 2000) : s;
  }
  void Signal(int sig, std::chrono::seconds grace) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    auto deadline = std::chrono::steady_clock::now() + grace;
    int st = 0;
    while (::waitpid(pid_, &st, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &st, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid_ = -1;
  }

  AzuriteOptions options_;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  std::string dir_;
};

// One Azurite for a whole test binary: started on first use (a start failure is
// a test failure), stopped when the binary's tests end. Each user takes its own
// container, so tests never see each other's objects.
namespace azurite_detail {
inline AzuriteFixture*& SharedAzuriteSlot() {
  static AzuriteFixture* slot = nullptr;
  return slot;
}
inline AzuriteFixture*& SharedOAuthAzuriteSlot() {
  static AzuriteFixture* slot = nullptr;
  return slot;
}
class SharedAzuriteEnvironment final : public ::testing::Environment {
 public:
  void TearDown() override {
    if (AzuriteFixture* a = SharedAzuriteSlot()) a->Stop();
    if (AzuriteFixture* a = SharedOAuthAzuriteSlot()) a->Stop();
  }
};
inline ::testing::Environment* const kSharedAzuriteEnvironment =
    ::testing::AddGlobalTestEnvironment(new SharedAzuriteEnvironment);
}  // namespace azurite_detail

inline AzuriteFixture& SharedAzurite() {
  static AzuriteFixture* az = [] {
    auto* a = new AzuriteFixture();  // never destroyed: the environment stops it
    Status s = a->Start();
    if (!s.ok()) ADD_FAILURE() << s.ToString();
    azurite_detail::SharedAzuriteSlot() = a;
    return a;
  }();
  return *az;
}

// The same with AzuriteOptions::oauth_https (HTTPS and bearer tokens).
inline AzuriteFixture& SharedOAuthAzurite() {
  static AzuriteFixture* az = [] {
    auto* a = new AzuriteFixture({.oauth_https = true});
    Status s = a->Start();
    if (!s.ok()) ADD_FAILURE() << s.ToString();
    azurite_detail::SharedOAuthAzuriteSlot() = a;
    return a;
  }();
  return *az;
}

}  // namespace gantry::storage::testing
