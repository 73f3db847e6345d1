#include "models/transfer.h"

namespace fwlab {

std::vector<size_t> transferred_layers(const GPT& student, const GPT& teacher) {
  std::vector<size_t> out;
  const auto &s = student->config().layers, &t = teacher->config().layers;
  for (size_t i = 0; i < s.size() && i < t.size(); ++i)
    if (!(s[i] == t[i])) out.push_back(i);
  return out;
}

std::vector<torch::Tensor> transfer_mse(GPT& student, GPT& teacher, const torch::Tensor& idx,
                                        const std::vector<size_t>& layers) {
  std::vector<torch::Tensor> hidden, inputs, targets;
  {
    torch::NoGradGuard guard;
    teacher->forward(idx, &hidden);  // hidden[i]: the residual stream entering block i
    for (size_t layer : layers) {
      auto& block = *teacher->blocks().at(layer);
      inputs.push_back(block.ln1(hidden.at(layer)));
      targets.push_back(block.mixer->forward(inputs.back()));
    }
  }
  std::vector<torch::Tensor> out;
  for (size_t i = 0; i < layers.size(); ++i)
    out.push_back(torch::mse_loss(student->mixer(layers[i]).forward(inputs[i]), targets[i]));
  return out;
}

}  // namespace fwlab
