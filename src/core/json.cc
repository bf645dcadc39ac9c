#include "gantry/core/json.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace gantry {
namespace {

// Maps errno to the Status code a caller can act on; the message names the file.
Status FileError(const std::string& what, int err) {
  std::string msg = fmt::format("{}: {}", what, std::strerror(err));
  switch (err) {
    case ENOENT:
      return NotFound(std::move(msg));
    case EACCES:
    case EPERM:
      return PermissionDenied(std::move(msg));
    case ENOSPC:
    case EDQUOT:
      return ResourceExhausted(std::move(msg));
    default:
      return Status(StatusCode::kIoError, std::move(msg));
  }
}

// Line and column (1-based) of a 1-based byte offset, for editor-friendly messages.
std::pair<size_t, size_t> LineColumn(std::string_view text, size_t byte) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i + 1 < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

Status WriteAll(int fd, std::string_view text, const std::string& path) {
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return FileError(fmt::format("writing '{}'", path), errno);
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

}  // namespace

Result<Json> ParseJson(std::string_view text, std::string_view origin) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line 1, column 5:
    // syntax error ..."; keep only the explanation after the position.
    std::string_view what = e.what();
    if (size_t col = what.find("column "); col != std::string_view::npos) {
      if (size_t colon = what.find(": ", col); colon != std::string_view::npos) {
        what.remove_prefix(colon + 2);
      }
    }
    auto [line, column] = LineColumn(text, e.byte);
    return InvalidArgument(
        fmt::format("{}:{}:{}: invalid JSON at byte {}: {}", origin, line, column, e.byte, what));
  } catch (const Json::exception& e) {
    return InvalidArgument(fmt::format("{}: invalid JSON: {}", origin, e.what()));
  }
}

Result<std::string> ReadFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FileError(fmt::format("cannot open '{}'", path), errno);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return FileError(fmt::format("reading '{}'", path), err);
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Result<Json> ReadJsonFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseJson(text, path);
}

Status WriteFileAtomic(const std::string& path, std::string_view text) {
  std::filesystem::path target(path);
  std::string dir = target.has_parent_path() ? target.parent_path().string() : ".";
  // A unique name in the same directory (rename is only atomic within one file
  // system); open() with mode 0666 lets the umask decide permissions as usual.
  static std::atomic<uint64_t> counter{0};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter.fetch_add(1));
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && (errno != EEXIST || attempt == 100)) {
      return FileError(fmt::format("cannot create a temporary file next to '{}'", path), errno);
    }
  }
  Status s = WriteAll(fd, text, path);
  if (s.ok() && ::fsync(fd) != 0) s = FileError(fmt::format("syncing '{}'", path), errno);
  if (::close(fd) != 0 && s.ok()) s = FileError(fmt::format("closing '{}'", path), errno);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    s = FileError(fmt::format("renaming '{}' to '{}'", tmp, path), errno);
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  // The rename is durable only once the directory entry is synced. Some file
  // systems cannot fsync a directory (EINVAL); the data itself is already safe there.
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return FileError(fmt::format("opening directory '{}'", dir), errno);
  int rc = ::fsync(dfd);
  int err = errno;
  ::close(dfd);
  if (rc != 0 && err != EINVAL) return FileError(fmt::format("syncing directory '{}'", dir), err);
  return Status::Ok();
}

}  // namespace gantry
