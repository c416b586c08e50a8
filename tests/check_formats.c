/* Number formats against the independent brute-force oracle
 * (tests/oracle/), plus the classic boundary values written out by hand
 * from the specifications, the generic API's error paths and packing. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "moe/format.h"
#include "moe/rng.h"
#include "oracle.h"
#include "test_util.h"

/* Compares the library with the oracle on one input; returns 0 on a match
 * and prints a TestFloat-style line ("input => got expected: want") on a
 * mismatch. */
static int compare_one(const tu_target *t, const oracle_fmt *o, float x, int pi)
{
    moe_policy p = tu_policy(pi);
    unsigned fl = 0, ofl = 0;
    uint32_t code = 0;
    /* plain comparisons in the hot loop: each ck_assert is a syscall */
    if (moe_encode(t->dtype, x, p, &code, &fl) != MOE_OK) return 1;
    uint32_t want = oracle_encode(o, x, p.rnd == MOE_RND_RZ, p.sat == MOE_NONSAT, &ofl);
    if (code == want && fl == ofl) return 0;
    static int printed;
    if (printed++ >= 20) return 1;
    char a[6], b[6];
    moe_flags_str(fl, a);
    moe_flags_str(ofl, b);
    fprintf(stderr, "%s %s%s: f32 %08X => %X %s  expected: %X %s\n", t->name,
            p.sat == MOE_SAT ? "sat" : "nonsat", p.rnd == MOE_RND_RZ ? "_rz" : "_rne", tu_bits(x),
            code, a, want, b);
    return 1;
}

static int policies_of(const tu_target *t) { return t->nonsat_ok ? 4 : 2; }

/* ---- decode: every code of every format equals the oracle's value ---- */
START_TEST(decode_every_code)
{
    const tu_target *t = &tu_targets[_i];
    const oracle_fmt *o = oracle_get(t->name);
    ck_assert_ptr_nonnull(o);
    uint32_t n = 1u << oracle_bits(o);
    for (uint32_t c = 0; c < n; c++) {
        oracle_kind k;
        double want = oracle_decode(o, c, &k);
        float got;
        ck_assert_int_eq(moe_decode(t->dtype, c, &got), MOE_OK);
        if (k == OK_NAN) {
            ck_assert_msg(isnan(got), "%s 0x%X: expected NaN", t->name, c);
        } else {
            ck_assert_msg(tu_bits(got) == tu_bits((float)want), "%s 0x%X: got %a expected %a",
                          t->name, c, (double)got, want);
        }
    }
}
END_TEST

/* ---- round trip: decode -> encode gives the code back ---- */
START_TEST(roundtrip_every_code)
{
    const tu_target *t = &tu_targets[_i];
    uint32_t n = 1u << moe_dtype_get(t->dtype)->bits;
    for (int pi = 0; pi < policies_of(t); pi++) {
        moe_policy p = tu_policy(pi);
        for (uint32_t c = 0; c < n; c++) {
            float v;
            moe_class cls;
            uint32_t back;
            unsigned fl = 0;
            moe_decode(t->dtype, c, &v);
            moe_code_class(t->dtype, c, &cls);
            ck_assert_int_eq(moe_encode(t->dtype, v, p, &back, &fl), MOE_OK);
            if (cls == MOE_CLASS_NAN) {
                moe_class bc;
                moe_code_class(t->dtype, back, &bc);
                ck_assert_msg(bc == MOE_CLASS_NAN, "%s 0x%X: NaN class lost (0x%X)", t->name, c, back);
            } else if (cls == MOE_CLASS_INF && p.sat == MOE_SAT) {
                continue; /* SAT maps Inf to max by definition */
            } else {
                ck_assert_msg(back == c && (fl & ~MOE_FLAG_INVALID) == 0,
                              "%s policy %d 0x%X -> %a -> 0x%X flags %u", t->name, pi, c, (double)v,
                              back, fl);
            }
        }
    }
}
END_TEST

/* ---- every f16 and every bf16 value as input, every target and policy ---- */
START_TEST(oracle_all_16bit_inputs)
{
    const tu_target *t = &tu_targets[_i];
    const oracle_fmt *o = oracle_get(t->name);
    long bad = 0, n = 0;
    for (int src = 0; src < 2; src++) {
        for (uint32_t c = 0; c < 65536; c++) {
            float x = src ? moe_bf16_to_f32((uint16_t)c) : moe_f16_to_f32((uint16_t)c);
            for (int pi = 0; pi < policies_of(t); pi++) {
                bad += compare_one(t, o, x, pi);
                n++;
            }
        }
    }
    ck_assert_msg(bad == 0, "%s: %ld of %ld conversions differ from the oracle", t->name, bad, n);
}
END_TEST

/* ---- TestFloat-style patterns, midpoints and seeded random f32 ---- */

static uint32_t *pattern_inputs(size_t *count)
{
    /* significand patterns (23 bits): 0, 1, max, max-1, single bits, runs
     * of leading and trailing ones, all-ones with one zero (TestFloat's
     * f32P1/f32P2 tables) */
    uint32_t sig[128];
    int ns = 0;
    sig[ns++] = 0;
    sig[ns++] = 1;
    sig[ns++] = 0x7FFFFF;
    sig[ns++] = 0x7FFFFE;
    for (int b = 0; b < 23; b++) {
        sig[ns++] = 1u << b;
        sig[ns++] = (0x7FFFFFu << b) & 0x7FFFFFu;        /* leading ones */
        sig[ns++] = (1u << (b + 1)) - 1u;                 /* trailing ones */
        sig[ns++] = 0x7FFFFFu & ~(1u << b);               /* one zero */
    }
    size_t cap = 256 * (size_t)ns * 2 + 2200000, n = 0;
    uint32_t *v = malloc(cap * sizeof *v);
    for (uint32_t e = 0; e < 256; e++)
        for (int s = 0; s < ns; s++)
            for (uint32_t sg = 0; sg < 2; sg++) v[n++] = (sg << 31) | (e << 23) | sig[s];
    /* every midpoint between neighbouring codes of every target, and its
     * f32 neighbours: the ties and the first values past them */
    for (int ti = 0; ti < TU_NTARGETS; ti++) {
        const oracle_fmt *o = oracle_get(tu_targets[ti].name);
        uint32_t nc = 1u << oracle_bits(o);
        if (nc > 256) continue; /* 16-bit formats: every input is above */
        double prev = NAN;
        for (uint32_t c = 0; c < nc; c++) {
            oracle_kind k;
            double d = oracle_decode(o, c, &k);
            if (k != OK_FINITE) continue;
            if (!isnan(prev)) {
                float m = (float)((prev + d) / 2);
                v[n++] = tu_bits(m);
                v[n++] = tu_bits(m) + 1;
                v[n++] = tu_bits(m) - 1;
            }
            prev = d;
        }
    }
    /* seeded random: half uniform bit patterns, half with exponents near the
     * narrow formats' range [2^-30, 2^20) */
    uint64_t stream = moe_rng_stream_id("check_formats.random");
    for (uint64_t i = 0; n < cap; i++) {
        uint32_t r = moe_rng_u32(1, stream, i);
        if (i & 1) r = (r & 0x807FFFFFu) | ((97u + (r >> 23) % 50u) << 23);
        v[n++] = r;
    }
    *count = n;
    return v;
}

START_TEST(oracle_patterns_and_random)
{
    const tu_target *t = &tu_targets[_i];
    const oracle_fmt *o = oracle_get(t->name);
    size_t n;
    uint32_t *in = pattern_inputs(&n);
    ck_assert_uint_ge(n, 1000000);
    long bad = 0;
    for (int pi = 0; pi < policies_of(t); pi++)
        for (size_t k = 0; k < n && bad < 20; k++) bad += compare_one(t, o, tu_float(in[k]), pi);
    free(in);
    ck_assert_msg(bad == 0, "%s: %ld mismatches against the oracle", t->name, bad);
}
END_TEST

/* ---- boundary values from the specifications, written out by hand ---- */
typedef struct {
    moe_dtype d;
    uint32_t xbits;
    moe_policy p;
    uint32_t code;
    unsigned flags;
} spec_case;

#define F(x) (tu_bits((float)(x)))
#define SR MOE_POLICY_SAT_RNE
#define NR MOE_POLICY_NONSAT_RNE
#define SZ MOE_POLICY_SAT_RZ
#define NZ MOE_POLICY_NONSAT_RZ
enum { X = 1, U = 2, O = 4, V = 16 };

START_TEST(spec_boundaries)
{
    const uint32_t INF = 0x7F800000u, QNAN = 0x7FC00000u, SNAN = 0x7FA00000u, NEG = 0x80000000u;
    const spec_case cases[] = {
        /* E4M3: max 448, 464 ties to 448, 465 overflows (ONNX float8.md) */
        {MOE_E4M3, F(448), NR, 0x7E, 0},
        {MOE_E4M3, F(464), NR, 0x7E, X},
        {MOE_E4M3, F(464.00003), NR, 0x7F, O | X},
        {MOE_E4M3, F(465), NR, 0x7F, O | X},
        {MOE_E4M3, F(465), SR, 0x7E, O | X},
        {MOE_E4M3, F(-465), NR, 0xFF, O | X},
        {MOE_E4M3, F(-1000), SR, 0xFE, O | X},
        {MOE_E4M3, F(500), NZ, 0x7E, O | X},
        {MOE_E4M3, F(470), NZ, 0x7E, X},
        {MOE_E4M3, INF, SR, 0x7E, O},
        {MOE_E4M3, INF, NR, 0x7F, V},
        {MOE_E4M3, INF | NEG, SR, 0xFE, O},
        {MOE_E4M3, QNAN, SR, 0x7F, 0},
        {MOE_E4M3, SNAN, SR, 0x7F, V},
        {MOE_E4M3, NEG, SR, 0x80, 0},
        {MOE_E4M3, F(0x1p-9), SR, 0x01, 0},       /* min subnormal */
        {MOE_E4M3, F(0x1p-10), SR, 0x00, U | X},  /* tie with 0: even */
        {MOE_E4M3, F(0x1.8p-9), SR, 0x02, U | X}, /* tie 1<->2: even */
        {MOE_E4M3, F(0x1p-6), SR, 0x08, 0},       /* min normal */
        {MOE_E4M3, F(0x1.fp-7), SR, 0x08, U | X}, /* rounds up into normal */
        {MOE_E4M3, F(1.0625), SR, 0x38, X},       /* tie 1 <-> 1.125: even */
        {MOE_E4M3, F(1.1875), SR, 0x3A, X},       /* tie 1.125 <-> 1.25: even */
        {MOE_E4M3, F(1.1875), SZ, 0x39, X},
        /* E5M2: max 57344, 61440 ties to Inf (even), IEEE overflow */
        {MOE_E5M2, F(57344), NR, 0x7B, 0},
        {MOE_E5M2, F(61439), NR, 0x7B, X},
        {MOE_E5M2, F(61440), NR, 0x7C, O | X},
        {MOE_E5M2, F(61440), SR, 0x7B, O | X},
        {MOE_E5M2, F(1e6), NZ, 0x7B, O | X},
        {MOE_E5M2, INF, NR, 0x7C, 0},
        {MOE_E5M2, INF | NEG, SR, 0xFB, O},
        {MOE_E5M2, QNAN | NEG, NR, 0xFE, 0},
        {MOE_E5M2, F(0x1p-16), NR, 0x01, 0},
        {MOE_E5M2, F(0x1p-17), NR, 0x00, U | X},
        /* E2M1: {0, .5, 1, 1.5, 2, 3, 4, 6}; saturates; NaN -> +6 (ONNX) */
        {MOE_E2M1, F(6), SR, 0x7, 0},
        {MOE_E2M1, F(7), SR, 0x7, O | X},
        {MOE_E2M1, F(-7), SR, 0xF, O | X},
        {MOE_E2M1, F(5), SR, 0x6, X},   /* tie 4 <-> 6: even code 0x6 (4) */
        {MOE_E2M1, F(2.5), SR, 0x4, X}, /* tie 2 <-> 3: even code 0x4 (2) */
        {MOE_E2M1, F(0.25), SR, 0x0, U | X},
        {MOE_E2M1, F(0.75), SR, 0x2, U | X}, /* tie .5 <-> 1: even code 0x2 */
        {MOE_E2M1, INF | NEG, SR, 0xF, O},
        {MOE_E2M1, QNAN | NEG, SR, 0x7, V},
        {MOE_E2M1, NEG, SR, 0x8, 0},
        /* E8M0: powers of two 2^-127..2^127, 0xFF NaN, no zero, no sign */
        {MOE_E8M0, F(1), SR, 0x7F, 0},
        {MOE_E8M0, F(1.5), SR, 0x80, X},   /* tie 0x7F <-> 0x80: even code */
        {MOE_E8M0, F(3), SR, 0x80, X},     /* tie 0x80 <-> 0x81: even code */
        {MOE_E8M0, F(1.75), SZ, 0x7F, X},
        {MOE_E8M0, F(0x1p127), SR, 0xFE, 0},
        {MOE_E8M0, F(0x1.8p127), NR, 0xFE, X}, /* tie 0xFE <-> (0xFF): even */
        {MOE_E8M0, F(0x1.9p127), NR, 0xFF, O | X},
        {MOE_E8M0, F(0x1.9p127), SR, 0xFE, O | X},
        {MOE_E8M0, 0x00400000u, SR, 0x00, 0}, /* 2^-127, an f32 subnormal */
        {MOE_E8M0, 0, SR, 0x00, U | X},
        {MOE_E8M0, F(-1), SR, 0xFF, V},
        {MOE_E8M0, INF, SR, 0xFE, O},
        {MOE_E8M0, INF, NR, 0xFF, V},
        /* f16 and bf16: IEEE RNE */
        {MOE_F16, F(65504), NR, 0x7BFF, 0},
        {MOE_F16, F(65519), NR, 0x7BFF, X},
        {MOE_F16, F(65520), NR, 0x7C00, O | X},
        {MOE_F16, F(0x1p-24), NR, 0x0001, 0},
        {MOE_F16, F(0x1p-25), NR, 0x0000, U | X},
        {MOE_F16, F(0x1.8p-24), NR, 0x0002, U | X},
        {MOE_F16, SNAN, NR, 0x7E00, V},
        {MOE_BF16, F(1.00390625), NR, 0x3F80, X}, /* tie 1 <-> 1+2^-7: even */
        {MOE_BF16, 0x3F818000u, NR, 0x3F82, X},   /* tie upward to even */
        {MOE_BF16, 0x7F7FFFFFu, NR, 0x7F80, O | X},
        {MOE_BF16, 0x7F7FFFFFu, NZ, 0x7F7F, X}, /* RZ: max itself, no overflow */
        {MOE_BF16, 0x00000001u, NR, 0x0000, U | X},
        {MOE_BF16, 0x00010000u, NR, 0x0001, 0},
        /* integers: RNE then clamp */
        {MOE_I8, F(2.5), SR, 0x02, X},
        {MOE_I8, F(3.5), SR, 0x04, X},
        {MOE_I8, F(-2.5), SR, 0xFE, X},
        {MOE_I8, F(127.5), SR, 0x7F, O | X},
        {MOE_I8, F(-128.5), SR, 0x80, X},
        {MOE_I8, F(-129), SR, 0x80, O | X},
        {MOE_I8, F(-128.7), SZ, 0x80, X},
        {MOE_I8, QNAN, SR, 0x00, V},
        {MOE_I8, INF | NEG, SR, 0x80, O},
        {MOE_I4, F(7.4), SR, 0x7, X},
        {MOE_I4, F(-8.5), SR, 0x8, X},
        {MOE_I4, F(7.5), SR, 0x7, O | X},
        {MOE_U8, F(-0.4), SR, 0x00, X},
        {MOE_U8, F(-0.6), SR, 0x00, O | X},
        {MOE_U8, F(255.5), SR, 0xFF, O | X},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const spec_case *c = &cases[i];
        uint32_t code;
        unsigned fl = 0;
        ck_assert_int_eq(moe_encode(c->d, tu_float(c->xbits), c->p, &code, &fl), MOE_OK);
        ck_assert_msg(code == c->code && fl == c->flags,
                      "case %zu (%s, f32 %08X): got 0x%X flags %u, spec says 0x%X flags %u", i,
                      moe_dtype_get(c->d)->name, c->xbits, code, fl, c->code, c->flags);
    }
}
END_TEST

/* ---- text forms ---- */
START_TEST(hex_fields_and_flags)
{
    char b[32];
    ck_assert_int_eq(moe_code_hex(MOE_E4M3, 0x7E, b, sizeof b), MOE_OK);
    ck_assert_str_eq(b, "+F.6");
    moe_code_hex(MOE_F16, 0x7BFF, b, sizeof b);
    ck_assert_str_eq(b, "+1E.3FF");
    moe_code_hex(MOE_E5M2, 0xFC, b, sizeof b);
    ck_assert_str_eq(b, "-1F.0");
    moe_code_hex(MOE_E2M1, 0xF, b, sizeof b);
    ck_assert_str_eq(b, "-3.1");
    moe_code_hex(MOE_E8M0, 0x7F, b, sizeof b);
    ck_assert_str_eq(b, "7F");
    moe_code_hex(MOE_BF16, 0xFF80, b, sizeof b);
    ck_assert_str_eq(b, "-FF.00");
    moe_code_hex(MOE_I4, 0x8, b, sizeof b);
    ck_assert_str_eq(b, "0x8");
    ck_assert_int_eq(moe_code_hex(MOE_E4M3, 0x7E, b, 3), MOE_ERR_INVALID_ARG);
    moe_flags_str(MOE_FLAG_INVALID | MOE_FLAG_INEXACT, b);
    ck_assert_str_eq(b, "v...x");
    moe_flags_str(MOE_FLAG_OVERFLOW | MOE_FLAG_UNDERFLOW, b);
    ck_assert_str_eq(b, "..ou.");
    moe_class c;
    moe_code_class(MOE_E4M3, 0x01, &c);
    ck_assert_int_eq(c, MOE_CLASS_SUBNORMAL);
    moe_code_class(MOE_E4M3, 0x80, &c);
    ck_assert_int_eq(c, MOE_CLASS_ZERO);
    moe_code_class(MOE_E5M2, 0x7C, &c);
    ck_assert_int_eq(c, MOE_CLASS_INF);
    moe_code_class(MOE_E8M0, 0x00, &c);
    ck_assert_int_eq(c, MOE_CLASS_NORMAL);
    moe_code_class(MOE_I8, 0x80, &c);
    ck_assert_str_eq(moe_class_str(c), "integer");
}
END_TEST

/* ---- error paths of the generic API ---- */
START_TEST(api_errors)
{
    uint32_t code;
    float v;
    moe_class c;
    char b[16];
    ck_assert_int_eq(moe_encode(MOE_E4M3, 1.0f, MOE_POLICY_SAT_RNE, NULL, NULL), MOE_ERR_NULL);
    ck_assert_int_eq(moe_encode(MOE_F32, 1.0f, MOE_POLICY_SAT_RNE, &code, NULL), MOE_ERR_DTYPE);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "not a conversion target"));
    ck_assert_int_eq(moe_encode((moe_dtype)99, 1.0f, MOE_POLICY_SAT_RNE, &code, NULL), MOE_ERR_DTYPE);
    ck_assert_int_eq(moe_encode(MOE_E2M1, 1.0f, MOE_POLICY_NONSAT_RNE, &code, NULL), MOE_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "e2m1"));
    ck_assert_int_eq(moe_policy_check(MOE_I8, MOE_POLICY_NONSAT_RNE), MOE_ERR_UNSUPPORTED);
    moe_policy bad = {(moe_rounding)7, MOE_SAT};
    ck_assert_int_eq(moe_policy_check(MOE_E4M3, bad), MOE_ERR_INVALID_ARG);
    moe_policy bad2 = {MOE_RND_RNE, (moe_saturation)7};
    ck_assert_int_eq(moe_policy_check(MOE_E4M3, bad2), MOE_ERR_INVALID_ARG);
    ck_assert_int_eq(moe_decode(MOE_E4M3, 0x100, &v), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "wider"));
    ck_assert_int_eq(moe_decode(MOE_E2M1, 0x10, &v), MOE_ERR_INVALID_ARG);
    ck_assert_int_eq(moe_decode(MOE_E4M3, 0x10, NULL), MOE_ERR_NULL);
    ck_assert_int_eq(moe_decode(MOE_I32, 0, &v), MOE_ERR_DTYPE);
    ck_assert_int_eq(moe_code_class(MOE_E4M3, 0x1FF, &c), MOE_ERR_INVALID_ARG);
    ck_assert_int_eq(moe_code_class(MOE_E4M3, 0, NULL), MOE_ERR_NULL);
    ck_assert_int_eq(moe_code_hex(MOE_E4M3, 0, NULL, 4), MOE_ERR_NULL);
    ck_assert_int_eq(moe_code_hex(MOE_BOOL, 0, b, sizeof b), MOE_ERR_DTYPE);
    float src[2] = {1, 2};
    uint8_t dst[2];
    ck_assert_int_eq(moe_encode_array(MOE_E4M3, NULL, 2, MOE_POLICY_SAT_RNE, dst, NULL), MOE_ERR_NULL);
    ck_assert_int_eq(moe_encode_array(MOE_E4M3, src, 2, MOE_POLICY_SAT_RNE, NULL, NULL), MOE_ERR_NULL);
    ck_assert_int_eq(moe_encode_array(MOE_E2M1, src, 2, MOE_POLICY_NONSAT_RNE, dst, NULL), MOE_ERR_UNSUPPORTED);
    ck_assert_int_eq(moe_decode_array(MOE_F32, dst, 2, src), MOE_ERR_DTYPE);
    ck_assert_int_eq(moe_encode_array(MOE_E4M3, NULL, 0, MOE_POLICY_SAT_RNE, NULL, NULL), MOE_OK);
}
END_TEST

/* ---- arrays: packing order and flags ---- */
START_TEST(array_packing)
{
    const float in[5] = {1.0f, -6.0f, 0.5f, 3.0f, 7.0f};
    uint8_t p[3] = {0xAA, 0xAA, 0xAA};
    unsigned fl = 0;
    ck_assert_int_eq(moe_encode_array(MOE_E2M1, in, 5, MOE_POLICY_SAT_RNE, p, &fl), MOE_OK);
    /* first element in the low nibble; the odd tail pads the high nibble with 0 */
    ck_assert_uint_eq(p[0], 0xF2); /* 1.0 = 0x2, -6 = 0xF */
    ck_assert_uint_eq(p[1], 0x51); /* 0.5 = 0x1, 3 = 0x5 */
    ck_assert_uint_eq(p[2], 0x07); /* 7 saturates to 6 = 0x7 */
    ck_assert_uint_eq(fl, MOE_FLAG_OVERFLOW | MOE_FLAG_INEXACT);
    float out[5];
    ck_assert_int_eq(moe_decode_array(MOE_E2M1, p, 5, out), MOE_OK);
    ck_assert(out[0] == 1.0f && out[1] == -6.0f && out[2] == 0.5f && out[3] == 3.0f && out[4] == 6.0f);
    const float ii[3] = {-8.0f, 7.0f, -1.0f};
    ck_assert_int_eq(moe_encode_array(MOE_I4, ii, 3, MOE_POLICY_SAT_RNE, p, NULL), MOE_OK);
    ck_assert_uint_eq(p[0], 0x78);
    ck_assert_uint_eq(p[1], 0x0F);
    ck_assert_int_eq(moe_decode_array(MOE_I4, p, 3, out), MOE_OK);
    ck_assert(out[0] == -8.0f && out[1] == 7.0f && out[2] == -1.0f);
    const float h[2] = {1.0f, 65520.0f};
    uint16_t hb[2];
    fl = 0;
    ck_assert_int_eq(moe_encode_array(MOE_F16, h, 2, MOE_POLICY_IEEE_RNE, hb, &fl), MOE_OK);
    ck_assert_uint_eq(hb[0], 0x3C00);
    ck_assert_uint_eq(hb[1], 0x7C00);
    ck_assert_uint_eq(fl, MOE_FLAG_OVERFLOW | MOE_FLAG_INEXACT);
}
END_TEST

/* The per-format entry points accept flags == NULL and accumulate flags. */
START_TEST(flags_sticky_and_optional)
{
    unsigned fl = MOE_FLAG_INVALID;
    (void)moe_f32_to_e4m3(1000.0f, MOE_POLICY_SAT_RNE, &fl);
    ck_assert_uint_eq(fl, MOE_FLAG_INVALID | MOE_FLAG_OVERFLOW | MOE_FLAG_INEXACT);
    ck_assert_uint_eq(moe_f32_to_e4m3(1000.0f, MOE_POLICY_SAT_RNE, NULL), 0x7E);
    ck_assert_uint_eq(moe_f32_to_bf16(1.0f, MOE_POLICY_IEEE_RNE, NULL), 0x3F80);
    ck_assert_uint_eq(moe_f32_to_e5m2(1.0f, MOE_POLICY_IEEE_RNE, NULL), 0x3C);
    ck_assert_uint_eq(moe_f32_to_e8m0(1.0f, MOE_POLICY_SAT_RNE, NULL), 0x7F);
    ck_assert_int_eq(moe_f32_to_i8(-3.5f, MOE_RND_RNE, NULL), -4);
    ck_assert_int_eq(moe_f32_to_i4(-3.5f, MOE_RND_RZ, NULL), -3);
    ck_assert_uint_eq(moe_f32_to_u8(200.5f, MOE_RND_RNE, NULL), 200);
}
END_TEST

static Suite *formats_suite(void)
{
    Suite *s = suite_create("formats");
    TCase *tc = tcase_create("decode");
    tcase_add_loop_test(tc, decode_every_code, 0, TU_NTARGETS);
    tcase_add_loop_test(tc, roundtrip_every_code, 0, TU_NTARGETS);
    suite_add_tcase(s, tc);
    tc = tcase_create("oracle");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, oracle_all_16bit_inputs, 0, TU_NTARGETS);
    tcase_add_loop_test(tc, oracle_patterns_and_random, 0, TU_NTARGETS);
    suite_add_tcase(s, tc);
    tc = tcase_create("spec");
    tcase_add_test(tc, spec_boundaries);
    tcase_add_test(tc, hex_fields_and_flags);
    tcase_add_test(tc, api_errors);
    tcase_add_test(tc, array_packing);
    tcase_add_test(tc, flags_sticky_and_optional);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(formats_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
