#!/bin/sh
# printers_only_print.sh -- the printers of src/codegen read the SPMD program (spmd.h) and
# nothing before it: no AST (fe_program, fe_tensor, fe_stmt), no concrete index notation
# (ir_stmt, ir_expr, cin_ nodes), no provenance graph (relations), no lowering internals
# (lw_program, lw_stmt, lw_comm, bounds analysis), no proofs.  A decision found there belongs
# in src/lower_mpi/spmd.c or a rewrite.  Environment: top_srcdir.
set -u
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
pat='fe_program|fe_tensor|fe_stmt|ir_program|ir_stmt|ir_expr|ir_rel|cin_node|cin_assign|->rels|->ast\b|lw_program|lw_stmt|lw_comm|lw_interval|lw_local_hi|lw_loop_value|sym_prove|sym_facts'
if grep -n -E "$pat" "$top_srcdir"/src/codegen/*.c "$top_srcdir"/src/codegen/*.h; then
  echo "FAIL: the printers reach past the SPMD program (lines above)"
  exit 1
fi
echo "PASS: src/codegen reads only the SPMD program"
