#!/usr/bin/env bash
# Runs the experiment catalog at a profile (default: quick) and writes what fwlab makes of it into results/:
# for each experiment, results/NAME/table.md, report.md and plots/, then results/README.md saying on which
# machine and with which command. Jobs that already finished are not run again, so a second call only
# regenerates the outputs. Usage: scripts/results.sh [--no-run] [profile] [experiment names...]; --no-run starts
# no job and writes the outputs from what the database holds (a grid still running shows its cells as such).
# A name NAME@PROFILE is an experiment at a profile of its own beside the catalog's (results/NAME/PROFILE/).
set -euo pipefail
cd "$(dirname "$0")/.."
run_jobs=1
if [ "${1:-}" = --no-run ]; then run_jobs=0; shift; fi
profile=${1:-quick}
shift || true
names=("$@")
catalog=(table1 table2 fig1_generation t2r_table1 t2r_feature_size t2r_attention transfer llama_conversion conversion_eval sru_attention mqar capacity
         t2r_table2 t2r_mt_speed sru_iwslt layer_selection)
# Grids at a profile of their own, each longer than a sitting here (results/records/ keeps their jobs between
# sittings): run only when named, listed in README as their own rows.
own_profile=(mqar@zoology)
[ ${#names[@]} -gt 0 ] || names=("${catalog[@]}")
db=${FWLAB_DB:-results/fwlab.db}
# FWLAB_BIN: a copy of the build to run from (its fwlab-worker in ../worker/), so that rebuilding the tree meanwhile
# does not change the binaries of a long run.
fwlab() { env -u OPENBLAS_CORETYPE "${FWLAB_BIN:-build/cli/fwlab}" "$@"; }
# At "quick", MQAR is shown at its "learns" profile: its quick profile cannot leave chance (experiments/mqar.toml).
profile_for() {
  if [[ "$1" == *@* ]]; then echo "${1#*@}"; elif [ "$profile" = quick ] && [ "$1" = mqar ]; then echo learns; else echo "$profile"; fi
}
# results/NAME, or results/NAME/PROFILE for NAME@PROFILE.
out_of() { if [[ "$1" == *@* ]]; then echo "results/${1%@*}/${1#*@}"; else echo "results/$1"; fi; }
# The jobs of a file's current grid, quoted for SQL (its dry run lists their ids, derived cells included once their
# inputs have ended), not every job the cells table ever held for it (an earlier grid's jobs stay there).
plan_ids() {
  fwlab sweep "experiments/${1%@*}.toml" --profile "$(profile_for "$1")" --dry-run --db "$db" 2>/dev/null |
    grep -oE '\b[0-9a-f]{16}\b' | sort -u | sed "s/.*/'&'/" | paste -sd, -
}
# The further tables of FILE at PROFILE: its [tables.NAME] sections and the tables its [profile.PROFILE] adds.
further_tables() {
  { sed -n 's/^\[tables\.\([A-Za-z0-9_-]*\)\]$/\1/p' "$1"
    awk -v p="[profile.$2]" '/^\[/ { in_p = ($0 == p) }
      in_p && match($0, /^"tables\.[A-Za-z0-9_-]+\./) { print substr($0, 9, RLENGTH - 9) }' "$1"; } | sort -u
}

for name in "${names[@]}"; do
  file=experiments/${name%@*}.toml
  profile_of_name=$(profile_for "$name")
  status=0
  # Jobs one thread each, as many at once as there are cores; the experiments whose tables time something
  # (generation, translation speed, training tokens/s) one job at a time with every core, nothing beside them.
  case "$name" in
    fig1_generation | t2r_mt_speed | sru_attention) pool=(-j 1) ;;
    *) pool=(-j "$(nproc)" --threads 1) ;;
  esac
  [ "$run_jobs" -eq 0 ] || fwlab sweep "$file" --profile "$profile_of_name" --db "$db" "${pool[@]}" || status=$?
  [ "$status" -eq 130 ] && exit 130
  out=$(out_of "$name")
  mkdir -p "$out"
  fwlab table "$file" --profile "$profile_of_name" --db "$db" --out "$out/table.md"
  fwlab table "$file" --profile "$profile_of_name" --db "$db" --format tex --out "$out/table.tex"
  fwlab table "$file" --profile "$profile_of_name" --db "$db" --format csv --out "$out/table.csv"
  # The file's further tables ([tables.NAME], and "tables.NAME.KEY" keys of the profile): table_NAME.md beside table.md.
  for extra in $(further_tables "$file" "$profile_of_name"); do
    fwlab table "$file" --profile "$profile_of_name" --db "$db" --table "$extra" --out "$out/table_$extra.md"
  done
  rm -f "$out/compare.md"
  if grep -q '^\[published\]' "$file"; then  # the paper's own numbers beside ours, where a cell has both
    fwlab table "$file" --profile "$profile_of_name" --db "$db" --compare --out "$out/compare.md" ||
      echo "results.sh: $name: no comparison with the paper at this profile (fwlab table --compare says why above)"
  fi
  fwlab report "$file" --profile "$profile_of_name" --db "$db" --out "$out/report.md"
  rm -rf "$out/plots"
  fwlab plot "$file" --profile "$profile_of_name" --db "$db" --out "$out/plots" > /dev/null
  # What the tables were made from, job by job (ctest committed_results checks the committed folders against it:
  # the jobs the current plan makes, shared jobs alike everywhere, the figures fwlab plot makes now); a plan with
  # jobs not run yet gets incomplete.txt instead (scripts/results_manifest.py).
  ids=$(plan_ids "$name")
  fwlab query --db "$db" --format json "SELECT r.job_id, r.stage, r.coords, r.status, r.best_valid_ppl,
      r.best_valid_accuracy, r.test_ppl, r.test_bpc, r.test_accuracy, p.status AS parent_status FROM runs r
      JOIN jobs j ON j.id = r.job_id LEFT JOIN jobs p ON p.id = j.depends_on WHERE r.job_id IN
      (${ids:-''}) ORDER BY r.stage, r.job_id" |
    /usr/bin/python3 scripts/results_manifest.py "${name%@*}" "$profile_of_name" "$(git rev-parse --short HEAD)" \
      "$(tr ',' '\n' <<<"$ids" | grep -c .)" "$out"
  cat "$out/table.md"
  echo
done
# Every experiment the database holds as browsable pages (git ignores them: they embed the plots).
fwlab site --db "$db" --out results/site

# What made these files: the machine, the command, the code. Experiments this database holds no jobs for (not
# run again here) keep their row of the previous README, with the commit that made them.
previous=$(cat results/README.md 2>/dev/null || true)
previous_commit=$(sed -n 's/^- fwlab commit: \([0-9a-f]*\).*/\1/p' <<<"$previous" | head -1)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
{
  echo "# results/ — the experiment catalog at the \`$profile\` profile"
  echo
  echo "Made by real runs with \`bash scripts/results.sh $profile\` (after \`bash scripts/setup.sh\`); nothing here is"
  echo "written by hand. Each experiment has \`table.md\` (also \`.tex\`, \`.csv\`), \`report.md\` (divergences and"
  echo "stability) and \`plots/\` (PNG, SVG and the gnuplot script with its data)."
  echo
  machine="$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB RAM, $(. /etc/os-release && echo "$PRETTY_NAME"), no GPU (CPU libtorch $(dpkg-query -W -f='${Version}' libtorch-dev 2>/dev/null || echo '?'))"
  echo "- machine: $machine"
  # Rows kept from an earlier run were made on the machine that run recorded (the first line of its list).
  previous_machine=$(sed -n 's/^- machine: //p' <<<"$previous" | head -1)
  [ -n "$previous_machine" ] && [ "$previous_machine" != "$machine" ] && echo "- rows made at earlier commits: $previous_machine"
  echo "- fwlab commit: $commit$(git diff --quiet HEAD -- . ':!results' 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "- the job records and the database (results/runs/, results/fwlab.db) stay on the machine (git ignores them),"
  echo "  but for a grid longer than one sitting: \`results/records/EXPERIMENT.PROFILE/\` holds the small records of its"
  echo "  jobs run so far (\`bash scripts/records.sh save\`), which \`bash scripts/records.sh restore\` puts back into"
  echo "  results/runs/ for the next \`fwlab sweep\` to take as their results and run the rest (harness/README.md, \"Job"
  echo "  identity and resume\"); kept now: $(cd results/records 2>/dev/null && ls | sed 's/.*/`&`/' | paste -sd, - | sed 's/,/, /g' || echo none)"
  echo
  echo "| experiment | table | against the paper | report | plots | agrees with the code | jobs | worker time | made at commit |"
  echo "| --- | --- | --- | --- | --- | --- | ---: | ---: | --- |"
  for name in "${catalog[@]}" "${own_profile[@]}"; do
    dir=$(out_of "$name")
    rel=${dir#results/}
    [ -f "$dir/table.md" ] || continue
    # The jobs of the file's current grid (its dry run lists their ids), not every job it ever planned.
    ids=$(plan_ids "$name")
    read -r jobs secs < <(fwlab query --db "$db" --format csv "SELECT COUNT(*), CAST(ROUND(COALESCE(SUM(finished - started), 0)) AS INTEGER)
      FROM jobs WHERE id IN (${ids:-''}) AND finished IS NOT NULL" | tail -1 | tr ',' ' ')
    old_row=$(grep "^| $name |" <<<"$previous" || true)
    compare=–
    [ -f "$dir/compare.md" ] && compare="[compare]($rel/compare.md)"
    # ctest committed_results checks a folder with a manifest against the current plan; one without is older.
    checked="not checked: made before manifests, regenerate it"
    [ -f "$dir/incomplete.txt" ] && checked="not checked: $(cat "$dir/incomplete.txt")"
    [ -f "$dir/manifest.json" ] && checked="[checked]($rel/manifest.json)"
    links="| $name | [table]($rel/table.md) | $compare | [report]($rel/report.md) | [plots]($rel/plots/) | $checked |"
    # Experiments not run by this call keep their row: the commit that made them, not this one.
    ran_now=no
    for n in "${names[@]}"; do [ "$n" = "$name" ] && ran_now=yes; done
    if { [ "$jobs" = 0 ] || [ "$ran_now" = no ]; } && [ -n "$old_row" ]; then
      # An old row: its last three cells are jobs, worker time and the commit that made them.
      IFS='|' read -r old_jobs old_time old_commit < <(awk -F'|' '{print $(NF-3) "|" $(NF-2) "|" $(NF-1)}' <<<"$old_row")
      echo "$links$old_jobs|$old_time| $(echo "${old_commit:-$previous_commit}" | xargs) |"
    else
      echo "$links $jobs | $((secs / 60)) min $((secs % 60)) s | $commit |"
    fi
  done
  echo
  echo "At the quick profile, mqar is run at its \`learns\` profile (its quick profile cannot leave chance)."
  echo
  echo "Worker time: the summed run time of the experiment's jobs, as the database recorded it (a job shared"
  echo "between files, like the teacher of table1 and table2, counts in each)."
  # The whole catalog, each job once: what running it again from nothing costs this machine.
  pairs=$(for name in "${catalog[@]}"; do printf "('%s','%s')," "$name" "$(profile_for "$name")"; done)
  read -r all_jobs all_secs < <(fwlab query --db "$db" --format csv "SELECT COUNT(*),
      CAST(ROUND(COALESCE(SUM(finished - started), 0)) AS INTEGER) FROM jobs WHERE finished IS NOT NULL AND id IN
      (SELECT job_id FROM cells WHERE (experiment, profile) IN (VALUES ${pairs%,}))" | tail -1 | tr ',' ' ')
  echo
  # The rows' own sum, kept rows included (a shared teacher counts in each row): what README quotes.
  # (The catalog's rows only: a profile of its own, NAME@PROFILE, is not part of `results.sh quick`.)
  row_mins=$(grep -v '^| [^ |]*@' results/README.md.new | grep -oE '\| [0-9]+ min [0-9]+ s \|' | awk '{m += $2 + $4 / 60} END {printf "%d", m}')
  echo "The rows' worker times add to $((row_mins / 60)) h $((row_mins % 60)) min (\`bash scripts/results.sh quick\` runs"
  echo "the jobs one per core: about half that on 2 cores). The jobs of the catalog this database holds, each counted"
  counted="$all_jobs, $((all_secs / 3600)) h $((all_secs % 3600 / 60)) min"
  # A database holding none of them (a machine that ran only a grid of its own) keeps the previous count.
  previous_count=$(sed -n 's/^once: \([0-9]*, [0-9]* h [0-9]* min\) (rows kept.*/\1/p' <<<"$previous")
  [ "$all_jobs" = 0 ] && [ -n "$previous_count" ] && counted="$previous_count (an earlier database's)"
  echo "once: $counted (rows kept from earlier runs may come from another database)."
} > results/README.md.new
mv results/README.md.new results/README.md
