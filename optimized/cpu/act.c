/* CPU backend: activation. */
#include "cpu.h"

moe_status moe_cpu_activation(const moe_tensor *x, const moe_tensor *row_expert, const moe_act_params *p, moe_tensor *out)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_activation(x, row_expert, p, out);
}
