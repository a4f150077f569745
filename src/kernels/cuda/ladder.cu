// The bandwidth ladder's kernels on a GPU (src/bench/ladder): STREAM's read,
// copy and triad over preallocated f32 arrays, moved as float4 (16-byte loads
// and stores, the widest a thread issues) in a grid-stride loop. The read sums
// its values and writes the sum only if it is impossible (the arrays hold
// ones), so the loads cannot be optimized away and nothing else is written.
#include "common.cuh"

extern "C" __global__ void ladder_read(const float4 *x, uint64_t n4, float *sink) {
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  float acc = 0.0f;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n4; i += stride) {
    const float4 v = x[i];
    acc += (v.x + v.y) + (v.z + v.w);
  }
  if (acc < 0.0f) sink[0] = acc;
}

extern "C" __global__ void ladder_copy(const float4 *x, float4 *y, uint64_t n4) {
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n4; i += stride) y[i] = x[i];
}

extern "C" __global__ void ladder_triad(const float4 *b, const float4 *c, float4 *a, float s,
                                        uint64_t n4) {
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n4; i += stride) {
    const float4 x = b[i], y = c[i];
    a[i] = make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w);
  }
}
