// The task adapters' document readers (contract/evaluation/task_table.cpp registers them): one file each, from the
// public dataset's field names to lm-eval's doc_to_text / doc_to_choice / gold.
#pragma once

#include <string>

#include "contract/evaluation/eval_task.h"

namespace fwlab::tasks {

EvalDoc read_piqa(const DocFields& f);
EvalDoc read_arc(const DocFields& f);
EvalDoc read_hellaswag(const DocFields& f);
EvalDoc read_winogrande(const DocFields& f);
EvalDoc read_copa(const DocFields& f);
EvalDoc read_openbookqa(const DocFields& f);
EvalDoc read_mmlu(const DocFields& f);
EvalDoc read_lambada(const DocFields& f);
EvalDoc read_recall(const DocFields& f);

// ASCII forms of Python's str methods the task templates call (the public datasets' English text; a non-ASCII
// first letter is left as it is where Python would change its case).
std::string strip(const std::string& s);
std::string capitalize(
    const std::string& s);  // Python's str.capitalize: first character titlecase, the rest lowercase (Unicode)
std::string replace_all(std::string s, const std::string& from, const std::string& to);

}  // namespace fwlab::tasks
