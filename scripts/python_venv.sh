#!/usr/bin/env bash
# Makes, once, a virtual environment with packages from PyPI in which a test runs Python (the
# ONNX tests' onnxruntime, the TensorBoard test's event reader), and prints its python.
# Usage: scripts/python_venv.sh FOLDER IMPORTS PACKAGE...
#   IMPORTS: the Python statement that must run in a ready one, e.g. 'import onnxruntime, numpy'
# A folder already made is reused as it is; one left half-made (no .ready) is made again. When
# it cannot be made (no python3-venv, no network) it says why and exits 77: ctest's "skipped".
set -euo pipefail
venv=${1:?usage: python_venv.sh FOLDER IMPORTS PACKAGE...}
imports=${2:?usage: python_venv.sh FOLDER IMPORTS PACKAGE...}
shift 2
[ $# -gt 0 ] || { echo "usage: python_venv.sh FOLDER IMPORTS PACKAGE..." >&2; exit 2; }
python=$venv/bin/python
if [ -f "$venv/.ready" ] && "$python" -c "$imports" 2>/dev/null; then
  echo "$python"
  exit 0
fi
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9  # another build tree may be making the same one
if [ -f "$venv/.ready" ] && "$python" -c "$imports" 2>/dev/null; then
  echo "$python"
  exit 0
fi
if [ -e "$venv" ] && [ ! -f "$venv/pyvenv.cfg" ]; then
  echo "python_venv: $venv exists and is not a virtual environment: not touching it" >&2
  exit 1
fi
rm -rf "$venv"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! python3 -m venv "$venv" >"$log" 2>&1; then
  echo "python_venv: cannot make a virtual environment in $venv (install python3-venv):" >&2
  cat "$log" >&2
  rm -rf "$venv"
  exit 77
fi
if ! "$python" -m pip install --quiet --disable-pip-version-check "$@" >"$log" 2>&1; then
  echo "python_venv: cannot install $* from PyPI into $venv (no network?):" >&2
  tail -n 5 "$log" >&2
  rm -rf "$venv"
  exit 77
fi
touch "$venv/.ready"
echo "$python"
