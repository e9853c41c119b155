# CUDA detection. DF11_CUDA=AUTO builds the GPU code when nvcc is found; ON requires it; OFF skips
# it. Nothing here needs a GPU: the code compiles for fixed architectures and every GPU test skips
# without a device.
set(DF11_HAVE_CUDA OFF)
if(NOT DF11_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER)
    foreach(dir /usr/local/cuda/bin /usr/local/cuda-13/bin)
      if(EXISTS "${dir}/nvcc")
        set(CMAKE_CUDA_COMPILER "${dir}/nvcc")
        break()
      endif()
    endforeach()
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # "native" fails on a machine without a GPU, so the architectures are pinned:
    #   90       sm_90 code + PTX for Hopper (H100/H200) and newer through the driver's JIT;
    #   90a-real Hopper-only instructions (wgmma, TMA) used by the kernels that need them.
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90 90a-real)
    endif()
    enable_language(CUDA)
    # CMake 3.25 does not know that nvcc 13 compiles C++20; this shim tells it the flag, so .cu
    # files are C++20 like the rest of the code.
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(DF11_HAVE_CUDA ON)
    message(STATUS "df11: CUDA ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}")
    # FlashInfer's headers (tools/install-flashinfer.sh): paged decode attention. Without them
    # attention runs the project's own kernel.
    set(DF11_FLASHINFER_INCLUDE "${CMAKE_SOURCE_DIR}/.deps/flashinfer-0.6.0/include" CACHE PATH
        "FlashInfer's include folder (tools/install-flashinfer.sh)")
    if(EXISTS "${DF11_FLASHINFER_INCLUDE}/flashinfer/attention/decode.cuh")
      set(DF11_HAVE_FLASHINFER ON)
      message(STATUS "df11: FlashInfer headers in ${DF11_FLASHINFER_INCLUDE}")
    else()
      set(DF11_HAVE_FLASHINFER OFF)
      message(STATUS "df11: no FlashInfer headers (run tools/install-flashinfer.sh): attention "
                     "runs the project's kernel")
    endif()
  elseif(DF11_CUDA STREQUAL "ON")
    message(FATAL_ERROR "DF11_CUDA=ON but no CUDA compiler (nvcc) was found")
  else()
    message(STATUS "df11: no CUDA compiler found, building the CPU code only")
  endif()
endif()
