/* Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11). A
 * value is a pure function of (seed, stream, index): no state, so any
 * element of any case's inputs can be regenerated from the case name on
 * any platform, in any order, with any number of threads. */
#ifndef MOE_RNG_H
#define MOE_RNG_H

#include <stddef.h>
#include <stdint.h>
#include "moe/status.h"
#include "moe/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One Philox4x32-10 block: key (k0, k1), counter c[4] -> out[4]. */
void moe_philox4x32_10(const uint32_t c[4], uint32_t k0, uint32_t k1, uint32_t out[4]);

/* 32 random bits for element `index` of `stream` under `seed`. */
uint32_t moe_rng_u32(uint64_t seed, uint64_t stream, uint64_t index);

/* Uniform float in [0, 1): 24 random bits times 2^-24 (every value exact). */
float moe_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index);

/* Standard normal as float, by Marsaglia's polar method on double with a
 * logarithm written in plain arithmetic (no libm), so every platform gets
 * the same bits. */
float moe_rng_normal(uint64_t seed, uint64_t stream, uint64_t index);

/* Fills dst[0..n) with elements first, first+1, ...: uniform in [lo, hi),
 * or normal with mean and stddev. lo < hi and stddev >= 0 are required. */
moe_status moe_rng_fill_uniform(float *dst, size_t n, uint64_t seed, uint64_t stream,
                                uint64_t first, float lo, float hi);
moe_status moe_rng_fill_normal(float *dst, size_t n, uint64_t seed, uint64_t stream,
                               uint64_t first, float mean, float stddev);

/* A stable 64-bit stream id for a name (FNV-1a), so "moe.noep...w_gate"
 * addresses the same numbers everywhere. */
uint64_t moe_rng_stream_id(const char *name);

/* ---- seeded inputs (reference/rng_inputs.c): one copy of each rule for
 * the digest, the goldens and the tests ---- */

/* Fills host tensor t (f32, bf16 or f16) with normals of (seed, stream)
 * from index 0, rounded once to t's dtype under IEEE RNE. */
moe_status moe_tensor_fill_normal(moe_tensor *t, uint64_t seed, uint64_t stream, float mean, float stddev);

/* rows x k top-k ids in [0, E): slot (r, j) draws from index (r*k + j) << 8
 * upwards, is -1 with probability neg1_pct / 100 (top bits of the draw), and
 * with `distinct` redraws an id its row already holds (needs k <= E). */
moe_status moe_rng_topk_ids(int32_t *ids, int64_t rows, int k, int num_experts, uint64_t seed,
                            uint64_t stream, unsigned neg1_pct, int distinct);

#ifdef __cplusplus
}
#endif

#endif
