/* Private glue between the reference/quant_*.c files (one concept each):
 * quant_scheme.c (scheme table, names, spec checks), quant_layout.c
 * (geometry, shapes, scale placement), quant_rules.c (the scale rules),
 * quant.c (argument checks and the quantize / dequantize loops). */
#ifndef MOE_REFERENCE_QUANT_INTERNAL_H
#define MOE_REFERENCE_QUANT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "moe/quant.h"
#include "quant_core.h"

/* moe_q_geom, moe_q_stats, moe_q_group and the MOE_HD arithmetic behind
 * the functions below: quant_core.h (shared with the CUDA build). */

#ifdef __cplusplus
extern "C" { /* optimized/cuda/quant.cu calls moe_q_geometry */
#endif

/* Checks spec and the operand's rank, shape and K divisibility; `arg`
 * names the tensor in messages. */
moe_status moe_q_geometry(const moe_quant_spec *spec, const char *arg, int ndim,
                          const int64_t *shape, moe_q_geom *g);
/* Index of scale (b, sr, sc) in the scale tensor's storage units (bytes
 * for E8M0/E4M3, floats for F32, words for PACK4; for PACK4 *byte gets the
 * byte lane 0..3). */
int64_t moe_q_scale_index(const moe_quant_spec *spec, const moe_q_geom *g, int64_t b,
                          int64_t sr, int64_t sc, int *byte);

/* Dynamic scale of one group under spec's rule; gs is the NVFP4 global
 * encode scale (1 when absent). */
void moe_q_rule_dynamic(const moe_quant_spec *spec, const moe_q_stats *st, float gs,
                        moe_q_group *out);
/* NVFP4 global encode scale from the tensor's amax (propagating NaN). */
float moe_q_nvfp4_global(const moe_quant_spec *spec, float amax_prop);
/* Dequant multiplier of a stored E8M0 / E4M3 code (NVFP4: sf / gs). */
float moe_q_code_scale(const moe_quant_spec *spec, uint8_t code, float gs);
/* The dequant multiplier of scale (b, sr, sc) as stored in `scale` (any
 * layout: packed UE8M0 lanes, f32, E8M0 / E4M3 codes); gs as above. The
 * reference's dequantize and the CPU backend's read scales through it. */
float moe_q_scale_at(const moe_quant_spec *spec, const moe_q_geom *g, const void *scale, int64_t b, int64_t sr,
                     int64_t sc, float gs);

/* Stores group grp's scale at (b, sr, sc) of `scale` in the spec's layout
 * (a UE8M0 lane ORed into its packed word, an f32 value with its NaN made
 * canonical, or the E8M0 / E4M3 code); the reference's quantize and the CPU
 * backend's store through it. */
void moe_q_store_scale(const moe_quant_spec *spec, const moe_q_geom *g, moe_tensor *scale, int64_t b, int64_t sr,
                       int64_t sc, const moe_q_group *grp);

/* A NaN with a fixed sign: the input's when the input x was NaN, else +. */
float moe_q_canon_nan(float v, float x);
/* floor / ceil of log2 v for finite v > 0 (subnormals included), exact. */
int moe_q_floor_log2(float v);
int moe_q_ceil_log2(float v);

#ifdef __cplusplus
}
#endif

#endif
