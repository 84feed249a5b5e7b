// The CUDA backend's abort rule (comm_registry.h) on the CPU, with fake
// communicators: plain data that the fake abort and destroy write and the
// users read, so that ThreadSanitizer (make test-tsan runs Execute.*) sees
// any use that overlaps an abort.
#include "execute/cuda/comm_registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

namespace twinpipe::execute::cuda {
namespace {

struct FakeComm {
  bool aborted = false, destroyed = false;  // what the registry's calls did
  int aborts = 0, destroys = 0;
  int uses = 0;
};

CommRegistry<FakeComm*> Registry() {
  return CommRegistry<FakeComm*>([](FakeComm* c) { c->aborted = true, ++c->aborts; },
                                 [](FakeComm* c) { c->destroyed = true, ++c->destroys; });
}

// Each reader thread is one device's worker using its own communicators
// (NCCL: one thread per communicator), until the registry refuses; another
// thread aborts once every reader has used its communicators a while. No
// use may see an aborted communicator, each is aborted exactly once and not
// destroyed after, and every reader stops.
TEST(Execute, CommRegistryAbortsWhileWorkersUseItAndDestroysNothingAborted) {
  constexpr int kReaders = 4, kUsesBeforeAbort = 200;
  for (int trial = 0; trial < 20; ++trial) {
    SCOPED_TRACE(trial);
    std::vector<std::unique_ptr<FakeComm>> send(kReaders), recv(kReaders);
    FakeComm replica;
    std::vector<int> refused(kReaders, 0), used_aborted(kReaders, 0);
    {
      CommRegistry<FakeComm*> registry = Registry();
      for (int peer = 0; peer < kReaders; ++peer) {
        send[peer] = std::make_unique<FakeComm>();
        recv[peer] = std::make_unique<FakeComm>();
        registry.Add(CommRole::kSend, peer, send[peer].get());
        registry.Add(CommRole::kRecv, peer, recv[peer].get());
      }
      registry.Add(CommRole::kReplica, 0, &replica);
      std::atomic<int> warm{0};
      std::vector<std::thread> readers;
      for (int r = 0; r < kReaders; ++r) {
        readers.emplace_back([&, r] {
          auto use = [&](FakeComm* c) {
            used_aborted[r] += c->aborted || c->destroyed;
            ++c->uses;
          };
          for (int n = 0;; ++n) {
            const CommRole role = n % 2 ? CommRole::kRecv : CommRole::kSend;
            if (!registry.Use(role, r, use) || (r == 0 && !registry.Use(CommRole::kReplica, 0, use))) break;
            if (n == kUsesBeforeAbort) ++warm;
          }
          refused[r] = 1;
        });
      }
      std::thread aborter([&] {
        while (warm < kReaders) std::this_thread::yield();
        registry.Abort();
      });
      aborter.join();
      for (auto& t : readers) t.join();
      EXPECT_TRUE(registry.aborted());
    }  // the registry's destructor: destroys nothing, all were aborted
    for (int r = 0; r < kReaders; ++r) {
      EXPECT_EQ(refused[r], 1) << "reader " << r;
      EXPECT_EQ(used_aborted[r], 0) << "reader " << r << " used an aborted communicator";
      for (const FakeComm* c : {send[r].get(), recv[r].get()}) {
        EXPECT_GE(c->uses, kUsesBeforeAbort / 2);  // a reader alternates: 100 receives by its 200th use
        EXPECT_EQ(c->aborts, 1);
        EXPECT_EQ(c->destroys, 0);
      }
    }
    EXPECT_EQ(replica.aborts, 1);
    EXPECT_EQ(replica.destroys, 0);
  }
}

// An abort that comes while a call uses the registry waits for it to leave;
// then the communicators are aborted and the next use is refused.
TEST(Execute, CommRegistryDefersAnAbortUntilTheUseLeaves) {
  FakeComm a, b;
  CommRegistry<FakeComm*> registry = Registry();
  registry.Add(CommRole::kSend, 1, &a);
  registry.Add(CommRole::kRecv, 2, &b);
  bool ran = false;
  EXPECT_TRUE(registry.Use(CommRole::kSend, 1, [&](FakeComm* c) {
    registry.Abort();  // as another thread's failure would, mid-use
    EXPECT_FALSE(c->aborted);
    EXPECT_EQ(b.aborts, 0);
    ran = true;
  }));
  EXPECT_TRUE(ran);
  EXPECT_EQ(a.aborts, 1);
  EXPECT_EQ(b.aborts, 1);
  EXPECT_FALSE(registry.Use(CommRole::kRecv, 2, [&](FakeComm*) { ADD_FAILURE() << "used after the abort"; }));
  registry.Abort();  // again: nothing more
  EXPECT_EQ(a.aborts, 1);
  // A use that throws leaves too.
  FakeComm c;
  CommRegistry<FakeComm*> throwing = Registry();
  throwing.Add(CommRole::kReplica, 0, &c);
  EXPECT_THROW(throwing.Use(CommRole::kReplica, 0, [&](FakeComm*) {
    throwing.Abort();
    throw std::runtime_error("an NCCL error");
  }), std::runtime_error);
  EXPECT_EQ(c.aborts, 1);
}

// Without an abort, the owner destroys every communicator once; a missing
// one is an error naming it.
TEST(Execute, CommRegistryDestroysEachOnceWhenNotAborted) {
  FakeComm a, b, replica;
  {
    CommRegistry<FakeComm*> registry = Registry();
    registry.Add(CommRole::kSend, 1, &a);
    registry.Add(CommRole::kRecv, 0, &b);
    registry.Add(CommRole::kReplica, 0, &replica);
    EXPECT_TRUE(registry.Use(CommRole::kSend, 1, [](FakeComm* c) { ++c->uses; }));
    try {
      registry.Use(CommRole::kRecv, 3, [](FakeComm*) {});
      ADD_FAILURE() << "no receive communicator for device 3, yet used";
    } catch (const std::out_of_range& e) {
      EXPECT_STREQ(e.what(), "no receive communicator for device 3");
    }
    registry.Destroy();
  }  // and the destructor's Destroy does nothing more
  for (const FakeComm* c : {&a, &b, &replica}) {
    EXPECT_EQ(c->destroys, 1);
    EXPECT_EQ(c->aborts, 0);
  }
  EXPECT_EQ(a.uses, 1);
}

}  // namespace
}  // namespace twinpipe::execute::cuda
