/* The modular kernel (DESIGN section 6, anchors vllm_modular.md 2): a
 * prepare/finalize (PF) type and an experts type, each a struct of function
 * pointers plus its capability row in the registry (include/moe/compat.h),
 * composed into one MoE layer. Every type is a composition of the stages
 * of an ops table (include/moe/ops.h), never new arithmetic, so a pair runs
 * on any backend that fills the table.
 *
 * forward: prepare -> allocate the workspaces the experts ask for ->
 * apply (in chunks of chunk_size tokens when both sides chunk) -> finalize
 * with the experts' weight-and-reduce (Delegate: the PF picks, noep ->
 * Contiguous, batched -> NaiveBatched, as vLLM does, anchors 2.6-2.7).
 *
 * Implemented types:
 *   PF       noep [NoDPEP], batched [BatchedPrepareAndFinalize] (one rank);
 *            allgather_rs [NaiveDPEP], deepep_ht [DeepEP normal],
 *            deepep_ll [DeepEP low latency], pplx [pplx-kernels],
 *            hybrid_ep [DeepEP Hybrid-EP dispatch_with_permute] (expert
 *            parallel, simulated ranks: moe_mk_forward_ranks; the last
 *            four also through moe_mk_forward_ranks_async)
 *   experts  ref [torch_experts], triton_like [TritonExperts],
 *            naive_batched [NaiveBatchedExperts], and the types of
 *            combos/experts_*.c
 * Every registry type is implemented; the compatibility check runs first,
 * so an incompatible pair is always refused with its rule ids, and the
 * slice limits below are MOE_ERR_UNSUPPORTED after it.
 *
 * Semantics and rounding points of each type are in its source file
 * (combos/pf_*.c, combos/experts_*.c). Limits of this slice: the ops table
 * must be a host backend (index bookkeeping reads topk_ids and counts on
 * the host), activation scales must be in a linear layout (NVFP4's
 * 128x4-swizzled scales are MOE_ERR_UNSUPPORTED), dynamic activation scales
 * only (no static a1/a2 scales). -1 top-k ids (slots of experts on other
 * ranks, handed by the expert-parallel PFs) contribute exactly zero in
 * triton_like (expert map, ignore-invalid align), permute_grouped (TRT-LLM
 * maps: non-local rows, finalize skips them), ck_fused (local expert mask)
 * and grouped_contig (-1 rows take no slot); other Standard types that
 * cannot take them are MOE_ERR_UNSUPPORTED naming the -1 ids. */
#ifndef MOE_MODULAR_H
#define MOE_MODULAR_H

#include <stdint.h>
#include "moe/act.h"
#include "moe/compat.h"
#include "moe/ops.h"
#include "moe/quant.h"
#include "moe/reduce.h"
#include "moe/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    moe_scheme scheme;
    moe_act_params act;
    int num_experts, topk, hidden, inter; /* global E, k, H, I (w1 is [E, 2I or I, H]) */
    int world_size;                       /* R: 1, or 2/4/8 with an expert-parallel PF */
    int max_tokens;                       /* batched buffers [E, max_tokens, H]; 0 = the token count */
    int chunk_size;                       /* tokens per apply; 0 = none */
    int weights_on_input;                 /* router weight applied by prepare (topk 1) */
    int invalid_ids;                      /* topk_ids may hold -1 (compat query only: forward
                                             still takes ids in [0, E)) */
    const moe_ops *ops;                   /* NULL = &moe_ops_ref */
} moe_mk_config;

/* The expert weights, exactly as moe_forward_args takes them. */
typedef struct {
    const moe_tensor *w1, *w1_scale, *w1_global;
    const moe_tensor *w2, *w2_scale, *w2_global;
    const moe_tensor *b1, *b2;
} moe_mk_weights;

typedef struct moe_mk moe_mk;

/* Builds the pair (pf_name, experts_name) for cfg. Unknown name:
 * MOE_ERR_INVALID_ARG naming it. Otherwise the pair is checked with
 * moe_compat_check on the query built from cfg (scheme, topk, E, world,
 * hidden, chunk_size, weight on input, invalid ids); *why (may be NULL)
 * receives the verdict. An incompatible pair: MOE_ERR_INCOMPATIBLE, the
 * message lists the fired rule ids in rule-table order, *out stays NULL. A
 * compatible pair of a type this slice does not implement, a non-host ops
 * table, a swizzled activation scale layout, or world size > 1 with a
 * per-tensor dynamic activation spec (allgather_rs: NaiveDPEP does not
 * gather scalar scales; deepep_ht: the ref experts' per-expert requant
 * cannot take -1 ids): MOE_ERR_UNSUPPORTED naming it. */
moe_status moe_mk_create(const char *pf_name, const char *experts_name, const moe_mk_config *cfg, moe_mk **out,
                         moe_compat_verdict *why);
void moe_mk_destroy(moe_mk *mk);

/* x [M, H] in a storage dtype (f32, bf16, f16; the scheme's activation
 * dtype for unquantized and weight-only schemes), topk_ids int32 [M, k]
 * with ids in [0, E), topk_weights f32 [M, k], out [M, H] of x's dtype.
 * M = 0 is an empty problem. */
moe_status moe_mk_forward(moe_mk *mk, const moe_mk_weights *w, const moe_tensor *x, const moe_tensor *topk_ids,
                          const moe_tensor *topk_weights, moe_tensor *out);

/* Expert parallelism with simulated ranks (all ranks in one call, the
 * rank-major convention of include/moe/dispatch.h): x [R, T, H], topk_ids
 * int32 [R, T, k] with global ids in [0, E), topk_weights f32 [R, T, k],
 * out [R, T, H] of x's dtype; R = cfg.world_size. The expert weights are
 * the global ones, shared; rank r's experts type runs on experts
 * [r*E/R, (r+1)*E/R) (views of the weights' leading dimension) with the
 * local ids the PF hands it (-1: not this rank's expert, a zero row).
 * Implemented for the expert-parallel PFs allgather_rs, deepep_ht (Standard
 * format), deepep_ll, pplx (Batched format, with the batched experts) and
 * hybrid_ep (Grouped format, with grouped_contig) (their sources say what
 * each rank computes). With a single-rank PF and
 * R = 1 it is moe_mk_forward on the [T, H] views. moe_mk_forward on an
 * expert-parallel PF built for R = 1 runs this with one rank; for R > 1
 * moe_mk_forward is MOE_ERR_INVALID_ARG (use this entry). */
moe_status moe_mk_forward_ranks(moe_mk *mk, const moe_mk_weights *w, const moe_tensor *x, const moe_tensor *topk_ids,
                                const moe_tensor *topk_weights, moe_tensor *out);

/* prepare_async (vLLM PrepareAndFinalize.prepare_async, anchors
 * vllm_modular.md 2.2, 2.4 step 4) for the PFs the registry marks async
 * (deepep_ht, deepep_ll, pplx, hybrid_ep): the PF issues its dispatch, then
 * between(user) runs once -- the caller's work to overlap with the
 * transfer, e.g. the shared experts (vLLM's hook) -- and only then are the
 * rows received and the experts, finalize and combine run (the receiver).
 * between may be NULL. Its non-MOE_OK status aborts the forward and is
 * returned (out unspecified). With simulated ranks the dispatch has
 * completed when between runs, so the result equals moe_mk_forward_ranks
 * bit for bit; between must not touch x, topk_ids, topk_weights or out.
 * A PF without prepare_async: MOE_ERR_UNSUPPORTED naming it (vLLM asserts
 * supports_async()). T = 0 still calls between once. */
typedef moe_status (*moe_mk_between_fn)(void *user);
moe_status moe_mk_forward_ranks_async(moe_mk *mk, const moe_mk_weights *w, const moe_tensor *x,
                                      const moe_tensor *topk_ids, const moe_tensor *topk_weights, moe_tensor *out,
                                      moe_mk_between_fn between, void *user);

/* Names of the pair (the registry rows). */
const char *moe_mk_pf_name(const moe_mk *mk);
const char *moe_mk_experts_name(const moe_mk *mk);

/* ---- for type implementations (combos/pf_*.c, combos/experts_*.c) ----- */

/* What prepare hands the experts. */
typedef struct {
    moe_act_format format;
    moe_dtype x_dtype;            /* the storage dtype of x and of every intermediate row */
    /* STANDARD: a1q [M, H] in the activation spec's elements, its scales as
     * ops->quantize gives them (empty tensors when the spec has none).
     * BATCHED: a1q [L, max_tokens, H]; scale[l] / global[l] hold the scales
     * of expert l's count[l] rows (quantized per expert sub-batch). */
    moe_tensor a1q, a1q_scale, a1q_global;
    moe_tensor *ex_scale, *ex_global; /* BATCHED: L entries each, or NULL */
    moe_tensor counts;            /* BATCHED: int32 [L] expert_num_tokens;
                                     GROUPED: int32 [L] real rows per expert */
    int num_local_experts, max_tokens;
    /* GROUPED (hybrid_ep): a1q [N, H] expert-major rows, local expert l's
     * counts[l] rows from offset sum over j < l of
     * ceil(counts[j] / pad_multiple) * pad_multiple, each expert followed
     * by zero pad rows up to its padded count, N = the padded total;
     * a1q_scale [N, S] with them (pads 0.0f); probs f32 [N]: the router
     * prob of each row's (token, expert), 0.0f for pads. The experts apply
     * the probs themselves (the combine sums unweighted). */
    moe_tensor probs;
    int pad_multiple;
} moe_mk_prep;

/* One workspace's element type and shape. ndim 0 = not needed. */
typedef struct {
    moe_dtype dtype;
    int ndim;
    int64_t shape[MOE_MAX_DIMS];
} moe_mk_shape;

typedef struct {
    const moe_mk_weights *w;
    const moe_mk_prep *prep;       /* the chunk's rows (views) */
    const moe_tensor *topk_ids, *topk_weights; /* the chunk's rows */
    moe_tensor *ws13, *ws2;        /* sized by workspace_shapes for the largest chunk */
    moe_tensor *fused_out;         /* the chunk's rows of the fused output */
} moe_mk_apply_args;

/* One simulated rank of an expert-parallel forward. The PF's ep_prepare
 * fills prep, topk_ids, topk_weights (n received rows, local expert ids or
 * -1) and partial (a view into its combine buffer: [n, H] of x's dtype);
 * the driver runs the experts on the rank's local weights and writes the
 * rank's finalize (the experts' weight-and-reduce; Delegate -> Contiguous)
 * into partial; ep_combine then makes out [R, T, H].
 * Batched-format PFs (deepep_ll, pplx) leave topk_ids / topk_weights empty
 * and make partial the rank's [L, max_tokens, H] slice of the combine
 * input: their combine weighs and reduces (Delegate resolves to it, as
 * vLLM's DeepEP-LL asserts), so the driver copies the experts' fused
 * output there unweighted and refuses an experts type whose
 * weight-and-reduce is not Delegate. The Grouped-format PF (hybrid_ep)
 * also leaves them empty and makes partial its rank's [N, H] rows of the
 * combine input: the experts weigh each row by its prob, the combine sums
 * unweighted, so the driver copies the experts' [N, H] output there
 * whatever their weight-and-reduce kind (it has no (token, slot) rows to
 * apply). A rank whose counts are all 0 skips the experts (partial stays
 * zero). */
typedef struct {
    moe_mk_prep prep;
    moe_tensor topk_ids, topk_weights;
    moe_tensor partial;
} moe_mk_rank;

typedef struct {
    const char *name; /* its registry row (moe_pf_find) */
    /* single rank (NULL for expert-parallel PFs, which run R = 1 through
     * the ep_ entries) */
    moe_status (*prepare)(const moe_mk *mk, const moe_tensor *x, const moe_tensor *topk_ids,
                          const moe_tensor *topk_weights, moe_mk_prep *out);
    /* war is the experts' finalize_weight_and_reduce_impl (Delegate: the PF
     * picks its own) */
    moe_status (*finalize)(const moe_mk *mk, const moe_tensor *fused, const moe_tensor *topk_ids,
                           const moe_tensor *topk_weights, moe_war_kind war, moe_tensor *out);
    /* expert parallel (NULL for single-rank PFs): x, topk_ids, topk_weights
     * rank-major [R, T, ..]; ranks[R] zeroed by the caller; *state is the
     * PF's, released by ep_release (also after a failure) */
    moe_status (*ep_prepare)(const moe_mk *mk, const moe_tensor *x, const moe_tensor *topk_ids,
                             const moe_tensor *topk_weights, moe_mk_rank *ranks, void **state);
    moe_status (*ep_combine)(const moe_mk *mk, void *state, moe_tensor *out);
    void (*ep_release)(const moe_mk *mk, void *state);
} moe_mk_pf_type;

typedef struct {
    const char *name; /* its registry row (moe_experts_find) */
    /* shapes for a chunk of m tokens (ws13, ws2) and for all M tokens
     * (fused_out), given what prepare produced */
    moe_status (*workspace_shapes)(const moe_mk *mk, int64_t m, int64_t M, const moe_mk_prep *prep,
                                   moe_mk_shape *ws13, moe_mk_shape *ws2, moe_mk_shape *fused_out);
    moe_status (*apply)(const moe_mk *mk, const moe_mk_apply_args *a);
    moe_war_kind (*finalize_weight_and_reduce_impl)(const moe_mk *mk);
} moe_mk_experts_type;

struct moe_mk {
    moe_mk_config cfg;
    const moe_ops *ops;
    const moe_pf_info *pf_info;
    const moe_experts_info *ex_info;
    const moe_mk_pf_type *pf;
    const moe_mk_experts_type *ex;
    moe_quant_spec act_spec;      /* the scheme's activation spec */
    int n1;                       /* w1 rows per expert: 2I gated, I otherwise */
};

extern const moe_mk_pf_type moe_mk_pf_noep, moe_mk_pf_batched, moe_mk_pf_allgather_rs, moe_mk_pf_deepep_ht,
    moe_mk_pf_deepep_ll, moe_mk_pf_pplx, moe_mk_pf_hybrid_ep;
extern const moe_mk_experts_type moe_mk_experts_ref, moe_mk_experts_triton_like, moe_mk_experts_naive_batched,
    moe_mk_experts_permute_grouped, moe_mk_experts_batched_masked, moe_mk_experts_grouped_contig, moe_mk_experts_ck_fused;

/* Helpers the types share (combos/modular.c). All memory goes through
 * mk->ops; views never own memory and are never freed. */
moe_status moe_mk_alloc(const moe_mk *mk, moe_tensor *t, moe_dtype d, int ndim, const int64_t *shape);
moe_status moe_mk_alloc2(const moe_mk *mk, moe_tensor *t, moe_dtype d, int64_t r, int64_t c);
void moe_mk_free(const moe_mk *mk, moe_tensor *t); /* owned tensors only; views are just cleared */
/* A view of `buf`'s bytes from byte `off` as (d, ndim, shape). */
moe_status moe_mk_view(const moe_tensor *buf, size_t off, moe_dtype d, int ndim, const int64_t *shape,
                       moe_tensor *view);
/* A view of rows [r0, r0 + n) along dim 0. */
moe_status moe_mk_rows(const moe_tensor *t, int64_t r0, int64_t n, moe_tensor *view);
/* An int32 [n] tensor holding v (host bookkeeping put in backend memory). */
moe_status moe_mk_index(const moe_mk *mk, moe_tensor *t, const int32_t *v, int64_t n);
/* The same, int32 [r, c]. */
moe_status moe_mk_index2(const moe_mk *mk, moe_tensor *t, const int32_t *v, int64_t r, int64_t c);
/* f32 copy of storage rows (ops->dequantize with the storage dtype's cast
 * spec: exact widening). */
moe_status moe_mk_widen(const moe_mk *mk, const moe_tensor *rows, moe_tensor *f32_out);
/* Quantizes storage rows [n, K] with the activation spec (dynamic scales)
 * into q (allocated here when q->data is NULL, else a view to fill),
 * scale and global (allocated here when the spec has them, else left
 * empty). Specs without a scale keep the rows as they are: q becomes a
 * view of `rows` when q->data is NULL, else a copy. */
moe_status moe_mk_quantize(const moe_mk *mk, const moe_tensor *rows, moe_tensor *q, moe_tensor *scale,
                           moe_tensor *global);
/* An ops entry the backend lacks: MOE_ERR_UNSUPPORTED naming it. */
moe_status moe_mk_missing(const moe_mk *mk, const char *entry);
/* x * w per row, rounded to x's dtype, into a new tensor (topk 1; noep and
 * batched prepare). */
moe_status moe_mk_weigh_input(const moe_mk *mk, const moe_tensor *x, const moe_tensor *topk_weights,
                              moe_tensor *xw);
/* A Standard-format finalize with weight-and-reduce kind war. */
moe_status moe_mk_finalize_standard(const moe_mk *mk, const moe_tensor *fused, const moe_tensor *topk_weights,
                                    moe_war_kind war, moe_tensor *out);
/* rows [0, n) of slice j of a [R, N, C] tensor, as [n, C] (EP PFs) */
moe_status moe_mk_rank_rows(const moe_tensor *t, int j, int64_t n, moe_tensor *v);
/* Per-rank views of a Batched-format receive buffer ([R, E_loc, rows, H]
 * rows, [R, E_loc] counts, optional [R, E_loc, rows, S] f32 scales) and
 * of the combine buffer y: fills each rank's prep (rows, counts, each
 * non-empty expert's [n, S] scales) and partial. `who` names the PF. */
moe_status moe_mk_batched_rank_views(moe_mk_rank *ranks, int R, int64_t El, int64_t rows, int64_t H,
                                     moe_dtype x_dtype, const moe_tensor *rx, const moe_tensor *cnt,
                                     const moe_tensor *rs, int64_t S, const moe_tensor *y, const char *who);

/* f32 [d0, d1, d2] of ones (router weights with weights on the input) */
moe_status moe_mk_ones(const moe_mk *mk, moe_tensor *t, int64_t d0, int64_t d1, int64_t d2);
/* Scales of rows gathered by src: a per-tensor scale is shared (a view),
 * row and group scales are gathered with their rows. */
moe_status moe_mk_gather_scale(const moe_mk *mk, const moe_tensor *scale, const moe_tensor *src, moe_tensor *out);
#define MOE_MK_NEED(mk, entry) \
    do { \
        if (!(mk)->ops->entry) return moe_mk_missing((mk), #entry); \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif
