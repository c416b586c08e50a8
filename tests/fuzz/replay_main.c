/* Standalone replay driver for the fuzz targets (LLVM's
 * StandaloneFuzzTargetMain.c pattern): feeds every file of each directory
 * (or each file) named on the command line to LLVMFuzzerTestOneInput, so
 * the corpora run as regression tests without libFuzzer. Exit status 0
 * when every input ran, 1 when an argument could not be read or held no
 * input; a finding aborts the process.
 *
 *     replay_<target> [-q] DIR|FILE ...   */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path, int quiet)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            uint8_t *b2 = realloc(buf, cap *= 2);
            if (!b2) free(buf);
            buf = b2;
        }
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) {
        free(buf);
        fprintf(stderr, "replay: %s: cannot read\n", path);
        return -1;
    }
    if (!quiet) fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
    /* an exact-size copy, so ASan sees a read past the input's end */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int quiet = 0, bad = 0;
    long total = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-q")) {
            quiet = 1;
            continue;
        }
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            bad = 1;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (run_file(argv[i], quiet) == 0) total++;
            else bad = 1;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            bad = 1;
            continue;
        }
        /* sorted, so a failure reproduces in the same order */
        char **names = NULL;
        size_t nn = 0, cap = 0;
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.') continue;
            if (nn == cap) {
                char **n2 = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
                if (!n2) break;
                names = n2;
            }
            names[nn] = strdup(e->d_name);
            if (names[nn]) nn++;
        }
        closedir(d);
        if (nn) qsort(names, nn, sizeof *names, cmp_name);
        long here = 0;
        for (size_t k = 0; k < nn; k++) {
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", argv[i], names[k]);
            struct stat fs;
            if (stat(p, &fs) == 0 && S_ISREG(fs.st_mode)) {
                if (run_file(p, quiet) == 0) here++;
                else bad = 1;
            }
            free(names[k]);
        }
        free(names);
        if (!here) {
            fprintf(stderr, "replay: %s holds no input\n", argv[i]);
            bad = 1;
        }
        total += here;
    }
    printf("replay: %ld inputs ran\n", total);
    return bad;
}
