#!/usr/bin/env bash
# One device session for issue 32: gpu-check, every space's smoke trials on CUDA, a DataLoader (pinned memory)
# trial, compiled trials, a timed slice of mqar_recall's zoology profile, gpu-check --compile. Each stage has
# its own limit; whatever finished is under $OUT.
set -u
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
stage() { echo; echo "=== $1 ($(date +%T))"; }
T0=$(date +%s)

stage env
{ nvidia-smi; python3 -c "import torch, transformers, timm, pydantic; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0)); print('transformers', transformers.__version__, 'timm', timm.__version__, 'pydantic', pydantic.__version__)"; nproc; } 2>&1 | tee $OUT/env.txt

stage gpu-check
timeout 170 python3 -m workers.gpu_check --json $OUT/gpu_check.json 2>&1 | tail -40

stage smoke-trials
timeout 230 python3 -m workers.trial_batch ${SMOKE_DIR:-.gpu/configs/smoke} --out /tmp/smoke --jobs 12 --timeout-s 200 2>&1 | tail -110
(cd /tmp && tar czf $OUT/smoke.tar.gz smoke)
stage loader-and-compile-trials
timeout 100 python3 -m workers.trial_batch .gpu/configs/extra --out /tmp/extra --jobs 3 --timeout-s 95 2>&1 | tail -12
(cd /tmp && tar czf $OUT/extra.tar.gz extra)
stage zoology-slice
timeout 130 python3 -m workers.trial_batch .gpu/configs/zoology --out /tmp/zoology --jobs 1 --timeout-s 62 2>&1 | tail -6
(cd /tmp && tar czf $OUT/zoology.tar.gz zoology)

ELAPSED=$(( $(date +%s) - T0 ))
stage "gpu-check --compile (elapsed ${ELAPSED}s)"
if [ $ELAPSED -lt 330 ]; then
  timeout $(( 450 - ELAPSED )) python3 -m workers.gpu_check --compile --json $OUT/gpu_check_compile.json 2>&1 | tail -25
fi
stage done
