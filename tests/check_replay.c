/* The stage-by-stage replay (include/moe/replay.h) and the grouped-GEMM
 * bound (include/moe/bounds.h):
 *   - modular-kernel forwards of 15 pairs (every PF, every experts type,
 *     R = 1 and 2, bf16 / block fp8 / w4a16) through the replay of
 *     moe_ops_ref: every entry the forward uses is replayed with zero
 *     mismatches, the output equals the direct run bit for bit, and with
 *     two direct calls (route, align_batched) all 29 entries are covered;
 *   - injected faults: one entry of a copy of moe_ops_ref perturbed
 *     (activation by one ulp; grouped_gemm far past its bound, and within
 *     it; DeepEP-LL and pplx dispatch rows reordered, or a row's data
 *     separated from its handle): the replay names exactly that stage;
 *   - a backend error and a reference error are counted and named;
 *   - the table's rules: NULL entries stay NULL, memory entries pass
 *     through, no active replay, one replay per thread;
 *   - moe_gemm_bound is sound and not vacuous: a k-descending f32 GEMM
 *     uses a share in (0, 1] of it (DEQUANT_F32 with f32 and bf16 outputs,
 *     BLOCK_TILES), twice the bound fails. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mk_fixture.h"
#include "moe/bounds.h"
#include "moe/format.h"
#include "moe/modular.h"
#include "moe/replay.h"
#include "moe/rng.h"
#include "moe/slot_bound.h"
#include "test_tensors.h"

enum { I = 128, E = 8, G = 8 };

typedef struct {
    const char *pf, *ex;
    moe_scheme sc;
    int k, R;
    int64_t H;
    int matched;
} mcase;

static const mcase CASES[] = {
    {"noep", "ref", MOE_SCHEME_BF16, 2, 1, 256, 0},
    {"noep", "triton_like", MOE_SCHEME_BF16, 2, 1, 256, 0},
    {"noep", "triton_like", MOE_SCHEME_FP8_WBLOCK128_AGROUP128, 2, 1, 256, 0},
    {"noep", "triton_like", MOE_SCHEME_W4A16_G128, 2, 1, 256, 0},
    {"noep", "permute_grouped", MOE_SCHEME_BF16, 2, 1, 256, 0},
    {"noep", "ck_fused", MOE_SCHEME_BF16, 2, 1, 256, 0},
    {"noep", "grouped_contig", MOE_SCHEME_FP8_WBLOCK128_AGROUP128, 2, 1, 256, 0},
    {"batched", "naive_batched", MOE_SCHEME_BF16, 2, 1, 256, 0},
    {"batched", "batched_masked", MOE_SCHEME_BF16, 2, 1, 256, 0},
    {"allgather_rs", "triton_like", MOE_SCHEME_BF16, 2, 2, 256, 0},
    {"deepep_ht", "triton_like", MOE_SCHEME_BF16, 2, 2, 256, 0},
    {"deepep_ll", "batched_masked", MOE_SCHEME_BF16, 2, 2, 2048, 0},
    {"deepep_ll", "naive_batched", MOE_SCHEME_FP8_WBLOCK128_AGROUP128, 2, 2, 2048, 1},
    {"pplx", "batched_masked", MOE_SCHEME_BF16, 2, 2, 256, 0},
    {"hybrid_ep", "grouped_contig", MOE_SCHEME_FP8_WBLOCK128_AGROUP128, 2, 2, 256, 0},
};
enum { NCASES = sizeof CASES / sizeof CASES[0] };
static const mcase NOEP_TL = {"noep", "triton_like", MOE_SCHEME_BF16, 2, 1, 256, 0};
static const mcase LL = {"deepep_ll", "batched_masked", MOE_SCHEME_BF16, 2, 2, 2048, 0};
static const mcase PPLX = {"pplx", "batched_masked", MOE_SCHEME_BF16, 2, 2, 256, 0};

static void make(mkf_prob *p, const mcase *mc, uint64_t seed)
{
    mkf_make(p, mc->sc, mc->k, G, mc->H, I, E, seed, 0.05f, mc->matched, 0);
}

/* the pair on ops; R = 1 through moe_mk_forward, else the rank-major views */
static moe_status run_case(const mcase *mc, const moe_ops *ops, mkf_prob *p, moe_tensor *out)
{
    moe_mk_config c = mkf_config(mc->sc, mc->k, mc->R, mc->H, I, E);
    c.ops = ops;
    moe_mk *mk = NULL;
    ck_assert_msg(moe_mk_create(mc->pf, mc->ex, &c, &mk, NULL) == MOE_OK, "%s x %s %s: %s", mc->pf, mc->ex,
                  moe_scheme_name(mc->sc), moe_last_error());
    moe_status st;
    if (mc->R == 1) {
        st = moe_mk_forward(mk, &p->mw, &p->x, &p->ids, &p->w, out);
    } else {
        mkf_views v;
        mkf_wrap(p, mc->R, out, &v);
        st = moe_mk_forward_ranks(mk, &p->mw, &v.x3, &v.i3, &v.w3, &v.o3);
    }
    moe_mk_destroy(mk);
    return st;
}

static moe_status replay_case(const mcase *mc, const moe_ops *backend, mkf_prob *p, moe_tensor *out, moe_replay *r)
{
    ck_assert_int_eq(moe_replay_begin(backend, r), MOE_OK);
    moe_status st = run_case(mc, moe_replay_ops(), p, out);
    moe_replay_end(r);
    return st;
}

/* Every called stage's verdict for backend: pass except `failing` (NULL:
 * none), which must fail. Returns the number of stages that disagree and
 * describes them in msg. */
static int verdicts(const moe_replay *r, const char *backend, const char *scheme, const char *failing, char *msg,
                    size_t n)
{
    int bad = 0;
    size_t at = 0;
    msg[0] = 0;
    for (int i = 0; i < moe_replay_stage_count(r); i++) {
        const moe_replay_stage *s = moe_replay_stage_get(r, i);
        int pass = moe_replay_verdict(s, backend, scheme, NULL, NULL);
        int want = !failing || strcmp(s->name, failing);
        if (pass != want) {
            bad++;
            char d[600];
            moe_replay_describe(s, d, sizeof d);
            if (at < n) at += (size_t)snprintf(msg + at, n - at, "[%s %s: %s] ", backend, want ? "should pass" : "should fail", d);
        }
    }
    return bad;
}

static moe_replay *new_replay(void)
{
    moe_replay *r = malloc(sizeof *r);
    ck_assert_ptr_nonnull(r);
    return r;
}

/* ---- 1. the reference through its own replay --------------------------- */

START_TEST(ref_forwards_replay_clean)
{
    int covered[MOE_REPLAY_STAGE_COUNT] = {0};
    moe_replay *r = new_replay();
    char msg[4096];
    for (int ci = 0; ci < NCASES; ci++) {
        const mcase *mc = &CASES[ci];
        mkf_prob p;
        make(&p, mc, 100 + (uint64_t)ci);
        moe_tensor direct = tt_new(p.xd, 2, G, mc->H, 0), replayed = tt_new(p.xd, 2, G, mc->H, 0);
        ck_assert_msg(run_case(mc, &moe_ops_ref, &p, &direct) == MOE_OK, "%s", moe_last_error());
        ck_assert_msg(replay_case(mc, &moe_ops_ref, &p, &replayed, r) == MOE_OK, "%s x %s: %s", mc->pf, mc->ex,
                      moe_last_error());
        ck_assert_msg(memcmp(direct.data, replayed.data, direct.nbytes) == 0, "%s x %s: the replayed output differs",
                      mc->pf, mc->ex);
        const char *scheme = moe_scheme_name(mc->sc);
        /* the reference passes under its own rows and under every other backend's class */
        int bad = verdicts(r, "ref", scheme, NULL, msg, sizeof msg);
        bad += verdicts(r, "cpu", scheme, NULL, msg + strlen(msg), sizeof msg - strlen(msg));
        bad += verdicts(r, "cuda-fast", scheme, NULL, msg + strlen(msg), sizeof msg - strlen(msg));
        ck_assert_msg(bad == 0, "%s x %s: %s", mc->pf, mc->ex, msg);
        int64_t compared = 0, zero_calls = 0;
        printf("replay %-12s x %-15s %-24s R=%d:", mc->pf, mc->ex, scheme, mc->R);
        for (int i = 0; i < moe_replay_stage_count(r); i++) {
            const moe_replay_stage *s = moe_replay_stage_get(r, i);
            int idx = (int)(s - r->stage);
            covered[idx] = 1;
            compared += s->exact.n;
            zero_calls += s->exact.n == 0;
            ck_assert_msg(s->exact.mismatches == 0 && s->backend_errors == 0 && s->ref_errors == 0, "%s: %s",
                          s->name, s->first_error);
            if (!strcmp(s->name, "grouped_gemm"))
                ck_assert_msg(s->has_bound && s->bounded.n == s->exact.n && s->bounded.share == 0.0,
                              "gemm bounded metrics missing");
            if (!strcmp(s->name, "deepep_ll_dispatch") || !strcmp(s->name, "pplx_dispatch"))
                ck_assert_msg(s->has_set && s->set.n == s->exact.n && s->set.mismatches == 0, "set metrics missing");
            printf(" %s(%lld)", s->name, (long long)s->calls);
        }
        printf("; %lld elements compared\n", (long long)compared);
        ck_assert_msg(zero_calls == 0, "%s x %s: a replayed stage compared nothing", mc->pf, mc->ex);
        moe_tensor_free(&direct), moe_tensor_free(&replayed);
        mkf_unmake(&p);
    }
    /* the two entries no pair uses, called directly through the table */
    ck_assert_int_eq(moe_replay_begin(&moe_ops_ref, r), MOE_OK);
    const moe_ops *ops = moe_replay_ops();
    moe_tensor logits = tt_new(MOE_F32, 2, 6, E, 0), ids = tt_new(MOE_I32, 2, 6, 2, 0), w = tt_new(MOE_F32, 2, 6, 2, 0);
    moe_rng_fill_normal(logits.data, 6 * E, 7, 1, 0, 0.0f, 1.0f);
    moe_route_params rp = {.method = MOE_ROUTE_SOFTMAX_TOPK, .topk = 2, .renormalize = 1, .routed_scaling_factor = 1.0f};
    ck_assert_msg(ops->route(&logits, &rp, &ids, &w) == MOE_OK, "%s", moe_last_error());
    int32_t cnt[3] = {5, 0, 3};
    moe_tensor nt = tt_i32(cnt, 3), sorted = tt_new(MOE_I32, 1, 3 * 8, 0, 0), eids = tt_new(MOE_I32, 1, 6, 0, 0),
               post = tt_new(MOE_I32, 1, 1, 0, 0);
    ck_assert_msg(ops->align_batched(&nt, 8, 4, &sorted, &eids, &post) == MOE_OK, "%s", moe_last_error());
    moe_replay_end(r);
    for (int i = 0; i < moe_replay_stage_count(r); i++) {
        const moe_replay_stage *s = moe_replay_stage_get(r, i);
        ck_assert_msg(moe_replay_verdict(s, "ref", "bf16", NULL, NULL) && s->exact.n > 0, "%s", s->name);
        covered[s - r->stage] = 1;
    }
    int n = 0;
    char missing[512] = "";
    for (int i = 0; i < MOE_REPLAY_STAGE_COUNT; i++) {
        n += covered[i];
        if (!covered[i]) strncat(missing, r->stage[i].name, sizeof missing - strlen(missing) - 2), strcat(missing, " ");
    }
    printf("replay: %d of %d ops entries covered (15 pairs + route, align_batched)\n", n, MOE_REPLAY_STAGE_COUNT);
    ck_assert_msg(n == MOE_REPLAY_STAGE_COUNT, "not covered: %s", missing);
    moe_tensor *ts[] = {&logits, &ids, &w, &nt, &sorted, &eids, &post};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) moe_tensor_free(ts[i]);
    free(r);
}
END_TEST

/* ---- 2. injected faults ------------------------------------------------- */

static moe_ops g_bad;   /* the faulty backend of the current test (Check forks per test) */
static int g_fault;     /* which fault the wrappers inject */
enum { F_ULP = 1, F_FAR, F_NEAR, F_REORDER, F_UNPAIR, F_ERROR };

static int64_t first_nonzero(const moe_tensor *t, const moe_tensor *row_expert)
{
    int64_t n = moe_tensor_numel(t), cols = t->ndim ? t->shape[t->ndim - 1] : 1;
    for (int64_t i = 0; i < n; i++) {
        if (row_expert && ((const int32_t *)row_expert->data)[i / cols] < 0) continue;
        double v = moe_tensor_value_at(t, i);
        if (v != 0.0 && isfinite(v)) return i;
    }
    return -1;
}

/* element i of a bf16 / f16 / f32 tensor, one ulp off (last code bit flipped) or set to v */
static void flip_ulp(moe_tensor *t, int64_t i)
{
    if (t->dtype == MOE_F32) ((uint32_t *)t->data)[i] ^= 1u;
    else ((uint16_t *)t->data)[i] ^= 1u;
}

static void set_value(moe_tensor *t, int64_t i, float v)
{
    if (t->dtype == MOE_F32) {
        ((float *)t->data)[i] = v;
        return;
    }
    uint32_t c = 0;
    moe_encode(t->dtype, v, MOE_POLICY_IEEE_RNE, &c, NULL);
    ((uint16_t *)t->data)[i] = (uint16_t)c;
}

static moe_status bad_activation(const moe_tensor *x, const moe_tensor *re, const moe_act_params *p, moe_tensor *out)
{
    if (g_fault == F_ERROR) return moe_fail(MOE_ERR_INTERNAL, "activation: injected failure");
    moe_status st = moe_ref_activation(x, re, p, out);
    int64_t i = st ? -1 : first_nonzero(out, NULL);
    if (i >= 0) flip_ulp(out, i);
    return st;
}

static moe_status bad_gemm(const moe_gemm_args *g, moe_tensor *out)
{
    moe_status st = moe_ref_grouped_gemm(g, out);
    int64_t i = st ? -1 : first_nonzero(out, g->row_expert);
    if (i < 0) return st;
    if (g_fault == F_FAR) set_value(out, i, (float)(2.0 * moe_tensor_value_at(out, i) + 1.0));
    else flip_ulp(out, i);
    return st;
}

/* rows [0, n) of segment sg of t (rows of nbytes / rows bytes) in the order ord */
static void reorder(moe_tensor *t, int64_t rows, int64_t seg_rows, int64_t sg, const int64_t *ord, int64_t n)
{
    if (!t || n <= 0) return;
    size_t rb = t->nbytes / (size_t)rows;
    uint8_t *base = (uint8_t *)t->data + (size_t)(sg * seg_rows) * rb, *tmp = malloc(rb * (size_t)n);
    memcpy(tmp, base, rb * (size_t)n);
    for (int64_t j = 0; j < n; j++) memcpy(base + (size_t)j * rb, tmp + (size_t)ord[j] * rb, rb);
    free(tmp);
}

/* DeepEP-LL rows in another valid order: source blocks last-rank first,
 * each block's rows reversed, layout_range begins moved with them
 * (F_REORDER); or two rows' data swapped, their src_info not (F_UNPAIR) */
static moe_status bad_ll_dispatch(const moe_deepep_ll_config *cfg, const moe_tensor *x, const moe_tensor *ids,
                                  const moe_deepep_ll_recv *out)
{
    moe_status st = moe_ref_deepep_ll_dispatch(cfg, x, ids, out);
    if (st) return st;
    int64_t R = out->x->shape[0], L = out->x->shape[1], T = out->x->shape[2], segs = R * L;
    int64_t *ord = malloc(sizeof *ord * (size_t)T);
    int unpaired = 0;
    for (int64_t sg = 0; sg < segs; sg++) {
        int64_t *lr = (int64_t *)out->layout_range->data + sg * R, n = 0, at = 0;
        for (int64_t s = R - 1; s >= 0; s--) {
            int64_t cnt = (int64_t)(uint32_t)lr[s], b = (int64_t)((uint64_t)lr[s] >> 32);
            for (int64_t j = cnt - 1; j >= 0; j--) ord[n++] = b + j;
            lr[s] = (int64_t)((uint64_t)at << 32 | (uint64_t)cnt);
            at += cnt;
        }
        if (g_fault == F_REORDER) {
            reorder(out->x, segs * T, T, sg, ord, n);
            reorder(out->x_scales, segs * T, T, sg, ord, n);
            reorder(out->src_info, segs * T, T, sg, ord, n);
        } else {
            for (int64_t s = 0; s < R; s++) /* back to the reference's begins */
                lr[s] = (int64_t)(uint32_t)lr[s];
            for (int64_t s = 0, a = 0; s < R; s++) {
                int64_t cnt = (int64_t)(uint32_t)lr[s];
                lr[s] = (int64_t)((uint64_t)a << 32 | (uint64_t)cnt), a += cnt;
            }
            if (!unpaired && n >= 2) {
                int64_t sw[2] = {1, 0};
                reorder(out->x, segs * T, T, sg, sw, 2);
                unpaired = 1;
            }
        }
    }
    free(ord);
    return st;
}

/* pplx rows of each expert reversed, src with them */
static moe_status bad_pplx_dispatch(const moe_pplx_config *cfg, const moe_tensor *x, const moe_tensor *xs,
                                    const moe_tensor *ids, const moe_pplx_recv *out)
{
    moe_status st = moe_ref_pplx_dispatch(cfg, x, xs, ids, out);
    if (st) return st;
    int64_t segs = out->x->shape[0] * out->x->shape[1], T = out->x->shape[2];
    int64_t *ord = malloc(sizeof *ord * (size_t)T);
    for (int64_t sg = 0; sg < segs; sg++) {
        int64_t n = ((const int32_t *)out->num_tokens->data)[sg];
        for (int64_t j = 0; j < n; j++) ord[j] = n - 1 - j;
        reorder(out->x, segs * T, T, sg, ord, n);
        reorder(out->x_scales, segs * T, T, sg, ord, n);
        reorder(out->src, segs * T, T, sg, ord, n);
    }
    free(ord);
    return st;
}

/* the pair through the replay of g_bad; returns the forward's status */
static moe_status faulty_run(const mcase *mc, moe_replay *r, uint64_t seed, int *out_differs)
{
    mkf_prob p;
    make(&p, mc, seed);
    moe_tensor direct = tt_new(p.xd, 2, G, mc->H, 0), replayed = tt_new(p.xd, 2, G, mc->H, 0);
    ck_assert_int_eq(run_case(mc, &moe_ops_ref, &p, &direct), MOE_OK);
    moe_status st = replay_case(mc, &g_bad, &p, &replayed, r);
    *out_differs = memcmp(direct.data, replayed.data, direct.nbytes) != 0;
    moe_tensor_free(&direct), moe_tensor_free(&replayed);
    mkf_unmake(&p);
    return st;
}

START_TEST(fault_activation_ulp)
{
    g_bad = moe_ops_ref, g_bad.activation = bad_activation, g_fault = F_ULP;
    moe_replay *r = new_replay();
    int differs;
    ck_assert_int_eq(faulty_run(&NOEP_TL, r, 200, &differs), MOE_OK);
    char msg[4096];
    ck_assert_msg(verdicts(r, "ref", "bf16", "activation", msg, sizeof msg) == 0, "%s", msg);
    ck_assert_msg(verdicts(r, "cpu", "bf16", "activation", msg, sizeof msg) == 0, "%s", msg);
    const moe_replay_stage *s = moe_replay_stage_find(r, "activation");
    ck_assert_int_eq(s->exact.mismatches, s->calls); /* one element per call */
    ck_assert(s->exact.max_ulp == 1.0 && s->exact_where && !strcmp(s->exact_where, "out"));
    char d[600];
    moe_replay_describe(s, d, sizeof d);
    printf("activation one ulp off: %s (final output %s)\n", d, differs ? "differs" : "equal");
    free(r);
}
END_TEST

START_TEST(fault_gemm_far)
{
    g_bad = moe_ops_ref, g_bad.grouped_gemm = bad_gemm, g_fault = F_FAR;
    moe_replay *r = new_replay();
    int differs;
    ck_assert_int_eq(faulty_run(&NOEP_TL, r, 201, &differs), MOE_OK);
    char msg[4096];
    ck_assert_msg(verdicts(r, "ref", "bf16", "grouped_gemm", msg, sizeof msg) == 0, "%s", msg);
    ck_assert_msg(verdicts(r, "cpu", "bf16", "grouped_gemm", msg, sizeof msg) == 0, "%s", msg);
    const moe_replay_stage *s = moe_replay_stage_find(r, "grouped_gemm");
    char d[600];
    moe_replay_describe(s, d, sizeof d);
    ck_assert_msg(s->has_bound && s->bounded.bound_failures == s->calls && s->bounded.share > 1.0, "%s", d);
    printf("grouped_gemm far off: %s\n", d);
    free(r);
}
END_TEST

START_TEST(fault_gemm_within_bound)
{
    g_bad = moe_ops_ref, g_bad.grouped_gemm = bad_gemm, g_fault = F_NEAR;
    moe_replay *r = new_replay();
    int differs;
    ck_assert_int_eq(faulty_run(&NOEP_TL, r, 202, &differs), MOE_OK);
    char msg[4096];
    /* EXACT (ref's row) flags it, BOUNDED (cpu's, cuda-fast's rows) passes it */
    ck_assert_msg(verdicts(r, "ref", "bf16", "grouped_gemm", msg, sizeof msg) == 0, "%s", msg);
    ck_assert_msg(verdicts(r, "cpu", "bf16", NULL, msg, sizeof msg) == 0, "%s", msg);
    ck_assert_msg(verdicts(r, "cuda-fast", "bf16", NULL, msg, sizeof msg) == 0, "%s", msg);
    const moe_replay_stage *s = moe_replay_stage_find(r, "grouped_gemm");
    moe_exact_class cls;
    const moe_tolerance_row *row;
    ck_assert(moe_replay_verdict(s, "cpu", "bf16", &cls, &row) && cls == MOE_CLASS_BOUNDED && row);
    char d[600];
    moe_replay_describe(s, d, sizeof d);
    ck_assert_msg(s->exact.mismatches == s->calls && s->bounded.bound_failures == 0, "%s", d);
    ck_assert_msg(s->bounded.share > 0.0 && s->bounded.share <= 1.0, "%s", d);
    printf("grouped_gemm one ulp off (row %s, %s): %s\n", row->id, moe_exact_class_name(cls), d);
    free(r);
}
END_TEST

START_TEST(fault_ll_reorder_is_a_set)
{
    g_bad = moe_ops_ref, g_bad.deepep_ll_dispatch = bad_ll_dispatch, g_fault = F_REORDER;
    moe_replay *r = new_replay();
    int differs;
    ck_assert_int_eq(faulty_run(&LL, r, 203, &differs), MOE_OK);
    char msg[4096];
    ck_assert_msg(verdicts(r, "ref", "bf16", "deepep_ll_dispatch", msg, sizeof msg) == 0, "%s", msg);
    ck_assert_msg(verdicts(r, "cpu", "bf16", NULL, msg, sizeof msg) == 0, "%s", msg); /* SET row */
    const moe_replay_stage *s = moe_replay_stage_find(r, "deepep_ll_dispatch");
    ck_assert(s->has_set && s->exact.mismatches > 0 && s->set.mismatches == 0);
    ck_assert_msg(!differs, "the LL combine reads rows through the handle: any order combines the same");
    char d[600];
    moe_replay_describe(s, d, sizeof d);
    printf("deepep_ll_dispatch reordered: %s\n", d);
    free(r);
}
END_TEST

START_TEST(fault_ll_unpaired_row)
{
    g_bad = moe_ops_ref, g_bad.deepep_ll_dispatch = bad_ll_dispatch, g_fault = F_UNPAIR;
    moe_replay *r = new_replay();
    int differs;
    ck_assert_int_eq(faulty_run(&LL, r, 204, &differs), MOE_OK);
    char msg[4096];
    ck_assert_msg(verdicts(r, "cpu", "bf16", "deepep_ll_dispatch", msg, sizeof msg) == 0, "%s", msg);
    const moe_replay_stage *s = moe_replay_stage_find(r, "deepep_ll_dispatch");
    ck_assert(s->set.mismatches > 0 && s->set_where && !strcmp(s->set_where, "out->x"));
    ck_assert(differs);
    free(r);
}
END_TEST

START_TEST(fault_pplx_reorder_is_a_set)
{
    g_bad = moe_ops_ref, g_bad.pplx_dispatch = bad_pplx_dispatch;
    moe_replay *r = new_replay();
    int differs;
    ck_assert_int_eq(faulty_run(&PPLX, r, 205, &differs), MOE_OK);
    char msg[4096];
    ck_assert_msg(verdicts(r, "ref", "bf16", "pplx_dispatch", msg, sizeof msg) == 0, "%s", msg);
    ck_assert_msg(verdicts(r, "cpu", "bf16", NULL, msg, sizeof msg) == 0, "%s", msg);
    const moe_replay_stage *s = moe_replay_stage_find(r, "pplx_dispatch");
    ck_assert(s->has_set && s->exact.mismatches > 0 && s->set.mismatches == 0);
    free(r);
}
END_TEST

/* align: each expert's run of blocks reversed (F_REORDER: what atomic
 * placement may give), or the first entries of two experts' runs swapped
 * (F_UNPAIR: rows handed to the wrong expert) */
static moe_status bad_align(const moe_tensor *ids, const moe_align_params *p, moe_tensor *sorted, moe_tensor *eids,
                            moe_tensor *ntp)
{
    moe_status st = moe_ref_align_block_size(ids, p, sorted, eids, ntp);
    if (st) return st;
    int32_t *v = sorted->data;
    const int32_t *e = eids->data;
    int64_t nb = moe_tensor_numel(eids), bs = p->block_size, first = -1;
    for (int64_t b = 0; b < nb;) {
        int64_t r = b;
        while (r < nb && e[r] == e[b]) r++;
        if (e[b] >= 0) {
            if (g_fault == F_REORDER)
                for (int64_t i = b * bs, j = r * bs - 1; i < j; i++, j--) {
                    int32_t t = v[i];
                    v[i] = v[j], v[j] = t;
                }
            else if (first < 0) first = b * bs;
            else if (v[first] != v[b * bs]) {
                int32_t t = v[first];
                v[first] = v[b * bs], v[b * bs] = t;
                return st;
            }
        }
        b = r;
    }
    return st;
}

START_TEST(fault_align_reorder_is_a_set)
{
    g_bad = moe_ops_ref, g_bad.align_block_size = bad_align, g_fault = F_REORDER;
    moe_replay *r = new_replay();
    int differs;
    ck_assert_int_eq(faulty_run(&NOEP_TL, r, 206, &differs), MOE_OK);
    char msg[4096];
    ck_assert_msg(verdicts(r, "cuda-conform", "bf16", "align_block_size", msg, sizeof msg) == 0, "%s", msg);
    ck_assert_msg(verdicts(r, "cuda-atomic", "bf16", NULL, msg, sizeof msg) == 0, "%s", msg); /* SET row */
    const moe_replay_stage *s = moe_replay_stage_find(r, "align_block_size");
    ck_assert(s->has_set && s->exact.mismatches > 0 && s->set.mismatches == 0);
    ck_assert_msg(!differs, "rows are found through the layout: any order within an expert computes the same");
    /* rows handed to another expert: not a set of the same pairs */
    g_fault = F_UNPAIR;
    ck_assert_int_eq(faulty_run(&NOEP_TL, r, 207, &differs), MOE_OK);
    ck_assert_msg(verdicts(r, "cuda-atomic", "bf16", "align_block_size", msg, sizeof msg) == 0, "%s", msg);
    s = moe_replay_stage_find(r, "align_block_size");
    ck_assert(s->set.mismatches > 0 && s->set_where && !strcmp(s->set_where, "sorted_token_ids"));
    ck_assert(differs);
    free(r);
}
END_TEST

/* ---- 3. errors ------------------------------------------------------------ */

START_TEST(backend_error_is_recorded)
{
    g_bad = moe_ops_ref, g_bad.activation = bad_activation, g_fault = F_ERROR;
    moe_replay *r = new_replay();
    int differs;
    moe_status st = faulty_run(&NOEP_TL, r, 206, &differs);
    ck_assert_int_eq(st, MOE_ERR_INTERNAL);
    ck_assert_msg(strstr(moe_last_error(), "injected failure"), "the backend's message survives: %s", moe_last_error());
    const moe_replay_stage *s = moe_replay_stage_find(r, "activation");
    ck_assert(s && s->backend_errors == 1 && s->ref_errors == 0 && s->exact.n == 0);
    ck_assert_msg(strstr(s->first_error, "backend: ") == s->first_error && strstr(s->first_error, "injected failure"),
                  "%s", s->first_error);
    char msg[4096];
    ck_assert_msg(verdicts(r, "ref", "bf16", "activation", msg, sizeof msg) == 0, "%s", msg);
    free(r);
}
END_TEST

static moe_status lax_route(const moe_tensor *logits, const moe_route_params *p, moe_tensor *ids, moe_tensor *w)
{
    (void)logits, (void)p, (void)ids, (void)w;
    return MOE_OK; /* accepts anything */
}

START_TEST(reference_error_is_recorded)
{
    g_bad = moe_ops_ref, g_bad.route = lax_route;
    moe_replay *r = new_replay();
    ck_assert_int_eq(moe_replay_begin(&g_bad, r), MOE_OK);
    moe_tensor logits = tt_new(MOE_F32, 2, 4, E, 0), ids = tt_new(MOE_I32, 2, 4, 2, 0), w = tt_new(MOE_F32, 2, 4, 2, 0);
    moe_route_params rp = {.method = MOE_ROUTE_SOFTMAX_TOPK, .topk = 0, .routed_scaling_factor = 1.0f};
    ck_assert_int_eq(moe_replay_ops()->route(&logits, &rp, &ids, &w), MOE_OK);
    moe_replay_end(r);
    const moe_replay_stage *s = moe_replay_stage_find(r, "route");
    ck_assert(s && s->ref_errors == 1 && s->backend_errors == 0);
    ck_assert_msg(strstr(s->first_error, "reference: ") == s->first_error, "%s", s->first_error);
    ck_assert(!moe_replay_verdict(s, "ref", "bf16", NULL, NULL));
    printf("reference error: %s\n", s->first_error);
    moe_tensor_free(&logits), moe_tensor_free(&ids), moe_tensor_free(&w);
    free(r);
}
END_TEST

START_TEST(table_rules)
{
    g_bad = moe_ops_ref, g_bad.route = NULL, g_bad.pplx_combine = NULL;
    moe_replay *r = new_replay(), *r2 = new_replay();
    ck_assert_ptr_null(moe_replay_ops());
    ck_assert_int_eq(moe_replay_begin(&g_bad, r), MOE_OK);
    const moe_ops *t = moe_replay_ops();
    ck_assert_ptr_eq(t, &r->ops);
    ck_assert_int_eq(moe_ops_check(t), MOE_OK);
    ck_assert(t->route == NULL && t->pplx_combine == NULL && t->activation && t->activation != moe_ops_ref.activation);
    ck_assert(t->alloc == g_bad.alloc && t->free == g_bad.free && t->copy == g_bad.copy &&
              t->synchronize == g_bad.synchronize);
    ck_assert_str_eq(t->name, "ref");
    ck_assert_int_eq(t->device, MOE_DEVICE_HOST);
    ck_assert_int_eq(moe_replay_begin(&moe_ops_ref, r2), MOE_ERR_INVALID_ARG); /* one per thread */
    ck_assert_int_eq(moe_replay_stage_count(r), 0);
    moe_replay_end(r);
    ck_assert_ptr_null(moe_replay_ops());
    /* the table after end: refused, the backend not called */
    moe_tensor x = tt_new(MOE_F32, 2, 2, 4, 0), o = tt_new(MOE_F32, 2, 2, 2, 0), re = tt_new(MOE_I32, 1, 2, 0, 0);
    moe_act_params ap = moe_act_defaults(MOE_ACT_SILU, MOE_LAYOUT_GATE_UP);
    ck_assert_int_eq(t->activation(&x, &re, &ap, &o), MOE_ERR_INVALID_ARG);
    ck_assert_msg(strstr(moe_last_error(), "no active replay"), "%s", moe_last_error());
    ck_assert_int_eq(moe_replay_begin(NULL, r), MOE_ERR_NULL);
    ck_assert_int_eq(moe_replay_begin(&moe_ops_ref, NULL), MOE_ERR_NULL);
    ck_assert_ptr_null(moe_replay_stage_find(r, "activation"));
    ck_assert_ptr_null(moe_replay_stage_get(r, 0));
    ck_assert(!moe_replay_verdict(NULL, "ref", "bf16", NULL, NULL));
    /* the replay works again after end; NULL optional outputs stay NULL for the reference */
    ck_assert_int_eq(moe_replay_begin(&moe_ops_ref, r2), MOE_OK);
    moe_quant_spec sp;
    ck_assert_int_eq(moe_scheme_spec(MOE_SCHEME_BF16, MOE_OPERAND_ACT, &sp), MOE_OK);
    moe_tensor q = tt_new(MOE_BF16, 2, 2, 4, 0);
    ck_assert_msg(moe_replay_ops()->quantize(&sp, &x, NULL, &q, NULL, NULL) == MOE_OK, "%s", moe_last_error());
    moe_replay_end(r2);
    const moe_replay_stage *s = moe_replay_stage_find(r2, "quantize");
    ck_assert(s && s->exact.n == 8 && moe_replay_verdict(s, "ref", "bf16", NULL, NULL));
    /* a stage without a tolerance row fails, naming the triple */
    moe_replay_stage fake = *s;
    fake.name = "no_such_stage";
    const moe_tolerance_row *row = (const moe_tolerance_row *)1;
    ck_assert(!moe_replay_verdict(&fake, "ref", "bf16", NULL, &row) && row == NULL);
    ck_assert(strstr(moe_last_error(), "no_such_stage"));
    moe_tensor_free(&x), moe_tensor_free(&o), moe_tensor_free(&re), moe_tensor_free(&q);
    free(r), free(r2);
}
END_TEST

/* ---- 4. the gemm bound ----------------------------------------------------- */

/* A test-local grouped GEMM in another order: k descending (tiles
 * descending, and k descending inside each, for BLOCK_TILES), f32 multiply
 * then add (no fma), operands as the reference defines them. */
static void gemm_desc(const moe_gemm_args *g, int block, moe_tensor *out)
{
    int64_t P = g->a->shape[0], K = g->a->shape[1], N = g->w->shape[1];
    const int32_t *re = g->row_expert->data;
    memset(out->data, 0, out->nbytes);
    for (int64_t p = 0; p < P; p++) {
        if (re[p] < 0) continue;
        for (int64_t n = 0; n < N; n++) {
            float acc = 0.0f;
            if (block) {
                int64_t kt = (K + 127) / 128, nt = (N + 127) / 128;
                for (int64_t t = kt - 1; t >= 0; t--) {
                    float part = 0.0f;
                    for (int64_t k = (t + 1) * 128 - 1; k >= t * 128; k--) {
                        float prod = (float)moe_tensor_value_at(g->a, p * K + k) *
                                     (float)moe_tensor_value_at(g->w, (re[p] * N + n) * K + k);
                        part = part + prod;
                    }
                    float sa = ((const float *)g->a_scale->data)[p * kt + t];
                    float sw = ((const float *)g->w_scale->data)[(re[p] * nt + n / 128) * kt + t];
                    acc = acc + part * (sa * sw); /* the scales' product first: DeepGEMM's order */
                }
            } else {
                for (int64_t k = K - 1; k >= 0; k--) {
                    float prod = (float)moe_tensor_value_at(g->a, p * K + k) *
                                 (float)moe_tensor_value_at(g->w, (re[p] * N + n) * K + k);
                    acc = acc + prod;
                }
            }
            set_value(out, p * N + n, acc);
        }
    }
}

typedef struct {
    double share, share_one_sided;
    int64_t failures, one_sided_failures, differ, n;
} bound_run;

/* random case: P rows, expert -1 for every 7th; scheme bf16 (a, w bf16)
 * or block fp8; out dtype od */
static bound_run bound_case(moe_scheme sc, moe_dtype od, uint64_t seed)
{
    enum { P = 48, N = 160, K = 512, EX = 3 };
    moe_quant_spec ws, as;
    ck_assert_int_eq(moe_scheme_spec(sc, MOE_OPERAND_WEIGHT, &ws), MOE_OK);
    ck_assert_int_eq(moe_scheme_spec(sc, MOE_OPERAND_ACT, &as), MOE_OK);
    moe_tensor af = tt_new(MOE_F32, 2, P, K, 0), wf = tt_new(MOE_F32, 3, EX, N, K);
    moe_rng_fill_normal(af.data, P * K, seed, 1, 0, 0.0f, 1.0f);
    moe_rng_fill_normal(wf.data, (size_t)EX * N * K, seed, 2, 0, 0.0f, 0.05f);
    moe_tensor a, sa, ga, w, sw, gw;
    int64_t ash[2] = {P, K}, wsh[3] = {EX, N, K};
    ck_assert_int_eq(moe_quant_alloc(&as, 2, ash, &a, &sa, &ga), MOE_OK);
    ck_assert_int_eq(moe_quant_alloc(&ws, 3, wsh, &w, &sw, &gw), MOE_OK);
    ck_assert_int_eq(moe_ref_quantize(&as, &af, NULL, &a, as.gran ? &sa : NULL, NULL), MOE_OK);
    ck_assert_int_eq(moe_ref_quantize(&ws, &wf, NULL, &w, ws.gran ? &sw : NULL, NULL), MOE_OK);
    moe_tensor re = tt_new(MOE_I32, 1, P, 0, 0);
    for (int p = 0; p < P; p++) ((int32_t *)re.data)[p] = p % 7 == 3 ? -1 : (int32_t)(moe_rng_u32(seed, 3, p) % EX);
    moe_gemm_args g = {.scheme = sc, .a = &a, .a_scale = as.gran ? &sa : NULL, .w = &w,
                       .w_scale = ws.gran ? &sw : NULL, .row_expert = &re};
    moe_tensor ref = tt_new(od, 2, P, N, 0), got = tt_new(od, 2, P, N, 0);
    ck_assert_msg(moe_ref_grouped_gemm(&g, &ref) == MOE_OK, "%s", moe_last_error());
    int block = moe_gemm_numerics_of(sc) == MOE_GEMM_BLOCK_TILES;
    gemm_desc(&g, block, &got);
    double *bound = malloc(sizeof(double) * P * N), *one = malloc(sizeof(double) * P * N);
    ck_assert_msg(moe_gemm_bound(&g, &ref, bound) == MOE_OK, "%s", moe_last_error());
    /* "gamma_K A + half an ulp at |ref|": one computation against the exact value */
    for (int64_t p = 0; p < P; p++)
        for (int64_t n = 0; n < N; n++) {
            int32_t e = ((const int32_t *)re.data)[p];
            double A = 0.0;
            if (e >= 0 && !block)
                for (int64_t k = 0; k < K; k++)
                    A += fabs(moe_tensor_value_at(&a, p * K + k) * moe_tensor_value_at(&w, (e * N + n) * K + k));
            double r = moe_tensor_value_at(&ref, p * N + n);
            one[p * N + n] = e < 0 ? 0.0 : moe_gamma_f32(K) * A + (od == MOE_F32 ? 0.0 : moe_half_ulp(od, r));
        }
    moe_cmp_metrics m, m1;
    moe_cmp_init(&m), moe_cmp_init(&m1);
    ck_assert_int_eq(moe_compare_bounded(&got, &ref, bound, &m, NULL), MOE_OK);
    ck_assert_int_eq(moe_compare_bounded(&got, &ref, one, &m1, NULL), MOE_OK);
    bound_run br = {m.share, m1.share, m.bound_failures, m1.bound_failures, m.mismatches, m.n};
    /* twice the bound fails: got = ref + 2 bound (rounded away from ref) at an element of a real row */
    int64_t i = first_nonzero(&ref, &re);
    ck_assert(i >= 0 && bound[i] > 0.0);
    double r = moe_tensor_value_at(&ref, i), v = r + 2.0 * bound[i];
    float fv = (float)v;
    if (fv < v) fv = nextafterf(fv, INFINITY);
    set_value(&got, i, fv);
    if (moe_tensor_value_at(&got, i) < v) { /* bf16 rounded down: one code up */
        uint16_t *c = (uint16_t *)got.data + i;
        *c = (uint16_t)(*c + ((*c & 0x8000u) ? -1 : 1));
    }
    moe_cmp_init(&m);
    ck_assert_int_eq(moe_compare_bounded(&got, &ref, bound, &m, NULL), MOE_OK);
    ck_assert_msg(m.bound_failures >= 1 && !moe_cmp_pass(&m, MOE_CLASS_BOUNDED), "2x the bound must fail");
    moe_tensor *ts[] = {&af, &wf, &a, &sa, &ga, &w, &sw, &gw, &re, &ref, &got};
    for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++) moe_tensor_free(ts[j]);
    free(bound), free(one);
    return br;
}

START_TEST(gemm_bound_not_vacuous)
{
    struct {
        moe_scheme sc;
        moe_dtype od;
    } cs[] = {{MOE_SCHEME_BF16, MOE_F32}, {MOE_SCHEME_BF16, MOE_BF16}, {MOE_SCHEME_FP8_WBLOCK128_AGROUP128, MOE_F32},
              {MOE_SCHEME_FP8_WBLOCK128_AGROUP128, MOE_BF16}};
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        double worst = 0.0, worst1 = 0.0;
        int64_t over1 = 0, differ = 0, n = 0;
        for (uint64_t seed = 1; seed <= 3; seed++) {
            bound_run br = bound_case(cs[c].sc, cs[c].od, 300 + seed);
            /* f32 out: the orders differ somewhere; bf16 out hides nearly every difference */
            ck_assert_msg(br.failures == 0 && br.share <= 1.0 && (cs[c].od != MOE_F32 || br.share > 0.0),
                          "%s out %s seed %llu: share %g", moe_scheme_name(cs[c].sc), moe_dtype_get(cs[c].od)->name,
                          (unsigned long long)seed, br.share);
            if (br.share > worst) worst = br.share;
            if (br.share_one_sided > worst1) worst1 = br.share_one_sided;
            over1 += br.one_sided_failures, differ += br.differ, n += br.n;
        }
        printf("gemm bound %-24s out %-4s k descending: %lld of %lld elements differ, largest share %.3g",
               moe_scheme_name(cs[c].sc), moe_dtype_get(cs[c].od)->name, (long long)differ, (long long)n, worst);
        if (cs[c].sc == MOE_SCHEME_BF16)
            printf("; one-sided gamma_K A + h(ref): share %.3g, %lld over", worst1, (long long)over1);
        printf("\n");
    }
}
END_TEST

/* Both output roundings count: terms 1, 2^-8, 0.75 u, -0.375 u (u = 2^-23,
 * the f32 ulp at 1) sum to m + 0.375 u, m = 1 + 2^-8 the bf16 midpoint
 * between 1 and 1 + 2^-7. The reference (k ascending, fmaf) reaches
 * m + u, the k-descending sum m: bf16 outputs 1 + 2^-7 and 1, a whole ulp
 * apart, which gamma_K A + h(ref) does not cover and moe_gemm_bound does. */
START_TEST(gemm_bound_two_output_roundings)
{
    moe_tensor a = tt_new(MOE_BF16, 2, 1, 4, 0), w = tt_new(MOE_BF16, 3, 1, 1, 4), re = tt_new(MOE_I32, 1, 1, 0, 0);
    moe_tensor ref = tt_new(MOE_BF16, 2, 1, 1, 0), got = tt_new(MOE_BF16, 2, 1, 1, 0);
    const float av[4] = {1.0f, 0x1p-8f, 0x1.8p-24f, -0x1.8p-25f};
    for (int k = 0; k < 4; k++) {
        set_value(&a, k, av[k]), set_value(&w, k, 1.0f);
        ck_assert(moe_tensor_value_at(&a, k) == av[k]);
    }
    moe_gemm_args g = {.scheme = MOE_SCHEME_BF16, .a = &a, .w = &w, .row_expert = &re};
    ck_assert_int_eq(moe_ref_grouped_gemm(&g, &ref), MOE_OK);
    gemm_desc(&g, 0, &got);
    ck_assert(moe_tensor_value_at(&ref, 0) == 1.0 + 0x1p-7 && moe_tensor_value_at(&got, 0) == 1.0);
    double b, A = 1.0 + 0x1p-8 + 0x1.8p-24 + 0x1.8p-25;
    ck_assert_int_eq(moe_gemm_bound(&g, &ref, &b), MOE_OK);
    double one_sided = moe_gamma_f32(4) * A + moe_half_ulp(MOE_BF16, 1.0 + 0x1p-7), d = 0x1p-7;
    printf("two roundings: |got - ref| = 2^-7, moe_gemm_bound %.6g (share %.3f), gamma_K A + h(ref) %.6g (share %.3f)\n",
           b, d / b, one_sided, d / one_sided);
    ck_assert(d <= b && d > one_sided);
    moe_tensor *ts[] = {&a, &w, &re, &ref, &got};
    for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++) moe_tensor_free(ts[j]);
}
END_TEST

/* The bound's value for one f32 output, recomputed from its formula
 * (bounds.h: (gamma_m + gamma_b) A, gamma_b the larger of gamma_m and
 * the truncating tensor-core step model's, A widened by the double sum's
 * own error, plus the underflow term): the soundness tests above pass a loosened bound
 * (a factor on gamma, a dropped term) as well as the right one. */
START_TEST(gemm_bound_value)
{
    moe_tensor a = tt_new(MOE_BF16, 2, 1, 4, 0), w = tt_new(MOE_BF16, 3, 1, 1, 4), re = tt_new(MOE_I32, 1, 1, 0, 0);
    moe_tensor ref = tt_new(MOE_F32, 2, 1, 1, 0);
    const float av[4] = {1.0f, -2.0f, 0.5f, 3.0f}, wv[4] = {0.25f, 1.0f, -4.0f, 2.0f};
    for (int k = 0; k < 4; k++) set_value(&a, k, av[k]), set_value(&w, k, wv[k]);
    moe_gemm_args g = {.scheme = MOE_SCHEME_BF16, .a = &a, .w = &w, .row_expert = &re};
    ck_assert_int_eq(moe_ref_grouped_gemm(&g, &ref), MOE_OK);
    int64_t m, nodes;
    ck_assert_int_eq(moe_gemm_bound_counts(&g, &m, &nodes), MOE_OK);
    double b, A = 0.25 + 2.0 + 2.0 + 6.0, widen = 1.0 + 8.0 * 0x1p-52;
    ck_assert_int_eq(moe_gemm_bound(&g, &ref, &b), MOE_OK);
    /* the backend's side: a tensor-core chain of one 16-product step, truncating */
    const double t = 0x1p-23 + 17 * 0x1p-24, gb = t * (1 + t) > moe_gamma_f32(m) ? t * (1 + t) : moe_gamma_f32(m);
    ck_assert(gb > moe_gamma_f32(m));
    double want = (moe_gamma_f32(m) + gb) * (A * widen) + ldexp((double)nodes, -148);
    ck_assert_msg(m == 4 && fabs(b - want) <= 0x1p-40 * want, "bound %.17g, formula %.17g (m %lld)", b, want, (long long)m);
    moe_tensor *ts[] = {&a, &w, &re, &ref};
    for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++) moe_tensor_free(ts[j]);
}
END_TEST

START_TEST(gemm_bound_counts_and_args)
{
    moe_tensor a = tt_new(MOE_BF16, 2, 2, 512, 0), w = tt_new(MOE_BF16, 3, 2, 4, 512), re = tt_new(MOE_I32, 1, 2, 0, 0);
    moe_tensor bias = tt_new(MOE_F32, 2, 2, 4, 0), out = tt_new(MOE_BF16, 2, 2, 4, 0);
    moe_gemm_args g = {.scheme = MOE_SCHEME_BF16, .a = &a, .w = &w, .row_expert = &re};
    int64_t m, nodes;
    ck_assert_int_eq(moe_gemm_bound_counts(&g, &m, &nodes), MOE_OK);
    ck_assert(m == 512 && nodes == 512);
    g.bias = &bias;
    ck_assert_int_eq(moe_gemm_bound_counts(&g, &m, &nodes), MOE_OK);
    ck_assert(m == 513);
    /* block fp8: 128 fmaf + 2 scale products + kt - 1 = 3 adds */
    moe_tensor a8 = tt_new(MOE_E4M3, 2, 2, 512, 0), w8 = tt_new(MOE_E4M3, 3, 2, 4, 512);
    moe_tensor sa = tt_new(MOE_F32, 2, 2, 4, 0), sw = tt_new(MOE_F32, 3, 2, 1, 4);
    moe_gemm_args g8 = {.scheme = MOE_SCHEME_FP8_WBLOCK128_AGROUP128, .a = &a8, .a_scale = &sa, .w = &w8, .w_scale = &sw,
                        .row_expert = &re};
    ck_assert_int_eq(moe_gemm_bound_counts(&g8, &m, &nodes), MOE_OK);
    ck_assert(m == 133 && nodes == 512 + 8);
    /* zero operands: every bound is the underflow term or 0 */
    double b[8];
    g.bias = NULL;
    ((int32_t *)re.data)[1] = -1;
    ck_assert_int_eq(moe_gemm_bound(&g, &out, b), MOE_OK);
    ck_assert(b[0] > 0.0 && b[0] < 1e-30 && b[4] == 0.0);
    /* bad arguments name themselves */
    ck_assert_int_eq(moe_gemm_bound(NULL, &out, b), MOE_ERR_NULL);
    ck_assert_int_eq(moe_gemm_bound(&g, NULL, b), MOE_ERR_NULL);
    ck_assert(strstr(moe_last_error(), "ref_out"));
    moe_tensor bad = tt_new(MOE_BF16, 2, 3, 4, 0);
    ck_assert_int_eq(moe_gemm_bound(&g, &bad, b), MOE_ERR_SHAPE);
    ck_assert(strstr(moe_last_error(), "ref_out"));
    ((int32_t *)re.data)[1] = 2;
    ck_assert_int_eq(moe_gemm_bound(&g, &out, b), MOE_ERR_INVALID_ARG);
    ck_assert(strstr(moe_last_error(), "row_expert"));
    ck_assert(moe_gamma_f32(0) == 0.0 && isinf(moe_gamma_f32((int64_t)1 << 23)) && moe_gamma_f32(1) > 0x1p-24);
    moe_tensor *ts[] = {&a, &w, &re, &bias, &out, &a8, &w8, &sa, &sw, &bad};
    for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++) moe_tensor_free(ts[j]);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("replay");
    TCase *t = tcase_create("forwards");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, ref_forwards_replay_clean);
    suite_add_tcase(s, t);
    t = tcase_create("faults");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, fault_activation_ulp);
    tcase_add_test(t, fault_gemm_far);
    tcase_add_test(t, fault_gemm_within_bound);
    tcase_add_test(t, fault_ll_reorder_is_a_set);
    tcase_add_test(t, fault_ll_unpaired_row);
    tcase_add_test(t, fault_pplx_reorder_is_a_set);
    tcase_add_test(t, fault_align_reorder_is_a_set);
    tcase_add_test(t, backend_error_is_recorded);
    tcase_add_test(t, reference_error_is_recorded);
    tcase_add_test(t, table_rules);
    suite_add_tcase(s, t);
    t = tcase_create("bound");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, gemm_bound_not_vacuous);
    tcase_add_test(t, gemm_bound_two_output_roundings);
    tcase_add_test(t, gemm_bound_value);
    tcase_add_test(t, gemm_bound_counts_and_args);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
