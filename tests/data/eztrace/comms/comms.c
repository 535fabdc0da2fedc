/* MPI calls beyond the blocking and nonblocking point-to-point and blocking
 * collectives: a communicator with the ranks reversed (MPI_Comm_split), its
 * rooted collectives, MPI_Sendrecv, MPI_Ssend received after MPI_Iprobe,
 * MPI_Scan, MPI_Alltoallv, and the nonblocking collectives MPI_Ibcast and
 * MPI_Iallreduce completed by MPI_Wait. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm rev;
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - 1 - rank, &rev);
    double a[64], b[64];
    int counts[2] = {4, 4}, displs[2] = {0, 4};
    for (int i = 0; i < 64; i++)
        a[i] = rank + i;
    for (int it = 0; it < 3; it++) {
        int right = (rank + 1) % size, left = (rank + size - 1) % size;
        MPI_Sendrecv(a, 16, MPI_DOUBLE, right, 1, b, 16, MPI_DOUBLE, left, 1,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Bcast(a, 8, MPI_DOUBLE, 0, rev);      /* root: world rank size-1 */
        MPI_Reduce(a, b, 8, MPI_DOUBLE, MPI_SUM, 0, rev);
        MPI_Scan(a, b, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Alltoallv(a, counts, displs, MPI_DOUBLE, b, counts, displs, MPI_DOUBLE,
                      MPI_COMM_WORLD);
        MPI_Request r;
        MPI_Ibcast(a, 8, MPI_DOUBLE, 0, MPI_COMM_WORLD, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        MPI_Iallreduce(a, b, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        if (rank == 0) {
            MPI_Ssend(a, 8, MPI_DOUBLE, 1, 3, MPI_COMM_WORLD);
        } else if (rank == 1) {
            MPI_Status st;
            int flag = 0;
            while (!flag)
                MPI_Iprobe(MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &flag, &st);
            MPI_Recv(b, 8, MPI_DOUBLE, st.MPI_SOURCE, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Comm_free(&rev);
    if (rank == 0)
        printf("comms: %d ranks\n", size);
    MPI_Finalize();
    return 0;
}
