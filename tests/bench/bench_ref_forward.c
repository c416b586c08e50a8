/* Times moe_ref_forward at the standard model shapes (bf16, top-k routing
 * given, SiLU/SwigluOAI), for the README's table of reference speeds.
 * Not a test: `make bench-ref` runs it. Weights are filled by a cheap hash
 * (their values do not change the work); the routing is seeded random. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/format.h"
#include "moe/forward.h"
#include "moe/rng.h"

typedef struct { const char *name; int E, k, H, I; moe_act act; moe_act_layout layout; } shape;

static void fill_bf16(moe_tensor *t, uint32_t salt)
{
    int64_t n = moe_tensor_numel(t);
    uint16_t *d = t->data;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        uint32_t h = (uint32_t)i * 2654435761u ^ salt;
        h ^= h >> 15;
        d[i] = (uint16_t)(0x3C00u + (h & 0x7Fu) - 0x40u) | (uint16_t)((h & 0x100u) << 7); /* +-[2^-8, 2^-6) */
    }
}

int main(int argc, char **argv)
{
    static const shape shapes[] = {
        {"qwen3-30b-a3b", 128, 8, 2048, 768, MOE_ACT_SILU, MOE_LAYOUT_GATE_UP},
        {"mixtral-8x7b", 8, 2, 4096, 14336, MOE_ACT_SILU, MOE_LAYOUT_GATE_UP},
        {"gpt-oss-120b", 128, 4, 2880, 2880, MOE_ACT_SWIGLUOAI, MOE_LAYOUT_INTERLEAVED},
        {"deepseek-v3", 256, 8, 7168, 2048, MOE_ACT_SILU, MOE_LAYOUT_GATE_UP},
    };
    int M = argc > 1 ? atoi(argv[1]) : 64;
    const char *only = argc > 2 ? argv[2] : NULL;
    printf("moe_ref_forward, bf16, M=%d, %d OpenMP threads\n", M, omp_get_max_threads());
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const shape *sh = &shapes[s];
        if (only && strcmp(only, sh->name)) continue;
        moe_tensor w1, w2, x, out, ids, w;
        int64_t s1[3] = {sh->E, 2 * sh->I, sh->H}, s2[3] = {sh->E, sh->H, sh->I}, sx[2] = {M, sh->H},
                sk[2] = {M, sh->k};
        if (moe_tensor_alloc(&w1, MOE_BF16, 3, s1) || moe_tensor_alloc(&w2, MOE_BF16, 3, s2) ||
            moe_tensor_alloc(&x, MOE_BF16, 2, sx) || moe_tensor_alloc(&out, MOE_BF16, 2, sx) ||
            moe_tensor_alloc(&ids, MOE_I32, 2, sk) || moe_tensor_alloc(&w, MOE_F32, 2, sk)) {
            printf("%-16s skipped: %s\n", sh->name, moe_last_error());
            continue;
        }
        fill_bf16(&w1, 1), fill_bf16(&w2, 2), fill_bf16(&x, 3);
        for (int t = 0; t < M; t++)
            for (int j = 0; j < sh->k; j++) { /* distinct experts */
                int e;
                int dup;
                uint64_t c = (uint64_t)(t * sh->k + j) * 97;
                do {
                    e = (int)(moe_rng_u32(7, 1, c++) % (uint32_t)sh->E);
                    dup = 0;
                    for (int q = 0; q < j; q++) dup |= ((int32_t *)ids.data)[t * sh->k + q] == e;
                } while (dup);
                ((int32_t *)ids.data)[t * sh->k + j] = e;
                ((float *)w.data)[t * sh->k + j] = 1.0f / (float)sh->k;
            }
        moe_forward_args a;
        memset(&a, 0, sizeof a);
        a.scheme = MOE_SCHEME_BF16, a.act = moe_act_defaults(sh->act, sh->layout);
        a.topk_ids = &ids, a.topk_weights = &w, a.w1 = &w1, a.w2 = &w2;
        double t0 = omp_get_wtime();
        moe_status st = moe_ref_forward(&a, &x, &out);
        double dt = omp_get_wtime() - t0;
        double flop = 2.0 * M * sh->k * (2.0 * sh->I * sh->H + (double)sh->H * sh->I);
        if (st != MOE_OK) printf("%-16s failed: %s\n", sh->name, moe_last_error());
        else printf("%-16s E=%-3d k=%d H=%-5d I=%-5d  %8.2f s  %6.2f GFLOP/s\n", sh->name, sh->E, sh->k, sh->H, sh->I,
                    dt, flop / dt * 1e-9);
        fflush(stdout);
        moe_tensor_free(&w1), moe_tensor_free(&w2), moe_tensor_free(&x), moe_tensor_free(&out);
        moe_tensor_free(&ids), moe_tensor_free(&w);
    }
    return 0;
}
