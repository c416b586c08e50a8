/* The persistent form of the swapped decode tiles (fast_swp.cuh): its
 * instantiations live in fast_swp.cu, so the forward (fast.cu) sees only
 * these declarations. */
#ifndef MOE_OPTIMIZED_CUDA_FAST_SWP_H
#define MOE_OPTIMIZED_CUDA_FAST_SWP_H

#include <type_traits>
#include "fast_gemm.cuh"

namespace fx {

/* the operands it is built for: bf16, and e4m3 with epilogue or k-tile scales */
template <class T, int QS> struct swp_has {
    static constexpr bool v = (std::is_same<T, __nv_bfloat16>::value && QS == QS_EPILOGUE) ||
                              (std::is_same<T, __nv_fp8_e4m3>::value && (QS == QS_EPILOGUE || QS == QS_KTILE));
};

/* the shared-memory limits of both forms */
template <class T, int BM, int EPI, int QS> cudaError_t swp_prepare();
/* a BM x 128 tile grid over max_blocks row blocks and n_cols output columns,
 * as a programmatic dependent of the kernel before it; form 1: one CTA an SM
 * on 11 / 12 stages, 2: two on 5 / 6. Invalid value without TMA weights,
 * on the slot layout or for another form */
template <class T, int BM, int EPI, int QS>
cudaError_t swp_launch(const gemm_params &p, int max_blocks, int n_cols, cudaStream_t s, int form);

} // namespace fx

#endif
