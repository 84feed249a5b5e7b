// Multi-process runs: `mpirun -np D twinpipe execute CONFIG` runs device r
// of the schedule on rank r. MpiTransport carries messages between ranks
// (non-blocking sends, receives that poll until their deadline); the
// collectives below assemble one result on every rank.
//
//   Result<MpiWorld> w = InitMpi();  ...  FinalizeMpi();   (the program decides
//   whether it runs under MPI: twinpipe execute asks its launcher's environment)
#pragma once

#include <atomic>
#include <vector>

#include "execute/sync.h"
#include "execute/transport.h"
#include "ir/result.h"

namespace twinpipe::execute {

struct MpiWorld {
  int rank = 0, size = 1;
  int local_rank = 0;  // among the ranks on this rank's node (MPI_COMM_TYPE_SHARED): picks its GPU
};

// Initialises MPI once (calls from the main thread only) and says who we are.
// The executor's threads call MPI concurrently (a device's worker sends and
// receives while its all-reduce runs and the main thread waits), so it asks
// for MPI_THREAD_MULTIPLE and fails (runtime) when the library grants less.
Result<MpiWorld> InitMpi();
void FinalizeMpi();
// Ends every rank of the job with `code` (after a failure on one rank);
// MPI_Abort does not return where the MPI library keeps its promise.
void AbortMpi(int code);

// Element-wise sum (or max) over every rank, in place, on every rank.
void SumAcrossRanks(std::vector<double>& values);
void SumAcrossRanks(std::vector<float>& values);
void MaxAcrossRanks(std::vector<double>& values);
void Barrier();
// Copies `bytes` bytes from rank `root` to every rank (NCCL's unique id).
void BroadcastBytes(void* data, int bytes, int root);

class MpiTransport : public Transport {
 public:
  MpiTransport() = default;
  ~MpiTransport() override;
  // Device d is rank d. Sends return at once; their buffers live until sent.
  Status Send(int src, int dst, Message message, Clock::time_point deadline) override;
  Status Recv(int src, int dst, Message& out, Clock::time_point deadline) override;
  void Abort() override { aborted_ = true; }
  // Waits for every send still in flight (end of a step).
  void Flush();

 private:
  struct Pending;
  std::vector<Pending*> pending_;
  std::atomic<bool> aborted_{false};
};

// The replicas of pipeline device d are ranks d, D + d, 2D + d, ...: one
// communicator each (made collectively: every rank constructs one). Values
// are gathered from every replica and summed in replica order, as in one
// process, so threads and mpirun train to the same bits.
// Any other grouping: the ranks that give one `color` (>= 0) average
// together, in the order of their `key`s; a rank with color < 0 joins none
// (and may not call Average). Made collectively too.
struct MpiGroup {
  int color = -1;
  int key = 0;
};

class MpiReplicaAverager : public ReplicaAverager {
 public:
  MpiReplicaAverager(int rank, int pipeline_devices)
      : MpiReplicaAverager(MpiGroup{rank % pipeline_devices, rank / pipeline_devices}) {}
  explicit MpiReplicaAverager(MpiGroup group);
  ~MpiReplicaAverager() override;
  SyncStatus Average(int replica, std::vector<double>& values, Clock::time_point deadline) override;
  void Abort() override { aborted_ = true; }

 private:
  void* comm_;  // MPI_Comm, kept out of this header
  int replicas_ = 1;
  std::vector<double> gathered_;
  std::atomic<bool> aborted_{false};
};

}  // namespace twinpipe::execute
