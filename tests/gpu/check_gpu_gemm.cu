/* The CUDA conformance grouped GEMM against the reference, bit for bit:
 * every scheme at a medium shape with odd N, empty experts and zero rows;
 * small and odd shapes (K not a multiple of the 16-wide staging chunk, K =
 * 0 and 1, N = 1, one token, all rows to one expert, no row with an expert,
 * P = 0); NaN and Inf operands (compared by class); an accumulator that
 * underflows to -0; large shapes (Qwen3-30B-A3B and DeepSeek-V3 sized,
 * operands generated on the device) checked on sampled rows of several
 * experts against the reference run on just those rows and experts; and
 * the reference's status and message for bad arguments. Exits 77 (skip)
 * without a CUDA device. */
#include <check.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/format.h"
#include "moe/gemm.h"
#include "moe/ops.h"
#include "moe/rng.h"
#include "optimized/cuda/cuda.h"
#include "gpu_test_util.h"

static float load(moe_dtype dt, const void *p, int64_t i)
{
    if (dt == MOE_BF16) return moe_bf16_to_f32(((const uint16_t *)p)[i]);
    if (dt == MOE_F16) return moe_f16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

static int cls(float x) { return isnan(x) ? 2 : isinf(x) ? 1 : 0; }

/* Byte-identical rows, NaN compared by class (the GPU's NaN payloads are
 * its own); want row r is got row rows[r] (rows NULL: the same row). */
static void compare(const char *what, const moe_tensor *want, const moe_tensor *got, const int64_t *rows,
                    int64_t nrows)
{
    int64_t N = want->shape[1];
    size_t es = want->dtype == MOE_F32 ? 4 : 2;
    int64_t bad = 0, first_r = -1, first_n = -1;
    for (int64_t r = 0; r < nrows; r++) {
        int64_t gr = rows ? rows[r] : r;
        for (int64_t n = 0; n < N; n++) {
            float a = load(want->dtype, want->data, r * N + n), b = load(got->dtype, got->data, gr * N + n);
            int same = cls(a) == 2 ? cls(b) == 2
                                   : !memcmp((const uint8_t *)want->data + (size_t)(r * N + n) * es,
                                             (const uint8_t *)got->data + (size_t)(gr * N + n) * es, es);
            if (!same && bad++ == 0) first_r = gr, first_n = n;
        }
    }
    if (bad) {
        int64_t r = rows ? -1 : first_r;
        for (int64_t i = 0; rows && i < nrows; i++)
            if (rows[i] == first_r) r = i;
        float a = load(want->dtype, want->data, r * N + first_n), b = load(got->dtype, got->data, first_r * N + first_n);
        ck_abort_msg("%s: %lld outputs differ; first row %lld col %lld: reference %a, gpu %a", what, (long long)bad,
                     (long long)first_r, (long long)first_n, (double)a, (double)b);
    }
}

/* A full problem on the host, and its device copy. */
typedef struct {
    moe_scheme sc;
    moe_tensor a, asc, ag, w, wsc, wg, re, bias;
    int has_asc, has_ag, has_wsc, has_wg, has_bias;
} problem;

static moe_gemm_args args_of(const problem *pb, const moe_tensor *t /* a, asc, ag, w, wsc, wg, re, bias */)
{
    moe_gemm_args g;
    memset(&g, 0, sizeof g);
    g.scheme = pb->sc;
    g.a = &t[0], g.a_scale = pb->has_asc ? &t[1] : NULL, g.a_global = pb->has_ag ? &t[2] : NULL;
    g.w = &t[3], g.w_scale = pb->has_wsc ? &t[4] : NULL, g.w_global = pb->has_wg ? &t[5] : NULL;
    g.row_expert = &t[6], g.bias = pb->has_bias ? &t[7] : NULL;
    return g;
}

static void problem_free(problem *pb)
{
    moe_tensor *all[] = {&pb->a, &pb->asc, &pb->ag, &pb->w, &pb->wsc, &pb->wg, &pb->re, &pb->bias};
    for (int i = 0; i < 8; i++) moe_tensor_free(all[i]);
}

/* Quantized operands from seeded normals through the reference quantizer
 * (as tests/check_gemm.c builds them); row_expert given. */
static problem make_problem(moe_scheme sc, int64_t P, int64_t E, int64_t N, int64_t K, const int32_t *rv,
                            int with_bias, uint64_t seed)
{
    problem pb;
    memset(&pb, 0, sizeof pb);
    pb.sc = sc;
    moe_quant_spec ws, as;
    ck_assert_int_eq(moe_scheme_spec(sc, MOE_OPERAND_WEIGHT, &ws), MOE_OK);
    ck_assert_int_eq(moe_scheme_spec(sc, MOE_OPERAND_ACT, &as), MOE_OK);
    int64_t ashape[2] = {P, K}, wshape[3] = {E, N, K};
    moe_tensor af = gpu_hnew_sh(MOE_F32, 2, ashape), wf = gpu_hnew_sh(MOE_F32, 3, wshape);
    moe_tensor_fill_normal(&af, seed, 1, 0.0f, 1.0f);
    moe_tensor_fill_normal(&wf, seed, 2, 0.0f, 0.5f);
    const moe_quant_spec *sp[2] = {&as, &ws};
    moe_tensor *src[2] = {&af, &wf}, *q[2] = {&pb.a, &pb.w}, *s[2] = {&pb.asc, &pb.wsc}, *gl[2] = {&pb.ag, &pb.wg};
    for (int i = 0; i < 2; i++) {
        if (sp[i]->gran == MOE_GRAN_NONE) { /* a plain cast, RNE */
            *q[i] = gpu_hnew_sh(sp[i]->elem, src[i]->ndim, src[i]->shape);
            for (int64_t k = 0; k < moe_tensor_numel(src[i]); k++) {
                float v = ((float *)src[i]->data)[k];
                if (sp[i]->elem == MOE_F32) ((float *)q[i]->data)[k] = v;
                else if (sp[i]->elem == MOE_BF16) ((uint16_t *)q[i]->data)[k] = moe_f32_to_bf16(v, MOE_POLICY_IEEE_RNE, NULL);
                else ((uint16_t *)q[i]->data)[k] = moe_f32_to_f16(v, MOE_POLICY_IEEE_RNE, NULL);
            }
            continue;
        }
        ck_assert_int_eq(moe_quant_alloc(sp[i], src[i]->ndim, src[i]->shape, q[i], s[i], gl[i]), MOE_OK);
        ck_assert_msg(moe_ref_quantize(sp[i], src[i], NULL, q[i], s[i], sp[i]->use_global_scale ? gl[i] : NULL) == MOE_OK,
                      "%s", moe_last_error());
    }
    pb.has_asc = as.gran != MOE_GRAN_NONE, pb.has_wsc = ws.gran != MOE_GRAN_NONE;
    pb.has_ag = as.use_global_scale, pb.has_wg = ws.use_global_scale;
    int64_t rs[1] = {P}, bs[2] = {E, N};
    pb.re = gpu_hnew_sh(MOE_I32, 1, rs);
    if (P) memcpy(pb.re.data, rv, (size_t)P * 4);
    pb.has_bias = with_bias;
    pb.bias = gpu_hnew_sh(MOE_F32, 2, bs);
    moe_tensor_fill_normal(&pb.bias, seed, 3, 0.0f, 1.0f);
    moe_tensor_free(&af), moe_tensor_free(&wf);
    return pb;
}

/* Reference on the host, the GPU on device copies: identical outputs. */
static void run_compare(const char *what, const problem *pb, moe_dtype out_dt)
{
    moe_tensor d[8];
    const moe_tensor *hs[8] = {&pb->a, &pb->asc, &pb->ag, &pb->w, &pb->wsc, &pb->wg, &pb->re, &pb->bias};
    int have[8] = {1, pb->has_asc, pb->has_ag, 1, pb->has_wsc, pb->has_wg, 1, pb->has_bias};
    memset(d, 0, sizeof d);
    for (int i = 0; i < 8; i++)
        if (have[i]) d[i] = gpu_to_dev(hs[i]);
    moe_tensor ht[8] = {pb->a, pb->asc, pb->ag, pb->w, pb->wsc, pb->wg, pb->re, pb->bias};
    moe_gemm_args hg = args_of(pb, ht), dg = args_of(pb, d);
    int64_t os[2] = {pb->a.shape[0], pb->w.shape[1]};
    moe_tensor want = gpu_hnew_sh(out_dt, 2, os), got = gpu_hnew_sh(out_dt, 2, os), dout;
    /* garbage in out: the stages must write every byte the reference writes */
    memset(want.data, 0x5A, want.nbytes), memset(got.data, 0x5A, got.nbytes);
    dout = gpu_to_dev(&got);
    ck_assert_msg(moe_ops_ref.grouped_gemm(&hg, &want) == MOE_OK, "%s: reference: %s", what, moe_last_error());
    ck_assert_msg(moe_cuda_grouped_gemm(&dg, &dout) == MOE_OK, "%s: gpu: %s", what, moe_last_error());
    ck_assert_int_eq(moe_cuda_synchronize(), MOE_OK);
    ck_assert_int_eq(moe_cuda_copy(&got, &dout), MOE_OK);
    compare(what, &want, &got, NULL, os[0]);
    for (int i = 0; i < 8; i++) moe_cuda_free(&d[i]);
    moe_cuda_free(&dout);
    moe_tensor_free(&want), moe_tensor_free(&got);
}

static void random_rows(int32_t *rv, int64_t P, int64_t E, uint64_t seed, int empty_expert)
{
    for (int64_t p = 0; p < P; p++) {
        int32_t e = (int32_t)(moe_rng_u32(seed, 9, (uint64_t)p) % (uint32_t)(E + 1)) - 1; /* -1 .. E-1 */
        if (e == empty_expert) e = (int32_t)((e + 1) % E);
        rv[p] = e;
    }
}

/* ---- every scheme, medium shape ------------------------------------------------ */
START_TEST(every_scheme)
{
    moe_scheme sc = (moe_scheme)_i;
    enum { P = 300, E = 5, N = 257, K = 384 };
    int32_t rv[P];
    random_rows(rv, P, E, 100 + _i, 3); /* expert 3 has no rows */
    static const moe_dtype outs[3] = {MOE_F32, MOE_BF16, MOE_F16};
    problem pb = make_problem(sc, P, E, N, K, rv, _i % 2, 200 + _i);
    char what[96];
    for (int o = 0; o < 3; o++) {
        snprintf(what, sizeof what, "%s out %s bias %d", moe_scheme_name(sc), moe_dtype_get(outs[o])->name, _i % 2);
        run_compare(what, &pb, outs[o]);
    }
    problem_free(&pb);
}
END_TEST

/* ---- small and odd shapes ---------------------------------------------------- */
START_TEST(odd_shapes)
{
    static const moe_scheme scs[] = {MOE_SCHEME_F32, MOE_SCHEME_BF16, MOE_SCHEME_F16, MOE_SCHEME_FP8_WCHANNEL_ATOKEN,
                                     MOE_SCHEME_INT8_WCHANNEL_ATOKEN, MOE_SCHEME_FP8_WTENSOR_ATENSOR};
    static const int64_t shapes[][4] = { /* P, E, N, K */
        {3, 2, 5, 37}, {1, 1, 1, 1}, {7, 3, 1, 17}, {65, 2, 129, 0}, {130, 1, 131, 33}, {0, 2, 4, 8},
        {9, 4, 200, 15}, {200, 3, 3, 100}};
    for (size_t s = 0; s < sizeof scs / sizeof scs[0]; s++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            int64_t P = shapes[i][0], E = shapes[i][1], N = shapes[i][2], K = shapes[i][3];
            if (s >= 3 && (P == 0 || K == 0)) continue; /* empty operands: unscaled schemes only */
            int32_t *rv = (int32_t *)malloc(sizeof(int32_t) * (size_t)(P + 1));
            random_rows(rv, P, E, 7 + i, -1);
            if (i == 4)
                for (int64_t p = 0; p < P; p++) rv[p] = 0; /* all rows to one expert */
            problem pb = make_problem(scs[s], P, E, N, K, rv, (int)(i % 2), 300 + i);
            char what[96];
            snprintf(what, sizeof what, "%s P %lld E %lld N %lld K %lld", moe_scheme_name(scs[s]), (long long)P,
                     (long long)E, (long long)N, (long long)K);
            run_compare(what, &pb, i % 3 == 0 ? MOE_F32 : MOE_BF16);
            if (P > 0) { /* no row with an expert */
                for (int64_t p = 0; p < P; p++) ((int32_t *)pb.re.data)[p] = -1;
                run_compare(what, &pb, MOE_F16);
            }
            problem_free(&pb);
            free(rv);
        }
}
END_TEST

/* NaN and Inf operands (f32 and bf16 schemes) and an accumulator that
 * underflows to -0 (a padded fmaf(0, 0, -0) would give +0). */
START_TEST(nonfinite_and_negative_zero)
{
    enum { P = 70, E = 2, N = 140, K = 40 };
    int32_t rv[P];
    random_rows(rv, P, E, 11, -1);
    for (int sc = MOE_SCHEME_F32; sc <= MOE_SCHEME_BF16; sc++) {
        problem pb = make_problem((moe_scheme)sc, P, E, N, K, rv, 1, 400);
        for (int64_t i = 0; i < P * K; i += 37) {
            float v = i % 3 == 0 ? NAN : i % 3 == 1 ? INFINITY : -INFINITY;
            if (sc == MOE_SCHEME_F32) ((float *)pb.a.data)[i] = v;
            else ((uint16_t *)pb.a.data)[i] = moe_f32_to_bf16(v, MOE_POLICY_IEEE_RNE, NULL);
        }
        for (int64_t i = 5; i < E * N * K; i += 101) {
            float v = i % 2 ? INFINITY : NAN;
            if (sc == MOE_SCHEME_F32) ((float *)pb.w.data)[i] = v;
            else ((uint16_t *)pb.w.data)[i] = moe_f32_to_bf16(v, MOE_POLICY_IEEE_RNE, NULL);
        }
        run_compare(moe_scheme_name((moe_scheme)sc), &pb, MOE_F32);
        run_compare(moe_scheme_name((moe_scheme)sc), &pb, MOE_BF16);
        problem_free(&pb);
    }
    /* -0: every product -2^-160 (rounds to -0 from +0), K = 17 (a chunk tail) */
    const int32_t zeros[3] = {0, 0, 0};
    problem pb = make_problem(MOE_SCHEME_F32, 3, 1, 5, 17, zeros, 0, 1);
    for (int i = 0; i < 3 * 17; i++) ((float *)pb.a.data)[i] = -0x1p-80f;
    for (int i = 0; i < 5 * 17; i++) ((float *)pb.w.data)[i] = 0x1p-80f;
    run_compare("negative zero", &pb, MOE_F32);
    problem_free(&pb);
}
END_TEST

/* ---- large shapes: device-generated operands, sampled rows ---------------------- */
__device__ uint32_t hash32(uint64_t seed, uint64_t i)
{
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 0x94D049BB133111EBull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)(z ^ (z >> 31));
}

/* Element codes by kind: 0 random bytes (int8; int4 and e2m1 nibbles:
 * every code valid); 7 e4m3 bytes with the NaN codes moved to +-448; 1 bf16
 * of magnitude < 4; 6 f32 of magnitude < 2; 2 f32 scales in [2^-9, 2^-7);
 * 3 e8m0 codes 120..127 (2^-7 .. 1); 4 e4m3 scale codes 0x30..0x4F
 * (positive, finite); 5 f32 globals in [64, 128). */
__global__ void fill_kernel(uint8_t *p, int64_t nbytes, int kind, uint64_t seed)
{
    int es = kind == 1 ? 2 : (kind == 2 || kind == 5 || kind == 6) ? 4 : 1;
    int64_t n = nbytes / es;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        uint32_t h = hash32(seed, (uint64_t)i);
        if (kind == 0) p[i] = (uint8_t)h;
        else if (kind == 7) p[i] = (h & 0x7F) == 0x7F ? (uint8_t)((h & 0x80) | 0x7E) : (uint8_t)h;
        else if (kind == 3) p[i] = (uint8_t)(120 + (h & 7));
        else if (kind == 4) p[i] = (uint8_t)(0x30 + (h & 0x1F));
        else if (kind == 1) ((uint16_t *)p)[i] = (uint16_t)(((h >> 31) << 15) | ((120 + (h >> 8) % 9) << 7) | (h & 0x7F));
        else if (kind == 2) ((uint32_t *)p)[i] = (118u + (h & 1)) << 23 | (h >> 9);
        else if (kind == 5) ((uint32_t *)p)[i] = 133u << 23 | (h >> 9);
        else ((uint32_t *)p)[i] = (h & 0x80000000u) | (112u + (h & 15)) << 23 | ((h >> 8) & 0x7FFFFFu);
    }
}

static void dev_fill(moe_tensor *t, int kind, uint64_t seed)
{
    fill_kernel<<<1024, 256>>>((uint8_t *)t->data, (int64_t)t->nbytes, kind, seed);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
}

static int elem_kind(moe_dtype d)
{
    if (d == MOE_BF16) return 1;
    if (d == MOE_F32) return 6;
    if (d == MOE_E4M3) return 7;
    return 0; /* i8, i4, e2m1: every code */
}
static int scale_kind(moe_dtype d) { return d == MOE_F32 ? 2 : d == MOE_E8M0 ? 3 : 4; }

/* Bytes [off, off + n) of a device tensor into host memory at dst. */
static void pull(void *dst, const moe_tensor *d, size_t off, size_t n)
{
    ck_assert_int_eq(cudaMemcpy(dst, (const uint8_t *)d->data + off, n, cudaMemcpyDeviceToHost), cudaSuccess);
}

static void large_case(moe_scheme sc, int64_t M, int topk, int64_t E, int64_t N, int64_t K, moe_dtype out_dt, int with_bias)
{
    /* small mode: 64 tokens, 16 experts, N 256, K 512 (every scheme's
     * tiles already run in every_scheme; this keeps the large path's row
     * selection and zero rows) */
    M = gpu_small_cap(M, 64), E = gpu_small_cap(E, 16), N = gpu_small_cap(N, 256), K = gpu_small_cap(K, 512);
    moe_quant_spec ws, as;
    moe_scheme_spec(sc, MOE_OPERAND_WEIGHT, &ws);
    moe_scheme_spec(sc, MOE_OPERAND_ACT, &as);
    int64_t P = M * topk, ashape[2] = {P, K}, wshape[3] = {E, N, K};
    moe_quant_dims ad, wd;
    ck_assert_int_eq(moe_quant_shapes(&as, 2, ashape, &ad), MOE_OK);
    ck_assert_int_eq(moe_quant_shapes(&ws, 3, wshape, &wd), MOE_OK);
    moe_tensor d[8], dout;
    memset(d, 0, sizeof d);
    ck_assert_int_eq(moe_cuda_alloc(&d[0], ad.q_dtype, ad.q_ndim, ad.q_shape), MOE_OK);
    ck_assert_int_eq(moe_cuda_alloc(&d[3], wd.q_dtype, wd.q_ndim, wd.q_shape), MOE_OK);
    dev_fill(&d[0], elem_kind(ad.q_dtype), 1);
    dev_fill(&d[3], elem_kind(wd.q_dtype), 2);
    /* each optional tensor: allocated with the quant stage's shape, filled */
    struct { int has, idx; moe_dtype dt; int ndim; const int64_t *shape; int kind; } opt[5] = {
        {ad.has_scale, 1, ad.scale_dtype, ad.scale_ndim, ad.scale_shape, scale_kind(ad.scale_dtype)},
        {ad.has_global, 2, MOE_F32, ad.global_ndim, ad.global_shape, 5},
        {wd.has_scale, 4, wd.scale_dtype, wd.scale_ndim, wd.scale_shape, scale_kind(wd.scale_dtype)},
        {wd.has_global, 5, MOE_F32, wd.global_ndim, wd.global_shape, 5},
        {with_bias, 7, MOE_F32, 2, NULL, 6}};
    int64_t bs[2] = {E, N}, os[2] = {P, N};
    opt[4].shape = bs;
    for (int i = 0; i < 5; i++)
        if (opt[i].has) {
            ck_assert_int_eq(moe_cuda_alloc(&d[opt[i].idx], opt[i].dt, opt[i].ndim, opt[i].shape), MOE_OK);
            dev_fill(&d[opt[i].idx], opt[i].kind, 3 + (uint64_t)i);
        }
    /* rows: the flattened top-k ids of M tokens, 2% dropped (-1) */
    int32_t *rv = (int32_t *)malloc(sizeof(int32_t) * (size_t)P);
    ck_assert_int_eq(moe_rng_topk_ids(rv, M, topk, (int)E, 77, moe_rng_stream_id("check_gpu_gemm"), 2, 1), MOE_OK);
    int64_t rs[1] = {P};
    moe_tensor hre;
    ck_assert_int_eq(moe_tensor_wrap(&hre, MOE_I32, 1, rs, rv, (size_t)P * 4, (moe_device){MOE_DEVICE_HOST, 0}), MOE_OK);
    d[6] = gpu_to_dev(&hre);
    ck_assert_int_eq(moe_cuda_alloc(&dout, out_dt, 2, os), MOE_OK);
    problem meta;
    memset(&meta, 0, sizeof meta);
    meta.sc = sc, meta.has_asc = ad.has_scale, meta.has_ag = ad.has_global, meta.has_wsc = wd.has_scale;
    meta.has_wg = wd.has_global, meta.has_bias = with_bias;
    moe_gemm_args dg = args_of(&meta, d);
    cudaEvent_t t0, t1;
    cudaEventCreate(&t0), cudaEventCreate(&t1);
    cudaEventRecord(t0, cudaStreamPerThread);
    ck_assert_msg(moe_cuda_grouped_gemm(&dg, &dout) == MOE_OK, "%s", moe_last_error());
    cudaEventRecord(t1, cudaStreamPerThread);
    ck_assert_int_eq(moe_cuda_synchronize(), MOE_OK);
    float ms = 0;
    cudaEventElapsedTime(&ms, t0, t1);
    printf("check_gpu_gemm: %s P %lld E %lld N %lld K %lld: %.2f ms, %.1f TFLOP/s\n", moe_scheme_name(sc),
           (long long)P, (long long)E, (long long)N, (long long)K, ms, 2.0 * P * N * K / (ms * 1e-3) / 1e12);

    /* the sample: up to 8 rows (first, last, spread) of 4 experts (lowest,
     * most rows, highest, and one in between) and 2 rows of no expert */
    int64_t *cnt = (int64_t *)calloc((size_t)E, sizeof(int64_t));
    for (int64_t p = 0; p < P; p++)
        if (rv[p] >= 0) cnt[rv[p]]++;
    int64_t ex[4] = {-1, -1, -1, -1};
    for (int64_t e = 0; e < E; e++)
        if (cnt[e]) {
            if (ex[0] < 0) ex[0] = e;
            ex[2] = e;
            if (ex[1] < 0 || cnt[e] > cnt[ex[1]]) ex[1] = e;
        }
    ex[3] = E / 2 + 1 < E && cnt[E / 2 + 1] ? E / 2 + 1 : ex[0];
    int64_t sub_e[4], ne = 0;
    for (int i = 0; i < 4; i++) {
        int dup = 0;
        for (int j = 0; j < ne; j++) dup |= sub_e[j] == ex[i];
        if (!dup) sub_e[ne++] = ex[i];
    }
    int64_t rows[40], nr = 0, zr[2], nz = 0;
    int32_t rre[40];
    for (int64_t i = 0; i < ne; i++) {
        int64_t c = cnt[sub_e[i]], want = c < 8 ? c : 8, seen = 0;
        for (int64_t p = 0, j = 0; p < P && j < want; p++)
            if (rv[p] == sub_e[i]) {
                if (seen == (j * (c - 1)) / (want > 1 ? want - 1 : 1)) rows[nr] = p, rre[nr++] = (int32_t)i, j++;
                seen++;
            }
    }
    for (int64_t p = 0; p < P && nz < 2; p++)
        if (rv[p] < 0) zr[nz++] = p;
    /* the sub-problem on the host: those rows, those experts */
    moe_quant_dims sad, swd;
    int64_t sash[2] = {nr, K}, swsh[3] = {ne, N, K};
    moe_quant_shapes(&as, 2, sash, &sad);
    moe_quant_shapes(&ws, 3, swsh, &swd);
    moe_tensor h[8];
    memset(h, 0, sizeof h);
    h[0] = gpu_hnew_sh(sad.q_dtype, 2, sad.q_shape);
    size_t rb = moe_dtype_row_bytes(sad.q_dtype, K);
    for (int64_t r = 0; r < nr; r++) pull((uint8_t *)h[0].data + r * rb, &d[0], (size_t)rows[r] * rb, rb);
    if (ad.has_scale) {
        h[1] = gpu_hnew_sh(sad.scale_dtype, sad.scale_ndim, sad.scale_shape);
        size_t es = moe_dtype_get(sad.scale_dtype)->bits / 8;
        if (as.gran == MOE_GRAN_TENSOR) {
            pull(h[1].data, &d[1], 0, h[1].nbytes);
        } else if (as.layout == MOE_SF_SWIZZLE_128X4) {
            int64_t SC = K / as.group_k;
            uint8_t *full = (uint8_t *)malloc(d[1].nbytes);
            pull(full, &d[1], 0, d[1].nbytes);
            for (int64_t r = 0; r < nr; r++)
                for (int64_t c = 0; c < SC; c++)
                    ((uint8_t *)h[1].data)[moe_sf_offset_128x4(r, c, SC)] = full[moe_sf_offset_128x4(rows[r], c, SC)];
            free(full);
        } else { /* linear rows of scales */
            size_t srb = (size_t)ad.scale_shape[1] * es;
            for (int64_t r = 0; r < nr; r++) pull((uint8_t *)h[1].data + r * srb, &d[1], (size_t)rows[r] * srb, srb);
        }
    }
    if (ad.has_global) h[2] = gpu_hnew_sh(MOE_F32, 1, sad.global_shape), pull(h[2].data, &d[2], 0, 4);
    h[3] = gpu_hnew_sh(swd.q_dtype, 3, swd.q_shape);
    if (wd.has_scale) h[4] = gpu_hnew_sh(swd.scale_dtype, swd.scale_ndim, swd.scale_shape);
    if (wd.has_global) h[5] = gpu_hnew_sh(MOE_F32, 1, swd.global_shape);
    int64_t sbs[2] = {ne, N};
    if (with_bias) h[7] = gpu_hnew_sh(MOE_F32, 2, sbs);
    for (int64_t i = 0; i < ne; i++) {
        int idx[4] = {3, 4, 5, 7};
        for (int j = 0; j < 4; j++) {
            moe_tensor *hs = &h[idx[j]];
            const moe_tensor *ds = &d[idx[j]];
            if (!hs->data) continue;
            size_t sl = ds->nbytes / (size_t)E;
            ck_assert_uint_eq(sl, hs->nbytes / (size_t)ne);
            pull((uint8_t *)hs->data + i * sl, ds, (size_t)sub_e[i] * sl, sl);
        }
    }
    moe_tensor hre2;
    int64_t nrs[1] = {nr};
    ck_assert_int_eq(moe_tensor_wrap(&hre2, MOE_I32, 1, nrs, rre, (size_t)nr * 4, (moe_device){MOE_DEVICE_HOST, 0}), MOE_OK);
    h[6] = hre2;
    moe_gemm_args hg = args_of(&meta, h);
    int64_t sos[2] = {nr, N};
    moe_tensor want = gpu_hnew_sh(out_dt, 2, sos), got = gpu_hnew_sh(out_dt, 2, os);
    ck_assert_msg(moe_ops_ref.grouped_gemm(&hg, &want) == MOE_OK, "reference: %s", moe_last_error());
    size_t orb = (size_t)N * (out_dt == MOE_F32 ? 4 : 2);
    for (int64_t r = 0; r < nr; r++) pull((uint8_t *)got.data + rows[r] * orb, &dout, (size_t)rows[r] * orb, orb);
    char what[128];
    snprintf(what, sizeof what, "%s large P %lld N %lld K %lld", moe_scheme_name(sc), (long long)P, (long long)N, (long long)K);
    compare(what, &want, &got, rows, nr);
    for (int64_t z = 0; z < nz; z++) { /* rows of no expert are zero */
        uint8_t *buf = (uint8_t *)calloc(orb, 1), *zero = (uint8_t *)calloc(orb, 1);
        pull(buf, &dout, (size_t)zr[z] * orb, orb);
        ck_assert_msg(!memcmp(buf, zero, orb), "%s: row %lld of no expert is not zero", what, (long long)zr[z]);
        free(buf), free(zero);
    }
    for (int i = 0; i < 8; i++) {
        if (i != 6) moe_tensor_free(&h[i]);
        moe_cuda_free(&d[i]);
    }
    moe_cuda_free(&dout);
    moe_tensor_free(&want), moe_tensor_free(&got);
    free(cnt), free(rv);
    cudaEventDestroy(t0), cudaEventDestroy(t1);
}

START_TEST(large_shapes)
{
    /* Qwen3-30B-A3B GEMM1 at M = 4096 (E 128, N 2 x 768, K 2048) */
    large_case(MOE_SCHEME_BF16, 4096, 8, 128, 1536, 2048, MOE_BF16, 0);
    large_case(MOE_SCHEME_FP8_WBLOCK128_AGROUP128, 4096, 8, 128, 1536, 2048, MOE_BF16, 0);
    large_case(MOE_SCHEME_NVFP4, 4096, 8, 128, 1536, 2048, MOE_BF16, 1);
    large_case(MOE_SCHEME_W4A16_G128, 4096, 8, 128, 1536, 2048, MOE_BF16, 0);
    large_case(MOE_SCHEME_MXFP4_MXFP8, 2048, 8, 128, 1536, 2048, MOE_F32, 0);
    large_case(MOE_SCHEME_FP8_WCHANNEL_ATOKEN, 2048, 8, 128, 2048, 768, MOE_BF16, 1); /* GEMM2-like */
    /* DeepSeek-V3 sized: E 256, N 2 x 2048, K 7168 */
    large_case(MOE_SCHEME_FP8_WBLOCK128_AGROUP128, 2048, 8, 256, 4096, 7168, MOE_BF16, 0);
}
END_TEST

/* ---- bad arguments: the reference's status and message ------------------------ */
static void same_error(const char *what, const moe_gemm_args *hg, moe_tensor *hout, const moe_gemm_args *dg,
                       moe_tensor *dout)
{
    GPU_SAME_ERROR(what, moe_ops_ref.grouped_gemm(hg, hout), moe_cuda_grouped_gemm(dg, dout));
}

START_TEST(bad_arguments)
{
    int32_t rv[6] = {0, 1, -1, 2, 0, 1};
    problem pb = make_problem(MOE_SCHEME_FP8_WCHANNEL_ATOKEN, 6, 3, 8, 32, rv, 1, 9);
    moe_tensor d[8];
    const moe_tensor *hs[8] = {&pb.a, &pb.asc, &pb.ag, &pb.w, &pb.wsc, &pb.wg, &pb.re, &pb.bias};
    int have[8] = {1, pb.has_asc, pb.has_ag, 1, pb.has_wsc, pb.has_wg, 1, 1};
    memset(d, 0, sizeof d);
    for (int i = 0; i < 8; i++)
        if (have[i]) d[i] = gpu_to_dev(hs[i]);
    moe_tensor ht[8] = {pb.a, pb.asc, pb.ag, pb.w, pb.wsc, pb.wg, pb.re, pb.bias};
    int64_t os[2] = {6, 8};
    moe_tensor hout = gpu_hnew_sh(MOE_BF16, 2, os), dout;
    ck_assert_int_eq(moe_cuda_alloc(&dout, MOE_BF16, 2, os), MOE_OK);
    moe_gemm_args hg = args_of(&pb, ht), dg = args_of(&pb, d);

    same_error("NULL args", NULL, &hout, NULL, &dout);
    hg.scheme = dg.scheme = MOE_SCHEME_BF16; /* a is e4m3 */
    same_error("wrong scheme", &hg, &hout, &dg, &dout);
    hg.scheme = dg.scheme = (moe_scheme)99;
    same_error("unknown scheme", &hg, &hout, &dg, &dout);
    hg.scheme = dg.scheme = pb.sc;
    hg.a_scale = dg.a_scale = NULL;
    same_error("missing a_scale", &hg, &hout, &dg, &dout);
    hg.a_scale = &ht[1], dg.a_scale = &d[1];
    /* a row_expert out of range */
    moe_tensor bad_re = pb.re;
    int32_t bv[6] = {0, 1, -1, 3, 0, 1};
    bad_re.data = bv, bad_re.owns = 0;
    moe_tensor dbad = gpu_to_dev(&bad_re);
    hg.row_expert = &bad_re, dg.row_expert = &dbad;
    same_error("row_expert out of range", &hg, &hout, &dg, &dout);
    hg.row_expert = &ht[6], dg.row_expert = &d[6];
    /* wrong out shape */
    int64_t os2[2] = {6, 9};
    moe_tensor hout2 = gpu_hnew_sh(MOE_BF16, 2, os2), dout2;
    ck_assert_int_eq(moe_cuda_alloc(&dout2, MOE_BF16, 2, os2), MOE_OK);
    same_error("out shape", &hg, &hout2, &dg, &dout2);
    /* a wrong scale shape (checked on the dequantization arguments) */
    moe_tensor hsc = pb.asc, dsc = d[1];
    hsc.shape[0] = dsc.shape[0] = 5;
    hg.a_scale = &hsc, dg.a_scale = &dsc;
    same_error("a_scale shape", &hg, &hout, &dg, &dout);
    hg.a_scale = &ht[1], dg.a_scale = &d[1];
    /* host memory where device memory is required */
    dg.w = &pb.w;
    ck_assert_int_eq(moe_cuda_grouped_gemm(&dg, &dout), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "w: host memory"));
    dg.w = &d[3];
    ck_assert_int_eq(moe_cuda_grouped_gemm(&dg, &hout), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "out: host memory"));
    /* and the good call still works */
    ck_assert_msg(moe_cuda_grouped_gemm(&dg, &dout) == MOE_OK, "%s", moe_last_error());
    ck_assert_int_eq(moe_cuda_synchronize(), MOE_OK);
    for (int i = 0; i < 8; i++) moe_cuda_free(&d[i]);
    moe_cuda_free(&dout), moe_cuda_free(&dout2), moe_cuda_free(&dbad);
    moe_tensor_free(&hout), moe_tensor_free(&hout2);
    problem_free(&pb);
}
END_TEST

static void add_tests(Suite *s)
{
    TCase *tc = gpu_tcase(s, "grouped_gemm", 300);
    tcase_add_loop_test(tc, every_scheme, 0, MOE_SCHEME_COUNT);
    tcase_add_test(tc, odd_shapes);
    tcase_add_test(tc, nonfinite_and_negative_zero);
    tcase_add_test(tc, bad_arguments);
    tcase_add_test(tc, large_shapes);
}

int main(void)
{
    return gpu_test_main("check_gpu_gemm", "gpu_gemm", add_tests);
}
