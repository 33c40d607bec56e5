/* Doc-gap decoding of a postings block with AVX2 (_packed.h's layout), chosen
   at run time: x86-64 CPUs without AVX2, other architectures and compilers
   without the target attribute keep the scalar loop in _packed.h.

   unpack_docs_fast(block, w, n, prev, docs) reads the n gaps of w bits that
   start at bit 8 of the block, adds them up from prev and writes the docs;
   it returns 0 when it has done so, -1 when it declines (no AVX2, w > 24 or
   prev >= 2^31: the scalar loop then decodes, with 64-bit sums). With w <= 24
   and prev < 2^31 the 32-bit sums cannot wrap (128 gaps below 2^24 add up
   to less than 2^31), so the caller's check of the last doc against
   blk_last means the same as on the scalar path. Each gather reads 4 bytes
   from the byte that holds a gap's first bit: at most 3 bytes past the last
   gap of a full group of 8, inside the block (frequencies follow) or the
   8-byte tail the packed array ends with; the last n % 8 gaps are read by
   the scalar loop. */
#ifndef CLAWKB_UNPACK_H
#define CLAWKB_UNPACK_H

#include <stdint.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CLAWKB_HAVE_AVX2_PATH 1

static int unpack_avx2_ok = -1; /* -1: not asked yet */
static int unpack_avx2_on = 1;  /* tests turn it off to compare with the scalar loop */

__attribute__((target("avx2"))) static void unpack_docs_avx2(const uint8_t *block, int w, int n,
                                                             uint32_t prev, uint32_t *docs) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mask = _mm256_set1_epi32((int)((1u << w) - 1));
    const __m256i seven = _mm256_set1_epi32(7), last = _mm256_set1_epi32(7);
    const __m256i step = _mm256_set1_epi32(8 * w);
    __m256i offs = _mm256_add_epi32(_mm256_set1_epi32(8), _mm256_mullo_epi32(lane, _mm256_set1_epi32(w)));
    __m256i carry = _mm256_set1_epi32((int)prev);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i at = _mm256_srli_epi32(offs, 3);
        __m256i v = _mm256_i32gather_epi32((const int *)block, at, 1);
        v = _mm256_and_si256(_mm256_srlv_epi32(v, _mm256_and_si256(offs, seven)), mask);
        /* inclusive prefix sum of the 8 lanes */
        v = _mm256_add_epi32(v, _mm256_slli_si256(v, 4));
        v = _mm256_add_epi32(v, _mm256_slli_si256(v, 8));
        v = _mm256_add_epi32(v, _mm256_shuffle_epi32(_mm256_permute2x128_si256(v, v, 0x08), 0xFF));
        v = _mm256_add_epi32(v, carry);
        _mm256_storeu_si256((__m256i *)(docs + i), v);
        carry = _mm256_permutevar8x32_epi32(v, last);
        offs = _mm256_add_epi32(offs, step);
    }
    uint32_t d = i ? docs[i - 1] : prev;
    uint64_t bit = 8 + (uint64_t)i * (uint64_t)w, m = (1ull << w) - 1;
    for (; i < n; i++, bit += (uint64_t)w) {
        uint64_t word;
        memcpy(&word, block + (bit >> 3), 8);
        d += (uint32_t)((word >> (bit & 7)) & m);
        docs[i] = d;
    }
}

/* Whether the vector path is taken (the CPU has AVX2 and it is switched on). */
static inline int unpack_docs_fast_enabled(void) {
    if (unpack_avx2_ok < 0) {
        __builtin_cpu_init();
        unpack_avx2_ok = __builtin_cpu_supports("avx2") ? 1 : 0;
    }
    return unpack_avx2_ok && unpack_avx2_on;
}

static inline void unpack_docs_fast_enable(int on) { unpack_avx2_on = on != 0; }

static inline int unpack_docs_fast(const uint8_t *block, int w, int n, uint64_t prev, uint32_t *docs) {
    if (unpack_avx2_ok < 0) unpack_docs_fast_enabled();
    if (!unpack_avx2_ok || !unpack_avx2_on || w < 1 || w > 24 || prev >= (1ull << 31)) return -1;
    unpack_docs_avx2(block, w, n, (uint32_t)prev, docs);
    return 0;
}

#else
static inline int unpack_docs_fast(const uint8_t *block, int w, int n, uint64_t prev, uint32_t *docs) {
    (void)block; (void)w; (void)n; (void)prev; (void)docs;
    return -1;
}

static inline int unpack_docs_fast_enabled(void) { return 0; }

static inline void unpack_docs_fast_enable(int on) { (void)on; }
#endif

#endif
