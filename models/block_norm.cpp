#include "models/block_norm.h"

namespace fwlab {

BlockNormImpl::BlockNormImpl(const std::string& kind, int64_t d, double eps) : rms_(kind == "rmsnorm"), eps_(eps) {
  weight = register_parameter("weight", torch::ones({d}));
  if (!rms_) bias = register_parameter("bias", torch::zeros({d}));
}

torch::Tensor BlockNormImpl::forward(const torch::Tensor& x) {
  if (!rms_) return torch::layer_norm(x, {x.size(-1)}, weight, bias, eps_);
  // Hugging Face's LlamaRMSNorm: statistics in fp32, the normalised x cast back to its dtype, then the weight.
  auto h = x.to(torch::kFloat32);
  h = h * torch::rsqrt(h.pow(2).mean(-1, true) + eps_);
  return weight * h.to(x.scalar_type());
}

}  // namespace fwlab
