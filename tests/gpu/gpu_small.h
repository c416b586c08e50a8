/* MOE_GPU_SMALL=1: the GPU suites run only small shapes (each still calls
 * every stage entry and kernel variant, multi-block paths included where a
 * small shape reaches them), so compute-sanitizer's tools can run all of
 * them in minutes. Unset or 0: the suites are unchanged. */
#ifndef MOE_TESTS_GPU_SMALL_H
#define MOE_TESTS_GPU_SMALL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* 1 when MOE_GPU_SMALL is set to anything but "" or "0"; read once (the
 * banner reads it first, before any test runs) */
static inline int gpu_small(void)
{
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("MOE_GPU_SMALL");
        v = e && *e && !(e[0] == '0' && e[1] == 0);
    }
    return v;
}

/* v, or cap where small mode is on and v is larger */
static inline int64_t gpu_small_cap(int64_t v, int64_t cap) { return gpu_small() && v > cap ? cap : v; }

/* one line at the start of a suite */
static inline void gpu_small_banner(const char *suite)
{
    printf("%s: small mode %s (MOE_GPU_SMALL)\n", suite, gpu_small() ? "on: large shapes skipped or shrunk" : "off");
    fflush(stdout);
}

/* in a loop test: skip this index in small mode, with a note */
#define GPU_SMALL_SKIP(cond, what)                                                        \
    do {                                                                                  \
        if (gpu_small() && (cond)) {                                                      \
            printf("small mode: skipped %s %d (%s)\n", __func__, (int)_i, (what));        \
            return;                                                                       \
        }                                                                                 \
    } while (0)

#endif
