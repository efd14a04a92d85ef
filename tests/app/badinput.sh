#!/bin/sh
# Bad input never hangs or crashes: generated executables given a bad flag, a missing
# param, a rank count that cannot form the machine, a missing, mis-shaped, mis-typed or
# truncated .npy file, a file that is not a regular one (a FIFO, a folder), or an unwritable
# output path print one clear message from rank 0 and exit nonzero on every rank, leaving no
# partial output file; distalc given a bad program, an output name that is not a file name,
# an unreadable machine model or an unwritable output writes nothing.
set -u
: "${top_srcdir:?}" "${DISTALC:?}" "${MPIRUN:=mpirun}" "${PYTHON:=python3}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
fails=0 checks=0
ok() { checks=$((checks + 1)); echo "PASS $1"; }
bad() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL $1"; [ -f err.txt ] && sed 's/^/    | /' err.txt | head -20; }

# expect NAME NP PATTERN PROGRAM ARGS...: nonzero exit, exactly one line from the program
# naming the problem (rank 0 only), within the time limit
expect() {
  name=$1 np=$2 pat=$3 prog=$4
  shift 4
  timeout 60 "$MPIRUN" -np "$np" --oversubscribe "./$prog" "$@" > out.txt 2> err.txt
  rc=$?
  lines=$(grep -c "^\./$prog: " err.txt)
  if [ $rc -eq 124 ]; then bad "$name: hung"
  elif [ $rc -eq 0 ]; then bad "$name: exit status 0"
  elif [ "$lines" -ne 1 ]; then bad "$name: $lines messages from the program, not 1"
  elif ! grep "^\./$prog: " err.txt | grep -q -- "$pat"; then bad "$name: message does not say '$pat'"
  else ok "$name ($(grep "^\./$prog: " err.txt))"
  fi
}

cat > req.dtl <<'DTL'
param n = 6;
param m;
machine M = grid(g);
tensor A(n, m) @ M(xy -> x);
tensor B(n, m) @ M(xy -> x);
A(i, j) = 2 * B(i, j)
  .distribute({i}, {io}, {ii}, M);
DTL
"$DISTALC" "$top_srcdir/examples/summa.dtl" --exe -o summa || { echo "FAIL build"; exit 1; }
"$DISTALC" "$top_srcdir/examples/johnson.dtl" --exe -o johnson || { echo "FAIL build"; exit 1; }
"$DISTALC" req.dtl --exe -o req || { echo "FAIL build"; exit 1; }

expect "unknown flag" 3 "unknown option" summa -n 8 --bogus
expect "flag without value" 2 "n" summa -n
expect "non-numeric param" 2 "n" summa -n eight
expect "missing param" 2 "param m has no value" req
# params whose tensors have more elements than int64 counts (n x n overflows), or far more
# than memory holds: one message, no crash
expect "a tensor of more elements than int64 counts" 2 "too many to address" summa -n 3037000500
expect "a tensor of 2^63 - 1 squared elements" 1 "too many to address" summa -n 9223372036854775807
expect "a tensor larger than memory" 2 "out of memory" req -n 6 -m 100000000000
expect "rank count that cannot form grid(q, q, q)" 6 "6 ranks cannot form grid(q, q, q)" johnson -n 8
expect "grid params that do not multiply to the rank count" 4 "cannot form" summa -n 8 --gx 3 --gy 1
expect "missing file" 3 "nofile.npy" summa -n 8 --load B=nofile.npy
expect "two tensors saved into one file" 2 "two tensors cannot be saved into one file" summa -n 8 --save A=one.npy --save B=one.npy
# an option that reaches one rank only (an MPMD launch): one message, not a hang
timeout 60 "$MPIRUN" -np 1 --oversubscribe ./summa -n 8 --save A=mpmd.npy : -np 1 --oversubscribe ./summa -n 8 > out.txt 2> err.txt
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(grep -c 'the ranks were given different arguments' err.txt)" = 1 ] && [ ! -e mpmd.npy ]; then
  ok "different arguments on different ranks refused"
else
  bad "different arguments on different ranks: rc $rc"
fi
expect "a sparse file into a dense tensor" 2 "tensor B is dense: a Matrix Market .mtx file holds a sparse matrix; load it from .npy" \
  summa -n 8 --load B=nofile.mtx
[ -e one.npy ] && bad "two tensors saved into one file: wrote one.npy"
"$PYTHON" - <<'PY'
import numpy as np
np.save("shape.npy", np.zeros((7, 8)))
np.save("dtype.npy", np.zeros((8, 8), dtype=np.float32))
np.save("good.npy", np.ones((8, 8)))
data = open("good.npy", "rb").read()
open("trunc.npy", "wb").write(data[:len(data) - 40])
open("garbage.npy", "wb").write(b"this is not a numpy file at all, not even close" * 4)
PY
expect "wrong shape" 3 "shape" summa -n 8 --load B=shape.npy
expect "wrong dtype" 3 "float32\|<f4\|dtype" summa -n 8 --load B=dtype.npy
expect "truncated file" 3 "trunc.npy" summa -n 8 --load B=trunc.npy
expect "not a .npy file" 2 "garbage.npy" summa -n 8 --load B=garbage.npy
expect "unknown tensor" 2 "Z" summa -n 8 --load Z=good.npy
expect "unwritable output" 3 "nodir" summa -n 8 --save A=nodir/out.npy
if ls nodir* 2>/dev/null | grep -q .; then bad "a partial output file was left"; else ok "no partial output file"; fi
# a good run still works after all that, and its output exists
if timeout 60 "$MPIRUN" -np 3 --oversubscribe ./summa -n 8 --load B=good.npy --save A=out.npy > out.txt 2>&1 && [ -s out.npy ] && ! ls ./*.tmp* 2>/dev/null | grep -q .; then
  ok "good run saves its output and leaves no temporary file"
else bad "good run"; cp out.txt err.txt; fi

# distalc: bad programs and outputs write nothing
printf 'param n = 4;\ntensor A(n) @ M(x -> x);\n' > badprog.dtl
if "$DISTALC" badprog.dtl -o lib 2> err.txt; then bad "distalc accepted a bad program"
elif [ -e lib.c ] || [ -e lib.h ] || ls lib.* 2>/dev/null | grep -q .; then bad "distalc left an output file"
elif ! grep -q '^badprog.dtl:2:[0-9]*: error: ' err.txt; then bad "distalc error has no FILE:LINE:COL"
else ok "distalc rejects a bad program with a located error and writes nothing"; fi
if "$DISTALC" "$top_srcdir/examples/summa.dtl" -o nodir/lib 2> err.txt; then bad "distalc wrote into a missing directory"
elif ls nodir 2>/dev/null | grep -q .; then bad "distalc left a file"
else ok "distalc reports an unwritable output ($(head -1 err.txt))"; fi
# params that make a tensor larger than the executables address: refused before any arithmetic
if "$DISTALC" "$top_srcdir/examples/cannon.dtl" --emit plan --set n=3037000500 --ranks 4 > out.txt 2> err.txt; then
  bad "distalc --emit plan accepted a tensor of 2^63 elements"
elif grep -q "cannon.dtl:10:8: error: .*too many elements to address" err.txt; then ok "distalc --emit plan refuses a tensor of 2^63 elements at its declaration"
else bad "distalc --emit plan on a tensor of 2^63 elements: no clear message"; fi
# a long program compiles in memory that grows with it, not with its square (4000 statements
# took 670 MB when each statement copied the program's buffer and variable tables; 80 MB now)
if "$PYTHON" - "$DISTALC" <<'PY' > err.txt 2>&1; then ok "distalc compiles 4000 statements in little memory ($(cat err.txt))"; else bad "distalc on 4000 statements"; fi
import resource, subprocess, sys
with open("long.dtl", "w") as f:
    f.write("param n = 4;\ntensor a(n);\ntensor b(n);\n" + "a(i) = a(i) + b(i);\n" * 4000)
rc = subprocess.call([sys.argv[1], "long.dtl", "-o", "long"])
mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print("%d MB" % mb)
sys.exit(0 if rc == 0 and mb < 400 else 1)
PY
# the header's path is a directory: the C file written first must not stay behind either
mkdir -p hdir && mkdir hdir/lib.h
if "$DISTALC" "$top_srcdir/examples/summa.dtl" -o hdir/lib 2> err.txt; then bad "distalc wrote a header over a directory"
elif [ "$(ls hdir)" != "lib.h" ]; then bad "distalc left a file when the header could not be written: $(ls hdir | tr '\n' ' ')"
else ok "distalc reports an unwritable header and leaves nothing ($(head -1 err.txt))"; fi
if "$DISTALC" "$top_srcdir/examples/summa.dtl" --exe -o nodir/prog 2> err.txt; then bad "distalc --exe wrote into a missing directory"
else ok "distalc --exe reports an unwritable output"; fi
# --check: everything short of writing code, so also what only the code generator rejects
mkdir -p chk && cd chk || exit 1
if "$DISTALC" "$top_srcdir/examples/summa.dtl" --check 2> ../err.txt && [ -z "$(ls)" ]; then
  ok "distalc --check accepts a valid program and writes nothing"
else bad "distalc --check on summa.dtl"; fi
cat > late.dtl <<'DTL'
param n = 8;
machine M = grid(p);
tensor a(n) @ M(x -> x);
tensor b(n) @ M(x -> x);
tensor c(n);
a(i) = b(i) * c(i) + c(i) .precompute(b(i) * c(i), i, iw, T) .communicate(c, i);
DTL
if "$DISTALC" late.dtl --check 2> ../err.txt; then bad "distalc --check accepted a program the code generator rejects"
elif ! grep -q '^late.dtl:6:[0-9]*: error: precompute: ' ../err.txt; then bad "distalc --check: no located precompute error"
elif [ "$(ls)" != late.dtl ]; then bad "distalc --check wrote a file"
else ok "distalc --check reports what the code generator rejects ($(head -1 ../err.txt | cut -c1-90))"; fi
cd .. || exit 1
# distalc never writes over its input, nor a Slurm script that would launch itself
cp "$top_srcdir/examples/summa.dtl" self.dtl
for flags in "--exe -o self.dtl" "--slurm -o self.dtl" "--emit svg --ranks 4 -o self.dtl"; do
  # shellcheck disable=SC2086
  if "$DISTALC" self.dtl $flags 2> err.txt; then bad "distalc $flags wrote over its input"
  elif ! cmp -s self.dtl "$top_srcdir/examples/summa.dtl"; then bad "distalc $flags changed its input"
  elif ! grep -q "is the input file" err.txt; then bad "distalc $flags: no message saying so"
  else ok "distalc $flags refused: $(head -1 err.txt)"; fi
done
if "$DISTALC" self.dtl --slurm -o self 2> err.txt; then bad "distalc --slurm -o self wrote a script that launches itself"
elif [ -e self ]; then bad "distalc --slurm -o self left a file"
else ok "distalc --slurm -o self refused: $(head -1 err.txt)"; fi
if "$DISTALC" nothere.dtl 2> err.txt; then bad "distalc read a missing file"
else ok "distalc reports a missing input ($(head -1 err.txt))"; fi

# -o names a file: "" and a folder would name hidden files ".c" and ".h"
mkdir -p odir
for o in "" "odir/" "." "odir/.."; do
  if "$DISTALC" "$top_srcdir/examples/summa.dtl" -o "$o" 2> err.txt; then bad "distalc -o '$o' was accepted"
  elif ls -A odir | grep -q . || [ -e .c ] || [ -e .h ]; then bad "distalc -o '$o' wrote a file"
  elif ! grep -q "needs a file name" err.txt; then bad "distalc -o '$o': no clear message"
  else ok "distalc -o '$o' refused ($(head -1 err.txt))"; fi
done
# the Slurm script's usage lines quote a file name the shell would split or expand
# shellcheck disable=SC2016 # the name holds a literal $( )
odd='odd name $(x).dtl'
cp "$top_srcdir/examples/summa.dtl" "$odd"
if ! "$DISTALC" "$odd" --slurm -o 'my job.sh' 2> err.txt; then bad "distalc --slurm on a file name with a space"
else
  words=$(sed -n 's/^#   distalc //p' 'my job.sh')
  eval "set -- $words"
  if [ "$1" = "$odd" ] && [ "$2" = --exe ]; then ok "the Slurm script's usage line quotes the input: $words"
  else bad "the Slurm script's usage line does not give back the input: $words"; fi
fi
# --emit TEXT -o FILE writes FILE (nothing on stdout), whole or not at all; a pipe is written in place
if ! "$DISTALC" "$top_srcdir/examples/summa.dtl" --emit plan --ranks 4 -o plan.txt > out.txt 2> err.txt; then bad "distalc --emit plan -o failed"
elif [ -s out.txt ] || ! grep -q "^statement 1: A(i,j)" plan.txt; then bad "distalc --emit plan -o: the plan is not in the file alone"
elif ! "$DISTALC" "$top_srcdir/examples/summa.dtl" --emit plan --ranks 4 | cmp -s - plan.txt; then bad "distalc --emit plan -o: the file differs from stdout"
else ok "distalc --emit plan -o FILE writes the plan to FILE"; fi
printf 'param n = 4;\ntensor A(n);\nA(i) = B(i);\n' > undeclared.dtl
if "$DISTALC" undeclared.dtl --emit c -o emitted.c 2> err.txt; then bad "distalc --emit c accepted an undeclared tensor"
elif ls emitted.c* > /dev/null 2>&1; then bad "distalc --emit c -o left a file for a program with errors"
else ok "distalc --emit c -o writes nothing for a program with errors"; fi
rm -f emit.fifo && mkfifo emit.fifo
cat emit.fifo > fifo.txt &
reader=$!
if ! "$DISTALC" "$top_srcdir/examples/summa.dtl" --emit cin -o emit.fifo 2> err.txt; then bad "distalc --emit cin -o FIFO failed: $(head -1 err.txt)"
else
  wait "$reader"
  if [ -p emit.fifo ] && grep -q "forall" fifo.txt; then ok "distalc --emit cin -o FIFO writes through the pipe and leaves it a pipe"
  else bad "distalc --emit cin -o FIFO: the pipe was replaced or nothing came through"; fi
fi
kill "$reader" 2>/dev/null
# a param named like an option of the generated executables, cited as the executable spells it
printf 'param h = 4;\ntensor A(h);\nA(i) = 1;\n' > ph.dtl
printf 'param iters = 4;\ntensor A(iters);\nA(i) = 1;\n' > pit.dtl
# ... but a param h is allowed: its executable reads -h V as the param, --help as the help
if ! "$DISTALC" ph.dtl --exe -o ph 2> err.txt; then bad "distalc --exe refused param h"
elif ! timeout 60 "$MPIRUN" -np 1 --oversubscribe ./ph -h 3 --save A=ph.npy > out.txt 2> err.txt || [ ! -s ph.npy ]; then
  bad "./ph -h 3: did not run with the param set"
elif ! timeout 60 "$MPIRUN" -np 1 --oversubscribe ./ph --help > out.txt 2> err.txt || ! grep -q -- "-h V" out.txt; then
  bad "./ph --help: no help listing -h V"
else ok "param h: -h 3 sets it, --help is the help"; fi
if "$DISTALC" pit.dtl --exe -o pit 2> err.txt; then bad "distalc --exe accepted param iters"
elif ! grep -q "^pit.dtl:1:7: error: .*(--iters); rename it" err.txt; then bad "distalc on param iters: no located error citing --iters"
else ok "distalc --exe refuses param iters ($(head -1 err.txt))"; fi
# a machine model that cannot be read (a folder opens, then fails to read) is an error
if "$DISTALC" "$top_srcdir/examples/summa.dtl" --auto --model odir --emit schedule > out.txt 2> err.txt; then bad "distalc read a folder as a machine model"
elif ! grep -q "cannot read the machine model" err.txt; then bad "distalc --model FOLDER: no clear message"
else ok "distalc --model FOLDER refused ($(head -1 err.txt))"; fi
# a literal that would round to 0, and a program whose defaults give a tensor more elements
# than the executables address: located errors at compile time
printf 'param n = 4;\ntensor A(n);\ntensor B(n);\nA(i) = B(i) * 1.5e-400;\n' > tiny.dtl
printf 'param n = 3037000500;\ntensor A(n, n);\nA(i, j) = 1;\n' > huge.dtl
if "$DISTALC" tiny.dtl --check 2> err.txt; then bad "distalc accepted 1.5e-400 (it would be 0)"
elif ! grep -q '^tiny.dtl:4:15: error: .*out of range' err.txt; then bad "distalc on 1.5e-400: no located error"
else ok "distalc refuses a literal that rounds to 0 ($(head -1 err.txt))"; fi
if "$DISTALC" huge.dtl --check 2> err.txt; then bad "distalc accepted defaults that make a tensor of 2^63 elements"
elif ! grep -q '^huge.dtl:2:8: error: .*too many elements to address' err.txt; then bad "distalc on a tensor of 2^63 elements: no located error"
else ok "distalc refuses defaults that make a tensor of 2^63 elements ($(head -1 err.txt))"; fi
# a save into a path through a file, a load from a FIFO (whose open would wait) or a folder
touch afile
expect "a save through a file, not a folder" 2 "afile: Not a directory" summa -n 8 --save A=afile/x.npy
if mkfifo fifo.npy 2>/dev/null; then expect "a load from a FIFO" 2 "fifo.npy: not a regular file" summa -n 8 --load B=fifo.npy; fi
expect "a load from a folder" 2 "odir: not a regular file" summa -n 8 --load B=odir
"$DISTALC" "$top_srcdir/examples/jacobi.dtl" --exe -o jacobi || { echo "FAIL build"; exit 1; }
expect "a floating param that would round to 0" 1 "out of range" jacobi -n 8 --tol 1e-999
expect "a floating param with a leading blank (as an integer's)" 1 "expected a finite number" jacobi -n 8 --tol " 1e-3"
expect "an integer param with a leading blank" 1 "expected a positive integer" jacobi -n " 8"

# an output that is a symbolic link: the link stays and its target is written (--save, distalc -o
# of the library, --emit and --exe); links that loop are refused with a message
mkdir -p ltgt
for f in lsave.npy lib2.c lplan.txt lexe; do echo old > "ltgt/$f"; ln -sf "ltgt/$f" "$f"; done
if timeout 60 "$MPIRUN" -np 2 --oversubscribe ./summa -n 8 --save A=lsave.npy > out.txt 2> err.txt && [ -L lsave.npy ] &&
  "$PYTHON" -c "import numpy as np, sys; sys.exit(np.load('ltgt/lsave.npy').shape != (8, 8))"; then
  ok "--save through a symbolic link writes its target and keeps the link"
else bad "--save through a symbolic link"; fi
if "$DISTALC" "$top_srcdir/examples/summa.dtl" -o lib2 2> err.txt && [ -L lib2.c ] && grep -q "generated by distalc" ltgt/lib2.c &&
  "$DISTALC" "$top_srcdir/examples/summa.dtl" --emit plan --ranks 4 -o lplan.txt 2>> err.txt && [ -L lplan.txt ] &&
  grep -q "^statement 1" ltgt/lplan.txt &&
  "$DISTALC" "$top_srcdir/examples/summa.dtl" --exe -o lexe 2>> err.txt && [ -L lexe ] && [ -x ltgt/lexe ] &&
  ! ls ltgt/*.tmp* ./*.tmp* 2>/dev/null | grep -q .; then
  ok "distalc -o, --emit plan -o and --exe -o through symbolic links write their targets and keep the links"
else bad "distalc -o through a symbolic link"; fi
ln -sf loopb loopa.npy; ln -sf loopa.npy loopb
expect "a save through links that loop" 2 "links loop" summa -n 8 --save A=loopa.npy
if "$DISTALC" "$top_srcdir/examples/summa.dtl" --emit plan -o loopa.npy 2> err.txt; then bad "distalc wrote through links that loop"
elif ! grep -q "links loop" err.txt; then bad "distalc -o through links that loop: no clear message"
else ok "distalc -o through links that loop refused ($(head -1 err.txt))"; fi

echo "$((checks - fails)) passed, $fails failed"
[ $fails -eq 0 ]
