/* The loop of an EZTrace real-run MPI program, timed in EZ_PARTS equal parts,
 * each ended by an MPI_Barrier (so that the traced run shows the same
 * boundaries: rank 0's MPI_Barrier Leave records). The program prints the
 * whole loop ("loop_seconds") and EZ_PARTS times its median part
 * ("part_seconds"): on a machine shared with other work, a part in which a
 * process lost its core does not count. */
#ifndef EZ_PARTS_H
#define EZ_PARTS_H
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define EZ_PARTS 21

typedef struct {
    double start, last, t[EZ_PARTS];
    int n;
} ez_parts;

/* The loop's start: a barrier, then the time. */
static void ez_parts_start(ez_parts *p)
{
    MPI_Barrier(MPI_COMM_WORLD);
    p->start = p->last = MPI_Wtime();
    p->n = 0;
}

/* A part's end (the last one: the loop's end): a barrier, then the time. */
static void ez_parts_mark(ez_parts *p)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double now = MPI_Wtime();
    if (p->n < EZ_PARTS)
        p->t[p->n++] = now - p->last;
    p->last = now;
}

/* Iterations per part of a loop asked for ITERS (at least 1). */
static long ez_per_part(long iters)
{
    return iters / EZ_PARTS > 0 ? iters / EZ_PARTS : 1;
}

static int ez_by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Rank 0 prints the whole loop and EZ_PARTS times its median part. */
static void ez_parts_print(ez_parts *p, int rank)
{
    if (rank != 0 || p->n == 0)
        return;
    double t[EZ_PARTS];
    for (int i = 0; i < p->n; i++)
        t[i] = p->t[i];
    qsort(t, (size_t)p->n, sizeof t[0], ez_by_value);
    printf("loop_seconds %.9f\n", p->last - p->start);
    printf("part_seconds %.9f\n", t[p->n / 2] * EZ_PARTS);
}
#endif
