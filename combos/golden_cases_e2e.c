/* Golden cases of the whole layer: moe_ref_forward for every scheme, its
 * variants (routing from logits, weights on the input, biases, static
 * activation scales, other activations, one expert-parallel rank's
 * partial), the layout edges (one token, all tokens to one expert, empty
 * experts, a rank without tokens) and two digest-only cases at a scaled
 * DeepSeek-V3 shape whose inputs are regenerated from the seed.
 *
 * On the reference the layer is moe_ref_forward itself. Another backend
 * runs it as the noep x ref modular kernel on its ops table (the oracle's
 * stages in the oracle's order: the tolerance table's e2e/exact class);
 * variants the modular kernel has no counterpart for are unsupported
 * there and reported as such. */
#include <string.h>
#include "golden_internal.h"
#include "moe/backends.h"
#include "moe/forward.h"
#include "moe/modular.h"
#include "moe/rng.h"

/* v[0] scheme, v[1] flags, v[2] ids pattern, v[3] activation variant */
enum {
    FW_ROUTE = 1,     /* route from router logits (DeepSeek-V3 grouped sigmoid, bias, scaling) */
    FW_WOI = 2,       /* weights on the input (k = 1) */
    FW_BIAS = 4,      /* b1, b2 */
    FW_EP = 8,        /* one rank's partial: experts [E/2, E) */
    FW_STATIC = 16    /* static a1 / a2 scales */
};
enum { ACTV_SILU = 0, ACTV_SWIGLUOAI, ACTV_GELU_TANH_UP_GATE, ACTV_RELU2 };

static moe_act_params fw_act(const moe_golden_case *c)
{
    switch (c->v[3]) {
    case ACTV_SWIGLUOAI: return moe_act_defaults(MOE_ACT_SWIGLUOAI, MOE_LAYOUT_INTERLEAVED);
    case ACTV_GELU_TANH_UP_GATE: return moe_act_defaults(MOE_ACT_GELU_TANH, MOE_LAYOUT_UP_GATE);
    case ACTV_RELU2: return moe_act_defaults(MOE_ACT_RELU2, MOE_LAYOUT_GATE_UP);
    default: return moe_act_defaults(MOE_ACT_SILU, MOE_LAYOUT_GATE_UP);
    }
}

static moe_route_params fw_route(const moe_golden_case *c)
{
    moe_route_params p;
    memset(&p, 0, sizeof p);
    p.method = MOE_ROUTE_GROUPED_TOPK, p.topk = (int)c->dims.k, p.renormalize = 1, p.score = MOE_SCORE_SIGMOID;
    p.num_expert_group = 2, p.topk_group = 1, p.routed_scaling_factor = 2.5f;
    return p;
}

static moe_dtype fw_xdtype(moe_scheme sc)
{
    moe_quant_spec as;
    moe_scheme_spec(sc, MOE_OPERAND_ACT, &as);
    return as.gran == MOE_GRAN_NONE ? as.elem : MOE_BF16;
}

static moe_status fw_make(const moe_golden_case *c, moe_golden_set *in)
{
    moe_scheme sc = (moe_scheme)c->v[0];
    int fl = c->v[1];
    int64_t M = c->dims.M, E = c->dims.E, k = c->dims.k, H = c->dims.H, I = c->dims.I;
    int64_t n1 = moe_act_is_gated(fw_act(c).act) ? 2 * I : I;
    moe_quant_spec ws;
    moe_status st = moe_scheme_spec(sc, MOE_OPERAND_WEIGHT, &ws);
    moe_tensor *x = gk_new(in, &st, "x", fw_xdtype(sc), 2, GK_SH(M, H));
    if (st == MOE_OK) st = gk_normal(c, x, "x", 1.0f);
    if (fl & FW_ROUTE) {
        moe_tensor *lg = gk_new(in, &st, "router_logits", MOE_F32, 2, GK_SH(M, E));
        moe_tensor *b = gk_new(in, &st, "correction_bias", MOE_F32, 1, GK_SH(E));
        if (st == MOE_OK) st = gk_normal(c, lg, "router_logits", 2.0f);
        if (st == MOE_OK) st = gk_normal(c, b, "correction_bias", 0.5f);
    } else {
        moe_tensor *ids = gk_new(in, &st, "topk_ids", MOE_I32, 2, GK_SH(M, k));
        moe_tensor *w = gk_new(in, &st, "topk_weights", MOE_F32, 2, GK_SH(M, k));
        if (st == MOE_OK) st = gk_ids_pattern(c, ids, c->v[2]);
        if (st == MOE_OK) st = gk_uniform(c, w, "topk_weights", 0.05f, 1.05f);
    }
    /* the weights in the scheme's elements, quantized by the reference */
    moe_tensor f1, f2;
    memset(&f1, 0, sizeof f1), memset(&f2, 0, sizeof f2);
    if (st == MOE_OK) st = moe_tensor_alloc(&f1, MOE_F32, 3, GK_SH(E, n1, H));
    if (st == MOE_OK) st = moe_tensor_alloc(&f2, MOE_F32, 3, GK_SH(E, H, I));
    /* uniform weights (sd 0.058): a Philox draw each, 7x cheaper than a normal,
     * which matters for the digest-only shapes regenerated on every verify */
    if (st == MOE_OK) st = gk_uniform(c, &f1, "w1", -0.1f, 0.1f);
    if (st == MOE_OK) st = gk_uniform(c, &f2, "w2", -0.1f, 0.1f);
    if (st == MOE_OK) st = gk_quantize_into(in, &ws, &f1, "w1");
    if (st == MOE_OK) st = gk_quantize_into(in, &ws, &f2, "w2");
    moe_tensor_free(&f1), moe_tensor_free(&f2);
    if (fl & FW_BIAS) {
        moe_tensor *b1 = gk_new(in, &st, "b1", MOE_F32, 2, GK_SH(E, n1));
        moe_tensor *b2 = gk_new(in, &st, "b2", MOE_F32, 2, GK_SH(E, H));
        if (st == MOE_OK) st = gk_normal(c, b1, "b1", 0.1f);
        if (st == MOE_OK) st = gk_normal(c, b2, "b2", 0.1f);
    }
    if (fl & FW_STATIC) { /* per-tensor: x / s stays well inside e4m3 */
        moe_tensor *a1 = gk_new(in, &st, "a1_scale", MOE_F32, 2, GK_SH(1, 1));
        moe_tensor *a2 = gk_new(in, &st, "a2_scale", MOE_F32, 2, GK_SH(1, 1));
        if (st == MOE_OK) ((float *)a1->data)[0] = 1.0f / 64.0f, ((float *)a2->data)[0] = 1.0f / 256.0f;
    }
    return st;
}

static moe_status fw_run_host(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in, moe_golden_set *out)
{
    gk_run r;
    gk_begin(&r, ops, in, out);
    int fl = c->v[1];
    moe_route_params rp = fw_route(c);
    moe_forward_args a;
    memset(&a, 0, sizeof a);
    a.scheme = (moe_scheme)c->v[0], a.act = fw_act(c);
    a.topk_ids = gk_opt(&r, "topk_ids"), a.topk_weights = gk_opt(&r, "topk_weights");
    a.router_logits = gk_opt(&r, "router_logits");
    rp.correction_bias = gk_opt(&r, "correction_bias");
    a.route = a.router_logits ? &rp : NULL;
    a.w1 = gk_in(&r, "w1"), a.w1_scale = gk_opt(&r, "w1_scale"), a.w1_global = gk_opt(&r, "w1_global");
    a.w2 = gk_in(&r, "w2"), a.w2_scale = gk_opt(&r, "w2_scale"), a.w2_global = gk_opt(&r, "w2_global");
    a.b1 = gk_opt(&r, "b1"), a.b2 = gk_opt(&r, "b2");
    a.a1_scale = gk_opt(&r, "a1_scale"), a.a2_scale = gk_opt(&r, "a2_scale");
    a.weights_on_input = (fl & FW_WOI) != 0;
    if (fl & FW_EP) a.first_expert = (int)(c->dims.E / 2), a.num_local_experts = (int)(c->dims.E / 2);
    const moe_tensor *x = gk_in(&r, "x");
    moe_tensor *o = gk_out(&r, "out", fw_xdtype(a.scheme), 2, GK_SH(c->dims.M, c->dims.H));
    if (r.st != MOE_OK) return gk_done(&r, r.st);
    if (ops == &moe_ops_ref) return gk_done(&r, moe_ref_forward(&a, x, o));
    if (fl & (FW_ROUTE | FW_EP | FW_STATIC))
        return gk_done(&r, moe_fail(MOE_ERR_UNSUPPORTED, "%s: routing from logits, a rank's partial and static "
                                                         "scales have no noep x ref counterpart", c->name));
    moe_mk_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.scheme = a.scheme, cfg.act = a.act, cfg.num_experts = (int)c->dims.E, cfg.topk = (int)c->dims.k;
    cfg.hidden = (int)c->dims.H, cfg.inter = (int)c->dims.I, cfg.world_size = 1;
    cfg.weights_on_input = a.weights_on_input, cfg.ops = ops;
    moe_mk *mk = NULL;
    moe_status st = moe_mk_create("noep", "ref", &cfg, &mk, NULL);
    moe_mk_weights w = {a.w1, a.w1_scale, a.w1_global, a.w2, a.w2_scale, a.w2_global, a.b1, a.b2};
    if (st == MOE_OK) st = moe_mk_forward(mk, &w, x, a.topk_ids, a.topk_weights, o);
    moe_mk_destroy(mk);
    return gk_done(&r, st);
}

/* The modular kernel works on host tensors: a device backend runs through
 * its staged view (include/moe/staged.h), its stages on device copies. */
static moe_status fw_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in, moe_golden_set *out)
{
    moe_staged sg;
    const moe_ops *h;
    moe_status st = moe_backend_host_begin(ops, &sg, &h);
    if (st == MOE_OK) st = fw_run_host(c, h, in, out);
    moe_backend_host_end(&sg);
    return st;
}

static moe_status fw_describe(const moe_golden_case *c, cJSON *p)
{
    moe_quant_spec as, ws;
    moe_act_params a = fw_act(c);
    int fl = c->v[1];
    moe_scheme_spec((moe_scheme)c->v[0], MOE_OPERAND_ACT, &as);
    moe_scheme_spec((moe_scheme)c->v[0], MOE_OPERAND_WEIGHT, &ws);
    moe_status st = gk_json_add(p, "act_spec", gk_spec_json(&as));
    if (st == MOE_OK) st = gk_json_add(p, "weight_spec", gk_spec_json(&ws));
    if (st == MOE_OK) st = gk_json_str(p, "act", moe_act_name(a.act));
    if (st == MOE_OK) st = gk_json_str(p, "act_layout", moe_act_layout_name(a.layout));
    if (st == MOE_OK) st = gk_json_str(p, "routing", fl & FW_ROUTE ? "grouped_topk sigmoid, 2 groups keep 1, bias, "
                                                                     "renormalize, scaling 2.5"
                                                                   : gk_ids_pattern_name(c->v[2]));
    if (st == MOE_OK) st = gk_json_num(p, "weights_on_input", (fl & FW_WOI) != 0);
    if (st == MOE_OK) st = gk_json_num(p, "bias", (fl & FW_BIAS) != 0);
    if (st == MOE_OK) st = gk_json_str(p, "expert_range", fl & FW_EP ? "[E/2, E): one rank's partial" : "all");
    if (st == MOE_OK) st = gk_json_str(p, "activation_scales", fl & FW_STATIC ? "static a1 1/64, a2 1/256" : "dynamic");
    if (st == MOE_OK) st = gk_json_str(p, "x_dtype", moe_dtype_get(fw_xdtype((moe_scheme)c->v[0]))->name);
    if (st == MOE_OK) st = gk_json_str(p, "quantization_domains", "torch_experts defaults (a1 all rows, a2 per expert)");
    if (st == MOE_OK) st = gk_json_str(p, "combine", "f32 sum of w * y in slot order, one rounding");
    return st;
}

/* ---- the table ---------------------------------------------------------------------------------------------- */

#define FW(nm, scheme, seed, M, E, k, H, I, sc, flags, ids, actv, digest, note) \
    {nm, "forward", scheme, seed, {M, E, k, H, I, 0}, {sc, flags, ids, actv}, NULL, digest, note, fw_make, fw_run, \
     fw_describe, NULL, NULL}
/* Per scheme: group-128 schemes need H and I multiples of 128 (two experts
 * keep them small), w4a16_g64 multiples of 64, the rest run at 32. */
#define G128(e) (e == MOE_SCHEME_FP8_WBLOCK128_AGROUP128 || e == MOE_SCHEME_W4A16_G128 || e == MOE_SCHEME_W4AFP8_G128)
#define FW_SCHEME(e, n, i)                                                                                    \
    FW("e2e.forward." n, n, 1400 + i, 6, G128(e) ? 2 : 4, 2, G128(e) ? 128 : e == MOE_SCHEME_W4A16_G64 ? 64 : 32, \
       G128(e) ? 128 : e == MOE_SCHEME_W4A16_G64 ? 64 : 32, e, 0, IDS_DISTINCT, ACTV_SILU, 0,                  \
       "moe_ref_forward, silu gate_up, dynamic scales"),

static const moe_golden_case CASES[] = {
    GK_SCHEMES(FW_SCHEME)
    FW("e2e.forward.bf16.route_grouped_topk", "bf16", 1420, 6, 4, 2, 32, 32, MOE_SCHEME_BF16, FW_ROUTE, 0, ACTV_SILU, 0,
       "routing inside the oracle: grouped sigmoid top-k with a correction bias"),
    FW("e2e.forward.bf16.weights_on_input", "bf16", 1421, 6, 4, 1, 32, 32, MOE_SCHEME_BF16, FW_WOI, IDS_DISTINCT,
       ACTV_SILU, 0, "top-1 router weight applied to x first"),
    FW("e2e.forward.bf16.bias", "bf16", 1422, 6, 4, 2, 32, 32, MOE_SCHEME_BF16, FW_BIAS, IDS_DISTINCT, ACTV_SILU, 0,
       "b1 and b2 added in f32 before each GEMM rounding"),
    FW("e2e.forward.bf16.swigluoai", "bf16", 1423, 6, 4, 2, 32, 32, MOE_SCHEME_BF16, FW_BIAS, IDS_DISTINCT,
       ACTV_SWIGLUOAI, 0, "gpt-oss: swigluoai, interleaved, biases"),
    FW("e2e.forward.f16.gelu_tanh_up_gate", "f16", 1424, 6, 4, 2, 32, 32, MOE_SCHEME_F16, 0, IDS_DISTINCT,
       ACTV_GELU_TANH_UP_GATE, 0, "gelu_tanh in TensorRT-LLM's [linear | gate] layout"),
    FW("e2e.forward.bf16.relu2", "bf16", 1425, 6, 4, 2, 32, 32, MOE_SCHEME_BF16, 0, IDS_DISTINCT, ACTV_RELU2, 0,
       "non-gated relu2: w1 has I rows"),
    FW("e2e.forward.fp8_wtensor_atensor.static_scales", "fp8_wtensor_atensor", 1426, 6, 4, 2, 32, 32,
       MOE_SCHEME_FP8_WTENSOR_ATENSOR, FW_STATIC, IDS_DISTINCT, ACTV_SILU, 0, "static a1 / a2 scales"),
    FW("e2e.forward.bf16.ep_rank", "bf16", 1427, 6, 4, 2, 32, 32, MOE_SCHEME_BF16, FW_EP, IDS_DISTINCT, ACTV_SILU, 0,
       "experts [2, 4) only: one rank's partial"),
    FW("edge.forward.one_token", "bf16", 1428, 1, 4, 2, 32, 32, MOE_SCHEME_BF16, 0, IDS_DISTINCT, ACTV_SILU, 0, "M = 1"),
    FW("edge.forward.all_to_one_expert", "fp8_wchannel_atoken", 1429, 6, 4, 1, 32, 32, MOE_SCHEME_FP8_WCHANNEL_ATOKEN,
       0, IDS_ONE_EXPERT, ACTV_SILU, 0, "every token to expert 3"),
    FW("edge.forward.empty_experts", "fp8_wtensor_atensor", 1430, 6, 8, 2, 32, 32, MOE_SCHEME_FP8_WTENSOR_ATENSOR, 0,
       IDS_SUBSET, ACTV_SILU, 0, "only experts 1 and 5 used: the per-expert a2 scales of empty experts never exist"),
    FW("edge.forward.rank_without_tokens", "bf16", 1431, 6, 4, 2, 32, 32, MOE_SCHEME_BF16, FW_EP, IDS_LOW_HALF,
       ACTV_SILU, 0, "a rank owning experts 2..3 while every token picks 0..1: all zeros"),
    /* a DeepSeek-V3 shape scaled down (E 256 -> 32, H 7168 -> 512, I 2048 -> 256, top-8): 12.6 M weights,
     * far over the storage budget, so only digests are stored */
    FW("e2e.forward.bf16.scaled_deepseek_v3", "bf16", 1440, 16, 32, 8, 512, 256, MOE_SCHEME_BF16, 0, IDS_DISTINCT,
       ACTV_SILU, 1, "digest-only: scaled DeepSeek-V3 shape, bf16"),
    FW("e2e.forward.fp8_wblock128_agroup128.scaled_deepseek_v3", "fp8_wblock128_agroup128", 1441, 16, 32, 8, 512, 256,
       MOE_SCHEME_FP8_WBLOCK128_AGROUP128, 0, IDS_DISTINCT, ACTV_SILU, 1,
       "digest-only: scaled DeepSeek-V3 shape, block fp8 (DeepSeek-V3's own scheme)"),
};

gk_family gk_cases_e2e(void)
{
    gk_family f = {CASES, (int)(sizeof CASES / sizeof CASES[0])};
    return f;
}
