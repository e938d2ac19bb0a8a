! The `use mpi_f08` twin of ft_threads.F90: the same program with
! TYPE(MPI_Comm), TYPE(MPI_Request) and TYPE(MPI_Status) handles and the
! optional ierror left out where the code does not look at it. T threads of
! each rank, at MPI_THREAD_MULTIPLE, each posting windows of
! MPI_Isend/MPI_Irecv completed by MPI_Waitall, blocking sends and receives
! with statuses checked (source, tag, MPI_Get_count), a wildcard receive,
! MPI_Test/MPI_Testany loops and MPI_Allreduce on a communicator of its own.
! Every payload is checked. Ranks pair up (0-1, 2-3, ...); rank 0 prints
! "OK ft_threads_f08" when all passed.
program ft_threads_f08
  use mpi_f08
  use omp_lib
  implicit none
  integer, parameter :: T = 4, NWIN = 8, N = 64, ROUNDS = 10
  integer :: ierr, provided, rank, nproc, peer, i, errs, total
  type(MPI_Comm) :: comms(T)
  character(len=32) :: name

  name = 'ft_threads_f08'
  call MPI_Init_thread(MPI_THREAD_MULTIPLE, provided, ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nproc, ierr)
  if (provided /= MPI_THREAD_MULTIPLE .or. mod(nproc, 2) /= 0) then
    if (rank == 0) print '(a,a,a,i0,a,i0)', 'SKIP ', trim(name), ': provided ', provided, ', ranks ', nproc
    call MPI_Finalize(ierr)
    stop
  end if
  peer = ieor(rank, 1)
  ! One communicator per thread, made before the threads start.
  do i = 1, T
    call MPI_Comm_dup(MPI_COMM_WORLD, comms(i), ierr)
  end do

  ! What this rank sends and receives point-to-point, for the runner's
  ! MPISHIM_STATS=1 check (each counted once: windows, blocking, wildcard
  ! on the even side / odd side, test loops).
  print '(a,i0,a,i0,a,i0)', 'FT-EXPECT rank ', rank, ' sends ', &
    ROUNDS * T * (NWIN + 1 + 3 + merge(1, 0, mod(rank, 2) == 0)), ' recvs ', &
    ROUNDS * T * (NWIN + 1 + 3 + merge(1, 0, mod(rank, 2) == 1))

  errs = 0
!$omp parallel num_threads(T) reduction(+:errs)
  call windows(omp_get_thread_num(), errs)
  call blocking(omp_get_thread_num(), errs)
  call wildcard(omp_get_thread_num(), comms(omp_get_thread_num() + 1), errs)
  call testloops(omp_get_thread_num(), errs)
  call allreduce(omp_get_thread_num(), comms(omp_get_thread_num() + 1), errs)
!$omp end parallel

  do i = 1, T
    call MPI_Comm_free(comms(i), ierr)
    if (comms(i) /= MPI_COMM_NULL) call fail(errs, 'comm_free did not reset the handle')
  end do
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Allreduce(errs, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (total /= 0) then
    if (rank == 0) print '(a,a,i0,a)', trim(name), ': ', total, ' errors'
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  if (rank == 0) print '(a,a)', 'OK ', trim(name)
  call MPI_Finalize(ierr)

contains

  integer function val(src, tid, round, w, i)
    integer, intent(in) :: src, tid, round, w, i
    val = src * 1000000 + tid * 100000 + round * 1000 + w * 100 + i
  end function val

  subroutine fail(errs, what)
    integer, intent(inout) :: errs
    character(len=*), intent(in) :: what
    errs = errs + 1
    if (errs <= 5) print '(a,i0,a,a)', 'rank ', rank, ': ', what
  end subroutine fail

  ! Windows of NWIN receives and NWIN sends on MPI_COMM_WORLD, one tag per thread
  ! and slot, completed by one MPI_Waitall with statuses.
  subroutine windows(tid, errs)
    integer, intent(in) :: tid
    integer, intent(inout) :: errs
    integer, asynchronous :: sbuf(N, NWIN), rbuf(N, NWIN)
    type(MPI_Request) :: reqs(2 * NWIN)
    type(MPI_Status) :: stats(2 * NWIN)
    integer :: round, w, i, ierr
    do round = 1, ROUNDS
      do w = 1, NWIN
        do i = 1, N
          sbuf(i, w) = val(rank, tid, round, w, i)
        end do
        rbuf(:, w) = -1
        call MPI_Irecv(rbuf(1, w), N, MPI_INTEGER, peer, tid * 100 + w, MPI_COMM_WORLD, reqs(w), ierr)
        call MPI_Isend(sbuf(1, w), N, MPI_INTEGER, peer, tid * 100 + w, MPI_COMM_WORLD, reqs(NWIN + w), ierr)
      end do
      call MPI_Waitall(2 * NWIN, reqs, stats, ierr)
      if (ierr /= MPI_SUCCESS) call fail(errs, 'waitall error')
      do w = 1, NWIN
        if (reqs(w) /= MPI_REQUEST_NULL .or. reqs(NWIN + w) /= MPI_REQUEST_NULL) call fail(errs, 'request not null')
        if (stats(w)%MPI_SOURCE /= peer) call fail(errs, 'window status source')
        if (stats(w)%MPI_TAG /= tid * 100 + w) call fail(errs, 'window status tag')
        do i = 1, N
          if (rbuf(i, w) /= val(peer, tid, round, w, i)) then
            call fail(errs, 'window payload')
            exit
          end if
        end do
      end do
    end do
  end subroutine windows

  ! Blocking ping-pong: even ranks send first; statuses and counts checked.
  subroutine blocking(tid, errs)
    integer, intent(in) :: tid
    integer, intent(inout) :: errs
    integer :: buf(N), round, k, cnt, ierr, tag
    type(MPI_Status) :: st
    tag = 5000 + tid
    do round = 1, ROUNDS
      k = 1 + mod(round + tid, N)
      if (mod(rank, 2) == 0) then
        buf(1:k) = val(rank, tid, round, 0, 0)
        if (mod(round, 2) == 0) then
          call MPI_Ssend(buf(1), k, MPI_INTEGER, peer, tag, MPI_COMM_WORLD, ierr)
        else
          call MPI_Send(buf(1), k, MPI_INTEGER, peer, tag, MPI_COMM_WORLD, ierr)
        end if
        call MPI_Recv(buf(1), N, MPI_INTEGER, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
        if (buf(k) /= val(peer, tid, round, 0, 0)) call fail(errs, 'blocking reply payload')
      else
        buf = -1
        call MPI_Recv(buf(1), N, MPI_INTEGER, peer, tag, MPI_COMM_WORLD, st, ierr)
        if (st%MPI_SOURCE /= peer .or. st%MPI_TAG /= tag) call fail(errs, 'blocking status')
        call MPI_Get_count(st, MPI_INTEGER, cnt, ierr)
        if (cnt /= k) call fail(errs, 'blocking MPI_Get_count')
        if (buf(1) /= val(peer, tid, round, 0, 0) .or. buf(k) /= buf(1)) call fail(errs, 'blocking payload')
        buf(1:k) = val(rank, tid, round, 0, 0)
        call MPI_Send(buf(1), k, MPI_INTEGER, peer, tag, MPI_COMM_WORLD, ierr)
      end if
    end do
  end subroutine blocking

  ! MPI_ANY_SOURCE / MPI_ANY_TAG on the thread's own communicator, found
  ! first by MPI_Probe; the status says who sent what.
  subroutine wildcard(tid, comm, errs)
    integer, intent(in) :: tid
    type(MPI_Comm), intent(in) :: comm
    integer, intent(inout) :: errs
    integer :: buf(N), round, cnt, ierr
    type(MPI_Status) :: st
    do round = 1, ROUNDS
      if (mod(rank, 2) == 0) then
        buf = val(rank, tid, round, 1, 1)
        call MPI_Send(buf(1), round, MPI_INTEGER, peer, 70 + round, comm, ierr)
      else
        call MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, st, ierr)
        if (st%MPI_SOURCE /= peer .or. st%MPI_TAG /= 70 + round) call fail(errs, 'probe status')
        buf = -1
        call MPI_Recv(buf(1), N, MPI_INTEGER, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, st, ierr)
        call MPI_Get_count(st, MPI_INTEGER, cnt, ierr)
        if (st%MPI_SOURCE /= peer .or. st%MPI_TAG /= 70 + round .or. cnt /= round) &
          call fail(errs, 'wildcard status')
        if (buf(round) /= val(peer, tid, round, 1, 1)) call fail(errs, 'wildcard payload')
      end if
    end do
  end subroutine wildcard

  ! Completion by polling: MPI_Test on one receive, MPI_Testany over two.
  subroutine testloops(tid, errs)
    integer, intent(in) :: tid
    integer, intent(inout) :: errs
    integer, asynchronous :: rbuf(N, 2), sbuf(N, 2)
    type(MPI_Request) :: rreq(2), sreq(2)
    type(MPI_Status) :: st
    integer :: round, idx, done, ierr, j
    logical :: flag
    do round = 1, ROUNDS
      do j = 1, 2
        sbuf(:, j) = val(rank, tid, round, j, 2)
        rbuf(:, j) = -1
      end do
      call MPI_Irecv(rbuf(1, 1), N, MPI_INTEGER, peer, 6000 + tid, MPI_COMM_WORLD, rreq(1), ierr)
      call MPI_Isend(sbuf(1, 1), N, MPI_INTEGER, peer, 6000 + tid, MPI_COMM_WORLD, sreq(1), ierr)
      flag = .false.
      do while (.not. flag)
        call MPI_Test(rreq(1), flag, st, ierr)
      end do
      if (rreq(1) /= MPI_REQUEST_NULL) call fail(errs, 'test left the request')
      if (st%MPI_SOURCE /= peer .or. st%MPI_TAG /= 6000 + tid) call fail(errs, 'test status')
      if (rbuf(N, 1) /= val(peer, tid, round, 1, 2)) call fail(errs, 'test payload')
      call MPI_Wait(sreq(1), MPI_STATUS_IGNORE)

      do j = 1, 2
        call MPI_Irecv(rbuf(1, j), N, MPI_INTEGER, peer, 6100 + 10 * tid + j, MPI_COMM_WORLD, rreq(j), ierr)
      end do
      do j = 2, 1, -1
        call MPI_Isend(sbuf(1, j), N, MPI_INTEGER, peer, 6100 + 10 * tid + j, MPI_COMM_WORLD, sreq(j), ierr)
      end do
      done = 0
      do while (done < 3)
        call MPI_Testany(2, rreq, idx, flag, st, ierr)
        if (.not. flag) cycle
        ! MPICH 4.0's Fortran MPI_TESTANY adds 1 to the C index even when it
        ! is MPI_UNDEFINED (all requests inactive); raw MPICH does it too.
        if (idx == MPI_UNDEFINED + 1 .and. idx /= 1) then
          if (tid == 0 .and. round == 1) print '(a)', &
            'KNOWN-DEVIATION host Fortran MPI_TESTANY returned MPI_UNDEFINED+1 for no active request'
          idx = MPI_UNDEFINED
        end if
        ! MPICH 4.0's mpi_f08 MPI_Testany returns the C (0-based) index of
        ! the completed request (raw; measured: 1 for the second of two).
        if ((idx == 0 .or. idx == 1) .and. st%MPI_TAG == 6100 + 10 * tid + idx + 1) then
          if (tid == 0 .and. round == 1) print '(a)', &
            'KNOWN-DEVIATION host mpi_f08 MPI_Testany returned a 0-based index'
          idx = idx + 1
        end if
        if (idx == MPI_UNDEFINED) then
          done = done + 1   ! all null: counted once, ends the loop
          if (done /= 3) call fail(errs, 'testany said all done too early')
          done = 3
        else
          if (idx < 1 .or. idx > 2) then
            call fail(errs, 'testany index')
            exit
          end if
          if (st%MPI_TAG /= 6100 + 10 * tid + idx) call fail(errs, 'testany status tag')
          if (rbuf(1, idx) /= val(peer, tid, round, idx, 2)) call fail(errs, 'testany payload')
          done = done + 1
        end if
      end do
      call MPI_Waitall(2, sreq, MPI_STATUSES_IGNORE)
    end do
  end subroutine testloops

  ! A collective per thread on its own communicator, with and without
  ! MPI_IN_PLACE (the host's Fortran sentinel).
  subroutine allreduce(tid, comm, errs)
    integer, intent(in) :: tid
    type(MPI_Comm), intent(in) :: comm
    integer, intent(inout) :: errs
    integer :: x(4), y(4), round, ierr, want
    do round = 1, ROUNDS
      x = rank + tid + round
      want = nproc * (nproc - 1) / 2 + nproc * (tid + round)
      call MPI_Allreduce(x(1), y(1), 4, MPI_INTEGER, MPI_SUM, comm, ierr)
      if (any(y /= want)) call fail(errs, 'allreduce result')
      call MPI_Allreduce(MPI_IN_PLACE, x(1), 4, MPI_INTEGER, MPI_MAX, comm, ierr)
      if (any(x /= nproc - 1 + tid + round)) call fail(errs, 'allreduce in place result')
    end do
  end subroutine allreduce

end program ft_threads_f08
