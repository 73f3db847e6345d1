// Seq2Seq (models/seq2seq/seq2seq.h): embedding, encoder, decoder, the tied output layer, and decoding step by step.
#include <fmt/format.h>

#include <cmath>

#include "models/seq2seq/seq2seq.h"

namespace fwlab {

namespace {

// A self mixer's state, rows reordered. A softmax KV cache is a view of the first tokens of a larger buffer
// (models/mixer.h): the buffer is reordered and the view taken again.
void select_state_rows(MixerState& s, const torch::Tensor& rows) {
  if (s.k_buffer.defined()) {
    const int64_t used = s.k.size(2);
    s.k_buffer = rows_if_defined(s.k_buffer, rows), s.v_buffer = rows_if_defined(s.v_buffer, rows);
    s.k = s.k_buffer.narrow(2, 0, used), s.v = s.v_buffer.narrow(2, 0, used);
  } else {
    s.k = rows_if_defined(s.k, rows), s.v = rows_if_defined(s.v, rows);
  }
  s.S = rows_if_defined(s.S, rows), s.z = rows_if_defined(s.z, rows), s.c = rows_if_defined(s.c, rows),
  s.conv = rows_if_defined(s.conv, rows);
}

}  // namespace

void DecoderState::select_rows(const torch::Tensor& rows) {
  for (auto& s : self) select_state_rows(s, rows);
  for (auto& m : cross) m.select_rows(rows);
}

int64_t DecoderState::bytes() const {
  int64_t n = 0;
  auto add = [&](const torch::Tensor& t) { n += t.defined() ? static_cast<int64_t>(t.nbytes()) : 0; };
  for (const auto& s : self)
    for (const auto& t : {s.S, s.z, s.c, s.k, s.v, s.conv}) add(t);
  for (const auto& m : cross)
    for (const auto& t : {m.k, m.v, m.S, m.z}) add(t);
  return n;
}

Seq2SeqImpl::Seq2SeqImpl(const ModelConfig& cfg) : cfg_(cfg) {
  validate(cfg_);
  if (!cfg_.encoder_decoder())
    throw ConfigError("encoder_layers", "a Seq2Seq model needs an encoder (encoder_layers > 0)");
  embed = register_module("embed", torch::nn::Embedding(cfg.vocab, cfg.d_model));
  {
    torch::NoGradGuard guard;
    embed->weight.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(cfg.d_model)));
    embed->weight[kPad].zero_();
  }
  drop = register_module("drop", Dropout(cfg.dropout));
  // Lists, so that tensors are named encoder.<i>.* and decoder.<i>.*.
  auto encoder = register_module("encoder", torch::nn::ModuleList());
  for (int64_t i = 0; i < cfg.encoder_layers; ++i) encoder->push_back(encoder_.emplace_back(cfg));
  auto decoder = register_module("decoder", torch::nn::ModuleList());
  for (const auto& spec : cfg.layers) decoder->push_back(decoder_.emplace_back(spec, cfg));
}

torch::Tensor Seq2SeqImpl::embed_tokens(const torch::Tensor& tokens, int64_t first_position) {
  auto x = embed(tokens) * std::sqrt(static_cast<double>(cfg_.d_model));
  return drop(x + sinusoidal_positions(first_position, tokens.size(1), cfg_.d_model, x.options()));
}

std::vector<CrossMemory> Seq2SeqImpl::encode(const torch::Tensor& src) {
  auto pad = src.eq(kPad);
  auto x = embed_tokens(src, 0);
  for (auto& layer : encoder_) x = layer(x, pad);
  std::vector<CrossMemory> memory;
  for (auto& layer : decoder_) memory.push_back(layer->cross->remember(x, pad));
  return memory;
}

torch::Tensor Seq2SeqImpl::decode(const torch::Tensor& prev, const std::vector<CrossMemory>& memory) {
  auto x = embed_tokens(prev, 0);
  for (size_t i = 0; i < decoder_.size(); ++i) x = decoder_[i](x, memory[i]);
  return torch::matmul(x, embed->weight.t());  // shared output embedding
}

torch::Tensor Seq2SeqImpl::forward(const torch::Tensor& src, const torch::Tensor& prev) {
  return decode(prev, encode(src));
}

DecoderState Seq2SeqImpl::start(const torch::Tensor& src) {
  DecoderState state;
  state.cross = encode(src);
  state.self.resize(decoder_.size());
  return state;
}

torch::Tensor Seq2SeqImpl::step(const torch::Tensor& tokens, DecoderState& state) {
  auto x = embed_tokens(tokens.unsqueeze(1), state.position).squeeze(1);
  for (size_t i = 0; i < decoder_.size(); ++i) {
    state.self[i].position = state.position;
    x = decoder_[i]->step(x, state.self[i], state.cross[i]);
  }
  ++state.position;
  return torch::matmul(x, embed->weight.t());
}

void Seq2SeqImpl::set_reference_kernels(bool on) {
  for (auto& layer : encoder_)
    if (layer->sru) layer->sru->set_reference_kernels(on);
  for (auto& layer : decoder_) layer->mixer->set_reference_kernels(on);
}

}  // namespace fwlab
