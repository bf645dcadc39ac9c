// `gantry audit verify|keygen`: flag parsing and printing only; the work is in
// gantry::security (audit.h, crypto.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>

#include "cli.h"
#include "gantry/core/json.h"
#include "gantry/core/table.h"
#include "gantry/security/audit.h"
#include "gantry/security/crypto.h"

namespace gantry::cli {
namespace {

struct AuditFlags {
  CommonFlags common;
  std::string file;
  std::string key;  // verify: public key PEM file
  std::string out;  // keygen: output prefix
};

int RunVerify(const AuditFlags& f) {
  std::string pem;
  if (!f.key.empty()) {
    auto k = ReadFile(f.key);
    if (!k.ok()) return Fail("audit verify", k.status().WithContext("--key"));
    pem = *k;
  }
  auto r = security::VerifyAuditLog(f.file, pem);
  if (!r.ok()) return Fail("audit verify", r.status());
  std::string key_id;
  if (!pem.empty()) {
    auto v = security::Ed25519Verifier::FromPublicPem(pem);
    if (v.ok()) key_id = v->KeyId();
  }
  if (f.common.json) {
    Json out = {{"file", f.file},
                {"ok", r->ok},
                {"records", r->records},
                {"checkpoints", r->checkpoints},
                {"signatures_checked", !pem.empty()},
                {"key_id", key_id},
                {"first_bad_line", r->first_bad_line},
                {"first_bad_seq", r->first_bad_seq},
                {"reason", r->reason}};
    std::cout << out.dump(2) << "\n";
  } else {
    Table t({"check", "value"});
    t.AddRow({"file", f.file});
    t.AddRow({"records", std::to_string(r->records)});
    t.AddRow({"checkpoints", std::to_string(r->checkpoints)});
    t.AddRow({"signatures",
              pem.empty() ? "not checked (pass --key PUB.pem)" : "checked with key " + key_id});
    if (r->ok) {
      t.AddRow({"verdict", "ok"});
    } else {
      t.AddRow({"verdict", "TAMPERED"});
      if (r->first_bad_line > 0) t.AddRow({"first bad line", std::to_string(r->first_bad_line)});
      if (r->first_bad_seq > 0) t.AddRow({"first bad seq", std::to_string(r->first_bad_seq)});
      t.AddRow({"reason", r->reason});
    }
    std::cout << t.Render();
  }
  return r->ok ? kExitOk : kExitCheckFailed;
}

// Creates `path` with `mode`, refusing to replace an existing file, and makes
// the contents durable.
Status WriteNewFile(const std::string& path, const std::string& text, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    if (errno == EEXIST) {
      return AlreadyExists(path + " already exists; choose another --out PREFIX or move it away");
    }
    return IoError("creating " + path, errno);
  }
  // The umask may have widened nothing but could have narrowed; set exactly.
  (void)fchmod(fd, mode);
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      ::unlink(path.c_str());
      return IoError("writing " + path, err);
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    return IoError("fsync " + path, err);
  }
  ::close(fd);
  return Status::Ok();
}

int RunKeygen(const AuditFlags& f) {
  const std::string priv_path = f.out + ".key";
  const std::string pub_path = f.out + ".pub";
  for (const std::string& p : {priv_path, pub_path}) {
    struct stat st;
    if (::lstat(p.c_str(), &st) == 0) {
      return Fail(
          "audit keygen",
          AlreadyExists(p + " already exists; choose another --out PREFIX or move it away"));
    }
  }
  auto kp = security::GenerateEd25519();
  if (!kp.ok()) return Fail("audit keygen", kp.status());
  Status s = WriteNewFile(priv_path, kp->private_pem, 0600);
  if (s.ok()) {
    s = WriteNewFile(pub_path, kp->public_pem, 0644);
    if (!s.ok()) ::unlink(priv_path.c_str());
  }
  if (!s.ok()) return Fail("audit keygen", s);
  auto v = security::Ed25519Verifier::FromPublicPem(kp->public_pem);
  std::string key_id = v.ok() ? v->KeyId() : "";
  if (f.common.json) {
    std::cout
        << Json{{"private_key", priv_path}, {"public_key", pub_path}, {"key_id", key_id}}.dump(2)
        << "\n";
  } else {
    std::cout << "wrote " << priv_path << " (Ed25519 private key, mode 0600: keep it secret; "
              << "audit.signing_key in gateway.yaml)\n"
              << "wrote " << pub_path << " (public key for `gantry audit verify --key`)\n"
              << "key id " << key_id << "\n";
  }
  return kExitOk;
}

}  // namespace

void RegisterAudit(CLI::App& app, Action* action) {
  auto flags = std::make_shared<AuditFlags>();
  CLI::App* audit = app.add_subcommand(
      "audit",
      "Tamper-evident audit logs: verify a log, create a signing key (gantry audit --help)");
  audit->require_subcommand(1);
  auto set = [&](CLI::App* c, int (*fn)(const AuditFlags&)) {
    AddCommonFlags(c, &flags->common);
    c->callback([flags, action, fn] {
      *action = [flags, fn] {
        if (!ApplyCommonFlags(flags->common)) return kExitUsage;
        return fn(*flags);
      };
    });
  };

  CLI::App* verify = audit->add_subcommand(
      "verify",
      "Check an audit log's hash chain, its checkpoints and the FILE.checkpoints sidecar. "
      "Exit 0 intact, 1 tampered or truncated, 2 unreadable");
  verify->add_option("file", flags->file, "Audit log (JSON lines)")->required();
  verify->add_option("--key", flags->key,
                     "Ed25519 public key PEM (PREFIX.pub from `gantry audit keygen`); "
                     "without it checkpoint signatures are not checked");
  set(verify, RunVerify);

  CLI::App* keygen = audit->add_subcommand(
      "keygen", "Create an Ed25519 key pair for signing audit checkpoints: PREFIX.key, PREFIX.pub");
  keygen->add_option("--out", flags->out, "Output prefix, e.g. /etc/gantry/audit")->required();
  set(keygen, RunKeygen);
}

}  // namespace gantry::cli
