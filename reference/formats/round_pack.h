/* The shared half of every float conversion: unpack an f32 magnitude and
 * round it onto the grid of a binary format with `mbits` fraction bits and
 * exponent bias `bias`, with subnormals and an unbounded top exponent.
 * Each format's own round-and-pack routine (f16.h, e4m3.h, ...) then
 * decides what an exponent past its range and the special values become.
 * This is SoftFloat's split (s_roundPackTo*.c): one rounding routine, one
 * packing routine per format. Header-only so CUDA can include it. */
#ifndef MOE_FORMATS_ROUND_PACK_H
#define MOE_FORMATS_ROUND_PACK_H

#include <stdint.h>
#include <string.h>
#include "moe/format.h"
#include "moe/portable.h"

/* Position of the highest set bit of a nonzero value. */
MOE_HD MOE_INLINE int moe_s_msb32(uint32_t v)
{
    int n = 0;
    while (v >>= 1) n++;
    return n;
}

/* A rounded magnitude as biased exponent field and fraction field. `exp`
 * may exceed the format's top exponent: the caller decides what that
 * overflow means. exp == 0 with frac == 0 is a rounded-to-zero result. */
typedef struct {
    uint32_t exp;
    uint32_t frac;
} moe_s_fields;

/* Rounds |x| (absbits: a nonzero finite f32 without its sign) to a format
 * with mbits fraction bits and the given bias. Raises inexact and
 * (tininess before rounding) underflow. */
MOE_HD MOE_INLINE moe_s_fields moe_s_round_fields(uint32_t absbits, int mbits, int bias,
                                                   moe_rounding rnd, unsigned *flags)
{
    uint32_t e32 = absbits >> 23, f32 = absbits & 0x7FFFFFu;
    uint32_t sig = e32 ? (f32 | 0x800000u) : f32; /* value = sig * 2^e */
    int e = e32 ? (int)e32 - 150 : -149;
    int ue = moe_s_msb32(sig) + e; /* unbiased exponent of the value */
    int emin = 1 - bias;
    int q = (ue > emin ? ue : emin) - mbits; /* exponent of one unit in the last place */
    int shift = q - e;                      /* >= 0 because mbits <= 23 */
    uint32_t n, rem = 0, half = 0;
    if (shift >= 32) {
        n = 0;
        rem = sig; /* below half: sig < 2^24 <= 2^(shift-1) */
    } else if (shift > 0) {
        n = sig >> shift;
        rem = sig & ((1u << shift) - 1u);
        half = 1u << (shift - 1);
        if (rnd == MOE_RND_RNE && (rem > half || (rem == half && (n & 1u)))) n++;
    } else {
        n = sig;
    }
    if (rem != 0) {
        *flags |= MOE_FLAG_INEXACT;
        if (ue < emin) *flags |= MOE_FLAG_UNDERFLOW;
    }
    moe_s_fields r = {0u, 0u};
    if (n == 0) return r;
    if (n == (2u << mbits)) { /* rounding carried into the next binade */
        n >>= 1;
        q++;
    }
    if (n >= (1u << mbits)) {
        r.exp = (uint32_t)(q + mbits + bias);
        r.frac = n - (1u << mbits);
    } else {
        r.frac = n; /* subnormal: q == emin - mbits */
    }
    return r;
}

/* Round-and-pack for the IEEE-like formats that have Inf (f16, bf16, e5m2):
 * top exponent field all ones is Inf/NaN, canonical quiet NaN has the top
 * fraction bit set. */
MOE_HD MOE_INLINE uint32_t moe_s_round_pack_ieee(float x, int ebits, int mbits, moe_policy p,
                                                  unsigned *flags)
{
    uint32_t u = moe_f32_as_u32(x);
    uint32_t sign = (u >> 31) << (ebits + mbits);
    uint32_t a = u & 0x7FFFFFFFu;
    uint32_t emax_field = (1u << ebits) - 1u;
    uint32_t inf = emax_field << mbits;
    uint32_t maxfin = inf - 1u;
    if (a > 0x7F800000u) {
        if (!(a & 0x400000u)) *flags |= MOE_FLAG_INVALID;
        return sign | inf | (1u << (mbits - 1));
    }
    if (a == 0x7F800000u) {
        if (p.sat == MOE_SAT) {
            *flags |= MOE_FLAG_OVERFLOW;
            return sign | maxfin;
        }
        return sign | inf;
    }
    if (a == 0) return sign;
    moe_s_fields f = moe_s_round_fields(a, mbits, (1 << (ebits - 1)) - 1, p.rnd, flags);
    if (f.exp >= emax_field) {
        *flags |= MOE_FLAG_OVERFLOW | MOE_FLAG_INEXACT;
        return sign | ((p.sat == MOE_SAT || p.rnd == MOE_RND_RZ) ? maxfin : inf);
    }
    return sign | (f.exp << mbits) | f.frac;
}

/* Exact decode of a finite (sign, exponent field, fraction field) triple.
 * Formats with f32's bias (bf16) map field for field, subnormals included;
 * the narrower formats' subnormals are all f32 normals and are normalised. */
MOE_HD MOE_INLINE float moe_s_decode_finite(uint32_t sign, uint32_t e, uint32_t m, int mbits,
                                            int bias)
{
    uint32_t out;
    if (bias == 127) {
        out = (e << 23) | (m << (23 - mbits));
    } else if (e == 0) {
        if (m == 0) {
            out = 0;
        } else {
            int sh = mbits - moe_s_msb32(m);
            int ue = 1 - bias - sh;
            out = ((uint32_t)(ue + 127) << 23) |
                  (((m << sh) & ((1u << mbits) - 1u)) << (23 - mbits));
        }
    } else {
        out = ((uint32_t)((int)e - bias + 127) << 23) | (m << (23 - mbits));
    }
    return moe_u32_as_f32(out | (sign << 31));
}

/* Decode for the IEEE-like formats: exact, NaN payloads kept. */
MOE_HD MOE_INLINE float moe_s_decode_ieee(uint32_t c, int ebits, int mbits)
{
    uint32_t sign = (c >> (ebits + mbits)) & 1u;
    uint32_t e = (c >> mbits) & ((1u << ebits) - 1u);
    uint32_t m = c & ((1u << mbits) - 1u);
    if (e == (1u << ebits) - 1u)
        return moe_u32_as_f32((sign << 31) | 0x7F800000u | (m << (23 - mbits)));
    return moe_s_decode_finite(sign, e, m, mbits, (1 << (ebits - 1)) - 1);
}

#endif
