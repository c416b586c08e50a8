/* Logical element types. Sub-byte types (e2m1, int4) are packed two per
 * byte along the last dimension, first element in the low nibble, each row
 * padded to a whole byte (the NVFP4 / ONNX order; anchors
 * style_numerics_reliability.md section 3.4). */
#ifndef MOE_DTYPE_H
#define MOE_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include "moe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MOE_F32 = 0,
    MOE_F16,
    MOE_BF16,
    MOE_E4M3,  /* OFP8 E4M3FN: no Inf, S.1111.111 is NaN, max 448 */
    MOE_E5M2,  /* OFP8 E5M2: IEEE-like, max 57344 */
    MOE_E2M1,  /* FP4: no Inf/NaN, max 6, packed */
    MOE_E8M0,  /* MX scale: unsigned power of two 2^(code-127), 0xFF NaN, no zero */
    MOE_I8,
    MOE_I4,    /* signed, packed */
    MOE_U8,
    MOE_I32,
    MOE_I64,
    MOE_BOOL,
    MOE_DTYPE_COUNT
} moe_dtype;

typedef struct {
    moe_dtype dtype;
    const char *name;      /* "e4m3", ... as used by CLIs and case.json */
    int bits;              /* logical bits per element */
    int is_float;          /* has an exponent field */
    int is_signed;
    int ebits, mbits, bias;/* float layout (0 for integers) */
    const char *npy_descr; /* storage descr in .npy files */
    int npy_itemsize;      /* bytes per stored item */
} moe_dtype_info;

/* The row for dtype d, or NULL when d is out of range. */
const moe_dtype_info *moe_dtype_get(moe_dtype d);

/* Looks a dtype up by name; MOE_ERR_INVALID_ARG names the bad string. */
moe_status moe_dtype_from_name(const char *name, moe_dtype *out);

/* 1 for e2m1 and int4 (two elements per byte), else 0. */
int moe_dtype_is_packed(moe_dtype d);

/* Bytes one row of `cols` elements occupies (a packed row is padded to a
 * whole byte); 0 for an invalid dtype or a negative count. */
size_t moe_dtype_row_bytes(moe_dtype d, int64_t cols);

#ifdef __cplusplus
}
#endif

#endif
