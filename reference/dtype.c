#include <string.h>
#include "moe/dtype.h"

/* Capabilities as data: one row per dtype. bf16 and the 8-bit float
 * formats are stored in .npy as raw bits; numpy has float16 natively. */
static const moe_dtype_info table[MOE_DTYPE_COUNT] = {
    {MOE_F32, "f32", 32, 1, 1, 8, 23, 127, "<f4", 4},
    {MOE_F16, "f16", 16, 1, 1, 5, 10, 15, "<f2", 2},
    {MOE_BF16, "bf16", 16, 1, 1, 8, 7, 127, "<u2", 2},
    {MOE_E4M3, "e4m3", 8, 1, 1, 4, 3, 7, "|u1", 1},
    {MOE_E5M2, "e5m2", 8, 1, 1, 5, 2, 15, "|u1", 1},
    {MOE_E2M1, "e2m1", 4, 1, 1, 2, 1, 1, "|u1", 1},
    {MOE_E8M0, "e8m0", 8, 1, 0, 8, 0, 127, "|u1", 1},
    {MOE_I8, "int8", 8, 0, 1, 0, 0, 0, "|i1", 1},
    {MOE_I4, "int4", 4, 0, 1, 0, 0, 0, "|u1", 1},
    {MOE_U8, "uint8", 8, 0, 0, 0, 0, 0, "|u1", 1},
    {MOE_I32, "int32", 32, 0, 1, 0, 0, 0, "<i4", 4},
    {MOE_I64, "int64", 64, 0, 1, 0, 0, 0, "<i8", 8},
    {MOE_BOOL, "bool", 8, 0, 0, 0, 0, 0, "|b1", 1},
};

const moe_dtype_info *moe_dtype_get(moe_dtype d)
{
    if ((unsigned)d >= MOE_DTYPE_COUNT) return NULL;
    return &table[d];
}

moe_status moe_dtype_from_name(const char *name, moe_dtype *out)
{
    if (!name) return moe_fail(MOE_ERR_NULL, "dtype name: must not be NULL");
    if (!out) return moe_fail(MOE_ERR_NULL, "out: must not be NULL");
    for (int i = 0; i < MOE_DTYPE_COUNT; i++) {
        if (strcmp(table[i].name, name) == 0) {
            *out = (moe_dtype)i;
            return MOE_OK;
        }
    }
    return moe_fail(MOE_ERR_INVALID_ARG,
                    "dtype '%s': not one of f32 f16 bf16 e4m3 e5m2 e2m1 e8m0 int8 int4 "
                    "uint8 int32 int64 bool",
                    name);
}

int moe_dtype_is_packed(moe_dtype d) { return d == MOE_E2M1 || d == MOE_I4; }

size_t moe_dtype_row_bytes(moe_dtype d, int64_t cols)
{
    const moe_dtype_info *info = moe_dtype_get(d);
    if (!info || cols < 0) return 0;
    if (moe_dtype_is_packed(d)) return (size_t)((cols + 1) / 2);
    return (size_t)cols * (size_t)info->npy_itemsize;
}
