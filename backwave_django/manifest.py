"""The Job Manifest: every registered wire name with its queue and handler, as a committed text file.

A rename or a removed handler then shows up as a diff in review, not as quarantined jobs in production.
"""

from __future__ import annotations

from pathlib import Path

from .registry import Registry

HEADER = "# backwave job manifest: wire-name  queue  handler. Regenerate: manage.py backwave_manifest\n"


def render(registry: Registry) -> str:
    lines = [f"{r.wire_name}  {r.queue}  {r.handler_path}\n" for r in registry.all()]
    return HEADER + "".join(lines)


def parse(text: str) -> dict[str, str]:
    """Wire name to the rest of its line."""
    entries = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            wire_name, _, rest = line.partition("  ")
            entries[wire_name] = rest.strip()
    return entries


def differences(registry: Registry, path: Path) -> list[str]:
    """What differs between the registry and the file, one human line each; empty when they agree."""
    if not path.exists():
        return [f"{path} does not exist; run manage.py backwave_manifest to write it"]
    on_file, current = parse(path.read_text(encoding="utf-8")), parse(render(registry))
    found = [
        f"- {name}  {on_file[name]}  (in the file, no longer registered)"
        for name in on_file
        if name not in current
    ]
    found += [
        f"+ {name}  {current[name]}  (registered, not in the file)" for name in current if name not in on_file
    ]
    found += [
        f"~ {name}: file says {on_file[name]!r}, registry says {current[name]!r}"
        for name in current
        if name in on_file and on_file[name] != current[name]
    ]
    return sorted(found, key=lambda line: line[2:])
