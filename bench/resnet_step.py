"""The PyTorch eager twin of bench_resnet_step.cpp: torchvision's ResNet, mean cross-entropy,
SGD (lr 0.01, momentum 0.9, weight decay 1e-4), timed the same way, printing the same `result`
line. Run it with Debian's interpreter (/usr/bin/python3 + python3-torch + python3-torchvision);
bench/bench_resnet_step.sh alternates it with the C++ bench. From the same seed both sides draw
the same initial weights, images and labels (compare loss0). No data loading, no validation.
Legend: N batch, C channels, H/W spatial sizes, K classes.
"""
import argparse
import os
import statistics
import time

import torch
import torch.nn.functional as F
import torchvision

MIB = 1024.0 * 1024.0


def proc_status_bytes(key):
    """A "VmXXX:" field of /proc/self/status in bytes (0 when absent)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def sample_cpu():
    """(machine busy CPU s, this process's CPU s, wall s): bench_resnet_step.cpp's sample_cpu."""
    with open("/proc/stat") as f:
        v = [float(x) for x in f.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = v
    t = os.times()
    return ((user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK"),
            t.user + t.system, time.monotonic())


def other_cpu_share(a, b):
    """Share of all CPUs' time between samples a and b that other processes took, in [0, 1]."""
    capacity = (b[2] - a[2]) * os.sysconf("SC_NPROCESSORS_ONLN")
    other = (b[0] - a[0]) - (b[1] - a[1])
    return min(max(other / capacity, 0.0), 1.0) if capacity > 0 else 0.0


def resnet_forward_flops(model, size):
    """imgcls::resnet_forward_flops: 2 x multiply-adds of every Conv2d and of fc, counted with
    forward hooks on one (1, 3, size, size) image (BN, ReLU, pools, adds and biases not counted)."""
    macs = []

    def conv_hook(m, _inp, out):
        macs.append(out.numel() * m.in_channels // m.groups * m.kernel_size[0] * m.kernel_size[1])

    def fc_hook(m, _inp, out):
        macs.append(out.numel() * m.in_features)

    hooks = [m.register_forward_hook(conv_hook) for m in model.modules()
             if isinstance(m, torch.nn.Conv2d)]
    hooks += [m.register_forward_hook(fc_hook) for m in model.modules()
              if isinstance(m, torch.nn.Linear)]
    was_training = model.training
    model.eval()
    with torch.no_grad():
        model(torch.zeros(1, 3, size, size))
    model.train(was_training)
    for h in hooks:
        h.remove()
    return 2 * sum(macs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--depth", type=int, default=18, choices=(18, 34, 50, 101, 152))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=0,
                    help="0: OMP_NUM_THREADS or the CPUs this process may run on")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--channels-last", type=int, default=0, choices=(0, 1))
    ap.add_argument("--precision", default="fp32", choices=("fp32", "bf16"))
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    threads = a.threads or int(os.environ.get("OMP_NUM_THREADS", 0)) or len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    bf16 = a.precision == "bf16"

    torch.manual_seed(a.seed)  # model, images, labels: the C++ bench's order
    net = getattr(torchvision.models, f"resnet{a.depth}")(num_classes=a.classes).train()
    images = torch.randn(a.batch, 3, a.image_size, a.image_size)  # (N, 3, H, W)
    labels = torch.randint(0, a.classes, (a.batch,))  # (N), int64
    if a.channels_last:
        net = net.to(memory_format=torch.channels_last)
        images = images.contiguous(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    params = sum(p.numel() for p in net.parameters())
    # After the draws above, so it cannot shift them (it runs the model once, in eval mode).
    step_gflop = 3 * resnet_forward_flops(net, a.image_size) * a.batch / 1e9

    phases = []  # per step: forward, loss, zero_grad + backward, SGD + item (s)

    def step():
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = net(images)  # (N, K)
        t1 = time.perf_counter()
        loss = F.cross_entropy(logits.float(), labels)  # outside autocast, fp32, as the C++ side
        t2 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        t3 = time.perf_counter()
        optimizer.step()
        value = loss.item()
        phases.append((t1 - t0, t2 - t1, t3 - t2, time.perf_counter() - t3))
        return value  # the first step's is loss0, before any update

    rss_before = proc_status_bytes("VmRSS")
    losses, step_s = [], []
    for _ in range(a.warmup):
        losses.append(step())
    cpu_before = sample_cpu()
    for _ in range(a.steps):
        t0 = time.perf_counter()
        losses.append(step())
        step_s.append(time.perf_counter() - t0)
    other_cpu = other_cpu_share(cpu_before, sample_cpu())
    loss0 = losses[0]
    hwm = proc_status_bytes("VmHWM")
    fwd_ms, loss_ms, bwd_ms, opt_ms = (
        statistics.median(p[i] for p in phases[a.warmup:]) * 1e3 for i in range(4))

    step_ms = statistics.median(step_s) * 1e3
    images_per_s = a.batch / (step_ms * 1e-3)
    rate = step_gflop / (step_ms * 1e-3)
    layout = "nhwc" if a.channels_last else "nchw"
    print(f"resnet_step.py (PyTorch {torch.__version__}, torchvision {torchvision.__version__}): "
          f"resnet{a.depth}, batch {a.batch}, {a.image_size}x{a.image_size} images, {a.classes} "
          f"classes, {'bf16 autocast' if bf16 else 'fp32'}, "
          f"{'channels-last' if a.channels_last else 'NCHW'}, {threads} threads, {params} parameters")
    print(f"  step: median {step_ms:.1f} ms (min {min(step_s) * 1e3:.1f}, max {max(step_s) * 1e3:.1f}) "
          f"of {a.steps} after {a.warmup} warm-up; {images_per_s:.1f} images/s; "
          f"{step_gflop:.2f} GFLOP -> {rate:.1f} GFLOP/s")
    print(f"  phases (medians): forward {fwd_ms:.1f} ms, loss {loss_ms:.1f} ms, zero_grad + backward "
          f"{bwd_ms:.1f} ms, SGD + item {opt_ms:.1f} ms")
    print(f"  memory: VmRSS before the first step {rss_before / MIB:.0f} MiB, VmHWM after the steps "
          f"{hwm / MIB:.0f} MiB (+{(hwm - rss_before) / MIB:.0f} MiB); first-step loss {loss0:.6f}")
    print(f"  other processes used {other_cpu * 100:.0f}% of the machine's CPU time during the "
          f"timed steps")
    print(f"result impl=py depth={a.depth} batch={a.batch} image={a.image_size} classes={a.classes} "
          f"dtype={a.precision} layout={layout} threads={threads} params={params} "
          f"step_ms={step_ms:.2f} step_ms_min={min(step_s) * 1e3:.2f} "
          f"step_ms_max={max(step_s) * 1e3:.2f} images_per_s={images_per_s:.2f} "
          f"step_gflop={step_gflop:.3f} model_gflop_per_s={rate:.2f} "
          f"rss_before_mib={rss_before / MIB:.1f} peak_rss_mib={hwm / MIB:.1f} "
          f"peak_rss_delta_mib={(hwm - rss_before) / MIB:.1f} loss0={loss0:.6f} "
          f"forward_ms={fwd_ms:.2f} loss_ms={loss_ms:.2f} backward_ms={bwd_ms:.2f} "
          f"optimizer_ms={opt_ms:.2f} other_cpu={other_cpu:.3f}")


if __name__ == "__main__":
    main()
