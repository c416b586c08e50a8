/* The HTML report (reports/report.py) rendered from the fixtures in
 * tests/report/: exit codes and messages, byte-identical output for the same
 * input, no external reference, bad and missing inputs leaving no file, the
 * nightly comparison, and the page itself in headless Chromium (the DOM after
 * the scripts ran, no JavaScript error, a screenshot). python3 with jinja2
 * and chromium are required dependencies: without them the suite fails and
 * says to run `make deps`.
 *
 * Outputs go to $MOE_BUILD/report-test/ (else the build directory this
 * binary lives in); the screenshot report.png stays there to be looked at. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "test_shell.h"

#define HAS(buf, s) ck_assert_msg(strstr(buf, s) != NULL, "'%s' not in: %.2000s", s, buf)
#define LACKS(buf, s) ck_assert_msg(strstr(buf, s) == NULL, "'%s' unexpectedly in the output", s)

#define FIX "tests/report/"
#define ALL_INPUTS "--sweep " FIX "sweep.jsonl --compat " FIX "compat.json --golden " FIX "golden.json " \
                   "--golden-diff " FIX "golden_diff.json --bench " FIX "bench.json " \
                   "--bench-gpu " FIX "bench_gpu_merged.json " \
                   "--compare " FIX "old.jsonl " FIX "sweep.jsonl"
#define SWEEP_LINE "Sweep: 16 passed, 2 failed, 2 skipped, 1 error"
/* the GPU bench fixtures: moe-bench's and the torch peer's points, and their merge */
#define GPU_INPUTS FIX "bench_gpu_cuda.json " FIX "bench_gpu_torch.json"
#define GPU_LINE "GPU bench: 18 cuda-fast points, faster than the best peer at 10 of 12 (geomean 1.35×); " \
                 "goals decode 2/3, prefill 2/6, prefill-burst 1/6, small-m 1/3"

static char outdir[PATH_MAX];
static char no_python[256], no_chromium[256];   /* set by main(): what is not installed */
static char out_text[1 << 16], err_text[1 << 16];
static const char *py_env = "";   /* environment assignments before python3 */

static void out_path(char *dst, size_t n, const char *name)
{
    int w = snprintf(dst, n, "%s/%s", outdir, name);
    ck_assert(w > 0 && (size_t)w < n);
}

/* OUTDIR/stdout.txt and stderr.txt, a command's streams, into out_text / err_text */
static void read_streams(void)
{
    char p[PATH_MAX + 64];
    out_path(p, sizeof p, "stdout.txt");
    slurp_into(p, out_text, sizeof out_text);
    out_path(p, sizeof p, "stderr.txt");
    slurp_into(p, err_text, sizeof err_text);
}

/* python3 reports/SCRIPT ARGS, with --out OUTDIR/NAME when name is given
 * (removed first, so a failed run cannot leave an old one looking written);
 * its stdout and stderr in out_text / err_text. */
static int py_script(const char *script, const char *args, const char *name)
{
    if (no_python[0]) ck_abort_msg("%s", no_python);
    char out[PATH_MAX + 80] = "";
    if (name) {
        char p[PATH_MAX + 64];
        out_path(p, sizeof p, name);
        unlink(p);
        snprintf(out, sizeof out, "--out '%s'", p);
    }
    int rc = shf("%s python3 reports/%s %s %s > '%s/stdout.txt' 2> '%s/stderr.txt'", py_env, script, args, out,
                 outdir, outdir);
    read_streams();
    return rc;
}

static int report(const char *args, const char *name) { return py_script("report.py", args, name); }
static int merge(const char *args, const char *name) { return py_script("bench_merge.py", args, name); }
static int cards(const char *args, const char *name) { return py_script("bench_cards.py", args, name); }

/* OUTDIR/NAME holding TEXT (a hand-made bad input); its path in PATH. */
static void write_file(const char *name, const char *text, char *path, size_t n)
{
    out_path(path, n, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static int exists(const char *name)
{
    char p[PATH_MAX + 64];
    out_path(p, sizeof p, name);
    return access(p, F_OK) == 0;
}

/* No file of the output directory starts with ".NAME." (report.py's temporary files). */
static void no_temp_left(const char *name)
{
    char prefix[256];
    snprintf(prefix, sizeof prefix, ".%s.", name);
    DIR *d = opendir(outdir);
    ck_assert_ptr_nonnull(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        ck_assert_msg(strncmp(e->d_name, prefix, strlen(prefix)) != 0, "temporary file left: %s", e->d_name);
    closedir(d);
}

/* Headless Chromium on OUTDIR/HTML (plus a URL fragment, may be "") with
 * MODE ("--dump-dom" or a screenshot); stdout to OUTDIR/TO. Virtual time
 * lets the scripts finish first. */
static int chromium(const char *html, const char *fragment, const char *mode, const char *to)
{
    if (no_chromium[0]) ck_abort_msg("%s", no_chromium);
    char in[PATH_MAX + 64], cwd[PATH_MAX], abs[2 * PATH_MAX + 96];
    out_path(in, sizeof in, html);
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    snprintf(abs, sizeof abs, "%s%s%s", in[0] == '/' ? "" : cwd, in[0] == '/' ? "" : "/", in);
    return shf("timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run "
               "--user-data-dir='%s/chromium-profile' --virtual-time-budget=5000 --window-size=1400,2000 "
               "%s 'file://%s%s' > '%s/%s' 2> '%s/chromium-stderr.txt'",
               outdir, mode, abs, fragment, outdir, to, outdir);
}

static char *dump_dom(const char *html, const char *fragment)
{
    ck_assert_int_eq(chromium(html, fragment, "--dump-dom", "dom.html"), 0);
    char p[PATH_MAX + 64];
    out_path(p, sizeof p, "dom.html");
    char *dom = slurp(p, NULL);
    ck_assert_ptr_nonnull(dom);
    return dom;
}

/* The text of HAY from marker START up to marker END (both must be there). */
static char *between(const char *hay, const char *start, const char *end)
{
    const char *a = strstr(hay, start);
    ck_assert_msg(a != NULL, "'%s' not found", start);
    const char *b = strstr(a + strlen(start), end);
    ck_assert_msg(b != NULL, "'%s' not found after '%s'", end, start);
    size_t n = (size_t)(b - a);
    char *s = malloc(n + 1);
    memcpy(s, a, n);
    s[n] = '\0';
    return s;
}

static int count(const char *hay, const char *needle)
{
    int c = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) c++;
    return c;
}

static void render_full(const char *name)
{
    ck_assert_msg(report(ALL_INPUTS, name) == 0, "report.py failed: %s", err_text);
}

START_TEST(renders_every_section)
{
    render_full("report.html");
    HAS(out_text, SWEEP_LINE);
    HAS(out_text, "Golden: 4 golden cases verified, 1 failed");
    HAS(out_text, "Nightly: 1 new failure, 1 fixed, 3 metric changes, 2 timing changes");
    HAS(out_text, GPU_LINE);
    HAS(out_text, "report: ");
    HAS(out_text, "report.html (");
    ck_assert_str_eq(err_text, "");
    char p[PATH_MAX + 64];
    out_path(p, sizeof p, "report.html");
    size_t n;
    char *html = slurp(p, &n);
    ck_assert_ptr_nonnull(html);
    ck_assert_msg(n > 50000, "report only %zu bytes", n);
    const char *ids[] = {"id=\"summary-line\"", "id=\"compat\"", "id=\"cases\"", "id=\"case-data\"",
                         "id=\"golden\"", "id=\"golden-diff\"", "id=\"nightly\"", "id=\"bench\"",
                         "id=\"bench-gpu\"", "class=\"matrix\"", "<svg class=\"plot\""};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) HAS(html, ids[i]);
    /* self-contained: no fetched resource; the only URLs are the SVG namespace */
    LACKS(html, "<link");
    LACKS(html, " src=");
    LACKS(html, "@import");
    LACKS(html, "url(");
    for (const char *h = strstr(html, "http"); h; h = strstr(h + 1, "http"))
        ck_assert_msg(strncmp(h, "http://www.w3.org/2000/svg", 26) == 0, "external reference: %.60s", h);
    /* golden: the corrupt case and its reason; the golden diff's files */
    HAS(html, "out.npy: SHA-256 differs from MANIFEST.sha256");
    HAS(html, "chip g-corrupt");
    HAS(html, "(new file)");
    free(html);
}
END_TEST

/* Same bytes twice, also under different string-hash seeds (set order). */
START_TEST(deterministic)
{
    py_env = "PYTHONHASHSEED=1";
    render_full("det1.html");
    py_env = "PYTHONHASHSEED=2";
    render_full("det2.html");
    char p1[PATH_MAX + 64], p2[PATH_MAX + 64];
    out_path(p1, sizeof p1, "det1.html");
    out_path(p2, sizeof p2, "det2.html");
    size_t n1, n2;
    char *a = slurp(p1, &n1), *b = slurp(p2, &n2);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_msg(n1 == n2 && memcmp(a, b, n1) == 0, "two renders of the same input differ");
    free(a);
    free(b);
}
END_TEST

START_TEST(chromium_dom)
{
    render_full("report.html");
    char *dom = dump_dom("report.html", "");
    HAS(dom, "data-status=\"ready\"");
    char *body = between(dom, "<body", ">");
    ck_assert_msg(strstr(body, "data-js-errors") == NULL, "JavaScript errors: %.2000s",
                  strstr(dom, "id=\"js-errors\""));
    free(body);
    HAS(dom, "<div id=\"js-errors\" class=\"js-errors\" hidden=\"\">");
    /* the summary line, first */
    char *summary = between(dom, "id=\"summary-line\"", "</p>");
    HAS(summary, "16 passed, 2 failed, 2 skipped, 1 error");
    free(summary);
    ck_assert_msg(strstr(dom, "id=\"summary-line\"") < strstr(dom, "id=\"compat\""), "summary not first");
    /* the compatibility matrix with its rules */
    char *compat = between(dom, "<section id=\"compat\"", "</section>");
    HAS(compat, "class=\"matrix\"");
    HAS(compat, "format-mismatch");
    HAS(compat, "matching-quant (nyi)");
    HAS(compat, "42 compatible, 100 structurally invalid, 5 not yet supported");
    free(compat);
    /* drawn by the script: every record's row, the count, and the details of
     * the first failing record, with its mismatches in hex, heatmap and histogram */
    char *table = between(dom, "<table id=\"case-table\"", "</table>");
    ck_assert_int_eq(count(table, "<tr data-i="), 21);
    free(table);
    HAS(dom, "<span id=\"case-count\" class=\"muted\">21 records</span>");
    char *details = between(dom, "<div id=\"details\"", "<script type=\"application/json\"");
    HAS(details, "moe.noep.triton_like.bf16.silu.E8.k2.M40.H256.I128.w1");
    HAS(details, "+7E.3A");
    HAS(details, "<svg class=\"heatmap\"");
    HAS(details, "<svg class=\"histogram\"");
    free(details);
    free(dom);
}
END_TEST

START_TEST(chromium_screenshot)
{
    render_full("report.html");
    char png[PATH_MAX + 64], arg[PATH_MAX + 96];
    out_path(png, sizeof png, "report.png");
    unlink(png);
    snprintf(arg, sizeof arg, "--screenshot='%s'", png);
    ck_assert_int_eq(chromium("report.html", "", arg, "screenshot-stdout.txt"), 0);
    size_t n;
    unsigned char *b = (unsigned char *)slurp(png, &n);
    ck_assert_msg(b != NULL, "no screenshot at %s", png);
    ck_assert_msg(n > 60000, "screenshot only %zu bytes (a blank page is about 13 kB)", n);
    ck_assert(memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0);
    unsigned w = (unsigned)b[16] << 24 | (unsigned)b[17] << 16 | (unsigned)b[18] << 8 | b[19];
    unsigned h = (unsigned)b[20] << 24 | (unsigned)b[21] << 16 | (unsigned)b[22] << 8 | b[23];
    ck_assert_uint_eq(w, 1400);
    ck_assert_uint_eq(h, 2000);
    free(b);
}
END_TEST

/* The table's filters and sort, preset through the URL fragment. */
START_TEST(chromium_filters)
{
    render_full("report.html");
    /* "hide passing" and a glob: the two failing records of the fp8 block case... */
    char *dom = dump_dom("report.html", "#filter=*wblock128*M16*&hide=1");
    char *table = between(dom, "<table id=\"case-table\"", "</table>");
    ck_assert_int_eq(count(table, "<tr data-i="), 1);
    HAS(table, "quantize");
    free(table);
    HAS(dom, "1 of 21 records");
    free(dom);
    /* ...a verdict filter; and a descending sort puts the largest share first */
    dom = dump_dom("report.html", "#verdict=refused-as-expected");
    table = between(dom, "<table id=\"case-table\"", "</table>");
    ck_assert_int_eq(count(table, "<tr data-i="), 3);
    ck_assert_int_eq(count(table, ">refused-as-expected</span>"), 3);
    free(table);
    free(dom);
    dom = dump_dom("report.html", "#sort=-share");
    char *body = between(dom, "<table id=\"case-table\"", "</table>");
    table = between(body, "<tbody>", "</tr>");
    free(body);
    HAS(table, "1.87");
    free(table);
    HAS(dom, "th data-key=\"share\" class=\"num\" aria-sort=\"descending\"");
    free(dom);
}
END_TEST

/* The check above would see a script error: a report with one injected. */
START_TEST(chromium_sees_js_errors)
{
    render_full("report.html");
    char src[PATH_MAX + 64], dst[PATH_MAX + 64];
    out_path(src, sizeof src, "report.html");
    out_path(dst, sizeof dst, "broken.html");
    char *html = slurp(src, NULL);
    ck_assert_ptr_nonnull(html);
    char *end = strstr(html, "</body>");
    ck_assert_ptr_nonnull(end);
    FILE *f = fopen(dst, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%.*s<script>no_such_function();</script>%s", (int)(end - html), html, end);
    fclose(f);
    free(html);
    char *dom = dump_dom("broken.html", "");
    HAS(dom, "data-js-errors=\"1\"");
    HAS(dom, "no_such_function");
    free(dom);
}
END_TEST

START_TEST(malformed_line)
{
    ck_assert_int_eq(report("--sweep " FIX "bad.jsonl", "bad.html"), 3);
    HAS(err_text, "tests/report/bad.jsonl:3: invalid JSON");
    ck_assert_str_eq(out_text, "");
    ck_assert(!exists("bad.html"));
    no_temp_left("bad.html");
    /* a JSON document: the line of the syntax error */
    char p[PATH_MAX + 64], args[PATH_MAX + 128];
    out_path(p, sizeof p, "bad-compat.json");
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"cells\": [\n  {\"pf\": \"noep\"},\n  {\"pf\": \"noep\",, }\n]}\n", f);
    fclose(f);
    snprintf(args, sizeof args, "--compat '%s'", p);
    ck_assert_int_eq(report(args, "bad.html"), 3);
    HAS(err_text, "bad-compat.json:3: invalid JSON");
    ck_assert(!exists("bad.html"));
    /* well-formed JSON that breaks the schema: the line and the field */
    out_path(p, sizeof p, "bad-verdict.jsonl");
    f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"type\": \"meta\"}\n{\"type\": \"case\", \"case\": \"c\", \"backend\": \"ref\", \"stage\": \"e2e\", "
          "\"verdict\": \"passed\"}\n", f);
    fclose(f);
    snprintf(args, sizeof args, "--sweep '%s'", p);
    ck_assert_int_eq(report(args, "bad.html"), 3);
    HAS(err_text, "bad-verdict.jsonl:2: unknown verdict 'passed'");
    ck_assert(!exists("bad.html"));
    no_temp_left("bad.html");
}
END_TEST

START_TEST(missing_input)
{
    ck_assert_int_eq(report("--sweep " FIX "sweep.jsonl --golden " FIX "no-such-file.json", "missing.html"), 3);
    HAS(err_text, "tests/report/no-such-file.json: cannot read: No such file or directory");
    ck_assert(!exists("missing.html"));
    no_temp_left("missing.html");
    /* no input at all is a usage error */
    ck_assert_int_eq(report("", "missing.html"), 2);
    HAS(err_text, "at least one input");
    ck_assert(!exists("missing.html"));
}
END_TEST

START_TEST(nightly_compare)
{
    ck_assert_int_eq(report("--compare " FIX "old.jsonl " FIX "sweep.jsonl", "nightly.html"), 0);
    HAS(out_text, "Nightly: 1 new failure, 1 fixed, 3 metric changes, 2 timing changes");
    char p[PATH_MAX + 64];
    out_path(p, sizeof p, "nightly.html");
    char *html = slurp(p, NULL);
    ck_assert_ptr_nonnull(html);
    char *nf = between(html, "id=\"nightly-new-failures\"", "id=\"nightly-fixed\"");
    HAS(nf, "moe.noep.triton_like.bf16.silu.E8.k2.M40.H256.I128.w1");
    HAS(nf, "<span class=\"chip v-pass\">pass</span>");
    HAS(nf, "<span class=\"chip v-fail\">fail</span>");
    free(nf);
    char *fixed = between(html, "id=\"nightly-fixed\"", "id=\"nightly-metrics\"");
    HAS(fixed, "moe.noep.ck_fused.bf16.gelu.E16.k4.M64.H512.I256.w1");
    LACKS(fixed, "moe.noep.triton_like.bf16.silu.E8.k2.M40.H256.I128.w1");
    free(fixed);
    char *timing = between(html, "id=\"nightly-timing\"", "</section>");
    HAS(timing, "timing only, not a conformance result");
    HAS(timing, "2.50× slower");
    HAS(timing, "0.45× faster");
    free(timing);
    /* without --sweep, the new run is shown in full too */
    HAS(html, "id=\"case-data\"");
    free(html);
}
END_TEST

/* bench_merge.py over the two producers' fixtures: the summary lines, and
 * the committed merge byte for byte (the output depends on the inputs alone). */
START_TEST(bench_gpu_merge)
{
    ck_assert_msg(merge(GPU_INPUTS, "merged.json") == 0, "bench_merge.py failed: %s", err_text);
    ck_assert_str_eq(err_text, "");
    HAS(out_text, "cuda-fast: 18 points: 16 ok, 1 skipped, 1 failed; faster than the best peer at 10 of 12 points "
                  "with a peer (geomean speedup 1.35x)");
    HAS(out_text, "share of floor >= 0.90 bf16, 0.85 fp8: 2 met, 1 missed");
    HAS(out_text, "of the dense peak: 2 met, 4 missed");
    /* the burst reading: the same points against the higher idle-GPU figure (820 against 782.9) */
    HAS(out_text, "goal prefill against the burst dense peak (timed after a second idle; a reading, not the goal's): "
                  "M >= 4096: achieved TFLOP/s >= 0.70 of it: 1 met, 5 missed");
    HAS(out_text, "qwen3-30b-a3b at M = 1: share of floor >= 0.50: 1 met, 2 missed");
    char p[PATH_MAX + 64];
    out_path(p, sizeof p, "merged.json");
    size_t n1, n2;
    char *got = slurp(p, &n1), *want = slurp(FIX "bench_gpu_merged.json", &n2);
    ck_assert_ptr_nonnull(got);
    ck_assert_ptr_nonnull(want);
    ck_assert_msg(n1 == n2 && memcmp(got, want, n1) == 0,
                  "the merge differs from " FIX "bench_gpu_merged.json (regenerate it with bench_merge.py " GPU_INPUTS
                  " --out " FIX "bench_gpu_merged.json when the format changes)");
    /* inputs without a burst figure (files from before it): no burst reading, rather than every point a miss */
    {
        char p[PATH_MAX + 64];
        write_file("plain.json",
                   "{\"type\": \"bench-gpu\", \"meta\": {\"ceilings\": {\"bf16_dense_tflops\": 700}}, \"points\": "
                   "[{\"shape\": \"mixtral-8x7b\", \"M\": 4096, \"scheme\": \"bf16\", \"routing\": \"uniform\", "
                   "\"impl\": \"cuda-fast\", \"status\": \"ok\", \"bytes\": 1, \"flops\": 2.8e12, "
                   "\"median_us\": 5000}]}\n",
                   p, sizeof p);
        ck_assert_msg(merge(p, "merged-plain.json") == 0, "%s", err_text);
        HAS(out_text, "goal prefill: M >= 4096: achieved TFLOP/s >= 0.70 of the dense peak: 1 met, 0 missed");
        ck_assert_msg(strstr(out_text, "burst") == NULL, "a burst reading without a burst figure: %s", out_text);
    }
    /* the GEMM-only measurement is faster than every layer in the fixture, and the atomic variant than
     * cuda-fast at one point: neither is ever a peer */
    LACKS(got, "\"best_peer\": \"cublas-gemm-only\"");
    LACKS(got, "\"best_peer\": \"cuda-fast-atomic\"");
    HAS(got, "\"best_peer\": \"cublas\"");
    free(got);
    free(want);
}
END_TEST

/* Bad inputs: exit 2, a message naming the file and the rule, nothing written. */
START_TEST(bench_gpu_merge_bad)
{
    static const struct {
        const char *name, *text, *rule;
    } bad[] = {
        {"bad-type.json", "{\"type\": \"bench\", \"meta\": {}, \"points\": []}\n",
         "\"type\" must be \"bench-gpu\", not 'bench'"},
        {"bad-median.json",
         "{\"type\": \"bench-gpu\", \"meta\": {}, \"points\": [{\"shape\": \"deepseek-v3\", \"M\": 1, "
         "\"scheme\": \"bf16\", \"routing\": \"uniform\", \"impl\": \"cuda-fast\", \"status\": \"ok\", "
         "\"bytes\": 1, \"flops\": 1}]}\n",
         "points[0]: an ok point needs \"median_us\" > 0"},
        {"bad-why.json",
         "{\"type\": \"bench-gpu\", \"meta\": {}, \"points\": [{\"shape\": \"deepseek-v3\", \"M\": 1, "
         "\"scheme\": \"bf16\", \"routing\": \"uniform\", \"impl\": \"cuda-fast\", \"status\": \"skipped\"}]}\n",
         "points[0]: a skipped point needs its reason in \"why\""},
        {"bad-ceiling.json",
         "{\"type\": \"bench-gpu\", \"meta\": {\"ceilings\": {\"read_tbs\": \"fast\"}}, \"points\": []}\n",
         "meta.ceilings.read_tbs must be a positive number or null"},
        {"bad-seed.json", "{\"type\": \"bench-gpu\", \"meta\": {\"seed\": 7}, \"points\": []}\n",
         "meta.seed differs between the inputs (1, 7)"},
        {"bad-burst.json", "{\"type\": \"bench-gpu\", \"meta\": {\"ceilings\": {\"bf16_dense_burst_tflops\": -3}}, "
         "\"points\": []}\n", "meta.ceilings.bf16_dense_burst_tflops must be a positive number or null"},
        {"bad-clock.json",
         "{\"type\": \"bench-gpu\", \"meta\": {}, \"points\": [{\"shape\": \"deepseek-v3\", \"M\": 1, "
         "\"scheme\": \"bf16\", \"routing\": \"uniform\", \"impl\": \"cuda-fast\", \"status\": \"ok\", "
         "\"bytes\": 1, \"flops\": 1, \"median_us\": 2, \"sm_clock_mhz\": 0}]}\n",
         "points[0]: \"sm_clock_mhz\" must be a positive number (MHz) or null"},
        {"bad-syntax.json", "{\"type\": \"bench-gpu\",\n \"meta\": {},,\n}\n", "bad-syntax.json:2: invalid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char p[PATH_MAX + 64], args[2 * PATH_MAX + 128];
        write_file(bad[i].name, bad[i].text, p, sizeof p);
        snprintf(args, sizeof args, FIX "bench_gpu_cuda.json '%s'", p);
        ck_assert_msg(merge(args, "merged-bad.json") == 2, "%s: exit 2 expected: %s", bad[i].name, err_text);
        HAS(err_text, bad[i].name);
        HAS(err_text, bad[i].rule);
        ck_assert(!exists("merged-bad.json"));
        no_temp_left("merged-bad.json");
    }
    /* producers timed after different warm-ups by time: merged, with a warning naming both */
    {
        char *torch = slurp(FIX "bench_gpu_torch.json", NULL), *at;
        ck_assert_ptr_nonnull(torch);
        ck_assert_ptr_nonnull(at = strstr(torch, "\"warm_ms\": 500"));
        memcpy(at, "\"warm_ms\":  50", strlen("\"warm_ms\": 500"));
        char p[PATH_MAX + 64], args[2 * PATH_MAX + 128];
        write_file("torch-warm50.json", torch, p, sizeof p);
        free(torch);
        snprintf(args, sizeof args, FIX "bench_gpu_cuda.json '%s'", p);
        ck_assert_msg(merge(args, "merged-warm.json") == 0, "%s", err_text);
        HAS(err_text, "warning: the inputs were timed after different warm-ups by time (meta.warm_ms "
                      "tests/report/bench_gpu_cuda.json: 500");
        HAS(err_text, "torch-warm50.json: 50): on a power-capped GPU their times start from different clocks");
    }
    /* the same producer twice: every point a duplicate */
    ck_assert_int_eq(merge(FIX "bench_gpu_torch.json " FIX "bench_gpu_torch.json", "merged-bad.json"), 2);
    HAS(err_text, "a second point for shape qwen3-30b-a3b, M 1, scheme bf16, routing uniform, impl torch-grouped-mm");
    HAS(err_text, "one point per shape, M, scheme, routing and impl");
    ck_assert(!exists("merged-bad.json"));
    /* report.py reads a bad file the same way: its bad-input exit, nothing written */
    char p[PATH_MAX + 64], args[PATH_MAX + 96];
    write_file("bad-type.json", bad[0].text, p, sizeof p);
    snprintf(args, sizeof args, "--bench-gpu '%s'", p);
    ck_assert_int_eq(report(args, "bad.html"), 3);
    HAS(err_text, "bad-type.json: \"type\" must be \"bench-gpu-merged\" (bench_merge.py) or \"bench-gpu\" "
                  "(one producer), not 'bench'");
    ck_assert(!exists("bad.html"));
}
END_TEST

#define CARDS FIX "cards_a.json " FIX "cards_b.json"

/* bench_cards.py on cards_a.json and a copy of cards_b.json (OUTDIR/NAME) whose text FROM is replaced by TO
 * (same length) */
static int cards_b_edited(const char *name, const char *from, const char *to)
{
    char *b = slurp(FIX "cards_b.json", NULL), *at, p[PATH_MAX + 64], args[PATH_MAX + 128];
    ck_assert_ptr_nonnull(b);
    ck_assert(strlen(from) == strlen(to));
    ck_assert_msg((at = strstr(b, from)) != NULL, "'%s' not in " FIX "cards_b.json", from);
    memcpy(at, to, strlen(to));
    write_file(name, b, p, sizeof p);
    free(b);
    snprintf(args, sizeof args, FIX "cards_a.json '%s'", p);
    return cards(args, NULL);
}

/* Two grids on cards whose read ceilings are 3.0 and 4.5 TB/s (R = 1.5):
 * with t_A = 1.5 u + c and t_B = u + c the fixtures' points split exactly
 * (150 / 100 us: all bandwidth; 250 / 200: half; 300 / 300: none), the
 * points without an ok partner are counted, not compared, and --impl picks
 * another implementation. */
START_TEST(bench_cards_split)
{
    ck_assert_msg(cards(CARDS, "cards.json") == 0, "bench_cards.py failed: %s", err_text);
    ck_assert_str_eq(err_text, "");
    HAS(out_text, "read 4.5 TB/s, 1.5x A's");
    HAS(out_text, "deepseek-v3 M 16 bf16 uniform: 150.0 -> 100.0 us (1.50x); not scaling with bandwidth: 0% of B's");
    HAS(out_text, "mixtral-8x7b M 256 bf16 uniform: 250.0 -> 200.0 us (1.25x); not scaling with bandwidth: 50% of B's");
    HAS(out_text, "mixtral-8x7b M 256 fp8_wtensor_atensor uniform: 300.0 -> 300.0 us (1.00x); not scaling with "
                  "bandwidth: 100% of B's time");
    /* gpt-oss-120b failed on B, qwen3-30b-a3b was not run there: neither is compared */
    HAS(out_text, "3 points of cuda-fast in both; 2 only in A, 0 only in B");
    LACKS(out_text, "gpt-oss-120b");
    char p[PATH_MAX + 64];
    out_path(p, sizeof p, "cards.json");
    char *doc = slurp(p, NULL);
    ck_assert_ptr_nonnull(doc);
    HAS(doc, "\"type\": \"bench-cards\"");
    HAS(doc, "\"other_share\": 0.5");
    HAS(doc, "\"bandwidth_us\": 100.0");
    HAS(doc, "\"read_ratio\": 1.5");
    free(doc);
    ck_assert_msg(cards(CARDS " --impl torch-grouped-mm", NULL) == 0, "%s", err_text);
    HAS(out_text, "mixtral-8x7b M 256 bf16 uniform: 240.0 -> 160.0 us (1.50x); not scaling with bandwidth: 0%");
    HAS(out_text, "1 points of torch-grouped-mm in both");
    /* dense peaks more than 5% apart, another routing draw: compared, each with a warning naming both files */
    ck_assert_msg(cards_b_edited("cards-peak.json", "\"fp8_dense_tflops\": 1390", "\"fp8_dense_tflops\": 1990") == 0,
                  "%s", err_text);
    HAS(err_text, "warning: meta.ceilings.fp8_dense_tflops differs by more than 5% (tests/report/cards_a.json: 1400");
    HAS(err_text, "cards-peak.json: 1990)");
    ck_assert_msg(cards_b_edited("cards-seed.json", "\"seed\": 1", "\"seed\": 7") == 0, "%s", err_text);
    HAS(err_text, "warning: meta.seed differs (tests/report/cards_a.json: 1,");
    HAS(err_text, "cards-seed.json: 7): the points were timed on different routings");
}
END_TEST

/* Bad inputs: exit 2, the file and the rule named, nothing written. */
START_TEST(bench_cards_bad)
{
    char p[PATH_MAX + 64], args[2 * PATH_MAX + 64];
    /* the same read ceiling twice: the split would divide by zero */
    ck_assert_int_eq(cards(FIX "cards_a.json " FIX "cards_a.json", "cards-bad.json"), 2);
    HAS(err_text, "the read ceilings must differ by at least 5% (tests/report/cards_a.json: 3.0 TB/s");
    ck_assert(!exists("cards-bad.json"));
    /* no read ceiling */
    write_file("cards-noread.json", "{\"type\": \"bench-gpu\", \"meta\": {}, \"points\": []}\n", p, sizeof p);
    snprintf(args, sizeof args, FIX "cards_a.json '%s'", p);
    ck_assert_int_eq(cards(args, "cards-bad.json"), 2);
    HAS(err_text, "cards-noread.json: meta.ceilings.read_tbs must be a positive number");
    ck_assert(!exists("cards-bad.json"));
    /* nothing in common */
    ck_assert_int_eq(cards(CARDS " --impl cublas", "cards-bad.json"), 2);
    HAS(err_text, "cards_b.json: no ok point of impl cublas at the same shape, M, scheme and routing as in");
    ck_assert(!exists("cards-bad.json"));
    no_temp_left("cards-bad.json");
    /* a missing file and a malformed one, read as bench_merge.py reads them */
    ck_assert_int_eq(cards(FIX "cards_a.json " FIX "no-such.json", "cards-bad.json"), 2);
    HAS(err_text, "no-such.json: cannot read");
    write_file("cards-type.json", "{\"type\": \"bench\", \"meta\": {}, \"points\": []}\n", p, sizeof p);
    snprintf(args, sizeof args, "'%s' " FIX "cards_b.json", p);
    ck_assert_int_eq(cards(args, "cards-bad.json"), 2);
    HAS(err_text, "cards-type.json: \"type\" must be \"bench-gpu-merged\" (bench_merge.py) or \"bench-gpu\"");
    ck_assert(!exists("cards-bad.json"));
    /* --out where no file can be written: exit 2 naming the path, nothing printed as if done */
    ck_assert_int_eq(cards(CARDS " --out /nonexistent-dir/cards.json", NULL), 2);
    HAS(err_text, "bench_cards.py: /nonexistent-dir/cards.json: cannot write");
    ck_assert_str_eq(out_text, "");
}
END_TEST

/* torch_peer.py's plan without torch (--dry-run) names the warm-up by time,
 * and a bad --warm-ms is a usage error naming the rule. */
static int torch_peer(const char *args)
{
    if (no_python[0]) ck_abort_msg("%s", no_python);
    int rc = shf("python3 reports/torch_peer.py --dry-run %s > '%s/stdout.txt' 2> '%s/stderr.txt'", args, outdir,
                 outdir);
    read_streams();
    return rc;
}

START_TEST(torch_peer_warm)
{
    ck_assert_int_eq(torch_peer("--shape qwen3-30b-a3b --m 1 --scheme bf16"), 0);
    HAS(out_text, "500 ms and 3 runs of warm-up, then up to 20 timed runs");
    ck_assert_int_eq(torch_peer("--shape qwen3-30b-a3b --m 1 --scheme bf16 --warm-ms 40 --warmup 2"), 0);
    HAS(out_text, "40 ms and 2 runs of warm-up");
    ck_assert_int_eq(torch_peer("--shape qwen3-30b-a3b --m 1 --scheme bf16 --warmup 0"), 0);
    HAS(out_text, "0 ms and 0 runs of warm-up");   /* as moe-bench: --warmup 0 means none of either */
    ck_assert_int_eq(torch_peer("--warm-ms 10001"), 2);
    HAS(err_text, "--warm-ms must be milliseconds in [0, 10000], not 10001");
    ck_assert_int_eq(torch_peer("--warm-ms -5"), 2);
    HAS(err_text, "not -5");
    /* its NVML clock without a usable device (no libnvidia-ml here, or a torch without CUDA): no clock, the
     * reason kept, nothing raised */
    ck_assert_int_eq(shf("python3 -c 'import sys, types; sys.path.insert(0, \"reports\"); import torch_peer; "
                         "c = torch_peer.Clock(types.SimpleNamespace()); "
                         "assert c.mhz() is None and c.fn is None and c.why, vars(c)' > '%s/stdout.txt' 2> "
                         "'%s/stderr.txt'",
                         outdir, outdir),
                     0);
}
END_TEST

/* The GPU performance section: ceilings, goals with their misses, the plots
 * (time and share of floor per shape x scheme) and the table. */
START_TEST(bench_gpu_section)
{
    ck_assert_msg(report("--bench-gpu " FIX "bench_gpu_merged.json", "gpu.html") == 0, "report.py failed: %s",
                  err_text);
    HAS(out_text, GPU_LINE);
    ck_assert_str_eq(err_text, "");
    char p[PATH_MAX + 64];
    out_path(p, sizeof p, "gpu.html");
    char *html = slurp(p, NULL);
    ck_assert_ptr_nonnull(html);
    char *sec = between(html, "<section id=\"bench-gpu\"", "</section>");
    HAS(sec, "4.6 TB/s — tests/report/bench_gpu_cuda.json (read_tbs)");
    HAS(sec, "782.9 TFLOP/s — tests/report/bench_gpu_torch.json (torch_bf16_dense_tflops)");
    HAS(sec, "820 TFLOP/s — tests/report/bench_gpu_torch.json (torch_bf16_dense_burst_tflops)");
    HAS(sec, "warm_ms</th><td>500");
    HAS(sec, "warm-up 500 ms a timing, SM clock by NVML");
    /* the revision a producer was built from, where its meta names one (the torch script's does not) */
    HAS(sec, "tests/report/bench_gpu_cuda.json: moe-bench built from 1db627b, 48 points");
    HAS(sec, "tests/report/bench_gpu_torch.json: torch_peer.py, 18 points");
    HAS(sec, "1485 MHz"); /* the clock the sustained bf16 peak was timed at */
    /* each point's median SM clock while timed, where its producer sampled one */
    HAS(sec, "SM clock 1455 MHz");
    HAS(sec, "SM clock 1980 MHz");
    char *goals = between(sec, "id=\"bench-gpu-goals\"", "</table>");
    char *g = between(goals, "data-goal=\"small-m\"", "</tr>");
    HAS(g, "<span class=\"chip v-pass\">1</span>");
    HAS(g, "<span class=\"chip v-fail\">2</span>");
    HAS(g, "qwen3-30b-a3b M=1 fp8_wchannel_atoken: 0.42");
    HAS(g, "qwen3-30b-a3b M=1 fp8_wblock128_agroup128: failed: cudaErrorLaunchOutOfResources");
    free(g);
    g = between(goals, "data-goal=\"prefill\"", "</tr>");
    HAS(g, "deepseek-v3 M=4096 fp8_wblock128_agroup128: skipped: scheme not implemented by cuda-fast");
    free(g);
    free(goals);
    /* two shapes x three schemes: a time plot each, the floor dashed, and a share plot each */
    ck_assert_int_eq(count(sec, "<svg class=\"plot\""), 12);
    ck_assert_int_eq(count(sec, "aria-label=\"share of the roofline floor against M, log-x\""), 6);
    HAS(sec, "<figcaption>deepseek-v3 · bf16: median time per impl across M (dashed: the floor)</figcaption>");
    HAS(sec, "stroke-dasharray=\"6 4\"");
    char *table = between(sec, "id=\"bench-gpu-table\"", "</table>");
    ck_assert_int_eq(count(table, "<tr class=\"ours\">"), 18);
    ck_assert_int_eq(count(table, "<tr"), 67);   /* the header and 66 points */
    HAS(table, "<span class=\"chip v-pass\">1.10×</span>");   /* deepseek-v3 M=1 bf16, over cuBLAS */
    HAS(table, "best peer cublas 191.5 µs");
    HAS(table, "check rel. L2 0.0021");
    HAS(table, "unchecked (no reference at this M)");
    HAS(table, "<span class=\"chip v-fail\">0.97×</span>");   /* deepseek-v3 M=64 bf16: cuBLAS is faster */
    HAS(table, "torch has no blockwise-scaled grouped GEMM on SM90");
    LACKS(table, "best peer cublas-gemm-only");
    LACKS(table, "best peer cuda-fast-atomic");
    free(table);
    free(sec);
    free(html);
    /* one producer's file alone is merged on the way in; without read_tbs the floors are compute only */
    ck_assert_int_eq(report("--bench-gpu " FIX "bench_gpu_torch.json", "gpu1.html"), 0);
    HAS(out_text, "GPU bench: 0 cuda-fast points");
    HAS(err_text, "no read_tbs ceiling in any input: floors hold the compute term only");
    /* a ceiling no input measured shows the producer's reason */
    ck_assert_int_eq(report("--bench-gpu " FIX "bench_gpu_cuda.json", "gpu1.html"), 0);
    out_path(p, sizeof p, "gpu1.html");
    html = slurp(p, NULL);
    ck_assert_ptr_nonnull(html);
    HAS(html, "not measured (tests/report/bench_gpu_cuda.json: cublasLtMatmulAlgoGetHeuristic: no algorithm");
    free(html);
}
END_TEST

int main(int argc, char **argv)
{
    /* Where the outputs go: $MOE_BUILD/report-test, else next to tests/. */
    const char *build = getenv("MOE_BUILD");
    char exe_dir[PATH_MAX] = "build";
    if (!build || !*build) {
        const char *slash = argc > 0 ? strstr(argv[0], "/tests/") : NULL;
        if (slash) snprintf(exe_dir, sizeof exe_dir, "%.*s", (int)(slash - argv[0]), argv[0]);
        build = exe_dir;
    }
    int w = snprintf(outdir, sizeof outdir, "%s/report-test", build);
    if (w < 0 || (size_t)w >= sizeof outdir) {
        fprintf(stderr, "check_report: build directory path too long\n");
        return EXIT_FAILURE;
    }
    mkdir(build, 0755);
    if (mkdir(outdir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "check_report: cannot create %s: %s\n", outdir, strerror(errno));
        return EXIT_FAILURE;
    }
    /* Required dependencies: their absence fails the suite, with the fix. */
    if (system("python3 -c 'import jinja2' >/dev/null 2>&1") != 0)
        snprintf(no_python, sizeof no_python,
                 "python3 with jinja2 is required (reports/requirements.txt): run `make deps`");
    if (system("command -v chromium >/dev/null 2>&1") != 0)
        snprintf(no_chromium, sizeof no_chromium, "chromium is required to check the report: run `make deps`");

    Suite *s = suite_create("report");
    TCase *tc = tcase_create("report.py");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, renders_every_section);
    tcase_add_test(tc, deterministic);
    tcase_add_test(tc, malformed_line);
    tcase_add_test(tc, missing_input);
    tcase_add_test(tc, nightly_compare);
    tcase_add_test(tc, bench_gpu_merge);
    tcase_add_test(tc, bench_gpu_merge_bad);
    tcase_add_test(tc, bench_gpu_section);
    tcase_add_test(tc, bench_cards_split);
    tcase_add_test(tc, bench_cards_bad);
    tcase_add_test(tc, torch_peer_warm);
    tcase_add_test(tc, chromium_dom);
    tcase_add_test(tc, chromium_filters);
    tcase_add_test(tc, chromium_screenshot);
    tcase_add_test(tc, chromium_sees_js_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    char png[PATH_MAX + 16];
    snprintf(png, sizeof png, "%s/report.png", outdir);
    if (access(png, F_OK) == 0) printf("screenshot: %s\n", png);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
