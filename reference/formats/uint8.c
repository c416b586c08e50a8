#include "int_round.h"

uint8_t moe_f32_to_u8(float x, moe_rounding r, unsigned *flags)
{
    unsigned f = 0;
    int32_t v = moe_s_round_to_int(x, r, 0, 255, &f);
    if (flags) *flags |= f;
    return (uint8_t)v;
}
