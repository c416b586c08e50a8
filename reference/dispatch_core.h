/* The per-element arithmetic of the dispatch / combine references, shared
 * with the CUDA conformance build (MOE_HD): the reference's loops call these
 * for every token, channel or expert, and so do the GPU kernels, so both run
 * the same f32 operations in the same order (DESIGN section 5). Pure
 * functions of their arguments: no allocation, no error reporting (the
 * callers validate everything first). */
#ifndef MOE_REF_DISPATCH_CORE_H
#define MOE_REF_DISPATCH_CORE_H

#include <math.h>
#include <stdint.h>
#include "elem.h"
#include "formats/e4m3.h"

/* 1 when the token's ids [0, K) hold an expert owned by `rank`. */
MOE_HD MOE_INLINE int moe_ep_in_rank_core(const int32_t *ids, int K, int experts_per_rank, int rank)
{
    for (int k = 0; k < K; k++)
        if (ids[k] >= 0 && ids[k] / experts_per_rank == rank) return 1;
    return 0;
}

/* ---- DeepEP normal combine (A.4) ---------------------------------------- */

/* Channel c of token g: rows[j] is g's received row on rank j or -1; x is
 * [R, N, H] of dtype d, bias0/bias1 NULL or [R*T, H]. Returns the f32 value
 * the reference stores (the caller's store rounds it once more). */
MOE_HD MOE_INLINE float moe_deepep_combine_channel(moe_dtype d, const void *x, const void *bias0,
                                                   const void *bias1, const int32_t *rows, int R,
                                                   int rpn, int64_t N, int64_t H, int64_t g,
                                                   int64_t c)
{
    int nodes = R / rpn;
    /* bias0 + bias1 first, a missing bias reading as 0 (A.4 step 1) */
    float v = (bias0 ? moe_s_load(d, bias0, g * H + c) : 0.0f) +
              (bias1 ? moe_s_load(d, bias1, g * H + c) : 0.0f);
    if (nodes == 1) {
        /* intranode: ranks ascending, one rounding (A.4 steps 2-3) */
        for (int j = 0; j < R; j++)
            if (rows[j] >= 0) v += moe_s_load(d, x, (j * N + rows[j]) * H + c);
    } else {
        /* internode: the NVL forwarder of each node sums its ranks without
         * bias and rounds; the RDMA receiver adds those partials to the
         * biases and rounds again (A.4) */
        for (int n = 0; n < nodes; n++) {
            float p = 0.0f;
            int any = 0;
            for (int j = n * rpn; j < (n + 1) * rpn; j++)
                if (rows[j] >= 0) {
                    p += moe_s_load(d, x, (j * N + rows[j]) * H + c);
                    any = 1;
                }
            if (any) v += moe_s_round_to(d, p);
        }
    }
    return v;
}

/* Weight k of a token: f32 sums over the same ranks, no rounding; rw is
 * [R, N, K]. Dispatch zeroed non-local weights, so this gives back the
 * originals. */
MOE_HD MOE_INLINE float moe_deepep_combine_weight(const float *rw, const int32_t *rows, int R,
                                                  int rpn, int64_t N, int64_t K, int64_t k)
{
    int nodes = R / rpn;
    float v = 0.0f;
    for (int n = 0; n < nodes; n++) {
        float p = 0.0f;
        for (int j = n * rpn; j < (n + 1) * rpn; j++)
            if (rows[j] >= 0) p += rw[(j * N + rows[j]) * K + k];
        v += p;
    }
    return v;
}

/* ---- weighted combine of DeepEP-LL and pplx (A.6, D) ---------------------- */

/* Channel c of token gt (of G*T): acc = +0, acc = fmaf(y_k, w_k, acc) for
 * k = 0..K-1 skipping -1 ids (nvcc contracts the upstream multiply-add).
 * y is [E, rows, H] flat, row_of[e*GT + gt] the row of (e, gt), every
 * selected pair having one (checked by the caller). */
MOE_HD MOE_INLINE float moe_ep_combine_weighted_channel(moe_dtype d, const void *y, int64_t rows,
                                                        int64_t H, const int32_t *ids,
                                                        const float *w, int K,
                                                        const int32_t *row_of, int64_t GT,
                                                        int64_t gt, int64_t c)
{
    float acc = 0.0f;
    for (int k = 0; k < K; k++) {
        int32_t e = ids[gt * K + k];
        if (e < 0) continue;
        int64_t base = ((int64_t)e * rows + row_of[e * GT + gt]) * H;
        acc = fmaf(moe_s_load(d, y, base + c), w[gt * K + k], acc);
    }
    return acc;
}

/* ---- DeepEP-LL FP8 cast (A.5 steps 1-4) ----------------------------------- */

/* DeepEP's kFinfoAmaxInvE4M3 = 1 / 448.0f as its f32 bits (0x3B124925). */
#define MOE_DEEPEP_LL_RCP448_BITS 0x3B124925u

/* One element's max-|f| step: a NaN never wins (the comparison is false). */
MOE_HD MOE_INLINE float moe_deepep_ll_amax_step(float amax, float f)
{
    float a = fabsf(f);
    return a > amax ? a : amax;
}

/* moe_deepep_ll_scales for a non-NaN amax (the cast's amax never is NaN):
 * the MOE_RULE_DEEPEP_LL case of the quant rules written out (the rule's
 * amax floor 1e-4f, default or round_scale). The GPU build uses this; the
 * GPU test checks it against moe_deepep_ll_scales. */
MOE_HD MOE_INLINE void moe_deepep_ll_scales_core(float amax, int round_scale, float *scale,
                                                 float *scale_inv)
{
    float a = fmaxf(amax, 1e-4f); /* kFP8Margin */
    float rcp448 = moe_u32_as_f32(MOE_DEEPEP_LL_RCP448_BITS);
    if (!round_scale) {
        *scale_inv = a * rcp448;
        *scale = 448.0f / a;
        return;
    }
    /* fast_log2_ceil on the bits, fast_pow2(n) = (n + 127) << 23 in 32-bit
     * wrap-around arithmetic (DeepEP utils.cuh) */
    uint32_t ib = moe_f32_as_u32(a * rcp448);
    int e = (int)((ib >> 23) & 0xFFu) - 127 + ((ib & 0x7FFFFFu) != 0);
    *scale_inv = moe_u32_as_f32((uint32_t)(127 + e) << 23);
    *scale = moe_u32_as_f32((uint32_t)(127 - e) << 23);
}

/* One element of the cast: e4m3 SAT RNE of f * scale, a NaN product taking
 * f's sign when f was NaN and + otherwise (moe_q_canon_nan). */
MOE_HD MOE_INLINE uint8_t moe_deepep_ll_cast_elem(float f, float scale)
{
    float v = f * scale;
    if (v != v) {
        uint32_t u = 0x7FC00000u;
        if (f != f) u = moe_f32_as_u32(f) | 0x00400000u;
        v = moe_u32_as_f32(u);
    }
    unsigned fl = 0;
    moe_policy sat = {MOE_RND_RNE, MOE_SAT}; /* __NV_SATFINITE: RNE, +-448 */
    return moe_s_round_pack_e4m3(v, sat, &fl);
}

/* ---- Hybrid-EP (A.7) ------------------------------------------------------ */

MOE_HD MOE_INLINE int64_t moe_hep_pad_up(int64_t n, int pad) { return (n + pad - 1) / pad * pad; }

/* Rank j's padded offsets: offset[l] = sum over earlier local experts of
 * their counts padded to pad; returns the padded total. */
MOE_HD MOE_INLINE int64_t moe_hep_rank_offsets(const int64_t *count, int E_loc, int pad,
                                               int64_t *offset)
{
    int64_t sum = 0;
    for (int l = 0; l < E_loc; l++) {
        offset[l] = sum;
        sum += moe_hep_pad_up(count[l], pad);
    }
    return sum;
}

/* Expert e's kept rows under the row limit and their padded count. */
MOE_HD MOE_INLINE int64_t moe_hep_kept(int64_t count, int64_t offset, int64_t limit)
{
    int64_t kept = limit - offset;
    return kept < 0 ? 0 : kept > count ? count : kept;
}

/* Rank j's count outputs: kept rows per local expert, padded, and the
 * overflow flag (anything dropped). Offsets and the limit are multiples of
 * pad, so padding a clamped count never crosses the limit. */
MOE_HD MOE_INLINE void moe_hep_fill_rank(const int64_t *count, const int64_t *offset, int j, int E_loc, int pad,
                                         int64_t limit, int32_t *tpe, int64_t *ppe, int32_t *overflow)
{
    for (int l = 0; l < E_loc; l++) {
        int64_t e = (int64_t)j * E_loc + l, kept = moe_hep_kept(count[e], offset[e], limit);
        tpe[e] = (int32_t)kept;
        ppe[e] = moe_hep_pad_up(kept, pad);
    }
    int64_t last = (int64_t)j * E_loc + E_loc - 1;
    overflow[j] = offset[last] + count[last] > limit;
}

/* Channel c of one token whose home node is `home`: rank j's rows for it
 * are m[j*mstride + l] (l < E_loc, -1 for none; the row_id_map [R, R*T,
 * E_loc] at the token gives mstride = R*T*E_loc), y is [R, N, H]. Rank j's
 * partial is its rows over local experts ascending, f32 from 0, rounded;
 * the home node's ranks add in local-rank order, then each other node's
 * partial (summed and rounded there) from home-1 downwards, wrapping; the
 * caller's store is the final rounding. */
MOE_HD MOE_INLINE float moe_hep_combine_channel(moe_dtype d, const void *y, const int32_t *m0,
                                                int64_t mstride, int R, int E_loc, int rpn, int home,
                                                int64_t N, int64_t H, int64_t c)
{
    int nodes = R / rpn;
    float acc = 0.0f;
    for (int step = 0; step < nodes; step++) {
        int n = ((home - step) % nodes + nodes) % nodes;
        float q = 0.0f;
        int any = 0;
        for (int j = n * rpn; j < (n + 1) * rpn; j++) {
            /* unpermute on rank j: its rows for g over local experts
             * ascending, f32 from 0, no prob multiply, rounded */
            const int32_t *m = m0 + j * mstride;
            float p = 0.0f;
            int has = 0;
            for (int l = 0; l < E_loc; l++)
                if (m[l] >= 0) {
                    p += moe_s_load(d, y, (j * N + m[l]) * H + c);
                    has = 1;
                }
            if (!has) continue;
            p = moe_s_round_to(d, p);
            if (step == 0)
                acc += p;
            else
                q += p;
            any = 1;
        }
        if (step > 0 && any) acc += moe_s_round_to(d, q);
    }
    return acc;
}

#endif
