/* The top-k min-heap both native kernels keep (_bm25native.c, _blockmax.c).
   Include after <Python.h> and <stdint.h>. */
#ifndef CLAWKB_TOPK_H
#define CLAWKB_TOPK_H

typedef struct { float score; int64_t doc; } Entry; /* doc: a doc number or chunk id */

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

#endif
