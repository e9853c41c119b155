# Uses ccache for C, C++ and CUDA when it is installed: CI rebuilds the same sources often.
find_program(DF11_CCACHE ccache)
if(DF11_CCACHE)
  set(CMAKE_C_COMPILER_LAUNCHER "${DF11_CCACHE}")
  set(CMAKE_CXX_COMPILER_LAUNCHER "${DF11_CCACHE}")
  set(CMAKE_CUDA_COMPILER_LAUNCHER "${DF11_CCACHE}")
endif()
