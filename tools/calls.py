"""The call-class table: every MPI call the shim treats as more than a
pass-through, and how. Read by both wrapper generators (tools/wrapgen.py for
C, tools/fwrapgen.py for Fortran), so that a call's class is stated once and
never guessed from its name.

Classes:
  p2p, completion, comm, init, part, window
      implemented by hand in src/ (point-to-point, completion calls,
      communicator constructors and the like, start-up and shutdown,
      partitioned communication, window constructors and synchronization);
      the build fails if the host declares one and src/ lacks it.
  collective
      a blocking collective: generated as its nonblocking twin plus a shim
      wait (or hand-written); the build fails if the host declares it but
      has no matching twin.
  rma-data, rma-acc
      one-sided data movement and accumulate-type calls, generated routed
      to an internal window (by target or thread; accumulates by target).
  status
      a pass-through in C that the Fortran wrappers still convert (a
      status argument in the shim's Fortran form).
  waits
      a pass-through whose host call may wait for other processes
      (collective file I/O, joining other jobs): generated with the lanes
      read meanwhile (src/sync/assist.h).
  pass
      named here only to say it is deliberately a pass-through.
Every other call is a pass-through; wrapgen fails on one that looks like a
blocking collective (a nonblocking twin on a communicator) but is not
classed, instead of passing it through silently.
"""

CLASSES = {"p2p", "completion", "comm", "init", "part", "window", "collective", "rma-data", "rma-acc", "status",
           "waits", "pass"}


def _with_c(names):
    """Each name and its MPI-4 large-count form."""
    return [n for x in names.split() for n in (x, x + "_c")]


_TABLE = [
    ("p2p", _with_c("Send Ssend Bsend Rsend Isend Issend Ibsend Irsend Send_init Ssend_init Bsend_init "
                    "Rsend_init Recv Irecv Recv_init Sendrecv Sendrecv_replace Isendrecv Isendrecv_replace")
     + "Probe Iprobe Mprobe Improbe Mrecv Imrecv Mrecv_c Imrecv_c".split()),
    ("completion", "Wait Waitall Waitany Waitsome Test Testall Testany Testsome Request_get_status Request_free "
                   "Cancel Start Startall Request_c2f Request_f2c".split()),
    ("comm", "Comm_create Comm_create_group Comm_disconnect Comm_dup Comm_dup_with_info Comm_free Comm_get_info "
             "Comm_set_errhandler Comm_set_info Comm_split Comm_split_type Cart_create Cart_sub Graph_create "
             "Dist_graph_create Dist_graph_create_adjacent Intercomm_create Intercomm_merge".split()),
    ("init", "Init Init_thread Finalize Query_thread".split()),
    ("status", ["Get_count"]),
    ("part", "Psend_init Precv_init Pready Pready_list Pready_range Parrived".split()),
    ("window", _with_c("Win_allocate Win_allocate_shared Win_create Win_shared_query")
     + "Win_attach Win_complete Win_create_dynamic Win_detach Win_fence Win_flush Win_flush_all Win_flush_local "
       "Win_flush_local_all Win_free Win_get_attr Win_lock Win_lock_all Win_post Win_start Win_sync Win_test "
       "Win_unlock Win_unlock_all Win_wait".split()),
    ("collective", _with_c("Barrier Bcast Gather Gatherv Scatter Scatterv Allgather Allgatherv Alltoall Alltoallv "
                           "Alltoallw Reduce Allreduce Reduce_scatter Reduce_scatter_block Scan Exscan "
                           "Neighbor_allgather Neighbor_allgatherv Neighbor_alltoall Neighbor_alltoallv "
                           "Neighbor_alltoallw")),
    ("rma-data", _with_c("Put Get Rput Rget")),
    ("rma-acc", _with_c("Accumulate Get_accumulate Raccumulate Rget_accumulate") + ["Fetch_and_op",
                                                                                     "Compare_and_swap"]),
    # Independent file I/O waits for no other process; MPI_File_delete is local.
    ("waits", _with_c("File_read_all File_write_all File_read_at_all File_write_at_all File_read_ordered "
                      "File_write_ordered File_read_all_begin File_write_all_begin File_read_at_all_begin "
                      "File_write_at_all_begin File_read_ordered_begin File_write_ordered_begin")
     + "File_open File_close File_set_size File_preallocate File_sync File_set_view File_set_atomicity "
       "File_set_info File_seek_shared File_read_all_end File_write_all_end File_read_at_all_end "
       "File_write_at_all_end File_read_ordered_end File_write_ordered_end Comm_accept Comm_connect Comm_join "
       "Comm_spawn Comm_spawn_multiple Comm_create_from_group Intercomm_create_from_groups".split()),
]

CALLS = {}
for _cls, _names in _TABLE:
    assert _cls in CLASSES, _cls
    for _n in _names:
        _full = "MPI_" + _n
        if _full in CALLS and _cls != "pass":
            raise SystemExit("tools/calls.py: %s classed twice" % _full)
        CALLS[_full] = _cls
# Barrier has no large-count form.
CALLS.pop("MPI_Barrier_c", None)

HAND = {"p2p", "completion", "comm", "init", "part", "window"}


def class_of(name):
    """The class of MPI_X, or None for a plain pass-through."""
    return CALLS.get(name)
