// Token mixers: the part of a transformer block that fwlab swaps. Every mixer has a parallel form over a whole
// sequence (training, evaluation) and a step form that carries a state from token to token (generation).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "contract/model/model_config.h"

namespace fwlab {

// State carried between steps. Which fields are used depends on the mixer:
// softmax/local: k, v (KV cache); fast_weight: S (and z with attention normalization, conv with a short
// convolution); sru/srupp: c (plus k, v for the attention of srupp).
struct MixerState {
  torch::Tensor S, z, c, k, v;
  torch::Tensor conv;  // a short convolution's last taps - 1 projected inputs, [B, channels, taps - 1]
  // softmax: k and v are views of the first tokens of these buffers, which grow by doubling, so that a generated
  // token costs one write instead of copying the whole cache (torch::cat did, at every token).
  torch::Tensor k_buffer, v_buffer;
  int64_t position = 0;  // of the next token (rotary positions); the model sets it before each step
  // Static decoding (models/decode_graph.h): the same position as a device tensor [1], shared by every layer, and
  // softmax caches of a fixed capacity written at it, so that a step keeps every tensor's shape (a CUDA graph
  // replays it). Undefined: the usual growing caches.
  torch::Tensor position_tensor;
};

class Mixer : public torch::nn::Module {
 public:
  // x: [B, T, d_model] -> [B, T, d_model]
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;
  // x: [B, d_model] (one token) -> [B, d_model]; `state` is updated in place (empty on the first token).
  virtual torch::Tensor step(const torch::Tensor& x, MixerState& state) = 0;
  // The coefficients that make this mixer's output before W_o a weighted sum of its value projections,
  // y_t[i] = sum_{s<=t} C[i, t, s] v_s[i]: [B, H, C, T, T] with C = 1 when every value channel shares them (softmax:
  // the attention probabilities) or C = head_dim (a value-side decay). Undefined for mixers that have none (SRU).
  // No dropout (evaluation). The attention analysis (models/attention_analysis.h) reads them.
  virtual torch::Tensor value_coefficients(const torch::Tensor& x) { return {}; }
  // Use the plain per-timestep kernels instead of the fast forms (tests, benchmarks).
  virtual void set_reference_kernels(bool on) { reference_kernels_ = on; }
  // Largest |state| element at the end of the last forward pass (0 for stateless mixers); the worker watches
  // it for overflow. The state is kept detached and reduced only when asked, so monitoring costs no graph
  // and no device synchronisation on the training path.
  double last_state_max_abs() const;

 protected:
  void record_state(const torch::Tensor& state) { last_state_ = state.detach(); }
  bool reference_kernels_ = false;
  torch::Tensor last_state_;
};

// The mixer of spec.kind (models/mixer_registry.cpp); ConfigError for a kind it does not hold.
std::shared_ptr<Mixer> make_mixer(const MixerSpec& spec, const ModelConfig& cfg);
// The kinds the registry holds (a test binds them to contract/model/mixer_table.h).
std::vector<std::string> registered_mixers();

// Linear layers of GPT-2: N(0, 0.02) weights, zero bias. Skipped while a SkipInitialisation lives.
void init_gpt2_linear(torch::nn::Linear& layer, double std = 0.02);

// torch::nn::Linear and Embedding of these sizes. While a SkipInitialisation lives their tensors are left as
// torch::empty makes them (libtorch's own constructors draw Kaiming and normal values, seconds for a 1B model, and
// touch every page), for a load that fills them or puts the checkpoint's tensors in their place.
torch::nn::Linear linear_layer(const torch::nn::LinearOptions& options);
torch::nn::Embedding embedding_layer(int64_t count, int64_t dim);

// While one lives (on this thread), models are built without drawing their initial weights: an import that
// overwrites every tensor spent half a minute drawing a 1B model's normal variates.
class SkipInitialisation {
 public:
  SkipInitialisation();
  ~SkipInitialisation();
  SkipInitialisation(const SkipInitialisation&) = delete;
  SkipInitialisation& operator=(const SkipInitialisation&) = delete;
  static bool active();

 private:
  bool previous_;
};

}  // namespace fwlab
