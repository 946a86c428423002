#!/usr/bin/env python3
"""Check the Isaac backend's call table against real Isaac Sim packages, without a GPU.

    tools/check_isaac_api.py --python /work/isaac-py312/bin/python     # made by tools/make_isaac_env.sh

Runs in that interpreter (re-executing itself there). For every row of
``vlnverse.sim.isaac.adapter.CALLS`` valid for the installed Isaac Sim major version it imports the
module, resolves the class/function/method/property, and binds the adapter's call (``nargs``
positional placeholders plus its keywords) against ``inspect.signature`` — or, for compiled pybind11
functions without one, the signature in their docstring or in the binding's ``.pyi`` stub — and
checks the argument types the row declares against the annotations. Prints JSON
``{"isaac_version", "checked", "mismatches": [...], "unavailable": [...], "stubbed": [...], "sources": {...}}``
and exits 1 on any mismatch (2 when the check itself cannot run). Kit asks for NVIDIA's Omniverse
EULA on first use: accept it once (``OMNI_KIT_ACCEPT_EULA=YES`` in the environment, or interactively);
the tool never accepts it on anyone's behalf.

Where no Kit app runs, modules are imported the way Kit lays them out: every extension folder under
the ``isaacsim`` package (``exts``, ``extsDeprecated``, ``extscache``) joins the ``isaacsim``/``omni``
package paths. Dependencies the installed packages do not hold (``omni.usd``, ``pxr``, ``usdrt`` ...
live in ``isaacsim-extscache-kit``, a placeholder on the package index) are replaced by inert stubs while
a table module is imported; they are listed under ``stubbed`` and a member is only accepted when it is
really defined (looked up with ``inspect.getattr_static``, never through a stub). A table module that
itself does not exist in the installed packages is listed under ``unavailable`` with the reason, not
checked and not counted as a mismatch.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", help="interpreter of the environment holding Isaac Sim (default: this one)")
    args = parser.parse_args(argv)
    if args.python and os.path.realpath(args.python) != os.path.realpath(sys.executable):
        if not os.access(args.python, os.X_OK):
            print(f"check_isaac_api: --python {args.python}: not an executable interpreter", file=sys.stderr)
            return 2
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        run = subprocess.run([args.python, str(Path(__file__).resolve())], env=env, capture_output=True, text=True)
        out = [line for line in run.stdout.splitlines() if line.startswith('{"isaac_version"')]
        if run.returncode not in (0, 1) or not out:
            print(f"check_isaac_api: {args.python} failed (exit {run.returncode}): "
                  f"{run.stderr.strip()[-3000:]}", file=sys.stderr)
            return 2
        print(out[-1])
        return run.returncode
    try:
        report = check()
    except BaseException:  # noqa: BLE001 - reported on fd 2: Kit reroutes sys.stderr into its log
        import traceback

        os.write(2, traceback.format_exc().encode())
        os._exit(2)
    os.write(1, (json.dumps(report) + "\n").encode())  # fd 1: Kit reroutes Python's sys.stdout into its log
    os._exit(1 if report["mismatches"] else 0)  # the exit status as is: Kit's shutdown would replace it


# ----------------------------------------------------------------------------- import layout


class _StubMeta(type):
    """A permissive stand-in: any attribute is another stub, calling returns a stub, decorating
    returns the function unchanged, usable as a base class and in annotations."""

    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _stub(f"{cls.__qualname__}.{name}")

    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and (inspect.isfunction(args[0]) or inspect.isclass(args[0])):
            return args[0]
        return _stub(f"{cls.__qualname__}()")

    def __getitem__(cls, item):
        return cls

    def __or__(cls, other):
        return cls

    __ror__ = __or__

    def __iter__(cls):
        return iter(())

    def __bool__(cls):
        return False


def _stub(name: str) -> type:
    return _StubMeta(name, (), {"__qualname__": name, "__module__": "stub"})


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _stub(f"{self.__name__}.{name}")


#: Top-level names of modules that only Kit's own packages provide (only these are stubbed when absent).
KIT_ONLY = {"omni", "pxr", "usdrt", "carb", "isaacsim", "Semantics", "physxai"}


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves an inert stub module. Last on ``sys.meta_path`` (``forced=False``): for a module nothing
    else finds. First (``forced=True``): for the compiled modules in ``names`` whose shared library
    cannot load here. Never for the names in ``real`` (the table module being checked and its packages)."""

    def __init__(self, forced: bool):
        self.forced, self.names, self.real, self.stubbed, self.active = forced, set(), set(), set(), False
        self.files: dict[str, str] = {}  # forced name -> the shared library that failed to load

    def find_spec(self, name, path=None, target=None):
        if not self.active or name in self.real or (self.forced and name not in self.names):
            return None
        if not self.forced and name.split(".")[0] not in KIT_ONLY:
            return None  # a missing third-party module stays missing (code guards those with try/except)
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        self.stubbed.add(module.__name__)


def _qualified(name: str | None, so: str) -> str | None:
    """The dotted name of the compiled module ``name`` whose file is ``so`` (ImportError gives the last part)."""
    if not name or not so:
        return name
    folder = os.path.dirname(os.path.realpath(so))
    for pkg_name, pkg in list(sys.modules.items()):
        if pkg_name.split(".")[0] not in KIT_ONLY or isinstance(pkg, _StubModule):
            continue
        paths = vars(pkg).get("__path__") if isinstance(pkg, types.ModuleType) else None
        paths = getattr(paths, "_path", paths)  # a namespace path: its last known entries, not recomputed
        if paths and any(os.path.realpath(p) == folder for p in list(paths)):
            return f"{pkg_name}.{name.rsplit('.', 1)[-1]}"
    return name


def _sig_from_ast(args) -> inspect.Signature:
    """``inspect.Signature`` of an ``ast.arguments`` (annotations and defaults kept as source text)."""
    import ast

    P = inspect.Parameter
    text = lambda node: ast.unparse(node) if node is not None else P.empty  # noqa: E731
    positional = [(a, P.POSITIONAL_ONLY) for a in args.posonlyargs] + [(a, P.POSITIONAL_OR_KEYWORD) for a in args.args]
    defaults = [P.empty] * (len(positional) - len(args.defaults)) + [text(d) for d in args.defaults]
    params = [P(a.arg, kind, default=d, annotation=text(a.annotation)) for (a, kind), d in zip(positional, defaults)]
    if args.vararg:
        params.append(P(args.vararg.arg, P.VAR_POSITIONAL))
    params += [P(a.arg, P.KEYWORD_ONLY, default=text(d) if d is not None else P.empty, annotation=text(a.annotation))
               for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg:
        params.append(P(args.kwarg.arg, P.VAR_KEYWORD))
    return inspect.Signature(params)


def _module_from_pyi(name: str, pyi: Path, missing=None, forced=None) -> types.ModuleType:
    """A compiled module whose library cannot load here, rebuilt from the type stub (``.pyi``) it ships:
    its classes, functions, methods and properties, each function carrying its declared signature."""
    import ast

    tree = ast.parse(pyi.read_text(encoding="utf-8"))
    class_nodes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    built: dict[str, type] = {}

    def build(cls_name: str) -> type:  # bases first: the stub declares classes in any order
        if cls_name not in built:
            node = class_nodes[cls_name]
            bases = tuple(build(b.id) for b in node.bases if isinstance(b, ast.Name) and b.id in class_nodes)
            built[cls_name] = type(cls_name, bases or (object,), {"__module__": name, **members(node.body)})
        return built[cls_name]

    def members(body) -> dict:
        out = {}
        for node in body:
            if isinstance(node, ast.ClassDef):
                out[node.name] = build(node.name) if node.name in class_nodes and node in tree.body else \
                    type(node.name, (), {"__module__": name, **members(node.body)})
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                decorators = {ast.unparse(d) for d in node.decorator_list}
                if "property" in decorators:
                    out[node.name] = property(lambda self: None)
                    continue
                fn = types.FunctionType((lambda: None).__code__, {}, node.name)
                fn.__signature__ = _sig_from_ast(node.args)
                fn.__module__ = name
                out[node.name] = staticmethod(fn) if "staticmethod" in decorators else \
                    classmethod(fn) if "classmethod" in decorators else fn
        return out

    module = types.ModuleType(name)
    module.__file__ = str(pyi)
    module.__dict__.update(members(tree.body))
    return module


def _innermost_kit_module(exc: BaseException) -> str | None:
    """The innermost Kit-only Python module on ``exc``'s traceback (the one whose import-time code failed)."""
    tb, found = exc.__traceback__, None
    while tb is not None:
        name = tb.tb_frame.f_globals.get("__name__", "")
        if name.split(".")[0] in KIT_ONLY:
            found = name
        tb = tb.tb_next
    return found


def _import_with_stubs(name: str, missing: _StubFinder, forced: _StubFinder) -> types.ModuleType:
    """Import ``name`` for real; its dependencies that are absent, or compiled against libraries
    that are absent, become stubs (retrying after each such library failure)."""
    real = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 2)}
    missing.real = forced.real = real
    missing.active = forced.active = True
    try:
        for _ in range(100):
            before = set(sys.modules)
            try:
                return importlib.import_module(name)
            except (ImportError, RuntimeError) as exc:
                culprit = None
                so = str(getattr(exc, "path", "") or "")
                if isinstance(exc, ImportError) and so.endswith(".so"):
                    culprit = _qualified(getattr(exc, "name", None), so)
                    forced.files[culprit] = so
                elif isinstance(exc, RuntimeError) and "Failed to acquire interface" in str(exc):
                    culprit = _innermost_kit_module(exc)  # a carb interface of a plugin Kit cannot load here
                if not culprit or culprit in real or culprit in forced.names:
                    raise
            for key in set(sys.modules) - before:
                if key.split(".")[0] in KIT_ONLY:
                    del sys.modules[key]
            forced.names.add(culprit)
        raise ImportError(f"{name}: too many compiled dependencies fail to load")
    finally:
        missing.active = forced.active = False


def _ext_folders(isaac_root: Path) -> list[Path]:
    """Extension folders of the installed Isaac Sim (each holds ``config/extension.toml``)."""
    out = []
    for group in ("exts", "extsDeprecated", "extscache"):
        base = isaac_root / group
        if base.is_dir():
            out += sorted(p for p in base.iterdir() if (p / "config" / "extension.toml").is_file())
    kit = isaac_root / "kit"
    for group in ("exts", "extscore", "extsDeprecated"):
        base = kit / group
        if base.is_dir():
            out += sorted(p for p in base.iterdir() if (p / "config" / "extension.toml").is_file())
    return out


def _lay_out(isaac_pkg, ext_folders: list[Path]) -> None:
    """Make the extensions' Python packages importable as Kit does: each extension folder joins
    ``sys.path`` (namespace packages such as ``omni`` span them), and, ``isaacsim`` being a regular
    package here, its ``__path__`` gains each folder's ``isaacsim`` directory."""
    for folder in ext_folders:
        if str(folder) not in sys.path:
            sys.path.append(str(folder))
        sub = folder / "isaacsim"
        if sub.is_dir() and str(sub) not in isaac_pkg.__path__:
            isaac_pkg.__path__.append(str(sub))
    importlib.invalidate_caches()


def _start_kernel():
    """Start the bare Kit kernel (no extensions, no window, no registry, no renderer) so that module
    code run at import (``carb.settings.get_settings()``, ``omni.kit.app.get_app()``) finds Kit."""
    from kit_app import KitApp  # on sys.path after `import isaacsim`

    app = KitApp()
    argv, sys.argv = sys.argv, sys.argv[:1]
    try:
        app.startup(["--no-window", "--allow-root", "--/app/extensions/registryEnabled=0",
                     "--/app/renderer/enabled=false", "--/log/outputStreamLevel=fatal"])
    finally:
        sys.argv = argv
    return app


# ----------------------------------------------------------------------------- signatures

_PYBIND_SIG = re.compile(r"^\s*(?:\d+\.\s*)?([A-Za-z_]\w*)\((.*)\)\s*(?:->\s*(.*))?$")


def _split_params(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _sig_from_text(params: str) -> inspect.Signature:
    parameters, kind = [], inspect.Parameter.POSITIONAL_OR_KEYWORD
    for item in _split_params(params):
        if item == "*":
            kind = inspect.Parameter.KEYWORD_ONLY
            continue
        if item == "/":
            parameters = [p.replace(kind=inspect.Parameter.POSITIONAL_ONLY) for p in parameters]
            continue
        if item.startswith("**"):
            parameters.append(inspect.Parameter(item[2:].split(":")[0].strip(), inspect.Parameter.VAR_KEYWORD))
            continue
        if item.startswith("*"):
            parameters.append(inspect.Parameter(item[1:].split(":")[0].strip(), inspect.Parameter.VAR_POSITIONAL))
            kind = inspect.Parameter.KEYWORD_ONLY
            continue
        name_part, _, default = item.partition("=")
        name, _, annotation = name_part.partition(":")
        parameters.append(inspect.Parameter(name.strip(), kind,
                                            default=default.strip() if default else inspect.Parameter.empty,
                                            annotation=annotation.strip() or inspect.Parameter.empty))
    return inspect.Signature(parameters)


def _docstring_sigs(obj, name: str) -> list[inspect.Signature]:
    """pybind11 signatures (``name(a: int, b: float = 1.0) -> R``, overloads numbered) in ``obj.__doc__``."""
    sigs = []
    for line in (getattr(obj, "__doc__", None) or "").splitlines():
        m = _PYBIND_SIG.match(line)
        if m and m.group(1) == name:
            sigs.append(_sig_from_text(m.group(2)))
    return sigs


def _pyi_sigs(module_name: str, path: str) -> list[inspect.Signature]:
    """Signatures of ``Class.member``/``function`` in the binding's ``.pyi`` stub next to its ``.so``."""
    import ast

    spec = importlib.util.find_spec(module_name)
    if spec is None or not spec.origin:
        return []
    pyi = Path(spec.origin).with_name(module_name.rsplit(".", 1)[-1] + ".pyi")
    if not pyi.is_file():
        return []
    tree = ast.parse(pyi.read_text(encoding="utf-8"))
    parts = path.split(".")
    scope = tree.body
    for part in parts[:-1]:
        scope = next((n.body for n in scope if isinstance(n, ast.ClassDef) and n.name == part), [])
    out = []
    for node in scope:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == parts[-1]:
            out.append(_sig_from_text(ast.unparse(node.args)))
    return out


def _signatures(owner, obj, name: str, module_name: str, path: str) -> tuple[list[inspect.Signature], str]:
    try:
        return [inspect.signature(obj)], "inspect.signature"
    except (TypeError, ValueError):
        pass
    sigs = _docstring_sigs(obj, "__init__" if inspect.isclass(obj) else name)
    if not sigs and inspect.isclass(obj):
        sigs = _docstring_sigs(obj.__init__, "__init__")
    if sigs:
        return sigs, "pybind11 docstring"
    sigs = _pyi_sigs(module_name, path if not inspect.isclass(obj) else f"{path}.__init__")
    return sigs, ".pyi stub"


def _annotation_text(annotation) -> str:
    if annotation is inspect.Parameter.empty:
        return ""
    return annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))


def _bind(call, sigs: list[inspect.Signature], drop_self: bool) -> str | None:
    """None when one signature accepts the adapter's call, else why not."""
    problems = []
    for sig in sigs:
        params = list(sig.parameters.values())
        if drop_self and params and params[0].name in ("self", "cls"):
            sig = sig.replace(parameters=params[1:])
        try:
            bound = sig.bind(*[object()] * call.nargs, **{k: object() for k in call.kwargs})
        except TypeError as exc:
            problems.append(f"({', '.join(map(str, sig.parameters.values()))}) rejects {call.nargs} positional "
                            f"and {list(call.kwargs)}: {exc}")
            continue
        wrong = []
        for pname, tname in call.types:
            param = sig.parameters.get(pname)
            if param is None or pname not in bound.arguments:
                wrong.append(f"no parameter '{pname}' receives an argument")
                continue
            text = _annotation_text(param.annotation)
            if text and not re.search(rf"\b{re.escape(tname.split('.')[-1])}\b", text):
                wrong.append(f"{pname} is annotated '{text}', the adapter passes {tname}")
        if not wrong:
            return None
        problems.append("; ".join(wrong))
    return " | ".join(problems) or "no signature found"


# ----------------------------------------------------------------------------- the check


def check() -> dict:
    sys.path.insert(0, str(ROOT / "exts" / "vlnverse"))
    from vlnverse.sim.isaac.adapter import CALLS
    import importlib.metadata as md

    try:
        version = md.version("isaacsim")
    except md.PackageNotFoundError:
        version = None
    import isaacsim  # bootstraps the Kit kernel (no GPU); sys.exit on a broken install

    root = Path(isaacsim.__file__).resolve().parent
    if version is None and (root / "VERSION").is_file():
        version = (root / "VERSION").read_text().split("-")[0].strip()
    major = int(str(version).split(".")[0]) if version else None
    _lay_out(isaacsim, _ext_folders(root))
    _start_kernel()

    missing, forced = _StubFinder(forced=False), _StubFinder(forced=True)
    sys.meta_path.append(missing)
    sys.meta_path.insert(0, forced)

    loaded, unavailable, mismatches, sources, checked, skipped = {}, [], [], {}, 0, []
    for call in CALLS:
        if major is not None and major not in call.versions:
            skipped.append(call.symbol)
            continue
        if call.module not in loaded:
            if isinstance(sys.modules.get(call.module), _StubModule):
                so = forced.files.get(call.module)
                pyi = Path(so).with_name(call.module.rsplit(".", 1)[-1] + ".pyi") if so else None
                if pyi is not None and pyi.is_file():
                    loaded[call.module] = _module_from_pyi(call.module, pyi, missing, forced)
                else:
                    loaded[call.module] = f"module {call.module} is not in the installed packages"
            else:
                try:
                    loaded[call.module] = _import_with_stubs(call.module, missing, forced)
                except ModuleNotFoundError as exc:
                    loaded[call.module] = f"module {exc.name} is not in the installed packages"
                except Exception as exc:  # noqa: BLE001 - a module that exists but fails to import
                    if os.environ.get("CHECK_ISAAC_API_DEBUG"):
                        import traceback

                        with open(os.environ["CHECK_ISAAC_API_DEBUG"], "a") as dbg:
                            traceback.print_exc(file=dbg)
                    loaded[call.module] = f"import failed: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        module = loaded[call.module]
        if not isinstance(module, str) and call.module.split(".")[0] == "pxr" and not _kits_pxr(module):
            module = loaded[call.module] = (f"{call.module} here is {_owner(module)}'s pip OpenUSD, not Kit's USD "
                                            "(omni.usd.libs, only in the placeholder isaacsim-extscache-kit)")
        if isinstance(module, str):
            unavailable.append({"symbol": call.symbol, "reason": module})
            continue
        checked += 1
        problem = _check_one(call, module, sources)
        if problem:
            mismatches.append({"symbol": call.symbol, "problem": problem})
    files = {name: getattr(m, "__file__", None) for name, m in loaded.items() if not isinstance(m, str)}
    return {"isaac_version": version, "checked": checked, "module_files": files, "mismatches": mismatches, "unavailable": unavailable,
            "skipped_other_versions": skipped, "stubbed": sorted(missing.stubbed | forced.stubbed), "sources": sources,
            "python": sys.version.split()[0]}


def _owner(module) -> str:
    """The pip distribution that installed ``module``'s file (or its path)."""
    import importlib.metadata as md

    where = os.path.realpath(getattr(module, "__file__", "") or "")
    for dist in md.distributions():
        for f in dist.files or ():
            if os.path.realpath(str(dist.locate_file(f))) == where:
                return dist.metadata["Name"]
    return where


def _kits_pxr(module) -> bool:
    """Whether ``module`` is Kit's USD (from an extension folder), not a pip OpenUSD build."""
    return "omni.usd.libs" in (getattr(module, "__file__", "") or "")


def _check_one(call, module, sources: dict) -> str | None:
    owner, obj = module, module
    parts = call.path.split(".")
    for i, part in enumerate(parts):
        owner = obj
        try:
            obj = inspect.getattr_static(owner, part) if inspect.isclass(owner) else getattr(owner, part)
        except AttributeError:
            return f"{'.'.join(parts[:i + 1])} is not defined in {module.__name__}"
        if isinstance(obj, _StubMeta) or isinstance(type(obj), _StubMeta):
            return f"{'.'.join(parts[:i + 1])} resolves only to a stub of a missing dependency"
    kind = call.kind
    if kind == "property":
        if not isinstance(obj, (property, types.GetSetDescriptorType, types.MemberDescriptorType)) \
                and type(obj).__name__ not in ("property", "pybind11_property"):
            return f"expected a property, found {type(obj).__name__}"
        sources[call.symbol] = "property" + (" (.pyi stub)" if str(getattr(module, "__file__", "")).endswith(".pyi") else "")
        return None
    if kind == "type":
        return None if inspect.isclass(obj) else f"expected a class, found {type(obj).__name__}"
    if kind == "class" and not inspect.isclass(obj):
        return f"expected a class, found {type(obj).__name__}"
    if kind == "classmethod":
        if not isinstance(obj, (classmethod, staticmethod)) and not inspect.isbuiltin(obj) \
                and type(obj).__name__ not in ("builtin_function_or_method", "function"):
            return f"expected a class method, found {type(obj).__name__}"
        obj = getattr(owner, parts[-1])
    drop_self = False
    if kind == "call" and inspect.isclass(owner):
        if isinstance(obj, staticmethod):
            obj = obj.__func__
        elif isinstance(obj, classmethod):
            obj = getattr(owner, parts[-1])
        else:
            drop_self = True  # an instance method looked up on its class: its signature has self
    if kind == "class":
        init = inspect.getattr_static(obj, "__init__", None)
        if inspect.isfunction(init):
            obj, drop_self = init, True
    sigs, how = _signatures(owner, obj, parts[-1], module.__name__, call.path)
    if str(getattr(module, "__file__", "")).endswith(".pyi"):
        how = ".pyi stub"  # the compiled module cannot load here; its shipped type stub was read
    sources[call.symbol] = how
    if not sigs:
        return "no signature found (no inspect.signature, pybind11 docstring or .pyi stub)"
    if how != "inspect.signature":
        drop_self = True
    return _bind(call, sigs, drop_self)


if __name__ == "__main__":
    sys.exit(main())
