#include "execute/mpi.h"

#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <thread>

namespace twinpipe::execute {
namespace {

constexpr int kTag = 7;
constexpr int kHeaderInts = 5;  // kind, stage, micro-batch, rows, cols

}  // namespace

bool LaunchedByMpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(v)) return true;
  }
  return false;
}

MpiWorld InitMpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  }
  MpiWorld w;
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
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
  std::exit(code);
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

}  // namespace twinpipe::execute
