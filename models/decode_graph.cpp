// Static decoding and its CUDA graph (models/decode_graph.h).
#include "models/decode_graph.h"

#if defined(FWLAB_TORCH_CUDA)
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace fwlab {

void make_static(GenerationState& state, int64_t capacity, torch::Device device) {
  TORCH_CHECK(!state.layers.empty(), "static decoding: the state has taken no step yet");
  TORCH_CHECK(capacity > state.position, "static decoding: a capacity of ", capacity, " tokens leaves no room after ",
              state.position);
  for (auto& layer : state.layers) {
    if (!layer.k_buffer.defined() || !layer.k.defined()) continue;  // not a growing softmax cache
    auto fixed = [&](const torch::Tensor& rows) {
      auto shape = rows.sizes().vec();
      shape[2] = capacity;
      auto buffer = torch::zeros(shape, rows.options());
      buffer.narrow(2, 0, rows.size(2)).copy_(rows);
      return buffer;
    };
    layer.k_buffer = fixed(layer.k), layer.v_buffer = fixed(layer.v);
    layer.k = layer.v = torch::Tensor();  // the rows in use are the first `position` of the buffers
  }
  state.position_tensor =
      torch::full({1}, state.position, torch::TensorOptions().dtype(torch::kLong).device(device));
}

std::vector<torch::Tensor*> state_slots(GenerationState& state) {
  std::vector<torch::Tensor*> slots;
  for (auto& l : state.layers)
    for (auto* t : {&l.S, &l.z, &l.c, &l.k, &l.v, &l.conv, &l.k_buffer, &l.v_buffer}) slots.push_back(t);
  return slots;
}

AddressKeeper::AddressKeeper(GenerationState& state) : state_(state) {
  for (auto* slot : state_slots(state_)) before_.push_back(*slot);
}

bool AddressKeeper::restore() {
  const auto slots = state_slots(state_);
  if (slots.size() != before_.size()) return false;
  bool kept = true;
  for (size_t i = 0; i < slots.size(); ++i) {
    auto& now = *slots[i];
    const auto& was = before_[i];
    if (now.defined() != was.defined()) kept = false;
    if (!now.defined() || !was.defined() || now.is_same(was)) continue;
    if (now.sizes() != was.sizes() || now.scalar_type() != was.scalar_type() || now.device() != was.device()) {
      kept = false;
      continue;
    }
    was.copy_(now);
    now = was;
  }
  return kept;
}

std::string decode_graph_refusal(GPT& model) {
  if (!model->wte->weight.is_cuda()) return "the model is not on a CUDA device";
#if !defined(FWLAB_TORCH_CUDA)
  return "fwlab was built against a libtorch without CUDA";
#else
  if (model->config().rope_positions()) return "rotary positions are applied at a host-side position";
  return "";
#endif
}

struct DecodeGraph::Graph {
#if defined(FWLAB_TORCH_CUDA)
  at::cuda::CUDAGraph graph;
#endif
  torch::Tensor tokens, logits;  // the captured step's input and output
  bool captured = false;
};

DecodeGraph::DecodeGraph(GPT model, GenerationState& state, int64_t capacity)
    : model_(std::move(model)), state_(state), capacity_(capacity), graph_(std::make_unique<Graph>()) {
  make_static(state_, capacity_, model_->wte->weight.device());
}

DecodeGraph::~DecodeGraph() = default;

bool DecodeGraph::captured() const { return graph_->captured; }

void DecodeGraph::check_room() const {  // what the step checks on the host, which a replay does not run
  const auto& cfg = model_->config();
  TORCH_CHECK(!cfg.bounded_positions() || state_.position < cfg.context, "generation past the model's context of ",
              cfg.context, " tokens: its learned position table has ", cfg.context, " rows");
  TORCH_CHECK(state_.position < capacity_, "static decoding past its caches' capacity of ", capacity_, " tokens");
}

torch::Tensor DecodeGraph::uncaptured(const torch::Tensor& tokens) {
  AddressKeeper keeper(state_);
  auto logits = model_->step(tokens, state_);
  replayable_ = keeper.restore();
  return logits;
}

#if defined(FWLAB_TORCH_CUDA)
namespace {

// Records one step into `g` on a side stream (a capture cannot run on the default stream). The capture runs the
// step's host code once without running its kernels: the host position is put back, and the graph's replay is what
// steps. Every kernel's first-use check ran in the uncaptured step before, so none runs (and synchronises) here.
void capture_step(GPT& model, GenerationState& state, DecodeGraph::Graph& g, const torch::Tensor& tokens) {
  g.tokens = tokens.clone();
  const int64_t position = state.position;
  torch::cuda::synchronize(tokens.get_device());
  {
    const c10::cuda::CUDAStreamGuard on_side(c10::cuda::getStreamFromPool(false, static_cast<c10::DeviceIndex>(tokens.get_device())));
    AddressKeeper keeper(state);
    g.graph.capture_begin();
    g.logits = model->step(g.tokens, state);
    const bool kept = keeper.restore();  // the copies back into the state's tensors are part of the graph
    g.graph.capture_end();
    TORCH_CHECK(kept, "DecodeGraph: the captured step changed a state tensor's shape");
  }
  torch::cuda::synchronize(tokens.get_device());
  state.position = position;
  g.captured = true;
}

}  // namespace
#endif

torch::Tensor DecodeGraph::step(const torch::Tensor& tokens) {
  const torch::NoGradGuard no_grad;
  check_room();
#if defined(FWLAB_TORCH_CUDA)
  if (replayable_ && decode_graph_refusal(model_).empty()) {
    if (!graph_->captured) capture_step(model_, state_, *graph_, tokens);
    graph_->tokens.copy_(tokens);
    graph_->graph.replay();
    ++state_.position;
    return graph_->logits.clone();
  }
#endif
  return uncaptured(tokens);
}

}  // namespace fwlab
