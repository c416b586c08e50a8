/* CPU backend: quantize, dequantize. */
#include "cpu.h"

moe_status moe_cpu_quantize(const moe_quant_spec *spec, const moe_tensor *x, const moe_tensor *static_scale, moe_tensor *q_out, moe_tensor *scale_out, moe_tensor *global_scale_out)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_quantize(spec, x, static_scale, q_out, scale_out, global_scale_out);
}

moe_status moe_cpu_dequantize(const moe_quant_spec *spec, const moe_tensor *q, const moe_tensor *scale, const moe_tensor *global_scale, moe_tensor *x_out)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_dequantize(spec, q, scale, global_scale, x_out);
}
