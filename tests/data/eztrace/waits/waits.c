/* 2 ranks: completion loops and calls the bundled EZTrace archives lack.
 * MPI_Irecv from MPI_ANY_SOURCE/ANY_TAG completed by MPI_Waitany, MPI_Testsome
 * and MPI_Testany polling loops, MPI_Issend + MPI_Test loop, MPI_Mprobe/MPI_Mrecv,
 * MPI_Improbe/MPI_Imrecv, a vector datatype sent and received as contiguous
 * doubles, MPI_Ibarrier and MPI_Iallgather completed by MPI_Wait,
 * MPI_Allgatherv and MPI_Alltoallv on an MPI_Comm_split sub-communicator. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#define N 4
int main(int argc, char **argv) {
    int rank, size, it, i, flag, idx, outcount, indices[N];
    double buf[N][8], a[64], b[64];
    MPI_Request req[N];
    MPI_Status st[N];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int peer = 1 - rank;
    MPI_Datatype vec;
    MPI_Type_vector(8, 1, 2, MPI_DOUBLE, &vec);
    MPI_Type_commit(&vec);
    MPI_Comm sub;
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &sub);
    for (i = 0; i < 64; i++) a[i] = rank + i;
    for (it = 0; it < 3; it++) {
        /* Waitany over ANY_SOURCE receives */
        for (i = 0; i < N; i++)
            MPI_Irecv(buf[i], 8, MPI_DOUBLE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &req[i]);
        for (i = 0; i < N; i++)
            MPI_Send(a + i, 8, MPI_DOUBLE, peer, 10 + i, MPI_COMM_WORLD);
        for (i = 0; i < N; i++)
            MPI_Waitany(N, req, &idx, &st[0]);
        /* Testsome polling */
        for (i = 0; i < N; i++)
            MPI_Irecv(buf[i], 8, MPI_DOUBLE, peer, 20 + i, MPI_COMM_WORLD, &req[i]);
        for (i = 0; i < N; i++)
            MPI_Send(a + i, 8, MPI_DOUBLE, peer, 20 + i, MPI_COMM_WORLD);
        int done = 0;
        while (done < N) {
            MPI_Testsome(N, req, &outcount, indices, st);
            if (outcount != MPI_UNDEFINED) done += outcount;
        }
        /* Testany polling */
        for (i = 0; i < N; i++)
            MPI_Irecv(buf[i], 8, MPI_DOUBLE, peer, 30 + i, MPI_COMM_WORLD, &req[i]);
        for (i = 0; i < N; i++)
            MPI_Send(a + i, 8, MPI_DOUBLE, peer, 30 + i, MPI_COMM_WORLD);
        done = 0;
        while (done < N) {
            MPI_Testany(N, req, &idx, &flag, &st[0]);
            if (flag && idx != MPI_UNDEFINED) done++;
        }
        /* Issend + Test loop against a blocking receive */
        MPI_Request sreq;
        if (rank == 0) {
            MPI_Issend(a, 16, MPI_DOUBLE, 1, 40, MPI_COMM_WORLD, &sreq);
            flag = 0;
            while (!flag) MPI_Test(&sreq, &flag, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(b, 16, MPI_DOUBLE, 0, 40, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        /* matched probe */
        MPI_Message msg;
        if (rank == 1) {
            MPI_Send(a, 5, MPI_DOUBLE, 0, 50, MPI_COMM_WORLD);
            MPI_Send(a, 6, MPI_DOUBLE, 0, 51, MPI_COMM_WORLD);
        } else {
            int count;
            MPI_Mprobe(1, 50, MPI_COMM_WORLD, &msg, &st[0]);
            MPI_Get_count(&st[0], MPI_DOUBLE, &count);
            MPI_Mrecv(b, count, MPI_DOUBLE, &msg, MPI_STATUS_IGNORE);
            flag = 0;
            while (!flag) MPI_Improbe(1, 51, MPI_COMM_WORLD, &flag, &msg, &st[0]);
            MPI_Request r;
            MPI_Imrecv(b, 6, MPI_DOUBLE, &msg, &r);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        }
        /* derived datatype: strided send, contiguous receive */
        if (rank == 0) MPI_Send(a, 1, vec, 1, 60, MPI_COMM_WORLD);
        else MPI_Recv(b, 8, MPI_DOUBLE, 0, 60, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        /* nonblocking collectives */
        MPI_Request cr;
        MPI_Ibarrier(MPI_COMM_WORLD, &cr);
        MPI_Wait(&cr, MPI_STATUS_IGNORE);
        MPI_Iallgather(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, MPI_COMM_WORLD, &cr);
        MPI_Wait(&cr, MPI_STATUS_IGNORE);
        /* v-collectives on the sub-communicator */
        int counts[2] = {1 + rank, 2 - rank}, displs[2] = {0, 8};
        int rc[2], rd[2] = {0, 8};
        for (i = 0; i < 2; i++) rc[i] = 1 + i;
        int srank; MPI_Comm_rank(sub, &srank);
        MPI_Allgatherv(a, 1 + srank, MPI_DOUBLE, b, rc, rd, MPI_DOUBLE, sub);
        int sc[2] = {2 + srank, 3 + srank}, sd[2] = {0, 8}, rcv[2] = {2 + srank, 3 + srank}, rdv[2] = {0, 8};
        (void)counts; (void)displs;
        MPI_Alltoallv(a, sc, sd, MPI_DOUBLE, b, rcv, rdv, MPI_DOUBLE, sub);
    }
    MPI_Type_free(&vec);
    MPI_Comm_free(&sub);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    if (rank == 0) printf("ok\n");
    return 0;
}
