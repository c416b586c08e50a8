/* FP4 E2M1: 1.2.1, bias 1, values {0, 0.5, 1, 1.5, 2, 3, 4, 6}, no Inf or
 * NaN. Always saturating: past +-6 and +-Inf give +-6; NaN gives +6, the
 * ONNX float4.md rule (a named choice, not an accident). */
#ifndef MOE_FORMATS_E2M1_H
#define MOE_FORMATS_E2M1_H
#include "round_pack.h"

MOE_HD MOE_INLINE uint8_t moe_s_round_pack_e2m1(float x, moe_policy p, unsigned *flags)
{
    uint32_t u = moe_f32_as_u32(x);
    uint8_t sign = (uint8_t)((u >> 31) << 3);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) {
        *flags |= MOE_FLAG_INVALID;
        return 0x7;
    }
    if (a == 0x7F800000u) {
        *flags |= MOE_FLAG_OVERFLOW;
        return sign | 0x7;
    }
    if (a == 0) return sign;
    moe_s_fields f = moe_s_round_fields(a, 1, 1, p.rnd, flags);
    if (f.exp > 3) {
        *flags |= MOE_FLAG_OVERFLOW | MOE_FLAG_INEXACT;
        return sign | 0x7;
    }
    return (uint8_t)(sign | (f.exp << 1) | f.frac);
}

MOE_HD MOE_INLINE float moe_s_decode_e2m1(uint8_t c)
{
    return moe_s_decode_finite((c >> 3) & 1u, (c >> 1) & 3u, c & 1u, 1, 1);
}
#endif
