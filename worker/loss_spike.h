// The loss-spike rule of the divergence check (torch-free, so the tests can replay recorded loss curves).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>

#include "contract/job/job_spec.h"

namespace fwlab {

// A step's loss is a spike when it is above spike_factor x the running minimum *and* more than spike_min_rise
// nats above it; spike_steps spikes in a row are a divergence. The rise floor is what keeps a task whose loss
// approaches zero from tripping the ratio: an MQAR run at 0.99 accuracy wobbled from a minimum of 0.02 to 0.11
// for five steps — 5x the minimum, yet a loss that has learned, not one that has blown up.
//
// The minimum is kept per kind of batch: a job whose batches are drawn from points of unequal difficulty (Zoology's
// MQAR mix, from (64, 4) to (256, 64)) has losses that differ by nats from one batch to the next, and against one
// minimum every run of hard batches read as a blow-up (the zoology profile's additive-rule jobs were all stopped
// that way before step 1,500). Batches all alike have one kind, "".
struct SpikeWatch {
  std::map<std::string, double> minima;  // the running minimum of each kind of batch
  int64_t run = 0;                       // spikes in a row so far, of any kinds

  // Adds one step's loss; true when it completes a divergence.
  bool diverged_after(double loss, const DivergenceSpec& d, const std::string& kind = "") {
    double& low = minima.try_emplace(kind, std::numeric_limits<double>::infinity()).first->second;
    low = std::min(low, loss);
    const bool spike = loss > d.spike_factor * low && loss - low > d.spike_min_rise;
    run = spike ? run + 1 : 0;
    return run >= d.spike_steps;
  }
};

}  // namespace fwlab
