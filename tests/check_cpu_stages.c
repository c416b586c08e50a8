/* The CPU backend's stages (optimized/cpu/) against the reference, every
 * ops-table entry except grouped_gemm: seeded random inputs at several
 * shapes (M = 0, 1, odd sizes, every scheme, every activation and layout,
 * every routing method, sentinels, pads, duplicates, drops, NaN and Inf),
 * each run through moe_ops_ref and moe_ops_cpu with 1 and 2 OpenMP
 * threads (and with 2 threads and the CPU backend's size thresholds at 0,
 * so that small inputs take the parallel paths too) into outputs
 * pre-filled with the same canary bytes: the status,
 * the error message and every output byte must be equal (entries a stage
 * leaves untouched included). Bad inputs (a table of stage x class) must
 * be refused with the reference's status and message. Mismatches are
 * counted and asserted once per case. */
#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../optimized/cpu/cpu.h"
#include "../optimized/cpu/cpu_internal.h"
#include "../optimized/cpu/cpu_vmath.h"
#include "moe/format.h"
#include "moe/ops.h"
#include "moe/rng.h"

#define MAXO 10

/* the CPU backend's table (optimized/cpu/ops_cpu.c) */
extern const moe_ops moe_ops_cpu;

/* ---- the harness ----------------------------------------------------------------- */

typedef struct {
    moe_dtype dtype;
    int ndim;
    int64_t shape[4];
} proto;

static proto PR(moe_dtype d, int ndim, int64_t a, int64_t b, int64_t c, int64_t e)
{
    proto p = {d, ndim, {a, b, c, e}};
    return p;
}

/* runs one stage of `ops` on the case `ctx` into outputs o[0..n) */
typedef moe_status (*runner)(const moe_ops *ops, const void *ctx, moe_tensor *o);

static int verbose_left = 40; /* diagnostics printed per test process */

static void alloc_outs(const proto *pr, int n, moe_tensor *o)
{
    for (int i = 0; i < n; i++) {
        moe_status s = moe_tensor_alloc(&o[i], pr[i].dtype, pr[i].ndim, pr[i].shape);
        ck_assert_msg(s == MOE_OK, "alloc output %d: %s", i, moe_last_error());
        for (size_t j = 0; j < o[i].nbytes; j++) ((uint8_t *)o[i].data)[j] = (uint8_t)(0xA5u ^ (j * 7u) ^ (unsigned)i);
    }
}

/* Elements of a and b (same dtype and shape) that differ in their bits,
 * not counting NaN against NaN in f32 / bf16 / f16 outputs. Which NaN an
 * arithmetic result carries when its operands hold NaNs is not fixed by
 * IEEE 754 and the compiler may swap the operands of a commutative add or
 * multiply, so the sign and payload of a computed NaN depend on code
 * generation, not on the stage: NaNs compare by class (DESIGN section 5).
 * Inputs without NaN (the seeded normals) must match byte for byte, and
 * every other special value (Inf, -0, subnormals, overflow) exactly. */
static int nan_only_diffs;

static int64_t differing_elements(const moe_tensor *a, const moe_tensor *b)
{
    int64_t n = 0;
    if (a->dtype == MOE_F32) {
        const uint32_t *x = a->data, *y = b->data;
        for (size_t i = 0; i < a->nbytes / 4; i++)
            if (x[i] != y[i] && !((x[i] & 0x7FFFFFFFu) > 0x7F800000u && (y[i] & 0x7FFFFFFFu) > 0x7F800000u)) n++;
    } else if (a->dtype == MOE_BF16 || a->dtype == MOE_F16) {
        const uint16_t *x = a->data, *y = b->data;
        uint16_t inf = a->dtype == MOE_BF16 ? 0x7F80u : 0x7C00u;
        for (size_t i = 0; i < a->nbytes / 2; i++)
            if (x[i] != y[i] && !((x[i] & 0x7FFFu) > inf && (y[i] & 0x7FFFu) > inf)) n++;
    } else {
        const uint8_t *x = a->data, *y = b->data;
        for (size_t i = 0; i < a->nbytes; i++) n += x[i] != y[i];
    }
    return n;
}

/* Mismatches between the reference and the CPU backend on one case, with
 * 1 and 2 threads. want_ok: 1 the reference must accept, 0 refuse, -1 any. */
static int compare(const char *what, runner fn, const void *ctx, const proto *pr, int n, int want_ok)
{
    int bad = 0;
    /* 1 thread; 2 threads; 2 threads with every parallel path taken however small the input */
    for (int run = 0; run < 3; run++) {
        int th = run ? 2 : 1;
        omp_set_num_threads(th);
        if (run == 2) cpu_set_par_thresholds(0, 0);
        moe_tensor a[MAXO], b[MAXO];
        alloc_outs(pr, n, a);
        alloc_outs(pr, n, b);
        char ma[512], mb[512];
        moe_clear_error();
        moe_status sa = fn(&moe_ops_ref, ctx, a);
        snprintf(ma, sizeof ma, "%s", moe_last_error());
        moe_clear_error();
        moe_status sb = fn(&moe_ops_cpu, ctx, b);
        snprintf(mb, sizeof mb, "%s", moe_last_error());
        int here = 0;
        if (sa != sb || strcmp(ma, mb) != 0) {
            here++;
            if (verbose_left-- > 0)
                fprintf(stderr, "%s [run %d]: ref %s '%s', cpu %s '%s'\n", what, run, moe_status_str(sa), ma,
                        moe_status_str(sb), mb);
        }
        if (want_ok == 1 && sa != MOE_OK) {
            here++;
            if (verbose_left-- > 0) fprintf(stderr, "%s: the reference refused a valid case: %s\n", what, ma);
        }
        if (want_ok == 0 && sa == MOE_OK) {
            here++;
            if (verbose_left-- > 0) fprintf(stderr, "%s: the reference accepted a bad case\n", what);
        }
        for (int i = 0; i < n; i++) {
            if (a[i].nbytes == 0 || memcmp(a[i].data, b[i].data, a[i].nbytes) == 0) continue;
            int64_t diff = differing_elements(&a[i], &b[i]);
            if (diff == 0) { /* NaN against NaN of another sign or payload only */
                nan_only_diffs++;
                continue;
            }
            size_t j = 0;
            while (((uint8_t *)a[i].data)[j] == ((uint8_t *)b[i].data)[j]) j++;
            here++;
            if (verbose_left-- > 0)
                fprintf(stderr, "%s [run %d]: output %d: %lld elements differ, first at byte %zu of %zu (ref %02x cpu %02x)\n",
                        what, run, i, (long long)diff, j, a[i].nbytes, ((uint8_t *)a[i].data)[j], ((uint8_t *)b[i].data)[j]);
        }
        bad += here;
        for (int i = 0; i < n; i++) moe_tensor_free(&a[i]), moe_tensor_free(&b[i]);
        if (run == 2) cpu_set_par_thresholds(16384, 262144);
    }
    omp_set_num_threads(2);
    return bad;
}

/* ---- inputs ----------------------------------------------------------------------- */

static moe_tensor mk(moe_dtype d, int ndim, int64_t a, int64_t b, int64_t c, int64_t e)
{
    moe_tensor t;
    int64_t sh[4] = {a, b, c, e};
    moe_status s = moe_tensor_alloc(&t, d, ndim, sh);
    ck_assert_msg(s == MOE_OK, "alloc: %s", moe_last_error());
    return t;
}

/* Normals (f32 / bf16 / f16, rounded once), or random bytes for the others. */
static void fill(moe_tensor *t, uint64_t seed, float sd)
{
    if (t->dtype == MOE_F32 || t->dtype == MOE_BF16 || t->dtype == MOE_F16) {
        ck_assert_int_eq(moe_tensor_fill_normal(t, seed, 77, 0.0f, sd), MOE_OK);
    } else {
        for (size_t i = 0; i < t->nbytes; i++) ((uint8_t *)t->data)[i] = (uint8_t)moe_rng_u32(seed, 78, i);
    }
}

static const uint32_t special_bits[] = {
    0x7FC00000u, 0xFFC00000u, 0x7FA00001u, 0x7F800000u, 0xFF800000u, 0x00000000u, 0x80000000u,
    0x00000001u, 0x80400000u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x43E00000u, 0x43E80000u, 0xC3E80000u,
    0x38800000u, 0x3C7FFFFFu, 0x477FF000u, 0x3E800000u, 0x40A00000u, 0xC0B00000u,
};
#define NSPECIAL ((int)(sizeof special_bits / sizeof special_bits[0]))

/* Every `every`-th element (from a seeded offset) becomes a special value. */
static void specials(moe_tensor *t, uint64_t seed, int64_t every)
{
    int64_t n = moe_tensor_numel(t);
    if (n == 0 || every <= 0) return;
    int64_t i0 = (int64_t)(moe_rng_u32(seed, 79, 0) % (uint32_t)every);
    for (int64_t i = i0, k = 0; i < n; i += every, k++) {
        float v = moe_u32_as_f32(special_bits[(k + seed) % NSPECIAL]);
        if (t->dtype == MOE_F32) ((float *)t->data)[i] = v;
        else if (t->dtype == MOE_BF16) ((uint16_t *)t->data)[i] = moe_f32_to_bf16(v, MOE_POLICY_IEEE_RNE, NULL);
        else if (t->dtype == MOE_F16) ((uint16_t *)t->data)[i] = moe_f32_to_f16(v, MOE_POLICY_IEEE_RNE, NULL);
    }
}

static void ids_fill(moe_tensor *t, int64_t rows, int k, int E, uint64_t seed, unsigned neg1, int distinct)
{
    ck_assert_int_eq(moe_rng_topk_ids(t->data, rows, k, E, seed, 80, neg1, distinct), MOE_OK);
}

static void weights_fill(moe_tensor *t, uint64_t seed)
{
    int64_t n = moe_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) ((float *)t->data)[i] = moe_rng_uniform(seed, 81, (uint64_t)i);
}

static void freeall(moe_tensor *t, int n)
{
    for (int i = 0; i < n; i++) moe_tensor_free(&t[i]);
}

#define CHECK_BAD(bad, what)                                                                      \
    do {                                                                                          \
        if (nan_only_diffs) fprintf(stderr, "%s: %d outputs differ only in NaN sign / payload\n", what, nan_only_diffs); \
        ck_assert_msg((bad) == 0, "%s: %d mismatches (see stderr)", what, (bad));                 \
    } while (0)

/* ---- the table ------------------------------------------------------------------------ */

START_TEST(table_entries)
{
    ck_assert_int_eq(moe_ops_check(&moe_ops_cpu), MOE_OK);
    ck_assert_str_eq(moe_ops_cpu.name, "cpu");
    ck_assert(moe_ops_cpu.route == moe_cpu_route);
    ck_assert(moe_ops_cpu.align_block_size == moe_cpu_align_block_size);
    ck_assert(moe_ops_cpu.align_batched == moe_cpu_align_batched);
    ck_assert(moe_ops_cpu.sort_ck == moe_cpu_sort_ck);
    ck_assert(moe_ops_cpu.maps_trtllm == moe_cpu_maps_trtllm);
    ck_assert(moe_ops_cpu.quantize == moe_cpu_quantize);
    ck_assert(moe_ops_cpu.dequantize == moe_cpu_dequantize);
    ck_assert(moe_ops_cpu.permute_rows == moe_cpu_permute_rows);
    ck_assert(moe_ops_cpu.unpermute_rows == moe_cpu_unpermute_rows);
    ck_assert(moe_ops_cpu.expand_trtllm == moe_cpu_expand_trtllm);
    ck_assert(moe_ops_cpu.batched_scatter == moe_cpu_batched_scatter);
    ck_assert(moe_ops_cpu.permute_grouped == moe_cpu_permute_grouped);
    ck_assert(moe_ops_cpu.grouped_gemm == moe_cpu_grouped_gemm);
    ck_assert(moe_ops_cpu.activation == moe_cpu_activation);
    ck_assert(moe_ops_cpu.war_contiguous == moe_cpu_war_contiguous);
    ck_assert(moe_ops_cpu.war_noop == moe_cpu_war_noop);
    ck_assert(moe_ops_cpu.war_naive_batched == moe_cpu_war_naive_batched);
    ck_assert(moe_ops_cpu.finalize_trtllm == moe_cpu_finalize_trtllm);
    ck_assert(moe_ops_cpu.ep_allgather_dispatch == moe_cpu_ep_allgather_dispatch);
    ck_assert(moe_ops_cpu.ep_reduce_scatter_combine == moe_cpu_ep_reduce_scatter_combine);
    ck_assert(moe_ops_cpu.deepep_layout == moe_cpu_deepep_layout);
    ck_assert(moe_ops_cpu.deepep_dispatch == moe_cpu_deepep_dispatch);
    ck_assert(moe_ops_cpu.deepep_combine == moe_cpu_deepep_combine);
    ck_assert(moe_ops_cpu.deepep_ll_dispatch == moe_cpu_deepep_ll_dispatch);
    ck_assert(moe_ops_cpu.deepep_ll_combine == moe_cpu_deepep_ll_combine);
    ck_assert(moe_ops_cpu.pplx_dispatch == moe_cpu_pplx_dispatch);
    ck_assert(moe_ops_cpu.pplx_combine == moe_cpu_pplx_combine);
    ck_assert(moe_ops_cpu.hep_dispatch_with_permute == moe_cpu_hep_dispatch_with_permute);
    ck_assert(moe_ops_cpu.hep_combine_with_unpermute == moe_cpu_hep_combine_with_unpermute);
}
END_TEST

/* The fast encoders of cpu_internal.h and the four-lane math and e4m3
 * encoder of cpu_vmath.h against the reference routines over a sweep of
 * f32 patterns (every 997th, plus the neighbourhoods of the format
 * boundaries); all 2^32 were compared when they were written. */
/* equal bits, or both NaN: gcc assumes no signaling NaNs (its default
 * -fno-signaling-nans), so whether an sNaN input comes out quieted
 * depends on code generation, in the reference as anywhere */
static int same_f32(float a, float b)
{
    return moe_f32_as_u32(a) == moe_f32_as_u32(b) || (a != a && b != b);
}

static int enc_mismatch(uint32_t u)
{
    float x = moe_u32_as_f32(u);
    unsigned f = 0;
    int bad = 0;
    bad += cpu_enc_bf16(x) != moe_s_round_pack_bf16(x, MOE_POLICY_IEEE_RNE, &f);
    bad += cpu_enc_f16(x) != moe_s_round_pack_f16(x, MOE_POLICY_IEEE_RNE, &f);
    bad += cpu_enc_e4m3(x) != moe_s_round_pack_e4m3(x, MOE_POLICY_E4M3_SAT_RNE, &f);
    bad += cpu_enc_e2m1(x) != moe_s_round_pack_e2m1(x, MOE_POLICY_E2M1_SAT_RNE, &f);
    bad += cpu_enc_i8(x) != moe_f32_to_i8(x, MOE_RND_RNE, NULL);
    bad += cpu_enc_i4(x) != moe_f32_to_i4(x, MOE_RND_RNE, NULL);
    /* the four-lane math and e4m3 encoder, x in every lane position */
    for (int l = 0; l < 4; l++) {
        float in[4] = {1.0f, -2.5f, 100.0f, -100.0f};
        in[l] = x;
        cpu_v4f v = cpu_vload(in);
        cpu_v4f e = cpu_vexpf(v), s = cpu_vsigmoidf(v), q = cpu_vsiluf(v);
        cpu_v4u c = cpu_venc_e4m3(v), c2 = cpu_venc_e2m1(v);
        bad += (uint8_t)c2[l] != moe_s_round_pack_e2m1(x, MOE_POLICY_E2M1_SAT_RNE, &f);
        bad += !same_f32(e[l], moe_expf(x));
        bad += !same_f32(s[l], moe_sigmoidf(x));
        bad += !same_f32(q[l], moe_siluf(x));
        bad += (uint8_t)c[l] != moe_s_round_pack_e4m3(x, MOE_POLICY_E4M3_SAT_RNE, &f);
    }
    return bad;
}

START_TEST(fast_encoders)
{
    int64_t bad = 0;
    for (uint64_t u = 0; u < ((uint64_t)1 << 32); u += 997) bad += enc_mismatch((uint32_t)u);
    static const uint32_t edges[] = {0x38800000u, 0x477FF000u, 0x3C800000u, 0x43E00000u, 0x7F800000u,
                                     0x3E800000u, 0x3F400000u, 0x3FA00000u, 0x3FE00000u, 0x40200000u,
                                     0x40600000u, 0x40A00000u, 0x00800000u, 0x33000000u};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        for (int64_t d = -4096; d <= 4096; d++) {
            bad += enc_mismatch(edges[i] + (uint32_t)d);
            bad += enc_mismatch((edges[i] + (uint32_t)d) | 0x80000000u);
        }
    for (uint32_t c = 0; c < 256; c++) {
        bad += moe_f32_as_u32(cpu_dec_e4m3((uint8_t)c)) != moe_f32_as_u32(moe_e4m3_to_f32((uint8_t)c));
        bad += moe_f32_as_u32(cpu_dec_e2m1((uint8_t)c)) != moe_f32_as_u32(moe_e2m1_to_f32((uint8_t)(c & 0xF)));
    }
    for (uint32_t c = 0; c < 65536; c++) {
        bad += moe_f32_as_u32(cpu_dec_bf16((uint16_t)c)) != moe_f32_as_u32(moe_bf16_to_f32((uint16_t)c));
        bad += moe_f32_as_u32(cpu_dec_f16((uint16_t)c)) != moe_f32_as_u32(moe_f16_to_f32((uint16_t)c));
    }
    ck_assert_msg(bad == 0, "%lld encoder mismatches", (long long)bad);
}
END_TEST

/* ---- routing -------------------------------------------------------------------------- */

typedef struct {
    moe_tensor logits;
    moe_route_params p;
} route_ctx;

static moe_status run_route(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const route_ctx *r = c;
    return ops->route(&r->logits, &r->p, &o[0], &o[1]);
}

static int route_case(const char *what, const route_ctx *c, int64_t M, int k, int want)
{
    proto pr[2] = {PR(MOE_I32, 2, M, k, 0, 0), PR(MOE_F32, 2, M, k, 0, 0)};
    return compare(what, run_route, c, pr, 2, want);
}

START_TEST(route_random)
{
    int bad = 0;
    static const int64_t Ms[] = {0, 1, 7, 130};
    static const int Es[] = {8, 64, 128};
    static const moe_dtype dts[] = {MOE_F32, MOE_BF16, MOE_F16};
    char what[160];
    for (int mi = 0; mi < 4; mi++)
        for (int ei = 0; ei < 3; ei++)
            for (int di = 0; di < 3; di++) {
                int64_t M = Ms[mi];
                int E = Es[ei];
                route_ctx c;
                c.logits = mk(dts[di], 2, M, E, 0, 0);
                fill(&c.logits, 100 + mi * 10 + ei + di, 2.0f);
                if (di == 0) specials(&c.logits, 5 + ei, 37); /* NaN, Inf rows for the f32 cases */
                moe_tensor bias = mk(MOE_F32, 1, E, 0, 0, 0);
                fill(&bias, 9 + ei, 0.1f);
                for (int m = 0; m < MOE_ROUTE_COUNT; m++)
                    for (int v = 0; v < 4; v++) {
                        memset(&c.p, 0, sizeof c.p);
                        c.p.method = (moe_route_method)m;
                        c.p.routed_scaling_factor = v == 3 ? 2.5f : 1.0f;
                        c.p.renormalize = v & 1;
                        c.p.topk = m == MOE_ROUTE_LLAMA4_TOP1 ? 1 : E >= 8 ? (v == 2 ? 1 : 8) : 2;
                        if (m == MOE_ROUTE_GROUPED_TOPK) {
                            c.p.num_expert_group = E == 8 ? (v & 1 ? 2 : 4) : (v & 1 ? 4 : 8);
                            c.p.topk_group = v == 1 ? 2 : c.p.num_expert_group / 2 + 1;
                            c.p.score = v & 2 ? MOE_SCORE_SIGMOID : MOE_SCORE_SOFTMAX;
                            c.p.correction_bias = v & 2 ? &bias : NULL;
                            if (c.p.topk > c.p.topk_group * (E / c.p.num_expert_group)) c.p.topk = 2;
                        } else if (m == MOE_ROUTE_SOFTMAX_TOPK && v == 2) {
                            c.p.correction_bias = &bias;
                        }
                        snprintf(what, sizeof what, "route M=%lld E=%d %s method %d variant %d", (long long)M,
                                 E, moe_dtype_get(dts[di])->name, m, v);
                        bad += route_case(what, &c, M, c.p.topk, 1);
                    }
                moe_tensor_free(&c.logits), moe_tensor_free(&bias);
            }
    CHECK_BAD(bad, "route");
}
END_TEST

/* ---- align -------------------------------------------------------------------------- */

typedef struct {
    moe_tensor ids, nt;
    moe_align_params p;
    int max_tokens, block;
} align_ctx;

static moe_status run_align(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const align_ctx *a = c;
    return ops->align_block_size(&a->ids, &a->p, &o[0], &o[1], &o[2]);
}

static moe_status run_align_batched(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const align_ctx *a = c;
    return ops->align_batched(&a->nt, a->max_tokens, a->block, &o[0], &o[1], &o[2]);
}

START_TEST(align_random)
{
    int bad = 0;
    char what[160];
    static const int64_t Ms[] = {0, 1, 5, 300, 2100};
    static const int ks[] = {1, 2, 8};
    static const int Es[] = {4, 16, 128};
    static const int bss[] = {1, 16, 64};
    for (int mi = 0; mi < 5; mi++)
        for (int ki = 0; ki < 3; ki++)
            for (int ei = 0; ei < 3; ei++) {
                int64_t M = Ms[mi];
                int k = ks[ki], E = Es[ei];
                if (k > E) continue;
                align_ctx c;
                memset(&c, 0, sizeof c);
                c.ids = mk(MOE_I32, 2, M, k, 0, 0);
                ids_fill(&c.ids, M, k, E, 200 + mi * 9 + ki * 3 + ei, 0, 1);
                moe_tensor map = mk(MOE_I32, 1, E, 0, 0, 0);
                for (int e = 0; e < E; e++) ((int32_t *)map.data)[e] = e % 3 == 1 ? -1 : e / 2;
                for (int bi = 0; bi < 3; bi++)
                    for (int v = 0; v < 4; v++) {
                        c.p.block_size = bss[bi];
                        c.p.num_experts = E;
                        c.p.expert_map = v >= 2 ? &map : NULL;
                        c.p.map_mode = v == 3 ? MOE_ALIGN_MAP_IGNORE_INVALID : MOE_ALIGN_MAP_KEEP_NONLOCAL;
                        c.p.pad_sorted_ids = v & 1;
                        int64_t len, blocks;
                        ck_assert_int_eq(moe_align_capacity(M * k, &c.p, &len, &blocks), MOE_OK);
                        proto pr[3] = {PR(MOE_I32, 1, len + bi, 0, 0, 0), PR(MOE_I32, 1, blocks + 1, 0, 0, 0),
                                       PR(MOE_I32, 1, 1, 0, 0, 0)};
                        snprintf(what, sizeof what, "align M=%lld k=%d E=%d block=%d variant %d", (long long)M, k,
                                 E, bss[bi], v);
                        bad += compare(what, run_align, &c, pr, 3, 1);
                    }
                moe_tensor_free(&c.ids), moe_tensor_free(&map);
            }
    /* batched */
    static const int64_t Bs[] = {0, 3, 16};
    static const int mts[] = {1, 7, 64};
    for (int bi = 0; bi < 3; bi++)
        for (int mi = 0; mi < 3; mi++)
            for (int blk = 0; blk < 3; blk++) {
                align_ctx c;
                memset(&c, 0, sizeof c);
                int64_t B = Bs[bi];
                c.max_tokens = mts[mi];
                c.block = bss[blk] > 16 ? 4 : bss[blk];
                c.nt = mk(MOE_I32, 1, B, 0, 0, 0);
                for (int64_t b = 0; b < B; b++)
                    ((int32_t *)c.nt.data)[b] = (int32_t)(moe_rng_u32(300 + bi, 1, (uint64_t)b) % (uint32_t)(c.max_tokens + 1));
                int64_t per = (c.max_tokens + c.block - 1) / c.block * c.block, len = B * per;
                proto pr[3] = {PR(MOE_I32, 1, len + 3, 0, 0, 0), PR(MOE_I32, 1, len / c.block + 2, 0, 0, 0),
                               PR(MOE_I32, 1, 1, 0, 0, 0)};
                snprintf(what, sizeof what, "align_batched B=%lld max=%d block=%d", (long long)B, c.max_tokens,
                         c.block);
                bad += compare(what, run_align_batched, &c, pr, 3, 1);
                moe_tensor_free(&c.nt);
            }
    CHECK_BAD(bad, "align");
}
END_TEST

/* ---- CK sorting, TensorRT-LLM maps -------------------------------------------------- */

typedef struct {
    moe_tensor ids, w;
    moe_sort_ck_params p;
    moe_maps_trtllm_params mp;
    int with_pte;
} sort_ctx;

static moe_status run_sort(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const sort_ctx *s = c;
    return ops->sort_ck(&s->ids, &s->w, &s->p, &o[0], &o[1], &o[2], &o[3]);
}

static moe_status run_maps(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const sort_ctx *s = c;
    return ops->maps_trtllm(&s->ids, &s->mp, &o[0], &o[1], &o[2], s->with_pte ? &o[3] : NULL);
}

START_TEST(sort_random)
{
    int bad = 0;
    char what[160];
    static const int64_t Ts[] = {0, 1, 9, 300, 2100};
    static const int ks[] = {1, 3, 8};
    static const int Es[] = {8, 32, 128};
    static const int units[] = {1, 16, 32};
    for (int ti = 0; ti < 5; ti++)
        for (int ki = 0; ki < 3; ki++)
            for (int ei = 0; ei < 3; ei++) {
                int64_t T = Ts[ti];
                int k = ks[ki], E = Es[ei];
                sort_ctx c;
                memset(&c, 0, sizeof c);
                c.ids = mk(MOE_I32, 2, T, k, 0, 0);
                c.w = mk(MOE_F32, 2, T, k, 0, 0);
                ids_fill(&c.ids, T, k, E, 400 + ti * 9 + ki * 3 + ei, 0, 1);
                weights_fill(&c.w, 401 + ti);
                specials(&c.w, 3, 11);
                moe_tensor mask = mk(MOE_I32, 1, E, 0, 0, 0);
                for (int e = 0; e < E; e++) ((int32_t *)mask.data)[e] = e % 4 != 2;
                for (int ui = 0; ui < 3; ui++)
                    for (int v = 0; v < 8; v++) {
                        c.p.num_experts = E;
                        c.p.unit_size = units[ui];
                        c.p.id_mode = v & 1 ? MOE_SORT_CK_PLAIN_ID : MOE_SORT_CK_MOCK_ID;
                        c.p.empty_experts = v & 2 ? MOE_SORT_CK_ONE_TILE_PER_EMPTY : MOE_SORT_CK_SKIP_EMPTY;
                        c.p.local_expert_mask = v & 4 ? &mask : NULL;
                        int64_t len, tiles;
                        ck_assert_int_eq(moe_sort_ck_capacity(T, k, E, units[ui], MOE_SORT_CK_PAD_UPDATED, &len, &tiles),
                                         MOE_OK);
                        if (len < (int64_t)E * units[ui]) len = (int64_t)E * units[ui]; /* T = 0, one-tile mode */
                        len += units[ui];
                        proto pr[4] = {PR(MOE_I32, 1, len, 0, 0, 0), PR(MOE_F32, 1, len, 0, 0, 0),
                                       PR(MOE_I32, 1, len / units[ui] + 1, 0, 0, 0), PR(MOE_I32, 1, 2, 0, 0, 0)};
                        snprintf(what, sizeof what, "sort_ck T=%lld k=%d E=%d unit=%d variant %d", (long long)T, k,
                                 E, units[ui], v);
                        bad += compare(what, run_sort, &c, pr, 4, 1);
                    }
                moe_tensor_free(&mask);
                /* maps: duplicates and ids outside the rank allowed */
                ids_fill(&c.ids, T, k, E, 450 + ti * 9 + ki * 3 + ei, 10, 0);
                if (T > 2) ((int32_t *)c.ids.data)[k] = E + 3; /* an id >= E: not on this rank */
                for (int v = 0; v < 8; v++) {
                    c.mp.variant = v & 1 ? MOE_MAPS_TRTLLM_THREE_STEP : MOE_MAPS_TRTLLM_FUSED_SINGLE_BLOCK;
                    c.mp.num_experts = E;
                    c.mp.start_expert = v & 2 ? E / 4 : 0;
                    c.mp.num_local_experts = v & 4 ? E / 2 : E - c.mp.start_expert;
                    c.with_pte = (v & 3) != 1;
                    if (k > E) continue;
                    proto pr[4] = {PR(MOE_I32, 1, T * k, 0, 0, 0), PR(MOE_I32, 1, T * k, 0, 0, 0),
                                   PR(MOE_I64, 1, c.mp.num_local_experts + 1, 0, 0, 0), PR(MOE_I32, 1, T * k, 0, 0, 0)};
                    snprintf(what, sizeof what, "maps_trtllm T=%lld k=%d E=%d variant %d", (long long)T, k, E, v);
                    bad += compare(what, run_maps, &c, pr, 4, 1);
                }
                moe_tensor_free(&c.ids), moe_tensor_free(&c.w);
            }
    CHECK_BAD(bad, "sort");
}
END_TEST

/* ---- quantize / dequantize ---------------------------------------------------------- */

typedef struct {
    moe_quant_spec sp;
    moe_tensor x, stat, q, s, g;
    int use_stat, has_s, has_g, pass_g;
} quant_ctx;

static moe_status run_quant(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const quant_ctx *q = c;
    return ops->quantize(&q->sp, &q->x, q->use_stat ? &q->stat : NULL, &o[0], q->has_s ? &o[1] : NULL,
                         q->pass_g ? &o[2] : NULL);
}

static moe_status run_dequant(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const quant_ctx *q = c;
    return ops->dequantize(&q->sp, &q->q, q->has_s ? &q->s : NULL, q->has_g ? &q->g : NULL, &o[0]);
}

/* quantize (dynamic, and static where the rule takes it) and dequantize of
 * one spec at one shape; x has a few special values when `spec_every` */
static int quant_case(const char *name, const moe_quant_spec *sp, int ndim, int64_t a, int64_t b, int64_t k,
                      uint64_t seed, int64_t spec_every)
{
    int bad = 0;
    char what[200];
    int64_t sh[3] = {a, b, k};
    moe_quant_dims d;
    moe_status st = moe_quant_shapes(sp, ndim, sh, &d);
    ck_assert_msg(st == MOE_OK, "%s: shapes: %s", name, moe_last_error());
    quant_ctx c;
    memset(&c, 0, sizeof c);
    c.sp = *sp;
    c.x = mk(MOE_F32, ndim, a, b, k, 0);
    fill(&c.x, seed, sp->operand == MOE_OPERAND_WEIGHT ? 0.05f : 1.5f);
    specials(&c.x, seed, spec_every);
    c.has_s = d.has_scale, c.has_g = d.has_global;
    proto pr[3] = {PR(d.q_dtype, d.q_ndim, d.q_shape[0], d.q_shape[1], d.q_shape[2], 0),
                   d.has_scale ? PR(d.scale_dtype, d.scale_ndim, d.scale_shape[0], d.scale_shape[1], d.scale_shape[2], 0)
                               : PR(MOE_F32, 1, 1, 0, 0, 0),
                   d.has_global ? PR(MOE_F32, d.global_ndim, d.global_shape[0], 0, 0, 0) : PR(MOE_F32, 1, 1, 0, 0, 0)};
    for (int v = 0; v < 3; v++) {
        c.pass_g = d.has_global && v != 1;
        c.use_stat = v == 2;
        if (v == 2) {
            if (!sp->static_ok) break;
            if (sp->rule == MOE_RULE_NVFP4) c.stat = mk(MOE_F32, d.global_ndim, d.global_shape[0], 0, 0, 0);
            else c.stat = mk(MOE_F32, d.scale_ndim, d.scale_shape[0], d.scale_shape[1], d.scale_shape[2], 0);
            int64_t n = moe_tensor_numel(&c.stat);
            for (int64_t i = 0; i < n; i++)
                ((float *)c.stat.data)[i] = 0.001f + moe_rng_uniform(seed, 5, (uint64_t)i) * (sp->rule == MOE_RULE_NVFP4 ? 3000.0f : 0.05f);
        }
        snprintf(what, sizeof what, "quantize %s [%lld %lld %lld] variant %d", name, (long long)a, (long long)b,
                 (long long)(ndim == 3 ? k : 0), v);
        bad += compare(what, run_quant, &c, pr, 3, 1);
    }
    moe_tensor_free(&c.stat);
    /* dequantize random codes (every code, NaN codes included) and scales */
    c.q = mk(d.q_dtype, d.q_ndim, d.q_shape[0], d.q_shape[1], d.q_shape[2], 0);
    fill(&c.q, seed + 1, 1.0f);
    if (d.has_scale) {
        c.s = mk(d.scale_dtype, d.scale_ndim, d.scale_shape[0], d.scale_shape[1], d.scale_shape[2], 0);
        if (d.scale_dtype == MOE_F32) {
            int64_t n = moe_tensor_numel(&c.s);
            for (int64_t i = 0; i < n; i++) ((float *)c.s.data)[i] = moe_rng_normal(seed, 6, (uint64_t)i) * 0.01f;
        } else {
            fill(&c.s, seed + 2, 1.0f);
        }
    }
    if (d.has_global) {
        c.g = mk(MOE_F32, d.global_ndim, d.global_shape[0], 0, 0, 0);
        for (int64_t i = 0; i < d.global_shape[0]; i++) ((float *)c.g.data)[i] = 100.0f + 50.0f * (float)i;
    }
    proto po[1] = {PR(MOE_F32, d.q_ndim, d.q_shape[0], d.q_shape[1], d.q_shape[2], 0)};
    snprintf(what, sizeof what, "dequantize %s [%lld %lld %lld]", name, (long long)a, (long long)b,
             (long long)(ndim == 3 ? k : 0));
    bad += compare(what, run_dequant, &c, po, 1, 1);
    moe_tensor_free(&c.x), moe_tensor_free(&c.q), moe_tensor_free(&c.s), moe_tensor_free(&c.g);
    return bad;
}

/* every spec: the 18 schemes' weight and activation specs, DeepEP-LL's
 * casts, int groupwise, and the MX / NVFP4 layout and rule variants */
static int all_specs(moe_quant_spec *out, char names[][48])
{
    int n = 0;
    for (int s = 0; s < MOE_SCHEME_COUNT; s++)
        for (int op = 0; op < 2; op++) {
            ck_assert_int_eq(moe_scheme_spec((moe_scheme)s, (moe_operand)op, &out[n]), MOE_OK);
            snprintf(names[n++], 48, "%s.%s", moe_scheme_name((moe_scheme)s), op ? "act" : "weight");
        }
    for (int rs = 0; rs < 2; rs++)
        for (int ue = 0; ue <= rs; ue++) {
            ck_assert_int_eq(moe_quant_spec_deepep_ll(rs, ue, &out[n]), MOE_OK);
            snprintf(names[n++], 48, "deepep_ll.rs%d.ue%d", rs, ue);
        }
    static const int groups[] = {32, 64, 128};
    for (int e = 0; e < 2; e++)
        for (int gi = 0; gi < 3; gi++) {
            ck_assert_int_eq(moe_quant_spec_int_groupwise(e ? MOE_I8 : MOE_I4, groups[gi], &out[n]), MOE_OK);
            snprintf(names[n++], 48, "int%d_g%d", e ? 8 : 4, groups[gi]);
        }
    for (int op = 0; op < 2; op++) {
        moe_quant_spec mx;
        ck_assert_int_eq(moe_scheme_spec(MOE_SCHEME_MXFP4_MXFP8, (moe_operand)op, &mx), MOE_OK);
        mx.rule = MOE_RULE_MX_OCP_FLOOR; /* e2m1 weights, e4m3 activations */
        out[n] = mx;
        snprintf(names[n++], 48, "mx_ocp_floor.%s", op ? "act" : "weight");
        mx.layout = MOE_SF_SWIZZLE_128X4;
        out[n] = mx;
        snprintf(names[n++], 48, "mx_ocp_floor_swizzled.%s", op ? "act" : "weight");
        for (int cl = 1; cl < MOE_NANCLAMP_COUNT; cl++) { /* the NaN clamps MX specs may name */
            mx.clamp = (moe_nan_clamp)cl;
            out[n] = mx;
            snprintf(names[n++], 48, "mx_clamp%d.%s", cl, op ? "act" : "weight");
        }
    }
    moe_quant_spec nv;
    ck_assert_int_eq(moe_scheme_spec(MOE_SCHEME_NVFP4, MOE_OPERAND_ACT, &nv), MOE_OK);
    nv.layout = MOE_SF_LINEAR;
    out[n] = nv;
    snprintf(names[n++], 48, "nvfp4_linear.act");
    nv.use_global_scale = 0, nv.static_ok = 0;
    out[n] = nv;
    snprintf(names[n++], 48, "nvfp4_noglobal.act");
    for (int i = 0; i < n; i++) ck_assert_msg(moe_quant_spec_check(&out[i]) == MOE_OK, "%s: %s", names[i], moe_last_error());
    return n;
}

START_TEST(quant_random)
{
    moe_quant_spec sp[64];
    char names[64][48];
    int n = all_specs(sp, names), bad = 0;
    for (int i = 0; i < n; i++) {
        if (sp[i].operand == MOE_OPERAND_ACT) {
            static const int64_t Ms[] = {0, 1, 3, 130};
            for (int mi = 0; mi < 4; mi++) bad += quant_case(names[i], &sp[i], 2, Ms[mi], 512, 0, 500 + i * 7 + mi, mi == 3 ? 53 : 0);
            /* K not a multiple of 128 where the granularity allows it */
            if (!sp[i].k_divisible) bad += quant_case(names[i], &sp[i], 2, 5, 200, 0, 600 + i, 17);
        } else {
            bad += quant_case(names[i], &sp[i], 3, 2, 130, 256, 700 + i, 97);
            bad += quant_case(names[i], &sp[i], 3, 1, 1, 512, 750 + i, 0);
            bad += quant_case(names[i], &sp[i], 3, 0, 3, 256, 760 + i, 0);
            if (!sp[i].k_divisible) bad += quant_case(names[i], &sp[i], 3, 2, 129, 200, 800 + i, 13);
        }
    }
    CHECK_BAD(bad, "quantize / dequantize");
}
END_TEST

/* ---- permutation ----------------------------------------------------------------------- */

typedef struct {
    moe_tensor x, idx, ids, w;
    int topk, first, pad, with_w, with_scales;
} perm_ctx;

static moe_status run_permute(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const perm_ctx *p = c;
    return ops->permute_rows(&p->x, &p->idx, &o[0]);
}
static moe_status run_unpermute(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const perm_ctx *p = c;
    return ops->unpermute_rows(&p->x, &p->idx, &o[0]);
}
static moe_status run_expand(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const perm_ctx *p = c;
    return ops->expand_trtllm(&p->x, &p->idx, p->topk, p->with_w ? &p->w : NULL, &o[0], p->with_scales ? &o[1] : NULL);
}
static moe_status run_scatter(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const perm_ctx *p = c;
    return ops->batched_scatter(&p->x, &p->ids, p->first, &o[0], &o[1]);
}
static moe_status run_grouped(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const perm_ctx *p = c;
    return ops->permute_grouped(&p->x, &p->ids, p->first, p->pad, &o[0], &o[1], &o[2], &o[3]);
}

START_TEST(permute_random)
{
    int bad = 0;
    char what[160];
    static const int64_t Ts[] = {0, 1, 5, 257};
    static const moe_dtype dts[] = {MOE_BF16, MOE_F32, MOE_E4M3, MOE_E2M1};
    static const int64_t Hs[] = {64, 7};
    for (int ti = 0; ti < 4; ti++)
        for (int di = 0; di < 4; di++)
            for (int hi = 0; hi < 2; hi++) {
                int64_t T = Ts[ti], H = Hs[hi];
                int k = 4, E = 16;
                uint64_t seed = 900 + ti * 16 + di * 2 + hi;
                perm_ctx c;
                memset(&c, 0, sizeof c);
                c.x = mk(dts[di], 2, T, H, 0, 0);
                fill(&c.x, seed, 1.0f);
                /* gather: P = 2T + 3 rows, sources in [-1, T) */
                int64_t P = 2 * T + 3;
                c.idx = mk(MOE_I32, 1, P, 0, 0, 0);
                for (int64_t p = 0; p < P; p++)
                    ((int32_t *)c.idx.data)[p] = T ? (int32_t)(moe_rng_u32(seed, 1, (uint64_t)p) % (uint32_t)(T + 1)) - 1 : -1;
                proto pg[1] = {PR(dts[di], 2, P, H, 0, 0)};
                snprintf(what, sizeof what, "permute_rows T=%lld %s H=%lld", (long long)T, moe_dtype_get(dts[di])->name, (long long)H);
                bad += compare(what, run_permute, &c, pg, 1, 1);
                moe_tensor_free(&c.idx);
                /* scatter back: a partial injective map of the x rows into 3T + 1 rows */
                c.idx = mk(MOE_I32, 1, T, 0, 0, 0);
                for (int64_t p = 0; p < T; p++)
                    ((int32_t *)c.idx.data)[p] = p % 5 == 3 ? -1 : (int32_t)((p * 7 + 2) % (3 * T + 1));
                proto pu[1] = {PR(dts[di], 2, 3 * T + 1, H, 0, 0)};
                snprintf(what, sizeof what, "unpermute_rows T=%lld %s H=%lld", (long long)T, moe_dtype_get(dts[di])->name, (long long)H);
                bad += compare(what, run_unpermute, &c, pu, 1, 1);
                moe_tensor_free(&c.idx);
                /* expand: k-major rows u = j*T + t */
                c.topk = k;
                c.w = mk(MOE_F32, 2, T, k, 0, 0);
                weights_fill(&c.w, seed);
                int64_t Pe = T * k - (T > 3 ? 3 : 0);
                c.idx = mk(MOE_I32, 1, Pe, 0, 0, 0);
                for (int64_t p = 0; p < Pe; p++) ((int32_t *)c.idx.data)[p] = (int32_t)((p * 5 + 1) % (T * k));
                for (int v = 0; v < 3; v++) {
                    c.with_w = v != 1, c.with_scales = v != 2;
                    proto pe[2] = {PR(dts[di], 2, Pe, H, 0, 0), PR(MOE_F32, 1, Pe, 0, 0, 0)};
                    snprintf(what, sizeof what, "expand_trtllm T=%lld %s H=%lld v%d", (long long)T, moe_dtype_get(dts[di])->name, (long long)H, v);
                    bad += compare(what, run_expand, &c, pe, 2, 1);
                }
                moe_tensor_free(&c.idx), moe_tensor_free(&c.w);
                /* batched and grouped layouts: duplicates and -1 in the ids */
                c.ids = mk(MOE_I32, 2, T, k, 0, 0);
                ids_fill(&c.ids, T, k, E, seed + 3, 10, hi);
                for (int v = 0; v < 4; v++) {
                    c.first = v & 1 ? 4 : 0;
                    int64_t L = v & 2 ? 8 : E - c.first;
                    int64_t maxt = v == 3 ? (T + 1) / 3 : T + 2; /* v 3 may overflow an expert */
                    proto ps[2] = {PR(dts[di], 3, L, maxt, H, 0), PR(MOE_I32, 1, L, 0, 0, 0)};
                    snprintf(what, sizeof what, "batched_scatter T=%lld %s H=%lld v%d", (long long)T, moe_dtype_get(dts[di])->name, (long long)H, v);
                    bad += compare(what, run_scatter, &c, ps, 2, v == 3 ? -1 : 1);
                    static const int pads[] = {1, 8, 128, 3};
                    c.pad = pads[v];
                    int64_t cap;
                    ck_assert_int_eq(moe_grouped_capacity(T * k, (int)L, c.pad, &cap), MOE_OK);
                    proto pgr[4] = {PR(dts[di], 2, cap + 2, H, 0, 0), PR(MOE_I32, 1, cap + 2, 0, 0, 0),
                                    PR(MOE_I32, 1, L, 0, 0, 0), PR(MOE_I32, 1, L + 1, 0, 0, 0)};
                    snprintf(what, sizeof what, "permute_grouped T=%lld %s H=%lld v%d", (long long)T, moe_dtype_get(dts[di])->name, (long long)H, v);
                    bad += compare(what, run_grouped, &c, pgr, 4, 1);
                }
                moe_tensor_free(&c.ids), moe_tensor_free(&c.x);
            }
    CHECK_BAD(bad, "permute");
}
END_TEST

/* ---- activation ---------------------------------------------------------------------------- */

typedef struct {
    moe_tensor x, re;
    moe_act_params p;
    int with_re;
} act_ctx;

static moe_status run_act(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const act_ctx *a = c;
    return ops->activation(&a->x, a->with_re ? &a->re : NULL, &a->p, &o[0]);
}

START_TEST(act_random)
{
    int bad = 0;
    char what[200];
    static const moe_dtype dts[] = {MOE_BF16, MOE_F32, MOE_F16};
    static const int64_t Ps[] = {0, 1, 33};
    static const int64_t Is[] = {96, 5};
    moe_tensor va = mk(MOE_F32, 1, 4, 0, 0, 0), vb = mk(MOE_F32, 1, 4, 0, 0, 0), vl = mk(MOE_F32, 1, 4, 0, 0, 0);
    for (int e = 0; e < 4; e++) {
        ((float *)va.data)[e] = 1.0f + 0.3f * (float)e;
        ((float *)vb.data)[e] = 0.5f * (float)e - 0.5f;
        ((float *)vl.data)[e] = e == 3 ? INFINITY : 2.0f + (float)e;
    }
    for (int a = 0; a < MOE_ACT_COUNT; a++)
        for (int l = 0; l < MOE_LAYOUT_COUNT; l++)
            for (int xi = 0; xi < 3; xi++)
                for (int pi = 0; pi < 3; pi++)
                    for (int ii = 0; ii < 2; ii++) {
                        int gated = moe_act_is_gated((moe_act)a);
                        if (!gated && l) continue;
                        int64_t Pn = Ps[pi], I = Is[ii];
                        uint64_t seed = 1000 + a * 97 + l * 31 + xi * 7 + pi * 3 + ii;
                        act_ctx c;
                        memset(&c, 0, sizeof c);
                        c.x = mk(dts[xi], 2, Pn, gated ? 2 * I : I, 0, 0);
                        fill(&c.x, seed, 3.0f);
                        specials(&c.x, seed, 29);
                        c.re = mk(MOE_I32, 1, Pn, 0, 0, 0);
                        for (int64_t r = 0; r < Pn; r++) ((int32_t *)c.re.data)[r] = (int32_t)(r % 5) - 1;
                        for (int v = 0; v < 4; v++) {
                            c.p = moe_act_defaults((moe_act)a, (moe_act_layout)l);
                            c.p.round_act_to_storage = v & 1;
                            c.with_re = v >= 2;
                            if (v == 3) c.p.limit = 2.5f, c.p.alpha = 1.2f;
                            if (a == MOE_ACT_SWIGLU_BIAS && v >= 2)
                                c.p.swiglu_alpha = &va, c.p.swiglu_beta = &vb, c.p.swiglu_limit = &vl;
                            moe_dtype od = dts[(xi + v) % 3];
                            proto pr[1] = {PR(od, 2, Pn, I, 0, 0)};
                            snprintf(what, sizeof what, "activation %s %s x %s out %s P=%lld I=%lld v%d",
                                     moe_act_name((moe_act)a), moe_act_layout_name((moe_act_layout)l),
                                     moe_dtype_get(dts[xi])->name, moe_dtype_get(od)->name, (long long)Pn, (long long)I, v);
                            bad += compare(what, run_act, &c, pr, 1, 1);
                        }
                        moe_tensor_free(&c.x), moe_tensor_free(&c.re);
                    }
    moe_tensor_free(&va), moe_tensor_free(&vb), moe_tensor_free(&vl);
    CHECK_BAD(bad, "activation");
}
END_TEST

/* ---- weight and reduce ----------------------------------------------------------------------- */

typedef struct {
    moe_tensor fused, ids, w, map, bias;
    int woi, first, nloc, with_w, with_bias;
    moe_sum_variant sum;
} red_ctx;

static moe_status run_contig(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const red_ctx *r = c;
    return ops->war_contiguous(&r->fused, &r->w, r->woi, r->sum, &o[0]);
}
static moe_status run_noop(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const red_ctx *r = c;
    return ops->war_noop(&r->fused, &o[0]);
}
static moe_status run_naive(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const red_ctx *r = c;
    return ops->war_naive_batched(&r->fused, &r->ids, r->with_w ? &r->w : NULL, r->first, r->woi, &o[0]);
}
static moe_status run_finalize(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const red_ctx *r = c;
    return ops->finalize_trtllm(&r->fused, &r->map, &r->ids, r->with_w ? &r->w : NULL, r->with_bias ? &r->bias : NULL,
                                r->first, r->nloc, &o[0]);
}

START_TEST(reduce_random)
{
    int bad = 0;
    char what[200];
    static const moe_dtype dts[] = {MOE_BF16, MOE_F32, MOE_F16};
    static const int64_t Ms[] = {0, 1, 45};
    static const int ks[] = {1, 2, 3, 4, 8};
    for (int di = 0; di < 3; di++)
        for (int mi = 0; mi < 3; mi++)
            for (int ki = 0; ki < 5; ki++) {
                int64_t M = Ms[mi], K = 72;
                int k = ks[ki], E = 16;
                uint64_t seed = 1500 + di * 40 + mi * 8 + ki;
                red_ctx c;
                memset(&c, 0, sizeof c);
                c.fused = mk(dts[di], ki & 1 ? 3 : 2, ki & 1 ? M : M * k, ki & 1 ? k : K, K, 0);
                fill(&c.fused, seed, 2.0f);
                specials(&c.fused, seed, 61);
                c.w = mk(MOE_F32, 2, M, k, 0, 0);
                weights_fill(&c.w, seed);
                for (int v = 0; v < 6; v++) {
                    c.woi = v & 1;
                    c.sum = (moe_sum_variant)(v / 2);
                    proto pr[1] = {PR(dts[(di + v) % 3], 2, M, K, 0, 0)};
                    snprintf(what, sizeof what, "war_contiguous %s M=%lld k=%d v%d", moe_dtype_get(dts[di])->name, (long long)M, k, v);
                    bad += compare(what, run_contig, &c, pr, 1, 1);
                }
                moe_tensor_free(&c.fused);
                /* noop */
                c.fused = mk(dts[di], 2, M, K, 0, 0);
                fill(&c.fused, seed + 1, 2.0f);
                specials(&c.fused, seed, 13);
                for (int v = 0; v < 3; v++) {
                    proto pr[1] = {PR(dts[v], 2, M, K, 0, 0)};
                    snprintf(what, sizeof what, "war_noop %s -> %s M=%lld", moe_dtype_get(dts[di])->name, moe_dtype_get(dts[v])->name, (long long)M);
                    bad += compare(what, run_noop, &c, pr, 1, 1);
                }
                moe_tensor_free(&c.fused);
                /* naive batched: duplicates and -1 ids */
                c.ids = mk(MOE_I32, 2, M, k, 0, 0);
                ids_fill(&c.ids, M, k, E, seed + 2, 10, 0);
                for (int v = 0; v < 4; v++) {
                    c.first = v & 1 ? 4 : 0;
                    int64_t L = v & 2 ? 8 : E - c.first, maxt = v == 3 ? (M + 3) / 4 : M + 1;
                    c.fused = mk(dts[di], 3, L, maxt, K, 0);
                    fill(&c.fused, seed + 3 + v, 1.0f);
                    c.woi = v == 1;
                    c.with_w = !c.woi || v == 3;
                    proto pr[1] = {PR(dts[(di + v) % 3], 2, M, K, 0, 0)};
                    snprintf(what, sizeof what, "war_naive_batched %s M=%lld k=%d v%d", moe_dtype_get(dts[di])->name, (long long)M, k, v);
                    bad += compare(what, run_naive, &c, pr, 1, v == 3 ? -1 : 1);
                    moe_tensor_free(&c.fused);
                }
                /* finalize: k-major map into P rows */
                int64_t P = M * k + 2;
                c.fused = mk(dts[di], 2, P, K, 0, 0);
                fill(&c.fused, seed + 9, 1.0f);
                specials(&c.fused, seed, 101);
                c.map = mk(MOE_I32, 1, M * k, 0, 0, 0);
                for (int64_t u = 0; u < M * k; u++) ((int32_t *)c.map.data)[u] = (int32_t)((u * 3 + 1) % P);
                for (int v = 0; v < 4; v++) {
                    c.first = v & 1 ? 4 : 0;
                    c.nloc = v & 2 ? 8 : E - c.first;
                    c.with_w = v != 2, c.with_bias = v != 0;
                    c.bias = mk(MOE_F32, 2, c.nloc, K, 0, 0);
                    fill(&c.bias, seed + 10, 0.5f);
                    proto pr[1] = {PR(dts[(di + v) % 3], 2, M, K, 0, 0)};
                    snprintf(what, sizeof what, "finalize_trtllm %s M=%lld k=%d v%d", moe_dtype_get(dts[di])->name, (long long)M, k, v);
                    bad += compare(what, run_finalize, &c, pr, 1, 1);
                    moe_tensor_free(&c.bias);
                }
                moe_tensor_free(&c.fused), moe_tensor_free(&c.map), moe_tensor_free(&c.ids), moe_tensor_free(&c.w);
            }
    CHECK_BAD(bad, "reduce");
}
END_TEST

/* ---- dispatch / combine --------------------------------------------------------------------- */

typedef struct {
    int R, E, K, with_scales, with_opt, flag;
    moe_deepep_config dc;
    moe_deepep_ll_config lc;
    moe_pplx_config pc;
    moe_hep_config hc;
    moe_tensor x, xs, ids, w, a, b, c, d, e;
} ep_ctx;

static moe_status run_allgather(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const ep_ctx *p = c;
    return ops->ep_allgather_dispatch(p->R, p->E, &p->x, p->with_scales ? &p->xs : NULL, &p->ids, &p->w, &o[0],
                                      p->with_scales ? &o[1] : NULL, &o[2], &o[3]);
}
static moe_status run_rs(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const ep_ctx *p = c;
    return ops->ep_reduce_scatter_combine(p->R, &p->x, &o[0]);
}
static moe_status run_layout(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const ep_ctx *p = c;
    moe_deepep_layout l = {&o[0], &o[1], p->with_opt ? &o[2] : NULL, &o[3]};
    return ops->deepep_layout(&p->dc, &p->ids, &l);
}
static moe_status run_dd(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const ep_ctx *p = c;
    moe_deepep_recv r = {&o[0], p->with_scales ? &o[1] : NULL, &o[2], &o[3], &o[4], &o[5], &o[6], p->with_opt ? &o[7] : NULL};
    return ops->deepep_dispatch(&p->dc, &p->x, p->with_scales ? &p->xs : NULL, &p->ids, &p->w, &r);
}
static moe_status run_dc(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const ep_ctx *p = c;
    return ops->deepep_combine(&p->dc, &p->x, p->with_opt ? &p->w : NULL, &p->a, p->flag & 1 ? &p->b : NULL,
                               p->flag & 2 ? &p->c : NULL, &o[0], p->with_opt ? &o[1] : NULL);
}
static moe_status run_lld(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const ep_ctx *p = c;
    moe_deepep_ll_recv r = {&o[0], p->lc.use_fp8 ? &o[1] : NULL, &o[2], &o[3], &o[4]};
    return ops->deepep_ll_dispatch(&p->lc, &p->x, &p->ids, &r);
}
static moe_status run_llc(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const ep_ctx *p = c;
    return ops->deepep_ll_combine(&p->lc, &p->a, &p->b, &p->c, &p->ids, &p->w, &o[0]);
}
static moe_status run_ppd(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const ep_ctx *p = c;
    moe_pplx_recv r = {&o[0], p->with_scales ? &o[1] : NULL, &o[2], &o[3]};
    return ops->pplx_dispatch(&p->pc, &p->x, p->with_scales ? &p->xs : NULL, &p->ids, &r);
}
static moe_status run_ppc(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const ep_ctx *p = c;
    return ops->pplx_combine(&p->pc, &p->a, &p->b, &p->c, &p->ids, &p->w, &o[0]);
}
static moe_status run_hd(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const ep_ctx *p = c;
    moe_hep_permuted r = {&o[0], p->with_opt ? &o[1] : NULL, p->with_scales ? &o[2] : NULL, &o[3], &o[4], &o[5], &o[6],
                          p->with_opt ? &o[7] : NULL};
    return ops->hep_dispatch_with_permute(&p->hc, &p->x, p->with_scales ? &p->xs : NULL, &p->ids, &p->w, &r);
}
static moe_status run_hc(const moe_ops *ops, const void *c, moe_tensor *o)
{
    const ep_ctx *p = c;
    return ops->hep_combine_with_unpermute(&p->hc, &p->a, &p->b, p->with_opt ? &p->c : NULL, &o[0],
                                           p->with_opt ? &o[1] : NULL);
}

static void ep_free(ep_ctx *c)
{
    moe_tensor *ts[] = {&c->x, &c->xs, &c->ids, &c->w, &c->a, &c->b, &c->c, &c->d, &c->e};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) moe_tensor_free(ts[i]);
}

START_TEST(dispatch_allgather_deepep)
{
    int bad = 0;
    char what[200];
    static const int Ts[] = {0, 1, 13, 96};
    for (int R = 1; R <= 8; R *= 2)
        for (int ti = 0; ti < 4; ti++)
            for (int v = 0; v < 2; v++) {
                int E = 32, K = v ? 6 : 2, H = v ? 40 : 128, S = 3;
                int64_t T = Ts[ti];
                uint64_t seed = 2000 + R * 10 + ti * 2 + v;
                moe_dtype xd = v ? MOE_E4M3 : MOE_BF16;
                ep_ctx c;
                memset(&c, 0, sizeof c);
                c.R = R, c.E = E, c.K = K, c.with_scales = v;
                c.x = mk(xd, 3, R, T, H, 0);
                fill(&c.x, seed, 1.0f);
                c.xs = mk(MOE_F32, 3, R, T, S, 0);
                fill(&c.xs, seed + 1, 1.0f);
                c.ids = mk(MOE_I32, 3, R, T, K, 0);
                ids_fill(&c.ids, R * T, K, E, seed + 2, 0, v);
                c.w = mk(MOE_F32, 3, R, T, K, 0);
                weights_fill(&c.w, seed + 3);
                proto pa[4] = {PR(xd, 2, R * T, H, 0, 0), PR(MOE_F32, 2, R * T, S, 0, 0), PR(MOE_I32, 2, R * T, K, 0, 0),
                               PR(MOE_F32, 2, R * T, K, 0, 0)};
                snprintf(what, sizeof what, "allgather R=%d T=%lld v%d", R, (long long)T, v);
                bad += compare(what, run_allgather, &c, pa, 4, 1);
                /* DeepEP layout / dispatch: -1 slots, duplicates */
                ids_fill(&c.ids, R * T, K, E, seed + 4, 15, 0);
                for (int rpn = 1; rpn <= R; rpn *= 2) {
                    c.dc = (moe_deepep_config){R, E, rpn, v ? 4 : 1};
                    c.with_opt = rpn != 2;
                    int nodes = R / rpn;
                    proto pl[4] = {PR(MOE_I32, 2, R, E, 0, 0), PR(MOE_I32, 2, R, R, 0, 0), PR(MOE_I32, 2, R, nodes, 0, 0),
                                   PR(MOE_BOOL, 3, R, T, R, 0)};
                    snprintf(what, sizeof what, "deepep_layout R=%d rpn=%d T=%lld v%d", R, rpn, (long long)T, v);
                    bad += compare(what, run_layout, &c, pl, 4, 1);
                    int64_t N;
                    ck_assert_int_eq(moe_deepep_dispatch_capacity(&c.dc, &c.ids, &N), MOE_OK);
                    N += rpn == 1 ? 2 : 0;
                    int El = E / R;
                    proto pd[8] = {PR(xd, 3, R, N, H, 0), PR(MOE_F32, 3, R, N, S, 0), PR(MOE_I32, 3, R, N, K, 0),
                                   PR(MOE_F32, 3, R, N, K, 0), PR(MOE_I32, 2, R, N, 0, 0), PR(MOE_I32, 1, R, 0, 0, 0),
                                   PR(MOE_I32, 2, R, El, 0, 0), PR(MOE_I32, 2, R, R, 0, 0)};
                    snprintf(what, sizeof what, "deepep_dispatch R=%d rpn=%d T=%lld v%d", R, rpn, (long long)T, v);
                    bad += compare(what, run_dd, &c, pd, 8, 1);
                    if (N > 0 && T > 1) { /* one row short: the reference refuses */
                        pd[0].shape[1]--, pd[1].shape[1]--, pd[2].shape[1]--, pd[3].shape[1]--, pd[4].shape[1]--;
                        int64_t need;
                        moe_deepep_dispatch_capacity(&c.dc, &c.ids, &need);
                        if (pd[0].shape[1] < need) bad += compare(what, run_dd, &c, pd, 8, 0);
                    }
                    /* combine: the layout's is_token_in_rank as the handle */
                    moe_tensor lo[4];
                    alloc_outs(pl, 4, lo);
                    moe_deepep_layout l = {&lo[0], &lo[1], &lo[2], &lo[3]};
                    ck_assert_int_eq(moe_ref_deepep_layout(&c.dc, &c.ids, &l), MOE_OK);
                    ep_ctx cc = c;
                    moe_dtype yd = v ? MOE_F32 : MOE_BF16;
                    cc.x = mk(yd, 3, R, N, H, 0);
                    fill(&cc.x, seed + 5, 1.0f);
                    specials(&cc.x, seed, 47);
                    cc.w = mk(MOE_F32, 3, R, N, K, 0);
                    weights_fill(&cc.w, seed + 6);
                    cc.a = lo[3];
                    cc.b = mk(yd, 3, R, T, H, 0);
                    fill(&cc.b, seed + 7, 0.5f);
                    cc.c = mk(yd, 3, R, T, H, 0);
                    fill(&cc.c, seed + 8, 0.5f);
                    for (int f = 0; f < 4; f++) {
                        cc.flag = f;
                        cc.with_opt = f != 1;
                        proto pc[2] = {PR(yd, 3, R, T, H, 0), PR(MOE_F32, 3, R, T, K, 0)};
                        snprintf(what, sizeof what, "deepep_combine R=%d rpn=%d T=%lld v%d f%d", R, rpn, (long long)T, v, f);
                        bad += compare(what, run_dc, &cc, pc, 2, 1);
                    }
                    if (R * T > 0) { /* a byte that is not a bool: the reference refuses */
                        ((uint8_t *)cc.a.data)[0] = 2;
                        bad += compare("deepep_combine bad handle", run_dc, &cc, (proto[2]){PR(yd, 3, R, T, H, 0), PR(MOE_F32, 3, R, T, K, 0)}, 2, 0);
                    }
                    moe_tensor_free(&cc.x), moe_tensor_free(&cc.w), moe_tensor_free(&cc.b), moe_tensor_free(&cc.c);
                    freeall(lo, 4);
                }
                /* reduce-scatter of partials */
                moe_tensor_free(&c.x);
                moe_dtype pd = v ? MOE_F16 : MOE_BF16;
                c.x = mk(pd, 3, R, R * T, H, 0);
                fill(&c.x, seed + 9, 1.0f);
                specials(&c.x, seed, 31);
                proto pr[1] = {PR(pd, 3, R, T, H, 0)};
                snprintf(what, sizeof what, "reduce_scatter R=%d T=%lld v%d", R, (long long)T, v);
                bad += compare(what, run_rs, &c, pr, 1, 1);
                ep_free(&c);
            }
    CHECK_BAD(bad, "allgather / deepep");
}
END_TEST

START_TEST(dispatch_ll_pplx_hep)
{
    int bad = 0;
    char what[200];
    static const int Ts[] = {0, 1, 13, 64};
    for (int R = 1; R <= 8; R *= 2)
        for (int ti = 0; ti < 4; ti++) {
            int E = 16, K = 4, El = E / R;
            int64_t T = Ts[ti];
            uint64_t seed = 3000 + R * 10 + ti;
            /* DeepEP low latency: every mode */
            static const int modes[4][3] = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {1, 1, 1}};
            for (int m = 0; m < 4; m++) {
                int64_t H = 512, Tm = T + 1, Ta = R * Tm, S = modes[m][2] ? H / 512 : H / 128;
                ep_ctx c;
                memset(&c, 0, sizeof c);
                c.lc = (moe_deepep_ll_config){R, E, Tm, modes[m][0], modes[m][1], modes[m][2]};
                moe_dtype xd = m == 1 ? MOE_F32 : MOE_BF16;
                c.x = mk(xd, 3, R, T, H, 0);
                fill(&c.x, seed + m, 2.0f);
                specials(&c.x, seed + m, 211);
                c.ids = mk(MOE_I32, 3, R, T, K, 0);
                ids_fill(&c.ids, R * T, K, E, seed + 10 + m, 15, 1);
                c.w = mk(MOE_F32, 3, R, T, K, 0);
                weights_fill(&c.w, seed + 20 + m);
                proto pl[5] = {PR(modes[m][0] ? MOE_E4M3 : xd, 4, R, El, Ta, H),
                               PR(modes[m][2] ? MOE_I32 : MOE_F32, 4, R, El, Ta, S), PR(MOE_I32, 2, R, El, 0, 0),
                               PR(MOE_I32, 3, R, El, Ta, 0), PR(MOE_I64, 3, R, El, R, 0)};
                snprintf(what, sizeof what, "ll_dispatch R=%d T=%lld mode %d", R, (long long)T, m);
                bad += compare(what, run_lld, &c, pl, 5, 1);
                moe_tensor lo[5];
                alloc_outs(pl, 5, lo);
                moe_deepep_ll_recv rv = {&lo[0], modes[m][0] ? &lo[1] : NULL, &lo[2], &lo[3], &lo[4]};
                ck_assert_int_eq(moe_ref_deepep_ll_dispatch(&c.lc, &c.x, &c.ids, &rv), MOE_OK);
                moe_dtype yd = m & 1 ? MOE_F32 : MOE_BF16;
                c.a = mk(yd, 4, R, El, Ta, 64);
                fill(&c.a, seed + 30 + m, 1.0f);
                specials(&c.a, seed, 97);
                c.b = lo[3], c.c = lo[4];
                proto pc[1] = {PR(yd, 3, R, T, 64, 0)};
                snprintf(what, sizeof what, "ll_combine R=%d T=%lld mode %d", R, (long long)T, m);
                bad += compare(what, run_llc, &c, pc, 1, 1);
                if (T > 0 && ((int32_t *)lo[2].data)[0] > 0) { /* a token index out of range: refused */
                    ((int32_t *)lo[3].data)[0] = (int32_t)T;
                    bad += compare("ll_combine bad handle", run_llc, &c, pc, 1, 0);
                }
                c.b = (moe_tensor){0}, c.c = (moe_tensor){0};
                freeall(lo, 5);
                ep_free(&c);
            }
            /* pplx */
            for (int dp = 1; dp <= R && dp <= 2; dp *= 2) {
                int num_dp = R / dp, S = 3;
                int64_t H = 48, Tmax = T + 2;
                ep_ctx c;
                memset(&c, 0, sizeof c);
                c.pc = (moe_pplx_config){R, dp, E, Tmax};
                int64_t rows = moe_pplx_rows(&c.pc);
                c.with_scales = dp == 1;
                c.x = mk(MOE_BF16, 3, num_dp, T, H, 0);
                fill(&c.x, seed + 40, 1.0f);
                c.xs = mk(MOE_F32, 3, num_dp, T, S, 0);
                fill(&c.xs, seed + 41, 1.0f);
                c.ids = mk(MOE_I32, 3, num_dp, T, K, 0);
                ids_fill(&c.ids, num_dp * T, K, E, seed + 42, 0, 1);
                c.w = mk(MOE_F32, 3, num_dp, T, K, 0);
                weights_fill(&c.w, seed + 43);
                proto pp[4] = {PR(MOE_BF16, 4, R, El, rows, H), PR(MOE_F32, 4, R, El, rows, S), PR(MOE_I32, 2, R, El, 0, 0),
                               PR(MOE_I32, 3, R, El, rows, 0)};
                snprintf(what, sizeof what, "pplx_dispatch R=%d dp=%d T=%lld", R, dp, (long long)T);
                bad += compare(what, run_ppd, &c, pp, 4, 1);
                moe_tensor lo[4];
                alloc_outs(pp, 4, lo);
                moe_pplx_recv rv = {&lo[0], c.with_scales ? &lo[1] : NULL, &lo[2], &lo[3]};
                ck_assert_int_eq(moe_ref_pplx_dispatch(&c.pc, &c.x, c.with_scales ? &c.xs : NULL, &c.ids, &rv), MOE_OK);
                moe_dtype yd = dp == 1 ? MOE_F16 : MOE_BF16;
                c.a = mk(yd, 4, R, El, rows, H);
                fill(&c.a, seed + 44, 1.0f);
                specials(&c.a, seed, 53);
                c.b = lo[2], c.c = lo[3];
                for (int od = 0; od < 3; od++) {
                    static const moe_dtype ods[] = {MOE_BF16, MOE_F16, MOE_F32};
                    proto pc[1] = {PR(ods[od], 3, num_dp, T, H, 0)};
                    snprintf(what, sizeof what, "pplx_combine R=%d dp=%d T=%lld out %d", R, dp, (long long)T, od);
                    bad += compare(what, run_ppc, &c, pc, 1, 1);
                }
                if (T > 0) { /* a count past the rows: refused */
                    ((int32_t *)lo[2].data)[0] = (int32_t)rows + 1;
                    bad += compare("pplx_combine bad handle", run_ppc, &c, (proto[1]){PR(MOE_BF16, 3, num_dp, T, H, 0)}, 1, 0);
                }
                c.b = (moe_tensor){0}, c.c = (moe_tensor){0};
                freeall(lo, 4);
                ep_free(&c);
            }
            /* Hybrid-EP: blocking (exact and roomy) and non-blocking with drops */
            for (int v = 0; v < 6; v++) {
                int rpn = v & 1 ? (R > 1 ? R / 2 : 1) : R, pad = v < 2 ? 1 : v < 4 ? 16 : 8, S = 2;
                int64_t H = 24;
                ep_ctx c;
                memset(&c, 0, sizeof c);
                c.hc = (moe_hep_config){R, E, rpn, pad, v >= 4, 0};
                c.with_scales = v != 2, c.with_opt = v != 3;
                c.x = mk(v == 5 ? MOE_E4M3 : MOE_BF16, 3, R, T, H, 0);
                fill(&c.x, seed + 50 + v, 1.0f);
                c.xs = mk(MOE_F32, 3, R, T, S, 0);
                fill(&c.xs, seed + 51, 1.0f);
                c.ids = mk(MOE_I32, 3, R, T, K, 0);
                ids_fill(&c.ids, R * T, K, E, seed + 52 + v, 0, 1);
                c.w = mk(MOE_F32, 3, R, T, K, 0);
                weights_fill(&c.w, seed + 53);
                int64_t N;
                c.hc.non_blocking = 0;
                ck_assert_int_eq(moe_hep_permute_capacity(&c.hc, &c.ids, &N), MOE_OK);
                c.hc.non_blocking = v >= 4;
                if (v >= 4) N = (N / 2 + pad - 1) / pad * pad, c.hc.num_permuted_tokens = N; /* drops */
                else if (v & 1) N += 5;
                proto ph[8] = {PR(c.x.dtype, 3, R, N, H, 0), PR(MOE_F32, 2, R, N, 0, 0), PR(MOE_F32, 3, R, N, S, 0),
                               PR(MOE_I32, 2, R, El, 0, 0), PR(MOE_I64, 2, R, El, 0, 0), PR(MOE_I32, 3, R, R * T, El, 0),
                               PR(MOE_I32, 1, R, 0, 0, 0), PR(MOE_I32, 1, R, 0, 0, 0)};
                snprintf(what, sizeof what, "hep_dispatch R=%d T=%lld v%d", R, (long long)T, v);
                bad += compare(what, run_hd, &c, ph, 8, 1);
                if (v < 4 && N > 0) { /* blocking with too few rows: refused */
                    proto short_[8];
                    memcpy(short_, ph, sizeof ph);
                    short_[0].shape[1] = short_[1].shape[1] = short_[2].shape[1] = N - 1 - (v & 1 ? 5 : 0);
                    if (short_[0].shape[1] >= 0) bad += compare("hep_dispatch short", run_hd, &c, short_, 8, 0);
                }
                moe_tensor lo[8];
                alloc_outs(ph, 8, lo);
                moe_hep_permuted hp = {&lo[0], &lo[1], &lo[2], &lo[3], &lo[4], &lo[5], &lo[6], &lo[7]};
                ck_assert_int_eq(moe_ref_hep_dispatch_with_permute(&c.hc, &c.x, &c.xs, &c.ids, &c.w, &hp), MOE_OK);
                moe_dtype yd = v & 1 ? MOE_F32 : MOE_BF16;
                c.a = mk(yd, 3, R, N, H, 0);
                fill(&c.a, seed + 54, 1.0f);
                specials(&c.a, seed, 41);
                c.b = lo[5], c.c = lo[1];
                proto pc[2] = {PR(yd, 3, R, T, H, 0), PR(MOE_F32, 3, R, T, E, 0)};
                snprintf(what, sizeof what, "hep_combine R=%d T=%lld v%d", R, (long long)T, v);
                bad += compare(what, run_hc, &c, pc, 2, 1);
                c.b = (moe_tensor){0}, c.c = (moe_tensor){0};
                freeall(lo, 8);
                ep_free(&c);
            }
        }
    CHECK_BAD(bad, "ll / pplx / hep");
}
END_TEST

/* ---- bad input: the reference's status and message ---------------------------------------- */

static int err_differs(const char *stage, int line, moe_status a, const char *ma, moe_status b)
{
    const char *mb = moe_last_error();
    if (a != MOE_OK && a == b && strcmp(ma, mb) == 0) return 0;
    if (verbose_left-- > 0)
        fprintf(stderr, "bad input %s (line %d): ref %s '%s', cpu %s '%s'\n", stage, line, moe_status_str(a), ma,
                moe_status_str(b), mb);
    return 1;
}

#define SAME_ERR(stage, ...)                                                                        \
    do {                                                                                            \
        moe_clear_error();                                                                          \
        moe_status a_ = moe_ref_##stage(__VA_ARGS__);                                               \
        char m_[512];                                                                               \
        snprintf(m_, sizeof m_, "%s", moe_last_error());                                            \
        moe_clear_error();                                                                          \
        moe_status b_ = moe_cpu_##stage(__VA_ARGS__);                                               \
        bad += err_differs(#stage, __LINE__, a_, m_, b_);                                           \
        ncases++;                                                                                   \
    } while (0)

START_TEST(bad_inputs)
{
    int bad = 0, ncases = 0;
    int64_t T = 6;
    int k = 2, E = 8;
    moe_tensor logits = mk(MOE_F32, 2, T, E, 0, 0), ids = mk(MOE_I32, 2, T, k, 0, 0), w = mk(MOE_F32, 2, T, k, 0, 0);
    moe_tensor ids3 = mk(MOE_I32, 3, 1, T, k, 0), f32_1 = mk(MOE_F32, 1, 4, 0, 0, 0), i64 = mk(MOE_I64, 1, 9, 0, 0, 0);
    fill(&logits, 1, 1.0f);
    ids_fill(&ids, T, k, E, 2, 0, 1);
    weights_fill(&w, 3);
    moe_tensor big = mk(MOE_I32, 1, 4096, 0, 0, 0), big2 = mk(MOE_I32, 1, 4096, 0, 0, 0), two = mk(MOE_I32, 1, 2, 0, 0, 0);
    moe_tensor bigf = mk(MOE_F32, 1, 4096, 0, 0, 0), one = mk(MOE_I32, 1, 1, 0, 0, 0);
    moe_tensor x = mk(MOE_BF16, 2, T, 16, 0, 0), xo = mk(MOE_BF16, 2, T * k, 16, 0, 0), xf = mk(MOE_F32, 2, T, 16, 0, 0);
    fill(&x, 4, 1.0f);
    fill(&xf, 5, 1.0f);

    /* routing: NULL, dtype, rank, topk > E, method, llama4 topk, scaling, groups, bias, output shape */
    moe_route_params rp = {MOE_ROUTE_SOFTMAX_TOPK, k, 1, MOE_SCORE_SOFTMAX, 0, 0, 1.0f, NULL};
    SAME_ERR(route, NULL, &rp, &ids, &w);
    SAME_ERR(route, &ids, &rp, &ids, &w);
    SAME_ERR(route, &f32_1, &rp, &ids, &w);
    SAME_ERR(route, &logits, NULL, &ids, &w);
    rp.topk = E + 1;
    SAME_ERR(route, &logits, &rp, &ids, &w);
    rp.topk = k, rp.method = MOE_ROUTE_COUNT;
    SAME_ERR(route, &logits, &rp, &ids, &w);
    rp.method = MOE_ROUTE_LLAMA4_TOP1;
    SAME_ERR(route, &logits, &rp, &ids, &w);
    rp.method = MOE_ROUTE_SOFTMAX_TOPK, rp.routed_scaling_factor = NAN;
    SAME_ERR(route, &logits, &rp, &ids, &w);
    rp.routed_scaling_factor = 1.0f, rp.method = MOE_ROUTE_GROUPED_TOPK, rp.num_expert_group = 3, rp.topk_group = 1;
    SAME_ERR(route, &logits, &rp, &ids, &w);
    rp.num_expert_group = 4, rp.topk_group = 5;
    SAME_ERR(route, &logits, &rp, &ids, &w);
    rp.method = MOE_ROUTE_SOFTMAX_TOPK, rp.correction_bias = &f32_1;
    SAME_ERR(route, &logits, &rp, &ids, &w);
    rp.correction_bias = NULL;
    SAME_ERR(route, &logits, &rp, &w, &w);
    SAME_ERR(route, &logits, &rp, &ids3, &w);

    /* align: ids out of range, params, map, output sizes */
    moe_align_params ap = {16, E, NULL, MOE_ALIGN_MAP_KEEP_NONLOCAL, 0};
    SAME_ERR(align_block_size, NULL, &ap, &big, &big2, &one);
    SAME_ERR(align_block_size, &w, &ap, &big, &big2, &one);
    SAME_ERR(align_block_size, &ids, NULL, &big, &big2, &one);
    ap.block_size = 0;
    SAME_ERR(align_block_size, &ids, &ap, &big, &big2, &one);
    ap.block_size = 16, ap.num_experts = 1; /* ids out of range */
    SAME_ERR(align_block_size, &ids, &ap, &big, &big2, &one);
    ap.num_experts = E, ap.expert_map = &two;
    SAME_ERR(align_block_size, &ids, &ap, &big, &big2, &one);
    ap.expert_map = NULL, ap.map_mode = (moe_align_map_mode)7;
    SAME_ERR(align_block_size, &ids, &ap, &big, &big2, &one);
    ap.map_mode = MOE_ALIGN_MAP_KEEP_NONLOCAL;
    SAME_ERR(align_block_size, &ids, &ap, &two, &big2, &one);
    SAME_ERR(align_block_size, &ids, &ap, &big, &bigf, &one);
    SAME_ERR(align_batched, &two, 0, 4, &big, &big2, &one);
    SAME_ERR(align_batched, &two, 4, 0, &big, &big2, &one);
    ((int32_t *)two.data)[1] = 9;
    SAME_ERR(align_batched, &two, 4, 4, &big, &big2, &one);
    ((int32_t *)two.data)[1] = 0;
    SAME_ERR(align_batched, &two, 4, 4, &one, &big2, &one);
    SAME_ERR(align_batched, NULL, 4, 4, &big, &big2, &one);

    /* CK sorting: duplicates, ids out of range, topk > E, sizes, masks, modes */
    moe_sort_ck_params sp = {E, 4, MOE_SORT_CK_MOCK_ID, MOE_SORT_CK_SKIP_EMPTY, NULL};
    ((int32_t *)ids.data)[3] = ((int32_t *)ids.data)[2]; /* row 1 picks an expert twice */
    SAME_ERR(sort_ck, &ids, &w, &sp, &big, &bigf, &big2, &two);
    ((int32_t *)ids.data)[3] = -1;
    SAME_ERR(sort_ck, &ids, &w, &sp, &big, &bigf, &big2, &two);
    ((int32_t *)ids.data)[3] = E;
    SAME_ERR(sort_ck, &ids, &w, &sp, &big, &bigf, &big2, &two);
    ids_fill(&ids, T, k, E, 2, 0, 1);
    sp.num_experts = 1;
    SAME_ERR(sort_ck, &ids, &w, &sp, &big, &bigf, &big2, &two);
    sp.num_experts = E, sp.unit_size = 0;
    SAME_ERR(sort_ck, &ids, &w, &sp, &big, &bigf, &big2, &two);
    sp.unit_size = 4, sp.id_mode = (moe_sort_ck_id_mode)5;
    SAME_ERR(sort_ck, &ids, &w, &sp, &big, &bigf, &big2, &two);
    sp.id_mode = MOE_SORT_CK_MOCK_ID, sp.local_expert_mask = &two;
    SAME_ERR(sort_ck, &ids, &w, &sp, &big, &bigf, &big2, &two);
    sp.local_expert_mask = NULL;
    SAME_ERR(sort_ck, &ids, &w, &sp, &two, &bigf, &big2, &two);   /* too short for this input */
    SAME_ERR(sort_ck, &ids, &w, &sp, &big, &bigf, &one, &two);    /* tiles too short */
    SAME_ERR(sort_ck, &ids, &w, &sp, &big, &big, &big2, &two);    /* weights dtype */
    SAME_ERR(sort_ck, &ids, &w, &sp, &big, &bigf, &big2, &one);   /* ntpp [2] */
    SAME_ERR(sort_ck, &ids, &ids, &sp, &big, &bigf, &big2, &two);
    SAME_ERR(sort_ck, &ids, &w, NULL, &big, &bigf, &big2, &two);

    /* TensorRT-LLM maps */
    moe_maps_trtllm_params mp = {MOE_MAPS_TRTLLM_FUSED_SINGLE_BLOCK, E, 0, E};
    moe_tensor m12 = mk(MOE_I32, 1, T * k, 0, 0, 0), m12b = mk(MOE_I32, 1, T * k, 0, 0, 0);
    SAME_ERR(maps_trtllm, &ids, &mp, &m12, &m12b, &two, NULL);
    mp.start_expert = 2;
    SAME_ERR(maps_trtllm, &ids, &mp, &m12, &m12b, &i64, NULL);
    mp.start_expert = 0, mp.num_experts = 1;
    SAME_ERR(maps_trtllm, &ids, &mp, &m12, &m12b, &i64, NULL);
    mp.num_experts = E, mp.variant = (moe_maps_trtllm_variant)4;
    SAME_ERR(maps_trtllm, &ids, &mp, &m12, &m12b, &i64, NULL);
    mp.variant = MOE_MAPS_TRTLLM_THREE_STEP;
    SAME_ERR(maps_trtllm, &ids, &mp, &m12, &two, &i64, NULL);
    SAME_ERR(maps_trtllm, &ids, &mp, &m12, &m12b, &i64, &two);
    SAME_ERR(maps_trtllm, &w, &mp, &m12, &m12b, &i64, NULL);

    /* quantize / dequantize: K not a multiple of the group, rank, dtype, static scales, scale shapes */
    moe_quant_spec g128, tens, nv;
    moe_scheme_spec(MOE_SCHEME_FP8_WBLOCK128_AGROUP128, MOE_OPERAND_ACT, &g128);
    moe_scheme_spec(MOE_SCHEME_FP8_WTENSOR_ATENSOR, MOE_OPERAND_ACT, &tens);
    moe_scheme_spec(MOE_SCHEME_NVFP4, MOE_OPERAND_ACT, &nv);
    moe_tensor qx = mk(MOE_F32, 2, 3, 200, 0, 0), qq = mk(MOE_E4M3, 2, 3, 200, 0, 0), qs = mk(MOE_F32, 2, 3, 2, 0, 0);
    moe_tensor qx3 = mk(MOE_F32, 3, 1, 3, 256, 0), qx2 = mk(MOE_F32, 2, 3, 256, 0, 0), qq2 = mk(MOE_E4M3, 2, 3, 256, 0, 0);
    moe_tensor qs2 = mk(MOE_F32, 2, 3, 2, 0, 0), ts = mk(MOE_F32, 2, 1, 1, 0, 0), neg = mk(MOE_F32, 2, 1, 1, 0, 0);
    ((float *)neg.data)[0] = -1.0f;
    SAME_ERR(quantize, &g128, &qx, NULL, &qq, &qs, NULL);                /* K % 128 */
    SAME_ERR(quantize, &g128, &qx3, NULL, &qq2, &qs2, NULL);             /* rank */
    SAME_ERR(quantize, &g128, &qq2, NULL, &qq2, &qs2, NULL);             /* x dtype */
    SAME_ERR(quantize, NULL, &qx2, NULL, &qq2, &qs2, NULL);
    SAME_ERR(quantize, &g128, &qx2, NULL, &qx2, &qs2, NULL);             /* q dtype */
    SAME_ERR(quantize, &g128, &qx2, NULL, &qq2, NULL, NULL);             /* scale missing */
    SAME_ERR(quantize, &g128, &qx2, NULL, &qq2, &qs2, &ts);              /* global for a non-NVFP4 spec */
    SAME_ERR(quantize, &tens, &qx2, &neg, &qq2, &ts, NULL);              /* static scale <= 0 */
    SAME_ERR(quantize, &tens, &qx2, &qs2, &qq2, &ts, NULL);              /* static scale shape */
    SAME_ERR(quantize, &nv, &qx2, NULL, &qq2, &qs2, NULL);               /* NVFP4 q dtype */
    g128.group_k = 0;
    SAME_ERR(quantize, &g128, &qx2, NULL, &qq2, &qs2, NULL);             /* spec */
    g128.group_k = 128;
    SAME_ERR(dequantize, &g128, &qq, &qs, NULL, &qx);
    SAME_ERR(dequantize, &g128, &qq2, NULL, NULL, &qx2);
    SAME_ERR(dequantize, &g128, &qq2, &qs2, NULL, &qq2);
    SAME_ERR(dequantize, &g128, NULL, &qs2, NULL, &qx2);
    SAME_ERR(dequantize, &nv, &qq2, &qs2, NULL, &qx2);

    /* permutation: NULL, dtype, index ranges, shapes, overflow */
    moe_tensor src = mk(MOE_I32, 1, T * k, 0, 0, 0);
    for (int i = 0; i < T * k; i++) ((int32_t *)src.data)[i] = i % 8 - 1;
    SAME_ERR(permute_rows, &x, &src, &xo);                               /* src 6 >= T */
    SAME_ERR(permute_rows, NULL, &src, &xo);
    SAME_ERR(permute_rows, &x, &src, &x);                                /* src length */
    SAME_ERR(permute_rows, &xf, &m12, &xo);                              /* dtype differs */
    for (int i = 0; i < T * k; i++) ((int32_t *)src.data)[i] = i % 3;
    SAME_ERR(unpermute_rows, &xo, &src, &x);                             /* a row named twice */
    ((int32_t *)src.data)[0] = -2;
    SAME_ERR(unpermute_rows, &xo, &src, &x);
    SAME_ERR(unpermute_rows, &xo, &two, &x);
    ((int32_t *)src.data)[0] = (int32_t)(T * k);
    SAME_ERR(expand_trtllm, &x, &src, k, &w, &xo, NULL);                 /* map >= T*k */
    ((int32_t *)src.data)[0] = 0;
    SAME_ERR(expand_trtllm, &x, &src, 0, &w, &xo, NULL);
    SAME_ERR(expand_trtllm, &x, &src, k + 1, &w, &xo, NULL);             /* weights shape */
    SAME_ERR(expand_trtllm, &x, &src, k, &w, &xo, &two);
    moe_tensor bo = mk(MOE_BF16, 3, 4, 2, 16, 0), bc = mk(MOE_I32, 1, 4, 0, 0, 0), bo2 = mk(MOE_BF16, 3, 4, 2, 15, 0);
    SAME_ERR(batched_scatter, &x, &ids, -1, &bo, &bc);
    SAME_ERR(batched_scatter, &x, &ids, 0, &bo2, &bc);
    SAME_ERR(batched_scatter, &x, &ids, 0, &bo, &two);
    SAME_ERR(batched_scatter, &x, &w, 0, &bo, &bc);
    ((int32_t *)ids.data)[0] = -3;
    SAME_ERR(batched_scatter, &x, &ids, 0, &bo, &bc);
    SAME_ERR(permute_grouped, &x, &ids, 0, 4, &xo, &big, &bc, &two);
    ids_fill(&ids, T, k, E, 2, 0, 1);
    SAME_ERR(permute_grouped, &x, &ids, 0, 0, &xo, &big, &bc, &two);
    SAME_ERR(permute_grouped, &x, &ids, 0, 4, &xo, &big, &bc, &two);     /* out rows < capacity */
    SAME_ERR(permute_grouped, &x, &ids, 0, 1, &xo, &m12, &bc, &two);     /* offsets [L+1] */
    SAME_ERR(permute_grouped, &x, &ids, 0, 1, &xo, &m12, NULL, &two);

    /* activation */
    moe_act_params acp = moe_act_defaults(MOE_ACT_SILU, MOE_LAYOUT_GATE_UP);
    moe_tensor ax = mk(MOE_BF16, 2, T, 32, 0, 0), ao = mk(MOE_BF16, 2, T, 16, 0, 0), re = mk(MOE_I32, 1, T, 0, 0, 0);
    SAME_ERR(activation, &ax, NULL, &acp, &ax);                          /* out not [P, I] */
    SAME_ERR(activation, &ids, NULL, &acp, &ao);
    SAME_ERR(activation, &ax, NULL, NULL, &ao);
    acp.act = MOE_ACT_COUNT;
    SAME_ERR(activation, &ax, NULL, &acp, &ao);
    acp.act = MOE_ACT_SWIGLUOAI, acp.limit = -1.0f;
    SAME_ERR(activation, &ax, NULL, &acp, &ao);
    acp.limit = 7.0f, acp.layout = MOE_LAYOUT_COUNT;
    SAME_ERR(activation, &ax, NULL, &acp, &ao);
    acp = moe_act_defaults(MOE_ACT_SWIGLU_BIAS, MOE_LAYOUT_UP_GATE);
    acp.swiglu_alpha = &f32_1;
    ((int32_t *)re.data)[2] = 4; /* no alpha for expert 4 */
    SAME_ERR(activation, &ax, &re, &acp, &ao);
    ((int32_t *)re.data)[2] = -2;
    SAME_ERR(activation, &ax, &re, &acp, &ao);
    SAME_ERR(activation, &ax, &two, &acp, &ao);
    acp.swiglu_alpha = &ids;
    SAME_ERR(activation, &ax, NULL, &acp, &ao);

    /* weight and reduce */
    moe_tensor ro = mk(MOE_BF16, 2, T, 16, 0, 0), fused3 = mk(MOE_BF16, 3, 4, 2, 16, 0), rmap = mk(MOE_I32, 1, T * k, 0, 0, 0);
    SAME_ERR(war_contiguous, &xo, &w, 0, (moe_sum_variant)9, &ro);
    SAME_ERR(war_contiguous, &x, &w, 0, MOE_SUM_AUTO, &ro);              /* fused shape */
    SAME_ERR(war_contiguous, &xo, NULL, 0, MOE_SUM_AUTO, &ro);
    SAME_ERR(war_contiguous, &xo, &ids, 0, MOE_SUM_AUTO, &ro);
    SAME_ERR(war_contiguous, &ids, &w, 0, MOE_SUM_AUTO, &ro);
    SAME_ERR(war_noop, &xo, &ro);
    SAME_ERR(war_noop, NULL, &ro);
    SAME_ERR(war_noop, &x, &ids);
    SAME_ERR(war_naive_batched, &fused3, &ids, &w, -1, 0, &ro);
    SAME_ERR(war_naive_batched, &fused3, &ids, NULL, 0, 0, &ro);
    SAME_ERR(war_naive_batched, &fused3, &ids, &w, 0, 0, &xo);
    SAME_ERR(war_naive_batched, &x, &ids, &w, 0, 0, &ro);
    for (int t = 0; t < T; t++) ((int32_t *)ids.data)[t * k] = 0, ((int32_t *)ids.data)[t * k + 1] = 1;
    SAME_ERR(war_naive_batched, &fused3, &ids, &w, 0, 0, &ro);           /* expert 0 past max_tokens 2 */
    SAME_ERR(batched_scatter, &x, &ids, 0, &bo, &bc);                    /* the same for the scatter */
    ids_fill(&ids, T, k, E, 2, 0, 1);
    for (int i = 0; i < T * k; i++) ((int32_t *)rmap.data)[i] = i;
    SAME_ERR(finalize_trtllm, &x, &rmap, &ids, &w, NULL, 0, E, &ro);     /* rows of y < map entries */
    SAME_ERR(finalize_trtllm, &xo, &two, &ids, &w, NULL, 0, E, &ro);
    SAME_ERR(finalize_trtllm, &xo, &rmap, &ids, &w, NULL, -1, E, &ro);
    SAME_ERR(finalize_trtllm, &xo, &rmap, &ids, &w, NULL, 0, 0, &ro);
    SAME_ERR(finalize_trtllm, &xo, &rmap, &ids, &w, &xf, 0, E, &ro);     /* bias shape */
    SAME_ERR(finalize_trtllm, &xo, &rmap, &ids, &ids, NULL, 0, E, &ro);
    SAME_ERR(finalize_trtllm, &xo, &rmap, &ids, &w, NULL, 0, E, &xo);

    /* dispatch / combine: world, ids, shapes, handles */
    int R = 2;
    int64_t Tr = 3;
    moe_tensor ex = mk(MOE_BF16, 3, R, Tr, 128, 0), eids = mk(MOE_I32, 3, R, Tr, k, 0), ew = mk(MOE_F32, 3, R, Tr, k, 0);
    fill(&ex, 7, 1.0f);
    ids_fill(&eids, R * Tr, k, E, 8, 0, 1);
    weights_fill(&ew, 9);
    moe_tensor gx = mk(MOE_BF16, 2, R * Tr, 128, 0, 0), gi = mk(MOE_I32, 2, R * Tr, k, 0, 0), gw = mk(MOE_F32, 2, R * Tr, k, 0, 0);
    SAME_ERR(ep_allgather_dispatch, 3, E, &ex, NULL, &eids, &ew, &gx, NULL, &gi, &gw);
    SAME_ERR(ep_allgather_dispatch, R, 7, &ex, NULL, &eids, &ew, &gx, NULL, &gi, &gw);
    SAME_ERR(ep_allgather_dispatch, R, E, &ex, NULL, &eids, &ew, &gx, &gw, &gi, &gw);
    SAME_ERR(ep_allgather_dispatch, R, E, &ex, NULL, &eids, &ew, &gi, NULL, &gi, &gw);
    ((int32_t *)eids.data)[0] = -1; /* allgather ids name experts */
    SAME_ERR(ep_allgather_dispatch, R, E, &ex, NULL, &eids, &ew, &gx, NULL, &gi, &gw);
    ((int32_t *)eids.data)[0] = E;
    SAME_ERR(ep_allgather_dispatch, R, E, &ex, NULL, &eids, &ew, &gx, NULL, &gi, &gw);
    ids_fill(&eids, R * Tr, k, E, 8, 0, 1);
    moe_tensor part = mk(MOE_BF16, 3, R, R * Tr + 1, 16, 0), rso = mk(MOE_BF16, 3, R, Tr, 16, 0);
    SAME_ERR(ep_reduce_scatter_combine, R, &part, &rso);
    SAME_ERR(ep_reduce_scatter_combine, 5, &part, &rso);
    SAME_ERR(ep_reduce_scatter_combine, R, &eids, &rso);
    moe_deepep_config dcfg = {R, E, 1, 1};
    moe_tensor pe = mk(MOE_I32, 2, R, E, 0, 0), pr = mk(MOE_I32, 2, R, R, 0, 0), inr = mk(MOE_BOOL, 3, R, Tr, R, 0);
    moe_deepep_layout lay = {&pe, &pr, NULL, &inr};
    SAME_ERR(deepep_layout, &dcfg, &eids, NULL);
    dcfg.num_ranks_per_node = 3;
    SAME_ERR(deepep_layout, &dcfg, &eids, &lay);
    dcfg.num_ranks_per_node = 1;
    lay.is_token_in_rank = &pe;
    SAME_ERR(deepep_layout, &dcfg, &eids, &lay);
    lay.is_token_in_rank = &inr;
    moe_tensor rx = mk(MOE_BF16, 3, R, 2, 128, 0), rid = mk(MOE_I32, 3, R, 2, k, 0), rw = mk(MOE_F32, 3, R, 2, k, 0);
    moe_tensor sidx = mk(MOE_I32, 2, R, 2, 0, 0), nrecv = mk(MOE_I32, 1, R, 0, 0, 0), npe = mk(MOE_I32, 2, R, E / R, 0, 0);
    moe_deepep_recv drv = {&rx, NULL, &rid, &rw, &sidx, &nrecv, &npe, NULL};
    SAME_ERR(deepep_dispatch, &dcfg, &ex, NULL, &eids, &ew, &drv);       /* 2 rows, 3 tokens may arrive */
    dcfg.expert_alignment = 0;
    SAME_ERR(deepep_dispatch, &dcfg, &ex, NULL, &eids, &ew, &drv);
    dcfg.expert_alignment = 1;
    SAME_ERR(deepep_dispatch, &dcfg, &ex, &ew, &eids, &ew, &drv);        /* scales without outputs */
    ((uint8_t *)inr.data)[0] = 1, ((uint8_t *)inr.data)[2] = 1, ((uint8_t *)inr.data)[4] = 1;
    SAME_ERR(deepep_combine, &dcfg, &rx, NULL, &inr, NULL, NULL, &ex, NULL); /* 3 rows into 2 */
    SAME_ERR(deepep_combine, &dcfg, &eids, NULL, &inr, NULL, NULL, &ex, NULL);
    SAME_ERR(deepep_combine, &dcfg, &rx, &rw, &inr, NULL, NULL, &ex, NULL);
    moe_deepep_ll_config lcfg = {R, E, Tr, 1, 0, 0};
    moe_tensor lx = mk(MOE_E4M3, 4, R, E / R, R * Tr, 128), ls = mk(MOE_F32, 4, R, E / R, R * Tr, 1);
    moe_tensor lc = mk(MOE_I32, 2, R, E / R, 0, 0), lsi = mk(MOE_I32, 3, R, E / R, R * Tr, 0), lr = mk(MOE_I64, 3, R, E / R, R, 0);
    moe_deepep_ll_recv lrv = {&lx, &ls, &lc, &lsi, &lr};
    lcfg.use_ue8m0 = 1;
    SAME_ERR(deepep_ll_dispatch, &lcfg, &ex, &eids, &lrv);
    lcfg.use_ue8m0 = 0, lcfg.max_tokens_per_rank = 2;
    SAME_ERR(deepep_ll_dispatch, &lcfg, &ex, &eids, &lrv);
    lcfg.max_tokens_per_rank = Tr;
    ((int32_t *)eids.data)[1] = ((int32_t *)eids.data)[0];
    SAME_ERR(deepep_ll_dispatch, &lcfg, &ex, &eids, &lrv);               /* duplicate in a row */
    ids_fill(&eids, R * Tr, k, E, 8, 0, 1);
    SAME_ERR(deepep_ll_dispatch, &lcfg, &xf, &eids, &lrv);
    moe_tensor ly = mk(MOE_BF16, 4, R, E / R, R * Tr, 64), lo_ = mk(MOE_BF16, 3, R, Tr, 64, 0);
    lcfg.use_fp8 = 0;
    SAME_ERR(deepep_ll_combine, &lcfg, &ly, &lsi, &lr, &eids, &ew, &lo_);  /* empty handle: rows missing */
    ((int64_t *)lr.data)[0] = (int64_t)5 << 32 | 9;
    SAME_ERR(deepep_ll_combine, &lcfg, &ly, &lsi, &lr, &eids, &ew, &lo_);  /* range outside */
    SAME_ERR(deepep_ll_combine, &lcfg, &lx, &lsi, &lr, &eids, &ew, &lo_);
    moe_pplx_config pcfg = {R, 1, E, Tr};
    moe_tensor px = mk(MOE_BF16, 4, R, E / R, R * Tr, 128), pn = mk(MOE_I32, 2, R, E / R, 0, 0), psrc = mk(MOE_I32, 3, R, E / R, R * Tr, 0);
    moe_pplx_recv prv = {&px, NULL, &pn, &psrc};
    ((int32_t *)eids.data)[0] = -1;
    SAME_ERR(pplx_dispatch, &pcfg, &ex, NULL, &eids, &prv);              /* pplx has no -1 */
    ids_fill(&eids, R * Tr, k, E, 8, 0, 1);
    pcfg.dp_size = 3;
    SAME_ERR(pplx_dispatch, &pcfg, &ex, NULL, &eids, &prv);
    pcfg.dp_size = 1, pcfg.max_num_tokens = 1;
    SAME_ERR(pplx_dispatch, &pcfg, &ex, NULL, &eids, &prv);
    pcfg.max_num_tokens = Tr;
    moe_tensor py = mk(MOE_BF16, 4, R, E / R, R * Tr, 64), po = mk(MOE_BF16, 3, R, Tr, 64, 0);
    SAME_ERR(pplx_combine, &pcfg, &py, &pn, &psrc, &eids, &ew, &po);     /* counts 0: rows missing */
    ((int32_t *)pn.data)[0] = -1;
    SAME_ERR(pplx_combine, &pcfg, &py, &pn, &psrc, &eids, &ew, &po);
    ((int32_t *)pn.data)[0] = 0;
    SAME_ERR(pplx_combine, &pcfg, &py, &pn, &psrc, &eids, &ew, &eids);
    moe_hep_config hcfg = {R, E, R, 4, 0, 0};
    moe_tensor hx = mk(MOE_BF16, 3, R, 2, 128, 0), htpe = mk(MOE_I32, 2, R, E / R, 0, 0), hppe = mk(MOE_I64, 2, R, E / R, 0, 0);
    moe_tensor hmap = mk(MOE_I32, 3, R, R * Tr, E / R, 0), hof = mk(MOE_I32, 1, R, 0, 0, 0);
    moe_hep_permuted hrv = {&hx, NULL, NULL, &htpe, &hppe, &hmap, &hof, NULL};
    SAME_ERR(hep_dispatch_with_permute, &hcfg, &ex, NULL, &eids, &ew, &hrv); /* 2 rows: too few */
    hcfg.pad_multiple = 0;
    SAME_ERR(hep_dispatch_with_permute, &hcfg, &ex, NULL, &eids, &ew, &hrv);
    hcfg.pad_multiple = 4, hcfg.non_blocking = 1, hcfg.num_permuted_tokens = 3;
    SAME_ERR(hep_dispatch_with_permute, &hcfg, &ex, NULL, &eids, &ew, &hrv);
    hcfg.non_blocking = 0;
    ((int32_t *)eids.data)[0] = -1;
    SAME_ERR(hep_dispatch_with_permute, &hcfg, &ex, NULL, &eids, &ew, &hrv);
    ids_fill(&eids, R * Tr, k, E, 8, 0, 1);
    moe_tensor hy = mk(MOE_BF16, 3, R, 2, 64, 0), hout = mk(MOE_BF16, 3, R, Tr, 64, 0);
    for (int64_t i = 0; i < moe_tensor_numel(&hmap); i++) ((int32_t *)hmap.data)[i] = -1;
    ((int32_t *)hmap.data)[0] = 1, ((int32_t *)hmap.data)[1] = 1;
    SAME_ERR(hep_combine_with_unpermute, &hcfg, &hy, &hmap, NULL, &hout, NULL); /* a row named twice */
    ((int32_t *)hmap.data)[1] = 7;
    SAME_ERR(hep_combine_with_unpermute, &hcfg, &hy, &hmap, NULL, &hout, NULL);
    ((int32_t *)hmap.data)[1] = -1;
    SAME_ERR(hep_combine_with_unpermute, &hcfg, &hy, &hmap, NULL, &hout, &ew); /* out_probs without probs */
    SAME_ERR(hep_combine_with_unpermute, &hcfg, &hx, &hmap, NULL, &hout, NULL);

    moe_tensor all[] = {logits, ids, w, ids3, f32_1, i64, big, big2, two, bigf, one, x, xo, xf, m12, m12b, qx, qq, qs,
                        qx3, qx2, qq2, qs2, ts, neg, src, bo, bc, bo2, ax, ao, re, ro, fused3, rmap, ex, eids, ew, gx,
                        gi, gw, part, rso, pe, pr, inr, rx, rid, rw, sidx, nrecv, npe, lx, ls, lc, lsi, lr, ly, lo_,
                        px, pn, psrc, py, po, hx, htpe, hppe, hmap, hof, hy, hout};
    freeall(all, (int)(sizeof all / sizeof all[0]));
    ck_assert_int_ge(ncases, 150);
    ck_assert_msg(bad == 0, "%d of %d bad-input cases differ (see stderr)", bad, ncases);
}
END_TEST

static Suite *cpu_stages_suite(void)
{
    Suite *s = suite_create("cpu_stages");
    TCase *tc = tcase_create("stages");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, table_entries);
    tcase_add_test(tc, fast_encoders);
    tcase_add_test(tc, route_random);
    tcase_add_test(tc, align_random);
    tcase_add_test(tc, sort_random);
    tcase_add_test(tc, quant_random);
    tcase_add_test(tc, permute_random);
    tcase_add_test(tc, act_random);
    tcase_add_test(tc, reduce_random);
    tcase_add_test(tc, dispatch_allgather_deepep);
    tcase_add_test(tc, dispatch_ll_pplx_hep);
    tcase_add_test(tc, bad_inputs);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    (void)argc;
    /* Thousands of tiny parallel regions: with libgomp's default wait
     * policy the idle thread spins between them, which on a busy 2-core
     * machine takes the core the test needs (minutes instead of seconds).
     * The policy is read when libgomp loads, so set it and start again.
     * No result depends on it. */
    if (!getenv("OMP_WAIT_POLICY") && setenv("OMP_WAIT_POLICY", "passive", 1) == 0) execv("/proc/self/exe", argv);
    SRunner *sr = srunner_create(cpu_stages_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
