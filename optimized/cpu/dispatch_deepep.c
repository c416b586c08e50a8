/* CPU backend: DeepEP normal mode.
 *   layout    tokens in parallel (static chunks) with per-thread integer
 *             counters summed afterwards (integer sums: order-free)
 *   dispatch  each token's destination ranks as a bit mask (in parallel);
 *             a token's row on rank j is the number of earlier tokens
 *             (source rank, source token ascending) sent to j, by a serial
 *             prefix over the masks; then the rows, scales, ids and weights
 *             are copied with tokens in parallel and the unused tail filled
 *   combine   the handle's row index as the reference builds it, then
 *             tokens in parallel, every channel summed in the reference's
 *             order (biases, ranks ascending, per-node partials rounded)
 * Inputs the reference refuses only while it works (more received tokens
 * than rows, a byte of is_token_in_rank that is not 0 or 1) go to the
 * reference, which reports them. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "cpu.h"
#include "cpu_internal.h"
#include "stage_checks.h"

/* bit j set when the token's row of ids has an expert on rank j */
static uint8_t rank_mask(const int32_t *row, int K, int E_loc)
{
    uint8_t m = 0;
    for (int k = 0; k < K; k++)
        if (row[k] >= 0) m |= (uint8_t)(1u << (row[k] / E_loc));
    return m;
}

moe_status moe_cpu_deepep_layout(const moe_deepep_config *cfg, const moe_tensor *topk_ids, const moe_deepep_layout *out)
{
    moe_status s = moe_ref_check_deepep_layout(cfg, topk_ids, out);
    if (s != MOE_OK) return s;
    int R = cfg->world_size, E = cfg->num_experts, rpn = cfg->num_ranks_per_node;
    int E_loc = E / R, nodes = R / rpn, K = (int)topk_ids->shape[2];
    int64_t T = topk_ids->shape[1], n = R * T;
    const int32_t *ids = (const int32_t *)topk_ids->data;
    int32_t *per_e = (int32_t *)out->num_tokens_per_expert->data;
    int32_t *per_r = (int32_t *)out->num_tokens_per_rank->data;
    int32_t *per_n = out->num_tokens_per_node ? (int32_t *)out->num_tokens_per_node->data : NULL;
    uint8_t *in_rank = (uint8_t *)out->is_token_in_rank->data;
    /* per source rank: E pair counts, R token counts, nodes token counts */
    size_t per = (size_t)E + (size_t)R + (size_t)nodes, all = (size_t)R * per;
    int maxt = n * K >= CPU_PAR_IDX_MIN ? omp_get_max_threads() : 1;
    int64_t *cnt = calloc((size_t)maxt * all, sizeof *cnt);
    if (!cnt) return moe_fail(MOE_ERR_NOMEM, "deepep layout: per-thread counters");
    int used = 1;
#pragma omp parallel num_threads(maxt)
    {
        int nt = omp_get_num_threads(), me = omp_get_thread_num();
#pragma omp single
        used = nt;
        int64_t lo, hi, *c = cnt + (size_t)me * all;
        cpu_chunk(n, me, nt, &lo, &hi);
        for (int64_t g = lo; g < hi; g++) {
            const int32_t *row = ids + g * K;
            int64_t *cs = c + (size_t)(g / T) * per;
            for (int k = 0; k < K; k++)
                if (row[k] >= 0) cs[row[k]]++;
            uint8_t m = rank_mask(row, K, E_loc);
            for (int j = 0; j < R; j++) {
                int hit = (m >> j) & 1;
                in_rank[g * R + j] = (uint8_t)hit;
                cs[E + j] += hit;
            }
            for (int nd = 0; nd < nodes; nd++)
                cs[E + R + nd] += ((m >> (nd * rpn)) & ((1u << rpn) - 1u)) != 0;
        }
    }
    for (int64_t src = 0; src < R; src++) {
        int64_t tot[8 + 8] = {0};
        for (int e = 0; e < E; e++) {
            int64_t v = 0;
            for (int t = 0; t < used; t++) v += cnt[(size_t)t * all + (size_t)src * per + e];
            per_e[src * E + e] = (int32_t)v;
        }
        for (int i = 0; i < R + nodes; i++)
            for (int t = 0; t < used; t++) tot[i] += cnt[(size_t)t * all + (size_t)src * per + E + i];
        for (int j = 0; j < R; j++) per_r[src * R + j] = (int32_t)tot[j];
        for (int nd = 0; per_n && nd < nodes; nd++) per_n[src * nodes + nd] = (int32_t)tot[R + nd];
    }
    free(cnt);
    return MOE_OK;
}

moe_status moe_cpu_deepep_dispatch(const moe_deepep_config *cfg, const moe_tensor *x, const moe_tensor *x_scales, const moe_tensor *topk_ids, const moe_tensor *topk_weights, const moe_deepep_recv *out)
{
    moe_status s = moe_ref_check_deepep_dispatch(cfg, x, x_scales, topk_ids, topk_weights, out);
    if (s != MOE_OK) return s;
    int R = cfg->world_size, E_loc = cfg->num_experts / R, K = (int)topk_ids->shape[2];
    int64_t T = x->shape[1], H = x->shape[2], S = x_scales ? x_scales->shape[2] : 0, N = out->x->shape[1];
    int64_t n = R * T;
    const int32_t *ids = (const int32_t *)topk_ids->data;
    const float *w = (const float *)topk_weights->data;
    uint8_t *mask = malloc((size_t)(n ? n : 1));
    int32_t *rowj = malloc((size_t)(n ? n : 1) * (size_t)R * sizeof *rowj);
    if (!mask || !rowj) {
        free(mask), free(rowj);
        return moe_fail(MOE_ERR_NOMEM, "deepep dispatch: work space");
    }
#pragma omp parallel for schedule(static) if (n * K >= CPU_PAR_IDX_MIN)
    for (int64_t g = 0; g < n; g++) mask[g] = rank_mask(ids + g * K, K, E_loc);
    int64_t nrecv[8] = {0}, pfx[8 * 8] = {0};
    for (int64_t g = 0; g < n; g++) {
        for (int j = 0; j < R; j++) rowj[g * R + j] = (mask[g] >> j) & 1 ? (int32_t)nrecv[j]++ : -1;
        if ((g + 1) % T == 0)
            for (int j = 0; j < R; j++) pfx[(g / T) * R + j] = nrecv[j];
    }
    for (int j = 0; j < R; j++)
        if (nrecv[j] > N) { /* the reference names the rank (and writes nothing) */
            free(mask), free(rowj);
            return moe_ref_deepep_dispatch(cfg, x, x_scales, topk_ids, topk_weights, out);
        }
    if (out->rank_prefix_matrix)
        for (int i = 0; i < R * R; i++) ((int32_t *)out->rank_prefix_matrix->data)[i] = (int32_t)pfx[i];
    size_t xrow = moe_dtype_row_bytes(x->dtype, H), srow = x_scales ? (size_t)S * 4 : 0;
    int32_t *rids = (int32_t *)out->topk_ids->data, *src_idx = (int32_t *)out->src_idx->data;
    float *rw = (float *)out->topk_weights->data;
    int32_t *per_e = (int32_t *)out->num_recv_per_expert->data;
    char *ox = (char *)out->x->data, *os = out->x_scales ? (char *)out->x_scales->data : NULL;
    int64_t pe[8 * 64];
    int64_t *pec = R * E_loc <= 8 * 64 ? pe : calloc((size_t)R * (size_t)E_loc, sizeof *pec);
    if (!pec) {
        free(mask), free(rowj);
        return moe_fail(MOE_ERR_NOMEM, "deepep dispatch: counts");
    }
    for (int i = 0; i < R * E_loc; i++) pec[i] = 0;
    /* pairs per (rank, local expert): integer counts, order-free */
    for (int64_t g = 0; g < n; g++)
        for (int k = 0; k < K; k++) {
            int32_t e = ids[g * K + k];
            if (e >= 0) pec[e]++; /* e = j*E_loc + local */
        }
    int par = n * (int64_t)(xrow + 1) >= CPU_PAR_MIN * 4;
#pragma omp parallel if (par)
    {
        /* rows past num_recv: what num_worst_tokens leaves (ids -1), zero */
#pragma omp for schedule(static) nowait
        for (int64_t o = 0; o < R * N; o++) {
            int j = (int)(o / N);
            if (o % N < nrecv[j]) continue;
            memset(ox + (size_t)o * xrow, 0, xrow);
            if (os) memset(os + (size_t)o * srow, 0, srow);
            src_idx[o] = -1;
            for (int k = 0; k < K; k++) rids[o * K + k] = -1, rw[o * K + k] = 0.0f;
        }
#pragma omp for schedule(static)
        for (int64_t g = 0; g < n; g++) {
            const int32_t *trow = ids + g * K;
            for (int j = 0; j < R; j++) {
                if (rowj[g * R + j] < 0) continue;
                int64_t o = j * N + rowj[g * R + j];
                memcpy(ox + (size_t)o * xrow, (const char *)x->data + (size_t)g * xrow, xrow);
                if (os) memcpy(os + (size_t)o * srow, (const char *)x_scales->data + (size_t)g * srow, srow);
                src_idx[o] = (int32_t)(g % T);
                for (int k = 0; k < K; k++) {
                    int32_t e = trow[k];
                    if (e < 0 || e / E_loc != j) {
                        rids[o * K + k] = -1, rw[o * K + k] = 0.0f;
                    } else {
                        rids[o * K + k] = e - j * E_loc;
                        rw[o * K + k] = w[g * K + k];
                    }
                }
            }
        }
    }
    int a = cfg->expert_alignment;
    for (int j = 0; j < R; j++) {
        ((int32_t *)out->num_recv->data)[j] = (int32_t)nrecv[j];
        for (int e = 0; e < E_loc; e++) per_e[j * E_loc + e] = (int32_t)((pec[j * E_loc + e] + a - 1) / a * a);
    }
    if (pec != pe) free(pec);
    free(mask), free(rowj);
    return MOE_OK;
}

moe_status moe_cpu_deepep_combine(const moe_deepep_config *cfg, const moe_tensor *x, const moe_tensor *topk_weights, const moe_tensor *is_token_in_rank, const moe_tensor *bias0, const moe_tensor *bias1, moe_tensor *combined_x, moe_tensor *combined_topk_weights)
{
    moe_status s = moe_ref_check_deepep_combine(cfg, x, topk_weights, is_token_in_rank, bias0, bias1, combined_x,
                                                combined_topk_weights);
    if (s != MOE_OK) return s;
    int R = cfg->world_size, rpn = cfg->num_ranks_per_node, nodes = R / rpn;
    int64_t N = x->shape[1], H = x->shape[2], K = topk_weights ? topk_weights->shape[2] : 0;
    int64_t T = is_token_in_rank->shape[1], n = R * T;
    const uint8_t *in_rank = (const uint8_t *)is_token_in_rank->data;
    int32_t *row_of = malloc((size_t)(n * R > 0 ? n * R : 1) * sizeof *row_of);
    if (!row_of) return moe_fail(MOE_ERR_NOMEM, "combine: row map not available");
    int64_t row[8] = {0};
    int bad = 0;
    for (int64_t g = 0; g < n; g++)
        for (int j = 0; j < R; j++) {
            uint8_t b = in_rank[g * R + j];
            bad |= b > 1;
            row_of[g * R + j] = b ? (int32_t)row[j]++ : -1;
        }
    for (int j = 0; j < R; j++) bad |= row[j] > N;
    if (bad) { /* the reference reports the first bad byte or rank */
        free(row_of);
        return moe_ref_deepep_combine(cfg, x, topk_weights, is_token_in_rank, bias0, bias1, combined_x,
                                      combined_topk_weights);
    }
    moe_dtype d = x->dtype;
    int failed = 0;
#pragma omp parallel if (n * H * R >= CPU_PAR_MIN)
    {
        float *buf = malloc((size_t)(H ? H : 1) * 3 * sizeof *buf);
        if (!buf) {
#pragma omp atomic write
            failed = 1;
        }
        float *v = buf, *p = buf + H, *y = buf + 2 * H;
#pragma omp for schedule(static)
        for (int64_t g = 0; g < n; g++) {
            if (!buf) continue;
            const int32_t *rows = row_of + g * R;
            /* bias0 + bias1 first, a missing bias reading as 0 (A.4 step 1) */
            for (int64_t c = 0; c < H; c++) v[c] = 0.0f, p[c] = 0.0f;
            if (bias0) cpu_load_row(d, bias0->data, g * H, H, v);
            if (bias1) cpu_load_row(d, bias1->data, g * H, H, p);
            for (int64_t c = 0; c < H; c++) v[c] = v[c] + p[c];
            if (nodes == 1) {
                for (int j = 0; j < R; j++) {
                    if (rows[j] < 0) continue;
                    cpu_load_row(d, x->data, (j * N + rows[j]) * H, H, y);
                    for (int64_t c = 0; c < H; c++) v[c] += y[c];
                }
            } else {
                for (int nd = 0; nd < nodes; nd++) {
                    int any = 0;
                    for (int64_t c = 0; c < H; c++) p[c] = 0.0f;
                    for (int j = nd * rpn; j < (nd + 1) * rpn; j++) {
                        if (rows[j] < 0) continue;
                        cpu_load_row(d, x->data, (j * N + rows[j]) * H, H, y);
                        for (int64_t c = 0; c < H; c++) p[c] += y[c];
                        any = 1;
                    }
                    if (any)
                        for (int64_t c = 0; c < H; c++) v[c] += cpu_round_to(d, p[c]);
                }
            }
            cpu_store_row(d, combined_x->data, g * H, H, v);
            /* weights: f32 sums over the same ranks, no rounding */
            for (int64_t k = 0; k < K; k++) {
                const float *rw = (const float *)topk_weights->data;
                float sum = 0.0f;
                for (int nd = 0; nd < nodes; nd++) {
                    float q = 0.0f;
                    for (int j = nd * rpn; j < (nd + 1) * rpn; j++)
                        if (rows[j] >= 0) q += rw[(j * N + rows[j]) * K + k];
                    sum += q;
                }
                ((float *)combined_topk_weights->data)[g * K + k] = sum;
            }
        }
        free(buf);
    }
    free(row_of);
    if (failed) return moe_fail(MOE_ERR_NOMEM, "combine: per-thread rows");
    return MOE_OK;
}
