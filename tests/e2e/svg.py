#!/usr/bin/env python3
"""distalc --emit svg: every example at 1, 2, 4, 6 and 8 ranks draws a well-formed SVG 1.1
document with one panel per statement of --emit plan, naming every rank and every tensor of
each statement, with the plan's bytes per communicate point word for word; the messages of
the first step agree with SUMMA's and Cannon's communication computed here from the
algorithms; and bad input (a rank count the machine does not admit, a bad --set) is an
error that writes no file."""
import glob
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

SRC = os.environ.get("top_srcdir", ".")
DISTALC = os.environ.get("DISTALC", "distalc")
NS = "{http://www.w3.org/2000/svg}"
failures = []
checked = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def distalc(*args):
    return subprocess.run([DISTALC, *args], capture_output=True, text=True, timeout=120)


def texts(elem, tag):
    return ["".join(e.itertext()) for e in elem.iter(NS + tag)]


def plan_statements(plan):
    """[(statement text, [tensor names], [bytes lines])] of --emit plan's output"""
    out = []
    inside = False
    for line in plan.splitlines():
        m = re.match(r"statement (\d+): (.*)$", line)
        if m:
            out.append((line, [], []))
            inside = True
            continue
        inside &= line.startswith(" ")  # the notes after the plan belong to no statement
        if not inside:
            continue
        m = re.match(r"  (write|read) (\w+) at ", line)
        if m and out:
            out[-1][1].append(m.group(2))
        m = re.match(r"    (bytes per rank.*)$", line)
        if m and out:
            out[-1][2].append(m.group(1))
    return out


def check_svg(text, what, ranks, stmts):
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        return fail(f"{what}: not XML: {e}")
    if root.tag != NS + "svg" or root.get("version") != "1.1":
        return fail(f"{what}: root is {root.tag} version {root.get('version')}, not SVG 1.1")
    if root.findall(f".//{NS}script") or root.findall(f".//{NS}image") or "xlink:href" in text:
        fail(f"{what}: not self-contained")
    checked.append(what)
    panels = [g for g in root.iter(NS + "g") if g.get("class") == "statement"]
    if len(panels) != len(stmts):
        return fail(f"{what}: {len(panels)} panels for {len(stmts)} statements")
    for g, (stmt, tensors, byte_lines) in zip(panels, stmts):
        t = texts(g, "text")
        if stmt not in t:
            fail(f"{what}: panel without the title {stmt!r}")
        titles = " ".join(texts(g, "title"))
        named = set(int(r) for r in re.findall(r"rank (\d+) \(", titles))
        if named != set(range(ranks)):
            fail(f"{what}: {stmt}: ranks named {sorted(named)}, not 0..{ranks - 1}")
        for name in tensors:
            if not any(x.startswith(name + ": ") for x in t):
                fail(f"{what}: {stmt}: tensor {name} not drawn")
        drawn = [x for x in t if x.startswith("bytes per rank")]
        if drawn != byte_lines:
            fail(f"{what}: {stmt}: bytes {drawn} but the plan says {byte_lines}")
        known = [int(m.group(1)) for b in byte_lines for m in [re.match(r"bytes per rank(?: \(rank 0\))?: (\d+)(?: =|$)", b)]
                 if m]
        if len(known) == len(byte_lines):
            total = f"communication: {sum(known)} bytes per rank (rank 0), all communicate points and steps"
            if total not in t:
                fail(f"{what}: {stmt}: no total {total!r}")
    return root


def examples():
    files = sorted(glob.glob(os.path.join(SRC, "examples", "*.dtl")) + glob.glob(os.path.join(SRC, "examples", "app", "*.dtl")))
    if len(files) < 10:
        fail(f"only {len(files)} examples found under {SRC}/examples")
    for f in files:
        base = os.path.basename(f)
        for p in (1, 2, 4, 6, 8):
            sets = ["--set", "n=10"] if base in ("cg.dtl", "bicgstab.dtl") else []
            plan = distalc(f, "--emit", "plan", "--ranks", str(p), *sets)
            svg = distalc(f, "--emit", "svg", "--ranks", str(p), *sets)
            what = f"{base} at {p} ranks"
            if plan.returncode != 0:
                if svg.returncode == 0 or svg.stdout or "distalc:" not in svg.stderr:
                    fail(f"{what}: --emit plan fails ({plan.stderr.strip()}) but --emit svg: rc {svg.returncode}")
                continue
            if svg.returncode != 0:
                fail(f"{what}: --emit svg failed: {svg.stderr}")
                continue
            check_svg(svg.stdout, what, p, plan_statements(plan.stdout))


def messages(root, header):
    """the message rows listed under the communicate point whose heading starts with header"""
    t = texts(root, "text")
    start = next((k for k, x in enumerate(t) if x.startswith(header)), None)
    if start is None:
        fail(f"no communicate point {header!r}")
        return set()
    rows = set()
    for x in t[start + 1:]:
        if re.match(r"(write|read) \w+ at ", x):
            break
        m = re.match(r"r(\d+)\s+-> r(\d+)\s+\w+ (.*?)  (\d+) elements", x)
        if m:
            box = tuple(tuple(int(v) for v in re.findall(r"-?\d+", d)) for d in m.group(3).split(" x "))
            rows.add((int(m.group(1)), int(m.group(2)), box, int(m.group(4))))
    return rows


def blocks(n, parts):
    s = -(-n // parts)
    return [(min(n, c * s), min(n, (c + 1) * s)) for c in range(parts)]


def grid_of(plan):
    return [int(v) for v in re.match(r"grid: ([\d ]+) \(", plan).group(1).split()]


def check_algorithms():
    """SUMMA: in the first step, B's panel [0, chunk) of each row block goes from the column
    holding k = 0 to the other columns, and C's likewise down the rows.  Cannon, aligned, shifts
    each rank's block of C to the neighbour at coordinate - 1 along grid dim 0."""
    for p, n, chunk in ((4, 10, 3), (6, 11, 4), (8, 13, 5)):
        f = os.path.join(SRC, "examples", "summa.dtl")
        sets = ["--set", f"n={n}", "--set", f"chunk={chunk}"]
        plan = distalc(f, "--emit", "plan", "--ranks", str(p), *sets).stdout
        gx, gy = grid_of(plan)
        root = ET.fromstring(distalc(f, "--emit", "svg", "--ranks", str(p), *sets).stdout)
        rb, cb = blocks(n, gx), blocks(n, gy)
        want_b, want_c = set(), set()
        for x in range(gx):
            for y in range(gy):
                # every block along k that meets the first panel [0, chunk) is one piece
                for c, (lo, hi) in enumerate(cb):
                    box = (rb[x], (lo, min(hi, chunk)))
                    vol = (rb[x][1] - rb[x][0]) * (box[1][1] - lo)
                    if c != y and lo < chunk and vol > 0:
                        want_b.add((x * gy + c, x * gy + y, box, vol))
                for r, (lo, hi) in enumerate(rb):
                    box = ((lo, min(hi, chunk)), cb[y])
                    vol = (box[0][1] - lo) * (cb[y][1] - cb[y][0])
                    if r != x and lo < chunk and vol > 0:
                        want_c.add((r * gy + y, x * gy + y, box, vol))
        if messages(root, "read B at ko") != want_b:
            fail(f"summa at {p} ranks, n={n}: B's messages {sorted(messages(root, 'read B at ko'))}, expected {sorted(want_b)}")
        if messages(root, "read C at ko") != want_c:
            fail(f"summa at {p} ranks, n={n}: C's messages {sorted(messages(root, 'read C at ko'))}, expected {sorted(want_c)}")
    f = os.path.join(SRC, "examples", "cannon.dtl")
    for p, n in ((4, 10), (9, 10)):
        root = ET.fromstring(distalc(f, "--emit", "svg", "--ranks", str(p), "--set", f"n={n}").stdout)
        q = int(round(p ** 0.5))
        b = blocks(n, q)
        want = set()
        for x in range(q):
            for y in range(q):
                k = (x + y) % q  # the aligned block of C at the first step
                box = (b[k], b[y])
                vol = (box[0][1] - box[0][0]) * (box[1][1] - box[1][0])
                if vol:
                    want.add((x * q + y, ((x - 1) % q) * q + y, box, vol))
        got = messages(root, "read C at kos")
        if got != want:
            fail(f"cannon at {p} ranks: C's shift {sorted(got)}, expected {sorted(want)}")


def check_errors():
    tmp = tempfile.mkdtemp()
    out = os.path.join(tmp, "j.svg")
    f = os.path.join(SRC, "examples", "johnson.dtl")
    r = distalc(f, "--emit", "svg", "--ranks", "4", "-o", out)
    if r.returncode == 0 or "cube" not in r.stderr or os.listdir(tmp):
        fail(f"johnson at 4 ranks: rc {r.returncode}, stderr {r.stderr!r}, files {os.listdir(tmp)}")
    r = distalc(f, "--emit", "svg", "--set", "nope=3", "-o", out)
    if r.returncode == 0 or "--set" not in r.stderr or os.listdir(tmp):
        fail(f"bad --set: rc {r.returncode}, stderr {r.stderr!r}")
    r = distalc(f, "--emit", "svg", "--ranks", "0")
    if r.returncode == 0 or r.stdout:
        fail(f"--ranks 0: rc {r.returncode}")
    # without --ranks: the count --emit plan picks (johnson: 8), named on stderr
    r = distalc(f, "--emit", "svg", "-o", out)
    plan = distalc(f, "--emit", "plan").stdout
    if r.returncode != 0 or "8 ranks" not in r.stderr or not plan.startswith("# ranks: 8"):
        fail(f"johnson without --ranks: rc {r.returncode}, stderr {r.stderr!r}")
    else:
        with open(out) as fh:
            check_svg(fh.read(), "johnson without --ranks", 8, plan_statements(plan))
    # names that need escaping, and deterministic output
    odd = os.path.join(tmp, "a&b<c>.dtl")
    with open(os.path.join(SRC, "examples", "summa.dtl")) as src, open(odd, "w") as dst:
        dst.write(src.read())
    a, b = distalc(odd, "--emit", "svg", "--ranks", "6"), distalc(odd, "--emit", "svg", "--ranks", "6")
    if a.returncode != 0 or a.stdout != b.stdout:
        fail("summa from a&b<c>.dtl: failed or not deterministic")
    else:
        root = ET.fromstring(a.stdout)
        if not any("a&b<c>.dtl" in x for x in texts(root, "title")):
            fail("the file name a&b<c>.dtl is not in the document's title")
    for name in os.listdir(tmp):
        os.unlink(os.path.join(tmp, name))
    os.rmdir(tmp)


examples()
check_algorithms()
check_errors()
if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print(f"svg: all checks passed ({len(checked)} documents against their plans)")
