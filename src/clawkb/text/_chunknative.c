/*
 * Native token estimate of clawkb's chunker (clawkb/text/estimate.py keeps
 * the regex version as the reference and the fallback; tests check that both
 * give the same numbers).
 *
 * weight(text, start=0, end=len(text)) -> int, in tenths of a token, for
 * text[start:end] without copying it: one pass over the characters instead
 * of the reference's three ``findall`` scans and the Python sums over their
 * matches. The classes are the reference's:
 *   - a CJK character (estimate.py's CJK ranges) weighs 7;
 *   - a word, a maximal run of word characters (\w: alphanumeric or "_")
 *     that are not CJK, weighs 13 up to 5 characters, else ceil(2.5 * n);
 *   - any other character that is not whitespace (\s) weighs 5.
 * \w and \s follow Python's ``re`` on str patterns: Py_UNICODE_ISALNUM or
 * "_", and Py_UNICODE_ISSPACE.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct { Py_UCS4 lo, hi; } Range;

/* Keep in sync with CJK in estimate.py. */
static const Range CJK[] = {
    {0x3000, 0x303f}, {0x3040, 0x30ff}, {0x3100, 0x312f}, {0x3400, 0x4dbf},
    {0x4e00, 0x9fff}, {0xac00, 0xd7af}, {0xf900, 0xfaff}, {0xff00, 0xffef},
    {0x20000, 0x3134f},
};

enum { K_SPACE = 0, K_WORD = 1, K_SYMBOL = 2, K_CJK = 3 };

static unsigned char ascii_kind[128];

static void init_ascii(void) {
    for (int c = 0; c < 128; c++) {
        if (Py_UNICODE_ISSPACE((Py_UCS4)c)) ascii_kind[c] = K_SPACE;
        else if (Py_UNICODE_ISALNUM((Py_UCS4)c) || c == '_') ascii_kind[c] = K_WORD;
        else ascii_kind[c] = K_SYMBOL;
    }
}

static inline int is_cjk(Py_UCS4 c) {
    for (size_t i = 0; i < sizeof CJK / sizeof CJK[0]; i++) {
        if (c < CJK[i].lo) return 0; /* ranges are sorted */
        if (c <= CJK[i].hi) return 1;
    }
    return 0;
}

static inline int kind_of(Py_UCS4 c) {
    if (c < 128) return ascii_kind[c];
    if (c >= 0x3000 && is_cjk(c)) return K_CJK;
    if (Py_UNICODE_ISALNUM(c)) return K_WORD;
    return Py_UNICODE_ISSPACE(c) ? K_SPACE : K_SYMBOL;
}

static inline long long word_weight(Py_ssize_t n) {
    return n > 5 ? (long long)((n * 5 + 1) / 2) : 13;
}

static PyObject *weight(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *text;
    Py_ssize_t start = 0, end = PY_SSIZE_T_MAX;
    if (!PyArg_ParseTuple(args, "U|nn", &text, &start, &end)) return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    /* slice semantics for the bounds (the callers pass 0 <= start <= end <= n) */
    if (start < 0) start = n + start < 0 ? 0 : n + start;
    if (end < 0) end = n + end < 0 ? 0 : n + end;
    if (end > n) end = n;
    if (start > end) start = end;
    int ukind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    long long total = 0;
    Py_ssize_t word = 0; /* length of the word being read */
    if (ukind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *s = (const Py_UCS1 *)data;
        for (Py_ssize_t i = start; i < end; i++) {
            int k = kind_of(s[i]);
            if (k == K_WORD) { word++; continue; }
            if (word) { total += word_weight(word); word = 0; }
            if (k == K_SYMBOL) total += 5;
            else if (k == K_CJK) total += 7;
        }
    } else {
        for (Py_ssize_t i = start; i < end; i++) {
            int k = kind_of(PyUnicode_READ(ukind, data, i));
            if (k == K_WORD) { word++; continue; }
            if (word) { total += word_weight(word); word = 0; }
            if (k == K_SYMBOL) total += 5;
            else if (k == K_CJK) total += 7;
        }
    }
    if (word) total += word_weight(word);
    return PyLong_FromLongLong(total);
}

static PyMethodDef methods[] = {
    {"weight", weight, METH_VARARGS,
     "weight(text, start=0, end=len(text)) -> token estimate of text[start:end] in tenths"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_chunknative",
                                    "Native token estimate of clawkb's chunker.", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__chunknative(void) {
    init_ascii();
    return PyModule_Create(&module);
}
