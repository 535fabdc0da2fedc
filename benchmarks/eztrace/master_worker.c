/* Master/worker: rank 0 hands out TASKS tasks (an int each) to the workers,
 * receives each result with MPI_ANY_SOURCE and hands the next task to the
 * worker that answered; a task of -1 stops a worker. Rank 0 also computes a
 * share of its own between receives. Every task costs the same WORK steps,
 * so the amount of communication is fixed (TASKS sends each way).
 * Usage: master_worker [TASKS=1500] [WORK=60000] */
#include <mpi.h>
#include <stdio.h>
#include "work.h"
#include "parts.h"

static double master(int size, long tasks, long work)
{
    long sent = 0, done = 0;
    double sum = 0.0, r;
    MPI_Status st;
    for (int w = 1; w < size; w++) {
        int t = sent < tasks ? (int)sent++ : -1;
        MPI_Send(&t, 1, MPI_INT, w, 0, MPI_COMM_WORLD);
    }
    while (done < sent) {
        MPI_Recv(&r, 1, MPI_DOUBLE, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, &st);
        done++;
        sum += r;
        int t = sent < tasks ? (int)sent++ : -1;
        MPI_Send(&t, 1, MPI_INT, st.MPI_SOURCE, 0, MPI_COMM_WORLD);
        sum += ez_work(work / 4, r);
    }
    return sum;
}

static void worker(long work)
{
    int t;
    for (;;) {
        MPI_Recv(&t, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (t < 0)
            break;
        double r = ez_work(work, (double)t);
        MPI_Send(&r, 1, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long tasks = ez_arg(argc, argv, 1, 1500), work = ez_arg(argc, argv, 2, 60000);
    long per = ez_per_part(tasks);
    double sum = 0.0;
    ez_parts parts;
    ez_parts_start(&parts); /* the loop's start: both runs time from here */
    for (int p = 0; p < EZ_PARTS; p++) { /* the tasks in EZ_PARTS rounds */
        if (rank == 0)
            sum += master(size, per, work);
        else
            worker(work);
        ez_parts_mark(&parts); /* a part's end; the last: the loop's end */
    }
    ez_parts_print(&parts, rank);
    if (rank == 0)
        printf("master_worker tasks=%ld sum=%g\n", per * EZ_PARTS, sum);
    MPI_Finalize();
    return 0;
}
