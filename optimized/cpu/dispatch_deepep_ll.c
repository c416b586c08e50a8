/* CPU backend: DeepEP low-latency mode.
 *   dispatch  each pair's row in its expert by a counting sort over the
 *             pairs in (source rank, token, slot) order (the reference's
 *             walk); then tokens in parallel: the FP8 cast of the token
 *             once (per 128 channels: max |x| with NaN never winning, the
 *             scales of moe_deepep_ll_scales -- the reference's rule --,
 *             e4m3 SAT RNE of x * scale with the reference's NaN sign), its
 *             rows and scales copied to every expert it selects; the rows
 *             past each expert's count are zeroed in parallel
 *   combine   the handle (src_info, layout_range) is checked and indexed
 *             per expert in parallel, as the reference builds it; the
 *             weighted fmaf combine runs tokens in parallel
 * A handle the reference refuses goes to the reference, which reports it. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "cpu.h"
#include "cpu_internal.h"
#include "cpu_vmath.h"
#include "stage_checks.h"

/* moe_deepep_ll_cast_group, four lanes at a time: max |f| (a maximum of
 * magnitudes, NaN never winning, is the same in any order), the
 * reference's scales (moe_deepep_ll_scales), then per element
 * e4m3 SAT RNE of canon(f * scale) with cpu_vmath.h's encoder. */
static void cast_group(const float *f, int round_scale, uint8_t *q, float *scale_inv)
{
    float amax = 0.0f, scale;
    cpu_v4f a4 = CPU_V4(0.0f);
    for (int i = 0; i < MOE_DEEPEP_LL_GROUP; i += 4) {
        cpu_v4f ab = (cpu_v4f)((cpu_v4u)cpu_vload(f + i) & 0x7FFFFFFFu);
        a4 = cpu_vsel(ab > a4, ab, a4);
    }
    for (int l = 0; l < 4; l++)
        if (a4[l] > amax) amax = a4[l];
    moe_deepep_ll_scales(amax, round_scale, &scale, scale_inv);
    const cpu_v4f s4 = CPU_V4(scale);
    for (int i = 0; i < MOE_DEEPEP_LL_GROUP; i += 4) {
        cpu_v4f x = cpu_vload(f + i), v = x * s4;
        /* moe_q_canon_nan: the input's NaN, quieted, or + */
        cpu_v4f cn = cpu_vsel(x != x, (cpu_v4f)((cpu_v4u)x | 0x00400000u), (cpu_v4f)CPU_V4U(0x7FC00000u));
        cpu_v4u c = cpu_venc_e4m3(cpu_vsel(v != v, cn, v));
        q[i] = (uint8_t)c[0], q[i + 1] = (uint8_t)c[1], q[i + 2] = (uint8_t)c[2], q[i + 3] = (uint8_t)c[3];
    }
}

moe_status moe_cpu_deepep_ll_dispatch(const moe_deepep_ll_config *cfg, const moe_tensor *x, const moe_tensor *topk_ids, const moe_deepep_ll_recv *out)
{
    moe_status s = moe_ref_check_deepep_ll_dispatch(cfg, x, topk_ids, out);
    if (s != MOE_OK) return s;
    int R = cfg->world_size, E = cfg->num_experts, E_loc = E / R, K = (int)topk_ids->shape[2];
    int64_t T = x->shape[1], H = x->shape[2], Tall = (int64_t)R * cfg->max_tokens_per_rank;
    int64_t S = cfg->use_ue8m0 ? H / 512 : H / 128, n = R * T;
    (void)E_loc;
    const int32_t *ids = (const int32_t *)topk_ids->data;
    int32_t *pos = malloc((size_t)(n * K > 0 ? n * K : 1) * sizeof *pos);
    int64_t *count = malloc((size_t)E * sizeof *count);
    int64_t *blk = calloc((size_t)E * (size_t)R, sizeof *blk);
    if (!pos || !count || !blk) {
        free(pos), free(count), free(blk);
        return moe_fail(MOE_ERR_NOMEM, "LL dispatch: work space not available");
    }
    s = cpu_ep_batched_positions(ids, R, T, K, 1, E, pos, count);
    if (s != MOE_OK) {
        free(pos), free(count), free(blk);
        return s;
    }
    for (int64_t st = 0; st < n; st++) /* rows per (expert, source rank): integer counts */
        for (int k = 0; k < K; k++)
            if (ids[st * K + k] >= 0) blk[ids[st * K + k] * R + st / T]++;
    size_t xrow = moe_dtype_row_bytes(out->x->dtype, H);
    char *ox = (char *)out->x->data;
    int32_t *src_info = (int32_t *)out->src_info->data;
    int fp8 = cfg->use_fp8, ue8m0 = cfg->use_ue8m0, failed = 0;
    size_t srow = fp8 ? (size_t)S * 4 : 0;
    char *os = fp8 ? (char *)out->x_scales->data : NULL;
#pragma omp parallel if (n * H >= CPU_PAR_MIN)
    {
        uint8_t *q = NULL;
        float *f = NULL, *sinv = NULL;
        if (fp8) {
            q = malloc((size_t)(H ? H : 1));
            f = malloc((size_t)(H ? H : 1) * sizeof *f);
            sinv = malloc((size_t)(H / 128 + 1) * sizeof *sinv);
            if (!q || !f || !sinv) {
#pragma omp atomic write
                failed = 1;
            }
        }
        /* rows past each expert's count: zero, src_info -1 */
#pragma omp for schedule(static) nowait
        for (int64_t o = 0; o < E * Tall; o++) {
            if (o % Tall < count[o / Tall]) continue;
            memset(ox + (size_t)o * xrow, 0, xrow);
            if (os) memset(os + (size_t)o * srow, 0, srow);
            src_info[o] = -1;
        }
#pragma omp for schedule(static)
        for (int64_t st = 0; st < n; st++) {
            const int32_t *row = ids + st * K;
            int any = 0;
            for (int k = 0; k < K; k++) any |= row[k] >= 0;
            if (!any || (fp8 && (!q || !f || !sinv))) continue;
            if (fp8) {
                cpu_load_row(x->dtype, x->data, st * H, H, f);
                for (int64_t gi = 0; gi < H / 128; gi++) cast_group(f + gi * 128, cfg->round_scale, q + gi * 128, sinv + gi);
            }
            const void *src = fp8 ? (const void *)q : (const char *)x->data + st * (int64_t)xrow;
            for (int k = 0; k < K; k++) {
                int32_t e = row[k];
                if (e < 0) continue;
                int64_t o = (int64_t)e * Tall + pos[st * K + k];
                memcpy(ox + (size_t)o * xrow, src, xrow);
                src_info[o] = (int32_t)(st % T);
                if (ue8m0) {
                    int32_t *d = (int32_t *)os + o * S;
                    for (int64_t p = 0; p < S; p++) {
                        uint32_t v = 0;
                        for (int i = 0; i < 4; i++) v |= (uint32_t)moe_deepep_ll_ue8m0(sinv[p * 4 + i]) << (8 * i);
                        d[p] = (int32_t)v;
                    }
                } else if (fp8) {
                    memcpy(os + (size_t)o * srow, sinv, srow);
                }
            }
        }
        free(q), free(f), free(sinv);
    }
    if (!failed) {
        int32_t *cnt = (int32_t *)out->count->data;
        int64_t *range = (int64_t *)out->layout_range->data;
        for (int e = 0; e < E; e++) {
            cnt[e] = (int32_t)count[e];
            int64_t begin = 0;
            for (int r = 0; r < R; r++) {
                range[e * R + r] = (int64_t)((uint64_t)begin << 32 | (uint64_t)blk[e * R + r]);
                begin += blk[e * R + r];
            }
        }
    }
    free(pos), free(count), free(blk);
    if (failed) return moe_fail(MOE_ERR_NOMEM, "LL dispatch: work space not available");
    return MOE_OK;
}

moe_status moe_cpu_deepep_ll_combine(const moe_deepep_ll_config *cfg, const moe_tensor *y, const moe_tensor *src_info, const moe_tensor *layout_range, const moe_tensor *topk_ids, const moe_tensor *topk_weights, moe_tensor *out)
{
    moe_status s = moe_ref_check_deepep_ll_combine(cfg, y, src_info, layout_range, topk_ids, topk_weights, out);
    if (s != MOE_OK) return s;
    int R = cfg->world_size, E = cfg->num_experts;
    int64_t Tall = (int64_t)R * cfg->max_tokens_per_rank, T = topk_ids->shape[1];
    size_t n = (size_t)E * (size_t)(R * T);
    int32_t *row_of = malloc((n ? n : 1) * sizeof *row_of);
    if (!row_of) return moe_fail(MOE_ERR_NOMEM, "LL combine: row index not available");
    const int32_t *info = (const int32_t *)src_info->data;
    const int64_t *range = (const int64_t *)layout_range->data;
    int bad = 0, nomem = 0;
    /* each expert's rows index (source rank, token) of that expert only */
#pragma omp parallel if ((int64_t)E * Tall >= CPU_PAR_IDX_MIN) reduction(| : bad, nomem)
    {
        uint8_t *used = malloc((size_t)(Tall ? Tall : 1));
        if (!used) nomem = 1;
#pragma omp for schedule(static)
        for (int e = 0; e < E; e++) {
            if (!used || bad) continue;
            int32_t *ro = row_of + (int64_t)e * R * T;
            for (int64_t i = 0; i < R * T; i++) ro[i] = -1;
            memset(used, 0, (size_t)Tall);
            for (int r = 0; r < R && !bad; r++) {
                int64_t lr = range[e * R + r];
                int64_t cnt = (int64_t)(uint32_t)lr, begin = (int64_t)(int32_t)(uint32_t)((uint64_t)lr >> 32);
                if (begin < 0 || begin + cnt > Tall) {
                    bad = 1;
                    break;
                }
                for (int64_t i = begin; i < begin + cnt; i++) {
                    int32_t t = info[e * Tall + i];
                    if (used[i] || t < 0 || t >= T || ro[r * T + t] >= 0) {
                        bad = 1;
                        break;
                    }
                    used[i] = 1;
                    ro[r * T + t] = (int32_t)i;
                }
            }
        }
        free(used);
    }
    int done = 0;
    if (!bad && !nomem) done = cpu_ep_combine_weighted(y, row_of, topk_ids, topk_weights, out);
    free(row_of);
    if (nomem || done < 0) return moe_fail(MOE_ERR_NOMEM, "LL combine: work space not available");
    if (!done) /* a bad handle: the reference names it */
        return moe_ref_deepep_ll_combine(cfg, y, src_info, layout_range, topk_ids, topk_weights, out);
    return MOE_OK;
}
