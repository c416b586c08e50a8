/* The fast path's plan rule (fast_plan.h): plain C, host only, no CUDA
 * call, so it runs in CI without a GPU (tests/check_fx_plan.c). Every
 * choice below names the measurement it rests on (NOTES.md); fast.cu makes
 * the chosen kernels ready and launches them. */
#include "fast_plan.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tiles: bm, bn, the kinds each exists for, swapped, shallow, w64, its deep form, its mma.sync form */
#define ALL_KINDS ((1u << KIND_COUNT) - 1u)
#define K_(k) (1u << (k))
const fx_tile_cfg fx_cfgs[CFG_COUNT] = {
    [CFG_16x128] = {16, 128, ALL_KINDS, 0, 0, 0, CFG_16x128, CFG_16x128},
    [CFG_16x64] = {16, 64, ALL_KINDS, 0, 0, 0, CFG_16x64, CFG_16x64},
    [CFG_64x128] = {64, 128, ALL_KINDS, 0, 0, 0, CFG_64x128, CFG_64x128},
    /* the wgmma 128-row tiles: bf16 (also the 4-bit weights, dequantized by its producer: persistent only),
     * e4m3 (promoted) and int8 (both shapes, s32 sums: NOTES.md v55) */
    [CFG_128x256] = {128, 256, K_(KIND_BF16) | K_(KIND_W4) | K_(KIND_MX4) | K_(KIND_I8), 0, 0, 0, CFG_128x256, CFG_128x256},
    [CFG_128x128] = {128, 128, K_(KIND_FP8) | K_(KIND_FP8_BLOCK) | K_(KIND_I8), 0, 0, 0, CFG_128x128, CFG_128x128},
    [CFG_64x128W] = {64, 128, K_(KIND_BF16) | K_(KIND_FP8) | K_(KIND_FP8_BLOCK), 0, 0, 1, CFG_64x128W, CFG_64x128},
    /* the swapped decode tiles; a 32-row one has no mma.sync form: its mma field names its own row, and a 32-row
     * plan with plan.swapped cleared names no tile, which fx_forward refuses */
    [CFG_16x128S] = {16, 128, K_(KIND_BF16) | K_(KIND_FP8) | K_(KIND_FP8_BLOCK), 1, 0, 0, CFG_16x128S, CFG_16x128},
    [CFG_16x64S] = {16, 64, K_(KIND_BF16) | K_(KIND_FP8) | K_(KIND_FP8_BLOCK), 1, 0, 0, CFG_16x64S, CFG_16x64},
    [CFG_32x128S] = {32, 128, K_(KIND_BF16) | K_(KIND_FP8) | K_(KIND_FP8_BLOCK), 1, 0, 0, CFG_32x128S, CFG_32x128S},
    [CFG_32x64S] = {32, 64, K_(KIND_BF16) | K_(KIND_FP8) | K_(KIND_FP8_BLOCK), 1, 0, 0, CFG_32x64S, CFG_32x64S},
    /* the shallow forms (three CTAs an SM): the 16-row swapped tiles on 4 / 6 stages of 6 / 8, the e4m3 64-row
     * wgmma tile on 3 of 4 */
    [CFG_16x128S3] = {16, 128, K_(KIND_BF16) | K_(KIND_FP8) | K_(KIND_FP8_BLOCK), 1, 1, 0, CFG_16x128S, CFG_16x128},
    [CFG_16x64S3] = {16, 64, K_(KIND_BF16) | K_(KIND_FP8) | K_(KIND_FP8_BLOCK), 1, 1, 0, CFG_16x64S, CFG_16x64},
    [CFG_64x128W3] = {64, 128, K_(KIND_BF16) | K_(KIND_FP8) | K_(KIND_FP8_BLOCK), 0, 1, 1, CFG_64x128W, CFG_64x128},
};

fx_kind fx_kind_of(moe_scheme s)
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

int fx_scheme_ok(moe_scheme s) { return s == MOE_SCHEME_BF16 || fx_kind_of(s) != KIND_BF16; }

size_t fx_up256(size_t b) { return (b + 255) & ~(size_t)255; }

/* ---- the matrix-vector kernels' limits (fast_gemv.cu) --------------------- */

/* K's multiple each kind's groups need: the block scheme's and int4's 128-groups (a chunk half), e2m1's
 * 32-groups in the 16-byte pieces the rows are loaded in (K % 64: whole pieces) */
static int gemv_ktiles_ok(int kind, int K)
{
    return kind == GV_FP8_BLOCK || kind == GV_W4 ? K % 128 == 0 : kind == GV_MX4 ? K % 64 == 0 : 1;
}
/* an operand element's bytes in shared memory (bf16 for bf16 and the 4-bit schemes) */
int fx_gemv_elem_bytes(int kind) { return kind == GV_BF16 || fx_gemv_w4(kind) ? 2 : 1; }
/* shared memory of each kernel: the operand rows and their scales */
size_t fx_gemv_smem1(int kind, int H) { return ((size_t)H * fx_gemv_elem_bytes(kind) + 15) / 16 * 16 + (H / 128 + 1) * 4; }
size_t fx_gemv_smem2(int kind, int topk, int I)
{
    return ((size_t)topk * I * fx_gemv_elem_bytes(kind) + 15) / 16 * 16 + (size_t)topk * (I / 128 + 1) * 4;
}
int fx_gemv_fits(int kind, int topk, int H, int I)
{
    return kind >= GV_BF16 && kind <= GV_MX4 && topk >= 1 && topk <= GV_MAXW && gemv_ktiles_ok(kind, H) &&
           gemv_ktiles_ok(kind, I) && fx_gemv_smem1(kind, H) <= GV_SMEM_MAX && fx_gemv_smem2(kind, topk, I) <= GV_SMEM_MAX;
}

/* ---- the workspace --------------------------------------------------------- */

static void *take(char *c, size_t *off, size_t bytes)
{
    void *q = c ? c + *off : NULL;
    *off += fx_up256(bytes);
    return q;
}

/* x and h quantized to 8-bit codes in the forward */
int fx_is_q8(const moe_cuda_fx_problem *p)
{
    const fx_kind k = fx_kind_of(p->scheme);
    return k == KIND_FP8 || k == KIND_FP8_BLOCK || k == KIND_I8;
}

/* the matrix-vector forward's kind of operands (fast_gemv.h), -1 where it has none */
int fx_gemv_kind(fx_kind k)
{
    return k == KIND_BF16 ? GV_BF16 : k == KIND_FP8 ? GV_FP8 : k == KIND_FP8_BLOCK ? GV_FP8_BLOCK
                                      : k == KIND_I8 ? GV_I8 : k == KIND_W4 ? GV_W4 : k == KIND_MX4 ? GV_MX4 : -1;
}

/* activation scales per row of a K-wide operand: one per 128-group, one
 * per row, or one for the tensor (0) */
int fx_act_scale_cols(const moe_cuda_fx_problem *p, int K)
{
    moe_quant_spec as;
    if (moe_scheme_spec(p->scheme, MOE_OPERAND_ACT, &as) != MOE_OK) return 1;
    return as.gran == MOE_GRAN_GROUP ? (K + as.group_k - 1) / as.group_k : as.gran == MOE_GRAN_TENSOR ? 0 : 1;
}

/* bytes of the workspace; with ws, its pieces too */
size_t fx_carve(const moe_cuda_fx_problem *p, int bm, void *ws, fx_ws *w)
{
    const size_t cap = (size_t)moe_cuda_fx_layout_cap(p->M, p->topk, p->E, bm);
    size_t off = fx_up256(moe_cuda_fx_layout_bytes(p->M, p->topk, p->E, bm));
    char *c = (char *)ws;
    if (ws) moe_cuda_fx_layout_carve(ws, p->M, p->topk, p->E, bm, &w->L);
    void *h = take(c, &off, cap * p->I * 2);
    void *y = p->atomic ? NULL : take(c, &off, cap * p->H * 2);
    void *acc = p->atomic ? take(c, &off, (size_t)p->M * p->H * 4) : NULL;
    void *xq = NULL, *hq = NULL, *sx = NULL, *sh = NULL, *amax = NULL;
    if (fx_is_q8(p)) {
        const size_t cx = fx_act_scale_cols(p, p->H), ch = fx_act_scale_cols(p, p->I);
        xq = take(c, &off, (size_t)p->M * p->H), sx = take(c, &off, (cx ? (size_t)p->M * cx : 1) * 4);
        hq = take(c, &off, cap * p->I), sh = take(c, &off, (ch ? cap * ch : 1) * 4), amax = take(c, &off, 2 * 4);
    }
    void *tiles = take(c, &off, 2 * 4);
    if (ws) {
        w->tiles = (int *)tiles;
        w->h = h, w->y = y, w->acc = (float *)acc;
        w->xq = (uint8_t *)xq, w->hq = (uint8_t *)hq, w->sx = (float *)sx, w->sh = (float *)sh, w->amax = (float *)amax;
    }
    return off;
}

int moe_cuda_fx_layout_cap(int M, int topk, int E, int bm)
{
    const int64_t n = (int64_t)M * topk, pads = (n < E ? n : E) * (int64_t)(bm - 1);
    const int64_t rows = n + pads;
    return (int)((rows + bm - 1) / bm * bm);
}

size_t moe_cuda_fx_layout_bytes(int M, int topk, int E, int bm)
{
    const size_t cap = (size_t)moe_cuda_fx_layout_cap(M, topk, E, bm), n = (size_t)M * topk;
    return fx_up256(cap * 4) + fx_up256(cap / bm * 4) + fx_up256((size_t)E * 4) + fx_up256((size_t)(E + 1) * 4) + fx_up256(n * 4) +
           fx_up256(4) + fx_up256((size_t)FX_ALIGN_SPLIT_CTAS * E * 4);
}

void moe_cuda_fx_layout_carve(void *ws, int M, int topk, int E, int bm, moe_cuda_fx_layout *L)
{
    char *c = (char *)ws;
    const size_t cap = (size_t)moe_cuda_fx_layout_cap(M, topk, E, bm), n = (size_t)M * topk;
    L->cap = (int)cap, L->nblk = (int)(cap / bm);
    L->sorted = (int32_t *)c, c += fx_up256(cap * 4);
    L->block_expert = (int32_t *)c, c += fx_up256(cap / bm * 4);
    L->counts = (int32_t *)c, c += fx_up256((size_t)E * 4);
    L->offsets = (int32_t *)c, c += fx_up256((size_t)(E + 1) * 4);
    L->row_of_slot = (int32_t *)c, c += fx_up256(n * 4);
    L->num_blocks = (int32_t *)c, c += fx_up256(4);
    L->part = (int32_t *)c;
}

/* ---- the tiles ------------------------------------------------------------- */

/* a decode tile in its swapped wgmma form (plan.swapped), 16 or 32 token rows */
static int swap_cfg(int c, int rows32)
{
    if (c == CFG_16x128) return rows32 ? CFG_32x128S : CFG_16x128S;
    return c == CFG_16x64 ? (rows32 ? CFG_32x64S : CFG_16x64S) : c;
}

/* CFG for a decode GEMM */
static int pick_bn(int touched_est, int n_cols_per128)
{
    return (int64_t)touched_est * n_cols_per128 < 2 * 132 ? CFG_16x64 : CFG_16x128;
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
static int shallow_cfg(int c, int k_tiles, int64_t ctas)
{
    const int64_t two = 2 * 132, three = 3 * 132;
    const int tail = (ctas + three - 1) / three * three <= (ctas + two - 1) / two * two;
    if (c == CFG_16x128S && k_tiles <= 16 && (tail || ctas > 2 * three)) return CFG_16x128S3;
    if (c == CFG_16x64S && tail) return CFG_16x64S3;
    return c;
}

/* a plan's tile: e4m3 has the wgmma form of 64 x 128, the others
 * mma.sync; the decode tiles' form is the plan's (swapped) */
int fx_cfg_of(fx_kind k, int bm, int bn, int swapped, int wg64, int shallow)
{
    for (int c = 0; c < CFG_COUNT; c++)
        if (fx_cfgs[c].bm == bm && fx_cfgs[c].bn == bn && fx_cfg_ok(k, c) && (bm != 64 || fx_is_w64(c) == (wg64 != 0)) &&
            (bm >= 64 || fx_is_swapped(c) == (swapped != 0)) &&
            (!(fx_is_swapped(c) || fx_is_w64(c)) || fx_is_shallow(c) == (shallow != 0)))
            return c;
    return -1;
}

/* the epilogue-warpgroup bits the forward runs: plan.epi_wg where the tile has the form (bf16's 128 x 256
 * tiles, the only ones of that size: GEMM1 only, with TMA weights only, fast_ws.cuh); the forward and
 * moe_cuda_fx_tiles both read it, so the description names what runs */
int fx_epi_wg_runs(const moe_cuda_fx_plan *plan)
{
    return plan->epi_wg & (plan->bm2 == 128 && plan->bn2 == 256 ? (plan->tma ? 1 : 0) : 3);
}

/* the persistent decode form runs on tile c (plan.decode_ws where the tile has it: a swapped tile of 128
 * weight rows with TMA weights, not the slot layout; bf16 and the e4m3 schemes, fast_swp.h) */
int fx_dws_runs(const moe_cuda_fx_plan *plan, int c)
{
    return plan->decode_ws && fx_is_swapped(c) && fx_cfgs[c].bn == 128 && plan->tma && !plan->slot_layout;
}

/* ---- the rule --------------------------------------------------------------- */

/* plan_make's side-by-side switches (fast.h): unset, the plan's own choice
 * (dflt); "0", off; anything else, on */
static int env_flag(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v ? strcmp(v, "0") != 0 : dflt;
}

moe_status fx_plan_choose(const moe_cuda_fx_problem *p, int tma_ok, moe_cuda_fx_plan *plan, int *c1p, int *c2p)
{
    if (!p || !plan) return moe_fail(MOE_ERR_INVALID_ARG, "fx_plan_make: problem and plan must not be NULL");
    if (p->M < 1 || p->E < 1 || p->topk < 1 || p->topk > p->E || p->H < 1 || p->I < 1)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx problem: M %d, E %d, topk %d, H %d, I %d: the rule is all >= 1, topk <= E",
                        p->M, p->E, p->topk, p->H, p->I);
    if (!fx_scheme_ok(p->scheme))
        return moe_fail(MOE_ERR_UNSUPPORTED,
                        "fx problem: scheme %s: the fused fast path implements bf16, fp8_wtensor_atensor, "
                        "fp8_wchannel_atoken, fp8_wblock128_agroup128, int8_wchannel_atoken, w4a16_g128 and "
                        "mxfp4_w4a16",
                        moe_scheme_name(p->scheme));
    const fx_kind kind = fx_kind_of(p->scheme);
    const int mult = kind == KIND_FP8_BLOCK || kind == KIND_W4 ? 128 : kind == KIND_MX4 ? 64 : kind != KIND_BF16 ? 16 : 8;
    if (p->H % mult || p->I % mult)
        return moe_fail(MOE_ERR_UNSUPPORTED, "fx problem: H %d and I %d must be multiples of %d (%s)", p->H, p->I, mult,
                        mult == 128 ? "whole 128-groups" : mult == 64 ? "whole 64-wide k tiles of 4-bit codes"
                                                                      : "16-byte row copies");
    if (p->E > FX_ALIGN_THREADS) return moe_fail(MOE_ERR_UNSUPPORTED, "fx problem: E %d > %d", p->E, FX_ALIGN_THREADS);
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
    const int w4wg = fx_is_w4(kind) && env_flag("MOE_FX_W4WG", 1);
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
    else if (avg <= 64 || (kind == KIND_I8 && !i8wg) || (fx_is_w4(kind) && !w4wg)) c1 = c2 = CFG_64x128;
    else c1 = c2 = w16 || i8wg == 256 ? CFG_128x256 : CFG_128x128;
    /* the decode tiles on wgmma, weights as A (NOTES.md v16: mma.sync e4m3 is emulated on this chip) */
    plan->swapped = fx_cfgs[c1].bm == 16 && fx_cfg_ok(kind, CFG_16x128S) && env_flag("MOE_FX_SWAP", 1);
    /* 32 token rows a block (one weight pass for experts of 17-32 slots) where
     * GEMM1's k chain is long: Mixtral-8x7B M = 64 4-8% faster, Qwen3-30B-A3B
     * M = 256 (H 2048) 4-15% slower, and at 5-8 slots an expert slower too (NOTES.md v16) */
    const int rows32 = avg > 8 && p->H >= 4096;
    if (plan->swapped) c1 = swap_cfg(c1, rows32), c2 = swap_cfg(c2, rows32);
    if (plan->swapped && env_flag("MOE_FX_SHALLOW", 1)) {
        const int kt = kind == KIND_BF16 ? 64 : 128; /* a k tile: 128 bytes of a row */
        c1 = shallow_cfg(c1, (p->H + kt - 1) / kt, touched * ((p->I + fx_cfgs[c1].bn / 2 - 1) / (fx_cfgs[c1].bn / 2)));
        c2 = shallow_cfg(c2, (p->I + kt - 1) / kt, touched * ((p->H + fx_cfgs[c2].bn - 1) / fx_cfgs[c2].bn));
    }
    /* the e4m3 64-row tile with epilogue scales on 3 stages, three CTAs an SM (NOTES.md v20, same-binary A/B,
     * two rounds: 3-15% faster, Mixtral-8x7B M = 256 9-13%, Qwen3-30B-A3B M = 1024 13-15%): the promoted k loop
     * (wgmma, wait, add) is the bound, and a third CTA overlaps it. Not the block scheme (its k-tile scales
     * spill at 168 registers: 9-36% slower) nor bf16 (one stage ahead) */
    if (c1 == CFG_64x128W && kind == KIND_FP8 && env_flag("MOE_FX_SHALLOW", 1)) c1 = c2 = CFG_64x128W3;
    plan->shallow1 = fx_is_shallow(c1), plan->shallow2 = fx_is_shallow(c2);
    plan->bm1 = fx_cfgs[c1].bm, plan->bn1 = fx_cfgs[c1].bn / 2, plan->bm2 = fx_cfgs[c2].bm, plan->bn2 = fx_cfgs[c2].bn;
    plan->wg64 = fx_is_w64(c1);
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
    plan->tma = !fx_is_w4(kind) && tma_ok &&
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
    const int pk2 = kind == KIND_FP8 && plan->persistent && plan->bm1 == 128 && (fx_epi_wg_runs(plan) & 3) != 3;
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
    const int gk = fx_gemv_kind(kind);
    /* the persistent decode tiles (fast_swp.cuh), two CTAs an SM, for the e4m3 schemes where experts average
     * 9-16 slots (NOTES.md v32, same binary, MOE_FX_DWS=0 / 1 / 2 alternated, two rounds over 4 shapes x M
     * 16-256: Qwen3-30B-A3B M = 256 3-6% and Mixtral-8x7B M = 64 0.3-1% faster with two CTAs an SM; at 1-8
     * slots 0.4-4% slower, bf16 no faster than its copies; one CTA an SM on 11 / 12 stages slower at most
     * points, 1-13% on the block scheme, whose k-tile scale loads sit in the one consumer warpgroup's loop) */
    const char *dws = getenv("MOE_FX_DWS");
    plan->decode_ws = dws ? atoi(dws) : (kind == KIND_FP8 || kind == KIND_FP8_BLOCK) && avg > 8 ? 2 : 0;
    if (plan->decode_ws < 0 || plan->decode_ws > 2) plan->decode_ws = 0;
    plan->gemv = plan->slot_layout && gk >= 0 && fx_gemv_fits(gk, p->topk, p->H, p->I) && env_flag("MOE_FX_GEMV", p->I <= 1024);
    const int cap = moe_cuda_fx_layout_cap(p->M, p->topk, p->E, bm);
    if (plan->max_blocks > cap / bm) plan->max_blocks = cap / bm;
    /* the GEMMs index block scales in int: rows x 128-groups */
    if (kind == KIND_FP8_BLOCK && (int64_t)cap * ((p->H > p->I ? p->H : p->I) / 128) >= ((int64_t)1 << 31))
        return moe_fail(MOE_ERR_UNSUPPORTED, "fx problem: %d padded rows x %d groups of 128 over 2^31 scales", cap,
                        (p->H > p->I ? p->H : p->I) / 128);
    /* the 4-bit GEMMs index an expert's scales in int: N x K / 32 */
    if (fx_is_w4(kind) && (int64_t)2 * p->I * p->H / 32 >= ((int64_t)1 << 31))
        return moe_fail(MOE_ERR_UNSUPPORTED, "fx problem: 2 I x H / 32 = %lld scales an expert over 2^31",
                        (long long)2 * p->I * p->H / 32);
    plan->launches = (p->atomic ? 5 : 4) + (fx_is_q8(p) ? 2 : 0) + (p->scheme == MOE_SCHEME_FP8_WTENSOR_ATENSOR) + plan->persistent -
                     plan->slot_layout;
    if (plan->gemv) plan->launches = 2;
    plan->workspace = fx_carve(p, bm, NULL, NULL);
    if (c1p) *c1p = c1;
    if (c2p) *c2p = c2;
    return MOE_OK;
}

/* ---- fx_forward's checks ------------------------------------------------------ */

moe_status fx_plan_check(const moe_cuda_fx_problem *p, const moe_cuda_fx_plan *plan, const moe_cuda_fx_args *a,
                         int tma_ok, int *c1p, int *c2p)
{
    if (!p || !plan) return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: problem and plan must not be NULL");
    if (!fx_scheme_ok(p->scheme)) return moe_fail(MOE_ERR_UNSUPPORTED, "fx_forward: scheme %s", moe_scheme_name(p->scheme));
    const fx_kind kind = fx_kind_of(p->scheme);
    const int c1 = fx_cfg_of(kind, plan->bm1, plan->bn1 * 2, plan->swapped, plan->wg64, plan->shallow1),
              c2 = fx_cfg_of(kind, plan->bm2, plan->bn2, plan->swapped, plan->wg64, plan->shallow2);
    if (!fx_cfg_ok(kind, c1) || !fx_cfg_ok(kind, c2) || plan->bm1 != plan->bm2)
        return moe_fail(MOE_ERR_INVALID_ARG,
                        "fx_forward: plan not made by fx_plan_make for this scheme (no %s tile of %d x %d / %d x %d)",
                        plan->swapped ? "swapped" : "mma.sync / wgmma", plan->bm1, plan->bn1 * 2, plan->bm2, plan->bn2);
    if (a && kind != KIND_BF16 && (!a->w1_scale || !a->w2_scale))
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: scheme %s needs w1_scale and w2_scale", moe_scheme_name(p->scheme));
    /* the GEMMs read x, w1 and w2 in 16-byte copies and TMA boxes */
    if (a && ((uintptr_t)a->x % 16 || (uintptr_t)a->w1 % 16 || (uintptr_t)a->w2 % 16))
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: x, w1 and w2 must be 16-byte aligned (x %p, w1 %p, w2 %p)", a->x,
                        a->w1, a->w2);
    if (plan->tma && !fx_is_w4(kind) && !tma_ok)
        return moe_fail(MOE_ERR_UNSUPPORTED, "fx_forward: plan.tma set, but the driver has no cuTensorMapEncodeTiled");
    /* a plan made for another problem (another scheme shares the tiles) would
     * carve more than it allotted */
    if (fx_carve(p, plan->bm1, NULL, NULL) > plan->workspace)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: plan not made by fx_plan_make for this problem (workspace %zu < %zu)",
                        plan->workspace, fx_carve(p, plan->bm1, NULL, NULL));
    if (plan->decode_ws < 0 || plan->decode_ws > 2)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: plan.decode_ws %d: the rule is 0, 1 or 2", plan->decode_ws);
    if (fx_is_w4(kind) && plan->bm1 == 128 && !plan->persistent)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: plan.persistent 0 on 4-bit 128-row tiles: the rule is persistent "
                                             "(their producer warpgroup dequantizes; there is no one-CTA-a-tile form)");
    if (plan->weight_promo != 0 && plan->weight_promo != 128 && plan->weight_promo != 256)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: plan.weight_promo %d: the rule is 0, 128 or 256 (bytes)",
                        plan->weight_promo);
    if (plan->promote_k != 128 && plan->promote_k != 256)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: plan.promote_k %d: the rule is 128 or 256 (products)", plan->promote_k);
    if (plan->weight_tiled != 0 && plan->weight_tiled != 1)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: plan.weight_tiled %d: the rule is 0 or 1", plan->weight_tiled);
    const int tiled = plan->weight_tiled && plan->tma && !fx_is_w4(kind);
    if (a && tiled && ((uintptr_t)a->w1_tiled % 16 || (uintptr_t)a->w2_tiled % 16))
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: w1_tiled and w2_tiled must be 16-byte aligned (%p, %p)",
                        a->w1_tiled, a->w2_tiled);
    if (plan->slot_layout && (p->M != 1 || plan->bm1 != 16 || plan->max_blocks != p->topk))
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: plan not made by fx_plan_make for this problem (slot layout)");
    const int gk = fx_gemv_kind(kind);
    if (plan->gemv && (!plan->slot_layout || gk < 0 || !fx_gemv_fits(gk, p->topk, p->H, p->I)))
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: plan not made by fx_plan_make for this problem (gemv)");
    if (c1p) *c1p = c1;
    if (c2p) *c2p = c2;
    return MOE_OK;
}

/* ---- the intermediates, the words and the accumulation model ---------------- */

int fx_piece_of(const moe_cuda_fx_problem *p, const moe_cuda_fx_plan *plan, moe_cuda_fx_piece w, const fx_ws *ws,
                    const void **src, size_t *bytes)
{
    const size_t cap = (size_t)moe_cuda_fx_layout_cap(p->M, p->topk, p->E, plan->bm1), q8 = fx_is_q8(p);
    const size_t cx = q8 ? fx_act_scale_cols(p, p->H) : 0, ch = q8 ? fx_act_scale_cols(p, p->I) : 0;
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

size_t moe_cuda_fx_piece_bytes(const moe_cuda_fx_problem *p, const moe_cuda_fx_plan *plan, moe_cuda_fx_piece w)
{
    size_t b = 0;
    return p && plan && fx_piece_of(p, plan, w, NULL, NULL, &b) ? b : 0;
}

void moe_cuda_fx_tiles(const moe_cuda_fx_plan *plan, char *buf, size_t n)
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
    const int ew = fx_epi_wg_runs(plan);
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

void moe_cuda_fx_plan_words(const moe_cuda_fx_plan *plan, char *buf, size_t n)
{
    if (!buf || !n) return;
    char tiles[160];
    moe_cuda_fx_tiles(plan, tiles, sizeof tiles);
    if (!plan) snprintf(buf, n, "%s", tiles);
    else snprintf(buf, n, "%s, %d launches, workspace %zu B", tiles, plan->launches, plan->workspace);
}

moe_fused_model moe_cuda_fx_model(const moe_cuda_fx_problem *p, const moe_cuda_fx_plan *plan)
{
    moe_fused_model m = {16, 24, 0, 0, 0.0};
    const fx_kind k = fx_kind_of(p->scheme);
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
