/* Golden vectors (DESIGN section 8): a table of small seeded cases, each
 * exercising one ops-table entry (or the whole layer through
 * moe_ref_forward), stored as one directory per case:
 *
 *   <dir>/<case name>/case.json        dotted name, kind, scheme, seed, dims,
 *                                      the full policy tuple, reference version,
 *                                      every tensor file with dtype, shape, bytes
 *   <dir>/<case name>/in_<t>.npy       inputs, .npy v1.0 (raw bits + "<file>.json"
 *   <dir>/<case name>/out_<t>.npy      sidecar for bf16/fp8/fp4/e8m0/int4)
 *   <dir>/<case name>/MANIFEST.sha256  "<sha256 hex>  <file>" for every other
 *                                      file, `sha256sum -c` compatible
 * A digest-only case (a larger model shape) stores case.json and
 * DIGESTS.sha256 (the SHA-256 of every .npy it would write) instead of the
 * tensors; its inputs are regenerated from the seed.
 *
 * A case's inputs come from its seed through the counter-based RNG (and,
 * where a stage consumes another stage's output, from the reference run on
 * those); its outputs from its run function on the reference backend.
 * Every tensor a run function hands a stage is allocated and copied
 * through the given ops table, so the same case runs on a device backend. */
#ifndef MOE_GOLDEN_H
#define MOE_GOLDEN_H

#include <stdint.h>
#include <stdio.h>
#include "moe/compare.h"
#include "moe/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MOE_GOLDEN_FORMAT 1      /* the directory layout above */
/* Bumped when the reference's numerics change on purpose (then run
 * `moe-golden update` and commit the diff report's cases). */
#define MOE_GOLDEN_REF_VERSION 1
#define MOE_GOLDEN_MAX_TENSORS 16
#define MOE_GOLDEN_NAME_MAX 32

/* Named host tensors: a case's inputs or outputs. Names are file stems
 * ([a-z0-9_]), unique within a set. */
typedef struct {
    int n;
    char name[MOE_GOLDEN_MAX_TENSORS][MOE_GOLDEN_NAME_MAX];
    moe_tensor t[MOE_GOLDEN_MAX_TENSORS];
} moe_golden_set;

void moe_golden_set_init(moe_golden_set *s);
void moe_golden_set_free(moe_golden_set *s);
/* Adds a zeroed host tensor; *out (may be NULL) points at it. */
moe_status moe_golden_set_add(moe_golden_set *s, const char *name, moe_dtype dtype, int ndim,
                              const int64_t *shape, moe_tensor **out);
/* The tensor called name, or NULL. */
const moe_tensor *moe_golden_set_find(const moe_golden_set *s, const char *name);

/* Problem dimensions; 0 = not used by the case. */
typedef struct {
    int64_t M; /* tokens (rows) */
    int64_t E; /* experts */
    int64_t k; /* top-k */
    int64_t H; /* hidden size / reduction dim K */
    int64_t I; /* intermediate size / output features N */
    int64_t R; /* simulated ranks */
} moe_golden_dims;

typedef struct moe_golden_case moe_golden_case;
struct cJSON;

struct moe_golden_case {
    const char *name;   /* dotted: stage.<kind>.<variant>, edge.<area>.<what>, e2e.forward.<scheme>[...] */
    const char *kind;   /* the ops-table entry it exercises, or "forward" */
    const char *scheme; /* a scheme name, or "*" */
    uint64_t seed;
    moe_golden_dims dims;
    int v[4];           /* variant knobs; their meaning is the family's (combos/golden_cases_*.c) */
    const void *arg;    /* a family's variant record, or NULL */
    int digest_only;
    const char *note;   /* one line: what the case pins */
    /* the seeded inputs */
    moe_status (*make)(const moe_golden_case *c, moe_golden_set *in);
    /* inputs -> outputs on ops (every tensor through ops->alloc / copy) */
    moe_status (*run)(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in,
                      moe_golden_set *out);
    /* adds the policy tuple (variants, specs, rounding) to case.json's "policy" */
    moe_status (*describe)(const moe_golden_case *c, struct cJSON *policy);
    /* SET-class comparison of a backend's outputs (NULL: the case has none) */
    moe_status (*compare_set)(const moe_golden_case *c, const moe_golden_set *got, const moe_golden_set *want,
                              moe_cmp_metrics *m);
    /* BOUNDED-class comparison: the bound derived from the case's inputs
     * and the reference outputs (NULL: the case has none, and a BOUNDED
     * row is reported as an error, never passed) */
    moe_status (*compare_bounded)(const moe_golden_case *c, const moe_golden_set *in, const moe_golden_set *got,
                                  const moe_golden_set *want, moe_cmp_metrics *m);
};

typedef struct {
    const moe_golden_case *const *cases;
    int n;
} moe_golden_table;

/* The built-in case table (combos/golden_cases*.c), in a fixed order. */
const moe_golden_table *moe_golden_builtin(void);
const moe_golden_case *moe_golden_find(const moe_golden_table *t, const char *name);

/* 1 when kind is an ops-table entry name (or "forward"). */
int moe_golden_kind_known(const char *kind);
/* The tolerance-table stage a case's backend results are judged by: its
 * kind, or "e2e/exact" for forward (a backend runs the layer as the
 * noep x ref modular kernel, the oracle's own stages in its order). */
const char *moe_golden_tolerance_stage(const moe_golden_case *c);

/* make + run on the reference: the case's inputs and outputs. */
moe_status moe_golden_compute(const moe_golden_case *c, moe_golden_set *in, moe_golden_set *out);

/* The command-line tool on the built-in table, and on any table (tests
 * inject cases): generate | verify | update | list | show. Exit status 0
 * ok, 1 a case changed or a backend failed its class, 2 usage error, 3 a
 * golden file missing, truncated or corrupt. */
int moe_cli_golden(int argc, char **argv, FILE *out, FILE *err);
int moe_golden_cli(int argc, char **argv, const moe_golden_table *table, FILE *out, FILE *err);

#ifdef __cplusplus
}
#endif

#endif
