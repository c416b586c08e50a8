/* The weights re-laid in tiles (fast.h moe_cuda_fx_tile_weights): each
 * TMA box of the fast tiles, 128 weight rows by 128 bytes of K, one
 * contiguous 16 KB run, [E][tiles][k tiles][128 rows][128 bytes], zeros
 * past N and K. Why: a box of the row-major weights is 128 runs of 128
 * bytes, rows K bytes apart; the same boxes streamed 0.3-4% faster
 * contiguous in v33's probe (most on Mixtral-8x7B's GEMM2, rows 14 KB
 * apart), the way the fast kernels people deploy on Hopper pre-shuffle
 * their weights once at load. The rows of a w1 tile are weight_map's
 * gated order: 8 blocks of 8 gate rows then the same 8 up rows, so a
 * tile holds 64 columns of h and any BN-row box of the kernels (64, 128
 * or 256 rows: half, one or two tiles) lands in shared memory as the
 * row-major map's box did. */
#ifndef MOE_OPTIMIZED_CUDA_FAST_TILED_CUH
#define MOE_OPTIMIZED_CUDA_FAST_TILED_CUH

#include <stdint.h>

namespace fx {

/* tiles an expert: N rows, gated (w1, N = 2I: 64 columns of h a tile) or plain (w2) */
__host__ __device__ __forceinline__ int tiled_count(bool gated, int N) { return gated ? (N / 2 + 63) / 64 : (N + 127) / 128; }

/* the weight row (of N) at row r of tile t, or -1 past the last */
__host__ __device__ __forceinline__ int tiled_row(bool gated, int N, int t, int r)
{
    if (!gated) return t * 128 + r < N ? t * 128 + r : -1;
    const int I = N / 2, col = (t * 8 + r / 16) * 8 + (r & 7);
    return col < I ? ((r >> 3) & 1) * I + col : -1;
}

} // namespace fx

#endif
