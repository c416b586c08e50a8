/* Status codes. Every public function returns one and never aborts on bad
 * input (DESIGN section 11). The failing function also leaves a message in
 * a thread-local buffer that names the argument and the rule it broke. */
#ifndef MOE_STATUS_H
#define MOE_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MOE_OK = 0,
    MOE_ERR_NULL,         /* a required pointer argument is NULL */
    MOE_ERR_INVALID_ARG,  /* an argument breaks a documented rule */
    MOE_ERR_SHAPE,        /* tensor shapes disagree with each other or the rule */
    MOE_ERR_DTYPE,        /* a tensor's dtype is not one the function accepts */
    MOE_ERR_UNSUPPORTED,  /* a valid combination this build does not implement */
    MOE_ERR_NOMEM,        /* allocation failed or the size overflows */
    MOE_ERR_IO,           /* a file could not be opened, read or written */
    MOE_ERR_FORMAT,       /* a file's content is malformed or truncated */
    MOE_ERR_DEVICE,       /* a device (CUDA) call failed or no device exists */
    MOE_ERR_INCOMPATIBLE, /* a combination the compatibility rules refuse */
    MOE_ERR_INTERNAL,     /* an invariant of moe-conform itself broke */
    MOE_STATUS_COUNT
} moe_status;

/* Short stable name of a status ("ok", "null-argument", ...). */
const char *moe_status_str(moe_status s);

/* The message left by the last failing call on this thread ("" if none). */
const char *moe_last_error(void);

/* Records a printf-style message for moe_last_error() and returns s, so a
 * check reads `return moe_fail(MOE_ERR_SHAPE, "x: ...")`. */
moe_status moe_fail(moe_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Clears the thread's last-error message. */
void moe_clear_error(void);

#ifdef __cplusplus
}
#endif

#endif
