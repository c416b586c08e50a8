/* moe_cu_stable_rank: the ranking steps of rank.cuh on an int32 key array.
 * Every bucket starts at 0, so a key's placement is its rank. */
#include "rank.cuh"

namespace {

struct array_key {
    const int32_t *keys;
    int nb;
    __device__ int operator()(int64_t i) const
    {
        int32_t k = keys[i];
        return k >= 0 && k < nb ? (int)k : -1;
    }
};

struct rank_out {
    int32_t *rank;
    __device__ void operator()(int64_t i, int, int64_t pos) const { rank[i] = (int32_t)pos; }
};

__global__ void cap_kernel(const int32_t *tot, int nb, int64_t cap, int32_t *flags)
{
    for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < nb; b += gridDim.x * blockDim.x)
        if ((int64_t)tot[b] > cap) atomicOr(flags, 1);
}

struct layout {
    size_t tot, start, bytes;
};

layout layout_of(const moe_cu_rank_plan &pl)
{
    layout l;
    l.tot = moe_cu_align256(pl.mat_bytes);
    l.start = l.tot + moe_cu_align256((size_t)pl.nb * sizeof(int32_t));
    l.bytes = l.start + moe_cu_align256((size_t)pl.nb * sizeof(int64_t));
    return l;
}

} // namespace

size_t moe_cu_stable_rank_bytes(int64_t n, int nb)
{
    return layout_of(moe_cu_rank_plan_make(n > 0 ? n : 0, nb > 0 ? nb : 1)).bytes;
}

moe_status moe_cu_stable_rank(const int32_t *keys, int64_t n, int nb, int32_t *rank, int32_t *count, int64_t cap,
                              int32_t *flags, void *tmp)
{
    if (n > 0) MOE_CU(cudaMemsetAsync(rank, 0xFF, (size_t)n * sizeof *rank, cudaStreamPerThread)); /* no key: -1 */
    if (nb <= 0) return MOE_OK;
    moe_cu_rank_plan pl = moe_cu_rank_plan_make(n > 0 ? n : 0, nb);
    layout l = layout_of(pl);
    char *base = (char *)tmp;
    int32_t *mat = (int32_t *)base, *tot = count ? count : (int32_t *)(base + l.tot);
    int64_t *start = (int64_t *)(base + l.start);
    array_key key = {keys, nb};
    moe_status st = moe_cu_rank_count(pl, key, mat, tot);
    if (st) return st;
    if (cap >= 0) {
        cap_kernel<<<moe_cu_blocks(nb, 256), 256>>>(tot, nb, cap, flags);
        if ((st = moe_cu_launched("rank_cap_kernel"))) return st;
    }
    if (pl.nch == 0) return MOE_OK;
    MOE_CU(cudaMemsetAsync(start, 0, (size_t)nb * sizeof *start, cudaStreamPerThread));
    return moe_cu_rank_place(pl, key, mat, start, rank_out{rank});
}
