#!/usr/bin/env python3
# Writes tests/fixtures/resnet/torchvision_logits.txt: torchvision's ResNet-18 and ResNet-50
# (num_classes 4) in float64, every parameter and buffer set by the formula below, run on a fixed
# (2, 3, 64, 48) input in eval and in train mode. test_resnet.cpp sets the same values in our model
# and compares. Run once by hand (needs torch and torchvision, e.g. /usr/bin/python3 on Debian);
# ctest never runs it. No weights are committed: only the formula and a few dozen numbers.
#
# The formula (test_resnet.cpp's set_reference_values must stay identical):
#   parameter k of named_parameters(), element j in row-major order, s = sin(0.1 * k + j):
#     dim >= 2 (conv, fc weight)   2 / sqrt(fan_in) * s       fan_in = numel / size(0)
#     dim 1, name ends in "weight" 1 + 0.1 * s                (BatchNorm weight)
#     dim 1, name ends in "bias"   0.1 * s                    (BatchNorm bias, fc bias)
#   buffer b of named_buffers(), element j, s = sin(0.1 * b + j):
#     running_mean 0.1 * s,  running_var 1 + 0.25 * s,  num_batches_tracked left at 0
#   input element i in row-major order: sin(0.7 * i)
import math
import pathlib

import torch
import torchvision

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "resnet"
NUM_CLASSES = 4
INPUT_SHAPE = (2, 3, 64, 48)  # H != W, so a swapped height and width shows


def set_reference_values(model):
    with torch.no_grad():
        for k, (name, p) in enumerate(model.named_parameters()):
            s = torch.sin(0.1 * k + torch.arange(p.numel(), dtype=torch.float64))
            if p.dim() >= 2:
                v = 2.0 / math.sqrt(p.numel() // p.size(0)) * s
            elif name.endswith("weight"):
                v = 1.0 + 0.1 * s
            else:
                v = 0.1 * s
            p.copy_(v.view(p.shape))
        for b, (name, t) in enumerate(model.named_buffers()):
            s = torch.sin(0.1 * b + torch.arange(t.numel(), dtype=torch.float64))
            if name.endswith("running_mean"):
                t.copy_((0.1 * s).view(t.shape))
            elif name.endswith("running_var"):
                t.copy_((1.0 + 0.25 * s).view(t.shape))


def reference_input():
    n = math.prod(INPUT_SHAPE)
    return torch.sin(0.7 * torch.arange(n, dtype=torch.float64)).view(INPUT_SHAPE)


def fmt(values):
    return " ".join(repr(float(v)) for v in values)


def main():
    torch.manual_seed(0)  # the formula sets every value; the seed only pins the default init
    lines = [f"# torchvision {torchvision.__version__}, torch {torch.__version__}, float64, "
             f"num_classes {NUM_CLASSES}, input {INPUT_SHAPE}: see torchvision_reference.py"]
    x = reference_input()
    for depth in (18, 50):
        name = f"resnet{depth}"
        model = getattr(torchvision.models, name)(weights=None, num_classes=NUM_CLASSES).double()
        set_reference_values(model)
        model.eval()
        with torch.no_grad():
            lines.append(f"{name} eval_logits {fmt(model(x).flatten())}")
        model.train()
        with torch.no_grad():
            lines.append(f"{name} train_logits {fmt(model(x).flatten())}")
        # The train-mode forward updated the running statistics (momentum 0.1, unbiased variance).
        lines.append(f"{name} train_bn1_running_mean {fmt(model.bn1.running_mean[:4])}")
        lines.append(f"{name} train_bn1_running_var {fmt(model.bn1.running_var[:4])}")
    FIXTURES.mkdir(parents=True, exist_ok=True)
    path = FIXTURES / "torchvision_logits.txt"
    path.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
