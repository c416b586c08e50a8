/* libFuzzer target: the format codecs (reference/formats/) against the
 * brute-force oracle (tests/oracle/, no shared code), through the array
 * entry points the stages use and the scalar ones the tools use.
 *
 * Input: byte 0 picks the format (tu_targets), byte 1 the policy (bits
 * 0-1, tu_policy), the mode (bit 2), an odd element count for packed
 * formats (bit 3) and, with byte 2, the size of the hex-text buffer; the
 * rest is the payload:
 *   mode 0: codes (little-endian 16-bit, 8-bit, or packed nibbles):
 *           decode -> oracle value, encode the decoded value -> oracle
 *           code and flags, and the code comes back (round trip);
 *   mode 1: f32 values: encode -> oracle code and flags, decode -> oracle
 *           value, and encoding the decoded value is idempotent.
 * Any disagreement is a finding. */
#include <math.h>
#include "fuzz_util.h"
#include "moe/format.h"
#include "oracle.h"
#include "test_util.h"

static uint32_t get_code(moe_dtype d, const uint8_t *buf, size_t i)
{
    int bits = moe_dtype_get(d)->bits;
    if (bits == 16) return (uint32_t)buf[2 * i] | ((uint32_t)buf[2 * i + 1] << 8);
    if (bits == 8) return buf[i];
    return (buf[i / 2] >> (4 * (i & 1))) & 0xFu; /* low nibble first */
}

static int is_nan_code(moe_dtype d, uint32_t c)
{
    moe_class k;
    return moe_code_class(d, c, &k) == MOE_OK && k == MOE_CLASS_NAN;
}

/* The library's value of a code must be the oracle's (any NaN for NaN). */
static void check_value(const tu_target *t, const oracle_fmt *o, uint32_t c, float got)
{
    oracle_kind k;
    double want = oracle_decode(o, c, &k);
    if (k == OK_NAN) FUZZ_REQUIRE(isnan(got), "%s 0x%X decodes to %a, the oracle says NaN", t->name, c, (double)got);
    else
        FUZZ_REQUIRE(tu_bits(got) == tu_bits((float)want), "%s 0x%X decodes to %a, the oracle says %a", t->name, c,
                     (double)got, want);
    moe_class cls;
    FUZZ_REQUIRE(moe_code_class(t->dtype, c, &cls) == MOE_OK, "%s 0x%X: no class", t->name, c);
    FUZZ_REQUIRE((cls == MOE_CLASS_NAN) == (k == OK_NAN) && (cls == MOE_CLASS_INF) == (k == OK_INF),
                 "%s 0x%X: class %s, the oracle's kind %d", t->name, c, moe_class_str(cls), (int)k);
}

/* The hex text of a code fits a buffer of n bytes, or is refused. */
static void check_hex(const tu_target *t, uint32_t c, size_t n)
{
    char *buf = malloc(n ? n : 1); /* exact size: ASan sees any overrun */
    if (!buf) return;
    moe_status s = moe_code_hex(t->dtype, c, buf, n);
    if (s == MOE_OK) FUZZ_REQUIRE(n > 0 && memchr(buf, 0, n) != NULL, "%s 0x%X: hex text not terminated", t->name, c);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3) return 0;
    const tu_target *t = &tu_targets[data[0] % TU_NTARGETS];
    int pi = data[1] & 3, mode = (data[1] >> 2) & 1, odd = (data[1] >> 3) & 1;
    size_t hexn = data[2] % 40;
    const uint8_t *pay = data + 3;
    size_t psize = size - 3;
    moe_policy p = tu_policy(pi);
    const oracle_fmt *o = oracle_get(t->name);
    FUZZ_REQUIRE(o != NULL, "oracle lacks %s", t->name);
    int bits = moe_dtype_get(t->dtype)->bits, packed = moe_dtype_is_packed(t->dtype);
    int policy_ok = moe_policy_check(t->dtype, p) == MOE_OK;
    int rz = p.rnd == MOE_RND_RZ, nonsat = p.sat == MOE_NONSAT;

    size_t n;
    if (mode == 0) n = bits == 16 ? psize / 2 : bits == 8 ? psize : 2 * psize - (psize && odd);
    else n = psize / 4;
    if (n == 0 || n > 4096) return 0;
    size_t cbytes = packed ? (n + 1) / 2 : n * (size_t)(bits / 8);

    float *vals = malloc(n * sizeof *vals), *back = malloc(n * sizeof *back);
    uint8_t *codes = malloc(cbytes), *enc = malloc(cbytes);
    if (!vals || !back || !codes || !enc) goto out;

    if (mode == 0) {
        memcpy(codes, pay, cbytes);
        FUZZ_REQUIRE(moe_decode_array(t->dtype, codes, n, vals) == MOE_OK, "%s decode_array: %s", t->name,
                     moe_last_error());
        for (size_t i = 0; i < n; i++) {
            uint32_t c = get_code(t->dtype, codes, i);
            check_value(t, o, c, vals[i]);
            float s;
            FUZZ_REQUIRE(moe_decode(t->dtype, c, &s) == MOE_OK && (tu_bits(s) == tu_bits(vals[i]) || isnan(s)),
                         "%s 0x%X: scalar and array decode differ", t->name, c);
            if (i < 4) check_hex(t, c, hexn);
        }
    } else {
        memcpy(vals, pay, n * sizeof *vals);
    }
    if (!policy_ok) goto out;

    /* encode what we have (decoded codes, or the raw f32 payload) */
    unsigned fl = 0, ofl_all = 0;
    moe_status es = moe_encode_array(t->dtype, vals, n, p, enc, &fl);
    FUZZ_REQUIRE(es == MOE_OK, "%s encode_array: %s", t->name, moe_last_error());
    for (size_t i = 0; i < n; i++) {
        unsigned ofl = 0, sfl = 0;
        uint32_t got = get_code(t->dtype, enc, i), sc = 0;
        uint32_t want = oracle_encode(o, vals[i], rz, nonsat, &ofl);
        ofl_all |= ofl;
        FUZZ_REQUIRE(got == want, "%s policy %d: f32 %08X encodes to 0x%X, the oracle says 0x%X", t->name, pi,
                     tu_bits(vals[i]), got, want);
        FUZZ_REQUIRE(moe_encode(t->dtype, vals[i], p, &sc, &sfl) == MOE_OK && sc == got && sfl == ofl,
                     "%s policy %d: f32 %08X scalar encode 0x%X flags %u, the oracle 0x%X flags %u", t->name, pi,
                     tu_bits(vals[i]), sc, sfl, want, ofl);
        if (mode == 0) {
            uint32_t c = get_code(t->dtype, codes, i);
            moe_class cls;
            moe_code_class(t->dtype, c, &cls);
            if (cls == MOE_CLASS_NAN) FUZZ_REQUIRE(is_nan_code(t->dtype, got), "%s 0x%X: NaN lost", t->name, c);
            else if (!(cls == MOE_CLASS_INF && p.sat == MOE_SAT))
                FUZZ_REQUIRE(got == c, "%s policy %d: 0x%X -> %a -> 0x%X (no round trip)", t->name, pi, c,
                             (double)vals[i], got);
        }
    }
    FUZZ_REQUIRE(fl == ofl_all, "%s policy %d: array flags %u, the oracle's union %u", t->name, pi, fl, ofl_all);

    /* decode the encoding: the oracle's values; encoding them again is idempotent */
    FUZZ_REQUIRE(moe_decode_array(t->dtype, enc, n, back) == MOE_OK, "%s decode_array: %s", t->name, moe_last_error());
    for (size_t i = 0; i < n; i++) {
        uint32_t c = get_code(t->dtype, enc, i), again;
        unsigned f2 = 0;
        check_value(t, o, c, back[i]);
        if (mode == 1 && i < 4) check_hex(t, c, hexn);
        FUZZ_REQUIRE(moe_encode(t->dtype, back[i], p, &again, &f2) == MOE_OK, "%s encode", t->name);
        if (is_nan_code(t->dtype, c)) FUZZ_REQUIRE(is_nan_code(t->dtype, again), "%s 0x%X: NaN lost", t->name, c);
        else FUZZ_REQUIRE(again == c, "%s policy %d: 0x%X -> %a -> 0x%X (not idempotent)", t->name, pi, c,
                          (double)back[i], again);
    }
out:
    free(vals);
    free(back);
    free(codes);
    free(enc);
    return 0;
}
