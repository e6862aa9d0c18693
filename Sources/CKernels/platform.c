// sched_getaffinity and CPU_COUNT need _GNU_SOURCE and macros Swift's Glibc module does not import.
#define _GNU_SOURCE
#include <sched.h>
#include "spotter_kernels.h"

int spotter_affinity_cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    return CPU_COUNT(&set);
}

#include <malloc.h>
#include <stdlib.h>

void spotter_keep_heap_compact(void) {
#ifdef M_ARENA_MAX
    // glibc's own environment variables, when given, win.
    if (!getenv("MALLOC_MMAP_THRESHOLD_")) mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    if (!getenv("MALLOC_ARENA_MAX")) mallopt(M_ARENA_MAX, 2);
#endif
}
