#include "execute/walker.h"

#include <malloc.h>
#include <pthread.h>
#include <sched.h>

#include <limits>

namespace twinpipe::execute::walk {

void PinToCore(int id) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<int>(static_cast<unsigned>(id) % cores), &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

// Tensors come and go every op; glibc would hand large blocks back to the
// kernel (munmap, heap trimming) and fault them in again on the next step, a
// cost that varies step to step and that no training framework's caching
// allocator pays. Keep freed memory in the process instead.
void KeepFreedMemory() {
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
}

std::string Where(const ir::Op& op, const Worker& w) {
  return w.replica == 0 ? fmt::format("device {}: {}", w.device, ir::OpToken(op))
                        : fmt::format("device {} (replica {} of device {}): {}", w.id, w.replica, w.device,
                                      ir::OpToken(op));
}

}  // namespace twinpipe::execute::walk
