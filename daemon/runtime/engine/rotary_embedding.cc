#include "daemon/runtime/engine/rotary_embedding.h"

#include <cmath>

namespace df11::runtime {
namespace {

// base^(2i / dim) for i < dim / 2, in fp32 as torch computes `base ** (arange(0, dim, 2) / dim)`.
std::vector<float> Powers(double base, int64_t dim) {
  std::vector<float> p(dim / 2);
  for (int64_t i = 0; i < dim / 2; ++i) {
    p[i] = std::pow(static_cast<float>(base), static_cast<float>(2 * i) / static_cast<float>(dim));
  }
  return p;
}

}  // namespace

RotaryEmbedding::RotaryEmbedding(const RopeConfig& r, int64_t rotary_dim)
    : rotary_dim_(rotary_dim) {
  const std::vector<float> powers = Powers(r.theta, rotary_dim);
  inverse_.resize(powers.size());
  for (size_t i = 0; i < powers.size(); ++i) inverse_[i] = 1.0f / powers[i];
  if (r.type == RopeConfig::Type::kLinear) {
    for (float& f : inverse_) f /= static_cast<float>(r.factor);
  } else if (r.type == RopeConfig::Type::kLlama3) {
    const float factor = static_cast<float>(r.factor);
    const float low = static_cast<float>(r.low_freq_factor);
    const float high = static_cast<float>(r.high_freq_factor);
    const float original = static_cast<float>(r.original_max_position_embeddings);
    const float low_wavelen = original / low;
    const float high_wavelen = original / high;
    for (float& f : inverse_) {
      const float wavelen = 2.0f * static_cast<float>(M_PI) / f;
      if (wavelen > low_wavelen) {
        f = f / factor;
      } else if (wavelen >= high_wavelen) {  // medium frequencies: smoothed
        const float smooth = (original / wavelen - low) / (high - low);
        f = (1.0f - smooth) * f / factor + smooth * f;
      }
    }
  } else if (r.type == RopeConfig::Type::kLongRope) {
    // 1 / (factor_i · base^(2i/dim)), the product in fp32.
    long_inverse_.resize(powers.size());
    for (size_t i = 0; i < powers.size(); ++i) {
      inverse_[i] = 1.0f / (static_cast<float>(r.short_factor[i]) * powers[i]);
      long_inverse_[i] = 1.0f / (static_cast<float>(r.long_factor[i]) * powers[i]);
    }
    long_from_ = r.original_max_position_embeddings;
    scale_ = static_cast<float>(r.attention_factor);
  }
}

void RotaryEmbedding::Apply(float* x, int64_t heads, int64_t head_dim, int64_t pos) const {
  const std::vector<float>& inverse = InverseFrequencies(pos);
  const int64_t half = rotary_dim_ / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float angle = static_cast<float>(pos) * inverse[i];
    float cos = std::cos(angle), sin = std::sin(angle);
    if (scale_ != 1.0f) {
      cos *= scale_;
      sin *= scale_;
    }
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + h * head_dim;
      const float a = v[i], b = v[i + half];
      v[i] = a * cos - b * sin;
      v[i + half] = b * cos + a * sin;
    }
  }
}

}  // namespace df11::runtime
