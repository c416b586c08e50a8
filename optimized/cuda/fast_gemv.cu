/* The one-token forward (fast.h plan.gemv) as two matrix-vector kernels.
 *
 * Why: at M = 1 the slot-layout forward of the 8-bit schemes is five
 * dependent kernels (x's quantization, GEMM1, h's quantization, GEMM2,
 * the combine) at a few us each, and its GEMM1 streams 192 CTAs of 128 KB
 * on 132 SMs, so the SMs with two finish last: Qwen3-30B-A3B fp8 took
 * 28 us against an 8.3 us floor (NOTES.md v26: ncu GEMM1 12 us, GEMM2 9,
 * each quantization 4). Here:
 *
 *   GEMV1   each CTA quantizes x itself (one row: the reference's rule and
 *           encoding, fast_quant.cuh, so the same codes and scales), then
 *           takes units of 8 h columns of one slot (its 8 gate and 8 up
 *           weight rows), its warps over parts of K (parts_for), and writes
 *           h (gated activation);
 *   GEMV2   a CTA per 16 output columns; its warps quantize the slots' h
 *           rows into shared memory, each warp multiplies one slot's weight
 *           rows over a part of K, and the CTA applies the router weights and
 *           sums the slots (deterministic: y rounded, then the slot-order f32
 *           sum of the combine kernel; atomic variant: the f32 sum of w * v),
 *           so no combine kernel.
 *
 * The products run on mma.sync (m16n8k32 e4m3 / s8, m16n8k16 bf16) with
 * the weight rows as A straight from global loads into the fragment
 * registers and the token as column 0 of B (the other 7 columns are
 * zeros). A lane loads 16-byte pieces of its two rows (g and g + 8) and
 * the pieces' bytes stand for the k positions the fragment layout gives
 * the lane; the token's bytes are taken at the same offsets, so each
 * product pairs the same k in both operands and a chunk of 128 bytes is
 * four mma instructions (k order within a step does not enter the
 * accumulation model: fast.h moe_cuda_fx_model, the mma.sync one, k_step
 * products a step; e4m3's steps are 16, the chip's f16 HMMA).
 * The block scheme's 128-groups are exactly those chunks, promoted as
 * fast_gemm.cuh's ktile_promote does.
 *
 * The 4-bit weight schemes (w4a16_g128, mxfp4_w4a16) take the same two
 * kernels with bf16 operands: a lane's 16 bytes of a row are 32 codes,
 * turned in registers into bf16 pairs of codes j and j + 4 of each word
 * (fast_w4.cuh's decode-tile form, w4_pair_int / w4_pair_mx) and paired
 * with the token's values at the same k (a byte permute of its bf16
 * words), eight m16n8k16 MMAs a piece. int4: a 64-byte half of a chunk is
 * one 128-group, its sums times the group's f32 scale (acc = fma(part, s,
 * acc), the decode tiles' deferred scale); e2m1: a lane's piece is one
 * 32-group, its E8M0 scale applied in the conversion (exact, the
 * reference's WEIGHT_TO_ACT values). So the GEMVs multiply what the decode
 * tiles multiply (fast.cu moe_cuda_fx_model: dev for int4). */
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <stdint.h>
#include <type_traits>
#include "fast_gemv.h"
#include "fast_quant.cuh"
#include "reference/act_core.h"

namespace fx {
namespace {

constexpr int GV_U = 2;     /* 128-byte chunks a warp loads a row before it multiplies the ones before */
/* K's parts a unit (one warp each) over a weight row of rowb bytes: about 4 chunks a warp, so a warp's stream
 * is a few memory round trips (with one warp a unit of 16 chunks, ncu put Qwen3-30B-A3B's fp8 GEMV1 at 14 us
 * and 1.75 TB/s, NOTES.md v28; 1, 2, 3, 6 or 8 chunks a warp timed no faster there, v29), at most 8, and at
 * most ceil(K / 128): each part's sum adds one f32 rounding, within gemm_D's ceil(K / 128) (fast.cu's model) */
int parts_for(int rowb, int K, int most)
{
    const int nch = (rowb + 127) / 128, k128 = (K + 127) / 128;
    int ks = (nch + 3) / 4;
    ks = ks > most ? most : ks;
    return ks > k128 ? k128 : ks < 1 ? 1 : ks;
}

__device__ __forceinline__ uint4 ld_stream(const uint8_t *p)
{
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}
__device__ __forceinline__ uint32_t word(const uint4 &v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

/* The activation quantization of R rows (row r at src + r * ld; n values
 * a row; bit r of valid: the row exists) into shared codes dst (row r at
 * dst + r * n) and scales ssc (one a row, one for all, or one a 128-group
 * at r * n / 128 + g), by the CTA's warps: warp w takes row w % R and part
 * w / R of S = nw / R parts of 128-chunks (parts_of); the statistics of a
 * row (ROW) or of all rows (TENSOR) are reduced across warps in s_part,
 * a 128-group's (GROUP) inside its warp. Codes and scales are the
 * reference's (quant_rows_kernel's steps, fast_quant.cuh). after_loads
 * runs in every thread once its first loads of the rows are out (GEMV1
 * starts its weight chunks there, so they queue behind x's loads). */
__device__ __forceinline__ void parts_of(int n, int S, int q, int &lo, int &hi)
{
    const int nch = (n + 127) / 128;
    lo = q * nch / S * 128, hi = min((q + 1) * nch / S * 128, n);
}

template <int GR, bool E4, int QH = 2, class F>
__device__ void quant_cta(const __nv_bfloat16 *src, int64_t ld, int R, int n, unsigned valid, const moe_quant_spec &spec,
                          uint8_t *dst, float *ssc, float *s_part, F after_loads)
{
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5, S = nw / R;
    const int r = w % R, q = w / R;
    const bool mine = q < S && (valid >> r & 1u);
    int lo = 0, hi = 0;
    if (mine) parts_of(n, S, q, lo, hi);
    const __nv_bfloat16 *row = src + r * ld;
    uint8_t *qr = dst + (int64_t)r * n;
    moe_q_group grp;
    qstep qs;
    if constexpr (GR == MOE_GRAN_GROUP) {
        /* n % 128 == 0 (gemv_fits). Eight lanes a 128-group, sixteen values a lane: a warp's part four groups
         * at a time, their chains (the shuffles, the rule's divisions, the step's set-up) side by side. With a
         * warp a group, one after another, they were the block scheme's M = 1 gap: Qwen3-30B-A3B 25.0 -> 22.3 us
         * (NOTES.md v60; its GEMV2 had taken 2 us longer with one part a slot, six groups a warp, v43) */
        const int gl = lane >> 3, li = lane & 7;
        uint32_t v[8];
        auto load = [&](int c) {
            const uint4 *p = (const uint4 *)(row + c) + 2 * li;
            const uint4 z = make_uint4(0, 0, 0, 0), a = c < hi ? __ldcg(p) : z, b = c < hi ? __ldcg(p + 1) : z;
            v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
        };
        load(lo + 128 * gl);
        after_loads();
        for (int b = lo; b < hi; b += 4 * 128) { /* the same trip count in every lane: the shuffles take the warp */
            const int c = b + 128 * gl;
            if (b != lo) load(c);
            float sc;
            uint32_t code[4];
            group128_codes<E4, 8>(v, spec, &sc, code);
            if (c < hi) {
                if (li == 0) ssc[r * (n / 128) + c / 128] = sc;
                ((uint4 *)(qr + c))[li] = make_uint4(code[0], code[1], code[2], code[3]);
            }
        }
        __syncthreads();
        return;
    }
    float ai = 0.0f, mx = -MOE_M_INF, mn = MOE_M_INF;
    int nan = 0;
    /* the part's first QH chunks a lane stay in registers for the codes: one trip to L2 for parts up to
     * 256 QH values (GEMV1's at Qwen3-30B-A3B's sizes 512: QH 2; GEMV2's one part a slot 768: QH 3, NOTES.md v61) */
    uint4 hold[QH];
#pragma unroll
    for (int k = 0; k < QH; k++) {
        const int c = lo / 8 + lane + 32 * k;
        hold[k] = c < hi / 8 ? __ldcg((const uint4 *)row + c) : make_uint4(0, 0, 0, 0);
    }
    after_loads();
    auto add8 = [&](const uint4 &v) {
        float f[8];
        bf16x8_f32(v, f);
#pragma unroll
        for (int i = 0; i < 8; i++) stats_add(f[i], ai, mx, mn, nan);
    };
#pragma unroll
    for (int k = 0; k < QH; k++)
        if (lo / 8 + lane + 32 * k < hi / 8) add8(hold[k]);
    for (int c = lo / 8 + lane + 32 * QH; c < hi / 8; c += 32) add8(__ldcg((const uint4 *)row + c));
    warp_stats(ai, mx, mn, nan);
    if (lane == 0) s_part[4 * w] = ai, s_part[4 * w + 1] = mx, s_part[4 * w + 2] = mn, s_part[4 * w + 3] = __int_as_float(nan);
    __syncthreads();
    if (mine) {
        /* maxima are exact in any order: the parts' statistics combine to the row's (or all rows') */
        ai = 0.0f, mx = -MOE_M_INF, mn = MOE_M_INF, nan = 0;
        for (int v = 0; v < R * S; v++) {
            if (GR == MOE_GRAN_ROW ? v % R != r : !(valid >> (v % R) & 1u)) continue;
            ai = fmaxf(ai, s_part[4 * v]), mx = fmaxf(mx, s_part[4 * v + 1]), mn = fminf(mn, s_part[4 * v + 2]);
            nan |= __float_as_int(s_part[4 * v + 3]);
        }
        /* TENSOR: the amax over the rows with NaN skipped (amax_kernel, GEMM1's amax_out); its NaN flag (here over
         * all rows, a superset of the row's) only picks the element step's form, both give the reference's codes */
        const moe_q_stats st = GR == MOE_GRAN_TENSOR ? group_stats(ai, ai, -ai, 0) : group_stats(ai, mx, mn, nan);
        moe_qc_rule_dynamic(&spec, &st, 1.0f, &grp);
        if (lane == 0 && q == 0) ssc[GR == MOE_GRAN_TENSOR ? 0 : r] = grp.scale;
        const bool fast = qstep_make(spec, grp, ai, nan, qs);
        with_form(fast, spec.q_op == MOE_QOP_DIV, [&](auto div, auto fst) {
            auto one = [&](const uint4 &v, int c) {
                float f[8];
                bf16x8_f32(v, f);
                uint32_t cw[2] = {0, 0};
                codes_of<8, E4, decltype(div)::value, decltype(fst)::value>(f, qs, spec, grp, cw);
                ((uint2 *)qr)[c] = make_uint2(cw[0], cw[1]);
            };
#pragma unroll
            for (int k = 0; k < QH; k++)
                if (lo / 8 + lane + 32 * k < hi / 8) one(hold[k], lo / 8 + lane + 32 * k);
            for (int c = lo / 8 + lane + 32 * QH; c < hi / 8; c += 32) one(__ldcg((const uint4 *)row + c), c);
        });
    }
    __syncthreads();
}

/* a bf16 row part copied into shared memory (bf16's operand: no quantization). A thread's first CH pieces are
 * loaded together before after_loads (as quant_cta's held chunks), then stored: one trip to L2 where a row part
 * is at most CH pieces a thread. A loop of load-then-store pieces is one trip a piece, since each store waits
 * for its load before the next load issues: GEMV1's x at the 4-bit schemes' 2 warps a unit is 4 pieces a thread
 * at Qwen3-30B-A3B's H 2048, GEMV2's h 3 (the 4-bit schemes, 8 warps) or 2 (bf16, 16 warps) */
template <int CH, class F>
__device__ void copy_cta(const __nv_bfloat16 *src, int64_t ld, int R, int n, unsigned valid, uint8_t *dst, F after_loads)
{
    auto ok = [&](int i) { return i < R * (n / 8) && (valid >> (i / (n / 8)) & 1u); };
    auto at = [&](int i) { return (const uint4 *)(src + (i / (n / 8)) * ld) + i % (n / 8); };
    auto put = [&](int i, const uint4 &v) { ((uint4 *)(dst + (int64_t)(i / (n / 8)) * n * 2))[i % (n / 8)] = v; };
    const int i0 = threadIdx.x, nt = blockDim.x;
    uint4 hold[CH];
#pragma unroll
    for (int k = 0; k < CH; k++) hold[k] = ok(i0 + k * nt) ? __ldcg(at(i0 + k * nt)) : make_uint4(0, 0, 0, 0);
    after_loads();
#pragma unroll
    for (int k = 0; k < CH; k++)
        if (ok(i0 + k * nt)) put(i0 + k * nt, hold[k]);
    for (int i = i0 + CH * nt; i < R * (n / 8); i += nt)
        if (ok(i)) put(i, __ldcg(at(i)));
    __syncthreads();
}

/* Two weight rows (A rows g and g + 8 of the warp's m16 tile) against the
 * token's operand b (shared), over 128-byte chunks [c_lo, c_hi) of rows of
 * rowb bytes: lane (g, t) holds bytes [128c + 64h + 16t, + 16) of its rows
 * for h = 0, 1, step (h, s) takes word 2s as the fragment's low k
 * positions and word 2s + 1 as the high ones (a0 / a2, b0 / b1), the same
 * bytes of b in lanes 0-3 (column 0). GV_U chunks in registers, the next
 * GV_U loaded before the current ones are multiplied. QS_KTILE: each chunk
 * is a 128-group, its sums promoted with the group's scales (sa(c): the
 * token's, swa / swb: the rows'). */
template <class T, int QS> struct rowpair {
    static constexpr bool W4 = QS >= QS_W4_INT; /* 4-bit codes, T = bf16 (the token's operand) */
    /* a weight row's bytes over K (4-bit: two codes a byte; else the operand's element, as wrow_bytes) */
    static __device__ __forceinline__ int row_bytes(int K) { return W4 ? K / 2 : K * (int)sizeof(T); }
    const uint8_t *ra, *rb;
    int rowb, c_lo, c_hi; /* rowb: a weight row's bytes */
    uint4 a[GV_U][2], b[GV_U][2];
    float swa[GV_U], swb[GV_U];
    uint32_t s4[GV_U][2][2]; /* W4: half h's scale of each row: int4 f32 bits (the 128-group), e2m1 the lane's E8M0 code */
    const float *wsa, *wsb; /* QS_KTILE: the rows' block scales at chunk 0; W4: the rows' scales at k 0 */

    /* the rows' scales (QS_KTILE, W4) of expert e, weight rows na and nb of K-wide rows */
    __device__ __forceinline__ void scales_at(const gemm_params &p, int e, int na, int nb, int K)
    {
        if constexpr (QS == QS_KTILE) wsa = p.w_scale + w_sidx(p, e, na), wsb = p.w_scale + w_sidx(p, e, nb);
        if constexpr (W4)
            wsa = (const float *)w4_scale_row<QS>(p.w_scale, (int64_t)e * p.N + na, K),
            wsb = (const float *)w4_scale_row<QS>(p.w_scale, (int64_t)e * p.N + nb, K);
    }

    __device__ __forceinline__ void load(int c0)
    {
        const int t = threadIdx.x & 3;
#pragma unroll
        for (int u = 0; u < GV_U; u++) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int off = (c0 + u) * 128 + h * 64 + 16 * t;
                const bool ok = c0 + u < c_hi && off < rowb;
                a[u][h] = ok ? ld_stream(ra + off) : make_uint4(0, 0, 0, 0);
                b[u][h] = ok ? ld_stream(rb + off) : make_uint4(0, 0, 0, 0);
            }
            if constexpr (QS == QS_KTILE) {
                const bool ok = c0 + u < c_hi;
                swa[u] = ok ? wsa[c0 + u] : 0.0f, swb[u] = ok ? wsb[c0 + u] : 0.0f;
            }
            /* W4: a half (64 bytes, 128 k) is int4's group 2c + h; a lane's piece e2m1's group 8c + 4h + t */
            if constexpr (W4)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int off = (c0 + u) * 128 + h * 64 + 16 * t;
                const bool ok = c0 + u < c_hi && off < rowb;
                if constexpr (QS == QS_W4_INT) {
                    s4[u][h][0] = ok ? __float_as_uint(__ldg(wsa + 2 * (c0 + u) + h)) : 0u;
                    s4[u][h][1] = ok ? __float_as_uint(__ldg(wsb + 2 * (c0 + u) + h)) : 0u;
                } else if constexpr (QS == QS_W4_MX) {
                    s4[u][h][0] = ok ? __ldg((const uint8_t *)wsa + off / 16) : 0u;
                    s4[u][h][1] = ok ? __ldg((const uint8_t *)wsb + off / 16) : 0u;
                }
            }
        }
    }

    /* W4: piece (u, h) of rows a / b (codes ca / cb) against the token's 32 bf16 values at its k (x: 64
     * bytes, k order): MMA (q, i) takes codes 2i and 2i + 1 of word q as a0 / a2 (each a pair of codes j,
     * j + 4: w4_pair_*), the token's values at those k as b0 / b1 */
    __device__ __forceinline__ void w4_piece(float *d, const uint4 &ca, const uint4 &cb, const uint4 (&x)[4], const uint32_t (&sr)[2])
    {
        uint32_t fa1 = 0, fa2 = 0, fb1 = 0, fb2 = 0;
        bool twa = false, twb = false;
        if constexpr (QS == QS_W4_MX) twa = w4_mx_factors(sr[0], &fa1, &fa2), twb = w4_mx_factors(sr[1], &fb1, &fb2);
        auto pair = [&](uint32_t w, int j, bool rb) {
            if constexpr (QS == QS_W4_INT) return w4_pair_int(w, j);
            else return rb ? w4_pair_mx(w, j, fb1, fb2, twb) : w4_pair_mx(w, j, fa1, fa2, twa);
        };
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const uint32_t wa = word(ca, q), wb = word(cb, q);
#pragma unroll
            for (int i = 0; i < 2; i++) {
                const uint32_t af[4] = {pair(wa, 2 * i, false), pair(wb, 2 * i, true), pair(wa, 2 * i + 1, false),
                                        pair(wb, 2 * i + 1, true)};
                const uint32_t bf[2] = {__byte_perm(word(x[q], i), word(x[q], 2 + i), 0x5410u),
                                        __byte_perm(word(x[q], i), word(x[q], 2 + i), 0x7632u)};
                tc<T>::mma(d, af, bf);
            }
        }
    }

    template <class SA> __device__ __forceinline__ void run(const uint8_t *bop, float *acc, SA sa)
    {
        const int lane = threadIdx.x & 31, t = lane & 3;
        const bool col0 = lane < 4;
        for (int c0 = c_lo; c0 < c_hi; c0 += GV_U) {
            uint4 ca[GV_U][2], cb[GV_U][2];
            float csa[GV_U], csb[GV_U];
            uint32_t cs4[GV_U][2][2];
#pragma unroll
            for (int u = 0; u < GV_U; u++) {
                ca[u][0] = a[u][0], ca[u][1] = a[u][1], cb[u][0] = b[u][0], cb[u][1] = b[u][1];
                csa[u] = swa[u], csb[u] = swb[u];
                if constexpr (W4)
#pragma unroll
                    for (int h = 0; h < 2; h++) cs4[u][h][0] = s4[u][h][0], cs4[u][h][1] = s4[u][h][1];
            }
            if (c0 + GV_U < c_hi) load(c0 + GV_U);
#pragma unroll
            for (int u = 0; u < GV_U; u++) {
                if (c0 + u >= c_hi) break;
                if constexpr (W4) {
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int off = (c0 + u) * 128 + h * 64 + 16 * t;
                        uint4 x[4];
#pragma unroll
                        for (int i = 0; i < 4; i++)
                            x[i] = off < rowb ? *(const uint4 *)(bop + 4 * off + 16 * i) : make_uint4(0, 0, 0, 0);
                        if constexpr (QS == QS_W4_INT) { /* the group's sums times its scale (the decode tiles' DEFER) */
                            float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                            w4_piece(part, ca[u][h], cb[u][h], x, cs4[u][h]);
                            acc[0] = fmaf(part[0], __uint_as_float(cs4[u][h][0]), acc[0]);
                            acc[2] = fmaf(part[2], __uint_as_float(cs4[u][h][1]), acc[2]);
                        } else {
                            w4_piece(acc, ca[u][h], cb[u][h], x, cs4[u][h]);
                        }
                    }
                    continue;
                }
                float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                float *d = QS == QS_KTILE ? part : acc;
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int off = (c0 + u) * 128 + h * 64 + 16 * t;
                    const uint4 bx = col0 && off < rowb ? *(const uint4 *)(bop + off) : make_uint4(0, 0, 0, 0);
#pragma unroll
                    for (int s = 0; s < 2; s++) {
                        const uint32_t af[4] = {word(ca[u][h], 2 * s), word(cb[u][h], 2 * s), word(ca[u][h], 2 * s + 1),
                                                word(cb[u][h], 2 * s + 1)};
                        const uint32_t bf[2] = {word(bx, 2 * s), word(bx, 2 * s + 1)};
                        tc<T>::mma(d, af, bf);
                    }
                }
                if constexpr (QS == QS_KTILE) { /* ktile_promote's order: acc + (t * a_scale) * w_scale */
                    const float s = sa(c0 + u);
                    acc[0] = acc[0] + (part[0] * s) * csa[u];
                    acc[2] = acc[2] + (part[2] * s) * csb[u];
                }
            }
        }
    }
};

/* GEMV1: x's operand in shared memory (8-bit: quantized by this CTA),
 * then units of 8 h columns (slot j, columns 8 cg .. 8 cg + 7), a unit a
 * CTA at a time, its warps over K's parts (parts_for). Lane (g, 0) of each
 * warp ends with its part's sums of the gate row (c[0]) and the up row
 * (c[2]) of h column 8 cg + g; warp 0 adds the parts in order and runs
 * fast_gemm.cuh's gated epilogue per element: (sum * a_scale) * w_scale,
 * g and u rounded to bf16, the reference's activation (moe_act_gated), h
 * rounded. The next unit's first chunks stream during the epilogue. */
template <class T, int QS, int GR>
__global__ void __launch_bounds__(GV_MAXW * 16, 2) gemv1_kernel(gemm_params p, gemv_io io)
{
    extern __shared__ __align__(16) uint8_t gsm[];
    __shared__ float s_part[4 * GV_MAXW];
    __shared__ float s_sum[GV_MAXW][16];
    constexpr bool Q8 = !std::is_same<T, __nv_bfloat16>::value;
    const int H = p.K, I = p.I, rowb = rowpair<T, QS>::row_bytes(H), ucols = I / 8, units = p.topk * ucols;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, S = blockDim.x >> 5;
    uint8_t *xop = gsm;
    float *ssx = (float *)(gsm + ((H * (int)sizeof(T) + 15) & ~15));
    rowpair<T, QS> rp;
    rp.rowb = rowb;
    {
        int lo, hi;
        parts_of(rowb, S, w, lo, hi);
        rp.c_lo = lo / 128, rp.c_hi = (hi + 127) / 128;
    }
    /* the unit's rows and, for warp 0's epilogue, the weight scales of its h column (loaded with the chunks) */
    float swg = 1.0f, swu = 1.0f;
    auto start = [&](int unit) {
        const int j = unit / ucols, col = (unit % ucols) * 8 + g, e = p.slot_ids[j];
        const bool ok = e >= 0 && e < p.E;
        const int ev = ok ? e : 0;
        rp.ra = (const uint8_t *)p.w + ((int64_t)ev * 2 * I + col) * rowb;
        rp.rb = rp.ra + (int64_t)I * rowb;
        rp.scales_at(p, ev, col, I + col, H);
        if (ok) {
            rp.load(rp.c_lo);
            if (QS == QS_EPILOGUE && p.w_scale && w == 0 && (lane & 3) == 0)
                swg = p.w_scale[w_sidx(p, e, col)], swu = p.w_scale[w_sidx(p, e, I + col)];
        }
        return ok;
    };
    int u = blockIdx.x;
    bool live = false;
    /* the first unit's chunks go out after x's loads, so x's quantization runs while they stream (NOTES.md
     * v29: with x loaded after them, x's first use held 15% of GEMV1's sampled stalls; Qwen3 8-bit forwards
     * 0-3% faster) */
    auto first = [&]() { live = u < units && start(u); };
    if (blockIdx.x == 0 && threadIdx.x < p.topk) {
        const int e = p.slot_ids[threadIdx.x];
        p.row_of_slot[threadIdx.x] = e >= 0 && e < p.E ? (int)threadIdx.x * p.slot_bm : -1;
    }
    const __nv_bfloat16 *x = (const __nv_bfloat16 *)io.x;
    if constexpr (Q8) {
        quant_cta<GR, std::is_same<T, __nv_fp8_e4m3>::value>(x, 0, 1, H, 1u, io.as, xop, ssx, s_part, first);
        if (blockIdx.x == 0) { /* the trace's copy (fast.h: MOE_FX_XQ, MOE_FX_SX) */
            for (int i = threadIdx.x; i < H / 16; i += blockDim.x) ((uint4 *)io.xq)[i] = ((const uint4 *)xop)[i];
            const int ns = GR == MOE_GRAN_GROUP ? H / 128 : 1;
            for (int i = threadIdx.x; i < ns; i += blockDim.x) io.sx[i] = ssx[i];
        }
    } else {
        copy_cta<4>(x, 0, 1, H, 1u, xop, first);
    }
    /* GEMV2 may launch: it streams its first weight chunks, then waits for this grid */
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    const float sa = Q8 && GR != MOE_GRAN_GROUP ? ssx[0] : 1.0f;
    while (u < units) { /* live is the same in every warp of the CTA: one unit */
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (live) rp.run(xop, acc, [&](int c) { return ssx[c]; });
        const int j = u / ucols, i = (u % ucols) * 8 + g, e = p.slot_ids[j];
        const bool was = live;
        const float sg = swg, su = swu;
        u += gridDim.x;
        live = u < units && start(u);
        if (!was) continue;
        if ((lane & 3) == 0) s_sum[w][g] = acc[0], s_sum[w][g + 8] = acc[2];
        __syncthreads();
        if (w == 0 && (lane & 3) == 0) {
            float ga, ua;
            if constexpr (std::is_same<T, int8_t>::value) { /* s32 parts add exactly */
                int gs = 0, us = 0;
                for (int k = 0; k < S; k++) gs += __float_as_int(s_sum[k][g]), us += __float_as_int(s_sum[k][g + 8]);
                ga = (float)gs, ua = (float)us;
            } else {
                ga = s_sum[0][g], ua = s_sum[0][g + 8];
                for (int k = 1; k < S; k++) ga = ga + s_sum[k][g], ua = ua + s_sum[k][g + 8];
            }
            if (QS == QS_EPILOGUE && p.w_scale) ga = (ga * sa) * sg, ua = (ua * sa) * su;
            const float gb = __bfloat162float(__float2bfloat16_rn(ga)), ub = __bfloat162float(__float2bfloat16_rn(ua));
            const float v = moe_act_gated(&p.act, MOE_BF16, gb, ub, e, NULL, NULL, NULL);
            ((__nv_bfloat16 *)p.out)[(int64_t)j * p.slot_bm * I + i] = __float2bfloat16_rn(v);
        }
        __syncthreads(); /* s_sum again for the next unit */
    }
}

/* GEMV2: a CTA of topk x ks warps per 16 output columns n0 .. n0 + 15;
 * warp w takes slot j = w % topk over part w / topk of K's 128-chunks (the
 * same parts as its quantization of h). Each warp streams its first chunks
 * before it waits for GEMV1. */
template <class T, int QS, int GR>
__global__ void __launch_bounds__(GV_MAXW * 32) gemv2_kernel(gemm_params p, gemv_io io)
{
    extern __shared__ __align__(16) uint8_t gsm[];
    __shared__ float s_part[4 * GV_MAXW];
    __shared__ float s_sum[GV_MAXW][16];
    constexpr bool Q8 = !std::is_same<T, __nv_bfloat16>::value;
    const int K = p.K, N = p.N, topk = p.topk, nw = blockDim.x >> 5, S = nw / topk;
    const int opb = K * (int)sizeof(T), rowb = rowpair<T, QS>::row_bytes(K); /* an operand row's bytes, a weight row's */
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, n0 = blockIdx.x * 16;
    const int j = w % topk, q = w / topk;
    const int e = p.slot_ids[j];
    const bool live = e >= 0 && e < p.E;
    unsigned valid = 0;
    for (int i = 0; i < topk; i++) valid |= (unsigned)(p.slot_ids[i] >= 0 && p.slot_ids[i] < p.E) << i;
    const int ev = live ? e : 0, na = min(n0 + g, N - 1), nb = min(n0 + g + 8, N - 1);
    rowpair<T, QS> rp;
    rp.rowb = rowb;
    {
        int lo, hi;
        parts_of(rowb, S, q, lo, hi); /* chunk parts of rowb bytes (8-bit: = K's 128-groups) */
        rp.c_lo = lo / 128, rp.c_hi = (hi + 127) / 128;
    }
    rp.ra = (const uint8_t *)p.w + ((int64_t)ev * N + na) * rowb, rp.rb = (const uint8_t *)p.w + ((int64_t)ev * N + nb) * rowb;
    rp.scales_at(p, ev, na, nb, K);
    if (live && q < S) rp.load(rp.c_lo);
    /* the epilogue's scalars too: warp (j, 0)'s lanes (g, 0) own rows g and g + 8 of slot j */
    float swa = 1.0f, swb = 1.0f, wgt = 0.0f;
    if (live && q == 0 && (lane & 3) == 0) {
        wgt = p.topk_w[j];
        if (QS == QS_EPILOGUE && p.w_scale) swa = p.w_scale[w_sidx(p, e, na)], swb = p.w_scale[w_sidx(p, e, nb)];
    }
    asm volatile("griddepcontrol.wait;\n" ::: "memory"); /* h and row_of_slot from GEMV1 */
    const __nv_bfloat16 *h = (const __nv_bfloat16 *)p.a; /* h's row of slot i at i * slot_bm */
    const int64_t ldh = (int64_t)p.slot_bm * K;
    uint8_t *hop = gsm;
    const int ng = K / 128;
    float *ssh = (float *)(gsm + (((int64_t)topk * opb + 15) & ~15));
    if constexpr (Q8) {
        quant_cta<GR, std::is_same<T, __nv_fp8_e4m3>::value, 3>(h, ldh, topk, K, valid, io.as, hop, ssh, s_part, [] {});
        if (blockIdx.x == 0) { /* the trace's copy: h's codes at the slots' rows, their scales */
            for (int i = threadIdx.x; i < topk * (K / 16); i += blockDim.x) {
                const int r = i / (K / 16), c = i % (K / 16);
                if (valid >> r & 1u) ((uint4 *)(io.hq + r * ldh))[c] = ((const uint4 *)(hop + (int64_t)r * K))[c];
            }
            if (GR == MOE_GRAN_TENSOR && threadIdx.x == 0) io.sh[0] = ssh[0];
            for (int i = threadIdx.x; GR != MOE_GRAN_TENSOR && i < topk * (GR == MOE_GRAN_GROUP ? ng : 1); i += blockDim.x) {
                const int r = GR == MOE_GRAN_GROUP ? i / ng : i;
                if (valid >> r & 1u) io.sh[GR == MOE_GRAN_GROUP ? r * p.slot_bm * ng + i % ng : r * p.slot_bm] = ssh[i];
            }
        }
    } else {
        copy_cta<3>(h, ldh, topk, K, valid, hop, [] {});
    }
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (live && q < S) rp.run(hop + (int64_t)j * opb, acc, [&](int c) { return ssh[j * ng + c]; });
    if ((lane & 3) == 0) s_sum[w][g] = acc[0], s_sum[w][g + 8] = acc[2];
    __syncthreads();
    /* warp (j, 0): slot j's rows g and g + 8, the parts added in order (s32 exactly for int8), scaled, weighted
     * and (deterministic) rounded to y as GEMM2's WSTORE epilogue does; then the slots summed in order from +0
     * as combine_kernel does (atomic variant: the f32 terms w * v) */
    __shared__ float s_y[GV_MAXW][16];
    if (q == 0 && (lane & 3) == 0) {
        for (int h2 = 0; h2 < 2; h2++) {
            const int r = g + 8 * h2, n = n0 + r;
            float v;
            if constexpr (std::is_same<T, int8_t>::value) {
                int sv = 0;
                for (int k = 0; k < S; k++) sv += __float_as_int(s_sum[k * topk + j][r]);
                v = (float)sv;
            } else {
                v = s_sum[j][r];
                for (int k = 1; k < S; k++) v = v + s_sum[k * topk + j][r];
            }
            if (QS == QS_EPILOGUE && p.w_scale) v = (v * (GR == MOE_GRAN_TENSOR ? ssh[0] : ssh[j])) * (h2 ? swb : swa);
            float t = v * wgt;
            if (!io.atomic && live && n < N) {
                const __nv_bfloat16 y = __float2bfloat16_rn(t);
                ((__nv_bfloat16 *)p.out)[(int64_t)j * p.slot_bm * N + n] = y;
                t = __bfloat162float(y);
            }
            s_y[j][r] = t;
        }
    }
    __syncthreads();
    if (threadIdx.x >= 16 || n0 + (int)threadIdx.x >= N) return;
    float o = 0.0f;
    for (int i = 0; i < topk; i++)
        if (valid >> i & 1u) o = o + s_y[i][threadIdx.x];
    ((__nv_bfloat16 *)io.out)[n0 + threadIdx.x] = __float2bfloat16_rn(o);
}

/* a weight row's bytes (the limits, the operands' shared memory and gemv_fits: fast_plan.c) */
int wrow_bytes(int kind, int K) { return fx_gemv_w4(kind) ? K / 2 : K * fx_gemv_elem_bytes(kind); }

template <class T, int QS, int GR> struct gv {
    /* GEMV1's CTAs in one wave (the units strided over them): its warps an SM by registers (found once, in
     * plan_make's prepare, so not inside a graph capture) over the CTA's warps, at most as many as x's operand
     * leaves room for in shared memory (228 KB an SM, 1 KB of it a CTA's reserve), times the SMs */
    static cudaError_t wave(size_t smem, int warps, int *ctas)
    {
        static int warps_sm = 0, sms = 0;
        if (!warps_sm) {
            int dev = 0, n = 0;
            cudaError_t ce = cudaGetDevice(&dev);
            if (ce == cudaSuccess) ce = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
            if (ce == cudaSuccess) ce = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, gemv1_kernel<T, QS, GR>, 256, 0);
            if (ce != cudaSuccess) return ce;
            warps_sm = n < 1 ? 8 : 8 * n;
        }
        const int by_smem = (int)((228 * 1024) / (smem + 1024 + 2 * 4 * GV_MAXW * 16)), by_regs = warps_sm / warps;
        const int per_sm = by_regs < by_smem ? by_regs : by_smem;
        *ctas = (per_sm > 0 ? per_sm : 1) * sms;
        return cudaSuccess;
    }
    static cudaError_t prepare()
    {
        int ctas;
        cudaError_t ce = cudaFuncSetAttribute(gemv1_kernel<T, QS, GR>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)GV_SMEM_MAX);
        if (ce == cudaSuccess)
            ce = cudaFuncSetAttribute(gemv2_kernel<T, QS, GR>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)GV_SMEM_MAX);
        return ce == cudaSuccess ? wave(0, 8, &ctas) : ce;
    }
    static cudaError_t launch(const gemm_params &g1, const gemm_params &g2, const gemv_io &io, cudaStream_t s)
    {
        const int units = g1.topk * (g1.I / 8), ks1 = parts_for(wrow_bytes(io.kind, g1.K), g1.K, GV_MAXW / 2);
        int ctas = 0;
        cudaError_t ce = wave(fx_gemv_smem1(io.kind, g1.K), ks1, &ctas);
        if (ce != cudaSuccess) return ce;
        cudaLaunchConfig_t lc = {};
        lc.gridDim = dim3(units < ctas ? units : ctas), lc.blockDim = dim3(32 * ks1), lc.stream = s;
        lc.dynamicSmemBytes = fx_gemv_smem1(io.kind, g1.K);
        ce = cudaLaunchKernelEx(&lc, gemv1_kernel<T, QS, GR>, g1, io);
        if (ce != cudaSuccess) return ce;
        /* GEMV2: a slot's parts of K, at most GV_MAXW warps a CTA; one part a slot (one warp over all of K) for
         * e4m3 per tensor / per channel and int8, where it measured faster (NOTES.md v43, Qwen3-30B-A3B M = 1, two
         * rounds: 0.4-0.8 us; the block scheme 2 us and bf16 1 us slower with it; the block scheme still 0.4-1.1 us
         * slower with its groups four a warp, v60) */
        const int ks = parts_for(wrow_bytes(io.kind, g2.K), g2.K, io.kind == GV_FP8 || io.kind == GV_I8 ? 1 : GV_MAXW / g2.topk);
        cudaLaunchAttribute at;
        at.id = cudaLaunchAttributeProgrammaticStreamSerialization, at.val.programmaticStreamSerializationAllowed = 1;
        lc.gridDim = dim3((g2.N + 15) / 16), lc.blockDim = dim3(32 * g2.topk * ks), lc.dynamicSmemBytes = fx_gemv_smem2(io.kind, g2.topk, g2.K);
        lc.attrs = &at, lc.numAttrs = 1;
        return cudaLaunchKernelEx(&lc, gemv2_kernel<T, QS, GR>, g2, io);
    }
};

template <class F> cudaError_t with_gv(const gemv_io &io, F f)
{
    switch (io.kind) {
    case GV_BF16: return f(gv<__nv_bfloat16, QS_EPILOGUE, -1>());
    case GV_FP8:
        return io.as.gran == MOE_GRAN_TENSOR ? f(gv<__nv_fp8_e4m3, QS_EPILOGUE, MOE_GRAN_TENSOR>())
                                             : f(gv<__nv_fp8_e4m3, QS_EPILOGUE, MOE_GRAN_ROW>());
    case GV_FP8_BLOCK: return f(gv<__nv_fp8_e4m3, QS_KTILE, MOE_GRAN_GROUP>());
    case GV_I8: return f(gv<int8_t, QS_EPILOGUE, MOE_GRAN_ROW>());
    case GV_W4: return f(gv<__nv_bfloat16, QS_W4_INT, -1>());
    case GV_MX4: return f(gv<__nv_bfloat16, QS_W4_MX, -1>());
    default: return cudaErrorInvalidValue;
    }
}

} // namespace

cudaError_t gemv_prepare(const gemv_io &io)
{
    return with_gv(io, [&](auto k) { return decltype(k)::prepare(); });
}

cudaError_t gemv_forward(const gemm_params &g1, const gemm_params &g2, const gemv_io &io, cudaStream_t s)
{
    if (!fx_gemv_fits(io.kind, g1.topk, g1.K, g1.I)) return cudaErrorInvalidValue;
    return with_gv(io, [&](auto k) { return decltype(k)::launch(g1, g2, io, s); });
}

} // namespace fx
