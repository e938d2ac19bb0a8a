! mpishim_f.h: MPI-4 partitioned communication (MPI 4.0, chapter 4) for
! Fortran programs that include mpif.h or use the mpi module on a host
! whose Fortran layer lacks it (Open MPI 4.1). libmpishim.so implements
! the calls on every host and exports these Fortran entry points where
! the host has none; the program links with -lmpishim (or preloads it).
! On an MPI-4 host (MPICH 4.0) use the host's own interface instead.
!
! Include it after mpif.h / `use mpi`, in the specification part:
!     include 'mpishim_f.h'
! The interfaces check the arguments: COUNT is INTEGER(KIND=MPI_COUNT_KIND)
! as in MPI 4.0, the rest default INTEGER (LOGICAL for FLAG), IERROR last
! and required. Written to be valid fixed-form and free-form source.
      interface
      subroutine MPI_Psend_init(buf, partitions, count, datatype,       &
     &  dest, tag, comm, info, request, ierror)
      import :: MPI_COUNT_KIND
!GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
      integer, dimension(*), intent(in) :: buf
      integer, intent(in) :: partitions, datatype, dest, tag, comm, info
      integer(kind=MPI_COUNT_KIND), intent(in) :: count
      integer, intent(out) :: request, ierror
      end subroutine MPI_Psend_init
      subroutine MPI_Precv_init(buf, partitions, count, datatype,       &
     &  source, tag, comm, info, request, ierror)
      import :: MPI_COUNT_KIND
!GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
      integer, dimension(*) :: buf
      integer, intent(in) :: partitions, datatype, source, tag, comm
      integer, intent(in) :: info
      integer(kind=MPI_COUNT_KIND), intent(in) :: count
      integer, intent(out) :: request, ierror
      end subroutine MPI_Precv_init
      subroutine MPI_Pready(partition, request, ierror)
      integer, intent(in) :: partition, request
      integer, intent(out) :: ierror
      end subroutine MPI_Pready
      subroutine MPI_Pready_range(partition_low, partition_high,        &
     &  request, ierror)
      integer, intent(in) :: partition_low, partition_high, request
      integer, intent(out) :: ierror
      end subroutine MPI_Pready_range
      subroutine MPI_Pready_list(length, array_of_partitions, request,  &
     &  ierror)
      integer, intent(in) :: length, array_of_partitions(*), request
      integer, intent(out) :: ierror
      end subroutine MPI_Pready_list
      subroutine MPI_Parrived(request, partition, flag, ierror)
      integer, intent(in) :: request, partition
      logical, intent(out) :: flag
      integer, intent(out) :: ierror
      end subroutine MPI_Parrived
      end interface
