#!/usr/bin/env python3
"""Generate mpishim's Fortran wrappers (mpif.h, `use mpi`, `use mpi_f08`).

Open MPI's Fortran library (libmpi_mpifh.so) calls PMPI_* directly, so a
Fortran program's MPI_ISEND never reaches the shim's MPI_Isend. For the calls
the runtime treats specially (CALLS below, in Fortran terms) this script
writes one C function per call, exported under every name-mangling the
host's Fortran library defines (mpi_isend_, mpi_isend__, mpi_isend,
MPI_ISEND; the pmpi_ forms stay the host's, as PMPI_ does in C). It converts
the INTEGER handles, statuses and sentinels, calls the shim's C function and
converts back (helpers in src/fortran/fwrap.h).

Which calls get a wrapper is read from the host's Fortran library (nm -D):
  - if it imports the C MPI_X, its Fortran entry already goes through the
    shim (MPICH does this), and a wrapper would handle the call twice: none;
  - if it defines no Fortran name for X: none;
  - a call with a choice buffer needs the host's MPI_BOTTOM / MPI_IN_PLACE
    common blocks (mpi_fortran_bottom_ ...); without them: none.
Every call without a wrapper keeps going to the host's own Fortran entry.

`use mpi_f08` (with --f08syms/--f08dis): the module's procedures are other
symbols (mpi_isend_f08_; MPICH names those with a choice buffer
mpi_isend_f08ts_). One gets a wrapper (same conversions, ierror OPTIONAL)
unless its code, followed through the library's own helpers in the
disassembly, calls the C MPI_X: Open MPI's call the mpif.h layer's internals
(ompi_isend_f) and so PMPI_*; MPICH's buffer procedures call the C MPI_X,
its others PMPI_X. *_f08ts_ procedures take descriptors and are not wrapped.

Usage: fwrapgen.py --fsyms fsyms.txt [--f08syms f08syms.txt --f08dis f08dis.txt]
                   --out fwrappers.c [--list fwrapped.txt]
fsyms.txt: `nm -D` of the host's Fortran library (defined and undefined);
f08syms.txt, f08dis.txt: `nm -D` and `objdump -d` (labels, calls and jumps
are enough) of the library holding the host's mpi_f08 procedures.
"""
import argparse
import bisect
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import calls  # noqa: E402  (the call-class table, beside this script)

# Arguments in Fortran order (the C call takes the same order), name:kind.
# Kinds: buf (choice buffer), int (INTEGER value), int_array (INTEGER array
# in), logical_in, logical_array(n), datatype/comm/op/group/info/errhandler/
# request (INTEGER handles in), int_out, logical_out, index_out (0-based C,
# 1-based Fortran), request_out, request_inout, message_out, message_inout,
# comm_out, comm_inout, info_out, status_out, status_in, requests_inout(n),
# statuses_out(n[,filled]), indices_out(n,filled).
# count: INTEGER(KIND=MPI_COUNT_KIND) in (the MPI 4.0 partitioned calls).
# IERROR is the last argument of every call and is not listed.
# A call marked + is one the shim implements in C on every host (MPI-4
# partitioned, which Open MPI 4.1 lacks): where the host's Fortran library
# defines no entry for it, the shim exports the Fortran names itself
# (include/mpishim_f.h declares them for programs).
CALLS = """
Init
Init_thread   required:int provided:int_out
Query_thread  provided:int_out
Finalize
Send          buf:buf count:int datatype:datatype dest:int tag:int comm:comm
Ssend         buf:buf count:int datatype:datatype dest:int tag:int comm:comm
Rsend         buf:buf count:int datatype:datatype dest:int tag:int comm:comm
Bsend         buf:buf count:int datatype:datatype dest:int tag:int comm:comm
Isend         buf:buf count:int datatype:datatype dest:int tag:int comm:comm request:request_out
Issend        buf:buf count:int datatype:datatype dest:int tag:int comm:comm request:request_out
Irsend        buf:buf count:int datatype:datatype dest:int tag:int comm:comm request:request_out
Ibsend        buf:buf count:int datatype:datatype dest:int tag:int comm:comm request:request_out
Recv          buf:buf count:int datatype:datatype source:int tag:int comm:comm status:status_out
Irecv         buf:buf count:int datatype:datatype source:int tag:int comm:comm request:request_out
Send_init     buf:buf count:int datatype:datatype dest:int tag:int comm:comm request:request_out
Ssend_init    buf:buf count:int datatype:datatype dest:int tag:int comm:comm request:request_out
Rsend_init    buf:buf count:int datatype:datatype dest:int tag:int comm:comm request:request_out
Bsend_init    buf:buf count:int datatype:datatype dest:int tag:int comm:comm request:request_out
Recv_init     buf:buf count:int datatype:datatype source:int tag:int comm:comm request:request_out
Start         request:request_inout
Startall      count:int requests:requests_inout(count)
Sendrecv      sendbuf:buf sendcount:int sendtype:datatype dest:int sendtag:int recvbuf:buf recvcount:int recvtype:datatype source:int recvtag:int comm:comm status:status_out
Sendrecv_replace buf:buf count:int datatype:datatype dest:int sendtag:int source:int recvtag:int comm:comm status:status_out
Probe         source:int tag:int comm:comm status:status_out
Iprobe        source:int tag:int comm:comm flag:logical_out status:status_out
Mprobe        source:int tag:int comm:comm message:message_out status:status_out
Improbe       source:int tag:int comm:comm flag:logical_out message:message_out status:status_out
Mrecv         buf:buf count:int datatype:datatype message:message_inout status:status_out
Imrecv        buf:buf count:int datatype:datatype message:message_inout request:request_out
Wait          request:request_inout status:status_out
Test          request:request_inout flag:logical_out status:status_out
Waitall       count:int requests:requests_inout(count) statuses:statuses_out(count)
Testall       count:int requests:requests_inout(count) flag:logical_out statuses:statuses_out(count)
Waitany       count:int requests:requests_inout(count) index:index_out status:status_out
Testany       count:int requests:requests_inout(count) index:index_out flag:logical_out status:status_out
Waitsome      incount:int requests:requests_inout(incount) outcount:int_out indices:indices_out(incount,outcount) statuses:statuses_out(incount,outcount)
Testsome      incount:int requests:requests_inout(incount) outcount:int_out indices:indices_out(incount,outcount) statuses:statuses_out(incount,outcount)
Request_get_status request:request flag:logical_out status:status_out
Request_free  request:request_inout
Cancel        request:request_inout
Get_count     status:status_in datatype:datatype count:int_out
Barrier       comm:comm
Bcast         buffer:buf count:int datatype:datatype root:int comm:comm
Reduce        sendbuf:buf recvbuf:buf count:int datatype:datatype op:op root:int comm:comm
Allreduce     sendbuf:buf recvbuf:buf count:int datatype:datatype op:op comm:comm
Reduce_scatter_block sendbuf:buf recvbuf:buf recvcount:int datatype:datatype op:op comm:comm
Reduce_scatter sendbuf:buf recvbuf:buf recvcounts:int_array datatype:datatype op:op comm:comm
Scan          sendbuf:buf recvbuf:buf count:int datatype:datatype op:op comm:comm
Exscan        sendbuf:buf recvbuf:buf count:int datatype:datatype op:op comm:comm
Gather        sendbuf:buf sendcount:int sendtype:datatype recvbuf:buf recvcount:int recvtype:datatype root:int comm:comm
Gatherv       sendbuf:buf sendcount:int sendtype:datatype recvbuf:buf recvcounts:int_array displs:int_array recvtype:datatype root:int comm:comm
Scatter       sendbuf:buf sendcount:int sendtype:datatype recvbuf:buf recvcount:int recvtype:datatype root:int comm:comm
Scatterv      sendbuf:buf sendcounts:int_array displs:int_array sendtype:datatype recvbuf:buf recvcount:int recvtype:datatype root:int comm:comm
Allgather     sendbuf:buf sendcount:int sendtype:datatype recvbuf:buf recvcount:int recvtype:datatype comm:comm
Allgatherv    sendbuf:buf sendcount:int sendtype:datatype recvbuf:buf recvcounts:int_array displs:int_array recvtype:datatype comm:comm
Alltoall      sendbuf:buf sendcount:int sendtype:datatype recvbuf:buf recvcount:int recvtype:datatype comm:comm
Alltoallv     sendbuf:buf sendcounts:int_array sdispls:int_array sendtype:datatype recvbuf:buf recvcounts:int_array rdispls:int_array recvtype:datatype comm:comm
Comm_dup      comm:comm newcomm:comm_out
Comm_dup_with_info comm:comm info:info newcomm:comm_out
Comm_split    comm:comm color:int key:int newcomm:comm_out
Comm_split_type comm:comm split_type:int key:int info:info newcomm:comm_out
Comm_idup     comm:comm newcomm:comm_out request:request_out
Comm_idup_with_info comm:comm info:info newcomm:comm_out request:request_out
Comm_create   comm:comm group:group newcomm:comm_out
Comm_create_group comm:comm group:group tag:int newcomm:comm_out
Cart_create   comm_old:comm ndims:int dims:int_array periods:logical_array(ndims) reorder:logical_in comm_cart:comm_out
Intercomm_create local_comm:comm local_leader:int peer_comm:comm remote_leader:int tag:int newintercomm:comm_out
Intercomm_merge intercomm:comm high:logical_in newintracomm:comm_out
Comm_free     comm:comm_inout
Comm_disconnect comm:comm_inout
Comm_set_errhandler comm:comm errhandler:errhandler
Comm_set_info comm:comm info:info
Comm_get_info comm:comm info_used:info_out
Psend_init+   buf:buf partitions:int count:count datatype:datatype dest:int tag:int comm:comm info:info request:request_out
Precv_init+   buf:buf partitions:int count:count datatype:datatype source:int tag:int comm:comm info:info request:request_out
Pready+       partition:int request:request
Pready_range+ partition_low:int partition_high:int request:request
Pready_list+  length:int array_of_partitions:int_array request:request
Parrived+     request:request partition:int flag:logical_out
"""

F2C = {"datatype": "MPI_Type_f2c", "comm": "MPI_Comm_f2c", "op": "MPI_Op_f2c", "group": "MPI_Group_f2c",
       "info": "MPI_Info_f2c", "errhandler": "MPI_Errhandler_f2c", "request": "MPI_Request_f2c"}
# Handles a call returns (kind_out) or takes and returns (kind_inout): C type,
# null value, f2c, c2f.
OUT = {"request": ("MPI_Request", "MPI_REQUEST_NULL", "MPI_Request_f2c", "MPI_Request_c2f"),
       "comm": ("MPI_Comm", "MPI_COMM_NULL", "MPI_Comm_f2c", "MPI_Comm_c2f"),
       "message": ("MPI_Message", "MPI_MESSAGE_NULL", "MPI_Message_f2c", "MPI_Message_c2f"),
       "info": ("MPI_Info", "MPI_INFO_NULL", "MPI_Info_f2c", "MPI_Info_c2f")}


def parse_calls(text):
    """[(call, args, shim_provides)]"""
    out = []
    for line in text.strip().splitlines():
        words = line.split()
        own = words[0].endswith("+")
        words[0] = words[0].rstrip("+")
        args = []
        for w in words[1:]:
            name, kind = w.split(":")
            m = re.fullmatch(r"(\w+)(?:\((\w+)(?:,(\w+))?\))?", kind)
            args.append((name, m.group(1), m.group(2), m.group(3)))
        out.append((words[0], args, own))
    # A Fortran wrapper exists because the shim treats the call specially in
    # C: the call-class table must say how.
    unclassed = [c for c, _, _ in out if calls.class_of("MPI_" + c) in (None, "pass")]
    if unclassed:
        raise SystemExit("fwrapgen: tools/calls.py classes none of %s, which get Fortran wrappers" %
                         ", ".join(unclassed))
    return out


# How one flavour of Fortran entry represents its sentinels and IERROR:
# mpif.h / `use mpi` (INTEGER arrays, mandatory IERROR) and `use mpi_f08`
# (TYPE(MPI_Status), an OPTIONAL ierror that gfortran passes as NULL when
# absent). Handles are the same INTEGERs in both (TYPE(MPI_Comm) holds only
# MPI_VAL, passed by reference).
F77 = {"buf": "msh_f_buf", "st_ign": "MPI_F_STATUS_IGNORE", "sts_ign": "MPI_F_STATUSES_IGNORE",
       "opt_ierr": False}
F08 = {"buf": "msh_f08_buf", "st_ign": "MSH_F08_STATUS_IGNORE", "sts_ign": "MSH_F08_STATUSES_IGNORE",
       "opt_ierr": True}


def gen_body(call, args, fl=F77):
    """(Fortran-side parameter list, body lines) of one wrapper."""
    params, pre, cargs, post, release = [], [], [], [], []
    allocs = False
    for name, kind, n, filled in args:
        params.append({"buf": "void *", "count": "MPI_Count *"}.get(kind, "MPI_Fint *") + name)
        c = "c_" + name
        if kind == "buf":
            cargs.append("%s(%s)" % (fl["buf"], name))
        elif kind == "int":
            cargs.append("(int)*%s" % name)
        elif kind == "count":
            cargs.append("*" + name)
        elif kind in F2C:
            cargs.append("%s(*%s)" % (F2C[kind], name))
        elif kind in ("int_out", "logical_out"):
            pre.append("int %s = 0;" % c)
            cargs.append("&" + c)
            post.append("*%s = %s;" % (name, c if kind == "int_out" else
                                       "%s ? MSH_F_TRUE : MSH_F_FALSE" % c))
        elif kind == "index_out":
            pre.append("int %s = MPI_UNDEFINED;" % c)
            cargs.append("&" + c)
            post.append("*%s = %s == MPI_UNDEFINED ? MPI_UNDEFINED : %s + 1;" % (name, c, c))
        elif kind == "int_array":
            cargs.append("(int *)" + name)  # MPI_Fint is int (fwrap.h checks)
        elif kind == "logical_in":
            cargs.append("*%s != MSH_F_FALSE" % name)
        elif kind == "logical_array":
            pre.append("msh_f_ints %s;" % c)
            pre.append("ok &= msh_f_logicals_in(&%s, *%s, %s);" % (c, n, name))
            cargs.append(c + ".c")
            release.append(c)
            allocs = True
        elif kind.endswith("_out") and kind[:-4] in OUT:
            ctype, null, _, c2f = OUT[kind[:-4]]
            pre.append("%s %s = %s;" % (ctype, c, null))
            cargs.append("&" + c)
            post.append("*%s = %s(%s);" % (name, c2f, c))
        elif kind.endswith("_inout") and kind[:-6] in OUT:
            ctype, _, f2c, c2f = OUT[kind[:-6]]
            pre.append("%s %s = %s(*%s);" % (ctype, c, f2c, name))
            cargs.append("&" + c)
            post.append("*%s = %s(%s);" % (name, c2f, c))
        elif kind == "status_out":
            # From the caller's status, not zeros: a call that leaves a field
            # alone (MPI_ERROR of a single completion) leaves the caller's,
            # as the hosts' bindings do when they pass the status through.
            pre.append("MPI_Status %s;" % c)
            pre.append("memset(&%s, 0, sizeof %s);" % (c, c))
            pre.append("if (%s != %s)" % (name, fl["st_ign"]))
            pre.append("    MPI_Status_f2c(%s, &%s);" % (name, c))
            cargs.append("%s == %s ? MPI_STATUS_IGNORE : &%s" % (name, fl["st_ign"], c))
            post.append("if (%s != %s)" % (name, fl["st_ign"]))
            post.append("    MPI_Status_c2f(&%s, %s);" % (c, name))
        elif kind == "status_in":
            pre.append("MPI_Status %s;" % c)
            pre.append("MPI_Status_f2c(%s, &%s);" % (name, c))
            cargs.append("&" + c)
        elif kind == "requests_inout":
            pre.append("msh_f_reqs %s;" % c)
            pre.append("ok &= msh_f_reqs_in(&%s, *%s, %s);" % (c, n, name))
            cargs.append(c + ".c")
            post.append("msh_f_reqs_out(&%s, *%s, %s);" % (c, n, name))
            release.append(c)
            allocs = True
        elif kind == "statuses_out":
            pre.append("msh_f_stats %s;" % c)
            pre.append("ok &= msh_f_stats_in(&%s, *%s, %s, %s);" % (c, n, name, fl["sts_ign"]))
            cargs.append(c + ".c")
            count = "msh_f_filled(c_%s)" % filled if filled else "msh_f_len(*%s)" % n
            post.append("msh_f_stats_out(&%s, %s, %s, %s);" % (c, count, name, fl["sts_ign"]))
            release.append(c)
            allocs = True
        elif kind == "indices_out":
            pre.append("msh_f_ints %s;" % c)
            pre.append("ok &= msh_f_ints_in(&%s, *%s);" % (c, n))
            cargs.append(c + ".c")
            post.append("msh_f_indices_out(&%s, msh_f_filled(c_%s), %s);" % (c, filled, name))
            release.append(c)
            allocs = True
        else:
            raise ValueError("%s: unknown kind %s" % (call, kind))
    params.append("MPI_Fint *ierr")
    body = []
    if allocs:
        body.append("int ok = 1;")
    body += pre
    ccall = "MPI_%s(%s)" % (call, ", ".join(cargs))
    if call in ("Init", "Init_thread"):
        # Fortran has no argc/argv to give; the host reads its own.
        ccall = "MPI_%s(NULL, NULL%s)" % (call, "".join(", " + a for a in cargs))
    if allocs:
        # Out of memory for the converted arrays: the call is not made.
        body.append("int rc = ok ? %s : MPI_ERR_NO_MEM;" % ccall)
        body.append("if (ok) {")
        body += ["    " + l for l in post]
        body.append("}")
        body += ["MSH_F_RELEASE(%s);" % r for r in release]
    else:
        body.append("int rc = %s;" % ccall)
        body += post
    if fl["opt_ierr"]:
        body.append("if (ierr) /* OPTIONAL in mpi_f08: NULL when the caller left it out */")
        body.append("    *ierr = (MPI_Fint)rc;")
    else:
        body.append("*ierr = (MPI_Fint)rc;")
    return params, body


def read_nm(path):
    """(defined, imported) symbol names of an `nm -D` listing."""
    defined, imported = set(), set()
    for line in open(path):
        f = line.split()
        if len(f) == 2 and f[0] in ("U", "w"):
            imported.add(f[1].split("@")[0])
        elif len(f) == 3 and f[1] in "TWDBVRi":
            defined.add(f[2].split("@")[0])
    return defined, imported


class CallGraph:
    """What C functions a Fortran entry ends up calling, from the host
    library's disassembly (`objdump -d`, labels and call/jmp lines are
    enough). A function is the code from its start (a symbol, or the
    target of a local call: MPICH's static helpers have no symbol) to the
    next start; its callees are the PLT names it calls or jumps to, and
    those of the local functions it calls or jumps into, transitively."""

    def __init__(self, path):
        self.sym = {}      # name -> address
        self.insns = []    # (address, target address, target name)
        starts = set()
        for line in open(path):
            m = re.match(r"^([0-9a-f]+) <([^>]+)>:$", line)
            if m:
                a = int(m.group(1), 16)
                self.sym.setdefault(m.group(2).split("@")[0], a)
                starts.add(a)
                continue
            m = re.match(r"^\s*([0-9a-f]+):\s+(call|jmp)\w*\s+([0-9a-f]+) <([^>]+)>", line)
            if m:
                t = int(m.group(3), 16)
                self.insns.append((int(m.group(1), 16), t, m.group(4)))
                if m.group(2) == "call" and not m.group(4).endswith("@plt"):
                    starts.add(t)
        self.insns.sort()
        self.starts = sorted(starts)
        self.memo = {}

    def _range(self, a):
        i = bisect.bisect_right(self.starts, a)
        end = self.starts[i] if i < len(self.starts) else 1 << 64
        lo = bisect.bisect_left(self.insns, (a,))
        hi = bisect.bisect_left(self.insns, (end,))
        return a, end, self.insns[lo:hi]

    def callees(self, name):
        if name not in self.sym:
            return set()
        seen, todo, out = set(), [self.sym[name]], set()
        while todo:
            a = todo.pop()
            if a in seen:
                continue
            seen.add(a)
            start, end, insns = self._range(a)
            for _, t, tname in insns:
                if tname.endswith("@plt"):
                    out.add(tname[:-4])
                elif not start <= t < end:
                    i = bisect.bisect_right(self.starts, t) - 1
                    todo.append(self.starts[i] if i >= 0 else t)
        return out


def sentinel(symbols, pattern):
    for s in sorted(symbols):
        if re.fullmatch(pattern, s):
            return s
    return None


def emit(out, impl, plist, body, names):
    out.append("__attribute__((visibility(\"hidden\"))) void %s(%s);" % (impl, plist))
    out.append("void %s(%s)" % (impl, plist))
    out.append("{")
    out += ["    " + l for l in body]
    out.append("}")
    for n in names:
        out.append("MSH_EXPORT void %s(%s) __attribute__((alias(\"%s\")));" % (n, plist, impl))
    out.append("")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsyms", required=True)
    ap.add_argument("--f08syms", help="nm -D of the host's mpi_f08 library")
    ap.add_argument("--f08dis", help="objdump -d of the host's mpi_f08 library (labels, calls, jumps)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--list")
    a = ap.parse_args()
    defined, imported = read_nm(a.fsyms)
    sentinels = {}
    for kind in ("bottom", "in_place"):
        s = sentinel(defined | imported, r"mpi_fortran_%s_*" % kind)
        if s:
            sentinels[kind] = s

    out = ["/* Generated by tools/fwrapgen.py from the host's Fortran library; do not edit. */",
           "#include <mpi.h>", ""]
    for kind in ("bottom", "in_place"):
        if kind in sentinels:
            out.append("extern char %s; /* the host's Fortran MPI_%s */" % (sentinels[kind], kind.upper()))
            out.append("#define MSH_F_%s ((void *)&%s)" % (kind.upper(), sentinels[kind]))
        else:
            out.append("#define MSH_F_%s ((void *)-1) /* not found: calls with buffers are not wrapped */" % kind.upper())

    # mpi_f08: the module's own sentinel objects. Open MPI's module names
    # the mpif.h common blocks (mpi_fortran_bottom_, mpi_fortran_status_ignore_,
    # ...); MPICH's has MPIR_F08_MPI_BOTTOM ... and MPIR_F08_MPI_STATUS(ES)_IGNORE_OBJ,
    # which its C library points MPI_F08_STATUS(ES)_IGNORE at.
    f08def, f08imp, graph = set(), set(), None
    if a.f08syms and a.f08dis:
        f08def, f08imp = read_nm(a.f08syms)
        graph = CallGraph(a.f08dis)
    f08all = f08def | f08imp
    f08sent = {}
    for kind in ("bottom", "in_place"):
        s = sentinel(f08all, r"mpi_fortran_%s_*|MPIR_F08_MPI_%s" % (kind, kind.upper()))
        if s:
            f08sent[kind] = s
            # Under a name of our own: the host's mpi.h may declare it (MPICH: int).
            out.append("extern char msh_f08_%s __asm__(\"%s\"); /* the host's mpi_f08 MPI_%s */"
                       % (kind, s, kind.upper()))
            out.append("#define MSH_F08_%s ((void *)&msh_f08_%s)" % (kind.upper(), kind))
        else:
            out.append("#define MSH_F08_%s ((void *)-1)" % kind.upper())
    f08status = None
    if "MPIR_F08_MPI_STATUS_IGNORE_OBJ" in f08all and "MPIR_F08_MPI_STATUSES_IGNORE_OBJ" in f08all:
        f08status = "MPICH"
        out.append("/* TYPE(MPI_Status) is MPI_F08_status, the C MPI_Status's layout on this host:"
                   " MPI_Status_c2f fills it. */")
        out.append("#define MSH_F08_STATUS_IGNORE ((MPI_Fint *)MPI_F08_STATUS_IGNORE)")
        out.append("#define MSH_F08_STATUSES_IGNORE ((MPI_Fint *)MPI_F08_STATUSES_IGNORE)")
    elif sentinel(f08all, r"mpi_fortran_status_ignore_*") and sentinel(f08all, r"mpi_fortran_statuses_ignore_*"):
        f08status = "mpif.h"
        out.append("/* TYPE(MPI_Status) is the INTEGER status of mpif.h; so are its IGNOREs. */")
        out.append("#define MSH_F08_STATUS_IGNORE MPI_F_STATUS_IGNORE")
        out.append("#define MSH_F08_STATUSES_IGNORE MPI_F_STATUSES_IGNORE")
    else:
        out.append("#define MSH_F08_STATUS_IGNORE ((MPI_Fint *)0)")
        out.append("#define MSH_F08_STATUSES_IGNORE ((MPI_Fint *)0)")
    # mpishim.h declares the MPI-4 partitioned calls where mpi.h lacks them.
    out += ['#include "mpishim.h"', '#include "fortran/fwrap.h"', ""]

    wrapped, skipped = [], []
    f08wrapped, f08skipped = [], []
    for call, args, own in parse_calls(CALLS):
        low = "mpi_" + call.lower()
        hasbuf = any(k == "buf" for _, k, _, _ in args)
        hasstat = any(k in ("status_out", "status_in", "statuses_out") for _, k, _, _ in args)
        names = sorted(n for n in (low, low + "_", low + "__", low.upper()) if n in defined)
        note = ""
        if not names and own and "MPI_" + call not in imported:
            # The host has no such call at all: every name a Fortran
            # compiler may produce, as the host's library would have.
            names = [low + "_", low + "__", low, low.upper()]
            note = " (the host has none: the shim's C MPI_%s)" % call
        if "MPI_" + call in imported:
            skipped.append("%s (the host's Fortran entry calls the C MPI_%s)" % (call, call))
        elif not names:
            skipped.append("%s (the host defines no Fortran entry)" % call)
        elif hasbuf and len(sentinels) < 2:
            skipped.append("%s (the host's MPI_BOTTOM/MPI_IN_PLACE not found)" % call)
        else:
            params, body = gen_body(call, args)
            emit(out, "msh_f_" + call.lower(), ", ".join(params), body, names)
            wrapped.append("%s %s%s" % (call, " ".join(names), note))

        if graph is None:
            continue
        # mpi_f08: the module procedure is mpi_<x>_f08_ (MPICH names the
        # ones with choice buffers mpi_<x>_f08ts_: they take TS 29113
        # descriptors). It needs a wrapper unless its own code reaches the
        # C MPI_<X> (MPICH's buffer calls do; its others, and all of Open
        # MPI's, go to PMPI_* or to the mpif.h layer's internals).
        f08names = [n for n in (low + "_f08_", low + "_f08ts_") if n in f08def]
        if not f08names:
            f08skipped.append("%s (the host defines no mpi_f08 entry)" % call)
            continue
        n = f08names[0]
        if "MPI_" + call in graph.callees(n):
            f08skipped.append("%s (the host's %s calls the C MPI_%s)" % (call, n, call))
        elif n.endswith("_f08ts_"):
            f08skipped.append("%s (the host's %s takes array descriptors; not wrapped: bypasses the runtime)"
                              % (call, n))
        elif hasbuf and len(f08sent) < 2:
            f08skipped.append("%s (the host's mpi_f08 MPI_BOTTOM/MPI_IN_PLACE not found)" % call)
        elif hasstat and f08status is None:
            f08skipped.append("%s (the host's mpi_f08 MPI_STATUS_IGNORE not found)" % call)
        else:
            params, body = gen_body(call, args, F08)
            emit(out, "msh_f08_" + call.lower(), ", ".join(params), body, [n])
            f08wrapped.append("%s %s" % (call, n))
    open(a.out, "w").write("\n".join(out))
    if a.list:
        with open(a.list, "w") as f:
            f.write("".join("wrapped %s\n" % w for w in wrapped))
            f.write("".join("host    %s\n" % s for s in skipped))
            f.write("".join("f08 wrapped %s\n" % w for w in f08wrapped))
            f.write("".join("f08 host    %s\n" % s for s in f08skipped))
    print("fwrapgen: mpif.h: %d Fortran calls wrapped, %d left to the host's Fortran entries;"
          " mpi_f08: %d wrapped, %d left" % (len(wrapped), len(skipped), len(f08wrapped), len(f08skipped)),
          file=sys.stderr)


if __name__ == "__main__":
    main()
