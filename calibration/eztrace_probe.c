/* eztrace_probe: per-record cost of EZTrace's MPI module, one record mix at a time.
 *
 *   eztrace_probe VARIANT N
 *
 * The first four variants repeat one MPI operation N times on MPI_COMM_SELF (no
 * rank ever waits for another, so the loop time is the calls' own cost plus,
 * traced, the records' cost). The last two make 2 ranks wait for each other
 * after WORK_STEPS of computation (about 1.5 us), as real programs do: their
 * traced loop is longer by what the tracer adds on the path a message or a
 * collective's synchronisation takes, which is what compensate must remove.
 * The loop runs in CHUNKS equal parts, each timed; a rank's loop time is CHUNKS
 * times its median part (a part in which the process lost its core, to another
 * process on a shared machine, does not count). Rank 0 prints the slowest rank's
 * as the last line of stdout ("loop_seconds 0.001234"), leaving EZTrace's
 * start-up and trace write-out out of the measurement. Variants and the records EZTrace 2.0 writes per iteration
 * and rank (calibration/eztrace.py counts them in the trace):
 *
 *   wait      MPI_Wait on MPI_REQUEST_NULL          Enter, Leave
 *   recv      MPI_Isend + MPI_Recv + MPI_Wait, self 3 Enter, 3 Leave, MpiIsend, MpiRecv
 *   isend     MPI_Irecv + MPI_Isend + MPI_Waitall   3 Enter, 3 Leave, MpiIrecvRequest, MpiIsend
 *   barrier   MPI_Barrier(MPI_COMM_SELF)            Enter, Leave, MpiCollectiveBegin/End
 *   pingpong  work, MPI_Send / MPI_Recv between     2 Enter, 2 Leave, MpiSend, MpiRecv
 *             ranks 0 and 1 (one round: 2 messages)
 *   allreduce work, MPI_Allreduce(MPI_COMM_WORLD)   Enter, Leave, MpiCollectiveBegin/End
 *   omp       an empty OpenMP parallel region       ThreadFork/Join, ThreadTeamBegin/End,
 *             (OMP_NUM_THREADS=1, eztrace -t        Enter, Leave ("OpenMP Parallel")
 *             "mpich openmp"; built with -fopenmp)
 *   ompmpi    the omp region, then MPI_Wait on      omp's records, then Enter, Leave
 *             MPI_REQUEST_NULL (the same modules)
 *
 * ompmpi exists for the gaps between records, not for its loop time: with wait and
 * omp it shows each of ThreadJoin and Leave followed both by an Enter and by a
 * ThreadFork, with nothing of the program's own between them, so that the part of
 * the fork's cost EZTrace spends before stamping it can be told from the cost of
 * the record before (calibration/eztrace.py, before_stamp).
 *
 * Run untraced (`mpirun -n 2 ./eztrace_probe wait 20000`) and traced
 * (`mpirun -n 2 eztrace -t mpich ./eztrace_probe wait 20000`).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORK_STEPS 1000
#define CHUNKS 21

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A fixed chain of dependent floating-point operations: the same time traced
 * and untraced, long enough that a rank's records after a message (its Leave,
 * the next Enter) are on the path of the next message. */
static double work(double x)
{
    for (long i = 0; i < WORK_STEPS; i++)
        x = x * 0.999999 + 1e-7 * (double)(i & 7);
    return x;
}

static void pingpong(long n, int rank)
{
    double tok = 0.0;
    for (long i = 0; i < n; i++) {
        if (rank == 0) {
            tok = work(tok);
            MPI_Send(&tok, 1, MPI_DOUBLE, 1, 3, MPI_COMM_WORLD);
            MPI_Recv(&tok, 1, MPI_DOUBLE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(&tok, 1, MPI_DOUBLE, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            tok = work(tok);
            MPI_Send(&tok, 1, MPI_DOUBLE, 0, 3, MPI_COMM_WORLD);
        }
    }
}

static void allreduce(long n)
{
    double x = 1.0, sum = 0.0;
    for (long i = 0; i < n; i++) {
        x = work(x + sum * 1e-12);
        MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
}

static void omp_regions(long n)
{
    static volatile int sink;
    for (long i = 0; i < n; i++) {
#pragma omp parallel
        sink = sink + 1;
    }
}

static void loop(const char *variant, long n, int rank)
{
    double out = 1.0, in = 0.0;
    MPI_Request req[2];
    MPI_Status st[2];
    if (strcmp(variant, "pingpong") == 0) {
        pingpong(n, rank);
        return;
    }
    if (strcmp(variant, "allreduce") == 0) {
        allreduce(n);
        return;
    }
    if (strcmp(variant, "omp") == 0) {
        omp_regions(n);
        return;
    }
    if (strcmp(variant, "ompmpi") == 0) {
        for (long i = 0; i < n; i++) {
            MPI_Request r = MPI_REQUEST_NULL;
            omp_regions(1);
            MPI_Wait(&r, &st[0]);
        }
        return;
    }
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
        fprintf(stderr, "usage: eztrace_probe wait|recv|isend|barrier|pingpong|allreduce|omp|ompmpi N\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *variant = argv[1];
    long n = atol(argv[2]);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (strcmp(variant, "pingpong") == 0 && size < 2) {
        fprintf(stderr, "eztrace_probe: pingpong needs 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    loop(variant, n / 10 + 1, rank); /* warm up: first-call costs, pages */
    MPI_Barrier(MPI_COMM_WORLD);
    double part[CHUNKS];
    for (int c = 0; c < CHUNKS; c++) {
        double t0 = MPI_Wtime();
        loop(variant, n / CHUNKS, rank);
        part[c] = MPI_Wtime() - t0;
    }
    qsort(part, CHUNKS, sizeof part[0], by_value);
    double mine = part[CHUNKS / 2] * CHUNKS, slowest = 0.0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("loop_seconds %.9f\n", slowest);
    MPI_Finalize();
    return 0;
}
