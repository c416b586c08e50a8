/* A seeded MoE problem for the modular-kernel suites: x [G, H], weights
 * quantized with the scheme's weight spec, top-k ids (distinct experts
 * base + 3j, spread over the ranks) and weights; the kernel config, the
 * oracle call and rank-major views of the same global problem. */
#ifndef MOE_TEST_MK_FIXTURE_H
#define MOE_TEST_MK_FIXTURE_H

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "moe/format.h"
#include "moe/forward.h"
#include "moe/modular.h"
#include "moe/rng.h"
#include "moe/sweep.h"
#include "test_tensors.h"

typedef struct {
    moe_scheme sc;
    moe_dtype xd;
    int k, G;
    int64_t H, I, E;
    moe_tensor x, ids, w, q1, s1, g1, q2, s2, g2;
    moe_mk_weights mw;
} mkf_prob;

/* DeepEP-LL-matched 128-groups (include/moe/sweep.h). */
static inline void mkf_matched_groups(float *f, int64_t n) { moe_sweep_matched_groups(f, n); }

/* x [G, H] and the quantized weights. wsd: the weights' standard
 * deviation; matched: mkf_matched_groups on x. Streams 1-3 of seed. */
static inline void mkf_make_data(mkf_prob *p, moe_scheme sc, int G, int64_t H, int64_t I, int64_t E, uint64_t seed,
                                 float wsd, int matched)
{
    memset(p, 0, sizeof *p);
    p->sc = sc, p->G = G, p->H = H, p->I = I, p->E = E;
    moe_quant_spec ws, as;
    ck_assert_int_eq(moe_scheme_spec(sc, MOE_OPERAND_WEIGHT, &ws), MOE_OK);
    ck_assert_int_eq(moe_scheme_spec(sc, MOE_OPERAND_ACT, &as), MOE_OK);
    p->xd = as.gran == MOE_GRAN_NONE ? as.elem : MOE_BF16;
    p->x = tt_new(p->xd, 2, G, H, 0);
    float *f = malloc(sizeof(float) * (size_t)(G * H + 1));
    moe_rng_fill_normal(f, (size_t)(G * H), seed, 1, 0, 0.0f, 1.0f);
    if (matched) mkf_matched_groups(f, G * H);
    if (p->xd == MOE_F32) memcpy(p->x.data, f, p->x.nbytes);
    else moe_encode_array(p->xd, f, (size_t)(G * H), MOE_POLICY_IEEE_RNE, p->x.data, NULL);
    free(f);
    int64_t sh1[3] = {E, 2 * I, H}, sh2[3] = {E, H, I};
    moe_tensor f1 = tt_new(MOE_F32, 3, E, 2 * I, H), f2 = tt_new(MOE_F32, 3, E, H, I);
    moe_rng_fill_normal(f1.data, (size_t)moe_tensor_numel(&f1), seed, 2, 0, 0.0f, wsd);
    moe_rng_fill_normal(f2.data, (size_t)moe_tensor_numel(&f2), seed, 3, 0, 0.0f, wsd);
    ck_assert_int_eq(moe_quant_alloc(&ws, 3, sh1, &p->q1, &p->s1, &p->g1), MOE_OK);
    ck_assert_int_eq(moe_quant_alloc(&ws, 3, sh2, &p->q2, &p->s2, &p->g2), MOE_OK);
    ck_assert_int_eq(moe_ref_quantize(&ws, &f1, NULL, &p->q1, ws.gran ? &p->s1 : NULL,
                                      ws.use_global_scale ? &p->g1 : NULL), MOE_OK);
    ck_assert_int_eq(moe_ref_quantize(&ws, &f2, NULL, &p->q2, ws.gran ? &p->s2 : NULL,
                                      ws.use_global_scale ? &p->g2 : NULL), MOE_OK);
    moe_tensor_free(&f1), moe_tensor_free(&f2);
    p->mw.w1 = &p->q1, p->mw.w1_scale = ws.gran ? &p->s1 : NULL, p->mw.w1_global = ws.use_global_scale ? &p->g1 : NULL;
    p->mw.w2 = &p->q2, p->mw.w2_scale = ws.gran ? &p->s2 : NULL, p->mw.w2_global = ws.use_global_scale ? &p->g2 : NULL;
}

/* Top-k ids (experts base + 3j, distinct for k <= 3 with E = 8, spread
 * over the ranks) and weights in [0.05, 1.05): base from (seed,
 * id_stream), weights from (seed, w_stream); the first `skew` tokens start
 * at expert 1 instead of a random one. */
static inline void mkf_make_routing(mkf_prob *p, int k, uint64_t seed, uint64_t id_stream, uint64_t w_stream,
                                    int skew)
{
    p->k = k;
    p->ids = tt_new(MOE_I32, 2, p->G, k, 0), p->w = tt_new(MOE_F32, 2, p->G, k, 0);
    for (int t = 0; t < p->G; t++) {
        int base = t < skew ? 1 : (int)(moe_rng_u32(seed, id_stream, (uint64_t)t) % p->E);
        for (int j = 0; j < k; j++) {
            ((int32_t *)p->ids.data)[t * k + j] = (int32_t)((base + 3 * j) % p->E);
            ((float *)p->w.data)[t * k + j] = 0.05f + moe_rng_uniform(seed, w_stream, (uint64_t)(t * k + j));
        }
    }
}

/* The expert-parallel suites' problem: data, then routing from streams 4, 5. */
static inline void mkf_make(mkf_prob *p, moe_scheme sc, int k, int G, int64_t H, int64_t I, int64_t E,
                            uint64_t seed, float wsd, int matched, int skew)
{
    mkf_make_data(p, sc, G, H, I, E, seed, wsd, matched);
    mkf_make_routing(p, k, seed, 4, 5, skew);
}

static inline void mkf_unmake(mkf_prob *p)
{
    moe_tensor *ts[] = {&p->x, &p->ids, &p->w, &p->q1, &p->s1, &p->g1, &p->q2, &p->s2, &p->g2};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) moe_tensor_free(ts[i]);
}

static inline moe_mk_config mkf_config(moe_scheme sc, int k, int R, int64_t H, int64_t I, int64_t E)
{
    moe_mk_config c;
    memset(&c, 0, sizeof c);
    c.scheme = sc, c.act = moe_act_defaults(MOE_ACT_SILU, MOE_LAYOUT_GATE_UP);
    c.num_experts = (int)E, c.topk = k, c.hidden = (int)H, c.inter = (int)I, c.world_size = R;
    return c;
}

/* moe_forward_args of the problem with weights w (weights on the input: woi). */
static inline moe_forward_args mkf_forward_args(const mkf_prob *p, const moe_tensor *w, int woi)
{
    moe_forward_args a;
    memset(&a, 0, sizeof a);
    a.scheme = p->sc, a.act = moe_act_defaults(MOE_ACT_SILU, MOE_LAYOUT_GATE_UP);
    a.topk_ids = &p->ids, a.topk_weights = w, a.weights_on_input = woi;
    a.w1 = p->mw.w1, a.w1_scale = p->mw.w1_scale, a.w1_global = p->mw.w1_global;
    a.w2 = p->mw.w2, a.w2_scale = p->mw.w2_scale, a.w2_global = p->mw.w2_global;
    return a;
}

static inline void mkf_oracle(const mkf_prob *p, const moe_tensor *w, int woi, moe_tensor *out)
{
    moe_forward_args a = mkf_forward_args(p, w, woi);
    ck_assert_msg(moe_ref_forward(&a, &p->x, out) == MOE_OK, "%s", moe_last_error());
}

/* Rank-major views [R, G/R, ...] of the global problem and of out. */
typedef struct {
    moe_tensor x3, i3, w3, o3;
} mkf_views;

static inline void mkf_wrap(mkf_prob *p, int R, moe_tensor *out, mkf_views *v)
{
    int64_t Tr = p->G / R, H = p->H;
    ck_assert_int_eq(moe_tensor_wrap(&v->x3, p->xd, 3, (int64_t[3]){R, Tr, H}, p->x.data, p->x.nbytes, p->x.device), 0);
    ck_assert_int_eq(moe_tensor_wrap(&v->i3, MOE_I32, 3, (int64_t[3]){R, Tr, p->k}, p->ids.data, p->ids.nbytes,
                                     p->ids.device), 0);
    ck_assert_int_eq(moe_tensor_wrap(&v->w3, MOE_F32, 3, (int64_t[3]){R, Tr, p->k}, p->w.data, p->w.nbytes,
                                     p->w.device), 0);
    ck_assert_int_eq(moe_tensor_wrap(&v->o3, p->xd, 3, (int64_t[3]){R, Tr, H}, out->data, out->nbytes, out->device), 0);
}

#endif
