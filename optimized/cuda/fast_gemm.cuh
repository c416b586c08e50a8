/* The tensor-core grouped GEMM of the fast path (fast.h). One CTA computes
 * a BM x BN tile of one (row block, N tile); a row block is BM rows of one
 * expert in the padded layout of moe_cuda_fx_align, so the grid covers
 * (row blocks, N tiles) with blocks past *num_blocks returning at once (the
 * grid is sized on the host from an upper bound: no host sync,
 * graph-capturable). CTAs run in groups of row blocks, N tiles inside a
 * group (L2 reuse of A and of the weight tiles).
 *
 * Data path: 16-byte cp.async of A rows (gathered through the layout: the
 * permute pass is fused) and of B rows (the expert's weight rows, K
 * contiguous; or, with p.b_tma, one TMA box of a tensor map over the
 * weights a k tile, issued by one thread and completing on the stage's
 * mbarrier) into a STAGES-deep ring of 64-wide k tiles; 128-byte smem
 * rows with the 16-byte chunks XOR-swizzled by (row & 7), which is both
 * conflict-free for ldmatrix and exactly wgmma's 128-byte swizzle (K-major);
 * loads past K, past N and of pad rows are zero-filled by the copy engine
 * (src-size 0), so no k tile is special-cased. Math: mma.sync m16n8k16 with
 * ldmatrix fragments (16 and 64-row tiles; 4-bit decode tiles build theirs
 * from shared loads and byte permutes, fast_w4.cuh), or wgmma m64nNk16 by warpgroups
 * straight from shared memory (128-row tiles; one group kept in flight; the
 * fused path runs these warp-specialized and persistent, fast_ws.cuh, with
 * this file's epilogue and promotion).
 * f32 accumulators either way (NOTES.md: versions, measurements).
 *
 * Epilogues (Epi):
 *   STORE      out[sorted[r], n] = acc (+ bias[e, n]), rounded once
 *              (grouped_gemm of moe_ops_cuda_fast; rows of the layout are
 *              the rows of out);
 *   GATED      GEMM1 of the fused experts: the B tile interleaves 8 gate
 *              rows and the 8 matching up rows, so the accumulators of a
 *              gate column and of its up column sit in one thread; g and u
 *              are rounded to T (the reference's GEMM1 output dtype), the
 *              reference's element function (act_core.h) gives h, rounded
 *              to T, stored at padded row r (pad rows: nothing);
 *   WSTORE     GEMM2, deterministic: y[r, n] = round_T(acc * w[slot]);
 *   WATOMIC    GEMM2, atomic: acc_out[slot / topk, n] += acc * w[slot].
 *
 * 8-bit operands (e4m3 / int8 codes, T = __nv_fp8_e4m3 / int8_t): a k tile
 * is 128 codes, the scales enter in f32 as (sum * a_scale) * w_scale, in
 * the epilogue (QS = 0: per-tensor, per-row / per-channel scales) or per
 * k tile (QS = 1: the block-128 scheme, acc = acc + (t * a_scale[row, kt])
 * * w_scale[e, n / 128, kt], gemm.h's BLOCK_TILES order). The e4m3 wgmma
 * tile moves each k tile's sums out of the tensor cores into f32 registers
 * (promotion: the tensor cores' fp8 accumulation keeps fewer bits than
 * f32 over long k chains; CUTLASS's non-fast-accum fp8 kernels and
 * DeepGEMM promote the same way), waiting for each k tile's wgmma before
 * the add (NOTES.md v9: why not two partial buffers); the swapped decode
 * tiles with epilogue scales keep two, and add one k tile's sums while the
 * next one's wgmma runs (v30, gemm_kernel). int8 accumulates in
 * s32 (exact) and converts once in the epilogue, on mma.sync and on the
 * 128-row wgmma tiles (v55: the s32 bits held in the float sums, so those
 * tiles run bf16's k loop); it has no k-tile scales (promote reads f32
 * partial sums). */
#ifndef MOE_OPTIMIZED_CUDA_FAST_GEMM_CUH
#define MOE_OPTIMIZED_CUDA_FAST_GEMM_CUH

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>
#include <string.h>
#include <type_traits>
#include "moe/act.h"
#include "reference/act_core.h"
#include "reference/quant_core.h"
#include "fast_sigmoid.cuh"
#include "fast_silu.cuh"
#include "fast_tiled.cuh"

namespace fx {

enum Epi { EPI_STORE = 0, EPI_GATED = 1, EPI_WSTORE = 2, EPI_WATOMIC = 3 };

struct gemm_params {
    const void *a;               /* A rows: a[(sorted[r] / a_div) * K] (a_gather) or a[r * K] */
    int a_gather, a_div;
    int32_t *sorted, *block_expert, *num_blocks; /* written only in the slot layout (below) */
    const void *w;               /* [E, N, K] */
    int N, K, I;                 /* I: GATED's output width (N = 2I) */
    void *out;                   /* STORE: [P, N]; GATED: h [cap, I]; WSTORE: y [cap, N] (pad rows unwritten) */
    int out_dtype;               /* STORE: MOE_F32 / MOE_BF16 / MOE_F16 */
    const float *bias;           /* STORE: f32 [E, N] or NULL */
    const float *topk_w;         /* WSTORE / WATOMIC: by slot */
    float *acc_out;              /* WATOMIC: f32 [M, N] */
    int topk;
    moe_act_params act;          /* GATED; layout GATE_UP */
    /* 8-bit schemes' scales: a_scale[arow * as_rs (+ kt)] with arow the A row
     * (gathered: the token, else the padded row), as_rs 0 per tensor, 1 per
     * row, ceil(K/128) per 128-group; w_scale[e * ws_e + (n >> ws_sh) * ws_n
     * (+ kt)]: per expert (ws_e 1, ws_n 0), per row (N, 0, 1), per 128 x 128
     * block (ceil(N/128) * ceil(K/128), 7, ceil(K/128)); NULL: none. 4-bit
     * weights: f32 [E, N, K/128] (int4) or E8M0 bytes [E, N, K/32] (e2m1) */
    const float *a_scale, *w_scale;
    int as_rs, ws_e, ws_sh, ws_n;
    float *amax_out;             /* GATED: max |h| over the real rows (f32 bits, atomicMax), or NULL */
    int max_blocks, n_tiles, group; /* the grid (set by gemm_launch) */
    int pdl_prefetch, pdl_trigger;  /* programmatic dependent launch roles (kernel comments) */
    int *tile_next;              /* gemm_ws_kernel: the grid's tile counter, zero at its launch (fast_ws.cuh) */
    int b_tma;                   /* the weight tiles by TMA (weight_map; E must be set; not the 4-bit codes) */
    const void *w_tiled;         /* with b_tma: the weights re-laid in 128 x 128-byte tiles (fast.h
                                  * moe_cuda_fx_tile_weights), the TMA boxes' source; w stays the copies'. NULL: w */
    int b_promo;                 /* weight_map's L2 promotion, bytes: 0 (none), 128 or 256 (fast.h plan.weight_promo) */
    int pad_skip;                /* row slabs of a block that hold only pads skip their MMAs (fast.h plan.pad_skip) */
    int promote_tiles;           /* gemm_ws_kernel's e4m3 tiles with epilogue scales: k tiles a promotion, 1 or 2 (fast.h plan.promote_k) */
    /* the slot layout (fast.h, M = 1): block b holds slot b alone in its row b * slot_bm (the other rows pads),
     * expert slot_ids[b] (outside [0, E): no rows); sorted, block_expert and num_blocks are not read, GEMM1
     * (slot_write) writes them and row_of_slot for the kernels after it */
    const int32_t *slot_ids;
    int32_t *row_of_slot;
    int slot_bm, E, slot_write;
};

template <class T> struct tc;
template <> struct tc<__nv_bfloat16> {
    typedef __nv_bfloat16 out_t;
    static constexpr moe_dtype dt = MOE_BF16;
    static __device__ __forceinline__ void mma(float *c, const uint32_t *a, const uint32_t *b)
    {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
    static __device__ __forceinline__ __nv_bfloat16 rnd(float v) { return __float2bfloat16_rn(v); }
    static __device__ __forceinline__ float f32(__nv_bfloat16 v) { return __bfloat162float(v); }
    static __device__ __forceinline__ float acc(float v) { return v; }
    /* pairs (the gated epilogue, NOTES.md v53): one conversion rounds two
     * values (lo in the low half), as two of rnd would; the halves back to
     * f32 exactly; max(m, |v|) per half, a NaN half skipped as fmaxf does */
    static __device__ __forceinline__ uint32_t rnd2(float lo, float hi)
    {
        const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
        return *(const uint32_t *)&v;
    }
    static __device__ __forceinline__ float lo(uint32_t v) { return __uint_as_float(v << 16); }
    static __device__ __forceinline__ float hi(uint32_t v) { return __uint_as_float(v & 0xFFFF0000u); }
    static __device__ __forceinline__ uint32_t amax2(uint32_t m, uint32_t v)
    {
        const __nv_bfloat162 r = __hmax2(*(const __nv_bfloat162 *)&m, __habs2(*(const __nv_bfloat162 *)&v));
        return *(const uint32_t *)&r;
    }
};
template <> struct tc<__half> {
    typedef __half out_t;
    static constexpr moe_dtype dt = MOE_F16;
    static __device__ __forceinline__ void mma(float *c, const uint32_t *a, const uint32_t *b)
    {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
    static __device__ __forceinline__ __half rnd(float v) { return __float2half_rn(v); }
    static __device__ __forceinline__ float f32(__half v) { return __half2float(v); }
    static __device__ __forceinline__ float acc(float v) { return v; }
    static __device__ __forceinline__ uint32_t rnd2(float lo, float hi) /* as tc<__nv_bfloat16>'s */
    {
        const __half2 v = __floats2half2_rn(lo, hi);
        return *(const uint32_t *)&v;
    }
    static __device__ __forceinline__ float lo(uint32_t v) { return __low2float(*(const __half2 *)&v); }
    static __device__ __forceinline__ float hi(uint32_t v) { return __high2float(*(const __half2 *)&v); }
    static __device__ __forceinline__ uint32_t amax2(uint32_t m, uint32_t v)
    {
        const __half2 r = __hmax2(*(const __half2 *)&m, __habs2(*(const __half2 *)&v));
        return *(const uint32_t *)&r;
    }
};

/* e4m3 operands (fp8_wchannel_atoken): m16n8k32 takes the same fragment
 * bytes as m16n8k16 bf16 (ldmatrix moves 16-bit pairs either way); the
 * products are scaled in the epilogue and the outputs are bf16 */
template <> struct tc<__nv_fp8_e4m3> {
    typedef __nv_bfloat16 out_t;
    static constexpr moe_dtype dt = MOE_E4M3;
    static __device__ __forceinline__ void mma(float *c, const uint32_t *a, const uint32_t *b)
    {
        asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
    static __device__ __forceinline__ float acc(float v) { return v; }
};

/* int8 codes (int8_wchannel_atoken): m16n8k32 with s32 accumulators, kept
 * in the float registers bit for bit (the kernel's acc arrays are float);
 * acc() converts the exact integer sum to f32 once (round to nearest) */
template <> struct tc<int8_t> {
    typedef __nv_bfloat16 out_t;
    static constexpr moe_dtype dt = MOE_I8;
    static __device__ __forceinline__ void mma(float *c, const uint32_t *a, const uint32_t *b)
    {
        int d0 = __float_as_int(c[0]), d1 = __float_as_int(c[1]), d2 = __float_as_int(c[2]), d3 = __float_as_int(c[3]);
        asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+r"(d0), "+r"(d1), "+r"(d2), "+r"(d3)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
        c[0] = __int_as_float(d0), c[1] = __int_as_float(d1), c[2] = __int_as_float(d2), c[3] = __int_as_float(d3);
    }
    static __device__ __forceinline__ float acc(float v) { return (float)__float_as_int(v); }
};

__device__ __forceinline__ void cp_async16(uint32_t smem, const void *gmem, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
__device__ __forceinline__ void ldsm_x4(uint32_t *r, uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void lds128(uint32_t *r, uint32_t addr)
{
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void lds64(uint32_t *r, uint32_t addr)
{
    asm volatile("ld.shared.v2.u32 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}
/* mbarriers and the TMA unit: the weight tiles by TMA (p.b_tma; NOTES.md v19) */
__device__ __forceinline__ void mbar_init(uint32_t a, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(a), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t a)
{
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(a) : "memory");
}
/* wait for the completion of the phase with parity ph (a fresh barrier
 * counts its phase before 0, parity 1, as complete) */
__device__ __forceinline__ void mbar_wait(uint32_t a, int ph)
{
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred P;\nmbarrier.try_wait.parity.shared::cta.b64 P, [%1], %2;\nselp.u32 %0, 1, 0, P;\n}\n"
                     : "=r"(done)
                     : "r"(a), "r"(ph)
                     : "memory");
    } while (!done);
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t a, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(a), "r"(bytes) : "memory");
}
/* an arrival on the mbarrier once the thread's cp.async copies so far have
 * landed, counted among the barrier's expected arrivals */
__device__ __forceinline__ void cp_async_arrive_noinc(uint32_t a)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(a) : "memory");
}
/* one box of the weight map into shared memory at dst, completing on mbarrier bar */
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap *m, int c0, int c1, int c2, uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, "
                 "%4}], [%5];\n" ::"r"(dst),
                 "l"((uint64_t)m), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
                 : "memory");
}
__device__ __forceinline__ void tma_load_5d(uint32_t dst, const CUtensorMap *m, int c0, int c1, int c2, int c3, int c4,
                                            uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, "
                 "%4, %5, %6}], [%7];\n" ::"r"(dst),
                 "l"((uint64_t)m), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(bar)
                 : "memory");
}

/* the weight rows of B tile (n tile nt, k tile kt) of expert e: one box
 * of weight_map's map (GATED: the 5-d view's (8-row block, expert);
 * tiled: the re-laid weights' (row in its 128-row tile, k tile, tile,
 * expert), a BN of 256 two tiles, of 64 half of one) */
template <int EPI, int BN, int KTILE>
__device__ __forceinline__ void tma_weights(uint32_t dst, const CUtensorMap *m, int kt, int nt, int e, uint32_t bar,
                                            bool tiled)
{
    mbar_arrive_expect_tx(bar, BN * 128);
    if (tiled) tma_load_5d(dst, m, 0, (nt * BN) & 127, kt, (nt * BN) >> 7, e, bar);
    else if (EPI == EPI_GATED) tma_load_5d(dst, m, kt * KTILE, 0, 0, nt * (BN / 16), e, bar);
    else tma_load_3d(dst, m, kt * KTILE, nt * BN, e, bar);
}
/* byte offset of 16-byte chunk c of row `row` in a 128-byte-row tile */
__device__ __forceinline__ uint32_t swz(int row, int c) { return (uint32_t)(row * 128 + ((c ^ (row & 7)) << 4)); }

/* WG: wgmma by warpgroups (WM = BM / 16 warps, WN = 1: warp w owns rows
 * 16w .. 16w + 15 of the tile, which is how a warpgroup's m64 accumulator
 * is laid out, n8 block by n8 block, exactly like an mma.sync fragment, so
 * the epilogue is shared); otherwise mma.sync warps in a WM x WN grid. */
/* wgmma shared-memory descriptor of a K-major tile of 128-byte rows in the
 * 128-byte swizzle (the layout swz writes): start >> 4, leading offset 1
 * (unused when swizzled), stride 1024 bytes between 8-row groups, mode 1 */
__device__ __forceinline__ uint64_t smem_desc(uint32_t saddr)
{
    return (uint64_t)((saddr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}

#include "fast_wgmma.inc"

/* SPLIT: BN 256 as two n128 instructions (the second on B rows 128-255,
 * 16 KB on: its accumulators are the n8 blocks 16-31). A kernel of 512
 * threads starts at 128 registers a thread, and ptxas refuses any one
 * instruction that needs more (m64n256's 128 accumulators, C7602) even in a
 * warpgroup that setmaxnreg gives more (fast_ws.cuh's epilogue warpgroup) */
template <class T, int BN, bool SPLIT = false> __device__ __forceinline__ void wgmma_tile(float *d, uint64_t da, uint64_t db, int sd = 1)
{
    if constexpr (SPLIT && BN == 256) {
        wgmma_tile<T, 128>(d, da, db, sd);
        wgmma_tile<T, 128>(d + 64, da, db + ((128 * 128) >> 4), sd);
    } else if constexpr (tc<T>::dt == MOE_E4M3) {
        static_assert(BN == 128, "e4m3 wgmma: the 128-wide promotion tile only");
        wgmma_m64n128k32_e4m3(d, da, db, sd);
    } else if constexpr (tc<T>::dt == MOE_I8) {
        if constexpr (BN == 256) wgmma_m64n256k32_s8(d, da, db, sd);
        else wgmma_m64n128k32_s8(d, da, db, sd);
    } else if constexpr (tc<T>::dt == MOE_BF16) {
        if (BN == 256) wgmma_m64n256k16_bf16(d, da, db);
        else wgmma_m64n128k16_bf16(d, da, db);
    } else {
        if (BN == 256) wgmma_m64n256k16_f16(d, da, db);
        else wgmma_m64n128k16_f16(d, da, db);
    }
}

/* BROW: bytes of a B row per stage, 128 (16-bit or 8-bit elements) or 32
 * (4-bit codes: the k tile's 64 codes; tiles of several warp rows
 * dequantize them into one shared 128-byte row buffer of BN rows before the
 * MMAs, decode tiles of one warp row straight into fragments, fast_w4.cuh) */
template <int BM, int BN, int WM, int WN, int STAGES, bool WG = false, int BROW = 128> struct cfg {
    static constexpr int TBM = BM, TBN = BN, NT = WM * WN * 32, WTM = BM / WM, WTN = BN / WN, MF = WTM / 16, NF = WTN / 8;
    static constexpr int CPR = BROW / 16; /* 16-byte chunks per B row per stage */
    static constexpr int A_PER = BM * 8 / NT, B_PER = BN * CPR / NT; /* 16-byte chunks per thread per stage */
    static constexpr int STAGE_BYTES = BM * 128 + BN * BROW;
    /* wgmma's and the TMA unit's 128-byte swizzle repeats every 1024 bytes:
     * tiles of 128-byte rows start 1024-aligned */
    static constexpr int SMEM = STAGES * STAGE_BYTES + (BROW != 128 && WM > 1 ? BN * 128 : 0) + (WG || BROW == 128 ? 1024 : 0);
    static_assert(BROW == 128 || (BROW == 32 && !WG), "4-bit codes: mma.sync tiles");
    static_assert(!WG || (WN == 1 && WTM == 16 && BM % 64 == 0 && (BN == 128 || BN == 256) && STAGE_BYTES % 1024 == 0 &&
                          BM * 128 % 1024 == 0) ||
                      ((BM == 16 || BM == 32) && WM * 16 == BM && WM * WN == 4 && (BN == 64 || BN == 128) &&
                       STAGE_BYTES % 1024 == 0),
                  "wgmma tiles: warpgroups of 64 rows, n 128 or 256; swapped decode tiles: 16 or 32 token rows, one "
                  "warpgroup");
    static_assert(WTM % 16 == 0 && WTN % 16 == 0, "warp tile: whole m16 and pairs of n8 fragments");
    static_assert(BM * 8 % NT == 0 && BN * CPR % NT == 0 && A_PER >= 1 && B_PER >= 1, "whole chunks per thread");
};

/* QS, how the scales enter: in the epilogue (per tensor / row), per k
 * tile (block 128), or with 4-bit weight codes dequantized per k tile
 * (int4 with f32 scales per 128, e2m1 with E8M0 scales per 32) */
enum { QS_EPILOGUE = 0, QS_KTILE = 1, QS_W4_INT = 2, QS_W4_MX = 3 };
template <int QS> struct brow_of { static constexpr int v = QS >= QS_W4_INT ? 32 : 128; };

#include "fast_w4.cuh"

/* the slot of padded row r, -1 on pads */
__device__ __forceinline__ int slot_at(const gemm_params &p, int r)
{
    return p.slot_ids ? (r % p.slot_bm ? -1 : r / p.slot_bm) : p.sorted[r];
}

/* the scale row of padded row r (times as_rs) and the weight scale index
 * of weight row n of expert e (gemm_params' scale geometry) */
__device__ __forceinline__ int a_sidx(const gemm_params &p, int r)
{
    const int s = slot_at(p, r);
    return (p.a_gather ? (s >= 0 ? s / p.a_div : 0) : r) * p.as_rs;
}
__device__ __forceinline__ int w_sidx(const gemm_params &p, int e, int n) { return e * p.ws_e + (n >> p.ws_sh) * p.ws_n; }

/* the weight row behind row j of the B tile (GATED interleaves 8 gate
 * and 8 up rows), clamped into [0, N) for scale reads past the edge */
template <int EPI, int BN> __device__ __forceinline__ int b_row(const gemm_params &p, int nt, int j)
{
    if (EPI == EPI_GATED) {
        const int col = min(nt * (BN / 2) + (j >> 4) * 8 + (j & 7), p.I - 1);
        return (j & 8) ? p.I + col : col;
    }
    return min(nt * BN + j, p.N - 1);
}

/* the weight row behind row j of the B tile and whether it exists (past I
 * or N: the copies zero-fill it), unclamped (b_row clamps, for scales) */
template <int EPI, int BN> __device__ __forceinline__ int b_row_ok(const gemm_params &p, int nt, int j, bool &ok)
{
    if (EPI == EPI_GATED) {
        const int col = nt * (BN / 2) + (j >> 4) * 8 + (j & 7);
        ok = col < p.I;
        return (j & 8) ? p.I + col : col;
    }
    ok = nt * BN + j < p.N;
    return nt * BN + j;
}

/* tile t of a grid over nb row blocks x p.n_tiles N tiles in the grouped
 * order (gemm_kernel's comment): its row block and N tile */
__device__ __forceinline__ void tile_coords(const gemm_params &p, int nb, int t, int &blk, int &nt)
{
    const int per_group = p.group * p.n_tiles, first = t / per_group * p.group, gsize = min(nb - first, p.group),
              in = t % per_group;
    blk = first + in % gsize, nt = in / gsize;
}

/* k-tile promotion: acc += part (QS_KTILE: times the k tile's scales, in
 * the order gemm.h writes: acc + (t * a_scale) * w_scale), f32; the scale
 * offsets of the thread's rows and of its n8 fragments' weight rows. The
 * k tile's scales are fetched before its wgmma is waited for (fetch, then
 * apply): loaded after the wait, their L2 round trip sat on the consumer's
 * chain every k tile (ncu, Mixtral-8x7B M = 256 block fp8 on an H100: long
 * scoreboard 51-61% of the stall samples; NOTES.md v45) */
template <class C, int EPI, int QS> struct ktile_promote {
    /* QS_KTILE is the block scheme's (128 x 128 weight blocks; H and I
     * multiples of 128, fx_plan_make): a tile's gate rows (GATED: TBN / 2
     * columns from a multiple of TBN / 2) lie in one block and its up rows in
     * one, every row of another epilogue's tile in one, where TBN / 2 (TBN)
     * divides 128: two scale loads a k tile (one), not one a fragment */
    static constexpr bool ONE_BLOCK = 128 % (EPI == EPI_GATED ? C::TBN / 2 : C::TBN) == 0;
    int sa_i[C::MF][2], sw_i[C::NF];
    struct scales {
        float a[C::MF][2], w[C::NF];
    };
    __device__ __forceinline__ void init(const gemm_params &p, int row0, int nt, int e, int wm, int wn, int lane)
    {
        if constexpr (QS == QS_KTILE) {
#pragma unroll
            for (int mi = 0; mi < C::MF; mi++)
#pragma unroll
                for (int h = 0; h < 2; h++) sa_i[mi][h] = a_sidx(p, row0 + wm * C::WTM + mi * 16 + (lane >> 2) + h * 8);
#pragma unroll
            for (int ni = 0; ni < C::NF; ni++) sw_i[ni] = w_sidx(p, e, b_row<EPI, C::TBN>(p, nt, wn * C::WTN + ni * 8));
        }
    }
    __device__ __forceinline__ scales fetch(const gemm_params &p, int kt) const
    {
        scales sc{};
        if constexpr (QS == QS_KTILE) {
#pragma unroll
            for (int mi = 0; mi < C::MF; mi++) sc.a[mi][0] = p.a_scale[sa_i[mi][0] + kt], sc.a[mi][1] = p.a_scale[sa_i[mi][1] + kt];
            if constexpr (ONE_BLOCK) { /* GATED: fragments of ni's parity are rows of ni = 0's or ni = 1's kind */
                const float w0 = p.w_scale[sw_i[0] + kt];
                float w1 = w0;
                if constexpr (EPI == EPI_GATED && C::NF > 1) w1 = p.w_scale[sw_i[1] + kt];
#pragma unroll
                for (int ni = 0; ni < C::NF; ni++) sc.w[ni] = ni & 1 ? w1 : w0;
            } else {
#pragma unroll
                for (int ni = 0; ni < C::NF; ni++) sc.w[ni] = p.w_scale[sw_i[ni] + kt];
            }
        }
        return sc;
    }
    __device__ __forceinline__ void add(const gemm_params &p, float (&acc)[C::MF][C::NF][4], const float *part, int kt) const
    {
        apply(acc, part, fetch(p, kt));
    }
    __device__ __forceinline__ void apply(float (&acc)[C::MF][C::NF][4], const float *part, const scales &sc) const
    {
#pragma unroll
        for (int mi = 0; mi < C::MF; mi++)
#pragma unroll
            for (int ni = 0; ni < C::NF; ni++)
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    const float t = part[(mi * C::NF + ni) * 4 + q];
                    if constexpr (QS == QS_KTILE) acc[mi][ni][q] = acc[mi][ni][q] + (t * sc.a[mi][q >> 1]) * sc.w[ni];
                    else acc[mi][ni][q] = acc[mi][ni][q] + t;
                }
    }
};

/* The first of the two output columns a thread holds in n8 fragment ni of
 * warp column wn (t2 = 2 (lane % 4)): GATED pairs fragment 2q (gate rows)
 * with 2q + 1 (up rows) at column gated_col(q) of h; the other epilogues
 * store fragment ni at column store_col(ni). The epilogue and epi_ops both
 * index by these. */
template <class C> __device__ __forceinline__ int gated_col(int nt, int wn, int q, int t2)
{
    return nt * (C::TBN / 2) + ((wn * C::WTN) / 16 + q) * 8 + t2;
}
template <class C> __device__ __forceinline__ int store_col(int nt, int wn, int ni, int t2)
{
    return nt * C::TBN + wn * C::WTN + ni * 8 + t2;
}

/* The epilogue's operands that come from memory: each of the thread's rows'
 * slot, activation scale and router weight, and the weight scale of each of
 * its accumulator columns. A decode tile loads them before its k loop
 * (gemm_kernel), so they arrive under the weight stream: loaded in the
 * epilogue they were a chain of round trips behind its stores (a load may
 * not move above a store that may alias it), about a fifth of an e4m3 decode
 * CTA's time (NOTES.md v30). Tiles of more than 8 n8 fragments a warp load
 * them in the epilogue (registers), gemm_kernel's one by one between the
 * stores; the persistent tiles (fast_ws.cuh, ALL) all before the first
 * store (NOTES.md v50). */
template <class C, int EPI, int QS, bool ALL = false> struct epi_ops {
    static constexpr bool ON = ALL || C::NF <= 8;
    static constexpr int R = ON ? C::MF : 1, F = ON ? C::NF : 1;
    int slot[R][2];
    float sa[R][2], wgt[R][2], ws[F][2];
    __device__ __forceinline__ void load(const gemm_params &p, int row0, int nt, int e, int wm, int wn, int lane)
    {
        load_rows(p, row0, wm, lane);
        load_cols(p, nt, e, wn, lane);
    }
    /* the rows' operands: the slot, then its scale and router weight (two round trips) */
    __device__ __forceinline__ void load_rows(const gemm_params &p, int row0, int wm, int lane)
    {
        if constexpr (ON) {
            const int g = lane >> 2;
            const bool esc = QS == QS_EPILOGUE && p.w_scale;
#pragma unroll
            for (int mi = 0; mi < C::MF; mi++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int r = row0 + wm * C::WTM + mi * 16 + g + h * 8, sl = slot_at(p, r);
                    slot[mi][h] = sl;
                    sa[mi][h] = esc && p.a_scale && sl >= 0 ? p.a_scale[a_sidx(p, r)] : 1.0f;
                    wgt[mi][h] = (EPI == EPI_WSTORE || EPI == EPI_WATOMIC) && sl >= 0 ? p.topk_w[sl] : 1.0f;
                }
        }
    }
    /* the weight scale of each accumulator column */
    __device__ __forceinline__ void load_cols(const gemm_params &p, int nt, int e, int wn, int lane)
    {
        if constexpr (ON) {
            const int t2 = (lane & 3) * 2;
            const bool esc = QS == QS_EPILOGUE && p.w_scale;
#pragma unroll
            for (int ni = 0; ni < C::NF; ni++)
#pragma unroll
                for (int c = 0; c < 2; c++) {
                    int n;
                    bool in;
                    if (EPI == EPI_GATED) { /* fragment 2q: gate columns, 2q + 1: up (the epilogue's pairing) */
                        const int col = gated_col<C>(nt, wn, ni >> 1, t2) + c;
                        in = col < p.I, n = (ni & 1) ? p.I + col : col;
                    } else {
                        n = store_col<C>(nt, wn, ni, t2) + c;
                        in = n < p.N;
                    }
                    ws[ni][c] = esc && in ? p.w_scale[w_sidx(p, e, n)] : 1.0f;
                }
        }
    }
};

/* The epilogue of a BM x BN tile (the Epi list at the top): warp (wm, wn)
 * of a WM x WN grid holds acc[MF][NF][4] in mma.sync's fragment layout
 * (a wgmma warpgroup's m64 accumulator is the same layout, warp by warp) */
template <class T, class C, int EPI, int QS, bool ALL = false>
__device__ __forceinline__ void epilogue(const gemm_params &p, float (&acc)[C::MF][C::NF][4], int row0, int nt, int e,
                                         int wm, int wn, int lane, const epi_ops<C, EPI, QS, ALL> *pre = nullptr)
{
    typedef typename tc<T>::out_t TO;
    const int g = lane >> 2, t2 = (lane & 3) * 2;
    /* epilogue scales (QS = 0): acc * a_scale(row) * w_scale(e, n), f32, in that order */
    const bool esc = QS == QS_EPILOGUE && p.w_scale;
    constexpr bool PRE_ON = epi_ops<C, EPI, QS, ALL>::ON;
    /* the weight scale of fragment ni's column c, weight row n (pre: loaded before the k loop) */
    auto wsc = [&](int ni, int c, int n) {
        if constexpr (PRE_ON)
            if (pre) return pre->ws[ni][c];
        return p.w_scale[w_sidx(p, e, n)];
    };
    float hmax = 0.0f; /* GATED with amax_out: max |h| this thread stored on real rows */
#pragma unroll
    for (int mi = 0; mi < C::MF; mi++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = row0 + wm * C::WTM + mi * 16 + g + h * 8;
            int slot;
            if constexpr (PRE_ON) slot = pre ? pre->slot[mi][h] : slot_at(p, r);
            else slot = slot_at(p, r);
            /* pad row: nothing to store (GATED too: GEMM2 zero-fills pad rows
             * of A and the 8-bit quantization reads the slots' rows only; a
             * decode tile of 16 rows holds 1-4 real ones, and computing the
             * activation of the others took most of GEMM1's epilogue, NOTES.md v22) */
            if (slot < 0) continue;
            float sa;
            if constexpr (PRE_ON) sa = pre ? pre->sa[mi][h] : esc && p.a_scale ? p.a_scale[a_sidx(p, r)] : 1.0f;
            else sa = esc && p.a_scale ? p.a_scale[a_sidx(p, r)] : 1.0f;
            if (EPI == EPI_GATED) {
                TO *hrow = (TO *)p.out + (int64_t)r * p.I;
                /* the activation fixed at compile time: silu(g) * u and
                 * swigluoai written out, the others through moe_act_gated with
                 * the act field set to a constant (folds its switch), so 64
                 * independent evaluations a thread interleave as straight
                 * code: through the run-time switch the epilogue ran at 0.1
                 * IPC and took 80% of GEMM1 (NOTES.md, v4; silu through the
                 * folded switch measured 25% slower than written out, v5;
                 * swigluoai's GEMM1 ran at 34% of the bf16 peak, Mixtral's silu
                 * one at 71%, before it was written out and moe_sigmoidf lost its
                 * branch, v21); the reference's element expressions either way
                 * (act_core.h). silu by its branch-free form first (fast_silu.cuh,
                 * NOTES.md v24: moe_siluf's branches kept the compiler from
                 * interleaving the values), and swigluoai's sigmoid too
                 * (fast_sigmoid.cuh, v54), then, where that flagged a g (rare:
                 * silu's g below -80, tiny or NaN; swigluoai's |min(g, limit)
                 * alpha| above 87 or NaN), the row again by the reference's
                 * function, stored over */
                auto store = [&](auto kind, bool *bad) {
                    uint32_t m2 = 0; /* this row's max |h|, per half of the stored pairs */
                    moe_act_params a = p.act;
                    if (decltype(kind)::value >= 0) a.act = (moe_act)decltype(kind)::value;
                    /* swigluoai written out too (gpt-oss-120b bf16 M = 4096 / 16384
                     * 17-21% faster, NOTES.md v21). The 4-bit mma.sync tiles keep the
                     * folded switch: bound by their dequantization, they gained nothing
                     * from it; mxfp4 measured 1.5% slower than the build before with
                     * either form (how the kernel compiles, not what it runs); the
                     * 4-bit wgmma tile (128 rows) is bf16's, so it takes bf16's form */
                    constexpr bool silu = decltype(kind)::value == MOE_ACT_SILU,
                                   oai = decltype(kind)::value == MOE_ACT_SWIGLUOAI && (QS < QS_W4_INT || C::TBM == 128);
#pragma unroll
                    for (int q = 0; q < C::NF / 2; q++) {
                        const int col = gated_col<C>(nt, wn, q, t2);
                        if (col >= p.I) continue;
                        float v[2];
#pragma unroll
                        for (int c = 0; c < 2; c++) {
                            float ga = tc<T>::acc(acc[mi][2 * q][h * 2 + c]), ua = tc<T>::acc(acc[mi][2 * q + 1][h * 2 + c]);
                            if (esc) ga = (ga * sa) * wsc(2 * q, c, col + c), ua = (ua * sa) * wsc(2 * q + 1, c, p.I + col + c);
                            /* g and u rounded by one conversion, h's pair by another (tc's pairs, NOTES.md v53) */
                            const uint32_t gu = tc<TO>::rnd2(ga, ua);
                            const float g = tc<TO>::lo(gu), u = tc<TO>::hi(gu);
                            v[c] = silu  ? (bad ? silu_fast(g, *bad) : moe_siluf(g)) * u
                                   : oai ? (bad ? swigluoai_fast(g, u, a.alpha, a.limit, *bad)
                                                : moe_act_swigluoai(g, u, a.alpha, a.limit))
                                         : moe_act_gated(&a, tc<TO>::dt, g, u, e, NULL, NULL, NULL);
                        }
                        const uint32_t hv = tc<TO>::rnd2(v[0], v[1]);
                        m2 = tc<TO>::amax2(m2, hv); /* NaN skipped */
                        /* I % 8 == 0: col + 1 < I, 4-byte aligned */
                        *(uint32_t *)(hrow + col) = hv;
                    }
                    return fmaxf(tc<TO>::lo(m2), tc<TO>::hi(m2));
                };
                auto row = [&](auto kind) {
                    bool bad = false;
                    constexpr int k = decltype(kind)::value;
                    float m = store(kind, k == MOE_ACT_SILU || k == MOE_ACT_SWIGLUOAI ? &bad : nullptr);
                    if (bad) m = store(kind, nullptr);
                    hmax = fmaxf(hmax, m);
                };
                if (p.act.act == MOE_ACT_SILU && !p.act.round_act_to_storage) row(std::integral_constant<int, MOE_ACT_SILU>());
                else if (p.act.act == MOE_ACT_SWIGLUOAI) row(std::integral_constant<int, MOE_ACT_SWIGLUOAI>());
                else row(std::integral_constant<int, -1>());
            } else {
                float wgt = 1.0f;
                if constexpr (EPI != EPI_STORE) {
                    if constexpr (PRE_ON) wgt = pre ? pre->wgt[mi][h] : p.topk_w[slot];
                    else wgt = p.topk_w[slot];
                }
#pragma unroll
                for (int ni = 0; ni < C::NF; ni++) {
                    const int n = store_col<C>(nt, wn, ni, t2);
                    if (EPI == EPI_WSTORE && !(p.N & 1) && n + 1 < p.N) { /* one 4-byte store for the pair */
                        const float v0 = tc<T>::acc(acc[mi][ni][h * 2]), v1 = tc<T>::acc(acc[mi][ni][h * 2 + 1]);
                        const float u0 = esc ? (v0 * sa) * wsc(ni, 0, n) : v0, u1 = esc ? (v1 * sa) * wsc(ni, 1, n + 1) : v1;
                        *(uint32_t *)((TO *)p.out + (int64_t)r * p.N + n) = tc<TO>::rnd2(u0 * wgt, u1 * wgt);
                        continue;
                    }
#pragma unroll
                    for (int c = 0; c < 2; c++) {
                        if (n + c >= p.N) continue;
                        float v = tc<T>::acc(acc[mi][ni][h * 2 + c]);
                        if (esc) v = (v * sa) * wsc(ni, c, n + c);
                        if (EPI == EPI_STORE) {
                            if (p.bias) v = v + p.bias[(int64_t)e * p.N + n + c];
                            const int64_t o = (int64_t)slot * p.N + n + c;
                            if (p.out_dtype == MOE_F32) ((float *)p.out)[o] = v;
                            else ((TO *)p.out)[o] = tc<TO>::rnd(v);
                        } else if (EPI == EPI_WSTORE) {
                            ((TO *)p.out)[(int64_t)r * p.N + n + c] = tc<TO>::rnd(v * wgt);
                        } else {
                            atomicAdd(p.acc_out + (int64_t)(slot / p.topk) * p.N + n + c, v * wgt);
                        }
                    }
                }
            }
        }
    if (EPI == EPI_GATED && p.amax_out) { /* |h| >= 0: f32 order is u32 order */
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) hmax = fmaxf(hmax, __shfl_xor_sync(0xffffffffu, hmax, o));
        if (lane == 0 && hmax > 0.0f) atomicMax((unsigned *)p.amax_out, __float_as_uint(hmax));
    }
}


/* The swapped decode tiles' steps (gemm_kernel's SW tiles and their
 * persistent form, fast_swp.cuh): the weights are wgmma's A (BN / 64 blocks
 * of 64 rows), the BM = 16 / 32 token rows its B (n16 / n32), both K-major
 * in one swizzled stage (A rows at sa, the weight rows after them). A
 * thread's sums d[mb][4j + 2h + c]: weight row 16 warp + g + 8h of block mb,
 * token 8j + t2 + c. e4m3 sums are a k tile's own (promoted by add, f32),
 * 16-bit ones accumulate in the tensor cores. */
template <class T, int BM, int BN, int QS> struct sw_steps {
    static constexpr int NB = BN / 64, SWR = BM / 2; /* sums a thread for each 64 weight rows */
    static constexpr bool PROMO = std::is_same<T, __nv_fp8_e4m3>::value;
    static constexpr int KW = PROMO ? 2 : std::is_same<T, __half>::value ? 1 : 0, TS = BN + 4;
    typedef float sums[NB][SWR];
    int sai[BM / 8][2], swi[2]; /* QS_KTILE: the scale offsets of the thread's tokens and of its block's weight rows (fetch) */
    static __device__ __forceinline__ void zero(sums &d)
    {
#pragma unroll
        for (int mb = 0; mb < NB; mb++)
#pragma unroll
            for (int i = 0; i < SWR; i++) d[mb][i] = 0.0f;
    }
    template <int EPI> __device__ __forceinline__ void init(const gemm_params &p, int row0, int nt, int e, int warp, int g, int t2)
    {
        if constexpr (QS == QS_KTILE) {
#pragma unroll
            for (int j = 0; j < BM / 8; j++)
#pragma unroll
                for (int c = 0; c < 2; c++) sai[j][c] = a_sidx(p, row0 + 8 * j + t2 + c);
#pragma unroll
            for (int h = 0; h < 2; h++) swi[h] = w_sidx(p, e, b_row<EPI, BN>(p, nt, warp * 16 + g + 8 * h));
        }
    }
    /* the k tile's wgmma into d (e4m3: d = this tile's sums; else d accumulates) */
    static __device__ __forceinline__ void issue(sums &d, uint32_t sa)
    {
        const uint32_t sb = sa + BM * 128;
        const uint64_t db = smem_desc(sa);
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int mb = 0; mb < NB; mb++) {
            const uint64_t da = smem_desc(sb + mb * 64 * 128);
#pragma unroll
            for (int kk = 0; kk < 4; kk++) wgmma_swap<KW, BM>(d[mb], da + 2 * kk, db + 2 * kk, PROMO ? kk > 0 : 1);
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    }
    /* QS_KTILE: a tile's weight rows of one kind lie in one 128 x 128 block
     * (ktile_promote's ONE_BLOCK: H and I are multiples of 128, a tile's
     * BN (GATED: BN / 2 gate and as many up rows, h = 0 / 1) divides 128),
     * so a k tile takes a weight scale for each h (the same one twice
     * outside GATED), not one a row pair and 64-row block */
    struct scales {
        float a[BM / 8][2], w[2];
    };
    /* the k tile's scales: issued before the wgmma is waited for, so they
     * arrive under it (ktile_promote's fetch / apply; NOTES.md v46) */
    __device__ __forceinline__ scales fetch(const gemm_params &p, int kt) const
    {
        scales sc{};
        if constexpr (QS == QS_KTILE) {
#pragma unroll
            for (int j = 0; j < BM / 8; j++)
#pragma unroll
                for (int c = 0; c < 2; c++) sc.a[j][c] = p.a_scale[sai[j][c] + kt];
            sc.w[0] = p.w_scale[swi[0] + kt], sc.w[1] = p.w_scale[swi[1] + kt];
        }
        return sc;
    }
    /* t += k tile kt's sums d (QS_KTILE: times the tile's scales sc, in gemm.h's order) */
    __device__ __forceinline__ void apply(sums &t, const sums &d, const scales &sc) const
    {
#pragma unroll
        for (int mb = 0; mb < NB; mb++)
#pragma unroll
            for (int i = 0; i < SWR; i++) {
                if constexpr (QS == QS_KTILE) t[mb][i] = t[mb][i] + (d[mb][i] * sc.a[i >> 2][i & 1]) * sc.w[(i >> 1) & 1];
                else t[mb][i] = t[mb][i] + d[mb][i];
            }
    }
    /* the sums transposed through shared memory, [token][weight row] f32 at
     * tr (BM x TS, rows padded against bank conflicts; within a stage), into
     * the mma.sync fragment layout of a BM x BN tile of four warps (C), so
     * the epilogue is the same code: store, a barrier of the four warps, load */
    static __device__ __forceinline__ void store(float *tr, const sums &s, int warp, int g, int t2)
    {
#pragma unroll
        for (int mb = 0; mb < NB; mb++)
#pragma unroll
            for (int i = 0; i < SWR; i++)
                tr[(8 * (i >> 2) + t2 + (i & 1)) * TS + mb * 64 + warp * 16 + g + 8 * ((i >> 1) & 1)] = s[mb][i];
    }
    template <class C> static __device__ __forceinline__ void load(const float *tr, float (&acc)[C::MF][C::NF][4], int wm, int wn, int g, int t2)
    {
#pragma unroll
        for (int ni = 0; ni < C::NF; ni++)
#pragma unroll
            for (int q = 0; q < 4; q++) acc[0][ni][q] = tr[(wm * 16 + g + 8 * (q >> 1)) * TS + wn * C::WTN + ni * 8 + t2 + (q & 1)];
    }
};

template <class T, int BM, int BN, int WM, int WN, int STAGES, int EPI, bool WG, int QS = 0>
__global__ void __launch_bounds__(WM *WN * 32, WG && BM == 64 && STAGES == 3 ? 3 : 1) gemm_kernel(const gemm_params p, const __grid_constant__ CUtensorMap wmap)
{
    typedef cfg<BM, BN, WM, WN, STAGES, WG, brow_of<QS>::v> C;
    constexpr bool E4 = std::is_same<T, __nv_fp8_e4m3>::value;
    constexpr bool SW = WG && BM < 64;   /* the swapped decode tiles (below) */
    constexpr bool PROMO = WG && E4;     /* e4m3 wgmma: f32 promotion every k tile */
    constexpr bool W4 = QS >= QS_W4_INT;    /* 4-bit weight codes (fast_w4.cuh) */
    constexpr bool W4R = W4 && WM == 1;     /* decode tiles: codes to B fragments in registers */
    constexpr bool W4S = W4 && WM > 1;      /* several warp rows: the CTA dequantizes into shared memory once */
    /* int4 on decode tiles: each 128-group's sums times its f32 scale; the
     * 64-row tiles multiply WEIGHT_TO_ACT values (measured: the deferred
     * form there took 1.5x longer, NOTES.md v12) */
    constexpr bool DEFER = QS == QS_W4_INT && W4R;
    static_assert(!WG || sizeof(T) == 2 || E4 || (std::is_same<T, int8_t>::value && BM >= 64), "wgmma tiles: bf16 / f16, e4m3 or int8 (128-row)");
    static_assert(QS != QS_KTILE || E4, "k-tile scales: e4m3 codes (promote adds f32 partial sums)");
    static_assert(!W4 || std::is_same<T, __nv_bfloat16>::value, "4-bit weights: bf16 activations (the dequant packs bf16)");
    extern __shared__ __align__(128) unsigned char smem[];
    /* CTA order: groups of `group` row blocks, the N tiles of a group
     * before the next group (Triton's GROUP_SIZE_M ordering): the A rows of
     * a group stay in L2 while every N tile reads them, and an expert's
     * weight tiles are read once per group, not once per row block; with
     * row blocks fastest, every N tile re-read all of A from HBM */
    int blk, nt;
    tile_coords(p, p.max_blocks, blockIdx.x, blk, nt);
    /* programmatic dependent launch (fast.cu launches the fused forward's
     * kernels with it; without it griddepcontrol.wait returns at once): the
     * layout of moe_cuda_fx_align is complete before a GEMM runs; only
     * GEMM2's A rows (h) come from the kernel just before it, so GEMM2
     * streams its first weight tiles before it waits (pdl_prefetch) */
    if (!p.pdl_prefetch) asm volatile("griddepcontrol.wait;\n" ::: "memory");
    int e;
    if (p.slot_ids) { /* the slot layout: blk < max_blocks = slots; the expert from the routing itself */
        e = p.slot_ids[blk];
        const bool ok = e >= 0 && e < p.E;
        if (p.slot_write && nt == 0 && (int)threadIdx.x < BM) {
            p.sorted[blk * BM + threadIdx.x] = ok && threadIdx.x == 0 ? blk : -1;
            if (threadIdx.x == 0) p.block_expert[blk] = ok ? e : -1, p.row_of_slot[blk] = ok ? blk * BM : -1;
            if (threadIdx.x == 0 && blk == 0) *p.num_blocks = p.max_blocks;
        }
        /* a block with no rows still waits for the kernel before (GEMM2: GEMM1),
         * so this grid's end implies that kernel's end, layout writes included */
        if (!ok) {
            if (p.pdl_prefetch) asm volatile("griddepcontrol.wait;\n" ::: "memory");
            return;
        }
    } else {
        if (blk >= *p.num_blocks) return;
        e = p.block_expert[blk];
    }
    /* decode GEMM1 fits in about one wave: let GEMM2's CTAs take the free
     * slots now and start on their weights (never for multi-wave grids,
     * where waiting CTAs would hold slots the primary still needs) */
    if (p.pdl_trigger) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp / WN, wn = warp % WN;
    const int row0 = blk * BM, g = lane >> 2, t2 = (lane & 3) * 2;
    /* mma.sync tiles of several warp rows: a warp whose rows are all pads
     * (pads follow an expert's real rows, align_kernel) skips its MMAs
     * (the k loop below); it still copies and meets every barrier, and its
     * epilogue stores nothing (pad rows)
     * (fast_ws.cuh does the same for a warpgroup of pads). Not for int8:
     * its s8 MMAs run at twice bf16's rate, and with the skip compiled in
     * its tiles measured 2-4% slower at every M (v21) */
    const bool idle = !WG && WM > 1 && !std::is_same<T, int8_t>::value && p.pad_skip && wm > 0 &&
                      slot_at(p, row0 + wm * C::WTM) < 0;
    typedef typename tc<T>::out_t TO;
    constexpr int EPC = 16 / (int)sizeof(T), KTILE = 8 * EPC; /* elements per 16-byte chunk / per k tile */
    const int K = p.K, KT = (K + KTILE - 1) / KTILE, ck = tid & 7;
    uint32_t sbase = (uint32_t)__cvta_generic_to_shared(smem);
    if (WG || !W4) sbase = (sbase + 1023) & ~1023u;
    /* the weight tiles by TMA (p.b_tma; 128-byte rows only, not the 4-bit
     * codes): thread 0 issues a stage's box, every thread waits on the
     * stage's mbarrier before the CTA barrier of next_tile; the stage is
     * refilled only after that barrier, as the copies are */
    const bool tma = !W4 && p.b_tma;
    __shared__ __align__(8) uint64_t tbar[STAGES];
    const uint32_t tbar0 = (uint32_t)__cvta_generic_to_shared(tbar);
    if (tma) {
        if (tid == 0) {
            for (int s = 0; s < STAGES; s++) mbar_init(tbar0 + 8 * s, 1);
            asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
            asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&wmap) : "memory");
        }
        __syncthreads();
    }

    auto n_of_j = [&](int j) { return b_row<EPI, BN>(p, nt, j); };

    /* each thread copies chunk ck of a fixed set of rows: pointers at k = 0 */
    const T *arow[C::A_PER];
    bool aval[C::A_PER];
#pragma unroll
    for (int i = 0; i < C::A_PER; i++) {
        const int r = row0 + tid / 8 + i * (C::NT / 8);
        const int s = slot_at(p, r);
        aval[i] = s >= 0;
        const int64_t src = p.a_gather ? (s >= 0 ? s / p.a_div : 0) : r;
        arow[i] = (const T *)p.a + src * (int64_t)K + ck * EPC;
    }
    const T *brow[C::B_PER];
    bool bval[C::B_PER];
    int bn_of[C::B_PER]; /* W4: the weight row of each chunk (its scales) */
#pragma unroll
    for (int i = 0; i < C::B_PER; i++) {
        const int j = (tid + i * C::NT) / C::CPR, cc = (tid + i * C::NT) % C::CPR;
        int n;
        if (EPI == EPI_GATED) {
            const int col = nt * (BN / 2) + (j >> 4) * 8 + (j & 7);
            bval[i] = col < p.I;
            n = (j & 8) ? p.I + col : col;
        } else {
            n = nt * BN + j;
            bval[i] = n < p.N;
        }
        bn_of[i] = bval[i] ? n : 0;
        if constexpr (W4) /* K / 2 bytes a row; chunk cc of a k tile: codes 32 cc .. 32 cc + 31 */
            brow[i] = (const T *)((const uint8_t *)p.w + ((int64_t)e * p.N + bn_of[i]) * (K / 2) + cc * 16);
        else brow[i] = (const T *)p.w + ((int64_t)e * p.N + bn_of[i]) * K + cc * EPC;
    }

    auto load = [&](int stage, int kt, bool a, bool b) {
        const uint32_t sa = sbase + stage * C::STAGE_BYTES, sb = sa + BM * 128;
        const int k0 = kt * KTILE + ck * EPC;
        const bool kin = k0 < K;
#pragma unroll
        for (int i = 0; a && i < C::A_PER; i++)
            cp_async16(sa + swz(tid / 8 + i * (C::NT / 8), ck), arow[i] + (kin ? kt * KTILE : 0), aval[i] && kin);
        if (b && tma) {
            if (tid == 0) tma_weights<EPI, BN, KTILE>(sb, &wmap, kt, nt, e, tbar0 + 8 * stage, p.w_tiled != nullptr);
            return;
        }
#pragma unroll
        for (int i = 0; b && i < C::B_PER; i++) {
            if constexpr (W4) {
                const int c = (tid + i * C::NT) % C::CPR, kc = kt * KTILE + c * 32;
                cp_async16(sb + (tid + i * C::NT) * 16, (const uint8_t *)brow[i] + (kc < K ? kt * 32 : 0),
                           bval[i] && kc < K);
            } else {
                cp_async16(sb + swz(tid / 8 + i * (C::NT / 8), ck), brow[i] + (kin ? kt * KTILE : 0), bval[i] && kin);
            }
        }
    };
    /* W4S: the codes of k tile kt (stage at sb) to T in the row buffer, the
     * reference's WEIGHT_TO_ACT values: round_T(f32(decode(q) * scale)),
     * scale per 128 (int4, f32) or per 32 (e2m1, E8M0) along K; chunks
     * past N or K are zeros */
    const uint32_t sdq = sbase + STAGES * C::STAGE_BYTES;
    /* the scale of chunk i at tile kt as stored (w4_scale_raw), loaded one
     * tile ahead of its use: a load issued where it was used stalled every
     * k tile for a memory round trip (NOTES.md, v10) */
    auto scale_of = [&](int i, int kt) -> uint32_t {
        const int c = (tid + i * C::NT) % C::CPR, k0 = kt * KTILE + c * 32;
        return w4_scale_raw<QS>(p.w_scale, (int64_t)e * p.N + bn_of[i], K, k0, bval[i] && k0 < K);
    };
    uint32_t scn[C::B_PER];
    if constexpr (W4S)
#pragma unroll
        for (int i = 0; i < C::B_PER; i++) scn[i] = scale_of(i, 0);
    auto dequant = [&](uint32_t sb, int kt) {
        if constexpr (!W4S) return;
        else {
#pragma unroll
        for (int i = 0; i < C::B_PER; i++) {
            const int id = tid + i * C::NT;
            uint32_t w32[4];
            lds128(w32, sb + id * 16);
            const uint32_t r = scn[i];
            scn[i] = kt + 1 < KT ? scale_of(i, kt + 1) : 0u;
            w4_dequant32<QS>(sdq, id / C::CPR, id % C::CPR * 4, w32, r);
        }
        }
    };

    float acc[C::MF][C::NF][4];
#pragma unroll
    for (int i = 0; i < C::MF; i++)
#pragma unroll
        for (int j = 0; j < C::NF; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;

    ktile_promote<C, EPI, QS> kp;
    kp.init(p, row0, nt, e, wm, wn, lane);
    auto promote = [&](const float *part, int kt) { kp.add(p, acc, part, kt); };

    /* DEFER (int4): the MMAs of a 128-group sum into dp; acc += dp * s with
     * s the f32 scale of the thread's accumulator columns (2 per n8
     * fragment), loaded two groups ahead */
    float dp[DEFER ? C::MF : 1][DEFER ? C::NF : 1][4];
    float scv[C::NF][2], scw[C::NF][2];
    int so[C::NF][2];
    const int KG = K / 128;
    const float *wsb = DEFER ? (const float *)w4_scale_row<QS_W4_INT>(p.w_scale, (int64_t)e * p.N, K) : nullptr;
    if constexpr (DEFER) {
#pragma unroll
        for (int mi = 0; mi < C::MF; mi++)
#pragma unroll
            for (int ni = 0; ni < C::NF; ni++) dp[mi][ni][0] = dp[mi][ni][1] = dp[mi][ni][2] = dp[mi][ni][3] = 0.0f;
#pragma unroll
        for (int ni = 0; ni < C::NF; ni++)
#pragma unroll
            for (int c = 0; c < 2; c++) {
                so[ni][c] = n_of_j(wn * C::WTN + ni * 8 + t2 + c) * KG;
                scv[ni][c] = __ldg(wsb + so[ni][c]), scw[ni][c] = KG > 1 ? __ldg(wsb + so[ni][c] + 1) : 0.0f;
            }
    }
    auto promote_w4 = [&](int grp) {
        if constexpr (DEFER) {
#pragma unroll
            for (int mi = 0; mi < C::MF; mi++)
#pragma unroll
                for (int ni = 0; ni < C::NF; ni++)
#pragma unroll
                    for (int q = 0; q < 4; q++)
                        acc[mi][ni][q] = fmaf(dp[mi][ni][q], scv[ni][q & 1], acc[mi][ni][q]), dp[mi][ni][q] = 0.0f;
#pragma unroll
            for (int ni = 0; ni < C::NF; ni++)
#pragma unroll
                for (int c = 0; c < 2; c++)
                    scv[ni][c] = scw[ni][c], scw[ni][c] = grp + 2 < KG ? __ldg(wsb + so[ni][c] + grp + 2) : 0.0f;
        }
    };
    /* W4R e2m1: the E8M0 code of the thread's B row of each n8 fragment
     * (the 32-group of its 16 codes), loaded one k tile ahead */
    int mxo[C::NF];
    uint32_t mxc[C::NF];
    const uint8_t *msb = W4R && QS == QS_W4_MX ? w4_scale_row<QS_W4_MX>(p.w_scale, (int64_t)e * p.N, K) : nullptr;
    if constexpr (W4R && QS == QS_W4_MX)
#pragma unroll
        for (int ni = 0; ni < C::NF; ni++)
            mxo[ni] = n_of_j(wn * C::WTN + ni * 8 + g) * (K / 32) + ((lane & 3) >> 1), mxc[ni] = __ldg(msb + mxo[ni]);

    /* prefetch distance: mma.sync reads a stage only inside its iteration,
     * so STAGES - 1 tiles ahead; wgmma keeps the previous iteration's group
     * in flight (wait_group 1), so the stage it reads is refilled one
     * iteration later: STAGES - 2 ahead (the promoted e4m3 tile waits for
     * its wgmma in the iteration: STAGES - 1) */
    constexpr int PF = WG && !PROMO ? STAGES - 2 : STAGES - 1;
    if (p.pdl_prefetch) { /* weights first; they land in commit group 0 */
#pragma unroll
        for (int s = 0; s < PF; s++)
            if (s < KT) load(s, s, false, true);
        asm volatile("griddepcontrol.wait;\n" ::: "memory");
    }
#pragma unroll
    for (int s = 0; s < PF; s++) {
        if (s < KT) load(s, s, true, !p.pdl_prefetch);
        cp_async_commit();
    }
    epi_ops<C, EPI, QS> eo; /* after the first stages' loads: it arrives under the weight stream */
    eo.load(p, row0, nt, e, wm, wn, lane);
    /* the top of every k iteration: tile kt landed, the next load issued */
    auto land = [&](int kt) {
        cp_async_wait<PF - 1>();
        if (tma) mbar_wait(tbar0 + 8 * (kt % STAGES), (kt / STAGES) & 1);
        /* the copy engine wrote through the generic proxy; wgmma reads
         * through the async proxy (HOPPER.md: fence, then the barrier) */
        if (WG) asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads(); /* tile kt landed for every thread */
        return sbase + (kt % STAGES) * C::STAGE_BYTES;
    };
    /* stage (kt + PF) % STAGES is free: no MMA of an earlier tile reads it */
    auto refill = [&](int kt) {
        if (kt + PF < KT) load((kt + PF) % STAGES, kt + PF, true, true);
        cp_async_commit();
    };
    auto next_tile = [&](int kt) {
        const uint32_t sa = land(kt);
        refill(kt);
        return sa;
    };
    /* SW: the decode tiles with the operands swapped: the weights are
     * wgmma's A (BN / 64 blocks of 64 rows), the BM = 16 / 32 token rows its B (n16 / n32;
     * both K-major in the same swizzled stages the mma.sync tile loads). On
     * this chip mma.sync e4m3 is two f16 HMMAs behind three conversions
     * (SASS: F2FP.F16.E4M3.UNPACK_B), so a decode CTA's k loop was bound by
     * its instruction latency; one warpgroup issues BN / 16 wgmma a k tile
     * instead (NOTES.md v16). e4m3 sums are promoted to f32 every k tile as
     * in the 128-row tile. The sums are transposed through shared memory
     * into the mma.sync fragment layout of a BM x BN tile of four warps
     * (C), so the epilogue is the same code. */
    typedef sw_steps<T, SW ? BM : 16, BN == 64 ? 64 : 128, SW ? QS : 0> SWS;
    typename SWS::sums sw_d, sw_t; /* sw_t: the promoted sums (e4m3) */
    if constexpr (SW) {
        SWS::zero(sw_d), SWS::zero(sw_t);
        SWS sws;
        sws.template init<EPI>(p, row0, nt, e, warp, g, t2);
        if constexpr (PROMO) {
            /* two sets of partial sums: tile kt's wgmma runs while tile kt - 1's
             * sums are added (the same adds in the same order, so the same
             * bits); the stage of kt - 1 is refilled after a second barrier,
             * once every warp has waited for that tile's wgmma, so the loads
             * stay STAGES - 1 tiles ahead. Both sets zeroed and the loop
             * unrolled by two (each set a fixed register range): written so,
             * ptxas keeps the wgmma asynchronous (no C7514 serialization, which
             * v9's one-loop form of the 128-row tile met). NOTES.md v30: e4m3
             * M = 1 decode 2-8% faster, M = 16-64 0.5-1.3%. The block scheme's
             * k-tile scales (fetch) go out with the tile's wgmma, a set of them
             * a set of sums (v30 had them loaded inside the add: 1.2% slower at
             * Mixtral-8x7B M = 64 with two sets; NOTES.md v46) */
            typename SWS::sums sw_e;
            SWS::zero(sw_e);
            typename SWS::scales sc_d = sws.fetch(p, 0), sc_e;
            SWS::issue(sw_d, land(0));
            __syncthreads();
            refill(0);
            int kt = 1;
            for (; kt + 1 < KT; kt += 2) {
                sc_e = sws.fetch(p, kt);
                SWS::issue(sw_e, land(kt));
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                sws.apply(sw_t, sw_d, sc_d);
                __syncthreads();
                refill(kt);
                sc_d = sws.fetch(p, kt + 1);
                SWS::issue(sw_d, land(kt + 1));
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                sws.apply(sw_t, sw_e, sc_e);
                __syncthreads();
                refill(kt + 1);
            }
            if (kt < KT) { /* KT even: the last tile into sw_e */
                sc_e = sws.fetch(p, kt);
                SWS::issue(sw_e, land(kt));
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                sws.apply(sw_t, sw_d, sc_d);
                __syncthreads();
                refill(kt);
                asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
                sws.apply(sw_t, sw_e, sc_e);
            } else {
                asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
                sws.apply(sw_t, sw_d, sc_d);
            }
        } else {
            for (int kt = 0; kt < KT; kt++) {
                SWS::issue(sw_d, next_tile(kt));
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
            }
        }
    } else if constexpr (PROMO) {
        /* wgmma of tile kt into part, waited for, then added into acc: a
         * second partial buffer (wgmma of kt + 1 while kt is added) made
         * ptxas serialize every wgmma (C7514: non-wgmma instructions read
         * accumulators of a wgmma in flight), so the tensor cores idle
         * while the sums move (NOTES.md, v9) */
        float part[C::MF * C::NF * 4];
        for (int kt = 0; kt < KT; kt++) {
            const uint32_t sa = next_tile(kt), sb = sa + BM * 128;
            const uint64_t da = smem_desc(sa + (warp / 4) * 64 * 128), db = smem_desc(sb);
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
            for (int kk = 0; kk < 4; kk++) wgmma_tile<T, BN>(part, da + 2 * kk, db + 2 * kk, kk > 0);
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            const auto sc = kp.fetch(p, kt); /* in flight under the wgmma */
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            kp.apply(acc, part, sc);
        }
    } else {
    if (idle) { /* the copies and the barriers of the loop below, no MMAs; its own loop, so
                 * that loop stays the one without the check (in it: int8 2-6% slower, v21) */
        for (int kt = 0; kt < KT; kt++) {
            const uint32_t sa = next_tile(kt);
            if constexpr (W4S) {
                dequant(sa + BM * 128, kt);
                __syncthreads();
            }
        }
    } else
    for (int kt = 0; kt < KT; kt++) {
        const uint32_t sa = next_tile(kt);
        uint32_t sb = sa + BM * 128;
        if constexpr (W4S) { /* the previous iteration's MMAs ended at next_tile's barrier */
            dequant(sb, kt);
            __syncthreads();
            sb = sdq;
        }
        if constexpr (WG) {
            /* each warpgroup: its 64 rows of A, all BN rows of B, four k16 steps
             * (the descriptor's start moves 32 bytes; the swizzle is applied by
             * the hardware on the address bits) */
            const uint64_t da = smem_desc(sa + (warp / 4) * 64 * 128), db = smem_desc(sb);
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
            for (int kk = 0; kk < 4; kk++) wgmma_tile<T, BN>(&acc[0][0][0], da + 2 * kk, db + 2 * kk);
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        } else if constexpr (W4R) {
            /* A: k 16q .. 16q + 15 of the thread's rows, permuted per MMA */
            uint32_t u[C::MF][2][8], af[C::MF][4][4];
#pragma unroll
            for (int mi = 0; mi < C::MF; mi++) {
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int r = wm * C::WTM + mi * 16 + g + 8 * h;
                    lds128(u[mi][h], sa + swz(r, 2 * (lane & 3))), lds128(u[mi][h] + 4, sa + swz(r, 2 * (lane & 3) + 1));
                }
#pragma unroll
                for (int j = 0; j < 4; j++) w4_a_frag(af[mi][j], u[mi], j);
            }
            uint32_t f1[C::NF], f2[C::NF];
            bool two = false;
            if constexpr (QS == QS_W4_MX) {
#pragma unroll
                for (int ni = 0; ni < C::NF; ni++) {
                    const uint32_t S = mxc[ni];
                    mxc[ni] = kt + 1 < KT ? __ldg(msb + mxo[ni] + 2 * (kt + 1)) : 0u;
                    two |= w4_mx_factors(S, &f1[ni], &f2[ni]);
                }
                two = __any_sync(0xffffffffu, two);
            }
            auto mmas = [&](auto tw) {
#pragma unroll
                for (int ni = 0; ni < C::NF; ni++) {
                    uint32_t wv[2]; /* codes 16q .. 16q + 15 of the fragment's weight row g */
                    lds64(wv, sb + (wn * C::WTN + ni * 8 + g) * 32 + (lane & 3) * 8);
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        uint32_t b[2];
                        if constexpr (QS == QS_W4_INT) b[0] = w4_pair_int(wv[0], j), b[1] = w4_pair_int(wv[1], j);
                        else
                            b[0] = w4_pair_mx(wv[0], j, f1[ni], f2[ni], decltype(tw)::value),
                            b[1] = w4_pair_mx(wv[1], j, f1[ni], f2[ni], decltype(tw)::value);
#pragma unroll
                        for (int mi = 0; mi < C::MF; mi++) tc<T>::mma(DEFER ? dp[mi][ni] : acc[mi][ni], af[mi][j], b);
                    }
                }
            };
            if (two) mmas(std::true_type());
            else mmas(std::false_type());
        } else {
            float part[QS == QS_KTILE ? C::MF * C::NF * 4 : 1];
            if constexpr (QS == QS_KTILE)
#pragma unroll
                for (int i = 0; i < C::MF * C::NF * 4; i++) part[i] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            uint32_t af[C::MF][4], bf[C::NF][2];
#pragma unroll
            for (int mi = 0; mi < C::MF; mi++) {
                const int r = wm * C::WTM + mi * 16 + (lane & 15);
                ldsm_x4(af[mi], sa + swz(r, kk * 2 + (lane >> 4)));
            }
#pragma unroll
            for (int q = 0; q < C::NF / 2; q++) {
                const int r = wn * C::WTN + q * 16 + (lane & 7) + ((lane >> 4) << 3);
                uint32_t t4[4];
                ldsm_x4(t4, sb + swz(r, kk * 2 + ((lane >> 3) & 1)));
                bf[2 * q][0] = t4[0], bf[2 * q][1] = t4[1], bf[2 * q + 1][0] = t4[2], bf[2 * q + 1][1] = t4[3];
            }
#pragma unroll
            for (int mi = 0; mi < C::MF; mi++)
#pragma unroll
                for (int ni = 0; ni < C::NF; ni++) {
                    if constexpr (QS == QS_KTILE) tc<T>::mma(&part[(mi * C::NF + ni) * 4], af[mi], bf[ni]);
                    else tc<T>::mma(acc[mi][ni], af[mi], bf[ni]);
                }
        }
            if constexpr (QS == QS_KTILE) promote(part, kt);
        }
        if constexpr (DEFER)
            if (kt & 1) promote_w4(kt >> 1); /* K % 128 == 0: a group is two k tiles */
    }
    }
    cp_async_wait<0>();
    if (WG && !PROMO) asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    if constexpr (SW) { /* through the (now idle) stages */
        float *tr = (float *)(smem + (sbase - (uint32_t)__cvta_generic_to_shared(smem)));
        __syncthreads();
        if constexpr (PROMO) SWS::store(tr, sw_t, warp, g, t2);
        else SWS::store(tr, sw_d, warp, g, t2);
        __syncthreads();
        SWS::template load<C>(tr, acc, wm, wn, g, t2);
    }

    epilogue<T, C, EPI, QS>(p, acc, row0, nt, e, wm, wn, lane, &eo);
}

/* the device's SM count, read once (a plain attribute query: graph-capture safe) */
inline cudaError_t sm_count(int *n)
{
    static int sms = 0;
    if (!sms) {
        int dev = 0;
        cudaError_t ce = cudaGetDevice(&dev);
        if (ce == cudaSuccess) ce = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        if (ce != cudaSuccess) return ce;
    }
    *n = sms;
    return cudaSuccess;
}

/* the dynamic shared-memory limit of one instantiation (above 48 KB needs the attribute) */
template <class T, int BM, int BN, int WM, int WN, int STAGES, int EPI, bool WG = false, int QS = 0> cudaError_t gemm_prepare()
{
    return cudaFuncSetAttribute(gemm_kernel<T, BM, BN, WM, WN, STAGES, EPI, WG, QS>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                cfg<BM, BN, WM, WN, STAGES, WG, brow_of<QS>::v>::SMEM);
}

/* cuTensorMapEncodeTiled from the driver the runtime loaded (no link
 * against libcuda), looked up once; NULL where the driver has none */
typedef CUresult (*encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                    const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                    CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
inline encode_tiled_fn encode_tiled()
{
    static encode_tiled_fn fn = nullptr;
    static bool tried = false;
    if (!tried) {
        void *f = nullptr;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = (encode_tiled_fn)f;
        tried = true;
    }
    return fn;
}

/* the weight map of a BN-row tile (the kernel comment: GATED's 5-d view,
 * else [E][N][K]; p.w_tiled: the re-laid weights as [E][tiles][k tiles]
 * [128 rows][128 bytes], tiled_row's order); invalid value when the weights
 * cannot be a TMA source (address or row pitch not 16-byte aligned, GATED's
 * I not whole 8-row blocks, E unset) */
template <class T, int BN, int EPI> cudaError_t weight_map(const gemm_params &p, CUtensorMap *m)
{
    const encode_tiled_fn enc = encode_tiled();
    if (!enc) return cudaErrorNotSupported;
    const cuuint64_t es = sizeof(T), K = (cuuint64_t)p.K, N = (cuuint64_t)p.N, E = (cuuint64_t)p.E;
    if ((uintptr_t)p.w % 16 || (uintptr_t)p.w_tiled % 16 || K * es % 16 || p.E < 1 ||
        (EPI == EPI_GATED && (p.I % 8 || N != 2 * (cuuint64_t)p.I)))
        return cudaErrorInvalidValue;
    const CUtensorMapL2promotion promo = p.b_promo == 256   ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B
                                         : p.b_promo == 128 ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B
                                                            : CU_TENSOR_MAP_L2_PROMOTION_NONE;
    const CUtensorMapDataType dt = sizeof(T) == 1                              ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                   : std::is_same<T, __half>::value ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                                             : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    const cuuint32_t kbox = (cuuint32_t)(128 / es), one[5] = {1, 1, 1, 1, 1};
    if (p.w_tiled) { /* a box never crosses an expert; past the last tile (BN 256 on an odd count): zeros */
        const cuuint64_t kt = (K * es + 127) / 128, nt = (cuuint64_t)tiled_count(EPI == EPI_GATED, p.N);
        const cuuint64_t tdim[5] = {kbox, 128, kt, nt, E}, tstride[4] = {128, 128 * 128, kt * 128 * 128, nt * kt * 128 * 128};
        const cuuint32_t tbox[5] = {kbox, BN < 128 ? (cuuint32_t)BN : 128, 1, BN > 128 ? (cuuint32_t)BN / 128 : 1, 1};
        const CUresult r = enc(m, dt, 5, (void *)p.w_tiled, tdim, tstride, tbox, one, CU_TENSOR_MAP_INTERLEAVE_NONE,
                               CU_TENSOR_MAP_SWIZZLE_128B, promo, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
    }
    const cuuint64_t I = (cuuint64_t)p.I;
    const cuuint64_t gdim[5] = {K, 8, 2, I / 8, E}, gstride[4] = {K * es, I * K * es, 8 * K * es, N * K * es};
    const cuuint32_t gbox[5] = {kbox, 8, 2, BN / 16, 1};
    const cuuint64_t dim[3] = {K, N, E}, stride[2] = {K * es, N * K * es};
    const cuuint32_t box[3] = {kbox, BN, 1};
    const bool g = EPI == EPI_GATED;
    const CUresult r = enc(m, dt, g ? 5 : 3, (void *)p.w, g ? gdim : dim, g ? gstride : stride, g ? gbox : box, one,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, promo, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

/* the launch's map argument: weight_map's when q.b_tma, zeros otherwise
 * (the kernels then take the copies and never read it) */
template <class T, int BN, int EPI> cudaError_t launch_map(const gemm_params &q, CUtensorMap *m)
{
    memset(m, 0, sizeof *m);
    return q.b_tma ? weight_map<T, BN, EPI>(q, m) : cudaSuccess;
}

/* pdl: launched as a programmatic dependent of the kernel before it */
template <class T, int BM, int BN, int WM, int WN, int STAGES, int EPI, bool WG = false, int QS = 0>
cudaError_t gemm_launch(const gemm_params &p, int max_blocks, int n_cols, cudaStream_t s, bool pdl = false)
{
    typedef cfg<BM, BN, WM, WN, STAGES, WG, brow_of<QS>::v> C;
    const int per_tile = EPI == EPI_GATED ? BN / 2 : BN;
    gemm_params q = p;
    q.max_blocks = max_blocks, q.n_tiles = (n_cols + per_tile - 1) / per_tile;
    q.group = BM >= 64 ? 8 : 64; /* decode: the A rows are few, the weights stream once anyway */
    cudaLaunchConfig_t lc = {};
    lc.gridDim = dim3((unsigned)((int64_t)max_blocks * q.n_tiles)), lc.blockDim = dim3(C::NT);
    lc.dynamicSmemBytes = C::SMEM, lc.stream = s;
    cudaLaunchAttribute at;
    at.id = cudaLaunchAttributeProgrammaticStreamSerialization, at.val.programmaticStreamSerializationAllowed = 1;
    lc.attrs = &at, lc.numAttrs = pdl ? 1 : 0;
    if (QS >= QS_W4_INT) q.b_tma = 0; /* the codes' rows are 32 bytes, unswizzled */
    if (!q.b_tma) q.w_tiled = NULL;  /* the copies read w */
    CUtensorMap wmap;
    const cudaError_t ce = launch_map<T, BN, EPI>(q, &wmap);
    if (ce != cudaSuccess) return ce;
    return cudaLaunchKernelEx(&lc, gemm_kernel<T, BM, BN, WM, WN, STAGES, EPI, WG, QS>, q, wmap);
}

} // namespace fx

#endif
