/* One output element of the weight-and-reduce stages (reference/reduce.c),
 * MOE_HD so the CUDA conformance build runs the reference's own loop over
 * the top-k slots for each output element (one thread per element there):
 * the same slot order, the same roundings, the same fmaf. */
#ifndef MOE_REFERENCE_REDUCE_CORE_H
#define MOE_REFERENCE_REDUCE_CORE_H

#include <math.h>
#include <stdint.h>
#include "elem.h"
#include "moe/portable.h"
#include "moe/reduce.h"

/* war_contiguous's out[t, c] before its store: slots j ascending, each
 * (unless weights_on_input) weighted and rounded to the fused dtype, then
 * added in f32, rounded after every add for STORAGE_PER_ADD. sum: FP32 or
 * STORAGE_PER_ADD (AUTO resolved by the caller). */
MOE_HD MOE_INLINE float moe_war_contiguous_elem(moe_dtype fd, const void *fused, const float *w, int64_t t, int64_t c,
                                                int64_t k, int64_t K, int weights_on_input, moe_sum_variant sum)
{
    float acc = 0.0f;
    for (int64_t j = 0; j < k; j++) {
        float v = moe_s_load(fd, fused, (t * k + j) * K + c);
        if (!weights_on_input) v = moe_s_round_to(fd, v * w[t * k + j]);
        acc = acc + v;
        if (sum == MOE_SUM_STORAGE_PER_ADD) acc = moe_s_round_to(fd, acc);
    }
    return acc;
}

/* finalize_trtllm's out[t, c] before its store: the local slots j
 * ascending, acc = fmaf(w, y[p] + bias, acc) (upstream's contracted
 * multiply-add). pr: the unpermuted-to-permuted map [k*T]; w, b: NULL for
 * none. */
MOE_HD MOE_INLINE float moe_finalize_trtllm_elem(moe_dtype yd, const void *y, const int32_t *ids, const int32_t *pr,
                                                 const float *w, const float *b, int64_t t, int64_t c, int64_t T,
                                                 int64_t k, int64_t K, int first_expert, int num_local_experts)
{
    float acc = 0.0f;
    for (int64_t j = 0; j < k; j++) {
        int e = ids[t * k + j] - first_expert;
        if (e < 0 || e >= num_local_experts) continue;
        float v = moe_s_load(yd, y, (int64_t)pr[j * T + t] * K + c);
        if (b) v = v + b[e * K + c];
        acc = fmaf(w ? w[t * k + j] : 1.0f, v, acc);
    }
    return acc;
}

#endif
