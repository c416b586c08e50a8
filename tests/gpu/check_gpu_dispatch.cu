/* The CUDA dispatch / combine stages (optimized/cuda/dispatch_*.cu) against
 * the reference, byte for byte: DeepEP normal (layout, dispatch, combine),
 * DeepEP-LL (dispatch, its atomic variant up to the row order within each
 * (expert, source rank) block, combine) and Hybrid-EP (dispatch with
 * permute, combine with unpermute), on seeded problems from one token to
 * 4096 tokens over 8 ranks, with -1 ids, empty experts, one hot expert,
 * NaN / Inf inputs, and the errors the reference finds before and while it
 * computes. Device outputs start as 0xA5 garbage and host outputs as 0x5A,
 * so a byte either side leaves unwritten shows. Combine outputs compare NaN
 * by class (the GPU's NaN + NaN payload is not x86's); everything else is
 * bits. Exits 77 (skip) without a CUDA device. */
#include <check.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>
#include "moe/dispatch.h"
#include "moe/format.h"
#include "moe/rng.h"
#include "optimized/cuda/cuda.h"
#include "reference/dispatch_core.h"
#include "test_util.h"
#include "gpu_test_util.h"

/* ---- tensors on both sides ------------------------------------------------ */

struct tp {
    moe_tensor h, d;
};

/* An output pair: host 0x5A, device 0xA5. */
static void out_pair(tp *p, moe_dtype dt, int nd, const int64_t *shape)
{
    ck_assert_msg(moe_tensor_alloc(&p->h, dt, nd, shape) == MOE_OK, "%s", moe_last_error());
    ck_assert_msg(moe_cuda_alloc(&p->d, dt, nd, shape) == MOE_OK, "%s", moe_last_error());
    size_t nb = gpu_layout_bytes(&p->h);
    if (nb) {
        memset(p->h.data, 0x5A, nb);
        ck_assert_int_eq(cudaMemset(p->d.data, 0xA5, nb), cudaSuccess);
    }
}

/* An input pair from a filled host tensor. */
static void in_pair(tp *p, const moe_tensor *h)
{
    p->h = *h;
    ck_assert_msg(moe_cuda_alloc(&p->d, h->dtype, h->ndim, h->shape) == MOE_OK, "%s", moe_last_error());
    ck_assert_msg(moe_cuda_copy(&p->d, &p->h) == MOE_OK, "%s", moe_last_error());
}

static void free_pair(tp *p)
{
    moe_tensor_free(&p->h);
    moe_cuda_free(&p->d);
}

static void same(const char *what, tp *p, int nan_class)
{
    gpu_expect_same(what, &p->h, &p->d, nan_class);
}

/* ---- inputs --------------------------------------------------------------- */

static uint64_t SEED = 20261121;

static moe_tensor rand_ids(int R, int64_t T, int K, int E, unsigned neg1, int distinct, uint64_t s)
{
    int64_t sh[3] = {R, T, K};
    moe_tensor t = gpu_hnew_sh(MOE_I32, 3, sh);
    ck_assert_int_eq(moe_rng_topk_ids((int32_t *)t.data, R * T, K, E, SEED + s, moe_rng_stream_id("gpu.ids"), neg1,
                                      distinct),
                     MOE_OK);
    return t;
}

/* splitmix64 of (seed, index): cheap enough for the 10^8-element tensors
 * of the large shapes (the library's Philox normals are not). */
static inline uint64_t mix64(uint64_t seed, uint64_t i)
{
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 0x94D049BB133111EBull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Elements [off, off+n) of a dt buffer: f32 / bf16 / f16 values of random
 * sign, 23 random fraction bits (so every sum rounds) and exponents in
 * [-8, 8]; other dtypes random bytes. */
static void fast_fill(moe_dtype dt, void *p, int64_t off, int64_t n, uint64_t seed)
{
    for (int64_t i = off; i < off + n; i++) {
        uint64_t u = mix64(seed, (uint64_t)i);
        uint32_t bits = (uint32_t)(u >> 63) << 31 | (uint32_t)(127 + (int)((u >> 40) % 17) - 8) << 23 |
                        (uint32_t)(u & 0x7FFFFFu);
        if (dt == MOE_F32) ((uint32_t *)p)[i] = bits;
        else if (dt == MOE_BF16) ((uint16_t *)p)[i] = (uint16_t)(bits >> 16);
        else if (dt == MOE_F16) ((uint16_t *)p)[i] = moe_f32_to_f16(tu_float(bits), MOE_POLICY_IEEE_RNE, NULL);
        else ((uint8_t *)p)[i] = (uint8_t)u;
    }
}

/* A few NaN / +-Inf planted in elements [0, n). */
static void plant_specials(moe_dtype dt, void *p, int64_t n, uint64_t seed)
{
    const float sp[4] = {NAN, INFINITY, -INFINITY, -NAN};
    if (n <= 0 || (dt != MOE_F32 && dt != MOE_BF16)) return;
    for (int i = 0; i < 16; i++) {
        int64_t at = (int64_t)(mix64(seed + 1, (uint64_t)i) % (uint64_t)n);
        if (dt == MOE_F32) ((float *)p)[at] = sp[i % 4];
        else ((uint16_t *)p)[at] = moe_f32_to_bf16(sp[i % 4], MOE_POLICY_IEEE_RNE, NULL);
    }
}

static moe_tensor rand_act(moe_dtype dt, int nd, const int64_t *sh, uint64_t s, int specials)
{
    moe_tensor t = gpu_hnew_sh(dt, nd, sh);
    int64_t n = dt == MOE_E4M3 || dt == MOE_E5M2 ? (int64_t)gpu_layout_bytes(&t) : moe_tensor_numel(&t);
    fast_fill(dt, t.data, 0, n, SEED + s);
    if (specials) plant_specials(dt, t.data, n, SEED + s);
    return t;
}

static moe_tensor rand_f32(int nd, const int64_t *sh, uint64_t s)
{
    moe_tensor t = gpu_hnew_sh(MOE_F32, nd, sh);
    int64_t n = moe_tensor_numel(&t);
    for (int64_t i = 0; i < n; i++) ((float *)t.data)[i] = moe_rng_uniform(SEED + s, 5, (uint64_t)i) + 0.01f;
    return t;
}

#define OK_BOTH(ref_call, gpu_call)                                                                              \
    do {                                                                                                          \
        moe_status rs_ = (ref_call);                                                                             \
        ck_assert_msg(rs_ == MOE_OK, "reference: %s", moe_last_error());                                          \
        moe_status gs_ = (gpu_call);                                                                             \
        ck_assert_msg(gs_ == MOE_OK, "gpu: %s (%s)", moe_status_str(gs_), moe_last_error());                      \
        ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);                                                   \
    } while (0)

/* The same status and message from both. */
#define SAME_ERR(ref_call, gpu_call) GPU_SAME_ERROR(#gpu_call, ref_call, gpu_call)

#define HOST_REFUSED(gpu_call, needle)                                                                           \
    do {                                                                                                          \
        moe_clear_error();                                                                                        \
        moe_status gs_ = (gpu_call);                                                                             \
        ck_assert_msg(gs_ == MOE_ERR_INVALID_ARG, "%s: %s (%s)", #gpu_call, moe_status_str(gs_),                 \
                      moe_last_error());                                                                          \
        ck_assert_msg(strstr(moe_last_error(), needle) && strstr(moe_last_error(), "host memory"),                \
                      "message '%s' lacks '%s'", moe_last_error(), needle);                                       \
    } while (0)

/* ================================================================== */
/* DeepEP normal mode                                                  */

struct ht_case {
    int R, E, rpn;
    int64_t T;
    int K;
    unsigned neg1;
    int64_t H;
    moe_dtype xd;
    int64_t S;       /* scales per row, 0: none */
    int extra_rows;  /* N = capacity + extra */
    int align;
    int hot;         /* every id the same expert */
};

static const ht_case ht_cases[] = {
    {1, 8, 1, 1, 2, 0, 64, MOE_BF16, 0, 0, 1, 0},
    {2, 16, 1, 64, 4, 10, 130, MOE_F32, 3, 5, 4, 0},
    {4, 64, 2, 256, 6, 5, 7, MOE_E4M3, 0, 1, 128, 0},
    {8, 256, 8, 512, 8, 2, 7168, MOE_BF16, 56, 0, 1, 0},   /* 4096 tokens, one node */
    {8, 128, 2, 512, 8, 0, 2048, MOE_BF16, 16, 3, 32, 0},  /* four nodes */
    {8, 64, 4, 200, 4, 0, 256, MOE_F32, 2, 0, 1, 1},       /* one hot expert */
    {4, 16, 2, 0, 3, 0, 32, MOE_BF16, 0, 2, 1, 0},         /* no tokens */
};
#define N_HT ((int)(sizeof ht_cases / sizeof ht_cases[0]))

static moe_tensor ht_ids(const ht_case *c, uint64_t s)
{
    moe_tensor ids = rand_ids(c->R, c->T, c->K, c->E, c->neg1, 0, s);
    if (c->hot)
        for (int64_t i = 0; i < moe_tensor_numel(&ids); i++) ((int32_t *)ids.data)[i] = c->E / 2 + 1;
    return ids;
}

START_TEST(deepep_layout_matches)
{
    ht_case cs = ht_cases[_i];
    cs.T = gpu_small_cap(cs.T, 64); /* small mode: 64 tokens a rank, H kept */
    const ht_case *c = &cs;
    moe_deepep_config cfg = {c->R, c->E, c->rpn, c->align};
    tp ids, pe, pr, pn, in;
    moe_tensor hid = ht_ids(c, 100 + _i);
    in_pair(&ids, &hid);
    int64_t she[2] = {c->R, c->E}, shr[2] = {c->R, c->R}, shn[2] = {c->R, c->R / c->rpn}, shi[3] = {c->R, c->T, c->R};
    out_pair(&pe, MOE_I32, 2, she);
    out_pair(&pr, MOE_I32, 2, shr);
    out_pair(&pn, MOE_I32, 2, shn);
    out_pair(&in, MOE_BOOL, 3, shi);
    for (int with_node = 0; with_node < 2; with_node++) {
        moe_deepep_layout ho = {&pe.h, &pr.h, with_node ? &pn.h : NULL, &in.h};
        moe_deepep_layout dout = {&pe.d, &pr.d, with_node ? &pn.d : NULL, &in.d};
        OK_BOTH(moe_ops_ref.deepep_layout(&cfg, &ids.h, &ho), moe_cuda_deepep_layout(&cfg, &ids.d, &dout));
        same("num_tokens_per_expert", &pe, 0);
        same("num_tokens_per_rank", &pr, 0);
        if (with_node) same("num_tokens_per_node", &pn, 0);
        same("is_token_in_rank", &in, 0);
    }
    /* errors: a host tensor, a bad id, a bad world */
    moe_deepep_layout ho = {&pe.h, &pr.h, &pn.h, &in.h}, dout = {&pe.d, &pr.d, &pn.d, &in.d};
    moe_deepep_layout mixed = {&pe.d, &pr.h, NULL, &in.d};
    HOST_REFUSED(moe_cuda_deepep_layout(&cfg, &ids.h, &dout), "topk_ids");
    HOST_REFUSED(moe_cuda_deepep_layout(&cfg, &ids.d, &mixed), "num_tokens_per_rank");
    moe_deepep_config bad = cfg;
    bad.world_size = 3;
    SAME_ERR(moe_ops_ref.deepep_layout(&bad, &ids.h, &ho), moe_cuda_deepep_layout(&bad, &ids.d, &dout));
    SAME_ERR(moe_ops_ref.deepep_layout(NULL, &ids.h, &ho), moe_cuda_deepep_layout(NULL, &ids.d, &dout));
    SAME_ERR(moe_ops_ref.deepep_layout(&cfg, &ids.h, NULL), moe_cuda_deepep_layout(&cfg, &ids.d, NULL));
    if (moe_tensor_numel(&hid) > 0) {
        ((int32_t *)hid.data)[moe_tensor_numel(&hid) - 1] = c->E; /* out of range */
        ck_assert_int_eq(moe_cuda_copy(&ids.d, &ids.h), MOE_OK);
        SAME_ERR(moe_ops_ref.deepep_layout(&cfg, &ids.h, &ho), moe_cuda_deepep_layout(&cfg, &ids.d, &dout));
    }
    free_pair(&ids), free_pair(&pe), free_pair(&pr), free_pair(&pn), free_pair(&in);
}
END_TEST

/* dispatch, then combine of random expert outputs in the received layout */
START_TEST(deepep_dispatch_combine_matches)
{
    ht_case cs = ht_cases[_i];
    cs.T = gpu_small_cap(cs.T, 64); /* small mode: 64 tokens a rank, H kept */
    const ht_case *c = &cs;
    int R = c->R, E_loc = c->E / c->R, K = c->K;
    moe_deepep_config cfg = {R, c->E, c->rpn, c->align};
    int64_t T = c->T, H = c->H;
    moe_tensor hid = ht_ids(c, 200 + _i);
    int64_t cap = 0;
    ck_assert_int_eq(moe_deepep_dispatch_capacity(&cfg, &hid, &cap), MOE_OK);
    int64_t N = cap + c->extra_rows;
    int64_t shx[3] = {R, T, H}, shs[3] = {R, T, c->S}, shk[3] = {R, T, K};
    tp ids, x, xs, w;
    in_pair(&ids, &hid);
    moe_tensor hx = rand_act(c->xd, 3, shx, 201 + _i, 1), hw = rand_f32(3, shk, 202 + _i);
    in_pair(&x, &hx);
    in_pair(&w, &hw);
    if (c->S) {
        moe_tensor hs = rand_f32(3, shs, 203 + _i);
        in_pair(&xs, &hs);
    }
    tp ox, os, oid, ow, osrc, onr, ope, opre;
    int64_t sox[3] = {R, N, H}, sos[3] = {R, N, c->S}, sok[3] = {R, N, K}, son[2] = {R, N}, sr[1] = {R},
            sre[2] = {R, E_loc}, srr[2] = {R, R};
    out_pair(&ox, c->xd, 3, sox);
    if (c->S) out_pair(&os, MOE_F32, 3, sos);
    out_pair(&oid, MOE_I32, 3, sok);
    out_pair(&ow, MOE_F32, 3, sok);
    out_pair(&osrc, MOE_I32, 2, son);
    out_pair(&onr, MOE_I32, 1, sr);
    out_pair(&ope, MOE_I32, 2, sre);
    out_pair(&opre, MOE_I32, 2, srr);
    for (int with_prefix = 1; with_prefix >= 0; with_prefix--) {
        moe_deepep_recv ho = {&ox.h, c->S ? &os.h : NULL, &oid.h, &ow.h, &osrc.h, &onr.h, &ope.h,
                              with_prefix ? &opre.h : NULL};
        moe_deepep_recv dout = {&ox.d, c->S ? &os.d : NULL, &oid.d, &ow.d, &osrc.d, &onr.d, &ope.d,
                                with_prefix ? &opre.d : NULL};
        OK_BOTH(moe_ops_ref.deepep_dispatch(&cfg, &x.h, c->S ? &xs.h : NULL, &ids.h, &w.h, &ho),
                moe_cuda_deepep_dispatch(&cfg, &x.d, c->S ? &xs.d : NULL, &ids.d, &w.d, &dout));
        same("recv x", &ox, 0);
        if (c->S) same("recv x_scales", &os, 0);
        same("recv topk_ids", &oid, 0);
        same("recv topk_weights", &ow, 0);
        same("recv src_idx", &osrc, 0);
        same("num_recv", &onr, 0);
        same("num_recv_per_expert", &ope, 0);
        if (with_prefix) same("rank_prefix_matrix", &opre, 0);
    }
    moe_deepep_recv ho = {&ox.h, c->S ? &os.h : NULL, &oid.h, &ow.h, &osrc.h, &onr.h, &ope.h, &opre.h};
    moe_deepep_recv dout = {&ox.d, c->S ? &os.d : NULL, &oid.d, &ow.d, &osrc.d, &onr.d, &ope.d, &opre.d};
    HOST_REFUSED(moe_cuda_deepep_dispatch(&cfg, &x.h, c->S ? &xs.d : NULL, &ids.d, &w.d, &dout), "x");
    if (cap > 0) { /* one row short: found while computing */
        int64_t sx2[3] = {R, cap - 1, H}, sk2[3] = {R, cap - 1, K}, sn2[2] = {R, cap - 1}, ss2[3] = {R, cap - 1, c->S};
        tp sx, ss, sid, sw, ssrc;
        out_pair(&sx, c->xd, 3, sx2);
        if (c->S) out_pair(&ss, MOE_F32, 3, ss2);
        out_pair(&sid, MOE_I32, 3, sk2);
        out_pair(&sw, MOE_F32, 3, sk2);
        out_pair(&ssrc, MOE_I32, 2, sn2);
        moe_deepep_recv hs = {&sx.h, c->S ? &ss.h : NULL, &sid.h, &sw.h, &ssrc.h, &onr.h, &ope.h, &opre.h};
        moe_deepep_recv ds = {&sx.d, c->S ? &ss.d : NULL, &sid.d, &sw.d, &ssrc.d, &onr.d, &ope.d, &opre.d};
        SAME_ERR(moe_ops_ref.deepep_dispatch(&cfg, &x.h, c->S ? &xs.h : NULL, &ids.h, &w.h, &hs),
                 moe_cuda_deepep_dispatch(&cfg, &x.d, c->S ? &xs.d : NULL, &ids.d, &w.d, &ds));
        free_pair(&sx), free_pair(&sid), free_pair(&sw), free_pair(&ssrc);
        if (c->S) free_pair(&ss);
    }
    moe_deepep_config bad = cfg;
    bad.expert_alignment = 0;
    SAME_ERR(moe_ops_ref.deepep_dispatch(&bad, &x.h, c->S ? &xs.h : NULL, &ids.h, &w.h, &ho),
             moe_cuda_deepep_dispatch(&bad, &x.d, c->S ? &xs.d : NULL, &ids.d, &w.d, &dout));

    /* combine: bf16 or f32 expert outputs in the received layout */
    if (c->xd == MOE_BF16 || c->xd == MOE_F32) {
        tp in, y, b0, b1, cx, cw;
        int64_t shi[3] = {R, T, R}, sy[3] = {R, N, H};
        out_pair(&in, MOE_BOOL, 3, shi);
        int64_t she[2] = {R, c->E}, shr[2] = {R, R};
        tp pe, pr;
        out_pair(&pe, MOE_I32, 2, she);
        out_pair(&pr, MOE_I32, 2, shr);
        moe_deepep_layout lh = {&pe.h, &pr.h, NULL, &in.h};
        ck_assert_int_eq(moe_ref_deepep_layout(&cfg, &ids.h, &lh), MOE_OK);
        ck_assert_int_eq(moe_cuda_copy(&in.d, &in.h), MOE_OK);
        moe_tensor hy = rand_act(c->xd, 3, sy, 210 + _i, 1), hb0 = rand_act(c->xd, 3, shx, 211 + _i, 0),
                   hb1 = rand_act(c->xd, 3, shx, 212 + _i, 0);
        in_pair(&y, &hy);
        in_pair(&b0, &hb0);
        in_pair(&b1, &hb1);
        out_pair(&cx, c->xd, 3, shx);
        out_pair(&cw, MOE_F32, 3, shk);
        for (int v = 0; v < 3; v++) { /* both biases and weights; bias0 only; nothing optional */
            const moe_tensor *hb0p = v < 2 ? &b0.h : NULL, *hb1p = v == 0 ? &b1.h : NULL;
            const moe_tensor *db0p = v < 2 ? &b0.d : NULL, *db1p = v == 0 ? &b1.d : NULL;
            OK_BOTH(moe_ops_ref.deepep_combine(&cfg, &y.h, v < 2 ? &ow.h : NULL, &in.h, hb0p, hb1p, &cx.h,
                                               v < 2 ? &cw.h : NULL),
                    moe_cuda_deepep_combine(&cfg, &y.d, v < 2 ? &ow.d : NULL, &in.d, db0p, db1p, &cx.d,
                                            v < 2 ? &cw.d : NULL));
            same("combined_x", &cx, 1);
            if (v < 2) same("combined_topk_weights", &cw, 1);
        }
        HOST_REFUSED(moe_cuda_deepep_combine(&cfg, &y.d, &ow.d, &in.h, NULL, NULL, &cx.d, &cw.d), "is_token_in_rank");
        if (R * T > 0) {
            /* a byte that is not a bool, found while computing */
            uint8_t *b = (uint8_t *)in.h.data;
            int64_t at = (R * T * R) / 2;
            uint8_t keep = b[at];
            b[at] = 2;
            ck_assert_int_eq(moe_cuda_copy(&in.d, &in.h), MOE_OK);
            SAME_ERR(moe_ops_ref.deepep_combine(&cfg, &y.h, &ow.h, &in.h, NULL, NULL, &cx.h, &cw.h),
                     moe_cuda_deepep_combine(&cfg, &y.d, &ow.d, &in.d, NULL, NULL, &cx.d, &cw.d));
            b[at] = keep;
            ck_assert_int_eq(moe_cuda_copy(&in.d, &in.h), MOE_OK);
        }
        if (cap > 0) { /* the handle sends more tokens than x has rows */
            int64_t sy2[3] = {R, cap - 1, H}, sw2[3] = {R, cap - 1, K};
            tp y2, w2;
            moe_tensor hy2 = rand_act(c->xd, 3, sy2, 213, 0), hw2 = rand_f32(3, sw2, 214);
            in_pair(&y2, &hy2);
            in_pair(&w2, &hw2);
            SAME_ERR(moe_ops_ref.deepep_combine(&cfg, &y2.h, &w2.h, &in.h, NULL, NULL, &cx.h, &cw.h),
                     moe_cuda_deepep_combine(&cfg, &y2.d, &w2.d, &in.d, NULL, NULL, &cx.d, &cw.d));
            free_pair(&y2), free_pair(&w2);
        }
        free_pair(&in), free_pair(&pe), free_pair(&pr), free_pair(&y), free_pair(&b0), free_pair(&b1);
        free_pair(&cx), free_pair(&cw);
    }
    free_pair(&ids), free_pair(&x), free_pair(&w);
    if (c->S) free_pair(&xs), free_pair(&os);
    free_pair(&ox), free_pair(&oid), free_pair(&ow), free_pair(&osrc), free_pair(&onr), free_pair(&ope);
    free_pair(&opre);
}
END_TEST

/* ================================================================== */
/* DeepEP low-latency mode                                             */

struct ll_case {
    int R, E;
    int64_t Tmax, T;
    int K;
    unsigned neg1;
    int64_t H;
    moe_dtype xd;
    int fp8, round_scale, ue8m0;
    int wide; /* per-token magnitudes from 2^-140 to 2^120 (scale rules at their ends) */
};

static const ll_case ll_cases[] = {
    {1, 4, 1, 1, 2, 0, 128, MOE_BF16, 0, 0, 0, 0},
    {2, 8, 40, 33, 3, 15, 256, MOE_F32, 1, 0, 0, 1},
    {4, 32, 64, 64, 6, 5, 1024, MOE_BF16, 1, 1, 0, 1},
    {8, 64, 64, 60, 8, 5, 2048, MOE_BF16, 1, 1, 1, 0},
    {8, 128, 64, 64, 8, 2, 7168, MOE_BF16, 1, 0, 0, 0},   /* 512 tokens, DeepSeek hidden */
    {8, 256, 16, 16, 8, 0, 520, MOE_BF16, 0, 0, 0, 0},    /* 1040-byte rows: 16-byte words, not 16 */
    {8, 16, 512, 512, 4, 0, 128, MOE_F32, 1, 1, 0, 0},    /* 4096 tokens */
    {4, 8, 8, 0, 2, 0, 512, MOE_BF16, 1, 1, 1, 0},        /* no tokens */
};
#define N_LL ((int)(sizeof ll_cases / sizeof ll_cases[0]))

static moe_tensor ll_x(const ll_case *c, uint64_t s)
{
    int64_t sh[3] = {c->R, c->T, c->H};
    moe_tensor x = rand_act(c->xd, 3, sh, s, 1);
    if (c->wide) {
        for (int64_t t = 0; t < c->R * c->T; t++) {
            float m = ldexpf(1.0f, (int)(moe_rng_u32(SEED + s, 6, (uint64_t)t) % 261) - 140);
            for (int64_t h = 0; h < c->H; h++) {
                int64_t i = t * c->H + h;
                if (c->xd == MOE_F32) ((float *)x.data)[i] *= m;
                else {
                    uint16_t *u = (uint16_t *)x.data;
                    u[i] = moe_f32_to_bf16(moe_bf16_to_f32(u[i]) * m, MOE_POLICY_IEEE_RNE, NULL);
                }
            }
        }
    }
    return x;
}

struct ll_outs {
    tp x, s, count, info, range;
};

static void ll_alloc(ll_outs *o, const ll_case *c)
{
    int E_loc = c->E / c->R;
    int64_t Tall = c->R * c->Tmax;
    int64_t sx[4] = {c->R, E_loc, Tall, c->H}, ss[4] = {c->R, E_loc, Tall, c->ue8m0 ? c->H / 512 : c->H / 128};
    int64_t sc[2] = {c->R, E_loc}, si[3] = {c->R, E_loc, Tall}, sr[3] = {c->R, E_loc, c->R};
    out_pair(&o->x, c->fp8 ? MOE_E4M3 : c->xd, 4, sx);
    if (c->fp8) out_pair(&o->s, c->ue8m0 ? MOE_I32 : MOE_F32, 4, ss);
    out_pair(&o->count, MOE_I32, 2, sc);
    out_pair(&o->info, MOE_I32, 3, si);
    out_pair(&o->range, MOE_I64, 3, sr);
}

static void ll_free(ll_outs *o, const ll_case *c)
{
    free_pair(&o->x), free_pair(&o->count), free_pair(&o->info), free_pair(&o->range);
    if (c->fp8) free_pair(&o->s);
}

/* The atomic layout equals the reference's once each (expert, source rank)
 * block is put in token order: the same counts and block sizes, each block
 * inside [0, count), and the same rows, scales and tokens. */
static void ll_same_as_set(ll_outs *o, const ll_case *c)
{
    int E = c->E, R = c->R;
    int64_t Tall = R * c->Tmax;
    moe_tensor gx = gpu_to_host(&o->x.d), gc = gpu_to_host(&o->count.d), gi = gpu_to_host(&o->info.d), gr = gpu_to_host(&o->range.d);
    moe_tensor gs = {};
    if (c->fp8) gs = gpu_to_host(&o->s.d);
    gpu_same_bytes("atomic count", &o->count.h, gc.data, gpu_layout_bytes(&gc), 0);
    size_t xrow = moe_dtype_row_bytes(o->x.h.dtype, c->H), srow = c->fp8 ? (size_t)(c->ue8m0 ? c->H / 512 : c->H / 128) * 4 : 0;
    const int64_t *rr = (const int64_t *)o->range.h.data, *gr64 = (const int64_t *)gr.data;
    const int32_t *ri = (const int32_t *)o->info.h.data, *gii = (const int32_t *)gi.data;
    const int32_t *cnt = (const int32_t *)o->count.h.data;
    for (int e = 0; e < E; e++) {
        std::vector<int> covered((size_t)cnt[e], 0);
        for (int r = 0; r < R; r++) {
            int64_t a = rr[e * R + r], b = gr64[e * R + r];
            int64_t n = (uint32_t)a, ab = (int64_t)((uint64_t)a >> 32), bb = (int64_t)((uint64_t)b >> 32);
            ck_assert_msg((int64_t)(uint32_t)b == n, "expert %d rank %d: block of %lld rows, reference %lld", e, r,
                          (long long)(uint32_t)b, (long long)n);
            ck_assert_msg(bb >= 0 && bb + n <= cnt[e], "expert %d rank %d: block [%lld, +%lld) outside the count %d", e,
                          r, (long long)bb, (long long)n, cnt[e]);
            std::vector<std::pair<int32_t, int64_t>> rows;
            for (int64_t i = 0; i < n; i++) {
                ck_assert_msg(!covered[bb + i], "expert %d: row %lld in two blocks", e, (long long)(bb + i));
                covered[bb + i] = 1;
                rows.push_back({gii[e * Tall + bb + i], bb + i});
            }
            std::sort(rows.begin(), rows.end());
            for (int64_t i = 0; i < n; i++) {
                int64_t ro = e * Tall + ab + i, go = e * Tall + rows[i].second;
                ck_assert_msg(ri[ro] == rows[i].first, "expert %d rank %d: token %d, reference %d", e, r,
                              rows[i].first, ri[ro]);
                ck_assert_msg(!memcmp((char *)o->x.h.data + ro * xrow, (char *)gx.data + go * xrow, xrow),
                              "expert %d rank %d token %d: row bytes differ", e, r, ri[ro]);
                if (srow)
                    ck_assert_msg(!memcmp((char *)o->s.h.data + ro * srow, (char *)gs.data + go * srow, srow),
                                  "expert %d rank %d token %d: scales differ", e, r, ri[ro]);
            }
        }
        for (int64_t i = cnt[e]; i < Tall; i++) { /* past the count: zeros, -1 */
            int64_t o2 = e * Tall + i;
            ck_assert_int_eq(gii[o2], -1);
            ck_assert_msg(!memcmp((char *)o->x.h.data + o2 * xrow, (char *)gx.data + o2 * xrow, xrow), "tail row");
        }
    }
    moe_tensor_free(&gx), moe_tensor_free(&gc), moe_tensor_free(&gi), moe_tensor_free(&gr);
    if (c->fp8) moe_tensor_free(&gs);
}

START_TEST(ll_dispatch_combine_matches)
{
    ll_case cs = ll_cases[_i];
    cs.Tmax = gpu_small_cap(cs.Tmax, 64), cs.T = gpu_small_cap(cs.T, 64); /* small mode: H kept */
    const ll_case *c = &cs;
    int R = c->R, K = c->K;
    moe_deepep_ll_config cfg = {R, c->E, c->Tmax, c->fp8, c->round_scale, c->ue8m0};
    moe_tensor hid = rand_ids(R, c->T, K, c->E, c->neg1, 1, 300 + _i), hx = ll_x(c, 301 + _i);
    tp ids, x;
    in_pair(&ids, &hid);
    in_pair(&x, &hx);
    ll_outs o;
    ll_alloc(&o, c);
    moe_deepep_ll_recv ho = {&o.x.h, c->fp8 ? &o.s.h : NULL, &o.count.h, &o.info.h, &o.range.h};
    moe_deepep_ll_recv dout = {&o.x.d, c->fp8 ? &o.s.d : NULL, &o.count.d, &o.info.d, &o.range.d};
    OK_BOTH(moe_ops_ref.deepep_ll_dispatch(&cfg, &x.h, &ids.h, &ho), moe_cuda_deepep_ll_dispatch(&cfg, &x.d, &ids.d, &dout));
    same("ll recv x", &o.x, 0);
    if (c->fp8) same("ll recv x_scales", &o.s, 0);
    same("ll count", &o.count, 0);
    same("ll src_info", &o.info, 0);
    same("ll layout_range", &o.range, 0);

    /* combine of random expert outputs through the reference handle */
    int E_loc = c->E / R;
    int64_t Tall = R * c->Tmax, H = c->H;
    moe_dtype yd = _i % 2 ? MOE_F32 : MOE_BF16;
    int64_t sy[4] = {R, E_loc, Tall, H}, sw[3] = {R, c->T, K}, so[3] = {R, c->T, H};
    /* only rows below each expert's count are read: the rest stay zero */
    moe_tensor hy = gpu_hnew_sh(yd, 4, sy), hw = rand_f32(3, sw, 311 + _i);
    const int32_t *rc = (const int32_t *)o.count.h.data;
    int planted = 0;
    for (int e = 0; e < c->E; e++) {
        fast_fill(yd, hy.data, e * Tall * H, rc[e] * H, SEED + 310 + _i);
        if (rc[e] > 0 && !planted++) plant_specials(yd, (char *)hy.data + e * Tall * H * moe_dtype_get(yd)->bits / 8, rc[e] * H, SEED + 310);
    }
    tp y, w, out, info, range;
    in_pair(&y, &hy);
    in_pair(&w, &hw);
    out_pair(&out, yd, 3, so);
    moe_tensor hinfo = gpu_to_host(&o.info.d), hrange = gpu_to_host(&o.range.d);
    in_pair(&info, &hinfo);
    in_pair(&range, &hrange);
    OK_BOTH(moe_ops_ref.deepep_ll_combine(&cfg, &y.h, &info.h, &range.h, &ids.h, &w.h, &out.h),
            moe_cuda_deepep_ll_combine(&cfg, &y.d, &info.d, &range.d, &ids.d, &w.d, &out.d));
    same("ll combine out", &out, 1);

    /* the atomic dispatch: a set per (expert, source rank); its own handle
     * combines to the same bits */
    OK_BOTH(moe_ops_ref.deepep_ll_dispatch(&cfg, &x.h, &ids.h, &ho),
            moe_cuda_deepep_ll_dispatch_atomic(&cfg, &x.d, &ids.d, &dout));
    ll_same_as_set(&o, c);
    tp out2;
    out_pair(&out2, yd, 3, so);
    moe_tensor_free(&out2.h);
    out2.h = out.h; /* the reference's combine above */
    out2.h.owns = 0;
    {
        /* y in the atomic layout: each expert row moved with its (rank, token) */
        moe_tensor ga = gpu_to_host(&o.info.d), gra = gpu_to_host(&o.range.d);
        moe_tensor hy2 = gpu_hnew_sh(yd, 4, sy);
        size_t yrow = moe_dtype_row_bytes(yd, H);
        const int32_t *ri = (const int32_t *)hinfo.data, *ai = (const int32_t *)ga.data;
        const int64_t *rr = (const int64_t *)hrange.data, *ar = (const int64_t *)gra.data;
        memset(hy2.data, 0, gpu_layout_bytes(&hy2));
        for (int e = 0; e < c->E; e++)
            for (int r = 0; r < R; r++) {
                int64_t n = (uint32_t)rr[e * R + r], rb = (int64_t)((uint64_t)rr[e * R + r] >> 32),
                        ab = (int64_t)((uint64_t)ar[e * R + r] >> 32);
                for (int64_t i = 0; i < n; i++)
                    for (int64_t k2 = 0; k2 < n; k2++)
                        if (ai[e * Tall + ab + k2] == ri[e * Tall + rb + i])
                            memcpy((char *)hy2.data + (e * Tall + ab + k2) * yrow,
                                   (char *)hy.data + (e * Tall + rb + i) * yrow, yrow);
            }
        tp y2;
        in_pair(&y2, &hy2);
        ck_assert_int_eq(moe_cuda_deepep_ll_combine(&cfg, &y2.d, &o.info.d, &o.range.d, &ids.d, &w.d, &out2.d), MOE_OK);
        same("ll combine of the atomic layout", &out2, 1);
        free_pair(&y2);
        moe_tensor_free(&ga), moe_tensor_free(&gra);
    }
    moe_cuda_free(&out2.d);

    /* errors */
    HOST_REFUSED(moe_cuda_deepep_ll_dispatch(&cfg, &x.d, &ids.h, &dout), "topk_ids");
    HOST_REFUSED(moe_cuda_deepep_ll_combine(&cfg, &y.d, &info.d, &range.h, &ids.d, &w.d, &out.d), "layout_range");
    moe_deepep_ll_config bad = cfg;
    bad.max_tokens_per_rank = c->T - 1;
    SAME_ERR(moe_ops_ref.deepep_ll_dispatch(&bad, &x.h, &ids.h, &ho), moe_cuda_deepep_ll_dispatch(&bad, &x.d, &ids.d, &dout));
    bad = cfg;
    bad.use_ue8m0 = 1, bad.round_scale = 0;
    SAME_ERR(moe_ops_ref.deepep_ll_dispatch(&bad, &x.h, &ids.h, &ho), moe_cuda_deepep_ll_dispatch(&bad, &x.d, &ids.d, &dout));
    if (R * c->T > 0 && K > 1) { /* a repeated expert in a row */
        int32_t *v = (int32_t *)hid.data, k0 = v[0], k1 = v[1];
        v[0] = v[1] = 0;
        ck_assert_int_eq(moe_cuda_copy(&ids.d, &ids.h), MOE_OK);
        SAME_ERR(moe_ops_ref.deepep_ll_dispatch(&cfg, &x.h, &ids.h, &ho), moe_cuda_deepep_ll_dispatch(&cfg, &x.d, &ids.d, &dout));
        v[0] = k0, v[1] = k1;
        ck_assert_int_eq(moe_cuda_copy(&ids.d, &ids.h), MOE_OK);
    }
    /* bad handles, found while computing: a duplicated token, a block
     * outside the rows, two blocks sharing a row, a pair with no row */
    int32_t *hi = (int32_t *)info.h.data;
    int64_t *hr = (int64_t *)range.h.data;
    for (int e = 0; e < c->E; e++) {
        int64_t n0 = (uint32_t)hr[e * R];
        if (n0 < 2) continue;
        int32_t keep = hi[e * Tall + 1];
        hi[e * Tall + 1] = hi[e * Tall];
        ck_assert_int_eq(moe_cuda_copy(&info.d, &info.h), MOE_OK);
        SAME_ERR(moe_ops_ref.deepep_ll_combine(&cfg, &y.h, &info.h, &range.h, &ids.h, &w.h, &out.h),
                 moe_cuda_deepep_ll_combine(&cfg, &y.d, &info.d, &range.d, &ids.d, &w.d, &out.d));
        hi[e * Tall + 1] = keep;
        ck_assert_int_eq(moe_cuda_copy(&info.d, &info.h), MOE_OK);
        int64_t keep_r = hr[e * R];
        hr[e * R] = (int64_t)((uint64_t)(Tall - 1) << 32 | (uint64_t)n0);
        ck_assert_int_eq(moe_cuda_copy(&range.d, &range.h), MOE_OK);
        SAME_ERR(moe_ops_ref.deepep_ll_combine(&cfg, &y.h, &info.h, &range.h, &ids.h, &w.h, &out.h),
                 moe_cuda_deepep_ll_combine(&cfg, &y.d, &info.d, &range.d, &ids.d, &w.d, &out.d));
        if (R > 1) {
            hr[e * R] = keep_r;
            int64_t keep_1 = hr[e * R + 1];
            hr[e * R + 1] = (int64_t)((uint64_t)0 << 32 | (uint64_t)1); /* overlaps rank 0's block */
            ck_assert_int_eq(moe_cuda_copy(&range.d, &range.h), MOE_OK);
            SAME_ERR(moe_ops_ref.deepep_ll_combine(&cfg, &y.h, &info.h, &range.h, &ids.h, &w.h, &out.h),
                     moe_cuda_deepep_ll_combine(&cfg, &y.d, &info.d, &range.d, &ids.d, &w.d, &out.d));
            hr[e * R + 1] = keep_1;
        }
        hr[e * R] = (int64_t)((uint64_t)(keep_r >> 32) << 32 | (uint64_t)(n0 - 1)); /* drops a row */
        ck_assert_int_eq(moe_cuda_copy(&range.d, &range.h), MOE_OK);
        SAME_ERR(moe_ops_ref.deepep_ll_combine(&cfg, &y.h, &info.h, &range.h, &ids.h, &w.h, &out.h),
                 moe_cuda_deepep_ll_combine(&cfg, &y.d, &info.d, &range.d, &ids.d, &w.d, &out.d));
        hr[e * R] = keep_r;
        ck_assert_int_eq(moe_cuda_copy(&range.d, &range.h), MOE_OK);
        break;
    }
    ll_free(&o, c);
    free_pair(&ids), free_pair(&x), free_pair(&y), free_pair(&w), free_pair(&out), free_pair(&info), free_pair(&range);
}
END_TEST

/* The GPU's scale rule (dispatch_core.h) is the reference's quant rule. */
START_TEST(ll_scales_core_matches_rule)
{
    size_t bad = 0;
    uint32_t first = 0;
    for (int rs = 0; rs < 2; rs++)
        for (uint64_t u = 0; u <= 0x7F800000u; u += (u < 0x00800000u ? 4099 : 997)) {
            float a = tu_float((uint32_t)u), s1, i1, s2, i2;
            moe_deepep_ll_scales(a, rs, &s1, &i1);
            moe_deepep_ll_scales_core(a, rs, &s2, &i2);
            if ((tu_bits(s1) != tu_bits(s2) || tu_bits(i1) != tu_bits(i2)) && bad++ == 0) first = (uint32_t)u;
        }
    ck_assert_msg(bad == 0, "%zu amax values differ, first 0x%08x", bad, first);
}
END_TEST

/* ================================================================== */
/* Hybrid-EP                                                           */

struct hep_case {
    int R, E, rpn, pad, non_blocking;
    int64_t T;
    int K;
    int64_t H;
    moe_dtype xd;
    int64_t S;
    int extra;      /* blocking: N = capacity + extra; non-blocking: N = capacity * 3/5 rounded to pad */
    int probs, ndisp, hot;
};

static const hep_case hep_cases[] = {
    {1, 2, 1, 1, 0, 1, 1, 64, MOE_BF16, 0, 0, 1, 1, 0},
    {2, 8, 1, 16, 0, 64, 2, 130, MOE_F32, 3, 4, 1, 0, 0},
    {4, 32, 2, 8, 1, 128, 4, 7, MOE_E4M3, 2, 0, 1, 1, 0},
    {8, 128, 8, 128, 0, 512, 8, 2048, MOE_BF16, 16, 0, 1, 1, 0}, /* 4096 tokens, Qwen3-30B-A3B */
    {8, 256, 2, 16, 1, 64, 8, 7168, MOE_BF16, 56, 0, 1, 1, 0},  /* drops, four nodes, DeepSeek hidden */
    {8, 64, 1, 4, 0, 100, 4, 256, MOE_F32, 0, 1, 0, 0, 1},       /* one hot expert, eight nodes */
    {2, 4, 1, 4, 0, 0, 2, 16, MOE_BF16, 0, 2, 1, 1, 0},          /* no tokens */
};
#define N_HEP ((int)(sizeof hep_cases / sizeof hep_cases[0]))

START_TEST(hep_dispatch_combine_matches)
{
    hep_case cs = hep_cases[_i];
    cs.T = gpu_small_cap(cs.T, 64); /* small mode: 64 tokens a rank, H kept */
    const hep_case *c = &cs;
    int R = c->R, E = c->E, E_loc = E / R, K = c->K;
    int64_t T = c->T, H = c->H;
    moe_tensor hid = rand_ids(R, T, K, E, 0, 1, 400 + _i);
    if (c->hot) /* every token to experts 0..K-1 (distinct), the rest empty */
        for (int64_t i = 0; i < moe_tensor_numel(&hid); i++) ((int32_t *)hid.data)[i] = (int32_t)(i % K);
    moe_hep_config cfg = {R, E, c->rpn, c->pad, 0, 0};
    int64_t cap = 0;
    ck_assert_int_eq(moe_hep_permute_capacity(&cfg, &hid, &cap), MOE_OK);
    int64_t N = cap + c->extra;
    if (c->non_blocking) {
        N = cap * 3 / 5 / c->pad * c->pad;
        cfg.non_blocking = 1, cfg.num_permuted_tokens = N;
    }
    int64_t shx[3] = {R, T, H}, shs[3] = {R, T, c->S}, shk[3] = {R, T, K};
    tp ids, x, xs, w;
    in_pair(&ids, &hid);
    moe_tensor hx = rand_act(c->xd, 3, shx, 401 + _i, 1), hw = rand_f32(3, shk, 402 + _i);
    in_pair(&x, &hx);
    in_pair(&w, &hw);
    if (c->S) {
        moe_tensor hs = rand_f32(3, shs, 403 + _i);
        in_pair(&xs, &hs);
    }
    tp ox, op, os, tpe, ppe, map, ovf, nd;
    int64_t sox[3] = {R, N, H}, sop[2] = {R, N}, sos[3] = {R, N, c->S}, se[2] = {R, E_loc}, sm[3] = {R, R * T, E_loc},
            s1[1] = {R};
    out_pair(&ox, c->xd, 3, sox);
    out_pair(&op, MOE_F32, 2, sop);
    if (c->S) out_pair(&os, MOE_F32, 3, sos);
    out_pair(&tpe, MOE_I32, 2, se);
    out_pair(&ppe, MOE_I64, 2, se);
    out_pair(&map, MOE_I32, 3, sm);
    out_pair(&ovf, MOE_I32, 1, s1);
    out_pair(&nd, MOE_I32, 1, s1);
    moe_hep_permuted ho = {&ox.h, c->probs ? &op.h : NULL, c->S ? &os.h : NULL, &tpe.h, &ppe.h, &map.h, &ovf.h,
                           c->ndisp ? &nd.h : NULL};
    moe_hep_permuted dout = {&ox.d, c->probs ? &op.d : NULL, c->S ? &os.d : NULL, &tpe.d, &ppe.d, &map.d, &ovf.d,
                             c->ndisp ? &nd.d : NULL};
    OK_BOTH(moe_ops_ref.hep_dispatch_with_permute(&cfg, &x.h, c->S ? &xs.h : NULL, &ids.h, &w.h, &ho),
            moe_cuda_hep_dispatch_with_permute(&cfg, &x.d, c->S ? &xs.d : NULL, &ids.d, &w.d, &dout));
    same("hep x", &ox, 0);
    if (c->probs) same("hep probs", &op, 0);
    if (c->S) same("hep x_scales", &os, 0);
    same("tokens_per_expert", &tpe, 0);
    same("padded_tokens_per_expert", &ppe, 0);
    same("row_id_map", &map, 0);
    same("overflow_flag", &ovf, 0);
    if (c->ndisp) same("num_dispatched", &nd, 0);
    HOST_REFUSED(moe_cuda_hep_dispatch_with_permute(&cfg, &x.d, c->S ? &xs.d : NULL, &ids.d, &w.h, &dout),
                 "topk_weights");
    if (!c->non_blocking && cap > 0) { /* one row short in blocking mode: found while computing */
        int64_t sx2[3] = {R, cap - 1, H}, sp2[2] = {R, cap - 1}, ss2[3] = {R, cap - 1, c->S};
        tp x2, p2, s2;
        out_pair(&x2, c->xd, 3, sx2);
        out_pair(&p2, MOE_F32, 2, sp2);
        if (c->S) out_pair(&s2, MOE_F32, 3, ss2);
        moe_hep_permuted h2 = {&x2.h, &p2.h, c->S ? &s2.h : NULL, &tpe.h, &ppe.h, &map.h, &ovf.h, NULL};
        moe_hep_permuted d2 = {&x2.d, &p2.d, c->S ? &s2.d : NULL, &tpe.d, &ppe.d, &map.d, &ovf.d, NULL};
        SAME_ERR(moe_ops_ref.hep_dispatch_with_permute(&cfg, &x.h, c->S ? &xs.h : NULL, &ids.h, &w.h, &h2),
                 moe_cuda_hep_dispatch_with_permute(&cfg, &x.d, c->S ? &xs.d : NULL, &ids.d, &w.d, &d2));
        free_pair(&x2), free_pair(&p2);
        if (c->S) free_pair(&s2);
    }
    if (R * T > 0) { /* -1 is refused by the check, which scans the ids */
        int32_t keep = ((int32_t *)hid.data)[0];
        ((int32_t *)hid.data)[0] = -1;
        ck_assert_int_eq(moe_cuda_copy(&ids.d, &ids.h), MOE_OK);
        SAME_ERR(moe_ops_ref.hep_dispatch_with_permute(&cfg, &x.h, c->S ? &xs.h : NULL, &ids.h, &w.h, &ho),
                 moe_cuda_hep_dispatch_with_permute(&cfg, &x.d, c->S ? &xs.d : NULL, &ids.d, &w.d, &dout));
        ((int32_t *)hid.data)[0] = keep;
        ck_assert_int_eq(moe_cuda_copy(&ids.d, &ids.h), MOE_OK);
    }

    /* the error cases above may leave the shared outputs (the map) partly
     * written, differently on the two sides: dispatch again */
    OK_BOTH(moe_ops_ref.hep_dispatch_with_permute(&cfg, &x.h, c->S ? &xs.h : NULL, &ids.h, &w.h, &ho),
            moe_cuda_hep_dispatch_with_permute(&cfg, &x.d, c->S ? &xs.d : NULL, &ids.d, &w.d, &dout));
    same("row_id_map again", &map, 0);

    /* combine: expert outputs in the permuted layout, the dispatch's map */
    moe_dtype yd = c->xd == MOE_F32 ? MOE_F32 : MOE_BF16;
    int64_t sy[3] = {R, N, H}, so[3] = {R, T, H}, sq[3] = {R, T, E};
    moe_tensor hy = rand_act(yd, 3, sy, 410 + _i, 1), hp = rand_f32(2, sop, 411 + _i);
    tp y, pr, out, oq;
    in_pair(&y, &hy);
    in_pair(&pr, &hp);
    out_pair(&out, yd, 3, so);
    out_pair(&oq, MOE_F32, 3, sq);
    for (int v = 0; v < 2; v++) {
        OK_BOTH(moe_ops_ref.hep_combine_with_unpermute(&cfg, &y.h, &map.h, v ? NULL : &pr.h, &out.h, v ? NULL : &oq.h),
                moe_cuda_hep_combine_with_unpermute(&cfg, &y.d, &map.d, v ? NULL : &pr.d, &out.d, v ? NULL : &oq.d));
        same("hep combine out", &out, 1);
        if (!v) same("hep out_probs", &oq, 0);
    }
    HOST_REFUSED(moe_cuda_hep_combine_with_unpermute(&cfg, &y.d, &map.h, &pr.d, &out.d, &oq.d), "row_id_map");
    if (N > 1 && R * T > 0) { /* a row named twice: the check scans the map */
        int32_t *m = (int32_t *)map.h.data;
        int64_t a = -1, b = -1;
        for (int64_t i = 0; i < R * T * E_loc && b < 0; i++)
            if (m[i] >= 0) {
                if (a < 0) a = i;
                else b = i;
            }
        if (b >= 0) {
            int32_t keep = m[b];
            m[b] = m[a];
            ck_assert_int_eq(moe_cuda_copy(&map.d, &map.h), MOE_OK);
            SAME_ERR(moe_ops_ref.hep_combine_with_unpermute(&cfg, &y.h, &map.h, &pr.h, &out.h, &oq.h),
                     moe_cuda_hep_combine_with_unpermute(&cfg, &y.d, &map.d, &pr.d, &out.d, &oq.d));
            m[b] = keep;
        }
    }
    free_pair(&ids), free_pair(&x), free_pair(&w), free_pair(&ox), free_pair(&op), free_pair(&tpe), free_pair(&ppe);
    free_pair(&map), free_pair(&ovf), free_pair(&nd), free_pair(&y), free_pair(&pr), free_pair(&out), free_pair(&oq);
    if (c->S) free_pair(&xs), free_pair(&os);
}
END_TEST

static void add_tests(Suite *s)
{
    TCase *tc = gpu_tcase(s, "dispatch", 300);
    tcase_add_loop_test(tc, deepep_layout_matches, 0, N_HT);
    tcase_add_loop_test(tc, deepep_dispatch_combine_matches, 0, N_HT);
    tcase_add_loop_test(tc, ll_dispatch_combine_matches, 0, N_LL);
    tcase_add_test(tc, ll_scales_core_matches_rule);
    tcase_add_loop_test(tc, hep_dispatch_combine_matches, 0, N_HEP);
}

int main(void)
{
    return gpu_test_main("check_gpu_dispatch", "gpu_dispatch", add_tests);
}
