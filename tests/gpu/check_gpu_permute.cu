/* The CUDA conformance backend's row movement and the dispatch/combine
 * stages of optimized/cuda/permute.cu, dispatch_allgather.cu and
 * dispatch_pplx.cu are the reference's, bit for bit: seeded inputs at small
 * and large shapes (M = 4096 tokens, topk 8, E up to 256, rows up to
 * 7168 bytes... multi-block paths), edge cases (empty experts, one token,
 * all tokens on one expert, -1 and out-of-range ids, odd and packed row
 * lengths, NaN/Inf in the combines), bad arguments (same status and
 * message as the reference, host tensors refused) and the atomic pplx
 * dispatch (equal after putting each expert's rows in token order).
 * Exits 77 (skip) without a CUDA device. */
#include <check.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/dispatch.h"
#include "moe/permute.h"
#include "moe/rng.h"
#include "optimized/cuda/cuda.h"
#include "reference/elem.h"
#include "gpu_test_util.h"

/* ---- helpers -------------------------------------------------------------------- */

#define OK(call)                                                                                                \
    do {                                                                                                        \
        moe_status s_ = (call);                                                                                 \
        ck_assert_msg(s_ == MOE_OK, "%s: %d %s", #call, (int)s_, moe_last_error());                            \
    } while (0)

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* random bytes: rows move as bytes, so any pattern (NaN codes included) */
static void fill_bytes(moe_tensor *t, uint64_t seed)
{
    uint64_t s = seed * 0x100000001B3ull + 1;
    size_t nb = gpu_layout_bytes(t), i = 0;
    uint8_t *p = (uint8_t *)t->data;
    for (; i + 8 <= nb; i += 8) {
        uint64_t v = mix(&s);
        memcpy(p + i, &v, 8);
    }
    for (; i < nb; i++) p[i] = (uint8_t)mix(&s);
}

/* values of a storage dtype, roughly in [-8, 8) with many magnitudes */
static void fill_vals(moe_tensor *t, uint64_t seed)
{
    uint64_t s = seed * 0x100000001B3ull + 7;
    int64_t n = moe_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = mix(&s);
        float v = (float)((int32_t)(r >> 40) - (1 << 23)) * 0x1p-20f;
        if ((r & 7) == 0) v *= 0x1p-12f;
        moe_s_store(t->dtype, t->data, i, v);
    }
}

static void fill_weights(float *w, int64_t n, uint64_t seed)
{
    uint64_t s = seed * 0x100000001B3ull + 3;
    for (int64_t i = 0; i < n; i++) w[i] = (float)(mix(&s) >> 40) * 0x1p-24f;
}

static char ref_msg[1024];
static void save_msg(void) { snprintf(ref_msg, sizeof ref_msg, "%s", moe_last_error()); }

/* the reference call first, its message saved, then the GPU call */
#define SAME_ERR(refcall, gpucall, what) GPU_SAME_ERROR(what, refcall, gpucall)

/* Fisher-Yates permutation of [0, n) */
static void perm(int32_t *p, int64_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (int64_t i = 0; i < n; i++) p[i] = (int32_t)i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(mix(&s) % (uint64_t)(i + 1));
        int32_t t = p[i];
        p[i] = p[j], p[j] = t;
    }
}

/* ---- permute_rows / unpermute_rows / expand_trtllm -------------------------------- */

typedef struct {
    int64_t T, P, H;
    moe_dtype d;
} rows_case;

static const rows_case rows_cases[] = {
    {1, 1, 1, MOE_F32},        {37, 50, 5, MOE_BF16},     {33, 64, 7, MOE_E2M1},    {17, 9, 3, MOE_U8},
    {64, 200, 24, MOE_E4M3},   {300, 1000, 6, MOE_F16},   {1000, 3000, 130, MOE_I8}, {4096, 32768, 2048, MOE_BF16},
    {2048, 16384, 7168, MOE_E4M3},
};
#define N_ROWS_CASES ((int)(sizeof rows_cases / sizeof rows_cases[0]))

/* small mode: T <= 512, P <= 2048, H <= 512 (still many blocks) */
static rows_case rows_case_of(int i)
{
    rows_case c = rows_cases[i];
    c.T = gpu_small_cap(c.T, 512), c.P = gpu_small_cap(c.P, 2048), c.H = gpu_small_cap(c.H, 512);
    return c;
}

START_TEST(permute_rows_matches)
{
    const rows_case cs = rows_case_of(_i), *c = &cs;
    moe_tensor x = gpu_hnew(c->d, 2, c->T, c->H), src = gpu_hnew(MOE_I32, 1, c->P), out = gpu_hnew(c->d, 2, c->P, c->H);
    fill_bytes(&x, 100 + _i);
    uint64_t s = 200 + _i;
    for (int64_t p = 0; p < c->P; p++) {
        uint64_t r = mix(&s);
        ((int32_t *)src.data)[p] = r % 10 == 0 ? -1 : (int32_t)((r >> 8) % (uint64_t)c->T);
    }
    OK(moe_ref_permute_rows(&x, &src, &out));
    moe_tensor dx = gpu_to_dev(&x), ds = gpu_to_dev(&src), junk = gpu_hnew(c->d, 2, c->P, c->H);
    fill_bytes(&junk, 2);
    moe_tensor dout = gpu_to_dev(&junk); /* zero rows must be written, not left */
    moe_tensor_free(&junk);
    OK(moe_cuda_permute_rows(&dx, &ds, &dout));
    gpu_expect_same("permute_rows out", &out, &dout, 0);
    moe_tensor d[3] = {dx, ds, dout}, h[3] = {x, src, out};
    gpu_dfree(3, d), gpu_hfree(3, h);
}
END_TEST

START_TEST(unpermute_rows_matches)
{
    const rows_case cs = rows_case_of(_i), *c = &cs;
    /* P rows scattered into T >= P rows, a tenth dropped (-1) */
    int64_t P = c->T < c->P ? c->T : c->P, T = c->P > c->T ? c->P : c->T;
    moe_tensor y = gpu_hnew(c->d, 2, P, c->H), dst = gpu_hnew(MOE_I32, 1, P), out = gpu_hnew(c->d, 2, T, c->H);
    fill_bytes(&y, 300 + _i);
    int32_t *pm = (int32_t *)malloc((size_t)T * 4);
    perm(pm, T, 400 + _i);
    uint64_t s = 500 + _i;
    for (int64_t p = 0; p < P; p++) ((int32_t *)dst.data)[p] = mix(&s) % 10 == 0 ? -1 : pm[p];
    free(pm);
    moe_tensor dy = gpu_to_dev(&y), dd = gpu_to_dev(&dst), dout = gpu_dnew(c->d, 2, T, c->H);
    fill_bytes(&out, 1); /* the GPU must zero the unnamed rows itself */
    OK(moe_cuda_copy(&dout, &out));
    OK(moe_ref_unpermute_rows(&y, &dst, &out));
    OK(moe_cuda_unpermute_rows(&dy, &dd, &dout));
    gpu_expect_same("unpermute_rows out", &out, &dout, 0);
    moe_tensor d[3] = {dy, dd, dout}, h[3] = {y, dst, out};
    gpu_dfree(3, d), gpu_hfree(3, h);
}
END_TEST

START_TEST(expand_trtllm_matches)
{
    const rows_case cs = rows_case_of(_i), *c = &cs;
    int topk = (int)((c->P + c->T - 1) / c->T);
    int64_t TK = c->T * topk, P = c->P < TK ? c->P : TK;
    moe_tensor x = gpu_hnew(c->d, 2, c->T, c->H), map = gpu_hnew(MOE_I32, 1, P), w = gpu_hnew(MOE_F32, 2, c->T, topk);
    moe_tensor out = gpu_hnew(c->d, 2, P, c->H), ps = gpu_hnew(MOE_F32, 1, P);
    fill_bytes(&x, 600 + _i);
    fill_bytes(&w, 601 + _i); /* any f32 bits: scales are moved, not computed */
    int32_t *pm = (int32_t *)malloc((size_t)TK * 4);
    perm(pm, TK, 700 + _i);
    memcpy(map.data, pm, (size_t)P * 4);
    free(pm);
    moe_tensor dx = gpu_to_dev(&x), dm = gpu_to_dev(&map), dw = gpu_to_dev(&w);
    for (int mode = 0; mode < 3; mode++) { /* weights, no weights (1.0), no scales */
        moe_tensor *pw = mode == 0 ? &w : NULL, *pps = mode == 2 ? NULL : &ps;
        OK(moe_ref_expand_trtllm(&x, &map, topk, pw, &out, pps));
        moe_tensor dout = gpu_dnew(c->d, 2, P, c->H), dps = gpu_dnew(MOE_F32, 1, P);
        OK(moe_cuda_expand_trtllm(&dx, &dm, topk, mode == 0 ? &dw : NULL, &dout, mode == 2 ? NULL : &dps));
        gpu_expect_same("expand_trtllm out", &out, &dout, 0);
        if (pps) gpu_expect_same("expand_trtllm permuted_scales", &ps, &dps, 0);
        moe_cuda_free(&dout), moe_cuda_free(&dps);
    }
    moe_tensor d[3] = {dx, dm, dw}, h[5] = {x, map, w, out, ps};
    gpu_dfree(3, d), gpu_hfree(5, h);
}
END_TEST

/* an output overlapping its input: the reference's serial order decides */
START_TEST(in_place_rows)
{
    enum { T = 40, H = 6 };
    moe_tensor buf = gpu_hnew(MOE_F32, 2, T, H);
    fill_bytes(&buf, 900);
    const int32_t sv[T / 2] = {5, 0, 19, 3, 3, -1, 7, 8, 2, 1, 0, 11, 12, 13, 30, 39, 38, 1, 2, 4};
    moe_tensor src = gpu_hnew(MOE_I32, 1, T / 2);
    memcpy(src.data, sv, sizeof sv);
    moe_tensor dbuf = gpu_to_dev(&buf), ds = gpu_to_dev(&src);
    /* out = rows 10..29 of the same buffer, x = the whole buffer */
    moe_tensor hx = buf, ho = buf, dx = dbuf, dout = dbuf;
    ho.shape[0] = dout.shape[0] = T / 2;
    ho.data = (float *)buf.data + 10 * H, dout.data = (float *)dbuf.data + 10 * H;
    ho.nbytes = dout.nbytes = (size_t)(T / 2) * H * 4;
    hx.owns = ho.owns = dx.owns = dout.owns = 0;
    OK(moe_ref_permute_rows(&hx, &src, &ho));
    OK(moe_cuda_permute_rows(&dx, &ds, &dout));
    gpu_expect_same("in-place permute_rows", &buf, &dbuf, 0);
    /* unpermute with a permutation of rows 0..19 into the same buffer */
    int32_t dv[T / 2];
    perm(dv, T / 2, 901);
    memcpy(src.data, dv, sizeof dv);
    OK(moe_cuda_copy(&ds, &src));
    moe_tensor hy = ho, dy = dout;
    moe_tensor hu = buf, du = dbuf;
    hu.shape[0] = du.shape[0] = T / 2, hu.nbytes = du.nbytes = (size_t)(T / 2) * H * 4;
    hu.owns = du.owns = 0;
    OK(moe_ref_unpermute_rows(&hy, &src, &hu));
    OK(moe_cuda_unpermute_rows(&dy, &ds, &du));
    gpu_expect_same("in-place unpermute_rows", &buf, &dbuf, 0);
    moe_cuda_free(&dbuf), moe_cuda_free(&ds), moe_tensor_free(&buf), moe_tensor_free(&src);
}
END_TEST

/* ---- batched_scatter / permute_grouped ------------------------------------------ */

typedef struct {
    int64_t T;
    int k, E, first, L, H, neg1, distinct, hot; /* hot: every token's slot 0 on expert first */
    moe_dtype d;
} place_case;

static const place_case place_cases[] = {
    {1, 1, 4, 0, 4, 8, 0, 1, 0, MOE_BF16},       {1, 4, 8, 2, 3, 5, 0, 0, 0, MOE_F32},
    {37, 3, 16, 4, 8, 7, 10, 0, 0, MOE_E2M1},    {200, 8, 64, 0, 64, 64, 5, 1, 0, MOE_BF16},
    {300, 4, 32, 8, 8, 33, 0, 0, 1, MOE_U8},     {500, 2, 512, 100, 300, 16, 3, 1, 0, MOE_F16},
    {4096, 8, 256, 64, 64, 2048, 2, 1, 0, MOE_BF16}, {4096, 8, 128, 0, 128, 1024, 0, 1, 0, MOE_BF16},
    {4096, 8, 64, 0, 64, 256, 0, 1, 1, MOE_E4M3}, {2000, 6, 8, 0, 8, 48, 20, 0, 0, MOE_F32},
};
#define N_PLACE_CASES ((int)(sizeof place_cases / sizeof place_cases[0]))

/* small mode: T <= 512 (4096 pairs at topk 8), H <= 256 */
static place_case place_case_of(int i)
{
    place_case c = place_cases[i];
    c.T = gpu_small_cap(c.T, 512), c.H = (int)gpu_small_cap(c.H, 256);
    return c;
}

static moe_tensor place_ids(const place_case *c, uint64_t seed)
{
    moe_tensor ids = gpu_hnew(MOE_I32, 2, c->T, c->k);
    int32_t *v = (int32_t *)ids.data;
    OK(moe_rng_topk_ids(v, c->T, c->k, c->E, seed, moe_rng_stream_id("check_gpu_permute"), (unsigned)c->neg1,
                        c->distinct));
    if (c->hot)
        for (int64_t t = 0; t < c->T; t++) v[t * c->k] = c->first;
    return ids;
}

START_TEST(batched_scatter_matches)
{
    const place_case cs = place_case_of(_i), *c = &cs;
    moe_tensor x = gpu_hnew(c->d, 2, c->T, c->H), ids = place_ids(c, 1000 + _i);
    fill_bytes(&x, 1100 + _i);
    /* max_tokens = the largest count: tight, and one less is an error */
    int64_t *cnt = (int64_t *)calloc((size_t)c->L, 8), maxt = 0;
    const int32_t *v = (const int32_t *)ids.data;
    for (int64_t t = 0; t < c->T; t++)
        for (int l = 0; l < c->L; l++) {
            int hit = 0;
            for (int j = 0; j < c->k; j++) hit |= v[t * c->k + j] == c->first + l;
            if (hit && ++cnt[l] > maxt) maxt = cnt[l];
        }
    free(cnt);
    moe_tensor dx = gpu_to_dev(&x), di = gpu_to_dev(&ids);
    const int64_t extras[3] = {3, 0, -1};
    for (int xi = 0; xi < 3; xi++) {
        int64_t extra = extras[xi], mt = maxt + extra;
        if (mt < 0) continue;
        moe_tensor out = gpu_hnew(c->d, 3, c->L, mt, c->H), counts = gpu_hnew(MOE_I32, 1, c->L);
        moe_tensor dout = gpu_dnew(c->d, 3, c->L, mt, c->H), dc = gpu_dnew(MOE_I32, 1, c->L);
        fill_bytes(&out, 5);
        OK(moe_cuda_copy(&dout, &out)); /* stale rows must be overwritten */
        moe_status rs = moe_ref_batched_scatter(&x, &ids, c->first, &out, &counts);
        save_msg();
        moe_status gs = moe_cuda_batched_scatter(&dx, &di, c->first, &dout, &dc);
        if (rs == MOE_OK) {
            ck_assert_msg(gs == MOE_OK, "batched_scatter: %s", moe_last_error());
            gpu_expect_same("batched_scatter out", &out, &dout, 0);
            gpu_expect_same("batched_scatter counts", &counts, &dc, 0);
        } else {
            ck_assert_int_eq(extra, -1);
            gpu_expect_same_error("batched_scatter past max_tokens", rs, ref_msg, gs);
        }
        moe_tensor d[2] = {dout, dc}, h[2] = {out, counts};
        gpu_dfree(2, d), gpu_hfree(2, h);
    }
    moe_tensor d[2] = {dx, di}, h[2] = {x, ids};
    gpu_dfree(2, d), gpu_hfree(2, h);
}
END_TEST

START_TEST(permute_grouped_matches)
{
    const place_case cs = place_case_of(_i), *c = &cs;
    moe_tensor x = gpu_hnew(c->d, 2, c->T, c->H), ids = place_ids(c, 1200 + _i);
    fill_bytes(&x, 1300 + _i);
    moe_tensor dx = gpu_to_dev(&x), di = gpu_to_dev(&ids);
    const int pads[3] = {1, 8, 128};
    for (int pi = 0; pi < 3; pi++) {
        int pad = pads[pi];
        int64_t cap;
        OK(moe_grouped_capacity(c->T * c->k, c->L, pad, &cap));
        int64_t R = cap + (pi == 1 ? 5 : 0); /* rows past the layout */
        moe_tensor out = gpu_hnew(c->d, 2, R, c->H), rs = gpu_hnew(MOE_I32, 1, R), cn = gpu_hnew(MOE_I32, 1, c->L),
                   of = gpu_hnew(MOE_I32, 1, c->L + 1);
        moe_tensor dout = gpu_dnew(c->d, 2, R, c->H), drs = gpu_dnew(MOE_I32, 1, R), dcn = gpu_dnew(MOE_I32, 1, c->L),
                   dof = gpu_dnew(MOE_I32, 1, c->L + 1);
        fill_bytes(&out, 6);
        fill_bytes(&rs, 7);
        OK(moe_cuda_copy(&dout, &out));
        OK(moe_cuda_copy(&drs, &rs));
        OK(moe_ref_permute_grouped(&x, &ids, c->first, pad, &out, &rs, &cn, &of));
        OK(moe_cuda_permute_grouped(&dx, &di, c->first, pad, &dout, &drs, &dcn, &dof));
        gpu_expect_same("permute_grouped out", &out, &dout, 0);
        gpu_expect_same("permute_grouped row_src", &rs, &drs, 0);
        gpu_expect_same("permute_grouped counts", &cn, &dcn, 0);
        gpu_expect_same("permute_grouped offsets", &of, &dof, 0);
        moe_tensor d[4] = {dout, drs, dcn, dof}, h[4] = {out, rs, cn, of};
        gpu_dfree(4, d), gpu_hfree(4, h);
    }
    moe_tensor d[2] = {dx, di}, h[2] = {x, ids};
    gpu_dfree(2, d), gpu_hfree(2, h);
}
END_TEST

/* ---- all-gather / reduce-scatter ------------------------------------------------ */

START_TEST(allgather_matches)
{
    const struct {
        int64_t G, H, S;
        int K, E;
        moe_dtype d;
    } cs[] = {{8, 3, 2, 2, 8, MOE_BF16}, {64, 130, 0, 4, 16, MOE_E4M3}, {4096, 7168, 56, 8, 256, MOE_BF16}};
    for (int ci = 0; ci < 3; ci++)
        for (int R = 1; R <= 8; R *= 2) {
            int64_t G = gpu_small_cap(cs[ci].G, 256), T = G / R, H = cs[ci].H, S = cs[ci].S; /* small: 256 tokens */
            int K = cs[ci].K, E = cs[ci].E;
            moe_tensor x = gpu_hnew(cs[ci].d, 3, R, T, H), ids = gpu_hnew(MOE_I32, 3, R, T, K), w = gpu_hnew(MOE_F32, 3, R, T, K);
            moe_tensor sc = gpu_hnew(MOE_F32, 3, R, T, S ? S : 1);
            fill_bytes(&x, 1400 + ci), fill_bytes(&w, 1401 + ci), fill_bytes(&sc, 1402 + ci);
            OK(moe_rng_topk_ids((int32_t *)ids.data, G, K, E, 1403 + ci, 1, 0, 1));
            moe_tensor o[4] = {gpu_hnew(cs[ci].d, 2, G, H), gpu_hnew(MOE_F32, 2, G, S ? S : 1), gpu_hnew(MOE_I32, 2, G, K),
                               gpu_hnew(MOE_F32, 2, G, K)};
            OK(moe_ref_ep_allgather_dispatch(R, E, &x, S ? &sc : NULL, &ids, &w, &o[0], S ? &o[1] : NULL, &o[2],
                                             &o[3]));
            moe_tensor dx = gpu_to_dev(&x), di = gpu_to_dev(&ids), dw = gpu_to_dev(&w), ds = gpu_to_dev(&sc);
            moe_tensor g[4] = {gpu_dnew(cs[ci].d, 2, G, H), gpu_dnew(MOE_F32, 2, G, S ? S : 1), gpu_dnew(MOE_I32, 2, G, K),
                               gpu_dnew(MOE_F32, 2, G, K)};
            OK(moe_cuda_ep_allgather_dispatch(R, E, &dx, S ? &ds : NULL, &di, &dw, &g[0], S ? &g[1] : NULL, &g[2],
                                              &g[3]));
            gpu_expect_same("allgather x", &o[0], &g[0], 0);
            if (S) gpu_expect_same("allgather scales", &o[1], &g[1], 0);
            gpu_expect_same("allgather ids", &o[2], &g[2], 0);
            gpu_expect_same("allgather weights", &o[3], &g[3], 0);
            moe_tensor d[4] = {dx, di, dw, ds}, h[4] = {x, ids, w, sc};
            gpu_dfree(4, d), gpu_hfree(4, h), gpu_dfree(4, g), gpu_hfree(4, o);
        }
}
END_TEST

START_TEST(reduce_scatter_matches)
{
    const struct {
        int64_t G, H;
        moe_dtype d;
    } cs[] = {{8, 3, MOE_F32}, {64, 100, MOE_BF16}, {256, 33, MOE_F16}, {4096, 1024, MOE_BF16}, {1024, 512, MOE_F32}};
    for (int ci = 0; ci < 5; ci++)
        for (int R = 1; R <= 8; R *= 2) {
            int64_t G = gpu_small_cap(cs[ci].G, 256), T = G / R, H = cs[ci].H; /* small: 256 tokens */
            moe_tensor p = gpu_hnew(cs[ci].d, 3, R, G, H), out = gpu_hnew(cs[ci].d, 3, R, T, H);
            fill_vals(&p, 1500 + ci * 8 + R);
            /* non-finite partials: compared by class */
            int64_t n = moe_tensor_numel(&p);
            moe_s_store(cs[ci].d, p.data, 0, INFINITY);
            moe_s_store(cs[ci].d, p.data, n / 3, -INFINITY);
            moe_s_store(cs[ci].d, p.data, n / 2, NAN);
            moe_s_store(cs[ci].d, p.data, n - 1, -0.0f);
            OK(moe_ref_ep_reduce_scatter_combine(R, &p, &out));
            moe_tensor dp = gpu_to_dev(&p), dout = gpu_dnew(cs[ci].d, 3, R, T, H);
            OK(moe_cuda_ep_reduce_scatter_combine(R, &dp, &dout));
            gpu_expect_same("reduce_scatter out", &out, &dout, 1);
            moe_tensor d[2] = {dp, dout}, h[2] = {p, out};
            gpu_dfree(2, d), gpu_hfree(2, h);
        }
}
END_TEST

/* ---- pplx --------------------------------------------------------------------------- */

typedef struct {
    int R, dp, E, K;
    int64_t T, maxn, H, S;
    moe_dtype d, yd, od;
} pplx_case;

static const pplx_case pplx_cases[] = {
    {1, 1, 4, 1, 1, 1, 8, 0, MOE_BF16, MOE_F32, MOE_F32},
    {2, 1, 4, 2, 5, 7, 3, 2, MOE_F32, MOE_BF16, MOE_BF16},
    {4, 2, 16, 4, 37, 40, 24, 3, MOE_BF16, MOE_BF16, MOE_F16},
    {8, 4, 64, 6, 100, 100, 130, 0, MOE_E4M3, MOE_F32, MOE_BF16},
    {8, 8, 32, 8, 257, 300, 64, 4, MOE_BF16, MOE_F16, MOE_F32},
    {8, 2, 64, 8, 1024, 1024, 128, 2, MOE_BF16, MOE_BF16, MOE_BF16},
    {4, 4, 256, 8, 4096, 4096, 32, 0, MOE_BF16, MOE_BF16, MOE_BF16},
};
#define N_PPLX_CASES ((int)(sizeof pplx_cases / sizeof pplx_cases[0]))

/* Each expert's first num_tokens rows sorted by src (a token holds one row
 * per expert, so src is a key): the atomic order made canonical. */
static void canonical_rows(moe_tensor *x, moe_tensor *sc, moe_tensor *src, const moe_tensor *cnt, int64_t rows)
{
    int64_t E = cnt->shape[0] * cnt->shape[1];
    if (E * rows == 0) return;
    size_t xr = gpu_layout_bytes(x) / (size_t)(E * rows), sr = sc ? gpu_layout_bytes(sc) / (size_t)(E * rows) : 0;
    int32_t *sv = (int32_t *)src->data;
    for (int64_t e = 0; e < E; e++) {
        int64_t n = ((int32_t *)cnt->data)[e];
        int32_t *order = (int32_t *)malloc((size_t)(n ? n : 1) * 4);
        for (int64_t i = 0; i < n; i++) order[i] = (int32_t)i;
        qsort_r(order, (size_t)n, 4,
                [](const void *a, const void *b, void *ctx) {
                    const int32_t *s = (const int32_t *)ctx;
                    int32_t x1 = s[*(const int32_t *)a], x2 = s[*(const int32_t *)b];
                    return (x1 > x2) - (x1 < x2);
                },
                sv + e * rows);
        uint8_t *nx = (uint8_t *)malloc(xr * (size_t)(n ? n : 1)), *ns = (uint8_t *)malloc(sr * (size_t)(n ? n : 1) + 1);
        int32_t *nsrc = (int32_t *)malloc((size_t)(n ? n : 1) * 4);
        for (int64_t i = 0; i < n; i++) {
            int64_t o = e * rows + order[i];
            memcpy(nx + i * xr, (uint8_t *)x->data + o * xr, xr);
            if (sc) memcpy(ns + i * sr, (uint8_t *)sc->data + o * sr, sr);
            nsrc[i] = sv[o];
        }
        memcpy((uint8_t *)x->data + e * rows * xr, nx, xr * n);
        if (sc) memcpy((uint8_t *)sc->data + e * rows * sr, ns, sr * n);
        memcpy(sv + e * rows, nsrc, (size_t)n * 4);
        free(order), free(nx), free(ns), free(nsrc);
    }
}

START_TEST(pplx_matches)
{
    pplx_case cs = pplx_cases[_i];
    cs.T = gpu_small_cap(cs.T, 256), cs.maxn = gpu_small_cap(cs.maxn, 256); /* small mode */
    const pplx_case *c = &cs;
    moe_pplx_config cfg = {c->R, c->dp, c->E, c->maxn};
    int num_dp = c->R / c->dp, El = c->E / c->R;
    int64_t rows = moe_pplx_rows(&cfg), T = c->T, H = c->H, S = c->S;
    moe_tensor x = gpu_hnew(c->d, 3, num_dp, T, H), sc = gpu_hnew(MOE_F32, 3, num_dp, T, S ? S : 1);
    moe_tensor ids = gpu_hnew(MOE_I32, 3, num_dp, T, c->K), w = gpu_hnew(MOE_F32, 3, num_dp, T, c->K);
    fill_bytes(&x, 1600 + _i), fill_bytes(&sc, 1601 + _i);
    fill_weights((float *)w.data, num_dp * T * c->K, 1602 + _i);
    OK(moe_rng_topk_ids((int32_t *)ids.data, num_dp * T, c->K, c->E, 1603 + _i, 2, 0, 1));
    moe_tensor o[4] = {gpu_hnew(c->d, 4, c->R, El, rows, H), gpu_hnew(MOE_F32, 4, c->R, El, rows, S ? S : 1),
                       gpu_hnew(MOE_I32, 2, c->R, El), gpu_hnew(MOE_I32, 3, c->R, El, rows)};
    moe_pplx_recv rv = {&o[0], S ? &o[1] : NULL, &o[2], &o[3]};
    OK(moe_ref_pplx_dispatch(&cfg, &x, S ? &sc : NULL, &ids, &rv));
    moe_tensor dx = gpu_to_dev(&x), ds = gpu_to_dev(&sc), di = gpu_to_dev(&ids), dw = gpu_to_dev(&w);
    for (int atomic = 0; atomic < 2; atomic++) {
        moe_tensor g[4] = {gpu_dnew(c->d, 4, c->R, El, rows, H), gpu_dnew(MOE_F32, 4, c->R, El, rows, S ? S : 1),
                           gpu_dnew(MOE_I32, 2, c->R, El), gpu_dnew(MOE_I32, 3, c->R, El, rows)};
        moe_tensor junk = gpu_hnew(c->d, 4, c->R, El, rows, H);
        fill_bytes(&junk, 8);
        OK(moe_cuda_copy(&g[0], &junk));
        moe_tensor_free(&junk);
        moe_pplx_recv gv = {&g[0], S ? &g[1] : NULL, &g[2], &g[3]};
        if (atomic) OK(moe_cuda_pplx_dispatch_atomic(&cfg, &dx, S ? &ds : NULL, &di, &gv));
        else OK(moe_cuda_pplx_dispatch(&cfg, &dx, S ? &ds : NULL, &di, &gv));
        gpu_expect_same("pplx num_tokens", &o[2], &g[2], 0);
        if (!atomic) {
            gpu_expect_same("pplx x", &o[0], &g[0], 0);
            if (S) gpu_expect_same("pplx x_scales", &o[1], &g[1], 0);
            gpu_expect_same("pplx src", &o[3], &g[3], 0);
        } else {
            moe_tensor hx = gpu_to_host(&g[0]), hs = gpu_to_host(&g[1]), hsrc = gpu_to_host(&g[3]);
            /* the atomic handle combines like the reference's on rows moved with it */
            moe_tensor y = gpu_hnew(c->yd, 4, c->R, El, rows, H), ya = gpu_hnew(c->yd, 4, c->R, El, rows, H);
            fill_vals(&y, 1700 + _i);
            size_t yr = c->E * rows > 0 ? gpu_layout_bytes(&y) / (size_t)(c->E * rows) : 0;
            int64_t GT = num_dp * T;
            int32_t *row_ref = (int32_t *)malloc((size_t)(c->E * GT > 0 ? c->E * GT : 1) * 4);
            for (int64_t e = 0; e < c->E; e++)
                for (int64_t i = 0; i < ((int32_t *)o[2].data)[e]; i++)
                    row_ref[e * GT + ((int32_t *)o[3].data)[e * rows + i]] = (int32_t)i;
            for (int64_t e = 0; e < c->E; e++)
                for (int64_t i = 0; i < ((int32_t *)o[2].data)[e]; i++) {
                    int32_t gsrc = ((int32_t *)hsrc.data)[e * rows + i];
                    memcpy((uint8_t *)ya.data + (e * rows + i) * yr,
                           (uint8_t *)y.data + (e * rows + row_ref[e * GT + gsrc]) * yr, yr);
                }
            free(row_ref);
            moe_tensor out = gpu_hnew(c->od, 3, num_dp, T, H);
            OK(moe_ref_pplx_combine(&cfg, &y, &o[2], &o[3], &ids, &w, &out));
            moe_tensor dya = gpu_to_dev(&ya), dout = gpu_dnew(c->od, 3, num_dp, T, H);
            OK(moe_cuda_pplx_combine(&cfg, &dya, &g[2], &g[3], &di, &dw, &dout));
            gpu_expect_same("pplx combine with the atomic handle", &out, &dout, 1);
            moe_cuda_free(&dya), moe_cuda_free(&dout), moe_tensor_free(&out), moe_tensor_free(&y),
                moe_tensor_free(&ya);
            /* rows per expert as sets */
            canonical_rows(&hx, S ? &hs : NULL, &hsrc, &o[2], rows);
            moe_tensor cx = gpu_hnew(c->d, 4, c->R, El, rows, H), cs = gpu_hnew(MOE_F32, 4, c->R, El, rows, S ? S : 1),
                       csrc = gpu_hnew(MOE_I32, 3, c->R, El, rows);
            memcpy(cx.data, o[0].data, gpu_layout_bytes(&cx)), memcpy(cs.data, o[1].data, gpu_layout_bytes(&cs));
            memcpy(csrc.data, o[3].data, gpu_layout_bytes(&csrc));
            canonical_rows(&cx, S ? &cs : NULL, &csrc, &o[2], rows);
            ck_assert_msg(!memcmp(cx.data, hx.data, gpu_layout_bytes(&cx)), "pplx atomic: x rows differ as sets");
            ck_assert_msg(!S || !memcmp(cs.data, hs.data, gpu_layout_bytes(&cs)), "pplx atomic: scales differ as sets");
            ck_assert_msg(!memcmp(csrc.data, hsrc.data, gpu_layout_bytes(&csrc)), "pplx atomic: src differs as sets");
            moe_tensor h[6] = {hx, hs, hsrc, cx, cs, csrc};
            gpu_hfree(6, h);
        }
        gpu_dfree(4, g);
    }
    /* combine on the reference's handle, NaN and Inf rows included */
    moe_tensor y = gpu_hnew(c->yd, 4, c->R, El, rows, H), out = gpu_hnew(c->od, 3, num_dp, T, H);
    fill_vals(&y, 1800 + _i);
    int64_t ny = moe_tensor_numel(&y);
    if (ny > 2) moe_s_store(c->yd, y.data, ny / 2, NAN), moe_s_store(c->yd, y.data, 1, -INFINITY);
    OK(moe_ref_pplx_combine(&cfg, &y, &o[2], &o[3], &ids, &w, &out));
    moe_tensor dy = gpu_to_dev(&y), dn = gpu_to_dev(&o[2]), dsrc = gpu_to_dev(&o[3]), dout = gpu_dnew(c->od, 3, num_dp, T, H);
    OK(moe_cuda_pplx_combine(&cfg, &dy, &dn, &dsrc, &di, &dw, &dout));
    gpu_expect_same("pplx combine out", &out, &dout, 1);
    /* bad handles: a count past rows, a token twice, a token missing */
    if (rows > 0 && T > 0) {
        int32_t *cn = (int32_t *)o[2].data, *sv = (int32_t *)o[3].data;
        int e0 = 0;
        while (e0 < c->E - 1 && cn[e0] < 2) e0++;
        for (int bad = 0; bad < 3; bad++) {
            moe_tensor n2 = gpu_hnew(MOE_I32, 2, c->R, El), s2 = gpu_hnew(MOE_I32, 3, c->R, El, rows);
            memcpy(n2.data, cn, gpu_layout_bytes(&n2)), memcpy(s2.data, sv, gpu_layout_bytes(&s2));
            if (bad == 0) ((int32_t *)n2.data)[c->E - 1] = (int32_t)rows + 1;
            else if (bad == 1 && cn[e0] >= 2) ((int32_t *)s2.data)[e0 * rows + 1] = sv[e0 * rows];
            else ((int32_t *)n2.data)[e0] = cn[e0] - 1;
            if (bad == 2 && cn[e0] == 0) {
                moe_tensor_free(&n2), moe_tensor_free(&s2);
                continue;
            }
            moe_status rs = moe_ref_pplx_combine(&cfg, &y, &n2, &s2, &ids, &w, &out);
            save_msg();
            moe_tensor dn2 = gpu_to_dev(&n2), ds2 = gpu_to_dev(&s2);
            moe_status gs = moe_cuda_pplx_combine(&cfg, &dy, &dn2, &ds2, &di, &dw, &dout);
            if (bad == 1 && cn[e0] < 2) ck_assert_int_eq(gs, rs);
            else gpu_expect_same_error("pplx combine bad handle", rs, ref_msg, gs);
            moe_cuda_free(&dn2), moe_cuda_free(&ds2), moe_tensor_free(&n2), moe_tensor_free(&s2);
        }
    }
    moe_tensor d[8] = {dx, ds, di, dw, dy, dn, dsrc, dout}, h[6] = {x, sc, ids, w, y, out};
    gpu_dfree(8, d), gpu_hfree(6, h), gpu_hfree(4, o);
}
END_TEST

/* ---- bad arguments ------------------------------------------------------------------ */

START_TEST(bad_arguments)
{
    moe_tensor x = gpu_hnew(MOE_BF16, 2, 4, 8), src = gpu_hnew(MOE_I32, 1, 6), out = gpu_hnew(MOE_BF16, 2, 6, 8);
    moe_tensor dx = gpu_to_dev(&x), dsrc = gpu_to_dev(&src), dout = gpu_dnew(MOE_BF16, 2, 6, 8);
    /* host memory where the device is required */
    ck_assert_int_eq(moe_cuda_permute_rows(&x, &dsrc, &dout), MOE_ERR_INVALID_ARG);
    ck_assert_int_eq(moe_cuda_permute_rows(&dx, &src, &dout), MOE_ERR_INVALID_ARG);
    ck_assert_int_eq(moe_cuda_unpermute_rows(&dout, &dsrc, &x), MOE_ERR_INVALID_ARG);
    ck_assert_int_eq(moe_cuda_ep_reduce_scatter_combine(2, &x, &dout), MOE_ERR_INVALID_ARG);
    /* an index out of range, a NULL, a wrong dtype, a duplicate destination */
    ((int32_t *)src.data)[3] = 4;
    OK(moe_cuda_copy(&dsrc, &src));
    SAME_ERR(moe_ref_permute_rows(&x, &src, &out), moe_cuda_permute_rows(&dx, &dsrc, &dout), "permute_rows src 4");
    SAME_ERR(moe_ref_permute_rows(&x, NULL, &out), moe_cuda_permute_rows(&dx, NULL, &dout), "permute_rows NULL");
    moe_tensor y4 = gpu_hnew(MOE_BF16, 2, 4, 8), dy4 = gpu_to_dev(&y4), d4 = gpu_hnew(MOE_I32, 1, 4);
    ((int32_t *)d4.data)[0] = 1, ((int32_t *)d4.data)[1] = 1;
    moe_tensor dd4 = gpu_to_dev(&d4), o4 = gpu_hnew(MOE_BF16, 2, 4, 8), do4 = gpu_dnew(MOE_BF16, 2, 4, 8);
    SAME_ERR(moe_ref_unpermute_rows(&y4, &d4, &o4), moe_cuda_unpermute_rows(&dy4, &dd4, &do4),
             "unpermute_rows duplicate");
    moe_tensor of32 = gpu_hnew(MOE_F32, 2, 6, 8), dof32 = gpu_dnew(MOE_F32, 2, 6, 8);
    SAME_ERR(moe_ref_permute_rows(&x, &src, &of32), moe_cuda_permute_rows(&dx, &dsrc, &dof32), "permute_rows dtype");
    /* expand: a map entry past T*topk, a bad topk */
    moe_tensor m = gpu_hnew(MOE_I32, 1, 6);
    ((int32_t *)m.data)[5] = 8;
    moe_tensor dm = gpu_to_dev(&m);
    SAME_ERR(moe_ref_expand_trtllm(&x, &m, 2, NULL, &out, NULL), moe_cuda_expand_trtllm(&dx, &dm, 2, NULL, &dout, NULL),
             "expand map 8");
    SAME_ERR(moe_ref_expand_trtllm(&x, &m, 0, NULL, &out, NULL), moe_cuda_expand_trtllm(&dx, &dm, 0, NULL, &dout, NULL),
             "expand topk 0");
    /* batched / grouped: an id below -1, a negative first expert, too few rows, pad 0 */
    moe_tensor ids = gpu_hnew(MOE_I32, 2, 4, 2);
    ((int32_t *)ids.data)[3] = -2;
    moe_tensor dids = gpu_to_dev(&ids);
    moe_tensor bo = gpu_hnew(MOE_BF16, 3, 2, 4, 8), dbo = gpu_dnew(MOE_BF16, 3, 2, 4, 8), bc = gpu_hnew(MOE_I32, 1, 2),
               dbc = gpu_dnew(MOE_I32, 1, 2);
    SAME_ERR(moe_ref_batched_scatter(&x, &ids, 0, &bo, &bc), moe_cuda_batched_scatter(&dx, &dids, 0, &dbo, &dbc),
             "batched id -2");
    ((int32_t *)ids.data)[3] = 1;
    OK(moe_cuda_copy(&dids, &ids));
    SAME_ERR(moe_ref_batched_scatter(&x, &ids, -1, &bo, &bc), moe_cuda_batched_scatter(&dx, &dids, -1, &dbo, &dbc),
             "batched first -1");
    moe_tensor go = gpu_hnew(MOE_BF16, 2, 5, 8), dgo = gpu_dnew(MOE_BF16, 2, 5, 8), gr = gpu_hnew(MOE_I32, 1, 5),
               dgr = gpu_dnew(MOE_I32, 1, 5), gc = gpu_hnew(MOE_I32, 1, 2), dgc = gpu_dnew(MOE_I32, 1, 2),
               gf = gpu_hnew(MOE_I32, 1, 3), dgf = gpu_dnew(MOE_I32, 1, 3);
    SAME_ERR(moe_ref_permute_grouped(&x, &ids, 0, 2, &go, &gr, &gc, &gf),
             moe_cuda_permute_grouped(&dx, &dids, 0, 2, &dgo, &dgr, &dgc, &dgf), "grouped too few rows");
    SAME_ERR(moe_ref_permute_grouped(&x, &ids, 0, 0, &go, &gr, &gc, &gf),
             moe_cuda_permute_grouped(&dx, &dids, 0, 0, &dgo, &dgr, &dgc, &dgf), "grouped pad 0");
    /* all-gather: an id out of range; reduce-scatter: a bad world */
    moe_tensor ax = gpu_hnew(MOE_BF16, 3, 2, 2, 8), ai = gpu_hnew(MOE_I32, 3, 2, 2, 2), aw = gpu_hnew(MOE_F32, 3, 2, 2, 2);
    ((int32_t *)ai.data)[5] = 9;
    moe_tensor ag[3] = {gpu_hnew(MOE_BF16, 2, 4, 8), gpu_hnew(MOE_I32, 2, 4, 2), gpu_hnew(MOE_F32, 2, 4, 2)};
    moe_tensor dax = gpu_to_dev(&ax), dai = gpu_to_dev(&ai), daw = gpu_to_dev(&aw);
    moe_tensor dag[3] = {gpu_to_dev(&ag[0]), gpu_to_dev(&ag[1]), gpu_to_dev(&ag[2])};
    SAME_ERR(moe_ref_ep_allgather_dispatch(2, 8, &ax, NULL, &ai, &aw, &ag[0], NULL, &ag[1], &ag[2]),
             moe_cuda_ep_allgather_dispatch(2, 8, &dax, NULL, &dai, &daw, &dag[0], NULL, &dag[1], &dag[2]),
             "allgather id 9");
    moe_tensor rp = gpu_hnew(MOE_BF16, 3, 2, 4, 8), ro = gpu_hnew(MOE_BF16, 3, 2, 2, 8), drp = gpu_to_dev(&rp), dro = gpu_to_dev(&ro);
    SAME_ERR(moe_ref_ep_reduce_scatter_combine(3, &rp, &ro), moe_cuda_ep_reduce_scatter_combine(3, &drp, &dro),
             "reduce_scatter R 3");
    moe_tensor ro2 = gpu_hnew(MOE_F32, 3, 2, 2, 8), dro2 = gpu_to_dev(&ro2);
    SAME_ERR(moe_ref_ep_reduce_scatter_combine(2, &rp, &ro2), moe_cuda_ep_reduce_scatter_combine(2, &drp, &dro2),
             "reduce_scatter out dtype");
    /* pplx: a -1 id, a NULL out, a host tensor inside out */
    moe_pplx_config pc = {2, 1, 4, 2};
    moe_tensor px = gpu_hnew(MOE_BF16, 3, 2, 2, 8), pi = gpu_hnew(MOE_I32, 3, 2, 2, 2);
    const int32_t piv[8] = {0, 1, 2, -1, 3, 0, 1, 2};
    memcpy(pi.data, piv, sizeof piv);
    moe_tensor po[3] = {gpu_hnew(MOE_BF16, 4, 2, 2, 4, 8), gpu_hnew(MOE_I32, 2, 2, 2), gpu_hnew(MOE_I32, 3, 2, 2, 4)};
    moe_tensor dpx = gpu_to_dev(&px), dpi = gpu_to_dev(&pi), dpo[3] = {gpu_to_dev(&po[0]), gpu_to_dev(&po[1]), gpu_to_dev(&po[2])};
    moe_pplx_recv prv = {&po[0], NULL, &po[1], &po[2]}, dprv = {&dpo[0], NULL, &dpo[1], &dpo[2]};
    SAME_ERR(moe_ref_pplx_dispatch(&pc, &px, NULL, &pi, &prv), moe_cuda_pplx_dispatch(&pc, &dpx, NULL, &dpi, &dprv),
             "pplx -1");
    moe_tensor pw = gpu_hnew(MOE_F32, 3, 2, 2, 2), pout = gpu_hnew(MOE_BF16, 3, 2, 2, 8), dpw = gpu_to_dev(&pw),
               dpout = gpu_to_dev(&pout);
    SAME_ERR(moe_ref_pplx_combine(&pc, &po[0], &po[1], &po[2], &pi, &pw, &pout),
             moe_cuda_pplx_combine(&pc, &dpo[0], &dpo[1], &dpo[2], &dpi, &dpw, &dpout), "pplx combine -1");
    ((int32_t *)pi.data)[3] = 3; /* valid ids from here on */
    OK(moe_cuda_copy(&dpi, &pi));
    SAME_ERR(moe_ref_pplx_dispatch(&pc, &px, NULL, &pi, NULL),
             moe_cuda_pplx_dispatch_atomic(&pc, &dpx, NULL, &dpi, NULL), "pplx out NULL");
    moe_pplx_recv hostrv = {&po[0], NULL, &dpo[1], &dpo[2]};
    ck_assert_int_eq(moe_cuda_pplx_dispatch(&pc, &dpx, NULL, &dpi, &hostrv), MOE_ERR_INVALID_ARG);
    /* a handle the device flags: a count past rows (4) */
    OK(moe_ref_pplx_dispatch(&pc, &px, NULL, &pi, &prv));
    ((int32_t *)po[1].data)[2] = 5;
    for (int i = 0; i < 3; i++) OK(moe_cuda_copy(&dpo[i], &po[i])); /* the whole handle of this dispatch */
    SAME_ERR(moe_ref_pplx_combine(&pc, &po[0], &po[1], &po[2], &pi, &pw, &pout),
             moe_cuda_pplx_combine(&pc, &dpo[0], &dpo[1], &dpo[2], &dpi, &dpw, &dpout), "pplx combine count 5");
    moe_tensor dall[] = {dx, dsrc, dout, dy4, dd4, do4, dof32, dm, dids, dbo, dbc, dgo, dgr, dgc, dgf, dax, dai,
                         daw, dag[0], dag[1], dag[2], drp, dro, dro2, dpx, dpi, dpo[0], dpo[1], dpo[2], dpw, dpout};
    moe_tensor hall[] = {x, src, out, y4, d4, o4, of32, m, ids, bo, bc, go, gr, gc, gf, ax, ai, aw, ag[0], ag[1],
                         ag[2], rp, ro, ro2, px, pi, po[0], po[1], po[2], pw, pout};
    gpu_dfree((int)(sizeof dall / sizeof dall[0]), dall), gpu_hfree((int)(sizeof hall / sizeof hall[0]), hall);
}
END_TEST

static void add_tests(Suite *s)
{
    TCase *tc = gpu_tcase(s, "permute", 300);
    tcase_add_loop_test(tc, permute_rows_matches, 0, N_ROWS_CASES);
    tcase_add_loop_test(tc, unpermute_rows_matches, 0, N_ROWS_CASES);
    tcase_add_loop_test(tc, expand_trtllm_matches, 0, N_ROWS_CASES);
    tcase_add_test(tc, in_place_rows);
    tcase_add_loop_test(tc, batched_scatter_matches, 0, N_PLACE_CASES);
    tcase_add_loop_test(tc, permute_grouped_matches, 0, N_PLACE_CASES);
    TCase *td = gpu_tcase(s, "dispatch", 300);
    tcase_add_test(td, allgather_matches);
    tcase_add_test(td, reduce_scatter_matches);
    tcase_add_loop_test(td, pplx_matches, 0, N_PPLX_CASES);
    tcase_add_test(td, bad_arguments);
}

int main(void)
{
    return gpu_test_main("check_gpu_permute", "gpu_permute", add_tests);
}
