/* OFP8 E4M3FN: 1.4.3, bias 7, no Inf; S.1111.111 is the only NaN, so the
 * top binade stops at S.1111.110 = 448. The policy decides what is past it:
 * SAT clamps (+-448, Inf -> +-448), NONSAT makes NaN. The test is on the
 * rounded value, so 464 (a tie with even 448) stays 448 and 465 does not
 * (ONNX float8.md; PyTorch's c10 converter is NONSAT, anchors 3.6). */
#ifndef MOE_FORMATS_E4M3_H
#define MOE_FORMATS_E4M3_H
#include "round_pack.h"

MOE_HD MOE_INLINE uint8_t moe_s_round_pack_e4m3(float x, moe_policy p, unsigned *flags)
{
    uint32_t u = moe_f32_as_u32(x);
    uint8_t sign = (uint8_t)((u >> 31) << 7);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) {
        if (!(a & 0x400000u)) *flags |= MOE_FLAG_INVALID;
        return sign | 0x7F;
    }
    if (a == 0x7F800000u) {
        if (p.sat == MOE_SAT) {
            *flags |= MOE_FLAG_OVERFLOW;
            return sign | 0x7E;
        }
        *flags |= MOE_FLAG_INVALID;
        return sign | 0x7F;
    }
    if (a == 0) return sign;
    moe_s_fields f = moe_s_round_fields(a, 3, 7, p.rnd, flags);
    if (f.exp > 15 || (f.exp == 15 && f.frac == 7)) {
        *flags |= MOE_FLAG_OVERFLOW | MOE_FLAG_INEXACT;
        return sign | ((p.sat == MOE_SAT || p.rnd == MOE_RND_RZ) ? 0x7E : 0x7F);
    }
    return (uint8_t)(sign | (f.exp << 3) | f.frac);
}

MOE_HD MOE_INLINE float moe_s_decode_e4m3(uint8_t c)
{
    uint32_t sign = (uint32_t)(c >> 7);
    if ((c & 0x7F) == 0x7F) return moe_u32_as_f32((sign << 31) | 0x7FC00000u);
    return moe_s_decode_finite(sign, (c >> 3) & 0xFu, c & 7u, 3, 7);
}
#endif
