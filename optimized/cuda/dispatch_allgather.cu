/* CUDA conformance backend: naive DP/EP all-gather dispatch and
 * reduce-scatter combine (reference/dispatch_allgather.c, vLLM NaiveDPEP),
 * every rank simulated on one GPU.
 *   dispatch  [R, T, ...] row-major is already the rank-major gathered
 *             [R*T, ...]: the gather is the identity on bytes, so each
 *             output is one device-to-device copy on the calling thread's
 *             stream (the copy engine is the fastest kernel for it).
 *   combine   one thread per output element (r, t, c), consecutive threads
 *             on consecutive channels (coalesced in every rank's slice);
 *             each thread sums its element over source ranks j = 0..R-1
 *             ascending in f32 from +0.0f and rounds once with the
 *             reference's moe_s_store, so the result is the reference's
 *             fixed order for NCCL's unspecified one, bit for bit. */
#include "cuda_internal.h"
#include "moe/dispatch.h"
#include "reference/elem.h"
/* stage_checks.h declares C functions without a C++ guard */
extern "C" {
#include "reference/stage_checks.h"
}

static moe_status copy_d2d(moe_tensor *dst, const moe_tensor *src, const char *what)
{
    size_t nb;
    moe_status st = moe_tensor_layout(dst->dtype, dst->ndim, dst->shape, &nb);
    if (st || !nb) return st;
    cudaError_t e = cudaMemcpyAsync(dst->data, src->data, nb, cudaMemcpyDeviceToDevice, cudaStreamPerThread);
    return e == cudaSuccess ? MOE_OK : moe_cu_fail(e, what);
}

extern "C" moe_status moe_cuda_ep_allgather_dispatch(int world_size, int num_experts, const moe_tensor *x,
                                                     const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                                     const moe_tensor *topk_weights, moe_tensor *gathered_x,
                                                     moe_tensor *gathered_scales, moe_tensor *gathered_ids,
                                                     moe_tensor *gathered_weights)
{
    moe_status st;
    if ((st = moe_cu_expect_dev(x, "x")) || (st = moe_cu_expect_dev(x_scales, "x_scales")) ||
        (st = moe_cu_expect_dev(topk_ids, "topk_ids")) || (st = moe_cu_expect_dev(topk_weights, "topk_weights")) ||
        (st = moe_cu_expect_dev(gathered_x, "gathered_x")) ||
        (st = moe_cu_expect_dev(gathered_scales, "gathered_scales")) ||
        (st = moe_cu_expect_dev(gathered_ids, "gathered_ids")) ||
        (st = moe_cu_expect_dev(gathered_weights, "gathered_weights")))
        return st;
    moe_tensor m[8];
    st = MOE_OK;
    /* the check scans the ids (they must name experts); nothing else is read */
    const moe_tensor *hx = moe_cu_mirror(x, &m[0], 0, &st), *hs = moe_cu_mirror(x_scales, &m[1], 0, &st),
                     *hi = moe_cu_mirror(topk_ids, &m[2], 1, &st), *hw = moe_cu_mirror(topk_weights, &m[3], 0, &st),
                     *gx = moe_cu_mirror(gathered_x, &m[4], 0, &st), *gs = moe_cu_mirror(gathered_scales, &m[5], 0, &st),
                     *gi = moe_cu_mirror(gathered_ids, &m[6], 0, &st), *gw = moe_cu_mirror(gathered_weights, &m[7], 0, &st);
    if (st == MOE_OK)
        st = moe_ref_check_ep_allgather_dispatch(world_size, num_experts, hx, hs, hi, hw, gx, gs, gi, gw);
    moe_cu_mirror_free(&m[2]);
    if (st) return st;
    if ((st = copy_d2d(gathered_x, x, "all-gather: x")) || (st = copy_d2d(gathered_ids, topk_ids, "all-gather: ids")) ||
        (st = copy_d2d(gathered_weights, topk_weights, "all-gather: weights")))
        return st;
    if (x_scales) st = copy_d2d(gathered_scales, x_scales, "all-gather: scales");
    return st;
}

/* out[r, t, c] = round(sum over j ascending of partial[j, r*T + t, c]):
 * partial's element (j, r*T + t, c) sits at j*R*T*H + o for the output's
 * flat index o = (r*T + t)*H + c. */
static __global__ void reduce_scatter_kernel(moe_dtype dt, const void *__restrict__ partial, int64_t R, int64_t n,
                                             void *out)
{
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < n; o += (int64_t)gridDim.x * blockDim.x) {
        float acc = 0.0f;
        for (int64_t j = 0; j < R; j++) acc += moe_s_load(dt, partial, j * n + o);
        moe_s_store(dt, out, o, acc);
    }
}

extern "C" moe_status moe_cuda_ep_reduce_scatter_combine(int world_size, const moe_tensor *partial, moe_tensor *out)
{
    moe_status st;
    if ((st = moe_cu_expect_dev(partial, "partial")) || (st = moe_cu_expect_dev(out, "out"))) return st;
    moe_tensor mp, mo;
    st = MOE_OK;
    const moe_tensor *hp = moe_cu_mirror(partial, &mp, 0, &st), *ho = moe_cu_mirror(out, &mo, 0, &st);
    if (st == MOE_OK) st = moe_ref_check_ep_reduce_scatter_combine(world_size, hp, ho);
    if (st) return st;
    int64_t R = world_size, n = out->shape[0] * out->shape[1] * out->shape[2]; /* R*T*H */
    if (n == 0) return MOE_OK;
    reduce_scatter_kernel<<<moe_cu_blocks(n, 256), 256>>>(partial->dtype, partial->data, R, n, out->data);
    return moe_cu_launched("reduce_scatter_kernel");
}
