/* The stage timer (include/moe/stage_timer.h): an ops table whose stage
 * entries call the timed backend's and add the wall time of each call to
 * its entry, after the backend's synchronize (so a device backend's
 * asynchronous work is counted where it was issued). */
#include "moe/stage_timer.h"
#include <string.h>
#include <time.h>

enum {
    TM_ROUTE,
    TM_ALIGN_BLOCK_SIZE,
    TM_ALIGN_BATCHED,
    TM_SORT_CK,
    TM_MAPS_TRTLLM,
    TM_QUANTIZE,
    TM_DEQUANTIZE,
    TM_PERMUTE_ROWS,
    TM_UNPERMUTE_ROWS,
    TM_EXPAND_TRTLLM,
    TM_BATCHED_SCATTER,
    TM_PERMUTE_GROUPED,
    TM_GROUPED_GEMM,
    TM_ACTIVATION,
    TM_WAR_CONTIGUOUS,
    TM_WAR_NOOP,
    TM_WAR_NAIVE_BATCHED,
    TM_FINALIZE_TRTLLM,
    TM_EP_ALLGATHER_DISPATCH,
    TM_EP_REDUCE_SCATTER_COMBINE,
    TM_DEEPEP_LAYOUT,
    TM_DEEPEP_DISPATCH,
    TM_DEEPEP_COMBINE,
    TM_DEEPEP_LL_DISPATCH,
    TM_DEEPEP_LL_COMBINE,
    TM_PPLX_DISPATCH,
    TM_PPLX_COMBINE,
    TM_HEP_DISPATCH_WITH_PERMUTE,
    TM_HEP_COMBINE_WITH_UNPERMUTE,
    TM_COUNT
};

static const char *const NAMES[TM_COUNT] = {"route", "align_block_size", "align_batched", "sort_ck", "maps_trtllm", "quantize", "dequantize", "permute_rows", "unpermute_rows", "expand_trtllm", "batched_scatter", "permute_grouped", "grouped_gemm", "activation", "war_contiguous", "war_noop", "war_naive_batched", "finalize_trtllm", "ep_allgather_dispatch", "ep_reduce_scatter_combine", "deepep_layout", "deepep_dispatch", "deepep_combine", "deepep_ll_dispatch", "deepep_ll_combine", "pplx_dispatch", "pplx_combine", "hep_dispatch_with_permute", "hep_combine_with_unpermute"};

static _Thread_local const moe_ops *tm_inner;
static _Thread_local moe_stage_timer *tm_active;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double tm_begin(void) { return now_s(); }

static void tm_end(int e, double t0)
{
    if (tm_inner->synchronize) tm_inner->synchronize();
    if (!tm_active) return;
    tm_active->seconds[e] += now_s() - t0;
    tm_active->calls[e]++;
}

static moe_status tm_route(const moe_tensor *logits, const moe_route_params *p, moe_tensor *topk_ids, moe_tensor *topk_weights)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->route(logits, p, topk_ids, topk_weights);
    tm_end(TM_ROUTE, t0);
    return s;
}

static moe_status tm_align_block_size(const moe_tensor *topk_ids, const moe_align_params *p, moe_tensor *sorted_token_ids, moe_tensor *expert_ids, moe_tensor *num_tokens_post_pad)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->align_block_size(topk_ids, p, sorted_token_ids, expert_ids, num_tokens_post_pad);
    tm_end(TM_ALIGN_BLOCK_SIZE, t0);
    return s;
}

static moe_status tm_align_batched(const moe_tensor *expert_num_tokens, int max_tokens, int block_size, moe_tensor *sorted_token_ids, moe_tensor *expert_ids, moe_tensor *num_tokens_post_pad)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->align_batched(expert_num_tokens, max_tokens, block_size, sorted_token_ids, expert_ids, num_tokens_post_pad);
    tm_end(TM_ALIGN_BATCHED, t0);
    return s;
}

static moe_status tm_sort_ck(const moe_tensor *topk_ids, const moe_tensor *topk_weights, const moe_sort_ck_params *params, moe_tensor *sorted_token_ids, moe_tensor *sorted_weights, moe_tensor *sorted_expert_ids, moe_tensor *num_tokens_post_padded)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->sort_ck(topk_ids, topk_weights, params, sorted_token_ids, sorted_weights, sorted_expert_ids, num_tokens_post_padded);
    tm_end(TM_SORT_CK, t0);
    return s;
}

static moe_status tm_maps_trtllm(const moe_tensor *token_selected_experts, const moe_maps_trtllm_params *params, moe_tensor *permuted_row_to_unpermuted_row, moe_tensor *unpermuted_row_to_permuted_row, moe_tensor *expert_first_token_offset, moe_tensor *permuted_token_selected_experts)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->maps_trtllm(token_selected_experts, params, permuted_row_to_unpermuted_row, unpermuted_row_to_permuted_row, expert_first_token_offset, permuted_token_selected_experts);
    tm_end(TM_MAPS_TRTLLM, t0);
    return s;
}

static moe_status tm_quantize(const moe_quant_spec *spec, const moe_tensor *x, const moe_tensor *static_scale, moe_tensor *q_out, moe_tensor *scale_out, moe_tensor *global_scale_out)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->quantize(spec, x, static_scale, q_out, scale_out, global_scale_out);
    tm_end(TM_QUANTIZE, t0);
    return s;
}

static moe_status tm_dequantize(const moe_quant_spec *spec, const moe_tensor *q, const moe_tensor *scale, const moe_tensor *global_scale, moe_tensor *x_out)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->dequantize(spec, q, scale, global_scale, x_out);
    tm_end(TM_DEQUANTIZE, t0);
    return s;
}

static moe_status tm_permute_rows(const moe_tensor *x, const moe_tensor *src, moe_tensor *out)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->permute_rows(x, src, out);
    tm_end(TM_PERMUTE_ROWS, t0);
    return s;
}

static moe_status tm_unpermute_rows(const moe_tensor *y, const moe_tensor *dst, moe_tensor *out)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->unpermute_rows(y, dst, out);
    tm_end(TM_UNPERMUTE_ROWS, t0);
    return s;
}

static moe_status tm_expand_trtllm(const moe_tensor *x, const moe_tensor *permuted_row_to_unpermuted_row, int topk, const moe_tensor *topk_weights, moe_tensor *out, moe_tensor *permuted_scales)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->expand_trtllm(x, permuted_row_to_unpermuted_row, topk, topk_weights, out, permuted_scales);
    tm_end(TM_EXPAND_TRTLLM, t0);
    return s;
}

static moe_status tm_batched_scatter(const moe_tensor *x, const moe_tensor *topk_ids, int first_expert, moe_tensor *out, moe_tensor *counts)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->batched_scatter(x, topk_ids, first_expert, out, counts);
    tm_end(TM_BATCHED_SCATTER, t0);
    return s;
}

static moe_status tm_permute_grouped(const moe_tensor *x, const moe_tensor *topk_ids, int first_expert, int pad_multiple, moe_tensor *out, moe_tensor *row_src, moe_tensor *counts, moe_tensor *offsets)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->permute_grouped(x, topk_ids, first_expert, pad_multiple, out, row_src, counts, offsets);
    tm_end(TM_PERMUTE_GROUPED, t0);
    return s;
}

static moe_status tm_grouped_gemm(const moe_gemm_args *g, moe_tensor *out)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->grouped_gemm(g, out);
    tm_end(TM_GROUPED_GEMM, t0);
    return s;
}

static moe_status tm_activation(const moe_tensor *x, const moe_tensor *row_expert, const moe_act_params *p, moe_tensor *out)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->activation(x, row_expert, p, out);
    tm_end(TM_ACTIVATION, t0);
    return s;
}

static moe_status tm_war_contiguous(const moe_tensor *fused, const moe_tensor *topk_weights, int weights_on_input, moe_sum_variant sum, moe_tensor *out)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->war_contiguous(fused, topk_weights, weights_on_input, sum, out);
    tm_end(TM_WAR_CONTIGUOUS, t0);
    return s;
}

static moe_status tm_war_noop(const moe_tensor *fused, moe_tensor *out)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->war_noop(fused, out);
    tm_end(TM_WAR_NOOP, t0);
    return s;
}

static moe_status tm_war_naive_batched(const moe_tensor *fused, const moe_tensor *topk_ids, const moe_tensor *topk_weights, int first_expert, int weights_on_input, moe_tensor *out)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->war_naive_batched(fused, topk_ids, topk_weights, first_expert, weights_on_input, out);
    tm_end(TM_WAR_NAIVE_BATCHED, t0);
    return s;
}

static moe_status tm_finalize_trtllm(const moe_tensor *y, const moe_tensor *unpermuted_row_to_permuted_row, const moe_tensor *topk_ids, const moe_tensor *topk_weights, const moe_tensor *bias, int first_expert, int num_local_experts, moe_tensor *out)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->finalize_trtllm(y, unpermuted_row_to_permuted_row, topk_ids, topk_weights, bias, first_expert, num_local_experts, out);
    tm_end(TM_FINALIZE_TRTLLM, t0);
    return s;
}

static moe_status tm_ep_allgather_dispatch(int world_size, int num_experts, const moe_tensor *x, const moe_tensor *x_scales, const moe_tensor *topk_ids, const moe_tensor *topk_weights, moe_tensor *gathered_x, moe_tensor *gathered_scales, moe_tensor *gathered_ids, moe_tensor *gathered_weights)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->ep_allgather_dispatch(world_size, num_experts, x, x_scales, topk_ids, topk_weights, gathered_x, gathered_scales, gathered_ids, gathered_weights);
    tm_end(TM_EP_ALLGATHER_DISPATCH, t0);
    return s;
}

static moe_status tm_ep_reduce_scatter_combine(int world_size, const moe_tensor *partial, moe_tensor *out)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->ep_reduce_scatter_combine(world_size, partial, out);
    tm_end(TM_EP_REDUCE_SCATTER_COMBINE, t0);
    return s;
}

static moe_status tm_deepep_layout(const moe_deepep_config *cfg, const moe_tensor *topk_ids, const moe_deepep_layout *out)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->deepep_layout(cfg, topk_ids, out);
    tm_end(TM_DEEPEP_LAYOUT, t0);
    return s;
}

static moe_status tm_deepep_dispatch(const moe_deepep_config *cfg, const moe_tensor *x, const moe_tensor *x_scales, const moe_tensor *topk_ids, const moe_tensor *topk_weights, const moe_deepep_recv *out)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->deepep_dispatch(cfg, x, x_scales, topk_ids, topk_weights, out);
    tm_end(TM_DEEPEP_DISPATCH, t0);
    return s;
}

static moe_status tm_deepep_combine(const moe_deepep_config *cfg, const moe_tensor *x, const moe_tensor *topk_weights, const moe_tensor *is_token_in_rank, const moe_tensor *bias0, const moe_tensor *bias1, moe_tensor *combined_x, moe_tensor *combined_topk_weights)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->deepep_combine(cfg, x, topk_weights, is_token_in_rank, bias0, bias1, combined_x, combined_topk_weights);
    tm_end(TM_DEEPEP_COMBINE, t0);
    return s;
}

static moe_status tm_deepep_ll_dispatch(const moe_deepep_ll_config *cfg, const moe_tensor *x, const moe_tensor *topk_ids, const moe_deepep_ll_recv *out)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->deepep_ll_dispatch(cfg, x, topk_ids, out);
    tm_end(TM_DEEPEP_LL_DISPATCH, t0);
    return s;
}

static moe_status tm_deepep_ll_combine(const moe_deepep_ll_config *cfg, const moe_tensor *y, const moe_tensor *src_info, const moe_tensor *layout_range, const moe_tensor *topk_ids, const moe_tensor *topk_weights, moe_tensor *out)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->deepep_ll_combine(cfg, y, src_info, layout_range, topk_ids, topk_weights, out);
    tm_end(TM_DEEPEP_LL_COMBINE, t0);
    return s;
}

static moe_status tm_pplx_dispatch(const moe_pplx_config *cfg, const moe_tensor *x, const moe_tensor *x_scales, const moe_tensor *topk_ids, const moe_pplx_recv *out)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->pplx_dispatch(cfg, x, x_scales, topk_ids, out);
    tm_end(TM_PPLX_DISPATCH, t0);
    return s;
}

static moe_status tm_pplx_combine(const moe_pplx_config *cfg, const moe_tensor *expert_y, const moe_tensor *num_tokens, const moe_tensor *src, const moe_tensor *topk_ids, const moe_tensor *topk_weights, moe_tensor *out)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->pplx_combine(cfg, expert_y, num_tokens, src, topk_ids, topk_weights, out);
    tm_end(TM_PPLX_COMBINE, t0);
    return s;
}

static moe_status tm_hep_dispatch_with_permute(const moe_hep_config *cfg, const moe_tensor *x, const moe_tensor *x_scales, const moe_tensor *topk_ids, const moe_tensor *topk_weights, const moe_hep_permuted *out)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->hep_dispatch_with_permute(cfg, x, x_scales, topk_ids, topk_weights, out);
    tm_end(TM_HEP_DISPATCH_WITH_PERMUTE, t0);
    return s;
}

static moe_status tm_hep_combine_with_unpermute(const moe_hep_config *cfg, const moe_tensor *y, const moe_tensor *row_id_map, const moe_tensor *probs, moe_tensor *out, moe_tensor *out_probs)
{
    double t0 = tm_begin();
    moe_status s = tm_inner->hep_combine_with_unpermute(cfg, y, row_id_map, probs, out, out_probs);
    tm_end(TM_HEP_COMBINE_WITH_UNPERMUTE, t0);
    return s;
}

moe_status moe_stage_timer_begin(const moe_ops *backend, moe_stage_timer *t)
{
    moe_status st = moe_ops_check(backend);
    if (st) return st;
    if (!t) return moe_fail(MOE_ERR_NULL, "moe_stage_timer_begin: t must not be NULL");
    memset(t, 0, sizeof *t);
    const moe_ops *b = backend;
    t->ops = *b;
    t->ops.route = b->route ? tm_route : NULL;
    t->ops.align_block_size = b->align_block_size ? tm_align_block_size : NULL;
    t->ops.align_batched = b->align_batched ? tm_align_batched : NULL;
    t->ops.sort_ck = b->sort_ck ? tm_sort_ck : NULL;
    t->ops.maps_trtllm = b->maps_trtllm ? tm_maps_trtllm : NULL;
    t->ops.quantize = b->quantize ? tm_quantize : NULL;
    t->ops.dequantize = b->dequantize ? tm_dequantize : NULL;
    t->ops.permute_rows = b->permute_rows ? tm_permute_rows : NULL;
    t->ops.unpermute_rows = b->unpermute_rows ? tm_unpermute_rows : NULL;
    t->ops.expand_trtllm = b->expand_trtllm ? tm_expand_trtllm : NULL;
    t->ops.batched_scatter = b->batched_scatter ? tm_batched_scatter : NULL;
    t->ops.permute_grouped = b->permute_grouped ? tm_permute_grouped : NULL;
    t->ops.grouped_gemm = b->grouped_gemm ? tm_grouped_gemm : NULL;
    t->ops.activation = b->activation ? tm_activation : NULL;
    t->ops.war_contiguous = b->war_contiguous ? tm_war_contiguous : NULL;
    t->ops.war_noop = b->war_noop ? tm_war_noop : NULL;
    t->ops.war_naive_batched = b->war_naive_batched ? tm_war_naive_batched : NULL;
    t->ops.finalize_trtllm = b->finalize_trtllm ? tm_finalize_trtllm : NULL;
    t->ops.ep_allgather_dispatch = b->ep_allgather_dispatch ? tm_ep_allgather_dispatch : NULL;
    t->ops.ep_reduce_scatter_combine = b->ep_reduce_scatter_combine ? tm_ep_reduce_scatter_combine : NULL;
    t->ops.deepep_layout = b->deepep_layout ? tm_deepep_layout : NULL;
    t->ops.deepep_dispatch = b->deepep_dispatch ? tm_deepep_dispatch : NULL;
    t->ops.deepep_combine = b->deepep_combine ? tm_deepep_combine : NULL;
    t->ops.deepep_ll_dispatch = b->deepep_ll_dispatch ? tm_deepep_ll_dispatch : NULL;
    t->ops.deepep_ll_combine = b->deepep_ll_combine ? tm_deepep_ll_combine : NULL;
    t->ops.pplx_dispatch = b->pplx_dispatch ? tm_pplx_dispatch : NULL;
    t->ops.pplx_combine = b->pplx_combine ? tm_pplx_combine : NULL;
    t->ops.hep_dispatch_with_permute = b->hep_dispatch_with_permute ? tm_hep_dispatch_with_permute : NULL;
    t->ops.hep_combine_with_unpermute = b->hep_combine_with_unpermute ? tm_hep_combine_with_unpermute : NULL;
    tm_inner = backend, tm_active = t;
    return MOE_OK;
}

void moe_stage_timer_end(moe_stage_timer *t)
{
    if (tm_active == t) tm_active = NULL, tm_inner = NULL;
}

int moe_stage_timer_count(void) { return TM_COUNT; }
const char *moe_stage_timer_name(int i) { return i >= 0 && i < TM_COUNT ? NAMES[i] : NULL; }
