/*
 * Exact block-max MaxScore top-k over one lexical segment.
 *
 * Same scores and the same top-k (ties: smaller doc number first) as the
 * exhaustive term-at-a-time kernel in _bm25native.c, while skipping what
 * cannot reach the k-th best score so far (theta). Docs are taken in windows
 * of WINDOW doc numbers; in each window:
 *
 *  - every term's bound is its largest block bound inside the window; terms
 *    are ordered by it and the prefix whose bounds sum to less than theta is
 *    "non-essential" (a doc matching only those cannot enter); a window whose
 *    bounds all together stay below theta is skipped without reading postings
 *    (this is where long, low-idf lists such as CJK unigrams are skipped);
 *  - essential terms are added term at a time into a window accumulator;
 *  - each candidate then gets its non-essential terms (found by skipping
 *    blocks) only while its partial score plus the remaining bounds can still
 *    reach theta; survivors are scored exactly.
 *
 * Block bounds come from per-block max term frequency and min field length
 * (see blocks.py), evaluated with the current BM25F parameters, inflated by a
 * small relative slack so float rounding can never prune a doc that belongs.
 * Final scores are summed in the caller's term order, as the exhaustive
 * kernel does, so they are bit-identical.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 128
#define SLACK 1.0005f
#define WINDOW 16384 /* docs per window (a multiple of 64): measured best of 1k-64k at 100k docs */

#include "_topk.h"
#include "_packed.h"

typedef struct {
    int64_t s, e, pos;   /* posting range and cursor */
    int64_t b0;          /* first block of the term */
    const float *bub;    /* bound of each of its blocks */
    float ub, w;         /* largest block bound; idf x query weight */
    float wub;           /* largest block bound inside the current window */
    int64_t cb;          /* block decoded into bd/bt (-1: none) */
    uint32_t bd[BLOCK];  /* its docs */
    uint8_t bt[3 * BLOCK]; /* its term frequencies, one row per posting */
} Term;

typedef struct {
    const uint8_t *packed;   /* bit-packed blocks (_packed.h) */
    const uint32_t *blk_pos; /* byte offset of each block */
    const uint32_t *blk_last;/* last doc of each block */
    const uint8_t *maxtf;    /* per-block max tf per field (also the tf bit widths) */
    const float *factor;
} Seg;

static inline int64_t block_of(const Term *t, int64_t pos) { return t->b0 + (pos - t->s) / BLOCK; }

static inline int64_t block_start(const Term *t, int64_t b) { return t->s + (b - t->b0) * BLOCK; }

/* One past the last posting of block b (a block's last doc is blk_last[b]). */
static inline int64_t block_end(const Term *t, int64_t b) {
    int64_t end = block_start(t, b) + BLOCK;
    return end < t->e ? end : t->e;
}

/* Decode block b of term t unless it is the one held already. */
static inline void ensure_block(const Seg *g, Term *t, int64_t b) {
    if (t->cb == b) return;
    int64_t st = block_start(t, b);
    decode_block(g->packed, g->blk_pos, g->blk_last, g->maxtf, b, b == t->b0,
                 (int)(block_end(t, b) - st), t->bd, t->bt);
    t->cb = b;
}

/* Doc of posting p (decodes its block when needed); p must be in [s, e). */
static inline uint32_t doc_at(const Seg *g, Term *t, int64_t p) {
    int64_t b = block_of(t, p);
    ensure_block(g, t, b);
    return t->bd[p - block_start(t, b)];
}

static inline uint32_t cur_doc(const Seg *g, Term *t) {
    return t->pos < t->e ? doc_at(g, t, t->pos) : UINT32_MAX;
}

/* Move the cursor to the first posting >= d (never backwards); blocks whose
   last doc is below d are passed over without decoding them. */
static void seek(const Seg *g, Term *t, uint32_t d) {
    if (t->pos >= t->e) return;
    int64_t b = block_of(t, t->pos), b_end = block_of(t, t->e - 1) + 1;
    while (b < b_end && g->blk_last[b] < d) b++;
    if (b == b_end) { t->pos = t->e; return; }
    int64_t st = block_start(t, b), p = st > t->pos ? st : t->pos;
    ensure_block(g, t, b);
    while (t->bd[p - st] < d) p++; /* stops inside block b: its last doc is >= d */
    t->pos = p;
}

/* Term frequencies of the cursor's posting (its block is decoded). */
static inline float contribution(const Seg *g, Term *t, uint32_t d, float k1) {
    const uint8_t *tf = t->bt + 3 * (t->pos - block_start(t, t->cb));
    const float *f = g->factor + 3 * (size_t)d;
    float x = tf[0] * f[0] + tf[1] * f[1] + tf[2] * f[2];
    if (x <= 0.0f) return 0.0f;
    return t->w * x * (k1 + 1.0f) / (x + k1);
}

static int get_buf(PyObject *o, Py_buffer *b, const char *what) {
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Format(PyExc_TypeError, "%s must be a contiguous buffer", what);
        return -1;
    }
    return 0;
}

static PyObject *topk(PyObject *self, PyObject *args) {
    PyObject *o_packed, *o_pos, *o_last, *o_fac, *o_ranges, *o_blk0, *o_maxtf, *o_minlen, *o_w;
    PyObject *o_live, *o_par, *o_out_docs, *o_out_scores;
    float k1;
    Py_ssize_t n_docs;
    double theta0;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOfnOOd", &o_packed, &o_pos, &o_last, &o_fac, &o_ranges, &o_blk0,
                          &o_maxtf, &o_minlen, &o_w, &o_live, &o_par, &k1, &n_docs,
                          &o_out_docs, &o_out_scores, &theta0))
        return NULL;
    Py_buffer b[14];
    PyObject *objs[14] = {o_packed, o_pos, o_fac, o_ranges, o_blk0, o_maxtf, o_minlen,
                          o_w, o_par, o_out_docs, o_out_scores, o_last, o_live};
    const char *names[14] = {"packed", "blk_pos", "factor", "ranges", "first_blocks",
                             "blk_maxtf", "blk_minlen", "weights", "params", "out_docs",
                             "out_scores", "blk_last", "live"};
    int n_bufs = o_live == Py_None ? 12 : 13, got = 0;
    for (; got < n_bufs; got++)
        if (get_buf(objs[got], &b[got], names[got]) < 0) goto fail_bufs;

    Seg g = {b[0].buf, b[1].buf, b[11].buf, b[5].buf, b[2].buf};
    const int64_t *ranges = b[3].buf, *blk0 = b[4].buf;
    const uint8_t *maxtf = b[5].buf;
    const uint16_t *minlen = b[6].buf;
    const float *wts = b[7].buf, *par = b[8].buf; /* par: weight[3], b[3], avg[3] */
    const uint8_t *live = o_live == Py_None ? NULL : b[12].buf;
    Py_ssize_t T = b[7].len / (Py_ssize_t)sizeof(float);
    Py_ssize_t k = b[9].len / (Py_ssize_t)sizeof(int64_t);
    int64_t *out_docs = b[9].buf;
    float *out_scores = b[10].buf;

    Term *terms = calloc(T ? T : 1, sizeof(Term));
    Py_ssize_t *ord = calloc(T ? T : 1, sizeof(Py_ssize_t));
    float *prefix = calloc(T + 1, sizeof(float));
    Entry *heap = calloc(k ? k : 1, sizeof(Entry));
    float *acc = malloc(WINDOW * sizeof(float));
    uint64_t *bits = malloc(WINDOW / 8);
    int64_t total_blocks = 0;
    for (Py_ssize_t t = 0; t < T; t++) {
        int64_t n = ranges[2 * t + 1] - ranges[2 * t];
        if (n > 0) total_blocks += (n + BLOCK - 1) / BLOCK;
    }
    float *bub = malloc((total_blocks ? total_blocks : 1) * sizeof(float));
    if (!terms || !ord || !prefix || !heap || !bub || !acc || !bits) {
        PyErr_NoMemory();
        goto fail;
    }
    /* block bounds with the current parameters */
    float kp1 = k1 + 1.0f;
    int64_t used = 0;
    for (Py_ssize_t t = 0; t < T; t++) {
        Term *tm = &terms[t];
        tm->s = tm->pos = ranges[2 * t];
        tm->e = ranges[2 * t + 1];
        tm->b0 = blk0[t];
        tm->w = wts[t];
        tm->bub = bub + used;
        tm->cb = -1;
        if (tm->e <= tm->s) { tm->e = tm->s; continue; }
        int64_t nb = (tm->e - tm->s + BLOCK - 1) / BLOCK;
        for (int64_t j = 0; j < nb; j++) {
            int64_t blk = tm->b0 + j;
            float x = 0.0f;
            for (int f = 0; f < 3; f++) {
                float denom = (1.0f - par[3 + f]) + par[3 + f] * (float)minlen[3 * blk + f] / par[6 + f];
                if (denom > 0.0f) x += (float)maxtf[3 * blk + f] * (par[f] / denom);
            }
            float u = x > 0.0f ? tm->w * x * kp1 / (x + k1) * SLACK : 0.0f;
            bub[used + j] = u;
            if (u > tm->ub) tm->ub = u;
        }
        used += nb;
    }
    /* Windows of WINDOW docs. In each: every term's bound is its largest
     * block bound inside the window; terms sorted by it, the prefix summing
     * below theta is non-essential. Essential postings are added term at a
     * time into acc (a pruning estimate); each candidate then gets the
     * non-essential terms while it can still reach theta, and survivors are
     * scored exactly, summing contributions in the caller's term order. */
    Py_ssize_t h = 0, scored = 0;
    float theta = (float)theta0;
    uint32_t max_doc = 0;
    for (Py_ssize_t t = 0; t < T; t++)
        if (terms[t].e > terms[t].s && g.blk_last[block_of(&terms[t], terms[t].e - 1)] + 1 > max_doc)
            max_doc = g.blk_last[block_of(&terms[t], terms[t].e - 1)] + 1;
    for (uint32_t lo = 0; lo < max_doc; lo += WINDOW) {
        uint32_t hi = lo + WINDOW;
        Py_ssize_t nt = 0;
        for (Py_ssize_t t = 0; t < T; t++) {
            Term *tm = &terms[t];
            seek(&g, tm, lo);
            tm->wub = 0.0f;
            if (cur_doc(&g, tm) >= hi) continue;
            int64_t blk = block_of(tm, tm->pos), b_end = block_of(tm, tm->e - 1) + 1;
            for (; blk < b_end; blk++) {
                /* a lower bound of the block's first doc: may admit one block too many */
                if (blk > tm->b0 && g.blk_last[blk - 1] + 1 >= hi) break;
                if (tm->bub[blk - tm->b0] > tm->wub) tm->wub = tm->bub[blk - tm->b0];
            }
            /* insertion by ascending window bound */
            Py_ssize_t j = nt++;
            while (j > 0 && terms[ord[j - 1]].wub > tm->wub) { ord[j] = ord[j - 1]; j--; }
            ord[j] = t;
        }
        if (nt == 0) continue;
        for (Py_ssize_t i = 0; i < nt; i++) prefix[i + 1] = prefix[i] + terms[ord[i]].wub;
        if (prefix[nt] < theta) continue; /* nothing in this window can enter */
        Py_ssize_t ne = 0;
        while (ne < nt && prefix[ne + 1] < theta) ne++;
        /* essential terms, term at a time */
        memset(bits, 0, sizeof(uint64_t) * (WINDOW / 64));
        for (Py_ssize_t i = ne; i < nt; i++) {
            Term *tm = &terms[ord[i]];
            for (int64_t p = tm->pos; p < tm->e; p++) {
                uint32_t d = doc_at(&g, tm, p);
                if (d >= hi) break;
                const uint8_t *tf = tm->bt + 3 * (p - block_start(tm, tm->cb));
                const float *f = g.factor + 3 * (size_t)d;
                float x = tf[0] * f[0] + tf[1] * f[1] + tf[2] * f[2];
                if (x <= 0.0f) continue;
                uint32_t r = d - lo;
                if (!(bits[r >> 6] & (1ULL << (r & 63)))) { bits[r >> 6] |= 1ULL << (r & 63); acc[r] = 0.0f; }
                acc[r] += tm->w * x * kp1 / (x + k1);
            }
        }
        /* candidates in doc order */
        for (uint32_t word = 0; word < WINDOW / 64; word++) {
            uint64_t m = bits[word];
            while (m) {
                uint32_t r = word * 64 + (uint32_t)__builtin_ctzll(m);
                m &= m - 1;
                uint32_t d = lo + r;
                if ((Py_ssize_t)d >= n_docs || (live && !live[d])) continue;
                float partial = acc[r];
                int pruned = 0;
                for (Py_ssize_t i = ne - 1; i >= 0; i--) {
                    Term *tm = &terms[ord[i]];
                    if ((partial + prefix[i + 1]) * SLACK < theta) { pruned = 1; break; }
                    seek(&g, tm, d);
                    if (cur_doc(&g, tm) != d) continue;
                    partial += contribution(&g, tm, d, k1);
                }
                if (pruned || partial * SLACK < theta) continue;
                /* exact score in the caller's term order */
                float score = 0.0f;
                for (Py_ssize_t t = 0; t < T; t++) {
                    Term *tm = &terms[t];
                    seek(&g, tm, d); /* candidates ascend: cursors only move forward */
                    if (cur_doc(&g, tm) == d) score += contribution(&g, tm, d, k1);
                }
                scored++;
                if (score <= 0.0f) continue;
                Entry en = {score, d};
                if (h < k) {
                    Py_ssize_t i = h++;
                    heap[i] = en;
                    while (i > 0 && entry_less(heap[i], heap[(i - 1) / 2])) {
                        Entry tmp = heap[i]; heap[i] = heap[(i - 1) / 2]; heap[(i - 1) / 2] = tmp;
                        i = (i - 1) / 2;
                    }
                } else if (k > 0 && entry_less(heap[0], en)) {
                    heap[0] = en;
                    sift_down(heap, h, 0);
                }
                if (h == k && k > 0 && heap[0].score > theta) theta = heap[0].score;
            }
        }
    }
    /* heap -> descending score, ascending doc on ties */
    Py_ssize_t n_out = h;
    while (h > 0) {
        Entry top = heap[0];
        heap[0] = heap[--h];
        sift_down(heap, h, 0);
        out_docs[h] = top.doc;
        out_scores[h] = top.score;
    }
    free(terms); free(ord); free(prefix); free(heap); free(bub); free(acc); free(bits);
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    return Py_BuildValue("(nn)", n_out, scored);
fail:
    free(terms); free(ord); free(prefix); free(heap); free(bub); free(acc); free(bits);
fail_bufs:
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    return NULL;
}

static PyMethodDef methods[] = {
    {"topk", topk, METH_VARARGS,
     "topk(packed, blk_pos, blk_last, factor, ranges, first_blocks, blk_maxtf, blk_minlen, weights,"
     " live, params, k1, n_docs, out_docs, out_scores, theta0) -> (n_out, n_scored)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_blockmax",
                                    "Exact block-max MaxScore top-k for clawkb segments.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__blockmax(void) { return PyModule_Create(&module); }
