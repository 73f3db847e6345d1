// One generated token of the decay rule on the CPU, every (batch, head) in one plain loop with no libtorch op inside
// (a decode step through the general path costs ~37 libtorch ops a layer, most of its time at batch 1). The general
// path (models/fast_weight.cpp over decay_recurrence) is its twin; tests/test_model.cpp binds them.
#pragma once

#include <torch/torch.h>

namespace fwlab::kernels {

// The layer's projections of one token: what the decode step turns into features, gates and the new state.
struct DecayDecodeInputs {
  torch::Tensor qkv;           // [B, 3 H hd]: q, then k, then v (the fused projection's rows)
  torch::Tensor z, f;          // [B, H hd], [B, H m]: the value- and key-side gates before their sigmoid
  torch::Tensor phi_w, phi_b;  // the projection feature map: [H, m, hd], [H, m] or undefined
  double query_scale = 1.0;    // the map's factor on q before its projection
  bool relu = false;           // the map's activation (relu or none)
  torch::Tensor S;             // [B, H, hd, m] before the token (undefined: zeros)
};

struct DecayDecodeResult {
  torch::Tensor y;  // [B, H hd]
  torch::Tensor S;  // [B, H, hd, m] after the token (a new tensor: states others hold are never written)
};

// fq = act(scale q Wφᵀ + bφ), fk = act(k Wφᵀ + bφ), a = σ(z), b = σ(f); S' = diag(a) S diag(b) + v fkᵀ, y = S' fq.
// Contiguous float or double tensors of one dtype on the CPU.
DecayDecodeResult decay_decode_step(const DecayDecodeInputs& in);

}  // namespace fwlab::kernels
