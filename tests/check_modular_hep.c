/* The modular kernel's Grouped-format expert-parallel PF, ranks simulated
 * in one call: hybrid_ep (Hybrid-EP dispatch_with_permute, pad 128,
 * combine_with_unpermute) with the grouped_contig experts on the Grouped
 * rows, fp8_wblock128_agroup128 (the only scheme the pair shares: the
 * grouped_contig row is block fp8 only), at R = 1, 2 and 4 against
 * moe_ref_forward on the same G = R*T tokens (the rank-major [R, T, H]
 * buffer is the [G, H] one): top-1 bit for bit, top-k within the bound
 * derived below; experts with more rows than one pad block; prepare_async
 * equals the synchronous path bit for bit; refusals with rule ids. */
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

enum { T = 4, H = 256, I = 128, E = 8, KMAX = 3, TSKEW = 72 };
#define SC MOE_SCHEME_FP8_WBLOCK128_AGROUP128

typedef mkf_prob prob;
typedef mkf_views views;

/* skew: the first 130 tokens start at expert 1 (130 + rows on experts 1,
 * 4, 7: more than one 128-row pad block), the others at a random expert;
 * slots take experts base + 3j (distinct for k <= 3, spread over ranks) */
static void make(prob *p, int k, int G, uint64_t seed, int skew)
{
    mkf_make(p, SC, k, G, H, I, E, seed, 0.05f, 0, skew ? 130 : 0);
}

static void unmake(prob *p) { mkf_unmake(p); }
static moe_mk_config config(moe_scheme sc, int k, int R) { return mkf_config(sc, k, R, H, I, E); }
static void oracle(const prob *p, const moe_tensor *w, moe_tensor *out) { mkf_oracle(p, w, 0, out); }
static void wrap(prob *p, int R, moe_tensor *out, views *v) { mkf_wrap(p, R, out, v); }

/* hybrid_ep x grouped_contig at world R on p; R = 1 through moe_mk_forward
 * on the [G, H] tensors; async: through moe_mk_forward_ranks_async */
static void run_ep(int R, prob *p, moe_tensor *out, int async, moe_mk_between_fn fn, void *user)
{
    moe_mk_config c = config(SC, p->k, R);
    moe_mk *mk = NULL;
    ck_assert_msg(moe_mk_create("hybrid_ep", "grouped_contig", &c, &mk, NULL) == MOE_OK, "R=%d: %s", R,
                  moe_last_error());
    views v;
    wrap(p, R, out, &v);
    moe_status st = async ? moe_mk_forward_ranks_async(mk, &p->mw, &v.x3, &v.i3, &v.w3, &v.o3, fn, user)
                    : R == 1 ? moe_mk_forward(mk, &p->mw, &p->x, &p->ids, &p->w, out)
                             : moe_mk_forward_ranks(mk, &p->mw, &v.x3, &v.i3, &v.w3, &v.o3);
    ck_assert_msg(st == MOE_OK, "hybrid_ep R=%d k=%d: %s", R, p->k, moe_last_error());
    moe_mk_destroy(mk);
}

static float ld(const moe_tensor *t, int64_t i) { return moe_bf16_to_f32(((const uint16_t *)t->data)[i]); }

/* ---- top-1: bit for bit ------------------------------------------------- */

/* One slot per token, y its expert output in bf16: the grouped experts
 * run the oracle's per-row stages on the same rows (the source rank
 * quantizes its rows with the scheme's per-128 rule, a per-row rule, the
 * dispatch moves the bytes and scales as bits; GEMM1, activation, per-row
 * requantization, GEMM2, pads on expert -1), so y is the oracle's. Then
 * z = rb(fl32(w*y)); the rank's unpermute rb(+0 + z) = z and the combine
 * rb(+0 + z) = z (z is bf16, +0 + v = v); the oracle is rb(+0 + fl32(w*y))
 * = rb(fl32(w*y)) = z. */
START_TEST(top1_bit_exact)
{
    int n = 0;
    static const struct {
        int R, G, skew;
    } C[5] = {{1, T, 0}, {2, 2 * T, 0}, {4, 4 * T, 0}, {2, 2 * TSKEW, 1}, {4, 4 * TSKEW / 2, 1}};
    for (int ci = 0; ci < 5; ci++) {
        prob p;
        make(&p, 1, C[ci].G, 100 + (uint64_t)ci, C[ci].skew);
        moe_tensor ref = tt_new(p.xd, 2, p.G, H, 0), out = tt_new(p.xd, 2, p.G, H, 0);
        oracle(&p, &p.w, &ref);
        run_ep(C[ci].R, &p, &out, 0, NULL, NULL);
        ck_assert_msg(memcmp(out.data, ref.data, out.nbytes) == 0, "R=%d G=%d top-1 differs", C[ci].R, p.G);
        moe_tensor_free(&out), moe_tensor_free(&ref);
        unmake(&p);
        n++;
    }
    printf("top-1: %d hybrid_ep x grouped_contig runs (fp8_wblock128_agroup128; R 1, 2, 4; two with an expert of "
           "130 rows = two pad blocks) bit-exact\n", n);
    fflush(stdout);
}
END_TEST

/* ---- top-k: the derived bound ------------------------------------------ */

/* Per element of a token, slot i's expert output y_i (bf16, the same in
 * both paths: see top-1) and f32 prob w_i; P_i = w_i y_i exactly,
 * A = sum |P_i|, Tx = sum P_i. u = 2^-24 (f32), ub = 2^-8 (bf16 unit
 * roundoff), g(n) = n u / (1 - n u), rb = RNE to bf16.
 *   oracle  p_i = fl32(P_i); s = f32 sum from +0 in slot order (each term
 *           meets its product and <= k-1 adds): |s - Tx| <= g(k) A,
 *           |s| <= (1 + g(k)) A; O = rb(s), |O - s| <= ub |s|. So
 *           |O - Tx| <= c_o A, c_o = g(k) + ub (1 + g(k)).
 *   hep     z_i = rb(fl32(P_i)) (the experts' prob multiply):
 *           |z_i - P_i| <= c0 |P_i|, c0 = u + ub (1 + u); Z = sum |z_i|
 *           <= (1 + c0) A. Rank j holding n_j <= k slots sums its z_i in
 *           f32 from +0 (a_j, n_j - 1 rounded adds): |a_j - sum_j z_i| <=
 *           g1 sum_j |z_i|, g1 = g(k-1); q_j = rb(a_j): |q_j - a_j| <=
 *           ub (1 + g1) sum_j |z_i|. The home rank sums the m <= k
 *           partials in f32 (C): |C - sum q_j| <= g1 Q Z with
 *           sum |q_j| <= Q Z, Q = (1 + ub)(1 + g1); F = rb(C):
 *           |F - C| <= ub (1 + g1) Q Z. So
 *           |F - Tx| <= [(ub (1 + g1) + g1) Q + ub (1 + g1) + g1] Z + c0 A
 *                    <= c_h A, c_h = (ub (1 + g1) + g1)(Q + 1)(1 + c0) + c0.
 *   |F - O| <= (c_h + c_o) A + eta. eta: in gradual underflow each rounding
 * has an absolute error instead, <= 2^-134 for bf16 (half its subnormal
 * spacing) and <= 2^-150 for f32; the two paths round at most k + R + 2
 * times to bf16 and 4k times in f32; doubled to cover their growth through
 * the later (1 + g) factors (each < 2):
 * eta = 2 [(k + R + 2) 2^-134 + 4k 2^-150]. y_i is read back from the
 * oracle: with the one-hot weight 1.0 on slot i it returns
 * rb(fl32(1 * y_i) plus zeros) = y_i. */
static double worst_share = 0.0;

START_TEST(topk_bounded)
{
    const int k = KMAX;
    const double u = ldexp(1.0, -24), ub = ldexp(1.0, -8);
    const double g1 = moe_gamma(k - 1, u), gk = moe_gamma(k, u), c0 = u + ub * (1 + u), Q = (1 + ub) * (1 + g1);
    const double c_o = gk + ub * (1 + gk), c_h = (ub * (1 + g1) + g1) * (Q + 1) * (1 + c0) + c0;
    static const struct {
        int R, G, skew;
    } C[5] = {{1, T, 0}, {2, 2 * T, 0}, {4, 4 * T, 0}, {2, 2 * TSKEW, 1}, {4, 4 * TSKEW / 2, 1}};
    for (int ci = 0; ci < 5; ci++) {
        int R = C[ci].R;
        const double coef = c_h + c_o, eta = 2 * ((k + R + 2) * ldexp(1.0, -134) + 4 * k * ldexp(1.0, -150));
        prob p;
        make(&p, k, C[ci].G, 300 + (uint64_t)ci, C[ci].skew);
        moe_tensor ref = tt_new(p.xd, 2, p.G, H, 0), out = tt_new(p.xd, 2, p.G, H, 0);
        oracle(&p, &p.w, &ref);
        moe_tensor y[KMAX], oh = tt_new(MOE_F32, 2, p.G, k, 0);
        for (int i = 0; i < k; i++) {
            memset(oh.data, 0, oh.nbytes);
            for (int t = 0; t < p.G; t++) ((float *)oh.data)[t * k + i] = 1.0f;
            y[i] = tt_new(p.xd, 2, p.G, H, 0);
            oracle(&p, &oh, &y[i]);
        }
        run_ep(R, &p, &out, 0, NULL, NULL);
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
                ck_assert_msg(d <= b, "R=%d t=%d h=%d: |diff| %g > bound %g", R, t, h, d, b);
                if (d / b > share) share = d / b;
            }
        printf("bound hybrid_ep x grouped_contig %s R=%d k=%d G=%d: %5d of %d elements differ, largest share of "
               "bound %.3f\n", moe_scheme_name(SC), R, k, p.G, differ, p.G * H, share);
        fflush(stdout);
        if (share > worst_share) worst_share = share;
        for (int i = 0; i < k; i++) moe_tensor_free(&y[i]);
        moe_tensor_free(&oh), moe_tensor_free(&ref), moe_tensor_free(&out);
        unmake(&p);
    }
    printf("HEP top-k (per-slot and per-rank bf16 roundings vs one f32 sum): largest share of the derived bound "
           "used %.3f (coefficient %.4g of A)\n", worst_share, c_h + c_o);
    fflush(stdout);
}
END_TEST

/* ---- prepare_async ------------------------------------------------------ */

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
    if (h->shared) oracle(h->shared, &h->shared->w, h->shared_out);
    return h->ret;
}

START_TEST(async_equals_sync)
{
    prob sh;
    make(&sh, 2, 3, 700, 0);
    moe_tensor sref = tt_new(sh.xd, 2, sh.G, H, 0);
    oracle(&sh, &sh.w, &sref);
    int n = 0;
    for (int R = 2; R <= 4; R += 2) {
        prob p;
        make(&p, KMAX, R * T, 600 + (uint64_t)R, 0);
        moe_tensor a = tt_new(p.xd, 2, p.G, H, 0), b = tt_new(p.xd, 2, p.G, H, 0);
        moe_tensor so = tt_new(sh.xd, 2, sh.G, H, 0);
        run_ep(R, &p, &a, 0, NULL, NULL);
        memset(b.data, 0xA5, b.nbytes);
        hook_ctx h = {&sh, &so, &b, 0, 0, MOE_OK};
        run_ep(R, &p, &b, 1, between, &h);
        ck_assert_int_eq(h.calls, 1);
        ck_assert_msg(h.out_untouched, "R=%d: out written before the hook ran", R);
        ck_assert_msg(memcmp(a.data, b.data, a.nbytes) == 0, "R=%d: async differs from sync", R);
        ck_assert_msg(memcmp(so.data, sref.data, so.nbytes) == 0, "shared-expert work differs");
        memset(b.data, 0, b.nbytes);
        run_ep(R, &p, &b, 1, NULL, NULL);
        ck_assert_int_eq(memcmp(a.data, b.data, a.nbytes), 0);
        n++;
        /* a failing hook aborts with its status */
        moe_mk_config c = config(SC, KMAX, R);
        moe_mk *mk = NULL;
        ck_assert_int_eq(moe_mk_create("hybrid_ep", "grouped_contig", &c, &mk, NULL), MOE_OK);
        views v;
        wrap(&p, R, &b, &v);
        hook_ctx hf = {NULL, NULL, &b, 0, 0, MOE_ERR_INVALID_ARG};
        memset(b.data, 0xA5, b.nbytes);
        ck_assert_int_eq(moe_mk_forward_ranks_async(mk, &p.mw, &v.x3, &v.i3, &v.w3, &v.o3, between, &hf),
                         MOE_ERR_INVALID_ARG);
        ck_assert_int_eq(hf.calls, 1);
        moe_mk_destroy(mk);
        moe_tensor_free(&a), moe_tensor_free(&b), moe_tensor_free(&so);
        unmake(&p);
    }
    moe_tensor_free(&sref);
    unmake(&sh);
    printf("prepare_async: %d hybrid_ep runs (R 2, 4; k 3) equal the synchronous path bit for bit with "
           "shared-expert work in between\n", n);
    fflush(stdout);
}
END_TEST

/* ---- refusals ----------------------------------------------------------- */

static void expect_rule(const char *pf, const char *ex, const moe_mk_config *c, const char *rule)
{
    moe_mk *mk = (moe_mk *)&mk;
    moe_compat_verdict v;
    memset(&v, 0, sizeof v);
    moe_status st = moe_mk_create(pf, ex, c, &mk, &v);
    ck_assert_msg(st == MOE_ERR_INCOMPATIBLE, "%s x %s: rule %s: status %s", pf, ex, rule, moe_status_str(st));
    ck_assert_ptr_null(mk);
    int found = 0;
    for (int i = 0; i < v.nfail; i++) found |= strcmp(v.fail[i]->id, rule) == 0;
    ck_assert_msg(found, "%s x %s: rule %s did not fire", pf, ex, rule);
    ck_assert_msg(strstr(moe_last_error(), rule) != NULL, "%s x %s: message lacks %s: %s", pf, ex, rule,
                  moe_last_error());
}

START_TEST(refusals)
{
    /* weights on the input: Hybrid-EP passes the probs to the experts */
    moe_mk_config c = config(SC, 1, 2);
    c.weights_on_input = 1;
    expect_rule("hybrid_ep", "grouped_contig", &c, "weight-on-input-unsupported");
    c.world_size = 4;
    expect_rule("hybrid_ep", "grouped_contig", &c, "weight-on-input-unsupported");
    /* -1 ids: the routing map cannot scatter them */
    c = config(SC, 2, 2);
    c.invalid_ids = 1;
    expect_rule("hybrid_ep", "grouped_contig", &c, "invalid-ids-refused");
    /* bf16: the PF carries it, the DeepGEMM-contiguous experts are block
     * fp8 only (their registry row), and no other experts type takes the
     * Grouped format */
    c = config(MOE_SCHEME_BF16, 2, 2);
    expect_rule("hybrid_ep", "grouped_contig", &c, "scheme-unsupported-experts");
    expect_rule("hybrid_ep", "ref", &c, "format-mismatch");
    c = config(SC, 2, 4);
    c.num_experts = 6; /* E not divisible by R = 4 */
    expect_rule("hybrid_ep", "grouped_contig", &c, "ep-experts-divisible");
    /* a -1 id at run time: refused with the rule id */
    prob p;
    make(&p, 2, 2 * T, 900, 0);
    moe_mk *mk = NULL;
    c = config(SC, 2, 2);
    ck_assert_int_eq(moe_mk_create("hybrid_ep", "grouped_contig", &c, &mk, NULL), MOE_OK);
    ((int32_t *)p.ids.data)[3] = -1;
    moe_tensor o = tt_new(p.xd, 2, p.G, H, 0);
    views v;
    wrap(&p, 2, &o, &v);
    ck_assert_int_eq(moe_mk_forward_ranks(mk, &p.mw, &v.x3, &v.i3, &v.w3, &v.o3), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "invalid-ids-refused"));
    /* R > 1 needs the rank-major entry */
    ((int32_t *)p.ids.data)[3] = 1;
    ck_assert_int_eq(moe_mk_forward(mk, &p.mw, &p.x, &p.ids, &p.w, &o), MOE_ERR_INVALID_ARG);
    /* T = 0: an empty problem */
    moe_tensor x0, i0, w0, o0;
    ck_assert_int_eq(moe_tensor_wrap(&x0, p.xd, 3, (int64_t[3]){2, 0, H}, p.x.data, 0, p.x.device), 0);
    ck_assert_int_eq(moe_tensor_wrap(&i0, MOE_I32, 3, (int64_t[3]){2, 0, 2}, p.ids.data, 0, p.ids.device), 0);
    ck_assert_int_eq(moe_tensor_wrap(&w0, MOE_F32, 3, (int64_t[3]){2, 0, 2}, p.w.data, 0, p.w.device), 0);
    ck_assert_int_eq(moe_tensor_wrap(&o0, p.xd, 3, (int64_t[3]){2, 0, H}, o.data, 0, o.device), 0);
    ck_assert_msg(moe_mk_forward_ranks(mk, &p.mw, &x0, &i0, &w0, &o0) == MOE_OK, "%s", moe_last_error());
    moe_mk_destroy(mk);
    moe_tensor_free(&o);
    unmake(&p);
}
END_TEST

static Suite *hep_suite(void)
{
    Suite *s = suite_create("modular_hep");
    TCase *tc = tcase_create("grouped_ep");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, top1_bit_exact);
    tcase_add_test(tc, topk_bounded);
    tcase_add_test(tc, async_equals_sync);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(hep_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
