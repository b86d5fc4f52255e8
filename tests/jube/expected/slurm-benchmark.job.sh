#!/bin/bash
#SBATCH --job-name=scaffold-strong-benchmark-3
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=16
#SBATCH --time=00:45:00
#SBATCH --partition=gpu
#SBATCH --account=proj42
#SBATCH --gres=gpu:4
#SBATCH --signal=USR2@120
#SBATCH --output=@OUT@/000000/000003_benchmark/work/job.out
#SBATCH --error=@OUT@/000000/000003_benchmark/work/job.err
#SBATCH --mail-type=FAIL
#SBATCH --constraint=ib
# scaffold campaign 'strong', step 'benchmark', system 'testcluster': rendered by JUBE from
# jube/job.sh.in. To repeat this step by hand: bash job.sh >job.out 2>job.err (or submit it).
cd "@OUT@/000000/000003_benchmark/work" || exit 1
rm -f ready error finished
# A scheduler's kill (time limit, scancel) still ends the step for JUBE: status, then `error`.
trap '"@REPO@/jube/lib/finish-job" benchmark 143 "killed by SIGTERM"; exit 143' TERM
module load GCC OpenMPI CUDA
export OMP_NUM_THREADS="$SLURM_CPUS_PER_TASK"
export NCCL_DEBUG="WARN"
ulimit -c 0

srun --ntasks=8 --ntasks-per-node=4 --cpus-per-task=16 /opt/scaffold/bin/scaffold benchmark -c @REPO@/configs/benchmark_default.yml --problem-scale 7 --dc-num-shards 1 1 1 --local-batch-size 2 --epochs -1 --fract-base-dir /scratch/proj42/scaffold-data/fractals --dataset-dir /scratch/proj42/scaffold-data/datasets --base-run-dir @OUT@/000000/000003_benchmark/work --job-name scaffold --threads 16
"@REPO@/jube/lib/report-run" $? /opt/scaffold/bin/scaffold @OUT@/000000/000003_benchmark/work/scaffold_*/
"@REPO@/jube/lib/finish-job" benchmark $?
