#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "oracle.h"

enum { SPEC_IEEE, SPEC_FN, SPEC_NONE, SPEC_E8M0, SPEC_INT };

struct oracle_fmt {
    const char *name;
    int spec;
    int nbits, ebits, mbits, bias;
    int has_sign;
    int64_t ilo, ihi; /* integer range */
    /* built on first use: magnitudes of the non-negative finite codes in
     * increasing order, then one virtual code just past the largest */
    int n;
    double *val;
    uint32_t *code;
};

static struct oracle_fmt fmts[] = {
    {"f16", SPEC_IEEE, 16, 5, 10, 15, 1, 0, 0, 0, NULL, NULL},
    {"bf16", SPEC_IEEE, 16, 8, 7, 127, 1, 0, 0, 0, NULL, NULL},
    {"e5m2", SPEC_IEEE, 8, 5, 2, 15, 1, 0, 0, 0, NULL, NULL},
    {"e4m3", SPEC_FN, 8, 4, 3, 7, 1, 0, 0, 0, NULL, NULL},
    {"e2m1", SPEC_NONE, 4, 2, 1, 1, 1, 0, 0, 0, NULL, NULL},
    {"e8m0", SPEC_E8M0, 8, 8, 0, 127, 0, 0, 0, 0, NULL, NULL},
    {"int8", SPEC_INT, 8, 0, 0, 0, 1, -128, 127, 0, NULL, NULL},
    {"int4", SPEC_INT, 4, 0, 0, 0, 1, -8, 7, 0, NULL, NULL},
    {"uint8", SPEC_INT, 8, 0, 0, 0, 0, 0, 255, 0, NULL, NULL},
};

int oracle_bits(const oracle_fmt *f) { return f->nbits; }

/* The value the fields (e, m) would have if the format were unbounded. */
static double field_value(const oracle_fmt *f, uint32_t e, uint32_t m)
{
    if (f->spec == SPEC_E8M0) return ldexp(1.0, (int)e - f->bias);
    if (e == 0) return ldexp((double)m, 1 - f->bias - f->mbits);
    return ldexp((double)((1u << f->mbits) + m), (int)e - f->bias - f->mbits);
}

double oracle_decode(const oracle_fmt *f, uint32_t code, oracle_kind *kind)
{
    *kind = OK_FINITE;
    if (f->spec == SPEC_INT) {
        int64_t v = code;
        if (f->has_sign && (code >> (f->nbits - 1))) v -= (int64_t)1 << f->nbits;
        return (double)v;
    }
    uint32_t mag_bits = f->has_sign ? code & ((1u << (f->nbits - 1)) - 1u) : code;
    int neg = f->has_sign && (code >> (f->nbits - 1));
    uint32_t e = mag_bits >> f->mbits, m = mag_bits & ((1u << f->mbits) - 1u);
    uint32_t etop = (1u << f->ebits) - 1u;
    if (f->spec == SPEC_IEEE && e == etop) {
        *kind = m ? OK_NAN : OK_INF;
        return m ? NAN : (neg ? -INFINITY : INFINITY);
    }
    if (f->spec == SPEC_FN && e == etop && m == (1u << f->mbits) - 1u) {
        *kind = OK_NAN;
        return NAN;
    }
    if (f->spec == SPEC_E8M0 && code == 0xFF) {
        *kind = OK_NAN;
        return NAN;
    }
    double v = field_value(f, e, m);
    return neg ? -v : v;
}

static const double *sort_vals;
static int by_value(const void *a, const void *b)
{
    double x = sort_vals[*(const uint32_t *)a], y = sort_vals[*(const uint32_t *)b];
    return x < y ? -1 : x > y;
}

static void build(struct oracle_fmt *f)
{
    if (f->val || f->spec == SPEC_INT) return;
    uint32_t ncodes = f->has_sign ? 1u << (f->nbits - 1) : 1u << f->nbits;
    double *v = malloc(sizeof(double) * (ncodes + 1));
    uint32_t *idx = malloc(sizeof(uint32_t) * (ncodes + 1));
    double *all = malloc(sizeof(double) * ncodes);
    int n = 0;
    for (uint32_t c = 0; c < ncodes; c++) {
        oracle_kind k;
        all[c] = oracle_decode(f, c, &k);
        if (k == OK_FINITE) idx[n++] = c;
    }
    sort_vals = all;
    qsort(idx, (size_t)n, sizeof *idx, by_value);
    uint32_t *codes = malloc(sizeof(uint32_t) * (ncodes + 1));
    for (int i = 0; i < n; i++) {
        codes[i] = idx[i];
        v[i] = all[idx[i]];
    }
    /* virtual code: the next code after max, valued as if it were finite */
    uint32_t vc = codes[n - 1] + 1u;
    v[n] = field_value(f, vc >> f->mbits, vc & ((1u << f->mbits) - 1u));
    codes[n] = vc;
    f->n = n;
    f->val = v;
    f->code = codes;
    free(idx);
    free(all);
}

const oracle_fmt *oracle_get(const char *name)
{
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        if (strcmp(fmts[i].name, name) == 0) {
            build(&fmts[i]);
            return &fmts[i];
        }
    }
    return NULL;
}

static uint32_t nan_code(const oracle_fmt *f, int neg)
{
    uint32_t s = neg ? 1u << (f->nbits - 1) : 0u;
    switch (f->spec) {
    case SPEC_IEEE: return s | (((1u << f->ebits) - 1u) << f->mbits) | (1u << (f->mbits - 1));
    case SPEC_FN: return s | ((1u << (f->nbits - 1)) - 1u);
    default: return 0xFF; /* E8M0 */
    }
}

static uint32_t int_encode(const oracle_fmt *f, float x, int rz, unsigned *flags)
{
    double d = x, r;
    if (isnan(d)) {
        *flags |= 16;
        return 0;
    }
    if (isinf(d)) {
        *flags |= 4;
        r = d > 0 ? (double)f->ihi : (double)f->ilo;
    } else {
        double fl = floor(d), diff = d - fl;
        if (rz) r = d < 0 ? ceil(d) : fl;
        else if (diff > 0.5) r = fl + 1;
        else if (diff < 0.5) r = fl;
        else r = fmod(fl, 2.0) == 0.0 ? fl : fl + 1;
        if (r != d) *flags |= 1;
        if (r > (double)f->ihi || r < (double)f->ilo) {
            *flags |= 4 | 1;
            r = r > 0 ? (double)f->ihi : (double)f->ilo;
        }
    }
    int64_t v = (int64_t)r;
    return (uint32_t)(v & (((int64_t)1 << f->nbits) - 1));
}

int oracle_locate(const oracle_fmt *f, double mag, int hint)
{
    if (f->spec == SPEC_INT) return 0;
    if (hint >= -1 && hint <= f->n && (hint < 0 || f->val[hint] <= mag) &&
        (hint == f->n || f->val[hint + 1] > mag))
        return hint;
    int lo = -1, hi = f->n + 1; /* invariant: val[lo] <= mag < val[hi] */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (f->val[mid] <= mag) lo = mid;
        else hi = mid;
    }
    return lo;
}

uint32_t oracle_encode(const oracle_fmt *f, float x, int rz, int nonsat, unsigned *flags)
{
    double mag = fabs((double)x);
    return oracle_encode_at(f, x, isfinite(mag) ? oracle_locate(f, mag, -2) : 0, rz, nonsat, flags);
}

uint32_t oracle_encode_at(const oracle_fmt *f, float x, int j, int rz, int nonsat, unsigned *flags)
{
    *flags = 0;
    if (f->spec == SPEC_INT) return int_encode(f, x, rz, flags);
    uint32_t xb;
    memcpy(&xb, &x, 4);
    int neg = (xb >> 31) != 0;
    uint32_t sign = (neg && f->has_sign) ? 1u << (f->nbits - 1) : 0u;
    uint32_t maxc = f->code[f->n - 1];
    if (f->spec == SPEC_NONE) nonsat = 0; /* e2m1 only saturates */
    if (isnan(x)) {
        if (f->spec == SPEC_NONE) {
            *flags |= 16;
            return maxc; /* +6, ONNX */
        }
        if (!(xb & 0x00400000u)) *flags |= 16;
        return nan_code(f, neg);
    }
    if (f->spec == SPEC_E8M0 && neg && x != 0.0f) {
        *flags |= 16;
        return 0xFF;
    }
    if (isinf(x)) {
        if (!nonsat) {
            *flags |= 4;
            return sign | maxc;
        }
        if (f->spec == SPEC_IEEE) return sign | f->code[f->n]; /* the Inf code */
        *flags |= 16;
        return nan_code(f, neg);
    }
    double mag = fabs((double)x);
    int pick;
    if (j < 0) {
        pick = 0; /* nothing below (E8M0): the smallest code */
    } else if (rz || j == f->n || f->val[j] == mag) {
        pick = j;
    } else {
        double d1 = mag - f->val[j], d2 = f->val[j + 1] - mag; /* exact: Sterbenz */
        if (d1 < d2) pick = j;
        else if (d2 < d1) pick = j + 1;
        else pick = (f->code[j] & 1u) ? j + 1 : j;
    }
    if (pick == f->n) { /* rounded past max finite */
        *flags |= 4 | 1;
        if (!nonsat || rz) return sign | maxc;
        if (f->spec == SPEC_IEEE) return sign | f->code[f->n];
        return nan_code(f, neg);
    }
    double minnormal = f->spec == SPEC_E8M0 ? f->val[0] : ldexp(1.0, 1 - f->bias);
    if (f->val[pick] != mag) {
        *flags |= 1;
        if (mag < minnormal) *flags |= 2;
    }
    return sign | f->code[pick];
}
