#!/bin/sh
# The GPU application (examples/app/app_gpu.c): an MPI program that keeps row blocks in GPU
# memory and calls the SUMMA kernel generated for --target cuda through its library API with
# device pointers.  Built and run at 1..4 ranks on the host emulation (tests/cuemu); built with
# nvcc against libdistal_cuda where configure found CUDA; run on GPUs where there are some
# (one rank per GPU).
set -u
: "${top_srcdir:?}" "${top_builddir:?}" "${DISTALC:?}" "${MPIRUN:=mpirun}" "${MPICC:=mpicc}"
. "$top_srcdir/tests/gpu/env.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
fail=0
"$DISTALC" "$top_srcdir/examples/summa.dtl" --target cuda -o summa || exit 1
runs() { # EXE MAXRANKS
  for np in 1 2 3 4; do
    [ "$np" -le "$2" ] || continue
    if timeout 120 "$MPIRUN" -np $np --oversubscribe "./$1" 45 2 > out.txt 2>&1 && grep -q ': ok$' out.txt; then
      echo "PASS $1 at $np ranks: $(cat out.txt)"
    else
      echo "FAIL $1 at $np ranks:"; cat out.txt; fail=1
    fi
  done
}
# the host emulation: the kernels as C, the fake CUDA headers
gpu_env_emulated
# shellcheck disable=SC2086
if $MPICC -std=gnu11 -O2 -x c -DDISTAL_CUDA_EMULATION $DISTAL_CUDA_CFLAGS $DISTAL_CFLAGS -c summa.cu -o summa_emu.o &&
  $MPICC -std=gnu11 -O2 -Wall -Wextra -Werror $DISTAL_CUDA_CFLAGS $DISTAL_CFLAGS -I. "$top_srcdir/examples/app/app_gpu.c" summa.c \
    summa_emu.o -o app_emu $DISTAL_CUDA_LIBS $DISTAL_LIBS -lm; then
  runs app_emu 4
else
  echo "FAIL app_gpu does not build on the emulation"; fail=1
fi
# real CUDA
if [ -e "$top_builddir/libdistal_cuda.la" ]; then
  gpu_env_real
  # shellcheck disable=SC2086
  if ${NVCC:-nvcc} -O3 -gencode arch=compute_90,code=sm_90 -Xcompiler -fPIC $DISTAL_CFLAGS -c summa.cu -o summa_cu.o &&
    $MPICC -std=c11 -O2 -Wall -Wextra -Werror ${CUDA_CFLAGS:-} $DISTAL_CFLAGS -I. "$top_srcdir/examples/app/app_gpu.c" summa.c \
      summa_cu.o -o app_gpu $DISTAL_CUDA_LIBS $DISTAL_LIBS -lm; then
    echo "PASS app_gpu builds with nvcc and libdistal_cuda"
    ngpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ' || true)
    if [ "${ngpus:-0}" -ge 1 ]; then runs app_gpu "$ngpus"; else echo "(no GPU: app_gpu not run)"; fi
  else
    echo "FAIL app_gpu does not build with nvcc"; fail=1
  fi
else
  echo "(no CUDA toolkit: app_gpu built on the emulation only)"
fi
exit $fail
