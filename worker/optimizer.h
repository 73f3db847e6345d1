// AdamW with decoupled weight decay (Loshchilov & Hutter), written out so that its whole state is a list of
// named tensors that checkpoints can hold exactly; plus linear warm-up and cosine decay.
#pragma once

#include <torch/torch.h>

#include "models/checkpoint.h"
#include "contract/job/job_spec.h"

namespace fwlab {

class AdamW {
 public:
  // Weight decay applies to matrices (dim >= 2) only, as in GPT-2 / nanoGPT training.
  AdamW(const NamedTensors& params, const OptimSpec& spec);
  void step(double lr);
  void zero_grad();
  int64_t steps() const { return steps_; }
  // State as named tensors ("<param>.exp_avg", "<param>.exp_avg_sq") and back.
  NamedTensors state() const;
  void load_state(const NamedTensors& tensors, int64_t steps);

 private:
  struct Slot {
    std::string name;
    torch::Tensor param, exp_avg, exp_avg_sq;
    bool decay;
  };
  std::vector<Slot> slots_;
  OptimSpec spec_;
  int64_t steps_ = 0;
};

// The gradients' global 2-norm, each scaled to bring it to max_norm where it is above (infinity: measured only), as
// torch::nn::utils::clip_grad_norm_ does; on the CPU one pass a tensor (kernels/optim/adamw_cpu.h).
double clip_gradients(const std::vector<torch::Tensor>& params, double max_norm);

// Learning rate at `step` (0-based): linear warm-up to spec.lr over warmup_steps, then cosine to spec.min_lr at
// total_steps.
double learning_rate(const OptimSpec& spec, int64_t step, int64_t total_steps);

}  // namespace fwlab
