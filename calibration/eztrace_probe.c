/* eztrace_probe: per-record cost of EZTrace's MPI module, one record mix at a time.
 *
 *   eztrace_probe VARIANT N
 *
 * Every rank repeats one MPI operation N times on MPI_COMM_SELF (no rank ever
 * waits for another, so the loop time is the calls' own cost plus, traced,
 * the records' cost) and rank 0 prints the slowest rank's loop time as the
 * last line of stdout ("loop_seconds 0.001234"), leaving EZTrace's start-up
 * and trace write-out out of the measurement. Variants and the records EZTrace
 * 2.0 writes per iteration (calibration/eztrace.py counts them in the trace):
 *
 *   wait     MPI_Wait on MPI_REQUEST_NULL          Enter, Leave
 *   recv     MPI_Isend + MPI_Recv + MPI_Wait, self 3 Enter, 3 Leave, MpiIsend, MpiRecv
 *   isend    MPI_Irecv + MPI_Isend + MPI_Waitall   3 Enter, 3 Leave, MpiIrecvRequest, MpiIsend
 *   barrier  MPI_Barrier(MPI_COMM_SELF)            Enter, Leave, MpiCollectiveBegin/End
 *
 * Run untraced (`mpirun -n 2 ./eztrace_probe wait 20000`) and traced
 * (`mpirun -n 2 eztrace -t mpich ./eztrace_probe wait 20000`).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void loop(const char *variant, long n)
{
    double out = 1.0, in = 0.0;
    MPI_Request req[2];
    MPI_Status st[2];
    for (long i = 0; i < n; i++) {
        if (strcmp(variant, "wait") == 0) {
            MPI_Request r = MPI_REQUEST_NULL;
            MPI_Wait(&r, &st[0]);
        } else if (strcmp(variant, "recv") == 0) {
            MPI_Isend(&out, 1, MPI_DOUBLE, 0, 7, MPI_COMM_SELF, &req[0]);
            MPI_Recv(&in, 1, MPI_DOUBLE, 0, 7, MPI_COMM_SELF, &st[0]);
            MPI_Wait(&req[0], &st[1]);
        } else if (strcmp(variant, "isend") == 0) {
            MPI_Irecv(&in, 1, MPI_DOUBLE, 0, 7, MPI_COMM_SELF, &req[0]);
            MPI_Isend(&out, 1, MPI_DOUBLE, 0, 7, MPI_COMM_SELF, &req[1]);
            MPI_Waitall(2, req, st);
        } else {
            MPI_Barrier(MPI_COMM_SELF);
        }
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc < 3) {
        fprintf(stderr, "usage: eztrace_probe wait|recv|isend|barrier N\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *variant = argv[1];
    long n = atol(argv[2]);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    loop(variant, n / 10 + 1); /* warm up: first-call costs, pages */
    double t0 = MPI_Wtime();
    loop(variant, n);
    double mine = MPI_Wtime() - t0, slowest = 0.0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("loop_seconds %.9f\n", slowest);
    MPI_Finalize();
    return 0;
}
