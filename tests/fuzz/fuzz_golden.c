/* libFuzzer target: the golden case reader (combos/golden_store.c:
 * MANIFEST.sha256 / DIGESTS.sha256, case.json, the tensors it lists) and
 * `moe-golden show`, which prints what it read.
 *
 * Input: files as sections (fuzz_util.h), e.g.
 *     ==> case.json <==
 *     {...}
 *     ==> in_x.npy <==
 *     \x93NUMPY...
 * written into a scratch case directory. Without a MANIFEST.sha256
 * section the target writes a correct one for the files given, so the
 * fuzzer reaches case.json and the tensors past the hash check; with one,
 * the manifest is the fuzzed text. Properties: the reader never fails on
 * content (only a program error may), its verdict is GK_OK exactly when it
 * names no problem, and `show` exits 0 or 3 (DESIGN section 11). */
#include <dirent.h>
#include <sys/stat.h>
#include "fuzz_util.h"
#include "golden_internal.h"
#include "moe/sha256.h"

#define MAX_SEC 24

/* A file name the reader could meet in a directory: no '/', no leading '.'. */
static void clean_name(char *s)
{
    if (s[0] == '.' || !s[0]) s[0] = '_'; /* first: an empty name would hide the rest from the loop */
    for (char *p = s; *p; p++)
        if (*p == '/' || *p == '\\') *p = '_';
}

static void empty_dir(const char *dir)
{
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        FUZZ_REQUIRE(unlink(p) == 0, "cannot clean %s", p);
    }
    if (d) closedir(d);
}

static moe_status no_make(const moe_golden_case *c, moe_golden_set *in)
{
    (void)c, (void)in;
    return moe_fail(MOE_ERR_UNSUPPORTED, "fuzz case: no inputs");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char dir[600];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/case", fuzz_scratch_dir());
        mkdir(dir, 0777);
    }
    empty_dir(dir);
    fuzz_section sec[MAX_SEC];
    int ns = fuzz_sections(data, size, sec, MAX_SEC), has_manifest = 0;
    char names[MAX_SEC][96];
    int nw = 0;
    for (int i = 0; i < ns; i++) {
        clean_name(sec[i].name);
        int dup = 0;
        for (int j = 0; j < nw; j++) dup |= !strcmp(names[j], sec[i].name);
        if (dup) continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, sec[i].name);
        FUZZ_REQUIRE(fuzz_write_file(p, sec[i].data, sec[i].size) == 0, "cannot write %s", p);
        if (!strcmp(sec[i].name, "MANIFEST.sha256")) has_manifest = 1;
        else memcpy(names[nw++], sec[i].name, sizeof names[0]); /* both hold 96 bytes */
    }
    if (!has_manifest && nw) {
        char p[1400], *text = malloc((size_t)nw * 170 + 1);
        FUZZ_REQUIRE(text != NULL, "no memory");
        size_t l = 0;
        for (int i = 0; i < ns; i++) {
            const char *nm = sec[i].name;
            int first = 1;
            for (int j = 0; j < i; j++) first &= strcmp(sec[j].name, nm) != 0;
            if (!first || !strcmp(nm, "MANIFEST.sha256")) continue;
            char hex[65];
            moe_sha256_hex(sec[i].data, sec[i].size, hex);
            l += (size_t)sprintf(text + l, "%s  %s\n", hex, nm);
        }
        snprintf(p, sizeof p, "%s/MANIFEST.sha256", dir);
        FUZZ_REQUIRE(fuzz_write_file(p, text, l) == 0, "cannot write %s", p);
        free(text);
    }

    gk_stored st;
    moe_status s = gk_read_case(dir, 1, &st);
    FUZZ_REQUIRE(s == MOE_OK, "gk_read_case failed on content: %s (%s)", moe_status_str(s), moe_last_error());
    FUZZ_REQUIRE(st.status >= GK_OK && st.status <= GK_MISSING, "status %d out of range", (int)st.status);
    FUZZ_REQUIRE((st.status == GK_OK) == (st.reason[0] == '\0'), "status %s with reason '%s'",
                 gk_status_name(st.status), st.reason);
    FUZZ_REQUIRE(st.nfiles >= 0 && st.nfiles <= GK_MAX_FILES, "%d files", st.nfiles);
    for (int i = 0; i < st.nfiles; i++)
        FUZZ_REQUIRE(st.files[i].status == GK_OK || st.status != GK_OK, "file %s is %s, the case OK",
                     st.files[i].name, gk_status_name(st.files[i].status));
    if (st.status == GK_OK) FUZZ_REQUIRE(st.json != NULL, "an intact case without case.json");
    gk_stored_free(&st);

    /* the manifest parser on its own, with the fuzzed text */
    if (has_manifest) {
        gk_manifest m;
        int bad = -7, r = gk_manifest_read(dir, "MANIFEST.sha256", &m, &bad);
        FUZZ_REQUIRE(r == 1 || (r == -1 && bad >= 0), "manifest_read %d (line %d)", r, bad);
        for (int i = 0; r == 1 && i < m.n; i++)
            FUZZ_REQUIRE(strlen(m.sha[i]) == 64 && m.name[i][0] && !strchr(m.name[i], '/'), "entry %d accepted as '%s'",
                         i, m.name[i]);
    }

    /* moe-golden show prints case.json's tensor records */
    static const moe_golden_case fc = {.name = "case", .kind = "forward", .scheme = "*", .make = no_make};
    static const moe_golden_case *const cases[] = {&fc};
    static const moe_golden_table table = {cases, 1};
    FILE *devnull = fopen("/dev/null", "w");
    FUZZ_REQUIRE(devnull != NULL, "no /dev/null");
    char *argv[] = {"moe-golden", "show", "case", "--dir", (char *)fuzz_scratch_dir(), NULL};
    int rc = moe_golden_cli(5, argv, &table, devnull, devnull);
    fclose(devnull);
    FUZZ_REQUIRE(rc == 0 || rc == 3, "moe-golden show exits %d", rc);
    return 0;
}
