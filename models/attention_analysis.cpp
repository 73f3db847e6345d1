#include "models/attention_analysis.h"

#include <stdexcept>

namespace fwlab {

namespace {

// The input of every block's mixer (ln1 of the residual stream entering it).
std::vector<torch::Tensor> mixer_inputs(GPT& model, const torch::Tensor& idx) {
  std::vector<torch::Tensor> stream, out;
  model->forward(idx, &stream);
  for (size_t i = 0; i < model->blocks().size(); ++i) out.push_back(model->blocks()[i]->ln1(stream.at(i)));
  return out;
}

void add_per_head(std::vector<double>& sums, const torch::Tensor& per_query) {  // [B, H, T]
  const auto per_head = per_query.to(torch::kDouble).sum(std::vector<int64_t>{0, 2}).cpu();
  for (int64_t h = 0; h < per_head.size(0); ++h) sums.at(static_cast<size_t>(h)) += per_head[h].item().toDouble();
}

}  // namespace

torch::Tensor implied_attention(const torch::Tensor& coefficients) {
  const auto c = coefficients.mean(2).abs();
  const auto total = c.sum(-1, true);
  return torch::where(total > 0, c / total.clamp_min(1e-30), torch::zeros_like(c));
}

torch::Tensor attention_entropy(const torch::Tensor& w) {
  return -torch::where(w > 0, w * torch::log(w.clamp_min(1e-30)), torch::zeros_like(w)).sum(-1);
}

void add_attention_stats(GPT& student, GPT& teacher, const torch::Tensor& idx, AttentionStats& stats) {
  const auto &s_cfg = student->config(), &t_cfg = teacher->config();
  if (s_cfg.layers.size() != t_cfg.layers.size() || s_cfg.n_heads != t_cfg.n_heads)
    throw std::invalid_argument("attention analysis: the student and the teacher differ in layers or heads");
  torch::NoGradGuard guard;
  const auto s_in = mixer_inputs(student, idx), t_in = mixer_inputs(teacher, idx);
  const bool first = stats.layers.empty();  // the first batch sets the rows: one per compared layer
  size_t row = 0;
  for (size_t l = 0; l < s_in.size(); ++l) {
    const auto student_c = student->mixer(l).value_coefficients(s_in[l]);
    const auto teacher_c = teacher->mixer(l).value_coefficients(t_in[l]);
    if (!student_c.defined() || !teacher_c.defined()) continue;
    if (first) {
      stats.layers.push_back(l);
      for (auto* v : {&stats.distance, &stats.entropy, &stats.teacher_entropy})
        v->emplace_back(static_cast<size_t>(s_cfg.n_heads), 0.0);
    }
    const auto w = implied_attention(student_c), p = implied_attention(teacher_c);
    add_per_head(stats.distance.at(row), (w - p).pow(2).sum(-1).sqrt());
    add_per_head(stats.entropy.at(row), attention_entropy(w));
    add_per_head(stats.teacher_entropy.at(row), attention_entropy(p));
    ++row;
  }
  stats.queries += idx.size(0) * idx.size(1);
}

}  // namespace fwlab
