#include "models/gpt.h"

#include <fmt/format.h>

#include <cmath>

#include "models/mixers.h"

namespace fwlab {

std::shared_ptr<Mixer> make_mixer(const MixerSpec& spec, const ModelConfig& cfg) {
  if (spec.kind == "softmax") return std::make_shared<SoftmaxAttention>(cfg, 0);
  if (spec.kind == "local") return std::make_shared<SoftmaxAttention>(cfg, spec.window);
  if (spec.kind == "fast_weight") return std::make_shared<FastWeight>(spec, cfg);
  if (spec.kind == "sru" || spec.kind == "srupp") return std::make_shared<Sru>(spec, cfg);
  throw ConfigError("kind", fmt::format("unknown mixer kind '{}'", spec.kind));
}

Block::Block(const MixerSpec& spec, const ModelConfig& cfg) : gelu_approximation_(cfg.activation == "gelu" ? "none" : "tanh") {
  const int64_t d = cfg.d_model;
  ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(cfg.ln_eps)));
  mixer = register_module("mixer", make_mixer(spec, cfg));
  ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(cfg.ln_eps)));
  fc = register_module("fc", torch::nn::Linear(d, cfg.ff_dim()));
  proj = register_module("proj", torch::nn::Linear(cfg.ff_dim(), d));
  drop = register_module("drop", Dropout(cfg.dropout));
  init_gpt2_linear(fc);
  init_gpt2_linear(proj, 0.02 / std::sqrt(2.0 * static_cast<double>(cfg.n_layers)));
}

torch::Tensor Block::mlp(const torch::Tensor& x) { return drop(proj(torch::gelu(fc(ln2(x)), gelu_approximation_))); }

torch::Tensor Block::forward(const torch::Tensor& x) {
  auto h = x + mixer->forward(ln1(x));
  return h + mlp(h);
}

torch::Tensor Block::step(const torch::Tensor& x, MixerState& state) {
  auto h = x + mixer->step(ln1(x), state);
  return h + mlp(h);
}

GPTImpl::GPTImpl(const ModelConfig& cfg) : cfg_(cfg) {
  validate(cfg_);
  wte = register_module("wte", torch::nn::Embedding(cfg.vocab, cfg.d_model));
  wpe = register_module("wpe", torch::nn::Embedding(cfg.context, cfg.d_model));
  {
    torch::NoGradGuard guard;
    wte->weight.normal_(0.0, 0.02);
    wpe->weight.normal_(0.0, 0.02);
  }
  drop = register_module("drop", Dropout(cfg.dropout));
  auto list = register_module("blocks", torch::nn::ModuleList());
  for (const auto& spec : cfg.layers) {
    blocks_.push_back(std::make_shared<Block>(spec, cfg));
    list->push_back(blocks_.back());
  }
  ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({cfg.d_model}).eps(cfg.ln_eps)));
}

torch::Tensor GPTImpl::forward(const torch::Tensor& idx, std::vector<torch::Tensor>* layer_outputs) {
  return head(features(idx, layer_outputs));
}

torch::Tensor GPTImpl::head(const torch::Tensor& features) { return torch::matmul(features, wte->weight.t()); }

std::pair<torch::Tensor, torch::Tensor> GPTImpl::labelled_logits(const torch::Tensor& idx, const torch::Tensor& targets) {
  const auto h = features(idx);
  const auto flat = targets.reshape({-1});
  const auto at = (flat >= 0).nonzero().squeeze(1);
  return {head(h.reshape({-1, h.size(-1)}).index_select(0, at)), flat.index_select(0, at)};
}

torch::Tensor GPTImpl::features(const torch::Tensor& idx, std::vector<torch::Tensor>* layer_outputs) {
  const int64_t T = idx.size(1);
  TORCH_CHECK(T <= cfg_.context, "sequence of ", T, " tokens is longer than the model's context of ", cfg_.context);
  auto pos = torch::arange(T, idx.options().dtype(torch::kLong));
  auto x = drop(wte(idx) + wpe(pos));
  if (layer_outputs) layer_outputs->push_back(x);
  for (auto& block : blocks_) {
    x = block->forward(x);
    if (layer_outputs) layer_outputs->push_back(x);
  }
  return ln_f(x);
}

torch::Tensor GPTImpl::step(const torch::Tensor& tokens, GenerationState& state) {
  TORCH_CHECK(state.position < cfg_.context, "generation past the model's context of ", cfg_.context, " tokens");
  if (state.layers.empty()) state.layers.resize(blocks_.size());
  auto x = wte(tokens) + wpe->weight[state.position];
  for (size_t i = 0; i < blocks_.size(); ++i) x = blocks_[i]->step(x, state.layers[i]);
  ++state.position;
  return torch::matmul(ln_f(x), wte->weight.t());
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
