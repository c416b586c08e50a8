/* The sweep harness: the quick tier passes on the reference and CPU
 * backends (the CPU one stage by stage through the replay) with every
 * scheme run somewhere; records do not depend on --jobs; a
 * deliberately wrong backend stage is caught end to end and named by the
 * stage replay; unavailable backends are skipped, never passed; the CLI's
 * usage errors and its atomic output file. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli_run.h"
#include "moe_git_rev.h" /* MOE_GIT_REV (the Makefile writes it) */
#include "moe/cli.h"
#include "moe/bounds.h"
#include "moe/compat.h"
#include "moe/format.h"
#include "moe/sweep.h"

static long count_verdicts(moe_sweep_tier tier, const char *only_pf, const moe_sweep_options *o, long *cnt,
                           int *scheme_ran)
{
    moe_sweep_case *cs;
    int n;
    ck_assert_int_eq(moe_sweep_enumerate(tier, 7, &cs, &n), MOE_OK);
    long cases = 0;
    for (int i = 0; i < n; i++) {
        if (only_pf && strcmp(cs[i].pf, only_pf)) continue;
        moe_sweep_record *r;
        int nr;
        ck_assert_int_eq(moe_sweep_run_case(&cs[i], o, &r, &nr), MOE_OK);
        for (int j = 0; j < nr; j++) {
            cnt[r[j].verdict]++;
            if (r[j].verdict == MOE_VERDICT_FAIL || r[j].verdict == MOE_VERDICT_ERROR) {
                char name[256];
                moe_sweep_case_name(&cs[i], name, sizeof name);
                printf("  %s %s [%s %s]: %s\n", moe_verdict_name(r[j].verdict), name, r[j].backend, r[j].stage,
                       r[j].reason);
            }
            if (scheme_ran && r[j].verdict == MOE_VERDICT_PASS && !strcmp(r[j].stage, "e2e"))
                scheme_ran[cs[i].scheme]++;
        }
        moe_sweep_records_free(r, nr);
        cases++;
    }
    moe_sweep_cache_release();
    free(cs);
    return cases;
}

START_TEST(quick_tier_passes_on_ref_and_cpu)
{
    moe_sweep_options o = {{"ref", "cpu"}, 2, NULL, NULL, NULL};
    long cnt[MOE_VERDICT_COUNT] = {0};
    int ran[MOE_SCHEME_COUNT] = {0};
    long n = count_verdicts(MOE_TIER_QUICK, NULL, &o, cnt, ran);
    printf("quick tier: %ld cases: %ld pass, %ld refused as expected, %ld skipped, %ld fail, %ld error\n", n,
           cnt[MOE_VERDICT_PASS], cnt[MOE_VERDICT_REFUSED], cnt[MOE_VERDICT_SKIPPED], cnt[MOE_VERDICT_FAIL],
           cnt[MOE_VERDICT_ERROR]);
    ck_assert_int_eq(cnt[MOE_VERDICT_FAIL] + cnt[MOE_VERDICT_ERROR], 0);
    ck_assert_int_gt(cnt[MOE_VERDICT_PASS], 100);
    ck_assert_int_gt(cnt[MOE_VERDICT_REFUSED], 100);
    /* every scheme runs end to end somewhere, except NVFP4, whose swizzled
     * activation scales the modular kernel does not move yet (skipped) */
    for (int s = 0; s < MOE_SCHEME_COUNT; s++)
        if (s != MOE_SCHEME_NVFP4) ck_assert_msg(ran[s] > 0, "scheme %s never ran", moe_scheme_name((moe_scheme)s));
    ck_assert_int_eq(ran[MOE_SCHEME_NVFP4], 0);
}
END_TEST

/* the whole quick tier twice through the CLI, with 1 and 2 jobs, on the
 * reference and an unbuilt backend: same bytes after the metadata line
 * (which records the job count), so verdicts, metrics and JSON do not
 * depend on the run (the CPU backend's thread-count independence is
 * check_cpu_stages') */
START_TEST(jobs_do_not_change_records)
{
    char a[64], b[64], args[256];
    snprintf(a, sizeof a, "/tmp/moe_sweep_j1_%d.jsonl", (int)getpid());
    snprintf(b, sizeof b, "/tmp/moe_sweep_j2_%d.jsonl", (int)getpid());
    snprintf(args, sizeof args, "--backend ref,cuda-fast --no-time --quiet --jobs 1 --out %s", a);
    ck_assert_int_eq(cli_run(moe_cli_sweep, "moe-sweep", args), 0);
    snprintf(args, sizeof args, "--backend ref,cuda-fast --no-time --quiet --jobs 2 --out %s", b);
    ck_assert_int_eq(cli_run(moe_cli_sweep, "moe-sweep", args), 0);
    HAS(out_buf, " passed, 0 failed, ");
    FILE *fa = fopen(a, "r"), *fb = fopen(b, "r");
    ck_assert_ptr_nonnull(fa);
    ck_assert_ptr_nonnull(fb);
    static char la[1 << 16], lb[1 << 16];
    long lines = 0, differ = 0, unbuilt_skipped = 0;
    while (fgets(la, sizeof la, fa)) {
        ck_assert_ptr_nonnull(fgets(lb, sizeof lb, fb));
        if (lines++ == 0) continue; /* meta: jobs */
        differ += strcmp(la, lb) != 0;
        unbuilt_skipped += strstr(la, "\"backend\":\"cuda-fast\"") && strstr(la, "\"verdict\":\"skipped\"") &&
                           strstr(la, "not built");
    }
    ck_assert_ptr_null(fgets(lb, sizeof lb, fb));
    fclose(fa), fclose(fb);
    remove(a), remove(b);
    ck_assert_int_gt(lines, 100);
    ck_assert_int_eq(differ, 0);
    ck_assert_int_gt(unbuilt_skipped, 10); /* an unbuilt backend is skipped, never passed */
}
END_TEST

/* A backend whose activation is off in the first element of each call:
 * by one ulp (fault 1: the GEMM2 rounding may hide it end to end, the
 * replay names it) or by a factor of two (fault 2: visible end to end). */
static moe_ops faulty;
static int fault;
static moe_status bad_activation(const moe_tensor *x, const moe_tensor *re, const moe_act_params *p, moe_tensor *out)
{
    moe_status st = moe_ops_ref.activation(x, re, p, out);
    if (st == MOE_OK && moe_tensor_numel(out) > 0) {
        uint32_t one = fault == 1 ? 1u : out->dtype == MOE_F32 ? 1u << 23 : 1u << 7; /* an ulp, or the exponent + 1 */
        if (out->dtype == MOE_F32) ((uint32_t *)out->data)[0] += one;
        else ((uint16_t *)out->data)[0] = (uint16_t)(((uint16_t *)out->data)[0] + one);
    }
    return st;
}

START_TEST(wrong_stage_is_named)
{
    fault = 2;
    faulty = moe_ops_ref;
    faulty.name = "faulty", faulty.activation = bad_activation;
    moe_sweep_options o = {{"ref"}, 1, &faulty, "cuda-conform", NULL};
    moe_sweep_case c = {"noep", "triton_like", MOE_SCHEME_BF16, MOE_ACT_SILU, 8, 2, 9, 256, 128, 1, "tiny", 7};
    moe_sweep_record *r;
    int nr;
    ck_assert_int_eq(moe_sweep_run_case(&c, &o, &r, &nr), MOE_OK);
    int e2e_fail = 0, act_fail = 0, others = 0, other_fail = 0;
    for (int i = 0; i < nr; i++) {
        ck_assert_str_eq(r[i].backend, "cuda-conform");
        if (!strcmp(r[i].stage, "e2e")) e2e_fail = r[i].verdict == MOE_VERDICT_FAIL;
        else if (!strcmp(r[i].stage, "activation")) {
            act_fail = r[i].verdict == MOE_VERDICT_FAIL && r[i].m.mismatches > 0;
            ck_assert_ptr_nonnull(strstr(r[i].reason, "activation"));
        } else others++, other_fail += r[i].verdict != MOE_VERDICT_PASS;
    }
    ck_assert_msg(e2e_fail, "the end-to-end record must fail");
    ck_assert_msg(act_fail, "the replay must name the activation stage");
    ck_assert_int_ge(others, 3); /* quantize, align, gemm, reduce ... */
    ck_assert_int_eq(other_fail, 0);
    moe_sweep_records_free(r, nr);
    /* the same injected backend through an expert-parallel PF */
    moe_sweep_case d = {"deepep_ll", "batched_masked", MOE_SCHEME_BF16, MOE_ACT_SILU, 8, 2, 5, 2048, 128, 2, "tiny", 7};
    ck_assert_int_eq(moe_sweep_run_case(&d, &o, &r, &nr), MOE_OK);
    act_fail = 0;
    for (int i = 0; i < nr; i++)
        if (!strcmp(r[i].stage, "activation")) act_fail = r[i].verdict == MOE_VERDICT_FAIL;
        else ck_assert_msg(r[i].verdict == (strcmp(r[i].stage, "e2e") ? MOE_VERDICT_PASS : MOE_VERDICT_FAIL),
                           "stage %s: %s", r[i].stage, moe_verdict_name(r[i].verdict));
    ck_assert(act_fail);
    moe_sweep_records_free(r, nr);
    /* one ulp: whatever the end-to-end record says, the replay names it */
    fault = 1;
    ck_assert_int_eq(moe_sweep_run_case(&c, &o, &r, &nr), MOE_OK);
    act_fail = 0;
    for (int i = 0; i < nr; i++)
        if (!strcmp(r[i].stage, "activation")) act_fail = r[i].verdict == MOE_VERDICT_FAIL && r[i].m.max_ulp == 1.0;
    ck_assert(act_fail);
    moe_sweep_records_free(r, nr);
    moe_sweep_cache_release();
}
END_TEST

/* A backend whose GEMM reorders sums (cpu's row): the forward is judged
 * stage by stage. A GEMM output off by a quarter of its derived bound
 * passes (BOUNDED stage, e2e from the replay); off by twice the bound, the
 * e2e record fails naming grouped_gemm. */
static double gemm_scale;
static moe_status shaky_gemm(const moe_gemm_args *g, moe_tensor *out)
{
    moe_status st = moe_ops_ref.grouped_gemm(g, out);
    if (st || moe_tensor_numel(out) == 0) return st;
    double *b = malloc(sizeof(double) * (size_t)moe_tensor_numel(out));
    if (!b) return moe_fail(MOE_ERR_NOMEM, "test");
    st = moe_gemm_bound(g, out, b);
    /* element 0 moved by gemm_scale x its bound, rounded away from the value */
    if (st == MOE_OK && out->dtype == MOE_BF16) {
        uint16_t *o = out->data;
        float v = moe_bf16_to_f32(o[0]), d = (float)(gemm_scale * b[0]);
        o[0] = moe_f32_to_bf16(v + d, MOE_POLICY_NONSAT_RZ, NULL);
    }
    free(b);
    return st;
}

START_TEST(stagewise_e2e_for_reordering_backends)
{
    faulty = moe_ops_ref;
    faulty.name = "shaky", faulty.grouped_gemm = shaky_gemm;
    moe_sweep_options o = {{"ref"}, 1, &faulty, "cpu", NULL};
    moe_sweep_case c = {"noep", "permute_grouped", MOE_SCHEME_BF16, MOE_ACT_SILU, 8, 2, 9, 256, 128, 1, "tiny", 7};
    for (int trial = 0; trial < 2; trial++) {
        gemm_scale = trial ? 2.0 : 0.25;
        moe_sweep_record *r;
        int nr;
        ck_assert_int_eq(moe_sweep_run_case(&c, &o, &r, &nr), MOE_OK);
        ck_assert_str_eq(r[0].stage, "e2e");
        ck_assert(r[0].stagewise);
        ck_assert_str_eq(r[0].tolerance, "cpu.e2e");
        int gemm = -1;
        for (int i = 0; i < nr; i++)
            if (!strcmp(r[i].stage, "grouped_gemm")) gemm = i;
        ck_assert_int_ge(gemm, 0);
        ck_assert_int_eq(r[gemm].cls, MOE_CLASS_BOUNDED);
        if (!trial) {
            ck_assert_msg(r[0].verdict == MOE_VERDICT_PASS, "%s", r[0].reason);
            ck_assert_int_eq(r[gemm].verdict, MOE_VERDICT_PASS);
            ck_assert(r[gemm].m.share > 0.0 && r[gemm].m.share <= 1.0);
        } else {
            ck_assert_int_eq(r[0].verdict, MOE_VERDICT_FAIL);
            ck_assert_ptr_nonnull(strstr(r[0].reason, "grouped_gemm"));
            ck_assert_int_eq(r[gemm].verdict, MOE_VERDICT_FAIL);
        }
        moe_sweep_records_free(r, nr);
    }
    moe_sweep_cache_release();
}
END_TEST

/* A backend's fused path in the sweep (fused_run.h): the runner injected
 * as cuda-fast's is the reference composition, so every stage passes with
 * share 0; a moved output element fails the combine's stage of each
 * variant (EXACT fused.combine, BOUNDED fused-atomic.gemm2_combine) and
 * the record names the element; a refusal is a skipped record, never a pass;
 * cells of other pairs, and injected runs without a runner, get none. */
static int fused_fault;
static moe_status ref_runner(const moe_fused_problem *p, const moe_fused_inputs *in, moe_fused_trace_store *t,
                             moe_fused_model *m, char *desc, size_t n)
{
    if (fused_fault == 2) return moe_fail(MOE_ERR_UNSUPPORTED, "test runner: refused");
    if (fused_fault == 3) return moe_fail(MOE_ERR_INVALID_ARG, "test runner: broken");
    moe_status s = moe_fused_ref_trace_make(p, in, t);
    if (s) return s;
    *m = (moe_fused_model){16, 24, 0, 0, 0.0};
    snprintf(desc, n, "reference composition");
    if (fused_fault == 1) { /* out[0, 0] moved far: the combine's stage alone */
        uint16_t *o = (uint16_t *)t->out.data;
        const float v = moe_bf16_to_f32(o[0]);
        o[0] = moe_f32_to_bf16(v + 1.0f + (v < 0 ? -v : v), MOE_POLICY_IEEE_RNE, NULL);
    }
    return MOE_OK;
}

static int fused_records(const moe_sweep_case *c, const moe_sweep_options *o, int *fails, int *skips, int *q8)
{
    moe_sweep_record *r;
    int nr, n = 0;
    *fails = *skips = *q8 = 0;
    ck_assert_int_eq(moe_sweep_run_case(c, o, &r, &nr), MOE_OK);
    for (int i = 0; i < nr; i++) {
        if (strncmp(r[i].stage, "fused", 5)) continue;
        n++;
        if (r[i].verdict == MOE_VERDICT_ERROR) { /* a run that failed: an error, never a skip or a pass */
            ck_assert_msg(fused_fault == 3 && strstr(r[i].reason, "test runner: broken"), "%s", r[i].reason);
            (*fails)++;
            continue;
        }
        if (r[i].verdict == MOE_VERDICT_SKIPPED) {
            ck_assert_ptr_nonnull(strstr(r[i].reason, fused_fault == 2 ? "test runner: refused" : "bf16 x"));
            (*skips)++;
            continue;
        }
        ck_assert_ptr_nonnull(r[i].tolerance);
        ck_assert_msg(!strncmp(r[i].tolerance, "any.fused.", 10), "%s", r[i].tolerance);
        ck_assert_ptr_nonnull(strstr(r[i].stage, r[i].tolerance + 10)); /* fused[-atomic].<its row's stage> */
        ck_assert_int_gt(r[i].m.n, 0);
        *q8 += strstr(r[i].stage, "quant_") != NULL;
        if (r[i].verdict == MOE_VERDICT_FAIL) {
            const int atomic = !strcmp(r[i].stage, "fused-atomic.gemm2_combine");
            ck_assert_msg((atomic || !strcmp(r[i].stage, "fused.combine")) && strstr(r[i].reason, "token 0, column 0"),
                          "%s: %s", r[i].stage, r[i].reason);
            ck_assert_int_eq(atomic ? r[i].m.bound_failures : r[i].m.mismatches, 1);
            ck_assert_ptr_nonnull(strstr(r[i].reason, atomic ? "outside the bound" : "differ"));
            (*fails)++;
            continue;
        }
        ck_assert_msg(r[i].verdict == MOE_VERDICT_PASS, "%s: %s %s", r[i].stage, moe_verdict_name(r[i].verdict),
                      r[i].reason);
        ck_assert(r[i].m.share == 0.0 && r[i].m.mismatches == 0);
        ck_assert_str_eq(r[i].reason, "reference composition");
    }
    moe_sweep_records_free(r, nr);
    return n;
}

/* Every single-rank cell of a pair with a fused path is also enumerated at
 * 1, 64, 256 and 512 tokens where tokens x top-k is at most 1024 (the
 * fused path's matrix-vector, decode, 64- and 128-row forms;
 * combos/sweep_cases.c FUSED_M, FUSED_SLOTS), and only there, with the
 * cell's scheme, top-k and activation; the other pairs' cells keep the
 * rotation (none past 16 tokens). */
START_TEST(fused_pairs_run_at_the_fused_token_counts)
{
    static const int want[] = {1, 64, 256, 512};
    /* the pair test: the path's pair only, NULL names refused */
    ck_assert_int_eq(moe_fused_pair_has_path("noep", "triton_like"), 1);
    ck_assert_int_eq(moe_fused_pair_has_path("noep", "permute_grouped"), 0);
    ck_assert_int_eq(moe_fused_pair_has_path("pplx", "triton_like"), 0);
    ck_assert_int_eq(moe_fused_pair_has_path(NULL, "triton_like"), 0);
    ck_assert_int_eq(moe_fused_pair_has_path("noep", NULL), 0);
    for (int tier = MOE_TIER_QUICK; tier <= MOE_TIER_STANDARD; tier++) {
        moe_sweep_case *cs;
        int n, cells = 0;
        ck_assert_int_eq(moe_sweep_enumerate((moe_sweep_tier)tier, 7, &cs, &n), MOE_OK);
        for (int i = 0; i < n; i++) {
            const moe_sweep_case *c = &cs[i];
            if (!moe_fused_pair_has_path(c->pf, c->experts) || c->world != 1) {
                ck_assert_msg(c->M <= 16, "%s cell %s/%s at M %d outside the rotation", moe_sweep_tier_name(tier),
                              c->pf, c->experts, c->M);
                continue;
            }
            if (c->M == 1 || c->M == 64 || c->M == 256 || c->M == 512) continue;
            cells++;
            for (int w = 0; w < 4; w++) {
                int found = 0;
                for (int j = 0; j < n && !found; j++)
                    found = !strcmp(cs[j].pf, c->pf) && !strcmp(cs[j].experts, c->experts) && cs[j].world == 1 &&
                            cs[j].scheme == c->scheme && cs[j].act == c->act && cs[j].k == c->k &&
                            cs[j].H == c->H && cs[j].I == c->I && cs[j].E == c->E && cs[j].M == want[w];
                ck_assert_msg(found == (want[w] * c->k <= 1024), "%s tier: %s/%s %s k %d H %d %s its M = %d case",
                              moe_sweep_tier_name(tier), c->pf, c->experts, moe_scheme_name(c->scheme), c->k, c->H,
                              found ? "has" : "lacks", want[w]);
            }
        }
        ck_assert_int_ge(cells, MOE_SCHEME_COUNT); /* a cell a scheme at least (quick: one shape) */
        free(cs);
    }
}
END_TEST

START_TEST(fused_records_judge_the_path)
{
    moe_sweep_options o = {{"ref"}, 1, &moe_ops_ref, "cuda-fast", ref_runner};
    moe_sweep_case c = {"noep", "triton_like", MOE_SCHEME_BF16, MOE_ACT_SILU, 8, 2, 9, 256, 128, 1, "tiny", 7};
    int fails, skips, q8;
    fused_fault = 0;
    /* deterministic: layout, gemm1_act, gemm2_weight, combine; atomic: layout, gemm1_act, gemm2_combine */
    ck_assert_int_eq(fused_records(&c, &o, &fails, &skips, &q8), 7);
    ck_assert_int_eq(fails + skips + q8, 0);
    moe_sweep_case c8 = c;
    c8.scheme = MOE_SCHEME_FP8_WCHANNEL_ATOKEN, c8.act = MOE_ACT_SWIGLUOAI;
    ck_assert_int_eq(fused_records(&c8, &o, &fails, &skips, &q8), 11); /* + quant_x and quant_h in each */
    ck_assert_int_eq(q8, 4);
    ck_assert_int_eq(fails + skips, 0);
    fused_fault = 1;
    ck_assert_int_eq(fused_records(&c, &o, &fails, &skips, &q8), 7);
    ck_assert_int_eq(fails, 2);
    fused_fault = 2;
    ck_assert_int_eq(fused_records(&c, &o, &fails, &skips, &q8), 2);
    ck_assert_int_eq(skips, 2);
    fused_fault = 3;
    ck_assert_int_eq(fused_records(&c, &o, &fails, &skips, &q8), 2);
    ck_assert_int_eq(fails, 2);
    fused_fault = 0;
    moe_sweep_case cf = c;
    cf.scheme = MOE_SCHEME_F32;
    ck_assert_int_eq(fused_records(&cf, &o, &fails, &skips, &q8), 2);
    ck_assert_int_eq(skips, 2);
    moe_sweep_case other = c;
    other.experts = "permute_grouped";
    ck_assert_int_eq(fused_records(&other, &o, &fails, &skips, &q8), 0);
    o.inject_fused = NULL;
    ck_assert_int_eq(fused_records(&c, &o, &fails, &skips, &q8), 0);
    /* the JSON record names the row and the bound */
    o.inject_fused = ref_runner;
    moe_sweep_record *r;
    int nr;
    ck_assert_int_eq(moe_sweep_run_case(&c, &o, &r, &nr), MOE_OK);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    for (int i = 0; i < nr; i++)
        if (!strcmp(r[i].stage, "fused.gemm2_weight")) moe_sweep_write_record(f, &c, &r[i], 0);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "\"stage\":\"fused.gemm2_weight\""));
    ck_assert_ptr_nonnull(strstr(buf, "\"tolerance\":\"any.fused.gemm2_weight\""));
    ck_assert_ptr_nonnull(strstr(buf, "\"bound\":\"fused_judge.h:"));
    free(buf);
    moe_sweep_records_free(r, nr);
    ck_assert_ptr_null(moe_fused_path_find("cuda-fast", "noep", "permute_grouped"));
    ck_assert_ptr_nonnull(moe_fused_path_find("cuda-fast", "noep", "triton_like"));
    ck_assert_ptr_null(moe_fused_path_find(NULL, "noep", "triton_like"));
    ck_assert_int_ge(moe_fused_path_count(), 1);
    ck_assert_ptr_null(moe_fused_path_get(-1));
    ck_assert_ptr_null(moe_fused_path_get(moe_fused_path_count()));
    /* this program links no CUDA library: the cuda-fast runner refuses, naming why */
    const moe_fused_path *fp = moe_fused_path_find("cuda-fast", "noep", "triton_like");
    moe_fused_trace_store ts;
    moe_fused_model fm;
    memset(&ts, 0, sizeof ts);
    const moe_fused_problem fpr = {1, 8, 2, 256, 128, MOE_SCHEME_BF16,
                                   moe_act_defaults(MOE_ACT_SILU, MOE_LAYOUT_GATE_UP), 0};
    ck_assert_int_eq(fp->run(&fpr, NULL, &ts, &fm, NULL, 0), MOE_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "cuda-fast"));
    moe_sweep_cache_release();
}
END_TEST

/* An incompatible cell is refused with its rule ids; JSON names them. */
START_TEST(incompatible_refused_with_rules)
{
    moe_sweep_options o = {{"ref"}, 1, NULL, NULL, NULL};
    moe_sweep_case c = {"noep", "batched_masked", MOE_SCHEME_BF16, MOE_ACT_SILU, 8, 2, 3, 256, 128, 1, "tiny", 7};
    moe_sweep_record *r;
    int nr;
    ck_assert_int_eq(moe_sweep_run_case(&c, &o, &r, &nr), MOE_OK);
    ck_assert_int_eq(nr, 1);
    ck_assert_int_eq(r[0].verdict, MOE_VERDICT_REFUSED);
    ck_assert_int_ge(r[0].nrules, 1);
    ck_assert_str_eq(r[0].rules[0], "format-mismatch");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    moe_sweep_write_record(f, &c, &r[0], 0);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "\"case\":\"moe.noep.batched_masked.bf16.silu.E8.k2.M3.H256.I128.w1\""));
    ck_assert_ptr_nonnull(strstr(buf, "\"verdict\":\"refused-as-expected\""));
    ck_assert_ptr_nonnull(strstr(buf, "\"rules\":[\"format-mismatch\""));
    ck_assert_ptr_null(strstr(buf, "time_ms"));
    free(buf);
    moe_sweep_records_free(r, nr);
}
END_TEST

/* the metadata names the revision the tool was built from (MOE_GIT_REV,
 * the Makefile's generated header), wherever it runs: a binary carried to
 * another machine, or run outside any checkout, once reported that
 * directory's HEAD or "unknown" */
START_TEST(meta_names_the_build_revision)
{
    ck_assert_int_gt((int)strlen(MOE_GIT_REV), 0);
    /* printed unescaped into JSON: the Makefile keeps only these characters */
    ck_assert_uint_eq(strspn(MOE_GIT_REV, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._+-"),
                      strlen(MOE_GIT_REV));
    char out[64], args[256], want[128];
    snprintf(out, sizeof out, "/tmp/moe_sweep_rev_%d.jsonl", (int)getpid());
    /* run from / (no checkout there), then back: with CK_FORK=no the
     * later tests share this process's directory */
    char here[4096];
    ck_assert_ptr_nonnull(getcwd(here, sizeof here));
    ck_assert_int_eq(chdir("/"), 0);
    snprintf(args, sizeof args, "--backend ref --filter moe.noep.ref.bf16.* --jobs 1 --quiet --out %s", out);
    const int rc = cli_run(moe_cli_sweep, "moe-sweep", args);
    ck_assert_int_eq(chdir(here), 0);
    ck_assert_int_eq(rc, 0);
    FILE *f = fopen(out, "r");
    ck_assert_ptr_nonnull(f);
    static char line[1 << 14];
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    fclose(f), remove(out);
    snprintf(want, sizeof want, "\"git_rev\":\"%s\"", MOE_GIT_REV);
    ck_assert_msg(strstr(line, want) != NULL, "meta line lacks %s: %.200s", want, line);
}
END_TEST

START_TEST(cli_usage)
{
    ck_assert_int_eq(cli_run(moe_cli_sweep, "moe-sweep", "--help"), 0);
    HAS(out_buf, "usage: moe-sweep");
    ck_assert_int_eq(cli_run(moe_cli_sweep, "moe-sweep", "--bogus"), 2);
    HAS(err_buf, "unknown option '--bogus'");
    ck_assert_int_eq(cli_run(moe_cli_sweep, "moe-sweep", "--tier huge"), 2);
    HAS(err_buf, "--tier must be quick, standard or full");
    ck_assert_int_eq(cli_run(moe_cli_sweep, "moe-sweep", "--backend ref,gpu"), 2);
    HAS(err_buf, "unknown backend");
    HAS(err_buf, "'gpu'");
    ck_assert_int_eq(cli_run(moe_cli_sweep, "moe-sweep", "--backend ref,ref"), 2);
    ck_assert_int_eq(cli_run(moe_cli_sweep, "moe-sweep", "--jobs 0"), 2);
    HAS(err_buf, "--jobs must be an integer in [1, 256]");
    ck_assert_int_eq(cli_run(moe_cli_sweep, "moe-sweep", "--jobs"), 2);
    HAS(err_buf, "missing the value of '--jobs'");
    ck_assert_int_eq(cli_run(moe_cli_sweep, "moe-sweep", "--filter nothing.matches"), 2);
    HAS(err_buf, "--filter matches no case");
    ck_assert_int_eq(cli_run(moe_cli_sweep, "moe-sweep", "--filter moe.noep.ref.bf16.* --list"), 0);
    HAS(out_buf, "moe.noep.ref.bf16.");
    /* an unwritable output: usage error, nothing left behind */
    ck_assert_int_eq(cli_run(moe_cli_sweep, "moe-sweep", "--filter moe.noep.ref.bf16.* --out /nonexistent/dir/x.jsonl"),
                     2);
    HAS(err_buf, "cannot write");
    ck_assert_int_ne(access("/nonexistent/dir/x.jsonl", F_OK), 0);
    /* the default list (every known backend, more than four): each one runs
     * or is skipped by name, none is lost */
    ck_assert_int_eq(cli_run(moe_cli_sweep, "moe-sweep", "--filter moe.noep.ref.bf16.* --jobs 1"), 0);
    HAS(out_buf, "0 failed");
    HAS(out_buf, "0 errors");
    ck_assert_ptr_null(strstr(err_buf, "(null)"));
}
END_TEST

static Suite *sweep_suite(void)
{
    Suite *s = suite_create("sweep");
    TCase *tc = tcase_create("sweep");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, quick_tier_passes_on_ref_and_cpu);
    tcase_add_test(tc, jobs_do_not_change_records);
    tcase_add_test(tc, wrong_stage_is_named);
    tcase_add_test(tc, stagewise_e2e_for_reordering_backends);
    tcase_add_test(tc, incompatible_refused_with_rules);
    tcase_add_test(tc, fused_records_judge_the_path);
    tcase_add_test(tc, fused_pairs_run_at_the_fused_token_counts);
    tcase_add_test(tc, meta_names_the_build_revision);
    tcase_add_test(tc, cli_usage);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(sweep_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
