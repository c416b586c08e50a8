/* moe-compat, driven in-process: every subcommand in text and JSON, the
 * seed 002 4.2 EP64 table, the CK sizes of dispatch_sorting.md B.6, and
 * every usage error. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli_run.h"
#include "moe/cli.h"

/* Runs moe-compat with a space-separated argument string. */
static int run(const char *args) { return cli_run(moe_cli_compat, "moe-compat", args); }

/* One JSON document: one line, braces balanced outside strings. */
static void one_json(void)
{
    size_t n = strlen(out_buf);
    ck_assert_msg(n > 2 && out_buf[0] == '{' && out_buf[n - 2] == '}' && out_buf[n - 1] == '\n',
                  "not one JSON object: %s", out_buf);
    int depth = 0, in_str = 0, closed_at_end = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        char c = out_buf[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
            continue;
        }
        if (c == '"') in_str = 1;
        else if (c == '{' || c == '[') depth++;
        else if (c == '}' || c == ']') closed_at_end = --depth == 0 && i == n - 2;
        ck_assert_msg(c != '\n', "newline inside the document");
        ck_assert_msg(depth > 0 || i == n - 2, "document ends early at %zu", i);
    }
    ck_assert(closed_at_end && !in_str);
}

static int count(const char *hay, const char *needle)
{
    int c = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) c++;
    return c;
}

#define TRT "trtllm --sm 90 --act-dtype bf16 --weight-dtype bf16 --activation swiglu --topk 2 " \
            "--experts-per-node 8 --hidden 4096 --inter 4096"

START_TEST(trtllm_text_json)
{
    ck_assert_int_eq(run(TRT " --tokens 300"), 0);
    HAS(out_buf, "prologue        three-step");
    HAS(out_buf, "T=300 > 256");
    HAS(out_buf, "finalize        fused-gemm2-epilogue");
    HAS(out_buf, "[seed 001 §3.5, §4; anchor §5.4, §6 #12]");
    ck_assert_int_eq(count(out_buf, "\n"), 11);
    ck_assert_str_eq(err_buf, "");
    ck_assert_int_eq(run(TRT " --tokens 256 --json"), 0);
    one_json();
    HAS(out_buf, "\"ok\": true");
    HAS(out_buf, "{\"id\": \"prologue\", \"path\": \"fused-single-block\", \"condition\": "
                 "\"!use_wfp4a16 passes, T=256 <= 256 (block 256)");
    ck_assert_int_eq(count(out_buf, "\"id\":"), 11);
    /* flags reach the planner */
    ck_assert_int_eq(run(TRT " --tokens 8 --topk 3 --deterministic --no-tma-ws --sm 80 --ep-size 4 --alltoall"), 0);
    HAS(out_buf, "finalizeMoeRoutingNoFillingKernel");
    HAS(out_buf, "sm80-fused-gated");
    ck_assert_int_eq(run("trtllm --sm 80 --act-dtype fp16 --weight-dtype int4 --activation swiglu --topk 2 "
                         "--tokens 8 --experts-per-node 8 --hidden 4096 --inter 4096 --awq --revision old"), 0);
    HAS(out_buf, "[OLD] has no FC2 prequant fusion");
    ck_assert_int_eq(run("trtllm --sm 90 --act-dtype bf16 --weight-dtype mxfp4 --activation swiglu --topk 2 "
                         "--tokens 8 --experts-per-node 8 --hidden 4096 --inter 4096 --runner"), 0);
    HAS(out_buf, "use_wfp4a16=1 fails the !use_wfp4a16 gate");
    ck_assert_int_eq(run(TRT " --tokens 8 --ootb --lora --disable-finalize-fusion --radix-smem-exceeds"), 0);
    HAS(out_buf, "frontend        ootb");
    ck_assert_int_eq(run("trtllm --sm 100 --act-dtype nvfp4 --weight-dtype fp4 --out-dtype fp16 "
                         "--activation geglu --topk 1 --tokens 1 --experts-per-node 4 --hidden 128 --inter 128 --tma-ws --plugin"), 0);
    HAS(out_buf, "nvfp4-quantize");
    HAS(out_buf, "input arrives as fp16");
}
END_TEST

/* Unsupported configurations: exit 1 and the violated limit, both forms. */
static const struct { const char *args, *limit; } unsupported[] = {
    {"--act-dtype e4m3 --weight-dtype fp8 --sm 88", "fp8-sm"},
    {"--act-dtype fp4 --weight-dtype fp4 --sm 90", "fp4-sm"},
    {"--out-dtype fp16", "out-type"},
    {"--act-dtype fp8 --weight-dtype fp8 --out-dtype fp8", "out-fp8-fp4"},
    {"--ootb --weight-dtype int4", "ootb-weight-only"},
    {"--ootb --sm 100", "ootb-sm100"},
    {"--weight-dtype mxfp4", "plugin-instantiation"},
    {"--sm 89 --tma-ws", "tma-ws-forced-on"},
};

START_TEST(trtllm_unsupported)
{
    char args[1024];
    snprintf(args, sizeof args,
             "trtllm --sm 90 --act-dtype bf16 --weight-dtype bf16 --activation swiglu --topk 2 "
             "--tokens 8 --experts-per-node 8 --hidden 4096 --inter 4096 %s", unsupported[_i].args);
    ck_assert_int_eq(run(args), 1);
    HAS(out_buf, unsupported[_i].limit);
    ck_assert_str_eq(err_buf, "");
    strcat(args, " --json");
    ck_assert_int_eq(run(args), 1);
    one_json();
    HAS(out_buf, "\"ok\": false");
    char want[96];
    snprintf(want, sizeof want, "\"limit\": \"%s\"", unsupported[_i].limit);
    HAS(out_buf, want);
}
END_TEST

/* seed 002 4.2: EP64, 256 experts (4 per rank), bf16, H 7168, 4096 tokens/rank */
START_TEST(hybrid_ep_seed002)
{
    const char *mnnvl = "hybrid-ep-buffers --hidden 7168 --max-tokens-per-rank 4096 "
                        "--ranks-per-node 64 --nodes 1 --experts-per-rank 4";
    ck_assert_int_eq(run(mnnvl), 0);
    HAS(out_buf, "4096 * 64 * 1");
    HAS(out_buf, "= 262144 tokens");
    HAS(out_buf, "262144 * 7168 * 2");
    HAS(out_buf, "= 3758096384 B (3.50 GiB)");
    HAS(out_buf, "262144 * (4 * 64) * 4");
    HAS(out_buf, "= 268435456 B (256.00 MiB)");
    HAS(out_buf, "rdma_token_buffer      0 (one node)");
    HAS(out_buf, "= 4026531840 B (3.75 GiB)");
    char args[256];
    snprintf(args, sizeof args, "%s --json", mnnvl);
    ck_assert_int_eq(run(args), 0);
    one_json();
    HAS(out_buf, "\"total_bytes_per_rank\": 4026531840");
    HAS(out_buf, "\"name\": \"prob_buffer\"");
    HAS(out_buf, "\"bytes\": 268435456");

    const char *rdma = "hybrid-ep-buffers --hidden 7168 --max-tokens-per-rank 4096 "
                       "--ranks-per-node 8 --nodes 8 --experts-per-rank 4";
    ck_assert_int_eq(run(rdma), 0);
    HAS(out_buf, "4096 * 8 * 8");
    HAS(out_buf, "= 262144 tokens");
    HAS(out_buf, "= 3758096384 B (3.50 GiB)");
    HAS(out_buf, "262144 * (4 * 8) * 4");
    HAS(out_buf, "= 33554432 B (32.00 MiB)");
    HAS(out_buf, "4096 * 7 * 7168 * 2");
    HAS(out_buf, "= 411041792 B (392.00 MiB)");
    HAS(out_buf, "4096 * 7 * (4 * 8) * 4");
    HAS(out_buf, "= 3670016 B (3.50 MiB)");
    HAS(out_buf, "= 4206362624 B (3.92 GiB)"); /* the seed's "~4 GB" */
    snprintf(args, sizeof args, "%s --json --fp8", rdma);
    ck_assert_int_eq(run(args), 0);
    one_json();
    HAS(out_buf, "\"dtype\": \"fp8\"");
    HAS(out_buf, "\"values\": \"262144 * (7168 / 128) * 4\", \"bytes\": 58720256");
}
END_TEST

/* dispatch_sorting.md B.6: E=6, topk=3, unit 4, 5 tokens */
START_TEST(ck_sizes_b6)
{
    ck_assert_int_eq(run("ck-sorting-sizes --tokens 5 --topk 3 --experts 6 --block 4"), 0);
    HAS(out_buf, "updated  topk*T + E*B - topk  max_num_tokens_padded = 36");
    HAS(out_buf, "readme   T*topk + E*(B-1)     max_num_tokens_padded = 33");
    HAS(out_buf, "sorted_expert_ids = 9 (36 B)");
    HAS(out_buf, "sentinel plain  T = 5");
    HAS(out_buf, "= 50331653 (0x03000005)");
    ck_assert_int_eq(run("ck-sorting-sizes --tokens 5 --topk 3 --experts 6 --block 4 --json"), 0);
    one_json();
    HAS(out_buf, "\"name\": \"updated\", \"formula\": \"topk*T + E*B - topk\", \"max_num_tokens_padded\": 36, \"sorted_expert_ids\": 9");
    HAS(out_buf, "\"name\": \"readme\", \"formula\": \"T*topk + E*(B-1)\", \"max_num_tokens_padded\": 33, \"sorted_expert_ids\": 9");
    HAS(out_buf, "\"sentinel_plain\": 5, \"sentinel_mock\": 50331653, \"sentinel_mock_hex\": \"0x03000005\"");
    /* the mock encoding has 24 token bits (B.2) */
    ck_assert_int_eq(run("ck-sorting-sizes --tokens 16777216 --topk 1 --experts 1 --block 1 --json"), 0);
    HAS(out_buf, "\"sentinel_mock\": null");
    ck_assert_int_eq(run("ck-sorting-sizes --tokens 16777216 --topk 1 --experts 1 --block 1"), 0);
    HAS(out_buf, "sentinel mock   n/a");
}
END_TEST

START_TEST(help)
{
    ck_assert_int_eq(run("--help"), 0);
    HAS(out_buf, "usage: moe-compat list pf|experts|schemes|activations|rules");
    HAS(out_buf, "moe-compat trtllm --sm N");
    HAS(out_buf, "dtypes: fp32 fp16 bf16 fp8 int8 int4 fp4 mxfp4");
    HAS(out_buf, "activations: relu gelu silu identity relu2 swiglu geglu swiglu_bias");
    ck_assert_int_eq(run("trtllm --help"), 0);
    HAS(out_buf, "usage: moe-compat");
    ck_assert_int_eq(run("hybrid-ep-buffers --json --help"), 0);
    ck_assert_int_eq(run("ck-sorting-sizes -h"), 0);
}
END_TEST

#define CK "ck-sorting-sizes --tokens 5 --topk 3 --experts 6 --block 4"
#define HEP "hybrid-ep-buffers --hidden 7168 --max-tokens-per-rank 4096 --ranks-per-node 8 --experts-per-rank 4"

/* The registry subcommands. */
START_TEST(registry_check)
{
    ck_assert_int_eq(run("check --pf noep --experts triton_like --scheme bf16"), 0);
    HAS(out_buf, "noep x triton_like, scheme bf16, topk 2, E 8, world 1: compatible");
    ck_assert_int_eq(run("check --pf noep --experts triton_like --scheme fp8_wchannel_atensor"), 1);
    HAS(out_buf, "INCOMPATIBLE (0 structural, 1 not yet supported)");
    HAS(out_buf, "matching-quant");
    ck_assert_int_eq(run("check --pf deepep_ll --experts triton_like --scheme fp8_wblock128_agroup128 --topk 12 "
                         "--num-experts 16 --world 2 --hidden 2880 --json"), 1);
    one_json();
    HAS(out_buf, "\"compatible\": false, \"structural\": 3, \"nyi\": 0");
    HAS(out_buf, "\"id\": \"format-mismatch\"");
    HAS(out_buf, "\"id\": \"topk-limit\"");
    HAS(out_buf, "\"detail\": \"hidden 2880 not in deepep_ll's supported list\"");
    ck_assert_int_eq(run("check --pf pplx --experts naive_batched --scheme bf16 --invalid-ids --world 4"), 1);
    HAS(out_buf, "invalid-ids-refused");
    ck_assert_int_eq(run("check --pf noep --experts permute_grouped --scheme bf16 --chunk 16 --weight-on-input"), 1);
    HAS(out_buf, "chunking-unsupported");
    HAS(out_buf, "weight-on-input-topk");
}
END_TEST

START_TEST(registry_matrix_list_explain)
{
    ck_assert_int_eq(run("matrix --scheme bf16"), 0);
    HAS(out_buf, "18 compatible, 31 structurally invalid, 0 not yet supported");
    ck_assert_int_eq(run("matrix --scheme fp8_wchannel_atensor --format csv"), 0);
    HAS(out_buf, "pf,experts,scheme,verdict,rules\n");
    HAS(out_buf, "noep,triton_like,fp8_wchannel_atensor,nyi,matching-quant\n");
    ck_assert_int_eq(run("matrix --scheme nvfp4 --format markdown"), 0);
    HAS(out_buf, "| pf \\ experts |");
    ck_assert_int_eq(run("matrix --scheme bf16 --json"), 0);
    one_json();
    HAS(out_buf, "\"compatible\": 18, \"structural\": 31, \"nyi\": 0}");
    int lines = 0;
    ck_assert_int_eq(run("list rules"), 0);
    for (char *p = out_buf; *p; p++) lines += *p == '\n';
    ck_assert_int_eq(lines, 15);
    ck_assert_int_eq(run("list pf --json"), 0);
    one_json();
    HAS(out_buf, "{\"name\": \"deepep_ll\"");
    ck_assert_int_eq(run("list experts"), 0);
    HAS(out_buf, "batched_masked");
    HAS(out_buf, "weight-and-reduce delegate");
    ck_assert_int_eq(run("list schemes"), 0);
    HAS(out_buf, "nvfp4");
    ck_assert_int_eq(run("list activations"), 0);
    HAS(out_buf, "swigluoai");
    ck_assert_int_eq(run("explain topk-limit"), 0);
    HAS(out_buf, "topk-limit (structurally invalid)");
    ck_assert_int_eq(run("explain expert-map-unsupported --json"), 0);
    one_json();
    HAS(out_buf, "\"kind\": \"nyi\"");
    ck_assert_int_eq(run("check --help"), 0);
    HAS(out_buf, "moe-compat check --pf NAME");
}
END_TEST

/* Usage errors: exit 2, nothing on out, a message naming the argument. */
static const struct { const char *args, *needle; } usage[] = {
    {"", "missing subcommand"},
    {"trtlm", "unknown subcommand 'trtlm' (did you mean 'trtllm'?); available: list check matrix explain trtllm "
              "hybrid-ep-buffers ck-sorting-sizes"},
    {"list", "list: missing what to list"},
    {"list pff", "list: unknown list 'pff' (did you mean 'pf'?)"},
    {"list pf --scheme bf16", "unknown option '--scheme'"},
    {"explain", "explain: missing RULE_ID"},
    {"explain matching", "explain: unknown rule 'matching' (did you mean 'matching-quant'?)"},
    {"check --pf noep --experts ref", "check: needs --pf, --experts and --scheme"},
    {"check --pf noep --experts triton --scheme bf16", "--experts 'triton': unknown name (did you mean 'triton_like'?)"},
    {"check --pf deepep --experts ref --scheme bf16", "did you mean 'deepep_ht'"},
    {"check --pf noep --experts ref --scheme fp8", "--scheme 'fp8': unknown name"},
    {"check --pf noep --experts ref --scheme bf16 --world 3", "world_size 3: must be 1, 2, 4 or 8"},
    {"check --pf noep --experts ref --scheme bf16 --world 16", "--world 16: out of range 1..8"},
    {"check --pf noep --experts ref --scheme bf16 --topk 0", "--topk 0: out of range"},
    {"matrix --format yaml", "--format 'yaml': unknown name"},
    {"ck-sorting-size", "did you mean 'ck-sorting-sizes'"},
    {CK " --blok 4", "unknown option '--blok' (did you mean '--block'?)"},
    {TRT " --tokens 8 --tokns 3", "unknown option '--tokns' (did you mean '--tokens'?)"},
    {TRT " --tokens 8 --jsn", "did you mean '--json'"},
    {TRT " --tokens 8 --act-dtype bf61", "--act-dtype 'bf61': unknown name (did you mean 'bf16'?)"},
    {TRT " --tokens 8 --weight-dtype mxfp5", "did you mean 'mxfp4'"},
    {TRT " --tokens 8 --activation swiglo", "--activation 'swiglo': unknown name (did you mean 'swiglu'?)"},
    {TRT " --tokens 8 --revision nweest", "did you mean 'newest'"},
    {TRT, "trtllm: missing --tokens"},
    {CK " --topk", "--topk: needs a value"},
    {"ck-sorting-sizes --tokens 5 --topk 3 --experts 6", "missing --block"},
    {HEP, "missing --nodes"},
    {TRT " --tokens 8 --sm 74", "--sm 74: out of range 75..121"},
    {TRT " --tokens 8 --sm 122", "--sm 122: out of range 75..121"},
    {TRT " --tokens -1", "--tokens -1: out of range 0..2147483647"},
    {TRT " --tokens 8 --topk 0", "--topk 0: out of range 1..256"},
    {TRT " --tokens 99999999999999999999", "out of range"},
    {TRT " --tokens 8 --hidden 4k", "--hidden '4k': not an integer"},
    {TRT " --tokens 8 --tma-ws --no-tma-ws", "exclude each other"},
    {TRT " --tokens 8 --ootb --runner", "exclude each other"},
    {HEP " --nodes 0", "--nodes 0: out of range 1..1024"},
    {"ck-sorting-sizes --tokens 5 --topk 3 --experts 6 --block 0", "--block 0: out of range"},
    {"ck-sorting-sizes --tokens 5 --topk 7 --experts 6 --block 4", "topk 7: must be in 1..num_experts (6)"},
};

START_TEST(usage_errors)
{
    ck_assert_int_eq(run(usage[_i].args), 2);
    HAS(err_buf, usage[_i].needle);
    HAS(err_buf, "moe-compat --help");
    ck_assert_str_eq(out_buf, "");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli_compat");
    TCase *tc = tcase_create("moe-compat");
    tcase_add_test(tc, trtllm_text_json);
    tcase_add_loop_test(tc, trtllm_unsupported, 0, (int)(sizeof unsupported / sizeof unsupported[0]));
    tcase_add_test(tc, hybrid_ep_seed002);
    tcase_add_test(tc, ck_sizes_b6);
    tcase_add_test(tc, help);
    tcase_add_test(tc, registry_check);
    tcase_add_test(tc, registry_matrix_list_explain);
    tcase_add_loop_test(tc, usage_errors, 0, (int)(sizeof usage / sizeof usage[0]));
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
