/* Nonblocking 1-D halo exchange with collectives: each iteration posts
 * MPI_Irecv from both neighbours, MPI_Isend of HALO doubles to both, computes
 * the interior, MPI_Waitall, then MPI_Allreduce of a residual; every 10th
 * iteration rank 0 broadcasts a parameter (MPI_Bcast).
 * Usage: halo [ITERS=1000] [WORK=60000] [HALO=512] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "work.h"
#include "parts.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long iters = ez_arg(argc, argv, 1, 1000), work = ez_arg(argc, argv, 2, 60000);
    int halo = (int)ez_arg(argc, argv, 3, 512);
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    double *out = calloc(2 * (size_t)halo, sizeof(double));
    double *in = calloc(2 * (size_t)halo, sizeof(double));
    double res = 0.0, param = 1.0;
    MPI_Request req[4];
    MPI_Status st[4];
    long per = ez_per_part(iters);
    ez_parts parts;
    ez_parts_start(&parts); /* the loop's start: both runs time from here */
    for (long it = 0; it < per * EZ_PARTS; it++) {
        MPI_Irecv(in, halo, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &req[0]);
        MPI_Irecv(in + halo, halo, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &req[1]);
        out[0] = res * 1e-6;
        MPI_Isend(out, halo, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &req[2]);
        MPI_Isend(out + halo, halo, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &req[3]);
        double local = ez_work(work, param + in[0]);
        MPI_Waitall(4, req, st);
        MPI_Allreduce(&local, &res, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (it % 10 == 0) {
            if (rank == 0)
                param = 1.0 + 1e-9 * (double)it;
            MPI_Bcast(&param, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        }
        if ((it + 1) % per == 0)
            ez_parts_mark(&parts); /* a part's end; the last: the loop's end */
    }
    ez_parts_print(&parts, rank);
    if (rank == 0)
        printf("halo res=%g\n", res);
    free(out);
    free(in);
    MPI_Finalize();
    return 0;
}
