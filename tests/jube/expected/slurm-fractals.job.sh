#!/bin/bash
#SBATCH --job-name=scaffold-strong-fractals-0
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --cpus-per-task=16
#SBATCH --time=00:10:00
#SBATCH --partition=gpu
#SBATCH --account=proj42
#SBATCH --gres=gpu:4
#SBATCH --output=@OUT@/000000/000000_fractals/work/job.out
#SBATCH --error=@OUT@/000000/000000_fractals/work/job.err
#SBATCH --mail-type=FAIL
#SBATCH --constraint=ib
# scaffold campaign 'strong', step 'fractals', system 'testcluster': rendered by JUBE from
# jube/job.sh.in. To repeat this step by hand: bash job.sh >job.out 2>job.err (or submit it).
cd "@OUT@/000000/000000_fractals/work" || exit 1
rm -f ready error finished
# A scheduler's kill (time limit, scancel) still ends the step for JUBE: status, then `error`.
trap '"@REPO@/jube/lib/finish-job" fractals 143 "killed by SIGTERM"; exit 143' TERM
module load GCC OpenMPI CUDA
export OMP_NUM_THREADS="$SLURM_CPUS_PER_TASK"
export NCCL_DEBUG="WARN"
ulimit -c 0

srun --ntasks=2 --ntasks-per-node=2 --cpus-per-task=16 /opt/scaffold/bin/scaffold generate_fractals -c @REPO@/configs/benchmark_default.yml --problem-scale 7 --fract-base-dir /scratch/proj42/scaffold-data/fractals --threads 16
"@REPO@/jube/lib/finish-job" fractals $?
