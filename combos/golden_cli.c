/* moe-golden: the command line of the golden vectors (include/moe/golden.h).
 * Parsing, help, list and show live here; generate, verify and update in
 * golden_cmds.c. */
#include <fnmatch.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "cli_opts.h"
#include "golden_internal.h"
#include "moe/backends.h"

static const char *const COMMANDS[] = {"generate", "verify", "update", "list", "show"};
enum { NCMD = sizeof COMMANDS / sizeof COMMANDS[0] };

static int usage(FILE *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage(FILE *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(err, "moe-golden: ");
    vfprintf(err, fmt, ap);
    fprintf(err, "\n(moe-golden --help for usage)\n");
    va_end(ap);
    return 2;
}

static void help(FILE *out, const char *cmd)
{
    if (!cmd)
        fprintf(out,
                "usage: moe-golden COMMAND [options]\n"
                "\n"
                "Golden vectors of every MoE stage and of moe_ref_forward: one directory per case\n"
                "(case.json, .npy v1.0 tensors, MANIFEST.sha256), inputs from the case's seed.\n"
                "\n"
                "commands:\n"
                "  generate [--dir DIR] [--filter GLOB]   write the cases that are not there yet; an existing\n"
                "                                         case must be identical (moe-golden update changes it)\n"
                "  verify [--dir DIR] [--backend LIST] [--json FILE] [--filter GLOB]\n"
                "                                         check every file against its manifest, regenerate with the\n"
                "                                         current reference (bytes must be identical), run each backend\n"
                "                                         on the golden inputs under its exactness class\n"
                "  update [--dir DIR] [--diff FILE] [--filter GLOB]\n"
                "                                         rewrite the cases that changed (and corrupt or missing ones),\n"
                "                                         remove cases no longer in the table, write the diff report\n"
                "  list [--dir DIR] [--filter GLOB]       the case table and which cases DIR holds\n"
                "  show CASE [--dir DIR]                  case.json and every file with dtype, shape and SHA-256\n"
                "\n"
                "DIR defaults to golden (relative to the current directory); --diff to golden-diff.json.\n"
                "--backend takes a comma-separated list of ref, cpu, cuda-conform, cuda-atomic, cuda-fast (default: all; those\n"
                "not built or without a device are reported as skipped, never as passed).\n"
                "exit status: 0 all ok; 1 a case changed or a backend failed its class; 2 usage error;\n"
                "3 a golden file missing, truncated or corrupt (named with the reason).\n");
    else if (!strcmp(cmd, "generate"))
        fprintf(out, "usage: moe-golden generate [--dir DIR] [--filter GLOB]\n"
                     "Writes each selected case into DIR/<case> (through a temporary directory renamed into place).\n"
                     "A case already there must regenerate to identical bytes; otherwise it is refused\n"
                     "(exit 1, or 3 when the stored case is corrupt): moe-golden update changes goldens.\n");
    else if (!strcmp(cmd, "verify"))
        fprintf(out, "usage: moe-golden verify [--dir DIR] [--backend LIST] [--json FILE] [--filter GLOB]\n"
                     "Per case: the manifest and every file it lists (missing, truncated, corrupt: exit 3), then a\n"
                     "regeneration with the current reference that must give identical bytes (else 'changed',\n"
                     "exit 1), then each backend on the stored inputs, compared under the tolerance table's class\n"
                     "for (stage, backend, scheme) (fail: exit 1). Prints one line per case and\n"
                     "'N golden cases verified, N failed'; --json writes reports/SCHEMA.md's golden record.\n");
    else if (!strcmp(cmd, "update"))
        fprintf(out, "usage: moe-golden update [--dir DIR] [--diff FILE] [--filter GLOB]\n"
                     "Rewrites only the cases whose regeneration differs from what is stored (or that are corrupt\n"
                     "or missing), removes case directories no longer in the table (without --filter), and writes\n"
                     "the diff report {\"type\": \"golden-diff\", \"changes\": [...]} to FILE (golden-diff.json).\n");
    else if (!strcmp(cmd, "list"))
        fprintf(out, "usage: moe-golden list [--dir DIR] [--filter GLOB]\n"
                     "One line per case: name, kind (ops entry), scheme, storage, and whether DIR holds it.\n");
    else
        fprintf(out, "usage: moe-golden show CASE [--dir DIR]\n"
                     "Prints DIR/CASE/case.json and every file of its manifest with dtype, shape and SHA-256,\n"
                     "with the problems a verify would report (exit 3 when there are any).\n");
}

/* ---- list / show -------------------------------------------------------------------------------- */

static int cmd_list(const gk_opts *o)
{
    int n = 0, present = 0;
    for (int i = 0; i < o->table->n; i++) {
        const moe_golden_case *c = o->table->cases[i];
        if (!gk_selected(o, c)) continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", o->dir, c->name);
        int has = gk_is_dir(p);
        fprintf(o->out, "%-62s %-26s %-24s %-11s %s\n", c->name, c->kind, c->scheme,
                c->digest_only ? "digest-only" : "stored", has ? "present" : "absent");
        n++, present += has;
    }
    fprintf(o->out, "%d golden cases, %d present in %s\n", n, present, o->dir);
    return 0;
}

static void show_tensors(const gk_opts *o, const gk_stored *s, const gk_manifest *dg)
{
    const char *arrs[2] = {"inputs", "outputs"};
    for (int a = 0; a < 2; a++) {
        const cJSON *e;
        fprintf(o->out, "%s:\n", arrs[a]);
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(s->json, arrs[a]))
        {
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(e, "file"), *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
            const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape"), *st = cJSON_GetObjectItemCaseSensitive(e, "stored");
            if (!cJSON_IsString(f) || !cJSON_IsString(dt)) continue;
            /* a corrupt case.json may hold any numbers, and any count of them:
             * no integer cast (UB out of range), and the text stops at the
             * buffer with "..." (fuzz finding: the running length overran it) */
            char shape[128] = "[";
            size_t l = 1, cap = sizeof shape - 5; /* room for "...]" */
            const cJSON *v;
            cJSON_ArrayForEach(v, sh)
            {
                int w = snprintf(shape + l, cap - l, "%s%.17g", l > 1 ? ", " : "", v->valuedouble);
                if (w < 0 || (size_t)w >= cap - l) {
                    l += (size_t)snprintf(shape + l, sizeof shape - l, "...");
                    break;
                }
                l += (size_t)w;
            }
            snprintf(shape + l, sizeof shape - l, "]");
            const char *sha = "";
            for (int i = 0; i < s->nfiles; i++)
                if (!strcmp(s->files[i].name, f->valuestring)) sha = s->files[i].sha;
            if (cJSON_IsFalse(st)) sha = gk_manifest_sha(dg, f->valuestring) ? gk_manifest_sha(dg, f->valuestring) : "?";
            fprintf(o->out, "  %-40s %-6s %-22s %s%s\n", f->valuestring, dt->valuestring, shape, sha,
                    cJSON_IsFalse(st) ? "  (digest only)" : "");
        }
    }
}

static int cmd_show(const gk_opts *o, const char *name)
{
    char p[4096], cj[4200];
    snprintf(p, sizeof p, "%s/%s", o->dir, name);
    gk_stored s;
    gk_read_case(p, 0, &s);
    snprintf(cj, sizeof cj, "%s/case.json", p);
    FILE *f = fopen(cj, "r");
    if (f) {
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, n, o->out);
        fclose(f);
    }
    gk_manifest dg;
    int bad;
    if (gk_manifest_read(p, "DIGESTS.sha256", &dg, &bad) <= 0) dg.n = 0;
    if (s.json) show_tensors(o, &s, &dg);
    fprintf(o->out, "files:\n");
    for (int i = 0; i < s.nfiles; i++)
        fprintf(o->out, "  %-44s %-8s %s%s%s\n", s.files[i].name, gk_status_name(s.files[i].status), s.files[i].sha,
                s.files[i].reason[0] ? "  " : "", s.files[i].reason);
    fprintf(o->out, "status: %s%s%s\n", gk_status_name(s.status), s.reason[0] ? ": " : "", s.reason);
    int rc = s.status == GK_OK ? 0 : 3;
    gk_stored_free(&s);
    return rc;
}

/* ---- parsing ----------------------------------------------------------------------------------------- */

static int parse_backends(gk_opts *o, const char *list, char *buf, size_t n, FILE *err)
{
    const char *known[8];
    int nk = moe_backend_count();
    for (int i = 0; i < nk && i < 8; i++) known[i] = moe_backend_name(i);
    snprintf(buf, n, "%s", list);
    o->nbackends = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int k = 0;
        while (k < nk && strcmp(known[k], t)) k++;
        if (k == nk)
            return usage(err, "--backend: unknown backend '%s' (did you mean '%s'?); known: ref, cpu, cuda-conform, "
                              "cuda-atomic, cuda-fast", t, cli_closest(t, known, (size_t)nk));
        if (o->nbackends >= GK_MAX_BACKENDS) return usage(err, "--backend: at most %d backends", GK_MAX_BACKENDS);
        o->backends[o->nbackends++] = t;
    }
    if (!o->nbackends) return usage(err, "--backend: the list is empty");
    return 0;
}

static int unknown_case(const gk_opts *o, const char *name, FILE *err)
{
    const char **names = malloc(sizeof *names * (size_t)(o->table->n ? o->table->n : 1));
    if (!names) return usage(err, "show: unknown case '%s'", name);
    for (int i = 0; i < o->table->n; i++) names[i] = o->table->cases[i]->name;
    int rc = usage(err, "show: unknown case '%s' (did you mean '%s'?; moe-golden list shows them all)", name,
                   o->table->n ? cli_closest(name, names, (size_t)o->table->n) : "");
    free(names);
    return rc;
}

int moe_golden_cli(int argc, char **argv, const moe_golden_table *table, FILE *out, FILE *err)
{
    if (argc < 2) return usage(err, "missing command (generate, verify, update, list or show)");
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        help(out, NULL);
        return 0;
    }
    int ci = 0;
    while (ci < NCMD && strcmp(cmd, COMMANDS[ci])) ci++;
    if (ci == NCMD)
        return usage(err, "unknown command '%s' (did you mean '%s'?); commands: generate verify update list show", cmd,
                     cli_closest(cmd, COMMANDS, NCMD));
    /* options each command takes */
    static const char *const OPTS[NCMD][5] = {{"--dir", "--filter"},
                                              {"--dir", "--backend", "--json", "--filter"},
                                              {"--dir", "--diff", "--filter"},
                                              {"--dir", "--filter"},
                                              {"--dir"}};
    gk_opts o;
    memset(&o, 0, sizeof o);
    o.table = table, o.dir = "golden", o.diff = "golden-diff.json", o.out = out, o.err = err;
    const char *positional = NULL;
    char blist[256];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help(out, cmd);
            return 0;
        }
        if (a[0] != '-' || !a[1]) {
            if (ci != 4 || positional) return usage(err, "%s: unexpected argument '%s'", cmd, a);
            positional = a;
            continue;
        }
        int k = 0;
        while (k < 5 && OPTS[ci][k] && strcmp(OPTS[ci][k], a)) k++;
        if (k == 5 || !OPTS[ci][k]) {
            const char *names[6];
            size_t m = 0;
            for (; m < 5 && OPTS[ci][m]; m++) names[m] = OPTS[ci][m];
            names[m++] = "--help";
            return usage(err, "%s: unknown option '%s' (did you mean '%s'?)", cmd, a, cli_closest(a, names, m));
        }
        if (i + 1 >= argc) return usage(err, "%s: option %s needs a value", cmd, a);
        const char *v = argv[++i];
        if (!*v) return usage(err, "%s: option %s needs a non-empty value", cmd, a);
        if (!strcmp(a, "--dir")) o.dir = v;
        else if (!strcmp(a, "--filter")) o.filter = v;
        else if (!strcmp(a, "--json")) o.json = v;
        else if (!strcmp(a, "--diff")) o.diff = v;
        else if (parse_backends(&o, v, blist, sizeof blist, err)) return 2;
    }
    if (o.filter) {
        int any = 0;
        for (int i = 0; i < table->n && !any; i++) any = gk_selected(&o, table->cases[i]);
        if (!any) {
            const char **names = malloc(sizeof *names * (size_t)(table->n ? table->n : 1));
            const char *near = "";
            if (names) {
                for (int i = 0; i < table->n; i++) names[i] = table->cases[i]->name;
                near = table->n ? cli_closest(o.filter, names, (size_t)table->n) : "";
            }
            int rc = usage(err, "%s: --filter '%s' matches no case (closest name: '%s')", cmd, o.filter, near);
            free(names);
            return rc;
        }
    }
    if (!o.nbackends) /* every known backend; the unavailable ones report why */
        for (int i = 0; i < moe_backend_count() && i < GK_MAX_BACKENDS; i++) o.backends[o.nbackends++] = moe_backend_name(i);
    switch (ci) {
    case 0: return gk_generate(&o);
    case 1: return gk_verify(&o);
    case 2: return gk_update(&o);
    case 3: return cmd_list(&o);
    default:
        if (!positional) return usage(err, "show: which case? (moe-golden list shows them)");
        if (!moe_golden_find(table, positional)) return unknown_case(&o, positional, err);
        return cmd_show(&o, positional);
    }
}

int moe_cli_golden(int argc, char **argv, FILE *out, FILE *err)
{
    return moe_golden_cli(argc, argv, moe_golden_builtin(), out, err);
}
