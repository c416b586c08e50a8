/* The CUDA conformance backend's row stages against the reference, bit for
 * bit: route (every method, bias, groups, scaling, NaN/Inf logits, ties),
 * activation (every activation and layout, row_expert, swiglu_bias
 * vectors, rounding of act(g)), war_contiguous (every sum variant, weights
 * on the input), war_noop, war_naive_batched and finalize_trtllm. Seeded
 * inputs at small and large shapes (M = 4096, E up to 256, k = 8, hidden
 * 2048), the reference on host tensors, the GPU stage on device copies,
 * outputs compared bytewise (NaN by class where a NaN input can give a
 * NaN). Bad input: the same status and message as the reference, and a
 * host tensor refused. Exits 77 (skip) without a CUDA device. */
#include <check.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/ops.h"
#include "moe/rng.h"
#include "optimized/cuda/cuda.h"
#include "test_util.h"
#include "gpu_test_util.h"

/* ---- helpers ---------------------------------------------------------------- */

static uint64_t stream_of(const char *name, int i) { return moe_rng_stream_id(name) + (uint64_t)i * 7919u; }

/* Sets a share of t's f32/bf16/f16 elements to NaN, +Inf, -Inf. */
static void sprinkle_nonfinite(moe_tensor *t, uint64_t stream, unsigned per_mille)
{
    int64_t n = moe_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        uint32_t r = moe_rng_u32(99, stream, (uint64_t)i);
        if (r % 1000 >= per_mille) continue;
        int kind = (r >> 16) % 3;
        if (t->dtype == MOE_F32) ((float *)t->data)[i] = kind == 0 ? NAN : kind == 1 ? INFINITY : -INFINITY;
        else if (t->dtype == MOE_BF16) ((uint16_t *)t->data)[i] = kind == 0 ? 0x7FC0 : kind == 1 ? 0x7F80 : 0xFF80;
        else ((uint16_t *)t->data)[i] = kind == 0 ? 0x7E00 : kind == 1 ? 0x7C00 : 0xFC00;
    }
}

/* The reference's status and message for a call, then the GPU's. */
#define SAME_ERROR(ref_call, gpu_call) GPU_SAME_ERROR(#gpu_call, ref_call, gpu_call)

/* ---- route ------------------------------------------------------------------ */

typedef struct {
    const char *name;
    moe_route_method method;
    moe_dtype dtype;
    int64_t M;
    int E, k, renorm;
    moe_score_func score;
    int G, topk_group, bias;
    float scale;
    int special; /* 1: NaN/Inf logits; 2: ties (logits on a coarse grid) */
} route_case;

static const route_case route_cases[] = {
    {"softmax_qwen3", MOE_ROUTE_SOFTMAX_TOPK, MOE_F32, 4096, 128, 8, 1, MOE_SCORE_SOFTMAX, 0, 0, 0, 1.0f, 0},
    {"softmax_bf16", MOE_ROUTE_SOFTMAX_TOPK, MOE_BF16, 4096, 128, 8, 0, MOE_SCORE_SOFTMAX, 0, 0, 0, 1.0f, 0},
    {"softmax_f16_small", MOE_ROUTE_SOFTMAX_TOPK, MOE_F16, 37, 8, 2, 1, MOE_SCORE_SOFTMAX, 0, 0, 0, 1.0f, 0},
    {"softmax_one_token", MOE_ROUTE_SOFTMAX_TOPK, MOE_F32, 1, 64, 64, 1, MOE_SCORE_SOFTMAX, 0, 0, 0, 1.0f, 0},
    {"softmax_nonfinite", MOE_ROUTE_SOFTMAX_TOPK, MOE_F32, 1000, 64, 6, 1, MOE_SCORE_SOFTMAX, 0, 0, 0, 1.0f, 1},
    {"softmax_ties", MOE_ROUTE_SOFTMAX_TOPK, MOE_BF16, 1000, 60, 4, 1, MOE_SCORE_SOFTMAX, 0, 0, 0, 1.0f, 2},
    {"sigmoid_bias_scaled", MOE_ROUTE_SIGMOID_TOPK, MOE_F32, 4096, 256, 8, 1, MOE_SCORE_SOFTMAX, 0, 0, 1, 2.5f, 0},
    {"sigmoid_nonfinite", MOE_ROUTE_SIGMOID_TOPK, MOE_F16, 500, 32, 4, 0, MOE_SCORE_SOFTMAX, 0, 0, 0, 1.0f, 1},
    {"grouped_dsv3", MOE_ROUTE_GROUPED_TOPK, MOE_F32, 4096, 256, 8, 1, MOE_SCORE_SIGMOID, 8, 4, 1, 2.5f, 0},
    {"grouped_dsv2", MOE_ROUTE_GROUPED_TOPK, MOE_BF16, 2048, 160, 6, 0, MOE_SCORE_SOFTMAX, 8, 3, 0, 16.0f, 0},
    {"grouped_ties", MOE_ROUTE_GROUPED_TOPK, MOE_F32, 700, 64, 4, 1, MOE_SCORE_SIGMOID, 8, 2, 1, 1.0f, 2},
    {"grouped_nonfinite", MOE_ROUTE_GROUPED_TOPK, MOE_F32, 700, 64, 8, 1, MOE_SCORE_SOFTMAX, 16, 4, 0, 1.0f, 1},
    {"llama4", MOE_ROUTE_LLAMA4_TOP1, MOE_BF16, 4096, 16, 1, 0, MOE_SCORE_SOFTMAX, 0, 0, 0, 1.0f, 0},
    {"llama4_nonfinite", MOE_ROUTE_LLAMA4_TOP1, MOE_F32, 999, 16, 1, 1, MOE_SCORE_SOFTMAX, 0, 0, 0, 1.0f, 1},
    {"softmax_e512_global_rows", MOE_ROUTE_SOFTMAX_TOPK, MOE_F16, 300, 512, 8, 1, MOE_SCORE_SOFTMAX, 0, 0, 0, 1.0f, 0},
    {"grouped_e1024_global_rows", MOE_ROUTE_GROUPED_TOPK, MOE_F32, 200, 1024, 8, 1, MOE_SCORE_SIGMOID, 32, 4, 1, 2.5f, 0},
    {"softmax_empty", MOE_ROUTE_SOFTMAX_TOPK, MOE_F32, 0, 16, 2, 1, MOE_SCORE_SOFTMAX, 0, 0, 0, 1.0f, 0},
};
#define N_ROUTE ((int)(sizeof route_cases / sizeof route_cases[0]))

START_TEST(route_matches_reference)
{
    route_case cs = route_cases[_i];
    cs.M = gpu_small_cap(cs.M, 300); /* small mode: still 10 blocks of the shared-memory kernel */
    const route_case *c = &cs;
    uint64_t st = stream_of("gpu_rows_route", _i);
    moe_tensor lg = gpu_hnew(c->dtype, 2, c->M, c->E, 0);
    ck_assert_int_eq(moe_tensor_fill_normal(&lg, 1, st, 0.0f, 2.0f), MOE_OK);
    if (c->special == 1) {
        sprinkle_nonfinite(&lg, st + 1, 30);
        if (c->M > 2) /* a row all NaN, a row all +Inf */
            for (int e = 0; e < c->E; e++) {
                if (c->dtype == MOE_F32) ((float *)lg.data)[e] = NAN, ((float *)lg.data)[c->E + e] = INFINITY;
                else ((uint16_t *)lg.data)[e] = 0x7E00, ((uint16_t *)lg.data)[c->E + e] = 0x7C00;
            }
    } else if (c->special == 2) { /* many equal logits: the tie rule decides */
        moe_tensor f = gpu_hnew(MOE_F32, 2, c->M, c->E, 0);
        for (int64_t i = 0; i < c->M * c->E; i++) ((float *)f.data)[i] = (float)(moe_rng_u32(3, st, (uint64_t)i) % 4);
        if (c->dtype == MOE_F32) memcpy(lg.data, f.data, f.nbytes);
        else
            for (int64_t i = 0; i < c->M * c->E; i++) { /* small integers are exact in bf16 */
                float v = ((float *)f.data)[i];
                uint32_t u;
                memcpy(&u, &v, 4);
                ((uint16_t *)lg.data)[i] = (uint16_t)(u >> 16);
            }
        moe_tensor_free(&f);
    }
    moe_tensor bias = gpu_hnew(MOE_F32, 1, c->E, 0, 0), dbias;
    memset(&dbias, 0, sizeof dbias);
    if (c->bias) {
        ck_assert_int_eq(moe_tensor_fill_normal(&bias, 2, st, 0.0f, 0.5f), MOE_OK);
        if (c->special == 2)
            for (int e = 0; e < c->E; e++) ((float *)bias.data)[e] = (float)(e % 3) * 0.25f;
        dbias = gpu_to_dev(&bias);
    }
    moe_route_params p;
    memset(&p, 0, sizeof p);
    p.method = c->method, p.topk = c->k, p.renormalize = c->renorm, p.score = c->score;
    p.num_expert_group = c->G, p.topk_group = c->topk_group, p.routed_scaling_factor = c->scale;
    moe_tensor ids = gpu_hnew(MOE_I32, 2, c->M, c->k, 0), w = gpu_hnew(MOE_F32, 2, c->M, c->k, 0);
    p.correction_bias = c->bias ? &bias : NULL;
    ck_assert_msg(moe_ops_ref.route(&lg, &p, &ids, &w) == MOE_OK, "%s", moe_last_error());
    moe_tensor dlg = gpu_to_dev(&lg), dids = gpu_dev_like(&ids), dw = gpu_dev_like(&w);
    p.correction_bias = c->bias ? &dbias : NULL;
    ck_assert_msg(moe_cuda_route(&dlg, &p, &dids, &dw) == MOE_OK, "%s: %s", c->name, moe_last_error());
    char what[128];
    snprintf(what, sizeof what, "route %s: topk_ids", c->name);
    gpu_expect_same(what, &ids, &dids, 0);
    snprintf(what, sizeof what, "route %s: topk_weights", c->name);
    gpu_expect_same(what, &w, &dw, 0);
    moe_cuda_free(&dlg), moe_cuda_free(&dids), moe_cuda_free(&dw), moe_cuda_free(&dbias);
    moe_tensor_free(&lg), moe_tensor_free(&ids), moe_tensor_free(&w), moe_tensor_free(&bias);
}
END_TEST

START_TEST(route_bad_input)
{
    moe_tensor lg = gpu_hnew(MOE_F32, 2, 4, 8, 0), ids = gpu_hnew(MOE_I32, 2, 4, 2, 0), w = gpu_hnew(MOE_F32, 2, 4, 2, 0);
    moe_tensor bias = gpu_hnew(MOE_F32, 1, 8, 0, 0);
    moe_tensor dlg = gpu_to_dev(&lg), dids = gpu_dev_like(&ids), dw = gpu_dev_like(&w);
    moe_route_params p;
    memset(&p, 0, sizeof p);
    p.method = MOE_ROUTE_SOFTMAX_TOPK, p.topk = 2, p.routed_scaling_factor = 1.0f;
    /* a host tensor where device memory is required */
    ck_assert_int_eq(moe_cuda_route(&lg, &p, &dids, &dw), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "logits"));
    p.topk = 9;
    SAME_ERROR(moe_ops_ref.route(&lg, &p, &ids, &w), moe_cuda_route(&dlg, &p, &dids, &dw));
    p.topk = 2, p.routed_scaling_factor = 0.0f;
    SAME_ERROR(moe_ops_ref.route(&lg, &p, &ids, &w), moe_cuda_route(&dlg, &p, &dids, &dw));
    p.routed_scaling_factor = 1.0f;
    SAME_ERROR(moe_ops_ref.route(&lg, NULL, &ids, &w), moe_cuda_route(&dlg, NULL, &dids, &dw));
    p.method = MOE_ROUTE_GROUPED_TOPK, p.num_expert_group = 3, p.topk_group = 1;
    SAME_ERROR(moe_ops_ref.route(&lg, &p, &ids, &w), moe_cuda_route(&dlg, &p, &dids, &dw));
    /* a NaN in the bias: found by the check's scan of the bias bytes */
    p.method = MOE_ROUTE_SIGMOID_TOPK;
    ((float *)bias.data)[5] = NAN;
    moe_tensor dbias = gpu_to_dev(&bias);
    p.correction_bias = &bias;
    moe_status rs = moe_ops_ref.route(&lg, &p, &ids, &w);
    char rm[512];
    snprintf(rm, sizeof rm, "%s", moe_last_error());
    p.correction_bias = &dbias;
    ck_assert_int_eq(moe_cuda_route(&dlg, &p, &dids, &dw), rs);
    ck_assert_str_eq(moe_last_error(), rm);
    ck_assert_int_eq(rs, MOE_ERR_INVALID_ARG);
    moe_tensor bad_ids = gpu_hnew(MOE_I32, 2, 4, 3, 0), dbad = gpu_dev_like(&bad_ids);
    p.correction_bias = NULL;
    SAME_ERROR(moe_ops_ref.route(&lg, &p, &bad_ids, &w), moe_cuda_route(&dlg, &p, &dbad, &dw));
    moe_cuda_free(&dlg), moe_cuda_free(&dids), moe_cuda_free(&dw), moe_cuda_free(&dbias), moe_cuda_free(&dbad);
    moe_tensor_free(&lg), moe_tensor_free(&ids), moe_tensor_free(&w), moe_tensor_free(&bias), moe_tensor_free(&bad_ids);
}
END_TEST

/* ---- activation -------------------------------------------------------------- */

static const moe_dtype storage[3] = {MOE_F32, MOE_BF16, MOE_F16};

/* _i: act * 3 layouts * 3 input dtypes; the output dtype, the rounding of
 * act(g) and the row_expert use vary with _i. */
START_TEST(activation_matches_reference)
{
    int a = _i / 9, layout = (_i / 3) % 3, di = _i % 3;
    moe_act act = (moe_act)a;
    int gated = moe_act_is_gated(act);
    if (!gated && layout > 0) return; /* the layout is not read */
    uint64_t st = stream_of("gpu_rows_act", _i);
    int64_t P = (_i % 4 == 0) ? 4096 : 301, I = (_i % 4 == 0) ? 768 : 129;
    if (_i % 4 == 0 && di != 1) P = 1024;
    P = gpu_small_cap(P, 301), I = gpu_small_cap(I, 129);
    moe_dtype xd = storage[di], od = storage[(di + _i / 3) % 3];
    moe_tensor x = gpu_hnew(xd, 2, P, gated ? 2 * I : I, 0), out = gpu_hnew(od, 2, P, I, 0);
    ck_assert_int_eq(moe_tensor_fill_normal(&x, 4, st, 0.0f, 4.0f), MOE_OK);
    sprinkle_nonfinite(&x, st + 1, 5);
    int nexp = 5;
    moe_tensor re = gpu_hnew(MOE_I32, 1, P, 0, 0);
    for (int64_t r = 0; r < P; r++) ((int32_t *)re.data)[r] = (int32_t)(moe_rng_u32(6, st, (uint64_t)r) % (nexp + 1)) - 1;
    int use_re = (_i & 1) || act == MOE_ACT_SWIGLU_BIAS;
    moe_tensor va = gpu_hnew(MOE_F32, 1, nexp, 0, 0), vb = gpu_hnew(MOE_F32, 1, nexp, 0, 0), vl = gpu_hnew(MOE_F32, 1, nexp, 0, 0);
    for (int e = 0; e < nexp; e++) {
        ((float *)va.data)[e] = 1.0f + 0.25f * (float)e;
        ((float *)vb.data)[e] = 0.5f * (float)e - 1.0f;
        ((float *)vl.data)[e] = e == 0 ? INFINITY : 2.0f + (float)e;
    }
    moe_act_params p = moe_act_defaults(act, (moe_act_layout)layout);
    p.round_act_to_storage = (_i / 2) & 1;
    if (act == MOE_ACT_SWIGLU_CLAMP && (_i & 2)) p.limit = INFINITY;
    int with_vecs = act == MOE_ACT_SWIGLU_BIAS && (_i % 3 != 1); /* else the defaults 1, 0, +Inf */
    if (with_vecs) p.swiglu_alpha = &va, p.swiglu_beta = (_i & 1) ? &vb : NULL, p.swiglu_limit = &vl;
    ck_assert_msg(moe_ops_ref.activation(&x, use_re ? &re : NULL, &p, &out) == MOE_OK, "%s", moe_last_error());
    moe_tensor dx = gpu_to_dev(&x), dre = gpu_to_dev(&re), dout = gpu_dev_like(&out), dva = gpu_to_dev(&va), dvb = gpu_to_dev(&vb),
               dvl = gpu_to_dev(&vl);
    if (with_vecs) p.swiglu_alpha = &dva, p.swiglu_beta = (_i & 1) ? &dvb : NULL, p.swiglu_limit = &dvl;
    ck_assert_msg(moe_cuda_activation(&dx, use_re ? &dre : NULL, &p, &dout) == MOE_OK, "%s", moe_last_error());
    char what[160];
    snprintf(what, sizeof what, "activation %s %s x %s out %s", moe_act_name(act),
             moe_act_layout_name((moe_act_layout)layout), moe_dtype_get(xd)->name, moe_dtype_get(od)->name);
    gpu_expect_same(what, &out, &dout, 1);
    moe_cuda_free(&dx), moe_cuda_free(&dre), moe_cuda_free(&dout), moe_cuda_free(&dva), moe_cuda_free(&dvb),
        moe_cuda_free(&dvl);
    moe_tensor_free(&x), moe_tensor_free(&out), moe_tensor_free(&re), moe_tensor_free(&va), moe_tensor_free(&vb),
        moe_tensor_free(&vl);
}
END_TEST

START_TEST(activation_bad_input)
{
    moe_tensor x = gpu_hnew(MOE_BF16, 2, 6, 16, 0), out = gpu_hnew(MOE_BF16, 2, 6, 8, 0), re = gpu_hnew(MOE_I32, 1, 6, 0, 0);
    moe_tensor va = gpu_hnew(MOE_F32, 1, 2, 0, 0);
    moe_tensor dx = gpu_to_dev(&x), dout = gpu_dev_like(&out), dva = gpu_to_dev(&va);
    moe_act_params p = moe_act_defaults(MOE_ACT_SWIGLU_BIAS, MOE_LAYOUT_GATE_UP);
    ck_assert_int_eq(moe_cuda_activation(&dx, NULL, &p, &out), MOE_ERR_INVALID_ARG); /* host out */
    ((int32_t *)re.data)[4] = 2; /* no per-expert parameter for expert 2 */
    moe_tensor dre = gpu_to_dev(&re);
    p.swiglu_alpha = &va;
    moe_status rs = moe_ops_ref.activation(&x, &re, &p, &out);
    char rm[512];
    snprintf(rm, sizeof rm, "%s", moe_last_error());
    p.swiglu_alpha = &dva;
    ck_assert_int_eq(rs, MOE_ERR_INVALID_ARG);
    ck_assert_int_eq(moe_cuda_activation(&dx, &dre, &p, &dout), rs);
    ck_assert_str_eq(moe_last_error(), rm);
    ((int32_t *)re.data)[4] = -2;
    moe_cuda_free(&dre);
    dre = gpu_to_dev(&re);
    p = moe_act_defaults(MOE_ACT_SILU, MOE_LAYOUT_GATE_UP);
    SAME_ERROR(moe_ops_ref.activation(&x, &re, &p, &out), moe_cuda_activation(&dx, &dre, &p, &dout));
    p = moe_act_defaults(MOE_ACT_RELU2, MOE_LAYOUT_GATE_UP); /* x [6, 16] is not [P, I] */
    SAME_ERROR(moe_ops_ref.activation(&x, NULL, &p, &out), moe_cuda_activation(&dx, NULL, &p, &dout));
    p = moe_act_defaults(MOE_ACT_SWIGLUOAI, MOE_LAYOUT_INTERLEAVED);
    p.limit = -1.0f;
    SAME_ERROR(moe_ops_ref.activation(&x, NULL, &p, &out), moe_cuda_activation(&dx, NULL, &p, &dout));
    moe_cuda_free(&dx), moe_cuda_free(&dout), moe_cuda_free(&dva), moe_cuda_free(&dre);
    moe_tensor_free(&x), moe_tensor_free(&out), moe_tensor_free(&re), moe_tensor_free(&va);
}
END_TEST

/* ---- weight and reduce -------------------------------------------------------- */

/* _i: 3 sums * 2 weights_on_input * 3 fused dtypes, k and shapes varying. */
START_TEST(war_contiguous_matches_reference)
{
    moe_sum_variant sum = (moe_sum_variant)(_i / 6);
    int woi = (_i / 3) & 1, di = _i % 3;
    static const int ks[4] = {1, 2, 4, 8};
    int k = ks[_i % 4];
    int big = (_i == 1 || _i == 11 || _i == 16) && !gpu_small(); /* small mode: 333 x 200 */
    int64_t M = big ? 4096 : 333, K = big ? 2048 : 200;
    if (big) k = 8 - 4 * (_i == 11);
    uint64_t st = stream_of("gpu_rows_contig", _i);
    moe_dtype fd = storage[di], od = storage[(di + _i / 3) % 3];
    moe_tensor fused = (_i & 1) ? gpu_hnew(fd, 3, M, k, K) : gpu_hnew(fd, 2, M * k, K, 0);
    moe_tensor w = gpu_hnew(MOE_F32, 2, M, k, 0), out = gpu_hnew(od, 2, M, K, 0);
    ck_assert_int_eq(moe_tensor_fill_normal(&fused, 7, st, 0.0f, 1.0f), MOE_OK);
    ck_assert_int_eq(moe_tensor_fill_normal(&w, 8, st, 0.3f, 0.2f), MOE_OK);
    if (!big) sprinkle_nonfinite(&fused, st + 1, 3);
    ck_assert_msg(moe_ops_ref.war_contiguous(&fused, &w, woi, sum, &out) == MOE_OK, "%s", moe_last_error());
    moe_tensor dfused = gpu_to_dev(&fused), dw = gpu_to_dev(&w), dout = gpu_dev_like(&out);
    ck_assert_msg(moe_cuda_war_contiguous(&dfused, &dw, woi, sum, &dout) == MOE_OK, "%s", moe_last_error());
    char what[128];
    snprintf(what, sizeof what, "war_contiguous sum %d woi %d k %d %s -> %s", (int)sum, woi, k,
             moe_dtype_get(fd)->name, moe_dtype_get(od)->name);
    gpu_expect_same(what, &out, &dout, 1);
    moe_cuda_free(&dfused), moe_cuda_free(&dw), moe_cuda_free(&dout);
    moe_tensor_free(&fused), moe_tensor_free(&w), moe_tensor_free(&out);
}
END_TEST

START_TEST(war_noop_matches_reference)
{
    moe_dtype fd = storage[_i / 3], od = storage[_i % 3];
    int64_t M = 1000 + _i, K = gpu_small_cap(2048, 256);
    moe_tensor fused = gpu_hnew(fd, 2, M, K, 0), out = gpu_hnew(od, 2, M, K, 0);
    ck_assert_int_eq(moe_tensor_fill_normal(&fused, 9, stream_of("gpu_rows_noop", _i), 0.0f, 1e4f), MOE_OK);
    sprinkle_nonfinite(&fused, stream_of("gpu_rows_noop", _i) + 1, 3);
    if (fd == MOE_F32) ((float *)fused.data)[0] = 1e30f, ((float *)fused.data)[1] = 1e-41f;
    ck_assert_msg(moe_ops_ref.war_noop(&fused, &out) == MOE_OK, "%s", moe_last_error());
    moe_tensor dfused = gpu_to_dev(&fused), dout = gpu_dev_like(&out);
    ck_assert_msg(moe_cuda_war_noop(&dfused, &dout) == MOE_OK, "%s", moe_last_error());
    char what[96];
    snprintf(what, sizeof what, "war_noop %s -> %s", moe_dtype_get(fd)->name, moe_dtype_get(od)->name);
    gpu_expect_same(what, &out, &dout, fd != od);
    moe_cuda_free(&dfused), moe_cuda_free(&dout);
    moe_tensor_free(&fused), moe_tensor_free(&out);
}
END_TEST

typedef struct {
    int64_t M;
    int k, E, first, L;
    int64_t maxt, K;
    int neg1_pct, distinct, woi;
    moe_dtype fd, od;
} naive_case;

static const naive_case naive_cases[] = {
    {4096, 8, 128, 32, 32, 512, 2048, 0, 1, 0, MOE_BF16, MOE_BF16},
    {512, 4, 32, 8, 8, 512, 96, 10, 0, 0, MOE_F32, MOE_BF16},    /* -1 ids, repeated experts in a row */
    {512, 4, 32, 8, 8, 512, 96, 10, 0, 1, MOE_F16, MOE_F32},
    {1, 8, 8, 0, 8, 1, 64, 0, 1, 0, MOE_F32, MOE_F32},          /* one token */
    {300, 2, 4, 0, 16, 300, 33, 0, 0, 0, MOE_BF16, MOE_F16},     /* local experts no token uses */
    {1000, 1, 1, 0, 1, 1000, 40, 0, 0, 0, MOE_F32, MOE_BF16},     /* every token on one expert */
    {700, 3, 64, 100, 4, 8, 16, 0, 1, 0, MOE_F32, MOE_F32},      /* no token local: zeros */
};
#define N_NAIVE ((int)(sizeof naive_cases / sizeof naive_cases[0]))

START_TEST(war_naive_batched_matches_reference)
{
    naive_case cs = naive_cases[_i];
    cs.M = gpu_small_cap(cs.M, 512), cs.K = gpu_small_cap(cs.K, 96);
    const naive_case *c = &cs;
    uint64_t st = stream_of("gpu_rows_naive", _i);
    moe_tensor ids = gpu_hnew(MOE_I32, 2, c->M, c->k, 0), w = gpu_hnew(MOE_F32, 2, c->M, c->k, 0);
    ck_assert_int_eq(moe_rng_topk_ids((int32_t *)ids.data, c->M, c->k, c->E, 10, st, c->neg1_pct, c->distinct),
                     MOE_OK);
    ck_assert_int_eq(moe_tensor_fill_normal(&w, 11, st, 0.3f, 0.2f), MOE_OK);
    moe_tensor fused = gpu_hnew(c->fd, 3, c->L, c->maxt, c->K), out = gpu_hnew(c->od, 2, c->M, c->K, 0);
    ck_assert_int_eq(moe_tensor_fill_normal(&fused, 12, st, 0.0f, 1.0f), MOE_OK);
    ck_assert_msg(moe_ops_ref.war_naive_batched(&fused, &ids, c->woi ? NULL : &w, c->first, c->woi, &out) == MOE_OK,
                  "%s", moe_last_error());
    moe_tensor dfused = gpu_to_dev(&fused), dids = gpu_to_dev(&ids), dw = gpu_to_dev(&w), dout = gpu_dev_like(&out);
    /* out starts dirty: the stage must write every element */
    ck_assert_int_eq(cudaMemset(dout.data, 0x5A, dout.nbytes), cudaSuccess);
    ck_assert_msg(moe_cuda_war_naive_batched(&dfused, &dids, c->woi ? NULL : &dw, c->first, c->woi, &dout) == MOE_OK,
                  "%s", moe_last_error());
    char what[64];
    snprintf(what, sizeof what, "war_naive_batched case %d", _i);
    gpu_expect_same(what, &out, &dout, 1);
    moe_cuda_free(&dfused), moe_cuda_free(&dids), moe_cuda_free(&dw), moe_cuda_free(&dout);
    moe_tensor_free(&fused), moe_tensor_free(&ids), moe_tensor_free(&w), moe_tensor_free(&out);
}
END_TEST

START_TEST(war_bad_input)
{
    /* naive batched: an expert past max_tokens, found while computing */
    int64_t M = 64, k = 2, K = 8;
    moe_tensor ids = gpu_hnew(MOE_I32, 2, M, k, 0), w = gpu_hnew(MOE_F32, 2, M, k, 0);
    ck_assert_int_eq(moe_rng_topk_ids((int32_t *)ids.data, M, (int)k, 4, 13, 1, 0, 1), MOE_OK);
    moe_tensor fused = gpu_hnew(MOE_F32, 3, 4, 10, K), out = gpu_hnew(MOE_F32, 2, M, K, 0);
    moe_tensor dids = gpu_to_dev(&ids), dw = gpu_to_dev(&w), dfused = gpu_to_dev(&fused), dout = gpu_dev_like(&out);
    SAME_ERROR(moe_ops_ref.war_naive_batched(&fused, &ids, &w, 0, 0, &out),
               moe_cuda_war_naive_batched(&dfused, &dids, &dw, 0, 0, &dout));
    SAME_ERROR(moe_ops_ref.war_naive_batched(&fused, &ids, &w, -1, 0, &out),
               moe_cuda_war_naive_batched(&dfused, &dids, &dw, -1, 0, &dout));
    ck_assert_int_eq(moe_cuda_war_naive_batched(&dfused, &ids, &dw, 0, 0, &dout), MOE_ERR_INVALID_ARG);
    /* contiguous: a bad sum variant, a bad shape, host weights */
    moe_tensor cf = gpu_hnew(MOE_F32, 2, M * k, K, 0), dcf = gpu_to_dev(&cf);
    SAME_ERROR(moe_ops_ref.war_contiguous(&cf, &w, 0, (moe_sum_variant)7, &out),
               moe_cuda_war_contiguous(&dcf, &dw, 0, (moe_sum_variant)7, &dout));
    SAME_ERROR(moe_ops_ref.war_contiguous(&fused, &w, 0, MOE_SUM_AUTO, &out),
               moe_cuda_war_contiguous(&dfused, &dw, 0, MOE_SUM_AUTO, &dout));
    ck_assert_int_eq(moe_cuda_war_contiguous(&dcf, &w, 0, MOE_SUM_AUTO, &dout), MOE_ERR_INVALID_ARG);
    /* noop: shapes differ */
    SAME_ERROR(moe_ops_ref.war_noop(&cf, &out), moe_cuda_war_noop(&dcf, &dout));
    moe_cuda_free(&dids), moe_cuda_free(&dw), moe_cuda_free(&dfused), moe_cuda_free(&dout), moe_cuda_free(&dcf);
    moe_tensor_free(&ids), moe_tensor_free(&w), moe_tensor_free(&fused), moe_tensor_free(&out), moe_tensor_free(&cf);
}
END_TEST

/* ---- finalize_trtllm ------------------------------------------------------------ */

typedef struct {
    int64_t T;
    int k, E, first, nle;
    int64_t K;
    int bias, weights, neg1_pct;
    moe_dtype yd, od;
} fin_case;

static const fin_case fin_cases[] = {
    {4096, 8, 128, 32, 32, 2048, 1, 1, 0, MOE_BF16, MOE_BF16},
    {4096, 8, 128, 0, 128, 2048, 0, 1, 0, MOE_F32, MOE_BF16},
    {513, 4, 16, 4, 8, 100, 1, 0, 5, MOE_F16, MOE_F32},
    {1, 8, 8, 0, 8, 64, 1, 1, 0, MOE_F32, MOE_F16},
    {200, 2, 64, 60, 4, 48, 1, 1, 0, MOE_BF16, MOE_F32}, /* most tokens with no local expert: zeros */
};
#define N_FIN ((int)(sizeof fin_cases / sizeof fin_cases[0]))

START_TEST(finalize_trtllm_matches_reference)
{
    fin_case cs = fin_cases[_i];
    cs.T = gpu_small_cap(cs.T, 513), cs.K = gpu_small_cap(cs.K, 100);
    const fin_case *c = &cs;
    uint64_t st = stream_of("gpu_rows_fin", _i);
    int64_t T = c->T, k = c->k, P = T * k;
    moe_tensor ids = gpu_hnew(MOE_I32, 2, T, k, 0), w = gpu_hnew(MOE_F32, 2, T, k, 0), map = gpu_hnew(MOE_I32, 1, P, 0, 0);
    ck_assert_int_eq(moe_rng_topk_ids((int32_t *)ids.data, T, c->k, c->E, 14, st, c->neg1_pct, 1), MOE_OK);
    ck_assert_int_eq(moe_tensor_fill_normal(&w, 15, st, 0.3f, 0.2f), MOE_OK);
    /* a permutation of the P rows (Fisher-Yates on the seeded stream); a
     * slot with no local expert may carry any value: -1 there */
    int32_t *pr = (int32_t *)map.data;
    for (int64_t i = 0; i < P; i++) pr[i] = (int32_t)i;
    for (int64_t i = P - 1; i > 0; i--) {
        int64_t j = moe_rng_u32(16, st, (uint64_t)i) % (uint64_t)(i + 1);
        int32_t tmp = pr[i];
        pr[i] = pr[j], pr[j] = tmp;
    }
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < k; j++) {
            int e = ((int32_t *)ids.data)[t * k + j] - c->first;
            if (e < 0 || e >= c->nle) pr[j * T + t] = -1;
        }
    moe_tensor y = gpu_hnew(c->yd, 2, P, c->K, 0), bias = gpu_hnew(MOE_F32, 2, c->nle, c->K, 0), out = gpu_hnew(c->od, 2, T, c->K, 0);
    ck_assert_int_eq(moe_tensor_fill_normal(&y, 17, st, 0.0f, 1.0f), MOE_OK);
    ck_assert_int_eq(moe_tensor_fill_normal(&bias, 18, st, 0.0f, 0.1f), MOE_OK);
    if (_i == 2) sprinkle_nonfinite(&y, st + 1, 3);
    ck_assert_msg(moe_ops_ref.finalize_trtllm(&y, &map, &ids, c->weights ? &w : NULL, c->bias ? &bias : NULL, c->first,
                                              c->nle, &out) == MOE_OK,
                  "%s", moe_last_error());
    moe_tensor dy = gpu_to_dev(&y), dmap = gpu_to_dev(&map), dids = gpu_to_dev(&ids), dw = gpu_to_dev(&w), dbias = gpu_to_dev(&bias),
               dout = gpu_dev_like(&out);
    ck_assert_int_eq(cudaMemset(dout.data, 0x5A, dout.nbytes), cudaSuccess);
    ck_assert_msg(moe_cuda_finalize_trtllm(&dy, &dmap, &dids, c->weights ? &dw : NULL, c->bias ? &dbias : NULL,
                                           c->first, c->nle, &dout) == MOE_OK,
                  "%s", moe_last_error());
    char what[64];
    snprintf(what, sizeof what, "finalize_trtllm case %d", _i);
    gpu_expect_same(what, &out, &dout, 1);
    /* bad input: a local slot whose row is out of range (the check's map scan) */
    int64_t t0 = 0, j0 = -1;
    for (int64_t j = 0; j < k && j0 < 0; j++)
        if (pr[j * T + t0] >= 0) j0 = j;
    if (j0 >= 0) {
        pr[j0 * T + t0] = (int32_t)P;
        moe_cuda_free(&dmap);
        dmap = gpu_to_dev(&map);
        SAME_ERROR(moe_ops_ref.finalize_trtllm(&y, &map, &ids, &w, NULL, c->first, c->nle, &out),
                   moe_cuda_finalize_trtllm(&dy, &dmap, &dids, &dw, NULL, c->first, c->nle, &dout));
    }
    SAME_ERROR(moe_ops_ref.finalize_trtllm(&y, &map, &ids, &w, &bias, c->first, c->nle + 1, &out),
               moe_cuda_finalize_trtllm(&dy, &dmap, &dids, &dw, &dbias, c->first, c->nle + 1, &dout));
    ck_assert_int_eq(moe_cuda_finalize_trtllm(&dy, &dmap, &dids, &dw, &bias, c->first, c->nle, &dout),
                     MOE_ERR_INVALID_ARG);
    moe_cuda_free(&dy), moe_cuda_free(&dmap), moe_cuda_free(&dids), moe_cuda_free(&dw), moe_cuda_free(&dbias),
        moe_cuda_free(&dout);
    moe_tensor_free(&y), moe_tensor_free(&map), moe_tensor_free(&ids), moe_tensor_free(&w), moe_tensor_free(&bias),
        moe_tensor_free(&out);
}
END_TEST

static void add_tests(Suite *s)
{
    TCase *tc = gpu_tcase(s, "rows", 300);
    tcase_add_loop_test(tc, route_matches_reference, 0, N_ROUTE);
    tcase_add_test(tc, route_bad_input);
    tcase_add_loop_test(tc, activation_matches_reference, 0, MOE_ACT_COUNT * 9);
    tcase_add_test(tc, activation_bad_input);
    tcase_add_loop_test(tc, war_contiguous_matches_reference, 0, 18);
    tcase_add_loop_test(tc, war_noop_matches_reference, 0, 9);
    tcase_add_loop_test(tc, war_naive_batched_matches_reference, 0, N_NAIVE);
    tcase_add_test(tc, war_bad_input);
    tcase_add_loop_test(tc, finalize_trtllm_matches_reference, 0, N_FIN);
}

int main(void)
{
    return gpu_test_main("check_gpu_rows", "gpu_rows", add_tests);
}
