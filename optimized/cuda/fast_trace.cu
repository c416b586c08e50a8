/* The fast path's forward as the judge sees it (fast.h, fused_run.h): the
 * workspace's intermediates copied into a host trace store, and one
 * forward from host tensors with its trace and accumulation model (the
 * sweep's fused records, check_gpu_fast's stagewise tcase). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_internal.h"
#include "fast.h"

namespace {

/* piece w of the workspace into a new host tensor of dtype / shape, whose
 * bytes must be the piece's (a mismatch is a layout disagreement between
 * fast.cu and moe_ref_quantize's shapes, reported, never read past) */
moe_status fetch_into(const moe_fused_problem *p, const moe_cuda_fx_plan *plan, const void *ws, moe_cuda_fx_piece w,
                      moe_dtype dt, int ndim, const int64_t *shape, moe_tensor *t)
{
    moe_status s = moe_tensor_alloc(t, dt, ndim, shape);
    if (s) return s;
    const size_t b = moe_cuda_fx_piece_bytes(p, plan, w);
    if (b != t->nbytes)
        return moe_tensor_free(t), moe_fail(MOE_ERR_SHAPE, "fx trace: piece %d has %zu bytes, its tensor %zu", (int)w,
                                            b, t->nbytes);
    return moe_cuda_fx_fetch(p, plan, ws, w, t->data, b);
}

} // namespace

extern "C" moe_status moe_cuda_fx_trace(const moe_cuda_fx_problem *p, const moe_cuda_fx_plan *plan,
                                        const void *workspace, const void *out, moe_fused_trace_store *t)
{
    if (!p || !plan || !workspace || !out || !t)
        return moe_fail(MOE_ERR_NULL, "fx_trace: problem, plan, workspace, out and t must not be NULL");
    memset(t, 0, sizeof *t);
    const int64_t cap = moe_cuda_fx_layout_cap(p->M, p->topk, p->E, plan->bm1), P = (int64_t)p->M * p->topk;
    const int64_t shh[2] = {cap, p->I}, shy[2] = {cap, p->H}, shx[2] = {p->M, p->H};
    moe_quant_spec as;
    moe_status s = moe_scheme_spec(p->scheme, MOE_OPERAND_ACT, &as);
    if (!s && !(t->rows = (int32_t *)malloc(sizeof(int32_t) * (size_t)P)))
        s = moe_fail(MOE_ERR_NOMEM, "fx_trace: %lld slot rows", (long long)P);
    if (!s) s = moe_cuda_fx_fetch(p, plan, workspace, MOE_FX_ROWS, t->rows, sizeof(int32_t) * (size_t)P);
    if (!s) s = fetch_into(p, plan, workspace, MOE_FX_H, MOE_BF16, 2, shh, &t->h);
    if (!s && moe_cuda_fx_piece_bytes(p, plan, MOE_FX_Y)) s = fetch_into(p, plan, workspace, MOE_FX_Y, MOE_BF16, 2, shy, &t->y);
    if (!s && moe_cuda_fx_piece_bytes(p, plan, MOE_FX_XQ)) { /* the scales in moe_ref_quantize's shapes */
        moe_quant_dims dx, dh;
        if (!(s = moe_quant_shapes(&as, 2, shx, &dx)) && !(s = moe_quant_shapes(&as, 2, shh, &dh)) &&
            !(s = fetch_into(p, plan, workspace, MOE_FX_XQ, as.elem, 2, shx, &t->xq)) &&
            !(s = fetch_into(p, plan, workspace, MOE_FX_HQ, as.elem, 2, shh, &t->hq)) &&
            !(s = fetch_into(p, plan, workspace, MOE_FX_SX, MOE_F32, dx.scale_ndim, dx.scale_shape, &t->sx)))
            s = fetch_into(p, plan, workspace, MOE_FX_SH, MOE_F32, dh.scale_ndim, dh.scale_shape, &t->sh);
    }
    if (!s && !(s = moe_tensor_alloc(&t->out, MOE_BF16, 2, shx))) {
        cudaError_t e = cudaMemcpy(t->out.data, out, t->out.nbytes, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) s = moe_cu_fail(e, "fx_trace: out");
    }
    if (s) return moe_fused_trace_store_free(t), s;
    t->tr.cap = (int)cap, t->tr.row_of_slot = t->rows, t->tr.h = &t->h, t->tr.out = &t->out;
    t->tr.y = t->y.data ? &t->y : NULL;
    if (t->xq.data) t->tr.xq = &t->xq, t->tr.sx = &t->sx, t->tr.hq = &t->hq, t->tr.sh = &t->sh;
    return MOE_OK;
}

namespace {

enum { D_X, D_IDS, D_W, D_W1, D_S1, D_W2, D_S2, D_OUT, D_WS, D_N };

moe_status upload(const moe_tensor *h, void **d)
{
    if (!h) return MOE_OK;
    MOE_CU(cudaMalloc(d, h->nbytes ? h->nbytes : 16));
    MOE_CU(cudaMemcpy(*d, h->data, h->nbytes, cudaMemcpyHostToDevice));
    return MOE_OK;
}

/* shape of a host input as the plan reads it: dtype and element count */
moe_status expect_in(const moe_tensor *t, const char *arg, int64_t n)
{
    if (!t || !t->data) return moe_fail(MOE_ERR_NULL, "fx run: input %s must not be NULL", arg);
    if (t->device.kind != MOE_DEVICE_HOST) return moe_fail(MOE_ERR_INVALID_ARG, "fx run: input %s must be host memory", arg);
    if (n >= 0 && moe_tensor_numel(t) != n)
        return moe_fail(MOE_ERR_SHAPE, "fx run: input %s has %lld elements, the problem needs %lld", arg,
                        (long long)moe_tensor_numel(t), (long long)n);
    return MOE_OK;
}

} // namespace

extern "C" moe_status moe_cuda_fx_run_traced(const moe_fused_problem *p, const moe_fused_inputs *in,
                                             moe_fused_trace_store *t, moe_fused_model *m, char *desc, size_t n)
{
    if (!p || !in || !t || !m) return moe_fail(MOE_ERR_NULL, "fx run: problem, inputs, t and m must not be NULL");
    memset(t, 0, sizeof *t);
    moe_cuda_fx_plan plan;
    moe_status s = moe_cuda_fx_plan_make(p, &plan);
    if (s) return s;
    const int bf = p->scheme == MOE_SCHEME_BF16;
    const int64_t M = p->M, k = p->topk, E = p->E, H = p->H, I = p->I;
    /* the weights' scales in moe_ref_quantize's shapes: the kernels read that many */
    moe_quant_spec wsp;
    moe_quant_dims d1, d2;
    const int64_t sh1[3] = {E, 2 * I, H}, sh2[3] = {E, H, I};
    if ((s = moe_scheme_spec(p->scheme, MOE_OPERAND_WEIGHT, &wsp)) || (s = moe_quant_shapes(&wsp, 3, sh1, &d1)) ||
        (s = moe_quant_shapes(&wsp, 3, sh2, &d2)))
        return s;
    int64_t n1 = 1, n2 = 1;
    for (int i = 0; i < d1.scale_ndim; i++) n1 *= d1.scale_shape[i];
    for (int i = 0; i < d2.scale_ndim; i++) n2 *= d2.scale_shape[i];
    if ((s = expect_in(in->x, "x", M * H)) || (s = expect_in(in->topk_ids, "topk_ids", M * k)) ||
        (s = expect_in(in->topk_w, "topk_w", M * k)) || (s = expect_in(in->w1, "w1", E * 2 * I * H)) ||
        (s = expect_in(in->w2, "w2", E * H * I)) || (!bf && ((s = expect_in(in->w1_scale, "w1_scale", n1)) ||
                                                             (s = expect_in(in->w2_scale, "w2_scale", n2)))))
        return s;
    if (in->x->dtype != MOE_BF16 || in->topk_ids->dtype != MOE_I32 || in->topk_w->dtype != MOE_F32)
        return moe_fail(MOE_ERR_DTYPE, "fx run: x bf16, topk_ids int32 and topk_w f32 are the rule");
    if (in->w1->dtype != wsp.elem || in->w2->dtype != wsp.elem)
        return moe_fail(MOE_ERR_DTYPE, "fx run: w1 and w2 must hold %s's weight elements", moe_scheme_name(p->scheme));
    void *d[D_N] = {0};
    if (!(s = upload(in->x, &d[D_X])) && !(s = upload(in->topk_ids, &d[D_IDS])) && !(s = upload(in->topk_w, &d[D_W])) &&
        !(s = upload(in->w1, &d[D_W1])) && !(s = upload(in->w2, &d[D_W2])) &&
        !(s = upload(bf ? NULL : in->w1_scale, &d[D_S1])) && !(s = upload(bf ? NULL : in->w2_scale, &d[D_S2]))) {
        cudaError_t e = cudaMalloc(&d[D_OUT], (size_t)(M * H * 2));
        if (e == cudaSuccess) e = cudaMalloc(&d[D_WS], plan.workspace);
        if (e == cudaSuccess) e = cudaMemset(d[D_OUT], 0xff, (size_t)(M * H * 2)); /* NaN: unwritten outputs show */
        if (e != cudaSuccess) s = moe_cu_fail(e, "fx run: device buffers");
    }
    if (!s) {
        moe_cuda_fx_args a;
        memset(&a, 0, sizeof a);
        a.x = d[D_X], a.topk_ids = (const int32_t *)d[D_IDS], a.topk_w = (const float *)d[D_W];
        a.w1 = d[D_W1], a.w2 = d[D_W2], a.out = d[D_OUT];
        a.w1_scale = (const float *)d[D_S1], a.w2_scale = (const float *)d[D_S2];
        s = moe_cuda_fx_forward(p, &plan, &a, d[D_WS], NULL);
        cudaError_t e = cudaDeviceSynchronize();
        if (!s && e != cudaSuccess) s = moe_cu_fail(e, "fx run: the forward");
    }
    if (!s) s = moe_cuda_fx_trace(p, &plan, d[D_WS], d[D_OUT], t);
    for (int i = 0; i < D_N; i++) cudaFree(d[i]);
    if (s) return s;
    *m = moe_cuda_fx_model(p, &plan);
    if (desc && n) {
        char tiles[160];
        moe_cuda_fx_tiles(&plan, tiles, sizeof tiles);
        snprintf(desc, n, "tiles %s, model k_step %d acc %d promote %d%s", tiles, m->k_step, m->acc_bits, m->promote_k,
                 m->exact ? " exact" : "");
    }
    return MOE_OK;
}
