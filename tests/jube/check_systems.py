#!/usr/bin/env python3
"""Tests of the system catalogue under CARAML's tag names (jube/systems.yaml, docs/campaigns.md
"CARAML's systems"), run by ctest (tests/jube/CMakeLists.txt).

  systems  every CARAML tag renders its job script with `jube run ... --tag <TAG> dryrun`, as the
           campaigns do: the image-classification job (global batch 256) of A100, H100, WAIH100,
           GH200, JEDI, MI250, MI300X and MI300A, and the FNO job (RBC2D, tp_size 4) of MILA and
           GB200, CARAML's FNO-only tags. Each script equals, line by line, the one written out
           by hand below from CARAML's JUBE files (partition, gres, nodes, CPUs, binding, srun
           options, time limit, environment, power methods), not from the renderer. GC200 stops
           the run with the reason it is unsupported.
  systems_container  the container mode (`--tag container`, docs/deploy.md), dry runs: A100's
           image-classification job runs `srun ... apptainer exec --bind <repo> --bind <outpath> --nv
           <repo>/containers/scaffold-cuda.sif scaffold ...`, MI250's `--rocm` with the ROCm
           image, slurm-cpu's neither, SCAFFOLD_IMAGE picks another image; the smoke campaign on
           `local` runs `podman $(podman-options global) run $(podman-options run) --rm ...
           -v <repo> -v <outpath> -w "$PWD" IMAGE scaffold ...` for each of its three job steps;
           the report line runs the image's scaffold too. Each line is written out by hand here.
           A system without a `container` field refuses the tag, naming the system.
  systems_errors  the new fields are validated like the old ones: an unknown field, a wrong type,
           a binding Slurm does not know, a binding the launcher has no {binding} for, an unknown
           power method, an unsupported entry with system fields: each an error that names the
           system and the field.

Usage: check_systems.py TEST --scaffold BIN --jube JUBE --repo DIR [--keep]
"""

import argparse
import glob
import os
import runpy
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from check_campaigns import Env, Failure, check, compare_lines, run_in_temp  # noqa: E402

# The lines every job script has around its system's header, setup and launcher (jube/job.sh.in).
IMGCLS_SCRIPT = """#!/bin/bash
#SBATCH --job-name=scaffold-imgcls-train-{wp}
{header}
#SBATCH --signal=USR2@120
#SBATCH --output={work}/job.out
#SBATCH --error={work}/job.err{extra}
# scaffold campaign 'imgcls', step 'train', system '{system}': rendered by JUBE from
# jube/job.sh.in. To repeat this step by hand: bash job.sh >job.out 2>job.err (or submit it).
cd "{work}" || exit 1
rm -f ready error finished
# A scheduler's kill (time limit, scancel) still ends the step for JUBE: status, then `error`.
trap '"{repo}/jube/lib/finish-job" train 143 "killed by SIGTERM"; exit 143' TERM
{setup}

{launch} {bin} image_classification -c {repo}/configs/image_classification.yml --model resnet50 --dataset synthetic --global-batch-size 256 --precision fp16 --epochs 100 --warmup-epochs 5 --device cuda --dataloader-num-workers {workers} --base-run-dir {work} --job-name image_classification --threads {threads}
"{repo}/jube/lib/report-run" $? {bin} {work}/image_classification_*/
"{repo}/jube/lib/finish-job" train $?
"""

FNO_SCRIPT = """#!/bin/bash
#SBATCH --job-name=scaffold-fno-train-{wp}
{header}
#SBATCH --signal=USR2@120
#SBATCH --output={work}/job.out
#SBATCH --error={work}/job.err{extra}
# scaffold campaign 'fno', step 'train', system '{system}': rendered by JUBE from
# jube/job.sh.in. To repeat this step by hand: bash job.sh >job.out 2>job.err (or submit it).
cd "{work}" || exit 1
rm -f ready error finished
# A scheduler's kill (time limit, scancel) still ends the step for JUBE: status, then `error`.
trap '"{repo}/jube/lib/finish-job" train 143 "killed by SIGTERM"; exit 143' TERM
{setup}

{launch} {bin} fno -c {repo}/configs/fno.yml --tp-size 4 --data-dir {out}/data/fno --device cuda --dataloader-num-workers {workers} --base-run-dir {work} --job-name fno --threads {threads}
"{repo}/jube/lib/report-run" $? {bin} {work}/fno_*/
"{repo}/jube/lib/finish-job" train $?
"""

NVIDIA_JSC_MODULES = "module load Stages/2025 GCC OpenMPI CUDA"
AMD_SETUP = """export SRUN_CPUS_PER_TASK="$SLURM_CPUS_PER_TASK"
export ROCM_VISIBLE_DEVICES="0,1,2,3,4,5,6,7"
export MIOPEN_USER_DB_PATH="$PWD/miopen_cache"
export MIOPEN_CUSTOM_CACHE_DIR="$MIOPEN_USER_DB_PATH"
export MIOPEN_DEBUG_DISABLE_FIND_DB="1"
export MIOPEN_DISABLE_CACHE="true"
export MIOPEN_DEBUG_DISABLE_SQL_WAL="1"
export MIOPEN_ENABLE_LOG="1"
export MIOPEN_DEBUG="1"
export SCAFFOLD_POWER_METHODS="rocm"
rm -rf "$MIOPEN_USER_DB_PATH"
mkdir -p "$MIOPEN_USER_DB_PATH\""""

# Written by hand from CARAML's files (image_classification_torch_benchmark.xml 2025.01:
# nodes, gpus_per_node, threadspertask, queue, timelimit, args_starter, load_modules, preprocess,
# additional_job_config, the trainer's jpwr methods; llm_benchmark_nvidia_amd.yaml: gres;
# fno_benchmark.yaml 2026.02 for MILA and GB200), with CARAML's one task per node of
# threadspertask CPUs turned into one rank per device of threadspertask / devices CPUs and
# num_workers = threadspertask / 4. Global batch 256 over the nodes' devices.
EXPECTED = {
    "A100": dict(
        campaign="imgcls", workers=18, threads=18, extra="",
        header="""#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=18
#SBATCH --time=00:20:00
#SBATCH --partition=dc-gpu-devel
#SBATCH --gres=gpu:4""",
        setup=NVIDIA_JSC_MODULES + """
export SCAFFOLD_SYSTEM="A100"
export SRUN_CPUS_PER_TASK="$SLURM_CPUS_PER_TASK"
export NCCL_SOCKET_IFNAME="ib0"
export GLOO_SOCKET_IFNAME="ib0"
export CUDA_VISIBLE_DEVICES="0,1,2,3"
export SCAFFOLD_POWER_METHODS="nvml\"""",
        launch="srun --disable-dcgm --mpi=pspmix --ntasks=8 --ntasks-per-node=4 "
               "--cpus-per-task=18 --cpu-bind=none,v env PMIX_SECURITY_MODE=native"),
    "H100": dict(
        campaign="imgcls", workers=18, threads=18, extra="",
        header="""#SBATCH --nodes=1
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=18
#SBATCH --time=00:20:00
#SBATCH --partition=dc-h100
#SBATCH --gres=gpu:4""",
        setup=NVIDIA_JSC_MODULES + """
export SCAFFOLD_SYSTEM="H100"
export SRUN_CPUS_PER_TASK="$SLURM_CPUS_PER_TASK"
export NCCL_SOCKET_IFNAME="ib0"
export GLOO_SOCKET_IFNAME="ib0"
export CUDA_VISIBLE_DEVICES="0,1,2,3"
export SCAFFOLD_POWER_METHODS="nvml\"""",
        launch="srun --mpi=pspmix --ntasks=4 --ntasks-per-node=4 --cpus-per-task=18 "
               "--cpu-bind=none,v env PMIX_SECURITY_MODE=native"),
    "WAIH100": dict(
        campaign="imgcls", workers=16, threads=16, extra="",
        header="""#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=16
#SBATCH --time=00:20:00
#SBATCH --partition=dc-hwai
#SBATCH --gres=gpu:4""",
        setup=NVIDIA_JSC_MODULES + """
export SCAFFOLD_SYSTEM="WAIH100"
export SRUN_CPUS_PER_TASK="$SLURM_CPUS_PER_TASK"
export NCCL_SOCKET_IFNAME="ib0"
export GLOO_SOCKET_IFNAME="ib0"
export CUDA_VISIBLE_DEVICES="0,1,2,3"
export SCAFFOLD_POWER_METHODS="nvml\"""",
        launch="srun --disable-dcgm --mpi=pspmix --ntasks=8 --ntasks-per-node=4 "
               "--cpus-per-task=16 --cpu-bind=none,v env PMIX_SECURITY_MODE=native"),
    "GH200": dict(
        campaign="imgcls", workers=18, threads=72, extra="",
        header="""#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=72
#SBATCH --time=00:20:00
#SBATCH --partition=dc-gh
#SBATCH --gres=gpu:1""",
        setup=NVIDIA_JSC_MODULES + """
export SCAFFOLD_SYSTEM="GH200"
export SRUN_CPUS_PER_TASK="$SLURM_CPUS_PER_TASK"
export CUDA_VISIBLE_DEVICES="0,1,2,3"
export SCAFFOLD_POWER_METHODS="nvml,hwmon\"""",
        launch="srun --mpi=pspmix --ntasks=1 --ntasks-per-node=1 --cpus-per-task=72 "
               "--cpu-bind=socket,v env PMIX_SECURITY_MODE=native"),
    "JEDI": dict(
        campaign="imgcls", workers=18, threads=18, extra="",
        header="""#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=18
#SBATCH --time=00:20:00
#SBATCH --partition=all
#SBATCH --gres=gpu:4""",
        setup=NVIDIA_JSC_MODULES + """
export SCAFFOLD_SYSTEM="JEDI"
export SRUN_CPUS_PER_TASK="$SLURM_CPUS_PER_TASK"
export NCCL_SOCKET_IFNAME="ib0"
export GLOO_SOCKET_IFNAME="ib0"
export CUDA_VISIBLE_DEVICES="0,1,2,3"
export SCAFFOLD_POWER_METHODS="nvml,hwmon\"""",
        launch="srun --mpi=pmi2 --ntasks=8 --ntasks-per-node=4 --cpus-per-task=18 "
               "--cpu-bind=socket,v"),
    # 8 GCDs per node, no gres (CARAML requests none): all 8 visible, rank i takes GCD i.
    "MI250": dict(
        campaign="imgcls", workers=12, threads=6, extra="",
        header="""#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --cpus-per-task=6
#SBATCH --time=00:20:00
#SBATCH --partition=dc-mi200""",
        setup='export SCAFFOLD_SYSTEM="MI250"\n' + AMD_SETUP,
        launch="srun --mpi=pspmix --ntasks=16 --ntasks-per-node=8 --cpus-per-task=6 "
               "--cpu-bind=none,v env PMIX_SECURITY_MODE=native"),
    "MI300X": dict(
        campaign="imgcls", workers=12, threads=6, extra="\n#SBATCH --constraint=mi300x",
        header="""#SBATCH --nodes=1
#SBATCH --ntasks-per-node=8
#SBATCH --cpus-per-task=6
#SBATCH --time=00:20:00""",
        setup='export SCAFFOLD_SYSTEM="MI300X"\n' + AMD_SETUP,
        launch="srun --ntasks=8 --ntasks-per-node=8 --cpus-per-task=6 --cpu-bind=none,v"),
    "MI300A": dict(
        campaign="imgcls", workers=12, threads=12, extra="\n#SBATCH --constraint=mi300a",
        header="""#SBATCH --nodes=1
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=12
#SBATCH --time=00:20:00""",
        setup='export SCAFFOLD_SYSTEM="MI300A"\n' + AMD_SETUP,
        launch="srun --ntasks=4 --ntasks-per-node=4 --cpus-per-task=12 --cpu-bind=none,v"),
    # FNO's tags: tp_size 4 on one GPU per node (MILA) is 4 nodes; on GB200 one 4-GPU node.
    # Workers: CARAML's rule threads / 4 of the rank's threads (4 / 4; 8 / 4).
    "MILA": dict(
        campaign="fno", workers=1, threads=4, extra="\n#SBATCH --constraint=ampere,80gb",
        header="""#SBATCH --nodes=4
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=4
#SBATCH --time=00:45:00
#SBATCH --partition=long
#SBATCH --gres=gpu:1""",
        setup="""export SCAFFOLD_SYSTEM="MILA"
export SRUN_CPUS_PER_TASK="$SLURM_CPUS_PER_TASK"
export NCCL_SOCKET_IFNAME="ib0"
export GLOO_SOCKET_IFNAME="ib0"
export CUDA_VISIBLE_DEVICES="0,1,2,3"
export TORCH_NCCL_ASYNC_ERROR_HANDLING="1"
export OMP_NUM_THREADS="4"
export PYTORCH_CUDA_ALLOC_CONF="max_split_size_mb:128,garbage_collection_threshold:0.8"
export SCAFFOLD_POWER_METHODS="nvml\"""",
        launch="srun --ntasks=4 --ntasks-per-node=1 --cpus-per-task=4 --cpu-bind=v"),
    "GB200": dict(
        campaign="fno", workers=2, threads=8, extra="",
        header="""#SBATCH --nodes=1
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=8
#SBATCH --time=00:45:00
#SBATCH --gres=gpu:4""",
        setup="""export SCAFFOLD_SYSTEM="GB200"
export SRUN_CPUS_PER_TASK="$SLURM_CPUS_PER_TASK"
export CUDA_VISIBLE_DEVICES="0,1,2,3"
export TORCH_NCCL_ASYNC_ERROR_HANDLING="1"
export OMP_NUM_THREADS="4"
export PYTORCH_CUDA_ALLOC_CONF="max_split_size_mb:128,garbage_collection_threshold:0.8"
export SCAFFOLD_POWER_METHODS="nvml\"""",
        launch="srun --mpi=pmi2 --ntasks=4 --ntasks-per-node=4 --cpus-per-task=8 --cpu-bind=v"),
}

CARAML_TAGS = ["A100", "H100", "WAIH100", "GH200", "JEDI", "MI250", "MI300X", "MI300A", "MILA",
               "GB200"]


def rendered_script(out, campaign):
    """(work package id, work folder, job.sh text) of the job script to compare: the
    image-classification run of global batch 256, or the FNO run of tp_size 4."""
    needle = "--global-batch-size 256 " if campaign == "imgcls" else "--tp-size 4 "
    found = []
    for path in glob.glob(os.path.join(out, "000000", "*_train", "work", "job.sh")):
        with open(path) as handle:
            text = handle.read()
        if needle in text:
            work = os.path.dirname(path)
            found.append((int(os.path.basename(os.path.dirname(work)).split("_")[0]), work, text))
    check(len(found) == 1, "{0}: expected one job script with '{1}', found {2}".format(
        out, needle.strip(), len(found)))
    return found[0]


def test_systems(env):
    repo = env.args.repo
    check(sorted(EXPECTED) == sorted(CARAML_TAGS), "the expectations cover every CARAML tag")
    for system in CARAML_TAGS:
        want = EXPECTED[system]
        out = os.path.join(env.tmp, "dry-" + system)
        if want["campaign"] == "imgcls":
            env.jube("run", "-e", "--hide-animation",
                     os.path.join(repo, "jube", "image_classification.yaml"),
                     "--tag", system, "dryrun", "-o", out)
            template = IMGCLS_SCRIPT
        else:
            env.jube("run", "-e", "--hide-animation", os.path.join(repo, "jube", "fno.yaml"),
                     "--tag", system, "RBC2D", "dryrun", "-o", out)
            template = FNO_SCRIPT
        wp, work, text = rendered_script(out, want["campaign"])
        expected = template.format(wp=wp, work=work, repo=repo, out=out, system=system,
                                   bin=env.args.scaffold, header=want["header"],
                                   extra=want["extra"], setup=want["setup"],
                                   launch=want["launch"], workers=want["workers"],
                                   threads=want["threads"])
        compare_lines(text, expected, "{0}: {1}/job.sh".format(system, work))
        print("{0}: the {1} job script equals the hand-written one".format(
            system, want["campaign"]))

    # GC200: named, and refused with its reason, before any job script exists.
    out = os.path.join(env.tmp, "dry-GC200")
    proc = env.jube("run", "-e", "--hide-animation",
                    os.path.join(repo, "jube", "image_classification.yaml"),
                    "--tag", "GC200", "dryrun", "-o", out, expect_ok=False)
    print(proc.stdout[-1200:])
    check(proc.returncode != 0, "--tag GC200 exited 0")
    check("system 'GC200' is not supported" in proc.stdout and "no IPU backend" in proc.stdout,
          "--tag GC200 does not say why it is unsupported")
    check(not glob.glob(os.path.join(out, "*", "*_train", "work", "job.sh")),
          "--tag GC200 rendered a job script")
    # A misspelt tag lists the runnable systems, CARAML's among them, and not GC200.
    proc = env.jube("run", "-e", "--hide-animation",
                    os.path.join(repo, "jube", "image_classification.yaml"),
                    "--tag", "A10", "dryrun", "-o", os.path.join(env.tmp, "dry-A10"),
                    expect_ok=False)
    check(proc.returncode != 0 and "unknown tag(s) 'A10'" in proc.stdout and
          "A100, GB200, GH200, H100, JEDI, MI250, MI300A, MI300X, MILA, WAIH100" in proc.stdout,
          "a misspelt tag does not list CARAML's systems:\n" + proc.stdout[-1500:])


def job_lines(out, step, needle):
    """The lines of the one job script of `step` whose text holds `needle`, and its folder."""
    found = []
    for path in glob.glob(os.path.join(out, "000000", "*_" + step, "work", "job.sh")):
        with open(path) as handle:
            text = handle.read()
        if needle in text:
            found.append((os.path.dirname(path), text.splitlines()))
    check(len(found) == 1, "{0}: expected one {1} job script with '{2}', found {3}".format(
        out, step, needle, len(found)))
    return found[0]


def test_systems_container(env):
    repo = env.args.repo
    imgcls = os.path.join(repo, "jube", "image_classification.yaml")
    cases = [  # system, image given by SCAFFOLD_IMAGE ("": the entry's), the expected wrapper
        ("A100", "", "srun --disable-dcgm --mpi=pspmix --ntasks=8 --ntasks-per-node=4 "
         "--cpus-per-task=18 --cpu-bind=none,v env PMIX_SECURITY_MODE=native apptainer exec "
         "--bind \"{repo}:{repo}\" --bind \"{out}:{out}\" --nv \"{repo}/containers/scaffold-cuda.sif\" scaffold"),
        ("MI250", "", "srun --mpi=pspmix --ntasks=16 --ntasks-per-node=8 --cpus-per-task=6 "
         "--cpu-bind=none,v env PMIX_SECURITY_MODE=native apptainer exec "
         "--bind \"{repo}:{repo}\" --bind \"{out}:{out}\" --rocm \"{repo}/containers/scaffold-rocm.sif\" scaffold"),
        ("slurm-cpu", "/sif/other.sif", "srun --ntasks=2 --ntasks-per-node=2 --cpus-per-task=32 "
         "--cpu-bind=sockets apptainer exec --bind \"{repo}:{repo}\" --bind \"{out}:{out}\" "
         "\"/sif/other.sif\" scaffold"),
    ]
    for system, image, wrapper in cases:
        out = os.path.join(env.tmp, "container-" + system)
        env.environ.pop("SCAFFOLD_IMAGE", None)
        if image:
            env.environ["SCAFFOLD_IMAGE"] = image
        env.jube("run", "-e", "--hide-animation", imgcls, "--tag", "container", system, "dryrun",
                 "-o", out)
        work, lines = job_lines(out, "train", "--global-batch-size 256 ")
        expected = wrapper.format(repo=repo, out=out)
        launch = [l for l in lines if " image_classification -c " in l]
        check(len(launch) == 1 and launch[0].startswith(expected + " image_classification -c "),
              "{0}: the launch line is not\n  {1} image_classification ...\nbut\n  {2}".format(
                  system, expected, launch))
        report = [l for l in lines if "/lib/report-run\" $? " in l]
        want = '"{0}/jube/lib/report-run" $? {1} {2}/image_classification_*/'.format(
            repo, expected[expected.index("apptainer exec"):], work)
        check(report == [want], "{0}: the report line is not\n  {1}\nbut\n  {2}".format(
            system, want, report))
        print("{0}: {1}".format(system, launch[0][:len(expected)]))
    env.environ.pop("SCAFFOLD_IMAGE", None)

    # podman on `local`: every job step of the smoke campaign, one rank, no launcher.
    out = os.path.join(env.tmp, "container-local")
    env.jube("run", "-e", "--hide-animation", os.path.join(repo, "jube", "smoke.yaml"), "--tag",
             "container", "dryrun", "-o", out)
    lib = os.path.join(repo, "jube", "lib", "podman-options")
    wrapper = ('podman $("{lib}" global) run $("{lib}" run) --rm --network=host --ipc=host '
               '-v "{repo}:{repo}" -v "{out}:{out}" -e "SLURM_JOB_*" -w "$PWD" "localhost/scaffold:latest" '
               'scaffold').format(lib=lib, repo=repo, out=out)
    for step, command in (("fractals", "generate_fractals"), ("dataset", "generate_dataset"),
                          ("benchmark", "benchmark")):
        work, lines = job_lines(out, step, "--local-batch-size 2 " if step == "benchmark" else "")
        launch = [l for l in lines if " {0} -c ".format(command) in l]
        check(len(launch) == 1 and launch[0].startswith(wrapper + " {0} -c ".format(command)),
              "local {0}: the launch line is not\n  {1} {2} ...\nbut\n  {3}".format(
                  step, wrapper, command, launch))
    print("local: " + wrapper)

    # The tag on a system without a container field: refused, naming it and the field.
    campaign = runpy.run_path(os.path.join(repo, "jube", "lib", "campaign.py"))
    path = os.path.join(env.tmp, "systems.yaml")
    with open(path, "w") as handle:
        handle.write(BASE_ENTRY)
    try:
        campaign["container_prefix"](path, "testsys", os.path.join(env.tmp, "run"), repo)
    except ValueError as error:
        message = str(error)
    else:
        raise Failure("the container tag was accepted for a system without a container field")
    check("system 'testsys' has no 'container' field" in message, message)
    print("refused: " + message)


BASE_ENTRY = """
testsys:
  scheduler: slurm
  devices_per_node: 4
  launcher: "srun --ntasks={ranks} {binding}"
"""

# (entry lines added to BASE_ENTRY, or a whole entry when it starts with a name; the words the
# error must contain).
BAD_ENTRIES = [
    ("  cpu_bind: sockets,bogus\n", ["system 'testsys'", "'cpu_bind'", "'bogus'"]),
    ("  gpu_bind: per_task:one\n", ["'gpu_bind'", "per_task takes a number"]),
    ("  gpu_bind: \"map_gpu:\"\n", ["'gpu_bind'", "'map_gpu:'"]),
    ("  gpus_per_task: \"1\"\n", ["'gpus_per_task' must be an integer"]),
    ("  gpus_per_task: -1\n", ["'gpus_per_task' must be >= 0"]),
    ("  workers: -2\n", ["'workers' must be >= 0"]),
    ("  power_methods: [nvml, gpu]\n", ["'power_methods'", "nvml, rocm, hwmon, rapl"]),
    ("  power_methods: [nvml, nvml]\n", ["'power_methods'", "distinct"]),
    ("  power_methods: [pynvml, nvml]\n", ["'power_methods'", "distinct", "pynvml (= nvml)"]),
    ("  power_methods: [pynvml, gc]\n", ["'power_methods'", "'gc'", "not supported"]),
    ("  power_methods: nvml\n", ["'power_methods' must be a list of strings"]),
    ("  power_methods: [rocm]\n  environment: {SCAFFOLD_POWER_METHODS: nvml}\n",
     ["both set"]),
    ("  cpu_bind_typo: none\n", ["unknown field(s) cpu_bind_typo"]),
    ("\nnobind:\n  scheduler: slurm\n  devices_per_node: 1\n  launcher: \"srun\"\n"
     "  cpu_bind: none\n", ["system 'nobind'", "no {binding} placeholder"]),
    ("\nipu:\n  unsupported: \"no backend\"\n  partition: dc-ipu\n",
     ["system 'ipu'", "only 'unsupported'", "partition"]),
    ("\nipu:\n  unsupported: \"\"\n", ["system 'ipu'", "non-empty string"]),
    ("  container: docker\n", ["system 'testsys'", "'container' must be a mapping"]),
    ("  container: {image: a.sif}\n", ["'container' needs 'runtime'"]),
    ("  container: {runtime: apptainer}\n", ["'container' needs 'image'"]),
    ("  container: {runtime: docker, image: a}\n", ["runtime 'docker'", "apptainer, podman"]),
    ("  container: {runtime: podman, image: a, bind: [/x]}\n", ["unknown key(s) bind"]),
    ("  container: {runtime: podman, image: a, gpu: cuda}\n", ["gpu 'cuda'", "nv, rocm, none"]),
    ("  container: {runtime: podman, image: a, binds: [scratch]}\n", ["bind 'scratch'",
                                                                     "absolute SRC"]),
    ("  container: {runtime: podman, image: a, binds: /x}\n", ["'binds' must be a list"]),
    ("  container: {runtime: apptainer, image: a, options: \"--env 'A=1'\"}\n",
     ["'options'", "no single quotes"]),
    ("  container: {runtime: podman, image: \"\"}\n", ["image is empty"]),
]


def test_systems_errors(env):
    campaign = runpy.run_path(os.path.join(env.args.repo, "jube", "lib", "campaign.py"))
    path = os.path.join(env.tmp, "systems.yaml")
    good_lines = "  cpu_bind: \"map_cpu:0,1,2,3,v\"\n  gpus_per_task: 1\n  gpu_bind: \"per_task:1\"\n"
    with open(path, "w") as handle:
        handle.write(BASE_ENTRY + good_lines)
    table = campaign["load_table"](path)
    check(campaign["launcher"](path, "testsys", 8) ==
          "srun --ntasks=8 --cpu-bind=map_cpu:0,1,2,3,v --gpus-per-task=1 --gpu-bind=per_task:1",
          "the {binding} of a valid entry: " + campaign["launcher"](path, "testsys", 8))
    check(table["testsys"]["power_methods"] == [], "power_methods defaults to auto ([])")
    # jpwr's method names, as CARAML's GH200 jobs give them (jpwr --methods pynvml gh).
    with open(path, "w") as handle:
        handle.write(BASE_ENTRY + "  power_methods: [pynvml, gh]\n")
    table = campaign["load_table"](path)
    check(table["testsys"]["power_methods"] == ["pynvml", "gh"],
          "jpwr's names are kept: {0}".format(table["testsys"]["power_methods"]))
    for lines, words in BAD_ENTRIES:
        with open(path, "w") as handle:
            handle.write(BASE_ENTRY + lines)
        try:
            campaign["load_table"](path)
        except ValueError as error:
            message = str(error)
        else:
            raise Failure("accepted:\n" + BASE_ENTRY + lines)
        missing = [w for w in words if w not in message]
        check(not missing and path in message,
              "the error for\n{0}\ndoes not name {1}: {2}".format(lines, missing, message))
        print("refused: {0}".format(message))


TESTS = {"systems": test_systems, "systems_errors": test_systems_errors,
         "systems_container": test_systems_container}


def main():
    parser = argparse.ArgumentParser(description="JUBE system catalogue tests")
    parser.add_argument("test", choices=sorted(TESTS))
    parser.add_argument("--scaffold", required=True)
    parser.add_argument("--jube", required=True)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    return run_in_temp(args.test, "scaffold-jube", lambda tmp: TESTS[args.test](Env(args, tmp)), args.keep)


if __name__ == "__main__":
    sys.exit(main())
