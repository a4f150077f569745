// Softmax over rows, online: each thread keeps a running (max, sum) over its
// strided share, rescaling its sum by exp(old max - new max) when the max
// grows (Milakov and Gimelshein, 2018); the block's pairs merge the same way
// in a warp shuffle and shared memory; a second pass writes exp(x - max) / sum.
// Two reads of the row, one write; f32 throughout. __expf (the SFU's ex2) is
// accurate to ~1e-7 relative where it matters, arguments near 0; the terms far
// below the max, where its error grows, are too small to move the sum.
#include "common.cuh"
#include <math_constants.h>

// (m, s) <- the pair for the union of the elements (m, s) and (m2, s2) cover.
__device__ __forceinline__ void merge(float &m, float &s, float m2, float s2) {
  const float mx = fmaxf(m, m2);
  if (mx == -CUDART_INF_F) return;  // both empty or all -inf: (m, s) = (-inf, 0)
  s = s * __expf(m - mx) + s2 * __expf(m2 - mx);
  m = mx;
}

__device__ __forceinline__ void warp_merge(float &m, float &s) {
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
    merge(m, s, m2, s2);
  }
}

template <typename T> __device__ void softmax(const T *x, T *y, int width) {
  __shared__ float pm[32], ps[32];
  const T *xr = x + (uint64_t)blockIdx.x * width;
  T *yr = y + (uint64_t)blockIdx.x * width;
  float m = -CUDART_INF_F, s = 0.f;
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    const float v = to_f32(xr[i]);
    if (v > m) {  // a new max: rescale what was summed so far (0 while m is -inf)
      s = s * __expf(m - v) + 1.f;
      m = v;
    } else if (m != -CUDART_INF_F) {
      s += __expf(v - m);
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  warp_merge(m, s);
  if (lane == 0) {
    pm[warp] = m;
    ps[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    const bool mine = lane < (blockDim.x >> 5);
    m = mine ? pm[lane] : -CUDART_INF_F;
    s = mine ? ps[lane] : 0.f;
    warp_merge(m, s);
    if (lane == 0) {
      pm[0] = m;
      ps[0] = s;
    }
  }
  __syncthreads();
  const float max = pm[0], inv = 1.f / ps[0];
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    yr[i] = from_f32<T>(__expf(to_f32(xr[i]) - max) * inv);
  }
}

#define SOFTMAX(T, NAME)                                                                      \
  extern "C" __global__ void softmax_##NAME(const T *x, T *y, int width) {                   \
    softmax<T>(x, y, width);                                                                  \
  }

SOFTMAX(float, f32)
SOFTMAX(__half, f16)
SOFTMAX(__nv_bfloat16, bf16)
