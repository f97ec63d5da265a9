// The checks' reading of the libraries' statuses: pure functions of a status, and what
// cuda::check throws for one. No GPU needed: only CUDA's headers and libraries.
#include <catch2/catch.hpp>

#include <new>
#include <string>

#include "backends/cuda/detail/check.hpp"
#include <cnnengine/base/error.hpp>
#include <cnnengine/memory/out_of_memory.hpp>

using namespace cnn;
using cuda::Shortage;
using cuda::shortage_of;

TEST_CASE("library statuses name the memory that ran out", "[cuda_host][check]") {
  CHECK(shortage_of(cudaErrorMemoryAllocation) == Shortage::device_memory);
  CHECK(shortage_of(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED) == Shortage::device_memory);
  CHECK(shortage_of(CUBLAS_STATUS_ALLOC_FAILED) == Shortage::device_memory);
  // cuDNN 9's CUDNN_STATUS_ALLOC_FAILED is this status under its old name: the host's.
  CHECK(shortage_of(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED) == Shortage::host_memory);

  CHECK(shortage_of(cudaErrorInvalidValue) == Shortage::none);
  CHECK(shortage_of(CUDNN_STATUS_BAD_PARAM) == Shortage::none);
  CHECK(shortage_of(CUDNN_STATUS_NOT_SUPPORTED) == Shortage::none);
  CHECK(shortage_of(CUBLAS_STATUS_EXECUTION_FAILED) == Shortage::none);
}

TEST_CASE("a library out of host memory is a bad_alloc naming the call, not a device OutOfMemory",
          "[cuda_host][check]") {
  try {
    cuda::check(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "cudnnFindConvolutionForwardAlgorithmEx(h, x)");
    FAIL("no throw");
  } catch (const memory::OutOfMemory& e) {
    FAIL("reported as the device's: " << e.what());
  } catch (const std::bad_alloc& e) {
    const std::string message = e.what();
    CHECK(message.find("cudnnFindConvolutionForwardAlgorithmEx ran out of host memory") == 0);
  }
}

TEST_CASE("a library out of device memory is a typed OutOfMemory naming the device", "[cuda_host][check]") {
  try {
    cuda::check(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED, "cudnnConvolutionForward(h, x)");
    FAIL("no throw");
  } catch (const memory::OutOfMemory& e) {
    CHECK(std::string(e.what()).find("cudnnConvolutionForward ran out of device memory") == 0);
    CHECK(e.details().resource.find("cuda device") == 0);
    CHECK(e.details().category == memory::Category::workspace);
  }
  CHECK_THROWS_AS(cuda::check(CUBLAS_STATUS_ALLOC_FAILED, "cublasSgemm(handle)"), memory::OutOfMemory);
  CHECK_THROWS_AS(cuda::check(cudaErrorMemoryAllocation, "cudaMalloc(&p, n)"), memory::OutOfMemory);
}

TEST_CASE("other library failures are device errors", "[cuda_host][check]") {
  CHECK_THROWS_AS(cuda::check(CUDNN_STATUS_BAD_PARAM, "cudnnAddTensor(handle)"), DeviceError);
  CHECK_THROWS_AS(cuda::check(CUBLAS_STATUS_EXECUTION_FAILED, "cublasSgemm(handle)"), DeviceError);
  CHECK_THROWS_AS(cuda::check(cudaErrorInvalidValue, "cudaMemcpy(a, b)"), DeviceError);
  CHECK_THROWS_WITH(cuda::check(CUDNN_STATUS_BAD_PARAM, "cudnnAddTensor(handle)"),
                    Catch::Matchers::StartsWith("cudnnAddTensor failed: "));
}
