/* Backend lookup (include/moe/backends.h). The optimized tables are weak
 * references: a program links them by linking their library, and nothing
 * here changes when a backend lands. A CUDA backend also needs a device;
 * its library provides moe_cuda_backend_devices (weak here as well). */
#include "moe/backends.h"
#include <string.h>

extern const moe_ops moe_ops_cpu __attribute__((weak));
extern const moe_ops moe_ops_cuda_conform __attribute__((weak));
extern const moe_ops moe_ops_cuda_atomic __attribute__((weak));
extern const moe_ops moe_ops_cuda_fast __attribute__((weak));
int moe_cuda_backend_devices(void) __attribute__((weak));
int moe_cuda_describe(char *runtime, char *driver, char *gpu, size_t n) __attribute__((weak));

static const char *const NAMES[] = {"ref", "cpu", "cuda-conform", "cuda-atomic", "cuda-fast"};
enum { NB = sizeof NAMES / sizeof NAMES[0] };

int moe_backend_count(void) { return NB; }
const char *moe_backend_name(int i) { return i >= 0 && i < NB ? NAMES[i] : NULL; }

moe_status moe_backend_lookup(const char *name, const moe_ops **ops, const char **why_not)
{
    const char *dummy;
    if (!why_not) why_not = &dummy;
    *why_not = NULL;
    if (!name || !ops) return moe_fail(MOE_ERR_NULL, "backend lookup: name and ops must not be NULL");
    *ops = NULL;
    const moe_ops *t = NULL;
    int cuda = 0;
    if (!strcmp(name, "ref")) t = &moe_ops_ref;
    else if (!strcmp(name, "cpu")) t = &moe_ops_cpu;
    else if (!strcmp(name, "cuda-conform")) t = &moe_ops_cuda_conform, cuda = 1;
    else if (!strcmp(name, "cuda-atomic")) t = &moe_ops_cuda_atomic, cuda = 1;
    else if (!strcmp(name, "cuda-fast")) t = &moe_ops_cuda_fast, cuda = 1;
    else return moe_fail(MOE_ERR_INVALID_ARG, "backend '%s': unknown (known: ref, cpu, cuda-conform, cuda-atomic, cuda-fast)", name);
    if (!t) {
        *why_not = "not built";
        return moe_fail(MOE_ERR_UNSUPPORTED, "backend '%s': not built into this program", name);
    }
    if (cuda && (!moe_cuda_backend_devices || moe_cuda_backend_devices() < 1)) {
        *why_not = "no CUDA device";
        return moe_fail(MOE_ERR_UNSUPPORTED, "backend '%s': no CUDA device", name);
    }
    *ops = t;
    return MOE_OK;
}

int moe_backend_cuda_info(char *runtime, char *driver, char *gpu, size_t n)
{
    return moe_cuda_describe && runtime && driver && gpu && n ? moe_cuda_describe(runtime, driver, gpu, n) : 0;
}

moe_status moe_backend_host_begin(const moe_ops *ops, moe_staged *s, const moe_ops **host_ops)
{
    if (!s || !host_ops) return moe_fail(MOE_ERR_NULL, "backend host view: s and host_ops must not be NULL");
    s->backend = NULL, *host_ops = NULL;
    moe_status st = moe_ops_check(ops);
    if (st) return st;
    if (ops->device == MOE_DEVICE_HOST) return *host_ops = ops, MOE_OK;
    if ((st = moe_staged_begin(ops, s))) return st;
    *host_ops = &s->ops;
    return MOE_OK;
}

void moe_backend_host_end(moe_staged *s)
{
    if (s && s->backend) moe_staged_end(s);
}
