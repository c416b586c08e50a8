/* Integer quantization: round under the rounding mode (RNE: half to even),
 * then clamp to [lo, hi] while still in float, so the final conversion to
 * int is always in range (C leaves out-of-range float->int undefined).
 * NaN gives 0 (invalid); +-Inf clamp (overflow). */
#ifndef MOE_FORMATS_INT_ROUND_H
#define MOE_FORMATS_INT_ROUND_H
#include "round_pack.h"

MOE_HD MOE_INLINE int32_t moe_s_round_to_int(float x, moe_rounding rnd, int32_t lo, int32_t hi,
                                              unsigned *flags)
{
    uint32_t a = moe_f32_as_u32(x) & 0x7FFFFFFFu;
    if (a > 0x7F800000u) {
        *flags |= MOE_FLAG_INVALID;
        return 0;
    }
    float r = x;
    if (a < 0x4B000000u) { /* |x| < 2^23: may have a fraction */
        float t = (float)(int32_t)x; /* truncation, in range */
        float frac = x - t;          /* exact (Sterbenz) */
        if (frac != 0.0f) {
            *flags |= MOE_FLAG_INEXACT;
            if (rnd == MOE_RND_RNE) {
                float af = frac < 0.0f ? -frac : frac;
                int odd = ((int32_t)t) & 1;
                if (af > 0.5f || (af == 0.5f && odd)) t += frac < 0.0f ? -1.0f : 1.0f;
            }
        }
        r = t;
    }
    if (r > (float)hi || r < (float)lo) {
        *flags |= MOE_FLAG_OVERFLOW;
        if (a != 0x7F800000u) *flags |= MOE_FLAG_INEXACT;
        return r > 0.0f ? hi : lo;
    }
    return (int32_t)r;
}
#endif
