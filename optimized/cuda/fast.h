/* The fast experts path of the CUDA tree (moe_ops_cuda_fast's engine and
 * moe-bench's "cuda-fast"): a whole MoE experts layer on the device with
 * tensor cores, no host synchronization and a fixed launch sequence, so a
 * caller may capture it in a CUDA graph.
 *
 *   align      one kernel: per-expert counts, rows padded to the tile
 *              height BM, each slot (token t, choice j: t * topk + j)
 *              placed in its expert's segment (atomic order: a row's
 *              result does not depend on where it lands), pads -1; at
 *              M = 1 no kernel: the slot layout (plan.slot_layout);
 *   GEMM1      grouped GEMM over (expert block, N tile), rows gathered
 *              from x through the layout (no permute pass), the gated
 *              activation in the epilogue (gate and up columns of one
 *              output column land in the same thread), h stored in x's
 *              dtype in the padded layout;
 *   GEMM2      h times w2 of the block's expert; the epilogue multiplies by
 *              the slot's router weight (f32) and either stores the slot's
 *              row in x's dtype (deterministic: a reduce kernel then sums
 *              the top-k slots of each token in slot order, f32, one
 *              rounding) or adds it into an f32 accumulator with atomics
 *              (atomic variant: a convert kernel rounds it).
 *
 * GEMM1, GEMM2 and the combine are launched as programmatic dependents of
 * the kernel before each (GEMM2 streams its first weight tiles before it
 * waits for h). Tile shapes are chosen from M * topk / E (decode: 16-row tiles that
 * stream each touched expert's weights once; prefill: 64 / 128-row tiles)
 * and recorded in moe_cuda_fx_plan for the notes and the bench.
 *
 * 8-bit schemes (fp8_wtensor_atensor, fp8_wchannel_atoken,
 * fp8_wblock128_agroup128, int8_wchannel_atoken): x and h are quantized on
 * the device by the reference's rule and encoding (reference/quant_core.h:
 * per tensor from a max |x| pass and GEMM1's epilogue, per token, or per
 * 128-group), the GEMMs multiply codes (mma.sync m16n8k32; e4m3 prefill
 * tiles and the swapped decode tiles (plan.swapped) on wgmma with the
 * k-tile sums promoted to f32 registers) and apply
 * the scales in f32: (sum * a_scale) * w_scale in the epilogue, or per
 * 128-wide k tile for the block scheme (gemm.h's BLOCK_TILES order); g, u,
 * h and the outputs are bf16.
 *
 * Numerics: operands as stored (bf16 / f16), products exact in the tensor
 * cores, f32 accumulation in the tensor cores' order (BOUNDED, not EXACT,
 * against the reference: include/moe/bounds.h), g and u rounded to x's
 * dtype before the activation, whose element math is the reference's
 * (reference/act_core.h). */
#ifndef MOE_OPTIMIZED_CUDA_FAST_H
#define MOE_OPTIMIZED_CUDA_FAST_H

#include <stddef.h>
#include <stdint.h>
#include "moe/act.h"
#include "moe/dtype.h"
#include "moe/fused_judge.h"
#include "moe/quant.h"
#include "moe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The problem (include/moe/fused_judge.h's moe_fused_problem: M, E, topk,
 * H, I, scheme, act, atomic). scheme: MOE_SCHEME_BF16; an 8-bit one (x
 * stays bf16, quantized in the forward; w1 / w2 e4m3 or int8 codes with
 * the scheme's weight scales); W4A16_G128 or MXFP4_W4A16 (x bf16, w1 / w2
 * 4-bit codes, two a byte, low nibble first); others MOE_ERR_UNSUPPORTED.
 * fp8_wtensor_atensor's dynamic scales cover all rows of x and all real
 * rows of h (moe_forward's MOE_QDOM_ALL_ROWS for a1 and a2, vLLM's Triton
 * fused_moe; the reference forward's default a2 domain is per expert).
 * W4A16_G128 on decode plans (bm 16) applies each 128-group's scale to the
 * f32 sums of its codes, not WEIGHT_TO_ACT's round_bf16(c * s) per weight
 * (fast_w4.cuh; BOUNDED). act: a gated activation, layout GATE_UP (w1
 * rows: I gate rows, then I up rows). atomic: 0 deterministic combine, 1
 * atomic f32 combine. */
typedef moe_fused_problem moe_cuda_fx_problem;

typedef struct {
    const void *x;          /* [M, H] bf16 */
    const int32_t *topk_ids;/* [M, topk], each in [0, E), distinct per token */
    const float *topk_w;    /* [M, topk] */
    const void *w1;         /* [E, 2I, H] bf16, or the 8-bit / 4-bit codes */
    const void *w2;         /* [E, H, I] bf16, or the 8-bit / 4-bit codes */
    void *out;              /* [M, H] x's dtype */
    const float *w1_scale;  /* w1's scales as moe_ref_quantize lays them out: f32 [E] per tensor, [E, 2I] per row,
                             * [E, 2I/128, H/128] per block, [E, 2I, H/128] for w4a16_g128; E8M0 bytes
                             * [E, 2I, H/32] for mxfp4_w4a16 (passed through this pointer); bf16: unused */
    const float *w2_scale;  /* the same for w2: [E], [E, H], [E, H/128, I/128], [E, H, I/128], bytes [E, H, I/32] */
    const void *w1_tiled;   /* optional (NULL: not used): w1 / w2 re-laid once by moe_cuda_fx_tile_weights, 16-byte
                             * aligned; where plan.weight_tiled, the TMA boxes read these and the copies w1 / w2 */
    const void *w2_tiled;
} moe_cuda_fx_args;

typedef struct {
    int bm1, bn1, bm2, bn2; /* tile heights / widths of GEMM1 (bn1: output columns of h) and GEMM2; 128-row tiles
                             * from 65 slots an expert, for bf16 and the 4-bit schemes from 57 where H and I >=
                             * 2048 (NOTES.md v23, v34), for the e4m3 schemes from 57 where H and I >= 4096 (v26;
                             * MOE_FX_BM128=0 / 1 in the environment: never / bf16, 4-bit and fp8 from 33 slots);
                             * int8 and, with MOE_FX_W4WG=0 in the environment, the 4-bit schemes keep 64-row
                             * mma.sync tiles above 16 slots */
    int max_blocks;         /* grid rows launched (an upper bound of the padded blocks) */
    int launches;           /* kernels per forward */
    int trigger_early;      /* GEMM1 lets GEMM2's CTAs start before it ends (programmatic dependent launch) */
    int h_trigger;          /* 8-bit schemes: h's quantization lets GEMM2's CTAs start (and stream their first
                             * weight tiles) before it ends. plan_make sets it where experts average at most 4
                             * slots (NOTES.md v26); MOE_FX_HTRIG=0 / 1 in the environment: never / always; a
                             * caller may set or clear it (same results bit for bit) */
    int persistent;         /* the 128-row and the 64-row wgmma tiles run warp-specialized and persistent
                             * (fast_ws.cuh: one CTA an SM taking tiles from a counter the forward zeroes with a
                             * memset); 0: one CTA a tile (gemm_kernel, the form before; same results bit for
                             * bit). plan_make sets it for 128-row plans and bf16's 64-row wgmma plans (NOTES.md
                             * v20); MOE_FX_WS=0 / 1 in the environment: never / every such tile; a caller may
                             * clear it (the side-by-side check and timing), but not on the 4-bit schemes'
                             * 128-row tiles, which have only this form (their producer dequantizes the codes,
                             * v34): plan_make sets it there whatever MOE_FX_WS says, fx_forward refuses 0 */
    int epi_wg;             /* bit 0 / 1: GEMM1 / GEMM2 on the e4m3 schemes' persistent 128-row tiles runs its
                             * epilogue in a warpgroup of its own (fast_ws.cuh: the consumers hand their sums over
                             * in shared memory and go on with the next tile's k loop; 5 stages instead of 6; same
                             * results bit for bit; NOTES.md v25); bit 0 also on bf16's 128 x 256 tiles (GEMM1
                             * only: its sums handed over rounded to bf16, 3 stages instead of 4; v27). plan_make
                             * sets both for the block scheme, for per tensor / per channel each GEMM whose K has
                             * 32 k tiles or more, for bf16 GEMM1 where H has 40 to 64 k tiles (its
                             * measurements); MOE_FX_EWG=<mask> in the environment: that mask instead (0: never).
                             * A caller may set or clear bits; ignored where the tile has no such form */
    int slot_layout;        /* M = 1 on 16-row tiles: no align kernel; block b is slot b alone (its expert read
                             * from topk_ids by the GEMMs), GEMM1 writes the layout's sorted, block_expert,
                             * row_of_slot and num_blocks (counts and offsets are not written). A token's top-k
                             * experts are distinct, so sorting one token's slots merges no weight reads */
    int swapped;            /* the decode tiles of bf16 and the three e4m3 schemes run on wgmma with the weights
                             * as the A operand (64 weight rows by 16 token rows, or 32 where an expert averages
                             * 9-16 slots and H >= 4096; fast_gemm.cuh, NOTES.md v16, v17); 0: mma.sync with the
                             * tokens as A (the form before; int8 and the 4-bit schemes always). plan_make sets it
                             * unless MOE_FX_SWAP=0 is in the environment; a caller may clear it on a 16-row plan
                             * (a 32-row plan has no mma.sync form: refused) */
    int wg64;               /* the 64-row tiles run on wgmma (one warpgroup, 64 x 128: 64x128W in fast_plan.h): always
                             * for the e4m3 schemes, for bf16 where H >= 4096 (MOE_FX_WG64=0 / 1 in the environment
                             * overrides for bf16); 0: the mma.sync 64 x 128 tile of eight warps */
    int shallow1, shallow2; /* GEMM1 / GEMM2 on a 16-row swapped tile runs its shallow form (4 / 6 stages instead
                             * of 6 / 8: three CTAs an SM instead of two) where plan_make predicts it faster
                             * (fast_plan.c shallow_cfg); the e4m3 64-row wgmma tile with epilogue scales (per
                             * tensor, per channel) runs on 3 stages instead of 4, three CTAs an SM (both GEMMs;
                             * NOTES.md v20). MOE_FX_SHALLOW=0 in the environment: never; a caller may clear them */
    int tma;                /* the GEMMs load their weight tiles by TMA (one box a k tile; fast_gemm.cuh,
                             * fast_ws.cuh, NOTES.md v19); 0: by 16-byte cp.async from every thread (the form
                             * before; same results bit for bit). plan_make sets it where the driver encodes
                             * tensor maps and it measured faster: the 64 and 128-row tiles, the decode tiles of
                             * the 8-bit schemes and, with M > 1, of bf16 (NOTES.md v36: from tiled weights);
                             * never for the 4-bit schemes (their code rows are 32 bytes).
                             * MOE_FX_TMA=0 / 1 in the environment: never / every tile that can; a caller may set
                             * or clear it (ignored on the 4-bit schemes) */
    int pad_skip;           /* warps whose rows of a block are all pads skip their MMAs: the second warpgroup of
                             * a persistent 128-row tile, the second warp row of the mma.sync 64-row tile (not
                             * int8's; pads follow an expert's real rows, so a block's last rows are its pads;
                             * NOTES.md v21).
                             * The results are the same bit for bit (a warp of pads stores nothing). plan_make sets
                             * it unless MOE_FX_PADSKIP=0 is in the environment; a caller may clear it */
    int gemv;               /* M = 1 (slot layout): two matrix-vector kernels instead of the tiles (fast_gemv.cu:
                             * GEMV1 quantizes x in each CTA, GEMM1 and the activation; GEMV2 quantizes h in each CTA,
                             * GEMM2, the router weights and the combine), mma.sync with the weight rows as A, so the
                             * accumulation model is the mma.sync one; the other fields still describe the tiles
                             * a caller gets by clearing it. plan_make sets it for bf16, the 8-bit schemes and
                             * the 4-bit schemes (bf16 operands, codes converted in registers, NOTES.md v56) where
                             * its operands fit (top-k <= 16) and I <= 1024 (where it measured faster, NOTES.md v28,
                             * v56); MOE_FX_GEMV=0 / 1 in the environment: never / wherever it fits; a caller may set it
                             * where it fits (fx_forward refuses it elsewhere) or clear it */
    int decode_ws;          /* the swapped decode tiles of 128 weight rows with TMA weights (not the slot layout) run
                             * warp-specialized and persistent (fast_swp.cuh: a producer warp runs up to all its
                             * stages ahead across tile ends, so the next tile's weights stream during a tile's
                             * epilogue): 1, one CTA an SM on 11 / 12 stages; 2, two CTAs an SM on 5 / 6; 0, one CTA
                             * a tile (gemm_kernel; same results bit for bit). plan_make sets 2 for the e4m3 schemes
                             * where experts average 9-16 slots (NOTES.md v32); MOE_FX_DWS=0 / 1 / 2 in the
                             * environment overrides its choice; a caller may set or clear it (ignored
                             * where the tile has no such form; fx_forward refuses other values) */
    int weight_promo;       /* the L2 promotion of the TMA weight boxes, in bytes: 0 (none), 128 or 256; a cache hint
                             * only (same results bit for bit). plan_make sets 128 on the 16 / 32-row decode tiles
                             * and 256 on the 64 / 128-row ones (NOTES.md v33: 256 streamed the decode boxes 2-6%
                             * slower in a probe); MOE_FX_PROMO=0 / 128 / 256 in the environment overrides its
                             * choice; fx_forward refuses other values */
    int weight_tiled;       /* the TMA boxes read the weights re-laid in tiles (args w1_tiled / w2_tiled, where
                             * given; fast_tiled.cuh: one contiguous 16 KB run a box) instead of the row-major w1 /
                             * w2; the same bytes land, so the same results bit for bit. plan_make sets it on the
                             * 16 / 32-row decode tiles with plan.tma, where it measured faster (NOTES.md v36);
                             * the persistent 64 / 128-row tiles (plan.persistent) read the row-major boxes
                             * whatever it says. MOE_FX_TILED=0 / 1 in the environment: never / every other TMA
                             * tile; a caller may set or clear it */
    int promote_k;          /* e4m3 products between the f32 promotions of the sums on the persistent 128-row tiles
                             * of fp8 per tensor / per channel (fast_ws.cuh): 128 (one k tile) or 256 (two k
                             * tiles, one wgmma wait a pair); the block scheme (its scales change every k tile)
                             * and the other e4m3 tiles promote every 128 whatever this says. The results change
                             * within the model's bound (moe_cuda_fx_model's promote_k follows it). plan_make
                             * sets 256 where a GEMM of such a plan runs without the epilogue warpgroup (both
                             * GEMMs then promote every 256, NOTES.md v47), else 128; MOE_FX_PROMOK=128 / 256 in the environment overrides its choice;
                             * a caller may set either; fx_forward refuses other values */
    size_t workspace;       /* bytes */
} moe_cuda_fx_plan;

/* Checks the problem (host only: sizes, scheme, activation; H and I
 * multiples of 8, 16 for 8-bit codes, 128 for the block and w4a16_g128
 * schemes, 64 for mxfp4_w4a16; E <= 1024) and fills the plan. MOE_ERR_INVALID_ARG /
 * MOE_ERR_UNSUPPORTED with a message naming the field otherwise. */
moe_status moe_cuda_fx_plan_make(const moe_cuda_fx_problem *p, moe_cuda_fx_plan *plan);

/* One forward on `stream` (a cudaStream_t; NULL: the calling thread's
 * default stream). workspace: device memory of plan.workspace bytes,
 * 256-byte aligned; x, w1 and w2 16-byte aligned (MOE_ERR_INVALID_ARG
 * otherwise). Asynchronous: launch errors are returned, device
 * faults show at the next synchronization. No allocation, no host
 * synchronization: capturable in a CUDA graph. */
moe_status moe_cuda_fx_forward(const moe_cuda_fx_problem *p, const moe_cuda_fx_plan *plan, const moe_cuda_fx_args *a,
                               void *workspace, void *stream);

/* The weights re-laid for the TMA boxes, once, as engines pre-shuffle
 * their weights at load (fast_tiled.cuh): which 1 (w1) or 2 (w2) of the
 * problem's experts, [E][tiles][k tiles][128 rows][128 bytes], zeros past
 * the rows and K. tiled_bytes: the size dst needs; 0 where the problem is
 * invalid or its scheme has no TMA weights (the 4-bit codes), and
 * tile_weights then says why. tile_weights: asynchronous on stream; w as
 * moe_cuda_fx_args lays it out, w and dst 16-byte aligned. */
size_t moe_cuda_fx_tiled_bytes(const moe_cuda_fx_problem *p, int which);
moe_status moe_cuda_fx_tile_weights(const moe_cuda_fx_problem *p, int which, const void *w, void *dst, void *stream);

/* The forward's intermediates, for judging it stage by stage
 * (include/moe/fused_judge.h): the slots' padded rows (int32 [M * topk]),
 * h (bf16 [cap, I], cap = moe_cuda_fx_layout_cap(M, topk, E, plan.bm1)),
 * for 8-bit schemes x's codes [M, H] and scales and h's codes [cap, I]
 * and scales (f32: one per row, per 128-group, or one), and for the
 * deterministic combine y (bf16 [cap, H], the weighted slot rows). The
 * rows of h, h's codes and scales and y that hold no slot (pads) are
 * never written: only the slots' rows are defined. */
typedef enum {
    MOE_FX_ROWS = 0, MOE_FX_H, MOE_FX_XQ, MOE_FX_SX, MOE_FX_HQ, MOE_FX_SH, MOE_FX_Y, MOE_FX_PIECES
} moe_cuda_fx_piece;

/* bytes of a piece in the workspace of (p, plan); 0 when the problem has none */
size_t moe_cuda_fx_piece_bytes(const moe_cuda_fx_problem *p, const moe_cuda_fx_plan *plan, moe_cuda_fx_piece w);
/* copies a piece to host memory of `bytes` (= piece_bytes) after the
 * forward on the default stream; synchronous */
moe_status moe_cuda_fx_fetch(const moe_cuda_fx_problem *p, const moe_cuda_fx_plan *plan, const void *workspace,
                             moe_cuda_fx_piece w, void *host, size_t bytes);
/* The tensor-core accumulation of the plan's tiles, as the judge models
 * it (fused_judge.h): mma.sync bf16 / e4m3 steps keep an f32-wide aligned
 * sum (measured on H200: check_gpu_fast's mma_steps_within_model, NOTES.md), e4m3 wgmma steps 14 bits
 * (e8m13, truncated) and promote every 128 k (plan.promote_k on the persistent 128-row tiles of fp8 per
 * tensor / per channel), int8 is exact, int4 on decode
 * tiles scales the group sums (dev 2^-8 from WEIGHT_TO_ACT's rounding). */
moe_fused_model moe_cuda_fx_model(const moe_cuda_fx_problem *p, const moe_cuda_fx_plan *plan);

/* The plan's tiles in words for logs and reports ("16x64 / 16x128 swapped,
 * GEMM2 shallow"): bm1 x bn1 / bm2 x bn2 and the forms plan_make chose. */
void moe_cuda_fx_tiles(const moe_cuda_fx_plan *plan, char *buf, size_t n);
/* The tiles, the launches and the workspace in one line ("16x64 / 16x128
 * swapped, 4 launches, workspace 589568 B"): what moe-bench writes into a
 * point's note, and what tests/check_fx_plan.c holds the rule to. */
void moe_cuda_fx_plan_words(const moe_cuda_fx_plan *plan, char *buf, size_t n);

/* (fast_trace.cu) Every piece of the forward just run on the default
 * stream (workspace, its output out [M, H] bf16 on the device) copied into
 * *t, in the shapes moe_fused_judge takes (scales as moe_ref_quantize
 * lays them out). Synchronous; on an error *t is left empty. */
moe_status moe_cuda_fx_trace(const moe_cuda_fx_problem *p, const moe_cuda_fx_plan *plan, const void *workspace,
                             const void *out, moe_fused_trace_store *t);
/* One forward of p on host inputs (moe_fused_inputs: x bf16, ids, router
 * weights, w1 / w2 in the scheme's weight elements with their scales):
 * plan, device copies, forward, trace (*t) and the plan's model (*m);
 * desc (n bytes, may be NULL) gets the tiles and the model in words. The
 * runner of include/moe/fused_run.h's cuda-fast path. Problems the plan
 * refuses: its MOE_ERR_UNSUPPORTED / MOE_ERR_INVALID_ARG. */
moe_status moe_cuda_fx_run_traced(const moe_fused_problem *p, const moe_fused_inputs *in, moe_fused_trace_store *t,
                                  moe_fused_model *m, char *desc, size_t n);

/* The pieces, for pipelines built around other GEMMs (moe-bench's cuBLAS
 * peer) and for the tests. A layout for M * topk slots over E experts
 * padded to bm rows (bm = 1: no padding):
 *   sorted[cap]          slot id (t * topk + j) of padded row r, -1 on pads
 *   block_expert[nblk]   expert of row block b (rows b*bm .. b*bm+bm-1)
 *   counts[E]            slots per expert
 *   offsets[E + 1]       first padded row of each expert; offsets[E] = rows used
 *   row_of_slot[M*topk]  padded row of each slot
 *   num_blocks[1]        row blocks used
 *   part[32 * E]         scratch: the split align's counts, 32 CTAs' (from 8 192 slots; fast.cu)
 * cap = moe_cuda_fx_layout_cap(...) rows, nblk = cap / bm. */
typedef struct {
    int32_t *sorted, *block_expert, *counts, *offsets, *row_of_slot, *num_blocks, *part;
    int cap, nblk;
} moe_cuda_fx_layout;

/* rows of the padded layout in the worst case: M*topk + min(E, M*topk)*(bm-1), rounded up to bm */
int moe_cuda_fx_layout_cap(int M, int topk, int E, int bm);
/* bytes of a layout (256-byte aligned pieces) and carving it out of ws */
size_t moe_cuda_fx_layout_bytes(int M, int topk, int E, int bm);
void moe_cuda_fx_layout_carve(void *ws, int M, int topk, int E, int bm, moe_cuda_fx_layout *L);

/* All asynchronous on `stream` (NULL: default stream), no host sync. dtype:
 * MOE_BF16 or MOE_F16 (x, y, h, out). */
moe_status moe_cuda_fx_align(const int32_t *topk_ids, int M, int topk, int E, int bm, const moe_cuda_fx_layout *L,
                             void *stream);
/* xs[r, :] = x[sorted[r] / topk, :] for r < rows, zeros on pads (rows <= L->cap) */
moe_status moe_cuda_fx_gather(const void *x, moe_dtype dt, int H, int topk, const moe_cuda_fx_layout *L, int rows,
                              void *xs, void *stream);
/* h[r, i] = act(y1[r, i], y1[r, I + i]) for r < rows (gate-up rows of 2I), in dt */
moe_status moe_cuda_fx_act_rows(const void *y1, int rows, int I, const moe_act_params *act, moe_dtype dt, void *h,
                                void *stream);
/* out[t, :] = sum over j of w[t, j] * y[row_of_slot[t*topk + j], :] in slot order, f32, one rounding to dt;
 * topk_w NULL: the rows already carry their weights */
moe_status moe_cuda_fx_combine(const void *y, const moe_cuda_fx_layout *L, const float *topk_w, int M, int topk, int H,
                               moe_dtype dt, void *out, void *stream);

#ifdef __cplusplus
}
#endif

#endif
