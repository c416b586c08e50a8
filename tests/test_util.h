/* Shared helpers for the Check suites. */
#ifndef MOE_TEST_UTIL_H
#define MOE_TEST_UTIL_H

#include <stdint.h>
#include <string.h>
#include "moe/format.h"

static inline uint32_t tu_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static inline float tu_float(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* The conversion targets and the policies each defines. */
typedef struct {
    const char *name;
    moe_dtype dtype;
    int nonsat_ok;
} tu_target;

static const tu_target tu_targets[] = {
    {"f16", MOE_F16, 1},   {"bf16", MOE_BF16, 1}, {"e4m3", MOE_E4M3, 1},
    {"e5m2", MOE_E5M2, 1}, {"e2m1", MOE_E2M1, 0}, {"e8m0", MOE_E8M0, 1},
    {"int8", MOE_I8, 0},   {"int4", MOE_I4, 0},   {"uint8", MOE_U8, 0},
};
#define TU_NTARGETS ((int)(sizeof tu_targets / sizeof tu_targets[0]))

/* Policy index 0..3 -> (rz, nonsat). */
static inline moe_policy tu_policy(int i)
{
    moe_policy p = {(i & 1) ? MOE_RND_RZ : MOE_RND_RNE, (i & 2) ? MOE_NONSAT : MOE_SAT};
    return p;
}

#endif
