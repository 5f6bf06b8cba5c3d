#!/usr/bin/env bash
# On the lent two-GPU machine (nvidia-h200-x2), issue 20: data-parallel training over Open MPI
# against one GPU with the same global batch. Needs .device/bundle.tar.xz from
# tools/device/bundle.sh on a build with the MPI plugin (the bundle then carries Open MPI's
# runtime: the machine is not Debian). Prints everything; logs land in OUT_DIR.
#   tools/device/distributed_h200.sh OUT_DIR [bench|124m|6l|all]   (default all, ~8 min)
#   bench: allreduce of 1-498 MB between the two GPUs' ranks, readback included      ~30 s
#   124m:  GPT-2 124M, global batch 16 × 1024, FORGE_STEPS (200) steps, 1 GPU vs 2   ~5 min
#   6l:    6L-6H-384, the same global batch and steps, 1 GPU vs 2                     ~2 min
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: distributed_h200.sh OUT_DIR [bench|124m|6l|all]}
what=${2:-all}
steps=${FORGE_STEPS:-200}
mkdir -p "$out"
for deb in "$root"/.gl/*.deb; do [ -e "$deb" ] && dpkg -x "$deb" /; done
ldconfig
mkdir -p /tmp/forge && tar -C /tmp/forge -xJf "$root/.device/bundle.tar.xz"
bin=/tmp/forge/bin
mpi=/tmp/forge/mpi
[ -x "$mpi/usr/bin/mpirun" ] || { echo "the bundle has no Open MPI runtime: rebuild it on a build with libforge_mpi.so"; exit 1; }
export LD_LIBRARY_PATH="$bin:$mpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Open MPI and PMIx find their components and help texts under the relocated prefix.
export OPAL_PREFIX="$mpi/usr" PATH="$mpi/usr/bin:$PATH"
export PMIX_MCA_mca_base_component_path="$(find "$mpi/usr" -type d -path '*pmix2/lib/pmix' | head -1)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -e "$icd" ] && export VK_DRIVER_FILES="$icd"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null
nvidia-smi topo -m 2>/dev/null | head -4
mpirun --version | head -1
"$bin/forge" info 2>&1 | grep -iE "adapter|NVIDIA" | head -6
mpirun_2() { mpirun --oversubscribe --bind-to none -np 2 "$@"; }

corpus="$root/data/sotu.txt"
if [ ! -f "$corpus" ] && [ -f "$root/.device/sotu.txt.xz" ]; then
  xz -dc "$root/.device/sotu.txt.xz" > /tmp/sotu.txt && corpus=/tmp/sotu.txt
fi

if [ "$what" = bench ] || [ "$what" = all ]; then
  echo "== allreduce, 2 ranks, gradients on each rank's GPU (readback and write-back counted)"
  FORGE_MPI_PLUGIN="$bin/libforge_mpi.so" FORGE_BENCH_BACKEND=webgpu \
    mpirun_2 "$bin/bench_allreduce" 1 16 64 256 498 2>&1 | tee "$out/bench_allreduce.txt"
  echo "== the same with host-resident gradients (MPI's shared-memory transport alone)"
  FORGE_MPI_PLUGIN="$bin/libforge_mpi.so" mpirun_2 "$bin/bench_allreduce" 16 498 2>&1 |
    tee -a "$out/bench_allreduce.txt"
fi

# One model, one GPU (accumulation 2) against two (one micro-batch each), the same global batch.
compare() {
  local name=$1; shift
  local flags=(train --backend webgpu --tokenizer bpe --bpe-dir "$root/third_party/gpt2"
    --corpus "$corpus" --n-ctx 1024 --batch 8 --accumulation 2 --steps "$steps"
    --warmup-steps 20 --eval-interval 100 --eval-batches 4 --log-interval 10 --format json "$@")
  echo "== $name: 1 GPU, batch 8 × accumulation 2"
  "$bin/forge" "${flags[@]}" --out "/tmp/$name-1" 2>&1 | tail -1 | tee "$out/$name-1gpu.json"
  echo "== $name: 2 GPUs over MPI, one micro-batch of 8 each"
  mpirun_2 "$bin/forge" "${flags[@]}" --out "/tmp/$name-2" 2>&1 | tail -1 | tee "$out/$name-2gpu.json"
  cp "/tmp/$name-1/train_log.csv" "$out/$name-1gpu_log.csv"
  cp "/tmp/$name-2/train_log.csv" "$out/$name-2gpu_log.csv"
  cp "/tmp/$name-2/loss.png" "$out/$name-2gpu_loss.png" 2>/dev/null
  # Step-by-step agreement of the two loss curves and the speed-up.
  paste -d, "$out/$name-1gpu_log.csv" "$out/$name-2gpu_log.csv" | awk -F, 'NR > 1 {
      d = $3 - $9; if (d < 0) d = -d; r = d / $3; if (r > worst) { worst = r; at = $1 } }
      END { printf "largest relative loss difference: %.2e at step %s\n", worst, at }'
  python3 - "$out/$name-1gpu.json" "$out/$name-2gpu.json" <<'PY' 2>/dev/null || true
import json, sys
one, two = (json.loads(open(p).read().strip().splitlines()[-1]) for p in sys.argv[1:3])
print(f"tokens/s: 1 GPU {one['tokens_per_s']:.0f}, 2 GPUs {two['tokens_per_s']:.0f}: "
      f"{two['tokens_per_s'] / one['tokens_per_s']:.2f}x, scaling efficiency "
      f"{two['tokens_per_s'] / one['tokens_per_s'] / 2:.0%}; allreduce "
      f"{two['allreduce_ms_per_step']:.1f} ms/step exposed + "
      f"{two['allreduce_overlapped_ms_per_step']:.1f} ms inside backward")
PY
}
[ "$what" = 124m ] || [ "$what" = all ] && compare gpt2-124m --n-layer 12 --n-head 12 --n-embd 768
[ "$what" = 6l ] || [ "$what" = all ] && compare gpt2-6l384 --n-layer 6 --n-head 6 --n-embd 384
exit 0
