/* The experts types permute_grouped, batched_masked, grouped_contig and
 * ck_fused in the single-rank modular kernel (moe_mk_create /
 * moe_mk_forward: prepare -> workspaces -> apply in chunks -> finalize
 * with the experts' weight-and-reduce).
 * Each type is compared with moe_ref_forward: bit for bit where the
 * rounding points coincide, else within a bound derived below; M = 0;
 * argument errors. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/bounds.h"
#include "moe/format.h"
#include "moe/forward.h"
#include "moe/maps_trtllm.h"
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

static float ld(const moe_tensor *t, int64_t i)
{
    if (t->dtype == MOE_BF16) return moe_bf16_to_f32(((const uint16_t *)t->data)[i]);
    if (t->dtype == MOE_F32) return ((const float *)t->data)[i];
    float v;
    moe_decode_array(t->dtype, (const uint8_t *)t->data + (size_t)i * moe_dtype_row_bytes(t->dtype, 1), 1, &v);
    return v;
}

/* Runs pf x ex through the modular kernel (moe_mk_create / moe_mk_forward). */
static void run_local(const char *pf, const moe_mk_experts_type *ex, const moe_mk_config *c, prob *p, moe_tensor *out)
{
    moe_mk *mk = NULL;
    ck_assert_msg(moe_mk_create(pf, ex->name, c, &mk, NULL) == MOE_OK, "%s x %s: %s", pf, ex->name, moe_last_error());
    ck_assert_msg(moe_mk_forward(mk, &p->mw, &p->x, &p->ids, &p->w, out) == MOE_OK, "%s x %s %s k=%d: %s", pf,
                  ex->name, moe_scheme_name(p->sc), p->k, moe_last_error());
    moe_mk_destroy(mk);
}

/* ---- bounds ----------------------------------------------------------------
 * For the schemes tested here every type computes, for each (token, slot),
 * the same GEMM2 accumulator a_j as moe_ref_forward: GEMM1, activation and
 * requantization see the same rows with the same scales (bf16: none;
 * fp8_wblock128_agroup128: 1x128 groups of a row; fp8_wchannel_atoken and
 * int8_wchannel_atoken: per token row; all row-wise rules, so replication,
 * permutation, padding and chunking do not change them) and the GEMM op
 * is row-wise. Only weighting and reduction differ. Notation per output
 * element: w_j the router weights, Y_j = bf16(a_j) the ref's slot rows
 * (moe_ref_forward with slot j alone and weight 1 returns Y_j exactly),
 * h(v) half a bf16 ulp at |v| (2^-134 below 2^-126), u = 2^-8, v = 2^-24,
 * d = 2^-150, g_n(r) = n r / (1 - n r), T = sum_j w_j Y_j,
 * sw = sum_j |w_j Y_j|.
 *
 * ref (moe_ref_forward step 8): out_ref = bf16(f32 sum of fl32(w_j Y_j)),
 *   2k - 1 f32 roundings:   |out_ref - T| <= h(out_ref) + g_k(v) sw + 2k d.
 *   (With a_j in place of Y_j, |a_j - Y_j| <= h(Y_j) adds sum |w_j| h(Y_j).)
 *
 * permute_grouped (finalize_trtllm): acc = fmaf(w_j, Y_j, acc), j
 *   ascending: k roundings of exact w_j Y_j + acc, each relative v or
 *   absolute d: |acc - T| <= g_k(v) sw + k d; out = bf16(acc):
 *   |out - T| <= h(out) + g_k(v) sw + k d.
 *   Bound PG = h(out) + h(out_ref) + 2 g_k(v) sw + 3k d. topk 1: exact
 *   (fmaf(w, y, 0) = fl32(w y)), asserted bit for bit.
 *
 * grouped_contig (Contiguous: z_j = bf16(fl32(w_j Y_j)), moe_sum):
 *   |z_j - w_j Y_j| <= e_j = (v + u(1 + v)) |w_j Y_j| + 2^-133
 *   (v d + d + 2^-134 < 2^-133), Z_j = |w_j Y_j| + e_j >= |z_j|;
 *   topk 2..4, k-1 adds rounded to bf16 after f32, relative
 *   u_a = u + v + uv, absolute 2^-134 + d each:
 *     |out - T| <= sum e_j + g_{k-1}(u_a) sum Z_j + (k-1)(2^-134 + d);
 *   other topk, f32 sum, one rounding:
 *     |out - T| <= sum e_j + g_{k-1}(v) sum Z_j + (k-1) d + h(out).
 *   Bound GC = that + h(out_ref) + g_k(v) sw + 2k d.
 *
 * ck_fused: z_j = bf16(fl32(w_j a_j)), a_j the f32 accumulator, |a_j| <=
 *   |Y_j| + h(Y_j): with A_j = |w_j| (|Y_j| + h(Y_j)),
 *   e_j = (v + u(1 + v)) A_j + 2^-133, Z_j = A_j + e_j; the k-1 per-add
 *   roundings as grouped_contig's topk 2..4 case for every topk; the bound
 *   holds for every order of the adds (the upstream atomics), since it
 *   depends on the set of terms only. Compared with S = sum w_j a_j:
 *   Bound CK = sum e_j + g_{k-1}(u_a) sum Z_j + (k-1)(2^-134 + d)
 *            + h(out_ref) + sum |w_j| h(Y_j) + g_k(v) sw + 2k d.
 *
 * batched_masked (batched PF, NaiveBatched: o = bf16(fl32(o +
 *   fl32(Y_j w_j))), one expert at a time): as check_modular.c's
 *   naive_batched bound: |out - T| <= g_k(u_a)(1 + v) sw + v sw +
 *   k (2^-134 + 2d); Bound BM = that + h(out_ref) + g_k(v) sw + 2k d.
 *   It is also asserted bit-equal to batched + naive_batched run through
 *   the real moe_mk_forward. */

enum { K_PG, K_BM, K_GC, K_CK, K_COUNT };
static const char *const kind_name[K_COUNT] = {"permute_grouped", "batched_masked", "grouped_contig", "ck_fused"};
static double worst[K_COUNT];

static void bounded_case(int kind, const moe_mk_experts_type *ex, const char *pf, moe_scheme sc, int k)
{
    prob p;
    make(&p, sc, k, M);
    moe_mk_config c = config(sc, k);
    moe_tensor out = tt_new(p.xd, 2, M, H, 0), ref = tt_new(p.xd, 2, M, H, 0);
    ck_assert_int_eq(p.xd, MOE_BF16);
    run_local(pf, ex, &c, &p, &out);
    moe_forward_args a = fargs(&p, &p.ids, &p.w);
    ck_assert_int_eq(moe_ref_forward(&a, &p.x, &ref), MOE_OK);
    if (kind == K_PG && k == 1)
        ck_assert_msg(memcmp(out.data, ref.data, ref.nbytes) == 0, "permute_grouped %s k=1: not bit-exact",
                      moe_scheme_name(sc));
    if (kind == K_BM) { /* bit-equal to batched + naive_batched */
        moe_mk *mk = NULL;
        moe_tensor nb = tt_new(p.xd, 2, M, H, 0);
        ck_assert_int_eq(moe_mk_create("batched", "naive_batched", &c, &mk, NULL), MOE_OK);
        ck_assert_int_eq(moe_mk_forward(mk, &p.mw, &p.x, &p.ids, &p.w, &nb), MOE_OK);
        ck_assert_msg(memcmp(out.data, nb.data, nb.nbytes) == 0, "batched_masked != naive_batched");
        moe_mk_destroy(mk), moe_tensor_free(&nb);
    }
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
    const double sub = ldexp(1.0, -134), e133 = ldexp(1.0, -133);
    int per_add = k >= 2 && k <= 4;
    double share = 0.0, maxdiff = 0.0;
    int ndiff = 0;
    for (int t = 0; t < M; t++)
        for (int col = 0; col < H; col++) {
            int64_t i = (int64_t)t * H + col;
            double o = ld(&out, i), r = ld(&ref, i), sw = 0, swh = 0, se = 0, sZ = 0;
            for (int j = 0; j < k; j++) {
                double wj = fabs(((float *)p.w.data)[t * k + j]), yj = ld(&Y[j], i);
                sw += wj * fabs(yj), swh += wj * moe_half_ulp(MOE_BF16, yj);
                double A = kind == K_CK ? wj * (fabs(yj) + moe_half_ulp(MOE_BF16, yj)) : wj * fabs(yj);
                double e = (v + u * (1 + v)) * A + e133;
                se += e, sZ += A + e;
            }
            double bref = moe_half_ulp(MOE_BF16, r) + moe_gamma(k, v) * sw + 2 * k * d, bmk;
            switch (kind) {
            case K_PG: bmk = moe_half_ulp(MOE_BF16, o) + moe_gamma(k, v) * sw + k * d; break;
            case K_BM: bmk = moe_gamma(k, ua) * (1 + v) * sw + v * sw + k * (sub + 2 * d); break;
            case K_GC:
                bmk = se + (per_add ? moe_gamma(k - 1, ua) * sZ + (k - 1) * (sub + d)
                                    : moe_gamma(k - 1, v) * sZ + (k - 1) * d + moe_half_ulp(MOE_BF16, o));
                break;
            default: bmk = se + moe_gamma(k - 1, ua) * sZ + (k - 1) * (sub + d), bref += swh; break;
            }
            double diff = fabs(o - r), B = bref + bmk;
            ck_assert_msg(diff <= B, "%s %s k=%d [%d,%d]: |%.9g - %.9g| = %.3g > bound %.3g", ex->name,
                          moe_scheme_name(sc), k, t, col, o, r, diff, B);
            if (diff / B > share) share = diff / B;
            if (diff > maxdiff) maxdiff = diff;
            ndiff += diff != 0;
        }
    printf("bound %-15s %-24s k=%d: %4d of %d elements differ, max |diff| %.3g, largest share of bound %.3f\n",
           ex->name, moe_scheme_name(sc), k, ndiff, M * H, maxdiff, share);
    fflush(stdout);
    if (share > worst[kind]) worst[kind] = share;
    for (int j = 0; j < k; j++) moe_tensor_free(&Y[j]);
    free(Y);
    moe_tensor_free(&ij), moe_tensor_free(&one), moe_tensor_free(&out), moe_tensor_free(&ref);
    unmake(&p);
}

static const int ks[5] = {1, 2, 3, 4, 6}; /* 3: not a fused-prologue topk (three-step maps) */

START_TEST(permute_grouped_vs_ref)
{
    const moe_scheme sc[2] = {MOE_SCHEME_BF16, MOE_SCHEME_FP8_WBLOCK128_AGROUP128};
    for (int si = 0; si < 2; si++)
        for (int ki = 0; ki < 5; ki++) bounded_case(K_PG, &moe_mk_experts_permute_grouped, "noep", sc[si], ks[ki]);
}
END_TEST

START_TEST(batched_masked_vs_ref)
{
    const moe_scheme sc[2] = {MOE_SCHEME_BF16, MOE_SCHEME_FP8_WCHANNEL_ATOKEN};
    for (int si = 0; si < 2; si++)
        for (int ki = 0; ki < 5; ki++) bounded_case(K_BM, &moe_mk_experts_batched_masked, "batched", sc[si], ks[ki]);
}
END_TEST

START_TEST(grouped_contig_vs_ref)
{
    for (int ki = 0; ki < 5; ki++)
        bounded_case(K_GC, &moe_mk_experts_grouped_contig, "noep", MOE_SCHEME_FP8_WBLOCK128_AGROUP128, ks[ki]);
}
END_TEST

START_TEST(ck_fused_vs_ref)
{
    const moe_scheme sc[2] = {MOE_SCHEME_BF16, MOE_SCHEME_INT8_WCHANNEL_ATOKEN};
    for (int si = 0; si < 2; si++)
        for (int ki = 0; ki < 5; ki++) bounded_case(K_CK, &moe_mk_experts_ck_fused, "noep", sc[si], ks[ki]);
}
END_TEST

START_TEST(worst_shares)
{
    for (int i = 0; i < K_COUNT; i++) printf("largest share of the derived bound, %-15s %.3f\n", kind_name[i], worst[i]);
    fflush(stdout);
}
END_TEST

/* the three-step prologue also when the token count forces it (> 256) */
START_TEST(permute_grouped_three_step_tokens)
{
    moe_trtllm_prologue_query q = {300, 2, E, 0, 0, 0, MOE_TRTLLM_GATE_NOT_WFP4A16};
    moe_trtllm_prologue_choice ch;
    ck_assert_int_eq(moe_maps_trtllm_select(&q, &ch), MOE_OK);
    ck_assert_int_eq(ch.variant, MOE_MAPS_TRTLLM_THREE_STEP);
    q.num_tokens = M;
    ck_assert_int_eq(moe_maps_trtllm_select(&q, &ch), MOE_OK);
    ck_assert_int_eq(ch.variant, MOE_MAPS_TRTLLM_FUSED_SINGLE_BLOCK);
    prob p;
    make(&p, MOE_SCHEME_BF16, 1, 300); /* topk 1: bit for bit with either prologue */
    moe_mk_config c = config(MOE_SCHEME_BF16, 1);
    moe_tensor out = tt_new(p.xd, 2, 300, H, 0), ref = tt_new(p.xd, 2, 300, H, 0);
    run_local("noep", &moe_mk_experts_permute_grouped, &c, &p, &out);
    moe_forward_args a = fargs(&p, &p.ids, &p.w);
    ck_assert_int_eq(moe_ref_forward(&a, &p.x, &ref), MOE_OK);
    ck_assert_msg(memcmp(out.data, ref.data, ref.nbytes) == 0, "permute_grouped, 300 tokens: not bit-exact");
    moe_tensor_free(&out), moe_tensor_free(&ref);
    unmake(&p);
}
END_TEST

/* Weights on the input (topk 1): one slot, no reduction rounding differs
 * and the router weight is already in x: every type equals
 * moe_ref_forward bit for bit. */
START_TEST(weights_on_input_topk1)
{
    struct { const moe_mk_experts_type *ex; const char *pf; moe_scheme sc; } cs[] = {
        {&moe_mk_experts_permute_grouped, "noep", MOE_SCHEME_BF16},
        {&moe_mk_experts_permute_grouped, "noep", MOE_SCHEME_FP8_WBLOCK128_AGROUP128},
        {&moe_mk_experts_batched_masked, "batched", MOE_SCHEME_BF16},
        {&moe_mk_experts_batched_masked, "batched", MOE_SCHEME_FP8_WCHANNEL_ATOKEN},
        {&moe_mk_experts_grouped_contig, "noep", MOE_SCHEME_FP8_WBLOCK128_AGROUP128},
        {&moe_mk_experts_ck_fused, "noep", MOE_SCHEME_BF16},
        {&moe_mk_experts_ck_fused, "noep", MOE_SCHEME_INT8_WCHANNEL_ATOKEN},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        prob p;
        make(&p, cs[i].sc, 1, M);
        moe_mk_config c = config(cs[i].sc, 1);
        c.weights_on_input = 1;
        moe_tensor ref = tt_new(p.xd, 2, M, H, 0), out = tt_new(p.xd, 2, M, H, 0);
        moe_forward_args a = fargs(&p, &p.ids, &p.w);
        a.weights_on_input = 1;
        ck_assert_int_eq(moe_ref_forward(&a, &p.x, &ref), MOE_OK);
        run_local(cs[i].pf, cs[i].ex, &c, &p, &out);
        ck_assert_msg(memcmp(out.data, ref.data, ref.nbytes) == 0, "%s %s woi: not bit-exact", cs[i].ex->name,
                      moe_scheme_name(cs[i].sc));
        moe_tensor_free(&ref), moe_tensor_free(&out);
        unmake(&p);
    }
}
END_TEST

/* grouped_contig supports chunking (registry): chunks of 3 tokens give
 * the same bits (row-wise scales; the reduction is per token). */
START_TEST(grouped_contig_chunked)
{
    for (int k = 2; k <= 6; k += 4) {
        prob p;
        make(&p, MOE_SCHEME_FP8_WBLOCK128_AGROUP128, k, M);
        moe_mk_config c = config(MOE_SCHEME_FP8_WBLOCK128_AGROUP128, k);
        moe_tensor o1 = tt_new(p.xd, 2, M, H, 0), o2 = tt_new(p.xd, 2, M, H, 0);
        run_local("noep", &moe_mk_experts_grouped_contig, &c, &p, &o1);
        c.chunk_size = 3;
        run_local("noep", &moe_mk_experts_grouped_contig, &c, &p, &o2);
        ck_assert_msg(memcmp(o1.data, o2.data, o1.nbytes) == 0, "grouped_contig k=%d: chunk 3 differs", k);
        moe_tensor_free(&o1), moe_tensor_free(&o2);
        unmake(&p);
    }
}
END_TEST

/* M = 0: an empty problem is an empty output (as moe_mk_forward), and
 * the workspace shapes of a 0-token chunk are computed without error. */
START_TEST(empty_problem)
{
    struct { const moe_mk_experts_type *ex; const char *pf; moe_scheme sc; } cs[] = {
        {&moe_mk_experts_permute_grouped, "noep", MOE_SCHEME_BF16},
        {&moe_mk_experts_batched_masked, "batched", MOE_SCHEME_FP8_WCHANNEL_ATOKEN},
        {&moe_mk_experts_grouped_contig, "noep", MOE_SCHEME_FP8_WBLOCK128_AGROUP128},
        {&moe_mk_experts_ck_fused, "noep", MOE_SCHEME_INT8_WCHANNEL_ATOKEN},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        prob p;
        make(&p, cs[i].sc, 2, 0);
        moe_mk_config c = config(cs[i].sc, 2);
        moe_tensor out = tt_new(p.xd, 2, 0, H, 0);
        run_local(cs[i].pf, cs[i].ex, &c, &p, &out);
        moe_mk *mk = NULL;
        ck_assert_int_eq(moe_mk_create(cs[i].pf, (cs[i].ex)->name, &c, &mk, NULL), MOE_OK);
        moe_mk_prep prep;
        memset(&prep, 0, sizeof prep);
        prep.x_dtype = p.xd, prep.num_local_experts = E;
        moe_mk_shape s13, s2, so;
        ck_assert_int_eq(cs[i].ex->workspace_shapes(mk, 0, 0, &prep, &s13, &s2, &so), MOE_OK);
        ck_assert_int_eq(so.shape[so.ndim == 3 ? 1 : 0], 0);
        ck_assert_int_eq(cs[i].ex->finalize_weight_and_reduce_impl(mk), moe_experts_find(cs[i].ex->name)->war);
        moe_mk_destroy(mk);
        moe_tensor_free(&out);
        unmake(&p);
    }
}
END_TEST

static void prep_free(const moe_mk *mk, moe_mk_prep *p)
{
    moe_mk_free(mk, &p->a1q), moe_mk_free(mk, &p->a1q_scale), moe_mk_free(mk, &p->a1q_global);
    moe_mk_free(mk, &p->counts);
    for (int l = 0; l < p->num_local_experts; l++) {
        if (p->ex_scale) moe_mk_free(mk, &p->ex_scale[l]);
        if (p->ex_global) moe_mk_free(mk, &p->ex_global[l]);
    }
    free(p->ex_scale), free(p->ex_global);
    memset(p, 0, sizeof *p);
}

static moe_status alloc_shape(const moe_mk *mk, const moe_mk_shape *s, moe_tensor *t)
{
    if (s->ndim == 0) return MOE_OK;
    return moe_mk_alloc(mk, t, s->dtype, s->ndim, s->shape);
}

/* An apply on prepared rows, for the error cases: prepare with the PF,
 * workspaces, then the type's apply on all rows. */
static moe_status direct_apply(moe_mk *mk, prob *p, const moe_tensor *ids, moe_mk_prep *prep_override)
{
    moe_mk_prep prep;
    memset(&prep, 0, sizeof prep);
    moe_tensor ws13, ws2, fused;
    memset(&ws13, 0, sizeof ws13), memset(&ws2, 0, sizeof ws2), memset(&fused, 0, sizeof fused);
    moe_status st = mk->pf->prepare(mk, &p->x, &p->ids, &p->w, &prep);
    ck_assert_int_eq(st, MOE_OK);
    if (prep_override) prep.format = prep_override->format;
    moe_mk_shape s13, s2, so;
    ck_assert_int_eq(mk->ex->workspace_shapes(mk, M, M, &prep, &s13, &s2, &so), MOE_OK);
    ck_assert_int_eq(alloc_shape(mk, &s13, &ws13), MOE_OK);
    ck_assert_int_eq(alloc_shape(mk, &s2, &ws2), MOE_OK);
    ck_assert_int_eq(alloc_shape(mk, &so, &fused), MOE_OK);
    moe_mk_apply_args a = {&p->mw, &prep, ids, &p->w, &ws13, &ws2, &fused};
    st = mk->ex->apply(mk, &a);
    prep_free(mk, &prep);
    moe_mk_free(mk, &ws13), moe_mk_free(mk, &ws2), moe_mk_free(mk, &fused);
    return st;
}

START_TEST(argument_errors)
{
    prob p;
    make(&p, MOE_SCHEME_BF16, 2, M);
    moe_mk_config c = config(MOE_SCHEME_BF16, 2);
    moe_mk *mk = NULL;
    /* incompatible pairs are refused with the registry's rules */
    ck_assert_int_eq(moe_mk_create("batched", (&moe_mk_experts_permute_grouped)->name, &c, &mk, NULL), MOE_ERR_INCOMPATIBLE);
    ck_assert_int_eq(moe_mk_create("noep", (&moe_mk_experts_batched_masked)->name, &c, &mk, NULL), MOE_ERR_INCOMPATIBLE);
    ck_assert_int_eq(moe_mk_create("noep", (&moe_mk_experts_grouped_contig)->name, &c, &mk, NULL), MOE_ERR_INCOMPATIBLE);
    moe_mk_config c8 = config(MOE_SCHEME_FP8_WCHANNEL_ATOKEN, 2);
    ck_assert_int_eq(moe_mk_create("noep", (&moe_mk_experts_ck_fused)->name, &c8, &mk, NULL), MOE_ERR_INCOMPATIBLE);
    ck_assert_ptr_null(mk);
    /* a missing ops entry: MOE_ERR_UNSUPPORTED naming it */
    struct { const moe_mk_experts_type *ex; const char *pf; moe_scheme sc; const char *entry; } cs[] = {
        {&moe_mk_experts_permute_grouped, "noep", MOE_SCHEME_BF16, "maps_trtllm"},
        {&moe_mk_experts_permute_grouped, "noep", MOE_SCHEME_BF16, "finalize_trtllm"},
        {&moe_mk_experts_batched_masked, "batched", MOE_SCHEME_BF16, "grouped_gemm"},
        {&moe_mk_experts_grouped_contig, "noep", MOE_SCHEME_FP8_WBLOCK128_AGROUP128, "permute_grouped"},
        {&moe_mk_experts_ck_fused, "noep", MOE_SCHEME_BF16, "sort_ck"},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        prob q;
        make(&q, cs[i].sc, 2, M);
        moe_ops o = moe_ops_ref;
        if (!strcmp(cs[i].entry, "maps_trtllm")) o.maps_trtllm = NULL;
        if (!strcmp(cs[i].entry, "finalize_trtllm")) o.finalize_trtllm = NULL;
        if (!strcmp(cs[i].entry, "grouped_gemm")) o.grouped_gemm = NULL;
        if (!strcmp(cs[i].entry, "permute_grouped")) o.permute_grouped = NULL;
        if (!strcmp(cs[i].entry, "sort_ck")) o.sort_ck = NULL;
        moe_mk_config cc = config(cs[i].sc, 2);
        cc.ops = &o;
        ck_assert_int_eq(moe_mk_create(cs[i].pf, (cs[i].ex)->name, &cc, &mk, NULL), MOE_OK);
        moe_tensor out = tt_new(q.xd, 2, M, H, 0);
        ck_assert_int_eq(moe_mk_forward(mk, &q.mw, &q.x, &q.ids, &q.w, &out), MOE_ERR_UNSUPPORTED);
        ck_assert_msg(strstr(moe_last_error(), cs[i].entry) != NULL, "%s: %s", cs[i].entry, moe_last_error());
        moe_mk_destroy(mk);
        moe_tensor_free(&out);
        unmake(&q);
    }
    /* an id outside [0, E) reaching apply (moe_mk_forward checks first; the
     * types refuse too instead of dropping the pair) */
    moe_tensor bad = tt_new(MOE_I32, 2, M, 2, 0);
    memcpy(bad.data, p.ids.data, bad.nbytes);
    ((int32_t *)bad.data)[5] = E;
    ck_assert_int_eq(moe_mk_create("noep", (&moe_mk_experts_permute_grouped)->name, &c, &mk, NULL), MOE_OK);
    ck_assert_int_eq(direct_apply(mk, &p, &bad, NULL), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "topk_ids"));
    moe_mk_destroy(mk);
    ck_assert_int_eq(moe_mk_create("noep", (&moe_mk_experts_ck_fused)->name, &c, &mk, NULL), MOE_OK);
    ck_assert_int_ne(direct_apply(mk, &p, &bad, NULL), MOE_OK);
    moe_mk_destroy(mk);
    /* a prep of the wrong format */
    moe_mk_prep fmt;
    memset(&fmt, 0, sizeof fmt);
    fmt.format = MOE_FMT_GROUPED;
    ck_assert_int_eq(moe_mk_create("noep", (&moe_mk_experts_ck_fused)->name, &c, &mk, NULL), MOE_OK);
    ck_assert_int_eq(direct_apply(mk, &p, &p.ids, &fmt), MOE_ERR_UNSUPPORTED);
    moe_mk_destroy(mk);
    ck_assert_int_eq(moe_mk_create("noep", (&moe_mk_experts_permute_grouped)->name, &c, &mk, NULL), MOE_OK);
    ck_assert_int_eq(direct_apply(mk, &p, &p.ids, &fmt), MOE_ERR_UNSUPPORTED);
    moe_mk_destroy(mk);
    moe_tensor_free(&bad);
    unmake(&p);
    /* grouped_contig: wrong format and out-of-range ids */
    make(&p, MOE_SCHEME_FP8_WBLOCK128_AGROUP128, 2, M);
    c = config(MOE_SCHEME_FP8_WBLOCK128_AGROUP128, 2);
    ck_assert_int_eq(moe_mk_create("noep", (&moe_mk_experts_grouped_contig)->name, &c, &mk, NULL), MOE_OK);
    ck_assert_int_eq(direct_apply(mk, &p, &p.ids, &fmt), MOE_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "grouped"));
    bad = tt_new(MOE_I32, 2, M, 2, 0);
    memcpy(bad.data, p.ids.data, bad.nbytes);
    ((int32_t *)bad.data)[5] = E; /* -1 is a non-local slot (taken, zero); E is out of range */
    ck_assert_int_ne(direct_apply(mk, &p, &bad, NULL), MOE_OK);
    ((int32_t *)bad.data)[5] = -1; /* another rank's expert: takes no row */
    ck_assert_msg(direct_apply(mk, &p, &bad, NULL) == MOE_OK, "%s", moe_last_error());
    moe_mk_destroy(mk);
    moe_tensor_free(&bad);
    /* batched_masked: a Standard prep; max_tokens too small (the scatter refuses) */
    c = config(MOE_SCHEME_BF16, 2);
    moe_mk_prep std;
    memset(&std, 0, sizeof std);
    std.format = MOE_FMT_STANDARD;
    unmake(&p);
    make(&p, MOE_SCHEME_BF16, 2, M);
    ck_assert_int_eq(moe_mk_create("batched", (&moe_mk_experts_batched_masked)->name, &c, &mk, NULL), MOE_OK);
    ck_assert_int_eq(direct_apply(mk, &p, &p.ids, &std), MOE_ERR_UNSUPPORTED);
    moe_mk_destroy(mk);
    c.max_tokens = 2;
    ck_assert_int_eq(moe_mk_create("batched", (&moe_mk_experts_batched_masked)->name, &c, &mk, NULL), MOE_OK);
    moe_tensor out = tt_new(MOE_BF16, 2, M, H, 0);
    ck_assert_int_eq(moe_mk_forward(mk, &p.mw, &p.x, &p.ids, &p.w, &out), MOE_ERR_SHAPE);
    moe_mk_destroy(mk);
    moe_tensor_free(&out);
    unmake(&p);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("modular_experts");
    TCase *tc = tcase_create("single_rank");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, permute_grouped_vs_ref);
    tcase_add_test(tc, batched_masked_vs_ref);
    tcase_add_test(tc, grouped_contig_vs_ref);
    tcase_add_test(tc, ck_fused_vs_ref);
    tcase_add_test(tc, worst_shares);
    tcase_add_test(tc, permute_grouped_three_step_tokens);
    tcase_add_test(tc, weights_on_input_topk1);
    tcase_add_test(tc, grouped_contig_chunked);
    tcase_add_test(tc, empty_problem);
    tcase_add_test(tc, argument_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_set_fork_status(sr, CK_NOFORK); /* worst[] is shared across tests */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
