/* make check-exhaustive: all 2^32 f32 inputs through every conversion
 * target of 8 bits or fewer and both 16-bit formats, under every policy
 * each defines, compared bit for bit (code and flags) with the oracle.
 * Magnitudes are swept in increasing order so the oracle's table search
 * is amortised; each magnitude is checked with both signs. */
#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/format.h"
#include "oracle.h"
#include "test_util.h"

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    long total_bad = 0;
    double t0 = omp_get_wtime();
    for (int ti = 0; ti < TU_NTARGETS; ti++) {
        const tu_target *t = &tu_targets[ti];
        if (only && strcmp(only, t->name) != 0) continue;
        const oracle_fmt *o = oracle_get(t->name);
        int npol = t->nonsat_ok ? 4 : 2;
        long bad = 0;
        uint64_t checked = 0;
        double ts = omp_get_wtime();
#pragma omp parallel reduction(+ : bad, checked)
        {
            int hint = -2;
#pragma omp for schedule(dynamic, 1)
            for (uint32_t chunk = 0; chunk < 2048; chunk++) {
                uint32_t lo = chunk << 20, hi = lo + (1u << 20);
                for (uint32_t a = lo; a < hi; a++) {
                    double mag = (double)tu_float(a);
                    int j = isfinite(mag) ? oracle_locate(o, mag, hint) : 0;
                    if (isfinite(mag)) hint = j;
                    for (uint32_t s = 0; s < 2; s++) {
                        float x = tu_float(a | (s << 31));
                        for (int pi = 0; pi < npol; pi++) {
                            moe_policy p = tu_policy(pi);
                            unsigned fl = 0, ofl;
                            uint32_t code;
                            moe_encode(t->dtype, x, p, &code, &fl);
                            uint32_t want = oracle_encode_at(o, x, j, p.rnd == MOE_RND_RZ,
                                                             p.sat == MOE_NONSAT, &ofl);
                            checked++;
                            if (code != want || fl != ofl) {
                                if (bad++ < 10) {
#pragma omp critical
                                    printf("%s policy %d: f32 %08X => %X flags %u  expected: %X flags %u\n",
                                           t->name, pi, a | (s << 31), code, fl, want, ofl);
                                }
                            }
                        }
                    }
                }
            }
        }
        printf("%-6s %d policies, %" PRIu64 " conversions, %ld mismatches, %.1f s\n", t->name, npol,
               checked, bad, omp_get_wtime() - ts);
        fflush(stdout);
        total_bad += bad;
    }
    printf("exhaustive: %s in %.1f s\n", total_bad ? "FAILED" : "all conversions match the oracle",
           omp_get_wtime() - t0);
    return total_bad ? 1 : 0;
}
