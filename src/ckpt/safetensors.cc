// Standalone safetensors files: `gantry ckpt export` and reading shards or
// files from other producers.
#include <unistd.h>

#include <algorithm>

#include "format.h"
#include "gantry/ckpt/manager.h"
#include "gantry/storage/filesystem.h"

namespace gantry::ckpt {

Result<std::vector<Tensor>> ReadSafetensors(const std::string& path,
                                            std::span<const std::string> names) {
  storage::FileSystem& fs = storage::LocalFileSystem();
  ASSIGN_OR_RETURN(std::unique_ptr<storage::ReadableFile> f, fs.Open(path));
  uint64_t data_start = 0;
  ASSIGN_OR_RETURN(std::vector<internal::SafetensorsEntry> entries,
                   internal::ReadSafetensorsHeader(*f, path, &data_start));
  for (const std::string& n : names) {
    if (std::none_of(entries.begin(), entries.end(),
                     [&](const internal::SafetensorsEntry& e) { return e.name == n; })) {
      return NotFound("tensor '" + n + "' is not in " + path);
    }
  }
  std::vector<Tensor> out;
  for (const internal::SafetensorsEntry& e : entries) {
    if (!names.empty() && std::find(names.begin(), names.end(), e.name) == names.end()) continue;
    Tensor t;
    t.name = e.name;
    t.dtype = e.dtype;
    t.shape = e.shape;
    ASSIGN_OR_RETURN(t.data, AlignedBuffer::Allocate(e.end - e.begin));
    RETURN_IF_ERROR(
        storage::ReadExact(*f, data_start + e.begin, t.data.data(), e.end - e.begin, path));
    out.push_back(std::move(t));
  }
  return out;
}

namespace internal {

Status WriteSafetensorsTo(storage::FileSystem& fs, const std::string& path,
                          std::span<const TensorView> tensors) {
  RETURN_IF_ERROR(internal::ValidateTensors(tensors));
  // Reference writers align the data start to 8 bytes.
  const std::string prefix = internal::SafetensorsPrefix(tensors, 8, Json());
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  Status st = [&]() -> Status {
    ASSIGN_OR_RETURN(std::unique_ptr<storage::WritableFile> f, fs.Create(tmp, /*direct=*/false));
    RETURN_IF_ERROR(storage::WriteAll(*f, prefix.data(), prefix.size(), tmp));
    for (const TensorView& t : tensors)
      RETURN_IF_ERROR(storage::WriteAll(*f, t.data, t.bytes, tmp));
    RETURN_IF_ERROR(f->Sync());
    return f->Close();
  }();
  if (st.ok()) {
    // Replacing an existing export is intended, so plain rename(2) semantics.
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      st = IoError("renaming " + tmp + " to " + path, errno);
    } else {
      // Without this fsync a power loss could forget the rename.
      const size_t slash = path.rfind('/');
      const std::string parent =
          slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
      return fs.SyncDir(parent);
    }
  }
  if (!st.ok()) (void)fs.RemoveFile(tmp);
  return st;
}

}  // namespace internal

Status WriteSafetensors(const std::string& path, std::span<const TensorView> tensors) {
  return internal::WriteSafetensorsTo(storage::LocalFileSystem(), path, tensors);
}

}  // namespace gantry::ckpt
