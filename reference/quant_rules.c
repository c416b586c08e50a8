/* The scale rules: one group's amax (or min/max) in, the element step and
 * the stored scale out. Each case spells out, in order, every f32 operation
 * the upstream code it models performs (include/moe/quant.h lists them);
 * exponents come from frexpf, never from a logarithm. */
#include <math.h>
#include <string.h>
#include "moe/format.h"
#include "quant_internal.h"

/* f32(1/448): DeepEP's kFinfoAmaxInvE4M3 = 1 / 448.0f (0x3B124925; the
 * decimal 0.0022321428f sometimes quoted for it is 0x3B124924) */
#define RCP448 (1.0f / 448.0f)
#define RCP6 (1.0f / 6.0f)

static float qnan_pos(void)
{
    uint32_t u = 0x7FC00000u;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float moe_q_canon_nan(float v, float x)
{
    if (!isnan(v)) return v;
    if (isnan(x)) {
        uint32_t u;
        memcpy(&u, &x, 4);
        u |= 0x00400000u; /* quiet it, keep sign and payload */
        memcpy(&v, &u, 4);
        return v;
    }
    return qnan_pos();
}

int moe_q_floor_log2(float v)
{
    int e;
    (void)frexpf(v, &e); /* v = f * 2^e, f in [0.5, 1), exact, subnormals too */
    return e - 1;
}

int moe_q_ceil_log2(float v)
{
    int e;
    float f = frexpf(v, &e);
    return f == 0.5f ? e - 1 : e;
}

/* fmaxf that lets a NaN through (torch.maximum / torch.clamp): */
static float max_prop(float a, float b)
{
    if (isnan(a)) return a;
    if (isnan(b)) return b;
    return a > b ? a : b;
}

/* 2^ceil(log2 v) for v > 0; Inf and NaN pass through (exp2f(ceilf(log2f))). */
static float ceil_pow2(float v)
{
    if (isnan(v) || isinf(v)) return v;
    return ldexpf(1.0f, moe_q_ceil_log2(v));
}

/* 1/v with 1/0 = 0 (vLLM's get_reciprocal; TRT-LLM "SF = 0 gives outscale 0"). */
static float rcp0(float v) { return v == 0.0f ? 0.0f : 1.0f / v; }

static float amax_of(const moe_quant_spec *s, const moe_q_stats *st)
{
    return s->amax_nan == MOE_AMAX_NAN_IGNORE ? st->amax_ign : st->amax_prop;
}

/* MX shared exponent; returns 0xFF (and sets *e = 0) for the NaN scale. */
static uint8_t mx_exponent(const moe_quant_spec *s, float a, int *e)
{
    *e = 0;
    if (isnan(a) || isinf(a)) return 0xFF; /* microxcaling: NaN scale */
    int x;
    if (s->rule == MOE_RULE_MX_OCP_FLOOR) {
        /* shared_exp = floor(log2 amax) - emax_elem; amax = 0 -> clamp */
        x = a == 0.0f ? -127 : moe_q_floor_log2(a) - s->emax_elem;
    } else {
        /* ceil_pow2: t = amax / elem_max (one f32 rounding), round up to 2^e */
        float t = a / s->qmax;
        x = t == 0.0f ? -127 : moe_q_ceil_log2(t);
    }
    if (x < -127) x = -127;
    if (x > 127) return 0xFF; /* unreachable for finite f32 amax */
    *e = x;
    return (uint8_t)(x + 127);
}

float moe_q_nvfp4_global(const moe_quant_spec *s, float amax_prop)
{
    /* gs = (448 * 6) / max(amax, floor); NaN amax gives a NaN gs */
    return s->global_numer / max_prop(amax_prop, s->global_amax_floor);
}

float moe_q_code_scale(const moe_quant_spec *s, uint8_t code, float gs)
{
    if (s->scale_dtype == MOE_E8M0) return moe_e8m0_to_f32(code);
    float sf = moe_e4m3_to_f32(code);
    return s->use_global_scale ? sf / gs : sf;
}

void moe_q_rule_dynamic(const moe_quant_spec *s, const moe_q_stats *st, float gs,
                        moe_q_group *o)
{
    float a = amax_of(s, st);
    o->op = s->q_op;
    o->code = 0;
    switch (s->rule) {
    case MOE_RULE_AMAX_QMAX: /* s = a / 448, no floor; q = cvt(clamp(x * rcp(s))) */
        o->scale = a / s->qmax;
        o->f = 1.0f / o->scale;
        break;
    case MOE_RULE_VLLM_TOKEN: /* s = fmaxf(a / 448, 1/(448*512)); q = cvt(clamp(x / s)) */
        o->scale = fmaxf(a / s->qmax, s->scale_floor);
        o->f = o->scale;
        break;
    case MOE_RULE_GROUP_EPS: /* a = fmaxf(eps, amax); s = a / 448; opt. UE8M0 */
        o->scale = fmaxf(a, s->amax_floor) / s->qmax;
        if (s->pow2_scale) o->scale = ceil_pow2(fmaxf(fabsf(o->scale), s->pow2_floor));
        o->f = o->scale;
        break;
    case MOE_RULE_BLOCK_FLOOR: /* a = clamp(amax, min=1e-4); q = cvt(x * (448/a)); s = a/448 */
        a = max_prop(a, s->amax_floor);
        o->f = s->qmax / a;
        o->scale = a / s->qmax;
        break;
    case MOE_RULE_INT_TOKEN: /* a = max(amax, 1e-10); q = i8(x * (127/a)); s = a / 127 */
        a = fmaxf(a, s->amax_floor);
        o->f = s->qmax / a;
        o->scale = a / s->qmax;
        break;
    case MOE_RULE_INT_MINMAX: /* s = max(|max/qmax|, |min/qmin|); q = int(x / s) */
        o->scale = max_prop(fabsf(st->vmax / s->qmax), fabsf(st->vmin / s->qmin));
        o->f = o->scale;
        break;
    case MOE_RULE_MX_OCP_FLOOR:
    case MOE_RULE_MX_CEIL_POW2: {
        int e;
        o->code = mx_exponent(s, a, &e);
        o->f = o->code == 0xFF ? qnan_pos() : ldexpf(1.0f, -e); /* q = cvt(x * 2^-e) */
        o->scale = moe_e8m0_to_f32(o->code);
        break;
    }
    case MOE_RULE_NVFP4: {
        /* sf = e4m3(gs * (vmax * rcp(6))); out = rcp0(f32(sf) * rcp0(gs)) */
        float sf = a * RCP6;
        if (s->use_global_scale) sf = gs * sf;
        o->code = moe_f32_to_e4m3(moe_q_canon_nan(sf, 0.0f), MOE_POLICY_E4M3_SAT_RNE, NULL);
        float sfv = moe_e4m3_to_f32(o->code);
        o->f = s->use_global_scale ? rcp0(sfv * rcp0(gs)) : rcp0(sfv);
        o->scale = moe_q_code_scale(s, o->code, gs);
        break;
    }
    case MOE_RULE_DEEPEP_LL: {
        a = fmaxf(a, s->amax_floor); /* kFP8Margin */
        if (!s->pow2_scale) {
            o->scale = a * RCP448; /* scale_inv */
            o->f = 448.0f / a;     /* scale */
        } else if (isnan(a)) {     /* only with amax_nan = PROPAGATE */
            o->scale = a;
            o->f = a;
            o->code = 0xFF;
        } else {
            /* fast_log2_ceil on the bits, then fast_pow2(n) = (n + 127) << 23
             * in 32-bit wrap-around arithmetic, as the GPU computes it
             * (DeepEP utils.cuh). Finite a gives e in [-22, 120]; an Inf amax
             * gives e = 128, so scale_inv = +Inf (byte 0xFF) and scale =
             * bits 0xFF800000 = -Inf, which the cast then saturates. */
            uint32_t ib;
            float sinv = a * RCP448;
            memcpy(&ib, &sinv, 4);
            int e = (int)((ib >> 23) & 0xFFu) - 127 + ((ib & 0x7FFFFFu) != 0);
            uint32_t up = (uint32_t)(127 + e) << 23, down = (uint32_t)(127 - e) << 23;
            memcpy(&o->scale, &up, 4);  /* scale_inv = 2^e */
            memcpy(&o->f, &down, 4);    /* scale = 2^-e */
            o->code = (uint8_t)(up >> 23); /* float_bits(scale_inv) >> 23 */
        }
        break;
    }
    default: /* MOE_RULE_NONE has no groups */
        o->scale = 1.0f;
        o->f = 1.0f;
        break;
    }
}
