"""System table and job-script pieces for the scaffold JUBE campaigns.

JUBE evaluates the python-mode parameters of jube/common.yaml, jube/scaffold.yaml and
jube/image_classification.yaml by calling these functions
(`runpy.run_path` of this file) inside its own interpreter, which always has PyYAML because
JUBE's YAML input needs it. Everything here is a pure function of its arguments, the system
table and the run's stored tags; every user mistake raises ValueError with a message that
names the system, field, tag or value, which JUBE prints and stops on. Nothing here runs a job.
"""

import os
import xml.etree.ElementTree as ET

import yaml

# Tags every campaign understands besides the system names of the table; a campaign adds its
# own through select_system's campaign_tags.
MODIFIER_TAGS = ("dryrun",)
DEFAULT_SYSTEM = "local"
SCHEDULERS = ("none", "slurm")
DEVICES = ("auto", "cpu", "cuda")  # scaffold's --device values

# field: (type, default); a default of None marks a required field.
FIELDS = {
    "description": (str, ""),
    "scheduler": (str, None),
    "devices_per_node": (int, None),
    "cpus_per_rank": (int, 0),
    "launcher": (str, None),
    "launcher_one_rank": (str, None),  # None: use `launcher` for one rank too
    "prep_ranks": (int, 1),
    "partition": (str, ""),
    "account": (str, ""),
    "gres": (str, ""),
    "time_limit": (str, ""),
    "prep_time_limit": (str, ""),  # "": time_limit
    "sbatch_options": (list, []),
    "modules": (list, []),
    "environment": (dict, {}),
    "setup": (list, []),
    "data_dir": (str, ""),
    "scaffold": (str, ""),
    "nodes": (int, 1),
    "device": (str, "auto"),
}
OPTIONAL_NONE = ("launcher_one_rank",)


def _fail(message):
    raise ValueError(message)


def _check_entry(path, name, entry):
    where = "{0}: system '{1}'".format(path, name)
    if not isinstance(entry, dict):
        _fail("{0}: an entry is a mapping of fields, got {1!r}".format(where, entry))
    unknown = sorted(set(entry) - set(FIELDS))
    if unknown:
        _fail("{0}: unknown field(s) {1} (fields: {2})".format(
            where, ", ".join(unknown), ", ".join(FIELDS)))
    out = {}
    for field, (kind, default) in FIELDS.items():
        if field not in entry or entry[field] is None:
            if default is None and field not in OPTIONAL_NONE:
                _fail("{0}: field '{1}' is required".format(where, field))
            out[field] = default if not isinstance(default, (list, dict)) else type(default)()
            continue
        value = entry[field]
        if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            _fail("{0}: field '{1}' must be an integer, got {2!r}".format(where, field, value))
        if kind is str and not isinstance(value, str):
            hint = " (quote times: \"01:00:00\")" if field.endswith("time_limit") else ""
            _fail("{0}: field '{1}' must be a string, got {2!r}{3}".format(
                where, field, value, hint))
        if kind is list and not (isinstance(value, list) and
                                 all(isinstance(v, str) for v in value)):
            _fail("{0}: field '{1}' must be a list of strings, got {2!r}".format(
                where, field, value))
        if kind is dict and not (isinstance(value, dict) and
                                 all(isinstance(k, str) and isinstance(v, (str, int, float))
                                     for k, v in value.items())):
            _fail("{0}: field '{1}' must map names to values, got {2!r}".format(
                where, field, value))
        out[field] = value
    if out["scheduler"] not in SCHEDULERS:
        _fail("{0}: scheduler '{1}' is not one of {2}".format(
            where, out["scheduler"], ", ".join(SCHEDULERS)))
    if out["devices_per_node"] < 1 or out["prep_ranks"] < 1 or out["cpus_per_rank"] < 0 or \
            out["nodes"] < 1:
        _fail("{0}: devices_per_node, prep_ranks and nodes must be >= 1, cpus_per_rank >= 0".format(
            where))
    if out["device"] not in DEVICES:
        _fail("{0}: device '{1}' is not one of {2}".format(where, out["device"], ", ".join(DEVICES)))
    return out


def load_table(path):
    """The whole table, every entry validated (a broken entry is an error for any system)."""
    try:
        with open(path) as handle:
            data = yaml.safe_load(handle)
    except OSError as error:
        _fail("cannot read the system table {0}: {1}".format(path, error.strerror))
    except yaml.YAMLError as error:
        _fail("the system table {0} is not valid YAML: {1}".format(path, error))
    if not isinstance(data, dict) or not data:
        _fail("the system table {0} must map system names to entries".format(path))
    return {str(name): _check_entry(path, name, entry) for name, entry in data.items()}


def run_tags(rundir):
    """The tags the run was started with, as JUBE stored them in configuration.xml."""
    config = os.path.join(rundir, "configuration.xml")
    try:
        root = ET.parse(config).getroot()
    except (OSError, ET.ParseError) as error:
        _fail("cannot read the run's tags from {0}: {1}".format(config, error))
    selection = root.find("selection")
    if selection is None:
        return []
    return sorted((tag.text or "").strip() for tag in selection.findall("tag"))


def select_system(rundir, table_path, campaign_tags=""):
    """The system named by the run's tags: exactly one table entry, or none for `local`.
    `campaign_tags` (space separated) are the tags the campaign accepts besides a system name
    and the MODIFIER_TAGS; any other tag is an error."""
    table = load_table(table_path)
    tags = run_tags(rundir)
    known = list(MODIFIER_TAGS) + [t for t in str(campaign_tags).split() if t not in MODIFIER_TAGS]
    systems = [tag for tag in tags if tag in table]
    unknown = [tag for tag in tags if tag not in table and tag not in known]
    if unknown:
        _fail("unknown tag(s) {0}: not a system of {1} (systems: {2}) nor a campaign tag ({3}). "
              "Add an entry to the table to benchmark a new system.".format(
                  ", ".join("'{0}'".format(t) for t in unknown), table_path,
                  ", ".join(sorted(table)), ", ".join(known)))
    if len(systems) > 1:
        _fail("tags select several systems ({0}); give one".format(", ".join(systems)))
    if systems:
        return systems[0]
    if DEFAULT_SYSTEM not in table:
        _fail("no system tag given and {0} has no '{1}' entry".format(table_path, DEFAULT_SYSTEM))
    return DEFAULT_SYSTEM


def tags(rundir):
    """The run's tags for the result table ('-' when none was given)."""
    return " ".join(run_tags(rundir)) or "-"


def entry(table_path, system):
    return load_table(table_path)[system]


def field(table_path, system, name):
    value = entry(table_path, system)[name]
    return "" if value is None else value


def scaffold_binary(table_path, system, repo, dryrun):
    """The system's `scaffold` field, else $SCAFFOLD_BIN, else the repository's build."""
    sysentry = entry(table_path, system)
    path = sysentry["scaffold"] or os.environ.get("SCAFFOLD_BIN", "") or \
        os.path.join(repo, "build", "src", "scaffold")
    path = os.path.abspath(path) if not path.startswith("$") else path
    if sysentry["scheduler"] == "none" and str(dryrun) != "1" and not os.access(path, os.X_OK):
        _fail("scaffold binary {0} is not an executable file: build it (scripts/build), or set "
              "SCAFFOLD_BIN or the 'scaffold' field of system '{1}'".format(path, system))
    return path


def data_dir(table_path, system, rundir):
    """Where fractals/ and datasets/ live: the system's `data_dir`, else <outpath>/data."""
    return field(table_path, system, "data_dir") or \
        os.path.join(os.path.dirname(os.path.abspath(rundir)), "data")


def shard_product(shards):
    """prod(dc_num_shards) for a value like '2 1 1'."""
    try:
        values = [int(v) for v in str(shards).split()]
    except ValueError:
        values = []
    if len(values) != 3 or min(values) < 1:
        _fail("dc_num_shards '{0}' must be three positive integers like '2 1 1'".format(shards))
    return values[0] * values[1] * values[2]


def replicas(ranks, shards):
    """Data-parallel replicas: ranks / prod(dc_num_shards), which must divide evenly."""
    product = shard_product(shards)
    if int(ranks) < 1 or int(ranks) % product:
        _fail("ranks={0} is not a positive multiple of prod(dc_num_shards '{1}') = {2}".format(
            ranks, shards, product))
    return int(ranks) // product


def split_batch(global_batch, parts, over):
    """global_batch / parts, which must divide evenly; `over` says what the parts are."""
    if int(parts) < 1 or int(global_batch) < 1 or int(global_batch) % int(parts):
        _fail("the global batch {0} does not split over {1} {2}".format(global_batch, parts, over))
    return int(global_batch) // int(parts)


def local_batch_for_global(global_batch, ranks, shards):
    """Strong scaling: the local batch that keeps the global batch constant."""
    reps = replicas(ranks, shards)
    return split_batch(global_batch, reps, "data-parallel replicas (ranks={0}, dc_num_shards "
                       "'{1}')".format(ranks, shards))


def whole_node_ranks(table_path, system):
    """Ranks of a campaign on whole nodes (image classification, as CARAML sizes it): the
    system's `nodes` x `devices_per_node`, one rank per device."""
    sysentry = entry(table_path, system)
    return sysentry["nodes"] * sysentry["devices_per_node"]


def batch_per_device(global_batch, ranks, table_path, system):
    """CARAML's BatchSize/Device = global batch / devices (one rank per device), a whole
    number >= 1."""
    node_count, per_node = layout(table_path, system, ranks)
    return split_batch(global_batch, ranks, "devices ({0} node(s) x {1} of system '{2}'): "
                       "BatchSize/Device = GlobalBatchSize / devices must be a whole number "
                       ">= 1".format(node_count, per_node, system))


def default_precision(table_path, system):
    """CARAML's default fp16 where the system trains on CUDA devices, else fp32 (fp16 and tf32
    need CUDA)."""
    return "fp16" if entry(table_path, system)["device"] == "cuda" else "fp32"


def device_flag(table_path, system):
    """--device of the system ('' for auto: scaffold picks CUDA when there is one)."""
    device = entry(table_path, system)["device"]
    return "" if device == "auto" else "--device " + device


def workers_flag(table_path, system):
    """CARAML's data-loader workers, threads / 4 per rank ('' without cpus_per_rank: the
    config's dataloader_num_workers)."""
    cpus = entry(table_path, system)["cpus_per_rank"]
    return "--dataloader-num-workers {0}".format(max(1, cpus // 4)) if cpus > 0 else ""


def layout(table_path, system, ranks):
    """(nodes, tasks per node) for `ranks` ranks on this system."""
    sysentry = entry(table_path, system)
    ranks = int(ranks)
    if ranks < 1:
        _fail("ranks={0} must be >= 1".format(ranks))
    if sysentry["scheduler"] == "none":
        return 1, ranks
    per_node = sysentry["devices_per_node"]
    if ranks <= per_node:
        return 1, ranks
    if ranks % per_node:
        _fail("ranks={0} does not fill whole nodes of system '{1}' ({2} devices per node)".format(
            ranks, system, per_node))
    return ranks // per_node, per_node


def nodes(table_path, system, ranks):
    return layout(table_path, system, ranks)[0]


def tasks_per_node(table_path, system, ranks):
    return layout(table_path, system, ranks)[1]


def launcher(table_path, system, ranks):
    """The launcher prefix for `ranks` ranks (may be empty: scaffold runs directly)."""
    sysentry = entry(table_path, system)
    template = sysentry["launcher"]
    if int(ranks) == 1 and sysentry["launcher_one_rank"] is not None:
        template = sysentry["launcher_one_rank"]
    node_count, per_node = layout(table_path, system, ranks)
    try:
        return template.format(ranks=int(ranks), nodes=node_count, tasks_per_node=per_node,
                               cpus_per_rank=sysentry["cpus_per_rank"]).strip()
    except (KeyError, IndexError, ValueError) as error:
        _fail("system '{0}': launcher '{1}' has an unknown placeholder {2} (known: {{ranks}}, "
              "{{nodes}}, {{tasks_per_node}}, {{cpus_per_rank}})".format(system, template, error))


def threads_flag(table_path, system):
    cpus = entry(table_path, system)["cpus_per_rank"]
    return "--threads {0}".format(cpus) if cpus > 0 else ""


def sbatch_header(table_path, system, job_name, ranks, workdir, prep):
    """The scheduler lines of a job script (a comment for systems without a scheduler)."""
    sysentry = entry(table_path, system)
    if sysentry["scheduler"] == "none":
        return "# system '{0}' has no scheduler: the campaign runs this script with bash".format(
            system)
    node_count, per_node = layout(table_path, system, ranks)
    time_limit = sysentry["time_limit"]
    if str(prep) == "1" and sysentry["prep_time_limit"]:
        time_limit = sysentry["prep_time_limit"]
    options = [("job-name", job_name), ("nodes", node_count), ("ntasks-per-node", per_node)]
    if sysentry["cpus_per_rank"] > 0:
        options.append(("cpus-per-task", sysentry["cpus_per_rank"]))
    for key, name in (("time", time_limit), ("partition", sysentry["partition"]),
                      ("account", sysentry["account"]), ("gres", sysentry["gres"])):
        if name:
            options.append((key, name))
    options += [("output", os.path.join(workdir, "job.out")),
                ("error", os.path.join(workdir, "job.err"))]
    lines = ["#SBATCH --{0}={1}".format(key, value) for key, value in options]
    lines += ["#SBATCH " + option for option in sysentry["sbatch_options"]]
    return "\n".join(lines)


def setup_block(table_path, system):
    """Modules, environment and setup lines of the system, in that order."""
    sysentry = entry(table_path, system)
    lines = []
    if sysentry["modules"]:
        lines.append("module load " + " ".join(sysentry["modules"]))
    for name, value in sysentry["environment"].items():
        lines.append('export {0}="{1}"'.format(name, value))
    lines += sysentry["setup"]
    return "\n".join(lines) if lines else "# system '{0}' sets no modules or environment".format(
        system)
