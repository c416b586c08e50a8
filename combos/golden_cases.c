/* The built-in golden case table: the families of golden_cases_*.c in a
 * fixed order (index stages, quantization, row stages, dispatch, e2e). */
#include <string.h>
#include "golden_internal.h"

enum { MAX_CASES = 512 };

const moe_golden_table *moe_golden_builtin(void)
{
    static const moe_golden_case *ptrs[MAX_CASES];
    static moe_golden_table table;
    if (table.n) return &table;
    gk_family (*const fams[])(void) = {gk_cases_index, gk_cases_quant, gk_cases_rows, gk_cases_dispatch, gk_cases_e2e};
    int n = 0;
    for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++) {
        gk_family fam = fams[f]();
        for (int i = 0; i < fam.n && n < MAX_CASES; i++) ptrs[n++] = &fam.cases[i];
    }
    table.cases = ptrs;
    table.n = n;
    return &table;
}

const moe_golden_case *moe_golden_find(const moe_golden_table *t, const char *name)
{
    for (int i = 0; t && name && i < t->n; i++)
        if (!strcmp(t->cases[i]->name, name)) return t->cases[i];
    return NULL;
}
