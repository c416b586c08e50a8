/* SHA-256 (FIPS 180-4), for golden-vector manifests and output digests. */
#ifndef MOE_SHA256_H
#define MOE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    uint32_t h[8];
    uint64_t len;      /* bytes hashed so far */
    uint8_t buf[64];
    size_t nbuf;
} moe_sha256;

void moe_sha256_init(moe_sha256 *s);
void moe_sha256_update(moe_sha256 *s, const void *data, size_t n);
void moe_sha256_final(moe_sha256 *s, uint8_t out[32]);
/* out: 65 bytes, lowercase hex of the digest of data[0..n). */
void moe_sha256_hex(const void *data, size_t n, char out[65]);

#ifdef __cplusplus
}
#endif

#endif
