/*
 * Pack and unpack a segment's postings (format 4, layout in _packed.h).
 *
 * pack(offsets int64[T+1], docs uint32[P], tfs uint8[P,3], blk_maxtf uint8[B,3])
 *     -> (packed bytes, blk_pos uint32[B] bytes, blk_last uint32[B] bytes)
 * unpack(offsets, packed, blk_pos, blk_last, blk_maxtf, docs_out, tfs_out)
 *     fills docs_out uint32[P] and tfs_out uint8[P,3]
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#ifndef _WIN32
#include <sys/mman.h>
#include <unistd.h>
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_packed.h"
#include "_dict.h"
#include "_bounds.h"

static int get_buf(PyObject *o, Py_buffer *b, const char *what, int writable) {
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, b, flags) < 0) {
        PyErr_Format(PyExc_TypeError, "%s must be a contiguous%s buffer", what,
                     writable ? " writable" : "");
        return -1;
    }
    return 0;
}

/* Append n values of w bits to the stream at `*bit` (buffer zeroed beforehand). */
static void put_bits(uint8_t *base, uint64_t *bit, int w, int n, const uint32_t *vals) {
    uint64_t pos = *bit;
    for (int i = 0; i < n; i++, pos += (uint64_t)w) {
        uint64_t v = (uint64_t)vals[i] << (pos & 7);
        uint8_t *p = base + (pos >> 3);
        uint64_t cur;
        memcpy(&cur, p, 8);
        cur |= v;
        memcpy(p, &cur, 8);
    }
    *bit = pos;
}

static PyObject *pack(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *o_off, *o_docs, *o_tfs, *o_maxtf;
    if (!PyArg_ParseTuple(args, "OOOO", &o_off, &o_docs, &o_tfs, &o_maxtf)) return NULL;
    Py_buffer b[4];
    PyObject *objs[4] = {o_off, o_docs, o_tfs, o_maxtf};
    const char *names[4] = {"offsets", "docs", "tfs", "blk_maxtf"};
    int got = 0;
    for (; got < 4; got++)
        if (get_buf(objs[got], &b[got], names[got], 0) < 0) goto fail;
    const int64_t *off = b[0].buf;
    const uint32_t *docs = b[1].buf;
    const uint8_t *tfs = b[2].buf, *maxtf = b[3].buf;
    Py_ssize_t T = b[0].len / 8 - 1, B = b[3].len / 3;
    /* worst case: 1 byte + 128 x (32 + 3 x 8) bits per block, plus the tail */
    size_t cap = (size_t)B * (1 + PBLOCK * 7) + 16;
    uint8_t *out = calloc(cap, 1);
    uint32_t *pos = malloc(sizeof(uint32_t) * (B ? B : 1));
    uint32_t *last = malloc(sizeof(uint32_t) * (B ? B : 1));
    if (!out || !pos || !last) {
        free(out); free(pos); free(last);
        PyErr_NoMemory();
        goto fail;
    }
    size_t used = 0;
    int64_t blk = 0;
    uint32_t vals[PBLOCK];
    int overflow = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t t = 0; t < T && !overflow; t++) {
        uint32_t prev = 0;
        for (int64_t s = off[t]; s < off[t + 1]; s += PBLOCK, blk++) {
            int n = (int)((off[t + 1] - s) < PBLOCK ? (off[t + 1] - s) : PBLOCK);
            uint32_t maxgap = 0;
            for (int i = 0; i < n; i++) {
                vals[i] = docs[s + i] - prev;
                prev = docs[s + i];
                if (vals[i] > maxgap) maxgap = vals[i];
            }
            if (used > 0xFFFFFFFFull - (1 + PBLOCK * 7)) { overflow = 1; break; }
            pos[blk] = (uint32_t)used;
            last[blk] = prev;
            uint8_t *p = out + used;
            int wd = bit_width(maxgap);
            p[0] = (uint8_t)wd;
            uint64_t bit = 8;
            put_bits(p, &bit, wd, n, vals);
            for (int f = 0; f < 3; f++) {
                int w = bit_width(maxtf[3 * blk + f]);
                if (!w) continue;
                for (int i = 0; i < n; i++) vals[i] = tfs[3 * (s + i) + f];
                put_bits(p, &bit, w, n, vals);
            }
            used += (size_t)((bit + 7) >> 3);
        }
    }
    Py_END_ALLOW_THREADS
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    if (overflow || blk != B) {
        free(out); free(pos); free(last);
        PyErr_SetString(PyExc_ValueError,
                        overflow ? "segment postings exceed 4 GiB packed"
                                 : "blk_maxtf does not match the offsets");
        return NULL;
    }
    PyObject *r = Py_BuildValue("(y#y#y#)", (const char *)out, (Py_ssize_t)(used + 8),
                                (const char *)pos, (Py_ssize_t)(sizeof(uint32_t) * B),
                                (const char *)last, (Py_ssize_t)(sizeof(uint32_t) * B));
    free(out); free(pos); free(last);
    return r;
fail:
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    return NULL;
}

static PyObject *unpack(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *o[7];
    if (!PyArg_ParseTuple(args, "OOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6]))
        return NULL;
    const char *names[7] = {"offsets", "packed", "blk_pos", "blk_last", "blk_maxtf",
                            "docs_out", "tfs_out"};
    Py_buffer b[7];
    int got = 0;
    for (; got < 7; got++)
        if (get_buf(o[got], &b[got], names[got], got >= 5) < 0) goto fail;
    const int64_t *off = b[0].buf;
    const uint8_t *packed = b[1].buf, *maxtf = b[4].buf;
    const uint32_t *pos = b[2].buf, *last = b[3].buf;
    uint32_t *docs = b[5].buf;
    uint8_t *tfs = b[6].buf;
    Py_ssize_t T = b[0].len / 8 - 1, B = b[2].len / 4;
    if (b[3].len / 4 < B) B = b[3].len / 4;
    if (b[4].len / 3 < B) B = b[4].len / 3;
    int64_t P = T >= 0 ? off[T] : 0;
    if ((int64_t)(b[5].len / 4) < P || (int64_t)(b[6].len / 3) < P) {
        PyErr_SetString(PyExc_ValueError, "output buffers are too small");
        goto fail;
    }
    int64_t blk = 0;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t t = 0; t < T && !bad; t++) {
        if (off[t] < 0 || off[t + 1] < off[t] || off[t + 1] > P) { bad = 2; break; }
        for (int64_t s = off[t]; s < off[t + 1]; s += PBLOCK, blk++) {
            if (blk >= B) { bad = 1; break; }
            int n = (int)((off[t + 1] - s) < PBLOCK ? (off[t + 1] - s) : PBLOCK);
            /* the docs are checked (bytes in range, ending at blk_last) before
               the frequencies are read from the same, now known good, bytes */
            uint32_t tf_bit[3];
            uint8_t tf_w[3];
            if (decode_docs_checked(packed, b[1].len, pos, last, maxtf, blk, s == off[t], n,
                                    INT64_MAX, docs + s, tf_bit, tf_w) < 0) { bad = 2; break; }
            decode_tfs(packed + pos[blk], tf_bit, tf_w, n, tfs + 3 * s);
        }
    }
    Py_END_ALLOW_THREADS
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, bad == 1 ? "packed postings have fewer blocks than offsets need"
                                                   : "damaged packed postings");
        return NULL;
    }
    Py_RETURN_NONE;
fail:
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    return NULL;
}


/* assemble(rank uint32[n], doc uint32[n], field uint8[n], tf uint8[n], n_terms,
 *          off_out int64[T+1], docs_out uint32[n], tfs_out uint8[3n] zeroed) -> P
 *
 * Inverted entries (one per term, doc and field, in ascending doc order) to
 * postings ordered by term rank then doc, the fields of one (term, doc) folded
 * into one row. Two passes over the entries, no per-entry temporary: the first
 * counts each term's postings (a term's entries of one doc are adjacent in its
 * own order, since docs ascend: a new posting is a doc other than the term's
 * last), the second scatters each entry straight to its term's next slot. The
 * only temporaries are two per-term arrays (next slot, last doc). The P
 * postings are written to the caller's arrays (sized for n, the most there can
 * be; untouched pages cost nothing). */
static PyObject *assemble(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *o[7];
    Py_ssize_t T;
    if (!PyArg_ParseTuple(args, "OOOOnOOO", &o[0], &o[1], &o[2], &o[3], &T, &o[4], &o[5], &o[6]))
        return NULL;
    const char *names[7] = {"rank", "doc", "field", "tf", "off_out", "docs_out", "tfs_out"};
    Py_buffer b[7];
    int got = 0;
    PyObject *result = NULL;
    int64_t *start = NULL;
    uint32_t *last = NULL;
    for (; got < 7; got++)
        if (get_buf(o[got], &b[got], names[got], got >= 4) < 0) goto done;
    Py_ssize_t n = b[0].len / 4;
    if (b[1].len / 4 != n || b[2].len != n || b[3].len != n || T < 0) {
        PyErr_SetString(PyExc_ValueError, "assemble: arrays differ in length");
        goto done;
    }
    if (b[4].len / 8 < T + 1 || b[5].len / 4 < n || b[6].len / 3 < n) {
        PyErr_SetString(PyExc_ValueError, "assemble: output arrays are too small");
        goto done;
    }
    const uint32_t *rank = b[0].buf, *doc = b[1].buf;
    const uint8_t *field = b[2].buf, *tf = b[3].buf;
    int64_t *off = b[4].buf;
    uint32_t *docs = b[5].buf;
    uint8_t *tfs = b[6].buf;
    start = calloc((size_t)T + 1, sizeof(int64_t));
    last = malloc(sizeof(uint32_t) * (size_t)(T ? T : 1));
    if (!start || !last) { PyErr_NoMemory(); goto done; }
    memset(last, 0xff, sizeof(uint32_t) * (size_t)T);  /* no doc yet: UINT32_MAX */
    int bad = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t r = rank[i];
        if (r >= (uint64_t)T || field[i] > 2 || doc[i] == UINT32_MAX) { bad = 1; break; }
        if (last[r] != doc[i]) { last[r] = doc[i]; start[r + 1]++; }
    }
    if (bad) { PyErr_SetString(PyExc_ValueError, "assemble: rank or field out of range"); goto done; }
    for (Py_ssize_t t = 0; t < T; t++) {
        start[t + 1] += start[t];
        off[t] = start[t];
    }
    int64_t P = start[T];
    memset(last, 0xff, sizeof(uint32_t) * (size_t)T);
    /* start[t] is now term t's next free slot */
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t r = rank[i], d = doc[i];
        int64_t p;
        if (last[r] != d) {
            last[r] = d;
            p = start[r]++;
            docs[p] = d;
        } else {
            p = start[r] - 1;
        }
        tfs[3 * p + field[i]] = tf[i];
    }
    off[T] = P;
    result = PyLong_FromLongLong((long long)P);
done:
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    free(start); free(last);
    return result;
}


#define MERGE_ITEMS 7

/* ValueError((input number, what)): the caller names the segment's folder. */
static void set_damaged(Py_ssize_t seg, const char *what) {
    PyObject *v = Py_BuildValue("(ns)", seg, what);
    if (v) {
        PyErr_SetObject(PyExc_ValueError, v);
        Py_DECREF(v);
    }
}

/* What is wrong with merge input bi (terms, offsets, packed, blk_pos,
   blk_last, blk_maxtf, remap), or NULL: checked before any of it is decoded,
   as the search kernels check theirs. Terms strictly ascend; there is one
   offset more than terms, from 0, never decreasing; every per-block array
   holds the blocks the offsets imply. Each block is then checked as it is
   decoded (decode_docs_checked: bytes inside `packed`, docs ending at
   blk_last and below the remap's length), so a damaged segment gives one
   ValueError and no read outside an array. */
static const char *check_merge_input(const Py_buffer *bi) {
    int64_t T = bi[0].len / 8;
    const uint64_t *terms = bi[0].buf;
    const int64_t *off = bi[1].buf;
    if (bi[1].len / 8 < T + 1) return "fewer offsets than terms";
    if (off[0] != 0) return "offsets do not start at 0";
    int64_t B = bi[3].len / 4, need = 0;
    if (bi[4].len / 4 < B) B = bi[4].len / 4;
    if (bi[5].len / 3 < B) B = bi[5].len / 3;
    for (int64_t t = 0; t < T; t++) {
        if (t > 0 && terms[t] <= terms[t - 1]) return "terms out of order";
        if (off[t + 1] < off[t] || off[t + 1] - off[t] > DICT_MAX) return "offsets out of order";
        need += (off[t + 1] - off[t] + PBLOCK - 1) / PBLOCK;
        if (need > B) return "fewer blocks than the offsets need";
    }
    return NULL;
}

/* Decode block blkno of an input (checked) into bd and bt; -1 on damage. */
static inline int merge_block(const Py_buffer *bi, int64_t blkno, int first, int n, uint32_t *bd,
                              uint8_t *bt) {
    const uint8_t *packed = bi[2].buf;
    const uint32_t *pos = bi[3].buf;
    uint32_t tf_bit[3];
    uint8_t tf_w[3];
    if (decode_docs_checked(packed, bi[2].len, pos, bi[4].buf, bi[5].buf, blkno, first, n,
                            bi[6].len / 4, bd, tf_bit, tf_w) < 0)
        return -1;
    decode_tfs(packed + pos[blkno], tf_bit, tf_w, n, bt);
    return 0;
}

/* merge(inputs) -> (terms uint64[T], offsets int64[T+1], docs uint32[P], tfs uint8[P*3]) bytes
 *
 * Each input is (terms, offsets, packed, blk_pos, blk_last, blk_maxtf, remap int32[n_docs]);
 * remap gives a doc's number in the output (-1: dropped). Terms are merged in
 * hash order; a term's postings are appended input by input (the caller orders
 * inputs so that remapped docs ascend), decoding one block at a time; a term
 * left without postings is dropped. Memory: the output plus one block. */
static PyObject *merge(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *arg, *o_out[4];
    if (!PyArg_ParseTuple(args, "O!OOOO", &PyList_Type, &arg, &o_out[0], &o_out[1], &o_out[2],
                          &o_out[3]))
        return NULL;
    Py_buffer ob[4];
    int ogot = 0;
    for (; ogot < 4; ogot++)
        if (get_buf(o_out[ogot], &ob[ogot], "merge output", 1) < 0) {
            for (int i = 0; i < ogot; i++) PyBuffer_Release(&ob[i]);
            return NULL;
        }
    Py_ssize_t S = PyList_GET_SIZE(arg);
    Py_buffer *b = calloc((size_t)(S ? S : 1) * MERGE_ITEMS, sizeof(Py_buffer));
    Py_ssize_t *cur = calloc(S ? S : 1, sizeof(Py_ssize_t));
    int64_t *blkno = calloc(S ? S : 1, sizeof(int64_t));
    int got = 0;
    PyObject *result = NULL;
    uint64_t *oterms = NULL;
    int64_t *ooff = NULL;
    uint32_t *odocs = NULL;
    uint8_t *otfs = NULL;
    if (!b || !cur || !blkno) { PyErr_NoMemory(); goto done; }
    int64_t maxP = 0, maxT = 0;
    for (Py_ssize_t i = 0; i < S; i++) {
        PyObject *tup = PyList_GET_ITEM(arg, i);
        if (!PyTuple_Check(tup) || PyTuple_GET_SIZE(tup) != MERGE_ITEMS) {
            PyErr_SetString(PyExc_TypeError, "each merge input must be a tuple of 7 arrays");
            goto done;
        }
        for (int j = 0; j < MERGE_ITEMS; j++) {
            if (get_buf(PyTuple_GET_ITEM(tup, j), &b[i * MERGE_ITEMS + j], "merge input", 0) < 0)
                goto done;
            got = (int)(i * MERGE_ITEMS + j + 1);
        }
        const char *why = check_merge_input(&b[i * MERGE_ITEMS]);
        if (why) {
            set_damaged(i, why);
            goto done;
        }
        Py_ssize_t T = b[i * MERGE_ITEMS].len / 8;
        maxT += T;
        maxP += ((const int64_t *)b[i * MERGE_ITEMS + 1].buf)[T];
    }
    if (ob[0].len < 8 * maxT || ob[1].len < 8 * (maxT + 1) || ob[2].len < 4 * maxP ||
        ob[3].len < 3 * maxP) {
        PyErr_SetString(PyExc_ValueError, "merge: output buffers are too small");
        goto done;
    }
    oterms = ob[0].buf;
    ooff = ob[1].buf;
    odocs = ob[2].buf;
    otfs = ob[3].buf;
    int64_t T_out = 0, P = 0;
    Py_ssize_t bad = 0; /* 1 + the damaged input */
    uint32_t bd[PBLOCK];
    uint8_t bt[3 * PBLOCK];
    Py_BEGIN_ALLOW_THREADS
    while (!bad) {
        uint64_t h = 0;
        int any = 0;
        for (Py_ssize_t i = 0; i < S; i++) {
            if (cur[i] >= b[i * MERGE_ITEMS].len / 8) continue;
            uint64_t hi = ((const uint64_t *)b[i * MERGE_ITEMS].buf)[cur[i]];
            if (!any || hi < h) { h = hi; any = 1; }
        }
        if (!any) break;
        int64_t start = P;
        for (Py_ssize_t i = 0; i < S && !bad; i++) {
            Py_buffer *bi = &b[i * MERGE_ITEMS];
            Py_ssize_t t = cur[i];
            if (t >= bi[0].len / 8 || ((const uint64_t *)bi[0].buf)[t] != h) continue;
            const int64_t *off = bi[1].buf;
            const int32_t *remap = bi[6].buf;
            for (int64_t st = off[t]; st < off[t + 1]; st += PBLOCK, blkno[i]++) {
                int n = (int)((off[t + 1] - st) < PBLOCK ? (off[t + 1] - st) : PBLOCK);
                if (merge_block(bi, blkno[i], st == off[t], n, bd, bt) < 0) { bad = i + 1; break; }
                for (int q = 0; q < n; q++) {
                    int32_t nd = remap[bd[q]];
                    if (nd < 0) continue;
                    odocs[P] = (uint32_t)nd;
                    memcpy(otfs + 3 * P, bt + 3 * q, 3);
                    P++;
                }
            }
            cur[i]++;
        }
        if (P > start) {
            oterms[T_out] = h;
            ooff[T_out] = start;
            T_out++;
        }
    }
    ooff[T_out] = P;
    Py_END_ALLOW_THREADS
    if (bad) {
        set_damaged(bad - 1, "damaged packed postings");
        goto done;
    }
    result = Py_BuildValue("(LL)", (long long)T_out, (long long)P);
done:
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    for (int i = 0; i < ogot; i++) PyBuffer_Release(&ob[i]);
    free(b); free(cur); free(blkno);
    return result;
}


/* One block of n postings (absolute docs, previous doc `prev`) at p; returns its bytes. */
static size_t encode_block(uint8_t *p, const uint32_t *docs, const uint8_t *tfs, int n,
                           uint32_t prev, const uint8_t *mt) {
    uint32_t vals[PBLOCK], maxgap = 0;
    for (int i = 0; i < n; i++) {
        vals[i] = docs[i] - prev;
        prev = docs[i];
        if (vals[i] > maxgap) maxgap = vals[i];
    }
    int wd = bit_width(maxgap);
    p[0] = (uint8_t)wd;
    uint64_t bit = 8;
    put_bits(p, &bit, wd, n, vals);
    for (int f = 0; f < 3; f++) {
        int w = bit_width(mt[f]);
        if (!w) continue;
        for (int i = 0; i < n; i++) vals[i] = tfs[3 * i + f];
        put_bits(p, &bit, w, n, vals);
    }
    return (size_t)((bit + 7) >> 3);
}

#define MP_OUT 8
#define RELEASE_STEP (8u << 20)

/* Inputs flagged in `release` (bit i: input i's packed postings are a read-only
 * file mapping) give their consumed pages back as the merge passes them: the
 * postings are read once, in order, so resident memory stays near the output
 * instead of growing by every input. Only the mapping is dropped (the file's
 * pages stay in the page cache); a later read faults them in again. Never used
 * on anonymous memory, whose pages MADV_DONTNEED would zero. */
static void release_consumed(const Py_buffer *b, Py_ssize_t S, const int64_t *blkno,
                             size_t *dropped, unsigned long long release) {
#ifdef MADV_DONTNEED
    static long page = 0;
    if (!page) page = sysconf(_SC_PAGESIZE);
    if (page <= 0) return;
    for (Py_ssize_t i = 0; i < S && i < 64; i++) {
        if (!(release >> i & 1)) continue;
        const Py_buffer *bi = &b[i * MERGE_ITEMS];
        int64_t nb = bi[3].len / 4;
        size_t len = (size_t)bi[2].len;
        size_t upto = blkno[i] < nb ? ((const uint32_t *)bi[3].buf)[blkno[i]] : len;
        if (upto > len) upto = len; /* a damaged offset: never past the mapping */
        if (upto <= dropped[i] || (upto - dropped[i] < RELEASE_STEP && upto < len)) continue;
        uintptr_t base = (uintptr_t)bi[2].buf;
        uintptr_t lo = (base + dropped[i] + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
        uintptr_t hi = (base + upto) & ~((uintptr_t)page - 1);
        if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
        dropped[i] = upto;
    }
#else
    (void)b; (void)S; (void)blkno; (void)dropped; (void)release;
#endif
}

/* merge_packed(inputs, lens, terms, offsets, term_blocks, packed, blk_pos, blk_last,
 *              blk_maxtf, blk_minlen) -> (n_terms, n_blocks, packed bytes)
 *
 * Like merge(), but writes the output segment's packed postings and block
 * bounds directly, one term at a time: raw postings are never held for more
 * than one term. `lens` uint32 [N, 3] are the output docs' field lengths.
 * The outputs are the caller's arrays, sized for the worst case (terms: all
 * input terms; blocks: all input blocks, as merging lists never needs more
 * blocks than they had; packed: 1 + 7 x 128 bytes a block plus 24): pages
 * past what is written are never touched, so they cost no memory, and the
 * result is not copied again. */
static PyObject *merge_packed(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *arg, *o_lens, *o_out[MP_OUT];
    unsigned long long release = 0;
    if (!PyArg_ParseTuple(args, "O!OOOOOOOOO|K", &PyList_Type, &arg, &o_lens, &o_out[0], &o_out[1],
                          &o_out[2], &o_out[3], &o_out[4], &o_out[5], &o_out[6], &o_out[7],
                          &release))
        return NULL;
    Py_buffer lb, ob[MP_OUT];
    int ogot = 0, got = 0, oom = 0;
    if (get_buf(o_lens, &lb, "lens", 0) < 0) return NULL;
    for (; ogot < MP_OUT; ogot++)
        if (get_buf(o_out[ogot], &ob[ogot], "merge_packed output", 1) < 0) {
            for (int i = 0; i < ogot; i++) PyBuffer_Release(&ob[i]);
            PyBuffer_Release(&lb);
            return NULL;
        }
    const uint32_t *lens = lb.buf;
    Py_ssize_t S = PyList_GET_SIZE(arg);
    Py_buffer *b = calloc((size_t)(S ? S : 1) * MERGE_ITEMS, sizeof(Py_buffer));
    Py_ssize_t *cur = calloc(S ? S : 1, sizeof(Py_ssize_t));
    int64_t *blkno = calloc(S ? S : 1, sizeof(int64_t));
    size_t *dropped = calloc(S ? S : 1, sizeof(size_t)); /* packed bytes released so far */
    uint32_t *tdocs = NULL;
    uint8_t *ttfs = NULL;
    size_t tcap = 0;
    PyObject *result = NULL;
    if (!b || !cur || !blkno || !dropped) { PyErr_NoMemory(); goto done; }
    int64_t maxT = 0, maxB = 0;
    for (Py_ssize_t i = 0; i < S; i++) {
        PyObject *tup = PyList_GET_ITEM(arg, i);
        if (!PyTuple_Check(tup) || PyTuple_GET_SIZE(tup) != MERGE_ITEMS) {
            PyErr_SetString(PyExc_TypeError, "each merge input must be a tuple of 7 arrays");
            goto done;
        }
        for (int j = 0; j < MERGE_ITEMS; j++) {
            if (get_buf(PyTuple_GET_ITEM(tup, j), &b[i * MERGE_ITEMS + j], "merge input", 0) < 0)
                goto done;
            got = (int)(i * MERGE_ITEMS + j + 1);
        }
        const char *why = check_merge_input(&b[i * MERGE_ITEMS]);
        if (why) {
            set_damaged(i, why);
            goto done;
        }
        maxT += b[i * MERGE_ITEMS].len / 8;
        maxB += b[i * MERGE_ITEMS + 3].len / 4;
    }
    if (ob[0].len < 8 * maxT || ob[1].len < 8 * (maxT + 1) || ob[2].len < 4 * (maxT + 1) ||
        ob[3].len < maxB * (1 + PBLOCK * 7) + 24 || ob[4].len < 4 * maxB || ob[5].len < 4 * maxB ||
        ob[6].len < 3 * maxB || ob[7].len < 3 * maxB) {
        PyErr_SetString(PyExc_ValueError, "merge_packed: output buffers are too small");
        goto done;
    }
    uint64_t *o_terms = ob[0].buf;
    int64_t *o_off = ob[1].buf;
    uint32_t *o_tblk = ob[2].buf, *o_pos = ob[4].buf, *o_last = ob[5].buf;
    uint8_t *o_packed = ob[3].buf, *o_maxtf = ob[6].buf;
    uint8_t *o_minlen = ob[7].buf;
    Py_ssize_t n_lens = lb.len / 12;
    int64_t P = 0, nblk = 0, T_out = 0;
    Py_ssize_t bad = 0; /* 1 + the damaged input */
    size_t used = 0;
    uint32_t bd[PBLOCK];
    uint8_t bt[3 * PBLOCK];
    Py_BEGIN_ALLOW_THREADS
    while (!bad) {
        uint64_t h = 0;
        int any = 0;
        for (Py_ssize_t i = 0; i < S; i++) {
            if (cur[i] >= b[i * MERGE_ITEMS].len / 8) continue;
            uint64_t hi = ((const uint64_t *)b[i * MERGE_ITEMS].buf)[cur[i]];
            if (!any || hi < h) { h = hi; any = 1; }
        }
        if (!any) break;
        size_t tn = 0; /* this term's postings, gathered */
        for (Py_ssize_t i = 0; i < S && !oom && !bad; i++) {
            Py_buffer *bi = &b[i * MERGE_ITEMS];
            Py_ssize_t t = cur[i];
            if (t >= bi[0].len / 8 || ((const uint64_t *)bi[0].buf)[t] != h) continue;
            const int64_t *off = bi[1].buf;
            const int32_t *remap = bi[6].buf;
            size_t need = tn + (size_t)(off[t + 1] - off[t]);
            if (need > tcap) {
                size_t nc = tcap ? tcap : 4096;
                while (nc < need) nc *= 2;
                uint32_t *d2 = realloc(tdocs, nc * sizeof(uint32_t));
                if (d2) tdocs = d2;
                uint8_t *t2 = d2 ? realloc(ttfs, nc * 3) : NULL;
                if (t2) ttfs = t2;
                if (!d2 || !t2) { oom = 1; break; }
                tcap = nc;
            }
            for (int64_t st = off[t]; st < off[t + 1]; st += PBLOCK, blkno[i]++) {
                int n = (int)((off[t + 1] - st) < PBLOCK ? (off[t + 1] - st) : PBLOCK);
                if (merge_block(bi, blkno[i], st == off[t], n, bd, bt) < 0) { bad = i + 1; break; }
                for (int q = 0; q < n; q++) {
                    int32_t nd = remap[bd[q]];
                    if (nd < 0) continue;
                    tdocs[tn] = (uint32_t)nd;
                    memcpy(ttfs + 3 * tn, bt + 3 * q, 3);
                    tn++;
                }
            }
            cur[i]++;
        }
        if (oom || bad) break;
        if (release) release_consumed(b, S, blkno, dropped, release);
        if (!tn) continue;
        o_terms[T_out] = h;
        o_off[T_out] = P;
        o_tblk[T_out] = (uint32_t)nblk;
        T_out++;
        uint32_t prev = 0;
        for (size_t s0 = 0; s0 < tn; s0 += PBLOCK) {
            int n = (int)(tn - s0 < PBLOCK ? tn - s0 : PBLOCK);
            uint8_t *mt = o_maxtf + 3 * nblk;
            uint32_t ml[3] = {UINT32_MAX, UINT32_MAX, UINT32_MAX};
            for (int f = 0; f < 3; f++) mt[f] = 0;
            for (int q = 0; q < n; q++) {
                uint32_t d = tdocs[s0 + q];
                for (int f = 0; f < 3; f++) {
                    uint8_t v = ttfs[3 * (s0 + q) + f];
                    if (v > mt[f]) mt[f] = v;
                    uint32_t L = (Py_ssize_t)d < n_lens ? lens[3 * (size_t)d + f] : 0;
                    if (L < ml[f]) ml[f] = L;
                }
            }
            for (int f = 0; f < 3; f++) o_minlen[3 * nblk + f] = minlen_code(ml[f]);
            if (used > 0xFFFFFFFFull - (1 + PBLOCK * 7)) { oom = 1; break; }
            memset(o_packed + used, 0, 1 + PBLOCK * 7 + 16); /* put_bits ORs */
            uint32_t lastd = tdocs[s0 + n - 1];
            o_pos[nblk] = (uint32_t)used;
            o_last[nblk] = lastd;
            used += encode_block(o_packed + used, tdocs + s0, ttfs + 3 * s0, n, prev, mt);
            prev = lastd;
            nblk++;
        }
        if (oom) break;
        P += (int64_t)tn;
    }
    if (!oom && !bad) {
        o_off[T_out] = P;
        o_tblk[T_out] = (uint32_t)nblk;
        memset(o_packed + used, 0, 8);
        used += 8;
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        set_damaged(bad - 1, "damaged packed postings");
        goto done;
    }
    if (oom) {
        PyErr_SetString(PyExc_MemoryError, "merge: out of memory (or packed postings over 4 GiB)");
        goto done;
    }
    result = Py_BuildValue("(LLL)", (long long)T_out, (long long)nblk, (long long)used);
done:
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    for (int i = 0; i < ogot; i++) PyBuffer_Release(&ob[i]);
    PyBuffer_Release(&lb);
    free(b); free(cur); free(blkno); free(dropped); free(tdocs); free(ttfs);
    return result;
}

/* dict_lookup(terms uint64[T], dfs uint8[T], index int64[...], hashes uint64[Q],
 *             ranges_out int64[2Q], first_out int64[Q])
 * Postings range and first block of each hash in a compact dictionary
 * (_dict.h); outputs are left as they are for hashes not in it. */
static PyObject *dict_lookup(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *o[6];
    if (!PyArg_ParseTuple(args, "OOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5])) return NULL;
    const char *names[6] = {"terms", "dfs", "index", "hashes", "ranges_out", "first_out"};
    Py_buffer b[6];
    int got = 0;
    for (; got < 6; got++)
        if (get_buf(o[got], &b[got], names[got], got >= 4) < 0) goto fail;
    int64_t nt = b[0].len / 8, nq = b[3].len / 8;
    if (b[1].len != nt || b[4].len / 8 < 2 * nq || b[5].len / 8 < nq ||
        b[2].len / 8 < 3 * ((nt + DICT_GROUP - 1) / DICT_GROUP)) {
        PyErr_SetString(PyExc_ValueError, "dict_lookup: array sizes do not match");
        goto fail;
    }
    const uint64_t *terms = b[0].buf, *hashes = b[3].buf;
    int64_t *ranges = b[4].buf, *first = b[5].buf;
    int bad = 0;
    for (int64_t q = 0; q < nq && !bad; q++) {
        int64_t t = dict_find(terms, nt, hashes[q]);
        if (t >= 0)
            bad = dict_entry(b[1].buf, b[2].buf, b[2].len / 8, nt, t, &ranges[2 * q],
                             &ranges[2 * q + 1], &first[q]) < 0;
    }
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "damaged term dictionary");
        return NULL;
    }
    Py_RETURN_NONE;
fail:
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    return NULL;
}

static PyMethodDef methods[] = {
    {"dict_lookup", dict_lookup, METH_VARARGS,
     "dict_lookup(terms, dfs, index, hashes, ranges_out, first_out)"},
    {"merge_packed", merge_packed, METH_VARARGS,
     "merge_packed(inputs, lens, terms, offsets, term_blocks, packed, blk_pos, blk_last,"
     " blk_maxtf, blk_minlen) -> (n_terms, n_blocks, packed bytes)"},
    {"merge", merge, METH_VARARGS,
     "merge([(terms, offsets, packed, blk_pos, blk_last, blk_maxtf, remap), ...], terms_out,"
     " offsets_out, docs_out, tfs_out) -> (n_terms, n_postings)"},
    {"assemble", assemble, METH_VARARGS,
     "assemble(rank, doc, field, tf, n_terms, off_out, docs_out, tfs_out) -> n_postings"},
    {"pack", pack, METH_VARARGS,
     "pack(offsets, docs, tfs, blk_maxtf) -> (packed, blk_pos, blk_last) as bytes"},
    {"unpack", unpack, METH_VARARGS,
     "unpack(offsets, packed, blk_pos, blk_last, blk_maxtf, docs_out, tfs_out)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_postings",
                                    "Bit-packed postings blocks of clawkb segments.", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__postings(void) {
    len_table_init();
    return PyModule_Create(&module);
}
