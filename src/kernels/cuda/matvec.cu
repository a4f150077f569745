// y = x W^T for a few rows of x (a decode step, a short prompt chunk): one
// warp per weight row. Its 32 threads stride the row in 16-byte loads (8
// halves or 4 floats a load, every byte of the weight read once), multiply
// each load into every activation row (up to MAX_ROWS, read through L1/L2,
// their sums in registers), and the warp's sums meet in a shuffle. All in
// f32, rounded once on the store. Rows or activations that are not 16-byte
// aligned, and a row's last k % 8 elements, go one element at a time.
//
// The idea that makes it fast is bytes in flight: a matrix-vector product
// reads each weight byte once, so its speed is how many loads are waiting on
// memory at once. With one load a lane per step of the loop, an SM at this
// kernel's occupancy (60 registers a thread: 32 warps) had 16 KiB in flight
// (by the arithmetic, 32 warps x 512 bytes), under what HBM3e asks for at
// full bandwidth (some 25 KiB an SM: 4.8 TB/s x an assumed 0.7 us latency,
// over 132 SMs), and the large matrices read at 37-71% of the ladder's bound
// on an H200 (8bc0937's run).
// So each lane issues UNROLL weight loads before it multiplies any: the same
// loads, summed in the same order (every result bit for bit the same), more
// of them waiting at once. A decode step (one activation row) has a kernel
// body of its own: with the loop over eight possible rows in it, nvcc
// interleaved f32's weight loads with the rows' activation loads, one weight
// load in flight again (read in the SASS; f16's and bf16's were hoisted).
#include "common.cuh"

constexpr int MAX_ROWS = 8;
constexpr int WARPS = 4;   // a block: four warps, four weight rows (matvec.rs's launch)
constexpr int UNROLL = 4;  // weight loads a lane has in flight

// ROWS: the activation rows the loop is written for (1, or MAX_ROWS for m
// rows up to that); m of them are summed.
template <typename T, int ROWS>
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
  // pack p of the row into every activation row's sum
  auto fma_pack = [&](const Pack<T> &wv, int p) {
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
      if (i < m) {
        const Pack<T> xv = reinterpret_cast<const Pack<T> *>(x + (uint64_t)i * k)[p];
#pragma unroll
        for (int e = 0; e < N; ++e) acc[i] += to_f32(wv.v[e]) * to_f32(xv.v[e]);
      }
    }
  };
  int p = lane;
  // UNROLL packs a step, p, p + 32, ...: all loaded, then summed in that
  // order, which is the order the one-pack loop below sums them in.
  for (; p + 32 * (UNROLL - 1) < packs; p += 32 * UNROLL) {
    Pack<T> wv[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) wv[u] = wp[p + 32 * u];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) fma_pack(wv[u], p + 32 * u);
  }
  for (; p < packs; p += 32) fma_pack(wp[p], p);
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
    if (m == 1)                                                                               \
      matvec<T, 1>(x, w, y, m, k, n);                                                         \
    else                                                                                      \
      matvec<T, MAX_ROWS>(x, w, y, m, k, n);                                                  \
  }

MATVEC(float, f32)
MATVEC(__half, f16)
MATVEC(__nv_bfloat16, bf16)
