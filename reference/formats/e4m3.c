#include "e4m3.h"

uint8_t moe_f32_to_e4m3(float x, moe_policy p, unsigned *flags)
{
    unsigned f = 0;
    uint8_t c = moe_s_round_pack_e4m3(x, p, &f);
    if (flags) *flags |= f;
    return c;
}

float moe_e4m3_to_f32(uint8_t c) { return moe_s_decode_e4m3(c); }
