/* The fast experts path (fast.h): layout, gather, activation, combine and
 * the fused forward around the tensor-core GEMM of fast_gemm.cuh. */
#include <string.h>
#include "cuda_internal.h"
#include "fast.h"
#include "fast_gemm.cuh"
#include "reference/quant_core.h"
#include "moe/status.h"

namespace {

const int ALIGN_THREADS = 1024; /* one CTA: E <= 1024 counters in shared memory */

size_t up256(size_t b) { return (b + 255) & ~(size_t)255; }

/* a block-wide exclusive scan of one int per thread (blockDim 1024) */
__device__ int block_excl_scan(int v, int *warp_tot, int *total)
{
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    int x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        int y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) warp_tot[w] = x;
    __syncthreads();
    if (w == 0) {
        int t = warp_tot[lane];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            int y = __shfl_up_sync(0xffffffffu, t, o);
            if (lane >= o) t += y;
        }
        warp_tot[lane] = t; /* inclusive over warps */
        if (lane == 31) *total = t;
    }
    __syncthreads();
    return x - v + (w ? warp_tot[w - 1] : 0);
}

/* Counting sort of the slots by expert in one CTA: counts by shared
 * atomics, a scan of the padded block counts, then each slot takes the next
 * free row of its expert (atomic order; where a row lands changes no
 * result, fast_gemm.cuh computes every row alone). Ids outside [0, E) are
 * left out (row_of_slot -1). */
__global__ void __launch_bounds__(ALIGN_THREADS) align_kernel(const int32_t *ids, int n, int E, int bm,
                                                               moe_cuda_fx_layout L)
{
    extern __shared__ int sh[]; /* cnt[E], fill[E], boff[E] */
    __shared__ int warp_tot[32], total;
    int *cnt = sh, *fill = sh + E, *boff = sh + 2 * E;
    const int tid = threadIdx.x;
    for (int e = tid; e < E; e += blockDim.x) cnt[e] = 0, fill[e] = 0;
    __syncthreads();
    for (int i = tid; i < n; i += blockDim.x) {
        const int e = ids[i];
        if (e >= 0 && e < E) atomicAdd(&cnt[e], 1);
    }
    __syncthreads();
    const int c = tid < E ? cnt[tid] : 0, nb = (c + bm - 1) / bm;
    const int off = block_excl_scan(nb, warp_tot, &total);
    if (tid < E) {
        boff[tid] = off;
        L.counts[tid] = c;
        L.offsets[tid] = off * bm;
        for (int b = 0; b < nb; b++) L.block_expert[off + b] = tid;
        for (int r = (off * bm) + c; r < (off + nb) * bm; r++) L.sorted[r] = -1;
    }
    if (tid == 0) L.offsets[E] = total * bm, *L.num_blocks = total;
    __syncthreads();
    for (int i = tid; i < n; i += blockDim.x) {
        const int e = ids[i];
        int r = -1;
        if (e >= 0 && e < E) {
            r = boff[e] * bm + atomicAdd(&fill[e], 1);
            L.sorted[r] = i;
        }
        L.row_of_slot[i] = r;
    }
}

/* 16-byte vectors: H % 8 == 0 (2-byte elements) */
__global__ void gather_kernel(const uint4 *x, int hv, int topk, const int32_t *sorted, int64_t rows, uint4 *xs)
{
    for (int64_t v = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; v < rows * hv; v += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = v / hv, c = v % hv;
        const int s = sorted[r];
        xs[v] = s >= 0 ? x[(int64_t)(s / topk) * hv + c] : make_uint4(0, 0, 0, 0);
    }
}

template <class T>
__global__ void act_kernel(const T *y1, int64_t rows, int I, moe_act_params act, T *h)
{
    for (int64_t v = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; v < rows * I; v += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = v / I, i = v % I;
        h[v] = fx::tc<T>::rnd(moe_act_elem(&act, 1, fx::tc<T>::dt, y1, r, i, I, 0, NULL, NULL, NULL));
    }
}

/* out[t, c..c+7] = sum_j w * y[row_of_slot[t*topk + j]], j ascending, f32 from +0 */
template <class T>
__global__ void combine_kernel(const T *y, const int32_t *row_of_slot, const float *w, int M, int topk, int H, T *out)
{
    const int hv = H / 8;
    asm volatile("griddepcontrol.wait;\n" ::: "memory"); /* y: the GEMM just before (when launched dependent) */
    for (int64_t v = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; v < (int64_t)M * hv; v += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = v / hv, c = (v % hv) * 8;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int j = 0; j < topk; j++) {
            const int r = row_of_slot[t * topk + j];
            if (r < 0) continue;
            const float wj = w ? w[t * topk + j] : 1.0f;
            uint4 raw = *(const uint4 *)(y + (int64_t)r * H + c);
            const T *e8 = (const T *)&raw;
#pragma unroll
            for (int q = 0; q < 8; q++) acc[q] = acc[q] + (w ? wj * fx::tc<T>::f32(e8[q]) : fx::tc<T>::f32(e8[q]));
        }
        uint4 o;
        T *o8 = (T *)&o;
#pragma unroll
        for (int q = 0; q < 8; q++) o8[q] = fx::tc<T>::rnd(acc[q]);
        *(uint4 *)(out + t * H + c) = o;
    }
}

template <class T> __global__ void convert_kernel(const float *a, int64_t n, T *out)
{
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = fx::tc<T>::rnd(a[i]);
}

/* fp8_wchannel_atoken's activation quantization, one CTA per row: the
 * reference's row statistics (max |x| over the non-NaN elements, a NaN
 * flag; the maximum is exact in any order) and its rule and element
 * encoding (quant_core.h), so q and the scale are the reference's bits.
 * Rows past *num_blocks * bm (never written by GEMM1) are skipped. */
__global__ void quant_rows_kernel(const __nv_bfloat16 *x, int cols, const int32_t *num_blocks, int bm,
                                  moe_quant_spec spec, uint8_t *q, float *scale)
{
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    const int64_t r = blockIdx.x;
    if (num_blocks && r >= (int64_t)*num_blocks * bm) return;
    const __nv_bfloat16 *xr = x + r * cols;
    float ai = 0.0f, mx = -MOE_M_INF, mn = MOE_M_INF;
    int nan = 0;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const float v = __bfloat162float(xr[c]);
        if (v != v) {
            nan = 1;
            continue;
        }
        ai = fmaxf(ai, fabsf(v)), mx = fmaxf(mx, v), mn = fminf(mn, v);
    }
    __shared__ float s_ai[32], s_mx[32], s_mn[32];
    __shared__ int s_nan[32];
    for (int o = 16; o > 0; o >>= 1) {
        ai = fmaxf(ai, __shfl_xor_sync(0xffffffffu, ai, o));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        mn = fminf(mn, __shfl_xor_sync(0xffffffffu, mn, o));
        nan |= __shfl_xor_sync(0xffffffffu, nan, o);
    }
    const int w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if ((threadIdx.x & 31) == 0) s_ai[w] = ai, s_mx[w] = mx, s_mn[w] = mn, s_nan[w] = nan;
    __syncthreads();
    ai = 0.0f, mx = -MOE_M_INF, mn = MOE_M_INF, nan = 0;
    for (int i = 0; i < nw; i++) ai = fmaxf(ai, s_ai[i]), mx = fmaxf(mx, s_mx[i]), mn = fminf(mn, s_mn[i]), nan |= s_nan[i];
    moe_q_stats st;
    st.amax_prop = st.amax_ign = ai, st.vmax = mx, st.vmin = mn;
    if (nan) st.amax_prop = st.vmax = st.vmin = moe_u32_as_f32(0x7FC00000u);
    moe_q_group grp;
    moe_qc_rule_dynamic(&spec, &st, 1.0f, &grp);
    if (threadIdx.x == 0) scale[r] = grp.scale;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        q[r * cols + c] = moe_qc_encode(MOE_E4M3, moe_qc_step(&spec, &grp, __bfloat162float(xr[c])));
}

unsigned grid_for(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    if (b > 132 * 32) b = 132 * 32; /* grid-stride beyond a few waves */
    return (unsigned)b;
}

cudaStream_t S(void *s) { return (cudaStream_t)s; }

/* a launch, as a programmatic dependent of the previous kernel when pdl
 * (the kernel waits with griddepcontrol.wait before reading its inputs) */
template <class... KA, class... A>
cudaError_t launch_ex(void (*k)(KA...), unsigned grid, unsigned block, cudaStream_t s, bool pdl, A... args)
{
    cudaLaunchConfig_t lc = {};
    lc.gridDim = dim3(grid), lc.blockDim = dim3(block), lc.stream = s;
    cudaLaunchAttribute at;
    at.id = cudaLaunchAttributeProgrammaticStreamSerialization, at.val.programmaticStreamSerializationAllowed = 1;
    lc.attrs = &at, lc.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&lc, k, static_cast<KA>(args)...);
}

moe_status combine(const void *y, const moe_cuda_fx_layout *L, const float *topk_w, int M, int topk, int H, moe_dtype dt,
                   void *out, void *stream, bool pdl)
{
    if (H % 8) return moe_fail(MOE_ERR_UNSUPPORTED, "fx_combine: H (%d) must be a multiple of 8", H);
    const int64_t n = (int64_t)M * (H / 8);
    cudaError_t ce;
    if (dt == MOE_BF16)
        ce = launch_ex(combine_kernel<__nv_bfloat16>, grid_for(n, 256), 256, S(stream), pdl, (const __nv_bfloat16 *)y,
                       (const int32_t *)L->row_of_slot, topk_w, M, topk, H, (__nv_bfloat16 *)out);
    else if (dt == MOE_F16)
        ce = launch_ex(combine_kernel<__half>, grid_for(n, 256), 256, S(stream), pdl, (const __half *)y,
                       (const int32_t *)L->row_of_slot, topk_w, M, topk, H, (__half *)out);
    else return moe_fail(MOE_ERR_UNSUPPORTED, "fx_combine: dtype must be bf16 or f16");
    return ce == cudaSuccess ? MOE_OK : moe_cu_fail(ce, "fx combine_kernel");
}

/* The tile configurations (NOTES.md: why these). Decode: 16-row blocks,
 * 4 (BN 128) or 2 (BN 64, when too few CTAs would stream the weights) warps
 * side by side along N. Prefill: 64-row blocks of 8 warps, 128 x 256
 * blocks of two warpgroups. */
enum Cfg { CFG_16x128 = 0, CFG_16x64, CFG_64x128, CFG_128x256, CFG_COUNT };
const int CFG_BM[CFG_COUNT] = {16, 16, 64, 128}, CFG_BN[CFG_COUNT] = {128, 64, 128, 256};

/* 16 and 64-row blocks: mma.sync; 128-row blocks: wgmma warpgroups. Decode
 * tiles keep 6 / 8 stages of weights in flight (a CTA's k loop is a chain
 * of memory round trips: 4 stages left DeepSeek M = 16 at 90% of the read
 * bandwidth, 6 / 8 at 95%); a 64 x 256 wgmma tile for the middle range lost
 * to the 64 x 128 mma.sync one (NOTES.md, v5). */
#define FX_DISPATCH(cfgid, EPI, F, ...)                                                                    \
    (cfgid == CFG_16x128   ? F<__nv_bfloat16, 16, 128, 1, 4, 6, EPI, false>(__VA_ARGS__)                  \
     : cfgid == CFG_16x64  ? F<__nv_bfloat16, 16, 64, 1, 2, 8, EPI, false>(__VA_ARGS__)                   \
     : cfgid == CFG_64x128 ? F<__nv_bfloat16, 64, 128, 2, 4, 4, EPI, false>(__VA_ARGS__)                  \
                           : F<__nv_bfloat16, 128, 256, 8, 1, 4, EPI, true>(__VA_ARGS__))

/* fp8 (e4m3 codes, mma.sync m16n8k32): the decode tiles and the 64-row
 * tile for everything above (no e4m3 wgmma tile yet) */
#define FX_DISPATCH_FP8(cfgid, EPI, F, ...)                                                                \
    (cfgid == CFG_16x128  ? F<__nv_fp8_e4m3, 16, 128, 1, 4, 6, EPI, false>(__VA_ARGS__)                   \
     : cfgid == CFG_16x64 ? F<__nv_fp8_e4m3, 16, 64, 1, 2, 8, EPI, false>(__VA_ARGS__)                    \
                          : F<__nv_fp8_e4m3, 64, 128, 2, 4, 4, EPI, false>(__VA_ARGS__))
#define FX_DISPATCH_ANY(fp8, cfgid, EPI, F, ...)                                                          \
    ((fp8) ? FX_DISPATCH_FP8(cfgid, EPI, F, __VA_ARGS__) : FX_DISPATCH(cfgid, EPI, F, __VA_ARGS__))

int pick_bn(int touched_est, int n_cols_per128) /* CFG for a decode GEMM */
{
    return (int64_t)touched_est * n_cols_per128 < 2 * 132 ? CFG_16x64 : CFG_16x128;
}

struct fx_ws {
    moe_cuda_fx_layout L;
    void *h, *y;
    float *acc;
    uint8_t *xq, *hq; /* fp8: quantized x [M, H] and h [cap, I] */
    float *sx, *sh;   /* their row scales */
};

int is_fp8(const moe_cuda_fx_problem *p) { return p->scheme == MOE_SCHEME_FP8_WCHANNEL_ATOKEN; }

/* bytes of the workspace; with ws, its pieces too */
size_t carve(const moe_cuda_fx_problem *p, int bm, void *ws, fx_ws *w)
{
    const size_t cap = (size_t)moe_cuda_fx_layout_cap(p->M, p->topk, p->E, bm);
    size_t off = up256(moe_cuda_fx_layout_bytes(p->M, p->topk, p->E, bm));
    char *c = (char *)ws;
    auto take = [&](size_t bytes) { void *q = c ? c + off : NULL; off += up256(bytes); return q; };
    if (ws) moe_cuda_fx_layout_carve(ws, p->M, p->topk, p->E, bm, &w->L);
    void *h = take(cap * p->I * 2);
    void *y = p->atomic ? NULL : take(cap * p->H * 2);
    void *acc = p->atomic ? take((size_t)p->M * p->H * 4) : NULL;
    void *xq = NULL, *hq = NULL, *sx = NULL, *sh = NULL;
    if (is_fp8(p)) xq = take((size_t)p->M * p->H), sx = take((size_t)p->M * 4), hq = take(cap * p->I), sh = take(cap * 4);
    if (ws) {
        w->h = h, w->y = y, w->acc = (float *)acc;
        w->xq = (uint8_t *)xq, w->hq = (uint8_t *)hq, w->sx = (float *)sx, w->sh = (float *)sh;
    }
    return off;
}

} // namespace

extern "C" int moe_cuda_fx_layout_cap(int M, int topk, int E, int bm)
{
    const int64_t n = (int64_t)M * topk, pads = (n < E ? n : E) * (int64_t)(bm - 1);
    const int64_t rows = n + pads;
    return (int)((rows + bm - 1) / bm * bm);
}

extern "C" size_t moe_cuda_fx_layout_bytes(int M, int topk, int E, int bm)
{
    const size_t cap = (size_t)moe_cuda_fx_layout_cap(M, topk, E, bm), n = (size_t)M * topk;
    return up256(cap * 4) + up256(cap / bm * 4) + up256((size_t)E * 4) + up256((size_t)(E + 1) * 4) + up256(n * 4) +
           up256(4);
}

extern "C" void moe_cuda_fx_layout_carve(void *ws, int M, int topk, int E, int bm, moe_cuda_fx_layout *L)
{
    char *c = (char *)ws;
    const size_t cap = (size_t)moe_cuda_fx_layout_cap(M, topk, E, bm), n = (size_t)M * topk;
    L->cap = (int)cap, L->nblk = (int)(cap / bm);
    L->sorted = (int32_t *)c, c += up256(cap * 4);
    L->block_expert = (int32_t *)c, c += up256(cap / bm * 4);
    L->counts = (int32_t *)c, c += up256((size_t)E * 4);
    L->offsets = (int32_t *)c, c += up256((size_t)(E + 1) * 4);
    L->row_of_slot = (int32_t *)c, c += up256(n * 4);
    L->num_blocks = (int32_t *)c;
}

extern "C" moe_status moe_cuda_fx_align(const int32_t *topk_ids, int M, int topk, int E, int bm,
                                        const moe_cuda_fx_layout *L, void *stream)
{
    if (E < 1 || E > ALIGN_THREADS) return moe_fail(MOE_ERR_UNSUPPORTED, "fx_align: E = %d, the rule is 1 <= E <= %d", E, ALIGN_THREADS);
    if (bm < 1) return moe_fail(MOE_ERR_INVALID_ARG, "fx_align: bm = %d, must be >= 1", bm);
    align_kernel<<<1, ALIGN_THREADS, 3 * E * sizeof(int), S(stream)>>>(topk_ids, M * topk, E, bm, *L);
    return moe_cu_launched("fx align_kernel");
}

extern "C" moe_status moe_cuda_fx_gather(const void *x, moe_dtype dt, int H, int topk, const moe_cuda_fx_layout *L,
                                         int rows, void *xs, void *stream)
{
    if ((dt != MOE_BF16 && dt != MOE_F16) || H % 8)
        return moe_fail(MOE_ERR_UNSUPPORTED, "fx_gather: dtype must be bf16/f16 and H (%d) a multiple of 8", H);
    const int64_t n = (int64_t)rows * (H / 8);
    gather_kernel<<<grid_for(n, 256), 256, 0, S(stream)>>>((const uint4 *)x, H / 8, topk, L->sorted, rows, (uint4 *)xs);
    return moe_cu_launched("fx gather_kernel");
}

extern "C" moe_status moe_cuda_fx_act_rows(const void *y1, int rows, int I, const moe_act_params *act, moe_dtype dt,
                                           void *h, void *stream)
{
    if (!act || !moe_act_is_gated(act->act) || act->layout != MOE_LAYOUT_GATE_UP || act->swiglu_alpha ||
        act->swiglu_beta || act->swiglu_limit)
        return moe_fail(MOE_ERR_UNSUPPORTED, "fx_act_rows: act must be gated, layout gate_up, no per-expert tensors");
    const int64_t n = (int64_t)rows * I;
    if (dt == MOE_BF16)
        act_kernel<__nv_bfloat16><<<grid_for(n, 256), 256, 0, S(stream)>>>((const __nv_bfloat16 *)y1, rows, I, *act,
                                                                             (__nv_bfloat16 *)h);
    else if (dt == MOE_F16)
        act_kernel<__half><<<grid_for(n, 256), 256, 0, S(stream)>>>((const __half *)y1, rows, I, *act, (__half *)h);
    else return moe_fail(MOE_ERR_UNSUPPORTED, "fx_act_rows: dtype must be bf16 or f16");
    return moe_cu_launched("fx act_kernel");
}

extern "C" moe_status moe_cuda_fx_combine(const void *y, const moe_cuda_fx_layout *L, const float *topk_w, int M, int topk,
                                          int H, moe_dtype dt, void *out, void *stream)
{
    return combine(y, L, topk_w, M, topk, H, dt, out, stream, false);
}

extern "C" moe_status moe_cuda_fx_plan_make(const moe_cuda_fx_problem *p, moe_cuda_fx_plan *plan)
{
    if (!p || !plan) return moe_fail(MOE_ERR_INVALID_ARG, "fx_plan_make: problem and plan must not be NULL");
    if (p->M < 1 || p->E < 1 || p->topk < 1 || p->topk > p->E || p->H < 1 || p->I < 1)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx problem: M %d, E %d, topk %d, H %d, I %d: the rule is all >= 1, topk <= E",
                        p->M, p->E, p->topk, p->H, p->I);
    if (p->scheme != MOE_SCHEME_BF16 && p->scheme != MOE_SCHEME_FP8_WCHANNEL_ATOKEN)
        return moe_fail(MOE_ERR_UNSUPPORTED,
                        "fx problem: scheme %s: the fused fast path implements bf16 and fp8_wchannel_atoken only",
                        moe_scheme_name(p->scheme));
    const int mult = is_fp8(p) ? 16 : 8;
    if (p->H % mult || p->I % mult)
        return moe_fail(MOE_ERR_UNSUPPORTED, "fx problem: H %d and I %d must be multiples of %d (16-byte row copies)", p->H,
                        p->I, mult);
    if (p->E > ALIGN_THREADS) return moe_fail(MOE_ERR_UNSUPPORTED, "fx problem: E %d > %d", p->E, ALIGN_THREADS);
    if (!moe_act_is_gated(p->act.act) || p->act.swiglu_alpha || p->act.swiglu_beta || p->act.swiglu_limit)
        return moe_fail(MOE_ERR_UNSUPPORTED, "fx problem: act must be gated with no per-expert tensors");
    if ((int64_t)p->M * p->topk > (1 << 24))
        return moe_fail(MOE_ERR_UNSUPPORTED, "fx problem: M * topk %lld over 2^24 slots", (long long)p->M * p->topk);
    memset(plan, 0, sizeof *plan);
    const int64_t slots = (int64_t)p->M * p->topk, touched = slots < p->E ? slots : p->E;
    const int64_t avg = (slots + touched - 1) / touched;
    int c1, c2;
    if (avg <= 16) c1 = pick_bn((int)touched, (2 * p->I + 127) / 128), c2 = pick_bn((int)touched, (p->H + 127) / 128);
    else if (avg <= 64 || is_fp8(p)) c1 = c2 = CFG_64x128;
    else c1 = c2 = CFG_128x256;
    plan->bm1 = CFG_BM[c1], plan->bn1 = CFG_BN[c1] / 2, plan->bm2 = CFG_BM[c2], plan->bn2 = CFG_BN[c2];
    /* the next kernel may start while GEMM1 runs only when GEMM1's CTAs fit
     * in one wave of two per SM (NOTES.md, v7): with more waves its waiting
     * CTAs would hold slots GEMM1 still needs */
    plan->trigger_early = avg <= 16 && touched * ((p->I + plan->bn1 - 1) / plan->bn1) <= 2 * 132;
    const int bm = plan->bm1;
    plan->max_blocks = (int)((slots + bm - 1) / bm + touched); /* sum of ceil(c_e / bm) over touched experts */
    const int cap = moe_cuda_fx_layout_cap(p->M, p->topk, p->E, bm);
    if (plan->max_blocks > cap / bm) plan->max_blocks = cap / bm;
    plan->launches = (p->atomic ? 5 : 4) + (is_fp8(p) ? 2 : 0);
    plan->workspace = carve(p, bm, NULL, NULL);
    /* raise the shared-memory limit of the kernels this plan launches */
    const int f8 = is_fp8(p);
    cudaError_t ce = FX_DISPATCH_ANY(f8, c1, fx::EPI_GATED, fx::gemm_prepare, );
    if (ce == cudaSuccess) ce = p->atomic ? FX_DISPATCH_ANY(f8, c2, fx::EPI_WATOMIC, fx::gemm_prepare, )
                                          : FX_DISPATCH_ANY(f8, c2, fx::EPI_WSTORE, fx::gemm_prepare, );
    if (ce != cudaSuccess) return moe_cu_fail(ce, "cudaFuncSetAttribute (fx gemm)");
    return MOE_OK;
}

static int cfg_of(int bm, int bn)
{
    for (int c = 0; c < CFG_COUNT; c++)
        if (CFG_BM[c] == bm && CFG_BN[c] == bn) return c;
    return -1;
}

extern "C" moe_status moe_cuda_fx_forward(const moe_cuda_fx_problem *p, const moe_cuda_fx_plan *plan,
                                          const moe_cuda_fx_args *a, void *workspace, void *stream)
{
    if (!p || !plan || !a || !workspace)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: problem, plan, args and workspace must not be NULL");
    const int c1 = cfg_of(plan->bm1, plan->bn1 * 2), c2 = cfg_of(plan->bm2, plan->bn2), f8 = is_fp8(p);
    if (c1 < 0 || c2 < 0 || plan->bm1 != plan->bm2) return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: plan not made by fx_plan_make");
    if (f8 && (!a->w1_scale || !a->w2_scale))
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_forward: fp8_wchannel_atoken needs w1_scale and w2_scale");
    fx_ws w;
    carve(p, plan->bm1, workspace, &w);
    moe_quant_spec as;
    if (f8) moe_scheme_spec(p->scheme, MOE_OPERAND_ACT, &as);
    if (p->atomic) MOE_CU(cudaMemsetAsync(w.acc, 0, (size_t)p->M * p->H * 4, S(stream)));
    cudaError_t ce;
    if (f8) { /* x per token, before the align (which does not read it) */
        ce = launch_ex(quant_rows_kernel, (unsigned)p->M, 256, S(stream), false, (const __nv_bfloat16 *)a->x, p->H,
                       (const int32_t *)NULL, 1, as, w.xq, w.sx);
        if (ce != cudaSuccess) return moe_cu_fail(ce, "fx quant_rows_kernel (x)");
    }
    moe_status st = moe_cuda_fx_align(a->topk_ids, p->M, p->topk, p->E, plan->bm1, &w.L, stream);
    if (st) return st;
    moe_act_params act = p->act;
    act.layout = MOE_LAYOUT_GATE_UP;
    fx::gemm_params g1;
    memset(&g1, 0, sizeof g1);
    g1.a = f8 ? (const void *)w.xq : a->x, g1.a_gather = 1, g1.a_div = p->topk;
    g1.sorted = w.L.sorted, g1.block_expert = w.L.block_expert, g1.num_blocks = w.L.num_blocks;
    g1.w = a->w1, g1.N = 2 * p->I, g1.K = p->H, g1.I = p->I, g1.out = w.h, g1.act = act, g1.topk = p->topk;
    if (f8) g1.a_scale = w.sx, g1.w_scale = a->w1_scale;
    /* GEMM1, GEMM2 and the combine are programmatic dependents of the
     * kernel before each (NOTES.md, v7): their launch latency hides under
     * the previous kernel, and GEMM2 streams its first weight tiles while
     * GEMM1 (fp8: the quantization of h) finishes; decode GEMM1 lets the
     * next kernel start early */
    g1.pdl_trigger = plan->trigger_early;
    ce = FX_DISPATCH_ANY(f8, c1, fx::EPI_GATED, fx::gemm_launch, g1, plan->max_blocks, p->I, S(stream), true);
    if (ce != cudaSuccess) return moe_cu_fail(ce, "fx gemm1 launch");
    if (f8) { /* h per padded row, rows of the used blocks only */
        ce = launch_ex(quant_rows_kernel, (unsigned)w.L.cap, 256, S(stream), true, (const __nv_bfloat16 *)w.h, p->I,
                       (const int32_t *)w.L.num_blocks, plan->bm1, as, w.hq, w.sh);
        if (ce != cudaSuccess) return moe_cu_fail(ce, "fx quant_rows_kernel (h)");
    }
    fx::gemm_params g2 = g1;
    g2.a = f8 ? (const void *)w.hq : w.h, g2.a_gather = 0, g2.a_div = 1, g2.w = a->w2, g2.N = p->H, g2.K = p->I, g2.I = 0;
    g2.topk_w = a->topk_w, g2.pdl_trigger = 0, g2.pdl_prefetch = 1;
    if (f8) g2.a_scale = w.sh, g2.w_scale = a->w2_scale;
    if (p->atomic) {
        g2.acc_out = w.acc; /* zeroed before the align */
        ce = FX_DISPATCH_ANY(f8, c2, fx::EPI_WATOMIC, fx::gemm_launch, g2, plan->max_blocks, p->H, S(stream), true);
        if (ce != cudaSuccess) return moe_cu_fail(ce, "fx gemm2 launch");
        const int64_t n = (int64_t)p->M * p->H;
        ce = launch_ex(convert_kernel<__nv_bfloat16>, grid_for(n, 256), 256, S(stream), true, (const float *)w.acc, n,
                       (__nv_bfloat16 *)a->out);
        return ce == cudaSuccess ? MOE_OK : moe_cu_fail(ce, "fx convert_kernel");
    }
    g2.out = w.y;
    ce = FX_DISPATCH_ANY(f8, c2, fx::EPI_WSTORE, fx::gemm_launch, g2, plan->max_blocks, p->H, S(stream), true);
    if (ce != cudaSuccess) return moe_cu_fail(ce, "fx gemm2 launch");
    return combine(w.y, &w.L, NULL, p->M, p->topk, p->H, MOE_BF16, a->out, stream, true);
}
