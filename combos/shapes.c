/* The standard shapes (include/moe/shapes.h): DeepSeek-V3, Mixtral-8x7B,
 * Qwen3-30B-A3B and gpt-oss-120b as their configs give them (gpt-oss with
 * its SwiGLU-OAI activation). */
#include "moe/shapes.h"
#include <string.h>

static const moe_shape SHAPES[] = {
    {"deepseek-v3", 256, 8, 7168, 2048, MOE_ACT_SILU, 256, 128},
    {"mixtral-8x7b", 8, 2, 4096, 14336, MOE_ACT_SILU, 256, 896},
    {"qwen3-30b-a3b", 128, 8, 2048, 768, MOE_ACT_SILU, 256, 128},
    {"gpt-oss-120b", 128, 4, 2880, 2880, MOE_ACT_SWIGLUOAI, 128, 128},
    /* not a model: the sweep's quick-tier shape, for smoke runs of moe-bench */
    {"tiny", 8, 2, 256, 128, MOE_ACT_SILU, 256, 128},
};
enum { N = sizeof SHAPES / sizeof SHAPES[0] };

int moe_shape_count(void) { return N; }
const moe_shape *moe_shape_get(int i) { return i >= 0 && i < N ? &SHAPES[i] : NULL; }

const moe_shape *moe_shape_find(const char *name)
{
    for (int i = 0; name && i < N; i++)
        if (!strcmp(SHAPES[i].name, name)) return &SHAPES[i];
    return NULL;
}
