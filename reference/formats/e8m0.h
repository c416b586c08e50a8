/* E8M0, the MX shared scale: unsigned 2^(code-127) for codes 0..254, 0xFF
 * the single NaN, no zero, no sign (MX v1.0 section 5.4.1 as cited in
 * anchors 3.2). With no fraction bits, "ties to even" means the even code,
 * the rule every format here shares. Nothing is below 2^-127, so 0 and
 * tiny values give code 0x00 (inexact, underflow); negatives are invalid.
 * The MX scale rules (ocp_floor, ceil_pow2) compute exponents directly and
 * do not go through this conversion. */
#ifndef MOE_FORMATS_E8M0_H
#define MOE_FORMATS_E8M0_H
#include "round_pack.h"

MOE_HD MOE_INLINE uint8_t moe_s_round_pack_e8m0(float x, moe_policy p, unsigned *flags)
{
    uint32_t u = moe_f32_as_u32(x);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) {
        if (!(a & 0x400000u)) *flags |= MOE_FLAG_INVALID;
        return 0xFF;
    }
    if ((u >> 31) && a != 0) {
        *flags |= MOE_FLAG_INVALID;
        return 0xFF;
    }
    if (a == 0x7F800000u) {
        if (p.sat == MOE_SAT) {
            *flags |= MOE_FLAG_OVERFLOW;
            return 0xFE;
        }
        *flags |= MOE_FLAG_INVALID;
        return 0xFF;
    }
    uint32_t e = a >> 23, f = a & 0x7FFFFFu;
    uint32_t code;
    if (e == 0) { /* below 2^-126: between nothing, code 0 (2^-127) and code 1 */
        if (f < 0x400000u) {
            *flags |= MOE_FLAG_INEXACT | MOE_FLAG_UNDERFLOW;
            return 0x00;
        }
        code = 0;
        f = (f - 0x400000u) << 1; /* fraction of 2^-127 scaled like a normal's */
    } else {
        code = e;
    }
    if (f != 0) {
        *flags |= MOE_FLAG_INEXACT;
        if (p.rnd == MOE_RND_RNE && (f > 0x400000u || (f == 0x400000u && (code & 1u)))) code++;
    }
    if (code == 0xFF) {
        *flags |= MOE_FLAG_OVERFLOW;
        return p.sat == MOE_SAT ? 0xFE : 0xFF;
    }
    return (uint8_t)code;
}

MOE_HD MOE_INLINE float moe_s_decode_e8m0(uint8_t c)
{
    if (c == 0xFF) return moe_u32_as_f32(0x7FC00000u);
    if (c == 0) return moe_u32_as_f32(0x00400000u); /* 2^-127, an f32 subnormal */
    return moe_u32_as_f32((uint32_t)c << 23);
}
#endif
