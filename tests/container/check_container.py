#!/usr/bin/env python3
"""Tests of the container image (scripts/container, docs/deploy.md), run by ctest (label
`container`, tests/container/CMakeLists.txt):

  image       `scripts/container build` makes the image from Debian's packages (the ctest
              fixture container_image: the other container tests use it) and records its name in
              the state file; the build checks inside the image that every library of scaffold
              resolves. `scripts/container save` writes the docker-archive tar Apptainer builds
              from, checked to be a docker archive of the image.
  quickstart  `scripts/container run -- scaffold benchmark -c <image's configs/quickstart.yml>
              --epochs 1` from an empty folder: the fractals, the dataset and the run folder land
              in that folder outside the container, owned by the caller; summary.json and
              train_stats.csv say one epoch; and the same command with the host's binary gives
              the same losses (the image runs the binary it was built from, on the same Debian
              libraries).
Skipped (exit 77) only when podman cannot run a container at all (not installed, or no runtime
that works here): the reason goes to the state file, and the tests that need the image skip
with it. Anything else that fails is a failure.

Usage: check_container.py TEST --scaffold BIN --repo DIR --state FILE --work DIR [--keep]
"""

import argparse
import csv
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from checklib import Failure, Skip, check, run_in_temp  # noqa: E402

IMAGE = "localhost/scaffold-test:latest"




def run(cmd, env=None, cwd=None, timeout=1800):
    start = time.time()
    proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=timeout)
    print("$ {0}  -> exit {1} in {2:.0f} s".format(" ".join(cmd), proc.returncode,
                                                   time.time() - start))
    return proc


def podman_works(args):
    """None when podman can work here, else why not: podman installed, `podman info` answers,
    and jube/lib/podman-options finds a runtime for this machine's cgroups (no image exists
    before the build to probe a run with; a build whose first container cannot start is
    checked in test_image)."""
    if not shutil.which("podman"):
        return "podman is not installed (scripts/install-deps --tests)"
    proc = run(["podman", "info", "--format", "{{.Host.OCIRuntime.Name}}"], timeout=120)
    if proc.returncode != 0:
        return "podman info fails: " + proc.stdout.strip()[-500:]
    lib = os.path.join(args.repo, "jube", "lib", "podman-options")
    proc = run([lib, "global"], timeout=60)
    if proc.returncode != 0:
        return proc.stdout.strip()
    return None


def environ(args):
    return dict(os.environ, SCAFFOLD_IMAGE=IMAGE, SCAFFOLD_BIN=args.scaffold, BUILD_DIR=args.work)


def test_image(args):
    reason = podman_works(args)
    if reason:
        with open(args.state, "w") as handle:
            handle.write("unavailable: " + reason + "\n")
        raise Skip(reason)
    script = os.path.join(args.repo, "scripts", "container")
    start = time.time()
    proc = run([script, "build"], env=environ(args))
    print(proc.stdout[-4000:])
    if proc.returncode != 0:
        with open(args.state, "w") as handle:
            handle.write("unavailable: scripts/container build failed (test container_image)\n")
        # A runtime that cannot start any container is a skip; the build's own failure is not.
        if "cannot run the image" in proc.stdout and "OCI" in proc.stdout:
            raise Skip("podman cannot start containers here: " + proc.stdout.strip()[-600:])
        raise Failure("scripts/container build exited {0}".format(proc.returncode))
    built = time.time() - start
    check("container: built " + IMAGE in proc.stdout, "the build does not name " + IMAGE)
    # The image: scaffold on PATH, the configs and the JUBE files in /opt/scaffold, and the
    # binary is the one given (the same bytes).
    inspect = run(["podman", "image", "inspect", IMAGE], timeout=120)
    check(inspect.returncode == 0, "podman image inspect: " + inspect.stdout)
    config = json.loads(inspect.stdout)[0]["Config"]
    check(config.get("WorkingDir") == "/opt/scaffold" and config.get("Cmd") == ["scaffold", "--help"],
          "image config: {0}".format(config))
    size_mb = json.loads(inspect.stdout)[0]["Size"] / 1e6
    proc = run([script, "run", "--", "sh", "-c",
                "command -v scaffold && sha256sum /usr/local/bin/scaffold && "
                "ls /opt/scaffold/configs/quickstart.yml /opt/scaffold/jube/smoke.yaml && "
                "jube --version && python3 -c 'import yaml' && command -v gnuplot mpirun"],
               env=environ(args), cwd=args.work, timeout=300)
    print(proc.stdout)
    check(proc.returncode == 0, "the image lacks what it should hold")
    with open(args.scaffold, "rb") as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()
    check(digest in proc.stdout, "the image's scaffold is not {0} (sha256 {1})".format(
        args.scaffold, digest))
    # save: a docker archive (manifest.json naming the image's tag), for Apptainer.
    archive = os.path.join(args.work, "scaffold-test.tar")
    proc = run([script, "save", archive], env=environ(args), timeout=600)
    print(proc.stdout)
    check(proc.returncode == 0 and os.path.isfile(archive), "scripts/container save failed")
    with tarfile.open(archive) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))
    check(len(manifest) == 1 and IMAGE in (manifest[0].get("RepoTags") or []),
          "{0} is not a docker archive of {1}: {2}".format(archive, IMAGE, manifest))
    os.remove(archive)
    with open(args.state, "w") as handle:
        handle.write("image: {0}\n".format(IMAGE))
    print("image {0}: {1:.0f} MB, built in {2:.0f} s".format(IMAGE, size_mb, built))


def image_of(state):
    """The fixture's image, or Skip with the reason it recorded."""
    try:
        with open(state) as handle:
            text = handle.read()
    except OSError:
        raise Skip("no image: {0} is missing (the ctest fixture container_image builds one)".format(
            state))
    for line in text.splitlines():
        if line.startswith("unavailable: "):
            raise Skip("no image: " + line[len("unavailable: "):])
        if line.startswith("image: "):
            return line[len("image: "):]
    raise Skip("no image recorded in {0}: {1!r}".format(state, text))


def train_rows(run_dir):
    with open(os.path.join(run_dir, "train_stats.csv"), newline="") as handle:
        return list(csv.DictReader(handle))


def quickstart(cmd, cwd, env):
    os.makedirs(cwd)
    start = time.time()
    proc = run(cmd, env=env, cwd=cwd, timeout=900)
    print(proc.stdout[-3000:])
    check(proc.returncode == 0, "{0} exited {1}".format(" ".join(cmd[:3]), proc.returncode))
    runs = glob.glob(os.path.join(cwd, "benchmark_runs", "*"))
    check(len(runs) == 1, "{0}: expected one run folder in benchmark_runs/, found {1}".format(
        cwd, runs))
    return runs[0], time.time() - start


def test_quickstart(args, tmp):
    image = image_of(args.state)
    # Two independent processes compared: the convolutions by rule, not by a probe whose verdicts
    # may differ between them (auto probes for a bf16 run on a CPU without bf16 products too).
    flags = ["--epochs", "1", "--threads", "2", "--conv-kernel", "onednn"]
    env = dict(environ(args), SCAFFOLD_IMAGE=image)
    inside = os.path.join(tmp, "inside")
    run_dir, seconds = quickstart(
        [os.path.join(args.repo, "scripts", "container"), "run", "--", "scaffold", "benchmark",
         "-c", "/opt/scaffold/configs/quickstart.yml"] + flags, inside, env)
    print("in the container: {0} in {1:.0f} s".format(run_dir, seconds))
    for name in ("fractals", "datasets"):
        check(os.path.isdir(os.path.join(inside, name)), "no {0}/ in {1}".format(name, inside))
    for path in [run_dir, os.path.join(run_dir, "summary.json")]:
        owner = os.stat(path).st_uid
        check(owner == os.getuid(), "{0} belongs to uid {1}, not the caller's {2}".format(
            path, owner, os.getuid()))
    with open(os.path.join(run_dir, "summary.json")) as handle:
        record = json.load(handle)
    check(record["epochs"] == 1 and record["ranks"] == 1 and record["status"] in
          ("completed", "not_reached", "reached_target"),
          "summary.json: epochs {0}, ranks {1}, status {2}".format(
              record["epochs"], record["ranks"], record["status"]))
    rows = train_rows(run_dir)
    check(len(rows) == 1 and rows[0]["epoch"] == "1", "train_stats.csv rows: {0}".format(rows))
    loss = float(rows[0]["overall_loss"])
    dice = float(rows[0]["val_dice"])
    check(0 < loss < 10 and 0 <= dice <= 1, "overall_loss {0}, val_dice {1}".format(loss, dice))
    # The same command with the host's binary: the same data and the same losses.
    native_dir, native_s = quickstart(
        [args.scaffold, "benchmark", "-c", os.path.join(args.repo, "configs", "quickstart.yml")] +
        flags, os.path.join(tmp, "native"), dict(os.environ))
    native = train_rows(native_dir)
    for key in ("overall_loss", "val_loss_avg", "val_dice"):
        a, b = float(rows[0][key]), float(native[0][key])
        check(abs(a - b) <= 1e-4 * max(1.0, abs(b)), "{0}: container {1}, host {2}".format(
            key, a, b))
    print("quickstart epoch 1: overall_loss {0}, val_dice {1} (host: {2}, {3}); container {4:.0f} s,"
          " host {5:.0f} s".format(loss, dice, native[0]["overall_loss"], native[0]["val_dice"],
                                   seconds, native_s))


def main():
    parser = argparse.ArgumentParser(description="container image tests")
    parser.add_argument("test", choices=["image", "quickstart"])
    parser.add_argument("--scaffold", required=True)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--state", required=True)
    parser.add_argument("--work", required=True, help="scripts/container's BUILD_DIR")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    args.scaffold = os.path.abspath(args.scaffold)
    os.makedirs(args.work, exist_ok=True)
    if args.test == "image":
        return run_in_temp(args.test, "scaffold-container", lambda tmp: test_image(args), args.keep)
    return run_in_temp(args.test, "scaffold-container", lambda tmp: test_quickstart(args, tmp), args.keep)

if __name__ == "__main__":
    sys.exit(main())
