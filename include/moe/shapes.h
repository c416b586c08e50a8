/* The standard model shapes (DESIGN section 10): expert count, top-k,
 * hidden and intermediate sizes, activation; with the scaled-down H and I
 * the CPU tiers of the sweep use (expert count and top-k kept, which set
 * the routing; H and I multiples of 128 so every scheme's groups divide
 * them). moe-bench runs the full sizes. */
#ifndef MOE_SHAPES_H
#define MOE_SHAPES_H

#include "moe/act.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *name;      /* "deepseek-v3", ... */
    int E, k, H, I;
    moe_act act;
    int H_cpu, I_cpu;      /* scaled for the CPU tiers */
} moe_shape;

int moe_shape_count(void);
const moe_shape *moe_shape_get(int i);
const moe_shape *moe_shape_find(const char *name); /* NULL if unknown */

#ifdef __cplusplus
}
#endif

#endif
