/* moe_cuda_fx_tile_weights: w1 / w2 re-laid once in the TMA boxes' tiles
 * (fast_tiled.cuh for the layout and why). A copy: every byte of a real
 * row and k lands unchanged, the rest is zeros, which the row-major map's
 * out-of-bounds boxes read as well. */
#include <stdint.h>
#include "cuda_internal.h"
#include "fast.h"
#include "fast_tiled.cuh"
#include "moe/dtype.h"
#include "moe/quant.h"

namespace {

/* the problem's weight element in bytes, from the scheme table (reference/quant_scheme.c): 2 (bf16) or 1
 * (8-bit codes); 0 for the 4-bit codes, two a byte, which no TMA box reads */
int elem_bytes(moe_scheme sc)
{
    moe_quant_spec ws;
    const moe_dtype_info *di = moe_scheme_spec(sc, MOE_OPERAND_WEIGHT, &ws) == MOE_OK ? moe_dtype_get(ws.elem) : NULL;
    return di && (di->bits == 8 || di->bits == 16) ? di->bits / 8 : 0;
}

struct geom {
    int gated, N, T;     /* rows an expert, tiles an expert */
    int64_t kb, KT, E;   /* bytes a row, k tiles, experts */
};

/* the geometry of w1 (which 1) or w2 (2); 0 with a status where the problem has none */
moe_status geom_of(const moe_cuda_fx_problem *p, int which, geom *g)
{
    moe_cuda_fx_plan plan; /* the problem's rules (sizes, scheme, multiples) are plan_make's */
    if (!p) return moe_fail(MOE_ERR_INVALID_ARG, "fx_tile_weights: problem must not be NULL");
    if (which != 1 && which != 2)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_tile_weights: which %d: the rule is 1 (w1) or 2 (w2)", which);
    moe_status st = moe_cuda_fx_plan_make(p, &plan);
    if (st) return st;
    const int es = elem_bytes(p->scheme);
    if (!es)
        return moe_fail(MOE_ERR_UNSUPPORTED, "fx_tile_weights: scheme %s: its weights are not read by TMA boxes",
                        moe_scheme_name(p->scheme));
    g->gated = which == 1, g->N = which == 1 ? 2 * p->I : p->H, g->T = fx::tiled_count(g->gated, g->N);
    g->kb = (int64_t)(which == 1 ? p->H : p->I) * es, g->KT = (g->kb + 127) / 128, g->E = p->E;
    return MOE_OK;
}

/* one 16-byte chunk a thread: chunk c of the tiled buffer, from its row of w or zeros */
__global__ void tile_kernel(const uint4 *w, uint4 *dst, geom g, int64_t n)
{
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < n; c += (int64_t)gridDim.x * blockDim.x) {
        const int b16 = (int)(c & 7), r = (int)((c >> 3) & 127);
        int64_t q = c >> 10;
        const int64_t kt = q % g.KT;
        q /= g.KT;
        const int t = (int)(q % g.T);
        const int64_t e = q / g.T, kb = kt * 128 + b16 * 16;
        const int row = fx::tiled_row(g.gated, g.N, t, r);
        uint4 v = make_uint4(0, 0, 0, 0);
        if (row >= 0 && kb < g.kb) v = w[((e * g.N + row) * g.kb + kb) / 16];
        dst[c] = v;
    }
}

} // namespace

extern "C" size_t moe_cuda_fx_tiled_bytes(const moe_cuda_fx_problem *p, int which)
{
    geom g;
    if (geom_of(p, which, &g)) return 0;
    return (size_t)g.E * (size_t)g.T * (size_t)g.KT * 128 * 128;
}

extern "C" moe_status moe_cuda_fx_tile_weights(const moe_cuda_fx_problem *p, int which, const void *w, void *dst,
                                               void *stream)
{
    geom g;
    moe_status st = geom_of(p, which, &g);
    if (st) return st;
    if (!w || !dst || (uintptr_t)w % 16 || (uintptr_t)dst % 16)
        return moe_fail(MOE_ERR_INVALID_ARG, "fx_tile_weights: w (%p) and dst (%p) must be non-NULL and 16-byte aligned", w,
                        dst);
    const int64_t n = g.E * g.T * g.KT * 1024;
    tile_kernel<<<moe_cu_blocks(n, 256), 256, 0, (cudaStream_t)stream>>>((const uint4 *)w, (uint4 *)dst, g, n);
    return moe_cu_launched("fx tile_kernel");
}
