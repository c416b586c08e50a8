/* cuda-conform index stages against the reference, bit for bit: vLLM
 * align_block_size (and its atomic variant, compared per expert as sets),
 * align_batched, CK moe-sorting and TensorRT-LLM's two map builders. Seeded
 * routings at small and large shapes (up to 320000 pairs: the multi-block
 * paths), edge cases (no tokens, one token, every pair to one expert,
 * expert maps and masks, non-local and duplicated ids, NaN/Inf weights),
 * and bad arguments (same status and message as the reference, host
 * tensors refused). Outputs on both sides start as the same canary, so
 * entries a stage must leave untouched are compared too. Exits 77 (skip)
 * without a CUDA device. */
#include <check.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/ops.h"
#include "moe/rng.h"
#include "optimized/cuda/cuda.h"
#include "gpu_test_util.h"

#define CANARY 0x5EEDF00Du

/* small mode: token counts over 8192 become 9000 (still > 256 chunks of
 * 256 pairs at topk 8: the chunk-scan loop), those over 1000 become 600
 * (several blocks of the rank kernels) */
static int64_t small_tokens(int64_t t) { return gpu_small() && t > 8192 ? 9000 : gpu_small() && t > 1000 ? 600 : t; }

static uint64_t g_stream;

static void fill_canary(moe_tensor *t)
{
    uint32_t *w = (uint32_t *)t->data;
    for (size_t i = 0; i < t->nbytes / 4; i++) w[i] = CANARY;
}

/* ---- align_block_size ---------------------------------------------------- */

typedef struct {
    int64_t M;
    int topk, E, bs;
    int map;     /* 0 none, 1 KEEP_NONLOCAL, 2 IGNORE_INVALID */
    int pad;     /* pad_sorted_ids */
    int pattern; /* 0 random distinct, 1 all to expert 3, 2 random with repeats */
} align_case;

static const align_case align_cases[] = {
    {0, 8, 16, 16, 0, 0, 0},      {1, 1, 8, 16, 0, 0, 0},      {1, 8, 256, 64, 0, 1, 0},
    {4, 2, 8, 4, 0, 1, 2},        {3, 8, 256, 16, 1, 0, 0},    {33, 8, 64, 16, 2, 0, 0},
    {200, 4, 64, 1, 0, 0, 2},     {1000, 6, 60, 7, 1, 1, 2},   {4096, 8, 128, 64, 0, 0, 0},
    {4096, 8, 128, 64, 1, 1, 0},  {4096, 8, 128, 64, 2, 0, 0}, {4096, 8, 128, 16, 0, 0, 1},
    {16384, 8, 256, 64, 0, 0, 0}, {16384, 8, 256, 128, 2, 1, 0}, {40000, 8, 256, 16, 0, 0, 0},
    {5000, 8, 1024, 32, 1, 0, 0}, {2048, 4, 3000, 8, 2, 0, 0},
};
enum { N_ALIGN = sizeof align_cases / sizeof align_cases[0] };

typedef struct {
    moe_tensor ids, map, sorted, eids, ntpp;
    moe_align_params p;
} align_in;

static void align_make(const align_case *c, align_in *a)
{
    memset(a, 0, sizeof *a);
    a->ids = gpu_hnew(MOE_I32, 2, c->M, c->topk);
    int32_t *ids = (int32_t *)a->ids.data;
    int64_t n = c->M * c->topk;
    if (c->pattern == 1)
        for (int64_t i = 0; i < n; i++) ids[i] = 3;
    else if (n)
        ck_assert_int_eq(moe_rng_topk_ids(ids, c->M, c->topk, c->E, 11, g_stream + (uint64_t)c->E, 0, c->pattern == 0),
                         MOE_OK);
    a->p.block_size = c->bs;
    a->p.num_experts = c->E;
    a->p.pad_sorted_ids = c->pad;
    if (c->map) {
        /* experts [E/4, E/2) are local, ids 0.. */
        a->map = gpu_hnew(MOE_I32, 1, c->E, 0);
        int32_t *m = (int32_t *)a->map.data;
        for (int e = 0; e < c->E; e++) m[e] = e >= c->E / 4 && e < c->E / 2 ? e - c->E / 4 : -1;
        a->p.map_mode = c->map == 1 ? MOE_ALIGN_MAP_KEEP_NONLOCAL : MOE_ALIGN_MAP_IGNORE_INVALID;
    }
    int64_t len, blocks;
    ck_assert_int_eq(moe_align_capacity(n, &a->p, &len, &blocks), MOE_OK);
    a->sorted = gpu_hnew(MOE_I32, 1, len + 5, 0); /* a little longer than needed: all of it is written */
    a->eids = gpu_hnew(MOE_I32, 1, blocks + 3, 0);
    a->ntpp = gpu_hnew(MOE_I32, 1, 1, 0);
    fill_canary(&a->sorted), fill_canary(&a->eids), fill_canary(&a->ntpp);
}

static void align_free(align_in *a)
{
    moe_tensor_free(&a->ids), moe_tensor_free(&a->map), moe_tensor_free(&a->sorted);
    moe_tensor_free(&a->eids), moe_tensor_free(&a->ntpp);
}

/* Sorts each expert's filled range of sorted ids (the atomic variant's
 * order inside an expert is arrival order). Ranges from the reference's
 * own rule: padded segments of non-empty buckets in bucket order. */
static int cmp_i32(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

static void canonical_segments(const align_in *a, int32_t *sorted)
{
    int E = a->p.num_experts;
    const int32_t *ids = (const int32_t *)a->ids.data, *m = a->map.data ? (const int32_t *)a->map.data : NULL;
    int ignore = m && a->p.map_mode == MOE_ALIGN_MAP_IGNORE_INVALID;
    int64_t n = a->ids.shape[0] * a->ids.shape[1], *cnt = (int64_t *)calloc((size_t)E, sizeof(int64_t)), pos = 0;
    for (int64_t i = 0; i < n; i++) {
        int b = ignore ? m[ids[i]] : ids[i];
        if (b >= 0) cnt[b]++;
    }
    for (int b = 0; b < E; b++) {
        qsort(sorted + pos, (size_t)cnt[b], sizeof(int32_t), cmp_i32);
        pos += (cnt[b] + a->p.block_size - 1) / a->p.block_size * a->p.block_size;
    }
    free(cnt);
}

START_TEST(align_block_size_matches)
{
    align_case cs = align_cases[_i];
    cs.M = small_tokens(cs.M);
    const align_case *c = &cs;
    align_in a;
    align_make(c, &a);
    moe_tensor d_ids = gpu_to_dev(&a.ids), d_map = moe_tensor(), d_s = gpu_to_dev(&a.sorted), d_e = gpu_to_dev(&a.eids),
               d_n = gpu_to_dev(&a.ntpp);
    moe_align_params dp = a.p;
    if (c->map) d_map = gpu_to_dev(&a.map), dp.expert_map = &d_map, a.p.expert_map = &a.map;
    ck_assert_msg(moe_ops_ref.align_block_size(&a.ids, &a.p, &a.sorted, &a.eids, &a.ntpp) == MOE_OK, "%s",
                  moe_last_error());
    char what[160];
    for (int atomic = 0; atomic < 2; atomic++) {
        snprintf(what, sizeof what, "align%s case %d (M=%lld topk=%d E=%d bs=%d map=%d pad=%d)",
                 atomic ? "_atomic" : "", _i, (long long)c->M, c->topk, c->E, c->bs, c->map, c->pad);
        moe_status st = atomic ? moe_cuda_align_block_size_atomic(&d_ids, &dp, &d_s, &d_e, &d_n)
                               : moe_cuda_align_block_size(&d_ids, &dp, &d_s, &d_e, &d_n);
        ck_assert_msg(st == MOE_OK, "%s: %s", what, moe_last_error());
        ck_assert_int_eq(moe_cuda_synchronize(), MOE_OK);
        gpu_expect_same(what, &a.eids, &d_e, 0);
        gpu_expect_same(what, &a.ntpp, &d_n, 0);
        if (!atomic) {
            gpu_expect_same(what, &a.sorted, &d_s, 0);
        } else {
            moe_tensor got = gpu_to_host(&d_s);
            moe_tensor want = gpu_to_host(&d_s); /* a host copy with the reference's bytes */
            memcpy(want.data, a.sorted.data, a.sorted.nbytes);
            canonical_segments(&a, (int32_t *)got.data);
            canonical_segments(&a, (int32_t *)want.data);
            const int32_t *x = (const int32_t *)want.data, *y = (const int32_t *)got.data;
            for (int64_t k = 0; k < want.shape[0]; k++)
                ck_assert_msg(x[k] == y[k], "%s: sorted (per-expert sets) differ at %lld: reference %d, gpu %d", what,
                              (long long)k, x[k], y[k]);
            moe_tensor_free(&got), moe_tensor_free(&want);
        }
    }
    moe_cuda_free(&d_ids), moe_cuda_free(&d_map), moe_cuda_free(&d_s), moe_cuda_free(&d_e), moe_cuda_free(&d_n);
    align_free(&a);
}
END_TEST

START_TEST(align_block_size_errors)
{
    const align_case c = {64, 4, 32, 16, 1, 0, 0};
    char ref_msg[512];
    for (int v = 0; v < 6; v++) {
        align_in a;
        align_make(&c, &a);
        a.p.expert_map = &a.map;
        moe_align_params dp = a.p;
        moe_tensor d_ids, d_map, d_s, d_e, d_n, hs = a.sorted;
        const char *what = "?";
        switch (v) {
        case 0: ((int32_t *)a.ids.data)[77] = 32, what = "id out of range"; break;
        case 1: ((int32_t *)a.ids.data)[5] = -1, what = "id -1"; break;
        case 2: ((int32_t *)a.map.data)[3] = 40, what = "bad expert_map entry"; break;
        case 3: a.p.block_size = 0, dp.block_size = 0, what = "block_size 0"; break;
        case 4: hs.shape[0] = 10, what = "sorted_token_ids too short"; break;
        case 5: a.p.map_mode = (moe_align_map_mode)7, dp.map_mode = a.p.map_mode, what = "bad map_mode"; break;
        }
        d_ids = gpu_to_dev(&a.ids), d_map = gpu_to_dev(&a.map), d_e = gpu_to_dev(&a.eids), d_n = gpu_to_dev(&a.ntpp);
        d_s = gpu_to_dev(&a.sorted);
        moe_tensor d_s_view = d_s;
        d_s_view.shape[0] = hs.shape[0];
        dp.expert_map = &d_map;
        moe_status rs = moe_ops_ref.align_block_size(&a.ids, &a.p, &hs, &a.eids, &a.ntpp);
        snprintf(ref_msg, sizeof ref_msg, "%s", moe_last_error());
        for (int atomic = 0; atomic < 2; atomic++) {
            moe_status gs = atomic ? moe_cuda_align_block_size_atomic(&d_ids, &dp, &d_s_view, &d_e, &d_n)
                                   : moe_cuda_align_block_size(&d_ids, &dp, &d_s_view, &d_e, &d_n);
            gpu_expect_same_error(what, rs, ref_msg, gs);
        }
        moe_cuda_free(&d_ids), moe_cuda_free(&d_map), moe_cuda_free(&d_s), moe_cuda_free(&d_e), moe_cuda_free(&d_n);
        align_free(&a);
    }
    /* host memory where device memory is required */
    align_in a;
    align_make(&c, &a);
    moe_tensor d_s = gpu_to_dev(&a.sorted), d_e = gpu_to_dev(&a.eids), d_n = gpu_to_dev(&a.ntpp);
    ck_assert_int_eq(moe_cuda_align_block_size(&a.ids, &a.p, &d_s, &d_e, &d_n), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "topk_ids"));
    moe_tensor d_ids = gpu_to_dev(&a.ids);
    ck_assert_int_eq(moe_cuda_align_block_size_atomic(&d_ids, &a.p, &d_s, &a.eids, &d_n), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "expert_ids"));
    a.p.expert_map = &a.map;
    ck_assert_int_eq(moe_cuda_align_block_size(&d_ids, &a.p, &d_s, &d_e, &d_n), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "expert_map"));
    moe_status rs = moe_ops_ref.align_block_size(&a.ids, NULL, &a.sorted, &a.eids, &a.ntpp);
    snprintf(ref_msg, sizeof ref_msg, "%s", moe_last_error());
    gpu_expect_same_error("params NULL", rs, ref_msg, moe_cuda_align_block_size(&d_ids, NULL, &d_s, &d_e, &d_n));
    moe_cuda_free(&d_ids), moe_cuda_free(&d_s), moe_cuda_free(&d_e), moe_cuda_free(&d_n);
    align_free(&a);
}
END_TEST

/* ---- align_batched ------------------------------------------------------- */

typedef struct {
    int B, max_tokens, bs, pattern; /* 0 random, 1 all zero, 2 all full */
} batched_case;

static const batched_case batched_cases[] = {
    {0, 4, 4, 0},     {1, 1, 1, 2},     {1, 17, 16, 0},    {8, 33, 16, 0},      {8, 64, 64, 1},
    {8, 64, 64, 2},   {32, 100, 7, 0},  {256, 4096, 64, 0}, {2000, 300, 16, 0}, {64, 16384, 128, 2},
};
enum { N_BATCHED = sizeof batched_cases / sizeof batched_cases[0] };

START_TEST(align_batched_matches)
{
    batched_case cs = batched_cases[_i];
    cs.max_tokens = (int)gpu_small_cap(cs.max_tokens, 1024);
    const batched_case *c = &cs;
    moe_tensor n = gpu_hnew(MOE_I32, 1, c->B, 0);
    int32_t *nv = (int32_t *)n.data;
    for (int b = 0; b < c->B; b++) {
        uint32_t r = moe_rng_u32(21, g_stream + 1, (uint64_t)_i << 32 | (uint32_t)b);
        nv[b] = c->pattern == 1 ? 0 : c->pattern == 2 ? c->max_tokens : (int32_t)(r % (uint32_t)(c->max_tokens + 1));
        if (c->pattern == 0 && b % 5 == 1) nv[b] = 0; /* empty batches among the others */
    }
    int64_t per = (c->max_tokens + c->bs - 1) / c->bs * c->bs, len = (int64_t)c->B * per;
    moe_tensor s = gpu_hnew(MOE_I32, 1, len + 3, 0), e = gpu_hnew(MOE_I32, 1, len / c->bs + 2, 0),
               p = gpu_hnew(MOE_I32, 1, 1, 0);
    fill_canary(&s), fill_canary(&e), fill_canary(&p);
    moe_tensor dn = gpu_to_dev(&n), ds = gpu_to_dev(&s), de = gpu_to_dev(&e), dp = gpu_to_dev(&p);
    ck_assert_msg(moe_ops_ref.align_batched(&n, c->max_tokens, c->bs, &s, &e, &p) == MOE_OK, "%s", moe_last_error());
    ck_assert_msg(moe_cuda_align_batched(&dn, c->max_tokens, c->bs, &ds, &de, &dp) == MOE_OK, "%s", moe_last_error());
    char what[128];
    snprintf(what, sizeof what, "align_batched case %d (B=%d max=%d bs=%d)", _i, c->B, c->max_tokens, c->bs);
    gpu_expect_same(what, &s, &ds, 0);
    gpu_expect_same(what, &e, &de, 0);
    gpu_expect_same(what, &p, &dp, 0);
    moe_cuda_free(&dn), moe_cuda_free(&ds), moe_cuda_free(&de), moe_cuda_free(&dp);
    moe_tensor_free(&n), moe_tensor_free(&s), moe_tensor_free(&e), moe_tensor_free(&p);
}
END_TEST

START_TEST(align_batched_errors)
{
    moe_tensor n = gpu_hnew(MOE_I32, 1, 4, 0);
    int32_t nv[4] = {1, 9, 2, 0};
    memcpy(n.data, nv, sizeof nv);
    moe_tensor s = gpu_hnew(MOE_I32, 1, 32, 0), e = gpu_hnew(MOE_I32, 1, 8, 0), p = gpu_hnew(MOE_I32, 1, 1, 0);
    moe_tensor dn = gpu_to_dev(&n), ds = gpu_to_dev(&s), de = gpu_to_dev(&e), dp = gpu_to_dev(&p);
    char ref_msg[512];
    struct {
        int max_tokens, bs;
        const char *what;
    } v[] = {{8, 4, "count past max_tokens"}, {0, 4, "max_tokens 0"}, {9, -1, "block_size -1"}, {9, 16, "too short"}};
    for (int i = 0; i < 4; i++) {
        moe_status rs = moe_ops_ref.align_batched(&n, v[i].max_tokens, v[i].bs, &s, &e, &p);
        snprintf(ref_msg, sizeof ref_msg, "%s", moe_last_error());
        gpu_expect_same_error(v[i].what, rs, ref_msg, moe_cuda_align_batched(&dn, v[i].max_tokens, v[i].bs, &ds, &de, &dp));
    }
    ck_assert_int_eq(moe_cuda_align_batched(&n, 9, 4, &ds, &de, &dp), MOE_ERR_INVALID_ARG);
    ck_assert_int_eq(moe_cuda_align_batched(&dn, 9, 4, &ds, &de, &p), MOE_ERR_INVALID_ARG);
    moe_cuda_free(&dn), moe_cuda_free(&ds), moe_cuda_free(&de), moe_cuda_free(&dp);
    moe_tensor_free(&n), moe_tensor_free(&s), moe_tensor_free(&e), moe_tensor_free(&p);
}
END_TEST

/* ---- sort_ck ------------------------------------------------------------- */

typedef struct {
    int64_t T;
    int topk, E, unit;
    int plain, one_tile;
    int mask; /* 0 none, 1 every third expert masked, 2 all masked, 3 one local expert */
} sort_case;

static const sort_case sort_cases[] = {
    {0, 4, 16, 16, 0, 0, 0},      {0, 4, 16, 16, 1, 1, 1},      {1, 1, 8, 16, 0, 0, 0},
    {1, 8, 256, 32, 1, 1, 0},     {7, 2, 8, 4, 0, 1, 1},        {300, 8, 64, 32, 0, 0, 1},
    {300, 8, 64, 1, 1, 0, 3},     {1000, 6, 60, 7, 0, 1, 0},    {4096, 8, 128, 64, 0, 0, 0},
    {4096, 8, 128, 64, 1, 1, 1},  {4096, 8, 128, 16, 0, 0, 2},  {16384, 8, 256, 64, 0, 0, 0},
    {16384, 8, 256, 128, 1, 0, 1}, {40000, 8, 256, 32, 0, 1, 0}, {3000, 16, 1024, 32, 0, 0, 1},
};
enum { N_SORT = sizeof sort_cases / sizeof sort_cases[0] };

typedef struct {
    moe_tensor ids, w, mask, s, sw, se, np;
    moe_sort_ck_params p;
} sort_in;

static void sort_make(const sort_case *c, int idx, sort_in *a)
{
    memset(a, 0, sizeof *a);
    a->ids = gpu_hnew(MOE_I32, 2, c->T, c->topk);
    a->w = gpu_hnew(MOE_F32, 2, c->T, c->topk);
    int64_t n = c->T * c->topk;
    if (n) {
        ck_assert_int_eq(moe_rng_topk_ids((int32_t *)a->ids.data, c->T, c->topk, c->E, 31, g_stream + 2 + (uint64_t)idx,
                                          0, 1),
                         MOE_OK);
        ck_assert_int_eq(moe_tensor_fill_normal(&a->w, 32, g_stream + 2 + (uint64_t)idx, 0.0f, 1.0f), MOE_OK);
        uint32_t *wb = (uint32_t *)a->w.data; /* non-finite weights travel as bits */
        wb[0] = 0x7FC00001u;
        if (n > 3) wb[n / 2] = 0xFF800000u, wb[n - 1] = 0xFFC12345u;
    }
    a->p.num_experts = c->E;
    a->p.unit_size = c->unit;
    a->p.id_mode = c->plain ? MOE_SORT_CK_PLAIN_ID : MOE_SORT_CK_MOCK_ID;
    a->p.empty_experts = c->one_tile ? MOE_SORT_CK_ONE_TILE_PER_EMPTY : MOE_SORT_CK_SKIP_EMPTY;
    if (c->mask) {
        a->mask = gpu_hnew(MOE_I32, 1, c->E, 0);
        int32_t *m = (int32_t *)a->mask.data;
        for (int e = 0; e < c->E; e++) m[e] = c->mask == 1 ? e % 3 != 1 : c->mask == 2 ? 0 : e == c->E / 2;
    }
    int64_t len, tiles;
    ck_assert_int_eq(moe_sort_ck_capacity(c->T, c->topk, c->E, c->unit, MOE_SORT_CK_PAD_UPDATED, &len, &tiles), MOE_OK);
    len += (int64_t)c->E * c->unit; /* room for one-tile mode at T = 0 too */
    a->s = gpu_hnew(MOE_I32, 1, len, 0);
    a->sw = gpu_hnew(MOE_F32, 1, len, 0);
    a->se = gpu_hnew(MOE_I32, 1, (len + c->unit - 1) / c->unit, 0);
    a->np = gpu_hnew(MOE_I32, 1, 2, 0);
    fill_canary(&a->s), fill_canary(&a->sw), fill_canary(&a->se), fill_canary(&a->np);
}

static void sort_free(sort_in *a)
{
    moe_tensor_free(&a->ids), moe_tensor_free(&a->w), moe_tensor_free(&a->mask), moe_tensor_free(&a->s);
    moe_tensor_free(&a->sw), moe_tensor_free(&a->se), moe_tensor_free(&a->np);
}

typedef struct {
    moe_tensor ids, w, mask, s, sw, se, np;
    moe_sort_ck_params p;
} sort_dev;

static void sort_to_dev(const sort_in *a, sort_dev *d)
{
    memset(d, 0, sizeof *d);
    d->ids = gpu_to_dev(&a->ids), d->w = gpu_to_dev(&a->w), d->s = gpu_to_dev(&a->s), d->sw = gpu_to_dev(&a->sw);
    d->se = gpu_to_dev(&a->se), d->np = gpu_to_dev(&a->np);
    d->p = a->p;
    if (a->mask.data) d->mask = gpu_to_dev(&a->mask), d->p.local_expert_mask = &d->mask;
}

static void sort_dev_free(sort_dev *d)
{
    moe_cuda_free(&d->ids), moe_cuda_free(&d->w), moe_cuda_free(&d->mask), moe_cuda_free(&d->s);
    moe_cuda_free(&d->sw), moe_cuda_free(&d->se), moe_cuda_free(&d->np);
}

START_TEST(sort_ck_matches)
{
    sort_case cs = sort_cases[_i];
    cs.T = small_tokens(cs.T);
    const sort_case *c = &cs;
    sort_in a;
    sort_make(c, _i, &a);
    sort_dev d;
    sort_to_dev(&a, &d);
    if (a.mask.data) a.p.local_expert_mask = &a.mask;
    ck_assert_msg(moe_ops_ref.sort_ck(&a.ids, &a.w, &a.p, &a.s, &a.sw, &a.se, &a.np) == MOE_OK, "%s", moe_last_error());
    ck_assert_msg(moe_cuda_sort_ck(&d.ids, &d.w, &d.p, &d.s, &d.sw, &d.se, &d.np) == MOE_OK, "%s", moe_last_error());
    char what[160];
    snprintf(what, sizeof what, "sort_ck case %d (T=%lld topk=%d E=%d unit=%d plain=%d one_tile=%d mask=%d)", _i,
             (long long)c->T, c->topk, c->E, c->unit, c->plain, c->one_tile, c->mask);
    gpu_expect_same(what, &a.s, &d.s, 0);
    gpu_expect_same(what, &a.sw, &d.sw, 0);
    gpu_expect_same(what, &a.se, &d.se, 0);
    gpu_expect_same(what, &a.np, &d.np, 0);
    sort_dev_free(&d);
    sort_free(&a);
}
END_TEST

START_TEST(sort_ck_errors)
{
    const sort_case c = {5000, 8, 64, 32, 0, 0, 1};
    char ref_msg[512];
    for (int v = 0; v < 6; v++) {
        sort_in a;
        sort_make(&c, 99, &a);
        const char *what = "?";
        int32_t *ids = (int32_t *)a.ids.data;
        int64_t keep_len = a.s.shape[0];
        switch (v) {
        case 0: ids[30001] = 64, what = "id out of range (found while counting)"; break;
        case 1: ids[20000 + 3] = ids[20000 + 6], what = "duplicate id in a row"; break;
        case 2: ids[4] = -1, ids[39000] = ids[39001], what = "bad id before a duplicate"; break;
        case 3: ((int32_t *)a.mask.data)[9] = 2, what = "mask entry 2"; break;
        case 4: keep_len = 5000, what = "sorted_token_ids short for this input"; break;
        case 5: a.p.unit_size = 0, what = "unit_size 0"; break;
        }
        /* same-length views for the short-output case */
        moe_tensor hs = a.s, hsw = a.sw;
        hs.shape[0] = hsw.shape[0] = keep_len;
        sort_dev d;
        sort_to_dev(&a, &d);
        d.p.unit_size = a.p.unit_size;
        moe_tensor ds = d.s, dsw = d.sw;
        ds.shape[0] = dsw.shape[0] = keep_len;
        a.p.local_expert_mask = &a.mask;
        moe_status rs = moe_ops_ref.sort_ck(&a.ids, &a.w, &a.p, &hs, &hsw, &a.se, &a.np);
        snprintf(ref_msg, sizeof ref_msg, "%s", moe_last_error());
        moe_status gs = moe_cuda_sort_ck(&d.ids, &d.w, &d.p, &ds, &dsw, &d.se, &d.np);
        gpu_expect_same_error(what, rs, ref_msg, gs);
        /* nothing written on error: the canaries are intact */
        gpu_expect_same(what, &a.s, &d.s, 0);
        gpu_expect_same(what, &a.sw, &d.sw, 0);
        gpu_expect_same(what, &a.se, &d.se, 0);
        gpu_expect_same(what, &a.np, &d.np, 0);
        sort_dev_free(&d);
        sort_free(&a);
    }
    sort_in a;
    sort_make(&c, 98, &a);
    sort_dev d;
    sort_to_dev(&a, &d);
    ck_assert_int_eq(moe_cuda_sort_ck(&a.ids, &d.w, &d.p, &d.s, &d.sw, &d.se, &d.np), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "topk_ids"));
    d.p.local_expert_mask = &a.mask;
    ck_assert_int_eq(moe_cuda_sort_ck(&d.ids, &d.w, &d.p, &d.s, &d.sw, &d.se, &d.np), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "local_expert_mask"));
    d.p.local_expert_mask = &d.mask;
    ck_assert_int_eq(moe_cuda_sort_ck(&d.ids, &d.w, &d.p, &d.s, &d.sw, &d.se, &a.np), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "num_tokens_post_padded"));
    moe_status rs = moe_ops_ref.sort_ck(&a.ids, &a.w, NULL, &a.s, &a.sw, &a.se, &a.np);
    snprintf(ref_msg, sizeof ref_msg, "%s", moe_last_error());
    gpu_expect_same_error("params NULL", rs, ref_msg, moe_cuda_sort_ck(&d.ids, &d.w, NULL, &d.s, &d.sw, &d.se, &d.np));
    sort_dev_free(&d);
    sort_free(&a);
}
END_TEST

/* ---- maps_trtllm --------------------------------------------------------- */

typedef struct {
    int64_t T;
    int k, E, start, El;
    int variant;
    int dups;  /* 1: rows may repeat an expert */
    int neg;   /* percent of -1 ids (plus a few ids >= E) */
    int ptse;  /* pass permuted_token_selected_experts */
} maps_case;

static const maps_case maps_cases[] = {
    {0, 4, 16, 0, 16, 0, 0, 0, 1},       {0, 4, 16, 0, 16, 1, 0, 0, 1},       {1, 1, 8, 0, 8, 0, 0, 0, 0},
    {1, 8, 256, 64, 64, 1, 0, 0, 1},     {37, 6, 64, 16, 16, 0, 1, 5, 1},     {37, 6, 64, 16, 16, 1, 1, 5, 1},
    {256, 8, 256, 64, 64, 0, 0, 3, 0},   {256, 8, 256, 0, 256, 1, 1, 0, 1},   {200, 2, 2048, 1000, 1023, 0, 0, 0, 0},
    {200, 2, 2048, 1000, 1024, 0, 1, 2, 0}, {4096, 8, 128, 0, 128, 0, 0, 0, 0}, {4096, 8, 128, 32, 32, 1, 1, 2, 1},
    {16384, 8, 256, 0, 256, 1, 0, 0, 1}, {16384, 8, 256, 128, 128, 0, 0, 1, 0}, {40000, 8, 256, 0, 64, 1, 1, 1, 1},
    {40000, 8, 256, 100, 156, 0, 1, 0, 0},
};
enum { N_MAPS = sizeof maps_cases / sizeof maps_cases[0] };

START_TEST(maps_trtllm_matches)
{
    maps_case cs = maps_cases[_i];
    cs.T = small_tokens(cs.T);
    const maps_case *c = &cs;
    int64_t n = c->T * c->k;
    moe_tensor ids = gpu_hnew(MOE_I32, 2, c->T, c->k);
    int32_t *iv = (int32_t *)ids.data;
    if (n) {
        ck_assert_int_eq(moe_rng_topk_ids(iv, c->T, c->k, c->E, 41, g_stream + 3 + (uint64_t)_i, (unsigned)c->neg,
                                          !c->dups),
                         MOE_OK);
        if (c->neg)
            for (int64_t i = 13; i < n; i += 997) iv[i] = c->E + (int32_t)(i % 7); /* other ranks' ids past E */
    }
    moe_maps_trtllm_params p = {(moe_maps_trtllm_variant)c->variant, c->E, c->start, c->El};
    moe_tensor perm = gpu_hnew(MOE_I32, 1, n, 0), inv = gpu_hnew(MOE_I32, 1, n, 0), off = gpu_hnew(MOE_I64, 1, c->El + 1, 0),
               ptse = gpu_hnew(MOE_I32, 1, n, 0);
    fill_canary(&perm), fill_canary(&inv), fill_canary(&off), fill_canary(&ptse);
    moe_tensor d_ids = gpu_to_dev(&ids), d_perm = gpu_to_dev(&perm), d_inv = gpu_to_dev(&inv), d_off = gpu_to_dev(&off),
               d_ptse = gpu_to_dev(&ptse);
    ck_assert_msg(moe_ops_ref.maps_trtllm(&ids, &p, &perm, &inv, &off, c->ptse ? &ptse : NULL) == MOE_OK, "%s",
                  moe_last_error());
    ck_assert_msg(moe_cuda_maps_trtllm(&d_ids, &p, &d_perm, &d_inv, &d_off, c->ptse ? &d_ptse : NULL) == MOE_OK, "%s",
                  moe_last_error());
    char what[160];
    snprintf(what, sizeof what, "maps_trtllm case %d (T=%lld k=%d E=%d start=%d El=%d %s dups=%d)", _i,
             (long long)c->T, c->k, c->E, c->start, c->El, c->variant ? "three-step" : "fused", c->dups);
    gpu_expect_same(what, &perm, &d_perm, 0);
    gpu_expect_same(what, &inv, &d_inv, 0);
    gpu_expect_same(what, &off, &d_off, 0);
    gpu_expect_same(what, &ptse, &d_ptse, 0);
    moe_cuda_free(&d_ids), moe_cuda_free(&d_perm), moe_cuda_free(&d_inv), moe_cuda_free(&d_off);
    moe_cuda_free(&d_ptse);
    moe_tensor_free(&ids), moe_tensor_free(&perm), moe_tensor_free(&inv), moe_tensor_free(&off);
    moe_tensor_free(&ptse);
}
END_TEST

START_TEST(maps_trtllm_errors)
{
    moe_tensor ids = gpu_hnew(MOE_I32, 2, 16, 4);
    ck_assert_int_eq(moe_rng_topk_ids((int32_t *)ids.data, 16, 4, 32, 5, g_stream + 4, 0, 1), MOE_OK);
    moe_tensor perm = gpu_hnew(MOE_I32, 1, 64, 0), inv = gpu_hnew(MOE_I32, 1, 64, 0), off = gpu_hnew(MOE_I64, 1, 9, 0),
               shortp = gpu_hnew(MOE_I32, 1, 63, 0);
    moe_tensor d_ids = gpu_to_dev(&ids), d_perm = gpu_to_dev(&perm), d_inv = gpu_to_dev(&inv), d_off = gpu_to_dev(&off),
               d_short = gpu_to_dev(&shortp);
    char ref_msg[512];
    struct {
        moe_maps_trtllm_params p;
        int use_short;
        const char *what;
    } v[] = {{{MOE_MAPS_TRTLLM_THREE_STEP, 32, 0, 8}, 1, "output too short"},
             {{(moe_maps_trtllm_variant)5, 32, 0, 8}, 0, "bad variant"},
             {{MOE_MAPS_TRTLLM_FUSED_SINGLE_BLOCK, 32, 28, 8}, 0, "local range past E"},
             {{MOE_MAPS_TRTLLM_FUSED_SINGLE_BLOCK, 3, 0, 2}, 0, "topk > E"},
             {{MOE_MAPS_TRTLLM_FUSED_SINGLE_BLOCK, 32, 0, 7}, 0, "offsets length"}};
    for (int i = 0; i < 5; i++) {
        moe_status rs = moe_ops_ref.maps_trtllm(&ids, &v[i].p, v[i].use_short ? &shortp : &perm, &inv, &off, NULL);
        snprintf(ref_msg, sizeof ref_msg, "%s", moe_last_error());
        moe_status gs = moe_cuda_maps_trtllm(&d_ids, &v[i].p, v[i].use_short ? &d_short : &d_perm, &d_inv, &d_off, NULL);
        gpu_expect_same_error(v[i].what, rs, ref_msg, gs);
    }
    moe_status rs = moe_ops_ref.maps_trtllm(&ids, NULL, &perm, &inv, &off, NULL);
    snprintf(ref_msg, sizeof ref_msg, "%s", moe_last_error());
    gpu_expect_same_error("params NULL", rs, ref_msg, moe_cuda_maps_trtllm(&d_ids, NULL, &d_perm, &d_inv, &d_off, NULL));
    moe_maps_trtllm_params ok = {MOE_MAPS_TRTLLM_FUSED_SINGLE_BLOCK, 32, 0, 8};
    ck_assert_int_eq(moe_cuda_maps_trtllm(&ids, &ok, &d_perm, &d_inv, &d_off, NULL), MOE_ERR_INVALID_ARG);
    ck_assert_int_eq(moe_cuda_maps_trtllm(&d_ids, &ok, &d_perm, &d_inv, &off, NULL), MOE_ERR_INVALID_ARG);
    ck_assert_int_eq(moe_cuda_maps_trtllm(&d_ids, &ok, &d_perm, &d_inv, &d_off, &perm), MOE_ERR_INVALID_ARG);
    moe_cuda_free(&d_ids), moe_cuda_free(&d_perm), moe_cuda_free(&d_inv), moe_cuda_free(&d_off);
    moe_cuda_free(&d_short);
    moe_tensor_free(&ids), moe_tensor_free(&perm), moe_tensor_free(&inv), moe_tensor_free(&off);
    moe_tensor_free(&shortp);
}
END_TEST

static void add_tests(Suite *s)
{
    g_stream = moe_rng_stream_id("check_gpu_index");
    TCase *tc = gpu_tcase(s, "index", 120);
    tcase_add_loop_test(tc, align_block_size_matches, 0, N_ALIGN);
    tcase_add_test(tc, align_block_size_errors);
    tcase_add_loop_test(tc, align_batched_matches, 0, N_BATCHED);
    tcase_add_test(tc, align_batched_errors);
    tcase_add_loop_test(tc, sort_ck_matches, 0, N_SORT);
    tcase_add_test(tc, sort_ck_errors);
    tcase_add_loop_test(tc, maps_trtllm_matches, 0, N_MAPS);
    tcase_add_test(tc, maps_trtllm_errors);
}

int main(void)
{
    return gpu_test_main("check_gpu_index", "gpu_index", add_tests);
}
