/* The CUPTI backend's per-record work in one pass per buffer: walk and decode the
 * records, look up kernel keys, fold durations into per-group statistics.
 *
 * Plain C with no Python API: native.py loads it with ctypes and hands it numpy
 * arrays. Field offsets come from cupti-python's record dtypes (passed in ``layout``),
 * so nothing here hard-codes a CUPTI struct. Where this library is not built, the
 * numpy code in records.py, kernel_keys.py and kernel_stats.py computes the same
 * results (tests/unit/cupti_ext/test_native.py checks that they agree).
 */
#include <stdint.h>
#include <string.h>

/* Indexes into the int32 ``layout`` array (native.py builds it in this order). */
enum {
    L_KERNEL_KIND, L_EXTERNAL_KIND, L_DRIVER_KIND, L_RUNTIME_KIND, L_MEMSET_KIND,
    L_KERNEL_SIZE, L_EXTERNAL_SIZE, L_API_SIZE, L_MEMSET_SIZE,
    L_K_START, L_K_END, L_K_CORR, L_K_NAME,
    L_K_GRID_X, L_K_GRID_Y, L_K_GRID_Z, L_K_BLOCK_X, L_K_BLOCK_Y, L_K_BLOCK_Z,
    L_E_EXT_KIND, L_E_CORR, L_E_EXT_ID,
    L_A_CORR, L_A_CBID,
    L_M_CORR, L_M_VALUE, L_M_BYTES, L_M_STREAM,
    L_COUNT
};

/* Indexes into the ``outs`` pointer array. */
enum {
    O_K_CORR, O_K_DUR, O_K_NAME, O_K_THREADS,
    O_M_CORR, O_M_VALUE, O_M_BYTES, O_M_STREAM,
    O_E_CORR, O_E_ID, O_E_KIND,
    O_A_CORR, O_A_CBID,
    O_COUNT
};

/* Indexes into the int64 ``counts`` array. */
enum { C_KERNELS, C_MEMSETS, C_EXTERNALS, C_APIS, C_INCOMPLETE, C_RECORDS, C_WHOLE, C_COUNT };

int pk_layout_fields(void) { return L_COUNT; }
int pk_out_fields(void) { return O_COUNT; }
int pk_count_fields(void) { return C_COUNT; }

static inline uint32_t rd_u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline int32_t rd_i32(const uint8_t *p) { int32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t rd_u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* Walk the records packed in buf[0:n) and decode the ones we use. Every output array
 * holds ``cap`` elements; cap >= n / (smallest record size) keeps them large enough.
 * The walk stops, with counts[C_WHOLE] = 0, at an unknown kind, a misaligned offset or
 * a record running past the end (the rest of the buffer is not trusted). */
void pk_decode(const uint8_t *buf, int64_t n, const int32_t *L, void **outs, int64_t cap,
               int64_t *counts)
{
    uint32_t *k_corr = outs[O_K_CORR];
    int64_t *k_dur = outs[O_K_DUR];
    uint64_t *k_name = outs[O_K_NAME];
    int64_t *k_threads = outs[O_K_THREADS];
    uint32_t *m_corr = outs[O_M_CORR], *m_value = outs[O_M_VALUE], *m_stream = outs[O_M_STREAM];
    uint64_t *m_bytes = outs[O_M_BYTES];
    uint32_t *e_corr = outs[O_E_CORR];
    uint64_t *e_id = outs[O_E_ID];
    int32_t *e_kind = outs[O_E_KIND];
    uint32_t *a_corr = outs[O_A_CORR], *a_cbid = outs[O_A_CBID];
    int64_t nk = 0, nm = 0, ne = 0, na = 0, incomplete = 0, records = 0, o = 0;
    int whole = 1;

    while (o < n) {
        if ((o & 3) || o + 4 > n) { whole = 0; break; }
        const uint8_t *r = buf + o;
        int32_t kind = rd_i32(r);
        int64_t size;
        if (kind == L[L_KERNEL_KIND]) size = L[L_KERNEL_SIZE];
        else if (kind == L[L_EXTERNAL_KIND]) size = L[L_EXTERNAL_SIZE];
        else if (kind == L[L_DRIVER_KIND] || kind == L[L_RUNTIME_KIND]) size = L[L_API_SIZE];
        else if (kind == L[L_MEMSET_KIND]) size = L[L_MEMSET_SIZE];
        else { whole = 0; break; }
        if (o + size > n || records >= cap) { whole = 0; break; }
        if (kind == L[L_KERNEL_KIND]) {
            uint64_t start = rd_u64(r + L[L_K_START]), end = rd_u64(r + L[L_K_END]);
            /* Same test as the numpy path, on int64 values. */
            if ((int64_t)end > (int64_t)start && (int64_t)start > 0) {
                /* Products in uint64_t: they wrap (as numpy's int64 does) instead of
                 * overflowing a signed type. */
                uint64_t grid = (uint64_t)(int64_t)rd_i32(r + L[L_K_GRID_X])
                                * (uint64_t)(int64_t)rd_i32(r + L[L_K_GRID_Y])
                                * (uint64_t)(int64_t)rd_i32(r + L[L_K_GRID_Z]);
                uint64_t block = (uint64_t)(int64_t)rd_i32(r + L[L_K_BLOCK_X])
                                 * (uint64_t)(int64_t)rd_i32(r + L[L_K_BLOCK_Y])
                                 * (uint64_t)(int64_t)rd_i32(r + L[L_K_BLOCK_Z]);
                int64_t threads = (int64_t)(grid * block);
                k_corr[nk] = rd_u32(r + L[L_K_CORR]);
                k_dur[nk] = (int64_t)(end - start);
                k_name[nk] = rd_u64(r + L[L_K_NAME]);
                k_threads[nk] = threads < 1 ? 1 : threads;
                nk++;
            } else {
                incomplete++;
            }
        } else if (kind == L[L_MEMSET_KIND]) {
            m_corr[nm] = rd_u32(r + L[L_M_CORR]);
            m_value[nm] = rd_u32(r + L[L_M_VALUE]);
            m_bytes[nm] = rd_u64(r + L[L_M_BYTES]);
            m_stream[nm] = rd_u32(r + L[L_M_STREAM]);
            nm++;
        } else if (kind == L[L_EXTERNAL_KIND]) {
            e_corr[ne] = rd_u32(r + L[L_E_CORR]);
            e_id[ne] = rd_u64(r + L[L_E_EXT_ID]);
            e_kind[ne] = rd_i32(r + L[L_E_EXT_KIND]);
            ne++;
        } else {
            a_corr[na] = rd_u32(r + L[L_A_CORR]);
            a_cbid[na] = rd_u32(r + L[L_A_CBID]);
            na++;
        }
        records++;
        o += size;
    }
    counts[C_KERNELS] = nk;
    counts[C_MEMSETS] = nm;
    counts[C_EXTERNALS] = ne;
    counts[C_APIS] = na;
    counts[C_INCOMPLETE] = incomplete;
    counts[C_RECORDS] = records;
    counts[C_WHOLE] = whole && o == n;
}

/* floor(log2(threads)) for threads >= 1, at most max_bucket (kernel_keys.shape_bucket). */
static inline uint64_t bucket_of(int64_t threads, int64_t max_bucket)
{
    uint64_t t = threads < 1 ? 1 : (uint64_t)threads;
    int64_t b = 63 - __builtin_clzll(t);
    return (uint64_t)(b < max_bucket ? b : max_bucket);
}

static inline uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

/* Key ids of kernels from a hash table (name pointer << 6 | shape bucket -> key id),
 * open addressing with linear probing; an empty slot holds value -1. out[i] is -1 where
 * the pair is not in the table yet (Python resolves those and inserts them); packed[i]
 * receives the pair's packed form. Returns how many were not found. */
int64_t pk_lookup(const uint64_t *name, const int64_t *threads, int64_t n, int32_t bucket_shapes,
                  int64_t max_bucket, const uint64_t *tkeys, const int64_t *tvals, int64_t mask,
                  int64_t *out, uint64_t *packed)
{
    int64_t misses = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t p = (name[i] << 6) | (bucket_shapes ? bucket_of(threads[i], max_bucket) : 0);
        packed[i] = p;
        uint64_t s = mix(p) & (uint64_t)mask;
        int64_t v = -1;
        while (tvals[s] >= 0) {
            if (tkeys[s] == p) { v = tvals[s]; break; }
            s = (s + 1) & (uint64_t)mask;
        }
        out[i] = v;
        misses += v < 0;
    }
    return misses;
}

/* Insert packed -> value (the table must have a free slot; native.py keeps it under
 * half full). */
void pk_insert(uint64_t *tkeys, int64_t *tvals, int64_t mask, uint64_t p, int64_t v)
{
    uint64_t s = mix(p) & (uint64_t)mask;
    while (tvals[s] >= 0 && tkeys[s] != p) s = (s + 1) & (uint64_t)mask;
    tkeys[s] = p;
    tvals[s] = v;
}

/* Rows of ``groups`` from a dense map (group -> row; -2 unknown, -1 refused). Returns
 * how many groups are unknown or beyond the map (rows[i] = -2 for those). */
int64_t pk_rows(const int64_t *groups, int64_t n, const int64_t *dense, int64_t size, int64_t *rows)
{
    int64_t unknown = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t g = groups[i];
        int64_t r = (g >= 0 && g < size) ? dense[g] : -2;
        rows[i] = r;
        unknown += r == -2;
    }
    return unknown;
}

/* Fold one duration per element into its row's statistics; rows < 0 are skipped
 * (refused groups). The last ``ring`` durations of each row stay in samples[row]. */
void pk_fold(const int64_t *rows, const double *dur, const uint8_t *use, int64_t n,
             int64_t ring, int64_t *count, double *sum, double *sumsq, double *mn, double *mx,
             double *samples)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t r = rows[i];
        if (r < 0 || (use && !use[i])) continue;
        double d = dur[i];
        int64_t c = count[r];
        samples[r * ring + c % ring] = d;
        count[r] = c + 1;
        sum[r] += d;
        sumsq[r] += d * d;
        if (d < mn[r]) mn[r] = d;
        if (d > mx[r]) mx[r] = d;
    }
}
