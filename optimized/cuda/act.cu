/* CUDA conformance backend: activation. One thread per output element
 * (grid-stride over P*I, consecutive threads on consecutive columns, so
 * the loads of a row's gate and up halves and the stores are coalesced),
 * each computing the reference's own element (moe_act_elem,
 * reference/act_core.h, MOE_HD): the canonical silu / gelu / sigmoid, the
 * reference's min/clamp NaN rules, the optional rounding of act(g) to the
 * input dtype, one RNE store. Elements are independent, so nothing about
 * the order matters. No error is found while computing: the reference's
 * check (including its row_expert scan) is the only failure. */
#include "cuda_internal.h"
#include "reference/act_core.h"
#include "reference/elem.h"
/* stage_checks.h declares C functions without a C++ guard */
extern "C" {
#include "reference/stage_checks.h"
}

namespace {

constexpr int kThreads = 256;

/* p: a copy of the caller's params, only its scalar fields read here (the
 * per-expert vectors come as va, vb, vl: device data or NULL). */
__global__ void act_kernel(moe_act_params p, int gated, moe_dtype xd, const void *x, const int32_t *re,
                           const float *va, const float *vb, const float *vl, int64_t P, int64_t I, moe_dtype od,
                           void *out)
{
    int64_t n = P * I, step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < n; o += step) {
        int64_t r = o / I, i = o - r * I;
        int e = re ? re[r] : 0;
        if (e < 0) { /* a row no local expert owns: zeros, as the reference */
            moe_s_store(od, out, o, 0.0f);
            continue;
        }
        moe_s_store(od, out, o, moe_act_elem(&p, gated, xd, x, r, i, I, e, va, vb, vl));
    }
}

const float *vec(const moe_tensor *t) { return t ? (const float *)t->data : nullptr; }

} // namespace

extern "C" moe_status moe_cuda_activation(const moe_tensor *x, const moe_tensor *row_expert, const moe_act_params *p,
                                          moe_tensor *out)
{
    moe_status st;
    if ((st = moe_cu_expect_dev(x, "x")) || (st = moe_cu_expect_dev(row_expert, "row_expert")) ||
        (p && ((st = moe_cu_expect_dev(p->swiglu_alpha, "swiglu_alpha")) ||
               (st = moe_cu_expect_dev(p->swiglu_beta, "swiglu_beta")) ||
               (st = moe_cu_expect_dev(p->swiglu_limit, "swiglu_limit")))) ||
        (st = moe_cu_expect_dev(out, "out")))
        return st;
    /* the check scans row_expert (its bytes come to the host); the
     * per-expert vectors are checked by shape and presence only */
    moe_tensor mx, mr, mo, ma, mb, ml;
    moe_act_params hp;
    const moe_tensor *x_m = moe_cu_mirror(x, &mx, 0, &st);
    const moe_tensor *r_m = moe_cu_mirror(row_expert, &mr, 1, &st);
    const moe_tensor *o_m = moe_cu_mirror(out, &mo, 0, &st);
    if (p) {
        hp = *p;
        hp.swiglu_alpha = moe_cu_mirror(p->swiglu_alpha, &ma, 0, &st);
        hp.swiglu_beta = moe_cu_mirror(p->swiglu_beta, &mb, 0, &st);
        hp.swiglu_limit = moe_cu_mirror(p->swiglu_limit, &ml, 0, &st);
    }
    if (st == MOE_OK) st = moe_ref_check_activation(x_m, r_m, p ? &hp : NULL, o_m);
    moe_cu_mirror_free(&mr);
    if (st != MOE_OK) return st;

    int64_t P = x->shape[0], I = out->shape[1];
    if (P * I == 0) return MOE_OK;
    const int32_t *re = row_expert ? (const int32_t *)row_expert->data : nullptr;
    act_kernel<<<moe_cu_blocks(P * I, kThreads), kThreads>>>(*p, moe_act_is_gated(p->act), x->dtype, x->data, re,
                                                             vec(p->swiglu_alpha), vec(p->swiglu_beta),
                                                             vec(p->swiglu_limit), P, I, out->dtype, out->data);
    return moe_cu_launched("act_kernel");
}
