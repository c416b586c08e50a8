/* The reference composition of a fused experts forward
 * (include/moe/fused_judge.h) and the pieces the judge shares with it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "moe/bounds.h"
#include "moe/format.h"
#include "fused_internal.h"

float fj_bf16(double v) { return moe_bf16_to_f32(moe_f32_to_bf16((float)v, MOE_POLICY_IEEE_RNE, NULL)); }

float fj_bf16_at(const moe_tensor *t, int64_t i) { return moe_bf16_to_f32(((const uint16_t *)t->data)[i]); }

static moe_status expect2(const moe_tensor *t, const char *arg, moe_dtype d, int64_t r, int64_t c)
{
    moe_status s = moe_tensor_expect_host(t, arg, d, 2);
    if (s) return s;
    if (t->shape[0] != r || t->shape[1] != c)
        return moe_fail(MOE_ERR_SHAPE, "%s: shape [%lld, %lld], expected [%lld, %lld]", arg, (long long)t->shape[0],
                        (long long)t->shape[1], (long long)r, (long long)c);
    return MOE_OK;
}

moe_status fj_info_of(const moe_fused_problem *p, const moe_fused_inputs *in, fj_info *fi)
{
    if (!p || !in || !fi) return moe_fail(MOE_ERR_NULL, "fused: problem, inputs and info must not be NULL");
    if (p->M < 1 || p->E < 1 || p->topk < 1 || p->topk > p->E || p->H < 1 || p->I < 1)
        return moe_fail(MOE_ERR_INVALID_ARG, "fused problem: M %d, E %d, topk %d, H %d, I %d: the rule is all >= 1, "
                        "topk <= E", p->M, p->E, p->topk, p->H, p->I);
    if (!moe_act_is_gated(p->act.act) || p->act.swiglu_alpha || p->act.swiglu_beta || p->act.swiglu_limit)
        return moe_fail(MOE_ERR_UNSUPPORTED, "fused problem: act must be gated with no per-expert tensors");
    memset(fi, 0, sizeof *fi);
    fi->P = (int64_t)p->M * p->topk;
    moe_quant_spec ws;
    moe_status s = moe_scheme_spec(p->scheme, MOE_OPERAND_ACT, &fi->as);
    if (s || (s = moe_scheme_spec(p->scheme, MOE_OPERAND_WEIGHT, &ws))) return s;
    fi->q8 = fi->as.gran != MOE_GRAN_NONE;
    if (fi->q8 && fi->as.gran != MOE_GRAN_TENSOR && fi->as.gran != MOE_GRAN_ROW && fi->as.gran != MOE_GRAN_GROUP)
        return moe_fail(MOE_ERR_UNSUPPORTED, "fused problem: scheme %s: activation scales per tensor, row or group only",
                        moe_scheme_name(p->scheme));
    if ((s = expect2(in->x, "x", MOE_BF16, p->M, p->H)) || (s = expect2(in->topk_ids, "topk_ids", MOE_I32, p->M, p->topk)) ||
        (s = expect2(in->topk_w, "topk_w", MOE_F32, p->M, p->topk)))
        return s;
    const int32_t *ids = in->topk_ids->data;
    for (int64_t i = 0; i < fi->P; i++)
        if (ids[i] < 0 || ids[i] >= p->E)
            return moe_fail(MOE_ERR_INVALID_ARG, "topk_ids[%lld] = %d: must be in [0, E = %d)", (long long)i, ids[i], p->E);
    return MOE_OK;
}

moe_status fj_gather(const moe_tensor *src, const int64_t *map, int64_t P, int whole, moe_tensor *dst)
{
    int64_t R = src->shape[0], n = moe_tensor_numel(src), cols = R ? n / R : 0;
    if (whole) {
        moe_status s = moe_tensor_alloc(dst, src->dtype, 2, (int64_t[2]){1, 1});
        if (!s) memcpy(dst->data, src->data, dst->nbytes);
        return s;
    }
    moe_status s = moe_tensor_alloc(dst, src->dtype, 2, (int64_t[2]){P, cols});
    if (s) return s;
    size_t rb = src->nbytes / (size_t)R;
    for (int64_t i = 0; i < P; i++) {
        if (map[i] < 0 || map[i] >= R) {
            moe_tensor_free(dst);
            return moe_fail(MOE_ERR_INVALID_ARG, "fused gather: row %lld of %lld rows", (long long)map[i], (long long)R);
        }
        memcpy((uint8_t *)dst->data + (size_t)i * rb, (const uint8_t *)src->data + (size_t)map[i] * rb, rb);
    }
    return MOE_OK;
}

moe_status fj_quant(const moe_quant_spec *as, const moe_tensor *rows, moe_tensor *q, moe_tensor *s)
{
    int64_t R = rows->shape[0], K = rows->shape[1];
    moe_tensor f;
    moe_status st = moe_tensor_alloc(&f, MOE_F32, 2, (int64_t[2]){R, K});
    if (st) return st;
    for (int64_t i = 0; i < R * K; i++) ((float *)f.data)[i] = fj_bf16_at(rows, i);
    if ((st = moe_quant_alloc(as, 2, (int64_t[2]){R, K}, q, s, NULL)) == MOE_OK)
        st = moe_ref_quantize(as, &f, NULL, q, s, NULL);
    moe_tensor_free(&f);
    return st;
}

moe_status fj_gemm(const moe_fused_problem *p, int second, const moe_fused_inputs *in, const moe_tensor *a,
                   const moe_tensor *a_scale, moe_tensor *S, double **A, double **under, int64_t *m_r)
{
    const int64_t P = (int64_t)p->M * p->topk, N = second ? p->H : 2 * (int64_t)p->I;
    moe_tensor re;
    moe_status s = moe_tensor_wrap(&re, MOE_I32, 1, (int64_t[1]){P}, in->topk_ids->data, (size_t)P * 4,
                                   (moe_device){MOE_DEVICE_HOST, 0});
    if (s) return s;
    moe_gemm_args g;
    memset(&g, 0, sizeof g);
    g.scheme = p->scheme, g.a = a, g.a_scale = a_scale, g.row_expert = &re;
    g.w = second ? in->w2 : in->w1, g.w_scale = second ? in->w2_scale : in->w1_scale;
    if ((s = moe_tensor_alloc(S, MOE_F32, 2, (int64_t[2]){P, N}))) return s;
    if ((s = moe_ref_grouped_gemm(&g, S))) return moe_tensor_free(S), s;
    if (!A) return MOE_OK;
    int64_t nodes;
    *A = malloc(sizeof(double) * (size_t)(P * N)), *under = malloc(sizeof(double) * (size_t)(P * N));
    if (!*A || !*under) s = moe_fail(MOE_ERR_NOMEM, "fused judge: %lld abs sums", (long long)(P * N));
    if (!s) s = moe_gemm_abs_sums(&g, *A, *under);
    if (!s) s = moe_gemm_bound_counts(&g, m_r, &nodes);
    if (s) free(*A), free(*under), *A = *under = NULL, moe_tensor_free(S);
    return s;
}

void moe_fused_trace_store_free(moe_fused_trace_store *t)
{
    if (!t) return;
    free(t->rows);
    moe_tensor *v[] = {&t->h, &t->xq, &t->sx, &t->hq, &t->sh, &t->y, &t->out};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) moe_tensor_free(v[i]);
    memset(t, 0, sizeof *t);
}

moe_status moe_fused_ref_trace_make(const moe_fused_problem *p, const moe_fused_inputs *in, moe_fused_trace_store *t)
{
    if (!t) return moe_fail(MOE_ERR_NULL, "fused reference trace: t must not be NULL");
    memset(t, 0, sizeof *t);
    fj_info fi;
    moe_status s = fj_info_of(p, in, &fi);
    if (s) return s;
    const int64_t P = fi.P, H = p->H, I = p->I;
    int64_t *tok = malloc(sizeof(int64_t) * (size_t)P);
    t->rows = malloc(sizeof(int32_t) * (size_t)P);
    moe_tensor a1, as1, G1, g16, G2;
    memset(&a1, 0, sizeof a1), memset(&as1, 0, sizeof as1), memset(&G1, 0, sizeof G1), memset(&g16, 0, sizeof g16);
    memset(&G2, 0, sizeof G2);
    if (!tok || !t->rows) s = moe_fail(MOE_ERR_NOMEM, "fused reference trace: row maps");
    for (int64_t i = 0; !s && i < P; i++) tok[i] = i / p->topk, t->rows[i] = (int32_t)i;
    /* GEMM1 on each slot's row of x (codes and scales for 8-bit schemes) */
    if (!s && fi.q8) s = fj_quant(&fi.as, in->x, &t->xq, &t->sx);
    if (!s) s = fj_gather(fi.q8 ? &t->xq : in->x, tok, P, 0, &a1);
    if (!s && fi.q8) s = fj_gather(&t->sx, tok, P, fi.as.gran == MOE_GRAN_TENSOR, &as1);
    if (!s) s = fj_gemm(p, 0, in, &a1, fi.q8 ? &as1 : NULL, &G1, NULL, NULL, NULL);
    if (!s) s = moe_tensor_alloc(&g16, MOE_BF16, 2, (int64_t[2]){P, 2 * I});
    for (int64_t i = 0; !s && i < P * 2 * I; i++)
        ((uint16_t *)g16.data)[i] = moe_f32_to_bf16(((float *)G1.data)[i], MOE_POLICY_IEEE_RNE, NULL);
    moe_act_params act = p->act;
    act.layout = MOE_LAYOUT_GATE_UP;
    if (!s) s = moe_tensor_alloc(&t->h, MOE_BF16, 2, (int64_t[2]){P, I});
    if (!s) s = moe_ref_activation(&g16, NULL, &act, &t->h);
    /* GEMM2 on h (its codes and scales) */
    if (!s && fi.q8) s = fj_quant(&fi.as, &t->h, &t->hq, &t->sh);
    if (!s) s = fj_gemm(p, 1, in, fi.q8 ? &t->hq : &t->h, fi.q8 ? &t->sh : NULL, &G2, NULL, NULL, NULL);
    if (!s && !p->atomic) s = moe_tensor_alloc(&t->y, MOE_BF16, 2, (int64_t[2]){P, H});
    if (!s) s = moe_tensor_alloc(&t->out, MOE_BF16, 2, (int64_t[2]){p->M, H});
    const float *w = in->topk_w->data, *g2 = G2.data;
    for (int64_t tk = 0; !s && tk < p->M; tk++)
        for (int64_t n = 0; n < H; n++) {
            float acc = 0.0f;
            for (int j = 0; j < p->topk; j++) {
                const int64_t sl = tk * p->topk + j;
                const float term = w[sl] * g2[sl * H + n];
                if (p->atomic) acc = acc + term;
                else {
                    const uint16_t y = moe_f32_to_bf16(term, MOE_POLICY_IEEE_RNE, NULL);
                    ((uint16_t *)t->y.data)[sl * H + n] = y;
                    acc = acc + moe_bf16_to_f32(y);
                }
            }
            ((uint16_t *)t->out.data)[tk * H + n] = moe_f32_to_bf16(acc, MOE_POLICY_IEEE_RNE, NULL);
        }
    moe_tensor_free(&a1), moe_tensor_free(&as1), moe_tensor_free(&G1), moe_tensor_free(&g16), moe_tensor_free(&G2);
    free(tok);
    if (s) return moe_fused_trace_store_free(t), s;
    t->tr.cap = (int)P, t->tr.row_of_slot = t->rows, t->tr.h = &t->h, t->tr.out = &t->out;
    t->tr.y = p->atomic ? NULL : &t->y;
    if (fi.q8) t->tr.xq = &t->xq, t->tr.sx = &t->sx, t->tr.hq = &t->hq, t->tr.sh = &t->sh;
    return MOE_OK;
}
