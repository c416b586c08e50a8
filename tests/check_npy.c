/* Tensors and .npy I/O: checked constructors, round trips for every dtype,
 * the malformed-file corpus (tests/fuzz/npy/), sidecars, numpy interop. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "moe/npy.h"
#include "moe/tensor.h"

static char tmpdir[256];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/moe_npy_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void path_in_tmp(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", tmpdir, name);
}

START_TEST(tensor_layout_and_errors)
{
    moe_tensor t;
    int64_t s2[2] = {3, 5};
    ck_assert_int_eq(moe_tensor_alloc(&t, MOE_E2M1, 2, s2), MOE_OK);
    ck_assert_uint_eq(t.nbytes, 9); /* 3 rows of ceil(5/2) bytes */
    ck_assert_int_eq(moe_tensor_numel(&t), 15);
    ck_assert_int_eq(t.shape[2], 1);
    moe_tensor_free(&t);
    ck_assert_ptr_null(t.data);
    moe_tensor_free(&t); /* twice is safe */
    moe_tensor_free(NULL);
    ck_assert_int_eq(moe_tensor_alloc(&t, MOE_BF16, 2, s2), MOE_OK);
    ck_assert_uint_eq(t.nbytes, 30);
    moe_tensor_free(&t);
    ck_assert_int_eq(moe_tensor_alloc(&t, MOE_F32, 0, NULL), MOE_OK);
    ck_assert_uint_eq(t.nbytes, 4);
    ck_assert_int_eq(moe_tensor_numel(&t), 1);
    moe_tensor_free(&t);

    int64_t neg[2] = {3, -1};
    ck_assert_int_eq(moe_tensor_alloc(&t, MOE_F32, 2, neg), MOE_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "shape[1]"));
    ck_assert_ptr_null(t.data);
    int64_t s5[5] = {1, 1, 1, 1, 1};
    ck_assert_int_eq(moe_tensor_alloc(&t, MOE_F32, 5, s5), MOE_ERR_SHAPE);
    ck_assert_int_eq(moe_tensor_alloc(&t, MOE_F32, -1, s5), MOE_ERR_SHAPE);
    ck_assert_int_eq(moe_tensor_alloc(&t, (moe_dtype)77, 1, s5), MOE_ERR_DTYPE);
    ck_assert_int_eq(moe_tensor_alloc(&t, MOE_F32, 2, NULL), MOE_ERR_NULL);
    ck_assert_int_eq(moe_tensor_alloc(NULL, MOE_F32, 1, s5), MOE_ERR_NULL);
    int64_t huge[3] = {(int64_t)1 << 40, (int64_t)1 << 40, 16};
    ck_assert_int_eq(moe_tensor_alloc(&t, MOE_F32, 3, huge), MOE_ERR_NOMEM);
    int64_t toobig[1] = {(int64_t)1 << 41};
    ck_assert_int_eq(moe_tensor_alloc(&t, MOE_F32, 1, toobig), MOE_ERR_NOMEM);

    float buf[6];
    moe_device host = {MOE_DEVICE_HOST, 0};
    int64_t s23[2] = {2, 3};
    ck_assert_int_eq(moe_tensor_wrap(&t, MOE_F32, 2, s23, buf, sizeof buf, host), MOE_OK);
    ck_assert_int_eq(t.owns, 0);
    moe_tensor_free(&t); /* does not free buf */
    ck_assert_int_eq(moe_tensor_wrap(&t, MOE_F32, 2, s23, buf, 20, host), MOE_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "nbytes"));
    ck_assert_int_eq(moe_tensor_wrap(&t, MOE_F32, 2, s23, NULL, 24, host), MOE_ERR_NULL);
    moe_device bad = {(moe_device_kind)9, 0};
    ck_assert_int_eq(moe_tensor_wrap(&t, MOE_F32, 2, s23, buf, 24, bad), MOE_ERR_INVALID_ARG);

    ck_assert_int_eq(moe_tensor_wrap(&t, MOE_F32, 2, s23, buf, 24, host), MOE_OK);
    ck_assert_int_eq(moe_tensor_expect(&t, "x", MOE_F32, 2), MOE_OK);
    ck_assert_int_eq(moe_tensor_expect(&t, "x", MOE_F32, -1), MOE_OK);
    ck_assert_int_eq(moe_tensor_expect(&t, "x", MOE_BF16, 2), MOE_ERR_DTYPE);
    ck_assert_str_eq(moe_last_error(), "x: dtype f32, expected bf16");
    ck_assert_int_eq(moe_tensor_expect(&t, "x", MOE_F32, 3), MOE_ERR_SHAPE);
    ck_assert_str_eq(moe_last_error(), "x: rank 2, expected 3");
    ck_assert_int_eq(moe_tensor_expect(NULL, "w1", MOE_F32, 3), MOE_ERR_NULL);
    ck_assert_str_eq(moe_last_error(), "w1: must not be NULL");
}
END_TEST

/* Every dtype survives write -> read with its dtype, shape and bytes. */
START_TEST(npy_roundtrip_every_dtype)
{
    make_tmpdir();
    int64_t shape[3] = {2, 3, 5};
    for (int d = 0; d < MOE_DTYPE_COUNT; d++) {
        moe_tensor t, r;
        ck_assert_int_eq(moe_tensor_alloc(&t, (moe_dtype)d, 3, shape), MOE_OK);
        for (size_t i = 0; i < t.nbytes; i++) ((uint8_t *)t.data)[i] = (uint8_t)(i * 37 + d);
        if (d == MOE_BOOL)
            for (size_t i = 0; i < t.nbytes; i++) ((uint8_t *)t.data)[i] &= 1;
        char p[512];
        snprintf(p, sizeof p, "%s/t_%s.npy", tmpdir, moe_dtype_get((moe_dtype)d)->name);
        ck_assert_int_eq(moe_npy_write(p, &t), MOE_OK);
        ck_assert_int_eq(moe_npy_read(p, &r), MOE_OK);
        ck_assert_int_eq(r.dtype, d);
        ck_assert_int_eq(r.ndim, 3);
        ck_assert_int_eq(r.shape[2], 5);
        ck_assert_uint_eq(r.nbytes, t.nbytes);
        ck_assert_int_eq(memcmp(r.data, t.data, t.nbytes), 0);
        char side[600];
        snprintf(side, sizeof side, "%s.json", p);
        ck_assert_int_eq(access(side, F_OK) == 0, moe_npy_needs_sidecar((moe_dtype)d));
        /* the header is v1.0 and the data starts on a 64-byte boundary */
        FILE *f = fopen(p, "rb");
        unsigned char h[10];
        ck_assert_uint_eq(fread(h, 1, 10, f), 10);
        fclose(f);
        ck_assert_int_eq(h[6], 1);
        ck_assert_int_eq((10 + h[8] + 256 * h[9]) % 64, 0);
        moe_tensor_free(&t);
        moe_tensor_free(&r);
    }
}
END_TEST

static const char *srcdir(void)
{
    const char *s = getenv("MOE_SRCDIR");
    return s ? s : ".";
}

/* The corpus: ok_* must load, bad_* must be refused as malformed; the
 * inputs `make fuzz` merged in (named by their SHA-1) must do one or the
 * other, cleanly. tests/fuzz/fuzz_npy.c replays them with more checks. */
START_TEST(npy_corpus_replay)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/npy", srcdir());
    DIR *dp = opendir(dir);
    ck_assert_msg(dp != NULL, "corpus %s missing", dir);
    struct dirent *e;
    int nok = 0, nbad = 0;
    while ((e = readdir(dp))) {
        if (e->d_name[0] == '.') continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        moe_tensor t;
        moe_status s = moe_npy_read(p, &t);
        if (strncmp(e->d_name, "ok_", 3) == 0) {
            ck_assert_msg(s == MOE_OK, "%s: %s", e->d_name, moe_last_error());
            nok++;
        } else if (strncmp(e->d_name, "bad_", 4) == 0 || s != MOE_OK) {
            ck_assert_msg(s == MOE_ERR_FORMAT, "%s: status %s (%s)", e->d_name, moe_status_str(s),
                          moe_last_error());
            ck_assert_ptr_null(t.data);
            ck_assert_msg(strstr(moe_last_error(), e->d_name) != NULL, "message names the file");
            nbad += strncmp(e->d_name, "bad_", 4) == 0;
        }
        moe_tensor_free(&t);
    }
    closedir(dp);
    ck_assert_int_ge(nok, 5);
    ck_assert_int_ge(nbad, 20);
}
END_TEST

/* Specific messages for the rules the issue lists. */
START_TEST(npy_error_messages)
{
    static const struct { const char *file, *needle; } cases[] = {
        {"bad_magic.npy", "bad magic"},
        {"bad_version_2.npy", "version 2.0"},
        {"bad_header_oversized.npy", "exceeds"},
        {"bad_header_garbage.npy", "after the closing"},
        {"bad_descr_unknown.npy", "descr '<c8' unknown"},
        {"bad_shape_negative.npy", "shape"},
        {"bad_truncated_data.npy", "truncated"},
        {"bad_trailing_data.npy", "size mismatch"},
        {"bad_fortran_true.npy", "fortran_order True"},
        {"bad_descr_raw_u2_no_sidecar.npy", "needs a sidecar"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/tests/fuzz/npy/%s", srcdir(), cases[i].file);
        moe_tensor t;
        ck_assert_int_eq(moe_npy_read(p, &t), MOE_ERR_FORMAT);
        ck_assert_msg(strstr(moe_last_error(), cases[i].needle) != NULL, "%s: '%s' lacks '%s'",
                      cases[i].file, moe_last_error(), cases[i].needle);
    }
    moe_tensor t;
    ck_assert_int_eq(moe_npy_read("/nonexistent/x.npy", &t), MOE_ERR_IO);
    ck_assert_int_eq(moe_npy_read(NULL, &t), MOE_ERR_NULL);
    ck_assert_int_eq(moe_npy_parse(NULL, 5, NULL, &t), MOE_ERR_NULL);
}
END_TEST

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

START_TEST(npy_sidecar_rules)
{
    make_tmpdir();
    char p[512], side[600];
    path_in_tmp(p, sizeof p, "w.npy");
    snprintf(side, sizeof side, "%s.json", p);
    int64_t shape[2] = {4, 7};
    moe_tensor t, r;
    ck_assert_int_eq(moe_tensor_alloc(&t, MOE_E2M1, 2, shape), MOE_OK);
    ck_assert_int_eq(moe_npy_write(p, &t), MOE_OK);
    moe_tensor_free(&t);
    ck_assert_int_eq(moe_npy_read(p, &r), MOE_OK);
    ck_assert_int_eq(r.shape[1], 7);
    moe_tensor_free(&r);
    static const struct { const char *json, *needle; } bad[] = {
        {"{\"dtype\": \"e4m3\", \"shape\": [4, 7]}", "stored shape[1] = 4"},
        {"{\"dtype\": \"bf16\", \"shape\": [4, 7]}", "does not store bf16"},
        {"{\"dtype\": \"e2m1\", \"shape\": [4]}", "rank 2 differs"},
        {"{\"dtype\": \"fp3\", \"shape\": [4, 7]}", "dtype 'fp3'"},
        {"{\"dtype\": \"e2m1\"}", "needs 'dtype' and 'shape'"},
        {"[1, 2]", "not a JSON object"},
        {"{\"dtype\": \"e2m1\", \"shape\": [4, 7], \"extra\": 1}", "unknown or repeated"},
        {"{\"dtype\": \"e2m1\", \"shape\": [4, x]}", "shape"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text(side, bad[i].json);
        ck_assert_int_eq(moe_npy_read(p, &r), MOE_ERR_FORMAT);
        ck_assert_msg(strstr(moe_last_error(), bad[i].needle) != NULL, "%zu: '%s' lacks '%s'", i,
                      moe_last_error(), bad[i].needle);
        ck_assert_ptr_null(r.data);
    }
    /* an odd logical last dimension is recovered from the sidecar */
    write_text(side, "{\"dtype\": \"e2m1\", \"shape\": [4, 8]}");
    ck_assert_int_eq(moe_npy_read(p, &r), MOE_OK);
    ck_assert_int_eq(r.shape[1], 8);
    moe_tensor_free(&r);
}
END_TEST

START_TEST(npy_write_errors_leave_nothing)
{
    make_tmpdir();
    int64_t shape[1] = {4};
    moe_tensor t;
    ck_assert_int_eq(moe_tensor_alloc(&t, MOE_F32, 1, shape), MOE_OK);
    ck_assert_int_eq(moe_npy_write("/nonexistent_dir/x.npy", &t), MOE_ERR_IO);
    ck_assert_int_eq(moe_npy_write(NULL, &t), MOE_ERR_NULL);
    char p[512];
    path_in_tmp(p, sizeof p, "x.npy");
    ck_assert_int_eq(moe_npy_write(p, NULL), MOE_ERR_NULL);
    t.device.kind = MOE_DEVICE_CUDA;
    ck_assert_int_eq(moe_npy_write(p, &t), MOE_ERR_INVALID_ARG);
    ck_assert_int_eq(access(p, F_OK), -1);
    t.device.kind = MOE_DEVICE_HOST;
    moe_tensor_free(&t);
    /* a file whose directory vanishes cannot be half-written: the target
     * directory is read-only, nothing appears */
    char ro[512];
    path_in_tmp(ro, sizeof ro, "ro");
    ck_assert_int_eq(mkdir(ro, 0555), 0);
    char q[600];
    snprintf(q, sizeof q, "%s/y.npy", ro);
    ck_assert_int_eq(moe_tensor_alloc(&t, MOE_F32, 1, shape), MOE_OK);
    if (geteuid() != 0) { /* root ignores the mode bits */
        ck_assert_int_eq(moe_npy_write(q, &t), MOE_ERR_IO);
        ck_assert_int_eq(access(q, F_OK), -1);
    }
    moe_tensor_free(&t);
}
END_TEST

/* Files the writer produces load in numpy with allow_pickle=False. */
START_TEST(npy_numpy_interop)
{
    if (system("python3 -c 'import numpy' 2>/dev/null") != 0)
        ck_abort_msg("python3 with numpy is required (make deps installs it)");
    make_tmpdir();
    char p1[512], p2[512], p3[512], p4[512];
    path_in_tmp(p1, sizeof p1, "a.npy");
    path_in_tmp(p2, sizeof p2, "b.npy");
    path_in_tmp(p3, sizeof p3, "c.npy");
    path_in_tmp(p4, sizeof p4, "d.npy");
    moe_tensor t;
    int64_t s23[2] = {2, 3}, s5[1] = {5}, s13[2] = {1, 3};
    moe_tensor_alloc(&t, MOE_F32, 2, s23);
    for (int i = 0; i < 6; i++) ((float *)t.data)[i] = (float)i - 2.5f;
    ck_assert_int_eq(moe_npy_write(p1, &t), MOE_OK);
    moe_tensor_free(&t);
    moe_tensor_alloc(&t, MOE_BF16, 1, s5);
    for (int i = 0; i < 5; i++) ((uint16_t *)t.data)[i] = (uint16_t)(0x3F80 + i);
    ck_assert_int_eq(moe_npy_write(p2, &t), MOE_OK);
    moe_tensor_free(&t);
    moe_tensor_alloc(&t, MOE_E2M1, 2, s13);
    ((uint8_t *)t.data)[0] = 0x21;
    ((uint8_t *)t.data)[1] = 0x07;
    ck_assert_int_eq(moe_npy_write(p3, &t), MOE_OK);
    moe_tensor_free(&t);
    moe_tensor_alloc(&t, MOE_F16, 0, NULL);
    ((uint16_t *)t.data)[0] = 0x3C00;
    ck_assert_int_eq(moe_npy_write(p4, &t), MOE_OK);
    moe_tensor_free(&t);
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import numpy as np, json\n"
             "a = np.load('%s', allow_pickle=False)\n"
             "assert a.dtype == np.float32 and a.shape == (2, 3), a\n"
             "assert (a.ravel() == np.arange(6, dtype=np.float32) - 2.5).all()\n"
             "b = np.load('%s', allow_pickle=False)\n"
             "assert b.dtype == np.uint16 and list(b) == [0x3F80 + i for i in range(5)]\n"
             "c = np.load('%s', allow_pickle=False)\n"
             "assert c.dtype == np.uint8 and c.shape == (1, 2) and list(c[0]) == [0x21, 7]\n"
             "assert json.load(open('%s.json')) == {'dtype': 'e2m1', 'shape': [1, 3]}\n"
             "d = np.load('%s', allow_pickle=False)\n"
             "assert d.dtype == np.float16 and d.shape == () and float(d) == 1.0\n\"",
             p1, p2, p3, p3, p4);
    ck_assert_int_eq(system(cmd), 0);
    /* and the reverse: numpy's own files load here */
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import numpy as np; np.save('%s', np.arange(12, dtype=np.int32).reshape(3, 4))\"",
             p1);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(moe_npy_read(p1, &t), MOE_OK);
    ck_assert_int_eq(t.dtype, MOE_I32);
    ck_assert_int_eq(t.shape[0], 3);
    ck_assert_int_eq(((int32_t *)t.data)[11], 11);
    moe_tensor_free(&t);
}
END_TEST

static Suite *npy_suite(void)
{
    Suite *s = suite_create("tensor_npy");
    TCase *tc = tcase_create("tensor");
    tcase_add_test(tc, tensor_layout_and_errors);
    suite_add_tcase(s, tc);
    tc = tcase_create("npy");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, npy_roundtrip_every_dtype);
    tcase_add_test(tc, npy_corpus_replay);
    tcase_add_test(tc, npy_error_messages);
    tcase_add_test(tc, npy_sidecar_rules);
    tcase_add_test(tc, npy_write_errors_leave_nothing);
    tcase_add_test(tc, npy_numpy_interop);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(npy_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
