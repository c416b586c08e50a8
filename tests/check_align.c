/* vLLM block alignment and batched alignment: hand-checked examples, both
 * expert-map modes, properties on seeded random routings, error paths. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "moe/align.h"
#include "moe/rng.h"

static moe_tensor ids_tensor(int32_t *data, int64_t m, int64_t k)
{
    moe_tensor t;
    int64_t shape[2] = {m, k};
    moe_tensor_wrap(&t, MOE_I32, 2, shape, data, (size_t)(m * k) * 4, (moe_device){MOE_DEVICE_HOST, 0});
    return t;
}

typedef struct {
    moe_tensor sorted, eids, post;
    int64_t len, blocks;
} align_out;

static void alloc_out(align_out *o, int64_t numel, const moe_align_params *p)
{
    ck_assert_int_eq(moe_align_capacity(numel, p, &o->len, &o->blocks), MOE_OK);
    int64_t one = 1;
    ck_assert_int_eq(moe_tensor_alloc(&o->sorted, MOE_I32, 1, &o->len), MOE_OK);
    ck_assert_int_eq(moe_tensor_alloc(&o->eids, MOE_I32, 1, &o->blocks), MOE_OK);
    ck_assert_int_eq(moe_tensor_alloc(&o->post, MOE_I32, 1, &one), MOE_OK);
}

static void free_out(align_out *o)
{
    moe_tensor_free(&o->sorted);
    moe_tensor_free(&o->eids);
    moe_tensor_free(&o->post);
}

static void expect_i32(const moe_tensor *t, const int32_t *want, int n)
{
    const int32_t *g = t->data;
    for (int i = 0; i < n; i++) ck_assert_msg(g[i] == want[i], "entry %d: %d != %d", i, g[i], want[i]);
}

/* M=3, topk=2, E=4, block=4; flat pairs: 0:e0 1:e2 2:e2 3:e1 4:e0 5:e2 */
static int32_t ex_ids[6] = {0, 2, 2, 1, 0, 2};

START_TEST(example_no_map)
{
    moe_tensor ids = ids_tensor(ex_ids, 3, 2);
    moe_align_params p = {4, 4, NULL, MOE_ALIGN_MAP_KEEP_NONLOCAL, 0};
    align_out o;
    alloc_out(&o, 6, &p);
    ck_assert_int_eq(o.len, 18); /* 6 + 4*(4-1) */
    ck_assert_int_eq(o.blocks, 5);
    ck_assert_int_eq(moe_ref_align_block_size(&ids, &p, &o.sorted, &o.eids, &o.post), MOE_OK);
    const int32_t want[18] = {0, 4, 6, 6, 3, 6, 6, 6, 1, 2, 5, 6, 6, 6, 6, 6, 6, 6};
    expect_i32(&o.sorted, want, 18);
    const int32_t we[5] = {0, 1, 2, -1, -1};
    expect_i32(&o.eids, we, 5);
    ck_assert_int_eq(((int32_t *)o.post.data)[0], 12);
    free_out(&o);
}
END_TEST

START_TEST(example_expert_map_modes)
{
    moe_tensor ids = ids_tensor(ex_ids, 3, 2);
    int32_t mapd[4] = {-1, -1, 0, 1}; /* rank 1 of 2 owns experts 2, 3 */
    moe_tensor map;
    int64_t four = 4;
    moe_tensor_wrap(&map, MOE_I32, 1, &four, mapd, sizeof mapd, (moe_device){MOE_DEVICE_HOST, 0});
    moe_align_params p = {4, 4, &map, MOE_ALIGN_MAP_KEEP_NONLOCAL, 0};
    align_out o;
    alloc_out(&o, 6, &p);
    ck_assert_int_eq(moe_ref_align_block_size(&ids, &p, &o.sorted, &o.eids, &o.post), MOE_OK);
    const int32_t want[12] = {0, 4, 6, 6, 3, 6, 6, 6, 1, 2, 5, 6};
    expect_i32(&o.sorted, want, 12);
    const int32_t we[5] = {-1, -1, 0, -1, -1}; /* non-local blocks stay, id -1 */
    expect_i32(&o.eids, we, 5);
    ck_assert_int_eq(((int32_t *)o.post.data)[0], 12);
    free_out(&o);

    p.map_mode = MOE_ALIGN_MAP_IGNORE_INVALID;
    alloc_out(&o, 6, &p);
    ck_assert_int_eq(moe_ref_align_block_size(&ids, &p, &o.sorted, &o.eids, &o.post), MOE_OK);
    const int32_t want2[8] = {1, 2, 5, 6, 6, 6, 6, 6};
    expect_i32(&o.sorted, want2, 8);
    const int32_t we2[5] = {0, -1, -1, -1, -1}; /* local ids, no -1 in the used region */
    expect_i32(&o.eids, we2, 5);
    ck_assert_int_eq(((int32_t *)o.post.data)[0], 4);
    free_out(&o);
}
END_TEST

START_TEST(capacity_rules)
{
    moe_align_params p = {16, 64, NULL, MOE_ALIGN_MAP_KEEP_NONLOCAL, 0};
    int64_t len, blocks;
    ck_assert_int_eq(moe_align_capacity(100, &p, &len, &blocks), MOE_OK);
    ck_assert_int_eq(len, 100 + 64 * 15);
    ck_assert_int_eq(blocks, (len + 15) / 16);
    p.pad_sorted_ids = 1;
    moe_align_capacity(100, &p, &len, &blocks);
    ck_assert_int_eq(len, 1072); /* 100 + 64*15 = 1060, rounded up to 16 */
}
END_TEST

START_TEST(small_numel_capacity)
{
    moe_align_params p = {16, 64, NULL, MOE_ALIGN_MAP_KEEP_NONLOCAL, 0};
    int64_t len, blocks;
    ck_assert_int_eq(moe_align_capacity(3, &p, &len, &blocks), MOE_OK);
    ck_assert_int_eq(len, 48); /* numel < E: min(numel*block, numel + E*(block-1)) */
    ck_assert_int_eq(blocks, 3);
    ck_assert_int_eq(moe_align_capacity(0, &p, &len, &blocks), MOE_OK);
    ck_assert_int_eq(len, 0);
}
END_TEST

/* Every flat index appears once in its expert's segment, ascending; blocks
 * are homogeneous; padding is the sentinel; totals agree. */
START_TEST(random_properties)
{
    for (int trial = 0; trial < 40; trial++) {
        uint64_t st = moe_rng_stream_id("check_align.random");
        int M = 1 + (int)(moe_rng_u32(trial, st, 0) % 300), E = 1 + (int)(moe_rng_u32(trial, st, 1) % 70);
        int k = 1 + (int)(moe_rng_u32(trial, st, 2) % (E < 8 ? E : 8));
        int block = 1 << (moe_rng_u32(trial, st, 3) % 7);
        int32_t *d = malloc(sizeof(int32_t) * M * k);
        for (int i = 0; i < M * k; i++) d[i] = (int32_t)(moe_rng_u32(trial, st, 10 + i) % (uint32_t)E);
        moe_tensor ids = ids_tensor(d, M, k);
        moe_align_params p = {block, E, NULL, MOE_ALIGN_MAP_KEEP_NONLOCAL, (int)(trial & 1)};
        align_out o;
        alloc_out(&o, (int64_t)M * k, &p);
        ck_assert_int_eq(moe_ref_align_block_size(&ids, &p, &o.sorted, &o.eids, &o.post), MOE_OK);
        const int32_t *s = o.sorted.data, *e = o.eids.data;
        int32_t post = ((int32_t *)o.post.data)[0];
        int numel = M * k, bad = 0;
        int *seen = calloc((size_t)numel, sizeof *seen);
        int64_t expect_post = 0;
        int *cnt = calloc((size_t)E, sizeof *cnt);
        for (int i = 0; i < numel; i++) cnt[d[i]]++;
        for (int x = 0; x < E; x++) expect_post += (cnt[x] + block - 1) / block * block;
        bad += post != expect_post;
        for (int64_t i = 0; i < o.len; i++) {
            int32_t v = s[i];
            if (i >= post) { bad += v != numel; continue; }
            int32_t ex = e[i / block];
            if (v == numel) continue;
            bad += v < 0 || v > numel || d[v] != ex || seen[v]++;
            if (i > 0 && i % block != 0 && s[i - 1] != numel) bad += s[i - 1] >= v;
        }
        for (int i = 0; i < numel; i++) bad += seen[i] != 1;
        for (int64_t b = post / block; b < o.blocks; b++) bad += e[b] != -1;
        ck_assert_msg(bad == 0, "trial %d (M=%d E=%d k=%d block=%d): %d violations", trial, M, E, k, block, bad);
        free(seen);
        free(cnt);
        free(d);
        free_out(&o);
    }
}
END_TEST

START_TEST(batched_example)
{
    int32_t n[3] = {2, 0, 5};
    moe_tensor nt, sorted, eids, post;
    int64_t three = 3, len = 24, blocks = 6, one = 1;
    moe_tensor_wrap(&nt, MOE_I32, 1, &three, n, sizeof n, (moe_device){MOE_DEVICE_HOST, 0});
    moe_tensor_alloc(&sorted, MOE_I32, 1, &len);
    moe_tensor_alloc(&eids, MOE_I32, 1, &blocks);
    moe_tensor_alloc(&post, MOE_I32, 1, &one);
    ck_assert_int_eq(moe_ref_align_batched(&nt, 5, 4, &sorted, &eids, &post), MOE_OK);
    const int32_t want[24] = {0, 1, 15, 15, 10, 11, 12, 13, 14, 15, 15, 15,
                              15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15};
    expect_i32(&sorted, want, 24);
    const int32_t we[6] = {0, 2, 2, -1, -1, -1};
    expect_i32(&eids, we, 6);
    ck_assert_int_eq(((int32_t *)post.data)[0], 12);
    n[1] = 6;
    ck_assert_int_eq(moe_ref_align_batched(&nt, 5, 4, &sorted, &eids, &post), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "expert_num_tokens[1] = 6"));
    n[1] = 0;
    ck_assert_int_eq(moe_ref_align_batched(&nt, 0, 4, &sorted, &eids, &post), MOE_ERR_INVALID_ARG);
    ck_assert_int_eq(moe_ref_align_batched(&nt, 5, 0, &sorted, &eids, &post), MOE_ERR_INVALID_ARG);
    ck_assert_int_eq(moe_ref_align_batched(&nt, 9, 4, &sorted, &eids, &post), MOE_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "sorted_token_ids"));
    ck_assert_int_eq(moe_ref_align_batched(NULL, 5, 4, &sorted, &eids, &post), MOE_ERR_NULL);
    moe_tensor_free(&sorted);
    moe_tensor_free(&eids);
    moe_tensor_free(&post);
}
END_TEST

START_TEST(errors)
{
    moe_tensor ids = ids_tensor(ex_ids, 3, 2);
    moe_align_params p = {4, 4, NULL, MOE_ALIGN_MAP_KEEP_NONLOCAL, 0};
    align_out o;
    alloc_out(&o, 6, &p);
    ck_assert_int_eq(moe_ref_align_block_size(NULL, &p, &o.sorted, &o.eids, &o.post), MOE_ERR_NULL);
    ck_assert_int_eq(moe_ref_align_block_size(&ids, NULL, &o.sorted, &o.eids, &o.post), MOE_ERR_NULL);
    p.block_size = 0;
    ck_assert_int_eq(moe_ref_align_block_size(&ids, &p, &o.sorted, &o.eids, &o.post), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "block_size"));
    p.block_size = 4;
    ex_ids[3] = 4;
    ck_assert_int_eq(moe_ref_align_block_size(&ids, &p, &o.sorted, &o.eids, &o.post), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "topk_ids[3] = 4"));
    ex_ids[3] = -1;
    ck_assert_int_eq(moe_ref_align_block_size(&ids, &p, &o.sorted, &o.eids, &o.post), MOE_ERR_INVALID_ARG);
    ex_ids[3] = 1;
    p.num_experts = 5; /* needs a longer buffer than was allocated */
    ck_assert_int_eq(moe_ref_align_block_size(&ids, &p, &o.sorted, &o.eids, &o.post), MOE_ERR_SHAPE);
    p.num_experts = 4;
    int32_t mapd[3] = {0, 1, 2};
    moe_tensor map;
    int64_t three = 3;
    moe_tensor_wrap(&map, MOE_I32, 1, &three, mapd, sizeof mapd, (moe_device){MOE_DEVICE_HOST, 0});
    p.expert_map = &map;
    ck_assert_int_eq(moe_ref_align_block_size(&ids, &p, &o.sorted, &o.eids, &o.post), MOE_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "expert_map"));
    p.expert_map = NULL;
    p.map_mode = (moe_align_map_mode)9;
    ck_assert_int_eq(moe_ref_align_block_size(&ids, &p, &o.sorted, &o.eids, &o.post), MOE_ERR_INVALID_ARG);
    p.map_mode = MOE_ALIGN_MAP_KEEP_NONLOCAL;
    moe_tensor f;
    int64_t s2[2] = {3, 2};
    moe_tensor_alloc(&f, MOE_F32, 2, s2);
    ck_assert_int_eq(moe_ref_align_block_size(&f, &p, &o.sorted, &o.eids, &o.post), MOE_ERR_DTYPE);
    moe_tensor_free(&f);
    /* M = 0 is an empty, valid problem */
    moe_tensor empty = ids_tensor(ex_ids, 0, 2);
    ck_assert_int_eq(moe_ref_align_block_size(&empty, &p, &o.sorted, &o.eids, &o.post), MOE_OK);
    ck_assert_int_eq(((int32_t *)o.post.data)[0], 0);
    free_out(&o);
}
END_TEST

static Suite *align_suite(void)
{
    Suite *s = suite_create("align");
    TCase *tc = tcase_create("vllm");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, example_no_map);
    tcase_add_test(tc, example_expert_map_modes);
    tcase_add_test(tc, capacity_rules);
    tcase_add_test(tc, small_numel_capacity);
    tcase_add_test(tc, random_properties);
    tcase_add_test(tc, batched_example);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(align_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
