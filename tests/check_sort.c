/* Token-sorting stages: CK moe-sorting and TensorRT-LLM expert maps.
 * Hand-checked upstream examples (the CK README example with its two typos
 * corrected, anchors dispatch_sorting.md B.6; TRT-LLM maps, expert-parallel
 * ranges and the duplicate-expert divergence, trtllm_moe.md 1.1-1.4),
 * properties on seeded random routings, the prologue selection rules
 * (seed 001, trtllm_moe.md section 6) and every argument rule. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/maps_trtllm.h"
#include "moe/rng.h"
#include "moe/sort_ck.h"

/* Outputs are pre-filled with this word: entries upstream does not write
 * must still hold it afterwards. As int32 it is positive (1592651789). */
#define CANARY 0x5EEDF00Du
#define C ((int32_t)CANARY)

static moe_tensor tensor(moe_dtype dt, int ndim, int64_t d0, int64_t d1)
{
    moe_tensor t;
    int64_t shape[2] = {d0, d1};
    ck_assert_int_eq(moe_tensor_alloc(&t, dt, ndim, shape), MOE_OK);
    return t;
}

static void fill_canary(moe_tensor *t)
{
    uint32_t *w = t->data;
    for (size_t i = 0; i < t->nbytes / 4; i++) w[i] = CANARY;
}

/* words of t from word `first` on that no longer hold the canary */
static int64_t touched_from(const moe_tensor *t, size_t first)
{
    const uint32_t *w = t->data;
    int64_t n = 0;
    for (size_t i = first; i < t->nbytes / 4; i++) n += w[i] != CANARY;
    return n;
}

static uint32_t bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static void expect_fail(moe_status got, moe_status want, const char *arg, const char *what)
{
    ck_assert_msg(got == want, "%s: status %s, expected %s (%s)", what, moe_status_str(got),
                  moe_status_str(want), moe_last_error());
    ck_assert_msg(strstr(moe_last_error(), arg) != NULL, "%s: message \"%s\" does not name %s", what,
                  moe_last_error(), arg);
}

/* Counter-based draws: (seed, stream) fixed per test, index advancing. */
typedef struct {
    uint64_t seed, stream, i;
} draw;

static uint32_t below(draw *d, uint32_t n) { return moe_rng_u32(d->seed, d->stream, d->i++) % n; }

/* k distinct ids from [0, E) per row (partial Fisher-Yates on 0..E-1). */
static void distinct_rows(draw *d, int32_t *ids, int64_t T, int k, int E)
{
    int32_t *perm = malloc((size_t)E * sizeof *perm);
    for (int64_t t = 0; t < T; t++) {
        for (int e = 0; e < E; e++) perm[e] = e;
        for (int j = 0; j < k; j++) {
            int r = j + (int)below(d, (uint32_t)(E - j));
            int32_t x = perm[r];
            perm[r] = perm[j];
            perm[j] = x;
            ids[t * k + j] = x;
        }
    }
    free(perm);
}

/* ------------------------------------------------------------------ CK */

typedef struct {
    moe_tensor ids, w, mask, sti, sw, sei, ntpp;
    moe_sort_ck_params p;
} ck_fix;

/* topk_weights[t][k] = (t*topk + k + 1) / 8: the README's letters a, b, c,
 * ... as exact binary values. */
static void ck_init(ck_fix *f, const int32_t *ids, int64_t T, int k, int E, int unit, int64_t cap,
                    int64_t tiles)
{
    memset(f, 0, sizeof *f);
    f->ids = tensor(MOE_I32, 2, T, k);
    if (T) memcpy(f->ids.data, ids, (size_t)(T * k) * sizeof(int32_t));
    f->w = tensor(MOE_F32, 2, T, k);
    float *w = f->w.data;
    for (int64_t i = 0; i < T * k; i++) w[i] = (float)(i + 1) * 0.125f;
    f->sti = tensor(MOE_I32, 1, cap, 0);
    f->sw = tensor(MOE_F32, 1, cap, 0);
    f->sei = tensor(MOE_I32, 1, tiles, 0);
    f->ntpp = tensor(MOE_I32, 1, 2, 0);
    fill_canary(&f->sti);
    fill_canary(&f->sw);
    fill_canary(&f->sei);
    fill_canary(&f->ntpp);
    f->p.num_experts = E;
    f->p.unit_size = unit;
}

static void ck_set_mask(ck_fix *f, const int32_t *m)
{
    f->mask = tensor(MOE_I32, 1, f->p.num_experts, 0);
    memcpy(f->mask.data, m, (size_t)f->p.num_experts * sizeof *m);
    f->p.local_expert_mask = &f->mask;
}

static moe_status ck_run(ck_fix *f)
{
    return moe_ref_sort_ck(&f->ids, &f->w, &f->p, &f->sti, &f->sw, &f->sei, &f->ntpp);
}

static int64_t ck_touched(const ck_fix *f)
{
    return touched_from(&f->sti, 0) + touched_from(&f->sw, 0) + touched_from(&f->sei, 0) +
           touched_from(&f->ntpp, 0);
}

static void ck_free(ck_fix *f)
{
    moe_tensor_free(&f->ids);
    moe_tensor_free(&f->w);
    moe_tensor_free(&f->mask);
    moe_tensor_free(&f->sti);
    moe_tensor_free(&f->sw);
    moe_tensor_free(&f->sei);
    moe_tensor_free(&f->ntpp);
}

/* B.6: E=6, topk=3, M_a=4, 5 tokens. */
static const int32_t readme_ids[15] = {0, 3, 5, 2, 3, 5, 1, 3, 5, 1, 2, 3, 1, 3, 5};
static const int32_t mask_101101[6] = {1, 0, 1, 1, 0, 1}, mask_101110[6] = {1, 0, 1, 1, 1, 0};
#define S5 5u          /* plain sentinel: num_tokens (the README's 6 is typo 2) */
#define SM 0x03000005u /* mock sentinel: 5 | 3 << 24 */

typedef struct {
    const char *name;
    moe_sort_ck_id_mode id;
    moe_sort_ck_empty_mode empty;
    const int32_t *mask;
    int n;
    uint32_t tok[28];
    int ntiles;
    int32_t tiles[7];
} readme_case;

/* Expert 5 holds token 4, not the README's token 5 (typo 1). */
static const readme_case readme_cases[] = {
    {"plain skip-empty", MOE_SORT_CK_PLAIN_ID, MOE_SORT_CK_SKIP_EMPTY, NULL, 24,
     {0, S5, S5, S5, 2, 3, 4, S5, 1, 3, S5, S5, 0, 1, 2, 3, 4, S5, S5, S5, 0, 1, 2, 4},
     6, {0, 1, 2, 3, 3, 5}},
    {"plain one-tile", MOE_SORT_CK_PLAIN_ID, MOE_SORT_CK_ONE_TILE_PER_EMPTY, NULL, 28,
     {0, S5, S5, S5, 2, 3, 4, S5, 1, 3, S5, S5, 0, 1, 2, 3, 4, S5, S5, S5, S5, S5, S5, S5, 0, 1,
      2, 4},
     7, {0, 1, 2, 3, 3, 4, 5}},
    {"mock skip-empty", MOE_SORT_CK_MOCK_ID, MOE_SORT_CK_SKIP_EMPTY, NULL, 24,
     {0, SM, SM, SM, 2, 3, 4, SM, 1, 0x01000003, SM, SM, 0x01000000, 0x01000001, 0x01000002,
      0x02000003, 0x01000004, SM, SM, SM, 0x02000000, 0x02000001, 0x02000002, 0x02000004},
     6, {0, 1, 2, 3, 3, 5}},
    {"mock one-tile", MOE_SORT_CK_MOCK_ID, MOE_SORT_CK_ONE_TILE_PER_EMPTY, NULL, 28,
     {0, SM, SM, SM, 2, 3, 4, SM, 1, 0x01000003, SM, SM, 0x01000000, 0x01000001, 0x01000002,
      0x02000003, 0x01000004, SM, SM, SM, SM, SM, SM, SM, 0x02000000, 0x02000001, 0x02000002,
      0x02000004},
     7, {0, 1, 2, 3, 3, 4, 5}},
    /* the kernel header's masked example: total 20, tiles [0,1,2,2,3] */
    {"mock skip-empty mask 101101", MOE_SORT_CK_MOCK_ID, MOE_SORT_CK_SKIP_EMPTY, mask_101101, 20,
     {0, SM, SM, SM, 1, 0x01000003, SM, SM, 0x01000000, 0x01000001, 0x01000002, 0x02000003,
      0x01000004, SM, SM, SM, 0x02000000, 0x02000001, 0x02000002, 0x02000004},
     5, {0, 1, 2, 2, 3}},
    /* e4 is local and empty: one tile with local id 3; e1, e5 masked */
    {"plain one-tile mask 101110", MOE_SORT_CK_PLAIN_ID, MOE_SORT_CK_ONE_TILE_PER_EMPTY,
     mask_101110, 20,
     {0, S5, S5, S5, 1, 3, S5, S5, 0, 1, 2, 3, 4, S5, S5, S5, S5, S5, S5, S5},
     5, {0, 1, 2, 2, 3}},
};
#define N_README ((int)(sizeof readme_cases / sizeof readme_cases[0]))

START_TEST(ck_readme_example)
{
    const readme_case *rc = &readme_cases[_i];
    int64_t cap, tiles;
    ck_assert_int_eq(moe_sort_ck_capacity(5, 3, 6, 4, MOE_SORT_CK_PAD_UPDATED, &cap, &tiles), MOE_OK);
    ck_fix f;
    ck_init(&f, readme_ids, 5, 3, 6, 4, cap, tiles);
    f.p.id_mode = rc->id;
    f.p.empty_experts = rc->empty;
    if (rc->mask) ck_set_mask(&f, rc->mask);
    ck_assert_msg(ck_run(&f) == MOE_OK, "%s: %s", rc->name, moe_last_error());
    const uint32_t *tok = f.sti.data, sentinel = rc->id == MOE_SORT_CK_MOCK_ID ? SM : S5;
    const int32_t *tile = f.sei.data, *ntpp = f.ntpp.data;
    const float *w = f.sw.data;
    ck_assert_msg(ntpp[0] == rc->n && ntpp[1] == 5, "%s: num_tokens_post_padded {%d, %d}", rc->name,
                  ntpp[0], ntpp[1]);
    int bad = 0;
    for (int i = 0; i < rc->n; i++) bad += tok[i] != rc->tok[i];
    for (int i = 0; i < rc->ntiles; i++) bad += tile[i] != rc->tiles[i];
    /* weights follow their (token, slot): slot = where the tile's global
     * expert sits in the token's row; pads weigh +0 */
    for (int i = 0; i < rc->n; i++) {
        if (tok[i] == sentinel) {
            bad += bits(w[i]) != 0;
            continue;
        }
        int g = -1, local = tile[i / 4];
        for (int e = 0, l = 0; e < 6 && g < 0; e++)
            if (!rc->mask || rc->mask[e]) {
                if (l == local) g = e;
                l++;
            }
        uint32_t t = tok[i] & 0xFFFFFF;
        if (t >= 5 || g < 0) {
            bad++;
            continue;
        }
        int k = 0;
        while (k < 3 && readme_ids[t * 3 + k] != g) k++;
        bad += k == 3 || w[i] != (float)(t * 3 + k + 1) * 0.125f;
    }
    ck_assert_msg(bad == 0, "%s: %d mismatches", rc->name, bad);
    /* B.3: nothing past the padded total or the used tiles is written */
    ck_assert_int_eq(touched_from(&f.sti, (size_t)rc->n) + touched_from(&f.sw, (size_t)rc->n) +
                         touched_from(&f.sei, (size_t)rc->ntiles),
                     0);
    ck_free(&f);
}
END_TEST

/* The same example's weights written out as the README's letters. */
START_TEST(ck_readme_weights)
{
#define L(c) ((float)((c) - 'a' + 1) * 0.125f)
    static const float want[24] = {L('a'), 0, 0, 0, L('g'), L('j'), L('m'), 0,
                                   L('d'), L('k'), 0, 0, L('b'), L('e'), L('h'), L('l'),
                                   L('n'), 0, 0, 0, L('c'), L('f'), L('i'), L('o')};
#undef L
    ck_fix f;
    ck_init(&f, readme_ids, 5, 3, 6, 4, 36, 9);
    f.p.id_mode = MOE_SORT_CK_PLAIN_ID;
    ck_assert_int_eq(ck_run(&f), MOE_OK);
    const float *w = f.sw.data;
    int bad = 0;
    for (int i = 0; i < 24; i++) bad += bits(w[i]) != bits(want[i]);
    ck_assert_int_eq(bad, 0);
    ck_free(&f);
}
END_TEST

START_TEST(ck_capacity_formulas)
{
    int64_t n, tiles;
    /* B.6: 36 (updated) and 33 (README), 9 tiles either way */
    ck_assert_int_eq(moe_sort_ck_capacity(5, 3, 6, 4, MOE_SORT_CK_PAD_UPDATED, &n, &tiles), MOE_OK);
    ck_assert(n == 36 && tiles == 9);
    ck_assert_int_eq(moe_sort_ck_capacity(5, 3, 6, 4, MOE_SORT_CK_PAD_README, &n, &tiles), MOE_OK);
    ck_assert(n == 33 && tiles == 9);
    ck_assert_int_eq(moe_sort_ck_capacity(0, 2, 3, 2, MOE_SORT_CK_PAD_UPDATED, &n, NULL), MOE_OK);
    ck_assert_int_eq(n, 4);

    /* One token, one slot, E=4, unit 4, one tile per empty expert: the
     * need is 16; the README formula gives 13 and is refused, the updated
     * one gives exactly 16. */
    static const int32_t one[1] = {0};
    ck_assert_int_eq(moe_sort_ck_capacity(1, 1, 4, 4, MOE_SORT_CK_PAD_README, &n, &tiles), MOE_OK);
    ck_assert(n == 13 && tiles == 4);
    ck_fix f;
    ck_init(&f, one, 1, 1, 4, 4, n, tiles);
    f.p.empty_experts = MOE_SORT_CK_ONE_TILE_PER_EMPTY;
    expect_fail(ck_run(&f), MOE_ERR_SHAPE, "sorted_token_ids", "README formula, one-tile");
    ck_assert_int_eq(ck_touched(&f), 0);
    ck_free(&f);
    ck_assert_int_eq(moe_sort_ck_capacity(1, 1, 4, 4, MOE_SORT_CK_PAD_UPDATED, &n, &tiles), MOE_OK);
    ck_assert(n == 16 && tiles == 4);
    ck_init(&f, one, 1, 1, 4, 4, n, tiles);
    f.p.empty_experts = MOE_SORT_CK_ONE_TILE_PER_EMPTY;
    ck_assert_int_eq(ck_run(&f), MOE_OK);
    const uint32_t S = 1u | 1u << 24;
    const uint32_t want[16] = {0, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S};
    const int32_t want_tiles[4] = {0, 1, 2, 3};
    int bad = 0;
    for (int i = 0; i < 16; i++) bad += ((uint32_t *)f.sti.data)[i] != want[i];
    for (int i = 0; i < 4; i++) bad += ((int32_t *)f.sei.data)[i] != want_tiles[i];
    ck_assert_int_eq(bad, 0);
    ck_assert_int_eq(((int32_t *)f.ntpp.data)[0], 16);
    ck_free(&f);
}
END_TEST

/* M = 0: skip-empty writes only {0, 0}; one-tile gives every expert an
 * all-sentinel tile (sentinel 0 | topk<<24), E*unit entries, more than the
 * updated formula's E*unit - topk. */
START_TEST(ck_empty_problem)
{
    ck_fix f;
    ck_init(&f, NULL, 0, 2, 3, 2, 4, 2);
    ck_assert_int_eq(ck_run(&f), MOE_OK);
    ck_assert(((int32_t *)f.ntpp.data)[0] == 0 && ((int32_t *)f.ntpp.data)[1] == 0);
    ck_assert_int_eq(touched_from(&f.sti, 0) + touched_from(&f.sw, 0) + touched_from(&f.sei, 0), 0);
    f.p.empty_experts = MOE_SORT_CK_ONE_TILE_PER_EMPTY;
    fill_canary(&f.ntpp);
    expect_fail(ck_run(&f), MOE_ERR_SHAPE, "sorted_token_ids", "T=0 one-tile, updated formula");
    ck_free(&f);

    ck_init(&f, NULL, 0, 2, 3, 2, 6, 3);
    f.p.empty_experts = MOE_SORT_CK_ONE_TILE_PER_EMPTY;
    ck_assert_int_eq(ck_run(&f), MOE_OK);
    int bad = 0;
    for (int i = 0; i < 6; i++)
        bad += ((uint32_t *)f.sti.data)[i] != 0x02000000u || bits(((float *)f.sw.data)[i]) != 0;
    for (int i = 0; i < 3; i++) bad += ((int32_t *)f.sei.data)[i] != i;
    ck_assert_int_eq(bad, 0);
    ck_assert(((int32_t *)f.ntpp.data)[0] == 6 && ((int32_t *)f.ntpp.data)[1] == 0);
    ck_free(&f);
}
END_TEST

/* Seeded random routings, every mode: each unmasked (token, slot) pair
 * appears exactly once with its weight, segments have the documented
 * sizes, tiles ascend, tokens ascend inside an expert, pads close each
 * segment, and nothing past the total is written. */
START_TEST(ck_random_properties)
{
    static const int units[8] = {1, 2, 3, 4, 8, 16, 32, 64};
    draw d = {2024, moe_rng_stream_id("check_sort.ck"), 0};
    int bad_cases = 0;
    char first[200] = "";
    for (int c = 0; c < 300; c++) {
        int64_t T = c % 10 == 0 ? 0 : below(&d, 300);
        int E = 1 + (int)below(&d, 64), k = 1 + (int)below(&d, E < 8 ? E : 8);
        int unit = units[below(&d, 8)];
        int32_t *ids = malloc((size_t)(T * k + 1) * sizeof *ids), *mask = NULL;
        distinct_rows(&d, ids, T, k, E);
        int64_t cap, tiles;
        ck_assert_int_eq(moe_sort_ck_capacity(T, k, E, unit, MOE_SORT_CK_PAD_UPDATED, &cap, &tiles),
                         MOE_OK);
        if (T == 0) cap = (int64_t)E * unit, tiles = E; /* see ck_empty_problem */
        ck_fix f;
        ck_init(&f, ids, T, k, E, unit, cap, tiles);
        f.p.id_mode = below(&d, 2) ? MOE_SORT_CK_MOCK_ID : MOE_SORT_CK_PLAIN_ID;
        f.p.empty_experts = below(&d, 2) ? MOE_SORT_CK_SKIP_EMPTY : MOE_SORT_CK_ONE_TILE_PER_EMPTY;
        int *global = malloc((size_t)E * sizeof *global), nlocal = 0;
        int64_t *cnt = calloc((size_t)E, sizeof *cnt), want_total = 0;
        if (below(&d, 3) == 0) {
            mask = malloc((size_t)E * sizeof *mask);
            for (int e = 0; e < E; e++) mask[e] = (int32_t)below(&d, 2);
            ck_set_mask(&f, mask);
        }
        for (int e = 0; e < E; e++)
            if (!mask || mask[e]) global[nlocal++] = e;
        for (int64_t i = 0; i < T * k; i++) cnt[ids[i]]++;
        for (int e = 0; e < E; e++)
            if (!mask || mask[e])
                want_total += cnt[e] ? (cnt[e] + unit - 1) / unit * unit
                              : f.p.empty_experts == MOE_SORT_CK_ONE_TILE_PER_EMPTY ? unit : 0;

        int bad = ck_run(&f) != MOE_OK;
        const uint32_t *tok = f.sti.data;
        const float *w = f.sw.data, *win = f.w.data;
        const int32_t *tile = f.sei.data, *ntpp = f.ntpp.data;
        const int mock = f.p.id_mode == MOE_SORT_CK_MOCK_ID;
        const uint32_t sentinel = mock ? (uint32_t)T | (uint32_t)k << 24 : (uint32_t)T;
        int64_t total = bad ? 0 : ntpp[0];
        bad += total != want_total || ntpp[1] != T || total % unit != 0;
        if (T > 0) { /* B.4: with distinct ids the updated bound always holds */
            int64_t readme;
            moe_sort_ck_capacity(T, k, E, unit, MOE_SORT_CK_PAD_README, &readme, NULL);
            bad += total > cap || (f.p.empty_experts == MOE_SORT_CK_SKIP_EMPTY && total > readme);
        }
        int *seen = calloc((size_t)(T * k + 1), sizeof *seen);
        int64_t *seg = calloc((size_t)E, sizeof *seg);
        int prev_tile = -1;
        int64_t prev_t = -1;
        int padded = 0;
        for (int64_t i = 0; i < total && !bad; i++) {
            int lt = tile[i / unit];
            if (i % unit == 0) {
                bad += lt < prev_tile || lt < 0 || lt >= nlocal;
                if (lt != prev_tile) prev_t = -1, padded = 0;
                prev_tile = lt;
                if (bad) break;
            }
            int g = global[lt];
            seg[g]++;
            if (tok[i] == sentinel) {
                padded = 1;
                bad += bits(w[i]) != 0;
                continue;
            }
            int64_t t = mock ? (int64_t)(tok[i] & 0xFFFFFF) : (int64_t)tok[i];
            int j = 0;
            while (t < T && j < k && ids[t * k + j] != g) j++;
            if (padded || t >= T || j == k || t <= prev_t || (mock && (int)(tok[i] >> 24) != j)) {
                bad++;
                break;
            }
            prev_t = t;
            seen[t * k + j]++;
            bad += bits(w[i]) != bits(win[t * k + j]);
        }
        for (int64_t i = 0; i < T * k && !bad; i++)
            bad += seen[i] != ((!mask || mask[ids[i]]) ? 1 : 0);
        for (int e = 0; e < E && !bad; e++) {
            int64_t want = 0;
            if (!mask || mask[e])
                want = cnt[e] ? (cnt[e] + unit - 1) / unit * unit
                       : f.p.empty_experts == MOE_SORT_CK_ONE_TILE_PER_EMPTY ? unit : 0;
            bad += seg[e] != want;
        }
        if (!bad)
            bad += (touched_from(&f.sti, (size_t)total) + touched_from(&f.sw, (size_t)total) +
                    touched_from(&f.sei, (size_t)(total / unit))) != 0;
        if (bad && !bad_cases++)
            snprintf(first, sizeof first, "case %d: T=%lld E=%d k=%d unit=%d mock=%d one-tile=%d mask=%d", c,
                     (long long)T, E, k, unit, mock, (int)f.p.empty_experts, mask != NULL);
        free(seen);
        free(seg);
        free(cnt);
        free(global);
        free(mask);
        free(ids);
        ck_free(&f);
    }
    ck_assert_msg(bad_cases == 0, "%d bad cases, first %s", bad_cases, first);
}
END_TEST

/* ------------------------------------------------------------ TRT-LLM */

typedef struct {
    moe_tensor ids, perm, inv, off, pts;
    moe_maps_trtllm_params p;
} tr_fix;

static void tr_init(tr_fix *f, const int32_t *ids, int64_t T, int k, int E, int start, int El,
                    moe_maps_trtllm_variant v)
{
    memset(f, 0, sizeof *f);
    f->ids = tensor(MOE_I32, 2, T, k);
    if (T) memcpy(f->ids.data, ids, (size_t)(T * k) * sizeof(int32_t));
    f->perm = tensor(MOE_I32, 1, T * k, 0);
    f->inv = tensor(MOE_I32, 1, T * k, 0);
    f->off = tensor(MOE_I64, 1, El + 1, 0);
    f->pts = tensor(MOE_I32, 1, T * k, 0);
    fill_canary(&f->perm);
    fill_canary(&f->inv);
    fill_canary(&f->off);
    fill_canary(&f->pts);
    f->p.variant = v;
    f->p.num_experts = E;
    f->p.start_expert = start;
    f->p.num_local_experts = El;
}

static moe_status tr_run(tr_fix *f)
{
    return moe_ref_maps_trtllm(&f->ids, &f->p, &f->perm, &f->inv, &f->off, &f->pts);
}

static int64_t tr_touched(const tr_fix *f)
{
    return touched_from(&f->perm, 0) + touched_from(&f->inv, 0) + touched_from(&f->off, 0) +
           touched_from(&f->pts, 0);
}

static void tr_free(tr_fix *f)
{
    moe_tensor_free(&f->ids);
    moe_tensor_free(&f->perm);
    moe_tensor_free(&f->inv);
    moe_tensor_free(&f->off);
    moe_tensor_free(&f->pts);
}

static int diff_i32(const moe_tensor *t, const int32_t *want, int n)
{
    int bad = 0;
    for (int i = 0; i < n; i++) bad += ((const int32_t *)t->data)[i] != want[i];
    return bad;
}

static int diff_i64(const moe_tensor *t, const int64_t *want, int n)
{
    int bad = 0;
    for (int i = 0; i < n; i++) bad += ((const int64_t *)t->data)[i] != want[i];
    return bad;
}

typedef struct {
    const char *name;
    int32_t ids[8];
    int T, k, E, start, El;
    moe_maps_trtllm_variant v;
    int32_t perm[8], inv[8], pts[8];
    int64_t off[5];
} tr_case;

#define FUSED MOE_MAPS_TRTLLM_FUSED_SINGLE_BLOCK
#define THREE MOE_MAPS_TRTLLM_THREE_STEP
/* Worked by hand, u = j*T + t.
 * A: T=4, k=2, rows [2,0] [1,2] [2,3] [0,1], all experts local. By expert,
 *    token ascending: e0 {(0,1) u4, (3,0) u3}, e1 {(1,0) u1, (3,1) u7},
 *    e2 {(0,0) u0, (1,1) u5, (2,0) u2}, e3 {(2,1) u6}.
 * B: the same rows but token 3 = [-1, 7] (invalid ids), rank owning
 *    experts 2..3: e2 {u0, u5, u2}, e3 {u6}; num_valid 4. The fused path
 *    appends the non-local slots in (t, j) order: u4, u1, u3, u7.
 * D: duplicates, T=3, rows [1,1] [1,0] [2,2]. Fused: e0 {u4}, e1 {u0, u3,
 *    u1}, e2 {u2, u5}. Three-step keeps each token's first slot per expert:
 *    e0 {u4}, e1 {u0, u1}, e2 {u2}; u3 and u5 stay unwritten (1.4). */
static const tr_case tr_cases[] = {
    {"A fused", {2, 0, 1, 2, 2, 3, 0, 1}, 4, 2, 4, 0, 4, FUSED,
     {4, 3, 1, 7, 0, 5, 2, 6}, {4, 2, 6, 1, 0, 5, 7, 3}, {C, C, C, C, C, C, C, C}, {0, 2, 4, 7, 8}},
    {"A three-step", {2, 0, 1, 2, 2, 3, 0, 1}, 4, 2, 4, 0, 4, THREE,
     {4, 3, 1, 7, 0, 5, 2, 6}, {4, 2, 6, 1, 0, 5, 7, 3}, {0, 0, 1, 1, 2, 2, 2, 3}, {0, 2, 4, 7, 8}},
    {"B fused EP", {2, 0, 1, 2, 2, 3, -1, 7}, 4, 2, 4, 2, 2, FUSED,
     {0, 5, 2, 6, 4, 1, 3, 7}, {0, 5, 2, 6, 4, 1, 3, 7}, {C, C, C, C, C, C, C, C}, {0, 3, 4}},
    {"B three-step EP", {2, 0, 1, 2, 2, 3, -1, 7}, 4, 2, 4, 2, 2, THREE,
     {0, 5, 2, 6, C, C, C, C}, {0, C, 2, C, C, 1, 3, C}, {0, 0, 0, 1, C, C, C, C}, {0, 3, 4}},
    {"D fused duplicates", {1, 1, 1, 0, 2, 2}, 3, 2, 4, 0, 4, FUSED,
     {4, 0, 3, 1, 2, 5}, {1, 3, 4, 2, 0, 5}, {C, C, C, C, C, C}, {0, 1, 4, 6, 6}},
    {"D three-step duplicates", {1, 1, 1, 0, 2, 2}, 3, 2, 4, 0, 4, THREE,
     {4, 0, 1, 2, C, C}, {1, 2, 3, C, 0, C}, {0, 1, 1, 2, C, C}, {0, 1, 3, 4, 4}},
};
#define N_TR ((int)(sizeof tr_cases / sizeof tr_cases[0]))

START_TEST(tr_hand_examples)
{
    const tr_case *tc = &tr_cases[_i];
    tr_fix f;
    tr_init(&f, tc->ids, tc->T, tc->k, tc->E, tc->start, tc->El, tc->v);
    ck_assert_msg(tr_run(&f) == MOE_OK, "%s: %s", tc->name, moe_last_error());
    int n = tc->T * tc->k;
    int bad_perm = diff_i32(&f.perm, tc->perm, n), bad_inv = diff_i32(&f.inv, tc->inv, n);
    int bad_pts = diff_i32(&f.pts, tc->pts, n), bad_off = diff_i64(&f.off, tc->off, tc->El + 1);
    ck_assert_msg(bad_perm + bad_inv + bad_pts + bad_off == 0,
                  "%s: mismatches perm %d inv %d pts %d offsets %d", tc->name, bad_perm, bad_inv,
                  bad_pts, bad_off);
    tr_free(&f);
}
END_TEST

/* T = 0 is an empty problem: offsets all 0, nothing else to write. */
START_TEST(tr_empty_problem)
{
    for (int v = 0; v < 2; v++) {
        tr_fix f;
        tr_init(&f, NULL, 0, 2, 4, 1, 3, (moe_maps_trtllm_variant)v);
        ck_assert_int_eq(tr_run(&f), MOE_OK);
        const int64_t zero[4] = {0, 0, 0, 0};
        ck_assert_int_eq(diff_i64(&f.off, zero, 4), 0);
        tr_free(&f);
    }
}
END_TEST

/* Random routings with distinct ids, some slots invalid (-1 or >= E), a
 * random expert-parallel range. Fused: both maps are full permutations and
 * mutual inverses. Both: offsets count the local pairs, rows are ordered
 * expert -> token -> slot, and the two variants agree on every local row.
 * Three-step leaves non-local entries untouched. */
START_TEST(tr_random_properties)
{
    draw d = {77, moe_rng_stream_id("check_sort.trtllm"), 0};
    int bad_cases = 0;
    char first[160] = "";
    for (int c = 0; c < 300; c++) {
        int64_t T = c % 10 == 0 ? 0 : below(&d, 300);
        int E = 1 + (int)below(&d, 64), k = 1 + (int)below(&d, E < 8 ? E : 8);
        int El = 1 + (int)below(&d, (uint32_t)E), start = (int)below(&d, (uint32_t)(E - El + 1));
        int32_t *ids = malloc((size_t)(T * k + 1) * sizeof *ids);
        distinct_rows(&d, ids, T, k, E);
        for (int64_t i = 0; i < T * k; i++)
            if (below(&d, 8) == 0) ids[i] = below(&d, 2) ? -1 : E + (int32_t)below(&d, 5);
        tr_fix f, g;
        tr_init(&f, ids, T, k, E, start, El, FUSED);
        tr_init(&g, ids, T, k, E, start, El, THREE);
        int bad = (tr_run(&f) != MOE_OK) + (tr_run(&g) != MOE_OK);
        const int32_t *fp = f.perm.data, *fi = f.inv.data, *gp = g.perm.data, *gi = g.inv.data;
        const int32_t *gpts = g.pts.data;
        const int64_t *off = f.off.data;
        const int64_t rows = T * k;
        bad += diff_i64(&g.off, off, El + 1) != 0 || off[0] != 0;
        int64_t nv = off[El], local = 0;
        for (int e = 0; e < El && !bad; e++) {
            int64_t n = 0;
            for (int64_t i = 0; i < rows; i++) n += ids[i] == start + e;
            bad += off[e + 1] - off[e] != n;
            local += n;
        }
        bad += nv != local;
        for (int64_t p = 0; p < rows && !bad; p++) {
            int64_t u = fp[p];
            if (u < 0 || u >= rows || fi[u] != p) {
                bad++;
                break;
            }
            int64_t t = u % T, j = u / T, e = (int64_t)ids[t * k + j] - start;
            int is_local = e >= 0 && e < El;
            if (p < nv) {
                bad += !is_local || p < off[e] || p >= off[e + 1] || gp[p] != u || gi[u] != p ||
                       gpts[p] != e;
            } else {
                bad += is_local || gp[p] != C || gi[u] != C || gpts[p] != C;
            }
            /* expert -> token -> slot: within a bin, t*k + j increases */
            if (p > 0 && !bad) {
                int64_t u0 = fp[p - 1], t0 = u0 % T, j0 = u0 / T;
                int64_t e0 = (int64_t)ids[t0 * k + j0] - start;
                int same_bin = (p - 1 < nv) == (p < nv) && (p >= nv || e0 == e);
                bad += same_bin && t0 * k + j0 >= t * k + j;
            }
        }
        bad += touched_from(&f.pts, 0) != 0;
        if (bad && !bad_cases++)
            snprintf(first, sizeof first, "case %d: T=%lld E=%d k=%d start=%d El=%d", c, (long long)T,
                     E, k, start, El);
        tr_free(&f);
        tr_free(&g);
        free(ids);
    }
    ck_assert_msg(bad_cases == 0, "%d bad cases, first %s", bad_cases, first);
}
END_TEST

/* With duplicates allowed, three-step = the fused local rows filtered to
 * each token's first slot per expert, in the same order (1.3, 1.4). */
START_TEST(tr_random_duplicates)
{
    draw d = {5, moe_rng_stream_id("check_sort.trtllm.dup"), 0};
    int bad_cases = 0;
    for (int c = 0; c < 200; c++) {
        int64_t T = 1 + below(&d, 200);
        int E = 1 + (int)below(&d, 8), k = 1 + (int)below(&d, (uint32_t)E);
        int El = 1 + (int)below(&d, (uint32_t)E), start = (int)below(&d, (uint32_t)(E - El + 1));
        int32_t *ids = malloc((size_t)(T * k) * sizeof *ids);
        for (int64_t i = 0; i < T * k; i++) ids[i] = (int32_t)below(&d, (uint32_t)E + 1) - 1;
        tr_fix f, g;
        tr_init(&f, ids, T, k, E, start, El, FUSED);
        tr_init(&g, ids, T, k, E, start, El, THREE);
        int bad = (tr_run(&f) != MOE_OK) + (tr_run(&g) != MOE_OK);
        const int32_t *fp = f.perm.data, *gp = g.perm.data, *gi = g.inv.data;
        const int64_t *fo = f.off.data, *go = g.off.data;
        int64_t q = 0;
        for (int e = 0; e < El && !bad; e++) {
            bad += go[e] != q;
            for (int64_t p = fo[e]; p < fo[e + 1]; p++) {
                int64_t u = fp[p], t = u % T, j = u / T, j1 = 0;
                while (ids[t * k + j1] != ids[t * k + j]) j1++;
                if (j1 == j) {
                    bad += gp[q] != u || gi[u] != q;
                    q++;
                } else {
                    bad += gi[u] != C; /* the stale entry finalize would read */
                }
            }
        }
        bad += go[El] != q;
        bad_cases += bad != 0;
        tr_free(&f);
        tr_free(&g);
        free(ids);
    }
    ck_assert_int_eq(bad_cases, 0);
}
END_TEST

/* Seed 001 / section 6 row 1: fused iff gate passes, T <= 256,
 * k in {1,2,4,6,8}, floor(log2(E_local+1))+1 <= 9, radix storage fits. */
START_TEST(tr_selection)
{
    static const struct {
        moe_trtllm_prologue_query q;
        moe_trtllm_fallback_reason r;
        int expert_log, block;
    } cases[] = {
        {{256, 8, 510, 0, 0, 0, 0}, MOE_TRTLLM_FUSED_OK, 9, 256},
        {{257, 8, 8, 0, 0, 0, 0}, MOE_TRTLLM_FALLBACK_TOO_MANY_TOKENS, 4, 0},
        {{0, 1, 1, 0, 0, 0, 0}, MOE_TRTLLM_FUSED_OK, 2, 32},
        {{32, 2, 64, 0, 0, 0, 0}, MOE_TRTLLM_FUSED_OK, 7, 32},
        {{33, 4, 64, 0, 0, 0, 0}, MOE_TRTLLM_FUSED_OK, 7, 64},
        {{128, 6, 255, 0, 0, 0, 0}, MOE_TRTLLM_FUSED_OK, 9, 128},
        {{129, 6, 254, 0, 0, 0, 0}, MOE_TRTLLM_FUSED_OK, 8, 256},
        {{10, 3, 8, 0, 0, 0, 0}, MOE_TRTLLM_FALLBACK_TOPK, 4, 32},
        {{10, 5, 8, 0, 0, 0, 0}, MOE_TRTLLM_FALLBACK_TOPK, 4, 32},
        {{10, 7, 8, 0, 0, 0, 0}, MOE_TRTLLM_FALLBACK_TOPK, 4, 32},
        {{10, 16, 32, 0, 0, 0, 0}, MOE_TRTLLM_FALLBACK_TOPK, 6, 32},
        {{10, 2, 511, 0, 0, 0, 0}, MOE_TRTLLM_FALLBACK_EXPERT_LOG, 10, 32},
        {{10, 2, 8, 1, 0, 0, MOE_TRTLLM_GATE_NOT_WFP4A16}, MOE_TRTLLM_FALLBACK_W4_GATE, 4, 32},
        {{10, 2, 8, 0, 1, 0, MOE_TRTLLM_GATE_NOT_WFP4A16}, MOE_TRTLLM_FUSED_OK, 4, 32},
        {{10, 2, 8, 0, 1, 0, MOE_TRTLLM_GATE_NOT_W4_GROUPWISE}, MOE_TRTLLM_FALLBACK_W4_GATE, 4, 32},
        {{10, 2, 8, 1, 0, 0, MOE_TRTLLM_GATE_NOT_W4_GROUPWISE}, MOE_TRTLLM_FALLBACK_W4_GATE, 4, 32},
        {{10, 2, 8, 0, 0, 1, 0}, MOE_TRTLLM_FALLBACK_SMEM, 4, 32},
        {{300, 3, 600, 1, 0, 1, 0}, MOE_TRTLLM_FALLBACK_W4_GATE, 10, 0}, /* first in seed order */
        {{300, 3, 600, 0, 0, 1, 0}, MOE_TRTLLM_FALLBACK_TOO_MANY_TOKENS, 10, 0},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        moe_trtllm_prologue_choice ch;
        ck_assert_int_eq(moe_maps_trtllm_select(&cases[i].q, &ch), MOE_OK);
        moe_maps_trtllm_variant v = cases[i].r == MOE_TRTLLM_FUSED_OK ? FUSED : THREE;
        if (ch.variant != v || ch.reason != cases[i].r || ch.expert_log != cases[i].expert_log ||
            ch.block_size != cases[i].block) {
            fprintf(stderr, "selection case %zu: variant %d reason %d log %d block %d\n", i,
                    (int)ch.variant, (int)ch.reason, ch.expert_log, ch.block_size);
            bad++;
        }
    }
    ck_assert_int_eq(bad, 0);
}
END_TEST

/* ------------------------------------------------------- argument rules */

static const int32_t err_ids[4] = {0, 1, 2, 3}; /* T=2, k=2, E=4 */

/* One iteration per rule: a valid call with one thing broken. Nothing may
 * be written. */
START_TEST(ck_argument_rules)
{
    ck_fix f;
    ck_init(&f, err_ids, 2, 2, 4, 2, 10, 5);
    moe_tensor extra = {0};
    const moe_tensor *ids = &f.ids, *w = &f.w;
    moe_sort_ck_params *p = &f.p;
    moe_tensor *sti = &f.sti, *sw = &f.sw, *sei = &f.sei, *ntpp = &f.ntpp;
    int32_t *id = f.ids.data;
    moe_status want;
    const char *arg;
    switch (_i) {
    case 0: ids = NULL, want = MOE_ERR_NULL, arg = "topk_ids"; break;
    case 1: f.ids.dtype = MOE_F32, want = MOE_ERR_DTYPE, arg = "topk_ids"; break;
    case 2: f.ids.ndim = 1, want = MOE_ERR_SHAPE, arg = "topk_ids"; break;
    case 3: f.ids.device.kind = MOE_DEVICE_CUDA, want = MOE_ERR_UNSUPPORTED, arg = "topk_ids"; break;
    case 4: w = NULL, want = MOE_ERR_NULL, arg = "topk_weights"; break;
    case 5: f.w.dtype = MOE_BF16, want = MOE_ERR_DTYPE, arg = "topk_weights"; break;
    case 6: f.w.shape[1] = 1, want = MOE_ERR_SHAPE, arg = "topk_weights"; break;
    case 7: p = NULL, want = MOE_ERR_NULL, arg = "params"; break;
    case 8: f.p.num_experts = 0, want = MOE_ERR_INVALID_ARG, arg = "num_experts"; break;
    case 9: f.p.num_experts = 1, want = MOE_ERR_INVALID_ARG, arg = "topk"; break;
    case 10: f.ids.shape[1] = f.w.shape[1] = 0, want = MOE_ERR_INVALID_ARG, arg = "topk"; break;
    case 11: f.p.unit_size = 0, want = MOE_ERR_INVALID_ARG, arg = "unit_size"; break;
    case 12: f.p.unit_size = -3, want = MOE_ERR_INVALID_ARG, arg = "unit_size"; break;
    case 13: f.p.id_mode = (moe_sort_ck_id_mode)7, want = MOE_ERR_INVALID_ARG, arg = "id_mode"; break;
    case 14:
        f.p.empty_experts = (moe_sort_ck_empty_mode)9, want = MOE_ERR_INVALID_ARG;
        arg = "empty_experts";
        break;
    case 15: /* mock ids: 2^24 tokens no longer fit bits 0..23 (never read) */
        f.ids.shape[0] = f.w.shape[0] = 0x1000000, want = MOE_ERR_INVALID_ARG, arg = "topk_ids";
        break;
    case 16: { /* mock ids: topk 256 no longer fits bits 24..31 */
        ck_free(&f);
        int32_t row[256];
        for (int j = 0; j < 256; j++) row[j] = j;
        ck_init(&f, row, 1, 256, 300, 4, 600, 150);
        ids = &f.ids, w = &f.w, p = &f.p, sti = &f.sti, sw = &f.sw, sei = &f.sei, ntpp = &f.ntpp;
        want = MOE_ERR_INVALID_ARG, arg = "topk 256";
        break;
    }
    case 17: id[2] = 4, want = MOE_ERR_INVALID_ARG, arg = "topk_ids[1][0] = 4"; break;
    case 18: id[3] = -1, want = MOE_ERR_INVALID_ARG, arg = "topk_ids[1][1] = -1"; break;
    case 19: id[3] = 2, want = MOE_ERR_INVALID_ARG, arg = "topk_ids: row 1 selects expert 2 twice"; break;
    case 20:
        extra = tensor(MOE_F32, 1, 4, 0), f.p.local_expert_mask = &extra;
        want = MOE_ERR_DTYPE, arg = "local_expert_mask";
        break;
    case 21:
        extra = tensor(MOE_I32, 1, 5, 0), f.p.local_expert_mask = &extra;
        want = MOE_ERR_SHAPE, arg = "local_expert_mask";
        break;
    case 22:
        extra = tensor(MOE_I32, 1, 4, 0), f.p.local_expert_mask = &extra;
        ((int32_t *)extra.data)[1] = 2, want = MOE_ERR_INVALID_ARG, arg = "local_expert_mask[1] = 2";
        break;
    case 23:
        extra = tensor(MOE_I32, 1, 4, 0), f.p.local_expert_mask = &extra;
        extra.device.kind = MOE_DEVICE_CUDA, want = MOE_ERR_UNSUPPORTED, arg = "local_expert_mask";
        break;
    case 24: sti = NULL, want = MOE_ERR_NULL, arg = "sorted_token_ids"; break;
    case 25: f.sti.dtype = MOE_F32, want = MOE_ERR_DTYPE, arg = "sorted_token_ids"; break;
    case 26: f.sti.device.kind = MOE_DEVICE_CUDA, want = MOE_ERR_UNSUPPORTED, arg = "sorted_token_ids"; break;
    case 27: sw = NULL, want = MOE_ERR_NULL, arg = "sorted_weights"; break;
    case 28: f.sw.dtype = MOE_I32, want = MOE_ERR_DTYPE, arg = "sorted_weights"; break;
    case 29: f.sw.shape[0] = 9, want = MOE_ERR_SHAPE, arg = "sorted_weights"; break;
    case 30: sei = NULL, want = MOE_ERR_NULL, arg = "sorted_expert_ids"; break;
    case 31: f.sei.ndim = 2, want = MOE_ERR_SHAPE, arg = "sorted_expert_ids"; break;
    case 32: ntpp = NULL, want = MOE_ERR_NULL, arg = "num_tokens_post_padded"; break;
    case 33: f.ntpp.shape[0] = 1, want = MOE_ERR_SHAPE, arg = "num_tokens_post_padded"; break;
    case 34: /* this input needs 8 entries (2 per expert) */
        f.sti.shape[0] = f.sw.shape[0] = 7, want = MOE_ERR_SHAPE, arg = "sorted_token_ids";
        break;
    case 35: f.sei.shape[0] = 3, want = MOE_ERR_SHAPE, arg = "sorted_expert_ids"; break;
    default: ck_abort_msg("no rule %d", _i); return;
    }
    char what[32];
    snprintf(what, sizeof what, "CK rule %d", _i);
    expect_fail(moe_ref_sort_ck(ids, w, p, sti, sw, sei, ntpp), want, arg, what);
    ck_assert_msg(ck_touched(&f) == 0, "%s: outputs written on error", what);
    /* moe_tensor_free leaves device-tagged memory alone: retag as host */
    f.ids.device.kind = f.sti.device.kind = extra.device.kind = MOE_DEVICE_HOST;
    moe_tensor_free(&extra);
    ck_free(&f);
}
END_TEST
#define N_CK_RULES 36

START_TEST(ck_capacity_rules)
{
    int64_t n;
    static const struct {
        int64_t T;
        int k, E, unit, formula;
        int null_out;
        moe_status want;
        const char *arg;
    } r[] = {
        {-1, 2, 4, 4, 0, 0, MOE_ERR_INVALID_ARG, "num_tokens"},
        {(int64_t)INT32_MAX + 1, 2, 4, 4, 0, 0, MOE_ERR_INVALID_ARG, "num_tokens"},
        {5, 0, 4, 4, 0, 0, MOE_ERR_INVALID_ARG, "topk"},
        {5, 5, 4, 4, 0, 0, MOE_ERR_INVALID_ARG, "topk"},
        {5, 2, 0, 4, 0, 0, MOE_ERR_INVALID_ARG, "num_experts"},
        {5, 2, 4, 0, 0, 0, MOE_ERR_INVALID_ARG, "unit_size"},
        {5, 2, 4, 4, 7, 0, MOE_ERR_INVALID_ARG, "formula"},
        {5, 2, 4, 4, 0, 1, MOE_ERR_NULL, "max_num_tokens_padded"},
        {INT32_MAX, 2, 4, 4, 0, 0, MOE_ERR_INVALID_ARG, "int32"},
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        char what[32];
        snprintf(what, sizeof what, "capacity rule %zu", i);
        expect_fail(moe_sort_ck_capacity(r[i].T, r[i].k, r[i].E, r[i].unit,
                                         (moe_sort_ck_pad_formula)r[i].formula,
                                         r[i].null_out ? NULL : &n, NULL),
                    r[i].want, r[i].arg, what);
    }
}
END_TEST

START_TEST(tr_argument_rules)
{
    tr_fix f;
    tr_init(&f, err_ids, 2, 2, 4, 0, 4, FUSED);
    const moe_tensor *ids = &f.ids;
    moe_maps_trtllm_params *p = &f.p;
    moe_tensor *perm = &f.perm, *inv = &f.inv, *off = &f.off, *pts = &f.pts;
    moe_status want;
    const char *arg;
    switch (_i) {
    case 0: ids = NULL, want = MOE_ERR_NULL, arg = "token_selected_experts"; break;
    case 1: f.ids.dtype = MOE_I64, want = MOE_ERR_DTYPE, arg = "token_selected_experts"; break;
    case 2: f.ids.ndim = 3, want = MOE_ERR_SHAPE, arg = "token_selected_experts"; break;
    case 3: f.ids.device.kind = MOE_DEVICE_CUDA, want = MOE_ERR_UNSUPPORTED, arg = "token_selected_experts"; break;
    case 4: p = NULL, want = MOE_ERR_NULL, arg = "params"; break;
    case 5: f.p.variant = (moe_maps_trtllm_variant)3, want = MOE_ERR_INVALID_ARG, arg = "variant"; break;
    case 6: f.p.num_experts = 0, want = MOE_ERR_INVALID_ARG, arg = "num_experts"; break;
    case 7: f.p.num_local_experts = 0, want = MOE_ERR_INVALID_ARG, arg = "num_local_experts"; break;
    case 8: f.p.start_expert = -1, want = MOE_ERR_INVALID_ARG, arg = "start_expert"; break;
    case 9: f.p.start_expert = 2, want = MOE_ERR_INVALID_ARG, arg = "start_expert"; break;
    case 10: f.ids.shape[1] = 0, want = MOE_ERR_INVALID_ARG, arg = "topk"; break;
    case 11:
        f.p.num_experts = f.p.num_local_experts = 1, want = MOE_ERR_INVALID_ARG, arg = "topk";
        break;
    case 12: /* 2^30 x 2 rows overflow int32 row indices (never read) */
        f.ids.shape[0] = (int64_t)1 << 30, want = MOE_ERR_INVALID_ARG;
        arg = "token_selected_experts";
        break;
    case 13: perm = NULL, want = MOE_ERR_NULL, arg = "permuted_row_to_unpermuted_row"; break;
    case 14: f.perm.dtype = MOE_I64, want = MOE_ERR_DTYPE, arg = "permuted_row_to_unpermuted_row"; break;
    case 15: f.perm.shape[0] = 3, want = MOE_ERR_SHAPE, arg = "permuted_row_to_unpermuted_row"; break;
    case 16:
        f.perm.device.kind = MOE_DEVICE_CUDA, want = MOE_ERR_UNSUPPORTED;
        arg = "permuted_row_to_unpermuted_row";
        break;
    case 17: inv = NULL, want = MOE_ERR_NULL, arg = "unpermuted_row_to_permuted_row"; break;
    case 18: f.inv.shape[0] = 3, want = MOE_ERR_SHAPE, arg = "unpermuted_row_to_permuted_row"; break;
    case 19: off = NULL, want = MOE_ERR_NULL, arg = "expert_first_token_offset"; break;
    case 20: f.off.dtype = MOE_I32, want = MOE_ERR_DTYPE, arg = "expert_first_token_offset"; break;
    case 21: f.off.shape[0] = 4, want = MOE_ERR_SHAPE, arg = "expert_first_token_offset"; break;
    case 22: f.pts.dtype = MOE_F32, want = MOE_ERR_DTYPE, arg = "permuted_token_selected_experts"; break;
    case 23: f.pts.shape[0] = 3, want = MOE_ERR_SHAPE, arg = "permuted_token_selected_experts"; break;
    default: ck_abort_msg("no rule %d", _i); return;
    }
    char what[32];
    snprintf(what, sizeof what, "TRT-LLM rule %d", _i);
    expect_fail(moe_ref_maps_trtllm(ids, p, perm, inv, off, pts), want, arg, what);
    ck_assert_msg(tr_touched(&f) == 0, "%s: outputs written on error", what);
    f.ids.device.kind = f.perm.device.kind = MOE_DEVICE_HOST; /* so tr_free frees them */
    tr_free(&f);
}
END_TEST
#define N_TR_RULES 24

START_TEST(tr_selection_rules)
{
    moe_trtllm_prologue_query q = {10, 2, 8, 0, 0, 0, 0}, bad;
    moe_trtllm_prologue_choice ch;
    expect_fail(moe_maps_trtllm_select(NULL, &ch), MOE_ERR_NULL, "query", "NULL query");
    expect_fail(moe_maps_trtllm_select(&q, NULL), MOE_ERR_NULL, "choice", "NULL choice");
    bad = q, bad.num_tokens = -1;
    expect_fail(moe_maps_trtllm_select(&bad, &ch), MOE_ERR_INVALID_ARG, "num_tokens", "T < 0");
    bad = q, bad.experts_per_token = 0;
    expect_fail(moe_maps_trtllm_select(&bad, &ch), MOE_ERR_INVALID_ARG, "experts_per_token", "k = 0");
    bad = q, bad.num_experts_per_node = 0;
    expect_fail(moe_maps_trtllm_select(&bad, &ch), MOE_ERR_INVALID_ARG, "num_experts_per_node",
                "E_local = 0");
    bad = q, bad.gate = (moe_trtllm_prologue_gate)5;
    expect_fail(moe_maps_trtllm_select(&bad, &ch), MOE_ERR_INVALID_ARG, "gate", "gate");
}
END_TEST

static Suite *sort_suite(void)
{
    Suite *s = suite_create("sort");
    TCase *ck = tcase_create("ck");
    tcase_set_timeout(ck, 60);
    tcase_add_loop_test(ck, ck_readme_example, 0, N_README);
    tcase_add_test(ck, ck_readme_weights);
    tcase_add_test(ck, ck_capacity_formulas);
    tcase_add_test(ck, ck_empty_problem);
    tcase_add_test(ck, ck_random_properties);
    tcase_add_loop_test(ck, ck_argument_rules, 0, N_CK_RULES);
    tcase_add_test(ck, ck_capacity_rules);
    suite_add_tcase(s, ck);
    TCase *tr = tcase_create("trtllm");
    tcase_set_timeout(tr, 60);
    tcase_add_loop_test(tr, tr_hand_examples, 0, N_TR);
    tcase_add_test(tr, tr_empty_problem);
    tcase_add_test(tr, tr_random_properties);
    tcase_add_test(tr, tr_random_duplicates);
    tcase_add_test(tr, tr_selection);
    tcase_add_loop_test(tr, tr_argument_rules, 0, N_TR_RULES);
    tcase_add_test(tr, tr_selection_rules);
    suite_add_tcase(s, tr);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(sort_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
