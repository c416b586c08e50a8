/* Golden cases of quantize and dequantize: every scheme's activation and
 * weight spec, the spec variants that are not a scheme's default (DeepEP-LL
 * casts, UE8M0 group scales, OCP-floor MX scales, swizzled and linear
 * scale layouts, NVFP4 without a global scale, int8 groupwise, static
 * scales), and the format boundaries: values at and around each element
 * format's max, subnormal and all-zero groups (the floors and epsilons),
 * NaN and Inf inputs through every rule's amax / clamp policy, and the
 * special codes (NaN, max, E8M0 0x00 / 0xFE / 0xFF) through dequantize. */
#include <math.h>
#include <string.h>
#include "golden_internal.h"
#include "moe/format.h"
#include "moe/portable.h"
#include "moe/rng.h"

/* v[0] scheme, v[1] operand, v[2] spec variant, v[3] data */
enum {
    SPEC_SCHEME = 0,  /* the scheme's own spec */
    SPEC_LL,          /* DeepEP-LL cast, default scales */
    SPEC_LL_ROUND,    /* DeepEP-LL round_scale */
    SPEC_LL_UE8M0,    /* DeepEP-LL round_scale + UE8M0 packed 4 per int32 */
    SPEC_GROUP_UE8M0, /* per_token_group_quant with UE8M0 (pow2) scales */
    SPEC_MX_OCP,      /* MX scale rule ocp_floor instead of ceil_pow2 */
    SPEC_MX_SWIZZLE,  /* MX scales in the 128x4 swizzled layout */
    SPEC_NV_LINEAR,   /* NVFP4 scales in the linear layout */
    SPEC_NV_NOGLOBAL, /* NVFP4 without the fp32 global scale */
    SPEC_INT8_G64,    /* int8 weight-only groupwise, group 64 */
    SPEC_STATIC,      /* the scheme's spec with a static scale (1/64, or 1 for specials) */
    SPEC_COUNT
};
static const char *const SPEC_NAMES[SPEC_COUNT] = {
    "scheme", "deepep_ll", "deepep_ll_round_scale", "deepep_ll_ue8m0", "group_ue8m0", "mx_ocp_floor",
    "mx_swizzle_128x4", "nvfp4_linear_scales", "nvfp4_no_global", "int8_groupwise_g64", "static_scale"};

enum { DATA_NORMAL = 0, DATA_SPECIALS = 1 };

static moe_status resolve_spec(const moe_golden_case *c, moe_quant_spec *s)
{
    moe_status st = moe_scheme_spec((moe_scheme)c->v[0], (moe_operand)c->v[1], s);
    if (st != MOE_OK) return st;
    switch (c->v[2]) {
    case SPEC_LL: return moe_quant_spec_deepep_ll(0, 0, s);
    case SPEC_LL_ROUND: return moe_quant_spec_deepep_ll(1, 0, s);
    case SPEC_LL_UE8M0: return moe_quant_spec_deepep_ll(1, 1, s);
    case SPEC_GROUP_UE8M0: s->pow2_scale = 1; break;
    case SPEC_MX_OCP: s->rule = MOE_RULE_MX_OCP_FLOOR; break;
    case SPEC_MX_SWIZZLE: s->layout = MOE_SF_SWIZZLE_128X4; break;
    case SPEC_NV_LINEAR: s->layout = MOE_SF_LINEAR; break;
    case SPEC_NV_NOGLOBAL: s->use_global_scale = 0, s->static_ok = 0; break;
    case SPEC_INT8_G64: return moe_quant_spec_int_groupwise(MOE_I8, 64, s);
    default: break;
    }
    return moe_quant_spec_check(s);
}

/* The input's shape: activations [M, K], weights [E, N, K] (dims M / E, I, H). */
static int x_shape(const moe_golden_case *c, int64_t *shape)
{
    if (c->v[1] == MOE_OPERAND_ACT) {
        shape[0] = c->dims.M, shape[1] = c->dims.H;
        return 2;
    }
    shape[0] = c->dims.E, shape[1] = c->dims.I, shape[2] = c->dims.H;
    return 3;
}

static float f32_of(uint32_t u) { return moe_u32_as_f32(u); }

/* Values at and around the largest finite value of the element format (the
 * overflow threshold is IEEE's: one virtual code past max), then its
 * smallest normal and subnormal steps and a tie to zero. */
static int around_max(moe_dtype e, float *v)
{
    switch (e) {
    case MOE_E4M3: /* 464 rounds to 448, 465 overflows; 17 ties to 16, 19 to 20 */
        v[0] = 448, v[1] = 464, v[2] = 465, v[3] = -480, v[4] = 17, v[5] = 19, v[6] = 0x1p-9f, v[7] = 0x1p-10f;
        return 8;
    case MOE_E2M1: /* 5 ties to 4, 7 saturates, 0.25 ties to 0 */
        v[0] = 6, v[1] = 5, v[2] = 7, v[3] = -6.5f, v[4] = 0.25f, v[5] = 0.75f, v[6] = 2.5f, v[7] = -3.5f;
        return 8;
    case MOE_I8: v[0] = 127, v[1] = 127.5f, v[2] = 128, v[3] = -128.5f, v[4] = 2.5f, v[5] = -0.5f; return 6;
    case MOE_I4: v[0] = 7, v[1] = 7.5f, v[2] = -8, v[3] = -8.5f, v[4] = 0.5f, v[5] = 1.5f; return 6;
    case MOE_F16: /* 65519 rounds to 65504, 65520 to Inf; 2^-25 ties to 0, 3*2^-25 to 2^-23 */
        v[0] = 65504, v[1] = 65519, v[2] = 65520, v[3] = -65520, v[4] = 0x1p-14f, v[5] = 0x1p-24f, v[6] = 0x1p-25f,
        v[7] = 0x3p-25f;
        return 8;
    case MOE_BF16: /* max 0x7F7F; the midpoint to the virtual next code ties up to Inf (odd max code) */
        v[0] = f32_of(0x7F7F0000u), v[1] = f32_of(0x7F7F7FFFu), v[2] = f32_of(0x7F7F8000u), v[3] = -f32_of(0x7F7F8000u);
        v[4] = f32_of(0x00800000u), v[5] = f32_of(0x00010000u), v[6] = f32_of(0x00008000u), v[7] = f32_of(0x00018000u);
        return 8;
    default: /* f32: max, min normal, min subnormal */
        v[0] = f32_of(0x7F7FFFFFu), v[1] = -f32_of(0x7F7FFFFFu), v[2] = f32_of(0x00800000u), v[3] = f32_of(1u);
        return 4;
    }
}

/* Row r of a specials input gets theme r % 8 in its first 16 columns (the
 * first NVFP4 group; inside every larger group) and small normals after. */
static void specials_row(float *row, int64_t K, int theme, moe_dtype elem)
{
    float v[8];
    int n;
    switch (theme) {
    case 0: /* all zero: the floors and epsilons decide the scale */
        for (int64_t c = 0; c < K; c++) row[c] = 0.0f;
        return;
    case 1: row[3] = NAN; return;
    case 2: row[1] = INFINITY, row[6] = -INFINITY; return;
    case 3: /* f32 subnormals only: the smallest amax */
        for (int64_t c = 0; c < K; c++) row[c] = c % 3 ? 0.0f : (c % 2 ? -f32_of(0x00000300u) : f32_of(0x00012345u));
        return;
    case 4:
        n = around_max(elem, v);
        for (int i = 0; i < n; i++) row[i] = v[i];
        return;
    case 5: /* huge and tiny together: the scale follows the huge one */
        row[0] = 3.0e38f, row[1] = -1.0e-30f, row[2] = 1.0f;
        return;
    case 6: /* amax with mantissa 1.75 (OCP floor clips it) and an exact power of two */
        row[0] = 1.75f * 64.0f, row[5] = -64.0f;
        return;
    default: /* -0 and a negative NaN */
        row[0] = -0.0f, row[2] = -NAN;
        return;
    }
}

static moe_status fill_x(const moe_golden_case *c, moe_tensor *x, const moe_quant_spec *s)
{
    int op = c->v[1];
    moe_status st = gk_normal(c, x, "x", op == MOE_OPERAND_ACT ? 1.0f : 0.05f);
    if (st != MOE_OK) return st;
    int64_t K = x->shape[x->ndim - 1], rows = moe_tensor_numel(x) / K;
    float *f = x->data;
    for (int64_t r = 0; r < rows; r++) {
        /* rows an octave apart, so row and group scales differ (exact) */
        float m = ldexpf(1.0f, (int)(r % 5) - 2);
        for (int64_t k = 0; k < K; k++) f[r * K + k] *= m;
        if (c->v[3] == DATA_SPECIALS) specials_row(f + r * K, K, (int)(r % 8), s->elem);
    }
    return MOE_OK;
}

/* ---- quantize --------------------------------------------------------------------------- */

static moe_status quant_make(const moe_golden_case *c, moe_golden_set *in)
{
    moe_quant_spec s;
    moe_status st = resolve_spec(c, &s);
    int64_t sh[3];
    int nd = x_shape(c, sh);
    moe_tensor *x = gk_new(in, &st, "x", MOE_F32, nd, sh);
    if (st == MOE_OK) st = fill_x(c, x, &s);
    if (st != MOE_OK || c->v[2] != SPEC_STATIC) return st;
    moe_quant_dims d;
    if ((st = moe_quant_shapes(&s, nd, sh, &d)) != MOE_OK) return st;
    int nv = s.rule == MOE_RULE_NVFP4;
    moe_tensor *ss = gk_new(in, &st, "static_scale", MOE_F32, nv ? d.global_ndim : d.scale_ndim,
                            nv ? d.global_shape : d.scale_shape);
    /* specials: scale 1, so the values around max meet the clamp and the
     * SAT conversion as they are; else 1/64 (x/s stays inside e4m3) */
    float v = c->v[3] == DATA_SPECIALS ? 1.0f : nv ? 64.0f : 1.0f / 64.0f;
    for (int64_t i = 0; st == MOE_OK && i < moe_tensor_numel(ss); i++) ((float *)ss->data)[i] = v;
    return st;
}

static moe_status quant_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in, moe_golden_set *out)
{
    gk_run r;
    gk_begin(&r, ops, in, out);
    moe_quant_spec s;
    moe_quant_dims d;
    int64_t sh[3];
    int nd = x_shape(c, sh);
    moe_status st = resolve_spec(c, &s);
    if (st == MOE_OK) st = moe_quant_shapes(&s, nd, sh, &d);
    if (st != MOE_OK) return gk_done(&r, st);
    const moe_tensor *x = gk_in(&r, "x"), *ss = gk_opt(&r, "static_scale");
    moe_tensor *q = gk_out(&r, "q", d.q_dtype, d.q_ndim, d.q_shape);
    moe_tensor *sc = d.has_scale ? gk_out(&r, "scale", d.scale_dtype, d.scale_ndim, d.scale_shape) : NULL;
    moe_tensor *gl = d.has_global ? gk_out(&r, "global_scale", MOE_F32, d.global_ndim, d.global_shape) : NULL;
    return gk_done(&r, r.st ? r.st : ops->quantize(&s, x, ss, q, sc, gl));
}

static moe_status quant_describe(const moe_golden_case *c, cJSON *p)
{
    moe_quant_spec s;
    moe_status st = resolve_spec(c, &s);
    if (st == MOE_OK) st = gk_json_str(p, "spec_variant", SPEC_NAMES[c->v[2]]);
    if (st == MOE_OK) st = gk_json_add(p, "spec", gk_spec_json(&s));
    if (st == MOE_OK)
        st = gk_json_str(p, "data", c->v[3] == DATA_SPECIALS
                                        ? "row themes by row % 8: zeros, NaN, +-Inf, f32 subnormals, around the "
                                          "element max, huge+tiny, mantissa 1.75, -0 and -NaN"
                                        : "normals (sd 1 act, 0.05 weight), row r scaled by 2^(r%5-2)");
    return st;
}

/* ---- dequantize ------------------------------------------------------------------------ */

/* Special codes: q holds every code of its element type in turn, the scale
 * bytes cycle through a fixed list (NaN, max, min, subnormal and 0x00 /
 * 0xFE / 0xFF for E8M0). */
static void special_codes(const moe_quant_spec *s, moe_golden_set *in)
{
    moe_tensor *q = &in->t[0];
    uint8_t *b = q->data;
    for (size_t i = 0; i < q->nbytes; i++) b[i] = (uint8_t)(i * 1u + (i >> 8) * 7u);
    if (in->n < 2) return;
    moe_tensor *sc = &in->t[1];
    if (s->scale_dtype == MOE_F32 && s->layout != MOE_SF_UE8M0_PACK4) {
        static const float F[] = {1.0f, 0x1p-20f, 3.0e38f, 0.0f, 448.0f, 0x1p-149f, 0.5f, 2.0f};
        for (int64_t i = 0; i < moe_tensor_numel(sc); i++) ((float *)sc->data)[i] = F[i % 8];
    } else {
        static const uint8_t E8[] = {0x7F, 0x00, 0xFE, 0xFF, 0x70, 0x85, 0x01, 0x80};
        static const uint8_t E4[] = {0x38, 0x7F, 0x7E, 0x01, 0x00, 0x08, 0xFE, 0x30};
        const uint8_t *L = s->scale_dtype == MOE_E4M3 ? E4 : E8;
        for (size_t i = 0; i < sc->nbytes; i++) ((uint8_t *)sc->data)[i] = L[i % 8];
    }
}

static moe_status dequant_make(const moe_golden_case *c, moe_golden_set *in)
{
    moe_quant_spec s;
    moe_status st = resolve_spec(c, &s);
    int64_t sh[3];
    int nd = x_shape(c, sh);
    moe_tensor x;
    if (st == MOE_OK) st = moe_tensor_alloc(&x, MOE_F32, nd, sh);
    if (st != MOE_OK) return st;
    st = fill_x(c, &x, &s);
    if (st == MOE_OK) st = gk_quantize_into(in, &s, &x, "q");
    moe_tensor_free(&x);
    if (st == MOE_OK && c->v[3] == DATA_SPECIALS) special_codes(&s, in);
    return st;
}

static moe_status dequant_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in,
                              moe_golden_set *out)
{
    gk_run r;
    gk_begin(&r, ops, in, out);
    moe_quant_spec s;
    int64_t sh[3];
    int nd = x_shape(c, sh);
    moe_status st = resolve_spec(c, &s);
    if (st != MOE_OK) return gk_done(&r, st);
    const moe_tensor *q = gk_in(&r, "q"), *sc = gk_opt(&r, "q_scale"), *gl = gk_opt(&r, "q_global");
    moe_tensor *x = gk_out(&r, "x", MOE_F32, nd, sh);
    return gk_done(&r, r.st ? r.st : ops->dequantize(&s, q, sc, gl, x));
}

static moe_status dequant_describe(const moe_golden_case *c, cJSON *p)
{
    moe_status st = quant_describe(c, p);
    if (st == MOE_OK && c->v[3] == DATA_SPECIALS)
        st = gk_json_str(p, "codes", "q cycles through every element code; scales cycle through NaN, max, "
                                     "min, subnormal and E8M0 0x00 / 0xFE / 0xFF");
    if (st == MOE_OK) st = gk_json_str(p, "rounding", "decode(q) * scale, one f32 rounding");
    return st;
}

#define A MOE_OPERAND_ACT
#define W MOE_OPERAND_WEIGHT

/* ---- the table ------------------------------------------------------------------------------ */

/* activations use dims M, H; weights E, I (= N), H */
#define QCASE(kind, nm, scheme, seed, M, E, N, K, sc, op, spec, data, note, mk, rn, ds)                              \
    {nm, kind, scheme, seed, {(op) == A ? M : 0, (op) == A ? 0 : E, 0, K, (op) == A ? 0 : N, 0}, {sc, op, spec, data}, \
     NULL, 0, note, mk, rn, ds, NULL, NULL}
#define Q(nm, scheme, seed, sc, op, spec, data, note) \
    QCASE("quantize", nm, scheme, seed, 4, 2, 4, 128, sc, op, spec, data, note, quant_make, quant_run, quant_describe)
#define DQ(nm, scheme, seed, sc, op, spec, data, note)                                                         \
    QCASE("dequantize", nm, scheme, seed, 4, 2, 4, 128, sc, op, spec, data, note, dequant_make, dequant_run, \
          dequant_describe)


#define Q_BOTH(e, n, i)                                                                              \
    Q("stage.quantize." n ".act", n, 600 + 2 * i, e, A, SPEC_SCHEME, DATA_NORMAL, "activation spec"), \
    Q("stage.quantize." n ".weight", n, 601 + 2 * i, e, W, SPEC_SCHEME, DATA_NORMAL, "weight spec"),
#define DQ_BOTH(e, n, i)                                                                                \
    DQ("stage.dequantize." n ".act", n, 700 + 2 * i, e, A, SPEC_SCHEME, DATA_NORMAL, "activation spec"), \
    DQ("stage.dequantize." n ".weight", n, 701 + 2 * i, e, W, SPEC_SCHEME, DATA_NORMAL, "weight spec"),

static const moe_golden_case CASES[] = {
    GK_SCHEMES(Q_BOTH)
    GK_SCHEMES(DQ_BOTH)

    /* spec variants that are no scheme's default */
    QCASE("quantize", "stage.quantize.deepep_ll.act", "*", 640, 4, 0, 0, 128, MOE_SCHEME_BF16, A, SPEC_LL, DATA_NORMAL,
          "DeepEP-LL FP8 cast per 128 channels, scale_inv = amax * rcp(448)", quant_make, quant_run, quant_describe),
    QCASE("quantize", "stage.quantize.deepep_ll_round_scale.act", "*", 641, 4, 0, 0, 256, MOE_SCHEME_BF16, A,
          SPEC_LL_ROUND, DATA_NORMAL, "round_scale: power-of-two scales", quant_make, quant_run, quant_describe),
    QCASE("quantize", "stage.quantize.deepep_ll_ue8m0.act", "*", 642, 4, 0, 0, 512, MOE_SCHEME_BF16, A, SPEC_LL_UE8M0,
          DATA_NORMAL, "UE8M0 exponents packed 4 per int32", quant_make, quant_run, quant_describe),
    Q("stage.quantize.fp8_wblock128_agroup128.act.ue8m0", "fp8_wblock128_agroup128", 643,
      MOE_SCHEME_FP8_WBLOCK128_AGROUP128, A, SPEC_GROUP_UE8M0, DATA_NORMAL, "1x128 groups with UE8M0 (ceil pow2) scales"),
    QCASE("quantize", "stage.quantize.fp8_wblock128_agroup128.weight.partial_tiles", "fp8_wblock128_agroup128", 644, 0,
          1, 136, 160, MOE_SCHEME_FP8_WBLOCK128_AGROUP128, W, SPEC_SCHEME, DATA_NORMAL,
          "N = 136, K = 160: full and partial 128 x 128 tiles in both directions", quant_make, quant_run, quant_describe),
    Q("stage.quantize.mxfp8.act.ocp_floor", "mxfp8", 645, MOE_SCHEME_MXFP8, A, SPEC_MX_OCP, DATA_NORMAL,
      "OCP MX scale rule floor(log2 amax) - 8"),
    Q("stage.quantize.mxfp4_w4a16.weight.ocp_floor", "mxfp4_w4a16", 646, MOE_SCHEME_MXFP4_W4A16, W, SPEC_MX_OCP,
      DATA_NORMAL, "OCP MX scale rule for e2m1, emax 2"),
    Q("stage.quantize.mxfp8.act.swizzled", "mxfp8", 647, MOE_SCHEME_MXFP8, A, SPEC_MX_SWIZZLE, DATA_NORMAL,
      "E8M0 scales in the 128x4 swizzled layout"),
    Q("stage.quantize.nvfp4.act.linear_scales", "nvfp4", 648, MOE_SCHEME_NVFP4, A, SPEC_NV_LINEAR, DATA_NORMAL,
      "NVFP4 with linear E4M3 scales"),
    Q("stage.quantize.nvfp4.weight.no_global", "nvfp4", 649, MOE_SCHEME_NVFP4, W, SPEC_NV_NOGLOBAL, DATA_NORMAL,
      "NVFP4 without the fp32 global scale: sf = e4m3(amax / 6)"),
    Q("stage.quantize.int8_groupwise_g64.weight", "*", 650, MOE_SCHEME_BF16, W, SPEC_INT8_G64, DATA_NORMAL,
      "int8 weight-only groupwise (group 64), symmetric min/max"),
    Q("stage.quantize.fp8_wtensor_atensor.act.static", "fp8_wtensor_atensor", 651, MOE_SCHEME_FP8_WTENSOR_ATENSOR, A,
      SPEC_STATIC, DATA_NORMAL, "static per-tensor scale 1/64: q = cvt(clamp(x / s))"),
    Q("stage.quantize.fp8_wchannel_atoken.act.static", "fp8_wchannel_atoken", 652, MOE_SCHEME_FP8_WCHANNEL_ATOKEN, A,
      SPEC_STATIC, DATA_NORMAL, "static per-token scales"),
    Q("stage.quantize.nvfp4.act.static_global", "nvfp4", 653, MOE_SCHEME_NVFP4, A, SPEC_STATIC, DATA_NORMAL,
      "static NVFP4 global scale 64"),
    QCASE("dequantize", "stage.dequantize.deepep_ll_ue8m0.act", "*", 654, 4, 0, 0, 512, MOE_SCHEME_BF16, A,
          SPEC_LL_UE8M0, DATA_NORMAL, "UE8M0 packed scales decoded byte by byte", dequant_make, dequant_run,
          dequant_describe),
    DQ("stage.dequantize.nvfp4.act.linear_scales", "nvfp4", 655, MOE_SCHEME_NVFP4, A, SPEC_NV_LINEAR, DATA_NORMAL,
       "NVFP4 with linear E4M3 scales"),
    DQ("stage.dequantize.nvfp4.weight.no_global", "nvfp4", 656, MOE_SCHEME_NVFP4, W, SPEC_NV_NOGLOBAL, DATA_NORMAL,
       "NVFP4 without a global scale"),
    DQ("stage.dequantize.int8_groupwise_g64.weight", "*", 657, MOE_SCHEME_BF16, W, SPEC_INT8_G64, DATA_NORMAL,
       "int8 groupwise"),

    /* format boundaries: rows of special values through each rule (8 rows = every theme) */
#define QS(nm, scheme, seed, sc, op, spec, note)                                                                \
    QCASE("quantize", "edge.quantize." nm ".specials", scheme, seed, 8, 2, 4, 128, sc, op, spec, DATA_SPECIALS, \
          note, quant_make, quant_run, quant_describe)
    QS("bf16_cast", "bf16", 800, MOE_SCHEME_BF16, A, SPEC_SCHEME, "f32 -> bf16 IEEE RNE: max, the midpoint to Inf, subnormals"),
    QS("f16_cast", "f16", 801, MOE_SCHEME_F16, A, SPEC_SCHEME, "f32 -> f16 IEEE RNE: 65504 / 65519 / 65520, subnormal ties"),
    QS("f32_copy", "f32", 802, MOE_SCHEME_F32, W, SPEC_SCHEME, "f32 copies every bit, NaN payloads included"),
    QS("fp8_atensor", "fp8_wtensor_atensor", 803, MOE_SCHEME_FP8_WTENSOR_ATENSOR, A, SPEC_SCHEME,
       "per-tensor amax (NaN ignored), Inf amax, fmin/fmax clamp of NaN"),
    QS("fp8_atensor.static", "fp8_wtensor_atensor", 804, MOE_SCHEME_FP8_WTENSOR_ATENSOR, A, SPEC_STATIC,
       "static scale 1: 448 / 464 / 465 / -480 through the clamp and E4M3 SAT RNE"),
    QS("fp8_atoken", "fp8_wchannel_atoken", 805, MOE_SCHEME_FP8_WCHANNEL_ATOKEN, A, SPEC_SCHEME,
       "per-token scale floor 1/(448*512) on zero and subnormal rows"),
    QS("fp8_agroup128", "fp8_wblock128_agroup128", 806, MOE_SCHEME_FP8_WBLOCK128_AGROUP128, A, SPEC_SCHEME,
       "1x128 groups: eps 1e-10, the fmax/fmin NaN clamp to -448"),
    QS("fp8_agroup128.ue8m0", "fp8_wblock128_agroup128", 807, MOE_SCHEME_FP8_WBLOCK128_AGROUP128, A, SPEC_GROUP_UE8M0,
       "UE8M0 group scales with the pow2 floor"),
    QCASE("quantize", "edge.quantize.fp8_wblock128.specials", "fp8_wblock128_agroup128", 808, 0, 1, 136, 128,
          MOE_SCHEME_FP8_WBLOCK128_AGROUP128, W, SPEC_SCHEME, DATA_SPECIALS,
          "128x128 tiles: amax floor 1e-4, NaN propagates through the tile amax", quant_make, quant_run,
          quant_describe),
    QS("int8_atoken", "int8_wchannel_atoken", 809, MOE_SCHEME_INT8_WCHANNEL_ATOKEN, A, SPEC_SCHEME,
       "int8 per-token: floor 1e-10, NaN -> 0, ties to even"),
    QS("w8a16_channel", "w8a16_channel", 810, MOE_SCHEME_W8A16_CHANNEL, W, SPEC_SCHEME,
       "symmetric min/max per channel: s = 0 on zero rows gives q = 0"),
    QS("w4a16_g32", "w4a16_g32", 811, MOE_SCHEME_W4A16_G32, W, SPEC_SCHEME, "int4 groups of 32: -8..7 range"),
    QS("mxfp8", "mxfp8", 812, MOE_SCHEME_MXFP8, A, SPEC_SCHEME, "ceil_pow2 E8M0: Inf/NaN amax -> 0xFF, zero -> 2^-127"),
    QS("mxfp8.ocp_floor", "mxfp8", 813, MOE_SCHEME_MXFP8, A, SPEC_MX_OCP, "OCP floor: mantissa 1.75 clips"),
    QS("mxfp4", "mxfp4_w4a16", 814, MOE_SCHEME_MXFP4_W4A16, W, SPEC_SCHEME, "e2m1 elements: NaN -> +6 (ONNX rule)"),
    QS("nvfp4", "nvfp4", 815, MOE_SCHEME_NVFP4, A, SPEC_SCHEME, "two-level NVFP4: global 2688/amax, E4M3 block scales"),
    QCASE("quantize", "edge.quantize.deepep_ll.specials", "*", 816, 8, 0, 0, 256, MOE_SCHEME_BF16, A, SPEC_LL_ROUND,
          DATA_SPECIALS, "DeepEP-LL round_scale: amax floor 1e-4, NaN ignored, Inf amax", quant_make, quant_run,
          quant_describe),
#undef QS
#define DS(nm, scheme, seed, sc, op, spec, note)                                                                   \
    QCASE("dequantize", "edge.dequantize." nm ".special_codes", scheme, seed, 4, 2, 4, 128, sc, op, spec,         \
          DATA_SPECIALS, note, dequant_make, dequant_run, dequant_describe)
    DS("fp8_atoken", "fp8_wchannel_atoken", 820, MOE_SCHEME_FP8_WCHANNEL_ATOKEN, A, SPEC_SCHEME,
       "every E4M3 code (NaN 0x7F/0xFF) times f32 scales 0, 2^-149, 3e38"),
    DS("mxfp8", "mxfp8", 821, MOE_SCHEME_MXFP8, A, SPEC_SCHEME, "E8M0 scale codes 0x00, 0xFE, 0xFF (NaN)"),
    DS("mxfp4", "mxfp4_w4a16", 822, MOE_SCHEME_MXFP4_W4A16, W, SPEC_SCHEME, "every e2m1 code under E8M0 specials"),
    DS("nvfp4", "nvfp4", 823, MOE_SCHEME_NVFP4, A, SPEC_SCHEME, "E4M3 block scale codes NaN, max, subnormal, zero"),
    DS("int4_groups", "w4a16_g64", 824, MOE_SCHEME_W4A16_G64, W, SPEC_SCHEME, "every int4 code, f32 scale specials"),
#undef DS
};

gk_family gk_cases_quant(void)
{
    gk_family f = {CASES, (int)(sizeof CASES / sizeof CASES[0])};
    return f;
}
