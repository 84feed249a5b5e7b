#include "execute/walker.h"

#include <pthread.h>
#include <sched.h>


namespace twinpipe::execute::walk {

void PinToCore(int id) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<int>(static_cast<unsigned>(id) % cores), &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

std::string Where(const ir::Op& op, const Worker& w) {
  return w.replica == 0 ? fmt::format("device {}: {}", w.device, ir::OpToken(op))
                        : fmt::format("device {} (replica {} of device {}): {}", w.id, w.replica, w.device,
                                      ir::OpToken(op));
}

}  // namespace twinpipe::execute::walk
