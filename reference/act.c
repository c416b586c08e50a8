#include <stdint.h>
#include <string.h>
#include "act_core.h"
#include "elem.h"
#include "math.h"
#include "moe/act.h"
#include "stage_checks.h"

static const char *const act_names[MOE_ACT_COUNT] = {"silu",         "gelu",        "gelu_tanh",  "swigluoai",
                                                     "swiglu_clamp", "swiglu_bias", "relu2",      "silu_nomul",
                                                     "gelu_nomul",   "identity"};
static const char *const layout_names[MOE_LAYOUT_COUNT] = {"gate_up", "up_gate", "interleaved"};

const char *moe_act_name(moe_act a) { return (unsigned)a < MOE_ACT_COUNT ? act_names[a] : "unknown"; }
const char *moe_act_layout_name(moe_act_layout l) { return (unsigned)l < MOE_LAYOUT_COUNT ? layout_names[l] : "unknown"; }

moe_status moe_act_from_name(const char *name, moe_act *out)
{
    if (!name || !out) return moe_fail(MOE_ERR_NULL, "name, out: must not be NULL");
    for (int i = 0; i < MOE_ACT_COUNT; i++)
        if (strcmp(name, act_names[i]) == 0) return *out = (moe_act)i, MOE_OK;
    return moe_fail(MOE_ERR_INVALID_ARG, "activation '%s': not one of silu gelu gelu_tanh swigluoai swiglu_clamp "
                    "swiglu_bias relu2 silu_nomul gelu_nomul identity", name);
}

moe_status moe_act_layout_from_name(const char *name, moe_act_layout *out)
{
    if (!name || !out) return moe_fail(MOE_ERR_NULL, "name, out: must not be NULL");
    for (int i = 0; i < MOE_LAYOUT_COUNT; i++)
        if (strcmp(name, layout_names[i]) == 0) return *out = (moe_act_layout)i, MOE_OK;
    return moe_fail(MOE_ERR_INVALID_ARG, "layout '%s': not one of gate_up up_gate interleaved", name);
}

int moe_act_is_gated(moe_act a) { return a <= MOE_ACT_SWIGLU_BIAS; }

moe_act_params moe_act_defaults(moe_act a, moe_act_layout layout)
{
    moe_act_params p;
    memset(&p, 0, sizeof p);
    p.act = a;
    p.layout = layout;
    p.alpha = 1.702f;
    p.limit = 7.0f;
    return p;
}

static const float *opt_vec(const moe_tensor *t) { return t ? (const float *)t->data : NULL; }

static moe_status check_vec(const moe_tensor *t, const char *arg)
{
    if (!t) return MOE_OK;
    return moe_tensor_expect(t, arg, MOE_F32, 1);
}

moe_status moe_ref_check_activation(const moe_tensor *x, const moe_tensor *row_expert, const moe_act_params *p,
                                    const moe_tensor *out)
{
    moe_status s = moe_s_expect_storage(x, "x", 2);
    if (s != MOE_OK) return s;
    if ((s = moe_s_expect_storage(out, "out", 2))) return s;
    if (!p) return moe_fail(MOE_ERR_NULL, "params: must not be NULL");
    if ((unsigned)p->act >= MOE_ACT_COUNT) return moe_fail(MOE_ERR_INVALID_ARG, "act %d: not a moe_act", (int)p->act);
    if ((unsigned)p->layout >= MOE_LAYOUT_COUNT)
        return moe_fail(MOE_ERR_INVALID_ARG, "layout %d: not a moe_act_layout", (int)p->layout);
    int gated = moe_act_is_gated(p->act);
    int64_t P = x->shape[0], I = out->shape[1];
    if (out->shape[0] != P || x->shape[1] != (gated ? 2 * I : I))
        return moe_fail(MOE_ERR_SHAPE, "x [%lld, %lld], out [%lld, %lld]: %s needs x [P, %s] and out [P, I]",
                        (long long)P, (long long)x->shape[1], (long long)out->shape[0], (long long)I,
                        moe_act_name(p->act), gated ? "2I" : "I");
    if ((p->act == MOE_ACT_SWIGLUOAI || p->act == MOE_ACT_SWIGLU_CLAMP) && !(p->limit >= 0.0f))
        return moe_fail(MOE_ERR_INVALID_ARG, "limit: must be >= 0 (or +Inf) for %s", moe_act_name(p->act));
    /* x - x is 0 exactly for finite x and NaN for NaN or Inf (no libm here) */
    if (p->act == MOE_ACT_SWIGLUOAI && !(p->alpha - p->alpha == 0.0f))
        return moe_fail(MOE_ERR_INVALID_ARG, "alpha: must be finite for swigluoai");
    if ((s = check_vec(p->swiglu_alpha, "swiglu_alpha")) || (s = check_vec(p->swiglu_beta, "swiglu_beta")) ||
        (s = check_vec(p->swiglu_limit, "swiglu_limit")))
        return s;
    if (row_expert) {
        if ((s = moe_tensor_expect(row_expert, "row_expert", MOE_I32, 1))) return s;
        if (row_expert->shape[0] != P)
            return moe_fail(MOE_ERR_SHAPE, "row_expert: %lld entries, x has %lld rows", (long long)row_expert->shape[0],
                            (long long)P);
    }
    const float *va = opt_vec(p->swiglu_alpha), *vb = opt_vec(p->swiglu_beta), *vl = opt_vec(p->swiglu_limit);
    /* the experts every per-expert parameter vector covers */
    int64_t nexp = INT64_MAX;
    const moe_tensor *vecs[3] = {p->swiglu_alpha, p->swiglu_beta, p->swiglu_limit};
    for (int i = 0; i < 3; i++)
        if (vecs[i] && vecs[i]->shape[0] < nexp) nexp = vecs[i]->shape[0];
    const int32_t *re = row_expert ? row_expert->data : NULL;
    for (int64_t r = 0; r < P && re; r++)
        if (re[r] < -1 || (p->act == MOE_ACT_SWIGLU_BIAS && (va || vb || vl) && re[r] >= nexp))
            return moe_fail(MOE_ERR_INVALID_ARG, "row_expert[%lld] = %d: no per-expert swiglu parameter for it",
                            (long long)r, re[r]);
    return MOE_OK;
}

moe_status moe_ref_activation(const moe_tensor *x, const moe_tensor *row_expert, const moe_act_params *p,
                              moe_tensor *out)
{
    moe_status s = moe_ref_check_activation(x, row_expert, p, out);
    if (s != MOE_OK) return s;
    int gated = moe_act_is_gated(p->act);
    int64_t P = x->shape[0], I = out->shape[1];
    const float *va = opt_vec(p->swiglu_alpha), *vb = opt_vec(p->swiglu_beta), *vl = opt_vec(p->swiglu_limit);
    const int32_t *re = row_expert ? row_expert->data : NULL;
    moe_dtype xd = x->dtype;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < P; r++) {
        int e = re ? re[r] : 0;
        for (int64_t i = 0; i < I; i++) {
            int64_t o = r * I + i;
            if (e < 0) {
                moe_s_store(out->dtype, out->data, o, 0.0f);
                continue;
            }
            float v = moe_act_elem(p, gated, xd, x->data, r, i, I, e, va, vb, vl);
            moe_s_store(out->dtype, out->data, o, v);
        }
    }
    return MOE_OK;
}
