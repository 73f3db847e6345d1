"""The decay recurrence as a per-step TorchScript loop, in the style of the decay rule's public reference code,
timed for fwlab-bench-decay (which runs it with /usr/bin/python3, Debian's python3-torch).

usage: decay_torchscript.py B H T D M REPEATS THREADS [--memory]
Prints `fwdbwd_ms X`, `fwd_ms X` and `op_bytes X` (the op's peak RSS above the inputs, from a child run).
"""
import statistics
import subprocess
import sys
import time

import torch


@torch.jit.script
def decay_loop(q, k, v, log_a, log_b):
    a = log_a.exp()
    b = log_b.exp()
    S = torch.zeros(q.size(0), q.size(1), v.size(3), q.size(3), dtype=q.dtype)
    ys = []
    for t in range(q.size(2)):
        S = a[:, :, t, :, None] * S * b[:, :, t, None, :] + v[:, :, t, :, None] * k[:, :, t, None, :]
        ys.append(torch.matmul(S, q[:, :, t, :, None]).squeeze(-1))
    return torch.stack(ys, 2)


def inputs(B, H, T, D, M):
    torch.manual_seed(0)
    q = torch.randn(B, H, T, M, requires_grad=True)
    k = torch.randn(B, H, T, M, requires_grad=True)
    v = torch.randn(B, H, T, D, requires_grad=True)
    la = torch.nn.functional.logsigmoid(torch.randn(B, H, T, D) + 2).requires_grad_()
    lb = torch.nn.functional.logsigmoid(torch.randn(B, H, T, M) + 2).requires_grad_()
    return (q, k, v, la, lb), torch.randn(B, H, T, D)


def fwd_bwd(x, gy):
    for t in x:
        t.grad = None
    decay_loop(*x).backward(gy)


def fwd(x):
    with torch.no_grad():
        decay_loop(*x)


def median_ms(repeats, body):
    body()  # warm-up (and the TorchScript profiling runs)
    body()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        body()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def status_kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1])
    return -1


def main():
    B, H, T, D, M, repeats, threads = (int(a) for a in sys.argv[1:8])
    torch.set_num_threads(threads)
    x, gy = inputs(B, H, T, D, M)
    if "--memory" in sys.argv:
        baseline = status_kib("VmRSS:")
        fwd_bwd(x, gy)
        print((status_kib("VmHWM:") - baseline) * 1024)
        return
    print("fwdbwd_ms", median_ms(repeats, lambda: fwd_bwd(x, gy)))
    print("fwd_ms", median_ms(repeats, lambda: fwd(x)))
    mem = subprocess.run([sys.executable, __file__, *sys.argv[1:8], "--memory"], capture_output=True, text=True)
    print("op_bytes", mem.stdout.strip() or -1)


if __name__ == "__main__":
    main()
