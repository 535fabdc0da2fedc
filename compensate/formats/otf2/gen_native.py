"""Generate ``native.c``, the C half of :mod:`compensate.formats.otf2.native`.

Run ``python -m compensate.formats.otf2.gen_native`` after changing this file,
the column mapping (:data:`compensate.formats.otf2.columns.FIELDS`) or the
``otf2`` package; the generated file is committed, so no machine needs the
``otf2`` sources or headers to build it (the OTF2 headers are not installed:
every prototype is declared from the ``_otf2`` package's ctypes declarations).

What is generated, for each of the OTF2 event kinds the ``_otf2`` package
declares (84 in OTF2 3.x):

* a global-event-reader callback that appends the record's location, time and
  kind code to flat arrays and, for the kinds the engine interprets, the column
  values, converted exactly as :data:`~compensate.formats.otf2.columns.FIELDS`
  converts them, the arguments of the kinds that keep a field dict, and the
  attribute list of the kinds Python asks for (``ParameterUnsignedInt``: the
  partitioned records, :mod:`compensate.formats.otf2.nativerecords`)
  (pass 1: reading);
* a local-event-reader callback that hands the record, with the same arguments
  and attribute list, to ``OTF2_EvtWriter_<Kind>`` with the timestamp taken
  from the compensated time column by position (pass 2: writing; BufferFlush's
  stop time from the ``size`` column, as the Python writer does); the record's
  kind is checked against the column's through an origin table (model kind ->
  the OTF2 kind it is read from: a partitioned kind from ``ParameterUnsignedInt``).

Opening an archive (``cmp_open``) checks the return code of every OTF2 call
(the local definition files' included: a truncated one would lose the
location's mapping tables) and says what failed and for which location
(:mod:`compensate.formats.otf2.failures` words it); ``cmp_close`` returns the
first failing close. Pass 1 keeps the scalar arguments of the kinds Python asks
for (their definition references are checked, :mod:`compensate.formats.otf2.
integrity`), also of kinds with array arguments (Metric, ProgramBegin).

The C types come from the ctypes argument types (all are integers of 1, 4 or 8
bytes, or pointers to arrays that are passed through), and each writer's
argument list is checked against its reader callback's.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib
import inspect
import re
from pathlib import Path

from compensate.formats.otf2.columns import FIELDS
from compensate.model import KIND_NAMES

OUT = Path(__file__).with_name("native.c")
MAX_ARGS = 8  # arguments of a record kind kept for its field dict (native.NativeFields)
MAX_ATTRS = 8  # attributes of a record kept (native: the partitioned parameters)

# the otf2 event attribute (columns.FIELDS) -> the C argument name (EvtWriter_*)
_CAMEL = {"msg_tag": "msgTag", "msg_length": "msgLength", "collective_op": "collectiveOp",
          "size_sent": "sizeSent", "size_received": "sizeReceived", "request_id": "requestID",
          "message_id": "messageId", "stop_time": "stopTime"}
# the conversion functions of columns.FIELDS, in C (v: the argument as int64_t/uint64_t)
_CONVERT = {
    "_u32": "((uint64_t)({v}) == 0xFFFFFFFFu ? -1 : (int64_t)({v}))",
    "_rank": "((uint64_t)({v}) >= 0xFFFFFFFEu ? -1 : (int64_t)({v}))",
    "_ref": "((uint64_t)({v}) == 0xFFFFFFFFu ? -1 : (int64_t)({v}))",
    "_u64": "((uint64_t)({v}) > (uint64_t)INT64_MAX ? -1 : (int64_t)({v}))",
    "_root": "((uint64_t)({v}) >= 0x80000000u ? -1 : (int64_t)({v}))",
    "_enum_int": "((int64_t)({v}))",
    "int": "((int64_t)({v}))",
}
_COLUMNS = ("region", "peer", "comm", "tag", "size", "size_recv", "op", "request")


def _ctype(t: type) -> str:
    """The C type of a ctypes argument type."""
    if issubclass(t, ctypes._Pointer):
        target = t._type_
        if target.__name__ == "c_uint":
            return "const uint32_t*"
        if target.__name__ == "Type":
            return "const uint8_t*"
        return "const void*"
    code = t._type_ if isinstance(t._type_, str) else None
    size = ctypes.sizeof(t)
    if code in ("l", "q"):
        return "int64_t"
    if code in ("i",) and size == 4:
        return "int32_t"
    if code in ("d", "f"):
        raise ValueError(f"floating-point argument {t.__name__} not supported")
    return {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint64_t"}[size]


def _kinds() -> list[tuple[str, list[str], list[str]]]:
    """(kind, C argument types, argument names) per event kind, in declaration order."""
    glob = importlib.import_module("_otf2.GlobalEvtReaderCallbacks")
    loc = importlib.import_module("_otf2.EvtReaderCallbacks")
    wr = importlib.import_module("_otf2.EvtWriter")
    src = inspect.getsource(wr)
    prefix = "_GlobalEvtReaderCallback_FP_"
    out = []
    for name, fp in vars(glob).items():
        if not name.startswith(prefix) or name == prefix + "Unknown":
            continue
        kind = name[len(prefix):]
        args = [_ctype(t) for t in fp._argtypes_[4:]]
        local = [_ctype(t) for t in getattr(loc, "_EvtReaderCallback_FP_" + kind)._argtypes_[5:]]
        m = re.search(rf"c_{kind}\.argtypes = \[(.*)\]", src)
        n_writer = len(m.group(1).split(",")) - 3  # writer, attribute list, time
        if local != args or n_writer != len(args):
            raise ValueError(f"{kind}: reader and writer arguments differ")
        params = list(inspect.signature(getattr(wr, "EvtWriter_" + kind)).parameters)[3:]
        names = params if len(params) == len(args) else [f"a{i}" for i in range(len(args))]
        out.append((kind, args, names))
    return out


def _pass1(kind: str, index: int, args: list[str], names: list[str]) -> str:
    decl = "".join(f", {t} {n}" for t, n in zip(args, names, strict=True))
    code = KIND_NAMES.index(kind) if kind in KIND_NAMES else None
    fields = FIELDS.get(code, ()) if code is not None else ()
    body = []
    for column, attr, convert in fields:
        want = _CAMEL.get(attr, attr).lower()
        arg = next((n for n in names if n.lower() == want), None)
        if arg is None:
            raise ValueError(f"{kind}: no argument {want}")
        body.append(f"    c->{column}[i] = " + _CONVERT[convert.__name__].format(v=arg) + ";")
    # the scalar arguments, at their argument positions (a field dict's values, the
    # definition references integrity.py checks; an array's slot is left as it is)
    scalar = [(j, n) for j, (t, n) in enumerate(zip(args, names, strict=True))
              if not t.endswith("*")]
    if scalar:
        if len(args) > MAX_ARGS:
            raise ValueError(f"{kind}: more than {MAX_ARGS} arguments")
        store = "".join(f" a[{j}] = (uint64_t){n};" for j, n in scalar)
        body.append(f"    if (c->store[{index}]) {{ uint64_t* a = c->args + i * MAX_ARGS;"
                    f"{store} }}")
    body.append(f"    if (c->keep_attrs[{index}]) save_attrs(c, i, attributes);")
    lines = "\n".join(body)
    return f"""static OTF2_CallbackCode r_{kind}(uint64_t location, uint64_t time, void* ud,
        void* attributes{decl}) {{
    Pass1* c = (Pass1*)ud;
    if (!c->allowed[{index}]) {{ c->refused = {index}; return OTF2_CALLBACK_INTERRUPT; }}
    uint64_t i = begin(c, location, time, {index});
{lines}
    return OTF2_CALLBACK_SUCCESS;
}}
"""


def _pass2(kind: str, index: int, args: list[str], names: list[str]) -> str:
    decl = "".join(f", {t} {n}" for t, n in zip(args, names, strict=True))
    call = "".join(f", {n}" for n in names)
    if kind == "BufferFlush":
        call = ", (uint64_t)c->stops[c->i]"
    return f"""static OTF2_CallbackCode w_{kind}(uint64_t location, uint64_t time, uint64_t pos,
        void* ud, void* attributes{decl}) {{
    Pass2* c = (Pass2*)ud;
    (void)location; (void)time; (void)pos;
    if (c->i >= c->n || c->origin[c->kinds[c->i]] != {index}) {{
        c->mismatch = {index}; return OTF2_CALLBACK_INTERRUPT; }}
    c->rc = p_EvtWriter_{kind}(c->writer, attributes, (uint64_t)c->times[c->i]{call});
    if (c->rc) return OTF2_CALLBACK_INTERRUPT;
    c->i++;
    return OTF2_CALLBACK_SUCCESS;
}}
"""


def generate() -> str:
    kinds = _kinds()
    parts = [_HEADER.replace("@NKINDS@", str(len(kinds))).replace("@MAX_ARGS@", str(MAX_ARGS))
             .replace("@MAX_ATTRS@", str(MAX_ATTRS))]
    for kind, args, _ in kinds:
        parts.append(f"typedef int (*t_EvtWriter_{kind})(void*, void*, uint64_t"
                     + "".join(f", {t}" for t in args) + f");\nstatic t_EvtWriter_{kind} "
                     f"p_EvtWriter_{kind};\n")
    parts.append("static const char* KIND_NAMES[] = {\n"
                 + "".join(f'    "{k}",\n' for k, _, _ in kinds) + "};\n")
    parts.append(_COMMON)
    for i, (kind, args, names) in enumerate(kinds):
        parts.append(_pass1(kind, i, args, names))
        parts.append(_pass2(kind, i, args, names))
    resolve = "".join(
        f'    if (!(p_EvtWriter_{k} = (t_EvtWriter_{k})dlsym(lib, "OTF2_EvtWriter_{k}"))) '
        f"return -1;\n" for k, _, _ in kinds)
    set_global = "".join(
        f'    if (set(cb, "OTF2_GlobalEvtReaderCallbacks_Set{k}Callback", (void*)r_{k})) '
        f"return -1;\n" for k, _, _ in kinds)
    set_local = "".join(
        f'    if (set(cb, "OTF2_EvtReaderCallbacks_Set{k}Callback", (void*)w_{k})) return -1;\n'
        for k, _, _ in kinds)
    parts.append(_FOOTER.replace("@RESOLVE@", resolve).replace("@SET_GLOBAL@", set_global)
                 .replace("@SET_LOCAL@", set_local))
    text = "".join(parts)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return text.replace("@DIGEST@", digest)


_HEADER = """\
/* GENERATED by compensate/formats/otf2/gen_native.py -- do not edit.
 * The C half of compensate/formats/otf2/native.py: OTF2 events into numpy
 * columns (pass 1) and copied to an OTF2 event writer with new timestamps
 * (pass 2), with no Python call per record. Needs no OTF2 header: every
 * function is looked up with dlsym in the _otf2 extension of the otf2 package.
 */
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NKINDS @NKINDS@
#define MAX_ARGS @MAX_ARGS@
#define MAX_ATTRS @MAX_ATTRS@
#define OTF2_CALLBACK_SUCCESS 0
#define OTF2_CALLBACK_INTERRUPT 1
#define OTF2_ERROR_INTERRUPTED_BY_CALLBACK 92
typedef int OTF2_CallbackCode;

const char* cmp_digest(void) { return "@DIGEST@"; }
int cmp_nkinds(void) { return NKINDS; }
int cmp_max_args(void) { return MAX_ARGS; }
int cmp_max_attrs(void) { return MAX_ATTRS; }

typedef struct {
    /* output arrays of capacity cap (filled from 0 on each read call) */
    uint64_t *loc, *time;
    int16_t *kind;
    int64_t *region, *peer, *comm, *tag, *size, *size_recv, *op, *request;
    uint64_t cap, n;
    const int16_t* code;     /* kind index -> model kind code */
    const uint8_t* allowed;  /* kind index -> 1: may be read natively */
    int64_t refused;         /* kind index of a refused record, -1: none */
    const uint8_t* store;    /* kind index -> 1: keep the arguments in args */
    uint64_t* args;          /* MAX_ARGS per record */
    const uint8_t* keep_attrs; /* kind index -> 1: keep the attribute list in attrs */
    uint32_t* nattrs;        /* per record: its number of attributes (kept kinds) */
    uint64_t* attrs;         /* MAX_ATTRS (reference, type, value) triples per record */
} Pass1;

typedef struct {
    void* writer;            /* OTF2_EvtWriter* */
    const int64_t *times, *stops;
    const int16_t *kinds;
    uint64_t i, n;
    const int16_t* origin;   /* model kind code -> the kind index its records are read as */
    int64_t mismatch;        /* kind index of a record that does not match, -1: none */
    int rc;                  /* the failing OTF2_EvtWriter call's error code */
} Pass2;

"""

_COMMON = """
static inline uint64_t begin(Pass1* c, uint64_t location, uint64_t time, int index) {
    uint64_t i = c->n++;
    c->loc[i] = location; c->time[i] = time; c->kind[i] = c->code[index];
    c->region[i] = -1; c->peer[i] = -1; c->comm[i] = -1; c->tag[i] = -1;
    c->size[i] = -1; c->size_recv[i] = -1; c->op[i] = -1; c->request[i] = -1;
    return i;
}

static uint32_t (*p_AttributeList_GetNumberOfElements)(const void*);
static int (*p_AttributeList_GetAttributeByIndex)(const void*, uint32_t, uint32_t*, uint8_t*,
                                                  uint64_t*);

/* Record i's attribute list: its length in nattrs[i] and its first MAX_ATTRS
 * (reference, type, value as the 8 bytes of OTF2_AttributeValue) in attrs. */
static void save_attrs(Pass1* c, uint64_t i, const void* attributes) {
    uint32_t n = attributes ? p_AttributeList_GetNumberOfElements(attributes) : 0;
    uint64_t* a = c->attrs + i * 3 * MAX_ATTRS;
    c->nattrs[i] = n;
    for (uint32_t j = 0; j < n && j < MAX_ATTRS; j++) {
        uint32_t ref = 0; uint8_t type = 0; uint64_t value = 0;
        if (p_AttributeList_GetAttributeByIndex(attributes, j, &ref, &type, &value)) {
            c->nattrs[i] = (uint32_t)-1; return; }
        a[3 * j] = ref; a[3 * j + 1] = type; a[3 * j + 2] = value;
    }
}

/* No Unknown callbacks: a record of a kind this OTF2 library does not know is
 * skipped by both passes, as the otf2 package skips it. */

"""

_FOOTER = """
/* ---- the OTF2 reader API used here ---- */
static void* lib;
static void* (*p_Reader_Open)(const char*);
static int (*p_Reader_Close)(void*);
static int (*p_Reader_SetSerialCollectiveCallbacks)(void*);
static void* (*p_Reader_GetGlobalDefReader)(void*);
static void* (*p_GlobalDefReaderCallbacks_New)(void);
static void (*p_GlobalDefReaderCallbacks_Delete)(void*);
static int (*p_Reader_RegisterGlobalDefCallbacks)(void*, void*, void*, void*);
static int (*p_Reader_ReadAllGlobalDefinitions)(void*, void*, uint64_t*);
static int (*p_Reader_CloseGlobalDefReader)(void*, void*);
static int (*p_Reader_SelectLocation)(void*, uint64_t);
static int (*p_Reader_OpenDefFiles)(void*);
static int (*p_Reader_OpenEvtFiles)(void*);
static int (*p_Reader_CloseDefFiles)(void*);
static int (*p_Reader_CloseEvtFiles)(void*);
static void* (*p_Reader_GetDefReader)(void*, uint64_t);
static int (*p_Reader_ReadAllLocalDefinitions)(void*, void*, uint64_t*);
static int (*p_Reader_CloseDefReader)(void*, void*);
static void* (*p_Reader_GetEvtReader)(void*, uint64_t);
static int (*p_Reader_CloseEvtReader)(void*, void*);
static void* (*p_Reader_GetGlobalEvtReader)(void*);
static int (*p_Reader_CloseGlobalEvtReader)(void*, void*);
static void* (*p_GlobalEvtReaderCallbacks_New)(void);
static void (*p_GlobalEvtReaderCallbacks_Delete)(void*);
static int (*p_Reader_RegisterGlobalEvtCallbacks)(void*, void*, void*, void*);
static int (*p_Reader_ReadGlobalEvents)(void*, void*, uint64_t, uint64_t*);
static void* (*p_EvtReaderCallbacks_New)(void);
static void (*p_EvtReaderCallbacks_Delete)(void*);
static int (*p_Reader_RegisterEvtCallbacks)(void*, void*, void*, void*);
static int (*p_Reader_ReadLocalEvents)(void*, void*, uint64_t, uint64_t*);

#define GET(name) if (!(*(void**)&p_##name = dlsym(lib, "OTF2_" #name))) return -1;

/* Look up every OTF2 function in the library at ``path`` (the otf2 package's
 * _otf2 extension, already loaded by Python: dlopen returns the same instance,
 * so handles made by Python and by this code are interchangeable). */
int cmp_init(const char* path) {
    lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (!lib) lib = dlopen(path, RTLD_NOW);
    if (!lib) return -2;
    GET(Reader_Open) GET(Reader_Close) GET(Reader_SetSerialCollectiveCallbacks)
    GET(Reader_GetGlobalDefReader) GET(GlobalDefReaderCallbacks_New)
    GET(GlobalDefReaderCallbacks_Delete) GET(Reader_RegisterGlobalDefCallbacks)
    GET(Reader_ReadAllGlobalDefinitions) GET(Reader_CloseGlobalDefReader)
    GET(Reader_SelectLocation) GET(Reader_OpenDefFiles) GET(Reader_OpenEvtFiles)
    GET(Reader_CloseDefFiles) GET(Reader_CloseEvtFiles) GET(Reader_GetDefReader)
    GET(Reader_ReadAllLocalDefinitions) GET(Reader_CloseDefReader) GET(Reader_GetEvtReader)
    GET(Reader_CloseEvtReader) GET(Reader_GetGlobalEvtReader) GET(Reader_CloseGlobalEvtReader)
    GET(GlobalEvtReaderCallbacks_New) GET(GlobalEvtReaderCallbacks_Delete)
    GET(Reader_RegisterGlobalEvtCallbacks)
    GET(Reader_ReadGlobalEvents) GET(EvtReaderCallbacks_New) GET(EvtReaderCallbacks_Delete)
    GET(Reader_RegisterEvtCallbacks)
    GET(Reader_ReadLocalEvents)
    GET(AttributeList_GetNumberOfElements) GET(AttributeList_GetAttributeByIndex)
@RESOLVE@    return 0;
}

const char* cmp_kind_name(int i) { return i >= 0 && i < NKINDS ? KIND_NAMES[i] : 0; }

static int set(void* cb, const char* setter, void* fn) {
    int (*f)(void*, void*) = (int (*)(void*, void*))dlsym(lib, setter);
    return f ? f(cb, fn) : -1;
}

static int set_global(void* cb) {
@SET_GLOBAL@    return 0;
}

static int set_local(void* cb) {
@SET_LOCAL@    return 0;
}

/* ---- an open input archive: all locations selected, local definitions read,
 * a local event reader per location taken on demand (pass 2) or the global
 * reader (pass 1) ---- */
typedef struct {
    void* reader;
    void* global;            /* OTF2_GlobalEvtReader*, pass 1 */
    void* callbacks;         /* global or local callbacks */
    uint64_t nlocs;
    const uint64_t* locs;
    void** evt;              /* per location (index into locs) */
    int evt_files;
} Input;

/* Close everything ``in`` holds; returns 0 or the first failing OTF2 call's
 * error code (every call is made even after one fails). */
int cmp_close(Input* in) {
    int rc = 0, r;
    if (!in) return 0;
    if (in->reader) {
        if (in->global) {
            if ((r = p_Reader_CloseGlobalEvtReader(in->reader, in->global)) && !rc) rc = r;
        } else if (in->evt) {
            for (uint64_t k = 0; k < in->nlocs; k++)
                if (in->evt[k] && (r = p_Reader_CloseEvtReader(in->reader, in->evt[k])) && !rc)
                    rc = r;
        }
        if (in->evt_files && (r = p_Reader_CloseEvtFiles(in->reader)) && !rc) rc = r;
        if ((r = p_Reader_Close(in->reader)) && !rc) rc = r;
    }
    if (in->callbacks) {
        if (in->global) p_GlobalEvtReaderCallbacks_Delete(in->callbacks);
        else p_EvtReaderCallbacks_Delete(in->callbacks);
    }
    free(in->evt);
    free(in);
    return rc;
}

/* Whether location ``loc`` of the archive ``anchor`` has a local definition
 * file that is not empty (an empty one is read as none, as otf2-print reads it):
 * GetDefReader gives no reader both for a missing one (legal: no local
 * definitions) and for one it cannot open (e.g. too many open files), which
 * must not pass for the former. */
static int def_file_exists(const char* anchor, uint64_t loc) {
    char buf[4096];
    size_t n = strlen(anchor);
    if (n > 5 && strcmp(anchor + n - 5, ".otf2") == 0) n -= 5;
    if (n > 4000) return 1;
    snprintf(buf, sizeof buf, "%.*s/%llu.def", (int)n, anchor, (unsigned long long)loc);
    struct stat st;
    if (stat(buf, &st) == 0) return st.st_size > 0;  /* empty: none, as for otf2-print */
    return errno != ENOENT;
}

/* What cmp_open was doing when it failed (*stage; *at: the index into locs of
 * the location concerned, or -1); native.py words each. */
enum { AT_OPEN = 1, AT_GLOBAL_DEFS, AT_SELECT, AT_DEF_FILES, AT_LOCAL_DEFS,
       AT_CLOSE_DEFS, AT_EVT_FILES, AT_EVT_READER, AT_GLOBAL_READER, AT_CALLBACKS,
       AT_MEMORY };

#define FAIL(s, k, code) do { *stage = (s); *at = (int64_t)(k); *rc = (code); \
    cmp_close(in); return 0; } while (0)

/* Open ``path`` as the otf2 package's reader does (serial collectives, global
 * definitions, every location of ``locs`` with its local definitions). ``global``:
 * 1 for the global event reader (pass 1), 0 for local readers (pass 2).
 * Every OTF2 return code is checked: returns NULL with *rc (the OTF2 error
 * code, negative: a NULL handle or no memory), *stage and *at set on failure.
 * A location without a local definition file has no local definitions, as for
 * the otf2 package and otf2-print; one that exists but cannot be opened fails. */
Input* cmp_open(const char* path, const uint64_t* locs, uint64_t nlocs, int global, int* rc,
                int* stage, int64_t* at) {
    Input* in = (Input*)calloc(1, sizeof(Input));
    uint64_t nread = 0;
    *rc = 0; *stage = 0; *at = -1;
    if (!in) { *rc = -3; *stage = AT_MEMORY; return 0; }
    in->locs = locs; in->nlocs = nlocs;
    in->reader = p_Reader_Open(path);
    if (!in->reader) FAIL(AT_OPEN, -1, -4);
    int r = p_Reader_SetSerialCollectiveCallbacks(in->reader);
    if (r) FAIL(AT_OPEN, -1, r);
    void* gdr = p_Reader_GetGlobalDefReader(in->reader);
    if (!gdr) FAIL(AT_GLOBAL_DEFS, -1, -4);
    void* gcb = p_GlobalDefReaderCallbacks_New();
    if (!gcb) FAIL(AT_MEMORY, -1, -3);
    r = p_Reader_RegisterGlobalDefCallbacks(in->reader, gdr, gcb, 0);
    p_GlobalDefReaderCallbacks_Delete(gcb);
    if (!r) r = p_Reader_ReadAllGlobalDefinitions(in->reader, gdr, &nread);
    int c = p_Reader_CloseGlobalDefReader(in->reader, gdr);
    if (r || c) FAIL(AT_GLOBAL_DEFS, -1, r ? r : c);
    for (uint64_t k = 0; k < nlocs; k++)
        if ((r = p_Reader_SelectLocation(in->reader, locs[k]))) FAIL(AT_SELECT, k, r);
    if ((r = p_Reader_OpenDefFiles(in->reader))) FAIL(AT_DEF_FILES, -1, r);
    if ((r = p_Reader_OpenEvtFiles(in->reader))) {
        p_Reader_CloseDefFiles(in->reader); FAIL(AT_EVT_FILES, -1, r); }
    in->evt_files = 1;
    in->evt = (void**)calloc(nlocs ? nlocs : 1, sizeof(void*));
    if (!in->evt) { p_Reader_CloseDefFiles(in->reader); FAIL(AT_MEMORY, -1, -3); }
    for (uint64_t k = 0; k < nlocs; k++) {
        void* dr = p_Reader_GetDefReader(in->reader, locs[k]);
        if (dr) {
            r = p_Reader_ReadAllLocalDefinitions(in->reader, dr, &nread);
            c = p_Reader_CloseDefReader(in->reader, dr);
            if (r || c) { p_Reader_CloseDefFiles(in->reader); FAIL(AT_LOCAL_DEFS, k, r ? r : c); }
        } else if (def_file_exists(path, locs[k])) {
            p_Reader_CloseDefFiles(in->reader); FAIL(AT_LOCAL_DEFS, k, -4);
        }
        /* pass 2 takes a location's local reader on its first copy (cmp_copy)
         * and hands it back when done (cmp_release), so that it holds the read
         * chunks of one location at a time, not of all */
        if (global && !(in->evt[k] = p_Reader_GetEvtReader(in->reader, locs[k]))) {
            p_Reader_CloseDefFiles(in->reader); FAIL(AT_EVT_READER, k, -4); }
    }
    if ((r = p_Reader_CloseDefFiles(in->reader))) FAIL(AT_CLOSE_DEFS, -1, r);
    if (global) {
        free(in->evt); in->evt = 0;  /* the global reader owns the local readers */
        in->global = p_Reader_GetGlobalEvtReader(in->reader);
        if (!in->global) FAIL(AT_GLOBAL_READER, -1, -4);
        in->callbacks = p_GlobalEvtReaderCallbacks_New();
        if (!in->callbacks) FAIL(AT_MEMORY, -1, -3);
        if (set_global(in->callbacks)) FAIL(AT_CALLBACKS, -1, -5);
    } else {
        in->callbacks = p_EvtReaderCallbacks_New();
        if (!in->callbacks) FAIL(AT_MEMORY, -1, -3);
        if (set_local(in->callbacks)) FAIL(AT_CALLBACKS, -1, -5);
    }
    return in;
}

/* Pass 1: read up to c->cap records in global order into c's arrays (c->n of
 * them). Returns 0, an OTF2 error code, or OTF2_ERROR_INTERRUPTED_BY_CALLBACK
 * with c->refused set. */
int cmp_read(Input* in, Pass1* c) {
    uint64_t nread = 0;
    c->n = 0; c->refused = -1;
    int rc = p_Reader_RegisterGlobalEvtCallbacks(in->reader, in->global, in->callbacks, c);
    if (rc) return rc;
    return p_Reader_ReadGlobalEvents(in->reader, in->global, c->cap, &nread);
}

/* Pass 2: copy the next c->n records of location ``k`` (index into the locations
 * given to cmp_open) to c->writer. Returns 0 (c->i records copied; fewer than
 * c->n: the input has no more), an OTF2 error code, or
 * OTF2_ERROR_INTERRUPTED_BY_CALLBACK with c->mismatch or c->rc set. */
int cmp_copy(Input* in, uint64_t k, Pass2* c) {
    uint64_t nread = 0;
    c->i = 0; c->mismatch = -1; c->rc = 0;
    if (k >= in->nlocs || !in->evt) return -6;
    if (!in->evt[k] && !(in->evt[k] = p_Reader_GetEvtReader(in->reader, in->locs[k])))
        return -6;
    int rc = p_Reader_RegisterEvtCallbacks(in->reader, in->evt[k], in->callbacks, c);
    if (rc) return rc;
    return p_Reader_ReadLocalEvents(in->reader, in->evt[k], c->n, &nread);
}

/* Pass 2: close the local reader of location ``k`` (its read chunks are freed);
 * a later cmp_copy of ``k`` would start again at its first record. Returns 0 or
 * an OTF2 error code. */
int cmp_release(Input* in, uint64_t k) {
    if (k >= in->nlocs || !in->evt || !in->evt[k]) return 0;
    int rc = p_Reader_CloseEvtReader(in->reader, in->evt[k]);
    in->evt[k] = 0;
    return rc;
}
"""


def main() -> None:
    OUT.write_text(generate())
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
