/* Routing: hand-checked examples of every method, ties, NaN/Inf logits,
 * grouped top-k with and without bias, thread independence, errors. */
#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include "moe/rng.h"
#include "moe/route.h"
#include "test_tensors.h"

static moe_route_params params(moe_route_method m, int k, int renorm)
{
    moe_route_params p;
    memset(&p, 0, sizeof p);
    p.method = m, p.topk = k, p.renormalize = renorm, p.routed_scaling_factor = 1.0f;
    return p;
}

/* Runs one row of logits; ids/weights returned in out arrays. */
static moe_status route1(const float *logits, int E, const moe_route_params *p, int32_t *ids, float *w)
{
    moe_tensor l = tt_2d(MOE_F32, logits, 1, E), ti = tt_new(MOE_I32, 2, 1, p->topk, 0),
               tw = tt_new(MOE_F32, 2, 1, p->topk, 0);
    moe_status s = moe_ref_route(&l, p, &ti, &tw);
    memcpy(ids, ti.data, sizeof(int32_t) * p->topk);
    memcpy(w, tw.data, sizeof(float) * p->topk);
    moe_tensor_free(&l), moe_tensor_free(&ti), moe_tensor_free(&tw);
    return s;
}

#define NEAR(a, b) ck_assert_msg(fabs((double)(a) - (double)(b)) <= 4e-7 * fabs((double)(b)) + 1e-30, "%.9g vs %.9g", (double)(a), (double)(b))

START_TEST(softmax_topk)
{
    const float x[4] = {1.0f, 2.0f, 3.0f, 0.0f};
    double z = exp(1) + exp(2) + exp(3) + exp(0);
    int32_t ids[2];
    float w[2];
    moe_route_params p = params(MOE_ROUTE_SOFTMAX_TOPK, 2, 0);
    ck_assert_int_eq(route1(x, 4, &p, ids, w), MOE_OK);
    ck_assert(ids[0] == 2 && ids[1] == 1);
    NEAR(w[0], exp(3) / z);
    NEAR(w[1], exp(2) / z);
    p.renormalize = 1;
    ck_assert_int_eq(route1(x, 4, &p, ids, w), MOE_OK);
    NEAR(w[0], exp(3) / (exp(3) + exp(2)));
    NEAR(w[0] + w[1], 1.0);
    p.routed_scaling_factor = 2.5f;
    ck_assert_int_eq(route1(x, 4, &p, ids, w), MOE_OK);
    NEAR(w[0], 2.5 * exp(3) / (exp(3) + exp(2)));
}
END_TEST

START_TEST(ties_go_to_lower_id)
{
    const float x[5] = {0.5f, 0.7f, 0.7f, 0.1f, 0.7f};
    int32_t ids[3];
    float w[3];
    moe_route_params p = params(MOE_ROUTE_SOFTMAX_TOPK, 3, 0);
    ck_assert_int_eq(route1(x, 5, &p, ids, w), MOE_OK);
    ck_assert(ids[0] == 1 && ids[1] == 2 && ids[2] == 4);
    p.method = MOE_ROUTE_SIGMOID_TOPK;
    ck_assert_int_eq(route1(x, 5, &p, ids, w), MOE_OK);
    ck_assert(ids[0] == 1 && ids[1] == 2 && ids[2] == 4);
    NEAR(w[0], 1.0 / (1.0 + exp(-0.7f)));
}
END_TEST

/* vLLM topk_softmax: a NaN (or +Inf) logit poisons the row sum, every
 * probability becomes NaN and is replaced by 0; ties then pick ids 0..k-1.
 * Renormalizing divides by 1 since the sum is 0. */
START_TEST(nan_and_inf_logits)
{
    float x[4] = {1.0f, NAN, 3.0f, 0.0f};
    int32_t ids[2];
    float w[2];
    moe_route_params p = params(MOE_ROUTE_SOFTMAX_TOPK, 2, 1);
    ck_assert_int_eq(route1(x, 4, &p, ids, w), MOE_OK);
    ck_assert(ids[0] == 0 && ids[1] == 1 && w[0] == 0.0f && w[1] == 0.0f);
    x[1] = INFINITY;
    ck_assert_int_eq(route1(x, 4, &p, ids, w), MOE_OK);
    ck_assert(w[0] == 0.0f && w[1] == 0.0f);
    /* sigmoid scores are per element: only the NaN expert scores 0 */
    x[1] = NAN;
    p.method = MOE_ROUTE_SIGMOID_TOPK;
    ck_assert_int_eq(route1(x, 4, &p, ids, w), MOE_OK);
    ck_assert(ids[0] == 2 && ids[1] == 0);
    x[1] = -INFINITY;
    ck_assert_int_eq(route1(x, 4, &p, ids, w), MOE_OK);
    ck_assert(ids[0] == 2 && ids[1] == 0);
}
END_TEST

START_TEST(correction_bias_selects_only)
{
    const float x[3] = {0.0f, 0.1f, 0.2f}, bv[3] = {1.0f, 0.0f, 0.0f};
    moe_tensor bias = tt_new(MOE_F32, 1, 3, 0, 0);
    memcpy(bias.data, bv, sizeof bv);
    int32_t ids[1];
    float w[1];
    moe_route_params p = params(MOE_ROUTE_SIGMOID_TOPK, 1, 0);
    p.correction_bias = &bias;
    ck_assert_int_eq(route1(x, 3, &p, ids, w), MOE_OK);
    ck_assert_int_eq(ids[0], 0);
    NEAR(w[0], 0.5); /* unbiased sigmoid(0) */
    ((float *)bias.data)[1] = NAN;
    ck_assert_int_eq(route1(x, 3, &p, ids, w), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "correction_bias[1]"));
    moe_tensor_free(&bias);
}
END_TEST

/* E=8 in 4 groups of 2. Group 0 = {0.9, 0}, group 1 = {0.5, 0.5}: the max
 * rule prefers group 0, the top-2 sum (with a bias, even a zero one)
 * prefers group 1. */
START_TEST(grouped_topk)
{
    const float sc[8] = {0.9f, 0.0f, 0.5f, 0.5f, 0.1f, 0.2f, 0.3f, 0.0f};
    float x[8];
    for (int e = 0; e < 8; e++) x[e] = logf(sc[e] / (1.0f - sc[e] + 1e-30f)); /* sigmoid^-1 */
    x[1] = x[7] = -30.0f;
    int32_t ids[3];
    float w[3];
    moe_route_params p = params(MOE_ROUTE_GROUPED_TOPK, 2, 1);
    p.score = MOE_SCORE_SIGMOID, p.num_expert_group = 4, p.topk_group = 1;
    ck_assert_int_eq(route1(x, 8, &p, ids, w), MOE_OK);
    ck_assert(ids[0] == 0 && ids[1] == 1); /* group 0 kept: its two experts */
    moe_tensor bias = tt_new(MOE_F32, 1, 8, 0, 0);
    p.correction_bias = &bias;
    ck_assert_int_eq(route1(x, 8, &p, ids, w), MOE_OK);
    ck_assert(ids[0] == 2 && ids[1] == 3); /* group 1 by top-2 sum */
    NEAR(w[0], 0.5);                       /* renormalized */
    p.topk_group = 2, p.topk = 3;
    p.routed_scaling_factor = 2.0f;
    ck_assert_int_eq(route1(x, 8, &p, ids, w), MOE_OK);
    ck_assert(ids[0] == 0 && ids[1] == 2 && ids[2] == 3);
    NEAR(w[0] + w[1] + w[2], 2.0);
    p.num_expert_group = 3;
    ck_assert_int_eq(route1(x, 8, &p, ids, w), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "num_expert_group"));
    p.num_expert_group = 4, p.topk_group = 5;
    ck_assert_int_eq(route1(x, 8, &p, ids, w), MOE_ERR_INVALID_ARG);
    p.topk_group = 1, p.topk = 3;
    ck_assert_int_eq(route1(x, 8, &p, ids, w), MOE_ERR_INVALID_ARG); /* 3 > 1 group of 2 */
    moe_tensor_free(&bias);
}
END_TEST

START_TEST(llama4_top1)
{
    const float x[4] = {-1.0f, 2.0f, 2.0f, 0.5f};
    int32_t ids[1];
    float w[1];
    moe_route_params p = params(MOE_ROUTE_LLAMA4_TOP1, 1, 0);
    ck_assert_int_eq(route1(x, 4, &p, ids, w), MOE_OK);
    ck_assert_int_eq(ids[0], 1);
    NEAR(w[0], 1.0 / (1.0 + exp(-2.0)));
    p.topk = 2;
    int32_t ids2[2];
    float w2[2];
    ck_assert_int_eq(route1(x, 4, &p, ids2, w2), MOE_ERR_INVALID_ARG);
}
END_TEST

START_TEST(threads_do_not_matter)
{
    enum { M = 257, E = 64, K = 6 };
    moe_tensor l = tt_new(MOE_BF16, 2, M, E, 0);
    for (int i = 0; i < M * E; i++) ((uint16_t *)l.data)[i] = (uint16_t)(0x3F00 + moe_rng_u32(9, 1, i) % 0x200);
    moe_route_params p = params(MOE_ROUTE_SOFTMAX_TOPK, K, 1);
    moe_tensor i1 = tt_new(MOE_I32, 2, M, K, 0), w1 = tt_new(MOE_F32, 2, M, K, 0);
    moe_tensor i2 = tt_new(MOE_I32, 2, M, K, 0), w2 = tt_new(MOE_F32, 2, M, K, 0);
    omp_set_num_threads(1);
    ck_assert_int_eq(moe_ref_route(&l, &p, &i1, &w1), MOE_OK);
    omp_set_num_threads(2);
    ck_assert_int_eq(moe_ref_route(&l, &p, &i2, &w2), MOE_OK);
    ck_assert_int_eq(memcmp(i1.data, i2.data, i1.nbytes), 0);
    ck_assert_int_eq(memcmp(w1.data, w2.data, w1.nbytes), 0);
    moe_tensor_free(&l), moe_tensor_free(&i1), moe_tensor_free(&w1), moe_tensor_free(&i2), moe_tensor_free(&w2);
}
END_TEST

START_TEST(errors)
{
    const float x[4] = {0, 1, 2, 3};
    int32_t ids[5];
    float w[5];
    moe_route_params p = params(MOE_ROUTE_SOFTMAX_TOPK, 5, 0);
    ck_assert_int_eq(route1(x, 4, &p, ids, w), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "topk 5"));
    p.topk = 0;
    ck_assert_int_eq(route1(x, 4, &p, ids, w), MOE_ERR_INVALID_ARG);
    p.topk = 2, p.routed_scaling_factor = 0.0f;
    ck_assert_int_eq(route1(x, 4, &p, ids, w), MOE_ERR_INVALID_ARG);
    p.routed_scaling_factor = 1.0f, p.method = (moe_route_method)9;
    ck_assert_int_eq(route1(x, 4, &p, ids, w), MOE_ERR_INVALID_ARG);
    p.method = MOE_ROUTE_SOFTMAX_TOPK;
    moe_tensor l = tt_2d(MOE_F32, x, 1, 4), ti = tt_new(MOE_I32, 2, 1, 3, 0), tw = tt_new(MOE_F32, 2, 1, 2, 0);
    ck_assert_int_eq(moe_ref_route(&l, &p, &ti, &tw), MOE_ERR_SHAPE);
    ck_assert_int_eq(moe_ref_route(&l, NULL, &ti, &tw), MOE_ERR_NULL);
    ck_assert_int_eq(moe_ref_route(NULL, &p, &ti, &tw), MOE_ERR_NULL);
    moe_tensor li = tt_new(MOE_I32, 2, 1, 4, 0);
    ck_assert_int_eq(moe_ref_route(&li, &p, &ti, &tw), MOE_ERR_DTYPE);
    /* M = 0: nothing to do, but a valid problem */
    moe_tensor l0 = tt_new(MOE_F32, 2, 0, 4, 0), i0 = tt_new(MOE_I32, 2, 0, 2, 0), w0 = tt_new(MOE_F32, 2, 0, 2, 0);
    ck_assert_int_eq(moe_ref_route(&l0, &p, &i0, &w0), MOE_OK);
    ck_assert_str_eq(moe_route_method_name(MOE_ROUTE_GROUPED_TOPK), "grouped_topk");
    moe_tensor_free(&l), moe_tensor_free(&ti), moe_tensor_free(&tw), moe_tensor_free(&li);
    moe_tensor_free(&l0), moe_tensor_free(&i0), moe_tensor_free(&w0);
}
END_TEST

static Suite *route_suite(void)
{
    Suite *s = suite_create("route");
    TCase *tc = tcase_create("methods");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, softmax_topk);
    tcase_add_test(tc, ties_go_to_lower_id);
    tcase_add_test(tc, nan_and_inf_logits);
    tcase_add_test(tc, correction_bias_selects_only);
    tcase_add_test(tc, grouped_topk);
    tcase_add_test(tc, llama4_top1);
    tcase_add_test(tc, threads_do_not_matter);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(route_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
