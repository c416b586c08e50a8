/* moe-digest: runs a fixed list of cases through every reference stage
 * (through the ops table) and prints one SHA-256 per case, so two builds
 * (gcc vs clang, -O0 vs -O2, 1 vs 2 OpenMP threads) can be compared: the
 * reference promises identical bits for all of them (DESIGN section 5).
 * `make check-determinism` builds and compares them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/format.h"
#include "moe/forward.h"
#include "moe/ops.h"
#include "moe/rng.h"
#include "moe/sha256.h"

static const moe_ops *ops = &moe_ops_ref;
static int failures;

static moe_tensor t_new(moe_dtype d, int ndim, int64_t a, int64_t b, int64_t c)
{
    moe_tensor t;
    int64_t s[3] = {a, b, c};
    if (ops->alloc(&t, d, ndim, s) != MOE_OK) {
        fprintf(stderr, "alloc: %s\n", moe_last_error());
        exit(2);
    }
    return t;
}

static void fill_normal(moe_tensor *t, uint64_t stream, float sd)
{
    if (moe_tensor_fill_normal(t, 2026, stream, 0.0f, sd) != MOE_OK) {
        fprintf(stderr, "fill: %s\n", moe_last_error());
        exit(2);
    }
}

/* Prints "name digest" over the listed tensors (or the failure). */
static void report(const char *name, moe_status s, moe_tensor **ts, int n)
{
    if (s != MOE_OK) {
        printf("%-40s FAILED %s: %s\n", name, moe_status_str(s), moe_last_error());
        failures++;
        return;
    }
    moe_sha256 h;
    uint8_t d[32];
    moe_sha256_init(&h);
    for (int i = 0; i < n; i++) moe_sha256_update(&h, ts[i]->data, ts[i]->nbytes);
    moe_sha256_final(&h, d);
    printf("%-40s ", name);
    for (int i = 0; i < 32; i++) printf("%02x", d[i]);
    printf("\n");
}

enum { M = 37, E = 16, K = 4, H = 256, I = 128 };

static void cases_route(moe_tensor *logits, moe_tensor *ids, moe_tensor *w)
{
    static const struct { const char *name; moe_route_method m; int renorm; moe_score_func sc; } r[] = {
        {"route.softmax_topk", MOE_ROUTE_SOFTMAX_TOPK, 0, MOE_SCORE_SOFTMAX},
        {"route.softmax_topk.renorm", MOE_ROUTE_SOFTMAX_TOPK, 1, MOE_SCORE_SOFTMAX},
        {"route.sigmoid_topk", MOE_ROUTE_SIGMOID_TOPK, 1, MOE_SCORE_SIGMOID},
        {"route.grouped_topk", MOE_ROUTE_GROUPED_TOPK, 1, MOE_SCORE_SIGMOID},
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        moe_route_params p;
        memset(&p, 0, sizeof p);
        p.method = r[i].m, p.topk = K, p.renormalize = r[i].renorm, p.score = r[i].sc;
        p.num_expert_group = 4, p.topk_group = 2, p.routed_scaling_factor = 2.5f;
        moe_tensor *o[2] = {ids, w};
        report(r[i].name, ops->route(logits, &p, ids, w), o, 2);
    }
    /* the ids the later cases use */
    moe_route_params p;
    memset(&p, 0, sizeof p);
    p.method = MOE_ROUTE_SOFTMAX_TOPK, p.topk = K, p.renormalize = 1, p.routed_scaling_factor = 1.0f;
    ops->route(logits, &p, ids, w);
}

static void cases_layouts(moe_tensor *x, moe_tensor *ids, moe_tensor *w)
{
    moe_align_params ap = {16, E, NULL, MOE_ALIGN_MAP_KEEP_NONLOCAL, 0};
    int64_t len, blocks;
    moe_align_capacity(M * K, &ap, &len, &blocks);
    moe_tensor st = t_new(MOE_I32, 1, len, 0, 0), ei = t_new(MOE_I32, 1, blocks, 0, 0), np = t_new(MOE_I32, 1, 1, 0, 0);
    moe_tensor *o[3] = {&st, &ei, &np};
    report("align.vllm", ops->align_block_size(ids, &ap, &st, &ei, &np), o, 3);
    ops->free(&st), ops->free(&ei), ops->free(&np);

    moe_sort_ck_params cp;
    memset(&cp, 0, sizeof cp);
    cp.num_experts = E, cp.unit_size = 32;
    int64_t clen, ctiles;
    moe_sort_ck_capacity(M, K, E, 32, MOE_SORT_CK_PAD_UPDATED, &clen, &ctiles);
    moe_tensor a = t_new(MOE_I32, 1, clen, 0, 0), b = t_new(MOE_F32, 1, clen, 0, 0), c = t_new(MOE_I32, 1, ctiles, 0, 0),
               d = t_new(MOE_I32, 1, 2, 0, 0);
    moe_tensor *o2[4] = {&a, &b, &c, &d};
    report("sort.ck", ops->sort_ck(ids, w, &cp, &a, &b, &c, &d), o2, 4);
    ops->free(&a), ops->free(&b), ops->free(&c), ops->free(&d);

    moe_maps_trtllm_params mp = {MOE_MAPS_TRTLLM_THREE_STEP, E, 0, E};
    moe_tensor p2u = t_new(MOE_I32, 1, M * K, 0, 0), u2p = t_new(MOE_I32, 1, M * K, 0, 0),
               off = t_new(MOE_I64, 1, E + 1, 0, 0);
    moe_tensor *o3[3] = {&p2u, &u2p, &off};
    report("maps.trtllm.three_step", ops->maps_trtllm(ids, &mp, &p2u, &u2p, &off, NULL), o3, 3);
    moe_tensor ex = t_new(x->dtype, 2, M * K, H, 0), ps = t_new(MOE_F32, 1, M * K, 0, 0);
    moe_tensor *o4[2] = {&ex, &ps};
    report("permute.expand_trtllm", ops->expand_trtllm(x, &p2u, K, w, &ex, &ps), o4, 2);
    ops->free(&p2u), ops->free(&u2p), ops->free(&off), ops->free(&ex), ops->free(&ps);

    int64_t cap;
    moe_grouped_capacity(M * K, E, 8, &cap);
    moe_tensor go = t_new(x->dtype, 2, cap, H, 0), gs = t_new(MOE_I32, 1, cap, 0, 0), gc = t_new(MOE_I32, 1, E, 0, 0),
               gf = t_new(MOE_I32, 1, E + 1, 0, 0);
    moe_tensor *o5[4] = {&go, &gs, &gc, &gf};
    report("permute.grouped", ops->permute_grouped(x, ids, 0, 8, &go, &gs, &gc, &gf), o5, 4);
    ops->free(&go), ops->free(&gs), ops->free(&gc), ops->free(&gf);
}

static void cases_quant(void)
{
    moe_tensor af = t_new(MOE_F32, 2, 8, H, 0), wf = t_new(MOE_F32, 3, 2, 128, H);
    fill_normal(&af, 11, 1.0f), fill_normal(&wf, 12, 0.05f);
    for (int sc = 0; sc < MOE_SCHEME_COUNT; sc++) {
        for (int op = 0; op < 2; op++) {
            moe_quant_spec s;
            moe_scheme_spec((moe_scheme)sc, (moe_operand)op, &s);
            if (s.gran == MOE_GRAN_NONE) continue;
            moe_tensor *x = op ? &af : &wf, q, scale, g;
            moe_quant_alloc(&s, x->ndim, x->shape, &q, &scale, &g);
            char name[64];
            snprintf(name, sizeof name, "quant.%s.%s", moe_scheme_name((moe_scheme)sc), op ? "act" : "weight");
            moe_tensor *o[3] = {&q, &scale, &g};
            report(name, ops->quantize(&s, x, NULL, &q, &scale, s.use_global_scale ? &g : NULL), o, s.use_global_scale ? 3 : 2);
            ops->free(&q), ops->free(&scale), ops->free(&g);
        }
    }
    ops->free(&af), ops->free(&wf);
}

static void cases_act(void)
{
    moe_tensor x = t_new(MOE_BF16, 2, M, 2 * I, 0), o = t_new(MOE_BF16, 2, M, I, 0), on = t_new(MOE_BF16, 2, M, 2 * I, 0);
    fill_normal(&x, 13, 3.0f);
    for (int a = 0; a < MOE_ACT_COUNT; a++) {
        moe_act_params p = moe_act_defaults((moe_act)a, a == MOE_ACT_SWIGLUOAI ? MOE_LAYOUT_INTERLEAVED : MOE_LAYOUT_GATE_UP);
        moe_tensor *out = moe_act_is_gated((moe_act)a) ? &o : &on;
        char name[64];
        snprintf(name, sizeof name, "act.%s", moe_act_name((moe_act)a));
        report(name, ops->activation(&x, NULL, &p, out), &out, 1);
    }
    ops->free(&x), ops->free(&o), ops->free(&on);
}

static void cases_forward(moe_tensor *ids, moe_tensor *w)
{
    moe_tensor f1 = t_new(MOE_F32, 3, E, 2 * I, H), f2 = t_new(MOE_F32, 3, E, H, I);
    fill_normal(&f1, 14, 0.05f), fill_normal(&f2, 15, 0.05f);
    for (int sc = 0; sc < MOE_SCHEME_COUNT; sc++) {
        moe_quant_spec ws, as;
        moe_scheme_spec((moe_scheme)sc, MOE_OPERAND_WEIGHT, &ws);
        moe_scheme_spec((moe_scheme)sc, MOE_OPERAND_ACT, &as);
        moe_dtype xd = as.gran == MOE_GRAN_NONE ? as.elem : MOE_BF16;
        moe_tensor x = t_new(xd, 2, M, H, 0), out = t_new(xd, 2, M, H, 0), q1, s1, g1, q2, s2, g2;
        fill_normal(&x, 16, 1.0f);
        moe_quant_alloc(&ws, 3, f1.shape, &q1, &s1, &g1);
        moe_quant_alloc(&ws, 3, f2.shape, &q2, &s2, &g2);
        if (ws.gran == MOE_GRAN_NONE) {
            moe_encode_array(ws.elem, f1.data, (size_t)moe_tensor_numel(&f1), MOE_POLICY_IEEE_RNE, q1.data, NULL);
            moe_encode_array(ws.elem, f2.data, (size_t)moe_tensor_numel(&f2), MOE_POLICY_IEEE_RNE, q2.data, NULL);
            if (ws.elem == MOE_F32) memcpy(q1.data, f1.data, f1.nbytes), memcpy(q2.data, f2.data, f2.nbytes);
        } else {
            ops->quantize(&ws, &f1, NULL, &q1, &s1, ws.use_global_scale ? &g1 : NULL);
            ops->quantize(&ws, &f2, NULL, &q2, &s2, ws.use_global_scale ? &g2 : NULL);
        }
        moe_forward_args a;
        memset(&a, 0, sizeof a);
        a.scheme = (moe_scheme)sc, a.act = moe_act_defaults(MOE_ACT_SILU, MOE_LAYOUT_GATE_UP);
        a.topk_ids = ids, a.topk_weights = w;
        a.w1 = &q1, a.w1_scale = ws.gran ? &s1 : NULL, a.w1_global = ws.use_global_scale ? &g1 : NULL;
        a.w2 = &q2, a.w2_scale = ws.gran ? &s2 : NULL, a.w2_global = ws.use_global_scale ? &g2 : NULL;
        char name[64];
        snprintf(name, sizeof name, "forward.%s", moe_scheme_name((moe_scheme)sc));
        moe_tensor *o = &out;
        report(name, moe_ref_forward(&a, &x, &out), &o, 1);
        moe_tensor *all[] = {&x, &out, &q1, &s1, &g1, &q2, &s2, &g2};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ops->free(all[i]);
    }
    ops->free(&f1), ops->free(&f2);
}

int main(void)
{
    moe_tensor logits = t_new(MOE_F32, 2, M, E, 0), ids = t_new(MOE_I32, 2, M, K, 0), w = t_new(MOE_F32, 2, M, K, 0),
               x = t_new(MOE_BF16, 2, M, H, 0);
    fill_normal(&logits, 1, 2.0f), fill_normal(&x, 2, 1.0f);
    cases_route(&logits, &ids, &w);
    cases_layouts(&x, &ids, &w);
    cases_quant();
    cases_act();
    cases_forward(&ids, &w);
    ops->free(&logits), ops->free(&ids), ops->free(&w), ops->free(&x);
    return failures ? 1 : 0;
}
