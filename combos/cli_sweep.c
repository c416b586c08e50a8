/* moe-sweep: the sweep harness's command line (include/moe/sweep.h).
 * Cases run in blocks; within a block they run in parallel (--jobs
 * OpenMP threads) and their records are written in case order, so the
 * output never depends on the thread count. The JSON Lines file is
 * written to FILE.tmp and renamed when complete: an interrupted run
 * leaves no file that looks finished. */
#include <fnmatch.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "moe/backends.h"
#include "moe/cli.h"
#include "moe/sweep.h"
#include "moe_git_rev.h" /* MOE_GIT_REV: the revision this tool was built from (Makefile) */

#ifndef MOE_BUILD_CFLAGS
#define MOE_BUILD_CFLAGS "unknown"
#endif

static const char USAGE[] =
    "usage: moe-sweep [--tier quick|standard|full] [--backend LIST] [--filter GLOB] [--jobs N]\n"
    "                 [--seed N] [--out FILE.jsonl] [--no-time] [--list] [--quiet]\n"
    "  Runs every prepare/finalize x experts x scheme x activation x shape x world\n"
    "  cell of the tier: incompatible cells must be refused by the modular-kernel\n"
    "  constructor with the registry's rule ids; compatible cells run on each\n"
    "  backend (default: ref,cpu,cuda-conform,cuda-atomic,cuda-fast; those not built or\n"
    "  without a device are reported as skipped) and are compared with\n"
    "  moe_ref_forward under their tolerance-table row.\n"
    "  --filter GLOB   only cases whose dotted name matches (fnmatch), e.g.\n"
    "                  'moe.noep.*.bf16.*'\n"
    "  --jobs N        cases in parallel (default: OMP_NUM_THREADS or the cores)\n"
    "  --out FILE      JSON Lines records (reports/SCHEMA.md)\n"
    "  --no-time       leave timings out of the records (byte-comparable runs)\n"
    "  --list          print the case names and exit\n"
    "  exit: 0 no failure, 1 a case failed or errored, 2 usage error\n";

static int usage_error(FILE *err, const char *msg, const char *arg)
{
    fprintf(err, "moe-sweep: %s '%s'\n(see moe-sweep --help)\n", msg, arg ? arg : "");
    return 2;
}

static void meta_line(FILE *f, moe_sweep_tier tier, uint64_t seed, const char *const *bk, int nb, const char *filter,
                      int jobs, int with_time)
{
    fprintf(f, "{\"type\":\"meta\",\"tool\":\"moe-sweep\",\"tier\":\"%s\",\"seed\":%llu,\"backends\":[",
            moe_sweep_tier_name(tier), (unsigned long long)seed);
    for (int i = 0; i < nb; i++) {
        const moe_ops *ops;
        const char *why = NULL;
        int ok = moe_backend_lookup(bk[i], &ops, &why) == MOE_OK;
        fprintf(f, "%s{\"name\":\"%s\",\"status\":\"%s\"", i ? "," : "", bk[i], ok ? "run" : "skipped");
        if (!ok) fprintf(f, ",\"reason\":\"%s\"", why ? why : "unavailable");
        fputc('}', f);
    }
    char cu[96], dr[96], gpu[96];
    int has_cuda = moe_backend_cuda_info(cu, dr, gpu, sizeof cu);
    fprintf(f, "],\"git_rev\":\"%s\",\"compiler\":\"%s %s\",\"cflags\":\"%s\",\"openblas\":null,\"omp_threads\":%d,",
            MOE_GIT_REV,
#ifdef __clang__
            "clang",
#else
            "gcc",
#endif
            __VERSION__, MOE_BUILD_CFLAGS, omp_get_max_threads());
    if (has_cuda) fprintf(f, "\"cuda\":\"%s\",\"driver\":\"%s\",\"gpu\":\"%s\",", cu, dr, gpu);
    else fputs("\"cuda\":null,\"driver\":null,\"gpu\":null,", f);
    fprintf(f, "\"filter\":\"%s\",\"jobs\":%d",
            filter, jobs);
    if (with_time) {
        char date[32];
        time_t t = time(NULL);
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
        fprintf(f, ",\"date\":\"%s\"", date);
    }
    fputs("}\n", f);
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int moe_cli_sweep(int argc, char **argv, FILE *out, FILE *err)
{
    moe_sweep_tier tier = MOE_TIER_QUICK;
    const char *filter = "*", *path = NULL;
    char blist[128] = "ref,cpu,cuda-conform,cuda-atomic,cuda-fast";
    unsigned long long seed = 20261121ull;
    int jobs = omp_get_max_threads(), with_time = 1, list = 0, quiet = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return fputs(USAGE, out), 0;
        else if (!strcmp(a, "--no-time")) with_time = 0;
        else if (!strcmp(a, "--list")) list = 1;
        else if (!strcmp(a, "--quiet")) quiet = 1;
        else if (!v && (!strcmp(a, "--tier") || !strcmp(a, "--backend") || !strcmp(a, "--filter") ||
                        !strcmp(a, "--jobs") || !strcmp(a, "--seed") || !strcmp(a, "--out")))
            return usage_error(err, "missing the value of", a);
        else if (!strcmp(a, "--tier")) {
            if (moe_sweep_tier_from_name(v, &tier)) return usage_error(err, "--tier must be quick, standard or full, not", v);
            i++;
        } else if (!strcmp(a, "--backend")) {
            if (strlen(v) >= sizeof blist) return usage_error(err, "--backend list too long:", v);
            snprintf(blist, sizeof blist, "%s", v), i++;
        } else if (!strcmp(a, "--filter")) filter = v, i++;
        else if (!strcmp(a, "--out")) path = v, i++;
        else if (!strcmp(a, "--jobs")) {
            long n = strtol(v, &end, 10);
            if (*end || n < 1 || n > 256) return usage_error(err, "--jobs must be an integer in [1, 256], not", v);
            jobs = (int)n, i++;
        } else if (!strcmp(a, "--seed")) {
            seed = strtoull(v, &end, 10);
            if (*end || !*v || *v == '-') return usage_error(err, "--seed must be a non-negative integer, not", v);
            i++;
        } else return usage_error(err, "unknown option", a);
    }
    /* the backend list: known names only, each once */
    const char *bk[8];
    int nb = 0;
    char bcopy[128];
    snprintf(bcopy, sizeof bcopy, "%s", blist);
    for (char *save = NULL, *t = strtok_r(bcopy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int known = -1;
        for (int j = 0; j < moe_backend_count(); j++)
            if (!strcmp(t, moe_backend_name(j))) known = j;
        if (known < 0) return usage_error(err, "--backend: unknown backend (known: ref, cpu, cuda-conform, cuda-atomic, cuda-fast)", t);
        for (int j = 0; j < nb; j++)
            if (!strcmp(bk[j], t)) return usage_error(err, "--backend: named twice:", t);
        bk[nb++] = moe_backend_name(known);
    }
    if (!nb) return usage_error(err, "--backend: no backend in", blist);

    moe_sweep_case *all;
    int n;
    if (moe_sweep_enumerate(tier, seed, &all, &n)) return fprintf(err, "moe-sweep: %s\n", moe_last_error()), 1;
    int m = 0;
    for (int i = 0; i < n; i++) {
        char name[256];
        moe_sweep_case_name(&all[i], name, sizeof name);
        if (fnmatch(filter, name, 0) == 0) all[m++] = all[i];
    }
    if (list) {
        for (int i = 0; i < m; i++) {
            char name[256];
            moe_sweep_case_name(&all[i], name, sizeof name);
            fprintf(out, "%s\n", name);
        }
        free(all);
        return 0;
    }
    if (m == 0) {
        free(all);
        return usage_error(err, "--filter matches no case of the tier:", filter);
    }
    FILE *jf = NULL;
    char tmp[4096];
    if (path) {
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        if (!(jf = fopen(tmp, "w"))) {
            free(all);
            fprintf(err, "moe-sweep: --out %s: cannot write %s\n", path, tmp);
            return 2;
        }
        meta_line(jf, tier, seed, bk, nb, filter, jobs, with_time);
    }
    moe_sweep_options o = {{NULL}, nb, NULL, NULL, NULL};
    for (int b = 0; b < nb; b++) o.backends[b] = bk[b];
    long long cnt[MOE_VERDICT_COUNT] = {0};
    int interactive = isatty(fileno(err)) && !quiet, internal = 0;
    double t0 = wall_s();
    enum { BLOCK = 512 }; /* cases per parallel block: threads meet once per block */
    moe_sweep_record *recs[BLOCK];
    int nrec[BLOCK];
    for (int b0 = 0; b0 < m && !internal; b0 += BLOCK) {
        int nbk = m - b0 < BLOCK ? m - b0 : BLOCK;
        moe_status sts[BLOCK];
#pragma omp parallel num_threads(jobs)
        {
#pragma omp for schedule(dynamic, 1)
            for (int i = 0; i < nbk; i++) {
                recs[i] = NULL, nrec[i] = 0;
                sts[i] = moe_sweep_run_case(&all[b0 + i], &o, &recs[i], &nrec[i]);
            }
        }
        for (int i = 0; i < nbk; i++) {
            char name[256];
            moe_sweep_case_name(&all[b0 + i], name, sizeof name);
            if (sts[i]) {
                fprintf(err, "\nmoe-sweep: %s: internal error: %s\n", name, moe_last_error());
                internal = 1;
                continue;
            }
            for (int r = 0; r < nrec[i]; r++) {
                const moe_sweep_record *rc = &recs[i][r];
                cnt[rc->verdict]++;
                if (jf) moe_sweep_write_record(jf, &all[b0 + i], rc, with_time);
                if (rc->verdict == MOE_VERDICT_FAIL || rc->verdict == MOE_VERDICT_ERROR)
                    fprintf(out, "%s %s [%s %s]: %s\n", moe_verdict_name(rc->verdict), name, rc->backend, rc->stage,
                            rc->reason);
            }
            moe_sweep_records_free(recs[i], nrec[i]);
        }
        if (interactive) {
            int done = b0 + nbk, w = 40, fill = (int)((long long)w * done / m);
            fprintf(err, "\r[%.*s%*s] %d/%d cases, %lld failed", fill, "========================================",
                    w - fill, "", done, m, cnt[MOE_VERDICT_FAIL] + cnt[MOE_VERDICT_ERROR]);
            fflush(err);
        }
    }
#pragma omp parallel num_threads(jobs)
    moe_sweep_cache_release();
    moe_sweep_cache_release();
    if (interactive) fputc('\n', err);
    long long passed = cnt[MOE_VERDICT_PASS] + cnt[MOE_VERDICT_REFUSED], failed = cnt[MOE_VERDICT_FAIL] +
              cnt[MOE_VERDICT_ERROR], skipped = cnt[MOE_VERDICT_SKIPPED];
    char text[160];
    snprintf(text, sizeof text, "%lld passed, %lld failed, %lld skipped", passed, failed, skipped);
    if (jf) {
        fprintf(jf, "{\"type\":\"summary\",\"passed\":%lld,\"failed\":%lld,\"skipped\":%lld,\"refused\":%lld,"
                    "\"errors\":%lld,\"text\":\"%s\"", passed, cnt[MOE_VERDICT_FAIL], skipped, cnt[MOE_VERDICT_REFUSED],
                cnt[MOE_VERDICT_ERROR], text);
        if (with_time) fprintf(jf, ",\"elapsed_s\":%.1f", wall_s() - t0);
        fputs("}\n", jf);
        int bad = ferror(jf);
        bad |= fclose(jf) != 0;
        if (bad || internal || rename(tmp, path)) {
            remove(tmp);
            fprintf(err, "moe-sweep: %s not written%s\n", path, internal ? " (internal error)" : "");
            free(all);
            return 1;
        }
    }
    free(all);
    fprintf(out, "%d cases (%s tier): %lld refused as expected, %lld errors\n%s\n", m, moe_sweep_tier_name(tier),
            cnt[MOE_VERDICT_REFUSED], cnt[MOE_VERDICT_ERROR], text);
    return failed || internal ? 1 : 0;
}
