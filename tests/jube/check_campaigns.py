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
          dryrun with the #SBATCH directives, launcher line and scaffold flags that the campaign's
          parameters and the system entry call for (computed in this file), without calling
          sbatch; without dryrun every job is submitted through a fake sbatch, each with a
          dependency on its parent's job (tests/slurm/ runs campaigns on a real Slurm).
  The smoke tests also check that collect reads each run's summary.json: a record that
  disagrees with report.csv or the parameters, or none, fails.

  imgcls  jube/image_classification.yaml --tag local smoke runs its 2 combinations (global batch
          16 and 32, 1 rank); each row's Images/second, Epoch, GlobalBatchSize, BatchSize/Device
          (and more) equal those computed from its run folder's summary.json, and its first 26
          cells equal `scaffold report --format csv` of the folder; collect refuses a run of
          another precision, model, global batch or rank count and a report.csv that disagrees.
  imgcls_errors  a global batch that does not split over the devices stops the run naming both;
          a misspelt tag, and this campaign's tag given to another campaign, are errors; a
          combination scaffold rejects has a row with scaffold's message.
  imgcls_slurm  on a GPU system added as one entry, the dry run renders CARAML's 7 (with the tag
          precision, 28) job scripts, each equal line by line to the one written out by hand in
          GPU_JOB_SCRIPT below; a CPU system gets fp32 and --device cpu; without dryrun the 7
          jobs go to sbatch.
  slurm also renders the shipped GPU systems' strong-scaling job scripts: each binds one GPU per
          task (hand-written launcher lines below).

Usage: check_campaigns.py TEST --scaffold BIN --jube JUBE --repo DIR [--keep]
"""

import argparse
import csv
import glob
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from checklib import Failure, check, run_in_temp, with_this_python_first  # noqa: E402,F401 (Failure and check: the other checkers import them from here)


class Env:
    def __init__(self, args, tmp):
        self.args = args
        self.tmp = tmp
        self.environ = with_this_python_first(tmp, dict(os.environ, SCAFFOLD_BIN=args.scaffold))

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


def result_tables(output, csv_start="campaign,system,"):
    """(pretty rows as dicts, csv rows as dicts) from `jube result` output; the CSV table is
    the one whose header starts with `csv_start`."""
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
    start = [i for i, l in enumerate(lines) if l.startswith(csv_start)]
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
    in row order, as docs/reports.md defines them."""
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


def shard_product(shards):
    product = 1
    for value in shards.split():
        product *= int(value)
    return product


def run_collect(env, workload, step_dir, argv):
    """jube/lib/collect.py WORKLOAD STEP_DIR ARGV in a fresh folder, as the collect step runs
    it: (exit code, result.txt as a dict, stderr)."""
    cwd = tempfile.mkdtemp(prefix="collect-", dir=env.tmp)
    proc = subprocess.run([sys.executable, os.path.join(env.args.repo, "jube", "lib", "collect.py"),
                           workload, step_dir] + [str(a) for a in argv], cwd=cwd,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    result = {}
    with open(os.path.join(cwd, "result.txt")) as handle:
        for line in handle:
            key, _, value = line.rstrip("\n").partition(": ")
            result[key] = value
    return proc.returncode, result, proc.stderr


def copy_step(env, step_dir):
    """A copy of a step's work folder (run folder, report.csv) to tamper with."""
    copy = tempfile.mkdtemp(prefix="step-", dir=env.tmp)
    shutil.rmtree(copy)
    shutil.copytree(step_dir, copy, symlinks=True)
    return copy


def edit_json(path, change):
    with open(path) as handle:
        data = json.load(handle)
    change(data)
    with open(path, "w") as handle:
        json.dump(data, handle, indent=2)


def expect_refused(env, workload, step_dir, argv, message, what):
    code, result, stderr = run_collect(env, workload, step_dir, argv)
    print("collect {0}: exit {1}, {2}".format(what, code, stderr.strip()))
    check(code == 1, "collect accepted {0}".format(what))
    check(message in stderr and result.get("status", "").startswith("failed at collect: "),
          "collect of {0} does not say '{1}': {2} / {3}".format(
              what, message, stderr.strip(), result.get("status")))


def check_benchmark_collect(env, bench_dir, argv, epochs):
    """collect reads summary.json: a record that disagrees with report.csv or the parameters,
    or none at all, fails the row."""
    code, result, stderr = run_collect(env, "benchmark", bench_dir, argv)
    check(code == 0 and result["status"] == "ok", "collect of an untouched copy: {0} {1}".format(
        code, stderr))
    copy = copy_step(env, bench_dir)
    summary = glob.glob(os.path.join(copy, "scaffold_*", "summary.json"))[0]
    edit_json(summary, lambda s: s.update(epochs=s["epochs"] + 1))
    expect_refused(env, "benchmark", copy, argv,
                   "epochs: report.csv {0}, summary.json {1}".format(epochs, epochs + 1),
                   "a summary.json with one epoch more")
    edit_json(summary, lambda s: s.update(epochs=s["epochs"] - 1, nodes=2))
    expect_refused(env, "benchmark", copy, argv, "nodes=2 (asked 1)",
                   "a summary.json on 2 nodes")
    os.remove(summary)
    expect_refused(env, "benchmark", copy, argv, "summary.json", "a run without summary.json")


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
    check_benchmark_collect(env, os.path.dirname(found[0]),
                            ["--ranks", ranks, "--nodes", 1, "--problem-scale", 4,
                             "--shards", shard_product(shards),
                             "--global-batch", rows[-1]["global_batch"]], epochs)


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

# Job ids from 4242 on, one per call, so that the dependencies can be told apart.
FAKE_SBATCH = """#!/bin/sh
id=$(( $(cat "{log}.id" 2>/dev/null || echo 4241) + 1 ))
echo "$id" > "{log}.id"
echo "$(pwd) $*" >> "{log}"
echo "Submitted batch job $id"
"""


def campaign_parameters(path):
    """{name: value} of the `{name: x, ..., _: "v"}` parameter lines of a campaign file (its own
    sweeps and settings, not the included ones); a sweep stays the text "4,8,16"."""
    values = {}
    with open(path) as handle:
        for line in handle:
            m = re.match(r'\s*- \{name: (\w+),(?:.*?,)? _: "([^"]*)"\}', line)
            if m:
                values[m.group(1)] = m.group(2)
    return values


def job_script(path):
    """(#SBATCH {option: value}, bare #SBATCH options, the lines up to the first command, all
    lines) of a rendered job script."""
    with open(path) as handle:
        lines = handle.read().splitlines()
    options, bare, head = {}, [], []
    for line in lines:
        if line and not line.startswith("#"):
            break
        head.append(line)
    for line in lines:
        if not line.startswith("#SBATCH "):
            continue
        check(line in head, "{0}: '{1}' comes after a command, where sbatch no longer reads "
              "directives".format(path, line))
        m = re.match(r"#SBATCH --([\w-]+)=(.*)$", line)
        if m and m.group(1) in ("job-name", "nodes", "ntasks-per-node", "cpus-per-task", "time",
                                "partition", "account", "gres", "signal", "output", "error"):
            check(m.group(1) not in options, "{0}: --{1} twice".format(path, m.group(1)))
            options[m.group(1)] = m.group(2)
        else:
            bare.append(line[len("#SBATCH "):])
    return options, bare, head, lines


def check_job_script(path, system, step, ranks, command_flags, workload_args):
    """A rendered Slurm job script against what the system entry and the campaign ask for,
    computed here (not rendered by jube/lib): the #SBATCH directives before any command, the
    node layout (ranks over devices_per_node), the time limit (prep_time_limit for the fractals
    and dataset steps), the time-limit signal on the training step only (the entry's `signal`,
    by default USR2@120: docs/campaigns.md), the output files in the work folder, the modules
    and environment, one launcher line with the entry's launcher for these ranks, the scaffold
    command with the campaign's values (`command_flags`: flag -> value, each exactly once), and
    the status reporting after it."""
    options, bare, head, lines = job_script(path)
    work = os.path.dirname(path)
    wp = int(os.path.basename(os.path.dirname(work)).split("_")[0])
    per_node = min(ranks, system["devices_per_node"])
    nodes = ranks // per_node
    check(nodes * per_node == ranks, "{0}: {1} ranks do not fill nodes".format(path, ranks))
    prep = step != "benchmark"
    want = {"job-name": "scaffold-strong-{0}-{1}".format(step, wp), "nodes": str(nodes),
            "ntasks-per-node": str(per_node), "cpus-per-task": str(system["cpus_per_rank"]),
            "time": system["prep_time_limit"] if prep else system["time_limit"],
            "partition": system["partition"], "account": system["account"],
            "gres": system["gres"], "output": os.path.join(work, "job.out"),
            "error": os.path.join(work, "job.err")}
    if not prep:
        want["signal"] = system.get("signal", "USR2@120")
    check(options == want, "{0}: #SBATCH options\n  {1}\nexpected\n  {2}".format(
        path, sorted(options.items()), sorted(want.items())))
    check(bare == system["sbatch_options"], "{0}: extra #SBATCH lines {1}, expected {2}".format(
        path, bare, system["sbatch_options"]))
    check(lines[0] == "#!/bin/bash", "{0}: not a bash script".format(path))
    body = lines[len(head):]
    check(body[0] == 'cd "{0}" || exit 1'.format(work), "{0}: does not start in {1}".format(
        path, work))
    trap = [i for i, l in enumerate(body) if l.startswith("trap ") and l.endswith(" TERM")]
    check(len(trap) == 1 and "finish-job\" {0} 143".format(step) in body[trap[0]],
          "{0}: no TERM trap that reports the step".format(path))
    check("module load " + " ".join(system["modules"]) in body, "{0}: modules".format(path))
    for name, value in system.get("environment", {}).items():
        check('export {0}="{1}"'.format(name, value) in body, "{0}: export {1}".format(path, name))
    for line in system.get("setup", []):
        check(line in body, "{0}: setup line '{1}'".format(path, line))
    launcher = system["launcher"].format(ranks=ranks, tasks_per_node=per_node,
                                         cpus_per_rank=system["cpus_per_rank"])
    launch = [i for i, l in enumerate(body) if l.startswith(launcher + " ")]
    check(len(launch) == 1 and launch[0] > trap[0], "{0}: one line starting '{1}' after the trap, "
          "got {2}".format(path, launcher, [body[i] for i in launch]))
    words = body[launch[0]][len(launcher) + 1:].split()
    check(words[:2] == [system["scaffold"], step if step == "benchmark" else
                        "generate_" + step] and words[2:2 + len(workload_args)] == workload_args,
          "{0}: runs {1}".format(path, words[:2 + len(workload_args)]))
    flags = {}
    rest = words[2 + len(workload_args):]
    i = 0
    is_flag = re.compile(r"^--?[A-Za-z]").match  # "-c", "--epochs", but not the value "-1"
    while i < len(rest):
        check(is_flag(rest[i]) and rest[i] not in flags, "{0}: flag {1} ({2})".format(
            path, rest[i], " ".join(rest)))
        j = i + 1
        while j < len(rest) and not is_flag(rest[j]):
            j += 1
        flags[rest[i]] = " ".join(rest[i + 1:j])
        i = j
    check(flags == command_flags, "{0}: scaffold's flags\n  {1}\nexpected\n  {2}".format(
        path, sorted(flags.items()), sorted(command_flags.items())))
    tail = body[launch[0] + 1:]
    if step == "benchmark":
        check(tail[0].startswith('"') and tail[0].endswith("/jube/lib/report-run\" $? {0} "
                                                           "{1}/scaffold_*/".format(
                                                               system["scaffold"], work)),
              "{0}: the run folder is not reported right after the run: {1}".format(path, tail[0]))
        tail = tail[1:]
    check(len(tail) == 1 and tail[0].endswith('/jube/lib/finish-job" {0} $?'.format(step)),
          "{0}: does not end by reporting the step's status: {1}".format(path, tail))
    print("{0}: {1} on {2} rank(s): as the campaign and the system ask".format(path, step, ranks))


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
    # Each job script against the campaign's values and the test system's entry.
    system = yaml.safe_load(TEST_SYSTEM)["testcluster"]
    study = campaign_parameters(os.path.join(jube_dir, "strong-scaling.yaml"))
    ranks_swept = [int(r) for r in study["ranks"].split(",")]
    shards = shard_product(study["dc_num_shards"])
    data = system["data_dir"]
    config = study["configs"].replace("$scaffold_repo", os.path.dirname(jube_dir))
    common = {"-c": config, "--problem-scale": study["problem_scale"],
              "--fract-base-dir": data + "/fractals", "--threads": str(system["cpus_per_rank"])}
    check_job_script(os.path.join(out, "000000", "000000_fractals", "work", "job.sh"), system,
                     "fractals", system["prep_ranks"], common, [])
    dataset = [p for p in glob.glob(os.path.join(out, "000000", "*_dataset", "work", "job.sh"))]
    check(len(dataset) == 1, "one dataset job script, got {0}".format(dataset))
    check_job_script(dataset[0], system, "dataset", system["prep_ranks"],
                     dict(common, **{"--dc-num-shards": study["dc_num_shards"],
                                     "--dataset-dir": data + "/datasets"}), [])
    seen = []
    for path in bench:
        work = os.path.dirname(path)
        with open(path) as handle:
            ranks = int(re.search(r"--ntasks=(\d+) ", handle.read()).group(1))
        seen.append(ranks)
        local = int(study["fixed_global_batch"]) // (ranks // shards)
        check_job_script(path, system, "benchmark", ranks, dict(common, **{
            "--dc-num-shards": study["dc_num_shards"], "--dataset-dir": data + "/datasets",
            "--local-batch-size": str(local), "--epochs": study["epochs"],
            "--base-run-dir": work, "--job-name": "scaffold"}), [])
    check(sorted(seen) == ranks_swept, "benchmark jobs for ranks {0}, the study sweeps {1}".format(
        sorted(seen), ranks_swept))
    result = env.jube("result", out, "-i", "last").stdout
    print(result)
    _, rows = result_tables(result)
    check([(r["ranks"], r["nodes"], r["local_batch_size"]) for r in rows] ==
          [("4", "1", "4"), ("8", "2", "2"), ("16", "4", "1")],
          "strong scaling rows (ranks, nodes, local batch) are wrong: {0}".format(
              [(r["ranks"], r["nodes"], r["local_batch_size"]) for r in rows]))
    check(all(r["status"].startswith("dry run") and r["system"] == "testcluster" for r in rows),
          "dry-run rows do not say so")

    # Without dryrun one `jube run` submits the whole campaign, each job after the one it needs
    # (afterok), and collect waits for the benchmark jobs.
    out = os.path.join(env.tmp, "submit")
    proc = env.jube("run", "-e", "--hide-animation", os.path.join(jube_dir, "smoke.yaml"),
                    "--tag", "testcluster", "-o", out)
    check(os.path.exists(log), "sbatch was not called")
    with open(log) as handle:
        calls = handle.read().splitlines()
    print("\n".join(calls))
    after = "--kill-on-invalid-dep=yes job.sh"
    check(len(calls) == 4 and calls[0].endswith("_fractals/work job.sh") and
          calls[1].endswith("_dataset/work --dependency=afterok:4242 " + after) and
          all(c.split()[0].endswith("_benchmark/work") and
              c.endswith(" --dependency=afterok:4243 " + after) for c in calls[2:]),
          "expected sbatch of fractals, dataset after 4242, 2 benchmarks after 4243, got "
          "{0}".format(calls))
    check("wait" in proc.stdout, "collect is not waiting for the jobs")
    result = env.jube("result", out, "-i", "last").stdout
    _, rows = result_tables(result)
    check(sorted(r["slurm_job"] for r in rows) == ["4244", "4245"] and
          all(r["status"].startswith("submitted to Slurm") for r in rows),
          "the submitted jobs' rows: {0}".format([(r["slurm_job"], r["status"]) for r in rows]))


# ---- image classification (jube/image_classification.yaml) ----

# The columns of `scaffold report --format csv` for image classification, as docs/reports.md
# lists them: CARAML's CSV titles in CARAML's order (image_classification_torch_benchmark.xml,
# without EnergyFile and TrainOptim), then ours.
IMGCLS_REPORT_COLUMNS = [
    "JobID", "System", "Version", "Queue", "Runtime(s)", "Model", "Dataset", "Nodes", "Devices",
    "Tasks/Node", "Threads/Task", "Workers", "GlobalBatchSize", "BatchSize/Device", "Epoch",
    "Precision", "Compiler", "CompilerMode", "ChannelLast", "Images/second", "TF32",
    "TrainImages/second", "Top1(%)", "Top5(%)", "Energy(Wh)", "Images/Wh", "J/image"]
IMGCLS_CSV_COLUMNS = IMGCLS_REPORT_COLUMNS + [
    "Status", "Campaign", "JubeSystem", "Tags", "JubeWP", "SlurmJob", "Run", "Host", "GitCommit",
    "StdoutAverageImages/s"]


def imgcls_tables(output):
    pretty, rows = result_tables(output, "JobID,System,")
    check(rows and list(rows[0].keys()) == IMGCLS_CSV_COLUMNS,
          "CSV columns: {0}\nexpected {1}".format(list(rows[0].keys()) if rows else None,
                                                 IMGCLS_CSV_COLUMNS))
    return pretty, rows


def counter(summary, name):
    values = [c["value"] for c in summary["counters"] if c["name"] == name]
    return values[0] if values else None


def two_decimals(value):
    return "" if value is None else "{0:.2f}".format(value)


def test_imgcls(env):
    """The local smoke sweep: 2 runs, each row equal to its run folder's summary.json."""
    out = os.path.join(env.tmp, "out")
    campaign = os.path.join(env.args.repo, "jube", "image_classification.yaml")
    env.jube("run", "-e", "--hide-animation", campaign, "--tag", "local", "smoke", "-o", out)
    result = env.jube("result", out, "-i", "last").stdout
    print(result)
    pretty, rows = imgcls_tables(result)
    check(len(rows) == 2 and len(pretty) == 2,
          "expected 2 rows (global batch 16 and 32), got {0} csv / {1} pretty".format(
              len(rows), len(pretty)))
    check([r["GlobalBatchSize"] for r in rows] == ["16", "32"],
          "rows are not the smoke sweep, in order: {0}".format(
              [r["GlobalBatchSize"] for r in rows]))
    for row, shown in zip(rows, pretty):
        check(row["Status"] == "ok" and shown["Status"] == "ok",
              "status of global batch {0}: {1}".format(row["GlobalBatchSize"], row["Status"]))
        found = glob.glob(os.path.join(out, "*", "*_train", "work", row["Run"]))
        check(len(found) == 1, "run folder {0} not found once in the work packages: {1}".format(
            row["Run"], found))
        run_dir = found[0]
        with open(os.path.join(run_dir, "summary.json")) as handle:
            summary = json.load(handle)
        # What the smoke sweep asked for: 1 rank, the swept global batch, fp32 on this CPU
        # system, ResNet-18, 2 timed epochs after 1 warm-up epoch.
        gbs = int(row["GlobalBatchSize"])
        check(summary["workload"] == "image_classification" and summary["ranks"] == 1 and
              summary["devices"] == 1 and summary["global_batch"] == gbs and
              summary["local_batch"] == gbs and summary["precision"] == "fp32" and
              summary["params"]["model"] == "resnet18" and summary["epochs"] == 2 and
              summary["warmup_epochs"] == 1,
              "{0}/summary.json is not the run asked for (global batch {1}): {2}".format(
                  row["Run"], gbs, {k: summary[k] for k in (
                      "ranks", "devices", "global_batch", "local_batch", "precision", "epochs",
                      "warmup_epochs")}))
        # The row, computed from summary.json (docs/reports.md's column definitions).
        expected = {
            "Images/second": two_decimals(counter(summary, "images_per_s")),
            "Epoch": str(summary["epochs"]),
            "GlobalBatchSize": str(summary["global_batch"]),
            "BatchSize/Device": str(summary["global_batch"] // summary["devices"]),
            "Devices": str(summary["devices"]), "Nodes": str(summary["nodes"]),
            "Precision": summary["precision"], "Model": summary["params"]["model"],
            "TrainImages/second": two_decimals(counter(summary, "train_images_per_s")),
            # tf32 has no effect on this CPU system, and the record says so.
            "TF32": summary["params"]["tf32_effect"],
            "Top1(%)": two_decimals(100 * counter(summary, "val_top1")),
            "Runtime(s)": two_decimals(summary["runtime_s"]),
            "JobID": summary["job_id"] or summary["run"],
        }
        print("{0}: summary.json {1}".format(row["Run"], expected))
        # CARAML's JUBE pattern (`Average Images/s: ${jube_pat_fp}`, expanded by JUBE itself) on
        # the job's stdout reads int() of summary.json's images_per_s.
        caraml = row["StdoutAverageImages/s"]
        check(caraml != "" and float(caraml) == int(counter(summary, "images_per_s")),
              "StdoutAverageImages/s of {0}: {1!r}, summary.json images_per_s {2}".format(
                  row["Run"], caraml, counter(summary, "images_per_s")))
        for title, value in expected.items():
            check(row[title] == value and shown[title] == value,
                  "{0} of {1}: table {2!r} (pretty {3!r}), summary.json {4!r}".format(
                      title, row["Run"], row[title], shown[title], value))
        if summary["energy_wh"] is None:
            check(row["Energy(Wh)"] == "" and shown["Energy(Wh)"] == "not measured",
                  "no energy measured, but the energy cells say {0!r} / {1!r}".format(
                      row["Energy(Wh)"], shown["Energy(Wh)"]))
        else:
            check(row["Energy(Wh)"] == "{0:.3f}".format(summary["energy_wh"]),
                  "Energy(Wh): table {0}, summary.json {1}".format(
                      row["Energy(Wh)"], summary["energy_wh"]))
        # The first columns are `scaffold report --format csv` of the folder, cell for cell.
        proc = subprocess.run([env.args.scaffold, "report", "--format", "csv", run_dir],
                              stdout=subprocess.PIPE, universal_newlines=True)
        report = list(csv.reader(io.StringIO(proc.stdout)))
        check(proc.returncode == 0 and len(report) == 2 and report[0] == IMGCLS_REPORT_COLUMNS,
              "scaffold report of {0}: {1}".format(run_dir, proc.stdout))
        check([row[c] for c in IMGCLS_REPORT_COLUMNS] == report[1],
              "the row is not scaffold report's:\n{0}\n{1}".format(
                  [row[c] for c in IMGCLS_REPORT_COLUMNS], report[1]))
        for name in ("job.out", "job.err", "job.sh", "report.csv"):
            check(os.path.exists(os.path.join(os.path.dirname(run_dir), name)),
                  "{0} missing from the train work package".format(name))
        print("{0}: runtime {1:.1f} s".format(row["Run"], summary["runtime_s"]))

    # collect refuses a run that is not the one asked for, and a report.csv that does not
    # say what summary.json says.
    step = os.path.dirname(run_dir)
    argv = ["--ranks", 1, "--nodes", 1, "--tasks-per-node", 1, "--global-batch", 32,
            "--batch-per-device", 32, "--precision", "fp32", "--model", "resnet18",
            "--dataset", "synthetic", "--epochs", 2]
    code, result, stderr = run_collect(env, "image_classification", step, argv)
    check(code == 0 and result["status"] == "ok" and
          result["images_per_s"] == rows[1]["Images/second"],
          "collect of the 32 run again: {0} {1} {2}".format(code, result, stderr))

    def asking(**changes):
        changed = list(argv)
        for key, value in changes.items():
            changed[changed.index("--" + key.replace("_", "-")) + 1] = value
        return changed
    expect_refused(env, "image_classification", step, asking(precision="bf16"),
                   "precision=fp32 (asked bf16)", "a run of another precision")
    expect_refused(env, "image_classification", step, asking(model="resnet50"),
                   "model=resnet18 (asked resnet50)", "a run of another model")
    expect_refused(env, "image_classification", step,
                   asking(global_batch=64, batch_per_device=64),
                   "global_batch=32 (asked 64)", "a run of another global batch")
    expect_refused(env, "image_classification", step, asking(ranks=2, tasks_per_node=2),
                   "ranks=1 (asked 2)", "a run on fewer ranks")
    copy = copy_step(env, step)
    with open(os.path.join(copy, "report.csv")) as handle:
        text = handle.read()
    cells = text.splitlines()[1].split(",")
    images = cells[IMGCLS_REPORT_COLUMNS.index("Images/second")]
    cells[IMGCLS_REPORT_COLUMNS.index("Images/second")] = "{0:.2f}".format(float(images) + 1)
    with open(os.path.join(copy, "report.csv"), "w") as handle:
        handle.write(text.splitlines()[0] + "\n" + ",".join(cells) + "\n")
    expect_refused(env, "image_classification", copy, argv, "disagree: Images/second",
                   "a report.csv whose Images/second is not summary.json's")


THREE_DEVICE_SYSTEM = """
# Added by tests/jube/check_campaigns.py: one node of 3 GPUs, which no global batch of
# CARAML's sweep (powers of two) splits over.
tri:
  scheduler: slurm
  devices_per_node: 3
  launcher: "srun --ntasks={ranks}"
  device: cuda
"""


def test_imgcls_errors(env):
    jube_dir = env.copy_jube("imgcls-errors")
    campaign = os.path.join(jube_dir, "image_classification.yaml")
    with open(os.path.join(jube_dir, "systems.yaml"), "a") as handle:
        handle.write(THREE_DEVICE_SYSTEM)

    # 1. A global batch that does not split over the devices stops the run before any job.
    out = os.path.join(env.tmp, "tri")
    proc = env.jube("run", "-e", "--hide-animation", campaign, "--tag", "tri", "dryrun",
                    "-o", out, expect_ok=False)
    print(proc.stdout[-1500:])
    check(proc.returncode != 0, "global batch 32 over 3 devices exited 0")
    check("the global batch 32 does not split over 3 devices" in proc.stdout and
          "system 'tri'" in proc.stdout,
          "the error does not say that global batch 32 does not split over the 3 devices of 'tri'")
    check(not glob.glob(os.path.join(out, "*", "*_train", "work", "job.sh")),
          "an unsplittable global batch still rendered job scripts")

    # 2. Tags: a misspelt campaign tag, and a tag of this campaign given to another one.
    proc = env.jube("run", "--hide-animation", campaign, "--tag", "local", "smok",
                    "-o", os.path.join(env.tmp, "smok"), expect_ok=False)
    print(proc.stdout[-1000:])
    check(proc.returncode != 0 and "unknown tag(s) 'smok'" in proc.stdout and
          "nor a campaign tag (dryrun, container, smoke, precision)" in proc.stdout,
          "a misspelt tag does not fail naming it and the campaign's tags")
    proc = env.jube("run", "--hide-animation", os.path.join(jube_dir, "smoke.yaml"), "--tag",
                    "local", "precision", "-o", os.path.join(env.tmp, "other"), expect_ok=False)
    check(proc.returncode != 0 and "unknown tag(s) 'precision'" in proc.stdout,
          "the ScaFFold smoke campaign accepted the image-classification tag 'precision'")

    # 3. A combination scaffold rejects still has a row that says why (global batch 4096 is
    #    larger than the smoke's 256 training images); with -e, jube stops with the message.
    edit(campaign, '{name: global_batch_size, type: int, tag: smoke, _: "16,32"}',
         '{name: global_batch_size, type: int, tag: smoke, _: "4096"}')
    out = os.path.join(env.tmp, "rejected")
    env.jube("run", "--hide-animation", campaign, "--tag", "local", "smoke", "-o", out,
             expect_ok=False)
    result = env.jube("result", out, "-i", "last").stdout
    print(result)
    _, rows = imgcls_tables(result)
    check(len(rows) == 1 and rows[0]["GlobalBatchSize"] == "4096" and
          rows[0]["BatchSize/Device"] == "4096", "expected one row of global batch 4096: {0}".format(
              rows))
    check(rows[0]["Status"].startswith("failed at train (exit 1)") and
          "the training set (256 examples)" in rows[0]["Status"] and
          rows[0]["Images/second"] == "",
          "the rejected run's row does not say why: {0!r}".format(rows[0]["Status"]))
    proc = env.jube("run", "-e", "--hide-animation", campaign, "--tag", "local", "smoke",
                    "-o", out, expect_ok=False)
    check(proc.returncode != 0 and "the training set (256 examples)" in proc.stdout,
          "jube run -e does not stop with scaffold's message")


GPU_TEST_SYSTEM = """
# Added by tests/jube/check_campaigns.py: 2 nodes of 4 GPUs for the image-classification runs.
testgpu:
  description: "test GPU cluster"
  scheduler: slurm
  devices_per_node: 4
  cpus_per_rank: 16
  launcher: "srun --ntasks={ranks} --ntasks-per-node={tasks_per_node} --cpus-per-task={cpus_per_rank}"
  partition: gpu
  account: proj42
  gres: "gpu:4"
  time_limit: "00:45:00"
  sbatch_options: ["--constraint=ib"]
  nodes: 2
  device: cuda
  modules: [GCC, OpenMPI, CUDA]
  environment:
    SCAFFOLD_SYSTEM: testgpu
  scaffold: /opt/scaffold/bin/scaffold
# A CPU cluster: one node, two ranks (sockets) of 24 cores.
testcpu:
  scheduler: slurm
  devices_per_node: 2
  cpus_per_rank: 24
  launcher: "srun --ntasks={ranks} --cpu-bind=sockets"
  partition: cpu
  device: cpu
  scaffold: /opt/scaffold/bin/scaffold
"""

# The train job script of testgpu, written out by hand from the entry above, jube/job.sh.in
# and the campaign (not produced by the code): 2 nodes x 4 tasks, one per GPU (ntasks 8);
# 16 CPUs and threads per rank, and CARAML's workers = threads / 4 = 4; ResNet-50 on synthetic
# images, 5 warm-up + 100 epochs (configs/image_classification.yml); --device cuda from the
# entry. {g} is the global batch, {p} the precision, {wp} the work package id, {work} its
# folder, {repo} the copy of the repository.
GPU_JOB_SCRIPT = """#!/bin/bash
#SBATCH --job-name=scaffold-imgcls-train-{wp}
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=16
#SBATCH --time=00:45:00
#SBATCH --partition=gpu
#SBATCH --account=proj42
#SBATCH --gres=gpu:4
#SBATCH --signal=USR2@120
#SBATCH --output={work}/job.out
#SBATCH --error={work}/job.err
#SBATCH --constraint=ib
# scaffold campaign 'imgcls', step 'train', system 'testgpu': rendered by JUBE from
# jube/job.sh.in. To repeat this step by hand: bash job.sh >job.out 2>job.err (or submit it).
cd "{work}" || exit 1
rm -f ready error finished
# A scheduler's kill (time limit, scancel) still ends the step for JUBE: status, then `error`.
trap '"{repo}/jube/lib/finish-job" train 143 "killed by SIGTERM"; exit 143' TERM
module load GCC OpenMPI CUDA
export SCAFFOLD_SYSTEM="testgpu"

srun --ntasks=8 --ntasks-per-node=4 --cpus-per-task=16 /opt/scaffold/bin/scaffold image_classification -c {repo}/configs/image_classification.yml --model resnet50 --dataset synthetic --global-batch-size {g} --precision {p} --epochs 100 --warmup-epochs 5 --device cuda --dataloader-num-workers 4 --base-run-dir {work} --job-name image_classification --threads 16
"{repo}/jube/lib/report-run" $? /opt/scaffold/bin/scaffold {work}/image_classification_*/
"{repo}/jube/lib/finish-job" train $?
"""

CARAML_GLOBAL_BATCHES = [32, 64, 128, 256, 512, 1024, 2048]
PRECISIONS = ["fp32", "tf32", "fp16", "bf16"]


def train_scripts(out):
    """{(global batch, precision): (work package id, work folder, job.sh text)} of a run."""
    scripts = {}
    for path in glob.glob(os.path.join(out, "000000", "*_train", "work", "job.sh")):
        work = os.path.dirname(path)
        with open(path) as handle:
            text = handle.read()
        batch = [w for w in text.split("--global-batch-size ")[1:]]
        precision = [w for w in text.split("--precision ")[1:]]
        check(len(batch) == 1 and len(precision) == 1,
              "{0}: not one --global-batch-size and one --precision".format(path))
        key = (int(batch[0].split()[0]), precision[0].split()[0])
        check(key not in scripts, "two job scripts for {0}".format(key))
        wp = int(os.path.basename(os.path.dirname(work)).split("_")[0])
        scripts[key] = (wp, work, text)
    return scripts


def compare_lines(actual, expected, where):
    if actual.splitlines() != expected.splitlines():
        import difflib
        raise Failure("{0} differs from the hand-written expectation:\n{1}".format(
            where, "\n".join(difflib.unified_diff(expected.splitlines(), actual.splitlines(),
                                                  "expected", where, lineterm=""))))


def test_imgcls_slurm(env):
    jube_dir = env.copy_jube("imgcls-slurm")
    repo = os.path.dirname(jube_dir)
    campaign = os.path.join(jube_dir, "image_classification.yaml")
    with open(os.path.join(jube_dir, "systems.yaml"), "a") as handle:
        handle.write(GPU_TEST_SYSTEM)
    bindir = os.path.join(env.tmp, "bin")
    os.makedirs(bindir)
    log = os.path.join(env.tmp, "sbatch.log")
    with open(os.path.join(bindir, "sbatch"), "w") as handle:
        handle.write(FAKE_SBATCH.format(log=log))
    os.chmod(os.path.join(bindir, "sbatch"), 0o755)
    env.environ["PATH"] = bindir + os.pathsep + env.environ.get("PATH", "")

    # CARAML's sweep on a GPU system: 7 jobs, fp16 (CARAML's default on CUDA), every line as
    # written out by hand above.
    out = os.path.join(env.tmp, "dry")
    env.jube("run", "-e", "--hide-animation", campaign, "--tag", "testgpu", "dryrun", "-o", out)
    check(not os.path.exists(log), "the dry run called sbatch")
    scripts = train_scripts(out)
    check(sorted(scripts) == [(g, "fp16") for g in CARAML_GLOBAL_BATCHES],
          "job scripts for {0}, expected global batches {1} at fp16".format(
              sorted(scripts), CARAML_GLOBAL_BATCHES))
    for (g, p), (wp, work, text) in sorted(scripts.items()):
        compare_lines(text, GPU_JOB_SCRIPT.format(g=g, p=p, wp=wp, work=work, repo=repo),
                      "{0}/job.sh".format(work))
    print("{0} job scripts equal the hand-written one".format(len(scripts)))
    result = env.jube("result", out, "-i", "last").stdout
    print(result)
    _, rows = imgcls_tables(result)
    # BatchSize/Device = GBS / 8 devices.
    check([(r["GlobalBatchSize"], r["BatchSize/Device"], r["Precision"], r["Nodes"],
            r["Devices"], r["Tasks/Node"], r["Model"]) for r in rows] ==
          [("32", "4", "fp16", "2", "8", "4", "resnet50"),
           ("64", "8", "fp16", "2", "8", "4", "resnet50"),
           ("128", "16", "fp16", "2", "8", "4", "resnet50"),
           ("256", "32", "fp16", "2", "8", "4", "resnet50"),
           ("512", "64", "fp16", "2", "8", "4", "resnet50"),
           ("1024", "128", "fp16", "2", "8", "4", "resnet50"),
           ("2048", "256", "fp16", "2", "8", "4", "resnet50")],
          "dry-run rows: {0}".format([(r["GlobalBatchSize"], r["BatchSize/Device"],
                                       r["Precision"], r["Nodes"], r["Devices"]) for r in rows]))
    check(all(r["Status"].startswith("dry run") and r["JubeSystem"] == "testgpu" for r in rows),
          "dry-run rows do not say so")

    # The precision tag: 7 x 4 jobs, the same script with each precision.
    out = os.path.join(env.tmp, "dry-precision")
    env.jube("run", "-e", "--hide-animation", campaign, "--tag", "testgpu", "dryrun",
             "precision", "-o", out)
    scripts = train_scripts(out)
    check(sorted(scripts) == sorted((g, p) for g in CARAML_GLOBAL_BATCHES for p in PRECISIONS),
          "job scripts of the precision sweep: {0}".format(sorted(scripts)))
    for (g, p), (wp, work, text) in sorted(scripts.items()):
        compare_lines(text, GPU_JOB_SCRIPT.format(g=g, p=p, wp=wp, work=work, repo=repo),
                      "{0}/job.sh".format(work))
    print("{0} job scripts of the precision sweep equal the hand-written one".format(
        len(scripts)))

    # A CPU system: fp32, --device cpu, 1 node x 2 ranks of 24 threads, workers 24 / 4 = 6.
    out = os.path.join(env.tmp, "dry-cpu")
    env.jube("run", "-e", "--hide-animation", campaign, "--tag", "testcpu", "dryrun", "-o", out)
    scripts = train_scripts(out)
    check(sorted(scripts) == [(g, "fp32") for g in CARAML_GLOBAL_BATCHES],
          "CPU job scripts: {0}".format(sorted(scripts)))
    wp, work, text = scripts[(256, "fp32")]
    lines = text.splitlines()
    for line in ("#SBATCH --nodes=1", "#SBATCH --ntasks-per-node=2", "#SBATCH --cpus-per-task=24",
                 "#SBATCH --partition=cpu",
                 "srun --ntasks=2 --cpu-bind=sockets /opt/scaffold/bin/scaffold "
                 "image_classification -c {0}/configs/image_classification.yml --model resnet50 "
                 "--dataset synthetic --global-batch-size 256 --precision fp32 --epochs 100 "
                 "--warmup-epochs 5 --device cpu --dataloader-num-workers 6 --base-run-dir {1} "
                 "--job-name image_classification --threads 24".format(repo, work)):
        check(line in lines, "{0}/job.sh lacks the line\n{1}\n{2}".format(work, line, text))

    # Without dryrun every train job goes to sbatch; the rows show the job ids.
    out = os.path.join(env.tmp, "submit")
    env.jube("run", "-e", "--hide-animation", campaign, "--tag", "testgpu", "-o", out)
    with open(log) as handle:
        calls = handle.read().splitlines()
    check(len(calls) == 7 and all(c.endswith("_train/work job.sh") for c in calls),
          "expected 7 sbatch job.sh from the train steps, got {0}".format(calls))
    _, rows = imgcls_tables(env.jube("result", out, "-i", "last").stdout)
    check(sorted(r["SlurmJob"] for r in rows) == [str(4242 + i) for i in range(7)] and
          all(r["Status"].startswith("submitted to Slurm") for r in rows),
          "the submitted jobs' rows: {0}".format([(r["SlurmJob"], r["Status"]) for r in rows]))


TESTS = {"smoke": test_smoke, "smoke_mpi": test_smoke_mpi, "errors": test_errors,
         "slurm": test_slurm, "imgcls": test_imgcls, "imgcls_errors": test_imgcls_errors,
         "imgcls_slurm": test_imgcls_slurm}
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
    parser.add_argument("test", choices=sorted(TESTS))
    parser.add_argument("--scaffold", required=True)
    parser.add_argument("--jube", required=True)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()

    def body(tmp):
        env = Env(args, tmp)
        TESTS[args.test](env)
        if args.test == "slurm":
            test_gpu_binding(env)

    return run_in_temp(args.test, "scaffold-jube", body, args.keep)


if __name__ == "__main__":
    sys.exit(main())
