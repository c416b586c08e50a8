/* DeepEP normal (high-throughput) mode on one GPU, every rank simulated as
 * the reference does (reference/dispatch_deepep.c, anchors A.2-A.4).
 *   layout    one thread per source token: its is_token_in_rank bytes, its
 *             pairs counted per expert (global atomics: integer counts are
 *             order-free), per rank and per node through block counters;
 *   dispatch  a token's row on rank j = the tokens before it (in (source
 *             rank, token) order) that rank j receives: an exclusive scan
 *             of the in-rank masks, one column per receiving rank. Each
 *             received row is then filled by one warp (a gather: tail rows
 *             get zeros and -1 the same way), so every output byte is
 *             written once; rank_prefix_matrix reads the scan at source
 *             boundaries;
 *   combine   the handle's rows come from the same scan of
 *             is_token_in_rank; one thread per output channel adds the
 *             biases, then ranks (or node partials) in the reference's
 *             order (reference/dispatch_core.h, the reference's own code).
 * Errors the reference finds while computing (too few rows N, a bool byte
 * that is neither 0 nor 1) are flagged on the device; the reference then
 * runs on host copies and its status and message are returned. */
#include "dispatch_common.cuh"
#include "reference/dispatch_core.h"
#include "reference/stage_checks.h"

namespace {

constexpr int TPB = 256;

/* ---- layout --------------------------------------------------------------- */

__global__ void layout_kernel(const int32_t *ids, int R, int64_t T, int K, int E, int rpn, int32_t *per_e,
                              int32_t *per_r, int32_t *per_n, uint8_t *in_rank)
{
    /* [src][j] and [src][node] counters of this block; R <= 8 */
    __shared__ int32_t c_r[64], c_n[64];
    int E_loc = E / R, nodes = R / rpn;
    if (threadIdx.x < 64) c_r[threadIdx.x] = 0, c_n[threadIdx.x] = 0;
    __syncthreads();
    for (int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; g < R * T; g += (int64_t)gridDim.x * blockDim.x) {
        const int32_t *row = ids + g * K;
        int src = (int)(g / T);
        for (int k = 0; k < K; k++)
            if (row[k] >= 0) atomicAdd(&per_e[(int64_t)src * E + row[k]], 1);
        /* per rank and per node a token counts once (A.2) */
        int hits = 0;
        for (int j = 0; j < R; j++) {
            int hit = moe_ep_in_rank_core(row, K, E_loc, j);
            in_rank[g * R + j] = (uint8_t)hit;
            hits |= hit << j;
            if (hit) atomicAdd(&c_r[src * R + j], 1);
        }
        for (int n = 0; per_n && n < nodes; n++)
            if ((hits >> (n * rpn)) & ((1 << rpn) - 1)) atomicAdd(&c_n[src * nodes + n], 1);
    }
    __syncthreads();
    if (threadIdx.x < R * R && c_r[threadIdx.x]) atomicAdd(&per_r[threadIdx.x], c_r[threadIdx.x]);
    if (per_n && threadIdx.x < R * nodes && c_n[threadIdx.x]) atomicAdd(&per_n[threadIdx.x], c_n[threadIdx.x]);
}

/* ---- dispatch ------------------------------------------------------------- */

/* mask[j*n + g] = token g goes to rank j; the pairs counted per expert. */
__global__ void dispatch_mask(const int32_t *ids, int R, int64_t n, int K, int E_loc, int32_t *mask, int32_t *per_e)
{
    for (int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; g < n; g += (int64_t)gridDim.x * blockDim.x) {
        const int32_t *row = ids + g * K;
        for (int j = 0; j < R; j++) mask[j * n + g] = moe_ep_in_rank_core(row, K, E_loc, j);
        for (int k = 0; k < K; k++)
            if (row[k] >= 0) atomicAdd(&per_e[row[k]], 1);
    }
}

/* num_recv, rank_prefix_matrix, the capacity flag, the aligned counts. */
__global__ void dispatch_counts(const int32_t *pos, const int32_t *tot, int R, int64_t T, int64_t N, int E_loc,
                                int align, int32_t *num_recv, int32_t *prefix, int32_t *per_e, int32_t *flags)
{
    int64_t n = R * T;
    for (int i = threadIdx.x; i < R * R; i += blockDim.x) {
        int src = i / R, j = i % R;
        if (prefix) prefix[src * R + j] = (src + 1) * T < n ? pos[j * n + (src + 1) * T] : tot[j];
    }
    for (int j = threadIdx.x; j < R; j += blockDim.x) {
        num_recv[j] = tot[j];
        if (tot[j] > N) atomicOr(&flags[0], 1);
    }
    /* pairs rounded up to expert_alignment, in the reference's int arithmetic */
    for (int e = threadIdx.x; e < R * E_loc; e += blockDim.x) per_e[e] = (per_e[e] + align - 1) / align * align;
}

__global__ void dispatch_place(const int32_t *mask, const int32_t *pos, int R, int64_t n, int64_t N, int32_t *row_src)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < R * n; i += (int64_t)gridDim.x * blockDim.x) {
        if (!mask[i]) continue;
        int64_t j = i / n, r = pos[i];
        if (r < N) row_src[j * N + r] = (int32_t)(i % n); /* r >= N: flagged, not written */
    }
}

struct dispatch_args {
    const char *x;
    const char *xs;
    const int32_t *ids;
    const float *w;
    const int32_t *row_src;
    char *ox;
    char *os;
    int32_t *rids;
    float *rw;
    int32_t *src_idx;
    size_t xrow, srow;
    int64_t T, N, rows;
    int K, E_loc;
};

/* One warp per received row (j, r): the token's bytes, scales, src_idx and
 * its local ids / weights (-1 and 0.0f off this rank); rows past num_recv
 * as num_worst_tokens leaves them (ids -1, the rest zero). */
__global__ void dispatch_rows(dispatch_args a)
{
    int lane = threadIdx.x & 31;
    int64_t wid = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5, nw = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t o = wid; o < a.rows; o += nw) {
        int j = (int)(o / a.N);
        int32_t g = a.row_src[o];
        moe_cu_warp_token_row(a.ox, a.os, a.x, a.xs, a.xrow, a.srow, o, g, lane);
        if (g < 0) {
            for (int k = lane; k < a.K; k += 32) a.rids[o * a.K + k] = -1, a.rw[o * a.K + k] = 0.0f;
            if (lane == 0) a.src_idx[o] = -1;
            continue;
        }
        for (int k = lane; k < a.K; k += 32) {
            int32_t e = a.ids[(int64_t)g * a.K + k];
            int local = e >= 0 && e / a.E_loc == j;
            a.rids[o * a.K + k] = local ? e - j * a.E_loc : -1;
            a.rw[o * a.K + k] = local ? a.w[(int64_t)g * a.K + k] : 0.0f;
        }
        if (lane == 0) a.src_idx[o] = (int32_t)(g % a.T);
    }
}

/* ---- combine -------------------------------------------------------------- */

/* mask[j*n + g] from the handle; a byte other than 0/1 is the reference's
 * error (flag 1). */
__global__ void combine_mask(const uint8_t *in_rank, int R, int64_t n, int32_t *mask, int32_t *flags)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < R * n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t g = i / R, j = i % R;
        uint8_t b = in_rank[i];
        if (b > 1) atomicOr(&flags[1], 1);
        mask[j * n + g] = b != 0;
    }
}

/* row_of[g*R + j]: g's row on rank j or -1; a row past N flags the
 * reference's "too few rows" error and reads nothing. */
__global__ void combine_rows_of(const int32_t *mask, const int32_t *pos, const int32_t *tot, int R, int64_t n,
                                int64_t N, int32_t *row_of, int32_t *flags)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < R * n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t g = i / R, j = i % R;
        int32_t r = mask[j * n + g] ? pos[j * n + g] : -1;
        row_of[i] = r < N ? r : -1;
        if (i < R && tot[i] > N) atomicOr(&flags[0], 1);
    }
}

__global__ void combine_x(moe_dtype d, const void *x, const void *b0, const void *b1, const int32_t *row_of, int R,
                          int rpn, int64_t N, int64_t H, int64_t n, void *out)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n * H; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t g = i / H, c = i % H;
        moe_s_store(d, out, i, moe_deepep_combine_channel(d, x, b0, b1, row_of + g * R, R, rpn, N, H, g, c));
    }
}

__global__ void combine_w(const float *rw, const int32_t *row_of, int R, int rpn, int64_t N, int64_t K, int64_t n,
                          float *out)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n * K; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t g = i / K, k = i % K;
        out[i] = moe_deepep_combine_weight(rw, row_of + g * R, R, rpn, N, K, k);
    }
}

} // namespace

/* ---- layout --------------------------------------------------------------- */

extern "C" moe_status moe_cuda_deepep_layout(const moe_deepep_config *cfg, const moe_tensor *topk_ids,
                                             const moe_deepep_layout *out)
{
    moe_status st = moe_cu_expect_dev(topk_ids, "topk_ids");
    if (!st && out) {
        if (!st) st = moe_cu_expect_dev(out->num_tokens_per_expert, "num_tokens_per_expert");
        if (!st) st = moe_cu_expect_dev(out->num_tokens_per_rank, "num_tokens_per_rank");
        if (!st) st = moe_cu_expect_dev(out->num_tokens_per_node, "num_tokens_per_node");
        if (!st) st = moe_cu_expect_dev(out->is_token_in_rank, "is_token_in_rank");
    }
    if (st) return st;
    /* the check scans the ids: they come with their bytes */
    moe_tensor mi, m0, m1, m2, m3;
    moe_deepep_layout mo = {};
    const moe_tensor *hi = moe_cu_mirror(topk_ids, &mi, 1, &st);
    if (out) {
        mo.num_tokens_per_expert = moe_cu_mirror_field(out->num_tokens_per_expert, &m0, 0, &st);
        mo.num_tokens_per_rank = moe_cu_mirror_field(out->num_tokens_per_rank, &m1, 0, &st);
        mo.num_tokens_per_node = moe_cu_mirror_field(out->num_tokens_per_node, &m2, 0, &st);
        mo.is_token_in_rank = moe_cu_mirror_field(out->is_token_in_rank, &m3, 0, &st);
    }
    if (!st) st = moe_ref_check_deepep_layout(cfg, hi, out ? &mo : NULL);
    moe_cu_mirror_free(&mi);
    if (st) return st;

    int R = cfg->world_size, E = cfg->num_experts, rpn = cfg->num_ranks_per_node, nodes = R / rpn;
    int K = (int)topk_ids->shape[2];
    int64_t T = topk_ids->shape[1];
    int32_t *per_n = out->num_tokens_per_node ? (int32_t *)out->num_tokens_per_node->data : nullptr;
    MOE_CU(cudaMemsetAsync(out->num_tokens_per_expert->data, 0, (size_t)R * E * 4, cudaStreamPerThread));
    MOE_CU(cudaMemsetAsync(out->num_tokens_per_rank->data, 0, (size_t)R * R * 4, cudaStreamPerThread));
    if (per_n) MOE_CU(cudaMemsetAsync(per_n, 0, (size_t)R * nodes * 4, cudaStreamPerThread));
    if (R * T == 0) return MOE_OK;
    layout_kernel<<<moe_cu_blocks(R * T, TPB), TPB>>>((const int32_t *)topk_ids->data, R, T, K, E, rpn,
                                                      (int32_t *)out->num_tokens_per_expert->data,
                                                      (int32_t *)out->num_tokens_per_rank->data, per_n,
                                                      (uint8_t *)out->is_token_in_rank->data);
    return moe_cu_launched("deepep layout_kernel");
}

/* ---- dispatch ------------------------------------------------------------- */

static moe_status dispatch_check(const moe_deepep_config *cfg, const moe_tensor *x, const moe_tensor *x_scales,
                                 const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                 const moe_deepep_recv *out)
{
    moe_status st = MOE_OK;
    const moe_tensor *in[4] = {x, x_scales, topk_ids, topk_weights};
    const char *in_name[4] = {"x", "x_scales", "topk_ids", "topk_weights"};
    for (int i = 0; i < 4 && !st; i++) st = moe_cu_expect_dev(in[i], in_name[i]);
    moe_deepep_recv mo = {};
    moe_tensor m[12];
    if (out) {
        moe_tensor *const o[8] = {out->x, out->x_scales, out->topk_ids, out->topk_weights, out->src_idx,
                                  out->num_recv, out->num_recv_per_expert, out->rank_prefix_matrix};
        const char *o_name[8] = {"recv x", "recv x_scales", "recv topk_ids", "recv topk_weights", "recv src_idx",
                                 "num_recv", "num_recv_per_expert", "rank_prefix_matrix"};
        for (int i = 0; i < 8 && !st; i++) st = moe_cu_expect_dev(o[i], o_name[i]);
        if (st) return st;
        moe_tensor **mf[8] = {&mo.x, &mo.x_scales, &mo.topk_ids, &mo.topk_weights, &mo.src_idx,
                              &mo.num_recv, &mo.num_recv_per_expert, &mo.rank_prefix_matrix};
        for (int i = 0; i < 8; i++) *mf[i] = moe_cu_mirror_field(o[i], &m[4 + i], 0, &st);
    }
    if (st) return st;
    const moe_tensor *h[4];
    for (int i = 0; i < 4; i++) h[i] = moe_cu_mirror(in[i], &m[i], i == 2, &st); /* only the ids are scanned */
    if (!st) st = moe_ref_check_deepep_dispatch(cfg, h[0], h[1], h[2], h[3], out ? &mo : NULL);
    moe_cu_mirror_free(&m[2]);
    return st;
}

/* The reference on host copies, for an error found on the device. */
static moe_status dispatch_on_host(const moe_deepep_config *cfg, const moe_tensor *x, const moe_tensor *x_scales,
                                   const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                   const moe_deepep_recv *out)
{
    const moe_tensor *in[4] = {x, x_scales, topk_ids, topk_weights};
    moe_tensor *const o[8] = {out->x, out->x_scales, out->topk_ids, out->topk_weights, out->src_idx,
                              out->num_recv, out->num_recv_per_expert, out->rank_prefix_matrix};
    return moe_cu_ref_on_host(in, 4, o, 8, [&](moe_tensor **hi, moe_tensor **ho) {
        moe_deepep_recv ro = {ho[0], ho[1], ho[2], ho[3], ho[4], ho[5], ho[6], ho[7]};
        return moe_ref_deepep_dispatch(cfg, hi[0], hi[1], hi[2], hi[3], &ro);
    });
}

extern "C" moe_status moe_cuda_deepep_dispatch(const moe_deepep_config *cfg, const moe_tensor *x,
                                               const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                               const moe_tensor *topk_weights, const moe_deepep_recv *out)
{
    moe_status st = dispatch_check(cfg, x, x_scales, topk_ids, topk_weights, out);
    if (st) return st;
    int R = cfg->world_size, E_loc = cfg->num_experts / R, K = (int)topk_ids->shape[2];
    int64_t T = x->shape[1], H = x->shape[2], S = x_scales ? x_scales->shape[2] : 0, N = out->x->shape[1];
    int64_t n = R * T;

    int32_t *mask, *pos, *tot, *row_src, *stmp; /* tot: the totals; stmp: the scan's tiles */
    st = moe_cu_carve_scratch([&](moe_cu_carve &cv) {
        mask = cv.take<int32_t>((size_t)R * n), pos = cv.take<int32_t>((size_t)R * n);
        tot = cv.take<int32_t>(8), row_src = cv.take<int32_t>((size_t)R * N);
        stmp = cv.take<int32_t>(moe_cu_scan_cols_tmp(n, R));
    });
    if (st) return st;
    int32_t *flags = moe_cu_flags(&st);
    if (st) return st;

    int32_t *per_e = (int32_t *)out->num_recv_per_expert->data;
    MOE_CU(cudaMemsetAsync(per_e, 0, (size_t)R * E_loc * 4, cudaStreamPerThread));
    if (N > 0) MOE_CU(cudaMemsetAsync(row_src, 0xFF, (size_t)R * N * 4, cudaStreamPerThread));
    if (n) {
        dispatch_mask<<<moe_cu_blocks(n, TPB), TPB>>>((const int32_t *)topk_ids->data, R, n, K, E_loc, mask, per_e);
        if ((st = moe_cu_launched("deepep dispatch_mask"))) return st;
    }
    if ((st = moe_cu_scan_cols(mask, pos, tot, n, R, stmp))) return st;
    dispatch_counts<<<1, TPB>>>(pos, tot, R, T, N, E_loc, cfg->expert_alignment, (int32_t *)out->num_recv->data,
                                out->rank_prefix_matrix ? (int32_t *)out->rank_prefix_matrix->data : nullptr, per_e,
                                flags);
    if ((st = moe_cu_launched("deepep dispatch_counts"))) return st;
    if (n) {
        dispatch_place<<<moe_cu_blocks(R * n, TPB), TPB>>>(mask, pos, R, n, N, row_src);
        if ((st = moe_cu_launched("deepep dispatch_place"))) return st;
    }
    if (N > 0) {
        dispatch_args a;
        a.x = (const char *)x->data;
        a.xs = x_scales ? (const char *)x_scales->data : nullptr;
        a.ids = (const int32_t *)topk_ids->data;
        a.w = (const float *)topk_weights->data;
        a.row_src = row_src;
        a.ox = (char *)out->x->data;
        a.os = x_scales ? (char *)out->x_scales->data : nullptr;
        a.rids = (int32_t *)out->topk_ids->data;
        a.rw = (float *)out->topk_weights->data;
        a.src_idx = (int32_t *)out->src_idx->data;
        a.xrow = moe_dtype_row_bytes(x->dtype, H);
        a.srow = (size_t)S * 4;
        a.T = T, a.N = N, a.rows = R * N, a.K = K, a.E_loc = E_loc;
        dispatch_rows<<<moe_cu_row_blocks(R * N), MOE_CU_ROW_THREADS>>>(a);
        if ((st = moe_cu_launched("deepep dispatch_rows"))) return st;
    }
    int32_t hf[64];
    if ((st = moe_cu_flags_get(flags, hf))) return st;
    if (hf[0]) return dispatch_on_host(cfg, x, x_scales, topk_ids, topk_weights, out);
    return MOE_OK;
}

/* ---- combine -------------------------------------------------------------- */

extern "C" moe_status moe_cuda_deepep_combine(const moe_deepep_config *cfg, const moe_tensor *x,
                                              const moe_tensor *topk_weights, const moe_tensor *is_token_in_rank,
                                              const moe_tensor *bias0, const moe_tensor *bias1,
                                              moe_tensor *combined_x, moe_tensor *combined_topk_weights)
{
    const moe_tensor *t[7] = {x, topk_weights, is_token_in_rank, bias0, bias1, combined_x, combined_topk_weights};
    const char *name[7] = {"x", "topk_weights", "is_token_in_rank", "bias0", "bias1", "combined_x",
                           "combined_topk_weights"};
    moe_status st = MOE_OK;
    for (int i = 0; i < 7 && !st; i++) st = moe_cu_expect_dev(t[i], name[i]);
    if (st) return st;
    /* the check reads no tensor's bytes: descriptions only */
    moe_tensor m[7];
    const moe_tensor *h[7];
    for (int i = 0; i < 7; i++) h[i] = moe_cu_mirror(t[i], &m[i], 0, &st);
    if (!st) st = moe_ref_check_deepep_combine(cfg, h[0], h[1], h[2], h[3], h[4], h[5], h[6]);
    if (st) return st;

    int R = cfg->world_size, rpn = cfg->num_ranks_per_node;
    int64_t N = x->shape[1], H = x->shape[2], K = topk_weights ? topk_weights->shape[2] : 0;
    int64_t T = is_token_in_rank->shape[1], n = R * T;
    if (n == 0) return MOE_OK;

    int32_t *mask, *pos, *row_of, *tot, *stmp; /* tot: the totals; stmp: the scan's tiles */
    st = moe_cu_carve_scratch([&](moe_cu_carve &cv) {
        mask = cv.take<int32_t>((size_t)R * n), pos = cv.take<int32_t>((size_t)R * n);
        row_of = cv.take<int32_t>((size_t)R * n), tot = cv.take<int32_t>(8);
        stmp = cv.take<int32_t>(moe_cu_scan_cols_tmp(n, R));
    });
    if (st) return st;
    int32_t *flags = moe_cu_flags(&st);
    if (st) return st;

    unsigned nb = moe_cu_blocks(R * n, TPB);
    combine_mask<<<nb, TPB>>>((const uint8_t *)is_token_in_rank->data, R, n, mask, flags);
    if ((st = moe_cu_launched("deepep combine_mask"))) return st;
    if ((st = moe_cu_scan_cols(mask, pos, tot, n, R, stmp))) return st;
    combine_rows_of<<<nb, TPB>>>(mask, pos, tot, R, n, N, row_of, flags);
    if ((st = moe_cu_launched("deepep combine_rows_of"))) return st;
    if (H) {
        combine_x<<<moe_cu_blocks(n * H, TPB), TPB>>>(x->dtype, x->data, bias0 ? bias0->data : nullptr,
                                                      bias1 ? bias1->data : nullptr, row_of, R, rpn, N, H, n,
                                                      combined_x->data);
        if ((st = moe_cu_launched("deepep combine_x"))) return st;
    }
    if (K) {
        combine_w<<<moe_cu_blocks(n * K, TPB), TPB>>>((const float *)topk_weights->data, row_of, R, rpn, N, K, n,
                                                      (float *)combined_topk_weights->data);
        if ((st = moe_cu_launched("deepep combine_w"))) return st;
    }
    int32_t hf[64];
    if ((st = moe_cu_flags_get(flags, hf))) return st;
    if (hf[0] || hf[1]) {
        /* the reference names the first bad byte or the short rank */
        const moe_tensor *in[5] = {x, topk_weights, is_token_in_rank, bias0, bias1};
        moe_tensor *const o[2] = {combined_x, combined_topk_weights};
        st = moe_cu_ref_on_host(in, 5, o, 2, [&](moe_tensor **hi, moe_tensor **ho) {
            return moe_ref_deepep_combine(cfg, hi[0], hi[1], hi[2], hi[3], hi[4], ho[0], ho[1]);
        });
    }
    return st;
}
