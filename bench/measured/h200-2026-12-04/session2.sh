set -u
export PYTHONUNBUFFERED=1
echo "=== memory cross-check"; timeout 60 python3 .gpu/mem_crosscheck.py 2>&1 | tail -5
echo "=== gpu-check eager batch 256"; timeout 60 python3 -m workers.gpu_check --batch-size 256 --json $OUT/gpu_check_b256.json 2>&1 | grep -v USDT | tail -12
echo "=== gpu-check compiled batch 256"; timeout 100 python3 -m workers.gpu_check --compile --batch-size 256 --json $OUT/gpu_check_compile_b256.json 2>&1 | grep -v USDT | tail -12
