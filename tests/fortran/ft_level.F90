! A Fortran program that calls plain MPI_INIT (thread level single): the
! shim must see the init (MPISHIM_VERBOSE=1 prints its configuration) and
! keep the runtime off, as for C; MPI_QUERY_THREAD then answers the host's
! level. Built for mpif.h (-DFT_MPIFH=1) and `use mpi`.
program ft_level
#ifdef FT_MPIFH
  implicit none
  include 'mpif.h'
#else
  use mpi
  implicit none
#endif
  integer :: ierr, provided, rank, nproc, peer, x, y, req
  call MPI_Init(ierr)
  call MPI_Query_thread(provided, ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nproc, ierr)
  if (mod(nproc, 2) /= 0) then
    if (rank == 0) print '(a)', 'SKIP ft_level: odd number of ranks'
    call MPI_Finalize(ierr)
    stop
  end if
  if (provided == MPI_THREAD_MULTIPLE) then
    print '(a,i0,a)', 'rank ', rank, ': MPI_QUERY_THREAD says MULTIPLE after plain MPI_INIT'
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  peer = ieor(rank, 1)
  x = rank
  call MPI_Irecv(y, 1, MPI_INTEGER, peer, 1, MPI_COMM_WORLD, req, ierr)
  call MPI_Send(x, 1, MPI_INTEGER, peer, 1, MPI_COMM_WORLD, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  if (y /= peer) then
    print '(a,i0,a)', 'rank ', rank, ': wrong payload'
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  if (rank == 0) print '(a)', 'OK ft_level'
  call MPI_Finalize(ierr)
end program ft_level
