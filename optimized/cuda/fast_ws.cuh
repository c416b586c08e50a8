/* The warp-specialized persistent form of the 128-row wgmma tiles (bf16
 * 128 x 256; e4m3 128 x 128 with promotion every k tile, or every two for
 * epilogue scales at PT = 2: plan.promote_k, NOTES.md v47; int8 128 x 256 or
 * 128 x 128, s32 sums through bf16's k loop, v55), NOTES.md v13, and of the
 * 64-row one (64 x 128, one consumer warpgroup, 8 stages; v20: plan_make
 * takes it for bf16 only, where the producer running into the next tile
 * during the consumer's epilogue gained 1-5%; e4m3's single consumer
 * cannot overlap its promotion with its wgmma, 7-28% slower).
 *
 * Why: the profile of the one-CTA-a-tile kernel (gemm_kernel) on
 * DeepSeek-V3 M = 16384 showed the tensor pipe busy 64% (bf16 GEMM1), 50%
 * (bf16 GEMM2), 39% / 25% (e4m3): every CTA fills its pipeline from cold,
 * both warpgroups step together through a CTA barrier every k tile, and
 * the e4m3 tile idles the tensor cores while it promotes. Short-K GEMMs
 * (GEMM2, 16 e4m3 k tiles on DeepSeek-V3) pay the fill on every tile.
 *
 * Form (CUTLASS's "cooperative" kernel, with cp.async for A since its rows
 * are gathered through the layout; B by TMA, below): one CTA an SM takes (row block,
 * N tile) tiles in the grouped order of gemm_kernel from a counter in
 * global memory (zeroed before the launch; the tile count is read on the
 * device) until it runs past the count. The last warpgroup is the
 * producer: one thread takes the next tile and passes it to the others
 * and to the consumers through a two-entry ring in shared memory (its own
 * mbarriers); the warpgroup copies A (gathered) and B k tiles (without
 * p.b_tma) into a STAGES-deep ring with cp.async, each thread's copies completing on the
 * stage's `full` mbarrier (cp.async.mbarrier.arrive.noinc: the producer
 * never waits for its own copies, only for a free stage), and runs ahead
 * into the next tile while the consumers finish the current one (no cold
 * fill after the first tile). The BM / 64 consumer warpgroups wait on
 * `full`, fence the stage into the async proxy (the copies wrote through
 * the generic one), run the wgmmas, and each warp arrives on `empty` once
 * its wgmmas that read the stage are complete; no CTA-wide barrier in the
 * loop, so one warpgroup's promotion overlaps
 * the other's wgmma. Registers: 168 a thread for all three warpgroups
 * (384 threads, one CTA an SM); the consumers fit in them (ptxas: bf16
 * 156-160 registers, no spills; e4m3 168, the block-scale GEMM1 spilling
 * 36 bytes). setmaxnreg 40 / 232 made ptxas spill 180-570 bytes a thread
 * instead, so this form does not use it (in the EW form below a producer
 * of 64 registers spilled and one of 72 did not: 40 was likely the spill).
 * The epilogue is gemm_kernel's (fx::epilogue): same rounding points, same
 * results bit for bit.
 *
 * The weight tiles by TMA (p.b_tma, NOTES.md v19): the B rows of a tile
 * are one box of a tensor map over the expert's weights, so one producer
 * thread issues a k tile's 32 KB (bf16 128 x 256) in one instruction,
 * instead of 128 threads issuing 24 16-byte copies each; the A rows stay
 * cp.async (gathered through the layout: Hopper's TMA has no row gather).
 * The map's 128-byte swizzle is swz's layout (chunk c of row r at
 * c ^ (r & 7) within each 1024-byte group), so the consumers are
 * unchanged. GATED's interleave of 8 gate and 8 up rows is the order of
 * a five-dimensional view of w1 [E][2][I/8][8][K]: (k, row in 8, gate /
 * up, 8-row block, expert), box (k tile, 8, 2, BN / 16, 1); rows past I,
 * N and K are zero-filled by the TMA unit as the copies' src-size 0 did.
 * `full` then counts the 128 copy arrivals plus the TMA thread's
 * expect-tx arrival.
 *
 * 4-bit weight codes (QS_W4_INT / QS_W4_MX, bf16 128 x 256, NOTES.md v34):
 * the producer warpgroup dequantizes. Before, the 4-bit prefill ran on the
 * 64-row mma.sync tiles, whose eight warps each stop at two CTA barriers a
 * k tile to turn the stage's codes into a shared bf16 row buffer (v10):
 * 16-25% of the dense bf16 peak, three times bf16's time at M >= 4096.
 * Here each producer thread copies its 4 chunks of a k tile's codes (BN
 * rows of 32 bytes) by cp.async into a ring of CR k tiles, LA tiles ahead
 * of the one it converts; it waits for its own copies of tile kt
 * (cp.async.wait_group: one commit group a k tile, LA opening ones a tile),
 * converts them with their scales (loaded a k tile ahead) into the stage's
 * B rows through w4_dequant32 (the reference's WEIGHT_TO_ACT values in
 * swz's layout: the consumers read a bf16 B tile, unchanged) and arrives
 * on `full`, which counts 128 copy arrivals (A) and 128 plain ones (B; an
 * mbarrier arrive releases the thread's shared stores, the consumers'
 * fence.proxy.async then makes them visible to wgmma). A thread converts
 * only what it copied itself, so no barrier of the producers is needed.
 * Measured (NOTES.md v34): 1.5-2.0x faster than the 64-row tiles at
 * M >= 1024. The producer warp (one a scheduler) is what bounds the tile:
 * per-instruction samples put the consumers' waits on `full` at 36-42% of
 * all samples and the producer issuing or waiting on its own dependent
 * instructions (v35), so its conversion runs in as few instructions as
 * the exact values allow (w4_dequant32: e2m1 1.2x, int4 1.04x faster than
 * v34); still 1.1-1.5x bf16's time on the same tile. Not kept: a second
 * producer warpgroup sharing the conversion (512 threads, setmaxnreg 96 /
 * 160, the consumers' m64n256 as two n128: int4 about 2.5% faster, e2m1
 * 5-7% slower, v34), the scales copied with the codes through the ring
 * (int4 1-2%, e2m1 7-10% slower, v34).
 * The products are the bf16 tile's on the same B values, so a 4-bit
 * forward on this tile is bit-identical to the bf16 forward on the
 * dequantized weights (check_gpu_fast w4_wgmma_matches_bf16). */
#ifndef MOE_OPTIMIZED_CUDA_FAST_WS_CUH
#define MOE_OPTIMIZED_CUDA_FAST_WS_CUH

#include "fast_gemm.cuh"

namespace fx {

/* EW: the epilogue runs in a warpgroup of its own (below); W4: 4-bit weight
 * codes, dequantized by the producer (below) */
template <int BM, int BN, int STAGES, bool EW = false, bool W4 = false> struct ws_cfg {
    static constexpr int NCW = BM / 16;                   /* consumer warps, 16 rows each */
    static constexpr int NT = NCW * 32 + 128 + EW * 128;  /* + the producer (+ the epilogue) warpgroup */
    static constexpr int STAGE_BYTES = BM * 128 + BN * 128;
    /* EW: both consumer warpgroups' sums, handed over: 128 x 128 f32, or GATED's 128 x 256 rounded to the
     * output type (below) */
    static constexpr int EBYTES = EW ? 65536 : 0;
    /* W4: the codes' ring, CR k tiles of BN rows of 32 bytes, LA of them in flight ahead of the one the
     * producer dequantizes */
    static constexpr int LA = 2, CR = LA + 1, CBYTES = W4 ? CR * BN * 32 : 0;
    static constexpr int SMEM = STAGES * STAGE_BYTES + EBYTES + CBYTES + 1024;
    static_assert(!(EW && W4), "4-bit codes: no epilogue warpgroup form");
    static_assert(BM % 64 == 0 && (BN == 128 || BN == 256) && STAGES >= 3, "ws tiles: warpgroups of 64 rows");
    static_assert(!EW || (BM == 128 && (BN == 128 || BN == 256)), "the epilogue warpgroup: 128-row tiles, 64 KB of sums");
};

/* The epilogue warpgroup (EW; NOTES.md v25, v27). The cooperative tile's two
 * consumer warpgroups finish a tile together, so its epilogue (GEMM1's
 * gated one: 2 800 instructions a warp at about 0.25 a cycle, about 30%
 * of the consumer warps' samples on Mixtral-8x7B M = 16384 fp8 in the
 * profile of the v24 build, run109) left
 * the tensor cores idle. With EW each consumer warpgroup writes its f32
 * sums to shared memory (64 x 128 f32, 32 KB, conflict-free float4 rows
 * of 128 threads) and goes on with its next tile's k loop; a fourth
 * warpgroup reads them back into the same fragment layout and runs the
 * same fx::epilogue for the consumer warp they came from, so the results
 * are the same bits. Registers: 512 threads start at 128 each; setmaxnreg
 * gives the producer 72 and the epilogue warpgroup 112 (GATED with
 * epilogue scales) or 88, the consumers the rest, 160 or 176: ptxas
 * spills nothing (a producer of 64 spilled, consumers of 152 did, and
 * so did 88 for the gated epilogue with scales; the block scheme's
 * consumers, which spill 36 bytes at 168 in the 384-thread form, need
 * 176). Shared memory: the sums' 64 KB leave room for 5 stages of 32 KB,
 * not 6.
 * bf16's 128 x 256 GEMM1 (v27): its f32 sums would take 128 KB, so each
 * consumer thread hands over its sums rounded to bf16 (32 KB a warpgroup),
 * which is the first thing the gated epilogue does with them when it has
 * no scales (g and u rounded to the output type, as the reference's GEMM1
 * stores them): the epilogue warpgroup reads them back as f32, rounds them
 * again (exact), so the bits are the same; it runs the epilogue in two
 * halves of 64 h columns (the 128-column tile's fragment layout), so it
 * holds 64 sums at a time, as for the e4m3 tile. 3 stages of 48 KB beside
 * the 64 KB. Registers (ptxas): the producer, with TMA weights only, 72;
 * the epilogue warpgroup 88 (it has no scales); the consumers 168, none
 * spilled (consumers of 152 spilled 1.6 KB and serialized the wgmmas, a
 * producer with the weight copies compiled in spilled at 72-104). The
 * consumers' wgmmas are two m64n128 a k step (wgmma_tile's SPLIT). */
template <int EPI, int QS, bool HB = false> struct ew_regs {
    static constexpr int producer = 72, epilogue = EPI == EPI_GATED && QS == QS_EPILOGUE && !HB ? 112 : 88,
                         consumer = (65536 - 128 * (producer + epilogue)) / 256 / 8 * 8;
    static_assert(producer * 128 + epilogue * 128 + consumer * 256 <= 65536, "one SM's registers");
};

template <class T, int BM, int BN, int STAGES, int EPI, int QS, bool EW, int PT>
__global__ void __launch_bounds__(ws_cfg<BM, BN, STAGES, EW, (QS >= QS_W4_INT)>::NT, 1)
    gemm_ws_kernel(const gemm_params p, const __grid_constant__ CUtensorMap wmap)
{
    constexpr bool W4 = QS >= QS_W4_INT; /* 4-bit weight codes, dequantized by the producer (above) */
    typedef ws_cfg<BM, BN, STAGES, EW, W4> W;
    constexpr int NWG = BM / 64; /* consumer warpgroups */
    typedef cfg<BM, BN, W::NCW, 1, STAGES, true> C; /* the consumers' fragment layout (epilogue) */
    constexpr bool PROMO = std::is_same<T, __nv_fp8_e4m3>::value;
    constexpr bool I8 = std::is_same<T, int8_t>::value; /* int8 codes: s32 sums (NOTES.md v55) */
    /* HB: the sums handed over rounded to the output type (GATED's 128 x 256, above); CH, the fragment
     * layout of each half of the epilogue warpgroup's epilogue */
    constexpr bool HB = EW && BN == 256;
    typedef cfg<BM, BN / 2, W::NCW, 1, STAGES, true> CH;
    typedef typename tc<T>::out_t TO;
    static_assert(!HB || (EPI == EPI_GATED && QS == QS_EPILOGUE && !PROMO && sizeof(TO) == 2),
                  "sums handed over rounded: GATED without epilogue scales, or int8's scaled by the consumers (gemm_ws_launch)");
    static_assert(sizeof(T) == 2 || PROMO || std::is_same<T, int8_t>::value, "ws tiles: bf16 / f16, e4m3 or int8");
    static_assert(PT == 1 || (PT == 2 && PROMO && QS == QS_EPILOGUE), "two k tiles a promotion: e4m3 with epilogue scales");
    static_assert(QS == QS_EPILOGUE || (QS == QS_KTILE && PROMO) || (W4 && std::is_same<T, __nv_bfloat16>::value && BM == 128),
                  "ws tiles: epilogue or k-tile scales; 4-bit codes on bf16's 128-row tile");
    extern __shared__ __align__(128) unsigned char smem[];
    /* full[s], empty[s] of the stage ring; tfull[2], tempty[2] of the tile ring;
     * EW: efull[c], eempty[c] of consumer warpgroup c's sums and etile[c], their tile */
    __shared__ __align__(8) uint64_t bars[2 * STAGES + 4 + 2 * NWG];
    __shared__ int tiles[2], etile[NWG];
    const uint32_t s0 = (uint32_t)__cvta_generic_to_shared(smem), sbase = (s0 + 1023) & ~1023u;
    const uint32_t full0 = (uint32_t)__cvta_generic_to_shared(bars), empty0 = full0 + 8 * STAGES;
    const uint32_t tfull0 = empty0 + 8 * STAGES, tempty0 = tfull0 + 16, efull0 = tempty0 + 16, eempty0 = efull0 + 8 * NWG;
    /* EW: [NWG][NF][128] float4, a thread's n8 fragments, 128 threads a row */
    float4 *const ebuf = (float4 *)(smem + (sbase - s0) + STAGES * W::STAGE_BYTES);
    const uint32_t cbase = sbase + STAGES * W::STAGE_BYTES + W::EBYTES; /* W4: the codes' ring */
    static_assert(!EW || NWG * C::NF * 128 * 16 / (HB ? 2 : 1) == W::EBYTES, "the sums' buffer: every consumer thread's fragments");
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    if (tid == 0) {
        /* full: the A copies' 128 arrivals, plus the TMA thread's, or W4's 128 producer threads' */
        for (int s = 0; s < STAGES; s++) mbar_init(full0 + 8 * s, 128 + (W4 ? 128 : p.b_tma ? 1 : 0)), mbar_init(empty0 + 8 * s, W::NCW);
        for (int s = 0; s < 2; s++) mbar_init(tfull0 + 8 * s, 1), mbar_init(tempty0 + 8 * s, W::NCW);
        for (int c = 0; c < (EW ? NWG : 0); c++) mbar_init(efull0 + 8 * c, 128), mbar_init(eempty0 + 8 * c, 128);
        /* the barriers' init visible to the TMA unit's complete-tx */
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    /* the layout (align) and, for GEMM2, h are complete (programmatic
     * dependent launch; returns at once without it) */
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    const int nb = *p.num_blocks, total = nb * p.n_tiles;
    auto tile_of = [&](int t, int &blk, int &nt) { tile_coords(p, nb, t, blk, nt); };
    constexpr int EPC = 16 / (int)sizeof(T), KTILE = 8 * EPC;
    const int K = p.K, KT = (K + KTILE - 1) / KTILE;

    if (EW && warp >= W::NCW + 4) { /* the epilogue warpgroup: warp ew takes consumer warp 4 c + ew's rows */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(ew_regs<EPI, QS, HB>::epilogue));
        const int et = tid - (W::NCW + 4) * 32, ew = et >> 5;
        for (int tn = 0;; tn++) {
            int c = 0;
#pragma unroll 1
            for (; c < NWG; c++) {
                mbar_wait(efull0 + 8 * c, tn & 1);
                const int t = *(volatile int *)&etile[c];
                if (t < 0) break; /* the consumers are done */
                if constexpr (HB) { /* uint4 j of a thread: fragments 2 j and 2 j + 1, four 16-bit pairs */
                    int blk, nt;
                    tile_of(t, blk, nt);
                    const uint4 *eb = (const uint4 *)ebuf + c * (C::NF / 2) * 128 + et;
                    /* no epilogue scales: none in the GEMM (bf16, gemm_ws_launch), or applied by the consumers before
                     * the rounding (int8), so the epilogue runs as bf16's on g and u (TO: exact in f32) */
                    gemm_params pn = p;
                    pn.w_scale = nullptr, pn.a_scale = nullptr;
#pragma unroll 1
                    for (int half = 0; half < 2; half++) {
                        float acc[1][CH::NF][4];
#pragma unroll
                        for (int j = 0; j < CH::NF / 2; j++) {
                            const uint4 v = eb[(half * CH::NF / 2 + j) * 128];
                            const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                            for (int i = 0; i < 8; i++) {
                                const uint16_t b = (uint16_t)(w[i >> 1] >> (16 * (i & 1)));
                                acc[0][2 * j + (i >> 2)][i & 3] = tc<TO>::f32(*(const TO *)&b);
                            }
                        }
                        if (half) mbar_arrive(eempty0 + 8 * c); /* read: the consumers may write the next tile's */
                        epilogue<TO, CH, EPI, QS>(pn, acc, blk * BM, 2 * nt + half, p.block_expert[blk], 4 * c + ew, 0, lane);
                    }
                    continue;
                }
                int blk, nt;
                tile_of(t, blk, nt);
                /* the rows' operands (the slot, its router weight) in flight under the sums' reads: in the
                 * epilogue the second row's waited behind the first row's stores (v50's chain, here; NOTES.md
                 * v51: Qwen3-30B-A3B M = 4096 block GEMMs 1.7-1.9% faster by ncu). The block scheme only: it
                 * has no column scales, so 6 registers; the others' 32 column scales do not fit this
                 * warpgroup's 88 / 112 (NOTES.md v51: ptxas spilled them). load_cols is not called: the
                 * epilogue reads eo.ws only with epilogue scales (QS_EPILOGUE), which PRE excludes */
                constexpr bool PRE = QS == QS_KTILE && EPI != EPI_WATOMIC;
                epi_ops<C, EPI, QS, PRE> eo;
                eo.load_rows(p, blk * BM, 4 * c + ew, lane);
                float acc[1][C::NF][4];
                const float4 *eb = ebuf + c * C::NF * 128 + et;
#pragma unroll
                for (int q = 0; q < C::NF; q++) {
                    const float4 v = eb[q * 128];
                    acc[0][q][0] = v.x, acc[0][q][1] = v.y, acc[0][q][2] = v.z, acc[0][q][3] = v.w;
                }
                mbar_arrive(eempty0 + 8 * c); /* read: the consumers may write the next tile's */
                epilogue<T, C, EPI, QS>(p, acc, blk * BM, nt, p.block_expert[blk], 4 * c + ew, 0, lane, PRE ? &eo : nullptr);
            }
            if (c < NWG) break;
        }
    } else if (warp >= W::NCW) { /* producer warpgroup */
        if constexpr (EW) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(ew_regs<EPI, QS, HB>::producer));
        const int pt = tid - W::NCW * 32, ck = pt & 7, r8 = pt >> 3; /* chunk ck of rows r8 + 16 i */
        /* HB: TMA weights only (gemm_ws_launch): the copies' address
         * arithmetic for 256 rows spilled at 72 registers */
        const bool tma = !W4 && (HB || p.b_tma != 0);
        if (tma && pt == 0) asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&wmap) : "memory");
        int it = 0;
        for (int tn = 0;; tn++) { /* the CTA's tn-th tile */
            /* the next tile in the grouped order, from the grid's counter:
             * tiles start in order as SMs free up, as the hardware hands out
             * CTAs, so the row blocks that share a weight tile read it
             * together (a static stride let CTAs drift apart: L2 hit rate
             * 58% -> 26% on DeepSeek-V3's GEMM1, NOTES.md v13) */
            const int slot = tn & 1;
            if (pt == 0) {
                mbar_wait(tempty0 + 8 * slot, ((tn >> 1) & 1) ^ 1);
                tiles[slot] = atomicAdd(p.tile_next, 1);
                mbar_arrive(tfull0 + 8 * slot);
            }
            asm volatile("bar.sync 1, 128;\n" ::: "memory"); /* the producer warpgroup */
            const int t = *(volatile int *)&tiles[slot];
            if (t >= total) break;
            int blk, nt;
            tile_of(t, blk, nt);
            const int e = p.block_expert[blk], row0 = blk * BM;
            int asrc[BM / 16]; /* A row behind tile row r8 + 16 i, or -1 (pad) */
#pragma unroll
            for (int i = 0; i < BM / 16; i++) {
                const int r = row0 + r8 + 16 * i, s = p.sorted[r];
                asrc[i] = s < 0 ? -1 : p.a_gather ? s / p.a_div : r;
            }
            /* W4: chunk i of a k tile's codes is 16-byte half ci & 1 of B row ci >> 1 (ci = pt + 128 i): its
             * weight row's first code byte and its stored scale, read a k tile ahead (crow: -1 past N) */
            constexpr int CH = W4 ? BN * 2 / 128 : 1;
            int64_t crow[CH], srow[CH];
            uint32_t scr[CH];
            if constexpr (W4) {
#pragma unroll
                for (int i = 0; i < CH; i++) {
                    const int ci = pt + 128 * i;
                    bool ok;
                    const int n = b_row_ok<EPI, BN>(p, nt, ci >> 1, ok);
                    srow[i] = (int64_t)e * p.N + (ok ? n : 0);
                    crow[i] = ok ? srow[i] * (K / 2) + (ci & 1) * 16 : -1;
                    scr[i] = w4_scale_raw<QS>(p.w_scale, srow[i], K, (ci & 1) * 32, ok);
                }
            }
            /* W4: k tile kt's codes into ring slot kt % CR (K is whole 64-wide k tiles: fast.h) */
            auto codes = [&](int kt) {
#pragma unroll
                for (int i = 0; i < CH; i++)
                    cp_async16(cbase + (kt % W::CR) * (BN * 32) + (pt + 128 * i) * 16,
                               (const uint8_t *)p.w + (crow[i] < 0 ? 0 : crow[i] + kt * 32), crow[i] >= 0);
            };
            if constexpr (W4)
#pragma unroll
                for (int kt = 0; kt < W::LA; kt++) {
                    if (kt < KT) codes(kt);
                    cp_async_commit();
                }
            for (int kt = 0; kt < KT; kt++, it++) {
                const int s = it % STAGES;
                mbar_wait(empty0 + 8 * s, ((it / STAGES) & 1) ^ 1);
                const uint32_t sa = sbase + s * W::STAGE_BYTES, sb = sa + BM * 128;
                const int k0 = kt * KTILE + ck * EPC;
                const bool kin = k0 < K;
#pragma unroll
                for (int i = 0; i < BM / 16; i++)
                    cp_async16(sa + swz(r8 + 16 * i, ck), (const T *)p.a + (int64_t)max(asrc[i], 0) * K + (kin ? k0 : 0),
                               asrc[i] >= 0 && kin);
                if constexpr (W4) {
                    if (kt + W::LA < KT) codes(kt + W::LA);
                    cp_async_commit();
                    cp_async_arrive_noinc(full0 + 8 * s); /* the A rows */
                    uint32_t nxt[CH];
#pragma unroll
                    for (int i = 0; i < CH; i++) { /* the next k tile's scales, under this one's conversion */
                        const int ci = pt + 128 * i, k1 = (kt + 1) * KTILE + (ci & 1) * 32;
                        nxt[i] = crow[i] >= 0 && kt + 1 < KT
                                     ? w4_scale_raw<QS>(p.w_scale, srow[i], K, k1, true) : 0u;
                    }
                    cp_async_wait<W::LA>(); /* this thread's codes of tile kt (committed LA groups ago) */
                    uint32_t w32[CH][4]; /* all chunks loaded first: the stores between would order the loads */
#pragma unroll
                    for (int i = 0; i < CH; i++) lds128(w32[i], cbase + (kt % W::CR) * (BN * 32) + (pt + 128 * i) * 16);
#pragma unroll
                    for (int i = 0; i < CH; i++) {
                        const int ci = pt + 128 * i;
                        w4_dequant32<QS>(sb, ci >> 1, (ci & 1) * 4, w32[i], scr[i]);
                        scr[i] = nxt[i];
                    }
                    mbar_arrive(full0 + 8 * s); /* the B rows: the stores before it released */
                    continue;
                }
                if (tma) {
                    if (pt == 0) tma_weights<EPI, BN, KTILE>(sb, &wmap, kt, nt, e, full0 + 8 * s, false);
                } else
#pragma unroll
                for (int i = 0; i < BN / 16; i++) {
                    const int j = r8 + 16 * i;
                    bool ok;
                    const int n = b_row_ok<EPI, BN>(p, nt, j, ok);
                    cp_async16(sb + swz(j, ck), (const T *)p.w + ((int64_t)e * p.N + (ok ? n : 0)) * K + (kin ? k0 : 0),
                               ok && kin);
                }
                /* full[s] completes when these copies (and the other 127
                 * threads') have landed; the producer does not wait */
                cp_async_arrive_noinc(full0 + 8 * s);
            }
        }
        /* no wait here: every copy issued belongs to a stage the consumers
         * wait on (full) before the CTA can finish */
    } else { /* consumer warpgroups: warp cw owns tile rows 16 cw .. 16 cw + 15 */
        if constexpr (EW) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(ew_regs<EPI, QS, HB>::consumer));
        const int cw = warp, wg = cw / 4, wt = tid & 127;
        /* EW: this warpgroup's sums (or -1: no more tiles) to the epilogue warpgroup, once it has read the last */
        auto hand_over = [&](int tn, int t, const float (&acc)[1][C::NF][4], int row0, int nt, int e) {
            mbar_wait(eempty0 + 8 * wg, (tn & 1) ^ 1);
            if constexpr (HB) {
                /* int8 (NOTES.md v55): g and u as the epilogue makes them, (sum * a_scale) * w_scale in f32, then
                 * rounded; the rows' scales (pads: none stored, any scale) and each column pair's weight scales
                 * (past I: none stored), loaded here */
                float sa[2] = {1.0f, 1.0f};
                if constexpr (I8) {
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int r = row0 + 16 * cw + (lane >> 2) + 8 * h;
                        sa[h] = slot_at(p, r) >= 0 ? p.a_scale[a_sidx(p, r)] : 1.0f;
                    }
                }
                uint4 *eb = (uint4 *)ebuf + wg * (C::NF / 2) * 128 + wt;
#pragma unroll
                for (int j = 0; j < C::NF / 2; j++) {
                    uint32_t w[4];
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        const int f = 2 * j + (i >> 1);
                        float lo = acc[0][f][2 * (i & 1)], hi = acc[0][f][2 * (i & 1) + 1];
                        if constexpr (I8) { /* fragment f: gate columns (even f) or up (odd), the epilogue's pairing */
                            const int col = gated_col<C>(nt, 0, f >> 1, (lane & 3) * 2), n = (f & 1) ? p.I + col : col;
                            const float w0 = col < p.I ? p.w_scale[w_sidx(p, e, n)] : 0.0f,
                                        w1 = col + 1 < p.I ? p.w_scale[w_sidx(p, e, n + 1)] : 0.0f;
                            lo = (tc<T>::acc(lo) * sa[i & 1]) * w0, hi = (tc<T>::acc(hi) * sa[i & 1]) * w1;
                        }
                        const uint32_t v = tc<TO>::rnd2(lo, hi);
                        w[i] = v;
                    }
                    eb[j * 128] = make_uint4(w[0], w[1], w[2], w[3]);
                }
            } else {
                float4 *eb = ebuf + wg * C::NF * 128 + wt;
#pragma unroll
                for (int q = 0; q < C::NF; q++) eb[q * 128] = make_float4(acc[0][q][0], acc[0][q][1], acc[0][q][2], acc[0][q][3]);
            }
            if (wt == 0) etile[wg] = t;
            mbar_arrive(efull0 + 8 * wg);
        };
        int it = 0;
        for (int tn = 0;; tn++) {
            const int slot = tn & 1;
            mbar_wait(tfull0 + 8 * slot, (tn >> 1) & 1);
            const int t = *(volatile int *)&tiles[slot];
            __syncwarp();
            if (lane == 0) mbar_arrive(tempty0 + 8 * slot);
            if (t >= total) {
                if constexpr (EW) {
                    const float none[1][C::NF][4] = {};
                    hand_over(tn, -1, none, 0, 0, 0);
                }
                break;
            }
            int blk, nt;
            tile_of(t, blk, nt);
            const int e = p.block_expert[blk], row0 = blk * BM;
            /* a warpgroup whose 64 rows are all pads (pads follow an expert's
             * real rows, align_kernel: the expert's last block holds at most 64
             * of them) runs no wgmma: it releases each stage once it has landed
             * (arriving earlier could complete a phase twice); its epilogue
             * stores nothing (pad rows) */
            const bool idle = p.pad_skip && cw >= 4 && slot_at(p, row0 + 64 * (cw / 4)) < 0;
            /* the epilogue's operands from memory (fast_gemm.cuh epi_ops): the rows' before the k loop, the
             * columns' weight scales after it (the promotion's part registers free by then). Loaded in the
             * epilogue, between its stores, they were a chain: the slot, its router weight, then a weight
             * scale a column pair behind each store (PTX of the e4m3 GEMM2). e4m3 only: bf16's 128 x 256
             * sums leave no registers for 64 column scales (its epilogue has none: no scales). Not EW: the
             * epilogue warpgroup's registers hold no room for them, and its chain is off the consumers'.
             * Not WATOMIC: ptxas spilled 116-136 bytes a thread with them (its stores are not paired) */
            epi_ops<C, EPI, QS, !EW && PROMO && EPI != EPI_WATOMIC> eo;
            eo.load_rows(p, row0, cw, lane);
            float acc[1][C::NF][4];
#pragma unroll
            for (int q = 0; q < C::NF; q++) acc[0][q][0] = acc[0][q][1] = acc[0][q][2] = acc[0][q][3] = 0.0f;
            if (idle) { /* its own loop: the k loop below stays the one without the check (v21) */
                for (int kt = 0; kt < KT; kt++, it++) {
                    const int s = it % STAGES;
                    mbar_wait(full0 + 8 * s, (it / STAGES) & 1);
                    if (lane == 0) mbar_arrive(empty0 + 8 * s);
                }
            } else {
                ktile_promote<C, EPI, QS> kp;
                kp.init(p, row0, nt, e, cw, 0, lane);
                /* stage s's k tile into part (e4m3): its wait, the proxy fence, four wgmmas (sums from
                 * zero where first) */
                auto issue = [&](float *part, int s, int ph, bool first) {
                    mbar_wait(full0 + 8 * s, ph);
                    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                    const uint32_t sa = sbase + s * W::STAGE_BYTES, sb = sa + BM * 128;
                    const uint64_t da = smem_desc(sa + (cw / 4) * 64 * 128), db = smem_desc(sb);
                    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
                    for (int kk = 0; kk < 4; kk++) wgmma_tile<T, BN>(part, da + 2 * kk, db + 2 * kk, !first || kk > 0);
                };
                int kt = 0;
                if constexpr (PT == 2) {
                    /* two k tiles a promotion (NOTES.md v47): their e4m3 sums in one part, one wait a
                     * pair, both stages released after it; the loops carry no wait in a branch (ptxas
                     * serializes wgmmas around one: C7518). An odd last k tile goes to the loop below */
                    for (; kt + 1 < KT; kt += 2, it += 2) {
                        float part[C::NF * 4];
                        issue(part, it % STAGES, (it / STAGES) & 1, true);
                        issue(part, (it + 1) % STAGES, ((it + 1) / STAGES) & 1, false);
                        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
                        if (lane == 0) mbar_arrive(empty0 + 8 * (it % STAGES)), mbar_arrive(empty0 + 8 * ((it + 1) % STAGES));
                        kp.apply(acc, part, kp.fetch(p, kt));
                    }
                }
                for (; kt < KT; kt++, it++) {
                    const int s = it % STAGES;
                    /* the k tile's scales (QS_KTILE) in flight under the stage's wait and wgmma */
                    const auto sc = kp.fetch(p, kt);
                    mbar_wait(full0 + 8 * s, (it / STAGES) & 1);
                    /* the copies wrote through the generic proxy, the wgmmas read
                     * through the async proxy: the fence, after the acquire */
                    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                    const uint32_t sa = sbase + s * W::STAGE_BYTES, sb = sa + BM * 128;
                    const uint64_t da = smem_desc(sa + (cw / 4) * 64 * 128), db = smem_desc(sb);
                    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
                    if constexpr (PROMO) {
                        /* the k tile's e4m3 sums, waited for, the stage released,
                         * then added in f32 (gemm_kernel's promotion) */
                        float part[C::NF * 4];
#pragma unroll
                        for (int kk = 0; kk < 4; kk++) wgmma_tile<T, BN>(part, da + 2 * kk, db + 2 * kk, kk > 0);
                        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
                        if (lane == 0) mbar_arrive(empty0 + 8 * s);
                        kp.apply(acc, part, sc);
                    } else {
#pragma unroll
                        for (int kk = 0; kk < 4; kk++) wgmma_tile<T, BN, EW>(&acc[0][0][0], da + 2 * kk, db + 2 * kk);
                        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                        /* one group in flight: the previous k tile's wgmmas are done, its stage is free */
                        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                        if (kt > 0 && lane == 0) mbar_arrive(empty0 + 8 * ((it - 1) % STAGES));
                    }
                }
                if constexpr (!PROMO) {
                    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
                    if (KT > 0 && lane == 0) mbar_arrive(empty0 + 8 * ((it - 1) % STAGES));
                }
            }
            if constexpr (EW) hand_over(tn, t, acc, row0, nt, e);
            else {
                eo.load_cols(p, nt, e, 0, lane);
                epilogue<T, C, EPI, QS>(p, acc, row0, nt, e, cw, 0, lane, &eo);
            }
        }
    }
}

template <class T, int BM, int BN, int STAGES, int EPI, int QS = 0, bool EW = false, int PT = 1> cudaError_t gemm_ws_prepare()
{
    return cudaFuncSetAttribute(gemm_ws_kernel<T, BM, BN, STAGES, EPI, QS, EW, PT>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, ws_cfg<BM, BN, STAGES, EW, (QS >= QS_W4_INT)>::SMEM);
}

/* one CTA an SM (at most the tile count's upper bound); pdl: launched as
 * a programmatic dependent of the kernel before it; p.b_tma: the weight
 * map is encoded here (host only, no device work: graph-capturable) */
template <class T, int BM, int BN, int STAGES, int EPI, int QS = 0, bool EW = false, int PT = 1>
cudaError_t gemm_ws_launch(const gemm_params &p, int max_blocks, int n_cols, cudaStream_t s, bool pdl)
{
    if (!p.tile_next) return cudaErrorInvalidValue; /* the tile counter is the schedule */
    /* sums handed over rounded: no epilogue scales; TMA weights (the producer's registers) */
    if (EW && BN == 256 && ((p.w_scale && !std::is_same<T, int8_t>::value) || !p.b_tma)) return cudaErrorInvalidValue;
    int sms = 0;
    const cudaError_t se = sm_count(&sms);
    if (se != cudaSuccess) return se;
    const int per_tile = EPI == EPI_GATED ? BN / 2 : BN;
    gemm_params q = p;
    q.max_blocks = max_blocks, q.n_tiles = (n_cols + per_tile - 1) / per_tile, q.group = 8;
    /* the row-major boxes always: the tiled copy measured no reliable gain on these tiles (NOTES.md v36), and
     * without it their producer keeps v35's code (no coordinate branch a k tile) */
    q.w_tiled = NULL;
    const int64_t tiles = (int64_t)max_blocks * q.n_tiles;
    cudaLaunchConfig_t lc = {};
    typedef ws_cfg<BM, BN, STAGES, EW, (QS >= QS_W4_INT)> W;
    lc.gridDim = dim3((unsigned)(tiles < sms ? tiles : sms)), lc.blockDim = dim3(W::NT);
    lc.dynamicSmemBytes = W::SMEM, lc.stream = s;
    cudaLaunchAttribute at;
    at.id = cudaLaunchAttributeProgrammaticStreamSerialization, at.val.programmaticStreamSerializationAllowed = 1;
    lc.attrs = &at, lc.numAttrs = pdl ? 1 : 0;
    CUtensorMap wmap;
    const cudaError_t ce = launch_map<T, BN, EPI>(q, &wmap);
    if (ce != cudaSuccess) return ce;
    return cudaLaunchKernelEx(&lc, gemm_ws_kernel<T, BM, BN, STAGES, EPI, QS, EW, PT>, q, wmap);
}

} // namespace fx

#endif
