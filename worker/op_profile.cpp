#include "worker/op_profile.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/profiler_legacy.h>

#include <algorithm>
#include <map>

namespace fwlab {

namespace prof = torch::autograd::profiler;

void OpProfile::start(bool by_shape) {
  prof::enableProfilerLegacy(
      torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::CPU, by_shape));
  running_ = true, by_shape_ = by_shape;
}

namespace {

// Self times of one thread's ranges: each pop closes the innermost open push; its time less its children's.
void add_self_times(const std::vector<prof::LegacyEvent>& events, bool by_shape,
                    std::map<std::string, OpTime>& by_name) {
  struct Open {
    const prof::LegacyEvent* push;
    double children_us;
  };
  std::vector<Open> open;
  for (const auto& e : events) {
    if (e.kind() == prof::EventKind::PushRange) {
      open.push_back({&e, 0.0});
    } else if (e.kind() == prof::EventKind::PopRange && !open.empty()) {
      const auto top = open.back();
      open.pop_back();
      const double total = top.push->cpuElapsedUs(e);
      std::string key = top.push->name();
      if (by_shape)
        for (const auto& sh : top.push->shapes()) key += fmt::format(" [{}]", fmt::join(sh, ","));
      auto& row = by_name[key];
      row.name = key;
      ++row.calls;
      row.self_ms += (total - top.children_us) / 1000.0;
      if (!open.empty()) open.back().children_us += total;
    }
  }
}

}  // namespace

std::vector<OpTime> OpProfile::stop() {
  running_ = false;
  std::map<std::string, OpTime> by_name;
  for (const auto& thread : prof::disableProfilerLegacy()) add_self_times(thread, by_shape_, by_name);
  std::vector<OpTime> out;
  for (auto& [name, row] : by_name) out.push_back(std::move(row));
  std::sort(out.begin(), out.end(), [](const OpTime& a, const OpTime& b) { return a.self_ms > b.self_ms; });
  return out;
}

std::string op_table(const std::vector<OpTime>& ops, int64_t steps, size_t rows) {
  double total = 0.0;
  int64_t calls = 0;
  for (const auto& op : ops) total += op.self_ms, calls += op.calls;
  const double n = static_cast<double>(std::max<int64_t>(steps, 1));
  std::string out = fmt::format("{:<58} {:>8} {:>9} {:>6}\n", "operator (self time)", "calls", "ms/step", "share");
  double rest_ms = 0.0;
  int64_t rest_calls = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (i >= rows) {
      rest_ms += ops[i].self_ms, rest_calls += ops[i].calls;
      continue;
    }
    out += fmt::format("{:<58.58} {:>8.1f} {:>9.3f} {:>5.1f}%\n", ops[i].name, ops[i].calls / n, ops[i].self_ms / n,
                       total > 0 ? 100.0 * ops[i].self_ms / total : 0.0);
  }
  if (rest_calls > 0)
    out += fmt::format("{:<58} {:>8.1f} {:>9.3f} {:>5.1f}%\n", fmt::format("({} other operators)", ops.size() - rows),
                       rest_calls / n, rest_ms / n, total > 0 ? 100.0 * rest_ms / total : 0.0);
  out += fmt::format("{:<58} {:>8.1f} {:>9.3f}\n", "all profiled operators", calls / n, total / n);
  return out;
}

}  // namespace fwlab
