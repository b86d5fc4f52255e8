"""The PyTorch eager twin of bench_train_step.cpp: the same 3-D U-Net, loss, Adam and clipping,
timed the same way, printing the same `result` line. On the CPU run it with Debian's interpreter
(/usr/bin/python3 + python3-torch): bench/bench_train_step.sh alternates it with the C++ bench.
With --device cuda it runs on a GPU (cuDNN autotuning on, each timed step ended by a device
synchronisation), as scripts/gpu-check does with the PyTorch whose LibTorch the C++ side uses.
The model mirrors src/model/unet.cpp module for module and in construction order, so from the
same seed both draw the same initial weights, input and labels (compare loss0). No GEMM here.
Legend: N batch, C channels, D/H/W spatial sizes; tensors are NCDHW.
"""
import argparse
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

MIB = 1024.0 * 1024.0


def proc_status_bytes(key):
    """A "VmXXX:" field of /proc/self/status in bytes (0 when absent)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def in_fp32(x, op):
    """op(x as float32) with autocast off; kept float32 under autocast, else cast back (unet.cpp)."""
    kind = x.device.type
    autocast_on = torch.is_autocast_enabled() if kind == "cuda" else torch.is_autocast_cpu_enabled()
    with torch.autocast(kind, enabled=False):
        y = op(x.float())
    return y if autocast_on else y.to(x.dtype)


def group_norm(norm, x):
    # 1.13's CPU autocast hands GroupNorm a bf16 input with float32 parameters, which its kernel
    # rejects; run it in the parameters' dtype, as unet.cpp (and CUDA autocast) do.
    return norm(x if x.dtype == norm.weight.dtype else x.to(norm.weight.dtype))


class DoubleConv(nn.Module):
    def __init__(self, cin, cout, groups):
        super().__init__()
        self.conv1 = nn.Conv3d(cin, cout, 3, padding=1, bias=False)  # (Cout, Cin, 3, 3, 3)
        self.norm1 = nn.GroupNorm(groups, cout, eps=1e-5, affine=True)
        self.conv2 = nn.Conv3d(cout, cout, 3, padding=1, bias=False)  # (Cout, Cout, 3, 3, 3)
        self.norm2 = nn.GroupNorm(groups, cout, eps=1e-5, affine=True)

    def forward(self, x):
        h = group_norm(self.norm1, self.conv1(x)).relu_()
        return group_norm(self.norm2, self.conv2(h)).relu_()


class Down(nn.Module):
    def __init__(self, cin, cout, groups, fp32_pool):
        super().__init__()
        self.pool = nn.MaxPool3d(2)
        self.conv = DoubleConv(cin, cout, groups)
        self.fp32_pool = fp32_pool

    def forward(self, x):
        return self.conv(in_fp32(x, self.pool) if self.fp32_pool else self.pool(x))


class Up(nn.Module):
    def __init__(self, cin, cout, groups, fp32_upsample):
        super().__init__()
        self.up = nn.ConvTranspose3d(cin, cin // 2, 2, stride=2, bias=True)  # (Cin, Cin/2, 2, 2, 2)
        self.conv = DoubleConv(cin, cout, groups)
        self.fp32_upsample = fp32_upsample

    def forward(self, x, skip):
        if self.fp32_upsample:
            up = in_fp32(x, lambda xf: F.conv_transpose3d(
                xf, self.up.weight.float(), self.up.bias.float(), stride=2))
        else:
            up = self.up(x)
        return self.conv(torch.cat([skip, up], dim=1))  # power-of-two volumes: no padding


class UNet3d(nn.Module):
    def __init__(self, in_channels, n_classes, layers, base, groups, fp32_pool_and_upsample):
        super().__init__()
        self.inc = DoubleConv(in_channels, base, groups)
        self.downs = nn.ModuleList(
            Down(base << (l - 1), base << l, groups, fp32_pool_and_upsample)
            for l in range(1, layers + 1))
        self.ups = nn.ModuleList(
            Up(base << (layers - k + 1), base << (layers - k), groups, fp32_pool_and_upsample)
            for k in range(1, layers + 1))
        self.outc = nn.Conv3d(base, n_classes, 1, bias=True)

    def forward(self, x):
        skips = []
        h = self.inc(x)
        for down in self.downs:
            skips.append(h)
            h = down(h)
        for up in self.ups:
            h = up(h, skips.pop())
        return self.outc(h)


def ce_class_weights(labels, n_classes):
    """train::ce_class_weights of the labels' counts: w[0] = T/bg, w[1:] = T/fg (float32)."""
    counts = torch.bincount(labels.reshape(-1), minlength=n_classes).tolist()
    bg, fg = counts[0], sum(counts[1:])
    w = torch.ones(n_classes, dtype=torch.float32)
    if bg and fg:
        w[0] = (bg + fg) / bg
        w[1:] = (bg + fg) / fg
    return w


def segmentation_loss(logits, target, class_weights):
    """train::segmentation_loss: weighted CE + (1 - mean soft foreground Dice), float32."""
    x = logits.float()  # (N, K, D, H, W)
    k = x.shape[1]
    log_p_y = x.log_softmax(1).gather(1, target.unsqueeze(1)).reshape(-1)
    w_y = class_weights.index_select(0, target.reshape(-1))
    ce = (-log_p_y * w_y).sum() / w_y.sum().clamp_min(torch.finfo(torch.float32).eps)
    p_fg = x.softmax(1).narrow(1, 1, k - 1)  # (N, K-1, D, H, W)
    g_fg = target.unsqueeze(1) == torch.arange(1, k, device=target.device).view(1, k - 1, 1, 1, 1)
    dims = (2, 3, 4)
    inter = 2.0 * (p_fg * g_fg).sum(dims)
    set_sum = p_fg.sum(dims) + g_fg.sum(dims, dtype=torch.float32)
    set_sum = torch.where(set_sum == 0, inter, set_sum)
    dice = (inter + 1e-6) / (set_sum + 1e-6)
    return ce + (1.0 - dice.mean())


def bf16_pool_and_upsample_work(device):
    """Whether bf16 max_pool3d and conv_transpose3d run (a coarse version of the C++ probe)."""
    try:
        x = torch.randn(1, 2, 4, 4, 4, device=device)
        w = torch.randn(2, 3, 2, 2, 2, device=device)
        torch.max_pool3d(x.bfloat16(), 2)
        y = F.conv_transpose3d(x.bfloat16(), w.bfloat16(), stride=2).float()
        return torch.allclose(y, F.conv_transpose3d(x, w, stride=2), rtol=5e-2, atol=5e-2)
    except RuntimeError:
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=int, default=5)
    ap.add_argument("--bottleneck-dim", type=int, default=3)
    ap.add_argument("--base", type=int, default=16)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0,
                    help="0: OMP_NUM_THREADS or the CPUs this process may run on")
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    a = ap.parse_args()
    device = torch.device("cuda:0" if a.device == "cuda" else "cpu")
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True  # as scaffold benchmark (more_determinism 0)

    def wait():  # CUDA kernels are asynchronous: each timed region ends here
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    threads = a.threads or int(os.environ.get("OMP_NUM_THREADS", 0)) or len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    side = 1 << a.scale
    layers = a.scale - a.bottleneck_dim
    n_classes, in_channels = 6, 3

    fp32_pool_up = a.bf16 and not bf16_pool_and_upsample_work(device)
    torch.manual_seed(a.seed)  # model, input, labels: the C++ bench's order
    net = UNet3d(in_channels, n_classes, layers, a.base, 8, fp32_pool_up).train()
    image = torch.randn(a.batch, in_channels, side, side, side)  # (N, 3, D, H, W)
    labels = torch.randint(0, n_classes, (a.batch, side, side, side))  # (N, D, H, W)
    if a.channels_last:
        net = net.to(memory_format=torch.channels_last_3d)
        image = image.contiguous(memory_format=torch.channels_last_3d)
    class_weights = ce_class_weights(labels, n_classes).to(device)
    # Drawn on the CPU (the C++ bench draws the same numbers), then moved: strides are kept.
    net, image, labels = net.to(device), image.to(device), labels.to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    params = sum(p.numel() for p in net.parameters())

    phases = []  # per step: forward, loss, zero_grad + backward, clip + Adam + item (s)

    def step():  # the segmentation task's training step (workloads/scaffold)
        t0 = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=a.bf16):
            logits = net(image)
        wait()
        t1 = time.perf_counter()
        loss = segmentation_loss(logits, labels, class_weights)
        wait()
        t2 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        wait()
        t3 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        optimizer.step()
        value = loss.item()
        phases.append((t1 - t0, t2 - t1, t3 - t2, time.perf_counter() - t3))
        return value  # the first step's is loss0, before any update

    rss_before = proc_status_bytes("VmRSS")
    losses, step_s = [], []
    for _ in range(a.warmup):
        losses.append(step())
    for _ in range(a.steps):
        t0 = time.perf_counter()
        losses.append(step())
        step_s.append(time.perf_counter() - t0)
    loss0 = losses[0]
    hwm = proc_status_bytes("VmHWM")
    fwd_ms, loss_ms, bwd_ms, opt_ms = (
        statistics.median(p[i] for p in phases[a.warmup:]) * 1e3 for i in range(4))

    step_ms = statistics.median(step_s) * 1e3
    # model::unet_forward_flops, times 3 (forward + 2x backward) and the batch
    c = [a.base << l for l in range(layers + 1)]
    v = [(side >> l) ** 3 for l in range(layers + 1)]
    macs = 27 * (in_channels * c[0] + c[0] ** 2) * v[0] + c[0] * n_classes * v[0]
    for l in range(1, layers + 1):
        macs += 27 * (c[l - 1] * c[l] + c[l] ** 2) * v[l]
        macs += 8 * c[l] * c[l - 1] * v[l] + 27 * (c[l] * c[l - 1] + c[l - 1] ** 2) * v[l - 1]
    step_gflop = 3 * 2 * macs * a.batch / 1e9
    rate = step_gflop / (step_ms * 1e-3)
    print(f"train_step.py (PyTorch {torch.__version__}): scale {a.scale} ({side}^3), {layers} layers, "
          f"base {a.base}, batch {a.batch}, {'bf16 autocast' if a.bf16 else 'fp32'}, "
          f"{'ChannelsLast3d' if a.channels_last else 'NCDHW'}, on {device}, {threads} threads, "
          f"{params} parameters")
    print(f"  step: median {step_ms:.1f} ms (min {min(step_s) * 1e3:.1f}, max {max(step_s) * 1e3:.1f}) "
          f"of {a.steps} after {a.warmup} warm-up; {step_gflop:.2f} GFLOP -> {rate:.1f} GFLOP/s")
    print(f"  phases (medians): forward {fwd_ms:.1f} ms, loss {loss_ms:.1f} ms, zero_grad + backward "
          f"{bwd_ms:.1f} ms, clip + Adam {opt_ms:.1f} ms")
    print(f"  memory: VmRSS before the first step {rss_before / MIB:.0f} MiB, VmHWM after the steps "
          f"{hwm / MIB:.0f} MiB (+{(hwm - rss_before) / MIB:.0f} MiB); first-step loss {loss0:.6f}")
    print(f"result impl=py device={device.type} scale={a.scale} base={a.base} layers={layers} batch={a.batch} "
          f"dtype={'bf16' if a.bf16 else 'fp32'} layout={'cl3d' if a.channels_last else 'ncdhw'} "
          f"threads={threads} params={params} step_ms={step_ms:.2f} "
          f"step_ms_min={min(step_s) * 1e3:.2f} step_ms_max={max(step_s) * 1e3:.2f} "
          f"step_gflop={step_gflop:.3f} model_gflop_per_s={rate:.2f} rss_before_mib={rss_before / MIB:.1f} "
          f"peak_rss_mib={hwm / MIB:.1f} peak_rss_delta_mib={(hwm - rss_before) / MIB:.1f} "
          f"loss0={loss0:.6f} forward_ms={fwd_ms:.2f} loss_ms={loss_ms:.2f} backward_ms={bwd_ms:.2f} "
          f"optimizer_ms={opt_ms:.2f}")


if __name__ == "__main__":
    main()
