! The `use mpi_f08` twin of ft_part.F90, for a host whose mpi_f08 module has
! the MPI-4 partitioned calls (MPICH 4.0): TYPE(MPI_Request) and the
! optional ierror. MPICH's mpi_f08 MPI_Psend_init reaches the C
! MPI_Psend_init (the shim's), but its MPI_Pready, MPI_Pready_range,
! MPI_Pready_list and MPI_Parrived call PMPI_* directly: without the shim's
! wrappers for them the host would get a shim request and fail.
program ft_part_f08
  use mpi_f08
  use omp_lib
  implicit none
  integer, parameter :: T = 4, PER = 2, NP = T * PER, N = 16, ROUNDS = 12
  integer, asynchronous :: buf(N, NP)
  integer :: ierr, provided, rank, nproc, peer, round, errs, total, c
  type(MPI_Request) :: req
  type(MPI_Comm) :: pcomm
  type(MPI_Request) :: ireq
  integer(kind=MPI_COUNT_KIND) :: count
  logical :: sender
  character(len=32) :: name

  name = 'ft_part_f08'
  call MPI_Init_thread(MPI_THREAD_MULTIPLE, provided, ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nproc, ierr)
  if (provided /= MPI_THREAD_MULTIPLE .or. mod(nproc, 2) /= 0) then
    if (rank == 0) print '(a,a,a,i0,a,i0)', 'SKIP ', trim(name), ': provided ', provided, ', ranks ', nproc
    call MPI_Finalize(ierr)
    stop
  end if
  peer = ieor(rank, 1)
  sender = mod(rank, 2) == 0
  errs = 0
  ! The channel runs on an MPI_Comm_idup of the world: its id for the
  ! partitioned layer comes from the idup call itself.
  call MPI_Comm_idup(MPI_COMM_WORLD, pcomm, ireq, ierr)
  if (ierr /= MPI_SUCCESS) call fail(errs, 'comm_idup')
  call MPI_Wait(ireq, MPI_STATUS_IGNORE, ierr)
  count = N
  buf = -1
  if (sender) then
    call MPI_Psend_init(buf, NP, count, MPI_INTEGER, peer, 77, pcomm, MPI_INFO_NULL, req, ierr)
  else
    call MPI_Precv_init(buf, NP, count, MPI_INTEGER, peer, 77, pcomm, MPI_INFO_NULL, req, ierr)
  end if
  if (ierr /= MPI_SUCCESS .or. req == MPI_REQUEST_NULL) call fail(errs, 'partitioned init')

  do round = 1, ROUNDS
    call MPI_Start(req, ierr)
    if (ierr /= MPI_SUCCESS) call fail(errs, 'start')
!$omp parallel num_threads(T) reduction(+:errs)
    if (sender) then
      call send_side(omp_get_thread_num(), round, errs)
    else
      call recv_side(omp_get_thread_num(), round, errs)
    end if
!$omp end parallel
    call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
    if (ierr /= MPI_SUCCESS) call fail(errs, 'wait')
    if (.not. sender) then
      ! Everything has arrived after the wait: every partition, checked again.
      do c = 1, NP
        if (any(buf(:, c) /= val(peer, round, c))) call fail(errs, 'payload after MPI_Wait')
      end do
    end if
  end do
  call MPI_Request_free(req, ierr)
  if (req /= MPI_REQUEST_NULL) call fail(errs, 'request_free did not reset the handle')

  call MPI_Comm_free(pcomm, ierr)
  call MPI_Allreduce(errs, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (total /= 0) then
    if (rank == 0) print '(a,a,i0,a)', trim(name), ': ', total, ' errors'
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  if (rank == 0) print '(a,a)', 'OK ', trim(name)
  call MPI_Finalize(ierr)

contains

  ! Partition c (1-based here, c - 1 for MPI) of a round, from rank src.
  integer function val(src, round, c)
    integer, intent(in) :: src, round, c
    val = src * 100000 + round * 100 + c
  end function val

  subroutine fail(errs, what)
    integer, intent(inout) :: errs
    character(len=*), intent(in) :: what
    errs = errs + 1
    if (errs <= 5) print '(a,i0,a,a)', 'rank ', rank, ': ', what
  end subroutine fail

  subroutine parrived(p, flag, ierr)
    integer, intent(in) :: p
    logical, intent(out) :: flag
    integer, intent(out) :: ierr
    call MPI_Parrived(req, p, flag, ierr)
  end subroutine parrived

  ! Thread tid owns partitions tid*PER .. tid*PER+PER-1 (MPI numbering).
  subroutine send_side(tid, round, errs)
    integer, intent(in) :: tid, round
    integer, intent(inout) :: errs
    integer :: p, ierr, list(PER)
    do p = tid * PER, tid * PER + PER - 1
      buf(:, p + 1) = val(rank, round, p + 1)
    end do
    select case (mod(round, 3))
    case (0)
      do p = tid * PER, tid * PER + PER - 1
        call MPI_Pready(p, req, ierr)
        if (ierr /= MPI_SUCCESS) call fail(errs, 'pready')
      end do
    case (1)
      call MPI_Pready_range(tid * PER, tid * PER + PER - 1, req, ierr)
      if (ierr /= MPI_SUCCESS) call fail(errs, 'pready_range')
    case default
      do p = 1, PER
        list(p) = tid * PER + PER - p   ! backwards, to check the list is used as given
      end do
      call MPI_Pready_list(PER, list, req, ierr)
      if (ierr /= MPI_SUCCESS) call fail(errs, 'pready_list')
    end select
  end subroutine send_side

  subroutine recv_side(tid, round, errs)
    integer, intent(in) :: tid, round
    integer, intent(inout) :: errs
    integer :: p, ierr
    logical :: arrived
    do p = tid * PER, tid * PER + PER - 1
      arrived = .false.
      do while (.not. arrived)
        call parrived(p, arrived, ierr)
        if (ierr /= MPI_SUCCESS) then
          call fail(errs, 'parrived')
          return
        end if
      end do
      if (any(buf(:, p + 1) /= val(peer, round, p + 1))) call fail(errs, 'payload after MPI_Parrived')
    end do
  end subroutine recv_side

end program ft_part_f08
