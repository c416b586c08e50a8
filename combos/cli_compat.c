/* moe-compat: answers "which path does this configuration take, and what
 * does it cost" from the rule data (DESIGN 7). This file holds the
 * subcommands that need no capability registry: the TensorRT-LLM path plan
 * (seed 001), the Hybrid-EP buffer sizes (seed 002 4.2) and the CK sorting
 * buffer sizes (anchors dispatch_sorting.md B.2, B.4). */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "cli_opts.h"
#include "moe/cli.h"
#include "moe/dispatch.h"
#include "moe/plan_trtllm.h"
#include "moe/sort_ck.h"

static const char *const subcommands[] = {"trtllm", "hybrid-ep-buffers", "ck-sorting-sizes", "list", "check",
                                         "matrix", "explain"};
#define NSUB (sizeof subcommands / sizeof subcommands[0])

/* ------------------------------------------------------------------ */
/* trtllm */

static const char *const revisions[] = {"newest", "old", NULL};
enum { T_SM, T_ACT, T_W, T_OUT, T_ACTIVATION, T_TOPK, T_TOKENS, T_EXPERTS, T_HIDDEN, T_INTER,
       T_DET, T_NOFIN, T_LORA, T_AWQ, T_TMA, T_NOTMA, T_PLUGIN, T_OOTB, T_RUNNER, T_REV, T_EP,
       T_A2A, T_SMEM, T_N };
static const opt_spec trtllm_opts[T_N] = {
    [T_SM] = {"--sm", O_INT, MOE_TRTLLM_SM_MIN, MOE_TRTLLM_SM_MAX, 1, NULL},
    [T_ACT] = {"--act-dtype", O_DTYPE, 0, 0, 1, NULL},
    [T_W] = {"--weight-dtype", O_DTYPE, 0, 0, 1, NULL},
    [T_OUT] = {"--out-dtype", O_DTYPE, 0, 0, 0, NULL},
    [T_ACTIVATION] = {"--activation", O_ACT, 0, 0, 1, NULL},
    [T_TOPK] = {"--topk", O_INT, 1, MOE_TRTLLM_TOPK_MAX, 1, NULL},
    [T_TOKENS] = {"--tokens", O_INT, 0, INT32_MAX, 1, NULL},
    [T_EXPERTS] = {"--experts-per-node", O_INT, 1, MOE_TRTLLM_EXPERTS_MAX, 1, NULL},
    [T_HIDDEN] = {"--hidden", O_INT, 1, MOE_TRTLLM_DIM_MAX, 1, NULL},
    [T_INTER] = {"--inter", O_INT, 1, MOE_TRTLLM_DIM_MAX, 1, NULL},
    [T_DET] = {"--deterministic", O_FLAG, 0, 0, 0, NULL},
    [T_NOFIN] = {"--disable-finalize-fusion", O_FLAG, 0, 0, 0, NULL},
    [T_LORA] = {"--lora", O_FLAG, 0, 0, 0, NULL},
    [T_AWQ] = {"--awq", O_FLAG, 0, 0, 0, NULL},
    [T_TMA] = {"--tma-ws", O_FLAG, 0, 0, 0, NULL},
    [T_NOTMA] = {"--no-tma-ws", O_FLAG, 0, 0, 0, NULL},
    [T_PLUGIN] = {"--plugin", O_FLAG, 0, 0, 0, NULL},
    [T_OOTB] = {"--ootb", O_FLAG, 0, 0, 0, NULL},
    [T_RUNNER] = {"--runner", O_FLAG, 0, 0, 0, NULL},
    [T_REV] = {"--revision", O_CHOICE, 0, 0, 0, revisions},
    [T_EP] = {"--ep-size", O_INT, 1, MOE_TRTLLM_EP_MAX, 0, NULL},
    [T_A2A] = {"--alltoall", O_FLAG, 0, 0, 0, NULL},
    [T_SMEM] = {"--radix-smem-exceeds", O_FLAG, 0, 0, 0, NULL},
};

static void print_names(FILE *out, const opt_spec *o)
{
    for (size_t i = 0; i < cli_choice_count(o); i++) fprintf(out, " %s", cli_choice_name(o, i));
}

static void help(FILE *out)
{
    fprintf(out,
            "usage: moe-compat list pf|experts|schemes|activations|rules [--json]\n"
            "       moe-compat check --pf NAME --experts NAME --scheme NAME [--act NAME] [--topk K]\n"
            "           [--num-experts E] [--world R] [--chunk N] [--expert-map] [--weight-on-input]\n"
            "           [--hidden H] [--tokens M] [--invalid-ids] [--json]\n"
            "       moe-compat matrix [--scheme NAME] [--topk K] [--num-experts E] [--world R]\n"
            "           [--format text|markdown|csv|json]\n"
            "       moe-compat explain RULE_ID [--json]\n"
            "       moe-compat trtllm --sm N --act-dtype T --weight-dtype T [--out-dtype T]\n"
            "           --activation NAME --topk K --tokens T --experts-per-node E --hidden H\n"
            "           --inter I [--deterministic] [--disable-finalize-fusion] [--lora] [--awq]\n"
            "           [--tma-ws|--no-tma-ws] [--plugin|--ootb|--runner] [--revision newest|old]\n"
            "           [--ep-size N] [--alltoall] [--radix-smem-exceeds] [--json]\n"
            "       moe-compat hybrid-ep-buffers --hidden H --max-tokens-per-rank N\n"
            "           --ranks-per-node R --nodes K --experts-per-rank X [--fp8] [--json]\n"
            "       moe-compat ck-sorting-sizes --tokens T --topk K --experts E --block B [--json]\n"
            "       moe-compat [SUBCOMMAND] --help\n"
            "check: the verdict for a prepare/finalize x experts pair and every rule that fails it\n"
            "  (exit 0 compatible, 1 incompatible); matrix: every pair (x scheme) with its verdict;\n"
            "  rules are structural or nyi (a legitimate pair upstream does not run yet).\n"
            "trtllm: every TensorRT-LLM MoE path decision (seed 001; anchors trtllm_moe.md 4.4,\n"
            "  5.4, 6) with the values that decided it, or the first violated limit.\n"
            "  dtypes:");
    print_names(out, &trtllm_opts[T_ACT]);
    fprintf(out, " (aliases: e4m3 = fp8, nvfp4 = fp4)\n  activations:");
    print_names(out, &trtllm_opts[T_ACTIVATION]);
    fprintf(out,
            "\n  --sm %d..%d; --out-dtype defaults to the act dtype (bf16 for fp8/fp4).\n"
            "  --plugin (default): the TRT MixtureOfExperts plugin; --ootb: MoeOOTB;\n"
            "  --runner: CutlassMoeFCRunner as the PyTorch op drives it (no plugin limits).\n"
            "  --revision newest ([K], agrees with seed 001) or old ([OLD] @ ac73e311: W4 groupwise\n"
            "  gates, no FC2 prequant fusion). --tma-ws / --no-tma-ws: the profiled tactic family.\n"
            "hybrid-ep-buffers: Hybrid-EP per-rank buffers (seed 002 4.2); bf16 tokens, or fp8 with\n"
            "  per-128 scales.\n"
            "ck-sorting-sizes: CK moe-sorting buffer sizes under both max_num_tokens_padded formulas\n"
            "  and the padding sentinels (dispatch_sorting.md B.2, B.4).\n"
            "Exit: 0 ok, 1 configuration not supported (the violated limit is named), 2 usage error.\n",
            MOE_TRTLLM_SM_MIN, MOE_TRTLLM_SM_MAX);
}

static int cmd_trtllm(const opt_val *v, int json, FILE *out, FILE *err)
{
    if (v[T_TMA].set && v[T_NOTMA].set)
        return cli_usage_error(err, "trtllm: --tma-ws and --no-tma-ws exclude each other");
    if (v[T_PLUGIN].set + v[T_OOTB].set + v[T_RUNNER].set > 1)
        return cli_usage_error(err, "trtllm: --plugin, --ootb and --runner exclude each other");
    moe_trtllm_config c;
    moe_trtllm_config_default(&c);
    c.sm = (int)v[T_SM].v;
    c.act_dtype = (moe_trtllm_dtype)v[T_ACT].v;
    c.weight_dtype = (moe_trtllm_dtype)v[T_W].v;
    int quant_act = c.act_dtype == MOE_TRTLLM_FP8 || c.act_dtype == MOE_TRTLLM_FP4;
    c.out_dtype = v[T_OUT].set ? (moe_trtllm_dtype)v[T_OUT].v : quant_act ? MOE_TRTLLM_BF16 : c.act_dtype;
    c.activation = (moe_trtllm_activation)v[T_ACTIVATION].v;
    c.topk = (int)v[T_TOPK].v;
    c.tokens = v[T_TOKENS].v;
    c.experts_per_node = (int)v[T_EXPERTS].v;
    c.hidden = v[T_HIDDEN].v;
    c.inter = v[T_INTER].v;
    c.deterministic = v[T_DET].set;
    c.disable_finalize_fusion = v[T_NOFIN].set;
    c.lora = v[T_LORA].set;
    c.awq = v[T_AWQ].set;
    c.tma_ws = v[T_TMA].set ? MOE_TRTLLM_TMA_FORCE_ON : v[T_NOTMA].set ? MOE_TRTLLM_TMA_FORCE_OFF
                                                                     : MOE_TRTLLM_TMA_AUTO;
    c.frontend = v[T_OOTB].set ? MOE_TRTLLM_OOTB : v[T_RUNNER].set ? MOE_TRTLLM_RUNNER : MOE_TRTLLM_PLUGIN;
    c.revision = (moe_trtllm_revision)v[T_REV].v;
    c.ep_size = v[T_EP].set ? (int)v[T_EP].v : 1;
    c.enable_alltoall = v[T_A2A].set;
    c.radix_smem_exceeds = v[T_SMEM].set;

    moe_trtllm_plan p;
    moe_status s = moe_trtllm_plan_compute(&c, &p);
    if (s == MOE_ERR_INVALID_ARG || s == MOE_ERR_NULL)
        return cli_usage_error(err, "trtllm: %s", moe_last_error());
    static const char *const fe[] = {"plugin", "ootb", "runner"};
    if (json) {
        fprintf(out, "{\"command\": \"trtllm\", \"config\": {\"sm\": %d, \"act_dtype\": \"%s\", "
                "\"weight_dtype\": \"%s\", \"out_dtype\": \"%s\", \"activation\": \"%s\", "
                "\"topk\": %d, \"tokens\": %lld, \"experts_per_node\": %d, \"hidden\": %lld, "
                "\"inter\": %lld, \"frontend\": \"%s\", \"revision\": \"%s\"}, ",
                c.sm, moe_trtllm_dtype_name(c.act_dtype), moe_trtllm_dtype_name(c.weight_dtype),
                moe_trtllm_dtype_name(c.out_dtype), moe_trtllm_activation_name(c.activation),
                c.topk, (long long)c.tokens, c.experts_per_node, (long long)c.hidden,
                (long long)c.inter, fe[c.frontend], revisions[c.revision]);
        if (s != MOE_OK) {
            fprintf(out, "\"ok\": false, \"status\": \"%s\", \"limit\": ", moe_status_str(s));
            cli_json_str(out, p.limit);
            fprintf(out, ", \"anchor\": ");
            cli_json_str(out, p.limit_anchor);
            fprintf(out, ", \"error\": ");
            cli_json_str(out, moe_last_error());
            fprintf(out, "}\n");
            return 1;
        }
        fprintf(out, "\"ok\": true, \"decisions\": [");
        for (int i = 0; i < MOE_TRTLLM_D_COUNT; i++) {
            fprintf(out, "%s{\"id\": \"%s\", \"path\": \"%s\", \"condition\": ", i ? ", " : "",
                    p.d[i].id, p.d[i].path);
            cli_json_str(out, p.d[i].condition);
            fprintf(out, ", \"anchor\": ");
            cli_json_str(out, p.d[i].anchor);
            fprintf(out, "}");
        }
        fprintf(out, "]}\n");
        return 0;
    }
    if (s != MOE_OK) {
        fprintf(out, "%s: %s\n", moe_status_str(s), moe_last_error());
        return 1;
    }
    for (int i = 0; i < MOE_TRTLLM_D_COUNT; i++)
        fprintf(out, "%-15s %-34s %s [%s]\n", p.d[i].id, p.d[i].path, p.d[i].condition,
                p.d[i].anchor);
    return 0;
}

/* ------------------------------------------------------------------ */
/* hybrid-ep-buffers */

enum { H_HIDDEN, H_TMAX, H_RPN, H_NODES, H_EPR, H_FP8, H_N };
static const opt_spec hep_opts[H_N] = {
    [H_HIDDEN] = {"--hidden", O_INT, 1, MOE_TRTLLM_DIM_MAX, 1, NULL},
    [H_TMAX] = {"--max-tokens-per-rank", O_INT, 1, 1 << 24, 1, NULL},
    [H_RPN] = {"--ranks-per-node", O_INT, 1, 1024, 1, NULL},
    [H_NODES] = {"--nodes", O_INT, 1, 1024, 1, NULL},
    [H_EPR] = {"--experts-per-rank", O_INT, 1, MOE_TRTLLM_EXPERTS_MAX, 1, NULL},
    [H_FP8] = {"--fp8", O_FLAG, 0, 0, 0, NULL},
};

static void human(uint64_t b, char *buf, size_t n)
{
    if (b >= (1ull << 30)) snprintf(buf, n, "%.2f GiB", (double)b / (double)(1ull << 30));
    else if (b >= (1ull << 20)) snprintf(buf, n, "%.2f MiB", (double)b / (double)(1ull << 20));
    else snprintf(buf, n, "%.2f KiB", (double)b / 1024.0);
}

static int cmd_hep(const opt_val *v, int json, FILE *out, FILE *err)
{
    long long H = v[H_HIDDEN].v, Tm = v[H_TMAX].v, R = v[H_RPN].v, K = v[H_NODES].v,
              X = v[H_EPR].v;
    int fp8 = v[H_FP8].set, b = fp8 ? 1 : 2;
    moe_hep_buffers r;
    if (moe_hep_buffer_sizes(H, Tm, (int)X, (int)R, (int)K, b, fp8, &r) != MOE_OK)
        return cli_usage_error(err, "hybrid-ep-buffers: %s", moe_last_error());
    char f[6][96];
    snprintf(f[0], sizeof f[0], "%lld * %lld * %lld", Tm, R, K);
    snprintf(f[1], sizeof f[1], "%llu * %lld * %d", (unsigned long long)r.max_tokens, H, b);
    snprintf(f[2], sizeof f[2], "%llu * (%lld * %lld) * 4", (unsigned long long)r.max_tokens, X, R);
    if (fp8) snprintf(f[3], sizeof f[3], "%llu * (%lld / 128) * 4", (unsigned long long)r.max_tokens, H);
    else snprintf(f[3], sizeof f[3], "0 (fp8 only)");
    if (K > 1) {
        snprintf(f[4], sizeof f[4], "%lld * %lld * %lld * %d", Tm, K - 1, H, b);
        snprintf(f[5], sizeof f[5], "%lld * %lld * (%lld * %lld) * 4", Tm, K - 1, X, R);
    } else {
        snprintf(f[4], sizeof f[4], "0 (one node)");
        snprintf(f[5], sizeof f[5], "0 (one node)");
    }
    static const char *const name[] = {"max_tokens", "token_buffer", "prob_buffer",
                                       "scaling_factor_buffer", "rdma_token_buffer",
                                       "rdma_prob_buffer"};
    static const char *const formula[] = {
        "max_tokens_per_rank * ranks_per_node * nodes", "max_tokens * hidden * dtype_bytes",
        "max_tokens * (experts_per_rank * ranks_per_node) * 4", "max_tokens * (hidden / 128) * 4",
        "max_tokens_per_rank * (nodes - 1) * hidden * dtype_bytes",
        "max_tokens_per_rank * (nodes - 1) * (experts_per_rank * ranks_per_node) * 4"};
    uint64_t val[6] = {r.max_tokens, r.token_bytes, r.prob_bytes, r.scale_bytes,
                       r.rdma_token_bytes, r.rdma_prob_bytes};
    char hb[32];
    if (json) {
        fprintf(out, "{\"command\": \"hybrid-ep-buffers\", \"hidden\": %lld, "
                "\"max_tokens_per_rank\": %lld, \"ranks_per_node\": %lld, \"nodes\": %lld, "
                "\"experts_per_rank\": %lld, \"dtype\": \"%s\", \"buffers\": [",
                H, Tm, R, K, X, fp8 ? "fp8" : "bf16");
        for (int i = 0; i < 6; i++)
            fprintf(out, "%s{\"name\": \"%s\", \"formula\": \"%s\", \"values\": \"%s\", \"%s\": %llu}",
                    i ? ", " : "", name[i], formula[i], f[i], i ? "bytes" : "tokens",
                    (unsigned long long)val[i]);
        fprintf(out, "], \"total_bytes_per_rank\": %llu}\n", (unsigned long long)r.total_bytes);
        return 0;
    }
    fprintf(out, "Hybrid-EP buffers per rank (%s, seed 002 4.2)\n", fp8 ? "fp8 + scales" : "bf16");
    fprintf(out, "%-22s %-40s = %llu tokens\n", name[0], f[0], (unsigned long long)val[0]);
    for (int i = 1; i < 6; i++) {
        human(val[i], hb, sizeof hb);
        fprintf(out, "%-22s %-40s = %llu B (%s)   [%s]\n", name[i], f[i],
                (unsigned long long)val[i], hb, formula[i]);
    }
    human(r.total_bytes, hb, sizeof hb);
    fprintf(out, "%-22s %-40s = %llu B (%s)\n", "total per rank", "sum of the five buffers",
            (unsigned long long)r.total_bytes, hb);
    return 0;
}

/* ------------------------------------------------------------------ */
/* ck-sorting-sizes */

enum { C_TOKENS, C_TOPK, C_EXPERTS, C_BLOCK, C_N };
static const opt_spec ck_opts[C_N] = {
    [C_TOKENS] = {"--tokens", O_INT, 0, INT32_MAX, 1, NULL},
    [C_TOPK] = {"--topk", O_INT, 1, 1024, 1, NULL},
    [C_EXPERTS] = {"--experts", O_INT, 1, MOE_TRTLLM_EXPERTS_MAX, 1, NULL},
    [C_BLOCK] = {"--block", O_INT, 1, 65536, 1, NULL},
};

static int cmd_ck(const opt_val *v, int json, FILE *out, FILE *err)
{
    long long T = v[C_TOKENS].v, k = v[C_TOPK].v, E = v[C_EXPERTS].v, B = v[C_BLOCK].v;
    static const char *const fname[] = {"updated", "readme"};
    static const char *const ftext[] = {"topk*T + E*B - topk", "T*topk + E*(B-1)"};
    int64_t len[2], tiles[2];
    for (int f = 0; f < 2; f++)
        if (moe_sort_ck_capacity(T, (int)k, (int)E, (int)B, (moe_sort_ck_pad_formula)f, &len[f],
                                 &tiles[f]) != MOE_OK)
            return cli_usage_error(err, "ck-sorting-sizes: %s", moe_last_error());
    /* B.2: the mock-id sentinel packs T in bits 0..23 and topk in 24..31 */
    int mock_ok = T <= 0xFFFFFF && k <= 255;
    uint32_t mock = (uint32_t)T | ((uint32_t)k << 24);
    if (json) {
        fprintf(out, "{\"command\": \"ck-sorting-sizes\", \"tokens\": %lld, \"topk\": %lld, "
                "\"experts\": %lld, \"block\": %lld, \"formulas\": [", T, k, E, B);
        for (int f = 0; f < 2; f++)
            fprintf(out, "%s{\"name\": \"%s\", \"formula\": \"%s\", \"max_num_tokens_padded\": "
                    "%lld, \"sorted_expert_ids\": %lld, \"sorted_token_ids_bytes\": %lld, "
                    "\"sorted_weights_bytes\": %lld, \"sorted_expert_ids_bytes\": %lld}",
                    f ? ", " : "", fname[f], ftext[f], (long long)len[f], (long long)tiles[f],
                    (long long)len[f] * 4, (long long)len[f] * 4, (long long)tiles[f] * 4);
        fprintf(out, "], \"sentinel_plain\": %lld, \"sentinel_mock\": ", T);
        if (mock_ok) fprintf(out, "%u, \"sentinel_mock_hex\": \"0x%08x\"}\n", mock, mock);
        else fprintf(out, "null, \"sentinel_mock_hex\": null}\n");
        return 0;
    }
    fprintf(out, "CK moe-sorting sizes (dispatch_sorting.md B.4): T=%lld topk=%lld E=%lld block=%lld\n",
            T, k, E, B);
    for (int f = 0; f < 2; f++)
        fprintf(out, "%-8s %-20s max_num_tokens_padded = %lld (sorted_token_ids %lld B, "
                "sorted_weights %lld B), sorted_expert_ids = %lld (%lld B)\n", fname[f], ftext[f],
                (long long)len[f], (long long)len[f] * 4, (long long)len[f] * 4,
                (long long)tiles[f], (long long)tiles[f] * 4);
    fprintf(out, "sentinel plain  T = %lld\n", T);
    if (mock_ok) fprintf(out, "sentinel mock   T | (topk << 24) = %u (0x%08x)\n", mock, mock);
    else fprintf(out, "sentinel mock   n/a (needs T <= 16777215 and topk <= 255)\n");
    return 0;
}

/* ------------------------------------------------------------------ */

int moe_cli_compat_registry(int argc, char **argv, FILE *out, FILE *err, void (*help)(FILE *));

int moe_cli_compat(int argc, char **argv, FILE *out, FILE *err)
{
    if (argc < 2) return cli_usage_error(err, "missing subcommand (list, check, matrix, explain, trtllm, hybrid-ep-buffers or ck-sorting-sizes)");
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        help(out);
        return 0;
    }
    int rc0 = moe_cli_compat_registry(argc, argv, out, err, help);
    if (rc0 >= 0) return rc0;
    size_t i = 0;
    while (i < NSUB && strcmp(cmd, subcommands[i])) i++;
    if (i == NSUB)
        return cli_usage_error(err, "unknown subcommand '%s' (did you mean '%s'?); available: list check matrix explain "
                           "trtllm hybrid-ep-buffers ck-sorting-sizes", cmd,
                           cli_closest(cmd, subcommands, NSUB));
    static const struct {
        const opt_spec *spec;
        size_t n;
        int (*run)(const opt_val *, int, FILE *, FILE *);
    } table[3] = {{trtllm_opts, T_N, cmd_trtllm}, {hep_opts, H_N, cmd_hep}, {ck_opts, C_N, cmd_ck}};
    opt_val v[T_N];
    int json = 0, want_help = 0;
    int rc = cli_parse_opts(argc, argv, table[i].spec, table[i].n, v, &json, &want_help, err);
    if (want_help) {
        help(out);
        return 0;
    }
    if (rc) return rc;
    return table[i].run(v, json, out, err);
}
