/* The modular kernel's Batched-format expert-parallel PFs, ranks simulated
 * in one call: deepep_ll (bf16, and fp8_wblock128_agroup128 through the LL
 * per-128 cast) and pplx (bf16) with the batched experts (naive_batched,
 * batched_masked) at R = 2 and 4 against moe_ref_forward on the same
 * G = R*T tokens (the rank-major [R, T, H] buffer is the [G, H] one):
 * top-1 bit for bit, top-k within the bound derived below; weights on the
 * input; prepare_async (moe_mk_forward_ranks_async) equals the synchronous
 * path bit for bit with work run in between; refusals with rule ids. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/bounds.h"
#include "moe/dispatch.h"
#include "moe/format.h"
#include "moe/forward.h"
#include "moe/modular.h"
#include "moe/rng.h"
#include "mk_fixture.h"
#include "test_tensors.h"

/* H: one of DeepEP LL's compiled hidden sizes (rule hidden-size-unsupported) */
enum { T = 4, H = 2048, I = 128, E = 8, KMAX = 3, GRP = 128 };

typedef mkf_prob prob;
typedef mkf_views views;

/* matched: mkf_matched_groups, where the LL cast and the scheme's per-128
 * rule give the same bytes and scales (checked in cast_agreement) */
static void make(prob *p, moe_scheme sc, int k, int G, uint64_t seed, int matched)
{
    mkf_make(p, sc, k, G, H, I, E, seed, 0.05f, matched, 0);
}

static void unmake(prob *p) { mkf_unmake(p); }
static moe_mk_config config(moe_scheme sc, int k, int R) { return mkf_config(sc, k, R, H, I, E); }
static void oracle(const prob *p, const moe_tensor *w, int woi, moe_tensor *out) { mkf_oracle(p, w, woi, out); }
static void wrap(prob *p, int R, moe_tensor *out, views *v) { mkf_wrap(p, R, out, v); }

/* (pf, ex) at world R on p; async: through moe_mk_forward_ranks_async */
static void run_ep(const char *pf, const char *ex, const moe_mk_config *c, prob *p, moe_tensor *out, int async,
                   moe_mk_between_fn fn, void *user)
{
    int R = c->world_size;
    moe_mk *mk = NULL;
    ck_assert_msg(moe_mk_create(pf, ex, c, &mk, NULL) == MOE_OK, "%s x %s R=%d: %s", pf, ex, R, moe_last_error());
    views v;
    wrap(p, R, out, &v);
    moe_status st = async ? moe_mk_forward_ranks_async(mk, &p->mw, &v.x3, &v.i3, &v.w3, &v.o3, fn, user)
                          : moe_mk_forward_ranks(mk, &p->mw, &v.x3, &v.i3, &v.w3, &v.o3);
    ck_assert_msg(st == MOE_OK, "%s x %s %s R=%d k=%d: %s", pf, ex, moe_scheme_name(p->sc), R, p->k, moe_last_error());
    moe_mk_destroy(mk);
}

static float ld(const moe_tensor *t, int64_t i)
{
    if (t->dtype == MOE_BF16) return moe_bf16_to_f32(((const uint16_t *)t->data)[i]);
    return ((const float *)t->data)[i];
}

/* the runs: (pf, scheme, matched data) x the two batched experts types */
typedef struct {
    const char *pf;
    moe_scheme sc;
    int matched;
} pcase;
static const pcase CASES[3] = {{"deepep_ll", MOE_SCHEME_BF16, 0},
                               {"deepep_ll", MOE_SCHEME_FP8_WBLOCK128_AGROUP128, 1},
                               {"pplx", MOE_SCHEME_BF16, 0}};
static const char *const EXS[2] = {"naive_batched", "batched_masked"};

/* ---- the LL fp8 cast vs the scheme's per-128 rule ----------------------- */

/* The fp8 comparison with the oracle rests on the two casts agreeing on
 * the data; checked here group by group on matched data (all agree) and
 * reported on unmatched normal data (where they may differ by a code or a
 * scale ulp: x / (amax/448) vs x * (448/amax)). */
static int64_t cast_differs(const prob *p, int64_t *groups)
{
    moe_quant_spec as;
    ck_assert_int_eq(moe_scheme_spec(p->sc, MOE_OPERAND_ACT, &as), MOE_OK);
    moe_tensor q, s, g;
    int64_t sh[2] = {p->G, H};
    ck_assert_int_eq(moe_quant_alloc(&as, 2, sh, &q, &s, &g), MOE_OK);
    moe_tensor xf = tt_new(MOE_F32, 2, p->G, H, 0);
    for (int64_t i = 0; i < p->G * H; i++) ((float *)xf.data)[i] = ld(&p->x, i);
    ck_assert_int_eq(moe_ref_quantize(&as, &xf, NULL, &q, &s, NULL), MOE_OK);
    int64_t differ = 0, n = p->G * H / GRP;
    for (int64_t gi = 0; gi < n; gi++) {
        uint8_t lq[GRP];
        float lsi;
        moe_deepep_ll_cast_group((const float *)xf.data + gi * GRP, 0, lq, &lsi);
        float ss = ((const float *)s.data)[gi]; /* [G, H/128] row-major */
        differ += memcmp(lq, (const uint8_t *)q.data + gi * GRP, GRP) != 0 || memcmp(&lsi, &ss, 4) != 0;
    }
    moe_tensor_free(&q), moe_tensor_free(&s), moe_tensor_free(&g), moe_tensor_free(&xf);
    *groups = n;
    return differ;
}

START_TEST(cast_agreement)
{
    int64_t n;
    prob p;
    make(&p, MOE_SCHEME_FP8_WBLOCK128_AGROUP128, 1, 8, 50, 1);
    ck_assert_int_eq(cast_differs(&p, &n), 0);
    unmake(&p);
    make(&p, MOE_SCHEME_FP8_WBLOCK128_AGROUP128, 1, 8, 50, 0);
    int64_t d = cast_differs(&p, &n);
    printf("LL fp8 cast vs the scheme's per-128 rule: matched data 0 of %lld groups differ; normal data %lld of %lld "
           "differ (so fp8 runs use matched data)\n", (long long)n, (long long)d, (long long)n);
    fflush(stdout);
    unmake(&p);
}
END_TEST

/* ---- top-1: bit for bit ------------------------------------------------- */

/* One slot per token: the combine's single fmaf from +0 is fl32(w*y) (an
 * exact product rounded once, and +0 + p = p for p = -0 as well), rounded
 * once to x's dtype: the oracle's rb(fl32(w*y) summed from +0). y is the
 * same: the batched experts run the oracle's per-row stages (GEMM1,
 * activation, per-row requantization, GEMM2) on the same rows, and the
 * activations are bf16 copies or, for fp8, the LL cast equal to the
 * scheme's on matched data. T_max > T (padding rows) in one run. */
START_TEST(top1_bit_exact)
{
    int n = 0;
    for (int ci = 0; ci < 3; ci++)
        for (int R = 2; R <= 4; R += 2) {
            prob p;
            make(&p, CASES[ci].sc, 1, R * T, 100 + (uint64_t)R, CASES[ci].matched);
            moe_tensor ref = tt_new(p.xd, 2, p.G, H, 0);
            oracle(&p, &p.w, 0, &ref);
            for (int ei = 0; ei < 2; ei++) {
                moe_tensor out = tt_new(p.xd, 2, p.G, H, 0);
                moe_mk_config c = config(CASES[ci].sc, 1, R);
                if (ei) c.max_tokens = T + 3;
                run_ep(CASES[ci].pf, EXS[ei], &c, &p, &out, 0, NULL, NULL);
                ck_assert_msg(memcmp(out.data, ref.data, out.nbytes) == 0, "%s x %s %s R=%d top-1 differs",
                              CASES[ci].pf, EXS[ei], moe_scheme_name(p.sc), R);
                moe_tensor_free(&out);
                n++;
            }
            moe_tensor_free(&ref);
            unmake(&p);
        }
    printf("top-1: %d EP runs ({deepep_ll bf16, deepep_ll fp8_wblock128_agroup128, pplx bf16} x {naive_batched, "
           "batched_masked}; R 2, 4) bit-exact\n", n);
    fflush(stdout);
}
END_TEST

/* Weights on the input (topk 1): each source rank computes round(x * w)
 * before the dispatch as the oracle does, the combine weighs by 1.0
 * (fmaf(y, 1, +0) = y): bit for bit. */
START_TEST(weights_on_input_bit_exact)
{
    for (int ci = 0; ci < 3; ci++)
        for (int R = 2; R <= 4; R += 2) {
            prob p;
            make(&p, CASES[ci].sc, 1, R * T, 200 + (uint64_t)R, CASES[ci].matched);
            if (CASES[ci].matched) { /* round(x * w) must keep the groups matched: w = 1 or 2^j */
                for (int t = 0; t < p.G; t++) ((float *)p.w.data)[t] = t % 2 ? 0.5f : 1.0f;
            }
            moe_tensor ref = tt_new(p.xd, 2, p.G, H, 0), out = tt_new(p.xd, 2, p.G, H, 0);
            oracle(&p, &p.w, 1, &ref);
            moe_mk_config c = config(CASES[ci].sc, 1, R);
            c.weights_on_input = 1;
            run_ep(CASES[ci].pf, "naive_batched", &c, &p, &out, 0, NULL, NULL);
            ck_assert_msg(memcmp(out.data, ref.data, out.nbytes) == 0, "%s %s R=%d weights on input differs",
                          CASES[ci].pf, moe_scheme_name(p.sc), R);
            moe_tensor_free(&ref), moe_tensor_free(&out);
            unmake(&p);
        }
}
END_TEST

/* ---- top-k: the derived bound ------------------------------------------ */

/* Per element of a token, with y_i the expert output of slot i (x's
 * dtype, identical in both: see top-1) and w_i its f32 weight:
 *   oracle   p_i = fl32(w_i y_i), s = ((+0 + p_1) + p_2) + ... in f32,
 *            O = rb(s)
 *   LL/pplx  a_1 = fmaf(y_1, w_1, +0) = p_1, a_i = fmaf(y_i, w_i, a_{i-1})
 *            (exact product, one rounding), F = rb(a_k)
 * rb rounds to x's dtype (unit roundoff ub = 2^-8 for bf16), f32 has
 * u = 2^-24, g(n) = n u / (1 - n u). With Tx = sum w_i y_i exactly and
 * A = sum |w_i y_i|: in s, slot 1 meets 1 + (k-1) roundings and slot i >= 2
 * meets 1 + (k-i+1) <= k; in a, slot 1 meets k and slot i >= 2 k-i+1. So
 *   |s - Tx| <= g(k) A,  |a - Tx| <= g(k) A,  |s|, |a| <= (1 + g(k)) A,
 *   |F - O| <= |rb(a) - a| + |a - s| + |s - rb(s)|
 *           <= [2 ub (1 + g(k)) + 2 g(k)] A + eta,
 * eta = (2k + 2) 2^-134 covering the absolute error of the 2k f32
 * roundings (<= 2^-150 each) and the 2 bf16 roundings (<= 2^-134 each,
 * half of bf16's subnormal spacing) in the gradual-underflow range. y_i
 * is read back from the oracle itself: with the one-hot weight 1.0 on
 * slot i, moe_ref_forward returns rb(fl32(1 * y_i) + zeros) = y_i. */
static double worst_share = 0.0;

START_TEST(topk_bounded)
{
    const int k = KMAX;
    const double u = ldexp(1.0, -24), ub = ldexp(1.0, -8);
    const double gk = moe_gamma(k, u), coef = 2 * ub * (1 + gk) + 2 * gk, eta = (2 * k + 2) * ldexp(1.0, -134);
    for (int ci = 0; ci < 3; ci++)
        for (int R = 2; R <= 4; R += 2) {
            prob p;
            make(&p, CASES[ci].sc, k, R * T, 300 + (uint64_t)R, CASES[ci].matched);
            moe_tensor ref = tt_new(p.xd, 2, p.G, H, 0);
            oracle(&p, &p.w, 0, &ref);
            moe_tensor y[KMAX], oh = tt_new(MOE_F32, 2, p.G, k, 0);
            for (int i = 0; i < k; i++) {
                memset(oh.data, 0, oh.nbytes);
                for (int t = 0; t < p.G; t++) ((float *)oh.data)[t * k + i] = 1.0f;
                y[i] = tt_new(p.xd, 2, p.G, H, 0);
                oracle(&p, &oh, 0, &y[i]);
            }
            for (int ei = 0; ei < 2; ei++) {
                moe_tensor out = tt_new(p.xd, 2, p.G, H, 0);
                moe_mk_config c = config(CASES[ci].sc, k, R);
                run_ep(CASES[ci].pf, EXS[ei], &c, &p, &out, 0, NULL, NULL);
                double share = 0.0;
                int differ = 0;
                for (int t = 0; t < p.G; t++)
                    for (int h = 0; h < H; h++) {
                        double A = 0.0;
                        for (int i = 0; i < k; i++)
                            A += fabs((double)((float *)p.w.data)[t * k + i] * (double)ld(&y[i], (int64_t)t * H + h));
                        double d = fabs((double)ld(&out, (int64_t)t * H + h) - ld(&ref, (int64_t)t * H + h));
                        double b = coef * A + eta;
                        differ += d != 0.0;
                        ck_assert_msg(d <= b, "%s x %s R=%d t=%d h=%d: |diff| %g > bound %g", CASES[ci].pf, EXS[ei],
                                      R, t, h, d, b);
                        if (d / b > share) share = d / b;
                    }
                printf("bound %-9s x %-14s %-24s R=%d k=%d: %5d of %d elements differ, largest share of bound %.3f\n",
                       CASES[ci].pf, EXS[ei], moe_scheme_name(p.sc), R, k, differ, p.G * H, share);
                fflush(stdout);
                if (share > worst_share) worst_share = share;
                moe_tensor_free(&out);
            }
            for (int i = 0; i < k; i++) moe_tensor_free(&y[i]);
            moe_tensor_free(&oh), moe_tensor_free(&ref);
            unmake(&p);
        }
    printf("EP2 top-k (fmaf combine vs product-then-sum): largest share of the derived bound used %.3f\n",
           worst_share);
    fflush(stdout);
}
END_TEST

/* ---- prepare_async ------------------------------------------------------ */

/* The work run between dispatch and receive: a "shared expert" (the
 * oracle's forward of its own problem), plus the check that the combine
 * has not written out yet (out still holds its 0xA5 fill). */
typedef struct {
    prob *shared;
    moe_tensor *shared_out;
    const moe_tensor *out;
    int calls, out_untouched;
    moe_status ret;
} hook_ctx;

static moe_status between(void *user)
{
    hook_ctx *h = user;
    h->calls++;
    h->out_untouched = 1;
    for (size_t i = 0; i < h->out->nbytes; i++) h->out_untouched &= ((const uint8_t *)h->out->data)[i] == 0xA5;
    if (h->shared) oracle(h->shared, &h->shared->w, 0, h->shared_out);
    return h->ret;
}

START_TEST(async_equals_sync)
{
    static const struct {
        const char *pf, *ex;
    } A[3] = {{"deepep_ht", "ref"}, {"deepep_ll", "naive_batched"}, {"pplx", "batched_masked"}};
    prob sh;
    make(&sh, MOE_SCHEME_BF16, 2, 3, 700, 0);
    moe_tensor sref = tt_new(sh.xd, 2, sh.G, H, 0);
    oracle(&sh, &sh.w, 0, &sref);
    int n = 0;
    for (int ai = 0; ai < 3; ai++)
        for (int R = 2; R <= 4; R += 2) {
            prob p;
            make(&p, MOE_SCHEME_BF16, KMAX, R * T, 600 + (uint64_t)R, 0);
            moe_tensor a = tt_new(p.xd, 2, p.G, H, 0), b = tt_new(p.xd, 2, p.G, H, 0);
            moe_tensor so = tt_new(sh.xd, 2, sh.G, H, 0);
            moe_mk_config c = config(MOE_SCHEME_BF16, KMAX, R);
            run_ep(A[ai].pf, A[ai].ex, &c, &p, &a, 0, NULL, NULL);
            memset(b.data, 0xA5, b.nbytes);
            hook_ctx h = {&sh, &so, &b, 0, 0, MOE_OK};
            run_ep(A[ai].pf, A[ai].ex, &c, &p, &b, 1, between, &h);
            ck_assert_int_eq(h.calls, 1);
            ck_assert_msg(h.out_untouched, "%s R=%d: out written before the hook ran", A[ai].pf, R);
            ck_assert_msg(memcmp(a.data, b.data, a.nbytes) == 0, "%s x %s R=%d: async differs from sync", A[ai].pf,
                          A[ai].ex, R);
            ck_assert_msg(memcmp(so.data, sref.data, so.nbytes) == 0, "shared-expert work differs");
            /* NULL hook: also the synchronous result */
            memset(b.data, 0, b.nbytes);
            run_ep(A[ai].pf, A[ai].ex, &c, &p, &b, 1, NULL, NULL);
            ck_assert_int_eq(memcmp(a.data, b.data, a.nbytes), 0);
            n++;
            /* a failing hook aborts with its status */
            if (R == 2) {
                moe_mk *mk = NULL;
                ck_assert_int_eq(moe_mk_create(A[ai].pf, A[ai].ex, &c, &mk, NULL), MOE_OK);
                views v;
                wrap(&p, R, &b, &v);
                hook_ctx hf = {NULL, NULL, &b, 0, 0, MOE_ERR_INVALID_ARG};
                memset(b.data, 0xA5, b.nbytes);
                ck_assert_int_eq(moe_mk_forward_ranks_async(mk, &p.mw, &v.x3, &v.i3, &v.w3, &v.o3, between, &hf),
                                 MOE_ERR_INVALID_ARG);
                ck_assert_int_eq(hf.calls, 1);
                moe_mk_destroy(mk);
            }
            moe_tensor_free(&a), moe_tensor_free(&b), moe_tensor_free(&so);
            unmake(&p);
        }
    /* a PF without prepare_async */
    prob p;
    make(&p, MOE_SCHEME_BF16, 1, 2 * T, 800, 0);
    moe_mk_config c = config(MOE_SCHEME_BF16, 1, 2);
    moe_mk *mk = NULL;
    ck_assert_int_eq(moe_mk_create("allgather_rs", "ref", &c, &mk, NULL), MOE_OK);
    moe_tensor o = tt_new(p.xd, 2, p.G, H, 0);
    views v;
    wrap(&p, 2, &o, &v);
    ck_assert_int_eq(moe_mk_forward_ranks_async(mk, &p.mw, &v.x3, &v.i3, &v.w3, &v.o3, NULL, NULL),
                     MOE_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "allgather_rs"));
    moe_mk_destroy(mk);
    moe_tensor_free(&o);
    unmake(&p);
    moe_tensor_free(&sref);
    unmake(&sh);
    printf("prepare_async: %d runs ({deepep_ht, deepep_ll, pplx}; R 2, 4; k 3) equal the synchronous path bit for bit "
           "with shared-expert work in between\n", n);
    fflush(stdout);
}
END_TEST

/* ---- refusals ----------------------------------------------------------- */

static void expect_rule(const char *pf, const char *ex, const moe_mk_config *c, const char *rule)
{
    moe_mk *mk = (moe_mk *)&mk;
    moe_compat_verdict v;
    memset(&v, 0, sizeof v);
    ck_assert_int_eq(moe_mk_create(pf, ex, c, &mk, &v), MOE_ERR_INCOMPATIBLE);
    ck_assert_ptr_null(mk);
    int found = 0;
    for (int i = 0; i < v.nfail; i++) found |= strcmp(v.fail[i]->id, rule) == 0;
    ck_assert_msg(found, "%s x %s: rule %s did not fire", pf, ex, rule);
    ck_assert_msg(strstr(moe_last_error(), rule) != NULL, "%s x %s: message lacks %s: %s", pf, ex, rule,
                  moe_last_error());
}

START_TEST(refusals)
{
    moe_mk_config c = config(MOE_SCHEME_BF16, 2, 2);
    c.invalid_ids = 1; /* pplx: uint32 indices, every one valid */
    expect_rule("pplx", "naive_batched", &c, "invalid-ids-refused");
    expect_rule("pplx", "batched_masked", &c, "invalid-ids-refused");
    c = config(MOE_SCHEME_BF16, 2, 2);
    c.hidden = 128;
    expect_rule("deepep_ll", "naive_batched", &c, "hidden-size-unsupported");
    c = config(MOE_SCHEME_BF16, 2, 2);
    expect_rule("deepep_ll", "ref", &c, "format-mismatch");
    /* a -1 id at run time: refused with the rule id, nothing dispatched */
    prob p;
    make(&p, MOE_SCHEME_BF16, 2, 2 * T, 900, 0);
    moe_mk *mk = NULL;
    ck_assert_int_eq(moe_mk_create("pplx", "naive_batched", &c, &mk, NULL), MOE_OK);
    ((int32_t *)p.ids.data)[3] = -1;
    moe_tensor o = tt_new(p.xd, 2, p.G, H, 0);
    views v;
    wrap(&p, 2, &o, &v);
    ck_assert_int_eq(moe_mk_forward_ranks(mk, &p.mw, &v.x3, &v.i3, &v.w3, &v.o3), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "invalid-ids-refused"));
    moe_mk_destroy(mk);
    /* deepep_ll: more tokens per rank than cfg.max_tokens */
    ((int32_t *)p.ids.data)[3] = 1;
    c.max_tokens = T - 1;
    ck_assert_int_eq(moe_mk_create("deepep_ll", "naive_batched", &c, &mk, NULL), MOE_OK);
    ck_assert_int_eq(moe_mk_forward_ranks(mk, &p.mw, &v.x3, &v.i3, &v.w3, &v.o3), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "max_tokens"));
    moe_mk_destroy(mk);
    moe_tensor_free(&o);
    unmake(&p);
}
END_TEST

static Suite *ep2_suite(void)
{
    Suite *s = suite_create("modular_ep2");
    TCase *tc = tcase_create("batched_ep");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, cast_agreement);
    tcase_add_test(tc, top1_bit_exact);
    tcase_add_test(tc, weights_on_input_bit_exact);
    tcase_add_test(tc, topk_bounded);
    tcase_add_test(tc, async_equals_sync);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ep2_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
