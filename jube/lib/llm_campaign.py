"""The LLM-training campaign's derived parameters (jube/llm_training.yaml), CARAML's rules for its
Megatron GPT benchmark (docs/campaigns.md):

  devices = nodes x devices per node, one rank per device
  DataParallel = devices / (TensorParallel x PipelineParallel)
  GlobalBatchSize = the size's fixed value (800M: 512; tiny: 16), else DP x micro-batch x GAS
  (13B and 175B: gradient accumulation 64), and always a multiple of micro-batch x DP

JUBE's python-mode parameters call these inside its own interpreter (`runpy.run_path` of this
file); the system table and the tags come from campaign.py, next to this file. A user mistake
raises ValueError naming the tag, system or value, which JUBE prints and stops on before any job
script is written. Nothing here runs a job.
"""

import os
import runpy

_CAMPAIGN = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "campaign.py"))

SIZE_TAGS = ("tiny", "800M", "13B", "175B")
DEFAULT_SIZE = "800M"  # CARAML's run without a size tag
EXIT_MARGIN_MIN = 5    # minutes of the job's time limit left for start-up and the report
CARAML_EXIT_MIN = 30   # CARAML's --exit-duration-in-mins


def _fail(message):
    raise ValueError(message)


def size(rundir, size_param):
    """The run's size: the one size tag given (none: 800M). `size_param` is what the campaign's
    tagged parameters chose, which must agree (two size tags would make JUBE pick one
    silently)."""
    given = [t for t in _CAMPAIGN["run_tags"](rundir) if t in SIZE_TAGS]
    if len(given) > 1:
        _fail("tags select several model sizes ({0}); give one of {1}".format(
            ", ".join(given), ", ".join(SIZE_TAGS)))
    chosen = given[0] if given else DEFAULT_SIZE
    if chosen != size_param:
        _fail("the campaign's model_size parameter is {0!r} but the tags ask for {1!r}: each size "
              "tag needs its own tagged model_size line".format(size_param, chosen))
    return chosen


def nodes(table_path, system, size_nodes):
    """The size's node count on a system with a scheduler; one node (this machine) without."""
    if _CAMPAIGN["entry"](table_path, system)["scheduler"] == "none":
        return 1
    if int(size_nodes) < 1:
        _fail("nodes {0} must be >= 1".format(size_nodes))
    return int(size_nodes)


def ranks(table_path, system, node_count):
    """One rank per device of the nodes."""
    return int(node_count) * _CAMPAIGN["entry"](table_path, system)["devices_per_node"]


def data_parallel(ranks_, tensor_parallel, pipeline_parallel, system):
    tp, pp, r = int(tensor_parallel), int(pipeline_parallel), int(ranks_)
    if tp < 1 or pp < 1:
        _fail("tensor_parallel {0} and pipeline_parallel {1} must be >= 1".format(tp, pp))
    if r % (tp * pp):
        _fail("{0} devices of system '{1}' do not split into tensor-parallel {2} x pipeline-parallel "
              "{3} groups: DataParallel = devices / (TP x PP) must be a whole number".format(
                  r, system, tp, pp))
    return r // (tp * pp)


def global_batch(fixed, micro_batch, accumulation, dp):
    """The size's fixed global batch, or DP x micro-batch x GAS; a multiple of micro-batch x DP
    either way (Megatron derives GAS = GBS / (DP x micro-batch))."""
    mbs, dp = int(micro_batch), int(dp)
    if mbs < 1:
        _fail("micro_batch_size {0} must be >= 1".format(mbs))
    if str(fixed).strip():
        gbs = int(fixed)
        if gbs < 1 or gbs % (mbs * dp):
            _fail("global batch {0} is not a multiple of micro-batch {1} x data-parallel size {2}: "
                  "GlobalBatchSize = micro-batch x gradient accumulation x DP".format(gbs, mbs, dp))
        return gbs
    if int(accumulation) < 1:
        _fail("gradient accumulation {0} must be >= 1 (or give the size a fixed global batch)".format(
            accumulation))
    return dp * mbs * int(accumulation)


def precision(size_precision, table_path, system):
    """The size's precision; fp16 needs CUDA, so a system not set to `device: cuda` gets fp32
    instead (bf16 runs anywhere)."""
    if size_precision == "fp16" and _CAMPAIGN["entry"](table_path, system)["device"] != "cuda":
        return "fp32"
    return size_precision


def _minutes(time_limit, system):
    """Slurm's [days-]hours:minutes:seconds (or minutes, minutes:seconds) as minutes."""
    text = str(time_limit).strip()
    days = 0
    if "-" in text:
        head, text = text.split("-", 1)
        days = int(head)
    try:
        parts = [int(p) for p in text.split(":")]
    except ValueError:
        _fail("system '{0}': time_limit {1!r} is not [days-]hours:minutes:seconds".format(
            system, time_limit))
    if len(parts) == 1:
        h, m, s = 0, parts[0], 0
    elif len(parts) == 2:
        h, m, s = 0, parts[0], parts[1]
    elif len(parts) == 3:
        h, m, s = parts
    else:
        _fail("system '{0}': time_limit {1!r} is not [days-]hours:minutes:seconds".format(
            system, time_limit))
    return days * 24 * 60 + h * 60 + m + s / 60.0


def exit_duration(size_name, table_path, system):
    """Megatron's --exit-duration-in-mins: CARAML's 30 minutes, shortened to the system's time
    limit less EXIT_MARGIN_MIN so the run ends by itself and writes its record before the
    scheduler kills it (CARAML's 15-minute limit with 30 minutes of training is its pain point).
    "" for tiny: the quickstart runs a fixed number of iterations."""
    if size_name == "tiny":
        return ""
    limit = _CAMPAIGN["entry"](table_path, system)["time_limit"]
    if not limit:
        return str(CARAML_EXIT_MIN)
    budget = _minutes(limit, system) - EXIT_MARGIN_MIN
    if budget < 1:
        _fail("system '{0}': time_limit {1} leaves under a minute of training after the {2}-minute "
              "margin for start-up and the report; give the system a longer time_limit".format(
                  system, limit, EXIT_MARGIN_MIN))
    minutes = min(CARAML_EXIT_MIN, int(budget))
    return str(minutes)


def job_time(table_path, system):
    """The scheduler's limit for the JobTime column (SCAFFOLD_JOB_TIME), "" without one."""
    return _CAMPAIGN["entry"](table_path, system)["time_limit"]
