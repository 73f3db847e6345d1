// The delta family's form decisions kept on disk (kernels/common/form_choice.h), so that every process on a
// machine runs a shape class in the form the first one measured: a job run twice, or resumed, gives the same
// numbers (the forms round differently). One JSON file, {machine: {shape class: form}}, where the machine is the
// CPU's model name, the thread count and the forms' revision; read whole, updated under an flock and replaced by
// rename.
#pragma once

#include <map>
#include <string>

namespace fwlab::kernels {

// "Intel(R) Xeon(R) Processor, 2 threads, forms r2": what the times depend on besides the shape, and the kernels'
// revision that timed them.
std::string form_store_machine();
// This machine's decisions in `path` (none where the file is absent or unreadable).
std::map<std::string, std::string> read_form_store(const std::string& path);
// Adds one decision for this machine unless one is there already (the first process's stands), and returns the
// form that stands.
std::string add_to_form_store(const std::string& path, const std::string& shape_class, const std::string& form);

}  // namespace fwlab::kernels
