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

/* The reference's stemmer and its memo for this call (borrowed; NULL: no stems). */
static PyObject *g_stems = NULL, *g_stem = NULL;

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

static PyMethodDef methods[] = {
    {"tokenize", tokenize, METH_VARARGS,
     "tokenize(nfkc_text, cache, expand[, stems, stem]) -> list of tokens"
     " (see clawkb.text.tokenize)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_toknative",
                                    "Native hot path of clawkb's tokenizer.", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__toknative(void) {
    init_ascii();
    return PyModule_Create(&module);
}
