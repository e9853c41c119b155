#include "daemon/runtime/backends/cuda/cuda_placed_model.h"

#include "daemon/runtime/backends/cuda/cuda_backend.h"

namespace df11::runtime {

DeviceTensor LayerTensorOf(const GpuModelPlan& plan, int64_t layer, size_t k) {
  const TensorSource& t = plan.layers[layer].tensors[k];
  switch (t.kind) {
    case TensorSource::Kind::kAbsent:
      return DeviceTensor{};
    case TensorSource::Kind::kResident:
      return DeviceTensor{
          .space = DeviceTensor::Space::kModel, .offset = t.offset, .bytes = t.bytes};
    case TensorSource::Kind::kScratch:
      break;
  }
  return DeviceTensor{.space = DeviceTensor::Space::kScratch,
                      .buffer = ScratchBufferOf(layer),
                      .offset = t.offset,
                      .bytes = t.bytes};
}

DeviceTensor LmHeadOf(const GpuModelPlan& plan) {
  const TensorSource& t = plan.head;
  if (t.kind == TensorSource::Kind::kResident) {
    return DeviceTensor{.space = DeviceTensor::Space::kModel, .offset = t.offset, .bytes = t.bytes};
  }
  return DeviceTensor{.space = DeviceTensor::Space::kScratch,
                      .buffer = plan.head_buffer,
                      .offset = t.offset,
                      .bytes = t.bytes};
}

CudaPlacedModel::~CudaPlacedModel() { backend_->Release(*this); }

std::string_view CudaPlacedModel::device() const { return backend_->device(); }

}  // namespace df11::runtime
