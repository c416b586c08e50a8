/* Comparisons under the exactness classes (include/moe/compare.h). The ULP
 * distance of two float codes is the distance of their sign-magnitude codes
 * mapped onto one ordered integer line (TestFloat counts it the same way),
 * so it is defined for every format down to e2m1. */
#include "moe/compare.h"
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/format.h"

static const char *const CLASS_NAMES[MOE_EXACT_CLASS_COUNT] = {"EXACT", "SET", "BOUNDED"};

const char *moe_exact_class_name(moe_exact_class c)
{
    return (unsigned)c < MOE_EXACT_CLASS_COUNT ? CLASS_NAMES[c] : "?";
}

moe_status moe_exact_class_from_name(const char *name, moe_exact_class *out)
{
    if (!name || !out) return moe_fail(MOE_ERR_NULL, "moe_exact_class_from_name: name and out must not be NULL");
    for (int c = 0; c < MOE_EXACT_CLASS_COUNT; c++) {
        const char *a = CLASS_NAMES[c], *b = name;
        while (*a && toupper((unsigned char)*b) == *a) a++, b++;
        if (!*a && !*b) return *out = (moe_exact_class)c, MOE_OK;
    }
    return moe_fail(MOE_ERR_INVALID_ARG, "class '%s': must be EXACT, SET or BOUNDED", name);
}

void moe_cmp_init(moe_cmp_metrics *m) { memset(m, 0, sizeof *m); }

uint32_t moe_tensor_code_at(const moe_tensor *t, int64_t i)
{
    const uint8_t *p = t->data;
    if (moe_dtype_is_packed(t->dtype)) {
        int64_t cols = t->ndim ? t->shape[t->ndim - 1] : 1, r = i / cols, c = i % cols;
        uint8_t b = p[(size_t)r * moe_dtype_row_bytes(t->dtype, cols) + (size_t)(c / 2)];
        return c % 2 ? b >> 4 : b & 15u;
    }
    switch (moe_dtype_get(t->dtype)->npy_itemsize) {
    case 1: return p[i];
    case 2: return ((const uint16_t *)t->data)[i];
    case 4: return ((const uint32_t *)t->data)[i];
    default: return (uint32_t)((const uint64_t *)t->data)[i];
    }
}

double moe_tensor_value_at(const moe_tensor *t, int64_t i)
{
    const moe_dtype_info *di = moe_dtype_get(t->dtype);
    uint32_t c = moe_tensor_code_at(t, i);
    if (t->dtype == MOE_F32) { /* the codec has no f32 row: its bits are the value */
        float v;
        memcpy(&v, &c, sizeof v);
        return v;
    }
    if (di->is_float) {
        float v = 0.0f;
        moe_decode(t->dtype, c, &v);
        return v;
    }
    switch (t->dtype) {
    case MOE_I8: return (int8_t)c;
    case MOE_I4: return (int)(c & 7u) - (int)(c & 8u);
    case MOE_I32: return (int32_t)c;
    case MOE_I64: return (double)((const int64_t *)t->data)[i];
    default: return c;
    }
}

/* position on the ordered line: floats by sign-magnitude, integers by value */
static double ordered(const moe_tensor *t, int64_t i)
{
    const moe_dtype_info *di = moe_dtype_get(t->dtype);
    if (!di->is_float) return moe_tensor_value_at(t, i);
    uint32_t c = moe_tensor_code_at(t, i);
    if (!di->is_signed) return c;
    uint32_t sign = 1u << (di->bits - 1);
    return c & sign ? -(double)(c & (sign - 1)) : (double)c;
}

static int vclass(double v) { return isnan(v) ? 2 : isinf(v) ? (v > 0 ? 3 : 4) : 0; }

static void hex_of(const moe_tensor *t, int64_t i, char *buf, size_t n)
{
    uint32_t c = moe_tensor_code_at(t, i);
    if (t->dtype == MOE_F32) /* TestFloat's f32 form; the codec has no f32 row */
        snprintf(buf, n, "%c%02X.%06X", c >> 31 ? '-' : '+', (c >> 23) & 0xFFu, c & 0x7FFFFFu);
    else if (moe_dtype_get(t->dtype)->is_float) moe_code_hex(t->dtype, c, buf, n);
    else if (t->dtype == MOE_I64) snprintf(buf, n, "0x%016llx", (unsigned long long)((const int64_t *)t->data)[i]);
    else snprintf(buf, n, "0x%x", c);
}

static void note_first(moe_cmp_metrics *m, const moe_tensor *got, const moe_tensor *want, int64_t i)
{
    if (m->nfirst >= MOE_CMP_FIRST) return;
    moe_cmp_mismatch *f = &m->first[m->nfirst++];
    f->index = i, f->got = moe_tensor_value_at(got, i), f->want = moe_tensor_value_at(want, i);
    hex_of(got, i, f->got_hex, sizeof f->got_hex);
    hex_of(want, i, f->want_hex, sizeof f->want_hex);
}

static moe_status same_layout(const moe_tensor *got, const moe_tensor *want, const moe_cmp_metrics *m)
{
    if (!got || !want || !m)
        return moe_fail(MOE_ERR_NULL, "compare: %s must not be NULL", !got ? "got" : !want ? "want" : "metrics");
    if (got->dtype != want->dtype || !moe_dtype_get(got->dtype))
        return moe_fail(MOE_ERR_DTYPE, "compare: got is %s, want is %s: the dtypes must be equal",
                        moe_dtype_get(got->dtype) ? moe_dtype_get(got->dtype)->name : "?",
                        moe_dtype_get(want->dtype) ? moe_dtype_get(want->dtype)->name : "?");
    if (got->ndim != want->ndim) return moe_fail(MOE_ERR_SHAPE, "compare: got has rank %d, want %d", got->ndim, want->ndim);
    for (int d = 0; d < got->ndim; d++)
        if (got->shape[d] != want->shape[d])
            return moe_fail(MOE_ERR_SHAPE, "compare: dim %d is %lld in got, %lld in want", d,
                            (long long)got->shape[d], (long long)want->shape[d]);
    size_t nb;
    moe_status st = moe_tensor_layout(got->dtype, got->ndim, got->shape, &nb);
    if (st) return st;
    if (moe_tensor_numel(got) > 0 && (!got->data || !want->data))
        return moe_fail(MOE_ERR_NULL, "compare: %s has no data", !got->data ? "got" : "want");
    if (got->nbytes < nb || want->nbytes < nb)
        return moe_fail(MOE_ERR_SHAPE, "compare: %s holds %zu bytes, its layout needs %zu",
                        got->nbytes < nb ? "got" : "want", got->nbytes < nb ? got->nbytes : want->nbytes, nb);
    if (got->device.kind != MOE_DEVICE_HOST || want->device.kind != MOE_DEVICE_HOST)
        return moe_fail(MOE_ERR_INVALID_ARG, "compare: %s is a device tensor; copy it to the host first",
                        got->device.kind != MOE_DEVICE_HOST ? "got" : "want");
    return MOE_OK;
}

/* bits of element i equal in both (int64: all 64) */
static int same_bits(const moe_tensor *got, const moe_tensor *want, int64_t i)
{
    if (got->dtype == MOE_I64) return ((const int64_t *)got->data)[i] == ((const int64_t *)want->data)[i];
    return moe_tensor_code_at(got, i) == moe_tensor_code_at(want, i);
}

static int both_nan(const moe_tensor *got, const moe_tensor *want, int64_t i)
{
    return isnan(moe_tensor_value_at(got, i)) && isnan(moe_tensor_value_at(want, i));
}

/* element i of a differing pair: class, |delta| and ULP metrics */
static int diff_elem(const moe_tensor *got, const moe_tensor *want, int64_t i, moe_cmp_metrics *m, double *ad)
{
    double g = moe_tensor_value_at(got, i), w = moe_tensor_value_at(want, i);
    *ad = 0.0;
    if (vclass(g) != vclass(w)) {
        m->class_mismatches++;
        *ad = INFINITY;
        return 1;
    }
    if (vclass(g)) return 0; /* both NaN, or the same infinity: codes may differ (NaN payloads) */
    *ad = fabs(g - w);
    if (*ad > m->max_abs) m->max_abs = *ad;
    double u = fabs(ordered(got, i) - ordered(want, i));
    if (u > m->max_ulp) m->max_ulp = u;
    return 0;
}

moe_status moe_compare_exact(const moe_tensor *got, const moe_tensor *want, moe_cmp_metrics *m)
{
    moe_status st = same_layout(got, want, m);
    if (st) return st;
    int64_t n = moe_tensor_numel(got);
    m->n += n;
    for (int64_t i = 0; i < n; i++) {
        if (same_bits(got, want, i)) continue;
        double ad;
        if (!diff_elem(got, want, i, m, &ad) && both_nan(got, want, i)) continue; /* NaNs compare by class */
        m->mismatches++;
        note_first(m, got, want, i);
    }
    return MOE_OK;
}

moe_status moe_compare_bounded(const moe_tensor *got, const moe_tensor *want, const double *bound,
                               moe_cmp_metrics *m, double *share_out)
{
    moe_status st = same_layout(got, want, m);
    if (st) return st;
    int64_t n = moe_tensor_numel(got);
    m->n += n;
    for (int64_t i = 0; i < n; i++) {
        if (share_out) share_out[i] = 0.0;
        if (same_bits(got, want, i)) continue;
        double ad, b = bound ? bound[i] : 0.0;
        int cls = diff_elem(got, want, i, m, &ad);
        if (ad == 0.0 && !cls) continue; /* +0 / -0, or two NaNs */
        m->mismatches++;
        /* a NaN or negative bound bounds nothing */
        double sh = cls || !(b > 0.0) ? INFINITY : ad / b;
        if (cls || !(ad <= b)) {
            m->bound_failures += !cls;
            note_first(m, got, want, i);
        }
        if (sh > m->share) m->share = sh;
        if (share_out) share_out[i] = sh;
    }
    return MOE_OK;
}

static _Thread_local size_t g_row_bytes; /* qsort has no context argument */
static int row_cmp(const void *a, const void *b) { return memcmp(a, b, g_row_bytes); }

moe_status moe_compare_set_rows(const moe_tensor *got, const moe_tensor *want, const int64_t *seg, int nseg,
                                moe_cmp_metrics *m)
{
    moe_status st = same_layout(got, want, m);
    if (st) return st;
    if (!seg || nseg < 0) return moe_fail(MOE_ERR_INVALID_ARG, "compare_set_rows: seg must hold nseg + 1 >= 1 offsets");
    int64_t N = got->ndim ? got->shape[0] : 1;
    for (int s = 0; s < nseg; s++)
        if (seg[s] < 0 || seg[s] > seg[s + 1] || seg[s + 1] > N)
            return moe_fail(MOE_ERR_INVALID_ARG, "compare_set_rows: seg[%d..%d] = %lld..%lld must rise within [0, %lld]",
                            s, s + 1, (long long)seg[s], (long long)seg[s + 1], (long long)N);
    size_t rb = N ? got->nbytes / (size_t)N : 0;
    if (moe_dtype_is_packed(got->dtype) || rb * (size_t)N != got->nbytes || rb == 0)
        return moe_compare_exact(got, want, m); /* no byte rows to permute: hold it to EXACT */
    uint8_t *ga = malloc(got->nbytes), *wa = malloc(want->nbytes);
    if (!ga || !wa) return free(ga), free(wa), moe_fail(MOE_ERR_NOMEM, "compare_set_rows: %zu bytes", got->nbytes);
    memcpy(ga, got->data, got->nbytes), memcpy(wa, want->data, want->nbytes);
    g_row_bytes = rb;
    for (int s = 0; s < nseg; s++) {
        size_t n = (size_t)(seg[s + 1] - seg[s]);
        qsort(ga + (size_t)seg[s] * rb, n, rb, row_cmp);
        qsort(wa + (size_t)seg[s] * rb, n, rb, row_cmp);
    }
    moe_tensor gs = *got, ws = *want;
    gs.data = ga, ws.data = wa, gs.owns = ws.owns = 0;
    moe_cmp_metrics sub;
    moe_cmp_init(&sub);
    st = moe_compare_exact(&gs, &ws, &sub);
    /* the first mismatches index rows of the sorted segments */
    moe_cmp_merge(m, &sub);
    free(ga), free(wa);
    return st;
}

int moe_align_set_segments(const moe_tensor *expert_ids, int64_t block, int64_t len, int64_t *seg)
{
    const int32_t *e = expert_ids->data;
    int64_t nb = moe_tensor_numel(expert_ids);
    int n = 0;
    seg[0] = 0;
    for (int64_t b = 0; b < nb;) {
        int64_t r = b;
        while (r < nb && e[r] == e[b]) r++;
        int64_t lo = b * block < len ? b * block : len, hi = r * block < len ? r * block : len;
        seg[n] = lo, seg[++n] = hi;
        b = r;
    }
    return n;
}

int moe_cmp_pass(const moe_cmp_metrics *m, moe_exact_class c)
{
    if (m->class_mismatches) return 0;
    return c == MOE_CLASS_BOUNDED ? m->bound_failures == 0 && !isinf(m->share) : m->mismatches == 0;
}

void moe_cmp_merge(moe_cmp_metrics *a, const moe_cmp_metrics *b)
{
    a->n += b->n, a->mismatches += b->mismatches, a->class_mismatches += b->class_mismatches;
    a->bound_failures += b->bound_failures;
    if (b->max_abs > a->max_abs) a->max_abs = b->max_abs;
    if (b->max_ulp > a->max_ulp) a->max_ulp = b->max_ulp;
    if (b->share > a->share) a->share = b->share;
    for (int i = 0; i < b->nfirst && a->nfirst < MOE_CMP_FIRST; i++) a->first[a->nfirst++] = b->first[i];
}
