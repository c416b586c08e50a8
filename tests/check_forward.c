/* moe_ref_forward: composing the stage references reproduces it bit for
 * bit where the rounding points coincide; expert-parallel partials add up;
 * routing inside equals routing outside; weights on the input; errors. */
#include <check.h>
#include <stdlib.h>
#include "moe/act.h"
#include "moe/forward.h"
#include "moe/gemm.h"
#include "moe/permute.h"
#include "moe/reduce.h"
#include "moe/format.h"
#include "moe/rng.h"
#include "moe/slot_bound.h"
#include "test_tensors.h"

enum { M = 9, H = 48, I = 40, E = 6, K = 2 };

typedef struct {
    moe_tensor x, w1, w2, ids, w, out;
} prob;

static void make(prob *p, moe_dtype dt, int k)
{
    p->x = tt_new(dt, 2, M, H, 0), p->w1 = tt_new(dt, 3, E, 2 * I, H), p->w2 = tt_new(dt, 3, E, H, I);
    p->ids = tt_new(MOE_I32, 2, M, k, 0), p->w = tt_new(MOE_F32, 2, M, k, 0), p->out = tt_new(dt, 2, M, H, 0);
    moe_tensor *ts[3] = {&p->x, &p->w1, &p->w2};
    for (int i = 0; i < 3; i++) {
        int64_t n = moe_tensor_numel(ts[i]);
        float *f = malloc(sizeof(float) * (size_t)n);
        moe_rng_fill_normal(f, (size_t)n, 5, (uint64_t)i, 0, 0.0f, i ? 0.2f : 1.0f);
        moe_encode_array(dt, f, (size_t)n, MOE_POLICY_IEEE_RNE, ts[i]->data, NULL);
        if (dt == MOE_F32) memcpy(ts[i]->data, f, sizeof(float) * (size_t)n);
        free(f);
    }
    for (int t = 0; t < M; t++)
        for (int j = 0; j < k; j++) { /* distinct experts per token */
            ((int32_t *)p->ids.data)[t * k + j] = (int32_t)((t * 7 + j * 3 + (int)(moe_rng_u32(1, 9, t) % 2)) % E);
            ((float *)p->w.data)[t * k + j] = 0.25f + 0.5f * moe_rng_uniform(2, 9, (uint64_t)(t * k + j));
        }
}

static void unmake(prob *p)
{
    moe_tensor *ts[6] = {&p->x, &p->w1, &p->w2, &p->ids, &p->w, &p->out};
    for (int i = 0; i < 6; i++) moe_tensor_free(ts[i]);
}

static moe_forward_args fargs(prob *p, moe_scheme sc)
{
    moe_forward_args a;
    memset(&a, 0, sizeof a);
    a.scheme = sc, a.act = moe_act_defaults(MOE_ACT_SILU, MOE_LAYOUT_GATE_UP);
    a.topk_ids = &p->ids, a.topk_weights = &p->w, a.w1 = &p->w1, a.w2 = &p->w2;
    return a;
}

/* f32: replicate rows (permute_rows) -> GEMM1 -> silu -> GEMM2 ->
 * Contiguous weight-and-reduce with the fp32 sum equals the oracle. */
START_TEST(stages_compose_to_forward_f32)
{
    prob p;
    make(&p, MOE_F32, K);
    moe_forward_args a = fargs(&p, MOE_SCHEME_F32);
    ck_assert_msg(moe_ref_forward(&a, &p.x, &p.out) == MOE_OK, "%s", moe_last_error());
    int32_t src[M * K], rev[M * K];
    for (int i = 0; i < M * K; i++) src[i] = i / K, rev[i] = ((int32_t *)p.ids.data)[i];
    moe_tensor s = tt_i32(src, M * K), re = tt_i32(rev, M * K);
    moe_tensor xr = tt_new(MOE_F32, 2, M * K, H, 0), h1 = tt_new(MOE_F32, 2, M * K, 2 * I, 0),
               h2 = tt_new(MOE_F32, 2, M * K, I, 0), y = tt_new(MOE_F32, 2, M * K, H, 0),
               o = tt_new(MOE_F32, 2, M, H, 0);
    ck_assert_int_eq(moe_ref_permute_rows(&p.x, &s, &xr), MOE_OK);
    moe_gemm_args g1 = {MOE_SCHEME_F32, &xr, NULL, NULL, &p.w1, NULL, NULL, &re, NULL};
    ck_assert_int_eq(moe_ref_grouped_gemm(&g1, &h1), MOE_OK);
    ck_assert_int_eq(moe_ref_activation(&h1, &re, &a.act, &h2), MOE_OK);
    moe_gemm_args g2 = {MOE_SCHEME_F32, &h2, NULL, NULL, &p.w2, NULL, NULL, &re, NULL};
    ck_assert_int_eq(moe_ref_grouped_gemm(&g2, &y), MOE_OK);
    ck_assert_int_eq(moe_ref_war_contiguous(&y, &p.w, 0, MOE_SUM_FP32, &o), MOE_OK);
    ck_assert_int_eq(memcmp(o.data, p.out.data, o.nbytes), 0);
    moe_tensor_free(&s), moe_tensor_free(&re), moe_tensor_free(&xr), moe_tensor_free(&h1);
    moe_tensor_free(&h2), moe_tensor_free(&y), moe_tensor_free(&o);
    unmake(&p);
}
END_TEST

/* With top-1 routing each token's result comes from one rank, so the sum
 * of the ranks' partial outputs is the full output exactly. */
START_TEST(expert_parallel_partials_add_up)
{
    prob p;
    make(&p, MOE_BF16, 1);
    moe_forward_args a = fargs(&p, MOE_SCHEME_BF16);
    ck_assert_int_eq(moe_ref_forward(&a, &p.x, &p.out), MOE_OK);
    for (int R = 2; R <= 6; R += 1) {
        if (E % R) continue;
        moe_tensor part = tt_new(MOE_BF16, 2, M, H, 0);
        float *sum = calloc(M * H, sizeof(float));
        for (int r = 0; r < R; r++) {
            a.first_expert = r * (E / R), a.num_local_experts = E / R;
            ck_assert_int_eq(moe_ref_forward(&a, &p.x, &part), MOE_OK);
            for (int i = 0; i < M * H; i++) sum[i] += moe_bf16_to_f32(((uint16_t *)part.data)[i]);
        }
        for (int i = 0; i < M * H; i++)
            ck_assert_msg(sum[i] == moe_bf16_to_f32(((uint16_t *)p.out.data)[i]), "R=%d element %d", R, i);
        free(sum);
        moe_tensor_free(&part);
    }
    unmake(&p);
}
END_TEST

START_TEST(routing_inside_equals_outside)
{
    prob p;
    make(&p, MOE_BF16, K);
    moe_tensor logits = tt_new(MOE_F32, 2, M, E, 0);
    moe_rng_fill_normal(logits.data, M * E, 3, 3, 0, 0.0f, 1.0f);
    moe_route_params rp;
    memset(&rp, 0, sizeof rp);
    rp.method = MOE_ROUTE_SOFTMAX_TOPK, rp.topk = K, rp.renormalize = 1, rp.routed_scaling_factor = 1.0f;
    ck_assert_int_eq(moe_ref_route(&logits, &rp, &p.ids, &p.w), MOE_OK);
    moe_forward_args a = fargs(&p, MOE_SCHEME_BF16);
    ck_assert_int_eq(moe_ref_forward(&a, &p.x, &p.out), MOE_OK);
    moe_tensor o2 = tt_new(MOE_BF16, 2, M, H, 0);
    a.topk_ids = a.topk_weights = NULL, a.route = &rp, a.router_logits = &logits;
    ck_assert_int_eq(moe_ref_forward(&a, &p.x, &o2), MOE_OK);
    ck_assert_int_eq(memcmp(o2.data, p.out.data, o2.nbytes), 0);
    moe_tensor_free(&logits), moe_tensor_free(&o2);
    unmake(&p);
}
END_TEST

/* Weights on the input (top-1): x is scaled first, output unweighted; for
 * f32 and a linear activation this equals weighting the output up to
 * rounding, and bit for bit when the weight is a power of two. */
START_TEST(weights_on_input)
{
    prob p;
    make(&p, MOE_F32, 1);
    for (int t = 0; t < M; t++) ((float *)p.w.data)[t] = 0.5f;
    moe_forward_args a = fargs(&p, MOE_SCHEME_F32);
    a.act = moe_act_defaults(MOE_ACT_IDENTITY, MOE_LAYOUT_GATE_UP);
    moe_tensor w1 = tt_new(MOE_F32, 3, E, I, H);
    memcpy(w1.data, p.w1.data, w1.nbytes);
    a.w1 = &w1;
    ck_assert_int_eq(moe_ref_forward(&a, &p.x, &p.out), MOE_OK);
    moe_tensor o2 = tt_new(MOE_F32, 2, M, H, 0);
    a.weights_on_input = 1;
    ck_assert_int_eq(moe_ref_forward(&a, &p.x, &o2), MOE_OK);
    ck_assert_int_eq(memcmp(o2.data, p.out.data, o2.nbytes), 0);
    moe_tensor_free(&w1), moe_tensor_free(&o2);
    unmake(&p);
}
END_TEST

/* Every scheme runs end to end on a small problem; quantized outputs stay
 * near the f32 result (a sanity bound, the harness derives real bounds). */
START_TEST(every_scheme_runs)
{
    moe_scheme sc = (moe_scheme)_i;
    enum { Hs = 256, Is = 128 };
    moe_quant_spec ws, as;
    ck_assert_int_eq(moe_scheme_spec(sc, MOE_OPERAND_WEIGHT, &ws), MOE_OK);
    ck_assert_int_eq(moe_scheme_spec(sc, MOE_OPERAND_ACT, &as), MOE_OK);
    moe_dtype xd = as.gran == MOE_GRAN_NONE ? as.elem : MOE_BF16;
    moe_tensor xf = tt_new(MOE_F32, 2, 4, Hs, 0), x = tt_new(xd, 2, 4, Hs, 0), out = tt_new(xd, 2, 4, Hs, 0);
    moe_rng_fill_normal(xf.data, 4 * Hs, 8, 1, 0, 0.0f, 1.0f);
    moe_encode_array(xd, xf.data, 4 * Hs, MOE_POLICY_IEEE_RNE, x.data, NULL);
    if (xd == MOE_F32) memcpy(x.data, xf.data, x.nbytes);
    int64_t s1[3] = {E, 2 * Is, Hs}, s2[3] = {E, Hs, Is};
    moe_tensor f1 = tt_new(MOE_F32, 3, E, 2 * Is, Hs), f2 = tt_new(MOE_F32, 3, E, Hs, Is);
    moe_rng_fill_normal(f1.data, (size_t)moe_tensor_numel(&f1), 8, 2, 0, 0.0f, 0.1f);
    moe_rng_fill_normal(f2.data, (size_t)moe_tensor_numel(&f2), 8, 3, 0, 0.0f, 0.1f);
    moe_tensor q1, sc1, g1, q2, sc2, g2;
    ck_assert_int_eq(moe_quant_alloc(&ws, 3, s1, &q1, &sc1, &g1), MOE_OK);
    ck_assert_int_eq(moe_quant_alloc(&ws, 3, s2, &q2, &sc2, &g2), MOE_OK);
    ck_assert_int_eq(moe_ref_quantize(&ws, &f1, NULL, &q1, ws.gran ? &sc1 : NULL, ws.use_global_scale ? &g1 : NULL), MOE_OK);
    ck_assert_int_eq(moe_ref_quantize(&ws, &f2, NULL, &q2, ws.gran ? &sc2 : NULL, ws.use_global_scale ? &g2 : NULL), MOE_OK);
    const int32_t iv[8] = {0, 3, 5, 1, 2, 4, 3, 0};
    const float wv[8] = {0.6f, 0.4f, 0.5f, 0.5f, 0.9f, 0.1f, 0.3f, 0.7f};
    moe_tensor ids = tt_2d(MOE_I32, iv, 4, 2), w = tt_2d(MOE_F32, wv, 4, 2);
    moe_forward_args a;
    memset(&a, 0, sizeof a);
    a.scheme = sc, a.act = moe_act_defaults(MOE_ACT_SILU, MOE_LAYOUT_GATE_UP);
    a.topk_ids = &ids, a.topk_weights = &w;
    a.w1 = &q1, a.w1_scale = ws.gran ? &sc1 : NULL, a.w1_global = ws.use_global_scale ? &g1 : NULL;
    a.w2 = &q2, a.w2_scale = ws.gran ? &sc2 : NULL, a.w2_global = ws.use_global_scale ? &g2 : NULL;
    ck_assert_msg(moe_ref_forward(&a, &x, &out) == MOE_OK, "%s: %s", moe_scheme_name(sc), moe_last_error());
    int finite = 1;
    for (int i = 0; i < 4 * Hs; i++) {
        float v;
        moe_decode_array(xd, (uint8_t *)out.data + (size_t)i * moe_dtype_row_bytes(xd, 1), 1, &v);
        if (xd == MOE_F32) v = ((float *)out.data)[i];
        finite &= v - v == 0.0f;
    }
    ck_assert_msg(finite, "%s: non-finite output", moe_scheme_name(sc));
    moe_tensor *all[] = {&xf, &x, &out, &f1, &f2, &q1, &sc1, &g1, &q2, &sc2, &g2, &ids, &w};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) moe_tensor_free(all[i]);
}
END_TEST

/* The quantization domains of dynamic per-tensor activation scales. With
 * top-1 routing, a1 and a2 per expert equal running each expert's tokens
 * as a problem of their own with the default domains (its rows are then
 * all rows); with every token on one expert the domains coincide; and on
 * data whose experts see rows of different magnitudes they differ. */
START_TEST(quant_domains)
{
    enum { Mq = 8, Hq = 64, Iq = 32, Eq = 3 };
    moe_scheme sc = MOE_SCHEME_FP8_WTENSOR_ATENSOR;
    moe_quant_spec ws;
    ck_assert_int_eq(moe_scheme_spec(sc, MOE_OPERAND_WEIGHT, &ws), MOE_OK);
    moe_tensor xf = tt_new(MOE_F32, 2, Mq, Hq, 0), x = tt_new(MOE_BF16, 2, Mq, Hq, 0);
    moe_rng_fill_normal(xf.data, Mq * Hq, 12, 1, 0, 0.0f, 1.0f);
    for (int t = 0; t < Mq; t++) /* token t goes to expert t % 3; its rows are scaled by 1, 4, 16 */
        for (int c = 0; c < Hq; c++) ((float *)xf.data)[t * Hq + c] *= (float)(1 << (2 * (t % Eq)));
    moe_encode_array(MOE_BF16, xf.data, Mq * Hq, MOE_POLICY_IEEE_RNE, x.data, NULL);
    int64_t s1[3] = {Eq, 2 * Iq, Hq}, s2[3] = {Eq, Hq, Iq};
    moe_tensor f1 = tt_new(MOE_F32, 3, Eq, 2 * Iq, Hq), f2 = tt_new(MOE_F32, 3, Eq, Hq, Iq), q1, c1, g1, q2, c2, g2;
    moe_rng_fill_normal(f1.data, (size_t)moe_tensor_numel(&f1), 12, 2, 0, 0.0f, 0.1f);
    moe_rng_fill_normal(f2.data, (size_t)moe_tensor_numel(&f2), 12, 3, 0, 0.0f, 0.1f);
    ck_assert_int_eq(moe_quant_alloc(&ws, 3, s1, &q1, &c1, &g1), MOE_OK);
    ck_assert_int_eq(moe_quant_alloc(&ws, 3, s2, &q2, &c2, &g2), MOE_OK);
    ck_assert_int_eq(moe_ref_quantize(&ws, &f1, NULL, &q1, &c1, NULL), MOE_OK);
    ck_assert_int_eq(moe_ref_quantize(&ws, &f2, NULL, &q2, &c2, NULL), MOE_OK);
    moe_tensor ids = tt_new(MOE_I32, 2, Mq, 1, 0), w = tt_new(MOE_F32, 2, Mq, 1, 0);
    for (int t = 0; t < Mq; t++) ((int32_t *)ids.data)[t] = t % Eq, ((float *)w.data)[t] = 0.5f + 0.0625f * t;
    moe_forward_args a;
    memset(&a, 0, sizeof a);
    a.scheme = sc, a.act = moe_act_defaults(MOE_ACT_SILU, MOE_LAYOUT_GATE_UP);
    a.topk_ids = &ids, a.topk_weights = &w, a.w1 = &q1, a.w1_scale = &c1, a.w2 = &q2, a.w2_scale = &c2;
    moe_tensor o_def = tt_new(MOE_BF16, 2, Mq, Hq, 0), o = tt_new(MOE_BF16, 2, Mq, Hq, 0);
    ck_assert_int_eq(moe_ref_forward(&a, &x, &o_def), MOE_OK);
    a.a1_domain = MOE_QDOM_ALL_ROWS, a.a2_domain = MOE_QDOM_PER_EXPERT; /* the defaults, named */
    ck_assert_int_eq(moe_ref_forward(&a, &x, &o), MOE_OK);
    ck_assert_mem_eq(o.data, o_def.data, o.nbytes);
    a.a1_domain = MOE_QDOM_PER_EXPERT; /* top-1: each expert's tokens on their own */
    ck_assert_int_eq(moe_ref_forward(&a, &x, &o), MOE_OK);
    ck_assert_int_ne(memcmp(o.data, o_def.data, o.nbytes), 0);
    for (int e = 0; e < Eq; e++) {
        int n = 0;
        for (int t = e; t < Mq; t += Eq) n++;
        moe_tensor xs = tt_new(MOE_BF16, 2, n, Hq, 0), os = tt_new(MOE_BF16, 2, n, Hq, 0);
        moe_tensor is = tt_new(MOE_I32, 2, n, 1, 0), wsub = tt_new(MOE_F32, 2, n, 1, 0);
        for (int t = e, r = 0; t < Mq; t += Eq, r++) {
            memcpy((uint16_t *)xs.data + r * Hq, (uint16_t *)x.data + t * Hq, Hq * 2);
            ((int32_t *)is.data)[r] = e, ((float *)wsub.data)[r] = ((float *)w.data)[t];
        }
        moe_forward_args b = a;
        b.topk_ids = &is, b.topk_weights = &wsub, b.a1_domain = b.a2_domain = MOE_QDOM_DEFAULT;
        ck_assert_int_eq(moe_ref_forward(&b, &xs, &os), MOE_OK);
        for (int t = e, r = 0; t < Mq; t += Eq, r++)
            ck_assert_mem_eq((uint16_t *)o.data + t * Hq, (uint16_t *)os.data + r * Hq, Hq * 2);
        moe_tensor_free(&xs), moe_tensor_free(&os), moe_tensor_free(&is), moe_tensor_free(&wsub);
    }
    a.a1_domain = MOE_QDOM_DEFAULT, a.a2_domain = MOE_QDOM_ALL_ROWS; /* one a2 scale: differs */
    ck_assert_int_eq(moe_ref_forward(&a, &x, &o), MOE_OK);
    ck_assert_int_ne(memcmp(o.data, o_def.data, o.nbytes), 0);
    for (int t = 0; t < Mq; t++) ((int32_t *)ids.data)[t] = 1; /* one expert: the domains coincide */
    a.a1_domain = a.a2_domain = MOE_QDOM_DEFAULT;
    ck_assert_int_eq(moe_ref_forward(&a, &x, &o_def), MOE_OK);
    a.a1_domain = MOE_QDOM_PER_EXPERT, a.a2_domain = MOE_QDOM_ALL_ROWS;
    ck_assert_int_eq(moe_ref_forward(&a, &x, &o), MOE_OK);
    ck_assert_mem_eq(o.data, o_def.data, o.nbytes);
    a.a1_domain = (moe_qdomain)7;
    ck_assert_int_eq(moe_ref_forward(&a, &x, &o), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "a1_domain"));
    moe_tensor *all[] = {&xf, &x, &f1, &f2, &q1, &c1, &g1, &q2, &c2, &g2, &ids, &w, &o_def, &o};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) moe_tensor_free(all[i]);
}
END_TEST

/* slot_rows hands out step 7's rows: they equal the one-hot read-back of
 * moe_slot_read (the identity the harness's bounds rest on). */
START_TEST(slot_rows_equal_read_back)
{
    prob p;
    make(&p, MOE_BF16, K);
    moe_forward_args a = fargs(&p, MOE_SCHEME_BF16);
    moe_tensor rows = tt_new(MOE_BF16, 2, M * K, H, 0), y[K];
    a.slot_rows = &rows;
    ck_assert_int_eq(moe_ref_forward(&a, &p.x, &p.out), MOE_OK);
    a.slot_rows = NULL;
    ck_assert_int_eq(moe_slot_read(&a, &p.x, K, y), MOE_OK);
    int differ = 0;
    for (int t = 0; t < M; t++)
        for (int j = 0; j < K; j++)
            differ += memcmp((uint16_t *)rows.data + (t * K + j) * H, (uint16_t *)y[j].data + t * H, H * 2) != 0;
    ck_assert_int_eq(differ, 0);
    moe_tensor bad = tt_new(MOE_BF16, 2, M * K, H + 1, 0);
    a.slot_rows = &bad;
    ck_assert_int_eq(moe_ref_forward(&a, &p.x, &p.out), MOE_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "slot_rows"));
    moe_tensor_free(&bad), moe_tensor_free(&rows);
    for (int j = 0; j < K; j++) moe_tensor_free(&y[j]);
    unmake(&p);
}
END_TEST

START_TEST(errors)
{
    prob p;
    make(&p, MOE_BF16, K);
    moe_forward_args a = fargs(&p, MOE_SCHEME_BF16);
    ck_assert_int_eq(moe_ref_forward(NULL, &p.x, &p.out), MOE_ERR_NULL);
    a.weights_on_input = 1;
    ck_assert_int_eq(moe_ref_forward(&a, &p.x, &p.out), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "weights_on_input"));
    a.weights_on_input = 0;
    ((int32_t *)p.ids.data)[3] = E;
    ck_assert_int_eq(moe_ref_forward(&a, &p.x, &p.out), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "topk_ids[3]"));
    ((int32_t *)p.ids.data)[3] = 0;
    a.first_expert = 4, a.num_local_experts = 4;
    ck_assert_int_eq(moe_ref_forward(&a, &p.x, &p.out), MOE_ERR_INVALID_ARG);
    a.first_expert = a.num_local_experts = 0;
    a.act = moe_act_defaults(MOE_ACT_RELU2, MOE_LAYOUT_GATE_UP); /* non-gated needs w1 [E, I, H] */
    ck_assert_int_eq(moe_ref_forward(&a, &p.x, &p.out), MOE_ERR_SHAPE);
    a.act = moe_act_defaults(MOE_ACT_SILU, MOE_LAYOUT_GATE_UP);
    a.topk_ids = NULL;
    ck_assert_int_eq(moe_ref_forward(&a, &p.x, &p.out), MOE_ERR_NULL);
    a.topk_ids = &p.ids;
    a.scheme = MOE_SCHEME_F32; /* x and weights are bf16 */
    ck_assert_int_eq(moe_ref_forward(&a, &p.x, &p.out), MOE_ERR_DTYPE);
    /* M = 0 is an empty problem */
    moe_tensor x0 = tt_new(MOE_BF16, 2, 0, H, 0), o0 = tt_new(MOE_BF16, 2, 0, H, 0), i0 = tt_new(MOE_I32, 2, 0, K, 0),
               w0 = tt_new(MOE_F32, 2, 0, K, 0);
    a.scheme = MOE_SCHEME_BF16, a.topk_ids = &i0, a.topk_weights = &w0;
    ck_assert_int_eq(moe_ref_forward(&a, &x0, &o0), MOE_OK);
    moe_tensor_free(&x0), moe_tensor_free(&o0), moe_tensor_free(&i0), moe_tensor_free(&w0);
    unmake(&p);
}
END_TEST

static Suite *forward_suite(void)
{
    Suite *s = suite_create("forward");
    TCase *tc = tcase_create("oracle");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, stages_compose_to_forward_f32);
    tcase_add_test(tc, expert_parallel_partials_add_up);
    tcase_add_test(tc, routing_inside_equals_outside);
    tcase_add_test(tc, weights_on_input);
    tcase_add_loop_test(tc, every_scheme_runs, 0, MOE_SCHEME_COUNT);
    tcase_add_test(tc, quant_domains);
    tcase_add_test(tc, slot_rows_equal_read_back);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(forward_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
