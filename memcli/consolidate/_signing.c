/*
 * memcli.consolidate._signing: the bin minima of one-permutation MinHash, in C.
 *
 * What `candidates._bin_minima_numpy` computes, value for value (its docstring is the
 * definition; tests/consolidate/test_signing.py holds the two to each other): every kept
 * 5-character window of each text, padded with a space before it and spaces after it, is
 * hashed (a polynomial in its code points mod 2**32, then MurmurHash3's 32-bit finaliser),
 * falls into bin `hash % bins` and offers `hash / bins` to that bin's minimum.
 *
 * Why C: numpy makes some thirty passes over arrays of one value a character, one per step,
 * which cost 15% of a cold dry run of long texts. Here each block of a text's windows is
 * hashed in one vectorised loop, then offered to its bins, at a third of numpy's time. The
 * package works without this module (the numpy way is taken when it was not built); it is
 * built by `pip install` where a C compiler is at hand.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The rolling hash's multiplier (the 32-bit FNV prime) and its square mod 2**32. */
#define BASE ((uint32_t)0x01000193u)
#define BASE2 ((uint32_t)(BASE * BASE))
#define SPACE ((uint32_t)0x20u)
#define PAD 5 /* a space before each text, four after it */

static inline uint32_t mix32(uint32_t z)
{
    z ^= z >> 16;
    z *= 0x85EBCA6Bu;
    z ^= z >> 13;
    z *= 0xC2B2AE35u;
    z ^= z >> 16;
    return z;
}

/* Windows hashed at a time: their hashes are worked out in one loop without a branch, which
   the compiler turns into vector instructions, then offered to their bins one by one. */
#define BLOCK 256

/* Where the compiler and the system can choose at load time, the hashing loop is also built
   for AVX2 (8 windows an instruction) and the processor's best taken: about 2 ns a character
   against 4-5 with the SSE2 every x86-64 has. */
#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__) && !defined(__clang__)
#define VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define VECTOR_CLONES
#endif

/* The hash of each of `count` windows from `w` (a window: 5 code points) into hashes[j],
   and into kept[j] all ones when window j is a shingle, else 0. A window is a shingle
   when its three inner characters are in a token, or when a token of one or two characters
   starts at its second character (its form padded with a space each side is the shingle). */
VECTOR_CLONES
static void hash_windows(const uint32_t *restrict w, Py_ssize_t count, uint32_t *restrict hashes,
                         uint32_t *restrict kept)
{
    for (Py_ssize_t j = 0; j < count; j++) {
        uint32_t s0 = w[j] == SPACE, s1 = w[j + 1] == SPACE, s2 = w[j + 2] == SPACE, s3 = w[j + 3] == SPACE;
        uint32_t ends_soon = s1 | s2 | s3;
        uint32_t is_short = s0 & (s1 ^ 1u) & ends_soon;
        uint32_t fours = (w[j] * BASE + w[j + 1]) * BASE2 + (w[j + 2] * BASE + w[j + 3]);
        /* " a " and a NUL (the 4-gram less its last character); " ab " (the 4-gram) */
        uint32_t padded = fours - (w[j + 3] & (0u - (is_short & s2)));
        uint32_t whole = fours * BASE + w[j + 4];
        uint32_t short_mask = 0u - is_short;
        hashes[j] = mix32((padded & short_mask) | (whole & ~short_mask));
        kept[j] = 0u - ((ends_soon ^ 1u) | is_short);
    }
}

/* The minima of one text's windows into `row` (its `bins` values, already the empty mark).
   `points`: the text's code points at 1..length, a space at 0, spaces at length+1..+4.
   hash / bins is taken without a division instruction: with magic = ceil(2**64 / bins),
   (magic * hash) >> 64 is the exact quotient of every 32-bit hash (Lemire, Kaser and Kurz,
   "Faster remainder by direct computation", 2019). A window that is no shingle offers the
   empty mark, which moves no minimum (no branch: whether a minimum falls is unpredictable). */
static void text_minima(const uint32_t *points, Py_ssize_t length, uint32_t bins, uint64_t magic, uint32_t *row)
{
    uint32_t hashes[BLOCK], kept[BLOCK];
    for (Py_ssize_t start = 0; start <= length; start += BLOCK) {
        Py_ssize_t count = length + 1 - start < BLOCK ? length + 1 - start : BLOCK;
        hash_windows(points + start, count, hashes, kept);
        for (Py_ssize_t j = 0; j < count; j++) {
            uint32_t hash = hashes[j];
#ifdef __SIZEOF_INT128__
            uint32_t quotient = bins == 1 ? hash : (uint32_t)(((__uint128_t)magic * hash) >> 64);
#else
            uint32_t quotient = hash / bins;
#endif
            uint32_t bin = hash - quotient * bins;
            quotient |= ~kept[j];
            uint32_t current = row[bin];
            row[bin] = quotient < current ? quotient : current;
        }
    }
}

static PyObject *bin_minima_into(PyObject *self, PyObject *args)
{
    PyObject *given, *out;
    unsigned int bins;
    if (!PyArg_ParseTuple(args, "O!OI", &PyList_Type, &given, &out, &bins))
        return NULL;
    if (bins == 0) {
        PyErr_SetString(PyExc_ValueError, "bins must be positive");
        return NULL;
    }
    /* (a copy: nothing that runs while the buffer is taken can change the texts read) */
    PyObject *texts = PyList_AsTuple(given);
    if (texts == NULL)
        return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(texts);
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(texts, i))) {
            Py_DECREF(texts);
            PyErr_SetString(PyExc_TypeError, "texts must be a list of str");
            return NULL;
        }
    }
    Py_buffer view;
    if (PyObject_GetBuffer(out, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        Py_DECREF(texts);
        return NULL;
    }
    if (view.itemsize != 4 || view.format == NULL || (strcmp(view.format, "I") != 0 && strcmp(view.format, "<I") != 0
                                                      && strcmp(view.format, "=I") != 0)
        || view.len != (Py_ssize_t)(count * (Py_ssize_t)bins * 4)) {
        PyBuffer_Release(&view);
        Py_DECREF(texts);
        PyErr_SetString(PyExc_ValueError, "out must be a C-contiguous uint32 array of len(texts) * bins values");
        return NULL;
    }
    uint32_t *minima = (uint32_t *)view.buf;
    for (Py_ssize_t n = 0; n < count * (Py_ssize_t)bins; n++)
        minima[n] = UINT32_MAX;
    uint64_t magic = bins == 1 ? 0 : UINT64_MAX / bins + 1;
    uint32_t *points = NULL;
    Py_ssize_t room = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *text = PyTuple_GET_ITEM(texts, i);
        Py_ssize_t length = PyUnicode_GET_LENGTH(text);
        if (length + PAD > room) {
            room = (length + PAD) * 2;
            uint32_t *grown = (uint32_t *)realloc(points, (size_t)room * sizeof(uint32_t));
            if (grown == NULL) {
                free(points);
                PyBuffer_Release(&view);
                Py_DECREF(texts);
                return PyErr_NoMemory();
            }
            points = grown;
        }
        int kind = PyUnicode_KIND(text);
        const void *data = PyUnicode_DATA(text);
        points[0] = SPACE;
        if (kind == PyUnicode_1BYTE_KIND) {
            const Py_UCS1 *chars = (const Py_UCS1 *)data;
            for (Py_ssize_t c = 0; c < length; c++)
                points[c + 1] = chars[c];
        } else {
            for (Py_ssize_t c = 0; c < length; c++)
                points[c + 1] = PyUnicode_READ(kind, data, c);
        }
        for (int c = 1; c < PAD; c++)
            points[length + c] = SPACE;
        text_minima(points, length, bins, magic, minima + i * (Py_ssize_t)bins);
    }
    free(points);
    PyBuffer_Release(&view);
    Py_DECREF(texts);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"bin_minima_into", bin_minima_into, METH_VARARGS,
     "bin_minima_into(texts, out, bins): the bin minima of each text (a list of str) into out, "
     "a C-contiguous uint32 buffer of len(texts) * bins values, as candidates._bin_minima_numpy "
     "computes them."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_signing", "The bin minima of MinHash signatures, in C.", -1, methods,
};

PyMODINIT_FUNC PyInit__signing(void)
{
    return PyModule_Create(&module);
}
