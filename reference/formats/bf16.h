/* bfloat16: 1.8.7, f32's exponent range, max (2-2^-7)*2^127. Rounded from
 * the full f32 value (not truncated), RNE by default with IEEE overflow. */
#ifndef MOE_FORMATS_BF16_H
#define MOE_FORMATS_BF16_H
#include "round_pack.h"

MOE_HD MOE_INLINE uint16_t moe_s_round_pack_bf16(float x, moe_policy p, unsigned *flags)
{
    return (uint16_t)moe_s_round_pack_ieee(x, 8, 7, p, flags);
}

MOE_HD MOE_INLINE float moe_s_decode_bf16(uint16_t c)
{
    return moe_s_decode_ieee(c, 8, 7);
}
#endif
