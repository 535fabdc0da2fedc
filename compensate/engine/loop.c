/* The engine's anchor loop in C for the inline point-to-point path (issue #18;
 * compensate/engine/native.py says why this boundary).
 *
 * An anchor of code FAST_P2P is an eager receive completing one message (R2, R2f
 * under the fitted bound); fast_value computes it from its send's anchor. It is
 * the C twin of receive_time in compensate/engine/receive.py (R2, written once in
 * Python for the engine's Python loop and its rule objects): the same double
 * operations in the same order, compiled with -ffp-contract=off and no
 * -ffast-math, so the values are the same bit for bit; `max(a, b)` is written as
 * the Python's `b if b > a else a` forms, which matter for equal operands. A
 * change to one is a change to the other. The case counters go to cnt: m.1 a1,
 * m.1 a2, m.2, clamped (fitted), receive_time's order.
 *
 * cmp_schedule runs the engine: the Python loop's stack of runnable locations,
 * parking and waking, and returns to Python at every other anchor (a generic
 * anchor: rule objects); in the distributed run also after a location's run in
 * which it computed anchors another rank asked for (`watched`: their values go
 * into the outbox, cmp_put, or without one are listed in `out`; Python sends
 * them) and when nothing is runnable (Python takes what other ranks
 * sent and wakes the locations parked on it). cmp_run_fast evaluates one location's inline
 * receives from k on for the distributed run, whose Python loop keeps the
 * scheduling (the exchange); it stops at an anchor of another code, one whose
 * send is not computed yet (NaN), or one marked in `watched` (a location waits
 * for it, or another rank asked for it: Python computes it and wakes them).
 *
 * With a wire (cmp_wire: the MPI library's own functions, which Python found in
 * the library mpi4py loaded, and MPICH's handles, which are C ints) cmp_schedule
 * also sends and takes the distributed run's messages itself: after a location's
 * run it sends each destination's new pairs (MPI_Isend) and takes whatever has
 * arrived (MPI_Iprobe, MPI_Recv), and before it answers "nothing runnable" it
 * looks once more; Python then only waits. The counts it keeps are the ones
 * Python's own sends and receives keep (the exchange's termination waves read
 * them).
 */
#define _POSIX_C_SOURCE 200809L
#include <sched.h>
#include <stdint.h>
#include <time.h>

#define FAST_P2P 1

typedef struct {
    double *A;                 /* anchor values, NaN = not computed */
    const int8_t *code;
    const int8_t *has_prev;
    const double *prev_s;
    const int64_t *s_anchor;
    const double *s_off;
    const int64_t *e_anchor;
    const double *e_off;
    const double *enter_c;
    const double *extra;
    const double *cs;
    const double *bound_c;
    const double *observed;
    const int8_t *overlapped;
    const double *fit;
    const uint8_t *watched;    /* cmp_run_fast: Python computes this anchor (waiters); */
                               /* cmp_schedule: another rank asked for it */
    int64_t *cnt;              /* a1, a2, m2, clamped, overridden */
    int64_t fitted;            /* the fitted bound (R2f) */
} cmp_loop;

/* The value of inline receive k whose send anchor is known (R2, R2f, eq. 7, not
 * before the previous record), the case counted in cnt (a1, a2, m2, clamped):
 * receive_time's operations. */
static inline double fast_value(const cmp_loop *L, int64_t k, double send_a, int64_t *cnt)
{
    const double *A = L->A;
    send_a += L->s_off[k];
    int64_t ek = L->e_anchor[k];
    double enter_a = ek >= 0 ? A[ek] + L->e_off[k] : L->enter_c[k];
    int hp = L->has_prev[k];
    double prev_a = 0.0, ready, recv_a, value, x;
    if (hp) {
        prev_a = A[k - 1] + L->prev_s[k];
        ready = prev_a + L->extra[k];
        ready = ready > enter_a ? ready : enter_a;
    } else {
        ready = enter_a;
    }
    if (L->overlapped[k]) {  /* m.1: the calls overlapped, transfer observed */
        x = send_a + L->observed[k];
        double y = ready + L->cs[k];
        if (y > x) {
            recv_a = y;
            cnt[1]++;
        } else {
            recv_a = x;
            if (x > y)
                cnt[0]++;
            else
                cnt[1]++;
        }
    } else if (L->fitted) {  /* m.2, R2f: the modelled transfer clamped */
        double comm_min = (ready - send_a) + L->cs[k];
        double b = L->bound_c[k];
        double lo = comm_min > b ? comm_min : b;
        double hi = L->observed[k];
        if (comm_min > hi)
            hi = comm_min;
        double fit = L->fit[k];
        double comm = lo > fit ? lo : fit;
        if (hi < comm)
            comm = hi;
        if (comm != fit) {
            cnt[3]++;
            if (fit < b || fit > hi)  /* the model itself overridden by a bound */
                cnt[4]++;
        }
        recv_a = send_a + comm;
        cnt[2]++;
    } else {  /* m.2: bounds only (eq. 8-10) */
        double comm = (ready - send_a) + L->cs[k];
        double b = L->bound_c[k];
        recv_a = send_a + (comm > b ? comm : b);
        cnt[2]++;
    }
    /* eq. 7: after the receive was entered, and after the send */
    value = recv_a;
    x = send_a + 1.0;
    if (x > value)
        value = x;
    x = enter_a + 1.0;
    if (x > value)
        value = x;
    if (hp && prev_a > value)
        value = prev_a;
    return value;
}

/* One location's inline receives from k on (the distributed run's loop: the
 * engine's Python loop calls this per location). Returns the first anchor not
 * evaluated (see the top of the file). */
int64_t cmp_run_fast(const cmp_loop *L, int64_t k, int64_t end)
{
    double *A = L->A;
    for (; k < end; k++) {
        if (L->code[k] != FAST_P2P || L->watched[k])
            break;
        double send_a = A[L->s_anchor[k]];
        if (send_a != send_a)  /* NaN: not computed yet */
            break;
        A[k] = fast_value(L, k, send_a, L->cnt);
    }
    return k;
}

/* The one-process run's scheduler: runnable locations on a stack (the Python
 * loop's), each run until an anchor it cannot evaluate. A location whose send is
 * not computed yet parks on that anchor: a list through wait_head[anchor] and
 * wait_next[location], walked (every waiter pushed) when the anchor is computed.
 * A generic anchor goes to Python once every anchor its rules need is known
 * (needs[need_lo[k]:need_hi[k]], in the rules' order); until then its location
 * parks on the first one that is not. */
typedef struct {
    int64_t *cur;              /* per location: next anchor to compute */
    const int64_t *a_end;      /* per location: one past its last anchor */
    int64_t *stack;            /* runnable locations (capacity: the locations) */
    int64_t *wait_head;        /* per anchor: first location parked on it, -1 */
    int64_t *wait_next;        /* per location: next location parked on the same */
    const int64_t *need_lo;    /* per anchor: its generic rules' needs, a range */
    const int64_t *need_hi;    /*   of needs (empty for other anchors) */
    const int64_t *needs;
    int64_t sp;                /* stack size */
    int64_t out_li;            /* CMP_GENERIC: the location whose anchor Python takes */
    int64_t evaluated;         /* anchors evaluated here */
    int64_t *out;              /* watched anchors computed here, for Python (capacity: */
    int64_t nout;              /*   the watched anchors); how many since Python took */
    /* the distributed run's outbox (NULL route_first: none, `out` lists the anchors):
     * the values other ranks asked for go straight into a buffer per destination
     * rank, as the (request id, value) pairs Python sends (cmp_put) */
    const int64_t *route_first;  /* per anchor: its first route, -1 if none */
    const int64_t *route_anchor; /* per route (grouped by anchor): the anchor, */
    const int64_t *route_rank;   /*   the rank that asked, */
    const double *route_ident;   /*   its request id, */
    const double *route_off;     /*   the offset added to the anchor's value */
    int64_t nroute;
    double *box;               /* each rank's region of pairs (capacity: its routes) */
    int64_t *box_n;            /* per rank: one past its last pair written, */
    int64_t *box_sent;         /*   and one past its last pair sent */
    int64_t *dirty;            /* ranks written to since Python last sent: dirty[0] */
                               /* of them, from dirty[1] on */
    struct cmp_wire *wire;     /* NULL: Python sends and takes the messages */
} cmp_sched;

/* MPICH's ABI: every handle a C int, a status five ints. */
typedef struct { int count_lo, count_hi, source, tag, error; } cmp_status;
typedef int (*cmp_isend_fn)(const void *, int, int, int, int, int, int *);
typedef int (*cmp_iprobe_fn)(int, int, int, int *, cmp_status *);
typedef int (*cmp_recv_fn)(void *, int, int, int, int, int, cmp_status *);
typedef int (*cmp_count_fn)(const cmp_status *, int, int *);

/* The message path of the distributed run (the top of the file). */
typedef struct cmp_wire {
    cmp_isend_fn isend;
    cmp_iprobe_fn iprobe;
    cmp_recv_fn recv;
    cmp_count_fn get_count;
    int64_t comm, int64, tag, any_source;  /* the handles and constants */
    const int64_t *wanted;     /* request id -> the ghost anchor it fills */
    int64_t nwanted;
    int64_t *sent_to;          /* per rank: messages sent to it, */
    int64_t *taken_from;       /*   and taken from it */
    int64_t *tally;            /* values sent, values taken (here and by Python), */
                               /* messages sent, messages taken, send requests used, */
                               /* error (MPI's code, or -1), waits, their nanoseconds */
    int32_t *requests;         /* the sends' requests (capacity: the routes) */
    int64_t nrequests;
    double *inbox;             /* one message's pairs (capacity: every value asked) */
    int64_t ninbox;
    int64_t spin_ns;           /* how long a rank with nothing runnable waits here for */
                               /* a value still due before it answers CMP_DONE */
} cmp_wire;

#define CMP_TALLY_ERROR 5

#define CMP_DONE 0     /* nothing runnable */
#define CMP_GENERIC 1  /* anchor cur[out_li] is not an inline receive: Python's; */
                       /* out_li is off the stack until Python pushes it again */
#define CMP_BUDGET 2   /* `budget` anchors evaluated (a progress report is due) */
#define CMP_OUT 3      /* a location's run computed watched anchors: out[:nout] */
                       /* (with an outbox: their pairs are in it, nout counts them) */

/* Anchor k (its value in A) was computed: its (request id, value + offset) pair
 * into the box region of each rank that asked for it (a rank newly written to is
 * listed in dirty). */
void cmp_put(const double *A, cmp_sched *S, int64_t k)
{
    for (int64_t j = S->route_first[k]; j >= 0 && j < S->nroute && S->route_anchor[j] == k;
         j++) {
        int64_t r = S->route_rank[j];
        if (S->box_n[r] == S->box_sent[r])
            S->dirty[++S->dirty[0]] = r;
        S->box[S->box_n[r]++] = S->route_ident[j];
        S->box[S->box_n[r]++] = A[k] + S->route_off[j];
    }
}

/* Send each destination's pairs written since the last send, one message each
 * (their region of the outbox is never written again: the send reads it in
 * place). 0, or -1 on an error (kept in the tally). */
static int wire_send(cmp_sched *S)
{
    cmp_wire *W = S->wire;
    int64_t *dirty = S->dirty;
    for (int64_t i = 1; i <= dirty[0]; i++) {
        int64_t r = dirty[i], lo = S->box_sent[r], hi = S->box_n[r];
        if (W->tally[4] >= W->nrequests) {
            W->tally[CMP_TALLY_ERROR] = -1;
            return -1;
        }
        int err = W->isend(S->box + lo, (int)(hi - lo), (int)W->int64, (int)r, (int)W->tag,
                           (int)W->comm, W->requests + W->tally[4]);
        if (err) {
            W->tally[CMP_TALLY_ERROR] = err;
            return -1;
        }
        W->tally[4]++;
        S->box_sent[r] = hi;
        W->sent_to[r]++;
        W->tally[0] += (hi - lo) / 2;
        W->tally[2]++;
    }
    dirty[0] = 0;
    return 0;
}

/* Take every message that has arrived: each (request id, value) pair into its
 * ghost anchor, whose parked locations go on the stack. The values taken, or -1
 * on an error (kept in the tally: an MPI error, or a message this rank did not
 * ask for). */
static int64_t wire_take(const cmp_loop *L, cmp_sched *S)
{
    cmp_wire *W = S->wire;
    double *A = L->A;
    int64_t got = 0;
    for (;;) {
        int flag = 0, n = 0;
        cmp_status st;
        int err = W->iprobe((int)W->any_source, (int)W->tag, (int)W->comm, &flag, &st);
        if (!err && flag)
            err = W->get_count(&st, (int)W->int64, &n);
        if (err) {
            W->tally[CMP_TALLY_ERROR] = err;
            return -1;
        }
        if (!flag)
            return got;
        if (n < 0 || n > W->ninbox || n % 2) {
            W->tally[CMP_TALLY_ERROR] = -1;
            return -1;
        }
        err = W->recv(W->inbox, n, (int)W->int64, st.source, (int)W->tag, (int)W->comm, &st);
        if (err) {
            W->tally[CMP_TALLY_ERROR] = err;
            return -1;
        }
        W->taken_from[st.source]++;
        W->tally[3]++;
        for (int i = 0; i < n; i += 2) {
            double id = W->inbox[i];
            if (!(id >= 0 && id < (double)W->nwanted)) {
                W->tally[CMP_TALLY_ERROR] = -1;
                return -1;
            }
            int64_t k = W->wanted[(int64_t)id];
            A[k] = W->inbox[i + 1];
            for (int64_t w = S->wait_head[k]; w >= 0; w = S->wait_next[w])
                S->stack[S->sp++] = w;
            S->wait_head[k] = -1;
        }
        W->tally[1] += n / 2;
        got += n / 2;
    }
}

static int64_t elapsed_ns(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)(t.tv_sec - t0->tv_sec) * 1000000000 + (t.tv_nsec - t0->tv_nsec);
}

/* Nothing is runnable: take what has arrived; if nothing has and a value is still
 * due, wait for one up to spin_ns, yielding the core between looks (counted as a
 * wait). The values taken, 0 if none, -1 on an error. */
static int64_t wire_wait(const cmp_loop *L, cmp_sched *S)
{
    cmp_wire *W = S->wire;
    int64_t got = wire_take(L, S);
    if (got != 0 || W->tally[1] >= W->nwanted || W->spin_ns <= 0)
        return got;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int64_t ns;
    do {
        sched_yield();
        got = wire_take(L, S);
        ns = elapsed_ns(&t0);
    } while (got == 0 && ns < W->spin_ns);
    W->tally[6]++;
    W->tally[7] += ns;
    return got;
}

/* A location's run computed values other ranks asked for: send them, take what
 * arrived. 0, or -1 on an error. */
static int wire_exchange(const cmp_loop *L, cmp_sched *S)
{
    S->nout = 0;
    if (wire_send(S) < 0 || wire_take(L, S) < 0)
        return -1;
    return 0;
}

int64_t cmp_schedule(const cmp_loop *L, cmp_sched *S, int64_t budget)
{
    double *A = L->A;
    int64_t stop = S->evaluated + budget;
    for (;;) {
        if (S->sp == 0) {  /* nothing runnable: with a wire, what has arrived */
            if (S->wire == 0 || wire_wait(L, S) <= 0)
                return CMP_DONE;  /* (an error: the exchange reads it in the tally) */
            continue;
        }
        if (S->evaluated >= stop)
            return CMP_BUDGET;
        int64_t li = S->stack[--S->sp];
        int64_t k = S->cur[li], end = S->a_end[li];
        for (; k < end; k++) {
            int64_t wait = -1;  /* the anchor this one waits for, if any */
            double send_a = 0.0;
            if (L->code[k] != FAST_P2P) {
                for (int64_t j = S->need_lo[k]; j < S->need_hi[k]; j++) {
                    double v = A[S->needs[j]];
                    if (v != v) {  /* NaN: not computed yet */
                        wait = S->needs[j];
                        break;
                    }
                }
                if (wait < 0) {  /* everything known: Python evaluates the rules */
                    S->evaluated += k - S->cur[li];
                    S->cur[li] = k;
                    S->out_li = li;
                    if (S->nout > 0 && S->wire != 0 && wire_exchange(L, S) < 0)
                        return CMP_DONE;
                    return CMP_GENERIC;
                }
            } else {
                int64_t sk = L->s_anchor[k];
                send_a = A[sk];
                if (send_a != send_a)
                    wait = sk;
            }
            if (wait >= 0) {  /* park on that anchor */
                S->wait_next[li] = S->wait_head[wait];
                S->wait_head[wait] = li;
                break;
            }
            A[k] = fast_value(L, k, send_a, L->cnt);
            if (L->watched[k]) {
                if (S->route_first != 0)
                    cmp_put(A, S, k);
                else
                    S->out[S->nout] = k;
                S->nout++;
            }
            for (int64_t w = S->wait_head[k]; w >= 0; w = S->wait_next[w])
                S->stack[S->sp++] = w;
            S->wait_head[k] = -1;
        }
        S->evaluated += k - S->cur[li];
        S->cur[li] = k;
        if (S->nout > 0) {
            if (S->wire == 0)
                return CMP_OUT;
            if (wire_exchange(L, S) < 0)
                return CMP_DONE;
        }
    }
}
