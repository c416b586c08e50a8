/* Generic, table-driven entry points over the per-format converters: one
 * row per dtype says how to encode, decode and which policies exist. */
#include <stdio.h>
#include "moe/format.h"
#include "round_pack.h"

typedef uint32_t (*enc_fn)(float, moe_policy, unsigned *);
typedef float (*dec_fn)(uint32_t);

static uint32_t enc_f16(float x, moe_policy p, unsigned *f) { return moe_f32_to_f16(x, p, f); }
static uint32_t enc_bf16(float x, moe_policy p, unsigned *f) { return moe_f32_to_bf16(x, p, f); }
static uint32_t enc_e4m3(float x, moe_policy p, unsigned *f) { return moe_f32_to_e4m3(x, p, f); }
static uint32_t enc_e5m2(float x, moe_policy p, unsigned *f) { return moe_f32_to_e5m2(x, p, f); }
static uint32_t enc_e2m1(float x, moe_policy p, unsigned *f) { return moe_f32_to_e2m1(x, p, f); }
static uint32_t enc_e8m0(float x, moe_policy p, unsigned *f) { return moe_f32_to_e8m0(x, p, f); }
static uint32_t enc_i8(float x, moe_policy p, unsigned *f)
{
    return (uint8_t)moe_f32_to_i8(x, p.rnd, f);
}
static uint32_t enc_i4(float x, moe_policy p, unsigned *f)
{
    return (uint8_t)moe_f32_to_i4(x, p.rnd, f) & 0xFu;
}
static uint32_t enc_u8(float x, moe_policy p, unsigned *f) { return moe_f32_to_u8(x, p.rnd, f); }

static float dec_f16(uint32_t c) { return moe_f16_to_f32((uint16_t)c); }
static float dec_bf16(uint32_t c) { return moe_bf16_to_f32((uint16_t)c); }
static float dec_e4m3(uint32_t c) { return moe_e4m3_to_f32((uint8_t)c); }
static float dec_e5m2(uint32_t c) { return moe_e5m2_to_f32((uint8_t)c); }
static float dec_e2m1(uint32_t c) { return moe_e2m1_to_f32((uint8_t)c); }
static float dec_e8m0(uint32_t c) { return moe_e8m0_to_f32((uint8_t)c); }
static float dec_i8(uint32_t c) { return (float)(int8_t)(uint8_t)c; }
static float dec_i4(uint32_t c) { return (float)((int32_t)(c & 0xFu) - ((c & 0x8u) ? 16 : 0)); }
static float dec_u8(uint32_t c) { return (float)(uint8_t)c; }

typedef struct {
    enc_fn enc;
    dec_fn dec;
    int nonsat_ok;         /* NONSAT defined for this format */
    const char *why_sat;   /* the rule that refuses NONSAT */
} codec_row;

static const codec_row rows[MOE_DTYPE_COUNT] = {
    [MOE_F16] = {enc_f16, dec_f16, 1, NULL},
    [MOE_BF16] = {enc_bf16, dec_bf16, 1, NULL},
    [MOE_E4M3] = {enc_e4m3, dec_e4m3, 1, NULL},
    [MOE_E5M2] = {enc_e5m2, dec_e5m2, 1, NULL},
    [MOE_E2M1] = {enc_e2m1, dec_e2m1, 0, "e2m1 has no Inf or NaN encoding, so it always saturates"},
    [MOE_E8M0] = {enc_e8m0, dec_e8m0, 1, NULL},
    [MOE_I8] = {enc_i8, dec_i8, 0, "integer quantization always clamps to the type's range"},
    [MOE_I4] = {enc_i4, dec_i4, 0, "integer quantization always clamps to the type's range"},
    [MOE_U8] = {enc_u8, dec_u8, 0, "integer quantization always clamps to the type's range"},
};

static const codec_row *row_for(moe_dtype d)
{
    if ((unsigned)d >= MOE_DTYPE_COUNT || !rows[d].enc) return NULL;
    return &rows[d];
}

static moe_status no_codec(moe_dtype d)
{
    const moe_dtype_info *i = moe_dtype_get(d);
    return moe_fail(MOE_ERR_DTYPE,
                    "dtype %s: not a conversion target (one of f16 bf16 e4m3 e5m2 e2m1 e8m0 "
                    "int8 int4 uint8)",
                    i ? i->name : "(out of range)");
}

moe_status moe_policy_check(moe_dtype d, moe_policy p)
{
    const codec_row *r = row_for(d);
    if (!r) return no_codec(d);
    if (p.rnd != MOE_RND_RNE && p.rnd != MOE_RND_RZ)
        return moe_fail(MOE_ERR_INVALID_ARG, "policy.rnd: must be RNE or RZ");
    if (p.sat != MOE_SAT && p.sat != MOE_NONSAT)
        return moe_fail(MOE_ERR_INVALID_ARG, "policy.sat: must be SAT or NONSAT");
    if (p.sat == MOE_NONSAT && !r->nonsat_ok)
        return moe_fail(MOE_ERR_UNSUPPORTED, "policy nonsat for %s: %s; only sat is defined",
                        moe_dtype_get(d)->name, r->why_sat);
    return MOE_OK;
}

moe_status moe_encode(moe_dtype d, float x, moe_policy p, uint32_t *code, unsigned *flags)
{
    if (!code) return moe_fail(MOE_ERR_NULL, "code: must not be NULL");
    moe_status s = moe_policy_check(d, p);
    if (s != MOE_OK) return s;
    unsigned f = 0;
    *code = row_for(d)->enc(x, p, &f);
    if (flags) *flags |= f;
    return MOE_OK;
}

static moe_status check_code(moe_dtype d, uint32_t code)
{
    const moe_dtype_info *i = moe_dtype_get(d);
    if (i->bits < 32 && (code >> i->bits) != 0)
        return moe_fail(MOE_ERR_INVALID_ARG, "code 0x%x: wider than %s's %d bits", code, i->name,
                        i->bits);
    return MOE_OK;
}

moe_status moe_decode(moe_dtype d, uint32_t code, float *out)
{
    if (!out) return moe_fail(MOE_ERR_NULL, "out: must not be NULL");
    const codec_row *r = row_for(d);
    if (!r) return no_codec(d);
    moe_status s = check_code(d, code);
    if (s != MOE_OK) return s;
    *out = r->dec(code);
    return MOE_OK;
}

moe_status moe_code_class(moe_dtype d, uint32_t code, moe_class *out)
{
    if (!out) return moe_fail(MOE_ERR_NULL, "out: must not be NULL");
    const codec_row *r = row_for(d);
    if (!r) return no_codec(d);
    moe_status s = check_code(d, code);
    if (s != MOE_OK) return s;
    const moe_dtype_info *i = moe_dtype_get(d);
    if (!i->is_float) {
        *out = MOE_CLASS_INTEGER;
        return MOE_OK;
    }
    uint32_t u = moe_f32_as_u32(r->dec(code));
    uint32_t a = u & 0x7FFFFFFFu;
    uint32_t e = (code >> i->mbits) & ((1u << i->ebits) - 1u);
    uint32_t m = code & ((1u << i->mbits) - 1u);
    if (a > 0x7F800000u) *out = MOE_CLASS_NAN;
    else if (a == 0x7F800000u) *out = MOE_CLASS_INF;
    else if (a == 0) *out = MOE_CLASS_ZERO;
    else if (e == 0 && m != 0 && d != MOE_E8M0) *out = MOE_CLASS_SUBNORMAL;
    else *out = MOE_CLASS_NORMAL;
    return MOE_OK;
}

const char *moe_class_str(moe_class c)
{
    static const char *const n[] = {"zero", "subnormal", "normal", "inf", "nan", "integer"};
    if ((unsigned)c > MOE_CLASS_INTEGER) return "unknown";
    return n[c];
}

moe_status moe_code_hex(moe_dtype d, uint32_t code, char *buf, size_t n)
{
    if (!buf) return moe_fail(MOE_ERR_NULL, "buf: must not be NULL");
    const codec_row *r = row_for(d);
    if (!r) return no_codec(d);
    moe_status s = check_code(d, code);
    if (s != MOE_OK) return s;
    const moe_dtype_info *i = moe_dtype_get(d);
    int w;
    if (!i->is_float) {
        w = snprintf(buf, n, "0x%0*X", (i->bits + 3) / 4, code);
    } else {
        uint32_t e = (code >> i->mbits) & ((1u << i->ebits) - 1u);
        uint32_t m = code & ((1u << i->mbits) - 1u);
        if (!i->is_signed)
            w = snprintf(buf, n, "%0*X", (i->ebits + 3) / 4, e);
        else if (i->mbits == 0)
            w = snprintf(buf, n, "%c%X", (code >> (i->bits - 1)) ? '-' : '+', e);
        else
            w = snprintf(buf, n, "%c%X.%0*X", (code >> (i->bits - 1)) ? '-' : '+', e,
                         (i->mbits + 3) / 4, m);
    }
    if (w < 0 || (size_t)w >= n) return moe_fail(MOE_ERR_INVALID_ARG, "n: buffer too small");
    return MOE_OK;
}

void moe_flags_str(unsigned flags, char buf[6])
{
    buf[0] = (flags & MOE_FLAG_INVALID) ? 'v' : '.';
    buf[1] = (flags & MOE_FLAG_INFINITE) ? 'i' : '.';
    buf[2] = (flags & MOE_FLAG_OVERFLOW) ? 'o' : '.';
    buf[3] = (flags & MOE_FLAG_UNDERFLOW) ? 'u' : '.';
    buf[4] = (flags & MOE_FLAG_INEXACT) ? 'x' : '.';
    buf[5] = '\0';
}

moe_status moe_encode_array(moe_dtype d, const float *src, size_t n, moe_policy p, void *dst,
                            unsigned *flags)
{
    if (n && !src) return moe_fail(MOE_ERR_NULL, "src: must not be NULL");
    if (n && !dst) return moe_fail(MOE_ERR_NULL, "dst: must not be NULL");
    moe_status s = moe_policy_check(d, p);
    if (s != MOE_OK) return s;
    const codec_row *r = row_for(d);
    unsigned f = 0;
    if (moe_dtype_is_packed(d)) {
        uint8_t *o = dst;
        for (size_t k = 0; k < n; k += 2) {
            uint32_t lo = r->enc(src[k], p, &f);
            uint32_t hi = k + 1 < n ? r->enc(src[k + 1], p, &f) : 0u;
            o[k / 2] = (uint8_t)(lo | (hi << 4));
        }
    } else if (moe_dtype_get(d)->bits == 16) {
        uint16_t *o = dst;
        for (size_t k = 0; k < n; k++) o[k] = (uint16_t)r->enc(src[k], p, &f);
    } else {
        uint8_t *o = dst;
        for (size_t k = 0; k < n; k++) o[k] = (uint8_t)r->enc(src[k], p, &f);
    }
    if (flags) *flags |= f;
    return MOE_OK;
}

moe_status moe_decode_array(moe_dtype d, const void *src, size_t n, float *dst)
{
    if (n && !src) return moe_fail(MOE_ERR_NULL, "src: must not be NULL");
    if (n && !dst) return moe_fail(MOE_ERR_NULL, "dst: must not be NULL");
    const codec_row *r = row_for(d);
    if (!r) return no_codec(d);
    if (moe_dtype_is_packed(d)) {
        const uint8_t *in = src;
        for (size_t k = 0; k < n; k++) dst[k] = r->dec((in[k / 2] >> ((k & 1) * 4)) & 0xFu);
    } else if (moe_dtype_get(d)->bits == 16) {
        const uint16_t *in = src;
        for (size_t k = 0; k < n; k++) dst[k] = r->dec(in[k]);
    } else {
        const uint8_t *in = src;
        for (size_t k = 0; k < n; k++) dst[k] = r->dec(in[k]);
    }
    return MOE_OK;
}
