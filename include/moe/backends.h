/* The backends a harness can run: "ref" (the oracle), "cpu" (optimized/cpu,
 * OpenBLAS + OpenMP), "cuda-conform", "cuda-atomic" (the conformance build
 * with upstream's atomic placement in three stages) and "cuda-fast"
 * (optimized/cuda). A
 * backend is available when its ops table is linked into the program and
 * its device is present; otherwise the lookup says why, so the sweep and
 * the golden verify report it as skipped, never as passed. */
#ifndef MOE_BACKENDS_H
#define MOE_BACKENDS_H

#include "moe/ops.h"
#include "moe/staged.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Known backend names in order: ref, cpu, cuda-conform, cuda-atomic, cuda-fast. */
int moe_backend_count(void);
const char *moe_backend_name(int i);

/* *ops = the backend's table when available (MOE_OK). Unknown name:
 * MOE_ERR_INVALID_ARG naming it and the known ones. Known but not
 * available: MOE_ERR_UNSUPPORTED, *ops = NULL and *why_not (may be NULL)
 * = "not built" or "no CUDA device". */
moe_status moe_backend_lookup(const char *name, const moe_ops **ops, const char **why_not);

/* The CUDA runtime and driver versions and the GPU's name (each string n
 * bytes) when a CUDA library is linked and a device exists: 1; else 0. */
int moe_backend_cuda_info(char *runtime, char *driver, char *gpu, size_t n);

/* A table the modular kernel can run (host tensors): ops itself when it
 * is a host backend (s->backend = NULL), else this thread's staged view of
 * it (include/moe/staged.h). End with moe_backend_host_end(s), also after
 * an error (then *host_ops = NULL). */
moe_status moe_backend_host_begin(const moe_ops *ops, moe_staged *s, const moe_ops **host_ops);
void moe_backend_host_end(moe_staged *s);

#ifdef __cplusplus
}
#endif

#endif
