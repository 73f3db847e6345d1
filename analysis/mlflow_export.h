// `fwlab export --format mlflow`: the results database as an MLflow file store (the `mlruns` folder that
// `mlflow ui --backend-store-uri DIR` opens), so MLflow users browse fwlab runs in the tool they know.
//   DIR/0/meta.yaml                      MLflow's Default experiment (empty; MLflow expects it)
//   DIR/N/meta.yaml                      one experiment per fwlab experiment name (N = 1, 2, ... by name)
//   DIR/N/RUN/meta.yaml                  one run per job (RUN = the job id), status and times
//   DIR/N/RUN/params/KEY                 every setting of the job's config (the params view), one file each
//   DIR/N/RUN/metrics/KEY                "timestamp_ms value step" lines: every curve, and the evaluations as
//                                        valid_loss, valid_ppl, test_accuracy, ...
//   DIR/N/RUN/tags/KEY                   mlflow.runName (the cell), fwlab.stage, fwlab.status, fwlab.job_id
// TensorBoard is not written: its event files are protobuf records framed with CRC32C, which fwlab would have
// to encode by hand with no TensorBoard here to read them back; MLflow's store is plain text.
#pragma once

#include <string>

#include "harness/db.h"

namespace fwlab {

struct ExportSummary {
  int experiments = 0, runs = 0;
};

// Writes the store into `out_dir` (made if missing; files of the same runs are replaced).
ExportSummary export_mlflow(Db& db, const std::string& out_dir);

}  // namespace fwlab
