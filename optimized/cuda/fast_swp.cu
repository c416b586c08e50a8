/* The instantiations of the persistent decode tiles (fast_swp.cuh) the
 * forward launches (fast.cu: bf16 and the e4m3 schemes, 16 and 32 token
 * rows, GEMM1's gated epilogue and GEMM2's two). */
#include "fast_swp.cuh"

namespace fx {

#define MOE_SWP(T, BM, EPI, QS)                                                                                      \
    template cudaError_t swp_prepare<T, BM, EPI, QS>();                                                              \
    template cudaError_t swp_launch<T, BM, EPI, QS>(const gemm_params &, int, int, cudaStream_t, int);
#define MOE_SWP_EPI(T, BM, QS) MOE_SWP(T, BM, EPI_GATED, QS) MOE_SWP(T, BM, EPI_WSTORE, QS) MOE_SWP(T, BM, EPI_WATOMIC, QS)
#define MOE_SWP_BM(T, QS) MOE_SWP_EPI(T, 16, QS) MOE_SWP_EPI(T, 32, QS)

MOE_SWP_BM(__nv_bfloat16, QS_EPILOGUE)
MOE_SWP_BM(__nv_fp8_e4m3, QS_EPILOGUE)
MOE_SWP_BM(__nv_fp8_e4m3, QS_KTILE)

#undef MOE_SWP_BM
#undef MOE_SWP_EPI
#undef MOE_SWP

} // namespace fx
