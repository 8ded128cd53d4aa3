// A kernel for cuda_toolchain_test: proves that nvcc's code links into a
// C++ target and runs. Plain C++ interface; the .cu holds the CUDA.
#ifndef REMAT_THIRD_PARTY_CUDA_TOOLCHAIN_TEST_KERNEL_H_
#define REMAT_THIRD_PARTY_CUDA_TOOLCHAIN_TEST_KERNEL_H_

#include <string>
#include <vector>

namespace remat {

// Number of CUDA devices, or 0 with `why` set to the runtime's reason.
int CudaDeviceCount(std::string* why);

// y[i] = a * x[i] + y[i] on device 0, through device buffers; returns the
// runtime's error text, empty on success.
std::string Saxpy(float a, const std::vector<float>& x, std::vector<float>* y);

}  // namespace remat

#endif  // REMAT_THIRD_PARTY_CUDA_TOOLCHAIN_TEST_KERNEL_H_
