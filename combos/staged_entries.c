/* The staged table's entries (include/moe/staged.h): the entry list of
 * replay_entries.inc in staged mode. */
#include "replay_internal.h"

#define RP_STAGED 1
#define RP_OPEN st_open
#define RP_FN(name) st_##name
#include "replay_entries.inc"
