#include "int_round.h"

/* Signed int4 in [-8, 7]; packing (low nibble first) is in registry.c. */
int8_t moe_f32_to_i4(float x, moe_rounding r, unsigned *flags)
{
    unsigned f = 0;
    int32_t v = moe_s_round_to_int(x, r, -8, 7, &f);
    if (flags) *flags |= f;
    return (int8_t)v;
}
