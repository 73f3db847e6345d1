// The encoder-decoder (models/seq2seq/seq2seq.h). Initialisation follows fairseq's transformer: embeddings N(0, d^-1/2)
// with a zero pad row, Xavier-uniform linear layers with zero biases; the decoder's self mixers initialise as
// make_mixer does for every fwlab model.
#include "models/seq2seq/seq2seq.h"

#include <cmath>

namespace fwlab {

namespace {

torch::nn::Linear xavier_linear(int64_t in, int64_t out, bool bias) {
  torch::nn::Linear layer(torch::nn::LinearOptions(in, out).bias(bias));
  torch::nn::init::xavier_uniform_(layer->weight);
  if (bias) torch::nn::init::zeros_(layer->bias);
  return layer;
}

torch::nn::LayerNorm layer_norm(const ModelConfig& cfg) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({cfg.d_model}).eps(cfg.ln_eps));
}

}  // namespace

torch::Tensor sinusoidal_positions(int64_t first, int64_t n, int64_t dim, const torch::TensorOptions& options) {
  const int64_t half = dim / 2;
  const double step = std::log(10000.0) / static_cast<double>(std::max<int64_t>(half - 1, 1));
  auto freqs = torch::exp(torch::arange(half, options.dtype(torch::kDouble)) * -step);
  auto angles = torch::arange(first, first + n, options.dtype(torch::kDouble)).unsqueeze(1) * freqs.unsqueeze(0);
  auto table = torch::cat({torch::sin(angles), torch::cos(angles)}, 1);
  if (dim % 2 == 1) table = torch::cat({table, torch::zeros({n, 1}, table.options())}, 1);
  return table.to(options.dtype());
}

torch::Tensor feed_forward(torch::nn::Linear& fc, torch::nn::Linear& proj, const std::string& activation,
                           const torch::Tensor& x) {
  auto h = fc(x);
  if (activation == "relu")
    h = torch::relu(h);
  else if (activation == "silu")
    h = torch::silu(h);
  else
    h = torch::gelu(h, activation == "gelu" ? "none" : "tanh");
  return proj(h);
}

EncoderLayerImpl::EncoderLayerImpl(const ModelConfig& cfg) : activation_(cfg.activation) {
  if (cfg.encoder.kind == "srupp")
    sru = register_module("sru", BidirectionalSru(cfg.encoder, cfg));
  else
    attn = register_module("attn", PaddedAttention(MixerSpec{}, cfg));
  ln1 = register_module("ln1", layer_norm(cfg));
  fc = register_module("fc", xavier_linear(cfg.d_model, cfg.ff_dim(), cfg.mlp_bias));
  proj = register_module("proj", xavier_linear(cfg.ff_dim(), cfg.d_model, cfg.mlp_bias));
  ln2 = register_module("ln2", layer_norm(cfg));
  drop = register_module("drop", Dropout(cfg.dropout));
}

torch::Tensor EncoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& pad) {
  // The SRU++ mixer applies its own residual dropout, as the decoder's mixers do.
  auto h = ln1(x + (sru ? sru(x, pad) : drop(attn(x, attn->remember(x, pad)))));
  return ln2(h + drop(feed_forward(fc, proj, activation_, h)));
}

DecoderLayerImpl::DecoderLayerImpl(const MixerSpec& spec, const ModelConfig& cfg) : activation_(cfg.activation) {
  mixer = register_module("mixer", make_mixer(spec, cfg));
  ln1 = register_module("ln1", layer_norm(cfg));
  cross = register_module("cross", PaddedAttention(cfg.cross, cfg));
  ln2 = register_module("ln2", layer_norm(cfg));
  fc = register_module("fc", xavier_linear(cfg.d_model, cfg.ff_dim(), cfg.mlp_bias));
  proj = register_module("proj", xavier_linear(cfg.ff_dim(), cfg.d_model, cfg.mlp_bias));
  ln3 = register_module("ln3", layer_norm(cfg));
  drop = register_module("drop", Dropout(cfg.dropout));
}

// Post-LN: each sublayer's output (the mixers apply their own residual dropout) is added, then normalised.
torch::Tensor DecoderLayerImpl::after_mixer(const torch::Tensor& x, const torch::Tensor& mixed,
                                            const CrossMemory& memory) {
  auto h = ln1(x + mixed);
  h = ln2(h + drop(cross(h, memory)));
  return ln3(h + drop(feed_forward(fc, proj, activation_, h)));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const CrossMemory& memory) {
  return after_mixer(x, mixer->forward(x), memory);
}

torch::Tensor DecoderLayerImpl::step(const torch::Tensor& x, MixerState& state, const CrossMemory& memory) {
  auto one = x.unsqueeze(1);
  return after_mixer(one, mixer->step(x, state).unsqueeze(1), memory).squeeze(1);
}

}  // namespace fwlab
