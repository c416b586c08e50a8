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

#include <stdint.h>
#include <string.h>

/* Bit casts between f32 and its encoding. memcpy is the cast that is
 * defined in both C and C++ (a union is not in C++) and compiles to a
 * register move on host and device. */
MOE_HD MOE_INLINE uint32_t moe_f32_as_u32(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

MOE_HD MOE_INLINE float moe_u32_as_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

#endif
