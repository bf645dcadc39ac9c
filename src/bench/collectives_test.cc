#include "gantry/bench/collectives.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "descriptor.h"

namespace gantry::bench {
namespace {

using comm::DataType;
using internal::ComputeLayout;
using internal::Layout;

TEST(BenchCollectives, NamesRoundTripAndPerfSuffixIsAccepted) {
  std::set<std::string> names;
  for (Collective c : AllCollectives()) {
    std::string name(CollectiveName(c));
    names.insert(name);
    ASSERT_TRUE(ParseCollective(name).ok()) << name;
    EXPECT_EQ(*ParseCollective(name), c);
    EXPECT_EQ(*ParseCollective(name + "_perf"), c);
  }
  EXPECT_EQ(names.size(), 9u);
  Result<Collective> bad = ParseCollective("allreduce");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("all_reduce"), std::string::npos)
      << "the error lists the valid names";
}

TEST(BenchCollectives, BusBandwidthFactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kAllReduce, 1), 0.0);  // nccl-tests issue #249
  for (Collective c : {Collective::kAllGather, Collective::kReduceScatter, Collective::kAllToAll,
                       Collective::kGather, Collective::kScatter}) {
    EXPECT_DOUBLE_EQ(BusBandwidthFactor(c, 4), 0.75) << CollectiveName(c);
    EXPECT_DOUBLE_EQ(BusBandwidthFactor(c, 3), 2.0 / 3) << CollectiveName(c);
  }
  for (Collective c : {Collective::kBroadcast, Collective::kReduce, Collective::kSendRecv}) {
    EXPECT_DOUBLE_EQ(BusBandwidthFactor(c, 5), 1.0) << CollectiveName(c);
  }
}

TEST(BenchCollectives, OpsAndRoots) {
  std::set<Collective> reducing{Collective::kAllReduce, Collective::kReduceScatter,
                                Collective::kReduce};
  std::set<Collective> rooted{Collective::kBroadcast, Collective::kReduce, Collective::kGather,
                              Collective::kScatter};
  for (Collective c : AllCollectives()) {
    EXPECT_EQ(TakesReduceOp(c), reducing.count(c) == 1) << CollectiveName(c);
    EXPECT_EQ(TakesRoot(c), rooted.count(c) == 1) << CollectiveName(c);
  }
}

// nccl-tests' per-rank chunk: (count / nranks) & -(16 / eltSize).
size_t Chunk(uint64_t bytes, size_t elt, int n) { return (bytes / elt / n) & ~(16 / elt - 1); }

TEST(BenchCollectives, LayoutsRoundLikeNcclTests) {
  for (uint64_t bytes : {1ull, 7ull, 8ull, 100ull, 1000ull, 4099ull, 65536ull, 1000003ull}) {
    for (size_t elt : {1u, 2u, 4u, 8u}) {
      for (int n : {1, 2, 3, 5, 7, 8}) {
        const std::string where =
            std::to_string(bytes) + "B elt " + std::to_string(elt) + " n " + std::to_string(n);
        const size_t count = bytes / elt;
        const size_t chunk = Chunk(bytes, elt, n);
        for (Collective c : {Collective::kAllReduce, Collective::kBroadcast, Collective::kReduce,
                             Collective::kSendRecv}) {
          Layout l = ComputeLayout(c, bytes, elt, n);
          EXPECT_EQ(l.count, count) << where;
          EXPECT_EQ(l.send_count, count) << where;
          EXPECT_EQ(l.recv_count, count) << where;
          EXPECT_EQ(l.Bytes(elt), count * elt) << where;
        }
        for (Collective c : {Collective::kAllGather, Collective::kGather}) {
          Layout l = ComputeLayout(c, bytes, elt, n);
          EXPECT_EQ(l.count, chunk) << where;
          EXPECT_EQ(l.send_count, chunk) << where;
          EXPECT_EQ(l.recv_count, chunk * n) << where;
          EXPECT_EQ(l.send_inplace_offset, chunk) << where;
          EXPECT_EQ(l.recv_inplace_offset, 0u) << where;
        }
        for (Collective c : {Collective::kReduceScatter, Collective::kScatter}) {
          Layout l = ComputeLayout(c, bytes, elt, n);
          EXPECT_EQ(l.count, chunk) << where;
          EXPECT_EQ(l.send_count, chunk * n) << where;
          EXPECT_EQ(l.recv_count, chunk) << where;
          EXPECT_EQ(l.send_inplace_offset, 0u) << where;
          EXPECT_EQ(l.recv_inplace_offset, chunk) << where;
        }
        Layout a2a = ComputeLayout(Collective::kAllToAll, bytes, elt, n);
        EXPECT_EQ(a2a.count, chunk) << where;
        EXPECT_EQ(a2a.send_count, chunk * n) << where;
        EXPECT_EQ(a2a.recv_count, chunk * n) << where;
        for (Collective c : AllCollectives()) {
          Layout l = ComputeLayout(c, bytes, elt, n);
          EXPECT_LE(l.Bytes(elt), bytes) << where << " " << CollectiveName(c);
          EXPECT_EQ(l.count * elt %
                        (c == Collective::kAllReduce || c == Collective::kBroadcast ||
                                 c == Collective::kReduce || c == Collective::kSendRecv
                             ? elt
                             : 16),
                    0u)
              << where << " chunks are whole 16-byte units";
          for (int rank = 0; rank < n; ++rank) {
            EXPECT_LE(l.InPlaceExtent(rank) * elt, l.Bytes(elt))
                << where << " " << CollectiveName(c);
          }
        }
      }
    }
  }
}

TEST(BenchCollectives, ExampleSizesMatchNcclTestsOutput) {
  // all_gather_perf -b 8 -e 1K -f 4 on 3 ranks, float: 0, 0, 96 and 480 bytes.
  EXPECT_EQ(ComputeLayout(Collective::kAllGather, 8, 4, 3).Bytes(4), 0u);
  EXPECT_EQ(ComputeLayout(Collective::kAllGather, 32, 4, 3).Bytes(4), 0u);
  EXPECT_EQ(ComputeLayout(Collective::kAllGather, 128, 4, 3).Bytes(4), 96u);
  EXPECT_EQ(ComputeLayout(Collective::kAllGather, 512, 4, 3).Bytes(4), 480u);
  EXPECT_EQ(ComputeLayout(Collective::kAllGather, 512, 4, 3).count, 40u);
  // reduce_scatter 1 MiB of half on 8 ranks: 65536 elements each.
  EXPECT_EQ(ComputeLayout(Collective::kReduceScatter, 1 << 20, 2, 8).count, 65536u);
}

TEST(BenchCollectives, AlgorithmBytesCountEveryRankForChunkedCollectives) {
  Layout whole = ComputeLayout(Collective::kAllReduce, 4096, 4, 4);
  EXPECT_DOUBLE_EQ(internal::AlgorithmBytes(Collective::kAllReduce, whole, 4, 4), 4096);
  Layout chunk = ComputeLayout(Collective::kAllGather, 4096, 4, 4);
  EXPECT_DOUBLE_EQ(internal::AlgorithmBytes(Collective::kAllGather, chunk, 4, 4), 4096);
  Layout a2a = ComputeLayout(Collective::kAllToAll, 4096, 4, 4);
  EXPECT_DOUBLE_EQ(internal::AlgorithmBytes(Collective::kAllToAll, a2a, 4, 4), 4096);
}

// Segments never overlap, stay inside the receive buffer and cover it fully
// unless the rank is a non-root of reduce or gather (which receive nothing).
TEST(BenchCollectives, ExpectedSegmentsCoverTheReceiveBuffer) {
  for (Collective c : AllCollectives()) {
    for (int n : {1, 2, 3, 4}) {
      Layout l = ComputeLayout(c, 4096, 4, n);
      for (int root : {0, n - 1}) {
        for (int rank = 0; rank < n; ++rank) {
          std::vector<int> covered(l.recv_count, 0);
          for (const internal::Segment& s : internal::ExpectedSegments(c, l, rank, root, n)) {
            ASSERT_LE(s.dst + s.length, l.recv_count) << CollectiveName(c);
            ASSERT_GE(s.src_rank, internal::kReduced);
            ASSERT_LT(s.src_rank, n);
            if (s.src_rank != internal::kReduced) {
              ASSERT_LE(s.src_first + s.length, ComputeLayout(c, 4096, 4, n).send_count)
                  << CollectiveName(c) << ": a peer's input index beyond what it sends";
            }
            for (size_t i = s.dst; i < s.dst + s.length; ++i) ++covered[i];
          }
          const bool receives =
              !((c == Collective::kReduce || c == Collective::kGather) && rank != root);
          for (int k : covered)
            ASSERT_EQ(k, receives ? 1 : 0) << CollectiveName(c) << " rank " << rank;
        }
      }
    }
  }
}

}  // namespace
}  // namespace gantry::bench
