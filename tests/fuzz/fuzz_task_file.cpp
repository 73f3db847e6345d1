// An evaluation task's JSONL file (lm-eval's datasets as users export them), read by every task adapter: the
// documents, or TaskFileError naming the file, line and field. Documents that read give requests for their
// choices and a few-shot prefix without failing.
#include "contract/evaluation/eval_task.h"
#include "tests/fuzz/fuzz_target.h"

using namespace fwlab;

FWLAB_FUZZ_TARGET(task_file) {
  const auto path = fuzz::scratch_file("task.jsonl", data, size);
  for (const auto& adapter : task_table()) {
    std::vector<EvalDoc> docs;
    try {
      docs = read_task_file(path, adapter, 0);
    } catch (const TaskFileError&) {
      continue;
    }
    if (docs.empty()) fuzz::violated("read_task_file returned no document instead of refusing the file");
    for (const auto& doc : docs) doc_requests(adapter, doc, fewshot_prefix(adapter, doc, docs, 2, 1234));
  }
  return 0;
}
