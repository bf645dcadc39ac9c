#include "blob_spool.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "gantry/security/crypto.h"

namespace gantry::registry {

namespace fs = std::filesystem;

Result<int> CreateSpoolFile(const std::string& dir, std::string_view what, std::string* path) {
  std::error_code ec;
  std::string base = dir;
  if (base.empty()) base = fs::temp_directory_path(ec).string();
  if (base.empty()) base = "/tmp";
  fs::create_directories(base, ec);
  *path = (fs::path(base) / ("gantry-" + std::string(what) + "-XXXXXX")).string();
  int fd = ::mkostemp(path->data(), O_CLOEXEC);
  if (fd < 0) return IoError("creating a " + std::string(what) + " spool file in " + base, errno);
  return fd;
}

Result<std::shared_ptr<SpooledBlob>> SpooledBlob::Create(const std::string& dir) {
  std::string path;
  ASSIGN_OR_RETURN(int fd, CreateSpoolFile(dir, "upload", &path));
  auto out = std::shared_ptr<SpooledBlob>(new SpooledBlob(fd, path));
  if (out->ctx_ == nullptr || EVP_DigestInit_ex(out->ctx_, EVP_sha256(), nullptr) != 1) {
    return Internal("cannot initialise SHA-256");
  }
  return out;
}

SpooledBlob::SpooledBlob(int fd, std::string path)
    : fd_(fd), path_(std::move(path)), ctx_(EVP_MD_CTX_new()) {}

SpooledBlob::~SpooledBlob() {
  if (fd_ >= 0) ::close(fd_);
  ::unlink(path_.c_str());
  EVP_MD_CTX_free(ctx_);
}

void SpooledBlob::Write(std::string_view data) {
  if (!status_.ok() || finished_) return;
  EVP_DigestUpdate(ctx_, data.data(), data.size());
  size_ += data.size();
  while (!data.empty()) {
    ssize_t n = ::write(fd_, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      status_ = IoError("spooling an upload to " + path_, errno);
      return;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

Status SpooledBlob::Finish() {
  if (!status_.ok() || finished_) return status_;
  finished_ = true;
  unsigned char md[32];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_, md, &len);
  hex_ = security::HexEncode(std::string_view(reinterpret_cast<char*>(md), 32));
  if (::close(fd_) != 0) status_ = IoError("closing " + path_, errno);
  fd_ = -1;
  return status_;
}

}  // namespace gantry::registry
