/* The modular kernel, single rank: the constructor refuses every
 * incompatible registry pair with moe_compat_check's rule ids; noep + ref
 * equals moe_ref_forward bit for bit; noep + triton_like and batched +
 * naive_batched stay within bounds derived below; chunked runs equal
 * unchunked ones; unknown and unimplemented types; M = 0. */
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
#include "moe/slot_bound.h"
#include "mk_fixture.h"
#include "test_tensors.h"

enum { M = 13, H = 128, I = 128, E = 8 };

typedef mkf_prob prob;

/* x and weights from seed 11 (weights sd 0.1), routing from seed 12 */
static void make(prob *p, moe_scheme sc, int k, int m)
{
    mkf_make_data(p, sc, m, H, I, E, 11, 0.1f, 0);
    mkf_make_routing(p, k, 12, 1, 2, 0);
}

static void unmake(prob *p) { mkf_unmake(p); }

static moe_mk_config config(moe_scheme sc, int k) { return mkf_config(sc, k, 1, H, I, E); }

static moe_forward_args fargs(const prob *p, const moe_tensor *ids, const moe_tensor *w)
{
    moe_forward_args a = mkf_forward_args(p, w, 0);
    a.topk_ids = ids;
    return a;
}

/* Runs (pf, experts) on p into out; returns the create status (forward
 * must then succeed). */
static moe_status run_mk(const char *pf, const char *ex, const moe_mk_config *c, prob *p, moe_tensor *out)
{
    moe_mk *mk = NULL;
    moe_status st = moe_mk_create(pf, ex, c, &mk, NULL);
    if (st != MOE_OK) {
        ck_assert_ptr_null(mk);
        return st;
    }
    ck_assert_msg(moe_mk_forward(mk, &p->mw, &p->x, &p->ids, &p->w, out) == MOE_OK, "%s x %s %s: %s", pf, ex,
                  moe_scheme_name(p->sc), moe_last_error());
    moe_mk_destroy(mk);
    return MOE_OK;
}

static float ld(const moe_tensor *t, int64_t i)
{
    if (t->dtype == MOE_BF16) return moe_bf16_to_f32(((const uint16_t *)t->data)[i]);
    float v;
    moe_decode_array(t->dtype, (const uint8_t *)t->data + (size_t)i * moe_dtype_row_bytes(t->dtype, 1), 1, &v);
    if (t->dtype == MOE_F32) v = ((const float *)t->data)[i];
    return v;
}

/* ---- refusals ----------------------------------------------------------- */

START_TEST(refuses_every_incompatible_pair)
{
    const moe_scheme schemes[2] = {MOE_SCHEME_BF16, MOE_SCHEME_FP8_WCHANNEL_ATENSOR};
    int refused = 0, built = 0, unsupported = 0;
    for (int si = 0; si < 2; si++)
        for (int a = 0; a < moe_pf_count(); a++)
            for (int b = 0; b < moe_experts_count(); b++) {
                const moe_pf_info *pf = moe_pf_get(a);
                const moe_experts_info *ex = moe_experts_get(b);
                moe_mk_config c = config(schemes[si], 2);
                moe_compat_query q = moe_compat_query_default();
                q.scheme = c.scheme, q.topk = c.topk, q.num_experts = c.num_experts, q.world_size = 1,
                q.hidden = c.hidden;
                moe_compat_verdict want, got;
                ck_assert_int_eq(moe_compat_check(pf, ex, &q, &want), MOE_OK);
                memset(&got, 0, sizeof got);
                moe_mk *mk = (moe_mk *)&got; /* must be reset to NULL */
                moe_status st = moe_mk_create(pf->name, ex->name, &c, &mk, &got);
                if (!want.compatible) {
                    ck_assert_msg(st == MOE_ERR_INCOMPATIBLE, "%s x %s: %s", pf->name, ex->name, moe_status_str(st));
                    ck_assert_ptr_null(mk);
                    ck_assert_int_eq(got.nfail, want.nfail);
                    ck_assert_int_eq(got.compatible, 0);
                    for (int i = 0; i < want.nfail; i++) {
                        ck_assert_str_eq(got.fail[i]->id, want.fail[i]->id);
                        ck_assert_ptr_nonnull(strstr(moe_last_error(), want.fail[i]->id));
                    }
                    refused++;
                } else if (st == MOE_OK) {
                    ck_assert_ptr_nonnull(mk);
                    ck_assert_int_eq(got.compatible, 1);
                    moe_mk_destroy(mk);
                    built++;
                } else {
                    ck_assert_msg(st == MOE_ERR_UNSUPPORTED, "%s x %s: %s", pf->name, ex->name, moe_last_error());
                    ck_assert_ptr_null(mk);
                    unsupported++;
                }
            }
    printf("refusals: %d incompatible pairs refused with their rule ids, %d built, %d unsupported (of %d)\n",
           refused, built, unsupported, 2 * moe_pf_count() * moe_experts_count());
    fflush(stdout);
    ck_assert_int_gt(refused, 0);
    ck_assert_int_gt(built, 0);
}
END_TEST

START_TEST(unknown_and_unsupported)
{
    moe_mk_config c = config(MOE_SCHEME_BF16, 2);
    moe_mk *mk = NULL;
    ck_assert_int_eq(moe_mk_create("nope", "ref", &c, &mk, NULL), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "nope"));
    ck_assert_int_eq(moe_mk_create("noep", "zzz", &c, &mk, NULL), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "zzz"));
    ck_assert_int_eq(moe_mk_create(NULL, "ref", &c, &mk, NULL), MOE_ERR_INVALID_ARG);
    ck_assert_int_eq(moe_mk_create("noep", "ref", NULL, &mk, NULL), MOE_ERR_NULL);
    /* compatible, not implemented: NVFP4's swizzled activation scales
     * through the kernel (every registry type is implemented now: pplx,
     * deepep_ll in tests/check_modular_ep2.c, hybrid_ep in
     * tests/check_modular_hep.c) */
    moe_mk_config cb = config(MOE_SCHEME_NVFP4, 2);
    ck_assert_int_eq(moe_mk_create("noep", "permute_grouped", &cb, &mk, NULL), MOE_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "swizzle"));
    c.world_size = 2, cb.world_size = 2;
    ck_assert_int_eq(moe_mk_create("allgather_rs", "permute_grouped", &cb, &mk, NULL), MOE_ERR_UNSUPPORTED);
    ck_assert_ptr_null(mk);
    moe_compat_verdict v;
    ck_assert_int_eq(moe_mk_create("noep", "ref", &c, &mk, &v), MOE_ERR_INCOMPATIBLE);
    ck_assert_str_eq(v.fail[0]->id, "world-unsupported");
    c.world_size = 1, c.chunk_size = 4;
    ck_assert_int_eq(moe_mk_create("batched", "naive_batched", &c, &mk, &v), MOE_ERR_INCOMPATIBLE);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "chunking-unsupported"));
    c.chunk_size = 0, c.weights_on_input = 1;
    ck_assert_int_eq(moe_mk_create("noep", "ref", &c, &mk, &v), MOE_ERR_INCOMPATIBLE);
    ck_assert_str_eq(v.fail[0]->id, "weight-on-input-topk");
    c = config(MOE_SCHEME_NVFP4, 2); /* swizzled activation scales: not in this slice */
    ck_assert_int_eq(moe_mk_create("noep", "ref", &c, &mk, NULL), MOE_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "swizzle"));
    ck_assert_ptr_null(mk);
}
END_TEST

/* ---- noep + ref == moe_ref_forward ------------------------------------- */

/* Every scheme the pair builds for; bf16 and fp8_wchannel_atoken must. */
START_TEST(noep_ref_equals_forward)
{
    moe_scheme sc = (moe_scheme)_i;
    for (int k = 1; k <= 3; k += 2) {
        prob p;
        make(&p, sc, k, M);
        moe_mk_config c = config(sc, k);
        moe_tensor out = tt_new(p.xd, 2, M, H, 0), ref = tt_new(p.xd, 2, M, H, 0);
        moe_status st = run_mk("noep", "ref", &c, &p, &out);
        if (sc == MOE_SCHEME_BF16 || sc == MOE_SCHEME_FP8_WCHANNEL_ATOKEN) ck_assert_int_eq(st, MOE_OK);
        if (st == MOE_OK) {
            moe_forward_args a = fargs(&p, &p.ids, &p.w);
            ck_assert_msg(moe_ref_forward(&a, &p.x, &ref) == MOE_OK, "%s", moe_last_error());
            ck_assert_msg(memcmp(out.data, ref.data, ref.nbytes) == 0, "%s k=%d: noep+ref differs from moe_ref_forward",
                          moe_scheme_name(sc), k);
        } else {
            ck_assert_int_eq(st, MOE_ERR_UNSUPPORTED);
        }
        if (k == 1) {
            printf("noep+ref %-22s %s\n", moe_scheme_name(sc), st == MOE_OK ? "bit-exact" : "unsupported here");
            fflush(stdout);
        }
        moe_tensor_free(&out), moe_tensor_free(&ref);
        unmake(&p);
    }
}
END_TEST

/* Weights on the input (topk 1): noep + ref and noep + triton_like equal
 * moe_ref_forward (one slot: no reduction rounding differs). */
START_TEST(weights_on_input_topk1)
{
    const moe_scheme schemes[2] = {MOE_SCHEME_BF16, MOE_SCHEME_FP8_WCHANNEL_ATOKEN};
    for (int si = 0; si < 2; si++) {
        prob p;
        make(&p, schemes[si], 1, M);
        moe_mk_config c = config(schemes[si], 1);
        c.weights_on_input = 1;
        moe_tensor ref = tt_new(p.xd, 2, M, H, 0), out = tt_new(p.xd, 2, M, H, 0);
        moe_forward_args a = fargs(&p, &p.ids, &p.w);
        a.weights_on_input = 1;
        ck_assert_int_eq(moe_ref_forward(&a, &p.x, &ref), MOE_OK);
        const char *ex[2] = {"ref", "triton_like"};
        for (int e = 0; e < 2; e++) {
            ck_assert_int_eq(run_mk("noep", ex[e], &c, &p, &out), MOE_OK);
            ck_assert_msg(memcmp(out.data, ref.data, ref.nbytes) == 0, "noep+%s woi", ex[e]);
        }
        ck_assert_int_eq(run_mk("batched", "naive_batched", &c, &p, &out), MOE_OK);
        ck_assert_msg(memcmp(out.data, ref.data, ref.nbytes) == 0, "batched+naive_batched woi");
        moe_tensor_free(&ref), moe_tensor_free(&out);
        unmake(&p);
    }
}
END_TEST

/* ---- bounded pairs -------------------------------------------------------
 * For bf16 and fp8_wchannel_atoken every pair computes the same GEMM2
 * accumulators a_j for each (token, slot): GEMM1, activation and the
 * per-token requantization act on the same rows with the same scales, and
 * the GEMM op is row-wise. Only the weighting and the reduction differ.
 * Notation (per output element): w_j the router weights, Y_j = bf16(a_j)
 * the ref experts' slot rows (taken from moe_ref_forward with slot j alone
 * and weight 1, which returns Y_j exactly), h(v) half a bf16 ulp at |v|
 * (2^-134 in the subnormal range), u = 2^-8 (bf16), v = 2^-24 (f32),
 * d = 2^-150 (half the least f32 subnormal), g_n(r) = n r / (1 - n r), and
 * S = sum_j w_j a_j the exact result.
 *
 * ref (moe_ref_forward step 8): out = bf16(fl32-sum of fl32(w_j Y_j)):
 *   |out_ref - S| <= h(out_ref) + sum_j |w_j| h(Y_j)          (a_j -> Y_j)
 *                  + g_k(v) sum_j |w_j Y_j| + 2k d            (f32 dot)
 *   (|a - bf16(a)| <= h(bf16(a)): rounding never leaves a's binade but may
 *   reach the next power of two, whose half ulp is the larger.)
 * triton_like: z_j = bf16(fl32(w_j a_j)); with A_j = |w_j| (|Y_j| +
 *   h(Y_j)) >= |w_j a_j|: |z_j - w_j a_j| <= (v + u(1 + v)) A_j + 2^-133.
 *   moe_sum, topk 2..4: acc = bf16(fl32(acc + z_j)), k-1 rounded adds of
 *   relative error u_a = u + v + uv: <= g_{k-1}(u_a) sum_j Z_j +
 *   (k-1)(2^-134 + d), Z_j = A_j + the z_j error; other topk: fl32 sum
 *   (g_{k-1}(v) sum Z_j + (k-1) d) and one final rounding h(out).
 * naive_batched (NaiveBatched WAR): out accumulated in bf16, one expert at
 *   a time: o = bf16(fl32(o + fl32(Y_j w_j))): k rounded adds of relative
 *   u_a after products within v: |out - sum w_j Y_j| <= g_k(u_a)(1 + v)
 *   sum |w_j Y_j| + v sum |w_j Y_j| + k(2^-134 + 2d); compared with ref's
 *   |out_ref - sum w_j Y_j| <= h(out_ref) + g_k(v) sum |w_j Y_j| + 2k d
 *   (the same Y_j on both sides, so no a_j term).
 * The test bound is the sum of the two sides' bounds (triangle inequality
 * through S, or through sum w_j Y_j for naive_batched). */

static double worst_share = 0.0;

static void bounded_case(moe_scheme sc, int k, const char *pf, const char *ex)
{
    prob p;
    make(&p, sc, k, M);
    moe_mk_config c = config(sc, k);
    moe_tensor out = tt_new(p.xd, 2, M, H, 0), ref = tt_new(p.xd, 2, M, H, 0);
    ck_assert_int_eq(p.xd, MOE_BF16);
    ck_assert_int_eq(run_mk(pf, ex, &c, &p, &out), MOE_OK);
    moe_forward_args a = fargs(&p, &p.ids, &p.w);
    ck_assert_int_eq(moe_ref_forward(&a, &p.x, &ref), MOE_OK);
    /* Y_j: slot j alone, weight 1 */
    moe_tensor *Y = calloc((size_t)k, sizeof(moe_tensor));
    moe_tensor ij = tt_new(MOE_I32, 2, M, 1, 0), one = tt_new(MOE_F32, 2, M, 1, 0);
    for (int t = 0; t < M; t++) ((float *)one.data)[t] = 1.0f;
    for (int j = 0; j < k; j++) {
        for (int t = 0; t < M; t++) ((int32_t *)ij.data)[t] = ((int32_t *)p.ids.data)[t * k + j];
        Y[j] = tt_new(MOE_BF16, 2, M, H, 0);
        moe_forward_args a1 = fargs(&p, &ij, &one);
        ck_assert_int_eq(moe_ref_forward(&a1, &p.x, &Y[j]), MOE_OK);
    }
    const double u = ldexp(1.0, -8), v = ldexp(1.0, -24), d = ldexp(1.0, -150), ua = u + v + u * v;
    const double sub = ldexp(1.0, -134);
    int triton = strcmp(ex, "triton_like") == 0, per_add = k >= 2 && k <= 4;
    double share = 0.0, maxdiff = 0.0;
    int ndiff = 0;
    for (int t = 0; t < M; t++)
        for (int col = 0; col < H; col++) {
            int64_t i = (int64_t)t * H + col;
            double o = ld(&out, i), r = ld(&ref, i), sw = 0, swh = 0, sA = 0, sZ = 0, ez = 0;
            for (int j = 0; j < k; j++) {
                double wj = fabs(((float *)p.w.data)[t * k + j]), yj = ld(&Y[j], i);
                sw += wj * fabs(yj), swh += wj * moe_half_ulp(MOE_BF16, yj);
                double A = wj * (fabs(yj) + moe_half_ulp(MOE_BF16, yj)), e = (v + u * (1 + v)) * A + ldexp(1.0, -133);
                sA += A, ez += e, sZ += A + e;
            }
            double bref, bmk;
            if (triton) {
                bref = moe_half_ulp(MOE_BF16, r) + swh + moe_gamma(k, v) * sw + 2 * k * d;
                bmk = ez + (per_add ? moe_gamma(k - 1, ua) * sZ + (k - 1) * (sub + d)
                                    : moe_gamma(k - 1, v) * sZ + (k - 1) * d + moe_half_ulp(MOE_BF16, o));
            } else {
                bref = moe_half_ulp(MOE_BF16, r) + moe_gamma(k, v) * sw + 2 * k * d;
                bmk = moe_gamma(k, ua) * (1 + v) * sw + v * sw + k * (sub + 2 * d);
            }
            double diff = fabs(o - r), B = bref + bmk;
            ck_assert_msg(diff <= B, "%s+%s %s k=%d [%d,%d]: |%.9g - %.9g| = %.3g > bound %.3g", pf, ex,
                          moe_scheme_name(sc), k, t, col, o, r, diff, B);
            if (diff / B > share) share = diff / B;
            if (diff > maxdiff) maxdiff = diff;
            ndiff += diff != 0;
        }
    printf("bound %s+%s %-20s k=%d: %4d of %d elements differ, max |diff| %.3g, largest share of bound %.3f\n", pf,
           ex, moe_scheme_name(sc), k, ndiff, M * H, maxdiff, share);
    fflush(stdout);
    if (share > worst_share) worst_share = share;
    for (int j = 0; j < k; j++) moe_tensor_free(&Y[j]);
    free(Y);
    moe_tensor_free(&ij), moe_tensor_free(&one), moe_tensor_free(&out), moe_tensor_free(&ref);
    unmake(&p);
}

START_TEST(bounded_pairs)
{
    const moe_scheme schemes[2] = {MOE_SCHEME_BF16, MOE_SCHEME_FP8_WCHANNEL_ATOKEN};
    const int ks[3] = {2, 4, 6};
    for (int si = 0; si < 2; si++)
        for (int ki = 0; ki < 3; ki++) {
            bounded_case(schemes[si], ks[ki], "noep", "triton_like");
            bounded_case(schemes[si], ks[ki], "batched", "naive_batched");
        }
    printf("bounded pairs: largest share of the derived bound used %.3f\n", worst_share);
    fflush(stdout);
}
END_TEST

/* ---- chunking ------------------------------------------------------------ */

START_TEST(chunked_equals_unchunked)
{
    const moe_scheme schemes[2] = {MOE_SCHEME_BF16, MOE_SCHEME_FP8_WCHANNEL_ATOKEN};
    const char *ex[2] = {"ref", "triton_like"};
    for (int si = 0; si < 2; si++)
        for (int e = 0; e < 2; e++) {
            prob p;
            make(&p, schemes[si], 2, M);
            moe_mk_config c = config(schemes[si], 2);
            moe_tensor o1 = tt_new(p.xd, 2, M, H, 0), o2 = tt_new(p.xd, 2, M, H, 0);
            ck_assert_int_eq(run_mk("noep", ex[e], &c, &p, &o1), MOE_OK);
            c.chunk_size = 3; /* 13 tokens: chunks of 3, 3, 3, 3, 1 */
            ck_assert_int_eq(run_mk("noep", ex[e], &c, &p, &o2), MOE_OK);
            ck_assert_msg(memcmp(o1.data, o2.data, o1.nbytes) == 0, "noep+%s %s: chunk 3 differs", ex[e],
                          moe_scheme_name(schemes[si]));
            moe_tensor_free(&o1), moe_tensor_free(&o2);
            unmake(&p);
        }
}
END_TEST

/* ---- empty problem ---------------------------------------------------- */

START_TEST(empty_problem)
{
    const char *pairs[3][2] = {{"noep", "ref"}, {"noep", "triton_like"}, {"batched", "naive_batched"}};
    for (int i = 0; i < 3; i++) {
        prob p;
        make(&p, MOE_SCHEME_FP8_WCHANNEL_ATOKEN, 2, 0);
        moe_mk_config c = config(MOE_SCHEME_FP8_WCHANNEL_ATOKEN, 2);
        moe_tensor out = tt_new(MOE_BF16, 2, 0, H, 0);
        ck_assert_int_eq(run_mk(pairs[i][0], pairs[i][1], &c, &p, &out), MOE_OK);
        moe_tensor_free(&out);
        unmake(&p);
    }
}
END_TEST

START_TEST(forward_errors)
{
    prob p;
    make(&p, MOE_SCHEME_BF16, 2, M);
    moe_mk_config c = config(MOE_SCHEME_BF16, 2);
    moe_mk *mk;
    ck_assert_int_eq(moe_mk_create("batched", "naive_batched", &c, &mk, NULL), MOE_OK);
    moe_tensor out = tt_new(MOE_BF16, 2, M, H, 0);
    ck_assert_int_eq(moe_mk_forward(mk, &p.mw, &p.x, &p.ids, &p.w, NULL), MOE_ERR_NULL);
    ((int32_t *)p.ids.data)[5] = E;
    ck_assert_int_eq(moe_mk_forward(mk, &p.mw, &p.x, &p.ids, &p.w, &out), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "topk_ids[5]"));
    ((int32_t *)p.ids.data)[5] = 0;
    moe_mk_destroy(mk);
    c.max_tokens = 2; /* too small for the busiest expert: the scatter refuses */
    ck_assert_int_eq(moe_mk_create("batched", "naive_batched", &c, &mk, NULL), MOE_OK);
    ck_assert_int_eq(moe_mk_forward(mk, &p.mw, &p.x, &p.ids, &p.w, &out), MOE_ERR_SHAPE);
    moe_mk_destroy(mk);
    moe_tensor_free(&out);
    unmake(&p);
}
END_TEST

static Suite *modular_suite(void)
{
    Suite *s = suite_create("modular");
    TCase *tc = tcase_create("single_rank");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, refuses_every_incompatible_pair);
    tcase_add_test(tc, unknown_and_unsupported);
    tcase_add_loop_test(tc, noep_ref_equals_forward, 0, MOE_SCHEME_COUNT);
    tcase_add_test(tc, weights_on_input_topk1);
    tcase_add_test(tc, bounded_pairs);
    tcase_add_test(tc, chunked_equals_unchunked);
    tcase_add_test(tc, empty_problem);
    tcase_add_test(tc, forward_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(modular_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
