#!/bin/sh
# An unmodified ScaLAPACK application (pdgemm_app.c) linked with ScaLAPACK alone and with
# libdistal_pdgemm before ScaLAPACK: both check every element against a serial product, and
# their results must be the same bits (digests); the second must have run distal_pdgemm
# (DISTAL_PDGEMM_VERBOSE prints a line per plan).  At 1, 2, 3, 4 and 6 ranks on the grid of
# MPI_Dims_create, and at 5 ranks on a 2x2 grid in reverse rank order (one rank outside).
# Then distal_pdgemm's bad arguments (pdgemm_errors.c) at 1 and 3 ranks.
set -u
: "${top_builddir:=.}" "${MPIRUN:=mpirun}"
ref="$top_builddir/tests/scalapack/pdgemm_app"
ours="$top_builddir/tests/scalapack/pdgemm_app_distal"
[ -x "$ref" ] && [ -x "$ours" ] || { echo "pdgemm.sh: the test programs are not built" >&2; exit 99; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
for run in 1 2 3 4 6 "5 2 2 X"; do
  # shellcheck disable=SC2086
  set -- $run
  np=$1; shift
  what="$np ranks${1:+, grid $1x$2 $3}"
  ok=1
  timeout 120 "$MPIRUN" --oversubscribe -np "$np" "$ref" "$@" > "$dir/ref" 2> "$dir/ref.err" || ok=0
  DISTAL_PDGEMM_VERBOSE=1 timeout 120 "$MPIRUN" --oversubscribe -x DISTAL_PDGEMM_VERBOSE -np "$np" "$ours" "$@" \
    > "$dir/ours" 2> "$dir/ours.err" || ok=0
  grep -q '^distal_pdgemm: plan for' "$dir/ours.err" || { ok=0; echo "    distal_pdgemm did not run"; }
  cmp -s "$dir/ref" "$dir/ours" || { ok=0; echo "    the results differ:"; diff "$dir/ref" "$dir/ours" | sed 's/^/    | /'; }
  if [ $ok = 1 ]; then
    echo "PASS pdgemm at $what: $(tail -n 1 "$dir/ours")"
  else
    echo "FAIL pdgemm at $what:"; cat "$dir/ref" "$dir/ref.err" "$dir/ours" "$dir/ours.err" | sed 's/^/    | /'; fail=1
  fi
done
errs="$top_builddir/tests/scalapack/pdgemm_errors"
for np in 1 3; do
  if timeout 120 "$MPIRUN" --oversubscribe -np $np "$errs" > "$dir/errs" 2>&1 && grep -q ': ok$' "$dir/errs"; then
    echo "PASS pdgemm_errors at $np ranks"
  else
    echo "FAIL pdgemm_errors at $np ranks:"; sed 's/^/    | /' "$dir/errs"; fail=1
  fi
done
exit $fail
