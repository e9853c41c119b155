// The LUT walk of one DF11 code (codec/FORMAT.md, "Decoding one symbol"), shared by the CPU
// decoders and the GPU kernel (compiled as __host__ __device__ by nvcc, as plain C++ otherwise).
#ifndef DF11_CODEC_LUT_WALK_H_
#define DF11_CODEC_LUT_WALK_H_

#include <cstdint>

#if defined(__CUDACC__)
#define DF11_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define DF11_HOST_DEVICE inline
#endif

namespace df11::codec {

namespace gpu {
// A load of data no thread writes during the launch: through the read-only data cache on the
// device.
template <typename T>
DF11_HOST_DEVICE T LoadReadOnly(const T* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  return *p;
#endif
}

// A float's bits, and the float of bits, without a conversion.
DF11_HOST_DEVICE uint32_t FloatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  return u;
#endif
}
DF11_HOST_DEVICE float BitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
#endif
}
}  // namespace gpu

// Decodes the code at the top of `window` with the decode rows `luts` (row r at luts + 256 r) and
// the code-length row `lengths`. Returns the code length (1..32) and sets `symbol`, or returns 0
// when the tables give no valid code: a pointer after four lookups, or a symbol without a length.
// The caller has checked that every pointer targets a decode row (Unit::Validate).
DF11_HOST_DEVICE int WalkLutRows(const uint8_t* luts, const uint8_t* lengths, uint64_t window,
                                 int* symbol) {
  constexpr int kFirstPointer = 240;  // format::kFirstPointerValue
  int v = luts[window >> 56];
  for (int level = 1; level < 4 && v >= kFirstPointer; ++level) {
    v = luts[256 * (256 - v) + ((window >> (56 - 8 * level)) & 0xFF)];
  }
  if (v >= kFirstPointer) return 0;
  *symbol = v;
  return lengths[v];
}

}  // namespace df11::codec

#endif  // DF11_CODEC_LUT_WALK_H_
