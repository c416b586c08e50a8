/* libFuzzer target: the .npy reader (reference/npy.c) on arbitrary bytes.
 *
 * The input is a .npy image; when it contains a line "==> sidecar <==",
 * the bytes before that line are the image and the bytes after it the
 * JSON sidecar. Properties, beyond "no crash, no sanitizer report":
 *   - a refusal is MOE_ERR_FORMAT with a message and no tensor left behind;
 *   - an accepted image holds exactly the bytes its shape needs, and they
 *     are the image's last bytes;
 *   - the file reader (moe_npy_read) agrees with the in-memory parser;
 *   - an accepted tensor written back (moe_npy_write) reads back equal. */
#include <sys/stat.h>
#include "fuzz_util.h"
#include "moe/npy.h"
#include "moe/tensor.h"

static void require_refusal(moe_status s, const moe_tensor *t, const char *what)
{
    FUZZ_REQUIRE(s == MOE_ERR_FORMAT, "%s: status %s, want ok or format (%s)", what, moe_status_str(s),
                 moe_last_error());
    FUZZ_REQUIRE(t->data == NULL && t->nbytes == 0, "%s: a refused image left a tensor", what);
    FUZZ_REQUIRE(moe_last_error()[0] != '\0', "%s: refused without a message", what);
}

static int same_tensor(const moe_tensor *a, const moe_tensor *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim || a->nbytes != b->nbytes) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char mark[] = "\n==> sidecar <==\n";
    const uint8_t *m = fuzz_find(data, data + size, mark);
    size_t n = m ? (size_t)(m - data) : size;
    const char *side = m ? (const char *)m + strlen(mark) : NULL;
    size_t side_n = m ? size - n - strlen(mark) : 0;

    moe_npy_meta meta;
    const moe_npy_meta *mp = NULL;
    if (side) {
        moe_status s = moe_npy_meta_parse(side, side_n, &meta);
        if (s == MOE_OK) {
            FUZZ_REQUIRE(moe_dtype_get(meta.dtype) != NULL, "sidecar accepted with dtype %d", (int)meta.dtype);
            FUZZ_REQUIRE(meta.ndim >= 0 && meta.ndim <= MOE_MAX_DIMS, "sidecar accepted with rank %d", meta.ndim);
            mp = &meta;
        } else {
            FUZZ_REQUIRE(s == MOE_ERR_FORMAT, "sidecar: status %s (%s)", moe_status_str(s), moe_last_error());
        }
    }

    moe_tensor t;
    moe_status s = moe_npy_parse(data, n, mp, &t);
    if (s != MOE_OK) {
        require_refusal(s, &t, "npy");
    } else {
        size_t need;
        FUZZ_REQUIRE(moe_tensor_layout(t.dtype, t.ndim, t.shape, &need) == MOE_OK && need == t.nbytes,
                     "accepted tensor of %zu bytes, its shape needs another size", t.nbytes);
        FUZZ_REQUIRE(t.nbytes <= n && (t.nbytes == 0 || memcmp(t.data, data + n - t.nbytes, t.nbytes) == 0),
                     "accepted tensor's bytes are not the image's data");
    }

    /* the file reader: same verdict and bytes as the in-memory parser */
    char path[600], spath[700];
    snprintf(path, sizeof path, "%s/in.npy", fuzz_scratch_dir());
    snprintf(spath, sizeof spath, "%s.json", path);
    remove(spath);
    FUZZ_REQUIRE(fuzz_write_file(path, data, n) == 0, "cannot write %s", path);
    if (side) FUZZ_REQUIRE(fuzz_write_file(spath, side, side_n) == 0, "cannot write %s", spath);
    moe_tensor r;
    moe_status rs = moe_npy_read(path, &r);
    if (side && !mp) {
        /* a bad sidecar refuses the file whatever the image holds */
        require_refusal(rs, &r, "npy_read with a bad sidecar");
    } else {
        FUZZ_REQUIRE(rs == s, "npy_read says %s, npy_parse %s (%s)", moe_status_str(rs), moe_status_str(s),
                     moe_last_error());
        if (rs == MOE_OK) FUZZ_REQUIRE(same_tensor(&t, &r), "npy_read and npy_parse disagree on the tensor");
        else require_refusal(rs, &r, "npy_read");
    }
    moe_tensor_free(&r);

    /* what was accepted survives a write and a read back */
    if (s == MOE_OK) {
        char out[600], oside[700];
        snprintf(out, sizeof out, "%s/out.npy", fuzz_scratch_dir());
        snprintf(oside, sizeof oside, "%s.json", out);
        remove(oside);
        FUZZ_REQUIRE(moe_npy_write(out, &t) == MOE_OK, "write back: %s", moe_last_error());
        moe_tensor b;
        FUZZ_REQUIRE(moe_npy_read(out, &b) == MOE_OK, "read back: %s", moe_last_error());
        FUZZ_REQUIRE(same_tensor(&t, &b), "the tensor changed through write and read back");
        moe_tensor_free(&b);
    }
    moe_tensor_free(&t);
    return 0;
}
