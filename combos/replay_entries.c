/* The replay's interposer entries (include/moe/replay.h): the entry list
 * of replay_entries.inc in replay mode. */
#include "replay_internal.h"

#define RP_STAGED 0
#define RP_OPEN rp_open
#define RP_FN(name) rp_##name
#include "replay_entries.inc"
