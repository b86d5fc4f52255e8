#!/usr/bin/env python3
"""What of scripts/gpu-check can be tested without a GPU (issue 14), run by ctest:

  syntax   `bash -n` accepts the script.
  plan     --dry-run prints every check's command (build, quickstart on cuda, the step at
           scales 6 and 7 in C++ and PyTorch with the GEMM probe, the loop's step, NVML power,
           2 ranks over NCCL, the image-classification quickstart, the unit tests) and runs
           nothing: no build folder, no work folder.
  table    --extract turns canned outputs (tests/fixtures/gpu-check: bench `result` lines,
           summary.json files, energy.csv, a 2-rank log) into result files, and --table prints
           exactly the table below (numbers worked out by hand from the fixtures: e.g. MFU 0.250 =
           150 TFLOP/s / 600 TFLOP/s, C++/PyTorch 0.800 = 20 ms / 25 ms); a failed check makes
           --table exit 1.

Usage: check_gpu_check.py TEST --repo DIR
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

EXPECTED_TABLE = """\
check                                    status                                       time [s]  step [ms]  TFLOP/s    MFU  notes
---------------------------------------  -------------------------------------------  --------  ---------  -------  -----  ----------------------------------------------------------------------------------------------
build (2 targets)                        ok                                                  -          -        -      -  211 s; NVIDIA H200 | torch 2.5.1 | CUDA 12.4 | cxx11 ABI 0; MPI ON
unit tests (6 binaries)                  ok                                                  -          -        -      -  230 tests passed (GPU ones included)
quickstart, cuda, to Dice 0.95           ok                                              12.35       3.21     2.50      -  reached_target: 9 epochs, val_dice 0.9512; device cuda:0; energy 0.0500 Wh, 1500.0 samples/Wh
bf16 GEMM probe                          ok                                                  -          -    600.0      -  8192^3 bf16 at::mm (cuBLAS): the MFU reference
step scale 6, C++ (LibTorch)             ok                                                  -      20.00   150.00  0.250  bf16 cl3d, batch 1; loss0 1.951234
step scale 6, PyTorch eager              ok                                                  -      25.00   120.00  0.200  bf16 cl3d, batch 1; loss0 1.951300; C++/PyTorch step 0.800
step scale 7, C++ (LibTorch)             ok                                                  -     160.00   200.00  0.328  bf16 cl3d, batch 1; loss0 1.990000
step scale 7, PyTorch eager              FAILED: no result line in 07-step-s7-py.log         -          -        -      -  -
scaffold benchmark step, scale 6 (loop)  ok                                               3.50      25.00   120.00  0.200  not_reached: 2 epochs, val_dice 0.4100; device cuda:0; energy not measured
NVML power (scaffold power, sleep 2)     ok                                               2.00          -        -      -  151.2 J, average 75.5 W over 1 sensor(s): nvml:gpu0
2 ranks, NCCL (quickstart, 3 epochs)     ok                                               5.00          -        -      -  not_reached; gpu01 cuda:0 visible=0 pci=0000:03:00.0 | gpu01 cuda:1 visible=1 pci=0000:04:00.0
image classification quickstart, cuda    ok                                               4.20       4.00    0.500      -  12345.6 images/s; val_top1 0.422; device cuda:0; energy 0.0100 Wh

12 checks: 11 ok, 1 failed, 0 skipped. MFU: model FLOP/s over the bf16 GEMM measured in the same run.
"""


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def script(repo):
    return os.path.join(repo, "scripts", "gpu-check")


def run(argv, env=None):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          env=env)
    print("$ {0}  -> exit {1}".format(" ".join(argv), proc.returncode))
    return proc


def test_syntax(repo, tmp):
    proc = run(["bash", "-n", script(repo)])
    check(proc.returncode == 0, "bash -n rejects scripts/gpu-check:\n" + proc.stdout)


def test_plan(repo, tmp):
    work = os.path.join(tmp, "work")
    proc = run([script(repo), "--dry-run", "--deps", os.path.join(tmp, "deps"), "--work", work])
    print(proc.stdout)
    check(proc.returncode == 0, "the dry run failed")
    out = proc.stdout
    for needed in ("-DSCAFFOLD_BUILD_TESTS=ON", "-DSCAFFOLD_JUBE_TESTS=OFF", "--target scaffold bench_train_step",
                   "benchmark -c {0}/configs/quickstart.yml --device cuda".format(repo),
                   "bench_train_step --device cuda --base 64 --bf16 --channels-last --batch 1",
                   "--scale 6 --gemm-n 8192", "--scale 7 --gemm-n 8192",
                   "bench/train_step.py --device cuda --base 64 --bf16 --channels-last --batch 1",
                   "--problem-scale 6", "power --methods nvml", "-- sleep 2", "mpiexec -n 2",
                   "image_classification -c {0}/configs/image_classification_quickstart.yml --device cuda".format(repo),
                   "test_train_device", "--table"):
        check(needed in out, "the plan does not show '{0}'".format(needed))
    check("power --methods rocm" not in out and "MIOPEN" not in out, "an NVIDIA plan shows ROCm steps")
    check(not os.path.exists(work), "the dry run made the work folder")
    check(not os.path.exists(os.path.join(repo, "build-gpu-check")), "the dry run made a build folder")
    check(run([script(repo)]).returncode == 2, "without --deps (and not a dry run) the script must stop")
    # --rocm: the same checks on an AMD machine, with ROCm SMI power and MIOpen's caches in WORK.
    proc = run([script(repo), "--dry-run", "--rocm", "--deps", os.path.join(tmp, "deps"), "--work", work])
    print(proc.stdout)
    check(proc.returncode == 0, "the --rocm dry run failed")
    out = proc.stdout
    for needed in ("power --methods rocm", "MIOPEN_USER_DB_PATH={0}/miopen".format(work),
                   "MIOPEN_CUSTOM_CACHE_DIR={0}/miopen".format(work),
                   "benchmark -c {0}/configs/quickstart.yml --device cuda".format(repo), "mpiexec -n 2"):
        check(needed in out, "the --rocm plan does not show '{0}'".format(needed))
    check("power --methods nvml" not in out, "the --rocm plan still measures NVML power")


def test_table(repo, tmp):
    fixtures = os.path.join(repo, "tests", "fixtures", "gpu-check")
    logs = os.path.join(fixtures, "logs")
    runs = os.path.join(fixtures, "runs")
    results = os.path.join(tmp, "results")
    env = dict(os.environ, GPU_CHECK_RESULTS=results)

    def extract(*args):
        proc = run([script(repo), "--extract"] + list(args), env=env)
        check(proc.returncode == 0, "--extract {0} failed:\n{1}".format(args[0], proc.stdout))

    extract("status", "01-build", "build (2 targets)", "ok",
            "211 s; NVIDIA H200 | torch 2.5.1 | CUDA 12.4 | cxx11 ABI 0; MPI ON")
    extract("status", "02-unit-tests", "unit tests (6 binaries)", "ok", "230 tests passed (GPU ones included)")
    extract("benchmark", "03-quickstart", os.path.join(runs, "quickstart"), "quickstart, cuda, to Dice 0.95", "",
            "target")
    extract("gemm", "04-gemm-bf16", os.path.join(logs, "04-step-s6-cpp.log"), "bf16 GEMM probe")
    extract("bench", "04-step-s6-cpp", os.path.join(logs, "04-step-s6-cpp.log"), "step scale 6, C++ (LibTorch)")
    extract("bench", "05-step-s6-py", os.path.join(logs, "05-step-s6-py.log"), "step scale 6, PyTorch eager",
            os.path.join(logs, "04-step-s6-cpp.log"))
    extract("bench", "06-step-s7-cpp", os.path.join(logs, "06-step-s7-cpp.log"), "step scale 7, C++ (LibTorch)")
    extract("bench", "07-step-s7-py", os.path.join(logs, "07-step-s7-py.log"), "step scale 7, PyTorch eager",
            os.path.join(logs, "06-step-s7-cpp.log"))
    extract("benchmark", "08-loop-step-s6", os.path.join(runs, "scale6"), "scaffold benchmark step, scale 6 (loop)",
            os.path.join(logs, "04-step-s6-cpp.log"))
    extract("power", "09-power-nvml", os.path.join(fixtures, "power", "energy.csv"),
            "NVML power (scaffold power, sleep 2)")
    extract("nccl", "10-nccl-2ranks", os.path.join(runs, "nccl"), os.path.join(logs, "10-nccl-2ranks.log"),
            "2 ranks, NCCL (quickstart, 3 epochs)")
    extract("imgcls", "11-imgcls-quickstart", os.path.join(runs, "imgcls"), "image classification quickstart, cuda")

    proc = run([script(repo), "--table", results])
    print(proc.stdout)
    if proc.stdout != EXPECTED_TABLE:
        import difflib
        diff = "".join(difflib.unified_diff(EXPECTED_TABLE.splitlines(True), proc.stdout.splitlines(True),
                                            "expected", "actual"))
        raise Failure("the table differs:\n" + diff)
    check(proc.returncode == 1, "a failed check must make --table exit 1, got {0}".format(proc.returncode))

    # A quickstart that missed its target is a failure; the loop-step run may miss it.
    extract("benchmark", "03-quickstart", os.path.join(runs, "scale6"), "quickstart, cuda, to Dice 0.95", "",
            "target")
    with open(os.path.join(results, "03-quickstart.result")) as handle:
        check("status: FAILED: Dice target not reached\n" in handle.read(), "a missed target is not a failure")
    # A missing run folder fails the check with the reason, not the script.
    extract("benchmark", "03-quickstart", os.path.join(tmp, "nothing"), "quickstart, cuda, to Dice 0.95")
    with open(os.path.join(results, "03-quickstart.result")) as handle:
        check("expected one run folder with summary.json" in handle.read(), "a missing run is not named")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("test", choices=("syntax", "plan", "table"))
    parser.add_argument("--repo", required=True)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="scaffold-gpu-check-")
    try:
        {"syntax": test_syntax, "plan": test_plan, "table": test_table}[args.test](args.repo, tmp)
    except Failure as failure:
        print("FAIL ({0}): {1}".format(args.test, failure))
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS ({0})".format(args.test))
    return 0


if __name__ == "__main__":
    sys.exit(main())
