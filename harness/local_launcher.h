// The local pool: fwlab-worker processes (Boost.Process) on this machine, one GPU each when there are GPUs,
// with a per-job time limit. Workers die with the orchestrator (parent-death signal).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "harness/launcher.h"

namespace fwlab {

struct LocalSettings {
  std::string worker;    // fwlab-worker executable
  int jobs = 1;          // workers at once
  double timeout_s = 0;  // per job, unless the stage sets one (0: none)
};

class LocalLauncher : public Launcher {
 public:
  explicit LocalLauncher(LocalSettings settings);
  ~LocalLauncher() override;
  std::string name() const override { return "local"; }
  size_t free_slots() const override;
  void start(const std::vector<Launch>& wave, Store& store, int64_t sweep_id) override;
  std::vector<Ended> collect(Store& store) override;
  std::vector<std::string> in_flight(Store& store) override;
  void stop(bool now) override;
  bool detachable() const override { return false; }

 private:
  struct Running;
  LocalSettings settings_;
  std::vector<std::unique_ptr<Running>> running_;
  std::vector<Ended> launch_failures_;
  std::vector<bool> gpu_busy_;
  bool stopping_ = false;
  double stop_sent_ = 0;
};

}  // namespace fwlab
