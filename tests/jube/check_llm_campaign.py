#!/usr/bin/env python3
"""Tests of the LLM-training campaign jube/llm_training.yaml, run by ctest
(tests/jube/CMakeLists.txt); the helpers are check_campaigns.py's.

  llm         --tag local tiny runs CARAML's benchmark with the CPU preset: one row, whose
              Tokens/second equals GlobalBatchSize x 128 (the tiny preset's sequence length) /
              Time/iteration(s) evaluated here from summary.json (CARAML's formula), whose size,
              layout and iteration count are what the campaign asked for, and whose cells are
              `scaffold report --format csv` of the run folder; collect refuses a run of another
              size, global batch or layout and a report.csv that disagrees with summary.json.
  llm_errors  two size tags, a layout the devices cannot hold, a time limit too short for the
              exit duration and a misspelt tag stop the run naming them; a combination scaffold
              rejects has a row with scaffold's message.
  llm_slurm   on a GPU system added as one entry, the dry run renders CARAML's 800M, 13B and 175B
              job scripts equal line by line to the ones written out by hand below (nodes, TP,
              PP, DP, global batch, precision, exit duration from the time limit, the warning
              signal); without dryrun the job goes to sbatch.

Usage: check_llm_campaign.py TEST --scaffold BIN --jube JUBE --repo DIR [--keep]
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_campaigns import (run_in_temp, FAKE_SBATCH, Env, Failure, check, compare_lines, copy_step,  # noqa: E402
                             counter, edit, expect_refused, result_tables, run_collect)

# `scaffold report --format csv` of an llm_training run folder (docs/reports.md), in order.
LLM_REPORT_COLUMNS = [
    "JobID", "System", "Version", "Queue", "JobTime", "Runtime(min)", "Model", "ModelSize",
    "Dataset", "Nodes", "Devices", "GlobalBatchSize", "PipelineParallel", "TensorParallel",
    "DataParallel", "Iterations", "Time/iteration(s)", "Tokens/second", "Avg_TFLOPs/GPU",
    "Precision", "Recompute", "SteadyTime/iteration(s)", "SteadyTokens/second",
    "SteadyTFLOPs/device", "MFU(%)", "Energy(Wh)", "Tokens/Wh", "J/token"]
# The campaign's CSV table: CARAML's 20 columns (its 19 and EnergyFile), the rest of the
# report's, then the bookkeeping.
LLM_CSV_COLUMNS = LLM_REPORT_COLUMNS[:19] + ["EnergyFile"] + LLM_REPORT_COLUMNS[19:] + [
    "Status", "Campaign", "JubeSystem", "Tags", "JubeWP", "SlurmJob", "Run", "Host", "GitCommit"]

TINY_SEQ_LENGTH = 128  # the tiny preset (configs/llm_training_quickstart.yml, model_size tiny)
TINY_ITERATIONS = 20   # the quickstart's train_iters


def llm_tables(output):
    pretty, rows = result_tables(output, "JobID,System,")
    check(rows and list(rows[0].keys()) == LLM_CSV_COLUMNS,
          "CSV columns: {0}\nexpected {1}".format(list(rows[0].keys()) if rows else None,
                                                 LLM_CSV_COLUMNS))
    return pretty, rows


def fixed(value, digits):
    return "" if value is None else "{0:.{1}f}".format(value, digits)


def test_llm(env):
    """The CPU preset on this machine: one run, its row equal to its run folder's record."""
    out = os.path.join(env.tmp, "out")
    campaign = os.path.join(env.args.repo, "jube", "llm_training.yaml")
    env.jube("run", "-e", "--hide-animation", campaign, "--tag", "local", "tiny", "-o", out)
    result = env.jube("result", out, "-i", "last").stdout
    print(result)
    pretty, rows = llm_tables(result)
    check(len(rows) == 1 and len(pretty) == 1, "expected one row, got {0}".format(len(rows)))
    row, shown = rows[0], pretty[0]
    check(row["Status"] == "ok" and shown["Status"] == "ok", "status: {0}".format(row["Status"]))
    found = glob.glob(os.path.join(out, "*", "*_train", "work", row["Run"]))
    check(len(found) == 1, "run folder {0} not found once: {1}".format(row["Run"], found))
    run_dir = found[0]
    with open(os.path.join(run_dir, "summary.json")) as handle:
        summary = json.load(handle)
    params = summary["params"]

    # What the campaign asked for: the tiny preset on 1 rank, TP 1, PP 1, DP 1, global batch 8
    # of micro-batches of 4, fp32, the quickstart's 20 iterations.
    asked = {"workload": "llm_training", "ranks": 1, "devices": 1, "nodes": 1,
             "global_batch": 8, "local_batch": 4, "precision": "fp32", "status": "completed"}
    check(all(summary[k] == v for k, v in asked.items()),
          "summary.json is not the run asked for: {0}".format({k: summary[k] for k in asked}))
    check((params["model_size"], params["tensor_parallel"], params["pipeline_parallel"],
           params["data_parallel"], params["dataset"]) == ("tiny", "1", "1", "1", "synthetic"),
          "summary.json params: {0}".format(params))
    check(counter(summary, "iterations") == TINY_ITERATIONS,
          "iterations {0}, the quickstart runs {1}".format(counter(summary, "iterations"),
                                                           TINY_ITERATIONS))

    # CARAML's Tokens/second = GlobalBatchSize x sequence length / mean time per iteration,
    # evaluated here from the record's time per iteration.
    t_iter = counter(summary, "time_per_iteration_s")
    tokens = 8 * TINY_SEQ_LENGTH / t_iter
    check(abs(counter(summary, "tokens_per_s") - tokens) <= 1e-9 * tokens,
          "tokens_per_s {0}, 8 x 128 / {1} = {2}".format(counter(summary, "tokens_per_s"), t_iter,
                                                        tokens))
    expected = {
        "Tokens/second": fixed(tokens, 2), "Time/iteration(s)": fixed(t_iter, 4),
        "Iterations": str(TINY_ITERATIONS), "GlobalBatchSize": "8", "Devices": "1",
        "Nodes": "1", "TensorParallel": "1", "PipelineParallel": "1", "DataParallel": "1",
        "ModelSize": "tiny", "Precision": "fp32", "Dataset": "synthetic",
        "Runtime(min)": fixed(summary["runtime_s"] / 60.0, 2),
        "JobID": summary["job_id"] or summary["run"],
    }
    for title, value in expected.items():
        check(row[title] == value and shown.get(title, value) == value,
              "{0}: table {1!r} (pretty {2!r}), expected {3!r}".format(
                  title, row[title], shown.get(title), value))
    if summary["energy_wh"] is None:
        check(row["Energy(Wh)"] == "" and shown["Energy(Wh)"] == "not measured" and
              row["EnergyFile"] == "" and shown["EnergyFile"] == "not measured",
              "no energy measured, but the energy cells say {0!r} / {1!r}".format(
                  row["Energy(Wh)"], row["EnergyFile"]))
    else:
        check(row["EnergyFile"] == os.path.join(os.path.realpath(run_dir), "energy_stats.csv"),
              "EnergyFile {0}".format(row["EnergyFile"]))

    # Every report column is `scaffold report --format csv` of the folder, cell for cell.
    proc = subprocess.run([env.args.scaffold, "report", "--format", "csv", run_dir],
                          stdout=subprocess.PIPE, universal_newlines=True)
    report = list(csv.reader(io.StringIO(proc.stdout)))
    check(proc.returncode == 0 and len(report) == 2 and report[0] == LLM_REPORT_COLUMNS,
          "scaffold report of {0}: {1}".format(run_dir, proc.stdout))
    check([row[c] for c in LLM_REPORT_COLUMNS] == report[1],
          "the row is not scaffold report's:\n{0}\n{1}".format(
              [row[c] for c in LLM_REPORT_COLUMNS], report[1]))
    for name in ("job.out", "job.err", "job.sh", "report.csv"):
        check(os.path.exists(os.path.join(os.path.dirname(run_dir), name)),
              "{0} missing from the train work package".format(name))
    # CARAML's analyser reads job.out (the job's stdout), where Megatron prints its lines.
    with open(os.path.join(os.path.dirname(run_dir), "job.out")) as handle:
        out = handle.read()
    with open(os.path.join(os.path.dirname(run_dir), "job.err")) as handle:
        err = handle.read()
    check(re.search(r"iteration\s+([+-]?\d+)/\s*(?:[+-]?\d+)", out) is not None and
          "elapsed time per iteration (s):" in out,
          "the job's stdout (job.out) lacks Megatron's iteration lines (CARAML's patterns read them)")
    check("elapsed time per iteration (s):" not in err,
          "Megatron's iteration lines are repeated on the job's stderr (job.err)")

    # collect refuses a run that is not the one asked for, and a report.csv that disagrees.
    step = os.path.dirname(run_dir)
    argv = ["--ranks", 1, "--nodes", 1, "--tasks-per-node", 1, "--global-batch", 8,
            "--micro-batch", 4, "--tensor-parallel", 1, "--pipeline-parallel", 1,
            "--data-parallel", 1, "--precision", "fp32", "--model-size", "tiny", "--data-path", ""]
    code, result, stderr = run_collect(env, "llm_training", step, argv)
    check(code == 0 and result["status"] == "ok" and result["tokens_per_s"] == row["Tokens/second"],
          "collect again: {0} {1} {2}".format(code, result, stderr))

    def asking(**changes):
        changed = list(argv)
        for key, value in changes.items():
            changed[changed.index("--" + key.replace("_", "-")) + 1] = value
        return changed
    expect_refused(env, "llm_training", step, asking(model_size="800M"),
                   "model_size=tiny (asked 800M)", "a run of another size")
    expect_refused(env, "llm_training", step, asking(global_batch=16),
                   "global_batch=8 (asked 16)", "a run of another global batch")
    expect_refused(env, "llm_training", step, asking(tensor_parallel=2, data_parallel=1, ranks=2),
                   "tensor_parallel=1 (asked 2)", "a run of another layout")
    expect_refused(env, "llm_training", step, asking(data_path="/data/oscar_text_document"),
                   "synthetic=True (asked False)", "a synthetic run where data was asked for")
    copy = copy_step(env, step)
    with open(os.path.join(copy, "report.csv")) as handle:
        text = handle.read()
    cells = text.splitlines()[1].split(",")
    at = LLM_REPORT_COLUMNS.index("Tokens/second")
    cells[at] = "{0:.2f}".format(float(cells[at]) + 1)
    with open(os.path.join(copy, "report.csv"), "w") as handle:
        handle.write(text.splitlines()[0] + "\n" + ",".join(cells) + "\n")
    expect_refused(env, "llm_training", copy, argv, "disagree: Tokens/second",
                   "a report.csv whose Tokens/second is not summary.json's")
    os.remove(glob.glob(os.path.join(copy, "llm_training_*", "summary.json"))[0])
    expect_refused(env, "llm_training", copy, argv, "summary.json", "a run without summary.json")


THREE_DEVICE_SYSTEM = """
# Added by tests/jube/check_llm_campaign.py: nodes of 3 GPUs, which 175B's TP 8 x PP 8 does not
# divide, and a 4-minute time limit, too short for a wall-time bound run.
tri:
  scheduler: slurm
  devices_per_node: 3
  launcher: "srun --ntasks={ranks}"
  device: cuda
short:
  scheduler: slurm
  devices_per_node: 4
  launcher: "srun --ntasks={ranks}"
  time_limit: "00:04:00"
  device: cuda
"""


def test_llm_errors(env):
    jube_dir = env.copy_jube("llm-errors")
    campaign = os.path.join(jube_dir, "llm_training.yaml")
    with open(os.path.join(jube_dir, "systems.yaml"), "a") as handle:
        handle.write(THREE_DEVICE_SYSTEM)
    cases = [
        (["local", "tiny", "800M"], "tags select several model sizes (800M, tiny)"),
        (["tri", "175B", "dryrun"], "48 devices of system 'tri' do not split into tensor-parallel 8 "
                                    "x pipeline-parallel 8 groups"),
        (["short", "dryrun"], "system 'short': time_limit 00:04:00 leaves under a minute"),
        (["local", "tiy"], "unknown tag(s) 'tiy'"),
    ]
    for k, (tags, message) in enumerate(cases):
        out = os.path.join(env.tmp, "case{0}".format(k))
        proc = env.jube("run", "-e", "--hide-animation", campaign, "--tag", *tags, "-o", out,
                        expect_ok=False)
        print(proc.stdout[-800:])
        check(proc.returncode != 0 and message in proc.stdout,
              "--tag {0}: expected a failure saying {1!r}".format(" ".join(tags), message))
        check(not glob.glob(os.path.join(out, "*", "*_train", "work", "job.sh")),
              "--tag {0} still rendered a job script".format(" ".join(tags)))

    # A global batch the micro-batches cannot fill is found before any job starts.
    edit(campaign, '{name: global_batch_size, tag: tiny, _: "8"}',
         '{name: global_batch_size, tag: tiny, _: "6"}')
    proc = env.jube("run", "-e", "--hide-animation", campaign, "--tag", "local", "tiny", "-o",
                    os.path.join(env.tmp, "gbs"), expect_ok=False)
    check(proc.returncode != 0 and "global batch 6 is not a multiple of micro-batch 4" in proc.stdout,
          "a global batch of 6 with micro-batches of 4 did not fail naming both")
    edit(campaign, '{name: global_batch_size, tag: tiny, _: "6"}',
         '{name: global_batch_size, tag: tiny, _: "8"}')

    # A combination scaffold rejects still has a row that says why.
    edit(campaign, '{name: train_flags, _: ""}', '{name: train_flags, _: "--lr -1"}')
    out = os.path.join(env.tmp, "rejected")
    env.jube("run", "--hide-animation", campaign, "--tag", "local", "tiny", "-o", out,
             expect_ok=False)
    result = env.jube("result", out, "-i", "last").stdout
    print(result)
    _, rows = llm_tables(result)
    check(len(rows) == 1 and rows[0]["Status"].startswith("failed at train (exit") and
          "lr" in rows[0]["Status"] and rows[0]["Tokens/second"] == "",
          "the rejected run's row does not say why: {0!r}".format(rows[0]["Status"] if rows else None))


GPU_TEST_SYSTEM = """
# Added by tests/jube/check_llm_campaign.py: 4 GPUs per node, a 45-minute limit.
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
  device: cuda
  modules: [GCC, OpenMPI, CUDA]
  environment:
    SCAFFOLD_SYSTEM: testgpu
  scaffold: /opt/scaffold/bin/scaffold
# CARAML's own setting: a 15-minute limit, so 10 minutes of training.
testgpu15:
  scheduler: slurm
  devices_per_node: 4
  launcher: "srun --ntasks={ranks}"
  time_limit: "00:15:00"
  device: cuda
  scaffold: /opt/scaffold/bin/scaffold
"""

# The train job script of testgpu, written out by hand from the entry above, jube/job.sh.in and
# CARAML's size table (not produced by the code). {nodes}, {ranks}: the size's nodes x 4 GPUs;
# {tp}, {pp}; {mbs}; {gbs}: 800M's fixed 512, else DP x micro-batch x 64 with DP = ranks / (TP x
# PP); {prec}: fp16, 175B bf16; 30 minutes of training (CARAML's, within 45 - 5); 16 threads and
# CARAML's workers 16 / 4 = 4; {wp} the work package, {work} its folder, {repo} the copy of the
# repository.
GPU_JOB_SCRIPT = """#!/bin/bash
#SBATCH --job-name=scaffold-llm-train-{wp}
#SBATCH --nodes={nodes}
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
# scaffold campaign 'llm', step 'train', system 'testgpu': rendered by JUBE from
# jube/job.sh.in. To repeat this step by hand: bash job.sh >job.out 2>job.err (or submit it).
cd "{work}" || exit 1
rm -f ready error finished
# A scheduler's kill (time limit, scancel) still ends the step for JUBE: status, then `error`.
trap '"{repo}/jube/lib/finish-job" train 143 "killed by SIGTERM"; exit 143' TERM
module load GCC OpenMPI CUDA
export SCAFFOLD_SYSTEM="testgpu"

SCAFFOLD_JOB_TIME=00:45:00 srun --ntasks={ranks} --ntasks-per-node=4 --cpus-per-task=16 /opt/scaffold/bin/scaffold llm_training -c {repo}/configs/llm_training.yml --model-size {size} --tensor-model-parallel-size {tp} --pipeline-model-parallel-size {pp} --micro-batch-size {mbs} --global-batch-size {gbs} --precision {prec} --exit-duration-in-mins 30 --device cuda --dataloader-num-workers 4 --base-run-dir {work} --job-name llm_training --threads 16
"{repo}/jube/lib/report-run" $? /opt/scaffold/bin/scaffold {work}/llm_training_*/
"{repo}/jube/lib/finish-job" train $?
"""

# CARAML's table (docs/campaigns.md), by hand: size -> (nodes, TP, PP, micro-batch, global
# batch, precision). 13B: 44 x 4 = 176 devices, DP 176 / 4 = 44, 44 x 2 x 64 = 5632; 175B:
# 16 x 4 = 64 devices, DP 64 / 64 = 1, 1 x 2 x 64 = 128.
CARAML_SIZES = {
    "800M": (1, 1, 1, 4, 512, "fp16", 4),
    "13B": (44, 2, 2, 2, 5632, "fp16", 44),
    "175B": (16, 8, 8, 2, 128, "bf16", 1),
}


def one_train_script(out):
    paths = glob.glob(os.path.join(out, "000000", "*_train", "work", "job.sh"))
    check(len(paths) == 1, "expected one train job script in {0}, found {1}".format(out, paths))
    work = os.path.dirname(paths[0])
    with open(paths[0]) as handle:
        text = handle.read()
    return int(os.path.basename(os.path.dirname(work)).split("_")[0]), work, text


def test_llm_slurm(env):
    jube_dir = env.copy_jube("llm-slurm")
    repo = os.path.dirname(jube_dir)
    campaign = os.path.join(jube_dir, "llm_training.yaml")
    with open(os.path.join(jube_dir, "systems.yaml"), "a") as handle:
        handle.write(GPU_TEST_SYSTEM)
    bindir = os.path.join(env.tmp, "bin")
    os.makedirs(bindir)
    log = os.path.join(env.tmp, "sbatch.log")
    with open(os.path.join(bindir, "sbatch"), "w") as handle:
        handle.write(FAKE_SBATCH.format(log=log))
    os.chmod(os.path.join(bindir, "sbatch"), 0o755)
    env.environ["PATH"] = bindir + os.pathsep + env.environ.get("PATH", "")

    for size, (nodes, tp, pp, mbs, gbs, prec, dp) in CARAML_SIZES.items():
        out = os.path.join(env.tmp, "dry-" + size)
        tags = ["testgpu", "dryrun"] + ([] if size == "800M" else [size])  # 800M: no tag
        env.jube("run", "-e", "--hide-animation", campaign, "--tag", *tags, "-o", out)
        wp, work, text = one_train_script(out)
        compare_lines(text, GPU_JOB_SCRIPT.format(wp=wp, work=work, repo=repo, nodes=nodes,
                                                  ranks=nodes * 4, size=size, tp=tp, pp=pp,
                                                  mbs=mbs, gbs=gbs, prec=prec),
                      "{0} job.sh".format(size))
        _, rows = llm_tables(env.jube("result", out, "-i", "last").stdout)
        check(len(rows) == 1, "{0}: one row expected".format(size))
        got = tuple(rows[0][c] for c in ("ModelSize", "Nodes", "Devices", "TensorParallel",
                                        "PipelineParallel", "DataParallel", "GlobalBatchSize",
                                        "Precision"))
        want = (size, str(nodes), str(nodes * 4), str(tp), str(pp), str(dp), str(gbs), prec)
        check(got == want and rows[0]["Status"].startswith("dry run"),
              "{0} dry-run row {1}, expected {2}".format(size, got, want))
        print("{0}: job script and row as CARAML's table says".format(size))
    check(not os.path.exists(log), "a dry run called sbatch")

    # CARAML's 15-minute limit: 10 minutes of training, JobTime 00:15:00.
    out = os.path.join(env.tmp, "dry-15")
    env.jube("run", "-e", "--hide-animation", campaign, "--tag", "testgpu15", "dryrun", "-o", out)
    _, _, text = one_train_script(out)
    check("--exit-duration-in-mins 10 " in text and "SCAFFOLD_JOB_TIME=00:15:00 " in text,
          "a 15-minute limit does not give 10 minutes of training:\n" + text)

    # Without dryrun the job goes to sbatch; the row shows its id.
    out = os.path.join(env.tmp, "submit")
    env.jube("run", "-e", "--hide-animation", campaign, "--tag", "testgpu", "-o", out)
    with open(log) as handle:
        calls = handle.read().splitlines()
    check(len(calls) == 1 and calls[0].endswith("_train/work job.sh"),
          "expected one sbatch job.sh from the train step, got {0}".format(calls))
    _, rows = llm_tables(env.jube("result", out, "-i", "last").stdout)
    check(len(rows) == 1 and rows[0]["SlurmJob"] == "4242" and
          rows[0]["Status"].startswith("submitted to Slurm"),
          "the submitted job's row: {0}".format([(r["SlurmJob"], r["Status"]) for r in rows]))


TESTS = {"llm": test_llm, "llm_errors": test_llm_errors, "llm_slurm": test_llm_slurm}


def main():
    parser = argparse.ArgumentParser(description="JUBE LLM-training campaign tests")
    parser.add_argument("test", choices=sorted(TESTS))
    parser.add_argument("--scaffold", required=True)
    parser.add_argument("--jube", required=True)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    return run_in_temp(args.test, "scaffold-jube", lambda tmp: TESTS[args.test](Env(args, tmp)), args.keep)


if __name__ == "__main__":
    sys.exit(main())
