#include "models/feature_maps/projection.h"

#include <cmath>

namespace fwlab {

ProjectionMap::ProjectionMap(int64_t n_heads, int64_t m, int64_t head_dim, bool relu)
    : relu_(relu), query_scale_(1.0 / std::sqrt(static_cast<double>(head_dim))) {
  // torch.nn.Linear's default initialisation, as the reference (PyTorch) implementations get it.
  const double bound = 1.0 / std::sqrt(static_cast<double>(head_dim));
  weight = register_parameter("weight", torch::empty({n_heads, m, head_dim}).uniform_(-bound, bound));
  if (relu) bias = register_parameter("bias", torch::empty({n_heads, m}).uniform_(-bound, bound));
}

torch::Tensor ProjectionMap::activate(const torch::Tensor& projected) const {
  return relu_ ? torch::relu(projected) : projected;
}

torch::Tensor ProjectionMap::forward(const torch::Tensor& x, bool is_query) {
  auto y = project_heads(is_query ? x * query_scale_ : x, weight);
  if (bias.defined()) y = y + (x.dim() == 3 ? bias : bias.unsqueeze(1));
  return activate(y);
}

std::shared_ptr<FeatureMap> make_relu_map(const MixerSpec& spec, int64_t n_heads, int64_t head_dim) {
  return std::make_shared<ProjectionMap>(n_heads, spec.m, head_dim, true);
}

std::shared_ptr<FeatureMap> make_identity_map(const MixerSpec& spec, int64_t n_heads, int64_t head_dim) {
  return std::make_shared<ProjectionMap>(n_heads, spec.m, head_dim, false);
}

}  // namespace fwlab
