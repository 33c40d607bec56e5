/* Compressed postings blocks (segment format 4), shared by _postings.c (encode,
   checked decode) and _blockmax.c (decodes only the blocks it cannot skip).

   A term's postings are cut into blocks of PBLOCK (the last may be shorter).
   Block b starts at byte blk_pos[b] of the segment's `packed` array:

     byte 0       wd: bit width of the doc gaps
     then         one little-endian bit stream, least significant bit first:
                  n doc gaps of wd bits, then for field f = 0, 1, 2 n term
                  frequencies of bit_width(blk_maxtf[b][f]) bits each (a field
                  no doc of the block has costs nothing)
                  padded to a whole byte

   Gaps: the first doc of a term's first block is stored as is, every other
   doc as its distance to the doc before it (the block's predecessor is the
   previous block's last doc, blk_last[b - 1]). The array ends with 8 zero
   bytes so a 64-bit load never reads past it. */
#ifndef CLAWKB_PACKED_H
#define CLAWKB_PACKED_H

#include <stdint.h>
#include <string.h>

#define PBLOCK 128

static inline int bit_width(uint32_t v) { return v ? 32 - __builtin_clz(v) : 0; }

static inline uint64_t load64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v; /* little-endian machines (x86-64, aarch64) */
}

/* Read n values of w bits (w <= 32) starting at bit `*bit` of `base`. */
static inline void unpack_bits(const uint8_t *base, uint64_t *bit, int w, int n, uint32_t *out) {
    if (w == 0) {
        memset(out, 0, sizeof(uint32_t) * (size_t)n);
        return;
    }
    uint64_t mask = (w == 32) ? 0xFFFFFFFFull : ((1ull << w) - 1);
    uint64_t pos = *bit;
    for (int i = 0; i < n; i++, pos += (uint64_t)w)
        out[i] = (uint32_t)((load64(base + (pos >> 3)) >> (pos & 7)) & mask);
    *bit = pos;
}

/* Whether block b (n postings, the term's first block when first_of_term)
   can be decoded without reading outside its arrays and decodes to docs that
   agree with blk_last: the block's bytes (width byte, bit stream, the 8-byte
   tail a 64-bit load may touch) lie inside packed[0:plen], the gap width is
   at most 32, and the docs, summed in 64 bits from the previous block's last
   doc (0 for a term's first block), end exactly at blk_last[b] < n_docs. They
   then ascend (gaps are unsigned) inside [blk_last[b - 1], blk_last[b]]. The
   caller has checked 0 <= b < its block count. On success docs[0:n] hold the
   block's docs and tf_bit, tf_w the bit offset (from the block's first
   byte) and width of each field's frequencies; returns 0, or -1 on
   damage (the outputs then undefined). */
static inline int decode_docs_checked(const uint8_t *packed, int64_t plen, const uint32_t *blk_pos,
                                      const uint32_t *blk_last, const uint8_t *maxtf, int64_t b,
                                      int first_of_term, int n, int64_t n_docs, uint32_t *docs,
                                      uint32_t tf_bit[3], uint8_t tf_w[3]) {
    int64_t at = blk_pos[b];
    if (n <= 0 || n > PBLOCK || at + 1 > plen) return -1;
    int wd = packed[at];
    if (wd > 32) return -1;
    uint32_t bits = 8 + (uint32_t)n * (uint32_t)wd; /* where each field's frequencies start */
    for (int f = 0; f < 3; f++) {
        tf_w[f] = (uint8_t)bit_width(maxtf[3 * b + f]);
        tf_bit[f] = bits;
        bits += (uint32_t)n * tf_w[f];
    }
    if (at + ((int64_t)bits + 7) / 8 + 8 > plen) return -1;
    uint64_t prev = first_of_term ? 0 : blk_last[b - 1];
#ifdef CLAWKB_FAST_UNPACK /* a vector decoder (_unpack.h), which may decline */
    if (CLAWKB_FAST_UNPACK(packed + at, wd, n, prev, docs) == 0) {
        prev = docs[n - 1];
        return (prev == blk_last[b] && (int64_t)prev < n_docs) ? 0 : -1;
    }
#endif
    uint64_t bit = 8;
    unpack_bits(packed + at, &bit, wd, n, docs);
    for (int i = 0; i < n; i++) {
        prev += docs[i];
        docs[i] = (uint32_t)prev;
    }
    return (prev == blk_last[b] && (int64_t)prev < n_docs) ? 0 : -1;
}

/* The frequencies of a block whose docs decode_docs_checked accepted (so its
   bytes are known to lie inside the array): p is the block's first byte,
   tf_bit and tf_w what the check gave; fills tfs[3 n] (row per posting). */
static inline void decode_tfs(const uint8_t *p, const uint32_t tf_bit[3], const uint8_t tf_w[3],
                              int n, uint8_t *tfs) {
    uint32_t tmp[PBLOCK];
    for (int f = 0; f < 3; f++) {
        if (tf_w[f] == 0) {
            for (int i = 0; i < n; i++) tfs[3 * i + f] = 0;
            continue;
        }
        uint64_t bit = tf_bit[f];
        unpack_bits(p, &bit, tf_w[f], n, tmp);
        for (int i = 0; i < n; i++) tfs[3 * i + f] = (uint8_t)tmp[i];
    }
}

/* One value of w bits (w <= 8 for frequencies) at bit `bit` of `base`. */
static inline uint32_t read_bits(const uint8_t *base, uint64_t bit, int w) {
    return (uint32_t)((load64(base + (bit >> 3)) >> (bit & 7)) & ((1ull << w) - 1));
}

#endif
