/* CUDA conformance backend: grouped_gemm, bit-identical to reference/gemm.c.
 *
 * Numerics (include/moe/gemm.h): every output is one fp32 accumulator from
 * +0, k ascending, acc = fmaf(a, w, acc) (the reference calls fmaf; CUDA's
 * fmaf is the same correctly rounded fused operation), then acc + bias (one
 * f32 add) rounded once to out's dtype by the reference's own round-and-pack
 * (moe_s_store). BLOCK_TILES keeps a second accumulator per output: part =
 * fmaf chain over one 128-wide k tile from +0, then acc = acc + (part *
 * a_scale[p, t]) * w_scale[e, n/128, t], three separately rounded
 * operations in the reference's order. The operands are dequantized while
 * they are staged to shared memory, with the reference's operations:
 * decode(q) (the MOE_HD decoders of reference/formats/, which the reference's
 * get_elem / moe_s_load / moe_decode_array call) times the scale of its group
 * read as moe_q_scale_at reads it (f32, E8M0 code, E4M3 code / global, packed
 * UE8M0 lanes; linear, 128x4-swizzled or packed layouts), one f32 multiply;
 * WEIGHT_TO_ACT then rounds the weight to the activation dtype
 * (moe_s_round_to). Built with --fmad=false, so no product or sum is
 * contracted beyond the fmaf the reference writes.
 *
 * Parallel structure: a classic shared-memory SIMT GEMM. The rows of each
 * expert are gathered through a row list (rows of expert e in ascending
 * order, experts ascending), cut into M tiles of 64 rows that never mix
 * experts; one CTA of 128 threads computes a 64 x 128 output tile of one
 * (expert, M tile, N tile), each thread an 8 x 8 register tile, walking k
 * ascending in chunks of 16 staged through shared memory. Since every
 * output's accumulator lives in one thread and sees k in ascending order,
 * the tiling changes nothing in the arithmetic. Chunks stop at K: no padded
 * fmaf(0, 0, acc) ever runs (it would turn an acc of -0 into +0).
 *
 * The row list is built on the host: the reference's argument check scans
 * row_expert anyway, so it is already in host memory; a counting pass
 * over P int32 there costs less than the kernels that would rebuild it on
 * the device, and gives the exact tile count for the grid (no CTA for rows
 * of no expert). The list goes to the device in the per-thread scratch. */
#include <stdlib.h>
#include <string.h>
#include "cuda_internal.h"
#include "moe/gemm.h"
#include "reference/elem.h"
#include "reference/formats/e2m1.h"
#include "reference/formats/e4m3.h"
#include "reference/formats/e8m0.h"
extern "C" {
#include "reference/quant_internal.h"
}

namespace {

enum { BM = 64, BN = 128, BK = 16, THREADS = 128, TM = 8, TN = 8 };
static_assert(BM * BN == THREADS * TM * TN, "one 8 x 8 register tile per thread");
static_assert(BK % 4 == 0, "operands are staged in quads of 4 consecutive k");

/* One operand (the activations, or the weights of every expert) as the
 * kernel reads it: element e of row r of expert x lives at q + x * q_estride
 * + r * row_bytes (elements packed as the reference's get_elem reads them);
 * its scale as moe_q_scale_at reads it from the expert's slice of the scale
 * tensor (the reference slices weights by nbytes / E, as here). */
struct operand_dev {
    const uint8_t *q;
    int64_t q_estride, row_bytes;
    int scaled;       /* decode(q) * scale; 0: decode only */
    int quad_scale;   /* the 4 k of a quad (k0 % 4 == 0) share one scale */
    int layout;       /* moe_sf_layout */
    int sdtype;       /* MOE_F32, MOE_E8M0 or MOE_E4M3 */
    int use_global;   /* NVFP4: E4M3 code / global */
    const uint8_t *scale;
    int64_t s_estride;
    const uint8_t *global;
    int64_t g_estride;
    int64_t rh, SR, SC, cw;
    int cw_shift;     /* log2(cw) when cw is a power of two, else -1 */
    int round_to;     /* WEIGHT_TO_ACT: the activation dtype; -1: none */
};

struct tile_desc {
    int64_t start; /* first entry of the tile in the row list */
    int32_t e, rows;
};

struct gemm_params {
    operand_dev a, w;
    const int64_t *rows;     /* row list: rows grouped by expert */
    const tile_desc *tiles;
    int64_t n_tiles, ntn;    /* M tiles, N tiles */
    int64_t N, K;
    const float *bias;       /* [E, N] or NULL */
    void *out;
    int out_dtype;
    /* BLOCK_TILES */
    const float *sa, *sw;
    int64_t kt, nt, bk, bn;
};

/* moe_sf_offset_128x4 (reference/quant_layout.c) for r, c >= 0 */
__device__ __forceinline__ int64_t sf_offset_128x4(int64_t r, int64_t c, int64_t sf_cols)
{
    int64_t k_tiles = (sf_cols + 3) / 4;
    return (((r / 128) * k_tiles + c / 4) * 32 + r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}

/* moe_q_scale_at with b = 0 on the expert's slice sbase (gs: its global) */
__device__ __forceinline__ float scale_at(const operand_dev &o, const uint8_t *sbase, float gs, int64_t r,
                                          int64_t c)
{
    int64_t sr = o.rh == 1 ? r : (o.SR == 1 ? 0 : r / o.rh);
    int64_t sc = o.SC == 1 ? 0 : (o.cw_shift >= 0 ? c >> o.cw_shift : c / o.cw);
    if (o.layout == MOE_SF_UE8M0_PACK4) {
        uint32_t w = *(const uint32_t *)(sbase + (sr * (o.SC / 4) + sc / 4) * 4);
        return moe_s_decode_e8m0((uint8_t)(w >> (8 * (int)(sc % 4))));
    }
    int64_t i = o.layout == MOE_SF_SWIZZLE_128X4 ? sf_offset_128x4(sr, sc, o.SC) : sr * o.SC + sc;
    if (o.sdtype == MOE_F32) return ((const float *)sbase)[i];
    uint8_t code = sbase[i];
    if (o.sdtype == MOE_E8M0) return moe_s_decode_e8m0(code);
    float sf = moe_s_decode_e4m3(code);
    return o.use_global ? sf / gs : sf;
}

/* Element c of a row, decoded as the reference's get_elem does. */
template <int DT>
__device__ __forceinline__ float decode(const uint8_t *row, int64_t c)
{
    if (DT == MOE_F32) return ((const float *)row)[c];
    if (DT == MOE_BF16) return moe_s_decode_bf16(((const uint16_t *)row)[c]);
    if (DT == MOE_F16) return moe_s_decode_f16(((const uint16_t *)row)[c]);
    if (DT == MOE_E4M3) return moe_s_decode_e4m3(row[c]);
    if (DT == MOE_I8) return (float)(int8_t)row[c];
    uint8_t byte = row[c / 2];
    uint8_t nib = (c & 1) ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 0xF);
    if (DT == MOE_E2M1) return moe_s_decode_e2m1(nib);
    return (float)((int)nib - ((nib & 8) ? 16 : 0)); /* MOE_I4 */
}

/* Stages rows x BK of one operand (rows of the tile: r_of(i), i < nrows;
 * columns k0 .. k0 + BK) into sm[BK][ld] transposed, dequantized; what lies
 * past the tile's rows or past K is 0 and is never used by a valid output. */
template <int DT, int R, int LD, class RowOf>
__device__ __forceinline__ void stage(const operand_dev &o, const uint8_t *qbase, const uint8_t *sbase, float gs,
                                      int nrows, RowOf r_of, int64_t k0, int64_t K, float (*sm)[LD])
{
    constexpr int QUADS = BK / 4, ITEMS = R * QUADS / THREADS;
    static_assert(R * QUADS % THREADS == 0, "whole passes");
#pragma unroll
    for (int j = 0; j < ITEMS; j++) {
        int item = (int)threadIdx.x + j * THREADS;
        int i = item / QUADS, q = item % QUADS;
        float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        int64_t c0 = k0 + q * 4;
        if (i < nrows && c0 < K) {
            int64_t r = r_of(i);
            const uint8_t *row = qbase + r * o.row_bytes;
            float s = 1.0f;
            if (o.scaled && o.quad_scale) s = scale_at(o, sbase, gs, r, c0);
#pragma unroll
            for (int u = 0; u < 4; u++) {
                int64_t c = c0 + u;
                if (c < K) {
                    float x = decode<DT>(row, c);
                    if (o.scaled) x = x * (o.quad_scale ? s : scale_at(o, sbase, gs, r, c));
                    if (o.round_to >= 0) x = moe_s_round_to((moe_dtype)o.round_to, x);
                    v[u] = x;
                }
            }
        }
#pragma unroll
        for (int u = 0; u < 4; u++) sm[q * 4 + u][i] = v[u];
    }
}

/* One k step of the thread's 8 x 8 tile: rows tm*4 + {0..3} and 32 + tm*4 +
 * {0..3}, columns tn*4 + {0..3} and 64 + tn*4 + {0..3} (float4 reads). */
__device__ __forceinline__ void mac(float (&d)[TM][TN], const float (*As)[BM + 4], const float (*Ws)[BN + 4], int kk,
                                    int tm, int tn)
{
    const float4 a0 = *(const float4 *)&As[kk][tm * 4], a1 = *(const float4 *)&As[kk][32 + tm * 4];
    const float4 w0 = *(const float4 *)&Ws[kk][tn * 4], w1 = *(const float4 *)&Ws[kk][64 + tn * 4];
    const float av[TM] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    const float wv[TN] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) d[i][j] = fmaf(av[i], wv[j], d[i][j]);
}

template <int DA, int DW, bool BLOCK>
__global__ void __launch_bounds__(THREADS) gemm_kernel(gemm_params p)
{
    __shared__ __align__(16) float As[BK][BM + 4];
    __shared__ __align__(16) float Ws[BK][BN + 4];
    __shared__ int64_t rows_sm[BM];
    const int tn = (int)threadIdx.x % 16, tm = (int)threadIdx.x / 16;
    const int64_t N = p.N, K = p.K;

    for (int64_t tile = blockIdx.x; tile < p.n_tiles * p.ntn; tile += gridDim.x) {
        const tile_desc td = p.tiles[tile / p.ntn];
        const int64_t n0 = (tile % p.ntn) * BN;
        const int e = td.e, nrows = td.rows;
        const int ncols = N - n0 < BN ? (int)(N - n0) : BN;
        __syncthreads(); /* the previous tile's readers of rows_sm are done */
        for (int i = (int)threadIdx.x; i < BM; i += THREADS) rows_sm[i] = i < nrows ? p.rows[td.start + i] : 0;
        __syncthreads();

        const uint8_t *a_sb = p.a.scale, *w_q = p.w.q + e * p.w.q_estride;
        const uint8_t *w_sb = p.w.scale ? p.w.scale + e * p.w.s_estride : nullptr;
        const float a_gs = p.a.use_global ? *(const float *)p.a.global : 1.0f;
        const float w_gs = p.w.use_global ? *(const float *)(p.w.global + e * p.w.g_estride) : 1.0f;

        float acc[TM][TN], part[TM][TN]; /* part: BLOCK_TILES only */
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
            for (int j = 0; j < TN; j++) acc[i][j] = 0.0f, part[i][j] = 0.0f;

        for (int64_t k0 = 0; k0 < K; k0 += BK) {
            __syncthreads(); /* the previous chunk's readers are done */
            stage<DA, BM, BM + 4>(p.a, p.a.q, a_sb, a_gs, nrows, [&](int i) { return rows_sm[i]; }, k0, K, As);
            stage<DW, BN, BN + 4>(p.w, w_q, w_sb, w_gs, ncols, [&](int i) { return n0 + i; }, k0, K, Ws);
            __syncthreads();
            const int kmax = K - k0 < BK ? (int)(K - k0) : BK;
            /* the accumulator this chunk feeds: acc, or BLOCK_TILES' part */
            float(&dst)[TM][TN] = BLOCK ? part : acc;
            if (kmax == BK) {
#pragma unroll
                for (int kk = 0; kk < BK; kk++) mac(dst, As, Ws, kk, tm, tn);
            } else {
                for (int kk = 0; kk < kmax; kk++) mac(dst, As, Ws, kk, tm, tn);
            }
            if (BLOCK && ((k0 + BK) % p.bk == 0 || k0 + BK >= K)) {
                /* end of a 128-wide k tile: acc = acc + (part * sa) * sw */
                const int64_t t = k0 / p.bk;
                float sa[TM], sw[TN];
#pragma unroll
                for (int i = 0; i < TM; i++) {
                    int r = (i < 4 ? 0 : 32) + tm * 4 + (i & 3);
                    sa[i] = r < nrows ? p.sa[rows_sm[r] * p.kt + t] : 0.0f;
                }
#pragma unroll
                for (int j = 0; j < TN; j++) {
                    int c = (j < 4 ? 0 : 64) + tn * 4 + (j & 3);
                    sw[j] = c < ncols ? p.sw[((int64_t)e * p.nt + (n0 + c) / p.bn) * p.kt + t] : 0.0f;
                }
#pragma unroll
                for (int i = 0; i < TM; i++)
#pragma unroll
                    for (int j = 0; j < TN; j++) {
                        acc[i][j] = acc[i][j] + (dst[i][j] * sa[i]) * sw[j];
                        dst[i][j] = 0.0f;
                    }
            }
        }

        const float *bias = p.bias ? p.bias + (int64_t)e * N + n0 : nullptr;
#pragma unroll
        for (int i = 0; i < TM; i++) {
            int r = (i < 4 ? 0 : 32) + tm * 4 + (i & 3);
            if (r >= nrows) continue;
            int64_t base = rows_sm[r] * N + n0;
#pragma unroll
            for (int j = 0; j < TN; j++) {
                int c = (j < 4 ? 0 : 64) + tn * 4 + (j & 3);
                if (c >= ncols) continue;
                float v = acc[i][j];
                if (bias) v = v + bias[c];
                moe_s_store((moe_dtype)p.out_dtype, p.out, base + c, v);
            }
        }
    }
}

int cw_shift_of(int64_t cw)
{
    if (cw <= 0 || (cw & (cw - 1))) return -1;
    int s = 0;
    while (((int64_t)1 << s) < cw) s++;
    return s;
}

/* The kernel's view of one operand; q_estride etc. from the reference's
 * slicing (nbytes / E) for weights. */
operand_dev operand_of(const moe_quant_spec *sp, int scaled, const moe_tensor *q, const moe_tensor *scale,
                       const moe_tensor *global, int64_t E, int round_to)
{
    operand_dev o;
    memset(&o, 0, sizeof o);
    int weight = sp->operand == MOE_OPERAND_WEIGHT;
    int64_t R = q->shape[q->ndim - 2], K = q->shape[q->ndim - 1];
    o.q = (const uint8_t *)q->data;
    o.q_estride = weight ? (int64_t)(q->nbytes / (size_t)E) : 0;
    o.row_bytes = (int64_t)moe_dtype_row_bytes(q->dtype, K);
    o.round_to = round_to;
    o.scaled = scaled && sp->gran != MOE_GRAN_NONE;
    if (!o.scaled) return o;
    moe_q_geom geo;
    int64_t shape[3] = {1, R, K};
    moe_q_geometry(sp, "q", weight ? 3 : 2, weight ? shape : shape + 1, &geo); /* passed moe_gemm_check */
    o.layout = sp->layout;
    o.sdtype = sp->layout == MOE_SF_UE8M0_PACK4 ? MOE_E8M0 : sp->scale_dtype;
    o.use_global = sp->use_global_scale;
    o.scale = (const uint8_t *)scale->data;
    o.s_estride = weight ? (int64_t)(scale->nbytes / (size_t)E) : 0;
    o.global = o.use_global ? (const uint8_t *)global->data : nullptr;
    o.g_estride = o.use_global && weight ? (int64_t)(global->nbytes / (size_t)E) : 0;
    o.rh = geo.rh, o.SR = geo.SR, o.SC = geo.SC, o.cw = geo.cw;
    o.cw_shift = cw_shift_of(geo.cw);
    o.quad_scale = geo.SC == 1 || geo.cw % 4 == 0;
    return o;
}

template <int DA, int DW, bool BLOCK>
moe_status launch(const gemm_params &p)
{
    int64_t total = p.n_tiles * p.ntn;
    unsigned grid = (unsigned)(total < 65535LL * 1024 ? total : 65535LL * 1024);
    gemm_kernel<DA, DW, BLOCK><<<grid, THREADS>>>(p);
    return moe_cu_launched("grouped_gemm");
}

/* The scheme table's (activation element, weight element, numerics)
 * combinations; moe_gemm_check has made a's and w's dtypes the scheme's. */
moe_status dispatch(moe_scheme s, const gemm_params &p)
{
    switch (s) {
    case MOE_SCHEME_F32: return launch<MOE_F32, MOE_F32, false>(p);
    case MOE_SCHEME_BF16: return launch<MOE_BF16, MOE_BF16, false>(p);
    case MOE_SCHEME_F16: return launch<MOE_F16, MOE_F16, false>(p);
    case MOE_SCHEME_FP8_WTENSOR_ATENSOR:
    case MOE_SCHEME_FP8_WCHANNEL_ATENSOR:
    case MOE_SCHEME_FP8_WCHANNEL_ATOKEN:
    case MOE_SCHEME_FP8_WTENSOR_ATOKEN:
    case MOE_SCHEME_MXFP8: return launch<MOE_E4M3, MOE_E4M3, false>(p);
    case MOE_SCHEME_FP8_WBLOCK128_AGROUP128: return launch<MOE_E4M3, MOE_E4M3, true>(p);
    case MOE_SCHEME_INT8_WCHANNEL_ATOKEN: return launch<MOE_I8, MOE_I8, false>(p);
    case MOE_SCHEME_W8A16_CHANNEL: return launch<MOE_BF16, MOE_I8, false>(p);
    case MOE_SCHEME_W4A16_G32:
    case MOE_SCHEME_W4A16_G64:
    case MOE_SCHEME_W4A16_G128: return launch<MOE_BF16, MOE_I4, false>(p);
    case MOE_SCHEME_W4AFP8_G128: return launch<MOE_E4M3, MOE_I4, false>(p);
    case MOE_SCHEME_MXFP4_W4A16: return launch<MOE_BF16, MOE_E2M1, false>(p);
    case MOE_SCHEME_MXFP4_MXFP8: return launch<MOE_E4M3, MOE_E2M1, false>(p);
    case MOE_SCHEME_NVFP4: return launch<MOE_E2M1, MOE_E2M1, false>(p);
    default: return moe_fail(MOE_ERR_INVALID_ARG, "scheme %d: no grouped_gemm kernel", (int)s);
    }
}

/* A case the kernel does not cover (a BLOCK_TILES k tile that is not a
 * multiple of the staging chunk; the scheme table has none): the reference
 * on host copies, its output copied back. */
moe_status on_host(const moe_gemm_args *g, moe_tensor *out)
{
    moe_tensor h[8], ho;
    const moe_tensor *src[8] = {g->a, g->a_scale, g->a_global, g->w, g->w_scale, g->w_global, g->row_expert, g->bias};
    moe_status st = MOE_OK;
    memset(h, 0, sizeof h);
    memset(&ho, 0, sizeof ho);
    for (int i = 0; i < 8 && st == MOE_OK; i++) st = moe_cu_to_host(src[i], &h[i]);
    if (st == MOE_OK) st = moe_cu_to_host(out, &ho);
    if (st == MOE_OK) {
        moe_gemm_args hg = *g;
        hg.a = &h[0], hg.a_scale = g->a_scale ? &h[1] : NULL, hg.a_global = g->a_global ? &h[2] : NULL;
        hg.w = &h[3], hg.w_scale = g->w_scale ? &h[4] : NULL, hg.w_global = g->w_global ? &h[5] : NULL;
        hg.row_expert = &h[6], hg.bias = g->bias ? &h[7] : NULL;
        st = moe_ref_grouped_gemm(&hg, &ho);
        if (st == MOE_OK) st = moe_cu_to_dev(&ho, out);
    }
    for (int i = 0; i < 8; i++) moe_tensor_free(&h[i]);
    moe_tensor_free(&ho);
    return st;
}

} // namespace

/* Device placement and the reference's checks on host mirrors (they read
 * row_expert only, which comes back in *re: free it with
 * moe_cu_mirror_free). Shared with the fast backend's grouped GEMM. */
moe_status moe_cu_gemm_checked(const moe_gemm_args *g, const moe_tensor *out, moe_tensor *re_out)
{
    moe_status st = MOE_OK;
    memset(re_out, 0, sizeof *re_out);
    if (g) {
        const moe_tensor *ts[8] = {g->a, g->a_scale, g->a_global, g->w, g->w_scale, g->w_global, g->row_expert, g->bias};
        const char *names[8] = {"a", "a_scale", "a_global", "w", "w_scale", "w_global", "row_expert", "bias"};
        for (int i = 0; i < 8 && st == MOE_OK; i++) st = moe_cu_expect_dev(ts[i], names[i]);
        if (st == MOE_OK) st = moe_cu_expect_dev(out, "out");
        if (st != MOE_OK) return st;
    }
    /* the reference's checks on host mirrors; they read row_expert only */
    moe_tensor m[9], re, mo;
    moe_gemm_args mg;
    const moe_gemm_args *mgp = NULL;
    memset(&re, 0, sizeof re);
    if (g) {
        mg = *g;
        mg.a = moe_cu_mirror(g->a, &m[0], 0, &st);
        mg.a_scale = moe_cu_mirror(g->a_scale, &m[1], 0, &st);
        mg.a_global = moe_cu_mirror(g->a_global, &m[2], 0, &st);
        mg.w = moe_cu_mirror(g->w, &m[3], 0, &st);
        mg.w_scale = moe_cu_mirror(g->w_scale, &m[4], 0, &st);
        mg.w_global = moe_cu_mirror(g->w_global, &m[5], 0, &st);
        mg.bias = moe_cu_mirror(g->bias, &m[6], 0, &st);
        mg.row_expert = moe_cu_mirror(g->row_expert, &re, 1, &st);
        mgp = &mg;
    }
    const moe_tensor *mout = moe_cu_mirror(out, &mo, 0, &st);
    if (st == MOE_OK) st = moe_gemm_check(mgp, mout);
    if (st != MOE_OK) {
        moe_cu_mirror_free(&re);
        return st;
    }
    *re_out = re;
    return MOE_OK;
}

extern "C" moe_status moe_cuda_grouped_gemm(const moe_gemm_args *g, moe_tensor *out)
{
    moe_tensor re;
    moe_status st = moe_cu_gemm_checked(g, out, &re);
    if (st != MOE_OK) return st;

    const int64_t P = g->a->shape[0], K = g->a->shape[1], E = g->w->shape[0], N = g->w->shape[1];
    const int32_t *rex = (const int32_t *)re.data;
    int64_t zero_rows = 0;
    for (int64_t p = 0; p < P; p++) zero_rows += rex[p] < 0;
    size_t used = (size_t)(P * N) * (out->dtype == MOE_F32 ? 4 : 2);
    /* the reference zeroes all of out first; rows of no expert keep it */
    if (out->nbytes && (P == 0 || N == 0 || zero_rows > 0 || out->nbytes > used)) {
        cudaError_t ce = cudaMemsetAsync(out->data, 0, out->nbytes, cudaStreamPerThread);
        if (ce != cudaSuccess) {
            moe_cu_mirror_free(&re);
            return moe_cu_fail(ce, "grouped_gemm: zero out");
        }
    }
    if (P == 0 || N == 0 || zero_rows == P) {
        moe_cu_mirror_free(&re);
        return MOE_OK;
    }
    moe_quant_spec ws, as;
    moe_scheme_spec(g->scheme, MOE_OPERAND_WEIGHT, &ws);
    moe_scheme_spec(g->scheme, MOE_OPERAND_ACT, &as);
    moe_gemm_numerics mode = moe_gemm_numerics_of(g->scheme);
    if (mode == MOE_GEMM_BLOCK_TILES && as.group_k % BK) {
        moe_cu_mirror_free(&re);
        return on_host(g, out);
    }

    /* row list: experts ascending, rows ascending within an expert; M tiles */
    int64_t *cnt = (int64_t *)calloc((size_t)E + 1, sizeof(int64_t));
    if (!cnt) {
        moe_cu_mirror_free(&re);
        return moe_fail(MOE_ERR_NOMEM, "grouped_gemm: row counts");
    }
    for (int64_t p = 0; p < P; p++)
        if (rex[p] >= 0) cnt[rex[p] + 1]++;
    int64_t n_tiles = 0;
    for (int64_t e = 0; e < E; e++) n_tiles += (cnt[e + 1] + BM - 1) / BM, cnt[e + 1] += cnt[e];
    const int64_t nlist = cnt[E];
    size_t list_bytes = (size_t)nlist * sizeof(int64_t), tiles_off = (list_bytes + 15) / 16 * 16;
    size_t bytes = tiles_off + (size_t)n_tiles * sizeof(tile_desc);
    uint8_t *host = (uint8_t *)malloc(bytes);
    if (!host) {
        free(cnt);
        moe_cu_mirror_free(&re);
        return moe_fail(MOE_ERR_NOMEM, "grouped_gemm: row list");
    }
    int64_t *list = (int64_t *)host;
    tile_desc *tiles = (tile_desc *)(host + tiles_off);
    {
        int64_t *fill = (int64_t *)malloc(sizeof(int64_t) * (size_t)(E + 1));
        if (!fill) {
            free(cnt), free(host);
            moe_cu_mirror_free(&re);
            return moe_fail(MOE_ERR_NOMEM, "grouped_gemm: row list");
        }
        memcpy(fill, cnt, sizeof(int64_t) * (size_t)E);
        for (int64_t p = 0; p < P; p++)
            if (rex[p] >= 0) list[fill[rex[p]]++] = p;
        free(fill);
    }
    for (int64_t e = 0, t = 0; e < E; e++)
        for (int64_t s0 = cnt[e]; s0 < cnt[e + 1]; s0 += BM) {
            tiles[t].start = s0;
            tiles[t].e = (int32_t)e;
            tiles[t].rows = (int32_t)(cnt[e + 1] - s0 < BM ? cnt[e + 1] - s0 : BM);
            t++;
        }
    free(cnt);
    moe_cu_mirror_free(&re);
    uint8_t *dev = (uint8_t *)moe_cu_scratch(bytes, &st);
    if (!dev) {
        free(host);
        return st;
    }
    /* pageable source: the call returns once host may be freed */
    cudaError_t ce = cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, cudaStreamPerThread);
    free(host);
    if (ce != cudaSuccess) return moe_cu_fail(ce, "grouped_gemm: row list to the device");

    gemm_params p;
    memset(&p, 0, sizeof p);
    int block = mode == MOE_GEMM_BLOCK_TILES;
    int round_to = mode == MOE_GEMM_WEIGHT_TO_ACT ? (int)g->a->dtype : -1;
    p.a = operand_of(&as, !block, g->a, g->a_scale, g->a_global, 1, -1); /* to_f32 unless BLOCK_TILES */
    p.w = operand_of(&ws, !block, g->w, g->w_scale, g->w_global, E, round_to);
    p.rows = (const int64_t *)dev;
    p.tiles = (const tile_desc *)(dev + tiles_off);
    p.n_tiles = n_tiles;
    p.ntn = (N + BN - 1) / BN;
    p.N = N, p.K = K;
    p.bias = g->bias ? (const float *)g->bias->data : nullptr;
    p.out = out->data;
    p.out_dtype = out->dtype;
    if (block) {
        p.bk = as.group_k, p.bn = ws.block_n;
        p.kt = (K + p.bk - 1) / p.bk, p.nt = (N + p.bn - 1) / p.bn;
        p.sa = (const float *)g->a_scale->data, p.sw = (const float *)g->w_scale->data;
    }
    return dispatch(g->scheme, p);
}
