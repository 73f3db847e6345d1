// Static decoding and its CUDA graph (models/decode_graph.h).
#include "models/decode_graph.h"

#include <optional>

#include "models/fused_projection.h"

#if defined(FWLAB_TORCH_CUDA)
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/version.h>
#endif

namespace fwlab {

void make_static(GenerationState& state, int64_t capacity, torch::Device device) {
  TORCH_CHECK(!state.layers.empty(), "static decoding: the state has taken no step yet");
  TORCH_CHECK(!state.position_tensor.defined(), "static decoding: the state is static already");
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
  state.position_tensor = torch::full({1}, state.position, torch::TensorOptions().dtype(torch::kLong).device(device));
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

void AddressKeeper::rollback() {
  const auto slots = state_slots(state_);
  for (size_t i = 0; i < slots.size() && i < before_.size(); ++i) *slots[i] = before_[i];
}

std::string decode_graph_refusal(GPT& model) {
  if (!model->wte->weight.is_cuda()) return "the model is not on a CUDA device";
#if !defined(FWLAB_TORCH_CUDA)
  return "fwlab was built without a CUDA libtorch's headers (FWLAB_TORCH_CUDA; kernels/CMakeLists.txt)";
#else
  if (model->config().rope_positions()) return "rotary positions are applied at a host-side position";
  return "";
#endif
}

struct DecodeGraph::Graph {
#if defined(FWLAB_TORCH_CUDA)
  std::optional<at::cuda::CUDAGraph> graph;   // made at the capture: making one touches the device
  std::optional<c10::cuda::CUDAStream> side;  // the capture's stream, which the uncaptured step runs on too
#endif
  torch::Tensor tokens, logits;            // the captured step's input and output
  std::vector<torch::Tensor> slots, pins;  // what a replay reads and writes, held while it replays
  // The parameters at the capture, and each one's address and version then: a replay reads them where they were, so
  // an update in place (a version) or new storage (set_data, a move) means capturing again. The list itself is
  // kept so that a token costs a comparison, not a walk over the module tree.
  std::vector<torch::Tensor> param_tensors;
  std::vector<std::pair<const void*, int64_t>> params;
  bool captured = false, refused = false;  // refused: a capture failed
};

DecodeGraph::DecodeGraph(GPT model, GenerationState& state, int64_t capacity)
    : model_(std::move(model)), state_(state), capacity_(capacity), graph_(std::make_unique<Graph>()) {
  make_static(state_, capacity_, model_->wte->weight.device());
}

DecodeGraph::~DecodeGraph() = default;

bool DecodeGraph::captured() const { return graph_->captured; }

void DecodeGraph::check_room(const torch::Tensor& tokens) const {  // the step's host checks, which a replay skips
  const auto& cfg = model_->config();
  TORCH_CHECK(!graph_->captured || tokens.sizes() == graph_->tokens.sizes(), "DecodeGraph: tokens of shape ",
              tokens.sizes(), " where the captured step takes ", graph_->tokens.sizes());
  TORCH_CHECK(!cfg.bounded_positions() || state_.position < cfg.context, "generation past the model's context of ",
              cfg.context, " tokens: its learned position table has ", cfg.context, " rows");
  TORCH_CHECK(state_.position < capacity_, "static decoding past its caches' capacity of ", capacity_, " tokens");
}

namespace {

std::vector<std::pair<const void*, int64_t>> parameter_stamps(const std::vector<torch::Tensor>& params) {
  std::vector<std::pair<const void*, int64_t>> out;
  out.reserve(params.size());
  for (const auto& p : params) out.emplace_back(p.data_ptr(), static_cast<int64_t>(p._version()));
  return out;
}

}  // namespace

bool DecodeGraph::graph_current() {
  auto slots = state_slots(state_);
  slots.push_back(&state_.position_tensor);
  if (slots.size() != graph_->slots.size()) return false;
  for (size_t i = 0; i < slots.size(); ++i)
    if (!slots[i]->is_same(graph_->slots[i])) return false;
  return parameter_stamps(graph_->param_tensors) == graph_->params;
}

torch::Tensor DecodeGraph::uncaptured(const torch::Tensor& tokens) {
  AddressKeeper keeper(state_);
  auto logits = model_->step(tokens, state_);
  replayable_ = keeper.restore();
  return logits;
}

#if defined(FWLAB_TORCH_CUDA)
namespace {

void begin_capture(at::cuda::CUDAGraph& graph) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
  graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);  // another thread's CUDA calls do not void it
#else
  graph.capture_begin();
#endif
}

// Records one step into g (on its side stream: a capture cannot run on the default one). The capture runs the step's
// host code once without running its kernels: the host position is put back, and the replay is what steps. Every
// kernel's first-use check ran in the uncaptured step before, so none runs (and synchronises) here. False, with the
// state as it was, where the capture failed.
bool capture_step(GPT& model, GenerationState& state, DecodeGraph::Graph& g, const torch::Tensor& tokens) {
  g.tokens = tokens.clone();
  const int64_t position = state.position;
  torch::cuda::synchronize(tokens.get_device());
  const c10::cuda::CUDAStreamGuard on_side(*g.side);
  AddressKeeper keeper(state);
  g.graph.emplace();
  FusedProjection::pin_kept_into(&g.pins);
  bool kept = false;
  try {
    begin_capture(*g.graph);
    g.logits = model->step(g.tokens, state);
    kept = keeper.restore();  // the copies back into the state's tensors are part of the graph
    g.graph->capture_end();
  } catch (const std::exception&) {
    try {
      g.graph->capture_end();  // leaves capture mode, if the failure left the stream in it
    } catch (const std::exception&) {
    }
    kept = false;
  }
  FusedProjection::pin_kept_into(nullptr);
  state.position = position;
  if (!kept) keeper.rollback(), g.graph.reset(), g.pins.clear();
  torch::cuda::synchronize(tokens.get_device());
  return kept;
}

}  // namespace
#endif

torch::Tensor DecodeGraph::step(const torch::Tensor& tokens) {
  const torch::NoGradGuard no_grad;
  check_room(tokens);
#if defined(FWLAB_TORCH_CUDA)
  auto& g = *graph_;
  if (g.captured && !graph_current()) g.captured = false, g.graph.reset(), g.pins.clear();  // capture again
  if (decode_graph_refusal(model_).empty() && !g.refused) {
    const auto device = static_cast<c10::DeviceIndex>(tokens.get_device());
    if (!g.side) g.side = c10::cuda::getStreamFromPool(false, device);
    if (!g.captured && replayable_) {
      g.captured = capture_step(model_, state_, g, tokens), g.refused = !g.captured;
      g.slots.clear();
      for (auto* slot : state_slots(state_)) g.slots.push_back(*slot);
      g.slots.push_back(state_.position_tensor);
      g.param_tensors = model_->parameters(), g.params = parameter_stamps(g.param_tensors);
    }
    if (g.captured) {
      g.tokens.copy_(tokens);
      g.graph->replay();
      ++state_.position;
      return g.logits.clone();
    }
    torch::cuda::synchronize(device);  // the uncaptured step on the capture's stream (its library workspaces)
    const c10::cuda::CUDAStreamGuard on_side(*g.side);
    auto logits = uncaptured(tokens);
    torch::cuda::synchronize(device);
    return logits;
  }
#endif
  return uncaptured(tokens);
}

}  // namespace fwlab
