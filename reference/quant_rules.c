/* The scale rules: one group's amax (or min/max) in, the element step and
 * the stored scale out. The arithmetic lives in quant_core.h (MOE_HD, so
 * the CUDA conformance build runs the same lines); each rule there spells
 * out, in order, every f32 operation the upstream code it models performs
 * (include/moe/quant.h lists them); exponents come from the float bits,
 * never from a logarithm. */
#include "quant_internal.h"

float moe_q_canon_nan(float v, float x) { return moe_qc_canon_nan(v, x); }
int moe_q_floor_log2(float v) { return moe_qc_floor_log2(v); }
int moe_q_ceil_log2(float v) { return moe_qc_ceil_log2(v); }

float moe_q_nvfp4_global(const moe_quant_spec *s, float amax_prop)
{
    return moe_qc_nvfp4_global(s, amax_prop);
}

float moe_q_code_scale(const moe_quant_spec *s, uint8_t code, float gs)
{
    return moe_qc_code_scale(s, code, gs);
}

void moe_q_rule_dynamic(const moe_quant_spec *s, const moe_q_stats *st, float gs, moe_q_group *o)
{
    moe_qc_rule_dynamic(s, st, gs, o);
}
