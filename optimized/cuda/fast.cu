/* The fast experts path (fast.h): layout, gather, activation, combine and
 * the fused forward around the tensor-core GEMM of fast_gemm.cuh. Which
 * tiles and forms a problem gets is the plan rule's (fast_plan.c, plain C);
 * here the chosen kernels are made ready and launched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_internal.h"
#include "fast.h"
#include "fast_plan.h"
#include "fast_gemm.cuh"
#include "fast_gemv.h"
#include "fast_ws.cuh"
#include "fast_swp.h"
#include "fast_e4m3.cuh"
#include "fast_qstep.cuh"
#include "fast_quant.cuh"
#include "reference/quant_core.h"
#include "moe/status.h"

namespace {

using fx::bf16x8_f32;
using fx::codes_of;
using fx::group_stats;
using fx::ref_code;
using fx::stats_add;
using fx::warp_stats;

/* a block-wide exclusive scan of one int per thread (blockDim 1024) */
__device__ int block_excl_scan(int v, int *warp_tot, int *total)
{
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    int x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        int y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) warp_tot[w] = x;
    __syncthreads();
    if (w == 0) {
        int t = warp_tot[lane];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            int y = __shfl_up_sync(0xffffffffu, t, o);
            if (lane >= o) t += y;
        }
        warp_tot[lane] = t; /* inclusive over warps */
        if (lane == 31) *total = t;
    }
    __syncthreads();
    return x - v + (w ? warp_tot[w - 1] : 0);
}

/* Counting sort of the slots by expert in one CTA: counts by shared
 * atomics, a scan of the padded block counts, then each slot takes the next
 * free row of its expert (atomic order; where a row lands changes no
 * result, fast_gemm.cuh computes every row alone). Ids outside [0, E) are
 * left out (row_of_slot -1). Both passes load ALIGN_BATCH ids a thread
 * before they use any: one at a time, each pass was a chain of n / 1024
 * global round trips a thread (ncu on an H100, Qwen3-30B-A3B M = 4096, 32 768
 * slots: 56 us, against 9 us for Mixtral-8x7B's 8 192; NOTES.md v47) */
constexpr int ALIGN_BATCH = 8;

/* The passes of both forms over slots [lo, hi), blockDim.x threads from
 * lo + tid: the counts into cnt[E]; the rows (expert e's rows from boff[e]
 * blocks, then base[e] when the form has one, then the atomic order);
 * expert e's block entries and pad rows. */
__device__ __forceinline__ void ids_batch(const int32_t *ids, int i0, int hi, int (&e)[ALIGN_BATCH])
{
#pragma unroll
    for (int j = 0; j < ALIGN_BATCH; j++) e[j] = i0 + j * (int)blockDim.x < hi ? ids[i0 + j * blockDim.x] : -1;
}
__device__ void count_slots(const int32_t *ids, int lo, int hi, int E, int *cnt)
{
    for (int i0 = lo + (int)threadIdx.x; i0 < hi; i0 += ALIGN_BATCH * blockDim.x) {
        int e[ALIGN_BATCH];
        ids_batch(ids, i0, hi, e);
#pragma unroll
        for (int j = 0; j < ALIGN_BATCH; j++)
            if (e[j] >= 0 && e[j] < E) atomicAdd(&cnt[e[j]], 1);
    }
}
__device__ void place_slots(const int32_t *ids, int lo, int hi, int E, int bm, const int *boff, const int *base, int *fill,
                            const moe_cuda_fx_layout &L)
{
    for (int i0 = lo + (int)threadIdx.x; i0 < hi; i0 += ALIGN_BATCH * blockDim.x) {
        int e[ALIGN_BATCH];
        ids_batch(ids, i0, hi, e);
#pragma unroll
        for (int j = 0; j < ALIGN_BATCH; j++) {
            const int i = i0 + j * blockDim.x;
            if (i >= hi) break;
            int r = -1;
            if (e[j] >= 0 && e[j] < E) {
                r = boff[e[j]] * bm + (base ? base[e[j]] : 0) + atomicAdd(&fill[e[j]], 1);
                L.sorted[r] = i;
            }
            L.row_of_slot[i] = r;
        }
    }
}
__device__ void expert_rows(int e, int c, int off, int bm, const moe_cuda_fx_layout &L)
{
    const int nb = (c + bm - 1) / bm;
    for (int b = 0; b < nb; b++) L.block_expert[off + b] = e;
    for (int r = (off * bm) + c; r < (off + nb) * bm; r++) L.sorted[r] = -1;
}

__global__ void __launch_bounds__(FX_ALIGN_THREADS) align_kernel(const int32_t *ids, int n, int E, int bm,
                                                               moe_cuda_fx_layout L)
{
    extern __shared__ int sh[]; /* cnt[E], fill[E], boff[E] */
    __shared__ int warp_tot[32], total;
    int *cnt = sh, *fill = sh + E, *boff = sh + 2 * E;
    const int tid = threadIdx.x;
    for (int e = tid; e < E; e += blockDim.x) cnt[e] = 0, fill[e] = 0;
    __syncthreads();
    count_slots(ids, 0, n, E, cnt);
    __syncthreads();
    const int c = tid < E ? cnt[tid] : 0, nb = (c + bm - 1) / bm;
    const int off = block_excl_scan(nb, warp_tot, &total);
    if (tid < E) {
        boff[tid] = off;
        L.counts[tid] = c;
        L.offsets[tid] = off * bm;
        expert_rows(tid, c, off, bm, L);
    }
    if (tid == 0) L.offsets[E] = total * bm, *L.num_blocks = total;
    __syncthreads();
    place_slots(ids, 0, n, E, bm, boff, NULL, fill, L);
    /* launched as a dependent of x's quantization (8-bit schemes), this
     * grid ran beside it; it ends only once that grid has, so the GEMM1
     * that waits for this grid reads x's codes too (else returns at once) */
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
}

/* From ALIGN_SPLIT_MIN slots the counting sort runs on FX_ALIGN_SPLIT_CTAS
 * CTAs in two kernels: with one CTA, 32 768 slots (Qwen3-30B-A3B and
 * DeepSeek-V3 at M = 4096) took 47-58 us under ncu on an H100 after its
 * loads were batched, bound by the one SM's 65 536 shared atomics and
 * scattered stores (NOTES.md v48). align_count_kernel: each CTA counts its
 * chunk of the slots by expert into part[CTA][E]. align_place_kernel: each
 * CTA sums part into the experts' counts and its own base within each
 * expert (the counts of the CTAs before it), scans the padded block counts
 * as align_kernel does, and places its chunk (the rows of an expert: its
 * offset, the CTA's base, then the atomic order inside the CTA; where a row
 * lands changes no result); CTA 0 writes counts, offsets and num_blocks,
 * and the experts' block_expert entries and pad rows are spread over the
 * CTAs. The same layout contract as align_kernel. */
constexpr int ALIGN_SPLIT_MIN = 8192;
__global__ void __launch_bounds__(FX_ALIGN_THREADS) align_count_kernel(const int32_t *ids, int n, int E, int32_t *part)
{
    extern __shared__ int cnt[];
    const int tid = threadIdx.x, chunk = (n + FX_ALIGN_SPLIT_CTAS - 1) / FX_ALIGN_SPLIT_CTAS;
    const int lo = blockIdx.x * chunk, hi = min(n, lo + chunk);
    for (int e = tid; e < E; e += blockDim.x) cnt[e] = 0;
    __syncthreads();
    count_slots(ids, lo, hi, E, cnt);
    __syncthreads();
    for (int e = tid; e < E; e += blockDim.x) part[blockIdx.x * E + e] = cnt[e];
    /* align_kernel's: launched as a dependent of x's quantization, it ends only once that grid has */
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
}

__global__ void __launch_bounds__(FX_ALIGN_THREADS) align_place_kernel(const int32_t *ids, int n, int E, int bm,
                                                                     moe_cuda_fx_layout L)
{
    extern __shared__ int sh[]; /* base[E], fill[E], boff[E] */
    __shared__ int warp_tot[32], total;
    int *base = sh, *fill = sh + E, *boff = sh + 2 * E;
    const int tid = threadIdx.x, chunk = (n + FX_ALIGN_SPLIT_CTAS - 1) / FX_ALIGN_SPLIT_CTAS;
    const int lo = blockIdx.x * chunk, hi = min(n, lo + chunk);
    asm volatile("griddepcontrol.wait;\n" ::: "memory"); /* part: align_count_kernel's */
    int c = 0;
    if (tid < E) {
        int b = 0;
        for (int g = 0; g < FX_ALIGN_SPLIT_CTAS; g++) {
            const int v = L.part[g * E + tid];
            c += v, b += g < (int)blockIdx.x ? v : 0;
        }
        base[tid] = b, fill[tid] = 0;
    }
    const int off = block_excl_scan((c + bm - 1) / bm, warp_tot, &total);
    if (tid < E) {
        boff[tid] = off;
        if (blockIdx.x == 0) L.counts[tid] = c, L.offsets[tid] = off * bm;
        if (tid % FX_ALIGN_SPLIT_CTAS == (int)blockIdx.x) expert_rows(tid, c, off, bm, L);
    }
    if (tid == 0 && blockIdx.x == 0) L.offsets[E] = total * bm, *L.num_blocks = total;
    __syncthreads();
    place_slots(ids, lo, hi, E, bm, boff, base, fill, L);
}

/* 16-byte vectors: H % 8 == 0 (2-byte elements) */
__global__ void gather_kernel(const uint4 *x, int hv, int topk, const int32_t *sorted, int64_t rows, uint4 *xs)
{
    for (int64_t v = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; v < rows * hv; v += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = v / hv, c = v % hv;
        const int s = sorted[r];
        xs[v] = s >= 0 ? x[(int64_t)(s / topk) * hv + c] : make_uint4(0, 0, 0, 0);
    }
}

template <class T>
__global__ void act_kernel(const T *y1, int64_t rows, int I, moe_act_params act, T *h)
{
    for (int64_t v = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; v < rows * I; v += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = v / I, i = v % I;
        h[v] = fx::tc<T>::rnd(moe_act_elem(&act, 1, fx::tc<T>::dt, y1, r, i, I, 0, NULL, NULL, NULL));
    }
}

/* out[t, c..c+7] = sum_j w * y[row_of_slot[t*topk + j]], j ascending, f32
 * from +0. The row indices and then the rows of up to CH slots are loaded
 * before any is added, so a thread waits for two memory round trips per CH
 * slots, not two per slot (at M = 1 the combine is one CTA whose time is
 * that chain: 5.8 us for top-8 under ncu before); the adds keep j order. */
template <class T>
__global__ void combine_kernel(const T *y, const int32_t *row_of_slot, const float *w, int M, int topk, int H, T *out)
{
    constexpr int CH = 8;
    const int hv = H / 8;
    asm volatile("griddepcontrol.wait;\n" ::: "memory"); /* y: the GEMM just before (when launched dependent) */
    for (int64_t v = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; v < (int64_t)M * hv; v += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = v / hv, c = (v % hv) * 8;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int j0 = 0; j0 < topk; j0 += CH) {
            int r[CH];
            float wj[CH];
            uint4 raw[CH];
#pragma unroll
            for (int q = 0; q < CH; q++) {
                r[q] = j0 + q < topk ? row_of_slot[t * topk + j0 + q] : -1;
                wj[q] = w && j0 + q < topk ? w[t * topk + j0 + q] : 1.0f;
            }
#pragma unroll
            for (int q = 0; q < CH; q++)
                if (r[q] >= 0) raw[q] = *(const uint4 *)(y + (int64_t)r[q] * H + c);
#pragma unroll
            for (int q = 0; q < CH; q++) {
                if (r[q] < 0) continue;
                const T *e8 = (const T *)&raw[q];
#pragma unroll
                for (int e = 0; e < 8; e++)
                    acc[e] = acc[e] + (w ? wj[q] * fx::tc<T>::f32(e8[e]) : fx::tc<T>::f32(e8[e]));
            }
        }
        uint4 o;
        T *o8 = (T *)&o;
#pragma unroll
        for (int q = 0; q < 8; q++) o8[q] = fx::tc<T>::rnd(acc[q]);
        *(uint4 *)(out + t * H + c) = o;
    }
}

template <class T> __global__ void convert_kernel(const float *a, int64_t n, T *out)
{
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = fx::tc<T>::rnd(a[i]);
}

/* The 8-bit schemes' activation quantization, one CTA per row, with the
 * reference's rule and element encoding (quant_core.h; e4m3 codes from the
 * hardware conversion, equal to it on every f32: fast_e4m3.cuh), so codes and
 * scales are the reference's bits: per row (ROW), per 128 columns (GROUP:
 * a warp per group) or with the tensor's amax from tensor_amax (TENSOR:
 * amax_kernel or GEMM1's epilogue). h: one CTA a slot, its row from
 * row_of_slot (x: one a row, row_of_slot NULL), so the pad rows of the
 * layout, which GEMM1 leaves unwritten and GEMM2 never reads, cost
 * nothing: one CTA a padded row had h's quantization take 24 us of
 * gpt-oss-120b's M = 64 fp8 forward for 256 real rows of 2 176 (NOTES.md
 * v22). ROW / TENSOR rows move in 16-byte chunks
 * of 8 elements (cols % 16 == 0 for 8-bit codes), the loops unrolled so
 * a thread's loads are in flight together: with one 2-byte load an
 * iteration each waited for the one before, and h's quantization took
 * 45 us of Mixtral-8x7B's M = 16 forward (NOTES.md v16). Maxima are exact
 * in any order, so the statistics do not depend on the chunking. */

/* threads a row (ROW / TENSOR): two 16-byte chunks a thread,
 * 128 to 1024: long rows of few-row decode grids need the warps to hide
 * the element encoding's latency (256 threads: 28 us for Mixtral-8x7B's
 * h at M = 16), thousands of short rows (DeepSeek-V3, I 2048) need many
 * CTAs an SM (1024 threads for all: 4-19% slower forwards, NOTES.md v16).
 * Four chunks a thread where the grid has more rows (one wave for
 * Mixtral-8x7B M = 256's 512 rows of 14 336), with four held in registers,
 * measured 0.4% slower over the 8-bit decode grid (M = 1 1-5%; NOTES.md v23) */
constexpr int QUANT_THREADS = 1024;
/* GROUP: a warp a group, at most this many a CTA, the row's groups spread
 * over CTAs (grid.y): with one CTA a row of up to 32 warps, each warp
 * walked its groups one after another, a statistics-and-codes chain each
 * (Mixtral-8x7B M = 16 block fp8: h's 32 rows of 112 groups took 9 us, x's
 * 16 rows of 32 groups 4.5 us; ncu, NOTES.md v26) */
constexpr int QUANT_GROUP_WARPS = 8;
constexpr int QUANT_HOLD = 2; /* 16-byte chunks a thread kept in registers: the whole row at every thread count quant_threads picks for up to 16 384 columns */
unsigned quant_threads(const moe_quant_spec &s, int cols, int64_t rows)
{
    /* one chunk a thread where the grid has fewer rows than two CTAs an SM
     * (x at decode sizes: a CTA's chain of elements is the kernel's time) */
    const int per = rows < 2 * 132 ? 8 : 16;
    const int ng = s.gran == MOE_GRAN_GROUP ? cols / s.group_k : 0;
    const int t = ng ? (ng < QUANT_GROUP_WARPS ? ng : QUANT_GROUP_WARPS) * 32 : (cols / per + 31) / 32 * 32;
    return (unsigned)(t < 128 ? 128 : t > QUANT_THREADS ? QUANT_THREADS : t);
}

/* the grid: a CTA a row, and for GROUP as many CTAs a row as its groups
 * need at one group a warp (the groups' statistics and codes are
 * independent: the same bits on any split) */
dim3 quant_grid(const moe_quant_spec &s, int cols, int64_t rows, unsigned threads)
{
    const int ng = s.gran == MOE_GRAN_GROUP ? cols / s.group_k : 1, nw = (int)threads / 32;
    return dim3((unsigned)rows, s.gran == MOE_GRAN_GROUP ? (unsigned)((ng + nw - 1) / nw) : 1u);
}

/* one 16-byte chunk of a row (ROW / TENSOR) into its statistics: per
 * tensor only the NaN flag (the amax is the tensor's, tensor_amax) */
template <int GR> __device__ __forceinline__ void chunk_stats(const uint4 &v, float &ai, float &mx, float &mn, int &nan)
{
    float f[8];
    bf16x8_f32(v, f);
#pragma unroll
    for (int i = 0; i < 8; i++) {
        if constexpr (GR == MOE_GRAN_TENSOR) nan |= f[i] != f[i];
        else stats_add(f[i], ai, mx, mn, nan);
    }
}

/* chunk c's eight codes, the row's form of the element step */
template <bool E4, bool DIV, bool FAST>
__device__ __forceinline__ void encode_chunk(const uint4 &v, int c, const fx::qstep &qs, const moe_quant_spec &spec,
                                             const moe_q_group &grp, uint8_t *qr)
{
    float f[8];
    bf16x8_f32(v, f);
    uint32_t w[2] = {0, 0};
    codes_of<8, E4, DIV, FAST>(f, qs, spec, grp, w);
    ((uint2 *)qr)[c] = make_uint2(w[0], w[1]);
}

/* a row's codes (ROW / TENSOR) on the fast element step: the chunks held
 * in registers, then the rest of the row */
template <bool E4, bool DIV>
__device__ __forceinline__ void encode_row(const uint4 *xv, const uint4 (&hold)[QUANT_HOLD], int nc, const fx::qstep &qs,
                                           const moe_quant_spec &spec, const moe_q_group &grp, uint8_t *qr)
{
#pragma unroll
    for (int k = 0; k < QUANT_HOLD; k++)
        if (threadIdx.x + k * blockDim.x < nc) encode_chunk<E4, DIV, true>(hold[k], threadIdx.x + k * blockDim.x, qs, spec, grp, qr);
    for (int c = threadIdx.x + QUANT_HOLD * blockDim.x; c < nc; c += blockDim.x) encode_chunk<E4, DIV, true>(xv[c], c, qs, spec, grp, qr);
}

/* a row with a NaN or an infinity (rare): the reference's element step on
 * chunks c0, c0 + step, ... read again from memory. The held chunks stay
 * out of it: with the three forms of the step behind one generic lambda
 * (with_form), the warp form kept its held chunks in local memory, and its
 * eight 16-byte stores to it took a third of its stall samples, waiting on
 * the row's loads (ncu source counters, h of Qwen3-30B-A3B M = 4096 fp8,
 * NOTES.md v49); the CTA form had the same code shape (not profiled) */
template <bool E4>
__device__ __forceinline__ void encode_row_ref(const uint4 *xv, int c0, int step, int nc, const moe_quant_spec &spec,
                                               const moe_q_group &grp, uint8_t *qr)
{
    const fx::qstep qs = {}; /* unused by the reference's step */
    for (int c = c0; c < nc; c += step) encode_chunk<E4, false, false>(xv[c], c, qs, spec, grp, qr);
}

/* GR (spec.gran: ROW, TENSOR or GROUP) and E4 (e4m3 codes, else int8) fixed
 * at compile time: one instantiation holds one path, not every format's
 * encoder behind run-time switches (v17's profile had x's quantization
 * waiting on instruction fetch 43% of its stalls; split, the 8-bit decode
 * forwards ran 1.8% faster in geomean, M = 1 2-12%, NOTES.md v22). A row's
 * first QUANT_HOLD chunks a thread stay in registers between the
 * statistics and the codes; the CTA's statistics are reduced by every warp
 * from the warps' partials (one shared load a lane), not by every thread
 * over every warp's (28 x 4 loads a thread at 896 threads: half of the
 * kernel's issue slots, ncu, NOTES.md v23) */
template <int GR, bool E4>
__global__ void __launch_bounds__(QUANT_THREADS) quant_rows_kernel(const __nv_bfloat16 *x, int cols, const int32_t *row_of_slot,
                                  moe_quant_spec spec, const float *tensor_amax, uint8_t *q, float *scale, int trigger)
{
    /* the 8-bit schemes' activation codes: e4m3 or int8 (quant_rows checks) */
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    /* trigger (x): the align after it may start now (once every CTA of
     * this grid has): it does not read x and waits for this grid before it
     * ends. Not at M = 1 (no align; GEMM1 starting early measured 4-7%
     * slower on Qwen3-30B-A3B's 8-bit forwards); h where plan.h_trigger
     * (GEMM2 streams its first weight tiles before it waits: slower where
     * h has many rows an expert, Mixtral-8x7B M = 64 / 256, faster where it
     * has few; NOTES.md v22, v26) */
    if (trigger) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    const int64_t r = row_of_slot ? row_of_slot[blockIdx.x] : (int64_t)blockIdx.x;
    if (r < 0) return; /* a slot of no expert (align_kernel) */
    const __nv_bfloat16 *xr = x + r * cols;
    uint8_t *qr = q + r * cols;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    moe_q_group grp;
    fx::qstep qs;
    if constexpr (GR == MOE_GRAN_GROUP) { /* cols % group_k == 0, group_k a multiple of 32 */
        const int G = spec.group_k, ng = cols / G;
        for (int gi = blockIdx.y * nw + w; gi < ng; gi += gridDim.y * nw) {
            if (G == 128) { /* 4 adjacent elements a lane, one 8-byte load */
                float sc;
                const uint2 v = ((const uint2 *)(xr + gi * G))[lane];
                const uint32_t wv[2] = {v.x, v.y};
                uint32_t c[1];
                fx::group128_codes<E4>(wv, spec, &sc, c);
                if (lane == 0) scale[r * ng + gi] = sc;
                ((uint32_t *)(qr + gi * G))[lane] = c[0];
                continue;
            }
            float ai = 0.0f, mx = -MOE_M_INF, mn = MOE_M_INF;
            int nan = 0;
#pragma unroll 4
            for (int c = lane; c < G; c += 32) stats_add(__bfloat162float(xr[gi * G + c]), ai, mx, mn, nan);
            warp_stats(ai, mx, mn, nan);
            const moe_q_stats st = group_stats(ai, mx, mn, nan);
            moe_qc_rule_dynamic(&spec, &st, 1.0f, &grp);
            if (lane == 0) scale[r * ng + gi] = grp.scale;
            for (int c = lane; c < G; c += 32) {
                const float v = moe_qc_step(&spec, &grp, __bfloat162float(xr[gi * G + c]));
                qr[gi * G + c] = (uint8_t)ref_code<E4>(v);
            }
        }
        return; /* (the rest of the body is dead code in this instantiation) */
    }
    const uint4 *xv = (const uint4 *)xr;
    const int nc = cols / 8;
    uint4 hold[QUANT_HOLD];
#pragma unroll
    for (int k = 0; k < QUANT_HOLD; k++) {
        const int c = threadIdx.x + k * blockDim.x;
        hold[k] = c < nc ? xv[c] : make_uint4(0, 0, 0, 0);
    }
    float ai = 0.0f, mx = -MOE_M_INF, mn = MOE_M_INF;
    int nan = 0;
#pragma unroll
    for (int k = 0; k < QUANT_HOLD; k++)
        if (threadIdx.x + k * blockDim.x < nc) chunk_stats<GR>(hold[k], ai, mx, mn, nan);
    for (int c = threadIdx.x + QUANT_HOLD * blockDim.x; c < nc; c += blockDim.x) chunk_stats<GR>(xv[c], ai, mx, mn, nan);
    moe_q_stats st;
    if constexpr (GR == MOE_GRAN_TENSOR) {
        const float a = *tensor_amax; /* NaN elements were skipped: amax_nan IGNORE */
        st = group_stats(a, a, -a, 0);
        nan = __syncthreads_or(nan); /* the row's NaN: the fast step's condition only */
        ai = a;
    } else {
        __shared__ float s_ai[32], s_mx[32], s_mn[32];
        __shared__ int s_nan[32];
        warp_stats(ai, mx, mn, nan);
        if (lane == 0) s_ai[w] = ai, s_mx[w] = mx, s_mn[w] = mn, s_nan[w] = nan;
        __syncthreads();
        ai = lane < nw ? s_ai[lane] : 0.0f, mx = lane < nw ? s_mx[lane] : -MOE_M_INF;
        mn = lane < nw ? s_mn[lane] : MOE_M_INF, nan = lane < nw ? s_nan[lane] : 0;
        warp_stats(ai, mx, mn, nan);
        st = group_stats(ai, mx, mn, nan);
    }
    moe_qc_rule_dynamic(&spec, &st, 1.0f, &grp);
    /* per tensor: every CTA stores the one scale (the same bits), so it is
     * written whichever slots have no expert */
    if (threadIdx.x == 0) scale[GR == MOE_GRAN_TENSOR ? 0 : r] = grp.scale;
    if (!fx::qstep_make(spec, grp, ai, nan, qs)) encode_row_ref<E4>(xv, threadIdx.x, blockDim.x, nc, spec, grp, qr);
    else if (spec.q_op == MOE_QOP_DIV) encode_row<E4, true>(xv, hold, nc, qs, spec, grp, qr);
    else encode_row<E4, false>(xv, hold, nc, qs, spec, grp, qr);
}

/* max |x| over the non-NaN elements of x (fp8_wtensor_atensor's x) into
 * *amax (zeroed before; f32 bits of values >= 0 order as u32) */
__global__ void amax_kernel(const __nv_bfloat16 *x, int64_t n, float *amax)
{
    /* 16-byte chunks (n % 8 == 0: H % 16), one atomic a CTA: with one a
     * warp, 33k warps queued on one address (NOTES.md v16) */
    float m = 0.0f;
    const uint4 *xv = (const uint4 *)x;
#pragma unroll 4
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n / 8; i += (int64_t)gridDim.x * blockDim.x) {
        float f[8];
        bf16x8_f32(xv[i], f);
#pragma unroll
        for (int j = 0; j < 8; j++) m = fmaxf(m, fabsf(f[j])); /* NaN skipped (fmaxf) */
    }
    __shared__ float s_m[32];
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) s_m[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int i = 1; i < (int)(blockDim.x >> 5); i++) m = fmaxf(m, s_m[i]);
        if (m > 0.0f) atomicMax((unsigned *)amax, __float_as_uint(m));
    }
}

unsigned grid_for(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    if (b > 132 * 32) b = 132 * 32; /* grid-stride beyond a few waves */
    return (unsigned)b;
}

cudaStream_t S(void *s) { return (cudaStream_t)s; }

/* a launch, as a programmatic dependent of the previous kernel when pdl
 * (the kernel waits with griddepcontrol.wait before reading its inputs) */
template <class... KA, class... A>
cudaError_t launch_sm(void (*k)(KA...), dim3 grid, unsigned block, size_t smem, cudaStream_t s, bool pdl, A... args)
{
    cudaLaunchConfig_t lc = {};
    lc.gridDim = grid, lc.blockDim = dim3(block), lc.stream = s, lc.dynamicSmemBytes = smem;
    cudaLaunchAttribute at;
    at.id = cudaLaunchAttributeProgrammaticStreamSerialization, at.val.programmaticStreamSerializationAllowed = 1;
    lc.attrs = &at, lc.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&lc, k, static_cast<KA>(args)...);
}
template <class... KA, class... A>
cudaError_t launch_ex(void (*k)(KA...), dim3 grid, unsigned block, cudaStream_t s, bool pdl, A... args)
{
    return launch_sm(k, grid, block, 0, s, pdl, args...);
}

/* ROW / TENSOR on many short rows: a warp a row, QUANT_WARP_ROWS rows a
 * CTA, the row's chunks all in registers (cols <= 8 * 32 * QUANT_WARP_HOLD)
 * and its statistics reduced over the warp alone. A CTA a row was a chain
 * of two round trips (the slot's row, then its chunks) and a CTA barrier
 * for a few hundred bytes, 16 such CTAs an SM: h of Qwen3-30B-A3B M = 4096
 * fp8 (32 768 rows of 768) took 85 us under ncu on an H100, 23% of its DRAM
 * peak (NOTES.md v47). The statistics are maxima, minima and a NaN flag,
 * the same in any order, so the same scale and codes as quant_rows_kernel */
constexpr int QUANT_WARP_ROWS = 8, QUANT_WARP_HOLD = 8;
template <int GR, bool E4>
__global__ void __launch_bounds__(32 * QUANT_WARP_ROWS)
    quant_rows_warp_kernel(const __nv_bfloat16 *x, int cols, const int32_t *row_of_slot, moe_quant_spec spec,
                           const float *tensor_amax, uint8_t *q, float *scale, int trigger, int64_t rows)
{
    static_assert(GR == MOE_GRAN_ROW || GR == MOE_GRAN_TENSOR, "a warp a row: ROW / TENSOR");
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    if (trigger) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); /* quant_rows_kernel's */
    const int lane = threadIdx.x & 31;
    const int64_t slot = (int64_t)blockIdx.x * QUANT_WARP_ROWS + (threadIdx.x >> 5);
    if (slot >= rows) return;
    const int64_t r = row_of_slot ? row_of_slot[slot] : slot;
    if (r < 0) return; /* a slot of no expert (align_kernel) */
    const uint4 *xv = (const uint4 *)(x + r * cols);
    uint8_t *qr = q + r * cols;
    const int nc = cols / 8;
    uint4 hold[QUANT_WARP_HOLD];
#pragma unroll
    for (int k = 0; k < QUANT_WARP_HOLD; k++) hold[k] = lane + 32 * k < nc ? xv[lane + 32 * k] : make_uint4(0, 0, 0, 0);
    float ai = 0.0f, mx = -MOE_M_INF, mn = MOE_M_INF;
    int nan = 0;
#pragma unroll
    for (int k = 0; k < QUANT_WARP_HOLD; k++) {
        if (lane + 32 * k >= nc) break;
        chunk_stats<GR>(hold[k], ai, mx, mn, nan);
    }
    moe_q_stats st;
    if constexpr (GR == MOE_GRAN_TENSOR) {
        const float a = *tensor_amax;
        st = group_stats(a, a, -a, 0);
        nan = __any_sync(0xffffffffu, nan);
        ai = a;
    } else {
        warp_stats(ai, mx, mn, nan);
        st = group_stats(ai, mx, mn, nan);
    }
    moe_q_group grp;
    moe_qc_rule_dynamic(&spec, &st, 1.0f, &grp);
    if (lane == 0) scale[GR == MOE_GRAN_TENSOR ? 0 : r] = grp.scale;
    fx::qstep qs;
    if (!fx::qstep_make(spec, grp, ai, nan, qs)) {
        encode_row_ref<E4>(xv, lane, 32, nc, spec, grp, qr);
        return;
    }
    const bool div = spec.q_op == MOE_QOP_DIV;
#pragma unroll
    for (int k = 0; k < QUANT_WARP_HOLD; k++) {
        if (lane + 32 * k >= nc) break;
        if (div) encode_chunk<E4, true, true>(hold[k], lane + 32 * k, qs, spec, grp, qr);
        else encode_chunk<E4, false, true>(hold[k], lane + 32 * k, qs, spec, grp, qr);
    }
}

/* quant_rows_kernel's instantiation for the scheme's activation spec
 * (granularity ROW, TENSOR or GROUP; e4m3 or int8 codes); ROW / TENSOR on
 * at least 4 096 rows of at most 2 048 columns, quant_rows_warp_kernel's */
template <class... A>
cudaError_t quant_rows(const moe_quant_spec &sp, int cols, int64_t rows, cudaStream_t s, bool pdl, A... args)
{
    const bool e4 = sp.elem == MOE_E4M3;
    if (!e4 && sp.elem != MOE_I8) return cudaErrorInvalidValue;
    if ((sp.gran == MOE_GRAN_ROW || sp.gran == MOE_GRAN_TENSOR) && rows >= 4096 && cols <= 8 * 32 * QUANT_WARP_HOLD) {
        const dim3 g((unsigned)((rows + QUANT_WARP_ROWS - 1) / QUANT_WARP_ROWS));
        const unsigned b = 32 * QUANT_WARP_ROWS;
        if (sp.gran == MOE_GRAN_ROW)
            return e4 ? launch_ex(quant_rows_warp_kernel<MOE_GRAN_ROW, true>, g, b, s, pdl, args..., rows)
                      : launch_ex(quant_rows_warp_kernel<MOE_GRAN_ROW, false>, g, b, s, pdl, args..., rows);
        return e4 ? launch_ex(quant_rows_warp_kernel<MOE_GRAN_TENSOR, true>, g, b, s, pdl, args..., rows)
                  : launch_ex(quant_rows_warp_kernel<MOE_GRAN_TENSOR, false>, g, b, s, pdl, args..., rows);
    }
    const unsigned block = quant_threads(sp, cols, rows);
    const dim3 grid = quant_grid(sp, cols, rows, block);
    switch (sp.gran) {
    case MOE_GRAN_ROW:
        return e4 ? launch_ex(quant_rows_kernel<MOE_GRAN_ROW, true>, grid, block, s, pdl, args...)
                  : launch_ex(quant_rows_kernel<MOE_GRAN_ROW, false>, grid, block, s, pdl, args...);
    case MOE_GRAN_TENSOR:
        return e4 ? launch_ex(quant_rows_kernel<MOE_GRAN_TENSOR, true>, grid, block, s, pdl, args...)
                  : launch_ex(quant_rows_kernel<MOE_GRAN_TENSOR, false>, grid, block, s, pdl, args...);
    case MOE_GRAN_GROUP:
        return e4 ? launch_ex(quant_rows_kernel<MOE_GRAN_GROUP, true>, grid, block, s, pdl, args...)
                  : launch_ex(quant_rows_kernel<MOE_GRAN_GROUP, false>, grid, block, s, pdl, args...);
    default: return cudaErrorInvalidValue;
    }
}

moe_status combine(const void *y, const moe_cuda_fx_layout *L, const float *topk_w, int M, int topk, int H, moe_dtype dt,
                   void *out, void *stream, bool pdl)
{
    if (H % 8) return moe_fail(MOE_ERR_UNSUPPORTED, "fx_combine: H (%d) must be a multiple of 8", H);
    const int64_t n = (int64_t)M * (H / 8);
    cudaError_t ce;
    if (dt == MOE_BF16)
        ce = launch_ex(combine_kernel<__nv_bfloat16>, grid_for(n, 256), 256, S(stream), pdl, (const __nv_bfloat16 *)y,
                       (const int32_t *)L->row_of_slot, topk_w, M, topk, H, (__nv_bfloat16 *)out);
    else if (dt == MOE_F16)
        ce = launch_ex(combine_kernel<__half>, grid_for(n, 256), 256, S(stream), pdl, (const __half *)y,
                       (const int32_t *)L->row_of_slot, topk_w, M, topk, H, (__half *)out);
    else return moe_fail(MOE_ERR_UNSUPPORTED, "fx_combine: dtype must be bf16 or f16");
    return ce == cudaSuccess ? MOE_OK : moe_cu_fail(ce, "fx combine_kernel");
}

/* the persistent form's stages: the 128-row tiles keep theirs; the 64-row
 * wgmma tile (64x128W) takes 8 (one CTA an SM instead of two of 4: the
 * producer runs into the next tile while the consumer warpgroup is in its
 * epilogue) */
template <int BM, int ST> struct ws_stages { static constexpr int v = BM == 128 ? ST : 8; };
/* the epilogue warpgroup's form: 5 stages of the e4m3 128 x 128 tile, 3 of bf16's 128 x 256 (beside 64 KB of sums) */
template <int BN> struct ew_stages { static constexpr int v = BN == 256 ? 3 : 5; };

/* one instantiation of the GEMM: its shared-memory limit and its launch;
 * the 64- and 128-row wgmma tiles also have the warp-specialized persistent
 * form (fast_ws.cuh, NOTES.md v13, v20), launched when the plan says persistent
 * (form WS_ON), and the e4m3 128 x 128 one (NOTES.md v25) and bf16's 128 x 256
 * GEMM1 (gated: its sums handed over rounded, v27) a form with the epilogue
 * in a warpgroup of its own on 5 / 3 stages (WS_EPI_WG) */
enum { WS_OFF = 0, WS_ON = 1, WS_EPI_WG = 2, WS_DECODE1 = 3, WS_DECODE2 = 4 };
template <class T, int BM, int BN, int WM, int WN, int ST, bool WG, int QS> struct tile {
    static constexpr bool WS = WG && BM >= 64;
    /* the one-CTA-a-tile form (gemm_kernel): every tile but the 4-bit wgmma one, whose producer warpgroup
     * dequantizes (fast_ws.cuh; fx_forward refuses it without plan.persistent) */
    static constexpr bool ONE = !(WG && QS >= fx::QS_W4_INT);
    /* the swapped decode tiles of 128 weight rows (their shallow forms too) have a persistent form
     * (fast_swp.cuh, plan.decode_ws), launched as WS_DECODE1 / WS_DECODE2 (one / two CTAs an SM) */
    static constexpr bool DWS = WG && BM < 64 && BN == 128 && fx::swp_has<T, QS>::v;
    template <int EPI> static constexpr bool EW = WS && BM == 128 && QS < fx::QS_W4_INT &&
                                                  (std::is_same<T, __nv_fp8_e4m3>::value ||
                                                   (std::is_same<T, int8_t>::value && (BN == 128 || EPI == fx::EPI_GATED)) ||
                                                   (std::is_same<T, __nv_bfloat16>::value && EPI == fx::EPI_GATED));
    /* the e4m3 128-row tiles with epilogue scales also promote every two k tiles (plan.promote_k 256,
     * g.promote_tiles 2; NOTES.md v47) */
    static constexpr bool PT2 = WS && BM == 128 && std::is_same<T, __nv_fp8_e4m3>::value && QS == fx::QS_EPILOGUE;
    template <int EPI> static cudaError_t prepare()
    {
        cudaError_t ce = cudaSuccess;
        if constexpr (PT2) {
            ce = fx::gemm_ws_prepare<T, BM, BN, ws_stages<BM, ST>::v, EPI, QS, false, 2>();
            if (ce == cudaSuccess) ce = fx::gemm_ws_prepare<T, BM, BN, ew_stages<BN>::v, EPI, QS, true, 2>();
            if (ce != cudaSuccess) return ce;
        }
        if constexpr (ONE) ce = fx::gemm_prepare<T, BM, BN, WM, WN, ST, EPI, WG, QS>();
        if constexpr (WS)
            if (ce == cudaSuccess) ce = fx::gemm_ws_prepare<T, BM, BN, ws_stages<BM, ST>::v, EPI, QS>();
        if constexpr (EW<EPI>)
            if (ce == cudaSuccess) ce = fx::gemm_ws_prepare<T, BM, BN, ew_stages<BN>::v, EPI, QS, true>();
        if constexpr (DWS)
            if (ce == cudaSuccess) ce = fx::swp_prepare<T, BM, EPI, QS>();
        return ce;
    }
    template <int EPI> static cudaError_t launch(const fx::gemm_params &g, int max_blocks, int n_cols, cudaStream_t s, int ws)
    {
        if constexpr (DWS)
            if (ws == WS_DECODE1 || ws == WS_DECODE2) return fx::swp_launch<T, BM, EPI, QS>(g, max_blocks, n_cols, s, ws - WS_DECODE1 + 1);
        if constexpr (PT2)
            if (g.promote_tiles == 2 && ws != WS_OFF)
                return ws == WS_EPI_WG ? fx::gemm_ws_launch<T, BM, BN, ew_stages<BN>::v, EPI, QS, true, 2>(g, max_blocks, n_cols, s, true)
                                       : fx::gemm_ws_launch<T, BM, BN, ws_stages<BM, ST>::v, EPI, QS, false, 2>(g, max_blocks, n_cols, s, true);
        if constexpr (EW<EPI>)
            if (ws == WS_EPI_WG) return fx::gemm_ws_launch<T, BM, BN, ew_stages<BN>::v, EPI, QS, true>(g, max_blocks, n_cols, s, true);
        if constexpr (WS)
            if (ws != WS_OFF) return fx::gemm_ws_launch<T, BM, BN, ws_stages<BM, ST>::v, EPI, QS>(g, max_blocks, n_cols, s, true);
        if constexpr (ONE) return fx::gemm_launch<T, BM, BN, WM, WN, ST, EPI, WG, QS>(g, max_blocks, n_cols, s, true);
        return cudaErrorInvalidValue;
    }
};

/* Decode tiles keep 6 / 8 stages of weights in flight (a CTA's k loop is
 * a chain of memory round trips: 4 stages left DeepSeek M = 16 at 90% of the
 * read bandwidth, 6 / 8 at 95%); 4-bit stages hold a quarter of the bytes,
 * so more of them (48 KB a decode CTA since the codes go straight into
 * fragments, v12; the 64-row 4-bit tiles add a 16 KB dequantized row buffer); a 64 x 256 wgmma tile for the middle range lost to the
 * 64 x 128 mma.sync one (NOTES.md, v5). The 16 x 64 tile runs four warps of
 * 16 columns (two of 32 before): a decode CTA's k loop is bound by its
 * warps' instruction latency, not by the weights in flight (NOTES.md v15:
 * Qwen3-30B-A3B M = 1 33.6 -> 29.2 us). */
template <class T, int QS, class F> cudaError_t with_tile_t(int c, F f)
{
    constexpr int W4 = QS >= fx::QS_W4_INT;
    constexpr bool SWT = (sizeof(T) == 2 && !W4) || std::is_same<T, __nv_fp8_e4m3>::value; /* swapped tiles */
    constexpr bool I8 = std::is_same<T, int8_t>::value; /* int8's 128-row wgmma tiles (NOTES.md v55) */
    switch (c) {
    case CFG_16x128: return f(tile<T, 16, 128, 1, 4, W4 ? 8 : 6, false, QS>());
    case CFG_16x64: return f(tile<T, 16, 64, 1, W4 ? 2 : 4, W4 ? 12 : 8, false, QS>());
    case CFG_64x128: return f(tile<T, 64, 128, 2, 4, W4 ? 6 : 4, false, QS>());
    case CFG_128x256:
        if constexpr (sizeof(T) == 2 || I8) return f(tile<T, 128, 256, 8, 1, 4, true, QS>());
        break;
    case CFG_128x128:
        if constexpr (std::is_same<T, __nv_fp8_e4m3>::value || I8) return f(tile<T, 128, 128, 8, 1, 6, true, QS>());
        break;
    case CFG_64x128W:
        if constexpr (SWT) return f(tile<T, 64, 128, 4, 1, 4, true, QS>());
        break;
    case CFG_16x128S:
        if constexpr (SWT) return f(tile<T, 16, 128, 1, 4, 6, true, QS>());
        break;
    case CFG_16x64S:
        if constexpr (SWT) return f(tile<T, 16, 64, 1, 4, 8, true, QS>());
        break;
    case CFG_32x128S:
        if constexpr (SWT) return f(tile<T, 32, 128, 2, 2, 5, true, QS>());
        break;
    case CFG_32x64S:
        if constexpr (SWT) return f(tile<T, 32, 64, 2, 2, 8, true, QS>());
        break;
    case CFG_16x128S3:
        if constexpr (SWT) return f(tile<T, 16, 128, 1, 4, 4, true, QS>());
        break;
    case CFG_16x64S3:
        if constexpr (SWT) return f(tile<T, 16, 64, 1, 4, 6, true, QS>());
        break;
    case CFG_64x128W3:
        if constexpr (SWT) return f(tile<T, 64, 128, 4, 1, 3, true, QS>());
        break;
    }
    return cudaErrorInvalidValue;
}

template <class F> cudaError_t with_tile(fx_kind k, int c, F f)
{
    if (!fx_cfg_ok(k, c)) return cudaErrorInvalidValue;
    switch (k) {
    case KIND_BF16: return with_tile_t<__nv_bfloat16, 0>(c, f);
    case KIND_FP8: return with_tile_t<__nv_fp8_e4m3, fx::QS_EPILOGUE>(c, f);
    case KIND_FP8_BLOCK: return with_tile_t<__nv_fp8_e4m3, fx::QS_KTILE>(c, f);
    case KIND_W4: return with_tile_t<__nv_bfloat16, fx::QS_W4_INT>(c, f);
    case KIND_MX4: return with_tile_t<__nv_bfloat16, fx::QS_W4_MX>(c, f);
    default: return with_tile_t<int8_t, 0>(c, f);
    }
}

/* the scale geometry of one GEMM (gemm_params' as_rs and ws_*): weights
 * [E, N, K] scaled per expert, per row or per 128 x 128 block */
void scale_geom(const moe_cuda_fx_problem *p, int N, int K, fx::gemm_params *g)
{
    moe_quant_spec ws;
    g->as_rs = fx_act_scale_cols(p, K);
    if (moe_scheme_spec(p->scheme, MOE_OPERAND_WEIGHT, &ws) != MOE_OK) return;
    if (ws.gran == MOE_GRAN_TENSOR) g->ws_e = 1, g->ws_sh = 0, g->ws_n = 0;
    else if (ws.gran == MOE_GRAN_ROW) g->ws_e = N, g->ws_sh = 0, g->ws_n = 1;
    else { /* BLOCK: block_n = group_k = 128 */
        const int kb = (K + ws.group_k - 1) / ws.group_k;
        g->ws_e = (N + ws.block_n - 1) / ws.block_n * kb, g->ws_sh = 7, g->ws_n = kb;
    }
}

} // namespace

/* pdl: a programmatic dependent of the kernel before it, which must not
 * read the layout (the forward: x's quantization) */
static moe_status align_launch(const int32_t *topk_ids, int M, int topk, int E, int bm, const moe_cuda_fx_layout *L,
                               void *stream, bool pdl)
{
    if (E < 1 || E > FX_ALIGN_THREADS) return moe_fail(MOE_ERR_UNSUPPORTED, "fx_align: E = %d, the rule is 1 <= E <= %d", E, FX_ALIGN_THREADS);
    if (bm < 1) return moe_fail(MOE_ERR_INVALID_ARG, "fx_align: bm = %d, must be >= 1", bm);
    const int n = M * topk;
    if (n >= ALIGN_SPLIT_MIN && !L->part)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_align: L->part is NULL: from %d slots (here %d) the align needs the "
                        "layout's scratch; carve the layout with moe_cuda_fx_layout_carve", ALIGN_SPLIT_MIN, n);
    if (n >= ALIGN_SPLIT_MIN) { /* two kernels on FX_ALIGN_SPLIT_CTAS CTAs, the second a programmatic dependent */
        cudaError_t ce = launch_sm(align_count_kernel, FX_ALIGN_SPLIT_CTAS, FX_ALIGN_THREADS, E * sizeof(int), S(stream), pdl,
                                   topk_ids, n, E, L->part);
        if (ce == cudaSuccess)
            ce = launch_sm(align_place_kernel, FX_ALIGN_SPLIT_CTAS, FX_ALIGN_THREADS, 3 * E * sizeof(int), S(stream), true, topk_ids,
                           n, E, bm, *L);
        return ce == cudaSuccess ? MOE_OK : moe_cu_fail(ce, "fx align_count_kernel / align_place_kernel");
    }
    const cudaError_t ce = launch_sm(align_kernel, 1, FX_ALIGN_THREADS, 3 * E * sizeof(int), S(stream), pdl, topk_ids,
                                     n, E, bm, *L);
    return ce == cudaSuccess ? MOE_OK : moe_cu_fail(ce, "fx align_kernel");
}

extern "C" moe_status moe_cuda_fx_align(const int32_t *topk_ids, int M, int topk, int E, int bm,
                                        const moe_cuda_fx_layout *L, void *stream)
{
    return align_launch(topk_ids, M, topk, E, bm, L, stream, false);
}

extern "C" moe_status moe_cuda_fx_gather(const void *x, moe_dtype dt, int H, int topk, const moe_cuda_fx_layout *L,
                                         int rows, void *xs, void *stream)
{
    if ((dt != MOE_BF16 && dt != MOE_F16) || H % 8)
        return moe_fail(MOE_ERR_UNSUPPORTED, "fx_gather: dtype must be bf16/f16 and H (%d) a multiple of 8", H);
    const int64_t n = (int64_t)rows * (H / 8);
    gather_kernel<<<grid_for(n, 256), 256, 0, S(stream)>>>((const uint4 *)x, H / 8, topk, L->sorted, rows, (uint4 *)xs);
    return moe_cu_launched("fx gather_kernel");
}

extern "C" moe_status moe_cuda_fx_act_rows(const void *y1, int rows, int I, const moe_act_params *act, moe_dtype dt,
                                           void *h, void *stream)
{
    if (!act || !moe_act_is_gated(act->act) || act->layout != MOE_LAYOUT_GATE_UP || act->swiglu_alpha ||
        act->swiglu_beta || act->swiglu_limit)
        return moe_fail(MOE_ERR_UNSUPPORTED, "fx_act_rows: act must be gated, layout gate_up, no per-expert tensors");
    const int64_t n = (int64_t)rows * I;
    if (dt == MOE_BF16)
        act_kernel<__nv_bfloat16><<<grid_for(n, 256), 256, 0, S(stream)>>>((const __nv_bfloat16 *)y1, rows, I, *act,
                                                                             (__nv_bfloat16 *)h);
    else if (dt == MOE_F16)
        act_kernel<__half><<<grid_for(n, 256), 256, 0, S(stream)>>>((const __half *)y1, rows, I, *act, (__half *)h);
    else return moe_fail(MOE_ERR_UNSUPPORTED, "fx_act_rows: dtype must be bf16 or f16");
    return moe_cu_launched("fx act_kernel");
}

extern "C" moe_status moe_cuda_fx_combine(const void *y, const moe_cuda_fx_layout *L, const float *topk_w, int M, int topk,
                                          int H, moe_dtype dt, void *out, void *stream)
{
    return combine(y, L, topk_w, M, topk, H, dt, out, stream, false);
}

extern "C" moe_status moe_cuda_fx_plan_make(const moe_cuda_fx_problem *p, moe_cuda_fx_plan *plan)
{
    int c1, c2;
    const moe_status st = fx_plan_choose(p, fx::encode_tiled() != nullptr, plan, &c1, &c2);
    if (st) return st;
    const fx_kind kind = fx_kind_of(p->scheme);
    const int gk = fx_gemv_kind(kind);
    /* raise the shared-memory limit of the kernels this plan launches and of
     * the forms a caller may select by clearing a flag (fast.h): the deep
     * form of a shallow tile, the mma.sync form of a 16-row swapped tile and
     * of the wgmma 64-row tile */
    const int f1[3] = {c1, fx_cfgs[c1].deep, fx_cfgs[c1].mma}, f2[3] = {c2, fx_cfgs[c2].deep, fx_cfgs[c2].mma};
    cudaError_t ce = cudaSuccess;
    for (int form = 0; form < 3 && ce == cudaSuccess; form++) {
        ce = with_tile(kind, f1[form], [&](auto t) { return decltype(t)::template prepare<fx::EPI_GATED>(); });
        if (ce == cudaSuccess)
            ce = with_tile(kind, f2[form], [&](auto t) {
                return p->atomic ? decltype(t)::template prepare<fx::EPI_WATOMIC>() : decltype(t)::template prepare<fx::EPI_WSTORE>();
            });
    }
    if (ce == cudaSuccess && gk >= 0 && fx_gemv_fits(gk, p->topk, p->H, p->I)) {
        fx::gemv_io io;
        memset(&io, 0, sizeof io);
        io.kind = gk;
        if (fx_is_q8(p)) moe_scheme_spec(p->scheme, MOE_OPERAND_ACT, &io.as);
        ce = fx::gemv_prepare(io);
    }
    if (ce != cudaSuccess) return moe_cu_fail(ce, "cudaFuncSetAttribute (fx gemm)");
    return MOE_OK;
}

extern "C" moe_status moe_cuda_fx_forward(const moe_cuda_fx_problem *p, const moe_cuda_fx_plan *plan,
                                          const moe_cuda_fx_args *a, void *workspace, void *stream)
{
    if (!p || !plan || !a || !workspace)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: problem, plan, args and workspace must not be NULL");
    int c1, c2;
    const moe_status st = fx_plan_check(p, plan, a, fx::encode_tiled() != nullptr, &c1, &c2);
    if (st) return st;
    const fx_kind kind = fx_kind_of(p->scheme);
    const int q8 = fx_is_q8(p);
    const int scaled = kind != KIND_BF16;
    const int tensor = p->scheme == MOE_SCHEME_FP8_WTENSOR_ATENSOR;
    const int tiled = plan->weight_tiled && plan->tma && !fx_is_w4(kind);
    const int gk = fx_gemv_kind(kind);
    fx_ws w;
    fx_carve(p, plan->bm1, workspace, &w);
    moe_quant_spec as;
    memset(&as, 0, sizeof as);
    if (q8) moe_scheme_spec(p->scheme, MOE_OPERAND_ACT, &as);
    moe_act_params act = p->act;
    act.layout = MOE_LAYOUT_GATE_UP;
    fx::gemm_params g1;
    memset(&g1, 0, sizeof g1);
    g1.a = q8 ? (const void *)w.xq : a->x, g1.a_gather = 1, g1.a_div = p->topk;
    g1.sorted = w.L.sorted, g1.block_expert = w.L.block_expert, g1.num_blocks = w.L.num_blocks;
    g1.w = a->w1, g1.N = 2 * p->I, g1.K = p->H, g1.I = p->I, g1.out = w.h, g1.act = act, g1.topk = p->topk;
    if (q8) g1.a_scale = w.sx, scale_geom(p, 2 * p->I, p->H, &g1);
    if (scaled) g1.w_scale = a->w1_scale;
    if (tensor) g1.amax_out = w.amax + 1;
    g1.tile_next = w.tiles, g1.b_tma = plan->tma, g1.b_promo = plan->weight_promo, g1.E = p->E, g1.pad_skip = plan->pad_skip;
    g1.promote_tiles = plan->promote_k / 128;
    g1.w_tiled = tiled ? a->w1_tiled : NULL;
    if (plan->slot_layout) g1.slot_ids = a->topk_ids, g1.row_of_slot = w.L.row_of_slot, g1.slot_bm = plan->bm1, g1.slot_write = 1;
    /* GEMM1, GEMM2 and the combine are programmatic dependents of the
     * kernel before each (NOTES.md, v7): their launch latency hides under
     * the previous kernel, and GEMM2 streams its first weight tiles while
     * GEMM1 (8-bit: the quantization of h) finishes; decode GEMM1 lets the
     * next kernel start early */
    g1.pdl_trigger = plan->trigger_early;
    fx::gemm_params g2 = g1;
    g2.a = q8 ? (const void *)w.hq : w.h, g2.a_gather = 0, g2.a_div = 1, g2.w = a->w2, g2.N = p->H, g2.K = p->I, g2.I = 0;
    g2.w_tiled = tiled ? a->w2_tiled : NULL;
    g2.topk_w = a->topk_w, g2.pdl_trigger = 0, g2.pdl_prefetch = 1, g2.amax_out = NULL, g2.tile_next = w.tiles + 1;
    g2.slot_write = 0;
    if (q8) g2.a_scale = w.sh, scale_geom(p, p->H, p->I, &g2);
    if (scaled) g2.w_scale = a->w2_scale;
    if (plan->gemv) { /* M = 1: two matrix-vector kernels (fast_gemv.cu), h in bf16 as GEMV2's operand */
        fx::gemv_io io;
        memset(&io, 0, sizeof io);
        io.x = a->x, io.kind = gk, io.as = as, io.xq = w.xq, io.hq = w.hq, io.sx = w.sx, io.sh = w.sh;
        io.atomic = p->atomic, io.out = a->out;
        g2.a = w.h, g2.out = p->atomic ? NULL : w.y;
        const cudaError_t ge = fx::gemv_forward(g1, g2, io, S(stream));
        return ge == cudaSuccess ? MOE_OK : moe_cu_fail(ge, "fx gemv launch");
    }
    cudaError_t ce;
    if (p->atomic) MOE_CU(cudaMemsetAsync(w.acc, 0, (size_t)p->M * p->H * 4, S(stream)));
    if (tensor) MOE_CU(cudaMemsetAsync(w.amax, 0, 2 * 4, S(stream)));
    if (plan->persistent) MOE_CU(cudaMemsetAsync(w.tiles, 0, 2 * 4, S(stream)));
    if (tensor) {
        const int64_t n = (int64_t)p->M * p->H;
        const unsigned gb = grid_for(n / 8, 256);
        ce = launch_ex(amax_kernel, gb < 4 * 132 ? gb : 4 * 132, 256, S(stream), false, (const __nv_bfloat16 *)a->x, n, w.amax);
        if (ce != cudaSuccess) return moe_cu_fail(ce, "fx amax_kernel (x)");
    }
    if (q8) { /* x, before the align (which does not read it) */
        ce = quant_rows(as, p->H, p->M, S(stream), false, (const __nv_bfloat16 *)a->x, p->H,
                       (const int32_t *)NULL, as, (const float *)w.amax, w.xq, w.sx, plan->slot_layout ? 0 : 1);
        if (ce != cudaSuccess) return moe_cu_fail(ce, "fx quant_rows_kernel (x)");
    }
    if (!plan->slot_layout) {
        moe_status st = align_launch(a->topk_ids, p->M, p->topk, p->E, plan->bm1, &w.L, stream, q8 != 0);
        if (st) return st;
    }
    const int M = p->M, I = p->I, H = p->H;
    const int ew = fx_epi_wg_runs(plan);
    int ws1 = !plan->persistent ? WS_OFF : ew & 1 ? WS_EPI_WG : WS_ON, ws2 = !plan->persistent ? WS_OFF : ew & 2 ? WS_EPI_WG : WS_ON;
    if (fx_dws_runs(plan, c1)) ws1 = WS_DECODE1 + plan->decode_ws - 1;
    if (fx_dws_runs(plan, c2)) ws2 = WS_DECODE1 + plan->decode_ws - 1;
    cudaStream_t s = S(stream);
    ce = with_tile(kind, c1, [&](auto t) { return decltype(t)::template launch<fx::EPI_GATED>(g1, plan->max_blocks, I, s, ws1); });
    if (ce != cudaSuccess) return moe_cu_fail(ce, "fx gemm1 launch");
    if (q8) { /* h: the slots' rows (the slot layout's row_of_slot is GEMM1's) */
        const int64_t P = (int64_t)M * p->topk;
        ce = quant_rows(as, I, P, s, true, (const __nv_bfloat16 *)w.h, I,
                       (const int32_t *)w.L.row_of_slot, as, (const float *)(w.amax ? w.amax + 1 : NULL), w.hq, w.sh,
                       plan->h_trigger);
        if (ce != cudaSuccess) return moe_cu_fail(ce, "fx quant_rows_kernel (h)");
    }
    if (p->atomic) {
        g2.acc_out = w.acc; /* zeroed before the align */
        ce = with_tile(kind, c2, [&](auto t) { return decltype(t)::template launch<fx::EPI_WATOMIC>(g2, plan->max_blocks, H, s, ws2); });
        if (ce != cudaSuccess) return moe_cu_fail(ce, "fx gemm2 launch");
        const int64_t n = (int64_t)M * H;
        ce = launch_ex(convert_kernel<__nv_bfloat16>, grid_for(n, 256), 256, s, true, (const float *)w.acc, n,
                       (__nv_bfloat16 *)a->out);
        return ce == cudaSuccess ? MOE_OK : moe_cu_fail(ce, "fx convert_kernel");
    }
    g2.out = w.y;
    ce = with_tile(kind, c2, [&](auto t) { return decltype(t)::template launch<fx::EPI_WSTORE>(g2, plan->max_blocks, H, s, ws2); });
    if (ce != cudaSuccess) return moe_cu_fail(ce, "fx gemm2 launch");
    return combine(w.y, &w.L, NULL, M, p->topk, H, MOE_BF16, a->out, stream, true);
}

extern "C" moe_status moe_cuda_fx_fetch(const moe_cuda_fx_problem *p, const moe_cuda_fx_plan *plan, const void *workspace,
                                        moe_cuda_fx_piece w, void *host, size_t bytes)
{
    if (!p || !plan || !workspace || !host)
        return moe_fail(MOE_ERR_NULL, "fx_fetch: problem, plan, workspace and host must not be NULL");
    fx_ws ws;
    fx_carve(p, plan->bm1, (void *)workspace, &ws);
    const void *src = NULL;
    size_t b = 0;
    if (!fx_piece_of(p, plan, w, &ws, &src, &b)) return moe_fail(MOE_ERR_INVALID_ARG, "fx_fetch: piece %d unknown", (int)w);
    if (!b || bytes != b)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_fetch: piece %d has %zu bytes for this problem, %zu asked", (int)w, b, bytes);
    MOE_CU(cudaMemcpy(host, src, b, cudaMemcpyDeviceToHost));
    return MOE_OK;
}
