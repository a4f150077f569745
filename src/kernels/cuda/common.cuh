// What the lab's CUDA kernels share: f32 views of the three element types,
// 16-byte packs for element-wise loads, and block-wide reductions.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// 16 bytes of T: one vector load or store (ld.global.v4).
template <typename T> struct alignas(16) Pack {
  static constexpr int N = 16 / sizeof(T);
  T v[N];
};

__device__ __forceinline__ bool aligned16(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The sum of `v` over the block (blockDim.x a multiple of 32, at most 1024),
// returned to every thread. Safe to call more than once per kernel.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float part[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < (blockDim.x >> 5) ? part[lane] : 0.f;
    v = warp_sum(v);
    if (lane == 0) part[0] = v;
  }
  __syncthreads();
  const float total = part[0];
  __syncthreads();  // before a next call overwrites part[]
  return total;
}

// The element-wise loop every map kernel runs: a grid-stride loop over 16-byte
// packs when every pointer is 16-byte aligned, then (or otherwise) one element
// at a time. `f` maps the inputs' f32 values to the output's.
template <typename T, typename F>
__device__ __forceinline__ void map2(const T *a, const T *b, T *y, uint64_t n, F f) {
  constexpr int N = Pack<T>::N;
  const uint64_t tid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  const uint64_t packs = (aligned16(a) && aligned16(b) && aligned16(y)) ? n / N : 0;
  const Pack<T> *pa = reinterpret_cast<const Pack<T> *>(a);
  const Pack<T> *pb = reinterpret_cast<const Pack<T> *>(b);
  Pack<T> *py = reinterpret_cast<Pack<T> *>(y);
  for (uint64_t i = tid; i < packs; i += stride) {
    const Pack<T> x1 = pa[i], x2 = pb[i];
    Pack<T> out;
#pragma unroll
    for (int k = 0; k < N; ++k) out.v[k] = from_f32<T>(f(to_f32(x1.v[k]), to_f32(x2.v[k])));
    py[i] = out;
  }
  for (uint64_t i = packs * N + tid; i < n; i += stride) {
    y[i] = from_f32<T>(f(to_f32(a[i]), to_f32(b[i])));
  }
}
