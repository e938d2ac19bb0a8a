! fmultirate.F90 - the pairwise pattern of bench/multirate.c in Fortran +
! OpenMP, to show that Fortran programs get the shim's gain.
!
! 2 ranks x T OpenMP threads; thread i of rank 0 streams to thread i of
! rank 1 (data tag i, ack tag T+i), all on one shared communicator
! (MPI_COMM_WORLD). Each window, for one pair:
!
!     sender (rank 0)                     receiver (rank 1)
!                                         W x MPI_Irecv   (already posted)
!     W x MPI_Isend   ------------------>
!     MPI_Waitall                         MPI_Waitall, check payloads
!                                         W x MPI_Irecv   (next window)
!     MPI_Recv ack    <------------------ MPI_Send ack (0 INTEGERs; 1 = stop)
!
! W = 128 messages of one INTEGER(8) (8 bytes). The receiver stops its pair
! after the -d seconds (default 1) and says so in the last ack. Rate: data
! messages of all pairs over the slower rank's time from a barrier to its
! last thread ending, in millions per second. Output (rank 0):
!     fmultirate flavour=usempi T=4 windows=... seconds=... mmsgs_per_s=...
! Built with `use mpi`, or `use mpi_f08` with -DFB_F08=1. Usage:
!     mpirun -np 2 fmultirate [-t T] [-d seconds]
program fmultirate
#ifdef FB_F08
  use mpi_f08
#else
  use mpi
#endif
  use omp_lib
  implicit none
  integer, parameter :: W = 128
  integer :: nt, ierr, provided, rank, nproc, errs, total_errs, i
  integer(8) :: wins, total_wins
  double precision :: secs, t0, elapsed, tmax
  character(len=64) :: arg, flavour

#ifdef FB_F08
  flavour = 'f08'
#else
  flavour = 'usempi'
#endif
  nt = 1
  secs = 1d0
  i = 1
  do while (i <= command_argument_count())
    call get_command_argument(i, arg)
    if (arg == '-t' .or. arg == '-d') then
      call get_command_argument(i + 1, flavour(33:))
      if (arg == '-t') read (flavour(33:), *) nt
      if (arg == '-d') read (flavour(33:), *) secs
      i = i + 1
    end if
    i = i + 1
  end do
  flavour(33:) = ''

  call MPI_Init_thread(MPI_THREAD_MULTIPLE, provided, ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nproc, ierr)
  if (nproc /= 2 .or. provided /= MPI_THREAD_MULTIPLE .or. nt < 1) then
    if (rank == 0) print '(a)', 'fmultirate: needs 2 ranks, MPI_THREAD_MULTIPLE and -t >= 1'
    call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  end if

  errs = 0
  wins = 0
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  t0 = MPI_Wtime()
!$omp parallel num_threads(nt) reduction(+:errs, wins)
  if (rank == 0) then
    call sender(omp_get_thread_num(), wins)
  else
    call receiver(omp_get_thread_num(), wins, errs)
  end if
!$omp end parallel
  elapsed = MPI_Wtime() - t0

  call MPI_Allreduce(elapsed, tmax, 1, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
  call MPI_Allreduce(errs, total_errs, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Allreduce(wins, total_wins, 1, MPI_INTEGER8, MPI_MAX, MPI_COMM_WORLD, ierr)
  if (total_errs /= 0) then
    if (rank == 0) print '(a,i0,a)', 'fmultirate: ', total_errs, ' wrong payloads or statuses'
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  ! Fixed-width fields, left-adjusted: f0.d would print .1234 without the 0.
  write (arg, '(f12.6)') dble(total_wins) * W / tmax / 1d6
  write (flavour(33:), '(f12.6)') tmax
  if (rank == 0) print '(a,a,a,i0,a,i0,a,a,a,a)', 'fmultirate flavour=', trim(flavour(1:32)), ' T=', nt, &
    ' windows=', total_wins, ' seconds=', trim(adjustl(flavour(33:))), ' mmsgs_per_s=', trim(adjustl(arg))
  call MPI_Finalize(ierr)

contains

  integer(8) function val(tid, win, k)
    integer, intent(in) :: tid, k
    integer(8), intent(in) :: win
    val = int(tid, 8) * 1000000000_8 + win * W + k
  end function val

  subroutine sender(tid, wins)
    integer, intent(in) :: tid
    integer(8), intent(inout) :: wins
    integer(8), asynchronous :: buf(W)
#ifdef FB_F08
    type(MPI_Request) :: reqs(W)
    type(MPI_Status) :: st
#else
    integer :: reqs(W), st(MPI_STATUS_SIZE)
#endif
    integer :: k, ierr, ack, cnt
    do
      do k = 1, W
        buf(k) = val(tid, wins, k)
        call MPI_Isend(buf(k), 1, MPI_INTEGER8, 1, tid, MPI_COMM_WORLD, reqs(k), ierr)
      end do
      call MPI_Waitall(W, reqs, MPI_STATUSES_IGNORE, ierr)
      wins = wins + 1
      call MPI_Recv(ack, 1, MPI_INTEGER, 1, nt + tid, MPI_COMM_WORLD, st, ierr)
      call MPI_Get_count(st, MPI_INTEGER, cnt, ierr)
      if (cnt /= 0) exit
    end do
  end subroutine sender

  subroutine receiver(tid, wins, errs)
    integer, intent(in) :: tid
    integer(8), intent(inout) :: wins
    integer, intent(inout) :: errs
    integer(8), asynchronous :: buf(W)
#ifdef FB_F08
    type(MPI_Request) :: reqs(W)
    type(MPI_Status) :: sts(W)
#else
    integer :: reqs(W), sts(MPI_STATUS_SIZE, W)
#endif
    integer :: k, ierr, ack
    logical :: stop
    do k = 1, W
      call MPI_Irecv(buf(k), 1, MPI_INTEGER8, 0, tid, MPI_COMM_WORLD, reqs(k), ierr)
    end do
    do
      call MPI_Waitall(W, reqs, sts, ierr)
      do k = 1, W
        if (buf(k) /= val(tid, wins, k)) errs = errs + 1
#ifdef FB_F08
        if (sts(k)%MPI_TAG /= tid) errs = errs + 1
#else
        if (sts(MPI_TAG, k) /= tid) errs = errs + 1
#endif
      end do
      wins = wins + 1
      stop = MPI_Wtime() - t0 >= secs
      if (.not. stop) then   ! the next window, before the ack: every message finds its receive
        do k = 1, W
          call MPI_Irecv(buf(k), 1, MPI_INTEGER8, 0, tid, MPI_COMM_WORLD, reqs(k), ierr)
        end do
      end if
      ack = 1
      call MPI_Send(ack, merge(1, 0, stop), MPI_INTEGER, 0, nt + tid, MPI_COMM_WORLD, ierr)
      if (stop) exit
    end do
  end subroutine receiver

end program fmultirate
