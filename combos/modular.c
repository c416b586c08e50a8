/* The modular kernel: construction from the registry with the
 * compatibility rules, forward (prepare -> workspaces -> apply in chunks ->
 * finalize) and the helpers the types share. See include/moe/modular.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/modular.h"

static const moe_mk_pf_type *const pf_types[] = {&moe_mk_pf_noep, &moe_mk_pf_batched, &moe_mk_pf_allgather_rs,
                                                 &moe_mk_pf_deepep_ht, &moe_mk_pf_deepep_ll, &moe_mk_pf_pplx,
                                                 &moe_mk_pf_hybrid_ep};
static const moe_mk_experts_type *const ex_types[] = {&moe_mk_experts_ref, &moe_mk_experts_triton_like,
                                                      &moe_mk_experts_naive_batched, &moe_mk_experts_permute_grouped,
                                                      &moe_mk_experts_batched_masked, &moe_mk_experts_grouped_contig,
                                                      &moe_mk_experts_ck_fused};

/* ---- helpers ------------------------------------------------------------ */

moe_status moe_mk_missing(const moe_mk *mk, const char *entry)
{
    return moe_fail(MOE_ERR_UNSUPPORTED, "ops '%s': has no %s entry, which %s x %s needs",
                    mk->ops->name ? mk->ops->name : "?", entry, mk->pf->name, mk->ex->name);
}

moe_status moe_mk_alloc(const moe_mk *mk, moe_tensor *t, moe_dtype d, int ndim, const int64_t *shape)
{
    return mk->ops->alloc(t, d, ndim, shape);
}

moe_status moe_mk_alloc2(const moe_mk *mk, moe_tensor *t, moe_dtype d, int64_t r, int64_t c)
{
    int64_t s[2] = {r, c};
    return moe_mk_alloc(mk, t, d, 2, s);
}

void moe_mk_free(const moe_mk *mk, moe_tensor *t)
{
    if (!t) return;
    if (t->owns) mk->ops->free(t);
    memset(t, 0, sizeof *t);
}

moe_status moe_mk_view(const moe_tensor *buf, size_t off, moe_dtype d, int ndim, const int64_t *shape,
                       moe_tensor *view)
{
    if (off > buf->nbytes) return moe_fail(MOE_ERR_INTERNAL, "view: offset %zu past %zu bytes", off, buf->nbytes);
    return moe_tensor_wrap(view, d, ndim, shape, buf->data ? (uint8_t *)buf->data + off : NULL, buf->nbytes - off,
                           buf->device);
}

moe_status moe_mk_rows(const moe_tensor *t, int64_t r0, int64_t n, moe_tensor *view)
{
    int64_t s[MOE_MAX_DIMS];
    memcpy(s, t->shape, sizeof s);
    s[0] = 1;
    size_t slice;
    moe_status st = moe_tensor_layout(t->dtype, t->ndim, s, &slice);
    if (st != MOE_OK) return st;
    if (r0 < 0 || n < 0 || r0 + n > t->shape[0])
        return moe_fail(MOE_ERR_INTERNAL, "rows [%lld, %lld) of %lld", (long long)r0, (long long)(r0 + n),
                        (long long)t->shape[0]);
    s[0] = n;
    return moe_mk_view(t, (size_t)r0 * slice, t->dtype, t->ndim, s, view);
}

moe_status moe_mk_index(const moe_mk *mk, moe_tensor *t, const int32_t *v, int64_t n)
{
    moe_status st = moe_mk_alloc(mk, t, MOE_I32, 1, &n);
    if (st != MOE_OK || n == 0) return st;
    moe_tensor h;
    if ((st = moe_tensor_wrap(&h, MOE_I32, 1, &n, (void *)v, (size_t)n * 4, (moe_device){MOE_DEVICE_HOST, 0})))
        return st;
    return mk->ops->copy(t, &h);
}

moe_status moe_mk_index2(const moe_mk *mk, moe_tensor *t, const int32_t *v, int64_t r, int64_t c)
{
    moe_status st = moe_mk_alloc2(mk, t, MOE_I32, r, c);
    if (st != MOE_OK || r * c == 0) return st;
    moe_tensor h;
    if ((st = moe_tensor_wrap(&h, MOE_I32, 2, (int64_t[2]){r, c}, (void *)v, (size_t)(r * c) * 4,
                              (moe_device){MOE_DEVICE_HOST, 0})))
        return st;
    return mk->ops->copy(t, &h);
}

moe_status moe_mk_rank_rows(const moe_tensor *t, int j, int64_t n, moe_tensor *v)
{
    moe_status st = moe_mk_rows(t, j, 1, v);
    if (st != MOE_OK) return st;
    return moe_mk_view(v, 0, t->dtype, 2, (int64_t[2]){n, t->shape[2]}, v);
}

moe_status moe_mk_ones(const moe_mk *mk, moe_tensor *t, int64_t d0, int64_t d1, int64_t d2)
{
    moe_status st = moe_mk_alloc(mk, t, MOE_F32, 3, (int64_t[3]){d0, d1, d2});
    if (st != MOE_OK) return st;
    float *f = t->data; /* host backend (the constructor checks) */
    for (int64_t i = 0; i < d0 * d1 * d2; i++) f[i] = 1.0f;
    return MOE_OK;
}

static moe_scheme cast_scheme(moe_dtype d)
{
    return d == MOE_BF16 ? MOE_SCHEME_BF16 : d == MOE_F16 ? MOE_SCHEME_F16 : MOE_SCHEME_F32;
}

moe_status moe_mk_widen(const moe_mk *mk, const moe_tensor *rows, moe_tensor *f32_out)
{
    MOE_MK_NEED(mk, dequantize);
    moe_quant_spec cast;
    moe_status st = moe_scheme_spec(cast_scheme(rows->dtype), MOE_OPERAND_ACT, &cast);
    if (st != MOE_OK) return st;
    if ((st = moe_mk_alloc(mk, f32_out, MOE_F32, rows->ndim, rows->shape))) return st;
    if (moe_tensor_numel(rows) == 0) return MOE_OK;
    return mk->ops->dequantize(&cast, rows, NULL, NULL, f32_out);
}

moe_status moe_mk_quantize(const moe_mk *mk, const moe_tensor *rows, moe_tensor *q, moe_tensor *scale,
                           moe_tensor *global)
{
    const moe_quant_spec *spec = &mk->act_spec;
    moe_status st;
    if (spec->gran == MOE_GRAN_NONE) {
        if (q->ndim == 0) /* empty: a view */
            return moe_mk_view(rows, 0, rows->dtype, rows->ndim, rows->shape, q);
        MOE_MK_NEED(mk, copy);
        return mk->ops->copy(q, rows);
    }
    MOE_MK_NEED(mk, quantize);
    moe_quant_dims d;
    if ((st = moe_quant_shapes(spec, 2, rows->shape, &d))) return st;
    if (q->ndim == 0 && (st = moe_mk_alloc(mk, q, d.q_dtype, d.q_ndim, d.q_shape))) return st;
    if (d.has_scale && (st = moe_mk_alloc(mk, scale, d.scale_dtype, d.scale_ndim, d.scale_shape))) return st;
    if (d.has_global && (st = moe_mk_alloc(mk, global, MOE_F32, d.global_ndim, d.global_shape))) return st;
    moe_tensor f;
    memset(&f, 0, sizeof f);
    if ((st = moe_mk_widen(mk, rows, &f)) == MOE_OK)
        st = mk->ops->quantize(spec, &f, NULL, q, d.has_scale ? scale : NULL, d.has_global ? global : NULL);
    moe_mk_free(mk, &f);
    return st;
}

/* ---- construction ------------------------------------------------------- */

const char *moe_mk_pf_name(const moe_mk *mk) { return mk ? mk->pf_info->name : "?"; }
const char *moe_mk_experts_name(const moe_mk *mk) { return mk ? mk->ex_info->name : "?"; }

moe_status moe_mk_create(const char *pf_name, const char *experts_name, const moe_mk_config *cfg, moe_mk **out,
                         moe_compat_verdict *why)
{
    if (!out) return moe_fail(MOE_ERR_NULL, "out: must not be NULL");
    *out = NULL;
    if (!cfg) return moe_fail(MOE_ERR_NULL, "cfg: must not be NULL");
    const moe_pf_info *pfi = moe_pf_find(pf_name);
    if (!pfi) return moe_fail(MOE_ERR_INVALID_ARG, "pf '%s': not a prepare/finalize type of the registry",
                              pf_name ? pf_name : "(null)");
    const moe_experts_info *exi = moe_experts_find(experts_name);
    if (!exi) return moe_fail(MOE_ERR_INVALID_ARG, "experts '%s': not an experts type of the registry",
                              experts_name ? experts_name : "(null)");
    if (cfg->hidden < 1 || cfg->inter < 1)
        return moe_fail(MOE_ERR_INVALID_ARG, "cfg.hidden %d, cfg.inter %d: must be >= 1", cfg->hidden, cfg->inter);
    if (cfg->max_tokens < 0) return moe_fail(MOE_ERR_INVALID_ARG, "cfg.max_tokens %d: must be >= 0", cfg->max_tokens);
    moe_compat_query q = moe_compat_query_default();
    q.scheme = cfg->scheme, q.topk = cfg->topk, q.num_experts = cfg->num_experts, q.world_size = cfg->world_size;
    q.hidden = cfg->hidden, q.chunk_size = cfg->chunk_size, q.weight_on_input = cfg->weights_on_input;
    q.invalid_ids = cfg->invalid_ids;
    moe_compat_verdict v;
    moe_status st = moe_compat_check(pfi, exi, &q, &v);
    if (st != MOE_OK) return st;
    if (why) *why = v;
    if (!v.compatible) {
        char ids[512];
        size_t n = 0;
        ids[0] = 0;
        for (int i = 0; i < v.nfail && n < sizeof ids; i++)
            n += (size_t)snprintf(ids + n, sizeof ids - n, "%s%s", i ? ", " : "", v.fail[i]->id);
        return moe_fail(MOE_ERR_INCOMPATIBLE, "%s x %s, scheme %s: incompatible (%s)", pfi->name, exi->name,
                        moe_scheme_name(cfg->scheme), ids);
    }
    const moe_mk_pf_type *pf = NULL;
    const moe_mk_experts_type *ex = NULL;
    for (size_t i = 0; i < sizeof pf_types / sizeof pf_types[0]; i++)
        if (strcmp(pf_types[i]->name, pfi->name) == 0) pf = pf_types[i];
    for (size_t i = 0; i < sizeof ex_types / sizeof ex_types[0]; i++)
        if (strcmp(ex_types[i]->name, exi->name) == 0) ex = ex_types[i];
    if (!pf) return moe_fail(MOE_ERR_UNSUPPORTED, "pf '%s': not implemented yet in the modular kernel", pfi->name);
    if (!ex)
        return moe_fail(MOE_ERR_UNSUPPORTED, "experts '%s': not implemented yet in the modular kernel", exi->name);
    if (cfg->world_size != 1 && !pf->ep_prepare)
        return moe_fail(MOE_ERR_UNSUPPORTED, "pf '%s', cfg.world_size %d: runs one rank in the modular kernel",
                        pf->name, cfg->world_size);
    const moe_ops *ops = cfg->ops ? cfg->ops : &moe_ops_ref;
    if ((st = moe_ops_check(ops))) return st;
    if (ops->device != MOE_DEVICE_HOST)
        return moe_fail(MOE_ERR_UNSUPPORTED, "ops '%s': not a host backend; this slice builds index tensors on the host",
                        ops->name ? ops->name : "?");
    moe_quant_spec as;
    if ((st = moe_scheme_spec(cfg->scheme, MOE_OPERAND_ACT, &as))) return st;
    if (as.gran != MOE_GRAN_NONE && as.layout != MOE_SF_LINEAR)
        return moe_fail(MOE_ERR_UNSUPPORTED, "scheme %s: activation scale layout %s is not handled by the modular "
                        "kernel yet (rows of scales are moved as linear rows)",
                        moe_scheme_name(cfg->scheme), moe_sf_layout_name(as.layout));
    if (cfg->world_size != 1 && as.gran == MOE_GRAN_TENSOR)
        return moe_fail(MOE_ERR_UNSUPPORTED, "pf '%s', scheme %s, world %d: per-tensor dynamic activation scales "
                        "with expert parallelism are not handled (NaiveDPEP does not gather scalar scales; rows "
                        "of non-local experts (-1) break per-expert requantization)",
                        pf->name, moe_scheme_name(cfg->scheme), cfg->world_size);
    moe_mk *mk = calloc(1, sizeof *mk);
    if (!mk) return moe_fail(MOE_ERR_NOMEM, "moe_mk: allocation");
    mk->cfg = *cfg, mk->cfg.ops = ops, mk->ops = ops;
    mk->pf_info = pfi, mk->ex_info = exi, mk->pf = pf, mk->ex = ex, mk->act_spec = as;
    mk->n1 = (moe_act_is_gated(cfg->act.act) ? 2 : 1) * cfg->inter;
    *out = mk;
    return MOE_OK;
}

void moe_mk_destroy(moe_mk *mk) { free(mk); }

/* ---- forward ------------------------------------------------------------ */

static void prep_free(const moe_mk *mk, moe_mk_prep *p)
{
    moe_mk_free(mk, &p->a1q), moe_mk_free(mk, &p->a1q_scale), moe_mk_free(mk, &p->a1q_global);
    moe_mk_free(mk, &p->counts), moe_mk_free(mk, &p->probs);
    for (int l = 0; l < p->num_local_experts; l++) {
        if (p->ex_scale) moe_mk_free(mk, &p->ex_scale[l]);
        if (p->ex_global) moe_mk_free(mk, &p->ex_global[l]);
    }
    free(p->ex_scale), free(p->ex_global);
    memset(p, 0, sizeof *p);
}

static moe_status alloc_shape(const moe_mk *mk, const moe_mk_shape *s, moe_tensor *t)
{
    if (s->ndim == 0) return MOE_OK;
    return moe_mk_alloc(mk, t, s->dtype, s->ndim, s->shape);
}

/* Rows [t0, t0 + n) of a Standard-format scale tensor: one scale for the
 * whole tensor (numel 1) passes through, row scales are sliced (vLLM
 * _slice_scales). */
static moe_status slice_scale(const moe_tensor *s, int64_t M, int64_t t0, int64_t n, moe_tensor *view)
{
    if (!s->data && s->ndim == 0) {
        memset(view, 0, sizeof *view);
        return MOE_OK;
    }
    if (moe_tensor_numel(s) == 1 || s->shape[0] != M) return moe_mk_view(s, 0, s->dtype, s->ndim, s->shape, view);
    return moe_mk_rows(s, t0, n, view);
}

static moe_status check_forward(const moe_mk *mk, const moe_mk_weights *w, const moe_tensor *x,
                                const moe_tensor *ids, const moe_tensor *wt, const moe_tensor *out)
{
    if (!mk || !w || !x || !ids || !wt || !out)
        return moe_fail(MOE_ERR_NULL, "mk, weights, x, topk_ids, topk_weights, out: must not be NULL");
    if (!w->w1 || !w->w2) return moe_fail(MOE_ERR_NULL, "weights.w1, weights.w2: must not be NULL");
    if (x->dtype != MOE_F32 && x->dtype != MOE_BF16 && x->dtype != MOE_F16)
        return moe_fail(MOE_ERR_DTYPE, "x: dtype must be f32, bf16 or f16");
    moe_status s;
    if ((s = moe_tensor_expect_host(x, "x", x->dtype, 2)) || (s = moe_tensor_expect_host(out, "out", x->dtype, 2)) ||
        (s = moe_tensor_expect_host(ids, "topk_ids", MOE_I32, 2)) ||
        (s = moe_tensor_expect_host(wt, "topk_weights", MOE_F32, 2)))
        return s;
    int64_t M = x->shape[0];
    if (x->shape[1] != mk->cfg.hidden)
        return moe_fail(MOE_ERR_SHAPE, "x: [%lld, %lld], the kernel was built for hidden %d", (long long)M,
                        (long long)x->shape[1], mk->cfg.hidden);
    if (out->shape[0] != M || out->shape[1] != x->shape[1])
        return moe_fail(MOE_ERR_SHAPE, "out: must have x's shape");
    if (ids->shape[0] != M || ids->shape[1] != mk->cfg.topk || wt->shape[0] != M || wt->shape[1] != mk->cfg.topk)
        return moe_fail(MOE_ERR_SHAPE, "topk_ids, topk_weights: must both be [M = %lld, topk = %d]", (long long)M,
                        mk->cfg.topk);
    const int32_t *id = ids->data;
    for (int64_t i = 0; i < M * mk->cfg.topk; i++)
        if (id[i] < 0 || id[i] >= mk->cfg.num_experts) {
            if (id[i] < 0 && !mk->pf_info->accepts_invalid_ids)
                return moe_fail(MOE_ERR_INVALID_ARG, "topk_ids[%lld] = %d: pf '%s' refuses -1 expert ids "
                                "(rule invalid-ids-refused)", (long long)i, id[i], mk->pf_info->name);
            return moe_fail(MOE_ERR_INVALID_ARG, "topk_ids[%lld] = %d: must be in [0, E = %d)", (long long)i, id[i],
                            mk->cfg.num_experts);
        }
    int64_t E = mk->cfg.num_experts;
    if (w->w1->ndim != 3 || w->w1->shape[0] != E || w->w1->shape[1] != mk->n1 || w->w2->ndim != 3 ||
        w->w2->shape[0] != E || w->w2->shape[2] != mk->cfg.inter)
        return moe_fail(MOE_ERR_SHAPE, "w1, w2: must be [E = %lld, %d, H] and [E, H, I = %d]", (long long)E, mk->n1,
                        mk->cfg.inter);
    return MOE_OK;
}

/* The experts on one rank's Standard or Batched rows: workspaces, apply
 * (in chunks when both sides chunk), into *fused (allocated here). M is
 * the rank's row count (Standard: prep rows; Batched: the token count). */
static moe_status run_experts(const moe_mk *mk, const moe_mk_weights *w, const moe_mk_prep *prep,
                              const moe_tensor *topk_ids, const moe_tensor *topk_weights, int64_t M, moe_tensor *fused)
{
    moe_status st;
    moe_tensor ws13, ws2;
    memset(&ws13, 0, sizeof ws13), memset(&ws2, 0, sizeof ws2), memset(fused, 0, sizeof *fused);
    if (prep->format != mk->pf_info->format)
        return moe_fail(MOE_ERR_INTERNAL, "pf '%s': prepare produced format %s", mk->pf->name,
                        moe_act_format_name(prep->format));
    /* chunking: both sides must support it; Standard-format PFs chunk,
     * batched ones never do (anchors 2.5) */
    int64_t C = M;
    if (mk->cfg.chunk_size > 0 && mk->ex_info->chunking && prep->format == MOE_FMT_STANDARD && mk->cfg.chunk_size < M)
        C = mk->cfg.chunk_size;
    moe_mk_shape s13, s2, sout;
    memset(&s13, 0, sizeof s13), memset(&s2, 0, sizeof s2), memset(&sout, 0, sizeof sout);
    if ((st = mk->ex->workspace_shapes(mk, C, M, prep, &s13, &s2, &sout))) goto done;
    if ((st = alloc_shape(mk, &s13, &ws13)) || (st = alloc_shape(mk, &s2, &ws2)) ||
        (st = alloc_shape(mk, &sout, fused)))
        goto done;
    if (prep->format != MOE_FMT_STANDARD) {
        moe_mk_apply_args a = {w, prep, topk_ids, topk_weights, &ws13, &ws2, fused};
        st = mk->ex->apply(mk, &a);
        goto done;
    }
    int64_t factor = fused->shape[0] / M; /* fused [M, ..] or [M*k, ..] */
    for (int64_t t0 = 0; t0 < M; t0 += C) {
        int64_t n = M - t0 < C ? M - t0 : C;
        moe_mk_prep cp = *prep;
        moe_tensor ids_c, w_c, out_c;
        if ((st = moe_mk_rows(&prep->a1q, t0, n, &cp.a1q)) ||
            (st = slice_scale(&prep->a1q_scale, M, t0, n, &cp.a1q_scale)) ||
            (st = moe_mk_rows(topk_ids, t0, n, &ids_c)) || (st = moe_mk_rows(topk_weights, t0, n, &w_c)) ||
            (st = moe_mk_rows(fused, t0 * factor, n * factor, &out_c)))
            goto done;
        moe_mk_apply_args a = {w, &cp, &ids_c, &w_c, &ws13, &ws2, &out_c};
        if ((st = mk->ex->apply(mk, &a))) goto done;
    }
done:
    moe_mk_free(mk, &ws13), moe_mk_free(mk, &ws2);
    if (st != MOE_OK) moe_mk_free(mk, fused);
    return st;
}

moe_status moe_mk_forward(moe_mk *mk, const moe_mk_weights *w, const moe_tensor *x, const moe_tensor *topk_ids,
                          const moe_tensor *topk_weights, moe_tensor *out)
{
    if (mk && mk->pf->ep_prepare) {
        if (mk->cfg.world_size != 1)
            return moe_fail(MOE_ERR_INVALID_ARG, "pf '%s', world %d: rank-major inputs go through "
                            "moe_mk_forward_ranks", mk->pf->name, mk->cfg.world_size);
        moe_status s;
        if (!x || !topk_ids || !topk_weights || !out)
            return moe_fail(MOE_ERR_NULL, "x, topk_ids, topk_weights, out: must not be NULL");
        if ((s = moe_tensor_expect_host(x, "x", x->dtype, 2)) || (s = moe_tensor_expect_host(out, "out", out->dtype, 2)) ||
            (s = moe_tensor_expect_host(topk_ids, "topk_ids", MOE_I32, 2)) ||
            (s = moe_tensor_expect_host(topk_weights, "topk_weights", MOE_F32, 2)))
            return s;
        moe_tensor x3, i3, w3, o3; /* [1, M, ..] views */
        if ((s = moe_mk_view(x, 0, x->dtype, 3, (int64_t[3]){1, x->shape[0], x->shape[1]}, &x3)) ||
            (s = moe_mk_view(topk_ids, 0, MOE_I32, 3, (int64_t[3]){1, topk_ids->shape[0], topk_ids->shape[1]}, &i3)) ||
            (s = moe_mk_view(topk_weights, 0, MOE_F32, 3,
                             (int64_t[3]){1, topk_weights->shape[0], topk_weights->shape[1]}, &w3)) ||
            (s = moe_mk_view(out, 0, out->dtype, 3, (int64_t[3]){1, out->shape[0], out->shape[1]}, &o3)))
            return s;
        return moe_mk_forward_ranks(mk, w, &x3, &i3, &w3, &o3);
    }
    moe_status st = check_forward(mk, w, x, topk_ids, topk_weights, out);
    if (st != MOE_OK) return st;
    int64_t M = x->shape[0];
    if (M == 0) return MOE_OK; /* vLLM: a rank with no tokens returns an empty output */
    moe_mk_prep prep;
    memset(&prep, 0, sizeof prep);
    moe_tensor fused;
    memset(&fused, 0, sizeof fused);
    if ((st = mk->pf->prepare(mk, x, topk_ids, topk_weights, &prep))) goto done;
    if ((st = run_experts(mk, w, &prep, topk_ids, topk_weights, M, &fused))) goto done;
    st = mk->pf->finalize(mk, &fused, topk_ids, topk_weights,
                          mk->ex->finalize_weight_and_reduce_impl(mk), out);
done:
    prep_free(mk, &prep);
    moe_mk_free(mk, &fused);
    return st;
}

/* ---- expert parallelism -------------------------------------------------- */

/* Rank r's experts [r*El, (r+1)*El): views of every per-expert tensor's
 * leading dimension (a tensor whose leading extent is not E is shared). */
static moe_status local_weights(const moe_mk *mk, const moe_mk_weights *w, int r, moe_mk_weights *lw, moe_tensor v[8])
{
    int64_t E = mk->cfg.num_experts, El = E / mk->cfg.world_size;
    const moe_tensor *src[8] = {w->w1, w->w1_scale, w->w1_global, w->w2, w->w2_scale, w->w2_global, w->b1, w->b2};
    const moe_tensor **dst[8] = {&lw->w1, &lw->w1_scale, &lw->w1_global, &lw->w2,
                                 &lw->w2_scale, &lw->w2_global, &lw->b1, &lw->b2};
    for (int i = 0; i < 8; i++) {
        *dst[i] = src[i];
        if (!src[i] || src[i]->ndim == 0 || src[i]->shape[0] != E) continue;
        moe_status st = moe_mk_rows(src[i], (int64_t)r * El, El, &v[i]);
        if (st != MOE_OK) return st;
        *dst[i] = &v[i];
    }
    return MOE_OK;
}

static moe_status forward_ranks(moe_mk *mk, const moe_mk_weights *w, const moe_tensor *x, const moe_tensor *topk_ids,
                                const moe_tensor *topk_weights, moe_tensor *out, int async,
                                moe_mk_between_fn between, void *user);

moe_status moe_mk_forward_ranks(moe_mk *mk, const moe_mk_weights *w, const moe_tensor *x, const moe_tensor *topk_ids,
                                const moe_tensor *topk_weights, moe_tensor *out)
{
    return forward_ranks(mk, w, x, topk_ids, topk_weights, out, 0, NULL, NULL);
}

moe_status moe_mk_forward_ranks_async(moe_mk *mk, const moe_mk_weights *w, const moe_tensor *x,
                                      const moe_tensor *topk_ids, const moe_tensor *topk_weights, moe_tensor *out,
                                      moe_mk_between_fn between, void *user)
{
    if (mk && (!mk->pf_info->async || !mk->pf->ep_prepare))
        return moe_fail(MOE_ERR_UNSUPPORTED, "pf '%s': has no prepare_async (supports_async() is False)",
                        mk->pf_info->name);
    return forward_ranks(mk, w, x, topk_ids, topk_weights, out, 1, between, user);
}

/* Rows a rank's experts see: Standard, the received rows; Batched /
 * Grouped, the sum of the counts (read on the host). */
static int64_t rank_rows_in(const moe_mk_rank *rk)
{
    if (rk->prep.format == MOE_FMT_STANDARD) return rk->topk_ids.ndim ? rk->topk_ids.shape[0] : 0;
    int64_t n = 0;
    const int32_t *c = rk->prep.counts.data;
    for (int l = 0; c && l < rk->prep.num_local_experts; l++) n += c[l];
    return n;
}

/* Standard-format experts types that take the -1 ids of non-local slots
 * (zero contribution): triton_like (vLLM's expert map, ignore-invalid
 * align), permute_grouped (TRT-LLM maps: non-local rows, finalize skips
 * them), ck_fused (CK's local_expert_mask), grouped_contig (-1 rows take
 * no slot of the contiguous layout). */
static int takes_nonlocal_ids(const moe_mk_experts_type *ex)
{
    return ex == &moe_mk_experts_triton_like || ex == &moe_mk_experts_permute_grouped ||
           ex == &moe_mk_experts_ck_fused || ex == &moe_mk_experts_grouped_contig;
}

static moe_status forward_ranks(moe_mk *mk, const moe_mk_weights *w, const moe_tensor *x, const moe_tensor *topk_ids,
                                const moe_tensor *topk_weights, moe_tensor *out, int async,
                                moe_mk_between_fn between, void *user)
{
    if (!mk || !w || !x || !topk_ids || !topk_weights || !out)
        return moe_fail(MOE_ERR_NULL, "mk, weights, x, topk_ids, topk_weights, out: must not be NULL");
    moe_status st;
    int R = mk->cfg.world_size;
    if ((st = moe_tensor_expect_host(x, "x", x->dtype, 3)) || (st = moe_tensor_expect_host(out, "out", x->dtype, 3)) ||
        (st = moe_tensor_expect_host(topk_ids, "topk_ids", MOE_I32, 3)) ||
        (st = moe_tensor_expect_host(topk_weights, "topk_weights", MOE_F32, 3)))
        return st;
    if (x->shape[0] != R || topk_ids->shape[0] != R || topk_weights->shape[0] != R || out->shape[0] != R)
        return moe_fail(MOE_ERR_SHAPE, "x, topk_ids, topk_weights, out: leading extent must be the world size %d", R);
    int64_t T = x->shape[1], H = x->shape[2], k = topk_ids->shape[2];
    /* every rank's [T, ..] slice passes the single-rank checks */
    moe_tensor x2, i2, w2, o2;
    if ((st = moe_mk_view(x, 0, x->dtype, 2, (int64_t[2]){R * T, H}, &x2)) ||
        (st = moe_mk_view(topk_ids, 0, MOE_I32, 2, (int64_t[2]){R * T, k}, &i2)) ||
        (st = moe_mk_view(topk_weights, 0, MOE_F32, 2, (int64_t[2]){R * T, topk_weights->shape[2]}, &w2)) ||
        (st = moe_mk_view(out, 0, out->dtype, 2, (int64_t[2]){R * T, out->shape[2]}, &o2)) ||
        (st = check_forward(mk, w, &x2, &i2, &w2, &o2)))
        return st;
    if (topk_ids->shape[1] != T || topk_weights->shape[1] != T || out->shape[1] != T)
        return moe_fail(MOE_ERR_SHAPE, "topk_ids, topk_weights, out: must have T = %lld tokens per rank", (long long)T);
    if (!mk->pf->ep_prepare) { /* single-rank PF: R is 1 (the constructor refused more) */
        moe_tensor xr, ir, wr, outr;
        if ((st = moe_mk_view(x, 0, x->dtype, 2, (int64_t[2]){T, H}, &xr)) ||
            (st = moe_mk_view(topk_ids, 0, MOE_I32, 2, (int64_t[2]){T, k}, &ir)) ||
            (st = moe_mk_view(topk_weights, 0, MOE_F32, 2, (int64_t[2]){T, k}, &wr)) ||
            (st = moe_mk_view(out, 0, out->dtype, 2, (int64_t[2]){T, H}, &outr)))
            return st;
        return moe_mk_forward(mk, w, &xr, &ir, &wr, &outr);
    }
    if (T == 0) return async && between ? between(user) : MOE_OK;
    moe_mk_rank *ranks = calloc((size_t)R, sizeof *ranks);
    if (!ranks) return moe_fail(MOE_ERR_NOMEM, "forward_ranks: rank table");
    void *state = NULL;
    moe_war_kind war = mk->ex->finalize_weight_and_reduce_impl(mk);
    if ((st = mk->pf->ep_prepare(mk, x, topk_ids, topk_weights, ranks, &state))) goto done;
    /* prepare_async: the dispatch is issued; the caller's work runs before
     * the receive (simulated ranks: the rows are already there) */
    if (async && between && (st = between(user))) goto done;
    for (int r = 0; r < R && st == MOE_OK; r++) {
        moe_mk_rank *rk = &ranks[r];
        int64_t n = rank_rows_in(rk);
        if (n == 0) continue;
        if (rk->prep.format == MOE_FMT_BATCHED && war != MOE_WAR_DELEGATE) {
            st = moe_fail(MOE_ERR_UNSUPPORTED, "pf '%s' x experts '%s': the combine weighs and reduces, so the "
                          "experts' weight-and-reduce must be Delegate, not %s", mk->pf->name, mk->ex->name,
                          moe_war_name(war));
            break;
        } /* vLLM skips the experts and the reduce on a rank with no rows */
        moe_mk_weights lw;
        moe_tensor v[8];
        moe_tensor fused;
        memset(&fused, 0, sizeof fused);
        if ((st = local_weights(mk, w, r, &lw, v))) break;
        if ((st = run_experts(mk, &lw, &rk->prep, &rk->topk_ids, &rk->topk_weights, n, &fused))) {
            const int32_t *id = rk->topk_ids.data;
            int64_t neg = 0;
            for (int64_t i = 0; id && i < moe_tensor_numel(&rk->topk_ids); i++) neg += id[i] < 0;
            if (neg && !takes_nonlocal_ids(mk->ex)) { /* name the cause: the experts' stages refused the -1
                                                        slots (the types that take them fail for real) */
                char why[256];
                snprintf(why, sizeof why, "%s", moe_last_error());
                st = moe_fail(MOE_ERR_UNSUPPORTED, "pf '%s' x experts '%s', rank %d: the experts cannot take the "
                              "%lld slots of non-local experts (-1 ids; no expert map in this slice): %s",
                              mk->pf->name, mk->ex->name, r, (long long)neg, why);
            }
            break;
        }
        if (rk->prep.format == MOE_FMT_STANDARD) st = moe_mk_finalize_standard(mk, &fused, &rk->topk_weights, war, &rk->partial);
        else st = mk->ops->copy(&rk->partial, &fused); /* Batched: Delegate, the combine weighs; Grouped: the
                                                           experts weighed, the combine sums */
        moe_mk_free(mk, &fused);
    }
    if (st == MOE_OK) st = mk->pf->ep_combine(mk, state, out);
done:
    for (int r = 0; r < R; r++) {
        prep_free(mk, &ranks[r].prep);
        moe_mk_free(mk, &ranks[r].topk_ids), moe_mk_free(mk, &ranks[r].topk_weights);
        moe_mk_free(mk, &ranks[r].partial);
    }
    free(ranks);
    if (mk->pf->ep_release) mk->pf->ep_release(mk, state);
    return st;
}

moe_status moe_mk_batched_rank_views(moe_mk_rank *ranks, int R, int64_t El, int64_t rows, int64_t H,
                                     moe_dtype x_dtype, const moe_tensor *rx, const moe_tensor *cnt_t,
                                     const moe_tensor *rs, int64_t S, const moe_tensor *y, const char *who)
{
    moe_status st;
    const int32_t *cnt = cnt_t->data;
    for (int j = 0; j < R; j++) {
        moe_mk_prep *pp = &ranks[j].prep;
        pp->format = MOE_FMT_BATCHED, pp->x_dtype = x_dtype;
        pp->num_local_experts = (int)El, pp->max_tokens = (int)rows;
        moe_tensor v;
        if ((st = moe_mk_rows(rx, j, 1, &v)) ||
            (st = moe_mk_view(&v, 0, rx->dtype, 3, (int64_t[3]){El, rows, H}, &pp->a1q)) ||
            (st = moe_mk_rows(y, j, 1, &v)) ||
            (st = moe_mk_view(&v, 0, x_dtype, 3, (int64_t[3]){El, rows, H}, &ranks[j].partial)) ||
            (st = moe_mk_rows(cnt_t, j, 1, &v)) ||
            (st = moe_mk_view(&v, 0, MOE_I32, 1, (int64_t[1]){El}, &pp->counts)))
            return st;
        if (!rs || !S) continue;
        pp->ex_scale = calloc((size_t)El, sizeof(moe_tensor));
        if (!pp->ex_scale) return moe_fail(MOE_ERR_NOMEM, "%s: scale lists", who);
        for (int64_t l = 0; l < El; l++) {
            int64_t n = cnt[j * El + l];
            if (n == 0) continue;
            if ((st = moe_mk_rows(rs, j, 1, &v)) ||
                (st = moe_mk_view(&v, (size_t)l * (size_t)(rows * S) * sizeof(float), MOE_F32, 2,
                                  (int64_t[2]){n, S}, &pp->ex_scale[l])))
                return st;
        }
    }
    return MOE_OK;
}
