/* moe-bench's device grid (`moe-bench --backend cuda-fast`): the fast
 * experts path (fast.h) timed with CUDA graphs at the standard shapes x
 * token counts x schemes, beside a cuBLAS grouped-GEMM peer pipeline and
 * ceilings measured in the same run (read streaming, device copy, dense
 * bf16 and fp8 GEMMs), written as a "bench-gpu" JSON file.
 *
 * The routing generator is here, inline, so the C tests check it without a
 * GPU and the torch peer script (which implements the same definition)
 * has fixed values to match:
 *   key = mix64(seed); token t's choices: expert 0 first when skewed and t
 *   is even, then mix64(key ^ ((t << 16) | a)) % E for a = 0, 1, ...,
 *   skipping repeats; weight (t, j) = 0.05 + (mix64(key ^ 0x5555... ^
 *   ((t << 16) | j)) >> 40) / 2^24 in f32 arithmetic (the quotient is
 *   exact, the sum with 0.05f rounds once). */
#ifndef MOE_OPTIMIZED_CUDA_BENCH_GPU_H
#define MOE_OPTIMIZED_CUDA_BENCH_GPU_H

#include <stdint.h>
#include <stdio.h>
#include "moe/portable.h"
#include "moe/quant.h"
#include "moe/shapes.h"

#ifdef __cplusplus
extern "C" {
#endif

/* SplitMix64's finalizer (Steele et al.), the bench's only hash (the
 * device fills of x and the weights use it too). */
static inline MOE_HD uint64_t moe_bench_mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ids [M, k] (distinct per token, needs k <= E) and w [M, k] of the input
 * set with this seed. */
static inline void moe_bench_routing(uint64_t seed, int skew, int M, int E, int k, int32_t *ids, float *w)
{
    uint64_t key = moe_bench_mix64(seed);
    for (int t = 0; t < M; t++) {
        int32_t *row = ids + (size_t)t * k;
        int n = 0;
        if (skew && t % 2 == 0) row[n++] = 0;
        for (uint64_t a = 0; n < k; a++) {
            int32_t e = (int32_t)(moe_bench_mix64(key ^ (((uint64_t)t << 16) | a)) % (uint64_t)E), seen = 0;
            for (int j = 0; j < n; j++) seen |= row[j] == e;
            if (!seen) row[n++] = e;
        }
        for (int j = 0; j < k; j++) {
            uint64_t h = moe_bench_mix64(key ^ 0x5555555555555555ull ^ (((uint64_t)t << 16) | (uint64_t)j));
            w[(size_t)t * k + j] = 0.05f + (float)(h >> 40) * (1.0f / 16777216.0f);
        }
    }
}

enum { MOE_BENCH_GPU_MAX_SHAPES = 8, MOE_BENCH_GPU_MAX_M = 16, MOE_BENCH_GPU_MAX_SCHEMES = 16 };

typedef struct {
    const moe_shape *shapes[MOE_BENCH_GPU_MAX_SHAPES];
    int nshapes;
    int ms[MOE_BENCH_GPU_MAX_M];
    int nm;
    moe_scheme schemes[MOE_BENCH_GPU_MAX_SCHEMES];
    int nschemes;
    int skew;           /* 1: half the tokens choose expert 0 first */
    uint64_t seed;      /* input set r uses seed + r */
    int reps, warmup;   /* timed runs per point (fewer when a point would pass ~2 s), untimed before them */
    int warm_ms;        /* untimed milliseconds of runs before those (none when warmup is 0): the power
                         * state every timing starts from (moe_bg_time, bench_gpu_internal.h) */
    int peer_cublas;    /* 1: time the cuBLAS peer (bf16 points); it also serves as the check's reference */
    const char *json_path; /* NULL: the table only */
} moe_bench_gpu_opts;

/* Runs the grid on the current CUDA device, prints a table on `out`, and
 * writes json_path (through json_path.tmp, renamed at the end). The caller
 * has checked the options and that a device exists. Returns the exit
 * status: 0 every point ok or skipped, 1 a point failed or the JSON could
 * not be written, 2 json_path cannot be created. */
int moe_bench_gpu_run(const moe_bench_gpu_opts *o, FILE *out, FILE *err);

#ifdef __cplusplus
}
#endif

#endif
