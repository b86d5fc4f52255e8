"""System table and job-script pieces for the scaffold JUBE campaigns.

JUBE evaluates the python-mode parameters of jube/common.yaml, jube/scaffold.yaml and
jube/image_classification.yaml by calling these functions
(`runpy.run_path` of this file) inside its own interpreter, which always has PyYAML because
JUBE's YAML input needs it. Everything here is a pure function of its arguments, the system
table and the run's stored tags; every user mistake raises ValueError with a message that
names the system, field, tag or value, which JUBE prints and stops on. Nothing here runs a job.
"""

import copy
import os
import sys
import types
import xml.etree.ElementTree as ET

import yaml

# Tags every campaign understands besides the system names of the table; a campaign adds its
# own through select_system's campaign_tags.
MODIFIER_TAGS = ("dryrun", "container")
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
    "signal": (str, "USR2@120"),  # sbatch --signal of training jobs; "" for none
    # srun's binding, rendered where the launcher has {binding} (docs/campaigns.md, "Binding").
    "cpu_bind": (str, ""),          # --cpu-bind=VALUE; "" leaves it out
    "gpus_per_task": (int, 0),      # --gpus-per-task=N; 0 leaves it out
    "gpu_bind": (str, ""),          # --gpu-bind=VALUE; "" leaves it out
    "workers": (int, 0),            # data-loader workers per rank; 0: cpus_per_rank / 4
    "power_methods": (list, []),    # SCAFFOLD_POWER_METHODS of the jobs; []: auto
    "container": (dict, {}),        # the image the `container` tag runs the jobs in
}
# The `container` field's keys: (type, default); None marks a required key (docs/deploy.md).
CONTAINER_FIELDS = {
    "runtime": (str, None),         # apptainer or podman
    "image": (str, None),           # a SIF file (apptainer) or an image name (podman)
    "binds": (list, []),            # more SRC[:DST[:OPTS]] mounts besides the repo and outpath
    "gpu": (str, ""),               # nv, rocm or none; "": nv where device is cuda, else none
    "options": (str, ""),           # more options of `apptainer exec` / `podman run`
    "runtime_options": (str, ""),   # options before the subcommand (`podman --log-level ...`)
}
CONTAINER_RUNTIMES = ("apptainer", "podman")
CONTAINER_GPUS = ("nv", "rocm", "none")
# A tag known not to run has `unsupported` (the reason) and at most `description` instead.
OPTIONAL_NONE = ("launcher_one_rank",)
# scaffold's power methods (docs/energy.md), the values of `power_methods`, and jpwr's names that
# scaffold's energy meter takes as well: pynvml is nvml, gh the GH200 module meters of hwmon alone.
POWER_METHODS = ("nvml", "rocm", "hwmon", "rapl")
JPWR_POWER_METHODS = {"pynvml": "nvml", "gh": "gh"}
# Slurm's --cpu-bind and --gpu-bind keywords (srun(1)); a map_/mask_ value takes a list after ':'.
CPU_BIND_WORDS = ("none", "no", "rank", "rank_ldom", "sockets", "socket", "cores", "core", "threads",
                  "thread", "ldoms", "ldom", "boards", "board", "verbose", "v", "quiet", "q")
CPU_BIND_LISTS = ("map_cpu", "mask_cpu", "map_ldom", "mask_ldom")
GPU_BIND_WORDS = ("none", "closest", "verbose", "v")
GPU_BIND_LISTS = ("map_gpu", "mask_gpu", "per_task", "single")


def _fail(message):
    raise ValueError(message)


def _check_entry(path, name, entry):
    where = "{0}: system '{1}'".format(path, name)
    if not isinstance(entry, dict):
        _fail("{0}: an entry is a mapping of fields, got {1!r}".format(where, entry))
    if "unsupported" in entry:
        return _check_unsupported(where, entry)
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
        if field == "container":
            out[field] = _check_container(where, value)
            continue
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
    _check_signal(where, out)
    _check_binding(where, out)
    _check_power(where, out)
    if out["workers"] < 0:
        _fail("{0}: field 'workers' must be >= 0 (0: cpus_per_rank / 4), got {1}".format(
            where, out["workers"]))
    return out


def _check_container(where, value):
    """The `container` field: a mapping of CONTAINER_FIELDS. Its strings go into the job line
    inside a Python string and a shell line, so they may not hold single quotes or newlines."""
    if not isinstance(value, dict):
        _fail("{0}: field 'container' must be a mapping (runtime, image, binds, gpu, options, "
              "runtime_options), got {1!r}".format(where, value))
    unknown = sorted(set(value) - set(CONTAINER_FIELDS))
    if unknown:
        _fail("{0}: field 'container': unknown key(s) {1} (keys: {2})".format(
            where, ", ".join(unknown), ", ".join(CONTAINER_FIELDS)))
    out = {}
    for key, (kind, default) in CONTAINER_FIELDS.items():
        item = value.get(key)
        if item is None:
            if default is None:
                _fail("{0}: field 'container' needs '{1}'".format(where, key))
            out[key] = type(default)() if isinstance(default, list) else default
            continue
        if kind is str and not isinstance(item, str):
            _fail("{0}: field 'container' key '{1}' must be a string, got {2!r}".format(
                where, key, item))
        if kind is list and not (isinstance(item, list) and all(isinstance(v, str) for v in item)):
            _fail("{0}: field 'container' key '{1}' must be a list of strings, got {2!r}".format(
                where, key, item))
        for text in (item if isinstance(item, list) else [item]):
            if "'" in text or "\n" in text:
                _fail("{0}: field 'container' key '{1}' {2!r}: no single quotes or newlines "
                      "(the value goes into the job line; use double quotes)".format(
                          where, key, text))
        out[key] = item
    if out["runtime"] not in CONTAINER_RUNTIMES:
        _fail("{0}: field 'container' runtime '{1}' is not one of {2}".format(
            where, out["runtime"], ", ".join(CONTAINER_RUNTIMES)))
    if not out["image"].strip():
        _fail("{0}: field 'container' image is empty".format(where))
    if out["gpu"] and out["gpu"] not in CONTAINER_GPUS:
        _fail("{0}: field 'container' gpu '{1}' is not one of {2} (or \"\": nv where device is "
              "cuda)".format(where, out["gpu"], ", ".join(CONTAINER_GPUS)))
    for bind in out["binds"]:
        parts = bind.split(":")
        if not parts[0].startswith(("/", "$")) or len(parts) > 3 or not all(parts):
            _fail("{0}: field 'container' bind '{1}' is not SRC[:DST[:OPTS]] with an absolute "
                  "SRC".format(where, bind))
    return out


def _check_unsupported(where, entry):
    """An entry that names a tag scaffold cannot run: `unsupported` (the reason) and an optional
    `description`, nothing else, so that it cannot be half a system."""
    extra = sorted(set(entry) - {"unsupported", "description"})
    if extra:
        _fail("{0}: an 'unsupported' entry has only 'unsupported' (the reason) and 'description'; "
              "it also sets {1}".format(where, ", ".join(extra)))
    for field in ("unsupported", "description"):
        value = entry.get(field, "")
        if not isinstance(value, str) or (field == "unsupported" and not value.strip()):
            _fail("{0}: field '{1}' must be a {2}string, got {3!r}".format(
                where, field, "non-empty " if field == "unsupported" else "", value))
    return {"unsupported": entry["unsupported"].strip(),
            "description": entry.get("description", "")}


def _check_bind_value(where, field, value, words, lists):
    """A Slurm --cpu-bind / --gpu-bind value: comma-separated keywords, or NAME:LIST where a
    list may go on over the following commas (map_cpu:0,1,2)."""
    expected = "comma-separated {0}, or {1} followed by ':' and a list".format(
        "/".join(words), "/".join(lists))
    in_list = False
    for token in value.split(","):
        token = token.strip()
        name, colon, arg = token.partition(":")
        if colon:
            if name not in lists or not arg:
                _fail("{0}: field '{1}' '{2}': '{3}' is not a Slurm binding ({4})".format(
                    where, field, value, token, expected))
            if name in ("per_task", "single") and not arg.isdigit():
                _fail("{0}: field '{1}' '{2}': {3} takes a number of GPUs, got '{4}'".format(
                    where, field, value, name, arg))
            in_list = name not in ("per_task", "single")
        elif in_list and token and all(c in "0123456789abcdefABCDEFx*" for c in token):
            continue
        elif token not in words:
            _fail("{0}: field '{1}' '{2}': '{3}' is not a Slurm binding ({4})".format(
                where, field, value, token, expected))
        else:
            in_list = False


def _check_binding(where, sysentry):
    """cpu_bind, gpus_per_task and gpu_bind are valid Slurm values and reach the launcher: a
    value set for a launcher without {binding} would silently do nothing."""
    if sysentry["cpu_bind"]:
        _check_bind_value(where, "cpu_bind", sysentry["cpu_bind"], CPU_BIND_WORDS,
                          CPU_BIND_LISTS)
    if sysentry["gpu_bind"]:
        _check_bind_value(where, "gpu_bind", sysentry["gpu_bind"], GPU_BIND_WORDS,
                          GPU_BIND_LISTS)
    if sysentry["gpus_per_task"] < 0:
        _fail("{0}: field 'gpus_per_task' must be >= 0 (0 leaves --gpus-per-task out), got "
              "{1}".format(where, sysentry["gpus_per_task"]))
    set_fields = [f for f in ("cpu_bind", "gpus_per_task", "gpu_bind") if sysentry[f]]
    if set_fields and "{binding}" not in sysentry["launcher"]:
        _fail("{0}: field(s) {1} set, but the launcher '{2}' has no {{binding}} placeholder "
              "where they go".format(where, ", ".join(set_fields), sysentry["launcher"]))


def _check_power(where, sysentry):
    methods = sysentry["power_methods"]
    if "gc" in methods:
        _fail("{0}: field 'power_methods' {1!r}: jpwr's 'gc' (Graphcore IPU power through the "
              "Poplar SDK) is not supported: scaffold runs no workload on IPUs".format(where, methods))
    bad = [m for m in methods if m not in POWER_METHODS and m not in JPWR_POWER_METHODS]
    same = [JPWR_POWER_METHODS.get(m, m) for m in methods]  # pynvml and nvml are one method
    if bad or len(set(same)) != len(same):
        _fail("{0}: field 'power_methods' {1!r}: expected distinct names of {2} or jpwr's "
              "pynvml (= nvml) and gh (the GH200 hwmon meters alone), or [] for "
              "auto".format(where, methods, ", ".join(POWER_METHODS)))
    if methods and "SCAFFOLD_POWER_METHODS" in sysentry["environment"]:
        _fail("{0}: power_methods and environment SCAFFOLD_POWER_METHODS both set; keep "
              "power_methods".format(where))


# Signals scaffold can stop on (its --stop-signals); USR2 and TERM are its default.
STOP_SIGNALS = ("USR1", "USR2", "TERM", "INT", "HUP", "QUIT", "XCPU")
DEFAULT_STOP_SIGNALS = ("USR2", "TERM")


def _parse_signal(text):
    """'USR2@120' -> ('USR2', 120); None for ''. Raises ValueError with the reason."""
    if text == "":
        return None
    name, at, seconds = text.partition("@")
    if name.upper().startswith("B:"):
        raise ValueError("'B:' would signal only the batch shell, which does not pass it on; "
                         "write '{0}' so Slurm signals scaffold's tasks (srun steps)".format(
                             text[2:]))
    name = name.upper()[3:] if name.upper().startswith("SIG") else name.upper()
    if name not in STOP_SIGNALS or not at or not seconds.isdigit() or int(seconds) < 1:
        raise ValueError("expected NAME@SECONDS, NAME one of {0} (e.g. USR2@120: SIGUSR2 120 s "
                         "before the time limit), or \"\" for none".format(", ".join(STOP_SIGNALS)))
    return name, int(seconds)


def _check_signal(where, sysentry):
    """The time-limit signal of a system: valid, and able to reach scaffold. Slurm signals job
    steps (srun's tasks) but not the batch script, so a one-rank job run without srun would
    never see it."""
    try:
        parsed = _parse_signal(sysentry["signal"])
    except ValueError as error:
        _fail("{0}: field 'signal' '{1}': {2}".format(where, sysentry["signal"], error))
    if parsed and sysentry["scheduler"] == "slurm" and sysentry["launcher_one_rank"] == "":
        _fail("{0}: field 'signal' '{1}' cannot reach a one-rank job that runs scaffold without "
              "srun (launcher_one_rank \"\"): Slurm signals job steps only. Drop "
              "launcher_one_rank (srun for one rank too) or set signal: \"\"".format(
                  where, sysentry["signal"]))


# JUBE runs this file afresh (runpy) for every parameter it evaluates, hundreds of times in one
# `jube run`, so a module-level cache would not survive: validated tables are kept in a module
# registered in sys.modules, which lives as long as JUBE's interpreter. Keyed by the file's path,
# modification time and size, so an edited table is read again.
_CACHE_MODULE = "scaffold_jube_table_cache"
# libyaml's parser where PyYAML was built with it (Debian's is): the table is read in
# milliseconds instead of a tenth of a second.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _table_cache():
    module = sys.modules.get(_CACHE_MODULE)
    if module is None:
        module = types.ModuleType(_CACHE_MODULE)
        module.tables = {}
        sys.modules[_CACHE_MODULE] = module
    return module.tables


def load_table(path):
    """The whole table, every entry validated (a broken entry is an error for any system)."""
    try:
        stat = os.stat(path)
    except OSError as error:
        _fail("cannot read the system table {0}: {1}".format(path, error.strerror))
    key = (os.path.abspath(path), stat.st_mtime_ns, stat.st_size)
    cache = _table_cache()
    if key not in cache:
        try:
            with open(path) as handle:
                data = yaml.load(handle, Loader=_YAML_LOADER)
        except OSError as error:
            _fail("cannot read the system table {0}: {1}".format(path, error.strerror))
        except yaml.YAMLError as error:
            _fail("the system table {0} is not valid YAML: {1}".format(path, error))
        if not isinstance(data, dict) or not data:
            _fail("the system table {0} must map system names to entries".format(path))
        cache[key] = {str(name): _check_entry(path, name, entry) for name, entry in data.items()}
    # A copy: a caller may change what it gets without changing the next caller's table.
    return copy.deepcopy(cache[key])


def runnable(table):
    """The table's systems that can run (not `unsupported`)."""
    return {name: e for name, e in table.items() if "unsupported" not in e}


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
    for tag in tags:
        if tag in table and "unsupported" in table[tag]:
            _fail("system '{0}' is not supported: {1} ({2})".format(
                tag, table[tag]["unsupported"], table_path))
    systems = [tag for tag in tags if tag in table]
    unknown = [tag for tag in tags if tag not in table and tag not in known]
    if unknown:
        _fail("unknown tag(s) {0}: not a system of {1} (systems: {2}) nor a campaign tag ({3}). "
              "Add an entry to the table to benchmark a new system.".format(
                  ", ".join("'{0}'".format(t) for t in unknown), table_path,
                  ", ".join(sorted(runnable(table))), ", ".join(known)))
    if len(systems) > 1:
        _fail("tags select several systems ({0}); give one".format(", ".join(systems)))
    if systems:
        return systems[0]
    if DEFAULT_SYSTEM not in runnable(table):
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


def container_mode(rundir):
    """Whether the run was started with the `container` tag."""
    return "container" in run_tags(rundir) if rundir else False


def container_image(table_path, system, repo):
    """The image of the system's container: $SCAFFOLD_IMAGE, else the `image` key. A relative
    SIF path is the repository's (containers/scaffold.sif); a podman image name stays."""
    container = entry(table_path, system)["container"]
    image = os.environ.get("SCAFFOLD_IMAGE", "") or container["image"]
    if "'" in image or "\n" in image:
        _fail("SCAFFOLD_IMAGE {0!r}: no single quotes or newlines (it goes into the job line)"
              .format(image))
    if container["runtime"] == "apptainer" and not image.startswith(("/", "$")) and \
            "://" not in image:
        image = os.path.join(repo, image)
    return image


def container_prefix(table_path, system, rundir, repo):
    """The words that run scaffold in the system's container, ending with the program's name
    inside the image (`scaffold`, on the image's PATH):
      apptainer exec --bind B ... [--nv|--rocm] OPTIONS IMAGE scaffold
      podman $(podman-options global) run $(podman-options run) --rm --network=host --ipc=host
        -v B:B ... -e "SLURM_JOB_*" -e NAME ... -w "$PWD" [GPU devices] OPTIONS IMAGE scaffold
    Both mount the repository (the configs the commands name), the campaign's outpath (the work
    packages and the default data folder), the system's data_dir and `binds` at the same paths,
    so every path of the job line is the same inside. podman passes on no environment by
    itself: Slurm's job variables, the system's environment names (and SCAFFOLD_POWER_METHODS)
    are passed with -e; apptainer passes the job's whole environment."""
    sysentry = entry(table_path, system)
    container = sysentry["container"]
    if not container:
        _fail("system '{0}' has no 'container' field, which the container tag needs: add e.g. "
              "container: {{runtime: apptainer, image: containers/scaffold.sif}} to its entry "
              "in {1} (docs/deploy.md)".format(system, table_path))
    outpath = os.path.dirname(os.path.abspath(rundir))
    paths = [os.path.abspath(repo), outpath]
    if sysentry["data_dir"] and not sysentry["data_dir"].startswith(outpath + os.sep):
        paths.append(sysentry["data_dir"])
    binds = ["{0}:{0}".format(p) for p in paths]
    binds += [b if ":" in b else "{0}:{0}".format(b) for b in container["binds"]]
    gpu = container["gpu"] or ("nv" if sysentry["device"] == "cuda" else "none")
    image = container_image(table_path, system, repo)
    words = []
    if container["runtime"] == "apptainer":
        words += ["apptainer", container["runtime_options"], "exec"]
        words += ['--bind "{0}"'.format(b) for b in binds]
        words.append({"nv": "--nv", "rocm": "--rocm", "none": ""}[gpu])
    else:
        lib = os.path.join(os.path.abspath(repo), "jube", "lib", "podman-options")
        names = list(sysentry["environment"])
        if sysentry["power_methods"]:
            names.append("SCAFFOLD_POWER_METHODS")
        words += ["podman", container["runtime_options"], '$("{0}" global)'.format(lib), "run",
                  '$("{0}" run)'.format(lib), "--rm --network=host --ipc=host"]
        words += ['-v "{0}"'.format(b) for b in binds]
        # The job's record (SLURM_JOB_ID, _PARTITION, ... for summary.json), not the step's or
        # PMIx's variables: each process inside is a world of one.
        words.append('-e "SLURM_JOB_*"')
        words += ["-e " + name for name in names]
        words.append('-w "$PWD"')
        words.append({"nv": "--device nvidia.com/gpu=all",
                      "rocm": "--device /dev/kfd --device /dev/dri --group-add keep-groups",
                      "none": ""}[gpu])
    words += [container["options"], '"{0}"'.format(image), "scaffold"]
    return " ".join(w for w in words if w)


def scaffold_binary(table_path, system, repo, dryrun, rundir=""):
    """The system's `scaffold` field, else $SCAFFOLD_BIN, else the repository's build. With the
    `container` tag, the words that run the image's scaffold (container_prefix)."""
    if container_mode(rundir):
        return container_prefix(table_path, system, rundir, repo)
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
    """The data-loader workers per rank: the system's `workers`, else CARAML's rule threads / 4
    ('' without either: the config's dataloader_num_workers)."""
    sysentry = entry(table_path, system)
    if sysentry["workers"] > 0:
        return "--dataloader-num-workers {0}".format(sysentry["workers"])
    cpus = sysentry["cpus_per_rank"]
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
        text = template.format(ranks=int(ranks), nodes=node_count, tasks_per_node=per_node,
                               cpus_per_rank=sysentry["cpus_per_rank"],
                               binding=binding(sysentry))
    except (KeyError, IndexError, ValueError) as error:
        _fail("system '{0}': launcher '{1}' has an unknown placeholder {2} (known: {{ranks}}, "
              "{{nodes}}, {{tasks_per_node}}, {{cpus_per_rank}}, {{binding}})".format(
                  system, template, error))
    return " ".join(text.split())


def binding(sysentry):
    """srun's binding options of a system: --cpu-bind, --gpus-per-task, --gpu-bind, each left
    out when unset (the launcher's {binding})."""
    options = []
    if sysentry["cpu_bind"]:
        options.append("--cpu-bind=" + sysentry["cpu_bind"])
    if sysentry["gpus_per_task"] > 0:
        options.append("--gpus-per-task={0}".format(sysentry["gpus_per_task"]))
    if sysentry["gpu_bind"]:
        options.append("--gpu-bind=" + sysentry["gpu_bind"])
    return " ".join(options)


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
    signal = _parse_signal(sysentry["signal"])
    if str(prep) != "1" and signal:  # the time-limit warning to scaffold (docs/campaigns.md)
        options.append(("signal", "{0}@{1}".format(*signal)))
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
    if sysentry["power_methods"]:  # read by scaffold's energy meter (docs/energy.md)
        lines.append('export SCAFFOLD_POWER_METHODS="{0}"'.format(
            ",".join(sysentry["power_methods"])))
    lines += sysentry["setup"]
    return "\n".join(lines) if lines else "# system '{0}' sets no modules or environment".format(
        system)


def stop_signals_flag(table_path, system):
    """`--stop-signals NAME` when the system's time-limit signal is not one scaffold stops on
    anyway (USR2, TERM); '' otherwise."""
    parsed = _parse_signal(entry(table_path, system)["signal"])
    if parsed is None or parsed[0] in DEFAULT_STOP_SIGNALS:
        return ""
    return "--stop-signals {0},TERM".format(parsed[0])


def job_done_file(table_path, system):
    """JUBE's done file of a job step: `ready`, written by the job when it runs here; under
    Slurm `submitted`, written once sbatch took it, so the next step is submitted at once with
    a dependency on it and one `jube run` submits the whole campaign (lib/submit)."""
    return "submitted" if entry(table_path, system)["scheduler"] == "slurm" else "ready"
