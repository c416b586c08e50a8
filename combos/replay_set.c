/* The replay's comparisons beyond EXACT (include/moe/replay.h): SET for the
 * dispatches whose receive rows land in atomic order upstream (DeepEP-LL,
 * pplx), through a canonical row order taken from the handle, and for the
 * align layout (vLLM's large path places rows with atomics), and BOUNDED
 * for grouped_gemm through moe_gemm_bound. Both run on the call's host
 * tensors after the EXACT comparison (they reorder them in place). */
#include <stdlib.h>
#include <string.h>
#include "moe/bounds.h"
#include "replay_internal.h"

/* ---- canonical row order --------------------------------------------------- */

typedef struct {
    int64_t k1, k2, i;
} rowkey;

static int key_cmp(const void *a, const void *b)
{
    const rowkey *x = a, *y = b;
    if (x->k1 != y->k1) return x->k1 < y->k1 ? -1 : 1;
    if (x->k2 != y->k2) return x->k2 < y->k2 ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* rows [seg * n, (seg + 1) * n) of t (seen as rows of nbytes / rows bytes)
 * reordered so that new row j is old row key[j].i */
static int permute_segment(moe_tensor *t, int64_t rows, int64_t seg, const rowkey *key, int64_t n)
{
    if (!t || rows <= 0 || n <= 0) return 0;
    size_t rb = t->nbytes / (size_t)rows;
    uint8_t *base = (uint8_t *)t->data + (size_t)(seg * n) * rb, *tmp = malloc(rb * (size_t)n);
    if (!tmp) return -1;
    memcpy(tmp, base, rb * (size_t)n);
    for (int64_t j = 0; j < n; j++) memcpy(base + (size_t)j * rb, tmp + (size_t)key[j].i * rb, rb);
    free(tmp);
    return 0;
}

/* compares every output EXACT into the stage's set metrics */
static void compare_set(rp_call *c)
{
    c->s->has_set = 1;
    for (int i = 0; i < c->nout; i++) {
        moe_cmp_metrics m;
        moe_cmp_init(&m);
        moe_status st = moe_compare_exact(&c->got[i], &c->ref[i], &m);
        if (st) {
            c->s->ref_errors++;
            rp_note_error(c->s, "replay", st, moe_last_error());
            return;
        }
        if (!c->s->set_where && (m.mismatches || m.class_mismatches)) c->s->set_where = c->out_name[i];
        moe_cmp_merge(&c->s->set, &m);
    }
}

static void nomem(rp_call *c)
{
    c->s->ref_errors++;
    rp_note_error(c->s, "replay", MOE_ERR_NOMEM, "SET comparison buffers");
}

/* DeepEP-LL: within (rank, local expert), rows by (source rank from
 * layout_range, src_info); rows no range claims after them in place. When
 * the ranges tile rows [0, sum of counts) without overlap, their begins
 * become the prefix sums of the counts (the canonical rows' positions);
 * otherwise the segment stays as it is (and compares as it is). */
static int canon_ll(moe_tensor *x, moe_tensor *xs, moe_tensor *info, moe_tensor *range)
{
    int64_t R = x->shape[0], L = x->shape[1], T = x->shape[2], segs = R * L;
    rowkey *key = malloc(sizeof *key * (size_t)(T + 1));
    int32_t *owner = malloc(sizeof *owner * (size_t)(T + 1));
    if (!key || !owner) return free(key), free(owner), -1;
    int rc = 0;
    for (int64_t sg = 0; sg < segs && !rc; sg++) {
        int64_t *lr = (int64_t *)range->data + sg * R;
        const int32_t *si = (const int32_t *)info->data + sg * T;
        int valid = 1;
        for (int64_t i = 0; i < T; i++) owner[i] = -1;
        for (int64_t s = 0; s < R && valid; s++) {
            int64_t cnt = (int64_t)(uint32_t)lr[s], b = (int64_t)(int32_t)(uint32_t)((uint64_t)lr[s] >> 32);
            if (b < 0 || b + cnt > T) valid = 0;
            for (int64_t i = b; valid && i < b + cnt; i++) {
                if (owner[i] >= 0) valid = 0;
                owner[i] = (int32_t)s;
            }
        }
        if (!valid) continue;
        for (int64_t i = 0; i < T; i++)
            key[i] = owner[i] >= 0 ? (rowkey){owner[i], si[i], i} : (rowkey){R, 0, i};
        qsort(key, (size_t)T, sizeof *key, key_cmp);
        if (permute_segment(x, segs * T, sg, key, T) || permute_segment(xs, segs * T, sg, key, T) ||
            permute_segment(info, segs * T, sg, key, T))
            rc = -1;
        int64_t at = 0;
        for (int64_t s = 0; s < R; s++) {
            int64_t cnt = (int64_t)(uint32_t)lr[s];
            lr[s] = (int64_t)((uint64_t)at << 32 | (uint64_t)cnt);
            at += cnt;
        }
    }
    free(key), free(owner);
    return rc;
}

void rp_set_deepep_ll(rp_call *c, const moe_deepep_ll_config *cfg)
{
    (void)cfg; /* the shapes carry R, E_loc and R*T_max */
    int ix = rp_out_index(c, "out->x"), is = rp_out_index(c, "out->x_scales"), ii = rp_out_index(c, "out->src_info"),
        il = rp_out_index(c, "out->layout_range");
    if (ix < 0 || ii < 0 || il < 0) return; /* the reference accepted it, so this cannot happen */
    for (int side = 0; side < 2; side++) {
        moe_tensor *t = side ? c->ref : c->got;
        if (canon_ll(&t[ix], is >= 0 ? &t[is] : NULL, &t[ii], &t[il])) return nomem(c);
    }
    compare_set(c);
}

/* pplx: within (rank, local expert), the first num_tokens rows by src */
static int canon_pplx(moe_tensor *x, moe_tensor *xs, const moe_tensor *num, moe_tensor *src)
{
    int64_t segs = x->shape[0] * x->shape[1], T = x->shape[2];
    rowkey *key = malloc(sizeof *key * (size_t)(T + 1));
    if (!key) return -1;
    int rc = 0;
    for (int64_t sg = 0; sg < segs && !rc; sg++) {
        int64_t n = ((const int32_t *)num->data)[sg];
        if (n < 0) n = 0;
        if (n > T) n = T;
        const int32_t *sv = (const int32_t *)src->data + sg * T;
        for (int64_t i = 0; i < T; i++) key[i] = i < n ? (rowkey){0, sv[i], i} : (rowkey){1, 0, i};
        qsort(key, (size_t)n, sizeof *key, key_cmp);
        if (permute_segment(x, segs * T, sg, key, T) || permute_segment(xs, segs * T, sg, key, T) ||
            permute_segment(src, segs * T, sg, key, T))
            rc = -1;
    }
    free(key);
    return rc;
}

void rp_set_pplx(rp_call *c)
{
    int ix = rp_out_index(c, "out->x"), is = rp_out_index(c, "out->x_scales"), in = rp_out_index(c, "out->num_tokens"),
        ir = rp_out_index(c, "out->src");
    if (ix < 0 || in < 0 || ir < 0) return;
    for (int side = 0; side < 2; side++) {
        moe_tensor *t = side ? c->ref : c->got;
        if (canon_pplx(&t[ix], is >= 0 ? &t[is] : NULL, &t[in], &t[ir])) return nomem(c);
    }
    compare_set(c);
}

/* align_block_size: each run of blocks holding one expert (by expert_ids)
 * sorted ascending, so the flat indices of an expert compare as a set and
 * its pad entries (M*topk, the largest value) stay at the run's end */
static int icmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

void rp_set_align(rp_call *c, const moe_align_params *p)
{
    int is = rp_out_index(c, "sorted_token_ids"), ie = rp_out_index(c, "expert_ids");
    if (is < 0 || ie < 0 || !p || p->block_size <= 0) return;
    /* runs from the reference's expert_ids: a backend whose own differ
     * fails on expert_ids itself */
    int64_t *seg = malloc(sizeof *seg * (size_t)(moe_tensor_numel(&c->ref[ie]) + 1));
    if (!seg) return nomem(c);
    int n = moe_align_set_segments(&c->ref[ie], p->block_size, moe_tensor_numel(&c->ref[is]), seg);
    for (int side = 0; side < 2; side++)
        for (int s = 0; s < n; s++) {
            int32_t *v = side ? c->ref[is].data : c->got[is].data;
            qsort(v + seg[s], (size_t)(seg[s + 1] - seg[s]), sizeof *v, icmp);
        }
    free(seg);
    compare_set(c);
}

/* ---- BOUNDED grouped_gemm ------------------------------------------------- */

void rp_bounded_gemm(rp_call *c, const moe_gemm_args *host_args)
{
    int io = rp_out_index(c, "out");
    if (io < 0) return;
    int64_t n = moe_tensor_numel(&c->ref[io]);
    double *bound = malloc(sizeof(double) * (size_t)(n + 1));
    if (!bound) return nomem(c);
    moe_status st = moe_gemm_bound(host_args, &c->ref[io], bound);
    moe_cmp_metrics m;
    moe_cmp_init(&m);
    if (st == MOE_OK) st = moe_compare_bounded(&c->got[io], &c->ref[io], bound, &m, NULL);
    free(bound);
    if (st) {
        c->s->ref_errors++;
        rp_note_error(c->s, "replay", st, moe_last_error());
        return;
    }
    c->s->has_bound = 1;
    if (!c->s->bounded_where && (m.bound_failures || m.class_mismatches)) c->s->bounded_where = c->out_name[io];
    moe_cmp_merge(&c->s->bounded, &m);
}
