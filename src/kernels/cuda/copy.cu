// A copy: a grid-stride loop of 16-byte loads and stores when both pointers are
// 16-byte aligned, element by element for the rest. Bits are moved, never
// converted.
#include "common.cuh"

template <typename T> __device__ void copy(const T *x, T *y, uint64_t n) {
  constexpr int N = Pack<T>::N;
  const uint64_t tid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  const uint64_t packs = (aligned16(x) && aligned16(y)) ? n / N : 0;
  const uint4 *px = reinterpret_cast<const uint4 *>(x);
  uint4 *py = reinterpret_cast<uint4 *>(y);
  for (uint64_t i = tid; i < packs; i += stride) py[i] = px[i];
  for (uint64_t i = packs * N + tid; i < n; i += stride) y[i] = x[i];
}

#define COPY(T, NAME)                                                                         \
  extern "C" __global__ void copy_##NAME(const T *x, T *y, uint64_t n) { copy<T>(x, y, n); }

COPY(float, f32)
COPY(__half, f16)
COPY(__nv_bfloat16, bf16)
