/* The fast path's plan rule (fast_plan.c), host only and plain C: which
 * tile each GEMM runs, in which form, the launches and the workspace, and
 * the checks fx_forward makes of a plan. It calls nothing of CUDA, so the
 * rule that picks every kernel of moe_cuda_fx_forward runs and is tested
 * on a machine without a GPU or nvcc (tests/check_fx_plan.c, which pins it
 * to the plans a whole grid ran on a GPU). fast.cu makes the plan's
 * kernels ready (moe_cuda_fx_plan_make) and launches them.
 *
 * The tiles are a data table (fx_cfgs): each row one instantiation of
 * fast.cu's with_tile_t, with the operand kinds it exists for, its form
 * flags, and the forms a caller reaches by clearing the plan's flags. */
#ifndef MOE_OPTIMIZED_CUDA_FAST_PLAN_H
#define MOE_OPTIMIZED_CUDA_FAST_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include "fast.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the GEMMs multiply: bf16 values, e4m3 codes with epilogue scales
 * (per tensor / per row), e4m3 codes with k-tile scales (block 128), int8
 * codes with epilogue scales, bf16 x times 4-bit weight codes dequantized
 * in the kernel (int4 groups of 128, e2m1 with MX scales). */
typedef enum { KIND_BF16 = 0, KIND_FP8, KIND_FP8_BLOCK, KIND_I8, KIND_W4, KIND_MX4, KIND_COUNT } fx_kind;

/* The tile configurations (NOTES.md: why these; S: swapped decode tiles,
 * the weights as wgmma's A; S3 / W3: shallow forms, three CTAs an SM). Decode: 16-row blocks,
 * 4 warps side by side along N (BN 128, or BN 64 when too few CTAs would
 * stream the weights; the 4-bit schemes' BN 64 tile keeps 2). Prefill: 64-row blocks of 8 warps; 128-row blocks
 * of two warpgroups, 128 x 256 for bf16, 128 x 128 for e4m3 (the promotion
 * keeps a second set of accumulators: 2 x 64 registers a thread), either
 * for int8 (s32 sums, no promotion; plan_make, NOTES.md v55). e4m3's
 * middle range (17-64 rows an expert) runs one warpgroup on 64 x 128
 * (64x128W): mma.sync e4m3 runs at half the rate of s8 on this chip, and
 * two such CTAs an SM overlap one's promotion with the other's wgmma (v11). */
typedef enum {
    CFG_16x128 = 0, CFG_16x64, CFG_64x128, CFG_128x256, CFG_128x128, CFG_64x128W,
    CFG_16x128S, CFG_16x64S, CFG_32x128S, CFG_32x64S, CFG_16x128S3, CFG_16x64S3, CFG_64x128W3, CFG_COUNT
} fx_cfg;

typedef struct {
    int bm, bn;
    unsigned kinds; /* bit k: the tile exists for fx_kind k */
    int swapped;    /* plan.swapped's decode tiles */
    int shallow;    /* plan.shallow1 / shallow2's forms */
    int w64;        /* the wgmma 64-row tile (plan.wg64) */
    int deep;       /* the form with the plan's shallow flag cleared */
    int mma;        /* the form with its swapped / wg64 flag cleared */
} fx_tile_cfg;
extern const fx_tile_cfg fx_cfgs[CFG_COUNT];

static inline int fx_cfg_ok(fx_kind k, int c) { return c >= 0 && c < CFG_COUNT && (fx_cfgs[c].kinds >> k & 1u); }
static inline int fx_is_swapped(int c) { return c >= 0 && c < CFG_COUNT && fx_cfgs[c].swapped; }
static inline int fx_is_shallow(int c) { return c >= 0 && c < CFG_COUNT && fx_cfgs[c].shallow; }
static inline int fx_is_w64(int c) { return c >= 0 && c < CFG_COUNT && fx_cfgs[c].w64; }
static inline int fx_is_w4(fx_kind k) { return k == KIND_W4 || k == KIND_MX4; }

/* The matrix-vector kernels' operand kinds (fast_gemv.cu), their limits
 * (warps a CTA; shared memory a kernel) and whether a problem fits them. */
enum { GV_BF16 = 0, GV_FP8, GV_FP8_BLOCK, GV_I8, GV_W4, GV_MX4 };
enum { GV_MAXW = 16, GV_SMEM_MAX = 96 * 1024 };
/* the 4-bit weight codes (two a byte, converted to bf16 in the kernels) */
static inline int fx_gemv_w4(int kind) { return kind == GV_W4 || kind == GV_MX4; }
int fx_gemv_fits(int kind, int topk, int H, int I);
int fx_gemv_elem_bytes(int kind);
size_t fx_gemv_smem1(int kind, int H);
size_t fx_gemv_smem2(int kind, int topk, int I);

/* The align's CTA (E <= its threads: one counter a thread in shared
 * memory) and the split align's CTAs (the layout's part scratch). */
enum { FX_ALIGN_THREADS = 1024, FX_ALIGN_SPLIT_CTAS = 32 };

fx_kind fx_kind_of(moe_scheme s);
int fx_scheme_ok(moe_scheme s);
/* x and h quantized to 8-bit codes in the forward */
int fx_is_q8(const moe_cuda_fx_problem *p);
/* the matrix-vector kernels' kind, -1 where they have none */
int fx_gemv_kind(fx_kind k);
/* activation scales per row of a K-wide operand: one per 128-group, one per row, or one for the tensor (0) */
int fx_act_scale_cols(const moe_cuda_fx_problem *p, int K);
size_t fx_up256(size_t b);

/* The forward's workspace after the layout; fx_carve returns its bytes and,
 * with ws, points w's pieces into it. */
typedef struct {
    moe_cuda_fx_layout L;
    void *h, *y;
    float *acc;
    uint8_t *xq, *hq; /* 8-bit schemes: quantized x [M, H] and h [cap, I] */
    float *sx, *sh;   /* their scales */
    float *amax;      /* fp8_wtensor_atensor: max |x|, max |h| */
    int *tiles;       /* the persistent GEMMs' tile counters (GEMM1, GEMM2) */
} fx_ws;
size_t fx_carve(const moe_cuda_fx_problem *p, int bm, void *ws, fx_ws *w);
/* a piece's bytes and (with ws) its address; 0 for a piece the enum lacks */
int fx_piece_of(const moe_cuda_fx_problem *p, const moe_cuda_fx_plan *plan, moe_cuda_fx_piece w, const fx_ws *ws,
                const void **src, size_t *bytes);

/* The plan's tiles as fx_cfgs rows (-1: none of that shape for the kind) */
int fx_cfg_of(fx_kind k, int bm, int bn, int swapped, int wg64, int shallow);
/* the epilogue-warpgroup bits the forward runs (plan.epi_wg where the tile has the form) */
int fx_epi_wg_runs(const moe_cuda_fx_plan *plan);
/* the persistent decode form runs on tile c */
int fx_dws_runs(const moe_cuda_fx_plan *plan, int c);

/* The rule: checks the problem and fills *plan as moe_cuda_fx_plan_make
 * does (its environment switches included), without making any kernel
 * ready. tma_ok: the driver encodes tensor maps (else plan.tma is 0).
 * c1, c2 (may be NULL): GEMM1's and GEMM2's fx_cfgs rows. */
moe_status fx_plan_choose(const moe_cuda_fx_problem *p, int tma_ok, moe_cuda_fx_plan *plan, int *c1, int *c2);

/* fx_forward's checks of a plan against its problem and arguments (a may
 * be NULL: the plan alone), with the message naming the field and the
 * rule; on MOE_OK, c1 / c2 get the tiles it runs. */
moe_status fx_plan_check(const moe_cuda_fx_problem *p, const moe_cuda_fx_plan *plan, const moe_cuda_fx_args *a,
                         int tma_ok, int *c1, int *c2);

#ifdef __cplusplus
}
#endif

#endif
