/* The backends a harness can run: "ref" (the oracle), "cpu" (optimized/cpu,
 * OpenBLAS + OpenMP), "cuda-conform" and "cuda-fast" (optimized/cuda). A
 * backend is available when its ops table is linked into the program and
 * its device is present; otherwise the lookup says why, so the sweep and
 * the golden verify report it as skipped, never as passed. */
#ifndef MOE_BACKENDS_H
#define MOE_BACKENDS_H

#include "moe/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Known backend names in order: ref, cpu, cuda-conform, cuda-fast. */
int moe_backend_count(void);
const char *moe_backend_name(int i);

/* *ops = the backend's table when available (MOE_OK). Unknown name:
 * MOE_ERR_INVALID_ARG naming it and the known ones. Known but not
 * available: MOE_ERR_UNSUPPORTED, *ops = NULL and *why_not (may be NULL)
 * = "not built" or "no CUDA device". */
moe_status moe_backend_lookup(const char *name, const moe_ops **ops, const char **why_not);

#ifdef __cplusplus
}
#endif

#endif
