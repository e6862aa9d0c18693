// How the AVX2 convolutions split their output pixels into tasks (private to CKernels).
#ifndef SPOTTER_TILES_H
#define SPOTTER_TILES_H

#include <pthreadpool.h>
#include <stdint.h>

/// Tiles per task: about four tasks per thread so that threads finish together, at most 8 tiles,
/// at most `fit` (what a task's stack holds), at least one.
static inline int32_t spotter_tiles_per_task(int32_t tiles, pthreadpool_t pool, int32_t fit) {
    const int32_t threads = pool ? (int32_t)pthreadpool_get_threads_count(pool) : 1;
    int32_t per_task = (tiles + 4 * threads - 1) / (4 * threads);
    per_task = per_task > 8 ? 8 : per_task;
    per_task = per_task > fit ? fit : per_task;
    return per_task < 1 ? 1 : per_task;
}

/// Output pixels [*first, *last) of `task`.
static inline void spotter_task_pixels(size_t task, int32_t tiles_per_task, int32_t tile_pixels, int32_t pixels,
                                       int32_t* first, int32_t* last) {
    *first = (int32_t)task * tiles_per_task * tile_pixels;
    *last = *first + tiles_per_task * tile_pixels < pixels ? *first + tiles_per_task * tile_pixels : pixels;
}

#endif
