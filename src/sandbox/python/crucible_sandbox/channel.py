"""The channel between an assert test's oracle and the candidate: calls in both directions over
one socket, values through the codec, objects that are not data left where they live (handles).

Frames: a 4-byte big-endian length, then JSON (a list). Requests carry an id; a side that waits
for a reply serves the other side's requests meanwhile (a candidate that calls a function the
test passed it is answered by the oracle while the oracle waits for the candidate).

    ["call", rid, target, [args], [kwargs pairs]]     target: {"$p": id} of the receiver
    ["getattr", rid, target, name]   ["setattr", rid, target, name, value]   ["delattr", ...]
    ["op", rid, target, op, [args]]  ["state", rid, target]
    ["ret", rid, writeback, value]   ["exc", rid, writeback, exception]
    ["end"]                          the oracle is done with this candidate

Arguments are copied, as a value crosses a process: after a call the callee sends back the
contents of every mutable container it received (writeback), and the caller puts them into its
own objects in place, inner containers included, so `f(rows)` that sorts `rows[0]` is seen by
the test. Shared and nested references keep their identity within one call.
"""
import builtins
import operator
import os
import struct
from _thread import get_ident as _get_ident

from . import codec

# A program may patch builtins (`builtins.isinstance = lambda *a: True`) in the process this
# module also runs in: its names resolve to the builtins as they were at import.
globals().update({_k: _v for _k, _v in vars(builtins).items() if not _k.startswith('__')})

_type = type
_len = len
_getattr = getattr
_setattr = setattr
_object_getattr = object.__getattribute__
_object_setattr = object.__setattr__
_pack = struct.Struct('>I').pack
_unpack = struct.Struct('>I').unpack
_read = os.read
_write = os.write
REQUESTS = frozenset(('call', 'getattr', 'setattr', 'delattr', 'op', 'state'))


class ChannelClosed(BaseException):
    """The other side is gone (it ended, crashed or was killed)."""


class ChannelBroken(BaseException):
    """The other side sent something out of the protocol (`why`), or a frame over the limit."""

    def __init__(self, why, oversize=False):
        BaseException.__init__(self, why)
        self.why, self.oversize = why, oversize


class Refused(Exception):
    """An operation this side does not serve for the other."""


def _unary(f):
    return lambda obj, args: f(obj)


def _binary(f):
    return lambda obj, args: f(obj, args[0])


def _reflected(f):
    return lambda obj, args: f(args[0], obj)


# What a proxy may ask of a real object, by name: Python's own operators on it.
OPS = {
    'len': _unary(builtins.len), 'iter': _unary(builtins.iter), 'next': _unary(builtins.next),
    'bool': _unary(builtins.bool), 'str': _unary(builtins.str), 'repr': _unary(builtins.repr),
    'hash': _unary(builtins.hash), 'int': _unary(builtins.int), 'float': _unary(builtins.float),
    'index': _unary(operator.index), 'neg': _unary(operator.neg), 'pos': _unary(operator.pos),
    'abs': _unary(builtins.abs), 'invert': _unary(operator.invert), 'reversed': _unary(builtins.reversed),
    'enter': _unary(lambda o: _type(o).__enter__(o)),
    'exit': lambda o, a: _type(o).__exit__(o, *a),
    'format': _binary(builtins.format), 'round': lambda o, a: builtins.round(o, *a),
    'getitem': _binary(operator.getitem), 'delitem': _binary(operator.delitem),
    'setitem': lambda o, a: operator.setitem(o, a[0], a[1]),
    'contains': _binary(operator.contains),
    'lt': _binary(operator.lt), 'le': _binary(operator.le), 'gt': _binary(operator.gt), 'ge': _binary(operator.ge),
}
for _n in ('add', 'sub', 'mul', 'truediv', 'floordiv', 'mod', 'pow', 'lshift', 'rshift', 'and_', 'or_', 'xor', 'matmul'):
    _name = _n.rstrip('_')
    OPS[_name] = _binary(_getattr(operator, _n))
    OPS['r' + _name] = _reflected(_getattr(operator, _n))


class Peer:
    """One side of the channel. `allow`: the request kinds this side serves (the oracle serves
    only calls of what the test passed; the candidate serves everything the test may do to its
    objects). `limit`: the largest frame accepted or sent, in bytes."""

    def __init__(self, fd, limit, allow):
        self.fd = fd
        self.limit = limit
        self.allow = allow
        self.objects = {}      # handle id -> object of this process
        self.ids = {}          # id(object) -> handle id
        self.classes = {}      # id(class) -> class id, for classes described to the other side
        self.class_objs = {}   # class id -> class (kept alive)
        self.sent_classes = set()
        self.remote_classes = {}  # the other side's class id -> local class
        self.proxies = {}      # the other side's handle id -> proxy
        self.next_rid = 1
        # How the other side failed, once it has: the oracle's record when the test ends.
        self.failure = None
        self.thread = _get_ident()
        ACTIVE[0] = self

    # ------------------------------------------------------------ frames
    def send(self, msg):
        data = codec._dumps(msg).encode('ascii')
        if _len(data) > self.limit:
            raise codec.Oversize()
        data = _pack(_len(data)) + data
        view = memoryview(data)
        while view:
            try:
                n = _write(self.fd, view)
            except (BrokenPipeError, ConnectionResetError):
                raise self._closed()
            view = view[n:]

    def _read_exact(self, n):
        chunks, got = [], 0
        while got < n:
            try:
                b = _read(self.fd, min(n - got, 1 << 20))
            except ConnectionResetError:
                b = b''
            if not b:
                raise self._closed()
            chunks.append(b)
            got += _len(b)
        return b''.join(chunks)

    def recv(self):
        (n,) = _unpack(self._read_exact(4))
        if n > self.limit:
            raise self._broken('a frame of %d bytes is over the limit' % n, oversize=True)
        try:
            text = self._read_exact(n).decode('ascii')
            msg = codec._loads(text)
        except (ValueError, RecursionError, UnicodeDecodeError) as e:
            raise self._broken('a frame that is not JSON: %s' % str(e)[:100])
        if _type(msg) is not list or not msg or _type(msg[0]) is not str:
            raise self._broken('a frame that is not a message')
        return msg

    def _closed(self):
        if self.failure is None:
            self.failure = {'s': 'cand_gone'}
        return ChannelClosed()

    def _broken(self, why, oversize=False):
        if self.failure is None:
            self.failure = {'s': 'cand_oversize'} if oversize else {'s': 'cand_broken', 'why': why[:200]}
        return ChannelBroken(why, oversize)

    # ------------------------------------------------------------ values
    def export(self, obj):
        """A handle for an object that stays here."""
        if _isinstance_type(obj):
            return {'$cls': self.describe(obj)}
        hid = self.ids.get(id(obj))
        if hid is None:
            hid = self.ids[id(obj)] = _len(self.objects) + 1
            self.objects[hid] = obj
        return {'$h': hid, 'c': self.describe(_type(obj))}

    def describe(self, cls):
        """A class as the other side needs it: name, module, bases, and whether it is an
        exception (sent once per class; later only its id)."""
        cid = self.classes.get(id(cls))
        if cid is not None and cid in self.sent_classes:
            return {'id': cid}
        if cid is None:
            cid = self.classes[id(cls)] = _len(self.classes) + 1
            self.class_objs[cid] = cls
        self.sent_classes.add(cid)
        bases = []
        for b in _object_getattr(cls, '__bases__') if isinstance(cls, type) else ():
            if b is object:
                continue
            if _getattr(b, '__module__', None) == 'builtins':
                bases.append({'builtin': b.__name__})
            else:
                bases.append(self.describe(b))
        hid = self.ids.get(id(cls))
        if hid is None:
            hid = self.ids[id(cls)] = _len(self.objects) + 1
            self.objects[hid] = cls
        return {'id': cid, 'n': str(_getattr(cls, '__name__', 'object')), 'm': str(_getattr(cls, '__module__', '') or ''),
                'b': bases, 'h': hid, 'x': isinstance(cls, type) and issubclass(cls, BaseException)}

    def encoder(self, memo=None, keep=None):
        return codec.Encoder(limit=self.limit, exporter=self.export, peer_id=self._peer_id_of,
                             exc_class=self.describe, memo=memo, keep=keep)

    def _peer_id_of(self, obj):
        """The other side's handle id when obj is a proxy of one of its objects or classes."""
        t = _type(obj)
        if t is RemoteMeta:
            return obj.__dict__.get('_crucible_cls_hid') if ACTIVE[0] is self else None
        if _type(t) is RemoteMeta and _find_peer(t, None) is self:
            try:
                return _object_getattr(obj, '_crucible_hid')
            except AttributeError:
                return None
        return None

    def decoder(self, memo=None):
        return codec.Decoder(handle=self._proxy, own=self._own, exc=self._exception, cls=self.local_class, memo=memo)

    def _own(self, hid):
        obj = self.objects.get(hid, _MISSING)
        if obj is _MISSING:
            raise codec.DecodeError('an unknown handle')
        return obj

    def _proxy(self, tag):
        hid = tag['$h']
        p = self.proxies.get(hid)
        if p is None:
            cls = self.local_class(tag.get('c'))
            if not issubclass(cls, RemoteObject):
                raise codec.DecodeError('a handle of an exception class')
            p = object.__new__(cls)
            _object_setattr(p, '_crucible_hid', hid)
            self.proxies[hid] = p
        return p

    def local_class(self, desc):
        """The local stand-in for a class of the other side: a subclass of the builtin
        exception it derives from (so `except ValueError` catches it), or a proxy class whose
        instances forward every operation."""
        if _type(desc) is not dict or _type(desc.get('id')) is not int:
            raise codec.DecodeError('a bad class description')
        cid = desc['id']
        cls = self.remote_classes.get(cid)
        if cls is not None:
            return cls
        if 'n' not in desc:
            raise codec.DecodeError('a class id never described')
        name, module, hid = desc.get('n'), desc.get('m'), desc.get('h')
        if _type(name) is not str or _type(module) is not str or _type(hid) is not int or not name.isidentifier():
            raise codec.DecodeError('a bad class description')
        if module == 'builtins' and desc.get('x'):
            b = _getattr(builtins, name, None) if _type(name) is str else None
            if isinstance(b, type) and issubclass(b, BaseException):
                self.remote_classes[cid] = b  # a builtin exception is the builtin itself
                return b
        if module == 'builtins' and not desc.get('x') and name in PREBUILT and _type(hid) is int:
            cls = self.remote_classes[cid] = PREBUILT[name]  # functions, methods: made once
            return cls
        if _type(name) is not str or _type(module) is not str or _type(hid) is not int or \
                _type(desc.get('b')) is not list or not name.isidentifier():
            raise codec.DecodeError('a bad class description')
        bases = []
        for b in desc['b']:
            if _type(b) is dict and 'builtin' in b:
                bb = _getattr(builtins, str(b['builtin']), None)
                if isinstance(bb, type) and (issubclass(bb, BaseException) or not desc.get('x')):
                    bases.append(bb if issubclass(bb, BaseException) else RemoteObject)
            else:
                bases.append(self.local_class(b))
        if desc.get('x'):
            bases = [b for b in bases if issubclass(b, BaseException)] or [Exception]
            ns = {'__module__': module}
        else:
            bases = [b for b in bases if issubclass(b, RemoteObject)] or [RemoteObject]
            ns = {'__module__': module, '__slots__': (), '_crucible_cls_hid': hid}
        bases = _mro_safe(bases)
        try:
            cls = (type if desc.get('x') else RemoteMeta)(name, tuple(bases), ns)
        except TypeError:
            cls = (type if desc.get('x') else RemoteMeta)(name, (Exception,) if desc.get('x') else (RemoteObject,), ns)
        self.remote_classes[cid] = cls
        return cls

    def _exception(self, desc, args):
        cls = self.local_class(desc)
        if not issubclass(cls, BaseException):
            raise codec.DecodeError('an exception of a class that is not one')
        try:
            e = cls(*args)
        except Exception:  # noqa: BLE001
            e = cls()
        BaseException.__setattr__(e, 'args', tuple(args))
        return e

    # ------------------------------------------------------------ requests
    def request(self, kind, target, *rest, args=None):
        """Sends a request and waits for its reply, serving the other side meanwhile.
        `args`: the values whose mutable containers come back written."""
        if self.failure is not None:
            raise ChannelClosed()
        if _get_ident() != self.thread:
            # One channel, one conversation: a call from another thread would interleave with it.
            raise RuntimeError('objects of the test can be used from the main thread only')
        rid = self.next_rid
        self.next_rid += 1
        enc = self.encoder()
        if kind == 'call':
            a, kw = rest
            env_args = enc.enc(list(a), 0)
            env_kw = [[k, enc.enc(v, 0)] for k, v in kw.items()]
            self.send(['call', rid, target, env_args, env_kw])
        elif kind in ('setattr', 'op'):
            self.send([kind, rid, target, rest[0], enc.enc(rest[1], 0)])
        else:
            self.send([kind, rid, target] + list(rest))
        while True:
            msg = self.recv()
            k = msg[0]
            if k in ('ret', 'exc') and _len(msg) == 4 and msg[1] == rid:
                d = self.decoder(memo=list(enc.keep))
                try:
                    self._apply_writeback(d, msg[2], enc.keep)
                    value = d.value(msg[3])
                except codec.DecodeError as e:
                    raise self._broken(str(e))
                if k == 'ret':
                    return value
                if not isinstance(value, BaseException):
                    raise self._broken('an exception reply without an exception')
                raise value
            if k in REQUESTS:
                self.serve(msg)
                continue
            if k == 'end':
                raise self._closed()
            raise self._broken('an unexpected %s message' % k[:20])

    def _apply_writeback(self, d, wb, originals):
        if _type(wb) is not list:
            raise codec.DecodeError('writeback is not a list')
        for entry in wb:
            if _type(entry) is not list or _len(entry) != 2 or _type(entry[0]) is not int or not 0 <= entry[0] < _len(originals):
                raise codec.DecodeError('a bad writeback entry')
            orig = originals[entry[0]]
            new = d.value(entry[1])
            if _type(new) is not _type(orig) or _type(orig) not in codec.MUTABLE:
                raise codec.DecodeError('a writeback of another type')
            codec.write_back(orig, new)

    def serve(self, msg):
        """Answers one request of the other side. Exceptions of the operation are the reply."""
        kind = msg[0]
        if _len(msg) < 3 or _type(msg[1]) is not int:
            raise self._broken('a malformed request')
        rid = msg[1]
        d = self.decoder()
        try:
            if kind not in self.allow:
                raise codec.DecodeError('refused')
            raw_target = msg[2]
            if _type(raw_target) is not dict or _len(raw_target) != 1 or _type(raw_target.get('$p')) is not int:
                # Only this side's own handles can be asked for: never a builtin by name (the
                # other side could make this process exec its code).
                raise codec.DecodeError('a target that is not a handle of this side')
            target = d.value(raw_target)
            if kind == 'call' and not callable(target):
                raise codec.DecodeError('a call of what is not callable')
            if kind == 'call':
                if _len(msg) != 5 or _type(msg[3]) is not list or _type(msg[4]) is not list:
                    raise codec.DecodeError('a malformed call')
                a = d.value(msg[3])
                kw = {}
                for p in msg[4]:
                    if _type(p) is not list or _len(p) != 2 or _type(p[0]) is not str:
                        raise codec.DecodeError('a malformed keyword argument')
                    kw[p[0]] = d.value(p[1])
                skip = 1
            elif kind in ('getattr', 'delattr'):
                if _len(msg) != 4 or _type(msg[3]) is not str:
                    raise codec.DecodeError('a malformed %s' % kind)
                skip = 0
            elif kind in ('setattr', 'op'):
                if _len(msg) != 5 or _type(msg[3]) is not str:
                    raise codec.DecodeError('a malformed %s' % kind)
                a = d.value(msg[4])
                skip = 0
            else:
                skip = 0
        except codec.DecodeError as e:
            if str(e) == 'refused':
                return self._reply_exc(rid, d, 0, Refused('the test\'s objects can only be called'))
            raise self._broken(str(e))
        try:
            if kind == 'call':
                value = target(*a, **kw)
            elif kind == 'getattr':
                value = _getattr(target, msg[3])
            elif kind == 'setattr':
                _setattr(target, msg[3], a)
                value = None
            elif kind == 'delattr':
                delattr(target, msg[3])
                value = None
            elif kind == 'op':
                f = OPS.get(msg[3])
                if f is None or _type(a) is not list:
                    raise TypeError('unsupported operation %s' % msg[3][:40])
                value = f(target, a)
            else:  # state: what structural equality compares
                value = _state(target)
        except (ChannelClosed, ChannelBroken):
            raise
        except BaseException as e:  # noqa: BLE001 - the operation's exception is its answer
            return self._reply_exc(rid, d, skip, e)
        enc = self.encoder(memo={id(o): i for i, o in enumerate(d.memo)}, keep=list(d.memo))
        wb = self._writeback(enc, d, skip)
        self.send(['ret', rid, wb, enc.enc(value, 0)])

    def _writeback(self, enc, d, skip):
        out = []
        for i, obj in d.containers:
            if i < skip:
                continue  # the argument list itself
            out.append([i, enc.enc(_copy(obj), 0)])
        return out

    def _reply_exc(self, rid, d, skip, e):
        enc = self.encoder(memo={id(o): i for i, o in enumerate(d.memo)}, keep=list(d.memo))
        wb = self._writeback(enc, d, skip)
        try:
            v = enc.enc(e, 0)
        except (codec.EncodeError, RecursionError):
            v = enc.enc(TypeError('an exception that cannot cross'), 0)
        self.send(['exc', rid, wb, v])


_MISSING = object()


def _isinstance_type(obj):
    return isinstance(obj, type) and not issubclass(_type(obj), RemoteMeta)


def _copy(obj):
    t = _type(obj)
    if t is list:
        return list(obj)
    if t is bytearray:
        return bytearray(obj)
    if t is set:
        return set(obj)
    if t is dict:
        return dict(obj)
    import collections
    if t is collections.deque:
        return collections.deque(obj, obj.maxlen)
    if t is collections.defaultdict:
        c = collections.defaultdict(obj.default_factory)
        c.update(obj)
        return c
    return t(obj)


def _state(obj):
    """An object's attributes (its __dict__ and slots), read without its own methods."""
    out = {}
    try:
        d = _object_getattr(obj, '__dict__')
        if _type(d) is dict:
            out.update(d)
    except AttributeError:
        pass
    for klass in _type(obj).__mro__:
        for s in klass.__dict__.get('__slots__', ()) if isinstance(klass.__dict__.get('__slots__', ()), (tuple, list)) else ():
            try:
                out[s] = _object_getattr(obj, s)
            except AttributeError:
                pass
    return out


def _mro_safe(bases):
    out = []
    for b in bases:
        if b not in out and not any(issubclass(o, b) for o in out):
            out = [o for o in out if not issubclass(b, o)] + [b]
    return out


# ---------------------------------------------------------------- proxies (the oracle's view)
class RemoteMeta(type):
    """The class of a program's class as the oracle sees it: calling it constructs in the
    candidate's process, its attributes are read there, `isinstance` works on its proxies."""

    def __call__(cls, *args, **kwargs):
        return _find_peer(cls).request('call', {'$p': _cls_hid(cls)}, args, kwargs)

    def __getattr__(cls, name):
        if name.startswith('_crucible'):
            raise AttributeError(name)
        return _find_peer(cls).request('getattr', {'$p': _cls_hid(cls)}, name)


def _cls_hid(cls):
    hid = cls.__dict__.get('_crucible_cls_hid')
    if hid is None:
        raise TypeError('%s cannot be called here' % cls.__name__)
    return hid


def _find_peer(cls, default=_MISSING):
    """A process has one channel (an oracle's, or a candidate's): every proxy belongs to it."""
    p = ACTIVE[0]
    if p is not None:
        return p
    if default is not _MISSING:
        return default
    raise ChannelBroken('a proxy without a channel')


ACTIVE = [None]


def _target(self):
    return {'$p': _object_getattr(self, '_crucible_hid')}


def _op(name):
    def f(self, *args):
        return _find_peer(_type(self)).request('op', _target(self), name, list(args))
    f.__name__ = '__%s__' % name
    return f


class RemoteObject(metaclass=RemoteMeta):
    """An object that lives in the other process. Every operation runs there, except equality:
    two proxies are equal when they are the same object, or objects of the same class whose
    attributes are equal, compared here on decoded values (never by the program's `__eq__`)."""
    __slots__ = ('_crucible_hid', '__weakref__')

    def __getattr__(self, name):
        if name.startswith('_crucible'):
            raise AttributeError(name)
        return _find_peer(_type(self)).request('getattr', _target(self), name)

    def __setattr__(self, name, value):
        _find_peer(_type(self)).request('setattr', _target(self), name, value)

    def __delattr__(self, name):
        _find_peer(_type(self)).request('delattr', _target(self), name)

    def __call__(self, *args, **kwargs):
        return _find_peer(_type(self)).request('call', _target(self), args, kwargs)

    def __eq__(self, other):
        return structural_eq(self, other, set())

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    def __hash__(self):
        return _find_peer(_type(self)).request('op', _target(self), 'hash', [])


for _name in ('len', 'iter', 'next', 'bool', 'str', 'repr', 'int', 'float', 'index', 'neg', 'pos', 'abs',
              'invert', 'reversed', 'format', 'round', 'getitem', 'setitem', 'delitem', 'contains', 'lt', 'le',
              'gt', 'ge', 'enter', 'exit', 'add', 'sub', 'mul', 'truediv', 'floordiv', 'mod', 'pow', 'lshift',
              'rshift', 'and', 'or', 'xor', 'matmul', 'radd', 'rsub', 'rmul', 'rtruediv', 'rfloordiv', 'rmod',
              'rpow', 'rlshift', 'rrshift', 'rand', 'ror', 'rxor', 'rmatmul'):
    _setattr(RemoteObject, '__%s__' % _name, _op(_name))
del _name


def structural_eq(a, b, seen):
    """Equality of proxies by identity, then by class and attributes (cycles assumed equal)."""
    if not isinstance(b, RemoteObject):
        return NotImplemented
    ha, hb = _object_getattr(a, '_crucible_hid'), _object_getattr(b, '_crucible_hid')
    if ha == hb:
        return True
    if _type(a) is not _type(b):
        return False
    key = (ha, hb)
    if key in seen:
        return True
    seen.add(key)
    peer = _find_peer(_type(a))
    sa = peer.request('state', _target(a))
    sb = peer.request('state', _target(b))
    if _type(sa) is not dict or _type(sb) is not dict or sa.keys() != sb.keys():
        return False
    for k in sa:
        x, y = sa[k], sb[k]
        if isinstance(x, RemoteObject):
            r = structural_eq(x, y, seen)
            if r is not True:
                return False
        elif isinstance(y, RemoteObject):
            return False
        elif not _plain_eq(x, y):
            return False
    return True


def _plain_eq(x, y):
    try:
        return bool(x == y)
    except Exception:  # noqa: BLE001
        return False


# Proxy classes for the kinds of objects most handles are (a program's functions and methods):
# made once at import, not per test.
PREBUILT = {n: RemoteMeta(n, (RemoteObject,), {'__module__': 'builtins', '__slots__': ()})
            for n in ('function', 'method', 'builtin_function_or_method', 'generator', 'cell', 'code',
                      'functools._lru_cache_wrapper', '_lru_cache_wrapper', 'partial')}
