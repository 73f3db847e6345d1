// One matrix product for several Linear layers that read the same input: a fast-weight layer's q, k, v and its
// rule's gate projections (z and f, β, α). On a GPU that is one GEMM launch instead of three to five, each of them
// too narrow to fill the card at decode; on the CPU one pass over x. The layers keep their own parameters, so
// checkpoints, Hugging Face export and conversion see the same names as before.
//
// The product uses the layers' concatenated weights, made per call (while gradients are recorded, the
// concatenation's backward hands each layer its own slice of the gradient). For a decode step (a token per
// sequence) without gradients the concatenation is kept instead, until a parameter changes (its version, storage,
// dtype or device), since copying every weight per token would cost more than the token: a decoding model holds that
// one copy of its qkv and gate weights, until a call with gradients drops it. Safe to call from several threads.
#pragma once

#include <torch/torch.h>

#include <mutex>
#include <optional>
#include <vector>

namespace fwlab {

class FusedProjection {
 public:
  // x [..., d] -> one output [..., out_features] per layer, in the layers' order: views of a single product. A
  // layer without a bias counts as a zero bias; with no bias anywhere the product has none. `step`: the call is a
  // decode step's, which keeps the concatenation where no gradient is recorded.
  std::vector<torch::Tensor> operator()(const torch::Tensor& x, const std::vector<torch::nn::Linear>& layers,
                                        bool step = false);
  // While a CUDA graph records a decode step on this thread (models/decode_graph.h), the kept concatenations the
  // step reads are also added to `pins`, which the graph holds as long as it replays: a later call with gradients
  // may drop them here, and the memory the graph reads must outlive that. nullptr: none.
  static void pin_kept_into(std::vector<torch::Tensor>* pins);

 private:
  // What identifies a parameter's current values: its tensor, its storage (held weakly, so that a freed storage
  // whose address comes back is not taken for the old one), data address, dtype, device and in-place version.
  struct Stamp {
    const void* impl = nullptr;
    std::optional<c10::weak_intrusive_ptr<c10::StorageImpl>> storage;
    const void* data = nullptr;
    int64_t dtype = -1, device = -1, version = 0;
    bool operator==(const Stamp& other) const;
  };
  static std::vector<Stamp> stamps(const std::vector<torch::nn::Linear>& layers);
  static std::pair<torch::Tensor, torch::Tensor> concatenated(const std::vector<torch::nn::Linear>& layers);
  std::pair<torch::Tensor, torch::Tensor> kept(const std::vector<torch::nn::Linear>& layers);
  void drop_kept();

  std::mutex mutex_;
  std::vector<Stamp> cached_stamps_;
  torch::Tensor cached_weight_, cached_bias_;
};

}  // namespace fwlab
