// RMSNorm over rows: y = x / sqrt(mean(x^2) + eps) [* w]. One block per row:
// each thread sums the squares of its strided share in f32, the block's sums
// meet in a warp shuffle and shared memory, and a second pass scales the row,
// which the first pass just brought into L1/L2. Rounded once, on the store.
#include "common.cuh"

template <typename T>
__device__ void rms_norm(const T *x, const T *w, T *y, int width, float eps) {
  const T *xr = x + (uint64_t)blockIdx.x * width;
  T *yr = y + (uint64_t)blockIdx.x * width;
  float ss = 0.f;
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    const float v = to_f32(xr[i]);
    ss += v * v;
  }
  const float inv = rsqrtf(block_sum(ss) / width + eps);
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    float v = to_f32(xr[i]) * inv;
    if (w != nullptr) v *= to_f32(w[i]);
    yr[i] = from_f32<T>(v);
  }
}

#define RMS_NORM(T, NAME)                                                                     \
  extern "C" __global__ void rms_norm_##NAME(const T *x, T *y, int width, float eps) {       \
    rms_norm<T>(x, nullptr, y, width, eps);                                                   \
  }                                                                                           \
  extern "C" __global__ void rms_norm_mul_##NAME(const T *x, const T *w, T *y, int width,    \
                                                 float eps) {                                 \
    rms_norm<T>(x, w, y, width, eps);                                                         \
  }

RMS_NORM(float, f32)
RMS_NORM(__half, f16)
RMS_NORM(__nv_bfloat16, bf16)
