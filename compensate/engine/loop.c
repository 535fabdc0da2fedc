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
 */
#include <stdint.h>

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
} cmp_sched;

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

int64_t cmp_schedule(const cmp_loop *L, cmp_sched *S, int64_t budget)
{
    double *A = L->A;
    int64_t stop = S->evaluated + budget;
    while (S->sp > 0) {
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
        if (S->nout > 0)
            return CMP_OUT;
    }
    return CMP_DONE;
}
