#!/usr/bin/env bash
# Runs Mao's Table 1 grid at the given profile (default: quick) and prints it: rules x {baseline, norm off,
# phi off}, test perplexity of the best-validation checkpoint, N/A where the combination does not apply and
# * where the run diverged. (The analysis commands of issue 5 will print it with `fwlab table`.)
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${1:-quick}
db=${FWLAB_DB:-results/fwlab.db}
status=0
env -u OPENBLAS_CORETYPE build/harness/fwlab sweep experiments/table1.toml --profile "$profile" --db "$db" || status=$?
[ "$status" -eq 130 ] && exit 130
cell() {  # cell VARIANT
  echo "MAX(CASE WHEN json_extract(c.coords, '\$.variant') = '$1' THEN
          CASE WHEN c.applicable = 0 THEN 'N/A' WHEN j.status = 'diverged' THEN '*'
               WHEN e.ppl IS NULL THEN '-' ELSE printf('%.2f', e.ppl) END END) AS \"$1\""
}
build/harness/fwlab query --db "$db" "
  SELECT json_extract(c.coords, '\$.rule') AS rule, $(cell baseline), $(cell norm_off), $(cell phi_off)
  FROM cells c LEFT JOIN jobs j ON j.id = c.job_id
       LEFT JOIN evals e ON e.job_id = c.job_id AND e.split = 'test'
  WHERE c.experiment = 'table1' AND c.profile = '$profile' AND c.stage = 'finetune'
  GROUP BY 1 ORDER BY CASE rule WHEN 'add' THEN 0 WHEN 'delta' THEN 1 WHEN 'gated' THEN 2 ELSE 3 END"
echo "test perplexity (byte level at smoke/quick scale); N/A: not applicable; *: diverged; -: not run"
exit "$status"
