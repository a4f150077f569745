// y = x W^T for a few rows of x (a decode step, a short prompt chunk): one
// warp per weight row. Its 32 threads stride the row in 16-byte loads (8
// halves or 4 floats a load, every byte of the weight read once), multiply
// each load into every activation row (up to MAX_ROWS, read through L1/L2,
// their sums in registers), and the warp's sums meet in a shuffle. All in
// f32, rounded once on the store. Rows or activations that are not 16-byte
// aligned, and a row's last k % 8 elements, go one element at a time.
#include "common.cuh"

constexpr int MAX_ROWS = 8;
constexpr int WARPS = 4;  // a block: four warps, four weight rows (matvec.rs's launch)

template <typename T>
__device__ void matvec(const T *x, const T *w, T *y, int m, int k, int n) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * WARPS + (threadIdx.x >> 5);
  if (row >= n) return;  // the whole warp: rows are per warp
  const T *wr = w + (uint64_t)row * k;
  constexpr int N = Pack<T>::N;
  const bool vec = aligned16(wr) && aligned16(x) && k % N == 0;
  const int packs = vec ? k / N : 0;
  float acc[MAX_ROWS];
#pragma unroll
  for (int i = 0; i < MAX_ROWS; ++i) acc[i] = 0.f;
  const Pack<T> *wp = reinterpret_cast<const Pack<T> *>(wr);
  for (int p = lane; p < packs; p += 32) {
    const Pack<T> wv = wp[p];
#pragma unroll
    for (int i = 0; i < MAX_ROWS; ++i) {
      if (i < m) {
        const Pack<T> xv = reinterpret_cast<const Pack<T> *>(x + (uint64_t)i * k)[p];
#pragma unroll
        for (int e = 0; e < N; ++e) acc[i] += to_f32(wv.v[e]) * to_f32(xv.v[e]);
      }
    }
  }
  for (int q = packs * N + lane; q < k; q += 32) {
    const float wq = to_f32(wr[q]);
#pragma unroll
    for (int i = 0; i < MAX_ROWS; ++i) {
      if (i < m) acc[i] += wq * to_f32(x[(uint64_t)i * k + q]);
    }
  }
#pragma unroll
  for (int i = 0; i < MAX_ROWS; ++i) {
    if (i < m) {  // m is the same for the whole warp: the shuffle is safe
      const float s = warp_sum(acc[i]);
      if (lane == 0) y[(uint64_t)i * n + row] = from_f32<T>(s);
    }
  }
}

#define MATVEC(T, NAME)                                                                       \
  extern "C" __global__ void matvec_##NAME(const T *x, const T *w, T *y, int m, int k, int n) { \
    matvec<T>(x, w, y, m, k, n);                                                              \
  }

MATVEC(float, f32)
MATVEC(__half, f16)
MATVEC(__nv_bfloat16, bf16)
