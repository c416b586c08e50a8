/* Expert-parallel dispatch / combine references (include/moe/dispatch.h):
 * hand-checked examples from anchors/dispatch_sorting.md A, D and seed 002,
 * properties on seeded random problems at R = 1, 2, 4, 8, and every error
 * path. Loops count mismatches and assert once. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "moe/dispatch.h"
#include "moe/format.h"
#include "moe/rng.h"
#include "test_util.h"

#define SH(...) ((const int64_t[]){__VA_ARGS__})
#define I32(t) ((int32_t *)(t).data)
#define I64(t) ((int64_t *)(t).data)
#define F32(t) ((float *)(t).data)
#define U16(t) ((uint16_t *)(t).data)
#define U8(t) ((uint8_t *)(t).data)

static moe_tensor mk(moe_dtype d, int nd, const int64_t *shape)
{
    moe_tensor t;
    moe_status s = moe_tensor_alloc(&t, d, nd, shape);
    ck_assert_msg(s == MOE_OK, "alloc: %s", moe_last_error());
    return t;
}

/* A view of caller memory with another leading split ([G, ...] as [R, G/R, ...]). */
static moe_tensor view(moe_dtype d, int nd, const int64_t *shape, void *data)
{
    moe_tensor t;
    moe_device host = {MOE_DEVICE_HOST, 0};
    moe_status s = moe_tensor_wrap(&t, d, nd, shape, data, (size_t)1 << 40, host);
    ck_assert_msg(s == MOE_OK, "wrap: %s", moe_last_error());
    return t;
}

static void freet(int n, moe_tensor *ts)
{
    for (int i = 0; i < n; i++) moe_tensor_free(&ts[i]);
}

static uint16_t bf(float x) { return moe_f32_to_bf16(x, MOE_POLICY_IEEE_RNE, NULL); }
static float fb(uint16_t c) { return moe_bf16_to_f32(c); }

#define EXPECT_ERR(call, status, needle)                                                           \
    do {                                                                                           \
        moe_clear_error();                                                                         \
        moe_status s_ = (call);                                                                    \
        ck_assert_msg(s_ == (status), "%s: got %s (%s)", #call, moe_status_str(s_),                \
                      moe_last_error());                                                           \
        ck_assert_msg(strstr(moe_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'",     \
                      #call, moe_last_error(), needle);                                            \
    } while (0)

#define EXPECT_OK(call)                                                                            \
    do {                                                                                           \
        moe_status s_ = (call);                                                                    \
        ck_assert_msg(s_ == MOE_OK, "%s: %s (%s)", #call, moe_status_str(s_), moe_last_error());   \
    } while (0)

/* Seeded ids: rows of K ids in [0, E), a share of -1 slots, optionally
 * distinct within a row. */
static void gen_ids(int32_t *ids, int64_t rows, int K, int E, uint64_t seed, unsigned neg1_pct,
                    int distinct)
{
    ck_assert_int_eq(moe_rng_topk_ids(ids, rows, K, E, seed, moe_rng_stream_id("dispatch.ids"), neg1_pct, distinct),
                     MOE_OK);
}

/* Small integers (exact in bf16 and in every sum below). */
static void gen_small_bf16(uint16_t *x, int64_t n, uint64_t seed)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = bf((float)((int)(moe_rng_u32(seed, 7, (uint64_t)i) % 7) - 3));
}

/* Powers of two (w*x and the sums stay exact). */
static void gen_pow2_weights(float *w, int64_t n, uint64_t seed)
{
    static const float pw[3] = {0.5f, 1.0f, 2.0f};
    for (int64_t i = 0; i < n; i++) w[i] = pw[moe_rng_u32(seed, 9, (uint64_t)i) % 3];
}

/* ------------------------------------------------------------------ */

START_TEST(world_rules)
{
    int el, nodes;
    EXPECT_OK(moe_ep_check_world(8, 64, &el));
    ck_assert_int_eq(el, 8);
    EXPECT_ERR(moe_ep_check_world(3, 6, &el), MOE_ERR_INVALID_ARG, "world_size 3");
    EXPECT_ERR(moe_ep_check_world(16, 32, &el), MOE_ERR_INVALID_ARG, "world_size 16");
    EXPECT_ERR(moe_ep_check_world(4, 0, &el), MOE_ERR_INVALID_ARG, "num_experts 0");
    EXPECT_ERR(moe_ep_check_world(4, 6, &el), MOE_ERR_INVALID_ARG, "divisible by world_size 4");
    EXPECT_OK(moe_ep_check_nodes(8, 2, &nodes));
    ck_assert_int_eq(nodes, 4);
    EXPECT_ERR(moe_ep_check_nodes(8, 3, &nodes), MOE_ERR_INVALID_ARG, "num_ranks_per_node 3");
    EXPECT_ERR(moe_ep_check_nodes(4, 0, &nodes), MOE_ERR_INVALID_ARG, "num_ranks_per_node 0");
    EXPECT_ERR(moe_ep_check_nodes(2, 4, &nodes), MOE_ERR_INVALID_ARG, "num_ranks_per_node 4");
    ck_assert_int_eq(moe_deepep_ll_rows(4, 16), 64);
    ck_assert_int_eq(moe_deepep_ll_rows(3, 16), -1);
    ck_assert_int_eq(moe_deepep_ll_rows(4, -1), -1);
    moe_pplx_config pc = {8, 2, 16, 10};
    ck_assert_int_eq(moe_pplx_rows(&pc), 40);
    pc.dp_size = 3;
    ck_assert_int_eq(moe_pplx_rows(&pc), -1);
    ck_assert_int_eq(moe_pplx_rows(NULL), -1);
}
END_TEST

/* ------------------------------------------------------------------ */
/* DeepEP normal mode (A.2-A.4) */

/* R = 2, E = 4 (rank 0 owns 0-1, rank 1 owns 2-3), T = 3, K = 2. */
static const int32_t hand_ids[2 * 3 * 2] = {
    0,  1,  2, -1, 3, 3, /* rank 0: t0 -> r0 only; t1 -> r1; t2 -> r1 (expert 3 twice) */
    -1, -1, 1, 2,  0, 3, /* rank 1: t0 -> nowhere; t1, t2 -> both ranks */
};

START_TEST(deepep_layout_hand)
{
    moe_tensor ids = mk(MOE_I32, 3, SH(2, 3, 2));
    memcpy(ids.data, hand_ids, sizeof hand_ids);
    moe_tensor o[5] = {mk(MOE_I32, 2, SH(2, 4)), mk(MOE_I32, 2, SH(2, 2)), mk(MOE_I32, 2, SH(2, 2)),
                       mk(MOE_BOOL, 3, SH(2, 3, 2)), mk(MOE_I32, 2, SH(2, 1))};
    moe_deepep_config cfg = {2, 4, 1, 1};
    moe_deepep_layout L = {&o[0], &o[1], &o[2], &o[3]};
    EXPECT_OK(moe_ref_deepep_layout(&cfg, &ids, &L));
    /* pairs per expert: the duplicate counts twice, -1 not at all */
    static const int32_t per_e[8] = {1, 1, 1, 2, 1, 1, 1, 1};
    static const int32_t per_r[4] = {1, 2, 2, 2};
    static const uint8_t in_rank[12] = {1, 0, 0, 1, 0, 1, 0, 0, 1, 1, 1, 1};
    ck_assert_mem_eq(o[0].data, per_e, sizeof per_e);
    ck_assert_mem_eq(o[1].data, per_r, sizeof per_r);
    ck_assert_mem_eq(o[2].data, per_r, sizeof per_r); /* one rank per node */
    ck_assert_mem_eq(o[3].data, in_rank, sizeof in_rank);
    /* one node of two ranks: a token counts once per node */
    cfg.num_ranks_per_node = 2;
    L.num_tokens_per_node = &o[4];
    EXPECT_OK(moe_ref_deepep_layout(&cfg, &ids, &L));
    ck_assert_int_eq(I32(o[4])[0], 3);
    ck_assert_int_eq(I32(o[4])[1], 2);
    int64_t rows;
    EXPECT_OK(moe_deepep_dispatch_capacity(&cfg, &ids, &rows));
    ck_assert_int_eq(rows, 4);
    freet(5, o);
    moe_tensor_free(&ids);
}
END_TEST

START_TEST(deepep_dispatch_hand)
{
    enum { R = 2, T = 3, K = 2, H = 2, N = 5 };
    moe_tensor x = mk(MOE_F32, 3, SH(R, T, H)), sc = mk(MOE_I32, 3, SH(R, T, 1));
    moe_tensor ids = mk(MOE_I32, 3, SH(R, T, K)), w = mk(MOE_F32, 3, SH(R, T, K));
    memcpy(ids.data, hand_ids, sizeof hand_ids);
    for (int g = 0; g < R * T; g++) {
        F32(x)[g * H] = (float)(10 * (g / T) + g % T);
        F32(x)[g * H + 1] = -F32(x)[g * H];
        I32(sc)[g] = 100 + g;
        for (int k = 0; k < K; k++) F32(w)[g * K + k] = (float)(g * K + k) + 0.5f;
    }
    moe_tensor o[8] = {mk(MOE_F32, 3, SH(R, N, H)), mk(MOE_I32, 3, SH(R, N, 1)),
                       mk(MOE_I32, 3, SH(R, N, K)), mk(MOE_F32, 3, SH(R, N, K)),
                       mk(MOE_I32, 2, SH(R, N)),    mk(MOE_I32, 1, SH(R)),
                       mk(MOE_I32, 2, SH(R, 2)),    mk(MOE_I32, 2, SH(R, R))};
    moe_deepep_recv out = {&o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7]};
    moe_deepep_config cfg = {R, 4, R, 2};
    EXPECT_OK(moe_ref_deepep_dispatch(&cfg, &x, &sc, &ids, &w, &out));
    /* rank 0 gets (s0,t0), (s1,t1), (s1,t2); rank 1 gets (s0,t1), (s0,t2),
     * (s1,t1), (s1,t2): source rank, then source token, ascending */
    static const int32_t src[R * N] = {0, 1, 2, -1, -1, 1, 2, 1, 2, -1};
    static const int32_t x0[R * N] = {0, 11, 12, 0, 0, 1, 2, 11, 12, 0};
    static const int32_t rid[R * N * K] = {0, 1,  1, -1, 0,  -1, -1, -1, -1, -1,
                                           0, -1, 1, 1,  -1, 0,  -1, 1,  -1, -1};
    /* weights of (g, k) are g*2 + k + 0.5; 0 where the id became -1 */
    static const float rw[R * N * K] = {0.5f, 1.5f, 8.5f, 0,    10.5f, 0,    0, 0,     0, 0,
                                        2.5f, 0,    4.5f, 5.5f, 0,     9.5f, 0, 11.5f, 0, 0};
    ck_assert_mem_eq(o[4].data, src, sizeof src);
    ck_assert_mem_eq(o[2].data, rid, sizeof rid);
    ck_assert_mem_eq(o[3].data, rw, sizeof rw);
    static const int32_t scale[R * N] = {100, 104, 105, 0, 0, 101, 102, 104, 105, 0};
    ck_assert_mem_eq(o[1].data, scale, sizeof scale);
    int bad = 0;
    for (int i = 0; i < R * N; i++)
        bad += F32(o[0])[i * H] != (float)x0[i] || F32(o[0])[i * H + 1] != -(float)x0[i];
    ck_assert_int_eq(bad, 0);
    ck_assert_int_eq(I32(o[5])[0], 3);
    ck_assert_int_eq(I32(o[5])[1], 4);
    /* pairs per local expert [2, 2] and [2, 3], aligned to 2 */
    static const int32_t per_e[4] = {2, 2, 2, 4};
    static const int32_t prefix[4] = {1, 2, 3, 4};
    ck_assert_mem_eq(o[6].data, per_e, sizeof per_e);
    ck_assert_mem_eq(o[7].data, prefix, sizeof prefix);
    /* a receive buffer one row short is refused */
    moe_tensor small[6] = {mk(MOE_F32, 3, SH(R, 3, H)), mk(MOE_I32, 3, SH(R, 3, 1)),
                           mk(MOE_I32, 3, SH(R, 3, K)), mk(MOE_F32, 3, SH(R, 3, K)),
                           mk(MOE_I32, 2, SH(R, 3))};
    moe_deepep_recv so = {&small[0], &small[1], &small[2], &small[3],
                          &small[4], &o[5],     &o[6],     NULL};
    EXPECT_ERR(moe_ref_deepep_dispatch(&cfg, &x, &sc, &ids, &w, &so), MOE_ERR_SHAPE,
               "rank 1 receives 4 tokens");
    freet(6, small);
    freet(8, o);
    moe_tensor_free(&x), moe_tensor_free(&sc), moe_tensor_free(&ids), moe_tensor_free(&w);
}
END_TEST

/* Combine order and roundings (A.4). */
START_TEST(deepep_combine_hand)
{
    const float u = 0x1p-8f; /* half an ulp of bf16 at 1.0 */
    /* R = 4, T = 1: token (s0, t0) sent to ranks 0, 1, 2; each holds it in row 0 */
    moe_tensor in = mk(MOE_BOOL, 3, SH(4, 1, 4)), x = mk(MOE_BF16, 3, SH(4, 1, 1));
    moe_tensor out = mk(MOE_BF16, 3, SH(4, 1, 1));
    U8(in)[0] = U8(in)[1] = U8(in)[2] = 1;
    U16(x)[0] = bf(1.0f), U16(x)[1] = bf(u), U16(x)[2] = bf(u), U16(x)[3] = bf(100.0f);
    /* one node: f32 sum in rank order, one rounding: 1 + 2^-7 */
    moe_deepep_config one = {4, 4, 4, 1};
    EXPECT_OK(moe_ref_deepep_combine(&one, &x, NULL, &in, NULL, NULL, &out, NULL));
    ck_assert_uint_eq(U16(out)[0], 0x3F81);
    /* ranks 1-3 sent nothing: bf16(bias0 + bias1), here no bias: +0 */
    ck_assert_uint_eq(U16(out)[1], 0);
    ck_assert_uint_eq(U16(out)[3], 0);
    /* two nodes of two: node 0 rounds 1 + 2^-8 to 1.0 (tie to even) before
     * the receiver adds node 1's 2^-8, and 1 + 2^-8 rounds to 1.0 again */
    moe_deepep_config two = {4, 4, 2, 1};
    EXPECT_OK(moe_ref_deepep_combine(&two, &x, NULL, &in, NULL, NULL, &out, NULL));
    ck_assert_uint_eq(U16(out)[0], 0x3F80);
    /* the ranks' order shows: 1 + 2^24 rounds to 2^24 before rank 2's
     * -2^24 cancels it (+0); ranks descending would cancel first (1.0) */
    U16(x)[0] = bf(1.0f), U16(x)[1] = bf(0x1p24f), U16(x)[2] = bf(-0x1p24f);
    EXPECT_OK(moe_ref_deepep_combine(&one, &x, NULL, &in, NULL, NULL, &out, NULL));
    ck_assert_uint_eq(U16(out)[0], 0x0000);
    freet(1, &x), freet(1, &out), freet(1, &in);

    /* bias0 + bias1 first, then ranks (f32 shows the association):
     * ((2^24 + 1) + 1) + 1 = 2^24, whereas the rows first would give
     * (1 + 1) + 2^24 = 2^24 + 2 */
    moe_tensor in2 = mk(MOE_BOOL, 3, SH(2, 1, 2)), xf = mk(MOE_F32, 3, SH(2, 1, 1));
    moe_tensor b0 = mk(MOE_F32, 3, SH(2, 1, 1)), b1 = mk(MOE_F32, 3, SH(2, 1, 1));
    moe_tensor of = mk(MOE_F32, 3, SH(2, 1, 1));
    moe_tensor w = mk(MOE_F32, 3, SH(2, 1, 2)), cw = mk(MOE_F32, 3, SH(2, 1, 2));
    U8(in2)[0] = U8(in2)[1] = 1;    /* (s0, t0) went to ranks 0 and 1 */
    F32(xf)[0] = F32(xf)[1] = 1.0f; /* row 0 of each */
    F32(b0)[0] = 0x1p24f, F32(b1)[0] = 1.0f;
    F32(b0)[1] = 3.0f, F32(b1)[1] = 0.25f; /* (s1, t0) went nowhere */
    F32(w)[0] = 0.75f, F32(w)[1] = 0.0f;   /* rank 0 owns slot 0 ... */
    F32(w)[2] = 0.0f, F32(w)[3] = 0.5f;    /* ... rank 1 slot 1 */
    moe_deepep_config c2 = {2, 2, 2, 1};
    EXPECT_OK(moe_ref_deepep_combine(&c2, &xf, &w, &in2, &b0, &b1, &of, &cw));
    ck_assert(F32(of)[0] == 0x1p24f);
    ck_assert(F32(of)[1] == 3.25f);
    ck_assert(F32(cw)[0] == 0.75f && F32(cw)[1] == 0.5f && F32(cw)[2] == 0.0f &&
              F32(cw)[3] == 0.0f);
    /* a missing bias reads as 0 */
    EXPECT_OK(moe_ref_deepep_combine(&c2, &xf, NULL, &in2, NULL, &b1, &of, NULL));
    ck_assert(F32(of)[0] == 3.0f && F32(of)[1] == 0.25f);
    moe_tensor t7[7] = {in2, xf, b0, b1, of, w, cw};
    freet(7, t7);
}
END_TEST

/* Dispatch then combine with identity experts on exact data: every pair
 * routed once, and the same sums at R = 1, 2, 4, 8, on one node or many. */
START_TEST(deepep_roundtrip_property)
{
    enum { G = 64, K = 4, E = 16, H = 8 };
    int32_t *gids = malloc(sizeof(int32_t) * G * K);
    float *gw = malloc(sizeof(float) * G * K);
    uint16_t *gx = malloc(sizeof(uint16_t) * G * H), *ref = malloc(sizeof(uint16_t) * G * H);
    uint16_t *res = malloc(sizeof(uint16_t) * G * H);
    gen_ids(gids, G, K, E, 11, 15, 0); /* -1 slots and duplicates allowed */
    gen_small_bf16(gx, G * H, 12);
    gen_pow2_weights(gw, G * K, 13);
    for (int g = 0; g < G; g++)
        for (int c = 0; c < H; c++) {
            float v = 0.0f;
            for (int k = 0; k < K; k++)
                if (gids[g * K + k] >= 0) v += gw[g * K + k] * fb(gx[g * H + c]);
            ref[g * H + c] = bf(v);
        }
    for (int R = 1; R <= 8; R *= 2) {
        for (int rpn = 1; rpn <= R; rpn *= 2) {
            int64_t T = G / R, N, El = E / R;
            moe_tensor x = view(MOE_BF16, 3, SH(R, T, H), gx),
                       ids = view(MOE_I32, 3, SH(R, T, K), gids);
            moe_tensor w = view(MOE_F32, 3, SH(R, T, K), gw);
            moe_deepep_config cfg = {R, E, rpn, 1};
            EXPECT_OK(moe_deepep_dispatch_capacity(&cfg, &ids, &N));
            moe_tensor o[8] = {mk(MOE_BF16, 3, SH(R, N, H)), mk(MOE_I32, 3, SH(R, N, K)),
                               mk(MOE_F32, 3, SH(R, N, K)),  mk(MOE_I32, 2, SH(R, N)),
                               mk(MOE_I32, 1, SH(R)),        mk(MOE_I32, 2, SH(R, El)),
                               mk(MOE_I32, 2, SH(R, R)),     mk(MOE_BOOL, 3, SH(R, T, R))};
            moe_deepep_recv rv = {&o[0], NULL, &o[1], &o[2], &o[3], &o[4], &o[5], &o[6]};
            EXPECT_OK(moe_ref_deepep_dispatch(&cfg, &x, NULL, &ids, &w, &rv));
            moe_tensor l[3] = {mk(MOE_I32, 2, SH(R, E)), mk(MOE_I32, 2, SH(R, R))};
            moe_deepep_layout L = {&l[0], &l[1], NULL, &o[7]};
            EXPECT_OK(moe_ref_deepep_layout(&cfg, &ids, &L));
            /* every routed (token, slot) appears on exactly its owner, in
             * (source rank, token) order; other holders carry -1, weight 0 */
            int *seen = calloc(G * K, sizeof *seen), bad = 0;
            int64_t pairs = 0;
            for (int j = 0; j < R; j++) {
                int64_t prev = -1;
                for (int64_t i = 0; i < I32(o[4])[j]; i++) {
                    int s = 0;
                    while (I32(o[6])[s * R + j] <= i) s++;
                    int64_t t = I32(o[3])[j * N + i], g = s * T + t;
                    bad += g <= prev;
                    prev = g;
                    bad += memcmp(U16(o[0]) + (j * N + i) * H, gx + g * H, H * 2) != 0;
                    for (int k = 0; k < K; k++) {
                        int32_t lid = I32(o[1])[(j * N + i) * K + k], e = gids[g * K + k];
                        float rw = F32(o[2])[(j * N + i) * K + k];
                        if (lid >= 0) {
                            bad += e != j * El + lid || rw != gw[g * K + k];
                            seen[g * K + k]++;
                        } else {
                            bad += (e >= 0 && e / El == j) || rw != 0.0f;
                        }
                    }
                }
            }
            for (int p = 0; p < G * K; p++) {
                bad += seen[p] != (gids[p] >= 0);
                pairs += seen[p];
            }
            ck_assert_msg(bad == 0, "R=%d rpn=%d: %d bad rows/slots", R, rpn, bad);
            ck_assert_int_gt(pairs, G);
            /* identity experts: row = sum of its local slots' w * x, bf16 */
            moe_tensor y = mk(MOE_BF16, 3, SH(R, N, H)), cx = view(MOE_BF16, 3, SH(R, T, H), res);
            moe_tensor cw = mk(MOE_F32, 3, SH(R, T, K));
            for (int64_t i = 0; i < R * N; i++)
                for (int c = 0; c < H; c++) {
                    float v = 0.0f;
                    for (int k = 0; k < K; k++)
                        if (I32(o[1])[i * K + k] >= 0)
                            v += F32(o[2])[i * K + k] * fb(U16(o[0])[i * H + c]);
                    U16(y)[i * H + c] = bf(v);
                }
            EXPECT_OK(moe_ref_deepep_combine(&cfg, &y, &o[2], &o[7], NULL, NULL, &cx, &cw));
            ck_assert_msg(memcmp(res, ref, sizeof(uint16_t) * G * H) == 0, "R=%d rpn=%d sums", R,
                          rpn);
            for (int p = 0; p < G * K; p++) bad += F32(cw)[p] != (gids[p] >= 0 ? gw[p] : 0.0f);
            ck_assert_msg(bad == 0, "R=%d rpn=%d: combined weights", R, rpn);
            free(seen);
            freet(8, o), freet(2, l), freet(1, &y), freet(1, &cw);
        }
    }
    free(gids), free(gw), free(gx), free(ref), free(res);
}
END_TEST

/* ------------------------------------------------------------------ */
/* DeepEP low-latency (A.5, A.6) */

START_TEST(ll_fp8_cast_hand)
{
    float f[128], sinv, scale;
    uint8_t q[128];
    /* upstream's kFP8AmaxInv = 1.0f / 448.0f: 1/448 rounded (up) to f32.
     * The anchor's decimal 0.0022321428f is the float below it. */
    ck_assert_uint_eq(tu_bits(1.0f / 448.0f), 0x3B124925u);
    ck_assert_uint_eq(tu_bits(0.0022321428f), 0x3B124924u);
    ck_assert((double)(1.0f / 448.0f) > 1.0 / 448.0);
    ck_assert_uint_eq(tu_bits((float)1e-4), tu_bits(1e-4f)); /* kFP8Margin = 1e-4 */

    /* amax = 0: the 1e-4 floor gives finite scales and zero codes */
    memset(f, 0, sizeof f);
    moe_deepep_ll_cast_group(f, 0, q, &sinv);
    ck_assert_uint_eq(tu_bits(sinv), tu_bits(1e-4f * (1.0f / 448.0f)));
    int nz = 0;
    for (int i = 0; i < 128; i++) nz += q[i] != 0;
    ck_assert_int_eq(nz, 0);
    moe_deepep_ll_cast_group(f, 1, q, &sinv); /* round_scale: 2^ceil(log2(2.23e-7)) = 2^-22 */
    ck_assert(sinv == 0x1p-22f);
    ck_assert_uint_eq(moe_deepep_ll_ue8m0(sinv), 127 - 22);

    /* tiny amax: 1e-6 is under the floor, so scale = 448/1e-4 and
     * 1e-6 * 4480000 = 4.48 -> e4m3 4.5 (0x49) */
    f[5] = 1e-6f;
    moe_deepep_ll_cast_group(f, 0, q, &sinv);
    ck_assert_uint_eq(tu_bits(sinv), tu_bits(1e-4f * (1.0f / 448.0f)));
    ck_assert_uint_eq(q[5], 0x49);
    moe_deepep_ll_scales(0.0f, 0, &scale, &sinv);
    ck_assert(scale == 448.0f / 1e-4f);

    /* amax = 3.5 = 448 * 2^-7: 3.5 * (1/448.0f) rounds back to exactly
     * 2^-7, so both rules give scale 128 (an exact power of two is not
     * bumped by the ceil); 3.5 -> 448 (0x7E), -1.75 -> -224 (0xF6) */
    memset(f, 0, sizeof f);
    f[0] = 3.5f, f[1] = -1.75f, f[2] = 0.001f;
    moe_deepep_ll_cast_group(f, 0, q, &sinv);
    ck_assert_uint_eq(tu_bits(sinv), 0x3C000000u);
    ck_assert_uint_eq(q[0], 0x7E);
    ck_assert_uint_eq(q[1], 0xF6);
    ck_assert_uint_eq(q[2], 0x20); /* 0.128 -> 0.125 */
    moe_deepep_ll_cast_group(f, 1, q, &sinv);
    ck_assert(sinv == 0x1p-7f);
    ck_assert_uint_eq(q[0], 0x7E);
    ck_assert_uint_eq(moe_deepep_ll_ue8m0(sinv), 120);
    /* amax = 3: 3/448 lies in (2^-8, 2^-7). Default: scale = 448/3, and
     * 3 * scale saturates to 448 (0x7E). round_scale: the ceil gives
     * scale_inv 2^-7, scale 128, 3 -> 384 (0x7C) */
    f[0] = 3.0f, f[1] = 0.0f;
    moe_deepep_ll_cast_group(f, 0, q, &sinv);
    ck_assert_uint_eq(tu_bits(sinv), tu_bits(3.0f * (1.0f / 448.0f)));
    ck_assert_uint_eq(q[0], 0x7E);
    moe_deepep_ll_cast_group(f, 1, q, &sinv);
    ck_assert(sinv == 0x1p-7f);
    ck_assert_uint_eq(q[0], 0x7C);
    moe_deepep_ll_scales(3.0f, 1, &scale, &sinv);
    ck_assert(scale == 128.0f);
    moe_deepep_ll_scales(3.0f, 0, &scale, &sinv);
    ck_assert(scale == 448.0f / 3.0f);
    /* Inf: the bit formulas run out of range exactly as on the GPU */
    moe_deepep_ll_scales(INFINITY, 0, &scale, &sinv);
    ck_assert(scale == 0.0f && sinv == INFINITY);
    moe_deepep_ll_scales(INFINITY, 1, &scale, &sinv);
    ck_assert(scale == -INFINITY && sinv == INFINITY);
    /* NaN does not take part in amax (fmaxf); it stays NaN after the cast */
    f[7] = NAN;
    moe_deepep_ll_cast_group(f, 1, q, &sinv);
    ck_assert(sinv == 0x1p-7f);
    ck_assert_uint_eq(q[7] & 0x7F, 0x7F);
    ck_assert_uint_eq(q[0], 0x7C);
}
END_TEST

/* LL dispatch + combine at R = 1, 2, 4, 8 in every cast mode: each routed
 * pair lands once, rows carry the token (or its cast), and the combine is
 * the same bits whatever R and whatever row order the handle describes. */
START_TEST(ll_roundtrip_property)
{
    enum { G = 32, K = 4, E = 16, H = 512, NG = H / 128 };
    int32_t *gids = malloc(sizeof(int32_t) * G * K);
    float *gw = malloc(sizeof(float) * G * K);
    uint16_t *gx = malloc(sizeof(uint16_t) * G * H), *res = malloc(sizeof(uint16_t) * G * H);
    uint16_t *ref = malloc(sizeof(uint16_t) * G * H);
    uint8_t *qt = malloc((size_t)G * H);
    float *st = malloc(sizeof(float) * G * NG), *f = malloc(sizeof(float) * H);
    gen_ids(gids, G, K, E, 21, 15, 1);
    for (int i = 0; i < G * H; i++) gx[i] = bf(moe_rng_normal(22, 1, (uint64_t)i) * 4.0f);
    for (int i = 0; i < G * K; i++) gw[i] = moe_rng_uniform(23, 1, (uint64_t)i);
    static const int modes[4][3] = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {1, 1, 1}};
    for (int m = 0; m < 4; m++) {
        int fp8 = modes[m][0], rs = modes[m][1], ue = modes[m][2];
        /* the token-wise cast and the identity expert's bf16 output */
        for (int g = 0; g < G; g++) {
            for (int c = 0; c < H; c++) f[c] = fb(gx[g * H + c]);
            for (int b = 0; b < NG; b++)
                moe_deepep_ll_cast_group(f + b * 128, rs, qt + g * H + b * 128, st + g * NG + b);
        }
        for (int g = 0; g < G; g++)
            for (int c = 0; c < H; c++) {
                float yv = fp8 ? fb(bf(moe_e4m3_to_f32(qt[g * H + c]) * st[g * NG + c / 128]))
                               : fb(gx[g * H + c]);
                float acc = 0.0f;
                for (int k = 0; k < K; k++)
                    if (gids[g * K + k] >= 0) acc = fmaf(yv, gw[g * K + k], acc);
                ref[g * H + c] = bf(acc);
            }
        for (int R = 1; R <= 8; R *= 2) {
            int64_t T = G / R, Tm = T + 1, Ta = R * Tm, El = E / R;
            moe_deepep_ll_config cfg = {R, E, Tm, fp8, rs, ue};
            moe_tensor x = view(MOE_BF16, 3, SH(R, T, H), gx),
                       ids = view(MOE_I32, 3, SH(R, T, K), gids);
            moe_tensor w = view(MOE_F32, 3, SH(R, T, K), gw);
            moe_tensor o[5] = {mk(fp8 ? MOE_E4M3 : MOE_BF16, 4, SH(R, El, Ta, H)),
                               ue ? mk(MOE_I32, 4, SH(R, El, Ta, H / 512))
                                  : mk(MOE_F32, 4, SH(R, El, Ta, fp8 ? NG : 1)),
                               mk(MOE_I32, 2, SH(R, El)), mk(MOE_I32, 3, SH(R, El, Ta)),
                               mk(MOE_I64, 3, SH(R, El, R))};
            moe_deepep_ll_recv rv = {&o[0], fp8 ? &o[1] : NULL, &o[2], &o[3], &o[4]};
            EXPECT_OK(moe_ref_deepep_ll_dispatch(&cfg, &x, &ids, &rv));
            int *seen = calloc(G * K, sizeof *seen), bad = 0;
            int64_t S = ue ? H / 512 : NG;
            for (int e = 0; e < E; e++) {
                int64_t begin = 0, total = 0;
                for (int s = 0; s < R; s++) {
                    int64_t lr = I64(o[4])[e * R + s], cnt = lr & 0xFFFFFFFF, b = lr >> 32;
                    bad += b != begin;
                    for (int64_t i = b; i < b + cnt; i++) {
                        int64_t t = I32(o[3])[e * Ta + i], g = s * T + t, k = 0;
                        while (k < K && gids[g * K + k] != e) k++;
                        if (t < 0 || t >= T || k == K) {
                            bad++;
                            continue;
                        }
                        seen[g * K + k]++;
                        if (!fp8) {
                            bad += memcmp(U16(o[0]) + (e * Ta + i) * H, gx + g * H, H * 2) != 0;
                        } else {
                            bad += memcmp(U8(o[0]) + (e * Ta + i) * H, qt + g * H, H) != 0;
                            for (int p = 0; p < S; p++) {
                                if (!ue) {
                                    bad += F32(o[1])[(e * Ta + i) * S + p] != st[g * NG + p];
                                    continue;
                                }
                                uint32_t v = (uint32_t)I32(o[1])[(e * Ta + i) * S + p];
                                for (int by = 0; by < 4; by++)
                                    bad += ((v >> (8 * by)) & 0xFF) !=
                                           moe_deepep_ll_ue8m0(st[g * NG + 4 * p + by]);
                            }
                        }
                    }
                    begin += cnt;
                    total += cnt;
                }
                bad += total != I32(o[2])[e];
                for (int64_t i = total; i < Ta; i++) bad += I32(o[3])[e * Ta + i] != -1;
            }
            for (int p = 0; p < G * K; p++) bad += seen[p] != (gids[p] >= 0);
            ck_assert_msg(bad == 0, "mode %d R=%d: %d bad rows", m, R, bad);
            /* identity expert in the dispatch layout */
            moe_tensor y = mk(MOE_BF16, 4, SH(R, El, Ta, H)),
                       out = view(MOE_BF16, 3, SH(R, T, H), res);
            for (int64_t e = 0; e < E; e++)
                for (int64_t i = 0; i < I32(o[2])[e]; i++)
                    for (int c = 0; c < H; c++) {
                        int64_t r = (e * Ta + i) * H + c;
                        float sc =
                            !fp8 ? 1.0f
                            : ue
                                ? ldexpf(1.0f,
                                         (int)((((uint32_t)I32(o[1])[(e * Ta + i) * S + c / 512]) >>
                                                (8 * (c / 128 % 4))) &
                                               0xFF) -
                                             127)
                                : F32(o[1])[(e * Ta + i) * S + c / 128];
                        U16(y)[r] = fp8 ? bf(moe_e4m3_to_f32(U8(o[0])[r]) * sc) : U16(o[0])[r];
                    }
            memset(res, 0xAB, sizeof(uint16_t) * G * H);
            EXPECT_OK(moe_ref_deepep_ll_combine(&cfg, &y, &o[3], &o[4], &ids, &w, &out));
            ck_assert_msg(memcmp(res, ref, sizeof(uint16_t) * G * H) == 0, "mode %d R=%d combine",
                          m, R);
            /* reverse every (expert, source rank) block: same combine */
            for (int64_t e = 0; e < E; e++)
                for (int s = 0; s < R; s++) {
                    int64_t lr = I64(o[4])[e * R + s], lo = lr >> 32,
                            hi = lo + (lr & 0xFFFFFFFF) - 1;
                    for (; lo < hi; lo++, hi--) {
                        int32_t ti = I32(o[3])[e * Ta + lo];
                        I32(o[3])[e * Ta + lo] = I32(o[3])[e * Ta + hi];
                        I32(o[3])[e * Ta + hi] = ti;
                        for (int c = 0; c < H; c++) {
                            uint16_t tv = U16(y)[(e * Ta + lo) * H + c];
                            U16(y)[(e * Ta + lo) * H + c] = U16(y)[(e * Ta + hi) * H + c];
                            U16(y)[(e * Ta + hi) * H + c] = tv;
                        }
                    }
                }
            memset(res, 0xAB, sizeof(uint16_t) * G * H);
            EXPECT_OK(moe_ref_deepep_ll_combine(&cfg, &y, &o[3], &o[4], &ids, &w, &out));
            ck_assert_msg(memcmp(res, ref, sizeof(uint16_t) * G * H) == 0, "mode %d R=%d reordered",
                          m, R);
            free(seen);
            freet(5, o), freet(1, &y);
        }
    }
    free(gids), free(gw), free(gx), free(res), free(ref), free(qt), free(st), free(f);
}
END_TEST

/* ------------------------------------------------------------------ */
/* pplx (D) */

/* Every pair routed once, rows in (sending rank, token) order, and the
 * combine is the same bits for any R and dp_size (f32 and bf16 outputs). */
START_TEST(pplx_roundtrip_property)
{
    enum { G = 32, K = 3, E = 16, H = 16, S = 2 };
    int32_t *gids = malloc(sizeof(int32_t) * G * K);
    float *gw = malloc(sizeof(float) * G * K), *gx = malloc(sizeof(float) * G * H);
    float *gs = malloc(sizeof(float) * G * S), *ref = malloc(sizeof(float) * G * H);
    float *res = malloc(sizeof(float) * G * H);
    uint16_t *rb = malloc(sizeof(uint16_t) * G * H), *resb = malloc(sizeof(uint16_t) * G * H);
    gen_ids(gids, G, K, E, 31, 0, 1);
    ck_assert_int_eq(moe_rng_fill_normal(gx, G * H, 32, 1, 0, 0.0f, 1.0f), MOE_OK);
    ck_assert_int_eq(moe_rng_fill_uniform(gw, G * K, 33, 1, 0, 0.0f, 1.0f), MOE_OK);
    for (int i = 0; i < G * S; i++) gs[i] = (float)i;
    for (int g = 0; g < G; g++)
        for (int c = 0; c < H; c++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++) acc = fmaf(gx[g * H + c], gw[g * K + k], acc);
            ref[g * H + c] = acc;
            rb[g * H + c] = bf(acc);
        }
    for (int R = 1; R <= 8; R *= 2)
        for (int dp = 1; dp <= R && dp <= 2; dp *= 2) {
            int ndp = R / dp;
            int64_t T = G / ndp, El = E / R;
            moe_pplx_config cfg = {R, dp, E, T + 2};
            int64_t rows = moe_pplx_rows(&cfg);
            ck_assert_int_eq(rows, (T + 2) * ndp);
            moe_tensor x = view(MOE_F32, 3, SH(ndp, T, H), gx),
                       sc = view(MOE_F32, 3, SH(ndp, T, S), gs);
            moe_tensor ids = view(MOE_I32, 3, SH(ndp, T, K), gids),
                       w = view(MOE_F32, 3, SH(ndp, T, K), gw);
            moe_tensor o[4] = {mk(MOE_F32, 4, SH(R, El, rows, H)),
                               mk(MOE_F32, 4, SH(R, El, rows, S)), mk(MOE_I32, 2, SH(R, El)),
                               mk(MOE_I32, 3, SH(R, El, rows))};
            moe_pplx_recv rv = {&o[0], &o[1], &o[2], &o[3]};
            EXPECT_OK(moe_ref_pplx_dispatch(&cfg, &x, &sc, &ids, &rv));
            int *seen = calloc(G * K, sizeof *seen), bad = 0;
            for (int64_t e = 0; e < E; e++) {
                int64_t prev = -1;
                for (int64_t i = 0; i < rows; i++) {
                    int32_t g = I32(o[3])[e * rows + i];
                    if (i >= I32(o[2])[e]) {
                        bad += g != -1;
                        continue;
                    }
                    int k = 0;
                    while (k < K && gids[g * K + k] != e) k++;
                    if (g < 0 || g >= G || k == K) {
                        bad++;
                        continue;
                    }
                    seen[g * K + k]++;
                    int64_t t = g % T,
                            key = ((g / T) * dp + t % dp) * T + t; /* (sending rank, token) */
                    bad += key <= prev;
                    prev = key;
                    bad += memcmp(F32(o[0]) + (e * rows + i) * H, gx + g * H, H * 4) != 0;
                    bad += memcmp(F32(o[1]) + (e * rows + i) * S, gs + g * S, S * 4) != 0;
                }
            }
            for (int p = 0; p < G * K; p++) bad += seen[p] != 1;
            ck_assert_msg(bad == 0, "R=%d dp=%d: %d bad rows", R, dp, bad);
            /* identity experts: expert_y = the dispatched rows */
            moe_tensor out = view(MOE_F32, 3, SH(ndp, T, H), res),
                       outb = view(MOE_BF16, 3, SH(ndp, T, H), resb);
            EXPECT_OK(moe_ref_pplx_combine(&cfg, &o[0], &o[2], &o[3], &ids, &w, &out));
            EXPECT_OK(moe_ref_pplx_combine(&cfg, &o[0], &o[2], &o[3], &ids, &w, &outb));
            ck_assert_msg(memcmp(res, ref, sizeof(float) * G * H) == 0, "R=%d dp=%d f32 combine", R,
                          dp);
            ck_assert_msg(memcmp(resb, rb, sizeof(uint16_t) * G * H) == 0,
                          "R=%d dp=%d bf16 combine", R, dp);
            free(seen);
            freet(4, o);
        }
    free(gids), free(gw), free(gx), free(gs), free(ref), free(res), free(rb), free(resb);
}
END_TEST

START_TEST(pplx_refuses_minus_one)
{
    moe_pplx_config cfg = {2, 1, 4, 2};
    moe_tensor x = mk(MOE_BF16, 3, SH(2, 2, 4)), ids = mk(MOE_I32, 3, SH(2, 2, 2));
    moe_tensor o[4] = {mk(MOE_BF16, 4, SH(2, 2, 4, 4)), mk(MOE_I32, 2, SH(2, 2)),
                       mk(MOE_I32, 3, SH(2, 2, 4))};
    moe_pplx_recv rv = {&o[0], NULL, &o[1], &o[2]};
    static const int32_t v[8] = {0, 1, 2, 3, 1, -1, 0, 2};
    memcpy(ids.data, v, sizeof v);
    EXPECT_ERR(moe_ref_pplx_dispatch(&cfg, &x, NULL, &ids, &rv), MOE_ERR_INVALID_ARG,
               "topk_ids[1][0][1] = -1: pplx has no -1");
    I32(ids)[5] = 1;
    EXPECT_ERR(moe_ref_pplx_dispatch(&cfg, &x, NULL, &ids, &rv), MOE_ERR_INVALID_ARG,
               "expert 1 in slots 0 and 1");
    I32(ids)[5] = 3;
    EXPECT_OK(moe_ref_pplx_dispatch(&cfg, &x, NULL, &ids, &rv));
    freet(3, o), freet(1, &x), freet(1, &ids);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Hybrid-EP (A.7, seed 002) */

/* R = 2, E = 4, T = 3, K = 2; global token g = s*3 + t. Rank 0 (experts
 * 0, 1): e0 <- g0 g1 g3 g5, e1 <- g1 g2 g3. Rank 1: e2 <- g0 g4,
 * e3 <- g2 g4 g5. Prob of (g, k) = 2g + k + 1. */
static const int32_t hep_ids[12] = {0, 2, 1, 0, 3, 1, 0, 1, 2, 3, 0, 3};

typedef struct {
    moe_tensor t[8];
    moe_hep_permuted p;
} hep_out;

static void hep_alloc(hep_out *h, int N, int with_scales)
{
    h->t[0] = mk(MOE_F32, 3, SH(2, N, 1));
    h->t[1] = mk(MOE_F32, 2, SH(2, N));
    h->t[2] = mk(MOE_F32, 3, SH(2, N, 1));
    h->t[3] = mk(MOE_I32, 2, SH(2, 2));
    h->t[4] = mk(MOE_I64, 2, SH(2, 2));
    h->t[5] = mk(MOE_I32, 3, SH(2, 6, 2));
    h->t[6] = mk(MOE_I32, 1, SH(2));
    h->t[7] = mk(MOE_I32, 1, SH(2));
    h->p = (moe_hep_permuted){&h->t[0], &h->t[1], with_scales ? &h->t[2] : NULL,
                              &h->t[3], &h->t[4], &h->t[5],
                              &h->t[6], &h->t[7]};
}

START_TEST(hep_permute_hand)
{
    moe_tensor x = mk(MOE_F32, 3, SH(2, 3, 1)), sc = mk(MOE_F32, 3, SH(2, 3, 1));
    moe_tensor ids = mk(MOE_I32, 3, SH(2, 3, 2)), w = mk(MOE_F32, 3, SH(2, 3, 2));
    memcpy(ids.data, hep_ids, sizeof hep_ids);
    for (int g = 0; g < 6; g++) {
        F32(x)[g] = (float)(10 + g);
        F32(sc)[g] = (float)(100 + g);
        for (int k = 0; k < 2; k++) F32(w)[g * 2 + k] = (float)(2 * g + k + 1);
    }
    moe_hep_config cfg = {2, 4, 2, 4, 0, 0};
    int64_t cap;
    EXPECT_OK(moe_hep_permute_capacity(&cfg, &ids, &cap));
    ck_assert_int_eq(cap, 8);
    hep_out h;
    hep_alloc(&h, 9, 1); /* one row more than needed: zero, like a pad */
    EXPECT_OK(moe_ref_hep_dispatch_with_permute(&cfg, &x, &sc, &ids, &w, &h.p));
    /* expert-major, ascending global token, pads of hidden 0 / prob 0 / scale 0 */
    static const float xr[18] = {10, 11, 13, 15, 11, 12, 13, 0, 0, 10, 14, 0, 0, 12, 14, 15, 0, 0};
    static const float pr[18] = {1, 4, 7, 11, 3, 6, 8, 0, 0, 2, 9, 0, 0, 5, 10, 12, 0, 0};
    static const int32_t tpe[4] = {4, 3, 2, 3};
    static const int64_t ppe[4] = {4, 4, 4, 4};
    /* row_id_map[rank][g][local expert] */
    static const int32_t map[24] = {0, -1, 1,  4,  -1, 5, 2,  6,  -1, -1, 3,  -1,
                                    0, -1, -1, -1, -1, 4, -1, -1, 1,  5,  -1, 6};
    int bad = 0;
    for (int i = 0; i < 18; i++) {
        bad += F32(h.t[0])[i] != xr[i] || F32(h.t[1])[i] != pr[i];
        bad += F32(h.t[2])[i] != (xr[i] == 0 ? 0.0f : xr[i] + 90.0f);
    }
    ck_assert_int_eq(bad, 0);
    ck_assert_mem_eq(h.t[3].data, tpe, sizeof tpe);
    ck_assert_mem_eq(h.t[4].data, ppe, sizeof ppe);
    ck_assert_mem_eq(h.t[5].data, map, sizeof map);
    ck_assert(I32(h.t[6])[0] == 0 && I32(h.t[6])[1] == 0);
    ck_assert(I32(h.t[7])[0] == 5 && I32(h.t[7])[1] == 4); /* g4 misses rank 0; g1, g3 rank 1 */
    freet(8, h.t);

    /* non-blocking, 4 rows: expert 0 fits, expert 1 (offset 4) loses all;
     * rank 1 keeps e2 and its two pad rows, e3 is dropped */
    cfg.non_blocking = 1, cfg.num_permuted_tokens = 4;
    hep_alloc(&h, 4, 0);
    EXPECT_OK(moe_ref_hep_dispatch_with_permute(&cfg, &x, NULL, &ids, &w, &h.p));
    static const int32_t tpe4[4] = {4, 0, 2, 0};
    static const int64_t ppe4[4] = {4, 0, 4, 0};
    ck_assert_mem_eq(h.t[3].data, tpe4, sizeof tpe4);
    ck_assert_mem_eq(h.t[4].data, ppe4, sizeof ppe4);
    ck_assert(I32(h.t[6])[0] == 1 && I32(h.t[6])[1] == 1);
    ck_assert(I32(h.t[5])[3] == -1 && I32(h.t[5])[12 + 2 * 2 + 1] == -1); /* (g1, e1), (g2, e3) */
    ck_assert(F32(h.t[0])[4 + 2] == 0.0f && F32(h.t[0])[4 + 3] == 0.0f &&
              F32(h.t[1])[4 + 3] == 0.0f);
    freet(8, h.t);

    /* no padding, 5 rows: e1 keeps only its lowest dense index (g1) */
    cfg.pad_multiple = 1, cfg.num_permuted_tokens = 5;
    hep_alloc(&h, 5, 0);
    EXPECT_OK(moe_ref_hep_dispatch_with_permute(&cfg, &x, NULL, &ids, &w, &h.p));
    static const int32_t tpe5[4] = {4, 1, 2, 3};
    ck_assert_mem_eq(h.t[3].data, tpe5, sizeof tpe5);
    ck_assert(I32(h.t[6])[0] == 1 && I32(h.t[6])[1] == 0);
    ck_assert(F32(h.t[0])[4] == 11.0f && I32(h.t[5])[2 * 2 + 1] == -1);
    freet(8, h.t);

    /* exactly enough: no overflow */
    cfg.pad_multiple = 4, cfg.num_permuted_tokens = 8;
    hep_alloc(&h, 8, 0);
    EXPECT_OK(moe_ref_hep_dispatch_with_permute(&cfg, &x, NULL, &ids, &w, &h.p));
    ck_assert(I32(h.t[6])[0] == 0 && I32(h.t[6])[1] == 0);
    freet(8, h.t);
    /* the capacity must be a multiple of pad_multiple, and exact in size */
    cfg.num_permuted_tokens = 6;
    hep_alloc(&h, 6, 0);
    EXPECT_ERR(moe_ref_hep_dispatch_with_permute(&cfg, &x, NULL, &ids, &w, &h.p),
               MOE_ERR_INVALID_ARG, "multiple of pad_multiple 4");
    cfg.num_permuted_tokens = 4;
    EXPECT_ERR(moe_ref_hep_dispatch_with_permute(&cfg, &x, NULL, &ids, &w, &h.p), MOE_ERR_SHAPE,
               "[R, num_permuted_tokens, H]");
    /* blocking mode with too few rows */
    cfg.non_blocking = 0;
    EXPECT_ERR(moe_ref_hep_dispatch_with_permute(&cfg, &x, NULL, &ids, &w, &h.p), MOE_ERR_SHAPE,
               "rank 0 needs 8");
    freet(8, h.t);
    moe_tensor_free(&x), moe_tensor_free(&sc), moe_tensor_free(&ids), moe_tensor_free(&w);
}
END_TEST

/* Combine order (A.7): per-rank rounding of the unpermute, own node first
 * in local-rank order, other nodes home-1, home-2, ... each rounded. */
START_TEST(hep_combine_hand)
{
    const float u = 0x1p-8f;
    /* R = 4, E = 8 (2 per rank), T = 1. Token g = 0 (home rank 0) has rows
     * on rank 0 (experts 0 and 1: 1.0 and 2^-8) and rank 1 (2^-8). */
    moe_tensor y = mk(MOE_BF16, 3, SH(4, 2, 1)), map = mk(MOE_I32, 3, SH(4, 4, 2));
    moe_tensor out = mk(MOE_BF16, 3, SH(4, 1, 1));
    for (int i = 0; i < 32; i++) I32(map)[i] = -1;
    I32(map)[0] = 0, I32(map)[1] = 1; /* rank 0, g0, experts 0/1 -> rows 0/1 */
    I32(map)[8] = 0;                  /* rank 1, g0, expert 0 -> row 0 */
    U16(y)[0] = bf(1.0f), U16(y)[1] = bf(u), U16(y)[2] = bf(u);
    moe_hep_config cfg = {4, 8, 4, 1, 0, 0};
    EXPECT_OK(moe_ref_hep_combine_with_unpermute(&cfg, &y, &map, NULL, &out, NULL));
    /* rank 0's unpermute rounds 1 + 2^-8 to 1.0; + 2^-8 rounds to 1.0 again
     * (one f32 sum of all three would give 1 + 2^-7) */
    ck_assert_uint_eq(U16(out)[0], 0x3F80);
    /* rows on two ranks of another node: rounded there before adding */
    for (int i = 0; i < 32; i++) I32(map)[i] = -1;
    I32(map)[0] = 0;     /* rank 0 row 0: 2^-8 (home, node 0) */
    I32(map)[2 * 8] = 0; /* rank 2 row 0: 1.0 */
    I32(map)[3 * 8] = 0; /* rank 3 row 0: 2^-8 */
    U16(y)[0] = bf(u), U16(y)[4] = bf(1.0f), U16(y)[6] = bf(u);
    cfg.num_ranks_per_node = 2; /* node 1 = ranks 2, 3: 1 + 2^-8 -> 1.0 */
    EXPECT_OK(moe_ref_hep_combine_with_unpermute(&cfg, &y, &map, NULL, &out, NULL));
    ck_assert_uint_eq(U16(out)[0], 0x3F80);
    cfg.num_ranks_per_node = 4; /* one node: 2^-8 + 1 + 2^-8 = 1 + 2^-7 */
    EXPECT_OK(moe_ref_hep_combine_with_unpermute(&cfg, &y, &map, NULL, &out, NULL));
    ck_assert_uint_eq(U16(out)[0], 0x3F81);
    freet(1, &y), freet(1, &map), freet(1, &out);

    /* node order, visible in f32: home node 1 of 4 (one rank each); partials
     * P1 = 2^24, P0 = 1, P3 = 1, P2 = 2 added as P1, P0, P3, P2 give
     * 2^24 + 2 (ascending 0..3 would give 2^24 + 4, and 1, 2, 3, 0 too) */
    moe_tensor yf = mk(MOE_F32, 3, SH(4, 1, 1)), m4 = mk(MOE_I32, 3, SH(4, 4, 1));
    moe_tensor of = mk(MOE_F32, 3, SH(4, 1, 1)), pf = mk(MOE_F32, 2, SH(4, 1));
    moe_tensor op = mk(MOE_F32, 3, SH(4, 1, 4));
    for (int i = 0; i < 16; i++) I32(m4)[i] = -1;
    for (int j = 0; j < 4; j++) I32(m4)[j * 4 + 1] = 0; /* every rank holds g1 in row 0 */
    F32(yf)[0] = 1.0f, F32(yf)[1] = 0x1p24f, F32(yf)[2] = 2.0f, F32(yf)[3] = 1.0f;
    for (int j = 0; j < 4; j++) F32(pf)[j] = 0.5f + (float)j;
    moe_hep_config c4 = {4, 4, 1, 1, 0, 0};
    EXPECT_OK(moe_ref_hep_combine_with_unpermute(&c4, &yf, &m4, &pf, &of, &op));
    ck_assert(F32(of)[1] == 0x1p24f + 2.0f);
    ck_assert(F32(of)[0] == 0.0f && F32(of)[2] == 0.0f);
    /* probs are gathered back, not summed: g1 has expert j's prob */
    for (int e = 0; e < 4; e++) ck_assert(F32(op)[4 + e] == 0.5f + (float)e && F32(op)[e] == 0.0f);
    moe_tensor t5[5] = {yf, m4, of, pf, op};
    freet(5, t5);
}
END_TEST

/* Permute then unpermute-combine with identity experts on exact data:
 * every pair once, pads zero, sums K*x at every R and node split. */
START_TEST(hep_roundtrip_property)
{
    enum { G = 48, K = 4, E = 16, H = 8 };
    int32_t *gids = malloc(sizeof(int32_t) * G * K);
    float *gw = malloc(sizeof(float) * G * K);
    uint16_t *gx = malloc(sizeof(uint16_t) * G * H), *res = malloc(sizeof(uint16_t) * G * H);
    gen_ids(gids, G, K, E, 41, 0, 1);
    gen_small_bf16(gx, G * H, 42);
    ck_assert_int_eq(moe_rng_fill_uniform(gw, G * K, 43, 1, 0, 0.0f, 1.0f), MOE_OK);
    for (int R = 1; R <= 8; R *= 2)
        for (int pad = 1; pad <= 8; pad *= 8)
            for (int rpn = 1; rpn <= R; rpn *= 2) {
                int64_t T = G / R, El = E / R, N;
                moe_hep_config cfg = {R, E, rpn, pad, 0, 0};
                moe_tensor x = view(MOE_BF16, 3, SH(R, T, H), gx),
                           ids = view(MOE_I32, 3, SH(R, T, K), gids);
                moe_tensor w = view(MOE_F32, 3, SH(R, T, K), gw);
                EXPECT_OK(moe_hep_permute_capacity(&cfg, &ids, &N));
                moe_tensor o[7] = {mk(MOE_BF16, 3, SH(R, N, H)),     mk(MOE_F32, 2, SH(R, N)),
                                   mk(MOE_I32, 2, SH(R, El)),        mk(MOE_I64, 2, SH(R, El)),
                                   mk(MOE_I32, 3, SH(R, R * T, El)), mk(MOE_I32, 1, SH(R)),
                                   mk(MOE_F32, 3, SH(R, T, E))};
                moe_hep_permuted p = {&o[0], &o[1], NULL, &o[2], &o[3], &o[4], &o[5], NULL};
                EXPECT_OK(moe_ref_hep_dispatch_with_permute(&cfg, &x, NULL, &ids, &w, &p));
                int bad = 0;
                uint8_t *used = calloc((size_t)(R * N), 1);
                for (int64_t g = 0; g < G; g++)
                    for (int k = 0; k < K; k++) {
                        int e = gids[g * K + k], j = e / (int)El;
                        int32_t r = I32(o[4])[(j * G + g) * El + e % El];
                        if (r < 0 || r >= N) {
                            bad++;
                            continue;
                        }
                        used[j * N + r]++;
                        bad += memcmp(U16(o[0]) + (j * N + r) * H, gx + g * H, H * 2) != 0;
                        bad += F32(o[1])[j * N + r] != gw[g * K + k];
                    }
                int64_t mapped = 0;
                for (int64_t i = 0; i < R * G * El; i++) mapped += I32(o[4])[i] >= 0;
                bad += mapped != G * K;
                for (int64_t i = 0; i < R * N; i++) /* pads and tail: zero */
                    if (!used[i]) {
                        for (int c = 0; c < H; c++) bad += U16(o[0])[i * H + c] != 0;
                        bad += F32(o[1])[i] != 0.0f;
                    }
                for (int64_t e = 0; e < E; e++)
                    bad += I64(o[3])[e] % pad != 0 || I64(o[3])[e] < I32(o[2])[e];
                ck_assert_msg(bad == 0, "R=%d pad=%d rpn=%d: %d bad", R, pad, rpn, bad);
                free(used);
                /* identity experts, unweighted combine: K * x, exactly */
                moe_tensor out = view(MOE_BF16, 3, SH(R, T, H), res);
                EXPECT_OK(
                    moe_ref_hep_combine_with_unpermute(&cfg, &o[0], &o[4], &o[1], &out, &o[6]));
                for (int i = 0; i < G * H; i++) bad += fb(res[i]) != (float)K * fb(gx[i]);
                for (int64_t g = 0; g < G; g++)
                    for (int k = 0; k < K; k++)
                        bad += F32(o[6])[g * E + gids[g * K + k]] != gw[g * K + k];
                ck_assert_msg(bad == 0, "R=%d pad=%d rpn=%d: %d bad sums", R, pad, rpn, bad);
                freet(7, o);
            }
    free(gids), free(gw), free(gx), free(res);
}
END_TEST

START_TEST(hep_buffer_sizes_seed)
{
    /* seed 002 4.2: EP64, 256 experts, BF16, H = 7168, 4096 tokens/rank */
    moe_hep_buffers b;
    EXPECT_OK(moe_hep_buffer_sizes(7168, 4096, 4, 64, 1, 2, 0, &b)); /* MNNVL: 64 x 1 */
    ck_assert_uint_eq(b.max_tokens, 262144);
    ck_assert_uint_eq(b.token_bytes, 3758096384ull); /* ~3.5 GB */
    ck_assert_uint_eq(b.prob_bytes, 268435456ull);   /* ~256 MB */
    ck_assert_uint_eq(b.scale_bytes, 0);
    ck_assert_uint_eq(b.rdma_token_bytes, 0);
    ck_assert_uint_eq(b.total_bytes, 3758096384ull + 268435456ull); /* ~3.75 GB */
    EXPECT_OK(moe_hep_buffer_sizes(7168, 4096, 4, 8, 8, 2, 0, &b)); /* RDMA: 8 x 8 */
    ck_assert_uint_eq(b.max_tokens, 262144);
    ck_assert_uint_eq(b.prob_bytes, 33554432ull);        /* ~32 MB */
    ck_assert_uint_eq(b.rdma_token_bytes, 411041792ull); /* ~392 MB */
    ck_assert_uint_eq(b.rdma_prob_bytes, 3670016ull);    /* ~3.5 MB */
    ck_assert_uint_eq(b.total_bytes, 3758096384ull + 33554432ull + 411041792ull + 3670016ull);
    EXPECT_OK(moe_hep_buffer_sizes(7168, 4096, 4, 8, 8, 1, 1, &b)); /* fp8 adds scales */
    ck_assert_uint_eq(b.scale_bytes, 262144ull * 56 * 4);
    EXPECT_ERR(moe_hep_buffer_sizes(7168, 4096, 0, 8, 8, 2, 0, &b), MOE_ERR_INVALID_ARG,
               "experts_per_rank 0");
    EXPECT_ERR(moe_hep_buffer_sizes(-1, 4096, 4, 8, 8, 2, 0, &b), MOE_ERR_INVALID_ARG, "hidden -1");
    EXPECT_ERR(moe_hep_buffer_sizes(7168, 4096, 4, 8, 0, 2, 0, &b), MOE_ERR_INVALID_ARG,
               "num_nodes 0");
    EXPECT_ERR(moe_hep_buffer_sizes(1ll << 40, 1ll << 40, 4, 8, 8, 2, 0, &b), MOE_ERR_NOMEM,
               "overflows");
    EXPECT_ERR(moe_hep_buffer_sizes(7168, 4096, 4, 8, 8, 2, 0, NULL), MOE_ERR_NULL, "out");
    /* DeepEP LL buffer (A.5): T_max 128, H 7168, E 256 */
    uint64_t ll;
    EXPECT_OK(moe_deepep_ll_buffer_bytes(128, 7168, 256, &ll));
    ck_assert_uint_eq(ll, 4ull * 477102080ull + 2048ull);
    EXPECT_ERR(moe_deepep_ll_buffer_bytes(128, 7168, 0, &ll), MOE_ERR_INVALID_ARG, "num_experts 0");
    EXPECT_ERR(moe_deepep_ll_buffer_bytes(1ll << 40, 1ll << 40, 256, &ll), MOE_ERR_NOMEM,
               "overflows");
}
END_TEST

/* ------------------------------------------------------------------ */
/* All-gather / reduce-scatter (vLLM NaiveDPEP) */

START_TEST(allgather_rs_property)
{
    enum { G = 32, K = 4, E = 16, H = 8, S = 3 };
    int32_t *gids = malloc(sizeof(int32_t) * G * K);
    float *gw = malloc(sizeof(float) * G * K), *gs = malloc(sizeof(float) * G * S);
    uint16_t *gx = malloc(sizeof(uint16_t) * G * H), *ref = malloc(sizeof(uint16_t) * G * H);
    uint16_t *res = malloc(sizeof(uint16_t) * G * H);
    gen_ids(gids, G, K, E, 51, 0, 0);
    gen_small_bf16(gx, G * H, 52);
    gen_pow2_weights(gw, G * K, 53);
    for (int i = 0; i < G * S; i++) gs[i] = (float)i * 0.25f;
    for (int g = 0; g < G; g++)
        for (int c = 0; c < H; c++) {
            float v = 0.0f;
            for (int k = 0; k < K; k++) v += gw[g * K + k] * fb(gx[g * H + c]);
            ref[g * H + c] = bf(v);
        }
    for (int R = 1; R <= 8; R *= 2) {
        int64_t T = G / R, El = E / R;
        moe_tensor x = view(MOE_BF16, 3, SH(R, T, H), gx), sc = view(MOE_F32, 3, SH(R, T, S), gs);
        moe_tensor ids = view(MOE_I32, 3, SH(R, T, K), gids), w = view(MOE_F32, 3, SH(R, T, K), gw);
        moe_tensor o[4] = {mk(MOE_BF16, 2, SH(G, H)), mk(MOE_F32, 2, SH(G, S)),
                           mk(MOE_I32, 2, SH(G, K)), mk(MOE_F32, 2, SH(G, K))};
        EXPECT_OK(
            moe_ref_ep_allgather_dispatch(R, E, &x, &sc, &ids, &w, &o[0], &o[1], &o[2], &o[3]));
        ck_assert_mem_eq(o[0].data, gx, sizeof(uint16_t) * G * H);
        ck_assert_mem_eq(o[1].data, gs, sizeof(float) * G * S);
        ck_assert_mem_eq(o[2].data, gids, sizeof(int32_t) * G * K);
        ck_assert_mem_eq(o[3].data, gw, sizeof(float) * G * K);
        /* rank j's experts see every token: weighted sum over its own slots */
        moe_tensor part = mk(MOE_BF16, 3, SH(R, G, H)), out = view(MOE_BF16, 3, SH(R, T, H), res);
        for (int j = 0; j < R; j++)
            for (int g = 0; g < G; g++)
                for (int c = 0; c < H; c++) {
                    float v = 0.0f;
                    for (int k = 0; k < K; k++)
                        if (I32(o[2])[g * K + k] / El == j)
                            v += F32(o[3])[g * K + k] * fb(U16(o[0])[g * H + c]);
                    U16(part)[(j * G + g) * H + c] = bf(v);
                }
        EXPECT_OK(moe_ref_ep_reduce_scatter_combine(R, &part, &out));
        ck_assert_msg(memcmp(res, ref, sizeof(uint16_t) * G * H) == 0, "R=%d", R);
        freet(4, o), freet(1, &part);
    }
    /* f32: the fixed rank order is visible: (2^24 + 1) + 1 = 2^24 */
    moe_tensor p = mk(MOE_F32, 3, SH(4, 4, 1)), o = mk(MOE_F32, 3, SH(4, 1, 1));
    F32(p)[0] = 0x1p24f, F32(p)[4] = 1.0f, F32(p)[8] = 1.0f, F32(p)[12] = 2.0f;
    EXPECT_OK(moe_ref_ep_reduce_scatter_combine(4, &p, &o));
    ck_assert(F32(o)[0] == 0x1p24f + 2.0f);
    freet(1, &p), freet(1, &o);
    free(gids), free(gw), free(gs), free(gx), free(ref), free(res);
}
END_TEST

/* T = 0 is a valid empty problem for every stage. */
START_TEST(empty_problems)
{
    moe_tensor x = mk(MOE_BF16, 3, SH(2, 0, 128)), ids = mk(MOE_I32, 3, SH(2, 0, 2));
    moe_tensor w = mk(MOE_F32, 3, SH(2, 0, 2)), out = mk(MOE_BF16, 3, SH(2, 0, 128));
    /* DeepEP normal */
    moe_deepep_config dc = {2, 4, 2, 1};
    int64_t rows = -1;
    EXPECT_OK(moe_deepep_dispatch_capacity(&dc, &ids, &rows));
    ck_assert_int_eq(rows, 0);
    moe_tensor d[8] = {mk(MOE_BF16, 3, SH(2, 0, 128)), mk(MOE_I32, 3, SH(2, 0, 2)),
                       mk(MOE_F32, 3, SH(2, 0, 2)),    mk(MOE_I32, 2, SH(2, 0)),
                       mk(MOE_I32, 1, SH(2)),          mk(MOE_I32, 2, SH(2, 2)),
                       mk(MOE_BOOL, 3, SH(2, 0, 2)),   mk(MOE_I32, 2, SH(2, 4))};
    moe_deepep_recv rv = {&d[0], NULL, &d[1], &d[2], &d[3], &d[4], &d[5], NULL};
    EXPECT_OK(moe_ref_deepep_dispatch(&dc, &x, NULL, &ids, &w, &rv));
    ck_assert(I32(d[4])[0] == 0 && I32(d[4])[1] == 0);
    moe_tensor nr = mk(MOE_I32, 2, SH(2, 2));
    moe_deepep_layout L = {&d[7], &nr, NULL, &d[6]};
    EXPECT_OK(moe_ref_deepep_layout(&dc, &ids, &L));
    EXPECT_OK(moe_ref_deepep_combine(&dc, &d[0], NULL, &d[6], NULL, NULL, &out, NULL));
    /* DeepEP LL */
    moe_deepep_ll_config lc = {2, 4, 0, 1, 1, 0};
    moe_tensor l[5] = {mk(MOE_E4M3, 4, SH(2, 2, 0, 128)), mk(MOE_F32, 4, SH(2, 2, 0, 1)),
                       mk(MOE_I32, 2, SH(2, 2)), mk(MOE_I32, 3, SH(2, 2, 0)),
                       mk(MOE_I64, 3, SH(2, 2, 2))};
    moe_deepep_ll_recv lr = {&l[0], &l[1], &l[2], &l[3], &l[4]};
    EXPECT_OK(moe_ref_deepep_ll_dispatch(&lc, &x, &ids, &lr));
    moe_tensor ly = mk(MOE_BF16, 4, SH(2, 2, 0, 128));
    EXPECT_OK(moe_ref_deepep_ll_combine(&lc, &ly, &l[3], &l[4], &ids, &w, &out));
    /* pplx */
    moe_pplx_config pc = {2, 1, 4, 0};
    moe_tensor p[3] = {mk(MOE_BF16, 4, SH(2, 2, 0, 128)), mk(MOE_I32, 2, SH(2, 2)),
                       mk(MOE_I32, 3, SH(2, 2, 0))};
    moe_pplx_recv pr = {&p[0], NULL, &p[1], &p[2]};
    EXPECT_OK(moe_ref_pplx_dispatch(&pc, &x, NULL, &ids, &pr));
    EXPECT_OK(moe_ref_pplx_combine(&pc, &p[0], &p[1], &p[2], &ids, &w, &out));
    /* Hybrid-EP */
    moe_hep_config hc = {2, 4, 1, 4, 0, 0};
    EXPECT_OK(moe_hep_permute_capacity(&hc, &ids, &rows));
    ck_assert_int_eq(rows, 0);
    moe_tensor h[5] = {mk(MOE_BF16, 3, SH(2, 0, 128)), mk(MOE_I32, 2, SH(2, 2)),
                       mk(MOE_I64, 2, SH(2, 2)), mk(MOE_I32, 3, SH(2, 0, 2)),
                       mk(MOE_I32, 1, SH(2))};
    moe_hep_permuted hp = {&h[0], NULL, NULL, &h[1], &h[2], &h[3], &h[4], NULL};
    EXPECT_OK(moe_ref_hep_dispatch_with_permute(&hc, &x, NULL, &ids, &w, &hp));
    EXPECT_OK(moe_ref_hep_combine_with_unpermute(&hc, &h[0], &h[3], NULL, &out, NULL));
    /* all-gather */
    moe_tensor g[3] = {mk(MOE_BF16, 2, SH(0, 128)), mk(MOE_I32, 2, SH(0, 2)),
                       mk(MOE_F32, 2, SH(0, 2))};
    EXPECT_OK(moe_ref_ep_allgather_dispatch(2, 4, &x, NULL, &ids, &w, &g[0], NULL, &g[1], &g[2]));
    moe_tensor part = mk(MOE_BF16, 3, SH(2, 0, 128));
    EXPECT_OK(moe_ref_ep_reduce_scatter_combine(2, &part, &out));
    freet(8, d), freet(5, l), freet(3, p), freet(5, h), freet(3, g);
    freet(1, &nr), freet(1, &ly), freet(1, &part);
    freet(1, &x), freet(1, &ids), freet(1, &w), freet(1, &out);
}
END_TEST

/* Pinned digests of every combine on one seeded problem with inexact
 * data (R = 4, two nodes): the bits must not depend on compiler or -O
 * level (DESIGN 5); checked against gcc -O2 and clang -O0 builds. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++) h = (h ^ ((const uint8_t *)p)[i]) * 0x100000001B3ull;
    return h;
}

START_TEST(pinned_digests)
{
    enum { R = 4, T = 8, K = 3, E = 8, H = 256, El = E / R };
    uint64_t h[4] = {0xCBF29CE484222325ull, 0xCBF29CE484222325ull, 0xCBF29CE484222325ull,
                     0xCBF29CE484222325ull};
    moe_tensor x = mk(MOE_BF16, 3, SH(R, T, H)), ids = mk(MOE_I32, 3, SH(R, T, K));
    moe_tensor w = mk(MOE_F32, 3, SH(R, T, K)), out = mk(MOE_BF16, 3, SH(R, T, H));
    gen_ids(I32(ids), R * T, K, E, 61, 0, 1);
    for (int i = 0; i < R * T * H; i++) U16(x)[i] = bf(moe_rng_normal(62, 1, (uint64_t)i));
    for (int i = 0; i < R * T * K; i++) F32(w)[i] = moe_rng_uniform(63, 1, (uint64_t)i);
    /* DeepEP normal, two nodes, with a bias: identity experts that weight */
    moe_deepep_config dc = {R, E, 2, 1};
    int64_t N;
    EXPECT_OK(moe_deepep_dispatch_capacity(&dc, &ids, &N));
    moe_tensor d[7] = {mk(MOE_BF16, 3, SH(R, N, H)), mk(MOE_I32, 3, SH(R, N, K)),
                       mk(MOE_F32, 3, SH(R, N, K)),  mk(MOE_I32, 2, SH(R, N)),
                       mk(MOE_I32, 1, SH(R)),        mk(MOE_I32, 2, SH(R, El)),
                       mk(MOE_BOOL, 3, SH(R, T, R))};
    moe_deepep_recv rv = {&d[0], NULL, &d[1], &d[2], &d[3], &d[4], &d[5], NULL};
    EXPECT_OK(moe_ref_deepep_dispatch(&dc, &x, NULL, &ids, &w, &rv));
    moe_tensor pe = mk(MOE_I32, 2, SH(R, E)), pr = mk(MOE_I32, 2, SH(R, R));
    moe_deepep_layout L = {&pe, &pr, NULL, &d[6]};
    EXPECT_OK(moe_ref_deepep_layout(&dc, &ids, &L));
    for (int64_t i = 0; i < R * N; i++)
        for (int c = 0; c < H; c++) {
            float v = 0.0f;
            for (int k = 0; k < K; k++)
                if (I32(d[1])[i * K + k] >= 0)
                    v = fmaf(F32(d[2])[i * K + k], fb(U16(d[0])[i * H + c]), v);
            U16(d[0])[i * H + c] = bf(v);
        }
    EXPECT_OK(moe_ref_deepep_combine(&dc, &d[0], NULL, &d[6], &x, NULL, &out, NULL));
    h[0] = fnv(h[0], out.data, out.nbytes);
    /* DeepEP LL, fp8 with round_scale, identity experts */
    moe_deepep_ll_config lc = {R, E, T, 1, 1, 0};
    moe_tensor l[5] = {mk(MOE_E4M3, 4, SH(R, El, R * T, H)), mk(MOE_F32, 4, SH(R, El, R * T, 2)),
                       mk(MOE_I32, 2, SH(R, El)), mk(MOE_I32, 3, SH(R, El, R * T)),
                       mk(MOE_I64, 3, SH(R, El, R))};
    moe_deepep_ll_recv lr = {&l[0], &l[1], &l[2], &l[3], &l[4]};
    EXPECT_OK(moe_ref_deepep_ll_dispatch(&lc, &x, &ids, &lr));
    moe_tensor ly = mk(MOE_BF16, 4, SH(R, El, R * T, H));
    for (int64_t i = 0; i < R * El * R * T * H; i++)
        U16(ly)[i] = bf(moe_e4m3_to_f32(U8(l[0])[i]) * F32(l[1])[i / H * 2 + i % H / 128]);
    h[1] = fnv(h[1], l[0].data, l[0].nbytes);
    h[1] = fnv(h[1], l[1].data, l[1].nbytes);
    EXPECT_OK(moe_ref_deepep_ll_combine(&lc, &ly, &l[3], &l[4], &ids, &w, &out));
    h[1] = fnv(h[1], out.data, out.nbytes);
    /* pplx, dp_size 2, bf16 out */
    moe_pplx_config pc = {R, 2, E, T * 2};
    moe_tensor px = view(MOE_BF16, 3, SH(2, 2 * T, H), x.data);
    moe_tensor pid = view(MOE_I32, 3, SH(2, 2 * T, K), ids.data),
               pw = view(MOE_F32, 3, SH(2, 2 * T, K), w.data);
    int64_t rows = moe_pplx_rows(&pc);
    moe_tensor p[3] = {mk(MOE_BF16, 4, SH(R, El, rows, H)), mk(MOE_I32, 2, SH(R, El)),
                       mk(MOE_I32, 3, SH(R, El, rows))};
    moe_pplx_recv prv = {&p[0], NULL, &p[1], &p[2]};
    EXPECT_OK(moe_ref_pplx_dispatch(&pc, &px, NULL, &pid, &prv));
    moe_tensor pout = view(MOE_BF16, 3, SH(2, 2 * T, H), out.data);
    EXPECT_OK(moe_ref_pplx_combine(&pc, &p[0], &p[1], &p[2], &pid, &pw, &pout));
    h[2] = fnv(h[2], out.data, out.nbytes);
    /* Hybrid-EP, two nodes, pad 4, experts scale rows by their prob */
    moe_hep_config hc = {R, E, 2, 4, 0, 0};
    EXPECT_OK(moe_hep_permute_capacity(&hc, &ids, &N));
    moe_tensor q[6] = {mk(MOE_BF16, 3, SH(R, N, H)),     mk(MOE_F32, 2, SH(R, N)),
                       mk(MOE_I32, 2, SH(R, El)),        mk(MOE_I64, 2, SH(R, El)),
                       mk(MOE_I32, 3, SH(R, R * T, El)), mk(MOE_I32, 1, SH(R))};
    moe_hep_permuted hp = {&q[0], &q[1], NULL, &q[2], &q[3], &q[4], &q[5], NULL};
    EXPECT_OK(moe_ref_hep_dispatch_with_permute(&hc, &x, NULL, &ids, &w, &hp));
    for (int64_t i = 0; i < R * N * H; i++) U16(q[0])[i] = bf(fb(U16(q[0])[i]) * F32(q[1])[i / H]);
    EXPECT_OK(moe_ref_hep_combine_with_unpermute(&hc, &q[0], &q[4], NULL, &out, NULL));
    h[3] = fnv(h[3], out.data, out.nbytes);
    /* DeepEP normal, DeepEP-LL (dispatch and combine), pplx, Hybrid-EP */
    static const uint64_t pinned[4] = {0xF9F6838CD26B44E1ull, 0x743B56FC362B4A4Full,
                                       0xF2DCB3E5F20AC61Cull, 0x8692A41635E7A19Cull};
    for (int i = 0; i < 4; i++)
        ck_assert_msg(h[i] == pinned[i], "digest %d: 0x%016llXull", i, (unsigned long long)h[i]);
    freet(7, d), freet(5, l), freet(3, p), freet(6, q);
    freet(1, &pe), freet(1, &pr), freet(1, &ly);
    freet(1, &x), freet(1, &ids), freet(1, &w), freet(1, &out);
}
END_TEST

/* Outputs come from the allocator zeroed, so a dispatcher that leaves its
 * pad rows or unused expert slots as it found them would pass every test
 * above: here the same dispatch into outputs poisoned with 0xA5 must give
 * the same bytes as into zeroed ones. */
static void poison(int n, moe_tensor *ts)
{
    for (int i = 0; i < n; i++) memset(ts[i].data, 0xA5, ts[i].nbytes);
}

static int differing_tensors(int n, const moe_tensor *a, const moe_tensor *b)
{
    int bad = 0;
    for (int i = 0; i < n; i++) bad += a[i].nbytes != b[i].nbytes || memcmp(a[i].data, b[i].data, a[i].nbytes);
    return bad;
}

START_TEST(dispatch_writes_every_byte)
{
    enum { R = 4, T = 8, K = 3, E = 8, H = 16, El = E / R };
    moe_tensor x = mk(MOE_BF16, 3, SH(R, T, H)), ids = mk(MOE_I32, 3, SH(R, T, K));
    moe_tensor w = mk(MOE_F32, 3, SH(R, T, K));
    gen_ids(I32(ids), R * T, K, E, 71, 0, 1);
    for (int i = 0; i < R * T * H; i++) U16(x)[i] = bf(moe_rng_normal(72, 1, (uint64_t)i));
    for (int i = 0; i < R * T * K; i++) F32(w)[i] = moe_rng_uniform(73, 1, (uint64_t)i);
    /* pplx, dp_size 2: each expert's slots past its count */
    moe_pplx_config pc = {R, 2, E, T * 2};
    moe_tensor px = view(MOE_BF16, 3, SH(2, 2 * T, H), x.data), pid = view(MOE_I32, 3, SH(2, 2 * T, K), ids.data);
    int64_t rows = moe_pplx_rows(&pc), used = 0;
    moe_tensor p[2][3];
    for (int v = 0; v < 2; v++) {
        p[v][0] = mk(MOE_BF16, 4, SH(R, El, rows, H)), p[v][1] = mk(MOE_I32, 2, SH(R, El));
        p[v][2] = mk(MOE_I32, 3, SH(R, El, rows));
        if (v) poison(3, p[v]);
        moe_pplx_recv prv = {&p[v][0], NULL, &p[v][1], &p[v][2]};
        EXPECT_OK(moe_ref_pplx_dispatch(&pc, &px, NULL, &pid, &prv));
    }
    for (int i = 0; i < R * El; i++) used += I32(p[0][1])[i];
    ck_assert_msg(used < R * El * rows, "pplx: no unused slot, the test would prove nothing");
    ck_assert_msg(differing_tensors(3, p[0], p[1]) == 0, "pplx dispatch leaves bytes of its outputs unwritten");
    /* Hybrid-EP, two nodes, pad 4: the pad rows */
    moe_hep_config hc = {R, E, 2, 4, 0, 0};
    int64_t N, kept = 0, padded = 0;
    EXPECT_OK(moe_hep_permute_capacity(&hc, &ids, &N));
    moe_tensor q[2][6];
    for (int v = 0; v < 2; v++) {
        q[v][0] = mk(MOE_BF16, 3, SH(R, N, H)), q[v][1] = mk(MOE_F32, 2, SH(R, N));
        q[v][2] = mk(MOE_I32, 2, SH(R, El)), q[v][3] = mk(MOE_I64, 2, SH(R, El));
        q[v][4] = mk(MOE_I32, 3, SH(R, R * T, El)), q[v][5] = mk(MOE_I32, 1, SH(R));
        if (v) poison(6, q[v]);
        moe_hep_permuted hp = {&q[v][0], &q[v][1], NULL, &q[v][2], &q[v][3], &q[v][4], &q[v][5], NULL};
        EXPECT_OK(moe_ref_hep_dispatch_with_permute(&hc, &x, NULL, &ids, &w, &hp));
    }
    for (int i = 0; i < R * El; i++) kept += I32(q[0][2])[i], padded += I64(q[0][3])[i];
    ck_assert_msg(kept < padded, "hybrid-ep: no pad row, the test would prove nothing");
    ck_assert_msg(differing_tensors(6, q[0], q[1]) == 0, "hybrid-ep dispatch leaves bytes of its outputs unwritten");
    freet(3, p[0]), freet(3, p[1]), freet(6, q[0]), freet(6, q[1]);
    freet(1, &x), freet(1, &ids), freet(1, &w);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Error paths: status and a message naming the argument and the rule. */

START_TEST(errors_deepep)
{
    moe_tensor x = mk(MOE_BF16, 3, SH(2, 3, 4)), ids = mk(MOE_I32, 3, SH(2, 3, 2));
    moe_tensor w = mk(MOE_F32, 3, SH(2, 3, 2)), k0 = mk(MOE_I32, 3, SH(2, 3, 0));
    moe_tensor k5 = mk(MOE_I32, 3, SH(2, 3, 5)), e2 = mk(MOE_E2M1, 3, SH(2, 3, 4));
    moe_tensor sb = mk(MOE_BF16, 3, SH(2, 3, 1));
    memcpy(ids.data, hand_ids, sizeof hand_ids);
    moe_tensor o[8] = {mk(MOE_BF16, 3, SH(2, 4, 4)), mk(MOE_I32, 3, SH(2, 4, 2)),
                       mk(MOE_F32, 3, SH(2, 4, 2)),  mk(MOE_I32, 2, SH(2, 4)),
                       mk(MOE_I32, 1, SH(2)),        mk(MOE_I32, 2, SH(2, 2)),
                       mk(MOE_BOOL, 3, SH(2, 3, 2)), mk(MOE_BF16, 3, SH(2, 3, 4))};
    moe_deepep_recv rv = {&o[0], NULL, &o[1], &o[2], &o[3], &o[4], &o[5], NULL};
    moe_deepep_config cfg = {2, 4, 2, 1}, c;
    EXPECT_OK(moe_ref_deepep_dispatch(&cfg, &x, NULL, &ids, &w, &rv));
    EXPECT_ERR(moe_ref_deepep_dispatch(NULL, &x, NULL, &ids, &w, &rv), MOE_ERR_NULL, "cfg");
    EXPECT_ERR(moe_ref_deepep_dispatch(&cfg, &x, NULL, &ids, &w, NULL), MOE_ERR_NULL, "out");
    c = cfg, c.world_size = 3;
    EXPECT_ERR(moe_ref_deepep_dispatch(&c, &x, NULL, &ids, &w, &rv), MOE_ERR_INVALID_ARG,
               "world_size 3");
    c = cfg, c.num_experts = 5;
    EXPECT_ERR(moe_ref_deepep_dispatch(&c, &x, NULL, &ids, &w, &rv), MOE_ERR_INVALID_ARG,
               "num_experts 5");
    c = cfg, c.num_ranks_per_node = 3;
    EXPECT_ERR(moe_ref_deepep_dispatch(&c, &x, NULL, &ids, &w, &rv), MOE_ERR_INVALID_ARG,
               "num_ranks_per_node 3");
    c = cfg, c.expert_alignment = 0;
    EXPECT_ERR(moe_ref_deepep_dispatch(&c, &x, NULL, &ids, &w, &rv), MOE_ERR_INVALID_ARG,
               "expert_alignment 0");
    EXPECT_ERR(moe_ref_deepep_dispatch(&cfg, NULL, NULL, &ids, &w, &rv), MOE_ERR_NULL,
               "x: must not be NULL");
    EXPECT_ERR(moe_ref_deepep_dispatch(&cfg, &e2, NULL, &ids, &w, &rv), MOE_ERR_DTYPE,
               "x: dtype e2m1");
    EXPECT_ERR(moe_ref_deepep_dispatch(&cfg, &x, &sb, &ids, &w, &rv), MOE_ERR_DTYPE,
               "x_scales: dtype bf16");
    EXPECT_ERR(moe_ref_deepep_dispatch(&cfg, &x, NULL, &k0, &w, &rv), MOE_ERR_SHAPE,
               "topk_ids: topk 0");
    EXPECT_ERR(moe_ref_deepep_dispatch(&cfg, &x, NULL, &k5, &w, &rv), MOE_ERR_SHAPE, "topk 5");
    EXPECT_ERR(moe_ref_deepep_dispatch(&cfg, &x, NULL, &ids, &k5, &rv), MOE_ERR_DTYPE,
               "topk_weights");
    EXPECT_ERR(moe_ref_deepep_dispatch(&cfg, &x, NULL, &ids, &x, &rv), MOE_ERR_DTYPE,
               "topk_weights");
    I32(ids)[3] = 4;
    EXPECT_ERR(moe_ref_deepep_dispatch(&cfg, &x, NULL, &ids, &w, &rv), MOE_ERR_INVALID_ARG,
               "topk_ids[0][1][1] = 4: expert ids must be in [0, 4) or -1");
    I32(ids)[3] = -2;
    EXPECT_ERR(moe_ref_deepep_dispatch(&cfg, &x, NULL, &ids, &w, &rv), MOE_ERR_INVALID_ARG, "= -2");
    I32(ids)[3] = -1;
    EXPECT_ERR(moe_ref_deepep_dispatch(&cfg, &x, &w, &ids, &w, &rv), MOE_ERR_NULL, "recv x_scales");
    rv.x = &o[1];
    EXPECT_ERR(moe_ref_deepep_dispatch(&cfg, &x, NULL, &ids, &w, &rv), MOE_ERR_DTYPE,
               "recv x: dtype int32");
    rv.x = &o[0], rv.num_recv = &o[3];
    EXPECT_ERR(moe_ref_deepep_dispatch(&cfg, &x, NULL, &ids, &w, &rv), MOE_ERR_SHAPE,
               "num_recv: rank 2");
    rv.num_recv = &o[4];
    moe_tensor dev = view(MOE_BF16, 3, SH(2, 3, 4), x.data);
    dev.device.kind = MOE_DEVICE_CUDA;
    EXPECT_ERR(moe_ref_deepep_dispatch(&cfg, &dev, NULL, &ids, &w, &rv), MOE_ERR_UNSUPPORTED,
               "x: a device tensor");
    moe_deepep_layout L = {&o[5], &o[5], NULL, &o[6]};
    EXPECT_ERR(moe_ref_deepep_layout(&cfg, &ids, &L), MOE_ERR_SHAPE,
               "num_tokens_per_expert: shape [2, 2]");
    EXPECT_ERR(moe_ref_deepep_layout(&cfg, &ids, NULL), MOE_ERR_NULL, "out");
    int64_t rows;
    EXPECT_ERR(moe_deepep_dispatch_capacity(&cfg, &ids, NULL), MOE_ERR_NULL, "rows");
    /* combine */
    EXPECT_ERR(moe_ref_deepep_combine(&cfg, &o[1], NULL, &o[6], NULL, NULL, &o[7], NULL),
               MOE_ERR_DTYPE, "x: dtype int32, expected bf16 or f32");
    EXPECT_ERR(moe_ref_deepep_combine(&cfg, &o[0], NULL, &o[6], &w, NULL, &o[7], NULL),
               MOE_ERR_DTYPE, "bias0");
    EXPECT_ERR(moe_ref_deepep_combine(&cfg, &o[0], &o[2], &o[6], NULL, NULL, &o[7], NULL),
               MOE_ERR_NULL, "combined_topk_weights");
    EXPECT_ERR(moe_ref_deepep_combine(&cfg, &o[0], NULL, &x, NULL, NULL, &o[7], NULL),
               MOE_ERR_DTYPE, "is_token_in_rank");
    memset(o[6].data, 1, 12);
    EXPECT_ERR(moe_ref_deepep_combine(&cfg, &o[0], NULL, &o[6], NULL, NULL, &o[7], NULL),
               MOE_ERR_SHAPE, "is_token_in_rank sends 6 tokens to rank 0");
    U8(o[6])[0] = 2;
    EXPECT_ERR(moe_ref_deepep_combine(&cfg, &o[0], NULL, &o[6], NULL, NULL, &o[7], NULL),
               MOE_ERR_INVALID_ARG, "not a bool");
    freet(8, o);
    moe_tensor t7[7] = {x, ids, w, k0, k5, e2, sb};
    freet(7, t7);
    (void)rows;
}
END_TEST

START_TEST(errors_ll_pplx)
{
    moe_tensor x = mk(MOE_BF16, 3, SH(2, 2, 512)), ids = mk(MOE_I32, 3, SH(2, 2, 2));
    moe_tensor w = mk(MOE_F32, 3, SH(2, 2, 2)), x100 = mk(MOE_BF16, 3, SH(2, 2, 256));
    static const int32_t v[8] = {0, 1, 2, -1, 3, 1, -1, -1};
    memcpy(ids.data, v, sizeof v);
    moe_tensor l[6] = {mk(MOE_E4M3, 4, SH(2, 2, 4, 512)), mk(MOE_I32, 4, SH(2, 2, 4, 1)),
                       mk(MOE_I32, 2, SH(2, 2)),          mk(MOE_I32, 3, SH(2, 2, 4)),
                       mk(MOE_I64, 3, SH(2, 2, 2)),       mk(MOE_BF16, 3, SH(2, 2, 512))};
    moe_deepep_ll_recv rv = {&l[0], &l[1], &l[2], &l[3], &l[4]};
    moe_deepep_ll_config cfg = {2, 4, 2, 1, 1, 1}, c;
    EXPECT_OK(moe_ref_deepep_ll_dispatch(&cfg, &x, &ids, &rv));
    EXPECT_ERR(moe_ref_deepep_ll_dispatch(NULL, &x, &ids, &rv), MOE_ERR_NULL, "cfg");
    EXPECT_ERR(moe_ref_deepep_ll_dispatch(&cfg, &x, &ids, NULL), MOE_ERR_NULL, "out");
    c = cfg, c.round_scale = 0;
    EXPECT_ERR(moe_ref_deepep_ll_dispatch(&c, &x, &ids, &rv), MOE_ERR_INVALID_ARG,
               "use_ue8m0: requires round_scale");
    c = cfg, c.use_fp8 = 0, c.use_ue8m0 = 0;
    EXPECT_ERR(moe_ref_deepep_ll_dispatch(&c, &x, &ids, &rv), MOE_ERR_INVALID_ARG,
               "round_scale: only meaningful");
    c = cfg, c.max_tokens_per_rank = 1;
    EXPECT_ERR(moe_ref_deepep_ll_dispatch(&c, &x, &ids, &rv), MOE_ERR_SHAPE,
               "exceed max_tokens_per_rank 1");
    c = cfg, c.max_tokens_per_rank = -1;
    EXPECT_ERR(moe_ref_deepep_ll_dispatch(&c, &x, &ids, &rv), MOE_ERR_INVALID_ARG,
               "max_tokens_per_rank -1");
    EXPECT_ERR(moe_ref_deepep_ll_dispatch(&cfg, &x100, &ids, &rv), MOE_ERR_SHAPE,
               "multiple of 512");
    EXPECT_ERR(moe_ref_deepep_ll_dispatch(&cfg, &l[2], &ids, &rv), MOE_ERR_SHAPE,
               "x: rank 2, expected 3");
    EXPECT_ERR(moe_ref_deepep_ll_dispatch(&cfg, &ids, &ids, &rv), MOE_ERR_DTYPE, "x: dtype int32");
    I32(ids)[5] = 3;
    EXPECT_ERR(moe_ref_deepep_ll_dispatch(&cfg, &x, &ids, &rv), MOE_ERR_INVALID_ARG,
               "ids in a row must be distinct");
    I32(ids)[5] = 1;
    rv.x_scales = &l[4];
    EXPECT_ERR(moe_ref_deepep_ll_dispatch(&cfg, &x, &ids, &rv), MOE_ERR_DTYPE, "recv x_scales");
    moe_tensor y = mk(MOE_BF16, 4, SH(2, 2, 4, 512));
    c = cfg, c.use_fp8 = c.round_scale = c.use_ue8m0 = 0;
    rv.x = &y;
    EXPECT_ERR(moe_ref_deepep_ll_dispatch(&c, &x, &ids, &rv), MOE_ERR_INVALID_ARG,
               "use_fp8 is off");
    rv.x_scales = NULL;
    EXPECT_OK(moe_ref_deepep_ll_dispatch(&c, &x, &ids, &rv));
    EXPECT_ERR(moe_ref_deepep_ll_dispatch(&cfg, &x, &ids, &rv), MOE_ERR_DTYPE,
               "recv x: dtype bf16, expected e4m3");
    rv.x = &l[0], rv.x_scales = &l[1];
    EXPECT_OK(moe_ref_deepep_ll_dispatch(&cfg, &x, &ids, &rv));
    /* combine with a broken handle */
    EXPECT_OK(moe_ref_deepep_ll_combine(&cfg, &y, &l[3], &l[4], &ids, &w, &l[5]));
    EXPECT_ERR(moe_ref_deepep_ll_combine(&cfg, &l[0], &l[3], &l[4], &ids, &w, &l[5]), MOE_ERR_DTYPE,
               "y: dtype e4m3");
    int64_t keep = I64(l[4])[0];
    I64(l[4])[0] = ((int64_t)3 << 32) | 2;
    EXPECT_ERR(moe_ref_deepep_ll_combine(&cfg, &y, &l[3], &l[4], &ids, &w, &l[5]),
               MOE_ERR_INVALID_ARG, "layout_range[0][0][0]: rows [3, 5)");
    I64(l[4])[0] = keep;
    int32_t ks = I32(l[3])[0];
    I32(l[3])[0] = 7;
    EXPECT_ERR(moe_ref_deepep_ll_combine(&cfg, &y, &l[3], &l[4], &ids, &w, &l[5]),
               MOE_ERR_INVALID_ARG, "src_info[0][0][0] = 7: not a token index");
    I32(l[3])[0] = ks;
    I64(l[4])[0] = 0; /* expert 0 loses its row for (s0, t0) */
    EXPECT_ERR(moe_ref_deepep_ll_combine(&cfg, &y, &l[3], &l[4], &ids, &w, &l[5]),
               MOE_ERR_INVALID_ARG, "holds no row");
    I64(l[4])[0] = keep;

    /* pplx */
    moe_pplx_config pc = {2, 1, 4, 2}, p2;
    moe_tensor pid = mk(MOE_I32, 3, SH(2, 2, 2));
    static const int32_t pv[8] = {0, 1, 2, 3, 1, 3, 0, 2};
    memcpy(pid.data, pv, sizeof pv);
    moe_tensor p[4] = {mk(MOE_BF16, 4, SH(2, 2, 4, 512)), mk(MOE_I32, 2, SH(2, 2)),
                       mk(MOE_I32, 3, SH(2, 2, 4)), mk(MOE_E4M3, 3, SH(2, 2, 512))};
    moe_pplx_recv pr = {&p[0], NULL, &p[1], &p[2]};
    EXPECT_OK(moe_ref_pplx_dispatch(&pc, &x, NULL, &pid, &pr));
    EXPECT_ERR(moe_ref_pplx_dispatch(NULL, &x, NULL, &pid, &pr), MOE_ERR_NULL, "cfg");
    EXPECT_ERR(moe_ref_pplx_dispatch(&pc, &x, NULL, &pid, NULL), MOE_ERR_NULL, "out");
    p2 = pc, p2.dp_size = 3;
    EXPECT_ERR(moe_ref_pplx_dispatch(&p2, &x, NULL, &pid, &pr), MOE_ERR_INVALID_ARG, "dp_size 3");
    p2 = pc, p2.max_num_tokens = 1;
    EXPECT_ERR(moe_ref_pplx_dispatch(&p2, &x, NULL, &pid, &pr), MOE_ERR_SHAPE,
               "exceed max_num_tokens 1");
    EXPECT_ERR(moe_ref_pplx_dispatch(&pc, &x, &ids, &pid, &pr), MOE_ERR_DTYPE, "x_scales");
    EXPECT_OK(moe_ref_pplx_combine(&pc, &p[0], &p[1], &p[2], &pid, &w, &l[5]));
    EXPECT_ERR(moe_ref_pplx_combine(&pc, &p[0], &p[1], &p[2], &pid, &w, &p[3]), MOE_ERR_DTYPE,
               "out: dtype e4m3");
    EXPECT_ERR(moe_ref_pplx_combine(&pc, &l[0], &p[1], &p[2], &pid, &w, &l[5]), MOE_ERR_DTYPE,
               "expert_y: dtype e4m3");
    EXPECT_ERR(moe_ref_pplx_combine(&pc, &l[3], &p[1], &p[2], &pid, &w, &l[5]), MOE_ERR_SHAPE,
               "expert_y: rank 3, expected 4");
    I32(p[1])[0] = 5;
    EXPECT_ERR(moe_ref_pplx_combine(&pc, &p[0], &p[1], &p[2], &pid, &w, &l[5]), MOE_ERR_INVALID_ARG,
               "num_tokens[0][0] = 5");
    I32(p[1])[0] = 2;
    I32(p[2])[1] = I32(p[2])[0];
    EXPECT_ERR(moe_ref_pplx_combine(&pc, &p[0], &p[1], &p[2], &pid, &w, &l[5]), MOE_ERR_INVALID_ARG,
               "token appears twice");
    freet(6, l), freet(4, p);
    moe_tensor t6[6] = {x, ids, w, x100, y, pid};
    freet(6, t6);
}
END_TEST

START_TEST(errors_hep_allgather)
{
    moe_tensor x = mk(MOE_BF16, 3, SH(2, 3, 4)), ids = mk(MOE_I32, 3, SH(2, 3, 2));
    moe_tensor w = mk(MOE_F32, 3, SH(2, 3, 2));
    memcpy(ids.data, hep_ids, sizeof hep_ids);
    moe_tensor h[6] = {mk(MOE_BF16, 3, SH(2, 8, 4)), mk(MOE_I32, 2, SH(2, 2)),
                       mk(MOE_I64, 2, SH(2, 2)),     mk(MOE_I32, 3, SH(2, 6, 2)),
                       mk(MOE_I32, 1, SH(2)),        mk(MOE_F16, 3, SH(2, 8, 4))};
    moe_hep_permuted hp = {&h[0], NULL, NULL, &h[1], &h[2], &h[3], &h[4], NULL};
    moe_hep_config cfg = {2, 4, 1, 4, 0, 0}, c;
    EXPECT_OK(moe_ref_hep_dispatch_with_permute(&cfg, &x, NULL, &ids, &w, &hp));
    c = cfg, c.pad_multiple = 0;
    EXPECT_ERR(moe_ref_hep_dispatch_with_permute(&c, &x, NULL, &ids, &w, &hp), MOE_ERR_INVALID_ARG,
               "pad_multiple 0");
    EXPECT_ERR(moe_ref_hep_dispatch_with_permute(NULL, &x, NULL, &ids, &w, &hp), MOE_ERR_NULL,
               "cfg");
    EXPECT_ERR(moe_ref_hep_dispatch_with_permute(&cfg, &x, NULL, &ids, &w, NULL), MOE_ERR_NULL,
               "out");
    I32(ids)[1] = -1;
    EXPECT_ERR(moe_ref_hep_dispatch_with_permute(&cfg, &x, NULL, &ids, &w, &hp),
               MOE_ERR_INVALID_ARG,
               "topk_ids[0][0][1] = -1: Hybrid-EP scatters ids into a routing map");
    I32(ids)[1] = 0;
    EXPECT_ERR(moe_ref_hep_dispatch_with_permute(&cfg, &x, NULL, &ids, &w, &hp),
               MOE_ERR_INVALID_ARG, "duplicates collapse");
    I32(ids)[1] = 2;
    EXPECT_ERR(moe_ref_hep_dispatch_with_permute(&cfg, &x, &x, &ids, &w, &hp), MOE_ERR_DTYPE,
               "x_scales");
    hp.row_id_map = &h[1];
    EXPECT_ERR(moe_ref_hep_dispatch_with_permute(&cfg, &x, NULL, &ids, &w, &hp), MOE_ERR_SHAPE,
               "row_id_map");
    hp.row_id_map = &h[3];
    int64_t rows;
    EXPECT_ERR(moe_hep_permute_capacity(&cfg, &ids, NULL), MOE_ERR_NULL, "rows");
    /* combine */
    moe_tensor out = mk(MOE_BF16, 3, SH(2, 3, 4)), pr = mk(MOE_F32, 2, SH(2, 8)),
               op = mk(MOE_F32, 3, SH(2, 3, 4));
    EXPECT_OK(moe_ref_hep_combine_with_unpermute(&cfg, &h[0], &h[3], &pr, &out, &op));
    EXPECT_ERR(moe_ref_hep_combine_with_unpermute(&cfg, &h[5], &h[3], NULL, &out, NULL),
               MOE_ERR_DTYPE, "y: dtype f16");
    EXPECT_ERR(moe_ref_hep_combine_with_unpermute(&cfg, &h[0], &h[3], NULL, &out, &op),
               MOE_ERR_NULL, "probs: out_probs needs");
    int32_t keep = I32(h[3])[0];
    I32(h[3])[0] = 8;
    EXPECT_ERR(moe_ref_hep_combine_with_unpermute(&cfg, &h[0], &h[3], NULL, &out, NULL),
               MOE_ERR_INVALID_ARG, "row_id_map[0][0][0] = 8: not -1 or a row");
    I32(h[3])[0] = I32(h[3])[2];
    EXPECT_ERR(moe_ref_hep_combine_with_unpermute(&cfg, &h[0], &h[3], NULL, &out, NULL),
               MOE_ERR_INVALID_ARG, "row named twice");
    I32(h[3])[0] = keep;

    /* all-gather / reduce-scatter */
    moe_tensor g[4] = {mk(MOE_BF16, 2, SH(6, 4)), mk(MOE_I32, 2, SH(6, 2)),
                       mk(MOE_F32, 2, SH(6, 2)), mk(MOE_F32, 3, SH(2, 6, 4))};
    EXPECT_OK(moe_ref_ep_allgather_dispatch(2, 4, &x, NULL, &ids, &w, &g[0], NULL, &g[1], &g[2]));
    EXPECT_ERR(moe_ref_ep_allgather_dispatch(3, 6, &x, NULL, &ids, &w, &g[0], NULL, &g[1], &g[2]),
               MOE_ERR_INVALID_ARG, "world_size 3");
    EXPECT_ERR(moe_ref_ep_allgather_dispatch(2, 4, &x, &w, &ids, &w, &g[0], NULL, &g[1], &g[2]),
               MOE_ERR_NULL, "gathered_scales");
    EXPECT_ERR(moe_ref_ep_allgather_dispatch(2, 4, &x, NULL, &ids, &w, &g[2], NULL, &g[1], &g[2]),
               MOE_ERR_DTYPE, "gathered_x");
    I32(ids)[0] = -1;
    EXPECT_ERR(moe_ref_ep_allgather_dispatch(2, 4, &x, NULL, &ids, &w, &g[0], NULL, &g[1], &g[2]),
               MOE_ERR_INVALID_ARG, "expert_map");
    I32(ids)[0] = 0;
    EXPECT_ERR(moe_ref_ep_reduce_scatter_combine(2, &g[3], &out), MOE_ERR_DTYPE, "out: dtype bf16");
    EXPECT_ERR(moe_ref_ep_reduce_scatter_combine(2, &g[1], &out), MOE_ERR_DTYPE,
               "partial: dtype int32");
    EXPECT_ERR(moe_ref_ep_reduce_scatter_combine(4, &g[3], &out), MOE_ERR_SHAPE, "partial: shape");
    EXPECT_ERR(moe_ref_ep_reduce_scatter_combine(5, &g[3], &out), MOE_ERR_INVALID_ARG,
               "world_size 5");
    EXPECT_ERR(moe_ref_ep_reduce_scatter_combine(2, NULL, &out), MOE_ERR_NULL, "partial");
    moe_tensor odd = mk(MOE_F32, 3, SH(2, 5, 4));
    EXPECT_ERR(moe_ref_ep_reduce_scatter_combine(2, &odd, &out), MOE_ERR_SHAPE, "multiple of 2");
    freet(6, h), freet(4, g);
    moe_tensor t7[7] = {x, ids, w, out, pr, op, odd};
    freet(7, t7);
    (void)rows;
}
END_TEST

static Suite *dispatch_suite(void)
{
    Suite *s = suite_create("dispatch");
    TCase *tc = tcase_create("dispatch");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, world_rules);
    tcase_add_test(tc, deepep_layout_hand);
    tcase_add_test(tc, deepep_dispatch_hand);
    tcase_add_test(tc, deepep_combine_hand);
    tcase_add_test(tc, deepep_roundtrip_property);
    tcase_add_test(tc, ll_fp8_cast_hand);
    tcase_add_test(tc, ll_roundtrip_property);
    tcase_add_test(tc, pplx_roundtrip_property);
    tcase_add_test(tc, pplx_refuses_minus_one);
    tcase_add_test(tc, hep_permute_hand);
    tcase_add_test(tc, hep_combine_hand);
    tcase_add_test(tc, hep_roundtrip_property);
    tcase_add_test(tc, hep_buffer_sizes_seed);
    tcase_add_test(tc, allgather_rs_property);
    tcase_add_test(tc, empty_problems);
    tcase_add_test(tc, pinned_digests);
    tcase_add_test(tc, dispatch_writes_every_byte);
    tcase_add_test(tc, errors_deepep);
    tcase_add_test(tc, errors_ll_pplx);
    tcase_add_test(tc, errors_hep_allgather);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(dispatch_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
