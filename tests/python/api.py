"""distalc --emit api against the header distalc writes, for every program given: the same
params (names, types, order), the same tensors (a block query each, import/export or the
sparse import, compute's arguments in order with their types and const-ness),
PREFIX_iterations exactly where the description says, PREFIX_plan_create_balanced with
its struct where a tensor is balanced, and PREFIX_schedule where --auto keeps several
variants (the programs named auto_*.dtl are also checked compiled with --auto).

usage: python3 api.py DISTALC WORKDIR FILE.dtl ...
"""
import json
import os
import re
import subprocess
import sys

CTYPES = {"double": "double", "float": "float", "int32": "int32_t", "int64": "int64_t"}


def check_one(distalc, workdir, path, extra=()):
    name = "k_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    api = json.loads(subprocess.run([distalc, path, "--name", name, "--emit", "api"] + list(extra), check=True,
                                    capture_output=True, text=True).stdout)
    base = os.path.join(workdir, name)
    subprocess.run([distalc, path, "-o", base, "--name", name] + list(extra), check=True, capture_output=True)
    header = open(base + ".h").read()
    bad = []
    fields = re.search(r"typedef struct \{([^}]*)\} %s_params;" % name, header).group(1)
    want = "".join(f" {'double' if p['type'] == 'double' else 'int64_t'} {p['name']};" for p in api["params"])
    if fields != (want or " int64_t unused_;") + " ":
        bad.append(f"params {fields!r} against {want!r}")
    blocks = re.findall(r"int64_t %s_(\w+)_block\(" % name, header)
    if blocks != [t["name"] for t in api["tensors"]]:
        bad.append(f"block queries {blocks}")
    args = []
    for t in api["tensors"]:
        n, ct = t["name"], CTYPES[t["type"]]
        if t["sparse"]:
            sig = f"int {name}_{n}_import({name}_plan *plan, int64_t n, const int64_t *coords, const {ct} *vals, dtl_sparse *block);"
            args.append(f"{'' if t['written'] else 'const '}dtl_sparse *")
        else:
            sig = f"int {name}_{n}_import({name}_plan *plan, const int64_t lo[], const int64_t hi[], const {ct} *data, {ct} *block);"
            args.append(f"{'' if t['written'] else 'const '}{ct} *")
        if sig not in header:
            bad.append(f"no {sig}")
    compute = re.search(r"int %s_compute\(%s_plan \*plan((?:, [^,)]*)*)\);" % (name, name), header).group(1)
    got = [re.sub(r"\w+$", "", a.strip()) for a in compute.split(",")[1:]]
    if got != args:
        bad.append(f"compute takes {got}, the description says {args}")
    if (f"int64_t {name}_iterations(" in header) != api["iterations"]:
        bad.append("iterations")
    if (f"const char *{name}_schedule(" in header) != (api.get("variants", 0) > 0):
        bad.append("schedule")
    balanced = [t["name"] for t in api["tensors"] if t.get("balanced")]
    if (f"int {name}_plan_create_balanced(" in header) != bool(balanced):
        bad.append("plan_create_balanced")
    if balanced:
        fields = re.search(r"typedef struct \{([^}]*)\} %s_balance;" % name, header).group(1)
        if fields != "".join(f" const int64_t *{n}[{api['grid_dims']}];" for n in balanced) + " ":
            bad.append(f"balance struct {fields!r}")
    return bad


def main():
    distalc, workdir, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    fail = 0
    variants = 0
    for path in files:
        # as written, and with --auto for the programs made for it (several variants: PREFIX_schedule)
        for extra in ([], ["--auto"]) if os.path.basename(path).startswith("auto_") else ([],):
            bad = check_one(distalc, workdir, path, extra)
            if extra:
                variants += json.loads(subprocess.run([distalc, path, "--emit", "api", "--auto"], check=True,
                                                      capture_output=True, text=True).stdout).get("variants", 0) > 1
            if bad:
                fail = 1
                print(f"FAIL --emit api of {path} {' '.join(extra)}: " + "; ".join(bad))
    if not variants:
        fail = 1
        print("FAIL no program compiled with --auto kept several variants")
    print(f"{'FAIL' if fail else 'PASS'} --emit api agrees with the header for {len(files)} programs "
          f"({variants} with --auto's variants)")
    return fail


if __name__ == "__main__":
    sys.exit(main())
