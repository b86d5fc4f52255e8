#!/usr/bin/env python3
"""Tests of the FNO campaign jube/fno.yaml, run by ctest (tests/jube/CMakeLists.txt); the
helpers are check_campaigns.py's.

  fno        --tag local quickstart runs CARAML's sharding sweep tp_size 1, 2 (2 epochs each):
             two rows, GridShards 1 and 2 on 1 and 2 devices, DataParallel 1, whose cells are
             `scaffold report --format csv` of each run folder and whose Timesteps/second is
             Timesteps / TotalComputeTime evaluated here from summary.json (CARAML's formula);
             both runs use the one dataset the first generated; collect refuses a run of
             another sharding and a report.csv that disagrees with summary.json.
  fno_slurm  on a GPU system added as one entry, the dry run renders the RBC2D sweep tp_size
             1, 2, 4, 8, 16, each job script equal line by line to the one written out by hand
             below; tag RBC3D renders the same sweep with configs/fno_rbc3d.yml, and tag all
             both problems' (10 scripts); no sbatch call.

Usage: check_fno_campaign.py TEST --scaffold BIN --jube JUBE --repo DIR [--keep]
"""

import argparse
import csv
import glob
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_campaigns import (run_in_temp, FAKE_SBATCH, Env, Failure, check, compare_lines, copy_step,  # noqa: E402
                             counter, edit, expect_refused, result_tables, run_collect)

# `scaffold report --format csv` of an fno run folder (src/workloads/fno/result_columns.cpp),
# the cells the campaign's CSV table shows from it.
FNO_REPORT_CELLS = [
    "JobID", "System", "Version", "Queue", "Problem", "Config", "ModelParam (Million)",
    "ModelSize (MB)", "Grid", "GlobalBatchSize", "LocalBatchSize", "Runtime (min)", "Epochs",
    "MixedPrecision", "CompileMode", "TrainTime/Epoch (min)", "TotalEpochTime (s)",
    "TotalTrainTime (s)", "TotalComputeTime (s)", "TotalMonitorTime (s)",
    "TotalCheckpointTime (s)", "Timesteps", "Timesteps/second", "TrainTimesteps",
    "TrainTimesteps/second", "PeakFwdMem (MB)", "PersistentMem (MB)", "ActivationMem (MB)",
    "TFLOPs", "Energy/GPU (Wh)", "TotalEnergy (Wh)", "ValRelL2", "Timesteps/Wh"]
FNO_CSV_COLUMNS = [
    "JobID", "System", "Version", "Queue", "Nodes", "TotalDevices", "DataParallel", "GridShards",
    "Problem", "Config", "ModelParam (Million)", "ModelSize (MB)", "Grid", "GlobalBatchSize",
    "LocalBatchSize", "Runtime (min)", "Epochs", "MixedPrecision", "CompileMode",
    "TrainTime/Epoch (min)", "TotalEpochTime (s)", "TotalTrainTime (s)", "TotalComputeTime (s)",
    "TotalMonitorTime (s)", "TotalCheckpointTime (s)", "Timesteps", "Timesteps/second",
    "TrainTimesteps", "TrainTimesteps/second", "PeakFwdMem (MB)", "PersistentMem (MB)",
    "ActivationMem (MB)", "TFLOPs", "Energy/GPU (Wh)", "TotalEnergy (Wh)", "ValRelL2",
    "Timesteps/Wh", "Status", "Campaign", "JubeSystem", "Tags", "JubeWP", "SlurmJob", "Run",
    "Host", "GitCommit"]


def fno_tables(output):
    pretty, rows = result_tables(output, "JobID,System,")
    check(rows and list(rows[0].keys()) == FNO_CSV_COLUMNS,
          "CSV columns: {0}\nexpected {1}".format(list(rows[0].keys()) if rows else None,
                                                 FNO_CSV_COLUMNS))
    return pretty, rows


def test_fno(env):
    """The quickstart sweep here: tp_size 1 and 2, each row its run folder's record."""
    jube_dir = env.copy_jube("fno")
    campaign = os.path.join(jube_dir, "fno.yaml")
    env.environ["SCAFFOLD_BIN"] = os.path.abspath(env.args.scaffold)  # the copy has no build/
    edit(campaign, '{name: train_flags, _: ""}', '{name: train_flags, _: "--epochs 2 --threads 1"}')
    out = os.path.join(env.tmp, "out")
    env.jube("run", "-e", "--hide-animation", campaign, "--tag", "local", "quickstart", "-o", out)
    result = env.jube("result", out, "-i", "last").stdout
    print(result)
    pretty, rows = fno_tables(result)
    check(len(rows) == 2 and len(pretty) == 2, "expected two rows, got {0}".format(len(rows)))
    check([r["GridShards"] for r in rows] == ["1", "2"] and
          [r["TotalDevices"] for r in rows] == ["1", "2"] and
          [r["DataParallel"] for r in rows] == ["1", "1"] and
          [r["Nodes"] for r in rows] == ["1", "1"],
          "the sweep's rows: {0}".format([(r["GridShards"], r["TotalDevices"]) for r in rows]))
    datasets = set()
    for row in rows:
        check(row["Status"] == "ok", "status: {0}".format(row["Status"]))
        found = glob.glob(os.path.join(out, "*", "*_train", "work", row["Run"]))
        check(len(found) == 1, "run folder {0} not found once: {1}".format(row["Run"], found))
        run_dir = found[0]
        with open(os.path.join(run_dir, "summary.json")) as handle:
            summary = json.load(handle)
        params = summary["params"]
        check(summary["ranks"] == int(row["GridShards"]) and params["tp_size"] == row["GridShards"]
              and params["problem"] == "rbc2d" and summary["epochs"] == 2 and
              summary["status"] == "completed",
              "summary.json is not the run asked for: {0} {1}".format(summary["ranks"], params))
        datasets.add(params["dataset"])
        # CARAML's Timesteps/s = (training + validation) timesteps / TotalComputeTime.
        per_s = counter(summary, "timesteps") / counter(summary, "total_compute_time_s")
        check(abs(counter(summary, "timesteps_per_s") - per_s) <= 1e-9 * per_s,
              "timesteps_per_s {0}, Timesteps / TotalComputeTime {1}".format(
                  counter(summary, "timesteps_per_s"), per_s))
        check(row["Timesteps/second"] == "{0:.2f}".format(per_s),
              "Timesteps/second {0!r}, expected {1:.2f}".format(row["Timesteps/second"], per_s))
        # 2 epochs x (396 + 99) one-step examples.
        check(row["Timesteps"] == "990", "Timesteps {0!r}".format(row["Timesteps"]))
        proc = subprocess.run([env.args.scaffold, "report", "--format", "csv", run_dir],
                              stdout=subprocess.PIPE, universal_newlines=True)
        report = list(csv.DictReader(io.StringIO(proc.stdout)))
        check(proc.returncode == 0 and len(report) == 1, "scaffold report: " + proc.stdout)
        check([row[c] for c in FNO_REPORT_CELLS] == [report[0][c] for c in FNO_REPORT_CELLS],
              "the row is not scaffold report's:\n{0}\n{1}".format(
                  [row[c] for c in FNO_REPORT_CELLS], [report[0][c] for c in FNO_REPORT_CELLS]))
    check(len(datasets) == 1, "the runs used different datasets: {0}".format(datasets))
    check(len(glob.glob(os.path.join(out, "data", "fno", "fno_rbc2d", "*"))) >= 1,
          "no dataset in the campaign's data folder")

    # collect refuses a run that is not the one asked for, and a report.csv that disagrees.
    run_dir = glob.glob(os.path.join(out, "*", "*_train", "work", rows[1]["Run"]))[0]
    step = os.path.dirname(run_dir)
    argv = ["--ranks", 2, "--nodes", 1, "--tasks-per-node", 2, "--tp-size", 2,
            "--data-parallel", 1, "--problem", "rbc2d"]
    code, result, stderr = run_collect(env, "fno", step, argv)
    check(code == 0 and result["status"] == "ok", "collect again: {0} {1} {2}".format(
        code, result, stderr))
    changed = list(argv)
    changed[changed.index("--tp-size") + 1] = 1
    expect_refused(env, "fno", step, changed, "tp_size=2 (asked 1)", "a run of another sharding")
    copy = copy_step(env, step)
    with open(os.path.join(copy, "report.csv")) as handle:
        text = handle.read()
    header = next(csv.reader([text.splitlines()[0]]))
    cells = text.splitlines()[1].split(",")
    at = header.index("Timesteps/second")
    cells[at] = "{0:.2f}".format(float(cells[at]) + 1)
    with open(os.path.join(copy, "report.csv"), "w") as handle:
        handle.write(text.splitlines()[0] + "\n" + ",".join(cells) + "\n")
    expect_refused(env, "fno", copy, argv, "disagree: Timesteps/second",
                   "a report.csv whose Timesteps/second is not summary.json's")


GPU_TEST_SYSTEM = """
# Added by tests/jube/check_fno_campaign.py: 4 GPUs per node, a 45-minute limit.
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
  device: cuda
  data_dir: /scratch/fno
  scaffold: /opt/scaffold/bin/scaffold
"""

# The train job script of testgpu, written out by hand from the entry above, jube/job.sh.in and
# CARAML's RBC2D sweep (not produced by the code). {ranks} = tp_size; {nodes} and {per_node}:
# the ranks filling 4-GPU nodes; 16 threads and CARAML's workers 16 / 4 = 4; {wp} the work
# package, {work} its folder, {repo} the copy of the repository.
GPU_JOB_SCRIPT = """#!/bin/bash
#SBATCH --job-name=scaffold-fno-train-{wp}
#SBATCH --nodes={nodes}
#SBATCH --ntasks-per-node={per_node}
#SBATCH --cpus-per-task=16
#SBATCH --time=00:45:00
#SBATCH --partition=gpu
#SBATCH --account=proj42
#SBATCH --gres=gpu:4
#SBATCH --signal=USR2@120
#SBATCH --output={work}/job.out
#SBATCH --error={work}/job.err
# scaffold campaign 'fno', step 'train', system 'testgpu': rendered by JUBE from
# jube/job.sh.in. To repeat this step by hand: bash job.sh >job.out 2>job.err (or submit it).
cd "{work}" || exit 1
rm -f ready error finished
# A scheduler's kill (time limit, scancel) still ends the step for JUBE: status, then `error`.
trap '"{repo}/jube/lib/finish-job" train 143 "killed by SIGTERM"; exit 143' TERM
# system 'testgpu' sets no modules or environment

srun --ntasks={ranks} --ntasks-per-node={per_node} --cpus-per-task=16 /opt/scaffold/bin/scaffold fno -c {repo}/configs/{config} --tp-size {ranks} --data-dir /scratch/fno/fno --device cuda --dataloader-num-workers 4 --base-run-dir {work} --job-name fno --threads 16
"{repo}/jube/lib/report-run" $? /opt/scaffold/bin/scaffold {work}/fno_*/
"{repo}/jube/lib/finish-job" train $?
"""


def test_fno_slurm(env):
    jube_dir = env.copy_jube("fno-slurm")
    repo = os.path.dirname(jube_dir)
    campaign = os.path.join(jube_dir, "fno.yaml")
    with open(os.path.join(jube_dir, "systems.yaml"), "a") as handle:
        handle.write(GPU_TEST_SYSTEM)
    bindir = os.path.join(env.tmp, "bin")
    os.makedirs(bindir)
    log = os.path.join(env.tmp, "sbatch.log")
    with open(os.path.join(bindir, "sbatch"), "w") as handle:
        handle.write(FAKE_SBATCH.format(log=log))
    os.chmod(os.path.join(bindir, "sbatch"), 0o755)
    env.environ["PATH"] = bindir + os.pathsep + env.environ.get("PATH", "")

    configs = {"rbc2d": "fno.yml", "rbc3d": "fno_rbc3d.yml"}
    for tag, problems in (("RBC2D", ["rbc2d"]), ("RBC3D", ["rbc3d"]), ("all", ["rbc2d", "rbc3d"])):
        out = os.path.join(env.tmp, "dry-" + tag)
        env.jube("run", "-e", "--hide-animation", campaign, "--tag", "testgpu", tag, "dryrun",
                 "-o", out)
        scripts = sorted(glob.glob(os.path.join(out, "000000", "*_train", "work", "job.sh")))
        check(len(scripts) == 5 * len(problems),
              "{0}: expected {1} train job scripts (tp_size 1..16 per problem), found {2}".format(
                  tag, 5 * len(problems), len(scripts)))
        seen = []
        for path in scripts:
            work = os.path.dirname(path)
            wp = int(os.path.basename(os.path.dirname(work)).split("_")[0])
            with open(path) as handle:
                text = handle.read()
            ranks = int(text.split("--tp-size ")[1].split()[0])
            config = text.split("/configs/")[1].split()[0]
            problem = [p for p in problems if configs[p] == config]
            check(len(problem) == 1, "{0}: a job script with config {1}".format(tag, config))
            seen.append((problem[0], ranks))
            nodes, per_node = (1, ranks) if ranks <= 4 else (ranks // 4, 4)
            compare_lines(text, GPU_JOB_SCRIPT.format(wp=wp, work=work, repo=repo, ranks=ranks,
                                                      nodes=nodes, per_node=per_node,
                                                      config=config),
                          "{0} tp_size {1} job.sh".format(tag, ranks))
        expected = sorted((p, n) for p in problems for n in (1, 2, 4, 8, 16))
        check(sorted(seen) == expected, "{0} rendered {1}".format(tag, sorted(seen)))
        _, rows = fno_tables(env.jube("result", out, "-i", "last").stdout)
        check(sorted((r["Problem"], int(r["GridShards"])) for r in rows) == expected and
              all(r["Status"].startswith("dry run") for r in rows),
              "{0} dry-run rows: {1}".format(
                  tag, [(r["Problem"], r["GridShards"], r["Status"]) for r in rows]))
        print("{0} sweep: {1} job scripts as written out by hand".format(tag, len(scripts)))
    check(not os.path.exists(log), "a dry run called sbatch")


TESTS = {"fno": test_fno, "fno_slurm": test_fno_slurm}


def main():
    parser = argparse.ArgumentParser(description="JUBE FNO campaign tests")
    parser.add_argument("test", choices=sorted(TESTS))
    parser.add_argument("--scaffold", required=True)
    parser.add_argument("--jube", required=True)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    return run_in_temp(args.test, "scaffold-jube", lambda tmp: TESTS[args.test](Env(args, tmp)), args.keep)


if __name__ == "__main__":
    sys.exit(main())
