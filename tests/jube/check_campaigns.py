#!/usr/bin/env python3
"""Tests of the JUBE campaigns in jube/ (issue 7), run by ctest (tests/jube/CMakeLists.txt).

  smoke   jube/smoke.yaml --tag local runs to the end; `jube result -i last` has one row per
          combination, and each row's time to target and epochs equal those of its run folder's
          train_stats.csv (full precision in the CSV table, 2 decimals in the pretty one, as
          `scaffold report` rounds them).
  errors  an unknown system tag, a sweep value the benchmark rejects and a rank count the system
          cannot lay out each end in an error that names them, never in a silent empty table.
  smoke_mpi  the same on 2 ranks with each sample split along D (dc_num_shards 2 1 1).
  slurm   a system added as one table entry renders the strong-scaling job scripts under the tag
          dryrun exactly as tests/jube/expected/ says (paths that vary replaced), without calling
          sbatch; without dryrun the first step is submitted through sbatch. The shipped GPU
          systems' job scripts bind one GPU per task (hand-written launcher lines below).

Usage: check_campaigns.py TEST --scaffold BIN --jube JUBE --repo DIR [--keep]
"""

import argparse
import csv
import glob
import io
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


class Env:
    def __init__(self, args, tmp):
        self.args = args
        self.tmp = tmp
        self.environ = dict(os.environ, SCAFFOLD_BIN=args.scaffold)

    def jube(self, *argv, expect_ok=True):
        cmd = [self.args.jube] + list(argv)
        proc = subprocess.run(cmd, cwd=self.tmp, env=self.environ, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, universal_newlines=True)
        print("$ {0}  -> exit {1}".format(" ".join(cmd), proc.returncode))
        if expect_ok and proc.returncode != 0:
            print(proc.stdout)
            raise Failure("jube {0} exited with {1}".format(argv[0], proc.returncode))
        return proc

    def copy_jube(self, name):
        """A copy of jube/ in <tmp>/<name>/jube with configs/ beside it, for edited campaigns."""
        root = os.path.join(self.tmp, name)
        shutil.copytree(os.path.join(self.args.repo, "jube"), os.path.join(root, "jube"),
                        ignore=shutil.ignore_patterns("*_run", "__pycache__"))
        os.symlink(os.path.join(self.args.repo, "configs"), os.path.join(root, "configs"))
        return os.path.join(root, "jube")


def edit(path, old, new):
    with open(path) as handle:
        text = handle.read()
    check(text.count(old) == 1, "{0}: expected one '{1}' to edit".format(path, old))
    with open(path, "w") as handle:
        handle.write(text.replace(old, new))


def result_tables(output):
    """(pretty rows as dicts, csv rows as dicts) from `jube result` output."""
    lines = output.splitlines()
    pretty = [l.strip() for l in lines if l.strip().startswith("|")]
    check(len(pretty) >= 2, "no pretty table in jube result:\n" + output)
    header = [c.strip() for c in pretty[0].strip("|").split("|")]
    # A long cell wraps onto continuation lines whose first cell is empty; keep first lines.
    rows = []
    for line in pretty[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0]:
            rows.append(dict(zip(header, cells)))
    start = [i for i, l in enumerate(lines) if l.startswith("campaign,system,")]
    check(len(start) == 1, "no CSV table in jube result:\n" + output)
    block = []
    for line in lines[start[0]:]:
        if not line.strip():
            break
        block.append(line)
    csv_rows = list(csv.DictReader(io.StringIO("\n".join(block))))
    return rows, csv_rows


def train_stats(run_dir):
    """(epochs, time to target) of a run folder: the last epoch and the sum of epoch_duration
    in row order, as spec section 8 and docs/reports.md define them."""
    with open(os.path.join(run_dir, "train_stats.csv"), newline="") as handle:
        rows = list(csv.DictReader(handle))
    check(rows, run_dir + "/train_stats.csv has no rows")
    total = 0.0
    for row in rows:
        total += float(row["epoch_duration"])
    return int(rows[-1]["epoch"]), total


def energy_wh(run_dir):
    path = os.path.join(run_dir, "energy_stats.csv")
    if not os.path.exists(path):
        return None
    with open(path, newline="") as handle:
        return sum(float(r["energy_wh"]) for r in csv.DictReader(handle)
                   if r["window"] in ("train", "validation"))


def test_smoke(env, campaign=None, ranks="1", shards="1 1 1"):
    out = os.path.join(env.tmp, "out")
    campaign = campaign or os.path.join(env.args.repo, "jube", "smoke.yaml")
    env.jube("run", "-e", "--hide-animation", campaign, "--tag", "local", "-o", out)
    result = env.jube("result", out, "-i", "last").stdout
    print(result)
    pretty, rows = result_tables(result)
    check(len(rows) == 2 and len(pretty) == 2,
          "expected 2 rows (local batch 2 and 4), got {0} csv / {1} pretty".format(
              len(rows), len(pretty)))
    check(sorted(r["local_batch_size"] for r in rows) == ["2", "4"],
          "rows are not the sweep's combinations: {0}".format(
              [r["local_batch_size"] for r in rows]))
    check(all(r["ranks"] == ranks and r["dc_num_shards"] == shards for r in rows),
          "rows do not show {0} ranks with shards {1}: {2}".format(
              ranks, shards, [(r["ranks"], r["dc_num_shards"]) for r in rows]))
    for row, shown in zip(rows, pretty):
        check(row["status"] == "ok" and shown["status"] == "ok",
              "status of local batch {0}: {1}".format(row["local_batch_size"], row["status"]))
        check(shown["local batch"] == row["local_batch_size"], "pretty and csv rows differ")
        found = glob.glob(os.path.join(out, "*", "*_benchmark", "work", row["run"]))
        check(len(found) == 1, "run folder {0} not found once in the work packages: {1}".format(
            row["run"], found))
        epochs, seconds = train_stats(found[0])
        print("{0}: train_stats.csv epochs {1}, time to target {2!r}; table {3}, {4} / {5}".format(
            row["run"], epochs, seconds, row["epochs"], row["time_to_target_s"],
            shown["time to target [s]"]))
        check(row["epochs"] == str(epochs) and shown["epochs"] == str(epochs),
              "epochs: table {0}/{1}, train_stats.csv {2}".format(
                  row["epochs"], shown["epochs"], epochs))
        check(row["time_to_target_s"] == repr(seconds),
              "time to target (csv): table {0}, train_stats.csv {1!r}".format(
                  row["time_to_target_s"], seconds))
        check(shown["time to target [s]"] == "{0:.2f}".format(seconds),
              "time to target (pretty): table {0}, train_stats.csv {1:.2f}".format(
                  shown["time to target [s]"], seconds))
        check(row["fom_per_s"] == repr(1.0 / seconds),
              "FOM: table {0}, 1/time {1!r}".format(row["fom_per_s"], 1.0 / seconds))
        energy = energy_wh(found[0])
        if energy is None:
            check(row["energy_to_target_wh"] == "not measured" and
                  shown["energy to target [Wh]"] == "not measured",
                  "no energy_stats.csv, but the energy column says {0}".format(
                      row["energy_to_target_wh"]))
        else:
            check(abs(float(row["energy_to_target_wh"]) - energy) <= 1e-9 * max(1.0, energy),
                  "energy: table {0}, energy_stats.csv {1}".format(
                      row["energy_to_target_wh"], energy))
        for name in ("job.out", "job.err", "job.sh", "report.csv"):
            check(os.path.exists(os.path.join(os.path.dirname(found[0]), name)),
                  "{0} missing from the benchmark work package".format(name))


def test_smoke_mpi(env):
    """The smoke campaign on 2 ranks, each sample split along D: the launcher line for several
    ranks on the local system, and the same agreement with each run folder."""
    campaign = os.path.join(env.copy_jube("mpi"), "smoke.yaml")
    edit(campaign, '{name: dc_num_shards, _: "1 1 1"}', '{name: dc_num_shards, _: "2 1 1"}')
    edit(campaign, '{name: ranks, type: int, _: "1"}', '{name: ranks, type: int, _: "2"}')
    test_smoke(env, campaign, ranks="2", shards="2 1 1")


def test_errors(env):
    # 1. A tag that names no system of the table (and no campaign tag).
    campaign = os.path.join(env.copy_jube("unknown-tag"), "smoke.yaml")
    proc = env.jube("run", "--hide-animation", campaign, "--tag", "nosuchsystem",
                    "-o", os.path.join(env.tmp, "unknown"), expect_ok=False)
    print(proc.stdout[-2000:])
    check(proc.returncode != 0, "an unknown system tag exited 0")
    check("unknown tag(s) 'nosuchsystem'" in proc.stdout and "local" in proc.stdout,
          "the error does not name the unknown tag and the known systems")
    check(not glob.glob(os.path.join(env.tmp, "unknown", "*", "*_benchmark")),
          "an unknown system still ran benchmark steps")

    # 2. A sweep value the benchmark rejects: local batch 0 next to a valid 2.
    jube_dir = env.copy_jube("rejected")
    smoke = os.path.join(jube_dir, "smoke.yaml")
    edit(smoke, '{name: local_batch_size, type: int, _: "2,4"}',
         '{name: local_batch_size, type: int, _: "2,0"}')
    out = os.path.join(env.tmp, "rejected-out")
    env.jube("run", "--hide-animation", smoke, "-o", out, expect_ok=False)
    result = env.jube("result", out, "-i", "last").stdout
    print(result)
    pretty, rows = result_tables(result)
    by_batch = {r["local_batch_size"]: r for r in rows}
    check(sorted(by_batch) == ["0", "2"], "expected rows for local batch 0 and 2, got {0}".format(
        sorted(by_batch)))
    check(by_batch["2"]["status"] == "ok", "the valid value failed: " + by_batch["2"]["status"])
    bad = by_batch["0"]["status"]
    check(bad.startswith("failed at benchmark (exit 1)") and "local_batch_size = 0" in bad,
          "the rejected value's row does not say why: '{0}'".format(bad))
    check(by_batch["0"]["time_to_target_s"] == "", "a failed run shows a time")
    # With -e, jube itself stops non-zero with the benchmark's message.
    edit(smoke, '{name: local_batch_size, type: int, _: "2,0"}',
         '{name: local_batch_size, type: int, _: "0"}')
    proc = env.jube("run", "-e", "--hide-animation", smoke, "-o", out, expect_ok=False)
    print(proc.stdout[-2000:])
    check(proc.returncode != 0, "jube run -e exited 0 with a rejected value")
    check("local_batch_size = 0" in proc.stdout,
          "jube run -e does not print the benchmark's error")

    # 3. A rank count the system cannot lay out (weak scaling on 4-device nodes, 6 ranks), and
    #    a global batch the replicas cannot share (strong scaling, 16 over 12 replicas).
    jube_dir = env.copy_jube("layout")
    for campaign, ranks, bad, message in (
            ("weak-scaling.yaml", "4,8,16,32", "4,6", "ranks=6 does not fill whole nodes"),
            ("strong-scaling.yaml", "4,8,16", "4,12",
             "global batch 16 does not split over 12")):
        path = os.path.join(jube_dir, campaign)
        edit(path, '{{name: ranks, type: int, _: "{0}"}}'.format(ranks),
             '{{name: ranks, type: int, _: "{0}"}}'.format(bad))
        proc = env.jube("run", "--hide-animation", path, "--tag", "jureca-dc-gpu", "dryrun",
                        "-o", os.path.join(env.tmp, "layout-" + campaign), expect_ok=False)
        print(proc.stdout[-1500:])
        check(proc.returncode != 0, "{0} with ranks {1} exited 0".format(campaign, bad))
        check(message in proc.stdout, "the error does not say '{0}'".format(message))


TEST_SYSTEM = """
# Added by tests/jube/check_campaigns.py: a Slurm system defined by one entry.
testcluster:
  description: "test cluster, 4 GPUs per node"
  scheduler: slurm
  devices_per_node: 4
  cpus_per_rank: 16
  launcher: "srun --ntasks={ranks} --ntasks-per-node={tasks_per_node} --cpus-per-task={cpus_per_rank}"
  prep_ranks: 2
  partition: gpu
  account: proj42
  gres: "gpu:4"
  time_limit: "00:45:00"
  prep_time_limit: "00:10:00"
  sbatch_options: ["--mail-type=FAIL", "--constraint=ib"]
  modules: [GCC, OpenMPI, CUDA]
  environment:
    OMP_NUM_THREADS: "$SLURM_CPUS_PER_TASK"
    NCCL_DEBUG: WARN
  setup: ["ulimit -c 0"]
  data_dir: /scratch/proj42/scaffold-data
  scaffold: /opt/scaffold/bin/scaffold
"""

FAKE_SBATCH = """#!/bin/sh
echo "$(pwd) $*" >> "{log}"
echo "Submitted batch job 4242"
"""


def normalise(text, jube_dir, out):
    return (text.replace(out, "@OUT@").replace(os.path.dirname(jube_dir), "@REPO@"))


def compare(actual_path, expected_name, jube_dir, out):
    with open(actual_path) as handle:
        actual = normalise(handle.read(), jube_dir, out)
    expected_path = os.path.join(HERE, "expected", expected_name)
    with open(expected_path) as handle:
        expected = handle.read()
    if actual != expected:
        import difflib
        diff = "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True),
                                            expected_path, actual_path))
        raise Failure("rendered job script differs from {0}:\n{1}".format(expected_name, diff))
    print("{0}: equal to expected/{1}".format(actual_path, expected_name))


def test_slurm(env):
    jube_dir = env.copy_jube("slurm")
    with open(os.path.join(jube_dir, "systems.yaml"), "a") as handle:
        handle.write(TEST_SYSTEM)
    bindir = os.path.join(env.tmp, "bin")
    os.makedirs(bindir)
    log = os.path.join(env.tmp, "sbatch.log")
    with open(os.path.join(bindir, "sbatch"), "w") as handle:
        handle.write(FAKE_SBATCH.format(log=log))
    os.chmod(os.path.join(bindir, "sbatch"), 0o755)
    env.environ["PATH"] = bindir + os.pathsep + env.environ.get("PATH", "")

    # Dry run: every job script of the study is rendered, nothing is submitted.
    out = os.path.join(env.tmp, "dry")
    env.jube("run", "-e", "--hide-animation", os.path.join(jube_dir, "strong-scaling.yaml"),
             "--tag", "testcluster", "dryrun", "-o", out)
    check(not os.path.exists(log), "the dry run called sbatch")
    bench = sorted(glob.glob(os.path.join(out, "000000", "*_benchmark", "work", "job.sh")))
    check(len(bench) == 3, "expected 3 benchmark job scripts (ranks 4, 8, 16), got {0}".format(
        len(bench)))
    compare(os.path.join(out, "000000", "000000_fractals", "work", "job.sh"),
            "slurm-fractals.job.sh", jube_dir, out)
    compare(os.path.join(out, "000000", "000003_benchmark", "work", "job.sh"),
            "slurm-benchmark.job.sh", jube_dir, out)
    result = env.jube("result", out, "-i", "last").stdout
    print(result)
    _, rows = result_tables(result)
    check([(r["ranks"], r["nodes"], r["local_batch_size"]) for r in rows] ==
          [("4", "1", "4"), ("8", "2", "2"), ("16", "4", "1")],
          "strong scaling rows (ranks, nodes, local batch) are wrong: {0}".format(
              [(r["ranks"], r["nodes"], r["local_batch_size"]) for r in rows]))
    check(all(r["status"].startswith("dry run") and r["system"] == "testcluster" for r in rows),
          "dry-run rows do not say so")

    # Without dryrun the first step goes to sbatch, and JUBE waits for the job.
    out = os.path.join(env.tmp, "submit")
    proc = env.jube("run", "-e", "--hide-animation", os.path.join(jube_dir, "smoke.yaml"),
                    "--tag", "testcluster", "-o", out)
    check(os.path.exists(log), "sbatch was not called")
    with open(log) as handle:
        calls = handle.read().splitlines()
    check(len(calls) == 1 and calls[0].endswith("_fractals/work job.sh"),
          "expected one sbatch job.sh from the fractals step, got {0}".format(calls))
    check("wait" in proc.stdout, "the submitted step is not waiting")
    result = env.jube("result", out, "-i", "last").stdout
    _, rows = result_tables(result)
    check(len(rows) == 1 and rows[0]["slurm_job"] == "4242" and
          rows[0]["status"].startswith("submitted to Slurm"),
          "the submitted job's row: {0}".format(rows))


# The launcher lines the shipped GPU systems' strong-scaling benchmark jobs must start with, written
# by hand from jube/systems.yaml (issue 14): one GPU per task, task i of a node on its i-th GPU.
GPU_BENCHMARK_LAUNCHERS = {
    "jureca-dc-gpu": [
        "srun --ntasks=4 --ntasks-per-node=4 --cpus-per-task=32 --cpu-bind=socket --gpus-per-task=1 --gpu-bind=per_task:1 ",
        "srun --ntasks=8 --ntasks-per-node=4 --cpus-per-task=32 --cpu-bind=socket --gpus-per-task=1 --gpu-bind=per_task:1 ",
        "srun --ntasks=16 --ntasks-per-node=4 --cpus-per-task=32 --cpu-bind=socket --gpus-per-task=1 --gpu-bind=per_task:1 ",
    ],
    "jedi": [
        "srun --ntasks=4 --ntasks-per-node=4 --cpus-per-task=72 --cpu-bind=socket --gpus-per-task=1 --gpu-bind=per_task:1 ",
        "srun --ntasks=8 --ntasks-per-node=4 --cpus-per-task=72 --cpu-bind=socket --gpus-per-task=1 --gpu-bind=per_task:1 ",
        "srun --ntasks=16 --ntasks-per-node=4 --cpus-per-task=72 --cpu-bind=socket --gpus-per-task=1 --gpu-bind=per_task:1 ",
    ],
}


def test_gpu_binding(env):
    """The shipped GPU systems render benchmark jobs that give each task one GPU of its own."""
    for system, expected in sorted(GPU_BENCHMARK_LAUNCHERS.items()):
        out = os.path.join(env.tmp, "gpu-" + system)
        env.jube("run", "-e", "--hide-animation",
                 os.path.join(env.args.repo, "jube", "strong-scaling.yaml"),
                 "--tag", system, "dryrun", "-o", out)
        scripts = sorted(glob.glob(os.path.join(out, "000000", "*_benchmark", "work", "job.sh")))
        check(len(scripts) == len(expected), "{0}: expected {1} benchmark job scripts, got {2}".format(
            system, len(expected), len(scripts)))
        for path, prefix in zip(scripts, expected):
            with open(path) as handle:
                lines = handle.read().splitlines()
            launch = [l for l in lines if l.startswith("srun ") and " benchmark " in l]
            check(len(launch) == 1 and launch[0].startswith(prefix),
                  "{0}: {1} does not launch with\n  {2}\ngot\n  {3}".format(
                      system, path, prefix, "\n  ".join(launch) or "(no srun benchmark line)"))
            check("#SBATCH --gres=gpu:4" in lines, "{0}: {1} requests no GPUs".format(system, path))
            print("{0}: {1} launches with one GPU per task".format(system, path))


def main():
    parser = argparse.ArgumentParser(description="JUBE campaign tests")
    parser.add_argument("test", choices=("smoke", "smoke_mpi", "errors", "slurm"))
    parser.add_argument("--scaffold", required=True)
    parser.add_argument("--jube", required=True)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="scaffold-jube-{0}-".format(args.test))
    try:
        env = Env(args, tmp)
        {"smoke": test_smoke, "smoke_mpi": test_smoke_mpi, "errors": test_errors,
         "slurm": test_slurm}[args.test](env)
        if args.test == "slurm":
            test_gpu_binding(env)
    except Failure as failure:
        print("FAIL ({0}): {1}\n(temporary folder kept: {2})".format(args.test, failure, tmp))
        return 1
    print("PASS ({0})".format(args.test))
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
