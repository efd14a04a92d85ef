#!/bin/sh
# run-fuzz.sh -- run the front-end fuzzer for a bounded time on a scratch copy of the seed
# corpus (tests/fuzz/corpus) and the examples.  FUZZ_SECONDS overrides the default 30 s.
# Exits nonzero on any crash, leak, timeout or out-of-memory; the failing input is kept in
# the build tree as tests/fuzz/crash-* (or leak-*, timeout-*, oom-*).
set -u
srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=${top_builddir:-.}
fuzzer=$builddir/tests/fuzz/fuzz_frontend
seconds=${FUZZ_SECONDS:-30}

if [ ! -x "$fuzzer" ]; then
  echo "run-fuzz.sh: $fuzzer is not built (make tests/fuzz/fuzz_frontend)" >&2
  exit 99
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/fuzz-frontend.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT INT TERM
mkdir "$work/corpus"
cp "$srcdir"/tests/fuzz/corpus/* "$work/corpus/" || exit 99
for f in "$srcdir"/examples/*.dtl; do
  [ -f "$f" ] && cp "$f" "$work/corpus/example-$(basename "$f")"
done

mkdir -p "$builddir/tests/fuzz"
"$fuzzer" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 \
  -artifact_prefix="$builddir/tests/fuzz/" -print_final_stats=1 "$work/corpus"
rc=$?
[ $rc -eq 0 ] || echo "run-fuzz.sh: the fuzzer failed (exit $rc); see the artifact above" >&2
exit $rc
