/*
 * Native hot path of clawkb's tokenizer (clawkb/text/tokenize.py is the
 * reference and the fallback; tests check that both give the same tokens).
 *
 * tokenize(text, cache, expand) takes NFKC-normalised text and does in C
 * what costs the most in Python:
 *   - cutting the text into runs: a run of CJK characters, or a run of
 *     anything that is neither whitespace, a hard separator nor CJK;
 *   - CJK runs: every character, then every adjacent pair;
 *   - plain runs (after stripping leading/trailing symbols, a word of letters
 *     only, all one case or Capitalised, or a number): one case-folded token.
 * Every other run (identifiers, paths, versions...) goes to ``expand(run)``,
 * the Python reference's own function, memoised in ``cache`` (the reference's
 * dict, same bounds), so the rare complex cases stay defined in one place.
 *
 * Character classes mirror Python's ``re`` on str patterns: \s is
 * Py_UNICODE_ISSPACE, [^\W_] is Py_UNICODE_ISALNUM; str.isdecimal/isalpha
 * are Py_UNICODE_ISDECIMAL/ISALPHA.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define MAX_TOKEN_LEN 64
#define CACHE_MAX_ENTRIES 65536
#define CACHE_MAX_RUN 32

typedef struct { Py_UCS4 lo, hi; } Range;

/* Keep in sync with _CJK in tokenize.py. */
static const Range CJK[] = {
    {0x1100, 0x11ff}, {0x2e80, 0x2fdf}, {0x3005, 0x3007}, {0x3021, 0x3029},
    {0x3031, 0x3035}, {0x3038, 0x303c}, {0x3040, 0x309f}, {0x30a1, 0x30fa},
    {0x30fc, 0x30ff}, {0x3100, 0x318f}, {0x31a0, 0x31bf}, {0x31f0, 0x31ff},
    {0x3400, 0x4dbf}, {0x4e00, 0x9fff}, {0xa960, 0xa97f}, {0xac00, 0xd7ff},
    {0xf900, 0xfaff}, {0x20000, 0x3ffff},
};

/* Keep in sync with _HARD in tokenize.py (the non-ASCII part). */
static const Range HARD[] = {
    {0x00a1, 0x00a1}, {0x00a7, 0x00a7}, {0x00ab, 0x00ab}, {0x00b6, 0x00b7},
    {0x00bb, 0x00bb}, {0x00bf, 0x00bf}, {0x2000, 0x206f}, {0x2190, 0x21ff},
    {0x2500, 0x257f}, {0x3000, 0x3004}, {0x3008, 0x3020}, {0x302a, 0x3030},
    {0x3036, 0x3037}, {0x303d, 0x303f}, {0x30a0, 0x30a0}, {0x30fb, 0x30fb},
    {0xfe10, 0xfe1f}, {0xfe30, 0xfe4f}, {0xff00, 0xff0f}, {0xff1a, 0xff20},
    {0xff3b, 0xff40}, {0xff5b, 0xff65},
};

static int in_ranges(Py_UCS4 c, const Range *r, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (c < r[i].lo) return 0; /* ranges are sorted */
        if (c <= r[i].hi) return 1;
    }
    return 0;
}

enum { C_SEP = 0, C_CJK = 1, C_OTHER = 2 };

static unsigned char ascii_class[128];

static void init_ascii(void) {
    const char *hard = "()[]{}<>\"'`,;=|!?*&^$";
    for (int c = 0; c < 128; c++)
        ascii_class[c] = Py_UNICODE_ISSPACE((Py_UCS4)c) ? C_SEP : C_OTHER;
    for (const char *p = hard; *p; p++) ascii_class[(unsigned char)*p] = C_SEP;
}

static inline int char_class(Py_UCS4 c) {
    if (c < 128) return ascii_class[c];
    if (in_ranges(c, CJK, sizeof CJK / sizeof CJK[0])) return C_CJK;
    if (Py_UNICODE_ISSPACE(c) || in_ranges(c, HARD, sizeof HARD / sizeof HARD[0])) return C_SEP;
    return C_OTHER;
}

static int append_sub(PyObject *out, PyObject *text, Py_ssize_t a, Py_ssize_t b) {
    PyObject *s = PyUnicode_Substring(text, a, b);
    if (s == NULL) return -1;
    int rc = PyList_Append(out, s);
    Py_DECREF(s);
    return rc;
}

/*
 * Single CJK characters recur constantly (a few thousand cover almost all
 * text), so they come from a small direct-mapped cache of ready string
 * objects instead of a new object each time. A reused object also keeps the
 * UTF-8 form the index computes from it once (PyUnicode_AsUTF8AndSize caches
 * it), so the inverter does not encode the same character again for every
 * occurrence. A slot holds one character; another character mapping to it
 * replaces it. The strings are equal either way: only speed depends on the
 * cache (at most 16k small objects). Pairs are not cached: they repeat too
 * rarely for a cache to pay for its lookups.
 */
#define CJK_CACHE_BITS 14
#define CJK_CACHE_SIZE (1u << CJK_CACHE_BITS)
static PyObject *single_cache[CJK_CACHE_SIZE];

/* Append the one-character token text[a] from its cache slot. */
static int append_char(PyObject *out, PyObject *text, Py_ssize_t a, Py_UCS4 c) {
    PyObject **slot = &single_cache[c & (CJK_CACHE_SIZE - 1)];
    PyObject *s = *slot;
    if (s != NULL && PyUnicode_READ_CHAR(s, 0) == c) return PyList_Append(out, s);
    s = PyUnicode_Substring(text, a, a + 1);
    if (s == NULL) return -1;
    Py_XSETREF(*slot, s); /* the cache keeps the new reference */
    return PyList_Append(out, s);
}

static int cjk_run(PyObject *out, PyObject *text, int kind, const void *data, Py_ssize_t a,
                   Py_ssize_t b) {
    for (Py_ssize_t i = a; i < b; i++)
        if (append_char(out, text, i, PyUnicode_READ(kind, data, i)) < 0) return -1;
    for (Py_ssize_t i = a; i + 1 < b; i++)
        if (append_sub(out, text, i, i + 2) < 0) return -1;
    return 0;
}

/* Append ``token`` (a new reference, stolen) if it is not too long. */
static int append_bounded(PyObject *out, PyObject *token) {
    if (token == NULL) return -1;
    int rc = 0;
    if (PyUnicode_GET_LENGTH(token) <= MAX_TOKEN_LEN) rc = PyList_Append(out, token);
    Py_DECREF(token);
    return rc;
}

/* A run the reference expands into parts: ask it, through the shared cache. */
static int complex_run(PyObject *out, PyObject *text, Py_ssize_t a, Py_ssize_t b,
                       PyObject *cache, PyObject *expand) {
    PyObject *run = PyUnicode_Substring(text, a, b);
    if (run == NULL) return -1;
    PyObject *found = PyDict_GetItemWithError(cache, run); /* borrowed */
    if (found != NULL) {
        Py_INCREF(found);
    } else {
        if (PyErr_Occurred()) { Py_DECREF(run); return -1; }
        found = PyObject_CallOneArg(expand, run);
        if (found == NULL) { Py_DECREF(run); return -1; }
        if (b - a <= CACHE_MAX_RUN) {
            if (PyDict_GET_SIZE(cache) >= CACHE_MAX_ENTRIES) PyDict_Clear(cache);
            if (PyDict_SetItem(cache, run, found) < 0) {
                Py_DECREF(run); Py_DECREF(found); return -1;
            }
        }
    }
    Py_DECREF(run);
    PyObject *seq = PySequence_Fast(found, "expand() must return a sequence");
    Py_DECREF(found);
    if (seq == NULL) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyList_Append(out, items[i]) < 0) { Py_DECREF(seq); return -1; }
    }
    Py_DECREF(seq);
    return 0;
}

/* The reference's stemmer and its memo for this call (borrowed; NULL: no stems).
 * Per thread: the stemmer is Python, so another thread can run (and start its own
 * call, then reset these) while one call waits for it; a shared pair was read as
 * NULL or as the other call's memo after the stemmer returned (a crash in `serve`,
 * or tokens stemmed with another call's memo). */
static _Thread_local PyObject *g_stems = NULL, *g_stem = NULL;

/* After a plain ASCII word: its stem ("" for none) from ``stem(word)``, memoised in
 * ``stems``; appended when not empty. Identifiers never get here (complex runs). */
static int append_stem(PyObject *out, PyObject *token) {
    if (g_stem == NULL) return 0;
    PyObject *st = PyDict_GetItemWithError(g_stems, token); /* borrowed */
    if (st != NULL) return PyUnicode_GET_LENGTH(st) > 0 ? PyList_Append(out, st) : 0;
    if (PyErr_Occurred()) return -1;
    st = PyObject_CallOneArg(g_stem, token);
    if (st == NULL) return -1;
    if (!PyUnicode_Check(st)) {
        Py_DECREF(st);
        PyErr_SetString(PyExc_TypeError, "stem() must return a str");
        return -1;
    }
    if (PyDict_GET_SIZE(g_stems) >= CACHE_MAX_ENTRIES) PyDict_Clear(g_stems);
    int rc = PyDict_SetItem(g_stems, token, st);
    if (rc == 0 && PyUnicode_GET_LENGTH(st) > 0) rc = PyList_Append(out, st);
    Py_DECREF(st);
    return rc;
}

/* A run that is neither whitespace, separator nor CJK. */
static int other_run(PyObject *out, PyObject *text, int kind, const void *data, Py_ssize_t a,
                     Py_ssize_t b, PyObject *cache, PyObject *expand) {
    /* the core: first to last letter-or-digit, plus a trailing "++" or "#" */
    Py_ssize_t s = a, e = b;
    while (s < b && !Py_UNICODE_ISALNUM(PyUnicode_READ(kind, data, s))) s++;
    if (s == b) return 0; /* no letter or digit: no token */
    while (!Py_UNICODE_ISALNUM(PyUnicode_READ(kind, data, e - 1))) e--;
    if (e < b) { /* a kept "++" or "#" suffix makes the core complex */
        Py_UCS4 c = PyUnicode_READ(kind, data, e);
        if (c == '#' || (c == '+' && e + 1 < b && PyUnicode_READ(kind, data, e + 1) == '+'))
            return complex_run(out, text, a, b, cache, expand);
    }
    int decimal = 1, alpha = 1, ascii = 1, lower = 0, upper = 0, rest_upper = 0;
    for (Py_ssize_t i = s; i < e; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (!Py_UNICODE_ISDECIMAL(c)) decimal = 0;
        if (!Py_UNICODE_ISALPHA(c)) alpha = 0;
        if (c >= 128) ascii = 0;
        else if (c >= 'a' && c <= 'z') lower++;
        else if (c >= 'A' && c <= 'Z') { upper++; if (i > s) rest_upper++; }
    }
    if (!decimal && !alpha) return complex_run(out, text, a, b, cache, expand);
    if (decimal && ascii) return e - s <= MAX_TOKEN_LEN ? append_sub(out, text, s, e) : 0;
    if (!ascii) { /* a non-ASCII word or number: plain, case-folded by Python */
        PyObject *core = PyUnicode_Substring(text, s, e);
        if (core == NULL) return -1;
        PyObject *folded = PyObject_CallMethod(core, "casefold", NULL);
        Py_DECREF(core);
        return append_bounded(out, folded);
    }
    /* ASCII letters: plain when all lower, all upper, or Capitalised */
    Py_ssize_t n = e - s;
    if (!(upper == 0 || lower == 0 || rest_upper == 0))
        return complex_run(out, text, a, b, cache, expand);
    if (n > MAX_TOKEN_LEN) return 0;
    PyObject *tok;
    if (upper == 0) {
        tok = PyUnicode_Substring(text, s, e);
    } else {
        char buf[MAX_TOKEN_LEN];
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, s + i);
            buf[i] = (char)((c >= 'A' && c <= 'Z') ? c + 32 : c);
        }
        tok = PyUnicode_FromStringAndSize(buf, n);
    }
    if (tok == NULL) return -1;
    int rc = PyList_Append(out, tok);
    if (rc == 0) rc = append_stem(out, tok);
    Py_DECREF(tok);
    return rc;
}

static PyObject *tokenize(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *text, *cache, *expand, *stems = NULL, *stem = NULL;
    if (!PyArg_ParseTuple(args, "UO!O|O!O", &text, &PyDict_Type, &cache, &expand, &PyDict_Type,
                          &stems, &stem))
        return NULL;
    g_stems = stem != NULL ? stems : NULL;
    g_stem = stems != NULL ? stem : NULL;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    Py_ssize_t i = 0;
    while (i < n) {
        int cls = char_class(PyUnicode_READ(kind, data, i));
        if (cls == C_SEP) { i++; continue; }
        Py_ssize_t j = i + 1;
        while (j < n && char_class(PyUnicode_READ(kind, data, j)) == cls) j++;
        int rc = cls == C_CJK ? cjk_run(out, text, kind, data, i, j)
                              : other_run(out, text, kind, data, i, j, cache, expand);
        if (rc < 0) { Py_DECREF(out); g_stems = g_stem = NULL; return NULL; }
        i = j;
    }
    g_stems = g_stem = NULL;
    return out;
}

/* -------------------------------------------------------------------------
 * Tokenize and invert in one pass, without a string object per token.
 *
 * The index needs each token only as its 64-bit term hash (FNV-1a over the
 * UTF-8 bytes, then the splitmix64 mixer: clawkb.index.segment.term_hash and
 * _bm25native.c compute the same value). CJK characters and pairs are
 * hashed straight from the text. Every other run is looked up by its
 * characters in a bounded cache of the hashes of its tokens; a run not in it
 * is tokenized by other_run() above (the same code tokenize() runs, so the
 * tokens are the same by construction), its tokens hashed and remembered.
 * Text is Zipfian: most runs cost one lookup and no allocation.
 *
 * The inverter state lives in a capsule across calls (one segment's worth):
 * a term table (hash -> term number) and one entry per distinct term in each
 * (doc, field): term, doc, field and a frequency saturated at 255, 10 bytes.
 * invert_finish() numbers the terms by ascending hash and hands the entries
 * over for clawkb.index.packing.assemble.
 * ------------------------------------------------------------------------- */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

#define FNV_SEED 0xcbf29ce484222325ULL

static inline uint64_t fnv(uint64_t h, const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* UTF-8 form of one code point. Only CJK characters (never a surrogate) are
   hashed from it; for run-cache keys any one-to-one encoding would do. */
static inline int utf8_put(Py_UCS4 c, unsigned char *o) {
    if (c < 0x80) { o[0] = (unsigned char)c; return 1; }
    if (c < 0x800) { o[0] = (unsigned char)(0xc0 | (c >> 6)); o[1] = (unsigned char)(0x80 | (c & 0x3f)); return 2; }
    if (c < 0x10000) {
        o[0] = (unsigned char)(0xe0 | (c >> 12)); o[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
        o[2] = (unsigned char)(0x80 | (c & 0x3f)); return 3;
    }
    o[0] = (unsigned char)(0xf0 | (c >> 18)); o[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3f));
    o[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3f)); o[3] = (unsigned char)(0x80 | (c & 0x3f));
    return 4;
}

static int str_hash(PyObject *o, uint64_t *out) {
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(o, &n);
    if (s == NULL) return -1;
    *out = mix64(fnv(FNV_SEED, (const unsigned char *)s, (size_t)n));
    return 0;
}

/* -- run cache: a non-CJK run's characters (UTF-8) -> its tokens' hashes -- */
#define RUN_CACHE_BITS 18             /* slots; at most half are used */
#define RUN_CACHE_SLOTS (1u << RUN_CACHE_BITS)
#define RUN_CACHE_MAX (RUN_CACHE_SLOTS / 2)
#define RUN_MAX_BYTES (4 * CACHE_MAX_RUN)

typedef struct { uint64_t key; uint32_t koff, hoff; uint16_t klen, ntok; } RunSlot;

static RunSlot *rc_slots = NULL;
static unsigned char *rc_bytes = NULL;
static uint64_t *rc_hashes = NULL;
static size_t rc_used = 0, rc_nbytes = 0, rc_bcap = 0, rc_nhash = 0, rc_hcap = 0;

static void run_cache_clear(void) {
    if (rc_slots) memset(rc_slots, 0, RUN_CACHE_SLOTS * sizeof(RunSlot));
    rc_used = rc_nbytes = rc_nhash = 0;
}

static int run_cache_init(void) {
    if (rc_slots) return 0;
    rc_slots = (RunSlot *)calloc(RUN_CACHE_SLOTS, sizeof(RunSlot));
    if (!rc_slots) { PyErr_NoMemory(); return -1; }
    return 0;
}

static RunSlot *run_cache_find(uint64_t key, const unsigned char *k, size_t klen) {
    size_t j = (size_t)key & (RUN_CACHE_SLOTS - 1);
    while (rc_slots[j].key) {
        RunSlot *e = &rc_slots[j];
        if (e->key == key && e->klen == klen && memcmp(rc_bytes + e->koff, k, klen) == 0) return e;
        j = (j + 1) & (RUN_CACHE_SLOTS - 1);
    }
    return &rc_slots[j]; /* the empty slot where it would go */
}

static int grow(void **p, size_t *cap, size_t need, size_t item) {
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap : 1 << 16;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, nc * item);
    if (!q) { PyErr_NoMemory(); return -1; }
    *p = q; *cap = nc;
    return 0;
}

/* -- the inverter -------------------------------------------------------- */
typedef struct { char *p; size_t len, cap, item; } Buf;

static int buf_reserve(Buf *b, size_t more) {
    return grow((void **)&b->p, &b->cap, b->len + more, b->item);
}

typedef struct { uint64_t key; uint32_t term, pad; } TermSlot; /* key 0: empty */
typedef struct { uint32_t row, entry; } TermMark; /* a term's last (doc, field) row, its entry */

typedef struct {
    TermSlot *tab; size_t cap, used;      /* hash -> term number, one cache line a probe */
    Buf hashes, term, doc, field, tf;     /* u64 per term; per entry u32 u32 u8 u8 */
    TermMark *mark; size_t mark_cap;
    uint32_t row;                                      /* number of the current (doc, field) */
    uint32_t cur_doc; uint8_t cur_field;
} Inv;

static void inv_free(Inv *v) {
    free(v->tab); free(v->hashes.p); free(v->term.p); free(v->doc.p);
    free(v->field.p); free(v->tf.p); free(v->mark);
    memset(v, 0, sizeof *v);
}

static int inv_init(Inv *v) {
    memset(v, 0, sizeof *v);
    v->hashes.item = 8; v->term.item = 4; v->doc.item = 4; v->field.item = 1; v->tf.item = 1;
    v->cap = 1 << 16;
    v->tab = (TermSlot *)calloc(v->cap, sizeof(TermSlot));
    if (!v->tab) { PyErr_NoMemory(); return -1; }
    return 0;
}

static int inv_table_grow(Inv *v) {
    size_t nc = v->cap * 2;
    TermSlot *t = (TermSlot *)calloc(nc, sizeof(TermSlot));
    if (!t) { PyErr_NoMemory(); return -1; }
    for (size_t i = 0; i < v->cap; i++) {
        if (!v->tab[i].key) continue;
        size_t j = (size_t)v->tab[i].key & (nc - 1);
        while (t[j].key) j = (j + 1) & (nc - 1);
        t[j] = v->tab[i];
    }
    free(v->tab);
    v->tab = t; v->cap = nc;
    return 0;
}

/* Count one token (by hash) in the current (doc, field). */
static int inv_emit(Inv *v, uint64_t h) {
    uint64_t key = h ? h : 1; /* 0 marks an empty slot */
    size_t j = (size_t)key & (v->cap - 1);
    while (v->tab[j].key && v->tab[j].key != key) j = (j + 1) & (v->cap - 1);
    uint32_t t;
    if (v->tab[j].key) {
        t = v->tab[j].term;
    } else {
        t = (uint32_t)v->hashes.len;
        if (buf_reserve(&v->hashes, 1) < 0) return -1;
        ((uint64_t *)v->hashes.p)[v->hashes.len++] = h;
        v->tab[j].key = key; v->tab[j].term = t; v->used++;
        if (v->hashes.len > v->mark_cap) {
            size_t old = v->mark_cap;
            if (grow((void **)&v->mark, &v->mark_cap, v->hashes.len, sizeof(TermMark)) < 0) return -1;
            memset(v->mark + old, 0, (v->mark_cap - old) * sizeof(TermMark));
        }
        if (v->used * 2 > v->cap && inv_table_grow(v) < 0) return -1;
    }
    TermMark *m = &v->mark[t];
    if (m->row == v->row) {
        uint8_t *tf = (uint8_t *)v->tf.p + m->entry;
        if (*tf < 255) (*tf)++;
        return 0;
    }
    if (buf_reserve(&v->term, 1) < 0 || buf_reserve(&v->doc, 1) < 0 ||
        buf_reserve(&v->field, 1) < 0 || buf_reserve(&v->tf, 1) < 0)
        return -1;
    m->row = v->row;
    m->entry = (uint32_t)v->term.len;
    ((uint32_t *)v->term.p)[v->term.len++] = t;
    ((uint32_t *)v->doc.p)[v->doc.len++] = v->cur_doc;
    ((uint8_t *)v->field.p)[v->field.len++] = v->cur_field;
    ((uint8_t *)v->tf.p)[v->tf.len++] = 1;
    return 0;
}

/* A non-CJK run: its tokens' hashes from the run cache, or tokenized by
   other_run() and remembered. Returns the number of tokens, -1 on error. */
static Py_ssize_t inv_other_run(Inv *v, PyObject *text, int kind, const void *data, Py_ssize_t a,
                                Py_ssize_t b, PyObject *cache, PyObject *expand) {
    unsigned char key[RUN_MAX_BYTES];
    size_t klen = 0;
    int cacheable = b - a <= CACHE_MAX_RUN;
    RunSlot *slot = NULL;
    uint64_t kh = 0;
    if (cacheable) {
        for (Py_ssize_t i = a; i < b; i++) klen += (size_t)utf8_put(PyUnicode_READ(kind, data, i), key + klen);
        kh = mix64(fnv(FNV_SEED, key, klen));
        if (!kh) kh = 1;
        slot = run_cache_find(kh, key, klen);
        if (slot->key) {
            const uint64_t *hs = rc_hashes + slot->hoff;
            for (uint16_t i = 0; i < slot->ntok; i++)
                if (inv_emit(v, hs[i]) < 0) return -1;
            return slot->ntok;
        }
    }
    PyObject *toks = PyList_New(0);
    if (toks == NULL) return -1;
    if (other_run(toks, text, kind, data, a, b, cache, expand) < 0) { Py_DECREF(toks); return -1; }
    Py_ssize_t n = PyList_GET_SIZE(toks);
    uint64_t hs[64];
    int keep = cacheable && n <= 64;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t h;
        if (str_hash(PyList_GET_ITEM(toks, i), &h) < 0 || inv_emit(v, h) < 0) {
            Py_DECREF(toks);
            return -1;
        }
        if (keep) hs[i] = h;
    }
    Py_DECREF(toks);
    if (keep) {
        if (rc_used >= RUN_CACHE_MAX) {
            run_cache_clear();
            slot = run_cache_find(kh, key, klen);
        }
        if (grow((void **)&rc_bytes, &rc_bcap, rc_nbytes + klen, 1) < 0 ||
            grow((void **)&rc_hashes, &rc_hcap, rc_nhash + (size_t)n, 8) < 0)
            return -1;
        memcpy(rc_bytes + rc_nbytes, key, klen);
        memcpy(rc_hashes + rc_nhash, hs, (size_t)n * 8);
        slot->key = kh; slot->koff = (uint32_t)rc_nbytes; slot->klen = (uint16_t)klen;
        slot->hoff = (uint32_t)rc_nhash; slot->ntok = (uint16_t)n;
        rc_nbytes += klen; rc_nhash += (size_t)n; rc_used++;
    }
    return n;
}

/* Tokenize one NFKC text into the current (doc, field); returns the token count. */
static Py_ssize_t inv_text(Inv *v, PyObject *text, PyObject *cache, PyObject *expand) {
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), count = 0, i = 0;
    unsigned char u[8];
    while (i < n) {
        int cls = char_class(PyUnicode_READ(kind, data, i));
        if (cls == C_SEP) { i++; continue; }
        Py_ssize_t j = i + 1;
        while (j < n && char_class(PyUnicode_READ(kind, data, j)) == cls) j++;
        if (cls == C_CJK) {
            /* every character, then every adjacent pair (as cjk_run) */
            for (Py_ssize_t k = i; k < j; k++) {
                int m = utf8_put(PyUnicode_READ(kind, data, k), u);
                if (inv_emit(v, mix64(fnv(FNV_SEED, u, (size_t)m))) < 0) return -1;
            }
            for (Py_ssize_t k = i; k + 1 < j; k++) {
                int m = utf8_put(PyUnicode_READ(kind, data, k), u);
                m += utf8_put(PyUnicode_READ(kind, data, k + 1), u + m);
                if (inv_emit(v, mix64(fnv(FNV_SEED, u, (size_t)m))) < 0) return -1;
            }
            count += 2 * (j - i) - 1;
        } else {
            Py_ssize_t got = inv_other_run(v, text, kind, data, i, j, cache, expand);
            if (got < 0) return -1;
            count += got;
        }
        i = j;
    }
    return count;
}

static void inv_capsule_free(PyObject *cap) {
    Inv *v = (Inv *)PyCapsule_GetPointer(cap, "clawkb.inverter");
    if (v) { inv_free(v); free(v); }
}

static PyObject *invert_new(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(args)) {
    if (run_cache_init() < 0) return NULL;
    Inv *v = (Inv *)malloc(sizeof(Inv));
    if (!v) return PyErr_NoMemory();
    if (inv_init(v) < 0) { inv_free(v); free(v); return NULL; }
    PyObject *cap = PyCapsule_New(v, "clawkb.inverter", inv_capsule_free);
    if (!cap) { inv_free(v); free(v); }
    return cap;
}

/* invert_add(state, docs, cache, expand, stems, stem) -> bytes of uint32 [len(docs), 3]
 * docs: a sequence of (doc number, title, body, code); a field is an NFKC str
 * to tokenize or a list of tokens. Returns each field's token count. */
static PyObject *invert_add(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *cap, *docs, *cache, *expand, *stems, *stem;
    if (!PyArg_ParseTuple(args, "OOO!OO!O", &cap, &docs, &PyDict_Type, &cache, &expand,
                          &PyDict_Type, &stems, &stem))
        return NULL;
    Inv *v = (Inv *)PyCapsule_GetPointer(cap, "clawkb.inverter");
    if (v == NULL) return NULL;
    PyObject *seq = PySequence_Fast(docs, "invert_add expects a sequence of docs");
    if (seq == NULL) return NULL;
    Py_ssize_t nd = PySequence_Fast_GET_SIZE(seq);
    PyObject *out = PyBytes_FromStringAndSize(NULL, nd * 3 * 4);
    if (out == NULL) { Py_DECREF(seq); return NULL; }
    uint32_t *lens = (uint32_t *)PyBytes_AS_STRING(out);
    g_stems = stems;
    g_stem = stem;
    for (Py_ssize_t d = 0; d < nd; d++) {
        PyObject *row = PySequence_Fast_GET_ITEM(seq, d);
        long doc;
        PyObject *f[3];
        if (!PyArg_ParseTuple(row, "lOOO", &doc, &f[0], &f[1], &f[2])) goto fail;
        for (int k = 0; k < 3; k++) {
            v->row++;
            v->cur_doc = (uint32_t)doc;
            v->cur_field = (uint8_t)k;
            Py_ssize_t count = 0;
            if (PyUnicode_Check(f[k])) {
                count = inv_text(v, f[k], cache, expand);
            } else {
                PyObject *ts = PySequence_Fast(f[k], "a field is a str or a list of str");
                if (ts == NULL) goto fail;
                count = PySequence_Fast_GET_SIZE(ts);
                for (Py_ssize_t i = 0; i < count; i++) {
                    uint64_t h;
                    if (str_hash(PySequence_Fast_GET_ITEM(ts, i), &h) < 0 || inv_emit(v, h) < 0) {
                        count = -1;
                        break;
                    }
                }
                Py_DECREF(ts);
            }
            if (count < 0) goto fail;
            lens[3 * d + k] = (uint32_t)count;
        }
    }
    g_stems = g_stem = NULL;
    Py_DECREF(seq);
    return out;
fail:
    g_stems = g_stem = NULL;
    Py_DECREF(seq);
    Py_DECREF(out);
    return NULL;
}

typedef struct { uint64_t h; uint32_t t; } HashTerm;

static int cmp_hash(const void *a, const void *b) {
    uint64_t x = ((const HashTerm *)a)->h, y = ((const HashTerm *)b)->h;
    return (x > y) - (x < y);
}

static PyObject *take(Buf *b) {
    PyObject *o = PyBytes_FromStringAndSize(b->p ? b->p : "", (Py_ssize_t)(b->len * b->item));
    free(b->p);
    b->p = NULL; b->len = b->cap = 0;
    return o;
}

/* invert_finish(state) -> (sorted hashes u64[T], rank u32[P], doc u32[P], field u8[P], tf u8[P])
 * as bytes; the entries' term numbers become ranks in the sorted hashes. The
 * state is emptied (its memory released) and can be reused. */
static PyObject *invert_finish(PyObject *Py_UNUSED(self), PyObject *cap) {
    Inv *v = (Inv *)PyCapsule_GetPointer(cap, "clawkb.inverter");
    if (v == NULL) return NULL;
    size_t T = v->hashes.len;
    free(v->tab); free(v->mark);
    v->tab = NULL; v->mark = NULL; v->mark_cap = 0;
    HashTerm *ht = (HashTerm *)malloc((T ? T : 1) * sizeof(HashTerm));
    uint32_t *rank = (uint32_t *)malloc((T ? T : 1) * 4);
    if (!ht || !rank) { free(ht); free(rank); inv_free(v); return PyErr_NoMemory(); }
    uint64_t *hs = (uint64_t *)v->hashes.p;
    for (size_t i = 0; i < T; i++) { ht[i].h = hs[i]; ht[i].t = (uint32_t)i; }
    qsort(ht, T, sizeof(HashTerm), cmp_hash);
    for (size_t i = 0; i < T; i++) { hs[i] = ht[i].h; rank[ht[i].t] = (uint32_t)i; }
    free(ht);
    uint32_t *term = (uint32_t *)v->term.p;
    for (size_t i = 0; i < v->term.len; i++) term[i] = rank[term[i]];
    free(rank);
    PyObject *r = PyTuple_New(5);
    Buf *bufs[5] = {&v->hashes, &v->term, &v->doc, &v->field, &v->tf};
    for (int i = 0; r && i < 5; i++) {
        PyObject *o = take(bufs[i]);
        if (o == NULL) { Py_CLEAR(r); break; }
        PyTuple_SET_ITEM(r, i, o);
    }
    inv_free(v);
    if (r && inv_init(v) < 0) Py_CLEAR(r);
    return r;
}

static PyMethodDef methods[] = {
    {"tokenize", tokenize, METH_VARARGS,
     "tokenize(nfkc_text, cache, expand[, stems, stem]) -> list of tokens"
     " (see clawkb.text.tokenize)"},
    {"invert_new", invert_new, METH_NOARGS, "invert_new() -> an empty inverter state"},
    {"invert_add", invert_add, METH_VARARGS,
     "invert_add(state, docs, cache, expand, stems, stem) -> bytes of uint32 field lengths"},
    {"invert_finish", invert_finish, METH_O,
     "invert_finish(state) -> (sorted hashes, rank, doc, field, tf) as bytes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_toknative",
                                    "Native hot path of clawkb's tokenizer.", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__toknative(void) {
    init_ascii();
    return PyModule_Create(&module);
}
