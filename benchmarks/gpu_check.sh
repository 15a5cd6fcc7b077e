#!/usr/bin/env bash
# The first run on a machine with a GPU: measure, don't debug.  Within BUDGET seconds
# (default 480 = 8 minutes) it runs, each step under `timeout` with what is left:
#   1. the CUDA tests: tests/algorithms/test_cuda_equality.py (one float64 round of every
#      algorithm, CPU against CUDA) and the contract battery's CUDA cases (test_contract.py,
#      test_contract_models.py, -k cuda);
#   2. benchmarks/bench_engine.py --device cuda at N = 10^3, 10^4, 10^5 (1 repeat);
#   3. one Fashion-MNIST round with the CNN (--model cnn, N = 40) per algorithm family
#      (algorithms/methods/<family>/: one algorithm each), through `pflt run --device cuda`;
# and writes one results file, benchmarks/results/gpu_check.json: per step its command, exit
# code, seconds and the last lines of its output, plus the machine (GPU name, torch).
#
#   benchmarks/gpu_check.sh [--dry-run] [--budget SECONDS] [--out FILE] [--data DIR]
#
# --dry-run: the same steps on the CPU at tiny sizes (N = 10/20/40 for the engine benchmark,
# 10 clients of ≤ 20 samples for the rounds, the CUDA-equality test file only) — checks the
# script itself on a machine without a GPU (tests/benchmarks/test_gpu_check.py runs it).
# --data DIR: where Fashion-MNIST is (default: the data home, `pflt data list`); absent, the
# rounds are recorded as skipped.  Run from the repository root.  Exit code: 0 when every
# step passed, 1 when one failed or ran out of time, 2 for bad arguments or no CUDA.
set -u

BUDGET=480
OUT=benchmarks/results/gpu_check.json
DRY=0
DATA=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1 ;;
    --budget) BUDGET="${2:?--budget needs seconds}"; shift ;;
    --out) OUT="${2:?--out needs a file}"; shift ;;
    --data) DATA="${2:?--data needs a directory}"; shift ;;
    *) echo "gpu_check.sh: error: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  shift
done
case "$BUDGET" in ''|*[!0-9]*) echo "gpu_check.sh: error: --budget must be whole seconds, got $BUDGET" >&2; exit 2 ;; esac

PY=${PYTHON:-python}
if [ "$DRY" = 1 ]; then
  DEVICE=cpu; SIZES="10 20 40"; CLIENTS=10; ROUND_EXTRA="--max-client-size 20"
  TESTS="tests/algorithms/test_cuda_equality.py"; KFILTER="the_difference"
else
  if ! $PY -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "gpu_check.sh: error: no CUDA device here (torch.cuda.is_available() is False); --dry-run checks the script on the CPU" >&2
    exit 2
  fi
  DEVICE=cuda; SIZES="1000 10000 100000"; CLIENTS=40; ROUND_EXTRA=""
  TESTS="tests/algorithms/test_cuda_equality.py tests/algorithms/test_contract.py tests/algorithms/test_contract_models.py"
  KFILTER="cuda"
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
START=$(date +%s)
: > "$WORK/steps.tsv"

# step NAME COMMAND...: run under the time left, record name, rc, seconds, log file
step() {
  local name=$1; shift
  local left=$(( BUDGET - ($(date +%s) - START) ))
  local log="$WORK/$(echo "$name" | tr -c 'A-Za-z0-9_\n' '_').log"
  if [ "$left" -le 5 ]; then
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "timeout" 0 "$log" "$*" >> "$WORK/steps.tsv"
    echo "skipped (no time left): $name" > "$log"
    return
  fi
  local t0=$(date +%s.%N)
  timeout "$left" "$@" > "$log" 2>&1
  local rc=$?
  local t1=$(date +%s.%N)
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$rc" "$(awk "BEGIN {print $t1 - $t0}")" "$log" "$*" >> "$WORK/steps.tsv"
  echo "gpu_check: $name: exit $rc" >&2
}

step "cuda tests" $PY -m pytest -q -m "slow or not slow" $TESTS -k "$KFILTER"
step "bench_engine" $PY benchmarks/bench_engine.py --device "$DEVICE" --sizes $SIZES \
  --threads 1 --repeats 1 --ref-clients 20 --max-client-size 100

FMNIST=$DATA
if [ -z "$FMNIST" ]; then
  FMNIST=$($PY -c "from synthetic.real_data.home import find_dataset; d = find_dataset('fmnist'); print(d or '')")
fi
# one algorithm per family (algorithms/methods/<family>/)
FAMILIES="averaging:fedavg regularized:pfedme clustered:cgpfl decoupled:fedrep prototypes:fedproto sam:fedsam ppfe:ppfe"
for pair in $FAMILIES; do
  family=${pair%%:*}; alg=${pair#*:}
  if [ -z "$FMNIST" ]; then
    printf '%s\t%s\t%s\t%s\t%s\n' "fmnist cnn round $family ($alg)" "skipped" 0 /dev/null "Fashion-MNIST not found (--data DIR)" >> "$WORK/steps.tsv"
    continue
  fi
  step "fmnist cnn round $family ($alg)" $PY -m pflt run --algorithm "$alg" --model cnn \
    --data "fmnist:$FMNIST" --clients "$CLIENTS" --rounds 1 --device "$DEVICE" \
    --out "$WORK/run-$alg" --no-progress $ROUND_EXTRA
done

mkdir -p "$(dirname "$OUT")"
$PY - "$WORK/steps.tsv" "$OUT" "$DEVICE" "$DRY" "$BUDGET" "$(( $(date +%s) - START ))" <<'EOF'
import datetime, json, platform, sys
import torch
steps_file, out, device, dry, budget, total = sys.argv[1:]
steps = []
for line in open(steps_file):
    name, rc, seconds, log, command = line.rstrip("\n").split("\t", 4)
    try:
        tail = open(log, errors="replace").read().splitlines()[-15:]
    except OSError:
        tail = []
    steps.append({"step": name, "command": command,
                  "exit_code": int(rc) if rc.lstrip("-").isdigit() else rc,
                  "seconds": round(float(seconds), 2), "output_tail": tail})
gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
result = {"date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
          "dry_run": dry == "1", "device": device, "gpu": gpu, "torch": torch.__version__,
          "python": platform.python_version(), "budget_s": int(budget), "total_s": int(total),
          "passed": all(s["exit_code"] in (0, "skipped") for s in steps), "steps": steps}
with open(out, "w") as fh:
    json.dump(result, fh, indent=1)
print(f"gpu_check: wrote {out} ({'all passed' if result['passed'] else 'FAILURES'}, "
      f"{total} s of {budget})")
sys.exit(0 if result["passed"] else 1)
EOF
