# tests/gpu/env.sh -- sourced by the GPU test scripts: how distalc --target cuda finds the
# device runtime of the build tree, for real CUDA (real) or the host emulation (emulated).
: "${top_srcdir:?}" "${top_builddir:?}"
gpu_env_real() {
  unset DISTAL_CUDA_EMULATION DISTAL_CUDA_CFLAGS
  DISTAL_CUDA_LIBS="-L$top_builddir/.libs -Wl,-rpath,$top_builddir/.libs -ldistal_cuda ${CUDA_LIBS:-} -lhwloc -lstdc++"
  export DISTAL_CUDA_LIBS
}
gpu_env_emulated() {
  DISTAL_CUDA_EMULATION=1
  DISTAL_CUDA_CFLAGS="-I$top_srcdir/tests/cuemu"
  DISTAL_CUDA_LIBS="-L$top_builddir/tests/cuemu/.libs -Wl,-rpath,$top_builddir/tests/cuemu/.libs -ldistal_cuemu -lhwloc"
  export DISTAL_CUDA_EMULATION DISTAL_CUDA_CFLAGS DISTAL_CUDA_LIBS
}

# hier_runs MAXRANKS: tests/gpu/programs/hier.dtl (a machine whose inner level is GPUs)
# with --validate at rank counts up to MAXRANKS, nodes simulated with DISTAL_RANKS_PER_NODE
# where given; prints PASS/FAIL lines and returns the number of failures.
hier_runs() {
  max=$1
  hdir=$(mktemp -d)
  hfails=0
  if ! "${DISTALC:?}" "$top_srcdir/tests/gpu/programs/hier.dtl" --exe -o "$hdir/hier" > "$hdir/log" 2>&1; then
    echo "FAIL hier.dtl does not build"; sed 's/^/    | /' "$hdir/log" | head -20
    rm -rf "$hdir"
    return 1
  fi
  for spec in "1 node" "2 node" "4 node" "4 2" "8 4" "8 2" "6 3"; do
    set -- $spec
    [ "$1" -le "$max" ] || continue
    if [ "$2" = node ]; then
      timeout 120 "${MPIRUN:-mpirun}" -np "$1" --oversubscribe "$hdir/hier" -n 13 --chunk 5 --validate > "$hdir/log" 2>&1
    else
      DISTAL_RANKS_PER_NODE=$2 timeout 120 "${MPIRUN:-mpirun}" -np "$1" --oversubscribe -x DISTAL_RANKS_PER_NODE \
        "$hdir/hier" -n 13 --chunk 5 --validate > "$hdir/log" 2>&1
    fi
    if [ $? -eq 0 ] && grep -q 'validate A: .* ok$' "$hdir/log"; then
      echo "PASS hier.dtl (gpu inner level): $1 ranks, $2 per node"
    else
      echo "FAIL hier.dtl (gpu inner level): $1 ranks, $2 per node"; sed 's/^/    | /' "$hdir/log" | head -12
      hfails=$((hfails + 1))
    fi
  done
  rm -rf "$hdir"
  return $hfails
}
