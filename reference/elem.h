/* Loading and storing one element of an activation tensor as f32, for the
 * storage types activations live in (f32, bf16, f16). Stores round to
 * nearest even with IEEE overflow (MOE_POLICY_IEEE_RNE): the one rounding
 * every upstream kernel applies when it writes a 16-bit result. */
#ifndef MOE_REF_ELEM_H
#define MOE_REF_ELEM_H

#include <stdint.h>
#include "formats/bf16.h"
#include "formats/f16.h"
#include "moe/tensor.h"

MOE_HD MOE_INLINE int moe_s_is_storage(moe_dtype d)
{
    return d == MOE_F32 || d == MOE_BF16 || d == MOE_F16;
}

MOE_HD MOE_INLINE float moe_s_load(moe_dtype d, const void *p, int64_t i)
{
    if (d == MOE_BF16) return moe_s_decode_bf16(((const uint16_t *)p)[i]);
    if (d == MOE_F16) return moe_s_decode_f16(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

/* x rounded to the storage type and back (the value a store would keep). */
MOE_HD MOE_INLINE float moe_s_round_to(moe_dtype d, float x)
{
    unsigned f = 0;
    moe_policy p = {MOE_RND_RNE, MOE_NONSAT};
    if (d == MOE_BF16) return moe_s_decode_bf16(moe_s_round_pack_bf16(x, p, &f));
    if (d == MOE_F16) return moe_s_decode_f16(moe_s_round_pack_f16(x, p, &f));
    return x;
}

MOE_HD MOE_INLINE void moe_s_store(moe_dtype d, void *p, int64_t i, float x)
{
    unsigned f = 0;
    moe_policy pol = {MOE_RND_RNE, MOE_NONSAT};
    if (d == MOE_BF16) ((uint16_t *)p)[i] = moe_s_round_pack_bf16(x, pol, &f);
    else if (d == MOE_F16) ((uint16_t *)p)[i] = moe_s_round_pack_f16(x, pol, &f);
    else ((float *)p)[i] = x;
}

/* Argument check for an activation tensor: a storage dtype and the rank. */
static inline moe_status moe_s_expect_storage(const moe_tensor *t, const char *arg, int ndim)
{
    if (!t) return moe_fail(MOE_ERR_NULL, "%s: must not be NULL", arg);
    if (!moe_s_is_storage(t->dtype))
        return moe_fail(MOE_ERR_DTYPE, "%s: dtype %s, expected f32, bf16 or f16", arg,
                        moe_dtype_get(t->dtype) ? moe_dtype_get(t->dtype)->name : "?");
    return moe_tensor_expect(t, arg, t->dtype, ndim);
}

#endif
