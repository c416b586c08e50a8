/* Helpers shared by the libFuzzer targets (tests/fuzz/fuzz_*.c). The same
 * sources build two ways: with clang -fsanitize=fuzzer for `make fuzz`, and
 * with the normal toolchain plus tests/fuzz/replay_main.c for `make check`,
 * so nothing here may depend on libFuzzer. */
#ifndef MOE_FUZZ_UTIL_H
#define MOE_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A finding: print why and abort, so libFuzzer saves the input as a crash
 * and the replay driver exits non-zero. */
#define FUZZ_REQUIRE(cond, ...)                                              \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "fuzz finding at %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                    \
            fprintf(stderr, "\n");                                           \
            abort();                                                         \
        }                                                                    \
    } while (0)

static char fuzz_scratch[512];

/* Removes path and what it holds (no symlinks are followed: lstat). */
static void fuzz_rm_tree(const char *path, int depth)
{
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode) && depth < 16) {
        DIR *d = opendir(path);
        for (struct dirent *e; d && (e = readdir(d));) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            fuzz_rm_tree(p, depth + 1);
        }
        if (d) closedir(d);
    }
    remove(path);
}

static void fuzz_scratch_remove(void) { fuzz_rm_tree(fuzz_scratch, 0); }

/* A private scratch directory for targets that must touch files, made once
 * per process under $TMPDIR (else /tmp), never inside the repository, and
 * removed at exit (a crash leaves it for the post-mortem). */
static inline const char *fuzz_scratch_dir(void)
{
    char *dir = fuzz_scratch;
    if (!dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(dir, sizeof fuzz_scratch, "%s/moe-fuzz-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(dir)) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(fuzz_scratch_remove);
    }
    return dir;
}

/* Sections of an input written as `==> NAME <==\n` headers, each followed
 * by its bytes up to the next header (the format `head` prints for several
 * files, which keeps seeds readable). Bytes before the first header are
 * ignored. Returns the number of sections found (at most max). */
typedef struct {
    char name[96];
    const uint8_t *data;
    size_t size;
} fuzz_section;

static inline const uint8_t *fuzz_find(const uint8_t *p, const uint8_t *end, const char *s)
{
    size_t n = strlen(s);
    for (; p && (size_t)(end - p) >= n; p++)
        if (!memcmp(p, s, n)) return p;
    return NULL;
}

static inline int fuzz_sections(const uint8_t *data, size_t size, fuzz_section *sec, int max)
{
    const uint8_t *end = data + size, *p = data;
    int n = 0;
    /* a header starts the input or follows a newline */
    if (size < 4 || memcmp(data, "==> ", 4)) {
        p = fuzz_find(data, end, "\n==> ");
        if (p) p++;
    }
    while (p && n < max) {
        const uint8_t *name = p + 4, *close = fuzz_find(name, end, " <==\n");
        if (!close) break;
        size_t ln = (size_t)(close - name);
        if (ln >= sizeof sec[n].name) ln = sizeof sec[n].name - 1;
        memcpy(sec[n].name, name, ln);
        sec[n].name[ln] = '\0';
        sec[n].data = close + 5;
        const uint8_t *next = fuzz_find(sec[n].data, end, "\n==> ");
        sec[n].size = (size_t)((next ? next : end) - sec[n].data);
        n++;
        p = next ? next + 1 : NULL;
    }
    return n;
}

static inline int fuzz_write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(data, 1, size, f) == size;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

#endif
