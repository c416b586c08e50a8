/* 4-bit weight codes to bf16 MMA operands (fast_gemm.cuh, QS_W4_INT /
 * QS_W4_MX). Included by fast_gemm.cuh inside namespace fx.
 *
 * Two forms. The 64-row tiles dequantize a stage once per CTA into a shared
 * bf16 row buffer, the 128-row tile's producer into the stage itself
 * (w4_dequant32, below). The decode tiles (one warp
 * row, the weights streamed once) turn the codes into B fragments in
 * registers (w4_pair_*): a dequantization through shared memory cost a
 * store, a barrier and a reload per code and left the decode GEMMs at a
 * quarter of the read bandwidth (NOTES.md, v10, v12).
 *
 * Register form, k order: a thread of an m16n8k16 MMA holds B at k
 * (2q, 2q + 1) and (2q + 8, 2q + 9), q = lane % 4. It loads instead the 8
 * bytes 8q .. 8q + 7 of its weight row's 32-byte k tile (codes 16q .. 16q
 * + 15, two 32-bit words) and feeds MMA j (j = 0..3) the codes j, j + 4 of
 * each word: one mask of the word shifted by 4j puts both in a bf16 pair
 * (Marlin's int4 layout trick, without the offline reordering). Any k order
 * is a correct dot product when A uses the same one, so A's fragment of MMA
 * j takes the activations at those k: two 16-byte shared loads per row
 * (k 16q .. 16q + 15) and a byte permute per register (w4_a_frag).
 *
 * Values. int4: 2^7 + (q ^ 8) - 136 in bf16 is q's two's complement value,
 * exact; on the decode tiles the group scale (f32, per 128 along K) is
 * applied to the f32 MMA sums of each group (acc += sum * s), not to each
 * weight: the weights the tensor cores multiply are c exactly, not
 * round_bf16(c * s) (gemm.h's WEIGHT_TO_ACT, which the 64-row tiles keep) —
 * a BOUNDED difference of at most one bf16 rounding per weight, toward the
 * exact product (NOTES.md, v12; the GPU test models both). e2m1: the sign and three magnitude bits placed in a bf16 (sign,
 * exponent bits 1..0, mantissa bit 6) are the value times 2^-126 (exponent
 * field 0 is e2m1's subnormal 0.5, a bf16 subnormal: bf16 arithmetic keeps
 * subnormals); times 2^(S - 1) for the E8M0 scale S gives round_bf16(value
 * * 2^(S - 127)), the reference's WEIGHT_TO_ACT value (the product is exact
 * in f32, so both round once), in one bf16 multiply when S <= 128 (2^(S - 1)
 * fits bf16) and in two (2^126, then 2^(S - 127)) above. */
#ifndef MOE_OPTIMIZED_CUDA_FAST_W4_CUH
#define MOE_OPTIMIZED_CUDA_FAST_W4_CUH

/* The value of int4 code i of w (bits 4i .. 4i + 3, two's complement),
 * exactly moe_qc_decode's: 2^23 + (q ^ 8) - (2^23 + 8) in f32 (w4_dequant32's
 * plain form; through the generic decode the shared-memory form cost six
 * times the weights' memory time, NOTES.md v10) */
__device__ __forceinline__ float w4_decode_int(uint32_t w, int i)
{
    return __uint_as_float(0x4B000000u | (((w ^ 0x88888888u) >> (4 * i)) & 0xFu)) - 8388616.0f;
}

/* Where the stored scales of weight row `row` (e * N + n) of K-wide rows
 * begin: int4's f32 per 128 along K, e2m1's E8M0 bytes per 32 (fast.h
 * w1_scale; every form that reads them starts here) */
template <int QS> __device__ __forceinline__ const uint8_t *w4_scale_row(const float *w_scale, int64_t row, int K)
{
    return QS == QS_W4_INT ? (const uint8_t *)(w_scale + row * (K / 128)) : (const uint8_t *)w_scale + row * (K / 32);
}

/* The stored scale of the 32 codes at k0 of weight row `row` (e * N + n)
 * for the shared-memory forms: f32 bits (int4, a scale per 128 along K) or
 * 0x100 | the E8M0 code (e2m1, per 32: bit 8 marks a loaded code, so an
 * absent one stays 0); 0 where !ok (a row past N or a k past K): a zero
 * scale either way (w4_dequant32) */
template <int QS> __device__ __forceinline__ uint32_t w4_scale_raw(const float *w_scale, int64_t row, int K, int k0, bool ok)
{
    if (!ok) return 0u;
    const uint8_t *s = w4_scale_row<QS>(w_scale, row, K);
    if (QS == QS_W4_INT) return __float_as_uint(__ldg((const float *)s + k0 / 128));
    return 0x100u | __ldg(s + k0 / 32);
}

__device__ __forceinline__ uint32_t bf16x2_fma(uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

/* int4 codes j and j + 4 of w (j = 0..3) as a bf16 pair of their values */
__device__ __forceinline__ uint32_t w4_pair_int(uint32_t w, int j)
{
    uint32_t x;
    /* lop3 0x6A = b ? a ^ c : c: the two nibbles with bit 3 flipped (q ^ 8)
     * under the exponent of 2^7 */
    asm("lop3.b32 %0, %1, %2, %3, 0x6A;\n" : "=r"(x) : "r"(w >> (4 * j)), "r"(0x000F000Fu), "r"(0x43084308u));
    return bf16x2_fma(x, 0x3F803F80u, 0xC308C308u); /* (128 + (q ^ 8)) * 1 - 136, exact */
}

/* the multipliers of an E8M0 scale code S for w4_pair_mx: f1 = 2^(S - 1)
 * and f2 = 1 when S <= 128, else f1 = 2^126 and f2 = 2^(S - 127) (NaN for
 * 255); bf16 pairs. Returns whether f2 is needed. */
__device__ __forceinline__ bool w4_mx_factors(uint32_t S, uint32_t *f1, uint32_t *f2)
{
    const bool small = S <= 128u;
    const uint32_t a = small ? (S + 126u) << 7 : 0x7E80u, b = small ? 0x3F80u : S == 255u ? 0x7FC0u : S << 7;
    *f1 = a | (a << 16), *f2 = b | (b << 16);
    return !small;
}

/* e2m1 codes j and j + 4 of w as a bf16 pair of round_bf16(value * 2^(S - 127));
 * two: f2 applied (some lane of the warp has S > 128) */
__device__ __forceinline__ uint32_t w4_pair_mx(uint32_t w, int j, uint32_t f1, uint32_t f2, bool two)
{
    const uint32_t t = w << (12 - 4 * j); /* the codes at bits 12..15 and 28..31: the signs in place */
    const uint32_t v = (t & 0x80008000u) | ((t >> 6) & 0x01C001C0u);
    const uint32_t r = bf16x2_fma(v, f1, 0x80008000u); /* + (-0): keeps -0 */
    return two ? bf16x2_fma(r, f2, 0x80008000u) : r;
}

/* one 16-byte chunk (8 bf16) of w4_dequant32's output row */
__device__ __forceinline__ void w4_st16(uint32_t base, int j, int c, uint32_t a, uint32_t b, uint32_t c2, uint32_t d)
{
    asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};\n" ::"r"(base + swz(j, c)), "r"(a), "r"(b), "r"(c2), "r"(d) : "memory");
}

/* 32 codes of one weight row (w32: 16 bytes, k order, low nibble first)
 * with their stored scale (w4_scale_raw) to the reference's WEIGHT_TO_ACT
 * values, round_bf16(f32(decode(q) * scale)), in four 16-byte chunks c4 ..
 * c4 + 3 of row j of a buffer of 128-byte rows at base, swizzled as swz
 * lays them out (the layout the MMAs read). The 64-row tiles' row buffer
 * (gemm_kernel) and the 128-row tiles' producer (fast_ws.cuh) both write
 * their stages through it, and the producer's issue rate bounds the
 * 128-row tile (NOTES.md v35: about 5.6 instructions a code with one
 * producer warp a scheduler), so each format takes a short exact form:
 * - int4: a byte permute puts u = q ^ 8 under 2^23's exponent (2^23 + u;
 *   a word's even and odd codes spread over bytes first), one add takes
 *   2^23 off, and fma(u, s, -8 s) is (u - 8) s = q s rounded once, as the
 *   reference's f32 product, for scales in (0, 2^120): -8 s is exact there,
 *   while a zero or negative scale would give +0 where q s is -0, and NaN,
 *   inf and huge ones follow IEEE's rules for the plain product: those take
 *   the plain form (decode, then multiply).
 * - e2m1: the decode tiles' pair form (w4_pair_mx: the value times
 *   2^(S - 127) in one or two bf16 multiplies, exact, w4_pairs_exhaustive)
 *   gives codes j, j + 4 of a word; byte permutes re-pair them into k
 *   order. An absent scale (bit 8 clear) gives zeros.
 * (check_gpu_fast w4_dequant_exhaustive: every code with 2 000 int4 scales
 * and every E8M0 code, bit for bit against the reference.) */
template <int QS> __device__ __forceinline__ void w4_dequant32(uint32_t base, int j, int c4, const uint32_t (&w32)[4], uint32_t raw)
{
    /* each form stores its own chunks: one set of results merged after the
     * branch cost a register move each (110 moves a producer k tile) */
    auto pack = [](float lo, float hi) {
        const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
        return *(const uint32_t *)&v;
    };
    if constexpr (QS == QS_W4_INT) {
        const float sc = __uint_as_float(raw);
        if (sc > 0.0f && sc < 0x1p120f) {
            const float m8 = sc * -8.0f;
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const uint32_t x = w32[q] ^ 0x88888888u, ev = x & 0x0F0F0F0Fu, od = (x >> 4) & 0x0F0F0F0Fu;
                uint32_t o[4];
#pragma unroll
                for (int h2 = 0; h2 < 4; h2++) { /* codes 2 h2 (byte h2 of ev) and 2 h2 + 1 (of od) */
                    const float lo = __uint_as_float(__byte_perm(ev, 0x4B000000u, 0x7440u + h2)) - 8388608.0f,
                                hi = __uint_as_float(__byte_perm(od, 0x4B000000u, 0x7440u + h2)) - 8388608.0f;
                    o[h2] = pack(fmaf(lo, sc, m8), fmaf(hi, sc, m8));
                }
                w4_st16(base, j, c4 + q, o[0], o[1], o[2], o[3]);
            }
        } else {
#pragma unroll
            for (int q = 0; q < 4; q++) {
                uint32_t o[4];
#pragma unroll
                for (int h2 = 0; h2 < 4; h2++)
                    o[h2] = pack(w4_decode_int(w32[q], 2 * h2) * sc, w4_decode_int(w32[q], 2 * h2 + 1) * sc);
                w4_st16(base, j, c4 + q, o[0], o[1], o[2], o[3]);
            }
        }
    } else {
        uint32_t f1, f2;
        const bool two = w4_mx_factors(raw & 0xFFu, &f1, &f2);
        if (!(raw & 0x100u)) f1 = 0u, f2 = 0u; /* absent: +-0 */
        /* the second multiply selected per lane: a warp vote skipping it where no lane needs it (scales
         * above 2) ran the 128-row tile 15-20% slower (NOTES.md v35) */
#pragma unroll
        for (int q = 0; q < 4; q++) {
            uint32_t r[4]; /* r[i]: codes i and i + 4 */
#pragma unroll
            for (int i = 0; i < 4; i++) r[i] = w4_pair_mx(w32[q], i, f1, f2, two);
            w4_st16(base, j, c4 + q, __byte_perm(r[0], r[1], 0x5410u), __byte_perm(r[2], r[3], 0x5410u),
                    __byte_perm(r[0], r[1], 0x7632u), __byte_perm(r[2], r[3], 0x7632u));
        }
    }
}

/* A's fragment of MMA j from a row pair's k 16q .. 16q + 15 (u[h][i]: the
 * bf16 pair at k 16q + 2i, 16q + 2i + 1 of row g + 8h): k 16q + j and
 * 16q + j + 4 (registers 0 and 1: rows g, g + 8), 16q + 8 + j and
 * 16q + 12 + j (registers 2 and 3) */
__device__ __forceinline__ void w4_a_frag(uint32_t *a, const uint32_t (*u)[8], int j)
{
    const uint32_t sel = (j & 1) ? 0x7632u : 0x5410u; /* the high or low halves */
    const int i = j >> 1;
    a[0] = __byte_perm(u[0][i], u[0][i + 2], sel), a[1] = __byte_perm(u[1][i], u[1][i + 2], sel);
    a[2] = __byte_perm(u[0][i + 4], u[0][i + 6], sel), a[3] = __byte_perm(u[1][i + 4], u[1][i + 6], sel);
}

#endif
