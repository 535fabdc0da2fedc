/* The .trace reader's C fast path (issue #18): compensate/formats/text/fastread.py.
 *
 * cmp_text_parse parses record lines of a block (whole lines, '\n'-terminated,
 * as Python's text-mode file gives them) into rows of the model's columns, and
 * stops at the first line it does not fully understand and validate: a quote,
 * a byte that is not printable ASCII, a kind not in its table, a field it does
 * not know, a value that is not a plain decimal integer in range, an undefined
 * region/comm, a rank outside its comm, a time before the location's last one,
 * ... Python then parses that line (and reports its error, word for word), and
 * calls again after it. So every line C accepts is one the Python path accepts
 * with the same values; C never reports an error itself.
 *
 * tab (int64) layout:
 *   [0] nloc [1] nreg [2] ncomm [3] nkind [4] nop
 *   loc ids (sorted as uint64), loc state (1 selected, 2 another reader's),
 *   region ids (sorted), comm ids (sorted), comm sizes,
 *   per kind (sorted by name): name_off, name_len, code, nfields, first_field,
 *   per field: key_off, key_len, column, type, lo, hi, dflt, required
 *   per op (upper-case names): name_off, name_len, value
 * strings: the names, referenced by offset.
 */
#include <stdint.h>
#include <string.h>

enum { T_INT = 0, T_COMM = 1, T_RANK = 2, T_ROOT = 3, T_REGION = 4, T_OP = 5, T_STOP = 6 };
enum { NCOL = 10, C_TIME = 0, C_KIND = 1, C_PEER = 3, C_COMM = 4 };
#define MAXF 8
#define KSTRIDE 5
#define FSTRIDE 8

static int is_ws(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r';
}

/* a plain decimal integer (optional '-', ASCII digits) fitting int64 */
static int parse_int(const char *s, int64_t n, int64_t *out) {
    int neg = 0;
    int64_t i = 0;
    if (n > 0 && s[0] == '-') { neg = 1; i = 1; }
    if (i >= n || n - i > 19) return 0;
    uint64_t v = 0;
    for (; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < '0' || c > '9') return 0;
        v = v * 10 + (uint64_t)(c - '0');
    }
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1) return 0;
        *out = (int64_t)(0 - v);
    } else {
        if (v > (uint64_t)INT64_MAX) return 0;
        *out = (int64_t)v;
    }
    return 1;
}

/* ASCII digits only, as uint64 (location ids); canonical: no leading zero */
static int parse_u64(const char *s, int64_t n, uint64_t *out, int *canonical) {
    if (n <= 0 || n > 20) return 0;
    uint64_t v = 0;
    for (int64_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < '0' || c > '9') return 0;
        uint64_t d = (uint64_t)(c - '0');
        if (v > (UINT64_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    *out = v;
    *canonical = (n == 1 || s[0] != '0');
    return 1;
}

static int64_t find_u64(const int64_t *ids, int64_t n, uint64_t v) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        uint64_t m = (uint64_t)ids[mid];
        if (m == v) return mid;
        if (m < v) lo = mid + 1; else hi = mid;
    }
    return -1;
}

static int64_t find_i64(const int64_t *ids, int64_t n, int64_t v) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (ids[mid] == v) return mid;
        if (ids[mid] < v) lo = mid + 1; else hi = mid;
    }
    return -1;
}

static int64_t find_kind(const int64_t *kinds, int64_t nkind, const char *strs,
                         const char *s, int64_t n) {
    int64_t lo = 0, hi = nkind;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        const int64_t *k = kinds + mid * KSTRIDE;
        int64_t kl = k[1];
        int c = memcmp(strs + k[0], s, (size_t)(kl < n ? kl : n));
        if (c == 0) c = (kl > n) - (kl < n);
        if (c == 0) return mid;
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return -1;
}

/* Python's str.upper() == name, for ASCII text */
static int64_t find_op(const int64_t *ops, int64_t nop, const char *strs,
                       const char *s, int64_t n) {
    for (int64_t j = 0; j < nop; j++) {
        const int64_t *o = ops + j * 3;
        if (o[1] != n) continue;
        const char *name = strs + o[0];
        int64_t i = 0;
        for (; i < n; i++) {
            char c = s[i];
            if (c >= 'a' && c <= 'z') c = (char)(c - 'a' + 'A');
            if (c != name[i]) break;
        }
        if (i == n) return o[2];
    }
    return INT64_MIN;
}

static int header_word(const char *s, int64_t n) {
    static const char *words[] = {"timer_resolution", "location", "region", "comm",
                                  "window", "events"};
    for (int i = 0; i < 6; i++)
        if ((int64_t)strlen(words[i]) == n && memcmp(words[i], s, (size_t)n) == 0) return 1;
    return 0;
}

/* res: [0] records written, [1] lines consumed, [2] of which skipped (blank,
 * comment, another reader's location), [3] byte offset where it stopped,
 * [4] 1 if it stopped at a line it does not handle (else: end of the block) */
int64_t cmp_text_parse(const char *buf, int64_t len, int64_t pos, const int64_t *tab,
                       const char *strs, int64_t *last, int64_t *count, int64_t *out_loc,
                       int64_t *out_rows, int64_t cap, int64_t *res) {
    int64_t nloc = tab[0], nreg = tab[1], ncomm = tab[2], nkind = tab[3], nop = tab[4];
    const int64_t *loc_ids = tab + 5;
    const int64_t *loc_state = loc_ids + nloc;
    const int64_t *reg_ids = loc_state + nloc;
    const int64_t *comm_ids = reg_ids + nreg;
    const int64_t *comm_size = comm_ids + ncomm;
    const int64_t *kinds = comm_size + ncomm;
    const int64_t *fields = kinds + nkind * KSTRIDE;
    int64_t nfields_all = 0;
    for (int64_t k = 0; k < nkind; k++) nfields_all += kinds[k * KSTRIDE + 3];
    const int64_t *ops = fields + nfields_all * FSTRIDE;

    int64_t written = 0, lines = 0, skipped = 0, stopped = 0;
    const char *tok[64];
    int64_t tlen[64];
    while (pos < len) {
        if (written >= cap) break;
        const char *line = buf + pos;
        const char *nl = memchr(line, '\n', (size_t)(len - pos));
        int64_t n = nl ? (int64_t)(nl - line) : len - pos;
        int64_t next = pos + n + (nl ? 1 : 0);
        /* tokens, up to a comment; only printable ASCII and blanks */
        int ntok = 0, bad = 0;
        int64_t i = 0;
        while (i < n) {
            while (i < n && is_ws((unsigned char)line[i])) i++;
            if (i >= n || line[i] == '#') break;
            int64_t s = i;
            while (i < n && !is_ws((unsigned char)line[i])) {
                unsigned char c = (unsigned char)line[i];
                if (c <= 0x20 || c >= 0x7f || c == '"') { bad = 1; break; }
                i++;
            }
            if (bad || ntok == 64) { bad = 1; break; }
            tok[ntok] = line + s;
            tlen[ntok++] = i - s;
        }
        if (!bad && i < n) { /* a comment: the rest must still be plain text */
            for (; i < n; i++) {
                unsigned char c = (unsigned char)line[i];
                if (c == '"' || c >= 0x7f || (c < 0x20 && !is_ws(c))) { bad = 1; break; }
            }
        }
        if (bad) { stopped = 1; break; }
        if (ntok == 0) { skipped++; lines++; pos = next; continue; }
        if (ntok < 3) { stopped = 1; break; }
        uint64_t locv;
        int canon;
        if (!parse_u64(tok[1], tlen[1], &locv, &canon)) { stopped = 1; break; }
        int64_t li = find_u64(loc_ids, nloc, locv);
        if (li < 0) { stopped = 1; break; }
        if (loc_state[li] != 1) {
            int digits = 1;
            for (int64_t j = 0; j < tlen[0]; j++)
                if (tok[0][j] < '0' || tok[0][j] > '9') digits = 0;
            if (loc_state[li] == 2 && canon && (digits || !header_word(tok[0], tlen[0]))
                    && tlen[0] > 0) {
                skipped++; lines++; pos = next; continue;
            }
            stopped = 1; break;
        }
        int64_t t;
        if (!parse_int(tok[0], tlen[0], &t) || t < 0 || t < last[li]) { stopped = 1; break; }
        int64_t ki = find_kind(kinds, nkind, strs, tok[2], tlen[2]);
        if (ki < 0) { stopped = 1; break; }
        const int64_t *kd = kinds + ki * KSTRIDE;
        int64_t nf = kd[3];
        const int64_t *fs = fields + kd[4] * FSTRIDE;
        if (ntok - 3 > nf) { stopped = 1; break; }
        int64_t val[MAXF];
        int seen[MAXF] = {0};
        int64_t row[NCOL];
        for (int c = 0; c < NCOL; c++) row[c] = -1;
        int ok = 1;
        for (int j = 3; j < ntok && ok; j++) {
            const char *eq = memchr(tok[j], '=', (size_t)tlen[j]);
            if (!eq || eq == tok[j]) { ok = 0; break; }
            int64_t kl = eq - tok[j];
            const char *v = eq + 1;
            int64_t vl = tlen[j] - kl - 1;
            int64_t f = 0;
            for (; f < nf; f++)
                if (fs[f * FSTRIDE + 1] == kl && memcmp(strs + fs[f * FSTRIDE], tok[j], (size_t)kl) == 0)
                    break;
            if (f == nf || seen[f]) { ok = 0; break; }
            seen[f] = 1;
            const int64_t *fd = fs + f * FSTRIDE;
            int64_t x;
            switch (fd[3]) {
            case T_OP:
                x = find_op(ops, nop, strs, v, vl);
                if (x == INT64_MIN) {
                    int digits = vl > 0;
                    for (int64_t q = 0; q < vl; q++)
                        if (v[q] < '0' || v[q] > '9') digits = 0;
                    if (!digits || vl > 18 || !parse_int(v, vl, &x) || x > fd[5]) ok = 0;
                }
                break;
            case T_ROOT:
                if (vl == 1 && v[0] == '-') { x = -1; break; }
                /* fall through: a rank */
            default:
                if (!parse_int(v, vl, &x) || x < fd[4] || x > fd[5]) ok = 0;
            }
            val[f] = x;
        }
        if (!ok) { stopped = 1; break; }
        /* required fields, defaults, references */
        int64_t comm = -1;
        for (int64_t f = 0; f < nf; f++) {
            const int64_t *fd = fs + f * FSTRIDE;
            if (!seen[f]) {
                if (fd[7]) { ok = 0; break; }
                val[f] = fd[6];
            }
            if (fd[3] == T_COMM) {
                int64_t ci = find_i64(comm_ids, ncomm, val[f]);
                if (ci < 0) { ok = 0; break; }
                comm = ci;
            } else if (fd[3] == T_REGION) {
                if (find_i64(reg_ids, nreg, val[f]) < 0) { ok = 0; break; }
            } else if (fd[3] == T_STOP) {
                if (val[f] < t) { ok = 0; break; }
            }
        }
        if (!ok) { stopped = 1; break; }
        for (int64_t f = 0; f < nf; f++) {
            const int64_t *fd = fs + f * FSTRIDE;
            if ((fd[3] == T_RANK || (fd[3] == T_ROOT && val[f] != -1))
                    && (comm < 0 || val[f] >= comm_size[comm])) { ok = 0; break; }
            row[fd[2]] = val[f];
        }
        if (!ok) { stopped = 1; break; }
        row[C_TIME] = t;
        row[C_KIND] = kd[2];
        memcpy(out_rows + written * NCOL, row, sizeof row);
        out_loc[written++] = li;
        last[li] = t;
        count[li]++;
        lines++;
        pos = next;
    }
    res[0] = written;
    res[1] = lines;
    res[2] = skipped;
    res[3] = pos;
    res[4] = stopped;
    return written;
}

/* ---- writing: the record lines of write.py's _Formatter.records ---------- */

static char *put_int(char *o, int64_t v) {
    char tmp[24];
    int n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do { tmp[n++] = (char)('0' + u % 10); u /= 10; } while (u);
    if (v < 0) *o++ = '-';
    while (n) *o++ = tmp[--n];
    return o;
}

static char *put_right(char *o, int64_t v, int64_t width) {
    char tmp[24];
    char *e = put_int(tmp, v);
    int64_t n = e - tmp;
    for (int64_t i = n; i < width; i++) *o++ = ' ';
    memcpy(o, tmp, (size_t)n);
    return o + n;
}

/* cols: 11 int64 arrays (time, location, kind, region, peer, comm, tag, size,
 * size_recv, op, request) of n records in output order; wtab: [nkinds_total,
 * then per kind code: name_off, name_len, nfields (-1: Python formats it),
 * first_field], fields: key_off, key_len, column (model column), type;
 * ops: [nop, per op value 0..nop-1: name_off (or -1), name_len]. Records whose
 * kind C does not format take the next of Python's lines (py, py_off).
 * widths: time, location, kind. Returns the bytes written to out. */
int64_t cmp_text_format(int64_t n, const int64_t *const *cols, const int64_t *wtab,
                        const int64_t *fields, const int64_t *ops, const char *strs,
                        const char *py, const int64_t *py_off, const int64_t *widths,
                        char *out) {
    char *o = out;
    int64_t nk = wtab[0], nop = ops[0], k = 0;
    for (int64_t j = 0; j < n; j++) {
        int64_t kind = cols[2][j];
        const int64_t *kd = (kind >= 0 && kind < nk) ? wtab + 1 + kind * 4 : 0;
        if (!kd || kd[2] < 0) {
            int64_t a = py_off[k], b = py_off[k + 1];
            memcpy(o, py + a, (size_t)(b - a));
            o += b - a;
            k++;
            continue;
        }
        o = put_right(o, cols[0][j], widths[0]);
        *o++ = ' ';
        o = put_right(o, cols[1][j], widths[1]);
        *o++ = ' ';
        memcpy(o, strs + kd[0], (size_t)kd[1]);
        o += kd[1];
        if (kd[2] > 0) {
            for (int64_t i = kd[1]; i < widths[2]; i++) *o++ = ' ';
            const int64_t *fs = fields + kd[3] * 4;
            for (int64_t f = 0; f < kd[2]; f++) {
                const int64_t *fd = fs + f * 4;
                *o++ = ' ';
                memcpy(o, strs + fd[0], (size_t)fd[1]);
                o += fd[1];
                *o++ = '=';
                int64_t v = cols[3 + fd[2] - 2][j];
                if (fd[3] == T_ROOT && v < 0) {
                    *o++ = '-';
                } else if (fd[3] == T_OP && v >= 0 && v < nop && ops[1 + 2 * v] >= 0) {
                    memcpy(o, strs + ops[1 + 2 * v], (size_t)ops[2 + 2 * v]);
                    o += ops[2 + 2 * v];
                } else {
                    o = put_int(o, v);
                }
            }
        }
        *o++ = '\n';
    }
    return o - out;
}
