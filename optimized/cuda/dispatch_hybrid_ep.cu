/* Hybrid-EP dispatch_with_permute / combine_with_unpermute on one GPU, ranks
 * simulated as the reference does (reference/dispatch_hybrid_ep.c, A.7).
 *   dispatch  a pair's row is its expert's padded offset (per rank, over
 *             the local experts ascending: one thread per rank, an O(E_loc)
 *             loop) plus the pair's stable rank among the expert's pairs in
 *             (global token, slot) order -- the reference's next[e]++ walk
 *             -- from the stable rank of rank.cuh. Rows at or
 *             past the non-blocking capacity are dropped as the reference
 *             drops them. Then one warp per output row gathers the token's
 *             bytes, prob and scales, or zeros for pad and tail rows.
 *   combine   one block per token: its row_id_map entries (every rank, every
 *             local expert) staged in shared memory, one thread per channel
 *             running the reference's per-rank partials, roundings and node
 *             order (reference/dispatch_core.h); out_probs one thread per
 *             (token, expert).
 * The only error found while computing (blocking mode with too few rows)
 * is flagged on the device and reported by the reference on host copies. */
#include <stdint.h>
#include "dispatch_common.cuh"
#include "reference/dispatch_core.h"
#include "reference/stage_checks.h"

namespace {

constexpr int TPB = 256;
constexpr int SMEM_MAP_MAX = 12 * 1024; /* map entries per token kept in shared memory (48 KiB) */

/* One thread per rank: padded offsets, the capacity flag, the counts. */
__global__ void hep_counts(const int32_t *count32, int R, int E_loc, int pad, int64_t N, int64_t limit,
                          int non_blocking, int64_t *count, int64_t *offset, int32_t *tpe, int64_t *ppe,
                          int32_t *overflow, int32_t *flags)
{
    int j = threadIdx.x;
    if (j >= R) return;
    for (int l = 0; l < E_loc; l++) count[(int64_t)j * E_loc + l] = count32[(int64_t)j * E_loc + l];
    int64_t end = moe_hep_rank_offsets(count + (int64_t)j * E_loc, E_loc, pad, offset + (int64_t)j * E_loc);
    if (!non_blocking && end > N) atomicOr(&flags[0], 1);
    moe_hep_fill_rank(count, offset, j, E_loc, pad, limit, tpe, ppe, overflow);
}

__global__ void hep_place(const int32_t *ids, const int32_t *rank, int64_t pairs, int K, int R, int64_t T, int E_loc,
                          const int64_t *offset, int64_t N, int64_t limit, int32_t *map, int32_t *row_src)
{
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < pairs; p += (int64_t)gridDim.x * blockDim.x) {
        int32_t e = ids[p];
        int j = e / E_loc, l = e % E_loc;
        int64_t g = p / K, r = offset[e] + rank[p];
        /* a row id >= num_permuted_tokens is dropped (non-blocking); in
         * blocking mode r >= N is the flagged capacity error */
        if (r >= limit || r >= N) continue;
        map[((int64_t)j * R * T + g) * E_loc + l] = (int32_t)r;
        row_src[(int64_t)j * N + r] = (int32_t)p;
    }
}

/* distinct tokens per rank, block counters first (R <= 8) */
__global__ void hep_num_dispatched(const int32_t *ids, int64_t n, int K, int R, int E_loc, int32_t *ndisp)
{
    __shared__ int32_t c[8];
    if (threadIdx.x < 8) c[threadIdx.x] = 0;
    __syncthreads();
    for (int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; g < n; g += (int64_t)gridDim.x * blockDim.x)
        for (int j = 0; j < R; j++)
            if (moe_ep_in_rank_core(ids + g * K, K, E_loc, j)) atomicAdd(&c[j], 1);
    __syncthreads();
    if (threadIdx.x < R && c[threadIdx.x]) atomicAdd(&ndisp[threadIdx.x], c[threadIdx.x]);
}

struct hep_rows_args {
    const char *x;
    const char *xs;
    const float *w;
    const int32_t *row_src;
    char *ox;
    char *os;
    float *probs;
    size_t xrow, srow;
    int64_t rows;
    int K;
};

__global__ void hep_rows(hep_rows_args a)
{
    int lane = threadIdx.x & 31;
    int64_t wid = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5, nw = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t o = wid; o < a.rows; o += nw) {
        int32_t p = a.row_src[o];
        /* pad rows and rows past the padded total: zero, prob 0, scales 0 */
        moe_cu_warp_token_row(a.ox, a.os, a.x, a.xs, a.xrow, a.srow, o, p < 0 ? -1 : p / a.K, lane);
        if (a.probs && lane == 0) a.probs[o] = p < 0 ? 0.0f : a.w[p];
    }
}

/* One block per token (grid-stride): its map entries of every rank, then
 * one thread per channel. smem: the entries in shared memory, else read
 * where they are. */
__global__ void hep_combine(moe_dtype d, const void *y, const int32_t *map, int R, int64_t T, int E_loc, int rpn,
                            int64_t N, int64_t H, int smem, void *out)
{
    extern __shared__ int32_t m_s[];
    int64_t mstride = R * T * E_loc;
    for (int64_t g = blockIdx.x; g < R * T; g += gridDim.x) {
        const int32_t *m = map + g * E_loc;
        int64_t ms = mstride;
        if (smem) {
            __syncthreads(); /* the previous token's entries are no longer read */
            for (int i = threadIdx.x; i < R * E_loc; i += blockDim.x) m_s[i] = m[(i / E_loc) * mstride + i % E_loc];
            __syncthreads();
            m = m_s, ms = E_loc;
        }
        int home = (int)(g / T) / rpn;
        for (int64_t c = threadIdx.x; c < H; c += blockDim.x)
            moe_s_store(d, out, g * H + c, moe_hep_combine_channel(d, y, m, ms, R, E_loc, rpn, home, N, H, c));
    }
}

/* backward probs: gathered, not summed, into the dense [T, E] row */
__global__ void hep_out_probs(const int32_t *map, const float *probs, int R, int64_t T, int E_loc, int64_t N,
                              float *out)
{
    int64_t E = (int64_t)R * E_loc;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < R * T * E; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t g = i / E, e = i % E, j = e / E_loc;
        int32_t r = map[(j * R * T + g) * E_loc + e % E_loc];
        out[i] = r >= 0 ? probs[j * N + r] : 0.0f;
    }
}

} // namespace

extern "C" moe_status moe_cuda_hep_dispatch_with_permute(const moe_hep_config *cfg, const moe_tensor *x,
                                                         const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                                         const moe_tensor *topk_weights, const moe_hep_permuted *out)
{
    moe_status st = MOE_OK;
    const moe_tensor *in[4] = {x, x_scales, topk_ids, topk_weights};
    const char *in_name[4] = {"x", "x_scales", "topk_ids", "topk_weights"};
    for (int i = 0; i < 4 && !st; i++) st = moe_cu_expect_dev(in[i], in_name[i]);
    moe_tensor m[12];
    moe_hep_permuted mo = {};
    moe_tensor *o[8] = {};
    if (out) {
        moe_tensor *const of[8] = {out->x, out->probs, out->x_scales, out->tokens_per_expert,
                                   out->padded_tokens_per_expert, out->row_id_map, out->overflow_flag,
                                   out->num_dispatched};
        const char *o_name[8] = {"out x", "out probs", "out x_scales", "tokens_per_expert", "padded_tokens_per_expert",
                                 "row_id_map", "overflow_flag", "num_dispatched"};
        for (int i = 0; i < 8; i++) o[i] = of[i];
        for (int i = 0; i < 8 && !st; i++) st = moe_cu_expect_dev(o[i], o_name[i]);
        if (st) return st;
        moe_tensor **mf[8] = {&mo.x, &mo.probs, &mo.x_scales, &mo.tokens_per_expert, &mo.padded_tokens_per_expert,
                              &mo.row_id_map, &mo.overflow_flag, &mo.num_dispatched};
        for (int i = 0; i < 8; i++) *mf[i] = moe_cu_mirror_field(o[i], &m[4 + i], 0, &st);
    }
    if (st) return st;
    const moe_tensor *h[4];
    for (int i = 0; i < 4; i++) h[i] = moe_cu_mirror(in[i], &m[i], i == 2, &st); /* the check scans the ids */
    if (!st) st = moe_ref_check_hep_dispatch_with_permute(cfg, h[0], h[1], h[2], h[3], out ? &mo : NULL);
    moe_cu_mirror_free(&m[2]);
    if (st) return st;

    int R = cfg->world_size, E = cfg->num_experts, E_loc = E / R, pad = cfg->pad_multiple;
    int K = (int)topk_ids->shape[2];
    int64_t T = x->shape[1], H = x->shape[2], S = x_scales ? x_scales->shape[2] : 0, N = out->x->shape[1];
    int64_t n = R * T, pairs = n * K, limit = cfg->non_blocking ? N : INT64_MAX;

    int32_t *rank, *count32, *row_src;
    int64_t *count, *offset;
    char *btmp; /* the stable rank's scratch */
    st = moe_cu_carve_scratch([&](moe_cu_carve &cv) {
        rank = cv.take<int32_t>((size_t)pairs), count32 = cv.take<int32_t>((size_t)E);
        count = cv.take<int64_t>((size_t)E), offset = cv.take<int64_t>((size_t)E);
        row_src = cv.take<int32_t>((size_t)R * N);
        btmp = cv.take<char>(moe_cu_stable_rank_bytes(pairs, E));
    });
    if (st) return st;
    int32_t *flags = moe_cu_flags(&st);
    if (st) return st;

    const int32_t *ids = (const int32_t *)topk_ids->data;
    if ((st = moe_cu_stable_rank(ids, pairs, E, rank, count32, -1, nullptr, btmp))) return st;
    hep_counts<<<1, 32>>>(count32, R, E_loc, pad, N, limit, cfg->non_blocking, count, offset,
                          (int32_t *)out->tokens_per_expert->data, (int64_t *)out->padded_tokens_per_expert->data,
                          (int32_t *)out->overflow_flag->data, flags);
    if ((st = moe_cu_launched("hep_counts"))) return st;
    if (n * E_loc > 0)
        MOE_CU(cudaMemsetAsync(out->row_id_map->data, 0xFF, (size_t)(R * n * E_loc) * 4, cudaStreamPerThread));
    if (N > 0) MOE_CU(cudaMemsetAsync(row_src, 0xFF, (size_t)R * N * 4, cudaStreamPerThread));
    if (pairs > 0) {
        hep_place<<<moe_cu_blocks(pairs, TPB), TPB>>>(ids, rank, pairs, K, R, T, E_loc, offset, N, limit,
                                                      (int32_t *)out->row_id_map->data, row_src);
        if ((st = moe_cu_launched("hep_place"))) return st;
    }
    if (out->num_dispatched) {
        MOE_CU(cudaMemsetAsync(out->num_dispatched->data, 0, (size_t)R * 4, cudaStreamPerThread));
        if (n > 0) {
            hep_num_dispatched<<<moe_cu_blocks(n, TPB), TPB>>>(ids, n, K, R, E_loc,
                                                               (int32_t *)out->num_dispatched->data);
            if ((st = moe_cu_launched("hep_num_dispatched"))) return st;
        }
    }
    if (N > 0) {
        hep_rows_args a;
        a.x = (const char *)x->data;
        a.xs = x_scales ? (const char *)x_scales->data : nullptr;
        a.w = (const float *)topk_weights->data;
        a.row_src = row_src;
        a.ox = (char *)out->x->data;
        a.os = x_scales ? (char *)out->x_scales->data : nullptr;
        a.probs = out->probs ? (float *)out->probs->data : nullptr;
        a.xrow = moe_dtype_row_bytes(x->dtype, H);
        a.srow = (size_t)S * sizeof(float);
        a.rows = R * N, a.K = K;
        hep_rows<<<moe_cu_row_blocks(R * N), MOE_CU_ROW_THREADS>>>(a);
        if ((st = moe_cu_launched("hep_rows"))) return st;
    }
    int32_t hf[64];
    if ((st = moe_cu_flags_get(flags, hf))) return st;
    if (!hf[0]) return MOE_OK;
    /* blocking mode with too few rows: the reference names the rank */
    return moe_cu_ref_on_host(in, 4, o, 8, [&](moe_tensor **hi, moe_tensor **ho) {
        moe_hep_permuted ro = {ho[0], ho[1], ho[2], ho[3], ho[4], ho[5], ho[6], ho[7]};
        return moe_ref_hep_dispatch_with_permute(cfg, hi[0], hi[1], hi[2], hi[3], &ro);
    });
}

extern "C" moe_status moe_cuda_hep_combine_with_unpermute(const moe_hep_config *cfg, const moe_tensor *y,
                                                          const moe_tensor *row_id_map, const moe_tensor *probs,
                                                          moe_tensor *out, moe_tensor *out_probs)
{
    const moe_tensor *t[5] = {y, row_id_map, probs, out, out_probs};
    const char *name[5] = {"y", "row_id_map", "probs", "out", "out_probs"};
    moe_status st = MOE_OK;
    for (int i = 0; i < 5 && !st; i++) st = moe_cu_expect_dev(t[i], name[i]);
    if (st) return st;
    moe_tensor m[5];
    const moe_tensor *h[5];
    /* the check scans row_id_map (rows in range, none named twice) */
    for (int i = 0; i < 5; i++) h[i] = moe_cu_mirror(t[i], &m[i], i == 1, &st);
    if (!st) st = moe_ref_check_hep_combine_with_unpermute(cfg, h[0], h[1], h[2], h[3], h[4]);
    moe_cu_mirror_free(&m[1]);
    if (st) return st;

    int R = cfg->world_size, E_loc = cfg->num_experts / R, rpn = cfg->num_ranks_per_node;
    int64_t N = y->shape[1], H = y->shape[2], T = out->shape[1], n = R * T;
    const int32_t *map = (const int32_t *)row_id_map->data;
    if (n > 0 && H > 0) {
        int smem = R * E_loc <= SMEM_MAP_MAX;
        unsigned blocks = (unsigned)(n < 65535 * 16 ? n : 65535 * 16);
        hep_combine<<<blocks, TPB, smem ? (size_t)R * E_loc * 4 : 0>>>(y->dtype, y->data, map, R, T, E_loc, rpn, N, H,
                                                                      smem, out->data);
        if ((st = moe_cu_launched("hep_combine"))) return st;
    }
    if (out_probs && n > 0) {
        hep_out_probs<<<moe_cu_blocks(n * R * E_loc, TPB), TPB>>>(map, (const float *)probs->data, R, T, E_loc, N,
                                                                  (float *)out_probs->data);
        if ((st = moe_cu_launched("hep_out_probs"))) return st;
    }
    return MOE_OK;
}
