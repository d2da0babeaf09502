"""A TRL run's `training_args.bin` read as plain fields, without running anything it holds.

transformers' Trainer._save ends with `torch.save(self.args, os.path.join(output_dir, TRAINING_ARGS_NAME))`,
TRAINING_ARGS_NAME = "training_args.bin" (src/transformers/trainer.py at 000945a9): the GRPOConfig dataclass itself,
pickled. torch.save writes a zip (torch ≥ 1.6) whose `<name>/data.pkl` is that pickle (protocol 2), beside
`<name>/byteorder`, `<name>/version` and a `<name>/data/<key>` per tensor storage; before 1.6 it was a bare run of
pickles (a magic number, the protocol, the system's sizes, then the object). Unpickling it as it is would import and
call whatever it names (`os.system` included), so this reader never does:

- every global the pickle names (GLOBAL, STACK_GLOBAL, an extension code) becomes an inert placeholder class that
  only remembers its module and name; a placeholder called (REDUCE, NEWOBJ) builds a placeholder instance that only
  records its arguments, and BUILD only records the state. No real class or function is ever handed out, so there is
  nothing else REDUCE could call; a tensor's storage (a persistent id) is a placeholder too.
- the result is turned into plain fields: a dataclass (NEWOBJ then BUILD with a dict) is its dict of fields, an enum
  (one argument, no state: `IntervalStrategy("steps")`) is its value, a set is a sorted list, a class named as a value
  (`torch.float32`) is its dotted name. Anything else a placeholder called with arguments is refused by name.

No torch here: the zip is read with zipfile (data.pkl only, at most MAX_PICKLE bytes) and the pickle with the
standard library's unpickler, its `find_class` and `persistent_load` overridden.
"""
from __future__ import annotations

import io
import pickle
import zipfile
from dataclasses import dataclass
from typing import Any

MAX_PICKLE = 4 * 1024 * 1024  # a GRPOConfig pickles to about 10 KB
MAX_FILE = 16 * 1024 * 1024  # the whole file as read from a run's folder (its pickle and any storages)
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C  # torch.serialization.MAGIC_NUMBER, the pre-1.6 format's first pickle
Plain = None | bool | int | float | str | list[Any] | dict[str, Any]


class TrainingArgsRefused(ValueError):
    """The file is not a readable training_args.bin; the message says why (never a traceback of its contents)."""


class Placeholder:
    """What a pickled global becomes: never the real thing. Subclassed once per (module, name) by `find_class`."""
    module = ""
    qualname = ""

    def __new__(cls, *args: Any, **kwargs: Any) -> Placeholder:  # REDUCE calls it, NEWOBJ calls __new__
        obj = object.__new__(cls)
        obj.__dict__["_args"] = args
        obj.__dict__["_kwargs"] = kwargs
        obj.__dict__["_state"] = None
        obj.__dict__["_items"] = []
        return obj

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # nothing: __new__ recorded them
        pass

    def __setstate__(self, state: Any) -> None:  # BUILD
        self.__dict__["_state"] = state

    def append(self, item: Any) -> None:  # APPEND(S) onto a list subclass
        self.__dict__["_items"].append(item)

    def extend(self, items: Any) -> None:
        self.__dict__["_items"].extend(items)

    def __setitem__(self, key: Any, value: Any) -> None:  # SETITEM(S) onto a dict subclass
        self.__dict__["_items"].append((key, value))

    @classmethod
    def dotted(cls) -> str:
        return f"{cls.module}.{cls.qualname}"


SETS = {("builtins", "set"), ("builtins", "frozenset"), ("__builtin__", "set"), ("__builtin__", "frozenset")}
DICTS = {("collections", "OrderedDict"), ("builtins", "dict")}
LISTS = {("builtins", "list"), ("builtins", "tuple")}
PLAIN = SETS | DICTS | LISTS
# modules whose names in a pickle mean it was made to run something: refused by name (they would be inert anyway)
HOSTILE = frozenset({"os", "posix", "nt", "subprocess", "sys", "shutil", "socket", "importlib", "pickle", "runpy",
                     "code", "codeop", "ctypes", "webbrowser", "pty", "commands", "marshal", "types", "operator",
                     "functools", "io", "pathlib", "tempfile", "multiprocessing", "threading", "asyncio", "eval"})


class _Reader(pickle.Unpickler):
    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))
        self.classes: dict[tuple[str, str], type[Placeholder]] = {}

    def find_class(self, module: str, name: str) -> type[Placeholder]:
        key = (str(module), str(name))
        if key[0].split(".")[0] in HOSTILE or (key[0] in ("builtins", "__builtin__") and key not in PLAIN):
            raise TrainingArgsRefused(f"names {key[0]}.{key[1]}: a configuration never does (nothing was run)")
        if key not in self.classes:
            self.classes[key] = type(f"Placeholder[{module}.{name}]", (Placeholder,),
                                     {"module": key[0], "qualname": key[1]})
        return self.classes[key]

    def persistent_load(self, pid: Any) -> Placeholder:  # a tensor's storage: never loaded
        return self.find_class("torch", "storage")(repr(pid)[:200])


def plain(value: Any, where: str = "$", depth: int = 0) -> Plain:
    """The unpickled tree as JSON-like values; TrainingArgsRefused where a call's meaning is not plain data."""
    if depth > 50:
        raise TrainingArgsRefused(f"{where}: nested deeper than 50 levels")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, (list, tuple)):
        return [plain(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {str(k): plain(v, f"{where}.{k}", depth + 1) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted((plain(v, where, depth + 1) for v in value), key=repr)
    if isinstance(value, type) and issubclass(value, Placeholder):
        return value.dotted()  # a class or function named as a value (torch.float32)
    if isinstance(value, Placeholder):
        return _placeholder(value, where, depth)
    raise TrainingArgsRefused(f"{where}: a {type(value).__name__}, not plain data")


def _placeholder(p: Placeholder, where: str, depth: int) -> Plain:
    cls = type(p)
    key = (cls.module, cls.qualname)
    args, kwargs, state, items = p._args, p._kwargs, p._state, p._items  # type: ignore[attr-defined]
    if key in SETS and len(args) <= 1 and not kwargs:
        return sorted((plain(v, where, depth + 1) for v in (args[0] if args else ())), key=repr)
    if key in LISTS and len(args) <= 1 and not kwargs:
        return [plain(v, where, depth + 1) for v in (list(args[0]) if args else []) + items]
    if key in DICTS and not kwargs:
        pairs = list(args[0].items() if args and isinstance(args[0], dict) else (args[0] if args else ())) + items
        return {str(k): plain(v, f"{where}.{k}", depth + 1) for k, v in pairs}
    if cls.module.startswith("torch") and cls.qualname.startswith("_rebuild"):  # a tensor: its storage never read
        return "<a tensor, not loaded>"
    if state is not None:  # a dataclass or object: NEWOBJ (the class, maybe args) then BUILD with its fields
        fields = state[0] if isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], dict) else state
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):
            fields = {**(state[0] or {}), **state[1]}  # (dict, slots)
        if not isinstance(fields, dict):
            raise TrainingArgsRefused(f"{where}: {cls.dotted()}'s state is a {type(fields).__name__}, not its fields")
        return {str(k): plain(v, f"{where}.{k}", depth + 1) for k, v in fields.items() if not str(k).startswith("__")}
    if len(args) == 1 and not kwargs and not items:  # an enum rebuilt from its value: IntervalStrategy("steps")
        return plain(args[0], where, depth + 1)
    if not args and not kwargs:
        return {str(k): plain(v, f"{where}.{k}", depth + 1) for k, v in items} if items else cls.dotted()
    raise TrainingArgsRefused(f"{where}: {cls.dotted()} called with {len(args)} arguments: not a plain field")


def _pickle_bytes(raw: bytes) -> tuple[bytes, bool]:
    """(the object's pickle, whether the file is the zip format)."""
    if raw[:4] == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(io.BytesIO(raw)) as archive:
                names = [i for i in archive.infolist() if i.filename.endswith("/data.pkl") or i.filename == "data.pkl"]
                if len(names) != 1:
                    raise TrainingArgsRefused("a zip without one data.pkl: not a torch.save file")
                if names[0].file_size > MAX_PICKLE:
                    raise TrainingArgsRefused(f"data.pkl is {names[0].file_size} bytes, past {MAX_PICKLE}")
                with archive.open(names[0]) as member:
                    data = member.read(MAX_PICKLE + 1)
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise TrainingArgsRefused(f"not a readable zip: {exc}") from None
        if len(data) > MAX_PICKLE:
            raise TrainingArgsRefused(f"data.pkl is past {MAX_PICKLE} bytes")
        return data, True
    if len(raw) > MAX_PICKLE:
        raise TrainingArgsRefused(f"{len(raw)} bytes, past {MAX_PICKLE} for a training_args.bin")
    return raw, False


def _load(reader: _Reader) -> Any:
    try:
        return reader.load()
    except TrainingArgsRefused:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError,
            RecursionError, MemoryError, UnicodeDecodeError) as exc:
        raise TrainingArgsRefused(f"not a readable pickle: {type(exc).__name__}: {str(exc)[:200]}") from None


@dataclass(frozen=True)
class TrainingArgs:
    class_name: str  # "trl.trainer.grpo_config.GRPOConfig"
    fields: dict[str, Plain]


def read_training_args(raw: bytes) -> TrainingArgs:
    """The pickled TrainingArguments' (GRPOConfig's) fields; TrainingArgsRefused when it cannot be read as data."""
    data, zipped = _pickle_bytes(raw)
    reader = _Reader(data)
    obj = _load(reader)
    if not zipped:  # the legacy format: magic number, protocol, system info, then the object
        if obj != LEGACY_MAGIC:
            raise TrainingArgsRefused("neither a torch.save zip nor its legacy format (no magic number)")
        _load(reader)
        _load(reader)
        obj = _load(reader)
    if not isinstance(obj, Placeholder):
        raise TrainingArgsRefused(f"holds a {type(obj).__name__}, not a TrainingArguments object")
    fields = plain(obj)
    if not isinstance(fields, dict):
        raise TrainingArgsRefused(f"{type(obj).dotted()} holds no fields")
    return TrainingArgs(type(obj).dotted(), fields)


__all__ = ["MAX_PICKLE", "Placeholder", "TrainingArgs", "TrainingArgsRefused", "plain", "read_training_args"]
