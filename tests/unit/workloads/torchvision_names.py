#!/usr/bin/env python3
# Writes torchvision's ResNet state_dict names and shapes, one "name (d0,d1,...)" line each in
# state_dict order, to tests/fixtures/resnet/resnet{18,50}_state.txt: the reference that
# test_resnet.cpp checks our submodule names against. Run once by hand (needs torch and
# torchvision, e.g. Debian's python3-torchvision under /usr/bin/python3); ctest never runs it.
import pathlib

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


if __name__ == "__main__":
    main()
