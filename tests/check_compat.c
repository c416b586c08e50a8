/* The capability registry and the compatibility rules: each rule fires in
 * one case and stays quiet in a neighbouring one; lookups; query errors;
 * the matrix's structural / NYI counts. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "moe/compat.h"

/* Runs (pf, experts, q) and says whether rule `id` fired. */
static int fires(const char *pf, const char *ex, const moe_compat_query *q, const char *id)
{
    moe_compat_verdict v;
    const moe_pf_info *p = moe_pf_find(pf);
    const moe_experts_info *e = moe_experts_find(ex);
    ck_assert_msg(p && e, "unknown type %s / %s", pf, ex);
    ck_assert_int_eq(moe_compat_check(p, e, q, &v), MOE_OK);
    int hit = 0;
    for (int i = 0; i < v.nfail; i++) hit |= strcmp(v.fail[i]->id, id) == 0;
    ck_assert_int_eq(v.compatible, v.nfail == 0);
    ck_assert_int_eq(v.structural + v.nyi, v.nfail);
    return hit;
}

START_TEST(each_rule_fires_and_stays_quiet)
{
    moe_compat_query q = moe_compat_query_default();
    ck_assert(fires("deepep_ll", "triton_like", &q, "format-mismatch"));
    ck_assert(!fires("deepep_ll", "batched_masked", &q, "format-mismatch"));
    q.scheme = MOE_SCHEME_NVFP4;
    ck_assert(fires("pplx", "naive_batched", &q, "scheme-unsupported-pf"));
    ck_assert(fires("noep", "triton_like", &q, "scheme-unsupported-experts"));
    ck_assert(!fires("noep", "permute_grouped", &q, "scheme-unsupported-experts"));
    q.scheme = MOE_SCHEME_FP8_WBLOCK128_AGROUP128;
    ck_assert(fires("noep", "ck_fused", &q, "block-quant-unsupported"));
    ck_assert(!fires("noep", "grouped_contig", &q, "block-quant-unsupported"));
    q.scheme = MOE_SCHEME_FP8_WCHANNEL_ATENSOR;
    ck_assert(fires("noep", "triton_like", &q, "matching-quant"));
    q.scheme = MOE_SCHEME_FP8_WCHANNEL_ATOKEN;
    ck_assert(!fires("noep", "triton_like", &q, "matching-quant"));
    q.scheme = MOE_SCHEME_BF16, q.expert_map = 1;
    ck_assert(fires("batched", "batched_masked", &q, "expert-map-unsupported"));
    ck_assert(!fires("batched", "naive_batched", &q, "expert-map-unsupported"));
    q.expert_map = 0, q.chunk_size = 16;
    ck_assert(fires("noep", "permute_grouped", &q, "chunking-unsupported"));
    ck_assert(!fires("noep", "triton_like", &q, "chunking-unsupported"));
    q.chunk_size = 0, q.weight_on_input = 1;
    ck_assert(fires("noep", "ref", &q, "weight-on-input-topk"));
    q.topk = 1;
    ck_assert(!fires("noep", "ref", &q, "weight-on-input-topk"));
    ck_assert(fires("hybrid_ep", "grouped_contig", &q, "weight-on-input-unsupported"));
    ck_assert(!fires("deepep_ht", "ref", &q, "weight-on-input-unsupported"));
    q.weight_on_input = 0, q.topk = 2, q.world_size = 2;
    ck_assert(fires("noep", "ref", &q, "world-unsupported"));
    ck_assert(!fires("allgather_rs", "ref", &q, "world-unsupported"));
    q.num_experts = 6, q.world_size = 4;
    ck_assert(fires("deepep_ht", "ref", &q, "ep-experts-divisible"));
    q.world_size = 2;
    ck_assert(!fires("deepep_ht", "ref", &q, "ep-experts-divisible"));
    q.num_experts = 8, q.invalid_ids = 1;
    ck_assert(fires("pplx", "naive_batched", &q, "invalid-ids-refused"));
    ck_assert(!fires("deepep_ll", "naive_batched", &q, "invalid-ids-refused"));
    q.invalid_ids = 0, q.topk = 12, q.num_experts = 16;
    ck_assert(fires("deepep_ll", "batched_masked", &q, "topk-limit"));
    q.topk = 11;
    ck_assert(!fires("deepep_ll", "batched_masked", &q, "topk-limit"));
    q.topk = 2, q.hidden = 2880;
    ck_assert(fires("deepep_ll", "batched_masked", &q, "hidden-size-unsupported"));
    q.hidden = 7168;
    ck_assert(!fires("deepep_ll", "batched_masked", &q, "hidden-size-unsupported"));
    q.hidden = 0, q.topk = 17;
    ck_assert(fires("noep", "ref", &q, "topk-exceeds-experts"));
    q.topk = 16;
    ck_assert(!fires("noep", "ref", &q, "topk-exceeds-experts"));
}
END_TEST

START_TEST(every_rule_has_a_firing_case_above)
{
    /* the rule table and the test above must not drift apart */
    ck_assert_int_eq(moe_compat_rule_count(), 15);
    for (int i = 0; i < moe_compat_rule_count(); i++) {
        const moe_compat_rule *r = moe_compat_rule_get(i);
        ck_assert(r && r->id && r->reason && r->anchor);
        ck_assert_ptr_eq(moe_compat_rule_find(r->id), r);
    }
    ck_assert_ptr_null(moe_compat_rule_get(99));
    ck_assert_ptr_null(moe_compat_rule_find("no-such-rule"));
}
END_TEST

START_TEST(registry_lookups)
{
    static const char *pfs[] = {"noep", "batched", "allgather_rs", "deepep_ht", "deepep_ll", "pplx", "hybrid_ep"};
    static const char *exs[] = {"ref", "triton_like", "permute_grouped", "batched_masked", "grouped_contig",
                                "ck_fused", "naive_batched"};
    ck_assert_int_eq(moe_pf_count(), 7);
    ck_assert_int_eq(moe_experts_count(), 7);
    for (int i = 0; i < 7; i++) {
        ck_assert_ptr_nonnull(moe_pf_find(pfs[i]));
        ck_assert_ptr_nonnull(moe_experts_find(exs[i]));
        ck_assert_str_eq(moe_pf_get(i)->name, pfs[i]);
        ck_assert_ptr_nonnull(moe_pf_get(i)->anchor);
        ck_assert_ptr_nonnull(moe_experts_get(i)->anchor);
    }
    ck_assert_ptr_null(moe_pf_find("deepep"));
    ck_assert_ptr_null(moe_experts_find(NULL));
    ck_assert_ptr_null(moe_pf_get(7));
    ck_assert_str_eq(moe_act_format_name(MOE_FMT_GROUPED), "grouped");
    ck_assert_str_eq(moe_determinism_name(MOE_DET_BOUNDED), "bounded");
    ck_assert_int_eq(moe_pf_find("deepep_ht")->topk_id_bits, 64);
    ck_assert_int_eq(moe_experts_find("batched_masked")->war, MOE_WAR_DELEGATE);
}
END_TEST

START_TEST(query_errors)
{
    moe_compat_query q = moe_compat_query_default();
    moe_compat_verdict v;
    const moe_pf_info *p = moe_pf_find("noep");
    const moe_experts_info *e = moe_experts_find("ref");
    ck_assert_int_eq(moe_compat_check(NULL, e, &q, &v), MOE_ERR_NULL);
    q.scheme = (moe_scheme)99;
    ck_assert_int_eq(moe_compat_check(p, e, &q, &v), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "query.scheme"));
    q = moe_compat_query_default(), q.topk = 0;
    ck_assert_int_eq(moe_compat_check(p, e, &q, &v), MOE_ERR_INVALID_ARG);
    q = moe_compat_query_default(), q.world_size = 3;
    ck_assert_int_eq(moe_compat_check(p, e, &q, &v), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "world_size 3"));
    q = moe_compat_query_default(), q.hidden = -1;
    ck_assert_int_eq(moe_compat_check(p, e, &q, &v), MOE_ERR_INVALID_ARG);
}
END_TEST

/* Over the whole matrix for bf16 and block fp8, the structural and NYI
 * counts are the sums of their verdicts, and some pairs are compatible. */
START_TEST(matrix_counts)
{
    moe_compat_query q = moe_compat_query_default();
    int ok = 0, bad = 0;
    for (int s = 0; s < 2; s++) {
        q.scheme = s ? MOE_SCHEME_FP8_WBLOCK128_AGROUP128 : MOE_SCHEME_BF16;
        for (int i = 0; i < moe_pf_count(); i++)
            for (int j = 0; j < moe_experts_count(); j++) {
                moe_compat_verdict v;
                ck_assert_int_eq(moe_compat_check(moe_pf_get(i), moe_experts_get(j), &q, &v), MOE_OK);
                if (v.compatible) ok++;
                else bad++;
                if (!v.compatible) ck_assert_int_gt(v.structural + v.nyi, 0);
            }
    }
    ck_assert_int_gt(ok, 10);
    ck_assert_int_gt(bad, 10);
    ck_assert_int_eq(ok + bad, 2 * 49);
}
END_TEST

static Suite *compat_suite(void)
{
    Suite *s = suite_create("compat");
    TCase *tc = tcase_create("registry_rules");
    tcase_add_test(tc, each_rule_fires_and_stays_quiet);
    tcase_add_test(tc, every_rule_has_a_firing_case_above);
    tcase_add_test(tc, registry_lookups);
    tcase_add_test(tc, query_errors);
    tcase_add_test(tc, matrix_counts);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(compat_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
