/* Helpers the CPU backend's stage files share (optimized/cpu/).
 *
 * Element conversions. Each fast encoder handles the common range with a
 * few integer or float operations and hands every other input (NaN, Inf,
 * subnormals, overflow) to the reference's own round-and-pack routine of
 * reference/formats/, so its result is the reference's code for every f32
 * input: tests/check_cpu_stages.c compares them over a sweep of the f32
 * patterns (and all 2^32 inputs were compared once when they were
 * written). Decoders are exact bit manipulations (bf16) or the reference's
 * inline decoders.
 *
 * Work splitting. OpenMP threads take static chunks of independent outputs
 * (rows, tokens, experts); counting sorts use per-thread histograms over
 * static chunks of the input and an ordered prefix sum over (bucket,
 * thread), so every position is the one a serial walk in input order
 * gives, whatever the thread count. No result depends on scheduling. */
#ifndef MOE_OPTIMIZED_CPU_INTERNAL_H
#define MOE_OPTIMIZED_CPU_INTERNAL_H

#include <stdint.h>
#include <string.h>
#include "formats/bf16.h"
#include "formats/e2m1.h"
#include "formats/e4m3.h"
#include "formats/f16.h"
#include "formats/int_round.h"
#include "moe/format.h"
#include "moe/tensor.h"

/* Problems below these sizes run on one thread, where a parallel region
 * would cost more than it saves: CPU_PAR_MIN elements of arithmetic or
 * copying (16384 by default), CPU_PAR_IDX_MIN entries of index building
 * (counting sorts, id scans: 262144 by default, which keeps routing-sized
 * problems serial). No result depends on them; tests lower both to 0 to
 * run every parallel path on small inputs (cpu_set_par_thresholds). */
extern int64_t cpu_par_min, cpu_par_idx_min;
#define CPU_PAR_MIN cpu_par_min
#define CPU_PAR_IDX_MIN cpu_par_idx_min
void cpu_set_par_thresholds(int64_t work, int64_t index);

/* ---- conversions ---------------------------------------------------------- */

/* f32 -> bf16, IEEE RNE (NONSAT): finite inputs round in the bits (the carry
 * of an overflow lands on the Inf code, as NONSAT wants); Inf and NaN go to
 * the reference routine. */
MOE_INLINE uint16_t cpu_enc_bf16(float x)
{
    uint32_t u = moe_f32_as_u32(x);
    if ((u & 0x7F800000u) == 0x7F800000u) {
        unsigned f = 0;
        return moe_s_round_pack_bf16(x, MOE_POLICY_IEEE_RNE, &f);
    }
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

MOE_INLINE float cpu_dec_bf16(uint16_t c) { return moe_u32_as_f32((uint32_t)c << 16); }

/* f32 -> f16, IEEE RNE: f16 normals below the overflow threshold 65520 in
 * the bits; the rest (subnormals, zero, overflow, Inf, NaN) by reference. */
MOE_INLINE uint16_t cpu_enc_f16(float x)
{
    uint32_t u = moe_f32_as_u32(x), a = u & 0x7FFFFFFFu;
    if (a >= 0x38800000u && a < 0x477FF000u) {
        uint32_t r = a + 0xFFFu + ((a >> 13) & 1u);
        return (uint16_t)(((u >> 16) & 0x8000u) | ((r >> 13) - (112u << 10)));
    }
    unsigned f = 0;
    return moe_s_round_pack_f16(x, MOE_POLICY_IEEE_RNE, &f);
}

MOE_INLINE float cpu_dec_f16(uint16_t c)
{
    uint32_t e = (c >> 10) & 0x1Fu;
    if (e != 0 && e != 0x1Fu)
        return moe_u32_as_f32(((uint32_t)(c & 0x8000u) << 16) | ((e + 112u) << 23) | ((uint32_t)(c & 0x3FFu) << 13));
    return moe_s_decode_f16(c);
}

/* f32 -> e4m3, SAT RNE: normals below 448 round in the bits; |x| below
 * 2^-6 (e4m3 subnormals, zero) round to a multiple of 2^-9 with the
 * 1.5 * 2^23 trick (x * 512 is exact); the rest by reference. */
MOE_INLINE uint8_t cpu_enc_e4m3(float x)
{
    uint32_t u = moe_f32_as_u32(x), a = u & 0x7FFFFFFFu;
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    if (a < 0x43E00000u) {
        if (a >= 0x3C800000u) {
            uint32_t r = a + 0x7FFFFu + ((a >> 20) & 1u);
            return (uint8_t)(sign | ((r >> 20) - (120u << 3)));
        }
        float t = moe_u32_as_f32(a) * 512.0f + 0x1.8p23f;
        return (uint8_t)(sign | (moe_f32_as_u32(t) & 0xFu));
    }
    unsigned f = 0;
    return moe_s_round_pack_e4m3(x, MOE_POLICY_E4M3_SAT_RNE, &f);
}

/* e4m3 and e2m1 decoding by table (cpu_common.c): the reference's values */
extern const uint32_t cpu_e4m3_bits[256], cpu_e2m1_bits[16];
MOE_INLINE float cpu_dec_e4m3(uint8_t c) { return moe_u32_as_f32(cpu_e4m3_bits[c]); }
MOE_INLINE float cpu_dec_e2m1(uint8_t c) { return moe_u32_as_f32(cpu_e2m1_bits[c & 0xF]); }

/* f32 -> e2m1 (always SAT), RNE: the value grid {0, .5, 1, 1.5, 2, 3, 4, 6}
 * by its midpoints, ties to the even code; NaN and Inf by reference. */
MOE_INLINE uint8_t cpu_enc_e2m1(float x)
{
    uint32_t u = moe_f32_as_u32(x), a = u & 0x7FFFFFFFu;
    if (a >= 0x7F800000u) {
        unsigned f = 0;
        return moe_s_round_pack_e2m1(x, MOE_POLICY_E2M1_SAT_RNE, &f);
    }
    float v = moe_u32_as_f32(a);
    /* the number of midpoints passed: ties (0.25, 1.25, 2.5, 5) stay on the even code */
    uint8_t c = (uint8_t)((v > 0.25f) + (v >= 0.75f) + (v > 1.25f) + (v >= 1.75f) + (v > 2.5f) + (v >= 3.5f) +
                          (v > 5.0f));
    return (uint8_t)(((u >> 28) & 0x8u) | c);
}

/* f32 -> int8 / int4, RNE with clamp, NaN -> 0: the reference's inline
 * integer rounding. */
MOE_INLINE int8_t cpu_enc_i8(float x)
{
    unsigned f = 0;
    return (int8_t)moe_s_round_to_int(x, MOE_RND_RNE, -128, 127, &f);
}
MOE_INLINE int8_t cpu_enc_i4(float x)
{
    unsigned f = 0;
    return (int8_t)moe_s_round_to_int(x, MOE_RND_RNE, -8, 7, &f);
}

/* Activation storage (f32, bf16, f16), as reference/elem.h's moe_s_load,
 * moe_s_store and moe_s_round_to. */
MOE_INLINE float cpu_load(moe_dtype d, const void *p, int64_t i)
{
    if (d == MOE_BF16) return cpu_dec_bf16(((const uint16_t *)p)[i]);
    if (d == MOE_F16) return cpu_dec_f16(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

MOE_INLINE void cpu_store(moe_dtype d, void *p, int64_t i, float x)
{
    if (d == MOE_BF16) ((uint16_t *)p)[i] = cpu_enc_bf16(x);
    else if (d == MOE_F16) ((uint16_t *)p)[i] = cpu_enc_f16(x);
    else ((float *)p)[i] = x;
}

MOE_INLINE float cpu_round_to(moe_dtype d, float x)
{
    if (d == MOE_BF16) return cpu_dec_bf16(cpu_enc_bf16(x));
    if (d == MOE_F16) return cpu_dec_f16(cpu_enc_f16(x));
    return x;
}

/* A row of n storage elements to f32 and back. */
void cpu_load_row(moe_dtype d, const void *p, int64_t first, int64_t n, float *dst);
void cpu_store_row(moe_dtype d, void *p, int64_t first, int64_t n, const float *src);

/* acc[i] = fmaf(w, v[i], acc[i]) (v_first: fmaf(v[i], w, acc[i]), the
 * operand order only decides which NaN a NaN result carries) for i < n:
 * one correctly rounded fused multiply-add per element, as C's fmaf (the
 * FMA instructions where the CPU has them: the same result). */
void cpu_fma_row(float *acc, float w, const float *v, int64_t n, int v_first);

/* ---- work splitting --------------------------------------------------------- */

/* [*lo, *hi): chunk `part` of `parts` equal chunks of [0, n). */
MOE_INLINE void cpu_chunk(int64_t n, int part, int parts, int64_t *lo, int64_t *hi)
{
    int64_t q = n / parts, r = n % parts;
    *lo = part * q + (part < r ? part : r);
    *hi = *lo + q + (part < r ? 1 : 0);
}

/* Stable counting sort by key. key[i] in [0, nb) or negative (skipped).
 * count[b] gets the number of items with key b; rank[i] the number of items
 * j < i with key[j] == key[i] (-1 for skipped items). MOE_ERR_NOMEM if the
 * per-thread histograms cannot be allocated. */
moe_status cpu_bucket_rank(const int32_t *key, int64_t n, int nb, int32_t *rank, int64_t *count);

/* The bucket key of each (token, slot) pair of ids [T, k] for the batched
 * layouts: its local expert (id - first_expert, in [0, L)), or -1 when the
 * expert is not local or an earlier slot of the row names the same expert
 * (a token takes one row per expert: the first slot's, as the reference
 * reads it). key has T * k entries. */
void cpu_local_expert_keys(const int32_t *ids, int64_t T, int64_t k, int first_expert, int64_t L, int32_t *key);

/* 1 when [a, a + na) and [b, b + nb) share a byte. */
MOE_INLINE int cpu_overlap(const void *a, size_t na, const void *b, size_t nb)
{
    const char *x = (const char *)a, *y = (const char *)b;
    return na && nb && x < y + nb && y < x + na;
}

/* dst = src for n bytes, in parallel chunks when large (no overlap). */
void cpu_memcpy(void *dst, const void *src, size_t n);
/* dst = 0 for n bytes, in parallel chunks when large. */
void cpu_memzero(void *dst, size_t n);

/* ---- dispatch (optimized/cpu/dispatch_common.c) ------------------------------ */

/* moe_ep_batched_positions of reference/dispatch_common.c as a counting
 * sort: pos[(g*T + t)*K + k] = the pair's row in its expert in the walk
 * (groups ascending, sending ranks g*dp + i ascending, their tokens
 * ascending), -1 for a -1 id; count[e] = rows of expert e. */
moe_status cpu_ep_batched_positions(const int32_t *ids, int64_t G, int64_t T, int K, int dp, int num_experts,
                                    int32_t *pos, int64_t *count);

/* moe_ep_combine_weighted of reference/dispatch_common.c on validated
 * arguments, tokens in parallel. Returns 0 without writing when a pair has
 * no row (the caller lets the reference report it), -1 when out of
 * memory, 1 when done. */
int cpu_ep_combine_weighted(const moe_tensor *y, const int32_t *row_of, const moe_tensor *topk_ids,
                            const moe_tensor *topk_weights, moe_tensor *out);

#endif
