/* The per-group and per-element arithmetic of the quantize stage, shared by
 * the reference (quant.c, quant_rules.c, quant_layout.c), the CPU backend
 * (through the wrappers of quant_internal.h) and the CUDA conformance build
 * (optimized/cuda/quant.cu), so all three compute the same bits: every
 * function is MOE_HD, IEEE binary32 + - * / in the order written, bit
 * operations, and the format round-and-pack routines; no libm.
 *
 * Where the reference once called libm, the replacement gives the same
 * bits (checked by the moe-digest hash and tests/check_quant.c):
 *   - frexpf exponents become exponent-field arithmetic (exact for every
 *     finite v > 0, subnormals included);
 *   - ldexpf(1, e) becomes moe_ldexpf (correctly rounded, as ldexpf);
 *   - fmaxf / fminf become moe_qc_fmaxf / moe_qc_fminf, which return the
 *     first operand on a tie, what x86-64 glibc's fmaxf / fminf return
 *     (measured); a tie of unequal bits is only +0 against -0 (a floor of
 *     -0.0f), which C leaves open and this fixes;
 *   - isnan / isinf / fabsf become comparisons and bit masks. */
#ifndef MOE_REFERENCE_QUANT_CORE_H
#define MOE_REFERENCE_QUANT_CORE_H

#include <stdint.h>
#include "formats/bf16.h"
#include "formats/e2m1.h"
#include "formats/e4m3.h"
#include "formats/e8m0.h"
#include "formats/f16.h"
#include "formats/int_round.h"
#include "math.h" /* reference/math.h: moe_ldexpf, moe_fabsf */
#include "moe/quant.h"

/* The operand seen as B matrices of R x K (activation: B = 1, R = M;
 * weight: B = E, R = N), each with an SR x SC matrix of scales; scale
 * (sr, sc) covers rows [sr*rh, +rh) and columns [sc*cw, +cw), clipped. */
typedef struct {
    int64_t B, R, K;
    int64_t SR, SC; /* logical scale matrix per b */
    int64_t rh, cw; /* rows and columns one scale covers */
    int64_t per_b;  /* scale storage units per b (elements, or int32 words) */
} moe_q_geom;

/* Statistics of one scale group. */
typedef struct {
    float amax_prop; /* max |x|, NaN if any element is NaN */
    float amax_ign;  /* max |x| over the non-NaN elements, 0 if none */
    float vmax;      /* signed max, NaN if any NaN (torch.max) */
    float vmin;      /* signed min, NaN if any NaN */
} moe_q_stats;

/* One group's result: how its elements are quantized and what is stored. */
typedef struct {
    moe_quant_op op; /* q = cvt(x / f) or cvt(x * f) */
    float f;
    float scale;     /* stored value for f32 scales; dequant multiplier */
    uint8_t code;    /* stored code for E8M0 / E4M3 scales */
} moe_q_group;

/* ---- exact helpers ------------------------------------------------------------ */
MOE_HD MOE_INLINE int moe_qc_isnan(float v) { return v != v; }
MOE_HD MOE_INLINE int moe_qc_isinf(float v) { return (moe_f32_as_u32(v) & 0x7FFFFFFFu) == 0x7F800000u; }

/* C fmaxf / fminf: a NaN operand is ignored; a tie gives the first
 * operand (see the header comment). */
MOE_HD MOE_INLINE float moe_qc_fmaxf(float a, float b)
{
    if (a != a) return b;
    if (b != b) return a;
    return a >= b ? a : b;
}
MOE_HD MOE_INLINE float moe_qc_fminf(float a, float b)
{
    if (a != a) return b;
    if (b != b) return a;
    return a <= b ? a : b;
}

/* A NaN with a fixed sign: the input's when the input x was NaN (quieted,
 * payload kept), else +qNaN. IEEE leaves the sign of a made NaN open, and
 * x86 and CUDA make different ones. */
MOE_HD MOE_INLINE float moe_qc_canon_nan(float v, float x)
{
    if (v == v) return v;
    if (x != x) return moe_u32_as_f32(moe_f32_as_u32(x) | 0x00400000u);
    return moe_u32_as_f32(0x7FC00000u);
}

/* floor(log2 v) for finite v > 0, subnormals included (frexpf's e - 1). */
MOE_HD MOE_INLINE int moe_qc_floor_log2(float v)
{
    uint32_t a = moe_f32_as_u32(v) & 0x7FFFFFFFu;
    uint32_t e = a >> 23;
    if (e) return (int)e - 127;
    return moe_s_msb32(a) - 149; /* subnormal: 2^-149 per unit */
}

/* ceil(log2 v) for finite v > 0: floor, plus one unless v is a power of 2. */
MOE_HD MOE_INLINE int moe_qc_ceil_log2(float v)
{
    uint32_t a = moe_f32_as_u32(v) & 0x7FFFFFFFu;
    int fl = moe_qc_floor_log2(v);
    int pow2 = (a >> 23) ? (a & 0x7FFFFFu) == 0 : (a & (a - 1u)) == 0;
    return pow2 ? fl : fl + 1;
}

/* fmaxf that lets a NaN through (torch.maximum / torch.clamp) */
MOE_HD MOE_INLINE float moe_qc_max_prop(float a, float b)
{
    if (a != a) return a;
    if (b != b) return b;
    return a > b ? a : b;
}

/* 2^ceil(log2 v) for v > 0; Inf and NaN pass through (exp2f(ceilf(log2f))). */
MOE_HD MOE_INLINE float moe_qc_ceil_pow2(float v)
{
    if (moe_qc_isnan(v) || moe_qc_isinf(v)) return v;
    return moe_ldexpf(1.0f, moe_qc_ceil_log2(v));
}

/* 1/v with 1/0 = 0 (vLLM's get_reciprocal; TRT-LLM "SF = 0 gives outscale 0"). */
MOE_HD MOE_INLINE float moe_qc_rcp0(float v) { return v == 0.0f ? 0.0f : 1.0f / v; }

/* ---- scale rules (include/moe/quant.h lists them) ------------------------------ */
MOE_HD MOE_INLINE float moe_qc_amax_of(const moe_quant_spec *s, const moe_q_stats *st)
{
    return s->amax_nan == MOE_AMAX_NAN_IGNORE ? st->amax_ign : st->amax_prop;
}

/* MX shared exponent; returns 0xFF (and sets *e = 0) for the NaN scale. */
MOE_HD MOE_INLINE uint8_t moe_qc_mx_exponent(const moe_quant_spec *s, float a, int *e)
{
    *e = 0;
    if (moe_qc_isnan(a) || moe_qc_isinf(a)) return 0xFF; /* microxcaling: NaN scale */
    int x;
    if (s->rule == MOE_RULE_MX_OCP_FLOOR) {
        /* shared_exp = floor(log2 amax) - emax_elem; amax = 0 -> clamp */
        x = a == 0.0f ? -127 : moe_qc_floor_log2(a) - s->emax_elem;
    } else {
        /* ceil_pow2: t = amax / elem_max (one f32 rounding), round up to 2^e */
        float t = a / s->qmax;
        x = t == 0.0f ? -127 : moe_qc_ceil_log2(t);
    }
    if (x < -127) x = -127;
    if (x > 127) return 0xFF; /* unreachable for finite f32 amax */
    *e = x;
    return (uint8_t)(x + 127);
}

/* NVFP4 global encode scale: gs = (448 * 6) / max(amax, floor); a NaN amax
 * gives a NaN gs. */
MOE_HD MOE_INLINE float moe_qc_nvfp4_global(const moe_quant_spec *s, float amax_prop)
{
    return s->global_numer / moe_qc_max_prop(amax_prop, s->global_amax_floor);
}

/* Dequant multiplier of a stored E8M0 / E4M3 code (NVFP4: sf / gs). */
MOE_HD MOE_INLINE float moe_qc_code_scale(const moe_quant_spec *s, uint8_t code, float gs)
{
    if (s->scale_dtype == MOE_E8M0) return moe_s_decode_e8m0(code);
    float sf = moe_s_decode_e4m3(code);
    return s->use_global_scale ? sf / gs : sf;
}

MOE_HD MOE_INLINE void moe_qc_rule_dynamic(const moe_quant_spec *s, const moe_q_stats *st, float gs,
                                           moe_q_group *o)
{
    /* f32(1/448): DeepEP's kFinfoAmaxInvE4M3 = 1 / 448.0f (0x3B124925; the
     * decimal 0.0022321428f sometimes quoted for it is 0x3B124924); f32(1/6) */
    const float rcp448 = moe_u32_as_f32(0x3B124925u), rcp6 = moe_u32_as_f32(0x3E2AAAABu);
    float a = moe_qc_amax_of(s, st);
    o->op = s->q_op;
    o->code = 0;
    switch (s->rule) {
    case MOE_RULE_AMAX_QMAX: /* s = a / 448, no floor; q = cvt(clamp(x * rcp(s))) */
        o->scale = a / s->qmax;
        o->f = 1.0f / o->scale;
        break;
    case MOE_RULE_VLLM_TOKEN: /* s = fmaxf(a / 448, 1/(448*512)); q = cvt(clamp(x / s)) */
        o->scale = moe_qc_fmaxf(a / s->qmax, s->scale_floor);
        o->f = o->scale;
        break;
    case MOE_RULE_GROUP_EPS: /* a = fmaxf(eps, amax); s = a / 448; opt. UE8M0 */
        o->scale = moe_qc_fmaxf(a, s->amax_floor) / s->qmax;
        if (s->pow2_scale) o->scale = moe_qc_ceil_pow2(moe_qc_fmaxf(moe_fabsf(o->scale), s->pow2_floor));
        o->f = o->scale;
        break;
    case MOE_RULE_BLOCK_FLOOR: /* a = clamp(amax, min=1e-4); q = cvt(x * (448/a)); s = a/448 */
        a = moe_qc_max_prop(a, s->amax_floor);
        o->f = s->qmax / a;
        o->scale = a / s->qmax;
        break;
    case MOE_RULE_INT_TOKEN: /* a = max(amax, 1e-10); q = i8(x * (127/a)); s = a / 127 */
        a = moe_qc_fmaxf(a, s->amax_floor);
        o->f = s->qmax / a;
        o->scale = a / s->qmax;
        break;
    case MOE_RULE_INT_MINMAX: /* s = max(|max/qmax|, |min/qmin|); q = int(x / s) */
        o->scale = moe_qc_max_prop(moe_fabsf(st->vmax / s->qmax), moe_fabsf(st->vmin / s->qmin));
        o->f = o->scale;
        break;
    case MOE_RULE_MX_OCP_FLOOR:
    case MOE_RULE_MX_CEIL_POW2: {
        int e;
        o->code = moe_qc_mx_exponent(s, a, &e);
        /* q = cvt(x * 2^-e) */
        o->f = o->code == 0xFF ? moe_u32_as_f32(0x7FC00000u) : moe_ldexpf(1.0f, -e);
        o->scale = moe_s_decode_e8m0(o->code);
        break;
    }
    case MOE_RULE_NVFP4: {
        /* sf = e4m3(gs * (vmax * rcp(6))); out = rcp0(f32(sf) * rcp0(gs)) */
        moe_policy sat = {MOE_RND_RNE, MOE_SAT};
        unsigned fl = 0;
        float sf = a * rcp6;
        if (s->use_global_scale) sf = gs * sf;
        o->code = moe_s_round_pack_e4m3(moe_qc_canon_nan(sf, 0.0f), sat, &fl);
        float sfv = moe_s_decode_e4m3(o->code);
        o->f = s->use_global_scale ? moe_qc_rcp0(sfv * moe_qc_rcp0(gs)) : moe_qc_rcp0(sfv);
        o->scale = moe_qc_code_scale(s, o->code, gs);
        break;
    }
    case MOE_RULE_DEEPEP_LL: {
        a = moe_qc_fmaxf(a, s->amax_floor); /* kFP8Margin */
        if (!s->pow2_scale) {
            o->scale = a * rcp448; /* scale_inv */
            o->f = 448.0f / a;     /* scale */
        } else if (moe_qc_isnan(a)) { /* only with amax_nan = PROPAGATE */
            o->scale = a;
            o->f = a;
            o->code = 0xFF;
        } else {
            /* fast_log2_ceil on the bits, then fast_pow2(n) = (n + 127) << 23
             * in 32-bit wrap-around arithmetic, as the GPU computes it
             * (DeepEP utils.cuh). Finite a gives e in [-22, 120]; an Inf amax
             * gives e = 128, so scale_inv = +Inf (byte 0xFF) and scale =
             * bits 0xFF800000 = -Inf, which the cast then saturates. */
            uint32_t ib = moe_f32_as_u32(a * rcp448);
            int e = (int)((ib >> 23) & 0xFFu) - 127 + ((ib & 0x7FFFFFu) != 0);
            uint32_t up = (uint32_t)(127 + e) << 23, down = (uint32_t)(127 - e) << 23;
            o->scale = moe_u32_as_f32(up);  /* scale_inv = 2^e */
            o->f = moe_u32_as_f32(down);    /* scale = 2^-e */
            o->code = (uint8_t)(up >> 23);  /* float_bits(scale_inv) >> 23 */
        }
        break;
    }
    default: /* MOE_RULE_NONE has no groups */
        o->scale = 1.0f;
        o->f = 1.0f;
        break;
    }
}

/* The value a static scale s gives a group: q = cvt(clamp(x / s)). */
MOE_HD MOE_INLINE void moe_qc_rule_static(float s, moe_q_group *o)
{
    o->op = MOE_QOP_DIV;
    o->f = o->scale = s;
    o->code = 0;
}

/* ---- scale placement ------------------------------------------------------------- */
/* moe_sf_offset_128x4 for r, c, sf_cols >= 0. */
MOE_HD MOE_INLINE int64_t moe_qc_sf_offset_128x4(int64_t r, int64_t c, int64_t sf_cols)
{
    int64_t k_tiles = (sf_cols + 3) / 4;
    return (((r / 128) * k_tiles + c / 4) * 32 + r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}

/* Index of scale (b, sr, sc) in the scale tensor's storage units (bytes for
 * E8M0/E4M3, floats for F32, words for PACK4; for PACK4 *byte gets the byte
 * lane 0..3, the word's bits 8*lane.., which is byte `lane` of the word in
 * little-endian memory on x86 and CUDA alike). */
MOE_HD MOE_INLINE int64_t moe_qc_scale_index(const moe_quant_spec *spec, const moe_q_geom *g, int64_t b,
                                             int64_t sr, int64_t sc, int *byte)
{
    if (byte) *byte = 0;
    switch (spec->layout) {
    case MOE_SF_SWIZZLE_128X4:
        return b * g->per_b + moe_qc_sf_offset_128x4(sr, sc, g->SC);
    case MOE_SF_UE8M0_PACK4:
        if (byte) *byte = (int)(sc % 4);
        return b * g->per_b + sr * (g->SC / 4) + sc / 4;
    default:
        return b * g->per_b + sr * g->SC + sc;
    }
}

/* ---- elements ----------------------------------------------------------------------- */
/* The value one element is encoded from: x / f or x * f, a made NaN given
 * its fixed sign, then the spec's pre-cast clamp (vLLM's fmax(-m, fmin(v,
 * m)) or fmin(fmax(v, -m), m); torch.clamp keeps NaN). */
MOE_HD MOE_INLINE float moe_qc_step(const moe_quant_spec *s, const moe_q_group *grp, float xv)
{
    float v = grp->op == MOE_QOP_DIV ? xv / grp->f : xv * grp->f;
    v = moe_qc_canon_nan(v, xv);
    switch (s->clamp) {
    case MOE_NANCLAMP_MIN_MAX: return moe_qc_fmaxf(-s->qmax, moe_qc_fminf(v, s->qmax));
    case MOE_NANCLAMP_MAX_MIN: return moe_qc_fminf(moe_qc_fmaxf(v, -s->qmax), s->qmax);
    default: return v;
    }
}

/* Code of v in a quantized element format (E4M3_SAT_RNE, E2M1_SAT_RNE,
 * int RNE with clamp); the 4-bit ones in the low nibble. */
MOE_HD MOE_INLINE uint8_t moe_qc_encode(moe_dtype d, float v)
{
    moe_policy sat = {MOE_RND_RNE, MOE_SAT};
    unsigned fl = 0;
    switch (d) {
    case MOE_E4M3: return moe_s_round_pack_e4m3(v, sat, &fl);
    case MOE_I8: return (uint8_t)moe_s_round_to_int(v, MOE_RND_RNE, -128, 127, &fl);
    case MOE_E2M1: return moe_s_round_pack_e2m1(v, sat, &fl);
    default: return (uint8_t)((uint32_t)moe_s_round_to_int(v, MOE_RND_RNE, -8, 7, &fl) & 0xFu); /* I4 */
    }
}

/* Value of a code of a quantized element format (the low nibble for 4 bits). */
MOE_HD MOE_INLINE float moe_qc_decode(moe_dtype d, uint8_t c)
{
    switch (d) {
    case MOE_E4M3: return moe_s_decode_e4m3(c);
    case MOE_I8: return (float)(int8_t)c;
    case MOE_E2M1: return moe_s_decode_e2m1((uint8_t)(c & 0xFu));
    default: return (float)((int)(c & 0xFu) - ((c & 8u) ? 16 : 0)); /* I4 */
    }
}

#endif
