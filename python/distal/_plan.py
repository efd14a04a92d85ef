"""Library and Plan: a generated library (LANGUAGE.md section 7) through ctypes.

A Library is one built program: its description (distalc --emit api) says which params,
tensors and functions it has, and ctypes binds PREFIX_params_default, PREFIX_plan_create,
PREFIX_T_block, PREFIX_T_import, PREFIX_T_export, PREFIX_compute, PREFIX_iterations and
PREFIX_error by the names that section 7 gives them.  A Plan is PREFIX_plan over an mpi4py
communicator; its arrays are NumPy arrays, checked before they reach C.
"""

import ctypes
import json
import operator
import os

import numpy as np

_DTYPES = {"double": np.float64, "float": np.float32, "int32": np.int32, "int64": np.int64}
_I64P = ctypes.POINTER(ctypes.c_int64)
_VP = ctypes.c_void_p


class DistalError(RuntimeError):
    """A function of the generated library returned nonzero; message is PREFIX_error's."""

    def __init__(self, call, code, message):
        super().__init__(f"{call} failed ({code}): {message}" if message else f"{call} failed ({code})")
        self.call, self.code, self.message = call, code, message


def _describe_error(path, why):
    return DistalError("distal", -1, f"{path}: not a description this package understands ({why})")


def _check_api(api, path):
    """The parts of distalc --emit api that the bindings read, with their types."""
    if not isinstance(api, dict) or not isinstance(api.get("prefix"), str):
        raise _describe_error(path, "no prefix")
    for key in ("params", "tensors"):
        if not isinstance(api.get(key), list):
            raise _describe_error(path, f"no {key} list")
    for key in ("sparse", "iterations"):
        if not isinstance(api.get(key), bool):
            raise _describe_error(path, f"no {key} flag")
    for p in api["params"]:
        if not isinstance(p, dict) or not isinstance(p.get("name"), str) or p.get("type") not in ("int64", "double"):
            raise _describe_error(path, f"param {p!r}")
    for t in api["tensors"]:
        ok = (isinstance(t, dict) and isinstance(t.get("name"), str) and t.get("type") in _DTYPES
              and isinstance(t.get("order"), int) and 0 <= t["order"] <= 8
              and isinstance(t.get("sparse"), bool) and isinstance(t.get("written"), bool)
              and isinstance(t.get("extents"), list) and len(t["extents"]) == t["order"])
        if not ok:
            raise _describe_error(path, f"tensor {t!r}")
    return api


class Library:
    """A program built by distal.compile: its params, tensors and functions."""

    def __init__(self, folder):
        path = os.path.join(folder, "api.json")
        with open(path) as f:
            self.api = _check_api(json.load(f), path)
        self.prefix = self.api["prefix"]
        self.path = os.path.join(folder, f"lib{self.prefix}.so")
        self._dll = ctypes.CDLL(self.path)
        self.params = tuple(p["name"] for p in self.api["params"])
        self.tensors = tuple(t["name"] for t in self.api["tensors"])
        self._tensor = {t["name"]: t for t in self.api["tensors"]}
        self._param = {p["name"]: p for p in self.api["params"]}
        fields = [(p["name"], ctypes.c_double if p["type"] == "double" else ctypes.c_int64) for p in self.api["params"]]
        self._Params = type(f"{self.prefix}_params", (ctypes.Structure,), {"_fields_": fields or [("unused_", ctypes.c_int64)]})
        self._bind()

    def _fn(self, name, restype, *argtypes):
        full = f"{self.prefix}_{name}"
        try:
            fn = getattr(self._dll, full)
        except AttributeError:
            raise DistalError("distal", -1, f"{self.path} has no function {full}, which its description names") from None
        fn.restype, fn.argtypes = restype, list(argtypes)
        return fn

    def _bind(self):
        from mpi4py import MPI
        # MPI_Comm is a pointer in Open MPI and an int in MPICH
        self._comm_type = _VP if MPI._sizeof(MPI.Comm) == ctypes.sizeof(_VP) else ctypes.c_int
        c_int = ctypes.c_int
        pp = ctypes.POINTER(self._Params)
        self._params_default = self._fn("params_default", None, pp)
        self._create = self._fn("plan_create", c_int, self._comm_type, pp, ctypes.POINTER(_VP))
        self._destroy = self._fn("plan_destroy", c_int, ctypes.POINTER(_VP))
        self._error = self._fn("error", ctypes.c_char_p, _VP)
        self._compute = self._fn("compute", c_int, _VP, *[_VP] * len(self.tensors))
        self._iterations = self._fn("iterations", ctypes.c_int64, _VP) if self.api["iterations"] else None
        # distalc --auto: the schedules plan_create chose among (PREFIX_schedule)
        self._schedule = (self._fn("schedule", ctypes.c_char_p, _VP, ctypes.POINTER(ctypes.c_double))
                          if self.api.get("variants", 0) else None)
        # balanced partitions: plan_create_balanced takes an array of boundary pointers, one per
        # balanced tensor and grid dim (PREFIX_balance); dtl_balance_split computes them
        self.balanced = tuple(t["name"] for t in self.api["tensors"] if t.get("balanced"))
        self._create_balanced = None
        if self.balanced:
            self._create_balanced = self._fn("plan_create_balanced", c_int, self._comm_type, pp, _VP, ctypes.POINTER(_VP))
            split = self._dll.dtl_balance_split
            split.restype = c_int
            split.argtypes = [self._comm_type, ctypes.c_int64, _I64P, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, _I64P]
            self._balance_split = split
        self._block, self._import, self._export = {}, {}, {}
        for t in self.api["tensors"]:
            n = t["name"]
            self._block[n] = self._fn(f"{n}_block", ctypes.c_int64, _VP, _I64P, _I64P)
            if t["sparse"]:
                self._import[n] = self._fn(f"{n}_import", c_int, _VP, ctypes.c_int64, _VP, _VP, _VP)
            else:
                self._import[n] = self._fn(f"{n}_import", c_int, _VP, _I64P, _I64P, _VP, _VP)
                self._export[n] = self._fn(f"{n}_export", c_int, _VP, _VP, _I64P, _I64P, _VP)
        if self.api["sparse"]:
            self._structure_changed = self._fn("structure_changed", c_int, _VP)
            d = self._dll
            d.dtl_py_sparse_new.restype, d.dtl_py_sparse_new.argtypes = _VP, []
            d.dtl_py_sparse_delete.restype, d.dtl_py_sparse_delete.argtypes = None, [_VP]
            d.dtl_py_sparse_nvals.restype, d.dtl_py_sparse_nvals.argtypes = ctypes.c_int64, [_VP]
            d.dtl_py_sparse_entries.restype = c_int
            d.dtl_py_sparse_entries.argtypes = [_VP, _I64P, ctypes.POINTER(_I64P), ctypes.POINTER(_VP)]
            d.dtl_py_free.restype, d.dtl_py_free.argtypes = None, [_VP]

    def tensor(self, name):
        """The description of tensor name: type, order, extents, levels, sparse, written."""
        try:
            return self._tensor[name]
        except KeyError:
            raise KeyError(f"{self.prefix} has no tensor {name!r} (it has: {', '.join(self.tensors)})") from None

    def dtype(self, name):
        return np.dtype(_DTYPES[self.tensor(name)["type"]])

    def defaults(self):
        """The params' declared defaults; None where a param has none (grid params: derived
        from the communicator's size)."""
        p = self._Params()
        self._params_default(ctypes.byref(p))
        out = {}
        for d in self.api["params"]:
            v = getattr(p, d["name"])
            out[d["name"]] = None if d["default"] is None and d["type"] == "int64" and v == -1 else v
        return out

    def plan(self, comm=None, /, **params):
        """A Plan over comm (an mpi4py communicator; default MPI.COMM_WORLD) with the params
        given as keywords, the others at their defaults.  Collective."""
        return Plan(self, comm, **params)

    def balance_split(self, comm, coords, extent, parts):
        """The parts + 1 boundaries of blocks of [0, extent) holding about equal numbers of
        the entries whose coordinates (along the balanced dimension) are coords on this rank;
        every entry on one rank only.  Collective (dtl_balance_split); an int64 array, the
        same on every rank."""
        from mpi4py import MPI
        if not self.balanced:
            raise TypeError(f"{self.prefix} has no balanced tensor")
        c = np.ascontiguousarray(coords, dtype=np.int64)
        if c.ndim != 1:
            raise ValueError("balance_split: coords must be one-dimensional")
        out = np.zeros(operator.index(parts) + 1, np.int64)
        rc = self._balance_split(self._comm_type(MPI._handleof(comm)), c.size, c.ctypes.data_as(_I64P), 1,
                                 operator.index(extent), operator.index(parts), out.ctypes.data_as(_I64P))
        if rc:
            if c.size and (c.min() < 0 or c.max() >= operator.index(extent)):
                raise ValueError(f"balance_split: coordinates must lie in [0, {operator.index(extent)})")
            raise MemoryError("dtl_balance_split: out of memory (or another rank's coordinates lie outside the extent)")
        return out

    def balanced_plan(self, comm, boundaries, /, **params):
        """A Plan whose balanced tensors' blocks are given: boundaries maps a balanced tensor's
        name to a sequence, one entry per grid dim, of G + 1 boundaries (or None: blocks of
        equal extent), the same on every rank (PREFIX_plan_create_balanced).  Collective."""
        return Plan(self, comm, boundaries, **params)

    def __repr__(self):
        return f"<distal.Library {self.prefix}: params {self.params}, tensors {self.tensors}>"


class SparseBlock:
    """This rank's piece of a sparse tensor (a dtl_sparse), made by Plan.import_sparse or
    Plan.empty_sparse; freed when it is garbage (a local operation)."""

    def __init__(self, lib, name, ptr):
        self._lib, self.name, self._ptr = lib, name, ptr

    @property
    def nnz(self):
        """The stored values of the piece."""
        return self._lib._dll.dtl_py_sparse_nvals(self._ptr)

    def entries(self):
        """The piece's nonzero entries: (coords, vals), global coordinates (n x order, int64)
        and values, copied out."""
        n = ctypes.c_int64()
        c, v = _I64P(), _VP()
        if self._lib._dll.dtl_py_sparse_entries(self._ptr, ctypes.byref(n), ctypes.byref(c), ctypes.byref(v)):
            raise MemoryError("dtl_sparse_extract: out of memory")
        t = self._lib.tensor(self.name)
        try:
            dt = self._lib.dtype(self.name)
            coords = np.ctypeslib.as_array(c, shape=(n.value * t["order"],)).copy() if n.value else np.zeros(0, np.int64)
            vals = (np.frombuffer((ctypes.c_char * (n.value * dt.itemsize)).from_address(v.value), dt).copy()
                    if n.value else np.zeros(0, dt))
        finally:
            self._lib._dll.dtl_py_free(ctypes.cast(c, _VP))
            self._lib._dll.dtl_py_free(v)
        return coords.reshape(n.value, t["order"]), vals

    def __del__(self):
        ptr, self._ptr = getattr(self, "_ptr", None), None
        if ptr:
            self._lib._dll.dtl_py_sparse_delete(ptr)


def _boundaries(lib, boundaries, size):
    """The PREFIX_balance struct: per balanced tensor and grid dim, a pointer to int64
    boundaries or NULL; the arrays it points to are returned too, to keep them alive.  C reads
    G + 1 of them, G <= size (a grid dim never has more processors than there are ranks): each
    array is padded to size + 1 with -1, so that C never reads past it and plan_create refuses
    an array shorter than G + 1 (its boundaries would not rise to the extent)."""
    if not lib.balanced:
        raise TypeError(f"{lib.prefix} has no balanced tensor")
    for name in boundaries:
        if name not in lib.balanced:
            raise KeyError(f"{lib.prefix}: {name!r} is not a balanced tensor (balanced: {', '.join(lib.balanced)})")
    nd = lib.api["grid_dims"]
    ptrs = (_VP * (len(lib.balanced) * nd))()
    keep = []
    for k, name in enumerate(lib.balanced):
        per_dim = boundaries.get(name)
        if per_dim is None:
            continue
        per_dim = list(per_dim)
        if len(per_dim) != nd:
            raise ValueError(f"{lib.prefix}: boundaries of {name}: one entry per grid dim ({nd}) needed, not {len(per_dim)}")
        for g, b in enumerate(per_dim):
            if b is None:
                continue
            a = np.ascontiguousarray(b, dtype=np.int64)
            if a.ndim != 1 or a.size < 2 or a.size > size + 1 or (nd == 1 and a.size != size + 1):
                want = f"{size + 1}" if nd == 1 else f"2 to {size + 1}"
                raise ValueError(f"{lib.prefix}: boundaries of {name} on grid dim {g}: {want} values needed, not {a.size}")
            a = np.concatenate([a, np.full(size + 1 - a.size, -1, np.int64)])
            keep.append(a)
            ptrs[k * nd + g] = a.ctypes.data
    return keep, ptrs


def _int64(v, what):
    """v as a C int64_t: an integer (not a bool) in range, else TypeError / OverflowError"""
    if isinstance(v, bool):
        raise TypeError(f"{what} is an integer, not {v!r}")
    v = operator.index(v)
    if not -2**63 <= v < 2**63:
        raise OverflowError(f"{what}: {v} does not fit a 64-bit integer")
    return v


def _int64s(values, n, what):
    values = tuple(_int64(v, what) for v in values)
    if len(values) != n:
        raise ValueError(f"{what}: {n} values needed, not {len(values)}")
    return (ctypes.c_int64 * max(n, 1))(*values)


class Plan:
    """PREFIX_plan: the kernel's distribution of every tensor over a communicator."""

    def __init__(self, lib, comm=None, boundaries=None, /, **params):
        from mpi4py import MPI
        if comm is None:
            comm = MPI.COMM_WORLD
        if not isinstance(comm, MPI.Intracomm) or comm == MPI.COMM_NULL:
            raise TypeError(f"{lib.prefix}: a plan needs an mpi4py intracommunicator, not {comm!r}")
        self.lib, self.comm, self._handle = lib, comm, None
        p = lib._Params()
        lib._params_default(ctypes.byref(p))
        for k, v in params.items():
            if k not in lib._param:
                raise TypeError(f"{lib.prefix} has no param {k!r} (it has: {', '.join(lib.params) or 'none'})")
            if lib._param[k]["type"] == "double":
                setattr(p, k, float(v))
            else:
                try:
                    setattr(p, k, _int64(v, f"{lib.prefix}: param {k}"))
                except TypeError:
                    raise TypeError(f"{lib.prefix}: param {k} is an integer, not {v!r}") from None
        # the values plan_create gets; None: none (a grid param derived from the ranks)
        self.params = {d["name"]: None if d["type"] == "int64" and getattr(p, d["name"]) == -1 else getattr(p, d["name"])
                       for d in lib.api["params"]}
        handle = _VP()
        if boundaries is None:
            rc = lib._create(lib._comm_type(MPI._handleof(comm)), ctypes.byref(p), ctypes.byref(handle))
        else:
            keep, ptrs = _boundaries(lib, boundaries, comm.Get_size())
            rc = lib._create_balanced(lib._comm_type(MPI._handleof(comm)), ctypes.byref(p), ctypes.cast(ptrs, _VP),
                                      ctypes.byref(handle))
            del keep
        self._handle = handle
        if rc:
            msg = self.error()
            self.close()
            raise DistalError(f"{lib.prefix}_plan_create", rc, msg)

    # ---- life ----------------------------------------------------------------------------
    def close(self):
        """Destroy the plan (collective); later calls raise ValueError."""
        handle, self._handle = self._handle, None
        if handle is not None and handle.value:
            rc = self.lib._destroy(ctypes.byref(handle))
            if rc:
                raise DistalError(f"{self.lib.prefix}_plan_destroy", rc, "")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # collective: only while MPI runs (the program should close plans itself, on every rank)
        try:
            from mpi4py import MPI
            if getattr(self, "_handle", None) is not None and MPI.Is_initialized() and not MPI.Is_finalized():
                self.close()
        except Exception:
            pass

    def _live(self):
        if self._handle is None:
            raise ValueError(f"{self.lib.prefix}: the plan is closed")
        return self._handle

    def error(self):
        """PREFIX_error: the message of the last failure."""
        m = self.lib._error(self._live())
        return m.decode(errors="replace") if m else ""

    def _check(self, call, rc):
        if rc:
            raise DistalError(f"{self.lib.prefix}_{call}", rc, self.error())

    # ---- blocks --------------------------------------------------------------------------
    def block(self, name):
        """This rank's block of tensor name: (offset, extent), global, one entry per dim."""
        order = self.lib.tensor(name)["order"]
        off, ext = (ctypes.c_int64 * max(order, 1))(), (ctypes.c_int64 * max(order, 1))()
        self.lib._block[name](self._live(), off, ext)
        return tuple(off[:order]), tuple(ext[:order])

    def shape(self, name):
        """The shape of this rank's block of tensor name."""
        return self.block(name)[1]

    def slices(self, name):
        """This rank's block of tensor name as slices of the global array."""
        off, ext = self.block(name)
        return tuple(slice(o, o + e) for o, e in zip(off, ext))

    def global_shape(self, name):
        """The tensor's global shape from its declared extents and the plan's params (None
        where an extent is a param that has no value here, such as a derived grid param)."""
        shape = []
        for e in self.lib.tensor(name)["extents"]:
            v = self.params.get(e) if isinstance(e, str) else e
            if v is None:
                return None
            shape.append(int(v))
        return tuple(shape)

    def zeros(self, name):
        """A zeroed array for this rank's block of a dense tensor."""
        self._dense(name)
        return np.zeros(self.shape(name), self.lib.dtype(name))

    def block_of(self, name, array):
        """This rank's block of a dense tensor, copied from the global array."""
        self._dense(name)
        array = np.asarray(array)
        gs = self.global_shape(name)
        if array.ndim != self.lib.tensor(name)["order"] or (gs is not None and array.shape != gs):
            raise ValueError(f"{self.lib.prefix}: {name} is {gs if gs else str(array.ndim) + '-D'}, not {array.shape}")
        return np.array(array[self.slices(name)], dtype=self.lib.dtype(name), order="C")

    def _dense(self, name):
        if self.lib.tensor(name)["sparse"]:
            raise TypeError(f"{self.lib.prefix}: {name} is sparse (use import_sparse or empty_sparse)")

    def _array(self, name, a, shape, what, writable=False):
        """a as this rank's data for tensor name: an ndarray of its dtype, C-contiguous, of
        the given shape."""
        dt = self.lib.dtype(name)
        if not isinstance(a, np.ndarray):
            raise TypeError(f"{self.lib.prefix}: {what} {name} must be a numpy array, not {type(a).__name__}")
        if a.dtype != dt:
            raise TypeError(f"{self.lib.prefix}: {what} {name} must have dtype {dt}, not {a.dtype}")
        if tuple(a.shape) != tuple(shape):
            raise ValueError(f"{self.lib.prefix}: {what} {name} must have shape {tuple(shape)}, not {a.shape}")
        if not a.flags.c_contiguous:
            raise ValueError(f"{self.lib.prefix}: {what} {name} must be C-contiguous")
        if writable and not a.flags.writeable:
            raise ValueError(f"{self.lib.prefix}: {what} {name} must be writable")
        return a.ctypes.data_as(_VP)

    # ---- import, export ------------------------------------------------------------------
    def import_tensor(self, name, data, lo=None, out=None):
        """Collective: the application holds the box [lo, lo + data.shape) of dense tensor
        name (boxes of different ranks do not overlap); returns this rank's block of the
        kernel's distribution (in out when given)."""
        self._dense(name)
        order = self.lib.tensor(name)["order"]
        if not isinstance(data, np.ndarray) or data.ndim != order:
            raise ValueError(f"{self.lib.prefix}: the data of {name} must be a {order}-D numpy array")
        data = np.ascontiguousarray(data)
        lo = (0,) * order if lo is None else tuple(lo)
        clo = _int64s(lo, order, f"lo of {name}")
        chi = _int64s([a + b for a, b in zip(lo, data.shape)], order, f"hi of {name}")
        pdata = self._array(name, data, data.shape, "the data of")
        if out is None:
            out = self.zeros(name)
        pout = self._array(name, out, self.shape(name), "the block of", writable=True)
        self._check(f"{name}_import", self.lib._import[name](self._live(), clo, chi, pdata, pout))
        return out

    def export_tensor(self, name, block, lo=None, hi=None):
        """Collective: this rank's block of dense tensor name to the application's box
        [lo, hi) (default: the whole tensor), returned as a new array."""
        self._dense(name)
        order = self.lib.tensor(name)["order"]
        lo = (0,) * order if lo is None else tuple(lo)
        if hi is None:
            hi = self.global_shape(name)
            if hi is None:
                raise ValueError(f"{self.lib.prefix}: the global shape of {name} is not known here; give hi")
        clo, chi = _int64s(lo, order, f"lo of {name}"), _int64s(hi, order, f"hi of {name}")
        if any(b < a for a, b in zip(lo, hi)):
            raise ValueError(f"{self.lib.prefix}: the box [{lo}, {hi}) of {name} is upside down")
        pblock = self._array(name, block, self.shape(name), "the block of")
        data = np.zeros([b - a for a, b in zip(lo, hi)], self.lib.dtype(name))
        pdata = data.ctypes.data_as(_VP)
        self._check(f"{name}_export", self.lib._export[name](self._live(), pblock, clo, chi, pdata))
        return data

    def import_sparse(self, name, coords, vals):
        """Collective: every rank passes any entries of sparse tensor name (coords: n x
        order global coordinates, vals: n values); returns this rank's piece."""
        t = self.lib.tensor(name)
        if not t["sparse"]:
            raise TypeError(f"{self.lib.prefix}: {name} is dense (use import_tensor)")
        coords = np.asarray(coords)
        if coords.size == 0:
            coords = coords.reshape(0, t["order"])
        if not np.issubdtype(coords.dtype, np.integer) or coords.ndim != 2 or coords.shape[1] != t["order"]:
            raise ValueError(f"{self.lib.prefix}: the coordinates of {name} must be integers, n x {t['order']}")
        coords = np.ascontiguousarray(coords, dtype=np.int64)
        n = coords.shape[0]
        if isinstance(vals, np.ndarray):
            vals = np.ascontiguousarray(vals)
        pvals = self._array(name, vals, (n,), "the values of")
        block = self.empty_sparse(name)
        self._check(f"{name}_import", self.lib._import[name](self._live(), n, coords.ctypes.data_as(_VP), pvals,
                                                            block._ptr))
        return block

    def empty_sparse(self, name):
        """An empty piece of sparse tensor name (the start of a sparse result)."""
        if not self.lib.tensor(name)["sparse"]:
            raise TypeError(f"{self.lib.prefix}: {name} is dense")
        ptr = self.lib._dll.dtl_py_sparse_new()
        if not ptr:
            raise MemoryError("dtl_sparse")
        return SparseBlock(self.lib, name, _VP(ptr))

    def structure_changed(self):
        """PREFIX_structure_changed (programs with sparse tensors)."""
        if not self.lib.api["sparse"]:
            raise AttributeError(f"{self.lib.prefix} has no sparse tensor")
        self._check("structure_changed", self.lib._structure_changed(self._live()))

    # ---- compute -------------------------------------------------------------------------
    def compute(self, /, *args, **tensors):
        """Collective: run the program on this rank's blocks, given in declaration order or
        by name (NumPy arrays of the tensor's dtype and block shape, C-contiguous; written
        ones writable; SparseBlocks for sparse tensors)."""
        names = self.lib.tensors
        if len(args) > len(names):
            raise TypeError(f"{self.lib.prefix}_compute takes {len(names)} tensors ({', '.join(names)}), not {len(args)}")
        bound = dict(zip(names, args))
        for k, v in tensors.items():
            if k not in names:
                raise TypeError(f"{self.lib.prefix} has no tensor {k!r} (it has: {', '.join(names)})")
            if k in bound:
                raise TypeError(f"{self.lib.prefix}_compute: tensor {k} given twice")
            bound[k] = v
        missing = [n for n in names if n not in bound]
        if missing:
            raise TypeError(f"{self.lib.prefix}_compute: missing {', '.join(missing)}")
        ptrs = [self._compute_arg(n, bound[n]) for n in names]
        self._check("compute", self.lib._compute(self._live(), *ptrs))

    def _compute_arg(self, name, a):
        t = self.lib.tensor(name)
        if t["sparse"]:
            if not isinstance(a, SparseBlock) or a._lib is not self.lib or a.name != name:
                raise TypeError(f"{self.lib.prefix}: {name} is sparse: pass a SparseBlock of {name} "
                                "(Plan.import_sparse or Plan.empty_sparse)")
            return a._ptr
        return self._array(name, a, self.shape(name), "tensor", writable=t["written"])

    @property
    def iterations(self):
        """PREFIX_iterations: the iterations of the program's top-level loops that the last
        compute ran (programs with a loop)."""
        if self.lib._iterations is None:
            raise AttributeError(f"{self.lib.prefix} has no loop")
        return self.lib._iterations(self._live())

    @property
    def schedule(self):
        """PREFIX_schedule (programs compiled with --auto whose search kept variants):
        (the schedules plan_create chose for this plan's rank count and params, as text, and
        their predicted seconds per compute)."""
        if self.lib._schedule is None:
            raise AttributeError(f"{self.lib.prefix} has one schedule (no variants: compile with --auto)")
        pred = ctypes.c_double(0)
        text = self.lib._schedule(self._live(), ctypes.byref(pred))
        return text.decode(), pred.value

    def __repr__(self):
        state = "closed" if self._handle is None else f"{self.comm.Get_size()} ranks"
        return f"<distal.Plan {self.lib.prefix} ({state}) {self.params}>"
