#!/usr/bin/env python3
"""One FNO training step in PyTorch eager: the twin of bench/bench_fno_step.cpp, the model of
src/workloads/fno/{fno,spectral}.cpp written out (lift, Fourier layers of rfft -> kept corner
modes -> complex mix -> inverse plus a pointwise path, GELU, projection), every parameter, the
input and the target set from the same closed-form pattern, so the first loss equals the C++
side's. Prints one `result impl=py ...` line."""

import argparse
import resource
import time

import torch


def pattern(shape, k):
    n = 1
    for s in shape:
        n *= s
    return (torch.sin(torch.arange(n, dtype=torch.float64) * 0.37 + k) * 0.05).float().reshape(shape)


class SpectralConv(torch.nn.Module):
    def __init__(self, width, modes):
        super().__init__()
        self.modes = modes
        kept = [2 * m for m in modes[:-1]] + [modes[-1]]
        self.weight = torch.nn.Parameter(torch.zeros(width, width, *kept, 2))

    def forward(self, x):
        d = len(self.modes)
        grid = x.shape[2:]
        y = torch.fft.rfft(x, dim=d + 1)[..., : self.modes[-1]]
        for i in range(d - 2, -1, -1):
            m, n = self.modes[i], y.shape[2 + i]
            y = torch.fft.fft(y, dim=2 + i)
            if 2 * m < n:
                y = torch.cat([y.narrow(2 + i, 0, m), y.narrow(2 + i, n - m, m)], 2 + i)
        w = torch.view_as_complex(self.weight)
        b, ci, co = y.shape[0], y.shape[1], w.shape[1]
        k = y[0, 0].numel()
        out = torch.bmm(y.reshape(b, ci, k).permute(2, 0, 1), w.reshape(ci, co, k).permute(2, 0, 1))
        y = out.permute(1, 2, 0).reshape(b, co, *y.shape[2:])
        for i in range(d - 1):
            n, m2 = grid[i], y.shape[2 + i]
            if m2 < n:
                shape = list(y.shape)
                shape[2 + i] = n - m2
                y = torch.cat([y.narrow(2 + i, 0, m2 // 2), torch.zeros(shape, dtype=y.dtype),
                               y.narrow(2 + i, m2 // 2, m2 // 2)], 2 + i)
            y = torch.fft.ifft(y, dim=2 + i)
        n_last = grid[-1]
        if y.shape[-1] < n_last // 2 + 1:
            shape = list(y.shape)
            shape[-1] = n_last // 2 + 1 - y.shape[-1]
            y = torch.cat([y, torch.zeros(shape, dtype=y.dtype)], -1)
        return torch.fft.irfft(y, n=n_last, dim=d + 1)


def channel_linear(x, lin):
    b, c = x.shape[0], x.shape[1]
    y = torch.matmul(lin.weight, x.reshape(b, c, -1)) + lin.bias.view(-1, 1)
    return y.view(b, lin.weight.shape[0], *x.shape[2:])


class Fno(torch.nn.Module):
    def __init__(self, channels, modes, width, layers, projection):
        super().__init__()
        d = len(modes)
        self.lift = torch.nn.Linear(channels + d, width)
        self.spectral = torch.nn.ModuleList([SpectralConv(width, modes) for _ in range(layers)])
        self.pointwise = torch.nn.ModuleList([torch.nn.Linear(width, width) for _ in range(layers)])
        self.project = torch.nn.Linear(width, projection)
        self.output = torch.nn.Linear(projection, channels)

    def forward(self, x):
        grid = x.shape[2:]
        axes = [(torch.arange(n, dtype=torch.float64) / (n - 1)).float() for n in grid]
        coords = torch.stack(torch.meshgrid(*axes, indexing="ij"), 0).unsqueeze(0)
        x = torch.cat([x, coords.expand(x.shape[0], *coords.shape[1:])], 1)
        x = channel_linear(x, self.lift)
        for l, (s, p) in enumerate(zip(self.spectral, self.pointwise)):
            x = s(x) + channel_linear(x, p)
            if l + 1 < len(self.spectral):
                x = torch.nn.functional.gelu(x)
        x = torch.nn.functional.gelu(channel_linear(x, self.project))
        return channel_linear(x, self.output)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", type=int, nargs="+", default=[128, 32])
    ap.add_argument("--channels", type=int, default=4)
    ap.add_argument("--modes", type=int, default=12)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--projection", type=int, default=128)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    net = Fno(a.channels, [a.modes] * len(a.grid), a.width, a.layers, a.projection)
    with torch.no_grad():
        for i, (_, p) in enumerate(sorted(net.named_parameters())):
            p.copy_(pattern(p.shape, float(i)))
    shape = [a.batch, a.channels] + a.grid
    x = pattern(shape, 0.5) * 20.0
    y = pattern(shape, 1.5) * 20.0
    adam = torch.optim.Adam(net.parameters(), lr=1e-3, weight_decay=1e-4)
    params = sum(p.numel() for p in net.parameters())

    def step():
        pred = net(x)
        loss = ((pred - y).flatten(1).norm(dim=1) / y.flatten(1).norm(dim=1)).mean()
        adam.zero_grad(set_to_none=True)
        loss.backward()
        adam.step()
        return loss.item()

    loss0 = None
    for _ in range(a.warmup):
        loss = step()
        loss0 = loss if loss0 is None else loss0
    times = []
    for _ in range(a.steps):
        t = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t)
        loss0 = loss if loss0 is None else loss0
    times.sort()
    n = len(times)
    ms = (times[n // 2] if n % 2 else (times[n // 2 - 1] + times[n // 2]) / 2) * 1e3
    print("result impl=py grid={0} channels={1} modes={2} width={3} layers={4} batch={5} threads={6} "
          "params={7} loss0={8:.8f} step_ms={9:.3f} timesteps_per_s={10:.2f} peak_rss_mib={11}".format(
              "x".join(map(str, a.grid)), a.channels, a.modes, a.width, a.layers, a.batch,
              torch.get_num_threads(), params, loss0, ms, a.batch / (ms / 1e3),
              resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024))


if __name__ == "__main__":
    main()
