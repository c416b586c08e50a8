#include "f16.h"

uint16_t moe_f32_to_f16(float x, moe_policy p, unsigned *flags)
{
    unsigned f = 0;
    uint16_t c = moe_s_round_pack_f16(x, p, &f);
    if (flags) *flags |= f;
    return c;
}

float moe_f16_to_f32(uint16_t c) { return moe_s_decode_f16(c); }
