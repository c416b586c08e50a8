/* Seeded inputs built from the counter-based RNG (include/moe/rng.h). */
#include <stdlib.h>
#include <string.h>
#include "moe/format.h"
#include "moe/rng.h"

moe_status moe_tensor_fill_normal(moe_tensor *t, uint64_t seed, uint64_t stream, float mean, float stddev)
{
    if (!t) return moe_fail(MOE_ERR_NULL, "t: must not be NULL");
    if (t->device.kind != MOE_DEVICE_HOST) return moe_fail(MOE_ERR_INVALID_ARG, "t: must be a host tensor");
    if (t->dtype != MOE_F32 && t->dtype != MOE_BF16 && t->dtype != MOE_F16)
        return moe_fail(MOE_ERR_DTYPE, "t: dtype %s, must be f32, bf16 or f16", moe_dtype_get(t->dtype)->name);
    int64_t n = moe_tensor_numel(t);
    if (n == 0) return MOE_OK;
    if (!t->data) return moe_fail(MOE_ERR_NULL, "t: has no data");
    if (t->dtype == MOE_F32) return moe_rng_fill_normal(t->data, (size_t)n, seed, stream, 0, mean, stddev);
    float *f = malloc(sizeof(float) * (size_t)n);
    if (!f) return moe_fail(MOE_ERR_NOMEM, "t: %lld f32 values not available", (long long)n);
    moe_status s = moe_rng_fill_normal(f, (size_t)n, seed, stream, 0, mean, stddev);
    if (s == MOE_OK) s = moe_encode_array(t->dtype, f, (size_t)n, MOE_POLICY_IEEE_RNE, t->data, NULL);
    free(f);
    return s;
}

moe_status moe_rng_topk_ids(int32_t *ids, int64_t rows, int k, int num_experts, uint64_t seed,
                            uint64_t stream, unsigned neg1_pct, int distinct)
{
    if (rows < 0 || k < 1 || num_experts < 1)
        return moe_fail(MOE_ERR_INVALID_ARG, "rows, k, num_experts: need rows >= 0, k >= 1, num_experts >= 1");
    if (distinct && k > num_experts)
        return moe_fail(MOE_ERR_INVALID_ARG, "k = %d: distinct ids need k <= num_experts = %d", k, num_experts);
    if (neg1_pct > 100) return moe_fail(MOE_ERR_INVALID_ARG, "neg1_pct = %u: must be <= 100", neg1_pct);
    if (rows && !ids) return moe_fail(MOE_ERR_NULL, "ids: must not be NULL");
    for (int64_t r = 0; r < rows; r++)
        for (int j = 0; j < k; j++) {
            uint64_t idx = (uint64_t)(r * k + j) << 8;
            int32_t e;
            for (;;) {
                uint32_t u = moe_rng_u32(seed, stream, idx++);
                e = (int32_t)(u % (uint32_t)num_experts);
                if ((u >> 20) % 100 < neg1_pct) {
                    e = -1;
                    break;
                }
                int dup = 0;
                for (int i = 0; distinct && i < j; i++) dup |= ids[r * k + i] == e;
                if (!dup) break;
            }
            ids[r * k + j] = e;
        }
    return MOE_OK;
}
