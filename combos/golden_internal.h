/* Internals shared by the golden files (combos/golden_*.c). */
#ifndef MOE_GOLDEN_INTERNAL_H
#define MOE_GOLDEN_INTERNAL_H

#include <cjson/cJSON.h>
#include "moe/golden.h"
#include "moe/quant.h"

/* ---- running a case on an ops table (golden_run.c) --------------------- */

#define GK_MAX_DEV 48

/* Device tensors of one run: inputs copied in, outputs copied back by
 * gk_done, scratch freed. The first failure sticks (st) and later calls
 * return NULL, so a run function calls the stage once at the end and its
 * NULL-argument check reports nothing new. */
typedef struct {
    const moe_ops *ops;
    const moe_golden_set *in;
    moe_golden_set *out;
    int n;
    moe_tensor dev[GK_MAX_DEV];
    const char *out_name[GK_MAX_DEV]; /* NULL: input or scratch */
    moe_status st;
} gk_run;

void gk_begin(gk_run *r, const moe_ops *ops, const moe_golden_set *in, moe_golden_set *out);
/* The input `name` on the device (a missing one is an error). */
const moe_tensor *gk_in(gk_run *r, const char *name);
/* The same, NULL without error when the case has no such input. */
const moe_tensor *gk_opt(gk_run *r, const char *name);
/* A zeroed device output, copied back as `name` by gk_done. */
moe_tensor *gk_out(gk_run *r, const char *name, moe_dtype d, int ndim, const int64_t *shape);
/* A zeroed device tensor that is not an output. */
moe_tensor *gk_tmp(gk_run *r, moe_dtype d, int ndim, const int64_t *shape);
/* Copies the outputs back when st (the stage's status) and the run are
 * MOE_OK, frees every device tensor, returns the first failure. */
moe_status gk_done(gk_run *r, moe_status st);
/* The ops entry a kind names must exist: MOE_ERR_UNSUPPORTED naming it. */
moe_status gk_need(const moe_ops *ops, const char *kind);

#define GK_SH(...) ((const int64_t[]){__VA_ARGS__})

/* ---- building inputs (golden_run.c) ---------------------------------------- */

/* A new input of set s (host), zeroed; NULL after recording the failure in *st. */
moe_tensor *gk_new(moe_golden_set *s, moe_status *st, const char *name, moe_dtype d, int ndim, const int64_t *shape);
/* Seeded contents: normals (f32/bf16/f16, RNE), uniforms in [lo, hi) (f32),
 * top-k ids (moe_rng_topk_ids). Stream = the case name + "/" + tensor name,
 * so two tensors of one case never share numbers. */
moe_status gk_normal(const moe_golden_case *c, moe_tensor *t, const char *tag, float sd);
moe_status gk_uniform(const moe_golden_case *c, moe_tensor *t, const char *tag, float lo, float hi);
moe_status gk_ids(const moe_golden_case *c, moe_tensor *t, const char *tag, int E, unsigned neg1_pct, int distinct);
uint64_t gk_stream(const moe_golden_case *c, const char *tag);
/* Top-k id patterns [.., k] over dims.E experts (the layout edges). */
enum {
    IDS_DISTINCT = 0, /* seeded, distinct within a row */
    IDS_SUBSET,       /* only experts 1 and E-3: every other expert is empty */
    IDS_ONE_EXPERT,   /* every slot picks expert 3 (k = 1 unless duplicates are the point) */
    IDS_DUPLICATES,   /* seeded, repeats allowed within a row */
    IDS_LOW_HALF      /* only experts in the lower half: a rank owning the upper half gets nothing */
};
moe_status gk_ids_pattern(const moe_golden_case *c, moe_tensor *t, int mode);
const char *gk_ids_pattern_name(int mode);
/* f32 values written into a tensor of dtype d (f32, bf16, f16; RNE). */
moe_status gk_store_f32(moe_tensor *t, const float *v, int64_t n);
/* Quantizes the f32 tensor x with spec into set entries <name>, <name>_scale
 * and <name>_global (those the spec has), through the reference. */
moe_status gk_quantize_into(moe_golden_set *s, const moe_quant_spec *spec, const moe_tensor *x, const char *name);

/* ---- case.json helpers (golden_run.c) ---------------------------------------- */

cJSON *gk_spec_json(const moe_quant_spec *spec);
moe_status gk_json_add(cJSON *obj, const char *key, cJSON *item);
moe_status gk_json_str(cJSON *obj, const char *key, const char *v);
moe_status gk_json_num(cJSON *obj, const char *key, double v);
/* Non-finite floats as the strings "inf", "-inf", "nan" (reports/SCHEMA.md). */
cJSON *gk_json_double(double v);
cJSON *gk_metrics_json(const moe_cmp_metrics *m);

/* ---- the families' tables (golden_cases_*.c) ---------------------------------- */

/* Every scheme: X(enum, "name", index) -- one case per scheme per family. */
#define GK_SCHEMES(X)                                               \
    X(MOE_SCHEME_F32, "f32", 0)                                     \
    X(MOE_SCHEME_BF16, "bf16", 1)                                   \
    X(MOE_SCHEME_F16, "f16", 2)                                     \
    X(MOE_SCHEME_FP8_WTENSOR_ATENSOR, "fp8_wtensor_atensor", 3)     \
    X(MOE_SCHEME_FP8_WCHANNEL_ATENSOR, "fp8_wchannel_atensor", 4)   \
    X(MOE_SCHEME_FP8_WCHANNEL_ATOKEN, "fp8_wchannel_atoken", 5)     \
    X(MOE_SCHEME_FP8_WTENSOR_ATOKEN, "fp8_wtensor_atoken", 6)       \
    X(MOE_SCHEME_FP8_WBLOCK128_AGROUP128, "fp8_wblock128_agroup128", 7) \
    X(MOE_SCHEME_INT8_WCHANNEL_ATOKEN, "int8_wchannel_atoken", 8)   \
    X(MOE_SCHEME_W8A16_CHANNEL, "w8a16_channel", 9)                 \
    X(MOE_SCHEME_W4A16_G32, "w4a16_g32", 10)                        \
    X(MOE_SCHEME_W4A16_G64, "w4a16_g64", 11)                        \
    X(MOE_SCHEME_W4A16_G128, "w4a16_g128", 12)                      \
    X(MOE_SCHEME_W4AFP8_G128, "w4afp8_g128", 13)                    \
    X(MOE_SCHEME_MXFP8, "mxfp8", 14)                                \
    X(MOE_SCHEME_MXFP4_W4A16, "mxfp4_w4a16", 15)                    \
    X(MOE_SCHEME_MXFP4_MXFP8, "mxfp4_mxfp8", 16)                    \
    X(MOE_SCHEME_NVFP4, "nvfp4", 17)

typedef struct {
    const moe_golden_case *cases;
    int n;
} gk_family;

gk_family gk_cases_index(void);    /* route, align, sort, maps */
gk_family gk_cases_quant(void);    /* quantize, dequantize, format boundaries */
gk_family gk_cases_rows(void);     /* permute, gemm, activation, weight-and-reduce */
gk_family gk_cases_dispatch(void); /* dispatch / combine */
gk_family gk_cases_e2e(void);      /* moe_ref_forward */

/* ---- storage (golden_store.c) -------------------------------------------------- */

typedef enum { GK_OK = 0, GK_CHANGED, GK_CORRUPT, GK_MISSING } gk_status;
const char *gk_status_name(gk_status s);

#define GK_MAX_FILES (4 * MOE_GOLDEN_MAX_TENSORS + 4)
#define GK_REASON 320

typedef struct {
    char name[96];
    gk_status status;
    char reason[GK_REASON];
    char sha[65];
} gk_file;

/* What a case directory holds, checked against its manifest. */
typedef struct {
    gk_status status;
    char reason[GK_REASON]; /* the first problem, naming the file */
    int nfiles;
    gk_file files[GK_MAX_FILES];
    cJSON *json;            /* case.json when it is intact */
    moe_golden_set in, out; /* loaded when status is GK_OK and the case is stored */
} gk_stored;

/* SHA-256 of a file (OpenSSL EVP) as 64 lowercase hex digits; *size its length. */
moe_status gk_sha256_file(const char *path, char hex[65], long long *size);

/* Writes case c with in/out into a new directory `path` (which must not
 * exist): tensors (unless digest-only), case.json, DIGESTS.sha256
 * (digest-only), MANIFEST.sha256 last. */
moe_status gk_write_case(const char *path, const moe_golden_case *c, const moe_golden_set *in,
                         const moe_golden_set *out);
/* Reads and checks `path`: manifest first, then every listed file, then
 * case.json and the tensors. Never fails on bad content: *st says what is
 * wrong. MOE_ERR_* only for a program error (no memory). */
moe_status gk_read_case(const char *path, int load, gk_stored *st);
void gk_stored_free(gk_stored *st);

/* Manifest (or digests) of a directory as "<name> <hex>" pairs. */
typedef struct {
    int n;
    char name[GK_MAX_FILES][96];
    char sha[GK_MAX_FILES][65];
} gk_manifest;
/* Parses dir/file; 0 absent, -1 malformed (line number in *bad_line), 1 read. */
int gk_manifest_read(const char *dir, const char *file, gk_manifest *m, int *bad_line);
const char *gk_manifest_sha(const gk_manifest *m, const char *name);

/* Directory helpers: remove a case directory (plain files only), make a
 * fresh temporary directory under parent. */
moe_status gk_rmtree(const char *path);
moe_status gk_mkdtemp(const char *parent, const char *stem, char *out, size_t n);
int gk_is_dir(const char *path);

/* ---- the commands (golden_cmds.c), driven by golden_cli.c ------------------------ */

#define GK_MAX_BACKENDS 8

typedef struct {
    const moe_golden_table *table;
    const char *dir;        /* default "golden" */
    const char *json;       /* verify --json FILE, or NULL */
    const char *diff;       /* update --diff FILE */
    const char *filter;     /* --filter GLOB, or NULL */
    int nbackends;
    const char *backends[GK_MAX_BACKENDS];
    FILE *out, *err;
} gk_opts;

/* 1 when the case is selected by opts->filter. */
int gk_selected(const gk_opts *o, const moe_golden_case *c);
int gk_generate(const gk_opts *o);
int gk_verify(const gk_opts *o);
int gk_update(const gk_opts *o);
/* Writes a cJSON document to path through a temporary file. */
moe_status gk_write_json(const char *path, const cJSON *doc);

#endif
