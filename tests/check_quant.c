/* The reference quantize / dequantize stage: the scheme table, every scale
 * rule at its edge cases (amax 0, subnormal amax, Inf and NaN in a group,
 * the clip point), the scale layouts, seeded round trips within half an ULP
 * of the element format times the scale, and every error path. Expected
 * codes are worked out by hand in the comments. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/format.h"
#include "moe/quant.h"
#include "moe/rng.h"
#include "test_util.h"

/* ---- helpers ------------------------------------------------------------------ */
typedef struct {
    moe_quant_spec sp;
    moe_tensor x, q, s, g, y;
} qc;

static moe_quant_spec spec_of(moe_scheme s, moe_operand op)
{
    moe_quant_spec sp;
    ck_assert_int_eq(moe_scheme_spec(s, op, &sp), MOE_OK);
    return sp;
}

/* x of shape (a, b) or (a, b, c), filled from v (NULL: zeros) */
static void qc_init(qc *c, const moe_quant_spec *sp, int ndim, int64_t a, int64_t b, int64_t k,
                    const float *v)
{
    memset(c, 0, sizeof *c);
    c->sp = *sp;
    int64_t sh[3] = {a, b, k};
    ck_assert_int_eq(moe_tensor_alloc(&c->x, MOE_F32, ndim, sh), MOE_OK);
    if (v) memcpy(c->x.data, v, c->x.nbytes);
    ck_assert_int_eq(moe_quant_alloc(sp, ndim, sh, &c->q, &c->s, &c->g), MOE_OK);
    ck_assert_int_eq(moe_tensor_alloc(&c->y, MOE_F32, ndim, sh), MOE_OK);
}

/* quantize (static scale optional), then dequantize into y */
static void qc_run(qc *c, const moe_tensor *stat)
{
    moe_tensor *s = c->s.data ? &c->s : NULL, *g = c->g.data ? &c->g : NULL;
    ck_assert_msg(moe_ref_quantize(&c->sp, &c->x, stat, &c->q, s, g) == MOE_OK, "quantize: %s",
                  moe_last_error());
    ck_assert_msg(moe_ref_dequantize(&c->sp, &c->q, s, g, &c->y) == MOE_OK, "dequantize: %s",
                  moe_last_error());
}

static void qc_free(qc *c)
{
    moe_tensor_free(&c->x);
    moe_tensor_free(&c->q);
    moe_tensor_free(&c->s);
    moe_tensor_free(&c->g);
    moe_tensor_free(&c->y);
}

static uint8_t qb(const qc *c, int64_t i) { return ((const uint8_t *)c->q.data)[i]; }
static uint8_t sb(const qc *c, int64_t i) { return ((const uint8_t *)c->s.data)[i]; }
static float sf(const qc *c, int64_t i) { return ((const float *)c->s.data)[i]; }
static float yv(const qc *c, int64_t i) { return ((const float *)c->y.data)[i]; }
static int nib(const qc *c, int64_t row, int64_t col, int64_t K)
{
    uint8_t b = qb(c, row * ((K + 1) / 2) + col / 2);
    return (col & 1) ? b >> 4 : b & 0xF;
}

static void expect_err(moe_status got, moe_status want, const char *needle)
{
    ck_assert_msg(got == want, "status %s, expected %s (%s)", moe_status_str(got),
                  moe_status_str(want), moe_last_error());
    ck_assert_msg(strstr(moe_last_error(), needle), "message '%s' lacks '%s'", moe_last_error(),
                  needle);
}

/* ---- the scheme table ---------------------------------------------------------- */
START_TEST(scheme_names_round_trip)
{
    static const char *const names[] = {
        "f32", "bf16", "f16", "fp8_wtensor_atensor", "fp8_wchannel_atensor",
        "fp8_wchannel_atoken", "fp8_wtensor_atoken", "fp8_wblock128_agroup128",
        "int8_wchannel_atoken", "w8a16_channel", "w4a16_g32", "w4a16_g64", "w4a16_g128",
        "w4afp8_g128", "mxfp8", "mxfp4_w4a16", "mxfp4_mxfp8", "nvfp4"};
    ck_assert_int_eq((int)(sizeof names / sizeof names[0]), MOE_SCHEME_COUNT);
    for (int i = 0; i < MOE_SCHEME_COUNT; i++) {
        moe_scheme s;
        ck_assert_int_eq(moe_scheme_from_name(names[i], &s), MOE_OK);
        ck_assert_int_eq(s, i);
        ck_assert_str_eq(moe_scheme_name(s), names[i]);
        const moe_scheme_info *info = moe_scheme_get(s);
        ck_assert_ptr_nonnull(info);
        ck_assert_int_eq(info->scheme, s);
        ck_assert(info->upstream && strlen(info->upstream) > 10);
        ck_assert_msg(moe_quant_spec_check(&info->weight) == MOE_OK, "%s weight: %s", names[i],
                      moe_last_error());
        ck_assert_msg(moe_quant_spec_check(&info->act) == MOE_OK, "%s act: %s", names[i],
                      moe_last_error());
        ck_assert_int_eq(info->weight.operand, MOE_OPERAND_WEIGHT);
        ck_assert_int_eq(info->act.operand, MOE_OPERAND_ACT);
    }
    /* weight-only schemes take bf16 activations with no scale */
    moe_scheme wo[] = {MOE_SCHEME_W8A16_CHANNEL, MOE_SCHEME_W4A16_G32, MOE_SCHEME_W4A16_G64,
                       MOE_SCHEME_W4A16_G128, MOE_SCHEME_MXFP4_W4A16};
    for (int i = 0; i < 5; i++) {
        const moe_scheme_info *info = moe_scheme_get(wo[i]);
        ck_assert_int_eq(info->act.elem, MOE_BF16);
        ck_assert_int_eq(info->act.gran, MOE_GRAN_NONE);
    }
    ck_assert_int_eq(moe_scheme_get(MOE_SCHEME_W4A16_G64)->weight.group_k, 64);
    ck_assert_str_eq(moe_scheme_name(MOE_SCHEME_COUNT), "?");
    ck_assert_ptr_null(moe_scheme_get((moe_scheme)-1));
    ck_assert_str_eq(moe_scale_rule_name(MOE_RULE_MX_OCP_FLOOR), "mx_ocp_floor");
    ck_assert_str_eq(moe_scale_gran_name(MOE_GRAN_NV16), "nv16");
    ck_assert_str_eq(moe_sf_layout_name(MOE_SF_SWIZZLE_128X4), "swizzle_128x4");
    ck_assert_str_eq(moe_scale_rule_name(MOE_RULE_COUNT), "?");
}
END_TEST

START_TEST(scheme_name_errors)
{
    moe_scheme s;
    expect_err(moe_scheme_from_name("fp8_per_tensor", &s), MOE_ERR_INVALID_ARG,
               "'fp8_per_tensor'");
    ck_assert(strstr(moe_last_error(), "fp8_wblock128_agroup128"));
    ck_assert(strstr(moe_last_error(), "f32 bf16"));
    ck_assert(strstr(moe_last_error(), "nvfp4"));
    expect_err(moe_scheme_from_name("NVFP4", &s), MOE_ERR_INVALID_ARG, "'NVFP4'");
    expect_err(moe_scheme_from_name(NULL, &s), MOE_ERR_NULL, "scheme name");
    expect_err(moe_scheme_from_name("nvfp4", NULL), MOE_ERR_NULL, "out");
    moe_quant_spec sp;
    expect_err(moe_scheme_spec(MOE_SCHEME_COUNT, MOE_OPERAND_ACT, &sp), MOE_ERR_INVALID_ARG,
               "scheme");
    expect_err(moe_scheme_spec(MOE_SCHEME_NVFP4, (moe_operand)7, &sp), MOE_ERR_INVALID_ARG,
               "operand");
    expect_err(moe_scheme_spec(MOE_SCHEME_NVFP4, MOE_OPERAND_ACT, NULL), MOE_ERR_NULL, "out");
}
END_TEST

/* ---- shapes and layouts ---------------------------------------------------------- */
START_TEST(shapes_per_granularity)
{
    const int64_t act[2] = {3, 256}, w[3] = {2, 130, 256};
    struct {
        moe_scheme s;
        moe_operand op;
        moe_dtype sdt;
        int ndim;
        int64_t sh[3];
    } rows[] = {
        {MOE_SCHEME_FP8_WTENSOR_ATENSOR, MOE_OPERAND_ACT, MOE_F32, 2, {1, 1}},
        {MOE_SCHEME_FP8_WTENSOR_ATENSOR, MOE_OPERAND_WEIGHT, MOE_F32, 3, {2, 1, 1}},
        {MOE_SCHEME_FP8_WCHANNEL_ATOKEN, MOE_OPERAND_ACT, MOE_F32, 2, {3, 1}},
        {MOE_SCHEME_FP8_WCHANNEL_ATOKEN, MOE_OPERAND_WEIGHT, MOE_F32, 3, {2, 130, 1}},
        {MOE_SCHEME_FP8_WBLOCK128_AGROUP128, MOE_OPERAND_ACT, MOE_F32, 2, {3, 2}},
        {MOE_SCHEME_FP8_WBLOCK128_AGROUP128, MOE_OPERAND_WEIGHT, MOE_F32, 3, {2, 2, 2}},
        {MOE_SCHEME_W4A16_G32, MOE_OPERAND_WEIGHT, MOE_F32, 3, {2, 130, 8}},
        {MOE_SCHEME_W8A16_CHANNEL, MOE_OPERAND_WEIGHT, MOE_F32, 3, {2, 130, 1}},
        {MOE_SCHEME_MXFP8, MOE_OPERAND_ACT, MOE_E8M0, 2, {3, 8}},
        {MOE_SCHEME_MXFP4_MXFP8, MOE_OPERAND_WEIGHT, MOE_E8M0, 3, {2, 130, 8}},
        {MOE_SCHEME_NVFP4, MOE_OPERAND_ACT, MOE_E4M3, 2, {128, 16}},
        {MOE_SCHEME_NVFP4, MOE_OPERAND_WEIGHT, MOE_E4M3, 3, {2, 256, 16}},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        moe_quant_spec sp = spec_of(rows[i].s, rows[i].op);
        moe_quant_dims d;
        int w8 = rows[i].op == MOE_OPERAND_WEIGHT;
        ck_assert_int_eq(moe_quant_shapes(&sp, w8 ? 3 : 2, w8 ? w : act, &d), MOE_OK);
        ck_assert_msg(d.has_scale && d.scale_dtype == rows[i].sdt && d.scale_ndim == rows[i].ndim,
                      "row %zu", i);
        for (int j = 0; j < rows[i].ndim; j++)
            ck_assert_msg(d.scale_shape[j] == rows[i].sh[j], "row %zu dim %d: %lld", i, j,
                          (long long)d.scale_shape[j]);
        ck_assert_int_eq(d.q_dtype, sp.elem);
        ck_assert_int_eq(d.has_global, rows[i].s == MOE_SCHEME_NVFP4);
        if (d.has_global) ck_assert_int_eq(d.global_shape[0], w8 ? 2 : 1);
    }
    moe_quant_spec bf = spec_of(MOE_SCHEME_W4A16_G32, MOE_OPERAND_ACT);
    moe_quant_dims d;
    ck_assert_int_eq(moe_quant_shapes(&bf, 2, act, &d), MOE_OK);
    ck_assert(!d.has_scale && d.q_dtype == MOE_BF16);
    moe_quant_spec ll;
    ck_assert_int_eq(moe_quant_spec_deepep_ll(1, 1, &ll), MOE_OK);
    const int64_t a512[2] = {3, 1024};
    ck_assert_int_eq(moe_quant_shapes(&ll, 2, a512, &d), MOE_OK);
    ck_assert(d.scale_dtype == MOE_I32 && d.scale_shape[0] == 3 && d.scale_shape[1] == 2);
}
END_TEST

/* The 128x4 atom, positions worked out by hand from the formula
 * (((r/128)*ceil(cols/4) + c/4)*32 + r%32)*16 + ((r%128)/32)*4 + c%4. */
START_TEST(swizzle_offsets_by_hand)
{
    static const int64_t t[][4] = {
        {0, 0, 5, 0},      {0, 1, 5, 1},       {0, 3, 5, 3},    {0, 4, 5, 512},
        {1, 0, 5, 16},     {31, 0, 5, 496},    {32, 0, 5, 4},   {33, 0, 5, 20},
        {127, 3, 5, 511},  {128, 0, 5, 1024},  {129, 5, 5, 1553}, {96, 2, 4, 14},
        {200, 7, 8, 1675},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        ck_assert_msg(moe_sf_offset_128x4(t[i][0], t[i][1], t[i][2]) == t[i][3],
                      "(%lld,%lld): %lld", (long long)t[i][0], (long long)t[i][1],
                      (long long)moe_sf_offset_128x4(t[i][0], t[i][1], t[i][2]));
    ck_assert_int_eq(moe_sf_offset_128x4(-1, 0, 4), -1);
    /* the offsets of a padded 256 x 8 matrix are a permutation of 0..2047 */
    static unsigned char seen[2048];
    memset(seen, 0, sizeof seen);
    int bad = 0;
    for (int r = 0; r < 256; r++)
        for (int c = 0; c < 8; c++) {
            int64_t o = moe_sf_offset_128x4(r, c, 8);
            if (o < 0 || o >= 2048 || seen[o]++) bad++;
        }
    ck_assert_int_eq(bad, 0);
}
END_TEST

/* Swizzled NVFP4 scales hold the linear ones at the formula's offsets and
 * zeros in the padding; elements and dequantized values do not change. */
START_TEST(nvfp4_swizzled_matches_linear)
{
    enum { M = 130, K = 80 };
    float *v = malloc(sizeof(float) * M * K);
    moe_rng_fill_normal(v, M * K, 7, moe_rng_stream_id("quant.swz"), 0, 0.0f, 1.0f);
    moe_quant_spec sw = spec_of(MOE_SCHEME_NVFP4, MOE_OPERAND_ACT), li = sw;
    li.layout = MOE_SF_LINEAR;
    qc a, b;
    qc_init(&a, &sw, 2, M, K, 0, v);
    qc_init(&b, &li, 2, M, K, 0, v);
    qc_run(&a, NULL);
    qc_run(&b, NULL);
    ck_assert(a.s.shape[0] == 256 && a.s.shape[1] == 8 && b.s.shape[1] == 5);
    ck_assert_int_eq(memcmp(a.q.data, b.q.data, a.q.nbytes), 0);
    ck_assert_int_eq(memcmp(a.y.data, b.y.data, a.y.nbytes), 0);
    static unsigned char used[256 * 8];
    memset(used, 0, sizeof used);
    int bad = 0;
    for (int r = 0; r < M; r++)
        for (int c = 0; c < 5; c++) {
            int64_t o = moe_sf_offset_128x4(r, c, 5);
            used[o] = 1;
            if (sb(&a, o) != sb(&b, r * 5 + c)) bad++;
        }
    for (int o = 0; o < 256 * 8; o++)
        if (!used[o] && sb(&a, o) != 0) bad++;
    ck_assert_int_eq(bad, 0);
    qc_free(&a);
    qc_free(&b);
    free(v);
}
END_TEST

/* ---- fp8 rules at their edges ------------------------------------------------------ */
#define P140 0x1p-140f /* an f32 subnormal */

/* vLLM dynamic per-tensor: s = amax/448, no floor, q = clamp(x * rcp(s)),
 * clamp fmax(-448, fmin(v, 448)) so NaN -> +448. */
START_TEST(fp8_tensor_rule_edges)
{
    moe_quant_spec sp = spec_of(MOE_SCHEME_FP8_WTENSOR_ATENSOR, MOE_OPERAND_ACT);
    qc c;
    /* amax 0: s = 0, rcp = Inf, 0 * Inf = NaN -> +448; dequant 448 * 0 = 0 */
    qc_init(&c, &sp, 2, 2, 4, 0, NULL);
    qc_run(&c, NULL);
    ck_assert(sf(&c, 0) == 0.0f);
    int bad = 0;
    for (int i = 0; i < 8; i++) bad += qb(&c, i) != 0x7E || yv(&c, i) != 0.0f;
    ck_assert_int_eq(bad, 0);
    qc_free(&c);
    /* subnormal amax 2^-140: s = 2^-140/448 rounds to 2^-149, rcp overflows to
     * Inf; +-2^-140 -> +-448, zeros -> NaN -> +448: dequant 7*2^-143, not 0 */
    float sub[8] = {P140, 0, -P140, 0, 0, 0, 0, 0};
    qc_init(&c, &sp, 2, 2, 4, 0, sub);
    qc_run(&c, NULL);
    ck_assert_uint_eq(tu_bits(sf(&c, 0)), 0x00000001u);
    ck_assert_uint_eq(qb(&c, 0), 0x7E);
    ck_assert_uint_eq(qb(&c, 1), 0x7E);
    ck_assert_uint_eq(qb(&c, 2), 0xFE);
    ck_assert(yv(&c, 1) == 0x1.cp-141f);
    qc_free(&c);
    /* Inf in the tensor: s = Inf, rcp = 0: finite -> +-0, Inf*0 and NaN*0 ->
     * NaN -> +448; every dequantized value is 0*Inf or 448*Inf: NaN or Inf */
    float inf[8] = {1, 2, INFINITY, NAN, -3, 0, 0, 0};
    qc_init(&c, &sp, 2, 2, 4, 0, inf);
    qc_run(&c, NULL);
    ck_assert(isinf(sf(&c, 0)));
    static const uint8_t want_inf[5] = {0x00, 0x00, 0x7E, 0x7E, 0x80};
    for (int i = 0; i < 5; i++) ck_assert_uint_eq(qb(&c, i), want_inf[i]);
    ck_assert(isnan(yv(&c, 0)) && isinf(yv(&c, 2)));
    qc_free(&c);
    /* NaN alone is skipped by the fmaxf amax and becomes +448 */
    float nan[8] = {NAN, 1, -2, 0.5f, 0, 0, 0, 0};
    qc_init(&c, &sp, 2, 2, 4, 0, nan);
    qc_run(&c, NULL);
    ck_assert(sf(&c, 0) == 2.0f / 448.0f);
    static const uint8_t want_nan[4] = {0x7E, 0x76, 0xFE, 0x6E}; /* 448 224 -448 112 */
    for (int i = 0; i < 4; i++) ck_assert_uint_eq(qb(&c, i), want_nan[i]);
    qc_free(&c);
}
END_TEST

/* The clip point of amax-scaled rules: the amax element lands on +-448
 * (never past it) for per-tensor, per-token, 1x128 and 128x128 rules. */
START_TEST(fp8_amax_element_hits_448)
{
    moe_scheme sc[4] = {MOE_SCHEME_FP8_WTENSOR_ATENSOR, MOE_SCHEME_FP8_WCHANNEL_ATOKEN,
                        MOE_SCHEME_FP8_WBLOCK128_AGROUP128, MOE_SCHEME_FP8_WBLOCK128_AGROUP128};
    int bad = 0, runs = 0;
    for (int k = 0; k < 4; k++) {
        moe_quant_spec sp = spec_of(sc[k], k == 3 ? MOE_OPERAND_WEIGHT : MOE_OPERAND_ACT);
        for (int t = 0; t < 100; t++) {
            float v[128];
            moe_rng_fill_uniform(v, 128, 11, (uint64_t)k, (uint64_t)t * 128, -3.0f, 3.0f);
            int imax = 0;
            for (int i = 1; i < 128; i++)
                if (fabsf(v[i]) > fabsf(v[imax])) imax = i;
            qc c;
            if (k == 3) qc_init(&c, &sp, 3, 1, 1, 128, v);
            else qc_init(&c, &sp, 2, 1, 128, 0, v);
            qc_run(&c, NULL);
            bad += (qb(&c, imax) & 0x7F) != 0x7E;
            runs++;
            qc_free(&c);
        }
    }
    ck_assert_int_eq(runs, 400);
    ck_assert_int_eq(bad, 0);
}
END_TEST

/* vLLM per-token: s = fmaxf(amax/448, 1/(448*512)); q = clamp(x / s). */
START_TEST(fp8_token_rule_floor)
{
    moe_quant_spec sp = spec_of(MOE_SCHEME_FP8_WCHANNEL_ATOKEN, MOE_OPERAND_ACT);
    float v[16] = {0, 0, 0, 0,                 /* amax 0 */
                   0x1p-13f, 0, 0, 0,          /* below the floor */
                   INFINITY, 1, NAN, -1,       /* Inf and NaN */
                   P140, 0, -P140, 0};         /* subnormal amax */
    qc c;
    qc_init(&c, &sp, 2, 4, 4, 0, v);
    qc_run(&c, NULL);
    float fl = 1.0f / (448.0f * 512.0f);
    ck_assert(sf(&c, 0) == fl && sf(&c, 1) == fl && sf(&c, 3) == fl);
    ck_assert(isinf(sf(&c, 2)));
    /* 2^-13 / f32(1/229376) = 27.999998 -> e4m3 28 = 0x5E */
    ck_assert_uint_eq(qb(&c, 4), 0x5E);
    ck_assert(yv(&c, 4) == 28.0f * fl);
    static const uint8_t row2[4] = {0x7E, 0x00, 0x7E, 0x80}; /* NaN, 0, NaN, -0 */
    static const uint8_t row3[4] = {0x00, 0x00, 0x80, 0x00}; /* -2^-140/s rounds to -0 */
    int bad = 0;
    for (int i = 0; i < 4; i++) bad += qb(&c, i) != 0 || qb(&c, 12 + i) != row3[i];
    for (int i = 0; i < 4; i++) bad += qb(&c, 8 + i) != row2[i];
    ck_assert_int_eq(bad, 0);
    qc_free(&c);
}
END_TEST

/* vLLM 1x128: amax = fmaxf(1e-10, max|x|); s = amax/448 (UE8M0: 2^ceil(log2
 * max(s, 1e-10))); q = fmin(fmax(x/s, -448), 448): NaN -> -448. */
START_TEST(fp8_group_rule_eps_ue8m0)
{
    float v[512] = {0};
    v[1] = P140;                             /* group 0: subnormal amax */
    v[128] = 3.0f, v[129] = NAN, v[130] = -1.5f; /* group 1 */
    v[256] = 56.0f;                          /* group 2: s = 0.125 exactly */
    v[384] = INFINITY, v[385] = 1.0f;        /* group 3 */
    moe_quant_spec sp = spec_of(MOE_SCHEME_FP8_WBLOCK128_AGROUP128, MOE_OPERAND_ACT);
    for (int ue = 0; ue < 2; ue++) {
        sp.pow2_scale = ue;
        qc c;
        qc_init(&c, &sp, 2, 1, 512, 0, v);
        qc_run(&c, NULL);
        ck_assert(sf(&c, 0) == (ue ? 0x1p-33f : 1e-10f / 448.0f));
        ck_assert(sf(&c, 1) == (ue ? 0x1p-7f : 3.0f / 448.0f));
        ck_assert(sf(&c, 2) == 0.125f);
        ck_assert(isinf(sf(&c, 3)));
        ck_assert_uint_eq(qb(&c, 1), 0x00);
        ck_assert_uint_eq(qb(&c, 128), ue ? 0x7C : 0x7E); /* 384 or 448 */
        ck_assert_uint_eq(qb(&c, 129), 0xFE);             /* NaN -> -448 */
        ck_assert_uint_eq(qb(&c, 130), ue ? 0xF4 : 0xF6); /* -192 or -224 */
        ck_assert_uint_eq(qb(&c, 256), 0x7E);
        ck_assert_uint_eq(qb(&c, 384), 0xFE); /* Inf/Inf = NaN -> -448 */
        ck_assert_uint_eq(qb(&c, 385), 0x00);
        qc_free(&c);
    }
}
END_TEST

/* vLLM tests' 128x128 blocks: a = clamp(amax, min 1e-4) (NaN stays NaN),
 * q = e4m3(x * (448/a)), s = a/448; edge blocks are partial. */
START_TEST(fp8_block_rule_edges)
{
    enum { N = 130, K = 130 };
    float *v = calloc(N * K, sizeof *v);
    v[5] = P140;                                    /* block (0,0) */
    v[0 * K + 128] = 3.0f, v[1 * K + 129] = -1.5f;  /* block (0,1): 2 columns */
    v[128 * K + 0] = NAN, v[128 * K + 1] = 1.0f;    /* block (1,0): 2 rows */
    v[129 * K + 129] = INFINITY, v[128 * K + 128] = 2.0f; /* block (1,1) */
    moe_quant_spec sp = spec_of(MOE_SCHEME_FP8_WBLOCK128_AGROUP128, MOE_OPERAND_WEIGHT);
    qc c;
    qc_init(&c, &sp, 3, 1, N, K, v);
    qc_run(&c, NULL);
    ck_assert(c.s.shape[1] == 2 && c.s.shape[2] == 2);
    ck_assert(sf(&c, 0) == 1e-4f / 448.0f);
    ck_assert(sf(&c, 1) == 3.0f / 448.0f);
    ck_assert_uint_eq(tu_bits(sf(&c, 2)), 0x7FC00000u);
    ck_assert(isinf(sf(&c, 3)));
    ck_assert_uint_eq(qb(&c, 5), 0x00);
    ck_assert_uint_eq(qb(&c, 128), 0x7E);       /* 3 * 149.33333 = 448 */
    ck_assert_uint_eq(qb(&c, K + 129), 0xF6);   /* -224 */
    int bad = 0;
    for (int r = 128; r < 130; r++)
        for (int k = 0; k < 128; k++) bad += qb(&c, r * K + k) != 0x7F; /* NaN block */
    ck_assert_int_eq(bad, 0);
    ck_assert_uint_eq(qb(&c, 128 * K + 128), 0x00);
    ck_assert_uint_eq(qb(&c, 129 * K + 129), 0x7F); /* Inf * 0 */
    ck_assert(isnan(yv(&c, 128 * K + 5)));
    qc_free(&c);
    free(v);
}
END_TEST

/* ---- integer rules ----------------------------------------------------------------- */
/* per_token_quant_int8: a = max(amax, 1e-10), q = i8_RNE(x * (127/a)); ties
 * go to even (the Triton kernel's libdevice.round would go away from zero). */
START_TEST(int8_token_rule)
{
    moe_quant_spec sp = spec_of(MOE_SCHEME_INT8_WCHANNEL_ATOKEN, MOE_OPERAND_ACT);
    float v[12] = {127, -63.5f, 0.5f, 1.5f, 0, 0, 0, 0, INFINITY, 2, NAN, -2};
    qc c;
    qc_init(&c, &sp, 2, 3, 4, 0, v);
    qc_run(&c, NULL);
    ck_assert(sf(&c, 0) == 1.0f && sf(&c, 1) == 1e-10f / 127.0f && isinf(sf(&c, 2)));
    static const int8_t want[12] = {127, -64, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0};
    int bad = 0;
    for (int i = 0; i < 12; i++) bad += (int8_t)qb(&c, i) != want[i];
    ck_assert_int_eq(bad, 0);
    qc_free(&c);
}
END_TEST

/* vLLM quantize_weights, symmetric: s = max(|max/7|, |min/-8|), q =
 * clamp(RNE(x/s), -8, 7); int4 packed low nibble first. */
START_TEST(int4_minmax_rule)
{
    enum { K = 64 };
    float v[3 * K] = {0};
    float r0g0[5] = {7, -2, 2.5f, 3.5f, -0.5f};
    memcpy(v, r0g0, sizeof r0g0);
    v[32] = 1.0f, v[33] = -8.0f;            /* s = max(1/7, 1) = 1 */
    v[K + 32] = NAN, v[K + 33] = 1.0f;      /* row 1: group 0 zeros, group 1 NaN */
    v[2 * K] = INFINITY, v[2 * K + 1] = 3;  /* row 2 group 0 */
    moe_quant_spec sp = spec_of(MOE_SCHEME_W4A16_G32, MOE_OPERAND_WEIGHT);
    qc c;
    qc_init(&c, &sp, 3, 1, 3, K, v);
    qc_run(&c, NULL);
    ck_assert(sf(&c, 0) == 1.0f && sf(&c, 1) == 1.0f && sf(&c, 2) == 0.0f);
    ck_assert(isnan(sf(&c, 3)) && isinf(sf(&c, 4)));
    static const int want[5] = {0x7, 0xE, 0x2, 0x4, 0x0}; /* 7 -2 2 4 -0 */
    for (int i = 0; i < 5; i++) ck_assert_int_eq(nib(&c, 0, i, K), want[i]);
    ck_assert_uint_eq(qb(&c, 0), 0xE7);
    ck_assert_int_eq(nib(&c, 0, 32, K), 0x1);
    ck_assert_int_eq(nib(&c, 0, 33, K), 0x8);
    ck_assert(yv(&c, 33) == -8.0f && yv(&c, 3) == 4.0f);
    int bad = 0;
    for (int k = 0; k < K; k++) bad += nib(&c, 1, k, K) != 0 || nib(&c, 2, k, K) != 0;
    ck_assert_int_eq(bad, 0);
    ck_assert(yv(&c, K) == 0.0f && isnan(yv(&c, K + 40)) && isnan(yv(&c, 2 * K + 1)));
    qc_free(&c);
    /* int8 per channel: uint8b128 range, s = max(|max|/127, |min|/128) */
    moe_quant_spec s8 = spec_of(MOE_SCHEME_W8A16_CHANNEL, MOE_OPERAND_WEIGHT);
    float w[8] = {127, -128, 63.5f, 0, 1, 2, 3, 4};
    qc_init(&c, &s8, 3, 1, 2, 4, w);
    qc_run(&c, NULL);
    ck_assert(sf(&c, 0) == 1.0f && sf(&c, 1) == 4.0f / 127.0f);
    static const int8_t w8[8] = {127, -128, 64, 0, 32, 64, 95, 127};
    for (int i = 0; i < 8; i++) ck_assert_int_eq((int8_t)qb(&c, i), w8[i]);
    qc_free(&c);
}
END_TEST

/* ---- MX ------------------------------------------------------------------------------ */
/* E4M3 blocks of 32 under both rules. Block 1's amax 1.875 has mantissa
 * 1.875 > 1.75: ocp_floor picks 2^-8 and clips 480 to 448; ceil_pow2 picks
 * 2^-7 and stores 240 exactly. */
START_TEST(mx_e4m3_rules_edges)
{
    float v[128] = {0};
    v[1] = P140;                           /* block 0: subnormal amax */
    v[32] = 1.875f, v[33] = 0.5f;          /* block 1: above the clip point */
    v[64] = INFINITY, v[65] = 1.0f;        /* block 2 */
    v[96] = -NAN, v[97] = 1.0f;            /* block 3 */
    moe_quant_spec sp = spec_of(MOE_SCHEME_MXFP8, MOE_OPERAND_ACT);
    for (int ocp = 0; ocp < 2; ocp++) {
        sp.rule = ocp ? MOE_RULE_MX_OCP_FLOOR : MOE_RULE_MX_CEIL_POW2;
        qc c;
        qc_init(&c, &sp, 2, 1, 128, 0, v);
        qc_run(&c, NULL);
        ck_assert_uint_eq(sb(&c, 0), 0x00); /* 2^-127: exponent clamped */
        ck_assert_uint_eq(sb(&c, 1), ocp ? 119 : 120);
        ck_assert_uint_eq(sb(&c, 2), 0xFF);
        ck_assert_uint_eq(sb(&c, 3), 0xFF);
        ck_assert_uint_eq(qb(&c, 1), 0x00);
        ck_assert_uint_eq(qb(&c, 32), ocp ? 0x7E : 0x77); /* 448 (clipped) or 240 */
        ck_assert(yv(&c, 32) == (ocp ? 1.75f : 1.875f));
        ck_assert_uint_eq(qb(&c, 33), ocp ? 0x70 : 0x68); /* 128 or 64 */
        ck_assert(yv(&c, 33) == 0.5f);
        int bad = 0;
        for (int i = 64; i < 96; i++) bad += qb(&c, i) != 0x7F || !isnan(yv(&c, i));
        ck_assert_int_eq(bad, 0);
        ck_assert_uint_eq(qb(&c, 96), 0xFF); /* the input NaN keeps its sign */
        ck_assert_uint_eq(qb(&c, 97), 0x7F);
        qc_free(&c);
    }
}
END_TEST

/* E2M1 blocks: amax 1.75 has mantissa 1.75 > 1.5: ocp_floor picks 2^-2 and
 * clips 7 to 6 (1.5); ceil_pow2 picks 2^-1: 3.5 ties to 4 (2.0). */
START_TEST(mx_e2m1_rules_edges)
{
    float v[64] = {0};
    v[0] = 1.75f, v[1] = 0.5f, v[2] = -1.5f;
    v[32] = INFINITY, v[33] = 1.0f;
    moe_quant_spec sp = spec_of(MOE_SCHEME_MXFP4_W4A16, MOE_OPERAND_WEIGHT);
    for (int ocp = 0; ocp < 2; ocp++) {
        sp.rule = ocp ? MOE_RULE_MX_OCP_FLOOR : MOE_RULE_MX_CEIL_POW2;
        qc c;
        qc_init(&c, &sp, 3, 1, 1, 64, v);
        qc_run(&c, NULL);
        ck_assert_uint_eq(sb(&c, 0), ocp ? 125 : 126);
        ck_assert_uint_eq(sb(&c, 1), 0xFF);
        ck_assert_int_eq(nib(&c, 0, 0, 64), ocp ? 0x7 : 0x6);
        ck_assert(yv(&c, 0) == (ocp ? 1.5f : 2.0f));
        ck_assert_int_eq(nib(&c, 0, 1, 64), ocp ? 0x4 : 0x2); /* 2.0 or 1.0 */
        ck_assert_int_eq(nib(&c, 0, 2, 64), ocp ? 0xF : 0xD); /* -6 or -3 */
        ck_assert(yv(&c, 1) == 0.5f && yv(&c, 2) == -1.5f);
        int bad = 0;
        for (int k = 32; k < 64; k++) bad += nib(&c, 0, k, 64) != 0x7 || !isnan(yv(&c, k));
        ck_assert_int_eq(bad, 0); /* NaN scale: elements NaN -> +6 (ONNX), dequant NaN */
        qc_free(&c);
    }
    /* amax 0 under both rules: scale code 0 (2^-127), codes 0 */
    float z[32] = {0};
    for (int ocp = 0; ocp < 2; ocp++) {
        sp.rule = ocp ? MOE_RULE_MX_OCP_FLOOR : MOE_RULE_MX_CEIL_POW2;
        qc c;
        qc_init(&c, &sp, 3, 1, 1, 32, z);
        qc_run(&c, NULL);
        ck_assert_uint_eq(sb(&c, 0), 0x00);
        ck_assert_uint_eq(qb(&c, 0), 0x00);
        ck_assert(yv(&c, 31) == 0.0f);
        qc_free(&c);
    }
}
END_TEST

/* ---- NVFP4 --------------------------------------------------------------------------- */
START_TEST(nvfp4_with_global_scale)
{
    moe_quant_spec sp = spec_of(MOE_SCHEME_NVFP4, MOE_OPERAND_ACT);
    sp.layout = MOE_SF_LINEAR;
    float v[32] = {6, 3, 1.5f, -0.5f};
    v[16] = 0.75f, v[17] = -0.25f;
    qc c;
    qc_init(&c, &sp, 2, 1, 32, 0, v);
    qc_run(&c, NULL);
    /* gs = 2688/6 = 448; block 0: sf = e4m3(448 * (6*rcp(6))) = 448, out = 1 */
    ck_assert(((float *)c.g.data)[0] == 448.0f);
    ck_assert_uint_eq(sb(&c, 0), 0x7E);
    static const int want0[4] = {0x7, 0x5, 0x3, 0x9};
    for (int i = 0; i < 4; i++) ck_assert_int_eq(nib(&c, 0, i, 32), want0[i]);
    /* block 1: sf = 448 * 0.125 = 56 (0x66), out = rcp(56 * rcp(448)) = 8 */
    ck_assert_uint_eq(sb(&c, 1), 0x66);
    ck_assert_int_eq(nib(&c, 0, 16, 32), 0x7);
    ck_assert_int_eq(nib(&c, 0, 17, 32), 0xC);
    int bad = 0;
    for (int i = 0; i < 32; i++) bad += yv(&c, i) != v[i];
    ck_assert_int_eq(bad, 0);
    /* the same with the global scale given statically */
    moe_tensor gs;
    int64_t one = 1;
    ck_assert_int_eq(moe_tensor_alloc(&gs, MOE_F32, 1, &one), MOE_OK);
    ((float *)gs.data)[0] = 448.0f;
    uint8_t q0[16];
    memcpy(q0, c.q.data, 16);
    memset(c.q.data, 0xAA, c.q.nbytes);
    qc_run(&c, &gs);
    ck_assert_int_eq(memcmp(q0, c.q.data, 16), 0);
    ck_assert(((float *)c.g.data)[0] == 448.0f);
    moe_tensor_free(&gs);
    qc_free(&c);
    /* amax 0: gs = 2688/1e-12, sf = 0, out = rcp0(0) = 0, dequant 0 */
    float z[16] = {0};
    qc_init(&c, &sp, 2, 1, 16, 0, z);
    qc_run(&c, NULL);
    ck_assert(((float *)c.g.data)[0] == 2688.0f / 1e-12f);
    ck_assert_uint_eq(sb(&c, 0), 0x00);
    ck_assert(qb(&c, 0) == 0 && yv(&c, 0) == 0.0f);
    qc_free(&c);
    /* NaN anywhere: gs NaN, every sf NaN, codes +6, dequant NaN */
    float n[16] = {NAN, 1};
    qc_init(&c, &sp, 2, 1, 16, 0, n);
    qc_run(&c, NULL);
    ck_assert(isnan(((float *)c.g.data)[0]));
    ck_assert_uint_eq(sb(&c, 0), 0x7F);
    ck_assert(nib(&c, 0, 0, 16) == 0x7 && nib(&c, 0, 1, 16) == 0x7 && isnan(yv(&c, 1)));
    qc_free(&c);
}
END_TEST

START_TEST(nvfp4_without_global_scale)
{
    moe_quant_spec sp = spec_of(MOE_SCHEME_NVFP4, MOE_OPERAND_ACT);
    sp.layout = MOE_SF_LINEAR;
    sp.use_global_scale = 0;
    sp.static_ok = 0;
    float v[80] = {6, 3, 1.5f, -0.5f};
    v[16] = 12, v[17] = -3;       /* sf = 2, out = 0.5 */
    v[32] = 6.375f;               /* sf = 1.0625 ties to 1.0: 6.375 clips to 6 */
    v[48] = NAN, v[49] = 1;       /* NaN block */
    v[64] = INFINITY, v[65] = 1;  /* Inf block: sf saturates to 448 */
    qc c;
    qc_init(&c, &sp, 2, 1, 80, 0, v);
    qc_run(&c, NULL);
    ck_assert_ptr_null(c.g.data);
    static const uint8_t sfw[5] = {0x38, 0x40, 0x38, 0x7F, 0x7E};
    for (int i = 0; i < 5; i++) ck_assert_uint_eq(sb(&c, i), sfw[i]);
    ck_assert(nib(&c, 0, 0, 80) == 0x7 && nib(&c, 0, 3, 80) == 0x9);
    ck_assert(nib(&c, 0, 16, 80) == 0x7 && nib(&c, 0, 17, 80) == 0xB);
    ck_assert(nib(&c, 0, 32, 80) == 0x7 && yv(&c, 32) == 6.0f);
    ck_assert(nib(&c, 0, 48, 80) == 0x7 && nib(&c, 0, 49, 80) == 0x7 && isnan(yv(&c, 49)));
    ck_assert(nib(&c, 0, 64, 80) == 0x7 && nib(&c, 0, 65, 80) == 0x0);
    ck_assert(yv(&c, 64) == 2688.0f && yv(&c, 16) == 12.0f && yv(&c, 17) == -3.0f);
    qc_free(&c);
}
END_TEST

/* Weight-only groupwise int4 and int8, g = 32/64/128: the int4 specs are
 * the w4a16 schemes'; each element round-trips within half a step. */
START_TEST(int_groupwise_specs)
{
    for (int bits = 4; bits <= 8; bits += 4)
        for (int g = 32; g <= 128; g *= 2) {
            moe_quant_spec sp;
            moe_dtype dt = bits == 4 ? MOE_I4 : MOE_I8;
            ck_assert_int_eq(moe_quant_spec_int_groupwise(dt, g, &sp), MOE_OK);
            ck_assert_int_eq(moe_quant_spec_check(&sp), MOE_OK);
            if (bits == 4) {
                moe_quant_spec w;
                moe_scheme_spec(g == 32 ? MOE_SCHEME_W4A16_G32 : g == 64 ? MOE_SCHEME_W4A16_G64 : MOE_SCHEME_W4A16_G128,
                                MOE_OPERAND_WEIGHT, &w);
                ck_assert_int_eq(memcmp(&w, &sp, sizeof w), 0);
            }
            moe_tensor x, q, s, gl, back;
            int64_t sh[3] = {2, 3, 256};
            moe_tensor_alloc(&x, MOE_F32, 3, sh);
            moe_tensor_alloc(&back, MOE_F32, 3, sh);
            moe_rng_fill_normal(x.data, 2 * 3 * 256, 4, (uint64_t)(bits * 1000 + g), 0, 0.0f, 1.0f);
            ck_assert_int_eq(moe_quant_alloc(&sp, 3, sh, &q, &s, &gl), MOE_OK);
            ck_assert_int_eq(moe_ref_quantize(&sp, &x, NULL, &q, &s, NULL), MOE_OK);
            ck_assert_int_eq(moe_ref_dequantize(&sp, &q, &s, NULL, &back), MOE_OK);
            int bad = 0;
            for (int i = 0; i < 2 * 3 * 256; i++) {
                float sc = ((float *)s.data)[i / g];
                float d = ((float *)x.data)[i] - ((float *)back.data)[i];
                bad += !(d <= 0.5f * sc * 1.0001f && -d <= 0.5f * sc * 1.0001f);
            }
            ck_assert_msg(bad == 0, "int%d g%d: %d elements beyond half a step", bits, g, bad);
            moe_tensor_free(&x), moe_tensor_free(&q), moe_tensor_free(&s), moe_tensor_free(&gl), moe_tensor_free(&back);
        }
    moe_quant_spec sp;
    ck_assert_int_eq(moe_quant_spec_int_groupwise(MOE_E4M3, 32, &sp), MOE_ERR_DTYPE);
    ck_assert_int_eq(moe_quant_spec_int_groupwise(MOE_I8, 16, &sp), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "group 16"));
}
END_TEST

/* ---- DeepEP low-latency FP8 cast ------------------------------------------------------ */
START_TEST(deepep_ll_cast)
{
    moe_quant_spec sp;
    ck_assert_int_eq(moe_quant_spec_deepep_ll(0, 0, &sp), MOE_OK);
    float v[512] = {0};
    v[0] = 2, v[1] = 1, v[2] = -2, v[3] = NAN; /* group 0; group 1 zeros */
    qc c;
    qc_init(&c, &sp, 2, 1, 256, 0, v);
    qc_run(&c, NULL);
    /* scale_inv = amax * kFinfoAmaxInvE4M3 (= 1/448.0f), scale = 448/amax.
     * The decimal 0.0022321428f (as the anchor prints it) is one ULP lower. */
    ck_assert_uint_eq(tu_bits(1.0f / 448.0f) - tu_bits(0.0022321428f), 1);
    ck_assert_uint_eq(tu_bits(sf(&c, 0)), tu_bits(2.0f * (1.0f / 448.0f)));
    ck_assert(sf(&c, 1) == 1e-4f * (1.0f / 448.0f));
    static const uint8_t w0[4] = {0x7E, 0x76, 0xFE, 0x7F};
    for (int i = 0; i < 4; i++) ck_assert_uint_eq(qb(&c, i), w0[i]);
    ck_assert_uint_eq(qb(&c, 128), 0);
    qc_free(&c);
    /* round_scale: e = ceil(log2(amax * rcp448)) from the bits */
    ck_assert_int_eq(moe_quant_spec_deepep_ll(1, 0, &sp), MOE_OK);
    float r[384] = {2, 1};
    r[128] = 14.0f;                  /* 14 * rcp448 = 2^-5 exactly: e = -5 */
    r[256] = INFINITY, r[257] = 1.0f;
    qc_init(&c, &sp, 2, 1, 384, 0, r);
    qc_run(&c, NULL);
    ck_assert(sf(&c, 0) == 0x1p-7f && sf(&c, 1) == 0x1p-5f && isinf(sf(&c, 2)));
    ck_assert(qb(&c, 0) == 0x78 && qb(&c, 1) == 0x70 && qb(&c, 128) == 0x7E);
    /* an Inf amax: DeepEP's wrap-around bit formula gives scale = -Inf, so
     * finite elements saturate with their sign flipped and 0 * -Inf is NaN */
    ck_assert(qb(&c, 256) == 0xFE && qb(&c, 257) == 0xFE && qb(&c, 258) == 0x7F);
    qc_free(&c);
    /* UE8M0: exponent bytes 120 121 118 105 packed into one int32 */
    float u[512] = {0};
    u[0] = 2, u[128] = 4, u[256] = 0.5f;
    moe_quant_spec pk;
    ck_assert_int_eq(moe_quant_spec_deepep_ll(1, 1, &pk), MOE_OK);
    qc_init(&c, &pk, 2, 1, 512, 0, u);
    qc_run(&c, NULL);
    ck_assert_int_eq(c.s.dtype, MOE_I32);
    ck_assert_uint_eq(((uint32_t *)c.s.data)[0], 0x69767978u);
    qc f;
    qc_init(&f, &sp, 2, 1, 512, 0, u);
    qc_run(&f, NULL);
    ck_assert_int_eq(memcmp(c.q.data, f.q.data, 512), 0);
    ck_assert_int_eq(memcmp(c.y.data, f.y.data, 512 * 4), 0);
    qc_free(&f);
    qc_free(&c);
    expect_err(moe_quant_spec_deepep_ll(0, 1, &sp), MOE_ERR_INVALID_ARG, "ue8m0");
    int64_t sh[2] = {1, 384};
    moe_quant_dims d;
    expect_err(moe_quant_shapes(&pk, 2, sh, &d), MOE_ERR_SHAPE, "UE8M0 packing");
    moe_quant_spec w = pk;
    w.operand = MOE_OPERAND_WEIGHT;
    expect_err(moe_quant_spec_check(&w), MOE_ERR_UNSUPPORTED, "spec.operand");
}
END_TEST

/* ---- static scales --------------------------------------------------------------------- */
START_TEST(static_scales)
{
    moe_quant_spec sp = spec_of(MOE_SCHEME_FP8_WTENSOR_ATENSOR, MOE_OPERAND_ACT);
    float v[4] = {1, 300, -0.25f, NAN};
    qc c;
    qc_init(&c, &sp, 2, 1, 4, 0, v);
    moe_tensor st;
    int64_t sh[3] = {1, 1, 1};
    ck_assert_int_eq(moe_tensor_alloc(&st, MOE_F32, 2, sh), MOE_OK);
    ((float *)st.data)[0] = 0.5f;
    qc_run(&c, &st); /* q = clamp(x / 0.5) */
    static const uint8_t w[4] = {0x40, 0x7E, 0xB0, 0x7E};
    for (int i = 0; i < 4; i++) ck_assert_uint_eq(qb(&c, i), w[i]);
    ck_assert(sf(&c, 0) == 0.5f && yv(&c, 0) == 1.0f && yv(&c, 1) == 224.0f);
    ((float *)st.data)[0] = -1.0f;
    expect_err(moe_ref_quantize(&sp, &c.x, &st, &c.q, &c.s, NULL), MOE_ERR_INVALID_ARG,
               "static_scale[0]");
    ((float *)st.data)[0] = INFINITY;
    expect_err(moe_ref_quantize(&sp, &c.x, &st, &c.q, &c.s, NULL), MOE_ERR_INVALID_ARG,
               "static_scale[0]");
    moe_tensor_free(&st);
    ck_assert_int_eq(moe_tensor_alloc(&st, MOE_F32, 1, sh), MOE_OK);
    expect_err(moe_ref_quantize(&sp, &c.x, &st, &c.q, &c.s, NULL), MOE_ERR_SHAPE, "static_scale");
    moe_tensor_free(&st);
    qc_free(&c);
    /* block weights with a static scale per tile */
    moe_quant_spec bs = spec_of(MOE_SCHEME_FP8_WBLOCK128_AGROUP128, MOE_OPERAND_WEIGHT);
    float wv[4] = {1, -2, 4, 1000};
    qc_init(&c, &bs, 3, 1, 2, 2, wv);
    ck_assert_int_eq(moe_tensor_alloc(&st, MOE_F32, 3, sh), MOE_OK);
    ((float *)st.data)[0] = 2.0f;
    qc_run(&c, &st);
    ck_assert(yv(&c, 0) == 1.0f && yv(&c, 1) == -2.0f && yv(&c, 2) == 4.0f && yv(&c, 3) == 896.0f);
    moe_tensor_free(&st);
    qc_free(&c);
    /* MX scales are always computed */
    moe_quant_spec mx = spec_of(MOE_SCHEME_MXFP8, MOE_OPERAND_ACT);
    qc_init(&c, &mx, 2, 1, 32, 0, NULL);
    int64_t s2[2] = {1, 1};
    ck_assert_int_eq(moe_tensor_alloc(&st, MOE_F32, 2, s2), MOE_OK);
    ((float *)st.data)[0] = 1.0f;
    expect_err(moe_ref_quantize(&mx, &c.x, &st, &c.q, &c.s, NULL), MOE_ERR_UNSUPPORTED,
               "static_scale");
    moe_tensor_free(&st);
    qc_free(&c);
}
END_TEST

/* ---- seeded round trips: error within half an ULP of the element format
 * times the scale, for every scheme and both operands --------------------- */
static double half_ulp(moe_dtype d, double y)
{
    double a = fabs(y);
    int e;
    switch (d) {
    case MOE_E4M3:
        if (a < 0x1p-6) return 0x1p-10;
        frexp(a, &e);
        return ldexp(1.0, e - 1 - 4);
    case MOE_E2M1: return a < 2.0 ? 0.25 : a < 4.0 ? 0.5 : 1.0;
    case MOE_BF16:
        if (a < 0x1p-126) return 0x1p-134;
        frexp(a, &e);
        return ldexp(1.0, e - 1 - 8);
    case MOE_F16:
        if (a < 0x1p-14) return 0x1p-25;
        frexp(a, &e);
        return ldexp(1.0, e - 1 - 11);
    case MOE_F32: return 0.0;
    default: return 0.5; /* integers */
    }
}

/* Writes the code of 1.0 everywhere, so dequantizing gives each element's
 * dequant multiplier. */
static void fill_ones(moe_tensor *q)
{
    uint8_t one = q->dtype == MOE_E4M3 ? 0x38 : q->dtype == MOE_E2M1 ? 0x22
                  : q->dtype == MOE_I4 ? 0x11 : 0x01;
    memset(q->data, one, q->nbytes);
}

typedef struct {
    long checked, bad, clipped;
    char first[200];
} rt_result;

static void round_trip(const moe_quant_spec *sp, uint64_t seed, rt_result *res)
{
    int w8 = sp->operand == MOE_OPERAND_WEIGHT;
    int64_t K = sp->rule == MOE_RULE_DEEPEP_LL ? 512 : 256;
    int64_t sh[3] = {w8 ? 3 : 7, w8 ? 130 : K, K};
    int nd = w8 ? 3 : 2;
    qc c;
    qc_init(&c, sp, nd, sh[0], sh[1], sh[2], NULL);
    int64_t n = moe_tensor_numel(&c.x);
    float *x = (float *)c.x.data;
    moe_rng_fill_normal(x, (size_t)n, seed, moe_rng_stream_id("quant.rt"), 0, 0.0f,
                        w8 ? 1.0f / 15.0f : 1.0f);
    qc_run(&c, NULL);
    float *d = NULL;
    if (sp->gran != MOE_GRAN_NONE) { /* per-element dequant multiplier */
        moe_tensor ones, dm;
        ck_assert_int_eq(moe_tensor_alloc(&ones, c.q.dtype, nd, c.q.shape), MOE_OK);
        ck_assert_int_eq(moe_tensor_alloc(&dm, MOE_F32, nd, c.q.shape), MOE_OK);
        fill_ones(&ones);
        ck_assert_int_eq(moe_ref_dequantize(sp, &ones, &c.s, c.g.data ? &c.g : NULL, &dm),
                         MOE_OK);
        d = malloc(sizeof(float) * (size_t)(n ? n : 1));
        memcpy(d, dm.data, sizeof(float) * (size_t)n);
        moe_tensor_free(&ones);
        moe_tensor_free(&dm);
    }
    double top = sp->rule == MOE_RULE_INT_MINMAX ? -sp->qmin : sp->qmax;
    for (int64_t i = 0; i < n; i++) {
        double xv = x[i], y = yv(&c, i), err = fabs(xv - y), allowed;
        res->checked++;
        if (!isfinite(y)) {
            allowed = -1.0;
        } else if (!d) {
            allowed = half_ulp(sp->elem, xv);
        } else {
            double m = d[i], t = xv / m;
            if (fabs(t) > top * (1.0 + 0x1p-20)) { /* saturated: the clip point */
                res->clipped++;
                allowed = fabs(xv) - top * m + 0x1p-22 * fabs(xv);
            } else {
                allowed = (half_ulp(sp->elem, t) + 0x1p-21 * fabs(t)) * m + 0x1p-23 * fabs(y);
            }
        }
        if (!(err <= allowed)) {
            if (!res->bad)
                snprintf(res->first, sizeof res->first,
                         "%s %s i=%lld x=%a deq=%a mult=%a", moe_scale_rule_name(sp->rule),
                         w8 ? "weight" : "act", (long long)i, xv, y, d ? (double)d[i] : 1.0);
            res->bad++;
        }
    }
    free(d);
    qc_free(&c);
}

START_TEST(round_trip_every_scheme)
{
    rt_result total = {0, 0, 0, ""};
    for (int s = 0; s < MOE_SCHEME_COUNT; s++)
        for (int op = 0; op < 2; op++) {
            moe_quant_spec sp = spec_of((moe_scheme)s, (moe_operand)op);
            rt_result r = {0, 0, 0, ""};
            round_trip(&sp, 100 + (uint64_t)s, &r);
            ck_assert_msg(r.checked > 1000, "%s", moe_scheme_name((moe_scheme)s));
            /* NVFP4 clips where the E4M3 block scale rounds down (up to 6 * 17/16) */
            if (sp.rule != MOE_RULE_NVFP4)
                ck_assert_msg(r.clipped == 0, "%s op %d: %ld clipped",
                              moe_scheme_name((moe_scheme)s), op, r.clipped);
            total.checked += r.checked;
            if (r.bad && !total.bad) memcpy(total.first, r.first, sizeof r.first);
            total.bad += r.bad;
        }
    /* variants: 1x128 with UE8M0, OCP-floor MX (clips by design), DeepEP-LL */
    moe_quant_spec v[6];
    v[0] = spec_of(MOE_SCHEME_FP8_WBLOCK128_AGROUP128, MOE_OPERAND_ACT);
    v[0].pow2_scale = 1;
    v[1] = spec_of(MOE_SCHEME_MXFP8, MOE_OPERAND_ACT);
    v[1].rule = MOE_RULE_MX_OCP_FLOOR;
    v[2] = spec_of(MOE_SCHEME_MXFP4_W4A16, MOE_OPERAND_WEIGHT);
    v[2].rule = MOE_RULE_MX_OCP_FLOOR;
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(moe_quant_spec_deepep_ll(i > 0, i > 1, &v[3 + i]), MOE_OK);
    for (int i = 0; i < 6; i++) {
        rt_result r = {0, 0, 0, ""};
        round_trip(&v[i], 900 + (uint64_t)i, &r);
        if (i == 1 || i == 2) ck_assert_msg(r.clipped > 0, "ocp_floor variant %d never clipped", i);
        else ck_assert_int_eq(r.clipped, 0);
        total.checked += r.checked;
        if (r.bad && !total.bad) memcpy(total.first, r.first, sizeof r.first);
        total.bad += r.bad;
    }
    ck_assert_msg(total.bad == 0, "%ld of %ld elements outside the bound; first: %s", total.bad,
                  total.checked, total.first);
}
END_TEST

/* M = 0 and E = 0 are valid, empty problems for every scheme. */
START_TEST(empty_problems)
{
    for (int s = 0; s < MOE_SCHEME_COUNT; s++)
        for (int op = 0; op < 2; op++) {
            moe_quant_spec sp = spec_of((moe_scheme)s, (moe_operand)op);
            qc c;
            if (op == MOE_OPERAND_ACT) qc_init(&c, &sp, 2, 0, 256, 0, NULL);
            else qc_init(&c, &sp, 3, 0, 64, 256, NULL);
            qc_run(&c, NULL);
            if (s == MOE_SCHEME_FP8_WTENSOR_ATENSOR && op == MOE_OPERAND_ACT)
                ck_assert(sf(&c, 0) == 0.0f); /* amax over nothing */
            qc_free(&c);
        }
}
END_TEST

/* ---- pinned bits ---------------------------------------------------------------------- */
/* FNV-1a over q, scales, global scales and dequantized values (NaN by class)
 * for every scheme, both operands and the rule variants, on seeded inputs
 * with tiny values, an Inf, a NaN and a -0. The same under gcc and clang at
 * -O0/-O2/-O3; if it changes, every quantized golden vector changes. */
static uint64_t fnv = 0xCBF29CE484222325ull;
static void fnv_eat(const void *p, size_t n)
{
    const uint8_t *b = (const uint8_t *)p;
    for (size_t i = 0; i < n; i++) {
        fnv ^= b[i];
        fnv *= 0x100000001B3ull;
    }
}

static void digest_one(const moe_quant_spec *sp, uint64_t seed)
{
    int w8 = sp->operand == MOE_OPERAND_WEIGHT;
    int64_t K = sp->rule == MOE_RULE_DEEPEP_LL ? 512 : 256;
    qc c;
    qc_init(&c, sp, w8 ? 3 : 2, w8 ? 2 : 5, w8 ? 130 : K, K, NULL);
    float *v = (float *)c.x.data;
    int64_t n = moe_tensor_numel(&c.x);
    moe_rng_fill_normal(v, (size_t)n, seed, 1, 0, 0.0f, w8 ? 0.07f : 1.0f);
    for (int64_t i = 0; i < n; i += 97) v[i] *= 1e-30f;
    v[3] = INFINITY, v[200] = NAN, v[n - 1] = -0.0f;
    qc_run(&c, NULL);
    fnv_eat(c.q.data, c.q.nbytes);
    if (c.s.data) fnv_eat(c.s.data, c.s.nbytes);
    if (c.g.data) fnv_eat(c.g.data, c.g.nbytes);
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = isnan(yv(&c, i)) ? 0x7FC00000u : tu_bits(yv(&c, i));
        fnv_eat(&u, 4);
    }
    qc_free(&c);
}

START_TEST(bits_are_pinned)
{
    fnv = 0xCBF29CE484222325ull;
    for (int s = 0; s < MOE_SCHEME_COUNT; s++)
        for (int op = 0; op < 2; op++) {
            moe_quant_spec sp = spec_of((moe_scheme)s, (moe_operand)op);
            digest_one(&sp, 40 + (uint64_t)s);
        }
    moe_quant_spec sp;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(moe_quant_spec_deepep_ll(i > 0, i > 1, &sp), MOE_OK);
        digest_one(&sp, 90 + (uint64_t)i);
    }
    sp = spec_of(MOE_SCHEME_MXFP4_MXFP8, MOE_OPERAND_WEIGHT);
    sp.rule = MOE_RULE_MX_OCP_FLOOR;
    digest_one(&sp, 95);
    sp = spec_of(MOE_SCHEME_FP8_WBLOCK128_AGROUP128, MOE_OPERAND_ACT);
    sp.pow2_scale = 1;
    digest_one(&sp, 96);
    ck_assert_msg(fnv == 0xD0F0A48F83BFBFBCull, "digest %016llX", (unsigned long long)fnv);
}
END_TEST

/* ---- every error path names its argument ------------------------------------------------- */
START_TEST(quantize_errors)
{
    moe_quant_spec sp = spec_of(MOE_SCHEME_FP8_WBLOCK128_AGROUP128, MOE_OPERAND_ACT);
    qc c;
    qc_init(&c, &sp, 2, 2, 256, 0, NULL);
    expect_err(moe_ref_quantize(NULL, &c.x, NULL, &c.q, &c.s, NULL), MOE_ERR_NULL, "spec");
    expect_err(moe_ref_quantize(&sp, NULL, NULL, &c.q, &c.s, NULL), MOE_ERR_NULL, "x");
    expect_err(moe_ref_quantize(&sp, &c.x, NULL, NULL, &c.s, NULL), MOE_ERR_NULL, "q_out");
    expect_err(moe_ref_quantize(&sp, &c.x, NULL, &c.q, NULL, NULL), MOE_ERR_NULL, "scale_out");
    expect_err(moe_ref_quantize(&sp, &c.x, NULL, &c.q, &c.s, &c.x), MOE_ERR_INVALID_ARG,
               "global_scale_out");
    expect_err(moe_ref_quantize(&sp, &c.q, NULL, &c.q, &c.s, NULL), MOE_ERR_DTYPE, "x: dtype");
    expect_err(moe_ref_quantize(&sp, &c.x, NULL, &c.x, &c.s, NULL), MOE_ERR_DTYPE, "q_out");
    expect_err(moe_ref_quantize(&sp, &c.x, NULL, &c.q, &c.x, NULL), MOE_ERR_SHAPE, "scale_out");
    /* K not a multiple of 128 */
    moe_tensor x100, q100;
    int64_t sh[3] = {2, 100, 100};
    ck_assert_int_eq(moe_tensor_alloc(&x100, MOE_F32, 2, sh), MOE_OK);
    ck_assert_int_eq(moe_tensor_alloc(&q100, MOE_E4M3, 2, sh), MOE_OK);
    expect_err(moe_ref_quantize(&sp, &x100, NULL, &q100, &c.s, NULL), MOE_ERR_SHAPE,
               "k_divisible");
    ck_assert(strstr(moe_last_error(), "x: K = 100"));
    /* q of the wrong shape */
    expect_err(moe_ref_quantize(&sp, &c.x, NULL, &q100, &c.s, NULL), MOE_ERR_SHAPE, "q_out");
    moe_tensor_free(&q100);
    /* weights are 3-D, activations 2-D */
    moe_quant_spec ws = spec_of(MOE_SCHEME_FP8_WBLOCK128_AGROUP128, MOE_OPERAND_WEIGHT);
    expect_err(moe_ref_quantize(&ws, &c.x, NULL, &c.q, &c.s, NULL), MOE_ERR_SHAPE, "x: rank 2");
    /* partial 128 x 128 tiles are zero padding by default; k_divisible refuses them */
    int64_t w3[3] = {1, 130, 256};
    moe_quant_dims dd;
    ck_assert_int_eq(moe_quant_shapes(&ws, 3, w3, &dd), MOE_OK);
    ws.k_divisible = 1;
    expect_err(moe_quant_shapes(&ws, 3, w3, &dd), MOE_ERR_SHAPE, "128 x 128 block");
    /* a device tensor */
    moe_tensor dev;
    moe_device cuda = {MOE_DEVICE_CUDA, 0};
    ck_assert_int_eq(moe_tensor_wrap(&dev, MOE_F32, 2, c.x.shape, c.x.data, c.x.nbytes, cuda),
                     MOE_OK);
    expect_err(moe_ref_quantize(&sp, &dev, NULL, &c.q, &c.s, NULL), MOE_ERR_UNSUPPORTED, "x:");
    moe_tensor_free(&x100);
    /* a scale for a spec without one */
    moe_quant_spec bf = spec_of(MOE_SCHEME_BF16, MOE_OPERAND_ACT);
    moe_tensor qb16;
    ck_assert_int_eq(moe_tensor_alloc(&qb16, MOE_BF16, 2, c.x.shape), MOE_OK);
    ck_assert_int_eq(moe_ref_quantize(&bf, &c.x, NULL, &qb16, NULL, NULL), MOE_OK);
    expect_err(moe_ref_quantize(&bf, &c.x, NULL, &qb16, &c.s, NULL), MOE_ERR_INVALID_ARG,
               "scale_out: the spec has no scale");
    expect_err(moe_ref_quantize(&bf, &c.x, &c.s, &qb16, NULL, NULL), MOE_ERR_UNSUPPORTED,
               "static_scale");
    moe_tensor_free(&qb16);
    qc_free(&c);
    /* NVFP4 global scale of the wrong shape */
    moe_quant_spec nv = spec_of(MOE_SCHEME_NVFP4, MOE_OPERAND_WEIGHT);
    qc_init(&c, &nv, 3, 2, 16, 32, NULL);
    moe_tensor g1;
    int64_t one = 1;
    ck_assert_int_eq(moe_tensor_alloc(&g1, MOE_F32, 1, &one), MOE_OK);
    expect_err(moe_ref_quantize(&nv, &c.x, NULL, &c.q, &c.s, &g1), MOE_ERR_SHAPE,
               "global_scale_out");
    expect_err(moe_ref_quantize(&nv, &c.x, &g1, &c.q, &c.s, NULL), MOE_ERR_SHAPE, "static_scale");
    ck_assert_int_eq(moe_ref_quantize(&nv, &c.x, NULL, &c.q, &c.s, NULL), MOE_OK);
    moe_tensor_free(&g1);
    qc_free(&c);
}
END_TEST

START_TEST(dequantize_errors)
{
    moe_quant_spec nv = spec_of(MOE_SCHEME_NVFP4, MOE_OPERAND_ACT);
    qc c;
    qc_init(&c, &nv, 2, 4, 64, 0, NULL);
    qc_run(&c, NULL);
    expect_err(moe_ref_dequantize(NULL, &c.q, &c.s, &c.g, &c.y), MOE_ERR_NULL, "spec");
    expect_err(moe_ref_dequantize(&nv, NULL, &c.s, &c.g, &c.y), MOE_ERR_NULL, "q");
    expect_err(moe_ref_dequantize(&nv, &c.q, &c.s, NULL, &c.y), MOE_ERR_NULL, "global_scale");
    expect_err(moe_ref_dequantize(&nv, &c.q, NULL, &c.g, &c.y), MOE_ERR_NULL, "scale");
    expect_err(moe_ref_dequantize(&nv, &c.q, &c.s, &c.g, NULL), MOE_ERR_NULL, "x_out");
    expect_err(moe_ref_dequantize(&nv, &c.q, &c.g, &c.g, &c.y), MOE_ERR_DTYPE, "scale: dtype");
    expect_err(moe_ref_dequantize(&nv, &c.y, &c.s, &c.g, &c.y), MOE_ERR_DTYPE, "q: dtype");
    expect_err(moe_ref_dequantize(&nv, &c.q, &c.s, &c.g, &c.g), MOE_ERR_SHAPE, "x_out");
    moe_quant_spec w = spec_of(MOE_SCHEME_NVFP4, MOE_OPERAND_WEIGHT);
    expect_err(moe_ref_dequantize(&w, &c.q, &c.s, &c.g, &c.y), MOE_ERR_SHAPE, "q: rank 2");
    qc_free(&c);
}
END_TEST

START_TEST(spec_errors)
{
    moe_quant_spec base = spec_of(MOE_SCHEME_FP8_WTENSOR_ATENSOR, MOE_OPERAND_ACT), s;
    expect_err(moe_quant_spec_check(NULL), MOE_ERR_NULL, "spec");
    s = base, s.rule = MOE_RULE_COUNT;
    expect_err(moe_quant_spec_check(&s), MOE_ERR_INVALID_ARG, "spec.rule");
    s = base, s.elem = MOE_E2M1;
    expect_err(moe_quant_spec_check(&s), MOE_ERR_DTYPE, "spec.elem");
    s = base, s.gran = MOE_GRAN_ROW;
    expect_err(moe_quant_spec_check(&s), MOE_ERR_INVALID_ARG, "spec.gran");
    s = base, s.layout = MOE_SF_SWIZZLE_128X4;
    expect_err(moe_quant_spec_check(&s), MOE_ERR_INVALID_ARG, "spec.layout");
    s = base, s.pow2_scale = 1;
    expect_err(moe_quant_spec_check(&s), MOE_ERR_INVALID_ARG, "spec.pow2_scale");
    s = base, s.qmax = 240.0f;
    expect_err(moe_quant_spec_check(&s), MOE_ERR_INVALID_ARG, "spec.qmax");
    s = base, s.q_op = MOE_QOP_DIV;
    expect_err(moe_quant_spec_check(&s), MOE_ERR_INVALID_ARG, "spec.q_op");
    s = base, s.scale_dtype = MOE_E8M0;
    expect_err(moe_quant_spec_check(&s), MOE_ERR_DTYPE, "spec.scale_dtype");
    s = base, s.operand = (moe_operand)5;
    expect_err(moe_quant_spec_check(&s), MOE_ERR_INVALID_ARG, "spec.operand");
    s = base, s.use_global_scale = 1;
    expect_err(moe_quant_spec_check(&s), MOE_ERR_INVALID_ARG, "spec.use_global_scale");
    s = base, s.amax_floor = NAN;
    expect_err(moe_quant_spec_check(&s), MOE_ERR_INVALID_ARG, "floors");
    s = base, s.amax_nan = (moe_amax_nan)3;
    expect_err(moe_quant_spec_check(&s), MOE_ERR_INVALID_ARG, "spec.amax_nan");
    moe_quant_spec blk = spec_of(MOE_SCHEME_FP8_WBLOCK128_AGROUP128, MOE_OPERAND_WEIGHT);
    s = blk, s.operand = MOE_OPERAND_ACT;
    expect_err(moe_quant_spec_check(&s), MOE_ERR_UNSUPPORTED, "spec.operand");
    s = blk, s.block_n = 0;
    expect_err(moe_quant_spec_check(&s), MOE_ERR_INVALID_ARG, "spec.block_n");
    s = blk, s.group_k = -1;
    expect_err(moe_quant_spec_check(&s), MOE_ERR_INVALID_ARG, "spec.group_k");
    moe_quant_spec mx = spec_of(MOE_SCHEME_MXFP8, MOE_OPERAND_ACT);
    s = mx, s.group_k = 16;
    expect_err(moe_quant_spec_check(&s), MOE_ERR_INVALID_ARG, "MX blocks are 32");
    s = mx, s.rule = MOE_RULE_MX_OCP_FLOOR, s.emax_elem = 2;
    expect_err(moe_quant_spec_check(&s), MOE_ERR_INVALID_ARG, "spec.emax_elem");
    s = mx, s.static_ok = 1;
    expect_err(moe_quant_spec_check(&s), MOE_ERR_INVALID_ARG, "spec.static_ok");
    s = mx, s.k_divisible = 0;
    expect_err(moe_quant_spec_check(&s), MOE_ERR_INVALID_ARG, "spec.k_divisible");
    moe_quant_spec i4 = spec_of(MOE_SCHEME_W4A16_G128, MOE_OPERAND_WEIGHT);
    s = i4, s.clamp = MOE_NANCLAMP_MIN_MAX;
    expect_err(moe_quant_spec_check(&s), MOE_ERR_INVALID_ARG, "spec.clamp");
    s = i4, s.qmin = -7.0f;
    expect_err(moe_quant_spec_check(&s), MOE_ERR_INVALID_ARG, "spec.qmin");
    moe_quant_spec nv = spec_of(MOE_SCHEME_NVFP4, MOE_OPERAND_ACT);
    s = nv, s.use_global_scale = 0;
    expect_err(moe_quant_spec_check(&s), MOE_ERR_INVALID_ARG, "spec.static_ok");
    s = nv, s.global_numer = 0.0f;
    expect_err(moe_quant_spec_check(&s), MOE_ERR_INVALID_ARG, "spec.global_numer");
    /* shapes and alloc */
    int64_t sh[2] = {4, 256};
    moe_quant_dims d;
    expect_err(moe_quant_shapes(&base, 2, sh, NULL), MOE_ERR_NULL, "out");
    expect_err(moe_quant_shapes(&base, 3, sh, &d), MOE_ERR_SHAPE, "rank 3");
    expect_err(moe_quant_shapes(&base, 2, NULL, &d), MOE_ERR_NULL, "shape");
    int64_t neg[2] = {-1, 256};
    expect_err(moe_quant_shapes(&base, 2, neg, &d), MOE_ERR_SHAPE, "shape[0]");
    moe_tensor q;
    expect_err(moe_quant_alloc(&base, 2, sh, &q, NULL, NULL), MOE_ERR_NULL, "scale");
    expect_err(moe_quant_alloc(&base, 2, sh, NULL, NULL, NULL), MOE_ERR_NULL, "q");
}
END_TEST

static Suite *quant_suite(void)
{
    Suite *s = suite_create("quant");
    TCase *tc = tcase_create("schemes");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, scheme_names_round_trip);
    tcase_add_test(tc, scheme_name_errors);
    tcase_add_test(tc, shapes_per_granularity);
    tcase_add_test(tc, swizzle_offsets_by_hand);
    tcase_add_test(tc, nvfp4_swizzled_matches_linear);
    tcase_add_test(tc, fp8_tensor_rule_edges);
    tcase_add_test(tc, fp8_amax_element_hits_448);
    tcase_add_test(tc, fp8_token_rule_floor);
    tcase_add_test(tc, fp8_group_rule_eps_ue8m0);
    tcase_add_test(tc, fp8_block_rule_edges);
    tcase_add_test(tc, int8_token_rule);
    tcase_add_test(tc, int4_minmax_rule);
    tcase_add_test(tc, mx_e4m3_rules_edges);
    tcase_add_test(tc, mx_e2m1_rules_edges);
    tcase_add_test(tc, nvfp4_with_global_scale);
    tcase_add_test(tc, nvfp4_without_global_scale);
    tcase_add_test(tc, deepep_ll_cast);
    tcase_add_test(tc, int_groupwise_specs);
    tcase_add_test(tc, static_scales);
    tcase_add_test(tc, round_trip_every_scheme);
    tcase_add_test(tc, empty_problems);
    tcase_add_test(tc, bits_are_pinned);
    tcase_add_test(tc, quantize_errors);
    tcase_add_test(tc, dequantize_errors);
    tcase_add_test(tc, spec_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(quant_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
