/* EZTrace's statuses in MPI_Waitany and MPI_Testsome with statuses passed: a
 * persistent ring exchange (MPI_Send_init/MPI_Recv_init, MPI_Startall) completed
 * by two MPI_Waitany, an MPI_Irecv and MPI_Isend completed by an MPI_Testsome
 * loop, an MPI_Allreduce; 3 rounds */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int rank, size, idx, outc, ind[2], done;
    MPI_Status st, sts[2];
    double s[64], r[64], x;
    MPI_Request pr[2], q[2];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    x = rank;
    MPI_Send_init(s, 64, MPI_DOUBLE, right, 7, MPI_COMM_WORLD, &pr[0]);
    MPI_Recv_init(r, 64, MPI_DOUBLE, left, 7, MPI_COMM_WORLD, &pr[1]);
    for (int it = 0; it < 3; it++) {
        for (int i = 0; i < 64; i++) s[i] = x + i;
        MPI_Startall(2, pr);
        MPI_Waitany(2, pr, &idx, &st);
        MPI_Waitany(2, pr, &idx, &st);
        MPI_Irecv(r, 8, MPI_DOUBLE, left, 9, MPI_COMM_WORLD, &q[0]);
        MPI_Isend(s, 8, MPI_DOUBLE, right, 9, MPI_COMM_WORLD, &q[1]);
        done = 0;
        while (done < 2) {
            MPI_Testsome(2, q, &outc, ind, sts);
            if (outc == MPI_UNDEFINED) break;
            done += outc;
            if (done < 2) usleep(200);
        }
        MPI_Allreduce(&r[3], &x, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Request_free(&pr[0]);
    MPI_Request_free(&pr[1]);
    if (rank == 0) printf("%g\n", x);
    MPI_Finalize();
    return 0;
}
