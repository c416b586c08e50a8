/* The bad-input table (issue 9 item 4, DESIGN section 11): every public
 * entry point x every bad-input class that applies to it. A row names the
 * entry, the class, a builder that makes one valid call and breaks it the
 * class's way, the status the entry must return and a substring of the
 * message that names the offending argument. Each builder is also run
 * unbroken and must succeed, so a row fails only because of the break it
 * makes, never because its baseline call was already wrong.
 *
 * CLIs are a second table (exit code per DESIGN section 11, message on
 * stderr, and no output file left behind, or an existing one unchanged);
 * golden case directories a third (gk_read_case's verdict and the file it
 * names). */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli_run.h"
#include "mk_fixture.h"
#include "moe/align.h"
#include "moe/cli.h"
#include "moe/compare.h"
#include "moe/dispatch.h"
#include "moe/forward.h"
#include "moe/golden.h"
#include "moe/modular.h"
#include "moe/npy.h"
#include "moe/ops.h"
#include "moe/tolerance.h"
#include "test_tensors.h"
#include "../combos/golden_internal.h"

/* ---- a pool of tensors freed after every call, so LeakSanitizer (make
 * check-asan) sees the error paths alone ------------------------------- */

#define POOL_MAX 64
static moe_tensor pool[POOL_MAX];
static int npool;

static moe_tensor *tn(moe_dtype d, int nd, int64_t s0, int64_t s1, int64_t s2, int64_t s3)
{
    ck_assert_int_lt(npool, POOL_MAX);
    int64_t sh[4] = {s0, s1, s2, s3};
    moe_tensor *t = &pool[npool++];
    ck_assert_int_eq(moe_tensor_alloc(t, d, nd, sh), MOE_OK);
    return t;
}

static void pool_free(void)
{
    for (int i = 0; i < npool; i++) moe_tensor_free(&pool[i]);
    npool = 0;
}

static moe_tensor *ti32(int nd, int64_t s0, int64_t s1, int64_t s2, const int32_t *v)
{
    moe_tensor *t = tn(MOE_I32, nd, s0, s1, s2, 1);
    memcpy(t->data, v, t->nbytes);
    return t;
}

static moe_tensor *tf32_fill(int nd, int64_t s0, int64_t s1, int64_t s2, float base)
{
    moe_tensor *t = tn(MOE_F32, nd, s0, s1, s2, 1);
    float *f = t->data;
    for (int64_t i = 0; i < moe_tensor_numel(t); i++) f[i] = base + 0.125f * (float)(i % 13);
    return t;
}

/* ---- the classes --------------------------------------------------------- */

enum {
    OK = 0,   /* the unbroken baseline */
    NUL,      /* null pointer */
    DTYPE,    /* wrong dtype */
    SHAPE,    /* wrong rank or shape */
    SIZE,     /* negative or zero sizes */
    TOPK,     /* top-k > E */
    IDS,      /* ids out of range */
    DUP,      /* duplicate ids where the variant refuses them */
    KDIV,     /* K not divisible by the block size */
    NONFIN,   /* NaN / Inf data where refused */
    NAME,     /* unknown scheme / format / type names */
    FILEBAD,  /* truncated or corrupted files */
    OUTPATH,  /* unwritable output paths */
    NCLASS
};
static const char *const class_name[NCLASS] = {"ok", "null", "dtype", "shape", "size", "topk>E", "ids-range",
                                                 "duplicate-ids", "k-divisible", "nan-inf", "name", "file",
                                                 "output-path"};

/* A builder returns the entry's status; *untouched is cleared when an
 * output the entry promises not to write on error was written. */
typedef moe_status (*bi_build)(int cls, int *untouched);

typedef struct {
    const char *entry;
    int cls;
    bi_build build;
    moe_status want;
    const char *msg;
} bi_row;

/* Fills a tensor with a canary byte pattern and tells whether it is still
 * there (entries that promise "on any error no output is written"). */
static void canary(moe_tensor *t) { memset(t->data, 0xA5, t->nbytes); }
static int has_canary(const moe_tensor *t)
{
    const unsigned char *p = t->data;
    for (size_t i = 0; i < t->nbytes; i++)
        if (p[i] != 0xA5) return 0;
    return 1;
}

/* ---- routing and index layouts -------------------------------------------- */

static moe_status b_route(int c, int *u)
{
    (void)u;
    int64_t M = 3, E = 4;
    moe_tensor *lg = tf32_fill(2, M, c == SIZE ? 0 : E, 1, -0.5f);
    moe_tensor *ids = tn(MOE_I32, 2, M, c == SHAPE ? 3 : 2, 1, 1), *w = tn(MOE_F32, 2, M, 2, 1, 1);
    moe_tensor *bias = tf32_fill(1, E, 1, 1, 0.0f);
    moe_route_params p = {.method = MOE_ROUTE_SOFTMAX_TOPK, .topk = 2, .routed_scaling_factor = 1.0f};
    if (c == NONFIN) ((float *)bias->data)[2] = NAN, p.method = MOE_ROUTE_GROUPED_TOPK, p.num_expert_group = 2,
                     p.topk_group = 2, p.correction_bias = bias, p.score = MOE_SCORE_SIGMOID;
    if (c == TOPK) p.topk = 5;
    if (c == NAME) p.method = (moe_route_method)77;
    if (c == DTYPE) lg->dtype = MOE_I32;
    return moe_ref_route(c == NUL ? NULL : lg, &p, ids, w);
}

static moe_status b_align(int c, int *u)
{
    (void)u;
    int32_t v[6] = {0, 1, 2, 3, 1, 2};
    if (c == IDS) v[3] = 4;
    moe_tensor *ids = ti32(2, 3, 2, 1, v);
    moe_align_params p = {.block_size = 4, .num_experts = 4};
    int64_t len, blocks;
    ck_assert_int_eq(moe_align_capacity(6, &p, &len, &blocks), MOE_OK);
    moe_tensor *st = tn(MOE_I32, 1, len, 1, 1, 1), *ex = tn(MOE_I32, 1, c == SHAPE ? blocks - 1 : blocks, 1, 1, 1);
    moe_tensor *np = tn(MOE_I32, 1, 1, 1, 1, 1);
    if (c == SIZE) p.block_size = 0;
    if (c == DTYPE) ids->dtype = MOE_F32;
    return moe_ref_align_block_size(c == NUL ? NULL : ids, &p, st, ex, np);
}

static moe_status b_align_batched(int c, int *u)
{
    (void)u;
    int32_t v[2] = {1, c == IDS ? 5 : 3};
    moe_tensor *cnt = ti32(1, 2, 1, 1, v);
    moe_tensor *st = tn(MOE_I32, 1, c == SHAPE ? 7 : 8, 1, 1, 1), *ex = tn(MOE_I32, 1, 4, 1, 1, 1);
    moe_tensor *np = tn(MOE_I32, 1, 1, 1, 1, 1);
    if (c == DTYPE) cnt->dtype = MOE_F32;
    return moe_ref_align_batched(c == NUL ? NULL : cnt, 4, c == SIZE ? 0 : 2, st, ex, np);
}

static moe_status b_sort_ck(int c, int *u)
{
    int32_t v[6] = {0, 1, 2, 3, 1, 2};
    if (c == IDS) v[2] = 9;
    if (c == DUP) v[5] = 1;
    moe_tensor *ids = ti32(2, 3, 2, 1, v), *w = tf32_fill(2, 3, 2, 1, 0.25f);
    int64_t L, tiles;
    ck_assert_int_eq(moe_sort_ck_capacity(3, 2, 4, 2, MOE_SORT_CK_PAD_UPDATED, &L, &tiles), MOE_OK);
    moe_tensor *st = tn(MOE_I32, 1, L, 1, 1, 1), *sw = tn(MOE_F32, 1, c == SHAPE ? L - 1 : L, 1, 1, 1);
    moe_tensor *se = tn(MOE_I32, 1, tiles, 1, 1, 1), *np = tn(MOE_I32, 1, 2, 1, 1, 1);
    moe_sort_ck_params p = {.num_experts = 4, .unit_size = c == SIZE ? 0 : 2};
    if (c == DTYPE) w->dtype = MOE_I32;
    canary(st), canary(se), canary(np);
    moe_status s = moe_ref_sort_ck(c == NUL ? NULL : ids, w, &p, st, sw, se, np);
    if (c != OK && !(has_canary(st) && has_canary(se) && has_canary(np))) *u = 0;
    return s;
}

static moe_status b_maps(int c, int *u)
{
    int32_t v[6] = {0, 1, 2, 3, 1, 2};
    moe_tensor *ids = ti32(2, 3, 2, 1, v);
    moe_tensor *p2u = tn(MOE_I32, 1, c == SHAPE ? 5 : 6, 1, 1, 1), *u2p = tn(MOE_I32, 1, 6, 1, 1, 1);
    moe_tensor *off = tn(MOE_I64, 1, 5, 1, 1, 1);
    moe_maps_trtllm_params p = {.variant = MOE_MAPS_TRTLLM_FUSED_SINGLE_BLOCK, .num_experts = 4,
                                .num_local_experts = 4};
    if (c == SIZE) p.num_experts = 0;
    if (c == TOPK) p.num_experts = 1, p.num_local_experts = 1, off = tn(MOE_I64, 1, 2, 1, 1, 1);
    if (c == DTYPE) ids->dtype = MOE_F32;
    if (c == NAME) p.variant = (moe_maps_trtllm_variant)9;
    canary(p2u), canary(u2p), canary(off);
    moe_status s = moe_ref_maps_trtllm(c == NUL ? NULL : ids, &p, p2u, u2p, off, NULL);
    if (c != OK && !(has_canary(p2u) && has_canary(u2p) && has_canary(off))) *u = 0;
    return s;
}

/* ---- quantization ------------------------------------------------------------ */

static moe_status b_quantize(int c, int *u)
{
    (void)u;
    moe_quant_spec sp;
    ck_assert_int_eq(moe_scheme_spec(MOE_SCHEME_FP8_WBLOCK128_AGROUP128, MOE_OPERAND_ACT, &sp), MOE_OK);
    int64_t K = c == KDIV ? 200 : 256, sh[2] = {2, K};
    moe_tensor *x = tf32_fill(2, 2, K, 1, -1.0f);
    moe_tensor q, s;
    ck_assert_int_eq(moe_quant_alloc(&sp, 2, (int64_t[2]){2, 256}, &q, &s, NULL), MOE_OK);
    pool[npool++] = q, pool[npool++] = s;
    moe_tensor *qp = &pool[npool - 2], *spp = &pool[npool - 1];
    (void)sh;
    if (c == SHAPE) qp->shape[1] = 128;
    if (c == DTYPE) x->dtype = MOE_BF16, x->nbytes /= 2;
    if (c == SIZE) sp.group_k = 0;
    return moe_ref_quantize(&sp, x, NULL, c == NUL ? NULL : qp, spp, NULL);
}

static moe_status b_dequantize(int c, int *u)
{
    (void)u;
    moe_quant_spec sp;
    ck_assert_int_eq(moe_scheme_spec(MOE_SCHEME_FP8_WBLOCK128_AGROUP128, MOE_OPERAND_ACT, &sp), MOE_OK);
    moe_tensor q, s;
    ck_assert_int_eq(moe_quant_alloc(&sp, 2, (int64_t[2]){2, 256}, &q, &s, NULL), MOE_OK);
    pool[npool++] = q, pool[npool++] = s;
    moe_tensor *qp = &pool[npool - 2], *spp = &pool[npool - 1];
    float *sf = spp->data;
    for (int i = 0; i < 4; i++) sf[i] = 0.5f;
    moe_tensor *x = tn(MOE_F32, 2, 2, c == SHAPE ? 128 : 256, 1, 1);
    if (c == DTYPE) spp->dtype = MOE_I32;
    return moe_ref_dequantize(&sp, qp, c == NUL ? NULL : spp, NULL, x);
}

/* ---- permutations ---------------------------------------------------------------- */

static moe_status b_permute_rows(int c, int *u)
{
    (void)u;
    int32_t v[5] = {2, 0, -1, 1, 2};
    if (c == IDS) v[1] = 7;
    moe_tensor *x = tf32_fill(2, 3, 4, 1, 0.0f), *src = ti32(1, 5, 1, 1, v);
    moe_tensor *out = tn(MOE_F32, 2, c == SHAPE ? 4 : 5, 4, 1, 1);
    if (c == DTYPE) src->dtype = MOE_F32;
    return moe_ref_permute_rows(c == NUL ? NULL : x, src, out);
}

static moe_status b_unpermute_rows(int c, int *u)
{
    (void)u;
    int32_t v[5] = {2, 0, -1, 1, -1};
    if (c == IDS) v[1] = 9;
    if (c == DUP) v[4] = 2;
    moe_tensor *y = tf32_fill(2, 5, 4, 1, 0.0f), *dst = ti32(1, 5, 1, 1, v);
    moe_tensor *out = tn(c == DTYPE ? MOE_BF16 : MOE_F32, 2, 3, c == SHAPE ? 3 : 4, 1, 1);
    return moe_ref_unpermute_rows(y, c == NUL ? NULL : dst, out);
}

static moe_status b_expand(int c, int *u)
{
    (void)u;
    int32_t v[6] = {0, 3, 1, 4, 2, 5};
    if (c == IDS) v[2] = 6;
    moe_tensor *x = tf32_fill(2, 3, 4, 1, 0.0f), *map = ti32(1, 6, 1, 1, v), *w = tf32_fill(2, 3, 2, 1, 0.5f);
    moe_tensor *out = tn(MOE_F32, 2, 6, 4, 1, 1), *sc = tn(MOE_F32, 1, c == SHAPE ? 5 : 6, 1, 1, 1);
    if (c == DTYPE) map->dtype = MOE_F32;
    return moe_ref_expand_trtllm(x, c == NUL ? NULL : map, c == SIZE ? 0 : 2, w, out, sc);
}

static moe_status b_batched_scatter(int c, int *u)
{
    (void)u;
    int32_t v[6] = {0, 1, 2, 3, 1, 2};
    if (c == IDS) v[0] = -2;
    moe_tensor *x = tf32_fill(2, 3, 4, 1, 0.0f), *ids = ti32(2, 3, 2, 1, v);
    moe_tensor *out = tn(MOE_F32, 3, 4, c == SHAPE ? 1 : 3, 4, 1), *cnt = tn(MOE_I32, 1, 4, 1, 1, 1);
    if (c == DTYPE) ids->dtype = MOE_F32;
    return moe_ref_batched_scatter(x, ids, c == SIZE ? -1 : 0, out, c == NUL ? NULL : cnt);
}

static moe_status b_permute_grouped(int c, int *u)
{
    (void)u;
    int32_t v[6] = {0, 1, 2, 3, 1, 2};
    if (c == IDS) v[3] = -5;
    moe_tensor *x = tf32_fill(2, 3, 4, 1, 0.0f), *ids = ti32(2, 3, 2, 1, v);
    int64_t cap;
    ck_assert_int_eq(moe_grouped_capacity(6, 4, 2, &cap), MOE_OK);
    moe_tensor *out = tn(MOE_F32, 2, c == SHAPE ? 2 : cap, 4, 1, 1), *rs = tn(MOE_I32, 1, cap, 1, 1, 1);
    moe_tensor *cnt = tn(MOE_I32, 1, 4, 1, 1, 1), *off = tn(MOE_I32, 1, 5, 1, 1, 1);
    if (c == DTYPE) ids->dtype = MOE_F32;
    return moe_ref_permute_grouped(c == NUL ? NULL : x, ids, 0, c == SIZE ? 0 : 2, out, rs, cnt, off);
}

/* ---- experts ---------------------------------------------------------------------- */

static moe_status b_gemm(int c, int *u)
{
    (void)u;
    int32_t re[3] = {0, 1, -1};
    if (c == IDS) re[1] = 2;
    moe_tensor *a = tn(MOE_BF16, 2, 3, 8, 1, 1), *w = tn(MOE_BF16, 3, 2, 4, c == SHAPE ? 6 : 8, 1);
    moe_tensor *r = ti32(1, 3, 1, 1, re), *out = tn(MOE_F32, 2, 3, 4, 1, 1);
    if (c == DTYPE) w->dtype = MOE_F16;
    moe_gemm_args g = {.scheme = MOE_SCHEME_BF16, .a = c == NUL ? NULL : a, .w = w, .row_expert = r};
    if (c == NAME) g.scheme = (moe_scheme)99;
    return moe_ref_grouped_gemm(&g, out);
}

/* MXFP8 (scales per 32 along K) with K = 48: a group would straddle the
 * end of a row. The operands are built by hand, since moe_quant_alloc
 * already refuses that K. */
static moe_status b_gemm_kdiv(int c, int *u)
{
    (void)u;
    int64_t K = c == KDIV ? 48 : 64, G = (K + 31) / 32;
    moe_tensor *a = tn(MOE_E4M3, 2, 2, K, 1, 1), *as = tn(MOE_E8M0, 2, 2, G, 1, 1);
    moe_tensor *w = tn(MOE_E4M3, 3, 2, 4, K, 1), *ws = tn(MOE_E8M0, 3, 2, 4, G, 1);
    memset(as->data, 127, as->nbytes);
    memset(ws->data, 127, ws->nbytes);
    int32_t re[2] = {0, 1};
    moe_tensor *r = ti32(1, 2, 1, 1, re), *out = tn(MOE_F32, 2, 2, 4, 1, 1);
    moe_gemm_args g = {.scheme = MOE_SCHEME_MXFP8, .a = a, .a_scale = as, .w = w, .w_scale = ws, .row_expert = r};
    return moe_ref_grouped_gemm(&g, out);
}

static moe_status b_activation(int c, int *u)
{
    (void)u;
    moe_tensor *x = tn(MOE_BF16, 2, 3, 8, 1, 1), *out = tn(c == DTYPE ? MOE_I32 : MOE_BF16, 2, 3, c == SHAPE ? 8 : 4, 1, 1);
    moe_act_params p = moe_act_defaults(MOE_ACT_SILU, MOE_LAYOUT_GATE_UP);
    if (c == NAME) p.act = (moe_act)42;
    const moe_tensor *re = NULL;
    if (c == IDS || c == OK) {
        int32_t v[3] = {0, c == IDS ? 3 : 1, -1};
        p = moe_act_defaults(MOE_ACT_SWIGLU_BIAS, MOE_LAYOUT_GATE_UP);
        p.swiglu_alpha = tf32_fill(1, 2, 1, 1, 1.0f);
        re = ti32(1, 3, 1, 1, v);
    }
    if (c == NONFIN) p = moe_act_defaults(MOE_ACT_SWIGLUOAI, MOE_LAYOUT_INTERLEAVED), p.alpha = NAN;
    return moe_ref_activation(c == NUL ? NULL : x, re, &p, out);
}

/* ---- weight and reduce -------------------------------------------------------------- */

static moe_status b_war_contiguous(int c, int *u)
{
    (void)u;
    moe_tensor *f = tn(MOE_BF16, 2, 6, 4, 1, 1), *w = tf32_fill(2, 3, c == SHAPE ? 3 : 2, 1, 0.5f);
    moe_tensor *out = tn(c == DTYPE ? MOE_I8 : MOE_BF16, 2, 3, 4, 1, 1);
    return moe_ref_war_contiguous(f, c == NUL ? NULL : w, 0, c == NAME ? (moe_sum_variant)7 : MOE_SUM_AUTO, out);
}

static moe_status b_war_noop(int c, int *u)
{
    (void)u;
    moe_tensor *f = tn(MOE_F32, 2, 3, 4, 1, 1), *out = tn(c == DTYPE ? MOE_I32 : MOE_BF16, 2, 3, c == SHAPE ? 5 : 4, 1, 1);
    return moe_ref_war_noop(f, c == NUL ? NULL : out);
}

static moe_status b_war_naive_batched(int c, int *u)
{
    (void)u;
    int32_t v[6] = {0, 1, 2, 3, 1, 2};
    moe_tensor *f = tn(MOE_BF16, 3, 4, 3, 4, 1), *ids = ti32(2, 3, 2, 1, v), *w = tf32_fill(2, 3, 2, 1, 0.5f);
    moe_tensor *out = tn(MOE_BF16, 2, 3, c == SHAPE ? 5 : 4, 1, 1);
    if (c == DTYPE) w->dtype = MOE_I32;
    return moe_ref_war_naive_batched(f, c == NUL ? NULL : ids, w, c == SIZE ? -1 : 0, 0, out);
}

static moe_status b_finalize_trtllm(int c, int *u)
{
    (void)u;
    int32_t v[6] = {0, 1, 2, 3, 4, 5}, m[6] = {0, 3, 1, 4, 2, 5};
    if (c == IDS) m[2] = 6;
    moe_tensor *y = tf32_fill(2, 6, 4, 1, 0.0f), *map = ti32(1, 6, 1, 1, m), *ids = ti32(2, 3, 2, 1, v);
    for (int i = 0; i < 6; i++) ((int32_t *)ids->data)[i] = v[i] % 4;
    moe_tensor *w = tf32_fill(2, 3, 2, 1, 0.5f), *out = tn(MOE_F32, 2, 3, c == SHAPE ? 5 : 4, 1, 1);
    if (c == DTYPE) map->dtype = MOE_F32;
    return moe_ref_finalize_trtllm(y, map, c == NUL ? NULL : ids, w, NULL, 0, c == SIZE ? 0 : 4, out);
}

/* ---- dispatch / combine (R = 2 ranks, T = 2 tokens, E = 4, k = 2) ------------------------- */

static const int32_t ep_ids[8] = {0, 1, 2, 3, 1, 3, 0, 2};

static moe_tensor *ep_ids_with(int c)
{
    moe_tensor *ids = ti32(3, 2, 2, 2, ep_ids);
    int32_t *d = ids->data;
    if (c == IDS) d[3] = 4;
    if (c == DUP) d[5] = d[4];
    return ids;
}

static moe_status b_allgather(int c, int *u)
{
    (void)u;
    moe_tensor *x = tf32_fill(3, 2, 2, 4, 0.0f), *ids = ep_ids_with(c), *w = tf32_fill(3, 2, 2, 2, 0.5f);
    moe_tensor *gx = tn(MOE_F32, 2, c == SHAPE ? 3 : 4, 4, 1, 1), *gi = tn(MOE_I32, 2, 4, 2, 1, 1);
    moe_tensor *gw = tn(MOE_F32, 2, 4, 2, 1, 1);
    if (c == DTYPE) ids->dtype = MOE_F32;
    return moe_ref_ep_allgather_dispatch(c == SIZE ? 0 : 2, 4, c == NUL ? NULL : x, NULL, ids, w, gx, NULL, gi, gw);
}

static moe_status b_reduce_scatter(int c, int *u)
{
    (void)u;
    moe_tensor *p = tf32_fill(3, 2, 4, 4, 0.0f), *out = tn(c == DTYPE ? MOE_I32 : MOE_F32, 3, 2, c == SHAPE ? 3 : 2, 4, 1);
    return moe_ref_ep_reduce_scatter_combine(c == SIZE ? -2 : 2, c == NUL ? NULL : p, out);
}

static moe_status b_deepep_layout(int c, int *u)
{
    (void)u;
    moe_deepep_config cfg = {.world_size = 2, .num_experts = 4, .num_ranks_per_node = 2, .expert_alignment = 1};
    moe_tensor *ids = ep_ids_with(c);
    moe_tensor *nte = tn(MOE_I32, 2, 2, 4, 1, 1), *ntr = tn(MOE_I32, 2, 2, c == SHAPE ? 3 : 2, 1, 1);
    moe_tensor *itr = tn(MOE_BOOL, 3, 2, 2, 2, 1);
    if (c == DTYPE) ids->dtype = MOE_F32;
    if (c == SIZE) cfg.num_ranks_per_node = 0;
    moe_deepep_layout out = {nte, ntr, NULL, itr};
    return moe_ref_deepep_layout(c == NUL ? NULL : &cfg, ids, &out);
}

static moe_status b_deepep_dispatch(int c, int *u)
{
    (void)u;
    moe_deepep_config cfg = {.world_size = 2, .num_experts = 4, .num_ranks_per_node = 2, .expert_alignment = 1};
    moe_tensor *x = tf32_fill(3, 2, 2, 4, 0.0f), *ids = ep_ids_with(c), *w = tf32_fill(3, 2, 2, 2, 0.5f);
    int64_t N = 4;
    moe_tensor *rx = tn(MOE_F32, 3, 2, N, c == SHAPE ? 5 : 4, 1), *ri = tn(MOE_I32, 3, 2, N, 2, 1);
    moe_tensor *rw = tn(MOE_F32, 3, 2, N, 2, 1), *si = tn(MOE_I32, 2, 2, N, 1, 1), *nr = tn(MOE_I32, 1, 2, 1, 1, 1);
    moe_tensor *nre = tn(MOE_I32, 2, 2, 2, 1, 1);
    if (c == DTYPE) w->dtype = MOE_I32;
    if (c == SIZE) cfg.num_ranks_per_node = 0;
    moe_deepep_recv out = {rx, NULL, ri, rw, si, nr, nre, NULL};
    return moe_ref_deepep_dispatch(&cfg, x, NULL, c == NUL ? NULL : ids, w, &out);
}

/* The dispatch's own outputs are the combine's handle. */
static moe_status b_deepep_combine(int c, int *u)
{
    (void)u;
    moe_deepep_config cfg = {.world_size = 2, .num_experts = 4, .num_ranks_per_node = 2, .expert_alignment = 1};
    moe_tensor *ids = ep_ids_with(OK);
    moe_tensor *nte = tn(MOE_I32, 2, 2, 4, 1, 1), *ntr = tn(MOE_I32, 2, 2, 2, 1, 1), *itr = tn(MOE_BOOL, 3, 2, 2, 2, 1);
    moe_deepep_layout lay = {nte, ntr, NULL, itr};
    ck_assert_int_eq(moe_ref_deepep_layout(&cfg, ids, &lay), MOE_OK);
    moe_tensor *y = tf32_fill(3, 2, 4, 4, 0.0f), *out = tn(MOE_F32, 3, 2, 2, c == SHAPE ? 3 : 4, 1);
    if (c == DTYPE) y->dtype = MOE_I32;
    return moe_ref_deepep_combine(&cfg, y, NULL, c == NUL ? NULL : itr, NULL, NULL, out, NULL);
}

static moe_status b_deepep_ll_dispatch(int c, int *u)
{
    (void)u;
    int64_t H = c == KDIV ? 192 : 128;
    moe_deepep_ll_config cfg = {.world_size = 2, .num_experts = 4, .max_tokens_per_rank = 2, .use_fp8 = 1};
    moe_tensor *x = tf32_fill(3, 2, 2, H, 0.0f), *ids = ep_ids_with(c);
    moe_tensor *rx = tn(MOE_E4M3, 4, 2, 2, 4, H), *rs = tn(MOE_F32, 4, 2, 2, 4, c == KDIV ? 1 : H / 128);
    moe_tensor *cnt = tn(MOE_I32, 2, 2, c == SHAPE ? 3 : 2, 1, 1), *si = tn(MOE_I32, 3, 2, 2, 4, 1);
    moe_tensor *lr = tn(MOE_I64, 3, 2, 2, 2, 1);
    if (c == DTYPE) x->dtype = MOE_I32;
    if (c == SIZE) cfg.max_tokens_per_rank = -1;
    moe_deepep_ll_recv out = {rx, rs, cnt, si, lr};
    return moe_ref_deepep_ll_dispatch(&cfg, c == NUL ? NULL : x, ids, &out);
}

static moe_status b_deepep_ll_combine(int c, int *u)
{
    (void)u;
    moe_deepep_ll_config cfg = {.world_size = 2, .num_experts = 4, .max_tokens_per_rank = 2};
    moe_tensor *x = tf32_fill(3, 2, 2, 8, 0.0f), *ids = ep_ids_with(OK), *w = tf32_fill(3, 2, 2, 2, 0.5f);
    moe_tensor *rx = tn(MOE_F32, 4, 2, 2, 4, 8), *cnt = tn(MOE_I32, 2, 2, 2, 1, 1), *si = tn(MOE_I32, 3, 2, 2, 4, 1);
    moe_tensor *lr = tn(MOE_I64, 3, 2, 2, 2, 1);
    moe_deepep_ll_recv rcv = {rx, NULL, cnt, si, lr};
    ck_assert_int_eq(moe_ref_deepep_ll_dispatch(&cfg, x, ids, &rcv), MOE_OK);
    moe_tensor *out = tn(MOE_F32, 3, 2, 2, c == SHAPE ? 4 : 8, 1);
    if (c == IDS) ((int32_t *)ids->data)[1] = 7;
    if (c == DTYPE) w->dtype = MOE_BF16, w->nbytes /= 2;
    return moe_ref_deepep_ll_combine(&cfg, rx, c == NUL ? NULL : si, lr, ids, w, out);
}

static moe_status b_pplx_dispatch(int c, int *u)
{
    (void)u;
    moe_pplx_config cfg = {.world_size = 2, .dp_size = 1, .num_experts = 4, .max_num_tokens = 2};
    moe_tensor *x = tf32_fill(3, 2, 2, 4, 0.0f), *ids = ep_ids_with(c);
    if (c == IDS) ((int32_t *)ids->data)[3] = -1; /* pplx combine waits for all k: -1 is refused */
    moe_tensor *rx = tn(MOE_F32, 4, 2, 2, 4, 4), *nt = tn(MOE_I32, 2, 2, 2, 1, 1);
    moe_tensor *src = tn(MOE_I32, 3, 2, 2, c == SHAPE ? 3 : 4, 1);
    if (c == DTYPE) ids->dtype = MOE_I64;
    if (c == SIZE) cfg.dp_size = 0;
    moe_pplx_recv out = {rx, NULL, nt, src};
    return moe_ref_pplx_dispatch(&cfg, x, NULL, c == NUL ? NULL : ids, &out);
}

static moe_status b_pplx_combine(int c, int *u)
{
    (void)u;
    moe_pplx_config cfg = {.world_size = 2, .dp_size = 1, .num_experts = 4, .max_num_tokens = 2};
    moe_tensor *x = tf32_fill(3, 2, 2, 4, 0.0f), *ids = ep_ids_with(OK), *w = tf32_fill(3, 2, 2, 2, 0.5f);
    moe_tensor *rx = tn(MOE_F32, 4, 2, 2, 4, 4), *nt = tn(MOE_I32, 2, 2, 2, 1, 1), *src = tn(MOE_I32, 3, 2, 2, 4, 1);
    moe_pplx_recv rcv = {rx, NULL, nt, src};
    ck_assert_int_eq(moe_ref_pplx_dispatch(&cfg, x, NULL, ids, &rcv), MOE_OK);
    moe_tensor *out = tn(MOE_F32, 3, 2, 2, c == SHAPE ? 5 : 4, 1);
    if (c == IDS) ((int32_t *)ids->data)[0] = 4;
    if (c == DTYPE) nt->dtype = MOE_F32;
    return moe_ref_pplx_combine(&cfg, rx, nt, src, ids, c == NUL ? NULL : w, out);
}

static moe_status b_hep_dispatch(int c, int *u)
{
    (void)u;
    moe_hep_config cfg = {.world_size = 2, .num_experts = 4, .num_ranks_per_node = 2, .pad_multiple = 1};
    moe_tensor *x = tf32_fill(3, 2, 2, 4, 0.0f), *ids = ep_ids_with(c), *w = tf32_fill(3, 2, 2, 2, 0.5f);
    if (c == IDS) ((int32_t *)ids->data)[3] = -1; /* upstream scatters ids into a bool map: -1 cannot be */
    int64_t N = 4;
    moe_tensor *rx = tn(MOE_F32, 3, 2, N, 4, 1), *tpe = tn(MOE_I32, 2, 2, 2, 1, 1), *ptpe = tn(MOE_I64, 2, 2, 2, 1, 1);
    moe_tensor *rim = tn(MOE_I32, 3, 2, 4, c == SHAPE ? 3 : 2, 1), *ovf = tn(MOE_I32, 1, 2, 1, 1, 1);
    if (c == DTYPE) w->dtype = MOE_I32;
    if (c == SIZE) cfg.pad_multiple = 0;
    moe_hep_permuted out = {rx, NULL, NULL, tpe, ptpe, rim, ovf, NULL};
    return moe_ref_hep_dispatch_with_permute(&cfg, c == NUL ? NULL : x, NULL, ids, w, &out);
}

static moe_status b_hep_combine(int c, int *u)
{
    (void)u;
    moe_hep_config cfg = {.world_size = 2, .num_experts = 4, .num_ranks_per_node = 2, .pad_multiple = 1};
    moe_tensor *x = tf32_fill(3, 2, 2, 4, 0.0f), *ids = ep_ids_with(OK), *w = tf32_fill(3, 2, 2, 2, 0.5f);
    moe_tensor *rx = tn(MOE_F32, 3, 2, 4, 4, 1), *tpe = tn(MOE_I32, 2, 2, 2, 1, 1), *ptpe = tn(MOE_I64, 2, 2, 2, 1, 1);
    moe_tensor *rim = tn(MOE_I32, 3, 2, 4, 2, 1), *ovf = tn(MOE_I32, 1, 2, 1, 1, 1);
    moe_hep_permuted rcv = {rx, NULL, NULL, tpe, ptpe, rim, ovf, NULL};
    ck_assert_int_eq(moe_ref_hep_dispatch_with_permute(&cfg, x, NULL, ids, w, &rcv), MOE_OK);
    moe_tensor *out = tn(MOE_F32, 3, 2, 2, c == SHAPE ? 3 : 4, 1);
    if (c == IDS) ((int32_t *)rim->data)[0] = 99;
    if (c == DTYPE) rim->dtype = MOE_F32;
    return moe_ref_hep_combine_with_unpermute(&cfg, rx, c == NUL ? NULL : rim, NULL, out, NULL);
}

/* ---- the ops table's memory entries -------------------------------------------------------- */

static moe_status b_ops_alloc(int c, int *u)
{
    (void)u;
    moe_tensor *t = &pool[npool++];
    memset(t, 0, sizeof *t);
    int64_t sh[2] = {3, c == SIZE ? -1 : 4};
    return moe_ops_ref.alloc(c == NUL ? NULL : t, c == DTYPE ? (moe_dtype)99 : MOE_F32, c == SHAPE ? 7 : 2, sh);
}

static moe_status b_ops_copy(int c, int *u)
{
    (void)u;
    moe_tensor *a = tn(MOE_F32, 2, 3, 4, 1, 1), *b = tn(c == DTYPE ? MOE_I32 : MOE_F32, 2, 3, c == SHAPE ? 5 : 4, 1, 1);
    return moe_ops_ref.copy(b, c == NUL ? NULL : a);
}

/* ---- the oracle and the modular kernel ----------------------------------------------------- */

static mkf_prob prob;
static int prob_made;

static void prob_make(void)
{
    if (!prob_made) mkf_make(&prob, MOE_SCHEME_BF16, 2, 3, 8, 4, 4, 11, 0.3f, 0, 0);
    prob_made = 1;
}

static moe_status b_forward(int c, int *u)
{
    (void)u;
    prob_make();
    moe_forward_args a = mkf_forward_args(&prob, &prob.w, 0);
    moe_tensor *idc = tn(MOE_I32, 2, 3, 2, 1, 1);
    memcpy(idc->data, prob.ids.data, prob.ids.nbytes);
    moe_tensor *out = tn(prob.xd, 2, 3, c == SHAPE ? 4 : 8, 1, 1);
    moe_route_params rp = {.method = MOE_ROUTE_SOFTMAX_TOPK, .topk = 5, .routed_scaling_factor = 1.0f};
    moe_tensor *lg = tf32_fill(2, 3, 4, 1, 0.0f);
    if (c == IDS) ((int32_t *)idc->data)[1] = 4;
    a.topk_ids = idc;
    if (c == TOPK) a.topk_ids = NULL, a.topk_weights = NULL, a.route = &rp, a.router_logits = lg;
    if (c == NAME) a.scheme = (moe_scheme)40;
    moe_tensor w2f = *prob.mw.w2;
    w2f.dtype = MOE_F16; /* the bf16 weights' bytes relabelled: same shape, wrong dtype */
    if (c == DTYPE) a.w2 = &w2f;
    if (c == NUL) a.w1 = NULL;
    return moe_ref_forward(&a, &prob.x, out);
}

static moe_status b_mk_create(int c, int *u)
{
    (void)u;
    moe_mk_config cfg = mkf_config(MOE_SCHEME_BF16, 2, 1, 8, 4, 4);
    if (c == TOPK) cfg.topk = 5;
    if (c == SIZE) cfg.hidden = 0;
    moe_mk *mk = NULL;
    moe_status s = moe_mk_create(c == NAME ? "noepx" : "noep", "triton_like", c == NUL ? NULL : &cfg, &mk, NULL);
    if (s != MOE_OK) ck_assert_ptr_null(mk);
    moe_mk_destroy(mk);
    return s;
}

static moe_status b_mk_forward(int c, int *u)
{
    (void)u;
    prob_make();
    moe_mk_config cfg = mkf_config(MOE_SCHEME_BF16, 2, 1, 8, 4, 4);
    moe_mk *mk = NULL;
    ck_assert_int_eq(moe_mk_create("noep", "triton_like", &cfg, &mk, NULL), MOE_OK);
    moe_tensor *idc = tn(MOE_I32, 2, 3, 2, 1, 1);
    memcpy(idc->data, prob.ids.data, prob.ids.nbytes);
    if (c == IDS) ((int32_t *)idc->data)[2] = 9;
    if (c == DTYPE) idc->dtype = MOE_F32;
    moe_tensor *out = tn(prob.xd, 2, 3, c == SHAPE ? 7 : 8, 1, 1);
    moe_status s = moe_mk_forward(mk, &prob.mw, c == NUL ? NULL : &prob.x, idc, &prob.w, out);
    moe_mk_destroy(mk);
    return s;
}

/* ---- files -------------------------------------------------------------------------------- */

static char tmpdir[256];

static void tmp_make(void)
{
    if (tmpdir[0]) return;
    snprintf(tmpdir, sizeof tmpdir, "%s/moe_bad_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void write_bytes(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* A valid bf16 .npy (with its sidecar) at dir/name, broken per class. */
static moe_status b_npy_read(int c, int *u)
{
    (void)u;
    tmp_make();
    char p[512];
    snprintf(p, sizeof p, "%s/r%d.npy", tmpdir, c);
    moe_tensor *t = tf32_fill(2, 3, 5, 1, 1.0f);
    ck_assert_int_eq(moe_npy_write(p, t), MOE_OK);
    if (c == FILEBAD) {
        ck_assert_int_eq(truncate(p, 100), 0);
    } else if (c == NAME) {
        /* an unknown logical dtype in the sidecar */
        snprintf(p, sizeof p, "%s/r%d.npy", tmpdir, c);
        moe_tensor *b = tn(MOE_BF16, 2, 3, 5, 1, 1);
        ck_assert_int_eq(moe_npy_write(p, b), MOE_OK);
        char side[560];
        snprintf(side, sizeof side, "%s.json", p);
        const char *js = "{\"dtype\": \"bf17\", \"shape\": [3, 5]}";
        write_bytes(side, js, strlen(js));
    } else if (c == SHAPE) {
        char side[560];
        snprintf(side, sizeof side, "%s.json", p);
        const char *js = "{\"dtype\": \"f32\", \"shape\": [5, 3, 1]}";
        write_bytes(side, js, strlen(js));
    }
    moe_tensor *out = &pool[npool++];
    memset(out, 0, sizeof *out);
    if (c == OUTPATH) snprintf(p, sizeof p, "%s/no_such_file.npy", tmpdir);
    moe_status s = moe_npy_read(c == NUL ? NULL : p, out);
    if (s != MOE_OK) ck_assert_ptr_null(out->data);
    return s;
}

static moe_status b_npy_parse(int c, int *u)
{
    (void)u;
    static const char good[] = "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
    char buf[256];
    size_t n = 10 + 0x76;
    memset(buf, ' ', sizeof buf);
    memcpy(buf, good, sizeof good - 1);
    buf[n - 1] = '\n';
    float v[2] = {1.0f, 2.0f};
    memcpy(buf + n, v, 8);
    n += 8;
    if (c == FILEBAD) buf[1] = 'X';
    if (c == DTYPE) buf[22] = 'c', buf[23] = '8'; /* '<f4' -> '<c8' */
    moe_tensor *out = &pool[npool++];
    memset(out, 0, sizeof *out);
    return moe_npy_parse(c == NUL ? NULL : buf, c == SIZE ? n - 3 : n, NULL, out);
}

static moe_status b_npy_write(int c, int *u)
{
    tmp_make();
    char p[512];
    snprintf(p, sizeof p, c == OUTPATH ? "%s/no_dir/w.npy" : "%s/w%d.npy", tmpdir, c);
    moe_tensor *t = tn(MOE_BF16, 2, 3, 5, 1, 1);
    moe_tensor bad = *t;
    if (c == SHAPE) bad.ndim = 9;
    moe_status s = moe_npy_write(p, c == NUL ? NULL : &bad);
    char side[560];
    snprintf(side, sizeof side, "%s.json", p);
    if (s != MOE_OK && (exists(p) || exists(side))) *u = 0;
    if (s == MOE_OK) unlink(p), unlink(side);
    return s;
}

/* ---- comparisons and table lookups ------------------------------------------------------------ */

static moe_status b_compare(int c, int *u)
{
    (void)u;
    moe_tensor *a = tf32_fill(2, 3, 4, 1, 0.0f), *b = tn(c == DTYPE ? MOE_BF16 : MOE_F32, 2, 3, c == SHAPE ? 5 : 4, 1, 1);
    moe_cmp_metrics m;
    moe_cmp_init(&m);
    return moe_compare_exact(a, c == NUL ? NULL : b, &m);
}

static moe_status b_compare_bounded(int c, int *u)
{
    (void)u;
    moe_tensor *a = tf32_fill(2, 3, 4, 1, 0.0f), *b = tf32_fill(2, 3, c == SHAPE ? 5 : 4, 1, 0.0f);
    double bound[20] = {0};
    moe_cmp_metrics m;
    moe_cmp_init(&m);
    return moe_compare_bounded(c == NUL ? NULL : a, b, bound, &m, NULL);
}

static moe_status b_tolerance(int c, int *u)
{
    (void)u;
    moe_clear_error();
    const moe_tolerance_row *r = moe_tolerance_find(c == NAME ? "no_such_stage" : "route", "ref", "bf16");
    return r ? MOE_OK : (*moe_last_error() ? MOE_ERR_INVALID_ARG : MOE_ERR_INTERNAL);
}

static moe_status b_scheme_name(int c, int *u)
{
    (void)u;
    moe_scheme s;
    return moe_scheme_from_name(c == NUL ? NULL : c == NAME ? "fp9_blocks" : "bf16", &s);
}

static moe_status b_act_name(int c, int *u)
{
    (void)u;
    moe_act a;
    return moe_act_from_name(c == NUL ? NULL : c == NAME ? "swish" : "silu", &a);
}

static moe_status b_class_name(int c, int *u)
{
    (void)u;
    moe_exact_class k;
    return moe_exact_class_from_name(c == NAME ? "LOOSE" : "exact", &k);
}

/* ---- the table ---------------------------------------------------------------------------------- */

#define R(e, c, b, s, m) {e, c, b, s, m}
static const bi_row rows[] = {
    R("route", NUL, b_route, MOE_ERR_NULL, "logits"),
    R("route", DTYPE, b_route, MOE_ERR_DTYPE, "logits"),
    R("route", SHAPE, b_route, MOE_ERR_SHAPE, "topk_ids"),
    R("route", SIZE, b_route, MOE_ERR_SHAPE, "E = 0"),
    R("route", TOPK, b_route, MOE_ERR_INVALID_ARG, "topk 5"),
    R("route", NONFIN, b_route, MOE_ERR_INVALID_ARG, "correction_bias[2]"),
    R("route", NAME, b_route, MOE_ERR_INVALID_ARG, "method 77"),
    R("align_block_size", NUL, b_align, MOE_ERR_NULL, "topk_ids"),
    R("align_block_size", DTYPE, b_align, MOE_ERR_DTYPE, "topk_ids"),
    R("align_block_size", SHAPE, b_align, MOE_ERR_SHAPE, "expert_ids"),
    R("align_block_size", SIZE, b_align, MOE_ERR_INVALID_ARG, "block_size"),
    R("align_block_size", IDS, b_align, MOE_ERR_INVALID_ARG, "topk_ids"),
    R("align_batched", NUL, b_align_batched, MOE_ERR_NULL, "expert_num_tokens"),
    R("align_batched", DTYPE, b_align_batched, MOE_ERR_DTYPE, "expert_num_tokens"),
    R("align_batched", SHAPE, b_align_batched, MOE_ERR_SHAPE, "sorted_token_ids"),
    R("align_batched", SIZE, b_align_batched, MOE_ERR_INVALID_ARG, "block_size"),
    R("align_batched", IDS, b_align_batched, MOE_ERR_INVALID_ARG, "expert_num_tokens"),
    R("sort_ck", NUL, b_sort_ck, MOE_ERR_NULL, "topk_ids"),
    R("sort_ck", DTYPE, b_sort_ck, MOE_ERR_DTYPE, "topk_weights"),
    R("sort_ck", SHAPE, b_sort_ck, MOE_ERR_SHAPE, "sorted_weights"),
    R("sort_ck", SIZE, b_sort_ck, MOE_ERR_INVALID_ARG, "unit_size"),
    R("sort_ck", IDS, b_sort_ck, MOE_ERR_INVALID_ARG, "topk_ids"),
    R("sort_ck", DUP, b_sort_ck, MOE_ERR_INVALID_ARG, "topk_ids"),
    R("maps_trtllm", NUL, b_maps, MOE_ERR_NULL, "token_selected_experts"),
    R("maps_trtllm", DTYPE, b_maps, MOE_ERR_DTYPE, "token_selected_experts"),
    R("maps_trtllm", SHAPE, b_maps, MOE_ERR_SHAPE, "permuted_row_to_unpermuted_row"),
    R("maps_trtllm", SIZE, b_maps, MOE_ERR_INVALID_ARG, "num_experts"),
    R("maps_trtllm", TOPK, b_maps, MOE_ERR_INVALID_ARG, "topk"),
    R("maps_trtllm", NAME, b_maps, MOE_ERR_INVALID_ARG, "variant"),
    R("quantize", NUL, b_quantize, MOE_ERR_NULL, "q_out"),
    R("quantize", DTYPE, b_quantize, MOE_ERR_DTYPE, "x"),
    R("quantize", SHAPE, b_quantize, MOE_ERR_SHAPE, "q_out"),
    R("quantize", SIZE, b_quantize, MOE_ERR_INVALID_ARG, "group_k"),
    R("quantize", KDIV, b_quantize, MOE_ERR_SHAPE, "x: K = 200"),
    R("dequantize", NUL, b_dequantize, MOE_ERR_NULL, "scale"),
    R("dequantize", DTYPE, b_dequantize, MOE_ERR_DTYPE, "scale"),
    R("dequantize", SHAPE, b_dequantize, MOE_ERR_SHAPE, "x_out"),
    R("permute_rows", NUL, b_permute_rows, MOE_ERR_NULL, "x"),
    R("permute_rows", DTYPE, b_permute_rows, MOE_ERR_DTYPE, "src"),
    R("permute_rows", SHAPE, b_permute_rows, MOE_ERR_SHAPE, "src: 5 entries, expected 4"),
    R("permute_rows", IDS, b_permute_rows, MOE_ERR_INVALID_ARG, "src[1] = 7"),
    R("unpermute_rows", NUL, b_unpermute_rows, MOE_ERR_NULL, "dst"),
    R("unpermute_rows", DTYPE, b_unpermute_rows, MOE_ERR_DTYPE, "out"),
    R("unpermute_rows", SHAPE, b_unpermute_rows, MOE_ERR_SHAPE, "out"),
    R("unpermute_rows", IDS, b_unpermute_rows, MOE_ERR_INVALID_ARG, "dst[1] = 9"),
    R("unpermute_rows", DUP, b_unpermute_rows, MOE_ERR_INVALID_ARG, "dst[4] = 2"),
    R("expand_trtllm", NUL, b_expand, MOE_ERR_NULL, "permuted_row_to_unpermuted_row"),
    R("expand_trtllm", DTYPE, b_expand, MOE_ERR_DTYPE, "permuted_row_to_unpermuted_row"),
    R("expand_trtllm", SHAPE, b_expand, MOE_ERR_SHAPE, "permuted_scales"),
    R("expand_trtllm", SIZE, b_expand, MOE_ERR_INVALID_ARG, "topk 0"),
    R("expand_trtllm", IDS, b_expand, MOE_ERR_INVALID_ARG, "permuted_row_to_unpermuted_row[2] = 6"),
    R("batched_scatter", NUL, b_batched_scatter, MOE_ERR_NULL, "counts"),
    R("batched_scatter", DTYPE, b_batched_scatter, MOE_ERR_DTYPE, "topk_ids"),
    R("batched_scatter", SHAPE, b_batched_scatter, MOE_ERR_SHAPE, "max_tokens"),
    R("batched_scatter", SIZE, b_batched_scatter, MOE_ERR_INVALID_ARG, "first_expert -1"),
    R("batched_scatter", IDS, b_batched_scatter, MOE_ERR_INVALID_ARG, "topk_ids[0] = -2"),
    R("permute_grouped", NUL, b_permute_grouped, MOE_ERR_NULL, "x"),
    R("permute_grouped", DTYPE, b_permute_grouped, MOE_ERR_DTYPE, "topk_ids"),
    R("permute_grouped", SHAPE, b_permute_grouped, MOE_ERR_SHAPE, "out"),
    R("permute_grouped", SIZE, b_permute_grouped, MOE_ERR_INVALID_ARG, "pad_multiple 0"),
    R("permute_grouped", IDS, b_permute_grouped, MOE_ERR_INVALID_ARG, "topk_ids[3] = -5"),
    R("grouped_gemm", NUL, b_gemm, MOE_ERR_NULL, "a"),
    R("grouped_gemm", DTYPE, b_gemm, MOE_ERR_DTYPE, "w"),
    R("grouped_gemm", SHAPE, b_gemm, MOE_ERR_SHAPE, "w"),
    R("grouped_gemm", IDS, b_gemm, MOE_ERR_INVALID_ARG, "row_expert[1] = 2"),
    R("grouped_gemm", NAME, b_gemm, MOE_ERR_INVALID_ARG, "scheme"),
    R("grouped_gemm", KDIV, b_gemm_kdiv, MOE_ERR_SHAPE, "a: K = 48"),
    R("activation", NUL, b_activation, MOE_ERR_NULL, "x"),
    R("activation", DTYPE, b_activation, MOE_ERR_DTYPE, "out"),
    R("activation", SHAPE, b_activation, MOE_ERR_SHAPE, "out"),
    R("activation", IDS, b_activation, MOE_ERR_INVALID_ARG, "row_expert"),
    R("activation", NONFIN, b_activation, MOE_ERR_INVALID_ARG, "alpha"),
    R("activation", NAME, b_activation, MOE_ERR_INVALID_ARG, "act 42"),
    R("war_contiguous", NUL, b_war_contiguous, MOE_ERR_NULL, "topk_weights"),
    R("war_contiguous", DTYPE, b_war_contiguous, MOE_ERR_DTYPE, "out"),
    R("war_contiguous", SHAPE, b_war_contiguous, MOE_ERR_SHAPE, "k=3"),
    R("war_contiguous", NAME, b_war_contiguous, MOE_ERR_INVALID_ARG, "sum"),
    R("war_noop", NUL, b_war_noop, MOE_ERR_NULL, "out"),
    R("war_noop", DTYPE, b_war_noop, MOE_ERR_DTYPE, "out"),
    R("war_noop", SHAPE, b_war_noop, MOE_ERR_SHAPE, "out"),
    R("war_naive_batched", NUL, b_war_naive_batched, MOE_ERR_NULL, "topk_ids"),
    R("war_naive_batched", DTYPE, b_war_naive_batched, MOE_ERR_DTYPE, "topk_weights"),
    R("war_naive_batched", SHAPE, b_war_naive_batched, MOE_ERR_SHAPE, "out"),
    R("war_naive_batched", SIZE, b_war_naive_batched, MOE_ERR_INVALID_ARG, "first_expert"),
    R("finalize_trtllm", NUL, b_finalize_trtllm, MOE_ERR_NULL, "topk_ids"),
    R("finalize_trtllm", DTYPE, b_finalize_trtllm, MOE_ERR_DTYPE, "unpermuted_row_to_permuted_row"),
    R("finalize_trtllm", SHAPE, b_finalize_trtllm, MOE_ERR_SHAPE, "out"),
    R("finalize_trtllm", SIZE, b_finalize_trtllm, MOE_ERR_INVALID_ARG, "num_local_experts"),
    R("finalize_trtllm", IDS, b_finalize_trtllm, MOE_ERR_INVALID_ARG, "unpermuted_row_to_permuted_row"),
    R("ep_allgather_dispatch", NUL, b_allgather, MOE_ERR_NULL, "x"),
    R("ep_allgather_dispatch", DTYPE, b_allgather, MOE_ERR_DTYPE, "topk_ids"),
    R("ep_allgather_dispatch", SHAPE, b_allgather, MOE_ERR_SHAPE, "gathered_x"),
    R("ep_allgather_dispatch", SIZE, b_allgather, MOE_ERR_INVALID_ARG, "world_size 0"),
    R("ep_allgather_dispatch", IDS, b_allgather, MOE_ERR_INVALID_ARG, "topk_ids"),
    R("ep_reduce_scatter_combine", NUL, b_reduce_scatter, MOE_ERR_NULL, "partial"),
    R("ep_reduce_scatter_combine", DTYPE, b_reduce_scatter, MOE_ERR_DTYPE, "out"),
    R("ep_reduce_scatter_combine", SHAPE, b_reduce_scatter, MOE_ERR_SHAPE, "out"),
    R("ep_reduce_scatter_combine", SIZE, b_reduce_scatter, MOE_ERR_INVALID_ARG, "world_size -2"),
    R("deepep_layout", NUL, b_deepep_layout, MOE_ERR_NULL, "cfg"),
    R("deepep_layout", DTYPE, b_deepep_layout, MOE_ERR_DTYPE, "topk_ids"),
    R("deepep_layout", SHAPE, b_deepep_layout, MOE_ERR_SHAPE, "num_tokens_per_rank"),
    R("deepep_layout", SIZE, b_deepep_layout, MOE_ERR_INVALID_ARG, "num_ranks_per_node"),
    R("deepep_layout", IDS, b_deepep_layout, MOE_ERR_INVALID_ARG, "topk_ids"),
    R("deepep_dispatch", NUL, b_deepep_dispatch, MOE_ERR_NULL, "topk_ids"),
    R("deepep_dispatch", DTYPE, b_deepep_dispatch, MOE_ERR_DTYPE, "topk_weights"),
    R("deepep_dispatch", SHAPE, b_deepep_dispatch, MOE_ERR_SHAPE, "x"),
    R("deepep_dispatch", SIZE, b_deepep_dispatch, MOE_ERR_INVALID_ARG, "num_ranks_per_node"),
    R("deepep_dispatch", IDS, b_deepep_dispatch, MOE_ERR_INVALID_ARG, "topk_ids"),
    R("deepep_combine", NUL, b_deepep_combine, MOE_ERR_NULL, "is_token_in_rank"),
    R("deepep_combine", DTYPE, b_deepep_combine, MOE_ERR_DTYPE, "x"),
    R("deepep_combine", SHAPE, b_deepep_combine, MOE_ERR_SHAPE, "combined_x"),
    R("deepep_ll_dispatch", NUL, b_deepep_ll_dispatch, MOE_ERR_NULL, "x"),
    R("deepep_ll_dispatch", DTYPE, b_deepep_ll_dispatch, MOE_ERR_DTYPE, "x"),
    R("deepep_ll_dispatch", SHAPE, b_deepep_ll_dispatch, MOE_ERR_SHAPE, "count"),
    R("deepep_ll_dispatch", SIZE, b_deepep_ll_dispatch, MOE_ERR_INVALID_ARG, "max_tokens_per_rank"),
    R("deepep_ll_dispatch", IDS, b_deepep_ll_dispatch, MOE_ERR_INVALID_ARG, "topk_ids"),
    R("deepep_ll_dispatch", DUP, b_deepep_ll_dispatch, MOE_ERR_INVALID_ARG, "topk_ids"),
    R("deepep_ll_dispatch", KDIV, b_deepep_ll_dispatch, MOE_ERR_SHAPE, "128"),
    R("deepep_ll_combine", NUL, b_deepep_ll_combine, MOE_ERR_NULL, "src_info"),
    R("deepep_ll_combine", DTYPE, b_deepep_ll_combine, MOE_ERR_DTYPE, "topk_weights"),
    R("deepep_ll_combine", SHAPE, b_deepep_ll_combine, MOE_ERR_SHAPE, "out"),
    R("deepep_ll_combine", IDS, b_deepep_ll_combine, MOE_ERR_INVALID_ARG, "topk_ids"),
    R("pplx_dispatch", NUL, b_pplx_dispatch, MOE_ERR_NULL, "topk_ids"),
    R("pplx_dispatch", DTYPE, b_pplx_dispatch, MOE_ERR_DTYPE, "topk_ids"),
    R("pplx_dispatch", SHAPE, b_pplx_dispatch, MOE_ERR_SHAPE, "src"),
    R("pplx_dispatch", SIZE, b_pplx_dispatch, MOE_ERR_INVALID_ARG, "dp_size"),
    R("pplx_dispatch", IDS, b_pplx_dispatch, MOE_ERR_INVALID_ARG, "topk_ids"),
    R("pplx_dispatch", DUP, b_pplx_dispatch, MOE_ERR_INVALID_ARG, "topk_ids"),
    R("pplx_combine", NUL, b_pplx_combine, MOE_ERR_NULL, "topk_weights"),
    R("pplx_combine", DTYPE, b_pplx_combine, MOE_ERR_DTYPE, "num_tokens"),
    R("pplx_combine", SHAPE, b_pplx_combine, MOE_ERR_SHAPE, "out"),
    R("pplx_combine", IDS, b_pplx_combine, MOE_ERR_INVALID_ARG, "topk_ids"),
    R("hep_dispatch_with_permute", NUL, b_hep_dispatch, MOE_ERR_NULL, "x"),
    R("hep_dispatch_with_permute", DTYPE, b_hep_dispatch, MOE_ERR_DTYPE, "topk_weights"),
    R("hep_dispatch_with_permute", SHAPE, b_hep_dispatch, MOE_ERR_SHAPE, "row_id_map"),
    R("hep_dispatch_with_permute", SIZE, b_hep_dispatch, MOE_ERR_INVALID_ARG, "pad_multiple"),
    R("hep_dispatch_with_permute", IDS, b_hep_dispatch, MOE_ERR_INVALID_ARG, "topk_ids"),
    R("hep_dispatch_with_permute", DUP, b_hep_dispatch, MOE_ERR_INVALID_ARG, "topk_ids"),
    R("hep_combine_with_unpermute", NUL, b_hep_combine, MOE_ERR_NULL, "row_id_map"),
    R("hep_combine_with_unpermute", DTYPE, b_hep_combine, MOE_ERR_DTYPE, "row_id_map"),
    R("hep_combine_with_unpermute", SHAPE, b_hep_combine, MOE_ERR_SHAPE, "out"),
    R("hep_combine_with_unpermute", IDS, b_hep_combine, MOE_ERR_INVALID_ARG, "row_id_map"),
    R("ops.alloc", NUL, b_ops_alloc, MOE_ERR_NULL, "t"),
    R("ops.alloc", DTYPE, b_ops_alloc, MOE_ERR_DTYPE, "dtype 99"),
    R("ops.alloc", SHAPE, b_ops_alloc, MOE_ERR_SHAPE, "ndim 7"),
    R("ops.alloc", SIZE, b_ops_alloc, MOE_ERR_SHAPE, "shape[1] = -1"),
    R("ops.copy", NUL, b_ops_copy, MOE_ERR_NULL, "src"),
    R("ops.copy", DTYPE, b_ops_copy, MOE_ERR_SHAPE, "dst: dtype"),
    R("ops.copy", SHAPE, b_ops_copy, MOE_ERR_SHAPE, "dst"),
    R("moe_ref_forward", NUL, b_forward, MOE_ERR_NULL, "w1"),
    R("moe_ref_forward", DTYPE, b_forward, MOE_ERR_DTYPE, "w2"),
    R("moe_ref_forward", SHAPE, b_forward, MOE_ERR_SHAPE, "out"),
    R("moe_ref_forward", TOPK, b_forward, MOE_ERR_INVALID_ARG, "topk 5"),
    R("moe_ref_forward", IDS, b_forward, MOE_ERR_INVALID_ARG, "topk_ids"),
    R("moe_ref_forward", NAME, b_forward, MOE_ERR_INVALID_ARG, "scheme"),
    R("moe_mk_create", NUL, b_mk_create, MOE_ERR_NULL, "cfg"),
    R("moe_mk_create", SIZE, b_mk_create, MOE_ERR_INVALID_ARG, "hidden"),
    R("moe_mk_create", TOPK, b_mk_create, MOE_ERR_INCOMPATIBLE, "topk"),
    R("moe_mk_create", NAME, b_mk_create, MOE_ERR_INVALID_ARG, "noepx"),
    R("moe_mk_forward", NUL, b_mk_forward, MOE_ERR_NULL, "x"),
    R("moe_mk_forward", DTYPE, b_mk_forward, MOE_ERR_DTYPE, "topk_ids"),
    R("moe_mk_forward", SHAPE, b_mk_forward, MOE_ERR_SHAPE, "out"),
    R("moe_mk_forward", IDS, b_mk_forward, MOE_ERR_INVALID_ARG, "topk_ids"),
    R("moe_npy_read", NUL, b_npy_read, MOE_ERR_NULL, "path"),
    R("moe_npy_read", SHAPE, b_npy_read, MOE_ERR_FORMAT, "sidecar"),
    R("moe_npy_read", NAME, b_npy_read, MOE_ERR_FORMAT, "bf17"),
    R("moe_npy_read", FILEBAD, b_npy_read, MOE_ERR_FORMAT, "r11.npy: npy: file ends"),
    R("moe_npy_read", OUTPATH, b_npy_read, MOE_ERR_IO, "no_such_file.npy"),
    R("moe_npy_parse", NUL, b_npy_parse, MOE_ERR_NULL, "buf"),
    R("moe_npy_parse", DTYPE, b_npy_parse, MOE_ERR_FORMAT, "<c8"),
    R("moe_npy_parse", SIZE, b_npy_parse, MOE_ERR_FORMAT, "truncated"),
    R("moe_npy_parse", FILEBAD, b_npy_parse, MOE_ERR_FORMAT, "magic"),
    R("moe_npy_write", NUL, b_npy_write, MOE_ERR_NULL, "t"),
    R("moe_npy_write", SHAPE, b_npy_write, MOE_ERR_SHAPE, "ndim 9"),
    R("moe_npy_write", OUTPATH, b_npy_write, MOE_ERR_IO, "no_dir/w.npy"),
    R("moe_compare_exact", NUL, b_compare, MOE_ERR_NULL, "want"),
    R("moe_compare_exact", DTYPE, b_compare, MOE_ERR_DTYPE, "want"),
    R("moe_compare_exact", SHAPE, b_compare, MOE_ERR_SHAPE, "want"),
    R("moe_compare_bounded", NUL, b_compare_bounded, MOE_ERR_NULL, "got"),
    R("moe_compare_bounded", SHAPE, b_compare_bounded, MOE_ERR_SHAPE, "want"),
    R("moe_tolerance_find", NAME, b_tolerance, MOE_ERR_INVALID_ARG, "no_such_stage"),
    R("moe_scheme_from_name", NUL, b_scheme_name, MOE_ERR_NULL, "name"),
    R("moe_scheme_from_name", NAME, b_scheme_name, MOE_ERR_INVALID_ARG, "fp9_blocks"),
    R("moe_act_from_name", NUL, b_act_name, MOE_ERR_NULL, "name"),
    R("moe_act_from_name", NAME, b_act_name, MOE_ERR_INVALID_ARG, "swish"),
    R("moe_exact_class_from_name", NAME, b_class_name, MOE_ERR_INVALID_ARG, "LOOSE"),
};
#define NROWS ((int)(sizeof rows / sizeof rows[0]))

START_TEST(t_bad_input)
{
    const bi_row *r = &rows[_i];
    int untouched = 1;
    moe_clear_error();
    moe_status s = r->build(r->cls, &untouched);
    const char *m = moe_last_error();
    ck_assert_msg(s == r->want, "%s x %s: status %s, expected %s (message: %s)", r->entry, class_name[r->cls],
                  moe_status_str(s), moe_status_str(r->want), m);
    ck_assert_msg(strstr(m, r->msg) != NULL, "%s x %s: message '%s' does not name '%s'", r->entry,
                  class_name[r->cls], m, r->msg);
    ck_assert_msg(untouched, "%s x %s: an output was written (or a file left) on error", r->entry, class_name[r->cls]);
    pool_free();
}
END_TEST

/* The unbroken call of every builder succeeds: each row's failure is its
 * break's doing. */
START_TEST(t_baseline)
{
    const bi_row *r = &rows[_i];
    for (int j = 0; j < _i; j++)
        if (rows[j].build == r->build) return;
    int untouched = 1;
    moe_status s = r->build(OK, &untouched);
    ck_assert_msg(s == MOE_OK, "%s baseline: %s (%s)", r->entry, moe_status_str(s), moe_last_error());
    pool_free();
}
END_TEST

/* Every class is exercised somewhere, and every row's class is a real one. */
START_TEST(t_table_covers_classes)
{
    int seen[NCLASS] = {0};
    for (int i = 0; i < NROWS; i++) {
        ck_assert(rows[i].cls > OK && rows[i].cls < NCLASS);
        ck_assert(rows[i].want != MOE_OK);
        seen[rows[i].cls]++;
    }
    for (int c = 1; c < NCLASS; c++) ck_assert_msg(seen[c] > 0, "class %s has no row", class_name[c]);
}
END_TEST

/* ---- the command-line tools ------------------------------------------------------------------ */

typedef struct {
    const char *tool;
    cli_fn fn;
    const char *args;   /* "%s" is replaced by the output file's path */
    int want_exit;
    const char *msg;    /* on stderr */
    int keep;           /* 1: the output file exists before (must stay unchanged); 0: must not appear */
} cli_row;

static const cli_row cli_rows[] = {
    {"moe-fmt", moe_cli_fmt, "encode e9m9 1", 2, "'e9m9'", 0},
    {"moe-fmt", moe_cli_fmt, "encode e4m3 abc", 2, "VALUE 'abc'", 0},
    {"moe-fmt", moe_cli_fmt, "encode e4m3 1 --policy sloppy", 2, "sloppy", 0},
    {"moe-fmt", moe_cli_fmt, "decode e4m3 0x1ff", 2, "0x1ff", 0},
    {"moe-fmt", moe_cli_fmt, "--frobnicate", 2, "--frobnicate", 0},
    {"moe-compat", moe_cli_compat, "check --pf nope --experts ref --scheme bf16", 2, "'nope'", 0},
    {"moe-compat", moe_cli_compat, "check --pf noep --experts ref --scheme fp9", 2, "fp9", 0},
    {"moe-compat", moe_cli_compat, "check --pf noep --experts ref --scheme bf16 --topk -1", 2, "--topk", 0},
    {"moe-compat", moe_cli_compat, "check --pf noep --experts ref --scheme bf16 --topk 9 --experts-total 8", 2,
     "--experts-total", 0},
    {"moe-compat", moe_cli_compat, "explain no-such-rule", 2, "no-such-rule", 0},
    {"moe-compat", moe_cli_compat, "matrix --scheme bf16 --format yaml", 2, "yaml", 0},
    {"moe-sweep", moe_cli_sweep, "--tier bogus --out %s", 2, "--tier", 0},
    {"moe-sweep", moe_cli_sweep, "--tier quick --jobs 0 --out %s", 2, "--jobs", 0},
    {"moe-sweep", moe_cli_sweep, "--tier quick --backend nope --out %s", 2, "nope", 0},
    {"moe-sweep", moe_cli_sweep, "--tier quick --filter moe.nothing.* --out %s", 2, "--filter", 1},
    {"moe-sweep", moe_cli_sweep, "--tier quick --out /nonexistent_dir/x.jsonl", 2, "/nonexistent_dir/x.jsonl", 0},
    {"moe-bench", moe_cli_bench, "--scheme nope --json %s", 2, "'nope'", 0},
    {"moe-bench", moe_cli_bench, "--shape tiny --m -4 --json %s", 2, "--m", 1},
    {"moe-bench", moe_cli_bench, "--shape tiny --m 4 --reps 1 --pair noep:nope --json %s", 2, "nope", 0},
    {"moe-bench", moe_cli_bench, "--shape tiny --m 4 --reps 1 --json /nonexistent_dir/b.json", 2,
     "/nonexistent_dir/b.json", 0},
    {"moe-golden", moe_cli_golden, "frob", 2, "'frob'", 0},
    {"moe-golden", moe_cli_golden, "verify --backend nope", 2, "nope", 0},
    {"moe-golden", moe_cli_golden, "verify --filter no.such.case --json %s", 2, "--filter", 0},
    {"moe-golden", moe_cli_golden, "show no.such.case", 2, "no.such.case", 0},
};
#define NCLI ((int)(sizeof cli_rows / sizeof cli_rows[0]))

static int read_file(const char *p, char *buf, size_t n)
{
    FILE *f = fopen(p, "rb");
    if (!f) return -1;
    size_t k = fread(buf, 1, n - 1, f);
    buf[k] = '\0';
    fclose(f);
    return (int)k;
}

START_TEST(t_cli_bad)
{
    const cli_row *r = &cli_rows[_i];
    tmp_make();
    char outp[512], args[1024];
    snprintf(outp, sizeof outp, "%s/cli%d.out", tmpdir, _i);
    const char *keep_text = "previous valid output\n";
    unlink(outp);
    if (r->keep) write_bytes(outp, keep_text, strlen(keep_text));
    snprintf(args, sizeof args, r->args, outp);
    int rc = cli_run(r->fn, r->tool, args);
    ck_assert_msg(rc == r->want_exit, "%s %s: exit %d, expected %d; stderr: %s", r->tool, args, rc, r->want_exit,
                  err_buf);
    ck_assert_msg(strstr(err_buf, r->msg) != NULL, "%s %s: stderr does not name '%s': %s", r->tool, args, r->msg,
                  err_buf);
    char got[256];
    if (r->keep) {
        ck_assert_int_ge(read_file(outp, got, sizeof got), 0);
        ck_assert_str_eq(got, keep_text);
    } else {
        ck_assert_msg(!exists(outp), "%s %s: left %s behind", r->tool, args, outp);
        char tmp[600];
        snprintf(tmp, sizeof tmp, "%s.tmp", outp);
        ck_assert_msg(!exists(tmp), "%s %s: left %s behind", r->tool, args, tmp);
    }
}
END_TEST

/* ---- golden case directories: truncated, corrupted, missing ---------------------------------------- */

static const char *golden_src(void)
{
    static char p[512];
    const char *root = getenv("MOE_GOLDEN_DIR");
    snprintf(p, sizeof p, "%s/stage.route.softmax_topk", root ? root : "golden");
    return p;
}

/* Copies the case into tmpdir/<tag>/stage.route.softmax_topk; returns the
 * case directory. */
static void copy_case(const char *tag, char *dst, size_t n)
{
    tmp_make();
    char parent[512], cmd[2048];
    snprintf(parent, sizeof parent, "%s/%s", tmpdir, tag);
    ck_assert_int_eq(mkdir(parent, 0755), 0);
    snprintf(dst, n, "%s/stage.route.softmax_topk", parent);
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", golden_src(), dst);
    ck_assert_int_eq(system(cmd), 0);
}

typedef struct {
    const char *what;
    const char *file;   /* the file broken */
    int op;             /* 0 truncate, 1 flip a byte, 2 remove, 3 replace text */
    long arg;
    const char *text;
    int want;           /* gk_status */
    const char *reason; /* substring of the reason */
} golden_row;

static const golden_row golden_rows[] = {
    {"truncated tensor", "in_logits.npy", 0, 200, NULL, GK_CORRUPT, "in_logits.npy"},
    {"flipped data byte", "out_topk_ids.npy", 1, 200, NULL, GK_CORRUPT, "out_topk_ids.npy"},
    {"missing tensor", "out_topk_weights.npy", 2, 0, NULL, GK_MISSING, "out_topk_weights.npy"},
    {"missing manifest", "MANIFEST.sha256", 2, 0, NULL, GK_MISSING, "MANIFEST.sha256"},
    {"malformed manifest", "MANIFEST.sha256", 3, 0, "not a manifest line\n", GK_CORRUPT, "MANIFEST.sha256"},
    {"truncated case.json", "case.json", 0, 10, NULL, GK_CORRUPT, "case.json"},
};
#define NGOLDEN ((int)(sizeof golden_rows / sizeof golden_rows[0]))

START_TEST(t_golden_bad)
{
    const golden_row *r = &golden_rows[_i];
    char dir[600], f[800];
    char tag[32];
    snprintf(tag, sizeof tag, "g%d", _i);
    copy_case(tag, dir, sizeof dir);
    snprintf(f, sizeof f, "%s/%s", dir, r->file);
    if (r->op == 0) ck_assert_int_eq(truncate(f, r->arg), 0);
    if (r->op == 1) {
        FILE *fp = fopen(f, "r+b");
        ck_assert_ptr_nonnull(fp);
        fseek(fp, r->arg, SEEK_SET);
        int ch = fgetc(fp);
        fseek(fp, r->arg, SEEK_SET);
        fputc(ch ^ 0x40, fp);
        fclose(fp);
    }
    if (r->op == 2) ck_assert_int_eq(unlink(f), 0);
    if (r->op == 3) write_bytes(f, r->text, strlen(r->text));
    gk_stored st;
    ck_assert_int_eq(gk_read_case(dir, 1, &st), MOE_OK);
    ck_assert_msg((int)st.status == r->want, "%s: status %s, expected %s (%s)", r->what, gk_status_name(st.status),
                  gk_status_name((gk_status)r->want), st.reason);
    ck_assert_msg(strstr(st.reason, r->reason) != NULL, "%s: reason '%s' does not name %s", r->what, st.reason,
                  r->reason);
    /* nothing half-loaded is handed back as if valid */
    ck_assert_int_eq(st.in.n, 0);
    ck_assert_int_eq(st.out.n, 0);
    gk_stored_free(&st);

    /* the CLI reports it as a bad input file (exit 3) naming the file */
    char args[1024];
    snprintf(args, sizeof args, "verify --dir %s/%s --backend ref --filter stage.route.softmax_topk", tmpdir, tag);
    int rc = cli_run(moe_cli_golden, "moe-golden", args);
    ck_assert_msg(rc == 3, "%s: moe-golden verify exit %d, expected 3: %s%s", r->what, rc, out_buf, err_buf);
    ck_assert_msg(strstr(out_buf, r->reason) || strstr(err_buf, r->reason), "%s: verify does not name %s: %s%s",
                  r->what, r->reason, out_buf, err_buf);
}
END_TEST

/* The intact copy loads: the rows above fail because of their damage. */
START_TEST(t_golden_intact)
{
    char dir[600];
    copy_case("intact", dir, sizeof dir);
    gk_stored st;
    ck_assert_int_eq(gk_read_case(dir, 1, &st), MOE_OK);
    ck_assert_msg(st.status == GK_OK, "%s", st.reason);
    ck_assert_int_gt(st.in.n, 0);
    gk_stored_free(&st);
}
END_TEST

static void rm_tmpdir(void)
{
    if (!tmpdir[0]) return;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    tmpdir[0] = '\0';
}

static void teardown(void)
{
    pool_free();
    if (prob_made) mkf_unmake(&prob), prob_made = 0;
    rm_tmpdir();
}

static Suite *bad_input_suite(void)
{
    Suite *s = suite_create("bad_input");
    TCase *tc = tcase_create("table");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, t_bad_input, 0, NROWS);
    tcase_add_loop_test(tc, t_baseline, 0, NROWS);
    tcase_add_test(tc, t_table_covers_classes);
    suite_add_tcase(s, tc);
    TCase *cli = tcase_create("cli");
    tcase_add_checked_fixture(cli, NULL, teardown);
    tcase_set_timeout(cli, 60);
    tcase_add_loop_test(cli, t_cli_bad, 0, NCLI);
    suite_add_tcase(s, cli);
    TCase *g = tcase_create("golden");
    tcase_add_checked_fixture(g, NULL, teardown);
    tcase_set_timeout(g, 60);
    tcase_add_loop_test(g, t_golden_bad, 0, NGOLDEN);
    tcase_add_test(g, t_golden_intact);
    suite_add_tcase(s, g);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(bad_input_suite());
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf ? EXIT_FAILURE : EXIT_SUCCESS;
}
