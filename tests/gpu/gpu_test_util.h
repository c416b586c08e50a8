/* Shared by the GPU Check suites (tests/gpu/check_gpu_*.cu, CUDA C++):
 * host and device tensors, the bytewise comparison against the reference
 * (NaN by class where asked), the reference-error comparison, and main()'s
 * runner (the small-mode banner, exit 77 without a CUDA device, one CUDA
 * context for the whole run). */
#ifndef MOE_TESTS_GPU_TEST_UTIL_H
#define MOE_TESTS_GPU_TEST_UTIL_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/cuda_formats.h"
#include "moe/dtype.h"
#include "moe/status.h"
#include "moe/tensor.h"
#include "optimized/cuda/cuda.h"
#include "reference/elem.h"
#include "gpu_small.h"

/* ---- tensors ---------------------------------------------------------------- */

/* A host tensor of dtype d and shape[0..nd). */
static inline moe_tensor gpu_hnew_sh(moe_dtype d, int nd, const int64_t *shape)
{
    moe_tensor t;
    ck_assert_msg(moe_tensor_alloc(&t, d, nd, shape) == MOE_OK, "%s", moe_last_error());
    return t;
}

/* The same with the dimensions spelled out (those past nd are ignored). */
static inline moe_tensor gpu_hnew(moe_dtype d, int nd, int64_t a, int64_t b = 1, int64_t c = 1, int64_t e = 1)
{
    int64_t sh[4] = {a, b, c, e};
    return gpu_hnew_sh(d, nd, sh);
}

/* A device tensor (contents undefined). */
static inline moe_tensor gpu_dnew_sh(moe_dtype d, int nd, const int64_t *shape)
{
    moe_tensor t;
    ck_assert_msg(moe_cuda_alloc(&t, d, nd, shape) == MOE_OK, "%s", moe_last_error());
    return t;
}

static inline moe_tensor gpu_dnew(moe_dtype d, int nd, int64_t a, int64_t b = 1, int64_t c = 1, int64_t e = 1)
{
    int64_t sh[4] = {a, b, c, e};
    return gpu_dnew_sh(d, nd, sh);
}

/* A device tensor of t's dtype and shape (contents undefined). */
static inline moe_tensor gpu_dev_like(const moe_tensor *t) { return gpu_dnew_sh(t->dtype, t->ndim, t->shape); }

/* A device copy of h (a host or device tensor). */
static inline moe_tensor gpu_to_dev(const moe_tensor *h)
{
    moe_tensor d = gpu_dev_like(h);
    ck_assert_msg(moe_cuda_copy(&d, h) == MOE_OK, "%s", moe_last_error());
    return d;
}

/* A host copy of d (a device or host tensor). */
static inline moe_tensor gpu_to_host(const moe_tensor *d)
{
    moe_tensor h = gpu_hnew_sh(d->dtype, d->ndim, d->shape);
    ck_assert_msg(moe_cuda_copy(&h, d) == MOE_OK, "%s", moe_last_error());
    return h;
}

/* The bytes of t's layout. */
static inline size_t gpu_layout_bytes(const moe_tensor *t)
{
    size_t nb = 0;
    ck_assert_int_eq(moe_tensor_layout(t->dtype, t->ndim, t->shape, &nb), MOE_OK);
    return nb;
}

static inline void gpu_dfree(int n, moe_tensor *t)
{
    for (int i = 0; i < n; i++) moe_cuda_free(&t[i]);
}

static inline void gpu_hfree(int n, moe_tensor *t)
{
    for (int i = 0; i < n; i++) moe_tensor_free(&t[i]);
}

/* ---- comparison against the reference -------------------------------------- */

/* Element i of p (dtype d) is a NaN; only the storage dtypes have them. */
static inline int gpu_is_nan_elem(moe_dtype d, const void *p, int64_t i)
{
    if (!moe_s_is_storage(d)) return 0;
    float v = moe_s_load(d, p, i);
    return v != v;
}

/* want's layout bytes equal got's (got_nbytes of them), element by element;
 * nan_class: a NaN matches any NaN (the GPU's payloads and signs are its
 * own). A failure names the first differing element, both encodings and,
 * for a storage dtype, both values. */
static inline void gpu_same_bytes(const char *what, const moe_tensor *want, const void *got, size_t got_nbytes,
                                  int nan_class)
{
    size_t nb = gpu_layout_bytes(want);
    ck_assert_msg(nb == got_nbytes, "%s: %zu bytes, the reference's %zu", what, got_nbytes, nb);
    const uint8_t *a = (const uint8_t *)want->data, *b = (const uint8_t *)got;
    if (!nb || !memcmp(a, b, nb)) return;
    int bits = moe_dtype_get(want->dtype)->bits;
    size_t es = bits >= 8 ? (size_t)bits / 8 : 1;
    int64_t first = -1, bad = 0;
    for (size_t i = 0; i < nb / es; i++) {
        if (!memcmp(a + i * es, b + i * es, es)) continue;
        if (nan_class && gpu_is_nan_elem(want->dtype, a, (int64_t)i) && gpu_is_nan_elem(want->dtype, b, (int64_t)i))
            continue;
        if (bad++ == 0) first = (int64_t)i;
    }
    if (!bad) return;
    char wa[40] = "", gb[40] = "";
    for (int k = (int)es - 1; k >= 0 && k < 16; k--) {
        snprintf(wa + strlen(wa), sizeof wa - strlen(wa), "%02x", a[first * es + k]);
        snprintf(gb + strlen(gb), sizeof gb - strlen(gb), "%02x", b[first * es + k]);
    }
    char fa[48] = "", fb[48] = "";
    if (moe_s_is_storage(want->dtype)) {
        snprintf(fa, sizeof fa, " (%a)", (double)moe_s_load(want->dtype, a, first));
        snprintf(fb, sizeof fb, " (%a)", (double)moe_s_load(want->dtype, b, first));
    }
    ck_abort_msg("%s: %lld of %lld elements differ, first at element %lld: reference 0x%s%s, gpu 0x%s%s", what,
                 (long long)bad, (long long)(nb / es), (long long)first, wa, fa, gb, fb);
}

/* want (host) equals got_dev (device) as gpu_same_bytes says. */
static inline void gpu_expect_same(const char *what, const moe_tensor *want, const moe_tensor *got_dev,
                                   int nan_class)
{
    ck_assert_msg(moe_cuda_synchronize() == MOE_OK, "%s: %s", what, moe_last_error());
    moe_tensor got = gpu_to_host(got_dev);
    gpu_same_bytes(what, want, got.data, gpu_layout_bytes(&got), nan_class);
    moe_tensor_free(&got);
}

/* The GPU stage failed like the reference: the same status and message. */
static inline void gpu_expect_same_error(const char *what, moe_status ref, const char *ref_msg, moe_status gpu)
{
    ck_assert_msg(ref != MOE_OK, "%s: the reference accepted the input", what);
    ck_assert_msg(gpu == ref, "%s: gpu status %s, reference %s (%s)", what, moe_status_str(gpu), moe_status_str(ref),
                  ref_msg);
    ck_assert_msg(strcmp(moe_last_error(), ref_msg) == 0, "%s: gpu message \"%s\", reference \"%s\"", what,
                  moe_last_error(), ref_msg);
}

/* The reference call, its message kept, then the GPU call (each from a
 * cleared message): they fail alike. */
#define GPU_SAME_ERROR(what, ref_call, gpu_call)                                                                \
    do {                                                                                                        \
        moe_clear_error();                                                                                      \
        moe_status rs_ = (ref_call);                                                                            \
        char rm_[1024];                                                                                         \
        snprintf(rm_, sizeof rm_, "%s", moe_last_error());                                                      \
        moe_clear_error();                                                                                      \
        moe_status gs_ = (gpu_call);                                                                            \
        gpu_expect_same_error((what), rs_, rm_, gs_);                                                           \
    } while (0)

/* ---- main ------------------------------------------------------------------- */

/* A test case of s with its timeout (seconds). */
static inline TCase *gpu_tcase(Suite *s, const char *name, int timeout)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, timeout);
    suite_add_tcase(s, tc);
    return tc;
}

/* main() of the suite `prog`: the small-mode banner, 77 (skip) without a
 * CUDA device, else the suite add fills, run in this process (one CUDA
 * context for the whole run). */
static inline int gpu_test_main(const char *prog, const char *suite, void (*add)(Suite *))
{
    gpu_small_banner(prog);
    int n = 0;
    if (moe_cuda_device_count(&n) != MOE_OK || n < 1 || moe_cuda_backend_devices() < 1) {
        printf("%s: no CUDA device%s%s; skipped\n", prog, *moe_last_error() ? ": " : "", moe_last_error());
        return 77;
    }
    Suite *s = suite_create(suite);
    add(s);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
