/*
 * memcli.store._lstat: the lstat of many names in one folder, in C, keeping only what a scan
 * compares (mode, size, mtime in nanoseconds).
 *
 * Why C: every pass stats every memory file of the folders it looks at (20,000 in a
 * session-end pass of the bench's stores). The system call takes about 1.4 us a file here;
 * os.lstat's result object took as long again (19 fields, three of its times as floats and
 * three as integers of nanoseconds made with Python's big integers). `lstat_all` gives a
 * result of three fields, and makes the calls with the GIL released. The package works
 * without this module (`scanning._stat_all` then calls os.lstat).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

static PyTypeObject *StatType = NULL;

static PyStructSequence_Field stat_fields[] = {
    {"st_mode", "the file's type and permission bits"},
    {"st_size", "its size in bytes"},
    {"st_mtime_ns", "its modification time, in nanoseconds since the epoch"},
    {NULL, NULL},
};

static PyStructSequence_Desc stat_desc = {
    "memcli.store._lstat.Stat",
    "What a scan keeps of a file's lstat (the fields of os.stat_result of the same names).",
    stat_fields,
    3,
};

/* seconds * 10**9 + nanoseconds, as os.stat_result.st_mtime_ns gives it, for any time. */
static PyObject *nanoseconds(long long seconds, long nanos)
{
    if (seconds > -9000000000LL && seconds < 9000000000LL)
        return PyLong_FromLongLong(seconds * 1000000000LL + nanos);
    PyObject *sec = PyLong_FromLongLong(seconds), *billion = PyLong_FromLong(1000000000L), *ns = PyLong_FromLong(nanos);
    PyObject *product = NULL, *total = NULL;
    if (sec != NULL && billion != NULL && ns != NULL && (product = PyNumber_Multiply(sec, billion)) != NULL)
        total = PyNumber_Add(product, ns);
    Py_XDECREF(sec);
    Py_XDECREF(billion);
    Py_XDECREF(ns);
    Py_XDECREF(product);
    return total;
}

static PyObject *make_stat(const struct stat *st)
{
    PyObject *out = PyStructSequence_New(StatType);
    if (out == NULL)
        return NULL;
#ifdef __APPLE__
    long long seconds = (long long)st->st_mtimespec.tv_sec;
    long nanos = (long)st->st_mtimespec.tv_nsec;
#else
    long long seconds = (long long)st->st_mtim.tv_sec;
    long nanos = (long)st->st_mtim.tv_nsec;
#endif
    PyObject *mode = PyLong_FromUnsignedLong((unsigned long)st->st_mode);
    PyObject *size = PyLong_FromLongLong((long long)st->st_size);
    PyObject *mtime = nanoseconds(seconds, nanos);
    if (mode == NULL || size == NULL || mtime == NULL) {
        Py_XDECREF(mode);
        Py_XDECREF(size);
        Py_XDECREF(mtime);
        Py_DECREF(out);
        return NULL;
    }
    PyStructSequence_SET_ITEM(out, 0, mode);
    PyStructSequence_SET_ITEM(out, 1, size);
    PyStructSequence_SET_ITEM(out, 2, mtime);
    return out;
}

static PyObject *lstat_all(PyObject *self, PyObject *args)
{
    int dir_fd;
    PyObject *given;
    if (!PyArg_ParseTuple(args, "iO!", &dir_fd, &PyList_Type, &given))
        return NULL;
    /* (a copy: a path-like name's __fspath__ could change the list while it is read) */
    PyObject *names = PyList_AsTuple(given);
    if (names == NULL)
        return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(names);
    /* the names as the system takes them (os.fsencode's bytes), held while the GIL is let go */
    PyObject *encoded = PyTuple_New(count);
    if (encoded == NULL) {
        Py_DECREF(names);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *as_bytes = NULL;
        if (!PyUnicode_FSConverter(PyTuple_GET_ITEM(names, i), &as_bytes)) {
            Py_DECREF(encoded);
            Py_DECREF(names);
            return NULL;
        }
        PyTuple_SET_ITEM(encoded, i, as_bytes);
    }
    struct stat *stats = (struct stat *)malloc(sizeof(struct stat) * (size_t)(count > 0 ? count : 1));
    if (stats == NULL) {
        Py_DECREF(encoded);
        Py_DECREF(names);
        return PyErr_NoMemory();
    }
    Py_ssize_t failed = -1;
    int error = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < count; i++) {
        if (fstatat(dir_fd, PyBytes_AS_STRING(PyTuple_GET_ITEM(encoded, i)), &stats[i], AT_SYMLINK_NOFOLLOW) != 0) {
            failed = i;
            error = errno;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    PyObject *out = NULL;
    if (failed >= 0) {  /* as os.lstat would raise it: FileNotFoundError for a file gone, ... */
        errno = error;
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, PyTuple_GET_ITEM(names, failed));
    } else if ((out = PyList_New(count)) != NULL) {
        for (Py_ssize_t i = 0; i < count; i++) {
            PyObject *item = make_stat(&stats[i]);
            if (item == NULL) {
                Py_CLEAR(out);
                break;
            }
            PyList_SET_ITEM(out, i, item);
        }
    }
    free(stats);
    Py_DECREF(encoded);
    Py_DECREF(names);
    return out;
}

static PyMethodDef methods[] = {
    {"lstat_all", lstat_all, METH_VARARGS,
     "lstat_all(dir_fd, names): the lstat of each name (str or bytes) relative to the open folder "
     "dir_fd, in order, as Stat (st_mode, st_size, st_mtime_ns); raises what os.lstat raises for "
     "the first name it fails on (FileNotFoundError for a file gone)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_lstat", "The lstat of many names in one folder, in C.", -1, methods,
};

PyMODINIT_FUNC PyInit__lstat(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    StatType = PyStructSequence_NewType(&stat_desc);
    if (StatType == NULL || PyModule_AddObjectRef(m, "Stat", (PyObject *)StatType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
