/* The compatibility matrix of the modular kernel, run (issue 4): every
 * (prepare/finalize, experts) pair of the registry, for the schemes bf16,
 * fp8_wchannel_atoken and fp8_wblock128_agroup128, is asked of
 * moe_compat_check (world 1 for the single-rank PFs, worlds 2 and 4 for
 * the expert-parallel ones; H = 2048, one of DeepEP-LL's hidden sizes, so
 * the hidden-size rule never fires; I = 128, E = 8, G = 12 global tokens =
 * T = 6 or 3 per rank, top-k 1 and 2). Each compatible cell runs forward
 * on the reference backend (moe_mk_forward at world 1, moe_mk_forward_ranks
 * on the rank-major views of the same [G, H] problem otherwise) and is
 * compared with moe_ref_forward on the same G tokens:
 *  - top-1 bit for bit where the existing tests show it (REQUIRED_EXACT
 *    below, with the file that shows it), else within its class bound;
 *  - top-2 within ONE bound per comparison class (the classes below, the
 *    formula in tests/mk_bounds.h); noep x ref bit for bit at both k.
 * An incompatible cell must be refused by moe_mk_create with
 * MOE_ERR_INCOMPATIBLE. A compatible cell that moe_mk_create -- or, for
 * the -1 slots of non-local experts, the EP forward of an experts type
 * other than triton_like, permute_grouped, ck_fused and grouped_contig
 * (which take -1 ids and must run) -- refuses with MOE_ERR_UNSUPPORTED is
 * a known gap of this slice: counted and printed with its message; any
 * other error fails.
 *
 * Data: x normal (bf16), weights N(0, 0.05) quantized with the scheme;
 * fp8_wblock128_agroup128 uses check_modular_ep2.c's matched data (every
 * 128-channel group of x has amax 1.75, so DeepEP-LL's own per-128 cast
 * and the scheme's rule give the same bytes). Slots take experts base and
 * base + 3 (distinct, spread over the ranks).
 *
 * Comparison classes (counts per term w_j y_j of mk_bounds.h's model: nf
 * f32 and nb bf16 roundings on its path; L leaves; acc: the weight
 * multiplies the f32 GEMM2 accumulator). Every type computes the oracle's
 * y_j: GEMM1, activation and requantization act on the same rows with the
 * same row-wise scales (none, per token, per 128-group of a row), the GEMM
 * op is row-wise; only weighting and reduction differ.
 *  oracle (moe_ref_forward step 8): p_j = fl32(w_j Y_j), f32 sum from +0,
 *    rb: nf = k + 1 (the +0 add counted), nb = 1, L = k.
 *  exact     noep x ref: the oracle's own stages: bit for bit at every k.
 *  fmaf      permute_grouped (finalize_trtllm: acc = fmaf(w_j, Y_j, acc)
 *            from +0, rb), deepep_ll / pplx with the batched experts (the
 *            experts' unweighted Y copied, the combine's fmaf chain, rb):
 *            nf = k, nb = 1.
 *  bf16-slot triton_like, ck_fused (acc = 1: z_j = rb(fl32(w_j a_j))),
 *            grouped_contig (Contiguous: z_j = rb(fl32(w_j Y_j))), then
 *            moe_sum (k 2..4: rb(fl32(acc + z_j)) per add; else an f32 sum
 *            and one rb) or ck's per-add rb atomics in any order: term
 *            path <= 1 product + k adds (+0 counted), one rb each:
 *            nf = k + 1, nb = k + 1.
 *  bf16-acc  batched x naive_batched / batched_masked (NaiveBatched:
 *            o = rb(fl32(o + fl32(Y_j w_j))), one expert at a time):
 *            nf = k + 1, nb = k.
 *  hybrid    hybrid_ep x grouped_contig: z_j = rb(fl32(w_j Y_j)) (1, 1),
 *            the rank's unpermute f32 sum from +0 of <= k rows, rb (k, 1),
 *            the home rank's f32 sum of <= R partials, rb (R, 1):
 *            nf = 1 + k + R, nb = 3.
 *  +ep-sum   allgather_rs / deepep_ht with a Standard experts type X: each
 *            rank runs X on its rows (non-local slots -1: zero rows, weight
 *            0) and rounds its partial to bf16 (X's own path), the combine
 *            sums <= R partials in f32 from +0 and rounds once: X's counts
 *            + (R, 1); every rank may see every slot (allgather_rs): L = R k.
 *            (ref under EP: the oracle's path + (R, 1), class f32-sum.)
 * Shares printed are the largest |out - ref| / bound over the elements. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/compat.h"
#include "moe/format.h"
#include "moe/forward.h"
#include "moe/modular.h"
#include "moe/rng.h"
#include "mk_bounds.h"
#include "mk_fixture.h"
#include "test_tensors.h"

enum { G = 12, H = 2048, I = 128, E = 8, GRP = 128, NSC = 3 };

static const moe_scheme SCHEMES[NSC] = {MOE_SCHEME_BF16, MOE_SCHEME_FP8_WCHANNEL_ATOKEN,
                                        MOE_SCHEME_FP8_WBLOCK128_AGROUP128};

typedef struct {
    moe_scheme sc;
    int k;
    moe_tensor x, ids, w, q1, s1, g1, q2, s2, g2, ref, y[2];
    moe_mk_weights mw;
    moe_forward_args fa;
} prob;

static void make(prob *p, moe_scheme sc, int k)
{
    memset(p, 0, sizeof *p);
    p->sc = sc, p->k = k;
    mkf_prob b; /* the shared fixture; its tensors move into p */
    mkf_make(&b, sc, k, G, H, I, E, 4000 + (uint64_t)sc, 0.05f, sc == MOE_SCHEME_FP8_WBLOCK128_AGROUP128, 0);
    ck_assert_int_eq(b.xd, MOE_BF16);
    p->x = b.x, p->ids = b.ids, p->w = b.w;
    p->q1 = b.q1, p->s1 = b.s1, p->g1 = b.g1, p->q2 = b.q2, p->s2 = b.s2, p->g2 = b.g2;
    p->mw.w1 = &p->q1, p->mw.w1_scale = b.mw.w1_scale ? &p->s1 : NULL, p->mw.w1_global = b.mw.w1_global ? &p->g1 : NULL;
    p->mw.w2 = &p->q2, p->mw.w2_scale = b.mw.w2_scale ? &p->s2 : NULL, p->mw.w2_global = b.mw.w2_global ? &p->g2 : NULL;
    moe_forward_args *a = &p->fa;
    a->scheme = sc, a->act = moe_act_defaults(MOE_ACT_SILU, MOE_LAYOUT_GATE_UP);
    a->topk_ids = &p->ids, a->topk_weights = &p->w;
    a->w1 = p->mw.w1, a->w1_scale = p->mw.w1_scale, a->w1_global = p->mw.w1_global;
    a->w2 = p->mw.w2, a->w2_scale = p->mw.w2_scale, a->w2_global = p->mw.w2_global;
    p->ref = tt_new(MOE_BF16, 2, G, H, 0);
    ck_assert_msg(moe_ref_forward(a, &p->x, &p->ref) == MOE_OK, "%s", moe_last_error());
    ck_assert_msg(mkb_read_slots(a, &p->x, k, MOE_BF16, p->y) == MOE_OK, "%s", moe_last_error());
}

static void unmake(prob *p)
{
    moe_tensor *ts[] = {&p->x, &p->ids, &p->w, &p->q1, &p->s1, &p->g1, &p->q2, &p->s2, &p->g2, &p->ref};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) moe_tensor_free(ts[i]);
    for (int j = 0; j < p->k; j++) moe_tensor_free(&p->y[j]);
}

/* ---- which cells, which class ------------------------------------------ */

/* top-1 bit for bit, shown by the existing tests:
 *  noep x ref, every scheme built (check_modular.c noep_ref_equals_forward)
 *  noep x permute_grouped, bf16 / fp8_wblock128 (check_modular_experts.c)
 *  allgather_rs, deepep_ht x ref, bf16 / fp8_wchannel_atoken, R 2, 4
 *    (check_modular_ep.c top1_bit_exact)
 *  deepep_ll x {naive_batched, batched_masked}, bf16 / fp8_wblock128
 *    (matched data); pplx x both, bf16; R 2, 4 (check_modular_ep2.c)
 *  hybrid_ep x grouped_contig, fp8_wblock128, R 2, 4 (check_modular_hep.c) */
static int required_exact(const char *pf, const char *ex, moe_scheme sc)
{
    int bf = sc == MOE_SCHEME_BF16, tok = sc == MOE_SCHEME_FP8_WCHANNEL_ATOKEN,
        blk = sc == MOE_SCHEME_FP8_WBLOCK128_AGROUP128;
    int batched_ex = !strcmp(ex, "naive_batched") || !strcmp(ex, "batched_masked");
    if (!strcmp(pf, "noep") && !strcmp(ex, "ref")) return 1;
    if (!strcmp(pf, "noep") && !strcmp(ex, "permute_grouped")) return bf || blk;
    if ((!strcmp(pf, "allgather_rs") || !strcmp(pf, "deepep_ht")) && !strcmp(ex, "ref")) return bf || tok;
    if (!strcmp(pf, "deepep_ll") && batched_ex) return bf || blk;
    if (!strcmp(pf, "pplx") && batched_ex) return bf;
    if (!strcmp(pf, "hybrid_ep") && !strcmp(ex, "grouped_contig")) return blk;
    return 0;
}

enum { C_EXACT, C_FMAF, C_SLOT, C_ACC, C_HYBRID, C_F32SUM, C_FMAF_EP, C_SLOT_EP, C_COUNT };
static const char *const CLASS_NAME[C_COUNT] = {"exact",  "fmaf",          "bf16-slot",      "bf16-acc",
                                                "hybrid", "f32-sum+ep-sum", "fmaf+ep-sum", "bf16-slot+ep-sum"};

/* the class of (pf, ex) and its path counts for topk k at world R */
static int classify(const char *pf, const char *ex, int k, int R, mkb_path *x)
{
    const moe_pf_info *pi = moe_pf_find(pf);
    int std_ep = pi->expert_parallel && pi->format == MOE_FMT_STANDARD; /* allgather_rs, deepep_ht */
    int cls;
    memset(x, 0, sizeof *x);
    x->leaves = k;
    if (!strcmp(ex, "ref")) cls = C_EXACT, x->nf = k + 1, x->nb = 1;
    else if (!strcmp(ex, "permute_grouped") || (pi->format == MOE_FMT_BATCHED && pi->expert_parallel))
        cls = C_FMAF, x->nf = k, x->nb = 1;
    else if (!strcmp(pf, "hybrid_ep")) cls = C_HYBRID, x->nf = 1 + k + R, x->nb = 3;
    else if (pi->format == MOE_FMT_BATCHED) cls = C_ACC, x->nf = k + 1, x->nb = k;
    else cls = C_SLOT, x->nf = k + 1, x->nb = k + 1, x->acc = !strcmp(ex, "triton_like") || !strcmp(ex, "ck_fused");
    if (std_ep) {
        cls = cls == C_EXACT ? C_F32SUM : cls == C_FMAF ? C_FMAF_EP : C_SLOT_EP;
        x->nf += R, x->nb += 1, x->leaves = R * k;
    }
    return cls;
}

/* ---- running one cell --------------------------------------------------- */

typedef struct {
    int unsupported;      /* the create or the forward refused: a known gap */
    char why[320];
    int exact[2];         /* per k: bit for bit */
    double share[2];      /* per k: largest share of the bound (0 when bit for bit) */
} cell_result;

static double class_share[C_COUNT];
static int class_runs[C_COUNT];

/* Runs (pf, ex) at world R on p; returns 0 when the cell is unsupported
 * (res->why set), 1 when it ran and was checked. */
static int run_cell(const char *pf, const char *ex, int R, prob *p, cell_result *res)
{
    int k = p->k, ki = k - 1;
    moe_mk_config c;
    memset(&c, 0, sizeof c);
    c.scheme = p->sc, c.act = moe_act_defaults(MOE_ACT_SILU, MOE_LAYOUT_GATE_UP);
    c.num_experts = E, c.topk = k, c.hidden = H, c.inter = I, c.world_size = R;
    moe_mk *mk = NULL;
    moe_compat_verdict v;
    moe_status st = moe_mk_create(pf, ex, &c, &mk, &v);
    if (st == MOE_ERR_UNSUPPORTED) {
        ck_assert_ptr_null(mk);
        snprintf(res->why, sizeof res->why, "create, k=%d: %s", k, moe_last_error());
        return res->unsupported = 1, 0;
    }
    ck_assert_msg(st == MOE_OK, "%s x %s %s R=%d k=%d: create: %s: %s", pf, ex, moe_scheme_name(p->sc), R, k,
                  moe_status_str(st), moe_last_error());
    ck_assert_int_eq(v.compatible, 1);
    moe_tensor out = tt_new(MOE_BF16, 2, G, H, 0);
    memset(out.data, 0xA5, out.nbytes); /* every element must be written */
    if (R == 1) {
        st = moe_mk_forward(mk, &p->mw, &p->x, &p->ids, &p->w, &out);
    } else {
        int64_t Tr = G / R;
        moe_tensor x3, i3, w3, o3;
        ck_assert_int_eq(moe_tensor_wrap(&x3, MOE_BF16, 3, (int64_t[3]){R, Tr, H}, p->x.data, p->x.nbytes,
                                         p->x.device), 0);
        ck_assert_int_eq(moe_tensor_wrap(&i3, MOE_I32, 3, (int64_t[3]){R, Tr, k}, p->ids.data, p->ids.nbytes,
                                         p->ids.device), 0);
        ck_assert_int_eq(moe_tensor_wrap(&w3, MOE_F32, 3, (int64_t[3]){R, Tr, k}, p->w.data, p->w.nbytes,
                                         p->w.device), 0);
        ck_assert_int_eq(moe_tensor_wrap(&o3, MOE_BF16, 3, (int64_t[3]){R, Tr, H}, out.data, out.nbytes, out.device),
                         0);
        st = moe_mk_forward_ranks(mk, &p->mw, &x3, &i3, &w3, &o3);
    }
    moe_mk_destroy(mk);
    /* the Standard experts types that take -1 ids (expert map / TRT-LLM non-local rows / CK mask /
     * contiguous -1 rows) must run; only the other types may still refuse the -1 slots */
    int takes_neg = !strcmp(ex, "triton_like") || !strcmp(ex, "permute_grouped") || !strcmp(ex, "ck_fused") ||
                    !strcmp(ex, "grouped_contig");
    if (!takes_neg && st == MOE_ERR_UNSUPPORTED && strstr(moe_last_error(), "-1 ids")) { /* a remaining gap */
        snprintf(res->why, sizeof res->why, "forward, k=%d: %s", k, moe_last_error());
        moe_tensor_free(&out);
        return res->unsupported = 1, 0;
    }
    ck_assert_msg(st == MOE_OK, "%s x %s %s R=%d k=%d: forward: %s: %s", pf, ex, moe_scheme_name(p->sc), R, k,
                  moe_status_str(st), moe_last_error());
    mkb_path x, o = {k + 1, 1, k, 0};
    int cls = classify(pf, ex, k, R, &x);
    res->exact[ki] = memcmp(out.data, p->ref.data, out.nbytes) == 0;
    if ((k == 1 && required_exact(pf, ex, p->sc)) || cls == C_EXACT)
        ck_assert_msg(res->exact[ki], "%s x %s %s R=%d k=%d: not bit-exact", pf, ex, moe_scheme_name(p->sc), R, k);
    double share = 0.0;
    int differ = 0;
    for (int t = 0; t < G; t++)
        for (int h = 0; h < H; h++) {
            int64_t i = (int64_t)t * H + h;
            double d = fabs(mkb_ld(&out, i) - mkb_ld(&p->ref, i));
            mkb_sums s = mkb_slot_sums(&p->w, p->y, k, t, h);
            double b = mkb_bound(&x, &o, &s);
            ck_assert_msg(d <= b, "%s x %s %s R=%d k=%d [%d,%d]: |%.9g - %.9g| = %.3g > bound %.3g (class %s)", pf, ex,
                          moe_scheme_name(p->sc), R, k, t, h, mkb_ld(&out, i), mkb_ld(&p->ref, i), d, b,
                          CLASS_NAME[cls]);
            if (d / b > share) share = d / b;
            differ += d != 0.0;
        }
    res->share[ki] = share;
    if (share > class_share[cls]) class_share[cls] = share;
    class_runs[cls]++;
    printf("  %-12s x %-15s R=%d k=%d %-16s %s, %5d of %d differ, share %.3f\n", pf, ex, R, k, CLASS_NAME[cls],
           res->exact[ki] ? "bit-exact" : "bounded  ", differ, G * H, share);
    moe_tensor_free(&out);
    return 1;
}

START_TEST(matrix)
{
    for (int si = 0; si < NSC; si++) {
        moe_scheme sc = SCHEMES[si];
        prob p[2];
        make(&p[0], sc, 1), make(&p[1], sc, 2);
        printf("scheme %s\n", moe_scheme_name(sc));
        int ran = 0, exact = 0, bounded = 0, unsup = 0, incompatible = 0;
        double maxshare = 0.0;
        for (int a = 0; a < moe_pf_count(); a++)
            for (int b = 0; b < moe_experts_count(); b++) {
                const moe_pf_info *pf = moe_pf_get(a);
                const moe_experts_info *ex = moe_experts_get(b);
                for (int R = pf->expert_parallel ? 2 : 1; R <= (pf->expert_parallel ? 4 : 1); R *= 2) {
                    moe_compat_query q = moe_compat_query_default();
                    q.scheme = sc, q.num_experts = E, q.world_size = R, q.hidden = H, q.tokens = G / R;
                    moe_compat_verdict v1, v2;
                    q.topk = 1;
                    ck_assert_int_eq(moe_compat_check(pf, ex, &q, &v1), MOE_OK);
                    q.topk = 2;
                    ck_assert_int_eq(moe_compat_check(pf, ex, &q, &v2), MOE_OK);
                    ck_assert_int_eq(v1.compatible, v2.compatible);
                    if (!v2.compatible) { /* the constructor refuses it with the same rule ids */
                        moe_mk_config c;
                        memset(&c, 0, sizeof c);
                        c.scheme = sc, c.act = moe_act_defaults(MOE_ACT_SILU, MOE_LAYOUT_GATE_UP);
                        c.num_experts = E, c.topk = 2, c.hidden = H, c.inter = I, c.world_size = R;
                        moe_mk *mk = NULL;
                        ck_assert_int_eq(moe_mk_create(pf->name, ex->name, &c, &mk, NULL), MOE_ERR_INCOMPATIBLE);
                        ck_assert_ptr_nonnull(strstr(moe_last_error(), v2.fail[0]->id));
                        incompatible++;
                        continue;
                    }
                    cell_result res;
                    memset(&res, 0, sizeof res);
                    int ok = 1;
                    for (int ki = 0; ki < 2 && ok; ki++) ok = run_cell(pf->name, ex->name, R, &p[ki], &res);
                    if (!ok) {
                        printf("  %-12s x %-15s R=%d unsupported (%s)\n", pf->name, ex->name, R, res.why);
                        unsup++;
                        continue;
                    }
                    ran++;
                    exact += res.exact[0];
                    mkb_path xp;
                    if (classify(pf->name, ex->name, 2, R, &xp) != C_EXACT) {
                        bounded++;
                        if (res.share[1] > maxshare) maxshare = res.share[1];
                    }
                    if (res.share[0] > maxshare) maxshare = res.share[0];
                }
            }
        printf("%s: %d compatible cells run, %d bit-exact, %d bounded (max share %.3f), %d unsupported "
               "(%d incompatible cells refused)\n", moe_scheme_name(sc), ran, exact, bounded, maxshare, unsup,
               incompatible);
        fflush(stdout);
        ck_assert_int_gt(ran, 0);
        unmake(&p[0]), unmake(&p[1]);
    }
    for (int c = 0; c < C_COUNT; c++)
        printf("class %-16s %3d runs, largest share of its bound %.3f\n", CLASS_NAME[c], class_runs[c], class_share[c]);
    fflush(stdout);
}
END_TEST

static Suite *matrix_suite(void)
{
    Suite *s = suite_create("modular_matrix");
    TCase *tc = tcase_create("matrix");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, matrix);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(matrix_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
