// Greedy decoding as one CUDA graph per token (issue 56): on a GPU a decode step of a small model is bound by the CPU
// issuing its few hundred launches, not by the GPU. A graph records the step's launches once and replays them.
//
// A graph replays fixed kernels on fixed addresses, so the step must keep every tensor's shape and address:
// "static decoding" (make_static) gives the softmax layers caches of a fixed capacity written at a device-side
// position, and the position itself lives on the device; AddressKeeper copies whatever a layer's step returns as its
// new state back into the tensors the state held before, so that the next replay reads it there. Both are plain
// libtorch and run on the CPU too, where the tests bind them to the usual step. The capture itself needs a CUDA
// libtorch (FWLAB_TORCH_CUDA); elsewhere, or for a model it cannot take, DecodeGraph runs the static step uncaptured.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "models/gpt.h"

namespace fwlab {

// Puts a state that has taken at least one step, and is not static yet, into static decoding: each softmax layer's
// cache moved into buffers of `capacity` tokens, the position copied to `device` (GenerationState::position_tensor).
void make_static(GenerationState& state, int64_t capacity, torch::Device device);

// The tensors a step may replace, every layer's, in a fixed order.
std::vector<torch::Tensor*> state_slots(GenerationState& state);

// Keeps a step's state at its addresses: construct it before the step, call restore() after. Each slot the step
// rebound to a new tensor of the same shape and dtype is copied into the tensor it held before and rebound to it;
// restore() is false where a slot changed shape, dtype or definedness (such a step cannot be replayed).
// rollback() rebinds every slot to what it held before, copying nothing (a capture that failed ran no kernel).
class AddressKeeper {
 public:
  explicit AddressKeeper(GenerationState& state);
  bool restore();
  void rollback();

 private:
  GenerationState& state_;
  std::vector<torch::Tensor> before_;
};

// Why `model` cannot decode in a CUDA graph ("" when it can): not on CUDA, fwlab built without a CUDA libtorch, or
// rotary positions (read on the host at each step). A step whose state changes shape (a window still filling) is
// found out by its first, uncaptured step and keeps running uncaptured.
std::string decode_graph_refusal(GPT& model);

// Greedy decoding one token at a time after a prompt: the first step() runs the static step uncaptured (every
// kernel's first-use check and every lazily made tensor happen then), the second captures it and replays it, every
// later one replays it. step() returns the logits [B, vocab] (its own copy). The graph reads fixed addresses: a
// step finds out whether the state's tensors or the model's parameters changed since the capture (another step on
// the state, an optimizer step, a weight load) and captures again; a capture that fails runs the step uncaptured,
// from then on.
class DecodeGraph {
 public:
  // `state` has taken the prompt's steps; `capacity`: the most tokens the softmax caches will hold.
  DecodeGraph(GPT model, GenerationState& state, int64_t capacity);
  ~DecodeGraph();
  torch::Tensor step(const torch::Tensor& tokens);
  bool captured() const;  // whether a graph replays the steps (false: the static step runs uncaptured)

 public:
  struct Graph;  // the captured step (a CUDA libtorch's at::cuda::CUDAGraph and its static tensors)

 private:
  torch::Tensor uncaptured(const torch::Tensor& tokens);
  void check_room(const torch::Tensor& tokens) const;
  bool graph_current();  // the captured graph still reads what the state and the model hold
  GPT model_;
  GenerationState& state_;
  int64_t capacity_;
  std::unique_ptr<Graph> graph_;
  bool replayable_ = false;  // the last uncaptured step kept every state tensor's shape
};

}  // namespace fwlab
