/* moe_cuda_quantize / moe_cuda_dequantize against the reference, bit for
 * bit: every scheme's weight and activation spec plus the variants reached
 * by editing a spec (UE8M0 group scales, OCP-floor MX, swizzled MX scales,
 * linear NVFP4 scales, NVFP4 without a global scale, DeepEP-LL casts, int8
 * and int4 groupwise, NaN clamp and amax-NaN policies), dynamic and static
 * scales, at small odd shapes, shapes that fill many blocks (M = 4096,
 * K = 2048 and 7168; E = 8 .. 128 experts) and empty ones, on normal
 * inputs and on inputs sprinkled with NaN, Inf, signed zeros, subnormals
 * and huge values. Quantize outputs (codes, scales, global scales) must be
 * byte-identical; dequantize outputs too, except that a NaN the multiply
 * makes is compared by class (x86 and CUDA make different NaNs). Bad
 * arguments: the same status and message as the reference. Exits 77
 * (skip) without a CUDA device. */
#include <check.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/quant.h"
#include "moe/rng.h"
#include "optimized/cuda/cuda.h"
#include "test_util.h"
#include "gpu_test_util.h"

/* ---- specs ---------------------------------------------------------------------- */
enum { MAXSPECS = 64 };
typedef struct {
    moe_quant_spec sp;
    char name[80];
} named_spec;
static named_spec specs[MAXSPECS];
static int nspecs;

static void add_spec(const moe_quant_spec *sp, const char *name)
{
    if (nspecs >= MAXSPECS || moe_quant_spec_check(sp) != MOE_OK) {
        fprintf(stderr, "check_gpu_quant: spec %s: %s\n", name, moe_last_error());
        exit(EXIT_FAILURE);
    }
    specs[nspecs].sp = *sp;
    snprintf(specs[nspecs].name, sizeof specs[nspecs].name, "%s", name);
    nspecs++;
}

static void build_specs(void)
{
    char nm[80];
    moe_quant_spec sp;
    for (int s = 0; s < MOE_SCHEME_COUNT; s++)
        for (int op = 0; op < 2; op++) {
            moe_scheme_spec((moe_scheme)s, (moe_operand)op, &sp);
            snprintf(nm, sizeof nm, "%s.%s", moe_scheme_name((moe_scheme)s), op ? "act" : "weight");
            add_spec(&sp, nm);
        }
    moe_scheme_spec(MOE_SCHEME_FP8_WBLOCK128_AGROUP128, MOE_OPERAND_ACT, &sp);
    sp.pow2_scale = 1;
    add_spec(&sp, "group128.ue8m0");
    moe_scheme_spec(MOE_SCHEME_MXFP8, MOE_OPERAND_ACT, &sp);
    sp.rule = MOE_RULE_MX_OCP_FLOOR;
    add_spec(&sp, "mxfp8.ocp_floor.act");
    sp.layout = MOE_SF_SWIZZLE_128X4;
    add_spec(&sp, "mxfp8.ocp_floor.swizzled");
    moe_scheme_spec(MOE_SCHEME_MXFP4_W4A16, MOE_OPERAND_WEIGHT, &sp);
    sp.rule = MOE_RULE_MX_OCP_FLOOR;
    add_spec(&sp, "mxfp4.ocp_floor.weight");
    moe_scheme_spec(MOE_SCHEME_MXFP4_W4A16, MOE_OPERAND_WEIGHT, &sp);
    sp.layout = MOE_SF_SWIZZLE_128X4;
    add_spec(&sp, "mxfp4.ceil_pow2.swizzled");
    moe_scheme_spec(MOE_SCHEME_NVFP4, MOE_OPERAND_ACT, &sp);
    sp.layout = MOE_SF_LINEAR;
    add_spec(&sp, "nvfp4.linear.act");
    moe_scheme_spec(MOE_SCHEME_NVFP4, MOE_OPERAND_WEIGHT, &sp);
    sp.use_global_scale = 0;
    sp.static_ok = 0;
    add_spec(&sp, "nvfp4.no_global.weight");
    for (int i = 0; i < 3; i++) {
        moe_quant_spec_deepep_ll(i > 0, i > 1, &sp);
        snprintf(nm, sizeof nm, "deepep_ll.round%d.ue8m0%d", i > 0, i > 1);
        add_spec(&sp, nm);
    }
    for (int g = 32; g <= 128; g *= 2) {
        moe_quant_spec_int_groupwise(MOE_I8, g, &sp);
        snprintf(nm, sizeof nm, "int8.g%d", g);
        add_spec(&sp, nm);
    }
    moe_quant_spec_int_groupwise(MOE_I4, 32, &sp);
    sp.operand = MOE_OPERAND_ACT;
    add_spec(&sp, "int4.g32.act");
    /* NaN policies the scheme rows do not use */
    moe_scheme_spec(MOE_SCHEME_FP8_WTENSOR_ATENSOR, MOE_OPERAND_ACT, &sp);
    sp.amax_nan = MOE_AMAX_NAN_PROPAGATE;
    sp.clamp = MOE_NANCLAMP_MAX_MIN;
    add_spec(&sp, "fp8_tensor.propagate.max_min");
    moe_scheme_spec(MOE_SCHEME_FP8_WCHANNEL_ATOKEN, MOE_OPERAND_ACT, &sp);
    sp.clamp = MOE_NANCLAMP_KEEP;
    add_spec(&sp, "fp8_token.keep");
    moe_scheme_spec(MOE_SCHEME_FP8_WBLOCK128_AGROUP128, MOE_OPERAND_WEIGHT, &sp);
    sp.amax_nan = MOE_AMAX_NAN_IGNORE;
    sp.clamp = MOE_NANCLAMP_MIN_MAX;
    sp.block_n = 64;
    sp.group_k = 96;
    add_spec(&sp, "block64x96.ignore.min_max");
    moe_scheme_spec(MOE_SCHEME_MXFP4_MXFP8, MOE_OPERAND_WEIGHT, &sp);
    sp.clamp = MOE_NANCLAMP_MAX_MIN;
    add_spec(&sp, "mxfp4.max_min");
}

/* ---- inputs ----------------------------------------------------------------------- */
static const uint32_t specials[] = {
    0x7FC00000u, 0xFFC00000u, 0x7FA12345u, 0xFF812345u, /* NaNs: quiet, signaling, both signs */
    0x7F800000u, 0xFF800000u,                           /* Inf */
    0x00000000u, 0x80000000u,                           /* signed zeros */
    0x00000001u, 0x80345678u, 0x00400000u,              /* subnormals */
    0x7F7FFFFFu, 0xF0000000u, 0x43E00000u, 0xC3E00000u, /* huge, -2^97, +-448 */
    0x40C00000u, 0x3F800000u, 0xBF800000u,              /* 6, +-1 */
};
#define NSPECIALS ((int)(sizeof specials / sizeof specials[0]))

/* a pool of standard normals, drawn once (the reference tests' generator);
 * a case reads it from a seeded offset */
enum { POOL = 1 << 25 };
static float *pool;

static void make_pool(void)
{
    pool = (float *)malloc(sizeof(float) * POOL);
    moe_rng_fill_normal(pool, POOL, 2024, moe_rng_stream_id("check_gpu_quant.x"), 0, 0.0f, 1.0f);
}

/* normals of stddev sd; with edges: about 1 in 97 elements special, the
 * first row all zero, the second alternating +0 / -0 with equal maxima,
 * the third all NaN (when there are that many rows) */
static void fill_x(float *x, int64_t rows, int64_t K, uint64_t seed, float sd, int edges)
{
    int64_t n = rows * K;
    int64_t start = (int64_t)((seed * 7919u) % POOL);
    for (int64_t i = 0; i < n; i++) x[i] = pool[(start + i) % POOL] * sd;
    if (!edges) return;
    uint64_t st = moe_rng_stream_id("check_gpu_quant.edges");
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = moe_rng_u32(seed, st, (uint64_t)i);
        if (u % 97 == 0) x[i] = tu_float(specials[(u >> 8) % NSPECIALS]);
        else if (u % 89 == 0) x[i] = -x[(i * 7) % n]; /* repeated magnitudes: max / min ties */
    }
    for (int64_t r = 0; r < rows && r < 3; r++)
        for (int64_t c = 0; c < K; c++) {
            float v = r == 0 ? 0.0f : r == 1 ? ((c & 1) ? -0.0f : 0.0f) : tu_float(0x7FC00000u);
            if (r == 1 && c % 5 == 0) v = (c & 2) ? -2.5f : 2.5f;
            x[r * K + c] = v;
        }
}

/* ---- device helpers ------------------------------------------------------------------ */
/* device tensor of h's shape filled with garbage: a stage must write it all */
static void dev_garbage(const moe_tensor *h, moe_tensor *d)
{
    *d = gpu_dev_like(h);
    if (d->nbytes) ck_assert_int_eq(cudaMemset(d->data, 0xA7, d->nbytes), cudaSuccess);
}

/* byte-identical (nan_class: f32 NaNs match any NaN), named by the case */
static void expect_bytes(const moe_tensor *want, const moe_tensor *dgot, const char *what, const char *label,
                         int nan_class = 0)
{
    char w[320];
    snprintf(w, sizeof w, "%s %s", label, what);
    gpu_expect_same(w, want, dgot, nan_class);
}

/* ---- one case ---------------------------------------------------------------------------- */
typedef struct {
    int64_t a, b, k; /* act: [a, k] (b unused); weight: [a, b, k] */
} shape3;

static shape3 mk(int64_t a, int64_t b, int64_t k)
{
    shape3 s = {a, b, k};
    return s;
}

/* static scales (positive, finite) of the spec's linear scale shape, or the
 * NVFP4 global scale */
static void make_static(const moe_quant_spec *sp, const moe_quant_dims *d, uint64_t seed, moe_tensor *st)
{
    int nvfp4 = sp->rule == MOE_RULE_NVFP4;
    ck_assert_int_eq(moe_tensor_alloc(st, MOE_F32, nvfp4 ? d->global_ndim : d->scale_ndim,
                                      nvfp4 ? d->global_shape : d->scale_shape),
                     MOE_OK);
    int64_t n = moe_tensor_numel(st);
    float lo = nvfp4 ? 100.0f : 1e-3f, hi = nvfp4 ? 5000.0f : 0.05f;
    moe_rng_fill_uniform((float *)st->data, (size_t)n, seed, moe_rng_stream_id("check_gpu_quant.static"), 0, lo, hi);
}

static void run_case(const named_spec *ns, shape3 sh, uint64_t seed, int edges, int use_static, int random_codes)
{
    const moe_quant_spec *sp = &ns->sp;
    int w = sp->operand == MOE_OPERAND_WEIGHT, nd = w ? 3 : 2;
    int64_t shape[3] = {sh.a, w ? sh.b : sh.k, sh.k};
    char label[200];
    char dims[64];
    if (w) snprintf(dims, sizeof dims, "[%lld %lld %lld]", (long long)shape[0], (long long)shape[1], (long long)shape[2]);
    else snprintf(dims, sizeof dims, "[%lld %lld]", (long long)shape[0], (long long)shape[1]);
    snprintf(label, sizeof label, "%s %s seed %llu%s%s", ns->name, dims, (unsigned long long)seed,
             edges ? " edges" : "", use_static ? " static" : "");
    moe_quant_dims d;
    ck_assert_msg(moe_quant_shapes(sp, nd, shape, &d) == MOE_OK, "%s: %s", label, moe_last_error());
    moe_tensor x, q, s, g, stat;
    memset(&stat, 0, sizeof stat);
    ck_assert_int_eq(moe_tensor_alloc(&x, MOE_F32, nd, shape), MOE_OK);
    int64_t rows = moe_tensor_numel(&x) / (sh.k ? sh.k : 1);
    if (sh.k) fill_x((float *)x.data, rows, sh.k, seed, w ? 0.05f : 1.0f, edges);
    ck_assert_int_eq(moe_quant_alloc(sp, nd, shape, &q, &s, &g), MOE_OK);
    if (use_static) make_static(sp, &d, seed, &stat);
    moe_tensor *ps = d.has_scale ? &s : NULL, *pg = d.has_global ? &g : NULL, *pst = use_static ? &stat : NULL;
    ck_assert_msg(moe_ref_quantize(sp, &x, pst, &q, ps, pg) == MOE_OK, "%s: ref: %s", label, moe_last_error());

    moe_tensor dx, dq, dsc, dg, dst, dy;
    memset(&dsc, 0, sizeof dsc), memset(&dg, 0, sizeof dg), memset(&dst, 0, sizeof dst);
    dx = gpu_to_dev(&x);
    dev_garbage(&q, &dq);
    if (ps) dev_garbage(&s, &dsc);
    if (pg) dev_garbage(&g, &dg);
    if (pst) dst = gpu_to_dev(&stat);
    moe_status st = moe_cuda_quantize(sp, &dx, pst ? &dst : NULL, &dq, ps ? &dsc : NULL, pg ? &dg : NULL);
    ck_assert_msg(st == MOE_OK, "%s: gpu quantize: %s", label, moe_last_error());
    ck_assert_int_eq(moe_cuda_synchronize(), MOE_OK);
    expect_bytes(&q, &dq, "q", label);
    if (ps) expect_bytes(&s, &dsc, "scale", label);
    if (pg) expect_bytes(&g, &dg, "global_scale", label);

    /* dequantize the reference's outputs (now also on the device) */
    moe_tensor y;
    ck_assert_int_eq(moe_tensor_alloc(&y, MOE_F32, nd, shape), MOE_OK);
    ck_assert_msg(moe_ref_dequantize(sp, &q, ps, pg, &y) == MOE_OK, "%s: ref dequant: %s", label, moe_last_error());
    dev_garbage(&y, &dy);
    st = moe_cuda_dequantize(sp, &dq, ps ? &dsc : NULL, pg ? &dg : NULL, &dy);
    ck_assert_msg(st == MOE_OK, "%s: gpu dequantize: %s", label, moe_last_error());
    expect_bytes(&y, &dy, "dequant", label, 1);

    if (random_codes) { /* every code of q and of the scales, garbage global scales */
        uint64_t rs = moe_rng_stream_id("check_gpu_quant.codes");
        uint8_t *qb = (uint8_t *)q.data;
        for (size_t i = 0; i < gpu_layout_bytes(&q); i++) qb[i] = (uint8_t)moe_rng_u32(seed, rs, i);
        if (ps) {
            uint8_t *sb = (uint8_t *)s.data;
            for (size_t i = 0; i < gpu_layout_bytes(&s); i++) sb[i] = (uint8_t)moe_rng_u32(seed, rs, (1ull << 40) + i);
        }
        if (pg)
            for (int64_t i = 0; i < moe_tensor_numel(&g); i++)
                ((float *)g.data)[i] = tu_float(moe_rng_u32(seed, rs, (2ull << 40) + (uint64_t)i));
        ck_assert_int_eq(moe_ref_dequantize(sp, &q, ps, pg, &y), MOE_OK);
        ck_assert_int_eq(moe_cuda_copy(&dq, &q), MOE_OK);
        if (ps) ck_assert_int_eq(moe_cuda_copy(&dsc, &s), MOE_OK);
        if (pg) ck_assert_int_eq(moe_cuda_copy(&dg, &g), MOE_OK);
        st = moe_cuda_dequantize(sp, &dq, ps ? &dsc : NULL, pg ? &dg : NULL, &dy);
        ck_assert_msg(st == MOE_OK, "%s: gpu dequantize: %s", label, moe_last_error());
        expect_bytes(&y, &dy, "dequant of random codes", label, 1);
    }
    moe_cuda_free(&dx), moe_cuda_free(&dq), moe_cuda_free(&dsc), moe_cuda_free(&dg), moe_cuda_free(&dst);
    moe_cuda_free(&dy);
    moe_tensor_free(&x), moe_tensor_free(&q), moe_tensor_free(&s), moe_tensor_free(&g);
    moe_tensor_free(&stat), moe_tensor_free(&y);
}

/* K that a spec accepts near `want`: a multiple of its group (of 512 for
 * UE8M0 packing); free K for the ungrouped and block granularities */
static int64_t fit_k(const moe_quant_spec *sp, int64_t want)
{
    int64_t m = 1;
    if (sp->layout == MOE_SF_UE8M0_PACK4) m = 512;
    else if (sp->k_divisible && sp->group_k > 0) m = sp->group_k;
    int64_t k = (want + m - 1) / m * m;
    return k ? k : m;
}

static int64_t fit_n(const moe_quant_spec *sp, int64_t want)
{
    if (sp->gran == MOE_GRAN_BLOCK && sp->k_divisible) return (want + sp->block_n - 1) / sp->block_n * sp->block_n;
    return want;
}

/* small and odd shapes, edges on, dynamic and static, random codes */
START_TEST(small_shapes)
{
    const named_spec *ns = &specs[_i];
    const moe_quant_spec *sp = &ns->sp;
    const int64_t M[] = {1, 3, 131}, E[] = {1, 3}, N[] = {1, 5, 130}, K[] = {7, 33, 257};
    for (int mi = 0; mi < 3; mi++)
        for (int ki = 0; ki < 3; ki++) {
            shape3 sh;
            if (sp->operand == MOE_OPERAND_WEIGHT) sh = mk(E[ki % 2], fit_n(sp, N[mi]), fit_k(sp, K[ki]));
            else sh = mk(M[mi], 0, fit_k(sp, K[ki]));
            uint64_t seed = 1000 + (uint64_t)(mi * 3 + ki);
            run_case(ns, sh, seed, 1, 0, mi == 1);
            run_case(ns, sh, seed, 0, 0, 0);
            if (sp->static_ok) run_case(ns, sh, seed, ki == 0, 1, 0);
        }
}
END_TEST

/* many blocks: M = 4096 tokens x 2048; weights 8 x 256 x 2048 */
START_TEST(large_shapes)
{
    const named_spec *ns = &specs[_i];
    const moe_quant_spec *sp = &ns->sp;
    int w = sp->operand == MOE_OPERAND_WEIGHT;
    /* small mode: 600 tokens x 512, weights 8 x 128 x 512 (still hundreds of blocks) */
    int sm = gpu_small();
    shape3 sh = w ? mk(8, fit_n(sp, sm ? 128 : 256), fit_k(sp, sm ? 512 : 2048))
                  : mk(sm ? 600 : 4096, 0, fit_k(sp, sm ? 512 : 2048));
    run_case(ns, sh, 77, 1, 0, 0);
    sh = w ? mk(4, fit_n(sp, sm ? 128 : 256), fit_k(sp, 512)) : mk(sm ? 600 : 4096, 0, fit_k(sp, 512));
    if (sp->static_ok) run_case(ns, sh, 79, 0, 1, 0);
}
END_TEST

/* the largest row stages: K = 7168 activations, 128 experts of weights */
START_TEST(huge_shapes)
{
    moe_quant_spec sp;
    const moe_scheme sch[] = {MOE_SCHEME_FP8_WBLOCK128_AGROUP128, MOE_SCHEME_NVFP4, MOE_SCHEME_FP8_WTENSOR_ATENSOR,
                              MOE_SCHEME_W4A16_G128};
    for (int i = 0; i < 4; i++) {
        named_spec ns;
        moe_scheme_spec(sch[i], MOE_OPERAND_ACT, &sp);
        ns.sp = sp;
        snprintf(ns.name, sizeof ns.name, "%s.act", moe_scheme_name(sch[i]));
        /* small mode: K = 7168 kept, 64 tokens; 128 experts kept, 128 x 128 each */
        if (sp.gran != MOE_GRAN_NONE) run_case(&ns, mk(gpu_small() ? 64 : 4096, 0, 7168), 5, 1, 0, 0);
        moe_scheme_spec(sch[i], MOE_OPERAND_WEIGHT, &sp);
        ns.sp = sp;
        snprintf(ns.name, sizeof ns.name, "%s.weight", moe_scheme_name(sch[i]));
        run_case(&ns, gpu_small() ? mk(128, 128, 128) : mk(128, 256, 512), 6, 0, 0, 0);
    }
}
END_TEST

/* M = 0, E = 0, K = 0 where the spec allows it: scales of empty groups */
START_TEST(empty_shapes)
{
    const named_spec *ns = &specs[_i];
    const moe_quant_spec *sp = &ns->sp;
    if (sp->operand == MOE_OPERAND_WEIGHT) {
        run_case(ns, mk(0, 4, fit_k(sp, 64)), 1, 0, 0, 0);
        run_case(ns, mk(2, 0, fit_k(sp, 64)), 1, 0, 0, 0);
    } else {
        run_case(ns, mk(0, 0, fit_k(sp, 64)), 1, 0, 0, 0);
    }
    if (!sp->k_divisible && sp->layout != MOE_SF_UE8M0_PACK4)
        run_case(ns, mk(2, 3, 0), 1, 0, 0, 0);
}
END_TEST

/* ---- bad arguments: the reference's status and message ------------------------------------ */
START_TEST(bad_arguments)
{
    moe_quant_spec sp;
    moe_scheme_spec(MOE_SCHEME_FP8_WCHANNEL_ATOKEN, MOE_OPERAND_ACT, &sp);
    int64_t sh[2] = {8, 64}, bad_sh[2] = {8, 63};
    moe_tensor x, q, s, qbad, stat, dx, dq, ds, dqbad, dstat, y, dy;
    ck_assert_int_eq(moe_tensor_alloc(&x, MOE_F32, 2, sh), MOE_OK);
    fill_x((float *)x.data, 8, 64, 3, 1.0f, 0);
    ck_assert_int_eq(moe_quant_alloc(&sp, 2, sh, &q, &s, NULL), MOE_OK);
    ck_assert_int_eq(moe_tensor_alloc(&qbad, MOE_E4M3, 2, bad_sh), MOE_OK);
    int64_t ssh[2] = {8, 1};
    ck_assert_int_eq(moe_tensor_alloc(&stat, MOE_F32, 2, ssh), MOE_OK);
    for (int i = 0; i < 8; i++) ((float *)stat.data)[i] = i == 5 ? -1.0f : 0.5f;
    ck_assert_int_eq(moe_tensor_alloc(&y, MOE_F32, 2, sh), MOE_OK);
    dx = gpu_to_dev(&x), dq = gpu_to_dev(&q), ds = gpu_to_dev(&s), dqbad = gpu_to_dev(&qbad), dstat = gpu_to_dev(&stat);
    dy = gpu_to_dev(&y);

    /* a host tensor where device memory is required */
    moe_status g = moe_cuda_quantize(&sp, &x, NULL, &dq, &ds, NULL);
    ck_assert_int_eq(g, MOE_ERR_INVALID_ARG);
    ck_assert_msg(strstr(moe_last_error(), "x: host memory") != NULL, "%s", moe_last_error());
    g = moe_cuda_dequantize(&sp, &dq, &s, NULL, &dy);
    ck_assert_int_eq(g, MOE_ERR_INVALID_ARG);
    ck_assert_msg(strstr(moe_last_error(), "scale: host memory") != NULL, "%s", moe_last_error());
    /* NULL spec, wrong q shape, missing scale, negative static scale, static for MX */
    GPU_SAME_ERROR("NULL spec", moe_ref_quantize(NULL, &x, NULL, &q, &s, NULL),
                   moe_cuda_quantize(NULL, &dx, NULL, &dq, &ds, NULL));
    GPU_SAME_ERROR("q shape", moe_ref_quantize(&sp, &x, NULL, &qbad, &s, NULL),
                   moe_cuda_quantize(&sp, &dx, NULL, &dqbad, &ds, NULL));
    GPU_SAME_ERROR("scale NULL", moe_ref_quantize(&sp, &x, NULL, &q, NULL, NULL),
                   moe_cuda_quantize(&sp, &dx, NULL, &dq, NULL, NULL));
    GPU_SAME_ERROR("negative static scale", moe_ref_quantize(&sp, &x, &stat, &q, &s, NULL),
                   moe_cuda_quantize(&sp, &dx, &dstat, &dq, &ds, NULL));
    GPU_SAME_ERROR("global for a non-NVFP4 spec", moe_ref_quantize(&sp, &x, NULL, &q, &s, &stat),
                   moe_cuda_quantize(&sp, &dx, NULL, &dq, &ds, &dstat));
    moe_quant_spec bad = sp;
    bad.qmax = 100.0f;
    GPU_SAME_ERROR("bad spec", moe_ref_quantize(&bad, &x, NULL, &q, &s, NULL),
                   moe_cuda_quantize(&bad, &dx, NULL, &dq, &ds, NULL));
    GPU_SAME_ERROR("x_out NULL", moe_ref_dequantize(&sp, &q, &s, NULL, NULL),
                   moe_cuda_dequantize(&sp, &dq, &ds, NULL, NULL));
    GPU_SAME_ERROR("dequant q shape", moe_ref_dequantize(&sp, &qbad, &s, NULL, &y),
                   moe_cuda_dequantize(&sp, &dqbad, &ds, NULL, &dy));
    /* MX rules take no static scale; NVFP4 dequant needs its global scale */
    moe_quant_spec mx, nv;
    moe_scheme_spec(MOE_SCHEME_MXFP8, MOE_OPERAND_ACT, &mx);
    moe_scheme_spec(MOE_SCHEME_NVFP4, MOE_OPERAND_ACT, &nv);
    moe_tensor mq, ms, nq, nsc, ng, dmq, dms, dnq, dns;
    ck_assert_int_eq(moe_quant_alloc(&mx, 2, sh, &mq, &ms, NULL), MOE_OK);
    ck_assert_int_eq(moe_quant_alloc(&nv, 2, sh, &nq, &nsc, &ng), MOE_OK);
    dmq = gpu_to_dev(&mq), dms = gpu_to_dev(&ms), dnq = gpu_to_dev(&nq), dns = gpu_to_dev(&nsc);
    GPU_SAME_ERROR("static for MX", moe_ref_quantize(&mx, &x, &stat, &mq, &ms, NULL),
                   moe_cuda_quantize(&mx, &dx, &dstat, &dmq, &dms, NULL));
    GPU_SAME_ERROR("NVFP4 without global", moe_ref_dequantize(&nv, &nq, &nsc, NULL, &y),
                   moe_cuda_dequantize(&nv, &dnq, &dns, NULL, &dy));
    moe_tensor *hs[] = {&x, &q, &s, &qbad, &stat, &y, &mq, &ms, &nq, &nsc, &ng};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) moe_tensor_free(hs[i]);
    moe_tensor *ds_[] = {&dx, &dq, &ds, &dqbad, &dstat, &dy, &dmq, &dms, &dnq, &dns};
    for (size_t i = 0; i < sizeof ds_ / sizeof ds_[0]; i++) moe_cuda_free(ds_[i]);
}
END_TEST

static void add_tests(Suite *s)
{
    build_specs();
    make_pool();
    TCase *tc = gpu_tcase(s, "quant", 300);
    tcase_add_loop_test(tc, small_shapes, 0, nspecs);
    tcase_add_loop_test(tc, large_shapes, 0, nspecs);
    tcase_add_loop_test(tc, empty_shapes, 0, nspecs);
    tcase_add_test(tc, huge_shapes);
    tcase_add_test(tc, bad_arguments);
}

int main(void)
{
    return gpu_test_main("check_gpu_quant", "gpu_quant", add_tests);
}
