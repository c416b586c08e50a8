/* Expert-parallel dispatch and combine, with every rank simulated in one
 * process (DESIGN section 4, "dispatch / combine"). The semantics are those
 * of anchors/dispatch_sorting.md (sections 0, A, D, E) and
 * anchors/vllm_modular.md 2.6-2.7; section numbers below refer to them.
 *
 * Conventions shared by every function here:
 *   - World: R = world_size ranks, R in {1, 2, 4, 8}; E = num_experts global
 *     experts, E % R == 0; rank r owns experts [r*E_loc, (r+1)*E_loc) with
 *     E_loc = E/R (DeepEP asserts E % R == 0 and owns contiguously, A.1).
 *   - All ranks at once: inputs carry the rank as their leading dimension,
 *     x [R, T, H], topk_ids int32 [R, T, K] (global expert ids),
 *     topk_weights f32 [R, T, K]; outputs likewise ([R, ...], one slice per
 *     receiving rank). Every rank holds the same T tokens (T = 0 is a valid
 *     empty problem); a rank with fewer real tokens is modelled by rows
 *     whose ids are all -1 where the mode accepts -1. Because [R, T, ...]
 *     with T = G/R is the same buffer for every R, one global problem of G
 *     tokens can be run at R = 1, 2, 4, 8 without copying.
 *   - Ids are int32 (upstream DeepEP uses int64, pplx uint32; the values
 *     are the same).
 *   - Token movement copies bytes, so dispatch accepts any unpacked dtype
 *     (bf16, f32, e4m3 ...) and optional scales [R, T, S] (f32, or int32
 *     for packed UE8M0) moved with their rows. Combines accumulate in f32
 *     from +0.0f and round once (RNE, IEEE overflow) to the storage dtype
 *     where the anchor says so; bf16 is the upstream dtype, f32 is accepted
 *     too (its "rounding" is the identity), f16 where upstream has it.
 *   - Capacities (rows per rank or per expert) come from the helpers below;
 *     output rows past the valid ones are unspecified upstream ("garbage")
 *     and written here as zeros (ids -1), so outputs are fully defined.
 *   - Every function validates every argument and returns a status; the
 *     message names the argument and the rule. Host tensors only; outputs
 *     must not alias inputs. On error the outputs are unspecified. */
#ifndef MOE_DISPATCH_H
#define MOE_DISPATCH_H

#include <stdint.h>
#include "moe/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* 1. All-gather dispatch / reduce-scatter combine (vLLM NaiveDPEP, 2.7) */

/* Every rank receives the concatenation of all ranks' tokens, rank-major:
 * row r*T + t is token t of rank r. The gathered tensors are identical on
 * every rank and stored once. x [R, T, H] (any unpacked dtype), x_scales
 * NULL or [R, T, S]; topk_ids int32 [R, T, K] with ids in [0, E) (the
 * experts index expert_map with them); topk_weights f32 [R, T, K].
 * Outputs: gathered_x [R*T, H], gathered_scales [R*T, S] (NULL iff
 * x_scales is), gathered_ids int32 [R*T, K], gathered_weights f32 [R*T, K]. */
moe_status moe_ref_ep_allgather_dispatch(int world_size, int num_experts, const moe_tensor *x,
                                         const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                         const moe_tensor *topk_weights, moe_tensor *gathered_x,
                                         moe_tensor *gathered_scales, moe_tensor *gathered_ids,
                                         moe_tensor *gathered_weights);

/* partial [R, R*T, H] (rank j's weighted, locally reduced expert output for
 * every gathered token), out [R, T, H] of the same dtype (f32/bf16/f16):
 * out[r, t] = round(sum over j = 0..R-1 ascending of partial[j, r*T + t]),
 * f32 from +0, one rounding. NCCL's reduce-scatter order and per-hop
 * rounding are not specified, so against real NCCL this is BOUNDED. */
moe_status moe_ref_ep_reduce_scatter_combine(int world_size, const moe_tensor *partial,
                                             moe_tensor *out);

/* ------------------------------------------------------------------ */
/* 2. DeepEP normal (high-throughput) mode: layout, dispatch, combine (A.2-A.4) */

typedef struct {
    int world_size;
    int num_experts;
    int num_ranks_per_node; /* divides R; R itself = one node (intranode) */
    int expert_alignment;   /* >= 1; per-expert received counts round up to it */
} moe_deepep_config;

/* get_dispatch_layout for each simulated rank (A.2). */
typedef struct {
    moe_tensor *num_tokens_per_expert; /* int32 [R, E]: (t,k) pairs per expert */
    moe_tensor *num_tokens_per_rank;   /* int32 [R, R]: [src][dst] tokens sent */
    moe_tensor *num_tokens_per_node;   /* NULL or int32 [R, R/ranks_per_node] */
    moe_tensor *is_token_in_rank;      /* bool [R, T, R] */
} moe_deepep_layout;

moe_status moe_ref_deepep_layout(const moe_deepep_config *cfg, const moe_tensor *topk_ids,
                                 const moe_deepep_layout *out);

/* Exact rows the largest receiving rank needs: max over j of the number of
 * distinct tokens sent to j (at most R*T). */
moe_status moe_deepep_dispatch_capacity(const moe_deepep_config *cfg, const moe_tensor *topk_ids,
                                        int64_t *rows);

/* Normal dispatch outputs; N >= the capacity above (extra rows behave like
 * num_worst_tokens: ids -1, everything else zero). */
typedef struct {
    moe_tensor *x;            /* [R, N, H], x's dtype: bit copies */
    moe_tensor *x_scales;     /* [R, N, S] or NULL iff no input scales */
    moe_tensor *topk_ids;     /* int32 [R, N, K]: local id, or -1 */
    moe_tensor *topk_weights; /* f32 [R, N, K]: weight, 0.0f where -1 */
    moe_tensor *src_idx;      /* int32 [R, N]: token index in its source rank, -1 past num_recv */
    moe_tensor *num_recv;     /* int32 [R] */
    moe_tensor *num_recv_per_expert; /* int32 [R, E_loc]: pairs, rounded up to expert_alignment */
    moe_tensor *rank_prefix_matrix; /* NULL or int32 [R, R]: [i][j] = tokens ranks 0..i send to j */
} moe_deepep_recv;

/* x [R, T, H], x_scales NULL or [R, T, S] (f32 or int32), topk_ids int32
 * [R, T, K] with ids in [-1, E) (duplicates allowed: counted per pair),
 * topk_weights f32 [R, T, K]. Rows arrive by (source rank, source token)
 * ascending (A.3). */
moe_status moe_ref_deepep_dispatch(const moe_deepep_config *cfg, const moe_tensor *x,
                                   const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                   const moe_tensor *topk_weights, const moe_deepep_recv *out);

/* Normal combine (A.4): x [R, N, H] bf16 or f32, row i of rank j being the
 * (already expert-reduced) output for received row i; is_token_in_rank
 * bool [R, T, R] from the layout is the handle that locates rows;
 * topk_weights NULL or f32 [R, N, K]; bias0/bias1 NULL or [R, T, H] of x's
 * dtype. combined_x [R, T, H]; combined_topk_weights NULL or f32 [R, T, K].
 * Unweighted. One node: bias0 + bias1, then ranks ascending, one rounding.
 * Several nodes (num_ranks_per_node < R): each node's ranks summed from 0
 * and rounded, then bias0 + bias1 plus the node partials in ascending node
 * order, rounded again. */
moe_status moe_ref_deepep_combine(const moe_deepep_config *cfg, const moe_tensor *x,
                                  const moe_tensor *topk_weights,
                                  const moe_tensor *is_token_in_rank, const moe_tensor *bias0,
                                  const moe_tensor *bias1, moe_tensor *combined_x,
                                  moe_tensor *combined_topk_weights);

/* ------------------------------------------------------------------ */
/* 3. DeepEP low-latency mode (A.5, A.6) */

#define MOE_DEEPEP_LL_GROUP 128 /* channels per FP8 scale */

typedef struct {
    int world_size;
    int num_experts;
    int64_t max_tokens_per_rank; /* T_max (num_max_dispatch_tokens_per_rank); T <= T_max */
    int use_fp8;                 /* cast to e4m3 with one scale per 128 channels */
    int round_scale;             /* power-of-two scales (fp8 only) */
    int use_ue8m0;               /* pack the scales as UE8M0 bytes (needs round_scale) */
} moe_deepep_ll_config;

/* Rows per expert of the packed layout: R * T_max; -1 when R is not 1, 2,
 * 4 or 8 or T_max < 0. */
int64_t moe_deepep_ll_rows(int world_size, int64_t max_tokens_per_rank);

/* LL dispatch outputs, T_all = R*T_max. Upstream row order within an
 * expert comes from atomics; the reference fills each expert by ascending
 * (source rank, source token), so consumers must compare rows as sets per
 * (expert, source rank), identified by src_info and layout_range (A.5). */
typedef struct {
    moe_tensor *x;            /* [R, E_loc, T_all, H]: x's dtype, or e4m3 with use_fp8 */
    moe_tensor *x_scales;     /* use_fp8: f32 [R, E_loc, T_all, H/128] (scale_inv);
                                 use_ue8m0: int32 [R, E_loc, T_all, H/512]; else NULL.
                                 Row-major logical layout (upstream strides are
                                 column-major in the last two dims). */
    moe_tensor *count;        /* int32 [R, E_loc]: packed_recv_count */
    moe_tensor *src_info;     /* int32 [R, E_loc, T_all]: source token index, -1 past count */
    moe_tensor *layout_range; /* int64 [R, E_loc, R]: (begin << 32) | count per source rank */
} moe_deepep_ll_recv;

/* x bf16 or f32 [R, T, H] (H % 128 == 0 with use_fp8, H % 512 with
 * use_ue8m0); topk_ids int32 [R, T, K], ids in [-1, E), -1 skipped, no
 * expert twice in a row (the LL combine reads one slot per (expert, token),
 * A.6). Upstream's kernel limits (H in a fixed list, K <= 11, R*T_max % 4)
 * are not semantic and not enforced. */
moe_status moe_ref_deepep_ll_dispatch(const moe_deepep_ll_config *cfg, const moe_tensor *x,
                                      const moe_tensor *topk_ids, const moe_deepep_ll_recv *out);

/* LL combine (A.6): y [R, E_loc, T_all, H] bf16 or f32 (expert outputs in
 * the dispatch layout), src_info and layout_range: the dispatch handle
 * (any row order is accepted); topk_ids / topk_weights: the original
 * tokens' [R, T, K]. out [R, T, H] of y's dtype:
 * out = round(acc), acc = +0, acc = fmaf(y_k, w_k, acc) for k = 0..K-1
 * skipping -1 (nvcc contracts the upstream multiply-add). */
moe_status moe_ref_deepep_ll_combine(const moe_deepep_ll_config *cfg, const moe_tensor *y,
                                     const moe_tensor *src_info, const moe_tensor *layout_range,
                                     const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                     moe_tensor *out);

/* The LL FP8 cast of one 128-channel group (A.5 steps 1-4): amax =
 * max(1e-4f, max |f|) (NaN ignored, as fmaxf does), then scale and
 * scale_inv by the default or round_scale rule, q = e4m3 SAT RNE of
 * f * scale. moe_deepep_ll_scales takes the group's max |f| and applies
 * the 1e-4 floor itself. Default: scale_inv = amax * (1.0f/448.0f),
 * scale = 448.0f / amax. round_scale: e = ceil(log2(amax * (1.0f/448.0f)))
 * read from the f32 bits, scale = 2^-e, scale_inv = 2^e, built as
 * (n + 127) << 23 in 32-bit arithmetic like the GPU (an Inf amax thus
 * gives scale = -Inf, as upstream would). Exposed for tests and the CUDA
 * conformance build. */
void moe_deepep_ll_scales(float amax, int round_scale, float *scale, float *scale_inv);
void moe_deepep_ll_cast_group(const float *f, int round_scale, uint8_t *q, float *scale_inv);
/* UE8M0 byte of a scale_inv: its f32 biased exponent field. */
uint8_t moe_deepep_ll_ue8m0(float scale_inv);

/* LL buffer bytes (csrc/legacy/config.hpp, A.5):
 * 2*send + 2*recv + 2*align128(E*4). */
moe_status moe_deepep_ll_buffer_bytes(int64_t max_tokens_per_rank, int64_t hidden, int num_experts,
                                      uint64_t *bytes);

/* ------------------------------------------------------------------ */
/* 4. pplx-kernels all-to-all (D) */

typedef struct {
    int world_size;
    int dp_size; /* ranks per DP group, divides R; num_dp = R/dp_size */
    int num_experts;
    int64_t max_num_tokens; /* per DP group; T <= max_num_tokens */
} moe_pplx_config;

/* Rows per expert: max_num_tokens * num_dp; -1 for an invalid cfg. */
int64_t moe_pplx_rows(const moe_pplx_config *cfg);

/* pplx dispatch outputs, rows = moe_pplx_rows(). Upstream order is atomic;
 * the reference fills each expert by ascending (sending rank, token), where
 * rank g*dp_size + i of DP group g sends the group's tokens i, i+dp_size, ... */
typedef struct {
    moe_tensor *x;          /* [R, E_loc, rows, H], x's dtype */
    moe_tensor *x_scales;   /* f32 [R, E_loc, rows, S] or NULL iff no input scales */
    moe_tensor *num_tokens; /* int32 [R, E_loc] */
    moe_tensor *src;        /* int32 [R, E_loc, rows]: g*T + t of each row, -1 past num_tokens */
} moe_pplx_recv;

/* x [num_dp, T, H] (one per DP group: replicated on its ranks), x_scales
 * NULL or f32 [num_dp, T, S], topk_ids int32 [num_dp, T, K]: every id in
 * [0, E) (pplx indices are uint32 and combine waits for all K), no expert
 * twice in a row (the per-expert capacity assumes one row per token). */
moe_status moe_ref_pplx_dispatch(const moe_pplx_config *cfg, const moe_tensor *x,
                                 const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                 const moe_pplx_recv *out);

/* pplx combine: expert_y [R, E_loc, rows, H] f32/bf16/f16, num_tokens and
 * src from dispatch (any row order accepted), topk_ids / topk_weights
 * [num_dp, T, K]. out [num_dp, T, H] bf16/f16 (or f32), overwritten:
 * out = round(acc), acc = +0, acc = fmaf(y_k, w_k, acc) for k = 0..K-1
 * (upstream `sum += weight * x` is FMA-contracted by nvcc). Every rank of
 * a DP group receives the same rows. */
moe_status moe_ref_pplx_combine(const moe_pplx_config *cfg, const moe_tensor *expert_y,
                                const moe_tensor *num_tokens, const moe_tensor *src,
                                const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                moe_tensor *out);

/* ------------------------------------------------------------------ */
/* 5. Hybrid-EP dispatch_with_permute / combine_with_unpermute (A.7, seed 002) */

typedef struct {
    int world_size;
    int num_experts;
    int num_ranks_per_node;      /* divides R; R itself = one NVLink domain */
    int pad_multiple;            /* >= 1; 1 = no padding */
    int non_blocking;            /* CUDA-graph mode: fixed capacity, drops, overflow flag */
    int64_t num_permuted_tokens; /* non_blocking only: rows per rank, a multiple of pad_multiple */
} moe_hep_config;

/* Exact rows the largest rank needs in blocking mode:
 * max over ranks of sum over local experts of ceil(count/pad)*pad. */
moe_status moe_hep_permute_capacity(const moe_hep_config *cfg, const moe_tensor *topk_ids,
                                    int64_t *rows);

typedef struct {
    moe_tensor *x;                        /* [R, N, H], x's dtype; N = num_permuted_tokens
                                             when non_blocking, else >= the capacity */
    moe_tensor *probs;                    /* NULL or f32 [R, N]: prob of (token, that expert) */
    moe_tensor *x_scales;                 /* f32 [R, N, S] or NULL iff no input scales */
    moe_tensor *tokens_per_expert;        /* int32 [R, E_loc]: rows kept (after drops) */
    moe_tensor *padded_tokens_per_expert; /* int64 [R, E_loc]: ceil(kept/pad)*pad */
    moe_tensor *row_id_map;               /* int32 [R, R*T, E_loc]: row of (global token
                                             s*T + t, local expert) or -1 (not routed, dropped) */
    moe_tensor *overflow_flag;            /* int32 [R]: 1 iff anything was dropped */
    moe_tensor *num_dispatched;           /* NULL or int32 [R]: distinct tokens received */
} moe_hep_permuted;

/* x [R, T, H] any unpacked dtype (bf16, or e4m3 as bytes), x_scales NULL or
 * f32 [R, T, S], topk_ids int32 [R, T, K] with ids in [0, E) and no expert
 * twice in a row (upstream scatters them into a bool map: -1 cannot be
 * scattered, and a duplicate's prob is unspecified), topk_weights f32
 * [R, T, K] (the probs; passed through, never applied). Rows are
 * expert-major; within an expert ascending (global source rank, token);
 * each expert padded to pad_multiple with zero rows, prob 0, scales 0. */
moe_status moe_ref_hep_dispatch_with_permute(const moe_hep_config *cfg, const moe_tensor *x,
                                             const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                             const moe_tensor *topk_weights,
                                             const moe_hep_permuted *out);

/* y [R, N, H] bf16 or f32 (expert outputs in the permuted layout),
 * row_id_map from dispatch, probs NULL or f32 [R, N]; out [R, T, H] of y's
 * dtype; out_probs NULL or f32 [R, T, E] (needs probs): the probs gathered
 * back into a dense [T, E] map, 0 where not routed. Unweighted (A.7):
 * rank j's partial for a token = round(sum of its rows over local experts
 * ascending); the token's home rank adds the partials of its own node's
 * ranks in local-rank order, then each other node's partial (summed on
 * that node in local-rank order and rounded there) in the order
 * node-1, node-2, ... wrapping; one final rounding. */
moe_status moe_ref_hep_combine_with_unpermute(const moe_hep_config *cfg, const moe_tensor *y,
                                              const moe_tensor *row_id_map, const moe_tensor *probs,
                                              moe_tensor *out, moe_tensor *out_probs);

/* Hybrid-EP buffer sizes (seed 002 section 4.2): max_tokens =
 * T_max * ranks_per_node * num_nodes; token = max_tokens*H*dtype_bytes;
 * prob = max_tokens*E_loc*ranks_per_node*4; scale (fp8 only) =
 * max_tokens*(H/128)*4; with num_nodes > 1 rdma_token =
 * T_max*(num_nodes-1)*H*dtype_bytes and rdma_prob =
 * T_max*(num_nodes-1)*E_loc*ranks_per_node*4 (0 otherwise). */
typedef struct {
    uint64_t max_tokens;
    uint64_t token_bytes;
    uint64_t prob_bytes;
    uint64_t scale_bytes;
    uint64_t rdma_token_bytes;
    uint64_t rdma_prob_bytes;
    uint64_t total_bytes; /* sum of the five buffers */
} moe_hep_buffers;

moe_status moe_hep_buffer_sizes(int64_t hidden, int64_t max_tokens_per_rank, int experts_per_rank,
                                int num_ranks_per_node, int num_nodes, int dtype_bytes, int use_fp8,
                                moe_hep_buffers *out);

/* ------------------------------------------------------------------ */
/* Helpers shared by the dispatch reference files (reference/dispatch_common.c).
 * Not stages; public so the files share one copy of each rule. */

/* R in {1, 2, 4, 8}, E > 0, E % R == 0; *experts_per_rank = E/R. */
moe_status moe_ep_check_world(int world_size, int num_experts, int *experts_per_rank);

/* 1 <= ranks_per_node, R % ranks_per_node == 0; *num_nodes = R/ranks_per_node. */
moe_status moe_ep_check_nodes(int world_size, int num_ranks_per_node, int *num_nodes);

/* A host tensor of `dtype` (-1: any unpacked dtype), rank ndim and the
 * given extents (-1: any); the message shows `layout` (e.g. "[R, T, H]"). */
moe_status moe_ep_expect(const moe_tensor *t, const char *arg, int dtype, int ndim,
                         const int64_t *shape, const char *layout);

/* ids int32 [d0, T, K] (T < 0: any), 1 <= K <= E, every id in [0, E) or
 * -1. no_neg1 / distinct: NULL allows -1 / repeated experts in a row, else
 * the rule text the error quotes. *topk gets K. */
moe_status moe_ep_check_ids(const moe_tensor *ids, const char *arg, int64_t d0, int64_t T,
                            int num_experts, const char *no_neg1, const char *distinct, int *topk);

/* Hybrid-EP's per-rank layout from the per-expert counts (global expert
 * e = j * E_loc + l): offset[e] = the sum over rank j's earlier local
 * experts of their counts padded to `pad` (hybrid_ep_backend.cuh), end[j]
 * (may be NULL) = rank j's padded total. And the outputs that follow from
 * them and the row limit (N rows when non-blocking, else unlimited):
 * tokens_per_expert, padded_tokens_per_expert, overflow_flag. Shared by
 * the reference and the CPU backend. */
void moe_hep_offsets(const int64_t *count, int R, int E_loc, int pad, int64_t *offset, int64_t *end);
void moe_hep_fill_counts(const int64_t *count, const int64_t *offset, int R, int E_loc, int pad, int64_t limit,
                         const moe_hep_permuted *out);

/* 1 when token row ids[0..K) has an expert owned by `rank`. */
int moe_ep_token_in_rank(const int32_t *ids, int K, int experts_per_rank, int rank);

/* The batched per-expert placement DeepEP-LL and pplx share: for G token
 * groups of T tokens (group g's token t sent by rank g*dp + t % dp), walk
 * the sending ranks ascending and their tokens ascending, and give each
 * pair (g, t, k) with an id >= 0 the next row of its expert: pos[(g*T+t)*K
 * + k] = row, or -1 for a -1 id; count[e] = rows of global expert e. */
void moe_ep_batched_positions(const int32_t *ids, int64_t G, int64_t T, int K, int dp,
                              int num_experts, int32_t *pos, int64_t *count);

/* The weighted combine DeepEP-LL and pplx share, on arguments the caller
 * has validated. row_of[e*G*T + g*T + t] is the row of (global expert e,
 * group g, token t) in y [R, E_loc, rows, H] or -1; topk_ids and
 * topk_weights are [G, T, K], out [G, T, H]; out[g, t] = round(fmaf over
 * k of y * w from +0), -1 ids skipped. A pair without a row is an error
 * naming `handle`, found before anything is written. */
moe_status moe_ep_combine_weighted(const moe_tensor *y, const int32_t *row_of,
                                   const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                   moe_tensor *out, const char *handle);

#ifdef __cplusplus
}
#endif

#endif
