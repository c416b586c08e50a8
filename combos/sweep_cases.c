/* The sweep's case list (include/moe/sweep.h). Tiers:
 *  quick     the tiny shape (E 8, H 256, I 128): every pf x experts x scheme
 *            at worlds 1 (single-rank PFs) or 2 and 4 (expert-parallel),
 *            with top-k, activation and tokens per rank rotating over the
 *            cells so the tier touches each value; make check runs it;
 *  standard  the standard model shapes scaled down in H and I for the CPU
 *            (expert count and top-k kept, which set the routing): every
 *            cell at each shape, the model's own activation, worlds up to 8;
 *  full      standard's shapes and the tiny one, every top-k of {1, 2, 3,
 *            6, 8} the shape allows and every world, tokens rotating.
 * A PF that accepts only listed hidden sizes (DeepEP-LL) runs at the
 * smallest listed size >= the shape's H, so it runs instead of only being
 * refused (its refusal at other sizes is tested by check_compat).
 * Tokens per rank rotate over 1..16 and non-powers of two. A single-rank
 * cell whose pair a backend has a fused path for (include/moe/fused_run.h)
 * is also run at FUSED_M tokens where tokens x top-k <= FUSED_SLOTS, in
 * every tier. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/compat.h"
#include "moe/fused_run.h"
#include "moe/shapes.h"
#include "moe/sweep.h"

static const char *const TIER_NAMES[MOE_TIER_COUNT] = {"quick", "standard", "full"};

const char *moe_sweep_tier_name(moe_sweep_tier t) { return (unsigned)t < MOE_TIER_COUNT ? TIER_NAMES[t] : "?"; }

moe_status moe_sweep_tier_from_name(const char *name, moe_sweep_tier *out)
{
    for (int t = 0; name && t < MOE_TIER_COUNT; t++)
        if (!strcmp(name, TIER_NAMES[t])) return *out = (moe_sweep_tier)t, MOE_OK;
    return moe_fail(MOE_ERR_INVALID_ARG, "tier '%s': must be quick, standard or full", name ? name : "(null)");
}

typedef struct {
    const char *name;
    int E, k, H, I;
    moe_act act;
} shape_row;

/* the CPU tiers' shapes: the four standard model shapes (the first rows
 * of include/moe/shapes.h) with H and I scaled down, named "<model>/cpu" */
static const shape_row TINY = {"tiny", 8, 2, 256, 128, MOE_ACT_SILU};
enum { NMODELS = 4 };
static shape_row MODELS[NMODELS];
static char MODEL_NAMES[NMODELS][48];

static void load_models(void)
{
    for (int i = 0; i < NMODELS && i < moe_shape_count(); i++) {
        const moe_shape *m = moe_shape_get(i);
        snprintf(MODEL_NAMES[i], sizeof MODEL_NAMES[i], "%s/cpu", m->name);
        MODELS[i] = (shape_row){MODEL_NAMES[i], m->E, m->k, m->H_cpu, m->I_cpu, m->act};
    }
}

static const int M_ROT[] = {1, 3, 5, 7, 16, 2, 11, 4, 13, 8};
static const int K_ALL[] = {1, 2, 3, 6, 8};
/* A fused path picks its kernels by tokens and slots an expert (cuda-fast:
 * optimized/cuda/fast.cu fx_plan_make), which the rotation above never
 * takes past 16 tokens, so its cells ran one form only (the 16-row tiles).
 * These token counts reach the others at the CPU tiers' sizes: 1 the
 * one-token matrix-vector kernels, 64 (8-24 slots an expert at E 8) the
 * swapped and persistent decode tiles, 256 (32-96) the 64-row tiles, 512
 * (64-192) the persistent 128-row ones; the record's reason names the plan
 * that ran. A point is taken where M x top-k is at most FUSED_SLOTS: the
 * host reference's time grows with the slots (the standard tier's 72
 * M = 512 cells took 600 s on 2 cores with ref and cpu, 350 s of it the
 * 54 at E 128-256), and at E 128-256 those points reach only forms that
 * smaller M already reach. */
static const int FUSED_M[] = {1, 64, 256, 512};
enum { FUSED_SLOTS = 1024 };
static const moe_act ACT_ROT[] = {MOE_ACT_SILU,        MOE_ACT_GELU,       MOE_ACT_SWIGLUOAI, MOE_ACT_SILU,
                                  MOE_ACT_GELU_TANH,   MOE_ACT_RELU2,      MOE_ACT_SILU,      MOE_ACT_SWIGLU_CLAMP,
                                  MOE_ACT_SILU_NOMUL,  MOE_ACT_SILU,       MOE_ACT_GELU_NOMUL, MOE_ACT_IDENTITY};
#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

void moe_sweep_case_name(const moe_sweep_case *c, char *buf, size_t n)
{
    snprintf(buf, n, "moe.%s.%s.%s.%s.E%d.k%d.M%d.H%d.I%d.w%d", c->pf, c->experts, moe_scheme_name(c->scheme),
             moe_act_name(c->act), c->E, c->k, c->M, c->H, c->I, c->world);
}

typedef struct {
    moe_sweep_case *v;
    int n, cap;
} case_list;

static moe_status push(case_list *l, const moe_sweep_case *c)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 1024;
        moe_sweep_case *v = realloc(l->v, sizeof *v * (size_t)cap);
        if (!v) return moe_fail(MOE_ERR_NOMEM, "sweep: case list of %d", cap);
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = *c;
    return MOE_OK;
}

static int pf_hidden(const moe_pf_info *pf, int H)
{
    if (!pf->hidden_sizes) return H;
    int best = 0;
    for (const int *h = pf->hidden_sizes; *h; h++)
        if (*h >= H && (!best || *h < best)) best = *h;
    return best ? best : H;
}

/* one shape's cells; rot advances per cell so the rotating values spread.
 * Cells sharing weights (H, scheme) are adjacent: the PFs that run at the
 * shape's H first, then those at a listed hidden size, each scheme by
 * scheme, so a thread's weight cache rebuilds once per group. */
static moe_status add_shape(case_list *l, const shape_row *s, moe_sweep_tier tier, uint64_t seed, int *rot)
{
    static const int W_QUICK[] = {2, 4}, W_STD[] = {2, 4, 8}, W_ONE[] = {1};
    moe_status st = MOE_OK;
    for (int pass = 0; pass < 2; pass++)
    for (int sc = 0; sc < MOE_SCHEME_COUNT; sc++)
        for (int a = 0; a < moe_pf_count(); a++)
            for (int b = 0; b < moe_experts_count(); b++) {
                const moe_pf_info *pf = moe_pf_get(a);
                if ((pf_hidden(pf, s->H) != s->H) != pass) continue;
                const int *ws = W_ONE;
                int nw = 1;
                if (pf->expert_parallel) {
                    if (tier == MOE_TIER_QUICK) ws = W_QUICK, nw = NELEM(W_QUICK);
                    else ws = W_STD, nw = NELEM(W_STD);
                }
                for (int wi = 0; wi < nw; wi++) {
                    if (ws[wi] > s->E || s->E % ws[wi]) continue; /* experts split evenly over ranks */
                    /* quick rotates per cell (coverage of every value in one pass); the
                     * other tiers per (scheme, world), so the pairs of a matrix row share
                     * their tokens and the oracle runs once for them */
                    int r = tier == MOE_TIER_QUICK ? *rot : sc * 5 + ws[wi];
                    int nk = 1;
                    int ks[NELEM(K_ALL)] = {s->k};
                    if (tier == MOE_TIER_QUICK) ks[0] = 1 + r % 3;
                    if (tier == MOE_TIER_FULL) {
                        nk = 0;
                        for (int i = 0; i < NELEM(K_ALL); i++)
                            if (K_ALL[i] <= s->E) ks[nk++] = K_ALL[i];
                    }
                    for (int ki = 0; ki < nk; ki++) {
                        moe_sweep_case c;
                        memset(&c, 0, sizeof c);
                        c.pf = pf->name, c.experts = moe_experts_get(b)->name, c.scheme = (moe_scheme)sc;
                        c.act = tier == MOE_TIER_STANDARD ? s->act : ACT_ROT[r % NELEM(ACT_ROT)];
                        c.E = s->E, c.k = ks[ki], c.M = M_ROT[r % NELEM(M_ROT)];
                        c.H = pf_hidden(pf, s->H), c.I = s->I, c.world = ws[wi];
                        c.shape = s->name, c.seed = seed;
                        if ((st = push(l, &c))) return st;
                        (*rot)++;
                        /* the fused M points, beside their cell (same weights), the rotation untouched */
                        for (int fm = 0; c.world == 1 && fm < NELEM(FUSED_M) && moe_fused_pair_has_path(c.pf, c.experts); fm++) {
                            moe_sweep_case f = c;
                            f.M = FUSED_M[fm];
                            if (f.M != c.M && f.M * f.k <= FUSED_SLOTS && (st = push(l, &f))) return st;
                        }
                    }
                }
            }
    return st;
}

moe_status moe_sweep_enumerate(moe_sweep_tier tier, uint64_t seed, moe_sweep_case **cases, int *n)
{
    if (!cases || !n) return moe_fail(MOE_ERR_NULL, "moe_sweep_enumerate: cases and n must not be NULL");
    if ((unsigned)tier >= MOE_TIER_COUNT) return moe_fail(MOE_ERR_INVALID_ARG, "tier %d: unknown", (int)tier);
    case_list l = {NULL, 0, 0};
    int rot = 0;
    moe_status st = MOE_OK;
    load_models();
    if (tier != MOE_TIER_STANDARD) st = add_shape(&l, &TINY, tier, seed, &rot);
    for (int i = 0; st == MOE_OK && tier != MOE_TIER_QUICK && i < NMODELS; i++) st = add_shape(&l, &MODELS[i], tier, seed, &rot);
    if (st) return free(l.v), st;
    *cases = l.v, *n = l.n;
    return MOE_OK;
}
