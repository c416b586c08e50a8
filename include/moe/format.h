/* Number-format conversions under named policies.
 *
 * Every conversion from f32 is a (format, rounding, saturation) triple with
 * fixed special-value rules; the policy names below are the vocabulary the
 * whole suite (tolerance table, case.json, reports) uses. Exception flags
 * follow TestFloat's five ("vioux"): they are ORed into *flags (sticky)
 * when flags is not NULL.
 *
 * Rules every format shares:
 *   - RNE: nearest representable value, ties to the even code (code LSB 0).
 *     The comparison includes one virtual code just past max finite, so the
 *     overflow threshold is IEEE's (f16: 65520 overflows, E4M3: 464 -> 448,
 *     465 overflows).
 *   - RZ: largest magnitude not above |x|. As in IEEE 754 section 7.4, RZ
 *     never turns a finite input into Inf or NaN: overflow gives max finite.
 *   - underflow is raised when the result is inexact and |x| is below the
 *     format's smallest normal (tininess detected before rounding).
 *   - overflow ("saturated") is raised when a finite input rounds past max
 *     finite, and when SAT turns an Inf into max finite.
 *   - invalid is raised for signaling-NaN inputs, and wherever the format
 *     cannot represent the input's class (Inf or NaN into a format without
 *     it, negative into E8M0, NaN into an integer).
 *
 * Per-format special values:
 *   format  Inf in (SAT | NONSAT)        overflow NONSAT      NaN in
 *   f16     +-max,o | +-Inf              +-Inf, ox            qNaN (sign kept)
 *   bf16    +-max,o | +-Inf              +-Inf, ox            qNaN (sign kept)
 *   e5m2    +-max,o | +-Inf              +-Inf, ox            S.11111.10
 *   e4m3    +-max,o | NaN,v              NaN (sign kept), ox  S.1111.111
 *   e8m0    0xFE,o  | 0xFF,v             0xFF, ox             0xFF
 *   e2m1    SAT only: +-6,o; NONSAT is refused by moe_policy_check
 *           (the raw converter treats it as SAT)          NaN -> +6, v (ONNX)
 * E8M0 has no zero and no sign: 0 and values below 2^-127 give 0x00 (x u),
 * negative inputs give 0xFF (v). Integers round to an integer under the
 * rounding mode, then clamp to the type's range (o); NaN gives 0 (v). */
#ifndef MOE_FORMAT_H
#define MOE_FORMAT_H

#include <stdint.h>
#include <stddef.h>
#include "moe/dtype.h"
#include "moe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { MOE_RND_RNE = 0, MOE_RND_RZ = 1 } moe_rounding;
typedef enum { MOE_SAT = 0, MOE_NONSAT = 1 } moe_saturation;

typedef struct {
    moe_rounding rnd;
    moe_saturation sat;
} moe_policy;

enum {
    MOE_FLAG_INEXACT = 1,
    MOE_FLAG_UNDERFLOW = 2,
    MOE_FLAG_OVERFLOW = 4,
    MOE_FLAG_INFINITE = 8, /* kept for TestFloat's layout; no conversion raises it */
    MOE_FLAG_INVALID = 16
};

/* Named policies (DESIGN section 5). */
#define MOE_POLICY_SAT_RNE ((moe_policy){MOE_RND_RNE, MOE_SAT})
#define MOE_POLICY_NONSAT_RNE ((moe_policy){MOE_RND_RNE, MOE_NONSAT})
#define MOE_POLICY_SAT_RZ ((moe_policy){MOE_RND_RZ, MOE_SAT})
#define MOE_POLICY_NONSAT_RZ ((moe_policy){MOE_RND_RZ, MOE_NONSAT})
#define MOE_POLICY_E4M3_SAT_RNE MOE_POLICY_SAT_RNE
#define MOE_POLICY_E4M3_NONSAT_RNE MOE_POLICY_NONSAT_RNE
#define MOE_POLICY_E5M2_NONSAT_RNE MOE_POLICY_NONSAT_RNE
#define MOE_POLICY_E2M1_SAT_RNE MOE_POLICY_SAT_RNE
#define MOE_POLICY_IEEE_RNE MOE_POLICY_NONSAT_RNE /* f16/bf16 default */

/* Per-format conversions. Codes are returned in the low bits. */
uint16_t moe_f32_to_f16(float x, moe_policy p, unsigned *flags);
uint16_t moe_f32_to_bf16(float x, moe_policy p, unsigned *flags);
uint8_t moe_f32_to_e4m3(float x, moe_policy p, unsigned *flags);
uint8_t moe_f32_to_e5m2(float x, moe_policy p, unsigned *flags);
uint8_t moe_f32_to_e2m1(float x, moe_policy p, unsigned *flags); /* 4-bit code */
uint8_t moe_f32_to_e8m0(float x, moe_policy p, unsigned *flags);
int8_t moe_f32_to_i8(float x, moe_rounding r, unsigned *flags);
int8_t moe_f32_to_i4(float x, moe_rounding r, unsigned *flags); /* -8..7 */
uint8_t moe_f32_to_u8(float x, moe_rounding r, unsigned *flags);

float moe_f16_to_f32(uint16_t c);
float moe_bf16_to_f32(uint16_t c);
float moe_e4m3_to_f32(uint8_t c);
float moe_e5m2_to_f32(uint8_t c);
float moe_e2m1_to_f32(uint8_t c); /* low nibble */
float moe_e8m0_to_f32(uint8_t c);

/* MOE_OK when policy p is defined for dtype d; otherwise the message says
 * which rule refused it (e.g. e2m1 has no NONSAT). */
moe_status moe_policy_check(moe_dtype d, moe_policy p);

/* Generic per-code entry points, for tools and tests. Integers are returned
 * as two's-complement codes of their width (int4 -8 -> 0x8). */
moe_status moe_encode(moe_dtype d, float x, moe_policy p, uint32_t *code, unsigned *flags);
moe_status moe_decode(moe_dtype d, uint32_t code, float *out);

typedef enum {
    MOE_CLASS_ZERO = 0,
    MOE_CLASS_SUBNORMAL,
    MOE_CLASS_NORMAL,
    MOE_CLASS_INF,
    MOE_CLASS_NAN,
    MOE_CLASS_INTEGER
} moe_class;

moe_status moe_code_class(moe_dtype d, uint32_t code, moe_class *out);
const char *moe_class_str(moe_class c);

/* TestFloat-style "sign.exp.frac" text: e4m3 0x7e -> "+F.6". */
moe_status moe_code_hex(moe_dtype d, uint32_t code, char *buf, size_t n);

/* Five characters "vioux", '.' where a flag is clear; buf holds 6 bytes. */
void moe_flags_str(unsigned flags, char buf[6]);

/* Array forms: n logical elements; packed dtypes use n/2 rounded up bytes,
 * low nibble first. Float dtypes take p; integer dtypes use p.rnd. */
moe_status moe_encode_array(moe_dtype d, const float *src, size_t n, moe_policy p,
                            void *dst, unsigned *flags);
moe_status moe_decode_array(moe_dtype d, const void *src, size_t n, float *dst);

#ifdef __cplusplus
}
#endif

#endif
