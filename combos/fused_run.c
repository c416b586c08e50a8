/* The fused experts paths (include/moe/fused_run.h). A path's runner is a
 * weak reference into its backend's library, as the ops tables are
 * (combos/backends.c): a program links it by linking the library. */
#include "moe/fused_run.h"
#include <string.h>
#include "moe/backends.h"

moe_status moe_cuda_fx_run_traced(const moe_fused_problem *p, const moe_fused_inputs *in, moe_fused_trace_store *t,
                                  moe_fused_model *m, char *desc, size_t n) __attribute__((weak));

/* the backend must be available (linked, its device present) */
static moe_status run_cuda_fast(const moe_fused_problem *p, const moe_fused_inputs *in, moe_fused_trace_store *t,
                                moe_fused_model *m, char *desc, size_t n)
{
    const moe_ops *ops;
    const char *why = NULL;
    moe_status s = moe_backend_lookup("cuda-fast", &ops, &why);
    if (s) return s;
    if (!moe_cuda_fx_run_traced)
        return moe_fail(MOE_ERR_UNSUPPORTED, "fused path of cuda-fast: not built into this program");
    return moe_cuda_fx_run_traced(p, in, t, m, desc, n);
}

static const moe_fused_path PATHS[] = {
    /* align -> gathered GEMM1 + gated act -> GEMM2 + router weight ->
     * slot-order sum or atomics: vLLM's fused_moe (TritonExperts) shape */
    {"cuda-fast", "noep", "triton_like", run_cuda_fast,
     "optimized/cuda/fast.h; vllm_modular.md 1.4, 2.8 (TritonExperts)"},
};
enum { NPATHS = sizeof PATHS / sizeof PATHS[0] };

int moe_fused_path_count(void) { return NPATHS; }

const moe_fused_path *moe_fused_path_get(int i) { return i >= 0 && i < NPATHS ? &PATHS[i] : NULL; }

const moe_fused_path *moe_fused_path_find(const char *backend, const char *pf, const char *experts)
{
    for (int i = 0; backend && pf && experts && i < NPATHS; i++)
        if (!strcmp(PATHS[i].backend, backend) && !strcmp(PATHS[i].pf, pf) && !strcmp(PATHS[i].experts, experts))
            return &PATHS[i];
    return NULL;
}

int moe_fused_pair_has_path(const char *pf, const char *experts)
{
    for (int i = 0; pf && experts && i < NPATHS; i++)
        if (!strcmp(PATHS[i].pf, pf) && !strcmp(PATHS[i].experts, experts)) return 1;
    return 0;
}
