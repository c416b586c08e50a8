/* moe-golden generate / verify / update (include/moe/golden.h).
 *
 * Every command regenerates a case the same way: its seeded inputs and
 * the reference's outputs written by the same writer into a scratch
 * directory. Two case directories are equal when their manifests are
 * (the stored files were checked against theirs first), so "byte
 * identity" is one comparison and a change is named file by file. */
#include <dirent.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "golden_internal.h"
#include "moe/backends.h"
#include "moe/npy.h"
#include "moe/tolerance.h"

int gk_selected(const gk_opts *o, const moe_golden_case *c) { return !o->filter || fnmatch(o->filter, c->name, 0) == 0; }

moe_status gk_write_json(const char *path, const cJSON *doc)
{
    char *text = cJSON_Print(doc), tmp[4200];
    if (!text) return moe_fail(MOE_ERR_NOMEM, "%s: no memory for the JSON text", path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    int ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    if (f) ok = (fclose(f) == 0) && ok;
    free(text);
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        return moe_fail(MOE_ERR_IO, "%s: cannot write", path);
    }
    return MOE_OK;
}

/* ---- regeneration and differences ------------------------------------------------------------ */

typedef struct {
    moe_golden_set in, out;
    char dir[4096]; /* the regenerated case directory, "" when none */
} regen_t;

static moe_status regen(const moe_golden_case *c, const char *work, regen_t *g)
{
    memset(g->dir, 0, sizeof g->dir);
    moe_status st = moe_golden_compute(c, &g->in, &g->out);
    if (st != MOE_OK) return st;
    if (snprintf(g->dir, sizeof g->dir, "%s/%s", work, c->name) >= (int)sizeof g->dir)
        return moe_fail(MOE_ERR_IO, "%s: path too long", work);
    st = gk_write_case(g->dir, c, &g->in, &g->out);
    if (st != MOE_OK) {
        gk_rmtree(g->dir);
        g->dir[0] = '\0';
    }
    return st;
}

static void regen_free(regen_t *g)
{
    moe_golden_set_free(&g->in);
    moe_golden_set_free(&g->out);
    if (g->dir[0]) gk_rmtree(g->dir);
    g->dir[0] = '\0';
}

typedef struct {
    char file[96];
    char old_sha[65], new_sha[65]; /* "" when the file is absent on that side */
    int digest;                    /* from DIGESTS.sha256 (a file not stored) */
} change_t;

typedef struct {
    int n;
    change_t ch[3 * GK_MAX_FILES];
} changes_t;

static void merge(const gk_manifest *a, const gk_manifest *b, int digest, changes_t *d)
{
    for (int i = 0; i < a->n + b->n && d->n < (int)(sizeof d->ch / sizeof d->ch[0]); i++) {
        const char *name = i < a->n ? a->name[i] : b->name[i - a->n];
        const char *sa = gk_manifest_sha(a, name), *sb = gk_manifest_sha(b, name);
        if (i >= a->n && sa) continue; /* seen from a's side */
        if (sa && sb && !strcmp(sa, sb)) continue;
        change_t *c = &d->ch[d->n++];
        snprintf(c->file, sizeof c->file, "%s", name);
        snprintf(c->old_sha, sizeof c->old_sha, "%s", sa ? sa : "");
        snprintf(c->new_sha, sizeof c->new_sha, "%s", sb ? sb : "");
        c->digest = digest;
    }
}

/* What differs between two case directories (an absent old one: everything). */
static void diff_dirs(const char *old_dir, const char *new_dir, changes_t *d)
{
    gk_manifest a, b, da, db;
    int bad;
    d->n = 0;
    if (gk_manifest_read(old_dir, "MANIFEST.sha256", &a, &bad) <= 0) a.n = 0;
    if (gk_manifest_read(new_dir, "MANIFEST.sha256", &b, &bad) <= 0) b.n = 0;
    merge(&a, &b, 0, d);
    if (gk_manifest_read(old_dir, "DIGESTS.sha256", &da, &bad) <= 0) da.n = 0;
    if (gk_manifest_read(new_dir, "DIGESTS.sha256", &db, &bad) <= 0) db.n = 0;
    merge(&da, &db, 1, d);
}

static void changes_text(const changes_t *d, char *buf, size_t n)
{
    size_t l = (size_t)snprintf(buf, n, "the current reference writes different bytes: ");
    for (int i = 0; i < d->n && l < n; i++)
        l += (size_t)snprintf(buf + l, n - l, "%s%s%s", i ? ", " : "", d->ch[i].file,
                              !d->ch[i].old_sha[0] ? " (new)" : !d->ch[i].new_sha[0] ? " (gone)" : "");
}

/* Exact metrics of a changed tensor file, old against new (NULL when either
 * side is not a readable stored tensor of one shape). */
static cJSON *change_metrics(const char *old_dir, const char *new_dir, const change_t *c)
{
    size_t l = strlen(c->file);
    if (c->digest || !c->old_sha[0] || !c->new_sha[0] || l < 5 || strcmp(c->file + l - 4, ".npy")) return NULL;
    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s/%s", old_dir, c->file);
    snprintf(b, sizeof b, "%s/%s", new_dir, c->file);
    moe_tensor ta, tb;
    cJSON *j = NULL;
    if (moe_npy_read(a, &ta) != MOE_OK) return NULL;
    if (moe_npy_read(b, &tb) == MOE_OK) {
        moe_cmp_metrics m;
        moe_cmp_init(&m);
        if (moe_compare_exact(&tb, &ta, &m) == MOE_OK) j = gk_metrics_json(&m);
        moe_tensor_free(&tb);
    }
    moe_tensor_free(&ta);
    return j;
}

static moe_status make_work(const char *parent, char *out, size_t n)
{
    return gk_mkdtemp(parent, "moe-golden", out, n);
}

static const char *tmp_root(void)
{
    const char *t = getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

static int case_path(const gk_opts *o, const moe_golden_case *c, char *out, size_t n)
{
    return snprintf(out, n, "%s/%s", o->dir, c->name) < (int)n;
}

/* ---- generate ---------------------------------------------------------------------------------- */

int gk_generate(const gk_opts *o)
{
    char work[4096];
    if (!gk_is_dir(o->dir) && mkdir(o->dir, 0777) != 0) {
        fprintf(o->err, "moe-golden: %s: cannot create the golden directory\n", o->dir);
        return 3;
    }
    if (make_work(o->dir, work, sizeof work) != MOE_OK) {
        fprintf(o->err, "moe-golden: %s\n", moe_last_error());
        return 3;
    }
    int written = 0, same = 0, refused = 0, rc = 0, n = 0;
    for (int i = 0; i < o->table->n; i++) {
        const moe_golden_case *c = o->table->cases[i];
        if (!gk_selected(o, c)) continue;
        n++;
        char target[4096];
        regen_t g;
        moe_golden_set_init(&g.in), moe_golden_set_init(&g.out);
        if (!case_path(o, c, target, sizeof target) || regen(c, work, &g) != MOE_OK) {
            fprintf(o->out, "error    %s: %s\n", c->name, moe_last_error());
            regen_free(&g);
            refused++, rc = rc > 1 ? rc : 1;
            continue;
        }
        if (gk_is_dir(target)) {
            gk_stored s;
            gk_read_case(target, 0, &s);
            changes_t d;
            diff_dirs(target, g.dir, &d);
            if (s.status != GK_OK) {
                fprintf(o->out, "refused  %s: the stored case is %s (%s); moe-golden update rewrites it\n", c->name,
                        gk_status_name(s.status), s.reason);
                refused++, rc = 3;
            } else if (d.n) {
                fprintf(o->out, "refused  %s: exists and differs from the current reference; moe-golden update "
                                "rewrites it\n", c->name);
                refused++, rc = rc > 1 ? rc : 1;
            } else {
                fprintf(o->out, "same     %s\n", c->name);
                same++;
            }
            gk_stored_free(&s);
        } else if (rename(g.dir, target) == 0) {
            g.dir[0] = '\0';
            fprintf(o->out, "written  %s\n", c->name);
            written++;
        } else {
            fprintf(o->out, "error    %s: cannot move the new case into %s\n", c->name, target);
            refused++, rc = 3;
        }
        regen_free(&g);
    }
    gk_rmtree(work);
    fprintf(o->out, "%d golden cases: %d written, %d already identical, %d refused\n", n, written, same, refused);
    return rc;
}

/* ---- backends ------------------------------------------------------------------------------------ */

typedef struct {
    const char *name, *verdict, *cls, *tol;
    char reason[GK_REASON];
    int has_metrics;
    moe_cmp_metrics m;
} bres_t;

static void run_backend(const moe_golden_case *c, const moe_golden_set *in, const moe_golden_set *want, bres_t *b)
{
    const moe_ops *ops = NULL;
    const char *why = NULL;
    b->cls = b->tol = "";
    b->has_metrics = 0;
    b->reason[0] = '\0';
    if (moe_backend_lookup(b->name, &ops, &why) != MOE_OK) {
        b->verdict = "skipped";
        snprintf(b->reason, sizeof b->reason, "%s", why ? why : moe_last_error());
        return;
    }
    const moe_tolerance_row *row = moe_tolerance_find(moe_golden_tolerance_stage(c), b->name, c->scheme);
    if (!row) {
        b->verdict = "error";
        snprintf(b->reason, sizeof b->reason, "%s", moe_last_error());
        return;
    }
    b->cls = moe_exact_class_name(row->cls), b->tol = row->id;
    b->verdict = "error";
    if (row->cls == MOE_CLASS_BOUNDED && !strcmp(row->stage, "e2e/any")) {
        /* a stage-wise end-to-end row (combos/tolerance.c): there is no
         * end-to-end bound to hold the stored output to; this backend's
         * stages are held to their own rows by the stage cases */
        b->verdict = "skipped";
        snprintf(b->reason, sizeof b->reason, "row %s judges the forward stage by stage (the sweep's replay); "
                 "the stage cases check %s's stages", row->id, b->name);
        return;
    }
    if (row->cls == MOE_CLASS_BOUNDED && !c->compare_bounded) { /* never passed without the bound */
        snprintf(b->reason, sizeof b->reason, "tolerance row %s is BOUNDED and case %s has no bound for %s", row->id,
                 c->name, moe_golden_tolerance_stage(c));
        return;
    }
    if (row->cls == MOE_CLASS_SET && !c->compare_set) {
        snprintf(b->reason, sizeof b->reason, "tolerance row %s is SET and case %s defines no set comparison", row->id,
                 c->name);
        return;
    }
    if (gk_need(ops, c->kind) != MOE_OK) {
        b->verdict = "skipped";
        snprintf(b->reason, sizeof b->reason, "%s", moe_last_error());
        return;
    }
    moe_golden_set got;
    moe_golden_set_init(&got);
    moe_status st = c->run(c, ops, in, &got);
    if (st != MOE_OK) {
        b->verdict = st == MOE_ERR_UNSUPPORTED ? "skipped" : "error";
        snprintf(b->reason, sizeof b->reason, "%s", moe_last_error());
        moe_golden_set_free(&got);
        return;
    }
    moe_cmp_init(&b->m);
    if (row->cls == MOE_CLASS_SET) st = c->compare_set(c, &got, want, &b->m);
    if (row->cls == MOE_CLASS_BOUNDED) st = c->compare_bounded(c, in, &got, want, &b->m);
    for (int i = 0; st == MOE_OK && row->cls == MOE_CLASS_EXACT && i < want->n; i++) {
        const moe_tensor *g = moe_golden_set_find(&got, want->name[i]);
        st = g ? moe_compare_exact(g, &want->t[i], &b->m)
               : moe_fail(MOE_ERR_SHAPE, "output %s: the backend did not produce it", want->name[i]);
    }
    if (st == MOE_OK && got.n != want->n)
        st = moe_fail(MOE_ERR_SHAPE, "the backend produced %d outputs, the golden has %d", got.n, want->n);
    if (st != MOE_OK) {
        snprintf(b->reason, sizeof b->reason, "%s", moe_last_error());
    } else {
        b->has_metrics = 1;
        b->verdict = moe_cmp_pass(&b->m, row->cls) ? "pass" : "fail";
        if (!strcmp(b->verdict, "fail"))
            snprintf(b->reason, sizeof b->reason, "%lld of %lld elements differ (%lld NaN/Inf class)",
                     (long long)b->m.mismatches, (long long)b->m.n, (long long)b->m.class_mismatches);
    }
    moe_golden_set_free(&got);
}

static int is_stale(const gk_opts *o, const char *name, char *path, size_t n);

/* ---- verify ------------------------------------------------------------------------------------------ */

static cJSON *files_json(const gk_stored *s, const changes_t *d)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < s->nfiles; i++) {
        const gk_file *f = &s->files[i];
        const char *status = gk_status_name(f->status), *reason = f->reason;
        for (int k = 0; d && k < d->n && f->status == GK_OK; k++)
            if (!strcmp(d->ch[k].file, f->name)) status = "changed", reason = "regenerates to different bytes";
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(a, o)) {
            cJSON_Delete(o);
            break;
        }
        gk_json_str(o, "name", f->name);
        gk_json_str(o, "status", status);
        if (*reason) gk_json_str(o, "reason", reason);
    }
    return a;
}

static cJSON *backend_json(const bres_t *b)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    gk_json_str(o, "name", b->name);
    gk_json_str(o, "verdict", b->verdict);
    if (*b->cls) gk_json_str(o, "class", b->cls);
    if (*b->tol) gk_json_str(o, "tolerance", b->tol);
    gk_json_str(o, "reason", b->reason);
    if (b->has_metrics) gk_json_add(o, "metrics", gk_metrics_json(&b->m));
    return o;
}

int gk_verify(const gk_opts *o)
{
    char work[4096];
    if (make_work(tmp_root(), work, sizeof work) != MOE_OK) {
        fprintf(o->err, "moe-golden: %s\n", moe_last_error());
        return 3;
    }
    cJSON *doc = cJSON_CreateObject(), *cases = cJSON_CreateArray();
    if (!doc || !cases) {
        cJSON_Delete(doc), cJSON_Delete(cases);
        fprintf(o->err, "moe-golden: no memory\n");
        return 3;
    }
    gk_json_str(doc, "type", "golden");
    gk_json_str(doc, "dir", o->dir);
    gk_json_add(doc, "cases", cases);
    int counts[4] = {0}, failed = 0, n = 0, bad_backend = 0;
    int bpass[GK_MAX_BACKENDS] = {0}, bfail[GK_MAX_BACKENDS] = {0}, bskip[GK_MAX_BACKENDS] = {0};
    char bskip_why[GK_MAX_BACKENDS][GK_REASON];
    memset(bskip_why, 0, sizeof bskip_why);
    for (int i = 0; i < o->table->n; i++) {
        const moe_golden_case *c = o->table->cases[i];
        if (!gk_selected(o, c)) continue;
        n++;
        char path[4096], reason[4 * GK_REASON] = "";
        gk_stored s;
        regen_t g;
        changes_t d = {0};
        moe_golden_set_init(&g.in), moe_golden_set_init(&g.out);
        g.dir[0] = '\0';
        gk_status status;
        if (!case_path(o, c, path, sizeof path)) {
            memset(&s, 0, sizeof s);
            s.status = GK_MISSING;
            snprintf(s.reason, sizeof s.reason, "path too long");
        } else {
            gk_read_case(path, 1, &s);
        }
        status = s.status;
        snprintf(reason, sizeof reason, "%s", s.reason);
        if (status == GK_OK) {
            if (regen(c, work, &g) != MOE_OK) {
                status = GK_CHANGED;
                snprintf(reason, sizeof reason, "the current reference cannot regenerate it: %s", moe_last_error());
            } else {
                diff_dirs(path, g.dir, &d);
                if (d.n) status = GK_CHANGED, changes_text(&d, reason, sizeof reason);
            }
        }
        counts[status]++;
        int case_failed = status != GK_OK;
        cJSON *cj = cJSON_CreateObject(), *bj = cJSON_CreateArray();
        if (cj && cJSON_AddItemToArray(cases, cj)) {
            gk_json_str(cj, "case", c->name);
            gk_json_str(cj, "status", gk_status_name(status));
            if (*reason) gk_json_str(cj, "reason", reason);
            gk_json_add(cj, "files", files_json(&s, &d));
        } else {
            cJSON_Delete(cj);
            cj = NULL;
        }
        char line[2048];
        size_t l = (size_t)snprintf(line, sizeof line, "%-8s %s", gk_status_name(status), c->name);
        if (status == GK_CORRUPT || status == GK_MISSING) {
            snprintf(line + l, sizeof line - l, "  %s", reason);
        } else {
            /* the backends run on the stored inputs (digest-only: the regenerated ones) */
            const moe_golden_set *in = c->digest_only ? &g.in : &s.in, *want = c->digest_only ? &g.out : &s.out;
            int have = !c->digest_only || g.dir[0];
            for (int b = 0; b < o->nbackends; b++) {
                bres_t r;
                r.name = o->backends[b];
                if (have) {
                    run_backend(c, in, want, &r);
                } else {
                    r.verdict = "error", r.cls = r.tol = "", r.has_metrics = 0;
                    snprintf(r.reason, sizeof r.reason, "no regenerated inputs for a digest-only case");
                }
                if (!strcmp(r.verdict, "pass")) bpass[b]++;
                else if (!strcmp(r.verdict, "skipped")) bskip[b]++, snprintf(bskip_why[b], GK_REASON, "%s", r.reason);
                else bfail[b]++, case_failed = 1, bad_backend = 1;
                if (l < sizeof line)
                    l += (size_t)snprintf(line + l, sizeof line - l, "%s%s %s%s%s%s", b ? "; " : "  ", r.name, r.verdict,
                                          strcmp(r.verdict, "pass") ? " (" : "", strcmp(r.verdict, "pass") ? r.reason : "",
                                          strcmp(r.verdict, "pass") ? ")" : "");
                cJSON *one = backend_json(&r);
                if (!one || !cJSON_AddItemToArray(bj, one)) cJSON_Delete(one);
            }
            if (status == GK_CHANGED && l < sizeof line) snprintf(line + l, sizeof line - l, "  [%s]", reason);
        }
        if (cj) gk_json_add(cj, "backends", bj);
        else cJSON_Delete(bj);
        fprintf(o->out, "%s\n", line);
        failed += case_failed;
        gk_stored_free(&s);
        regen_free(&g);
    }
    gk_rmtree(work);
    /* a case directory the table no longer has is a difference too (update removes it) */
    DIR *dd = o->filter ? NULL : opendir(o->dir);
    struct dirent *de;
    while (dd && (de = readdir(dd)) != NULL) {
        char p[4096];
        if (!is_stale(o, de->d_name, p, sizeof p)) continue;
        fprintf(o->out, "%-8s %s  not in the case table (moe-golden update removes it)\n", "stale", de->d_name);
        counts[GK_CHANGED]++, failed++;
        cJSON *cj = cJSON_CreateObject();
        if (cj && cJSON_AddItemToArray(cases, cj)) {
            gk_json_str(cj, "case", de->d_name);
            gk_json_str(cj, "status", "changed");
            gk_json_str(cj, "reason", "not in the case table (stale; moe-golden update removes it)");
        } else {
            cJSON_Delete(cj);
        }
    }
    if (dd) closedir(dd);
    for (int b = 0; b < o->nbackends; b++) {
        if (bpass[b] + bfail[b] + bskip[b] == 0) fprintf(o->out, "backend %s: not run (no intact case)\n", o->backends[b]);
        else if (bpass[b] + bfail[b] == 0) fprintf(o->out, "backend %s: skipped (%s)\n", o->backends[b], bskip_why[b]);
        else fprintf(o->out, "backend %s: %d passed, %d failed or in error, %d skipped\n", o->backends[b], bpass[b],
                     bfail[b], bskip[b]);
    }
    char text[128];
    snprintf(text, sizeof text, "%d golden cases verified, %d failed", n, failed);
    fprintf(o->out, "%s\n", text);
    cJSON *sum = cJSON_CreateObject();
    if (sum) {
        gk_json_num(sum, "ok", counts[GK_OK]);
        gk_json_num(sum, "corrupt", counts[GK_CORRUPT]);
        gk_json_num(sum, "missing", counts[GK_MISSING]);
        gk_json_num(sum, "changed", counts[GK_CHANGED]);
        gk_json_num(sum, "failed", failed);
        gk_json_str(sum, "text", text);
        gk_json_add(doc, "summary", sum);
    }
    int rc = counts[GK_CORRUPT] || counts[GK_MISSING] ? 3 : counts[GK_CHANGED] || bad_backend ? 1 : 0;
    if (o->json && gk_write_json(o->json, doc) != MOE_OK) {
        fprintf(o->err, "moe-golden: %s\n", moe_last_error());
        rc = 3;
    }
    cJSON_Delete(doc);
    return rc;
}

/* ---- update ------------------------------------------------------------------------------------------ */

static void add_changes(cJSON *arr, const char *name, const char *old_dir, const char *new_dir, const changes_t *d)
{
    for (int k = 0; k < d->n; k++) {
        cJSON *e = cJSON_CreateObject();
        if (!e || !cJSON_AddItemToArray(arr, e)) {
            cJSON_Delete(e);
            return;
        }
        gk_json_str(e, "case", name);
        gk_json_str(e, "file", d->ch[k].file);
        gk_json_add(e, "old_sha256", d->ch[k].old_sha[0] ? cJSON_CreateString(d->ch[k].old_sha) : cJSON_CreateNull());
        gk_json_add(e, "new_sha256", d->ch[k].new_sha[0] ? cJSON_CreateString(d->ch[k].new_sha) : cJSON_CreateNull());
        cJSON *m = old_dir ? change_metrics(old_dir, new_dir, &d->ch[k]) : NULL;
        gk_json_add(e, "metrics", m ? m : cJSON_CreateNull());
    }
}

/* A directory of DIR that holds a case (a manifest) but names none of the table. */
static int is_stale(const gk_opts *o, const char *name, char *path, size_t n)
{
    char m[4200];
    if (name[0] == '.' || moe_golden_find(o->table, name)) return 0;
    snprintf(path, n, "%s/%s", o->dir, name);
    snprintf(m, sizeof m, "%s/MANIFEST.sha256", path);
    return gk_is_dir(path) && access(m, F_OK) == 0;
}

static int remove_stale(const gk_opts *o, cJSON *arr)
{
    DIR *dd = opendir(o->dir);
    struct dirent *e;
    int removed = 0;
    while (dd && (e = readdir(dd)) != NULL) {
        char p[4096];
        if (!is_stale(o, e->d_name, p, sizeof p)) continue;
        changes_t d;
        diff_dirs(p, "/nonexistent", &d);
        if (gk_rmtree(p) == MOE_OK) {
            add_changes(arr, e->d_name, NULL, NULL, &d);
            fprintf(o->out, "removed  %s (no longer in the case table)\n", e->d_name);
            removed++;
        } else {
            fprintf(o->err, "moe-golden: %s\n", moe_last_error());
        }
    }
    if (dd) closedir(dd);
    return removed;
}

int gk_update(const gk_opts *o)
{
    char work[4096];
    if (!gk_is_dir(o->dir) && mkdir(o->dir, 0777) != 0) {
        fprintf(o->err, "moe-golden: %s: cannot create the golden directory\n", o->dir);
        return 3;
    }
    if (make_work(o->dir, work, sizeof work) != MOE_OK) {
        fprintf(o->err, "moe-golden: %s\n", moe_last_error());
        return 3;
    }
    cJSON *doc = cJSON_CreateObject(), *arr = cJSON_CreateArray();
    if (!doc || !arr) {
        cJSON_Delete(doc), cJSON_Delete(arr);
        fprintf(o->err, "moe-golden: no memory\n");
        return 3;
    }
    gk_json_str(doc, "type", "golden-diff");
    gk_json_str(doc, "dir", o->dir);
    gk_json_add(doc, "changes", arr);
    int updated = 0, created = 0, same = 0, errors = 0, n = 0;
    for (int i = 0; i < o->table->n; i++) {
        const moe_golden_case *c = o->table->cases[i];
        if (!gk_selected(o, c)) continue;
        n++;
        char target[4096], old[4200];
        regen_t g;
        moe_golden_set_init(&g.in), moe_golden_set_init(&g.out);
        if (!case_path(o, c, target, sizeof target) || regen(c, work, &g) != MOE_OK) {
            fprintf(o->out, "error    %s: %s\n", c->name, moe_last_error());
            regen_free(&g);
            errors++;
            continue;
        }
        int exists = gk_is_dir(target);
        gk_stored s;
        gk_read_case(target, 0, &s);
        changes_t d;
        diff_dirs(target, g.dir, &d);
        if (exists && s.status == GK_OK && d.n == 0) {
            same++;
        } else {
            /* the old directory steps aside, the new one moves in, the old one goes */
            snprintf(old, sizeof old, "%s/old", work);
            int ok = !exists || (mkdir(old, 0777) == 0 && rename(target, old) == 0);
            if (ok && rename(g.dir, target) == 0) {
                g.dir[0] = '\0';
                add_changes(arr, c->name, exists ? old : NULL, target, &d);
                if (!exists || s.status == GK_OK) fprintf(o->out, "%-8s %s\n", exists ? "updated" : "created", c->name);
                else fprintf(o->out, "updated  %s (was %s: %s)\n", c->name, gk_status_name(s.status), s.reason);
                if (exists) updated++;
                else created++;
            } else {
                if (exists && !gk_is_dir(target)) rename(old, target); /* put it back */
                fprintf(o->out, "error    %s: cannot replace %s\n", c->name, target);
                errors++;
            }
            if (exists) gk_rmtree(old);
        }
        gk_stored_free(&s);
        regen_free(&g);
    }
    int removed = o->filter ? 0 : remove_stale(o, arr);
    gk_rmtree(work);
    int rc = errors ? 3 : 0;
    if (gk_write_json(o->diff, doc) != MOE_OK) {
        fprintf(o->err, "moe-golden: %s\n", moe_last_error());
        rc = 3;
    }
    cJSON_Delete(doc);
    fprintf(o->out, "%d golden cases: %d updated, %d created, %d unchanged, %d removed, %d errors; diff report %s\n", n,
            updated, created, same, removed, errors, o->diff);
    return rc;
}
