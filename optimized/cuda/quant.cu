/* CUDA conformance quantize / dequantize for every spec the reference
 * accepts, bit-identical to reference/quant.c.
 *
 * The arithmetic is the reference's own: reference/quant_core.h (MOE_HD)
 * holds the scale rules (moe_qc_rule_dynamic, the NVFP4 global scale, the
 * code scales), the scale placement (linear, 128x4 swizzle, UE8M0 pack4),
 * the element step (x / f or x * f, the NaN sign rule, the NaN clamp) and
 * the encoders, and the reference calls the same lines. What is parallel:
 *
 *   1. group statistics, one kernel per granularity, each a reduction:
 *        - row-local groups (ROW, GROUP, MX32, NV16): a team of 8/16/32
 *          lanes of one warp per group, lanes striding the group's columns
 *          (coalesced), combined with xor shuffles;
 *        - 128 x 128 weight tiles (BLOCK): a block per tile;
 *        - a per-tensor group and the NVFP4 global amax: a two-pass grid
 *          reduction (partials per chunk of the expert, then a block per
 *          expert merges them);
 *      then the team's / block's first thread runs the rule, stores the
 *      scale the way the reference's store_scale does, and writes the
 *      group's element factor f to scratch;
 *   2. encoding: one thread per output element (one per byte for the
 *      packed 4-bit formats, both nibbles, so every byte is written and no
 *      two threads share one), reading its group's f.
 *
 * Why the reductions are exact in any order: the amax is a maximum of
 * magnitudes (order-free; a NaN never wins a ">" and is counted in a flag,
 * as the reference's walk does), and the signed max / min INT_MINMAX reads
 * keep the first element that attains them in the reference's walk order
 * (row, then column): each partial carries the walk index of its max and
 * min, and a merge takes the larger value, on a tie the smaller index, so
 * the merge is commutative and gives the serial walk's choice (it matters
 * only for +0 against -0, which compare equal).
 *
 * The step op is the same for every group of a call (the spec's q_op for
 * dynamic scales, x / s for static ones), so scratch holds one f32 per group.
 * The stage finds no errors while it computes: all are argument checks. */
#include <string.h>
#include "cuda_internal.h"
#include "reference/quant_core.h"
#include "reference/quant_internal.h"
/* stage_checks.h declares C functions without a C++ guard */
extern "C" {
#include "reference/stage_checks.h"
}

namespace {

constexpr int kThreads = 256;

/* statistics of a group, as a mergeable partial */
struct qstat {
    float ai, mx, mn;
    int64_t mxi, mni; /* walk index of mx / mn (FULL only) */
    int nan, any;
};

__device__ __forceinline__ qstat stat_empty()
{
    qstat s;
    s.ai = s.mx = s.mn = 0.0f;
    s.mxi = s.mni = 0;
    s.nan = s.any = 0;
    return s;
}

template <bool FULL> __device__ __forceinline__ void stat_add(qstat &s, float v, int64_t i)
{
    if (v != v) {
        s.nan = 1;
        return;
    }
    float a = moe_fabsf(v);
    if (a > s.ai) s.ai = a;
    if (FULL) {
        /* strict compares: a lane walks its elements in increasing index, so
         * the first one attaining the max / min stays (the reference's walk) */
        if (!s.any || v > s.mx) s.mx = v, s.mxi = i;
        if (!s.any || v < s.mn) s.mn = v, s.mni = i;
        s.any = 1;
    }
}

template <bool FULL> __device__ __forceinline__ void stat_merge(qstat &a, const qstat &b)
{
    if (b.ai > a.ai) a.ai = b.ai;
    a.nan |= b.nan;
    if (FULL && b.any) {
        if (!a.any || b.mx > a.mx || (b.mx == a.mx && b.mxi < a.mxi)) a.mx = b.mx, a.mxi = b.mxi;
        if (!a.any || b.mn < a.mn || (b.mn == a.mn && b.mni < a.mni)) a.mn = b.mn, a.mni = b.mni;
        a.any = 1;
    }
}

template <bool FULL> __device__ __forceinline__ qstat stat_shfl_xor(const qstat &s, int off)
{
    qstat o;
    o.ai = __shfl_xor_sync(0xFFFFFFFFu, s.ai, off);
    o.nan = __shfl_xor_sync(0xFFFFFFFFu, s.nan, off);
    if (FULL) {
        o.mx = __shfl_xor_sync(0xFFFFFFFFu, s.mx, off);
        o.mn = __shfl_xor_sync(0xFFFFFFFFu, s.mn, off);
        o.mxi = __shfl_xor_sync(0xFFFFFFFFu, (long long)s.mxi, off);
        o.mni = __shfl_xor_sync(0xFFFFFFFFu, (long long)s.mni, off);
        o.any = __shfl_xor_sync(0xFFFFFFFFu, s.any, off);
    } else {
        o.mx = o.mn = 0.0f;
        o.mxi = o.mni = 0;
        o.any = 0;
    }
    return o;
}

/* reduce within aligned teams of T lanes; every lane gets its team's result */
template <bool FULL, int T> __device__ __forceinline__ qstat team_reduce(qstat s)
{
#pragma unroll
    for (int off = T / 2; off > 0; off >>= 1) stat_merge<FULL>(s, stat_shfl_xor<FULL>(s, off));
    return s;
}

/* block reduction (blockDim.x == kThreads, every thread calls it); the
 * result is valid in thread 0 */
template <bool FULL> __device__ qstat block_reduce(qstat s)
{
    __shared__ qstat part[kThreads / 32];
    s = team_reduce<FULL, 32>(s);
    int w = threadIdx.x / 32, l = threadIdx.x % 32;
    __syncthreads(); /* part[] may still be read by a previous call */
    if (l == 0) part[w] = s;
    __syncthreads();
    if (w == 0) {
        s = l < kThreads / 32 ? part[l] : stat_empty();
        s = team_reduce<FULL, 32>(s);
    }
    return s;
}

/* the reference's stats_final: a NaN element makes amax_prop, vmax and
 * vmin the canonical +NaN */
__device__ __forceinline__ moe_q_stats stat_final(const qstat &a)
{
    moe_q_stats st;
    st.amax_prop = st.amax_ign = a.ai;
    st.vmax = a.mx;
    st.vmin = a.mn;
    if (a.nan) st.amax_prop = st.vmax = st.vmin = moe_u32_as_f32(0x7FC00000u);
    return st;
}

/* the reference's store_scale */
__device__ __forceinline__ void store_scale(const moe_quant_spec *sp, const moe_q_geom &g, void *scale, int64_t b,
                                            int64_t sr, int64_t sc, const moe_q_group &grp)
{
    int lane;
    int64_t i = moe_qc_scale_index(sp, &g, b, sr, sc, &lane);
    if (sp->layout == MOE_SF_UE8M0_PACK4) ((uint8_t *)scale)[i * 4 + lane] = grp.code; /* byte `lane` of word i */
    else if (sp->scale_dtype == MOE_F32) ((float *)scale)[i] = moe_qc_canon_nan(grp.scale, 0.0f);
    else ((uint8_t *)scale)[i] = grp.code;
}

__device__ __forceinline__ void finish_group(const moe_quant_spec *sp, const moe_q_geom &g, int64_t b, int64_t sr,
                                             int64_t sc, const qstat &a, float gs, float *f, void *scale)
{
    moe_q_stats st = stat_final(a);
    moe_q_group grp;
    moe_qc_rule_dynamic(sp, &st, gs, &grp);
    f[(b * g.SR + sr) * g.SC + sc] = grp.f;
    store_scale(sp, g, scale, b, sr, sc, grp);
}

/* ---- kernels: statistics and scales ------------------------------------------- */

/* Row-local groups (ROW, GROUP, MX32, NV16): a team of T lanes per group.
 * The loop bound is per warp, so all 32 lanes take part in every shuffle. */
template <bool FULL, int T>
__global__ void team_groups_kernel(const moe_quant_spec sp, const moe_q_geom g, const float *__restrict__ x,
                                   const float *__restrict__ gsb, float *__restrict__ f, void *scale)
{
    const int64_t ngroups = g.B * g.R * g.SC;
    const int lane = threadIdx.x % 32, team = lane / T, tl = lane % T;
    const int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
    const int64_t nwarps = (int64_t)gridDim.x * blockDim.x / 32;
    for (int64_t wg = warp * (32 / T); wg < ngroups; wg += nwarps * (32 / T)) {
        const int64_t gi = wg + team;
        const bool active = gi < ngroups;
        int64_t row = 0, sc = 0, c0 = 0, c1 = 0;
        qstat s = stat_empty();
        if (active) {
            row = gi / g.SC; /* b * R + r */
            sc = gi % g.SC;
            c0 = sc * g.cw;
            c1 = c0 + g.cw < g.K ? c0 + g.cw : g.K;
            const float *xr = x + row * g.K;
            for (int64_t c = c0 + tl; c < c1; c += T) stat_add<FULL>(s, xr[c], c - c0);
        }
        s = team_reduce<FULL, T>(s);
        if (active && tl == 0) {
            int64_t b = row / g.R;
            finish_group(&sp, g, b, row % g.R, sc, s, gsb ? gsb[b] : 1.0f, f, scale);
        }
    }
}

/* BLOCK tiles: a block per rh x cw tile, threads striding the tile row-major. */
template <bool FULL>
__global__ void tile_groups_kernel(const moe_quant_spec sp, const moe_q_geom g, const float *__restrict__ x,
                                   float *__restrict__ f, void *scale)
{
    const int64_t ntiles = g.B * g.SR * g.SC;
    for (int64_t t = blockIdx.x; t < ntiles; t += gridDim.x) {
        int64_t b = t / (g.SR * g.SC), sr = (t / g.SC) % g.SR, sc = t % g.SC;
        int64_t r0 = sr * g.rh, c0 = sc * g.cw;
        int64_t r1 = r0 + g.rh < g.R ? r0 + g.rh : g.R, c1 = c0 + g.cw < g.K ? c0 + g.cw : g.K;
        int64_t nc = c1 - c0, n = (r1 - r0) * nc;
        const float *xb = x + (b * g.R + r0) * g.K + c0;
        qstat s = stat_empty();
        for (int64_t e = threadIdx.x; e < n; e += blockDim.x) stat_add<FULL>(s, xb[(e / nc) * g.K + e % nc], e);
        s = block_reduce<FULL>(s);
        if (threadIdx.x == 0) finish_group(&sp, g, b, sr, sc, s, 1.0f, f, scale);
    }
}

/* Whole-expert reduction, pass 1: partial p of expert b covers a contiguous
 * chunk of its R*K elements (the walk order is the flat index). */
template <bool FULL>
__global__ void expert_partials_kernel(const float *__restrict__ x, int64_t B, int64_t n, int P, qstat *part)
{
    const int64_t chunk = (n + P - 1) / P;
    for (int64_t t = blockIdx.x; t < B * P; t += gridDim.x) {
        int64_t b = t / P, p = t % P;
        int64_t lo = p * chunk, hi = lo + chunk < n ? lo + chunk : n;
        const float *xb = x + b * n;
        qstat s = stat_empty();
        for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) stat_add<FULL>(s, xb[i], i);
        s = block_reduce<FULL>(s);
        if (threadIdx.x == 0) part[t] = s;
    }
}

/* pass 2, a block per expert: merge its P partials; then either the NVFP4
 * global scale (gs_out) or the per-tensor group's rule. */
template <bool FULL>
__global__ void expert_finish_kernel(const moe_quant_spec sp, const moe_q_geom g, int P, const qstat *part,
                                     float *gs_out, float *global_out, float *f, void *scale)
{
    for (int64_t b = blockIdx.x; b < g.B; b += gridDim.x) {
        qstat s = stat_empty();
        for (int p = threadIdx.x; p < P; p += blockDim.x) stat_merge<FULL>(s, part[b * P + p]);
        s = block_reduce<FULL>(s);
        if (threadIdx.x != 0) continue;
        if (gs_out) {
            moe_q_stats st = stat_final(s);
            float gs = moe_qc_canon_nan(moe_qc_nvfp4_global(&sp, st.amax_prop), 0.0f);
            gs_out[b] = gs;
            if (global_out) global_out[b] = gs;
        } else {
            finish_group(&sp, g, b, 0, 0, s, 1.0f, f, scale);
        }
    }
}

/* NVFP4 with a static global scale: gs is the caller's, canonicalized. */
__global__ void static_global_kernel(const float *__restrict__ stat, int64_t B, float *gs_out, float *global_out)
{
    for (int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; b < B; b += (int64_t)gridDim.x * blockDim.x) {
        float gs = moe_qc_canon_nan(stat[b], 0.0f);
        gs_out[b] = gs;
        if (global_out) global_out[b] = gs;
    }
}

/* Static scales of the other rules: group i takes stat[i], x / s. */
__global__ void static_groups_kernel(const moe_quant_spec sp, const moe_q_geom g, const float *__restrict__ stat,
                                     float *__restrict__ f, void *scale)
{
    const int64_t n = g.B * g.SR * g.SC;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        moe_q_group grp;
        moe_qc_rule_static(stat[i], &grp);
        f[i] = grp.f;
        store_scale(&sp, g, scale, i / (g.SR * g.SC), (i / g.SC) % g.SR, i % g.SC, grp);
    }
}

/* ---- kernels: elements ----------------------------------------------------------- */

__device__ __forceinline__ uint8_t encode_at(const moe_quant_spec *sp, const moe_q_geom &g, moe_quant_op op,
                                             const float *__restrict__ f, float xv, int64_t row, int64_t c)
{
    int64_t b = row / g.R, r = row % g.R;
    moe_q_group grp;
    grp.op = op;
    grp.f = f[(b * g.SR + r / g.rh) * g.SC + c / g.cw];
    grp.scale = grp.f;
    grp.code = 0;
    return moe_qc_encode(sp->elem, moe_qc_step(sp, &grp, xv));
}

/* one thread per element (E4M3, I8) or per byte (E2M1, I4: element 2j in
 * the low nibble, 2j+1 in the high one, a row's odd tail padded with 0) */
__global__ void encode_kernel(const moe_quant_spec sp, const moe_q_geom g, moe_quant_op op,
                              const float *__restrict__ x, const float *__restrict__ f, uint8_t *__restrict__ q)
{
    const int64_t rows = g.B * g.R, K = g.K;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    if (sp.elem == MOE_E2M1 || sp.elem == MOE_I4) {
        const int64_t rb = (K + 1) / 2, n = rows * rb;
        for (int64_t u = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; u < n; u += stride) {
            int64_t row = u / rb, c = 2 * (u % rb);
            const float *xr = x + row * K;
            uint8_t lo = encode_at(&sp, g, op, f, xr[c], row, c);
            uint8_t hi = c + 1 < K ? encode_at(&sp, g, op, f, xr[c + 1], row, c + 1) : 0;
            q[u] = (uint8_t)((lo & 0xFu) | ((hi & 0xFu) << 4));
        }
    } else {
        const int64_t n = rows * K;
        for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += stride)
            q[e] = encode_at(&sp, g, op, f, x[e], e / K, e % K);
    }
}

/* GRAN_NONE: a plain cast under IEEE RNE (f32 keeps the bits) */
__global__ void cast_kernel(moe_dtype d, const float *__restrict__ x, int64_t n, void *q)
{
    moe_policy p = {MOE_RND_RNE, MOE_NONSAT};
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
        unsigned fl = 0;
        if (d == MOE_BF16) ((uint16_t *)q)[e] = moe_s_round_pack_bf16(x[e], p, &fl);
        else if (d == MOE_F16) ((uint16_t *)q)[e] = moe_s_round_pack_f16(x[e], p, &fl);
        else ((uint32_t *)q)[e] = ((const uint32_t *)x)[e];
    }
}

/* Dequantize: one thread per element; the scale read as the reference's
 * moe_q_scale_at reads it (any layout), one f32 multiply. */
__global__ void dequant_kernel(const moe_quant_spec sp, const moe_q_geom g, const void *__restrict__ q,
                               const void *__restrict__ scale, const float *__restrict__ gsb, float *__restrict__ out)
{
    const int64_t K = g.K, n = g.B * g.R * K;
    const int64_t rb = (K + 1) / 2;
    const bool packed = sp.elem == MOE_E2M1 || sp.elem == MOE_I4;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t row = e / K, c = e % K;
        float v;
        switch (sp.elem) {
        case MOE_F32: v = ((const float *)q)[e]; break;
        case MOE_BF16: v = moe_s_decode_bf16(((const uint16_t *)q)[e]); break;
        case MOE_F16: v = moe_s_decode_f16(((const uint16_t *)q)[e]); break;
        default:
            if (packed) {
                uint8_t byte = ((const uint8_t *)q)[row * rb + c / 2];
                v = moe_qc_decode(sp.elem, (c & 1) ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 0xFu));
            } else {
                v = moe_qc_decode(sp.elem, ((const uint8_t *)q)[e]);
            }
        }
        if (sp.gran != MOE_GRAN_NONE) {
            int64_t b = row / g.R, r = row % g.R;
            int lane;
            int64_t i = moe_qc_scale_index(&sp, &g, b, r / g.rh, c / g.cw, &lane);
            float s;
            if (sp.layout == MOE_SF_UE8M0_PACK4) s = moe_s_decode_e8m0(((const uint8_t *)scale)[i * 4 + lane]);
            else if (sp.scale_dtype == MOE_F32) s = ((const float *)scale)[i];
            else s = moe_qc_code_scale(&sp, ((const uint8_t *)scale)[i], sp.use_global_scale ? gsb[b] : 1.0f);
            v = v * s;
        }
        out[e] = v;
    }
}

size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

/* partial chunks per expert for the whole-expert reduction */
int expert_parts(int64_t n)
{
    int64_t p = (n + 16 * kThreads - 1) / (16 * kThreads);
    return (int)(p < 1 ? 1 : p > 512 ? 512 : p);
}

template <bool FULL>
moe_status expert_reduce(const moe_quant_spec &sp, const moe_q_geom &g, const float *x, qstat *part, float *gs_out,
                         float *global_out, float *f, void *scale)
{
    int64_t n = g.R * g.K;
    int P = expert_parts(n);
    expert_partials_kernel<FULL><<<moe_cu_blocks(g.B * P, 1), kThreads>>>(x, g.B, n, P, part);
    moe_status st = moe_cu_launched("expert_partials_kernel");
    if (st) return st;
    expert_finish_kernel<FULL><<<moe_cu_blocks(g.B, 1), kThreads>>>(sp, g, P, part, gs_out, global_out, f, scale);
    return moe_cu_launched("expert_finish_kernel");
}

template <bool FULL>
moe_status team_groups(const moe_quant_spec &sp, const moe_q_geom &g, const float *x, const float *gsb, float *f,
                       void *scale)
{
    int64_t ngroups = g.B * g.R * g.SC;
    if (g.cw >= 32) {
        team_groups_kernel<FULL, 32><<<moe_cu_blocks(ngroups, kThreads / 32), kThreads>>>(sp, g, x, gsb, f, scale);
    } else if (g.cw >= 16) {
        team_groups_kernel<FULL, 16><<<moe_cu_blocks(ngroups, kThreads / 16), kThreads>>>(sp, g, x, gsb, f, scale);
    } else {
        team_groups_kernel<FULL, 8><<<moe_cu_blocks(ngroups, kThreads / 8), kThreads>>>(sp, g, x, gsb, f, scale);
    }
    return moe_cu_launched("team_groups_kernel");
}

} // namespace

/* ---- quantize -------------------------------------------------------------------------- */
extern "C" moe_status moe_cuda_quantize(const moe_quant_spec *spec, const moe_tensor *x, const moe_tensor *static_scale,
                                        moe_tensor *q_out, moe_tensor *scale_out, moe_tensor *global_scale_out)
{
    moe_status st;
    if ((st = moe_cu_expect_dev(x, "x")) || (st = moe_cu_expect_dev(static_scale, "static_scale")) ||
        (st = moe_cu_expect_dev(q_out, "q_out")) || (st = moe_cu_expect_dev(scale_out, "scale_out")) ||
        (st = moe_cu_expect_dev(global_scale_out, "global_scale_out")))
        return st;
    {
        /* the reference's check scans only the static scale's values */
        moe_tensor mx, ms, mq, msc, mg;
        st = MOE_OK;
        const moe_tensor *px = moe_cu_mirror(x, &mx, 0, &st);
        const moe_tensor *pss = moe_cu_mirror(static_scale, &ms, 1, &st);
        const moe_tensor *pq = moe_cu_mirror(q_out, &mq, 0, &st);
        const moe_tensor *psc = moe_cu_mirror(scale_out, &msc, 0, &st);
        const moe_tensor *pg = moe_cu_mirror(global_scale_out, &mg, 0, &st);
        if (st == MOE_OK) st = moe_ref_check_quantize(spec, px, pss, pq, psc, pg);
        moe_cu_mirror_free(&ms);
        if (st) return st;
    }
    const moe_quant_spec sp = *spec;
    moe_q_geom g;
    moe_q_geometry(spec, "x", x->ndim, x->shape, &g);
    const float *xd = (const float *)x->data;
    const int64_t nel = g.B * g.R * g.K;
    if (sp.gran == MOE_GRAN_NONE) {
        if (nel == 0) return MOE_OK;
        cast_kernel<<<moe_cu_blocks(nel, kThreads), kThreads>>>(sp.elem, xd, nel, q_out->data);
        return moe_cu_launched("cast_kernel");
    }
    const float *stat = static_scale ? (const float *)static_scale->data : NULL;
    const int64_t ngroups = g.B * g.SR * g.SC;
    const bool full = sp.rule == MOE_RULE_INT_MINMAX; /* the one rule reading the signed max / min */
    const int P = expert_parts(g.R * g.K);
    /* scratch: f per group | gs per expert | whole-expert partials */
    size_t off_gs = align16((size_t)ngroups * sizeof(float));
    size_t off_part = off_gs + align16((size_t)g.B * sizeof(float));
    size_t bytes = off_part + (size_t)g.B * P * sizeof(qstat);
    char *scr = (char *)moe_cu_scratch(bytes, &st);
    if (!scr) return st;
    float *f = (float *)scr, *gsb = (float *)(scr + off_gs);
    qstat *part = (qstat *)(scr + off_part);
    void *scale = scale_out->data;
    float *gout = global_scale_out ? (float *)global_scale_out->data : NULL;
    if (scale_out->nbytes) MOE_CU(cudaMemsetAsync(scale, 0, scale_out->nbytes, cudaStreamPerThread)); /* padding */
    if (g.B == 0) return MOE_OK;

    if (sp.use_global_scale) { /* NVFP4: gs per expert first */
        if (stat) {
            static_global_kernel<<<moe_cu_blocks(g.B, kThreads), kThreads>>>(stat, g.B, gsb, gout);
            st = moe_cu_launched("static_global_kernel");
        } else {
            st = expert_reduce<false>(sp, g, xd, part, gsb, gout, f, scale);
        }
        if (st) return st;
    }
    if (stat && sp.rule != MOE_RULE_NVFP4) {
        if (ngroups) {
            static_groups_kernel<<<moe_cu_blocks(ngroups, kThreads), kThreads>>>(sp, g, stat, f, scale);
            st = moe_cu_launched("static_groups_kernel");
        }
    } else if (sp.gran == MOE_GRAN_TENSOR) {
        st = full ? expert_reduce<true>(sp, g, xd, part, NULL, NULL, f, scale)
                  : expert_reduce<false>(sp, g, xd, part, NULL, NULL, f, scale);
    } else if (sp.gran == MOE_GRAN_BLOCK) {
        if (ngroups) {
            if (full) tile_groups_kernel<true><<<moe_cu_blocks(ngroups, 1), kThreads>>>(sp, g, xd, f, scale);
            else tile_groups_kernel<false><<<moe_cu_blocks(ngroups, 1), kThreads>>>(sp, g, xd, f, scale);
            st = moe_cu_launched("tile_groups_kernel");
        }
    } else if (ngroups) { /* ROW, GROUP, MX32, NV16 */
        const float *gs = sp.use_global_scale ? gsb : NULL;
        st = full ? team_groups<true>(sp, g, xd, gs, f, scale) : team_groups<false>(sp, g, xd, gs, f, scale);
    }
    if (st) return st;
    if (nel == 0) return MOE_OK;
    moe_quant_op op = stat && sp.rule != MOE_RULE_NVFP4 ? MOE_QOP_DIV : sp.q_op;
    int64_t units = (sp.elem == MOE_E2M1 || sp.elem == MOE_I4) ? g.B * g.R * ((g.K + 1) / 2) : nel;
    encode_kernel<<<moe_cu_blocks(units, kThreads), kThreads>>>(sp, g, op, xd, f, (uint8_t *)q_out->data);
    return moe_cu_launched("encode_kernel");
}

/* ---- dequantize ------------------------------------------------------------------------ */
extern "C" moe_status moe_cuda_dequantize(const moe_quant_spec *spec, const moe_tensor *q, const moe_tensor *scale,
                                          const moe_tensor *global_scale, moe_tensor *x_out)
{
    moe_status st;
    if ((st = moe_cu_expect_dev(q, "q")) || (st = moe_cu_expect_dev(scale, "scale")) ||
        (st = moe_cu_expect_dev(global_scale, "global_scale")) || (st = moe_cu_expect_dev(x_out, "x_out")))
        return st;
    {
        /* the reference's check reads no tensor's values */
        moe_tensor mq, ms, mg, mo;
        st = MOE_OK;
        const moe_tensor *pq = moe_cu_mirror(q, &mq, 0, &st);
        const moe_tensor *ps = moe_cu_mirror(scale, &ms, 0, &st);
        const moe_tensor *pg = moe_cu_mirror(global_scale, &mg, 0, &st);
        const moe_tensor *po = moe_cu_mirror(x_out, &mo, 0, &st);
        if (st == MOE_OK) st = moe_ref_check_dequantize(spec, pq, ps, pg, po);
        if (st) return st;
    }
    const moe_quant_spec sp = *spec;
    moe_q_geom g;
    moe_q_geometry(spec, "q", q->ndim, q->shape, &g);
    const int64_t nel = g.B * g.R * g.K;
    if (nel == 0) return MOE_OK;
    const void *sd = sp.gran != MOE_GRAN_NONE ? scale->data : NULL;
    const float *gsb = sp.use_global_scale ? (const float *)global_scale->data : NULL;
    dequant_kernel<<<moe_cu_blocks(nel, kThreads), kThreads>>>(sp, g, q->data, sd, gsb, (float *)x_out->data);
    return moe_cu_launched("dequant_kernel");
}
