// What the twinpipe program sets for its whole process, once, before any
// command runs (the libraries leave process state alone). The benchmark
// programs set the same, so that they measure what the program runs.
//
//   twinpipe::cli::KeepFreedMemory();  // first thing in main()
#pragma once

#include <malloc.h>

#include <limits>

namespace twinpipe::cli {

// Tensors (execute) and plans (search) of similar size come and go by the
// thousand; glibc would hand large blocks back to the kernel (munmap, heap
// trimming) and fault them in again on the next use: a cost that varies step
// to step, that no training framework's caching allocator pays, and a fifth
// of a search's time. Keep freed memory in the process instead. One arena:
// a worker thread's own arena grows in 64 MiB heaps that glibc unmaps as
// soon as one is empty again, whatever the trim threshold, so a step that
// peaks past one heap faulted a fresh one in every step (11% of a CPU
// transformer step in the kernel, 1.6% with one arena). Workers allocate a
// tensor per op, not per element: the one lock is not contended.
inline void KeepFreedMemory() {
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  mallopt(M_ARENA_MAX, 1);
}

}  // namespace twinpipe::cli
