#include "gantry/ckpt/bench.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "gantry/ckpt/manager.h"
#include "gantry/core/table.h"
#include "gantry/core/units.h"
#include "gantry/storage/filesystem.h"

namespace gantry::ckpt {
namespace {

constexpr const char* kRun = "gantry-ckpt-bench";

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

template <typename Fn>
Result<double> Time(Fn fn) {
  auto t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(fn());
  return Seconds(std::chrono::steady_clock::now() - t0);
}

// Drops the files of a directory from the page cache so that a load reads
// the disk (clean pages only; they are clean after the save's fsync).
void DropCache(const std::string& dir) {
  auto entries = storage::LocalFileSystem().ListDir(dir);
  if (!entries.ok()) return;
  for (const auto& e : *entries) {
    int fd = ::open((dir + "/" + e.name).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

Status RawWrite(const std::string& path, const AlignedBuffer& buf) {
  storage::FileSystem& fs = storage::LocalFileSystem();
  ASSIGN_OR_RETURN(auto f, fs.Create(path, /*direct=*/true));
  const char* p = static_cast<const char*>(buf.data());
  constexpr size_t kBlock = 16u << 20;  // the block size the engine writes with
  for (size_t off = 0; off < buf.size(); off += kBlock) {
    RETURN_IF_ERROR(storage::WriteAll(*f, p + off, std::min(kBlock, buf.size() - off), path));
  }
  RETURN_IF_ERROR(f->Sync());
  return f->Close();
}

std::string Rate(uint64_t bytes, double s) {
  if (s <= 0) return "-";
  return FormatSize(static_cast<uint64_t>(bytes / s)) + "/s";
}

}  // namespace

Json BenchResult::ToJson() const {
  auto rate = [&](double s) { return s > 0 ? state_bytes / s : 0.0; };
  return Json{{"state_bytes", state_bytes},
              {"raw_write_s", raw_write_s},
              {"raw_write_bytes_per_s", rate(raw_write_s)},
              {"save_s", save_s},
              {"save_bytes_per_s", rate(save_s)},
              {"save_vs_raw", save_s > 0 ? raw_write_s / save_s : 0.0},
              {"async_block_s", async_block_s},
              {"async_total_s", async_total_s},
              {"async_block_vs_save", save_s > 0 ? async_block_s / save_s : 0.0},
              {"load_cold_s", load_cold_s},
              {"load_cold_bytes_per_s", rate(load_cold_s)},
              {"load_warm_s", load_warm_s},
              {"load_warm_bytes_per_s", rate(load_warm_s)}};
}

std::string BenchResult::RenderText() const {
  Table t({"measurement", "time", "rate"});
  t.SetAlign(1, Table::Align::kRight);
  t.SetAlign(2, Table::Align::kRight);
  auto dur = [](double s) {
    return FormatDuration(std::chrono::nanoseconds(static_cast<int64_t>(s * 1e9)));
  };
  t.AddRow({"raw O_DIRECT write + fsync", dur(raw_write_s), Rate(state_bytes, raw_write_s)});
  t.AddRow({"save (sync)", dur(save_s), Rate(state_bytes, save_s)});
  t.AddRow({"save_async: blocked", dur(async_block_s), ""});
  t.AddRow({"save_async: until durable", dur(async_total_s), Rate(state_bytes, async_total_s)});
  t.AddRow({"load (cold cache)", dur(load_cold_s), Rate(state_bytes, load_cold_s)});
  t.AddRow({"load (warm cache)", dur(load_warm_s), Rate(state_bytes, load_warm_s)});
  return t.Render();
}

Result<BenchResult> RunBench(const BenchOptions& o) {
  if (o.tensors < 1 || o.iterations < 1) {
    return InvalidArgument("--tensors and --iters must be at least 1");
  }
  const uint64_t per = o.state_bytes / o.tensors / 4 * 4;
  if (per == 0)
    return InvalidArgument("--size is too small for " + std::to_string(o.tensors) + " tensors");
  storage::FileSystem& fs = storage::LocalFileSystem();
  RETURN_IF_ERROR(fs.CreateDirs(o.dir));
  const std::string run_dir = o.dir + "/" + kRun;
  RETURN_IF_ERROR(fs.RemoveAll(run_dir));

  std::vector<AlignedBuffer> data;
  std::vector<TensorView> views;
  for (int i = 0; i < o.tensors; ++i) {
    ASSIGN_OR_RETURN(AlignedBuffer b, AlignedBuffer::Allocate(per));
    float* f = static_cast<float*>(b.data());
    for (uint64_t k = 0; k < per / 4; ++k) f[k] = static_cast<float>(k % 1000) * 0.001f + i;
    views.push_back({"layer" + std::to_string(i) + ".weight",
                     DType::kF32,
                     {static_cast<int64_t>(per / 4)},
                     b.data(),
                     per});
    data.push_back(std::move(b));
  }
  BenchResult r;
  r.state_bytes = per * o.tensors;
  ASSIGN_OR_RETURN(AlignedBuffer raw, AlignedBuffer::Allocate(r.state_bytes / 4096 * 4096));
  // The same bytes as the state, so storage that compresses or deduplicates
  // treats both alike.
  for (uint64_t off = 0; off < raw.size(); off += per) {
    std::memcpy(static_cast<char*>(raw.data()) + off, data[(off / per) % data.size()].data(),
                std::min<uint64_t>(per, raw.size() - off));
  }

  Options mo;
  mo.root = o.dir;
  mo.run = kRun;
  ASSIGN_OR_RETURN(auto mgr, CheckpointManager::Open(mo));
  // Old steps are deleted between measurements, not inside them.
  mo.retention.keep_last = 1;
  ASSIGN_OR_RETURN(auto pruner, CheckpointManager::Open(mo));
  Status st = [&]() -> Status {
    int64_t step = 0;
    auto best = [](double& slot, double v) { slot = slot == 0 ? v : std::min(slot, v); };
    for (int it = 0; it < o.iterations; ++it) {
      ASSIGN_OR_RETURN(double raw_s, Time([&] { return RawWrite(run_dir + "/raw.bin", raw); }));
      best(r.raw_write_s, raw_s);
      RETURN_IF_ERROR(fs.RemoveFile(run_dir + "/raw.bin"));
      ASSIGN_OR_RETURN(double save_s, Time([&] { return mgr->Save(++step, views); }));
      best(r.save_s, save_s);
      auto t0 = std::chrono::steady_clock::now();
      RETURN_IF_ERROR(mgr->SaveAsync(++step, views));
      best(r.async_block_s, Seconds(std::chrono::steady_clock::now() - t0));
      RETURN_IF_ERROR(mgr->Wait());
      best(r.async_total_s, Seconds(std::chrono::steady_clock::now() - t0));
      DropCache(mgr->StepDir(step));
      ASSIGN_OR_RETURN(double cold, Time([&] { return mgr->Load(step).status(); }));
      best(r.load_cold_s, cold);
      ASSIGN_OR_RETURN(double warm, Time([&] { return mgr->Load(step).status(); }));
      best(r.load_warm_s, warm);
      RETURN_IF_ERROR(pruner->Prune().status());
    }
    return Status::Ok();
  }();
  mgr.reset();
  pruner.reset();
  Status cleanup = fs.RemoveAll(run_dir);
  RETURN_IF_ERROR(st);
  RETURN_IF_ERROR(cleanup);
  return r;
}

}  // namespace gantry::ckpt
