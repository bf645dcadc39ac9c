// Spool files of the registry server: blob uploads are streamed into one
// while hashed (never held in memory), blob downloads are fetched into one
// and sent with sendfile. Internal to src/registry.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "gantry/core/http_server.h"
#include "gantry/core/status.h"

typedef struct evp_md_ctx_st EVP_MD_CTX;

namespace gantry::registry {

// Creates an empty temporary file "gantry-<what>-XXXXXX" in `dir` (empty: the
// system temp directory, created when missing) and returns its open
// descriptor; the path in *path.
Result<int> CreateSpoolFile(const std::string& dir, std::string_view what, std::string* path);

// A streamed blob upload (http::BodySink): written to a spool file and hashed
// as it arrives. The file is removed when the sink is released (the server
// does that right after the request's handler).
class SpooledBlob final : public http::BodySink {
 public:
  static Result<std::shared_ptr<SpooledBlob>> Create(const std::string& dir);
  ~SpooledBlob() override;
  SpooledBlob(const SpooledBlob&) = delete;
  SpooledBlob& operator=(const SpooledBlob&) = delete;

  void Write(std::string_view data) override;
  // Closes the file and computes the digest; the first error when spooling
  // failed. Idempotent.
  Status Finish();
  const std::string& hex() const { return hex_; }  // after Finish
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  SpooledBlob(int fd, std::string path);
  int fd_;
  std::string path_;
  EVP_MD_CTX* ctx_;
  uint64_t size_ = 0;
  bool finished_ = false;
  std::string hex_;
  Status status_;
};

}  // namespace gantry::registry
