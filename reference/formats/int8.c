#include "int_round.h"

int8_t moe_f32_to_i8(float x, moe_rounding r, unsigned *flags)
{
    unsigned f = 0;
    int32_t v = moe_s_round_to_int(x, r, -128, 127, &f);
    if (flags) *flags |= f;
    return (int8_t)v;
}
