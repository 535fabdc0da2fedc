! 2 ranks: a token ring in Fortran (mpif.h bindings), MPI_Isend/MPI_Irecv/MPI_Waitall,
! MPI_Allreduce, MPI_Bcast on a split communicator
program ringf
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, size, peer, i, tok, sub, req(2), st(MPI_STATUS_SIZE, 2)
  double precision :: x, s
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)
  peer = 1 - rank
  call MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, sub, ierr)
  tok = 0
  do i = 1, 5
    if (rank == 0) then
      call MPI_Send(tok, 1, MPI_INTEGER, peer, 7, MPI_COMM_WORLD, ierr)
      call MPI_Recv(tok, 1, MPI_INTEGER, peer, 7, MPI_COMM_WORLD, st, ierr)
    else
      call MPI_Recv(tok, 1, MPI_INTEGER, peer, 7, MPI_COMM_WORLD, st, ierr)
      tok = tok + 1
      call MPI_Send(tok, 1, MPI_INTEGER, peer, 7, MPI_COMM_WORLD, ierr)
    end if
    call MPI_Irecv(s, 1, MPI_DOUBLE_PRECISION, peer, 8, MPI_COMM_WORLD, req(1), ierr)
    x = rank
    call MPI_Isend(x, 1, MPI_DOUBLE_PRECISION, peer, 8, MPI_COMM_WORLD, req(2), ierr)
    call MPI_Waitall(2, req, st, ierr)
    call MPI_Allreduce(x, s, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    call MPI_Bcast(s, 1, MPI_DOUBLE_PRECISION, 0, sub, ierr)
  end do
  call MPI_Comm_free(sub, ierr)
  call MPI_Finalize(ierr)
  if (rank == 0) print *, 'ok', tok
end program ringf
