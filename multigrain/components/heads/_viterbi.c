/* Batched Viterbi decoding on the CPU, with torchcrf.CRF.decode's arithmetic.
 *
 * Python: decode(emissions, lengths, transitions, start, end, path)
 *   emissions   [n, K, B] float32 or float64, C-contiguous (sentence index innermost, so the
 *               loops over sentences vectorise)
 *   lengths     [B] int64, 1 <= lengths[b] <= n
 *   transitions [K, K] (from i to j), start [K], end [K]: same dtype as emissions
 *   path        [B, n] int64, written: the best tag path, 0 past each sentence's end
 *
 * A candidate is (score[k] + transitions[k][j]) + emission[j], added in that order as torchcrf
 * does, and the first (lowest) k of equal candidates wins, as torch.max(dim) picks it: the
 * paths are torchcrf's, bit for bit. The GIL is released while decoding.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* INDEX: a backpointer, as wide as REAL so that the select below vectorises (SSE2 suffices). */
#define DEFINE_DECODE(NAME, REAL, INDEX)                                                              \
    static int NAME(const REAL *restrict em, const int64_t *restrict lengths,                \
                    const REAL *restrict trans, const REAL *restrict start,                  \
                    const REAL *restrict end, int64_t *restrict path, Py_ssize_t n,          \
                    Py_ssize_t K, Py_ssize_t B) {                                            \
        const Py_ssize_t row = K * B;                                                        \
        REAL *score = malloc(sizeof(REAL) * (size_t)(n * row));                              \
        INDEX *back = malloc(sizeof(INDEX) * (size_t)((n > 1 ? n - 1 : 1) * row));        \
        if (!score || !back) {                                                               \
            free(score);                                                                     \
            free(back);                                                                      \
            return -1;                                                                       \
        }                                                                                    \
        for (Py_ssize_t j = 0; j < K; j++)                                                   \
            for (Py_ssize_t b = 0; b < B; b++) score[j * B + b] = start[j] + em[j * B + b];  \
        for (Py_ssize_t i = 1; i < n; i++) {                                                 \
            const REAL *restrict prev = score + (i - 1) * row;                               \
            const REAL *restrict e = em + i * row;                                           \
            REAL *restrict cur = score + i * row;                                            \
            INDEX *restrict ptr = back + (i - 1) * row;                                    \
            for (Py_ssize_t j = 0; j < K; j++) {                                             \
                REAL *restrict c = cur + j * B;                                              \
                INDEX *restrict p = ptr + j * B;                                           \
                const REAL *restrict ej = e + j * B;                                         \
                const REAL t0 = trans[j];                                                    \
                for (Py_ssize_t b = 0; b < B; b++) {                                         \
                    c[b] = (prev[b] + t0) + ej[b];                                           \
                    p[b] = 0;                                                                \
                }                                                                            \
                for (Py_ssize_t k = 1; k < K; k++) {                                         \
                    const REAL *restrict pk = prev + k * B;                                  \
                    const REAL tk = trans[k * K + j];                                        \
                    const INDEX kk = (INDEX)k;                                           \
                    for (Py_ssize_t b = 0; b < B; b++) {                                     \
                        const REAL v = (pk[b] + tk) + ej[b];                                 \
                        const REAL old = c[b];                                               \
                        const INDEX take = -(INDEX)(v > old); /* all ones: v is the new max */ \
                        p[b] = (kk & take) | (p[b] & ~take);                                 \
                        c[b] = v > old ? v : old; /* strict: the lowest k keeps a tie */     \
                    }                                                                        \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
        for (Py_ssize_t b = 0; b < B; b++) {                                                 \
            const Py_ssize_t len = (Py_ssize_t)lengths[b];                                   \
            const REAL *last = score + (len - 1) * row;                                      \
            Py_ssize_t tag = 0;                                                              \
            REAL best = last[b] + end[0];                                                    \
            for (Py_ssize_t j = 1; j < K; j++) {                                             \
                const REAL v = last[j * B + b] + end[j];                                     \
                if (v > best) {                                                              \
                    best = v;                                                                \
                    tag = j;                                                                 \
                }                                                                            \
            }                                                                                \
            int64_t *out = path + b * n;                                                     \
            for (Py_ssize_t i = len; i < n; i++) out[i] = 0;                                 \
            out[len - 1] = tag;                                                              \
            for (Py_ssize_t i = len - 1; i > 0; i--) {                                       \
                tag = back[(i - 1) * row + tag * B + b];                                     \
                out[i - 1] = tag;                                                            \
            }                                                                                \
        }                                                                                    \
        free(score);                                                                         \
        free(back);                                                                          \
        return 0;                                                                            \
    }

DEFINE_DECODE(decode_float, float, int32_t)
DEFINE_DECODE(decode_double, double, int64_t)

static int check(Py_buffer *buf, const char *name, Py_ssize_t bytes) {
    if (buf->len != bytes) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd bytes, got %zd", name, bytes, buf->len);
        return -1;
    }
    return 0;
}

static PyObject *decode(PyObject *self, PyObject *args) {
    Py_buffer em, lengths, trans, start, end, path;
    Py_ssize_t n, K, B;
    int is_double;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*w*nnnp", &em, &lengths, &trans, &start, &end, &path, &n, &K, &B,
                          &is_double))
        return NULL;
    const Py_ssize_t real = is_double ? sizeof(double) : sizeof(float);
    int ok = n >= 1 && K >= 1 && B >= 0 && check(&em, "emissions", n * K * B * real) == 0 &&
             check(&lengths, "lengths", B * (Py_ssize_t)sizeof(int64_t)) == 0 &&
             check(&trans, "transitions", K * K * real) == 0 && check(&start, "start", K * real) == 0 &&
             check(&end, "end", K * real) == 0 && check(&path, "path", B * n * (Py_ssize_t)sizeof(int64_t)) == 0;
    if (ok) {
        const int64_t *len = lengths.buf;
        for (Py_ssize_t b = 0; b < B && ok; b++)
            if (len[b] < 1 || len[b] > n) {
                PyErr_Format(PyExc_ValueError, "lengths[%zd] = %lld is outside [1, %zd]", b, (long long)len[b], n);
                ok = 0;
            }
    } else if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_ValueError, "decode: n and K must be >= 1");
    }
    int status = 0;
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        if (is_double)
            status = decode_double(em.buf, lengths.buf, trans.buf, start.buf, end.buf, path.buf, n, K, B);
        else
            status = decode_float(em.buf, lengths.buf, trans.buf, start.buf, end.buf, path.buf, n, K, B);
        Py_END_ALLOW_THREADS
        if (status != 0) PyErr_NoMemory();
    }
    PyBuffer_Release(&em);
    PyBuffer_Release(&lengths);
    PyBuffer_Release(&trans);
    PyBuffer_Release(&start);
    PyBuffer_Release(&end);
    PyBuffer_Release(&path);
    if (!ok || status != 0) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS,
     "decode(emissions [n,K,B], lengths [B] int64, transitions [K,K], start [K], end [K], path [B,n] int64 "
     "(written), n, K, B, is_double): torchcrf's Viterbi paths."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_viterbi", "Batched Viterbi decoding on the CPU.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__viterbi(void) { return PyModule_Create(&module); }
