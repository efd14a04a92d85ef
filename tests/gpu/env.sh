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
