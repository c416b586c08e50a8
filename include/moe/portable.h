/* Macros that let one source line compile as plain C11 on the host and as
 * CUDA C for the device. The conformance CUDA build includes the same
 * format and math headers as the reference, so the reference's arithmetic
 * is the GPU's arithmetic (DESIGN section 5). */
#ifndef MOE_PORTABLE_H
#define MOE_PORTABLE_H

#ifdef __CUDACC__
#define MOE_HD __host__ __device__
#else
#define MOE_HD
#endif

#define MOE_INLINE static inline

#endif
