#!/usr/bin/env python3
"""Every name the language accepts, as every kind of name, gives generated C that compiles and
runs, or distalc rejects it at its declaration with a located error (issue: names).

The names come from where collisions would: the C11, C23 and C++ keywords and CUDA's built-in
names; every identifier (macros included) of the headers that generated code includes (the C
library and POSIX headers, mpi.h, cblas.h, omp.h, distal/runtime.h), found by running the MPI
compiler's preprocessor; every identifier of generated code itself (locals of main(), the
runtime's dtl_* names, the names the printer derives from user names); and file stems equal to
system header names.  Each name is used as a tensor, a param and an index variable (also the
derived variables of split/distribute), in programs compiled with distalc in library form,
--main and --exe, run under mpirun at several rank counts with sizes that do not divide them,
and compared with NumPy.  The params that must be rejected (C/C++ keywords, names C reserves,
`defined`, options of generated executables) are checked one by one for a located error.

make check runs every keyword, every generated-code name and a deterministic sample of the
header identifiers; --all runs all of them (a few minutes).
"""
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

DISTALC = os.environ.get("DISTALC", "distalc")
MPIRUN = os.environ.get("MPIRUN", "mpirun")
MPICC = os.environ.get("MPICC", "mpicc")
CFLAGS = os.environ.get("DISTAL_CFLAGS", "")
# names are what is tested, not optimization: distalc --exe compiles at -O0 (the last -O wins;
# gcc takes a minute to optimize the main() of a program of 400 tensors)
os.environ["DISTAL_CFLAGS"] = CFLAGS + " -O0"
TOP = os.environ.get("top_srcdir", ".")
TOPB = os.environ.get("top_builddir", ".")

C_KEYWORDS = """auto break case char const continue default do double else enum extern float for goto
if inline int long register restrict return short signed sizeof static struct switch typedef union
unsigned void volatile while _Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn
_Static_assert _Thread_local alignas alignof bool constexpr false nullptr static_assert thread_local
true typeof typeof_unqual _BitInt _Decimal32 _Decimal64 _Decimal128""".split()
CXX_KEYWORDS = """and and_eq asm bitand bitor catch char8_t char16_t char32_t class co_await co_return
co_yield compl concept const_cast consteval constinit decltype delete dynamic_cast explicit export
friend mutable namespace new noexcept not not_eq operator or or_eq private protected public
reinterpret_cast requires static_cast template this throw try typeid typename using virtual wchar_t
xor xor_eq""".split()
CPP_NAMES = """defined __VA_ARGS__ __VA_OPT__ __LINE__ __FILE__ __DATE__ __TIME__ __STDC__
__STDC_VERSION__ __cplusplus __func__ __COUNTER__ _Pragma __has_include __GNUC__""".split()
CUDA_NAMES = """threadIdx blockIdx blockDim gridDim warpSize __global__ __device__ __host__
__shared__ atomicAdd dim3 cudaStream_t cudaError_t""".split()
# LANGUAGE.md section 2: words of the language itself
DTL_KEYWORDS = set("""param machine tensor temp grid Grid repeat until double float int32 int64
dense compressed csr csf cpu gpu""".split())
# options of generated executables (a param may not take their names: LANGUAGE.md section 8)
OPTIONS = set("fill seed iters warmup load save validate json stats verbose monitor help".split())
HEADERS = ["stdbool.h", "stdio.h", "stdlib.h", "string.h", "math.h", "stdint.h", "inttypes.h",
           "stddef.h", "errno.h", "limits.h", "float.h", "assert.h", "time.h", "unistd.h",
           "mpi.h", "cblas.h", "omp.h", "distal/runtime.h"]
IDENT = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")
HELPERS = {"zqN", "zqM", "zqG", "zqGx", "zqGy", "zqA", "zqB", "zqC", "zqD", "zqx", "zqy", "zqi", "zqj",
           "zqk", "zqio", "zqii"}

failures = 0
checks = 0


def report(ok, what, log=""):
    global failures, checks
    checks += 1
    if ok:
        print("PASS", what, flush=True)
    else:
        failures += 1
        print("FAIL", what)
        for line in log.splitlines()[:30]:
            print("    |", line)


def run(cmd, timeout=300, env=None):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        return 124, "timeout: %s\n%s" % (" ".join(cmd), e.stdout or "")


def header_identifiers(tmp):
    src = os.path.join(tmp, "h.c")
    with open(src, "w") as f:
        f.write("".join("#include <%s>\n" % h for h in HEADERS))
    flags = CFLAGS.split() + ["-fopenmp", "-D_POSIX_C_SOURCE=200809L"]
    rc, macros = run([MPICC] + flags + ["-E", "-dM", src])
    rc2, body = run([MPICC] + flags + ["-E", src])
    if rc or rc2:
        report(False, "preprocess the headers of generated code", macros + body)
        return set()
    names = set(re.findall(r"^#define ([A-Za-z_][A-Za-z0-9_]*)", macros, re.M))
    for line in body.splitlines():
        if not line.startswith("#"):
            names.update(IDENT.findall(line))
    return names


def generated_identifiers(tmp):
    """Names that generated code declares or uses itself (library form, main, sparse, CUDA)."""
    names = set()
    progs = [os.path.join(TOP, "examples", "summa.dtl"), os.path.join(TOP, "examples", "cannon.dtl"),
             os.path.join(TOP, "examples", "ttv.dtl")]
    progs += [os.path.join(TOP, "tests", "e2e", "programs", f)
              for f in sorted(os.listdir(os.path.join(TOP, "tests", "e2e", "programs")))
              if f.startswith("sparse_") and f.endswith(".dtl")][:3]
    for i, p in enumerate(progs):
        for extra in ([], ["--target", "cuda"]):
            out = os.path.join(tmp, "g%d" % i)
            rc, log = run([DISTALC, p, "--main", "-o", out] + extra)
            if rc:
                continue
            for ext in (".c", ".h", ".cu"):
                if os.path.exists(out + ext):
                    with open(out + ext) as f:
                        text = re.sub(r"/\*.*?\*/", " ", f.read(), flags=re.S)
                        text = re.sub(r'"(\\.|[^"\\])*"', " ", text)
                        names.update(IDENT.findall(text))
    for h in ("runtime.h", "grid.h", "cuda.h", "kernel.cuh"):
        path = os.path.join(TOP, "src", "comm", "distal", h)
        if os.path.exists(path):
            with open(path) as f:
                names.update(IDENT.findall(f.read()))
    # what the printer derives from a tensor's or variable's name, spelled as a user name
    for stem in ("A", "B", "t0_A", "v_i", "p_n"):
        for suf in ("lo", "st", "vol", "box", "cur", "req", "nbox", "nvol", "nbuf", "pos", "crd", "vals",
                    "coo", "ext", "in"):
            names.add("%s_%s" % (stem, suf))
            names.add("dtl_%s_%s" % (stem, suf))
    return names


def usable(n):
    return n not in DTL_KEYWORDS and n not in HELPERS and IDENT.fullmatch(n) is not None


def param_rejected(n):
    return (n in C_KEYWORDS or n in CXX_KEYWORDS or n == "defined" or n in OPTIONS
            or (n.startswith("_") and len(n) > 1 and (n[1] == "_" or n[1].isupper())))


def compile_forms(tmp, tag, prog_text, exe_name="prog"):
    """distalc in library form (compiled with -I on its folder), --main, --exe; returns the
    executable's path or None."""
    d = os.path.join(tmp, tag)
    os.makedirs(d, exist_ok=True)
    src = os.path.join(d, "names_%s.dtl" % tag)
    with open(src, "w") as f:
        f.write(prog_text)
    lib = os.path.join(d, "lib_%s" % tag)
    rc, log = run([DISTALC, src, "-o", lib])
    if rc == 0:
        rc, log = run([MPICC, "-std=c11", "-Wall", "-Werror", "-c", lib + ".c", "-I" + d] + CFLAGS.split()
                      + ["-o", lib + ".o"])
    report(rc == 0, "%s: library form compiles (-Wall -Werror, -I on its folder)" % tag, log)
    # --main writes what --exe compiles (checked there); here only that it is written
    rc, log = run([DISTALC, src, "--main", "-o", os.path.join(d, "main_%s" % tag)])
    rc = rc or not os.path.exists(os.path.join(d, "main_%s.c" % tag))
    report(rc == 0, "%s: --main writes its source" % tag, log)
    exe = os.path.join(d, exe_name)
    rc, log = run([DISTALC, src, "--exe", "-o", exe], timeout=600)
    report(rc == 0, "%s: --exe builds" % tag, log)
    if shutil.which("g++") and rc == 0:  # the header is also C++
        cpp = os.path.join(d, "use.cpp")
        with open(cpp, "w") as f:
            f.write('#include <cstdio>\n#include <cstdlib>\n#include "lib_%s.h"\nint main() { return 0; }\n' % tag)
        inc = [x for x in CFLAGS.split() if x.startswith("-I")]
        rc2, log2 = run(["mpicxx", "-fsyntax-only", "-I" + d, cpp] + inc)
        report(rc2 == 0, "%s: the header compiles as C++" % tag, log2)
    return exe if rc == 0 else None


def cuda_compile(tmp, tag, prog_text):
    """The CUDA target: nvcc on the kernels where CUDA is installed, and the whole program
    run on the host emulation when the build has it."""
    d = os.path.join(tmp, tag + "_cuda")
    os.makedirs(d, exist_ok=True)
    src = os.path.join(d, "names_%s.dtl" % tag)
    with open(src, "w") as f:
        f.write(prog_text)
    out = os.path.join(d, "k")
    rc, log = run([DISTALC, src, "--target", "cuda", "-o", out])
    report(rc == 0, "%s: --target cuda library form is written" % tag, log)
    nvcc = os.environ.get("NVCC") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if rc == 0 and nvcc and (FULL or os.environ.get("DISTAL_TEST_NVCC")):
        rc, log = run([nvcc, "-c", out + ".cu", "-I" + os.path.join(TOP, "src", "comm"), "-o", out + "_cu.o"],
                      timeout=600)
        report(rc == 0, "%s: nvcc compiles the kernels" % tag, log)
    emu = os.path.join(TOPB, "tests", "cuemu", ".libs")
    if os.path.isdir(emu):
        env = dict(os.environ, DISTAL_CUDA_EMULATION="1", DISTAL_CUDA_CFLAGS="-I" + os.path.join(TOP, "tests", "cuemu"),
                   DISTAL_CUDA_LIBS="-L%s -Wl,-rpath,%s -ldistal_cuemu -lhwloc" % (emu, emu))
        exe = os.path.join(d, "prog")
        rc, log = run([DISTALC, src, "--target", "cuda", "--exe", "-o", exe], env=env, timeout=600)
        report(rc == 0, "%s: --target cuda --exe builds (host emulation)" % tag, log)
        if rc == 0:
            return exe, env
    return None, None


def mpirun(exe, ranks, args, env=None):
    return run([MPIRUN, "-np", str(ranks), "--oversubscribe", exe] + args, env=env)


def run_compare(tmp, exe, ranks, args, want, what):
    """Run with index fills and --validate; tensor zqA must equal `want` exactly."""
    d = tempfile.mkdtemp(dir=tmp)
    rc, log = mpirun(exe, ranks, args + ["--fill", "index", "--validate", "--save", "zqA=" + os.path.join(d, "a.npy")])
    ok = rc == 0 and "MISMATCH" not in log
    if ok:
        got = np.load(os.path.join(d, "a.npy"))
        ok = np.array_equal(got, want)
        if not ok:
            log += "\ngot %s\nwant %s" % (got, want)
    report(ok, what, log)
    shutil.rmtree(d, ignore_errors=True)


# ---- names as tensors ----------------------------------------------------------------------
def tensor_program(names, sparse=True):
    """The names are dense int64 vectors summed into the first; a chain of statements reads and
    writes the next ones; three are sparse matrices of a matrix-vector product (CPU target)."""
    sp = names[1:4] if len(names) > 8 and sparse else []
    dense = [n for n in names if n not in sp]
    out, rest = dense[0], dense[1:]
    lines = ["param zqN = 7;", "machine zqM = grid(zqG);"]
    for n in dense:
        lines.append("tensor %s(zqN) int64 @ zqM(x -> x);" % n)
    for n in sp:
        lines.append("tensor %s(zqN, zqN) int64 csr @ zqM(xy -> x);" % n)
    stmts = []
    for k in range(0, max(len(rest), 1), 40):  # the inputs summed into the first, 40 a statement
        group, op = rest[k:k + 40], "=" if k == 0 else "+="
        lines.append("%s(zqi) %s %s;" % (out, op, " + ".join("%s(zqi)" % n for n in group) if group else "0"))
        stmts.append((out, op, group))
    chain = rest[:24]
    for k in range(1, len(chain)):
        op = "+=" if k % 2 else "="
        lines.append("%s(zqi) %s %s(zqi) + %s(zqi)\n  .split(zqi, zqio, zqii, 3);" % (chain[k], op, chain[k - 1], chain[k]))
        stmts.append((chain[k], op, [chain[k - 1], chain[k]]))
    for k, s in enumerate(sp):
        y, x = chain[k % len(chain)], chain[(k + 1) % len(chain)]
        lines.append("%s(zqi) += %s(zqi, zqj) * %s(zqj);" % (y, s, x))
        stmts.append((y, "spmv", [s, x]))
    return "\n".join(lines) + "\n", dense, sp, stmts


def check_tensors(tmp, tag, names, ranks_list, cuda=False):
    text, dense, sp, stmts = tensor_program(names)
    exe = compile_forms(tmp, tag, text)
    runs = [(exe, None, dense, sp, stmts)] if exe else []
    if cuda:  # the CUDA target has no sparse tensors: the same names, all dense
        ctext, cdense, csp, cstmts = tensor_program(names, sparse=False)
        cexe, env = cuda_compile(tmp, tag, ctext)
        if cexe:
            runs.append((cexe, env, cdense, csp, cstmts))
    for exe, env, dense, sp, stmts in runs:
        written = sorted({s[0] for s in stmts})
        for ranks in ranks_list:
            d = tempfile.mkdtemp(dir=tmp)
            saves = []
            for n in written + sp:
                saves += ["--save", "%s=%s" % (n, os.path.join(d, n + ".npy"))]
            rc, log = mpirun(exe, ranks, ["--fill", "index", "--density", "0.4", "--validate"] + saves, env=env)
            ok = rc == 0 and "MISMATCH" not in log
            if ok:
                vals = {n: np.arange(7, dtype=np.int64) for n in dense}
                mats = {s: np.load(os.path.join(d, s + ".npy")) for s in sp}
                for lhs, op, rhs in stmts:
                    if op == "spmv":
                        vals[lhs] = vals[lhs] + mats[rhs[0]] @ vals[rhs[1]]
                    else:
                        v = sum((vals[r] for r in rhs), np.zeros(7, dtype=np.int64))
                        vals[lhs] = vals[lhs] + v if op == "+=" else v
                for n in written:
                    got = np.load(os.path.join(d, n + ".npy"))
                    if not np.array_equal(got, vals[n]):
                        ok = False
                        log += "\n%s: got %s expected %s" % (n, got, vals[n])
            report(ok, "%s: %d names as tensors, %d ranks%s" % (tag, len(names), ranks, " (cuda)" if env else ""), log)
            shutil.rmtree(d, ignore_errors=True)


# ---- names as params ------------------------------------------------------------------------
def check_params(tmp, tag, names, ranks_list):
    names = [n for n in names if not param_rejected(n) and n != "density"]
    if len(names) < 6:
        return
    ext, ext2, factor, grid = names[0], names[1], names[2], names[3]
    lines = ["param %s = 9;" % ext, "param %s = 5;" % ext2, "param %s = 2;" % factor]
    lines += ["param %s = %d;" % (n, 3 + k % 5) for k, n in enumerate(names[4:])]
    lines.append("machine zqM = grid(%s);" % grid)
    lines.append("tensor zqA(%s) int64 @ zqM(x -> x);" % ext)
    lines.append("tensor zqB(%s) int64 @ zqM(x -> x);" % ext)
    lines.append("tensor zqC(%s, %s) int64 @ zqM(xy -> x);" % (ext, ext2))
    lines.append("tensor zqD(%s) int64;" % ext2)
    lines.append("zqA(zqi) = zqB(zqi) + zqC(zqi, zqj) * zqD(zqj)\n  .split(zqi, zqio, zqii, %s);" % factor)
    text = "\n".join(lines) + "\n"
    exe = compile_forms(tmp, tag, text)
    if not exe:
        return
    for ranks in ranks_list:
        n0 = 11 + ranks  # set the first param on the command line, as -NAME V and --NAME=V
        b = np.arange(n0, dtype=np.int64)
        c = np.arange(n0 * 5, dtype=np.int64).reshape(n0, 5)
        run_compare(tmp, exe, ranks, ["-" + ext, str(n0), "--%s=%d" % (factor, 3)], b + c @ np.arange(5, dtype=np.int64),
                    "%s: %d names as params, %d ranks" % (tag, len(names), ranks))


def check_param_h(tmp):
    """A param h (a step size, a grid dim): -h sets it, --help is the help (and says only --help);
    without a param h, -h is the help."""
    text = ("param zqN = 6;\nparam h = 2;\nmachine zqM = grid(zqG);\ntensor zqA(zqN) int64 @ zqM(x -> x);\n"
            "tensor zqB(zqN) int64 @ zqM(x -> x);\nzqA(zqi) = zqB(zqi) * h;\n")
    exe = compile_forms(tmp, "param_h", text)
    if not exe:
        return
    for ranks in (1, 3):
        run_compare(tmp, exe, ranks, ["-h", "5", "-zqN", "7"], np.arange(7, dtype=np.int64) * 5,
                    "param h set by -h 5, %d ranks" % ranks)
    rc, log = mpirun(exe, 2, ["--help"])
    report(rc == 0 and "-h V" in log and "--help " in log and "--help, -h" not in log,
           "param h: --help lists -h V and the help as --help only", log)
    rc, log = mpirun(exe, 2, ["-h"])
    report(rc != 0 and "'-h' needs a value" in log, "param h: -h without a value is an error", log)
    other = compile_forms(tmp, "no_h", text.replace("param h = 2;", "param zqH = 2;").replace("* h", "* zqH"))
    if other:
        rc, log = mpirun(other, 1, ["-h"])
        report(rc == 0 and "--help, -h" in log, "no param h: -h is the help", log)


def check_param_rejections(tmp, names):
    """Each name a param cannot take: one located error at its declaration, no output file."""
    d = os.path.join(tmp, "rejected")
    os.makedirs(d, exist_ok=True)
    for n in names:
        src = os.path.join(d, "r.dtl")
        with open(src, "w") as f:
            f.write("param zqN = 5;\nmachine zqM = grid(zqG);\n  param %s = 3;\ntensor zqA(zqN) @ zqM(x -> x);\n"
                    "zqA(zqi) = zqA(zqi) * 2;\n" % n)
        out = os.path.join(d, "out_" + n)
        rc, log = run([DISTALC, src, "--exe", "-o", out])
        ok = rc != 0 and re.search(r"r\.dtl:3:9: error: .*'%s'" % re.escape(n), log) is not None \
            and not os.path.exists(out)
        report(ok, "param named %s: rejected at its declaration" % n, log)


# ---- names as index variables ---------------------------------------------------------------
def check_vars(tmp, tag, names, ranks_list):
    groups = [names[k:k + 9] for k in range(0, len(names) - 8, 9)]
    lines = ["param zqN = 7;", "machine zqM = grid(zqGx, zqGy);",
             "tensor zqA(zqN, zqN) int64 @ zqM(xy -> xy);",
             "tensor zqB(zqN, zqN) int64 @ zqM(xy -> xy);",
             "tensor zqC(zqN, zqN) int64 @ zqM(xy -> xy);"]
    for k, g in enumerate(groups):
        i, j, l, io, jo, ii, ji, lo, li = g
        op = "=" if k == 0 else "+="
        lines.append("zqA(%s, %s) %s zqB(%s, %s) * zqC(%s, %s)\n"
                     "  .distribute({%s, %s}, {%s, %s}, {%s, %s}, zqM)\n"
                     "  .split(%s, %s, %s, 3)\n  .reorder({%s, %s, %s, %s})\n  .communicate({zqB, zqC}, %s);"
                     % (i, j, op, i, l, l, j, i, j, io, jo, ii, ji, l, lo, li, lo, ii, ji, li, lo))
    if not groups:
        return
    text = "\n".join(lines) + "\n"
    exe = compile_forms(tmp, tag, text)
    if not exe:
        return
    m = np.arange(49, dtype=np.int64).reshape(7, 7)
    for ranks in ranks_list:
        run_compare(tmp, exe, ranks, [], len(groups) * (m @ m),
                    "%s: %d names as index variables (%d statements), %d ranks" % (tag, len(groups) * 9, len(groups), ranks))


# ---- file stems --------------------------------------------------------------------------------
def check_stems(tmp, stems):
    """A stem equal to a system header's: --exe works; the library form either works without
    hiding anything, or is refused with a message naming the header (no file written)."""
    prog = open(os.path.join(TOP, "examples", "summa.dtl")).read()
    for stem in stems:
        d = os.path.join(tmp, "stem_" + stem.replace("/", "_"))
        os.makedirs(d, exist_ok=True)
        src = os.path.join(d, stem + ".dtl")
        with open(src, "w") as f:
            f.write(prog)
        exe = os.path.join(d, "x_" + stem)
        rc, log = run([DISTALC, src, "--exe", "-o", exe])
        if rc != 0 and "of the generated API (from the file name)" in log and "choose another with --name" in log:
            # a prefix in another party's namespace (mpi: MPI's): refused, and --name works
            report(not os.path.exists(exe), "file stem %s: refused as an API prefix, nothing written" % stem, log)
            rc, log = run([DISTALC, src, "--exe", "--name", "k_" + stem, "-o", exe])
        if rc == 0:
            rc, log = mpirun(exe, 3, ["-n", "17", "--chunk", "5", "--validate"])
        report(rc == 0 and "validate A:" in log and "MISMATCH" not in log, "file stem %s: --exe runs, validated" % stem, log)
        out = os.path.join(d, stem)
        rc, log = run([DISTALC, src, "-o", out])
        prefix = stem
        if rc != 0 and "of the generated API (from the file name)" in log:
            prefix = "k_" + stem
            rc, log = run([DISTALC, src, "--name", prefix, "-o", out])
        if rc == 0:
            # usable from an application compiled with -I on the folder, next to the system header
            app = os.path.join(d, "app.c")
            with open(app, "w") as f:
                f.write('#include <%s.h>\n#include <stdio.h>\n#include <mpi.h>\n#include "%s.h"\n'
                        'int main(void) { %s_params p; %s_params_default(&p); printf("%%d\\n", (int)p.n); return 0; }\n'
                        % (stem, stem, prefix, prefix))
            rc, log = run([MPICC, "-std=c11", "-I" + d] + CFLAGS.split() + ["-c", app, "-o", app + ".o"])
            report(rc == 0, "file stem %s: library form usable with -I on its folder" % stem, log)
        else:
            ok = ("would hide the header <%s.h>" % stem) in log and not os.path.exists(out + ".c") \
                and not os.path.exists(out + ".h")
            report(ok, "file stem %s: library form refused, naming the header it would hide" % stem, log)


FULL = "--all" in sys.argv


def main():
    full = FULL
    tmp = tempfile.mkdtemp(prefix="distal-names.")
    try:
        headers = header_identifiers(tmp)
        generated = generated_identifiers(tmp)
        keywords = C_KEYWORDS + CXX_KEYWORDS + CPP_NAMES + CUDA_NAMES
        kw = sorted({n for n in keywords if usable(n)})
        gen = sorted(n for n in generated - set(kw) if usable(n))
        rest = sorted(n for n in headers - set(kw) - set(gen) if usable(n))
        if not full:
            gen = random.Random(7).sample(gen, min(len(gen), 110))
            rest = random.Random(11).sample(rest, min(len(rest), 130))
        # the names most likely to collide lead each kind's first program
        # (and the types generated declarations spell: a C++ member of that name hides the type)
        lead = ["A", "B", "A_lo", "A_st", "A_cur", "in_A", "t0_A", "dtl_t0_A", "dtl_A_lo", "plan", "values", "rank",
                "status", "opt", "err", "prm", "ctx", "dtl_plan", "dtl_ctx", "n_A", "r_in_A", "r_A", "i", "j", "n",
                "int64_t", "int32_t", "size_t", "uintptr_t", "MPI_Comm", "dtl_sparse"]
        everything = []
        for n in lead + kw + gen + rest:
            if usable(n) and n not in everything:
                everything.append(n)
        print("names: %d keywords, %d names of generated code and the runtime, %d header identifiers%s"
              % (len(kw), len(gen), len(rest), "" if full else " (samples; --all for every one)"))
        chunk = 400
        chunks = [everything[k:k + chunk] for k in range(0, len(everything), chunk)]
        ranks = [1, 3, 4] if not full else [1, 2, 3, 4, 6, 8]
        sys.stdout.flush()
        for k, c in enumerate(chunks):
            r = ranks if k == 0 else [ranks[(k % (len(ranks) - 1)) + 1]]
            check_tensors(tmp, "tensors%d" % k, c, r, cuda=(k == 0))
            check_params(tmp, "params%d" % k, c, r if full else r[-1:])
            check_vars(tmp, "vars%d" % k, c, r if full else r[1:])
        rejected = sorted({n for n in everything if param_rejected(n)})
        if not full:  # every keyword and option; a sample of the reserved identifiers
            reserved = [n for n in rejected if n.startswith("_") and n not in C_KEYWORDS]
            rejected = [n for n in rejected if n not in reserved] + random.Random(3).sample(reserved, min(len(reserved), 12))
        rejected = sorted(set(rejected) | OPTIONS | {"defined", "__LINE__", "_X"})
        check_param_rejections(tmp, [n for n in rejected if usable(n)])
        check_param_h(tmp)
        stems = ["stdio", "stdlib", "string", "math", "mpi", "time", "stdint", "cblas", "omp", "runtime", "assert", "errno"]
        check_stems(tmp, stems)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("names: %d passed, %d failed" % (checks - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
