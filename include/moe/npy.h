/* .npy v1.0 reading and writing (NEP 1; anchors style_numerics_reliability.md
 * section 4.4). Types numpy lacks travel as raw bits ('<u2' for bf16, '|u1'
 * for the 8-bit floats, e8m0, and packed e2m1/int4 rows) with the logical
 * dtype and shape in a JSON sidecar "<file>.json":
 *     {"dtype": "e2m1", "shape": [3, 5]}
 * The reader is defensive: every malformed input is a MOE_ERR_FORMAT with a
 * message naming the rule, never a crash or a partial tensor. */
#ifndef MOE_NPY_H
#define MOE_NPY_H

#include <stddef.h>
#include <stdint.h>
#include "moe/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MOE_NPY_HEADER_MAX 4096 /* larger headers are refused as oversized */

typedef struct {
    moe_dtype dtype;
    int ndim;
    int64_t shape[MOE_MAX_DIMS];
} moe_npy_meta;

/* Parses a whole .npy image in memory. With meta NULL the dtype follows the
 * descr (f32 f16 int8 uint8 int32 int64 bool); with meta, the descr and the
 * stored shape must match meta's logical dtype and shape. On success *out
 * owns a host copy of the data. */
moe_status moe_npy_parse(const void *buf, size_t n, const moe_npy_meta *meta, moe_tensor *out);

/* Parses a sidecar JSON text. */
moe_status moe_npy_meta_parse(const char *json, size_t n, moe_npy_meta *out);

/* Reads path (and path.json when present). MOE_ERR_IO when a file cannot
 * be read, MOE_ERR_FORMAT when one is malformed. */
moe_status moe_npy_read(const char *path, moe_tensor *out);

/* Writes a host tensor (and the sidecar when its dtype needs one) through
 * temporary files renamed into place, so a failure leaves no partial file. */
moe_status moe_npy_write(const char *path, const moe_tensor *t);

/* 1 when dtype d needs a sidecar to be read back as itself. */
int moe_npy_needs_sidecar(moe_dtype d);

#ifdef __cplusplus
}
#endif

#endif
