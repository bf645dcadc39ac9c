// The "auto" backend under MPI (shm inside each node, MPI between nodes) and
// the shm backend bootstrapped over MPI. See mpi_communicator.h for which
// collectives are hierarchical.
//
// Layout. Every rank belongs to a node (SplitByNode) and has a local rank in
// it. Node leaders (local rank 0) number the nodes. A "rail" is the set of
// ranks with the same local rank on every node, ordered by node; rail 0 is the
// node leaders. When every node has the same number of ranks L, a payload
// split into L slices lets each rail carry one slice between nodes in
// parallel, so all of a node's cores (and NICs) share the inter-node work
// instead of one leader doing it alone.

#include <cstdio>
#include <string>
#include <vector>

#include "../backends.h"
#include "../reduce.h"
#include "gantry/comm/shm.h"
#include "mpi_communicator.h"

namespace gantry::comm::internal {
namespace {

// Frees an MPI communicator handle on scope exit.
class ScopedComm {
 public:
  ScopedComm() = default;
  explicit ScopedComm(MPI_Comm comm) : comm_(comm) {}
  ScopedComm(const ScopedComm&) = delete;
  ScopedComm& operator=(const ScopedComm&) = delete;
  ~ScopedComm() {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }
  MPI_Comm get() const { return comm_; }
  MPI_Comm* out() { return &comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

// Makes a session name on rank 0 of `comm` and hands it to every rank, so the
// ranks of one shm group agree on their /dev/shm segment names while
// concurrent jobs (or fake nodes) never collide.
Result<std::string> AgreeOnSessionName(MPI_Comm comm) {
  int rank = 0;
  GANTRY_MPI(MPI_Comm_rank, comm, &rank);
  char name[32] = {};
  if (rank == 0) {
    std::snprintf(name, sizeof name, "%s", NewShmSessionName().c_str());
  }
  GANTRY_MPI(MPI_Bcast, name, sizeof name, MPI_CHAR, 0, comm);
  return std::string(name);
}

class HierarchicalCommunicator final : public Communicator {
 public:
  enum class Mode {
    kShmOnly,       // one node: every collective is the shm communicator's
    kMpiOnly,       // one rank per node: every collective is MPI's
    kHierarchical,  // several nodes with several ranks each
  };

  Status Init(MPI_Comm world, double shm_timeout_s);

  int rank() const override { return world_->rank(); }
  int size() const override { return world_->size(); }
  std::string_view backend() const override { return "auto"; }
  std::string DeviceDescription() const override {
    if (shm_ == nullptr) return world_->DeviceDescription();
    return shm_->DeviceDescription();  // the nccl-tests row already names the host
  }
  // Memory the node's shm communicator can map gets its single-copy paths in
  // the intra-node phases; MPI takes any host memory.
  Result<Buffer> Allocate(size_t bytes) override {
    return shm_ != nullptr ? shm_->Allocate(bytes) : world_->Allocate(bytes);
  }

  Status AllReduce(const void* send, void* recv, size_t count, DataType type,
                   ReduceOp op) override {
    const int slices = shm_ == nullptr ? 1 : shm_->size();
    if (mode_ != Mode::kHierarchical || !uniform_ || count < static_cast<size_t>(slices)) {
      return Whole().AllReduce(send, recv, count, type, op);
    }
    // shm reduce_scatter -> each rail allreduces its slice -> shm all_gather.
    // avg is summed throughout and divided once, by the world size.
    const size_t es = DataTypeSize(type);
    const size_t slice = count / slices;
    const ReduceOp sum_op = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
    char* r = static_cast<char*>(recv);
    char* mine = r + shm_->rank() * slice * es;
    RETURN_IF_ERROR(shm_->ReduceScatter(send, mine, slice, type, sum_op));
    RETURN_IF_ERROR(rail_->AllReduce(mine, mine, slice, type, sum_op));
    if (op == ReduceOp::kAvg) DivideBy(mine, slice, type, size());
    RETURN_IF_ERROR(shm_->AllGather(mine, recv, slice, type));
    // The count % slices elements left over are too few to split.
    const size_t done = slice * slices;
    if (done == count) return Status::Ok();
    return world_->AllReduce(static_cast<const char*>(send) + done * es, r + done * es,
                             count - done, type, op);
  }

  Status Broadcast(const void* send, void* recv, size_t count, DataType type, int root) override {
    if (mode_ != Mode::kHierarchical || !uniform_) {
      return Whole().Broadcast(send, recv, count, type, root);
    }
    // The root's rail carries the data to one rank per node, which then
    // broadcasts it within its node.
    const int local_root = local_of_[root];
    if (shm_->rank() == local_root) {
      RETURN_IF_ERROR(
          rail_->Broadcast(rank() == root ? send : recv, recv, count, type, node_of_[root]));
    }
    return shm_->Broadcast(recv, recv, count, type, local_root);
  }

  Status Reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                int root) override {
    if (mode_ != Mode::kHierarchical || !uniform_) {
      return Whole().Reduce(send, recv, count, type, op, root);
    }
    // Each node reduces onto its rank on the root's rail, then the rail
    // reduces onto the root. Only the root has a result buffer; the other
    // rail ranks hold their node's partial result in scratch.
    const int local_root = local_of_[root];
    const ReduceOp sum_op = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
    const bool on_rail = shm_->rank() == local_root;
    void* partial = recv;
    if (on_rail && rank() != root) {
      scratch_.resize(count * DataTypeSize(type));
      partial = scratch_.data();
    }
    RETURN_IF_ERROR(shm_->Reduce(send, partial, count, type, sum_op, local_root));
    if (!on_rail) return Status::Ok();
    RETURN_IF_ERROR(rail_->Reduce(partial, partial, count, type, sum_op, node_of_[root]));
    if (rank() == root && op == ReduceOp::kAvg && count > 0) DivideBy(recv, count, type, size());
    return Status::Ok();
  }

  Status Barrier() override {
    if (mode_ != Mode::kHierarchical) return Whole().Barrier();
    RETURN_IF_ERROR(shm_->Barrier());
    if (shm_->rank() == 0) RETURN_IF_ERROR(rail_->Barrier());  // rail 0: the node leaders
    return shm_->Barrier();
  }

  // Not hierarchical: these run on the whole job as one flat communicator.
  Status AllGather(const void* send, void* recv, size_t count, DataType type) override {
    return Whole().AllGather(send, recv, count, type);
  }
  Status ReduceScatter(const void* send, void* recv, size_t count, DataType type,
                       ReduceOp op) override {
    return Whole().ReduceScatter(send, recv, count, type, op);
  }
  Status AllToAll(const void* send, void* recv, size_t count, DataType type) override {
    return Whole().AllToAll(send, recv, count, type);
  }
  Status SendRecv(const void* send, void* recv, size_t count, DataType type, int send_peer,
                  int recv_peer) override {
    return Whole().SendRecv(send, recv, count, type, send_peer, recv_peer);
  }
  Status Gather(const void* send, void* recv, size_t count, DataType type, int root) override {
    return Whole().Gather(send, recv, count, type, root);
  }
  Status Scatter(const void* send, void* recv, size_t count, DataType type, int root) override {
    return Whole().Scatter(send, recv, count, type, root);
  }
  Status HostAllReduce(std::span<double> values, ReduceOp op) override {
    return Whole().HostAllReduce(values, op);
  }

 private:
  // The communicator spanning every rank: shm on one node, MPI otherwise.
  Communicator& Whole() { return mode_ == Mode::kShmOnly ? *shm_ : *world_; }

  Mode mode_ = Mode::kMpiOnly;
  bool uniform_ = false;       // every node has the same number of ranks
  std::vector<int> node_of_;   // world rank -> node index
  std::vector<int> local_of_;  // world rank -> local rank
  CommunicatorPtr world_;      // MPI over every rank
  CommunicatorPtr shm_;        // this node's ranks; null in kMpiOnly
  CommunicatorPtr rail_;       // this local rank on every node; kHierarchical only
  std::vector<char> scratch_;
};

Status HierarchicalCommunicator::Init(MPI_Comm world, double shm_timeout_s) {
  ASSIGN_OR_RETURN(world_, CreateMpiCommunicator(world));
  ASSIGN_OR_RETURN(MPI_Comm node_comm, SplitByNode(world));
  ScopedComm node(node_comm);
  int local_rank = 0, local_size = 1;
  GANTRY_MPI(MPI_Comm_rank, node.get(), &local_rank);
  GANTRY_MPI(MPI_Comm_size, node.get(), &local_size);

  // Node leaders number the nodes in world-rank order of the leaders.
  ScopedComm leaders;
  GANTRY_MPI(MPI_Comm_split, world, local_rank == 0 ? 0 : MPI_UNDEFINED, world_->rank(),
             leaders.out());
  int node_info[2] = {0, 0};  // node index, number of nodes
  if (local_rank == 0) {
    GANTRY_MPI(MPI_Comm_rank, leaders.get(), &node_info[0]);
    GANTRY_MPI(MPI_Comm_size, leaders.get(), &node_info[1]);
  }
  GANTRY_MPI(MPI_Bcast, node_info, 2, MPI_INT, 0, node.get());

  const int n = world_->size();
  std::vector<int> table(3 * static_cast<size_t>(n));
  int mine[3] = {node_info[0], local_rank, local_size};
  GANTRY_MPI(MPI_Allgather, mine, 3, MPI_INT, table.data(), 3, MPI_INT, world);
  node_of_.resize(n);
  local_of_.resize(n);
  uniform_ = true;
  for (int r = 0; r < n; ++r) {
    node_of_[r] = table[3 * r];
    local_of_[r] = table[3 * r + 1];
    uniform_ = uniform_ && table[3 * r + 2] == local_size;
  }

  const int nodes = node_info[1];
  if (nodes == n) {
    mode_ = Mode::kMpiOnly;
    return Status::Ok();
  }
  mode_ = nodes == 1 ? Mode::kShmOnly : Mode::kHierarchical;
  ASSIGN_OR_RETURN(std::string session, AgreeOnSessionName(node.get()));
  ShmOptions shm;
  shm.session = session;
  shm.rank = local_rank;
  shm.size = local_size;
  shm.timeout_s = shm_timeout_s;
  ASSIGN_OR_RETURN(shm_, CreateShmCommunicator(shm));
  if (mode_ == Mode::kHierarchical) {
    ScopedComm rail;
    GANTRY_MPI(MPI_Comm_split, world, local_rank, node_info[0], rail.out());
    ASSIGN_OR_RETURN(rail_, CreateMpiCommunicator(rail.get()));
  }
  return Status::Ok();
}

}  // namespace

Result<CommunicatorPtr> CreateHierarchicalCommunicator(MPI_Comm world, double shm_timeout_s) {
  auto comm = std::make_unique<HierarchicalCommunicator>();
  RETURN_IF_ERROR(comm->Init(world, shm_timeout_s).WithContext("setting up the auto backend"));
  return CommunicatorPtr(std::move(comm));
}

Result<CommunicatorPtr> CreateShmCommunicatorOverMpi(MPI_Comm world, double shm_timeout_s) {
  int rank = 0, size = 1;
  GANTRY_MPI(MPI_Comm_rank, world, &rank);
  GANTRY_MPI(MPI_Comm_size, world, &size);
  ASSIGN_OR_RETURN(MPI_Comm node_comm, SplitByNode(world));
  ScopedComm node(node_comm);
  int local_rank = 0;
  GANTRY_MPI(MPI_Comm_rank, node.get(), &local_rank);
  int nodes = local_rank == 0 ? 1 : 0;
  GANTRY_MPI(MPI_Allreduce, MPI_IN_PLACE, &nodes, 1, MPI_INT, MPI_SUM, world);
  if (nodes > 1) {
    return FailedPrecondition("--backend shm needs every rank on one node, but the " +
                              std::to_string(size) + " ranks span " + std::to_string(nodes) +
                              " nodes; use --backend auto (shm within nodes, MPI between them) "
                              "or --backend mpi");
  }
  ASSIGN_OR_RETURN(std::string session, AgreeOnSessionName(world));
  ShmOptions shm;
  shm.session = session;
  shm.rank = rank;
  shm.size = size;
  shm.timeout_s = shm_timeout_s;
  return CreateShmCommunicator(shm);
}

}  // namespace gantry::comm::internal
