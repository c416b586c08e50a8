/* The sweep's seeded problems. Weights depend on (seed, scheme, E, H, I,
 * gated) only, so every cell of a shape and scheme multiplies the same
 * experts and the last weights are kept per thread (cases come grouped by
 * shape and scheme); x and the routing depend on (seed, scheme, shape,
 * k, M, world, matched), not on the pair, so the cells of one row of the
 * matrix see the same tokens.
 * Data: x ~ N(0, 1) in x's storage dtype; w1 ~ N(0, 1/sqrt(H)), w2 ~
 * N(0, 1/sqrt(I)) quantized with the scheme's weight spec, so activations
 * stay O(1) through both GEMMs; each token takes k distinct experts
 * uniformly (a seeded partial Fisher-Yates) with router weights uniform in
 * [0.05, 1.05). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "moe/format.h"
#include "moe/rng.h"
#include "sweep_internal.h"

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h ^= h >> 31, h *= 0xBF58476D1CE4E5B9ull, h ^= h >> 27;
    return h;
}

void moe_sweep_matched_groups(float *f, int64_t n)
{
    for (int64_t g = 0; g < n / 128; g++) {
        float *v = f + g * 128;
        int im = 0;
        for (int i = 0; i < 128; i++) {
            if (fabsf(v[i]) > fabsf(v[im])) im = i;
            if (v[i] > 1.5f) v[i] = 1.5f;
            if (v[i] < -1.5f) v[i] = -1.5f;
        }
        v[im] = v[im] < 0 ? -1.75f : 1.75f;
    }
}

/* Weights shared by the threads: a pool of entries, each pinned by the
 * problems that view it (users), rebuilt only when unpinned. Built inside
 * the critical section, so two threads that need the same weights build
 * them once. At most KEEP sets stay cached; past that an unpinned one is
 * rebuilt, and only when every cached set is pinned (more jobs than KEEP)
 * does the pool grow, up to one set per possible job. */
typedef struct {
    uint64_t key;
    int valid, users;
    moe_tensor q1, s1, g1, q2, s2, g2;
} weight_entry;

enum { KEEP = 8, POOL = 260 }; /* POOL: --jobs is at most 256, each job pins one set */
static weight_entry pool[POOL];

static void free_entry(weight_entry *e)
{
    moe_tensor *ts[] = {&e->q1, &e->s1, &e->g1, &e->q2, &e->s2, &e->g2};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) moe_tensor_free(ts[i]);
    e->valid = 0;
}

static void unpin(int pin)
{
    int slot = pin - 1;
    if (slot < 0) return;
#pragma omp critical(moe_sweep_weights)
    pool[slot].users--;
}

/* the last problem of this thread: cells of one matrix row share it;
 * callers get views */
static _Thread_local sweep_problem last;
static _Thread_local uint64_t last_key;

void moe_sweep_cache_release(void)
{
    sweep_problem_free(&last);
    memset(&last, 0, sizeof last);
#pragma omp critical(moe_sweep_weights)
    for (int i = 0; i < POOL; i++)
        if (pool[i].valid && pool[i].users == 0) free_entry(&pool[i]);
}

static moe_status quant_weights(const moe_quant_spec *ws, int64_t E, int64_t N, int64_t K, uint64_t seed,
                                uint64_t stream, moe_tensor *q, moe_tensor *s, moe_tensor *g)
{
    int64_t sh[3] = {E, N, K};
    moe_tensor f;
    moe_status st = moe_tensor_alloc(&f, MOE_F32, 3, sh);
    if (st) return st;
    st = moe_rng_fill_normal(f.data, (size_t)(E * N * K), seed, stream, 0, 0.0f, 1.0f / sqrtf((float)K));
    if (st == MOE_OK) st = moe_quant_alloc(ws, 3, sh, q, s, g);
    if (st == MOE_OK) st = moe_ref_quantize(ws, &f, NULL, q, ws->gran ? s : NULL, ws->use_global_scale ? g : NULL);
    moe_tensor_free(&f);
    return st;
}

static moe_status build(const moe_sweep_case *c, int n1, uint64_t key, weight_entry *e)
{
    moe_quant_spec ws;
    moe_status st = moe_scheme_spec(c->scheme, MOE_OPERAND_WEIGHT, &ws);
    if (st || (st = quant_weights(&ws, c->E, n1, c->H, key, 2, &e->q1, &e->s1, &e->g1)) ||
        (st = quant_weights(&ws, c->E, c->H, c->I, key, 3, &e->q2, &e->s2, &e->g2)))
        return free_entry(e), st;
    e->key = key, e->valid = 1;
    return MOE_OK;
}

static moe_status weights(const moe_sweep_case *c, int n1, sweep_problem *p)
{
    uint64_t key = mix(mix(mix(mix(mix(c->seed, (uint64_t)c->scheme), (uint64_t)c->E), (uint64_t)c->H),
                           (uint64_t)c->I), (uint64_t)n1);
    moe_status st = MOE_OK;
    int slot = -1;
#pragma omp critical(moe_sweep_weights)
    {
        for (int i = 0; i < POOL && slot < 0; i++)
            if (pool[i].valid && pool[i].key == key) slot = i;
        int cached = 0;
        for (int i = 0; i < POOL; i++) cached += pool[i].valid;
        for (int i = 0; i < POOL && slot < 0 && cached < KEEP; i++) /* room: an empty entry */
            if (!pool[i].valid) slot = i;
        for (int i = 0; i < POOL && slot < 0; i++) /* else an unpinned one */
            if (pool[i].valid && pool[i].users == 0) slot = i;
        for (int i = 0; i < POOL && slot < 0; i++) /* every one pinned: grow */
            if (!pool[i].valid) slot = i;
        if (slot < 0) st = moe_fail(MOE_ERR_NOMEM, "sweep: more than %d weight sets pinned at once", POOL);
        else if (!(pool[slot].valid && pool[slot].key == key)) {
            free_entry(&pool[slot]);
            st = build(c, n1, key, &pool[slot]);
        }
        if (st == MOE_OK) pool[slot].users++;
    }
    if (st) return st;
    const weight_entry *e = &pool[slot];
    p->wpin = slot + 1;
    /* views: the problem never frees the pooled weights */
    p->q1 = e->q1, p->s1 = e->s1, p->g1 = e->g1, p->q2 = e->q2, p->s2 = e->s2, p->g2 = e->g2;
    moe_tensor *ts[] = {&p->q1, &p->s1, &p->g1, &p->q2, &p->s2, &p->g2};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) ts[i]->owns = 0;
    return MOE_OK;
}

static moe_status data(const moe_sweep_case *c, const sweep_class *k, sweep_problem *p)
{
    uint64_t seed = mix(mix(mix(mix(mix(mix(c->seed, (uint64_t)c->scheme), (uint64_t)c->E), (uint64_t)c->H),
                                (uint64_t)c->k), (uint64_t)c->M), (uint64_t)(c->world * 2 + k->matched));
    int64_t G = p->G, H = c->H, n = G * H;
    moe_status st;
    if ((st = moe_tensor_alloc(&p->x, p->xd, 2, (int64_t[2]){G, H})) ||
        (st = moe_tensor_alloc(&p->ids, MOE_I32, 2, (int64_t[2]){G, c->k})) ||
        (st = moe_tensor_alloc(&p->w, MOE_F32, 2, (int64_t[2]){G, c->k})))
        return st;
    float *f = malloc(sizeof(float) * (size_t)(n + 1));
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)c->E);
    if (!f || !perm) return free(f), free(perm), moe_fail(MOE_ERR_NOMEM, "sweep: x of %lld", (long long)n);
    st = moe_rng_fill_normal(f, (size_t)n, seed, 1, 0, 0.0f, 1.0f);
    if (k->matched) moe_sweep_matched_groups(f, n);
    if (st == MOE_OK && p->xd == MOE_F32) memcpy(p->x.data, f, p->x.nbytes);
    else if (st == MOE_OK) st = moe_encode_array(p->xd, f, (size_t)n, MOE_POLICY_IEEE_RNE, p->x.data, NULL);
    for (int64_t t = 0; t < G; t++) { /* k distinct experts: the first k of a seeded shuffle */
        for (int e = 0; e < c->E; e++) perm[e] = e;
        for (int j = 0; j < c->k; j++) {
            int r = j + (int)(moe_rng_u32(seed, 4, (uint64_t)(t * c->k + j)) % (uint32_t)(c->E - j));
            int32_t tmp = perm[j];
            perm[j] = perm[r], perm[r] = tmp;
            ((int32_t *)p->ids.data)[t * c->k + j] = perm[j];
            ((float *)p->w.data)[t * c->k + j] = 0.05f + moe_rng_uniform(seed, 5, (uint64_t)(t * c->k + j));
        }
    }
    free(f), free(perm);
    return st;
}


static void own_nothing(sweep_problem *p)
{
    moe_tensor *ts[] = {&p->x, &p->ids, &p->w, &p->out, &p->slots};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) ts[i]->owns = 0;
    p->wpin = 0; /* the pin stays with the thread's last problem */
}

static void relink(sweep_problem *p)
{
    moe_mk_weights *w = &p->mw;
    w->w1 = &p->q1, w->w1_scale = p->s1.data ? &p->s1 : NULL, w->w1_global = p->g1.data ? &p->g1 : NULL;
    w->w2 = &p->q2, w->w2_scale = p->s2.data ? &p->s2 : NULL, w->w2_global = p->g2.data ? &p->g2 : NULL;
    moe_forward_args *a = &p->fa;
    a->topk_ids = &p->ids, a->topk_weights = &p->w;
    a->w1 = w->w1, a->w1_scale = w->w1_scale, a->w1_global = w->w1_global;
    a->w2 = w->w2, a->w2_scale = w->w2_scale, a->w2_global = w->w2_global;
    a->slot_rows = NULL;
}

static moe_status make_new(const moe_sweep_case *c, const sweep_class *k, sweep_problem *p);

moe_status sweep_problem_make(const moe_sweep_case *c, const sweep_class *k, sweep_problem *p)
{
    uint64_t key = mix(mix(mix(mix(mix(mix(mix(mix(mix(mix(c->seed, (uint64_t)c->scheme), (uint64_t)c->E),
        (uint64_t)c->H), (uint64_t)c->I), (uint64_t)c->k), (uint64_t)c->M), (uint64_t)(c->world * 2 + k->matched)),
        (uint64_t)c->act), (uint64_t)k->a1), (uint64_t)k->a2);
    if (!(last.x.data && last_key == key)) {
        sweep_problem_free(&last);
        moe_status st = make_new(c, k, &last);
        if (st) return memset(&last, 0, sizeof last), st;
        last_key = key;
    }
    *p = last;
    own_nothing(p);
    relink(p);
    return MOE_OK;
}

static moe_status make_new(const moe_sweep_case *c, const sweep_class *k, sweep_problem *p)
{
    memset(p, 0, sizeof *p);
    moe_quant_spec as;
    moe_status st = moe_scheme_spec(c->scheme, MOE_OPERAND_ACT, &as);
    if (st) return st;
    p->xd = as.gran == MOE_GRAN_NONE ? as.elem : MOE_BF16;
    p->G = c->world * c->M;
    int n1 = (moe_act_is_gated(c->act) ? 2 : 1) * c->I;
    if ((st = weights(c, n1, p)) || (st = data(c, k, p))) return sweep_problem_free(p), st;
    moe_forward_args *a = &p->fa;
    a->scheme = c->scheme, a->act = moe_act_defaults(c->act, MOE_LAYOUT_GATE_UP);
    a->a1_domain = k->a1, a->a2_domain = k->a2;
    relink(p);
    if ((st = moe_tensor_alloc(&p->out, p->xd, 2, (int64_t[2]){p->G, c->H})) ||
        (st = moe_tensor_alloc(&p->slots, p->xd, 2, (int64_t[2]){(int64_t)p->G * c->k, c->H})))
        return sweep_problem_free(p), st;
    a->slot_rows = &p->slots;
    st = moe_ref_forward(a, &p->x, &p->out);
    a->slot_rows = NULL;
    if (st) sweep_problem_free(p);
    return st;
}

void sweep_problem_free(sweep_problem *p)
{
    moe_tensor *ts[] = {&p->x, &p->ids, &p->w, &p->out, &p->slots};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) moe_tensor_free(ts[i]);
    unpin(p->wpin);
    p->wpin = 0;
}
