"""sparse.py -- random sparse inputs of the end-to-end tests, and their files.

A sparse tensor (a tensor with a compressed level) is loaded with `--load T=FILE` from
a Matrix Market .mtx file (order 2), a FROSTT .tns file (any order) or a dense .npy
file (LANGUAGE.md section 8).  random_sparse makes the data: a density of 0.1 to 0.3,
from order 2 some slices of the first dimension (rows) and of the last entirely empty,
values like the dense inputs' (floats in [-1, 1), integers in [-4, 4], never zero).
write_input picks one of the files at random and writes it; it returns the dense array
that the file means, which is what the oracle computes with and what `--save T=F.npy`
must give back.  write_given writes a given array's nonzeros unchanged (a matrix that an
iterative method converges on).  The files vary the ways a reader can go wrong:
  - .mtx: `real`, `integer` or `pattern` (every stored value 1), `general` or
    `symmetric` (square only: the lower triangle is stored and means its mirror image
    too) or `skew-symmetric` (the strictly lower triangle, mirrored negated), `%`
    comment lines, entries sorted by rows, by columns or shuffled;
  - .tns: 1-based coordinates then the value, `#` comment lines, any entry order;
  - both: an entry stored twice with two values that add up (to a value that is
    exact in every type), an explicit zero.
read_mtx and read_tns are independent readers of these files, for the self-tests
(test_oracle.py).
"""

import numpy as np

FORMS = ("mtx", "tns", "npy")


def _values(n, dtype, rng):
    """n nonzero values: floats in [-1, 1), integers in [-4, 4]."""
    if np.issubdtype(dtype, np.integer):
        v = rng.integers(1, 5, size=n) * rng.choice([-1, 1], size=n)
        return v.astype(dtype)
    v = rng.uniform(-1.0, 1.0, size=n)
    v[v == 0] = 0.5
    return v.astype(dtype)


def random_sparse(shape, dtype, rng, density=None, symmetry="general", integer_values=False):
    """A dense array with the values of a random sparse tensor.  symmetry (of a square
    matrix): "symmetric" (equal to its transpose) or "skew-symmetric" (equal to minus
    its transpose); integer_values: floats that are integers."""
    shape = tuple(shape)
    dtype = np.dtype(dtype)
    if density is None:
        density = rng.uniform(0.1, 0.3)
    mask = rng.random(shape) < density
    if len(shape) >= 2 and shape[0] >= 3:
        # some slices of the first dimension entirely empty (empty rows)
        k = max(1, shape[0] // 5)
        mask[rng.choice(shape[0], size=k, replace=False)] = False
    if len(shape) >= 2 and shape[-1] >= 3 and rng.random() < 0.5:
        mask[..., rng.integers(shape[-1])] = False  # an empty column
    n = int(mask.sum())
    if integer_values and not np.issubdtype(dtype, np.integer):
        vals = _values(n, np.dtype(np.int64), rng).astype(dtype)
    else:
        vals = _values(n, dtype, rng)
    a = np.zeros(shape, dtype)
    a[mask] = vals
    if symmetry != "general":
        assert len(shape) == 2 and shape[0] == shape[1]
        low = np.tril(a, -1)
        a = np.diag(np.diag(a)) + low + low.T if symmetry == "symmetric" else low - low.T
    return a


def format_value(x, dtype):
    """A value as text that every reader turns back into exactly x."""
    if np.issubdtype(np.dtype(dtype), np.integer):
        return str(int(x))
    return repr(float(x))  # a float32 value is exact as a double


def _stored(coords, symmetry):
    """The coordinates a file of this symmetry may hold: the lower triangle of a
    symmetric matrix, the strictly lower one of a skew-symmetric one."""
    if symmetry == "symmetric":
        return coords[coords[:, 0] >= coords[:, 1]]
    if symmetry == "skew-symmetric":
        return coords[coords[:, 0] > coords[:, 1]]
    return coords


def _entries(a, symmetry="general"):
    """(coordinates, value) of the nonzeros of a that a file stores, row-major."""
    coords = _stored(np.argwhere(a != 0), symmetry)
    return [(tuple(int(c) for c in cs), a[tuple(cs)].item()) for cs in coords]


def _dyadic_pair(dtype, rng, integer=False):
    """Two nonzero values whose sum is exact in any type and any order of summation;
    integer: two integers."""
    if integer or np.issubdtype(np.dtype(dtype), np.integer):
        p, q = rng.integers(1, 5, size=2) * rng.choice([-1, 1], size=2)
        return int(p), int(q)
    p, q = rng.integers(1, 48, size=2) * rng.choice([-1, 1], size=2)
    return float(p) / 64, float(q) / 64


def _arrange(entries, rng, column_major_ok=True):
    """The entries in one of the orders a file may hold them in."""
    r = rng.random()
    if r < 0.3:
        return entries  # sorted row-major
    if r < 0.5 and column_major_ok:
        return sorted(entries, key=lambda e: tuple(reversed(e[0])))
    order = rng.permutation(len(entries))
    return [entries[k] for k in order]


def _spice(a, entries, field, rng, symmetry="general"):
    """Add duplicates and an explicit zero to entries (in place); update a to what
    the entries mean.  No duplicates in pattern files."""
    dtype = a.dtype
    if field != "pattern" and entries and rng.random() < 0.6:
        for k in rng.choice(len(entries), size=min(2, len(entries)), replace=False):
            c, _ = entries[k]
            p, q = _dyadic_pair(dtype, rng, field == "integer")
            entries[k] = (c, p)
            entries.append((c, q))
            a[c] = np.asarray(p + q).astype(dtype)
            if symmetry != "general" and c[0] != c[1]:
                a[c[1], c[0]] = a[c] if symmetry == "symmetric" else -a[c]
    if field != "pattern" and rng.random() < 0.3:
        zeros = _stored(np.argwhere(a == 0), symmetry)
        if len(zeros):
            c = tuple(int(x) for x in zeros[rng.integers(len(zeros))])
            entries.append((c, 0))


def mtx_lines(a, field, symmetry, rng):
    """The lines of a Matrix Market file of the matrix a (symmetric or skew-symmetric
    as symmetry says), and the dense array it means (a, with the values a pattern or
    duplicates change)."""
    assert a.ndim == 2
    a = np.array(a)
    if field == "pattern":
        a[a != 0] = 1
    if symmetry != "general":
        assert np.array_equal(a, a.T if symmetry == "symmetric" else -a.T)
    entries = _entries(a, symmetry)
    _spice(a, entries, field, rng, symmetry)
    entries = _arrange(entries, rng)
    lines = ["%%%%MatrixMarket matrix coordinate %s %s" % (field, symmetry)]
    if rng.random() < 0.5:
        lines += ["% random test data", "%"]
    lines.append("%d %d %d" % (a.shape[0], a.shape[1], len(entries)))
    for c, v in entries:
        coord = " ".join(str(x + 1) for x in c)
        if field == "pattern":
            lines.append(coord)
        else:
            vtype = np.int64 if field == "integer" else a.dtype
            lines.append("%s %s" % (coord, format_value(v, vtype)))
    return lines, a


def tns_lines(a, rng):
    """The lines of a FROSTT file of the tensor a, and the dense array it means."""
    a = np.array(a)
    entries = _entries(a)
    _spice(a, entries, "real", rng)
    entries = _arrange(entries, rng)
    lines = []
    if rng.random() < 0.5:
        shape = "x".join(map(str, a.shape))
        lines.append("# random test data, order %d, shape %s" % (a.ndim, shape))
    for c, v in entries:
        lines.append("%s %s" % (" ".join(str(x + 1) for x in c), format_value(v, a.dtype)))
        if rng.random() < 0.05:
            lines.append("# a comment between entries")
    return lines, a


def choose_form(order, square, dtype, rng, form=None):
    """(form, mtx field, mtx symmetry) for a sparse input of this order; form: the
    file kind wanted (None: any that fits)."""
    is_int = np.issubdtype(np.dtype(dtype), np.integer)
    if form is None:
        r = rng.random()
        if order == 2:
            form = "mtx" if r < 0.55 else ("tns" if r < 0.8 else "npy")
        else:
            form = "tns" if r < 0.75 else "npy"
    if form != "mtx":
        return form, None, None
    f = rng.random()
    if is_int:
        field = "integer" if f < 0.75 else "pattern"
    else:
        field = "real" if f < 0.7 else ("pattern" if f < 0.85 else "integer")
    symmetry = "general"
    if square and rng.random() < 0.5:
        skew = field != "pattern" and rng.random() < 0.35  # a skew-symmetric pattern is no file
        symmetry = "skew-symmetric" if skew else "symmetric"
    return "mtx", field, symmetry


def write_input(path_base, shape, dtype, rng, form=None):
    """Random sparse data written to path_base + ".mtx" / ".tns" / ".npy" (form: which
    one; None: chosen at random).  Returns (path, the dense array the file means, a
    description, the file's lines or None for .npy)."""
    shape = tuple(shape)
    square = len(shape) == 2 and shape[0] == shape[1]
    f, field, symmetry = choose_form(len(shape), square, dtype, rng, form)
    if f == "mtx":
        a = random_sparse(shape, dtype, rng, symmetry=symmetry,
                          integer_values=(field == "integer"))
        lines, dense = mtx_lines(a, field, symmetry, rng)
        desc = "mtx %s %s" % (field, symmetry)
    elif f == "tns":
        a = random_sparse(shape, dtype, rng)
        lines, dense = tns_lines(a, rng)
        desc = "tns"
    else:
        dense, lines, desc = random_sparse(shape, dtype, rng), None, "npy"
    path = "%s.%s" % (path_base, f)
    save(path, lines, dense)
    desc += ", %d nonzeros" % int(np.count_nonzero(dense))
    return path, dense, desc, lines


def write_given(path_base, a, rng, form=None):
    """The nonzeros of the array a, as they are (no duplicates, no explicit zeros, no
    pattern or integer fields that would change a value), written to path_base + ".mtx"
    (order 2: `real`, `symmetric` when a is, else `general`), ".tns" or ".npy" (form:
    which one; None: chosen at random).  For inputs that must keep their values, such as
    a matrix an iterative method converges on.  Returns what write_input returns."""
    a = np.array(a)
    if form is None:
        r = rng.random()
        form = ("mtx" if r < 0.5 else "tns" if r < 0.75 else "npy") if a.ndim == 2 else (
            "tns" if r < 0.75 else "npy")
    lines = None
    desc = form
    if form == "mtx":
        symmetry = "symmetric" if a.shape[0] == a.shape[1] and np.array_equal(a, a.T) else "general"
        entries = _arrange(_entries(a, symmetry), rng)
        lines = ["%%%%MatrixMarket matrix coordinate real %s" % symmetry,
                 "%d %d %d" % (a.shape[0], a.shape[1], len(entries))]
        lines += ["%d %d %s" % (c[0] + 1, c[1] + 1, format_value(v, a.dtype)) for c, v in entries]
        desc = "mtx real %s" % symmetry
    elif form == "tns":
        lines = ["%s %s" % (" ".join(str(x + 1) for x in c), format_value(v, a.dtype))
                 for c, v in _arrange(_entries(a), rng)]
    path = "%s.%s" % (path_base, form)
    save(path, lines, a)
    desc += ", %d nonzeros" % int(np.count_nonzero(a))
    return path, a, desc, lines


def save(path, lines, dense):
    if lines is None:
        np.save(path, np.array(dense, order="C"))
    else:
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")


# ---- independent readers (for the self-tests) ---------------------------------------------


def _wide(dtype):
    """The type the readers sum in: int64 or float64."""
    return np.int64 if np.issubdtype(np.dtype(dtype), np.integer) else np.float64


def _number(text, dtype):
    return int(text) if np.issubdtype(np.dtype(dtype), np.integer) else float(text)


def read_mtx(path, dtype):
    """The dense array of a Matrix Market coordinate file."""
    with open(path) as f:
        lines = [l.strip() for l in f if l.strip()]
    head = lines[0].split()
    if [w.lower() for w in head[:3]] != ["%%matrixmarket", "matrix", "coordinate"]:
        raise ValueError("not a Matrix Market coordinate file")
    field, symmetry = head[3].lower(), head[4].lower()
    body = [l for l in lines[1:] if not l.startswith("%")]
    rows, cols, nnz = (int(x) for x in body[0].split())
    if len(body) - 1 != nnz:
        raise ValueError("%d entries, header says %d" % (len(body) - 1, nnz))
    out = np.zeros((rows, cols), _wide(dtype))
    for l in body[1:]:
        w = l.split()
        i, j = int(w[0]) - 1, int(w[1]) - 1
        v = 1 if field == "pattern" else _number(w[2], np.int64 if field == "integer" else dtype)
        out[i, j] += v
        if symmetry == "symmetric" and i != j:
            out[j, i] += v
        elif symmetry == "skew-symmetric":
            if i == j:
                raise ValueError("a diagonal entry in a skew-symmetric file")
            out[j, i] -= v
    return out.astype(dtype)


def read_tns(path, shape, dtype):
    """The dense array of a FROSTT file."""
    out = np.zeros(shape, _wide(dtype))
    with open(path) as f:
        for l in f:
            l = l.strip()
            if not l or l.startswith("#"):
                continue
            w = l.split()
            out[tuple(int(x) - 1 for x in w[:-1])] += _number(w[-1], dtype)
    return out.astype(dtype)
