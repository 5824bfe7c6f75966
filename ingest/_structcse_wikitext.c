/* C versions of the three loops of ingest/wikitext.py that run once per link or
 * once per candidate sentence cut, where Python pays about a microsecond per step:
 * `render_inline` (the inline tokenizer's simple links, quote runs and doubled
 * stray brackets; the token regex still decides everything else), and
 * `compact_whitespace` and `split_sentences`, which do exactly what
 * `_compact_whitespace` and `_split_sentences` there do. The Python versions are
 * the specification: tests/test_wikitext_c.py compares both on every sample page
 * and on random text.
 *
 * Built as the top-level module `_structcse_wikitext`, not inside `ingest`: a
 * Ray job's --working-dir copy of the project holds no build outputs, and its
 * `ingest/` would hide an `ingest._…` module that pip installed on the nodes.
 * The module is optional: without a C compiler at install time, wikitext.py
 * uses its Python versions.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define LINK_START 0xFDD0
#define LINK_END 0xFDD1

typedef struct {
    Py_ssize_t *items;
    Py_ssize_t length, capacity;
} IndexArray;

/* Makes room for `needed` items of `item_size` bytes in a PyMem array. */
static int
grow(void **items, Py_ssize_t *capacity, Py_ssize_t needed, size_t item_size)
{
    if (needed <= *capacity)
        return 0;
    Py_ssize_t new_capacity = Py_MAX(2 * *capacity, needed + 64);
    void *grown = PyMem_Realloc(*items, new_capacity * item_size);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *items = grown;
    *capacity = new_capacity;
    return 0;
}

static int
push(IndexArray *array, Py_ssize_t value)
{
    if (grow((void **)&array->items, &array->capacity, array->length + 1, sizeof(Py_ssize_t)) < 0)
        return -1;
    array->items[array->length++] = value;
    return 0;
}

/* Moves `pos` to the first character from `pos` on for which TEST(c) holds, or to
 * `length`: one loop per string kind, so no kind switch per character. */
#define SCAN_TO(TEST)                                                  \
    do {                                                               \
        if (kind == PyUnicode_1BYTE_KIND) {                            \
            const Py_UCS1 *chars = data;                               \
            while (pos < length && !TEST(chars[pos]))                  \
                pos++;                                                 \
        }                                                              \
        else if (kind == PyUnicode_2BYTE_KIND) {                       \
            const Py_UCS2 *chars = data;                               \
            while (pos < length && !TEST(chars[pos]))                  \
                pos++;                                                 \
        }                                                              \
        else {                                                         \
            const Py_UCS4 *chars = data;                               \
            while (pos < length && !TEST(chars[pos]))                  \
                pos++;                                                 \
        }                                                              \
    } while (0)

/* Link((start, end, target, anchor)), as wikitext._new_link makes it. Up to
 * Python 3.13, tuple.__new__ on a subclass allocates the object with tp_alloc and
 * sets its items, which is done here without the two argument tuples; later
 * versions keep more state in a tuple (its hash), so they go through tuple.__new__. */
static PyObject *
new_link(PyTypeObject *link_type, Py_ssize_t start, Py_ssize_t end, PyObject *target, PyObject *anchor)
{
    PyObject *start_object = PyLong_FromSsize_t(start), *end_object = PyLong_FromSsize_t(end);
    if (start_object == NULL || end_object == NULL) {
        Py_XDECREF(start_object);
        Py_XDECREF(end_object);
        return NULL;
    }
#if PY_VERSION_HEX < 0x030E0000
    PyObject *link = link_type->tp_alloc(link_type, 4);
    if (link == NULL) {
        Py_DECREF(start_object);
        Py_DECREF(end_object);
        return NULL;
    }
    Py_INCREF(target);
    Py_INCREF(anchor);
    PyTuple_SET_ITEM(link, 0, start_object);
    PyTuple_SET_ITEM(link, 1, end_object);
    PyTuple_SET_ITEM(link, 2, target);
    PyTuple_SET_ITEM(link, 3, anchor);
    return link;
#else
    PyObject *fields = PyTuple_Pack(4, start_object, end_object, target, anchor);
    Py_DECREF(start_object);
    Py_DECREF(end_object);
    if (fields == NULL)
        return NULL;
    PyObject *args = PyTuple_Pack(1, fields);
    Py_DECREF(fields);
    if (args == NULL)
        return NULL;
    PyObject *link = PyTuple_Type.tp_new(link_type, args, NULL);
    Py_DECREF(args);
    return link;
#endif
}

/* ------------------------------------------------------------ compact_whitespace */

/* 0: another character; 1: whitespace (str.isspace) but "\n"; 2: "\n"; 3: a link marker */
static const unsigned char ascii_class[0x80] = {
    ['\t'] = 1, ['\n'] = 2, ['\v'] = 1, ['\f'] = 1, ['\r'] = 1,
    [0x1C] = 1, [0x1D] = 1, [0x1E] = 1, [0x1F] = 1, [' '] = 1,
};

static inline int
character_class(Py_UCS4 c)
{
    if (c < 0x80)
        return ascii_class[c];
    if (c < 0x1680)
        return c == 0x85 || c == 0xA0;
    if (c == LINK_START || c == LINK_END)
        return 3;
    return c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F
           || c == 0x205F || c == 0x3000;
}

/* The compaction loop for one string kind; `out` has the kind's width. */
#define COMPACT_LOOP(CHAR)                                                                           \
    {                                                                                                \
        const CHAR *in = data;                                                                       \
        CHAR *out = buffer;                                                                          \
        for (Py_ssize_t i = 0; i < length; i++) {                                                    \
            CHAR c = in[i];                                                                          \
            int kind_of_c = character_class(c);                                                      \
            if (kind_of_c == 1) {                                                                    \
                pending |= 1;                                                                        \
                continue;                                                                            \
            }                                                                                        \
            if (kind_of_c == 2) {                                                                    \
                pending = 3;                                                                         \
                continue;                                                                            \
            }                                                                                        \
            if (pending) { /* a run ends: one " " or "\n", none at the start */                      \
                if (seen)                                                                            \
                    out[written++] = pending == 3 ? '\n' : ' ';                                      \
                pending = 0;                                                                         \
            }                                                                                        \
            seen = 1;                                                                                \
            if (kind_of_c == 0)                                                                      \
                out[written++] = c;                                                                  \
            else if (push(&markers, written) < 0)                                                    \
                goto done;                                                                           \
        }                                                                                            \
    }

PyDoc_STRVAR(compact_whitespace_doc,
"compact_whitespace(text, targets, link_type) -> (text, links)\n\n"
"wikitext._compact_whitespace: each whitespace run becomes \"\\n\" when it holds a\n"
"newline, else \" \"; the text is stripped; the link markers become Links.");

static PyObject *
compact_whitespace(PyObject *module, PyObject *args)
{
    PyObject *text, *targets;
    PyTypeObject *link_type;
    if (!PyArg_ParseTuple(args, "UO!O!", &text, &PyList_Type, &targets, &PyType_Type, &link_type))
        return NULL;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);

    void *buffer = PyMem_Malloc((length + 1) * kind);
    IndexArray markers = {NULL, 0, 0};
    PyObject *compacted = NULL, *links = NULL;
    if (buffer == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    Py_ssize_t written = 0;
    int pending = 0; /* 1: a whitespace run; 3: one holding a newline */
    int seen = 0;    /* a character or marker seen: whitespace before it is stripped */
    if (kind == PyUnicode_1BYTE_KIND)
        COMPACT_LOOP(Py_UCS1)
    else if (kind == PyUnicode_2BYTE_KIND)
        COMPACT_LOOP(Py_UCS2)
    else
        COMPACT_LOOP(Py_UCS4)
    /* the kind is the input's; this finds the output's (whitespace mapped to " " may have been its widest) */
    compacted = PyUnicode_FromKindAndData(kind, buffer, written);
    if (compacted == NULL)
        goto done;
    /* the Python version zips the marker offsets (then the text's end) in pairs with the targets */
    if (markers.length % 2 && push(&markers, written) < 0)
        goto done;
    Py_ssize_t count = Py_MIN(markers.length / 2, PyList_GET_SIZE(targets));
    links = PyList_New(count);
    if (links == NULL)
        goto done;
    for (Py_ssize_t k = 0; k < count; k++) {
        Py_ssize_t start = markers.items[2 * k], end = markers.items[2 * k + 1];
        PyObject *anchor = PyUnicode_Substring(compacted, start, end);
        if (anchor == NULL)
            goto done;
        PyObject *link = new_link(link_type, start, end, PyList_GET_ITEM(targets, k), anchor);
        Py_DECREF(anchor);
        if (link == NULL)
            goto done;
        PyList_SET_ITEM(links, k, link);
    }
    PyMem_Free(buffer);
    PyMem_Free(markers.items);
    PyObject *result = PyTuple_Pack(2, compacted, links);
    Py_DECREF(compacted);
    Py_DECREF(links);
    return result;
done:
    PyMem_Free(buffer);
    PyMem_Free(markers.items);
    Py_XDECREF(compacted);
    Py_XDECREF(links);
    return NULL;
}

/* ------------------------------------------------------------ render_inline */

/* A growing UCS4 string. */
typedef struct {
    Py_UCS4 *chars;
    Py_ssize_t length, capacity;
} Writer;

static int
reserve(Writer *writer, Py_ssize_t extra)
{
    return grow((void **)&writer->chars, &writer->capacity, writer->length + extra, sizeof(Py_UCS4));
}

static int
write_slice(Writer *writer, int kind, const void *data, Py_ssize_t start, Py_ssize_t end)
{
    if (end <= start)
        return 0;
    if (reserve(writer, end - start) < 0)
        return -1;
    Py_UCS4 *out = writer->chars + writer->length;
    Py_ssize_t count = end - start;
    if (kind == PyUnicode_1BYTE_KIND)
        for (Py_ssize_t i = 0; i < count; i++)
            out[i] = ((const Py_UCS1 *)data)[start + i];
    else if (kind == PyUnicode_2BYTE_KIND)
        for (Py_ssize_t i = 0; i < count; i++)
            out[i] = ((const Py_UCS2 *)data)[start + i];
    else
        memcpy(out, (const Py_UCS4 *)data + start, count * sizeof(Py_UCS4));
    writer->length += count;
    return 0;
}

/* The first position from `pos` on holding one of [\[\]&<'{}] (the token
 * regex's leading class), or `length`. */
static Py_ssize_t
next_token_candidate(int kind, const void *data, Py_ssize_t length, Py_ssize_t pos)
{
    const uint64_t below_64 = (1ULL << '&') | (1ULL << '<') | (1ULL << '\'');
    const uint64_t from_64 = (1ULL << ('[' - 64)) | (1ULL << (']' - 64)) | (1ULL << ('{' - 64)) | (1ULL << ('}' - 64));
#define IS_CANDIDATE(c) \
    ((((c) < 64) & (int)(below_64 >> ((c) & 63))) | ((((c) >> 6) == 1) & (int)(from_64 >> ((c) & 63))))
    SCAN_TO(IS_CANDIDATE);
    return pos;
#undef IS_CANDIDATE
}

static int
write_string(Writer *writer, PyObject *string)
{
    if (!PyUnicode_Check(string)) {
        PyErr_Format(PyExc_TypeError, "render returned %R, not a str", string);
        return -1;
    }
    return write_slice(writer, PyUnicode_KIND(string), PyUnicode_DATA(string), 0, PyUnicode_GET_LENGTH(string));
}

static int
write_char(Writer *writer, Py_UCS4 c)
{
    if (reserve(writer, 1) < 0)
        return -1;
    writer->chars[writer->length++] = c;
    return 0;
}

/* A character of a simple link's title, [^|:&<'#_\s\[\]{}], or with `anchor`, of
 * its anchor, [^|&<'\s\[\]{}]. */
static inline int
is_simple_char(Py_UCS4 c, int anchor)
{
    switch (c) {
    case '|': case '&': case '<': case '\'': case '[': case ']': case '{': case '}':
        return 0;
    case ':': case '#': case '_':
        return anchor;
    default:
        return !Py_UNICODE_ISSPACE(c);
    }
}

/* The end of the words at `pos` ([^…]+(?: [^…]+)*), or `pos` when there is none. */
static Py_ssize_t
simple_words_end(int kind, const void *data, Py_ssize_t length, Py_ssize_t pos, int anchor)
{
    if (pos >= length || !is_simple_char(PyUnicode_READ(kind, data, pos), anchor))
        return pos;
    for (;;) {
        while (pos < length && is_simple_char(PyUnicode_READ(kind, data, pos), anchor))
            pos++;
        if (pos + 1 < length && PyUnicode_READ(kind, data, pos) == ' '
            && is_simple_char(PyUnicode_READ(kind, data, pos + 1), anchor))
            pos++;
        else
            return pos;
    }
}

static inline int
is_trail_char(Py_UCS4 c, PyObject *trail)
{
    return PyUnicode_FindChar(trail, c, 0, PyUnicode_GET_LENGTH(trail), 1) >= 0;
}

/* "Title"[0].upper() + "Title"[1:] */
static PyObject *
capitalised(PyObject *text, Py_ssize_t start, Py_ssize_t end)
{
    Py_UCS4 first = PyUnicode_READ_CHAR(text, start);
    if (first < 'a' || (first > 'z' && first < 0x80))
        return PyUnicode_Substring(text, start, end); /* ASCII upper() leaves it as it is */
    PyObject *head = NULL;
    if (first <= 'z')
        head = PyUnicode_FromOrdinal(first - 'a' + 'A');
    else {
        PyObject *letter = PyUnicode_Substring(text, start, start + 1);
        head = letter == NULL ? NULL : PyObject_CallMethod(letter, "upper", NULL);
        Py_XDECREF(letter);
    }
    PyObject *tail = PyUnicode_Substring(text, start + 1, end);
    PyObject *title = head == NULL || tail == NULL ? NULL : PyUnicode_Concat(head, tail);
    Py_XDECREF(head);
    Py_XDECREF(tail);
    return title;
}

/* Whether "http:", "https:", "ftp:", "mailto:" or "//" starts at `pos`. */
static int
starts_with_protocol(int kind, const void *data, Py_ssize_t length, Py_ssize_t pos)
{
    static const char *protocols[] = {"http:", "https:", "ftp:", "mailto:", "//"};
    for (size_t p = 0; p < sizeof(protocols) / sizeof(*protocols); p++) {
        const char *protocol = protocols[p];
        Py_ssize_t i = 0;
        while (protocol[i] && pos + i < length && PyUnicode_READ(kind, data, pos + i) == (Py_UCS4)protocol[i])
            i++;
        if (!protocol[i])
            return 1;
    }
    return 0;
}

PyDoc_STRVAR(render_inline_doc,
"render_inline(text, regex, render, targets, trail) -> str\n\n"
"regex.sub(render, text) for wikitext._render_inline's token regex, with the most\n"
"frequent tokens done here: simple links (their target appended to `targets`),\n"
"quote runs and doubled stray brackets. At a \"[\" that starts no simple link, an\n"
"\"&\" or a \"<\", regex.match decides and render renders. `trail` holds the\n"
"characters of the language's link trail.");

static PyObject *
render_inline(PyObject *module, PyObject *args)
{
    PyObject *text, *regex, *render, *targets, *trail;
    if (!PyArg_ParseTuple(args, "UOOO!U", &text, &regex, &render, &PyList_Type, &targets, &trail))
        return NULL;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    Writer writer = {NULL, 0, 0};
    Py_ssize_t copied = 0, pos = 0; /* text[copied:pos] is still to be written */
    while ((pos = next_token_candidate(kind, data, length, pos)) < length) {
        Py_UCS4 c = PyUnicode_READ(kind, data, pos);
        Py_UCS4 next = pos + 1 < length ? PyUnicode_READ(kind, data, pos + 1) : 0;
        Py_ssize_t token_end = -1;
        if (c == '\'' || c == ']' || c == '{' || c == '}') {
            if (next != c) {
                pos++;
                continue;
            }
            token_end = pos + 2; /* '' and more: quotes; ]] {{ }}: stray */
            if (c == '\'')
                while (token_end < length && PyUnicode_READ(kind, data, token_end) == '\'')
                    token_end++;
            if (write_slice(&writer, kind, data, copied, pos) < 0)
                goto error;
        }
        else if (c == '[' && next == '[') {
            Py_ssize_t title_end = simple_words_end(kind, data, length, pos + 2, 0), anchor_end = -1;
            Py_ssize_t end = title_end;
            if (title_end > pos + 2 && end < length && PyUnicode_READ(kind, data, end) == '|') {
                anchor_end = simple_words_end(kind, data, length, end + 1, 1);
                end = anchor_end > end + 1 ? anchor_end : -1;
            }
            if (title_end > pos + 2 && end >= 0 && end + 1 < length && PyUnicode_READ(kind, data, end) == ']'
                && PyUnicode_READ(kind, data, end + 1) == ']') {
                token_end = end + 2;
                while (token_end < length && is_trail_char(PyUnicode_READ(kind, data, token_end), trail))
                    token_end++;
                PyObject *target = capitalised(text, pos + 2, title_end);
                if (target == NULL)
                    goto error;
                int appended = PyList_Append(targets, target);
                Py_DECREF(target);
                if (appended < 0 || write_slice(&writer, kind, data, copied, pos) < 0 || write_char(&writer, LINK_START) < 0)
                    goto error;
                if (anchor_end >= 0 ? write_slice(&writer, kind, data, title_end + 1, anchor_end) < 0
                                    : write_slice(&writer, kind, data, pos + 2, title_end) < 0)
                    goto error;
                if (write_slice(&writer, kind, data, end + 2, token_end) < 0 || write_char(&writer, LINK_END) < 0)
                    goto error;
            }
        }
        else if (c == '[' && !starts_with_protocol(kind, data, length, pos + 1)) {
            pos++; /* "[" and no "[" or URL after it: no token */
            continue;
        }
        if (token_end < 0) { /* the regex decides */
            PyObject *match = PyObject_CallMethod(regex, "match", "On", text, pos);
            if (match == NULL)
                goto error;
            if (match == Py_None) {
                Py_DECREF(match);
                pos++;
                continue;
            }
            PyObject *end = PyObject_CallMethod(match, "end", NULL);
            PyObject *rendered = end == NULL ? NULL : PyObject_CallOneArg(render, match);
            Py_DECREF(match);
            token_end = end == NULL ? -1 : PyLong_AsSsize_t(end);
            Py_XDECREF(end);
            if (rendered == NULL || token_end < 0 || write_slice(&writer, kind, data, copied, pos) < 0
                || write_string(&writer, rendered) < 0) {
                Py_XDECREF(rendered);
                goto error;
            }
            Py_DECREF(rendered);
        }
        pos = copied = token_end;
    }
    if (write_slice(&writer, kind, data, copied, length) < 0)
        goto error;
    PyObject *result = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, writer.chars, writer.length);
    PyMem_Free(writer.chars);
    return result;
error:
    PyMem_Free(writer.chars);
    return NULL;
}

/* ------------------------------------------------------------ split_sentences */

static inline int
is_end_punctuation(Py_UCS4 c)
{
    return c == '.' || c == '!' || c == '?' || c == 0x2026;
}

/* closing quotes and brackets of _SENTENCE_CUT: "'”’“)] */
static inline int
is_closer(Py_UCS4 c)
{
    return c == '"' || c == '\'' || c == 0x201D || c == 0x2019 || c == 0x201C || c == ')' || c == ']';
}

/* _OPENING_CHARS and _WORD_PREFIX_CHARS: "'“‘«„([ */
static inline int
is_opening(Py_UCS4 c)
{
    return c == '"' || c == '\'' || c == 0x201C || c == 0x2018 || c == 0xAB || c == 0x201E || c == '('
           || c == '[';
}

/* The first position from `pos` on holding "\n" or one of ".!?…", or `length`. */
static Py_ssize_t
next_candidate(int kind, const void *data, Py_ssize_t length, Py_ssize_t pos)
{
    /* one bit per character below 64: "\n", "!", ".", "?" */
    const uint64_t below_64 = (1ULL << '\n') | (1ULL << '!') | (1ULL << '.') | (1ULL << '?');
    /* branch-free: text mixes characters below and above 64 at random */
#define IS_CANDIDATE(c) ((((c) < 64) & (int)(below_64 >> ((c) & 63))) | ((c) == 0x2026))
    SCAN_TO(IS_CANDIDATE);
    return pos;
#undef IS_CANDIDATE
}

/* The end of the cut regex's match at `pos` (a ".!?…"), or -1 for no match;
 * *punctuation_end gets the end of its "punctuation" group. The regex is
 * [.!?…]*(?:["'”’“)\]]|[ \u00a0\u202f]?»)*[ \t]+ after the first character; the
 * repeated group backtracks to the longest repetition followed by a space or tab. */
static Py_ssize_t
match_cut(int kind, const void *data, Py_ssize_t length, Py_ssize_t pos, Py_ssize_t *punctuation_end)
{
    Py_ssize_t k = pos + 1, best = -1;
    while (k < length && is_end_punctuation(PyUnicode_READ(kind, data, k)))
        k++;
    while (k < length) {
        Py_UCS4 c = PyUnicode_READ(kind, data, k);
        if (c == ' ' || c == '\t')
            best = k;
        if (is_closer(c) || c == 0xBB)
            k++;
        else if ((c == ' ' || c == 0xA0 || c == 0x202F) && k + 1 < length
                 && PyUnicode_READ(kind, data, k + 1) == 0xBB)
            k += 2;
        else
            break;
    }
    if (best < 0)
        return -1;
    *punctuation_end = best;
    k = best;
    while (k < length) {
        Py_UCS4 c = PyUnicode_READ(kind, data, k);
        if (c != ' ' && c != '\t')
            break;
        k++;
    }
    return k;
}

/* What the abbreviation check needs: wikitext._is_abbreviation, its SentenceRules,
 * and two sets of the rules' words. */
struct Rules {
    PyObject *check, *rules, *special_words, *capitalised_tails;
};

static int
add_stripped(IndexArray *bounds, int kind, const void *data, Py_ssize_t start, Py_ssize_t end)
{
    while (start < end && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, start)))
        start++;
    while (end > start && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, end - 1)))
        end--;
    if (end > start && (push(bounds, start) < 0 || push(bounds, end) < 0))
        return -1;
    return 0;
}

/* Whether the "." at `period` (its cut's next sentence would begin at
 * `next_begin`) is an abbreviation's. wikitext._is_abbreviation decides, called
 * only for a word it can say yes to: one of a shape that can be an abbreviation
 * (under 2 characters, dotted, a number), a listed word, or a capitalised one
 * whose rest is the rest of a never-final word ("Ibid"). 1, 0, or -1 on an error. */
static int
is_abbreviation(PyObject *text, int kind, const void *data, Py_ssize_t period, Py_ssize_t next_begin,
                const struct Rules *rules)
{
    Py_ssize_t word_start = period;
    while (word_start > 0) {
        Py_UCS4 c = PyUnicode_READ(kind, data, word_start - 1);
        if (c == ' ' || c == '\n')
            break;
        word_start--;
    }
    while (word_start < period && is_opening(PyUnicode_READ(kind, data, word_start)))
        word_start++;
    Py_ssize_t word_length = period - word_start;
    int maybe = word_length < 2;
    int digits = 1;
    for (Py_ssize_t i = word_start; i < period && !maybe; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c == '.')
            maybe = 1;
        digits = digits && Py_UNICODE_ISDIGIT(c);
    }
    maybe = maybe || digits;
    PyObject *word = PyUnicode_Substring(text, word_start, period);
    if (word == NULL)
        return -1;
    if (!maybe)
        maybe = PySet_Contains(rules->special_words, word);
    if (!maybe && Py_UNICODE_ISUPPER(PyUnicode_READ(kind, data, word_start))) {
        PyObject *tail = PyUnicode_Substring(text, word_start + 1, period);
        maybe = tail == NULL ? -1 : PySet_Contains(rules->capitalised_tails, tail);
        Py_XDECREF(tail);
    }
    if (maybe <= 0) {
        Py_DECREF(word);
        return maybe;
    }
    PyObject *position = PyLong_FromSsize_t(next_begin);
    if (position == NULL) {
        Py_DECREF(word);
        return -1;
    }
    PyObject *result = PyObject_CallFunctionObjArgs(rules->check, word, text, position, rules->rules, NULL);
    Py_DECREF(word);
    Py_DECREF(position);
    if (result == NULL)
        return -1;
    int truth = PyObject_IsTrue(result);
    Py_DECREF(result);
    return truth;
}

/* wikitext._sentence_bounds: the stripped (start, end) spans, flat in `bounds`. */
static int
sentence_bounds(PyObject *text, const Py_ssize_t *link_starts, const Py_ssize_t *link_ends,
                Py_ssize_t link_count, const struct Rules *rules, IndexArray *bounds)
{
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    Py_ssize_t begin = 0, next_link = 0, pos = 0;
    while ((pos = next_candidate(kind, data, length, pos)) < length) {
        Py_UCS4 c = PyUnicode_READ(kind, data, pos);
        Py_ssize_t end, next_begin, cut_end;
        if (c == '\n') {
            end = pos;
            next_begin = cut_end = pos + 1;
        }
        else {
            cut_end = match_cut(kind, data, length, pos, &end);
            if (cut_end < 0) {
                pos++;
                continue;
            }
            next_begin = cut_end;
            if (next_begin < length) {
                Py_UCS4 following = PyUnicode_READ(kind, data, next_begin);
                if (!(Py_UNICODE_ISUPPER(following) || Py_UNICODE_ISDIGIT(following) || is_opening(following))) {
                    pos = cut_end;
                    continue;
                }
                /* inside the last link starting before the cut? (bisect_left, moving forward only) */
                while (next_link < link_count && link_starts[next_link] < end)
                    next_link++;
                if (next_link > 0 && link_ends[next_link - 1] > end) {
                    pos = cut_end;
                    continue;
                }
                if (c == '.' && (end - pos == 1 || !is_end_punctuation(PyUnicode_READ(kind, data, pos + 1)))) {
                    int abbreviation = is_abbreviation(text, kind, data, pos, next_begin, rules);
                    if (abbreviation < 0)
                        return -1;
                    if (abbreviation) {
                        pos = cut_end;
                        continue;
                    }
                }
            }
        }
        if (add_stripped(bounds, kind, data, begin, end) < 0)
            return -1;
        begin = next_begin;
        pos = cut_end;
    }
    return add_stripped(bounds, kind, data, begin, length);
}

PyDoc_STRVAR(split_sentences_doc,
"split_sentences(text, ordered_links, min_chars, max_chars, is_abbreviation, rules, special_words,\n"
"                capitalised_tails, link_type) -> (sentences, too_short, too_long)\n\n"
"wikitext._split_sentences after the links are sorted: the kept sentences, each with\n"
"its links re-based, and the counts of the sentences left out.");

static PyObject *
split_sentences(PyObject *module, PyObject *args)
{
    PyObject *text, *links;
    struct Rules rules;
    PyTypeObject *link_type;
    Py_ssize_t min_chars, max_chars;
    if (!PyArg_ParseTuple(args, "UO!nnOOO!O!O!", &text, &PyList_Type, &links, &min_chars, &max_chars,
                          &rules.check, &rules.rules, &PyFrozenSet_Type, &rules.special_words, &PyFrozenSet_Type,
                          &rules.capitalised_tails, &PyType_Type, &link_type))
        return NULL;
    Py_ssize_t link_count = PyList_GET_SIZE(links);
    Py_ssize_t *link_starts = PyMem_Malloc((2 * link_count + 1) * sizeof(Py_ssize_t));
    if (link_starts == NULL)
        return PyErr_NoMemory();
    Py_ssize_t *link_ends = link_starts + link_count;
    IndexArray bounds = {NULL, 0, 0};
    PyObject *sentences = NULL;
    for (Py_ssize_t i = 0; i < link_count; i++) {
        PyObject *link = PyList_GET_ITEM(links, i);
        if (!PyTuple_Check(link) || PyTuple_GET_SIZE(link) < 4) {
            PyErr_Format(PyExc_TypeError, "link %zd is not a Link: %R", i, link);
            goto done;
        }
        link_starts[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(link, 0));
        link_ends[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(link, 1));
        if (PyErr_Occurred())
            goto done;
    }
    if (sentence_bounds(text, link_starts, link_ends, link_count, &rules, &bounds) < 0)
        goto done;
    sentences = PyList_New(0);
    if (sentences == NULL)
        goto done;
    Py_ssize_t too_short = 0, too_long = 0, first = 0;
    for (Py_ssize_t b = 0; b < bounds.length; b += 2) {
        Py_ssize_t start = bounds.items[b], end = bounds.items[b + 1];
        if (end - start < min_chars) {
            too_short++;
            continue;
        }
        if (end - start > max_chars) {
            too_long++;
            continue;
        }
        while (first < link_count && link_starts[first] < start)
            first++;
        Py_ssize_t stop = first;
        while (stop < link_count && link_starts[stop] < end)
            stop++;
        PyObject *sentence_links = PyList_New(0);
        PyObject *sentence_text = PyUnicode_Substring(text, start, end);
        PyObject *sentence = NULL;
        if (sentence_links != NULL && sentence_text != NULL)
            sentence = PyTuple_Pack(2, sentence_text, sentence_links);
        Py_XDECREF(sentence_text);
        if (sentence == NULL || PyList_Append(sentences, sentence) < 0) {
            Py_XDECREF(sentence_links);
            Py_XDECREF(sentence);
            goto done;
        }
        Py_DECREF(sentence);
        for (Py_ssize_t i = first; i < stop; i++) {
            if (link_ends[i] > end)
                continue;
            PyObject *link = PyList_GET_ITEM(links, i);
            PyObject *rebased = new_link(link_type, link_starts[i] - start, link_ends[i] - start,
                                         PyTuple_GET_ITEM(link, 2), PyTuple_GET_ITEM(link, 3));
            if (rebased == NULL || PyList_Append(sentence_links, rebased) < 0) {
                Py_XDECREF(rebased);
                Py_DECREF(sentence_links);
                goto done;
            }
            Py_DECREF(rebased);
        }
        Py_DECREF(sentence_links);
    }
    PyMem_Free(link_starts);
    PyMem_Free(bounds.items);
    PyObject *result = Py_BuildValue("(Nnn)", sentences, too_short, too_long);
    return result;
done:
    PyMem_Free(link_starts);
    PyMem_Free(bounds.items);
    Py_XDECREF(sentences);
    return NULL;
}

static PyMethodDef methods[] = {
    {"compact_whitespace", compact_whitespace, METH_VARARGS, compact_whitespace_doc},
    {"split_sentences", split_sentences, METH_VARARGS, split_sentences_doc},
    {"render_inline", render_inline, METH_VARARGS, render_inline_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_structcse_wikitext", "C loops of ingest.wikitext (optional; see ingest/_structcse_wikitext.c).", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__structcse_wikitext(void)
{
    return PyModule_Create(&module_def);
}
