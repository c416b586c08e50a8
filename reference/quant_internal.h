/* Private glue between the reference/quant_*.c files (one concept each):
 * quant_scheme.c (scheme table, names, spec checks), quant_layout.c
 * (geometry, shapes, scale placement), quant_rules.c (the scale rules),
 * quant.c (argument checks and the quantize / dequantize loops). */
#ifndef MOE_REFERENCE_QUANT_INTERNAL_H
#define MOE_REFERENCE_QUANT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "moe/quant.h"

/* The operand seen as B matrices of R x K (activation: B = 1, R = M;
 * weight: B = E, R = N), each with an SR x SC matrix of scales; scale
 * (sr, sc) covers rows [sr*rh, +rh) and columns [sc*cw, +cw), clipped. */
typedef struct {
    int64_t B, R, K;
    int64_t SR, SC; /* logical scale matrix per b */
    int64_t rh, cw; /* rows and columns one scale covers */
    int64_t per_b;  /* scale storage units per b (elements, or int32 words) */
} moe_q_geom;

/* Statistics of one scale group. */
typedef struct {
    float amax_prop; /* max |x|, NaN if any element is NaN */
    float amax_ign;  /* max |x| over the non-NaN elements, 0 if none */
    float vmax;      /* signed max, NaN if any NaN (torch.max) */
    float vmin;      /* signed min, NaN if any NaN */
} moe_q_stats;

/* One group's result: how its elements are quantized and what is stored. */
typedef struct {
    moe_quant_op op; /* q = cvt(x / f) or cvt(x * f) */
    float f;
    float scale;     /* stored value for f32 scales; dequant multiplier */
    uint8_t code;    /* stored code for E8M0 / E4M3 scales */
} moe_q_group;

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

/* A NaN with a fixed sign: the input's when the input x was NaN, else +. */
float moe_q_canon_nan(float v, float x);
/* floor / ceil of log2 v for finite v > 0 (subnormals included), exact. */
int moe_q_floor_log2(float v);
int moe_q_ceil_log2(float v);

#endif
