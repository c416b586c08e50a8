#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "moe/status.h"

static const char *const names[MOE_STATUS_COUNT] = {
    [MOE_OK] = "ok",
    [MOE_ERR_NULL] = "null-argument",
    [MOE_ERR_INVALID_ARG] = "invalid-argument",
    [MOE_ERR_SHAPE] = "bad-shape",
    [MOE_ERR_DTYPE] = "bad-dtype",
    [MOE_ERR_UNSUPPORTED] = "unsupported",
    [MOE_ERR_NOMEM] = "out-of-memory",
    [MOE_ERR_IO] = "io-error",
    [MOE_ERR_FORMAT] = "malformed-file",
    [MOE_ERR_DEVICE] = "device-error",
    [MOE_ERR_INCOMPATIBLE] = "incompatible",
    [MOE_ERR_INTERNAL] = "internal-error",
};

static _Thread_local char last_error[512];

const char *moe_status_str(moe_status s)
{
    if ((unsigned)s >= MOE_STATUS_COUNT) return "unknown-status";
    return names[s];
}

const char *moe_last_error(void) { return last_error; }

void moe_clear_error(void) { last_error[0] = '\0'; }

moe_status moe_fail(moe_status s, const char *fmt, ...)
{
    /* format into a scratch buffer first: callers may pass moe_last_error()
     * itself as an argument when they prefix context to a message */
    char tmp[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    memcpy(last_error, tmp, sizeof tmp);
    return s;
}
