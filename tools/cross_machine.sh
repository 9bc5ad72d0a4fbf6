#!/usr/bin/env bash
# Re-execute chapters as other CPUs would: each run forces other float kernels (ATen, MKL, oneDNN, OpenBLAS) and starts
# from a cold embedding cache, then compares with the saved outputs (tools/chapters.py check). This is how the
# tolerances of the chapter check and of chapter 07's golden episodes were sized; run it before committing a chapter
# whose outputs come out of floating-point-heavy code. Not part of tools/test.sh (a full pass takes minutes per config).
#   bash tools/cross_machine.sh nbs/07_env.ipynb nbs/08a_imitation.ipynb     # some chapters
#   bash tools/cross_machine.sh                                             # every chapter
set -uo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
if [ $# -eq 0 ]; then set -- $(ls nbs/*.ipynb | grep -v '/_'); fi
CONFIGS=(
  "native:"
  "avx2:ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell"
  "old-cpu:ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 OPENBLAS_CORETYPE=Sandybridge"
  "mkl-cnr:MKL_CBWR=COMPATIBLE OPENBLAS_CORETYPE=SkylakeX"
)
fail=0
for c in "${CONFIGS[@]}"; do
  name=${c%%:*}; vars=${c#*:}
  cache=$(mktemp -d)
  echo "== $name (${vars:-native kernels}), cold cache"
  if ! env SPINDLEFLOW_CACHE="$cache" $vars python tools/chapters.py check "$@"; then fail=1; fi
  rm -rf "$cache"
done
exit $fail
