/* Golden vectors: the case table's coverage, the committed goldens verify,
 * every kind of damage to a case directory is reported by file name with
 * exit 3, a changed reference output is "changed" (exit 1) and update
 * rewrites only that case with a diff report, generation is
 * deterministic, list / show, usage errors, and every case runs through a
 * second host ops table with balanced memory. Damage is done to copies in
 * a temporary directory; golden/ is only read. Runs with the repository
 * root as the working directory (make check). */
#include <check.h>
#include <cjson/cJSON.h>
#include <openssl/evp.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli_run.h"
#include "moe/backends.h"
#include "moe/golden.h"
#include "moe/quant.h"
#include "moe/route.h"
#include "moe/act.h"

/* ---- helpers ----------------------------------------------------------------------------------- */

static const moe_golden_table *g_table; /* the table the next run uses */

static int golden_fn(int argc, char **argv, FILE *out, FILE *err) { return moe_golden_cli(argc, argv, g_table, out, err); }

/* moe-golden on the built-in table (or g_table when set by a test). */
static int run(const char *args)
{
    if (!g_table) g_table = moe_golden_builtin();
    return cli_run(golden_fn, "moe-golden", args);
}

static char tmp_dir[256];

static void rm_tree(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;
    char p[1024];
    while (d && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        struct stat sb;
        if (stat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) rm_tree(p);
        else unlink(p);
    }
    if (d) closedir(d);
    rmdir(path);
}

static void setup(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof tmp_dir, "%s/check_golden.XXXXXX", t && *t ? t : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(tmp_dir));
    g_table = moe_golden_builtin();
}

static void teardown(void) { rm_tree(tmp_dir); }

static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    ck_assert_msg(a && b, "copy %s -> %s", from, to);
    char buf[1 << 15];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, a)) > 0) ck_assert_uint_eq(fwrite(buf, 1, n, b), n);
    fclose(a);
    ck_assert_int_eq(fclose(b), 0);
}

/* golden/<name> -> <tmp>/<name> */
static void copy_case(const char *name)
{
    char src[512], dst[512], a[1024], b[1024];
    snprintf(src, sizeof src, "golden/%s", name);
    snprintf(dst, sizeof dst, "%s/%s", tmp_dir, name);
    ck_assert_int_eq(mkdir(dst, 0777), 0);
    DIR *d = opendir(src);
    ck_assert_msg(d != NULL, "%s: not there (run from the repository root)", src);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        snprintf(a, sizeof a, "%s/%s", src, e->d_name);
        snprintf(b, sizeof b, "%s/%s", dst, e->d_name);
        copy_file(a, b);
    }
    closedir(d);
}

static char *slurp(const char *path, long *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s: cannot open", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    ck_assert_uint_eq(fread(p, 1, (size_t)n, f), (size_t)n);
    p[n] = '\0';
    fclose(f);
    if (len) *len = n;
    return p;
}

static void spit(const char *path, const char *p, long n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(p, 1, (size_t)n, f), (size_t)n);
    ck_assert_int_eq(fclose(f), 0);
}

static void tmp_path(char *out, size_t n, const char *name, const char *file)
{
    snprintf(out, n, "%s/%s/%s", tmp_dir, name, file);
}

static int verify_copy(const char *name)
{
    char args[512];
    snprintf(args, sizeof args, "verify --dir %s --filter %s --backend ref", tmp_dir, name);
    return run(args);
}

static const char *CASE = "stage.quantize.fp8_wblock128_agroup128.act";

/* ---- the table ------------------------------------------------------------------------------------ */

static int has_case(const char *name) { return moe_golden_find(moe_golden_builtin(), name) != NULL; }

START_TEST(table_is_well_formed)
{
    const moe_golden_table *t = moe_golden_builtin();
    ck_assert_int_gt(t->n, 200);
    int digest_only = 0;
    for (int i = 0; i < t->n; i++) {
        const moe_golden_case *c = t->cases[i];
        ck_assert_msg(moe_golden_find(t, c->name) == c, "%s: listed twice", c->name);
        ck_assert_msg(moe_golden_kind_known(c->kind), "%s: kind '%s' is no ops entry", c->name, c->kind);
        moe_scheme sc;
        ck_assert_msg(!strcmp(c->scheme, "*") || moe_scheme_from_name(c->scheme, &sc) == MOE_OK, "%s: scheme %s",
                      c->name, c->scheme);
        ck_assert_msg(c->make && c->run && c->describe, "%s: make, run and describe are required", c->name);
        ck_assert_msg(!strncmp(c->name, "stage.", 6) || !strncmp(c->name, "edge.", 5) || !strncmp(c->name, "e2e.", 4),
                      "%s: names start stage., edge. or e2e.", c->name);
        digest_only += c->digest_only;
    }
    ck_assert_int_ge(digest_only, 1);
    ck_assert(!moe_golden_kind_known("alloc") && !moe_golden_kind_known("routing"));
}
END_TEST

/* every stage entry, scheme, route method, activation and layout has a case */
START_TEST(table_covers_every_variant)
{
    static const char *const ENTRIES[] = {
        "route", "align_block_size", "align_batched", "sort_ck", "maps_trtllm", "quantize", "dequantize",
        "permute_rows", "unpermute_rows", "expand_trtllm", "batched_scatter", "permute_grouped", "grouped_gemm",
        "activation", "war_contiguous", "war_noop", "war_naive_batched", "finalize_trtllm", "ep_allgather_dispatch",
        "ep_reduce_scatter_combine", "deepep_layout", "deepep_dispatch", "deepep_combine", "deepep_ll_dispatch",
        "deepep_ll_combine", "pplx_dispatch", "pplx_combine", "hep_dispatch_with_permute", "hep_combine_with_unpermute",
        "forward"};
    const moe_golden_table *t = moe_golden_builtin();
    for (size_t e = 0; e < sizeof ENTRIES / sizeof ENTRIES[0]; e++) {
        int n = 0;
        for (int i = 0; i < t->n; i++) n += !strcmp(t->cases[i]->kind, ENTRIES[e]);
        ck_assert_msg(n > 0, "no golden case exercises %s", ENTRIES[e]);
    }
    char name[128];
    for (int s = 0; s < MOE_SCHEME_COUNT; s++) {
        const char *sn = moe_scheme_name((moe_scheme)s);
        const char *fmt[] = {"stage.quantize.%s.act", "stage.quantize.%s.weight", "stage.dequantize.%s.act",
                             "stage.dequantize.%s.weight", "stage.grouped_gemm.%s", "e2e.forward.%s"};
        for (size_t f = 0; f < sizeof fmt / sizeof fmt[0]; f++) {
            snprintf(name, sizeof name, fmt[f], sn);
            ck_assert_msg(has_case(name), "missing %s", name);
        }
    }
    const char *routes[] = {"stage.route.softmax_topk", "stage.route.sigmoid_topk", "stage.route.grouped_topk.softmax",
                            "stage.route.llama4_top1"};
    ck_assert_int_eq(MOE_ROUTE_COUNT, 4); /* a new method needs a case here */
    for (int r = 0; r < 4; r++) ck_assert_msg(has_case(routes[r]), "missing %s", routes[r]);
    for (int a = 0; a < MOE_ACT_COUNT; a++) {
        if (!moe_act_is_gated((moe_act)a)) {
            snprintf(name, sizeof name, "stage.activation.%s", moe_act_name((moe_act)a));
            ck_assert_msg(has_case(name), "missing %s", name);
            continue;
        }
        for (int l = 0; l < MOE_LAYOUT_COUNT; l++) {
            snprintf(name, sizeof name, "stage.activation.%s.%s", moe_act_name((moe_act)a),
                     moe_act_layout_name((moe_act_layout)l));
            ck_assert_msg(has_case(name), "missing %s", name);
        }
    }
    /* the layout edges */
    const char *edges[] = {"edge.align_block_size.one_token", "stage.align_block_size.empty_experts",
                           "edge.align_block_size.all_to_one_expert", "edge.maps_trtllm.duplicates.three_step",
                           "edge.maps_trtllm.duplicates.fused_single_block", "edge.dispatch.deepep.duplicates",
                           "edge.dispatch.deepep.rank_without_tokens", "edge.dispatch.deepep_ll.rank_without_tokens",
                           "edge.dispatch.pplx.rank_without_tokens", "edge.dispatch.hep.rank_without_tokens",
                           "edge.forward.one_token", "edge.forward.rank_without_tokens"};
    for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++) ck_assert_msg(has_case(edges[e]), "missing %s", edges[e]);
}
END_TEST

/* ---- the committed goldens ---------------------------------------------------------------------------- */

START_TEST(committed_goldens_verify)
{
    char json[512], args[600];
    snprintf(json, sizeof json, "%s/verify.json", tmp_dir);
    snprintf(args, sizeof args, "verify --json %s", json); /* golden/, every backend */
    int rc = run(args);
    ck_assert_msg(rc == 0, "moe-golden verify of golden/: exit %d\n%s", rc, err_buf);
    char *text0 = slurp(json, NULL);
    cJSON *doc = cJSON_Parse(text0);
    free(text0);
    ck_assert_ptr_nonnull(doc);
    const cJSON *sum = cJSON_GetObjectItem(doc, "summary"), *cases = cJSON_GetObjectItem(doc, "cases");
    int n = moe_golden_builtin()->n;
    ck_assert_int_eq((int)cJSON_GetObjectItem(sum, "ok")->valuedouble, n);
    char text[96];
    snprintf(text, sizeof text, "%d golden cases verified, 0 failed", n);
    ck_assert_str_eq(cJSON_GetObjectItem(sum, "text")->valuestring, text);
    ck_assert_int_eq(cJSON_GetArraySize(cases), n);
    /* ref passes everywhere; cpu passes every stage case and skips the
     * forward cases (its end-to-end row is stage-wise); the CUDA backends
     * are not built here, so they are skipped, never passed */
    int cpu_pass = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases)
    {
        const cJSON *b;
        int seen = 0;
        cJSON_ArrayForEach(b, cJSON_GetObjectItem(c, "backends"))
        {
            const char *nm = cJSON_GetObjectItem(b, "name")->valuestring, *v = cJSON_GetObjectItem(b, "verdict")->valuestring;
            const char *cn = cJSON_GetObjectItem(c, "case")->valuestring;
            if (!strcmp(nm, "ref")) ck_assert_msg(!strcmp(v, "pass"), "%s: ref %s", cn, v);
            else if (!strcmp(nm, "cpu"))
                ck_assert_msg(!strcmp(v, strstr(cn, ".forward.") ? "skipped" : "pass"), "%s: cpu %s", cn, v),
                    cpu_pass += !strcmp(v, "pass");
            else ck_assert_str_eq(v, "skipped");
            seen++;
        }
        ck_assert_int_eq(seen, moe_backend_count());
    }
    ck_assert_int_gt(cpu_pass, 200);
    cJSON_Delete(doc);
}
END_TEST

/* ---- damage ------------------------------------------------------------------------------------------- */

START_TEST(flipped_byte_is_corrupt)
{
    copy_case(CASE);
    ck_assert_int_eq(verify_copy(CASE), 0);
    char p[1024];
    long n;
    tmp_path(p, sizeof p, CASE, "out_q.npy");
    char *b = slurp(p, &n);
    b[n - 3] ^= 0x10;
    spit(p, b, n);
    free(b);
    ck_assert_int_eq(verify_copy(CASE), 3);
    HAS(out_buf, "corrupt");
    HAS(out_buf, "out_q.npy: SHA-256 differs from MANIFEST.sha256");
    HAS(out_buf, "1 golden cases verified, 1 failed");
}
END_TEST

START_TEST(truncated_file_is_corrupt)
{
    copy_case(CASE);
    char p[1024];
    long n;
    tmp_path(p, sizeof p, CASE, "out_scale.npy");
    char *b = slurp(p, &n);
    spit(p, b, n - 5);
    free(b);
    ck_assert_int_eq(verify_copy(CASE), 3);
    HAS(out_buf, "out_scale.npy: truncated");
    HAS(out_buf, "1 golden cases verified, 1 failed");
}
END_TEST

START_TEST(missing_file_is_missing)
{
    copy_case(CASE);
    char p[1024];
    tmp_path(p, sizeof p, CASE, "in_x.npy");
    ck_assert_int_eq(unlink(p), 0);
    ck_assert_int_eq(verify_copy(CASE), 3);
    HAS(out_buf, "missing");
    HAS(out_buf, "in_x.npy: missing");
    /* the whole case directory gone */
    char d[512];
    snprintf(d, sizeof d, "%s/%s", tmp_dir, CASE);
    rm_tree(d);
    ck_assert_int_eq(verify_copy(CASE), 3);
    HAS(out_buf, "case directory");
}
END_TEST

START_TEST(manifest_damage_is_corrupt)
{
    copy_case(CASE);
    char p[1024];
    long n;
    tmp_path(p, sizeof p, CASE, "MANIFEST.sha256");
    char *b = slurp(p, &n);
    char *line = strstr(b, "  out_q.npy\n");
    ck_assert_ptr_nonnull(line);
    line[-1] = line[-1] == '0' ? '1' : '0'; /* the last hex digit of its entry */
    spit(p, b, n);
    ck_assert_int_eq(verify_copy(CASE), 3);
    HAS(out_buf, "out_q.npy: SHA-256 differs from MANIFEST.sha256");
    /* a malformed line */
    line[-1] = 'X';
    spit(p, b, n);
    ck_assert_int_eq(verify_copy(CASE), 3);
    HAS(out_buf, "MANIFEST.sha256: line");
    /* no manifest */
    unlink(p);
    ck_assert_int_eq(verify_copy(CASE), 3);
    HAS(out_buf, "MANIFEST.sha256: missing");
    free(b);
}
END_TEST

START_TEST(unlisted_file_is_corrupt)
{
    copy_case(CASE);
    char p[1024];
    tmp_path(p, sizeof p, CASE, "stray.npy");
    spit(p, "x", 1);
    ck_assert_int_eq(verify_copy(CASE), 3);
    HAS(out_buf, "stray.npy: not listed in MANIFEST.sha256");
}
END_TEST

/* ---- a changed reference ---------------------------------------------------------------------------------- */

static moe_golden_case inj_case;
static const moe_golden_case *inj_ptrs[1024];
static moe_golden_table inj_table;
static const moe_golden_case *inj_orig;

/* the reference "changes": the last output's first byte flips its low bit */
static moe_status flipped_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in, moe_golden_set *out)
{
    moe_status st = inj_orig->run(c, ops, in, out);
    if (st == MOE_OK && out->n) ((unsigned char *)out->t[out->n - 1].data)[0] ^= 1;
    return st;
}

static void inject(const char *name)
{
    const moe_golden_table *t = moe_golden_builtin();
    ck_assert_int_le(t->n, 1024);
    for (int i = 0; i < t->n; i++) {
        inj_ptrs[i] = t->cases[i];
        if (!strcmp(t->cases[i]->name, name)) {
            inj_orig = t->cases[i];
            inj_case = *inj_orig;
            inj_case.run = flipped_run;
            inj_ptrs[i] = &inj_case;
        }
    }
    inj_table.cases = inj_ptrs, inj_table.n = t->n;
    g_table = &inj_table;
}

static const char *const ROUTE_CASES = "stage.route.*";

static void copy_routes(void)
{
    const moe_golden_table *t = moe_golden_builtin();
    for (int i = 0; i < t->n; i++)
        if (!strncmp(t->cases[i]->name, "stage.route.", 12)) copy_case(t->cases[i]->name);
}

START_TEST(changed_reference_is_changed)
{
    copy_case("stage.route.softmax_topk");
    inject("stage.route.softmax_topk");
    ck_assert_int_eq(verify_copy("stage.route.softmax_topk"), 1);
    HAS(out_buf, "changed  stage.route.softmax_topk");
    HAS(out_buf, "out_topk_weights.npy");
    HAS(out_buf, "1 golden cases verified, 1 failed");
    char args[512];
    snprintf(args, sizeof args, "generate --dir %s --filter stage.route.softmax_topk", tmp_dir);
    ck_assert_int_eq(run(args), 1);
    HAS(out_buf, "refused  stage.route.softmax_topk: exists and differs");
}
END_TEST

START_TEST(update_rewrites_only_the_changed_case)
{
    copy_routes();
    char before[1024], after[1024], diff[512], args[1024];
    tmp_path(before, sizeof before, "stage.route.sigmoid_topk", "MANIFEST.sha256");
    char *m0 = slurp(before, NULL);
    struct stat s0, s1;
    ck_assert_int_eq(stat(before, &s0), 0);
    inject("stage.route.softmax_topk");
    snprintf(diff, sizeof diff, "%s/diff.json", tmp_dir);
    snprintf(args, sizeof args, "update --dir %s --filter %s --diff %s", tmp_dir, ROUTE_CASES, diff);
    ck_assert_int_eq(run(args), 0);
    HAS(out_buf, "updated  stage.route.softmax_topk");
    HAS(out_buf, ": 1 updated, ");
    /* the other cases are untouched: same manifest, same file (inode) */
    tmp_path(after, sizeof after, "stage.route.sigmoid_topk", "MANIFEST.sha256");
    ck_assert_int_eq(stat(after, &s1), 0);
    ck_assert(s0.st_ino == s1.st_ino);
    char *m1 = slurp(after, NULL);
    ck_assert_str_eq(m0, m1);
    free(m0), free(m1);
    /* the diff report names the case and the file, with metrics */
    char *dtext = slurp(diff, NULL);
    cJSON *doc = cJSON_Parse(dtext);
    free(dtext);
    ck_assert_ptr_nonnull(doc);
    ck_assert_str_eq(cJSON_GetObjectItem(doc, "type")->valuestring, "golden-diff");
    const cJSON *ch = cJSON_GetObjectItem(doc, "changes"), *e;
    int found = 0;
    cJSON_ArrayForEach(e, ch)
    {
        ck_assert_str_eq(cJSON_GetObjectItem(e, "case")->valuestring, "stage.route.softmax_topk");
        if (!strcmp(cJSON_GetObjectItem(e, "file")->valuestring, "out_topk_weights.npy")) {
            found = 1;
            const cJSON *m = cJSON_GetObjectItem(e, "metrics");
            ck_assert(cJSON_IsObject(m));
            ck_assert_int_eq((int)cJSON_GetObjectItem(m, "mismatches")->valuedouble, 1);
            ck_assert(cJSON_IsString(cJSON_GetObjectItem(e, "old_sha256")));
        }
    }
    ck_assert(found);
    cJSON_Delete(doc);
    /* now the copy agrees with the (injected) reference */
    snprintf(args, sizeof args, "verify --dir %s --filter %s --backend ref", tmp_dir, ROUTE_CASES);
    ck_assert_int_eq(run(args), 0);
}
END_TEST

static const char *sha256_hex(const void *p, long n)
{
    static char hex[65];
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    ck_assert_int_eq(EVP_Digest(p, (size_t)n, md, &len, EVP_sha256(), NULL), 1);
    for (unsigned i = 0; i < len; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return hex;
}

START_TEST(digest_only_case_is_checked)
{
    const char *name = "e2e.forward.bf16.scaled_deepseek_v3";
    copy_case(name);
    ck_assert_int_eq(verify_copy(name), 0);
    /* a stored digest that no longer matches the regenerated output,
     * with the manifest made consistent: "changed", naming the output */
    char p[1024], m[1024], cmd[2300];
    long n;
    tmp_path(p, sizeof p, name, "DIGESTS.sha256");
    char *b = slurp(p, &n), *line = strstr(b, "  out_out.npy\n");
    ck_assert_ptr_nonnull(line);
    line[-1] = line[-1] == '0' ? '1' : '0';
    spit(p, b, n);
    free(b);
    char *cj, line1[200], line2[200];
    long cn;
    tmp_path(m, sizeof m, name, "case.json");
    cj = slurp(m, &cn);
    b = slurp(p, &n);
    snprintf(line1, sizeof line1, "%s  case.json\n", sha256_hex(cj, cn));
    snprintf(line2, sizeof line2, "%s  DIGESTS.sha256\n", sha256_hex(b, n));
    snprintf(cmd, sizeof cmd, "%s%s", line2, line1); /* sorted: uppercase first */
    tmp_path(m, sizeof m, name, "MANIFEST.sha256");
    spit(m, cmd, (long)strlen(cmd));
    free(cj), free(b);
    ck_assert_int_eq(verify_copy(name), 1);
    HAS(out_buf, "changed");
    HAS(out_buf, "out_out.npy");
}
END_TEST

/* A table of the route cases only: verify and update without a filter
 * see a directory of another case as stale. */
START_TEST(stale_case_directory)
{
    const moe_golden_table *t = moe_golden_builtin();
    int n = 0;
    for (int i = 0; i < t->n; i++)
        if (!strncmp(t->cases[i]->name, "stage.route.", 12)) inj_ptrs[n++] = t->cases[i];
    inj_table.cases = inj_ptrs, inj_table.n = n;
    g_table = &inj_table;
    copy_routes();
    copy_case("stage.align_batched.basic");
    char args[700], diff[300];
    snprintf(args, sizeof args, "verify --dir %s --backend ref", tmp_dir);
    ck_assert_int_eq(run(args), 1);
    HAS(out_buf, "stale    stage.align_batched.basic  not in the case table");
    snprintf(diff, sizeof diff, "%s/diff.json", tmp_dir);
    snprintf(args, sizeof args, "update --dir %s --diff %s", tmp_dir, diff);
    ck_assert_int_eq(run(args), 0);
    HAS(out_buf, "removed  stage.align_batched.basic");
    HAS(out_buf, "0 updated, 0 created, 9 unchanged, 1 removed");
    snprintf(args, sizeof args, "verify --dir %s --backend ref", tmp_dir);
    ck_assert_int_eq(run(args), 0);
}
END_TEST

/* ---- generate ---------------------------------------------------------------------------------------------- */

START_TEST(generate_is_deterministic)
{
    char a[512], b[512], args[1024];
    snprintf(a, sizeof a, "%s/a", tmp_dir);
    snprintf(b, sizeof b, "%s/b", tmp_dir);
    snprintf(args, sizeof args, "generate --dir %s --filter stage.route.*", a);
    ck_assert_int_eq(run(args), 0);
    HAS(out_buf, "9 written");
    snprintf(args, sizeof args, "generate --dir %s --filter stage.route.*", b);
    ck_assert_int_eq(run(args), 0);
    /* both copies and the committed goldens hold the same bytes */
    const moe_golden_table *t = moe_golden_builtin();
    for (int i = 0; i < t->n; i++) {
        const char *nm = t->cases[i]->name;
        if (strncmp(nm, "stage.route.", 12)) continue;
        char pa[1024], pb[1024], pg[1024];
        snprintf(pa, sizeof pa, "%s/%s/MANIFEST.sha256", a, nm);
        snprintf(pb, sizeof pb, "%s/%s/MANIFEST.sha256", b, nm);
        snprintf(pg, sizeof pg, "golden/%s/MANIFEST.sha256", nm);
        char *ma = slurp(pa, NULL), *mb = slurp(pb, NULL), *mg = slurp(pg, NULL);
        ck_assert_str_eq(ma, mb);
        ck_assert_str_eq(ma, mg);
        free(ma), free(mb), free(mg);
    }
    /* again into a: nothing to write, nothing refused */
    snprintf(args, sizeof args, "generate --dir %s --filter stage.route.*", a);
    ck_assert_int_eq(run(args), 0);
    HAS(out_buf, "0 written, 9 already identical, 0 refused");
}
END_TEST

/* ---- list, show, usage ----------------------------------------------------------------------------------------- */

START_TEST(list_and_show)
{
    ck_assert_int_eq(run("list --filter stage.align_batched.*"), 0);
    HAS(out_buf, "stage.align_batched.basic");
    HAS(out_buf, "align_batched");
    HAS(out_buf, "1 golden cases, 1 present in golden");
    ck_assert_int_eq(run("show stage.align_batched.basic"), 0);
    HAS(out_buf, "\"case\":\t\"stage.align_batched.basic\"");
    HAS(out_buf, "in_expert_num_tokens.npy");
    HAS(out_buf, "int32  [4]");
    HAS(out_buf, "status: ok");
    /* show names the damage too */
    copy_case(CASE);
    char p[1024], args[512];
    tmp_path(p, sizeof p, CASE, "out_q.npy");
    unlink(p);
    snprintf(args, sizeof args, "show %s --dir %s", CASE, tmp_dir);
    ck_assert_int_eq(run(args), 3);
    HAS(out_buf, "out_q.npy");
    HAS(out_buf, "status: missing");
}
END_TEST

START_TEST(usage_errors)
{
    ck_assert_int_eq(run(""), 2);
    HAS(err_buf, "missing command");
    ck_assert_int_eq(run("verfy"), 2);
    HAS(err_buf, "unknown command 'verfy' (did you mean 'verify'?)");
    ck_assert_int_eq(run("verify --dri golden"), 2);
    HAS(err_buf, "did you mean '--dir'?");
    ck_assert_int_eq(run("update --json x"), 2);
    HAS(err_buf, "unknown option '--json'");
    ck_assert_int_eq(run("verify --backend cpu,gpu"), 2);
    HAS(err_buf, "unknown backend 'gpu'");
    ck_assert_int_eq(run("verify --filter nothing.*"), 2);
    HAS(err_buf, "matches no case");
    ck_assert_int_eq(run("verify --dir"), 2);
    HAS(err_buf, "needs a value");
    ck_assert_int_eq(run("show stage.route.softmax_topx"), 2);
    HAS(err_buf, "did you mean 'stage.route.softmax_topk'?");
    ck_assert_int_eq(run("show"), 2);
    ck_assert_int_eq(run("list extra"), 2);
    ck_assert_int_eq(run("--help"), 0);
    HAS(out_buf, "usage: moe-golden COMMAND");
    ck_assert_int_eq(run("verify --help"), 0);
    HAS(out_buf, "usage: moe-golden verify");
}
END_TEST

START_TEST(unbuilt_backend_is_skipped)
{
    ck_assert_int_eq(run("verify --filter stage.align_batched.* --backend cuda-conform,cuda-fast"), 0);
    HAS(out_buf, "cuda-conform skipped (not built)");
    HAS(out_buf, "backend cuda-fast: skipped");
    ck_assert_ptr_null(strstr(out_buf, " pass"));
}
END_TEST

/* The BOUNDED comparison the cpu / cuda-fast GEMM rows need: the
 * reference output is within its bound, a one-ulp change of a bf16
 * output still is (another summation order may round the other way), a
 * change in the exponent is not. */
START_TEST(gemm_cases_have_a_bound)
{
    const moe_golden_case *c = moe_golden_find(moe_golden_builtin(), "stage.grouped_gemm.fp8_wblock128_agroup128");
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(c->compare_bounded);
    moe_golden_set in, in2, ref, got;
    ck_assert_int_eq(moe_golden_compute(c, &in, &ref), MOE_OK);
    ck_assert_int_eq(moe_golden_compute(c, &in2, &got), MOE_OK); /* a second copy of the outputs */
    moe_golden_set_free(&in2);
    moe_cmp_metrics m;
    moe_cmp_init(&m);
    ck_assert_int_eq(c->compare_bounded(c, &in, &got, &ref, &m), MOE_OK);
    ck_assert(moe_cmp_pass(&m, MOE_CLASS_BOUNDED));
    ck_assert(m.share == 0.0);
    uint16_t *o = got.t[0].data;
    ck_assert_int_eq(got.t[0].dtype, MOE_BF16);
    o[0] = (uint16_t)(o[0] + 1);
    moe_cmp_init(&m);
    ck_assert_int_eq(c->compare_bounded(c, &in, &got, &ref, &m), MOE_OK);
    ck_assert_msg(moe_cmp_pass(&m, MOE_CLASS_BOUNDED), "one ulp: share %g", m.share);
    ck_assert(m.share > 0.0 && m.share <= 1.0);
    o[0] = (uint16_t)(o[0] ^ 0x0100); /* an exponent bit */
    moe_cmp_init(&m);
    ck_assert_int_eq(c->compare_bounded(c, &in, &got, &ref, &m), MOE_OK);
    ck_assert(!moe_cmp_pass(&m, MOE_CLASS_BOUNDED));
    moe_golden_set_free(&in), moe_golden_set_free(&ref), moe_golden_set_free(&got);
}
END_TEST

/* The SET comparison of the DeepEP-LL receive rows: rows swapped inside
 * one (rank, expert) segment (with their source index) pass; a changed
 * row does not. */
START_TEST(ll_rows_compare_as_sets)
{
    const moe_golden_case *c = moe_golden_find(moe_golden_builtin(), "stage.deepep_ll_dispatch.fp8");
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(c->compare_set);
    moe_golden_set in, in2, ref, got;
    ck_assert_int_eq(moe_golden_compute(c, &in, &ref), MOE_OK);
    ck_assert_int_eq(moe_golden_compute(c, &in2, &got), MOE_OK);
    moe_golden_set_free(&in2);
    moe_tensor *x = (moe_tensor *)moe_golden_set_find(&got, "recv_x"), *sc = (moe_tensor *)moe_golden_set_find(&got, "recv_x_scales");
    moe_tensor *si = (moe_tensor *)moe_golden_set_find(&got, "src_info");
    const moe_tensor *cnt = moe_golden_set_find(&got, "count");
    int64_t H = x->shape[3], S = sc->shape[3], rows = x->shape[2], seg = 0;
    while (seg < moe_tensor_numel(cnt) && ((const int32_t *)cnt->data)[seg] < 2) seg++;
    ck_assert_int_lt(seg, moe_tensor_numel(cnt));
    int64_t r0 = seg * rows, r1 = r0 + 1;
    uint8_t tmp[1024];
    memcpy(tmp, (uint8_t *)x->data + r0 * H, (size_t)H);
    memcpy((uint8_t *)x->data + r0 * H, (uint8_t *)x->data + r1 * H, (size_t)H);
    memcpy((uint8_t *)x->data + r1 * H, tmp, (size_t)H);
    float t = ((float *)sc->data)[r0 * S];
    for (int64_t j = 0; j < S; j++) {
        t = ((float *)sc->data)[r0 * S + j];
        ((float *)sc->data)[r0 * S + j] = ((float *)sc->data)[r1 * S + j];
        ((float *)sc->data)[r1 * S + j] = t;
    }
    int32_t ti = ((int32_t *)si->data)[r0];
    ((int32_t *)si->data)[r0] = ((int32_t *)si->data)[r1], ((int32_t *)si->data)[r1] = ti;
    moe_cmp_metrics m;
    moe_cmp_init(&m);
    ck_assert_int_eq(c->compare_set(c, &got, &ref, &m), MOE_OK);
    ck_assert_msg(moe_cmp_pass(&m, MOE_CLASS_SET), "swapped rows: %lld mismatches", (long long)m.mismatches);
    moe_cmp_init(&m);
    ck_assert_int_eq(moe_compare_exact(x, moe_golden_set_find(&ref, "recv_x"), &m), MOE_OK);
    ck_assert(!moe_cmp_pass(&m, MOE_CLASS_EXACT)); /* the swap is real */
    ((int32_t *)si->data)[r0] ^= 1;
    moe_cmp_init(&m);
    ck_assert_int_eq(c->compare_set(c, &got, &ref, &m), MOE_OK);
    ck_assert(!moe_cmp_pass(&m, MOE_CLASS_SET));
    moe_golden_set_free(&in), moe_golden_set_free(&ref), moe_golden_set_free(&got);
}
END_TEST

/* ---- every case on a second host ops table ---------------------------------------------------------------------- */

static moe_ops counted;
static long n_alloc, n_free;

static moe_status c_alloc(moe_tensor *t, moe_dtype d, int ndim, const int64_t *shape)
{
    n_alloc++;
    return moe_ops_ref.alloc(t, d, ndim, shape);
}

static void c_free(moe_tensor *t)
{
    n_free++;
    moe_ops_ref.free(t);
}

/* Each case's run on a copy of the reference table (so forward goes through
 * the noep x ref modular kernel) gives the reference's outputs bit for bit
 * and frees every tensor it allocates through the table. */
START_TEST(every_case_runs_on_another_ops_table)
{
    counted = moe_ops_ref;
    counted.name = "ref-counted", counted.alloc = c_alloc, counted.free = c_free;
    const moe_golden_table *t = moe_golden_builtin();
    int unsupported = 0, bad = 0;
    for (int i = 0; i < t->n; i++) {
        const moe_golden_case *c = t->cases[i];
        if (c->digest_only) continue;
        moe_golden_set in, ref, got;
        ck_assert_msg(moe_golden_compute(c, &in, &ref) == MOE_OK, "%s: %s", c->name, moe_last_error());
        moe_golden_set_init(&got);
        n_alloc = n_free = 0;
        moe_status st = c->run(c, &counted, &in, &got);
        if (n_alloc == 0 || n_alloc != n_free) {
            fprintf(stderr, "%s: %ld allocations, %ld frees through the ops table\n", c->name, n_alloc, n_free);
            bad++;
        }
        /* what the modular kernel has no counterpart for: routing from
         * logits, a rank's partial, static scales, NVFP4's swizzled
         * activation scales */
        static const char *const NO_MK[] = {"route_", "ep_rank", "rank_without_tokens", "static_scales", ".nvfp4"};
        int expected = 0;
        for (size_t k = 0; k < sizeof NO_MK / sizeof NO_MK[0]; k++) expected |= strstr(c->name, NO_MK[k]) != NULL;
        if (st == MOE_ERR_UNSUPPORTED && !strcmp(c->kind, "forward") && expected) {
            unsupported++;
        } else if (st != MOE_OK) {
            fprintf(stderr, "%s: %s\n", c->name, moe_last_error());
            bad++;
        } else {
            moe_cmp_metrics m;
            moe_cmp_init(&m);
            for (int k = 0; k < ref.n; k++) {
                const moe_tensor *g = moe_golden_set_find(&got, ref.name[k]);
                if (!g || moe_compare_exact(g, &ref.t[k], &m) != MOE_OK) m.mismatches++;
            }
            if (m.mismatches || got.n != ref.n) {
                fprintf(stderr, "%s: %lld elements differ on the second table\n", c->name, (long long)m.mismatches);
                bad++;
            }
        }
        moe_golden_set_free(&in), moe_golden_set_free(&ref), moe_golden_set_free(&got);
    }
    ck_assert_int_eq(bad, 0);
    ck_assert_int_ge(unsupported, 1);
}
END_TEST

static Suite *golden_suite(void)
{
    Suite *s = suite_create("golden");
    TCase *tc = tcase_create("golden");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, table_is_well_formed);
    tcase_add_test(tc, table_covers_every_variant);
    tcase_add_test(tc, committed_goldens_verify);
    tcase_add_test(tc, flipped_byte_is_corrupt);
    tcase_add_test(tc, truncated_file_is_corrupt);
    tcase_add_test(tc, missing_file_is_missing);
    tcase_add_test(tc, manifest_damage_is_corrupt);
    tcase_add_test(tc, unlisted_file_is_corrupt);
    tcase_add_test(tc, changed_reference_is_changed);
    tcase_add_test(tc, update_rewrites_only_the_changed_case);
    tcase_add_test(tc, digest_only_case_is_checked);
    tcase_add_test(tc, stale_case_directory);
    tcase_add_test(tc, generate_is_deterministic);
    tcase_add_test(tc, list_and_show);
    tcase_add_test(tc, usage_errors);
    tcase_add_test(tc, unbuilt_backend_is_skipped);
    tcase_add_test(tc, gemm_cases_have_a_bound);
    tcase_add_test(tc, ll_rows_compare_as_sets);
    tcase_add_test(tc, every_case_runs_on_another_ops_table);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(golden_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
