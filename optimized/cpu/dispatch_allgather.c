/* CPU backend: all-gather dispatch / reduce-scatter combine (vLLM
 * NaiveDPEP). The gather is the identity on bytes ([R, T, ...] is already
 * [R*T, ...]): parallel chunked copies. The reduce-scatter runs the
 * output rows (r, t) in parallel; each element sums the R partials in
 * ascending source rank from +0 in f32 and rounds once, as the reference. */
#include <omp.h>
#include <stdlib.h>
#include "cpu.h"
#include "cpu_internal.h"
#include "stage_checks.h"

moe_status moe_cpu_ep_allgather_dispatch(int world_size, int num_experts, const moe_tensor *x, const moe_tensor *x_scales, const moe_tensor *topk_ids, const moe_tensor *topk_weights, moe_tensor *gathered_x, moe_tensor *gathered_scales, moe_tensor *gathered_ids, moe_tensor *gathered_weights)
{
    moe_status s = moe_ref_check_ep_allgather_dispatch(world_size, num_experts, x, x_scales, topk_ids, topk_weights,
                                                       gathered_x, gathered_scales, gathered_ids, gathered_weights);
    if (s != MOE_OK) return s;
    cpu_memcpy(gathered_x->data, x->data, gathered_x->nbytes);
    cpu_memcpy(gathered_ids->data, topk_ids->data, gathered_ids->nbytes);
    cpu_memcpy(gathered_weights->data, topk_weights->data, gathered_weights->nbytes);
    if (x_scales) cpu_memcpy(gathered_scales->data, x_scales->data, gathered_scales->nbytes);
    return MOE_OK;
}

moe_status moe_cpu_ep_reduce_scatter_combine(int world_size, const moe_tensor *partial, moe_tensor *out)
{
    moe_status s = moe_ref_check_ep_reduce_scatter_combine(world_size, partial, out);
    if (s != MOE_OK) return s;
    int64_t R = world_size, T = partial->shape[1] / R, H = partial->shape[2];
    moe_dtype d = partial->dtype;
    int failed = 0;
#pragma omp parallel if (R * T * H * R >= CPU_PAR_MIN)
    {
        float *acc = malloc((size_t)(H ? H : 1) * 2 * sizeof *acc);
        if (!acc) {
#pragma omp atomic write
            failed = 1;
        }
        float *v = acc + H;
#pragma omp for schedule(static)
        for (int64_t rt = 0; rt < R * T; rt++) {
            if (!acc) continue;
            int64_t r = rt / T, t = rt % T;
            for (int64_t c = 0; c < H; c++) acc[c] = 0.0f;
            for (int64_t j = 0; j < R; j++) {
                cpu_load_row(d, partial->data, ((j * R + r) * T + t) * H, H, v);
                for (int64_t c = 0; c < H; c++) acc[c] += v[c];
            }
            cpu_store_row(d, out->data, rt * H, H, acc);
        }
        free(acc);
    }
    if (failed) return moe_fail(MOE_ERR_NOMEM, "reduce-scatter: per-thread rows");
    return MOE_OK;
}
