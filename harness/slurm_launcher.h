// The Slurm launcher: one job array per ready wave, submitted with sbatch; what ended is read from the jobs'
// status files (the truth) and squeue. Submissions are recorded before sbatch runs and found again by their
// comment, so a kill of fwlab at any point never submits a job twice or loses one. Jobs outlive fwlab.
#pragma once

#include <string>
#include <vector>

#include "harness/experiment.h"
#include "harness/launcher.h"

namespace fwlab {

class SlurmError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SlurmSettings {
  ExecutorSpec spec;
  std::string worker;    // absolute path, visible on the nodes
  std::string runs_dir;  // absolute path, on a filesystem shared with the nodes
};
nlohmann::json to_json(const SlurmSettings& s);
SlurmSettings slurm_settings_from_json(const nlohmann::json& j);

class SlurmLauncher : public Launcher {
 public:
  explicit SlurmLauncher(SlurmSettings settings) : settings_(std::move(settings)) {}
  std::string name() const override { return "slurm"; }
  size_t free_slots() const override { return 1'000'000; }  // the cluster queues; array_limit caps what runs
  void start(const std::vector<Launch>& wave, Store& store, int64_t sweep_id) override;
  std::vector<Ended> collect(Store& store) override;
  std::vector<std::string> in_flight(Store& store) override;
  void stop(bool) override {}  // jobs on the cluster go on
  bool detachable() const override { return true; }

  // The sbatch arguments of a wave of `n` jobs (without the script), for tests and the docs.
  std::vector<std::string> sbatch_args(const std::string& token, size_t n) const;

 private:
  // Returns the jobs of waves that never went out.
  std::vector<Ended> recover_unanswered(Store& store,
                                        const std::map<std::string, std::pair<std::string, std::string>>& queue);
  SlurmSettings settings_;
};

}  // namespace fwlab
