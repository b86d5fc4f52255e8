#!/usr/bin/env python3
# Writes torchvision's ResNet state_dict names and shapes, one "name (d0,d1,...)" line each in
# state_dict order, to tests/fixtures/resnet/resnet{18,50}_state.txt: the reference that
# test_resnet.cpp checks our submodule names against. Also prints each depth's conv + fc
# multiply-adds at 224x224, counted with forward hooks (test_resnet.cpp pins them). Run once by
# hand (needs torch and torchvision, e.g. /usr/bin/python3 on Debian); ctest never runs it.
import pathlib

import torch
import torchvision

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "resnet"


def main():
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for depth in (18, 50):
        model = getattr(torchvision.models, f"resnet{depth}")(weights=None)
        lines = [f"{name} ({','.join(str(d) for d in t.shape)})"
                 for name, t in model.state_dict().items()]
        path = FIXTURES / f"resnet{depth}_state.txt"
        path.write_text("\n".join(lines) + "\n")
        print(f"{path}: {len(lines)} entries (torchvision {torchvision.__version__})")

    for depth in (18, 34, 50, 101, 152):
        print(f"resnet{depth} conv + fc multiply-adds at 224x224: {conv_fc_macs(depth)}")


def conv_fc_macs(depth):
    model = getattr(torchvision.models, f"resnet{depth}")(weights=None).eval()
    total = [0]

    def hook(module, inputs, output):
        spatial = output.shape[2] * output.shape[3] if output.dim() == 4 else 1
        total[0] += module.weight.numel() * spatial

    for m in model.modules():
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
            m.register_forward_hook(hook)
    with torch.no_grad():
        model(torch.zeros(1, 3, 224, 224))
    return total[0]


if __name__ == "__main__":
    main()
