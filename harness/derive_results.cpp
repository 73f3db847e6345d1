// JobResults over the results database (harness/derive.h): a job's status, its last evaluation's fields and the
// last value of its metric series, as the derivations rank them.
#include <fmt/format.h>

#include <set>

#include "harness/db.h"
#include "harness/derive.h"

namespace fwlab {

namespace {

class DbJobResults : public JobResults {
 public:
  explicit DbJobResults(Db& db) : db_(db) {}

  std::optional<JobStatus> status(const std::string& job_id) const override {
    auto q = db_.prepare("SELECT status FROM jobs WHERE id = ?");
    q.bind(1, job_id);
    if (!q.step()) return std::nullopt;
    return parse_job_status(q.text(0));
  }

  std::optional<double> value(const std::string& job_id, const std::string& metric) const override {
    static const std::set<std::string> fields = {"loss", "ppl", "bpc", "accuracy"};
    for (const std::string split : {"valid", "test"})
      if (metric.rfind(split + "_", 0) == 0 && fields.count(metric.substr(split.size() + 1))) {
        auto q =
            db_.prepare(fmt::format("SELECT {} FROM evals WHERE job_id = ? AND split = ? ORDER BY step DESC LIMIT 1",
                                    metric.substr(split.size() + 1)));
        q.bind(1, job_id).bind(2, split);
        if (!q.step() || q.is_null(0)) return std::nullopt;
        return q.real(0);
      }
    auto q = db_.prepare("SELECT value FROM metrics WHERE job_id = ? AND key = ? ORDER BY step DESC LIMIT 1");
    q.bind(1, job_id).bind(2, metric);
    if (!q.step() || q.is_null(0)) return std::nullopt;
    return q.real(0);
  }

 private:
  Db& db_;
};

}  // namespace

std::unique_ptr<JobResults> job_results_in(Db& db) { return std::make_unique<DbJobResults>(db); }

}  // namespace fwlab
