/* Fault injection (issue 9 item 5; anchors style_numerics_reliability.md
 * 6.1, SQLite's OOM tests): the suite is linked with
 * -Wl,--wrap=malloc,calloc,realloc,posix_memalign,strdup (Makefile), so every
 * allocation the project's own code makes (the reference, the combos, the
 * CPU backend) goes through __wrap_* below, and a countdown fails the N-th.
 * Allocations inside shared libraries (libc internals, cJSON, OpenSSL,
 * OpenBLAS, libgomp) are not intercepted.
 *
 * For each target call, main() first counts the allocations of one clean
 * run; the loop test then fails allocation N for every N in 1..count, once
 * (transient: the later allocations succeed) and from N on (persistent),
 * and requires a clean outcome: MOE_ERR_NOMEM with a message, or MOE_OK with
 * the clean run's exact bits (a failure the code legitimately recovers
 * from). Never a crash, never MOE_OK with different bits. Under make
 * check-asan, LeakSanitizer then checks that nothing allocated before the
 * failure was leaked. */
#include <check.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mk_fixture.h"
#include "moe/forward.h"
#include "moe/golden.h"
#include "moe/modular.h"
#include "../combos/golden_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define FI_LEAK_CHECK() ck_assert_msg(__lsan_do_recoverable_leak_check() == 0, "leak after an allocation failure")
#else
#define FI_LEAK_CHECK() ((void)0)
#endif

/* ---- the allocator wrapper ------------------------------------------------ */

void *__real_malloc(size_t n);
void *__real_calloc(size_t m, size_t n);
void *__real_realloc(void *p, size_t n);
int __real_posix_memalign(void **p, size_t a, size_t n);

static atomic_long fi_calls;    /* allocations seen since fi_arm */
static long fi_fail_at;         /* 1-based index of the first failing one; 0 = none */
static int fi_persistent;       /* keep failing after the first */
static atomic_int fi_armed, fi_injected;

static void fi_arm(long n, int persistent)
{
    atomic_store(&fi_calls, 0);
    atomic_store(&fi_injected, 0);
    fi_fail_at = n, fi_persistent = persistent;
    atomic_store(&fi_armed, 1);
}

static void fi_disarm(void) { atomic_store(&fi_armed, 0); }

static int fi_fail(void)
{
    if (!atomic_load(&fi_armed)) return 0;
    long i = atomic_fetch_add(&fi_calls, 1) + 1;
    if (fi_fail_at > 0 && (i == fi_fail_at || (fi_persistent && i > fi_fail_at))) {
        atomic_store(&fi_injected, 1);
        return 1;
    }
    return 0;
}

void *__wrap_malloc(size_t n) { return fi_fail() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t m, size_t n) { return fi_fail() ? NULL : __real_calloc(m, n); }
void *__wrap_realloc(void *p, size_t n) { return fi_fail() ? NULL : __real_realloc(p, n); }
int __wrap_posix_memalign(void **p, size_t a, size_t n) { return fi_fail() ? 12 /* ENOMEM */ : __real_posix_memalign(p, a, n); }
char *__wrap_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = __wrap_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* ---- the targets ----------------------------------------------------------------- */

/* One target: set up (not counted), the call under test (counted), the
 * result as bytes for comparison with the clean run, tear down. */
typedef struct {
    const char *name;
    void (*setup)(void);
    moe_status (*call)(void);
    void (*result)(const void **p, size_t *n);
    void (*teardown)(void);
} fi_target;

static mkf_prob prob;
static moe_tensor out;
static const int64_t FH = 128, FI = 128, FE = 4; /* block fp8 needs H and I multiples of 128 */

static void setup_scheme(moe_scheme sc)
{
    mkf_make(&prob, sc, 2, 3, FH, FI, FE, 7, 0.05f, 0, 0);
    out = tt_new(prob.xd, 2, 3, FH, 0);
}
static void setup_bf16(void) { setup_scheme(MOE_SCHEME_BF16); }
static void setup_fp8(void) { setup_scheme(MOE_SCHEME_FP8_WBLOCK128_AGROUP128); }
static void teardown_prob(void)
{
    mkf_unmake(&prob);
    moe_tensor_free(&out);
}
static void result_out(const void **p, size_t *n) { *p = out.data, *n = out.nbytes; }

static moe_status call_ref_forward(void)
{
    moe_forward_args a = mkf_forward_args(&prob, &prob.w, 0);
    return moe_ref_forward(&a, &prob.x, &out);
}

/* Constructor, forward and destructor: the constructor's allocations fail
 * too, and must leave no half-built kernel. */
static moe_status call_mk_forward(void)
{
    moe_mk_config cfg = mkf_config(prob.sc, 2, 1, FH, FI, FE);
    moe_mk *mk = NULL;
    moe_status s = moe_mk_create("noep", "triton_like", &cfg, &mk, NULL);
    if (s != MOE_OK) {
        if (mk) return moe_fail(MOE_ERR_INTERNAL, "moe_mk_create failed but handed back a kernel");
        return s;
    }
    s = moe_mk_forward(mk, &prob.mw, &prob.x, &prob.ids, &prob.w, &out);
    moe_mk_destroy(mk);
    return s;
}

/* A golden load: manifest, SHA-256 of every file, case.json, every .npy. */
static gk_stored stored;
static const char *golden_case(void)
{
    static char p[512];
    const char *root = getenv("MOE_GOLDEN_DIR");
    snprintf(p, sizeof p, "%s/e2e.forward.fp8_wblock128_agroup128", root ? root : "golden");
    return p;
}
static void setup_golden(void) { memset(&stored, 0, sizeof stored); }
static moe_status call_golden_load(void)
{
    moe_status s = gk_read_case(golden_case(), 1, &stored);
    if (s == MOE_OK && stored.status != GK_OK)
        return moe_fail(MOE_ERR_INTERNAL, "intact golden case read as %s: %s", gk_status_name(stored.status),
                        stored.reason);
    return s;
}
/* The loaded tensors, concatenated, for the bitwise comparison. */
static unsigned char *golden_bytes;
static void result_golden(const void **p, size_t *n)
{
    size_t total = 0;
    for (int k = 0; k < 2; k++) {
        const moe_golden_set *set = k ? &stored.out : &stored.in;
        for (int i = 0; i < set->n; i++) total += set->t[i].nbytes + MOE_GOLDEN_NAME_MAX;
    }
    free(golden_bytes);
    golden_bytes = malloc(total + 1);
    ck_assert_ptr_nonnull(golden_bytes);
    size_t o = 0;
    for (int k = 0; k < 2; k++) {
        const moe_golden_set *set = k ? &stored.out : &stored.in;
        for (int i = 0; i < set->n; i++) {
            memcpy(golden_bytes + o, set->name[i], MOE_GOLDEN_NAME_MAX), o += MOE_GOLDEN_NAME_MAX;
            if (set->t[i].nbytes) memcpy(golden_bytes + o, set->t[i].data, set->t[i].nbytes);
            o += set->t[i].nbytes;
        }
    }
    *p = golden_bytes, *n = total;
}
static void teardown_golden(void)
{
    gk_stored_free(&stored);
    free(golden_bytes);
    golden_bytes = NULL;
}

static const fi_target targets[] = {
    {"moe_ref_forward bf16", setup_bf16, call_ref_forward, result_out, teardown_prob},
    {"moe_ref_forward fp8_wblock128_agroup128", setup_fp8, call_ref_forward, result_out, teardown_prob},
    {"noep x triton_like bf16", setup_bf16, call_mk_forward, result_out, teardown_prob},
    {"noep x triton_like fp8_wblock128_agroup128", setup_fp8, call_mk_forward, result_out, teardown_prob},
    {"golden load e2e.forward.fp8_wblock128_agroup128", setup_golden, call_golden_load, result_golden,
     teardown_golden},
};
#define NTARGETS ((int)(sizeof targets / sizeof targets[0]))

/* Allocation counts of the clean runs (main fills them in a child process,
 * so the runner itself never starts OpenMP before forking). */
static long clean_count[NTARGETS];

/* Runs target t with allocation n failing; checks the outcome. */
static void run_faulty(int t, long n, int persistent)
{
    const fi_target *g = &targets[t];
    /* the clean result first, uninstrumented */
    g->setup();
    ck_assert_msg(g->call() == MOE_OK, "%s: clean run failed: %s", g->name, moe_last_error());
    const void *p;
    size_t nb;
    g->result(&p, &nb);
    void *want = malloc(nb + 1);
    ck_assert_ptr_nonnull(want);
    memcpy(want, p, nb);
    g->teardown();

    g->setup();
    moe_clear_error();
    fi_arm(n, persistent);
    moe_status s = g->call();
    fi_disarm();
    ck_assert_msg(atomic_load(&fi_injected), "%s: allocation %ld never happened (the clean run made %ld)", g->name,
                  n, clean_count[t]);
    if (s == MOE_OK) {
        g->result(&p, &nb);
        ck_assert_msg(memcmp(p, want, nb) == 0, "%s: allocation %ld failed, MOE_OK returned with different bits",
                      g->name, n);
    } else {
        ck_assert_msg(s == MOE_ERR_NOMEM, "%s: allocation %ld failed: status %s (%s), expected out-of-memory",
                      g->name, n, moe_status_str(s), moe_last_error());
        ck_assert_msg(moe_last_error()[0] != '\0', "%s: allocation %ld failed with no message", g->name, n);
    }
    g->teardown();
    free(want);
    FI_LEAK_CHECK();
}

/* _i enumerates (target, N) pairs: N = 1..clean_count[t] per target. */
static int pair_of(int i, int *t, long *n)
{
    for (int k = 0; k < NTARGETS; k++) {
        if (i < clean_count[k]) {
            *t = k, *n = i + 1;
            return 1;
        }
        i -= (int)clean_count[k];
    }
    return 0;
}

START_TEST(t_transient)
{
    int t;
    long n;
    ck_assert(pair_of(_i, &t, &n));
    run_faulty(t, n, 0);
}
END_TEST

START_TEST(t_persistent)
{
    int t;
    long n;
    ck_assert(pair_of(_i, &t, &n));
    run_faulty(t, n, 1);
}
END_TEST

/* The counts are real: every target allocates, so the sweep cannot be
 * empty, and a clean instrumented run injects nothing and succeeds. */
START_TEST(t_counts)
{
    for (int t = 0; t < NTARGETS; t++) {
        ck_assert_msg(clean_count[t] > 0, "%s: no allocation seen (is the suite linked with --wrap?)",
                      targets[t].name);
        targets[t].setup();
        fi_arm(0, 0);
        moe_status s = targets[t].call();
        long seen = atomic_load(&fi_calls);
        fi_disarm();
        ck_assert_msg(s == MOE_OK, "%s: %s", targets[t].name, moe_last_error());
        ck_assert_int_eq(atomic_load(&fi_injected), 0);
        ck_assert_int_eq(seen, clean_count[t]);
        targets[t].teardown();
    }
    FI_LEAK_CHECK();
}
END_TEST

/* Counts each target's allocations. It runs as a test of a first runner
 * (fork mode: the fixtures' assertions need a test context, and the parent
 * must not start the OpenMP runtime before forking) and hands the counts
 * back through a pipe. */
static int count_fd = -1;

START_TEST(t_count)
{
    long c[NTARGETS];
    for (int t = 0; t < NTARGETS; t++) {
        targets[t].setup();
        fi_arm(0, 0);
        moe_status s = targets[t].call();
        c[t] = atomic_load(&fi_calls);
        fi_disarm();
        ck_assert_msg(s == MOE_OK, "%s: clean run: %s", targets[t].name, moe_last_error());
        targets[t].teardown();
    }
    ck_assert_int_eq(write(count_fd, c, sizeof c), (ssize_t)sizeof c);
}
END_TEST

static int count_allocations(void)
{
    int fd[2];
    if (pipe(fd) != 0) return 0;
    count_fd = fd[1];
    Suite *s = suite_create("fault_inject_count");
    TCase *tc = tcase_create("count");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, t_count);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int ok = srunner_ntests_failed(sr) == 0;
    srunner_free(sr);
    close(fd[1]);
    ssize_t r = read(fd[0], clean_count, sizeof clean_count);
    close(fd[0]);
    if (!ok || r != (ssize_t)sizeof clean_count) {
        memset(clean_count, 0, sizeof clean_count);
        return 0;
    }
    for (int t = 0; t < NTARGETS; t++) printf("%s: %ld allocations\n", targets[t].name, clean_count[t]);
    return 1;
}

int main(void)
{
    /* one thread: allocation order, hence N, is the same in every run */
    omp_set_num_threads(1);
    int counted = count_allocations();
    int total = 0;
    for (int t = 0; t < NTARGETS; t++) total += (int)clean_count[t];
    Suite *s = suite_create("fault_inject");
    TCase *tc = tcase_create("alloc");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, t_counts);
    tcase_add_loop_test(tc, t_transient, 0, total);
    tcase_add_loop_test(tc, t_persistent, 0, total);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf || !counted ? EXIT_FAILURE : EXIT_SUCCESS;
}
