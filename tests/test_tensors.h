/* Small helpers for building host tensors in tests. */
#ifndef MOE_TEST_TENSORS_H
#define MOE_TEST_TENSORS_H

#include <check.h>
#include <string.h>
#include "moe/tensor.h"

/* An owned tensor of the given shape, zeroed; aborts the test on failure. */
static inline moe_tensor tt_new(moe_dtype d, int ndim, int64_t s0, int64_t s1, int64_t s2)
{
    moe_tensor t;
    int64_t shape[3] = {s0, s1, s2};
    ck_assert_int_eq(moe_tensor_alloc(&t, d, ndim, shape), MOE_OK);
    return t;
}

/* An owned int32 [n] tensor holding v. */
static inline moe_tensor tt_i32(const int32_t *v, int64_t n)
{
    moe_tensor t = tt_new(MOE_I32, 1, n, 0, 0);
    if (n) memcpy(t.data, v, (size_t)n * 4);
    return t;
}

/* An owned 2-D tensor [r, c] of int32 or f32 copied from v. */
static inline moe_tensor tt_2d(moe_dtype d, const void *v, int64_t r, int64_t c)
{
    moe_tensor t = tt_new(d, 2, r, c, 0);
    if (r > 0 && c > 0) memcpy(t.data, v, t.nbytes);
    return t;
}

#endif
