/* The staged host view of a device backend (include/moe/staged.h), on a
 * stand-in "device": a table that declares MOE_DEVICE_CUDA, whose memory is
 * its own counted allocations (host memory underneath, so the reference's
 * stages run on it) and whose stages are the reference's. Through it the
 * quick tier passes under cuda-conform's rows (EXACT against the same pair
 * on the reference), every allocation of the "device" is freed, the
 * backend sees only its own tensors, and its errors come back unchanged. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/backends.h"
#include "moe/staged.h"
#include "moe/sweep.h"

static long n_alloc, n_free, n_foreign;
static moe_ops fake;

static moe_status fake_alloc(moe_tensor *t, moe_dtype d, int ndim, const int64_t *shape)
{
    moe_status st = moe_tensor_alloc(t, d, ndim, shape);
    if (st == MOE_OK) n_alloc++;
    return st;
}

static void fake_free(moe_tensor *t)
{
    if (t && t->owns) n_free++;
    moe_tensor_free(t);
}

/* the route entry checks that its tensors are the backend's own copies:
 * an owned allocation (a caller's view or the caller's tensor is not) */
static moe_status fake_route(const moe_tensor *l, const moe_route_params *p, moe_tensor *ids, moe_tensor *w)
{
    if (!l->owns || !ids->owns || !w->owns) n_foreign++;
    return moe_ops_ref.route(l, p, ids, w);
}

static void make_fake(void)
{
    fake = moe_ops_ref;
    fake.name = "fake-device", fake.device = MOE_DEVICE_CUDA;
    fake.alloc = fake_alloc, fake.free = fake_free, fake.route = fake_route;
    n_alloc = n_free = n_foreign = 0;
}

START_TEST(quick_tier_through_the_staged_view)
{
    make_fake();
    moe_sweep_options o = {{"ref"}, 1, &fake, "cuda-conform", NULL};
    moe_sweep_case *cs;
    int n;
    ck_assert_int_eq(moe_sweep_enumerate(MOE_TIER_QUICK, 7, &cs, &n), MOE_OK);
    long cnt[MOE_VERDICT_COUNT] = {0}, cases = 0;
    for (int i = 0; i < n; i++) {
        moe_sweep_record *r;
        int nr;
        ck_assert_int_eq(moe_sweep_run_case(&cs[i], &o, &r, &nr), MOE_OK);
        for (int j = 0; j < nr; j++) {
            cnt[r[j].verdict]++;
            if (r[j].verdict == MOE_VERDICT_FAIL || r[j].verdict == MOE_VERDICT_ERROR) {
                char name[256];
                moe_sweep_case_name(&cs[i], name, sizeof name);
                printf("  %s %s [%s]: %s\n", moe_verdict_name(r[j].verdict), name, r[j].stage, r[j].reason);
            }
        }
        moe_sweep_records_free(r, nr);
        cases++;
    }
    moe_sweep_cache_release();
    free(cs);
    printf("staged quick tier: %ld cases: %ld pass, %ld refused, %ld skipped, %ld fail, %ld error; "
           "%ld device allocations\n",
           cases, cnt[MOE_VERDICT_PASS], cnt[MOE_VERDICT_REFUSED], cnt[MOE_VERDICT_SKIPPED], cnt[MOE_VERDICT_FAIL],
           cnt[MOE_VERDICT_ERROR], n_alloc);
    ck_assert_int_eq(cnt[MOE_VERDICT_FAIL] + cnt[MOE_VERDICT_ERROR], 0);
    ck_assert_int_gt(cnt[MOE_VERDICT_PASS], 100);
    ck_assert_int_gt(n_alloc, 1000);
    ck_assert_int_eq(n_alloc, n_free);
    ck_assert_int_eq(n_foreign, 0);
}
END_TEST

static moe_status refusing_route(const moe_tensor *l, const moe_route_params *p, moe_tensor *ids, moe_tensor *w)
{
    (void)l, (void)p, (void)ids, (void)w;
    return moe_fail(MOE_ERR_UNSUPPORTED, "route: the stand-in refuses");
}

START_TEST(errors_and_activation)
{
    make_fake();
    moe_staged s, s2;
    const moe_ops *h;
    ck_assert_int_eq(moe_backend_host_begin(&fake, &s, &h), MOE_OK);
    ck_assert_ptr_eq(h, &s.ops);
    ck_assert_int_eq(h->device, MOE_DEVICE_HOST);
    ck_assert_str_eq(h->name, "fake-device");
    ck_assert_int_eq(moe_staged_begin(&fake, &s2), MOE_ERR_INVALID_ARG); /* one per thread */
    /* a call: host in, host out, equal to the reference */
    moe_tensor lg, i1, w1, i2, w2;
    ck_assert_int_eq(moe_tensor_alloc(&lg, MOE_F32, 2, (int64_t[2]){5, 8}), MOE_OK);
    for (int i = 0; i < 40; i++) ((float *)lg.data)[i] = (float)((i * 7) % 11) - 5.0f;
    moe_route_params p = {0};
    p.method = MOE_ROUTE_SOFTMAX_TOPK, p.topk = 2, p.renormalize = 1, p.routed_scaling_factor = 1.0f;
    ck_assert_int_eq(moe_tensor_alloc(&i1, MOE_I32, 2, (int64_t[2]){5, 2}), MOE_OK);
    ck_assert_int_eq(moe_tensor_alloc(&w1, MOE_F32, 2, (int64_t[2]){5, 2}), MOE_OK);
    ck_assert_int_eq(moe_tensor_alloc(&i2, MOE_I32, 2, (int64_t[2]){5, 2}), MOE_OK);
    ck_assert_int_eq(moe_tensor_alloc(&w2, MOE_F32, 2, (int64_t[2]){5, 2}), MOE_OK);
    ck_assert_int_eq(h->route(&lg, &p, &i1, &w1), MOE_OK);
    ck_assert_int_eq(moe_ops_ref.route(&lg, &p, &i2, &w2), MOE_OK);
    ck_assert_mem_eq(i1.data, i2.data, i1.nbytes);
    ck_assert_mem_eq(w1.data, w2.data, w1.nbytes);
    ck_assert_int_eq(n_foreign, 0);
    /* the backend's error and message come back unchanged */
    fake.route = refusing_route;
    ck_assert_int_eq(h->route(&lg, &p, &i1, &w1), MOE_ERR_UNSUPPORTED);
    ck_assert_str_eq(moe_last_error(), "route: the stand-in refuses");
    ck_assert_int_eq(n_alloc, n_free);
    moe_backend_host_end(&s);
    /* no active view: the entries refuse without calling anything */
    ck_assert_int_eq(s.ops.route(&lg, &p, &i1, &w1), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "no staged backend"));
    /* bad arguments: named, nothing begun */
    ck_assert_int_eq(moe_staged_begin(&fake, NULL), MOE_ERR_NULL);
    ck_assert_int_eq(moe_staged_begin(NULL, &s2), MOE_ERR_NULL);
    ck_assert_int_eq(moe_backend_host_begin(&fake, NULL, &h), MOE_ERR_NULL);
    ck_assert_int_eq(moe_backend_host_begin(&fake, &s, NULL), MOE_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "host_ops"));
    moe_ops old = fake;
    old.abi_version = 0;
    ck_assert_int_eq(moe_backend_host_begin(&old, &s, &h), MOE_ERR_UNSUPPORTED);
    ck_assert_ptr_null(h);
    ck_assert_int_eq(s.ops.route(&lg, &p, &i1, &w1), MOE_ERR_INVALID_ARG); /* still none active */
    /* a host backend needs no view */
    ck_assert_int_eq(moe_backend_host_begin(&moe_ops_ref, &s, &h), MOE_OK);
    ck_assert_ptr_eq(h, &moe_ops_ref);
    moe_backend_host_end(&s);
    moe_tensor_free(&lg), moe_tensor_free(&i1), moe_tensor_free(&w1), moe_tensor_free(&i2), moe_tensor_free(&w2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("staged");
    TCase *tc = tcase_create("staged");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, errors_and_activation);
    tcase_add_test(tc, quick_tier_through_the_staged_view);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
