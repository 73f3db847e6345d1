#!/usr/bin/env python3
"""ctest committed_results: the committed results/ folders agree with the code and with each other.

For every experiment folder results/NAME/ (or results/NAME/PROFILE/, an experiment at a profile of its own, whose
results/README.md row is NAME@PROFILE) that scripts/results.sh made (its manifest.json lists the jobs the tables
were made from, with their status and values; a folder made before manifests, or from a plan with jobs not run yet (incomplete.txt), passes only while
its row in results/README.md says "not checked"):
  1. every job the current plan of experiments/NAME.toml makes at that profile is in the manifest (the tables are of
     this catalog file and this version, not an older plan), and every manifest job has a result (finished or
     diverged: no table holds a job still running) or is blocked behind a diverged job (it never will);
  2. a job shared by several experiments (a teacher) has the same record in every manifest: their tables were made
     from one state of the results;
  3. plots/ holds exactly the figures `fwlab plot --list` names for the file now, each as .png, .svg and .gp.
Usage: committed_results.py SOURCE_DIR FWLAB
"""
import glob, json, os, re, subprocess, sys, tempfile

src, fwlab = sys.argv[1], sys.argv[2]
problems, unchecked = [], []
records = {}  # job id -> (experiment, record)
readme_path = os.path.join(src, "results", "README.md")
readme = open(readme_path).read() if os.path.exists(readme_path) else ""
folders = sorted(d for pattern in ("*", "*/*") for d in glob.glob(os.path.join(src, "results", pattern))
                 if os.path.isfile(os.path.join(d, "table.md")))
for folder in folders:
    where = os.path.relpath(folder, src)  # results/NAME or results/NAME/PROFILE
    name = "@".join(where.split(os.sep)[1:])
    manifest_path = os.path.join(folder, "manifest.json")
    if not os.path.exists(manifest_path):
        # Older than manifests, or of a plan not run to its end: allowed only while results/README.md says so on its
        # row, for every reader to see.
        if re.search(rf"^\| {re.escape(name)} \|.*\| not checked: ", readme, re.M):
            unchecked.append(name)
        else:
            problems.append(f"{where}: no manifest.json, and results/README.md's row does not say 'not checked': "
                            f"regenerate it (scripts/results.sh) or mark its row")
        continue
    manifest = json.load(open(manifest_path))
    profile, jobs = manifest["profile"], {j["job_id"]: j for j in manifest["jobs"]}
    toml = os.path.join(src, "experiments", manifest["experiment"] + ".toml")
    with tempfile.TemporaryDirectory() as tmp:
        dry = subprocess.run([fwlab, "sweep", toml, "--profile", profile, "--dry-run", "--db", os.path.join(tmp, "x.db")],
                             capture_output=True, text=True)
    if dry.returncode != 0:
        problems.append(f"{where}: fwlab sweep --dry-run failed: {dry.stderr.strip()}")
        continue
    planned = set(re.findall(r"^\S+\s+.*?\s([0-9a-f]{16})\s", dry.stdout, re.M))
    missing = sorted(planned - set(jobs))
    if missing:
        problems.append(f"{where}: {len(missing)} job(s) of the current plan ({profile}) are not in the tables "
                        f"it holds, e.g. {missing[0]}: regenerate it (scripts/results.sh {profile} {name})")
    for job_id, j in jobs.items():
        blocked_for_good = j["status"] == "blocked" and j.get("parent_status") == "diverged"
        if j["status"] not in ("finished", "diverged") and not blocked_for_good:
            problems.append(f"{where}: job {job_id} is {j['status']} in its manifest")
        if job_id in records and records[job_id][1] != j:
            problems.append(f"{where} and {records[job_id][0]} disagree on job {job_id}: "
                            f"{j} against {records[job_id][1]}")
        records.setdefault(job_id, (where, j))
    listed = subprocess.run([fwlab, "plot", toml, "--profile", profile, "--list"], capture_output=True, text=True)
    expected = set(listed.stdout.split())
    drawn = {os.path.basename(p)[:-4] for p in glob.glob(os.path.join(folder, "plots", "*.png"))}
    if listed.returncode != 0 or expected != drawn:
        problems.append(f"{where}/plots: fwlab plot now makes {sorted(expected - drawn)[:5]} not committed, "
                        f"and {sorted(drawn - expected)[:5]} committed are not made any more")
    for stem in drawn:
        for ext in (".svg", ".gp"):
            if not os.path.exists(os.path.join(folder, "plots", stem + ext)):
                problems.append(f"{where}/plots/{stem}{ext}: missing beside its .png")
for p in problems:
    print(p)
if unchecked:
    print(f"not checked (made before manifests, marked so in results/README.md): {', '.join(unchecked)}")
print(f"committed_results: {len(folders)} folders, {len(folders) - len(unchecked)} checked, {len(records)} jobs, "
      f"{len(problems)} problem(s)")
sys.exit(1 if problems else 0)
