/* The machinery every golden case shares: named tensor sets, running a
 * case on an ops table (device copies in and out), seeded input builders
 * and the case.json helpers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "golden_internal.h"
#include "moe/format.h"
#include "moe/rng.h"

/* ---- sets ----------------------------------------------------------------------- */

void moe_golden_set_init(moe_golden_set *s) { memset(s, 0, sizeof *s); }

void moe_golden_set_free(moe_golden_set *s)
{
    if (!s) return;
    for (int i = 0; i < s->n; i++) moe_tensor_free(&s->t[i]);
    moe_golden_set_init(s);
}

static int valid_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n >= MOE_GOLDEN_NAME_MAX) return 0;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_')) return 0;
    return 1;
}

moe_status moe_golden_set_add(moe_golden_set *s, const char *name, moe_dtype dtype, int ndim,
                              const int64_t *shape, moe_tensor **out)
{
    if (out) *out = NULL;
    if (!s || !name) return moe_fail(MOE_ERR_NULL, "golden set: s and name must not be NULL");
    if (!valid_name(name))
        return moe_fail(MOE_ERR_INVALID_ARG, "tensor name '%s': 1..%d characters of [a-z0-9_]", name,
                        MOE_GOLDEN_NAME_MAX - 1);
    if (moe_golden_set_find(s, name)) return moe_fail(MOE_ERR_INVALID_ARG, "tensor name '%s': already in the set", name);
    if (s->n >= MOE_GOLDEN_MAX_TENSORS)
        return moe_fail(MOE_ERR_INVALID_ARG, "tensor '%s': a set holds at most %d tensors", name, MOE_GOLDEN_MAX_TENSORS);
    moe_status st = moe_tensor_alloc(&s->t[s->n], dtype, ndim, shape);
    if (st != MOE_OK) return moe_fail(st, "tensor '%s': %s", name, moe_last_error());
    snprintf(s->name[s->n], MOE_GOLDEN_NAME_MAX, "%s", name);
    if (out) *out = &s->t[s->n];
    s->n++;
    return MOE_OK;
}

const moe_tensor *moe_golden_set_find(const moe_golden_set *s, const char *name)
{
    for (int i = 0; s && name && i < s->n; i++)
        if (!strcmp(s->name[i], name)) return &s->t[i];
    return NULL;
}

/* ---- kinds ----------------------------------------------------------------------- */

/* *known = 1 when kind names an ops entry; returns whether ops has it. */
static int ops_entry(const moe_ops *ops, const char *kind, int *known)
{
    *known = 0;
#define K(e) \
    if (!strcmp(kind, #e)) return *known = 1, ops && ops->e != NULL;
    K(route) K(align_block_size) K(align_batched) K(sort_ck) K(maps_trtllm) K(quantize) K(dequantize)
    K(permute_rows) K(unpermute_rows) K(expand_trtllm) K(batched_scatter) K(permute_grouped) K(grouped_gemm)
    K(activation) K(war_contiguous) K(war_noop) K(war_naive_batched) K(finalize_trtllm) K(ep_allgather_dispatch)
    K(ep_reduce_scatter_combine) K(deepep_layout) K(deepep_dispatch) K(deepep_combine) K(deepep_ll_dispatch)
    K(deepep_ll_combine) K(pplx_dispatch) K(pplx_combine) K(hep_dispatch_with_permute)
    K(hep_combine_with_unpermute)
#undef K
    return 0;
}

int moe_golden_kind_known(const char *kind)
{
    int known;
    if (!kind) return 0;
    if (!strcmp(kind, "forward")) return 1;
    ops_entry(NULL, kind, &known);
    return known;
}

const char *moe_golden_tolerance_stage(const moe_golden_case *c)
{
    return strcmp(c->kind, "forward") ? c->kind : "e2e/exact";
}

moe_status gk_need(const moe_ops *ops, const char *kind)
{
    int known;
    if (!strcmp(kind, "forward")) return MOE_OK;
    if (!ops_entry(ops, kind, &known))
        return moe_fail(MOE_ERR_UNSUPPORTED, "backend '%s' has no %s entry", ops && ops->name ? ops->name : "?", kind);
    return MOE_OK;
}

moe_status moe_golden_compute(const moe_golden_case *c, moe_golden_set *in, moe_golden_set *out)
{
    moe_golden_set_init(in);
    moe_golden_set_init(out);
    moe_status st = c->make(c, in);
    if (st == MOE_OK) st = c->run(c, &moe_ops_ref, in, out);
    if (st != MOE_OK) {
        st = moe_fail(st, "case %s: %s", c->name, moe_last_error());
        moe_golden_set_free(in);
        moe_golden_set_free(out);
    }
    return st;
}

/* ---- running on an ops table ------------------------------------------------------ */

void gk_begin(gk_run *r, const moe_ops *ops, const moe_golden_set *in, moe_golden_set *out)
{
    memset(r, 0, sizeof *r);
    r->ops = ops, r->in = in, r->out = out;
    r->st = moe_ops_check(ops);
}

static moe_tensor *dev_alloc(gk_run *r, moe_dtype d, int ndim, const int64_t *shape, const char *what)
{
    if (r->st != MOE_OK) return NULL;
    if (r->n >= GK_MAX_DEV) {
        r->st = moe_fail(MOE_ERR_INTERNAL, "%s: more than %d device tensors in one golden run", what, GK_MAX_DEV);
        return NULL;
    }
    moe_tensor *t = &r->dev[r->n];
    moe_status st = r->ops->alloc(t, d, ndim, shape);
    if (st != MOE_OK) {
        r->st = moe_fail(st, "%s: %s", what, moe_last_error());
        return NULL;
    }
    r->out_name[r->n++] = NULL;
    return t;
}

const moe_tensor *gk_opt(gk_run *r, const char *name)
{
    const moe_tensor *h = moe_golden_set_find(r->in, name);
    if (!h) return NULL;
    moe_tensor *t = dev_alloc(r, h->dtype, h->ndim, h->shape, name);
    if (!t) return NULL;
    moe_status st = r->ops->copy(t, h);
    if (st != MOE_OK) {
        r->st = moe_fail(st, "input %s: copy to the backend: %s", name, moe_last_error());
        return NULL;
    }
    return t;
}

const moe_tensor *gk_in(gk_run *r, const char *name)
{
    const moe_tensor *t = gk_opt(r, name);
    if (!t && r->st == MOE_OK) r->st = moe_fail(MOE_ERR_INVALID_ARG, "input %s: not in the case's inputs", name);
    return t;
}

moe_tensor *gk_out(gk_run *r, const char *name, moe_dtype d, int ndim, const int64_t *shape)
{
    moe_tensor *t = dev_alloc(r, d, ndim, shape, name);
    if (t) r->out_name[r->n - 1] = name;
    return t;
}

moe_tensor *gk_tmp(gk_run *r, moe_dtype d, int ndim, const int64_t *shape)
{
    return dev_alloc(r, d, ndim, shape, "scratch");
}

moe_status gk_done(gk_run *r, moe_status st)
{
    if (r->st == MOE_OK && st != MOE_OK) r->st = st;
    if (r->st == MOE_OK) r->st = r->ops->synchronize();
    for (int i = 0; i < r->n && r->st == MOE_OK; i++) {
        if (!r->out_name[i]) continue;
        moe_tensor *h;
        const moe_tensor *d = &r->dev[i];
        r->st = moe_golden_set_add(r->out, r->out_name[i], d->dtype, d->ndim, d->shape, &h);
        if (r->st == MOE_OK) r->st = r->ops->copy(h, d);
    }
    for (int i = 0; i < r->n; i++) r->ops->free(&r->dev[i]);
    r->n = 0;
    return r->st;
}

/* ---- inputs ------------------------------------------------------------------------- */

moe_tensor *gk_new(moe_golden_set *s, moe_status *st, const char *name, moe_dtype d, int ndim, const int64_t *shape)
{
    moe_tensor *t = NULL;
    if (*st != MOE_OK) return NULL;
    *st = moe_golden_set_add(s, name, d, ndim, shape, &t);
    return t;
}

uint64_t gk_stream(const moe_golden_case *c, const char *tag)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s/%s", c->name, tag);
    return moe_rng_stream_id(buf);
}

moe_status gk_normal(const moe_golden_case *c, moe_tensor *t, const char *tag, float sd)
{
    if (!t) return moe_fail(MOE_ERR_NULL, "%s: no tensor", tag);
    return moe_tensor_fill_normal(t, c->seed, gk_stream(c, tag), 0.0f, sd);
}

moe_status gk_uniform(const moe_golden_case *c, moe_tensor *t, const char *tag, float lo, float hi)
{
    if (!t) return moe_fail(MOE_ERR_NULL, "%s: no tensor", tag);
    if (t->dtype != MOE_F32) return moe_fail(MOE_ERR_DTYPE, "%s: uniforms fill f32 tensors", tag);
    return moe_rng_fill_uniform(t->data, (size_t)moe_tensor_numel(t), c->seed, gk_stream(c, tag), 0, lo, hi);
}

moe_status gk_ids(const moe_golden_case *c, moe_tensor *t, const char *tag, int E, unsigned neg1_pct, int distinct)
{
    if (!t) return moe_fail(MOE_ERR_NULL, "%s: no tensor", tag);
    if (t->dtype != MOE_I32 || t->ndim < 2) return moe_fail(MOE_ERR_DTYPE, "%s: ids are int32 [.., k]", tag);
    int k = (int)t->shape[t->ndim - 1];
    return moe_rng_topk_ids(t->data, moe_tensor_numel(t) / (k ? k : 1), k, E, c->seed, gk_stream(c, tag), neg1_pct,
                            distinct);
}

static const char *const IDS_NAMES[] = {"distinct", "subset_1_and_E-3", "all_to_expert_3", "duplicates_allowed",
                                        "lower_half_only"};

const char *gk_ids_pattern_name(int mode) { return mode >= 0 && mode <= IDS_LOW_HALF ? IDS_NAMES[mode] : "?"; }

moe_status gk_ids_pattern(const moe_golden_case *c, moe_tensor *t, int mode)
{
    int E = (int)c->dims.E;
    moe_status st = gk_ids(c, t, "topk_ids", mode == IDS_LOW_HALF ? E / 2 : E, 0, mode != IDS_DUPLICATES);
    if (st != MOE_OK) return st;
    int32_t *v = t->data;
    int64_t n = moe_tensor_numel(t), k = t->shape[t->ndim - 1];
    for (int64_t i = 0; i < n; i++) {
        if (mode == IDS_SUBSET) v[i] = (i / k + i % k) % 2 ? E - 3 : 1;
        if (mode == IDS_ONE_EXPERT) v[i] = 3;
    }
    return MOE_OK;
}

moe_status gk_store_f32(moe_tensor *t, const float *v, int64_t n)
{
    if (!t) return moe_fail(MOE_ERR_NULL, "gk_store_f32: no tensor");
    if (n != moe_tensor_numel(t)) return moe_fail(MOE_ERR_SHAPE, "gk_store_f32: %lld values for a tensor of %lld",
                                                 (long long)n, (long long)moe_tensor_numel(t));
    if (t->dtype == MOE_F32) {
        if (n) memcpy(t->data, v, sizeof(float) * (size_t)n);
        return MOE_OK;
    }
    return moe_encode_array(t->dtype, v, (size_t)n, MOE_POLICY_IEEE_RNE, t->data, NULL);
}

moe_status gk_quantize_into(moe_golden_set *s, const moe_quant_spec *spec, const moe_tensor *x, const char *name)
{
    moe_quant_dims d;
    moe_status st = moe_quant_shapes(spec, x->ndim, x->shape, &d);
    if (st != MOE_OK) return st;
    char sn[MOE_GOLDEN_NAME_MAX], gn[MOE_GOLDEN_NAME_MAX];
    snprintf(sn, sizeof sn, "%s_scale", name);
    snprintf(gn, sizeof gn, "%s_global", name);
    moe_tensor *q = gk_new(s, &st, name, d.q_dtype, d.q_ndim, d.q_shape);
    moe_tensor *sc = d.has_scale ? gk_new(s, &st, sn, d.scale_dtype, d.scale_ndim, d.scale_shape) : NULL;
    moe_tensor *gl = d.has_global ? gk_new(s, &st, gn, MOE_F32, d.global_ndim, d.global_shape) : NULL;
    if (st != MOE_OK) return st;
    return moe_ref_quantize(spec, x, NULL, q, sc, gl);
}

/* ---- case.json helpers ------------------------------------------------------------- */

moe_status gk_json_add(cJSON *obj, const char *key, cJSON *item)
{
    if (!item) return moe_fail(MOE_ERR_NOMEM, "case.json: no memory for '%s'", key);
    if (!cJSON_AddItemToObject(obj, key, item)) {
        cJSON_Delete(item);
        return moe_fail(MOE_ERR_NOMEM, "case.json: no memory for '%s'", key);
    }
    return MOE_OK;
}

moe_status gk_json_str(cJSON *obj, const char *key, const char *v) { return gk_json_add(obj, key, cJSON_CreateString(v)); }

cJSON *gk_json_double(double v)
{
    if (isnan(v)) return cJSON_CreateString("nan");
    if (isinf(v)) return cJSON_CreateString(v > 0 ? "inf" : "-inf");
    return cJSON_CreateNumber(v);
}

moe_status gk_json_num(cJSON *obj, const char *key, double v) { return gk_json_add(obj, key, gk_json_double(v)); }

cJSON *gk_spec_json(const moe_quant_spec *s)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    moe_status st = MOE_OK;
#define S(k, v) \
    if (st == MOE_OK) st = gk_json_str(o, k, v)
#define N(k, v) \
    if (st == MOE_OK) st = gk_json_num(o, k, (double)(v))
    S("operand", s->operand == MOE_OPERAND_WEIGHT ? "weight" : "act");
    S("elem", moe_dtype_get(s->elem)->name);
    S("gran", moe_scale_gran_name(s->gran));
    if (s->gran != MOE_GRAN_NONE) {
        N("group_k", s->group_k);
        N("block_n", s->block_n);
        S("scale_dtype", moe_dtype_get(s->scale_dtype)->name);
        S("rule", moe_scale_rule_name(s->rule));
        S("layout", moe_sf_layout_name(s->layout));
        S("q_op", s->q_op == MOE_QOP_MUL ? "mul" : "div");
        N("qmax", s->qmax);
        N("qmin", s->qmin);
        N("amax_floor", s->amax_floor);
        N("scale_floor", s->scale_floor);
        N("pow2_scale", s->pow2_scale);
        N("pow2_floor", s->pow2_floor);
        N("emax_elem", s->emax_elem);
        N("use_global_scale", s->use_global_scale);
        N("global_numer", s->global_numer);
        N("global_amax_floor", s->global_amax_floor);
        S("amax_nan", s->amax_nan == MOE_AMAX_NAN_IGNORE ? "ignore" : "propagate");
        S("nan_clamp", s->clamp == MOE_NANCLAMP_KEEP ? "keep" : s->clamp == MOE_NANCLAMP_MIN_MAX ? "min_max" : "max_min");
        N("k_divisible", s->k_divisible);
    }
    /* the element conversion every spec ends in (include/moe/quant.h) */
    S("conversion", s->elem == MOE_E4M3 || s->elem == MOE_E2M1 ? "SAT_RNE"
                    : moe_dtype_get(s->elem)->is_float    ? "IEEE_RNE"
                                                          : "RNE_clamp");
#undef S
#undef N
    if (st != MOE_OK) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *gk_metrics_json(const moe_cmp_metrics *m)
{
    cJSON *o = cJSON_CreateObject(), *first = cJSON_CreateArray();
    if (!o || !first) {
        cJSON_Delete(o), cJSON_Delete(first);
        return NULL;
    }
    moe_status st = MOE_OK;
    st = gk_json_num(o, "n", (double)m->n);
    if (st == MOE_OK) st = gk_json_num(o, "mismatches", (double)m->mismatches);
    if (st == MOE_OK) st = gk_json_num(o, "class_mismatches", (double)m->class_mismatches);
    if (st == MOE_OK) st = gk_json_num(o, "bound_failures", (double)m->bound_failures);
    if (st == MOE_OK) st = gk_json_num(o, "max_abs", m->max_abs);
    if (st == MOE_OK) st = gk_json_num(o, "max_ulp", m->max_ulp);
    if (st == MOE_OK) st = gk_json_num(o, "share", m->share);
    for (int i = 0; st == MOE_OK && i < m->nfirst; i++) {
        const moe_cmp_mismatch *f = &m->first[i];
        cJSON *e = cJSON_CreateObject();
        if (!e || !cJSON_AddItemToArray(first, e)) {
            cJSON_Delete(e);
            st = MOE_ERR_NOMEM;
            break;
        }
        st = gk_json_num(e, "index", (double)f->index);
        if (st == MOE_OK) st = gk_json_num(e, "got", f->got);
        if (st == MOE_OK) st = gk_json_num(e, "want", f->want);
        if (st == MOE_OK) st = gk_json_str(e, "got_hex", f->got_hex);
        if (st == MOE_OK) st = gk_json_str(e, "want_hex", f->want_hex);
    }
    if (st == MOE_OK) st = gk_json_add(o, "first", first);
    else cJSON_Delete(first);
    if (st != MOE_OK) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}
