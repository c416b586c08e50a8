/* The modular kernel with expert parallelism, ranks simulated in one call
 * (moe_mk_forward_ranks): allgather_rs and deepep_ht with the ref and
 * triton_like experts at R = 2 and 4 against moe_ref_forward on the same
 * G = R*T tokens (the rank-major [R, T, H] buffer is the [G, H] one):
 * top-1 bit for bit, top-k within the bound derived below; R = 1 through
 * the EP PFs equals noep; weights on the input; refusals with rule ids. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/bounds.h"
#include "moe/format.h"
#include "moe/forward.h"
#include "moe/modular.h"
#include "moe/rng.h"
#include "mk_fixture.h"
#include "test_tensors.h"

enum { T = 7, H = 128, I = 64, E = 8, KMAX = 3 };

typedef mkf_prob prob;

static void make(prob *p, moe_scheme sc, int k, int G, uint64_t seed)
{
    mkf_make(p, sc, k, G, H, I, E, seed, 0.1f, 0, 0);
}

static void unmake(prob *p) { mkf_unmake(p); }
static moe_mk_config config(moe_scheme sc, int k, int R) { return mkf_config(sc, k, R, H, I, E); }
static void oracle(const prob *p, const moe_tensor *w, int woi, moe_tensor *out) { mkf_oracle(p, w, woi, out); }

/* (pf, ex) at world R on p, rank-major views of p's [G, ..] buffers. */
static void run_ep(const char *pf, const char *ex, const moe_mk_config *c, prob *p, moe_tensor *out)
{
    int R = c->world_size;
    int64_t Tr = p->G / R;
    moe_mk *mk = NULL;
    ck_assert_msg(moe_mk_create(pf, ex, c, &mk, NULL) == MOE_OK, "%s x %s R=%d: %s", pf, ex, R, moe_last_error());
    moe_tensor x3, i3, w3, o3;
    ck_assert_int_eq(moe_tensor_wrap(&x3, p->xd, 3, (int64_t[3]){R, Tr, H}, p->x.data, p->x.nbytes, p->x.device), 0);
    ck_assert_int_eq(moe_tensor_wrap(&i3, MOE_I32, 3, (int64_t[3]){R, Tr, p->k}, p->ids.data, p->ids.nbytes,
                                     p->ids.device), 0);
    ck_assert_int_eq(moe_tensor_wrap(&w3, MOE_F32, 3, (int64_t[3]){R, Tr, p->k}, p->w.data, p->w.nbytes,
                                     p->w.device), 0);
    ck_assert_int_eq(moe_tensor_wrap(&o3, p->xd, 3, (int64_t[3]){R, Tr, H}, out->data, out->nbytes, out->device), 0);
    ck_assert_msg(moe_mk_forward_ranks(mk, &p->mw, &x3, &i3, &w3, &o3) == MOE_OK, "%s x %s %s R=%d k=%d: %s", pf, ex,
                  moe_scheme_name(p->sc), R, p->k, moe_last_error());
    moe_mk_destroy(mk);
}

static void run_1(const char *pf, const char *ex, const moe_mk_config *c, prob *p, moe_tensor *out)
{
    moe_mk *mk = NULL;
    ck_assert_msg(moe_mk_create(pf, ex, c, &mk, NULL) == MOE_OK, "%s x %s: %s", pf, ex, moe_last_error());
    ck_assert_msg(moe_mk_forward(mk, &p->mw, &p->x, &p->ids, &p->w, out) == MOE_OK, "%s x %s: %s", pf, ex,
                  moe_last_error());
    moe_mk_destroy(mk);
}

static float ld(const moe_tensor *t, int64_t i)
{
    if (t->dtype == MOE_BF16) return moe_bf16_to_f32(((const uint16_t *)t->data)[i]);
    return ((const float *)t->data)[i];
}

static const char *const PFS[2] = {"allgather_rs", "deepep_ht"};
static const moe_scheme SCHEMES[2] = {MOE_SCHEME_BF16, MOE_SCHEME_FP8_WCHANNEL_ATOKEN};

/* ---- top-1: bit for bit ------------------------------------------------- */

/* One slot per token: exactly one rank holds it, its partial is
 * round(fl32(w*y)) (a one-term f32 sum), every other rank's partial (or
 * absence, deepep_ht) contributes +0 to the combine's f32 sum, which then
 * rounds an already representable value: the EP result equals the
 * single-rank one bit for bit. Per-token / unquantized activations make y
 * independent of which rows share a rank. ref: against moe_ref_forward;
 * triton_like: against noep + triton_like on the G tokens. */
START_TEST(top1_bit_exact)
{
    int n = 0;
    for (int si = 0; si < 2; si++)
        for (int R = 2; R <= 4; R += 2) {
            prob p;
            make(&p, SCHEMES[si], 1, R * T, 100 + (uint64_t)R);
            moe_tensor ref = tt_new(p.xd, 2, p.G, H, 0), ref_tl = tt_new(p.xd, 2, p.G, H, 0);
            oracle(&p, &p.w, 0, &ref);
            moe_mk_config c1 = config(SCHEMES[si], 1, 1);
            run_1("noep", "triton_like", &c1, &p, &ref_tl);
            for (int pi = 0; pi < 2; pi++)
                for (int ei = 0; ei < 2; ei++) {
                    const char *ex = ei ? "triton_like" : "ref";
                    moe_tensor out = tt_new(p.xd, 2, p.G, H, 0);
                    moe_mk_config c = config(SCHEMES[si], 1, R);
                    /* allgather_rs hands every rank -1 slots: triton_like's expert map (ignore
                     * invalid) gives them no slot, zero rows, +0 in the combine */
                    run_ep(PFS[pi], ex, &c, &p, &out);
                    ck_assert_msg(memcmp(out.data, (ei ? &ref_tl : &ref)->data, out.nbytes) == 0,
                                  "%s x %s %s R=%d top-1 differs", PFS[pi], ex, moe_scheme_name(p.sc), R);
                    moe_tensor_free(&out);
                    n++;
                }
            moe_tensor_free(&ref), moe_tensor_free(&ref_tl);
            unmake(&p);
        }
    printf("top-1: %d EP runs ({allgather_rs, deepep_ht} x {ref, triton_like}; bf16, fp8_wchannel_atoken; "
           "R 2, 4) bit-exact\n", n);
    fflush(stdout);
}
END_TEST

/* Weights on the input (topk 1): each source rank computes round(x * w)
 * before quantizing, as the oracle does: bit for bit. */
START_TEST(weights_on_input_bit_exact)
{
    for (int pi = 0; pi < 2; pi++)
        for (int R = 2; R <= 4; R += 2) {
            prob p;
            make(&p, MOE_SCHEME_BF16, 1, R * T, 200 + (uint64_t)R);
            moe_tensor ref = tt_new(p.xd, 2, p.G, H, 0), out = tt_new(p.xd, 2, p.G, H, 0);
            oracle(&p, &p.w, 1, &ref);
            moe_mk_config c = config(MOE_SCHEME_BF16, 1, R);
            c.weights_on_input = 1;
            run_ep(PFS[pi], "ref", &c, &p, &out);
            ck_assert_msg(memcmp(out.data, ref.data, out.nbytes) == 0, "%s R=%d weights on input differs", PFS[pi], R);
            moe_tensor_free(&ref), moe_tensor_free(&out);
            unmake(&p);
        }
}
END_TEST

/* ---- top-k: the derived bound ------------------------------------------ */

/* Model (ref experts, WAR NoOp: they weight and reduce in f32). Per slot
 * i of a token, p_i = fl32(w_i * y_i) with y_i the expert's GEMM2 row
 * element (x's dtype; identical under EP, as the activations are
 * unquantized or quantized per token). The oracle computes
 *   O = rb(s),  s = fl32 sum of the k terms from +0 in slot order;
 * the EP system computes on each rank j over its n_j <= k local slots
 * (the -1 slots add exact zeros)
 *   P_j = rb(s_j),  s_j = fl32 sum of rank j's terms,
 * and the combine F = rb(fl32 sum over j of P_j) (R terms; deepep_ht sums
 * only the ranks holding the token, which changes nothing below).
 * rb rounds to x's dtype with unit roundoff ub (bf16 2^-8), f32 has
 * u = 2^-24, g(n) = n u / (1 - n u) bounds a recursive n+1-term sum's
 * relative error against the sum of magnitudes. With Tx = sum p_i exactly
 * and A = sum |p_i| (A_j per rank):
 *   |s - Tx| <= g(k-1) A,   |O - Tx| <= g(k-1) A + ub (1 + g(k-1)) A
 *   |P_j - T_j| <= e1 A_j,  e1 = g(k-1) + ub (1 + g(k-1))
 *   |fl32 sum P_j - sum P_j| <= g(R-1) (1 + e1) A
 *   |F - fl32 sum| <= ub (1 + g(R-1)) (1 + e1) A
 *   => |F - O| <= [e1 + g(R-1)(1+e1) + ub(1+g(R-1))(1+e1) + g(k-1) + ub(1+g(k-1))] A + eta,
 * eta = (R + 2) * 2^-133 for the absolute error of roundings in the
 * subnormal range (bf16 shares f32's exponent range, half its spacing
 * there is 2^-134). y_i is read back from the oracle itself: with the
 * one-hot weight 1.0 on slot i, moe_ref_forward returns rb(fl32(1 * y_i)
 * + zeros) = y_i exactly. */
static double worst_share = 0.0;

START_TEST(topk_bounded)
{
    const int k = KMAX;
    const double u = ldexp(1.0, -24), ub = ldexp(1.0, -8);
    for (int si = 0; si < 2; si++)
        for (int R = 2; R <= 4; R += 2) {
            prob p;
            make(&p, SCHEMES[si], k, R * T, 300 + (uint64_t)R);
            moe_tensor ref = tt_new(p.xd, 2, p.G, H, 0);
            oracle(&p, &p.w, 0, &ref);
            moe_tensor y[KMAX], oh = tt_new(MOE_F32, 2, p.G, k, 0);
            for (int i = 0; i < k; i++) {
                memset(oh.data, 0, oh.nbytes);
                for (int t = 0; t < p.G; t++) ((float *)oh.data)[t * k + i] = 1.0f;
                y[i] = tt_new(p.xd, 2, p.G, H, 0);
                oracle(&p, &oh, 0, &y[i]);
            }
            double g1 = moe_gamma(k - 1, u), gR = moe_gamma(R - 1, u), e1 = g1 + ub * (1 + g1);
            double coef = e1 + gR * (1 + e1) + ub * (1 + gR) * (1 + e1) + g1 + ub * (1 + g1);
            double eta = (R + 2) * ldexp(1.0, -133);
            for (int pi = 0; pi < 2; pi++) {
                moe_tensor out = tt_new(p.xd, 2, p.G, H, 0);
                moe_mk_config c = config(SCHEMES[si], k, R);
                run_ep(PFS[pi], "ref", &c, &p, &out);
                double share = 0.0;
                int differ = 0;
                for (int t = 0; t < p.G; t++)
                    for (int h = 0; h < H; h++) {
                        double A = 0.0;
                        for (int i = 0; i < k; i++) {
                            float pi_ = ((float *)p.w.data)[t * k + i] * ld(&y[i], (int64_t)t * H + h);
                            A += fabs((double)pi_);
                        }
                        double d = fabs((double)ld(&out, (int64_t)t * H + h) - ld(&ref, (int64_t)t * H + h));
                        double b = coef * A + eta;
                        differ += d != 0.0;
                        ck_assert_msg(d <= b, "%s R=%d t=%d h=%d: |diff| %g > bound %g", PFS[pi], R, t, h, d, b);
                        if (d / b > share) share = d / b;
                    }
                printf("bound %-12s x ref %-20s R=%d k=%d: %4d of %d elements differ, largest share of bound %.3f\n",
                       PFS[pi], moe_scheme_name(p.sc), R, k, differ, p.G * H, share);
                fflush(stdout);
                if (share > worst_share) worst_share = share;
                moe_tensor_free(&out);
            }
            for (int i = 0; i < k; i++) moe_tensor_free(&y[i]);
            moe_tensor_free(&oh), moe_tensor_free(&ref);
            unmake(&p);
        }
    printf("EP top-k: largest share of the derived bound used %.3f\n", worst_share);
    fflush(stdout);
}
END_TEST

/* ---- R = 1 through the EP PFs equals noep ------------------------------- */

START_TEST(world1_equals_noep)
{
    for (int si = 0; si < 2; si++)
        for (int ei = 0; ei < 2; ei++) {
            const char *ex = ei ? "triton_like" : "ref";
            prob p;
            make(&p, SCHEMES[si], KMAX, T, 400);
            moe_tensor a = tt_new(p.xd, 2, p.G, H, 0);
            moe_mk_config c = config(SCHEMES[si], p.k, 1);
            run_1("noep", ex, &c, &p, &a);
            for (int pi = 0; pi < 2; pi++) {
                moe_tensor b = tt_new(p.xd, 2, p.G, H, 0), b3 = tt_new(p.xd, 2, p.G, H, 0);
                run_1(PFS[pi], ex, &c, &p, &b);
                run_ep(PFS[pi], ex, &c, &p, &b3);
                ck_assert_msg(memcmp(a.data, b.data, a.nbytes) == 0, "%s x %s R=1 differs from noep", PFS[pi], ex);
                ck_assert_msg(memcmp(a.data, b3.data, a.nbytes) == 0, "%s x %s R=1 (ranks) differs", PFS[pi], ex);
                moe_tensor_free(&b), moe_tensor_free(&b3);
            }
            moe_tensor_free(&a);
            unmake(&p);
        }
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
    moe_mk_config c = config(MOE_SCHEME_BF16, 2, 4);
    c.num_experts = 6; /* E not divisible by R */
    expect_rule("allgather_rs", "ref", &c, "ep-experts-divisible");
    expect_rule("deepep_ht", "triton_like", &c, "ep-experts-divisible");
    c = config(MOE_SCHEME_BF16, 2, 2);
    c.invalid_ids = 1; /* pplx refuses -1 ids */
    expect_rule("pplx", "naive_batched", &c, "invalid-ids-refused");
    c = config(MOE_SCHEME_BF16, 2, 2);
    expect_rule("noep", "ref", &c, "world-unsupported");
    expect_rule("allgather_rs", "naive_batched", &c, "format-mismatch");
    moe_mk *mk = NULL;
    /* compatible, not implemented (every registry type is implemented
     * now: pplx, deepep_ll in tests/check_modular_ep2.c, hybrid_ep in
     * tests/check_modular_hep.c): NVFP4's swizzled activation scales */
    moe_mk_config cb = config(MOE_SCHEME_NVFP4, 2, 2);
    ck_assert_int_eq(moe_mk_create("allgather_rs", "permute_grouped", &cb, &mk, NULL), MOE_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "swizzle"));
    ck_assert_ptr_null(mk);
    /* per-tensor activation scales with R > 1 */
    c = config(MOE_SCHEME_FP8_WCHANNEL_ATENSOR, 2, 2);
    ck_assert_int_eq(moe_mk_create("allgather_rs", "ref", &c, &mk, NULL), MOE_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "per-tensor"));
    /* rank-major entry needed for R > 1; wrong leading extent */
    prob p;
    make(&p, MOE_SCHEME_BF16, 2, 2 * T, 500);
    c = config(MOE_SCHEME_BF16, 2, 2);
    ck_assert_int_eq(moe_mk_create("deepep_ht", "ref", &c, &mk, NULL), MOE_OK);
    moe_tensor out = tt_new(p.xd, 2, p.G, H, 0);
    ck_assert_int_eq(moe_mk_forward(mk, &p.mw, &p.x, &p.ids, &p.w, &out), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "moe_mk_forward_ranks"));
    moe_tensor x3, i3, w3, o3;
    ck_assert_int_eq(moe_tensor_wrap(&x3, p.xd, 3, (int64_t[3]){1, p.G, H}, p.x.data, p.x.nbytes, p.x.device), 0);
    ck_assert_int_eq(moe_tensor_wrap(&i3, MOE_I32, 3, (int64_t[3]){1, p.G, 2}, p.ids.data, p.ids.nbytes, p.ids.device), 0);
    ck_assert_int_eq(moe_tensor_wrap(&w3, MOE_F32, 3, (int64_t[3]){1, p.G, 2}, p.w.data, p.w.nbytes, p.w.device), 0);
    ck_assert_int_eq(moe_tensor_wrap(&o3, p.xd, 3, (int64_t[3]){1, p.G, H}, out.data, out.nbytes, out.device), 0);
    ck_assert_int_eq(moe_mk_forward_ranks(mk, &p.mw, &x3, &i3, &w3, &o3), MOE_ERR_SHAPE);
    /* T = 0: an empty problem */
    moe_tensor x0, i0, w0, o0;
    ck_assert_int_eq(moe_tensor_wrap(&x0, p.xd, 3, (int64_t[3]){2, 0, H}, NULL, 0, p.x.device), 0);
    ck_assert_int_eq(moe_tensor_wrap(&i0, MOE_I32, 3, (int64_t[3]){2, 0, 2}, NULL, 0, p.x.device), 0);
    ck_assert_int_eq(moe_tensor_wrap(&w0, MOE_F32, 3, (int64_t[3]){2, 0, 2}, NULL, 0, p.x.device), 0);
    ck_assert_int_eq(moe_tensor_wrap(&o0, p.xd, 3, (int64_t[3]){2, 0, H}, NULL, 0, p.x.device), 0);
    ck_assert_msg(moe_mk_forward_ranks(mk, &p.mw, &x0, &i0, &w0, &o0) == MOE_OK, "%s", moe_last_error());
    moe_mk_destroy(mk);
    moe_tensor_free(&out);
    unmake(&p);
}
END_TEST

static Suite *ep_suite(void)
{
    Suite *s = suite_create("modular_ep");
    TCase *tc = tcase_create("ranks");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, top1_bit_exact);
    tcase_add_test(tc, weights_on_input_bit_exact);
    tcase_add_test(tc, topk_bounded);
    tcase_add_test(tc, world1_equals_noep);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ep_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
