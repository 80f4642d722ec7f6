#!/usr/bin/env bash
# The ranking benchmark's whole GPU table, for a GPU host (docs/benchmarks.md: ranking quality at the GPU size, and
# how the recipe was chosen): LightGBM trained to convergence and the two entry points, at their shipped defaults and
# at other batches, each alone on the machine; then the recipes, several seeds each, side by side on the one GPU.
# A second call with the same WORK reads the finished runs back and launches only the missing ones.
#
#   benchmarks/ranking/ranking_gpu.sh [WORK] [DOC]      # defaults: /tmp/ranking-gpu, docs/benchmarks.md
#
# LightGBM must be importable (pip install -r benchmarks/ranking/requirements-ranking-quality.txt, or its wheel
# carried).
set -euo pipefail
cd "$(dirname "$0")/../.."
work=${1:-/tmp/ranking-gpu}
doc=${2:-docs/benchmarks.md}
python=${PYTHON:-python3}
# NVLink multicast stays off on shared GPU hosts.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1

# First as the host is: a host whose packages were installed without their bytecode, where Python may not write it
# (PYTHONDONTWRITEBYTECODE), compiles torch's and Lightning's modules in every process it starts.
"$python" -m benchmarks.ranking.ranking_quality --size gpu --datasets search --runs native,lightning,lightgbm \
    --variants "lightning:cuda-graph=false" --work "$work/as-installed" --doc "$doc" \
    --section ranking-quality-gpu-as-installed
# Then, for every table below, with the bytecode that pip writes as it installs a package (as the AWS images' own
# installs and the toolkit's `pip install -r requirements.txt` leave it), compiled once into a cache beforehand.
export PYTHONPYCACHEPREFIX="$work/bytecode"
"$python" -m compileall -q -j 0 "$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
    "$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')" > /dev/null \
    || echo "ranking_gpu: some files did not compile (test data in site-packages); they are imported as before"
# Alone on the machine, so their times compare: LightGBM and both entry points at their shipped defaults, and
# train_lightning.py without its CUDA graphs (what they buy it).
"$python" -m benchmarks.ranking.ranking_quality --size gpu --datasets search --runs native,lightning,lightgbm \
    --variants "lightning:cuda-graph=false" --work "$work" --doc "$doc"
# Each entry point at other batches, each alone: how the default batch was chosen.
batches="batch-size=64;batch-size=128;batch-size=128,learning-rate=0.004"
alone="batch-size=32;$batches;lightning:batch-size=32;lightning:${batches//;/;lightning:}"
"$python" -m benchmarks.ranking.ranking_quality --size gpu --datasets search --runs native,lightning,lightgbm \
    --variants "$alone" --work "$work" --doc "$doc" --section ranking-batch-gpu

# Side by side (their times do not compare), three seeds each and their ensemble: the batch sizes; then one seed
# each of capacity, input bins, loss, regularisation, learning rate and a longer cap.
"$python" -m benchmarks.ranking.ranking_recipes --size gpu --variants "$batches" --seeds 0,1,2 --parallel 12 \
    --threads 2 --work "$work" --doc "$doc" --section recipe-batch-gpu
recipes="bins=128;width=512;width=512,bins=128;loss=graded_listwise;dropout=0;embedding-width=32"
recipes+=";learning-rate=0.001;epochs=100,early-stopping=10"
"$python" -m benchmarks.ranking.ranking_recipes --size gpu --variants "$recipes" --seeds 0,1,2 --variant-seeds 0 \
    --parallel 11 --threads 2 --work "$work" --doc "$doc"
echo "ranking_gpu: done"
