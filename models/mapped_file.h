// Safetensors files read by mapping them instead of copying them: each tensor is a view of the file's pages, so a
// model can be built around the very bytes of its checkpoint (a load costs the page cache, not a second copy), and
// what must change (a cast, a block of a fused tensor) is copied out and its pages let go.
#pragma once

#include <torch/torch.h>

#include <string>

#include "models/checkpoint.h"

namespace fwlab {

// Every tensor of `path` in the file's dtype, as views of a private mapping (writes stay in this process, the
// file is never changed); a tensor whose bytes are not aligned to its element size is copied instead. The
// mapping lives as long as any of its tensors. Checks the header and finiteness as load_tensors does.
NamedTensors map_tensors(const std::string& path);

// After a mapped tensor's values were copied elsewhere: its pages leave this process's resident memory (the file
// stays in the page cache; a later read of the view faults them back in from the file). A no-op for a tensor that
// is not a view of a mapping.
void release_pages(const torch::Tensor& mapped);

}  // namespace fwlab
