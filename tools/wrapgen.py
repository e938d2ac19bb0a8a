#!/usr/bin/env python3
"""Generate mpishim's pass-through wrappers from the host's own mpi.h.

The repetitive part of a PMPI shim is hundreds of functions of the form
    int MPI_X(args) { return PMPI_X(args); }
Instead of writing them by hand (and missing some), this script reads the
host's preprocessed mpi.h, keeps every MPI_X whose PMPI_X is both declared
and exported by the host library, drops the ones mpishim implements by hand
(found with nm in the hand-written objects), and writes one C file.
The generator stays declarative: each call's class comes from the call-class
table (tools/calls.py: plain pass-through, blocking collective run as its
nonblocking twin, RMA call routed to an internal window, or implemented by
hand in src/) and it fills in that class's template; what a class does
(serializing the host, the solo path, routing, error handlers) is C in
src/intercept/wrap.h and passthru.h. It fails, rather than pass a call
through, when the table and the host disagree: a hand-written class missing
from src/, a collective without a matching nonblocking twin, or a call that
looks like a blocking collective but is not in the table.

Usage: wrapgen.py --decls mpi.i --host-syms syms.txt --hand hand.txt
                  --out wrappers.c [--list wrapped.txt]
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import calls  # noqa: E402  (the call-class table, beside this script)

KEYWORDS = {"const", "volatile", "restrict", "unsigned", "signed", "int", "char", "long",
            "short", "double", "float", "void", "struct", "enum", "union", "_Bool"}
QUALIFIERS = {"const", "volatile", "restrict"}

# Calls that must stay cheap and lock-free even when pass-through calls are
# serialized: they touch no shared host state (MPI-4.0 sec. 11.6 lists the
# functions callable before init/after finalize; these are among them).
UNSERIALIZED = {"Wtime", "Wtick", "Initialized", "Finalized", "Query_thread", "Is_thread_main",
                "Get_version", "Get_library_version", "Aint_add", "Aint_diff", "Pcontrol"}


def strip_attributes(text):
    """Remove __attribute__((...)) with balanced parentheses."""
    out = []
    i = 0
    while True:
        j = text.find("__attribute__", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:j])
        k = text.find("(", j)
        depth = 0
        while k < len(text):
            if text[k] == "(":
                depth += 1
            elif text[k] == ")":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        i = k + 1


def statements(text):
    """Split preprocessed C into top-level statements (';' at depth 0)."""
    text = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#"))
    depth = 0
    start = 0
    for i, c in enumerate(text):
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        elif c == ";" and depth == 0:
            yield text[start:i]
            start = i + 1


def split_params(params):
    out, depth, cur = [], 0, []
    for c in params:
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        if c == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def param_name(p, index):
    """Return (declaration with a name, name). Synthesizes a name if absent."""
    if "(" in p:
        raise ValueError("function-pointer parameter not supported: " + p)
    base = re.sub(r"(\[[^\]]*\])+\s*$", "", p).strip()
    suffix = p[len(base):].strip() if p.startswith(base) else ""
    ids = re.findall(r"[A-Za-z_]\w*", base)
    typeish = [x for x in ids if x not in QUALIFIERS]
    if ids and ids[-1] not in KEYWORDS and len(typeish) >= 2 and re.search(r"[A-Za-z_]\w*\s*$", base):
        return p, ids[-1]
    name = "a%d" % index
    return "%s %s%s" % (base, name, suffix), name


DECL = re.compile(r"^(?P<ret>[\w\s\*]+?)\s*\b(?P<name>P?MPI_\w+)\s*\((?P<params>.*)\)\s*$", re.S)


def parse(text):
    """Map 'MPI_X'/'PMPI_X' -> (ret, [params], raw) for plain function declarations."""
    decls = {}
    for st in statements(text):
        if "{" in st or "typedef" in st or "MPI_" not in st:
            continue
        raw = st
        forbidden = "__error__" in st or "__unavailable__" in st
        s = " ".join(strip_attributes(st).split())
        s = re.sub(r"^(extern\s+)", "", s)
        m = DECL.match(s)
        if not m:
            continue
        ret = " ".join(m.group("ret").split())
        if ret.startswith("typedef") or not ret:
            continue
        decls[m.group("name")] = (ret, split_params(m.group("params")), forbidden, raw)
    return decls


def param_types(params):
    """Parameter list without names, for comparing two signatures."""
    out = []
    for i, p in enumerate(params):
        if p == "...":
            out.append(p)
            continue
        decl, name = param_name(p, i)
        out.append(" ".join(re.sub(r"\b%s\b" % re.escape(name), "", decl).split()))
    return out


def nonblocking_twin(decls, host, n):
    """For a blocking collective MPI_X, its MPI_IX when that takes the same
    parameters plus a request (MPI_Barrier -> MPI_Ibarrier, ...)."""
    short = n[4:]
    twin = "MPI_I" + short[0].lower() + short[1:]
    if twin not in decls or "P" + twin not in decls or "P" + twin not in host:
        return None
    params = decls[n][1]
    tparams = decls[twin][1]
    if len(tparams) != len(params) + 1 or not tparams[-1].startswith("MPI_Request"):
        return None
    if param_types(tparams[:-1]) != param_types(params):
        return None
    if not any(t.startswith("MPI_Comm") for t in param_types(params)):
        return None
    return twin


# One-sided communication calls are routed to one of a window's internal
# windows (src/vci/win.h): data movement by target or thread, accumulate-type
# calls always by target so that all of them to one target share a window.
def rma_class(n):
    cls = calls.class_of(n)
    return "data" if cls == "rma-data" else "acc" if cls == "rma-acc" else None


# Generated bodies, one template per call class; the policy they follow is
# in the C helpers they call (src/intercept/wrap.h).
RMA_ROUTED = """static MSH_NOINLINE {ret} msh_routed_{name}({plist})
{{
    if (!msh_on())
        return P{name}({args});
    MPI_Win w_ = msh_rma_route({win}, {target}, {acc});
    MSH_PASS_ENTER();
    int rc_ = P{name}({routed_args});
    MSH_PASS_EXIT();
    return msh_rma_leave({win}, w_, rc_);
}}

MSH_EXPORT {ret} {name}({plist})
{{
    if (MSH_LIKELY(msh_win_direct()))
        return P{name}({args});
    return msh_routed_{name}({args});
}}

"""

COLLECTIVE = """MSH_EXPORT {ret} {name}({plist})
{{
    MSH_COLL_BY_HOST({comm}, P{name}({args}));{inter}
    MPI_Request r_;
    msh_coll_ctx c_ = msh_coll_enter({comm});
    int rc_ = P{twin}({args}, &r_);
    return msh_coll_leave(c_, rc_, r_);
}}

"""


def rma_routed(ret, n, plist, args, params, cls):
    """MPI_Put and friends: the same host call on the routed window. While no
    window is split and the host is not serialized (msh_win_direct), the
    wrapper is one load and a tail call; the rest lives out of line."""
    types = param_types(params)
    wins = [i for i, t in enumerate(types) if t == "MPI_Win"]
    if len(wins) != 1:
        raise ValueError("%s: expected one MPI_Win parameter" % n)
    if "target_rank" in args:
        tr = args.index("target_rank")
    else:  # the first int after the first datatype (every RMA call's layout)
        dt = types.index("MPI_Datatype")
        tr = next(i for i in range(dt + 1, len(types)) if types[i] == "int")
    routed = list(args)
    routed[wins[0]] = "w_"
    return RMA_ROUTED.format(ret=ret, name=n, plist=plist, args=", ".join(args), acc=int(cls == "acc"),
                             win=args[wins[0]], target=args[tr], routed_args=", ".join(routed))


def blocking_via_nonblocking(ret, n, plist, args, params, twin):
    """A blocking collective as its nonblocking form plus a shim wait, so a
    thread waiting in it sleeps instead of spinning in the host (rule 2)."""
    comm = [a for a, t in zip(args, param_types(params)) if t.startswith("MPI_Comm")][-1]
    # Rooted ones over an intercommunicator: the host's blocking call (wrap.h).
    inter = ""
    if "root" in args:
        inter = "\n    MSH_COLL_INTER_BY_HOST({comm}, P{name}({args}));".format(comm=comm, name=n, args=", ".join(args))
    return COLLECTIVE.format(ret=ret, name=n, plist=plist, args=", ".join(args), comm=comm, twin=twin, inter=inter)


def body_lines(ret, call, enter, leave):
    """The host call between a class's enter and leave."""
    lines = [enter] if enter else []
    lines += ["%s;" % call] if ret == "void" else ["%s msh_rc_ = %s;" % (ret, call)]
    lines += [leave] if leave else []
    if ret != "void":
        lines.append("return msh_rc_;")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--decls", required=True)
    ap.add_argument("--host-syms", required=True)
    ap.add_argument("--hand", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--list")
    a = ap.parse_args()

    decls = parse(open(a.decls).read())
    host = set(l.strip() for l in open(a.host_syms) if l.strip())
    hand = set(l.strip() for l in open(a.hand) if l.strip())

    names = sorted(n for n in decls if n.startswith("MPI_"))
    wrapped, skipped, converted, routed = [], [], [], []
    kinds = {}  # what the shim does with each call it defines (mpishim_print_calls)
    errors = []
    body = []
    # Calls src/ defines that the host's header lacks (the partitioned
    # calls on a host older than MPI 4): the shim's own, listed all the same.
    for n in sorted(hand - set(names)):
        cls = calls.class_of(n)
        kinds[n] = cls if cls in calls.HAND else "hand"
    for n in names:
        p = "P" + n
        cls = calls.class_of(n)
        if n in hand:
            kinds[n] = cls if cls in calls.HAND or cls == "collective" else "hand"
            continue
        if p not in decls or p not in host:
            skipped.append((n, "PMPI symbol not declared" if p not in decls else "PMPI symbol not exported"))
            continue
        if cls in calls.HAND:
            errors.append("%s: classed %s in tools/calls.py, which src/ implements by hand, but src/ has no %s"
                          % (n, cls, n))
            continue
        ret, params, forbidden, _ = decls[n]
        if forbidden or decls[p][2]:
            skipped.append((n, "declared unusable by the host header"))
            continue
        if params in ([], ["void"]):
            plist, args = "void", []
        else:
            plist_items, args = [], []
            for i, prm in enumerate(params):
                if prm == "...":
                    plist_items.append("...")  # only MPI_Pcontrol: extra args are not forwardable
                    continue
                decl, name = param_name(prm, i)
                plist_items.append(decl)
                args.append(name)
            plist = ", ".join(plist_items)
        short = n[4:]
        rma = rma_class(n)
        if rma is not None:
            body.append(rma_routed(ret, n, plist, args, params, rma))
            routed.append(n)
            kinds[n] = cls
            continue
        inb = nonblocking_twin(decls, host, n)
        if cls == "collective":
            if inb is None:
                errors.append("%s: classed collective in tools/calls.py, but the host has no nonblocking twin "
                              "taking the same arguments plus a request" % n)
                continue
            body.append(blocking_via_nonblocking(ret, n, plist, args, params, inb))
            converted.append(n)
            kinds[n] = cls
            continue
        if inb is not None and cls != "pass":
            errors.append("%s: looks like a blocking collective (nonblocking twin %s) but tools/calls.py does not "
                          "class it: add it (collective, or pass to forward it as is)" % (n, inb))
            continue
        enter, leave, kind = ("MSH_PASS_ENTER();", "MSH_PASS_EXIT();", "pass")
        if cls == "waits" and short.startswith("File_"):
            enter, leave, kind = ("MSH_FILE_WAIT_ENTER();", "MSH_FILE_WAIT_EXIT();", "waits")
        elif cls == "waits":
            enter, leave, kind = ("MSH_WAIT_ENTER();", "MSH_WAIT_EXIT();", "waits")
        elif short in UNSERIALIZED:
            enter, leave, kind = ("", "", "direct")
        elif cls in ("local", "status"):
            enter, leave, kind = ("MSH_LOCAL_ENTER();", "MSH_LOCAL_EXIT();", "local")
        kinds[n] = kind
        call = "%s(%s)" % (p, ", ".join(args))
        bare = {"pass": "MSH_PASS_BARE()", "local": "MSH_LOCAL_BARE()"}.get(kind)
        if bare and "..." not in plist:
            # A tail call to the host while nothing is around it (a
            # concurrent host; for pass, no queued posting either); the
            # rest out of line, so that the tail call saves no registers.
            held = "msh_held_" + n
            body.append("static MSH_NOINLINE %s %s(%s)\n" % (ret, held, plist))
            body.append("{\n%s}\n\n" % "".join("    %s\n" % l for l in body_lines(ret, call, enter, leave)))
            fwd = "%s(%s)" % (held, ", ".join(args))
            if ret == "void":
                lines = ["if (%s) {" % bare, "    %s;" % call, "    return;", "}", "%s;" % fwd]
            else:
                lines = ["if (%s)" % bare, "    return %s;" % call, "return %s;" % fwd]
            body.append("MSH_EXPORT %s %s(%s)\n" % (ret, n, plist))
            body.append("{\n%s}\n\n" % "".join("    %s\n" % l for l in lines))
            wrapped.append(n)
            continue
        body.append("MSH_EXPORT %s %s(%s)\n" % (ret, n, plist))
        body.append("{\n%s}\n\n" % "".join("    %s\n" % l for l in body_lines(ret, call, enter, leave)))
        wrapped.append(n)

    if errors:
        for e in errors:
            print("wrapgen: " + e, file=sys.stderr)
        sys.exit(1)
    with open(a.out, "w") as f:
        f.write("/* Generated by tools/wrapgen.py from the host's mpi.h: do not edit.\n")
        f.write(" * %d pass-through wrappers; %d blocking collectives run as their nonblocking\n"
                " * form plus a shim wait; %d RMA calls routed to internal windows; %d functions\n"
                " * implemented by hand; %d skipped. */\n"
                % (len(wrapped), len(converted), len(routed), len(hand), len(skipped)))
        for n in converted:
            f.write("/* via nonblocking twin: %s */\n" % n)
        for n in routed:
            f.write("/* routed to an internal window: %s */\n" % n)
        for n, why in skipped:
            f.write("/* skipped %s: %s */\n" % (n, why))
        f.write("#include \"intercept/wrap.h\"\n\n")
        f.write("".join(body))
        f.write("const char *const msh_call_kinds[][2] = {\n")
        for n in sorted(kinds):
            f.write("    {\"%s\", \"%s\"},\n" % (n, kinds[n]))
        f.write("};\nconst int msh_call_kind_count = %d;\n" % len(kinds))
    if a.list:
        with open(a.list, "w") as f:
            f.write("\n".join(sorted(wrapped + converted + routed)) + "\n")
    print("wrapgen: %d pass-through wrappers, %d blocking collectives via nonblocking, %d RMA calls routed, "
          "%d hand-written, %d skipped" % (len(wrapped), len(converted), len(routed), len(hand), len(skipped)),
          file=sys.stderr)


if __name__ == "__main__":
    main()
