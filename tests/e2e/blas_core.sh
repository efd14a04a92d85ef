#!/bin/sh
# OpenBLAS's kernels for the CPU (dtl_blas_core, runtime.h): a generated executable whose
# OpenBLAS fell back to Prescott's kernels on a CPU with AVX-512 or AVX2 and FMA runs again
# with OPENBLAS_CORETYPE set to SkylakeX or Haswell, before MPI_Init, and validates; one whose
# OpenBLAS knows the CPU, or the CPU has neither, runs once as loaded; OPENBLAS_CORETYPE set by
# the user is kept.  Each rank's OpenBLAS names its kernels when it loads (OPENBLAS_VERBOSE=2):
# the expected names are worked out here from /proc/cpuinfo and the first name a run prints.
set -eu
: "${top_srcdir:?}" "${DISTALC:?}" "${MPIRUN:=mpirun}"
case $(uname -m) in x86_64) ;; *) echo "SKIP: not x86-64"; exit 77 ;; esac
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
cat > mm.dtl <<'DTL'
param n = 97;
machine M = grid(g);
tensor A(n, n) @ M(ij -> i);
tensor B(n, n) @ M(ij -> i);
tensor C(n, n);
A(i, j) = B(i, k) * C(k, j)
  .distribute({i}, {io}, {ii}, M)
  .substitute({ii, j, k}, gemm);
DTL
"$DISTALC" mm.dtl --exe -o mm
flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
has() { case " $flags " in *" $1 "*) return 0 ;; esac; return 1; }
fail=0
check() { # $1: what, $2: ranks, $3: expected core lines of one rank, rest: env
  what=$1 np=$2 want=$3
  shift 3
  if ! env "$@" OPENBLAS_VERBOSE=2 timeout 120 "$MPIRUN" -np "$np" --oversubscribe ./mm -n 101 --validate > out.txt 2>&1; then
    echo "FAIL $what: the run failed"; sed 's/^/    | /' out.txt; fail=1; return
  fi
  got=$(grep -o 'Core: [A-Za-z0-9]*' out.txt | sed 's/Core: //' | sort | uniq -c | awk '{print $2 "x" $1}' | tr '\n' ' ')
  exp=$(for c in $want; do echo "$c"; done | sort | uniq -c | awk -v np="$np" '{print $2 "x" $1 * np}' | tr '\n' ' ')
  if [ "$got" = "$exp" ] && grep -q 'validate A: .* ok' out.txt; then
    echo "PASS $what at $np ranks: $got"
  else
    echo "FAIL $what at $np ranks: kernels named $got, expected $exp"; sed 's/^/    | /' out.txt; fail=1
  fi
}
# OpenBLAS's own choice on this CPU: the first kernels a run names (it names them when it loads,
# before main)
first=$(env -u OPENBLAS_CORETYPE OPENBLAS_VERBOSE=2 ./mm -n 5 2>&1 | grep -m1 -o 'Core: [A-Za-z0-9]*' | sed 's/Core: //')
[ -n "$first" ] || { echo "SKIP: OpenBLAS does not name its kernels (OPENBLAS_VERBOSE)"; exit 77; }
want=$first
if [ "$first" = Prescott ]; then
  if has avx512f && has avx512bw && has avx512dq && has avx512vl; then want="Prescott SkylakeX"
  elif has avx2 && has fma; then want="Prescott Haswell"; fi
fi
echo "OpenBLAS's own choice: $first; expected per rank: $want"
for np in 1 3; do check "unset" $np "$want" -u OPENBLAS_CORETYPE; done
check "OPENBLAS_CORETYPE=Prescott kept" 2 "Prescott" OPENBLAS_CORETYPE=Prescott
exit $fail
