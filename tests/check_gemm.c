/* The reference grouped GEMM: accumulation order (fmaf, k ascending, from
 * 0), rows of different experts, zero rows, each scheme's scale placement,
 * thread independence and argument errors. */
#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include "moe/format.h"
#include "moe/gemm.h"
#include "moe/rng.h"
#include "test_tensors.h"

static moe_gemm_args args(moe_scheme s, const moe_tensor *a, const moe_tensor *w, const moe_tensor *re)
{
    moe_gemm_args g;
    memset(&g, 0, sizeof g);
    g.scheme = s, g.a = a, g.w = w, g.row_expert = re;
    return g;
}

/* acc = fmaf(1, -1, 0) = -1, then fmaf(1+2^-12, 1+2^-12, -1) = 2^-11 +
 * 2^-24 exactly; a separately rounded product would give 2^-11. */
START_TEST(fmaf_order_and_zero_rows)
{
    const float av[4] = {1.0f, 1.0f + 0x1p-12f, 5.0f, 5.0f};
    const float wv[8] = {9, 9, 9, 9, -1.0f, 1.0f + 0x1p-12f, 2.0f, 0.5f}; /* E=2, N=2, K=2 */
    const int32_t rv[2] = {1, -1};
    moe_tensor a = tt_2d(MOE_F32, av, 2, 2), w = tt_new(MOE_F32, 3, 2, 2, 2), re = tt_i32(rv, 2);
    memcpy(w.data, wv, sizeof wv);
    moe_tensor out = tt_new(MOE_F32, 2, 2, 2, 0);
    moe_gemm_args g = args(MOE_SCHEME_F32, &a, &w, &re);
    ck_assert_int_eq(moe_ref_grouped_gemm(&g, &out), MOE_OK);
    const float *o = out.data;
    ck_assert(o[0] == 0x1.0008p-11f);
    ck_assert(o[1] == 2.0f + 0.5f * (1.0f + 0x1p-12f));
    ck_assert(o[2] == 0.0f && o[3] == 0.0f); /* row_expert -1 */
    moe_tensor bias = tt_new(MOE_F32, 2, 2, 2, 0);
    ((float *)bias.data)[2] = 1.0f; /* expert 1, column 0 */
    g.bias = &bias;
    ck_assert_int_eq(moe_ref_grouped_gemm(&g, &out), MOE_OK);
    ck_assert(o[0] == 1.0f + 0x1.0008p-11f);
    moe_tensor_free(&a), moe_tensor_free(&w), moe_tensor_free(&re), moe_tensor_free(&out), moe_tensor_free(&bias);
}
END_TEST

/* bf16: operands exact in f32, result rounded once to bf16 (RNE). */
START_TEST(bf16_rounds_once)
{
    moe_tensor a = tt_new(MOE_BF16, 2, 1, 2, 0), w = tt_new(MOE_BF16, 3, 1, 1, 2), out = tt_new(MOE_BF16, 2, 1, 1, 0);
    const int32_t rv[1] = {0};
    moe_tensor re = tt_i32(rv, 1);
    uint16_t *av = a.data, *wv = w.data;
    av[0] = moe_f32_to_bf16(1.0f, MOE_POLICY_IEEE_RNE, NULL), av[1] = moe_f32_to_bf16(0x1p-8f, MOE_POLICY_IEEE_RNE, NULL);
    wv[0] = moe_f32_to_bf16(1.0f, MOE_POLICY_IEEE_RNE, NULL), wv[1] = moe_f32_to_bf16(1.5f, MOE_POLICY_IEEE_RNE, NULL);
    moe_gemm_args g = args(MOE_SCHEME_BF16, &a, &w, &re);
    ck_assert_int_eq(moe_ref_grouped_gemm(&g, &out), MOE_OK);
    /* 1 + 1.5 * 2^-8 = 1.005859375: between bf16 1 and 1.0078125, nearer the latter */
    ck_assert(moe_bf16_to_f32(((uint16_t *)out.data)[0]) == 1.0078125f);
    moe_tensor_free(&a), moe_tensor_free(&w), moe_tensor_free(&re), moe_tensor_free(&out);
}
END_TEST

static void fill_normal(moe_tensor *t, uint64_t stream)
{
    int64_t n = moe_tensor_numel(t);
    moe_rng_fill_normal(t->data, (size_t)n, 11, stream, 0, 0.0f, 1.0f);
}

/* Quantized schemes: the GEMM equals the fmaf dot product of the quant
 * stage's own dequantized operands (DEQUANT_F32), or the per-tile scaled
 * sums (BLOCK_TILES), or bf16-rounded dequantized weights (WEIGHT_TO_ACT). */
static void check_scheme(moe_scheme sc)
{
    enum { P = 5, E = 3, N = 130, K = 256 };
    moe_quant_spec ws, as;
    ck_assert_int_eq(moe_scheme_spec(sc, MOE_OPERAND_WEIGHT, &ws), MOE_OK);
    ck_assert_int_eq(moe_scheme_spec(sc, MOE_OPERAND_ACT, &as), MOE_OK);
    moe_tensor af = tt_new(MOE_F32, 2, P, K, 0), wf = tt_new(MOE_F32, 3, E, N, K);
    fill_normal(&af, 1), fill_normal(&wf, 2);
    int64_t ashape[2] = {P, K}, wshape[3] = {E, N, K};
    moe_tensor aq, asc, ag, wq, wsc, wg;
    ck_assert_int_eq(moe_quant_alloc(&ws, 3, wshape, &wq, &wsc, &wg), MOE_OK);
    ck_assert_int_eq(moe_ref_quantize(&ws, &wf, NULL, &wq, ws.gran ? &wsc : NULL, ws.use_global_scale ? &wg : NULL), MOE_OK);
    if (as.gran == MOE_GRAN_NONE) {
        aq = tt_new(as.elem, 2, P, K, 0);
        for (int64_t i = 0; i < P * K; i++)
            ((uint16_t *)aq.data)[i] = moe_f32_to_bf16(((float *)af.data)[i], MOE_POLICY_IEEE_RNE, NULL);
        memset(&asc, 0, sizeof asc), memset(&ag, 0, sizeof ag);
    } else {
        ck_assert_int_eq(moe_quant_alloc(&as, 2, ashape, &aq, &asc, &ag), MOE_OK);
        ck_assert_int_eq(moe_ref_quantize(&as, &af, NULL, &aq, &asc, as.use_global_scale ? &ag : NULL), MOE_OK);
    }
    const int32_t rv[P] = {2, 0, -1, 2, 1};
    moe_tensor re = tt_i32(rv, P), out = tt_new(MOE_F32, 2, P, N, 0);
    moe_gemm_args g = args(sc, &aq, &wq, &re);
    g.a_scale = as.gran ? &asc : NULL, g.a_global = as.use_global_scale ? &ag : NULL;
    g.w_scale = ws.gran ? &wsc : NULL, g.w_global = ws.use_global_scale ? &wg : NULL;
    ck_assert_msg(moe_ref_grouped_gemm(&g, &out) == MOE_OK, "%s: %s", moe_scheme_name(sc), moe_last_error());
    /* the expectation, computed here from the quant stage's outputs */
    moe_tensor ad = tt_new(MOE_F32, 2, P, K, 0), wd = tt_new(MOE_F32, 3, E, N, K);
    moe_gemm_numerics mode = moe_gemm_numerics_of(sc);
    if (mode == MOE_GEMM_BLOCK_TILES) {
        moe_decode_array(aq.dtype, aq.data, P * K, ad.data);
        moe_decode_array(wq.dtype, wq.data, (size_t)E * N * K, wd.data);
    } else {
        if (as.gran == MOE_GRAN_NONE)
            moe_decode_array(aq.dtype, aq.data, P * K, ad.data);
        else
            ck_assert_int_eq(moe_ref_dequantize(&as, &aq, &asc, as.use_global_scale ? &ag : NULL, &ad), MOE_OK);
        ck_assert_int_eq(moe_ref_dequantize(&ws, &wq, ws.gran ? &wsc : NULL, ws.use_global_scale ? &wg : NULL, &wd), MOE_OK);
        if (mode == MOE_GEMM_WEIGHT_TO_ACT)
            for (int64_t i = 0; i < (int64_t)E * N * K; i++) {
                float *v = (float *)wd.data + i;
                *v = moe_bf16_to_f32(moe_f32_to_bf16(*v, MOE_POLICY_IEEE_RNE, NULL));
            }
    }
    const float *A = ad.data, *W = wd.data, *O = out.data;
    int bad = 0;
    for (int p = 0; p < P; p++)
        for (int n = 0; n < N; n++) {
            float acc = 0.0f;
            if (rv[p] >= 0) {
                const float *wr = W + ((int64_t)rv[p] * N + n) * K;
                if (mode == MOE_GEMM_BLOCK_TILES) {
                    for (int t = 0; t < K / 128; t++) {
                        float part = 0.0f;
                        for (int k = t * 128; k < (t + 1) * 128; k++) part = fmaf(A[p * K + k], wr[k], part);
                        float sa = ((float *)asc.data)[p * 2 + t];
                        float sw = ((float *)wsc.data)[((int64_t)rv[p] * 2 + n / 128) * 2 + t];
                        acc = acc + (part * sa) * sw;
                    }
                } else {
                    for (int k = 0; k < K; k++) acc = fmaf(A[p * K + k], wr[k], acc);
                }
            }
            bad += memcmp(&acc, &O[p * N + n], 4) != 0;
        }
    ck_assert_msg(bad == 0, "%s: %d outputs differ", moe_scheme_name(sc), bad);
    moe_tensor *all[] = {&af, &wf, &aq, &asc, &ag, &wq, &wsc, &wg, &re, &out, &ad, &wd};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) moe_tensor_free(all[i]);
}

START_TEST(every_quantized_scheme)
{
    moe_scheme sc = (moe_scheme)(_i + MOE_SCHEME_FP8_WTENSOR_ATENSOR);
    check_scheme(sc);
}
END_TEST

START_TEST(threads_do_not_matter)
{
    enum { P = 64, E = 4, N = 96, K = 64 };
    moe_tensor a = tt_new(MOE_F32, 2, P, K, 0), w = tt_new(MOE_F32, 3, E, N, K), re = tt_new(MOE_I32, 1, P, 0, 0);
    fill_normal(&a, 3), fill_normal(&w, 4);
    for (int p = 0; p < P; p++) ((int32_t *)re.data)[p] = (int32_t)(moe_rng_u32(1, 5, p) % (E + 1)) - 1;
    moe_tensor o1 = tt_new(MOE_BF16, 2, P, N, 0), o2 = tt_new(MOE_BF16, 2, P, N, 0);
    moe_gemm_args g = args(MOE_SCHEME_F32, &a, &w, &re);
    omp_set_num_threads(1);
    ck_assert_int_eq(moe_ref_grouped_gemm(&g, &o1), MOE_OK);
    omp_set_num_threads(2);
    ck_assert_int_eq(moe_ref_grouped_gemm(&g, &o2), MOE_OK);
    ck_assert_int_eq(memcmp(o1.data, o2.data, o1.nbytes), 0);
    moe_tensor_free(&a), moe_tensor_free(&w), moe_tensor_free(&re), moe_tensor_free(&o1), moe_tensor_free(&o2);
}
END_TEST

START_TEST(errors)
{
    moe_tensor a = tt_new(MOE_F32, 2, 2, 4, 0), w = tt_new(MOE_F32, 3, 2, 3, 4), out = tt_new(MOE_F32, 2, 2, 3, 0);
    const int32_t rv[2] = {0, 1};
    moe_tensor re = tt_i32(rv, 2);
    moe_gemm_args g = args(MOE_SCHEME_F32, &a, &w, &re);
    ck_assert_int_eq(moe_ref_grouped_gemm(NULL, &out), MOE_ERR_NULL);
    g.scheme = MOE_SCHEME_BF16; /* a and w are f32 */
    ck_assert_int_eq(moe_ref_grouped_gemm(&g, &out), MOE_ERR_DTYPE);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "a: dtype f32, expected bf16"));
    g.scheme = MOE_SCHEME_FP8_WTENSOR_ATENSOR;
    ck_assert_int_eq(moe_ref_grouped_gemm(&g, &out), MOE_ERR_DTYPE);
    g.scheme = (moe_scheme)99;
    ck_assert_int_ne(moe_ref_grouped_gemm(&g, &out), MOE_OK);
    g.scheme = MOE_SCHEME_F32;
    ((int32_t *)re.data)[1] = 2;
    ck_assert_int_eq(moe_ref_grouped_gemm(&g, &out), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "row_expert[1] = 2"));
    ((int32_t *)re.data)[1] = 1;
    moe_tensor w5 = tt_new(MOE_F32, 3, 2, 3, 5), o4 = tt_new(MOE_F32, 2, 2, 4, 0);
    g.w = &w5;
    ck_assert_int_eq(moe_ref_grouped_gemm(&g, &out), MOE_ERR_SHAPE);
    g.w = &w;
    ck_assert_int_eq(moe_ref_grouped_gemm(&g, &o4), MOE_ERR_SHAPE);
    moe_tensor bias = tt_new(MOE_F32, 2, 3, 3, 0);
    g.bias = &bias;
    ck_assert_int_eq(moe_ref_grouped_gemm(&g, &out), MOE_ERR_SHAPE);
    ck_assert_str_eq(moe_gemm_numerics_name(moe_gemm_numerics_of(MOE_SCHEME_FP8_WBLOCK128_AGROUP128)), "block_tiles");
    moe_tensor_free(&a), moe_tensor_free(&w), moe_tensor_free(&out), moe_tensor_free(&re);
    moe_tensor_free(&w5), moe_tensor_free(&o4), moe_tensor_free(&bias);
}
END_TEST

static Suite *gemm_suite(void)
{
    Suite *s = suite_create("gemm");
    TCase *tc = tcase_create("grouped");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, fmaf_order_and_zero_rows);
    tcase_add_test(tc, bf16_rounds_once);
    tcase_add_loop_test(tc, every_quantized_scheme, 0, MOE_SCHEME_COUNT - MOE_SCHEME_FP8_WTENSOR_ATENSOR);
    tcase_add_test(tc, threads_do_not_matter);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(gemm_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
