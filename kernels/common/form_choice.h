// Which form of an op a model runs, decided by measurement on this machine (each op brings its shape classes and
// candidates: kernels/delta/form_race.h, kernels/decay/form_race.h). The first time a process meets a shape class it
// times the candidates on inputs of that shape; the fastest runs that class for the rest of the process; the
// listener hears each decision (the worker records a `kernel_choice` event), and a store keeps them per machine
// (kernels/common/form_store.h).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/common/recurrence.h"

namespace fwlab::kernels {

// The length a shape class is named by (and its decision kept for): T rounded up to a power of two. Decay's form
// race (kernels/decay/form_race.h) classes its shapes the same way.
inline int64_t power_of_two_at_least(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

struct FormChoice {
  std::string family;                              // the op: "delta" (both delta rules) or "decay"
  std::string shape_class;                         // e.g. "cpu Float gated D=64 M=64 T<=1024 backward"
  std::string chosen;                              // "fused" | "chunk 16" | "chunk 32" | "chunk 64" | "chunk cpu"
  std::vector<std::pair<std::string, double>> ms;  // each candidate's time, milliseconds; empty where no race
                                                   // ran (a kept or restored decision, or not the CPU)
};

// Called once per class and process, at its first use (from the thread that runs it): decided then, or kept.
void on_form_choice(std::function<void(const FormChoice&)> listener);
// "auto" (the default: measure), "fused" or "chunked" (64 steps a chunk; decay's chunked CPU kernel): benchmarks
// and tests pin a form.
void pin_form(const std::string& form);
// Forgets every decision (tests).
void reset_form_choices();
// Keeps the decisions in `path` (kernels/common/form_store.h): loads this machine's, and adds each new one.
// "" (the default): none kept.
void keep_form_choices_in(const std::string& path);
// The decisions made so far (shape class -> form), and their restoration: a resumed job runs the forms its first
// process chose, so that it goes on bit for bit (the forms round differently).
std::map<std::string, std::string> form_choices();
void restore_form_choices(const std::map<std::string, std::string>& decided);

// A candidate's time for a race: `run` (and its backward where `backward`), the better of two runs after a warm-up,
// in milliseconds.
double race_ms(const std::function<RecurrenceResult()>& run, bool backward);

// The form decided for the shape class `key`: pinned (pin_form; `chunked` names the pinned chunked form), kept
// or restored, else raced now (race_now: the candidates' times and the fastest); `run` runs a form by its name.
// `family` names the op in what the listener hears.
RecurrenceResult run_chosen_form(const std::string& family, const std::string& key, const std::string& chunked,
                                 const std::function<FormChoice()>& race_now,
                                 const std::function<RecurrenceResult(const std::string&)>& run);

}  // namespace fwlab::kernels
