/* The fast experts path (fast.h): layout, gather, activation, combine and
 * the fused forward around the tensor-core GEMM of fast_gemm.cuh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_internal.h"
#include "fast.h"
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

const int ALIGN_THREADS = 1024; /* one CTA: E <= 1024 counters in shared memory */
constexpr int ALIGN_SPLIT_CTAS = 32; /* the split align's CTAs (align_count_kernel, fast.h's layout part) */

size_t up256(size_t b) { return (b + 255) & ~(size_t)255; }

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

__global__ void __launch_bounds__(ALIGN_THREADS) align_kernel(const int32_t *ids, int n, int E, int bm,
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

/* From ALIGN_SPLIT_MIN slots the counting sort runs on ALIGN_SPLIT_CTAS
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
__global__ void __launch_bounds__(ALIGN_THREADS) align_count_kernel(const int32_t *ids, int n, int E, int32_t *part)
{
    extern __shared__ int cnt[];
    const int tid = threadIdx.x, chunk = (n + ALIGN_SPLIT_CTAS - 1) / ALIGN_SPLIT_CTAS;
    const int lo = blockIdx.x * chunk, hi = min(n, lo + chunk);
    for (int e = tid; e < E; e += blockDim.x) cnt[e] = 0;
    __syncthreads();
    count_slots(ids, lo, hi, E, cnt);
    __syncthreads();
    for (int e = tid; e < E; e += blockDim.x) part[blockIdx.x * E + e] = cnt[e];
    /* align_kernel's: launched as a dependent of x's quantization, it ends only once that grid has */
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
}

__global__ void __launch_bounds__(ALIGN_THREADS) align_place_kernel(const int32_t *ids, int n, int E, int bm,
                                                                     moe_cuda_fx_layout L)
{
    extern __shared__ int sh[]; /* base[E], fill[E], boff[E] */
    __shared__ int warp_tot[32], total;
    int *base = sh, *fill = sh + E, *boff = sh + 2 * E;
    const int tid = threadIdx.x, chunk = (n + ALIGN_SPLIT_CTAS - 1) / ALIGN_SPLIT_CTAS;
    const int lo = blockIdx.x * chunk, hi = min(n, lo + chunk);
    asm volatile("griddepcontrol.wait;\n" ::: "memory"); /* part: align_count_kernel's */
    int c = 0;
    if (tid < E) {
        int b = 0;
        for (int g = 0; g < ALIGN_SPLIT_CTAS; g++) {
            const int v = L.part[g * E + tid];
            c += v, b += g < (int)blockIdx.x ? v : 0;
        }
        base[tid] = b, fill[tid] = 0;
    }
    const int off = block_excl_scan((c + bm - 1) / bm, warp_tot, &total);
    if (tid < E) {
        boff[tid] = off;
        if (blockIdx.x == 0) L.counts[tid] = c, L.offsets[tid] = off * bm;
        if (tid % ALIGN_SPLIT_CTAS == (int)blockIdx.x) expert_rows(tid, c, off, bm, L);
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

/* The tile configurations (NOTES.md: why these). Decode: 16-row blocks,
 * 4 warps side by side along N (BN 128, or BN 64 when too few CTAs would
 * stream the weights; the 4-bit schemes' BN 64 tile keeps 2). Prefill: 64-row blocks of 8 warps; 128-row blocks
 * of two warpgroups, 128 x 256 for bf16, 128 x 128 for e4m3 (the promotion
 * keeps a second set of accumulators: 2 x 64 registers a thread), either
 * for int8 (s32 sums, no promotion; plan_make, NOTES.md v55). e4m3's
 * middle range (17-64 rows an expert) runs one warpgroup on 64 x 128
 * (64x128W): mma.sync e4m3 runs at half the rate of s8 on this chip, and
 * two such CTAs an SM overlap one's promotion with the other's wgmma (v11). */
enum Cfg {
    CFG_16x128 = 0, CFG_16x64, CFG_64x128, CFG_128x256, CFG_128x128, CFG_64x128W,
    CFG_16x128S, CFG_16x64S, CFG_32x128S, CFG_32x64S, CFG_16x128S3, CFG_16x64S3, CFG_64x128W3, CFG_COUNT
};
const int CFG_BM[CFG_COUNT] = {16, 16, 64, 128, 128, 64, 16, 16, 32, 32, 16, 16, 64},
          CFG_BN[CFG_COUNT] = {128, 64, 128, 256, 128, 128, 128, 64, 128, 64, 128, 64, 128};
/* the swapped decode tiles (weights as wgmma's A; plan.swapped) */
int is_swapped(int c) { return c >= CFG_16x128S && c <= CFG_16x64S3; }
/* the shallow tiles (plan.shallow1 / shallow2), three CTAs an SM instead
 * of two: the 16-row swapped tiles with fewer stages (4 / 6 of 6 / 8), each
 * its deep form's index plus CFG_16x128S3 - CFG_16x128S, and the e4m3
 * 64-row wgmma tile on 3 stages of 4 (deep form CFG_64x128W, deep_cfg) */
int is_shallow(int c) { return c == CFG_16x128S3 || c == CFG_16x64S3 || c == CFG_64x128W3; }
/* the wgmma 64-row tile, 4 stages (two CTAs an SM) or 3 (three) */
int is_w64(int c) { return c == CFG_64x128W || c == CFG_64x128W3; }
static_assert(CFG_16x64S3 - CFG_16x64S == CFG_16x128S3 - CFG_16x128S, "shallow = deep + one offset");

/* What the GEMMs multiply: bf16 values, e4m3 codes with epilogue scales
 * (per tensor / per row), e4m3 codes with k-tile scales (block 128), int8
 * codes with epilogue scales, bf16 x times 4-bit weight codes dequantized
 * in the kernel (int4 groups of 128, e2m1 with MX scales). */
enum Kind { KIND_BF16 = 0, KIND_FP8, KIND_FP8_BLOCK, KIND_I8, KIND_W4, KIND_MX4 };

Kind kind_of(moe_scheme s)
{
    switch (s) {
    case MOE_SCHEME_FP8_WTENSOR_ATENSOR:
    case MOE_SCHEME_FP8_WCHANNEL_ATOKEN: return KIND_FP8;
    case MOE_SCHEME_FP8_WBLOCK128_AGROUP128: return KIND_FP8_BLOCK;
    case MOE_SCHEME_INT8_WCHANNEL_ATOKEN: return KIND_I8;
    case MOE_SCHEME_W4A16_G128: return KIND_W4;
    case MOE_SCHEME_MXFP4_W4A16: return KIND_MX4;
    default: return KIND_BF16;
    }
}

/* the 4-bit weight codes (int4 groups of 128, e2m1 with MX scales) */
int is_w4(Kind k) { return k == KIND_W4 || k == KIND_MX4; }

int scheme_ok(moe_scheme s)
{
    return s == MOE_SCHEME_BF16 || kind_of(s) != KIND_BF16;
}

/* the tiles each kind has: the wgmma ones are bf16 (128 x 256, also for the
 * 4-bit weights, dequantized by its producer: persistent only), e4m3
 * (128 x 128, promoted) and int8 (both 128-row shapes, s32 sums: NOTES.md
 * v55); int8's other tiles are mma.sync */
int cfg_ok(Kind k, int c)
{
    if (c < 0 || c >= CFG_COUNT) return 0;
    if (c == CFG_128x256) return k == KIND_BF16 || is_w4(k) || k == KIND_I8;
    if (c == CFG_128x128) return k == KIND_FP8 || k == KIND_FP8_BLOCK || k == KIND_I8;
    if (is_w64(c)) return k == KIND_FP8 || k == KIND_FP8_BLOCK || k == KIND_BF16;
    if (is_swapped(c)) return k == KIND_BF16 || k == KIND_FP8 || k == KIND_FP8_BLOCK;
    return 1;
}

/* a decode tile in its swapped wgmma form (plan.swapped), 16 or 32 token
 * rows, and a 16-row swapped tile in its mma.sync form */
int swap_cfg(int c, int rows32)
{
    if (c == CFG_16x128) return rows32 ? CFG_32x128S : CFG_16x128S;
    return c == CFG_16x64 ? (rows32 ? CFG_32x64S : CFG_16x64S) : c;
}
int unswap_cfg(int c)
{
    return c == CFG_16x128S || c == CFG_16x128S3 ? CFG_16x128 : c == CFG_16x64S || c == CFG_16x64S3 ? CFG_16x64 : c;
}
/* Where a 16-row swapped tile gives up pipeline depth for a third CTA an
 * SM (NOTES.md v18, same-binary A/B). 16 x 64 when its grid's last wave
 * is fuller at three an SM than at two (ceil(c / 396) 396 <= ceil(c / 264)
 * 264: a grid of 265-396 CTAs becomes one wave; gpt-oss-120b M = 1 7-13%
 * faster); 16 x 128 when the GEMM has at most 16 k tiles and more than two waves
 * at three an SM (the k loop fits in the 6-stage pipeline, so a CTA is one
 * fill and one drain: Qwen3-30B-A3B fp8 M = 16-256 6-22% faster). Long k
 * chains keep the deep pipeline (Mixtral-8x7B M = 1 bf16 9% slower
 * shallow), and so do short ones on a grid of fewer waves (DeepSeek-V3
 * M = 1 GEMM2, 448 CTAs: 4% slower). */
int shallow_cfg(int c, int k_tiles, int64_t ctas)
{
    const int64_t two = 2 * 132, three = 3 * 132;
    const bool tail = (ctas + three - 1) / three * three <= (ctas + two - 1) / two * two;
    if (c == CFG_16x128S && k_tiles <= 16 && (tail || ctas > 2 * three)) return CFG_16x128S3;
    if (c == CFG_16x64S && tail) return CFG_16x64S3;
    return c;
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

template <class F> cudaError_t with_tile(Kind k, int c, F f)
{
    if (!cfg_ok(k, c)) return cudaErrorInvalidValue;
    switch (k) {
    case KIND_BF16: return with_tile_t<__nv_bfloat16, 0>(c, f);
    case KIND_FP8: return with_tile_t<__nv_fp8_e4m3, fx::QS_EPILOGUE>(c, f);
    case KIND_FP8_BLOCK: return with_tile_t<__nv_fp8_e4m3, fx::QS_KTILE>(c, f);
    case KIND_W4: return with_tile_t<__nv_bfloat16, fx::QS_W4_INT>(c, f);
    case KIND_MX4: return with_tile_t<__nv_bfloat16, fx::QS_W4_MX>(c, f);
    default: return with_tile_t<int8_t, 0>(c, f);
    }
}

int pick_bn(int touched_est, int n_cols_per128) /* CFG for a decode GEMM */
{
    return (int64_t)touched_est * n_cols_per128 < 2 * 132 ? CFG_16x64 : CFG_16x128;
}

struct fx_ws {
    moe_cuda_fx_layout L;
    void *h, *y;
    float *acc;
    uint8_t *xq, *hq; /* 8-bit schemes: quantized x [M, H] and h [cap, I] */
    float *sx, *sh;   /* their scales */
    float *amax;      /* fp8_wtensor_atensor: max |x|, max |h| */
    int *tiles;       /* the persistent GEMMs' tile counters (GEMM1, GEMM2) */
};

/* x and h quantized to 8-bit codes in the forward */
int is_q8(const moe_cuda_fx_problem *p)
{
    const Kind k = kind_of(p->scheme);
    return k == KIND_FP8 || k == KIND_FP8_BLOCK || k == KIND_I8;
}

/* the matrix-vector forward's kind of operands (fast_gemv.h), -1 where it has none */
int gemv_kind(Kind k)
{
    return k == KIND_BF16 ? fx::GV_BF16 : k == KIND_FP8 ? fx::GV_FP8 : k == KIND_FP8_BLOCK ? fx::GV_FP8_BLOCK
                                      : k == KIND_I8 ? fx::GV_I8 : k == KIND_W4 ? fx::GV_W4 : k == KIND_MX4 ? fx::GV_MX4 : -1;
}

/* activation scales per row of a K-wide operand: one per 128-group, one
 * per row, or one for the tensor (0) */
int act_scale_cols(const moe_cuda_fx_problem *p, int K)
{
    moe_quant_spec as;
    if (moe_scheme_spec(p->scheme, MOE_OPERAND_ACT, &as) != MOE_OK) return 1;
    return as.gran == MOE_GRAN_GROUP ? (K + as.group_k - 1) / as.group_k : as.gran == MOE_GRAN_TENSOR ? 0 : 1;
}

/* the scale geometry of one GEMM (gemm_params' as_rs and ws_*): weights
 * [E, N, K] scaled per expert, per row or per 128 x 128 block */
void scale_geom(const moe_cuda_fx_problem *p, int N, int K, fx::gemm_params *g)
{
    moe_quant_spec ws;
    g->as_rs = act_scale_cols(p, K);
    if (moe_scheme_spec(p->scheme, MOE_OPERAND_WEIGHT, &ws) != MOE_OK) return;
    if (ws.gran == MOE_GRAN_TENSOR) g->ws_e = 1, g->ws_sh = 0, g->ws_n = 0;
    else if (ws.gran == MOE_GRAN_ROW) g->ws_e = N, g->ws_sh = 0, g->ws_n = 1;
    else { /* BLOCK: block_n = group_k = 128 */
        const int kb = (K + ws.group_k - 1) / ws.group_k;
        g->ws_e = (N + ws.block_n - 1) / ws.block_n * kb, g->ws_sh = 7, g->ws_n = kb;
    }
}

/* bytes of the workspace; with ws, its pieces too */
size_t carve(const moe_cuda_fx_problem *p, int bm, void *ws, fx_ws *w)
{
    const size_t cap = (size_t)moe_cuda_fx_layout_cap(p->M, p->topk, p->E, bm);
    size_t off = up256(moe_cuda_fx_layout_bytes(p->M, p->topk, p->E, bm));
    char *c = (char *)ws;
    auto take = [&](size_t bytes) { void *q = c ? c + off : NULL; off += up256(bytes); return q; };
    if (ws) moe_cuda_fx_layout_carve(ws, p->M, p->topk, p->E, bm, &w->L);
    void *h = take(cap * p->I * 2);
    void *y = p->atomic ? NULL : take(cap * p->H * 2);
    void *acc = p->atomic ? take((size_t)p->M * p->H * 4) : NULL;
    void *xq = NULL, *hq = NULL, *sx = NULL, *sh = NULL, *amax = NULL;
    if (is_q8(p)) {
        const size_t cx = act_scale_cols(p, p->H), ch = act_scale_cols(p, p->I);
        xq = take((size_t)p->M * p->H), sx = take((cx ? (size_t)p->M * cx : 1) * 4);
        hq = take(cap * p->I), sh = take((ch ? cap * ch : 1) * 4), amax = take(2 * 4);
    }
    void *tiles = take(2 * 4);
    if (ws) {
        w->tiles = (int *)tiles;
        w->h = h, w->y = y, w->acc = (float *)acc;
        w->xq = (uint8_t *)xq, w->hq = (uint8_t *)hq, w->sx = (float *)sx, w->sh = (float *)sh, w->amax = (float *)amax;
    }
    return off;
}

} // namespace

extern "C" int moe_cuda_fx_layout_cap(int M, int topk, int E, int bm)
{
    const int64_t n = (int64_t)M * topk, pads = (n < E ? n : E) * (int64_t)(bm - 1);
    const int64_t rows = n + pads;
    return (int)((rows + bm - 1) / bm * bm);
}

extern "C" size_t moe_cuda_fx_layout_bytes(int M, int topk, int E, int bm)
{
    const size_t cap = (size_t)moe_cuda_fx_layout_cap(M, topk, E, bm), n = (size_t)M * topk;
    return up256(cap * 4) + up256(cap / bm * 4) + up256((size_t)E * 4) + up256((size_t)(E + 1) * 4) + up256(n * 4) +
           up256(4) + up256((size_t)ALIGN_SPLIT_CTAS * E * 4);
}

extern "C" void moe_cuda_fx_layout_carve(void *ws, int M, int topk, int E, int bm, moe_cuda_fx_layout *L)
{
    char *c = (char *)ws;
    const size_t cap = (size_t)moe_cuda_fx_layout_cap(M, topk, E, bm), n = (size_t)M * topk;
    L->cap = (int)cap, L->nblk = (int)(cap / bm);
    L->sorted = (int32_t *)c, c += up256(cap * 4);
    L->block_expert = (int32_t *)c, c += up256(cap / bm * 4);
    L->counts = (int32_t *)c, c += up256((size_t)E * 4);
    L->offsets = (int32_t *)c, c += up256((size_t)(E + 1) * 4);
    L->row_of_slot = (int32_t *)c, c += up256(n * 4);
    L->num_blocks = (int32_t *)c, c += up256(4);
    L->part = (int32_t *)c;
}

/* pdl: a programmatic dependent of the kernel before it, which must not
 * read the layout (the forward: x's quantization) */
static moe_status align_launch(const int32_t *topk_ids, int M, int topk, int E, int bm, const moe_cuda_fx_layout *L,
                               void *stream, bool pdl)
{
    if (E < 1 || E > ALIGN_THREADS) return moe_fail(MOE_ERR_UNSUPPORTED, "fx_align: E = %d, the rule is 1 <= E <= %d", E, ALIGN_THREADS);
    if (bm < 1) return moe_fail(MOE_ERR_INVALID_ARG, "fx_align: bm = %d, must be >= 1", bm);
    const int n = M * topk;
    if (n >= ALIGN_SPLIT_MIN && !L->part)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_align: L->part is NULL: from %d slots (here %d) the align needs the "
                        "layout's scratch; carve the layout with moe_cuda_fx_layout_carve", ALIGN_SPLIT_MIN, n);
    if (n >= ALIGN_SPLIT_MIN) { /* two kernels on ALIGN_SPLIT_CTAS CTAs, the second a programmatic dependent */
        cudaError_t ce = launch_sm(align_count_kernel, ALIGN_SPLIT_CTAS, ALIGN_THREADS, E * sizeof(int), S(stream), pdl,
                                   topk_ids, n, E, L->part);
        if (ce == cudaSuccess)
            ce = launch_sm(align_place_kernel, ALIGN_SPLIT_CTAS, ALIGN_THREADS, 3 * E * sizeof(int), S(stream), true, topk_ids,
                           n, E, bm, *L);
        return ce == cudaSuccess ? MOE_OK : moe_cu_fail(ce, "fx align_count_kernel / align_place_kernel");
    }
    const cudaError_t ce = launch_sm(align_kernel, 1, ALIGN_THREADS, 3 * E * sizeof(int), S(stream), pdl, topk_ids,
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

/* plan_make's side-by-side switches (fast.h): unset, the plan's own choice
 * (dflt); "0", off; anything else, on */
static int env_flag(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v ? strcmp(v, "0") != 0 : dflt;
}

/* the deep form of a shallow tile (a swapped one: its index less one
 * offset; 64x128W3: 64x128W), and the tile a caller gets by clearing the plan's
 * flags one at a time: deep, then mma.sync (fast.h) */
static int deep_cfg(int c) { return c == CFG_64x128W3 ? CFG_64x128W : is_shallow(c) ? c - (CFG_16x128S3 - CFG_16x128S) : c; }
static int mma_cfg(int c) { return is_w64(c) ? CFG_64x128 : unswap_cfg(c); }

/* the epilogue-warpgroup bits the forward runs: plan.epi_wg where the tile has the form (bf16's 128 x 256
 * tiles, the only ones of that size: GEMM1 only, with TMA weights only, fast_ws.cuh); the forward and
 * moe_cuda_fx_tiles both read it, so the description names what runs */
static int epi_wg_runs(const moe_cuda_fx_plan *plan)
{
    return plan->epi_wg & (plan->bm2 == 128 && plan->bn2 == 256 ? (plan->tma ? 1 : 0) : 3);
}

/* the persistent decode form runs on tile c (plan.decode_ws where the tile has it: a swapped tile of 128
 * weight rows with TMA weights, not the slot layout; bf16 and the e4m3 schemes, fast_swp.h) */
static int dws_runs(const moe_cuda_fx_plan *plan, int c)
{
    return plan->decode_ws && is_swapped(c) && CFG_BN[c] == 128 && plan->tma && !plan->slot_layout;
}

extern "C" moe_status moe_cuda_fx_plan_make(const moe_cuda_fx_problem *p, moe_cuda_fx_plan *plan)
{
    if (!p || !plan) return moe_fail(MOE_ERR_INVALID_ARG, "fx_plan_make: problem and plan must not be NULL");
    if (p->M < 1 || p->E < 1 || p->topk < 1 || p->topk > p->E || p->H < 1 || p->I < 1)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx problem: M %d, E %d, topk %d, H %d, I %d: the rule is all >= 1, topk <= E",
                        p->M, p->E, p->topk, p->H, p->I);
    if (!scheme_ok(p->scheme))
        return moe_fail(MOE_ERR_UNSUPPORTED,
                        "fx problem: scheme %s: the fused fast path implements bf16, fp8_wtensor_atensor, "
                        "fp8_wchannel_atoken, fp8_wblock128_agroup128, int8_wchannel_atoken, w4a16_g128 and "
                        "mxfp4_w4a16",
                        moe_scheme_name(p->scheme));
    const Kind kind = kind_of(p->scheme);
    const int mult = kind == KIND_FP8_BLOCK || kind == KIND_W4 ? 128 : kind == KIND_MX4 ? 64 : kind != KIND_BF16 ? 16 : 8;
    if (p->H % mult || p->I % mult)
        return moe_fail(MOE_ERR_UNSUPPORTED, "fx problem: H %d and I %d must be multiples of %d (%s)", p->H, p->I, mult,
                        mult == 128 ? "whole 128-groups" : mult == 64 ? "whole 64-wide k tiles of 4-bit codes"
                                                                      : "16-byte row copies");
    if (p->E > ALIGN_THREADS) return moe_fail(MOE_ERR_UNSUPPORTED, "fx problem: E %d > %d", p->E, ALIGN_THREADS);
    if (!moe_act_is_gated(p->act.act) || p->act.swiglu_alpha || p->act.swiglu_beta || p->act.swiglu_limit)
        return moe_fail(MOE_ERR_UNSUPPORTED, "fx problem: act must be gated with no per-expert tensors");
    if ((int64_t)p->M * p->topk > (1 << 24))
        return moe_fail(MOE_ERR_UNSUPPORTED, "fx problem: M * topk %lld over 2^24 slots", (long long)p->M * p->topk);
    memset(plan, 0, sizeof *plan);
    const int64_t slots = (int64_t)p->M * p->topk, touched = slots < p->E ? slots : p->E;
    const int64_t avg = (slots + touched - 1) / touched;
    int c1, c2;
    /* bf16's 128-row tiles where experts average over 56 slots: with 64-row blocks about half the experts
     * take a second block (NOTES.md v23, same-binary A/B, two rounds: Mixtral-8x7B M = 256 10.5% faster,
     * DeepSeek-V3 / gpt-oss-120b M = 2048 17 / 8%; at 48 slots (Mixtral M = 192) 5% slower, at Qwen3-30B-A3B
     * M = 1024 (I 768: GEMM2 has 12 k tiles) 9% slower). The e4m3 128-row tile was slower than the 64-row one
     * at every such point (1-24%) until its epilogue moved into a warpgroup of its own (v25); with it, where
     * both GEMMs take that form (K of 32 k tiles or more), Mixtral-8x7B M = 256 per tensor / per channel 5-6%
     * and block 4% faster (NOTES.md v26, same binary, two rounds; without the epilogue warpgroup 1-4% slower).
     * MOE_FX_BM128=0 / 1: never / from 33 slots an expert, bf16 and fp8 */
    const int minhi = p->H < p->I ? p->H : p->I;
    /* the 4-bit weights take bf16's 128 x 256 wgmma tile where bf16 does, its producer dequantizing (fast_ws.cuh,
     * NOTES.md v34); MOE_FX_W4WG=0: the 64-row mma.sync tiles there instead (the form before, side-by-side
     * timing) */
    const int w4wg = is_w4(kind) && env_flag("MOE_FX_W4WG", 1);
    const int w16 = kind == KIND_BF16 || w4wg; /* bf16 wgmma tiles */
    const int bm128 = avg > 56 && (w16 ? minhi >= 2048 : (kind == KIND_FP8 || kind == KIND_FP8_BLOCK) && minhi >= 4096);
    /* bf16's 64-row tiles on wgmma where the k chains are long (NOTES.md v18, two same-binary rounds:
     * Mixtral-8x7B M = 256 4-12% faster, DeepSeek-V3 M = 1024 0.7-6%; gpt-oss-120b M = 1024, H 2880, 6-7% slower) */
    const int wg64 = kind == KIND_FP8 || kind == KIND_FP8_BLOCK || (kind == KIND_BF16 && env_flag("MOE_FX_WG64", p->H >= 4096));
    /* int8 above 64 slots an expert on a 128-row wgmma tile (NOTES.md v55): s8 x s8 sums in s32 are exact over
     * all of K, so its k loop is bf16's (no promotion), and a k tile is 128 bytes of a row, as bf16's. 128 x 256
     * keeps bf16's bytes a k tile and its MMA time (s8 at twice bf16's rate over twice the k), so its L2 traffic
     * a flop is bf16's; 128 x 128 a third more. Before v55 int8 ran the 64 x 128 mma.sync
     * tile there (24-38% of the fp8 peak at M >= 4096, v54's H100 grid). Measured (v55, H100, alternated, two
     * rounds, 4 shapes x M 1024-16384, both combines): 128 x 256 1.05-1.95x faster than the mma.sync tile where
     * it runs (geomean 1.385 at M >= 4096; Mixtral-8x7B 1.57-1.95x), 128 x 128 1.20x in geomean (0.77-0.94x at
     * Qwen3-30B-A3B). MOE_FX_I8WG=0 / 128 / 256: the mma.sync tile / 128 x 128 / 128 x 256 */
    const char *i8v = getenv("MOE_FX_I8WG");
    const int i8wg = kind != KIND_I8 ? 0 : !i8v ? 256 : atoi(i8v) == 128 ? 128 : atoi(i8v) == 0 ? 0 : 256;
    if (avg <= 16)
        c1 = pick_bn((int)touched, (2 * p->I + 127) / 128), c2 = pick_bn((int)touched, (p->H + 127) / 128);
    else if (avg > 32 && env_flag("MOE_FX_BM128", bm128) && (w16 || kind == KIND_FP8 || kind == KIND_FP8_BLOCK))
        c1 = c2 = w16 ? CFG_128x256 : CFG_128x128;
    else if (avg <= 64 && wg64) c1 = c2 = CFG_64x128W;
    else if (avg <= 64 || (kind == KIND_I8 && !i8wg) || (is_w4(kind) && !w4wg)) c1 = c2 = CFG_64x128;
    else c1 = c2 = w16 || i8wg == 256 ? CFG_128x256 : CFG_128x128;
    /* the decode tiles on wgmma, weights as A (NOTES.md v16: mma.sync e4m3 is emulated on this chip) */
    plan->swapped = CFG_BM[c1] == 16 && cfg_ok(kind, CFG_16x128S) && env_flag("MOE_FX_SWAP", 1);
    /* 32 token rows a block (one weight pass for experts of 17-32 slots) where
     * GEMM1's k chain is long: Mixtral-8x7B M = 64 4-8% faster, Qwen3-30B-A3B
     * M = 256 (H 2048) 4-15% slower, and at 5-8 slots an expert slower too (NOTES.md v16) */
    const int rows32 = avg > 8 && p->H >= 4096;
    if (plan->swapped) c1 = swap_cfg(c1, rows32), c2 = swap_cfg(c2, rows32);
    if (plan->swapped && env_flag("MOE_FX_SHALLOW", 1)) {
        const int kt = kind == KIND_BF16 ? 64 : 128; /* a k tile: 128 bytes of a row */
        c1 = shallow_cfg(c1, (p->H + kt - 1) / kt, touched * ((p->I + CFG_BN[c1] / 2 - 1) / (CFG_BN[c1] / 2)));
        c2 = shallow_cfg(c2, (p->I + kt - 1) / kt, touched * ((p->H + CFG_BN[c2] - 1) / CFG_BN[c2]));
    }
    /* the e4m3 64-row tile with epilogue scales on 3 stages, three CTAs an SM (NOTES.md v20, same-binary A/B,
     * two rounds: 3-15% faster, Mixtral-8x7B M = 256 9-13%, Qwen3-30B-A3B M = 1024 13-15%): the promoted k loop
     * (wgmma, wait, add) is the bound, and a third CTA overlaps it. Not the block scheme (its k-tile scales
     * spill at 168 registers: 9-36% slower) nor bf16 (one stage ahead) */
    if (c1 == CFG_64x128W && kind == KIND_FP8 && env_flag("MOE_FX_SHALLOW", 1)) c1 = c2 = CFG_64x128W3;
    plan->shallow1 = is_shallow(c1), plan->shallow2 = is_shallow(c2);
    plan->bm1 = CFG_BM[c1], plan->bn1 = CFG_BN[c1] / 2, plan->bm2 = CFG_BM[c2], plan->bn2 = CFG_BN[c2];
    plan->wg64 = is_w64(c1);
    /* persistent: the 128-row tiles (NOTES.md v13), and bf16's 64-row wgmma tile (v20: same-binary A/B, two
     * rounds, 2.5-5% faster at Mixtral-8x7B M = 128 / 256 and DeepSeek-V3 M = 1024; old / new binaries on one
     * machine 1-2.6% at Mixtral, DeepSeek-V3 within noise; the e4m3 ones 7-28% slower: one consumer warpgroup
     * an SM cannot overlap its promotion). MOE_FX_WS=0 / 1: never / every such tile */
    plan->persistent = (plan->bm1 == 128 || plan->wg64) && env_flag("MOE_FX_WS", plan->bm1 == 128 || (plan->wg64 && kind == KIND_BF16));
    if (plan->bm1 == 128 && w4wg) plan->persistent = 1; /* the 4-bit wgmma tile has no other form */
    /* the e4m3 128-row tiles' epilogue in a fourth warpgroup, overlapping the next tile's k loop (fast_ws.cuh;
     * NOTES.md v25; same-binary A/B, two rounds, everywhere on: Mixtral-8x7B 2-9% faster, DeepSeek-V3 0-6%, the
     * block scheme 2-8% at every shape; per tensor / per channel on Qwen3-30B-A3B (k tiles 16 / 6) 15-18% and
     * gpt-oss-120b (23 / 23) 0-8% slower: a short k loop does not cover a warpgroup doing two warpgroups'
     * epilogues). Bit 0: GEMM1, bit 1: GEMM2; the block scheme both (rechecked on v51's build, r31 on an H100, geomean
     * over 12 points: off 0.967x the default's speed, GEMM2's only 0.973x, GEMM1's only 1.000x), the others where K has at least 32 k
     * tiles. bf16's 128 x 256 GEMM1 (its sums handed over rounded to bf16, 3 stages instead of 4, TMA weights;
     * NOTES.md v27) where H has 40 to 64 k tiles (same-binary A/B, two rounds: gpt-oss-120b (45) M = 1024 /
     * 4096 1.5-7% faster, Mixtral-8x7B (64) M = 256 / 4096 / 16384 0.6-3%, M = 1024 1-8% slower against
     * rounds of its own 6% apart; DeepSeek-V3 (112) M = 4096 1% slower, where the epilogue is a smaller share
     * of the tile and, by a 4-stage trial's hint, the stage fewer costs more; Qwen3-30B-A3B (32) within -3 / +2%); GEMM2 (f32 sums of 128 KB) has
     * no such form. MOE_FX_EWG=<mask> in the environment: that mask instead (0: never; bf16: bit 0 only) */
    const int i8w = kind == KIND_I8 && plan->bn2 == 256; /* int8 on bf16's shape */
    if (plan->persistent && plan->bm1 == 128 && (kind == KIND_FP8 || kind == KIND_FP8_BLOCK || kind == KIND_BF16 || kind == KIND_I8)) {
        const char *ev = getenv("MOE_FX_EWG");
        /* int8 (NOTES.md v55): 128 x 128 on both GEMMs (its k loop has no promotion to cover, so the epilogue is
         * the larger share of a tile); 128 x 256 on GEMM1 only, bf16's form, its consumers scaling g and u
         * before they round them (fast_ws.cuh; GEMM2's f32 sums would take 128 KB): same A/B, 1.014x in geomean
         * over the 9 points it reaches x both combines (Mixtral-8x7B 1.02-1.06x, Qwen3-30B-A3B 1.02x, gpt-oss-120b
         * M = 4096 1.02x but 16384 0.95 / 0.99x, DeepSeek-V3 within 1%) */
        plan->epi_wg = ev ? atoi(ev) & 3
                       : kind == KIND_BF16 ? p->H >= 40 * 64 && p->H <= 64 * 64
                       : i8w ? 1
                       : kind == KIND_FP8_BLOCK || kind == KIND_I8 ? 3 : (p->H >= 32 * 128) | (p->I >= 32 * 128) << 1;
        if (kind == KIND_BF16 || i8w) plan->epi_wg &= 1;
    }
    /* the weight tiles by TMA (NOTES.md v19, same-binary A/B over 4 shapes x 7 M x 5 schemes, two rounds):
     * the 128-row tiles 1-3% (8-bit) and 4-16% (bf16) faster, the 64-row tiles 0-5%; the 16 / 32-row decode
     * tiles 2-8% faster on 8-bit codes (gpt-oss-120b M = 16-256 fp8 7-8%; Qwen3-30B-A3B M = 256 2-4% slower),
     * within 1% on bf16 but for 3-5% slower points (Qwen3 M = 256, DeepSeek-V3 M = 1), so bf16's decode tiles
     * keep the copies. With the weights re-laid in tiles (v36, same binary, MOE_FX_TMA=1 against the copies
     * alternated, two rounds) bf16's decode tiles from the boxes were 1.6-3.8% faster at M = 16-256 on all four
     * shapes, but 7.8% slower at Mixtral-8x7B M = 1 (the slot layout), so they take TMA where M > 1. The 4-bit
     * codes' 32-byte rows are not swizzled: copies. MOE_FX_TMA=0 / 1 in the environment: never / wherever the
     * tile allows (side-by-side timing). */
    plan->tma = !is_w4(kind) && fx::encode_tiled() &&
                env_flag("MOE_FX_TMA", plan->bm1 >= 64 || kind != KIND_BF16 || p->M > 1);
    if ((kind == KIND_BF16 || i8w) && !plan->tma) plan->epi_wg = 0; /* its form takes TMA weights only (fast_ws.cuh) */
    /* the weight boxes' L2 promotion (NOTES.md v33): a probe streaming the decode shapes' boxes (128 rows of
     * 128 bytes) read 4.03-4.38 TB/s with 256-byte promotion, 4.20-4.63 with 128-byte, against 4.31-4.66 for
     * the same bytes tile-contiguous; same binary, variants alternated over 4 shapes x M 1-4096 x 5 schemes:
     * the 16 / 32-row tiles' 8-bit forwards on 128 bytes 1.8% faster in geomean on one machine, 0.2% slower on
     * another (DeepSeek-V3 0.4-1.6% slower there; Mixtral-8x7B int8 M = 64 6-7% faster on both), no promotion
     * 3-7% slower at gpt-oss-120b; the 64 / 128-row tiles, whose weight tiles are re-read from L2, 0-2% slower
     * on 128 (Mixtral bf16 M = 256 2.3%), so they keep 256. MOE_FX_PROMO=0 / 128 / 256 in the environment
     * overrides */
    /* the boxes from the weights re-laid in tiles, where a caller gives them (fast_tiled.cuh; NOTES.md v36: same
     * binary, MOE_FX_TILED=0 / 1 alternated, two rounds, 4 shapes x M 16-4096 x bf16 and the four 8-bit schemes):
     * the 16 / 32-row decode tiles' 8-bit forwards 0.9-5.5% faster at every point (DeepSeek-V3 and gpt-oss-120b
     * 3.6-5.5%, Mixtral-8x7B M = 64 2.1-4.1%); the 64 / 128-row tiles, whose weight tiles are re-read from L2 by
     * several row blocks, from 7% slower (Qwen3-30B-A3B bf16 M = 4096) to 4% faster, so they keep the row-major
     * boxes (the persistent ones, fast_ws.cuh, always: their producer keeps v35's code). MOE_FX_TILED=0 / 1 in
     * the environment: never / every TMA tile but those */
    plan->weight_tiled = plan->tma && env_flag("MOE_FX_TILED", plan->bm1 < 64);
    const char *pv = getenv("MOE_FX_PROMO");
    plan->weight_promo = pv ? atoi(pv) : plan->bm1 >= 64 ? 256 : 128;
    if (plan->weight_promo != 0 && plan->weight_promo != 128 && plan->weight_promo != 256) plan->weight_promo = 256;
    /* an expert's last row block is mostly pads where its slots barely spill into it (uniform routing on
     * 128-row blocks: 1.12-1.46x the real rows at DeepSeek-V3 / gpt-oss-120b M = 4096-16384); the warps of
     * the pad rows' slab skip their MMAs (fast_ws.cuh, fast_gemm.cuh; NOTES.md v21: same-binary 1.7%,
     * gpt-oss-120b bf16 M = 1024 5-7% and w4a16_g128 M = 1024 3-12% faster than v20). MOE_FX_PADSKIP=0: never */
    plan->pad_skip = env_flag("MOE_FX_PADSKIP", 1);
    /* fp8 per tensor / per channel on the persistent 128-row tiles: the e4m3 sums promoted every two k tiles
     * (one wgmma wait a pair; fast.h plan.promote_k) where a GEMM runs without the epilogue warpgroup, whose
     * consumers wait on their own promotions (NOTES.md v47, same binary on an H100, MOE_FX_PROMOK alternated,
     * two rounds: Qwen3-30B-A3B M = 4096 / 16384 3-4%, DeepSeek-V3 1.5-6%, gpt-oss-120b per tensor 3.5-5%
     * faster; with the warpgroup on both GEMMs (Mixtral-8x7B) within -0.6 / +0.7%, so it keeps 128, the
     * tighter bound). The plan's both GEMMs take it, so where one has the warpgroup (DeepSeek-V3's GEMM1) that
     * form runs at 256 too (its PT = 2 build spills 4 bytes a thread, ptxas; the forward's gain is measured with
     * it). MOE_FX_PROMOK=128 / 256 in the environment overrides */
    const char *pk = getenv("MOE_FX_PROMOK");
    const int pk2 = kind == KIND_FP8 && plan->persistent && plan->bm1 == 128 && (epi_wg_runs(plan) & 3) != 3;
    plan->promote_k = pk ? (atoi(pk) == 256 ? 256 : 128) : pk2 ? 256 : 128;
    /* the next kernel may start while GEMM1 runs only when GEMM1's CTAs fit
     * in one wave of two per SM (NOTES.md, v7): with more waves its waiting
     * CTAs would hold slots GEMM1 still needs */
    plan->trigger_early = avg <= 16 && touched * ((p->I + plan->bn1 - 1) / plan->bn1) <= 2 * 132;
    /* h's quantization lets GEMM2 start where experts average at most 4 slots: its rows are few, GEMM2's first
     * weight tiles stream under it (NOTES.md v26, same binary, two rounds, the four 8-bit schemes: M = 1
     * 1.5-4.5% faster at most points, M = 16 0.2-1.8%; M = 64 at 2-4 slots within 1%; Mixtral-8x7B M = 64, 16
     * slots, 0.7-2.8% slower, as in v22). MOE_FX_HTRIG=0 / 1: never / always */
    plan->h_trigger = env_flag("MOE_FX_HTRIG", avg <= 4);
    const int bm = plan->bm1;
    plan->max_blocks = (int)((slots + bm - 1) / bm + touched); /* sum of ceil(c_e / bm) over touched experts */
    /* one token: the align kernel and the GEMMs' dependent layout reads
     * were about 3 us of Qwen3-30B-A3B's 36 (NOTES.md v15) */
    plan->slot_layout = p->M == 1 && bm == 16;
    if (plan->slot_layout) plan->max_blocks = p->topk;
    /* one token: two matrix-vector kernels (fast_gemv.cu) where I <= 1024 (NOTES.md v28, same binary, two rounds,
     * 4 shapes x the 5 schemes at M = 1: Qwen3-30B-A3B (I 768) 8-bit 16-26% faster, bf16 2-3%; gpt-oss-120b
     * int8 10% faster, its other schemes 1-5% slower; Mixtral-8x7B within -3 / +3%; DeepSeek-V3 8-16% slower,
     * where the tiles already stream at 70-88% of the read floor). int4 (w4a16_g128) too (NOTES.md v56, H100,
     * same binary, two rounds: Qwen3-30B-A3B M = 1 30.1 -> 18.2 us, 1.66x) and e2m1 (mxfp4_w4a16: 1.57x in
     * the same run; its gemv tcase passed in r59b on an H100). MOE_FX_GEMV=0 / 1: never / wherever it fits */
    const int gk = gemv_kind(kind);
    /* the persistent decode tiles (fast_swp.cuh), two CTAs an SM, for the e4m3 schemes where experts average
     * 9-16 slots (NOTES.md v32, same binary, MOE_FX_DWS=0 / 1 / 2 alternated, two rounds over 4 shapes x M
     * 16-256: Qwen3-30B-A3B M = 256 3-6% and Mixtral-8x7B M = 64 0.3-1% faster with two CTAs an SM; at 1-8
     * slots 0.4-4% slower, bf16 no faster than its copies; one CTA an SM on 11 / 12 stages slower at most
     * points, 1-13% on the block scheme, whose k-tile scale loads sit in the one consumer warpgroup's loop) */
    const char *dws = getenv("MOE_FX_DWS");
    plan->decode_ws = dws ? atoi(dws) : (kind == KIND_FP8 || kind == KIND_FP8_BLOCK) && avg > 8 ? 2 : 0;
    if (plan->decode_ws < 0 || plan->decode_ws > 2) plan->decode_ws = 0;
    plan->gemv = plan->slot_layout && gk >= 0 && fx::gemv_fits(gk, p->topk, p->H, p->I) && env_flag("MOE_FX_GEMV", p->I <= 1024);
    const int cap = moe_cuda_fx_layout_cap(p->M, p->topk, p->E, bm);
    if (plan->max_blocks > cap / bm) plan->max_blocks = cap / bm;
    /* the GEMMs index block scales in int: rows x 128-groups */
    if (kind == KIND_FP8_BLOCK && (int64_t)cap * ((p->H > p->I ? p->H : p->I) / 128) >= ((int64_t)1 << 31))
        return moe_fail(MOE_ERR_UNSUPPORTED, "fx problem: %d padded rows x %d groups of 128 over 2^31 scales", cap,
                        (p->H > p->I ? p->H : p->I) / 128);
    /* the 4-bit GEMMs index an expert's scales in int: N x K / 32 */
    if (is_w4(kind) && (int64_t)2 * p->I * p->H / 32 >= ((int64_t)1 << 31))
        return moe_fail(MOE_ERR_UNSUPPORTED, "fx problem: 2 I x H / 32 = %lld scales an expert over 2^31",
                        (long long)2 * p->I * p->H / 32);
    plan->launches = (p->atomic ? 5 : 4) + (is_q8(p) ? 2 : 0) + (p->scheme == MOE_SCHEME_FP8_WTENSOR_ATENSOR) + plan->persistent -
                     plan->slot_layout;
    if (plan->gemv) plan->launches = 2;
    plan->workspace = carve(p, bm, NULL, NULL);
    /* raise the shared-memory limit of the kernels this plan launches and of
     * the forms a caller may select by clearing a flag (fast.h): the deep
     * form of a shallow tile, the mma.sync form of a 16-row swapped tile and
     * of the wgmma 64-row tile */
    const int f1[3] = {c1, deep_cfg(c1), mma_cfg(c1)}, f2[3] = {c2, deep_cfg(c2), mma_cfg(c2)};
    cudaError_t ce = cudaSuccess;
    for (int form = 0; form < 3 && ce == cudaSuccess; form++) {
        ce = with_tile(kind, f1[form], [&](auto t) { return decltype(t)::template prepare<fx::EPI_GATED>(); });
        if (ce == cudaSuccess)
            ce = with_tile(kind, f2[form], [&](auto t) {
                return p->atomic ? decltype(t)::template prepare<fx::EPI_WATOMIC>() : decltype(t)::template prepare<fx::EPI_WSTORE>();
            });
    }
    if (ce == cudaSuccess && gk >= 0 && fx::gemv_fits(gk, p->topk, p->H, p->I)) {
        fx::gemv_io io;
        memset(&io, 0, sizeof io);
        io.kind = gk;
        if (is_q8(p)) moe_scheme_spec(p->scheme, MOE_OPERAND_ACT, &io.as);
        ce = fx::gemv_prepare(io);
    }
    if (ce != cudaSuccess) return moe_cu_fail(ce, "cudaFuncSetAttribute (fx gemm)");
    return MOE_OK;
}

/* a plan's tile: e4m3 has the wgmma form of 64 x 128, the others
 * mma.sync; the decode tiles' form is the plan's (swapped) */
static int cfg_of(Kind k, int bm, int bn, int swapped, int wg64, int shallow)
{
    for (int c = 0; c < CFG_COUNT; c++)
        if (CFG_BM[c] == bm && CFG_BN[c] == bn && cfg_ok(k, c) && (bm != 64 || is_w64(c) == (wg64 != 0)) &&
            (bm >= 64 || is_swapped(c) == (swapped != 0)) &&
            (!(is_swapped(c) || is_w64(c)) || is_shallow(c) == (shallow != 0)))
            return c;
    return -1;
}

extern "C" moe_status moe_cuda_fx_forward(const moe_cuda_fx_problem *p, const moe_cuda_fx_plan *plan,
                                          const moe_cuda_fx_args *a, void *workspace, void *stream)
{
    if (!p || !plan || !a || !workspace)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: problem, plan, args and workspace must not be NULL");
    if (!scheme_ok(p->scheme)) return moe_fail(MOE_ERR_UNSUPPORTED, "fx_forward: scheme %s", moe_scheme_name(p->scheme));
    const Kind kind = kind_of(p->scheme);
    const int c1 = cfg_of(kind, plan->bm1, plan->bn1 * 2, plan->swapped, plan->wg64, plan->shallow1),
              c2 = cfg_of(kind, plan->bm2, plan->bn2, plan->swapped, plan->wg64, plan->shallow2);
    const int q8 = is_q8(p);
    const int scaled = kind != KIND_BF16;
    if (!cfg_ok(kind, c1) || !cfg_ok(kind, c2) || plan->bm1 != plan->bm2)
        return moe_fail(MOE_ERR_INVALID_ARG,
                        "fx_forward: plan not made by fx_plan_make for this scheme (no %s tile of %d x %d / %d x %d)",
                        plan->swapped ? "swapped" : "mma.sync / wgmma", plan->bm1, plan->bn1 * 2, plan->bm2, plan->bn2);
    if (scaled && (!a->w1_scale || !a->w2_scale))
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: scheme %s needs w1_scale and w2_scale", moe_scheme_name(p->scheme));
    /* the GEMMs read x, w1 and w2 in 16-byte copies and TMA boxes */
    if ((uintptr_t)a->x % 16 || (uintptr_t)a->w1 % 16 || (uintptr_t)a->w2 % 16)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: x, w1 and w2 must be 16-byte aligned (x %p, w1 %p, w2 %p)", a->x,
                        a->w1, a->w2);
    if (plan->tma && !is_w4(kind) && !fx::encode_tiled())
        return moe_fail(MOE_ERR_UNSUPPORTED, "fx_forward: plan.tma set, but the driver has no cuTensorMapEncodeTiled");
    const int tensor = p->scheme == MOE_SCHEME_FP8_WTENSOR_ATENSOR;
    /* a plan made for another problem (another scheme shares the tiles) would
     * carve more than it allotted */
    if (carve(p, plan->bm1, NULL, NULL) > plan->workspace)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: plan not made by fx_plan_make for this problem (workspace %zu < %zu)",
                        plan->workspace, carve(p, plan->bm1, NULL, NULL));
    if (plan->decode_ws < 0 || plan->decode_ws > 2)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: plan.decode_ws %d: the rule is 0, 1 or 2", plan->decode_ws);
    if (is_w4(kind) && plan->bm1 == 128 && !plan->persistent)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: plan.persistent 0 on 4-bit 128-row tiles: the rule is persistent "
                                             "(their producer warpgroup dequantizes; there is no one-CTA-a-tile form)");
    if (plan->weight_promo != 0 && plan->weight_promo != 128 && plan->weight_promo != 256)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: plan.weight_promo %d: the rule is 0, 128 or 256 (bytes)",
                        plan->weight_promo);
    if (plan->promote_k != 128 && plan->promote_k != 256)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: plan.promote_k %d: the rule is 128 or 256 (products)", plan->promote_k);
    if (plan->weight_tiled != 0 && plan->weight_tiled != 1)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: plan.weight_tiled %d: the rule is 0 or 1", plan->weight_tiled);
    const int tiled = plan->weight_tiled && plan->tma && !is_w4(kind);
    if (tiled && ((uintptr_t)a->w1_tiled % 16 || (uintptr_t)a->w2_tiled % 16))
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: w1_tiled and w2_tiled must be 16-byte aligned (%p, %p)",
                        a->w1_tiled, a->w2_tiled);
    if (plan->slot_layout && (p->M != 1 || plan->bm1 != 16 || plan->max_blocks != p->topk))
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: plan not made by fx_plan_make for this problem (slot layout)");
    const int gk = gemv_kind(kind);
    if (plan->gemv && (!plan->slot_layout || gk < 0 || !fx::gemv_fits(gk, p->topk, p->H, p->I)))
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: plan not made by fx_plan_make for this problem (gemv)");
    fx_ws w;
    carve(p, plan->bm1, workspace, &w);
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
    const int ew = epi_wg_runs(plan);
    int ws1 = !plan->persistent ? WS_OFF : ew & 1 ? WS_EPI_WG : WS_ON, ws2 = !plan->persistent ? WS_OFF : ew & 2 ? WS_EPI_WG : WS_ON;
    if (dws_runs(plan, c1)) ws1 = WS_DECODE1 + plan->decode_ws - 1;
    if (dws_runs(plan, c2)) ws2 = WS_DECODE1 + plan->decode_ws - 1;
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

/* ---- the intermediates and the accumulation model, for the judge ---------- */

static int piece_of(const moe_cuda_fx_problem *p, const moe_cuda_fx_plan *plan, moe_cuda_fx_piece w, const fx_ws *ws,
                    const void **src, size_t *bytes)
{
    const size_t cap = (size_t)moe_cuda_fx_layout_cap(p->M, p->topk, p->E, plan->bm1), q8 = is_q8(p);
    const size_t cx = q8 ? act_scale_cols(p, p->H) : 0, ch = q8 ? act_scale_cols(p, p->I) : 0;
    const void *s = NULL;
    size_t b = 0;
    switch (w) {
    case MOE_FX_ROWS: b = (size_t)p->M * p->topk * 4, s = ws ? ws->L.row_of_slot : NULL; break;
    case MOE_FX_H: b = cap * p->I * 2, s = ws ? ws->h : NULL; break;
    case MOE_FX_XQ: b = q8 ? (size_t)p->M * p->H : 0, s = ws ? ws->xq : NULL; break;
    case MOE_FX_SX: b = q8 ? (cx ? (size_t)p->M * cx : 1) * 4 : 0, s = ws ? ws->sx : NULL; break;
    case MOE_FX_HQ: b = q8 ? cap * p->I : 0, s = ws ? ws->hq : NULL; break;
    case MOE_FX_SH: b = q8 ? (ch ? cap * ch : 1) * 4 : 0, s = ws ? ws->sh : NULL; break;
    case MOE_FX_Y: b = p->atomic ? 0 : cap * p->H * 2, s = ws ? ws->y : NULL; break;
    default: return 0;
    }
    if (src) *src = s;
    *bytes = b;
    return 1;
}

extern "C" size_t moe_cuda_fx_piece_bytes(const moe_cuda_fx_problem *p, const moe_cuda_fx_plan *plan, moe_cuda_fx_piece w)
{
    size_t b = 0;
    return p && plan && piece_of(p, plan, w, NULL, NULL, &b) ? b : 0;
}

extern "C" moe_status moe_cuda_fx_fetch(const moe_cuda_fx_problem *p, const moe_cuda_fx_plan *plan, const void *workspace,
                                        moe_cuda_fx_piece w, void *host, size_t bytes)
{
    if (!p || !plan || !workspace || !host)
        return moe_fail(MOE_ERR_NULL, "fx_fetch: problem, plan, workspace and host must not be NULL");
    fx_ws ws;
    carve(p, plan->bm1, (void *)workspace, &ws);
    const void *src = NULL;
    size_t b = 0;
    if (!piece_of(p, plan, w, &ws, &src, &b)) return moe_fail(MOE_ERR_INVALID_ARG, "fx_fetch: piece %d unknown", (int)w);
    if (!b || bytes != b)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_fetch: piece %d has %zu bytes for this problem, %zu asked", (int)w, b, bytes);
    MOE_CU(cudaMemcpy(host, src, b, cudaMemcpyDeviceToHost));
    return MOE_OK;
}

extern "C" void moe_cuda_fx_tiles(const moe_cuda_fx_plan *plan, char *buf, size_t n)
{
    if (!buf || !n) return;
    if (!plan) {
        snprintf(buf, n, "no plan");
        return;
    }
    if (plan->gemv) {
        snprintf(buf, n, "M = 1 matrix-vector (2 kernels)");
        return;
    }
    const int ew = epi_wg_runs(plan);
    /* a GEMM on the persistent decode form runs that form's own stages, so its shallow flag names nothing */
    const int dws_on = plan->decode_ws && plan->swapped && plan->tma && !plan->slot_layout;
    const int d1 = dws_on && plan->bn1 == 64, d2 = dws_on && plan->bn2 == 128, dws = d1 || d2;
    const int s1 = plan->shallow1 && !d1, s2 = plan->shallow2 && !d2;
    const char *sh = s1 && s2 ? ", both shallow" : s1 ? ", GEMM1 shallow" : s2 ? ", GEMM2 shallow" : "";
    snprintf(buf, n, "%dx%d / %dx%d%s%s%s%s%s", plan->bm1, plan->bn1, plan->bm2, plan->bn2,
             plan->persistent ? " persistent" : !plan->swapped ? (plan->wg64 ? " wgmma" : "")
                                : dws ? (plan->decode_ws == 1 ? " swapped persistent (1 CTA an SM)" : " swapped persistent (2 CTAs an SM)")
                                      : " swapped",
             !plan->persistent || !ew ? "" : ew == 3 ? ", epilogue warpgroup" : ew == 1 ? ", GEMM1 epilogue warpgroup" : ", GEMM2 epilogue warpgroup",
             sh, !plan->tma ? "" : plan->weight_promo == 256 ? ", TMA weights (L2 256 B" : plan->weight_promo == 128 ? ", TMA weights (L2 128 B" : ", TMA weights (L2 no promotion",
             !plan->tma ? "" : plan->weight_tiled && !plan->persistent ? ", tiled)" : ")");
}

extern "C" moe_fused_model moe_cuda_fx_model(const moe_cuda_fx_problem *p, const moe_cuda_fx_plan *plan)
{
    moe_fused_model m = {16, 24, 0, 0, 0.0};
    const Kind k = kind_of(p->scheme);
    if (k == KIND_I8) m.exact = 1;
    if (k == KIND_FP8 || k == KIND_FP8_BLOCK) {
        /* e4m3 mma.sync (the 16-row tiles, the GEMVs) runs on this chip as two HMMA.16816.F32 on f16 operands
         * behind F2FP unpacks (SASS: NOTES.md v16, v29), so 16 products a step; the e4m3 wgmma tiles (64x128W,
         * 128x128, the swapped decode tiles) take 32 a step */
        m.k_step = 16;
        if (plan->bm1 >= 64 || plan->swapped) m.k_step = 32, m.acc_bits = 14, m.promote_k = 128;
        /* the persistent 128-row tiles with epilogue scales promote every plan.promote_k (fast_ws.cuh) */
        if (k == KIND_FP8 && plan->persistent && plan->bm1 == 128) m.promote_k = plan->promote_k;
    }
    /* the matrix-vector kernels (plan.gemv): mma.sync steps of 16 over the whole k chain, whatever tile form the
     * plan names beside them (both GEMVs' parts of K, at most ceil(K / 128) of them, and the block scheme's
     * promotions add f32 sums: roundings after the tensor cores, within gemm_D's ceil(K / 128)) */
    if (plan->gemv) m.k_step = 16, m.acc_bits = 24, m.promote_k = 0;
    if (k == KIND_W4 && plan->bm1 == 16) m.dev = 0x1p-8; /* int4 decode tiles: c * s unrounded against round_bf16(c * s) */
    return m;
}
