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
    // glibc's own environment variable, when given, wins.
    if (!getenv("MALLOC_ARENA_MAX")) mallopt(M_ARENA_MAX, 2);
#endif
}

void spotter_release_free_memory(void) {
#ifdef M_ARENA_MAX
    malloc_trim(0);
#endif
}
