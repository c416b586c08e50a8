/* The fast path's plan rule (optimized/cuda/fast_plan.c) without a GPU.
 *
 * grid_matches: every plan of the standard grid (4 shapes x M 1..16384 x
 * the 7 schemes x both combines) is the plan a GPU grid ran: the tiles in
 * words, the launches and the workspace that moe-bench wrote into each
 * point's note, or the refusal it printed (tests/fx_plan/grid-v60.tsv, from
 * optimized/cuda/results/h100-bench-merged-all-v60.json by
 * tests/fx_plan/from_grid.py, which grid_file_from_json reruns). A change
 * to the rule shows here as the points it moves; such a change comes with its measurement (NOTES.md)
 * and that table regenerated from a grid of the new rule.
 * fields_match: every field (trigger_early, h_trigger, max_blocks and the
 * others the words leave out) of the plans of those shapes, the sweep's tiny
 * one and more M (the slots an expert the rule turns on) against
 * tests/fx_plan/fields.tsv, which `check_fx_plan --dump` writes from the
 * rule itself: a change detector, regenerated in the commit that changes
 * the rule on purpose.
 * The other cases: the refusals of bad problems and of plans fx_forward
 * must not run (the message names the field and the rule), the
 * environment switches the notes' side-by-side runs use, the tile table's
 * own consistency, the layout's arithmetic and the accumulation model. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/shapes.h"
#include "test_shell.h"
#include "../optimized/cuda/fast_plan.h"

#define HAS(s, sub) ck_assert_msg(strstr(s, sub) != NULL, "'%s' not in: %s", sub, s)

/* every switch fast_plan.c reads: unset, so the rule's own choices are tested */
static const char *SWITCHES[] = {"MOE_FX_W4WG", "MOE_FX_WG64", "MOE_FX_I8WG", "MOE_FX_BM128", "MOE_FX_SWAP",
                                 "MOE_FX_SHALLOW", "MOE_FX_WS", "MOE_FX_EWG", "MOE_FX_TMA", "MOE_FX_TILED",
                                 "MOE_FX_PROMO", "MOE_FX_PADSKIP", "MOE_FX_PROMOK", "MOE_FX_HTRIG", "MOE_FX_DWS",
                                 "MOE_FX_GEMV"};

static void clear_switches(void)
{
    for (size_t i = 0; i < sizeof SWITCHES / sizeof SWITCHES[0]; i++) unsetenv(SWITCHES[i]);
}

static moe_cuda_fx_problem problem(const char *shape, int M, moe_scheme sc, int atomic)
{
    const moe_shape *sh = moe_shape_find(shape);
    if (!sh) { /* no Check assertion here: --dump runs outside the runner */
        fprintf(stderr, "no shape %s\n", shape);
        abort();
    }
    moe_cuda_fx_problem p = {M, sh->E, sh->k, sh->H, sh->I, sc, moe_act_defaults(sh->act, MOE_LAYOUT_GATE_UP), atomic};
    return p;
}

static moe_scheme scheme(const char *name)
{
    moe_scheme sc;
    ck_assert_msg(moe_scheme_from_name(name, &sc) == MOE_OK, "scheme %s", name);
    return sc;
}

/* what moe-bench writes of a plan (bench_gpu.cu's note after "tiles "), or the refusal */
static void plan_words(const moe_cuda_fx_problem *p, int tma_ok, char *buf, size_t n)
{
    moe_cuda_fx_plan plan;
    const moe_status st = fx_plan_choose(p, tma_ok, &plan, NULL, NULL);
    if (st) {
        snprintf(buf, n, "refused: %s", moe_last_error());
        return;
    }
    moe_cuda_fx_plan_words(&plan, buf, n);
}

/* every field of the plan, or the refusal's status */
static void plan_fields(const moe_cuda_fx_problem *p, char *buf, size_t n)
{
    moe_cuda_fx_plan q;
    const moe_status st = fx_plan_choose(p, 1, &q, NULL, NULL);
    if (st) {
        snprintf(buf, n, "refused %d", (int)st);
        return;
    }
    snprintf(buf, n,
             "bm %d %d bn %d %d blocks %d launches %d trig %d htrig %d ws %d ewg %d slot %d swap %d wg64 %d shallow %d %d "
             "tma %d pad %d gemv %d dws %d promo %d tiled %d promk %d bytes %zu",
             q.bm1, q.bm2, q.bn1, q.bn2, q.max_blocks, q.launches, q.trigger_early, q.h_trigger, q.persistent, q.epi_wg,
             q.slot_layout, q.swapped, q.wg64, q.shallow1, q.shallow2, q.tma, q.pad_skip, q.gemv, q.decode_ws,
             q.weight_promo, q.weight_tiled, q.promote_k, q.workspace);
}

/* the bench's M (1..16384) and the boundaries between them the rule's choices turn on (slots an expert: 2,
 * 8, 16, 32, 48, 56, 64: Mixtral-8x7B 192 / 224 / 256; M = 1 against 2) */
static const int GRID_M[] = {1, 16, 64, 256, 1024, 4096, 16384, 2, 8, 32, 48, 128, 192, 224, 512, 2048};
enum { GRID_NM = sizeof GRID_M / sizeof GRID_M[0], GRID_N = 5 * GRID_NM * 7 * 2 };

/* the problems in a fixed order: the 5 shapes (the sweep's "tiny" too) x GRID_M x the fused path's 7 schemes x
 * both combines */
static int grid_problem(int i, moe_cuda_fx_problem *p)
{
    static const moe_scheme SC[] = {MOE_SCHEME_BF16, MOE_SCHEME_FP8_WTENSOR_ATENSOR, MOE_SCHEME_FP8_WCHANNEL_ATOKEN,
                                    MOE_SCHEME_FP8_WBLOCK128_AGROUP128, MOE_SCHEME_INT8_WCHANNEL_ATOKEN,
                                    MOE_SCHEME_W4A16_G128, MOE_SCHEME_MXFP4_W4A16};
    if (i < 0 || i >= GRID_N) return 0;
    *p = problem(moe_shape_get(i / (GRID_NM * 14))->name, GRID_M[i / 14 % GRID_NM], SC[i / 2 % 7], i % 2);
    return 1;
}

static void grid_line(int i, char *buf, size_t n)
{
    moe_cuda_fx_problem p;
    char f[400];
    grid_problem(i, &p);
    plan_fields(&p, f, sizeof f);
    snprintf(buf, n, "%s\t%d\t%s\t%d\t%s", moe_shape_get(i / (GRID_NM * 14))->name, p.M, moe_scheme_name(p.scheme), p.atomic, f);
}

/* the rule refuses p with status want and a message holding msg */
static void choose_refuses(const moe_cuda_fx_problem *p, moe_status want, const char *msg)
{
    moe_cuda_fx_plan plan;
    const moe_status st = fx_plan_choose(p, 1, &plan, NULL, NULL);
    ck_assert_msg(st == want, "status %d, want %d (%s): %s", (int)st, (int)want, msg, st ? moe_last_error() : "planned");
    HAS(moe_last_error(), msg);
}

/* fx_plan_check refuses (p, plan, a) with status want and a message holding msg */
static void check_refuses(const moe_cuda_fx_problem *p, const moe_cuda_fx_plan *plan, const moe_cuda_fx_args *a, int tma_ok,
                          moe_status want, const char *msg)
{
    const moe_status st = fx_plan_check(p, plan, a, tma_ok, NULL, NULL);
    ck_assert_msg(st == want, "status %d, want %d (%s): %s", (int)st, (int)want, msg, st ? moe_last_error() : "accepted");
    HAS(moe_last_error(), msg);
}

static moe_cuda_fx_plan must_plan(const moe_cuda_fx_problem *p)
{
    moe_cuda_fx_plan plan;
    ck_assert_msg(fx_plan_choose(p, 1, &plan, NULL, NULL) == MOE_OK, "%s", moe_last_error());
    return plan;
}

START_TEST(grid_matches)
{
    clear_switches();
    FILE *f = fopen("tests/fx_plan/grid-v60.tsv", "r");
    ck_assert_msg(f != NULL, "tests/fx_plan/grid-v60.tsv not readable (run from the repository root)");
    char line[512], shape[64], sch[64], want[400], got[400];
    int lines = 0, refused = 0, wrong = 0;
    char first[4][1024];
    while (fgets(line, sizeof line, f)) {
        int M, atomic;
        line[strcspn(line, "\n")] = '\0';
        ck_assert_msg(sscanf(line, "%63[^\t]\t%d\t%63[^\t]\t%d\t%399[^\n]", shape, &M, sch, &atomic, want) == 5,
                      "bad line: %s", line);
        const moe_cuda_fx_problem p = problem(shape, M, scheme(sch), atomic);
        plan_words(&p, 1, got, sizeof got);
        refused += !strncmp(want, "refused: ", 9);
        if (strcmp(got, want)) {
            if (wrong < 4) snprintf(first[wrong], sizeof first[wrong], "%s M %d %s atomic %d: want '%s', got '%s'", shape, M, sch,
                                    atomic, want, got);
            wrong++;
        }
        lines++;
    }
    fclose(f);
    /* 4 shapes x 7 M x 7 schemes x 2 combines; gpt-oss's block-fp8 and w4a16_g128 refused at every M */
    ck_assert_int_eq(lines, 392);
    ck_assert_int_eq(refused, 28);
    ck_assert_msg(wrong == 0, "%d of %d plans differ from the grid's; first: %s | %s | %s | %s", wrong, lines,
                  wrong > 0 ? first[0] : "", wrong > 1 ? first[1] : "", wrong > 2 ? first[2] : "", wrong > 3 ? first[3] : "");
}
END_TEST

/* the grid file is what from_grid.py makes of the grid's JSON (so it is the GPU's record, not hand-edited), and
 * the script refuses what it cannot read with exit 2, naming the file */
START_TEST(grid_file_from_json)
{
    char dir[] = "/tmp/moe-fx-plan-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    int rc = shf("python3 tests/fx_plan/from_grid.py optimized/cuda/results/h100-bench-merged-all-v60.json > '%s/grid.tsv' "
                 "&& cmp '%s/grid.tsv' tests/fx_plan/grid-v60.tsv", dir, dir);
    ck_assert_msg(rc == 0, "from_grid.py's output differs from tests/fx_plan/grid-v60.tsv (exit %d)", rc);
    rc = shf("python3 tests/fx_plan/from_grid.py '%s/none.json' > '%s/out.txt' 2> '%s/err.txt'", dir, dir, dir);
    ck_assert_int_eq(rc, 2);
    char err[1024], path[128];
    snprintf(path, sizeof path, "%s/err.txt", dir);
    slurp_into(path, err, sizeof err);
    HAS(err, "none.json: cannot read");
    rc = shf("python3 tests/fx_plan/from_grid.py tests/fx_plan/grid-v60.tsv > '%s/out.txt' 2> '%s/err.txt'", dir, dir);
    ck_assert_int_eq(rc, 2);
    slurp_into(path, err, sizeof err);
    HAS(err, "grid-v60.tsv: not a bench-gpu-merged document with plans");
    ck_assert_int_eq(shf("rm -rf '%s'", dir), 0);
}
END_TEST

START_TEST(fields_match)
{
    clear_switches();
    FILE *f = fopen("tests/fx_plan/fields.tsv", "r");
    ck_assert_msg(f != NULL, "tests/fx_plan/fields.tsv not readable (run from the repository root)");
    char line[600], want[600];
    int i = 0, wrong = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        ck_assert_msg(i < GRID_N, "more lines than the %d problems", GRID_N);
        grid_line(i, want, sizeof want);
        if (strcmp(line, want)) ck_assert_msg(++wrong > 3, "line %d: file '%s', rule '%s'", i + 1, line, want);
        i++;
    }
    fclose(f);
    ck_assert_int_eq(i, GRID_N);
    ck_assert_int_eq(wrong, 0);
}
END_TEST

START_TEST(bad_problems_refused)
{
    clear_switches();
    choose_refuses(NULL, MOE_ERR_INVALID_ARG, "must not be NULL");
    moe_cuda_fx_problem p = problem("mixtral-8x7b", 0, MOE_SCHEME_BF16, 0);
    choose_refuses(&p, MOE_ERR_INVALID_ARG, "M 0");
    HAS(moe_last_error(), "the rule is all >= 1, topk <= E");
    p = problem("mixtral-8x7b", 4, MOE_SCHEME_BF16, 0);
    p.topk = 9;
    choose_refuses(&p, MOE_ERR_INVALID_ARG, "topk 9");
    /* the block scheme's 128-groups: gpt-oss's 2880 (the reference refuses it too: k_divisible) */
    p = problem("gpt-oss-120b", 16, MOE_SCHEME_FP8_WBLOCK128_AGROUP128, 0);
    choose_refuses(&p, MOE_ERR_UNSUPPORTED, "H 2880 and I 2880 must be multiples of 128");
    p = problem("qwen3-30b-a3b", 16, MOE_SCHEME_FP8_WTENSOR_ATENSOR, 0);
    p.H = 2056; /* 8-bit codes: 16-byte row copies */
    choose_refuses(&p, MOE_ERR_UNSUPPORTED, "multiples of 16");
    p = problem("qwen3-30b-a3b", 16, MOE_SCHEME_BF16, 0);
    p.E = 2048;
    choose_refuses(&p, MOE_ERR_UNSUPPORTED, "E 2048 > 1024");
    p = problem("qwen3-30b-a3b", 16, MOE_SCHEME_BF16, 0);
    p.act = moe_act_defaults(MOE_ACT_SILU_NOMUL, MOE_LAYOUT_GATE_UP);
    choose_refuses(&p, MOE_ERR_UNSUPPORTED, "act must be gated");
    p = problem("deepseek-v3", 1 << 22, MOE_SCHEME_BF16, 0); /* 2^25 slots */
    choose_refuses(&p, MOE_ERR_UNSUPPORTED, "over 2^24 slots");
    p = problem("qwen3-30b-a3b", 16, MOE_SCHEME_NVFP4, 0);
    choose_refuses(&p, MOE_ERR_UNSUPPORTED, "the fused fast path implements bf16");
}
END_TEST

/* fx_forward's checks: every plan the rule makes passes them; each field out of its rule is refused by name */
START_TEST(plan_checks)
{
    clear_switches();
    int checked = 0;
    moe_cuda_fx_problem p0;
    for (int i = 0; grid_problem(i, &p0); i++) {
        moe_cuda_fx_plan plan;
        int c1 = -2, c2 = -2, k1 = -3, k2 = -3;
        if (fx_plan_choose(&p0, 1, &plan, &c1, &c2)) continue;
        ck_assert_msg(fx_plan_check(&p0, &plan, NULL, 1, &k1, &k2) == MOE_OK, "%s", moe_last_error());
        ck_assert_int_eq(k1, c1); /* the forward finds the tiles the rule chose */
        ck_assert_int_eq(k2, c2);
        checked++;
    }
    ck_assert_int_eq(checked, GRID_N - 2 * GRID_NM * 2); /* gpt-oss-120b refused for block fp8 and w4a16_g128 */

    const moe_cuda_fx_problem p = problem("mixtral-8x7b", 256, MOE_SCHEME_FP8_WTENSOR_ATENSOR, 0);
    const moe_cuda_fx_plan good = must_plan(&p);
    check_refuses(NULL, &good, NULL, 1, MOE_ERR_INVALID_ARG, "problem and plan must not be NULL");
    check_refuses(&p, NULL, NULL, 1, MOE_ERR_INVALID_ARG, "problem and plan must not be NULL");
    moe_cuda_fx_plan b = good;
    b.promote_k = 512;
    check_refuses(&p, &b, NULL, 1, MOE_ERR_INVALID_ARG, "plan.promote_k 512: the rule is 128 or 256");
    b = good, b.decode_ws = 3;
    check_refuses(&p, &b, NULL, 1, MOE_ERR_INVALID_ARG, "plan.decode_ws 3: the rule is 0, 1 or 2");
    b = good, b.weight_promo = 64;
    check_refuses(&p, &b, NULL, 1, MOE_ERR_INVALID_ARG, "plan.weight_promo 64");
    b = good, b.weight_tiled = 2;
    check_refuses(&p, &b, NULL, 1, MOE_ERR_INVALID_ARG, "plan.weight_tiled 2");
    b = good, b.bm2 = 64;
    check_refuses(&p, &b, NULL, 1, MOE_ERR_INVALID_ARG, "plan not made by fx_plan_make for this scheme");
    b = good, b.gemv = 1;
    check_refuses(&p, &b, NULL, 1, MOE_ERR_INVALID_ARG, "(gemv)");
    check_refuses(&p, &good, NULL, 0, MOE_ERR_UNSUPPORTED, "no cuTensorMapEncodeTiled");
    /* a plan made for a smaller problem carves less than this one needs */
    const moe_cuda_fx_problem small = problem("mixtral-8x7b", 200, MOE_SCHEME_FP8_WTENSOR_ATENSOR, 0);
    const moe_cuda_fx_plan sp = must_plan(&small);
    check_refuses(&p, &sp, NULL, 1, MOE_ERR_INVALID_ARG, "(workspace");
    /* the 4-bit 128-row tiles have only the persistent form */
    const moe_cuda_fx_problem w4 = problem("mixtral-8x7b", 4096, MOE_SCHEME_MXFP4_W4A16, 0);
    b = must_plan(&w4);
    ck_assert_int_eq(b.bm1, 128);
    b.persistent = 0;
    check_refuses(&w4, &b, NULL, 1, MOE_ERR_INVALID_ARG, "plan.persistent 0 on 4-bit 128-row tiles");
    /* a 32-row swapped plan has no mma.sync form to fall back to */
    const moe_cuda_fx_problem r32 = problem("mixtral-8x7b", 64, MOE_SCHEME_BF16, 0);
    b = must_plan(&r32);
    ck_assert(b.bm1 == 32 && b.swapped);
    b.swapped = 0;
    check_refuses(&r32, &b, NULL, 1, MOE_ERR_INVALID_ARG, "no mma.sync / wgmma tile of 32 x");
    /* a one-token plan's slot layout belongs to M = 1 */
    const moe_cuda_fx_problem one = problem("qwen3-30b-a3b", 1, MOE_SCHEME_BF16, 0);
    const moe_cuda_fx_plan op = must_plan(&one);
    ck_assert(op.slot_layout && op.gemv);
    const moe_cuda_fx_problem two = problem("qwen3-30b-a3b", 2, MOE_SCHEME_BF16, 0);
    b = op, b.workspace = (size_t)1 << 40;
    check_refuses(&two, &b, NULL, 1, MOE_ERR_INVALID_ARG, "(slot layout)");

    /* the arguments, where given */
    static char buf[64] __attribute__((aligned(16)));
    const float sc = 1.0f;
    moe_cuda_fx_args a = {buf, NULL, NULL, buf, buf, buf, &sc, &sc, NULL, NULL};
    ck_assert_int_eq(fx_plan_check(&p, &good, &a, 1, NULL, NULL), MOE_OK);
    a.x = buf + 8;
    check_refuses(&p, &good, &a, 1, MOE_ERR_INVALID_ARG, "must be 16-byte aligned");
    a.x = buf, a.w2_scale = NULL;
    check_refuses(&p, &good, &a, 1, MOE_ERR_INVALID_ARG, "needs w1_scale and w2_scale");
}
END_TEST

/* the switches the notes' side-by-side runs set, each moving the plan as fast.h says */
START_TEST(switches)
{
    clear_switches();
    const moe_cuda_fx_problem p = problem("mixtral-8x7b", 256, MOE_SCHEME_FP8_WTENSOR_ATENSOR, 0);
    moe_cuda_fx_plan plan = must_plan(&p);
    ck_assert_int_eq(plan.bm1, 128);
    ck_assert_int_eq(plan.epi_wg, 3);
    ck_assert_int_eq(plan.promote_k, 128); /* both GEMMs with the epilogue warpgroup: the tighter bound */
    setenv("MOE_FX_BM128", "0", 1);
    plan = must_plan(&p);
    ck_assert_int_eq(plan.bm1, 64);
    ck_assert(plan.wg64 && plan.shallow1);
    unsetenv("MOE_FX_BM128");
    setenv("MOE_FX_EWG", "0", 1);
    plan = must_plan(&p);
    ck_assert_int_eq(plan.epi_wg, 0);
    ck_assert_int_eq(plan.promote_k, 256); /* no epilogue warpgroup: promoted every two k tiles (v47) */
    unsetenv("MOE_FX_EWG");
    setenv("MOE_FX_PROMOK", "256", 1);
    ck_assert_int_eq(must_plan(&p).promote_k, 256);
    setenv("MOE_FX_PROMOK", "77", 1); /* anything else: 128 */
    ck_assert_int_eq(must_plan(&p).promote_k, 128);
    unsetenv("MOE_FX_PROMOK");
    setenv("MOE_FX_TMA", "0", 1);
    plan = must_plan(&p);
    ck_assert(!plan.tma && !plan.weight_tiled);
    ck_assert_int_eq(plan.epi_wg, 3); /* the e4m3 warpgroup form keeps its copies */
    unsetenv("MOE_FX_TMA");
    const moe_cuda_fx_problem one = problem("qwen3-30b-a3b", 1, MOE_SCHEME_W4A16_G128, 0);
    ck_assert(must_plan(&one).gemv);
    ck_assert_int_eq(must_plan(&one).launches, 2);
    setenv("MOE_FX_GEMV", "0", 1);
    plan = must_plan(&one);
    ck_assert(!plan.gemv && plan.slot_layout);
    unsetenv("MOE_FX_GEMV");
    /* no tensor-map encoding in the driver: no TMA anywhere, and the rule's other choices stand */
    moe_cuda_fx_plan with, without;
    ck_assert_int_eq(fx_plan_choose(&p, 1, &with, NULL, NULL), MOE_OK);
    ck_assert_int_eq(fx_plan_choose(&p, 0, &without, NULL, NULL), MOE_OK);
    ck_assert(with.tma && !without.tma);
    ck_assert_int_eq(with.bm1, without.bm1);
    ck_assert_int_eq(with.workspace, without.workspace);
    clear_switches();
}
END_TEST

/* the table: a shallow form's deep form and a form's mma.sync one are real rows of the same shape, and every
 * row is the one fx_cfg_of finds from its own flags, for each kind it exists for */
START_TEST(tile_table)
{
    for (int c = 0; c < CFG_COUNT; c++) {
        const fx_tile_cfg *t = &fx_cfgs[c];
        ck_assert_msg(t->kinds != 0 && t->kinds < (1u << KIND_COUNT), "row %d kinds", c);
        const fx_tile_cfg *d = &fx_cfgs[t->deep], *m = &fx_cfgs[t->mma];
        ck_assert_msg(!d->shallow && d->bm == t->bm && d->bn == t->bn && d->swapped == t->swapped && d->w64 == t->w64,
                      "row %d: deep form %d", c, t->deep);
        ck_assert_msg(t->shallow || t->deep == c, "row %d: a deep tile is its own deep form", c);
        ck_assert_msg(m->bm == t->bm && m->bn == t->bn && !m->w64 && !m->shallow, "row %d: mma form %d", c, t->mma);
        /* the 32-row swapped tiles have no mma.sync form: their row is their own */
        ck_assert_msg(!m->swapped || (t->bm == 32 && t->mma == c), "row %d: mma form %d swapped", c, t->mma);
        for (int k = 0; k < KIND_COUNT; k++)
            if (t->kinds >> k & 1u)
                ck_assert_int_eq(fx_cfg_of((fx_kind)k, t->bm, t->bn, t->swapped, t->w64, t->shallow), c);
    }
    ck_assert(!fx_cfg_ok(KIND_BF16, -1) && !fx_cfg_ok(KIND_BF16, CFG_COUNT));
    ck_assert(!fx_cfg_ok(KIND_I8, CFG_16x128S));  /* int8 decode: mma.sync only */
    ck_assert(!fx_cfg_ok(KIND_FP8, CFG_128x256)); /* e4m3: 128 x 128 (the promotion's second accumulator set) */
    ck_assert(fx_cfg_ok(KIND_MX4, CFG_128x256));
}
END_TEST

START_TEST(layout_and_model)
{
    clear_switches();
    char w[64] = "x";
    moe_cuda_fx_plan_words(NULL, w, sizeof w);
    ck_assert_str_eq(w, "no plan");
    moe_cuda_fx_plan_words(NULL, w, 0); /* nothing written, no crash */
    moe_cuda_fx_plan_words(NULL, NULL, 8);
    /* cap = M*topk + min(E, M*topk)*(bm-1), rounded up to bm */
    ck_assert_int_eq(moe_cuda_fx_layout_cap(1, 8, 256, 16), 128);    /* 8 + 8*15 */
    ck_assert_int_eq(moe_cuda_fx_layout_cap(256, 2, 8, 128), 1536);  /* 512 + 8*127 = 1528 */
    ck_assert_int_eq(moe_cuda_fx_layout_cap(4096, 8, 128, 1), 32768);
    /* the pieces: 256-byte aligned, split scratch of 32 CTAs x E counts */
    ck_assert_uint_eq(moe_cuda_fx_layout_bytes(1, 1, 1, 1), 7 * 256);
    /* sorted, block_expert, counts (256 B each), offsets (65 x 4: 512), row_of_slot, num_blocks, part (32 x 64 x 4) */
    ck_assert_uint_eq(moe_cuda_fx_layout_bytes(1, 1, 64, 1), 3 * 256 + 512 + 2 * 256 + 8192);
    moe_cuda_fx_layout L;
    moe_cuda_fx_layout_carve((void *)(uintptr_t)0x10000, 256, 2, 8, 128, &L);
    ck_assert_int_eq(L.cap, 1536);
    ck_assert_int_eq(L.nblk, 12);
    ck_assert_uint_eq((uintptr_t)L.block_expert - (uintptr_t)L.sorted, 1536 * 4);
    ck_assert_uint_eq((uintptr_t)L.part - (uintptr_t)L.sorted, moe_cuda_fx_layout_bytes(256, 2, 8, 128) - 8 * 32 * 4);

    /* the pieces a plan's workspace holds: h always, y without the atomic combine, the codes for 8-bit */
    moe_cuda_fx_problem p = problem("qwen3-30b-a3b", 64, MOE_SCHEME_FP8_WBLOCK128_AGROUP128, 0);
    moe_cuda_fx_plan plan = must_plan(&p);
    const size_t cap = (size_t)moe_cuda_fx_layout_cap(64, 8, 128, plan.bm1);
    ck_assert_uint_eq(moe_cuda_fx_piece_bytes(&p, &plan, MOE_FX_H), cap * 768 * 2);
    ck_assert_uint_eq(moe_cuda_fx_piece_bytes(&p, &plan, MOE_FX_SX), 64 * (2048 / 128) * 4);
    ck_assert_uint_eq(moe_cuda_fx_piece_bytes(&p, &plan, MOE_FX_Y), cap * 2048 * 2);
    p.atomic = 1;
    ck_assert_uint_eq(moe_cuda_fx_piece_bytes(&p, &plan, MOE_FX_Y), 0);
    ck_assert_uint_eq(moe_cuda_fx_piece_bytes(&p, &plan, MOE_FX_PIECES), 0);
    p.scheme = MOE_SCHEME_BF16;
    ck_assert_uint_eq(moe_cuda_fx_piece_bytes(&p, &plan, MOE_FX_XQ), 0);

    /* the accumulation model follows the tiles */
    p = problem("qwen3-30b-a3b", 1, MOE_SCHEME_FP8_WCHANNEL_ATOKEN, 0);
    plan = must_plan(&p);
    moe_fused_model m = moe_cuda_fx_model(&p, &plan);
    ck_assert(plan.gemv && m.k_step == 16 && m.acc_bits == 24 && m.promote_k == 0);
    p = problem("deepseek-v3", 16384, MOE_SCHEME_FP8_WCHANNEL_ATOKEN, 0);
    plan = must_plan(&p);
    m = moe_cuda_fx_model(&p, &plan);
    ck_assert(plan.persistent && plan.bm1 == 128);
    ck_assert_int_eq(m.k_step, 32);
    ck_assert_int_eq(m.acc_bits, 14);
    ck_assert_int_eq(m.promote_k, plan.promote_k);
    p = problem("deepseek-v3", 16384, MOE_SCHEME_INT8_WCHANNEL_ATOKEN, 0);
    plan = must_plan(&p);
    ck_assert(moe_cuda_fx_model(&p, &plan).exact);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--dump")) { /* tests/fx_plan/fields.tsv */
        clear_switches();
        char line[600];
        for (int i = 0; i < GRID_N; i++) grid_line(i, line, sizeof line), printf("%s\n", line);
        return 0;
    }
    Suite *s = suite_create("fx_plan");
    TCase *tc = tcase_create("rule");
    tcase_add_test(tc, grid_matches);
    tcase_add_test(tc, fields_match);
    tcase_add_test(tc, grid_file_from_json);
    tcase_add_test(tc, bad_problems_refused);
    tcase_add_test(tc, plan_checks);
    tcase_add_test(tc, switches);
    tcase_add_test(tc, tile_table);
    tcase_add_test(tc, layout_and_model);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
