/* Compact term dictionary of a segment (format 5), shared by _postings.c
   (lookup from Python) and _blockmax.c (lookup inside a whole-query call).
   Layout and the reference implementation: termdict.py.

     terms  uint64 [T]         sorted term hashes
     dfs    uint8  [T]         document frequency, 255 = look in the escapes
     index  int64  [3 G + E]   for each group g of DICT_GROUP terms (G groups):
                               first posting, first block and escape number of
                               term g * DICT_GROUP; then the E escaped
                               frequencies (df >= 255), in term order

   A term's postings and blocks start where its group's do, plus the
   frequencies (and block counts) of the terms before it in the group. */
#ifndef CLAWKB_DICT_H
#define CLAWKB_DICT_H

#include <stdint.h>

#define DICT_GROUP 32
#define DICT_BLOCK 128
#define DICT_ESCAPE 255

/* Position of hash h in terms[0:nt], or -1. */
static inline int64_t dict_find(const uint64_t *terms, int64_t nt, uint64_t h) {
    int64_t lo = 0, hi = nt;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (terms[mid] < h) lo = mid + 1; else hi = mid;
    }
    return (lo < nt && terms[lo] == h) ? lo : -1;
}

/* Postings [*s, *e) and first block *b0 of term t (0 <= t < nt); n_index is
   the length of `index`. Every read of `index` is checked against it and every
   stored count against what a segment can hold, so a damaged dictionary gives
   -1 (else 0), never a read outside the arrays. The range itself is checked
   by the caller against its postings and blocks. */
#define DICT_MAX ((int64_t)1 << 40)

static inline int dict_entry(const uint8_t *dfs, const int64_t *index, int64_t n_index, int64_t nt,
                             int64_t t, int64_t *s, int64_t *e, int64_t *b0) {
    int64_t g = t / DICT_GROUP, n_groups = (nt + DICT_GROUP - 1) / DICT_GROUP;
    if (3 * n_groups > n_index) return -1;
    const int64_t *row = index + 3 * g;
    if (row[0] < 0 || row[0] > DICT_MAX || row[1] < 0 || row[1] > DICT_MAX || row[2] < 0 ||
        row[2] > n_index - 3 * n_groups)
        return -1;
    int64_t esc = 3 * n_groups + row[2];
    int64_t pos = row[0], blk = row[1];
    for (int64_t j = g * DICT_GROUP; j <= t; j++) {
        int64_t d = dfs[j];
        if (d == DICT_ESCAPE) {
            if (esc >= n_index) return -1;
            d = index[esc++];
            if (d < DICT_ESCAPE || d > DICT_MAX) return -1;
        }
        if (j == t) {
            *s = pos;
            *e = pos + d;
            *b0 = blk;
            return 0;
        }
        pos += d;
        blk += (d + DICT_BLOCK - 1) / DICT_BLOCK;
    }
    return -1; /* not reached */
}

#endif
