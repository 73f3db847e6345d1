// `fwlab export --format mlflow --out DIR`: the results database as an MLflow file store (analysis/mlflow_export.h).
#include <fmt/format.h>

#include "analysis/mlflow_export.h"
#include "cli/commands.h"

namespace fwlab::cli {

int cmd_export(const std::string& format, const std::string& out, const Common& c) {
  if (format == "tensorboard")
    throw ArgumentError(
        "export --format tensorboard: not written (TensorBoard's event files are CRC32C-framed protobuf records, "
        "which fwlab would encode by hand with no TensorBoard to check them against); use --format mlflow, "
        "or `fwlab show JOB --curve KEY` for a curve as CSV");
  check_db_path(c.db_path, false);  // no database yet: DbOpenError, exit 2, before anything is made
  Db db(c.db_path, true);
  const auto s = export_mlflow(db, out);
  fmt::print(
      "{}: {} experiment(s), {} run(s) as an MLflow file store; open it with `mlflow ui --backend-store-uri {}`\n", out,
      s.experiments, s.runs, out);
  return 0;
}

}  // namespace fwlab::cli
