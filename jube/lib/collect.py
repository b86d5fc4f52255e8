#!/usr/bin/env python3
"""The collect step of the scaffold JUBE campaigns (python3 standard library only).

  collect.py benchmark STEP_DIR --ranks R --nodes N --problem-scale S --shards P --global-batch G
  collect.py image_classification STEP_DIR --ranks R --nodes N --tasks-per-node T
             --global-batch G --batch-per-device B --precision P --model M --dataset D --epochs E
  collect.py llm_training STEP_DIR --ranks R --nodes N --tasks-per-node T --global-batch G
             --micro-batch M --tensor-parallel TP --pipeline-parallel PP --data-parallel DP
             --precision P --model-size S --data-path PATH
  collect.py fno STEP_DIR --ranks R --nodes N --tasks-per-node T --tp-size P --data-parallel D
             --problem PROBLEM

STEP_DIR is the job step's work folder (the symlink JUBE makes in the collect work package).
It holds the one run folder scaffold wrote there, with its run record summary.json (schema
"scaffold-run/1", docs/reports.md), and report.csv, which the job produced with `scaffold
report --format csv` of that folder. collect checks that the run is the one the campaign asked
for, as summary.json records it (a launcher that starts fewer ranks, or a config file that
overrides a swept key, shows up here rather than as a wrong row), checks that report.csv says
the same as summary.json, and writes result.txt as "key: value" lines for JUBE's patterns. So
every number of the result table is the one `scaffold report` prints for the folder. A problem
is written to result.txt as the status and is also this script's failure (non-zero exit,
reason on stderr).
"""

import argparse
import csv
import glob
import json
import math
import os
import sys

RESULT = "result.txt"
SCHEMA = "scaffold-run/1"
NOT_MEASURED = "not measured"
DRY_RUN = {"status": "dry run: job scripts rendered and not run"}


class CollectError(Exception):
    pass


def dry_run(step_dir):
    return os.path.exists(os.path.join(step_dir, "dryrun"))


def find_run(step_dir, prefix):
    runs = sorted(d for d in glob.glob(os.path.join(step_dir, prefix + "_*")) if os.path.isdir(d))
    if len(runs) != 1:
        raise CollectError("expected one run folder {0}_* in {1}, found {2}".format(
            prefix, os.path.realpath(step_dir), len(runs)))
    return runs[0]


def read_report(path):
    try:
        with open(path, newline="") as handle:
            rows = list(csv.DictReader(handle))
    except OSError:
        raise CollectError("no {0}: the job did not get to `scaffold report`".format(path))
    if len(rows) != 1:
        raise CollectError("{0} has {1} rows, expected one run".format(path, len(rows)))
    return rows[0]


def read_summary(run_dir, workload):
    """summary.json of the run folder, of this schema and workload."""
    path = os.path.join(run_dir, "summary.json")
    try:
        with open(path) as handle:
            summary = json.load(handle)
    except OSError as error:
        raise CollectError("cannot read {0}: {1} (the run did not finish)".format(
            path, error.strerror))
    except ValueError as error:
        raise CollectError("{0} is not valid JSON: {1}".format(path, error))
    if not isinstance(summary, dict) or summary.get("schema") != SCHEMA:
        raise CollectError("{0}: schema {1!r}, expected {2!r}".format(
            path, summary.get("schema") if isinstance(summary, dict) else None, SCHEMA))
    if summary.get("workload") != workload:
        raise CollectError("{0}: workload {1!r}, expected {2!r}".format(
            path, summary.get("workload"), workload))
    for key in ("counters", "params"):
        if key not in summary:
            raise CollectError("{0} lacks the key {1}".format(path, key))
    return summary


def counter(summary, name):
    """A counter's value, None when the record has none or no value for it."""
    for item in summary["counters"]:
        if item.get("name") == name:
            return item.get("value")
    return None


def check_asked(run_dir, asked, recorded):
    wrong = ["{0}={1} (asked {2})".format(k, recorded[k], asked[k])
             for k in asked if recorded[k] != asked[k]]
    if wrong:
        raise CollectError("run folder {0} differs from the parameters: {1}".format(
            os.path.basename(run_dir), ", ".join(wrong)))


def disagree(what, report_text, summary_value, decimals=None, scale=1.0):
    """report.csv's cell against summary.json's value: to the cell's rounding when `decimals`
    is given, else to a relative 1e-9 (both are full precision). None if they agree."""
    missing = summary_value is None
    if report_text == "" or missing:
        if report_text == "" and missing:
            return None
        return "{0}: report.csv '{1}', summary.json {2}".format(what, report_text, summary_value)
    try:
        shown = float(report_text)
    except ValueError:
        return "{0}: report.csv '{1}' is not a number".format(what, report_text)
    value = float(summary_value) * scale
    if decimals is None:
        tolerance = 1e-9 * max(1.0, abs(value))
    else:
        tolerance = 0.5 * 10.0 ** -decimals * (1 + 1e-9) + 1e-12 * abs(value)
    if math.isnan(shown) or abs(shown - value) > tolerance:
        return "{0}: report.csv {1}, summary.json {2!r}".format(what, report_text, value)
    return None


def check_agreement(run_dir, problems):
    problems = [p for p in problems if p]
    if problems:
        raise CollectError("report.csv and {0}/summary.json disagree: {1}".format(
            os.path.basename(run_dir), "; ".join(problems)))


def fixed(value, digits):
    return "{0:.{1}f}".format(float(value), digits)


def benchmark_status(summary, reached):
    """The row's status of a benchmark run that has its numbers."""
    if reached:
        return "ok"
    if summary["status"] == "time_limit":
        return ("stopped by the time limit after {0} epochs: time is a lower bound "
                "(restart.sh in the run folder resumes it)".format(summary["epochs"]))
    return "ok; target Dice not reached (epoch cap): time is a lower bound"


def job_failure(step_dir):
    """The job step's failure as its status.txt says it (lib/finish-job; or lib/submit and a
    failed job marking a step that never ran), None when it did not fail."""
    try:
        with open(os.path.join(step_dir, "status.txt")) as handle:
            for line in handle:
                if line.startswith("status: failed"):
                    return line[len("status: "):].strip()
    except OSError:
        pass
    return None


def collect_benchmark(args):
    """ScaFFold's benchmark step (jube/scaffold.yaml)."""
    bench = args.step_dir
    if dry_run(bench):
        return dict(DRY_RUN)
    run_dir = find_run(bench, "scaffold")
    report = read_report(os.path.join(bench, "report.csv"))
    summary = read_summary(run_dir, "benchmark")

    # The run must be the combination JUBE asked for.
    recorded = {
        "problem_scale": int(report["problem_scale"]),
        "ranks": int(report["ranks"]),
        "shards": int(report["shards"]),
        "global_batch": int(report["global_batch"]),
        "nodes": int(summary["nodes"]),
    }
    asked = {"problem_scale": args.problem_scale, "ranks": args.ranks, "shards": args.shards,
             "global_batch": args.global_batch, "nodes": args.nodes}
    check_asked(run_dir, asked, recorded)

    # report.csv (from train_stats.csv, config.yaml, system.json) and the run record agree.
    epochs = int(report["epochs"])
    reached = report["reached_target"] == "true"
    check_agreement(run_dir, [
        None if int(summary["epochs"]) == epochs else
        "epochs: report.csv {0}, summary.json {1}".format(epochs, summary["epochs"]),
        None if int(summary["ranks"]) == recorded["ranks"] else
        "ranks: report.csv {0}, summary.json {1}".format(recorded["ranks"], summary["ranks"]),
        None if int(summary["global_batch"]) == recorded["global_batch"] else
        "global batch: report.csv {0}, summary.json {1}".format(
            recorded["global_batch"], summary["global_batch"]),
        None if (summary["status"] == "reached_target") == reached else
        "reached_target: report.csv {0}, summary.json status {1}".format(
            report["reached_target"], summary["status"]),
        disagree("time to target", report["time_to_target_s"],
                 counter(summary, "time_to_solution_s")),
        disagree("FOM", report["fom_per_s"], counter(summary, "fom")),
        disagree("samples/s", report["samples_per_s"], counter(summary, "samples_per_s")),
        disagree("energy", report["energy_to_target_wh"], summary["energy_wh"]),
    ])

    measured = report["energy_to_target_wh"] != ""
    return {
        "status": benchmark_status(summary, reached),
        "run": os.path.basename(run_dir),
        "host": summary.get("host", "") or "-",
        "git_commit": summary.get("git_commit", "") or "-",
        "threads": int(summary["threads_per_task"]),
        # Sharded runs: whose GroupNorm statistics (local: ScaFFold's; global: = unsharded).
        "dc_groupnorm": report.get("dc_groupnorm") or "-",
        "reached_target": report["reached_target"],
        "epochs": epochs,
        "time_to_target_s": report["time_to_target_s"],
        "fom_per_s": report["fom_per_s"] or "-",
        "median_epoch_s": report["median_epoch_s"],
        "samples_per_s": report["samples_per_s"],
        "energy_to_target_wh": report["energy_to_target_wh"] if measured else NOT_MEASURED,
        "samples_per_wh": report["samples_per_wh"] if measured else NOT_MEASURED,
        # Rounded copies for the pretty table (the CSV table has full precision).
        "fom_shown": "{0:.4g}".format(float(report["fom_per_s"])) if report["fom_per_s"] else "-",
        "energy_shown": fixed(report["energy_to_target_wh"], 3) if measured else NOT_MEASURED,
        "samples_per_wh_shown": fixed(report["samples_per_wh"], 1)
        if measured and report["samples_per_wh"] else NOT_MEASURED,
    }


# result.txt key -> the column of `scaffold report --format csv` for image classification.
IMGCLS_CELLS = (
    ("job_id", "JobID"), ("system", "System"), ("version", "Version"), ("queue", "Queue"),
    ("runtime_s", "Runtime(s)"), ("model", "Model"), ("dataset", "Dataset"), ("nodes", "Nodes"),
    ("devices", "Devices"), ("tasks_per_node", "Tasks/Node"),
    ("threads_per_task", "Threads/Task"), ("workers", "Workers"),
    ("global_batch", "GlobalBatchSize"), ("local_batch", "BatchSize/Device"),
    ("epochs", "Epoch"), ("precision", "Precision"), ("compiler", "Compiler"),
    ("compiler_mode", "CompilerMode"), ("channels_last", "ChannelLast"),
    ("images_per_s", "Images/second"), ("tf32", "TF32"),
    ("train_images_per_s", "TrainImages/second"),
    ("top1", "Top1(%)"), ("top5", "Top5(%)"), ("energy_wh", "Energy(Wh)"),
    ("images_per_wh", "Images/Wh"), ("j_per_image", "J/image"),
)


def collect_image_classification(args):
    """The train step of jube/image_classification.yaml."""
    step = args.step_dir
    if dry_run(step):
        return dict(DRY_RUN)
    run_dir = find_run(step, "image_classification")
    report = read_report(os.path.join(step, "report.csv"))
    summary = read_summary(run_dir, "image_classification")
    params = summary["params"]

    recorded = {
        "ranks": int(summary["ranks"]), "devices": int(summary["devices"]),
        "nodes": int(summary["nodes"]), "tasks_per_node": int(summary["tasks_per_node"]),
        "global_batch": int(summary["global_batch"]),
        "batch_per_device": int(summary["local_batch"]), "precision": summary["precision"],
        "model": params.get("model"), "dataset": params.get("dataset"),
    }
    asked = {"ranks": args.ranks, "devices": args.ranks, "nodes": args.nodes,
             "tasks_per_node": args.tasks_per_node, "global_batch": args.global_batch,
             "batch_per_device": args.batch_per_device, "precision": args.precision,
             "model": args.model, "dataset": args.dataset}
    if summary["status"] == "completed":  # a time budget may end a run early
        recorded["epochs"] = int(summary["epochs"])
        asked["epochs"] = args.epochs
    check_asked(run_dir, asked, recorded)

    missing = [title for _, title in IMGCLS_CELLS if title not in report]
    if missing:
        raise CollectError("report.csv lacks the column(s) {0}".format(", ".join(missing)))
    exact = (("Nodes", summary["nodes"]), ("Devices", summary["devices"]),
             ("Tasks/Node", summary["tasks_per_node"]),
             ("Threads/Task", summary["threads_per_task"]),
             ("GlobalBatchSize", summary["global_batch"]),
             ("BatchSize/Device", summary["local_batch"]), ("Epoch", summary["epochs"]),
             ("Precision", summary["precision"]), ("Model", params.get("model")),
             ("Dataset", params.get("dataset")), ("TF32", params.get("tf32_effect")))
    check_agreement(run_dir, [
        None if report[title] == str(value) else
        "{0}: report.csv '{1}', summary.json {2!r}".format(title, report[title], value)
        for title, value in exact] + [
        disagree("Runtime(s)", report["Runtime(s)"], summary["runtime_s"], 2),
        disagree("Images/second", report["Images/second"], counter(summary, "images_per_s"), 2),
        disagree("TrainImages/second", report["TrainImages/second"],
                 counter(summary, "train_images_per_s"), 2),
        disagree("Top1(%)", report["Top1(%)"], counter(summary, "val_top1"), 2, 100.0),
        disagree("Top5(%)", report["Top5(%)"], counter(summary, "val_top5"), 2, 100.0),
        disagree("Energy(Wh)", report["Energy(Wh)"], summary["energy_wh"], 3),
        disagree("Images/Wh", report["Images/Wh"], counter(summary, "images_per_wh"), 1),
        disagree("J/image", report["J/image"], counter(summary, "j_per_image"), 4),
    ])

    if summary["status"] == "completed":
        status = "ok"
    else:
        status = "ok; run status {0} after {1} of {2} timed epochs".format(
            summary["status"], summary["epochs"], args.epochs)
    result = {"status": status}
    for key, title in IMGCLS_CELLS:
        result[key] = report[title]
    # The pretty table says what an empty energy cell means; the CSV table keeps the report's.
    for key, title in (("energy_wh", "Energy(Wh)"), ("images_per_wh", "Images/Wh"),
                       ("j_per_image", "J/image")):
        result[key + "_shown"] = report[title] or NOT_MEASURED
    result["run"] = os.path.basename(run_dir)
    result["host"] = summary.get("host", "") or "-"
    result["git_commit"] = summary.get("git_commit", "") or "-"
    return result


# result.txt key -> the column of `scaffold report --format csv` for LLM training.
LLM_CELLS = (
    ("job_id", "JobID"), ("system", "System"), ("version", "Version"), ("queue", "Queue"),
    ("job_time", "JobTime"), ("runtime_min", "Runtime(min)"), ("model", "Model"),
    ("model_size", "ModelSize"), ("dataset", "Dataset"), ("nodes", "Nodes"),
    ("devices", "Devices"), ("global_batch", "GlobalBatchSize"),
    ("pipeline_parallel", "PipelineParallel"), ("tensor_parallel", "TensorParallel"),
    ("data_parallel", "DataParallel"), ("iterations", "Iterations"),
    ("time_per_iteration_s", "Time/iteration(s)"), ("tokens_per_s", "Tokens/second"),
    ("tflops_per_device", "Avg_TFLOPs/GPU"), ("precision", "Precision"),
    ("recompute", "Recompute"), ("steady_time_per_iteration_s", "SteadyTime/iteration(s)"),
    ("steady_tokens_per_s", "SteadyTokens/second"),
    ("steady_tflops_per_device", "SteadyTFLOPs/device"), ("mfu_percent", "MFU(%)"),
    ("energy_wh", "Energy(Wh)"), ("tokens_per_wh", "Tokens/Wh"), ("j_per_token", "J/token"),
)


def finite_or_none(value):
    """A counter as `scaffold report` shows it: no value and a non-finite one are both blank."""
    return None if value is None or not math.isfinite(float(value)) else value


def collect_llm_training(args):
    """The train step of jube/llm_training.yaml."""
    step = args.step_dir
    if dry_run(step):
        return dict(DRY_RUN)
    run_dir = find_run(step, "llm_training")
    report = read_report(os.path.join(step, "report.csv"))
    summary = read_summary(run_dir, "llm_training")
    params = summary["params"]

    recorded = {
        "ranks": int(summary["ranks"]), "devices": int(summary["devices"]),
        "nodes": int(summary["nodes"]), "tasks_per_node": int(summary["tasks_per_node"]),
        "global_batch": int(summary["global_batch"]),
        "micro_batch": int(summary["local_batch"]), "precision": summary["precision"],
        "model_size": params.get("model_size"),
        "tensor_parallel": int(params.get("tensor_parallel", -1)),
        "pipeline_parallel": int(params.get("pipeline_parallel", -1)),
        "data_parallel": int(params.get("data_parallel", -1)),
        "synthetic": params.get("dataset") == "synthetic",
    }
    asked = {"ranks": args.ranks, "devices": args.ranks, "nodes": args.nodes,
             "tasks_per_node": args.tasks_per_node, "global_batch": args.global_batch,
             "micro_batch": args.micro_batch, "precision": args.precision,
             "model_size": args.model_size, "tensor_parallel": args.tensor_parallel,
             "pipeline_parallel": args.pipeline_parallel, "data_parallel": args.data_parallel,
             "synthetic": args.data_path == ""}
    check_asked(run_dir, asked, recorded)

    missing = [title for _, title in LLM_CELLS if title not in report]
    if missing:
        raise CollectError("report.csv lacks the column(s) {0}".format(", ".join(missing)))
    exact = (("Nodes", summary["nodes"]), ("Devices", summary["devices"]),
             ("GlobalBatchSize", summary["global_batch"]), ("Precision", summary["precision"]),
             ("ModelSize", params.get("model_size")), ("Model", params.get("model")),
             ("Dataset", params.get("dataset")), ("Recompute", params.get("recompute")),
             ("JobTime", params.get("job_time")),
             ("PipelineParallel", params.get("pipeline_parallel")),
             ("TensorParallel", params.get("tensor_parallel")),
             ("DataParallel", params.get("data_parallel")))
    numbers = (("Runtime(min)", summary["runtime_s"], 2, 1 / 60.0),
               ("Iterations", counter(summary, "iterations"), 0, 1.0),
               ("Time/iteration(s)", counter(summary, "time_per_iteration_s"), 4, 1.0),
               ("Tokens/second", counter(summary, "tokens_per_s"), 2, 1.0),
               ("Avg_TFLOPs/GPU", counter(summary, "tflops_per_device"), 2, 1.0),
               ("SteadyTime/iteration(s)", counter(summary, "steady_time_per_iteration_s"), 4,
                1.0),
               ("SteadyTokens/second", counter(summary, "steady_tokens_per_s"), 2, 1.0),
               ("SteadyTFLOPs/device", counter(summary, "steady_tflops_per_device"), 2, 1.0),
               ("MFU(%)", counter(summary, "mfu"), 2, 100.0),
               ("Energy(Wh)", summary["energy_wh"], 3, 1.0),
               ("Tokens/Wh", counter(summary, "tokens_per_wh"), 1, 1.0),
               ("J/token", counter(summary, "j_per_token"), 6, 1.0))
    check_agreement(run_dir, [
        None if report[title] == ("" if value is None else str(value)) else
        "{0}: report.csv '{1}', summary.json {2!r}".format(title, report[title], value)
        for title, value in exact] + [
        disagree(title, report[title], finite_or_none(value), decimals, scale)
        for title, value, decimals, scale in numbers])

    if summary["status"] == "completed":
        status = "ok"
    else:
        status = "ok; run status {0} after {1} iterations".format(
            summary["status"], report["Iterations"] or 0)
    result = {"status": status}
    for key, title in LLM_CELLS:
        result[key] = report[title]
    for key, title in (("energy_wh", "Energy(Wh)"), ("tokens_per_wh", "Tokens/Wh"),
                       ("j_per_token", "J/token")):
        result[key + "_shown"] = report[title] or NOT_MEASURED
    # CARAML's EnergyFile column: its per-run energy table, here the run folder's.
    energy = os.path.join(os.path.realpath(run_dir), "energy_stats.csv")
    result["energy_file"] = energy if os.path.exists(energy) else ""
    result["energy_file_shown"] = result["energy_file"] or NOT_MEASURED
    result["run"] = os.path.basename(run_dir)
    result["host"] = summary.get("host", "") or "-"
    result["git_commit"] = summary.get("git_commit", "") or "-"
    return result


# The cells of `scaffold report --format csv` of an FNO run that result.txt carries: CARAML's
# columns (operator_benchmark/fno_benchmark.yaml) and ours, as (key, title).
FNO_CELLS = (
    ("job_id", "JobID"), ("system", "System"), ("version", "Version"), ("queue", "Queue"),
    ("problem", "Problem"), ("config", "Config"), ("model_param_m", "ModelParam (Million)"),
    ("model_size_mb", "ModelSize (MB)"), ("grid", "Grid"), ("global_batch", "GlobalBatchSize"),
    ("local_batch", "LocalBatchSize"), ("runtime_min", "Runtime (min)"), ("epochs", "Epochs"),
    ("mixed_precision", "MixedPrecision"), ("compile_mode", "CompileMode"),
    ("train_time_per_epoch_min", "TrainTime/Epoch (min)"),
    ("total_epoch_time_s", "TotalEpochTime (s)"), ("total_train_time_s", "TotalTrainTime (s)"),
    ("total_compute_time_s", "TotalComputeTime (s)"),
    ("total_monitor_time_s", "TotalMonitorTime (s)"),
    ("total_checkpoint_time_s", "TotalCheckpointTime (s)"), ("timesteps", "Timesteps"),
    ("timesteps_per_s", "Timesteps/second"), ("train_timesteps", "TrainTimesteps"),
    ("train_timesteps_per_s", "TrainTimesteps/second"), ("peak_fwd_mem_mb", "PeakFwdMem (MB)"),
    ("persistent_mem_mb", "PersistentMem (MB)"), ("activation_mem_mb", "ActivationMem (MB)"),
    ("tflops", "TFLOPs"), ("energy_per_gpu_wh", "Energy/GPU (Wh)"),
    ("total_energy_wh", "TotalEnergy (Wh)"), ("val_rel_l2", "ValRelL2"),
    ("timesteps_per_wh", "Timesteps/Wh"),
)


def collect_fno(args):
    """The train step of jube/fno.yaml."""
    step = args.step_dir
    if dry_run(step):
        return dict(DRY_RUN)
    run_dir = find_run(step, "fno")
    report = read_report(os.path.join(step, "report.csv"))
    summary = read_summary(run_dir, "fno")
    params = summary["params"]

    recorded = {
        "ranks": int(summary["ranks"]), "nodes": int(summary["nodes"]),
        "tasks_per_node": int(summary["tasks_per_node"]),
        "tp_size": int(params.get("tp_size", -1)),
        "data_parallel": int(params.get("data_parallel", -1)),
        "problem": params.get("problem"), "mode": params.get("mode"),
    }
    asked = {"ranks": args.ranks, "nodes": args.nodes, "tasks_per_node": args.tasks_per_node,
             "tp_size": args.tp_size, "data_parallel": args.data_parallel,
             "problem": args.problem, "mode": "train"}
    check_asked(run_dir, asked, recorded)

    missing = [title for _, title in FNO_CELLS if title not in report]
    if missing:
        raise CollectError("report.csv lacks the column(s) {0}".format(", ".join(missing)))
    exact = (("Nodes", summary["nodes"]), ("TotalDevices", summary["devices"]),
             ("GlobalBatchSize", summary["global_batch"]),
             ("MixedPrecision", summary["precision"]), ("Problem", params.get("problem")),
             ("Grid", params.get("grid")), ("GridShards", params.get("tp_size")),
             ("DataParallel", params.get("data_parallel")))
    numbers = (("Runtime (min)", summary["runtime_s"], 3, 1 / 60.0),
               ("Epochs", summary["epochs"], 0, 1.0),
               ("TotalEpochTime (s)", counter(summary, "total_epoch_time_s"), 2, 1.0),
               ("TotalTrainTime (s)", counter(summary, "total_train_time_s"), 2, 1.0),
               ("TotalComputeTime (s)", counter(summary, "total_compute_time_s"), 2, 1.0),
               ("Timesteps", counter(summary, "timesteps"), 0, 1.0),
               ("Timesteps/second", counter(summary, "timesteps_per_s"), 2, 1.0),
               ("TrainTimesteps/second", counter(summary, "train_timesteps_per_s"), 2, 1.0),
               ("TFLOPs", counter(summary, "tflop_per_epoch"), 4, 1.0),
               ("TotalEnergy (Wh)", summary["energy_wh"], 3, 1.0),
               ("ValRelL2", counter(summary, "val_rel_l2"), 5, 1.0))
    check_agreement(run_dir, [
        None if report[title] == ("" if value is None else str(value)) else
        "{0}: report.csv '{1}', summary.json {2!r}".format(title, report[title], value)
        for title, value in exact] + [
        disagree(title, report[title], finite_or_none(value), decimals, scale)
        for title, value, decimals, scale in numbers])

    if summary["status"] == "completed":
        status = "ok"
    else:
        status = "ok; run status {0} after {1} epochs".format(summary["status"],
                                                              report["Epochs"] or 0)
    result = {"status": status}
    for key, title in FNO_CELLS:
        result[key] = report[title]
    for key in ("total_energy_wh", "energy_per_gpu_wh", "timesteps_per_wh"):
        result[key + "_shown"] = result[key] or NOT_MEASURED
    result["run"] = os.path.basename(run_dir)
    result["host"] = summary.get("host", "") or "-"
    result["git_commit"] = summary.get("git_commit", "") or "-"
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    workloads = parser.add_subparsers(dest="workload")
    workloads.required = True
    bench = workloads.add_parser("benchmark", help="a ScaFFold benchmark step")
    bench.add_argument("step_dir", help="the benchmark step's work folder")
    for name in ("ranks", "nodes", "problem-scale", "shards", "global-batch"):
        bench.add_argument("--" + name, type=int, required=True)
    bench.set_defaults(collect=collect_benchmark)
    imgcls = workloads.add_parser("image_classification", help="an image-classification step")
    imgcls.add_argument("step_dir", help="the train step's work folder")
    for name in ("ranks", "nodes", "tasks-per-node", "global-batch", "batch-per-device",
                 "epochs"):
        imgcls.add_argument("--" + name, type=int, required=True)
    for name in ("precision", "model", "dataset"):
        imgcls.add_argument("--" + name, required=True)
    imgcls.set_defaults(collect=collect_image_classification)
    llm = workloads.add_parser("llm_training", help="an LLM-training step")
    llm.add_argument("step_dir", help="the train step's work folder")
    for name in ("ranks", "nodes", "tasks-per-node", "global-batch", "micro-batch",
                 "tensor-parallel", "pipeline-parallel", "data-parallel"):
        llm.add_argument("--" + name, type=int, required=True)
    for name in ("precision", "model-size", "data-path"):
        llm.add_argument("--" + name, required=True)
    llm.set_defaults(collect=collect_llm_training)
    fno = workloads.add_parser("fno", help="an FNO training step")
    fno.add_argument("step_dir", help="the train step's work folder")
    for name in ("ranks", "nodes", "tasks-per-node", "tp-size", "data-parallel"):
        fno.add_argument("--" + name, type=int, required=True)
    fno.add_argument("--problem", required=True)
    fno.set_defaults(collect=collect_fno)
    args = parser.parse_args()
    code = 0
    failure = job_failure(args.step_dir)
    try:
        if failure:  # under Slurm collect waits for the job whatever its end
            raise CollectError(failure)
        result = args.collect(args)
    except (CollectError, KeyError, ValueError, TypeError) as error:
        if isinstance(error, KeyError):
            error = "report.csv or summary.json lacks the key {0}".format(error)
        result = {"status": failure or "failed at collect: {0}".format(str(error))}
        print("collect: {0}".format(error), file=sys.stderr)
        code = 1
    # JUBE's CSV tables do not quote cells, and a pattern reads one line.
    with open(RESULT, "w") as handle:
        for key, value in result.items():
            text = str(value).replace(",", ";").replace("\n", " ")
            handle.write("{0}: {1}\n".format(key, text))
    return code


if __name__ == "__main__":
    sys.exit(main())
