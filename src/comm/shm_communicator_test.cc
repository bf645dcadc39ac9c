// Fork-based tests of the shared-memory engine: every collective, type and op on
// 1-4 ranks, in and out of place, with registered and ordinary buffers, at
// counts that reach every path (inline, staged, single-copy, multi-step), each
// checked bit for bit against a scalar reference computed in-process.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gantry/comm/launch.h"
#include "gantry/comm/shm.h"
#include "reference_reduce_test.h"
#include "shm_internal.h"

namespace gantry::comm {
namespace {

using testing::ReferenceReduce;
using testing::SetFromInt;

enum class Coll {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAllToAll,
  kSendRecv,
  kGather,
  kScatter
};
constexpr Coll kAllColls[] = {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter,
                              Coll::kBroadcast, Coll::kReduce,    Coll::kAllToAll,
                              Coll::kSendRecv,  Coll::kGather,    Coll::kScatter};
const char* CollName(Coll c) {
  static const char* names[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
                                "alltoall",   "sendrecv",   "gather",         "scatter"};
  return names[static_cast<int>(c)];
}
bool Reduces(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduceScatter || c == Coll::kReduce;
}
bool Rooted(Coll c) {
  return c == Coll::kBroadcast || c == Coll::kReduce || c == Coll::kGather || c == Coll::kScatter;
}

struct Case {
  Coll coll;
  DataType type;
  ReduceOp op;
  size_t count;
  bool in_place;
  int root;
};

// Byte offsets of the send and recv regions inside a rank's arena, with the
// in-place layouts of communicator.h. Regions start at odd element offsets so
// nothing relies on alignment.
struct Layout {
  size_t send_off, send_elems, recv_off, recv_elems;  // offsets in bytes
};
constexpr size_t kGuard = 256;

Layout MakeLayout(const Case& c, int n, int r) {
  const size_t k = c.count;
  size_t send = k, recv = k;
  switch (c.coll) {
    case Coll::kAllGather:
    case Coll::kGather:
      recv = n * k;
      break;
    case Coll::kReduceScatter:
    case Coll::kScatter:
      send = n * k;
      break;
    case Coll::kAllToAll:
      send = recv = n * k;
      break;
    default:
      break;
  }
  const size_t elem = DataTypeSize(c.type);
  const size_t base = kGuard + 3 * elem;
  Layout l{base, send, base, recv};
  if (!c.in_place) {
    l.recv_off = base + send * elem + kGuard + 5 * elem;
  } else if (c.coll == Coll::kAllGather || c.coll == Coll::kGather) {
    l.send_off = base + r * k * elem;  // send == recv + rank * count
  } else if (c.coll == Coll::kReduceScatter || c.coll == Coll::kScatter) {
    l.recv_off = base + r * k * elem;  // recv == send + rank * count
  }
  return l;
}
size_t LayoutBytes(const Case& c, int n, int r) {
  const Layout l = MakeLayout(c, n, r);
  const size_t elem = DataTypeSize(c.type);
  return std::max(l.send_off + l.send_elems * elem, l.recv_off + l.recv_elems * elem) + kGuard;
}

// Input element i of rank q. Reductions get small integers (products and sums
// stay exact in every type), copies get values that differ between ranks.
int64_t InputValue(const Case& c, int q, size_t i) {
  if (!Reduces(c.coll)) return static_cast<int64_t>((q * 1009 + i * 31) % 2000) - 1000;
  const int64_t v = static_cast<int64_t>((i * 7 + q * 13 + 3) % 5);
  const bool is_unsigned =
      c.type == DataType::kUint8 || c.type == DataType::kUint32 || c.type == DataType::kUint64;
  return is_unsigned ? v : v - 2;
}

bool SendUsed(const Case& c, int r) {
  return !(c.coll == Coll::kBroadcast || c.coll == Coll::kScatter) || r == c.root;
}
bool RecvWritten(const Case& c, int r) {
  return !(c.coll == Coll::kReduce || c.coll == Coll::kGather) || r == c.root;
}

// Rank q's send region as it would be filled (its own elements only).
std::vector<uint8_t> SendOf(const Case& c, int n, int q) {
  const Layout l = MakeLayout(c, n, q);
  const size_t elem = DataTypeSize(c.type);
  std::vector<uint8_t> v(l.send_elems * elem + 1);
  for (size_t i = 0; i < l.send_elems; ++i) SetFromInt(c.type, v.data(), i, InputValue(c, q, i));
  return v;
}

// Fills the arena of rank r for case c and returns what it must hold afterwards.
std::vector<uint8_t> Prepare(const Case& c, int n, int r, uint8_t* arena, size_t arena_bytes) {
  const Layout l = MakeLayout(c, n, r);
  const size_t elem = DataTypeSize(c.type);
  std::memset(arena, 0xa5, arena_bytes);
  if (SendUsed(c, r)) {
    const auto mine = SendOf(c, n, r);
    std::memcpy(arena + l.send_off, mine.data(), l.send_elems * elem);
  }
  std::vector<uint8_t> want(arena, arena + arena_bytes);
  if (!RecvWritten(c, r) || c.count == 0) return want;

  std::vector<std::vector<uint8_t>> sends;
  for (int q = 0; q < n; ++q) sends.push_back(SendOf(c, n, q));
  uint8_t* out = want.data() + l.recv_off;
  const size_t k = c.count;
  std::vector<const void*> srcs(n);
  switch (c.coll) {
    case Coll::kAllReduce:
    case Coll::kReduce:
    case Coll::kReduceScatter: {
      const size_t first = c.coll == Coll::kReduceScatter ? r * k : 0;
      for (int q = 0; q < n; ++q) srcs[q] = sends[q].data() + first * elem;
      for (size_t i = 0; i < k; ++i) ReferenceReduce(c.type, c.op, srcs, i, out + i * elem);
      break;
    }
    case Coll::kAllGather:
    case Coll::kGather:
      for (int q = 0; q < n; ++q) std::memcpy(out + q * k * elem, sends[q].data(), k * elem);
      break;
    case Coll::kBroadcast:
      std::memcpy(out, sends[c.root].data(), k * elem);
      break;
    case Coll::kAllToAll:
      for (int q = 0; q < n; ++q) {
        std::memcpy(out + q * k * elem, sends[q].data() + r * k * elem, k * elem);
      }
      break;
    case Coll::kSendRecv:
      std::memcpy(out, sends[(r + n - 1) % n].data(), k * elem);
      break;
    case Coll::kScatter:
      std::memcpy(out, sends[c.root].data() + r * k * elem, k * elem);
      break;
  }
  return want;
}

Status Run(Communicator& comm, const Case& c, uint8_t* arena) {
  const int n = comm.size(), r = comm.rank();
  const Layout l = MakeLayout(c, n, r);
  const void* send = arena + l.send_off;
  void* recv = arena + l.recv_off;
  switch (c.coll) {
    case Coll::kAllReduce:
      return comm.AllReduce(send, recv, c.count, c.type, c.op);
    case Coll::kAllGather:
      return comm.AllGather(send, recv, c.count, c.type);
    case Coll::kReduceScatter:
      return comm.ReduceScatter(send, recv, c.count, c.type, c.op);
    case Coll::kBroadcast:
      return comm.Broadcast(send, recv, c.count, c.type, c.root);
    case Coll::kReduce:
      return comm.Reduce(send, recv, c.count, c.type, c.op, c.root);
    case Coll::kAllToAll:
      return comm.AllToAll(send, recv, c.count, c.type);
    case Coll::kSendRecv:
      return comm.SendRecv(send, recv, c.count, c.type, (r + 1) % n, (r + n - 1) % n);
    case Coll::kGather:
      return comm.Gather(send, recv, c.count, c.type, c.root);
    case Coll::kScatter:
      return comm.Scatter(send, recv, c.count, c.type, c.root);
  }
  return Status::Ok();
}

std::string Describe(const Case& c, int n, int r, bool registered) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s %s %s count=%zu %s %s root=%d ranks=%d rank=%d",
                CollName(c.coll), std::string(DataTypeName(c.type)).c_str(),
                Reduces(c.coll) ? std::string(ReduceOpName(c.op)).c_str() : "-", c.count,
                c.in_place ? "in-place" : "out-of-place",
                registered ? "registered" : "unregistered", c.root, n, r);
  return buf;
}

// Counts that reach each path: 0; inline in the sync line (1, 7); through the
// staging halves in one step (1023); just above the single-copy threshold; and
// several pipeline steps.
std::vector<size_t> CountsFor(Coll coll, DataType type, int n) {
  const internal::ShmTuning t = internal::DefaultShmTuning(n);
  const size_t elem = DataTypeSize(type);
  // Collectives whose per-rank input is n blocks cross thresholds n times sooner.
  const size_t blocks =
      (coll == Coll::kReduceScatter || coll == Coll::kAllToAll || coll == Coll::kScatter) ? n : 1;
  const size_t above_small = t.small_bytes / (elem * blocks) + 3;
  const size_t steps = (t.half_bytes * 3 / 2) / (elem * blocks) + 13;
  return {0, 1, 7, 1023, above_small, steps};
}

std::vector<Case> CasesFor(Coll coll, int n) {
  std::vector<Case> cases;
  for (DataType type : AllDataTypes()) {
    for (size_t count : CountsFor(coll, type, n)) {
      // Large counts cost time and reach no type- or op-specific code that the
      // small ones miss (reduce_test covers the kernels): one type per element
      // size, sum only, one root.
      const bool large = count > 1023;
      if (large && type != DataType::kInt8 && type != DataType::kHalf && type != DataType::kFloat &&
          type != DataType::kDouble) {
        continue;
      }
      std::vector<ReduceOp> ops = {ReduceOp::kSum};
      if (Reduces(coll) && !large) ops.assign(AllReduceOps().begin(), AllReduceOps().end());
      std::vector<int> roots = {n - 1};
      if (Rooted(coll) && n > 1 && !large) roots = {0, n - 1};
      for (ReduceOp op : ops) {
        for (int root : roots) {
          for (bool in_place : {false, true})
            cases.push_back({coll, type, op, count, in_place, root});
        }
      }
    }
  }
  return cases;
}

// Runs every case on every rank and checks the whole arena (outputs, untouched
// inputs and guards) against the reference.
int CheckAllCases(Communicator& comm, Coll coll) {
  const int n = comm.size(), r = comm.rank();
  const std::vector<Case> cases = CasesFor(coll, n);
  size_t arena_bytes = 0;
  for (const Case& c : cases) {
    for (int q = 0; q < n; ++q) arena_bytes = std::max(arena_bytes, LayoutBytes(c, n, q));
  }
  auto registered = comm.Allocate(arena_bytes);
  if (!registered.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", r, registered.status().ToString().c_str());
    return 10;
  }
  std::vector<uint8_t> plain(arena_bytes);
  for (bool use_registered : {true, false}) {
    uint8_t* arena = use_registered ? registered->as<uint8_t>() : plain.data();
    for (const Case& c : cases) {
      const size_t used = LayoutBytes(c, n, r);
      const std::vector<uint8_t> want = Prepare(c, n, r, arena, used);
      if (Status s = Run(comm, c, arena); !s.ok()) {
        std::fprintf(stderr, "%s: %s\n", Describe(c, n, r, use_registered).c_str(),
                     s.ToString().c_str());
        return 11;
      }
      if (std::memcmp(arena, want.data(), used) != 0) {
        size_t i = 0;
        while (arena[i] == want[i]) ++i;
        const Layout l = MakeLayout(c, n, r);
        std::fprintf(stderr,
                     "%s: wrong byte at arena offset %zu (send at %zu, recv at %zu): got 0x%02x "
                     "want 0x%02x\n",
                     Describe(c, n, r, use_registered).c_str(), i, l.send_off, l.recv_off, arena[i],
                     want[i]);
        return 12;
      }
    }
  }
  return 0;
}

LaunchOptions Local(int ranks) {
  LaunchOptions o;
  o.backend = Backend::kShm;
  o.ranks = ranks;
  o.timeout_s = 60;
  return o;
}

// Names of /dev/shm segments created by ranks this process forked.
std::vector<std::string> LeftoverSegments() {
  std::vector<std::string> out;
  const std::string prefix = "gantry-" + std::to_string(getpid()) + "-";
  if (DIR* d = opendir("/dev/shm")) {
    while (const dirent* e = readdir(d)) {
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) out.push_back(e->d_name);
    }
    closedir(d);
  }
  return out;
}

class CollectiveTest : public ::testing::TestWithParam<std::tuple<Coll, int>> {};

TEST_P(CollectiveTest, MatchesReferenceOnEveryPath) {
  const auto [coll, ranks] = GetParam();
  auto result = RunRanks(Local(ranks),
                         [coll = coll](Communicator& comm) { return CheckAllCases(comm, coll); });
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(*result, 0);
  EXPECT_TRUE(LeftoverSegments().empty());
}

INSTANTIATE_TEST_SUITE_P(AllCollectives, CollectiveTest,
                         ::testing::Combine(::testing::ValuesIn(kAllColls),
                                            ::testing::Values(1, 2, 3, 4)),
                         [](const ::testing::TestParamInfo<CollectiveTest::ParamType>& p) {
                           return std::string(CollName(std::get<0>(p.param))) + "_" +
                                  std::to_string(std::get<1>(p.param)) + "ranks";
                         });

TEST(ShmCommunicatorTest, ReportsItsBackendDeviceAndSize) {
  auto result = RunRanks(Local(3), [](Communicator& comm) {
    if (comm.backend() != "shm" || comm.size() != 3) return 1;
    if (comm.DeviceDescription().rfind("cpu ", 0) != 0) return 2;
    if (comm.memory_kind() != MemoryKind::kHost) return 3;
    return 0;
  });
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, 0);
}

TEST(ShmCommunicatorTest, HostAllReduceAndBarrier) {
  auto result = RunRanks(Local(3), [](Communicator& comm) {
    std::vector<double> v = {1.0 * comm.rank(), 10.0, -1.0 * comm.rank()};
    if (!comm.HostAllReduce(v, ReduceOp::kSum).ok()) return 1;
    if (v[0] != 3.0 || v[1] != 30.0 || v[2] != -3.0) return 2;
    std::vector<double> m = {0.5 * comm.rank()};
    if (!comm.HostAllReduce(m, ReduceOp::kMax).ok() || m[0] != 1.0) return 3;
    for (int i = 0; i < 100; ++i) {
      if (!comm.Barrier().ok()) return 4;
    }
    return 0;
  });
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, 0);
}

TEST(ShmCommunicatorTest, BuffersCanBeFreedAndReallocated) {
  auto result = RunRanks(Local(2), [](Communicator& comm) {
    for (int round = 0; round < 5; ++round) {
      const size_t count = (1 << 20) + round;
      auto a = comm.Allocate(count * 4);
      auto b = comm.Allocate(count * 4);
      if (!a.ok() || !b.ok()) return 1;
      auto* in = a->as<int32_t>();
      for (size_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>(i) + comm.rank();
      if (!comm.AllReduce(in, b->data(), count, DataType::kInt32, ReduceOp::kSum).ok()) return 2;
      for (size_t i = 0; i < count; ++i) {
        if (b->as<int32_t>()[i] != 2 * static_cast<int32_t>(i) + 1) return 3;
      }
    }
    return 0;
  });
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, 0);
  EXPECT_TRUE(LeftoverSegments().empty());
}

TEST(ShmCommunicatorTest, AllocationsOfDifferentSizesAreRejectedOnEveryRank) {
  auto result = RunRanks(Local(2), [](Communicator& comm) {
    auto b = comm.Allocate(4096 * (comm.rank() + 1));
    if (b.ok() || b.status().code() != StatusCode::kInvalidArgument) return 1;
    // The communicator is still usable.
    int32_t v = 1, out = 0;
    if (!comm.AllReduce(&v, &out, 1, DataType::kInt32, ReduceOp::kSum).ok() || out != 2) return 2;
    return 0;
  });
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, 0);
  EXPECT_TRUE(LeftoverSegments().empty());
}

TEST(ShmCommunicatorTest, PeerDeathIsAnErrorNotAHang) {
  for (const size_t count : {size_t{1}, size_t{1} << 20}) {
    const auto start = std::chrono::steady_clock::now();
    auto result = RunRanks(Local(3), [count](Communicator& comm) {
      std::vector<float> in(count, 1.0f), out(count);
      if (!comm.AllReduce(in.data(), out.data(), count, DataType::kFloat, ReduceOp::kSum).ok()) {
        return 20;
      }
      if (comm.rank() == 1) _exit(3);
      Status s = comm.AllReduce(in.data(), out.data(), count, DataType::kFloat, ReduceOp::kSum);
      const bool named = s.code() == StatusCode::kUnavailable &&
                         s.message().find("rank 1 (pid ") != std::string::npos &&
                         s.message().find("exited") != std::string::npos;
      if (!named) {
        std::fprintf(stderr, "unexpected: %s\n", s.ToString().c_str());
        return 6;
      }
      // The communicator stays failed.
      if (comm.Barrier().ok()) return 7;
      return 5;
    });
    ASSERT_TRUE(result.ok());
    EXPECT_EQ(*result, 5) << "count " << count;  // max(3 from rank 1, 5 from the others)
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
    EXPECT_TRUE(LeftoverSegments().empty());
  }
}

TEST(ShmCommunicatorTest, StuckPeerTimesOut) {
  LaunchOptions o = Local(2);
  o.timeout_s = 0.5;
  auto result = RunRanks(o, [](Communicator& comm) {
    if (comm.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      return 4;  // never joins; rank 0 has given up by now
    }
    Status s = comm.Barrier();
    return s.code() == StatusCode::kDeadlineExceeded ? 5 : 6;
  });
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, 5);
}

TEST(ShmCommunicatorTest, CrashIsReportedAndTheOthersAreStopped) {
  const auto start = std::chrono::steady_clock::now();
  LaunchOptions o = Local(3);
  o.timeout_s = 0;  // only the launcher can end the survivors
  auto result = RunRanks(o, [](Communicator& comm) {
    if (comm.rank() == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::abort();
    }
    std::this_thread::sleep_for(std::chrono::seconds(60));  // not waiting on anyone
    return 0;
  });
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_TRUE(LeftoverSegments().empty());
}

TEST(ShmCommunicatorTest, ExitCodeIsTheLargestOfTheRanks) {
  auto result = RunRanks(Local(3), [](Communicator& comm) { return comm.rank() == 1 ? 9 : 0; });
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, 9);
}

TEST(ShmCommunicatorTest, RejectsBadArguments) {
  auto result = RunRanks(Local(2), [](Communicator& comm) {
    int32_t v = 0;
    if (comm.Broadcast(&v, &v, 1, DataType::kInt32, 2).code() != StatusCode::kInvalidArgument) {
      return 1;
    }
    if (comm.SendRecv(&v, &v, 1, DataType::kInt32, -1, 0).code() != StatusCode::kInvalidArgument) {
      return 2;
    }
    if (comm.AllReduce(nullptr, &v, 1, DataType::kInt32, ReduceOp::kSum).code() !=
        StatusCode::kInvalidArgument) {
      return 3;
    }
    // Still usable after argument errors.
    int32_t one = 1, out = 0;
    if (!comm.AllReduce(&one, &out, 1, DataType::kInt32, ReduceOp::kSum).ok() || out != 2) return 4;
    return 0;
  });
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, 0);
}

TEST(ShmCommunicatorTest, UnusedBuffersMayBeNull) {
  auto result = RunRanks(Local(3), [](Communicator& comm) {
    const bool root = comm.rank() == 1;
    for (size_t count : {size_t{3}, size_t{100000}}) {        // staged and single-copy sizes
      auto buf = comm.Allocate(4 * count * sizeof(int32_t));  // input, then 3 blocks out
      if (!buf.ok()) return 1;
      auto* p = buf->as<int32_t>();
      for (size_t i = 0; i < count; ++i) p[i] = comm.rank() + 1;
      int32_t* recv = root ? p + count : nullptr;
      if (!comm.Reduce(p, recv, count, DataType::kInt32, ReduceOp::kSum, 1).ok()) return 2;
      if (root && (recv[0] != 6 || recv[count - 1] != 6)) return 3;
      if (!comm.Gather(p, recv, count, DataType::kInt32, 1).ok()) return 4;
      if (root && (recv[0] != 1 || recv[2 * count] != 3)) return 5;
      const int32_t* send = root ? p : nullptr;
      for (size_t i = 0; i < count; ++i) p[count + i] = 7;
      if (!comm.Broadcast(send, p + count, count, DataType::kInt32, 1).ok()) return 6;
      if (p[count] != 2 || p[2 * count - 1] != 2) return 7;
    }
    return 0;
  });
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, 0);
}

TEST(RunRanksTest, AnExceptionFailsItsRankOnly) {
  auto result = RunRanks(Local(2), [](Communicator& comm) -> int {
    if (comm.rank() == 1) throw std::runtime_error("boom");
    return 0;
  });
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, 1);
}

TEST(RunRanksTest, RejectsBadRankCounts) {
  for (int ranks : {-1, internal::kMaxShmRanks + 1}) {
    auto r = RunRanks(Local(ranks), [](Communicator&) { return 0; });
    ASSERT_FALSE(r.ok()) << ranks;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(std::to_string(ranks)), std::string::npos);
  }
}

TEST(RunRanksTest, MpiBackendNeedsALauncher) {
  if (UnderMpiLauncher()) GTEST_SKIP() << "running under an MPI launcher";
  LaunchOptions o = Local(2);
  o.backend = Backend::kMpi;
  auto r = RunRanks(o, [](Communicator&) { return 0; });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
}

TEST(RunRanksTest, DefaultRankCountIsOnePerCoreUpToEight) {
  LaunchOptions o = Local(0);
  auto r = RunRanks(o, [](Communicator& comm) {
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return comm.size() >= 1 && comm.size() <= 8 && comm.size() <= std::max(1L, cpus) ? 0 : 1;
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 0);
}

TEST(BackendTest, NamesParseAndCompile) {
  for (Backend b : {Backend::kAuto, Backend::kShm, Backend::kMpi, Backend::kNccl}) {
    auto parsed = ParseBackend(BackendName(b));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, b);
  }
  EXPECT_FALSE(ParseBackend("gloo").ok());
  EXPECT_TRUE(BackendCompiled(Backend::kShm));
  EXPECT_TRUE(BackendCompiled(Backend::kAuto));
}

TEST(CreateShmCommunicatorTest, ValidatesOptions) {
  EXPECT_EQ(CreateShmCommunicator({"s", 0, 0, 1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateShmCommunicator({"s", 2, 2, 1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateShmCommunicator({"", 0, 1, 1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateShmCommunicator({"a/b", 0, 1, 1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateShmCommunicator({"s", 0, internal::kMaxShmRanks + 1, 1}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(CreateShmCommunicatorTest, MissingRankZeroTimesOut) {
  const std::string session = std::to_string(getpid()) + "-lonely";
  auto r = CreateShmCommunicator({session, 1, 2, 0.2});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(LeftoverSegments().empty());
}

TEST(CreateShmCommunicatorTest, SingleRankInProcess) {
  const std::string session = std::to_string(getpid()) + "-single";
  auto r = CreateShmCommunicator({session, 0, 1, 1});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Communicator& comm = **r;
  float in[3] = {1, 2, 3}, out[3] = {};
  ASSERT_TRUE(comm.AllReduce(in, out, 3, DataType::kFloat, ReduceOp::kAvg).ok());
  EXPECT_EQ(out[2], 3.0f);
  EXPECT_TRUE(LeftoverSegments().empty());  // unlinked as soon as everyone mapped them
}

}  // namespace
}  // namespace gantry::comm
