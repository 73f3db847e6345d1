// The batches of a generated task (MQAR, retrieval) and their evaluation scored sequence by sequence: the
// trainer's validation and test pool the scores; the eval job's mqar task (worker/mqar_task.cpp) breaks the same
// batches down by test point, so that its pooled accuracy is the training job's test accuracy.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "contract/job/job_spec.h"
#include "models/gpt.h"

namespace fwlab {

// Token ids (rows x cols) as a long tensor on `device`.
torch::Tensor token_tensor(const std::vector<int32_t>& ids, int64_t rows, int64_t cols, torch::Device device);

// Inputs, and targets that are -1 where nothing is asked. MQAR's batch is at `point` (a training batch's drawn
// from the mix, an evaluation batch's from the test points).
std::pair<torch::Tensor, torch::Tensor> task_batch(const DataSpec& d, const MqarPoint& point, int64_t B, uint64_t seed,
                                                   torch::Device device);

// Validation and test draw their batches from streams of their own.
inline constexpr uint64_t kValidStream = 0xE7A1, kTestStream = 0x7E57;

struct SequenceScore {
  MqarPoint point;    // its batch's (length, pairs)
  int64_t batch = 0;  // which evaluation batch
  int64_t queries = 0, correct = 0;
  double nll = 0;  // summed over its queries, in nats
};

// eval.mqar_batches batches of train.batch_size sequences, the evaluation points taken in turn, batch i seeded
// from (seed, stream, i): one score per sequence, in batch order. The model is left in training mode.
std::vector<SequenceScore> score_generated_batches(GPT& model, const JobSpec& spec, torch::Device device,
                                                   uint64_t stream);

}  // namespace fwlab
