/* The CPU backend's grouped GEMM (optimized/cpu/gemm.c, through the "cpu"
 * ops table) against the reference: every scheme, every output dtype, with
 * and without bias, zero rows and experts without rows, within the derived
 * bound moe_gemm_bound (BOUNDED: OpenBLAS sums in its own order); the
 * operands bit-exact (one-hot products equal the reference's bit for bit);
 * the bound not vacuous (a planted error one ulp past it is caught, shares
 * > 0); 1 and 2 threads; bad input refused with the reference's status. */
#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "moe/backends.h"
#include "moe/bounds.h"
#include "moe/compare.h"
#include "moe/format.h"
#include "moe/gemm.h"
#include "moe/rng.h"
#include "test_tensors.h"

static moe_status cpu_gemm(const moe_gemm_args *g, moe_tensor *out)
{
    const moe_ops *ops = NULL;
    ck_assert_int_eq(moe_backend_lookup("cpu", &ops, NULL), MOE_OK);
    return ops->grouped_gemm(g, out);
}

/* ---- inputs: f32 data quantized by the quant stage under the scheme ------ */
typedef struct {
    moe_scheme sc;
    int64_t P, E, N, K;
    moe_tensor aq, asc, ag, wq, wsc, wg, re, bias;
    moe_quant_spec ws, as;
} gemm_case;

enum { FILL_NORMAL = 0, FILL_ONEHOT_A, FILL_ONEHOT_W };

/* x [rows, K] (or [E*N, K]) one-hot: row r has 1 + r/K... at column r % K */
static void fill(moe_tensor *t, int how, int64_t K, uint64_t seed, uint64_t stream)
{
    int64_t n = moe_tensor_numel(t);
    float *x = t->data;
    if (how == FILL_NORMAL) {
        moe_rng_fill_normal(x, (size_t)n, seed, stream, 0, 0.0f, 1.0f);
        return;
    }
    memset(x, 0, (size_t)n * sizeof(float));
    for (int64_t r = 0; r < n / K; r++) /* values 0.75 .. 3: other binades than 1 */
        x[r * K + r % K] = (r & 1 ? -1.0f : 1.0f) * (0.75f + (float)(r % 10) * 0.25f);
}

static void quantize(const moe_quant_spec *sp, int ndim, const int64_t *shape, const moe_tensor *x, moe_tensor *q,
                     moe_tensor *sc, moe_tensor *gl)
{
    memset(sc, 0, sizeof *sc), memset(gl, 0, sizeof *gl);
    ck_assert_int_eq(moe_quant_alloc(sp, ndim, shape, q, sc, gl), MOE_OK);
    ck_assert_msg(moe_ref_quantize(sp, x, NULL, q, sp->gran ? sc : NULL, sp->use_global_scale ? gl : NULL) == MOE_OK,
                  "%s", moe_last_error());
}

/* row_expert: -1 every 7th row, expert E-2 (when E > 2) never used */
static void build(gemm_case *c, moe_scheme sc, int64_t P, int64_t E, int64_t N, int64_t K, int how, uint64_t seed)
{
    memset(c, 0, sizeof *c);
    c->sc = sc, c->P = P, c->E = E, c->N = N, c->K = K;
    ck_assert_int_eq(moe_scheme_spec(sc, MOE_OPERAND_WEIGHT, &c->ws), MOE_OK);
    ck_assert_int_eq(moe_scheme_spec(sc, MOE_OPERAND_ACT, &c->as), MOE_OK);
    moe_tensor af = tt_new(MOE_F32, 2, P, K, 0), wf = tt_new(MOE_F32, 3, E, N, K);
    fill(&af, how == FILL_ONEHOT_A ? how : FILL_NORMAL, K, seed, 1);
    fill(&wf, how == FILL_ONEHOT_W ? how : FILL_NORMAL, K, seed, 2);
    int64_t ashape[2] = {P, K}, wshape[3] = {E, N, K};
    quantize(&c->as, 2, ashape, &af, &c->aq, &c->asc, &c->ag);
    quantize(&c->ws, 3, wshape, &wf, &c->wq, &c->wsc, &c->wg);
    c->re = tt_new(MOE_I32, 1, P, 0, 0);
    int32_t *re = c->re.data;
    for (int64_t p = 0; p < P; p++) {
        int32_t e = (int32_t)(moe_rng_u32(seed, 3, (uint64_t)p) % (uint32_t)E);
        if (E > 2 && e == E - 2) e = (int32_t)(E - 1);
        re[p] = p % 7 == 3 ? -1 : e;
    }
    c->bias = tt_new(MOE_F32, 2, E, N, 0);
    moe_rng_fill_normal(c->bias.data, (size_t)(E * N), seed, 4, 0, 0.0f, 4.0f);
    moe_tensor_free(&af), moe_tensor_free(&wf);
}

static moe_gemm_args args_of(const gemm_case *c, int with_bias)
{
    moe_gemm_args g;
    memset(&g, 0, sizeof g);
    g.scheme = c->sc, g.a = &c->aq, g.w = &c->wq, g.row_expert = &c->re;
    g.a_scale = c->as.gran ? &c->asc : NULL, g.a_global = c->as.use_global_scale ? &c->ag : NULL;
    g.w_scale = c->ws.gran ? &c->wsc : NULL, g.w_global = c->ws.use_global_scale ? &c->wg : NULL;
    g.bias = with_bias ? &c->bias : NULL;
    return g;
}

static void release(gemm_case *c)
{
    moe_tensor *all[] = {&c->aq, &c->asc, &c->ag, &c->wq, &c->wsc, &c->wg, &c->re, &c->bias};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) moe_tensor_free(all[i]);
}

/* ref and cpu outputs of one call and the bound; accumulates into *m */
typedef struct {
    moe_tensor ref, cpu;
    double *bound;
} run_out;

static void run_both(const moe_gemm_args *g, moe_dtype od, int64_t P, int64_t N, run_out *r)
{
    r->ref = tt_new(od, 2, P, N, 0), r->cpu = tt_new(od, 2, P, N, 0);
    r->bound = malloc(sizeof(double) * (size_t)(P * N + 1));
    ck_assert_ptr_nonnull(r->bound);
    ck_assert_msg(moe_ref_grouped_gemm(g, &r->ref) == MOE_OK, "ref: %s", moe_last_error());
    memset(r->cpu.data, 0x5A, r->cpu.nbytes); /* zero rows must be written */
    ck_assert_msg(cpu_gemm(g, &r->cpu) == MOE_OK, "cpu: %s", moe_last_error());
    ck_assert_msg(moe_gemm_bound(g, &r->ref, r->bound) == MOE_OK, "bound: %s", moe_last_error());
}

static void run_free(run_out *r)
{
    moe_tensor_free(&r->ref), moe_tensor_free(&r->cpu), free(r->bound);
}

static const moe_dtype OUT_DTYPES[3] = {MOE_F32, MOE_BF16, MOE_F16};

/* shapes: (P, E, N, K); K a multiple of every group size (128), rows not
 * a multiple of 8, N not a multiple of 128 (a partial weight block), one
 * shape with N past the CPU's weight chunk (several chunks per expert);
 * the last, K = 37, only for the unscaled schemes (group size 1) */
static const int64_t SHAPES[][4] = {{37, 5, 130, 256}, {19, 3, 300, 1024}, {7, 9, 16, 128}, {13, 4, 21, 37}};
enum { NSHAPES = sizeof SHAPES / sizeof SHAPES[0] };

/* ---- every scheme within the bound ---------------------------------------- */
START_TEST(every_scheme_within_bound)
{
    moe_scheme sc = (moe_scheme)_i;
    double share[3] = {0, 0, 0};
    int64_t fails = 0, classes = 0, n = 0;
    char first[256] = "";
    const moe_scheme_info *info = moe_scheme_get(sc);
    int plain = info->weight.gran == MOE_GRAN_NONE && info->act.gran == MOE_GRAN_NONE;
    for (size_t si = 0; si < (size_t)(plain ? NSHAPES : NSHAPES - 1); si++) {
        gemm_case c;
        build(&c, sc, SHAPES[si][0], SHAPES[si][1], SHAPES[si][2], SHAPES[si][3], FILL_NORMAL, 100 + si);
        for (int od = 0; od < 3; od++)
            for (int b = 0; b < 2; b++) {
                moe_gemm_args g = args_of(&c, b);
                run_out r;
                run_both(&g, OUT_DTYPES[od], c.P, c.N, &r);
                moe_cmp_metrics m;
                moe_cmp_init(&m);
                ck_assert_int_eq(moe_compare_bounded(&r.cpu, &r.ref, r.bound, &m, NULL), MOE_OK);
                fails += m.bound_failures, classes += m.class_mismatches, n += m.n;
                if (m.share > share[od]) share[od] = m.share;
                if ((m.bound_failures || m.class_mismatches) && !first[0] && m.nfirst)
                    snprintf(first, sizeof first, "shape %zu out %s bias %d: [%lld] got %s want %s", si,
                             moe_dtype_get(OUT_DTYPES[od])->name, b, (long long)m.first[0].index,
                             m.first[0].got_hex, m.first[0].want_hex);
                run_free(&r);
            }
        release(&c);
    }
    printf("cpu grouped_gemm %-24s max share of bound: f32 %.3g  bf16 %.3g  f16 %.3g  (%lld elements)\n",
           moe_scheme_name(sc), share[0], share[1], share[2], (long long)n);
    ck_assert_msg(fails == 0 && classes == 0, "%s: %lld over the bound, %lld class mismatches; first: %s",
                  moe_scheme_name(sc), (long long)fails, (long long)classes, first);
    ck_assert_msg(share[0] > 0.0, "%s: f32 out equals the reference everywhere (is the order really different?)",
                  moe_scheme_name(sc));
}
END_TEST

/* ---- operands bit-exact: one-hot rows make each output one product --------- */
START_TEST(one_hot_products_exact)
{
    moe_scheme sc = (moe_scheme)_i;
    for (int how = FILL_ONEHOT_A; how <= FILL_ONEHOT_W; how++) {
        gemm_case c;
        /* one-hot a: P = K rows cover every k of every weight row; one-hot
         * w: N = K covers every k of every activation row */
        if (how == FILL_ONEHOT_A) build(&c, sc, 256, 3, 40, 256, how, 7);
        else build(&c, sc, 29, 3, 256, 256, how, 8);
        moe_gemm_args g = args_of(&c, 1);
        for (int od = 0; od < 3; od++) { /* the accumulators are equal: so is every rounding of them */
            run_out r;
            run_both(&g, OUT_DTYPES[od], c.P, c.N, &r);
            int64_t bad = 0, first = -1;
            for (int64_t i = 0; i < c.P * c.N; i++) {
                double x = moe_tensor_value_at(&r.cpu, i), y = moe_tensor_value_at(&r.ref, i);
                if (moe_tensor_code_at(&r.cpu, i) != moe_tensor_code_at(&r.ref, i) && !(isnan(x) && isnan(y)))
                    bad++, first = first < 0 ? i : first;
            }
            ck_assert_msg(bad == 0, "%s one-hot %s, out %s: %lld outputs differ from the reference (first [%lld]: %a vs %a)",
                          moe_scheme_name(sc), how == FILL_ONEHOT_A ? "a" : "w", moe_dtype_get(OUT_DTYPES[od])->name,
                          (long long)bad, (long long)first, first >= 0 ? moe_tensor_value_at(&r.cpu, first) : 0.0,
                          first >= 0 ? moe_tensor_value_at(&r.ref, first) : 0.0);
            run_free(&r);
        }
        release(&c);
    }
}
END_TEST

/* ---- the bound is not vacuous: a planted error one ulp past it is caught -- */
static double next_up(moe_dtype od, double v)
{
    uint32_t code = 0;
    float f = (float)v, y = f;
    if (od == MOE_F32) return (double)nextafterf(f, INFINITY);
    moe_encode(od, f, MOE_POLICY_IEEE_RNE, &code, NULL);
    moe_decode(od, code, &y);
    if ((double)y > v) return y;
    /* one code up in magnitude direction of +inf */
    code = (y >= 0.0f) ? code + 1 : code - 1;
    if (y == 0.0f && signbit(y)) code = 1; /* -0 -> smallest positive */
    moe_decode(od, code, &y);
    return y;
}

static void plant(moe_scheme sc, moe_dtype od)
{
    gemm_case c;
    build(&c, sc, 37, 5, 130, 256, FILL_NORMAL, 55);
    moe_gemm_args g = args_of(&c, 1);
    run_out r;
    run_both(&g, od, c.P, c.N, &r);
    const int32_t *re = c.re.data;
    int64_t p = 0;
    while (re[p] < 0) p++;
    int64_t i = p * c.N + 17;
    double want = moe_tensor_value_at(&r.ref, i), bd = r.bound[i];
    ck_assert(bd > 0.0 && isfinite(bd));
    /* the smallest value of out's dtype past want + bound: bound + at most one ulp */
    double v = next_up(od, want + bd);
    while (v - want <= bd) v = next_up(od, v);
    if (od == MOE_F32) {
        ((float *)r.cpu.data)[i] = (float)v;
    } else {
        uint32_t code = 0;
        ck_assert_int_eq(moe_encode(od, (float)v, MOE_POLICY_IEEE_RNE, &code, NULL), MOE_OK);
        ((uint16_t *)r.cpu.data)[i] = (uint16_t)code;
    }
    moe_cmp_metrics m;
    moe_cmp_init(&m);
    ck_assert_int_eq(moe_compare_bounded(&r.cpu, &r.ref, r.bound, &m, NULL), MOE_OK);
    ck_assert_msg(m.bound_failures == 1 && m.nfirst >= 1 && m.first[0].index == i,
                  "%s %s: planted [%lld] = want %.9g + %.3g (bound %.3g): %lld failures, first [%lld]",
                  moe_scheme_name(sc), moe_dtype_get(od)->name, (long long)i, want, v - want, bd,
                  (long long)m.bound_failures, (long long)(m.nfirst ? m.first[0].index : -1));
    ck_assert(!moe_cmp_pass(&m, MOE_CLASS_BOUNDED));
    /* and the same value exactly at the bound (f32 out) passes */
    if (od == MOE_F32) {
        double at = want + bd;
        float f = (float)at;
        while ((double)f - want > bd) f = nextafterf(f, -INFINITY);
        ((float *)r.cpu.data)[i] = f;
        moe_cmp_init(&m);
        ck_assert_int_eq(moe_compare_bounded(&r.cpu, &r.ref, r.bound, &m, NULL), MOE_OK);
        ck_assert_int_eq(m.bound_failures, 0);
    }
    run_free(&r);
    release(&c);
}

START_TEST(planted_error_caught)
{
    const moe_scheme schemes[] = {MOE_SCHEME_BF16, MOE_SCHEME_FP8_WBLOCK128_AGROUP128, MOE_SCHEME_W4A16_G32,
                                  MOE_SCHEME_NVFP4};
    for (size_t s = 0; s < sizeof schemes / sizeof schemes[0]; s++)
        for (int od = 0; od < 3; od++) plant(schemes[s], OUT_DTYPES[od]);
}
END_TEST

/* ---- 1 and 2 threads -------------------------------------------------------- */
START_TEST(threads_within_bound)
{
    const moe_scheme schemes[] = {MOE_SCHEME_BF16, MOE_SCHEME_FP8_WBLOCK128_AGROUP128, MOE_SCHEME_MXFP4_MXFP8};
    int saved = omp_get_max_threads();
    for (size_t s = 0; s < sizeof schemes / sizeof schemes[0]; s++) {
        gemm_case c;
        build(&c, schemes[s], 61, 6, 300, 1024, FILL_NORMAL, 77);
        moe_gemm_args g = args_of(&c, 1);
        for (int th = 1; th <= 2; th++) {
            omp_set_num_threads(th);
            run_out r;
            run_both(&g, MOE_BF16, c.P, c.N, &r);
            moe_cmp_metrics m;
            moe_cmp_init(&m);
            ck_assert_int_eq(moe_compare_bounded(&r.cpu, &r.ref, r.bound, &m, NULL), MOE_OK);
            ck_assert_msg(moe_cmp_pass(&m, MOE_CLASS_BOUNDED), "%s, %d threads: %lld over the bound",
                          moe_scheme_name(schemes[s]), th, (long long)m.bound_failures);
            run_free(&r);
        }
        release(&c);
    }
    omp_set_num_threads(saved);
}
END_TEST

/* ---- bad input: the reference's status, case by case ------------------------ */
typedef struct {
    const char *what;
    moe_status want;
} bad_case;

static void expect_same(const char *what, const moe_gemm_args *g, moe_tensor *out, moe_status want, int *nbad,
                        char *msg, size_t msz)
{
    moe_status r = moe_ref_grouped_gemm(g, out);
    char rmsg[256];
    snprintf(rmsg, sizeof rmsg, "%s", moe_last_error());
    moe_status c = cpu_gemm(g, out);
    if (r != c || r != want) {
        (*nbad)++;
        size_t len = strlen(msg);
        snprintf(msg + len, msz - len, "\n  %s: ref %s (%s), cpu %s (%s), expected %s", what, moe_status_str(r), rmsg,
                 moe_status_str(c), moe_last_error(), moe_status_str(want));
    } else if (r != MOE_OK && strcmp(rmsg, moe_last_error())) {
        (*nbad)++;
        size_t len = strlen(msg);
        snprintf(msg + len, msz - len, "\n  %s: messages differ: ref '%s', cpu '%s'", what, rmsg, moe_last_error());
    }
}

START_TEST(bad_input_same_status)
{
    char msg[8192] = "";
    int nbad = 0;
    moe_tensor out = tt_new(MOE_F32, 2, 9, 130, 0), o_i32 = tt_new(MOE_I32, 2, 9, 130, 0);
    moe_tensor o_short = tt_new(MOE_F32, 2, 9, 129, 0), f32_2d = tt_new(MOE_F32, 2, 9, 256, 0);
    moe_tensor a3 = tt_new(MOE_BF16, 3, 1, 9, 256), re_f = tt_new(MOE_F32, 1, 9, 0, 0);
    moe_tensor re_8 = tt_new(MOE_I32, 1, 8, 0, 0), bias_bad = tt_new(MOE_F32, 2, 2, 130, 0);
    moe_tensor bias_i32 = tt_new(MOE_I32, 2, 3, 130, 0), w_k = tt_new(MOE_BF16, 3, 3, 130, 128);
    moe_tensor e8 = tt_new(MOE_E8M0, 2, 9, 1, 0), sc_p = tt_new(MOE_F32, 2, 10, 1, 0);
    moe_tensor wsc_e = tt_new(MOE_F32, 3, 2, 130, 1), wg_e = tt_new(MOE_F32, 1, 3, 0, 0);
    moe_tensor wg_bad = tt_new(MOE_F32, 1, 2, 0, 0), ag_1 = tt_new(MOE_F32, 1, 1, 0, 0);
    moe_tensor blk_a = tt_new(MOE_F32, 2, 9, 3, 0), blk_w = tt_new(MOE_F32, 3, 3, 2, 3);
    moe_tensor blk_ad = tt_new(MOE_E8M0, 2, 9, 2, 0);
    gemm_case c;

    /* bf16: plain operands */
    build(&c, MOE_SCHEME_BF16, 9, 3, 130, 256, FILL_NORMAL, 5);
    moe_gemm_args g = args_of(&c, 1), b;
    expect_same("valid bf16", &g, &out, MOE_OK, &nbad, msg, sizeof msg);
    expect_same("args NULL", NULL, &out, MOE_ERR_NULL, &nbad, msg, sizeof msg);
    b = g, b.a = NULL;
    expect_same("a NULL", &b, &out, MOE_ERR_NULL, &nbad, msg, sizeof msg);
    b = g, b.w = NULL;
    expect_same("w NULL", &b, &out, MOE_ERR_NULL, &nbad, msg, sizeof msg);
    b = g, b.row_expert = NULL;
    expect_same("row_expert NULL", &b, &out, MOE_ERR_NULL, &nbad, msg, sizeof msg);
    expect_same("out NULL", &g, NULL, MOE_ERR_NULL, &nbad, msg, sizeof msg);
    b = g, b.a = &f32_2d;
    expect_same("a f32 for bf16", &b, &out, MOE_ERR_DTYPE, &nbad, msg, sizeof msg);
    b = g, b.scheme = MOE_SCHEME_F16;
    expect_same("scheme f16 on bf16 data", &b, &out, MOE_ERR_DTYPE, &nbad, msg, sizeof msg);
    b = g, b.scheme = (moe_scheme)99;
    expect_same("scheme 99", &b, &out, MOE_ERR_INVALID_ARG, &nbad, msg, sizeof msg);
    expect_same("out int32", &g, &o_i32, MOE_ERR_DTYPE, &nbad, msg, sizeof msg);
    expect_same("out [P, N-1]", &g, &o_short, MOE_ERR_SHAPE, &nbad, msg, sizeof msg);
    b = g, b.a = &a3;
    expect_same("a rank 3", &b, &out, MOE_ERR_SHAPE, &nbad, msg, sizeof msg);
    b = g, b.w = &w_k;
    expect_same("w K 128 vs a K 256", &b, &out, MOE_ERR_SHAPE, &nbad, msg, sizeof msg);
    b = g, b.row_expert = &re_f;
    expect_same("row_expert f32", &b, &out, MOE_ERR_DTYPE, &nbad, msg, sizeof msg);
    b = g, b.row_expert = &re_8;
    expect_same("row_expert 8 of 9", &b, &out, MOE_ERR_SHAPE, &nbad, msg, sizeof msg);
    b = g, b.bias = &bias_bad;
    expect_same("bias [E-1, N]", &b, &out, MOE_ERR_SHAPE, &nbad, msg, sizeof msg);
    b = g, b.bias = &bias_i32;
    expect_same("bias int32", &b, &out, MOE_ERR_DTYPE, &nbad, msg, sizeof msg);
    int32_t *re = c.re.data, keep = re[4];
    re[4] = 3;
    expect_same("row_expert = E", &g, &out, MOE_ERR_INVALID_ARG, &nbad, msg, sizeof msg);
    re[4] = -2;
    expect_same("row_expert = -2", &g, &out, MOE_ERR_INVALID_ARG, &nbad, msg, sizeof msg);
    re[4] = keep;
    release(&c);

    /* fp8 per-channel weights, per-token activations */
    build(&c, MOE_SCHEME_FP8_WCHANNEL_ATOKEN, 9, 3, 130, 256, FILL_NORMAL, 6);
    g = args_of(&c, 0);
    expect_same("valid fp8 channel/token", &g, &out, MOE_OK, &nbad, msg, sizeof msg);
    b = g, b.a_scale = NULL;
    expect_same("a_scale NULL", &b, &out, MOE_ERR_NULL, &nbad, msg, sizeof msg);
    b = g, b.w_scale = NULL;
    expect_same("w_scale NULL", &b, &out, MOE_ERR_NULL, &nbad, msg, sizeof msg);
    b = g, b.w_scale = &wsc_e;
    expect_same("w_scale leading dim E-1", &b, &out, MOE_ERR_SHAPE, &nbad, msg, sizeof msg);
    b = g, b.a_scale = &sc_p;
    expect_same("a_scale [P+1, 1]", &b, &out, MOE_ERR_SHAPE, &nbad, msg, sizeof msg);
    b = g, b.a_scale = &e8;
    expect_same("a_scale e8m0", &b, &out, MOE_ERR_DTYPE, &nbad, msg, sizeof msg);
    b = g, b.w_global = &wg_e;
    expect_same("w_global on a non-NVFP4 scheme", &b, &out, MOE_ERR_INVALID_ARG, &nbad, msg, sizeof msg);
    b = g, b.w_global = &wg_bad;
    expect_same("w_global [E-1]", &b, &out, MOE_ERR_SHAPE, &nbad, msg, sizeof msg);
    b = g, b.a_global = &ag_1;
    expect_same("a_global on a non-NVFP4 scheme", &b, &out, MOE_ERR_INVALID_ARG, &nbad, msg, sizeof msg);
    {
        moe_tensor ad = c.aq;
        ad.device.kind = MOE_DEVICE_CUDA;
        b = g, b.a = &ad;
        expect_same("a on a device", &b, &out, MOE_ERR_UNSUPPORTED, &nbad, msg, sizeof msg);
    }
    /* no row has an expert: the weights are never read, so a bad weight
     * scale shape passes in both (the reference's behaviour) */
    for (int p = 0; p < 9; p++) re = c.re.data, re[p] = -1;
    {
        moe_tensor wsc_bad = tt_new(MOE_F32, 3, 3, 129, 1);
        b = g, b.w_scale = &wsc_bad;
        expect_same("bad w_scale, no rows with experts", &b, &out, MOE_OK, &nbad, msg, sizeof msg);
        re[0] = 1;
        expect_same("bad w_scale, one row with an expert", &b, &out, MOE_ERR_SHAPE, &nbad, msg, sizeof msg);
        moe_tensor_free(&wsc_bad);
    }
    release(&c);

    /* K not a multiple of the group size: activations (mxfp8, 32) and
     * weights only (w4a16_g128 with bf16 activations) */
    {
        moe_tensor a48 = tt_new(MOE_E4M3, 2, 9, 48, 0), asc48 = tt_new(MOE_E8M0, 2, 9, 2, 0);
        moe_tensor w48 = tt_new(MOE_E4M3, 3, 3, 130, 48), wsc48 = tt_new(MOE_E8M0, 3, 3, 130, 2);
        build(&c, MOE_SCHEME_MXFP8, 9, 3, 130, 256, FILL_NORMAL, 9);
        g = args_of(&c, 0);
        expect_same("valid mxfp8", &g, &out, MOE_OK, &nbad, msg, sizeof msg);
        b = g, b.a = &a48, b.a_scale = &asc48, b.w = &w48, b.w_scale = &wsc48;
        expect_same("mxfp8 K = 48", &b, &out, MOE_ERR_SHAPE, &nbad, msg, sizeof msg);
        moe_tensor asc_bad = tt_new(MOE_E8M0, 2, 9, 7, 0);
        b = g, b.a_scale = &asc_bad;
        expect_same("mxfp8 a_scale [P, 7]", &b, &out, MOE_ERR_SHAPE, &nbad, msg, sizeof msg);
        moe_tensor_free(&asc_bad), moe_tensor_free(&a48), moe_tensor_free(&asc48), moe_tensor_free(&w48),
            moe_tensor_free(&wsc48);
        release(&c);

        moe_tensor a192 = tt_new(MOE_BF16, 2, 9, 192, 0), w192 = tt_new(MOE_I4, 3, 3, 130, 192);
        moe_tensor wsc192 = tt_new(MOE_F32, 3, 3, 130, 2);
        build(&c, MOE_SCHEME_W4A16_G128, 9, 3, 130, 256, FILL_NORMAL, 10);
        g = args_of(&c, 0);
        expect_same("valid w4a16_g128", &g, &out, MOE_OK, &nbad, msg, sizeof msg);
        b = g, b.a = &a192, b.w = &w192, b.w_scale = &wsc192;
        expect_same("w4a16_g128 K = 192", &b, &out, MOE_ERR_SHAPE, &nbad, msg, sizeof msg);
        moe_tensor_free(&a192), moe_tensor_free(&w192), moe_tensor_free(&wsc192);
        release(&c);
    }

    /* NVFP4: global scales, swizzled scale shapes */
    build(&c, MOE_SCHEME_NVFP4, 9, 3, 130, 256, FILL_NORMAL, 11);
    g = args_of(&c, 0);
    expect_same("valid nvfp4", &g, &out, MOE_OK, &nbad, msg, sizeof msg);
    b = g, b.a_global = NULL;
    expect_same("nvfp4 a_global NULL", &b, &out, MOE_ERR_NULL, &nbad, msg, sizeof msg);
    b = g, b.w_global = NULL;
    expect_same("nvfp4 w_global NULL", &b, &out, MOE_ERR_NULL, &nbad, msg, sizeof msg);
    b = g, b.w_global = &wg_bad;
    expect_same("nvfp4 w_global [E-1]", &b, &out, MOE_ERR_SHAPE, &nbad, msg, sizeof msg);
    {
        moe_tensor wsc_lin = tt_new(MOE_E4M3, 3, 3, 130, 16); /* linear, not padded to [256, 16] */
        b = g, b.w_scale = &wsc_lin;
        expect_same("nvfp4 w_scale unpadded", &b, &out, MOE_ERR_SHAPE, &nbad, msg, sizeof msg);
        moe_tensor_free(&wsc_lin);
    }
    release(&c);

    /* block fp8: the tile scales the reference reads directly */
    build(&c, MOE_SCHEME_FP8_WBLOCK128_AGROUP128, 9, 3, 130, 256, FILL_NORMAL, 12);
    g = args_of(&c, 1);
    expect_same("valid block fp8", &g, &out, MOE_OK, &nbad, msg, sizeof msg);
    b = g, b.a_scale = &blk_a;
    expect_same("block a_scale [P, 3]", &b, &out, MOE_ERR_SHAPE, &nbad, msg, sizeof msg);
    b = g, b.w_scale = &blk_w;
    expect_same("block w_scale [E, 2, 3]", &b, &out, MOE_ERR_SHAPE, &nbad, msg, sizeof msg);
    b = g, b.a_scale = &blk_ad;
    expect_same("block a_scale e8m0", &b, &out, MOE_ERR_DTYPE, &nbad, msg, sizeof msg);
    {
        moe_tensor a0 = tt_new(MOE_E4M3, 2, 0, 256, 0), re0 = tt_new(MOE_I32, 1, 0, 0, 0), o0 = tt_new(MOE_F32, 2, 0, 130, 0);
        b = g, b.a = &a0, b.row_expert = &re0, b.a_scale = &blk_a;
        expect_same("block P = 0 (nothing read)", &b, &o0, MOE_OK, &nbad, msg, sizeof msg);
        moe_tensor_free(&a0), moe_tensor_free(&re0), moe_tensor_free(&o0);
    }
    release(&c);

    moe_tensor *all[] = {&out, &o_i32, &o_short, &f32_2d, &a3, &re_f, &re_8, &bias_bad, &bias_i32, &w_k, &e8,
                         &sc_p, &wsc_e, &wg_e, &wg_bad, &ag_1, &blk_a, &blk_w, &blk_ad};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) moe_tensor_free(all[i]);
    ck_assert_msg(nbad == 0, "%d cases differ:%s", nbad, msg);
}
END_TEST

static Suite *cpu_gemm_suite(void)
{
    Suite *s = suite_create("cpu_gemm");
    TCase *tc = tcase_create("grouped");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, every_scheme_within_bound, 0, MOE_SCHEME_COUNT);
    tcase_add_loop_test(tc, one_hot_products_exact, 0, MOE_SCHEME_COUNT);
    tcase_add_test(tc, planted_error_caught);
    tcase_add_test(tc, threads_within_bound);
    tcase_add_test(tc, bad_input_same_status);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(cpu_gemm_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
