/* 2-rank nonblocking exchange (Isend/Irecv/Waitall, 10 steps, one Wait/Test
   pair) with an Allreduce per step and a Bcast and Reduce at the end. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int peer = (rank + 1) % size;
    double out[16], in[16], local = rank, global = 0;
    for (int step = 0; step < 10; step++) {
        MPI_Request req[2];
        for (int k = 0; k < 16; k++)
            out[k] = rank * 100 + step + k;
        MPI_Irecv(in, 16, MPI_DOUBLE, peer, step, MPI_COMM_WORLD, &req[0]);
        MPI_Isend(out, 16, MPI_DOUBLE, peer, step, MPI_COMM_WORLD, &req[1]);
        if (step == 0) {
            int done = 0;
            MPI_Test(&req[0], &done, MPI_STATUS_IGNORE);
            if (!done)
                MPI_Wait(&req[0], MPI_STATUS_IGNORE);
            MPI_Wait(&req[1], MPI_STATUS_IGNORE);
        } else {
            MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
        }
        local += in[0];
        MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Bcast(&global, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Reduce(&local, &global, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("global=%g\n", global);
    MPI_Finalize();
    return 0;
}
