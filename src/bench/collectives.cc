// Per-collective knowledge: names, nccl-tests' size rounding and bandwidth
// factors, expected results and the call itself. One table row per collective.
#include "gantry/bench/collectives.h"

#include <array>

#include "descriptor.h"

namespace gantry::bench {
namespace {

using internal::kReduced;
using internal::Layout;
using internal::Segment;

// How a collective's buffers relate to the swept size (chunk: see ComputeLayout).
enum class Shape {
  kWhole,      // send = recv = count = size / elt: all_reduce, broadcast, reduce, sendrecv
  kGathered,   // send = chunk, recv = chunk * n: all_gather, gather
  kScattered,  // send = chunk * n, recv = chunk: reduce_scatter, scatter
  kExchange,   // send = recv = chunk * n: alltoall
};

struct Descriptor {
  Collective id;
  std::string_view name;
  Shape shape;
  bool reduces;
  bool rooted;
  // busbw = algbw * factor; see BusBandwidthFactor.
  enum class Factor { kAllReduce, kRing, kOne } factor;
};

constexpr std::array<Descriptor, 9> kDescriptors = {{
    {Collective::kAllReduce, "all_reduce", Shape::kWhole, true, false,
     Descriptor::Factor::kAllReduce},
    {Collective::kAllGather, "all_gather", Shape::kGathered, false, false,
     Descriptor::Factor::kRing},
    {Collective::kReduceScatter, "reduce_scatter", Shape::kScattered, true, false,
     Descriptor::Factor::kRing},
    {Collective::kBroadcast, "broadcast", Shape::kWhole, false, true, Descriptor::Factor::kOne},
    {Collective::kReduce, "reduce", Shape::kWhole, true, true, Descriptor::Factor::kOne},
    {Collective::kAllToAll, "alltoall", Shape::kExchange, false, false, Descriptor::Factor::kRing},
    {Collective::kSendRecv, "sendrecv", Shape::kWhole, false, false, Descriptor::Factor::kOne},
    {Collective::kGather, "gather", Shape::kGathered, false, true, Descriptor::Factor::kRing},
    {Collective::kScatter, "scatter", Shape::kScattered, false, true, Descriptor::Factor::kRing},
}};

constexpr std::array<Collective, 9> kAll = {
    Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
    Collective::kBroadcast, Collective::kReduce,    Collective::kAllToAll,
    Collective::kSendRecv,  Collective::kGather,    Collective::kScatter,
};

const Descriptor& Describe(Collective c) {
  for (const Descriptor& d : kDescriptors) {
    if (d.id == c) return d;
  }
  return kDescriptors[0];  // unreachable: every enumerator has a row
}

}  // namespace

std::string_view CollectiveName(Collective c) { return Describe(c).name; }

Result<Collective> ParseCollective(std::string_view name) {
  std::string_view bare = name;
  if (bare.ends_with("_perf")) bare.remove_suffix(5);
  for (const Descriptor& d : kDescriptors) {
    if (d.name == bare) return d.id;
  }
  std::string known;
  for (const Descriptor& d : kDescriptors)
    known += (known.empty() ? "" : ", ") + std::string(d.name);
  return InvalidArgument("unknown collective '" + std::string(name) + "'; choose one of " + known);
}

std::span<const Collective> AllCollectives() { return kAll; }

double BusBandwidthFactor(Collective c, int nranks) {
  const double n = nranks;
  switch (Describe(c).factor) {
    case Descriptor::Factor::kAllReduce:
      return 2.0 * (n - 1) / n;
    case Descriptor::Factor::kRing:
      return (n - 1) / n;
    case Descriptor::Factor::kOne:
      return 1.0;
  }
  return 1.0;
}

bool TakesReduceOp(Collective c) { return Describe(c).reduces; }
bool TakesRoot(Collective c) { return Describe(c).rooted; }

namespace internal {

Layout ComputeLayout(Collective c, uint64_t bytes, size_t elt, int nranks) {
  const size_t count = bytes / elt;
  const size_t n = nranks;
  // nccl-tests: (count / nranks) & -(16 / eltSize), i.e. whole 16-byte units.
  const size_t chunk = (count / n) & ~(16 / elt - 1);
  Layout l;
  switch (Describe(c).shape) {
    case Shape::kWhole:
      l.count = l.send_count = l.recv_count = count;
      break;
    case Shape::kGathered:
      l.count = l.send_count = chunk;
      l.recv_count = chunk * n;
      l.send_inplace_offset = chunk;
      break;
    case Shape::kScattered:
      l.count = l.recv_count = chunk;
      l.send_count = chunk * n;
      l.recv_inplace_offset = chunk;
      break;
    case Shape::kExchange:
      l.count = chunk;
      l.send_count = l.recv_count = chunk * n;
      break;
  }
  return l;
}

double AlgorithmBytes(Collective c, const Layout& layout, size_t elt, int nranks) {
  double bytes = static_cast<double>(layout.count) * static_cast<double>(elt);
  return Describe(c).shape == Shape::kWhole ? bytes : bytes * nranks;
}

std::vector<Segment> ExpectedSegments(Collective c, const Layout& layout, int rank, int root,
                                      int nranks) {
  const size_t cnt = layout.count;
  std::vector<Segment> segs;
  auto from_every_rank = [&](uint64_t src_first) {
    for (int p = 0; p < nranks; ++p) segs.push_back({p * cnt, p, src_first, cnt});
  };
  switch (c) {
    case Collective::kAllReduce:
      segs.push_back({0, kReduced, 0, cnt});
      break;
    case Collective::kReduceScatter:
      segs.push_back({0, kReduced, rank * cnt, cnt});
      break;
    case Collective::kReduce:
      if (rank == root) segs.push_back({0, kReduced, 0, cnt});
      break;
    case Collective::kAllGather:
      from_every_rank(0);
      break;
    case Collective::kGather:
      if (rank == root) from_every_rank(0);
      break;
    case Collective::kBroadcast:
      segs.push_back({0, root, 0, cnt});
      break;
    case Collective::kScatter:
      segs.push_back({0, root, rank * cnt, cnt});
      break;
    case Collective::kAllToAll:
      from_every_rank(rank * cnt);
      break;
    case Collective::kSendRecv:
      segs.push_back({0, (rank - 1 + nranks) % nranks, 0, cnt});
      break;
  }
  return segs;
}

Status RunCollective(comm::Communicator& comm, Collective c, const void* send, void* recv,
                     size_t count, comm::DataType type, comm::ReduceOp op, int root) {
  switch (c) {
    case Collective::kAllReduce:
      return comm.AllReduce(send, recv, count, type, op);
    case Collective::kAllGather:
      return comm.AllGather(send, recv, count, type);
    case Collective::kReduceScatter:
      return comm.ReduceScatter(send, recv, count, type, op);
    case Collective::kBroadcast:
      return comm.Broadcast(send, recv, count, type, root);
    case Collective::kReduce:
      return comm.Reduce(send, recv, count, type, op, root);
    case Collective::kAllToAll:
      return comm.AllToAll(send, recv, count, type);
    case Collective::kSendRecv: {
      const int n = comm.size();
      return comm.SendRecv(send, recv, count, type, (comm.rank() + 1) % n,
                           (comm.rank() - 1 + n) % n);
    }
    case Collective::kGather:
      return comm.Gather(send, recv, count, type, root);
    case Collective::kScatter:
      return comm.Scatter(send, recv, count, type, root);
  }
  return Internal("unknown collective");
}

}  // namespace internal
}  // namespace gantry::bench
