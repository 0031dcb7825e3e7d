#!/usr/bin/env python3
# Usage, on a lent GPU machine (PyTorch there): python3 scripts/gpu-bwprobe.py
# Bandwidth probe (issue 3, the 400 GB/s question): copy engines in a ring (GPU i -> i+1, all at once),
# pinned host memory over PCIe (every GPU D2H and H2D at once), and both together.
import torch, time
n = torch.cuda.device_count()
S = 512 << 20
IT = 6
src = [torch.empty(S, dtype=torch.uint8, device=f"cuda:{i}") for i in range(n)]
dst = [torch.empty(S, dtype=torch.uint8, device=f"cuda:{(i + 1) % n}") for i in range(n)]
dup = [torch.empty(S, dtype=torch.uint8, device=f"cuda:{i}") for i in range(n)]
hout = [torch.empty(S, dtype=torch.uint8, pin_memory=True) for i in range(n)]
hin = [torch.empty(S, dtype=torch.uint8, pin_memory=True) for i in range(n)]
sr = [torch.cuda.Stream(device=i) for i in range(n)]
sd = [torch.cuda.Stream(device=i) for i in range(n)]
su = [torch.cuda.Stream(device=i) for i in range(n)]

def sync():
    for i in range(n):
        torch.cuda.synchronize(i)

def ring():
    for i in range(n):
        with torch.cuda.device(i), torch.cuda.stream(sr[i]):
            dst[i].copy_(src[i], non_blocking=True)

def d2h():
    for i in range(n):
        with torch.cuda.device(i), torch.cuda.stream(sd[i]):
            hout[i].copy_(src[i], non_blocking=True)

def h2d():
    for i in range(n):
        with torch.cuda.device(i), torch.cuda.stream(su[i]):
            dup[i].copy_(hin[i], non_blocking=True)

def run(name, parts):
    for p in parts:
        p()
    sync()
    t = time.perf_counter()
    for _ in range(IT):
        for p in parts:
            p()
    sync()
    dt = time.perf_counter() - t
    print(f"{name}: {S * IT / dt / 1e9:.1f} GB/s per GPU per part ({len(parts)} parts, {n} GPUs, {dt*1e3:.0f} ms)", flush=True)

run("ring CE (i -> i+1)", [ring])
run("D2H pinned", [d2h])
run("H2D pinned", [h2d])
run("D2H + H2D", [d2h, h2d])
run("ring CE + D2H + H2D", [ring, d2h, h2d])
run("ring CE again", [ring])
