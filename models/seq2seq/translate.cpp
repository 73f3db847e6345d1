#include "models/seq2seq/translate.h"

namespace fwlab {

std::vector<Hypothesis> translate(Seq2Seq& model, const torch::Tensor& src, const BeamOptions& options) {
  torch::NoGradGuard guard;
  auto state = model->start(src);
  const auto device = src.device();
  StepDecoder decoder;
  decoder.step = [&](const torch::Tensor& tokens) {
    return torch::log_softmax(model->step(tokens.to(device), state), -1);
  };
  decoder.reorder = [&](const torch::Tensor& rows) { state.select_rows(rows.to(device)); };
  const int64_t batch = src.size(0);
  return options.beam == 1 ? greedy_search(decoder, batch, options) : beam_search(decoder, batch, options);
}

}  // namespace fwlab
