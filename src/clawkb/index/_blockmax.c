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
 *  - essential terms are added term at a time into a window accumulator, as
 *    upper bounds read from per-posting impact bytes once a block's impacts
 *    are cached (impact_code; the first query to add a block fills them), else
 *    as BM25F computed from the block's frequencies (with an approximate
 *    reciprocal, inflated so it stays an upper bound: approx_rcp);
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
#include <math.h>
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#endif

#define BLOCK 128
#define SLACK 1.0005f
#define WARM_DOCS 512 /* longest list whose docs are scored first (warm-up) */
#define WARM_BUDGET 128 /* warm-up lists are taken until this many docs are scored */
#define WARM_STOP 16 /* the warm-up ends once the heap is full and this many docs are scored
                        (vs scoring the whole list: 0.95x CPU per query at 100k) */
#define WINDOW 16384 /* docs per window (a multiple of 64): measured best of 1k-64k at 100k docs */

#include "_topk.h"
#include "_unpack.h"
#define CLAWKB_FAST_UNPACK unpack_docs_fast
#include "_packed.h"
#include "_dict.h"
#include "_bounds.h"

typedef struct {
    int64_t s, e, pos;   /* posting range and cursor */
    int64_t b0;          /* first block of the term */
    const float *bub;    /* bound of each of its blocks */
    float ub, w;         /* largest block bound; idf x query weight */
    float wq;            /* w (k1 + 1) / 255: a posting's bound per unit of its impact */
    int use_imp;         /* the segment's impact cache covers this term's postings */
    float wub;           /* largest block bound inside the current window */
    int64_t cb;          /* block whose docs are in bd (-1: none) */
    const uint8_t *bp;   /* its packed bytes: frequencies are read from there */
    uint32_t tf_bit[3];  /* bit offset of each field's frequencies in the block */
    uint8_t tf_w[3];     /* and their bit width (0: the field is absent) */
    uint8_t warmed;      /* its docs were scored by the warm-up */
    int64_t lb;          /* block whose layout (bp, tf_bit, tf_w) is held (-1: none) */
    const uint64_t *mbits; /* membership bitmap of a long list (one bit per doc), or NULL */
    const uint32_t *mrank; /* postings before each of its 64-bit words */
    uint32_t bd[BLOCK];  /* its docs */
} Term;

typedef struct {
    const uint8_t *packed;   /* bit-packed blocks (_packed.h) */
    const uint32_t *blk_pos; /* byte offset of each block */
    const uint32_t *blk_last;/* last doc of each block */
    const uint8_t *maxtf;    /* per-block max tf per field (also the tf bit widths) */
    const float *factor;
    int64_t plen;            /* bytes of packed */
    int64_t n_docs;          /* docs: factor has 3 per doc, live and ids one */
    int *err;                /* set when a block turns out damaged */
    int64_t fstep, dstep;    /* factor of doc d, field k: factor[k * fstep + d * dstep]
                                (doc-major [N, 3]: 1, 3; field-major [3, N]: N, 1) */
} Seg;

/* Length factor of field k of doc d. */
#define FAC(g, d, k) ((g)->factor[(size_t)(k) * (size_t)(g)->fstep + (size_t)(d) * (size_t)(g)->dstep])

/* 1 / v for v > 0 to about 12 bits (x86: rcpss, relative error at most
   1.5 * 2^-12), else exactly: the window accumulator's estimates only, which
   RCP_UP inflates so they stay upper bounds of the exact contributions
   (survivors are scored exactly; the results do not change). */
#if defined(__SSE__) || defined(__x86_64__)
static inline float approx_rcp(float v) { return _mm_cvtss_f32(_mm_rcp_ss(_mm_set_ss(v))); }
#define RCP_UP 1.001f
#else
static inline float approx_rcp(float v) { return 1.0f / v; }
#define RCP_UP 1.0f
#endif

static inline int64_t block_of(const Term *t, int64_t pos) { return t->b0 + (pos - t->s) / BLOCK; }

static inline int64_t block_start(const Term *t, int64_t b) { return t->s + (b - t->b0) * BLOCK; }

/* One past the last posting of block b (a block's last doc is blk_last[b]). */
static inline int64_t block_end(const Term *t, int64_t b) {
    int64_t end = block_start(t, b) + BLOCK;
    return end < t->e ? end : t->e;
}

/* Decode block b of term t unless it is the one held already. A damaged
   block (bytes outside packed, docs that do not end at blk_last or reach
   n_docs) sets *g->err and reads as docs UINT32_MAX with no frequencies: every
   loop below stops on such a doc without indexing anything by it, and the
   caller gives up at the next window. */
static inline void ensure_block(const Seg *g, Term *t, int64_t b) {
    if (t->cb == b && t->lb == b) return;
    int n = (int)(block_end(t, b) - block_start(t, b));
    t->cb = t->lb = b;
    if (decode_docs_checked(g->packed, g->plen, g->blk_pos, g->blk_last, g->maxtf, b, b == t->b0,
                            n, g->n_docs, t->bd, t->tf_bit, t->tf_w) < 0) {
        *g->err = 1;
        for (int i = 0; i < BLOCK; i++) t->bd[i] = UINT32_MAX;
        t->tf_w[0] = t->tf_w[1] = t->tf_w[2] = 0;
        t->tf_bit[0] = t->tf_bit[1] = t->tf_bit[2] = 0;
        t->bp = g->packed;
        return;
    }
    t->bp = g->packed + g->blk_pos[b];
}

/* Only the layout of block b (where each field's frequencies start, their
   widths), not its docs: for a term with a membership bitmap, whose blocks were
   all decoded and checked when the bitmap was built, a posting found by rank
   needs no doc decoding. The held docs (cb) stay as they are. */
static inline void ensure_layout(const Seg *g, Term *t, int64_t b) {
    if (t->lb == b) return;
    int n = (int)(block_end(t, b) - block_start(t, b));
    int64_t at = g->blk_pos[b];
    int wd = at + 1 <= g->plen ? g->packed[at] : 255;
    uint32_t bits = 8 + (uint32_t)n * (uint32_t)(wd & 63);
    for (int f = 0; f < 3; f++) {
        t->tf_w[f] = (uint8_t)bit_width(g->maxtf[3 * b + f]);
        t->tf_bit[f] = bits;
        bits += (uint32_t)n * t->tf_w[f];
    }
    if (wd > 32 || at + ((int64_t)bits + 7) / 8 + 8 > g->plen) {
        *g->err = 1;
        t->tf_w[0] = t->tf_w[1] = t->tf_w[2] = 0;
        t->tf_bit[0] = t->tf_bit[1] = t->tf_bit[2] = 0;
        t->bp = g->packed;
        t->lb = b;
        return;
    }
    t->bp = g->packed + at;
    t->lb = b;
}

/* Set bits of a 64-bit word (portable: no popcnt instruction assumed). */
static inline uint32_t popcount64(uint64_t x) {
    x = x - ((x >> 1) & 0x5555555555555555ULL);
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
    return (uint32_t)((x * 0x0101010101010101ULL) >> 56);
}

/* Whether a term with a membership bitmap has doc d (d < the segment's docs). */
static inline int member_has(const Term *t, uint32_t d) { return (int)(t->mbits[d >> 6] >> (d & 63) & 1); }

/* Postings of a bitmapped term before doc d: its first posting >= d is s + this. */
static inline int64_t member_rank(const Term *t, uint32_t d) {
    uint32_t w = d >> 6;
    return (int64_t)t->mrank[w] + popcount64(t->mbits[w] & ((1ULL << (d & 63)) - 1));
}

/* BM25F pseudo-frequency of posting p (its block's layout is held) for doc d. */
static inline float pseudo_tf(const Seg *g, const Term *t, int64_t p, uint32_t d) {
    uint32_t i = (uint32_t)(p - block_start(t, t->lb));
    float x = 0.0f;
    for (int k = 0; k < 3; k++)
        if (t->tf_w[k])
            x += (float)read_bits(t->bp, t->tf_bit[k] + (uint64_t)i * t->tf_w[k], t->tf_w[k]) * FAC(g, d, k);
    return x;
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
    if (t->mbits) { /* by rank: no block search, no decoding */
        int64_t p = (int64_t)d >= g->n_docs ? t->e : t->s + member_rank(t, d);
        if (p > t->pos) t->pos = p;
        return;
    }
    int64_t b = block_of(t, t->pos), b_end = block_of(t, t->e - 1) + 1;
    while (b < b_end && g->blk_last[b] < d) b++;
    if (b == b_end) { t->pos = t->e; return; }
    int64_t st = block_start(t, b), p = st > t->pos ? st : t->pos;
    ensure_block(g, t, b);
    while (t->bd[p - st] < d) p++; /* stops inside block b: its last doc is >= d */
    t->pos = p;
}

/* Block that holds doc d if the term has it: the first block from the
   cursor's on whose last doc is >= d, found without decoding; -1 when the
   list ends before d. */
static inline int64_t block_for(const Seg *g, const Term *t, uint32_t d) {
    if (t->pos >= t->e) return -1;
    if (t->mbits) {
        int64_t p = (int64_t)d >= g->n_docs ? t->e : t->s + member_rank(t, d);
        if (p < t->pos) p = t->pos;
        return p < t->e ? block_of(t, p) : -1;
    }
    int64_t b = block_of(t, t->pos), b_end = block_of(t, t->e - 1) + 1;
    while (b < b_end && g->blk_last[b] < d) b++;
    return b == b_end ? -1 : b;
}

/* Term frequencies of the cursor's posting (its block is decoded). */
static inline float contribution(const Seg *g, Term *t, uint32_t d, float k1) {
    float x = pseudo_tf(g, t, t->pos, d);
    if (x <= 0.0f) return 0.0f;
    return t->w * x * (k1 + 1.0f) / (x + k1);
}

/* Largest pseudo-frequency x of block b of term t, computed exactly as
   pseudo_tf does (same float operations), so the block's bound is the bound
   of its best doc rather than of max tf and min length taken from different
   docs. Leaves the term's decoded block unset (cb = -1). */
/* The length-normalised term frequency x of the i-th posting of t's decoded block
 * (sum over the three fields of tf times the doc's field factor). */
static inline float posting_x(const Seg *g, const Term *t, int i) {
    uint32_t d = t->bd[i];
    float x = 0.0f;
    for (int k = 0; k < 3; k++)
        if (t->tf_w[k])
            x += (float)read_bits(t->bp, t->tf_bit[k] + (uint64_t)i * t->tf_w[k], t->tf_w[k]) * FAC(g, d, k);
    return x;
}

static float block_xmax(const Seg *g, Term *t, int64_t b) {
    ensure_block(g, t, b);
    if (*g->err) { t->cb = -1; return 0.0f; }
    int n = (int)(block_end(t, b) - block_start(t, b));
    float best = 0.0f;
    for (int i = 0; i < n; i++) {
        float x = posting_x(g, t, i);
        if (x > best) best = x;
    }
    t->cb = -1;
    return best;
}

static int get_buf(PyObject *o, Py_buffer *b, const char *what) {
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Format(PyExc_TypeError, "%s must be a contiguous buffer", what);
        return -1;
    }
    return 0;
}

/* Exact score of doc d: contributions summed in the caller's term order, like
   the exhaustive kernel (bit-identical). Cursors must not be past d. */
static float exact_score(const Seg *g, Term *terms, Py_ssize_t T, uint32_t d, float k1) {
    float score = 0.0f;
    for (Py_ssize_t t = 0; t < T; t++) {
        Term *tm = &terms[t];
        if (tm->mbits) { /* membership by one bit, the posting by rank */
            if (!member_has(tm, d)) continue;
            int64_t p = tm->s + member_rank(tm, d);
            if (p < tm->pos) continue; /* the cursor is past d (as a seek would find) */
            tm->pos = p;
            ensure_layout(g, tm, block_of(tm, tm->pos));
            score += contribution(g, tm, d, k1);
            continue;
        }
        seek(g, tm, d);
        if (cur_doc(g, tm) == d) score += contribution(g, tm, d, k1);
    }
    return score;
}

/* Blocks every per-block array holds (a damaged file may hold fewer in one). */
static int64_t common_blocks(const Py_buffer *pos, const Py_buffer *last, const Py_buffer *maxtf,
                             const Py_buffer *minlen) {
    int64_t n = pos->len / 4;
    if (last->len / 4 < n) n = last->len / 4;
    if (maxtf->len / 3 < n) n = maxtf->len / 3;
    if (minlen->len / 3 < n) n = minlen->len / 3;
    return n;
}

/* ValueError((segment number, what)): the caller names the segment's folder. */
static void set_damaged(Py_ssize_t seg, const char *what) {
    PyObject *v = Py_BuildValue("(ns)", seg, what);
    if (v) {
        PyErr_SetObject(PyExc_ValueError, v);
        Py_DECREF(v);
    }
}

static void heap_offer(Entry *heap, Py_ssize_t *hp, Py_ssize_t k, Entry en) {
    Py_ssize_t h = *hp;
    if (h < k) {
        Py_ssize_t i = h++;
        heap[i] = en;
        while (i > 0 && entry_less(heap[i], heap[(i - 1) / 2])) {
            Entry tmp = heap[i]; heap[i] = heap[(i - 1) / 2]; heap[(i - 1) / 2] = tmp;
            i = (i - 1) / 2;
        }
        *hp = h;
    } else if (k > 0 && entry_less(heap[0], en)) {
        heap[0] = en;
        sift_down(heap, h, 0);
    }
}

typedef struct {
    Seg g;
    float *xmax;          /* exact largest pseudo-frequency of each block, filled
                             on first use (0: not known yet, -1: known to be 0);
                             NULL: none */
    int exact;            /* xmax holds exact maxima (else the max-tf/min-length bound) */
    const uint8_t *minlen; /* min field length codes (_bounds.h) */
    const uint8_t *live;  /* NULL: every doc live */
    const int64_t *ids;   /* heap key of each doc (chunk ids); NULL: doc numbers */
    Py_ssize_t n_docs;
    int64_t n_blocks;     /* slots of xmax (a damaged dictionary may point past them) */
    uint8_t *imp;         /* impact of each posting (impact_code), filled a block at a
                             time the first time a query adds the block into the window
                             accumulator; NULL: none */
    uint8_t *imp_ok;      /* per block: 1 once its impacts are filled */
    int64_t n_imp;        /* postings imp holds */
    struct MemberCache *mc; /* membership bitmaps of long lists; NULL: none */
} SegCtx;

/* Membership bitmaps of a segment's long posting lists, built the first time a
 * query has such a term and kept with the segment (they depend on its postings
 * only, not on deletes or parameters). A candidate's membership in a long
 * non-essential list is then one bit test instead of a seek through its
 * blocks, and the posting of a member is found by rank (postings before each
 * 64-bit word, plus the set bits of the word below the doc) with no block
 * search and no doc decoding. Lists of at least n_docs / density postings get
 * one, while the bytes stay within budget. Held by a capsule (member_cache()). */
typedef struct {
    int64_t s, e, b0;  /* the term's postings (key) */
    uint64_t *bits;    /* n_words */
    uint32_t *rank;    /* n_words */
    uint8_t stored;    /* bits and rank are the segment file's (not ours to free) */
    uint8_t checked;   /* a stored bitmap's ranks were checked against its bits */
} MemberSlot;

typedef struct MemberCache {
    int64_t n_docs, n_words, density, budget, bytes;
    int64_t cap, used;     /* slots (a power of two), filled */
    MemberSlot *slots;
    Py_buffer stored[3];   /* the segment's member_keys, member_bits, member_rank */
    int n_stored;          /* buffers held (0 or 3) */
    int64_t stored_lists;  /* slots that point into them */
} MemberCache;

static void member_cache_free(PyObject *cap) {
    MemberCache *mc = PyCapsule_GetPointer(cap, "clawkb.member_cache");
    if (!mc) return;
    for (int64_t i = 0; i < mc->cap; i++) {
        if (mc->slots[i].stored) continue;
        free(mc->slots[i].bits);
        free(mc->slots[i].rank);
    }
    for (int i = 0; i < mc->n_stored; i++) PyBuffer_Release(&mc->stored[i]);
    free(mc->slots);
    free(mc);
}

static inline uint64_t slot_hash(int64_t s) { return (uint64_t)s * 0x9E3779B97F4A7C15ULL; }

/* The slot of term t (s, e, b0), or where it would go (bits NULL). */
static MemberSlot *member_slot(MemberCache *mc, const Term *t) {
    uint64_t i = slot_hash(t->s) & (uint64_t)(mc->cap - 1);
    for (;;) {
        MemberSlot *sl = &mc->slots[i];
        if (!sl->bits || (sl->s == t->s && sl->e == t->e && sl->b0 == t->b0)) return sl;
        i = (i + 1) & (uint64_t)(mc->cap - 1);
    }
}

/* Keep the table at most half full for one more slot: 0, or -1 (no memory). */
static int member_grow(MemberCache *mc) {
    if (2 * (mc->used + 1) <= mc->cap) return 0;
    int64_t ncap = mc->cap * 2;
    MemberSlot *ns = calloc((size_t)ncap, sizeof(MemberSlot));
    if (!ns) return -1;
    MemberSlot *old = mc->slots;
    int64_t ocap = mc->cap;
    mc->slots = ns;
    mc->cap = ncap;
    for (int64_t i = 0; i < ocap; i++)
        if (old[i].bits) {
            Term key;
            key.s = old[i].s; key.e = old[i].e; key.b0 = old[i].b0;
            *member_slot(mc, &key) = old[i];
        }
    free(old);
    return 0;
}

/* Give term t its bitmap (stored in the segment, found or built); leaves it without one when its
   list is short, the budget is spent, memory is short or a block is damaged
   (that sets *g->err, as decoding it anywhere else would). Leaves the term's
   decoded block unset (cb = lb = -1). */
static void member_attach(const SegCtx *c, Term *t) {
    MemberCache *mc = c->mc;
    const Seg *g = &c->g;
    int64_t n = t->e - t->s;
    if (!mc || mc->n_docs != c->n_docs || n < 2 * BLOCK || n * mc->density < mc->n_docs) return;
    if (member_grow(mc) < 0) return;
    MemberSlot *sl = member_slot(mc, t);
    if (sl->bits && sl->stored && !sl->checked) {
        /* a bitmap stored in the segment: its ranks must count its bits and
           its bits the list's postings, so a posting found by rank lies in
           [s, e) whatever the file holds (a damaged one reads as damaged) */
        uint32_t acc = 0;
        for (int64_t w = 0; w < mc->n_words; w++) {
            if (sl->rank[w] != acc) { *g->err = 1; return; }
            acc += popcount64(sl->bits[w]);
        }
        if ((int64_t)acc != n) { *g->err = 1; return; }
        sl->checked = 1;
    }
    if (!sl->bits) {
        int64_t need = mc->n_words * (int64_t)(sizeof(uint64_t) + sizeof(uint32_t));
        if (mc->bytes + need > mc->budget) return;
        uint64_t *bits = calloc((size_t)mc->n_words, sizeof(uint64_t));
        uint32_t *rank = malloc((size_t)mc->n_words * sizeof(uint32_t));
        if (!bits || !rank) { free(bits); free(rank); return; }
        int64_t b_end = block_of(t, t->e - 1) + 1;
        for (int64_t b = t->b0; b < b_end; b++) {
            ensure_block(g, t, b);
            if (*g->err) { free(bits); free(rank); t->cb = t->lb = -1; return; }
            int nb = (int)(block_end(t, b) - block_start(t, b));
            for (int i = 0; i < nb; i++) bits[t->bd[i] >> 6] |= 1ULL << (t->bd[i] & 63);
        }
        uint32_t acc = 0;
        for (int64_t w = 0; w < mc->n_words; w++) {
            rank[w] = acc;
            acc += popcount64(bits[w]);
        }
        t->cb = t->lb = -1;
        if ((int64_t)acc != n) { free(bits); free(rank); return; } /* repeated docs: not a set */
        sl->s = t->s; sl->e = t->e; sl->b0 = t->b0;
        sl->bits = bits;
        sl->rank = rank;
        mc->used++;
        mc->bytes += need;
    }
    t->mbits = sl->bits;
    t->mrank = sl->rank;
}

/* A posting's impact: x / (x + k1) (its BM25F saturation, below 1) in 255ths,
   rounded up with room to spare (the floor plus one of 255.003 x / (x + k1), at
   most 255), so w (k1 + 1) code / 255 bounds its contribution w (k1 + 1) x /
   (x + k1) from above whatever the float rounding of either; 0 only when x is
   not positive (the posting adds nothing). One byte read in order replaces
   three frequency reads, a random load of the doc's length factors and a
   division; the bound serves pruning only, the survivors are scored exactly. */
static inline uint8_t impact_code(float x, float k1) {
    if (!(x > 0.0f)) return 0;
    int q = (int)(x / (x + k1) * (255.0f * 1.00001f)) + 1;
    return (uint8_t)(q > 255 ? 255 : q);
}

/* Fill the impacts of block b of term t, whose docs are decoded (not damaged). */
static void fill_impacts(const SegCtx *c, const Term *t, int64_t b, float k1) {
    const Seg *g = &c->g;
    int64_t st = block_start(t, b);
    int n = (int)(block_end(t, b) - st);
    uint8_t *out = c->imp + st;
    /* field by field over the whole block (bulk unpacking, then one pass per
       field), adding in posting_x's order, so each x is the same float */
    float xs[BLOCK];
    uint32_t tf[BLOCK];
    for (int i = 0; i < n; i++) xs[i] = 0.0f;
    for (int k = 0; k < 3; k++) {
        if (!t->tf_w[k]) continue;
        uint64_t bit = t->tf_bit[k];
        unpack_bits(t->bp, &bit, t->tf_w[k], n, tf);
        for (int i = 0; i < n; i++) xs[i] += (float)tf[i] * FAC(g, t->bd[i], k);
    }
    float q[BLOCK];
    const float scale = 255.0f * 1.00001f;
    for (int i = 0; i < n; i++) q[i] = xs[i] / (xs[i] + k1) * scale; /* vectorises */
    for (int i = 0; i < n; i++) {
        if (!(xs[i] > 0.0f)) { out[i] = 0; continue; }
        int v = (int)q[i] + 1;
        out[i] = (uint8_t)(v > 255 ? 255 : v);
    }
    c->imp_ok[b] = 1;
}

/* Bound of block blk's pseudo-frequency from its max tf and min length per
   field (taken from possibly different docs: looser than block_xmax, but no
   decoding). par: weight[3], b[3], avg[3]. */
static inline float loose_xmax(const SegCtx *c, const float *par, int64_t blk) {
    float x = 0.0f;
    for (int f = 0; f < 3; f++) {
        float denom = (1.0f - par[3 + f]) + par[3 + f] * (float)len_of_code[c->minlen[3 * blk + f]] / par[6 + f];
        if (denom > 0.0f) x += (float)c->g.maxtf[3 * blk + f] * (par[f] / denom);
    }
    return x;
}

typedef struct {
    Py_ssize_t *ord;
    float *prefix, *acc;
    uint64_t *bits;
} Work;

static void work_free(Work *w) { free(w->ord); free(w->prefix); free(w->acc); free(w->bits); }

static int work_alloc(Work *w, Py_ssize_t T) {
    w->ord = calloc(T ? T : 1, sizeof(Py_ssize_t));
    w->prefix = calloc(T + 1, sizeof(float));
    w->acc = malloc(WINDOW * sizeof(float));
    w->bits = malloc(WINDOW / 8);
    if (w->ord && w->prefix && w->acc && w->bits) return 0;
    work_free(w);
    return -1;
}

/* 1 when every term's postings map to blocks the segment's arrays hold, its
   last block ending below n_docs (blocks are checked again as they are decoded) */
static int terms_in_bounds(const SegCtx *c, const Term *terms, Py_ssize_t T) {
    const Seg *g = &c->g;
    for (Py_ssize_t t = 0; t < T; t++) {
        const Term *tm = &terms[t];
        if (tm->e == tm->s) continue;
        if (tm->s < 0 || tm->e < tm->s || tm->b0 < 0 ||
            (tm->e - tm->s + BLOCK - 1) / BLOCK > c->n_blocks - tm->b0 ||
            (int64_t)g->blk_last[block_of(tm, tm->e - 1)] >= c->n_docs)
            return 0;
    }
    return 1;
}

/* Score one segment into the top-k heap (h entries of k) shared across
 * segments; terms[t].s, e, b0 and w are set by the caller. theta is the
 * k-th best score so far (docs below it are skipped) and is raised as the
 * heap fills. Returns the number of docs scored in full, -1 on no memory,
 * -2 when the segment's arrays are damaged (the heap is then undefined). */
static Py_ssize_t score_segment(const SegCtx *c, Term *terms, Py_ssize_t T, const float *par,
                                float k1, Entry *heap, Py_ssize_t *hp, Py_ssize_t k,
                                float *thetap, Work *wk) {
    const Seg *g = &c->g;
    Py_ssize_t *ord = wk->ord;
    float *prefix = wk->prefix, *acc = wk->acc;
    uint64_t *bits = wk->bits;
    /* the windows stop at n_docs */
    if (!terms_in_bounds(c, terms, T)) return -2;
    /* block bounds with the current parameters */
    float kp1 = k1 + 1.0f;
    int64_t used = 0, total_blocks = 0;
    for (Py_ssize_t t = 0; t < T; t++) {
        int64_t n = terms[t].e - terms[t].s;
        if (n > 0) total_blocks += (n + BLOCK - 1) / BLOCK;
    }
    float *bub = malloc((total_blocks ? total_blocks : 1) * sizeof(float));
    if (!bub) return -1;
    for (Py_ssize_t t = 0; t < T; t++) {
        Term *tm = &terms[t];
        tm->pos = tm->s;
        tm->ub = 0.0f;
        tm->wq = tm->w * kp1 / 255.0f;
        tm->use_imp = c->imp != NULL && tm->e <= c->n_imp;
        tm->bub = bub + used;
        tm->cb = tm->lb = -1;
        tm->mbits = NULL;
        tm->mrank = NULL;
        if (tm->e <= tm->s) { tm->e = tm->s; continue; }
        if (c->mc) {
            member_attach(c, tm);
            if (*g->err) { free(bub); return -2; }
        }
        int64_t nb = (tm->e - tm->s + BLOCK - 1) / BLOCK;
        for (int64_t j = 0; j < nb; j++) {
            int64_t blk = tm->b0 + j;
            float x;
            if (c->xmax && blk >= 0 && blk < c->n_blocks) {
                x = c->xmax[blk];
                if (x == 0.0f) { /* not known yet */
                    x = c->exact ? block_xmax(g, tm, blk) : loose_xmax(c, par, blk);
                    if (!*g->err) c->xmax[blk] = x > 0.0f ? x : -1.0f;
                }
                if (x < 0.0f) x = 0.0f;
            } else {
                x = loose_xmax(c, par, blk);
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
    Py_ssize_t h = *hp, scored = 0;
    float theta = *thetap;
    /* Warm-up while the heap is not full: score the docs of the term with the
     * highest bound among the short lists first (a rare query term: its docs
     * are likely winners), so theta starts high and long low-idf lists are
     * skipped from the first window on; while the heap is still not full (the
     * rarest list had fewer than k docs) and fewer than WARM_BUDGET docs were
     * scored, the next short list follows. Those docs are marked seen and not
     * scored again; once the heap is full and WARM_STOP docs are scored the
     * warm-up ends, its list's other docs left to the windows. (Lists of up to
     * 512 docs measured ~7% faster than 128 on the synthetic 100k corpus.) */
    uint64_t *seen = NULL;
    int64_t warmed = 0;
    while (h < k && T > 1 && warmed < WARM_BUDGET) {
        Py_ssize_t pivot = -1;
        for (Py_ssize_t t = 0; t < T; t++) {
            int64_t n = terms[t].e - terms[t].s;
            if (n > 0 && n <= WARM_DOCS && !terms[t].warmed && (pivot < 0 || terms[t].ub > terms[pivot].ub)) pivot = t;
        }
        if (pivot < 0) break;
        if (!seen) {
            seen = calloc((size_t)(c->n_docs + 63) / 64 + 1, sizeof(uint64_t));
            if (!seen) { free(bub); return -1; }
        }
        Term *pv = &terms[pivot];
        pv->warmed = 1;
        int64_t pe = pv->e;
        for (int64_t p = pv->s; p < pe; p++) {
            /* a full heap after WARM_STOP docs gives the windows their bar; the
               rest of the list is left to them (not marked seen) */
            if (h == k && warmed >= WARM_STOP) break;
            uint32_t d = doc_at(g, pv, p);
            if ((Py_ssize_t)d >= c->n_docs || (c->live && !c->live[d])) continue;
            if (seen[d >> 6] >> (d & 63) & 1) continue;
            float score = exact_score(g, terms, T, d, k1); /* moves pv's cursor to p */
            scored++;
            warmed++;
            seen[d >> 6] |= 1ULL << (d & 63);
            if (score <= 0.0f || (h == k && (k == 0 || score < heap[0].score))) continue;
            Entry en = {score, c->ids ? c->ids[d] : (int64_t)d};
            heap_offer(heap, &h, k, en);
            if (h == k && k > 0 && heap[0].score > theta) theta = heap[0].score;
        }
        for (Py_ssize_t t = 0; t < T; t++) {
            terms[t].pos = terms[t].s;
            terms[t].cb = -1;
        }
    }
    uint32_t max_doc = 0;
    for (Py_ssize_t t = 0; t < T; t++)
        if (terms[t].e > terms[t].s && g->blk_last[block_of(&terms[t], terms[t].e - 1)] + 1 > max_doc)
            max_doc = g->blk_last[block_of(&terms[t], terms[t].e - 1)] + 1;
    for (uint32_t lo = 0; lo < max_doc && !*g->err; lo += WINDOW) {
        uint32_t hi = lo + WINDOW;
        Py_ssize_t nt = 0;
        for (Py_ssize_t t = 0; t < T; t++) {
            Term *tm = &terms[t];
            seek(g, tm, lo);
            tm->wub = 0.0f;
            if (cur_doc(g, tm) >= hi) continue;
            int64_t blk = block_of(tm, tm->pos), b_end = block_of(tm, tm->e - 1) + 1;
            for (; blk < b_end; blk++) {
                /* a lower bound of the block's first doc: may admit one block too many */
                if (blk > tm->b0 && g->blk_last[blk - 1] + 1 >= hi) break;
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
            /* block by block: the gap and frequency layout is looked up once a block */
            int64_t p = tm->pos;
            while (p < tm->e) {
                int64_t b = block_of(tm, p);
                ensure_block(g, tm, b);
                int64_t st = block_start(tm, b), be = block_end(tm, b);
                if (tm->use_imp && !*g->err) {
                    /* the block's impacts: one byte per posting, in order */
                    if (!c->imp_ok[b]) fill_impacts(c, tm, b, k1);
                    const uint8_t *ip = c->imp + st;
                    const float wq = tm->wq;
                    int stop = 0;
                    for (; p < be; p++) {
                        uint32_t i = (uint32_t)(p - st), d = tm->bd[i];
                        if (d >= hi) { stop = 1; break; }
                        uint32_t q = ip[i];
                        if (!q) continue;
                        uint32_t r = d - lo;
                        if (!(bits[r >> 6] & (1ULL << (r & 63)))) { bits[r >> 6] |= 1ULL << (r & 63); acc[r] = 0.0f; }
                        acc[r] += wq * (float)q;
                    }
                    if (stop) break;
                    continue;
                }
                const uint8_t *bp = tm->bp;
                const float wup = tm->w * kp1 * RCP_UP;
                uint32_t tb0 = tm->tf_bit[0], tb1 = tm->tf_bit[1], tb2 = tm->tf_bit[2];
                int w0 = tm->tf_w[0], w1 = tm->tf_w[1], w2 = tm->tf_w[2];
                int stop = 0;
                for (; p < be; p++) {
                    uint32_t i = (uint32_t)(p - st), d = tm->bd[i];
                    if (d >= hi) { stop = 1; break; }
                    const float *f = g->factor + (size_t)d * (size_t)g->dstep;
                    const size_t fs = (size_t)g->fstep;
                    float x = 0.0f;
                    if (w0) x += (float)read_bits(bp, tb0 + (uint64_t)i * w0, w0) * f[0];
                    if (w1) x += (float)read_bits(bp, tb1 + (uint64_t)i * w1, w1) * f[fs];
                    if (w2) x += (float)read_bits(bp, tb2 + (uint64_t)i * w2, w2) * f[2 * fs];
                    if (x <= 0.0f) continue;
                    uint32_t r = d - lo;
                    if (!(bits[r >> 6] & (1ULL << (r & 63)))) { bits[r >> 6] |= 1ULL << (r & 63); acc[r] = 0.0f; }
                    acc[r] += wup * x * approx_rcp(x + k1); /* >= w x (k1 + 1) / (x + k1) */
                }
                if (stop) break;
            }
        }
        /* candidates in doc order */
        for (uint32_t word = 0; word < WINDOW / 64; word++) {
            uint64_t m = bits[word];
            while (m) {
                uint32_t r = word * 64 + (uint32_t)__builtin_ctzll(m);
                m &= m - 1;
                uint32_t d = lo + r;
                if ((Py_ssize_t)d >= c->n_docs || (c->live && !c->live[d])) continue;
                if (seen && (seen[d >> 6] >> (d & 63) & 1)) continue;
                float partial = acc[r];
                int pruned = 0;
                for (Py_ssize_t i = ne - 1; i >= 0; i--) {
                    Term *tm = &terms[ord[i]];
                    if ((partial + prefix[i + 1]) * SLACK < theta) { pruned = 1; break; }
                    if (tm->mbits) { /* one bit test instead of a seek */
                        if (!member_has(tm, d)) continue;
                        int64_t mp = tm->s + member_rank(tm, d);
                        if (mp < tm->pos) continue;
                        tm->pos = mp;
                        int64_t mb = block_of(tm, tm->pos);
                        if ((partial + tm->bub[mb - tm->b0] + prefix[i]) * SLACK < theta) { pruned = 1; break; }
                        if (tm->use_imp && c->imp_ok[mb]) {
                            partial += tm->wq * (float)c->imp[tm->pos];
                        } else {
                            ensure_layout(g, tm, mb);
                            partial += contribution(g, tm, d, k1);
                        }
                        continue;
                    }
                    /* the bound of the one block that may hold d is tighter
                       than the term's bound over the whole window */
                    int64_t blk = block_for(g, tm, d);
                    if (blk < 0) continue;
                    if ((partial + tm->bub[blk - tm->b0] + prefix[i]) * SLACK < theta) { pruned = 1; break; }
                    seek(g, tm, d);
                    if (cur_doc(g, tm) != d) continue;
                    if (tm->use_imp && c->imp_ok[tm->cb])
                        partial += tm->wq * (float)c->imp[tm->pos];
                    else
                        partial += contribution(g, tm, d, k1);
                }
                if (pruned || partial * SLACK < theta) continue;
                /* candidates ascend: cursors only move forward */
                float score = exact_score(g, terms, T, d, k1);
                scored++;
                /* a doc below the full heap's least cannot enter: its chunk id
                   (a random load) is read only for one that may */
                if (score <= 0.0f || (h == k && (k == 0 || score < heap[0].score))) continue;
                Entry en = {score, c->ids ? c->ids[d] : (int64_t)d};
                heap_offer(heap, &h, k, en);
                if (h == k && k > 0 && heap[0].score > theta) theta = heap[0].score;
            }
        }
    }
    free(bub);
    free(seen);
    if (*g->err) return -2;
    *hp = h;
    *thetap = theta;
    return scored;
}

/* The dense accumulator of the term-at-a-time path: one float per doc of the
 * largest segment scored so far, zero between calls (a call clears the entries
 * it touched), and the list of docs a call touched. Module-wide: the kernel
 * runs under the GIL, one call at a time. */
static float *dense_acc = NULL;
static uint32_t *dense_list = NULL;
static int64_t dense_cap = 0;

static int dense_reserve(int64_t n) {
    if (n <= dense_cap) return 0;
    float *acc = calloc((size_t)n, sizeof(float));
    uint32_t *list = malloc((size_t)n * sizeof(uint32_t));
    if (!acc || !list) { free(acc); free(list); return -1; }
    free(dense_acc); free(dense_list);
    dense_acc = acc; dense_list = list; dense_cap = n;
    return 0;
}

/* Score one segment term at a time (the path for queries whose lists are
 * short against the segment, where block-max's windows and seeks cost more
 * than reading every posting; `path` in search()): every posting's
 * contribution is added into a dense accumulator in the caller's term order,
 * with exactly the float operations of exact_score, so the scores are
 * bit-identical to the block-max path's; then every touched live doc is
 * offered to the shared heap. Same returns as score_segment. */
static Py_ssize_t score_segment_taat(const SegCtx *c, Term *terms, Py_ssize_t T, float k1,
                                     Entry *heap, Py_ssize_t *hp, Py_ssize_t k, float *thetap) {
    const Seg *g = &c->g;
    if (!terms_in_bounds(c, terms, T)) return -2;
    if (dense_reserve(c->n_docs) < 0) return -1;
    float *acc = dense_acc;
    uint32_t *list = dense_list;
    int64_t n_list = 0;
    for (Py_ssize_t t = 0; t < T && !*g->err; t++) {
        Term *tm = &terms[t];
        if (tm->e <= tm->s) continue;
        tm->cb = tm->lb = -1;
        const float w = tm->w;
        for (int64_t b = tm->b0, p = tm->s; p < tm->e && !*g->err; b++) {
            ensure_block(g, tm, b);
            int n = (int)(block_end(tm, b) - p);
            for (int i = 0; i < n; i++) {
                uint32_t d = tm->bd[i];
                if ((int64_t)d >= c->n_docs) break; /* a damaged block (err is set) */
                float x = posting_x(g, tm, i);
                if (x <= 0.0f) continue;
                float add = w * x * (k1 + 1.0f) / (x + k1); /* as contribution() */
                if (acc[d] == 0.0f) list[n_list++] = d;  /* contributions are > 0 */
                acc[d] += add;
            }
            p += n;
        }
    }
    Py_ssize_t h = *hp;
    float theta = *thetap;
    for (int64_t j = 0; j < n_list; j++) {
        uint32_t d = list[j];
        float score = acc[d];
        acc[d] = 0.0f;
        if (*g->err || (c->live && !c->live[d])) continue;
        if (score <= 0.0f || (h == k && (k == 0 || score < heap[0].score))) continue;
        Entry en = {score, c->ids ? c->ids[d] : (int64_t)d};
        heap_offer(heap, &h, k, en);
        if (h == k && k > 0 && heap[0].score > theta) theta = heap[0].score;
    }
    if (*g->err) return -2;
    *hp = h;
    *thetap = theta;
    return (Py_ssize_t)n_list;
}

/* heap -> descending score, ascending key on ties */
static void drain(Entry *heap, Py_ssize_t h, int64_t *out_docs, float *out_scores) {
    while (h > 0) {
        Entry top = heap[0];
        heap[0] = heap[--h];
        sift_down(heap, h, 0);
        out_docs[h] = top.doc;
        out_scores[h] = top.score;
    }
}

static PyObject *topk(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *o_packed, *o_pos, *o_last, *o_fac, *o_ranges, *o_blk0, *o_maxtf, *o_minlen, *o_w;
    PyObject *o_live, *o_par, *o_out_docs, *o_out_scores;
    float k1;
    Py_ssize_t n_docs;
    double theta0;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOfnOOd", &o_packed, &o_pos, &o_last, &o_fac, &o_ranges,
                          &o_blk0, &o_maxtf, &o_minlen, &o_w, &o_live, &o_par, &k1, &n_docs,
                          &o_out_docs, &o_out_scores, &theta0))
        return NULL;
    Py_buffer b[13];
    PyObject *objs[13] = {o_packed, o_pos, o_fac, o_ranges, o_blk0, o_maxtf, o_minlen,
                          o_w, o_par, o_out_docs, o_out_scores, o_last, o_live};
    const char *names[13] = {"packed", "blk_pos", "factor", "ranges", "first_blocks",
                             "blk_maxtf", "blk_minlen", "weights", "params", "out_docs",
                             "out_scores", "blk_last", "live"};
    int n_bufs = o_live == Py_None ? 12 : 13, got = 0;
    PyObject *result = NULL;
    for (; got < n_bufs; got++)
        if (get_buf(objs[got], &b[got], names[got]) < 0) goto done;
    int err = 0;
    SegCtx c = {{b[0].buf, b[1].buf, b[11].buf, b[5].buf, b[2].buf, b[0].len, n_docs, &err, 1, 3},
                NULL, 0, b[6].buf, o_live == Py_None ? NULL : b[12].buf, NULL, n_docs,
                common_blocks(&b[1], &b[11], &b[5], &b[6]), NULL, NULL, 0, NULL};
    if (n_docs < 0 || b[2].len / 12 < n_docs || (o_live != Py_None && b[12].len < n_docs) ||
        b[3].len / 16 < b[7].len / 4 || b[4].len / 8 < b[7].len / 4) {
        set_damaged(0, "arrays disagree in length");
        goto done;
    }
    const int64_t *ranges = b[3].buf, *blk0 = b[4].buf;
    const float *wts = b[7].buf, *par = b[8].buf; /* par: weight[3], b[3], avg[3] */
    Py_ssize_t T = b[7].len / (Py_ssize_t)sizeof(float);
    Py_ssize_t k = b[9].len / (Py_ssize_t)sizeof(int64_t);
    Term *terms = calloc(T ? T : 1, sizeof(Term));
    Entry *heap = calloc(k ? k : 1, sizeof(Entry));
    Work wk;
    if (!terms || !heap || work_alloc(&wk, T) < 0) {
        free(terms); free(heap);
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t t = 0; t < T; t++) {
        terms[t].s = ranges[2 * t];
        terms[t].e = ranges[2 * t + 1];
        terms[t].b0 = blk0[t];
        terms[t].w = wts[t];
    }
    Py_ssize_t h = 0;
    float theta = (float)theta0;
    Py_ssize_t scored = score_segment(&c, terms, T, par, k1, heap, &h, k, &theta, &wk);
    if (scored == -2) {
        set_damaged(0, "postings point outside their arrays");
    } else if (scored < 0) {
        PyErr_NoMemory();
    } else {
        drain(heap, h, b[9].buf, b[10].buf);
        result = Py_BuildValue("(nn)", h, scored);
    }
    free(terms); free(heap); work_free(&wk);
done:
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    return result;
}

/* Whether a segment is scored term at a time (score_segment_taat) rather than
 * by block-max: when the query's postings in it are at most TAAT_DENSITY times
 * its docs. 0: never (the default). Measured per query on the bench corpus
 * (bench/results/lexical-s11.md), the rule fitted on a dev half picked 0.3 at
 * 100k (-1.4 % held out, noise) and 0 at 1M, where the dense accumulator's
 * random loads cost ~4x block-max; the path is kept, tested bit-identical
 * (search(..., path=2)), for query mixes where it pays. */
#ifndef TAAT_DENSITY
#define TAAT_DENSITY 0.0
#endif
static inline int taat_pays(int64_t n_post, int64_t n_docs, Py_ssize_t T) {
    (void)T;
    return (double)n_post <= TAAT_DENSITY * (double)n_docs;
}

#define SEG_ITEMS 15

/* search(segs, hashes, qweights, params, k1, n_live, out_ids, out_scores[, exact[, field_major]])
 *   -> n or -1
 *
 * The whole query in one call: every segment's term lookup (compact
 * dictionary, _dict.h), document frequencies summed over segments, idf
 * weights (computed in double and rounded to float like the Python path),
 * then block-max scoring of each segment in the given order into one top-k
 * heap keyed by (score, chunk id), so the bar carries from segment to
 * segment. Each item of `segs` is (terms, dfs, dict_index, packed,
 * blk_pos, blk_last, blk_maxtf, blk_minlen, factor, live or None, chunk_ids
 * [, block x cache or None[, impacts or None, impact flags or None]]): the
 * block x cache is a writable float32 array with one slot per block, 0 where
 * unknown; the kernel fills the slots of the blocks it bounds with their
 * largest pseudo-frequency (valid while `factor` is) and bounds those blocks
 * by it: the exact maximum over the block's docs when `exact` is true (the
 * default), else the cheap bound from max tf and min length, which then is
 * computed once per block, not per query. The impacts (writable uint8, one
 * per posting) and their flags (one per block), zeros at first and valid
 * while `factor` and k1 are, hold each posting's impact_code once its block
 * was first added into a window: later queries add those bytes instead of
 * computing BM25F per posting (bounds only: scores stay exact).
 * With `field_major` every segment's factor is float32 [3, N] (each field's
 * factors together: a block of one field reads 4 bytes a doc, not 12), else
 * [N, 3]; the same floats either way, so the same scores.
 * Returns -1 without scoring when a weight is not positive (the caller then
 * takes the general path). */
static PyObject *search(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *o_segs, *o_hash, *o_qw, *o_par, *o_out_ids, *o_out_scores;
    float k1;
    Py_ssize_t n_live;
    int exact = 1, field_major = 0, path = 0;
    if (!PyArg_ParseTuple(args, "O!OOOfnOO|ppi", &PyList_Type, &o_segs, &o_hash, &o_qw, &o_par, &k1,
                          &n_live, &o_out_ids, &o_out_scores, &exact, &field_major, &path))
        return NULL;
    Py_ssize_t S = PyList_GET_SIZE(o_segs);
    Py_buffer top[5];
    PyObject *tobjs[5] = {o_hash, o_qw, o_par, o_out_ids, o_out_scores};
    const char *tnames[5] = {"hashes", "qweights", "params", "out_ids", "out_scores"};
    int tgot = 0, sgot = 0;
    PyObject *result = NULL;
    Py_buffer *sb = calloc((size_t)(S ? S : 1) * SEG_ITEMS, sizeof(Py_buffer));
    char *has = calloc((size_t)(S ? S : 1) * SEG_ITEMS, 1);
    SegCtx *ctx = calloc(S ? S : 1, sizeof(SegCtx));
    Term *terms = NULL, *spans = NULL;
    Entry *heap = NULL;
    float *w = NULL;
    Work wk = {0};
    int seg_err = 0;
    if (!sb || !has || !ctx) { PyErr_NoMemory(); goto done; }
    for (; tgot < 5; tgot++)
        if (get_buf(tobjs[tgot], &top[tgot], tnames[tgot]) < 0) goto done;
    const uint64_t *hashes = top[0].buf;
    const double *qw = top[1].buf;
    const float *par = top[2].buf;
    Py_ssize_t Q = top[0].len / 8, k = top[3].len / 8;
    if (top[1].len / 8 != Q) { PyErr_SetString(PyExc_ValueError, "qweights length"); goto done; }
    for (Py_ssize_t i = 0; i < S; i++) {
        PyObject *tup = PyList_GET_ITEM(o_segs, i);
        Py_ssize_t n_items = PyTuple_Check(tup) ? PyTuple_GET_SIZE(tup) : 0;
        if (n_items != 11 && n_items != 12 && n_items != 14 && n_items != 15) {
            PyErr_SetString(PyExc_TypeError, "each segment must be a tuple of 11, 12, 14 or 15 items");
            goto done;
        }
        for (int j = 0; j < n_items; j++) {
            PyObject *o = PyTuple_GET_ITEM(tup, j);
            if ((j == 9 || j >= 11) && o == Py_None) continue;
            if (j == 14) {
                ctx[i].mc = PyCapsule_GetPointer(o, "clawkb.member_cache");
                if (!ctx[i].mc) goto done;
                continue;
            }
            if (j >= 11) {
                if (PyObject_GetBuffer(o, &sb[i * SEG_ITEMS + j], PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
                    PyErr_SetString(PyExc_TypeError, "the block and impact caches must be writable arrays");
                    goto done;
                }
            } else if (get_buf(o, &sb[i * SEG_ITEMS + j], "segment array") < 0) {
                goto done;
            }
            has[i * SEG_ITEMS + j] = 1;
            sgot++;
        }
        Py_buffer *b = &sb[i * SEG_ITEMS];
        ctx[i].g.packed = b[3].buf;
        ctx[i].g.blk_pos = b[4].buf;
        ctx[i].g.blk_last = b[5].buf;
        ctx[i].g.maxtf = b[6].buf;
        ctx[i].g.factor = b[8].buf;
        ctx[i].g.plen = b[3].len;
        ctx[i].g.err = &seg_err;
        ctx[i].minlen = b[7].buf;
        ctx[i].live = has[i * SEG_ITEMS + 9] ? b[9].buf : NULL;
        ctx[i].ids = b[10].buf;
        ctx[i].n_docs = b[10].len / 8;
        ctx[i].xmax = NULL;
        ctx[i].exact = exact;
        ctx[i].n_blocks = common_blocks(&b[4], &b[5], &b[6], &b[7]);
        ctx[i].g.n_docs = ctx[i].n_docs;
        ctx[i].g.fstep = field_major ? ctx[i].n_docs : 1;
        ctx[i].g.dstep = field_major ? 1 : 3;
        if (b[1].len != b[0].len / 8 || b[8].len / 12 < ctx[i].n_docs ||
            (field_major && b[8].len != 12 * ctx[i].n_docs) ||
            (ctx[i].live && b[9].len < ctx[i].n_docs)) {
            set_damaged(i, "arrays disagree in length");
            goto done;
        }
        if (has[i * SEG_ITEMS + 11]) {
            if (b[11].len / (Py_ssize_t)sizeof(float) != b[5].len / (Py_ssize_t)sizeof(uint32_t)) {
                PyErr_SetString(PyExc_ValueError, "block x cache must have one float per block");
                goto done;
            }
            ctx[i].xmax = b[11].buf;
        }
        ctx[i].imp = NULL;
        ctx[i].imp_ok = NULL;
        ctx[i].n_imp = 0;
        if (has[i * SEG_ITEMS + 12] && has[i * SEG_ITEMS + 13]) {
            if (b[13].len < ctx[i].n_blocks) {
                PyErr_SetString(PyExc_ValueError, "impact flags must have one byte per block");
                goto done;
            }
            ctx[i].imp = b[12].buf;
            ctx[i].imp_ok = b[13].buf;
            ctx[i].n_imp = b[12].len;
        }
    }
    terms = calloc(Q ? Q : 1, sizeof(Term));
    spans = calloc((size_t)(S ? S : 1) * (Q ? Q : 1), sizeof(Term));
    heap = calloc(k ? k : 1, sizeof(Entry));
    w = calloc(Q ? Q : 1, sizeof(float));
    if (!terms || !spans || !heap || !w || work_alloc(&wk, Q) < 0) { PyErr_NoMemory(); goto done; }
    /* term lookup per segment; spans[i * Q + q] holds s, e, b0 */
    for (Py_ssize_t i = 0; i < S; i++) {
        Py_buffer *b = &sb[i * SEG_ITEMS];
        Py_ssize_t nt = b[0].len / 8;
        for (Py_ssize_t q = 0; q < Q; q++) {
            int64_t t = dict_find(b[0].buf, nt, hashes[q]);
            Term *sp = &spans[i * Q + q];
            if (t >= 0 && dict_entry(b[1].buf, b[2].buf, b[2].len / 8, nt, t, &sp->s, &sp->e, &sp->b0) < 0) {
                set_damaged(i, "damaged term dictionary");
                goto done;
            }
        }
    }
    for (Py_ssize_t q = 0; q < Q; q++) {
        int64_t df = 0;
        for (Py_ssize_t i = 0; i < S; i++) df += spans[i * Q + q].e - spans[i * Q + q].s;
        double idf = log1p(((double)(n_live - df) + 0.5) / ((double)df + 0.5));
        w[q] = (float)(idf * qw[q]);
        if (!(w[q] > 0.0f)) { result = PyLong_FromLong(-1); goto done; }
    }
    Py_ssize_t h = 0;
    float theta = 0.0f;
    for (Py_ssize_t i = 0; i < S; i++) {
        int64_t n_post = 0;
        for (Py_ssize_t q = 0; q < Q; q++) {
            terms[q] = spans[i * Q + q];
            terms[q].w = w[q];
            n_post += terms[q].e - terms[q].s;
        }
        if (!n_post) continue;
        int taat = path == 2 || (path == 0 && taat_pays(n_post, ctx[i].n_docs, Q));
        Py_ssize_t got = taat ? score_segment_taat(&ctx[i], terms, Q, k1, heap, &h, k, &theta)
                              : score_segment(&ctx[i], terms, Q, par, k1, heap, &h, k, &theta, &wk);
        if (got == -2) {
            set_damaged(i, "postings point outside their arrays");
            goto done;
        }
        if (got < 0) {
            PyErr_NoMemory();
            goto done;
        }
    }
    Py_ssize_t n_out = h;
    drain(heap, h, top[3].buf, top[4].buf);
    result = PyLong_FromSsize_t(n_out);
done:
    for (Py_ssize_t i = 0; i < S * SEG_ITEMS; i++)
        if (has && has[i]) PyBuffer_Release(&sb[i]);
    for (int i = 0; i < tgot; i++) PyBuffer_Release(&top[i]);
    free(sb); free(has); free(ctx); free(terms); free(spans); free(heap); free(w);
    work_free(&wk);
    (void)sgot;
    return result;
}

/* vector_decode(on) -> whether the AVX2 block decoder was in use before; on:
   use it where the CPU has it (the default), else the scalar loop (tests
   compare the two). */
static PyObject *vector_decode(PyObject *Py_UNUSED(self), PyObject *args) {
    int on;
    if (!PyArg_ParseTuple(args, "p", &on)) return NULL;
    int was = unpack_docs_fast_enabled();
    unpack_docs_fast_enable(on);
    return PyBool_FromLong(was);
}

/* member_cache(n_docs, budget_bytes, density[, keys, bits, rank]) -> a cache of
   membership bitmaps for one segment of n_docs docs, passed as the segment's
   15th item: empty, or holding the bitmaps the segment stores (keys int64
   [L, 3] = (s, e, b0) of each list, bits uint64 and rank uint32 [L, n_words]). */
static PyObject *member_cache(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_ssize_t n_docs, budget, density;
    PyObject *o_keys = Py_None, *o_bits = Py_None, *o_rank = Py_None;
    if (!PyArg_ParseTuple(args, "nnn|OOO", &n_docs, &budget, &density, &o_keys, &o_bits, &o_rank))
        return NULL;
    if (n_docs < 0 || budget < 0 || density < 1) {
        PyErr_SetString(PyExc_ValueError, "member_cache: n_docs, budget >= 0 and density >= 1");
        return NULL;
    }
    MemberCache *mc = calloc(1, sizeof(MemberCache));
    if (!mc) return PyErr_NoMemory();
    mc->n_docs = n_docs;
    mc->n_words = (n_docs + 63) / 64 + 1;
    mc->density = density;
    mc->budget = budget;
    mc->cap = 16;
    mc->slots = calloc((size_t)mc->cap, sizeof(MemberSlot));
    if (!mc->slots) { free(mc); return PyErr_NoMemory(); }
    PyObject *cap = PyCapsule_New(mc, "clawkb.member_cache", member_cache_free);
    if (!cap) { free(mc->slots); free(mc); return NULL; }
    if (o_keys == Py_None) return cap;
    /* bitmaps stored in the segment (member_bitmaps at write time): slots that
       point into the arrays, held by the cache; their ranks are checked the
       first time a query uses each. Their bytes count against the budget, so
       stored and built bitmaps together stay within it. */
    PyObject *objs[3] = {o_keys, o_bits, o_rank};
    for (int i = 0; i < 3; i++) {
        if (PyObject_GetBuffer(objs[i], &mc->stored[i], PyBUF_C_CONTIGUOUS) < 0) {
            Py_DECREF(cap);
            return NULL;
        }
        mc->n_stored = i + 1;
    }
    Py_ssize_t L = mc->stored[0].len / (3 * 8);
    if (mc->stored[0].len != L * 24 || mc->stored[1].len != L * mc->n_words * 8 ||
        mc->stored[2].len != L * mc->n_words * 4) {
        PyErr_SetString(PyExc_ValueError, "member_cache: stored bitmaps disagree in length");
        Py_DECREF(cap);
        return NULL;
    }
    const int64_t *keys = mc->stored[0].buf;
    uint64_t *bits = mc->stored[1].buf;
    uint32_t *rank = mc->stored[2].buf;
    for (Py_ssize_t l = 0; l < L; l++) {
        if (member_grow(mc) < 0) { Py_DECREF(cap); return PyErr_NoMemory(); }
        Term key;
        key.s = keys[3 * l]; key.e = keys[3 * l + 1]; key.b0 = keys[3 * l + 2];
        MemberSlot *sl = member_slot(mc, &key);
        if (sl->bits) continue; /* a repeated key: the first one serves */
        sl->s = key.s; sl->e = key.e; sl->b0 = key.b0;
        sl->bits = bits + (size_t)l * (size_t)mc->n_words;
        sl->rank = rank + (size_t)l * (size_t)mc->n_words;
        sl->stored = 1;
        mc->used++;
        mc->stored_lists++;
        mc->bytes += mc->n_words * (int64_t)(sizeof(uint64_t) + sizeof(uint32_t));
    }
    return cap;
}

/* member_bitmaps(packed, blk_pos, blk_last, blk_maxtf, keys, n_docs, out_bits, out_rank)
   -> None: the membership bitmap and ranks (as member_attach builds them) of
   each list keys[l] = (s, e, b0) of a segment of n_docs docs, into rows of
   out_bits (uint64) and out_rank (uint32), (n_docs + 63) / 64 + 1 words a
   row; the segment writer stores them. ValueError when a block is damaged or
   a list repeats a doc. */
static PyObject *member_bitmaps(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *o[8];
    Py_ssize_t n_docs;
    if (!PyArg_ParseTuple(args, "OOOOOnOO", &o[0], &o[1], &o[2], &o[3], &o[4], &n_docs, &o[6], &o[7]))
        return NULL;
    int idx[7] = {0, 1, 2, 3, 4, 6, 7};
    Py_buffer b[8];
    int got = 0;
    PyObject *result = NULL;
    for (; got < 7; got++) {
        int i = idx[got];
        int flags = PyBUF_C_CONTIGUOUS | (i >= 6 ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(o[i], &b[i], flags) < 0) goto done;
    }
    int64_t n_words = (n_docs + 63) / 64 + 1;
    Py_ssize_t L = b[4].len / 24;
    int64_t n_blocks = b[1].len / 4 < b[2].len / 4 ? b[1].len / 4 : b[2].len / 4;
    if (b[3].len / 3 < n_blocks) n_blocks = b[3].len / 3;
    if (n_docs < 0 || b[4].len != L * 24 || b[6].len != L * n_words * 8 || b[7].len != L * n_words * 4) {
        PyErr_SetString(PyExc_ValueError, "member_bitmaps: arrays disagree in length");
        goto done;
    }
    int err = 0;
    Seg g = {b[0].buf, b[1].buf, b[2].buf, b[3].buf, NULL, b[0].len, n_docs, &err, 1, 3};
    const int64_t *keys = b[4].buf;
    Term *t = calloc(1, sizeof(Term));
    if (!t) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t l = 0; l < L && !err; l++) {
        t->s = keys[3 * l]; t->e = keys[3 * l + 1]; t->b0 = keys[3 * l + 2];
        t->cb = t->lb = -1;
        uint64_t *bits = (uint64_t *)b[6].buf + (size_t)l * (size_t)n_words;
        uint32_t *rank = (uint32_t *)b[7].buf + (size_t)l * (size_t)n_words;
        memset(bits, 0, (size_t)n_words * 8);
        int64_t n = t->e - t->s;
        if (t->s < 0 || n <= 0 || t->b0 < 0 || (n + BLOCK - 1) / BLOCK > n_blocks - t->b0) { err = 1; break; }
        int64_t b_end = block_of(t, t->e - 1) + 1;
        for (int64_t blk = t->b0; blk < b_end && !err; blk++) {
            ensure_block(&g, t, blk);
            int nb = (int)(block_end(t, blk) - block_start(t, blk));
            for (int i = 0; i < nb && !err; i++) bits[t->bd[i] >> 6] |= 1ULL << (t->bd[i] & 63);
        }
        uint32_t acc = 0;
        for (int64_t w = 0; w < n_words; w++) {
            rank[w] = acc;
            acc += popcount64(bits[w]);
        }
        if ((int64_t)acc != n) err = 1;
    }
    free(t);
    if (err) {
        PyErr_SetString(PyExc_ValueError, "member_bitmaps: damaged postings");
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[idx[i]]);
    return result;
}

/* member_stats(cache) -> (lists given a bitmap at query time, bytes of all the
   bitmaps (stored ones count against the budget too), lists whose bitmap the
   segment stores) */
static PyObject *member_stats(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *cap;
    if (!PyArg_ParseTuple(args, "O", &cap)) return NULL;
    MemberCache *mc = PyCapsule_GetPointer(cap, "clawkb.member_cache");
    if (!mc) return NULL;
    return Py_BuildValue("(LLL)", (long long)(mc->used - mc->stored_lists), (long long)mc->bytes,
                         (long long)mc->stored_lists);
}

static PyMethodDef methods[] = {
    {"member_cache", member_cache, METH_VARARGS,
     "member_cache(n_docs, budget_bytes, density[, keys, bits, rank]) -> a segment's cache of"
     " membership bitmaps (empty, or holding the ones the segment stores)"},
    {"member_bitmaps", member_bitmaps, METH_VARARGS,
     "member_bitmaps(packed, blk_pos, blk_last, blk_maxtf, keys, n_docs, out_bits, out_rank):"
     " the membership bitmaps of the lists keys (s, e, b0), as the segment file stores them"},
    {"member_stats", member_stats, METH_VARARGS,
     "member_stats(cache) -> (lists built at query time, their bytes, lists stored)"},
    {"vector_decode", vector_decode, METH_VARARGS,
     "vector_decode(on) -> bool: use the AVX2 block decoder where the CPU has it; returns the"
     " previous setting"},
    {"topk", topk, METH_VARARGS,
     "topk(packed, blk_pos, blk_last, factor, ranges, first_blocks, blk_maxtf, blk_minlen, weights,"
     " live, params, k1, n_docs, out_docs, out_scores, theta0) -> (n_out, n_scored)"},
    {"search", search, METH_VARARGS,
     "search(segs, hashes, qweights, params, k1, n_live, out_ids, out_scores[, exact[, field_major"
     "[, path]]]) -> n (-1: fall back); path 0: chosen per segment, 1: block-max, 2: term at a time"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_blockmax",
                                    "Exact block-max MaxScore top-k for clawkb segments.", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__blockmax(void) {
    len_table_init();
    return PyModule_Create(&module);
}
