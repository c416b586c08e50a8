/* The persistent form of the swapped decode tiles (16 or 32 token rows x
 * 128 weight rows, TMA weights; fast.h plan.decode_ws).
 *
 * Why: a decode GEMM streams each touched expert's weights once, and the
 * one-CTA-a-tile kernel (gemm_kernel) starts every tile from cold: the
 * block count, then the expert and the A rows' slots, then the first
 * stages, and its epilogue runs with nothing in flight. In the profile of
 * the v30 build (NOTES.md v30) an e4m3 decode CTA spent 6-19% of its samples
 * before its k loop and 7-8% after it, and the e4m3 decode GEMMs streamed at
 * 80-90% of the DRAM peak against the 85% the goal needs from the whole
 * forward. NOTES.md has named "a persistent decode CTA that keeps the
 * weight stream going across tiles" as the next lever since v17.
 *
 * Form (fast_ws.cuh's producer / consumer split, for one consumer
 * warpgroup): a CTA takes the tiles blockIdx.x, blockIdx.x + gridDim.x, ...
 * of the grouped order (tile_coords; a static stride: the tiles of a
 * decode GEMM all stream the same bytes, and no counter needs zeroing).
 * Warp 4 is the producer: for each of its tiles it reads the expert and
 * the A rows' slots, then for each k tile waits for a free stage (`empty`),
 * issues the weight box by TMA (lane 0, expect-tx on the stage's `full`)
 * and the A rows by 16-byte cp.async (gathered through the layout, pads and
 * k past K zero-filled), each lane's copies arriving on `full` when they
 * land (noinc). It runs up to STAGES k tiles ahead, across tile ends, so the
 * next tile's first stages stream during this tile's last k tiles and its
 * epilogue. Warps 0-3 (one warpgroup) wait on `full`, fence the stage
 * into the async proxy, run sw_steps' wgmmas and give each stage back once
 * their wgmmas that read it are complete: e4m3 with two sets of partial
 * sums (tile kt's wgmma runs while kt - 1's sums are added, as in
 * gemm_kernel; the block scheme's at FORM 2 with one), bf16 accumulating in the tensor
 * cores with one group in flight. The tile's last stage is kept for the
 * transposition of the sums (sw_steps::store / load; a barrier of the four
 * consumer warps, not of the CTA) and given back before the epilogue,
 * which is gemm_kernel's (fx::epilogue, its operands loaded at the tile's
 * start so they arrive under the stream). The same wgmmas, adds and
 * epilogue in the same order: the same bits as gemm_kernel's SW tiles.
 *
 * FORM 1: one CTA an SM, as many stages as 227 KB hold (11 of 20 KB on
 * the 32-row tile, 12 of 18 KB on the 16-row one); FORM 2: two CTAs an SM
 * of half as many (5 / 6, gemm_kernel's). GEMM2 (p.pdl_prefetch) issues its
 * first tile's weight boxes before it waits for the kernel before.
 *
 * Measured (NOTES.md v32): no decode miss moved; the streams stay at 82-90%
 * of the DRAM peak either way. Form 2 is 3-6% faster at 9-16 slots an
 * expert on the e4m3 schemes (plan_make's rule), form 1 slower at most
 * points (one consumer warpgroup's chain an SM shows on short tiles and
 * on the block scheme's scale loads). */
#ifndef MOE_OPTIMIZED_CUDA_FAST_SWP_CUH
#define MOE_OPTIMIZED_CUDA_FAST_SWP_CUH

#include "fast_gemm.cuh"
#include "fast_swp.h"

namespace fx {

template <int BM, int FORM> struct swp_cfg {
    static constexpr int WM = BM / 16, WN = 4 / WM, NT = 128 + 32; /* one consumer warpgroup, one producer warp */
    static constexpr int STAGE_BYTES = BM * 128 + 128 * 128;
    static constexpr int STAGES = (FORM == 1 ? 226 * 1024 : 112 * 1024) / STAGE_BYTES;
    typedef cfg<BM, 128, WM, WN, STAGES, true> C; /* the consumers' fragment layout (epilogue) */
    static constexpr int SMEM = C::SMEM;
    static_assert(C::STAGE_BYTES == STAGE_BYTES && BM * (128 + 4) * 4 <= STAGE_BYTES,
                  "the sums' transposition fits in the stage it keeps");
    static_assert(FORM == 1 || 2 * (SMEM + 2048) <= 228 * 1024, "two CTAs an SM");
};

template <class T, int BM, int FORM, int EPI, int QS>
__global__ void __launch_bounds__(swp_cfg<BM, FORM>::NT, FORM) gemm_swp_kernel(const gemm_params p, const __grid_constant__ CUtensorMap wmap)
{
    typedef swp_cfg<BM, FORM> W;
    typedef typename W::C C;
    typedef sw_steps<T, BM, 128, QS> S;
    constexpr int STAGES = W::STAGES, A_PER = BM * 8 / 32; /* the A chunks of a producer lane a stage */
    constexpr int EPC = 16 / (int)sizeof(T), KTILE = 8 * EPC;
    static_assert(S::PROMO || QS == QS_EPILOGUE, "k-tile scales: e4m3");
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ __align__(8) uint64_t bars[2 * STAGES];
    const uint32_t s0 = (uint32_t)__cvta_generic_to_shared(smem), sbase = (s0 + 1023) & ~1023u;
    const uint32_t full0 = (uint32_t)__cvta_generic_to_shared(bars), empty0 = full0 + 8 * STAGES;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    if (tid == 0) {
        /* full: the 32 producer lanes' copies and the TMA lane's expect-tx; empty: the 4 consumer warps */
        for (int s = 0; s < STAGES; s++) mbar_init(full0 + 8 * s, 33), mbar_init(empty0 + 8 * s, 4);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&wmap) : "memory");
    }
    __syncthreads();
    /* GEMM1: the layout (align) is complete; GEMM2 (pdl_prefetch): the layout
     * was complete before the kernel it depends on started, h is not yet */
    if (!p.pdl_prefetch) asm volatile("griddepcontrol.wait;\n" ::: "memory");
    const int nb = *p.num_blocks, total = nb * p.n_tiles, K = p.K, KT = (K + KTILE - 1) / KTILE;
    if (p.pdl_trigger) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");

    if (warp == 4) { /* the producer */
        const int ck = lane & 7;
        int it = 0; /* k tiles issued by this CTA: stage it % STAGES, phase it / STAGES */
        bool waited = !p.pdl_prefetch;
        for (int t = blockIdx.x; t < total; t += gridDim.x) {
            int blk, nt;
            tile_coords(p, nb, t, blk, nt);
            const int e = p.block_expert[blk], row0 = blk * BM;
            /* the CTA's first tile of GEMM2: its first weight boxes before the wait (fresh stages) */
            const int pre = waited ? 0 : min(STAGES, KT);
            for (int kt = 0; kt < pre; kt++)
                if (lane == 0) tma_weights<EPI, 128, KTILE>(sbase + kt * W::STAGE_BYTES + BM * 128, &wmap, kt, nt, e, full0 + 8 * kt, p.w_tiled != nullptr);
            if (!waited) asm volatile("griddepcontrol.wait;\n" ::: "memory");
            waited = true;
            const T *arow[A_PER];
            bool aval[A_PER];
#pragma unroll
            for (int i = 0; i < A_PER; i++) {
                const int r = row0 + lane / 8 + 4 * i, sl = p.sorted[r];
                aval[i] = sl >= 0;
                const int64_t src = p.a_gather ? (sl >= 0 ? sl / p.a_div : 0) : r;
                arow[i] = (const T *)p.a + src * (int64_t)K + ck * EPC;
            }
            for (int kt = 0; kt < KT; kt++, it++) {
                const int s = it % STAGES;
                const uint32_t sa = sbase + s * W::STAGE_BYTES;
                if (kt >= pre) {
                    mbar_wait(empty0 + 8 * s, ((it / STAGES) & 1) ^ 1);
                    if (lane == 0) tma_weights<EPI, 128, KTILE>(sa + BM * 128, &wmap, kt, nt, e, full0 + 8 * s, p.w_tiled != nullptr);
                }
                const bool kin = kt * KTILE + ck * EPC < K;
#pragma unroll
                for (int i = 0; i < A_PER; i++)
                    cp_async16(sa + swz(lane / 8 + 4 * i, ck), arow[i] + (kin ? kt * KTILE : 0), aval[i] && kin);
                cp_async_arrive_noinc(full0 + 8 * s);
            }
        }
        /* a CTA without tiles still waits for the kernel before, so this grid's end implies that one's */
        if (!waited) asm volatile("griddepcontrol.wait;\n" ::: "memory");
        cp_async_wait<0>();
        return;
    }

    /* the consumers */
    if (p.pdl_prefetch) asm volatile("griddepcontrol.wait;\n" ::: "memory");
    const int wm = warp / W::WN, wn = warp % W::WN, g = lane >> 2, t2 = (lane & 3) * 2;
    int it = 0; /* k tiles consumed by this CTA */
    for (int t = blockIdx.x; t < total; t += gridDim.x, it += KT) {
        int blk, nt;
        tile_coords(p, nb, t, blk, nt);
        const int e = p.block_expert[blk], row0 = blk * BM;
        epi_ops<C, EPI, QS> eo; /* at the tile's start: it arrives under the weight stream */
        eo.load(p, row0, nt, e, wm, wn, lane);
        S st;
        st.template init<EPI>(p, row0, nt, e, warp, g, t2);
        /* k tile kt landed: its stage, fenced into the async proxy (the A rows came through the generic one) */
        auto stage = [&](int kt) {
            const int i = it + kt, s = i % STAGES;
            mbar_wait(full0 + 8 * s, (i / STAGES) & 1);
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            return sbase + s * W::STAGE_BYTES;
        };
        /* this warp's wgmmas that read k tile kt's stage are complete */
        auto release = [&](int kt) {
            if (lane == 0) mbar_arrive(empty0 + 8 * ((it + kt) % STAGES));
        };
        typename S::sums sd, sp; /* sp: the promoted sums (e4m3) */
        S::zero(sd), S::zero(sp);
        /* e4m3: two sets, unrolled by two, each with its k tile's scales (gemm_kernel's comment); the block
         * scheme's at two CTAs an SM keeps one set with its scales loaded after the wait: its two sets need
         * about 200 registers, and ptxas gives FORM 2's 160 threads 168 (84 bytes spilled: Mixtral-8x7B
         * M = 64's GEMM1 5% slower by ncu, NOTES.md v46) */
        if constexpr (S::PROMO && (QS != QS_KTILE || FORM == 1)) {
            typename S::sums se;
            S::zero(se);
            typename S::scales cd = st.fetch(p, 0), ce;
            S::issue(sd, stage(0));
            int kt = 1;
            for (; kt + 1 < KT; kt += 2) {
                ce = st.fetch(p, kt);
                S::issue(se, stage(kt));
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                st.apply(sp, sd, cd);
                release(kt - 1);
                cd = st.fetch(p, kt + 1);
                S::issue(sd, stage(kt + 1));
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                st.apply(sp, se, ce);
                release(kt);
            }
            if (kt < KT) {
                ce = st.fetch(p, kt);
                S::issue(se, stage(kt));
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                st.apply(sp, sd, cd);
                release(kt - 1);
                asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
                st.apply(sp, se, ce);
            } else {
                asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
                st.apply(sp, sd, cd);
            }
        } else {
            for (int kt = 0; kt < KT; kt++) {
                S::issue(sd, stage(kt));
                if constexpr (S::PROMO) {
                    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
                    st.apply(sp, sd, st.fetch(p, kt));
                    if (kt + 1 < KT) release(kt);
                } else {
                    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                    if (kt > 0) release(kt - 1);
                }
            }
            if constexpr (!S::PROMO) asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        }
        /* the sums through the tile's last stage (kept): every consumer warp's wgmmas on it are complete first */
        float *tr = (float *)(smem + (sbase - s0) + ((it + KT - 1) % STAGES) * W::STAGE_BYTES);
        asm volatile("bar.sync 1, 128;\n" ::: "memory");
        if constexpr (S::PROMO) S::store(tr, sp, warp, g, t2);
        else S::store(tr, sd, warp, g, t2);
        asm volatile("bar.sync 1, 128;\n" ::: "memory");
        float acc[1][C::NF][4];
        S::template load<C>(tr, acc, wm, wn, g, t2);
        /* the generic writes above before the TMA unit's next writes to the stage */
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncwarp();
        release(KT - 1);
        epilogue<T, C, EPI, QS>(p, acc, row0, nt, e, wm, wn, lane, &eo);
    }
}

template <class T, int BM, int EPI, int QS> cudaError_t swp_prepare()
{
    cudaError_t ce = cudaFuncSetAttribute(gemm_swp_kernel<T, BM, 1, EPI, QS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          swp_cfg<BM, 1>::SMEM);
    if (ce == cudaSuccess)
        ce = cudaFuncSetAttribute(gemm_swp_kernel<T, BM, 2, EPI, QS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  swp_cfg<BM, 2>::SMEM);
    return ce;
}

template <class T, int BM, int EPI, int QS>
cudaError_t swp_launch(const gemm_params &p, int max_blocks, int n_cols, cudaStream_t s, int form)
{
    /* the weights by TMA; the slot layout (M = 1) has no sorted rows to read */
    if (!p.b_tma || p.slot_ids || (form != 1 && form != 2)) return cudaErrorInvalidValue;
    int sms = 0;
    const cudaError_t se = sm_count(&sms);
    if (se != cudaSuccess) return se;
    const int per_tile = EPI == EPI_GATED ? 64 : 128;
    gemm_params q = p;
    q.max_blocks = max_blocks, q.n_tiles = (n_cols + per_tile - 1) / per_tile, q.group = 64; /* gemm_launch's decode group */
    const int64_t tiles = (int64_t)max_blocks * q.n_tiles, ctas = (int64_t)form * sms;
    cudaLaunchConfig_t lc = {};
    lc.gridDim = dim3((unsigned)(tiles < ctas ? tiles : ctas)), lc.blockDim = dim3(swp_cfg<BM, 1>::NT);
    lc.dynamicSmemBytes = form == 1 ? swp_cfg<BM, 1>::SMEM : swp_cfg<BM, 2>::SMEM, lc.stream = s;
    cudaLaunchAttribute at;
    at.id = cudaLaunchAttributeProgrammaticStreamSerialization, at.val.programmaticStreamSerializationAllowed = 1;
    lc.attrs = &at, lc.numAttrs = 1;
    CUtensorMap wmap;
    const cudaError_t ce = launch_map<T, 128, EPI>(q, &wmap);
    if (ce != cudaSuccess) return ce;
    return form == 1 ? cudaLaunchKernelEx(&lc, gemm_swp_kernel<T, BM, 1, EPI, QS>, q, wmap)
                     : cudaLaunchKernelEx(&lc, gemm_swp_kernel<T, BM, 2, EPI, QS>, q, wmap);
}

} // namespace fx

#endif
