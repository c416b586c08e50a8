/* CPU backend: grouped_gemm. */
#include "cpu.h"

moe_status moe_cpu_grouped_gemm(const moe_gemm_args *g, moe_tensor *out)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_grouped_gemm(g, out);
}
