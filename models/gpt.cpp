#include "models/gpt.h"

#include <fmt/format.h>

#include <cmath>

#include "kernels/elementwise/gelu_tanh.h"
#include "kernels/few_rows_linear.h"
#include "models/mixers.h"

namespace fwlab {

Block::Block(const MixerSpec& spec, const ModelConfig& cfg)
    : activation_(cfg.activation), gated_(cfg.mlp == "gated"), has_mlp_(cfg.mlp != "none") {
  const int64_t d = cfg.d_model, ff = cfg.ff_dim();
  ln1 = register_module("ln1", BlockNorm(cfg.block_norm, d, cfg.ln_eps));
  mixer = register_module("mixer", make_mixer(spec, cfg));
  if (has_mlp_) {
    ln2 = register_module("ln2", BlockNorm(cfg.block_norm, d, cfg.ln_eps));
    fc = register_module("fc", linear_layer(torch::nn::LinearOptions(d, gated_ ? 2 * ff : ff).bias(cfg.mlp_bias)));
    proj = register_module("proj", linear_layer(torch::nn::LinearOptions(ff, d).bias(cfg.mlp_bias)));
    init_gpt2_linear(fc);
    init_gpt2_linear(proj, 0.02 / std::sqrt(2.0 * static_cast<double>(cfg.n_layers)));
  }
  drop = register_module("drop", Dropout(cfg.dropout));  // draws nothing: the weights' draws keep their order
}

torch::Tensor Block::activation(const torch::Tensor& x) const {
  if (activation_ == "silu") return torch::silu(x);
  if (activation_ == "relu") return torch::relu(x);
  if (activation_ == "gelu") return torch::gelu(x);
  return kernels::gelu_tanh(x);  // GPT-2's gelu_new
}

torch::Tensor Block::mlp(const torch::Tensor& x) {
  auto h = kernels::few_rows_linear(ln2(x), fc->weight, fc->bias);  // fc(...); a decode token's own loop
  if (gated_) {
    const int64_t ff = h.size(-1) / 2;
    h = activation(h.narrow(-1, 0, ff)) * h.narrow(-1, ff, ff);
  } else {
    h = activation(h);
  }
  return drop(kernels::few_rows_linear(h, proj->weight, proj->bias));
}

torch::Tensor Block::forward(const torch::Tensor& x) {
  auto h = x + mixer->forward(ln1(x));
  return has_mlp_ ? h + mlp(h) : h;
}

torch::Tensor Block::step(const torch::Tensor& x, MixerState& state) {
  auto h = x + mixer->step(ln1(x), state);
  return has_mlp_ ? h + mlp(h) : h;
}

GPTImpl::GPTImpl(const ModelConfig& cfg) : cfg_(cfg) {
  validate(cfg_);
  if (cfg_.encoder_decoder())
    throw ConfigError(
        "encoder_layers",
        "an encoder-decoder configuration: it builds a Seq2Seq model (models/seq2seq/seq2seq.h), not a GPT");
  wte = register_module("wte", embedding_layer(cfg.vocab, cfg.d_model));
  if (cfg.positions == "learned") wpe = register_module("wpe", embedding_layer(cfg.context, cfg.d_model));
  if (!SkipInitialisation::active()) {
    torch::NoGradGuard guard;
    wte->weight.normal_(0.0, 0.02);
    if (wpe) wpe->weight.normal_(0.0, 0.02);
  }
  drop = register_module("drop", Dropout(cfg.dropout));
  auto list = register_module("blocks", torch::nn::ModuleList());
  for (const auto& spec : cfg.layers) {
    blocks_.push_back(std::make_shared<Block>(spec, cfg));
    list->push_back(blocks_.back());
  }
  ln_f = register_module("ln_f", BlockNorm(cfg.block_norm, cfg.d_model, cfg.ln_eps));
  if (!cfg.tied_head) {
    lm_head = register_module("lm_head", linear_layer(torch::nn::LinearOptions(cfg.d_model, cfg.vocab).bias(false)));
    init_gpt2_linear(lm_head);
  }
}

torch::Tensor GPTImpl::forward(const torch::Tensor& idx, std::vector<torch::Tensor>* layer_outputs) {
  return head(features(idx, layer_outputs));
}

torch::Tensor GPTImpl::head(const torch::Tensor& features) { return kernels::few_rows_linear(features, head_weight()); }

const torch::Tensor& GPTImpl::head_weight() const { return lm_head ? lm_head->weight : wte->weight; }

std::pair<torch::Tensor, torch::Tensor> GPTImpl::labelled_features(const torch::Tensor& idx,
                                                                   const torch::Tensor& targets) {
  const auto h = features(idx);
  const auto flat = targets.reshape({-1});
  const auto at = (flat >= 0).nonzero().squeeze(1);
  return {h.reshape({-1, h.size(-1)}).index_select(0, at), flat.index_select(0, at)};
}

std::pair<torch::Tensor, torch::Tensor> GPTImpl::labelled_logits(const torch::Tensor& idx,
                                                                 const torch::Tensor& targets) {
  auto [rows, scored] = labelled_features(idx, targets);
  return {head(rows), scored};
}

torch::Tensor GPTImpl::features(const torch::Tensor& idx, std::vector<torch::Tensor>* layer_outputs) {
  const int64_t T = idx.size(1);
  TORCH_CHECK(T <= cfg_.context, "sequence of ", T, " tokens is longer than the model's context of ", cfg_.context);
  auto x = wte(idx);
  if (wpe) x = x + wpe(torch::arange(T, idx.options().dtype(torch::kLong)));  // rotary positions live in the mixers
  x = drop(x);
  if (layer_outputs) layer_outputs->push_back(x);
  for (auto& block : blocks_) {
    x = block->forward(x);
    if (layer_outputs) layer_outputs->push_back(x);
  }
  return ln_f(x);
}

torch::Tensor GPTImpl::step(const torch::Tensor& tokens, GenerationState& state) {
  TORCH_CHECK(!cfg_.bounded_positions() || state.position < cfg_.context, "generation past the model's context of ",
              cfg_.context, " tokens: its learned position table has ", cfg_.context, " rows");
  if (state.layers.empty()) state.layers.resize(blocks_.size());
  auto x = wte(tokens);
  // Static decoding reads the position from the device, so that a captured step reads the current one on replay.
  const auto& device_position = state.position_tensor;
  if (wpe)
    x = x + (device_position.defined() ? wpe->weight.index_select(0, device_position) : wpe->weight[state.position]);
  for (size_t i = 0; i < blocks_.size(); ++i) {
    state.layers[i].position = state.position;
    state.layers[i].position_tensor = device_position;
    x = blocks_[i]->step(x, state.layers[i]);
  }
  ++state.position;
  if (device_position.defined()) device_position.add_(1);
  return head(ln_f(x));
}

int64_t GPTImpl::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

void GPTImpl::set_reference_kernels(bool on) {
  for (auto& block : blocks_) block->mixer->set_reference_kernels(on);
}

double GPTImpl::max_state_abs() const {
  double m = 0.0;
  for (const auto& block : blocks_) m = std::max(m, block->mixer->last_state_max_abs());
  return m;
}

}  // namespace fwlab
