/* The CUPTI backend's per-record work in one pass per buffer: walk and decode the
 * records, look up kernel keys, fold durations into per-group statistics.
 *
 * Plain C with no Python API: native.py loads it with ctypes and hands it numpy
 * arrays. Field offsets come from cupti-python's record dtypes (passed in ``layout``),
 * so nothing here hard-codes a CUPTI struct. Where this library is not built, the
 * numpy code in records.py, kernel_keys.py and kernel_stats.py computes the same
 * results (tests/unit/cupti_ext/test_native.py checks that they agree).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
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

/* Bumped whenever an entry point keeps its signature but changes what it does, so a
 * library left from an older build is refused (native.py) rather than misread. */
#define PK_ABI 2
int pk_abi(void) { return PK_ABI; }
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

/* One statistics table (kernel_stats.RingStats): six arrays by row. */
typedef struct {
    int64_t *count;
    double *sum, *sumsq, *mn, *mx, *samples;
} stats_t;

static inline stats_t stats_at(const int64_t *addr)
{
    stats_t s = {(int64_t *)(intptr_t)addr[0], (double *)(intptr_t)addr[1],
                 (double *)(intptr_t)addr[2], (double *)(intptr_t)addr[3],
                 (double *)(intptr_t)addr[4], (double *)(intptr_t)addr[5]};
    return s;
}

/* ``ring_mask``: ring - 1 where ring is a power of two (a mask instead of a division
 * per sample: the division was a third of the fold's time), else -1. */
static inline int64_t ring_mask_of(int64_t ring) { return (ring & (ring - 1)) == 0 ? ring - 1 : -1; }

static inline void fold_one(const stats_t *s, int64_t ring, int64_t ring_mask, int64_t r,
                            double d)
{
    int64_t c = s->count[r];
    s->samples[r * ring + (ring_mask >= 0 ? (c & ring_mask) : c % ring)] = d;
    s->count[r] = c + 1;
    s->sum[r] += d;
    s->sumsq[r] += d * d;
    if (d < s->mn[r]) s->mn[r] = d;
    if (d > s->mx[r]) s->mx[r] = d;
}

/* Fold one duration per element into its row's statistics; rows < 0 are skipped
 * (refused groups). The last ``ring`` durations of each row stay in samples[row]. */
void pk_fold(const int64_t *rows, const double *dur, const uint8_t *use, int64_t n,
             int64_t ring, int64_t *count, double *sum, double *sumsq, double *mn, double *mx,
             double *samples)
{
    const stats_t s = {count, sum, sumsq, mn, mx, samples};
    const int64_t mask = ring_mask_of(ring);
    for (int64_t i = 0; i < n; i++) {
        if (rows[i] >= 0 && (!use || use[i])) fold_one(&s, ring, mask, rows[i], dur[i]);
    }
}

/* Fields per row of pk_snapshot's output. */
enum { S_COUNT, S_MEDIAN, S_MEAN, S_MIN, S_MAX, S_STD, S_TOTAL, SNAPSHOT_FIELDS };

int pk_snapshot_fields(void) { return SNAPSHOT_FIELDS; }

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A report's statistics of rows 0..n-1 of one table (kernel_stats.RingStats.snapshot's
 * arithmetic, operation for operation): SNAPSHOT_FIELDS doubles a row in ``out``; a
 * row without samples gets count 0 and nothing else. The median is that of the row's
 * kept samples (its first min(count, ring) ring slots: the ring is cleared at every
 * window). ``scratch`` holds ``ring`` doubles. */
void pk_snapshot(const int64_t *addr, int64_t ring, int64_t n, double *scratch, double *out)
{
    const stats_t s = stats_at(addr);
    for (int64_t r = 0; r < n; r++) {
        double *o = out + SNAPSHOT_FIELDS * r;
        const int64_t c = s.count[r];
        o[S_COUNT] = (double)c;
        if (c <= 0) continue;
        const int64_t kept = c < ring ? c : ring;
        memcpy(scratch, s.samples + r * ring, (size_t)kept * sizeof(double));
        qsort(scratch, (size_t)kept, sizeof(double), cmp_double);
        const double total = s.sum[r], mean = total / (double)c;
        const double var = s.sumsq[r] / (double)c - mean * mean;
        o[S_MEDIAN] = (scratch[(kept - 1) / 2] + scratch[kept / 2]) / 2;
        o[S_MEAN] = mean;
        o[S_MIN] = s.mn[r];
        o[S_MAX] = s.mx[r];
        o[S_STD] = var > 0 ? sqrt(var) : 0.0;
        o[S_TOTAL] = total;
    }
}

/* Fields of one interval list in the int64 ``lists`` array (LIST_FIELDS per list). */
enum { I_STARTS, I_STOPS, I_N, I_DENSE, I_SECTION, I_HINT, LIST_FIELDS };

/* Indexes into the int64 ``counts`` array of pk_attribute_fold. */
enum { A_HELD, A_RECORDS, A_COMM, A_UNATTRIBUTED, A_REFUSED, A_DEFERRED, A_COMM_NS, A_COUNT };

int pk_list_fields(void) { return LIST_FIELDS; }
int pk_attribute_counts(void) { return A_COUNT; }

/* Is correlation id c inside one of a list's entries: after the last entry marker
 * before it, and before that entry's (running maximum) exit marker? The test of
 * attribution._inside. L[I_HINT] keeps the last answer's position: kernels come in
 * launch order, so it nearly always holds for the next one and the search is skipped. */
static inline int inside(int64_t *L, int64_t c)
{
    const int64_t *starts = (const int64_t *)(intptr_t)L[I_STARTS];
    int64_t n = L[I_N], lo = L[I_HINT];
    /* lo: how many starts are below c */
    if (lo < 0 || lo > n || (lo > 0 && starts[lo - 1] >= c) || (lo < n && starts[lo] < c)) {
        int64_t hi = n;
        lo = 0;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (starts[mid] < c) lo = mid + 1; else hi = mid;
        }
        L[I_HINT] = lo;
    }
    return lo > 0 && c < ((const int64_t *)(intptr_t)L[I_STOPS])[lo - 1];
}

/* A decoded buffer's kernels attributed to sections and folded into the statistics in
 * one pass: what window_builder's numpy path does with a dozen array operations.
 *
 * Kernel i waits for a marker (its index goes to ``held``) where corr[i] > pend_after
 * (an entry still open) or corr[i] < pend_before (an exit seen before its entry). Of
 * the others, one inside no list's entries is unattributed; one of a communication
 * key (comm[kid]) is counted, its time summed (on a GPU, the wait for peers) and left
 * out; the rest are folded into the global table at row g_dense[kid] and, per section
 * whose entries hold them, into the section table at row dense[kid] of that section's
 * first list that holds them (the lists of a section are adjacent and share one dense
 * map, which holds every key id; with no section table, s_addr NULL, lists only decide
 * what is inside a section). A row
 * of -1 is refused (counted); a key with no row yet (-2) is not folded: the kernel
 * goes to ``deferred`` as (list index, kernel index), list -1 for the global table,
 * for Python to give the key a row and fold it after. Every kernel of a key without
 * a row is deferred, so each row still sees its samples in launch order.
 * ``deferred`` holds n * (n_lists + 1) pairs, n without a section table.
 *
 * n_lists < 0: every kernel is inside a traced entry (gated attribution: records were
 * on for traced entries alone), no list is read and no section table folded. */
void pk_attribute_fold(const uint32_t *corr, const int64_t *dur_ns, const int64_t *kid,
                       int64_t n, int64_t pend_after, int64_t pend_before,
                       const uint8_t *comm, int64_t *lists, int64_t n_lists,
                       const int64_t *g_dense, const int64_t *g_addr, const int64_t *s_addr,
                       int64_t ring, int64_t *held, int64_t *deferred, int64_t *counts)
{
    const stats_t g = stats_at(g_addr);
    const stats_t s = s_addr ? stats_at(s_addr) : g;
    const int fold_sections = s_addr != NULL;
    const int64_t mask = ring_mask_of(ring);
    int64_t nheld = 0, records = 0, ncomm = 0, outside = 0, refused = 0, ndef = 0;
    int64_t comm_ns = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t c = corr[i];
        if (c > pend_after || c < pend_before) {
            held[nheld++] = i;
            continue;
        }
        int64_t k = kid[i];
        int is_comm = comm[k] != 0;
        int any = n_lists < 0;
        int64_t last_section = -1;
        for (int64_t j = 0; j < n_lists; j++) {
            int64_t *L = lists + j * LIST_FIELDS;
            if (L[I_SECTION] == last_section || !inside(L, c)) continue;
            last_section = L[I_SECTION];
            any = 1;
            if (is_comm || !fold_sections) break;
            int64_t r = ((const int64_t *)(intptr_t)L[I_DENSE])[k];
            if (r >= 0) {
                fold_one(&s, ring, mask, r, (double)dur_ns[i]);
            } else if (r == -1) {
                refused++;
            } else {
                deferred[2 * ndef] = j;
                deferred[2 * ndef + 1] = i;
                ndef++;
            }
        }
        if (!any) {
            outside++;
        } else if (is_comm) {
            ncomm++;
            comm_ns += dur_ns[i];
        } else {
            records++;
            int64_t r = g_dense[k];
            if (r >= 0) {
                fold_one(&g, ring, mask, r, (double)dur_ns[i]);
            } else {
                deferred[2 * ndef] = -1;
                deferred[2 * ndef + 1] = i;
                ndef++;
            }
        }
    }
    counts[A_HELD] = nheld;
    counts[A_RECORDS] = records;
    counts[A_COMM] = ncomm;
    counts[A_UNATTRIBUTED] = outside;
    counts[A_REFUSED] = refused;
    counts[A_DEFERRED] = ndef;
    counts[A_COMM_NS] = comm_ns;
}

/* Indexes into the int64 ``counts`` array of pk_markers. */
enum {
    M_FENCES, M_RING_LOST, M_PAIRS, M_LEFT, M_ABOVE, M_KNOWN, M_FLOOR, M_MARKERS,
    M_PAIRS_SORTED, M_ONE_SECTION, M_COUNT
};

int pk_marker_counts(void) { return M_COUNT; }

#define SERIAL_SHIFT 17
#define MAX_SECTION 0xFFFF

typedef struct {
    uint64_t packed;
    int64_t order; /* position in the list Python would sort (a stable sort's tie-break) */
    int64_t corr;
} mark_t;

static int mark_cmp(const void *a, const void *b)
{
    const mark_t *x = a, *y = b;
    if (x->packed != y->packed) return x->packed < y->packed ? -1 : 1;
    return x->order < y->order ? -1 : (x->order > y->order);
}

static int contains(const int64_t *sorted, int64_t n, int64_t v)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (sorted[mid] < v) lo = mid + 1; else hi = mid;
    }
    return lo < n && sorted[lo] == v;
}

/* A buffer's section markers read and mostly paired in one pass: what
 * window_builder.add's marker part and attribution.MarkerBook.add_packed do in Python
 * for each marker.
 *
 * Markers: external-correlation records of kind ``our_kind`` (external id, correlation
 * id), then memset records on ``stream_id`` of ``nbytes`` bytes whose value is still in
 * the ring (ring_seqs[value & mask] == value; the external id is ring_ids[...]; the
 * others count as ring_lost); stream_id < 0: no memset markers. Serial 0 (fences) is
 * counted and dropped. The rest are sorted by packed id, stably (as Python's sort).
 *
 * Per marker the book's bookkeeping of the serials heard of (MarkerBook.add_packed's
 * first half): serials up to ``known`` raise ``floor`` to their entry marker's id; a
 * later serial's highest entry-marker id (-1: exits only) is kept, and with
 * ``advance`` (the book had no such serials yet) the run known+1, known+2, ... is moved
 * over as MarkerBook._advance would; the serials after a gap (all of them without
 * ``advance``) go to ``above`` as (serial, id) for Python to keep.
 *
 * A serial with exactly one entry and one exit marker here and none of the book's
 * state (not in ``special``: open, early exits, abandoned; sorted) is closed at once:
 * (entry's section, entry id, exit id) in ``pairs``. Every other marker goes to
 * ``left`` as (packed, id), in sorted order, for Python's pairing loop. Python calls
 * this only where no bound of the book can be reached by this buffer's markers, so
 * closing pairs first does not change what is kept. Pairs come by serial; counts say
 * whether their entry ids ascend and whether they all name one section.
 *
 * ``marks`` holds ne + nm elements (24 bytes each); pairs 3 * (ne + nm) / 2 int64,
 * left (uint64) and above (int64) 2 * (ne + nm). */
void pk_markers(const uint32_t *e_corr, const uint64_t *e_id, const int32_t *e_kind, int64_t ne,
                int32_t our_kind, const uint32_t *m_corr, const uint32_t *m_value,
                const uint64_t *m_bytes, const uint32_t *m_stream, int64_t nm, int64_t stream_id,
                uint64_t nbytes, const uint64_t *ring_ids, const volatile int64_t *ring_seqs,
                int64_t ring_mask, const int64_t *special, int64_t n_special, int64_t known,
                int64_t floor, int32_t advance, mark_t *marks, int64_t *pairs, uint64_t *left,
                int64_t *above, int64_t *counts)
{
    int64_t n = 0, fences = 0, lost = 0, order = 0;
    for (int64_t i = 0; i < ne; i++) {
        if (e_kind[i] != our_kind) continue;
        uint64_t p = e_id[i];
        int64_t o = order++;
        if ((p >> SERIAL_SHIFT) == 0) { fences++; continue; }
        marks[n].packed = p;
        marks[n].order = o;
        marks[n].corr = e_corr[i];
        n++;
    }
    if (stream_id >= 0) {
        for (int64_t i = 0; i < nm; i++) {
            if ((int64_t)m_stream[i] != stream_id || m_bytes[i] != nbytes) continue;
            uint32_t v = m_value[i];
            int64_t slot = (int64_t)v & ring_mask;
            /* Read the sequence number around the id: a slot rewritten meanwhile (the
             * ring wrapped on the training thread) is not ours any more. */
            if (ring_seqs[slot] != (int64_t)v) { lost++; continue; }
            uint64_t p = ring_ids[slot];
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            if (ring_seqs[slot] != (int64_t)v) { lost++; continue; }
            int64_t o = order++;
            if ((p >> SERIAL_SHIFT) == 0) { fences++; continue; }
            marks[n].packed = p;
            marks[n].order = o;
            marks[n].corr = m_corr[i];
            n++;
        }
    }
    int sorted = 1;
    for (int64_t i = 1; i < n && sorted; i++) sorted = mark_cmp(&marks[i - 1], &marks[i]) <= 0;
    if (!sorted) qsort(marks, (size_t)n, sizeof(mark_t), mark_cmp);

    int64_t np_ = 0, nl = 0, na = 0, cur = known;
    int advancing = advance != 0, pairs_sorted = 1, one_section = 1;
    for (int64_t i = 0; i < n;) {
        int64_t s = (int64_t)(marks[i].packed >> SERIAL_SHIFT), j = i;
        int64_t top = INT64_MIN, entries = 0, entry_at = -1;
        for (; j < n && (int64_t)(marks[j].packed >> SERIAL_SHIFT) == s; j++) {
            int64_t ec = (marks[j].packed & 1) ? -1 : marks[j].corr;
            if (!(marks[j].packed & 1)) { entries++; entry_at = j; }
            if (s <= known) {
                if (ec > floor) floor = ec;
            } else if (ec > top) {
                top = ec;
            }
        }
        if (s > known) {
            if (advancing && s == cur + 1) {
                cur = s;
                if (top > floor) floor = top;
            } else {
                advancing = 0;
                above[2 * na] = s;
                above[2 * na + 1] = top;
                na++;
            }
        }
        if (j - i == 2 && entries == 1 && !(n_special && contains(special, n_special, s))) {
            int64_t exit_at = entry_at == i ? i + 1 : i;
            int64_t sec = (int64_t)((marks[entry_at].packed >> 1) & MAX_SECTION);
            if (np_ > 0) {
                pairs_sorted &= pairs[3 * np_ - 2] <= marks[entry_at].corr;
                one_section &= pairs[3 * np_ - 3] == sec;
            }
            pairs[3 * np_] = sec;
            pairs[3 * np_ + 1] = marks[entry_at].corr;
            pairs[3 * np_ + 2] = marks[exit_at].corr;
            np_++;
        } else {
            for (int64_t k = i; k < j; k++) {
                left[2 * nl] = marks[k].packed;
                left[2 * nl + 1] = (uint64_t)marks[k].corr;
                nl++;
            }
        }
        i = j;
    }
    counts[M_FENCES] = fences;
    counts[M_RING_LOST] = lost;
    counts[M_PAIRS] = np_;
    counts[M_LEFT] = nl;
    counts[M_ABOVE] = na;
    counts[M_KNOWN] = cur;
    counts[M_FLOOR] = floor;
    counts[M_MARKERS] = n;
    counts[M_PAIRS_SORTED] = pairs_sorted;
    counts[M_ONE_SECTION] = one_section;
}
