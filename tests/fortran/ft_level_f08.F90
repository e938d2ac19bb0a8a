! The `use mpi_f08` twin of ft_level.F90: plain MPI_Init (thread level
! single) must reach the shim (MPISHIM_VERBOSE=1 prints its configuration)
! and keep the runtime off, as for C; MPI_Query_thread then answers the
! host's level. ierror is left out throughout (it is OPTIONAL in mpi_f08).
program ft_level_f08
  use mpi_f08
  implicit none
  integer :: provided, rank, nproc, peer, x
  integer, asynchronous :: y
  type(MPI_Request) :: req
  call MPI_Init()
  call MPI_Query_thread(provided)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nproc)
  if (mod(nproc, 2) /= 0) then
    if (rank == 0) print '(a)', 'SKIP ft_level_f08: odd number of ranks'
    call MPI_Finalize()
    stop
  end if
  if (provided == MPI_THREAD_MULTIPLE) then
    print '(a,i0,a)', 'rank ', rank, ': MPI_Query_thread says MULTIPLE after plain MPI_Init'
    call MPI_Abort(MPI_COMM_WORLD, 1)
  end if
  peer = ieor(rank, 1)
  x = rank
  call MPI_Irecv(y, 1, MPI_INTEGER, peer, 1, MPI_COMM_WORLD, req)
  call MPI_Send(x, 1, MPI_INTEGER, peer, 1, MPI_COMM_WORLD)
  call MPI_Wait(req, MPI_STATUS_IGNORE)
  if (y /= peer) then
    print '(a,i0,a)', 'rank ', rank, ': wrong payload'
    call MPI_Abort(MPI_COMM_WORLD, 1)
  end if
  if (rank == 0) print '(a)', 'OK ft_level_f08'
  call MPI_Finalize()
end program ft_level_f08
