/* IEEE 754 binary16: 1.5.10, bias 15, max 65504. */
#ifndef MOE_FORMATS_F16_H
#define MOE_FORMATS_F16_H
#include "round_pack.h"

MOE_HD MOE_INLINE uint16_t moe_s_round_pack_f16(float x, moe_policy p, unsigned *flags)
{
    return (uint16_t)moe_s_round_pack_ieee(x, 5, 10, p, flags);
}

MOE_HD MOE_INLINE float moe_s_decode_f16(uint16_t c)
{
    return moe_s_decode_ieee(c, 5, 10);
}
#endif
