/* CPU backend: grouped_gemm. BOUNDED against the reference (tolerance row
 * cpu.grouped_gemm, moe_gemm_bound): the operands are the reference's own
 * values, bit for bit, and only the summation order inside each dot
 * product changes (OpenBLAS blocks, splits K and uses FMA in its own order).
 *
 * Operands, per moe_gemm_numerics_of(scheme) (include/moe/gemm.h):
 *   DEQUANT_F32    a and w dequantized as moe_ref_dequantize does:
 *                  decode(q) * scale, one f32 rounding, every scale layout's
 *                  scale read through the reference's own index and code
 *                  functions (quant_internal.h); then one f32 GEMM.
 *   WEIGHT_TO_ACT  w dequantized the same way, then rounded to the
 *                  activation dtype (RNE); a as stored; one f32 GEMM.
 *   BLOCK_TILES    decoded elements; per 128-wide k tile t one sgemm gives
 *                  T, then acc = acc + (T * a_scale[p, t]) * w_scale[e,
 *                  n/128, t] in the reference's order, from acc = +0.
 * Then acc (+ bias[e, n] in f32) is rounded once to out's dtype; rows
 * whose row_expert is -1 are zero. Decoding is exact by construction:
 * tables built once from the reference decoders (int8, f16, the e2m1 /
 * int4 nibbles), bit operations (bf16 is a 16-bit shift; bf16 RNE is the
 * carry trick, equal to the reference for all 2^32 non-NaN inputs, NaN
 * through the reference), and e4m3 by integer arithmetic, compared with
 * the reference decoder's 256 values when the tables are built (the table
 * is used if they ever differ). tests/check_cpu_gemm.c checks one-hot
 * products bit for bit for every scheme.
 *
 * Grouping: rows are bucketed by expert (ascending row within an expert)
 * and their activations gathered, as f32, into one contiguous block per
 * expert. The work items are (expert with rows, chunk of nb weight rows):
 * the chunk is dequantized into a per-thread f32 scratch of ~1 MiB (it
 * stays in the core's L2 while sgemm packs it), then cblas_sgemm
 * (RowMajor, A_e [n_e, K] x W_chunk^T) and the bias + rounding scatter
 * into out's rows. Only experts with rows are dequantized.
 * Why dequantized chunks and not whole experts, nor per-expert batches of
 * f32 weights: at Qwen3-30B-A3B's shape with 256 tokens (~16 rows per
 * expert) the GEMM is bound by reading the weights; a whole dequantized
 * expert (12 MiB f32) would go to DRAM and back, a chunk does not, so the
 * dequantization costs one read of the quantized weights (2 or 1 bytes an
 * element where an f32 sgemm reads 4) and the GEMM runs at 0.9 to 1.0 of
 * plain sgemm on already-f32 weights. Measured split at that shape (bf16,
 * GEMM1, 2 cores): weight dequantization ~20% of the thread time, sgemm
 * ~80%, the activation gather and the output scatter ~1% each; at 4096
 * tokens sgemm is ~93%.
 *
 * Threading: OpenMP over the work items (dynamic schedule), each sgemm
 * single-threaded (OpenBLAS's OpenMP build runs a call made inside a
 * parallel region on the calling thread). Measured at Qwen3's shape on 2
 * cores: items beat OpenBLAS threading each call (items in order,
 * dequantization parallel per chunk) by 2x at M = 256 (16-row calls do not
 * split well and every call synchronises) and were never slower at
 * M = 4096; plain sgemm per expert shows the same (threads over experts
 * 1.4x faster than OpenBLAS's threads at M = 256, equal at M = 4096). The
 * chunks also keep both cores busy when few experts have rows.
 *
 * No weight caching across calls: a caller may reuse a weight buffer with
 * new contents and moe_tensor carries no version, so a cache would need a
 * full read (hash) of the weights per call, which costs as much as the
 * chunked dequantization it would save. Only the gathered-activation
 * workspace is kept between calls (see ws_take). */
#define _DEFAULT_SOURCE /* madvise(MADV_HUGEPAGE) */
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <cblas.h>
#include "cpu.h"
#include "elem.h"
#include "moe/format.h"
#include "quant_internal.h"
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define GEMM_X86 1
#endif

/* ---- decode tables (built from the reference decoders) ------------------ */
static float tab_e4m3[256], tab_i8[256], tab_e2m1[16], tab_i4[16];
static float tab_f16[65536];
static int have_avx2, e4m3_arith;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
#ifdef GEMM_X86
__attribute__((target("avx2"))) static void dec_e4m3_avx2(const uint8_t *s, int64_t n, float *d);
#endif

static void build_tables(void)
{
    for (int c = 0; c < 256; c++) {
        tab_e4m3[c] = moe_e4m3_to_f32((uint8_t)c);
        tab_i8[c] = (float)(int8_t)(uint8_t)c;
    }
    for (int c = 0; c < 16; c++) {
        tab_e2m1[c] = moe_e2m1_to_f32((uint8_t)c);
        tab_i4[c] = (float)(c - ((c & 8) ? 16 : 0));
    }
    for (int c = 0; c < 65536; c++) tab_f16[c] = moe_f16_to_f32((uint16_t)c);
#ifdef GEMM_X86
    __builtin_cpu_init();
    have_avx2 = __builtin_cpu_supports("avx2") != 0;
    if (have_avx2) { /* the arithmetic e4m3 decoder must give the reference's bits for all 256 codes */
        uint8_t codes[256];
        float got[256];
        for (int c = 0; c < 256; c++) codes[c] = (uint8_t)c;
        dec_e4m3_avx2(codes, 256, got);
        e4m3_arith = !memcmp(got, tab_e4m3, sizeof got);
    }
#endif
}

static inline float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* bf16 RNE with IEEE overflow (MOE_POLICY_IEEE_RNE), as f32 bits: the
 * carry trick is exact for every non-NaN input (bf16 has f32's exponent
 * range, so subnormals and overflow to Inf round on the bit pattern). */
static inline uint32_t rne_bf16_bits(float x)
{
    if (isnan(x)) return f32_bits(moe_s_round_to(MOE_BF16, x));
    uint32_t u = f32_bits(x);
    return (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
}

/* ---- row kernels: scalar, and AVX2 where the CPU has it ----------------- */
static void dec_bf16_scalar(const uint16_t *s, int64_t n, float *d)
{
    for (int64_t k = 0; k < n; k++) d[k] = bits_f32((uint32_t)s[k] << 16);
}
static void dec_tab8_scalar(const float *tab, const uint8_t *s, int64_t n, float *d)
{
    for (int64_t k = 0; k < n; k++) d[k] = tab[s[k]];
}
/* packed nibbles, low first; element c of the row is in byte c / 2 */
static void dec_nib_scalar(const float *tab16, const uint8_t *s, int64_t n, float *d)
{
    for (int64_t k = 0; k < n; k++) d[k] = tab16[(s[k / 2] >> ((k & 1) * 4)) & 0xF];
}
static void scale_scalar(float *d, int64_t n, float s)
{
    for (int64_t k = 0; k < n; k++) d[k] = d[k] * s;
}
/* BLOCK_TILES: acc = acc + (t * sa) * sw, two products and a sum, each rounded */
static void tile_acc_scalar(float *acc, const float *t, int64_t n, float sa, float sw)
{
    for (int64_t k = 0; k < n; k++) acc[k] = acc[k] + (t[k] * sa) * sw;
}
static void round_bf16_scalar(float *d, int64_t n)
{
    for (int64_t k = 0; k < n; k++) d[k] = bits_f32(rne_bf16_bits(d[k]));
}

#ifdef GEMM_X86
__attribute__((target("avx2"))) static void dec_bf16_avx2(const uint16_t *s, int64_t n, float *d)
{
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + k)));
        _mm256_storeu_ps(d + k, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    }
    dec_bf16_scalar(s + k, n - k, d + k);
}
/* e4m3 by integer arithmetic (no gather, no subnormal f32 arithmetic, so
 * independent of DAZ / FTZ): normals rebias the exponent (bits = em << 20
 * + 120 << 23), subnormals are m * 2^-9 (exact), 0x7F / 0xFF the
 * reference's NaN (sign | 0x7FC00000); the sign is or-ed in. */
__attribute__((target("avx2"))) static void dec_e4m3_avx2(const uint8_t *s, int64_t n, float *d)
{
    const __m256i m7f = _mm256_set1_epi32(0x7F), m80 = _mm256_set1_epi32(0x80), bias = _mm256_set1_epi32(120 << 23);
    const __m256i qnan = _mm256_set1_epi32(0x7FC00000);
    const __m256 sub = _mm256_set1_ps(0x1p-9f);
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(s + k)));
        __m256i em = _mm256_and_si256(x, m7f);
        __m256i nrm = _mm256_add_epi32(_mm256_slli_epi32(em, 20), bias);
        __m256i den = _mm256_castps_si256(_mm256_mul_ps(_mm256_cvtepi32_ps(em), sub)); /* em < 8 here */
        __m256i v = _mm256_blendv_epi8(nrm, den, _mm256_cmpgt_epi32(_mm256_set1_epi32(8), em));
        v = _mm256_blendv_epi8(v, qnan, _mm256_cmpeq_epi32(em, m7f));
        v = _mm256_or_si256(v, _mm256_slli_epi32(_mm256_and_si256(x, m80), 24));
        _mm256_storeu_ps(d + k, _mm256_castsi256_ps(v));
    }
    dec_tab8_scalar(tab_e4m3, s + k, n - k, d + k);
}
__attribute__((target("avx2"))) static void dec_i8_avx2(const uint8_t *s, int64_t n, float *d)
{
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(s + k)));
        _mm256_storeu_ps(d + k, _mm256_cvtepi32_ps(v)); /* exact: |v| <= 128 */
    }
    dec_tab8_scalar(tab_i8, s + k, n - k, d + k);
}
__attribute__((target("avx2"))) static void dec_nib_avx2(const float *tab16, const uint8_t *s, int64_t n, float *d)
{
    const __m256 lo = _mm256_loadu_ps(tab16), hi = _mm256_loadu_ps(tab16 + 8);
    const __m128i dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m256i shifts = _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4), m4 = _mm256_set1_epi32(0xF);
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) { /* 4 bytes -> 8 nibbles */
        int32_t w;
        memcpy(&w, s + k / 2, 4);
        __m128i b = _mm_shuffle_epi8(_mm_cvtsi32_si128(w), dup);
        __m256i idx = _mm256_and_si256(_mm256_srlv_epi32(_mm256_cvtepu8_epi32(b), shifts), m4);
        __m256 vl = _mm256_permutevar8x32_ps(lo, idx), vh = _mm256_permutevar8x32_ps(hi, idx);
        __m256 sel = _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)); /* bit 3 -> sign */
        _mm256_storeu_ps(d + k, _mm256_blendv_ps(vl, vh, sel));
    }
    for (; k < n; k++) d[k] = tab16[(s[k / 2] >> ((k & 1) * 4)) & 0xF];
}
__attribute__((target("avx2"))) static void scale_avx2(float *d, int64_t n, float s)
{
    const __m256 sv = _mm256_set1_ps(s);
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) _mm256_storeu_ps(d + k, _mm256_mul_ps(_mm256_loadu_ps(d + k), sv));
    scale_scalar(d + k, n - k, s);
}
__attribute__((target("avx2"))) static void tile_acc_avx2(float *acc, const float *t, int64_t n, float sa, float sw)
{
    const __m256 va = _mm256_set1_ps(sa), vw = _mm256_set1_ps(sw);
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m256 p = _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(t + k), va), vw);
        _mm256_storeu_ps(acc + k, _mm256_add_ps(_mm256_loadu_ps(acc + k), p));
    }
    tile_acc_scalar(acc + k, t + k, n - k, sa, sw);
}
__attribute__((target("avx2"))) static void round_bf16_avx2(float *d, int64_t n)
{
    const __m256i one = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7FFF);
    const __m256i hi = _mm256_set1_epi32((int)0xFFFF0000u);
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m256 x = _mm256_loadu_ps(d + k);
        if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q))) {
            round_bf16_scalar(d + k, 8);
            continue;
        }
        __m256i u = _mm256_castps_si256(x);
        __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(half, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
        _mm256_storeu_ps(d + k, _mm256_castsi256_ps(_mm256_and_si256(r, hi)));
    }
    round_bf16_scalar(d + k, n - k);
}
#endif

static void dec_bf16(const uint16_t *s, int64_t n, float *d)
{
#ifdef GEMM_X86
    if (have_avx2) return dec_bf16_avx2(s, n, d);
#endif
    dec_bf16_scalar(s, n, d);
}
static void dec_e4m3(const uint8_t *s, int64_t n, float *d)
{
#ifdef GEMM_X86
    if (have_avx2 && e4m3_arith) return dec_e4m3_avx2(s, n, d);
#endif
    dec_tab8_scalar(tab_e4m3, s, n, d);
}
static void dec_i8(const uint8_t *s, int64_t n, float *d)
{
#ifdef GEMM_X86
    if (have_avx2) return dec_i8_avx2(s, n, d);
#endif
    dec_tab8_scalar(tab_i8, s, n, d);
}
static void dec_nib(const float *tab16, const uint8_t *s, int64_t n, float *d)
{
#ifdef GEMM_X86
    if (have_avx2) return dec_nib_avx2(tab16, s, n, d);
#endif
    dec_nib_scalar(tab16, s, n, d);
}
static void scale_span(float *d, int64_t n, float s)
{
#ifdef GEMM_X86
    if (have_avx2) return scale_avx2(d, n, s);
#endif
    scale_scalar(d, n, s);
}
static void tile_acc(float *acc, const float *t, int64_t n, float sa, float sw)
{
#ifdef GEMM_X86
    if (have_avx2) return tile_acc_avx2(acc, t, n, sa, sw);
#endif
    tile_acc_scalar(acc, t, n, sa, sw);
}
/* x = round_to(dt, x) for the WEIGHT_TO_ACT weights (moe_s_round_to) */
static void round_span(moe_dtype dt, float *d, int64_t n)
{
    if (dt == MOE_BF16) {
#ifdef GEMM_X86
        if (have_avx2) return round_bf16_avx2(d, n);
#endif
        return round_bf16_scalar(d, n);
    }
    if (dt == MOE_F16)
        for (int64_t k = 0; k < n; k++) d[k] = moe_s_round_to(MOE_F16, d[k]);
}

/* One row of K elements, decoded (get_elem / moe_s_load / moe_decode_array). */
static void decode_row(moe_dtype dt, const uint8_t *row, int64_t K, float *dst)
{
    switch (dt) {
    case MOE_F32: memcpy(dst, row, (size_t)K * sizeof(float)); return;
    case MOE_BF16: dec_bf16((const uint16_t *)row, K, dst); return;
    case MOE_F16: {
        const uint16_t *s = (const uint16_t *)row;
        for (int64_t k = 0; k < K; k++) dst[k] = tab_f16[s[k]];
        return;
    }
    case MOE_E4M3: dec_e4m3(row, K, dst); return;
    case MOE_I8: dec_i8(row, K, dst); return;
    case MOE_E2M1: dec_nib(tab_e2m1, row, K, dst); return;
    default: dec_nib(tab_i4, row, K, dst); return; /* MOE_I4 */
    }
}

/* ---- one operand matrix (the activations, or one expert's weights) ------ */
typedef struct {
    const moe_quant_spec *sp;
    int scaled;            /* 0: decode only (GRAN_NONE, BLOCK_TILES elements) */
    moe_q_geom geo;        /* of this matrix alone (B = 1), as the reference slices */
    const uint8_t *q;      /* its elements */
    int64_t row_bytes;
    const uint8_t *scale;  /* its scales */
    float gs;              /* NVFP4 global scale (1 when absent) */
} operand;

static int64_t row_bytes_of(moe_dtype dt, int64_t K)
{
    if (moe_dtype_is_packed(dt)) return (K + 1) / 2;
    return K * (int64_t)(moe_dtype_get(dt)->bits / 8);
}

/* the scale (sr, sc) as moe_ref_dequantize reads it */
static float scale_at(const operand *o, int64_t sr, int64_t sc)
{
    return moe_q_scale_at(o->sp, &o->geo, o->scale, 0, sr, sc, o->gs);
}

/* row r of the matrix as f32: decode(q) * scale of its group, one rounding */
static void operand_row(const operand *o, int64_t r, float *dst)
{
    int64_t K = o->geo.K;
    decode_row(o->sp->elem, o->q + r * o->row_bytes, K, dst);
    if (!o->scaled) return;
    int64_t sr = r / o->geo.rh;
    for (int64_t sc = 0; sc < o->geo.SC; sc++) {
        int64_t c0 = sc * o->geo.cw, c1 = c0 + o->geo.cw < K ? c0 + o->geo.cw : K;
        scale_span(dst + c0, c1 - c0, scale_at(o, sr, sc));
    }
}

static void operand_init(operand *o, const moe_quant_spec *sp, int scaled, const moe_tensor *q, int64_t q_off,
                         const moe_tensor *scale, int64_t s_off, const moe_tensor *global, int64_t g_off)
{
    memset(o, 0, sizeof *o);
    o->sp = sp;
    o->scaled = scaled && sp->gran != MOE_GRAN_NONE;
    int64_t shape[3] = {1, q->shape[q->ndim - 2], q->shape[q->ndim - 1]};
    if (o->scaled) moe_q_geometry(sp, "q", sp->operand == MOE_OPERAND_WEIGHT ? 3 : 2,
                                  sp->operand == MOE_OPERAND_WEIGHT ? shape : shape + 1, &o->geo);
    o->geo.K = shape[2];
    o->q = (const uint8_t *)q->data + q_off;
    o->row_bytes = row_bytes_of(q->dtype, shape[2]);
    o->scale = o->scaled ? (const uint8_t *)scale->data + s_off : NULL;
    o->gs = o->scaled && sp->use_global_scale ? *(const float *)((const uint8_t *)global->data + g_off) : 1.0f;
}

/* ---- output: acc (+ bias) rounded once to out's dtype -------------------- */
static void store_f32_scalar(float *o, const float *acc, const float *bias, int64_t n)
{
    for (int64_t k = 0; k < n; k++) o[k] = bias ? acc[k] + bias[k] : acc[k];
}
static void store_bf16_scalar(uint16_t *o, const float *acc, const float *bias, int64_t n)
{
    for (int64_t k = 0; k < n; k++) {
        float v = bias ? acc[k] + bias[k] : acc[k];
        if (isnan(v)) moe_s_store(MOE_BF16, o, k, v);
        else o[k] = (uint16_t)(rne_bf16_bits(v) >> 16);
    }
}
#ifdef GEMM_X86
__attribute__((target("avx2"))) static void store_f32_avx2(float *o, const float *acc, const float *bias, int64_t n)
{
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m256 v = _mm256_loadu_ps(acc + k);
        if (bias) v = _mm256_add_ps(v, _mm256_loadu_ps(bias + k));
        _mm256_storeu_ps(o + k, v);
    }
    store_f32_scalar(o + k, acc + k, bias ? bias + k : NULL, n - k);
}
__attribute__((target("avx2"))) static void store_bf16_avx2(uint16_t *o, const float *acc, const float *bias, int64_t n)
{
    const __m256i one = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7FFF);
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m256 v = _mm256_loadu_ps(acc + k);
        if (bias) v = _mm256_add_ps(v, _mm256_loadu_ps(bias + k));
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
            store_bf16_scalar(o + k, acc + k, bias ? bias + k : NULL, 8);
            continue;
        }
        __m256i u = _mm256_castps_si256(v);
        __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(half, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
        r = _mm256_srli_epi32(r, 16); /* 0 .. 0xFFFF: packus keeps it */
        __m128i h = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
        _mm_storeu_si128((__m128i *)(o + k), h);
    }
    store_bf16_scalar(o + k, acc + k, bias ? bias + k : NULL, n - k);
}
#endif

static void store_row(moe_tensor *out, int64_t p, int64_t N, int64_t n0, const float *acc, int64_t nn,
                      const float *bias)
{
    int64_t base = p * N + n0;
    if (out->dtype == MOE_F32) {
#ifdef GEMM_X86
        if (have_avx2) return store_f32_avx2((float *)out->data + base, acc, bias, nn);
#endif
        store_f32_scalar((float *)out->data + base, acc, bias, nn);
    } else if (out->dtype == MOE_BF16) {
#ifdef GEMM_X86
        if (have_avx2) return store_bf16_avx2((uint16_t *)out->data + base, acc, bias, nn);
#endif
        store_bf16_scalar((uint16_t *)out->data + base, acc, bias, nn);
    } else {
        for (int64_t n = 0; n < nn; n++) moe_s_store(out->dtype, out->data, base + n, bias ? acc[n] + bias[n] : acc[n]);
    }
}

/* The gathered activations' buffer (256 MiB at M = 4096 tokens of Qwen3)
 * is kept for the next call (one buffer, the largest asked for, up to
 * 1 GiB; a concurrent call allocates its own). Fresh memory costs a page
 * fault per page on first touch, and here (a VM) that measured up to 30% of
 * the whole GEMM at M = 4096 when the process already held its weights, as
 * any real caller does. It is a workspace, never read before it is written:
 * nothing of one call's data survives into the next. Huge pages
 * (MADV_HUGEPAGE, where enabled for madvise) cut the faults of a fresh
 * buffer 512-fold. */
static pthread_mutex_t ws_lock = PTHREAD_MUTEX_INITIALIZER;
static void *ws_keep;
static size_t ws_keep_bytes;

static void *ws_take(size_t bytes)
{
    void *p = NULL;
    pthread_mutex_lock(&ws_lock);
    if (ws_keep && ws_keep_bytes >= bytes) p = ws_keep, ws_keep = NULL;
    pthread_mutex_unlock(&ws_lock);
    if (p) return p;
    if (bytes < ((size_t)4 << 20)) return malloc(bytes);
    if (posix_memalign(&p, (size_t)2 << 20, bytes)) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE); /* advice only: no huge pages is fine */
#endif
    return p;
}

static void ws_give(void *p, size_t bytes)
{
    if (!p) return;
    if (bytes <= ((size_t)1 << 30)) {
        pthread_mutex_lock(&ws_lock);
        if (!ws_keep || ws_keep_bytes < bytes) {
            void *old = ws_keep;
            ws_keep = p, ws_keep_bytes = bytes, p = old;
        }
        pthread_mutex_unlock(&ws_lock);
    }
    free(p);
}

/* ---- the call ------------------------------------------------------------- */
typedef struct {
    const moe_gemm_args *g;
    moe_tensor *out;
    moe_quant_spec ws, as;
    moe_gemm_numerics mode;
    int64_t P, K, N, E, nb, kt, nt, bk, bn;
    const int64_t *off, *order; /* expert e's rows: order[off[e] .. off[e+1]) */
    const float *ag;            /* gathered activations [rows with an expert, K] */
} plan;

typedef struct {
    float *w;   /* [nb, K] dequantized weight chunk */
    float *c;   /* [max rows, nb] sgemm output / accumulator */
    float *t;   /* [max rows, nb] BLOCK_TILES tile product */
} scratch;

static void run_item(const plan *pl, scratch *sc, int64_t e, int64_t n0)
{
    const moe_gemm_args *g = pl->g;
    int64_t K = pl->K, N = pl->N, E = pl->E, nn = N - n0 < pl->nb ? N - n0 : pl->nb;
    int64_t r0 = pl->off[e], ne = pl->off[e + 1] - r0;
    const float *A = pl->ag + r0 * K;
    operand w;
    if (pl->mode == MOE_GEMM_BLOCK_TILES) {
        operand_init(&w, &pl->ws, 0, g->w, e * (int64_t)(g->w->nbytes / (size_t)E), NULL, 0, NULL, 0);
    } else {
        int64_t so = g->w_scale ? e * (int64_t)(g->w_scale->nbytes / (size_t)E) : 0;
        int64_t go = g->w_global ? e * (int64_t)(g->w_global->nbytes / (size_t)E) : 0;
        operand_init(&w, &pl->ws, 1, g->w, e * (int64_t)(g->w->nbytes / (size_t)E), g->w_scale, so, g->w_global, go);
    }
    for (int64_t n = 0; n < nn; n++) {
        operand_row(&w, n0 + n, sc->w + n * K);
        if (pl->mode == MOE_GEMM_WEIGHT_TO_ACT) round_span(g->a->dtype, sc->w + n * K, K);
    }
    const float *bias = g->bias ? (const float *)g->bias->data + e * N + n0 : NULL;
    if (pl->mode != MOE_GEMM_BLOCK_TILES) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)ne, (int)nn, (int)K, 1.0f, A, (int)K, sc->w, (int)K,
                    0.0f, sc->c, (int)nn);
    } else {
        int64_t kt = pl->kt, bk = pl->bk, bn = pl->bn;
        const float *sa = g->a_scale->data, *sw = (const float *)g->w_scale->data + e * pl->nt * kt;
        memset(sc->c, 0, sizeof(float) * (size_t)(ne * nn)); /* acc = +0, as the reference */
        for (int64_t t = 0; t < kt; t++) {
            int64_t k0 = t * bk, kl = K - k0 < bk ? K - k0 : bk;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)ne, (int)nn, (int)kl, 1.0f, A + k0, (int)K,
                        sc->w + k0, (int)K, 0.0f, sc->t, (int)nn);
            for (int64_t r = 0; r < ne; r++) {
                float s_a = sa[pl->order[r0 + r] * kt + t];
                for (int64_t n = 0; n < nn;) { /* runs of one weight block (n / 128) */
                    int64_t blk = (n0 + n) / bn, end = (blk + 1) * bn - n0 < nn ? (blk + 1) * bn - n0 : nn;
                    tile_acc(sc->c + r * nn + n, sc->t + r * nn + n, end - n, s_a, sw[blk * kt + t]);
                    n = end;
                }
            }
        }
    }
    for (int64_t r = 0; r < ne; r++) store_row(pl->out, pl->order[r0 + r], N, n0, sc->c + r * nn, nn, bias);
}

/* weight rows per chunk: ~1 MiB of f32 (a core's L2 here), at least 128
 * rows (a whole weight block of BLOCK_TILES; fewer, longer sgemm calls).
 * Measured at Qwen3's shapes: 128 to 1024 rows are within noise of each
 * other, 64 and less lose 5-10% (more calls, more A repacking). */
static int64_t chunk_rows(int64_t N, int64_t K)
{
    int64_t nb = (int64_t)(1024 * 1024 / sizeof(float)) / (K > 0 ? K : 1);
    nb = nb / 16 * 16;
    if (nb < 128) nb = 128;
    return nb < N ? nb : N;
}

moe_status moe_cpu_grouped_gemm(const moe_gemm_args *g, moe_tensor *out)
{
    moe_status s = moe_gemm_check(g, out);
    if (s != MOE_OK) return s;
    int64_t P = g->a->shape[0], K = g->a->shape[1], E = g->w->shape[0], N = g->w->shape[1];
    if (P > INT_MAX || K > INT_MAX || N > INT_MAX) return moe_ref_grouped_gemm(g, out); /* sgemm takes int */
    if (P == 0 || N == 0) {
        memset(out->data, 0, out->nbytes);
        return MOE_OK;
    }
    pthread_once(&tables_once, build_tables);
    plan pl;
    memset(&pl, 0, sizeof pl);
    pl.g = g, pl.out = out, pl.P = P, pl.K = K, pl.N = N, pl.E = E;
    moe_scheme_spec(g->scheme, MOE_OPERAND_WEIGHT, &pl.ws);
    moe_scheme_spec(g->scheme, MOE_OPERAND_ACT, &pl.as);
    pl.mode = moe_gemm_numerics_of(g->scheme);
    if (pl.mode == MOE_GEMM_BLOCK_TILES) {
        pl.bk = pl.as.group_k, pl.bn = pl.ws.block_n;
        pl.kt = (K + pl.bk - 1) / pl.bk, pl.nt = (N + pl.bn - 1) / pl.bn;
    }
    pl.nb = chunk_rows(N, K);

    /* rows bucketed by expert, ascending within an expert */
    int64_t *off = calloc((size_t)E + 1, sizeof *off), *order = malloc(sizeof *order * (size_t)P);
    if (!off || !order) {
        free(off), free(order);
        return moe_fail(MOE_ERR_NOMEM, "grouped_gemm: row buckets");
    }
    const int32_t *re = g->row_expert->data;
    for (int64_t p = 0; p < P; p++)
        if (re[p] >= 0) off[re[p] + 1]++;
    int64_t maxrows = 0, items = 0, chunks = (N + pl.nb - 1) / pl.nb;
    for (int64_t e = 0; e < E; e++) {
        if (off[e + 1] > maxrows) maxrows = off[e + 1];
        if (off[e + 1]) items += chunks;
        off[e + 1] += off[e];
    }
    int64_t rows = off[E];
    {
        int64_t *fill = malloc(sizeof *fill * (size_t)E);
        if (!fill) {
            free(off), free(order);
            return moe_fail(MOE_ERR_NOMEM, "grouped_gemm: row buckets");
        }
        memcpy(fill, off, sizeof *fill * (size_t)E);
        for (int64_t p = 0; p < P; p++)
            if (re[p] >= 0) order[fill[re[p]]++] = p;
        free(fill);
    }
    { /* zeros: the rows of no expert (and any bytes past [P, N]); the others are all written */
        size_t rb = (size_t)N * (out->dtype == MOE_F32 ? 4 : 2), used = (size_t)P * rb;
        for (int64_t p = 0; p < P; p++)
            if (re[p] < 0) memset((uint8_t *)out->data + (size_t)p * rb, 0, rb);
        if (out->nbytes > used) memset((uint8_t *)out->data + used, 0, out->nbytes - used);
    }
    if (rows == 0) {
        free(off), free(order);
        return MOE_OK;
    }
    pl.off = off, pl.order = order;

    /* activations gathered per expert: dequantized (DEQUANT_F32), decoded
     * (BLOCK_TILES: scales per tile), or as stored (WEIGHT_TO_ACT) */
    size_t ag_bytes = sizeof(float) * (size_t)(rows * K + 1);
    float *ag = ws_take(ag_bytes);
    if (!ag) {
        free(off), free(order);
        return moe_fail(MOE_ERR_NOMEM, "grouped_gemm: gathered activations");
    }
    operand a;
    operand_init(&a, &pl.as, pl.mode == MOE_GEMM_DEQUANT_F32, g->a, 0, g->a_scale, 0, g->a_global, 0);
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < rows; j++) operand_row(&a, order[j], ag + j * K);
    pl.ag = ag;

    /* items: (expert with rows, chunk of weight rows) */
    int64_t *item_e = malloc(sizeof *item_e * (size_t)items);
    if (!item_e) {
        free(off), free(order), ws_give(ag, ag_bytes);
        return moe_fail(MOE_ERR_NOMEM, "grouped_gemm: work items");
    }
    for (int64_t e = 0, i = 0; e < E; e++)
        if (off[e + 1] > off[e])
            for (int64_t c = 0; c < chunks; c++) item_e[i++] = e * chunks + c;
    int nomem = 0;
#pragma omp parallel
    {
        scratch sc;
        sc.w = malloc(sizeof(float) * (size_t)(pl.nb * K + 1));
        sc.c = malloc(sizeof(float) * (size_t)(maxrows * pl.nb + 1));
        sc.t = pl.mode == MOE_GEMM_BLOCK_TILES ? malloc(sizeof(float) * (size_t)(maxrows * pl.nb + 1)) : NULL;
        int ok = sc.w && sc.c && (pl.mode != MOE_GEMM_BLOCK_TILES || sc.t);
        if (!ok) {
#pragma omp atomic write
            nomem = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t i = 0; i < items; i++)
            if (ok) run_item(&pl, &sc, item_e[i] / chunks, (item_e[i] % chunks) * pl.nb);
        free(sc.w), free(sc.c), free(sc.t);
    }
    free(item_e), free(off), free(order);
    ws_give(ag, ag_bytes);
    if (nomem) return moe_fail(MOE_ERR_NOMEM, "grouped_gemm: per-thread scratch");
    return MOE_OK;
}
