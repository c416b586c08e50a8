/* Golden cases of dispatch / combine with simulated ranks: all-gather and
 * reduce-scatter, DeepEP normal (layout, dispatch with scales and
 * alignment, combine on one node and across nodes), DeepEP low-latency
 * (bf16, fp8, round_scale, UE8M0), pplx, and Hybrid-EP (blocking, and
 * non-blocking with drops). Edges: ranks that send nothing or receive
 * nothing, -1 slots, duplicate experts where DeepEP normal counts them.
 * Combine inputs are the reference dispatch's handles plus seeded expert
 * outputs. DeepEP-LL and pplx dispatch rows land in atomic order upstream:
 * a backend is compared with them as row sets per (rank, expert). */
#include <stdlib.h>
#include <string.h>
#include "golden_internal.h"
#include "moe/dispatch.h"
#include "moe/rng.h"

typedef struct {
    int rpn, align;           /* DeepEP / Hybrid-EP: ranks per node; expert alignment */
    int S;                    /* scale columns moved with the rows (0: none) */
    unsigned neg1_pct;        /* share of -1 slots */
    int dup;                  /* repeated experts within a row allowed */
    int silent, starved;      /* a rank whose tokens are all -1 / that owns no routed expert (-1: none) */
    int fp8, round_scale, ue8m0;
    int64_t t_max;            /* LL: T_max; pplx: max_num_tokens */
    int dp;                   /* pplx: ranks per DP group */
    int pad, non_blocking, permuted; /* Hybrid-EP */
    int extra;                /* combine: weights / biases / probs passed */
} ep_arg;

/* ---- inputs -------------------------------------------------------------------------------- */

static int64_t lead(const moe_golden_case *c)
{
    const ep_arg *a = c->arg;
    return strncmp(c->kind, "pplx", 4) ? c->dims.R : c->dims.R / a->dp;
}

/* Rank `starved` owns no routed expert: its ids move to the next expert
 * outside its range that the row does not hold yet. */
static void starve(int32_t *row, int K, int E, int El, int q)
{
    for (int j = 0; j < K; j++) {
        if (row[j] < 0 || row[j] / El != q) continue;
        int e = row[j];
        for (int step = 1; step <= E; step++) {
            int cand = (e + step) % E, used = cand / El == q;
            for (int i = 0; i < K && !used; i++) used = row[i] == cand;
            if (!used) {
                row[j] = cand;
                break;
            }
        }
    }
}

static moe_status make_tokens(const moe_golden_case *c, moe_golden_set *in)
{
    const ep_arg *a = c->arg;
    moe_status st = MOE_OK;
    int64_t G = lead(c), T = c->dims.M, H = c->dims.H, K = c->dims.k;
    int E = (int)c->dims.E, El = E / (int)c->dims.R;
    moe_tensor *x = gk_new(in, &st, "x", MOE_BF16, 3, GK_SH(G, T, H));
    moe_tensor *xs = a->S ? gk_new(in, &st, "x_scales", MOE_F32, 3, GK_SH(G, T, a->S)) : NULL;
    moe_tensor *ids = gk_new(in, &st, "topk_ids", MOE_I32, 3, GK_SH(G, T, K));
    moe_tensor *w = gk_new(in, &st, "topk_weights", MOE_F32, 3, GK_SH(G, T, K));
    if (st == MOE_OK) st = gk_normal(c, x, "x", 2.0f);
    if (st == MOE_OK && xs) st = gk_uniform(c, xs, "x_scales", 0.001f, 0.01f);
    if (st == MOE_OK) st = gk_ids(c, ids, "topk_ids", E, a->neg1_pct, !a->dup);
    if (st == MOE_OK) st = gk_uniform(c, w, "topk_weights", 0.05f, 1.05f);
    if (st != MOE_OK) return st;
    int32_t *v = ids->data;
    for (int64_t g = 0; g < G; g++)
        for (int64_t t = 0; t < T; t++) {
            int32_t *row = v + (g * T + t) * K;
            if (g == a->silent)
                for (int j = 0; j < K; j++) row[j] = -1;
            if (a->starved >= 0) starve(row, (int)K, E, El, a->starved);
        }
    return MOE_OK;
}

/* ---- all-gather / reduce-scatter ------------------------------------------------------------- */

static moe_status ag_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in, moe_golden_set *out)
{
    const ep_arg *a = c->arg;
    gk_run r;
    gk_begin(&r, ops, in, out);
    int64_t R = c->dims.R, T = c->dims.M, H = c->dims.H, K = c->dims.k;
    const moe_tensor *x = gk_in(&r, "x"), *xs = gk_opt(&r, "x_scales"), *ids = gk_in(&r, "topk_ids"),
                     *w = gk_in(&r, "topk_weights");
    moe_tensor *gx = gk_out(&r, "gathered_x", MOE_BF16, 2, GK_SH(R * T, H));
    moe_tensor *gs = a->S ? gk_out(&r, "gathered_scales", MOE_F32, 2, GK_SH(R * T, a->S)) : NULL;
    moe_tensor *gi = gk_out(&r, "gathered_ids", MOE_I32, 2, GK_SH(R * T, K));
    moe_tensor *gw = gk_out(&r, "gathered_weights", MOE_F32, 2, GK_SH(R * T, K));
    return gk_done(&r, r.st ? r.st : ops->ep_allgather_dispatch((int)R, (int)c->dims.E, x, xs, ids, w, gx, gs, gi, gw));
}

static moe_status rs_make(const moe_golden_case *c, moe_golden_set *in)
{
    moe_status st = MOE_OK;
    int64_t R = c->dims.R;
    moe_tensor *p = gk_new(in, &st, "partial", MOE_BF16, 3, GK_SH(R, R * c->dims.M, c->dims.H));
    return st == MOE_OK ? gk_normal(c, p, "partial", 1.0f) : st;
}

static moe_status rs_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in, moe_golden_set *out)
{
    gk_run r;
    gk_begin(&r, ops, in, out);
    const moe_tensor *p = gk_in(&r, "partial");
    moe_tensor *o = gk_out(&r, "out", MOE_BF16, 3, GK_SH(c->dims.R, c->dims.M, c->dims.H));
    return gk_done(&r, r.st ? r.st : ops->ep_reduce_scatter_combine((int)c->dims.R, p, o));
}

/* ---- DeepEP normal ----------------------------------------------------------------------------- */

static moe_deepep_config deepep_cfg(const moe_golden_case *c)
{
    const ep_arg *a = c->arg;
    moe_deepep_config cfg = {(int)c->dims.R, (int)c->dims.E, a->rpn, a->align};
    return cfg;
}

static moe_status layout_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in,
                             moe_golden_set *out)
{
    gk_run r;
    gk_begin(&r, ops, in, out);
    moe_deepep_config cfg = deepep_cfg(c);
    int64_t R = c->dims.R;
    const moe_tensor *ids = gk_in(&r, "topk_ids");
    moe_deepep_layout L = {gk_out(&r, "num_tokens_per_expert", MOE_I32, 2, GK_SH(R, c->dims.E)),
                           gk_out(&r, "num_tokens_per_rank", MOE_I32, 2, GK_SH(R, R)),
                           gk_out(&r, "num_tokens_per_node", MOE_I32, 2, GK_SH(R, R / cfg.num_ranks_per_node)),
                           gk_out(&r, "is_token_in_rank", MOE_BOOL, 3, GK_SH(R, c->dims.M, R))};
    return gk_done(&r, r.st ? r.st : ops->deepep_layout(&cfg, ids, &L));
}

/* Receive buffers of a DeepEP normal dispatch, N rows per rank. */
typedef struct {
    moe_tensor *t[8];
    moe_deepep_recv rv;
} dp_bufs;

static void dispatch_bufs(gk_run *r, const moe_golden_case *c, int64_t N, dp_bufs *b)
{
    const ep_arg *a = c->arg;
    int64_t R = c->dims.R, K = c->dims.k, El = c->dims.E / R;
    b->rv.x = gk_out(r, "recv_x", MOE_BF16, 3, GK_SH(R, N, c->dims.H));
    b->rv.x_scales = a->S ? gk_out(r, "recv_x_scales", MOE_F32, 3, GK_SH(R, N, a->S)) : NULL;
    b->rv.topk_ids = gk_out(r, "recv_topk_ids", MOE_I32, 3, GK_SH(R, N, K));
    b->rv.topk_weights = gk_out(r, "recv_topk_weights", MOE_F32, 3, GK_SH(R, N, K));
    b->rv.src_idx = gk_out(r, "src_idx", MOE_I32, 2, GK_SH(R, N));
    b->rv.num_recv = gk_out(r, "num_recv", MOE_I32, 1, GK_SH(R));
    b->rv.num_recv_per_expert = gk_out(r, "num_recv_per_expert", MOE_I32, 2, GK_SH(R, El));
    b->rv.rank_prefix_matrix = gk_out(r, "rank_prefix_matrix", MOE_I32, 2, GK_SH(R, R));
}

static moe_status dispatch_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in,
                               moe_golden_set *out)
{
    gk_run r;
    gk_begin(&r, ops, in, out);
    moe_deepep_config cfg = deepep_cfg(c);
    int64_t N = 0;
    /* the receive capacity is a host-side sizing of the golden ids */
    moe_status st = moe_deepep_dispatch_capacity(&cfg, moe_golden_set_find(in, "topk_ids"), &N);
    if (st != MOE_OK) return gk_done(&r, st);
    const moe_tensor *x = gk_in(&r, "x"), *xs = gk_opt(&r, "x_scales"), *ids = gk_in(&r, "topk_ids"),
                     *w = gk_in(&r, "topk_weights");
    dp_bufs b;
    dispatch_bufs(&r, c, N, &b);
    return gk_done(&r, r.st ? r.st : ops->deepep_dispatch(&cfg, x, xs, ids, w, &b.rv));
}

/* combine inputs: the reference layout and dispatch of seeded tokens, and
 * seeded expert outputs on the received rows (zero past num_recv) */
static moe_status combine_make(const moe_golden_case *c, moe_golden_set *in)
{
    const ep_arg *a = c->arg;
    moe_golden_set tok, lo, dp;
    moe_golden_set_init(&tok), moe_golden_set_init(&lo), moe_golden_set_init(&dp);
    moe_status st = make_tokens(c, &tok);
    if (st == MOE_OK) st = layout_run(c, &moe_ops_ref, &tok, &lo);
    if (st == MOE_OK) st = dispatch_run(c, &moe_ops_ref, &tok, &dp);
    int64_t R = c->dims.R, T = c->dims.M, H = c->dims.H;
    const moe_tensor *rw = moe_golden_set_find(&dp, "recv_topk_weights"), *nr = moe_golden_set_find(&dp, "num_recv");
    const moe_tensor *itr = moe_golden_set_find(&lo, "is_token_in_rank");
    int64_t N = rw ? rw->shape[1] : 0;
    moe_tensor *y = gk_new(in, &st, "x", MOE_BF16, 3, GK_SH(R, N, H));
    moe_tensor *it = gk_new(in, &st, "is_token_in_rank", MOE_BOOL, 3, GK_SH(R, T, R));
    moe_tensor *w = a->extra ? gk_new(in, &st, "topk_weights", MOE_F32, 3, GK_SH(R, N, c->dims.k)) : NULL;
    moe_tensor *b0 = a->extra ? gk_new(in, &st, "bias0", MOE_BF16, 3, GK_SH(R, T, H)) : NULL;
    moe_tensor *b1 = a->extra ? gk_new(in, &st, "bias1", MOE_BF16, 3, GK_SH(R, T, H)) : NULL;
    if (st == MOE_OK) st = gk_normal(c, y, "y", 1.0f);
    if (st == MOE_OK && b0) st = gk_normal(c, b0, "bias0", 0.25f);
    if (st == MOE_OK && b1) st = gk_normal(c, b1, "bias1", 0.25f);
    if (st == MOE_OK) {
        memcpy(it->data, itr->data, itr->nbytes);
        if (w) memcpy(w->data, rw->data, rw->nbytes);
        for (int64_t j = 0; j < R; j++) {
            int64_t n = ((const int32_t *)nr->data)[j];
            memset((uint16_t *)y->data + (j * N + n) * H, 0, sizeof(uint16_t) * (size_t)((N - n) * H));
        }
    }
    moe_golden_set_free(&tok), moe_golden_set_free(&lo), moe_golden_set_free(&dp);
    return st;
}

static moe_status combine_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in,
                              moe_golden_set *out)
{
    gk_run r;
    gk_begin(&r, ops, in, out);
    moe_deepep_config cfg = deepep_cfg(c);
    int64_t R = c->dims.R, T = c->dims.M;
    const moe_tensor *y = gk_in(&r, "x"), *it = gk_in(&r, "is_token_in_rank"), *w = gk_opt(&r, "topk_weights");
    const moe_tensor *b0 = gk_opt(&r, "bias0"), *b1 = gk_opt(&r, "bias1");
    moe_tensor *o = gk_out(&r, "combined_x", MOE_BF16, 3, GK_SH(R, T, c->dims.H));
    moe_tensor *ow = w ? gk_out(&r, "combined_topk_weights", MOE_F32, 3, GK_SH(R, T, c->dims.k)) : NULL;
    return gk_done(&r, r.st ? r.st : ops->deepep_combine(&cfg, y, w, it, b0, b1, o, ow));
}

/* ---- DeepEP low latency --------------------------------------------------------------------------- */

static moe_deepep_ll_config ll_cfg(const moe_golden_case *c)
{
    const ep_arg *a = c->arg;
    moe_deepep_ll_config cfg = {(int)c->dims.R, (int)c->dims.E, a->t_max, a->fp8, a->round_scale, a->ue8m0};
    return cfg;
}

static moe_status ll_dispatch_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in,
                                  moe_golden_set *out)
{
    const ep_arg *a = c->arg;
    gk_run r;
    gk_begin(&r, ops, in, out);
    moe_deepep_ll_config cfg = ll_cfg(c);
    int64_t R = c->dims.R, El = c->dims.E / R, Ta = moe_deepep_ll_rows(cfg.world_size, a->t_max), H = c->dims.H;
    const moe_tensor *x = gk_in(&r, "x"), *ids = gk_in(&r, "topk_ids");
    moe_deepep_ll_recv rv = {
        gk_out(&r, "recv_x", a->fp8 ? MOE_E4M3 : MOE_BF16, 4, GK_SH(R, El, Ta, H)),
        !a->fp8     ? NULL
        : a->ue8m0 ? gk_out(&r, "recv_x_scales", MOE_I32, 4, GK_SH(R, El, Ta, H / 512))
                   : gk_out(&r, "recv_x_scales", MOE_F32, 4, GK_SH(R, El, Ta, H / 128)),
        gk_out(&r, "count", MOE_I32, 2, GK_SH(R, El)), gk_out(&r, "src_info", MOE_I32, 3, GK_SH(R, El, Ta)),
        gk_out(&r, "layout_range", MOE_I64, 3, GK_SH(R, El, R))};
    return gk_done(&r, r.st ? r.st : ops->deepep_ll_dispatch(&cfg, x, ids, &rv));
}

static moe_status ll_combine_make(const moe_golden_case *c, moe_golden_set *in)
{
    moe_golden_set tok, dp;
    moe_golden_set_init(&tok), moe_golden_set_init(&dp);
    moe_status st = make_tokens(c, &tok);
    if (st == MOE_OK) st = ll_dispatch_run(c, &moe_ops_ref, &tok, &dp);
    const moe_tensor *rx = moe_golden_set_find(&dp, "recv_x");
    moe_tensor *y = st == MOE_OK ? gk_new(in, &st, "y", MOE_BF16, 4, rx->shape) : NULL;
    if (st == MOE_OK) st = gk_normal(c, y, "y", 1.0f);
    const char *keep[4][2] = {{"src_info", "src_info"}, {"layout_range", "layout_range"}, {"topk_ids", "topk_ids"},
                              {"topk_weights", "topk_weights"}};
    for (int i = 0; i < 4 && st == MOE_OK; i++) {
        const moe_tensor *s = moe_golden_set_find(i < 2 ? &dp : &tok, keep[i][0]);
        moe_tensor *d = gk_new(in, &st, keep[i][1], s->dtype, s->ndim, s->shape);
        if (st == MOE_OK) memcpy(d->data, s->data, s->nbytes);
    }
    moe_golden_set_free(&tok), moe_golden_set_free(&dp);
    return st;
}

static moe_status ll_combine_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in,
                                 moe_golden_set *out)
{
    gk_run r;
    gk_begin(&r, ops, in, out);
    moe_deepep_ll_config cfg = ll_cfg(c);
    const moe_tensor *y = gk_in(&r, "y"), *si = gk_in(&r, "src_info"), *lr = gk_in(&r, "layout_range");
    const moe_tensor *ids = gk_in(&r, "topk_ids"), *w = gk_in(&r, "topk_weights");
    moe_tensor *o = gk_out(&r, "out", MOE_BF16, 3, GK_SH(c->dims.R, c->dims.M, c->dims.H));
    return gk_done(&r, r.st ? r.st : ops->deepep_ll_combine(&cfg, y, si, lr, ids, w, o));
}

/* ---- pplx --------------------------------------------------------------------------------------------- */

static moe_pplx_config pplx_cfg(const moe_golden_case *c)
{
    const ep_arg *a = c->arg;
    moe_pplx_config cfg = {(int)c->dims.R, a->dp, (int)c->dims.E, a->t_max};
    return cfg;
}

static moe_status pplx_dispatch_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in,
                                    moe_golden_set *out)
{
    const ep_arg *a = c->arg;
    gk_run r;
    gk_begin(&r, ops, in, out);
    moe_pplx_config cfg = pplx_cfg(c);
    int64_t R = c->dims.R, El = c->dims.E / R, rows = moe_pplx_rows(&cfg);
    const moe_tensor *x = gk_in(&r, "x"), *xs = gk_opt(&r, "x_scales"), *ids = gk_in(&r, "topk_ids");
    moe_pplx_recv rv = {gk_out(&r, "recv_x", MOE_BF16, 4, GK_SH(R, El, rows, c->dims.H)),
                        a->S ? gk_out(&r, "recv_x_scales", MOE_F32, 4, GK_SH(R, El, rows, a->S)) : NULL,
                        gk_out(&r, "num_tokens", MOE_I32, 2, GK_SH(R, El)),
                        gk_out(&r, "src", MOE_I32, 3, GK_SH(R, El, rows))};
    return gk_done(&r, r.st ? r.st : ops->pplx_dispatch(&cfg, x, xs, ids, &rv));
}

static moe_status pplx_combine_make(const moe_golden_case *c, moe_golden_set *in)
{
    moe_golden_set tok, dp;
    moe_golden_set_init(&tok), moe_golden_set_init(&dp);
    moe_status st = make_tokens(c, &tok);
    if (st == MOE_OK) st = pplx_dispatch_run(c, &moe_ops_ref, &tok, &dp);
    const moe_tensor *rx = moe_golden_set_find(&dp, "recv_x");
    moe_tensor *y = st == MOE_OK ? gk_new(in, &st, "expert_y", MOE_BF16, 4, rx->shape) : NULL;
    if (st == MOE_OK) st = gk_normal(c, y, "y", 1.0f);
    const char *keep[4] = {"num_tokens", "src", "topk_ids", "topk_weights"};
    for (int i = 0; i < 4 && st == MOE_OK; i++) {
        const moe_tensor *s = moe_golden_set_find(i < 2 ? &dp : &tok, keep[i]);
        moe_tensor *d = gk_new(in, &st, keep[i], s->dtype, s->ndim, s->shape);
        if (st == MOE_OK) memcpy(d->data, s->data, s->nbytes);
    }
    moe_golden_set_free(&tok), moe_golden_set_free(&dp);
    return st;
}

static moe_status pplx_combine_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in,
                                   moe_golden_set *out)
{
    gk_run r;
    gk_begin(&r, ops, in, out);
    moe_pplx_config cfg = pplx_cfg(c);
    const moe_tensor *y = gk_in(&r, "expert_y"), *n = gk_in(&r, "num_tokens"), *src = gk_in(&r, "src");
    const moe_tensor *ids = gk_in(&r, "topk_ids"), *w = gk_in(&r, "topk_weights");
    moe_tensor *o = gk_out(&r, "out", MOE_BF16, 3, GK_SH(lead(c), c->dims.M, c->dims.H));
    return gk_done(&r, r.st ? r.st : ops->pplx_combine(&cfg, y, n, src, ids, w, o));
}

/* ---- Hybrid-EP -------------------------------------------------------------------------------------- */

static moe_hep_config hep_cfg(const moe_golden_case *c)
{
    const ep_arg *a = c->arg;
    moe_hep_config cfg = {(int)c->dims.R, (int)c->dims.E, a->rpn, a->pad, a->non_blocking, a->permuted};
    return cfg;
}

static moe_status hep_dispatch_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in,
                                   moe_golden_set *out)
{
    const ep_arg *a = c->arg;
    gk_run r;
    gk_begin(&r, ops, in, out);
    moe_hep_config cfg = hep_cfg(c);
    int64_t R = c->dims.R, T = c->dims.M, El = c->dims.E / R, N = a->permuted;
    moe_status st = a->non_blocking ? MOE_OK : moe_hep_permute_capacity(&cfg, moe_golden_set_find(in, "topk_ids"), &N);
    if (st != MOE_OK) return gk_done(&r, st);
    const moe_tensor *x = gk_in(&r, "x"), *xs = gk_opt(&r, "x_scales"), *ids = gk_in(&r, "topk_ids"),
                     *w = gk_in(&r, "topk_weights");
    moe_hep_permuted p = {gk_out(&r, "recv_x", MOE_BF16, 3, GK_SH(R, N, c->dims.H)),
                          gk_out(&r, "probs", MOE_F32, 2, GK_SH(R, N)),
                          a->S ? gk_out(&r, "recv_x_scales", MOE_F32, 3, GK_SH(R, N, a->S)) : NULL,
                          gk_out(&r, "tokens_per_expert", MOE_I32, 2, GK_SH(R, El)),
                          gk_out(&r, "padded_tokens_per_expert", MOE_I64, 2, GK_SH(R, El)),
                          gk_out(&r, "row_id_map", MOE_I32, 3, GK_SH(R, R * T, El)),
                          gk_out(&r, "overflow_flag", MOE_I32, 1, GK_SH(R)),
                          gk_out(&r, "num_dispatched", MOE_I32, 1, GK_SH(R))};
    return gk_done(&r, r.st ? r.st : ops->hep_dispatch_with_permute(&cfg, x, xs, ids, w, &p));
}

static moe_status hep_combine_make(const moe_golden_case *c, moe_golden_set *in)
{
    const ep_arg *a = c->arg;
    moe_golden_set tok, dp;
    moe_golden_set_init(&tok), moe_golden_set_init(&dp);
    moe_status st = make_tokens(c, &tok);
    if (st == MOE_OK) st = hep_dispatch_run(c, &moe_ops_ref, &tok, &dp);
    const moe_tensor *rx = moe_golden_set_find(&dp, "recv_x");
    moe_tensor *y = st == MOE_OK ? gk_new(in, &st, "y", MOE_BF16, 3, rx->shape) : NULL;
    if (st == MOE_OK) st = gk_normal(c, y, "y", 1.0f);
    const char *keep[2] = {"row_id_map", "probs"};
    for (int i = 0; i < (a->extra ? 2 : 1) && st == MOE_OK; i++) {
        const moe_tensor *s = moe_golden_set_find(&dp, keep[i]);
        moe_tensor *d = gk_new(in, &st, keep[i], s->dtype, s->ndim, s->shape);
        if (st == MOE_OK) memcpy(d->data, s->data, s->nbytes);
    }
    moe_golden_set_free(&tok), moe_golden_set_free(&dp);
    return st;
}

static moe_status hep_combine_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in,
                                  moe_golden_set *out)
{
    gk_run r;
    gk_begin(&r, ops, in, out);
    moe_hep_config cfg = hep_cfg(c);
    int64_t R = c->dims.R, T = c->dims.M;
    const moe_tensor *y = gk_in(&r, "y"), *map = gk_in(&r, "row_id_map"), *pr = gk_opt(&r, "probs");
    moe_tensor *o = gk_out(&r, "out", MOE_BF16, 3, GK_SH(R, T, c->dims.H));
    moe_tensor *op = pr ? gk_out(&r, "out_probs", MOE_F32, 3, GK_SH(R, T, c->dims.E)) : NULL;
    return gk_done(&r, r.st ? r.st : ops->hep_combine_with_unpermute(&cfg, y, map, pr, o, op));
}

/* ---- SET comparison: rows per (rank, expert) as multisets -------------------------------------------- */

/* The listed [R, E_loc, rows, ...] outputs side by side as byte rows. */
static moe_status joined_rows(const moe_golden_set *s, const char *const *names, int n, int64_t nrows, moe_tensor *out)
{
    size_t rb = 0, off = 0;
    for (int i = 0; i < n; i++) {
        const moe_tensor *t = moe_golden_set_find(s, names[i]);
        if (t) rb += t->nbytes / (size_t)nrows;
    }
    moe_status st = moe_tensor_alloc(out, MOE_U8, 2, GK_SH(nrows, (int64_t)rb));
    for (int i = 0; i < n && st == MOE_OK; i++) {
        const moe_tensor *t = moe_golden_set_find(s, names[i]);
        if (!t) continue;
        size_t w = t->nbytes / (size_t)nrows;
        for (int64_t r = 0; r < nrows; r++)
            memcpy((uint8_t *)out->data + (size_t)r * rb + off, (const uint8_t *)t->data + (size_t)r * w, w);
        off += w;
    }
    return st;
}

static moe_status set_compare(const moe_golden_case *c, const moe_golden_set *got, const moe_golden_set *want,
                              moe_cmp_metrics *m)
{
    int ll = !strcmp(c->kind, "deepep_ll_dispatch");
    const char *rows_of[3] = {"recv_x", "recv_x_scales", ll ? "src_info" : "src"};
    const moe_tensor *cnt = moe_golden_set_find(want, ll ? "count" : "num_tokens");
    const moe_tensor *rx = moe_golden_set_find(want, "recv_x");
    if (!cnt || !rx) return moe_fail(MOE_ERR_INVALID_ARG, "%s: no receive buffers to compare", c->name);
    int64_t nseg = rx->shape[0] * rx->shape[1], per = rx->shape[2];
    moe_tensor g, w;
    memset(&g, 0, sizeof g), memset(&w, 0, sizeof w);
    moe_status st = joined_rows(got, rows_of, 3, nseg * per, &g);
    if (st == MOE_OK) st = joined_rows(want, rows_of, 3, nseg * per, &w);
    int64_t *seg = malloc(sizeof(int64_t) * (size_t)(nseg + 1));
    if (st == MOE_OK && !seg) st = moe_fail(MOE_ERR_NOMEM, "%s: segments", c->name);
    for (int64_t s = 0; st == MOE_OK && s <= nseg; s++) seg[s] = s * per;
    if (st == MOE_OK) st = moe_compare_set_rows(&g, &w, seg, (int)nseg, m);
    free(seg);
    moe_tensor_free(&g), moe_tensor_free(&w);
    /* counts are exact; the LL per-source-rank ranges are exact in their
     * counts only (their begins follow the atomic order) */
    const moe_tensor *gc = moe_golden_set_find(got, ll ? "count" : "num_tokens");
    if (st == MOE_OK) st = gc ? moe_compare_exact(gc, cnt, m) : moe_fail(MOE_ERR_INVALID_ARG, "counts missing");
    if (st == MOE_OK && ll) {
        const moe_tensor *gl = moe_golden_set_find(got, "layout_range"), *wl = moe_golden_set_find(want, "layout_range");
        moe_tensor a, b;
        memset(&a, 0, sizeof a), memset(&b, 0, sizeof b);
        if (!gl || !wl) return moe_fail(MOE_ERR_INVALID_ARG, "layout_range missing");
        st = moe_tensor_alloc(&a, MOE_I64, wl->ndim, wl->shape);
        if (st == MOE_OK) st = moe_tensor_alloc(&b, MOE_I64, wl->ndim, wl->shape);
        for (int64_t i = 0; st == MOE_OK && i < moe_tensor_numel(wl); i++) {
            ((int64_t *)a.data)[i] = ((const int64_t *)gl->data)[i] & 0xFFFFFFFF;
            ((int64_t *)b.data)[i] = ((const int64_t *)wl->data)[i] & 0xFFFFFFFF;
        }
        if (st == MOE_OK) st = moe_compare_exact(&a, &b, m);
        moe_tensor_free(&a), moe_tensor_free(&b);
    }
    return st;
}

/* ---- describe ----------------------------------------------------------------------------------------- */

static moe_status ep_describe(const moe_golden_case *c, cJSON *p)
{
    const ep_arg *a = c->arg;
    moe_status st = gk_json_num(p, "world_size", (double)c->dims.R);
#define N(k, v) \
    if (st == MOE_OK) st = gk_json_num(p, k, v)
    N("num_experts", (double)c->dims.E);
    if (a->rpn) N("num_ranks_per_node", a->rpn);
    if (a->align) N("expert_alignment", a->align);
    N("scale_columns", a->S);
    N("neg1_pct", a->neg1_pct);
    N("duplicates", a->dup);
    N("silent_rank", a->silent);
    N("starved_rank", a->starved);
    if (!strncmp(c->kind, "deepep_ll", 9)) {
        N("max_tokens_per_rank", (double)a->t_max);
        N("use_fp8", a->fp8);
        N("round_scale", a->round_scale);
        N("use_ue8m0", a->ue8m0);
    }
    if (!strncmp(c->kind, "pplx", 4)) {
        N("dp_size", a->dp);
        N("max_num_tokens", (double)a->t_max);
    }
    if (!strncmp(c->kind, "hep", 3)) {
        N("pad_multiple", a->pad);
        N("non_blocking", a->non_blocking);
        if (a->non_blocking) N("num_permuted_tokens", a->permuted);
    }
    N("combine_extras", a->extra);
#undef N
    if (st == MOE_OK) st = gk_json_str(p, "ids", "silent rank: every slot -1; starved rank: its experts remapped away");
    if (st == MOE_OK) st = gk_json_str(p, "order", "the reference fixes ascending (source rank, token) where upstream is atomic");
    return st;
}

/* ---- the table ------------------------------------------------------------------------------------------- */

static const ep_arg AG = {.S = 2, .silent = -1, .starved = -1};
static const ep_arg DEEP = {.rpn = 4, .align = 1, .S = 2, .neg1_pct = 15, .silent = -1, .starved = -1};
static const ep_arg DEEP_2NODES = {.rpn = 2, .align = 2, .neg1_pct = 15, .dup = 1, .silent = -1, .starved = -1, .extra = 1};
static const ep_arg DEEP_1NODE = {.rpn = 4, .align = 1, .neg1_pct = 10, .silent = -1, .starved = -1, .extra = 1};
static const ep_arg DEEP_DUP = {.rpn = 2, .align = 4, .S = 1, .neg1_pct = 10, .dup = 1, .silent = -1, .starved = -1};
static const ep_arg DEEP_EDGE = {.rpn = 4, .align = 1, .S = 2, .neg1_pct = 10, .silent = 1, .starved = 3, .extra = 1};
static const ep_arg LL_BF16 = {.neg1_pct = 10, .silent = -1, .starved = -1, .t_max = 4};
static const ep_arg LL_FP8 = {.neg1_pct = 10, .silent = -1, .starved = -1, .t_max = 4, .fp8 = 1};
static const ep_arg LL_ROUND = {.neg1_pct = 10, .silent = -1, .starved = -1, .t_max = 4, .fp8 = 1, .round_scale = 1};
static const ep_arg LL_UE8M0 = {.neg1_pct = 10, .silent = -1, .starved = -1, .t_max = 3, .fp8 = 1, .round_scale = 1, .ue8m0 = 1};
static const ep_arg LL_EDGE = {.neg1_pct = 10, .silent = 0, .starved = 1, .t_max = 4, .fp8 = 1};
static const ep_arg PPLX = {.S = 2, .silent = -1, .starved = -1, .t_max = 4, .dp = 2};
static const ep_arg PPLX_DP1 = {.silent = -1, .starved = -1, .t_max = 3, .dp = 1};
static const ep_arg PPLX_EDGE = {.S = 1, .silent = -1, .starved = 3, .t_max = 4, .dp = 1};
static const ep_arg HEP = {.rpn = 4, .pad = 4, .S = 2, .silent = -1, .starved = -1, .extra = 1};
static const ep_arg HEP_2NODES = {.rpn = 2, .pad = 1, .silent = -1, .starved = -1, .extra = 1};
static const ep_arg HEP_NB = {.rpn = 4, .pad = 2, .silent = -1, .starved = -1, .non_blocking = 1, .permuted = 4};
static const ep_arg HEP_EDGE = {.rpn = 2, .pad = 4, .S = 1, .silent = -1, .starved = 2, .extra = 1};
static const ep_arg HEP_NOPROBS = {.rpn = 4, .pad = 2, .silent = -1, .starved = -1};

#define EP(kind, nm, seed, R, T, E, k, H, arg, note, mk, rn, cmp) \
    {nm, kind, "*", seed, {T, E, k, H, 0, R}, {0}, &arg, 0, note, mk, rn, ep_describe, cmp, NULL}

static const moe_golden_case CASES[] = {
    EP("ep_allgather_dispatch", "stage.ep_allgather_dispatch.r4", 1301, 4, 3, 8, 2, 16, AG,
       "NaiveDPEP all-gather, rank-major rows, scales moved with them", make_tokens, ag_run, NULL),
    EP("ep_reduce_scatter_combine", "stage.ep_reduce_scatter_combine.r4", 1302, 4, 3, 8, 2, 16, AG,
       "f32 sum over ranks ascending, one rounding", rs_make, rs_run, NULL),
    EP("deepep_layout", "stage.deepep_layout.r4_two_nodes", 1303, 4, 6, 16, 3, 16, DEEP_2NODES,
       "get_dispatch_layout with -1 slots and repeated experts", make_tokens, layout_run, NULL),
    EP("deepep_dispatch", "stage.deepep_dispatch.r4", 1304, 4, 6, 16, 3, 16, DEEP,
       "rows by (source rank, token), local ids or -1 with weight 0, scales", make_tokens, dispatch_run, NULL),
    EP("deepep_dispatch", "edge.dispatch.deepep.duplicates", 1305, 4, 6, 8, 3, 16, DEEP_DUP,
       "a token naming an expert twice is counted per pair; alignment 4", make_tokens, dispatch_run, NULL),
    EP("deepep_dispatch", "edge.dispatch.deepep.rank_without_tokens", 1306, 4, 6, 16, 3, 16, DEEP_EDGE,
       "rank 1 sends nothing (all -1), rank 3 receives nothing", make_tokens, dispatch_run, NULL),
    EP("deepep_combine", "stage.deepep_combine.one_node", 1307, 4, 6, 16, 3, 16, DEEP_1NODE,
       "unweighted f32 sum in rank order plus bias0 + bias1, one rounding", combine_make, combine_run, NULL),
    EP("deepep_combine", "stage.deepep_combine.two_nodes", 1308, 4, 6, 16, 3, 16, DEEP_2NODES,
       "two nodes: per-node sums rounded, then rounded again", combine_make, combine_run, NULL),
    EP("deepep_combine", "edge.combine.deepep.rank_without_tokens", 1309, 4, 6, 16, 3, 16, DEEP_EDGE,
       "combine after a silent and a starved rank", combine_make, combine_run, NULL),
    EP("deepep_ll_dispatch", "stage.deepep_ll_dispatch.bf16", 1310, 2, 3, 4, 2, 128, LL_BF16,
       "[E_loc, R*T_max, H] rows + counts, bf16", make_tokens, ll_dispatch_run, set_compare),
    EP("deepep_ll_dispatch", "stage.deepep_ll_dispatch.fp8", 1311, 2, 3, 4, 2, 256, LL_FP8,
       "fp8 cast per 128 channels, amax floor 1e-4", make_tokens, ll_dispatch_run, set_compare),
    EP("deepep_ll_dispatch", "stage.deepep_ll_dispatch.fp8_round_scale", 1312, 2, 3, 4, 2, 256, LL_ROUND,
       "power-of-two scales", make_tokens, ll_dispatch_run, set_compare),
    EP("deepep_ll_dispatch", "stage.deepep_ll_dispatch.fp8_ue8m0", 1313, 2, 2, 4, 2, 512, LL_UE8M0,
       "UE8M0 exponent bytes packed 4 per int32", make_tokens, ll_dispatch_run, set_compare),
    EP("deepep_ll_dispatch", "edge.dispatch.deepep_ll.rank_without_tokens", 1314, 2, 3, 4, 2, 128, LL_EDGE,
       "rank 0 sends nothing, rank 1's experts receive nothing", make_tokens, ll_dispatch_run, set_compare),
    EP("deepep_ll_combine", "stage.deepep_ll_combine.r2", 1315, 2, 3, 4, 2, 128, LL_BF16,
       "weighted fmaf over slots, one rounding", ll_combine_make, ll_combine_run, NULL),
    EP("deepep_ll_combine", "edge.combine.deepep_ll.rank_without_tokens", 1316, 2, 3, 4, 2, 128, LL_EDGE,
       "combine after a silent and a starved rank", ll_combine_make, ll_combine_run, NULL),
    EP("pplx_dispatch", "stage.pplx_dispatch.r4_dp2", 1317, 4, 3, 8, 2, 16, PPLX,
       "two DP groups of two ranks, scales", make_tokens, pplx_dispatch_run, set_compare),
    EP("pplx_dispatch", "stage.pplx_dispatch.r2_dp1", 1318, 2, 3, 4, 2, 16, PPLX_DP1, "one rank per DP group",
       make_tokens, pplx_dispatch_run, set_compare),
    EP("pplx_dispatch", "edge.dispatch.pplx.rank_without_tokens", 1319, 4, 3, 8, 2, 16, PPLX_EDGE,
       "rank 3's experts receive nothing", make_tokens, pplx_dispatch_run, set_compare),
    EP("pplx_combine", "stage.pplx_combine.r4_dp2", 1320, 4, 3, 8, 2, 16, PPLX, "weighted fmaf over slots",
       pplx_combine_make, pplx_combine_run, NULL),
    EP("hep_dispatch_with_permute", "stage.hep_dispatch_with_permute.blocking", 1321, 4, 3, 8, 2, 16, HEP,
       "expert-major rows, pad 4 with zero rows, probs, scales", make_tokens, hep_dispatch_run, NULL),
    EP("hep_dispatch_with_permute", "stage.hep_dispatch_with_permute.non_blocking_overflow", 1322, 4, 4, 8, 2, 16,
       HEP_NB, "fixed capacity 4 rows per rank: drops and the overflow flag", make_tokens, hep_dispatch_run, NULL),
    EP("hep_dispatch_with_permute", "edge.dispatch.hep.rank_without_tokens", 1323, 4, 3, 8, 2, 16, HEP_EDGE,
       "rank 2's experts receive nothing", make_tokens, hep_dispatch_run, NULL),
    EP("hep_combine_with_unpermute", "stage.hep_combine_with_unpermute.one_node", 1324, 4, 3, 8, 2, 16, HEP,
       "unweighted sums per rank, home rank adds partials; probs gathered back", hep_combine_make, hep_combine_run,
       NULL),
    EP("hep_combine_with_unpermute", "stage.hep_combine_with_unpermute.two_nodes", 1325, 4, 3, 8, 2, 16, HEP_2NODES,
       "other nodes' partials rounded there", hep_combine_make, hep_combine_run, NULL),
    EP("hep_combine_with_unpermute", "stage.hep_combine_with_unpermute.no_probs", 1326, 4, 3, 8, 2, 16, HEP_NOPROBS,
       "without probs", hep_combine_make, hep_combine_run, NULL),
};

gk_family gk_cases_dispatch(void)
{
    gk_family f = {CASES, (int)(sizeof CASES / sizeof CASES[0])};
    return f;
}
