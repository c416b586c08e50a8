/* The suites that drive scripts and tools through the shell (check_report,
 * check_crosscheck, check_gpu_script): a formatted command line run by
 * system(), and a file read whole, so each does not carry its own copy. */
#ifndef MOE_TEST_SHELL_H
#define MOE_TEST_SHELL_H

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

/* system() on a formatted command line; the exit status, or -1 on a signal */
static inline int shf(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    ck_assert_msg(n > 0 && (size_t)n < sizeof cmd, "command line too long");
    const int st = system(cmd);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* the whole file, NUL-terminated (malloc'd; NULL when it cannot be read), its length in *len */
static inline char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap + 1);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *bigger = realloc(buf, 2 * cap + 1);
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

/* the file into dst (at most cap - 1 bytes), "" when it cannot be read */
static inline void slurp_into(const char *path, char *dst, size_t cap)
{
    char *s = slurp(path, NULL);
    snprintf(dst, cap, "%s", s ? s : "");
    free(s);
}

#endif
