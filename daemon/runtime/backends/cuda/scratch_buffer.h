// The two scratch buffers of the CUDA backend, shared by every resident model: layers decode into
// them in turn, so that layer l + 1 decodes while layer l computes.
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_SCRATCH_BUFFER_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_SCRATCH_BUFFER_H_

#include <cstddef>
#include <cstdint>

namespace df11::runtime {

enum class ScratchBuffer : uint8_t { k0 = 0, k1 = 1 };

constexpr size_t IndexOf(ScratchBuffer b) { return static_cast<size_t>(b); }
// Layer `layer`'s buffer; the output head takes the one after the last layer's.
constexpr ScratchBuffer ScratchBufferOf(int64_t layer) {
  return layer % 2 == 0 ? ScratchBuffer::k0 : ScratchBuffer::k1;
}
// Embedding rows decode before layer 0, into the buffer it does not use.
constexpr ScratchBuffer kEmbeddingBuffer = ScratchBuffer::k1;

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_SCRATCH_BUFFER_H_
