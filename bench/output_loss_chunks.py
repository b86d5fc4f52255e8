#!/usr/bin/env python3
"""GPT's output layer + cross-entropy, plain against fused over chunks of tokens (Liger-style),
in PyTorch eager: does fusing pay on a CPU? (docs/performance.md, "The output layer and
cross-entropy fused over chunks, measured and not built").

Plain: logits = h W^T (autocast bf16 when asked), F.cross_entropy on float logits, backward.
Chunked: per chunk of tokens, the chunk's logits, softmax and loss gradient, then dh and dW
accumulated from it; the N x V logits are never stored. Prints the times of 4 steps of each.

Usage: LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 /usr/bin/python3 \\
         bench/output_loss_chunks.py [fp32|bf16] [chunk tokens]
"""
import sys
import time

import torch
import torch.nn.functional as F

torch.set_num_threads(2)
N, H, V = 1024, 768, 50304
dtype = sys.argv[1] if len(sys.argv) > 1 else "fp32"
chunk = int(sys.argv[2]) if len(sys.argv) > 2 else 128
bf16 = dtype == "bf16"
torch.manual_seed(0)
W = (torch.randn(V, H) * 0.02).requires_grad_(True)
h = torch.randn(N, H).requires_grad_(True)
y = torch.randint(0, V, (N,))


def plain():
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        z = h @ W.t()
    F.cross_entropy(z.float(), y).backward()


def chunked():
    with torch.no_grad():
        dh, dW = torch.empty_like(h), torch.zeros_like(W)
        w_low = W.to(torch.bfloat16) if bf16 else W
        h_low = h.to(torch.bfloat16) if bf16 else h
        for s in range(0, N, chunk):
            hc = h_low[s:s + chunk]
            z = (hc @ w_low.t()).float()
            p = torch.softmax(z, 1)
            p[torch.arange(p.size(0)), y[s:s + chunk]] -= 1
            p.mul_(1.0 / N)
            p_low = p.to(torch.bfloat16) if bf16 else p
            dh[s:s + chunk] = (p_low @ w_low).float()
            dW.add_((p_low.t() @ hc).float())
        return dh, dW


for name, step in (("plain", plain), ("chunked", chunked)):
    times = []
    for _ in range(4):
        W.grad = h.grad = None
        t = time.perf_counter()
        step()
        times.append(round((time.perf_counter() - t) * 1e3))
    print(f"{name} {dtype} chunk {chunk}: ms per step {times}")
