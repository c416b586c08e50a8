/* Hybrid-EP dispatch_with_permute / combine_with_unpermute and its buffer
 * formulas (anchors/dispatch_sorting.md A.7, section 0 fact 5; seed 002
 * section 4.2). Upstream computes the layout with scans, not atomics, and
 * its tests compare bit-exactly, so every output here is EXACT. */
#include <stdlib.h>
#include <string.h>
#include "dispatch_core.h"
#include "elem.h"
#include "moe/dispatch.h"
#include "stage_checks.h"

static moe_status check_cfg(const moe_hep_config *cfg, int *E_loc, int *nodes)
{
    if (!cfg) return moe_fail(MOE_ERR_NULL, "cfg: must not be NULL");
    moe_status s = moe_ep_check_world(cfg->world_size, cfg->num_experts, E_loc);
    if (s != MOE_OK) return s;
    if ((s = moe_ep_check_nodes(cfg->world_size, cfg->num_ranks_per_node, nodes)) != MOE_OK)
        return s;
    if (cfg->pad_multiple < 1)
        return moe_fail(MOE_ERR_INVALID_ARG, "pad_multiple %d: must be >= 1 (1 = no padding)",
                        cfg->pad_multiple);
    /* hybrid_ep_buffer.py:351-356 asserts the multiple in non-blocking mode */
    if (cfg->non_blocking &&
        (cfg->num_permuted_tokens < 0 || cfg->num_permuted_tokens % cfg->pad_multiple))
        return moe_fail(MOE_ERR_INVALID_ARG,
                        "num_permuted_tokens %lld: non_blocking needs a capacity >= 0 that is a "
                        "multiple of pad_multiple %d",
                        (long long)cfg->num_permuted_tokens, cfg->pad_multiple);
    return MOE_OK;
}

/* topk input goes through indices_to_map (scatter into a bool [T, E] map,
 * A.7 "Routing input"): -1 cannot be scattered and a repeated expert keeps
 * an unspecified one of its probs */
static moe_status check_ids(const moe_hep_config *cfg, const moe_tensor *ids, int64_t T, int *K)
{
    return moe_ep_check_ids(ids, "topk_ids", cfg->world_size, T, cfg->num_experts,
                            "Hybrid-EP scatters ids into a routing map, which has no -1",
                            "duplicates collapse into one map bit with an unspecified prob", K);
}

/* Pairs per global expert (= tokens, ids being distinct). */
static void expert_counts(const int32_t *ids, int64_t pairs, int E, int64_t *count)
{
    memset(count, 0, (size_t)E * sizeof *count);
    for (int64_t i = 0; i < pairs; i++) count[ids[i]]++;
}

static int64_t pad_up(int64_t n, int pad) { return moe_hep_pad_up(n, pad); }

moe_status moe_hep_permute_capacity(const moe_hep_config *cfg, const moe_tensor *topk_ids,
                                    int64_t *rows)
{
    int E_loc, K;
    moe_status s = check_cfg(cfg, &E_loc, NULL);
    if (s != MOE_OK) return s;
    if ((s = check_ids(cfg, topk_ids, -1, &K)) != MOE_OK) return s;
    if (!rows) return moe_fail(MOE_ERR_NULL, "rows: must not be NULL");
    int64_t *count = malloc((size_t)cfg->num_experts * sizeof *count);
    if (!count) return moe_fail(MOE_ERR_NOMEM, "capacity: counts not available");
    expert_counts((const int32_t *)topk_ids->data, moe_tensor_numel(topk_ids), cfg->num_experts,
                  count);
    *rows = 0;
    for (int j = 0; j < cfg->world_size; j++) {
        int64_t sum = 0;
        for (int l = 0; l < E_loc; l++) sum += pad_up(count[j * E_loc + l], cfg->pad_multiple);
        if (sum > *rows) *rows = sum;
    }
    free(count);
    return MOE_OK;
}

moe_status moe_ref_check_hep_dispatch_with_permute(const moe_hep_config *cfg, const moe_tensor *x,
                                                   const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                                   const moe_tensor *topk_weights, const moe_hep_permuted *out)
{
    int E_loc, K;
    moe_status s = check_cfg(cfg, &E_loc, NULL);
    if (s != MOE_OK) return s;
    int R = cfg->world_size;
    const int64_t xs[3] = {R, -1, -1};
    if ((s = moe_ep_expect(x, "x", -1, 3, xs, "[R, T, H]")) != MOE_OK) return s;
    int64_t T = x->shape[1], H = x->shape[2], S = 0;
    if ((s = check_ids(cfg, topk_ids, T, &K)) != MOE_OK) return s;
    const int64_t ws[3] = {R, T, K};
    if ((s = moe_ep_expect(topk_weights, "topk_weights", MOE_F32, 3, ws, "[R, T, K]")) != MOE_OK)
        return s;
    if (x_scales) {
        const int64_t ss[3] = {R, T, -1};
        if ((s = moe_ep_expect(x_scales, "x_scales", MOE_F32, 3, ss, "[R, T, S]")) != MOE_OK)
            return s;
        S = x_scales->shape[2];
    }
    if (!out) return moe_fail(MOE_ERR_NULL, "out: must not be NULL");
    const int64_t ox[3] = {R, cfg->non_blocking ? cfg->num_permuted_tokens : -1, H};
    if ((s = moe_ep_expect(out->x, "out x", x->dtype, 3, ox,
                           cfg->non_blocking ? "[R, num_permuted_tokens, H]" : "[R, N, H]")) !=
        MOE_OK)
        return s;
    int64_t N = out->x->shape[1];
    const int64_t op[2] = {R, N}, os[3] = {R, N, S}, oe[2] = {R, E_loc}, om[3] = {R, R * T, E_loc};
    const int64_t o1[1] = {R};
    if (out->probs &&
        (s = moe_ep_expect(out->probs, "out probs", MOE_F32, 2, op, "[R, N]")) != MOE_OK)
        return s;
    if (!x_scales != !out->x_scales)
        return moe_fail(MOE_ERR_NULL, "out x_scales: must be given exactly when x_scales is");
    if (x_scales &&
        (s = moe_ep_expect(out->x_scales, "out x_scales", MOE_F32, 3, os, "[R, N, S]")) != MOE_OK)
        return s;
    s = moe_ep_expect(out->tokens_per_expert, "tokens_per_expert", MOE_I32, 2, oe, "[R, E_loc]");
    if (s != MOE_OK) return s;
    s = moe_ep_expect(out->padded_tokens_per_expert, "padded_tokens_per_expert", MOE_I64, 2, oe,
                      "[R, E_loc]");
    if (s != MOE_OK) return s;
    s = moe_ep_expect(out->row_id_map, "row_id_map", MOE_I32, 3, om, "[R, R*T, E_loc]");
    if (s != MOE_OK) return s;
    if ((s = moe_ep_expect(out->overflow_flag, "overflow_flag", MOE_I32, 1, o1, "[R]")) != MOE_OK)
        return s;
    if (out->num_dispatched &&
        (s = moe_ep_expect(out->num_dispatched, "num_dispatched", MOE_I32, 1, o1, "[R]")) != MOE_OK)
        return s;
    return MOE_OK;
}

moe_status moe_ref_hep_dispatch_with_permute(const moe_hep_config *cfg, const moe_tensor *x,
                                             const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                             const moe_tensor *topk_weights,
                                             const moe_hep_permuted *out)
{
    moe_status s = moe_ref_check_hep_dispatch_with_permute(cfg, x, x_scales, topk_ids, topk_weights, out);
    if (s != MOE_OK) return s;
    int R = cfg->world_size, E = cfg->num_experts, E_loc = E / R, pad = cfg->pad_multiple;
    int K = (int)topk_ids->shape[2];
    int64_t T = x->shape[1], H = x->shape[2], S = x_scales ? x_scales->shape[2] : 0, N = out->x->shape[1];
    const int32_t *ids = (const int32_t *)topk_ids->data;
    const float *w = (const float *)topk_weights->data;
    int64_t *count = malloc((size_t)E * sizeof *count);
    int64_t *offset = malloc((size_t)E * sizeof *offset), *next = malloc((size_t)E * sizeof *next);
    if (!count || !offset || !next) {
        free(count), free(offset), free(next);
        return moe_fail(MOE_ERR_NOMEM, "Hybrid-EP dispatch: work space not available");
    }
    expert_counts(ids, R * T * K, E, count);
    /* offset_k = sum over earlier local experts of ceil(count/pad)*pad
     * (hybrid_ep_backend.cuh:5158-5190) */
    int64_t ends[8]; /* world_size <= 8 (moe_ep_check_world) */
    moe_hep_offsets(count, R, E_loc, pad, offset, ends);
    for (int j = 0; j < R; j++) {
        int64_t sum = ends[j];
        if (!cfg->non_blocking && sum > N) {
            free(count), free(offset), free(next);
            return moe_fail(MOE_ERR_SHAPE,
                            "out x: %lld rows per rank, but rank %d needs %lld "
                            "(moe_hep_permute_capacity)",
                            (long long)N, j, (long long)sum);
        }
    }
    /* pad rows are zero with prob 0 and scales 0 (permute.cu:191-233); rows
     * past the padded total are garbage upstream and zero here */
    if (out->x->nbytes) memset(out->x->data, 0, out->x->nbytes);
    if (out->probs && out->probs->nbytes) memset(out->probs->data, 0, out->probs->nbytes);
    if (out->x_scales && out->x_scales->nbytes)
        memset(out->x_scales->data, 0, out->x_scales->nbytes);
    int32_t *map = (int32_t *)out->row_id_map->data;
    for (int64_t i = 0; i < R * R * T * E_loc; i++) map[i] = -1;
    memcpy(next, offset, (size_t)E * sizeof *next);
    /* blocking mode sizes the output to fit, so only non-blocking drops */
    int64_t limit = cfg->non_blocking ? N : INT64_MAX;
    size_t xrow = moe_dtype_row_bytes(x->dtype, H), srow = (size_t)S * sizeof(float);
    int32_t *ndisp = out->num_dispatched ? (int32_t *)out->num_dispatched->data : NULL;
    for (int j = 0; ndisp && j < R; j++) ndisp[j] = 0;
    /* global token g = s*T + t ascending is (global source rank, token)
     * ascending: the dense order of every rank (A.7, line 5412) */
    for (int64_t g = 0; g < R * T; g++) {
        const int32_t *row = ids + g * K;
        for (int j = 0; ndisp && j < R; j++) ndisp[j] += moe_ep_token_in_rank(row, K, E_loc, j);
        for (int k = 0; k < K; k++) {
            int32_t e = row[k];
            int j = e / E_loc, l = e % E_loc;
            int64_t r = next[e]++;
            /* a row id >= num_permuted_tokens is dropped (lines 5192-5222):
             * later experts first, highest dense indices first */
            if (r >= limit) continue;
            map[((int64_t)j * R * T + g) * E_loc + l] = (int32_t)r;
            memcpy((char *)out->x->data + (j * N + r) * (int64_t)xrow,
                   (const char *)x->data + g * (int64_t)xrow, xrow);
            if (out->probs) ((float *)out->probs->data)[j * N + r] = w[g * K + k];
            if (x_scales)
                memcpy((char *)out->x_scales->data + (j * N + r) * (int64_t)srow,
                       (const char *)x_scales->data + g * (int64_t)srow, srow);
        }
    }
    moe_hep_fill_counts(count, offset, R, E_loc, pad, limit, out);
    free(count), free(offset), free(next);
    return MOE_OK;
}

void moe_hep_offsets(const int64_t *count, int R, int E_loc, int pad, int64_t *offset, int64_t *end)
{
    for (int j = 0; j < R; j++) {
        int64_t sum = moe_hep_rank_offsets(count + (int64_t)j * E_loc, E_loc, pad, offset + (int64_t)j * E_loc);
        if (end) end[j] = sum;
    }
}

void moe_hep_fill_counts(const int64_t *count, const int64_t *offset, int R, int E_loc, int pad, int64_t limit,
                         const moe_hep_permuted *out)
{
    for (int j = 0; j < R; j++)
        moe_hep_fill_rank(count, offset, j, E_loc, pad, limit, (int32_t *)out->tokens_per_expert->data,
                          (int64_t *)out->padded_tokens_per_expert->data, (int32_t *)out->overflow_flag->data);
}

moe_status moe_ref_check_hep_combine_with_unpermute(const moe_hep_config *cfg, const moe_tensor *y,
                                                    const moe_tensor *row_id_map, const moe_tensor *probs,
                                                    const moe_tensor *out, const moe_tensor *out_probs)
{
    int E_loc, nodes;
    moe_status s = check_cfg(cfg, &E_loc, &nodes);
    if (s != MOE_OK) return s;
    int R = cfg->world_size, E = cfg->num_experts;
    const int64_t ys[3] = {R, -1, -1};
    if ((s = moe_ep_expect(y, "y", -1, 3, ys, "[R, N, H]")) != MOE_OK) return s;
    /* upstream combine takes 16-bit only (hybrid_ep.cu:223); f32 is our
     * extension, whose roundings are the identity */
    if (y->dtype != MOE_BF16 && y->dtype != MOE_F32)
        return moe_fail(MOE_ERR_DTYPE, "y: dtype %s, expected bf16 or f32",
                        moe_dtype_get(y->dtype)->name);
    int64_t N = y->shape[1], H = y->shape[2];
    const int64_t os[3] = {R, -1, H};
    if ((s = moe_ep_expect(out, "out", y->dtype, 3, os, "[R, T, H]")) != MOE_OK) return s;
    int64_t T = out->shape[1];
    const int64_t ms[3] = {R, R * T, E_loc}, ps[2] = {R, N}, qs[3] = {R, T, E};
    if ((s = moe_ep_expect(row_id_map, "row_id_map", MOE_I32, 3, ms, "[R, R*T, E_loc]")) != MOE_OK)
        return s;
    if (probs && (s = moe_ep_expect(probs, "probs", MOE_F32, 2, ps, "[R, N]")) != MOE_OK) return s;
    if (out_probs && !probs)
        return moe_fail(MOE_ERR_NULL, "probs: out_probs needs the permuted probs");
    if (out_probs &&
        (s = moe_ep_expect(out_probs, "out_probs", MOE_F32, 3, qs, "[R, T, E]")) != MOE_OK)
        return s;
    const int32_t *map = (const int32_t *)row_id_map->data;
    uint8_t *seen = calloc((size_t)(R * N > 0 ? R * N : 1), 1);
    if (!seen) return moe_fail(MOE_ERR_NOMEM, "Hybrid-EP combine: work space not available");
    for (int64_t i = 0; i < R * R * T * E_loc; i++) {
        int64_t j = i / (R * T * E_loc), r = map[i];
        if (r == -1) continue;
        if (r < 0 || r >= N || seen[j * N + r]) {
            free(seen);
            return moe_fail(
                MOE_ERR_INVALID_ARG, "row_id_map[%lld][%lld][%lld] = %lld: %s", (long long)j,
                (long long)(i / E_loc % (R * T)), (long long)(i % E_loc), (long long)r,
                (r < 0 || r >= N) ? "not -1 or a row in [0, N)" : "row named twice on this rank");
        }
        seen[j * N + r] = 1;
    }
    free(seen);
    return MOE_OK;
}

moe_status moe_ref_hep_combine_with_unpermute(const moe_hep_config *cfg, const moe_tensor *y,
                                              const moe_tensor *row_id_map, const moe_tensor *probs,
                                              moe_tensor *out, moe_tensor *out_probs)
{
    moe_status s = moe_ref_check_hep_combine_with_unpermute(cfg, y, row_id_map, probs, out, out_probs);
    if (s != MOE_OK) return s;
    int R = cfg->world_size, E = cfg->num_experts, E_loc = E / R, rpn = cfg->num_ranks_per_node;
    int64_t N = y->shape[1], H = y->shape[2], T = out->shape[1];
    const int32_t *map = (const int32_t *)row_id_map->data;

    moe_dtype d = y->dtype;
    for (int64_t g = 0; g < R * T; g++) {
        /* own node first, its ranks in local-rank order; then the other
         * nodes from home-1 downwards, wrapping, each node's partial summed
         * and rounded on that node (A.7 "Combine across ranks";
         * dispatch_core.h, shared with CUDA) */
        for (int64_t c = 0; c < H; c++)
            moe_s_store(d, out->data, g * H + c,
                        moe_hep_combine_channel(d, y->data, map + g * E_loc, R * T * E_loc, R, E_loc, rpn,
                                                (int)(g / T) / rpn, N, H, c));
        /* backward probs: gathered, not summed, into the dense [T, E] row */
        for (int e = 0; out_probs && e < E; e++) {
            int j = e / E_loc;
            int32_t r = map[((int64_t)j * R * T + g) * E_loc + e % E_loc];
            ((float *)out_probs->data)[g * E + e] =
                r >= 0 ? ((const float *)probs->data)[j * N + r] : 0.0f;
        }
    }
    return MOE_OK;
}

moe_status moe_hep_buffer_sizes(int64_t hidden, int64_t max_tokens_per_rank, int experts_per_rank,
                                int num_ranks_per_node, int num_nodes, int dtype_bytes, int use_fp8,
                                moe_hep_buffers *out)
{
    if (hidden < 0)
        return moe_fail(MOE_ERR_INVALID_ARG, "hidden %lld: must be >= 0", (long long)hidden);
    if (max_tokens_per_rank < 0)
        return moe_fail(MOE_ERR_INVALID_ARG, "max_tokens_per_rank %lld: must be >= 0",
                        (long long)max_tokens_per_rank);
    if (experts_per_rank < 1)
        return moe_fail(MOE_ERR_INVALID_ARG, "experts_per_rank %d: must be >= 1", experts_per_rank);
    if (num_ranks_per_node < 1)
        return moe_fail(MOE_ERR_INVALID_ARG, "num_ranks_per_node %d: must be >= 1",
                        num_ranks_per_node);
    if (num_nodes < 1)
        return moe_fail(MOE_ERR_INVALID_ARG, "num_nodes %d: must be >= 1", num_nodes);
    if (dtype_bytes < 1)
        return moe_fail(MOE_ERR_INVALID_ARG, "dtype_bytes %d: must be >= 1", dtype_bytes);
    if (!out) return moe_fail(MOE_ERR_NULL, "out: must not be NULL");
    uint64_t H = (uint64_t)hidden, Tm = (uint64_t)max_tokens_per_rank, b = (uint64_t)dtype_bytes;
    uint64_t probs_per_token, remote = (uint64_t)num_nodes - 1, mt, v[5], rt;
    /* worst case: every token of every rank routed to this rank (4.2) */
    int ovf = __builtin_mul_overflow(Tm, (uint64_t)num_ranks_per_node * (uint64_t)num_nodes, &mt);
    ovf |= __builtin_mul_overflow((uint64_t)experts_per_rank * (uint64_t)num_ranks_per_node, 4,
                                  &probs_per_token);
    ovf |= __builtin_mul_overflow(mt, H, &v[0]);
    ovf |= __builtin_mul_overflow(v[0], b, &v[0]);
    ovf |= __builtin_mul_overflow(mt, probs_per_token, &v[1]);
    ovf |= __builtin_mul_overflow(mt, H / 128 * 4, &v[2]);
    if (!use_fp8) v[2] = 0;
    ovf |= __builtin_mul_overflow(Tm, remote, &rt);
    ovf |= __builtin_mul_overflow(rt, H, &v[3]);
    ovf |= __builtin_mul_overflow(v[3], b, &v[3]);
    ovf |= __builtin_mul_overflow(rt, probs_per_token, &v[4]);
    uint64_t total = 0;
    for (int i = 0; i < 5; i++) ovf |= __builtin_add_overflow(total, v[i], &total);
    if (ovf) return moe_fail(MOE_ERR_NOMEM, "moe_hep_buffer_sizes: size overflows 64 bits");
    out->max_tokens = mt;
    out->token_bytes = v[0];
    out->prob_bytes = v[1];
    out->scale_bytes = v[2];
    out->rdma_token_bytes = v[3]; /* zero on one node: rt = 0 */
    out->rdma_prob_bytes = v[4];
    out->total_bytes = total;
    return MOE_OK;
}
