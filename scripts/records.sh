#!/usr/bin/env bash
# A grid longer than one sitting on this machine (a fresh clone each time: the database and runs/ are not in git),
# carried in the repository: `save` copies the records of a profile's jobs that have a result (job.json,
# events.jsonl, status.json; no checkpoints) into results/records/EXPERIMENT.PROFILE/; `restore` copies them into the
# runs folder beside the database, where the next `fwlab sweep` of that profile takes each one as its result
# instead of running it again (harness/adopt.h), and runs the rest. A job that another stage starts from needs its
# checkpoint, and is run again, only where a job starting from it has no record saved (the zoology profile's eval
# jobs are saved with the training jobs they score).
#
#   bash scripts/records.sh save|restore EXPERIMENT PROFILE [--db results/fwlab.db]
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: bash scripts/records.sh save|restore EXPERIMENT PROFILE [--db DB]" >&2; exit 2; }
(($# >= 3)) || usage
what=$1 experiment=$2 profile=$3 db=results/fwlab.db
shift 3
while (($#)); do
  case "$1" in
    --db) db=$2; shift 2 ;;
    *) usage ;;
  esac
done
[[ $experiment =~ ^[A-Za-z0-9_.-]+$ && $profile =~ ^[A-Za-z0-9_.-]+$ ]] || usage
store=results/records/$experiment.$profile
runs=$(dirname "$db")/runs
case "$what" in
  save)
    [ -f "$db" ] || { echo "records: no database $db" >&2; exit 2; }
    n=0
    while IFS='|' read -r id dir; do
      mkdir -p "$store/$id"
      for f in job.json events.jsonl status.json; do cp "$dir/$f" "$store/$id/$f"; done
      n=$((n + 1))
    done < <(sqlite3 "$db" "SELECT j.id, j.dir FROM jobs j JOIN cells c ON c.job_id = j.id
                             WHERE c.experiment = '$experiment' AND c.profile = '$profile'
                               AND j.status IN ('finished', 'diverged') ORDER BY j.id")
    echo "records: $n jobs' records of $experiment --profile $profile in $store"
    ;;
  restore)
    [ -d "$store" ] || { echo "records: nothing saved in $store" >&2; exit 2; }
    mkdir -p "$runs"
    n=0
    for rec in "$store"/*/; do
      id=$(basename "$rec")
      if [ -e "$runs/$id" ]; then continue; fi  # a folder the database may already know: left as it is
      cp -r "$rec" "$runs/$id"
      n=$((n + 1))
    done
    echo "records: $n jobs' records copied into $runs; fwlab sweep takes them as their results"
    ;;
  *) usage ;;
esac
