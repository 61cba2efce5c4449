"""The ``--hosts`` inventory of the ssh backend: which machines, how to reach them.

A YAML file checked like a topology (pydantic, ``file:line:col`` diagnostics, "did
you mean" for unknown keys)::

    defaults: {user: root, known_hosts: /tmp/topo/known_hosts, key: keys/id_ed25519}
    launcher_address: 10.213.0.1
    hosts:
      h1: {address: 10.213.0.11, labels: [gpu], capacity: 4, accelerators: {gpu: 2}}
      h2: {address: 10.213.0.12}

``defaults`` applies to every host and a host overrides any of its fields (``env`` is
merged, the host's variables winning). Relative ``key`` and ``known_hosts`` paths are
relative to the inventory file. Imports no SSH library.
"""

from __future__ import annotations

import getpass
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from topo.diagnostics import Diagnostic, SourcePos, TopoError
from topo.syntax.source import SourceMap, read_document
from topo.syntax.validation import diagnostics_from

DEFAULT_WORKDIR = "/tmp/topo-work"
DEFAULT_PORT = 22
HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")

__all__ = ["DEFAULT_WORKDIR", "HostSpec", "Inventory", "load_inventory", "write_inventory"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class HostDefaults(_Model):
    """Connection and process settings shared by every host (each may override them)."""

    user: str | None = Field(None, min_length=1, description="SSH user (default: yours).")
    port: int | None = Field(None, ge=1, le=65535, description="SSH port (default 22).")
    key: str | None = Field(
        None, min_length=1, description="Private key file (default: ssh's own keys)."
    )
    known_hosts: str | None = Field(
        None, min_length=1, description="known_hosts file (required: host keys are checked)."
    )
    python: str | None = Field(
        None, min_length=1, description="Absolute path of the hosts' python (default: ours)."
    )
    workdir: str | None = Field(
        None, min_length=1, description=f"Absolute directory for runs (default {DEFAULT_WORKDIR})."
    )
    env: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="Environment variables of every process on the host."
    )


class HostEntry(HostDefaults):
    """One host of the inventory."""

    address: str = Field(min_length=1, description="Address (or DNS name) to SSH to.")
    labels: list[str] = Field(
        default_factory=list, description="Labels groups ask for in resources.host_labels."
    )
    capacity: int | None = Field(
        None, ge=1, description="Most executables placed on this host (default: no limit)."
    )
    accelerators: dict[Literal["gpu", "tpu"], Annotated[int, Field(ge=0)]] = Field(
        default_factory=dict,
        description="The host's accelerators by kind, e.g. {gpu: 4}: devices 0-3 of each "
        "kind, given to the groups that ask (resources.accelerators).",
    )


class InventoryFile(_Model):
    """The inventory file as written."""

    defaults: HostDefaults | None = Field(None, description="Settings for every host.")
    launcher_address: str | None = Field(
        None, min_length=1, description="Address hosts reach the launcher's registry at."
    )
    hosts: dict[str, HostEntry] = Field(min_length=1, description="Host name -> host.")


@dataclass(frozen=True)
class HostSpec:
    """One host, defaults applied and paths resolved: everything needed to reach it and
    start processes there."""

    name: str
    address: str
    port: int
    user: str
    key: Path | None
    known_hosts: Path
    python: str
    workdir: str
    labels: tuple[str, ...] = ()
    capacity: int | None = None
    env: dict[str, str] = field(default_factory=dict, hash=False)
    origin: SourcePos | None = field(default=None, compare=False)  # the host's key in the file
    accelerators: dict[str, int] = field(default_factory=dict, hash=False)  # kind -> count


@dataclass(frozen=True)
class Inventory:
    """The hosts of an inventory in file order, and where the launcher is reachable."""

    hosts: tuple[HostSpec, ...]
    launcher_address: str | None = None
    path: Path | None = None

    def host(self, name: str) -> HostSpec:
        """The host called ``name`` (KeyError naming the known hosts if absent)."""
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(f"no host {name!r} in the inventory (hosts: {', '.join(self.names)})")

    @property
    def names(self) -> tuple[str, ...]:
        """Host names in file order."""
        return tuple(h.name for h in self.hosts)


def _env_value(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"  # as the compiler writes a group's resources.env
    return str(value)


class _Resolver:
    """Applies defaults to one host and checks what pydantic cannot (paths, absolutes)."""

    def __init__(self, data: InventoryFile, sources: SourceMap, base: Path) -> None:
        self.defaults = data.defaults or HostDefaults()
        self.sources = sources
        self.base = base
        self.errors: list[Diagnostic] = []

    def _pick(self, name: str, entry: HostEntry, key: str) -> tuple[Any, SourcePos | None]:
        """The value of ``key`` for host ``name`` (its own, else the default) and where it
        was written."""
        if key in entry.model_fields_set and getattr(entry, key) is not None:
            return getattr(entry, key), self.sources.pos(("hosts", name, key))
        return getattr(self.defaults, key), self.sources.pos(("defaults", key))

    def _file(self, name: str, entry: HostEntry, key: str) -> Path | None:
        value, where = self._pick(name, entry, key)
        if value is None:
            return None
        path = Path(value).expanduser()
        path = path if path.is_absolute() else self.base / path
        if not path.is_file():
            self.errors.append(
                Diagnostic(f"{key}: no such file {value} (looked for {path})", where)
            )
        return path

    def _absolute(self, name: str, entry: HostEntry, key: str, default: str) -> str:
        value, where = self._pick(name, entry, key)
        if value is None:
            return default
        if not PurePosixPath(value).is_absolute():
            self.errors.append(
                Diagnostic(
                    f"{key} must be an absolute path on the host, got {value!r}",
                    where,
                    f"for example: {default}",
                )
            )
        return str(value)

    def host(self, name: str, entry: HostEntry) -> HostSpec | None:
        """The resolved host, or None after recording why it cannot be."""
        where = self.sources.pos(("hosts", name), key=True)
        if not HOST_NAME.match(name):
            self.errors.append(
                Diagnostic(
                    f"host name {name!r} must start with a letter or digit and contain only "
                    "letters, digits, '.', '_' and '-'",
                    where,
                )
            )
        key = self._file(name, entry, "key")
        known_hosts = self._file(name, entry, "known_hosts")
        if known_hosts is None:
            self.errors.append(
                Diagnostic(
                    f"host '{name}' has no known_hosts file (host keys are always checked)",
                    where,
                    "set known_hosts under defaults or on the host, e.g. "
                    "known_hosts: ~/.ssh/known_hosts",
                )
            )
        python = self._absolute(name, entry, "python", sys.executable)
        workdir = self._absolute(name, entry, "workdir", DEFAULT_WORKDIR)
        env = {k: _env_value(v) for k, v in {**self.defaults.env, **entry.env}.items()}
        if known_hosts is None:
            return None
        return HostSpec(
            name=name,
            address=entry.address,
            port=self._pick(name, entry, "port")[0] or DEFAULT_PORT,
            user=self._pick(name, entry, "user")[0] or getpass.getuser(),
            key=key,
            known_hosts=known_hosts,
            python=python,
            workdir=workdir,
            labels=tuple(dict.fromkeys(entry.labels)),
            capacity=entry.capacity,
            env=env,
            origin=where,
            accelerators={k: n for k, n in entry.accelerators.items() if n},
        )


def load_inventory(path: Path | str) -> Inventory:
    """Read and check an inventory file; every problem found is one diagnostic of the
    ``TopoError`` raised."""
    path = Path(path)
    if path.is_dir():
        raise TopoError.one(f"{path} is a directory, not an inventory file")
    doc = read_document(path)
    if not isinstance(doc.data, dict):
        raise TopoError.one(
            "an inventory file must be a mapping with at least 'hosts'", doc.sources.pos(())
        )
    try:
        data = InventoryFile.model_validate(doc.data)
    except ValidationError as exc:
        raise TopoError(diagnostics_from(exc, doc.data, doc.sources, InventoryFile)) from None
    resolver = _Resolver(data, doc.sources, path.resolve().parent)
    hosts: list[HostSpec] = []
    seen: dict[tuple[str, int], str] = {}
    for name, entry in data.hosts.items():
        host = resolver.host(name, entry)
        if host is None:
            continue
        first = seen.setdefault((host.address, host.port), name)
        if first != name:
            resolver.errors.append(
                Diagnostic(
                    f"hosts '{first}' and '{name}' are both {host.address} port {host.port}",
                    doc.sources.pos(("hosts", name, "address")),
                    "each host must be a different machine (or SSH port)",
                )
            )
        hosts.append(host)
    if resolver.errors:  # a bad default is reported once, not once per host
        raise TopoError(list(dict.fromkeys(resolver.errors)))
    return Inventory(tuple(hosts), data.launcher_address, path)


def write_inventory(
    path: Path | str,
    hosts: list[tuple[str, str]],
    *,
    launcher_address: str | None = None,
    **defaults: Any,
) -> Path:
    """Write an inventory of ``(name, address)`` hosts sharing ``defaults`` (e.g. the test
    hosts of a CI run); returns the path."""
    from ruamel.yaml import YAML

    path = Path(path)
    data: dict[str, Any] = {}
    if defaults:
        data["defaults"] = {k: str(v) if isinstance(v, Path) else v for k, v in defaults.items()}
    if launcher_address is not None:
        data["launcher_address"] = launcher_address
    data["hosts"] = {name: {"address": address} for name, address in hosts}
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    with path.open("w", encoding="utf-8") as fh:
        yaml.dump(data, fh)
    return path
