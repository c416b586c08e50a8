/* The replay's interposer entries, one per stage of the ops table, in
 * table order (include/moe/replay.h; the staging helpers are in
 * replay_internal.h). Each one registers its input tensors (those inside
 * params structs too) and its outputs, stages them, calls the backend
 * with the caller's arguments and the reference with the host copies. */
#include "replay_internal.h"

#define OPEN(stage, entry)                                                                                    \
    rp_call c;                                                                                                \
    moe_status st;                                                                                            \
    if (!rp_open(&c, stage, &st)) return st;                                                                  \
    if (!c.b->entry)                                                                                          \
        return moe_fail(MOE_ERR_UNSUPPORTED, "replay: backend '%s' has no " #entry " entry",                 \
                        c.b->name ? c.b->name : "?")

#define IN(t) rp_in(&c, t, #t)
#define OUT(t) rp_out(&c, t, #t)

/* the backend with the caller's arguments, then the reference on the host copies */
#define RUN(entry, bargs, rargs)                                                                              \
    rp_stage(&c);                                                                                             \
    st = c.b->entry bargs;                                                                                    \
    if (rp_after(&c, st)) rp_compare(&c, moe_ops_ref.entry rargs);                                           \
    rp_free(&c);                                                                                              \
    return st

/* ---- routing, align / sort / maps ----------------------------------------- */

static moe_status rp_route(const moe_tensor *logits, const moe_route_params *p, moe_tensor *topk_ids,
                           moe_tensor *topk_weights)
{
    OPEN(RP_ROUTE, route);
    moe_route_params hp, *hpp = NULL;
    if (p) hp = *p, hp.correction_bias = IN(p->correction_bias), hpp = &hp;
    const moe_tensor *hl = IN(logits);
    moe_tensor *o1 = OUT(topk_ids), *o2 = OUT(topk_weights);
    RUN(route, (logits, p, topk_ids, topk_weights), (hl, hpp, o1, o2));
}

static moe_status rp_align_block_size(const moe_tensor *topk_ids, const moe_align_params *p,
                                      moe_tensor *sorted_token_ids, moe_tensor *expert_ids,
                                      moe_tensor *num_tokens_post_pad)
{
    OPEN(RP_ALIGN_BLOCK_SIZE, align_block_size);
    moe_align_params hp, *hpp = NULL;
    if (p) hp = *p, hp.expert_map = IN(p->expert_map), hpp = &hp;
    const moe_tensor *hi = IN(topk_ids);
    moe_tensor *o1 = OUT(sorted_token_ids), *o2 = OUT(expert_ids), *o3 = OUT(num_tokens_post_pad);
    RUN(align_block_size, (topk_ids, p, sorted_token_ids, expert_ids, num_tokens_post_pad), (hi, hpp, o1, o2, o3));
}

static moe_status rp_align_batched(const moe_tensor *expert_num_tokens, int max_tokens, int block_size,
                                   moe_tensor *sorted_token_ids, moe_tensor *expert_ids,
                                   moe_tensor *num_tokens_post_pad)
{
    OPEN(RP_ALIGN_BATCHED, align_batched);
    const moe_tensor *hn = IN(expert_num_tokens);
    moe_tensor *o1 = OUT(sorted_token_ids), *o2 = OUT(expert_ids), *o3 = OUT(num_tokens_post_pad);
    RUN(align_batched, (expert_num_tokens, max_tokens, block_size, sorted_token_ids, expert_ids, num_tokens_post_pad),
        (hn, max_tokens, block_size, o1, o2, o3));
}

static moe_status rp_sort_ck(const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                             const moe_sort_ck_params *params, moe_tensor *sorted_token_ids,
                             moe_tensor *sorted_weights, moe_tensor *sorted_expert_ids,
                             moe_tensor *num_tokens_post_padded)
{
    OPEN(RP_SORT_CK, sort_ck);
    moe_sort_ck_params hp, *hpp = NULL;
    if (params) hp = *params, hp.local_expert_mask = IN(params->local_expert_mask), hpp = &hp;
    const moe_tensor *hi = IN(topk_ids), *hw = IN(topk_weights);
    moe_tensor *o1 = OUT(sorted_token_ids), *o2 = OUT(sorted_weights), *o3 = OUT(sorted_expert_ids),
               *o4 = OUT(num_tokens_post_padded);
    RUN(sort_ck,
        (topk_ids, topk_weights, params, sorted_token_ids, sorted_weights, sorted_expert_ids, num_tokens_post_padded),
        (hi, hw, hpp, o1, o2, o3, o4));
}

static moe_status rp_maps_trtllm(const moe_tensor *token_selected_experts, const moe_maps_trtllm_params *params,
                                 moe_tensor *permuted_row_to_unpermuted_row, moe_tensor *unpermuted_row_to_permuted_row,
                                 moe_tensor *expert_first_token_offset, moe_tensor *permuted_token_selected_experts)
{
    OPEN(RP_MAPS_TRTLLM, maps_trtllm);
    const moe_tensor *hs = IN(token_selected_experts);
    moe_tensor *o1 = OUT(permuted_row_to_unpermuted_row), *o2 = OUT(unpermuted_row_to_permuted_row),
               *o3 = OUT(expert_first_token_offset), *o4 = OUT(permuted_token_selected_experts);
    RUN(maps_trtllm,
        (token_selected_experts, params, permuted_row_to_unpermuted_row, unpermuted_row_to_permuted_row,
         expert_first_token_offset, permuted_token_selected_experts),
        (hs, params, o1, o2, o3, o4));
}

/* ---- quantization, permutation ------------------------------------------ */

static moe_status rp_quantize(const moe_quant_spec *spec, const moe_tensor *x, const moe_tensor *static_scale,
                              moe_tensor *q_out, moe_tensor *scale_out, moe_tensor *global_scale_out)
{
    OPEN(RP_QUANTIZE, quantize);
    const moe_tensor *hx = IN(x), *hs = IN(static_scale);
    moe_tensor *o1 = OUT(q_out), *o2 = OUT(scale_out), *o3 = OUT(global_scale_out);
    RUN(quantize, (spec, x, static_scale, q_out, scale_out, global_scale_out), (spec, hx, hs, o1, o2, o3));
}

static moe_status rp_dequantize(const moe_quant_spec *spec, const moe_tensor *q, const moe_tensor *scale,
                                const moe_tensor *global_scale, moe_tensor *x_out)
{
    OPEN(RP_DEQUANTIZE, dequantize);
    const moe_tensor *hq = IN(q), *hs = IN(scale), *hg = IN(global_scale);
    moe_tensor *o = OUT(x_out);
    RUN(dequantize, (spec, q, scale, global_scale, x_out), (spec, hq, hs, hg, o));
}

static moe_status rp_permute_rows(const moe_tensor *x, const moe_tensor *src, moe_tensor *out)
{
    OPEN(RP_PERMUTE_ROWS, permute_rows);
    const moe_tensor *hx = IN(x), *hs = IN(src);
    moe_tensor *o = OUT(out);
    RUN(permute_rows, (x, src, out), (hx, hs, o));
}

static moe_status rp_unpermute_rows(const moe_tensor *y, const moe_tensor *dst, moe_tensor *out)
{
    OPEN(RP_UNPERMUTE_ROWS, unpermute_rows);
    const moe_tensor *hy = IN(y), *hd = IN(dst);
    moe_tensor *o = OUT(out);
    RUN(unpermute_rows, (y, dst, out), (hy, hd, o));
}

static moe_status rp_expand_trtllm(const moe_tensor *x, const moe_tensor *permuted_row_to_unpermuted_row, int topk,
                                   const moe_tensor *topk_weights, moe_tensor *out, moe_tensor *permuted_scales)
{
    OPEN(RP_EXPAND_TRTLLM, expand_trtllm);
    const moe_tensor *hx = IN(x), *hp = IN(permuted_row_to_unpermuted_row), *hw = IN(topk_weights);
    moe_tensor *o1 = OUT(out), *o2 = OUT(permuted_scales);
    RUN(expand_trtllm, (x, permuted_row_to_unpermuted_row, topk, topk_weights, out, permuted_scales),
        (hx, hp, topk, hw, o1, o2));
}

static moe_status rp_batched_scatter(const moe_tensor *x, const moe_tensor *topk_ids, int first_expert,
                                     moe_tensor *out, moe_tensor *counts)
{
    OPEN(RP_BATCHED_SCATTER, batched_scatter);
    const moe_tensor *hx = IN(x), *hi = IN(topk_ids);
    moe_tensor *o1 = OUT(out), *o2 = OUT(counts);
    RUN(batched_scatter, (x, topk_ids, first_expert, out, counts), (hx, hi, first_expert, o1, o2));
}

static moe_status rp_permute_grouped(const moe_tensor *x, const moe_tensor *topk_ids, int first_expert,
                                     int pad_multiple, moe_tensor *out, moe_tensor *row_src, moe_tensor *counts,
                                     moe_tensor *offsets)
{
    OPEN(RP_PERMUTE_GROUPED, permute_grouped);
    const moe_tensor *hx = IN(x), *hi = IN(topk_ids);
    moe_tensor *o1 = OUT(out), *o2 = OUT(row_src), *o3 = OUT(counts), *o4 = OUT(offsets);
    RUN(permute_grouped, (x, topk_ids, first_expert, pad_multiple, out, row_src, counts, offsets),
        (hx, hi, first_expert, pad_multiple, o1, o2, o3, o4));
}

/* ---- experts ------------------------------------------------------------ */

static moe_status rp_grouped_gemm(const moe_gemm_args *g, moe_tensor *out)
{
    OPEN(RP_GROUPED_GEMM, grouped_gemm);
    moe_gemm_args h, *hg = NULL;
    if (g) {
        h = *g, hg = &h;
        h.a = IN(g->a), h.a_scale = IN(g->a_scale), h.a_global = IN(g->a_global);
        h.w = IN(g->w), h.w_scale = IN(g->w_scale), h.w_global = IN(g->w_global);
        h.row_expert = IN(g->row_expert), h.bias = IN(g->bias);
    }
    moe_tensor *o = OUT(out);
    rp_stage(&c);
    st = c.b->grouped_gemm(g, out);
    if (rp_after(&c, st) && rp_compare(&c, moe_ops_ref.grouped_gemm(hg, o))) rp_bounded_gemm(&c, hg);
    rp_free(&c);
    return st;
}

static moe_status rp_activation(const moe_tensor *x, const moe_tensor *row_expert, const moe_act_params *p,
                                moe_tensor *out)
{
    OPEN(RP_ACTIVATION, activation);
    moe_act_params hp, *hpp = NULL;
    if (p) {
        hp = *p, hpp = &hp;
        hp.swiglu_alpha = IN(p->swiglu_alpha), hp.swiglu_beta = IN(p->swiglu_beta), hp.swiglu_limit = IN(p->swiglu_limit);
    }
    const moe_tensor *hx = IN(x), *hr = IN(row_expert);
    moe_tensor *o = OUT(out);
    RUN(activation, (x, row_expert, p, out), (hx, hr, hpp, o));
}

/* ---- weight and reduce ---------------------------------------------------- */

static moe_status rp_war_contiguous(const moe_tensor *fused, const moe_tensor *topk_weights, int weights_on_input,
                                    moe_sum_variant sum, moe_tensor *out)
{
    OPEN(RP_WAR_CONTIGUOUS, war_contiguous);
    const moe_tensor *hf = IN(fused), *hw = IN(topk_weights);
    moe_tensor *o = OUT(out);
    RUN(war_contiguous, (fused, topk_weights, weights_on_input, sum, out), (hf, hw, weights_on_input, sum, o));
}

static moe_status rp_war_noop(const moe_tensor *fused, moe_tensor *out)
{
    OPEN(RP_WAR_NOOP, war_noop);
    const moe_tensor *hf = IN(fused);
    moe_tensor *o = OUT(out);
    RUN(war_noop, (fused, out), (hf, o));
}

static moe_status rp_war_naive_batched(const moe_tensor *fused, const moe_tensor *topk_ids,
                                       const moe_tensor *topk_weights, int first_expert, int weights_on_input,
                                       moe_tensor *out)
{
    OPEN(RP_WAR_NAIVE_BATCHED, war_naive_batched);
    const moe_tensor *hf = IN(fused), *hi = IN(topk_ids), *hw = IN(topk_weights);
    moe_tensor *o = OUT(out);
    RUN(war_naive_batched, (fused, topk_ids, topk_weights, first_expert, weights_on_input, out),
        (hf, hi, hw, first_expert, weights_on_input, o));
}

static moe_status rp_finalize_trtllm(const moe_tensor *y, const moe_tensor *unpermuted_row_to_permuted_row,
                                     const moe_tensor *topk_ids, const moe_tensor *topk_weights, const moe_tensor *bias,
                                     int first_expert, int num_local_experts, moe_tensor *out)
{
    OPEN(RP_FINALIZE_TRTLLM, finalize_trtllm);
    const moe_tensor *hy = IN(y), *hu = IN(unpermuted_row_to_permuted_row), *hi = IN(topk_ids),
                     *hw = IN(topk_weights), *hb = IN(bias);
    moe_tensor *o = OUT(out);
    RUN(finalize_trtllm,
        (y, unpermuted_row_to_permuted_row, topk_ids, topk_weights, bias, first_expert, num_local_experts, out),
        (hy, hu, hi, hw, hb, first_expert, num_local_experts, o));
}

/* ---- dispatch / combine ---------------------------------------------------- */

static moe_status rp_ep_allgather_dispatch(int world_size, int num_experts, const moe_tensor *x,
                                           const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                           const moe_tensor *topk_weights, moe_tensor *gathered_x,
                                           moe_tensor *gathered_scales, moe_tensor *gathered_ids,
                                           moe_tensor *gathered_weights)
{
    OPEN(RP_EP_ALLGATHER_DISPATCH, ep_allgather_dispatch);
    const moe_tensor *hx = IN(x), *hs = IN(x_scales), *hi = IN(topk_ids), *hw = IN(topk_weights);
    moe_tensor *o1 = OUT(gathered_x), *o2 = OUT(gathered_scales), *o3 = OUT(gathered_ids),
               *o4 = OUT(gathered_weights);
    RUN(ep_allgather_dispatch,
        (world_size, num_experts, x, x_scales, topk_ids, topk_weights, gathered_x, gathered_scales, gathered_ids,
         gathered_weights),
        (world_size, num_experts, hx, hs, hi, hw, o1, o2, o3, o4));
}

static moe_status rp_ep_reduce_scatter_combine(int world_size, const moe_tensor *partial, moe_tensor *out)
{
    OPEN(RP_EP_REDUCE_SCATTER_COMBINE, ep_reduce_scatter_combine);
    const moe_tensor *hp = IN(partial);
    moe_tensor *o = OUT(out);
    RUN(ep_reduce_scatter_combine, (world_size, partial, out), (world_size, hp, o));
}

static moe_status rp_deepep_layout(const moe_deepep_config *cfg, const moe_tensor *topk_ids,
                                   const moe_deepep_layout *out)
{
    OPEN(RP_DEEPEP_LAYOUT, deepep_layout);
    const moe_tensor *hi = IN(topk_ids);
    moe_deepep_layout ho, *hop = NULL;
    if (out) {
        hop = &ho;
        ho.num_tokens_per_expert = OUT(out->num_tokens_per_expert), ho.num_tokens_per_rank = OUT(out->num_tokens_per_rank);
        ho.num_tokens_per_node = OUT(out->num_tokens_per_node), ho.is_token_in_rank = OUT(out->is_token_in_rank);
    }
    RUN(deepep_layout, (cfg, topk_ids, out), (cfg, hi, hop));
}

static moe_status rp_deepep_dispatch(const moe_deepep_config *cfg, const moe_tensor *x, const moe_tensor *x_scales,
                                     const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                     const moe_deepep_recv *out)
{
    OPEN(RP_DEEPEP_DISPATCH, deepep_dispatch);
    const moe_tensor *hx = IN(x), *hs = IN(x_scales), *hi = IN(topk_ids), *hw = IN(topk_weights);
    moe_deepep_recv ho, *hop = NULL;
    if (out) {
        hop = &ho;
        ho.x = OUT(out->x), ho.x_scales = OUT(out->x_scales), ho.topk_ids = OUT(out->topk_ids);
        ho.topk_weights = OUT(out->topk_weights), ho.src_idx = OUT(out->src_idx), ho.num_recv = OUT(out->num_recv);
        ho.num_recv_per_expert = OUT(out->num_recv_per_expert), ho.rank_prefix_matrix = OUT(out->rank_prefix_matrix);
    }
    RUN(deepep_dispatch, (cfg, x, x_scales, topk_ids, topk_weights, out), (cfg, hx, hs, hi, hw, hop));
}

static moe_status rp_deepep_combine(const moe_deepep_config *cfg, const moe_tensor *x, const moe_tensor *topk_weights,
                                    const moe_tensor *is_token_in_rank, const moe_tensor *bias0,
                                    const moe_tensor *bias1, moe_tensor *combined_x,
                                    moe_tensor *combined_topk_weights)
{
    OPEN(RP_DEEPEP_COMBINE, deepep_combine);
    const moe_tensor *hx = IN(x), *hw = IN(topk_weights), *hi = IN(is_token_in_rank), *h0 = IN(bias0),
                     *h1 = IN(bias1);
    moe_tensor *o1 = OUT(combined_x), *o2 = OUT(combined_topk_weights);
    RUN(deepep_combine, (cfg, x, topk_weights, is_token_in_rank, bias0, bias1, combined_x, combined_topk_weights),
        (cfg, hx, hw, hi, h0, h1, o1, o2));
}

static moe_status rp_deepep_ll_dispatch(const moe_deepep_ll_config *cfg, const moe_tensor *x,
                                        const moe_tensor *topk_ids, const moe_deepep_ll_recv *out)
{
    OPEN(RP_DEEPEP_LL_DISPATCH, deepep_ll_dispatch);
    const moe_tensor *hx = IN(x), *hi = IN(topk_ids);
    moe_deepep_ll_recv ho, *hop = NULL;
    if (out) {
        hop = &ho;
        ho.x = OUT(out->x), ho.x_scales = OUT(out->x_scales), ho.count = OUT(out->count);
        ho.src_info = OUT(out->src_info), ho.layout_range = OUT(out->layout_range);
    }
    rp_stage(&c);
    st = c.b->deepep_ll_dispatch(cfg, x, topk_ids, out);
    if (rp_after(&c, st) && rp_compare(&c, moe_ops_ref.deepep_ll_dispatch(cfg, hx, hi, hop))) rp_set_deepep_ll(&c, cfg);
    rp_free(&c);
    return st;
}

static moe_status rp_deepep_ll_combine(const moe_deepep_ll_config *cfg, const moe_tensor *y,
                                       const moe_tensor *src_info, const moe_tensor *layout_range,
                                       const moe_tensor *topk_ids, const moe_tensor *topk_weights, moe_tensor *out)
{
    OPEN(RP_DEEPEP_LL_COMBINE, deepep_ll_combine);
    const moe_tensor *hy = IN(y), *hs = IN(src_info), *hl = IN(layout_range), *hi = IN(topk_ids),
                     *hw = IN(topk_weights);
    moe_tensor *o = OUT(out);
    RUN(deepep_ll_combine, (cfg, y, src_info, layout_range, topk_ids, topk_weights, out), (cfg, hy, hs, hl, hi, hw, o));
}

static moe_status rp_pplx_dispatch(const moe_pplx_config *cfg, const moe_tensor *x, const moe_tensor *x_scales,
                                   const moe_tensor *topk_ids, const moe_pplx_recv *out)
{
    OPEN(RP_PPLX_DISPATCH, pplx_dispatch);
    const moe_tensor *hx = IN(x), *hs = IN(x_scales), *hi = IN(topk_ids);
    moe_pplx_recv ho, *hop = NULL;
    if (out) {
        hop = &ho;
        ho.x = OUT(out->x), ho.x_scales = OUT(out->x_scales), ho.num_tokens = OUT(out->num_tokens);
        ho.src = OUT(out->src);
    }
    rp_stage(&c);
    st = c.b->pplx_dispatch(cfg, x, x_scales, topk_ids, out);
    if (rp_after(&c, st) && rp_compare(&c, moe_ops_ref.pplx_dispatch(cfg, hx, hs, hi, hop))) rp_set_pplx(&c);
    rp_free(&c);
    return st;
}

static moe_status rp_pplx_combine(const moe_pplx_config *cfg, const moe_tensor *expert_y, const moe_tensor *num_tokens,
                                  const moe_tensor *src, const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                  moe_tensor *out)
{
    OPEN(RP_PPLX_COMBINE, pplx_combine);
    const moe_tensor *hy = IN(expert_y), *hn = IN(num_tokens), *hs = IN(src), *hi = IN(topk_ids),
                     *hw = IN(topk_weights);
    moe_tensor *o = OUT(out);
    RUN(pplx_combine, (cfg, expert_y, num_tokens, src, topk_ids, topk_weights, out), (cfg, hy, hn, hs, hi, hw, o));
}

static moe_status rp_hep_dispatch(const moe_hep_config *cfg, const moe_tensor *x, const moe_tensor *x_scales,
                                  const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                  const moe_hep_permuted *out)
{
    OPEN(RP_HEP_DISPATCH, hep_dispatch_with_permute);
    const moe_tensor *hx = IN(x), *hs = IN(x_scales), *hi = IN(topk_ids), *hw = IN(topk_weights);
    moe_hep_permuted ho, *hop = NULL;
    if (out) {
        hop = &ho;
        ho.x = OUT(out->x), ho.probs = OUT(out->probs), ho.x_scales = OUT(out->x_scales);
        ho.tokens_per_expert = OUT(out->tokens_per_expert), ho.padded_tokens_per_expert = OUT(out->padded_tokens_per_expert);
        ho.row_id_map = OUT(out->row_id_map), ho.overflow_flag = OUT(out->overflow_flag);
        ho.num_dispatched = OUT(out->num_dispatched);
    }
    RUN(hep_dispatch_with_permute, (cfg, x, x_scales, topk_ids, topk_weights, out), (cfg, hx, hs, hi, hw, hop));
}

static moe_status rp_hep_combine(const moe_hep_config *cfg, const moe_tensor *y, const moe_tensor *row_id_map,
                                 const moe_tensor *probs, moe_tensor *out, moe_tensor *out_probs)
{
    OPEN(RP_HEP_COMBINE, hep_combine_with_unpermute);
    const moe_tensor *hy = IN(y), *hr = IN(row_id_map), *hp = IN(probs);
    moe_tensor *o1 = OUT(out), *o2 = OUT(out_probs);
    RUN(hep_combine_with_unpermute, (cfg, y, row_id_map, probs, out, out_probs), (cfg, hy, hr, hp, o1, o2));
}

/* ---- the table ------------------------------------------------------------ */

#define ENTRY(e, w) t->e = b->e ? w : NULL

void rp_build_table(const moe_ops *b, moe_ops *t)
{
    *t = (moe_ops){0};
    t->abi_version = MOE_OPS_ABI_VERSION, t->name = b->name, t->device = b->device;
    t->alloc = b->alloc, t->free = b->free, t->copy = b->copy, t->synchronize = b->synchronize;
    ENTRY(route, rp_route);
    ENTRY(align_block_size, rp_align_block_size);
    ENTRY(align_batched, rp_align_batched);
    ENTRY(sort_ck, rp_sort_ck);
    ENTRY(maps_trtllm, rp_maps_trtllm);
    ENTRY(quantize, rp_quantize);
    ENTRY(dequantize, rp_dequantize);
    ENTRY(permute_rows, rp_permute_rows);
    ENTRY(unpermute_rows, rp_unpermute_rows);
    ENTRY(expand_trtllm, rp_expand_trtllm);
    ENTRY(batched_scatter, rp_batched_scatter);
    ENTRY(permute_grouped, rp_permute_grouped);
    ENTRY(grouped_gemm, rp_grouped_gemm);
    ENTRY(activation, rp_activation);
    ENTRY(war_contiguous, rp_war_contiguous);
    ENTRY(war_noop, rp_war_noop);
    ENTRY(war_naive_batched, rp_war_naive_batched);
    ENTRY(finalize_trtllm, rp_finalize_trtllm);
    ENTRY(ep_allgather_dispatch, rp_ep_allgather_dispatch);
    ENTRY(ep_reduce_scatter_combine, rp_ep_reduce_scatter_combine);
    ENTRY(deepep_layout, rp_deepep_layout);
    ENTRY(deepep_dispatch, rp_deepep_dispatch);
    ENTRY(deepep_combine, rp_deepep_combine);
    ENTRY(deepep_ll_dispatch, rp_deepep_ll_dispatch);
    ENTRY(deepep_ll_combine, rp_deepep_ll_combine);
    ENTRY(pplx_dispatch, rp_pplx_dispatch);
    ENTRY(pplx_combine, rp_pplx_combine);
    ENTRY(hep_dispatch_with_permute, rp_hep_dispatch);
    ENTRY(hep_combine_with_unpermute, rp_hep_combine);
}
