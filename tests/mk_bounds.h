/* The modular-kernel bound checks of the tests (tests/check_modular*.c)
 * use the library's slot bound (include/moe/slot_bound.h, derivation
 * there) with x in bf16; these names keep the tests short. */
#ifndef MOE_TESTS_MK_BOUNDS_H
#define MOE_TESTS_MK_BOUNDS_H

#include "moe/compare.h"
#include "moe/slot_bound.h"

typedef moe_slot_path mkb_path;
typedef moe_slot_sums mkb_sums;

static inline double mkb_ld(const moe_tensor *t, int64_t i) { return moe_tensor_value_at(t, i); }

static inline moe_status mkb_read_slots(const moe_forward_args *base, const moe_tensor *x, int k, moe_dtype out_dtype,
                                        moe_tensor *y)
{
    (void)out_dtype; /* Y_j are in x's dtype */
    return moe_slot_read(base, x, k, y);
}

static inline mkb_sums mkb_slot_sums(const moe_tensor *w, const moe_tensor *y, int k, int64_t t, int64_t h)
{
    return moe_slot_sums_at(w, y, k, t, h);
}

static inline double mkb_bound(const mkb_path *x, const mkb_path *o, const mkb_sums *s)
{
    return moe_slot_bound(MOE_BF16, x, o, s);
}

#endif
