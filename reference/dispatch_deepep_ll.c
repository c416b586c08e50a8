/* DeepEP low-latency mode: dispatch into [E_loc, R*T_max, H] with the
 * in-kernel FP8 cast, and the weighted combine (anchors/dispatch_sorting.md
 * A.5, A.6, section 0 facts 3-4). Upstream fills each expert with atomics,
 * so dispatch rows are SET-comparable per (expert, source rank); the cast,
 * the counts and the combine are EXACT. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "dispatch_core.h"
#include "elem.h"
#include "moe/dispatch.h"
#include "stage_checks.h"
#include "quant_internal.h"
#include "moe/format.h"

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* The rule itself lives in the quant stage (MOE_RULE_DEEPEP_LL), so the
 * dispatch and a standalone quantization of the same row agree by
 * construction. */
void moe_deepep_ll_scales(float amax, int round_scale, float *scale, float *scale_inv)
{
    moe_quant_spec spec;
    moe_quant_spec_deepep_ll(round_scale, 0, &spec);
    moe_q_stats st = {amax, amax, amax, -amax};
    moe_q_group g;
    moe_q_rule_dynamic(&spec, &st, 1.0f, &g);
    *scale = g.f;
    *scale_inv = g.scale;
}

void moe_deepep_ll_cast_group(const float *f, int round_scale, uint8_t *q, float *scale_inv)
{
    float amax = 0.0f, scale;
    /* exact; NaN never wins, as with fmaxf */
    for (int i = 0; i < MOE_DEEPEP_LL_GROUP; i++) amax = moe_deepep_ll_amax_step(amax, f[i]);
    moe_deepep_ll_scales(amax, round_scale, &scale, scale_inv);
    /* __nv_cvt_float2_to_fp8x2(..., __NV_SATFINITE, E4M3): RNE, +-448, the
     * NaN sign of moe_q_canon_nan (dispatch_core.h, shared with CUDA) */
    for (int i = 0; i < MOE_DEEPEP_LL_GROUP; i++) q[i] = moe_deepep_ll_cast_elem(f[i], scale);
}

uint8_t moe_deepep_ll_ue8m0(float scale_inv)
{
    return (uint8_t)((bits_of(scale_inv) >> 23) & 0xFFu);
}

int64_t moe_deepep_ll_rows(int world_size, int64_t max_tokens_per_rank)
{
    if (moe_ep_check_world(world_size, world_size, NULL) != MOE_OK || max_tokens_per_rank < 0)
        return -1;
    return world_size * max_tokens_per_rank;
}

moe_status moe_deepep_ll_buffer_bytes(int64_t max_tokens_per_rank, int64_t hidden, int num_experts,
                                      uint64_t *bytes)
{
    if (max_tokens_per_rank < 0)
        return moe_fail(MOE_ERR_INVALID_ARG, "max_tokens_per_rank %lld: must be >= 0",
                        (long long)max_tokens_per_rank);
    /* the tensor extent limit keeps the message sizes below 2^64 */
    if (hidden < 0 || hidden > (int64_t)1 << 40)
        return moe_fail(MOE_ERR_INVALID_ARG, "hidden %lld: must be in [0, 2^40]",
                        (long long)hidden);
    if (num_experts < 1)
        return moe_fail(MOE_ERR_INVALID_ARG, "num_experts %d: must be >= 1", num_experts);
    if (!bytes) return moe_fail(MOE_ERR_NULL, "bytes: must not be NULL");
    uint64_t H = (uint64_t)hidden, Tm = (uint64_t)max_tokens_per_rank, E = (uint64_t)num_experts;
    uint64_t scales = H / 128 * 4;
    uint64_t msg_d = 16 + (2 * H > H + scales ? 2 * H : H + scales), msg_c = scales + 2 * H;
    uint64_t per_tok, all_tok, send_d, recv_d, comb, send, recv, total;
    uint64_t sig = (E * 4 + 127) / 128 * 128;
    int ovf = __builtin_mul_overflow(Tm, msg_d, &send_d);
    ovf |= __builtin_mul_overflow(E, Tm, &all_tok);
    ovf |= __builtin_mul_overflow(all_tok, msg_c, &comb);
    ovf |= __builtin_mul_overflow(all_tok, msg_d, &recv_d);
    send = send_d > comb ? send_d : comb;
    recv = recv_d > comb ? recv_d : comb;
    ovf |= __builtin_add_overflow(send, recv, &per_tok);
    ovf |= __builtin_mul_overflow(per_tok, 2, &total);
    ovf |= __builtin_add_overflow(total, 2 * sig, &total);
    if (ovf) return moe_fail(MOE_ERR_NOMEM, "moe_deepep_ll_buffer_bytes: size overflows 64 bits");
    *bytes = total;
    return MOE_OK;
}

static moe_status check_cfg(const moe_deepep_ll_config *cfg, int *E_loc)
{
    if (!cfg) return moe_fail(MOE_ERR_NULL, "cfg: must not be NULL");
    moe_status s = moe_ep_check_world(cfg->world_size, cfg->num_experts, E_loc);
    if (s != MOE_OK) return s;
    if (cfg->max_tokens_per_rank < 0)
        return moe_fail(MOE_ERR_INVALID_ARG, "max_tokens_per_rank %lld: must be >= 0",
                        (long long)cfg->max_tokens_per_rank);
    if (cfg->use_ue8m0 && !cfg->round_scale)
        return moe_fail(MOE_ERR_INVALID_ARG,
                        "use_ue8m0: requires round_scale (a UE8M0 byte holds only a power of two)");
    if (cfg->round_scale && !cfg->use_fp8)
        return moe_fail(MOE_ERR_INVALID_ARG, "round_scale: only meaningful with use_fp8");
    return MOE_OK;
}

/* -1 slots are skipped (A.5); a repeated expert would make the combine
 * read one (expert, token) slot twice (A.6 notes), so it is refused */
static const char *const ll_distinct =
    "the LL combine keeps one slot per (expert, token); ids in a row must be distinct";

moe_status moe_ref_check_deepep_ll_dispatch(const moe_deepep_ll_config *cfg, const moe_tensor *x,
                                            const moe_tensor *topk_ids, const moe_deepep_ll_recv *out)
{
    int E_loc, K;
    moe_status s = check_cfg(cfg, &E_loc);
    if (s != MOE_OK) return s;
    int R = cfg->world_size, E = cfg->num_experts;
    const int64_t xs[3] = {R, -1, -1};
    if ((s = moe_ep_expect(x, "x", -1, 3, xs, "[R, T, H]")) != MOE_OK) return s;
    if (x->dtype != MOE_BF16 && x->dtype != MOE_F32)
        return moe_fail(MOE_ERR_DTYPE, "x: dtype %s, expected bf16 or f32",
                        moe_dtype_get(x->dtype)->name);
    int64_t T = x->shape[1], H = x->shape[2], Tall = (int64_t)R * cfg->max_tokens_per_rank;
    if (T > cfg->max_tokens_per_rank)
        return moe_fail(MOE_ERR_SHAPE, "x: %lld tokens per rank exceed max_tokens_per_rank %lld",
                        (long long)T, (long long)cfg->max_tokens_per_rank);
    if (cfg->use_fp8 && H % (cfg->use_ue8m0 ? 512 : 128))
        return moe_fail(MOE_ERR_SHAPE, "x: hidden %lld must be a multiple of %d for %s",
                        (long long)H, cfg->use_ue8m0 ? 512 : 128,
                        cfg->use_ue8m0 ? "UE8M0 scales (4 groups of 128 per int32)"
                                       : "FP8 (one scale per 128 channels)");
    if ((s = moe_ep_check_ids(topk_ids, "topk_ids", R, T, E, NULL, ll_distinct, &K)) != MOE_OK)
        return s;
    if (!out) return moe_fail(MOE_ERR_NULL, "out: must not be NULL");
    const int64_t ox[4] = {R, E_loc, Tall, H};
    int xd = cfg->use_fp8 ? MOE_E4M3 : (int)x->dtype;
    if ((s = moe_ep_expect(out->x, "recv x", xd, 4, ox, "[R, E_loc, R*T_max, H]")) != MOE_OK)
        return s;
    int64_t S = cfg->use_ue8m0 ? H / 512 : H / 128;
    if (cfg->use_fp8) {
        const int64_t os[4] = {R, E_loc, Tall, S};
        s = moe_ep_expect(out->x_scales, "recv x_scales", cfg->use_ue8m0 ? MOE_I32 : MOE_F32, 4, os,
                          cfg->use_ue8m0 ? "[R, E_loc, R*T_max, H/512]"
                                         : "[R, E_loc, R*T_max, H/128]");
        if (s != MOE_OK) return s;
    } else if (out->x_scales) {
        return moe_fail(MOE_ERR_INVALID_ARG, "recv x_scales: given, but use_fp8 is off");
    }
    const int64_t oc[2] = {R, E_loc}, oi[3] = {R, E_loc, Tall}, ol[3] = {R, E_loc, R};
    if ((s = moe_ep_expect(out->count, "count", MOE_I32, 2, oc, "[R, E_loc]")) != MOE_OK) return s;
    s = moe_ep_expect(out->src_info, "src_info", MOE_I32, 3, oi, "[R, E_loc, R*T_max]");
    if (s != MOE_OK) return s;
    return moe_ep_expect(out->layout_range, "layout_range", MOE_I64, 3, ol, "[R, E_loc, R]");
}

moe_status moe_ref_deepep_ll_dispatch(const moe_deepep_ll_config *cfg, const moe_tensor *x,
                                      const moe_tensor *topk_ids, const moe_deepep_ll_recv *out)
{
    moe_status s = moe_ref_check_deepep_ll_dispatch(cfg, x, topk_ids, out);
    if (s != MOE_OK) return s;
    int R = cfg->world_size, E = cfg->num_experts, E_loc = E / R, K = (int)topk_ids->shape[2];
    int64_t T = x->shape[1], H = x->shape[2], Tall = (int64_t)R * cfg->max_tokens_per_rank;
    int64_t S = cfg->use_ue8m0 ? H / 512 : H / 128;
    const int32_t *ids = (const int32_t *)topk_ids->data;
    size_t n_pos = (size_t)(R * T * K), n_cnt = (size_t)E * (size_t)R;
    int32_t *pos = malloc((n_pos ? n_pos : 1) * sizeof *pos);
    int64_t *count = malloc((size_t)E * sizeof *count);
    int64_t *blk = calloc(n_cnt, sizeof *blk);
    uint8_t *q = malloc((size_t)(H ? H : 1));
    float *f = malloc((size_t)(H ? H : 1) * sizeof *f);
    float *sinv = malloc((size_t)(H / 128 + 1) * sizeof *sinv);
    if (!pos || !count || !blk || !q || !f || !sinv) {
        free(pos), free(count), free(blk), free(q), free(f), free(sinv);
        return moe_fail(MOE_ERR_NOMEM, "LL dispatch: work space not available");
    }
    /* upstream order is atomic; ours is (source rank, source token)
     * ascending, which keeps each source rank's rows contiguous as upstream
     * does (A.5 "Ordering") */
    moe_ep_batched_positions(ids, R, T, K, 1, E, pos, count);
    if (out->x->nbytes) memset(out->x->data, 0, out->x->nbytes);
    if (out->x_scales && out->x_scales->nbytes)
        memset(out->x_scales->data, 0, out->x_scales->nbytes);
    int32_t *src_info = (int32_t *)out->src_info->data;
    for (int64_t i = 0; i < R * E_loc * Tall; i++) src_info[i] = -1;
    size_t xrow = moe_dtype_row_bytes(out->x->dtype, H);
    for (int64_t st = 0; st < R * T; st++) {
        const int32_t *row = ids + st * K;
        int any = 0;
        for (int k = 0; k < K; k++) any |= row[k] >= 0;
        if (!any) continue;
        /* the cast depends on the token only, not on where it goes */
        if (cfg->use_fp8) {
            for (int64_t c = 0; c < H; c++) f[c] = moe_s_load(x->dtype, x->data, st * H + c);
            for (int64_t gi = 0; gi < H / 128; gi++)
                moe_deepep_ll_cast_group(f + gi * 128, cfg->round_scale, q + gi * 128, sinv + gi);
        }
        for (int k = 0; k < K; k++) {
            int32_t e = row[k];
            if (e < 0) continue;
            int64_t o = (int64_t)e * Tall + pos[st * K + k]; /* [R, E_loc] flattens to E */
            const void *src =
                cfg->use_fp8 ? (const void *)q : (const char *)x->data + st * (int64_t)xrow;
            memcpy((char *)out->x->data + o * (int64_t)xrow, src, xrow);
            src_info[o] = (int32_t)(st % T);
            blk[e * R + st / T]++;
            if (cfg->use_ue8m0) {
                /* byte i of int p holds group 4p + i (A.5) */
                int32_t *d = (int32_t *)out->x_scales->data + o * S;
                for (int64_t p = 0; p < S; p++) {
                    uint32_t v = 0;
                    for (int i = 0; i < 4; i++)
                        v |= (uint32_t)moe_deepep_ll_ue8m0(sinv[p * 4 + i]) << (8 * i);
                    d[p] = (int32_t)v;
                }
            } else if (cfg->use_fp8) {
                memcpy((float *)out->x_scales->data + o * S, sinv, (size_t)S * sizeof *sinv);
            }
        }
    }
    int32_t *cnt = (int32_t *)out->count->data;
    int64_t *range = (int64_t *)out->layout_range->data;
    for (int e = 0; e < E; e++) {
        cnt[e] = (int32_t)count[e];
        int64_t begin = 0;
        /* low 32 bits: rows from source rank r; high 32: their first row */
        for (int r = 0; r < R; r++) {
            range[e * R + r] = (int64_t)((uint64_t)begin << 32 | (uint64_t)blk[e * R + r]);
            begin += blk[e * R + r];
        }
    }
    free(pos), free(count), free(blk), free(q), free(f), free(sinv);
    return MOE_OK;
}

moe_status moe_ref_check_deepep_ll_combine(const moe_deepep_ll_config *cfg, const moe_tensor *y,
                                           const moe_tensor *src_info, const moe_tensor *layout_range,
                                           const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                           const moe_tensor *out)
{
    int E_loc, K;
    moe_status s = check_cfg(cfg, &E_loc);
    if (s != MOE_OK) return s;
    int R = cfg->world_size, E = cfg->num_experts;
    int64_t Tall = (int64_t)R * cfg->max_tokens_per_rank;
    const int64_t ys[4] = {R, E_loc, Tall, -1};
    if ((s = moe_ep_expect(y, "y", -1, 4, ys, "[R, E_loc, R*T_max, H]")) != MOE_OK) return s;
    if (y->dtype != MOE_BF16 && y->dtype != MOE_F32)
        return moe_fail(MOE_ERR_DTYPE, "y: dtype %s, expected bf16 or f32",
                        moe_dtype_get(y->dtype)->name);
    int64_t H = y->shape[3];
    const int64_t is[3] = {R, E_loc, Tall}, ls[3] = {R, E_loc, R};
    s = moe_ep_expect(src_info, "src_info", MOE_I32, 3, is, "[R, E_loc, R*T_max]");
    if (s != MOE_OK) return s;
    s = moe_ep_expect(layout_range, "layout_range", MOE_I64, 3, ls, "[R, E_loc, R]");
    if (s != MOE_OK) return s;
    if ((s = moe_ep_check_ids(topk_ids, "topk_ids", R, -1, E, NULL, ll_distinct, &K)) != MOE_OK)
        return s;
    int64_t T = topk_ids->shape[1];
    if (T > cfg->max_tokens_per_rank)
        return moe_fail(MOE_ERR_SHAPE,
                        "topk_ids: %lld tokens per rank exceed max_tokens_per_rank %lld",
                        (long long)T, (long long)cfg->max_tokens_per_rank);
    const int64_t ws[3] = {R, T, K}, os[3] = {R, T, H};
    if ((s = moe_ep_expect(topk_weights, "topk_weights", MOE_F32, 3, ws, "[R, T, K]")) != MOE_OK)
        return s;
    return moe_ep_expect(out, "out", y->dtype, 3, os, "[R, T, H]");
}

moe_status moe_ref_deepep_ll_combine(const moe_deepep_ll_config *cfg, const moe_tensor *y,
                                     const moe_tensor *src_info, const moe_tensor *layout_range,
                                     const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                     moe_tensor *out)
{
    moe_status s = moe_ref_check_deepep_ll_combine(cfg, y, src_info, layout_range, topk_ids, topk_weights, out);
    if (s != MOE_OK) return s;
    int R = cfg->world_size, E = cfg->num_experts, E_loc = E / R;
    int64_t Tall = (int64_t)R * cfg->max_tokens_per_rank, T = topk_ids->shape[1];

    /* the receive buffer is indexed by (expert, source token), so any
     * dispatch order combines the same (A.6 "Transport"): rebuild that index
     * from the handle, refusing a handle that names a row twice */
    size_t n = (size_t)E * (size_t)(R * T);
    int32_t *row_of = malloc((n ? n : 1) * sizeof *row_of);
    uint8_t *used = malloc((size_t)(Tall ? Tall : 1));
    if (!row_of || !used) {
        free(row_of), free(used);
        return moe_fail(MOE_ERR_NOMEM, "LL combine: row index not available");
    }
    for (size_t i = 0; i < n; i++) row_of[i] = -1;
    const int32_t *info = (const int32_t *)src_info->data;
    const int64_t *range = (const int64_t *)layout_range->data;
    s = MOE_OK;
    for (int e = 0; e < E && s == MOE_OK; e++) {
        memset(used, 0, (size_t)Tall);
        for (int r = 0; r < R && s == MOE_OK; r++) {
            int64_t lr = range[e * R + r];
            int64_t cnt = (int64_t)(uint32_t)lr,
                    begin = (int64_t)(int32_t)(uint32_t)((uint64_t)lr >> 32);
            if (begin < 0 || begin + cnt > Tall) {
                s = moe_fail(MOE_ERR_INVALID_ARG,
                             "layout_range[%d][%d][%d]: rows [%lld, %lld) outside [0, %lld)",
                             e / E_loc, e % E_loc, r, (long long)begin, (long long)(begin + cnt),
                             (long long)Tall);
                break;
            }
            for (int64_t i = begin; i < begin + cnt; i++) {
                int32_t t = info[e * Tall + i];
                if (used[i] || t < 0 || t >= T || row_of[(int64_t)e * R * T + r * T + t] >= 0) {
                    s = moe_fail(MOE_ERR_INVALID_ARG, "src_info[%d][%d][%lld] = %d: %s", e / E_loc,
                                 e % E_loc, (long long)i, (int)t,
                                 used[i] ? "row claimed by two source ranks in layout_range"
                                 : (t < 0 || t >= T) ? "not a token index in [0, T)"
                                                     : "token appears twice for one expert");
                    break;
                }
                used[i] = 1;
                row_of[(int64_t)e * R * T + r * T + t] = (int32_t)i;
            }
        }
    }
    if (s == MOE_OK)
        s = moe_ep_combine_weighted(y, row_of, topk_ids, topk_weights, out,
                                    "src_info/layout_range");
    free(row_of), free(used);
    return s;
}
