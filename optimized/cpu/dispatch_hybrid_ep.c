/* CPU backend: Hybrid-EP dispatch_with_permute / combine_with_unpermute.
 *   dispatch  each pair's rank within its expert by a counting sort over
 *             the pairs in (global token, slot) order (the reference's
 *             walk), added to the expert's padded offset; rows at or past
 *             the non-blocking capacity are dropped as there. Then pairs in
 *             parallel copy their rows, probs and scales; pad rows and rows
 *             past the layout are zeroed in parallel
 *   combine   tokens in parallel; each channel is summed in the
 *             reference's order (per rank: its rows over local experts,
 *             rounded; the home node's ranks, then the other nodes' rounded
 *             partials from home-1 downwards)
 * In blocking mode, a layout larger than the output goes to the reference,
 * which reports it. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "cpu.h"
#include "cpu_internal.h"
#include "stage_checks.h"


moe_status moe_cpu_hep_dispatch_with_permute(const moe_hep_config *cfg, const moe_tensor *x, const moe_tensor *x_scales, const moe_tensor *topk_ids, const moe_tensor *topk_weights, const moe_hep_permuted *out)
{
    moe_status s = moe_ref_check_hep_dispatch_with_permute(cfg, x, x_scales, topk_ids, topk_weights, out);
    if (s != MOE_OK) return s;
    int R = cfg->world_size, E = cfg->num_experts, E_loc = E / R, pad = cfg->pad_multiple;
    int K = (int)topk_ids->shape[2];
    int64_t T = x->shape[1], H = x->shape[2], S = x_scales ? x_scales->shape[2] : 0, N = out->x->shape[1];
    int64_t n = R * T * K;
    const int32_t *ids = (const int32_t *)topk_ids->data;
    const float *w = (const float *)topk_weights->data;
    int32_t *rank = malloc((size_t)(n ? n : 1) * sizeof *rank);
    int64_t *count = malloc((size_t)E * 2 * sizeof *count);
    if (!rank || !count) {
        free(rank), free(count);
        return moe_fail(MOE_ERR_NOMEM, "Hybrid-EP dispatch: work space not available");
    }
    int64_t *offset = count + E;
    s = cpu_bucket_rank(ids, n, E, rank, count);
    if (s != MOE_OK) {
        free(rank), free(count);
        return s;
    }
    int64_t sum_max = 0;
    int64_t end[8];
    moe_hep_offsets(count, R, E_loc, pad, offset, end);
    for (int j = 0; j < R; j++)
        if (end[j] > sum_max) sum_max = end[j];
    if (!cfg->non_blocking && sum_max > N) { /* the reference names the rank */
        free(rank), free(count);
        return moe_ref_hep_dispatch_with_permute(cfg, x, x_scales, topk_ids, topk_weights, out);
    }
    int64_t limit = cfg->non_blocking ? N : INT64_MAX;
    size_t xrow = moe_dtype_row_bytes(x->dtype, H), srow = (size_t)S * sizeof(float);
    char *ox = (char *)out->x->data, *os = out->x_scales ? (char *)out->x_scales->data : NULL;
    float *probs = out->probs ? (float *)out->probs->data : NULL;
    int32_t *map = (int32_t *)out->row_id_map->data;
    int64_t nmap = (int64_t)R * R * T * E_loc;
#pragma omp parallel if (n * (int64_t)(xrow + 1) >= CPU_PAR_MIN * 4)
    {
        /* rows no pair takes (pads, past the layout): zero, prob 0, scales 0 */
#pragma omp for schedule(static) nowait
        for (int64_t i = 0; i < (int64_t)R * E_loc + R; i++) {
            int64_t a, b;
            if (i < (int64_t)R * E_loc) {
                int64_t e = i, j = e / E_loc, l = e % E_loc;
                a = offset[e] + count[e];
                b = l + 1 < E_loc ? offset[e + 1] : end[j];
                a += j * N, b += j * N;
                int64_t cap = (j + 1) * N;
                if (a > cap) a = cap;
                if (b > cap) b = cap;
            } else {
                int64_t j = i - (int64_t)R * E_loc;
                a = j * N + (end[j] < N ? end[j] : N);
                b = (j + 1) * N;
            }
            if (b <= a) continue;
            memset(ox + (size_t)a * xrow, 0, (size_t)(b - a) * xrow);
            if (probs) memset(probs + a, 0, (size_t)(b - a) * sizeof *probs);
            if (os) memset(os + (size_t)a * srow, 0, (size_t)(b - a) * srow);
        }
#pragma omp for schedule(static)
        for (int64_t i = 0; i < nmap; i++) map[i] = -1;
#pragma omp for schedule(static)
        for (int64_t i = 0; i < n; i++) {
            int64_t g = i / K;
            int32_t e = ids[i];
            int j = e / E_loc, l = e % E_loc;
            int64_t r = offset[e] + rank[i];
            if (r >= limit) continue; /* dropped: later experts, highest dense indices first */
            map[((int64_t)j * R * T + g) * E_loc + l] = (int32_t)r;
            memcpy(ox + (size_t)(j * N + r) * xrow, (const char *)x->data + (size_t)g * xrow, xrow);
            if (probs) probs[j * N + r] = w[i];
            if (os) memcpy(os + (size_t)(j * N + r) * srow, (const char *)x_scales->data + (size_t)g * srow, srow);
        }
    }
    if (out->num_dispatched) {
        int32_t *ndisp = (int32_t *)out->num_dispatched->data;
        for (int j = 0; j < R; j++) {
            int64_t c = 0;
#pragma omp parallel for schedule(static) reduction(+ : c) if (R * T * K >= CPU_PAR_IDX_MIN)
            for (int64_t g = 0; g < R * T; g++) c += moe_ep_token_in_rank(ids + g * K, K, E_loc, j);
            ndisp[j] = (int32_t)c;
        }
    }
    moe_hep_fill_counts(count, offset, R, E_loc, pad, limit, out);
    free(rank), free(count);
    return MOE_OK;
}

moe_status moe_cpu_hep_combine_with_unpermute(const moe_hep_config *cfg, const moe_tensor *y, const moe_tensor *row_id_map, const moe_tensor *probs, moe_tensor *out, moe_tensor *out_probs)
{
    moe_status s = moe_ref_check_hep_combine_with_unpermute(cfg, y, row_id_map, probs, out, out_probs);
    if (s != MOE_OK) return s;
    int R = cfg->world_size, E = cfg->num_experts, E_loc = E / R, rpn = cfg->num_ranks_per_node;
    int nodes = R / rpn;
    int64_t N = y->shape[1], H = y->shape[2], T = out->shape[1];
    const int32_t *map = (const int32_t *)row_id_map->data;
    moe_dtype d = y->dtype;
    int failed = 0;
#pragma omp parallel if (R * T * H >= CPU_PAR_MIN)
    {
        float *buf = malloc((size_t)(H ? H : 1) * 4 * sizeof *buf);
        if (!buf) {
#pragma omp atomic write
            failed = 1;
        }
        float *acc = buf, *q = buf + H, *p = buf + 2 * H, *v = buf + 3 * H;
#pragma omp for schedule(static)
        for (int64_t g = 0; g < R * T; g++) {
            if (!buf) continue;
            int home = (int)(g / T) / rpn;
            for (int64_t c = 0; c < H; c++) acc[c] = 0.0f;
            for (int step = 0; step < nodes; step++) {
                int nd = ((home - step) % nodes + nodes) % nodes, any = 0;
                for (int64_t c = 0; c < H; c++) q[c] = 0.0f;
                for (int j = nd * rpn; j < (nd + 1) * rpn; j++) {
                    const int32_t *m = map + ((int64_t)j * R * T + g) * E_loc;
                    int has = 0;
                    for (int64_t c = 0; c < H; c++) p[c] = 0.0f;
                    for (int l = 0; l < E_loc; l++) {
                        if (m[l] < 0) continue;
                        cpu_load_row(d, y->data, (j * N + m[l]) * H, H, v);
                        for (int64_t c = 0; c < H; c++) p[c] += v[c];
                        has = 1;
                    }
                    if (!has) continue;
                    if (step == 0)
                        for (int64_t c = 0; c < H; c++) acc[c] += cpu_round_to(d, p[c]);
                    else
                        for (int64_t c = 0; c < H; c++) q[c] += cpu_round_to(d, p[c]);
                    any = 1;
                }
                if (step > 0 && any)
                    for (int64_t c = 0; c < H; c++) acc[c] += cpu_round_to(d, q[c]);
            }
            cpu_store_row(d, out->data, g * H, H, acc);
            for (int e = 0; out_probs && e < E; e++) {
                int j = e / E_loc;
                int32_t r = map[((int64_t)j * R * T + g) * E_loc + e % E_loc];
                ((float *)out_probs->data)[g * E + e] = r >= 0 ? ((const float *)probs->data)[j * N + r] : 0.0f;
            }
        }
        free(buf);
    }
    if (failed) return moe_fail(MOE_ERR_NOMEM, "Hybrid-EP combine: per-thread rows");
    return MOE_OK;
}
