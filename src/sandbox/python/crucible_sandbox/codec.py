"""The value codec: Python values as tagged JSON, lossless from one Python process to another.

One grammar for every place a value crosses a process boundary: a call test's arguments (from
the tests file, through Node), a call test's result (to Node, which compares it), and every
argument, result and exception between an assert test's oracle and the candidate (Python to
Python over a socket; Node never re-encodes those).

    null, true, false, "text", finite non-integral floats, integers within +-2^53: plain JSON
    [..]                                   list
    {"$int": "-123..."}                    int outside +-2^53
    {"$float": "3.0" | "-0.0" | "nan"}     float whose JSON number would read as an int
    {"$tuple": [..]} {"$set": [..]} {"$frozenset": [..]} {"$deque": [..], "maxlen": n|null}
    {"$dict": [[k, v]..]} {"$odict": ..} {"$counter": ..} {"$ddict": .., "factory": value}
    {"$bytes": b64} {"$bytearray": b64} {"$complex": [re, im]} {"$decimal": "1.10"}
    {"$fraction": [num, den]} {"$range": [start, stop, step]}
    {"$ref": n}            the n-th container of this message (pre-order): aliasing and cycles
    {"$h": id, "c": cls}   an object that stays in the sender's process (a handle)
    {"$p": id}             the receiver's own handle, coming back
    {"$builtin": "len"}    a builtin function or type, or a method of one ("str.lower")
    {"$exc": cls, "args": [..]}   an exception value
    {"$cls": description}  a class that stays in the sender's process
    {"$repr": text, "$type": name}   an opaque object (only in values sent to Node)

Types are decided by exact type and read through the base type's own slots, never through a
value's methods: a subclass of list that overrides `__iter__`, or an int subclass with an
always-true `__eq__`, crosses as the plain value it stores. A program's subclass of a builtin
data type therefore crosses as that base type.
"""
import binascii
import builtins
import collections
import decimal
import fractions
import json
import math

# A program may patch builtins (`builtins.isinstance = lambda *a: True`) in the process this
# module also runs in: its names resolve to the builtins as they were at import.
globals().update({_k: _v for _k, _v in vars(builtins).items() if not _k.startswith('__')})

SAFE = 1 << 53
_type = type
_isinstance = isinstance
_len = len
_int_repr = int.__repr__
_float_repr = float.__repr__
_str_str = str.__str__
_list_iter = list.__iter__
_tuple_iter = tuple.__iter__
_dict_items = dict.items
_odict_items = collections.OrderedDict.items
_set_iter = set.__iter__
_fset_iter = frozenset.__iter__
_deque_iter = collections.deque.__iter__
_bytes = bytes
_b64e = binascii.b2a_base64
_b64d = binascii.a2b_base64
_isfinite = math.isfinite


def _no_default(o):
    raise TypeError('not JSON')


# The C encoder, called directly: json.JSONEncoder.encode is Python code that looks up
# builtins (isinstance) a program may have patched in the process it runs in.
_c_encode = json.encoder.c_make_encoder(None, _no_default, json.encoder.encode_basestring_ascii, None, ':', ',',
                                        False, False, False)
_join = ''.join


def _dumps(o):
    return _join(_c_encode(o, 0))
_loads = json.JSONDecoder().decode
_object_repr = object.__repr__
_id = id


class EncodeError(Exception):
    """A value that cannot cross (a cycle through a tuple, an unhashable key...)."""


class Oversize(Exception):
    """The encoded value would be over its byte budget (the test's output limit)."""


class DecodeError(Exception):
    """A frame out of the grammar: from a candidate, that is its own malformed result."""


# Builtins that may cross by name (keys, factories, callbacks): data types and pure functions
# only. Never exec, eval, compile, open, input, breakpoint, getattr, vars, globals or format: a
# side that decodes one may end up calling it with the other side's arguments.
BUILTIN_NAMES = frozenset((
    'abs', 'all', 'any', 'ascii', 'bin', 'bool', 'bytearray', 'bytes', 'callable', 'chr', 'complex', 'dict',
    'divmod', 'enumerate', 'filter', 'float', 'frozenset', 'hash', 'hex', 'int', 'iter', 'len', 'list', 'map',
    'max', 'min', 'next', 'object', 'oct', 'ord', 'pow', 'range', 'repr', 'reversed', 'round', 'set', 'slice',
    'sorted', 'str', 'sum', 'tuple', 'zip'))
_METHOD_TYPES = ('str', 'bytes', 'bytearray', 'list', 'dict', 'set', 'frozenset', 'tuple', 'int', 'float', 'complex')
_NOT_METHODS = frozenset(('format', 'format_map', 'maketrans', 'fromkeys', 'mro'))
_BUILTIN_BY_ID = {}
for _k in sorted(BUILTIN_NAMES):
    _v = getattr(builtins, _k)
    _BUILTIN_BY_ID.setdefault(_id(_v), _k)
    if _k in _METHOD_TYPES:
        for _m, _f in vars(_v).items():
            if not _m.startswith('_') and _m not in _NOT_METHODS and callable(_f):
                _BUILTIN_BY_ID.setdefault(_id(_f), '%s.%s' % (_k, _m))
_BUILTIN_OBJ = {}
for _oid, _name in _BUILTIN_BY_ID.items():
    _a, _, _b = _name.partition('.')
    _BUILTIN_OBJ[_name] = getattr(getattr(builtins, _a), _b) if _b else getattr(builtins, _a)

# Exact types whose values are containers (they get a memo index; mutable ones are written back).
MUTABLE = (list, dict, set, bytearray, collections.deque, collections.OrderedDict,
           collections.defaultdict, collections.Counter)
_DICT_TAGS = {dict: '$dict', collections.OrderedDict: '$odict', collections.Counter: '$counter',
              collections.defaultdict: '$ddict'}


class Encoder:
    """Encodes values for one message. `memo` maps id(container) -> index and may be seeded
    with the containers an earlier message delivered (write-back, results that alias their
    arguments). `exporter(obj) -> tagged handle` keeps objects that are not data in this
    process; without one (values for Node) they become opaque `$repr` values. `peer_id(obj)`
    returns the receiver's handle id for proxies of the receiver's objects."""

    def __init__(self, limit=None, exporter=None, peer_id=None, exc_class=None, memo=None, keep=None):
        self.limit = limit
        self.budget = limit if limit is not None else -1
        self.exporter = exporter
        self.peer_id = peer_id
        self.exc_class = exc_class
        self.memo = {} if memo is None else memo
        self.keep = [] if keep is None else keep  # objects whose ids are in memo stay alive
        self.busy = set()  # immutable containers being encoded (a ref to one is a cycle)
        self.node = exporter is None

    def _spend(self, n):
        if self.limit is not None:
            self.budget -= n
            if self.budget < 0:
                raise Oversize()

    def dumps(self, v):
        text = _dumps(self.enc(v, 0))
        if self.limit is not None and _len(text) > self.limit:
            raise Oversize()
        return text

    def _ref(self, v):
        i = self.memo.get(_id(v))
        if i is None:
            return None
        if i in self.busy:
            raise EncodeError('a value that contains itself through a tuple or frozenset cannot cross')
        return {'$ref': i}

    def _register(self, v):
        i = _len(self.memo)
        self.memo[_id(v)] = i
        self.keep.append(v)
        return i

    def enc(self, v, depth):
        if depth > 400:
            raise EncodeError('value nested too deeply')
        t = _type(v)
        # What is spent is a lower bound of the text each value becomes (the text itself is
        # measured at the end): the budget stops giant values early, never one that fits.
        if v is None or t is bool:
            self._spend(4)
            return v
        if t is int:
            self._spend(1)
            return v if -SAFE < v < SAFE else self._bigint(v)
        if t is str:
            self._spend(_len(v) + 2)
            return v
        if t is float:
            self._spend(3)
            return self._float(v)
        if t is list:
            r = self._ref(v) if not self.node else None
            if r is not None:
                return r
            self._enter(v)
            out = [self.enc(x, depth + 1) for x in _list_iter(v)]
            self._leave(v)
            return out
        if t is tuple or t is frozenset:
            return self._immutable(v, t, depth)
        if t in _DICT_TAGS:
            return self._dict(v, t, depth)
        if t is set:
            r = self._ref(v) if not self.node else None
            if r is not None:
                return r
            self._enter(v)
            out = {'$set': [self.enc(x, depth + 1) for x in _set_iter(v)]}
            self._leave(v)
            return out
        return self._other(v, t, depth)

    def _enter(self, v):
        if self.node:
            if _id(v) in self.busy:
                raise EncodeError('a value that contains itself cannot be sent to the judge')
            self.busy.add(_id(v))
        else:
            self._register(v)
        self._spend(2)

    def _leave(self, v):
        if self.node:
            self.busy.discard(_id(v))

    def _bigint(self, v):
        text = _int_repr(v)
        self._spend(_len(text))
        return {'$int': text}

    @staticmethod
    def _float(v):
        # A JSON number with a fraction reads back as a float everywhere (Node included); an
        # integral one would read as an int, so it is tagged, as are -0.0, nan and inf.
        if _isfinite(v) and v != int(v):
            return v
        return {'$float': _float_repr(v)}

    def _immutable(self, v, t, depth):
        tag = '$tuple' if t is tuple else '$frozenset'
        it = _tuple_iter(v) if t is tuple else _fset_iter(v)
        if self.node:
            self._enter(v)
            out = {tag: [self.enc(x, depth + 1) for x in it]}
            self._leave(v)
            return out
        r = self._ref(v)
        if r is not None:
            return r
        i = self._register(v)
        self.busy.add(i)
        self._spend(2)
        out = {tag: [self.enc(x, depth + 1) for x in it]}
        self.busy.discard(i)
        return out

    def _dict(self, v, t, depth):
        r = self._ref(v) if not self.node else None
        if r is not None:
            return r
        self._enter(v)
        it = _odict_items(v) if t is collections.OrderedDict else _dict_items(v)  # its own order (move_to_end)
        items = [[self.enc(k, depth + 1), self.enc(x, depth + 1)] for k, x in it]
        self._leave(v)
        out = {_DICT_TAGS[t]: items}
        if t is collections.defaultdict:
            f = v.default_factory
            out['factory'] = None if f is None else self.enc(f, depth + 1)
        return out

    def _other(self, v, t, depth):
        if t is collections.deque:
            r = self._ref(v) if not self.node else None
            if r is not None:
                return r
            self._enter(v)
            out = {'$deque': [self.enc(x, depth + 1) for x in _deque_iter(v)], 'maxlen': v.maxlen}
            self._leave(v)
            return out
        if t is bytes:
            self._spend(_len(v) * 4 // 3 + 4)
            return {'$bytes': _b64e(v, newline=False).decode('ascii')}
        if t is bytearray:
            r = self._ref(v) if not self.node else None
            if r is not None:
                return r
            self._enter(v)
            self._leave(v)
            self._spend(_len(v) * 4 // 3 + 4)
            return {'$bytearray': _b64e(memoryview(v), newline=False).decode('ascii')}
        if t is complex:
            return {'$complex': [self._float(v.real), self._float(v.imag)]}
        if t is decimal.Decimal:
            text = decimal.Decimal.__str__(v)
            self._spend(_len(text))
            return {'$decimal': text}
        if t is fractions.Fraction:
            return {'$fraction': [self.enc(int(v.numerator), depth + 1), self.enc(int(v.denominator), depth + 1)]}
        if t is range:
            return {'$range': [self.enc(v.start, depth + 1), self.enc(v.stop, depth + 1), self.enc(v.step, depth + 1)]}
        name = _BUILTIN_BY_ID.get(_id(v))
        if name is not None:
            return {'$builtin': name}
        # Subclasses of data types cross as the value their base type stores.
        if _isinstance(v, BaseException):
            return self._exception(v, depth)
        if _isinstance(v, int) and not _isinstance(v, bool):
            return self.enc(int(_int_repr(v)), depth)
        if _isinstance(v, bool):
            return bool(v)
        if _isinstance(v, float):
            return self.enc(float(_float_repr(v)), depth)
        if _isinstance(v, str):
            return self.enc(_str_str(v), depth)
        if _isinstance(v, list):
            return self.enc(list(_list_iter(v)), depth)
        if _isinstance(v, tuple):
            return self.enc(tuple(_tuple_iter(v)), depth)
        if _isinstance(v, dict):
            return self.enc(dict(_dict_items(v)), depth)
        if _isinstance(v, (set, frozenset)):
            return self.enc(set(v) if _isinstance(v, set) else frozenset(v), depth)
        if _isinstance(v, bytes):
            return self.enc(_bytes(memoryview(v)), depth)  # the stored bytes, not its __bytes__
        if self.peer_id is not None:
            pid = self.peer_id(v)
            if pid is not None:
                return {'$p': pid}
        mod = getattr(t, '__module__', '')
        if mod == 'numpy' and hasattr(v, 'tolist'):
            try:
                return self.enc(v.tolist(), depth + 1)
            except Exception:  # noqa: BLE001
                pass
        if self.exporter is not None:
            return self.exporter(v)
        return {'$repr': _safe_repr(v), '$type': getattr(t, '__name__', 'object')}

    def _exception(self, e, depth):
        try:
            args = tuple(BaseException.__getattribute__(e, 'args'))
        except Exception:  # noqa: BLE001
            args = ()
        if self.node:
            return {'$repr': '%s%r' % (_type(e).__name__, ('<args>',)), '$type': _type(e).__name__}
        return {'$exc': self.exc_class(_type(e)), 'args': [self.enc(a, depth + 1) for a in args]}


def _safe_repr(v):
    try:
        return _object_repr(v)
    except Exception:  # noqa: BLE001
        return '<object>'


def encode(v, limit=None):
    """A value for Node (no handles: objects become opaque)."""
    return Encoder(limit=limit).dumps(v)


class Decoder:
    """Decodes one message. `memo` (index -> object) may be seeded; `containers` collects the
    mutable containers made here with their index (for write-back). `handle(tag)` builds a proxy
    for a sender's handle; `own(id)` returns this process's object for a `$p`; `exc(cls, args)`
    builds an exception value. Without them, handles are malformed."""

    def __init__(self, handle=None, own=None, exc=None, cls=None, memo=None, opaque=False):
        self.opaque = opaque
        self.cls = cls
        self.handle = handle
        self.own = own
        self.exc = exc
        self.memo = [] if memo is None else memo
        self.containers = []

    def loads(self, text):
        try:
            raw = _loads(text)
        except (ValueError, RecursionError) as e:
            raise DecodeError('not JSON: %s' % str(e)[:100])
        return self.value(raw)

    def value(self, raw):
        """Decodes a parsed value; whatever goes wrong is a DecodeError (a huge maxlen, a bad
        class description), never another exception a caller would not expect."""
        try:
            return self.dec(raw, 0)
        except DecodeError:
            raise
        except RecursionError:
            raise DecodeError('value nested too deeply')
        except Exception as e:  # noqa: BLE001
            raise DecodeError('%s: %s' % (_type(e).__name__, str(e)[:100]))

    def _new(self, obj):
        self.memo.append(obj)
        if _type(obj) in MUTABLE:
            self.containers.append((_len(self.memo) - 1, obj))
        return _len(self.memo) - 1

    def dec(self, v, depth):
        if depth > 450:
            raise DecodeError('value nested too deeply')
        t = _type(v)
        if v is None or t is bool or t is str:
            return v
        if t is float:
            if not _isfinite(v):
                raise DecodeError('a plain number that is not finite (1e999): non-finite floats are tagged')
            return v
        if t is int:
            if not -SAFE < v < SAFE:
                raise DecodeError('integer outside +-2^53 without $int')
            return v
        if t is list:
            out = []
            self._new(out)
            out.extend([self.dec(x, depth + 1) for x in v])
            return out
        if t is not dict:
            raise DecodeError('not a value')
        if _len(v) == 1:
            ((k, x),) = v.items()
        else:
            k = next((key for key in ('$ddict', '$deque', '$h', '$exc', '$repr') if key in v), None)
            if k is None:
                raise DecodeError('unknown tag')
            x = v[k]
        f = _DEC.get(k)
        if f is None:
            raise DecodeError('unknown tag %s' % str(k)[:40])
        return f(self, v, x, depth)

    def _items(self, x, depth):
        if _type(x) is not list:
            raise DecodeError('items are not a list')
        return [self.dec(y, depth + 1) for y in x]

    def _pairs(self, x, depth):
        if _type(x) is not list:
            raise DecodeError('pairs are not a list')
        out = []
        for p in x:
            if _type(p) is not list or _len(p) != 2:
                raise DecodeError('a dict entry is not a pair')
            out.append((self.dec(p[0], depth + 1), self.dec(p[1], depth + 1)))
        return out

    def _immutable(self, make, x, depth):
        i = self._new(None)
        try:
            obj = make(self._items(x, depth))
        except TypeError as e:
            raise DecodeError('unhashable element: %s' % str(e)[:80])
        self.memo[i] = obj
        return obj

    def _mapping(self, obj, x, depth):
        self._new(obj)
        try:
            for k, val in self._pairs(x, depth):
                obj[k] = val
        except TypeError as e:
            raise DecodeError('unhashable key: %s' % str(e)[:80])
        return obj


def _dec_int(d, v, x, depth):
    if _type(x) is not str or not x or not (x.lstrip('-').isdigit() and x.count('-') <= 1 and x.isascii()):
        raise DecodeError('bad $int')
    return int(x)


def _dec_float(d, v, x, depth):
    if _type(x) is not str or _len(x) > 40:
        raise DecodeError('bad $float')
    try:
        return float(x)
    except ValueError:
        raise DecodeError('bad $float')


def _dec_set(d, v, x, depth):
    s = set()
    d._new(s)
    try:
        s.update(d._items(x, depth))
    except TypeError as e:
        raise DecodeError('unhashable element: %s' % str(e)[:80])
    return s


def _dec_ddict(d, v, x, depth):
    # Items first, then the factory: the order the encoder wrote them (memo indices follow it).
    obj = d._mapping(collections.defaultdict(), x, depth)
    f = v.get('factory')
    factory = None if f is None else d.dec(f, depth + 1)
    if factory is not None and not callable(factory):
        raise DecodeError('defaultdict factory is not callable')
    obj.default_factory = factory
    return obj


def _dec_deque(d, v, x, depth):
    m = v.get('maxlen')
    if m is not None and (_type(m) is not int or m < 0):
        raise DecodeError('bad maxlen')
    q = collections.deque(maxlen=m)
    d._new(q)
    q.extend(d._items(x, depth))
    return q


def _b64(x):
    if _type(x) is not str:
        raise DecodeError('bytes are not base64 text')
    try:  # the C function: base64's Python wrapper looks up builtins a program may patch
        return _b64d(x.encode('ascii'), strict_mode=True)
    except (ValueError, UnicodeEncodeError, binascii.Error):
        raise DecodeError('bad base64')


def _dec_bytearray(d, v, x, depth):
    b = bytearray()
    d._new(b)
    b.extend(_b64(x))
    return b


def _dec_complex(d, v, x, depth):
    if _type(x) is not list or _len(x) != 2:
        raise DecodeError('bad $complex')
    re_, im = d.dec(x[0], depth + 1), d.dec(x[1], depth + 1)
    if _type(re_) is not float or _type(im) is not float:
        raise DecodeError('bad $complex')
    return complex(re_, im)


def _dec_decimal(d, v, x, depth):
    if _type(x) is not str or _len(x) > 10000:
        raise DecodeError('bad $decimal')
    try:
        return decimal.Decimal(x)
    except (decimal.InvalidOperation, ValueError):
        raise DecodeError('bad $decimal')


def _dec_ints(d, x, n, depth, what):
    if _type(x) is not list or _len(x) != n:
        raise DecodeError('bad %s' % what)
    out = [d.dec(y, depth + 1) for y in x]
    if any(_type(y) is not int for y in out):
        raise DecodeError('bad %s' % what)
    return out


def _dec_fraction(d, v, x, depth):
    num, den = _dec_ints(d, x, 2, depth, '$fraction')
    if den == 0:
        raise DecodeError('bad $fraction')
    return fractions.Fraction(num, den)


def _dec_range(d, v, x, depth):
    a, b, c = _dec_ints(d, x, 3, depth, '$range')
    if c == 0:
        raise DecodeError('bad $range')
    return range(a, b, c)


def _dec_ref(d, v, x, depth):
    if _type(x) is not int or not 0 <= x < _len(d.memo):
        raise DecodeError('bad $ref')
    obj = d.memo[x]
    if obj is None:
        raise DecodeError('a $ref to a value still being built (a cycle through a tuple)')
    return obj


def _dec_builtin(d, v, x, depth):
    obj = _BUILTIN_OBJ.get(x) if _type(x) is str else None
    if obj is None:
        raise DecodeError('unknown builtin')
    return obj


def _dec_handle(d, v, x, depth):
    if d.handle is None or _type(x) is not int:
        raise DecodeError('a handle where none may be')
    return d.handle(v)


def _dec_peer(d, v, x, depth):
    if d.own is None or _type(x) is not int:
        raise DecodeError('a handle where none may be')
    return d.own(x)


def _dec_exc(d, v, x, depth):
    if d.exc is None:
        raise DecodeError('an exception where none may be')
    args = v.get('args')
    return d.exc(x, d._items(args if args is not None else [], depth))


def _dec_cls(d, v, x, depth):
    if d.cls is None:
        raise DecodeError('a class where none may be')
    return d.cls(x)


class Opaque:
    """An object a program returned that has no value (only in values sent to Node)."""
    __slots__ = ('repr', 'type')

    def __init__(self, r, t):
        self.repr, self.type = r, t


def _dec_repr(d, v, x, depth):
    if not d.opaque or _type(x) is not str or _type(v.get('$type', '')) is not str or _len(v) > 2:
        raise DecodeError('an opaque value where none may be')
    return Opaque(x, v.get('$type', 'object'))


_DEC = {
    '$int': _dec_int, '$float': _dec_float,
    '$tuple': lambda d, v, x, depth: d._immutable(tuple, x, depth),
    '$frozenset': lambda d, v, x, depth: d._immutable(frozenset, x, depth),
    '$set': _dec_set,
    '$dict': lambda d, v, x, depth: d._mapping({}, x, depth),
    '$odict': lambda d, v, x, depth: d._mapping(collections.OrderedDict(), x, depth),
    '$counter': lambda d, v, x, depth: d._mapping(collections.Counter(), x, depth),
    '$ddict': _dec_ddict, '$deque': _dec_deque,
    '$bytes': lambda d, v, x, depth: _b64(x), '$bytearray': _dec_bytearray,
    '$complex': _dec_complex, '$decimal': _dec_decimal, '$fraction': _dec_fraction, '$range': _dec_range,
    '$ref': _dec_ref, '$builtin': _dec_builtin, '$h': _dec_handle, '$p': _dec_peer, '$exc': _dec_exc,
    '$repr': _dec_repr, '$cls': _dec_cls,
}


def decode(text):
    """A value from Node (a call test's arguments): data only."""
    return Decoder().loads(text)


def decode_value(raw, opaque=False):
    """An already-parsed JSON value (data only; `opaque`: objects a program returned that
    have no value, as a candidate's result for Node may hold)."""
    return Decoder(opaque=opaque).value(raw)


def write_back(orig, new):
    """Makes the container `orig` hold what `new` holds, in place (same type by construction)."""
    t = _type(orig)
    if t is list or t is bytearray:
        orig[:] = new
    elif t is collections.deque:
        orig.clear()
        orig.extend(new)
    elif t is collections.OrderedDict:
        collections.OrderedDict.clear(orig)
        for k, v in _odict_items(new):
            collections.OrderedDict.__setitem__(orig, k, v)
    elif t in (dict, collections.Counter, collections.defaultdict):
        dict.clear(orig)
        for k, v in _dict_items(new):
            dict.__setitem__(orig, k, v)
        if t is collections.defaultdict:
            orig.default_factory = new.default_factory
    elif t is set:
        orig.clear()
        orig.update(new)
