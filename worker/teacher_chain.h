// A converted model's teacher: the nearest softmax-only model up the chain of source checkpoints.
#pragma once

#include <string>

namespace fwlab {

// `start` itself when it is softmax-only, else the init_checkpoint of the job.json beside it (a sweep's job
// directory), and so on. Throws SpecError at `field` (the key that would name the teacher instead) when the chain
// ends without one.
std::string nearest_softmax_model(const std::string& start, const std::string& field);

}  // namespace fwlab
