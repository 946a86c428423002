"""Atomic file output: nothing half-written is ever left behind, and nothing not ours is removed.

Output folders (every command taking ``--out DIR``) go through :func:`claim_output_dir` (commands
that add to their folder, e.g. a resumable eval run) or :func:`replace_output_dir` (commands that
write the whole folder, e.g. a dataset). Both refuse ``.``, an ancestor of the working folder, a
symbolic link, a file, and a non-empty folder without our marker file (``OWNER_MARKER``), so a
mistyped ``--out`` never destroys anything. Replacing our own folder builds the new one beside it
and swaps the two; entries in the old folder that the command did not write are carried over.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import socket
import tempfile
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Iterator

from .precision import DEFAULT_DECIMALS, round_array, round_float


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | Path, *, suffix: str | None = None) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds.

    The temporary keeps the target's suffix (tools like USD pick the format from it).
    """
    path = Path(path)
    if path.is_dir():
        from .errors import ConfigError

        raise ConfigError("is a folder", file=path, expected="a file name to write")
    path.parent.mkdir(parents=True, exist_ok=True)
    _clean_stale_files(path)
    fd, tmp = tempfile.mkstemp(prefix=_temp_name(Path(path.stem), _TMP_TAG), suffix=suffix or path.suffix or ".tmp",
                               dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        if tmp_path.exists():  # mkstemp creates 0600; give the file the usual umask-based mode
            os.chmod(tmp_path, 0o666 & ~_umask())
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


#: The file marking a folder as a vlnverse output folder (JSON: the command and the entries it wrote).
OWNER_MARKER = ".vlnverse-output.json"
#: The lock file inside a folder held by :func:`folder_lock`.
LOCK_FILE = ".vlnverse.lock"
#: Name fragments of our hidden temporary folders beside an output folder (cleaned after a crash).
_TMP_TAG, _OLD_TAG = ".vlnverse-tmp", ".vlnverse-old"


def _read_marker(folder: Path) -> dict | None:
    marker = folder / OWNER_MARKER
    if not marker.is_file():
        return None
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


#: Recognisers of output folders written before the marker file existed, by command: a folder
#: without a marker that one of these accepts is taken as that command's own (and then marked).
LEGACY_OUTPUTS: dict[str, Callable[[Path], bool]] = {}


def _summary_has(folder: Path, name: str, keys: tuple[str, ...]) -> bool:
    try:
        data = json.loads((folder / name).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return isinstance(data, dict) and all(k in data for k in keys)


LEGACY_OUTPUTS.update({
    "eval": lambda d: _summary_has(d, "config.json", ("run_key", "config")),
    "quickstart": lambda d: _summary_has(d, "summary.json", ("runs", "config")),
    "data generate": lambda d: _summary_has(d, "summary.json", ("version", "task", "counts", "total_episodes")),
    "sim drive": lambda d: _summary_has(d, "summary.json", ("scene", "body", "actions", "final_pose")),
    "study serve": lambda d: _summary_has(d, "study.json", ("config", "episodes")),
})


#: What a command writing its whole folder wrote before the marker listed its entries (patterns).
LEGACY_ENTRIES: dict[str, tuple[str, ...]] = {
    "data generate": ("*.jsonl", "summary.json", "summary.png", "assets"),
    "sim drive": ("frames", "steps.jsonl", "summary.json"),
}


def check_output_dir(path: str | Path, *, command: str, field: str = "--out") -> Path:
    """Refuse an ``--out`` folder that this command may not write into; return it as a ``Path``.

    Refused (``ConfigError`` naming ``--out``): ``.`` or any ancestor of the working folder, a
    symbolic link, an existing non-folder, and a non-empty folder that holds no ``OWNER_MARKER``
    or one written by a different command (a folder holding only our lock file counts as empty).
    ``field`` names the setting in the message (``--out``, or ``out`` in an eval config).
    """
    from .errors import ConfigError

    path = Path(path)
    if not str(path).strip():
        raise ConfigError("empty", field=field, expected="an output folder")
    resolved = path.resolve()
    cwd = Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents:
        raise ConfigError(f"'{path}' is the working folder or one of its ancestors", field=field,
                          expected="a new or empty folder, or one this command wrote before")
    if path.is_symlink():
        raise ConfigError(f"'{path}' is a symbolic link", field=field, expected="a plain folder")
    if path.exists() and not path.is_dir():
        raise ConfigError(f"'{path}' exists and is not a folder", field=field, expected="a folder")
    if path.is_dir() and any(p.name != LOCK_FILE for p in path.iterdir()):
        marker = _read_marker(path)
        if marker is None and LEGACY_OUTPUTS.get(command, lambda d: False)(path):
            marker = {"command": command}  # written by an earlier vlnverse version
        if marker is None:
            raise ConfigError(f"'{path}' is not empty and was not written by vlnverse (no {OWNER_MARKER})",
                              field=field, expected="a new or empty folder, or one this command wrote before")
        if marker.get("command") != command:
            raise ConfigError(f"'{path}' holds the output of 'vlnverse {marker.get('command', '?')}'", field=field,
                              expected=f"a new or empty folder, or one 'vlnverse {command}' wrote before")
    return path


def _write_marker(folder: Path, command: str, entries: list[str] | None = None) -> None:
    data = {"command": command, "tool": "vlnverse"}
    if entries is not None:
        data["entries"] = sorted(entries)
    write_text_atomic(folder / OWNER_MARKER, json.dumps(data, indent=2, sort_keys=True) + "\n")


def claim_output_dir(path: str | Path, *, command: str, field: str = "--out") -> Path:
    """Check ``path`` (:func:`check_output_dir`), create it and mark it as this command's output.

    For commands that add to their folder (a resumable eval run, ``scenes generate``)."""
    path = check_output_dir(path, command=command, field=field)
    path.mkdir(parents=True, exist_ok=True)
    if _read_marker(path) is None:
        _write_marker(path, command)
    return path


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _temp_name(path: Path, tag: str) -> str:
    return f".{path.name}{tag}.{socket.gethostname()}.{os.getpid()}."


def _carry_over(previous: Path, path: Path, command: str = "") -> bool:
    """Move the entries of ``previous`` (an old output folder) that its marker does not list into
    ``path``; True when nothing but our own output is left in ``previous``."""
    import fnmatch

    marker = _read_marker(previous) or {}
    owned = set(marker.get("entries", [])) | {OWNER_MARKER}
    patterns = () if "entries" in marker else LEGACY_ENTRIES.get(command, ())
    clean = True
    for entry in previous.iterdir():
        if entry.name in owned or any(fnmatch.fnmatchcase(entry.name, p) for p in patterns):
            continue
        if os.path.lexists(path / entry.name):
            clean = False  # the new output has an entry of that name: leave the old folder in place
            continue
        os.replace(entry, path / entry.name)
    return clean


def clean_stale_temps(path: str | Path) -> list[Path]:
    """Tidy our hidden temporary folders beside ``path`` left by a killed process (same host,
    process gone, our marker inside): an unfinished new folder is removed; a swapped-out old one
    is put back if ``path`` is missing, else its entries we did not write move into ``path`` and it
    is removed. Returns the removed folders."""
    path = Path(path)
    removed: list[Path] = []
    if not path.parent.is_dir():
        return removed
    host = socket.gethostname()
    for tag in (_TMP_TAG, _OLD_TAG):
        prefix = f".{path.name}{tag}.{host}."
        for cand in path.parent.glob(f".{glob_escape(path.name)}{tag}.*"):
            if not cand.name.startswith(prefix) or not cand.is_dir() or cand.is_symlink():
                continue
            pid = cand.name[len(prefix):].split(".", 1)[0]
            if not pid.isdigit() or pid_alive(int(pid)) or _read_marker(cand) is None:
                continue
            previous = cand / "previous"
            if tag == _OLD_TAG and previous.is_dir():
                if not path.exists():
                    os.replace(previous, path)
                elif not _carry_over(previous, path, (_read_marker(cand) or {}).get("command", "")):
                    continue
            shutil.rmtree(cand, ignore_errors=True)
            removed.append(cand)
    return removed


def glob_escape(name: str) -> str:
    """``name`` with glob metacharacters escaped."""
    import glob

    return glob.escape(name)


@contextlib.contextmanager
def replace_output_dir(path: str | Path, *, command: str) -> Iterator[Path]:
    """Yield a fresh temporary folder beside ``path``; on success it becomes ``path``.

    ``path`` is checked first (:func:`check_output_dir`). If it exists (ours), the two are
    swapped by renames and the old one is removed afterwards; entries of the old folder that this
    command did not write (not listed in its marker) move into the new one, so nothing else is
    lost. A failed block leaves ``path`` untouched. Temporaries of killed runs are cleaned first.
    """
    path = check_output_dir(path, command=command)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temps(path)
    tmp = Path(tempfile.mkdtemp(prefix=_temp_name(path, _TMP_TAG), dir=path.parent))
    try:
        _write_marker(tmp, command)  # marks the temporary as ours (for crash cleanup)
        yield tmp
        written = [p.name for p in tmp.iterdir() if p.name != OWNER_MARKER]
        _write_marker(tmp, command, written)
        os.chmod(tmp, 0o777 & ~_umask())
        old = None
        if path.is_dir() and any(path.iterdir()):
            check_output_dir(path, command=command)  # still ours (another process may have written there)
            old = Path(tempfile.mkdtemp(prefix=_temp_name(path, _OLD_TAG), dir=path.parent))
            _write_marker(old, command)
            os.replace(path, old / "previous")
        elif path.is_dir():
            path.rmdir()  # empty
        os.replace(tmp, path)
        if old is not None and _carry_over(old / "previous", path, command):
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _clean_stale_files(path: Path) -> None:
    """Remove temporary files of ``atomic_path`` for ``path`` left by killed processes (same host)."""
    prefix = f".{path.stem}{_TMP_TAG}.{socket.gethostname()}."
    try:
        candidates = list(path.parent.glob(glob_escape(prefix) + "*"))
    except OSError:
        return
    for cand in candidates:
        pid = cand.name[len(prefix):].split(".", 1)[0]
        if cand.is_file() and not cand.is_symlink() and pid.isdigit() and not pid_alive(int(pid)):
            with contextlib.suppress(OSError):
                cand.unlink()


@contextlib.contextmanager
def atomic_dir(path: str | Path, keep: Callable[[Path], bool] | None = None) -> Iterator[Path]:
    """Yield a temporary directory beside ``path``; it replaces ``path`` only if the block succeeds.
    ``keep(path)``: whether a folder found at ``path`` when the block ends is already what the block
    made (another process built the same content meanwhile, e.g. a shared cache); such a folder
    stays, so a process reading it is not pulled from under, and the temporary one is dropped."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())
        if keep is not None and path.exists() and keep(path):
            return
        if path.exists():
            shutil.rmtree(path)
        try:
            os.replace(tmp, path)
        except OSError:  # another process moved its own folder into place after the check
            if keep is None or not (path.exists() and keep(path)):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (temp file + rename)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temp file + rename)."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def to_jsonable(obj: Any, *, decimals: int | None = DEFAULT_DECIMALS) -> Any:
    """Convert numpy scalars/arrays, tuples, Paths and dataclass-like objects to JSON types.

    Every float is rounded with ``precision.round_float`` (``decimals`` places, at least 6
    significant digits) so that files are byte-identical across machines; ``decimals=None``
    keeps full precision. NaN becomes ``None``.
    """
    import numpy as np

    if isinstance(obj, dict):
        return {str(k): to_jsonable(v, decimals=decimals) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v, decimals=decimals) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist(), decimals=decimals)
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item(), decimals=decimals)
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, float):
        if obj != obj:  # NaN is not valid JSON
            return None
        return float(obj) if decimals is None else round_float(obj, decimals)
    if hasattr(obj, "to_dict"):
        return to_jsonable(obj.to_dict(), decimals=decimals)
    return obj


def write_json_atomic(path: str | Path, obj: Any, *, indent: int | None = 2) -> Path:
    """Serialise ``obj`` (numpy-aware, floats rounded: ``to_jsonable``) as JSON with sorted keys, atomically."""
    return write_text_atomic(path, json.dumps(to_jsonable(obj), indent=indent, sort_keys=True) + "\n")


def write_jsonl_atomic(path: str | Path, records: list[Any]) -> Path:
    """Write one JSON object per line (sorted keys, compact, floats rounded: ``to_jsonable``) atomically."""
    lines = [json.dumps(to_jsonable(r), sort_keys=True, separators=(",", ":")) for r in records]
    return write_text_atomic(path, "".join(line + "\n" for line in lines))


def write_npz(path: str | Path, **arrays: Any) -> Path:
    """Write arrays as a compressed ``.npz`` atomically, byte-identical for equal inputs on any machine.

    Float arrays are rounded with ``precision.round_array`` (6 decimals: lengths in metres,
    angles in radians). ``numpy.savez_compressed`` stamps every member with the current time;
    here members carry a fixed timestamp and are written in keyword order.
    """
    import io
    import zipfile

    import numpy as np

    path = Path(path)
    with atomic_path(path, suffix=".npz") as tmp:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for name, value in arrays.items():
                buf = io.BytesIO()
                np.lib.format.write_array(buf, round_array(np.asanyarray(value)), allow_pickle=False)
                info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, buf.getvalue())
    return path


@contextlib.contextmanager
def folder_lock(folder: str | Path, *, holder: str = "",
                rule: str = "one run per output folder; wait for it to finish or choose another 'out'") -> Iterator[Path]:
    """Hold an exclusive OS lock (``fcntl.flock``) on ``folder/.vlnverse.lock`` for the block.

    A second holder is refused at once with a one-line ``VLNVerseError`` naming the holder (pid
    and host, and ``holder``, e.g. the address a server listens on, written into the lock file)
    and ``rule``. The OS releases the lock on any exit, ``kill -9`` included, so a stale lock file
    never blocks a later run.
    """
    from .errors import VLNVerseError

    folder = Path(folder)
    lock_path = folder / LOCK_FILE
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            running = os.pread(fd, 300, 0).decode("utf-8", "replace").strip() or "another process"
            raise VLNVerseError(f"{folder}: in use by {running} ({rule})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}{', ' + holder if holder else ''}\n".encode(), 0)
        try:
            yield lock_path
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


#: Query parameters whose values are secrets (case-insensitive substrings of the name).
_SECRET_QUERY_NAMES = ("key", "token", "secret", "password", "passwd", "auth", "sig", "credential")


def redact_url(url: str) -> str:
    """``url`` without credentials: userinfo (``user:key@``) is dropped and the values of query
    parameters that look like secrets (``api_key``, ``token``, ...) become ``REDACTED``."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query = urllib.parse.urlencode([(k, "REDACTED" if any(n in k.lower() for n in _SECRET_QUERY_NAMES) else v)
                                    for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)])
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def endpoint_host(url: str | None) -> str | None:
    """``host[:port]`` of an endpoint URL (no user, password or path); None when it has none."""
    if not url or "://" not in str(url):
        return None
    parts = urllib.parse.urlsplit(str(url))
    return parts.hostname + (f":{parts.port}" if parts.port else "") if parts.hostname else None


def redact_secrets(obj):
    """A copy of a JSON-like ``obj`` safe to write: every string that is a URL goes through
    ``redact_url`` and values under keys naming a secret (``api_key``, ``token``, ...) are dropped."""
    if isinstance(obj, dict):
        return {k: ("REDACTED" if isinstance(k, str) and any(n in k.lower() for n in ("api_key", "apikey", "token",
                                                                                     "secret", "password"))
                    and obj[k] else redact_secrets(v)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_secrets(v) for v in obj]
    if isinstance(obj, str) and re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", obj):
        return redact_url(obj)
    return obj
