/*
 * Native BM25F scoring for one index segment.
 *
 * Postings of a segment are three parallel arrays: local doc numbers (uint32),
 * per-field term frequencies (uint8 x 3, interleaved) and, per doc, a
 * precomputed field factor w_f / B_f(doc) (float32 x 3). For every query term
 * the caller passes the [start, end) range of its postings and a weight
 * (idf x query weight). We accumulate
 *
 *     score(d) += weight * t / (t + k1) * (k1 + 1),   t = sum_f tf_f * factor_f(d)
 *
 * into a scratch array, then keep the best k live docs with a min-heap.
 * Buffers come in through the buffer protocol, so no numpy headers are needed.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct { float score; uint32_t doc; } Entry;

static inline int entry_less(Entry a, Entry b) {
    /* lower score first; on ties the larger doc number is "smaller" so the
       smaller doc number wins a place in the top k (deterministic order) */
    if (a.score != b.score) return a.score < b.score;
    return a.doc > b.doc;
}

static void sift_down(Entry *h, Py_ssize_t n, Py_ssize_t i) {
    for (;;) {
        Py_ssize_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && entry_less(h[l], h[m])) m = l;
        if (r < n && entry_less(h[r], h[m])) m = r;
        if (m == i) return;
        Entry t = h[i]; h[i] = h[m]; h[m] = t; i = m;
    }
}

static int get_buf(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, const char *name) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (itemsize && view->itemsize != itemsize && view->len % itemsize != 0) {
        PyErr_Format(PyExc_ValueError, "%s: unexpected item size", name);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *score_topk(PyObject *self, PyObject *args) {
    PyObject *o_docs, *o_tfs, *o_factor, *o_ranges, *o_weights, *o_live, *o_out_docs, *o_out_scores;
    double k1;
    Py_ssize_t n_docs;
    if (!PyArg_ParseTuple(args, "OOOOOOdnOO", &o_docs, &o_tfs, &o_factor, &o_ranges, &o_weights,
                          &o_live, &k1, &n_docs, &o_out_docs, &o_out_scores))
        return NULL;

    Py_buffer b_docs = {0}, b_tfs = {0}, b_factor = {0}, b_ranges = {0}, b_weights = {0};
    Py_buffer b_live = {0}, b_od = {0}, b_os = {0};
    int have_live = (o_live != Py_None);
    PyObject *result = NULL;
    float *acc = NULL;
    uint32_t *touched = NULL;
    Entry *heap = NULL;

    if (get_buf(o_docs, &b_docs, 4, "docs") < 0) goto fail0;
    if (get_buf(o_tfs, &b_tfs, 1, "tfs") < 0) goto fail1;
    if (get_buf(o_factor, &b_factor, 4, "factor") < 0) goto fail2;
    if (get_buf(o_ranges, &b_ranges, 8, "ranges") < 0) goto fail3;
    if (get_buf(o_weights, &b_weights, 4, "weights") < 0) goto fail4;
    if (have_live && get_buf(o_live, &b_live, 1, "live") < 0) goto fail5;
    if (get_buf(o_out_docs, &b_od, 8, "out_docs") < 0) goto fail6;
    if (get_buf(o_out_scores, &b_os, 4, "out_scores") < 0) goto fail7;

    const uint32_t *docs = (const uint32_t *)b_docs.buf;
    const uint8_t *tfs = (const uint8_t *)b_tfs.buf;
    const float *factor = (const float *)b_factor.buf;
    const int64_t *ranges = (const int64_t *)b_ranges.buf;
    const float *weights = (const float *)b_weights.buf;
    const uint8_t *live = have_live ? (const uint8_t *)b_live.buf : NULL;
    int64_t *out_docs = (int64_t *)b_od.buf;
    float *out_scores = (float *)b_os.buf;
    Py_ssize_t n_terms = b_weights.len / 4;
    Py_ssize_t k = b_od.len / 8;
    Py_ssize_t n_post = b_docs.len / 4;
    if (b_os.len / 4 < k) k = b_os.len / 4;
    if (b_ranges.len / 8 < 2 * n_terms || b_factor.len / 4 < 3 * n_docs ||
        (have_live && b_live.len < n_docs) || b_tfs.len < 3 * n_post) {
        PyErr_SetString(PyExc_ValueError, "score_topk: inconsistent buffer sizes");
        goto done;
    }

    Py_ssize_t n_touched = 0, n_heap = 0;
    float kp1 = (float)(k1 + 1.0), fk1 = (float)k1;
    Py_BEGIN_ALLOW_THREADS
    acc = (float *)calloc((size_t)(n_docs > 0 ? n_docs : 1), sizeof(float));
    touched = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)(n_docs > 0 ? n_docs : 1));
    heap = (Entry *)malloc(sizeof(Entry) * (size_t)(k > 0 ? k : 1));
    if (acc && touched && heap) {
        for (Py_ssize_t t = 0; t < n_terms; t++) {
            int64_t s = ranges[2 * t], e = ranges[2 * t + 1];
            if (s < 0) s = 0;
            if (e > n_post) e = n_post;
            float w = weights[t];
            for (int64_t p = s; p < e; p++) {
                uint32_t d = docs[p];
                if ((Py_ssize_t)d >= n_docs) continue;
                const uint8_t *tf = tfs + 3 * p;
                const float *f = factor + 3 * (size_t)d;
                float x = tf[0] * f[0] + tf[1] * f[1] + tf[2] * f[2];
                if (x <= 0.0f) continue;
                if (acc[d] == 0.0f) touched[n_touched++] = d;
                acc[d] += w * x * kp1 / (x + fk1);
            }
        }
        for (Py_ssize_t i = 0; i < n_touched && k > 0; i++) {
            uint32_t d = touched[i];
            if (live && !live[d]) continue;
            Entry en = {acc[d], d};
            if (n_heap < k) {
                heap[n_heap++] = en;
                /* sift up */
                Py_ssize_t c = n_heap - 1;
                while (c > 0) {
                    Py_ssize_t par = (c - 1) / 2;
                    if (!entry_less(heap[c], heap[par])) break;
                    Entry tmp = heap[c]; heap[c] = heap[par]; heap[par] = tmp; c = par;
                }
            } else if (entry_less(heap[0], en)) {
                heap[0] = en;
                sift_down(heap, n_heap, 0);
            }
        }
        /* pop in ascending order, write descending */
        Py_ssize_t n_out = n_heap;
        while (n_heap > 0) {
            Entry top = heap[0];
            heap[0] = heap[--n_heap];
            sift_down(heap, n_heap, 0);
            out_docs[n_heap] = (int64_t)top.doc;
            out_scores[n_heap] = top.score;
        }
        n_heap = n_out;
    }
    Py_END_ALLOW_THREADS
    if (!acc || !touched || !heap) {
        PyErr_NoMemory();
        goto done;
    }
    result = Py_BuildValue("nn", n_heap, n_touched);

done:
    free(acc); free(touched); free(heap);
    PyBuffer_Release(&b_os);
fail7:
    PyBuffer_Release(&b_od);
fail6:
    if (have_live) PyBuffer_Release(&b_live);
fail5:
    PyBuffer_Release(&b_weights);
fail4:
    PyBuffer_Release(&b_ranges);
fail3:
    PyBuffer_Release(&b_factor);
fail2:
    PyBuffer_Release(&b_tfs);
fail1:
    PyBuffer_Release(&b_docs);
fail0:
    return result;
}

static PyMethodDef methods[] = {
    {"score_topk", score_topk, METH_VARARGS,
     "score_topk(docs, tfs, factor, ranges, weights, live, k1, n_docs, out_docs, out_scores)"
     " -> (n_out, n_matched)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_bm25native",
                                    "Native BM25F top-k scoring for clawkb.", -1, methods};

PyMODINIT_FUNC PyInit__bm25native(void) { return PyModule_Create(&module); }
