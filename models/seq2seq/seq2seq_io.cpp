#include "models/seq2seq/seq2seq_io.h"

#include <fmt/format.h>

#include <stdexcept>

#include "models/mixers.h"

namespace fwlab {

void save_seq2seq(const std::string& path, const Seq2Seq& model, std::map<std::string, std::string> metadata) {
  save_module(path, *model, model->config(), std::move(metadata));
}

Seq2Seq load_seq2seq(const std::string& path) {
  safetensors::Header header;
  auto tensors = load_tensors(path, &header);
  const auto cfg = checkpoint_model_config(path, header);
  if (!cfg.encoder_decoder())
    throw safetensors::FormatError(
        fmt::format("{}: a decoder-only checkpoint: a translation job needs an encoder-decoder", path));
  Seq2Seq model(cfg);
  load_module(*model, tensors, path);
  return model;
}

Seq2SeqConversion convert_seq2seq(const Seq2Seq& source, const ModelConfig& target, uint64_t seed) {
  check_only_mixers_change(source->config(), target);
  torch::manual_seed(seed);
  Seq2SeqConversion result{Seq2Seq(target), {}};
  const auto& ref = source->embed->weight;
  result.model->to(ref.device(), ref.scalar_type());
  copy_shared_tensors(*source, *result.model, result.report);
  const auto& before = source->config().layers;
  for (size_t i = 0; i < result.model->decoder_layers().size(); ++i) {
    auto fw = std::dynamic_pointer_cast<FastWeight>(result.model->decoder_layers()[i]->mixer);
    if (fw && !(before[i] == target.layers[i]))
      rescale_copied_values(*fw, fmt::format("decoder.{}.mixer.qkv.", i), result.report);
  }
  return result;
}

namespace {

void require_same_layout(const NamedTensors& first, const NamedTensors& other, const std::string& first_path,
                         const std::string& path) {
  if (other.size() != first.size())
    throw std::runtime_error(fmt::format("{}: holds {} tensors, {} holds {}: not checkpoints of one model", path,
                                         other.size(), first_path, first.size()));
  for (size_t i = 0; i < first.size(); ++i)
    if (other[i].first != first[i].first || other[i].second.sizes() != first[i].second.sizes())
      throw std::runtime_error(fmt::format("{}: tensor '{}' differs in name or shape from {}'s '{}'", path,
                                           other[i].first, first_path, first[i].first));
}

}  // namespace

void average_checkpoints(const std::vector<std::string>& paths, const std::string& out) {
  if (paths.empty()) throw std::runtime_error("average_checkpoints: no checkpoints to average");
  safetensors::Header header;
  auto first = load_tensors(paths[0], &header);
  std::vector<torch::Tensor> sums;
  for (auto& [name, t] : first) sums.push_back(t.is_floating_point() ? t.to(torch::kDouble) : t);
  for (size_t p = 1; p < paths.size(); ++p) {
    auto other = load_tensors(paths[p]);
    require_same_layout(first, other, paths[0], paths[p]);
    for (size_t i = 0; i < other.size(); ++i)
      sums[i] = other[i].second.is_floating_point() ? sums[i] + other[i].second.to(torch::kDouble) : other[i].second;
  }
  NamedTensors averaged;
  const double n = static_cast<double>(paths.size());
  for (size_t i = 0; i < first.size(); ++i)
    averaged.emplace_back(first[i].first, first[i].second.is_floating_point()
                                              ? (sums[i] / n).to(first[i].second.scalar_type())
                                              : sums[i]);
  header.metadata["fwlab.averaged_checkpoints"] = std::to_string(paths.size());
  save_tensors(out, averaged, header.metadata);
}

}  // namespace fwlab
