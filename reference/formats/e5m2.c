#include "e5m2.h"

uint8_t moe_f32_to_e5m2(float x, moe_policy p, unsigned *flags)
{
    unsigned f = 0;
    uint8_t c = moe_s_round_pack_e5m2(x, p, &f);
    if (flags) *flags |= f;
    return c;
}

float moe_e5m2_to_f32(uint8_t c) { return moe_s_decode_e5m2(c); }
