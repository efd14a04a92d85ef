# shellcheck shell=sh disable=SC2154
# tests/app/sanitize.sh -- sourced by run.sh and sparse.sh: programs built with
# AddressSanitizer and UBSan, libdistal's runtime and kernels compiled in, and the verdict on
# what they printed.  Needs top_srcdir, MPICC and MPIRUN.

# san_build OUT [FLAG...] SOURCE...: the program OUT from the sources and the runtime, under both
# sanitizers
san_build() {
  out=$1
  shift
  # shellcheck disable=SC2086
  $MPICC -std=c11 -g -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -D_POSIX_C_SOURCE=200809L "$@" \
    -I. -I"$top_srcdir/src/comm" "$top_srcdir"/src/comm/*.c "$top_srcdir"/kernels/blas.c \
    "$top_srcdir"/kernels/tensor_kernels.c -o "$out" -lopenblas -lhwloc -lm
}

# san_run NP LOG PROGRAM ARGS...: runs it at NP ranks, leaks reported, the first UBSan error fatal
san_run() {
  np=$1 log=$2
  shift 2
  ASAN_OPTIONS=detect_leaks=1:exitcode=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    timeout 300 "$MPIRUN" -np "$np" --oversubscribe -x ASAN_OPTIONS -x UBSAN_OPTIONS "$@" > "$log" 2>&1 || true
}

# san_verdict LOG OURS WHAT: after the caller checked the results, FAIL (status 1) on any
# sanitizer error in LOG or any leak whose stack names a file matching OURS (a grep pattern);
# else PASS "WHAT"
san_verdict() {
  if grep -q 'ERROR: AddressSanitizer\|runtime error' "$1"; then
    echo "FAIL sanitizer error ($3):"; grep -A20 'ERROR: AddressSanitizer\|runtime error' "$1" | head -60; return 1
  elif awk '/leak of/{s=1} s&&/^$/{s=0} s' "$1" | grep -q "src/comm\|kernels/\|$2"; then
    echo "FAIL leaks in our code ($3):"; awk '/leak of/{s=1} s&&/^$/{s=0} s' "$1" | head -60; return 1
  fi
  echo "PASS $3"
}
