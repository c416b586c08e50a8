/* Shared by combos/replay*.c and combos/staged*.c: one staged call of an
 * interposer entry (the entries: replay_entries.inc).
 *
 * An entry wrapper runs
 *   rp_call c; if (!rp_open(&c, RP_X, &st)) return st;
 *   host args: h = rp_in(&c, t, "name") per input, o = rp_out(&c, t, "name") per output
 *   rp_stage(&c);                          inputs to host, outputs snapshotted
 *   st = c.b->X(caller's args);
 *   if (rp_after(&c, st)) rp_compare(&c, moe_ops_ref.X(host args));
 *   rp_free(&c); return st;
 * rp_compare returns 1 when the reference succeeded and the EXACT
 * comparison ran, so a wrapper can add its BOUNDED or SET comparison
 * before rp_free. */
#ifndef MOE_REPLAY_INTERNAL_H
#define MOE_REPLAY_INTERNAL_H

#include "moe/replay.h"

enum {
    RP_ROUTE = 0, RP_ALIGN_BLOCK_SIZE, RP_ALIGN_BATCHED, RP_SORT_CK, RP_MAPS_TRTLLM, RP_QUANTIZE, RP_DEQUANTIZE,
    RP_PERMUTE_ROWS, RP_UNPERMUTE_ROWS, RP_EXPAND_TRTLLM, RP_BATCHED_SCATTER, RP_PERMUTE_GROUPED, RP_GROUPED_GEMM,
    RP_ACTIVATION, RP_WAR_CONTIGUOUS, RP_WAR_NOOP, RP_WAR_NAIVE_BATCHED, RP_FINALIZE_TRTLLM, RP_EP_ALLGATHER_DISPATCH,
    RP_EP_REDUCE_SCATTER_COMBINE, RP_DEEPEP_LAYOUT, RP_DEEPEP_DISPATCH, RP_DEEPEP_COMBINE, RP_DEEPEP_LL_DISPATCH,
    RP_DEEPEP_LL_COMBINE, RP_PPLX_DISPATCH, RP_PPLX_COMBINE, RP_HEP_DISPATCH, RP_HEP_COMBINE, RP_NSTAGES
};

#define RP_MAXT 10

typedef struct {
    moe_replay_stage *s;
    const moe_ops *b;
    int nin, nout;
    int staged;               /* 1: a staged call (staged.h): copies live on the backend */
    const moe_tensor *in_arg[RP_MAXT];  /* the caller's inputs */
    moe_tensor in_copy[RP_MAXT];        /* replay: host copies; staged: copies on the backend */
    const char *in_name[RP_MAXT];
    moe_tensor *out_arg[RP_MAXT];        /* the caller's outputs */
    moe_tensor ref[RP_MAXT];  /* snapshot, then the reference's result (staged: the backend's output) */
    moe_tensor got[RP_MAXT];  /* the backend's result */
    const char *out_name[RP_MAXT];
    int failed;               /* the replay could not stage the call */
    moe_status fail_st;       /* its status (staged calls return it) */
    char why[200];
} rp_call;

extern const char *const rp_stage_names[RP_NSTAGES];

/* 0 (and *st = the error) when this thread has no active replay */
int rp_open(rp_call *c, int stage, moe_status *st);
/* NULL for NULL; else the host tensor rp_stage fills */
const moe_tensor *rp_in(rp_call *c, const moe_tensor *t, const char *name);
moe_tensor *rp_out(rp_call *c, moe_tensor *t, const char *name);
void rp_stage(rp_call *c);
/* counts the call's backend / staging errors; 1 = run the reference */
int rp_after(rp_call *c, moe_status st);
int rp_compare(rp_call *c, moe_status ref_status);
void rp_free(rp_call *c);
/* records a replay-side failure of a compared call (ref_errors) */
void rp_note_error(moe_replay_stage *s, const char *who, moe_status st, const char *msg);

/* index of the output registered as `name`, -1 if absent (NULL output) */
int rp_out_index(const rp_call *c, const char *name);

/* the interposer tables of backend (replay_entries.c, staged_entries.c) */
void rp_build_table(const moe_ops *backend, moe_ops *table);
void st_build_table(const moe_ops *backend, moe_ops *table);

/* staged calls (staged.c): 0 (and *st) when this thread has no active
 * staged backend; the result of a call whose copies failed; after the
 * backend's call, its outputs copied back into the caller's tensors */
int st_open(rp_call *c, int stage, moe_status *st);
moe_status st_staging_error(const rp_call *c);
moe_status st_finish(rp_call *c, moe_status backend_status);

/* the extra comparisons (combos/replay_set.c) */
void rp_set_deepep_ll(rp_call *c, const moe_deepep_ll_config *cfg);
void rp_set_pplx(rp_call *c);
void rp_set_align(rp_call *c, const moe_align_params *p);
void rp_bounded_gemm(rp_call *c, const moe_gemm_args *host_args);

#endif
