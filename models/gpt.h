// A pre-norm decoder whose token mixer is chosen per layer. GPT-2's parts by default (learned position embeddings,
// LayerNorm, GELU MLP, output projection tied to the token embedding, dropout); the model options of
// contract/model/model_config.h give Llama's (rotary positions in the mixers, RMSNorm, SwiGLU, grouped-query heads, an
// untied head), in the same module tree so that every mixer and conversion method works in either block.
#pragma once

#include <torch/torch.h>

#include "models/block_norm.h"
#include "models/dropout.h"
#include "models/mixer.h"
#include "contract/model/model_config.h"

namespace fwlab {

class Block : public torch::nn::Module {
 public:
  Block(const MixerSpec& spec, const ModelConfig& cfg);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor step(const torch::Tensor& x, MixerState& state);

  BlockNorm ln1{nullptr}, ln2{nullptr};
  std::shared_ptr<Mixer> mixer;
  // plain MLP: proj(act(fc x)); gated: fc holds the gate's rows then the up projection's, proj is the down
  // projection: proj(act(gate x) * up x). With mlp = "none" the block is its mixer alone: no ln2, fc or proj.
  torch::nn::Linear fc{nullptr}, proj{nullptr};
  Dropout drop{nullptr};

 private:
  torch::Tensor mlp(const torch::Tensor& x);
  torch::Tensor activation(const torch::Tensor& x) const;
  std::string activation_;
  bool gated_, has_mlp_;
};

// Per-sequence state for token-by-token generation.
struct GenerationState {
  std::vector<MixerState> layers;
  int64_t position = 0;
  torch::Tensor position_tensor;  // static decoding (models/decode_graph.h): position on the device, [1] long
};

class GPTImpl : public torch::nn::Module {
 public:
  explicit GPTImpl(const ModelConfig& cfg);  // validates cfg; throws ConfigError

  // idx: [B, T] token ids -> logits [B, T, vocab]. With `layer_outputs`, also returns the residual stream
  // after the embedding (index 0) and after every block (index i + 1), e.g. to find the first non-finite layer.
  torch::Tensor forward(const torch::Tensor& idx, std::vector<torch::Tensor>* layer_outputs = nullptr);
  // forward = head(features(idx)): the final LayerNorm's output [.., d_model], and the tied output layer applied to
  // any rows of it (a task scored at a few positions computes logits there only).
  torch::Tensor features(const torch::Tensor& idx, std::vector<torch::Tensor>* layer_outputs = nullptr);
  torch::Tensor head(const torch::Tensor& features);
  // The output layer's weight [vocab, d_model] (the embedding's where tied): head(f) = f weight^T.
  const torch::Tensor& head_weight() const;
  // Logits [N, vocab] at the N positions whose target is >= 0 (ignored labels are -1), and those targets [N]. The
  // output layer costs d_model x vocab per position: MQAR at vocabulary 8192 scores n of L positions and spent most
  // of its step on the others (607 ms a step against 87 ms for a re-implementation that did not).
  std::pair<torch::Tensor, torch::Tensor> labelled_logits(const torch::Tensor& idx, const torch::Tensor& targets);
  // The same positions' features [N, d_model] before the output layer (the training loss fuses the two).
  std::pair<torch::Tensor, torch::Tensor> labelled_features(const torch::Tensor& idx, const torch::Tensor& targets);
  // tokens: [B] -> logits [B, vocab] for the next position; `state` starts empty.
  torch::Tensor step(const torch::Tensor& tokens, GenerationState& state);

  const ModelConfig& config() const { return cfg_; }
  int64_t num_parameters() const;
  StateSize state_size() const { return fwlab::state_size(cfg_); }
  Mixer& mixer(size_t layer) { return *blocks_.at(layer)->mixer; }
  const std::vector<std::shared_ptr<Block>>& blocks() const { return blocks_; }
  void set_reference_kernels(bool on);
  // Largest |state| element over all recurrent layers after the last forward pass.
  double max_state_abs() const;

  torch::nn::Embedding wte{nullptr}, wpe{nullptr};  // wpe: learned positions only
  Dropout drop{nullptr};
  BlockNorm ln_f{nullptr};
  torch::nn::Linear lm_head{nullptr};  // untied head only (no bias)

 private:
  ModelConfig cfg_;
  std::vector<std::shared_ptr<Block>> blocks_;
};
TORCH_MODULE(GPT);

}  // namespace fwlab
