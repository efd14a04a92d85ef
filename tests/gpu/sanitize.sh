#!/bin/sh
# The device path under AddressSanitizer and UBSan: the GPU application (app_gpu, plans
# created and destroyed 3 times) and a generated Cannon executable for --target cuda, with
# libdistal, libdistal_cuda and the host emulation compiled into them.  Any sanitizer error,
# and any leak whose stack reaches our code, fails.  (The emulation's page guard is off here:
# it and AddressSanitizer both want SIGSEGV.)
set -u
: "${top_srcdir:?}" "${DISTALC:?}" "${MPIRUN:=mpirun}" "${MPICC:=mpicc}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
"$DISTALC" "$top_srcdir/examples/summa.dtl" --target cuda -o summa || exit 1
"$DISTALC" "$top_srcdir/examples/cannon.dtl" --target cuda --main -o cannon || exit 1
san="-std=gnu11 -g -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -D_POSIX_C_SOURCE=200809L"
emu="-DDISTAL_CUDA_EMULATION -I$top_srcdir/tests/cuemu -I$top_srcdir/src/comm -I$top_srcdir/src -I."
rt="$top_srcdir/src/comm/*.c $top_srcdir/kernels/blas.c $top_srcdir/kernels/tensor_kernels.c $top_srcdir/src/cuda/device.c $top_srcdir/src/cuda/gpu_select.c \
$top_srcdir/src/cuda/gpu_assign.c $top_srcdir/src/cuda/stage.c $top_srcdir/tests/cuemu/device_kernels_emu.c \
$top_srcdir/tests/cuemu/cuemu.c"
# shellcheck disable=SC2086
$MPICC $san $emu -x c summa.cu -x none "$top_srcdir/examples/app/app_gpu.c" summa.c $rt -o app_san -lopenblas -lhwloc -lm || exit 1
# shellcheck disable=SC2086
$MPICC $san $emu -fopenmp -x c cannon.cu -x none cannon.c $rt -o cannon_san -lopenblas -lhwloc -lm || exit 1
fail=0
check() { # NAME LOG
  if ! grep -q "$3" "$2"; then
    echo "FAIL $1 under sanitizers:"; tail -40 "$2"; fail=1
  elif grep -q 'ERROR: AddressSanitizer\|runtime error' "$2"; then
    echo "FAIL $1: sanitizer error:"; grep -A20 'ERROR: AddressSanitizer\|runtime error' "$2" | head -60; fail=1
  elif awk '/leak of/{s=1} s&&/^$/{s=0} s' "$2" | grep -q 'src/comm\|src/cuda\|kernels/\|tests/cuemu\|summa\.c\|cannon\.c\|app_gpu\.c'; then
    echo "FAIL $1: leaks in our code:"; awk '/leak of/{s=1} s&&/^$/{s=0} s' "$2" | head -60; fail=1
  else
    echo "PASS $1 under AddressSanitizer and UBSan, no leak in our code"
  fi
}
export CUEMU_NO_GUARD=1 ASAN_OPTIONS=detect_leaks=1:exitcode=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
timeout 300 "$MPIRUN" -np 3 --oversubscribe -x CUEMU_NO_GUARD -x ASAN_OPTIONS -x UBSAN_OPTIONS ./app_san 37 3 > app.txt 2>&1
check "app_gpu (3 ranks)" app.txt ': ok$'
timeout 300 "$MPIRUN" -np 4 --oversubscribe -x CUEMU_NO_GUARD -x ASAN_OPTIONS -x UBSAN_OPTIONS ./cannon_san -n 37 --iters 2 --validate > cannon.txt 2>&1
check "cannon --target cuda (4 ranks)" cannon.txt 'validate A: .* ok$'
exit $fail
