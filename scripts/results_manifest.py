#!/usr/bin/env python3
"""scripts/results.sh's manifest of one experiment folder: the jobs its tables were made from, with their status and
values (ctest committed_results checks the folder against it). Written only where every job of the current plan has
a result (finished or diverged) or never will (blocked behind a diverged job: a diverged job is final, so a sweep
never runs it again, nor what starts from it); otherwise the folder gets incomplete.txt instead, saying how many
have none yet, and results/README.md's row says the folder is not checked. The parent's status is kept for the
blocked jobs only, so that the records of every other job stay as they were.
Usage: results_manifest.py NAME PROFILE COMMIT PLANNED OUT_DIR < the jobs as `fwlab query --format json` prints them
"""
import json, os, sys

name, profile, commit, planned, out = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
jobs = json.load(sys.stdin)
for j in jobs:
    if j["status"] != "blocked":
        j.pop("parent_status", None)


def final(j):
    return j["status"] in ("finished", "diverged") or (j["status"] == "blocked" and j["parent_status"] == "diverged")


done = sum(1 for j in jobs if final(j))
manifest, incomplete = os.path.join(out, "manifest.json"), os.path.join(out, "incomplete.txt")
for stale in (manifest, incomplete):
    if os.path.exists(stale):
        os.remove(stale)
if done < planned:
    with open(incomplete, "w") as f:
        f.write(f"{planned - done} of the plan's {planned} jobs have no result yet\n")
else:
    with open(manifest, "w") as f:
        f.write(json.dumps({"experiment": name, "profile": profile, "commit": commit, "jobs": jobs}, indent=1,
                           sort_keys=True) + "\n")
