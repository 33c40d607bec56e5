/* One-byte codes for the per-block minimum field lengths (blk_minlen, segment
   format 5), shared by _postings.c (merges write codes) and _blockmax.c
   (block bounds read them). Code c stands for length len_of_code[c]: exact
   below 96, then steps of at most 1/28 (3.6 %) up to 22,243. A block's code
   is the largest whose length is <= its true minimum, so the decoded length
   is still a lower bound and the score bound an upper bound (only a little
   looser). blocks.py builds the same table. */
#ifndef CLAWKB_BOUNDS_H
#define CLAWKB_BOUNDS_H

#include <stdint.h>

#define LEN_EXACT 96
#define LEN_STEP 28

static uint16_t len_of_code[256];

static void len_table_init(void) {
    for (int c = 0; c < 256; c++)
        len_of_code[c] = c < LEN_EXACT ? (uint16_t)c
                                       : (uint16_t)(len_of_code[c - 1] + len_of_code[c - 1] / LEN_STEP);
}

/* The largest code whose length is <= L. */
static inline uint8_t minlen_code(uint32_t L) {
    int lo = 0, hi = 255;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (len_of_code[mid] <= L) lo = mid; else hi = mid - 1;
    }
    return (uint8_t)lo;
}

#endif
