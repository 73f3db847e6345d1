// Mixed precision for a training job (train.precision, contract/job/job_spec.h): autocast around the forward pass and
// dynamic loss scaling for fp16. What stays fp32 is decided where it is computed: autocast's own lists (LayerNorm,
// softmax and the losses on CUDA), the residual stream (fp32 embeddings plus low-precision mixer outputs promote to
// fp32), the gates, states and normalisers of the recurrent mixers (kernels/, models/fast_weight.cpp) and the
// loss (the trainer widens the logits).
#pragma once

#include <torch/torch.h>

#include <string>

namespace fwlab {

// fp32 -> float32, bf16 -> bfloat16, fp16 -> float16.
torch::ScalarType precision_dtype(const std::string& precision);

// Autocast on `device`'s type for the scope's lifetime (nothing for fp32): the matrix products run in the low
// precision. Leaving the scope clears autocast's cache of cast weights, which the next optimizer step makes stale.
class AutocastScope {
 public:
  AutocastScope(const std::string& precision, torch::Device device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false, cuda_ = false, was_enabled_ = false;
  torch::ScalarType was_dtype_ = torch::kFloat32;
};

// fp16's dynamic loss scale (the defaults of PyTorch's GradScaler): the loss is multiplied by the scale before
// backward, gradients divided by it after; a step whose gradients overflow is skipped and halves the scale, 2000
// clean steps in a row double it. Disabled (scale 1, nothing skipped) for fp32 and bf16.
class LossScaler {
 public:
  explicit LossScaler(bool enabled) : enabled_(enabled), scale_(enabled ? 65536.0 : 1.0) {}
  bool enabled() const { return enabled_; }
  double scale() const { return scale_; }
  // Divides every gradient by the scale.
  void unscale(const std::vector<torch::Tensor>& params) const;
  // After a step's gradients were checked: grows or backs off the scale. Returns false for a step to skip.
  bool update(bool finite_gradients);
  int64_t clean_steps() const { return clean_; }
  void restore(double scale, int64_t clean) { scale_ = scale, clean_ = clean; }

 private:
  bool enabled_;
  double scale_;
  int64_t clean_ = 0;
};

}  // namespace fwlab
