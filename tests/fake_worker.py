#!/usr/bin/env -S python3 -S
"""A stand-in for fwlab-worker in the orchestrator's reliability tests (the model is not the point there).

Behaviour by the job's seed: 0 finish, 1 crash (exit 1), 2 hang, 3 diverge (exit 3), 4 killed on the first
attempt then finish, 5 finish slowly (0.05 s per step), 6 start slowly (1 s before it could ask for the
parent-death signal itself, like libtorch's start in the real worker), then as 5; 7 as 5, but once stopped by a
signal it takes 12 s more to exit (a slow teardown, past the sweep's 10 s wait). Writes events.jsonl and
status.json as the real one. As the real worker, SIGINT or SIGTERM stops it at the next step boundary (status
interrupted, exit 4), and a later attempt resumes from the steps it recorded (its start event says from which).
"""
# A signal before the handler below kills it, as it does the real worker: Python's own handler (KeyboardInterrupt)
# would make a Ctrl-C during start-up an exit 1, i.e. a crash. -S (no site import) shortens that window too.
import signal

signal.signal(signal.SIGINT, signal.SIG_DFL)
import ctypes, fcntl, json, os, sys, time

job_dir = sys.argv[2]
spec = json.load(open(os.path.join(job_dir, "job.json")))
behaviour = spec.get("seed", 0)
if behaviour == 6:
    time.sleep(1.0)
ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG, as the real worker
lock = open(os.path.join(job_dir, "lock"), "w")
fcntl.flock(lock, fcntl.LOCK_EX)
steps = spec.get("train", {}).get("steps", 5)
path = os.path.join(job_dir, "events.jsonl")
status_path = os.path.join(job_dir, "status.json")
if os.path.exists(status_path) and json.load(open(status_path)).get("status") == "finished":
    sys.exit(0)
seq = sum(1 for _ in open(path)) if os.path.exists(path) else 0
with open(os.path.join(job_dir, "starts"), "a") as f:  # the never-twice tests count the lines
    f.write(f"{os.getpid()}\n")
events = open(path, "a")


def write(e):
    global seq
    e.update(seq=seq, time=time.time())
    seq += 1
    events.write(json.dumps(e) + "\n")
    events.flush()


def status(s):
    s["time"] = time.time()  # as the real worker: when it last wrote the file
    with open(status_path + ".tmp", "w") as f:
        json.dump(s, f)
    os.replace(status_path + ".tmp", status_path)


stop = []
for sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(sig, lambda *_: stop.append(1))
done_steps = 0
if os.path.exists(path):
    for line in open(path):
        e = json.loads(line)
        if e.get("type") == "metric":
            done_steps = max(done_steps, e["step"])
write({"type": "start", "host": "fake", "params": 1, "resumed_from_step": done_steps or None})
status({"status": "running"})
if behaviour == 1:
    sys.exit(1)
if behaviour == 2:
    time.sleep(3600)
if behaviour == 4 and not os.path.exists(os.path.join(job_dir, "attempted")):
    open(os.path.join(job_dir, "attempted"), "w").close()
    os.kill(os.getpid(), signal.SIGKILL)
for step in range(done_steps + 1, steps + 1):
    if stop:
        write({"type": "end", "status": "interrupted", "exit_code": 4, "cause": "interrupted"})
        status({"status": "interrupted", "exit_code": 4, "cause": "interrupted", "reason": "stopped by signal"})
        if behaviour == 7:
            end = time.time() + 12
            while time.time() < end:
                time.sleep(0.1)
        sys.exit(4)
    write({"type": "metric", "step": step, "key": "train_loss", "value": 1.0 / step})
    if behaviour in (5, 6, 7):
        time.sleep(0.05)
if behaviour == 3:
    write({"type": "divergence", "step": steps, "cause": "loss_spike", "value": 9.0, "last_finite_loss": 1.0, "lr": 0.1})
    write({"type": "end", "status": "diverged", "exit_code": 3})
    status({"status": "diverged", "cause": "loss_spike", "reason": f"loss_spike at step {steps}", "exit_code": 3})
    sys.exit(3)
layers = spec.get("model", {}).get("keep_softmax_layers")
if layers:  # a layer-selection probe: its KL to the teacher, ((5 i) mod 8) / 10 for the layer i it restores
    write({"type": "metric", "step": steps, "key": "valid_kl", "value": ((5 * layers[0]) % 8) / 10})
write({"type": "eval", "split": "valid", "step": steps, "loss": 0.5, "tokens": 10})
write({"type": "end", "status": "finished", "exit_code": 0})
status({"status": "finished", "exit_code": 0})
