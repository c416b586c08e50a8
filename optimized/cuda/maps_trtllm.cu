/* TensorRT-LLM's routing-prologue map builders on the GPU
 * (reference/maps_trtllm.c is the oracle; contract in
 * include/moe/maps_trtllm.h).
 *
 * Both variants are a stable counting sort of the (token, slot) pairs in
 * token-major flat order i = t*k + j (upstream's fused kernel ranks keys
 * over a blocked arrangement, thread = token, items = slots; the three-step
 * kernels scan tokens in order per expert), so a pair's permuted row is
 * bucket_start + (pairs of its bucket before it):
 *
 *   FUSED_SINGLE_BLOCK (fusedBuildExpertMapsSortFirstToken): buckets are
 *     the local experts plus one bucket for every other id, placed after
 *     the local rows. Upstream runs it as one block for T <= 256; so does
 *     this file: one block of 8 warps, each warp owning a contiguous chunk
 *     of pairs, per-warp bucket counts in shared memory, a block scan, then
 *     each warp places its chunk in order (match_any ranks inside a tile of
 *     32 pairs). The reference also accepts the fused variant for T > 256
 *     (upstream would have fallen back); those inputs, or more than 1023
 *     local experts, take the multi-block path below with the fused keys.
 *   THREE_STEP (threeStepBuildExpertMapsSortFirstToken): only local pairs,
 *     and only a token's first slot per expert (blockExpertPrefixSumKernel
 *     breaks at the first match). Run as upstream's three phases --
 *     per-chunk histograms, prefix sums (per expert over chunks, then over
 *     experts), scatter -- with the chunk-stable ranking of rank.cuh.
 *
 * Entries upstream never writes stay untouched (maps_trtllm.h). Nothing
 * here can fail after the argument checks, so no flags are read. */
#include <string.h>
#include "cuda_internal.h"
#include "rank.cuh"
/* stage_checks.h has no C++ guards of its own */
extern "C" {
#include "reference/stage_checks.h"
}

namespace {

enum { FUSED_WARPS = 8, FUSED_MAX_TOKENS = 256, FUSED_MAX_BINS = 1024 };

/* Bins 0..El-1: local experts; El: every other id (fused only). In the
 * three-step variant a non-local pair, or a repeat of an expert an earlier
 * slot of the row chose, takes no row (-1). */
struct maps_key {
    const int32_t *ids;
    int64_t k, start;
    int El, fused;
    __device__ int operator()(int64_t i) const
    {
        int32_t id = ids[i];
        int64_t e = (int64_t)id - start;
        if (e < 0 || e >= El) return fused ? El : -1;
        if (!fused)
            for (int64_t r = i - i % k; r < i; r++)
                if (ids[r] == id) return -1;
        return (int)e;
    }
};

/* Expanded rows are k-major: u = j*T + t. */
struct maps_place {
    int32_t *perm, *inv, *ptse; /* ptse: three-step only, may be NULL */
    int64_t T, k;
    __device__ void operator()(int64_t i, int e, int64_t p) const
    {
        int64_t t = i / k, j = i % k, u = j * T + t;
        perm[p] = (int32_t)u;
        inv[u] = (int32_t)p;
        if (ptse) ptse[p] = e;
    }
};

/* Bucket starts without padding; expert_first_token_offset is start[0..El]
 * (start[El], the non-local bucket's start, is num_valid). */
__global__ void maps_starts_kernel(int nb, const int32_t *cnt, int64_t *start, int64_t *offsets)
{
    __shared__ long long ws[32];
    long long carry = 0;
    for (int base = 0; base < nb; base += blockDim.x) {
        int b = base + threadIdx.x;
        long long v = b < nb ? cnt[b] : 0, sum;
        long long ex = moe_cu_block_exscan(v, ws, &sum);
        if (b < nb) start[b] = offsets[b] = carry + ex;
        carry += sum;
    }
    if (threadIdx.x == 0) start[nb] = carry;
}

/* The fused single-block builder: n = T*k <= 256*k pairs, nb <= 1024 bins.
 * Shared: start[nb + 1] int64, wc[nb][FUSED_WARPS] int32 (warp w's count,
 * then cursor, of bin b at b*FUSED_WARPS + w). */
__global__ void __launch_bounds__(FUSED_WARPS * 32)
    maps_fused_block_kernel(int64_t n, int nb, maps_key key, maps_place place, int64_t *offsets)
{
    extern __shared__ long long smem[];
    __shared__ long long ws[32];
    int64_t *start = (int64_t *)smem;
    int32_t *wc = (int32_t *)(start + nb + 1);
    for (int x = threadIdx.x; x < nb * FUSED_WARPS; x += blockDim.x) wc[x] = 0;
    __syncthreads();
    const int w = threadIdx.x >> 5;
    const int64_t chunk = ((n + FUSED_WARPS - 1) / FUSED_WARPS + 31) / 32 * 32;
    const int64_t lo = w * chunk < n ? w * chunk : n, hi = lo + chunk < n ? lo + chunk : n;
    moe_cu_warp_count(lo, hi, key, wc + w, FUSED_WARPS);
    __syncthreads();
    /* each bin's warp counts become exclusive cursors, the bin totals are
     * scanned across the block */
    long long carry = 0;
    for (int base = 0; base < nb; base += blockDim.x) {
        int b = base + threadIdx.x;
        long long run = 0, sum;
        if (b < nb)
            for (int v = 0; v < FUSED_WARPS; v++) {
                int32_t c = wc[b * FUSED_WARPS + v];
                wc[b * FUSED_WARPS + v] = (int32_t)run;
                run += c;
            }
        long long ex = moe_cu_block_exscan(run, ws, &sum);
        if (b < nb) start[b] = offsets[b] = carry + ex;
        carry += sum;
    }
    if (threadIdx.x == 0) start[nb] = carry;
    __syncthreads();
    moe_cu_warp_place(lo, hi, key, wc + w, FUSED_WARPS, start, place);
}

} // namespace

extern "C" moe_status moe_cuda_maps_trtllm(const moe_tensor *token_selected_experts,
                                           const moe_maps_trtllm_params *params,
                                           moe_tensor *permuted_row_to_unpermuted_row,
                                           moe_tensor *unpermuted_row_to_permuted_row,
                                           moe_tensor *expert_first_token_offset,
                                           moe_tensor *permuted_token_selected_experts)
{
    moe_status st;
    if ((st = moe_cu_expect_dev(token_selected_experts, "token_selected_experts")) ||
        (st = moe_cu_expect_dev(permuted_row_to_unpermuted_row, "permuted_row_to_unpermuted_row")) ||
        (st = moe_cu_expect_dev(unpermuted_row_to_permuted_row, "unpermuted_row_to_permuted_row")) ||
        (st = moe_cu_expect_dev(expert_first_token_offset, "expert_first_token_offset")) ||
        (st = moe_cu_expect_dev(permuted_token_selected_experts, "permuted_token_selected_experts")))
        return st;
    {
        /* the reference check reads no tensor's entries */
        moe_tensor m[5];
        moe_status cst = MOE_OK;
        const moe_tensor *a = moe_cu_mirror(token_selected_experts, &m[0], 0, &cst);
        const moe_tensor *b = moe_cu_mirror(permuted_row_to_unpermuted_row, &m[1], 0, &cst);
        const moe_tensor *c = moe_cu_mirror(unpermuted_row_to_permuted_row, &m[2], 0, &cst);
        const moe_tensor *d = moe_cu_mirror(expert_first_token_offset, &m[3], 0, &cst);
        const moe_tensor *e = moe_cu_mirror(permuted_token_selected_experts, &m[4], 0, &cst);
        st = cst != MOE_OK ? cst : moe_ref_check_maps_trtllm(a, params, b, c, d, e);
        if (st != MOE_OK) return st;
    }
    const int64_t T = token_selected_experts->shape[0], k = token_selected_experts->shape[1];
    const int64_t n = T * k; /* <= INT32_MAX: checked */
    const int El = params->num_local_experts;
    const int fused = params->variant == MOE_MAPS_TRTLLM_FUSED_SINGLE_BLOCK;
    const int nb = fused ? El + 1 : El;
    maps_key key = {(const int32_t *)token_selected_experts->data, k, params->start_expert, El, fused};
    maps_place place = {(int32_t *)permuted_row_to_unpermuted_row->data, (int32_t *)unpermuted_row_to_permuted_row->data,
                        fused || !permuted_token_selected_experts ? NULL
                                                                  : (int32_t *)permuted_token_selected_experts->data,
                        T, k};
    /* three-step: offsets[El] is the start of an empty last bucket */
    int64_t *offsets = (int64_t *)expert_first_token_offset->data;

    if (fused && T <= FUSED_MAX_TOKENS && nb <= FUSED_MAX_BINS) {
        size_t smem = (size_t)(nb + 1) * sizeof(int64_t) + (size_t)nb * FUSED_WARPS * sizeof(int32_t);
        maps_fused_block_kernel<<<1, FUSED_WARPS * 32, smem>>>(n, nb, key, place, offsets);
        return moe_cu_launched("maps_fused_block_kernel");
    }
    moe_cu_rank_plan pl = moe_cu_rank_plan_make(n, El + 1); /* three-step: bin El stays empty */
    size_t o_cnt = moe_cu_align256(pl.mat_bytes), o_start = o_cnt + moe_cu_align256((size_t)(El + 1) * sizeof(int32_t));
    char *scr = (char *)moe_cu_scratch(o_start + (size_t)(El + 2) * sizeof(int64_t), &st);
    if (!scr) return st;
    int32_t *mat = (int32_t *)scr, *cnt = (int32_t *)(scr + o_cnt);
    int64_t *start = (int64_t *)(scr + o_start);
    if ((st = moe_cu_rank_count(pl, key, mat, cnt))) return st;
    maps_starts_kernel<<<1, 1024>>>(El + 1, cnt, start, offsets);
    if ((st = moe_cu_launched("maps_starts_kernel"))) return st;
    return moe_cu_rank_place(pl, key, mat, start, place);
}
