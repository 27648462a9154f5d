/* One exchange stage (Srift §4.3, eq. 2) in C: the same timeline as srift.sim.python_stage.run_stage.
 *
 * Transfers j = 0..n-1 arrive at ready[j] (sorted ascending) with bits[j] payload bits of size class
 * klass[j]. With c transfers active and b_agg the sum of their own rates, each runs at its own rate while
 * b_agg < cap, otherwise at min(own rate, L), where the level L shares the cap max-min fairly:
 * Σ min(own, L) = cap (a transfer slower than the others' share leaves what it cannot use to them). Every
 * event (an arrival, or the earliest finish; a finish first at equal times) settles the bits served since
 * the last one and recomputes every active transfer's rate: O(active + classes) per event, no heaps, no
 * mode switching. The optimizer calls this thousands
 * of times per plan, which is why it exists; srift.sim.exchange falls back to Python when it is not built.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdlib.h>

typedef struct {
    double start;
    double end;
} span_t;

static int
as_doubles(PyObject *seq, const char *name, Py_ssize_t *n_out, double **out)
{
    PyObject *fast = PySequence_Fast(seq, name);
    if (fast == NULL) {
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    double *values = PyMem_Malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (values == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(fast);
    for (Py_ssize_t i = 0; i < n; i++) {
        values[i] = PyFloat_AsDouble(items[i]);
        if (values[i] == -1.0 && PyErr_Occurred()) {
            PyMem_Free(values);
            Py_DECREF(fast);
            return -1;
        }
    }
    Py_DECREF(fast);
    *n_out = n;
    *out = values;
    return 0;
}

static int
as_indices(PyObject *seq, Py_ssize_t n_expected, Py_ssize_t limit, Py_ssize_t **out)
{
    PyObject *fast = PySequence_Fast(seq, "klass must be a sequence of ints");
    if (fast == NULL) {
        return -1;
    }
    if (PySequence_Fast_GET_SIZE(fast) != n_expected) {
        Py_DECREF(fast);
        PyErr_SetString(PyExc_ValueError, "ready_s, bits and klass must have one entry per transfer");
        return -1;
    }
    Py_ssize_t *values = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n_expected > 0 ? n_expected : 1));
    if (values == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(fast);
    for (Py_ssize_t i = 0; i < n_expected; i++) {
        Py_ssize_t k = PyLong_AsSsize_t(items[i]);
        if (k == -1 && PyErr_Occurred()) {
            PyMem_Free(values);
            Py_DECREF(fast);
            return -1;
        }
        if (k < 0 || k >= limit) {
            PyMem_Free(values);
            Py_DECREF(fast);
            PyErr_SetString(PyExc_ValueError, "a class index is outside a stage's rate table");
            return -1;
        }
        values[i] = k;
    }
    Py_DECREF(fast);
    *out = values;
    return 0;
}

/* The timeline itself; returns 0, or -1 when out of memory. */
/* The level L with Σ over active transfers of min(own, L) = cap, from the classes' counts (`order` lists
 * the classes from the slowest): a class below what is left per transfer keeps its own rate. */
static double
water_level(Py_ssize_t n_rates, const Py_ssize_t *order, const double *rates, const Py_ssize_t *count,
            Py_ssize_t c, double cap)
{
    double left = cap;
    Py_ssize_t m = c;
    double fastest = 0.0;
    for (Py_ssize_t q = 0; q < n_rates; q++) {
        Py_ssize_t k = order[q];
        if (count[k] == 0) {
            continue;
        }
        fastest = rates[k];
        if (rates[k] >= left / (double)m) {
            return left / (double)m;
        }
        left -= rates[k] * (double)count[k];
        m -= count[k];
    }
    return fastest;
}

static int
simulate_stage(Py_ssize_t n, const double *ready, const double *bits, const Py_ssize_t *klass,
               Py_ssize_t n_rates, const double *rates, double cap, double *finish, span_t **spans_out,
               Py_ssize_t *n_spans_out)
{
    Py_ssize_t *active = malloc(sizeof(Py_ssize_t) * (size_t)n);
    double *left = malloc(sizeof(double) * (size_t)n);
    double *rate = malloc(sizeof(double) * (size_t)n);
    span_t *spans = malloc(sizeof(span_t) * (size_t)n);
    Py_ssize_t *count = calloc((size_t)n_rates, sizeof(Py_ssize_t));
    Py_ssize_t *order = malloc(sizeof(Py_ssize_t) * (size_t)n_rates);
    if (!active || !left || !rate || !spans || !count || !order) {
        free(active);
        free(left);
        free(rate);
        free(spans);
        free(count);
        free(order);
        return -1;
    }
    /* The classes from the slowest (insertion sort: a stage has a few dozen classes at most). */
    for (Py_ssize_t k = 0; k < n_rates; k++) {
        Py_ssize_t q = k;
        while (q > 0 && rates[order[q - 1]] > rates[k]) {
            order[q] = order[q - 1];
            q--;
        }
        order[q] = k;
    }
    Py_ssize_t c = 0, i = 0, n_spans = 0;
    double now = 0.0, busy_start = 0.0, agg = 0.0;
    while (i < n || c > 0) {
        if (c == 0) {
            now = ready[i];
            busy_start = now;
            active[0] = i;
            left[i] = bits[i];
            agg = rates[klass[i]];
            count[klass[i]] = 1;
            c = 1;
            i++;
            continue;
        }
        int capped = !(agg < cap);
        double share = capped ? water_level(n_rates, order, rates, count, c, cap) : INFINITY;
        double soonest = INFINITY;
        Py_ssize_t first = 0;
        for (Py_ssize_t a = 0; a < c; a++) {
            Py_ssize_t j = active[a];
            double r = rates[klass[j]];
            if (r > share) {
                r = share;
            }
            rate[j] = r;
            double remaining = left[j] > 0.0 ? left[j] : 0.0;
            double dt = remaining / r;
            if (dt < soonest) {
                soonest = dt;
                first = a;
            }
        }
        double t_done = now + soonest;
        double t_arrive = i < n ? ready[i] : INFINITY;
        double t = t_done <= t_arrive ? t_done : t_arrive;
        if (t < now) {
            t = now;
        }
        double dt = t - now;
        for (Py_ssize_t a = 0; a < c; a++) {
            Py_ssize_t j = active[a];
            left[j] -= rate[j] * dt;
        }
        now = t;
        if (t_done <= t_arrive) {
            Py_ssize_t j = active[first];
            finish[j] = t;
            agg -= rates[klass[j]];
            count[klass[j]]--;
            c--;
            for (Py_ssize_t a = first; a < c; a++) {
                active[a] = active[a + 1];
            }
            if (c == 0) {
                agg = 0.0;
                spans[n_spans].start = busy_start;
                spans[n_spans].end = t;
                n_spans++;
            }
        } else {
            active[c] = i;
            left[i] = bits[i];
            agg += rates[klass[i]];
            count[klass[i]]++;
            c++;
            i++;
        }
    }
    free(active);
    free(left);
    free(rate);
    free(count);
    free(order);
    *spans_out = spans;
    *n_spans_out = n_spans;
    return 0;
}

static PyObject *
run_stage(PyObject *self, PyObject *args)
{
    PyObject *ready_obj, *bits_obj, *klass_obj, *rates_obj;
    double cap;
    if (!PyArg_ParseTuple(args, "OOOOd:run_stage", &ready_obj, &bits_obj, &klass_obj, &rates_obj, &cap)) {
        return NULL;
    }
    if (!(cap > 0.0)) {
        PyErr_SetString(PyExc_ValueError, "cap must be > 0");
        return NULL;
    }
    Py_ssize_t n = 0, n_bits = 0, n_rates = 0;
    double *ready = NULL, *bits = NULL, *rates = NULL, *finish = NULL;
    Py_ssize_t *klass = NULL;
    span_t *spans = NULL;
    Py_ssize_t n_spans = 0;
    PyObject *result = NULL, *finish_list = NULL, *busy_list = NULL;

    if (as_doubles(ready_obj, "ready_s must be a sequence of floats", &n, &ready) < 0) {
        goto done;
    }
    if (as_doubles(bits_obj, "bits must be a sequence of floats", &n_bits, &bits) < 0) {
        goto done;
    }
    if (as_doubles(rates_obj, "rates must be a sequence of floats", &n_rates, &rates) < 0) {
        goto done;
    }
    if (n_bits != n) {
        PyErr_SetString(PyExc_ValueError, "ready_s, bits and klass must have one entry per transfer");
        goto done;
    }
    if (as_indices(klass_obj, n, n_rates, &klass) < 0) {
        goto done;
    }
    for (Py_ssize_t k = 0; k < n_rates; k++) {
        if (!(rates[k] > 0.0)) {
            PyErr_SetString(PyExc_ValueError, "rates must be > 0");
            goto done;
        }
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        if (!(bits[j] > 0.0)) {
            PyErr_SetString(PyExc_ValueError, "every transfer needs bits > 0 (drop empty gradients first)");
            goto done;
        }
        if (isnan(ready[j]) || (j > 0 && ready[j] < ready[j - 1])) {
            PyErr_SetString(PyExc_ValueError, "ready_s must be sorted ascending");
            goto done;
        }
    }
    finish = PyMem_Malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (finish == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (n > 0) {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = simulate_stage(n, ready, bits, klass, n_rates, rates, cap, finish, &spans, &n_spans);
        Py_END_ALLOW_THREADS
        if (rc < 0) {
            PyErr_NoMemory();
            goto done;
        }
    }
    finish_list = PyList_New(n);
    busy_list = PyList_New(n_spans);
    if (finish_list == NULL || busy_list == NULL) {
        goto done;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *value = PyFloat_FromDouble(finish[j]);
        if (value == NULL) {
            goto done;
        }
        PyList_SET_ITEM(finish_list, j, value);
    }
    for (Py_ssize_t s = 0; s < n_spans; s++) {
        PyObject *span = Py_BuildValue("(dd)", spans[s].start, spans[s].end);
        if (span == NULL) {
            goto done;
        }
        PyList_SET_ITEM(busy_list, s, span);
    }
    result = PyTuple_Pack(2, finish_list, busy_list);

done:
    Py_XDECREF(finish_list);
    Py_XDECREF(busy_list);
    PyMem_Free(ready);
    PyMem_Free(bits);
    PyMem_Free(rates);
    PyMem_Free(klass);
    PyMem_Free(finish);
    free(spans);
    return result;
}

static PyMethodDef methods[] = {
    {"run_stage", run_stage, METH_VARARGS,
     "run_stage(ready_s, bits, klass, rates_bps, cap_bps) -> (finish times, busy intervals)\n\n"
     "One stage of the gradient exchange under Srift eq. 2 with max-min fair sharing; ready_s sorted ascending."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "srift.sim._stage", "Srift's exchange stage in C (see srift.sim.exchange).", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__stage(void)
{
    return PyModule_Create(&module);
}
