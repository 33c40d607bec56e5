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

#include "_topk.h"

/* Add one term's BM25F contributions to acc; record newly touched docs.
 * Returns the largest pseudo-frequency x met (the term's tightest bound). */
static float scan_term(const uint32_t *docs, const uint8_t *tfs, const float *factor,
                       int64_t s, int64_t e, Py_ssize_t n_docs, float w, float k1,
                       float *acc, uint32_t *touched, Py_ssize_t *n_touched, float *max_acc) {
    float kp1 = k1 + 1.0f, mx = 0.0f;
    for (int64_t p = s; p < e; p++) {
        uint32_t d = docs[p];
        if ((Py_ssize_t)d >= n_docs) continue;
        const uint8_t *tf = tfs + 3 * p;
        const float *f = factor + 3 * (size_t)d;
        float x = tf[0] * f[0] + tf[1] * f[1] + tf[2] * f[2];
        if (x <= 0.0f) continue;
        if (x > mx) mx = x;
        if (acc[d] == 0.0f) touched[(*n_touched)++] = d;
        acc[d] += w * x * kp1 / (x + k1);
        if (acc[d] > *max_acc) *max_acc = acc[d];
    }
    return mx;
}

/* Best k live docs among touched, written best first; returns how many. */
static Py_ssize_t select_topk(const float *acc, const uint32_t *touched, Py_ssize_t n_touched,
                              const uint8_t *live, Py_ssize_t k, Entry *heap,
                              int64_t *out_docs, float *out_scores) {
    Py_ssize_t n_heap = 0;
    for (Py_ssize_t i = 0; i < n_touched && k > 0; i++) {
        uint32_t d = touched[i];
        if (live && !live[d]) continue;
        Entry en = {acc[d], d};
        if (n_heap < k) {
            heap[n_heap++] = en;
            Py_ssize_t c = n_heap - 1; /* sift up */
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
    Py_ssize_t n_out = n_heap;
    while (n_heap > 0) { /* pop in ascending order, write descending */
        Entry top = heap[0];
        heap[0] = heap[--n_heap];
        sift_down(heap, n_heap, 0);
        out_docs[n_heap] = (int64_t)top.doc;
        out_scores[n_heap] = top.score;
    }
    return n_out;
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

static PyObject *score_topk(PyObject *Py_UNUSED(self), PyObject *args) {
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
    float fk1 = (float)k1;
    Py_BEGIN_ALLOW_THREADS
    acc = (float *)calloc((size_t)(n_docs > 0 ? n_docs : 1), sizeof(float));
    touched = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)(n_docs > 0 ? n_docs : 1));
    heap = (Entry *)malloc(sizeof(Entry) * (size_t)(k > 0 ? k : 1));
    if (acc && touched && heap) {
        for (Py_ssize_t t = 0; t < n_terms; t++) {
            int64_t s = ranges[2 * t], e = ranges[2 * t + 1];
            if (s < 0) s = 0;
            if (e > n_post) e = n_post;
            float unused = 0.0f;
            scan_term(docs, tfs, factor, s, e, n_docs, weights[t], fk1, acc, touched, &n_touched,
                      &unused);
        }
        n_heap = select_topk(acc, touched, n_touched, live, k, heap, out_docs, out_scores);
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


/* ---------------------------------------------------------------------------
 * Top-k with MaxScore-style pruning.
 *
 * Terms arrive sorted by their upper bound (largest first). They are scored
 * term-at-a-time until the bounds of the remaining terms together cannot lift
 * an unseen doc past the current k-th best partial score theta. From then on
 * only docs that can still reach theta are completed, by binary search in the
 * remaining (doc-sorted) posting lists. The result equals the exhaustive
 * top k. For every fully scanned term the largest x seen is reported, so the
 * caller can tighten that term's bound next time.
 * ------------------------------------------------------------------------- */
static float kth_largest(const float *acc, const uint32_t *touched, Py_ssize_t n,
                         const uint8_t *live, Py_ssize_t k, float *scratch) {
    Py_ssize_t m = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t d = touched[i];
        if (live && !live[d]) continue;
        scratch[m++] = acc[d];
    }
    if (m < k) return -1.0f;
    /* quickselect for the k-th largest */
    Py_ssize_t lo = 0, hi = m - 1, want = k - 1;
    while (lo < hi) {
        float pivot = scratch[(lo + hi) / 2];
        Py_ssize_t i = lo, j = hi;
        while (i <= j) {
            while (scratch[i] > pivot) i++;
            while (scratch[j] < pivot) j--;
            if (i <= j) { float t = scratch[i]; scratch[i] = scratch[j]; scratch[j] = t; i++; j--; }
        }
        if (want <= j) hi = j; else if (want >= i) lo = i; else break;
    }
    return scratch[want];
}

static PyObject *score_topk_pruned(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *o_docs, *o_tfs, *o_factor, *o_ranges, *o_weights, *o_ubs, *o_live, *o_od, *o_os, *o_mx;
    double k1, theta0;
    Py_ssize_t n_docs;
    if (!PyArg_ParseTuple(args, "OOOOOOOdnOOOd", &o_docs, &o_tfs, &o_factor, &o_ranges, &o_weights,
                          &o_ubs, &o_live, &k1, &n_docs, &o_od, &o_os, &o_mx, &theta0))
        return NULL;
    Py_buffer b[10];
    PyObject *objs[10] = {o_docs, o_tfs, o_factor, o_ranges, o_weights, o_ubs, o_live, o_od, o_os, o_mx};
    int have_live = (o_live != Py_None), got = 0;
    PyObject *result = NULL;
    float *acc = NULL, *scratch = NULL;
    uint32_t *touched = NULL, *cand = NULL;
    Entry *heap = NULL;
    memset(b, 0, sizeof(b));
    for (got = 0; got < 10; got++) {
        if (got == 6 && !have_live) continue;
        if (PyObject_GetBuffer(objs[got], &b[got], PyBUF_C_CONTIGUOUS) < 0) goto release;
    }
    const uint32_t *docs = (const uint32_t *)b[0].buf;
    const uint8_t *tfs = (const uint8_t *)b[1].buf;
    const float *factor = (const float *)b[2].buf;
    const int64_t *ranges = (const int64_t *)b[3].buf;
    const float *weights = (const float *)b[4].buf;
    const float *ubs = (const float *)b[5].buf;
    const uint8_t *live = have_live ? (const uint8_t *)b[6].buf : NULL;
    int64_t *out_docs = (int64_t *)b[7].buf;
    float *out_scores = (float *)b[8].buf;
    float *out_maxx = (float *)b[9].buf;
    Py_ssize_t n_terms = b[4].len / 4, k = b[7].len / 8, n_post = b[0].len / 4;
    if (b[8].len / 4 < k) k = b[8].len / 4;
    if (b[3].len / 8 < 2 * n_terms || b[5].len / 4 < n_terms || b[9].len / 4 < n_terms ||
        b[2].len / 4 < 3 * n_docs || (have_live && b[6].len < n_docs) || b[1].len < 3 * n_post) {
        PyErr_SetString(PyExc_ValueError, "score_topk_pruned: inconsistent buffer sizes");
        goto release;
    }
    Py_ssize_t n_touched = 0, n_heap = 0, n_cand = 0, t = 0;
    int oom = 0;
    float kp1 = (float)(k1 + 1.0), fk1 = (float)k1;
    Py_BEGIN_ALLOW_THREADS
    size_t nd = (size_t)(n_docs > 0 ? n_docs : 1);
    acc = (float *)calloc(nd, sizeof(float));
    touched = (uint32_t *)malloc(nd * sizeof(uint32_t));
    scratch = (float *)malloc(nd * sizeof(float));
    heap = (Entry *)malloc(sizeof(Entry) * (size_t)(k > 0 ? k : 1));
    if (!acc || !touched || !scratch || !heap) oom = 1;
    float rest = 0.0f;
    for (Py_ssize_t u = 0; u < n_terms; u++) { rest += ubs[u]; out_maxx[u] = -1.0f; }
    /* theta0: the k-th best score already found elsewhere (other segments) */
    float theta = theta0 > 0.0 ? (float)theta0 : -1.0f, max_acc = 0.0f;
    while (!oom && t < n_terms) {
        /* stop scanning once unseen docs cannot reach theta */
        if (theta >= 0.0f && rest < theta) break;
        int64_t s = ranges[2 * t], e = ranges[2 * t + 1];
        if (s < 0) s = 0;
        if (e > n_post) e = n_post;
        float mx = scan_term(docs, tfs, factor, s, e, n_docs, weights[t], fk1, acc, touched,
                             &n_touched, &max_acc);
        out_maxx[t] = mx;
        rest -= ubs[t];
        if (rest < 0.0f) rest = 0.0f;
        t++;
        /* theta <= max_acc, so stopping needs rest < max_acc: skip the O(touched)
           selection while that cannot hold */
        if (t < n_terms && k > 0 && rest < max_acc) {
            float th = kth_largest(acc, touched, n_touched, live, k, scratch);
            if (th > theta) theta = th;
        }
    }
    /* complete the candidates that can still reach theta */
    if (!oom && t < n_terms) {
        cand = (uint32_t *)malloc(nd * sizeof(uint32_t));
        if (!cand) oom = 1;
        for (Py_ssize_t i = 0; !oom && i < n_touched; i++) {
            uint32_t d = touched[i];
            if (live && !live[d]) continue;
            if (acc[d] + rest >= theta) cand[n_cand++] = d;
        }
        for (Py_ssize_t u = t; !oom && u < n_terms; u++) {
            int64_t s = ranges[2 * u], e = ranges[2 * u + 1];
            if (s < 0) s = 0;
            if (e > n_post) e = n_post;
            if (e <= s) continue;
            float w = weights[u];
            if ((int64_t)n_cand * 16 > e - s) {
                /* many candidates: one sequential pass beats binary searches
                   (it also adds to non-candidates, which no longer compete) */
                float unused = 0.0f;
                scan_term(docs, tfs, factor, s, e, n_docs, w, fk1, acc, touched + n_touched,
                          &(Py_ssize_t){0}, &unused);
                continue;
            }
            for (Py_ssize_t i = 0; i < n_cand; i++) {
                uint32_t d = cand[i];
                int64_t lo = s, hi = e;
                while (lo < hi) {
                    int64_t mid = lo + (hi - lo) / 2;
                    if (docs[mid] < d) lo = mid + 1; else hi = mid;
                }
                if (lo < e && docs[lo] == d) {
                    const uint8_t *tf = tfs + 3 * lo;
                    const float *f = factor + 3 * (size_t)d;
                    float x = tf[0] * f[0] + tf[1] * f[1] + tf[2] * f[2];
                    if (x > 0.0f) acc[d] += w * x * kp1 / (x + fk1);
                }
            }
        }
        /* only candidates compete from here */
        memcpy(touched, cand, (size_t)n_cand * sizeof(uint32_t));
        n_touched = n_cand;
    }
    if (!oom) n_heap = select_topk(acc, touched, n_touched, live, k, heap, out_docs, out_scores);
    Py_END_ALLOW_THREADS
    if (oom) { PyErr_NoMemory(); goto release; }
    result = Py_BuildValue("nnn", n_heap, n_touched, t);
release:
    free(acc); free(touched); free(scratch); free(cand); free(heap);
    for (int i = 0; i < 10; i++) if (b[i].obj) PyBuffer_Release(&b[i]);
    return result;
}

/* ---------------------------------------------------------------------------
 * Term hashing and batch inversion.
 *
 * Terms are identified by a stable 64-bit hash: FNV-1a over the UTF-8 bytes,
 * finished with the splitmix64 mixer. clawkb.index.segment.term_hash computes
 * the same value in pure Python for the fallback path.
 * ------------------------------------------------------------------------- */
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t hash_bytes(const char *s, Py_ssize_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3ULL;
    }
    return mix64(h);
}

static int hash_str(PyObject *o, uint64_t *out) {
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(o, &n);
    if (!s) return -1;
    *out = hash_bytes(s, n);
    return 0;
}

static PyObject *term_hashes(PyObject *Py_UNUSED(self), PyObject *arg) {
    PyObject *seq = PySequence_Fast(arg, "term_hashes expects a sequence of str");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * 8);
    if (!out) { Py_DECREF(seq); return NULL; }
    uint64_t *dst = (uint64_t *)PyBytes_AS_STRING(out);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (hash_str(items[i], &dst[i]) < 0) { Py_DECREF(seq); Py_DECREF(out); return NULL; }
    }
    Py_DECREF(seq);
    return out;
}

typedef struct {
    uint64_t *keys;   /* hash per slot, 0 = empty (a real hash of 0 is remapped) */
    uint32_t *vals;   /* term number per slot */
    size_t cap;       /* power of two */
    size_t used;
} Table;

static int table_init(Table *t, size_t cap) {
    t->cap = cap; t->used = 0;
    t->keys = (uint64_t *)calloc(cap, sizeof(uint64_t));
    t->vals = (uint32_t *)malloc(cap * sizeof(uint32_t));
    return (t->keys && t->vals) ? 0 : -1;
}

static void table_free(Table *t) { free(t->keys); free(t->vals); }

static int table_grow(Table *t) {
    Table n;
    if (table_init(&n, t->cap * 2) < 0) { table_free(&n); return -1; }
    for (size_t i = 0; i < t->cap; i++) {
        uint64_t k = t->keys[i];
        if (!k) continue;
        size_t j = (size_t)k & (n.cap - 1);
        while (n.keys[j]) j = (j + 1) & (n.cap - 1);
        n.keys[j] = k; n.vals[j] = t->vals[i];
    }
    n.used = t->used;
    table_free(t);
    *t = n;
    return 0;
}

/* Growable arrays for the outputs. */
typedef struct { char *p; size_t len, cap, item; } Vec;

static int vec_push(Vec *v, const void *x) {
    if (v->len == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 4096;
        char *np_ = (char *)realloc(v->p, nc * v->item);
        if (!np_) return -1;
        v->p = np_; v->cap = nc;
    }
    memcpy(v->p + v->len * v->item, x, v->item);
    v->len++;
    return 0;
}

static PyObject *vec_bytes(Vec *v) { return PyBytes_FromStringAndSize(v->p, (Py_ssize_t)(v->len * v->item)); }

/*
 * invert(fields) with fields a sequence of (doc, field, tokens) tuples.
 * Returns (term_hashes u64[T], post_term u32[P], post_doc u32[P],
 *          post_field u8[P], post_tf u32[P]) as bytes; postings come in input
 * order, one per distinct term within each (doc, field).
 */
static PyObject *invert(PyObject *Py_UNUSED(self), PyObject *arg) {
    PyObject *seq = PySequence_Fast(arg, "invert expects a sequence of (doc, field, tokens)");
    if (!seq) return NULL;
    Table tab = {0};
    Vec hashes = {0, 0, 0, 8}, pterm = {0, 0, 0, 4}, pdoc = {0, 0, 0, 4};
    Vec pfield = {0, 0, 0, 1}, ptf = {0, 0, 0, 4};
    uint32_t *mark = NULL, *slot = NULL;
    size_t mark_cap = 0;
    PyObject *result = NULL;
    if (table_init(&tab, 1 << 16) < 0) { PyErr_NoMemory(); goto out; }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *row = PySequence_Fast_GET_ITEM(seq, r);
        long doc, fld;
        PyObject *toks;
        if (!PyArg_ParseTuple(row, "llO", &doc, &fld, &toks)) goto out;
        PyObject *tseq = PySequence_Fast(toks, "tokens must be a sequence of str");
        if (!tseq) goto out;
        Py_ssize_t nt = PySequence_Fast_GET_SIZE(tseq);
        PyObject **items = PySequence_Fast_ITEMS(tseq);
        uint32_t run = (uint32_t)(r + 1);
        uint8_t f8 = (uint8_t)fld;
        uint32_t d32 = (uint32_t)doc;
        for (Py_ssize_t i = 0; i < nt; i++) {
            uint64_t h;
            if (hash_str(items[i], &h) < 0) { Py_DECREF(tseq); goto out; }
            uint64_t key = h ? h : 1;  /* 0 marks an empty slot */
            size_t j = (size_t)key & (tab.cap - 1);
            while (tab.keys[j] && tab.keys[j] != key) j = (j + 1) & (tab.cap - 1);
            uint32_t term;
            if (!tab.keys[j]) {
                term = (uint32_t)hashes.len;
                tab.keys[j] = key; tab.vals[j] = term; tab.used++;
                if (vec_push(&hashes, &h) < 0) { Py_DECREF(tseq); PyErr_NoMemory(); goto out; }
                if (tab.used * 2 > tab.cap && table_grow(&tab) < 0) {
                    Py_DECREF(tseq); PyErr_NoMemory(); goto out;
                }
                if (hashes.len > mark_cap) {
                    size_t nc = mark_cap ? mark_cap * 2 : 65536;
                    uint32_t *m2 = (uint32_t *)realloc(mark, nc * sizeof(uint32_t));
                    if (!m2) { Py_DECREF(tseq); PyErr_NoMemory(); goto out; }
                    mark = m2;
                    uint32_t *s2 = (uint32_t *)realloc(slot, nc * sizeof(uint32_t));
                    if (!s2) { Py_DECREF(tseq); PyErr_NoMemory(); goto out; }
                    slot = s2;
                    memset(mark + mark_cap, 0, (nc - mark_cap) * sizeof(uint32_t));
                    mark_cap = nc;
                }
            } else {
                term = tab.vals[j];
            }
            if (mark[term] == run) {
                ((uint32_t *)ptf.p)[slot[term]] += 1;
            } else {
                uint32_t one = 1;
                mark[term] = run;
                slot[term] = (uint32_t)pterm.len;
                if (vec_push(&pterm, &term) < 0 || vec_push(&pdoc, &d32) < 0 ||
                    vec_push(&pfield, &f8) < 0 || vec_push(&ptf, &one) < 0) {
                    Py_DECREF(tseq); PyErr_NoMemory(); goto out;
                }
            }
        }
        Py_DECREF(tseq);
    }
    result = Py_BuildValue("(NNNNN)", vec_bytes(&hashes), vec_bytes(&pterm), vec_bytes(&pdoc),
                           vec_bytes(&pfield), vec_bytes(&ptf));
out:
    Py_DECREF(seq);
    table_free(&tab);
    free(hashes.p); free(pterm.p); free(pdoc.p); free(pfield.p); free(ptf.p);
    free(mark); free(slot);
    return result;
}

static PyMethodDef methods[] = {
    {"score_topk", score_topk, METH_VARARGS,
     "score_topk(docs, tfs, factor, ranges, weights, live, k1, n_docs, out_docs, out_scores)"
     " -> (n_out, n_matched)"},
    {"score_topk_pruned", score_topk_pruned, METH_VARARGS,
     "score_topk_pruned(docs, tfs, factor, ranges, weights, ubs, live, k1, n_docs, out_docs,"
     " out_scores, out_maxx, theta0) -> (n_out, n_candidates, n_scanned_terms)"},
    {"term_hashes", term_hashes, METH_O, "term_hashes(terms) -> bytes of uint64 hashes"},
    {"invert", invert, METH_O,
     "invert(rows) -> (term hashes, post_term, post_doc, post_field, post_tf) as bytes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_bm25native",
                                    "Native BM25F top-k scoring for clawkb.", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__bm25native(void) { return PyModule_Create(&module); }
