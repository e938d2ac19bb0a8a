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
      status argument in the shim's Fortran form); in C a local call (below).
  waits
      a pass-through whose host call may wait for other processes
      (collective file I/O, joining other jobs): generated with the lanes
      read meanwhile (src/sync/assist.h).
  local
      a pass-through that only reads or builds objects of this process (a
      type's size, a communicator's rank, packing, groups, info): no message
      is involved, so it does not drain the queued posts of
      MPISHIM_PROGRESS=combine/offload (src/intercept/passthru.h), which
      would scan every VCI and may wait for another thread's VCI lock in a
      call programs make per element. Nothing that frees an object a queued
      post may still use (MPI_Type_free) or that waits for sends
      (MPI_Buffer_detach) belongs here.
  pass
      named here only to say it is deliberately a pass-through.
Every other call is a pass-through; wrapgen fails on one that looks like a
blocking collective (a nonblocking twin on a communicator) but is not
classed, instead of passing it through silently.
"""

CLASSES = {"p2p", "completion", "comm", "init", "part", "window", "collective", "rma-data", "rma-acc", "status",
           "waits", "local", "pass"}


def _with_c(names):
    """Each name and its MPI-4 large-count form."""
    return [n for x in names.split() for n in (x, x + "_c")]


_TABLE = [
    ("p2p", _with_c("Send Ssend Bsend Rsend Isend Issend Ibsend Irsend Send_init Ssend_init Bsend_init "
                    "Rsend_init Recv Irecv Recv_init Sendrecv Sendrecv_replace Isendrecv Isendrecv_replace")
     + "Probe Iprobe Mprobe Improbe Mrecv Imrecv Mrecv_c Imrecv_c Message_c2f Message_f2c".split()),
    ("completion", "Wait Waitall Waitany Waitsome Test Testall Testany Testsome Request_get_status Request_free "
                   "Cancel Start Startall Request_c2f Request_f2c".split()),
    ("comm", "Comm_create Comm_create_group Comm_disconnect Comm_dup Comm_dup_with_info Comm_free Comm_get_info "
             "Comm_create_from_group Intercomm_create_from_groups Comm_idup Comm_idup_with_info "
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
    ("local", _with_c("Type_size Type_get_extent Type_get_true_extent Type_get_envelope Type_get_contents "
                      "Type_contiguous Type_vector Type_create_hvector Type_indexed Type_create_hindexed "
                      "Type_create_indexed_block Type_create_hindexed_block Type_create_struct "
                      "Type_create_subarray Type_create_darray Type_create_resized Pack Unpack Pack_size "
                      "Pack_external Unpack_external Pack_external_size Get_elements Status_set_elements")
     + "Type_size_x Type_get_extent_x Type_get_true_extent_x Get_elements_x Status_set_elements_x "
       "Status_set_cancelled Test_cancelled Type_get_name Type_set_name Type_get_attr Type_set_attr "
       "Type_delete_attr Type_create_keyval Type_free_keyval Type_commit Type_dup Type_match_size "
       "Type_create_f90_integer Type_create_f90_real Type_create_f90_complex Get_address "
       "Comm_rank Comm_size Comm_remote_size Comm_test_inter Comm_compare Comm_group Comm_remote_group "
       "Comm_get_name Comm_set_name Comm_get_attr Comm_set_attr Comm_delete_attr Comm_create_keyval "
       "Comm_free_keyval Comm_get_errhandler Attr_get Attr_put Attr_delete Keyval_create Keyval_free "
       "Group_size Group_rank Group_translate_ranks Group_compare Group_union Group_intersection "
       "Group_difference Group_incl Group_excl Group_range_incl Group_range_excl Group_free "
       "Topo_test Cartdim_get Cart_get Cart_rank Cart_coords Cart_shift Cart_map Graphdims_get Graph_get "
       "Graph_neighbors_count Graph_neighbors Graph_map Dist_graph_neighbors_count Dist_graph_neighbors "
       "Dims_create Info_create Info_dup Info_free Info_set Info_delete Info_get Info_get_valuelen "
       "Info_get_nkeys Info_get_nthkey Info_get_string Error_class Error_string Get_processor_name "
       "Op_commutative Get_count_c Status_c2f Status_f2c Type_extent Type_lb Type_ub Address Type_hvector "
       "Type_hindexed Type_struct Errhandler_get T_pvar_read T_pvar_readreset T_cvar_read".split()
     + _with_c("Reduce_local")),
    # Independent file I/O waits for no other process; MPI_File_delete is local.
    ("waits", _with_c("File_read_all File_write_all File_read_at_all File_write_at_all File_read_ordered "
                      "File_write_ordered File_read_all_begin File_write_all_begin File_read_at_all_begin "
                      "File_write_at_all_begin File_read_ordered_begin File_write_ordered_begin")
     + "File_open File_close File_set_size File_preallocate File_sync File_set_view File_set_atomicity "
       "File_set_info File_seek_shared File_read_all_end File_write_all_end File_read_at_all_end "
       "File_write_at_all_end File_read_ordered_end File_write_ordered_end Comm_accept Comm_connect Comm_join "
       "Comm_spawn Comm_spawn_multiple".split()),
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
