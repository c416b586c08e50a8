/* A golden case on disk (include/moe/golden.h): case.json through cJSON,
 * tensors through include/moe/npy.h, MANIFEST.sha256 (and DIGESTS.sha256
 * for digest-only cases) through OpenSSL's EVP SHA-256. Reading checks the
 * manifest before anything else and names every missing, truncated or
 * corrupt file with the reason; nothing is skipped. */
#include <dirent.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "golden_internal.h"
#include "moe/npy.h"

static const char *const STATUS_NAMES[] = {"ok", "changed", "corrupt", "missing"};
const char *gk_status_name(gk_status s) { return STATUS_NAMES[s]; }

/* ---- files and directories --------------------------------------------------------- */

int gk_is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int join(char *out, size_t n, const char *dir, const char *file)
{
    int w = snprintf(out, n, "%s/%s", dir, file);
    return w > 0 && (size_t)w < n;
}

moe_status gk_sha256_file(const char *path, char hex[65], long long *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return moe_fail(MOE_ERR_IO, "%s: cannot open (%s)", path, strerror(errno));
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(ctx);
        fclose(f);
        return moe_fail(MOE_ERR_INTERNAL, "%s: OpenSSL SHA-256 unavailable", path);
    }
    unsigned char buf[1 << 16], md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    long long total = 0;
    size_t got;
    int ok = 1;
    while (ok && (got = fread(buf, 1, sizeof buf, f)) > 0) {
        ok = EVP_DigestUpdate(ctx, buf, got) == 1;
        total += (long long)got;
    }
    ok = ok && !ferror(f) && EVP_DigestFinal_ex(ctx, md, &mdlen) == 1 && mdlen == 32;
    EVP_MD_CTX_free(ctx);
    fclose(f);
    if (!ok) return moe_fail(MOE_ERR_IO, "%s: read or hash failed", path);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
    if (size) *size = total;
    return MOE_OK;
}

moe_status gk_rmtree(const char *path)
{
    DIR *d = opendir(path);
    if (!d) return errno == ENOENT ? MOE_OK : moe_fail(MOE_ERR_IO, "%s: cannot open (%s)", path, strerror(errno));
    struct dirent *e;
    char p[4096];
    moe_status st = MOE_OK;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (!join(p, sizeof p, path, e->d_name)) {
            st = moe_fail(MOE_ERR_IO, "%s: path too long", path);
            continue;
        }
        if (gk_is_dir(p)) {
            st = moe_fail(MOE_ERR_IO, "%s: holds a directory (%s); a case directory holds files only", path, e->d_name);
            continue;
        }
        if (unlink(p) != 0) st = moe_fail(MOE_ERR_IO, "%s: cannot remove (%s)", p, strerror(errno));
    }
    closedir(d);
    if (st == MOE_OK && rmdir(path) != 0) st = moe_fail(MOE_ERR_IO, "%s: cannot remove (%s)", path, strerror(errno));
    return st;
}

moe_status gk_mkdtemp(const char *parent, const char *stem, char *out, size_t n)
{
    int w = snprintf(out, n, "%s/.%s.XXXXXX", parent, stem);
    if (w <= 0 || (size_t)w >= n) return moe_fail(MOE_ERR_IO, "%s: path too long", parent);
    if (!mkdtemp(out)) return moe_fail(MOE_ERR_IO, "%s: cannot create a temporary directory (%s)", parent, strerror(errno));
    return MOE_OK;
}

/* ---- manifests --------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static int valid_file_name(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n < 96 && s[0] != '.' && !strchr(s, '/') && !strchr(s, '\\');
}

int gk_manifest_read(const char *dir, const char *file, gk_manifest *m, int *bad_line)
{
    char path[4096], line[512];
    memset(m, 0, sizeof *m);
    *bad_line = 0;
    if (!join(path, sizeof path, dir, file)) return -1;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int ln = 0, ok = 1;
    while (ok && fgets(line, sizeof line, f)) {
        ln++;
        size_t n = strlen(line);
        if (n == 0 || line[n - 1] != '\n') { ok = 0; break; } /* over-long or unterminated */
        line[--n] = '\0';
        ok = n > 66 && line[64] == ' ' && line[65] == ' ' && valid_file_name(line + 66) && m->n < GK_MAX_FILES;
        for (int i = 0; ok && i < 64; i++) ok = (line[i] >= '0' && line[i] <= '9') || (line[i] >= 'a' && line[i] <= 'f');
        for (int i = 0; ok && i < m->n; i++) ok = strcmp(m->name[i], line + 66) != 0; /* listed once */
        if (ok) {
            memcpy(m->sha[m->n], line, 64);
            m->sha[m->n][64] = '\0';
            memcpy(m->name[m->n], line + 66, n - 66 + 1); /* valid_file_name: shorter than 96 */
            m->n++;
        }
    }
    fclose(f);
    if (!ok) {
        *bad_line = ln;
        return -1;
    }
    return 1;
}

const char *gk_manifest_sha(const gk_manifest *m, const char *name)
{
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->name[i], name)) return m->sha[i];
    return NULL;
}

/* Writes `lines` (sorted "<hex>  <name>") to dir/file through a temporary file. */
static moe_status write_text(const char *dir, const char *file, const char *text)
{
    char path[4096], tmp[4200];
    if (!join(path, sizeof path, dir, file)) return moe_fail(MOE_ERR_IO, "%s: path too long", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return moe_fail(MOE_ERR_IO, "%s: cannot open for writing (%s)", tmp, strerror(errno));
    int ok = fputs(text, f) >= 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        return moe_fail(MOE_ERR_IO, "%s: write failed", path);
    }
    return MOE_OK;
}

/* The sha256sum text of the listed files of dir, sorted by name. */
static moe_status manifest_text(const char *dir, char **names, int n, char **text)
{
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    size_t cap = (size_t)n * 170 + 1, len = 0;
    char *t = malloc(cap), path[4096], hex[65];
    if (!t) return moe_fail(MOE_ERR_NOMEM, "manifest: no memory");
    t[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (!join(path, sizeof path, dir, names[i])) {
            free(t);
            return moe_fail(MOE_ERR_IO, "%s: path too long", dir);
        }
        moe_status st = gk_sha256_file(path, hex, NULL);
        if (st != MOE_OK) {
            free(t);
            return st;
        }
        len += (size_t)snprintf(t + len, cap - len, "%s  %s\n", hex, names[i]);
    }
    *text = t;
    return MOE_OK;
}

/* ---- writing ---------------------------------------------------------------------------- */

static cJSON *shape_json(const moe_tensor *t)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < t->ndim; i++) {
        cJSON *v = cJSON_CreateNumber((double)t->shape[i]);
        if (!v || !cJSON_AddItemToArray(a, v)) {
            cJSON_Delete(v);
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

/* Writes each tensor of set as <prefix><name>.npy (digest-only: writes it,
 * hashes it into *digests, removes it) and adds its record to arr. */
static moe_status write_tensors(const char *dir, const moe_golden_case *c, const moe_golden_set *s, const char *prefix,
                                cJSON *arr, char **names, int *nn, char *digests, size_t dcap)
{
    for (int i = 0; i < s->n; i++) {
        char file[96], path[4096], hex[65];
        long long size = 0;
        snprintf(file, sizeof file, "%s%s.npy", prefix, s->name[i]);
        if (!join(path, sizeof path, dir, file)) return moe_fail(MOE_ERR_IO, "%s: path too long", dir);
        moe_status st = moe_npy_write(path, &s->t[i]);
        if (st == MOE_OK) st = gk_sha256_file(path, hex, &size);
        if (st != MOE_OK) return st;
        int side = moe_npy_needs_sidecar(s->t[i].dtype);
        if (c->digest_only) {
            char sp[4200], sh[65];
            snprintf(sp, sizeof sp, "%s.json", path);
            if (side && (st = gk_sha256_file(sp, sh, NULL)) != MOE_OK) return st;
            size_t l = strlen(digests);
            snprintf(digests + l, dcap - l, "%s  %s\n", hex, file);
            if (side) {
                l = strlen(digests);
                snprintf(digests + l, dcap - l, "%s  %s.json\n", sh, file);
            }
            remove(path);
            if (side) remove(sp);
        } else {
            if (*nn + 2 > GK_MAX_FILES) return moe_fail(MOE_ERR_INTERNAL, "case %s: too many files", c->name);
            names[(*nn)++] = strdup(file);
            if (side) {
                char sf[112];
                snprintf(sf, sizeof sf, "%s.json", file);
                names[(*nn)++] = strdup(sf);
            }
            if (!names[*nn - 1] || (side && !names[*nn - 2])) return moe_fail(MOE_ERR_NOMEM, "case %s: no memory", c->name);
        }
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(arr, o)) {
            cJSON_Delete(o);
            return moe_fail(MOE_ERR_NOMEM, "case.json: no memory");
        }
        st = gk_json_str(o, "tensor", s->name[i]);
        if (st == MOE_OK) st = gk_json_str(o, "file", file);
        if (st == MOE_OK) st = gk_json_str(o, "dtype", moe_dtype_get(s->t[i].dtype)->name);
        if (st == MOE_OK) st = gk_json_add(o, "shape", shape_json(&s->t[i]));
        if (st == MOE_OK) st = gk_json_num(o, "bytes", (double)size);
        if (st == MOE_OK) st = gk_json_add(o, "stored", cJSON_CreateBool(!c->digest_only));
        if (st != MOE_OK) return st;
    }
    return MOE_OK;
}

static cJSON *case_json_head(const moe_golden_case *c, moe_status *st)
{
    cJSON *j = cJSON_CreateObject(), *dims = cJSON_CreateObject(), *pol = cJSON_CreateObject();
    if (!j || !dims || !pol) {
        cJSON_Delete(j), cJSON_Delete(dims), cJSON_Delete(pol);
        *st = moe_fail(MOE_ERR_NOMEM, "case.json: no memory");
        return NULL;
    }
    *st = gk_json_num(j, "format", MOE_GOLDEN_FORMAT);
    if (*st == MOE_OK) *st = gk_json_str(j, "case", c->name);
    if (*st == MOE_OK) *st = gk_json_str(j, "kind", c->kind);
    if (*st == MOE_OK) *st = gk_json_str(j, "scheme", c->scheme);
    if (*st == MOE_OK) *st = gk_json_num(j, "seed", (double)c->seed);
    if (*st == MOE_OK) *st = gk_json_num(j, "reference_version", MOE_GOLDEN_REF_VERSION);
    if (*st == MOE_OK) *st = gk_json_num(j, "ops_abi", MOE_OPS_ABI_VERSION);
    if (*st == MOE_OK) *st = gk_json_str(j, "storage", c->digest_only ? "digest-only" : "full");
    if (*st == MOE_OK) *st = gk_json_str(j, "note", c->note ? c->note : "");
    static const char *const DN[6] = {"M", "E", "k", "H", "I", "R"};
    const int64_t dv[6] = {c->dims.M, c->dims.E, c->dims.k, c->dims.H, c->dims.I, c->dims.R};
    for (int i = 0; i < 6 && *st == MOE_OK; i++)
        if (dv[i]) *st = gk_json_num(dims, DN[i], (double)dv[i]);
    if (*st == MOE_OK && c->describe) *st = c->describe(c, pol);
    if (*st == MOE_OK) *st = gk_json_add(j, "dims", dims);
    else cJSON_Delete(dims);
    if (*st == MOE_OK) *st = gk_json_add(j, "policy", pol);
    else cJSON_Delete(pol);
    if (*st != MOE_OK) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

moe_status gk_write_case(const char *path, const moe_golden_case *c, const moe_golden_set *in, const moe_golden_set *out)
{
    if (mkdir(path, 0777) != 0) return moe_fail(MOE_ERR_IO, "%s: cannot create (%s)", path, strerror(errno));
    moe_status st;
    cJSON *j = case_json_head(c, &st), *ins = cJSON_CreateArray(), *outs = cJSON_CreateArray();
    char *names[GK_MAX_FILES + 2];
    int nn = 0;
    size_t dcap = 200 * GK_MAX_FILES;
    char *digests = calloc(1, dcap), *text = NULL;
    if (st == MOE_OK && (!ins || !outs || !digests)) st = moe_fail(MOE_ERR_NOMEM, "case %s: no memory", c->name);
    if (st == MOE_OK) st = write_tensors(path, c, in, "in_", ins, names, &nn, digests, dcap);
    if (st == MOE_OK) st = write_tensors(path, c, out, "out_", outs, names, &nn, digests, dcap);
    if (st == MOE_OK) st = gk_json_add(j, "inputs", ins), ins = NULL;
    if (st == MOE_OK) st = gk_json_add(j, "outputs", outs), outs = NULL;
    char *js = st == MOE_OK ? cJSON_Print(j) : NULL;
    if (st == MOE_OK && !js) st = moe_fail(MOE_ERR_NOMEM, "case.json: no memory");
    if (st == MOE_OK) {
        size_t l = strlen(js);
        char *jl = realloc(js, l + 2); /* end the file with a newline */
        if (!jl) st = moe_fail(MOE_ERR_NOMEM, "case.json: no memory");
        else js = jl, js[l] = '\n', js[l + 1] = '\0';
    }
    if (st == MOE_OK) st = write_text(path, "case.json", js);
    if (st == MOE_OK) names[nn++] = strdup("case.json");
    if (st == MOE_OK && c->digest_only) {
        st = write_text(path, "DIGESTS.sha256", digests);
        if (st == MOE_OK) names[nn++] = strdup("DIGESTS.sha256");
    }
    for (int i = 0; st == MOE_OK && i < nn; i++)
        if (!names[i]) st = moe_fail(MOE_ERR_NOMEM, "case %s: no memory", c->name);
    if (st == MOE_OK) st = manifest_text(path, names, nn, &text);
    if (st == MOE_OK) st = write_text(path, "MANIFEST.sha256", text);
    for (int i = 0; i < nn; i++) free(names[i]);
    free(text), free(js), free(digests);
    cJSON_Delete(j), cJSON_Delete(ins), cJSON_Delete(outs);
    return st;
}

/* ---- reading ------------------------------------------------------------------------------ */

static void note(gk_stored *s, gk_file *f, gk_status st, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void note(gk_stored *s, gk_file *f, gk_status st, const char *fmt, ...)
{
    char msg[GK_REASON];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (f) {
        if (f->status == GK_OK) {
            f->status = st;
            snprintf(f->reason, sizeof f->reason, "%s", msg);
        }
    }
    /* missing outranks corrupt; the first problem of the worst kind is the reason */
    if (st > s->status) {
        s->status = st;
        if (f) snprintf(s->reason, sizeof s->reason, "%.90s: %.220s", f->name, msg);
        else snprintf(s->reason, sizeof s->reason, "%s", msg);
    }
}

static gk_file *add_file(gk_stored *s, const char *name)
{
    for (int i = 0; i < s->nfiles; i++)
        if (!strcmp(s->files[i].name, name)) return &s->files[i];
    if (s->nfiles >= GK_MAX_FILES) return NULL;
    gk_file *f = &s->files[s->nfiles++];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    return f;
}

/* case.json's record of a tensor file: its byte count, or -1 */
static long long recorded_bytes(const cJSON *j, const char *file)
{
    const char *arrs[2] = {"inputs", "outputs"};
    for (int a = 0; a < 2 && j; a++) {
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j, arrs[a]))
        {
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(e, "file"), *b = cJSON_GetObjectItemCaseSensitive(e, "bytes");
            if (cJSON_IsString(fn) && !strcmp(fn->valuestring, file) && cJSON_IsNumber(b)) return (long long)b->valuedouble;
        }
    }
    return -1;
}

static void check_listed_tensors(gk_stored *s, const gk_manifest *m, int digest_only)
{
    const char *arrs[2] = {"inputs", "outputs"};
    for (int a = 0; a < 2; a++) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(s->json, arrs[a]), *e;
        if (!cJSON_IsArray(arr)) {
            note(s, add_file(s, "case.json"), GK_CORRUPT, "no \"%s\" array", arrs[a]);
            continue;
        }
        cJSON_ArrayForEach(e, arr)
        {
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(e, "file");
            if (!cJSON_IsString(fn) || !valid_file_name(fn->valuestring)) {
                note(s, add_file(s, "case.json"), GK_CORRUPT, "a tensor record of \"%s\" lacks a valid \"file\"", arrs[a]);
                continue;
            }
            if (!digest_only && !gk_manifest_sha(m, fn->valuestring))
                note(s, add_file(s, fn->valuestring), GK_CORRUPT, "listed in case.json, absent from MANIFEST.sha256");
        }
    }
}

/* MOE_ERR_NOMEM when memory ran out (also noted as the case's reason, so a
 * caller that ignores the status never takes the case as intact). */
static moe_status load_tensors(gk_stored *s, const char *path)
{
    const char *arrs[2] = {"inputs", "outputs"};
    for (int a = 0; a < 2 && s->status == GK_OK; a++) {
        moe_golden_set *set = a ? &s->out : &s->in;
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(s->json, arrs[a]))
        {
            const char *file = cJSON_GetObjectItemCaseSensitive(e, "file")->valuestring;
            const cJSON *tn = cJSON_GetObjectItemCaseSensitive(e, "tensor");
            gk_file *f = add_file(s, file);
            char p[4096];
            moe_tensor t;
            if (!cJSON_IsString(tn) || !join(p, sizeof p, path, file)) {
                note(s, f, GK_CORRUPT, "case.json record has no tensor name");
                return MOE_OK;
            }
            moe_status rs = moe_npy_read(p, &t);
            if (rs != MOE_OK) {
                note(s, f, GK_CORRUPT, "%s: %s", rs == MOE_ERR_NOMEM ? "not read" : "unreadable", moe_last_error());
                return rs == MOE_ERR_NOMEM ? rs : MOE_OK;
            }
            moe_tensor *dst;
            if ((rs = moe_golden_set_add(set, tn->valuestring, t.dtype, t.ndim, t.shape, &dst)) != MOE_OK) {
                note(s, f, GK_CORRUPT, "%s", moe_last_error());
                moe_tensor_free(&t);
                return rs == MOE_ERR_NOMEM ? rs : MOE_OK;
            }
            if (t.nbytes) memcpy(dst->data, t.data, t.nbytes);
            moe_tensor_free(&t);
            const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
            if (!cJSON_IsString(dt) || strcmp(dt->valuestring, moe_dtype_get(dst->dtype)->name))
                note(s, f, GK_CORRUPT, "reads as %s, case.json says %s", moe_dtype_get(dst->dtype)->name,
                     cJSON_IsString(dt) ? dt->valuestring : "nothing");
        }
    }
    return MOE_OK;
}

moe_status gk_read_case(const char *path, int load, gk_stored *s)
{
    memset(s, 0, sizeof *s);
    moe_golden_set_init(&s->in);
    moe_golden_set_init(&s->out);
    if (!gk_is_dir(path)) {
        note(s, NULL, GK_MISSING, "case directory %s missing", path);
        return MOE_OK;
    }
    gk_manifest m;
    int bad = 0, r = gk_manifest_read(path, "MANIFEST.sha256", &m, &bad);
    if (r == 0) {
        note(s, add_file(s, "MANIFEST.sha256"), GK_MISSING, "missing");
        return MOE_OK;
    }
    if (r < 0) {
        note(s, add_file(s, "MANIFEST.sha256"), GK_CORRUPT, "line %d: malformed (want '<64 hex digits>  <file>')", bad);
        return MOE_OK;
    }
    gk_file *mf = add_file(s, "MANIFEST.sha256");
    char mp[4096];
    if (join(mp, sizeof mp, path, "MANIFEST.sha256")) gk_sha256_file(mp, mf->sha, NULL);
    long long sizes[GK_MAX_FILES];
    for (int i = 0; i < m.n; i++) {
        char p[4096];
        gk_file *f = add_file(s, m.name[i]);
        sizes[i] = -1;
        if (!f) { /* content, not a program error (fuzz finding): a corrupt manifest may list any count */
            note(s, mf, GK_CORRUPT, "lists more than the %d files a case holds", GK_MAX_FILES - 1);
            return MOE_OK;
        }
        if (!join(p, sizeof p, path, m.name[i]) || access(p, F_OK) != 0) {
            note(s, f, GK_MISSING, "missing (listed in MANIFEST.sha256)");
            continue;
        }
        if (gk_sha256_file(p, f->sha, &sizes[i]) != MOE_OK) {
            note(s, f, GK_CORRUPT, "unreadable: %s", moe_last_error());
            continue;
        }
        if (strcmp(f->sha, m.sha[i])) f->status = GK_CHANGED; /* refined below */
    }
    /* files the manifest does not know */
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, "MANIFEST.sha256")) continue;
        if (!gk_manifest_sha(&m, e->d_name)) note(s, add_file(s, e->d_name), GK_CORRUPT, "not listed in MANIFEST.sha256");
    }
    if (d) closedir(d);
    /* case.json, when intact, tells the tensor sizes (truncation) */
    gk_file *cj = add_file(s, "case.json");
    if (!cj) { /* listed and unlisted files filled the table (fuzz finding: a NULL dereference) */
        note(s, NULL, GK_CORRUPT, "more than %d files: case.json not checked", GK_MAX_FILES);
        return MOE_OK;
    }
    if (!gk_manifest_sha(&m, "case.json")) note(s, cj, GK_CORRUPT, "not listed in MANIFEST.sha256");
    if (cj->status == GK_OK) {
        char p[4096];
        join(p, sizeof p, path, "case.json");
        FILE *f = fopen(p, "rb");
        char *buf = NULL;
        long n = -1;
        int nomem = 0;
        if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
            !(nomem = !(buf = malloc((size_t)n + 1))) && fread(buf, 1, (size_t)n, f) == (size_t)n) {
            buf[n] = '\0';
            s->json = cJSON_Parse(buf);
        }
        if (f) fclose(f);
        free(buf);
        if (nomem) {
            note(s, cj, GK_CORRUPT, "not read: %ld bytes not available", n);
            return moe_fail(MOE_ERR_NOMEM, "%s/case.json: %ld bytes not available", path, n);
        }
        const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s->json, "format");
        if (!s->json) note(s, cj, GK_CORRUPT, "does not parse as JSON");
        else if (!cJSON_IsNumber(fmt) || fmt->valuedouble != MOE_GOLDEN_FORMAT)
            note(s, cj, GK_CORRUPT, "\"format\" is not %d", MOE_GOLDEN_FORMAT);
    }
    for (int i = 0; i < m.n; i++) {
        gk_file *f = add_file(s, m.name[i]);
        if (f->status != GK_CHANGED) continue;
        f->status = GK_OK;
        long long want = s->json ? recorded_bytes(s->json, m.name[i]) : -1;
        char p[4096], why[200] = "";
        size_t l = strlen(m.name[i]);
        if (l > 4 && !strcmp(m.name[i] + l - 4, ".npy") && join(p, sizeof p, path, m.name[i])) {
            moe_tensor t;
            if (moe_npy_read(p, &t) != MOE_OK) snprintf(why, sizeof why, "; %s", moe_last_error());
            else moe_tensor_free(&t);
        }
        if (want >= 0 && sizes[i] < want)
            note(s, f, GK_CORRUPT, "truncated: %lld of %lld bytes%s", sizes[i], want, why);
        else if (want >= 0 && sizes[i] > want)
            note(s, f, GK_CORRUPT, "%lld bytes, case.json says %lld%s", sizes[i], want, why);
        else
            note(s, f, GK_CORRUPT, "SHA-256 differs from MANIFEST.sha256%s", why);
    }
    if (!s->json) return MOE_OK;
    const cJSON *stor = cJSON_GetObjectItemCaseSensitive(s->json, "storage");
    int digest_only = cJSON_IsString(stor) && !strcmp(stor->valuestring, "digest-only");
    check_listed_tensors(s, &m, digest_only);
    if (digest_only) {
        gk_manifest dg;
        int b2;
        gk_file *df = add_file(s, "DIGESTS.sha256");
        if (!gk_manifest_sha(&m, "DIGESTS.sha256")) note(s, df, GK_MISSING, "missing (a digest-only case needs it)");
        else if (df->status == GK_OK && gk_manifest_read(path, "DIGESTS.sha256", &dg, &b2) < 0)
            note(s, df, GK_CORRUPT, "line %d: malformed", b2);
    }
    moe_status ls = load && s->status == GK_OK && !digest_only ? load_tensors(s, path) : MOE_OK;
    /* a case that did not load whole hands back no tensors */
    if (s->status != GK_OK) moe_golden_set_free(&s->in), moe_golden_set_free(&s->out);
    return ls;
}

void gk_stored_free(gk_stored *s)
{
    cJSON_Delete(s->json);
    s->json = NULL;
    moe_golden_set_free(&s->in);
    moe_golden_set_free(&s->out);
}
