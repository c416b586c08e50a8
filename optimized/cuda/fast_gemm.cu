/* grouped_gemm of moe_ops_cuda_fast: the tensor-core kernel of
 * fast_gemm.cuh for unscaled bf16 / f16 operands (products exact, f32
 * accumulation in the tensor cores' order: BOUNDED by moe_gemm_bound,
 * tolerance row cuda-fast.grouped_gemm); every other scheme, and shapes
 * the 16-byte copies cannot take (K % 8, unaligned data, E > 1024), runs
 * the conformance kernel, which is EXACT and so within any bound.
 *
 * The rows of out are the rows of a: moe_cuda_fx_align sorts them by
 * row_expert (topk 1; rows of expert -1 are left out and stay zero from the
 * memset), the kernel gathers A through that layout and stores each row
 * back at its own index. */
#include <string.h>
#include "cuda_internal.h"
#include "fast.h"
#include "fast_gemm.cuh"

namespace {

int aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

int eligible(const moe_gemm_args *g, const moe_tensor *out)
{
    if (!g || !out || !g->a || !g->w || !g->row_expert) return 0;
    if (g->scheme != MOE_SCHEME_BF16 && g->scheme != MOE_SCHEME_F16) return 0;
    if (g->a_scale || g->w_scale || g->a_global || g->w_global) return 0;
    const moe_dtype dt = g->scheme == MOE_SCHEME_BF16 ? MOE_BF16 : MOE_F16;
    if (g->a->dtype != dt || g->w->dtype != dt || g->a->ndim != 2 || g->w->ndim != 3) return 0;
    if (out->dtype != MOE_F32 && out->dtype != dt) return 0;
    const int64_t P = g->a->shape[0], K = g->a->shape[1], E = g->w->shape[0];
    if (P < 1 || K < 8 || K % 8 || E < 1 || E > 1024 || P > (1 << 24)) return 0;
    return aligned16(g->a->data) && aligned16(g->w->data);
}

template <class T> cudaError_t launch(const fx::gemm_params &p, int small, int max_blocks, int N)
{
    cudaError_t ce = small ? fx::gemm_prepare<T, 16, 128, 1, 4, 4, fx::EPI_STORE>()
                           : fx::gemm_prepare<T, 64, 128, 2, 4, 4, fx::EPI_STORE>();
    if (ce != cudaSuccess) return ce;
    return small ? fx::gemm_launch<T, 16, 128, 1, 4, 4, fx::EPI_STORE>(p, max_blocks, N, cudaStreamPerThread)
                 : fx::gemm_launch<T, 64, 128, 2, 4, 4, fx::EPI_STORE>(p, max_blocks, N, cudaStreamPerThread);
}

} // namespace

extern "C" moe_status moe_cuda_fast_grouped_gemm(const moe_gemm_args *g, moe_tensor *out)
{
    if (!eligible(g, out)) return moe_cuda_grouped_gemm(g, out);
    moe_tensor re;
    moe_status st = moe_cu_gemm_checked(g, out, &re);
    moe_cu_mirror_free(&re);
    if (st != MOE_OK) return st;
    const int P = (int)g->a->shape[0], K = (int)g->a->shape[1], E = (int)g->w->shape[0], N = (int)g->w->shape[1];
    MOE_CU(cudaMemsetAsync(out->data, 0, out->nbytes, cudaStreamPerThread));
    if (N == 0) return MOE_OK;
    const int small = P <= 16 * E, bm = small ? 16 : 64; /* about a tile's height of rows per expert or fewer */
    void *ws = moe_cu_scratch(moe_cuda_fx_layout_bytes(P, 1, E, bm), &st);
    if (!ws) return st;
    moe_cuda_fx_layout L;
    moe_cuda_fx_layout_carve(ws, P, 1, E, bm, &L);
    if ((st = moe_cuda_fx_align((const int32_t *)g->row_expert->data, P, 1, E, bm, &L, cudaStreamPerThread))) return st;
    fx::gemm_params p;
    memset(&p, 0, sizeof p);
    p.a = g->a->data, p.a_gather = 1, p.a_div = 1;
    p.sorted = L.sorted, p.block_expert = L.block_expert, p.num_blocks = L.num_blocks;
    p.w = g->w->data, p.N = N, p.K = K, p.out = out->data, p.out_dtype = out->dtype;
    p.bias = g->bias ? (const float *)g->bias->data : NULL;
    int max_blocks = (P + bm - 1) / bm + (P < E ? P : E);
    if (max_blocks > L.nblk) max_blocks = L.nblk;
    cudaError_t ce = g->scheme == MOE_SCHEME_BF16 ? launch<__nv_bfloat16>(p, small, max_blocks, N)
                                                  : launch<__half>(p, small, max_blocks, N);
    return ce == cudaSuccess ? MOE_OK : moe_cu_fail(ce, "fast grouped_gemm launch");
}
