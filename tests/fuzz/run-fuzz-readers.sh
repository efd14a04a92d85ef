#!/bin/sh
# run-fuzz-readers.sh -- run the file-reader fuzzer (fuzz_readers: .mtx, .tns, .npy) for a
# bounded time on a scratch copy of its seed corpus (tests/fuzz/corpus_readers).
# FUZZ_READERS_SECONDS overrides the default 20 s.  Exits nonzero on any crash, leak of our
# code, timeout or out-of-memory; the failing input is kept in the build tree as
# tests/fuzz/readers-crash-* (or -leak-*, -timeout-*, -oom-*).  The MPI library's own
# allocations that live until exit are not leaks of ours: they are suppressed.
set -u
srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=${top_builddir:-.}
fuzzer=$builddir/tests/fuzz/fuzz_readers
seconds=${FUZZ_READERS_SECONDS:-20}

if [ ! -x "$fuzzer" ]; then
  echo "run-fuzz-readers.sh: $fuzzer is not built (make tests/fuzz/fuzz_readers)" >&2
  exit 99
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/fuzz-readers.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT INT TERM
mkdir "$work/corpus"
cp "$srcdir"/tests/fuzz/corpus_readers/* "$work/corpus/" || exit 99
cat > "$work/lsan.supp" <<'SUPP'
leak:libopen-pal
leak:libopen-rte
leak:libmpi
leak:libpmix
leak:libhwloc
leak:libevent
leak:mca_
leak:opal_
leak:orte_
leak:ompi_
leak:pmix
leak:__vasprintf_internal
SUPP
export OMPI_ALLOW_RUN_AS_ROOT="${OMPI_ALLOW_RUN_AS_ROOT:-1}"
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}"
mkdir -p "$builddir/tests/fuzz"
# (full unwinding: the MPI libraries have no frame pointers, and a leak's stack must name them)
TMPDIR=$work LSAN_OPTIONS="suppressions=$work/lsan.supp:print_suppressions=0" \
  ASAN_OPTIONS="fast_unwind_on_malloc=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
  "$fuzzer" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 \
  -artifact_prefix="$builddir/tests/fuzz/readers-" -print_final_stats=1 "$work/corpus"
rc=$?
[ $rc -eq 0 ] || echo "run-fuzz-readers.sh: the fuzzer failed (exit $rc); see the artifact above" >&2
exit $rc
