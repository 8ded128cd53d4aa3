#include "third_party/cuda_toolchain_test_kernel.h"

#include <cuda_runtime.h>

namespace remat {
namespace {

__global__ void SaxpyKernel(int n, float a, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

}  // namespace

int CudaDeviceCount(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    *why = cudaGetErrorString(e);
    return 0;
  }
  if (n == 0) *why = "no CUDA device";
  return n;
}

std::string Saxpy(float a, const std::vector<float>& x,
                  std::vector<float>* y) {
  const int n = static_cast<int>(x.size());
  const size_t bytes = x.size() * sizeof(float);
  float* dx = nullptr;
  float* dy = nullptr;
  cudaError_t e = cudaMalloc(&dx, bytes);
  if (e == cudaSuccess) e = cudaMalloc(&dy, bytes);
  if (e == cudaSuccess) e = cudaMemcpy(dx, x.data(), bytes, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaMemcpy(dy, y->data(), bytes, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) {
    SaxpyKernel<<<(n + 255) / 256, 256>>>(n, a, dx, dy);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaMemcpy(y->data(), dy, bytes, cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(dy);
  return e == cudaSuccess ? "" : cudaGetErrorString(e);
}

}  // namespace remat
