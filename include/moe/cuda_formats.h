/* Number-format conversion on an NVIDIA GPU. The kernels include the
 * reference's own round-and-pack headers (the headers of reference/formats/), so a GPU
 * conversion is the reference conversion, bit for bit. Pointers are device
 * pointers; flags (may be NULL) receives the OR of all elements' flags. */
#ifndef MOE_CUDA_FORMATS_H
#define MOE_CUDA_FORMATS_H

#include <stddef.h>
#include "moe/format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices; MOE_ERR_DEVICE (with the driver's message) when
 * the runtime cannot be initialised, *n = 0 when there is no device. */
moe_status moe_cuda_device_count(int *n);

moe_status moe_cuda_encode_array(moe_dtype d, const float *src, size_t n, moe_policy p, void *dst,
                                 unsigned *flags);
moe_status moe_cuda_decode_array(moe_dtype d, const void *src, size_t n, float *dst);

#ifdef __cplusplus
}
#endif

#endif
