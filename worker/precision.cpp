#include "worker/precision.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <stdexcept>

namespace fwlab {

namespace {

constexpr int64_t kGrowthInterval = 2000;
constexpr double kGrowth = 2.0, kBackoff = 0.5;

// PyTorch 2.4 replaced the per-device autocast calls with ones taking the device type (the old ones are deprecated).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
bool autocast_enabled(bool cuda) { return at::autocast::is_autocast_enabled(cuda ? at::kCUDA : at::kCPU); }
torch::ScalarType autocast_dtype(bool cuda) { return at::autocast::get_autocast_dtype(cuda ? at::kCUDA : at::kCPU); }
void set_autocast(bool cuda, bool enabled, torch::ScalarType dtype) {
  at::autocast::set_autocast_enabled(cuda ? at::kCUDA : at::kCPU, enabled);
  at::autocast::set_autocast_dtype(cuda ? at::kCUDA : at::kCPU, dtype);
}
#else
bool autocast_enabled(bool cuda) { return cuda ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled(); }
torch::ScalarType autocast_dtype(bool cuda) {
  return cuda ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
}
void set_autocast(bool cuda, bool enabled, torch::ScalarType dtype) {
  if (cuda) {
    at::autocast::set_enabled(enabled);
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_cpu_enabled(enabled);
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
}
#endif

}  // namespace

torch::ScalarType precision_dtype(const std::string& precision) {
  if (precision == "fp32") return torch::kFloat32;
  if (precision == "bf16") return torch::kBFloat16;
  if (precision == "fp16") return torch::kFloat16;
  throw std::invalid_argument("precision '" + precision + "' is not fp32, bf16 or fp16");
}

AutocastScope::AutocastScope(const std::string& precision, torch::Device device) {
  const auto dtype = precision_dtype(precision);
  if (dtype == torch::kFloat32) return;
  active_ = true, cuda_ = device.is_cuda();
  was_enabled_ = autocast_enabled(cuda_), was_dtype_ = autocast_dtype(cuda_);
  set_autocast(cuda_, true, dtype);
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  set_autocast(cuda_, was_enabled_, was_dtype_);
  at::autocast::clear_cache();
}

void LossScaler::unscale(const std::vector<torch::Tensor>& params) const {
  if (!enabled_) return;
  torch::NoGradGuard guard;
  for (const auto& p : params)
    if (p.grad().defined()) p.grad().div_(scale_);
}

bool LossScaler::update(bool finite_gradients) {
  if (!enabled_) return true;
  if (!finite_gradients) {
    scale_ *= kBackoff, clean_ = 0;
    return false;
  }
  if (++clean_ == kGrowthInterval) scale_ *= kGrowth, clean_ = 0;
  return true;
}

}  // namespace fwlab
