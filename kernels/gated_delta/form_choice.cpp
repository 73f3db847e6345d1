#include "kernels/gated_delta/form_choice.h"

#include <ATen/CPUGeneratorImpl.h>

#include "kernels/gated_delta/form_store.h"

#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

namespace fwlab::kernels {

namespace {

struct Candidate {
  const char* name;
  int64_t chunk;  // 0: the fused recurrent kernel
};
constexpr Candidate kCandidates[] = {{"fused", 0}, {"chunk 16", 16}, {"chunk 32", 32}, {"chunk 64", 64}};

struct Choices {
  std::mutex mutex;
  std::string pinned = "auto";
  std::function<void(const DeltaFormChoice&)> listener;
  std::map<std::string, std::string> decided;  // shape class -> form
  std::string store;                           // form_store.h's file, or ""
  std::set<std::string> announced;             // classes the listener has heard of
};

Choices& choices() {
  static Choices c;
  return c;
}

RecurrenceResult run_form(const Candidate& form, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                          const torch::Tensor& alpha, const torch::Tensor& beta, const torch::Tensor& state0) {
  if (form.chunk == 0)
    return alpha.defined() ? gated_delta_recurrence_fused(q, k, v, alpha, beta, state0)
                           : delta_recurrence_fused(q, k, v, beta, state0);
  return gated_delta_recurrence_chunk_cpu(q, k, v, alpha, beta, state0, form.chunk);
}

std::string form_class(const torch::Tensor& q, const torch::Tensor& v, const torch::Tensor& alpha, bool backward) {
  std::ostringstream out;
  out << q.device().str() << ' ' << c10::toString(q.scalar_type()) << (alpha.defined() ? " gated" : " delta")
      << " D=" << v.size(3) << " M=" << q.size(3) << " T<=" << power_of_two_at_least(q.size(2))
      << (backward ? " backward" : " forward");
  return out.str();
}

// One candidate's time on random inputs shaped like the call's (B * H capped at 16), the better of two runs after
// a warm-up; forward and, where the call will need it, backward.
double candidate_ms(const Candidate& form, const torch::Tensor& q, const torch::Tensor& v, bool gated, bool backward) {
  const int64_t BH = std::min<int64_t>(16, q.size(0) * q.size(1)), T = q.size(2), M = q.size(3), D = v.size(3);
  const auto opt = q.options().requires_grad(false);
  const auto gen = at::detail::createCPUGenerator(20241127);
  auto randn = [&](int64_t w) { return torch::randn({1, BH, T, w}, gen, opt.device(torch::kCPU)).to(opt); };
  namespace F = torch::nn::functional;
  auto unit = [&] { return F::normalize(randn(M), F::NormalizeFuncOptions().dim(-1)); };
  std::vector<torch::Tensor> in{unit(), unit(), randn(D), gated ? torch::sigmoid(randn(1) + 2) : torch::Tensor(),
                                torch::sigmoid(randn(1))};
  for (auto& t : in)
    if (t.defined()) t.requires_grad_(backward);
  return race_ms([&] { return run_form(form, in[0], in[1], in[2], in[3], in[4], {}); }, backward);
}

DeltaFormChoice race(const torch::Tensor& q, const torch::Tensor& v, const torch::Tensor& alpha, bool backward) {
  DeltaFormChoice choice{form_class(q, v, alpha, backward), kCandidates[3].name, {}};
  if (!q.is_cpu()) return choice;
  torch::AutoGradMode grad(backward);
  const auto time = [&](const Candidate& form) {
    choice.ms.emplace_back(form.name, candidate_ms(form, q, v, alpha.defined(), backward));
    return choice.ms.back().second;
  };
  // The fused kernel keeps its place unless a chunked form is 10% faster.
  choice.chosen = kCandidates[0].name;
  double best = 0.9 * time(kCandidates[0]);
  for (size_t n = 1; n < std::size(kCandidates); ++n)
    if (const double ms = time(kCandidates[n]); ms < best) best = ms, choice.chosen = kCandidates[n].name;
  return choice;
}

Candidate candidate_named(const std::string& name) {
  for (const auto& c : kCandidates)
    if (name == c.name) return c;
  return kCandidates[3];  // chunk 64
}

}  // namespace

void on_delta_form_choice(std::function<void(const DeltaFormChoice&)> listener) {
  const std::lock_guard<std::mutex> lock(choices().mutex);
  choices().listener = std::move(listener);
}

void set_delta_form(const std::string& form) {
  TORCH_CHECK(form == "auto" || form == "fused" || form == "chunked", "set_delta_form: unknown form '", form, "'");
  const std::lock_guard<std::mutex> lock(choices().mutex);
  choices().pinned = form;
}

void reset_delta_form_choices() {
  const std::lock_guard<std::mutex> lock(choices().mutex);
  choices().decided.clear();
  choices().announced.clear();
}

void keep_delta_form_choices_in(const std::string& path) {
  const auto stored = path.empty() ? std::map<std::string, std::string>() : read_form_store(path);
  const std::lock_guard<std::mutex> lock(choices().mutex);
  choices().store = path;
  for (const auto& [shape, form] : stored) choices().decided[shape] = form;
}

std::map<std::string, std::string> delta_form_choices() {
  const std::lock_guard<std::mutex> lock(choices().mutex);
  return choices().decided;
}

void restore_delta_form_choices(const std::map<std::string, std::string>& decided) {
  const std::lock_guard<std::mutex> lock(choices().mutex);
  for (const auto& [shape, form] : decided) choices().decided[shape] = form;
}

double race_ms(const std::function<RecurrenceResult()>& run, bool backward) {
  auto once = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = run();
    if (backward) r.y.sum().backward();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  once();
  return std::min(once(), once());
}

RecurrenceResult run_chosen_form(const std::string& key, const std::string& chunked,
                                 const std::function<DeltaFormChoice()>& race_now,
                                 const std::function<RecurrenceResult(const std::string&)>& run) {
  auto& c = choices();
  std::unique_lock<std::mutex> lock(c.mutex);
  if (c.pinned != "auto") {
    const auto form = c.pinned == "fused" ? std::string("fused") : chunked;
    lock.unlock();
    return run(form);
  }
  if (const auto it = c.decided.find(key); it != c.decided.end()) {
    const auto form = it->second;
    const bool first_use = c.announced.insert(key).second;
    const auto listener = c.listener;
    lock.unlock();
    if (first_use && listener) listener({key, form, {}});  // kept or restored: no times
    return run(form);
  }
  const auto store = c.store;
  lock.unlock();
  auto choice = race_now();
  // Another process may have decided the class meanwhile: its decision stands, for this process too.
  if (!store.empty()) choice.chosen = add_to_form_store(store, key, choice.chosen);
  lock.lock();
  c.decided.emplace(key, choice.chosen);
  c.announced.insert(key);
  const auto listener = c.listener;
  lock.unlock();
  if (listener) listener(choice);
  return run(choice.chosen);
}

RecurrenceResult delta_family_recurrence(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                         const torch::Tensor& alpha, const torch::Tensor& beta,
                                         const torch::Tensor& state0) {
  const bool backward = gradients_needed({q, k, v, alpha, beta, state0});
  return run_chosen_form(
      form_class(q, v, alpha, backward), "chunk 64", [&] { return race(q, v, alpha, backward); },
      [&](const std::string& form) { return run_form(candidate_named(form), q, k, v, alpha, beta, state0); });
}

}  // namespace fwlab::kernels
