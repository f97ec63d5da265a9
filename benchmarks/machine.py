"""What a benchmark records of the machine and the tree it ran on: the CPU's model and vector
flags, and the commit (marked where tracked files outside the results differ from it). Standard
library only; the comparison scripts beside it import it."""
import os
import platform
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VECTOR_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl")


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_flags(wanted=VECTOR_FLAGS):
    """Those of `wanted` the CPU has, in that order."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    return [f for f in wanted if f in flags]
    except OSError:
        pass
    return []


def git(*args):
    try:
        return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def commit():
    """The short commit, "(with uncommitted changes)" where tracked files outside
    benchmarks/results differ from it; CNN_COMMIT where set (scripts/gpu_session.sh sets it from
    .deps/commit: the GPU machine's copy of .git can name an older commit)."""
    if os.environ.get("CNN_COMMIT"):
        return os.environ["CNN_COMMIT"][:7]
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)benchmarks/results")
    return git("rev-parse", "--short", "HEAD") + (" (with uncommitted changes)" if dirty else "")
