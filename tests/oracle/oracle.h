/* The brute-force conversion oracle, moe-conform's "slowfloat": it shares
 * no code with reference/formats/. Each format is described by its
 * specification (field widths, bias, which codes are special); every
 * finite code is decoded to double with ldexp, and a conversion picks the
 * nearest code by searching that table, ties to the even code, then applies
 * the policy's special-value rules, written out again from the spec. */
#ifndef MOE_TEST_ORACLE_H
#define MOE_TEST_ORACLE_H

#include <stdint.h>

typedef enum { OK_FINITE, OK_INF, OK_NAN } oracle_kind;

typedef struct oracle_fmt oracle_fmt;

/* name: f16 bf16 e4m3 e5m2 e2m1 e8m0 int8 int4 uint8; NULL if unknown. */
const oracle_fmt *oracle_get(const char *name);

int oracle_bits(const oracle_fmt *f);

/* Exact value of a code. */
double oracle_decode(const oracle_fmt *f, uint32_t code, oracle_kind *kind);

/* Expected code and flags (TestFloat bits: x=1 u=2 o=4 v=16) for an f32
 * input under rounding rz (0 = RNE, 1 = RZ) and saturation nonsat. */
uint32_t oracle_encode(const oracle_fmt *f, float x, int rz, int nonsat, unsigned *flags);

/* The two halves of oracle_encode, for sweeps that visit magnitudes in
 * increasing order: oracle_locate gives the index of the largest table
 * value <= mag (-1 if none), trying `hint` first (-2: no hint);
 * oracle_encode_at finishes a conversion from that index. */
int oracle_locate(const oracle_fmt *f, double mag, int hint);
uint32_t oracle_encode_at(const oracle_fmt *f, float x, int j, int rz, int nonsat, unsigned *flags);

#endif
