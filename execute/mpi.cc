#include "execute/mpi.h"

#include <mpi.h>

#include <cstring>
#include <string>
#include <thread>

#include <fmt/format.h>

namespace twinpipe::execute {
namespace {

constexpr int kTag = 7;
constexpr int kHeaderInts = 5;  // kind, stage, micro-batch, rows, cols

}  // namespace

Result<MpiWorld> InitMpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  }
  int level = 0;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_MULTIPLE) {
    const char* names[] = {"MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED", "MPI_THREAD_SERIALIZED"};
    const bool known = level == MPI_THREAD_SINGLE || level == MPI_THREAD_FUNNELED || level == MPI_THREAD_SERIALIZED;
    return FailRuntime(fmt::format(
        "MPI grants thread level {}, but twinpipe's workers call MPI from several threads and need "
        "MPI_THREAD_MULTIPLE (an MPI library built with thread support, e.g. Open MPI with UCX or ob1)",
        !known ? std::to_string(level)
               : names[level == MPI_THREAD_SINGLE ? 0 : level == MPI_THREAD_FUNNELED ? 1 : 2]));
  }
  MpiWorld w;
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &w.local_rank);
  MPI_Comm_free(&node);
  return w;
}

void FinalizeMpi() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

void AbortMpi(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
}

void SumAcrossRanks(std::vector<double>& v) {
  MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}
void SumAcrossRanks(std::vector<float>& v) {
  MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}
void MaxAcrossRanks(std::vector<double>& v) {
  MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
}
void Barrier() { MPI_Barrier(MPI_COMM_WORLD); }
void BroadcastBytes(void* data, int bytes, int root) { MPI_Bcast(data, bytes, MPI_BYTE, root, MPI_COMM_WORLD); }

// A message on the wire: the header ints, then the floats.
struct MpiTransport::Pending {
  std::vector<char> bytes;
  MPI_Request request = MPI_REQUEST_NULL;
};

MpiTransport::~MpiTransport() {
  for (Pending* p : pending_) delete p;
}

MpiTransport::Status MpiTransport::Send(int /*src*/, int dst, Message m, Clock::time_point /*deadline*/) {
  if (aborted_) return Status::kAborted;
  auto* p = new Pending;
  const int header[kHeaderInts] = {static_cast<int>(m.kind), m.stage, m.micro_batch, m.rows, m.cols};
  p->bytes.resize(sizeof(header) + m.data.size() * sizeof(float));
  std::memcpy(p->bytes.data(), header, sizeof(header));
  std::memcpy(p->bytes.data() + sizeof(header), m.data.data(), m.data.size() * sizeof(float));
  MPI_Isend(p->bytes.data(), static_cast<int>(p->bytes.size()), MPI_BYTE, dst, kTag, MPI_COMM_WORLD, &p->request);
  pending_.push_back(p);
  // Let finished sends go.
  std::erase_if(pending_, [](Pending* q) {
    int done = 0;
    MPI_Test(&q->request, &done, MPI_STATUS_IGNORE);
    if (done) delete q;
    return done != 0;
  });
  return Status::kOk;
}

MpiTransport::Status MpiTransport::Recv(int src, int /*dst*/, Message& out, Clock::time_point deadline) {
  MPI_Status status;
  for (int flag = 0;;) {  // poll, so that a deadline can end the wait
    MPI_Iprobe(src, kTag, MPI_COMM_WORLD, &flag, &status);
    if (flag) break;
    if (aborted_) return Status::kAborted;
    if (Clock::now() >= deadline) return Status::kTimeout;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  int size = 0;
  MPI_Get_count(&status, MPI_BYTE, &size);
  std::vector<char> bytes(static_cast<size_t>(size));
  MPI_Recv(bytes.data(), size, MPI_BYTE, src, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  int header[kHeaderInts];
  std::memcpy(header, bytes.data(), sizeof(header));
  out.kind = static_cast<ir::OpKind>(header[0]);
  out.stage = header[1];
  out.micro_batch = header[2];
  out.rows = header[3];
  out.cols = header[4];
  out.data.resize((bytes.size() - sizeof(header)) / sizeof(float));
  std::memcpy(out.data.data(), bytes.data() + sizeof(header), out.data.size() * sizeof(float));
  return Status::kOk;
}

void MpiTransport::Flush() {
  for (Pending* p : pending_) {
    MPI_Wait(&p->request, MPI_STATUS_IGNORE);
    delete p;
  }
  pending_.clear();
}

MpiReplicaAverager::MpiReplicaAverager(MpiGroup group) {
  auto* comm = new MPI_Comm;
  MPI_Comm_split(MPI_COMM_WORLD, group.color >= 0 ? group.color : MPI_UNDEFINED, group.key, comm);
  if (*comm != MPI_COMM_NULL) MPI_Comm_size(*comm, &replicas_);
  comm_ = comm;
}

MpiReplicaAverager::~MpiReplicaAverager() {
  auto* comm = static_cast<MPI_Comm*>(comm_);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && *comm != MPI_COMM_NULL) MPI_Comm_free(comm);
  delete comm;
}

SyncStatus MpiReplicaAverager::Average(int /*replica*/, std::vector<double>& values, Clock::time_point deadline) {
  const size_t n = values.size();
  gathered_.resize(n * static_cast<size_t>(replicas_));
  MPI_Request request;
  MPI_Iallgather(values.data(), static_cast<int>(n), MPI_DOUBLE, gathered_.data(), static_cast<int>(n), MPI_DOUBLE,
                 *static_cast<MPI_Comm*>(comm_), &request);
  for (int done = 0;;) {  // poll, so that a deadline or an abort can end the wait
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) break;
    if (aborted_) return SyncStatus::kAborted;  // the job is ending: MPI_Abort follows
    if (Clock::now() >= deadline) return SyncStatus::kTimeout;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  std::vector<const double*> buffers(static_cast<size_t>(replicas_));
  for (int r = 0; r < replicas_; ++r) buffers[r] = gathered_.data() + n * static_cast<size_t>(r);
  AverageInReplicaOrder(buffers, 0, n, values.data());
  return SyncStatus::kOk;
}

}  // namespace twinpipe::execute
