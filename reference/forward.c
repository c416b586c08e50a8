#include <stdlib.h>
#include <string.h>
#include "elem.h"
#include "moe/forward.h"
#include "moe/gemm.h"

/* Scratch tensors of one forward pass, freed together. */
typedef struct {
    moe_tensor ids, w, xr, aq, as, ag, h1, h2, yq, ys, yg, y, re;
} fw_buf;

static void fw_free(fw_buf *b)
{
    moe_tensor *t = (moe_tensor *)b;
    for (size_t i = 0; i < sizeof *b / sizeof *t; i++) moe_tensor_free(&t[i]);
}

static moe_status new2(moe_tensor *t, moe_dtype d, int64_t r, int64_t c)
{
    int64_t s[2] = {r, c};
    return moe_tensor_alloc(t, d, 2, s);
}

/* Activation-side quantization of rows (f32 or storage input) into q / s /
 * g, allocated here by the spec's shapes. Unscaled specs keep the storage
 * rows as they are (q is a copy). */
static moe_status quant_rows(const moe_quant_spec *spec, const moe_tensor *rows, const moe_tensor *static_scale,
                             moe_tensor *q, moe_tensor *s, moe_tensor *g)
{
    if (spec->gran == MOE_GRAN_NONE) {
        moe_status st = moe_tensor_alloc(q, rows->dtype, 2, rows->shape);
        if (st == MOE_OK && rows->nbytes) memcpy(q->data, rows->data, rows->nbytes);
        return st;
    }
    moe_tensor f;
    moe_status st = new2(&f, MOE_F32, rows->shape[0], rows->shape[1]);
    if (st != MOE_OK) return st;
    int64_t n = rows->shape[0] * rows->shape[1];
    for (int64_t i = 0; i < n; i++) ((float *)f.data)[i] = moe_s_load(rows->dtype, rows->data, i);
    st = moe_quant_alloc(spec, 2, rows->shape, q, s, g);
    if (st == MOE_OK)
        st = moe_ref_quantize(spec, &f, static_scale, q, spec->gran == MOE_GRAN_NONE ? NULL : s,
                              spec->use_global_scale ? g : NULL);
    moe_tensor_free(&f);
    return st;
}

/* A GEMM step whose activations take one dynamic per-tensor scale per
 * expert (torch_experts' requantization; BatchedPrepareAndFinalize's input
 * quantization): each expert's rows are quantized and multiplied on their
 * own. Rows of non-local experts (-1) stay zero. */
static moe_status gemm_per_expert(moe_scheme scheme, const moe_quant_spec *as, const moe_tensor *in,
                                  const int32_t *re, int64_t E, const moe_tensor *w, const moe_tensor *ws,
                                  const moe_tensor *wg, const moe_tensor *bias, moe_tensor *out)
{
    int64_t P = in->shape[0], K = in->shape[1], N = out->shape[1];
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)(P + 1));
    if (!rows) return moe_fail(MOE_ERR_NOMEM, "forward: row list");
    size_t ib = moe_dtype_row_bytes(in->dtype, K), ob = moe_dtype_row_bytes(out->dtype, N);
    moe_status st = MOE_OK;
    for (int64_t e = 0; e < E && st == MOE_OK; e++) {
        int64_t n = 0;
        for (int64_t p = 0; p < P; p++)
            if (re[p] == e) rows[n++] = p;
        if (n == 0) continue;
        moe_tensor sub, q, sc, gl, sre, sy;
        memset(&sub, 0, sizeof sub), memset(&q, 0, sizeof q), memset(&sc, 0, sizeof sc);
        memset(&gl, 0, sizeof gl), memset(&sre, 0, sizeof sre), memset(&sy, 0, sizeof sy);
        if ((st = new2(&sub, in->dtype, n, K)) == MOE_OK && (st = new2(&sy, out->dtype, n, N)) == MOE_OK &&
            (st = moe_tensor_alloc(&sre, MOE_I32, 1, &n)) == MOE_OK) {
            for (int64_t r = 0; r < n; r++) {
                memcpy((uint8_t *)sub.data + r * ib, (const uint8_t *)in->data + rows[r] * ib, ib);
                ((int32_t *)sre.data)[r] = (int32_t)e;
            }
            st = quant_rows(as, &sub, NULL, &q, &sc, &gl);
            if (st == MOE_OK) {
                moe_gemm_args g = {scheme, &q, &sc, as->use_global_scale ? &gl : NULL, w, ws, wg, &sre, bias};
                st = moe_ref_grouped_gemm(&g, &sy);
            }
            for (int64_t r = 0; st == MOE_OK && r < n; r++)
                memcpy((uint8_t *)out->data + rows[r] * ob, (uint8_t *)sy.data + r * ob, ob);
        }
        moe_tensor_free(&sub), moe_tensor_free(&q), moe_tensor_free(&sc), moe_tensor_free(&gl);
        moe_tensor_free(&sre), moe_tensor_free(&sy);
    }
    free(rows);
    return st;
}

/* One GEMM step: quantize `in` with the activation spec (a static scale,
 * or a dynamic one over the domain) and multiply by (w, ws, wg) + bias. A
 * per-expert domain only matters for dynamic per-tensor scales. */
static moe_status gemm_step(moe_scheme scheme, const moe_quant_spec *as, const moe_tensor *in,
                            const moe_tensor *static_scale, int per_expert, const moe_tensor *re, int64_t E,
                            const moe_tensor *w, const moe_tensor *ws, const moe_tensor *wg, const moe_tensor *bias,
                            moe_tensor *q, moe_tensor *s, moe_tensor *g, moe_tensor *out)
{
    if (as->gran == MOE_GRAN_TENSOR && !static_scale && per_expert)
        return gemm_per_expert(scheme, as, in, re->data, E, w, ws, wg, bias, out);
    moe_status st = quant_rows(as, in, static_scale, q, s, g);
    if (st) return st;
    moe_gemm_args ga = {scheme, q, as->gran ? s : NULL, as->use_global_scale ? g : NULL, w, ws, wg, re, bias};
    return moe_ref_grouped_gemm(&ga, out);
}

static moe_status check_args(const moe_forward_args *a, const moe_tensor *x, const moe_tensor *out)
{
    if (!a) return moe_fail(MOE_ERR_NULL, "args: must not be NULL");
    moe_status s = moe_s_expect_storage(x, "x", 2);
    if (s != MOE_OK) return s;
    if ((s = moe_tensor_expect(out, "out", x->dtype, 2))) return s;
    if (out->shape[0] != x->shape[0] || out->shape[1] != x->shape[1])
        return moe_fail(MOE_ERR_SHAPE, "out: must have x's shape [%lld, %lld]", (long long)x->shape[0],
                        (long long)x->shape[1]);
    if (!a->w1 || !a->w2) return moe_fail(MOE_ERR_NULL, "w1, w2: must not be NULL");
    if (a->w1->ndim != 3 || a->w2->ndim != 3) return moe_fail(MOE_ERR_SHAPE, "w1, w2: must be [E, N, K]");
    /* checked here so the message names w1 or w2, not the GEMM's "w" */
    moe_quant_spec wspec;
    if ((s = moe_scheme_spec(a->scheme, MOE_OPERAND_WEIGHT, &wspec)) ||
        (s = moe_tensor_expect(a->w1, "w1", wspec.elem, 3)) || (s = moe_tensor_expect(a->w2, "w2", wspec.elem, 3)))
        return s;
    int64_t E = a->w1->shape[0], H = x->shape[1], N1 = a->w1->shape[1];
    int gated = moe_act_is_gated(a->act.act);
    if (a->w1->shape[2] != H || a->w2->shape[0] != E || a->w2->shape[1] != H)
        return moe_fail(MOE_ERR_SHAPE, "w1 [E, N1, H], w2 [E, H, I]: E and H must agree with each other and x");
    if (N1 != (gated ? 2 : 1) * a->w2->shape[2])
        return moe_fail(MOE_ERR_SHAPE, "w1: N1 = %lld, %s needs %s I = %lld", (long long)N1, moe_act_name(a->act.act),
                        gated ? "2 *" : "", (long long)a->w2->shape[2]);
    if ((unsigned)a->a1_domain >= MOE_QDOM_COUNT || (unsigned)a->a2_domain >= MOE_QDOM_COUNT)
        return moe_fail(MOE_ERR_INVALID_ARG, "a1_domain %d, a2_domain %d: must be moe_qdomain values",
                        (int)a->a1_domain, (int)a->a2_domain);
    if (a->first_expert < 0 || a->num_local_experts < 0 || a->first_expert + a->num_local_experts > E)
        return moe_fail(MOE_ERR_INVALID_ARG, "first_expert %d, num_local_experts %d: must lie within [0, E = %lld]",
                        a->first_expert, a->num_local_experts, (long long)E);
    if (!a->topk_ids && (!a->route || !a->router_logits))
        return moe_fail(MOE_ERR_NULL, "topk_ids or (route, router_logits): one routing source is needed");
    return MOE_OK;
}

moe_status moe_ref_forward(const moe_forward_args *a, const moe_tensor *x, moe_tensor *out)
{
    moe_status s = check_args(a, x, out);
    if (s != MOE_OK) return s;
    moe_quant_spec as;
    if ((s = moe_scheme_spec(a->scheme, MOE_OPERAND_ACT, &as))) return s;
    int64_t M = x->shape[0], H = x->shape[1], E = a->w1->shape[0], N1 = a->w1->shape[1], I = a->w2->shape[2];
    int64_t first = a->first_expert, nloc = a->num_local_experts ? a->num_local_experts : E;
    fw_buf b;
    memset(&b, 0, sizeof b);
    const moe_tensor *ids = a->topk_ids, *w = a->topk_weights;
    if (!ids) {
        int k = a->route->topk;
        if ((s = new2(&b.ids, MOE_I32, M, k)) || (s = new2(&b.w, MOE_F32, M, k)) ||
            (s = moe_ref_route(a->router_logits, a->route, &b.ids, &b.w)))
            goto done;
        ids = &b.ids, w = &b.w;
    }
    if ((s = moe_tensor_expect(ids, "topk_ids", MOE_I32, 2)) || (s = moe_tensor_expect(w, "topk_weights", MOE_F32, 2)))
        goto done;
    int64_t k = ids->shape[1], P = M * k;
    if (ids->shape[0] != M || w->shape[0] != M || w->shape[1] != k) {
        s = moe_fail(MOE_ERR_SHAPE, "topk_ids, topk_weights: must both be [M = %lld, k]", (long long)M);
        goto done;
    }
    if (a->weights_on_input && k != 1) {
        s = moe_fail(MOE_ERR_INVALID_ARG, "weights_on_input: needs topk 1 (vLLM asserts it), topk is %lld", (long long)k);
        goto done;
    }
    const int32_t *id = ids->data;
    const float *wt = w->data;
    for (int64_t i = 0; i < P; i++)
        if (id[i] < 0 || id[i] >= E) {
            s = moe_fail(MOE_ERR_INVALID_ARG, "topk_ids[%lld] = %d: must be in [0, E = %lld)", (long long)i, id[i],
                         (long long)E);
            goto done;
        }
    /* 2-3: replicate (weighting on the input first), row p = t*k + j */
    if ((s = new2(&b.xr, x->dtype, P, H)) || (s = moe_tensor_alloc(&b.re, MOE_I32, 1, &P))) goto done;
    for (int64_t p = 0; p < P; p++) {
        int64_t t = p / k;
        for (int64_t c = 0; c < H; c++) {
            float v = moe_s_load(x->dtype, x->data, t * H + c);
            if (a->weights_on_input) v = v * wt[p];
            moe_s_store(x->dtype, b.xr.data, p * H + c, v);
        }
        int32_t e = id[p];
        ((int32_t *)b.re.data)[p] = (e >= first && e < first + nloc) ? e : -1;
    }
    /* 3-4: quantize, GEMM1 */
    if ((s = new2(&b.h1, x->dtype, P, N1))) goto done;
    if ((s = gemm_step(a->scheme, &as, &b.xr, a->a1_scale, a->a1_domain == MOE_QDOM_PER_EXPERT, &b.re, E, a->w1,
                       a->w1_scale, a->w1_global, a->b1, &b.aq, &b.as, &b.ag, &b.h1)))
        goto done;
    /* 5: activation */
    if ((s = new2(&b.h2, x->dtype, P, I)) || (s = moe_ref_activation(&b.h1, &b.re, &a->act, &b.h2))) goto done;
    /* 6-7: requantize, GEMM2 */
    if ((s = new2(&b.y, x->dtype, P, H))) goto done;
    if ((s = gemm_step(a->scheme, &as, &b.h2, a->a2_scale, a->a2_domain != MOE_QDOM_ALL_ROWS, &b.re, E, a->w2,
                       a->w2_scale, a->w2_global, a->b2, &b.yq, &b.ys, &b.yg, &b.y)))
        goto done;
    if (a->slot_rows) {
        if ((s = moe_tensor_expect_host(a->slot_rows, "slot_rows", x->dtype, 2))) goto done;
        if (a->slot_rows->shape[0] != P || a->slot_rows->shape[1] != H) {
            s = moe_fail(MOE_ERR_SHAPE, "slot_rows: must be [M*k = %lld, H = %lld]", (long long)P, (long long)H);
            goto done;
        }
        if (P) memcpy(a->slot_rows->data, b.y.data, b.y.nbytes);
    }
    /* 8: combine */
    const int32_t *re = b.re.data;
    for (int64_t t = 0; t < M; t++)
        for (int64_t c = 0; c < H; c++) {
            float acc = 0.0f;
            for (int64_t j = 0; j < k; j++) {
                int64_t p = t * k + j;
                if (re[p] < 0) continue;
                float v = moe_s_load(x->dtype, b.y.data, p * H + c);
                acc = a->weights_on_input ? acc + v : acc + wt[p] * v;
            }
            moe_s_store(x->dtype, out->data, t * H + c, acc);
        }
done:
    fw_free(&b);
    return s;
}
