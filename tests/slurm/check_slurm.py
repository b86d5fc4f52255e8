#!/usr/bin/env python3
"""Tests on a real one-node Slurm cluster (tests/slurm/cluster.sh, started by the ctest fixture
slurm_cluster; label slurm). Each test is one ctest case:

  launcher     srun --mpi=pmix -n 2 runs one 2-rank benchmark; srun --mpi=none -n 2 is one line
               naming --mpi=pmix and writes nothing; srun --mpi=none -n 1 is a world of one.
  power        srun -n 2 scaffold power -- scaffold benchmark: the wrapped program is one 2-rank
               MPI job, one sampler writes OUT/<node>/, and the tasks' exit status comes back.
  smoke        jube/smoke.yaml --tag local-slurm: one `jube run` submits all four jobs chained
               with afterok; `jube continue` until finished; each row equals its run folder.
  strong       jube/strong-scaling.yaml at scale 4 on 1 and 2 ranks, the same checks.
  failure      a fractals job that fails: Slurm cancels its dependants and every row says why.
  container    jube/smoke.yaml --tag local-slurm container with the image of the ctest fixture
               container_image (tests/container): every job runs `srun ... podman run ... IMAGE
               scaffold ...`, the rows are ok and equal their run folders, which are on the host,
               and the runs' restart.sh name the image's binary. Skipped when there is
               no image (podman cannot run here).
  time_limit   a benchmark job whose time limit (1 min, signal USR2@10) is shorter than its
               training: summary.json complete with status time_limit, exit code 3 in Slurm's
               record, the row says so, and restart.sh resumes the run.
  llm_layouts  jube/llm_training.yaml --tag 13B and --tag 175B, shape-reduced (8 layers, hidden
               64, sequence 32, 4 iterations, accumulation 4), each on a system of TP x PP devices
               on the cluster's one node: one 4-rank job trains the 13B layout TP 2 x PP 2 x
               DP 1, one 64-rank job the 175B layout TP 8 x PP 8 x DP 1 (srun --mpi=pmix); each
               row is ok with its layout, and the run folder's summary.json says so.
Without a cluster (the fixture could not start one) a test prints why and exits 77 (skipped).
The tests that need no cluster (launcher checks under mpirun and a torchrun-style WORLD_SIZE)
are `launcher_mpirun`.

Usage: check_slurm.py TEST --scaffold BIN --jube JUBE --repo DIR --state FILE [--keep]
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
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from checklib import SKIP, Failure, Skip, check, run_in_temp, with_this_python_first  # noqa: E402


def read(path):
    with open(path, errors="replace") as handle:
        return handle.read()


class Env:
    def __init__(self, args, tmp, cluster):
        self.args = args
        self.tmp = tmp
        self.environ = with_this_python_first(tmp, dict(
            os.environ, SCAFFOLD_BIN=args.scaffold, OMP_NUM_THREADS="1",
            OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
        if cluster:
            self.environ["SLURM_CONF"] = os.path.join(cluster, "slurm.conf")
            self.environ["PATH"] = self.environ.get("PATH", "") + ":/usr/sbin:/sbin"
        self.cluster = cluster

    def run(self, cmd, cwd=None, timeout=300, quiet=False):
        proc = subprocess.run(cmd, cwd=cwd or self.tmp, env=self.environ, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout)
        shown = " ".join(cmd)
        print("$ {0}  -> exit {1}".format(shown if len(shown) < 300 else shown[:300] + " ...",
                                        proc.returncode))
        if not quiet and proc.returncode != 0:
            print(proc.stdout[-3000:] + proc.stderr[-3000:])
        return proc

    def jube(self, *argv, expect_ok=True):
        proc = self.run([self.args.jube] + list(argv), quiet=not expect_ok)
        if expect_ok and proc.returncode != 0:
            raise Failure("jube {0} exited with {1}".format(argv[0], proc.returncode))
        return proc

    def copy_jube(self, name):
        """A copy of jube/ in <tmp>/<name>/jube with configs/ beside it, for edited campaigns."""
        root = os.path.join(self.tmp, name)
        shutil.copytree(os.path.join(self.args.repo, "jube"), os.path.join(root, "jube"),
                        ignore=shutil.ignore_patterns("*_run", "__pycache__"))
        os.symlink(os.path.join(self.args.repo, "configs"), os.path.join(root, "configs"))
        return os.path.join(root, "jube")

    def tiny_config(self, name, extra=""):
        """The e2e tests' tiny benchmark config (tests/e2e/e2e_util.hpp), in <tmp>/<name>/."""
        folder = os.path.join(self.tmp, name)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "tiny.yml")
        with open(path, "w") as handle:
            handle.write("problem_scale: 4\nunet_bottleneck_dim: 2\nunet_base_channels: 8\n"
                         "group_norm_groups: 4\nn_categories: 2\nn_instances_used_per_fractal: 24\n"
                         "local_batch_size: 2\nwarmup_batches: 2\nseed: 3\n"
                         "starting_learning_rate: 0.01\nmin_learning_rate: 0.001\n"
                         "base_run_dir: {0}/runs\nfract_base_dir: {0}/lib\ndataset_dir: {0}/data\n"
                         "{1}".format(folder, extra))
        return path


def edit(path, old, new):
    text = read(path)
    check(text.count(old) == 1, "{0}: expected one '{1}' to edit".format(path, old))
    with open(path, "w") as handle:
        handle.write(text.replace(old, new))


def run_folders(parent):
    return sorted(d for d in glob.glob(os.path.join(parent, "*_*")) if os.path.isdir(d))


def summary(run_dir):
    return json.loads(read(os.path.join(run_dir, "summary.json")))


def train_stats(run_dir):
    """(epochs, time to target): the last epoch and Σ epoch_duration in row order.

    As docs/reports.md defines them."""
    with open(os.path.join(run_dir, "train_stats.csv"), newline="") as handle:
        rows = list(csv.DictReader(handle))
    check(rows, run_dir + "/train_stats.csv has no rows")
    total = 0.0
    for row in rows:
        total += float(row["epoch_duration"])
    return int(rows[-1]["epoch"]), total


def slurm_job(env, job_id):
    """`scontrol show job` of a job (finished jobs stay for the cluster's MinJobAge) as a dict."""
    proc = env.run(["scontrol", "show", "job", str(job_id)], quiet=True)
    check(proc.returncode == 0, "scontrol show job {0}: {1}".format(job_id, proc.stderr.strip()))
    return dict(item.split("=", 1) for item in proc.stdout.split() if "=" in item)


# ---------------------------------------------------------------------------- campaigns

def result_rows(output, csv_start="campaign,system,"):
    """The CSV table of `jube result` (the one whose header starts with `csv_start`) as dicts."""
    lines = output.splitlines()
    start = [i for i, line in enumerate(lines) if line.startswith(csv_start)]
    check(len(start) == 1, "no CSV table in jube result:\n" + output)
    block = []
    for line in lines[start[0]:]:
        if not line.strip():
            break
        block.append(line)
    return list(csv.DictReader(io.StringIO("\n".join(block))))


def run_campaign(env, campaign, out, tag="local-slurm", timeout_s=240,
                 csv_start="campaign,system,"):
    """jube run (which submits every job), then jube continue until nothing is pending.
    Returns (the final `jube status`, the CSV rows of `jube result`: the table whose header
    starts with `csv_start`)."""
    tags = tag if isinstance(tag, list) else [tag]
    env.jube("run", "--hide-animation", campaign, "--tag", *tags, "-o", out)
    steps = glob.glob(os.path.join(out, "000000", "*_*", "work"))
    job_steps = [s for s in steps if not s.split(os.sep)[-2].endswith("_collect")]
    check(job_steps and all(os.path.exists(os.path.join(s, "job_id")) or
                            os.path.exists(os.path.join(s, "error")) for s in job_steps),
          "jube run did not submit every job step: {0}".format(
              [s for s in job_steps if not os.path.exists(os.path.join(s, "job_id"))]))
    print("jube run submitted {0} jobs: {1}".format(len(job_steps), ", ".join(
        read(os.path.join(s, "job_id")).strip() for s in sorted(job_steps)
        if os.path.exists(os.path.join(s, "job_id")))))
    deadline = time.time() + timeout_s
    status = "RUNNING"
    while time.time() < deadline:
        env.run([env.args.jube, "continue", "--hide-animation", out, "-i", "last"], quiet=True)
        status = env.run([env.args.jube, "status", out, "-i", "last"],
                         quiet=True).stdout.strip()
        if status != "RUNNING":
            break
        time.sleep(2)
    print("jube status: " + status)
    result = env.jube("result", out, "-i", "last").stdout
    print(result)
    return status, result_rows(result, csv_start)


def check_row_against_folder(out, row):
    """A finished row's numbers are its run folder's, recomputed here from train_stats.csv."""
    # The row's collect work package links its benchmark's (run folder names may repeat: jobs
    # that start in the same second).
    found = [os.path.realpath(p) for p in glob.glob(os.path.join(
        out, "*", "{0:06d}_collect".format(int(row["jube_wp_id"])), "work", "benchmark", row["run"]))]
    check(len(found) == 1, "run folder {0} of work package {1} not found: {2}".format(
        row["run"], row["jube_wp_id"], found))
    epochs, seconds = train_stats(found[0])
    print("{0}: train_stats.csv {1} epochs, {2!r} s; row {3}, {4}, FOM {5}".format(
        row["run"], epochs, seconds, row["epochs"], row["time_to_target_s"], row["fom_per_s"]))
    check(row["epochs"] == str(epochs), "epochs: row {0}, train_stats.csv {1}".format(
        row["epochs"], epochs))
    check(row["time_to_target_s"] == repr(seconds), "time to target: row {0}, train_stats.csv "
          "{1!r}".format(row["time_to_target_s"], seconds))
    if row["reached_target"] == "true":
        check(row["fom_per_s"] == repr(1.0 / seconds), "FOM: row {0}, 1/time {1!r}".format(
            row["fom_per_s"], 1.0 / seconds))
    record = summary(found[0])
    check(record["ranks"] == int(row["ranks"]), "ranks: row {0}, summary.json {1}".format(
        row["ranks"], record["ranks"]))
    check(record["job_id"] == row["slurm_job"], "the run's SLURM_JOB_ID {0} is not the row's "
          "job {1}".format(record["job_id"], row["slurm_job"]))
    return found[0]


def test_smoke(env):
    out = os.path.join(env.tmp, "out")
    status, rows = run_campaign(env, os.path.join(env.args.repo, "jube", "smoke.yaml"), out)
    check(status == "FINISHED", "jube status {0}, expected FINISHED".format(status))
    check(sorted(r["local_batch_size"] for r in rows) == ["2", "4"], "rows: {0}".format(rows))
    for row in rows:
        check(row["status"] == "ok" and row["system"] == "local-slurm",
              "row of local batch {0}: {1}".format(row["local_batch_size"], row["status"]))
        check_row_against_folder(out, row)
    # The chain: all four were submitted by `jube run` (run_campaign), and each job started only
    # after the one it depends on ended (afterok).
    def job_of(step):
        works = glob.glob(os.path.join(out, "000000", "*_" + step, "work"))
        return [slurm_job(env, read(os.path.join(w, "job_id")).strip()) for w in works]
    fractals, dataset = job_of("fractals")[0], job_of("dataset")[0]
    for parent, child in [(fractals, dataset)] + [(dataset, b) for b in job_of("benchmark")]:
        print("job {0} ({1}) ended {2}; job {3} ({4}) started {5}, dependency {6}".format(
            parent["JobId"], parent["JobName"], parent["EndTime"], child["JobId"],
            child["JobName"], child["StartTime"], child.get("Dependency")))
        check(child["StartTime"] >= parent["EndTime"] and child["JobState"] == "COMPLETED" and
              child["ExitCode"] == "0:0", "job {0} did not run after job {1}".format(
                  child["JobId"], parent["JobId"]))
    print("PASS: 2 rows, each equal to its run folder")


def test_strong(env):
    jube_dir = env.copy_jube("strong")
    campaign = os.path.join(jube_dir, "strong-scaling.yaml")
    edit(campaign, '$scaffold_repo/configs/benchmark_default.yml', '$scaffold_repo/configs/quickstart.yml')
    edit(campaign, '{name: problem_scale, type: int, _: "7"}', '{name: problem_scale, type: int, _: "4"}')
    edit(campaign, '{name: ranks, type: int, _: "4,8,16"}', '{name: ranks, type: int, _: "1,2"}')
    edit(campaign, '{name: fixed_global_batch, type: int, _: "16"}',
         '{name: fixed_global_batch, type: int, _: "4"}')
    out = os.path.join(env.tmp, "out")
    status, rows = run_campaign(env, campaign, out)
    check(status == "FINISHED", "jube status {0}, expected FINISHED".format(status))
    check([(r["ranks"], r["local_batch_size"], r["global_batch"]) for r in rows] ==
          [("1", "4", "4"), ("2", "2", "4")],
          "rows (ranks, local batch, global batch): {0}".format(
              [(r["ranks"], r["local_batch_size"], r["global_batch"]) for r in rows]))
    for row in rows:
        check(row["status"] == "ok" or row["status"].startswith("ok; target Dice not reached"),
              "row of {0} ranks: {1}".format(row["ranks"], row["status"]))
        run_dir = check_row_against_folder(out, row)
        system = json.loads(read(os.path.join(run_dir, "system.json")))
        check(system["world_size"] == int(row["ranks"]),
              "system.json world_size {0} for {1} ranks".format(system["world_size"], row["ranks"]))
        script = read(os.path.join(os.path.dirname(run_dir), "job.sh"))
        check("srun --mpi=pmix --ntasks={0} ".format(row["ranks"]) in script,
              "the job script does not launch {0} ranks with srun --mpi=pmix".format(row["ranks"]))
    print("PASS: 1 and 2 ranks at global batch 4, each row equal to its run folder")


BROKEN_SYSTEM = """
# Added by tests/slurm/check_slurm.py: the data folder cannot be created (below a file).
broken-slurm:
  scheduler: slurm
  devices_per_node: 2
  cpus_per_rank: 1
  launcher: "srun --mpi=pmix --ntasks={{ranks}} --cpus-per-task={{cpus_per_rank}}"
  partition: scaffold
  data_dir: {data_dir}
"""


def test_failure(env):
    jube_dir = env.copy_jube("failure")
    blocker = os.path.join(env.tmp, "a-file")
    open(blocker, "w").close()
    with open(os.path.join(jube_dir, "systems.yaml"), "a") as handle:
        handle.write(BROKEN_SYSTEM.format(data_dir=os.path.join(blocker, "data")))
    out = os.path.join(env.tmp, "out")
    status, rows = run_campaign(env, os.path.join(jube_dir, "smoke.yaml"), out,
                                tag="broken-slurm")
    check(status == "ERROR", "jube status {0}, expected ERROR".format(status))
    check(len(rows) == 2, "expected a row per benchmark, got {0}".format(len(rows)))
    for row in rows:
        check(row["status"].startswith("failed at fractals (exit 1): ") and
              "cannot create directory" in row["status"] and
              row["status"].endswith("; benchmark not run"),
              "the row does not give the fractals job's reason: '{0}'".format(row["status"]))
        check(row["time_to_target_s"] == "", "a failed row shows a time")
    # Slurm cancelled the dependants: they never ran.
    for step in ("dataset", "benchmark"):
        for work in glob.glob(os.path.join(out, "000000", "*_" + step, "work")):
            # A step submitted after its parent had already failed is never given to Slurm
            # (jube/lib/submit): no job id, and its status says it did not run.
            if not os.path.exists(os.path.join(work, "job_id")):
                check(os.path.exists(os.path.join(work, "error")) and
                      read(os.path.join(work, "status.txt")).strip().endswith("not run"),
                      "{0} has no Slurm job and no 'not run' status".format(work))
                continue
            job_id = read(os.path.join(work, "job_id")).strip()
            # slurmctld cancels a job whose dependency can never be met on a later scheduling
            # pass than the one that saw its parent fail: give it up to 60 s.
            deadline = time.time() + 60
            job = slurm_job(env, job_id)
            while job.get("JobState") == "PENDING" and time.time() < deadline:
                time.sleep(1)
                job = slurm_job(env, job_id)
            check(job.get("JobState") == "CANCELLED" and not os.path.exists(
                os.path.join(work, "job.out")),
                  "{0} job {1} is {2}, expected CANCELLED without running".format(
                      step, job.get("JobId"), job.get("JobState")))
    print("PASS: the dependants were cancelled and every row names the fractals failure")


TIME_LIMIT = ('  time_limit: "00:10:00"\n  prep_time_limit: "00:05:00"\n  signal: "USR2@120"\n',
              '  time_limit: "00:01:00"\n  prep_time_limit: "00:05:00"\n  signal: "USR2@10"\n')


def test_time_limit(env):
    """Slurm sends the signal 10 s (+ up to 30 s: its timer's period) before the 1-minute limit,
    so 20-50 s into a training that would take many minutes (learning rate 1e-7, target 1)."""
    jube_dir = env.copy_jube("time-limit")
    edit(os.path.join(jube_dir, "systems.yaml"), *TIME_LIMIT)
    campaign = os.path.join(jube_dir, "smoke.yaml")
    edit(campaign, '{name: local_batch_size, type: int, _: "2,4"}',
         '{name: local_batch_size, type: int, _: "2"}')
    edit(campaign, '{name: epochs, type: int, _: "-1"}', '{name: epochs, type: int, _: "5000"}')
    edit(campaign, '{name: benchmark_flags, _: ""}',
         '{name: benchmark_flags, _: "--target-dice 1 --starting-learning-rate 1e-7 '
         '--min-learning-rate 1e-8 --checkpoint-interval 50"}')
    out = os.path.join(env.tmp, "out")
    status, rows = run_campaign(env, campaign, out)
    check(status == "FINISHED", "jube status {0}, expected FINISHED".format(status))
    check(len(rows) == 1, "expected one row, got {0}".format(len(rows)))
    row = rows[0]
    check(row["status"].startswith("stopped by the time limit after {0} epochs".format(
        row["epochs"])) and "restart.sh" in row["status"],
          "the row does not say the time limit stopped it: '{0}'".format(row["status"]))
    run_dir = check_row_against_folder(out, row)
    work = os.path.dirname(run_dir)
    script = read(os.path.join(work, "job.sh"))
    check("#SBATCH --time=00:01:00" in script and "#SBATCH --signal=USR2@10" in script,
          "job.sh lacks the time limit or the signal:\n" + script)
    record = summary(run_dir)
    epochs, _ = train_stats(run_dir)
    check(record["status"] == "time_limit" and record["epochs"] == epochs and epochs >= 1,
          "summary.json: status {0}, epochs {1}; train_stats.csv {2} epochs".format(
              record["status"], record["epochs"], epochs))
    check("stopped by SIGUSR2 (12)" in read(os.path.join(work, "job.err")),
          "job.err does not say SIGUSR2 stopped the run")
    job = slurm_job(env, row["slurm_job"])
    print("Slurm: job {0} {1} ExitCode={2} RunTime={3}".format(
        job.get("JobId"), job.get("JobState"), job.get("ExitCode"), job.get("RunTime")))
    check(job.get("ExitCode") == "3:0", "the job's exit code is {0}, expected 3:0".format(
        job.get("ExitCode")))
    jobcomp = os.path.join(env.cluster, "log", "jobcomp.txt")
    check(re.search(r"JobId={0} .*ExitCode=3:0".format(row["slurm_job"]), read(jobcomp)),
          "the job completion log has no ExitCode=3:0 for job {0}".format(row["slurm_job"]))
    report = env.run([env.args.scaffold, "report", run_dir])
    check(report.returncode == 0 and "time_limit" in report.stdout and "restart.sh" in report.stdout,
          "scaffold report does not show the time limit:\n" + report.stdout)

    # restart.sh resumes it, here as a one-task job step: two more epochs, then the epoch cap.
    resumed = env.run(["srun", "--ntasks=1", "--time=00:05:00", "bash",
                       os.path.join(run_dir, "restart.sh"), "--epochs", str(epochs + 2)])
    check(resumed.returncode == 0, "restart.sh exited with {0}".format(resumed.returncode))
    check("resumed from" in resumed.stdout + resumed.stderr, "restart.sh did not resume")
    after, _ = train_stats(run_dir)
    record = summary(run_dir)
    check(after == epochs + 2 and record["status"] == "not_reached",
          "after restart.sh: {0} epochs (expected {1}), status {2}".format(
              after, epochs + 2, record["status"]))
    print("PASS: stopped after {0} epochs by the time limit's SIGUSR2, exit 3, resumed to {1}".format(
        epochs, after))


LLM_SYSTEM = """
# Added by tests/slurm/check_slurm.py: the test cluster's node (at least 64 CPUs, cluster.sh) as
# {devices} devices, one rank and one CPU each, so the size's TP x PP layout is DP 1 on one node.
llm-slurm-{devices}:
  scheduler: slurm
  devices_per_node: {devices}
  cpus_per_rank: 1
  launcher: "srun --mpi=pmix --ntasks={{ranks}} --ntasks-per-node={{tasks_per_node}} --cpus-per-task={{cpus_per_rank}}"
  partition: scaffold
  time_limit: "00:10:00"
  signal: "USR2@120"
  device: cpu
"""
# The presets' layouts with a model and a run small enough for CPUs: 8 layers (8 / P per stage),
# 8 heads (8 / TP per tensor-parallel rank), 4 iterations of global batch DP 1 x micro-batch 2 x
# accumulation 4 = 8 sequences of 32 tokens (32 of the 256 synthetic samples), one validation
# batch of 8 (of 32).
LLM_SMALL_FLAGS = ("--num-layers 8 --hidden-size 64 --num-attention-heads 8 --ffn-hidden-size 256 "
                   "--seq-length 32 --vocab-size 500 --train-iters 4 --log-interval 2 "
                   "--eval-interval 4 --eval-iters 1 --timing-warmup-iters 2 "
                   "--synthetic-train-samples 256 --synthetic-valid-samples 32")
# size -> (TP, PP): CARAML's layouts; DP 1 on TP x PP devices of one node.
LLM_SIZES = {"13B": (2, 2), "175B": (8, 8)}


def test_llm_layouts(env):
    """The 13B and 175B sizes' TP x PP layouts through real sbatch and srun, each as one job of
    TP x PP ranks on one node (4 and 64 ranks)."""
    jube_dir = env.copy_jube("llm-layouts")
    # 64 ranks share the machine's cores: a rank waiting in MPI yields its core instead of
    # spinning (sbatch passes the environment on to the job's tasks).
    env.environ["OMPI_MCA_mpi_yield_when_idle"] = "1"
    with open(os.path.join(jube_dir, "systems.yaml"), "a") as handle:
        for tp, pp in LLM_SIZES.values():
            handle.write(LLM_SYSTEM.format(devices=tp * pp))
    campaign = os.path.join(jube_dir, "llm_training.yaml")
    for size in LLM_SIZES:
        nodes = {"13B": "44", "175B": "16"}[size]
        edit(campaign, '{{name: size_nodes, type: int, tag: {0}, _: "{1}"}}'.format(size, nodes),
             '{{name: size_nodes, type: int, tag: {0}, _: "1"}}'.format(size))
    edit(campaign, '{name: accumulation, tag: 13B|175B, _: "64"}',
         '{name: accumulation, tag: 13B|175B, _: "4"}')
    edit(campaign, '{name: train_flags, _: ""}',
         '{{name: train_flags, _: "{0}"}}'.format(LLM_SMALL_FLAGS))
    # A run with its own dimensions records model_size "custom", not the preset's name, so the
    # copy's collect is asked for that; it still checks ranks, TP, PP, DP and the batch.
    edit(campaign, '--precision $precision --model-size $size',
         '--precision $precision --model-size custom')
    for size, (tp, pp) in LLM_SIZES.items():
        ranks = tp * pp
        system = "llm-slurm-{0}".format(ranks)
        layout = {"Devices": str(ranks), "Nodes": "1", "TensorParallel": str(tp),
                  "PipelineParallel": str(pp), "DataParallel": "1", "GlobalBatchSize": "8",
                  "ModelSize": size, "Iterations": "4", "JubeSystem": system}
        out = os.path.join(env.tmp, "out-" + size)
        status, rows = run_campaign(env, campaign, out, tag=[system, size], timeout_s=270,
                                    csv_start="JobID,System,")
        check(status == "FINISHED", "{0}: jube status {1}, expected FINISHED".format(size, status))
        check(len(rows) == 1, "{0}: expected one row, got {1}".format(size, len(rows)))
        row = rows[0]
        got = {key: row.get(key) for key in layout}
        check(got == layout and row.get("Status") == "ok",
              "{0}: the row is {1}, status '{2}'; expected {3}, status ok".format(
                  size, got, row.get("Status"), layout))

        found = glob.glob(os.path.join(out, "*", "*_train", "work", row["Run"]))
        check(len(found) == 1, "run folder {0} not found once: {1}".format(row["Run"], found))
        run_dir = found[0]
        record = summary(run_dir)
        params = record["params"]
        print("{0}: status {1}, ranks {2}, job {3}, TP {4} x PP {5} x DP {6}".format(
            row["Run"], record["status"], record["ranks"], record["job_id"],
            params.get("tensor_parallel"), params.get("pipeline_parallel"),
            params.get("data_parallel")))
        check(record["status"] == "completed" and record["ranks"] == ranks and
              (params.get("tensor_parallel"), params.get("pipeline_parallel"),
               params.get("data_parallel"), params.get("model_size"), params.get("num_layers"),
               params.get("hidden_size")) == (str(tp), str(pp), "1", "custom", "8", "64"),
              "{0} summary.json: status {1}, ranks {2}, params {3}".format(
                  size, record["status"], record["ranks"], params))
        check(record["job_id"] == row["SlurmJob"], "the run's SLURM_JOB_ID {0} is not the row's "
              "job {1}".format(record["job_id"], row["SlurmJob"]))
        script = read(os.path.join(os.path.dirname(run_dir), "job.sh"))
        check("srun --mpi=pmix --ntasks={0} ".format(ranks) in script and
              "--tensor-model-parallel-size {0} --pipeline-model-parallel-size {1} ".format(
                  tp, pp) in script,
              "the job script does not launch {0} ranks of TP {1} x PP {2} with srun "
              "--mpi=pmix:\n{3}".format(ranks, tp, pp, script))
        job = slurm_job(env, row["SlurmJob"])
        check(job.get("JobState") == "COMPLETED" and job.get("ExitCode") == "0:0" and
              job.get("NumTasks") == str(ranks),
              "Slurm: job {0} {1} ExitCode={2} NumTasks={3}".format(
                  job.get("JobId"), job.get("JobState"), job.get("ExitCode"),
                  job.get("NumTasks")))
        print("PASS: the {0} layout TP {1} x PP {2} x DP 1 ran as one {3}-rank Slurm job ({4}), "
              "its row and summary.json say so".format(size, tp, pp, ranks, row["SlurmJob"]))


# ---------------------------------------------------------------------------- launchers

def one_line_error(proc, text):
    lines = [l for l in proc.stderr.splitlines() if l.startswith("scaffold: ")]
    check(len(lines) == 1 and text in lines[0],
          "expected one line 'scaffold: ...{0}...', got:\n{1}".format(text, proc.stderr))
    check("MPI_Init" not in proc.stderr.replace(lines[0], ""),
          "Open MPI's own abort text is still there:\n" + proc.stderr)


def test_launcher(env):
    config = env.tiny_config("pmix", "epochs: 1\n")
    proc = env.run(["srun", "--mpi=pmix", "--ntasks=2", env.args.scaffold, "benchmark", "-c",
                    config, "--threads", "1"])
    check(proc.returncode == 0, "srun --mpi=pmix -n 2 benchmark exited {0}".format(proc.returncode))
    runs = run_folders(os.path.join(env.tmp, "pmix", "runs"))
    check(len(runs) == 1, "expected one run folder from 2 ranks, got {0}".format(runs))
    world = json.loads(read(os.path.join(runs[0], "system.json")))["world_size"]
    check(world == 2, "system.json world_size {0}, expected 2".format(world))

    config = env.tiny_config("none", "epochs: 1\n")
    proc = env.run(["srun", "--mpi=none", "--ntasks=2", env.args.scaffold, "benchmark", "-c",
                    config, "--threads", "1"], quiet=True)
    print(proc.stderr)
    check(proc.returncode == 1, "srun --mpi=none -n 2 exited {0}, expected 1".format(proc.returncode))
    one_line_error(proc, "srun started 2 tasks without an MPI plugin (srun --mpi=none)")
    check("srun --mpi=pmix" in proc.stderr, "the error does not say what to type instead")
    check(not os.path.exists(os.path.join(env.tmp, "none", "runs")),
          "the refused launch wrote a run folder")

    fixture = os.path.join(env.args.repo, "tests", "fixtures", "runs", "benchmark_20250312-101500")
    proc = env.run(["srun", "--mpi=none", "--ntasks=1", env.args.scaffold, "report", fixture])
    check(proc.returncode == 0 and "benchmark_20250312-101500" in proc.stdout,
          "srun --mpi=none -n 1 (a world of one) failed: {0}".format(proc.stderr))
    print("PASS: --mpi=pmix runs 2 ranks; --mpi=none -n 2 is one line; --mpi=none -n 1 runs")


def test_launcher_mpirun(env):
    """The checks where no cluster is needed: mpirun's world agrees; WORLD_SIZE does not."""
    fixture = os.path.join(env.args.repo, "tests", "fixtures", "runs", "benchmark_20250312-101500")
    proc = env.run(["mpirun", "-n", "2", "--oversubscribe", env.args.scaffold, "report", fixture])
    check(proc.returncode == 0 and proc.stdout.count("benchmark_20250312-101500") == 1,
          "mpirun -n 2 report: exit {0}\n{1}".format(proc.returncode, proc.stdout))
    env.environ.update(WORLD_SIZE="2", RANK="0")
    proc = env.run([env.args.scaffold, "report", fixture], quiet=True)
    check(proc.returncode == 1 and proc.stdout == "", "WORLD_SIZE=2 singleton: exit {0}".format(
        proc.returncode))
    one_line_error(proc, "the launcher started 2 processes (WORLD_SIZE=2) but MPI sees a world of 1")
    env.environ.update(RANK="1")
    proc = env.run([env.args.scaffold, "report", fixture], quiet=True)
    check(proc.returncode == 1 and proc.stderr == "",
          "the launcher's rank 1 should fail quietly, said: " + proc.stderr)
    print("PASS: mpirun agrees with MPI; N singletons are one line from rank 0")


def test_power(env):
    config = env.tiny_config("power", "epochs: 1\n")
    hwmon = os.path.join(env.args.repo, "tests", "fixtures", "energy", "gh200", "hwmon")
    out = os.path.join(env.tmp, "power-out")
    proc = env.run(["srun", "--mpi=pmix", "--ntasks=2", env.args.scaffold, "power", "--methods",
                    "hwmon", "--hwmon-root", hwmon, "--out", out, "--", env.args.scaffold,
                    "benchmark", "-c", config, "--threads", "1"])
    check(proc.returncode == 0, "srun -n 2 scaffold power -- benchmark exited {0}".format(
        proc.returncode))
    runs = run_folders(os.path.join(env.tmp, "power", "runs"))
    check(len(runs) == 1, "the wrapped benchmark was not one job: run folders {0}".format(runs))
    world = json.loads(read(os.path.join(runs[0], "system.json")))["world_size"]
    check(world == 2, "the wrapped benchmark's world_size is {0}, expected 2".format(world))
    nodes = sorted(os.listdir(out))
    check(len(nodes) == 1, "expected one node folder in {0}, got {1}".format(out, nodes))
    files = sorted(os.listdir(os.path.join(out, nodes[0])))
    check(files == ["energy.csv", "power.csv"], "{0}/{1}: {2}".format(out, nodes[0], files))
    samples = read(os.path.join(out, nodes[0], "power.csv")).count("\n") - 1
    check(samples >= 2, "power.csv has {0} samples".format(samples))
    check(proc.stdout.count("scaffold power: ") == 1,
          "expected one sampler's summary, got {0}".format(proc.stdout.count("scaffold power: ")))

    proc = env.run(["srun", "--ntasks=2", env.args.scaffold, "power", "--out",
                    os.path.join(env.tmp, "codes"), "--", "sh", "-c", "exit $((5 + SLURM_PROCID))"],
                   quiet=True)
    check(proc.returncode == 6, "srun returned {0}, expected task 1's 6".format(proc.returncode))
    proc = env.run(["srun", "--ntasks=1", env.args.scaffold, "power", "--out",
                    os.path.join(env.tmp, "one"), "--", "sh", "-c", "exit 5"], quiet=True)
    check(proc.returncode == 5 and os.path.exists(os.path.join(env.tmp, "one", "power.csv")),
          "one task: exit {0}, files {1}".format(proc.returncode,
                                                 os.listdir(os.path.join(env.tmp, "one"))))
    print("PASS: one sampler on node {0} ({1} samples), the wrapped benchmark had 2 ranks, "
          "exit statuses returned".format(nodes[0], samples))


def test_container(env):
    image = container_image(env.args.container_state)
    env.environ["SCAFFOLD_IMAGE"] = image
    out = os.path.join(env.tmp, "out")
    status, rows = run_campaign(env, os.path.join(env.args.repo, "jube", "smoke.yaml"), out,
                                tag=["local-slurm", "container"], timeout_s=400)
    check(status == "FINISHED", "jube status {0}, expected FINISHED".format(status))
    check(sorted(r["local_batch_size"] for r in rows) == ["2", "4"], "rows: {0}".format(rows))
    lib = os.path.join(env.args.repo, "jube", "lib", "podman-options")
    wrapper = ('podman $("{0}" global) run $("{0}" run) --rm --network=host --ipc=host '
               '-v "{1}:{1}" -v "{2}:{2}" -e "SLURM_JOB_*" -w "$PWD" "{3}" scaffold '.format(
                   lib, env.args.repo, out, image))
    for step in ("fractals", "dataset", "benchmark"):
        for script in glob.glob(os.path.join(out, "000000", "*_" + step, "work", "job.sh")):
            text = read(script)
            check("srun --mpi=pmix --ntasks=1 --ntasks-per-node=1 --cpus-per-task=1 " + wrapper +
                  ("generate_" if step != "benchmark" else "") + step in text,
                  "{0} does not run scaffold in the image:\n{1}".format(script, text))
    for row in rows:
        check(row["status"] == "ok" and row["system"] == "local-slurm" and
              row["tags"] == "container local-slurm",
              "row of local batch {0}: {1}, tags {2}".format(row["local_batch_size"],
                                                             row["status"], row["tags"]))
        run_dir = check_row_against_folder(out, row)
        check(run_dir.startswith(os.path.realpath(out)), run_dir + " is not on the host's outpath")
        restart = read(os.path.join(run_dir, "restart.sh"))
        check(INSIDE_IMAGE in restart, "{0}/restart.sh does not name the image's binary "
              "({1}):\n{2}".format(run_dir, INSIDE_IMAGE, restart))
    print("PASS: 2 rows from jobs run in {0}, each equal to its run folder on the host".format(
        image))


# The binary a run inside the image records in its restart.sh (/proc/self/exe inside).
INSIDE_IMAGE = "/usr/local/bin/scaffold"


def container_image(state):
    """The image the fixture container_image built (tests/container), or Skip with why not."""
    if not state:
        raise Skip("no --container-state given")
    try:
        text = read(state)
    except OSError:
        raise Skip("no container image: {0} is missing (the ctest fixture container_image "
                   "builds one)".format(state))
    for line in text.splitlines():
        if line.startswith("unavailable: "):
            raise Skip("no container image: " + line[len("unavailable: "):])
        if line.startswith("image: "):
            return line[len("image: "):]
    raise Skip("no image recorded in {0}: {1!r}".format(state, text))


TESTS = {"launcher": test_launcher, "launcher_mpirun": test_launcher_mpirun, "power": test_power,
         "smoke": test_smoke, "strong": test_strong, "failure": test_failure,
         "time_limit": test_time_limit, "llm_layouts": test_llm_layouts,
         "container": test_container}
NO_CLUSTER = ("launcher_mpirun",)


def cluster_folder(state):
    """The running cluster's folder, or Skip with the reason the fixture wrote."""
    try:
        text = read(state)
    except OSError:
        raise Skip("no Slurm test cluster: {0} is missing (the ctest fixture slurm_cluster "
                   "starts one: tests/slurm/cluster.sh start {0})".format(state))
    for line in text.splitlines():
        if line.startswith("unavailable: "):
            raise Skip("no Slurm test cluster: " + line[len("unavailable: "):])
        if line.startswith("dir: "):
            folder = line[len("dir: "):]
            if os.path.exists(os.path.join(folder, "slurm.conf")):
                return folder
    raise Skip("no Slurm test cluster recorded in {0}: {1!r}".format(state, text))


def main():
    parser = argparse.ArgumentParser(description="tests on a real one-node Slurm cluster")
    parser.add_argument("test", choices=sorted(TESTS))
    parser.add_argument("--scaffold", required=True)
    parser.add_argument("--jube", required=True)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--state", required=True, help="the cluster's state file (cluster.sh)")
    parser.add_argument("--container-state", default="",
                        help="the container image's state file (tests/container)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    args.scaffold = os.path.abspath(args.scaffold)
    try:
        cluster = None if args.test in NO_CLUSTER else cluster_folder(args.state)
    except Skip as skip:
        print("SKIP ({0}): {1}".format(args.test, skip))
        return SKIP
    return run_in_temp(args.test, "scaffold-slurm", lambda tmp: TESTS[args.test](Env(args, tmp, cluster)),
                       args.keep, quiet_pass=True)


if __name__ == "__main__":
    sys.exit(main())
