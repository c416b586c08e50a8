#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/npy.h"

/* ---- a tiny tokenizer shared by the npy header dict and the sidecar ---- */

typedef enum { T_END, T_PUNCT, T_STR, T_INT, T_WORD, T_BAD } tok_kind;

typedef struct {
    const char *p, *end;
    tok_kind kind;
    char punct;
    char text[32];
    int64_t ival;
} lexer;

static void next(lexer *lx)
{
    while (lx->p < lx->end && (*lx->p == ' ' || *lx->p == '\t' || *lx->p == '\n' || *lx->p == '\r'))
        lx->p++;
    lx->text[0] = '\0';
    if (lx->p >= lx->end) {
        lx->kind = T_END;
        return;
    }
    char c = *lx->p;
    if (strchr("{}()[],:", c)) {
        lx->kind = T_PUNCT;
        lx->punct = c;
        lx->p++;
        return;
    }
    if (c == '\'' || c == '"') {
        const char *q = lx->p + 1;
        size_t k = 0;
        while (q < lx->end && *q != c) {
            if (k + 1 >= sizeof lx->text || *q == '\\' || (unsigned char)*q < 0x20) {
                lx->kind = T_BAD;
                return;
            }
            lx->text[k++] = *q++;
        }
        if (q >= lx->end) {
            lx->kind = T_BAD;
            return;
        }
        lx->text[k] = '\0';
        lx->p = q + 1;
        lx->kind = T_STR;
        return;
    }
    if (c >= '0' && c <= '9') {
        int64_t v = 0;
        while (lx->p < lx->end && *lx->p >= '0' && *lx->p <= '9') {
            if (v > ((int64_t)1 << 40)) {
                lx->kind = T_BAD;
                return;
            }
            v = v * 10 + (*lx->p++ - '0');
        }
        lx->ival = v;
        lx->kind = T_INT;
        return;
    }
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) {
        size_t k = 0;
        while (lx->p < lx->end && ((*lx->p >= 'A' && *lx->p <= 'Z') || (*lx->p >= 'a' && *lx->p <= 'z'))) {
            if (k + 1 >= sizeof lx->text) {
                lx->kind = T_BAD;
                return;
            }
            lx->text[k++] = *lx->p++;
        }
        lx->text[k] = '\0';
        lx->kind = T_WORD;
        return;
    }
    lx->kind = T_BAD;
}

static int is_punct(const lexer *lx, char c) { return lx->kind == T_PUNCT && lx->punct == c; }

/* Reads "(a, b,)" or "[a, b]" into shape; open is '(' or '['. */
static moe_status parse_shape(lexer *lx, char open, int *ndim, int64_t *shape, const char *what)
{
    char close = open == '(' ? ')' : ']';
    if (!is_punct(lx, open)) return moe_fail(MOE_ERR_FORMAT, "%s: shape must start with '%c'", what, open);
    next(lx);
    int n = 0;
    while (!is_punct(lx, close)) {
        if (lx->kind != T_INT)
            return moe_fail(MOE_ERR_FORMAT, "%s: shape entries must be non-negative integers below 2^40", what);
        if (n == MOE_MAX_DIMS)
            return moe_fail(MOE_ERR_FORMAT, "%s: shape has more than %d dimensions", what, MOE_MAX_DIMS);
        shape[n++] = lx->ival;
        next(lx);
        if (is_punct(lx, ',')) next(lx);
        else if (!is_punct(lx, close)) return moe_fail(MOE_ERR_FORMAT, "%s: shape is not a list of integers", what);
    }
    next(lx);
    *ndim = n;
    return MOE_OK;
}

typedef struct {
    char descr[32];
    int fortran;
    int ndim;
    int64_t shape[MOE_MAX_DIMS];
} npy_header;

static moe_status parse_header_dict(const char *s, size_t n, npy_header *h)
{
    lexer lx = {s, s + n, T_END, 0, {0}, 0};
    int seen_d = 0, seen_f = 0, seen_s = 0;
    next(&lx);
    if (!is_punct(&lx, '{')) return moe_fail(MOE_ERR_FORMAT, "npy header: not a dict (no '{')");
    next(&lx);
    while (!is_punct(&lx, '}')) {
        if (lx.kind != T_STR) return moe_fail(MOE_ERR_FORMAT, "npy header: expected a quoted key");
        char key[32];
        memcpy(key, lx.text, sizeof key);
        next(&lx);
        if (!is_punct(&lx, ':')) return moe_fail(MOE_ERR_FORMAT, "npy header: expected ':' after '%s'", key);
        next(&lx);
        if (strcmp(key, "descr") == 0 && !seen_d) {
            if (lx.kind != T_STR) return moe_fail(MOE_ERR_FORMAT, "npy header: 'descr' must be a string");
            memcpy(h->descr, lx.text, sizeof h->descr);
            seen_d = 1;
            next(&lx);
        } else if (strcmp(key, "fortran_order") == 0 && !seen_f) {
            if (lx.kind != T_WORD || (strcmp(lx.text, "True") && strcmp(lx.text, "False")))
                return moe_fail(MOE_ERR_FORMAT, "npy header: 'fortran_order' must be True or False");
            h->fortran = strcmp(lx.text, "True") == 0;
            seen_f = 1;
            next(&lx);
        } else if (strcmp(key, "shape") == 0 && !seen_s) {
            moe_status st = parse_shape(&lx, '(', &h->ndim, h->shape, "npy header");
            if (st != MOE_OK) return st;
            seen_s = 1;
        } else {
            return moe_fail(MOE_ERR_FORMAT, "npy header: key '%s' unknown or repeated", key);
        }
        if (is_punct(&lx, ',')) next(&lx);
        else if (!is_punct(&lx, '}')) return moe_fail(MOE_ERR_FORMAT, "npy header: expected ',' or '}'");
    }
    next(&lx);
    if (lx.kind != T_END) return moe_fail(MOE_ERR_FORMAT, "npy header: text after the closing '}'");
    if (!seen_d || !seen_f || !seen_s)
        return moe_fail(MOE_ERR_FORMAT, "npy header: needs 'descr', 'fortran_order' and 'shape'");
    if (h->fortran) return moe_fail(MOE_ERR_FORMAT, "npy header: fortran_order True is not supported");
    return MOE_OK;
}

int moe_npy_needs_sidecar(moe_dtype d)
{
    return d == MOE_BF16 || d == MOE_E4M3 || d == MOE_E5M2 || d == MOE_E2M1 || d == MOE_E8M0 ||
           d == MOE_I4;
}

/* The dtype a descr means without a sidecar. */
static int native_dtype(const char *descr, moe_dtype *d)
{
    for (int i = 0; i < MOE_DTYPE_COUNT; i++) {
        if (moe_npy_needs_sidecar((moe_dtype)i)) continue;
        if (strcmp(moe_dtype_get((moe_dtype)i)->npy_descr, descr) == 0) {
            *d = (moe_dtype)i;
            return 1;
        }
    }
    return 0;
}

static int known_descr(const char *descr)
{
    for (int i = 0; i < MOE_DTYPE_COUNT; i++)
        if (strcmp(moe_dtype_get((moe_dtype)i)->npy_descr, descr) == 0) return 1;
    return 0;
}

moe_status moe_npy_parse(const void *buf, size_t n, const moe_npy_meta *meta, moe_tensor *out)
{
    if (!out) return moe_fail(MOE_ERR_NULL, "out: must not be NULL");
    memset(out, 0, sizeof *out);
    if (!buf && n) return moe_fail(MOE_ERR_NULL, "buf: must not be NULL");
    const uint8_t *b = buf;
    if (n < 10 || memcmp(b, "\x93NUMPY", 6) != 0)
        return moe_fail(MOE_ERR_FORMAT, "npy: bad magic (expected \\x93NUMPY)");
    if (b[6] != 1 || b[7] != 0)
        return moe_fail(MOE_ERR_FORMAT, "npy: version %u.%u unsupported (only 1.0 is read)", b[6], b[7]);
    size_t hlen = (size_t)b[8] | ((size_t)b[9] << 8);
    if (hlen > MOE_NPY_HEADER_MAX)
        return moe_fail(MOE_ERR_FORMAT, "npy: header of %zu bytes exceeds the %d-byte limit", hlen,
                        MOE_NPY_HEADER_MAX);
    if (10 + hlen > n) return moe_fail(MOE_ERR_FORMAT, "npy: file ends inside the header");
    npy_header h;
    memset(&h, 0, sizeof h);
    moe_status s = parse_header_dict((const char *)b + 10, hlen, &h);
    if (s != MOE_OK) return s;
    if (!known_descr(h.descr))
        return moe_fail(MOE_ERR_FORMAT, "npy: descr '%s' unknown (expected one of <f4 <f2 <u2 |u1 |i1 <i4 <i8 |b1)", h.descr);

    moe_dtype dt;
    int ndim;
    int64_t shape[MOE_MAX_DIMS];
    if (meta) {
        const moe_dtype_info *mi = moe_dtype_get(meta->dtype);
        if (!mi) return moe_fail(MOE_ERR_FORMAT, "sidecar: dtype out of range");
        if (strcmp(mi->npy_descr, h.descr) != 0)
            return moe_fail(MOE_ERR_FORMAT, "npy: descr '%s' does not store %s (expected '%s')", h.descr,
                            mi->name, mi->npy_descr);
        if (meta->ndim != h.ndim)
            return moe_fail(MOE_ERR_FORMAT, "npy: rank %d differs from the sidecar's %d", h.ndim, meta->ndim);
        for (int i = 0; i < h.ndim; i++) {
            int64_t want = meta->shape[i];
            if (i == h.ndim - 1 && moe_dtype_is_packed(meta->dtype)) want = (want + 1) / 2;
            if (h.shape[i] != want)
                return moe_fail(MOE_ERR_FORMAT, "npy: stored shape[%d] = %lld, the sidecar implies %lld", i,
                                (long long)h.shape[i], (long long)want);
        }
        dt = meta->dtype;
        ndim = meta->ndim;
        memcpy(shape, meta->shape, sizeof shape);
    } else {
        if (!native_dtype(h.descr, &dt))
            return moe_fail(MOE_ERR_FORMAT, "npy: descr '%s' holds raw bits and needs a sidecar naming its dtype", h.descr);
        ndim = h.ndim;
        memcpy(shape, h.shape, sizeof shape);
    }
    size_t need;
    s = moe_tensor_layout(dt, ndim, shape, &need);
    if (s != MOE_OK) return moe_fail(MOE_ERR_FORMAT, "npy: shape rejected: %s", moe_last_error());
    size_t have = n - 10 - hlen;
    if (have < need)
        return moe_fail(MOE_ERR_FORMAT, "npy: truncated data (%zu bytes, the shape needs %zu)", have, need);
    if (have > need)
        return moe_fail(MOE_ERR_FORMAT, "npy: %zu data bytes, the shape needs %zu (size mismatch)", have, need);
    s = moe_tensor_alloc(out, dt, ndim, shape);
    if (s != MOE_OK) return s;
    if (need) memcpy(out->data, b + 10 + hlen, need);
    return MOE_OK;
}

moe_status moe_npy_meta_parse(const char *json, size_t n, moe_npy_meta *out)
{
    if (!json || !out) return moe_fail(MOE_ERR_NULL, "json, out: must not be NULL");
    memset(out, 0, sizeof *out);
    lexer lx = {json, json + n, T_END, 0, {0}, 0};
    int seen_d = 0, seen_s = 0;
    next(&lx);
    if (!is_punct(&lx, '{')) return moe_fail(MOE_ERR_FORMAT, "sidecar: not a JSON object");
    next(&lx);
    while (!is_punct(&lx, '}')) {
        if (lx.kind != T_STR) return moe_fail(MOE_ERR_FORMAT, "sidecar: expected a quoted key");
        char key[32];
        memcpy(key, lx.text, sizeof key);
        next(&lx);
        if (!is_punct(&lx, ':')) return moe_fail(MOE_ERR_FORMAT, "sidecar: expected ':' after '%s'", key);
        next(&lx);
        if (strcmp(key, "dtype") == 0 && !seen_d) {
            if (lx.kind != T_STR) return moe_fail(MOE_ERR_FORMAT, "sidecar: 'dtype' must be a string");
            if (moe_dtype_from_name(lx.text, &out->dtype) != MOE_OK)
                return moe_fail(MOE_ERR_FORMAT, "sidecar: %s", moe_last_error());
            seen_d = 1;
            next(&lx);
        } else if (strcmp(key, "shape") == 0 && !seen_s) {
            moe_status s = parse_shape(&lx, '[', &out->ndim, out->shape, "sidecar");
            if (s != MOE_OK) return s;
            seen_s = 1;
        } else {
            return moe_fail(MOE_ERR_FORMAT, "sidecar: key '%s' unknown or repeated", key);
        }
        if (is_punct(&lx, ',')) next(&lx);
        else if (!is_punct(&lx, '}')) return moe_fail(MOE_ERR_FORMAT, "sidecar: expected ',' or '}'");
    }
    next(&lx);
    if (lx.kind != T_END) return moe_fail(MOE_ERR_FORMAT, "sidecar: text after the closing '}'");
    if (!seen_d || !seen_s) return moe_fail(MOE_ERR_FORMAT, "sidecar: needs 'dtype' and 'shape'");
    return MOE_OK;
}

#define MOE_NPY_FILE_MAX ((long)1 << 34)

static moe_status slurp(const char *path, char **buf, size_t *n)
{
    *buf = NULL;
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return moe_fail(MOE_ERR_IO, "%s: cannot open for reading", path);
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return moe_fail(MOE_ERR_IO, "%s: cannot seek", path);
    }
    long len = ftell(f);
    if (len < 0 || len > MOE_NPY_FILE_MAX) {
        fclose(f);
        return moe_fail(MOE_ERR_IO, "%s: size unknown or above 16 GiB", path);
    }
    rewind(f);
    char *p = malloc((size_t)len + 1);
    if (!p) {
        fclose(f);
        return moe_fail(MOE_ERR_NOMEM, "%s: %ld bytes not available", path, len);
    }
    size_t got = fread(p, 1, (size_t)len, f);
    fclose(f);
    if (got != (size_t)len) {
        free(p);
        return moe_fail(MOE_ERR_IO, "%s: short read", path);
    }
    p[len] = '\0';
    *buf = p;
    *n = (size_t)len;
    return MOE_OK;
}

static int sidecar_path(const char *path, char *out, size_t n)
{
    int w = snprintf(out, n, "%s.json", path);
    return w > 0 && (size_t)w < n;
}

moe_status moe_npy_read(const char *path, moe_tensor *out)
{
    if (!path || !out) return moe_fail(MOE_ERR_NULL, "path, out: must not be NULL");
    memset(out, 0, sizeof *out);
    char side[4096];
    if (!sidecar_path(path, side, sizeof side)) return moe_fail(MOE_ERR_INVALID_ARG, "path: too long");
    moe_npy_meta meta, *mp = NULL;
    FILE *probe = fopen(side, "rb");
    if (probe) {
        fclose(probe);
        char *js;
        size_t jn;
        moe_status s = slurp(side, &js, &jn);
        if (s != MOE_OK) return s;
        s = moe_npy_meta_parse(js, jn, &meta);
        free(js);
        if (s != MOE_OK) return moe_fail(s, "%s: %s", side, moe_last_error());
        mp = &meta;
    }
    char *buf;
    size_t n;
    moe_status s = slurp(path, &buf, &n);
    if (s != MOE_OK) return s;
    s = moe_npy_parse(buf, n, mp, out);
    free(buf);
    if (s != MOE_OK) return moe_fail(s, "%s: %s", path, moe_last_error());
    return MOE_OK;
}

static moe_status write_all(const char *tmp, const void *a, size_t an, const void *b, size_t bn)
{
    FILE *f = fopen(tmp, "wb");
    if (!f) return moe_fail(MOE_ERR_IO, "%s: cannot open for writing", tmp);
    int ok = fwrite(a, 1, an, f) == an && (bn == 0 || fwrite(b, 1, bn, f) == bn);
    ok = (fclose(f) == 0) && ok;
    if (!ok) {
        remove(tmp);
        return moe_fail(MOE_ERR_IO, "%s: write failed", tmp);
    }
    return MOE_OK;
}

moe_status moe_npy_write(const char *path, const moe_tensor *t)
{
    if (!path) return moe_fail(MOE_ERR_NULL, "path: must not be NULL");
    if (!t) return moe_fail(MOE_ERR_NULL, "t: must not be NULL");
    if (t->device.kind != MOE_DEVICE_HOST)
        return moe_fail(MOE_ERR_INVALID_ARG, "t: must be a host tensor (copy device data first)");
    size_t need;
    moe_status s = moe_tensor_layout(t->dtype, t->ndim, t->shape, &need);
    if (s != MOE_OK) return s;
    if (need && !t->data) return moe_fail(MOE_ERR_NULL, "t: has no data");
    const moe_dtype_info *info = moe_dtype_get(t->dtype);

    char hdr[MOE_NPY_HEADER_MAX + 16], shape[160] = "(", side[256] = "";
    size_t sl = 1;
    for (int i = 0; i < t->ndim; i++) {
        int64_t v = t->shape[i];
        if (i == t->ndim - 1 && moe_dtype_is_packed(t->dtype)) v = (v + 1) / 2;
        sl += (size_t)snprintf(shape + sl, sizeof shape - sl, "%lld%s", (long long)v,
                               t->ndim == 1 ? "," : (i + 1 < t->ndim ? ", " : ""));
    }
    snprintf(shape + sl, sizeof shape - sl, ")");
    int hl = snprintf(hdr + 10, sizeof hdr - 10, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                      info->npy_descr, shape);
    size_t total = 10 + (size_t)hl + 1;
    size_t pad = (64 - total % 64) % 64;
    memset(hdr + 10 + hl, ' ', pad);
    hdr[10 + hl + pad] = '\n';
    size_t hlen = (size_t)hl + pad + 1;
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    hdr[8] = (char)(hlen & 0xFF);
    hdr[9] = (char)(hlen >> 8);

    char tmp[4096], stmp[4096], sfinal[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp ||
        !sidecar_path(path, sfinal, sizeof sfinal) ||
        snprintf(stmp, sizeof stmp, "%s.tmp", sfinal) >= (int)sizeof stmp)
        return moe_fail(MOE_ERR_INVALID_ARG, "path: too long");
    int sidecar = moe_npy_needs_sidecar(t->dtype);
    if (sidecar) {
        size_t k = (size_t)snprintf(side, sizeof side, "{\"dtype\": \"%s\", \"shape\": [", info->name);
        for (int i = 0; i < t->ndim; i++)
            k += (size_t)snprintf(side + k, sizeof side - k, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        snprintf(side + k, sizeof side - k, "]}\n");
        s = write_all(stmp, side, strlen(side), NULL, 0);
        if (s != MOE_OK) return s;
    }
    s = write_all(tmp, hdr, 10 + hlen, t->data, need);
    if (s != MOE_OK) {
        if (sidecar) remove(stmp);
        return s;
    }
    if (rename(tmp, path) != 0) {
        remove(tmp);
        if (sidecar) remove(stmp);
        return moe_fail(MOE_ERR_IO, "%s: cannot rename into place", path);
    }
    if (sidecar) {
        if (rename(stmp, sfinal) != 0) {
            remove(stmp);
            remove(path);
            return moe_fail(MOE_ERR_IO, "%s: cannot rename into place", sfinal);
        }
    } else {
        remove(sfinal); /* a stale sidecar would change how the file reads */
    }
    return MOE_OK;
}
