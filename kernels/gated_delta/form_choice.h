// Which form of the delta rule and the gated delta rule a model runs, decided by measurement on this machine. The
// first time a process meets a shape class (device, dtype, gated or not, D, M, T rounded up to a power of two,
// with or without a backward) it times the candidates on inputs of that shape (B * H capped at 16; one warm-up,
// then the better of two runs; the inputs drawn from a generator of its own, so the process's random stream is
// untouched): the fused recurrent kernel and the chunked kernel (chunk_cpu.cpp, around BLAS) at
// 16, 32 and 64 steps a chunk. The fastest runs that class for the rest of the process (a chunked form only where it
// beats the fused kernel by 10%: near-ties stay with one form from process to process); the listener hears each
// decision (the worker records a `kernel_choice` event). On devices other than the CPU the fused kernel is the
// naive loop, so the libtorch chunked form (64) runs there without a race.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/recurrences.h"

namespace fwlab::kernels {

// The length a shape class is named by (and its decision kept for): T rounded up to a power of two. Decay's form
// race (kernels/decay/form_race.h) classes its shapes the same way.
inline int64_t power_of_two_at_least(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

struct DeltaFormChoice {
  std::string shape_class;                         // e.g. "cpu Float gated D=64 M=64 T<=1024 backward"
  std::string chosen;                              // "fused" | "chunk 16" | "chunk 32" | "chunk 64" | "chunk cpu"
  std::vector<std::pair<std::string, double>> ms;  // each candidate's time, milliseconds; empty where no race
                                                   // ran (a kept or restored decision, or not the CPU)
};

// Called once per class and process, at its first use (from the thread that runs it): decided then, or kept.
void on_delta_form_choice(std::function<void(const DeltaFormChoice&)> listener);
// "auto" (the default: measure), "fused" or "chunked" (64 steps a chunk; decay's chunked CPU kernel): benchmarks
// and tests pin a form.
void set_delta_form(const std::string& form);
// Forgets every decision (tests).
void reset_delta_form_choices();
// Keeps the decisions in `path` (kernels/gated_delta/form_store.h): loads this machine's, and adds each new one.
// "" (the default): none kept.
void keep_delta_form_choices_in(const std::string& path);
// The decisions made so far (shape class -> form), and their restoration: a resumed job runs the forms its first
// process chose, so that it goes on bit for bit (the forms round differently).
std::map<std::string, std::string> delta_form_choices();
void restore_delta_form_choices(const std::map<std::string, std::string>& decided);

// A candidate's time for a race: `run` (and its backward where `backward`), the better of two runs after a warm-up,
// in milliseconds.
double race_ms(const std::function<RecurrenceResult()>& run, bool backward);

// The form decided for the shape class `key`: pinned (set_delta_form; `chunked` names the pinned chunked form), kept
// or restored, else raced now (race_now: the candidates' times and the fastest); `run` runs a form by its name.
// Each family (this file's delta rules, kernels/decay/form_race.cpp's decay rules) brings its classes and candidates.
RecurrenceResult run_chosen_form(const std::string& key, const std::string& chunked,
                                 const std::function<DeltaFormChoice()>& race_now,
                                 const std::function<RecurrenceResult(const std::string&)>& run);

// The delta rule (alpha undefined) or the gated delta rule (kernels/recurrences.h) in the form decided for the
// inputs' class.
RecurrenceResult delta_family_recurrence(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                         const torch::Tensor& alpha, const torch::Tensor& beta,
                                         const torch::Tensor& state0);

}  // namespace fwlab::kernels
