/* OFP8 E5M2: 1.5.2, bias 15, max 57344 (S.11110.11), Inf S.11111.00,
 * NaN S.11111.{01,10,11}; canonical NaN S.11111.10. NONSAT overflow is
 * +-Inf, as in IEEE (ONNX float8.md "Cast"). */
#ifndef MOE_FORMATS_E5M2_H
#define MOE_FORMATS_E5M2_H
#include "round_pack.h"

MOE_HD MOE_INLINE uint8_t moe_s_round_pack_e5m2(float x, moe_policy p, unsigned *flags)
{
    return (uint8_t)moe_s_round_pack_ieee(x, 5, 2, p, flags);
}

MOE_HD MOE_INLINE float moe_s_decode_e5m2(uint8_t c)
{
    return moe_s_decode_ieee(c, 5, 2);
}
#endif
