/* GPU format conversions are the reference's, bit for bit: every f16 and
 * bf16 value plus 4M seeded random f32 patterns through every target and
 * policy, and every code decoded. Exits 77 (skip) without a CUDA device. */
#include <check.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/cuda_formats.h"
#include "moe/rng.h"
#include "test_util.h"
#include "gpu_test_util.h"

/* small mode: 64K random patterns in place of 4M (every f16/bf16 value stays) */
enum { NRAND_FULL = 1 << 22, NRAND_SMALL = 1 << 16 };
static int NRAND = NRAND_FULL, NIN = 2 * 65536 + NRAND_FULL;
static float *h_in;

static void make_inputs(void)
{
    if (gpu_small()) NRAND = NRAND_SMALL, NIN = 2 * 65536 + NRAND_SMALL;
    h_in = (float *)malloc(NIN * sizeof(float));
    for (uint32_t c = 0; c < 65536; c++) {
        h_in[c] = moe_f16_to_f32((uint16_t)c);
        h_in[65536 + c] = moe_bf16_to_f32((uint16_t)c);
    }
    uint64_t st = moe_rng_stream_id("check_gpu_formats");
    for (uint32_t i = 0; i < (uint32_t)NRAND; i++) h_in[2 * 65536 + i] = tu_float(moe_rng_u32(5, st, i));
}

START_TEST(encode_matches_reference)
{
    const tu_target *t = &tu_targets[_i];
    size_t bytes = moe_dtype_row_bytes(t->dtype, (int64_t)NIN);
    float *d_in;
    void *d_out;
    ck_assert_int_eq(cudaMalloc(&d_in, NIN * sizeof(float)), cudaSuccess);
    ck_assert_int_eq(cudaMalloc(&d_out, bytes), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(d_in, h_in, NIN * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    uint8_t *want = (uint8_t *)malloc(bytes), *got = (uint8_t *)malloc(bytes);
    for (int pi = 0; pi < (t->nonsat_ok ? 4 : 2); pi++) {
        moe_policy p = tu_policy(pi);
        unsigned hf = 0, gf = 0;
        ck_assert_int_eq(moe_encode_array(t->dtype, h_in, NIN, p, want, &hf), MOE_OK);
        ck_assert_msg(moe_cuda_encode_array(t->dtype, d_in, NIN, p, d_out, &gf) == MOE_OK, "%s",
                      moe_last_error());
        ck_assert_int_eq(cudaMemcpy(got, d_out, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
        size_t bad = 0, first = 0;
        for (size_t k = 0; k < bytes; k++)
            if (got[k] != want[k] && bad++ == 0) first = k;
        ck_assert_msg(bad == 0, "%s policy %d: %zu bytes differ, first at %zu (%02x vs %02x)", t->name,
                      pi, bad, first, got[first], want[first]);
        ck_assert_uint_eq(gf, hf);
    }
    free(want);
    free(got);
    cudaFree(d_in);
    cudaFree(d_out);
}
END_TEST

START_TEST(decode_matches_reference)
{
    const tu_target *t = &tu_targets[_i];
    int bits = moe_dtype_get(t->dtype)->bits;
    size_t n = (size_t)1 << bits;
    size_t bytes = moe_dtype_row_bytes(t->dtype, (int64_t)n);
    uint8_t *codes = (uint8_t *)malloc(bytes);
    for (size_t c = 0; c < n; c++) {
        if (bits == 16) ((uint16_t *)codes)[c] = (uint16_t)c;
        else if (bits == 8) codes[c] = (uint8_t)c;
        else if (c % 2 == 0) codes[c / 2] = (uint8_t)(c | ((c + 1) << 4));
    }
    float *want = (float *)malloc(n * sizeof(float)), *got = (float *)malloc(n * sizeof(float));
    ck_assert_int_eq(moe_decode_array(t->dtype, codes, n, want), MOE_OK);
    void *d_codes;
    float *d_out;
    cudaMalloc(&d_codes, bytes);
    cudaMalloc(&d_out, n * sizeof(float));
    cudaMemcpy(d_codes, codes, bytes, cudaMemcpyHostToDevice);
    ck_assert_msg(moe_cuda_decode_array(t->dtype, d_codes, n, d_out) == MOE_OK, "%s", moe_last_error());
    cudaMemcpy(got, d_out, n * sizeof(float), cudaMemcpyDeviceToHost);
    ck_assert_int_eq(memcmp(got, want, n * sizeof(float)), 0);
    free(codes);
    free(want);
    free(got);
    cudaFree(d_codes);
    cudaFree(d_out);
}
END_TEST

START_TEST(bad_arguments)
{
    ck_assert_int_eq(moe_cuda_encode_array(MOE_E4M3, NULL, 4, MOE_POLICY_SAT_RNE, NULL, NULL), MOE_ERR_NULL);
    float *d;
    cudaMalloc(&d, 16);
    ck_assert_int_eq(moe_cuda_encode_array(MOE_E2M1, d, 4, MOE_POLICY_NONSAT_RNE, d, NULL), MOE_ERR_UNSUPPORTED);
    ck_assert_int_eq(moe_cuda_encode_array(MOE_F32, d, 4, MOE_POLICY_SAT_RNE, d, NULL), MOE_ERR_DTYPE);
    ck_assert_int_eq(moe_cuda_decode_array(MOE_I32, d, 4, d), MOE_ERR_DTYPE);
    cudaFree(d);
}
END_TEST

static void add_tests(Suite *s)
{
    make_inputs();
    TCase *tc = gpu_tcase(s, "conversions", 120);
    tcase_add_loop_test(tc, encode_matches_reference, 0, TU_NTARGETS);
    tcase_add_loop_test(tc, decode_matches_reference, 0, TU_NTARGETS);
    tcase_add_test(tc, bad_arguments);
}

int main(void)
{
    return gpu_test_main("check_gpu_formats", "gpu_formats", add_tests);
}
