/* Golden cases of the row stages: permutation (gather with zero rows,
 * scatter, TensorRT-LLM expand, the batched and the padded grouped
 * layouts, packed e2m1 rows), the grouped GEMM for every scheme, every
 * activation in every layout (with vLLM's act(g) rounding, TensorRT-LLM's
 * per-expert SwigluBias, and non-finite inputs), and every
 * weight-and-reduce variant and TensorRT-LLM finalize. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "golden_internal.h"
#include "moe/bounds.h"
#include "moe/format.h"
#include "moe/gemm.h"
#include "moe/rng.h"

static const moe_dtype DT[] = {MOE_BF16, MOE_F16, MOE_F32, MOE_E2M1};

/* A seeded permutation of [0, n) (Fisher-Yates on the case's stream). */
static void permutation(const moe_golden_case *c, const char *tag, int32_t *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++) p[i] = (int32_t)i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = moe_rng_u32(c->seed, gk_stream(c, tag), (uint64_t)i) % (uint64_t)(i + 1);
        int32_t t = p[i];
        p[i] = p[j], p[j] = t;
    }
}

/* Rows of dtype d: normals, or raw seeded bytes for packed e2m1. */
static moe_status fill_rows(const moe_golden_case *c, moe_tensor *t, const char *tag, float sd)
{
    if (!t) return MOE_ERR_NULL;
    if (t->dtype != MOE_E2M1) return gk_normal(c, t, tag, sd);
    for (size_t i = 0; i < t->nbytes; i++) ((uint8_t *)t->data)[i] = (uint8_t)moe_rng_u32(c->seed, gk_stream(c, tag), i);
    return MOE_OK;
}

/* ---- permute_rows / unpermute_rows / expand_trtllm ------------------------------------- */

/* dims M = T, H, I = P (rows moved); v[0] dtype index */
static moe_status perm_make(const moe_golden_case *c, moe_golden_set *in)
{
    moe_status st = MOE_OK;
    int64_t T = c->dims.M, H = c->dims.H, P = c->dims.I;
    int gather = !strcmp(c->kind, "permute_rows");
    moe_tensor *x = gk_new(in, &st, gather ? "x" : "y", DT[c->v[0]], 2, GK_SH(gather ? T : P, H));
    moe_tensor *ix = gk_new(in, &st, gather ? "src" : "dst", MOE_I32, 1, GK_SH(P));
    if (st == MOE_OK) st = fill_rows(c, x, "x", 1.0f);
    if (st != MOE_OK) return st;
    int32_t *v = ix->data;
    if (gather) { /* rows drawn with repeats, every fourth a -1 (zero row) */
        for (int64_t p = 0; p < P; p++)
            v[p] = p % 4 == 3 ? -1 : (int32_t)(moe_rng_u32(c->seed, gk_stream(c, "src"), (uint64_t)p) % (uint64_t)T);
    } else { /* each destination at most once; token T-1 and the last rows unnamed */
        int32_t perm[64];
        permutation(c, "dst", perm, T);
        for (int64_t p = 0; p < P; p++) v[p] = p < T - 1 ? perm[p] : -1;
    }
    return MOE_OK;
}

static moe_status perm_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in, moe_golden_set *out)
{
    gk_run r;
    gk_begin(&r, ops, in, out);
    int64_t T = c->dims.M, H = c->dims.H, P = c->dims.I;
    moe_dtype d = DT[c->v[0]];
    if (!strcmp(c->kind, "permute_rows")) {
        const moe_tensor *x = gk_in(&r, "x"), *src = gk_in(&r, "src");
        moe_tensor *o = gk_out(&r, "out", d, 2, GK_SH(P, H));
        return gk_done(&r, r.st ? r.st : ops->permute_rows(x, src, o));
    }
    const moe_tensor *y = gk_in(&r, "y"), *dst = gk_in(&r, "dst");
    moe_tensor *o = gk_out(&r, "out", d, 2, GK_SH(T, H));
    return gk_done(&r, r.st ? r.st : ops->unpermute_rows(y, dst, o));
}

static moe_status dtype_describe(const moe_golden_case *c, cJSON *p)
{
    return gk_json_str(p, "dtype", moe_dtype_get(DT[c->v[0]])->name);
}

/* dims M = T, k, H; v[0] dtype index, v[1] 1: no router weights (scales 1.0) */
static moe_status expand_make(const moe_golden_case *c, moe_golden_set *in)
{
    moe_status st = MOE_OK;
    int64_t T = c->dims.M, k = c->dims.k, H = c->dims.H;
    moe_tensor *x = gk_new(in, &st, "x", DT[c->v[0]], 2, GK_SH(T, H));
    moe_tensor *map = gk_new(in, &st, "permuted_row_to_unpermuted_row", MOE_I32, 1, GK_SH(T * k));
    moe_tensor *w = c->v[1] ? NULL : gk_new(in, &st, "topk_weights", MOE_F32, 2, GK_SH(T, k));
    if (st == MOE_OK) st = fill_rows(c, x, "x", 1.0f);
    if (st == MOE_OK && w) st = gk_uniform(c, w, "topk_weights", 0.0f, 1.0f);
    if (st == MOE_OK) permutation(c, "map", map->data, T * k);
    return st;
}

static moe_status expand_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in, moe_golden_set *out)
{
    gk_run r;
    gk_begin(&r, ops, in, out);
    int64_t P = c->dims.M * c->dims.k, H = c->dims.H;
    const moe_tensor *x = gk_in(&r, "x"), *map = gk_in(&r, "permuted_row_to_unpermuted_row");
    const moe_tensor *w = gk_opt(&r, "topk_weights");
    moe_tensor *o = gk_out(&r, "out", DT[c->v[0]], 2, GK_SH(P, H));
    moe_tensor *ps = gk_out(&r, "permuted_scales", MOE_F32, 1, GK_SH(P));
    return gk_done(&r, r.st ? r.st : ops->expand_trtllm(x, map, (int)c->dims.k, w, o, ps));
}

static moe_status expand_describe(const moe_golden_case *c, cJSON *p)
{
    moe_status st = dtype_describe(c, p);
    if (st == MOE_OK) st = gk_json_str(p, "router_weights", c->v[1] ? "none (scales 1.0)" : "f32 [T, k]");
    if (st == MOE_OK) st = gk_json_str(p, "map", "seeded permutation of the k-major rows j*T + t");
    return st;
}

/* ---- batched_scatter / permute_grouped --------------------------------------------------- */

/* dims M = T, E, k, H; v[0] first expert, v[1] local experts, v[2] ids
 * pattern, v[3] pad multiple (permute_grouped) */
static moe_status layout_make(const moe_golden_case *c, moe_golden_set *in)
{
    moe_status st = MOE_OK;
    moe_tensor *x = gk_new(in, &st, "x", MOE_BF16, 2, GK_SH(c->dims.M, c->dims.H));
    moe_tensor *ids = gk_new(in, &st, "topk_ids", MOE_I32, 2, GK_SH(c->dims.M, c->dims.k));
    if (st == MOE_OK) st = gk_normal(c, x, "x", 1.0f);
    if (st == MOE_OK) st = gk_ids_pattern(c, ids, c->v[2]);
    return st;
}

static moe_status layout_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in, moe_golden_set *out)
{
    gk_run r;
    gk_begin(&r, ops, in, out);
    int64_t T = c->dims.M, H = c->dims.H, L = c->v[1];
    const moe_tensor *x = gk_in(&r, "x"), *ids = gk_in(&r, "topk_ids");
    if (!strcmp(c->kind, "batched_scatter")) { /* max_tokens = T: distinct ids never overflow it */
        moe_tensor *o = gk_out(&r, "out", MOE_BF16, 3, GK_SH(L, T, H));
        moe_tensor *n = gk_out(&r, "counts", MOE_I32, 1, GK_SH(L));
        return gk_done(&r, r.st ? r.st : ops->batched_scatter(x, ids, c->v[0], o, n));
    }
    int64_t cap = 0;
    moe_status st = moe_grouped_capacity(T * c->dims.k, (int)L, c->v[3], &cap);
    if (st != MOE_OK) return gk_done(&r, st);
    moe_tensor *o = gk_out(&r, "out", MOE_BF16, 2, GK_SH(cap, H));
    moe_tensor *rs = gk_out(&r, "row_src", MOE_I32, 1, GK_SH(cap));
    moe_tensor *n = gk_out(&r, "counts", MOE_I32, 1, GK_SH(L));
    moe_tensor *off = gk_out(&r, "offsets", MOE_I32, 1, GK_SH(L + 1));
    return gk_done(&r, r.st ? r.st : ops->permute_grouped(x, ids, c->v[0], c->v[3], o, rs, n, off));
}

static moe_status layout_describe(const moe_golden_case *c, cJSON *p)
{
    moe_status st = gk_json_num(p, "first_expert", c->v[0]);
    if (st == MOE_OK) st = gk_json_num(p, "num_local_experts", c->v[1]);
    if (st == MOE_OK && !strcmp(c->kind, "permute_grouped")) st = gk_json_num(p, "pad_multiple", c->v[3]);
    if (st == MOE_OK && !strcmp(c->kind, "batched_scatter")) st = gk_json_str(p, "max_tokens", "T");
    if (st == MOE_OK) st = gk_json_str(p, "topk_ids", gk_ids_pattern_name(c->v[2]));
    return st;
}

/* ---- grouped_gemm ------------------------------------------------------------------------- */

/* dims M = P rows, E, I = N, H = K; v[0] scheme, v[1] bias, v[2] 1: f32 output */
static moe_dtype gemm_out_dtype(const moe_golden_case *c)
{
    moe_quant_spec as;
    moe_scheme_spec((moe_scheme)c->v[0], MOE_OPERAND_ACT, &as);
    return c->v[2] ? MOE_F32 : as.gran == MOE_GRAN_NONE ? as.elem : MOE_BF16;
}

static moe_status gemm_make(const moe_golden_case *c, moe_golden_set *in)
{
    moe_quant_spec as, ws;
    int64_t P = c->dims.M, E = c->dims.E, N = c->dims.I, K = c->dims.H;
    moe_status st = moe_scheme_spec((moe_scheme)c->v[0], MOE_OPERAND_ACT, &as);
    if (st == MOE_OK) st = moe_scheme_spec((moe_scheme)c->v[0], MOE_OPERAND_WEIGHT, &ws);
    moe_tensor af, wf;
    memset(&af, 0, sizeof af), memset(&wf, 0, sizeof wf);
    if (st == MOE_OK) st = moe_tensor_alloc(&af, MOE_F32, 2, GK_SH(P, K));
    if (st == MOE_OK) st = moe_tensor_alloc(&wf, MOE_F32, 3, GK_SH(E, N, K));
    if (st == MOE_OK) st = gk_normal(c, &af, "a", 1.0f);
    if (st == MOE_OK) st = gk_normal(c, &wf, "w", 0.05f);
    /* the operands in the scheme's elements, quantized by the reference */
    if (st == MOE_OK) st = gk_quantize_into(in, &as, &af, "a");
    if (st == MOE_OK) st = gk_quantize_into(in, &ws, &wf, "w");
    moe_tensor_free(&af), moe_tensor_free(&wf);
    moe_tensor *re = gk_new(in, &st, "row_expert", MOE_I32, 1, GK_SH(P));
    for (int64_t p = 0; st == MOE_OK && p < P; p++)
        ((int32_t *)re->data)[p] = p == 3 ? -1 : (int32_t)(moe_rng_u32(c->seed, gk_stream(c, "row_expert"), (uint64_t)p) % (uint64_t)E);
    moe_tensor *b = c->v[1] ? gk_new(in, &st, "bias", MOE_F32, 2, GK_SH(E, N)) : NULL;
    if (st == MOE_OK && b) st = gk_normal(c, b, "bias", 0.5f);
    return st;
}

static moe_status gemm_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in, moe_golden_set *out)
{
    gk_run r;
    gk_begin(&r, ops, in, out);
    moe_gemm_args g;
    memset(&g, 0, sizeof g);
    g.scheme = (moe_scheme)c->v[0];
    g.a = gk_in(&r, "a"), g.a_scale = gk_opt(&r, "a_scale"), g.a_global = gk_opt(&r, "a_global");
    g.w = gk_in(&r, "w"), g.w_scale = gk_opt(&r, "w_scale"), g.w_global = gk_opt(&r, "w_global");
    g.row_expert = gk_in(&r, "row_expert"), g.bias = gk_opt(&r, "bias");
    moe_tensor *o = gk_out(&r, "out", gemm_out_dtype(c), 2, GK_SH(c->dims.M, c->dims.I));
    return gk_done(&r, r.st ? r.st : ops->grouped_gemm(&g, o));
}

/* BOUNDED (a backend summing in another order): moe_gemm_bound from the
 * golden operands and the reference output, the tolerance table's
 * GEMM_BOUND (include/moe/bounds.h derives it). */
static moe_status gemm_bounded(const moe_golden_case *c, const moe_golden_set *in, const moe_golden_set *got,
                               const moe_golden_set *want, moe_cmp_metrics *m)
{
    moe_gemm_args g;
    memset(&g, 0, sizeof g);
    g.scheme = (moe_scheme)c->v[0];
    g.a = moe_golden_set_find(in, "a"), g.a_scale = moe_golden_set_find(in, "a_scale");
    g.a_global = moe_golden_set_find(in, "a_global"), g.w = moe_golden_set_find(in, "w");
    g.w_scale = moe_golden_set_find(in, "w_scale"), g.w_global = moe_golden_set_find(in, "w_global");
    g.row_expert = moe_golden_set_find(in, "row_expert"), g.bias = moe_golden_set_find(in, "bias");
    const moe_tensor *ref = moe_golden_set_find(want, "out"), *out = moe_golden_set_find(got, "out");
    if (!ref || !out) return moe_fail(MOE_ERR_INVALID_ARG, "%s: output 'out' missing", c->name);
    double *bound = malloc(sizeof(double) * (size_t)(moe_tensor_numel(ref) + 1));
    if (!bound) return moe_fail(MOE_ERR_NOMEM, "%s: bound of %lld elements", c->name, (long long)moe_tensor_numel(ref));
    moe_status st = moe_gemm_bound(&g, ref, bound);
    if (st == MOE_OK) st = moe_compare_bounded(out, ref, bound, m, NULL);
    free(bound);
    return st;
}

static moe_status gemm_describe(const moe_golden_case *c, cJSON *p)
{
    moe_quant_spec as, ws;
    moe_scheme_spec((moe_scheme)c->v[0], MOE_OPERAND_ACT, &as);
    moe_scheme_spec((moe_scheme)c->v[0], MOE_OPERAND_WEIGHT, &ws);
    moe_status st = gk_json_str(p, "numerics", moe_gemm_numerics_name(moe_gemm_numerics_of((moe_scheme)c->v[0])));
    if (st == MOE_OK) st = gk_json_add(p, "act_spec", gk_spec_json(&as));
    if (st == MOE_OK) st = gk_json_add(p, "weight_spec", gk_spec_json(&ws));
    if (st == MOE_OK) st = gk_json_num(p, "bias", c->v[1]);
    if (st == MOE_OK) st = gk_json_str(p, "out_dtype", moe_dtype_get(gemm_out_dtype(c))->name);
    if (st == MOE_OK) st = gk_json_str(p, "accumulation", "f32 from 0, k ascending, one fmaf per product; row 3 -> expert -1 (zero row)");
    return st;
}

/* ---- activation --------------------------------------------------------------------------- */

/* dims M = P, I, E = local experts (swiglu_bias); v[0] act, v[1] layout,
 * v[2] dtype index, v[3] flags */
enum { ACT_ROUND = 1, ACT_PER_EXPERT = 2, ACT_SPECIALS = 4 };

static moe_status act_make(const moe_golden_case *c, moe_golden_set *in)
{
    moe_status st = MOE_OK;
    int64_t P = c->dims.M, I = c->dims.I, n = moe_act_is_gated((moe_act)c->v[0]) ? 2 * I : I;
    moe_tensor *x = gk_new(in, &st, "x", DT[c->v[2]], 2, GK_SH(P, n));
    if (st == MOE_OK) st = gk_normal(c, x, "x", 3.0f);
    if (st == MOE_OK && (c->v[3] & ACT_SPECIALS)) {
        /* every third value of rows 0-1: NaN, +-Inf, exp overflow and
         * underflow, the clamp limits */
        static const float S[] = {NAN, INFINITY, -INFINITY, 88.8f, -88.8f, 1e30f, -1e30f, 0.0f, -0.0f, 7.0f, -7.0f, 7.5f};
        float f[8 * 64];
        if (P * n > 8 * 64) return moe_fail(MOE_ERR_INTERNAL, "%s: specials need P * n <= 512", c->name);
        st = moe_decode_array(x->dtype, x->data, (size_t)(P * n), f);
        for (int64_t i = 0; i < 2 * n && i < P * n; i++)
            if (i % 3 == 0) f[i] = S[(i / 3) % 12];
        if (st == MOE_OK) st = gk_store_f32(x, f, P * n);
    }
    if (st != MOE_OK || !(c->v[3] & ACT_PER_EXPERT)) return st;
    int64_t E = c->dims.E;
    moe_tensor *al = gk_new(in, &st, "swiglu_alpha", MOE_F32, 1, GK_SH(E));
    moe_tensor *be = gk_new(in, &st, "swiglu_beta", MOE_F32, 1, GK_SH(E));
    moe_tensor *li = gk_new(in, &st, "swiglu_limit", MOE_F32, 1, GK_SH(E));
    moe_tensor *re = gk_new(in, &st, "row_expert", MOE_I32, 1, GK_SH(P));
    if (st != MOE_OK) return st;
    for (int64_t e = 0; e < E; e++) {
        ((float *)al->data)[e] = 1.0f + 0.702f * (float)e;
        ((float *)be->data)[e] = (float)e;
        ((float *)li->data)[e] = e == 0 ? INFINITY : 7.0f; /* the default and gpt-oss's */
    }
    for (int64_t p = 0; p < P; p++) ((int32_t *)re->data)[p] = p % 5 == 4 ? -1 : (int32_t)(p % E);
    return MOE_OK;
}

static moe_act_params act_params(const moe_golden_case *c)
{
    moe_act_params p = moe_act_defaults((moe_act)c->v[0], (moe_act_layout)c->v[1]);
    p.round_act_to_storage = (c->v[3] & ACT_ROUND) != 0;
    return p;
}

static moe_status act_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in, moe_golden_set *out)
{
    gk_run r;
    gk_begin(&r, ops, in, out);
    moe_act_params p = act_params(c);
    const moe_tensor *x = gk_in(&r, "x"), *re = gk_opt(&r, "row_expert");
    p.swiglu_alpha = gk_opt(&r, "swiglu_alpha"), p.swiglu_beta = gk_opt(&r, "swiglu_beta");
    p.swiglu_limit = gk_opt(&r, "swiglu_limit");
    moe_tensor *o = gk_out(&r, "out", DT[c->v[2]], 2, GK_SH(c->dims.M, c->dims.I));
    return gk_done(&r, r.st ? r.st : ops->activation(x, re, &p, o));
}

static moe_status act_describe(const moe_golden_case *c, cJSON *p)
{
    moe_act_params a = act_params(c);
    moe_status st = gk_json_str(p, "act", moe_act_name(a.act));
    if (st == MOE_OK && moe_act_is_gated(a.act)) st = gk_json_str(p, "layout", moe_act_layout_name(a.layout));
    if (st == MOE_OK) st = gk_json_num(p, "alpha", a.alpha);
    if (st == MOE_OK) st = gk_json_num(p, "limit", a.limit);
    if (st == MOE_OK) st = gk_json_num(p, "round_act_to_storage", a.round_act_to_storage);
    if (st == MOE_OK) st = gk_json_str(p, "dtype", moe_dtype_get(DT[c->v[2]])->name);
    if (st == MOE_OK && (c->v[3] & ACT_PER_EXPERT))
        st = gk_json_str(p, "swiglu_bias", "alpha 1 + 0.702 e, beta e, limit Inf / 7 per expert; rows % 5 == 4 -> -1");
    if (st == MOE_OK && (c->v[3] & ACT_SPECIALS))
        st = gk_json_str(p, "data", "every third value of rows 0-1: NaN, +-Inf, +-88.8, +-1e30, +-0, +-7, 7.5");
    if (st == MOE_OK) st = gk_json_str(p, "math", "f32, reference/math.h, one RNE rounding to the dtype");
    return st;
}

/* ---- weight and reduce -------------------------------------------------------------------- */

/* war_contiguous: dims M, k, H; v[0] weights_on_input, v[1] sum variant, v[2] dtype index
 * war_noop: dims M, H; v[2] input dtype, v[3] output dtype
 * war_naive_batched: dims M, E, k, H; v[0] first expert, v[1] local experts, v[2] weights_on_input
 * finalize_trtllm: dims M, E, k, H; v[0] first expert, v[1] local experts, v[2] bias, v[3] ids pattern
 *   (+ 8: no router weights) */
static moe_status war_make(const moe_golden_case *c, moe_golden_set *in)
{
    moe_status st = MOE_OK;
    int64_t M = c->dims.M, k = c->dims.k, H = c->dims.H;
    if (!strcmp(c->kind, "war_noop")) {
        moe_tensor *f = gk_new(in, &st, "fused", DT[c->v[2]], 2, GK_SH(M, H));
        if (st == MOE_OK) st = gk_normal(c, f, "fused", 100.0f);
        if (st == MOE_OK && f->dtype == MOE_F32) /* row 0 past f16's 65504: the narrowing overflows */
            for (int64_t i = 0; i < H; i++) ((float *)f->data)[i] *= 1000.0f;
        return st;
    }
    if (!strcmp(c->kind, "war_contiguous")) {
        moe_tensor *f = gk_new(in, &st, "fused", DT[c->v[2]], 3, GK_SH(M, k, H));
        moe_tensor *w = gk_new(in, &st, "topk_weights", MOE_F32, 2, GK_SH(M, k));
        if (st == MOE_OK) st = gk_normal(c, f, "fused", 1.0f);
        if (st == MOE_OK) st = gk_uniform(c, w, "topk_weights", 0.0f, 1.0f);
        return st;
    }
    int naive = !strcmp(c->kind, "war_naive_batched");
    int64_t L = c->v[1];
    moe_tensor *ids = gk_new(in, &st, "topk_ids", MOE_I32, 2, GK_SH(M, k));
    if (st == MOE_OK) st = gk_ids_pattern(c, ids, naive ? IDS_DISTINCT : (c->v[3] & 7));
    moe_tensor *w = naive || !(c->v[3] & 8) ? gk_new(in, &st, "topk_weights", MOE_F32, 2, GK_SH(M, k)) : NULL;
    if (st == MOE_OK && w) st = gk_uniform(c, w, "topk_weights", 0.0f, 1.0f);
    if (st != MOE_OK) return st;
    if (naive) {
        moe_tensor *f = gk_new(in, &st, "fused", MOE_BF16, 3, GK_SH(L, M, H));
        return st == MOE_OK ? gk_normal(c, f, "fused", 1.0f) : st;
    }
    /* finalize: y in the permuted layout of this rank's TensorRT-LLM maps */
    moe_maps_trtllm_params mp = {MOE_MAPS_TRTLLM_FUSED_SINGLE_BLOCK, (int)c->dims.E, c->v[0], (int)L};
    moe_tensor *u2p = gk_new(in, &st, "unpermuted_row_to_permuted_row", MOE_I32, 1, GK_SH(M * k));
    moe_tensor *y = gk_new(in, &st, "y", MOE_BF16, 2, GK_SH(M * k, H));
    moe_tensor p2u, off;
    memset(&p2u, 0, sizeof p2u), memset(&off, 0, sizeof off);
    if (st == MOE_OK) st = moe_tensor_alloc(&p2u, MOE_I32, 1, GK_SH(M * k));
    if (st == MOE_OK) st = moe_tensor_alloc(&off, MOE_I64, 1, GK_SH(L + 1));
    if (st == MOE_OK) st = moe_ref_maps_trtllm(ids, &mp, &p2u, u2p, &off, NULL);
    moe_tensor_free(&p2u), moe_tensor_free(&off);
    if (st == MOE_OK) st = gk_normal(c, y, "y", 1.0f);
    moe_tensor *b = c->v[2] ? gk_new(in, &st, "bias", MOE_F32, 2, GK_SH(L, H)) : NULL;
    if (st == MOE_OK && b) st = gk_normal(c, b, "bias", 0.5f);
    return st;
}

static moe_status war_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in, moe_golden_set *out)
{
    gk_run r;
    gk_begin(&r, ops, in, out);
    int64_t M = c->dims.M, H = c->dims.H;
    if (!strcmp(c->kind, "war_noop")) {
        const moe_tensor *f = gk_in(&r, "fused");
        moe_tensor *o = gk_out(&r, "out", DT[c->v[3]], 2, GK_SH(M, H));
        return gk_done(&r, r.st ? r.st : ops->war_noop(f, o));
    }
    if (!strcmp(c->kind, "war_contiguous")) {
        const moe_tensor *f = gk_in(&r, "fused"), *w = gk_in(&r, "topk_weights");
        moe_tensor *o = gk_out(&r, "out", DT[c->v[2]], 2, GK_SH(M, H));
        return gk_done(&r, r.st ? r.st : ops->war_contiguous(f, w, c->v[0], (moe_sum_variant)c->v[1], o));
    }
    const moe_tensor *ids = gk_in(&r, "topk_ids"), *w = gk_opt(&r, "topk_weights");
    moe_tensor *o = gk_out(&r, "out", MOE_BF16, 2, GK_SH(M, H));
    if (!strcmp(c->kind, "war_naive_batched")) {
        const moe_tensor *f = gk_in(&r, "fused");
        return gk_done(&r, r.st ? r.st : ops->war_naive_batched(f, ids, w, c->v[0], c->v[2], o));
    }
    const moe_tensor *y = gk_in(&r, "y"), *u2p = gk_in(&r, "unpermuted_row_to_permuted_row"), *b = gk_opt(&r, "bias");
    return gk_done(&r, r.st ? r.st : ops->finalize_trtllm(y, u2p, ids, w, b, c->v[0], c->v[1], o));
}

static moe_status war_describe(const moe_golden_case *c, cJSON *p)
{
    static const char *const SUM[] = {"auto", "fp32", "storage_per_add"};
    moe_status st = MOE_OK;
    if (!strcmp(c->kind, "war_noop")) {
        st = gk_json_str(p, "in_dtype", moe_dtype_get(DT[c->v[2]])->name);
        if (st == MOE_OK) st = gk_json_str(p, "out_dtype", moe_dtype_get(DT[c->v[3]])->name);
        return st;
    }
    if (!strcmp(c->kind, "war_contiguous")) {
        st = gk_json_num(p, "weights_on_input", c->v[0]);
        if (st == MOE_OK) st = gk_json_str(p, "sum", SUM[c->v[1]]);
        if (st == MOE_OK) st = gk_json_str(p, "dtype", moe_dtype_get(DT[c->v[2]])->name);
        return st;
    }
    st = gk_json_num(p, "first_expert", c->v[0]);
    if (st == MOE_OK) st = gk_json_num(p, "num_local_experts", c->v[1]);
    if (!strcmp(c->kind, "war_naive_batched")) return st == MOE_OK ? gk_json_num(p, "weights_on_input", c->v[2]) : st;
    if (st == MOE_OK) st = gk_json_num(p, "bias", c->v[2]);
    if (st == MOE_OK) st = gk_json_str(p, "router_weights", c->v[3] & 8 ? "none (1.0)" : "f32 [T, k]");
    if (st == MOE_OK) st = gk_json_str(p, "topk_ids", gk_ids_pattern_name(c->v[3] & 7));
    if (st == MOE_OK) st = gk_json_str(p, "map", "fused single-block maps of this rank");
    if (st == MOE_OK) st = gk_json_str(p, "accumulation", "fmaf(w, y + bias, acc) over local slots from 0, one rounding");
    return st;
}

/* ---- the table ---------------------------------------------------------------------------- */

enum { BF16 = 0, F16 = 1, F32 = 2, E2M1 = 3 };

#define ROW(kind, nm, seed, M, E, k, H, I, v0, v1, v2, v3, note, mk, rn, ds) \
    {nm, kind, "*", seed, {M, E, k, H, I, 0}, {v0, v1, v2, v3}, NULL, 0, note, mk, rn, ds, NULL, NULL}
#define PERM(kind, nm, seed, T, H, P, dt, note) \
    ROW(kind, nm, seed, T, 0, 0, H, P, dt, 0, 0, 0, note, perm_make, perm_run, dtype_describe)
#define EXPAND(nm, seed, T, k, H, dt, noweights, note) \
    ROW("expand_trtllm", nm, seed, T, 0, k, H, 0, dt, noweights, 0, 0, note, expand_make, expand_run, expand_describe)
#define LAYOUT(kind, nm, seed, T, E, k, H, first, local, ids, pad, note) \
    ROW(kind, nm, seed, T, E, k, H, 0, first, local, ids, pad, note, layout_make, layout_run, layout_describe)
#define GEMM(e, n, i) \
    {"stage.grouped_gemm." n, "grouped_gemm", n, 900 + i, {10, 3, 0, 128, 16, 0}, {e, 0, 0, 0}, NULL, 0, \
     "grouped GEMM with the scheme's dequantization", gemm_make, gemm_run, gemm_describe, NULL, gemm_bounded},
#define GEMMV(nm, scheme, e, seed, bias, f32out, note) \
    {nm, "grouped_gemm", scheme, seed, {10, 3, 0, 128, 16, 0}, {e, bias, f32out, 0}, NULL, 0, note, gemm_make, \
     gemm_run, gemm_describe, NULL, gemm_bounded}
#define ACT(nm, seed, act, layout, dt, flags, note) \
    ROW("activation", nm, seed, 8, 2, 0, 0, 32, act, layout, dt, flags, note, act_make, act_run, act_describe)
#define ACT3(a, n, s)                                                                                       \
    ACT("stage.activation." n ".gate_up", s, a, MOE_LAYOUT_GATE_UP, BF16, 0, "gate = row[0, I), up = row[I, 2I)"), \
    ACT("stage.activation." n ".up_gate", s + 1, a, MOE_LAYOUT_UP_GATE, BF16, 0, "TensorRT-LLM [linear | gate]"),     \
    ACT("stage.activation." n ".interleaved", s + 2, a, MOE_LAYOUT_INTERLEAVED, BF16, 0, "gpt-oss: g = row[2i], u = row[2i+1]"),
#define WAR(kind, nm, seed, M, E, k, H, v0, v1, v2, v3, note) \
    ROW(kind, nm, seed, M, E, k, H, 0, v0, v1, v2, v3, note, war_make, war_run, war_describe)

static const moe_golden_case CASES[] = {
    PERM("permute_rows", "stage.permute_rows.bf16", 1001, 6, 32, 10, BF16, "gather with repeats; src -1 gives a zero row"),
    PERM("permute_rows", "stage.permute_rows.e2m1_packed", 1002, 6, 32, 10, E2M1, "packed e2m1 rows move as bytes"),
    PERM("unpermute_rows", "stage.unpermute_rows.bf16", 1003, 6, 32, 8, BF16,
         "scatter; unnamed destinations are zero rows, dst -1 dropped"),
    PERM("unpermute_rows", "stage.unpermute_rows.f32", 1004, 6, 32, 8, F32, "f32 rows"),
    EXPAND("stage.expand_trtllm.bf16", 1005, 6, 2, 32, BF16, 0, "rows x[u % T], scales w[u % T, u / T]"),
    EXPAND("stage.expand_trtllm.no_weights", 1006, 6, 3, 32, F16, 1, "no router weights: permuted scales 1.0"),
    LAYOUT("batched_scatter", "stage.batched_scatter.basic", 1007, 8, 8, 2, 32, 0, 8, IDS_DISTINCT, 0,
           "BatchedPrepareAndFinalize layout [E, max_tokens, H]"),
    LAYOUT("batched_scatter", "stage.batched_scatter.ep_rank", 1008, 8, 8, 2, 32, 4, 4, IDS_DISTINCT, 0,
           "rank owning experts 4..7"),
    LAYOUT("batched_scatter", "edge.batched_scatter.empty_experts", 1009, 8, 8, 2, 32, 0, 8, IDS_SUBSET, 0,
           "six empty experts: zero counts and zero rows"),
    LAYOUT("batched_scatter", "edge.batched_scatter.all_to_one_expert", 1010, 8, 8, 1, 32, 0, 8, IDS_ONE_EXPERT, 0,
           "every token to expert 3: its buffer full"),
    LAYOUT("batched_scatter", "edge.batched_scatter.rank_without_tokens", 1011, 8, 8, 2, 32, 4, 4, IDS_LOW_HALF, 0,
           "rank owning experts 4..7 while every token picks 0..3"),
    LAYOUT("permute_grouped", "stage.permute_grouped.pad4", 1012, 8, 8, 2, 32, 0, 8, IDS_DISTINCT, 4,
           "expert-grouped rows padded to 4 with zero rows"),
    LAYOUT("permute_grouped", "stage.permute_grouped.pad1", 1013, 8, 8, 2, 32, 0, 8, IDS_DISTINCT, 1, "no padding"),
    LAYOUT("permute_grouped", "stage.permute_grouped.ep_rank", 1014, 8, 8, 2, 32, 4, 4, IDS_DISTINCT, 4,
           "rank owning experts 4..7: other pairs take no row"),
    LAYOUT("permute_grouped", "edge.permute_grouped.empty_experts", 1015, 8, 8, 2, 32, 0, 8, IDS_SUBSET, 4,
           "six empty experts: 0 rows each"),
    LAYOUT("permute_grouped", "edge.permute_grouped.rank_without_tokens", 1016, 8, 8, 2, 32, 4, 4, IDS_LOW_HALF, 4,
           "a rank that receives nothing"),
    LAYOUT("permute_grouped", "edge.permute_grouped.one_token", 1017, 1, 8, 2, 32, 0, 8, IDS_DISTINCT, 4, "T = 1"),

    GK_SCHEMES(GEMM)
    GEMMV("stage.grouped_gemm.bf16.bias", "bf16", MOE_SCHEME_BF16, 920, 1, 0, "f32 bias added before the rounding"),
    GEMMV("stage.grouped_gemm.fp8_wblock128_agroup128.f32_out", "fp8_wblock128_agroup128",
          MOE_SCHEME_FP8_WBLOCK128_AGROUP128, 921, 1, 1, "block tiles, bias, f32 output (no rounding)"),
    GEMMV("stage.grouped_gemm.w4a16_g32.bias", "w4a16_g32", MOE_SCHEME_W4A16_G32, 922, 1, 0,
          "weight dequantized to bf16 first (Triton), bias"),

    ACT3(MOE_ACT_SILU, "silu", 1100)
    ACT3(MOE_ACT_GELU, "gelu", 1103)
    ACT3(MOE_ACT_GELU_TANH, "gelu_tanh", 1106)
    ACT3(MOE_ACT_SWIGLUOAI, "swigluoai", 1109)
    ACT3(MOE_ACT_SWIGLU_CLAMP, "swiglu_clamp", 1112)
    ACT3(MOE_ACT_SWIGLU_BIAS, "swiglu_bias", 1115)
    ACT("stage.activation.relu2", 1118, MOE_ACT_RELU2, 0, BF16, 0, "max(x, 0)^2"),
    ACT("stage.activation.silu_nomul", 1119, MOE_ACT_SILU_NOMUL, 0, BF16, 0, "silu without the multiply"),
    ACT("stage.activation.gelu_nomul", 1120, MOE_ACT_GELU_NOMUL, 0, BF16, 0, "gelu without the multiply"),
    ACT("stage.activation.identity", 1121, MOE_ACT_IDENTITY, 0, F16, 0, "identity (a dtype-preserving copy)"),
    ACT("stage.activation.silu.round_act_to_storage", 1122, MOE_ACT_SILU, MOE_LAYOUT_GATE_UP, BF16, ACT_ROUND,
        "vLLM: act(g) rounded to bf16 before * u"),
    ACT("stage.activation.gelu.f16.round_act_to_storage", 1123, MOE_ACT_GELU, MOE_LAYOUT_GATE_UP, F16, ACT_ROUND,
        "f16 storage, act(g) rounded"),
    ACT("stage.activation.silu.f32", 1124, MOE_ACT_SILU, MOE_LAYOUT_GATE_UP, F32, 0, "f32 storage"),
    ACT("stage.activation.swiglu_bias.per_expert", 1125, MOE_ACT_SWIGLU_BIAS, MOE_LAYOUT_UP_GATE, BF16, ACT_PER_EXPERT,
        "TensorRT-LLM SwigluBias with per-expert alpha, beta, limit; -1 rows give zeros"),
    ACT("edge.activation.silu.nonfinite", 1126, MOE_ACT_SILU, MOE_LAYOUT_GATE_UP, BF16, ACT_SPECIALS,
        "NaN, Inf, exp over/underflow through silu * u"),
    ACT("edge.activation.swigluoai.nonfinite", 1127, MOE_ACT_SWIGLUOAI, MOE_LAYOUT_INTERLEAVED, BF16, ACT_SPECIALS,
        "the clamp at limit 7 against NaN and Inf"),
    ACT("edge.activation.gelu_tanh.nonfinite", 1128, MOE_ACT_GELU_TANH, MOE_LAYOUT_GATE_UP, F16, ACT_SPECIALS,
        "tanh saturation and f16 overflow"),
    ACT("edge.activation.relu2.nonfinite", 1129, MOE_ACT_RELU2, 0, BF16, ACT_SPECIALS, "squares overflow to Inf"),

    WAR("war_contiguous", "stage.war_contiguous.auto_k2", 1201, 6, 0, 2, 32, 0, MOE_SUM_AUTO, BF16, 0,
        "weight, then moe_sum (topk 2: per-add rounding)"),
    WAR("war_contiguous", "stage.war_contiguous.auto_k6", 1202, 6, 0, 6, 32, 0, MOE_SUM_AUTO, BF16, 0,
        "topk 6: fp32 sum, one rounding"),
    WAR("war_contiguous", "stage.war_contiguous.fp32", 1203, 6, 0, 4, 32, 0, MOE_SUM_FP32, BF16, 0, "fp32 sum forced"),
    WAR("war_contiguous", "stage.war_contiguous.storage_per_add", 1204, 6, 0, 4, 32, 0, MOE_SUM_STORAGE_PER_ADD, F16, 0,
        "storage-dtype accumulation, f16"),
    WAR("war_contiguous", "stage.war_contiguous.weights_on_input", 1205, 6, 0, 2, 32, 1, MOE_SUM_AUTO, BF16, 0,
        "weights already applied: plain moe_sum"),
    WAR("war_contiguous", "stage.war_contiguous.f32", 1206, 6, 0, 3, 32, 0, MOE_SUM_AUTO, F32, 0, "f32 storage"),
    WAR("war_noop", "stage.war_noop.bf16", 1207, 6, 0, 0, 32, 0, 0, BF16, BF16, "copy"),
    WAR("war_noop", "stage.war_noop.f32_to_bf16", 1208, 6, 0, 0, 32, 0, 0, F32, BF16, "dtype change with RNE"),
    WAR("war_noop", "stage.war_noop.f32_to_f16", 1209, 6, 0, 0, 32, 0, 0, F32, F16, "f16 overflow past 65504"),
    WAR("war_naive_batched", "stage.war_naive_batched.basic", 1210, 6, 8, 2, 32, 0, 8, 0, 0,
        "NaiveBatched: one rounding per expert, experts ascending"),
    WAR("war_naive_batched", "stage.war_naive_batched.ep_rank", 1211, 6, 8, 2, 32, 4, 4, 0, 0, "rank owning experts 4..7"),
    WAR("war_naive_batched", "stage.war_naive_batched.weights_on_input", 1212, 6, 8, 2, 32, 0, 8, 1, 0, "w = 1"),
    WAR("finalize_trtllm", "stage.finalize_trtllm.basic", 1213, 6, 8, 2, 32, 0, 8, 0, IDS_DISTINCT,
        "fmaf over slots, one rounding"),
    WAR("finalize_trtllm", "stage.finalize_trtllm.bias", 1214, 6, 8, 3, 32, 0, 8, 1, IDS_DISTINCT,
        "bias per local expert inside the fmaf"),
    WAR("finalize_trtllm", "stage.finalize_trtllm.ep_rank", 1215, 6, 8, 2, 32, 4, 4, 1, IDS_DISTINCT,
        "rank owning experts 4..7: tokens with no local expert get zero rows"),
    WAR("finalize_trtllm", "stage.finalize_trtllm.no_weights", 1216, 6, 8, 2, 32, 0, 8, 0, IDS_DISTINCT | 8,
        "router weights NULL: 1.0"),
    WAR("finalize_trtllm", "edge.finalize_trtllm.rank_without_tokens", 1217, 6, 8, 2, 32, 4, 4, 0, IDS_LOW_HALF,
        "no token routed to this rank: all rows zero"),
    WAR("finalize_trtllm", "edge.finalize_trtllm.all_to_one_expert", 1218, 6, 8, 1, 32, 0, 8, 1, IDS_ONE_EXPERT,
        "every token to expert 3"),
};

gk_family gk_cases_rows(void)
{
    gk_family f = {CASES, (int)(sizeof CASES / sizeof CASES[0])};
    return f;
}
