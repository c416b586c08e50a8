/* The fused-forward judge (include/moe/fused_judge.h):
 *   - the reference composition's own trace passes every stage with share
 *     0, for the seven fused schemes, deterministic and atomic;
 *   - the bound is not vacuous: moving one h element away from the
 *     reference a bf16 step at a time fails gemm1_act, naming the slot,
 *     within a few steps (shares in (0, 1] while inside); the same for y;
 *   - mutated traces fail the stage that holds the mutation: a row taken
 *     twice (layout, nothing judged after it), two slots' rows swapped
 *     (gemm1_act), an x code (quant_x), an h code or scale (quant_h), one
 *     output element one ulp off (combine), an atomic output far off
 *     (gemm2_combine);
 *   - bad arguments (the judge, the reference trace, moe_gemm_abs_sums): a
 *     status and a message naming the argument. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mk_fixture.h"
#include "moe/bounds.h"
#include "moe/fused_judge.h"

enum { M = 12, K = 2, E = 8, H = 256, I = 128 };

static const moe_scheme SCHEMES[] = {MOE_SCHEME_BF16, MOE_SCHEME_FP8_WTENSOR_ATENSOR, MOE_SCHEME_FP8_WCHANNEL_ATOKEN,
                                     MOE_SCHEME_FP8_WBLOCK128_AGROUP128, MOE_SCHEME_INT8_WCHANNEL_ATOKEN,
                                     MOE_SCHEME_W4A16_G128, MOE_SCHEME_MXFP4_W4A16};
enum { NS = sizeof SCHEMES / sizeof SCHEMES[0] };

typedef struct {
    mkf_prob d;
    moe_fused_problem p;
    moe_fused_inputs in;
    moe_fused_trace_store rt;
} fixture;

static void make(fixture *f, moe_scheme sc, int atomic, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    mkf_make_data(&f->d, sc, M, H, I, E, seed, 0.05f, 0);
    mkf_make_routing(&f->d, K, seed, 4, 5, 0);
    f->p.M = M, f->p.E = E, f->p.topk = K, f->p.H = H, f->p.I = I, f->p.scheme = sc, f->p.atomic = atomic;
    f->p.act = moe_act_defaults(MOE_ACT_SILU, MOE_LAYOUT_GATE_UP);
    f->in.x = &f->d.x, f->in.topk_ids = &f->d.ids, f->in.topk_w = &f->d.w;
    f->in.w1 = f->d.mw.w1, f->in.w1_scale = f->d.mw.w1_scale, f->in.w2 = f->d.mw.w2, f->in.w2_scale = f->d.mw.w2_scale;
    ck_assert_int_eq(moe_fused_ref_trace_make(&f->p, &f->in, &f->rt), MOE_OK);
}

static void drop(fixture *f)
{
    moe_fused_trace_store_free(&f->rt);
    moe_tensor *v[] = {&f->d.x, &f->d.ids, &f->d.w, &f->d.q1, &f->d.s1, &f->d.g1, &f->d.q2, &f->d.s2, &f->d.g2};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) moe_tensor_free(v[i]);
}

static const moe_fused_model MODEL = {16, 24, 0, 0, 0.0};

static const moe_fused_stage *find(const moe_fused_verdict *v, const char *name)
{
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->st[i].stage, name)) return &v->st[i];
    return NULL;
}

static moe_fused_verdict judge(fixture *f)
{
    moe_fused_verdict v;
    ck_assert_int_eq(moe_fused_judge(&f->p, &MODEL, &f->in, &f->rt.tr, &v), MOE_OK);
    return v;
}

/* the only failing stage is `name` (and those computed from the mutated data, listed in also) */
static void fails_at(const moe_fused_verdict *v, const char *name, const char *also)
{
    const moe_fused_stage *st = find(v, name);
    ck_assert_msg(st && st->failures > 0, "stage %s should fail", name);
    ck_assert(!v->pass);
    for (int i = 0; i < v->n; i++)
        if (strcmp(v->st[i].stage, name) && (!also || strcmp(v->st[i].stage, also)))
            ck_assert_msg(v->st[i].failures == 0, "stage %s failed too: %s", v->st[i].stage, v->st[i].where);
    printf("  %s: %lld of %lld wrong, first: %s\n", name, (long long)st->failures, (long long)st->n, st->where);
}

START_TEST(reference_trace_passes)
{
    for (int a = 0; a < 2; a++) {
        fixture f;
        make(&f, SCHEMES[_i], a, 11 + _i);
        moe_fused_verdict v = judge(&f);
        int q8 = f.rt.tr.xq != NULL;
        ck_assert_int_eq(v.n, 2 + (q8 ? 2 : 0) + (a ? 1 : 2));
        ck_assert(v.pass);
        for (int i = 0; i < v.n; i++) {
            ck_assert_msg(v.st[i].failures == 0 && v.st[i].share == 0.0 && v.st[i].n > 0, "%s %s: %lld failures, share %g",
                          moe_scheme_name(SCHEMES[_i]), v.st[i].stage, (long long)v.st[i].failures, v.st[i].share);
        }
        printf("%s %s: %d stages, gemm1_act %lld elements\n", moe_scheme_name(SCHEMES[_i]), a ? "atomic" : "deterministic",
               v.n, (long long)find(&v, "fused.gemm1_act")->n);
        drop(&f);
    }
}
END_TEST

/* move element i of a bf16 tensor by n bf16 steps (upwards) */
static void step_bf16(moe_tensor *t, int64_t i, int n)
{
    uint16_t *c = (uint16_t *)t->data + i;
    for (int k = 0; k < n; k++) {
        float v;
        moe_decode(MOE_BF16, *c, &v);
        unsigned u = *c;
        if (v >= 0.0f) u = u == 0x8000u ? 0x0001u : u + 1u;
        else u = u == 0x8000u || u == 0x8001u ? 0x0000u : u - 1u;
        *c = (uint16_t)u;
    }
}

/* steps until stage `name` fails; the steps inside have shares in (0, 1] */
static void walk(fixture *f, moe_tensor *t, int64_t i, const char *name)
{
    uint16_t keep = ((uint16_t *)t->data)[i];
    int n = 0;
    double last = 0.0;
    for (;;) {
        step_bf16(t, i, 1);
        n++;
        moe_fused_verdict v = judge(f);
        const moe_fused_stage *st = find(&v, name);
        ck_assert(st);
        if (st->failures) {
            ck_assert_msg(strstr(st->where, "slot ") || strstr(st->where, "token "), "where: %s", st->where);
            break;
        }
        ck_assert(st->share > 0.0 && st->share <= 1.0 && st->share >= last);
        last = st->share;
        ck_assert_int_lt(n, 1 << 14);
    }
    ck_assert_int_le(n, 64); /* H = 256, I = 128: the intervals are a few bf16 steps wide at most */
    printf("  %s: %d bf16 steps inside (last share %.3f), fails at %d\n", name, n - 1, last, n);
    ((uint16_t *)t->data)[i] = keep;
}

START_TEST(bound_not_vacuous)
{
    fixture f;
    make(&f, SCHEMES[_i], 0, 21 + _i);
    printf("%s:\n", moe_scheme_name(SCHEMES[_i]));
    walk(&f, &f.rt.h, 5 * I + 7, "fused.gemm1_act");
    walk(&f, &f.rt.y, 3 * H + 9, "fused.gemm2_weight");
    drop(&f);
}
END_TEST

START_TEST(mutations_fail_their_stage)
{
    fixture f;
    make(&f, MOE_SCHEME_FP8_WCHANNEL_ATOKEN, 0, 31);
    moe_fused_verdict v;
    /* a row taken twice: layout fails, nothing after it is judged */
    f.rt.rows[3] = f.rt.rows[4];
    v = judge(&f);
    ck_assert_int_eq(v.n, 1);
    fails_at(&v, "fused.layout", NULL);
    f.rt.rows[3] = 3;
    /* two slots of different tokens swapped: their h rows belong to the other token */
    f.rt.rows[0] = 2, f.rt.rows[2] = 0;
    v = judge(&f);
    ck_assert(find(&v, "fused.gemm1_act")->failures > 0 && !v.pass);
    printf("  swapped rows: gemm1_act %lld wrong\n", (long long)find(&v, "fused.gemm1_act")->failures);
    f.rt.rows[0] = 0, f.rt.rows[2] = 2;
    /* one code of x */
    ((uint8_t *)f.rt.xq.data)[17] ^= 0x01;
    v = judge(&f);
    fails_at(&v, "fused.quant_x", NULL);
    ((uint8_t *)f.rt.xq.data)[17] ^= 0x01;
    /* one code of h, then one scale of h (GEMM2 runs on the trace's codes: its own stage may pass or fail) */
    ((uint8_t *)f.rt.hq.data)[I + 3] ^= 0x01;
    v = judge(&f);
    fails_at(&v, "fused.quant_h", "fused.gemm2_weight");
    ((uint8_t *)f.rt.hq.data)[I + 3] ^= 0x01;
    ((float *)f.rt.sh.data)[2] *= 1.0f + 0x1p-20f;
    v = judge(&f);
    fails_at(&v, "fused.quant_h", "fused.gemm2_weight");
    ((float *)f.rt.sh.data)[2] /= 1.0f + 0x1p-20f;
    /* one output element one ulp off */
    step_bf16(&f.rt.out, 2 * H + 5, 1);
    v = judge(&f);
    fails_at(&v, "fused.combine", NULL);
    drop(&f);
    /* atomic: an output element far off */
    make(&f, MOE_SCHEME_BF16, 1, 32);
    step_bf16(&f.rt.out, 7 * H + 1, 40);
    v = judge(&f);
    fails_at(&v, "fused.gemm2_combine", NULL);
    drop(&f);
}
END_TEST

START_TEST(bad_arguments)
{
    fixture f;
    make(&f, MOE_SCHEME_BF16, 0, 41);
    moe_fused_verdict v;
    ck_assert_int_eq(moe_fused_judge(&f.p, &MODEL, &f.in, NULL, &v), MOE_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "trace"));
    moe_fused_trace tr = f.rt.tr;
    tr.y = NULL;
    ck_assert_int_eq(moe_fused_judge(&f.p, &MODEL, &f.in, &tr, &v), MOE_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "y must be a host tensor"));
    tr = f.rt.tr, tr.cap = f.rt.tr.cap + 1;
    ck_assert_int_eq(moe_fused_judge(&f.p, &MODEL, &f.in, &tr, &v), MOE_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "trace h"));
    moe_fused_model bad = MODEL;
    bad.k_step = 0;
    ck_assert_int_eq(moe_fused_judge(&f.p, &bad, &f.in, &f.rt.tr, &v), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "k_step"));
    ((int32_t *)f.d.ids.data)[3] = E;
    ck_assert_int_eq(moe_fused_judge(&f.p, &MODEL, &f.in, &f.rt.tr, &v), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "topk_ids[3]"));
    ((int32_t *)f.d.ids.data)[3] = 0;
    /* the bound's pieces (moe_gemm_abs_sums) need their outputs */
    moe_tensor re = tt_i32((const int32_t *)f.d.ids.data, M);
    moe_gemm_args g;
    memset(&g, 0, sizeof g);
    g.scheme = MOE_SCHEME_BF16, g.a = &f.d.x, g.w = f.d.mw.w1, g.row_expert = &re;
    ck_assert_int_eq(moe_gemm_abs_sums(&g, NULL, NULL), MOE_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "A and under"));
    moe_tensor_free(&re);
    ck_assert_int_eq(moe_fused_ref_trace_make(&f.p, &f.in, NULL), MOE_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "t must not be NULL"));
    moe_fused_problem p = f.p;
    p.topk = E + 1;
    moe_fused_trace_store t2;
    ck_assert_int_eq(moe_fused_ref_trace_make(&p, &f.in, &t2), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "topk <= E"));
    p = f.p;
    p.act = moe_act_defaults(MOE_ACT_RELU2, MOE_LAYOUT_GATE_UP);
    ck_assert_int_eq(moe_fused_judge(&p, &MODEL, &f.in, &f.rt.tr, &v), MOE_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "gated"));
    drop(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fused_judge");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, reference_trace_passes, 0, NS);
    tcase_add_loop_test(tc, bound_not_vacuous, 0, NS);
    tcase_add_test(tc, mutations_fail_their_stage);
    tcase_add_test(tc, bad_arguments);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf ? 1 : 0;
}
