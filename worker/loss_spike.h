// The loss-spike rule of the divergence check (torch-free, so the tests can replay recorded loss curves).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "contract/job/job_spec.h"

namespace fwlab {

// A step's loss is a spike when it is above spike_factor x the running minimum *and* more than spike_min_rise
// nats above it; spike_steps spikes in a row are a divergence. The rise floor is what keeps a task whose loss
// approaches zero from tripping the ratio: an MQAR run at 0.99 accuracy wobbled from a minimum of 0.02 to 0.11
// for five steps — 5x the minimum, yet a loss that has learned, not one that has blown up.
struct SpikeWatch {
  double running_min = std::numeric_limits<double>::infinity();
  int64_t run = 0;  // spikes in a row so far

  // Adds one step's loss; true when it completes a divergence.
  bool diverged_after(double loss, const DivergenceSpec& d) {
    running_min = std::min(running_min, loss);
    const bool spike = loss > d.spike_factor * running_min && loss - running_min > d.spike_min_rise;
    run = spike ? run + 1 : 0;
    return run >= d.spike_steps;
  }
};

}  // namespace fwlab
