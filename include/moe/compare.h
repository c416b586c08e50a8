/* Comparing a result with its reference under an exactness class
 * (DESIGN section 5): EXACT (bits equal), SET (equal as multisets of rows
 * per segment, for layouts whose row order is unspecified upstream) and
 * BOUNDED (|got - want| <= a per-element bound derived from the
 * computation). Non-finite values are compared by class (NaN, +Inf, -Inf,
 * finite), never skipped: a class difference fails every class, and two
 * NaNs match whatever their sign and payload (README "Claims": NaN
 * payloads are not claimed; encoders produce a canonical NaN). +0 and -0
 * differ under EXACT and SET (bits) and are within any bound.
 *
 * The metrics are what the sweep, the replay, the golden verify and the
 * reports show: counts, max |delta|, max ULP distance, the largest share
 * of the bound used, and the first mismatches with TestFloat-style hex
 * (moe_code_hex). Both tensors must be host memory. */
#ifndef MOE_COMPARE_H
#define MOE_COMPARE_H

#include <stdint.h>
#include "moe/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { MOE_CLASS_EXACT = 0, MOE_CLASS_SET, MOE_CLASS_BOUNDED, MOE_EXACT_CLASS_COUNT } moe_exact_class;

/* "EXACT", "SET", "BOUNDED"; from_name is case-insensitive. */
const char *moe_exact_class_name(moe_exact_class c);
moe_status moe_exact_class_from_name(const char *name, moe_exact_class *out);

#define MOE_CMP_FIRST 8

typedef struct {
    int64_t index;              /* flat element index */
    double got, want;           /* decoded values (integers as themselves) */
    char got_hex[24], want_hex[24]; /* sign.exp.frac for floats, 0x.. for integers */
} moe_cmp_mismatch;

typedef struct {
    int64_t n;                  /* elements compared */
    int64_t mismatches;         /* elements whose bits differ (two NaNs do not; BOUNDED: nor +0 / -0) */
    int64_t class_mismatches;   /* NaN / Inf / finite class differs */
    int64_t bound_failures;     /* BOUNDED: elements over their bound */
    double max_abs;             /* max |got - want| over finite pairs */
    double max_ulp;             /* max distance in codes (floats: ordered codes) */
    double share;               /* BOUNDED: max |got - want| / bound (0 when all equal) */
    int nfirst;
    moe_cmp_mismatch first[MOE_CMP_FIRST]; /* first elements that differ (BOUNDED: over the bound first) */
} moe_cmp_metrics;

void moe_cmp_init(moe_cmp_metrics *m);

/* Code of element i (packed dtypes: its nibble) and its value as a double
 * (floats decoded, integers converted, bool 0/1). t on the host. */
uint32_t moe_tensor_code_at(const moe_tensor *t, int64_t i);
double moe_tensor_value_at(const moe_tensor *t, int64_t i);

/* got and want: host tensors of one dtype and shape, else MOE_ERR_DTYPE /
 * MOE_ERR_SHAPE (also for data shorter than the layout), MOE_ERR_NULL,
 * MOE_ERR_INVALID_ARG (a device tensor), the message naming the argument.
 * EXACT. Accumulates into *m (call moe_cmp_init first; several tensors of
 * one stage add up). */
moe_status moe_compare_exact(const moe_tensor *got, const moe_tensor *want, moe_cmp_metrics *m);

/* BOUNDED: bound[i] >= 0 per element (a NULL bound means 0 everywhere;
 * a NaN or negative bound admits no difference). An element passes when
 * |got - want| <= bound[i] (exactly at the bound passes). share_out (may
 * be NULL): per-element |got - want| / bound (0 when equal, +inf over a
 * zero bound or a class difference). */
moe_status moe_compare_bounded(const moe_tensor *got, const moe_tensor *want, const double *bound,
                               moe_cmp_metrics *m, double *share_out);

/* SET: got and want [N, C...] seen as N rows; rows [seg[s], seg[s+1]) of
 * segment s must hold the same multiset of rows (bitwise) in both; nseg
 * segments, seg[nseg] <= N; rows past seg[nseg] compare EXACT. A row of
 * got without a partner counts its differing elements as mismatches. */
moe_status moe_compare_set_rows(const moe_tensor *got, const moe_tensor *want, const int64_t *seg, int nseg,
                                moe_cmp_metrics *m);

/* The SET segments of an align layout (vLLM's large path places an
 * expert's entries with atomics): each run of consecutive blocks with one
 * id in expert_ids (int32 [blocks]) is one segment of sorted_token_ids,
 * [run start * block, min(run end * block, len)). seg (blocks + 1
 * entries) gets the nseg + 1 offsets; returns nseg. */
int moe_align_set_segments(const moe_tensor *expert_ids, int64_t block, int64_t len, int64_t *seg);

/* The verdict of metrics under a class: no class mismatch and, EXACT /
 * SET: no mismatch; BOUNDED: no element over its bound. */
int moe_cmp_pass(const moe_cmp_metrics *m, moe_exact_class c);

/* Adds b into a (counts summed, maxima kept, first mismatches appended
 * while there is room). */
void moe_cmp_merge(moe_cmp_metrics *a, const moe_cmp_metrics *b);

#ifdef __cplusplus
}
#endif

#endif
