/* Activations: formulas against double-precision math, the three gated
 * layouts, clamps, per-expert SwigluBias, vLLM's rounding of act(gate),
 * names and errors. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include "moe/act.h"
#include "moe/format.h"
#include "test_tensors.h"

static double sig(double x) { return 1.0 / (1.0 + exp(-x)); }
static double silu(double x) { return x * sig(x); }
static double gelu(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }
static double gelu_t(double x)
{
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

#define NEAR(a, b) ck_assert_msg(fabs((double)(a) - (b)) <= 2e-6 * fabs(b) + 1e-7, "%.9g vs %.9g", (double)(a), (b))

/* One gated row: gate g, up u, in the given layout; returns the output. */
static float gated1(moe_act act, moe_act_layout lay, float g, float u)
{
    float row[2];
    if (lay == MOE_LAYOUT_UP_GATE) row[0] = u, row[1] = g;
    else row[0] = g, row[1] = u; /* gate_up and interleaved coincide for I = 1 */
    moe_tensor x = tt_2d(MOE_F32, row, 1, 2), o = tt_new(MOE_F32, 2, 1, 1, 0);
    moe_act_params p = moe_act_defaults(act, lay);
    ck_assert_int_eq(moe_ref_activation(&x, NULL, &p, &o), MOE_OK);
    float v = ((float *)o.data)[0];
    moe_tensor_free(&x), moe_tensor_free(&o);
    return v;
}

START_TEST(gated_formulas)
{
    const float gs[] = {-6.0f, -1.5f, -0.1f, 0.0f, 0.3f, 1.0f, 2.5f, 9.0f};
    for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++) {
        double g = gs[i], u = 1.25;
        NEAR(gated1(MOE_ACT_SILU, MOE_LAYOUT_GATE_UP, gs[i], 1.25f), silu(g) * u);
        NEAR(gated1(MOE_ACT_GELU, MOE_LAYOUT_UP_GATE, gs[i], 1.25f), gelu(g) * u);
        NEAR(gated1(MOE_ACT_GELU_TANH, MOE_LAYOUT_GATE_UP, gs[i], 1.25f), gelu_t(g) * u);
        double gc = g < 7 ? g : 7;
        NEAR(gated1(MOE_ACT_SWIGLUOAI, MOE_LAYOUT_INTERLEAVED, gs[i], 1.25f), (u + 1) * gc * sig(1.702 * gc));
        NEAR(gated1(MOE_ACT_SWIGLU_CLAMP, MOE_LAYOUT_GATE_UP, gs[i], 1.25f), silu(gc) * u);
    }
    /* clamps: gate only from above, up on both sides */
    NEAR(gated1(MOE_ACT_SWIGLUOAI, MOE_LAYOUT_INTERLEAVED, 10.0f, -10.0f), (-7 + 1) * 7 * sig(1.702 * 7));
    NEAR(gated1(MOE_ACT_SWIGLU_CLAMP, MOE_LAYOUT_GATE_UP, -10.0f, 10.0f), silu(-10) * 7);
}
END_TEST

/* Rows of 2I with distinct values show which half each layout reads. */
START_TEST(layouts)
{
    const float row[4] = {1.0f, 2.0f, 3.0f, 4.0f}; /* I = 2 */
    moe_tensor x = tt_2d(MOE_F32, row, 1, 4), o = tt_new(MOE_F32, 2, 1, 2, 0);
    moe_act_params p = moe_act_defaults(MOE_ACT_SILU, MOE_LAYOUT_GATE_UP);
    ck_assert_int_eq(moe_ref_activation(&x, NULL, &p, &o), MOE_OK);
    NEAR(((float *)o.data)[0], silu(1) * 3);
    NEAR(((float *)o.data)[1], silu(2) * 4);
    p.layout = MOE_LAYOUT_UP_GATE;
    ck_assert_int_eq(moe_ref_activation(&x, NULL, &p, &o), MOE_OK);
    NEAR(((float *)o.data)[0], silu(3) * 1);
    NEAR(((float *)o.data)[1], silu(4) * 2);
    p.layout = MOE_LAYOUT_INTERLEAVED;
    ck_assert_int_eq(moe_ref_activation(&x, NULL, &p, &o), MOE_OK);
    NEAR(((float *)o.data)[0], silu(1) * 2);
    NEAR(((float *)o.data)[1], silu(3) * 4);
    moe_tensor_free(&x), moe_tensor_free(&o);
}
END_TEST

START_TEST(non_gated)
{
    const float row[3] = {-2.0f, 0.5f, 3.0f};
    moe_tensor x = tt_2d(MOE_F32, row, 1, 3), o = tt_new(MOE_F32, 2, 1, 3, 0);
    const moe_act acts[4] = {MOE_ACT_RELU2, MOE_ACT_SILU_NOMUL, MOE_ACT_GELU_NOMUL, MOE_ACT_IDENTITY};
    for (int a = 0; a < 4; a++) {
        moe_act_params p = moe_act_defaults(acts[a], MOE_LAYOUT_GATE_UP);
        ck_assert_int_eq(moe_ref_activation(&x, NULL, &p, &o), MOE_OK);
        for (int i = 0; i < 3; i++) {
            double v = row[i];
            double want = a == 0 ? (v > 0 ? v * v : 0) : a == 1 ? silu(v) : a == 2 ? gelu(v) : v;
            NEAR(((float *)o.data)[i], want);
        }
    }
    moe_tensor_free(&x), moe_tensor_free(&o);
}
END_TEST

/* TensorRT-LLM SwigluBias with per-expert alpha, beta, limit; rows of
 * expert -1 are zero. */
START_TEST(swiglu_bias_per_expert)
{
    const float rows[6] = {3.0f, 2.0f, 3.0f, 2.0f, 3.0f, 2.0f}; /* up_gate: u = 3, g = 2 */
    moe_tensor x = tt_2d(MOE_F32, rows, 3, 2), o = tt_new(MOE_F32, 2, 3, 1, 0);
    const int32_t rev[3] = {0, 1, -1};
    moe_tensor re = tt_i32(rev, 3), al = tt_new(MOE_F32, 1, 2, 0, 0), be = tt_new(MOE_F32, 1, 2, 0, 0),
               li = tt_new(MOE_F32, 1, 2, 0, 0);
    float *a = al.data, *b = be.data, *l = li.data;
    a[0] = 1.0f, a[1] = 1.702f, b[0] = 0.0f, b[1] = 1.0f, l[0] = INFINITY, l[1] = 1.5f;
    moe_act_params p = moe_act_defaults(MOE_ACT_SWIGLU_BIAS, MOE_LAYOUT_UP_GATE);
    p.swiglu_alpha = &al, p.swiglu_beta = &be, p.swiglu_limit = &li;
    ck_assert_int_eq(moe_ref_activation(&x, &re, &p, &o), MOE_OK);
    NEAR(((float *)o.data)[0], 2 * sig(2) * 3);
    NEAR(((float *)o.data)[1], 1.5 * sig(1.702 * 1.5) * (1.5 + 1));
    ck_assert(((float *)o.data)[2] == 0.0f);
    ((int32_t *)re.data)[2] = 2; /* no parameters for expert 2 */
    ck_assert_int_eq(moe_ref_activation(&x, &re, &p, &o), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "row_expert[2] = 2"));
    moe_tensor_free(&x), moe_tensor_free(&o), moe_tensor_free(&re);
    moe_tensor_free(&al), moe_tensor_free(&be), moe_tensor_free(&li);
}
END_TEST

/* vLLM rounds act(gate) to bf16 before multiplying by up; find a gate
 * whose silu is not a bf16 value and check both variants. */
START_TEST(round_act_to_storage)
{
    moe_tensor x = tt_new(MOE_BF16, 2, 1, 2, 0), o = tt_new(MOE_F32, 2, 1, 1, 0);
    uint16_t *xv = x.data;
    xv[0] = moe_f32_to_bf16(1.3f, MOE_POLICY_IEEE_RNE, NULL); /* gate */
    xv[1] = moe_f32_to_bf16(3.0f, MOE_POLICY_IEEE_RNE, NULL); /* up */
    float g = moe_bf16_to_f32(xv[0]);
    moe_act_params p = moe_act_defaults(MOE_ACT_SILU, MOE_LAYOUT_GATE_UP);
    ck_assert_int_eq(moe_ref_activation(&x, NULL, &p, &o), MOE_OK);
    float plain = ((float *)o.data)[0];
    p.round_act_to_storage = 1;
    ck_assert_int_eq(moe_ref_activation(&x, NULL, &p, &o), MOE_OK);
    float rounded = ((float *)o.data)[0];
    float s_bf = moe_bf16_to_f32(moe_f32_to_bf16((float)silu(g), MOE_POLICY_IEEE_RNE, NULL));
    NEAR(rounded, (double)s_bf * 3.0);
    NEAR(plain, silu(g) * 3.0);
    ck_assert(plain != rounded);
    moe_tensor_free(&x), moe_tensor_free(&o);
}
END_TEST

START_TEST(names_and_errors)
{
    moe_act a;
    moe_act_layout l;
    ck_assert_int_eq(moe_act_from_name("swigluoai", &a), MOE_OK);
    ck_assert_int_eq(a, MOE_ACT_SWIGLUOAI);
    ck_assert_str_eq(moe_act_name(MOE_ACT_GELU_TANH), "gelu_tanh");
    ck_assert_int_eq(moe_act_from_name("geglu", &a), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "activation 'geglu'"));
    ck_assert_int_eq(moe_act_layout_from_name("up_gate", &l), MOE_OK);
    ck_assert_int_eq(l, MOE_LAYOUT_UP_GATE);
    ck_assert_int_eq(moe_act_layout_from_name("gate-up", &l), MOE_ERR_INVALID_ARG);
    ck_assert(moe_act_is_gated(MOE_ACT_SWIGLU_BIAS) && !moe_act_is_gated(MOE_ACT_RELU2));
    moe_tensor x = tt_new(MOE_F32, 2, 2, 4, 0), o = tt_new(MOE_F32, 2, 2, 3, 0), oi = tt_new(MOE_I8, 2, 2, 2, 0);
    moe_act_params p = moe_act_defaults(MOE_ACT_SILU, MOE_LAYOUT_GATE_UP);
    ck_assert_int_eq(moe_ref_activation(&x, NULL, &p, &o), MOE_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "2I"));
    ck_assert_int_eq(moe_ref_activation(&x, NULL, &p, &oi), MOE_ERR_DTYPE);
    ck_assert_int_eq(moe_ref_activation(&x, NULL, NULL, &o), MOE_ERR_NULL);
    p.act = (moe_act)42;
    moe_tensor o2 = tt_new(MOE_F32, 2, 2, 2, 0);
    ck_assert_int_eq(moe_ref_activation(&x, NULL, &p, &o2), MOE_ERR_INVALID_ARG);
    p = moe_act_defaults(MOE_ACT_SWIGLUOAI, MOE_LAYOUT_INTERLEAVED);
    p.limit = -1.0f;
    ck_assert_int_eq(moe_ref_activation(&x, NULL, &p, &o2), MOE_ERR_INVALID_ARG);
    moe_tensor_free(&x), moe_tensor_free(&o), moe_tensor_free(&oi), moe_tensor_free(&o2);
}
END_TEST

static Suite *act_suite(void)
{
    Suite *s = suite_create("act");
    TCase *tc = tcase_create("activations");
    tcase_add_test(tc, gated_formulas);
    tcase_add_test(tc, layouts);
    tcase_add_test(tc, non_gated);
    tcase_add_test(tc, swiglu_bias_per_expert);
    tcase_add_test(tc, round_act_to_storage);
    tcase_add_test(tc, names_and_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(act_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
