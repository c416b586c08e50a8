/* moe-compat list | check | matrix | explain: answers from the capability
 * registry and the rule table (include/moe/compat.h). */
#include <string.h>
#include "cli_opts.h"
#include "moe/act.h"
#include "moe/compat.h"

static const char *pf_at(int i) { return moe_pf_get(i)->name; }
static int pf_n(void) { return moe_pf_count(); }
static const char *ex_at(int i) { return moe_experts_get(i)->name; }
static int ex_n(void) { return moe_experts_count(); }
static const char *scheme_at(int i) { return moe_scheme_name((moe_scheme)i); }
static int scheme_n(void) { return MOE_SCHEME_COUNT; }
static const char *act_at(int i) { return moe_act_name((moe_act)i); }
static int act_n(void) { return MOE_ACT_COUNT; }
static const char *rule_at(int i) { return moe_compat_rule_get(i)->id; }

static const char *const formats[] = {"text", "markdown", "csv", "json", NULL};
static const char *const lists[] = {"pf", "experts", "schemes", "activations", "rules", NULL};

enum { Q_PF, Q_EX, Q_SCHEME, Q_ACT, Q_TOPK, Q_E, Q_WORLD, Q_CHUNK, Q_XMAP, Q_WOI, Q_HIDDEN, Q_TOKENS, Q_INVALID,
       Q_FORMAT, Q_N };
static const opt_spec query_opts[Q_N] = {
    [Q_PF] = {"--pf", O_NAMES, 0, 0, 0, NULL, pf_at, pf_n},
    [Q_EX] = {"--experts", O_NAMES, 0, 0, 0, NULL, ex_at, ex_n},
    [Q_SCHEME] = {"--scheme", O_NAMES, 0, 0, 0, NULL, scheme_at, scheme_n},
    [Q_ACT] = {"--act", O_NAMES, 0, 0, 0, NULL, act_at, act_n},
    [Q_TOPK] = {"--topk", O_INT, 1, 64, 0, NULL, NULL, NULL},
    [Q_E] = {"--num-experts", O_INT, 1, 4096, 0, NULL, NULL, NULL},
    [Q_WORLD] = {"--world", O_INT, 1, 8, 0, NULL, NULL, NULL},
    [Q_CHUNK] = {"--chunk", O_INT, 0, 1 << 30, 0, NULL, NULL, NULL},
    [Q_XMAP] = {"--expert-map", O_FLAG, 0, 0, 0, NULL, NULL, NULL},
    [Q_WOI] = {"--weight-on-input", O_FLAG, 0, 0, 0, NULL, NULL, NULL},
    [Q_HIDDEN] = {"--hidden", O_INT, 1, 1 << 20, 0, NULL, NULL, NULL},
    [Q_TOKENS] = {"--tokens", O_INT, 0, 1 << 30, 0, NULL, NULL, NULL},
    [Q_INVALID] = {"--invalid-ids", O_FLAG, 0, 0, 0, NULL, NULL, NULL},
    [Q_FORMAT] = {"--format", O_CHOICE, 0, 0, 0, formats, NULL, NULL},
};

/* The query the options describe (defaults from moe_compat_query_default). */
static moe_compat_query query_of(const opt_val *v)
{
    moe_compat_query q = moe_compat_query_default();
    if (v[Q_SCHEME].set) q.scheme = (moe_scheme)v[Q_SCHEME].v;
    if (v[Q_TOPK].set) q.topk = (int)v[Q_TOPK].v;
    if (v[Q_E].set) q.num_experts = (int)v[Q_E].v;
    if (v[Q_WORLD].set) q.world_size = (int)v[Q_WORLD].v;
    if (v[Q_CHUNK].set) q.chunk_size = (int)v[Q_CHUNK].v;
    if (v[Q_HIDDEN].set) q.hidden = (int)v[Q_HIDDEN].v;
    if (v[Q_TOKENS].set) q.tokens = (int)v[Q_TOKENS].v;
    q.expert_map = v[Q_XMAP].set, q.weight_on_input = v[Q_WOI].set, q.invalid_ids = v[Q_INVALID].set;
    return q;
}

static void verdict_json(FILE *out, const moe_pf_info *p, const moe_experts_info *e, const moe_compat_query *q,
                         const moe_compat_verdict *v)
{
    fprintf(out, "{\"pf\": \"%s\", \"experts\": \"%s\", \"scheme\": \"%s\", \"topk\": %d, \"num_experts\": %d, "
                 "\"world\": %d, \"compatible\": %s, \"structural\": %d, \"nyi\": %d, \"rules\": [",
            p->name, e->name, moe_scheme_name(q->scheme), q->topk, q->num_experts, q->world_size,
            v->compatible ? "true" : "false", v->structural, v->nyi);
    for (int i = 0; i < v->nfail; i++) {
        fprintf(out, "%s{\"id\": \"%s\", \"kind\": \"%s\", \"reason\": ", i ? ", " : "", v->fail[i]->id,
                v->fail[i]->kind == MOE_RULE_NYI ? "nyi" : "structural");
        cli_json_str(out, v->fail[i]->reason);
        fprintf(out, ", \"detail\": ");
        cli_json_str(out, v->detail[i]);
        fprintf(out, ", \"anchor\": ");
        cli_json_str(out, v->fail[i]->anchor);
        fprintf(out, "}");
    }
    fprintf(out, "]}");
}

static int cmd_check(const opt_val *v, int json, FILE *out, FILE *err)
{
    if (!v[Q_PF].set || !v[Q_EX].set || !v[Q_SCHEME].set)
        return cli_usage_error(err, "check: needs --pf, --experts and --scheme");
    const moe_pf_info *p = moe_pf_get((int)v[Q_PF].v);
    const moe_experts_info *e = moe_experts_get((int)v[Q_EX].v);
    moe_compat_query q = query_of(v);
    moe_compat_verdict vd;
    if (moe_compat_check(p, e, &q, &vd) != MOE_OK) return cli_usage_error(err, "check: %s", moe_last_error());
    if (json) {
        verdict_json(out, p, e, &q, &vd);
        fprintf(out, "\n");
        return vd.compatible ? 0 : 1;
    }
    fprintf(out, "%s x %s, scheme %s, topk %d, E %d, world %d%s: %s", p->name, e->name, moe_scheme_name(q.scheme),
            q.topk, q.num_experts, q.world_size, v[Q_ACT].set ? "" : "", vd.compatible ? "compatible" : "INCOMPATIBLE");
    if (!vd.compatible) fprintf(out, " (%d structural, %d not yet supported)", vd.structural, vd.nyi);
    fprintf(out, "\n");
    for (int i = 0; i < vd.nfail; i++)
        fprintf(out, "  %-28s %-10s %s: %s [%s]\n", vd.fail[i]->id,
                vd.fail[i]->kind == MOE_RULE_NYI ? "nyi" : "structural", vd.fail[i]->reason, vd.detail[i],
                vd.fail[i]->anchor);
    return vd.compatible ? 0 : 1;
}

static int cmd_matrix(const opt_val *v, int json, FILE *out, FILE *err)
{
    int fmt = v[Q_FORMAT].set ? (int)v[Q_FORMAT].v : (json ? 3 : 0);
    int s0 = v[Q_SCHEME].set ? (int)v[Q_SCHEME].v : 0, s1 = v[Q_SCHEME].set ? s0 + 1 : MOE_SCHEME_COUNT;
    int ok = 0, st = 0, nyi = 0, first = 1;
    if (fmt == 2) fprintf(out, "pf,experts,scheme,verdict,rules\n");
    if (fmt == 3) fprintf(out, "{\"cells\": [");
    for (int s = s0; s < s1; s++) {
        moe_compat_query q = query_of(v);
        q.scheme = (moe_scheme)s;
        if (fmt == 0) fprintf(out, "scheme %s\n%-14s", moe_scheme_name(q.scheme), "");
        if (fmt == 1) {
            fprintf(out, "\n**%s**\n\n| pf \\ experts |", moe_scheme_name(q.scheme));
            for (int j = 0; j < moe_experts_count(); j++) fprintf(out, " %s |", moe_experts_get(j)->name);
            fprintf(out, "\n|---|");
            for (int j = 0; j < moe_experts_count(); j++) fprintf(out, "---|");
            fprintf(out, "\n");
        }
        if (fmt == 0) {
            for (int j = 0; j < moe_experts_count(); j++) fprintf(out, " %-26s", moe_experts_get(j)->name);
            fprintf(out, "\n");
        }
        for (int i = 0; i < moe_pf_count(); i++) {
            const moe_pf_info *p = moe_pf_get(i);
            if (fmt == 0) fprintf(out, "%-14s", p->name);
            if (fmt == 1) fprintf(out, "| %s |", p->name);
            for (int j = 0; j < moe_experts_count(); j++) {
                const moe_experts_info *e = moe_experts_get(j);
                moe_compat_verdict vd;
                if (moe_compat_check(p, e, &q, &vd) != MOE_OK)
                    return cli_usage_error(err, "matrix: %s", moe_last_error());
                ok += vd.compatible, st += vd.structural > 0, nyi += !vd.compatible && vd.structural == 0;
                const char *cell = vd.compatible ? "ok" : vd.fail[0]->id;
                if (fmt == 0) fprintf(out, " %-26s", cell);
                if (fmt == 1) {
                    fprintf(out, " %s", vd.compatible ? "ok" : "");
                    for (int r = 0; r < vd.nfail; r++) fprintf(out, "%s%s", r ? ", " : "", vd.fail[r]->id);
                    fprintf(out, " |");
                }
                if (fmt == 2) {
                    fprintf(out, "%s,%s,%s,%s,", p->name, e->name, moe_scheme_name(q.scheme),
                            vd.compatible ? "compatible" : vd.structural ? "structural" : "nyi");
                    for (int r = 0; r < vd.nfail; r++) fprintf(out, "%s%s", r ? ";" : "", vd.fail[r]->id);
                    fprintf(out, "\n");
                }
                if (fmt == 3) {
                    fprintf(out, "%s", first ? "" : ", ");
                    verdict_json(out, p, e, &q, &vd);
                    first = 0;
                }
            }
            if (fmt <= 1) fprintf(out, "\n");
        }
    }
    if (fmt == 3) fprintf(out, "], \"compatible\": %d, \"structural\": %d, \"nyi\": %d}\n", ok, st, nyi);
    else fprintf(out, "%s%d compatible, %d structurally invalid, %d not yet supported\n", fmt == 2 ? "# " : "\n", ok,
                 st, nyi);
    return 0;
}

static int cmd_list(const char *what, int json, FILE *out)
{
    int n, kind = 0;
    while (strcmp(lists[kind], what)) kind++;
    n = kind == 0 ? moe_pf_count() : kind == 1 ? moe_experts_count() : kind == 2 ? MOE_SCHEME_COUNT
        : kind == 3 ? MOE_ACT_COUNT : moe_compat_rule_count();
    if (json) fprintf(out, "{\"%s\": [", what);
    for (int i = 0; i < n; i++) {
        char line[512];
        const char *name = kind == 0 ? pf_at(i) : kind == 1 ? ex_at(i) : kind == 2 ? scheme_at(i)
                           : kind == 3 ? act_at(i) : rule_at(i);
        if (kind == 0) {
            const moe_pf_info *p = moe_pf_get(i);
            snprintf(line, sizeof line, "format %s, ids int%d, %s, %s [%s]", moe_act_format_name(p->format),
                     p->topk_id_bits, p->expert_parallel ? "expert parallel" : "single rank",
                     p->async ? "async" : "sync", p->anchor);
        } else if (kind == 1) {
            const moe_experts_info *e = moe_experts_get(i);
            snprintf(line, sizeof line, "weight-and-reduce %s, determinism %s, expert map %s, chunking %s [%s]",
                     moe_war_name(e->war), moe_determinism_name(e->determinism), e->expert_map ? "yes" : "no",
                     e->chunking ? "yes" : "no", e->anchor);
        } else if (kind == 2) {
            snprintf(line, sizeof line, "%s", moe_scheme_get((moe_scheme)i)->upstream);
        } else if (kind == 3) {
            snprintf(line, sizeof line, "%s", moe_act_is_gated((moe_act)i) ? "gated" : "not gated");
        } else {
            const moe_compat_rule *r = moe_compat_rule_get(i);
            snprintf(line, sizeof line, "%s: %s [%s]", r->kind == MOE_RULE_NYI ? "nyi" : "structural", r->reason,
                     r->anchor);
        }
        if (json) {
            fprintf(out, "%s{\"name\": \"%s\", \"about\": ", i ? ", " : "", name);
            cli_json_str(out, line);
            fprintf(out, "}");
        } else {
            fprintf(out, "%-28s %s\n", name, line);
        }
    }
    if (json) fprintf(out, "]}\n");
    return 0;
}

static int cmd_explain(const char *id, int json, FILE *out, FILE *err)
{
    const moe_compat_rule *r = moe_compat_rule_find(id);
    if (!r) {
        const char *names[64];
        int n = moe_compat_rule_count();
        for (int i = 0; i < n && i < 64; i++) names[i] = rule_at(i);
        return cli_usage_error(err, "explain: unknown rule '%s' (did you mean '%s'?)", id,
                               cli_closest(id, names, (size_t)(n < 64 ? n : 64)));
    }
    const char *kind = r->kind == MOE_RULE_NYI ? "nyi" : "structural";
    if (json) {
        fprintf(out, "{\"id\": \"%s\", \"kind\": \"%s\", \"reason\": ", r->id, kind);
        cli_json_str(out, r->reason);
        fprintf(out, ", \"anchor\": ");
        cli_json_str(out, r->anchor);
        fprintf(out, "}\n");
    } else {
        fprintf(out, "%s (%s)\n  %s\n  anchor: %s\n", r->id,
                r->kind == MOE_RULE_NYI ? "not yet supported upstream" : "structurally invalid", r->reason,
                r->anchor);
    }
    return 0;
}

int moe_cli_compat_registry(int argc, char **argv, FILE *out, FILE *err, void (*help)(FILE *))
{
    const char *cmd = argv[1];
    int is_list = strcmp(cmd, "list") == 0, is_explain = strcmp(cmd, "explain") == 0;
    if (!is_list && !is_explain && strcmp(cmd, "check") && strcmp(cmd, "matrix")) return -1;
    int json = 0, want_help = 0, shift = 0;
    opt_val v[Q_N];
    if (is_list || is_explain) { /* one positional argument first */
        if (argc < 3 || argv[2][0] == '-') {
            if (argc >= 3 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) return help(out), 0;
            return cli_usage_error(err, "%s: missing %s", cmd,
                                   is_list ? "what to list (pf, experts, schemes, activations, rules)" : "RULE_ID");
        }
        shift = 1;
    }
    /* only --json (list, explain) or the query options (check, matrix) */
    size_t nopt = (is_list || is_explain) ? 0 : Q_N;
    int rc = cli_parse_opts(argc - shift, argv + shift, query_opts, nopt, v, &json, &want_help, err);
    if (want_help) return help(out), 0;
    if (rc) return rc;
    if (is_list) {
        for (int i = 0; lists[i]; i++)
            if (strcmp(lists[i], argv[2]) == 0) return cmd_list(argv[2], json, out);
        return cli_usage_error(err, "list: unknown list '%s' (did you mean '%s'?)", argv[2],
                               cli_closest(argv[2], lists, 5));
    }
    if (is_explain) return cmd_explain(argv[2], json, out, err);
    if (strcmp(cmd, "check") == 0) return cmd_check(v, json, out, err);
    return cmd_matrix(v, json, out, err);
}
